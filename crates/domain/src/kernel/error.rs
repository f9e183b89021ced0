//! Errors the domain speaks in. Only the server maps them to HTTP statuses and the JSON
//! error body; libraries below it never think in status codes.

use std::fmt;

/// One problem with one field of the input: the dotted path of the field (`data.destination.timeout_ms`),
/// a short machine-readable code and a sentence for people.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    /// The dotted path of the field in the input (`data.destination.timeout_ms`).
    pub field: String,
    /// A short machine-readable code (`required`, `invalid_url`).
    pub code: &'static str,
    /// A sentence for people saying what is wrong.
    pub message: String,
}

impl FieldError {
    /// A problem on `field` with its code and message.
    pub fn new(field: impl Into<String>, code: &'static str, message: impl Into<String>) -> Self {
        FieldError {
            field: field.into(),
            code,
            message: message.into(),
        }
    }

    /// A `required` problem: `field` is missing ("`field` is required").
    pub fn required(field: impl Into<String>) -> Self {
        let field = field.into();
        let message = format!("{field} is required");
        FieldError::new(field, "required", message)
    }
}

/// Why valid credentials may still not be used on a route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Forbidden {
    /// The token belongs to another shop than the one in the path.
    OtherShop,
    /// The token lacks the scope the route needs.
    MissingScope(&'static str),
}

impl fmt::Display for Forbidden {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Forbidden::OtherShop => f.write_str("the token belongs to another shop"),
            Forbidden::MissingScope(scope) => {
                write!(f, "the token lacks the scope {scope}")
            }
        }
    }
}

/// A storage failure. The detail is for the log only: it may hold SQL or driver messages and
/// must never reach a client. `source` is the database's own error, when there was one, for
/// embedders that want to look at it (`std::error::Error::source`).
#[derive(Debug, Clone, thiserror::Error)]
#[error("storage failure: {detail}")]
pub struct StorageError {
    /// What sort of failure it was, for callers that may retry or report a clash.
    pub kind: StorageErrorKind,
    /// What went wrong, for the log only (it may hold SQL or driver messages).
    pub detail: String,
    /// The database's own error, when there was one.
    #[source]
    pub source: Option<std::sync::Arc<dyn std::error::Error + Send + Sync>>,
}

/// What sort of storage failure a [`StorageError`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StorageErrorKind {
    /// A unique constraint refused the change: someone else stored the same key first.
    UniqueViolation,
    /// The database could not do it now (a lost connection, a deadlock or serialization
    /// failure, a busy SQLite file); the same work may well succeed when tried again.
    Transient,
    /// The database is out of space (a full disk, SQLite's size limit): nothing more can be
    /// written until space is freed.
    Full,
    /// Any other failure; trying again is not expected to help.
    Other,
}

impl StorageError {
    /// A failure of kind [`StorageErrorKind::Other`] with `detail` for the log.
    pub fn other(detail: impl Into<String>) -> Self {
        StorageError {
            kind: StorageErrorKind::Other,
            detail: detail.into(),
            source: None,
        }
    }

    /// A failure of kind [`StorageErrorKind::UniqueViolation`] with `detail` for the log.
    pub fn unique_violation(detail: impl Into<String>) -> Self {
        StorageError {
            kind: StorageErrorKind::UniqueViolation,
            detail: detail.into(),
            source: None,
        }
    }

    /// A failure of kind [`StorageErrorKind::Transient`] with `detail` for the log.
    pub fn transient(detail: impl Into<String>) -> Self {
        StorageError {
            kind: StorageErrorKind::Transient,
            detail: detail.into(),
            source: None,
        }
    }

    /// A failure of kind [`StorageErrorKind::Full`] with `detail` for the log.
    pub fn full(detail: impl Into<String>) -> Self {
        StorageError {
            kind: StorageErrorKind::Full,
            detail: detail.into(),
            source: None,
        }
    }

    /// The same error, keeping `source` as its cause.
    pub fn caused_by(mut self, source: impl std::error::Error + Send + Sync + 'static) -> Self {
        self.source = Some(std::sync::Arc::new(source));
        self
    }

    /// Whether a unique constraint refused the change.
    pub fn is_unique_violation(&self) -> bool {
        self.kind == StorageErrorKind::UniqueViolation
    }

    /// Whether the same work may succeed when tried again.
    pub fn is_transient(&self) -> bool {
        self.kind == StorageErrorKind::Transient
    }

    /// Whether the database is out of space.
    pub fn is_full(&self) -> bool {
        self.kind == StorageErrorKind::Full
    }

    /// Whether the database, not the work, failed for now (transient, or out of space): the
    /// same work may succeed later and should not count against it.
    pub fn is_temporary(&self) -> bool {
        self.is_transient() || self.is_full()
    }
}

/// Why a use case failed. The server maps each variant to an HTTP status and the error body.
#[derive(Debug, Clone, thiserror::Error)]
pub enum DomainError {
    /// An unknown resource; `resource` names its kind (`shop`, `token`).
    #[error("{resource} not found")]
    NotFound {
        /// The kind of resource that was not found (`shop`, `token`).
        resource: &'static str,
    },
    /// The change clashes with stored state (a duplicate, a second live destination).
    #[error("{message}")]
    Conflict {
        /// A short machine-readable code (`destination.topic_taken`).
        code: &'static str,
        /// A sentence for people saying what clashes.
        message: String,
    },
    /// The input is well formed but breaks the rules; one entry per problem.
    #[error("invalid input ({} problem(s))", .0.len())]
    Invalid(Vec<FieldError>),
    /// A well-formed request the shop's state does not allow (422 with this type).
    #[error("{message}")]
    Unprocessable {
        /// A short machine-readable code (`webhook.disabled`).
        code: &'static str,
        /// A sentence for people saying why the state does not allow it.
        message: String,
    },
    /// The request's query (or another part that is not a JSON body) does not parse; 400.
    #[error("bad request ({} problem(s))", .0.len())]
    BadRequest(Vec<FieldError>),
    /// A remote party (connector, override) answered wrongly (502) or not in time (504).
    #[error("{message}")]
    Remote {
        /// A short machine-readable code (`connector.failed`, `override.failed`).
        code: &'static str,
        /// Whether the remote party did not answer in time (504) rather than answer wrongly (502).
        timed_out: bool,
        /// A sentence for people saying what the remote party did wrong.
        message: String,
        /// The field of the remote party's answer that was wrong, when one was.
        field: Option<String>,
    },
    /// Missing, unknown or revoked credentials.
    #[error("missing or invalid credentials")]
    Unauthenticated,
    /// Valid credentials that may not be used here.
    #[error("forbidden: {0}")]
    Forbidden(Forbidden),
    /// The storage failed; the client sees an internal error, the detail goes to the log.
    #[error(transparent)]
    Storage(#[from] StorageError),
}

impl DomainError {
    /// [`DomainError::NotFound`] for a resource of kind `resource`.
    pub fn not_found(resource: &'static str) -> Self {
        DomainError::NotFound { resource }
    }

    /// [`DomainError::Invalid`] with the one problem on `field`.
    pub fn invalid(
        field: impl Into<String>,
        code: &'static str,
        message: impl Into<String>,
    ) -> Self {
        DomainError::Invalid(vec![FieldError::new(field, code, message)])
    }
}

/// The most problems one error answer lists: the first ones found. A body with more gets no
/// more work, and its answer stays small whatever the body holds.
pub const MAX_PROBLEMS: usize = 100;

/// Collects field errors while validating, so a client hears about every problem at once (the
/// first [`MAX_PROBLEMS`] of them). Beside the list, the set of every field a problem was
/// recorded on, so [`Problems::has`] does not scan.
#[derive(Debug, Default)]
pub struct Problems {
    /// The first [`MAX_PROBLEMS`] problems, in the order they were found.
    list: Vec<FieldError>,
    /// Every field a problem was recorded on, kept or not.
    fields: std::collections::HashSet<String>,
    /// How many problems were recorded, kept or not.
    count: usize,
}

impl Problems {
    /// No problems yet.
    pub fn new() -> Self {
        Problems::default()
    }

    /// Whether a problem was recorded on `field` (also one past the listed ones).
    pub fn has(&self, field: &str) -> bool {
        self.fields.contains(field)
    }

    /// Whether no problem was recorded.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// How many problems were recorded, the unlisted ones too.
    pub fn len(&self) -> usize {
        self.count
    }

    /// Records one problem; past the first [`MAX_PROBLEMS`], only that its field has one.
    pub fn push(&mut self, error: FieldError) {
        self.count += 1;
        if !self.fields.contains(&error.field) {
            self.fields.insert(error.field.clone());
        }
        if self.list.len() < MAX_PROBLEMS {
            self.list.push(error);
        }
    }

    /// Records the error of a failed check, and gives back the value of a passed one.
    pub fn check<T>(&mut self, result: Result<T, FieldError>) -> Option<T> {
        match result {
            Ok(value) => Some(value),
            Err(error) => {
                self.push(error);
                None
            }
        }
    }

    /// `Ok` when no problem was recorded, otherwise [`DomainError::Invalid`] with the first
    /// [`MAX_PROBLEMS`] of them.
    pub fn into_result(self) -> Result<(), DomainError> {
        if self.is_empty() {
            Ok(())
        } else {
            Err(DomainError::Invalid(self.list))
        }
    }
}

/// What a repository method answers.
pub type StoreResult<T> = Result<T, StorageError>;

#[cfg(test)]
mod tests {
    use super::*;

    fn problem(field: &str) -> FieldError {
        FieldError::new(field, "invalid_value", format!("{field} is wrong"))
    }

    #[test]
    fn an_error_lists_the_first_hundred_problems_only() {
        let mut problems = Problems::new();
        for index in 0..1_000 {
            problems.push(problem(&format!("items[{index}].quantity")));
        }
        assert_eq!(problems.len(), 1_000);
        let Err(DomainError::Invalid(listed)) = problems.into_result() else {
            panic!("problems were recorded");
        };
        assert_eq!(listed.len(), MAX_PROBLEMS);
        assert_eq!(listed.len(), 100);
        assert_eq!(listed[0].field, "items[0].quantity");
        assert_eq!(listed[99].field, "items[99].quantity");
    }

    #[test]
    fn has_tells_every_field_with_a_problem_listed_or_not() {
        let mut problems = Problems::new();
        assert!(problems.is_empty());
        assert!(!problems.has("a"));
        for index in 0..150 {
            problems.push(problem(&format!("f{index}")));
        }
        problems.push(problem("f0"));
        assert!(problems.has("f0"));
        assert!(problems.has("f99"));
        assert!(problems.has("f100"), "past the listed ones");
        assert!(problems.has("f149"));
        assert!(!problems.has("f150"));
        assert!(!problems.has("f"));
        assert_eq!(problems.len(), 151);
        assert_eq!(problems.check(Ok::<_, FieldError>(3)), Some(3));
        assert_eq!(problems.check::<i64>(Err(problem("late"))), None);
        assert!(problems.has("late"));
    }

    #[test]
    fn no_problem_is_ok() {
        assert!(Problems::new().into_result().is_ok());
    }
}
