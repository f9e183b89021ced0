//! Middleware run on every request: the API version header, and one log line per request.

use std::borrow::Cow;
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use actix_web::body::{BoxBody, EitherBody, MessageBody};
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::error::InternalError;
use actix_web::http::Method;
use actix_web::http::header::{self, HeaderMap, HeaderName, HeaderValue};
use actix_web::middleware::Next;
use actix_web::{Error, HttpMessage, HttpResponse, ResponseError};
use mercer_domain::access::credentials::random_hex;
use mercer_domain::kernel::jobs;
use mercer_domain::kernel::version::{VersionError, resolve_version};

use super::error::ApiError;

pub const VERSION_HEADER: &str = "svc-api-version-date";

/// Checks `Svc-API-Version-Date` (400 when malformed or too old), keeps the resolved version in
/// the request's extensions, and names it in the response's header of the same name. Then
/// refuses a NUL anywhere in the path or the query ([`refuse_nul`]). A refusal is answered
/// here, as an answer rather than an error, so the middleware around it handles it as any
/// other (`body_deadline` keeps the request's body with it).
pub async fn api_version(
    request: ServiceRequest,
    next: Next<impl MessageBody>,
) -> Result<ServiceResponse<EitherBody<impl MessageBody>>, Error> {
    let version = match checked_version(&request) {
        Ok(version) => version,
        Err(error) => return Ok(request.error_response(error).map_into_right_body()),
    };
    request.extensions_mut().insert(version);
    let mut response = next.call(request).await?;
    response.headers_mut().insert(
        HeaderName::from_static(VERSION_HEADER),
        HeaderValue::from_static(version.as_str()),
    );
    // The request budget's headers, when one applied (`super::budgets`).
    let request = response.request().clone();
    super::budgets::write_headers(&request.extensions(), response.headers_mut());
    Ok(response.map_into_left_body())
}

/// The request's API version, or why it is refused (a bad version header, a NUL in the path
/// or the query).
fn checked_version(
    request: &ServiceRequest,
) -> Result<mercer_domain::kernel::version::ApiVersion, ApiError> {
    let header = match request.headers().get(VERSION_HEADER) {
        None => None,
        Some(value) => Some(
            value
                .to_str()
                .map_err(|_| ApiError::from(VersionError::Malformed))?,
        ),
    };
    let version = resolve_version(header).map_err(ApiError::from)?;
    refuse_nul(request)?;
    Ok(version)
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

/// Bounds how long a request's body may take to arrive: the app's `body_timeout` from the
/// end of its headers. A body still arriving then ends in an error of kind `TimedOut`, which
/// the body readers answer 408 ([`super::extract::read_body`]). Without this, a client that
/// announces a body and sends it slowly, or never, holds its connection (and a file
/// descriptor) for as long as it likes.
///
/// The request's body is also kept alive until the answer is written (held by the answer's
/// body). actix-http closes the connection after answering a request whose body is unread and
/// still held; a chunked body dropped unread, it would instead read to its end and throw away,
/// with no deadline, so a client trickling chunks to any route (one that reads no body
/// included) would keep its connection after the answer.
pub async fn body_deadline<B: MessageBody + 'static>(
    mut request: ServiceRequest,
    next: Next<B>,
) -> Result<ServiceResponse<EitherBody<B, HoldingBody>>, Error> {
    let has_body = request.headers().contains_key(header::CONTENT_LENGTH)
        || request.headers().contains_key(header::TRANSFER_ENCODING);
    let timeout = request
        .app_data::<actix_web::web::Data<super::state::AppState>>()
        .map(|state| state.body_timeout);
    let Some(timeout) = timeout.filter(|_| has_body) else {
        return Ok(next.call(request).await?.map_into_left_body());
    };
    let held = HeldBody(Rc::new(RefCell::new(request.take_payload())));
    let timed: actix_http::BoxedPayloadStream = Box::pin(TimedPayload {
        payload: held.clone(),
        deadline: Box::pin(actix_web::rt::time::sleep(timeout)),
    });
    request.set_payload(timed.into());
    // The version check answers its own refusals, so every answer comes back here.
    let response = next.call(request).await?;
    Ok(response
        .map_body(|_, body| HoldingBody {
            body: BoxBody::new(body),
            _request_body: held,
        })
        .map_into_right_body())
}

/// A request's body, shared by the stream the app reads and the answer that keeps it alive.
#[derive(Clone)]
struct HeldBody(Rc<RefCell<actix_web::dev::Payload>>);

/// An answer's body that holds its request's body until it is dropped, once written.
pub struct HoldingBody {
    body: BoxBody,
    _request_body: HeldBody,
}

impl MessageBody for HoldingBody {
    type Error = <BoxBody as MessageBody>::Error;

    fn size(&self) -> actix_web::body::BodySize {
        self.body.size()
    }

    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<actix_web::web::Bytes, Self::Error>>> {
        std::pin::Pin::new(&mut self.body).poll_next(cx)
    }
}

/// A request body that fails with `TimedOut` once its deadline passes.
struct TimedPayload {
    payload: HeldBody,
    deadline: std::pin::Pin<Box<actix_web::rt::time::Sleep>>,
}

impl futures_core::Stream for TimedPayload {
    type Item = Result<actix_web::web::Bytes, actix_web::error::PayloadError>;

    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Self::Item>> {
        use std::future::Future;
        use std::task::Poll;
        let polled = std::pin::Pin::new(&mut *self.payload.0.borrow_mut()).poll_next(cx);
        if let Poll::Ready(item) = polled {
            return Poll::Ready(item);
        }
        match self.deadline.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Some(Err(actix_web::error::PayloadError::Io(
                std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    "the request body did not arrive in time",
                ),
            )))),
            Poll::Pending => Poll::Pending,
        }
    }
}

pub const REQUEST_ID_HEADER: &str = "x-request-id";

/// The request's id: the client's `X-Request-Id` when it is 1 to 128 visible ASCII characters
/// (so it can go into a log line and a header as it is), else a new one.
fn request_id(request: &ServiceRequest) -> String {
    request
        .headers()
        .get(REQUEST_ID_HEADER)
        .and_then(|value| value.to_str().ok())
        .filter(|id| (1..=128).contains(&id.len()) && id.bytes().all(|b| b.is_ascii_graphic()))
        .map_or_else(new_request_id, str::to_string)
}

/// A new request id: 32 hex characters, a random half drawn once per process and a counter.
/// Unique across processes and restarts (the random half), without a system call per request;
/// an id names a request in logs and is no secret.
pub(crate) fn new_request_id() -> String {
    static PROCESS: OnceLock<String> = OnceLock::new();
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let process = PROCESS.get_or_init(|| random_hex(8));
    format!("{process}{:016x}", NEXT.fetch_add(1, Ordering::Relaxed))
}

/// The request's span, which every log line of its handling names, including those of its
/// storage work on the blocking pool ([`super::state::run_blocking`]): its id, method, route
/// pattern and shop (the `{shop}` segment of the path, when the route has one).
fn request_span(request: &ServiceRequest, id: &str, pattern: Option<&str>) -> tracing::Span {
    let shop = pattern.and_then(|pattern| {
        pattern
            .split('/')
            .zip(request.path().split('/'))
            .find(|(part, _)| *part == "{shop}")
            .map(|(_, shop)| shop)
    });
    // At error level, so that it is there whenever any line is (`warn` still names requests).
    tracing::span!(
        target: "mercer::http",
        tracing::Level::ERROR,
        "request",
        request_id = id,
        method = request.method().as_str(),
        route = pattern.unwrap_or("unmatched"),
        shop = shop,
        // The answer's status, recorded for traces only.
        status = tracing::field::Empty,
    )
}

/// The pattern of the route the request's path matches; None when none does. The busiest
/// routes' pattern is told without actix's matching, which runs a regex.
fn route_pattern(request: &ServiceRequest) -> Option<Cow<'static, str>> {
    match super::routes::event_route_pattern(request.path()) {
        Some(pattern) => Some(Cow::Borrowed(pattern)),
        None => request.match_pattern().map(Cow::Owned),
    }
}

/// Polls `future` within the request `id`: each poll runs under the domain's
/// [`jobs::within_request`], so every job the handling enqueues keeps the request's id, on the
/// worker thread and (through [`super::state::run_blocking`], which reads it when called) on
/// the blocking pool. Set per poll, as a span is entered, because a worker thread interleaves
/// many requests.
pub(crate) async fn within_request<F: Future>(id: Arc<str>, future: F) -> F::Output {
    let mut future = std::pin::pin!(future);
    std::future::poll_fn(|cx| jobs::within_request(Some(id.clone()), || future.as_mut().poll(cx)))
        .await
}

/// One line per request: method, path (never the query, which may carry a token), status, time
/// taken and request id; headers and bodies are not logged. Every answer carries its request id
/// in `X-Request-Id`, errors included. The request is handled in its span ([`request_span`]) and
/// within its id ([`within_request`]), which the jobs it enqueues keep.
pub async fn log_request(
    request: ServiceRequest,
    next: Next<impl MessageBody>,
) -> Result<ServiceResponse<impl MessageBody>, Error> {
    use tracing::Instrument;

    let started = Instant::now();
    let method = request.method().clone();
    let path = request.path().to_string();
    let id = request_id(&request);
    let id_header = HeaderValue::from_str(&id).ok();
    let header_name = HeaderName::from_static(REQUEST_ID_HEADER);
    let pattern = route_pattern(&request);
    let span = request_span(&request, &id, pattern.as_deref());
    let traced = jobs::traces_exported().then(|| span.clone());
    let handling = next.call(request).instrument(span);
    let result = match within_request(Arc::from(id.as_str()), handling).await {
        Ok(mut response) => {
            if let Some(value) = id_header {
                response.headers_mut().insert(header_name, value);
            }
            Ok(response)
        }
        // An error that is no answer yet (the version check's) is made one here, so that it
        // carries the id too.
        Err(error) => {
            let mut answer = error.error_response();
            if let Some(value) = id_header {
                answer.headers_mut().insert(header_name, value);
            }
            Err(InternalError::from_response(error.to_string(), answer))
        }
    };
    let (status, route) = match &result {
        // Routes by their pattern, so shop identifiers and ids do not make a label each.
        Ok(response) => (
            response.status(),
            pattern.map_or_else(|| "unmatched".to_string(), Cow::into_owned),
        ),
        Err(error) => (error.status_code(), "unmatched".to_string()),
    };
    if let Some(span) = traced {
        span.record("status", status.as_u16());
    }
    let elapsed = started.elapsed().as_secs_f64();
    // The cause of a failure on Mercer's side (or a remote party's), logged once, here, where
    // the request's method, route and id are known.
    let cause = match &result {
        Ok(response) => response.response().error(),
        // Only the version check's errors get here: the client's, without a cause.
        Err(_) => None,
    }
    .and_then(|error| error.as_error::<ApiError>())
    .and_then(ApiError::cause);
    if let Some(cause) = cause {
        if status == actix_web::http::StatusCode::INTERNAL_SERVER_ERROR {
            tracing::error!(target: "mercer::http", request_id = %id, "{method} {route} failed: {cause}");
        } else {
            tracing::warn!(target: "mercer::http", request_id = %id, "{method} {route} failed: {cause}");
        }
    }
    // Every label takes a value from a fixed set, whatever the client sends: a method of its
    // own invention or an unknown path would otherwise make a series each, for good.
    record_request(method_label(&method), route, status.as_u16(), elapsed);
    // Outside the request's span, which would name the id a second time: the id is a field.
    tracing::info!(target: "mercer::http", request_id = %id, "{method} {path} {} {:.1}ms", status.as_u16(), elapsed * 1000.0);
    result.map_err(Error::from)
}

/// Counts a request in `mercer_http_requests_total` and its time in
/// `mercer_http_request_seconds`. Each worker thread keeps the handles of the label sets it has
/// seen: asking the recorder for them on every request hashed and copied the labels each time.
fn record_request(method: &'static str, route: String, status: u16, seconds: f64) {
    type Handles = HashMap<(&'static str, String, u16), (metrics::Counter, metrics::Histogram)>;
    thread_local! {
        static HANDLES: RefCell<Handles> = RefCell::default();
    }
    HANDLES.with_borrow_mut(|handles| {
        let (counter, histogram) =
            handles
                .entry((method, route, status))
                .or_insert_with_key(|(method, route, status)| {
                    let labels = [
                        ("method", method.to_string()),
                        ("route", route.clone()),
                        ("status", status.to_string()),
                    ];
                    (
                        metrics::counter!("mercer_http_requests_total", &labels),
                        metrics::histogram!("mercer_http_request_seconds", &labels[..2]),
                    )
                });
        counter.increment(1);
        histogram.record(seconds);
    });
}

/// The method as a metrics label: one of HTTP's own, or `other`.
fn method_label(method: &Method) -> &'static str {
    const KNOWN: [&str; 9] = [
        "GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "CONNECT", "TRACE",
    ];
    KNOWN
        .into_iter()
        .find(|known| *known == method.as_str())
        .unwrap_or("other")
}

/// CORS for routes that pages of any origin call with credentials (the storefront's: the
/// vendor's library runs on the shop's pages with `mode: 'cors'` and `credentials: 'include'`).
/// A preflight (`OPTIONS` with `Access-Control-Request-Method`) is answered here, 204, with
/// the methods a route may have and the headers asked for; every other answer, errors included,
/// names the origin so the page can read it. The origin is named, never `*`, which browsers
/// refuse with credentials. A preflight for a method the route lacks is answered the same: the
/// route's own 405 follows if the page sends it anyway. Only for routes that read no cookie:
/// any page may call them with whatever credentials the browser holds.
pub async fn cors_any_origin(
    request: ServiceRequest,
    next: Next<impl MessageBody>,
) -> Result<ServiceResponse<EitherBody<impl MessageBody>>, Error> {
    let Some(origin) = request.headers().get(header::ORIGIN).cloned() else {
        return Ok(next.call(request).await?.map_into_left_body());
    };
    let preflight = request.method() == Method::OPTIONS
        && request
            .headers()
            .contains_key(header::ACCESS_CONTROL_REQUEST_METHOD);
    if preflight {
        let mut answer = HttpResponse::NoContent();
        answer
            .insert_header((
                header::ACCESS_CONTROL_ALLOW_METHODS,
                "GET, POST, PUT, PATCH, DELETE",
            ))
            .insert_header((header::ACCESS_CONTROL_MAX_AGE, "3600"));
        if let Some(asked) = request
            .headers()
            .get(header::ACCESS_CONTROL_REQUEST_HEADERS)
        {
            answer.insert_header((header::ACCESS_CONTROL_ALLOW_HEADERS, asked.clone()));
        }
        let mut answer = answer.finish();
        allow_origin(answer.headers_mut(), origin);
        answer.headers_mut().append(
            header::VARY,
            HeaderValue::from_static(
                "Access-Control-Request-Method, Access-Control-Request-Headers",
            ),
        );
        return Ok(request.into_response(answer).map_into_right_body());
    }
    match next.call(request).await {
        Ok(mut response) => {
            allow_origin(response.headers_mut(), origin);
            response.headers_mut().insert(
                header::ACCESS_CONTROL_EXPOSE_HEADERS,
                HeaderValue::from_static("x-request-id, svc-api-version-date"),
            );
            Ok(response.map_into_left_body())
        }
        // An error that is no answer yet is made one here, so that it carries the origin too.
        Err(error) => {
            let mut answer = error.error_response();
            allow_origin(answer.headers_mut(), origin);
            Err(InternalError::from_response(error.to_string(), answer).into())
        }
    }
}

/// The headers that let a page of `origin` read an answer made with credentials.
fn allow_origin(headers: &mut HeaderMap, origin: HeaderValue) {
    headers.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin);
    headers.insert(
        header::ACCESS_CONTROL_ALLOW_CREDENTIALS,
        HeaderValue::from_static("true"),
    );
    headers.append(header::VARY, HeaderValue::from_static("Origin"));
}

#[cfg(test)]
mod tests {
    use actix_web::middleware::from_fn;
    use actix_web::{App, HttpResponse, test, web};

    use super::*;

    /// A request's storage work on the blocking pool runs within the id its answer carries, so
    /// the jobs it enqueues keep that id.
    #[actix_web::test]
    async fn a_requests_blocking_work_runs_within_its_id() {
        let app = test::init_service(App::new().wrap(from_fn(log_request)).route(
            "/",
            web::get().to(|| async {
                let seen = super::super::state::run_blocking(|| {
                    Ok(jobs::current_request_id().map(|id| id.to_string()))
                })
                .await;
                HttpResponse::Ok().body(seen.ok().flatten().unwrap_or_default())
            }),
        ))
        .await;
        let request = test::TestRequest::get()
            .uri("/")
            .insert_header((REQUEST_ID_HEADER, "req-9"))
            .to_request();
        let answer = test::call_service(&app, request).await;
        assert_eq!(
            answer
                .headers()
                .get(REQUEST_ID_HEADER)
                .map(HeaderValue::as_bytes),
            Some(&b"req-9"[..])
        );
        assert_eq!(test::read_body(answer).await, "req-9");
        assert_eq!(jobs::current_request_id(), None);
    }
}
