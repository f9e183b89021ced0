//! Errors the domain speaks in. Only the server maps them to HTTP statuses and the contract's
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

/// Collects field errors while validating, so a client hears about every problem at once.
#[derive(Debug, Default)]
pub struct Problems(Vec<FieldError>);

impl Problems {
    /// No problems yet.
    pub fn new() -> Self {
        Problems(Vec::new())
    }

    /// Whether a problem was recorded on `field`.
    pub fn has(&self, field: &str) -> bool {
        self.0.iter().any(|problem| problem.field == field)
    }

    /// Records one problem.
    pub fn push(&mut self, error: FieldError) {
        self.0.push(error);
    }

    /// Records the error of a failed check, and gives back the value of a passed one.
    pub fn check<T>(&mut self, result: Result<T, FieldError>) -> Option<T> {
        match result {
            Ok(value) => Some(value),
            Err(error) => {
                self.0.push(error);
                None
            }
        }
    }

    /// `Ok` when no problem was recorded, otherwise [`DomainError::Invalid`] with all of them.
    pub fn into_result(self) -> Result<(), DomainError> {
        if self.0.is_empty() {
            Ok(())
        } else {
            Err(DomainError::Invalid(self.0))
        }
    }
}

/// What a repository method answers.
pub type StoreResult<T> = Result<T, StorageError>;
