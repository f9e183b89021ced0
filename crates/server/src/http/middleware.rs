//! Middleware run on every request: the API version header, and one log line per request.

use std::time::Instant;

use actix_web::body::MessageBody;
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::header::{HeaderName, HeaderValue};
use actix_web::middleware::Next;
use actix_web::{Error, HttpMessage};
use mercer_domain::version::{VersionError, resolve_version};

use super::error::ApiError;

pub const VERSION_HEADER: &str = "svc-api-version-date";

/// Checks `Svc-API-Version-Date` (400 when malformed or too old), keeps the resolved version in
/// the request's extensions, and names it in the response's header of the same name. Then
/// refuses a NUL anywhere in the path or the query ([`refuse_nul`]).
pub async fn api_version(
    request: ServiceRequest,
    next: Next<impl MessageBody>,
) -> Result<ServiceResponse<impl MessageBody>, Error> {
    let header = match request.headers().get(VERSION_HEADER) {
        None => None,
        Some(value) => Some(
            value
                .to_str()
                .map_err(|_| ApiError::from(VersionError::Malformed))?,
        ),
    };
    let version = resolve_version(header).map_err(ApiError::from)?;
    refuse_nul(&request)?;
    request.extensions_mut().insert(version);
    let mut response = next.call(request).await?;
    response.headers_mut().insert(
        HeaderName::from_static(VERSION_HEADER),
        HeaderValue::from_static(version.as_str()),
    );
    Ok(response)
}

/// A NUL (`%00`) in a path segment or a query parameter is 400 on every route, whatever the
/// route does with it: no database stores it in text (PostgreSQL refuses it, SQLite would cut
/// the string there), and no id, search or name needs one.
fn refuse_nul(request: &ServiceRequest) -> Result<(), ApiError> {
    if request.path().contains("%00") {
        return Err(ApiError::new(
            actix_web::http::StatusCode::BAD_REQUEST,
            "request.invalid_path",
            "invalid_value",
            "the path must not contain the character U+0000",
        )
        .with_field("path"));
    }
    let query = request.query_string();
    if query.contains("%00") {
        let name = url::form_urlencoded::parse(query.as_bytes())
            .find(|(key, value)| key.contains('\0') || value.contains('\0'))
            .map_or_else(|| "query".to_string(), |(key, _)| key.into_owned());
        return Err(ApiError::invalid_query(
            &name,
            format!("{name} must not contain the character U+0000"),
        ));
    }
    Ok(())
}

/// One line per request: method, path (never the query, which may carry a token), status and
/// time taken. Headers and bodies are not logged.
pub async fn log_request(
    request: ServiceRequest,
    next: Next<impl MessageBody>,
) -> Result<ServiceResponse<impl MessageBody>, Error> {
    let started = Instant::now();
    let method = request.method().clone();
    let path = request.path().to_string();
    let result = next.call(request).await;
    let status = match &result {
        Ok(response) => response.status(),
        Err(error) => error.as_response_error().status_code(),
    };
    let elapsed = started.elapsed().as_secs_f64();
    // Routes by their pattern, so shop identifiers and ids do not make a label each.
    let route = match &result {
        Ok(response) => response
            .request()
            .match_pattern()
            .unwrap_or_else(|| "unmatched".to_string()),
        Err(_) => "unmatched".to_string(),
    };
    let labels = [
        ("method", method.to_string()),
        ("route", route),
        ("status", status.as_u16().to_string()),
    ];
    metrics::counter!("mercer_http_requests_total", &labels).increment(1);
    metrics::histogram!("mercer_http_request_seconds", &labels[..2]).record(elapsed);
    log::info!(target: "mercer::http", "{method} {path} {} {:.1}ms", status.as_u16(), elapsed * 1000.0);
    result
}
