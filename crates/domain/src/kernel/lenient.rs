//! Serde readers for what remote parties answer (override servers, connectors): they are
//! written in every language, and many send a number as its decimal text (`"125"`, `"0.05"`)
//! or a boolean as `"true"`. Each reader takes the JSON type and its text alike, and refuses
//! only what has no clear meaning, with a message saying what was expected.

use serde::Deserialize;
use serde::de::{Deserializer, Error};
use serde_json::Value;

fn expected<E: Error>(what: &str, found: &Value) -> E {
    E::custom(format!("expected {what}, found {found}"))
}

/// A count or an amount in minor units: `125`, `"125"`, `125.0`.
fn unsigned_of<E: Error>(value: &Value) -> Result<u64, E> {
    let read = match value {
        Value::Number(number) => number.as_u64().or_else(|| {
            number
                .as_f64()
                .filter(|n| n.fract() == 0.0 && *n >= 0.0 && *n <= u64::MAX as f64)
                .map(|n| n as u64)
        }),
        Value::String(text) => text.trim().parse::<u64>().ok(),
        _ => None,
    };
    read.ok_or_else(|| expected("a whole number of at least 0", value))
}

/// A whole number of at least 0, as a JSON number or its decimal text.
pub(crate) fn unsigned<'de, D: Deserializer<'de>>(deserializer: D) -> Result<u64, D::Error> {
    unsigned_of(&Value::deserialize(deserializer)?)
}

/// [`unsigned`], or none when left out or null (use with `#[serde(default)]`).
pub(crate) fn optional_unsigned<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<u64>, D::Error> {
    match Value::deserialize(deserializer)? {
        Value::Null => Ok(None),
        value => unsigned_of(&value).map(Some),
    }
}

/// A finite number, as a JSON number or its decimal text (`0.05`, `"0.05"`).
pub fn number<'de, D: Deserializer<'de>>(deserializer: D) -> Result<f64, D::Error> {
    let value = Value::deserialize(deserializer)?;
    let read = match &value {
        Value::Number(number) => number.as_f64(),
        Value::String(text) => text.trim().parse::<f64>().ok(),
        _ => None,
    };
    read.filter(|n| n.is_finite())
        .ok_or_else(|| expected("a number", &value))
}

/// A boolean, as `true`/`false` or their text in any case.
pub fn boolean<'de, D: Deserializer<'de>>(deserializer: D) -> Result<bool, D::Error> {
    let value = Value::deserialize(deserializer)?;
    match &value {
        Value::Bool(flag) => Ok(*flag),
        Value::String(text) if text.trim().eq_ignore_ascii_case("true") => Ok(true),
        Value::String(text) if text.trim().eq_ignore_ascii_case("false") => Ok(false),
        _ => Err(expected("true or false", &value)),
    }
}

/// A text, given as a JSON string or as a number (an id: `7`, `"7"`).
pub fn text<'de, D: Deserializer<'de>>(deserializer: D) -> Result<String, D::Error> {
    let value = Value::deserialize(deserializer)?;
    match value {
        Value::String(text) => Ok(text),
        Value::Number(number) => Ok(number.to_string()),
        other => Err(expected("a string or a number", &other)),
    }
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;

    #[derive(Debug, Deserialize)]
    struct Answer {
        #[serde(deserialize_with = "super::unsigned")]
        amount: u64,
        #[serde(deserialize_with = "super::number")]
        rate: f64,
        #[serde(deserialize_with = "super::boolean")]
        valid: bool,
        #[serde(default, deserialize_with = "super::optional_unsigned")]
        quantity: Option<u64>,
        #[serde(deserialize_with = "super::text")]
        id: String,
    }

    fn read(body: &str) -> Result<Answer, String> {
        serde_json::from_str(body).map_err(|error| error.to_string())
    }

    #[test]
    fn numbers_and_booleans_are_read_as_json_or_as_text() {
        let typed = read(r#"{"amount":125,"rate":0.05,"valid":true,"quantity":3,"id":7}"#).unwrap();
        let texts =
            read(r#"{"amount":"125","rate":"0.05","valid":"TRUE","quantity":"3","id":"7"}"#)
                .unwrap();
        for answer in [typed, texts] {
            assert_eq!(
                (answer.amount, answer.rate, answer.valid, answer.quantity),
                (125, 0.05, true, Some(3))
            );
            assert_eq!(answer.id, "7");
        }
        let whole = read(r#"{"amount":125.0,"rate":1,"valid":false,"id":"a"}"#).unwrap();
        assert_eq!((whole.amount, whole.quantity), (125, None));
    }

    #[test]
    fn what_has_no_clear_meaning_is_refused() {
        for (body, why) in [
            (
                r#"{"amount":-5,"rate":0,"valid":true,"id":"a"}"#,
                "whole number",
            ),
            (
                r#"{"amount":"12.5","rate":0,"valid":true,"id":"a"}"#,
                "whole number",
            ),
            (
                r#"{"amount":1,"rate":"five","valid":true,"id":"a"}"#,
                "a number",
            ),
            (
                r#"{"amount":1,"rate":0,"valid":"yes","id":"a"}"#,
                "true or false",
            ),
            (
                r#"{"amount":1,"rate":0,"valid":true,"id":null}"#,
                "a string or a number",
            ),
        ] {
            let error = read(body).unwrap_err();
            assert!(error.contains(why), "{body}: {error}");
        }
    }
}
