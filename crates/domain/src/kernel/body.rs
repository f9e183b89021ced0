//! Request bodies as typed structs. Each body is one `#[derive(Deserialize, ToSchema)]`
//! struct: serde reads it, utoipa documents it, and its `validate` pass checks it and builds
//! the use case's input, reporting every problem at once (422), each on its dotted path in the
//! body (`subscription.line_items[0].quantity`).
//!
//! So that one wrong field does not hide the others, every field of a body struct is a
//! [`Field`]: reading it never fails. A field left out or null is [`Field::Absent`] (or
//! [`Field::Null`], for the updates where null clears a value); a value of the wrong type is
//! kept as [`Field::Invalid`] and reported by the validate pass, under the field's path.
//!
//! What clients rely on, read the same everywhere (see [`FieldValue`]): integers and numbers
//! may come as their decimal text (`"12"`), text is trimmed and a blank one counts as left
//! out (but is told from it where an update clears a value), platform ids may come as integers ([`TextId`]), unknown fields are ignored.
//!
//! Each body field carries `#[serde(default)]` and names its documented type in
//! `#[schema(value_type = …)]` (`Option<…>` for an optional field; the bare type with
//! `required = true` for one whose absence is a `required` problem). Where a create needs
//! fields its update does not, they are two structs with the same fields (`BoxFields`,
//! `BoxUpdateFields`): OpenAPI's `required` list belongs to a schema, and generated clients
//! read it. The update converts into the create struct (`From`), so one validate pass checks
//! both.

use std::collections::BTreeMap;

use serde::de::{DeserializeOwned, Deserializer};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use crate::kernel::error::{DomainError, FieldError, Problems};
use crate::kernel::time::Timestamp;

/// One field of a request body as the client sent it.
#[derive(Debug, Clone, Default, PartialEq)]
pub enum Field<T> {
    /// Left out.
    #[default]
    Absent,
    /// Given as `null`.
    Null,
    /// Given as blank text (only spaces, or empty).
    Blank,
    /// Given, and read as a `T`.
    Given(T),
    /// Given, but not a `T`: reported by the validate pass.
    Invalid(Mismatch),
}

/// Why a given value is not what its field holds: the problem's code and what the value must
/// be ("an integer"), for the message "`field` must be an integer".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mismatch {
    /// The problem's code (`invalid_type`, `invalid_date`).
    pub code: &'static str,
    /// What the value must be, completing "`field` must be …".
    pub expected: &'static str,
}

impl Mismatch {
    /// The problem on the field at `path`.
    pub fn at(self, path: String) -> FieldError {
        let message = format!("{path} must be {}", self.expected);
        FieldError::new(path, self.code, message)
    }
}

/// The usual type problem: the value is not `expected`.
pub(crate) const fn wrong_type(expected: &'static str) -> Mismatch {
    Mismatch {
        code: "invalid_type",
        expected,
    }
}

impl<T> Field<T> {
    /// Whether the client gave the field a value (right, wrong or blank; null is no value).
    pub fn is_given(&self) -> bool {
        matches!(self, Field::Given(_) | Field::Invalid(_) | Field::Blank)
    }

    /// Whether the field was left out entirely (not even null).
    pub fn is_absent(&self) -> bool {
        matches!(self, Field::Absent)
    }

    /// The value, when given and read.
    pub fn value(&self) -> Option<&T> {
        match self {
            Field::Given(value) => Some(value),
            _ => None,
        }
    }

    /// The value, when given and read (a mismatch is dropped unreported: for fields another
    /// field's check already covers).
    pub fn into_value(self) -> Option<T> {
        match self {
            Field::Given(value) => Some(value),
            _ => None,
        }
    }
}

/// A type a body field can hold: how it is read from the JSON value the client gave.
pub trait FieldValue: Sized {
    /// Reads a value that is not null: [`Field::Given`], [`Field::Invalid`] when it is not a
    /// `Self`, or [`Field::Blank`] for blank text.
    fn read(value: Value) -> Field<Self>;
}

impl<'de, T: FieldValue> Deserialize<'de> for Field<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Ok(match Value::deserialize(deserializer)? {
            Value::Null => Field::Null,
            value => T::read(value),
        })
    }
}

/// Text, trimmed; blank text is [`Field::Blank`].
impl FieldValue for String {
    fn read(value: Value) -> Field<Self> {
        match value {
            Value::String(text) => {
                let trimmed = text.trim();
                if trimmed.is_empty() {
                    Field::Blank
                } else if trimmed.len() == text.len() {
                    Field::Given(text)
                } else {
                    Field::Given(trimmed.to_string())
                }
            }
            _ => Field::Invalid(wrong_type("a string")),
        }
    }
}

/// An integer, as a JSON number or its decimal text (`12`, `"12"`): clients written in every
/// language send ids both ways.
impl FieldValue for i64 {
    fn read(value: Value) -> Field<Self> {
        let read = match &value {
            Value::String(text) => text.trim().parse().ok(),
            value => value.as_i64(),
        };
        read.map_or(Field::Invalid(wrong_type("an integer")), Field::Given)
    }
}

/// A finite number, as a JSON number or its decimal text (`0.5`, `"0.5"`).
impl FieldValue for f64 {
    fn read(value: Value) -> Field<Self> {
        let read = match &value {
            Value::String(text) => text.trim().parse::<f64>().ok(),
            value => value.as_f64(),
        };
        read.filter(|number| number.is_finite())
            .map_or(Field::Invalid(wrong_type("a number")), Field::Given)
    }
}

/// `true` or `false`.
impl FieldValue for bool {
    fn read(value: Value) -> Field<Self> {
        value
            .as_bool()
            .map_or(Field::Invalid(wrong_type("a boolean")), Field::Given)
    }
}

/// An RFC 3339 date-time (`2024-03-01T10:30:00Z`).
impl FieldValue for Timestamp {
    fn read(value: Value) -> Field<Self> {
        let read = match &value {
            Value::String(text) => Timestamp::parse_rfc3339(text.trim()),
            _ => None,
        };
        read.map_or(
            Field::Invalid(Mismatch {
                code: "invalid_date",
                expected: "an RFC 3339 date-time of the years 0000 to 9999 (in UTC) such as \
                           2024-03-01T10:30:00Z",
            }),
            Field::Given,
        )
    }
}

/// A calendar date, `YYYY-MM-DD` exactly (`2024-03-01`).
impl FieldValue for chrono::NaiveDate {
    fn read(value: Value) -> Field<Self> {
        let read = match &value {
            Value::String(text) => {
                let text = text.trim();
                let shaped = text.len() == 10
                    && text.char_indices().all(|(i, c)| match i {
                        4 | 7 => c == '-',
                        _ => c.is_ascii_digit(),
                    });
                shaped
                    .then(|| chrono::NaiveDate::parse_from_str(text, "%Y-%m-%d").ok())
                    .flatten()
            }
            _ => None,
        };
        match (read, &value) {
            (Some(date), _) => Field::Given(date),
            (None, Value::String(text)) if text.trim().is_empty() => Field::Blank,
            _ => Field::Invalid(Mismatch {
                code: "invalid_date",
                expected: "a date written YYYY-MM-DD, such as 2024-03-01",
            }),
        }
    }
}

/// A platform's id: text, or an integer kept as its decimal text (platforms number some of
/// their ids).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
#[serde(transparent)]
pub struct TextId(pub String);

impl FieldValue for TextId {
    fn read(value: Value) -> Field<Self> {
        match value {
            Value::Number(number) if number.is_i64() || number.is_u64() => {
                Field::Given(TextId(number.to_string()))
            }
            Value::Number(_) => Field::Invalid(wrong_type("a string or an integer")),
            value => match String::read(value) {
                Field::Given(text) => Field::Given(TextId(text)),
                Field::Invalid(mismatch) => Field::Invalid(mismatch),
                _ => Field::Blank,
            },
        }
    }
}

/// The text a value of an object of texts writes: a string as it is (not trimmed), a number or
/// a boolean as its JSON text (`"subscription_group_id": 42` keeps `"42"`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LooseText(pub String);

impl FieldValue for LooseText {
    fn read(value: Value) -> Field<Self> {
        match value {
            Value::String(text) => Field::Given(LooseText(text)),
            Value::Number(_) | Value::Bool(_) => Field::Given(LooseText(value.to_string())),
            _ => Field::Invalid(wrong_type("a string")),
        }
    }
}

/// Text exactly as given: not trimmed, and blank text kept (a tag, a SKU, a note stored as the
/// client wrote it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawText(pub String);

impl FieldValue for RawText {
    fn read(value: Value) -> Field<Self> {
        match value {
            Value::String(text) => Field::Given(RawText(text)),
            _ => Field::Invalid(wrong_type("a string")),
        }
    }
}

/// A JSON array, each element read on its own (a wrong element is that element's problem).
impl<T: FieldValue> FieldValue for Vec<Field<T>> {
    fn read(value: Value) -> Field<Self> {
        match value {
            Value::Array(items) => Field::Given(
                items
                    .into_iter()
                    .map(|item| match item {
                        Value::Null => Field::Null,
                        item => T::read(item),
                    })
                    .collect(),
            ),
            _ => Field::Invalid(wrong_type("an array")),
        }
    }
}

/// A JSON object of values of one type (`{"key": "value"}`), each read on its own.
impl<T: FieldValue> FieldValue for BTreeMap<String, Field<T>> {
    fn read(value: Value) -> Field<Self> {
        match value {
            Value::Object(map) => Field::Given(
                map.into_iter()
                    .map(|(key, item)| {
                        let item = match item {
                            Value::Null => Field::Null,
                            item => T::read(item),
                        };
                        (key, item)
                    })
                    .collect(),
            ),
            _ => Field::Invalid(wrong_type("an object")),
        }
    }
}

/// A body struct: a JSON object whose fields are all [`Field`]s with `#[serde(default)]`, so
/// that reading one never fails (its default is the struct read from `{}`).
pub trait BodyObject: DeserializeOwned + Default {}

impl<T: BodyObject> FieldValue for T {
    fn read(value: Value) -> Field<Self> {
        if !value.is_object() {
            return Field::Invalid(wrong_type("an object"));
        }
        // Every field is a `Field` with a default, so an object always reads.
        serde_json::from_value(value).map_or(Field::Invalid(wrong_type("an object")), Field::Given)
    }
}

/// The validate pass's view of one object of the body: its path, and where problems go.
pub struct Check<'p> {
    path: String,
    problems: &'p mut Problems,
}

/// The dotted path of field `name` inside `parent` (`parent.name`); just `name` at the root.
pub fn path(parent: &str, name: &str) -> String {
    if parent.is_empty() {
        name.to_string()
    } else {
        format!("{parent}.{name}")
    }
}

impl<'p> Check<'p> {
    /// The body itself (field paths are the body's own names), recording into `problems`.
    pub fn root(problems: &'p mut Problems) -> Self {
        Check {
            path: String::new(),
            problems,
        }
    }

    /// The path of this object in the body (empty for the body itself).
    pub fn here(&self) -> &str {
        &self.path
    }

    /// The path of field `name` of this object.
    pub fn field(&self, name: &str) -> String {
        path(&self.path, name)
    }

    /// The object at field `name` of this one.
    pub fn nested(&mut self, name: &str) -> Check<'_> {
        Check {
            path: self.field(name),
            problems: &mut *self.problems,
        }
    }

    /// Element `index` of the array at field `name` of this one.
    pub fn element(&mut self, name: &str, index: usize) -> Check<'_> {
        Check {
            path: format!("{}[{index}]", self.field(name)),
            problems: &mut *self.problems,
        }
    }

    /// Records a problem on field `name` of this object.
    pub fn problem(
        &mut self,
        name: &str,
        code: &'static str,
        message: impl FnOnce(&str) -> String,
    ) {
        let field = self.field(name);
        let message = message(&field);
        self.problems.push(FieldError::new(field, code, message));
    }

    /// Records a problem found by a check of its own (which names its field).
    pub fn push(&mut self, problem: FieldError) {
        self.problems.push(problem);
    }

    /// Records the error of a failed check, and gives back the value of a passed one.
    pub fn check<T>(&mut self, result: Result<T, FieldError>) -> Option<T> {
        self.problems.check(result)
    }

    /// Whether a problem was recorded on field `name` of this object.
    pub fn has_problem(&self, name: &str) -> bool {
        self.problems.has(&self.field(name))
    }

    /// The value of an optional field: none when left out or null; a mismatch is recorded.
    pub fn optional<T>(&mut self, name: &str, field: Field<T>) -> Option<T> {
        match field {
            Field::Given(value) => Some(value),
            Field::Invalid(mismatch) => {
                self.problems.push(mismatch.at(self.field(name)));
                None
            }
            Field::Absent | Field::Null | Field::Blank => None,
        }
    }

    /// The value of a required field: a `required` problem when left out, null or blank; a
    /// mismatch is recorded.
    pub fn required<T>(&mut self, name: &str, field: Field<T>) -> Option<T> {
        if matches!(field, Field::Absent | Field::Null | Field::Blank) {
            self.problems.push(FieldError::required(self.field(name)));
            return None;
        }
        self.optional(name, field)
    }

    /// [`Self::required`] when `needed`, else [`Self::optional`] (a field a create needs and
    /// an update may leave out).
    pub fn needed<T>(&mut self, name: &str, field: Field<T>, needed: bool) -> Option<T> {
        if needed {
            self.required(name, field)
        } else {
            self.optional(name, field)
        }
    }

    /// A field an update may set or clear: none when left out, `Some(None)` for null (or blank
    /// text), `Some(Some(value))` for a value. A mismatch is recorded, and the field left as it
    /// is.
    pub fn settable<T>(&mut self, name: &str, field: Field<T>) -> Option<Option<T>> {
        match field {
            Field::Absent => None,
            Field::Null | Field::Blank => Some(None),
            Field::Given(value) => Some(Some(value)),
            Field::Invalid(mismatch) => {
                self.problems.push(mismatch.at(self.field(name)));
                None
            }
        }
    }

    /// The first `max` of `items`, the array at field `name` of this one; when there are more,
    /// one `too_many` problem on it too (see [`at_most`]).
    pub fn at_most<T>(&mut self, name: &str, items: Vec<T>, max: usize) -> Vec<T> {
        at_most(&self.field(name), items, max, self.problems)
    }

    /// Checks the elements of the array of objects at field `name`, when given, each in turn at
    /// its own path (`name[2]`) with `read`: at most `max` of them (a longer array is one
    /// `too_many` problem, and its rest is not looked at). An element that is not an object is
    /// that element's problem, told in its place among the others'. Gives each element's result
    /// in order, `None` for one that did not read.
    pub fn each<T, R>(
        &mut self,
        name: &str,
        given: Field<Vec<Field<T>>>,
        max: usize,
        mut read: impl FnMut(&mut Check<'_>, T) -> Option<R>,
    ) -> Option<Vec<Option<R>>> {
        let items = self.optional(name, given)?;
        let items = self.at_most(name, items, max);
        let mut results = Vec::with_capacity(items.len());
        for (index, item) in items.into_iter().enumerate() {
            let mut element = self.element(name, index);
            let result = match item {
                Field::Given(value) => read(&mut element, value),
                Field::Invalid(mismatch) => {
                    let path = element.here().to_string();
                    element.push(mismatch.at(path));
                    None
                }
                Field::Absent | Field::Null | Field::Blank => {
                    let path = element.here().to_string();
                    element.push(wrong_type("an object").at(path));
                    None
                }
            };
            results.push(result);
        }
        Some(results)
    }
}

/// The first `max` of `items`, found at `field`; when there are more, one `too_many` problem on
/// `field` too. Every array of a body is cut through this, so that no body can make Mercer
/// check or report on more elements than the array may hold.
pub fn at_most<T>(field: &str, mut items: Vec<T>, max: usize, problems: &mut Problems) -> Vec<T> {
    if items.len() > max {
        let message = format!("{field} must hold at most {max} items");
        problems.push(FieldError::new(field, "too_many", message));
        items.truncate(max);
    }
    items
}

/// Reads `body` as the body struct `B` (a body that is not an object reads as an empty one)
/// and runs `validate` over it: its value when no problem was found, else every problem at
/// once (422).
pub fn read_body<B: BodyObject, T>(
    body: &Value,
    validate: impl FnOnce(B, &mut Check<'_>) -> Option<T>,
) -> Result<T, DomainError> {
    let fields = parse_object::<B>(body);
    let mut problems = Problems::new();
    let value = validate(fields, &mut Check::root(&mut problems));
    problems.into_result()?;
    value.ok_or_else(|| DomainError::invalid("body", "invalid_value", "the body could not be read"))
}

/// A body that carries its resource under one key (`{"box": {…}}`), or bare.
pub trait Wrapped: BodyObject {
    /// The resource's fields.
    type Fields: BodyObject;
    /// The key the resource comes under.
    const KEY: &'static str;
    /// The resource under the key, as given.
    fn resource(self) -> Field<Self::Fields>;
}

/// Reads the resource of the body `W` (under its key, or `body` itself when it has no such key)
/// and checks it with `validate`; every problem is reported at once.
pub fn read_resource<W: Wrapped, T>(
    body: &Value,
    validate: impl FnOnce(W::Fields, &mut Check<'_>) -> Option<T>,
) -> Result<T, DomainError> {
    let mut problems = Problems::new();
    let mut root = Check::root(&mut problems);
    let value = match parse_object::<W>(body).resource() {
        Field::Given(fields) => validate(fields, &mut root.nested(W::KEY)),
        Field::Absent => validate(parse_object::<W::Fields>(body), &mut root),
        Field::Null | Field::Blank | Field::Invalid(_) => {
            return Err(DomainError::Invalid(vec![
                wrong_type("an object").at(W::KEY.to_string()),
            ]));
        }
    };
    problems.into_result()?;
    value.ok_or_else(|| DomainError::invalid(W::KEY, "invalid_value", "the body could not be read"))
}

/// `value` read as the body struct `B`; an empty one when `value` is not an object.
pub fn parse_object<B: BodyObject>(value: &Value) -> B {
    let empty = Value::Object(serde_json::Map::new());
    let object = if value.is_object() { value } else { &empty };
    // Reading a body struct from an object cannot fail (every field is a defaulted `Field`);
    // should it ever, the struct with every field left out is used, and its checks report it.
    B::deserialize(object).unwrap_or_default()
}

/// Checks an email address: `invalid_email` on `field` when it is not one.
pub(crate) fn check_email(field: String, email: &str) -> Result<(), FieldError> {
    let ok = match email.split_once('@') {
        Some((local, host)) => {
            !local.is_empty()
                && host.contains('.')
                && !host.starts_with('.')
                && !host.ends_with('.')
                && !email.chars().any(char::is_whitespace)
        }
        None => false,
    };
    if ok {
        Ok(())
    } else {
        let message = format!("{field} must be an email address such as ada@example.test");
        Err(FieldError::new(field, "invalid_email", message))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A body with one field of each kind.
    #[derive(Debug, Default, Deserialize)]
    struct Sample {
        #[serde(default)]
        name: Field<String>,
        #[serde(default)]
        count: Field<i64>,
        #[serde(default)]
        rate: Field<f64>,
        #[serde(default)]
        flag: Field<bool>,
        #[serde(default)]
        at: Field<Timestamp>,
        #[serde(default)]
        id: Field<TextId>,
        #[serde(default)]
        texts: Field<BTreeMap<String, Field<LooseText>>>,
        #[serde(default)]
        items: Field<Vec<Field<Sample>>>,
    }
    impl BodyObject for Sample {}

    fn problems(
        body: Value,
        validate: impl FnOnce(Sample, &mut Check<'_>),
    ) -> Vec<(String, &'static str)> {
        let result = read_body::<Sample, _>(&body, |sample, check| {
            validate(sample, check);
            Some(())
        });
        match result {
            Ok(()) => Vec::new(),
            Err(DomainError::Invalid(problems)) => {
                problems.into_iter().map(|p| (p.field, p.code)).collect()
            }
            Err(other) => panic!("{other:?}"),
        }
    }

    #[test]
    fn values_are_read_leniently_where_the_meaning_is_clear() {
        let sample: Sample = parse_object(&json!({
            "name": "  Ada ", "count": "12", "rate": "0.5", "flag": true,
            "at": "2024-03-01T10:30:00Z", "id": 42, "texts": {"a": "x ", "b": 7, "c": false},
            "unknown": {"ignored": true}
        }));
        assert_eq!(sample.name, Field::Given("Ada".to_string()));
        assert_eq!(sample.count, Field::Given(12));
        assert_eq!(sample.rate, Field::Given(0.5));
        assert_eq!(sample.flag, Field::Given(true));
        assert!(sample.at.value().is_some());
        assert_eq!(sample.id, Field::Given(TextId("42".to_string())));
        let texts = sample.texts.into_value().unwrap();
        assert_eq!(texts["a"], Field::Given(LooseText("x ".to_string())));
        assert_eq!(texts["b"], Field::Given(LooseText("7".to_string())));
        assert_eq!(texts["c"], Field::Given(LooseText("false".to_string())));
    }

    #[test]
    fn left_out_null_blank_and_wrong_are_told_apart() {
        let sample: Sample =
            parse_object(&json!({"name": "  ", "count": null, "rate": "fast", "id": 1.5}));
        assert_eq!(sample.name, Field::Blank);
        assert_eq!(sample.count, Field::Null);
        assert_eq!(sample.flag, Field::Absent);
        assert_eq!(sample.rate, Field::Invalid(wrong_type("a number")));
        assert_eq!(
            sample.id,
            Field::Invalid(wrong_type("a string or an integer"))
        );
        // A body that is not an object reads as an empty one.
        let empty: Sample = parse_object(&json!([1, 2]));
        assert_eq!(empty.name, Field::Absent);
    }

    #[test]
    fn every_problem_is_reported_on_its_path_in_order() {
        let found = problems(
            json!({"count": "x", "flag": "yes", "at": "soon", "items": [{"count": []}, 3, null]}),
            |sample, check| {
                check.required("name", sample.name);
                check.optional("count", sample.count);
                check.optional("flag", sample.flag);
                check.optional("at", sample.at);
                check.each("items", sample.items, 10, |check, item| {
                    check.required("count", item.count)
                });
            },
        );
        assert_eq!(
            found,
            [
                ("name".to_string(), "required"),
                ("count".to_string(), "invalid_type"),
                ("flag".to_string(), "invalid_type"),
                ("at".to_string(), "invalid_date"),
                ("items[0].count".to_string(), "invalid_type"),
                ("items[1]".to_string(), "invalid_type"),
                ("items[2]".to_string(), "invalid_type"),
            ]
        );
    }

    #[test]
    fn an_array_over_its_limit_is_one_problem_and_its_rest_is_not_read() {
        let body = json!({"items": vec![json!({}); 100_000]});
        let found = problems(body, |sample, check| {
            let read = check.each("items", sample.items, 3, |check, item| {
                check.required("name", item.name)
            });
            assert_eq!(read.map(|read| read.len()), Some(3));
        });
        assert_eq!(
            found,
            [
                ("items".to_string(), "too_many"),
                ("items[0].name".to_string(), "required"),
                ("items[1].name".to_string(), "required"),
                ("items[2].name".to_string(), "required"),
            ]
        );
    }

    #[test]
    fn an_update_tells_a_cleared_field_from_one_left_out() {
        let mut problems = Problems::new();
        let mut check = Check::root(&mut problems);
        assert_eq!(check.settable::<String>("a", Field::Absent), None);
        assert_eq!(check.settable::<String>("a", Field::Null), Some(None));
        assert_eq!(check.settable::<String>("a", Field::Blank), Some(None));
        assert_eq!(check.settable("a", Field::Given(1)), Some(Some(1)));
        assert_eq!(
            check.settable::<i64>("b", Field::Invalid(wrong_type("an integer"))),
            None
        );
        assert!(problems.has("b") && problems.len() == 1);
    }
}
