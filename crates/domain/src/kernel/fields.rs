//! Reading a JSON body field by field: each problem recorded as a [`FieldError`] under its path
//! in the body (`subscription.line_items[0].quantity`), all of them reported at once (422).
//! Subscriptions and checkout read their bodies with it.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use crate::kernel::error::{DomainError, FieldError, Problems};
use crate::kernel::time::Timestamp;

pub use crate::kernel::body::path;

pub(crate) fn type_error(field: String, expected: &str) -> FieldError {
    let message = format!("{field} must be {expected}");
    FieldError::new(field, "invalid_type", message)
}

/// Reads the fields of one JSON object, recording each problem under its path.
pub struct Fields<'a, 'p> {
    /// The dotted path of this object in the body; empty for the body itself.
    pub path: String,
    /// The object's fields.
    pub map: &'a Map<String, Value>,
    /// Where the problems found are recorded (shared with the enclosing objects).
    pub problems: &'p mut Problems,
}

impl<'a> Fields<'a, '_> {
    /// The path of field `name` of this object, for its problems.
    pub fn field(&self, name: &str) -> String {
        path(&self.path, name)
    }

    /// The value, when present and not null.
    pub fn get(&self, name: &str) -> Option<&'a Value> {
        self.map.get(name).filter(|value| !value.is_null())
    }

    /// A string, trimmed, when present and not blank; a type problem when it is not a string.
    pub fn text(&mut self, name: &str) -> Option<String> {
        match self.get(name)? {
            Value::String(text) => Some(text.trim().to_string()).filter(|text| !text.is_empty()),
            _ => {
                self.problems.push(type_error(self.field(name), "a string"));
                None
            }
        }
    }

    /// A string, trimmed; a `required` problem when it is missing, null or blank.
    pub fn required_text(&mut self, name: &str) -> Option<String> {
        match self.get(name) {
            Some(Value::String(_)) => {
                let text = self.text(name);
                if text.is_none() {
                    self.problems.push(FieldError::required(self.field(name)));
                }
                text
            }
            Some(_) => self.text(name),
            None => {
                self.problems.push(FieldError::required(self.field(name)));
                None
            }
        }
    }

    /// Whether the field is there but not a string (its problem is recorded when it is read).
    pub fn is_not_text(&self, name: &str) -> bool {
        self.get(name).is_some_and(|value| !value.is_string())
    }

    /// A platform id: a string, or an integer kept as its decimal text.
    pub fn required_id(&mut self, name: &str) -> Option<String> {
        match self.get(name) {
            Some(Value::Number(number)) if number.is_i64() || number.is_u64() => {
                Some(number.to_string())
            }
            Some(Value::Number(_)) => {
                self.problems
                    .push(type_error(self.field(name), "a string or an integer"));
                None
            }
            _ => self.required_text(name),
        }
    }

    /// The field read by `read`, when present; a type problem naming `what` when it does not
    /// read.
    fn typed<T>(
        &mut self,
        name: &str,
        what: &str,
        read: impl Fn(&Value) -> Option<T>,
    ) -> Option<T> {
        let read = read(self.get(name)?);
        if read.is_none() {
            self.problems.push(type_error(self.field(name), what));
        }
        read
    }

    /// An integer, given as a JSON number or as its decimal text (`12`, `"12"`): clients
    /// written in every language send ids both ways.
    pub fn integer(&mut self, name: &str) -> Option<i64> {
        self.typed(name, "an integer", |value| match value {
            Value::String(text) => text.trim().parse().ok(),
            value => value.as_i64(),
        })
    }

    /// A number, given as a JSON number or as its decimal text (`0.5`, `"0.5"`).
    pub fn number(&mut self, name: &str) -> Option<f64> {
        self.typed(name, "a number", |value| match value {
            Value::String(text) => text.trim().parse::<f64>().ok().filter(|n| n.is_finite()),
            value => value.as_f64(),
        })
    }

    /// An RFC 3339 date-time string, when present; an `invalid_date` problem when it does not
    /// parse.
    pub fn time(&mut self, name: &str) -> Option<Timestamp> {
        let field = self.field(name);
        let time = match self.get(name)? {
            Value::String(text) => Timestamp::parse_rfc3339(text.trim()),
            _ => None,
        };
        if time.is_none() {
            let message = format!(
                "{field} must be an RFC 3339 date-time of the years 0000 to 9999 (in UTC) such \
                 as 2024-03-01T10:30:00Z"
            );
            self.problems
                .push(FieldError::new(field, "invalid_date", message));
        }
        time
    }

    /// A nested object; `None` (with a problem) when it is there but not an object.
    pub fn object<'p2>(&'p2 mut self, name: &str) -> Option<Fields<'a, 'p2>> {
        let field = self.field(name);
        match self.get(name)? {
            Value::Object(map) => Some(Fields {
                path: field,
                map,
                problems: &mut *self.problems,
            }),
            _ => {
                self.problems.push(type_error(field, "an object"));
                None
            }
        }
    }
    /// A boolean, when present.
    pub fn boolean(&mut self, name: &str) -> Option<bool> {
        self.typed(name, "a boolean", Value::as_bool)
    }

    /// An object of strings (`{"key": "value"}`), when present.
    /// An object of texts (numbers and booleans read as their text).
    pub fn text_map(&mut self, name: &str) -> Option<BTreeMap<String, String>> {
        let field = self.field(name);
        let Value::Object(map) = self.get(name)? else {
            self.problems
                .push(type_error(field, "an object of strings"));
            return None;
        };
        let mut texts = BTreeMap::new();
        for (key, value) in map {
            match value {
                Value::String(text) => {
                    texts.insert(key.clone(), text.clone());
                }
                // A number or a boolean is kept as the text it writes (`"subscription_group_id": 42`).
                Value::Number(_) | Value::Bool(_) => {
                    texts.insert(key.clone(), value.to_string());
                }
                _ => self
                    .problems
                    .push(type_error(path(&field, key), "a string")),
            }
        }
        Some(texts)
    }

    /// An array of at most `max` elements, when present. A longer one is one `too_many`
    /// problem, and only its first `max` elements are given: the rest are not read.
    pub fn array(&mut self, name: &str, max: usize) -> Option<&'a [Value]> {
        match self.get(name)? {
            Value::Array(items) => Some(at_most(&self.field(name), items, max, self.problems)),
            _ => {
                self.problems.push(type_error(self.field(name), "an array"));
                None
            }
        }
    }

    /// Element `index` of the array `name`, as the fields of an object.
    pub fn element<'p2>(
        &'p2 mut self,
        name: &str,
        index: usize,
        value: &'a Value,
    ) -> Option<Fields<'a, 'p2>> {
        let field = format!("{}[{index}]", self.field(name));
        match value {
            Value::Object(map) => Some(Fields {
                path: field,
                map,
                problems: &mut *self.problems,
            }),
            _ => {
                self.problems.push(type_error(field, "an object"));
                None
            }
        }
    }
}

/// The first `max` elements of the array `items` found at `field`; when it holds more, one
/// `too_many` problem on `field` too. Every array of a body is read through this (or
/// [`Fields::array`]), so that no body can make Mercer read, check or report on more elements
/// than the array may hold.
pub fn at_most<'v>(
    field: &str,
    items: &'v [Value],
    max: usize,
    problems: &mut Problems,
) -> &'v [Value] {
    if items.len() <= max {
        return items;
    }
    let message = format!("{field} must hold at most {max} items");
    problems.push(FieldError::new(field, "too_many", message));
    &items[..max]
}

// Kept while readers under conversion still import it from here.
#[allow(unused_imports)]
pub(crate) use crate::kernel::body::check_email;

/// Runs `read` over the fields of a body (an object at the root; field paths are the body's
/// own names), and gives its value when no problem was found: every problem at once, 422.
pub fn read_body<T>(
    body: &Value,
    read: impl FnOnce(&mut Fields<'_, '_>) -> Option<T>,
) -> Result<T, DomainError> {
    let mut problems = Problems::new();
    let empty = Map::new();
    let mut fields = Fields {
        path: String::new(),
        map: body.as_object().unwrap_or(&empty),
        problems: &mut problems,
    };
    let value = read(&mut fields);
    problems.into_result()?;
    value.ok_or_else(|| DomainError::invalid("body", "invalid_value", "the body could not be read"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Reads `items` (at most 3), each with a required `name`: how many elements were read, or
    /// the (field, code) of each problem.
    fn read_items(body: &Value) -> Result<usize, Vec<(String, &'static str)>> {
        read_body(body, |fields| {
            let items = fields.array("items", 3)?;
            for (index, item) in items.iter().enumerate() {
                if let Some(mut item) = fields.element("items", index, item) {
                    item.required_text("name");
                }
            }
            Some(items.len())
        })
        .map_err(|error| match error {
            DomainError::Invalid(problems) => problems
                .into_iter()
                .map(|problem| (problem.field, problem.code))
                .collect(),
            other => panic!("{other:?}"),
        })
    }

    #[test]
    fn an_array_within_its_limit_is_read_whole() {
        assert_eq!(
            read_items(&json!({"items": [{"name": "a"}, {"name": "b"}, {"name": "c"}]})),
            Ok(3)
        );
        assert_eq!(
            read_items(&json!({"items": "no"})),
            Err(vec![("items".to_string(), "invalid_type")])
        );
    }

    #[test]
    fn an_array_over_its_limit_is_one_problem_and_its_rest_is_not_read() {
        // Every element lacks its name: only the first three are read, so only they are named.
        let body = json!({"items": vec![json!({}); 100_000]});
        assert_eq!(
            read_items(&body),
            Err(vec![
                ("items".to_string(), "too_many"),
                ("items[0].name".to_string(), "required"),
                ("items[1].name".to_string(), "required"),
                ("items[2].name".to_string(), "required"),
            ])
        );
        let mut problems = Problems::new();
        let items = vec![json!(1); 5];
        assert_eq!(at_most("list", &items, 5, &mut problems).len(), 5);
        assert!(problems.is_empty());
        assert_eq!(at_most("list", &items, 2, &mut problems).len(), 2);
        assert_eq!(problems.len(), 1);
        assert!(problems.has("list"));
    }
}
