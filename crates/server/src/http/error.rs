//! The JSON error body, the one HTTP error type of the server, and the mapping of
//! domain errors to statuses.
//!
//! `{"errors":[{"message","type","field","severity","sub_type"}]}`, one entry per problem.

use actix_web::http::StatusCode;
use actix_web::http::header::{self, HeaderValue};
use actix_web::{HttpResponse, ResponseError};
use mercer_domain::kernel::error::{Forbidden, MAX_PROBLEMS, StorageErrorKind};
use mercer_domain::kernel::version::VersionError;
use mercer_domain::{DomainError, FieldError};
use serde::Serialize;
use std::fmt;

/// One problem found in a request.
#[derive(Debug, Clone, Serialize, PartialEq, Eq, utoipa::ToSchema)]
pub struct ErrorEntry {
    /// What went wrong, for people.
    pub message: String,
    /// The kind of problem (`validation.failed`, `resource.not_found`…).
    #[serde(rename = "type")]
    pub kind: String,
    /// The dotted path of the offending field (`data.destination.timeout_ms`), when one is.
    #[schema(required)]
    pub field: Option<String>,
    /// `validation` for problems of the client's input, `critical` otherwise.
    #[schema(value_type = String, pattern = "^(validation|critical)$")]
    pub severity: &'static str,
    /// The problem more precisely (`invalid_value`, `required`…).
    pub sub_type: String,
}

#[derive(Debug, Clone)]
pub struct ApiError {
    status: StatusCode,
    entries: Vec<ErrorEntry>,
    /// What went wrong on Mercer's side or a remote party's, for the log only: the request-log
    /// middleware writes it once, with the method, the route and the request id.
    cause: Option<String>,
    /// Seconds the client should wait before trying again (`Retry-After`), when it should.
    retry_after: Option<u32>,
}

/// How long a client is asked to wait when the database cannot do the work now: long enough
/// for a restarting PostgreSQL or a busy SQLite file, short enough not to hold up recovery.
const STORAGE_RETRY_AFTER_SECONDS: u32 = 2;

/// Problems with the client's input are `validation`; everything else is `critical`.
fn severity(status: StatusCode) -> &'static str {
    match status.as_u16() {
        400 | 413 | 415 | 422 => "validation",
        _ => "critical",
    }
}

impl ApiError {
    pub fn new(status: StatusCode, kind: &str, sub_type: &str, message: impl Into<String>) -> Self {
        ApiError {
            status,
            entries: vec![ErrorEntry {
                message: message.into(),
                kind: kind.to_string(),
                field: None,
                severity: severity(status),
                sub_type: sub_type.to_string(),
            }],
            cause: None,
            retry_after: None,
        }
    }

    /// Asks the client to try again after `seconds` (`Retry-After`).
    pub fn with_retry_after(mut self, seconds: u32) -> Self {
        self.retry_after = Some(seconds);
        self
    }

    /// Keeps `cause` for the log (never the answer).
    pub fn with_cause(mut self, cause: impl fmt::Display) -> Self {
        self.cause = Some(cause.to_string());
        self
    }

    pub fn cause(&self) -> Option<&str> {
        self.cause.as_deref()
    }

    pub fn with_field(mut self, field: impl Into<String>) -> Self {
        let field = field.into();
        for entry in &mut self.entries {
            entry.field = Some(field.clone());
        }
        self
    }

    #[cfg(test)]
    pub fn status(&self) -> StatusCode {
        self.status
    }

    #[cfg(test)]
    pub fn entries(&self) -> &[ErrorEntry] {
        &self.entries
    }

    pub fn malformed_json(detail: impl fmt::Display) -> Self {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "request.malformed_json",
            "syntax",
            format!("the request body is not valid JSON: {detail}"),
        )
    }

    pub fn invalid_query(field: &str, message: impl Into<String>) -> Self {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "request.invalid_query",
            "invalid_value",
            message,
        )
        .with_field(field)
    }

    pub fn payload_too_large(limit: usize) -> Self {
        ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "request.too_large",
            "body_limit",
            format!("the request body is larger than {limit} bytes"),
        )
    }

    /// The body did not arrive within the body deadline (`--body-timeout-s`).
    pub fn body_timeout() -> Self {
        ApiError::new(
            StatusCode::REQUEST_TIMEOUT,
            "request.timeout",
            "body",
            "the request body did not arrive in time",
        )
    }

    /// The body broke off before its end (the client closed the connection, or its chunks
    /// do not parse).
    pub fn unreadable_body(detail: impl fmt::Display) -> Self {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "request.malformed",
            "body",
            format!("the request body could not be read ({detail})"),
        )
    }

    /// The status and the first problem's message: for answers in another error format (the
    /// OAuth token endpoint's, RFC 6749).
    pub fn status_and_message(&self) -> (StatusCode, String) {
        let message = self
            .entries
            .first()
            .map(|entry| entry.message.clone())
            .unwrap_or_default();
        (self.status, message)
    }

    pub fn unsupported_media_type() -> Self {
        ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "request.unsupported_media_type",
            "content_type",
            "the request body must be sent as Content-Type: application/json",
        )
    }

    pub fn route_not_found() -> Self {
        ApiError::new(
            StatusCode::NOT_FOUND,
            "resource.not_found",
            "route",
            "no such route",
        )
    }

    /// The answer to a path that does not parse: the 404 of the resource whose id it is (ids
    /// say which when they fail to read, `kernel::ids`), else [`Self::route_not_found`].
    pub fn path_not_found(error: &actix_web::error::PathError) -> Self {
        let message = match error {
            actix_web::error::PathError::Deserialize(inner) => inner.to_string(),
            _ => String::new(),
        };
        match mercer_domain::kernel::ids::resource_not_found(&message) {
            Some(resource) => ApiError::new(
                StatusCode::NOT_FOUND,
                "resource.not_found",
                resource,
                format!("{resource} not found"),
            ),
            None => ApiError::route_not_found(),
        }
    }

    pub fn method_not_allowed() -> Self {
        ApiError::new(
            StatusCode::METHOD_NOT_ALLOWED,
            "request.method_not_allowed",
            "method",
            "this route does not take that method",
        )
    }

    pub fn internal() -> Self {
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal.error",
            "internal",
            "internal error",
        )
    }

    /// 503: the database cannot do the work now (down, restarting, busy); try again later.
    pub fn unavailable(message: impl Into<String>) -> Self {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "service.unavailable",
            "database",
            message,
        )
        .with_retry_after(STORAGE_RETRY_AFTER_SECONDS)
    }

    /// 507: the database is out of space; nothing of the request was stored.
    pub fn storage_full() -> Self {
        ApiError::new(
            StatusCode::INSUFFICIENT_STORAGE,
            "service.storage_full",
            "database",
            "Mercer's database is out of space; nothing of this request was stored",
        )
    }

    /// A field of a well-formed body has the wrong type or shape (a serde data error).
    pub fn invalid_body_shape(field: Option<String>, message: impl Into<String>) -> Self {
        let mut error = ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "validation.failed",
            "invalid_type",
            message,
        );
        error.entries[0].field = field;
        error
    }
}

impl fmt::Display for ApiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let messages: Vec<&str> = self.entries.iter().map(|e| e.message.as_str()).collect();
        write!(f, "{} {}", self.status.as_u16(), messages.join("; "))
    }
}

impl ResponseError for ApiError {
    fn status_code(&self) -> StatusCode {
        self.status
    }

    fn error_response(&self) -> HttpResponse {
        let mut response = HttpResponse::build(self.status);
        if self.status == StatusCode::UNAUTHORIZED {
            response.insert_header((header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer")));
        }
        if let Some(seconds) = self.retry_after {
            response.insert_header((header::RETRY_AFTER, seconds));
        }
        response.json(serde_json::json!({ "errors": self.entries }))
    }
}

fn field_entry(problem: FieldError) -> ErrorEntry {
    ErrorEntry {
        message: problem.message,
        kind: "validation.failed".to_string(),
        field: Some(problem.field),
        severity: "validation",
        sub_type: problem.code.to_string(),
    }
}

impl From<DomainError> for ApiError {
    fn from(error: DomainError) -> Self {
        match error {
            DomainError::NotFound { resource } => ApiError::new(
                StatusCode::NOT_FOUND,
                "resource.not_found",
                resource,
                format!("{resource} not found"),
            ),
            DomainError::Conflict { code, message } => {
                ApiError::new(StatusCode::CONFLICT, code, "conflict", message)
            }
            DomainError::Invalid(problems) => ApiError {
                status: StatusCode::UNPROCESSABLE_ENTITY,
                // However many problems a use case found, the answer lists the first ones.
                entries: problems
                    .into_iter()
                    .take(MAX_PROBLEMS)
                    .map(field_entry)
                    .collect(),
                cause: None,
                retry_after: None,
            },
            DomainError::Unprocessable { code, message } => {
                ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, code, "state", message)
            }
            DomainError::BadRequest(problems) => ApiError {
                status: StatusCode::BAD_REQUEST,
                entries: problems
                    .into_iter()
                    .take(MAX_PROBLEMS)
                    .map(|problem| ErrorEntry {
                        message: problem.message,
                        kind: "request.invalid_query".to_string(),
                        field: Some(problem.field),
                        severity: "validation",
                        sub_type: problem.code.to_string(),
                    })
                    .collect(),
                cause: None,
                retry_after: None,
            },
            DomainError::Remote {
                code,
                timed_out,
                message,
                field,
            } => {
                let status = if timed_out {
                    StatusCode::GATEWAY_TIMEOUT
                } else {
                    StatusCode::BAD_GATEWAY
                };
                let cause = format!("remote party failed ({code}): {message}");
                let error = ApiError::new(
                    status,
                    code,
                    if timed_out { "timeout" } else { "remote" },
                    message,
                )
                .with_cause(cause);
                match field {
                    Some(field) => error.with_field(field),
                    None => error,
                }
            }
            DomainError::Unauthenticated => ApiError::new(
                StatusCode::UNAUTHORIZED,
                "auth.unauthenticated",
                "invalid_token",
                "a valid API access token is required: Authorization: Bearer <token>",
            ),
            DomainError::Forbidden(reason) => {
                let sub_type = match reason {
                    Forbidden::OtherShop => "other_shop",
                    Forbidden::MissingScope(_) => "missing_scope",
                };
                ApiError::new(
                    StatusCode::FORBIDDEN,
                    "auth.forbidden",
                    sub_type,
                    reason.to_string(),
                )
            }
            // The detail may hold SQL or driver text: it goes to the log, never to the client.
            DomainError::Storage(error) => match error.kind {
                StorageErrorKind::Transient => {
                    ApiError::unavailable("the database cannot do this now; try again shortly")
                        .with_cause(error)
                }
                StorageErrorKind::Full => ApiError::storage_full().with_cause(error),
                StorageErrorKind::UniqueViolation | StorageErrorKind::Other => {
                    ApiError::internal().with_cause(error)
                }
            },
        }
    }
}

impl From<VersionError> for ApiError {
    fn from(error: VersionError) -> Self {
        let kind = match error {
            VersionError::Malformed => "version.malformed",
            VersionError::Unsupported => "version.unsupported",
        };
        ApiError::new(StatusCode::BAD_REQUEST, kind, "header", error.to_string())
            .with_field("Svc-API-Version-Date")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mercer_domain::StorageError;

    #[test]
    fn storage_errors_become_a_bare_500() {
        let error = ApiError::from(DomainError::Storage(StorageError::other(
            "syntax error at or near \"SELEC\" in SELECT * FROM api_tokens",
        )));
        assert_eq!(error.status(), StatusCode::INTERNAL_SERVER_ERROR);
        let body = serde_json::to_string(error.entries()).unwrap();
        assert!(!body.contains("SELEC"), "{body}");
        assert!(!body.contains("api_tokens"), "{body}");
    }

    #[test]
    fn a_database_that_cannot_work_now_is_503_with_retry_after_and_a_full_one_507() {
        let busy = ApiError::from(DomainError::Storage(StorageError::transient(
            "no database connection: timed out waiting for connection: connection refused",
        )));
        let answer = busy.error_response();
        assert_eq!(answer.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(
            answer
                .headers()
                .get(header::RETRY_AFTER)
                .map(HeaderValue::as_bytes),
            Some(STORAGE_RETRY_AFTER_SECONDS.to_string().as_bytes())
        );
        assert!(!format!("{:?}", busy.entries()).contains("refused"));
        let full = ApiError::from(DomainError::Storage(StorageError::full(
            "database or disk is full",
        )));
        assert_eq!(full.status(), StatusCode::INSUFFICIENT_STORAGE);
        assert_eq!(full.entries()[0].kind, "service.storage_full");
        assert!(!format!("{:?}", full.entries()).contains("disk is full"));
    }

    #[test]
    fn each_field_problem_is_its_own_entry() {
        let error = ApiError::from(DomainError::Invalid(vec![
            FieldError::required("data.destination.topic"),
            FieldError::new(
                "data.destination.timeout_ms",
                "range",
                "timeout_ms must be 100..30000",
            ),
        ]));
        assert_eq!(error.status(), StatusCode::UNPROCESSABLE_ENTITY);
        let fields: Vec<_> = error.entries().iter().map(|e| e.field.clone()).collect();
        assert_eq!(
            fields,
            [
                Some("data.destination.topic".to_string()),
                Some("data.destination.timeout_ms".to_string())
            ]
        );
        assert!(error.entries().iter().all(|e| e.severity == "validation"));
    }

    #[test]
    fn an_answer_lists_at_most_a_hundred_problems() {
        let many = |count: usize| -> Vec<FieldError> {
            (0..count)
                .map(|index| FieldError::required(format!("items[{index}].quantity")))
                .collect()
        };
        let invalid = ApiError::from(DomainError::Invalid(many(5_000)));
        assert_eq!(invalid.entries().len(), 100);
        assert_eq!(
            invalid.entries()[99].field.as_deref(),
            Some("items[99].quantity"),
            "the first ones found"
        );
        let bad = ApiError::from(DomainError::BadRequest(many(5_000)));
        assert_eq!(bad.entries().len(), 100);
    }
}
