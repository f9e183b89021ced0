//! The `filter` query language of list operations: conditions
//! `op(field:value)` joined by commas, `gt(id:5),lte(created_at:2024-06-01T00:00:00Z)`.
//!
//! This module reads the syntax and the operators; each feature names its own fields and the
//! type of their values (the directory's customers, the subscriptions). Every problem is a
//! [`FieldError`] on the parameter `filter`, which the caller reports as 400.

use crate::kernel::error::FieldError;
use crate::kernel::time::Timestamp;

/// The name of the query parameter every problem is reported on.
pub(crate) const FILTER_PARAMETER: &str = "filter";

/// The operator of a condition, written before its parentheses (`gt(id:5)`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, strum::IntoStaticStr, strum::EnumString)]
#[strum(serialize_all = "snake_case")]
pub enum FilterOp {
    /// `lt`: the field is less than the value.
    Lt,
    /// `lte`: the field is less than or equal to the value.
    Lte,
    /// `gt`: the field is greater than the value.
    Gt,
    /// `gte`: the field is greater than or equal to the value.
    Gte,
    /// `eq`: the field equals the value.
    Eq,
    /// `like`: the field matches the value as a pattern (`%` for any text), ignoring case; for
    /// text fields only.
    Like,
}

impl FilterOp {
    /// Every operator, `like` included (the directory's text fields take it).
    pub const ALL: [FilterOp; 6] = [
        FilterOp::Lt,
        FilterOp::Lte,
        FilterOp::Gt,
        FilterOp::Gte,
        FilterOp::Eq,
        FilterOp::Like,
    ];

    /// The comparisons, for lists that filter only on numbers and times.
    pub const COMPARISONS: [FilterOp; 5] = [
        FilterOp::Lt,
        FilterOp::Lte,
        FilterOp::Gt,
        FilterOp::Gte,
        FilterOp::Eq,
    ];

    /// The operator's name as written in a filter (`lt`, `like`).
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    /// The operator named `text` (exactly, lowercase); `None` for an unknown name.
    pub fn parse(text: &str) -> Option<Self> {
        text.parse().ok()
    }

    /// Whether `left op right` holds, for the comparisons; `like` compares as `eq` here
    /// (matching a pattern is the caller's business).
    pub fn holds<T: Ord + ?Sized>(self, left: &T, right: &T) -> bool {
        match self {
            FilterOp::Lt => left < right,
            FilterOp::Lte => left <= right,
            FilterOp::Gt => left > right,
            FilterOp::Gte => left >= right,
            FilterOp::Eq | FilterOp::Like => left == right,
        }
    }
}

/// The value of a condition, typed by its field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FilterValue {
    /// The value of an integer field (an id).
    Integer(i64),
    /// The value of a time field.
    Time(Timestamp),
    /// The value of a text field, as written.
    Text(String),
}

/// One condition as written, before the feature looks its field up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Condition<'a> {
    pub op: FilterOp,
    /// The field's name, trimmed.
    pub field: &'a str,
    /// The value as written (not trimmed: a text value may hold spaces).
    pub value: &'a str,
}

/// The most conditions a list's `filter` may hold, all of its repeats together. Each is a term
/// of one SQL statement; SQLite refuses an expression tree past 1,000 deep.
pub(crate) const MAX_FILTER_CONDITIONS: usize = 100;
/// The most ids a list's id parameter (`ids`, `svc_platform_customer_id`) may name in all.
pub(crate) const MAX_LISTED_IDS: usize = 250;

/// Appends `more` to what the query parameter `parameter` gathered so far, refusing it when
/// that makes more than `limit` (`noun` names what is counted: "conditions", "ids").
pub(crate) fn gather<T>(
    parameter: &str,
    noun: &str,
    limit: usize,
    into: &mut Vec<T>,
    more: impl IntoIterator<Item = T>,
) -> Result<(), FieldError> {
    into.extend(more);
    if into.len() > limit {
        return Err(FieldError::new(
            parameter,
            "too_many",
            format!(
                "{parameter} may hold at most {limit} {noun}, all of its repeats together; \
                 this request gives {}",
                into.len()
            ),
        ));
    }
    Ok(())
}

pub(crate) fn bad_filter(message: impl Into<String>) -> FieldError {
    FieldError::new(FILTER_PARAMETER, "invalid_value", message)
}

fn operator_list(ops: &[FilterOp]) -> String {
    let names: Vec<&str> = ops.iter().map(|op| op.as_str()).collect();
    match names.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
        Some((last, _)) => (*last).to_string(),
        None => String::new(),
    }
}

/// Splits `op(field:value),op(field:value)` into its conditions; an operator not in `ops` is
/// refused, naming the ones allowed.
pub(crate) fn split_conditions<'a>(
    text: &'a str,
    ops: &[FilterOp],
) -> Result<Vec<Condition<'a>>, FieldError> {
    let mut conditions = Vec::new();
    let mut rest = text.trim();
    while !rest.is_empty() {
        let open = rest
            .find('(')
            .ok_or_else(|| bad_filter(format!("expected op(field:value) in {text:?}")))?;
        let close = rest
            .find(')')
            .ok_or_else(|| bad_filter(format!("missing ) in {text:?}")))?;
        if close < open {
            return Err(bad_filter(format!("expected op(field:value) in {text:?}")));
        }
        let op_name = rest[..open].trim();
        let op = FilterOp::parse(op_name)
            .filter(|op| ops.contains(op))
            .ok_or_else(|| {
                bad_filter(format!(
                    "unknown operator {op_name:?}; use {}",
                    operator_list(ops)
                ))
            })?;
        let (field, value) = rest[open + 1..close]
            .split_once(':')
            .ok_or_else(|| bad_filter(format!("expected field:value inside {op_name}(…)")))?;
        conditions.push(Condition {
            op,
            field: field.trim(),
            value,
        });
        rest = rest[close + 1..].trim_start();
        if let Some(after_comma) = rest.strip_prefix(',') {
            rest = after_comma.trim_start();
        } else if !rest.is_empty() {
            return Err(bad_filter(format!(
                "conditions must be joined by commas in {text:?}"
            )));
        }
    }
    Ok(conditions)
}

/// An integer value of a condition.
pub(crate) fn integer_value(text: &str) -> Result<i64, FieldError> {
    text.trim()
        .parse()
        .map_err(|_| bad_filter("filter values of integer fields must be integers"))
}

/// A date-time value of a condition (RFC 3339).
pub(crate) fn time_value(text: &str) -> Result<Timestamp, FieldError> {
    Timestamp::parse_rfc3339(text.trim()).ok_or_else(|| {
        bad_filter("filter must be an RFC 3339 date-time such as 2024-03-01T10:30:00Z")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_parameter_gathers_a_bounded_number_of_values_over_its_repeats() {
        let mut gathered = Vec::new();
        gather("filter", "conditions", 3, &mut gathered, [1, 2]).unwrap();
        gather("filter", "conditions", 3, &mut gathered, [3]).unwrap();
        let problem = gather("filter", "conditions", 3, &mut gathered, [4]).unwrap_err();
        assert_eq!(
            (problem.field.as_str(), problem.code),
            ("filter", "too_many")
        );
        assert!(
            problem.message.contains("at most 3 conditions") && problem.message.contains("gives 4"),
            "{}",
            problem.message
        );
    }

    #[test]
    fn splits_conditions_joined_by_commas() {
        let conditions = split_conditions(
            " gt(id:5) , lte( created_at :2024-06-01T00:00:00Z)",
            &FilterOp::ALL,
        )
        .unwrap();
        assert_eq!(
            conditions,
            vec![
                Condition {
                    op: FilterOp::Gt,
                    field: "id",
                    value: "5"
                },
                Condition {
                    op: FilterOp::Lte,
                    field: "created_at",
                    value: "2024-06-01T00:00:00Z"
                },
            ]
        );
        assert_eq!(split_conditions("", &FilterOp::ALL).unwrap(), vec![]);
    }

    #[test]
    fn refuses_operators_not_allowed_and_bad_syntax() {
        let error = split_conditions("like(email:a%)", &FilterOp::COMPARISONS).unwrap_err();
        assert_eq!(error.field, "filter");
        assert!(
            error.message.contains("unknown operator") && error.message.contains("gte or eq"),
            "{}",
            error.message
        );
        for (text, why) in [
            ("between(id:5)", "unknown operator"),
            ("gt(id:5) lt(id:9)", "commas"),
            ("gt(id 5)", "field:value"),
            ("gt(id:5", "missing )"),
            (")gt(id:5", "expected op"),
            ("id", "expected op"),
        ] {
            let error = split_conditions(text, &FilterOp::ALL).unwrap_err();
            assert!(error.message.contains(why), "{text}: {}", error.message);
        }
    }

    #[test]
    fn compares_and_types_values() {
        assert!(FilterOp::Lt.holds(&1, &2));
        assert!(!FilterOp::Lt.holds(&2, &2));
        assert!(FilterOp::Lte.holds(&2, &2));
        assert!(FilterOp::Gt.holds(&3, &2));
        assert!(FilterOp::Gte.holds(&2, &2));
        assert!(FilterOp::Eq.holds(&2, &2));
        assert!(!FilterOp::Eq.holds(&2, &3));
        assert_eq!(integer_value(" 42 ").unwrap(), 42);
        assert!(integer_value("4.2").is_err());
        assert_eq!(
            time_value("2024-06-01T02:00:00+02:00").unwrap(),
            Timestamp::parse_rfc3339("2024-06-01T00:00:00Z").unwrap()
        );
        assert!(time_value("yesterday").is_err());
    }
}
