//! What every page of the operator console (`/console`) shares: the session cookie and the
//! signed-in staff member ([`Staff`]), CSRF-checked forms, the page chrome, rendering, and the
//! errors a page answers (HTML, not the API's JSON). The pages themselves live in each
//! feature's route folder (`routes/<feature>/console.rs`).

use std::future::Future;
use std::pin::Pin;

use actix_web::body::{BoxBody, MessageBody};
use actix_web::dev::{Payload, ServiceRequest, ServiceResponse};
use actix_web::http::{Method, StatusCode, header};
use actix_web::middleware::Next;
use actix_web::{FromRequest, HttpRequest, HttpResponse, ResponseError, web};
use askama::Template;
use mercer_domain::access::console::{self, ConsoleStaff, SESSION_LIFETIME_SECONDS};
use mercer_domain::webhooks::log::AttemptShown;
use serde::de::DeserializeOwned;

use crate::http::error::ApiError;
use crate::http::extract::RawBody;
use crate::http::html;
use crate::http::state::AppState;

/// The session cookie's name.
pub const COOKIE: &str = "mercer_console";
/// The cookie that carries the sign-in form's CSRF token, before there is a session.
pub const SIGN_IN_COOKIE: &str = "mercer_console_sign_in";
/// Where a browser without a session is sent.
pub const SIGN_IN_PATH: &str = "/console/sign-in";
/// Rows per page of every list.
pub const PAGE_SIZE: usize = 50;

/// The value of the request's cookie `name`, if it sent one.
pub fn cookie(request: &HttpRequest, name: &str) -> Option<String> {
    request
        .headers()
        .get_all(header::COOKIE)
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(key, _)| *key == name)
        .map(|(_, value)| value.to_string())
}

/// A `Set-Cookie` value for the console: HttpOnly, SameSite=Strict, on `/console` only, and
/// Secure when the browser reached Mercer over TLS (directly or through a proxy that says so).
pub fn set_cookie(request: &HttpRequest, name: &str, value: &str, max_age: i64) -> String {
    let secure = if request.connection_info().scheme() == "https" {
        "; Secure"
    } else {
        ""
    };
    format!("{name}={value}; Path=/console; HttpOnly; SameSite=Strict; Max-Age={max_age}{secure}")
}

/// The session cookie for a new session.
pub fn session_cookie(request: &HttpRequest, token: &str) -> String {
    set_cookie(request, COOKIE, token, SESSION_LIFETIME_SECONDS)
}

/// The signed-in staff member a page is for; without a live session, the page answers with a
/// redirect to the sign-in page.
pub struct Staff(pub ConsoleStaff);

impl FromRequest for Staff {
    type Error = ConsoleError;
    type Future = Pin<Box<dyn Future<Output = Result<Self, ConsoleError>>>>;

    fn from_request(request: &HttpRequest, _: &mut Payload) -> Self::Future {
        let state = request.app_data::<web::Data<AppState>>().cloned();
        let token = cookie(request, COOKIE);
        Box::pin(async move {
            let (Some(state), Some(token)) = (state, token) else {
                return Err(ConsoleError::SignIn);
            };
            let now = state.now();
            let staff = state
                .read(move |tx| console::session(tx, &token, now))
                .await?
                .ok_or(ConsoleError::SignIn)?;
            if staff.stale {
                let seen = staff.clone();
                state
                    .write(move |tx| console::touch(tx, &seen, now))
                    .await?;
            }
            Ok(Staff(staff))
        })
    }
}

/// What a console page answers instead of its content.
#[derive(Debug)]
pub enum ConsoleError {
    /// No live session: to the sign-in page.
    SignIn,
    /// A form without the session's CSRF token.
    Csrf,
    /// A form that cannot be read.
    BadForm,
    /// What the domain or the store answered.
    Api(ApiError),
}

impl From<ApiError> for ConsoleError {
    fn from(error: ApiError) -> Self {
        ConsoleError::Api(error)
    }
}

impl std::fmt::Display for ConsoleError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ConsoleError::SignIn => f.write_str("sign in first"),
            ConsoleError::Csrf => f.write_str("the form's CSRF token is missing or wrong"),
            ConsoleError::BadForm => f.write_str("the form cannot be read"),
            ConsoleError::Api(error) => write!(f, "{}", error.status_and_message().1),
        }
    }
}

#[derive(Template)]
#[template(path = "console/error.html")]
struct ErrorPage<'a> {
    status: u16,
    message: &'a str,
}

impl ResponseError for ConsoleError {
    fn status_code(&self) -> StatusCode {
        match self {
            ConsoleError::SignIn => StatusCode::SEE_OTHER,
            ConsoleError::Csrf => StatusCode::FORBIDDEN,
            ConsoleError::BadForm => StatusCode::BAD_REQUEST,
            ConsoleError::Api(error) => error.status_and_message().0,
        }
    }

    fn error_response(&self) -> HttpResponse {
        if let ConsoleError::SignIn = self {
            return HttpResponse::SeeOther()
                .insert_header((header::LOCATION, SIGN_IN_PATH))
                .insert_header((header::CACHE_CONTROL, "no-store"))
                .finish();
        }
        let status = self.status_code();
        let message = match self {
            // The cause stays in the log; the page says only what the client may know.
            ConsoleError::Api(error) if error.status_and_message().0.is_server_error() => {
                "Something went wrong on Mercer's side. Try again in a moment.".to_string()
            }
            other => other.to_string(),
        };
        let html = ErrorPage {
            status: status.as_u16(),
            message: &message,
        }
        .render()
        .unwrap_or_else(|_| message.clone());
        html::page(status, html::CONSOLE_POLICY, html)
    }
}

/// The parts every signed-in page shows: whose shop, who is signed in, the page's place in the
/// navigation, and the CSRF token of its forms.
pub struct Chrome {
    pub shop: String,
    pub email: String,
    pub csrf: String,
    /// The navigation entry of this page (`overview`, `webhooks`…).
    pub active: &'static str,
}

impl Chrome {
    pub fn of(staff: &ConsoleStaff, active: &'static str) -> Chrome {
        Chrome {
            shop: staff.shop.shop_domain.clone(),
            email: staff.email.clone(),
            csrf: staff.csrf_token.clone(),
            active,
        }
    }

    /// The navigation: (path, label, whether it is this page).
    pub fn nav(&self) -> Vec<(&'static str, &'static str, bool)> {
        [
            ("/console", "Overview", "overview"),
            ("/console/webhooks", "Webhooks", "webhooks"),
            ("/console/connector", "Connector", "connector"),
            ("/console/checkouts", "Checkouts", "checkouts"),
            ("/console/jobs", "Jobs", "jobs"),
            ("/console/subscriptions", "Subscriptions", "subscriptions"),
            ("/console/customers", "Customers", "customers"),
            ("/console/orders", "Orders", "orders"),
            ("/console/boxes", "Boxes", "boxes"),
            ("/console/settings", "Settings", "settings"),
            ("/console/audit", "Audit log", "audit"),
        ]
        .into_iter()
        .map(|(path, label, key)| (path, label, key == self.active))
        .collect()
    }
}

/// A rendered page, 200.
pub fn render(template: &impl Template) -> Result<HttpResponse, ConsoleError> {
    render_with(StatusCode::OK, template)
}

/// A rendered page with `status`.
pub fn render_with(
    status: StatusCode,
    template: &impl Template,
) -> Result<HttpResponse, ConsoleError> {
    let html = template
        .render()
        .map_err(|error| ApiError::internal().with_cause(format!("template: {error}")))?;
    Ok(html::page(status, html::CONSOLE_POLICY, html))
}

/// After an action: back to `location` (post, redirect, get).
pub fn see_other(location: &str) -> HttpResponse {
    HttpResponse::SeeOther()
        .insert_header((header::LOCATION, location))
        .insert_header((header::CACHE_CONTROL, "no-store"))
        .finish()
}

/// A form with the session's CSRF token, as `T`; a missing or wrong token is 403.
pub fn form<T: DeserializeOwned + CsrfForm>(
    staff: &ConsoleStaff,
    body: RawBody,
) -> Result<T, ConsoleError> {
    let bytes = body.bytes()?;
    let fields: T = serde_urlencoded::from_bytes(&bytes).map_err(|_| ConsoleError::BadForm)?;
    if !console::csrf_matches(staff, fields.csrf()) {
        return Err(ConsoleError::Csrf);
    }
    Ok(fields)
}

/// A form that carries a CSRF token.
pub trait CsrfForm {
    fn csrf(&self) -> &str;
}

/// The form of an action: its CSRF token, and whether the staff member confirmed it (the first
/// post of an action asks them to).
#[derive(serde::Deserialize, Default)]
#[serde(default)]
pub struct ActionForm {
    pub csrf: String,
    pub confirm: String,
}

impl CsrfForm for ActionForm {
    fn csrf(&self) -> &str {
        &self.csrf
    }
}

impl ActionForm {
    pub fn confirmed(&self) -> bool {
        self.confirm == "yes"
    }
}

/// The page that asks to confirm an action: what it does, and a button that posts it again,
/// confirmed.
#[derive(Template)]
#[template(path = "console/confirm.html")]
struct ConfirmPage<'a> {
    pub chrome: Chrome,
    pub question: &'a str,
    pub action: &'a str,
    pub button: &'a str,
    pub back: &'a str,
}

/// What an action asks before it runs: the question, the button that confirms, and where the
/// browser goes afterwards (and back to, should the staff member not confirm).
pub struct Ask<'a> {
    /// The navigation entry the confirm page shows as current.
    pub nav: &'static str,
    pub question: String,
    pub button: &'a str,
    pub back: String,
}

/// An action's first step, for a form posted to `request`'s path: the page that asks to
/// confirm, or None when the form says the staff member did (a forged form is refused).
pub fn ask_first(
    request: &HttpRequest,
    staff: &ConsoleStaff,
    body: RawBody,
    ask: &Ask<'_>,
) -> Result<Option<HttpResponse>, ConsoleError> {
    let fields: ActionForm = form(staff, body)?;
    if fields.confirmed() {
        return Ok(None);
    }
    render(&ConfirmPage {
        chrome: Chrome::of(staff, ask.nav),
        question: &ask.question,
        action: request.path(),
        button: ask.button,
        back: &ask.back,
    })
    .map(Some)
}

/// An action's two steps ([`ask_first`]); once confirmed, `act` runs off the async threads (a
/// domain use case that records who did it), then the browser goes back.
pub async fn confirm_then<F>(
    request: &HttpRequest,
    staff: ConsoleStaff,
    body: RawBody,
    ask: Ask<'_>,
    act: F,
) -> Result<HttpResponse, ConsoleError>
where
    F: FnOnce(ConsoleStaff) -> Result<(), mercer_domain::DomainError> + Send + 'static,
{
    if let Some(page) = ask_first(request, &staff, body, &ask)? {
        return Ok(page);
    }
    crate::http::state::run_blocking(move || act(staff)).await?;
    let back = match Notice::of_action(request.path()) {
        Some(notice) => notice.on(&ask.back),
        None => ask.back.clone(),
    };
    Ok(see_other(&back))
}

/// What an action tells the staff member once it is done, on the page it goes back to. The
/// redirect carries only the notice's code (`?notice=job_cancelled`); the page shows the fixed
/// text of that code, so nothing of the request's own is echoed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Notice {
    Resent,
    Recovered,
    EventRetried,
    SyncStarted,
    JobRetried,
    JobCancelled,
    SubscriptionCancelled,
    SubscriptionPaused,
    SubscriptionResumed,
    OrderSkipped,
    DunningSaved,
    ReasonsSaved,
}

impl Notice {
    /// Every notice.
    pub const ALL: [Notice; 12] = [
        Notice::Resent,
        Notice::Recovered,
        Notice::EventRetried,
        Notice::SyncStarted,
        Notice::JobRetried,
        Notice::JobCancelled,
        Notice::SubscriptionCancelled,
        Notice::SubscriptionPaused,
        Notice::SubscriptionResumed,
        Notice::OrderSkipped,
        Notice::DunningSaved,
        Notice::ReasonsSaved,
    ];

    /// The code the redirect carries.
    pub fn code(self) -> &'static str {
        match self {
            Notice::Resent => "resent",
            Notice::Recovered => "recovered",
            Notice::EventRetried => "event_retried",
            Notice::SyncStarted => "sync_started",
            Notice::JobRetried => "job_retried",
            Notice::JobCancelled => "job_cancelled",
            Notice::SubscriptionCancelled => "subscription_cancelled",
            Notice::SubscriptionPaused => "subscription_paused",
            Notice::SubscriptionResumed => "subscription_resumed",
            Notice::OrderSkipped => "order_skipped",
            Notice::DunningSaved => "dunning_saved",
            Notice::ReasonsSaved => "reasons_saved",
        }
    }

    /// The notice of `code`; None for any other text.
    pub fn parse(code: &str) -> Option<Notice> {
        Notice::ALL.into_iter().find(|notice| notice.code() == code)
    }

    /// What the page says.
    pub fn text(self) -> &'static str {
        match self {
            Notice::Resent => "The message was queued to be sent again, with the same webhook-id.",
            Notice::Recovered => {
                "The endpoint is enabled, and the messages that failed since it started failing are queued again."
            }
            Notice::EventRetried => "The event is back in the queue, to be applied again.",
            Notice::SyncStarted => "The sync started.",
            Notice::JobRetried => "The job is queued again, due now.",
            Notice::JobCancelled => "The job is cancelled.",
            Notice::SubscriptionCancelled => "The subscription is cancelled.",
            Notice::SubscriptionPaused => "The subscription is paused.",
            Notice::SubscriptionResumed => "The subscription is active again.",
            Notice::OrderSkipped => "The next order is skipped.",
            Notice::DunningSaved => "The dunning policy is saved.",
            Notice::ReasonsSaved => "The cancellation reasons are saved.",
        }
    }

    /// `location` with this notice in its query.
    pub fn on(self, location: &str) -> String {
        let joint = if location.contains('?') { '&' } else { '?' };
        format!("{location}{joint}notice={}", self.code())
    }

    /// The notice of the action posted to `path` (an action of the console's, by its route).
    pub fn of_action(path: &str) -> Option<Notice> {
        let parts: Vec<&str> = path.trim_start_matches('/').split('/').collect();
        Some(match parts.as_slice() {
            ["console", "webhooks", "messages", _, "resend"] => Notice::Resent,
            ["console", "webhooks", "endpoints", _, "recover"] => Notice::Recovered,
            ["console", "connector", "events", _, "retry"] => Notice::EventRetried,
            ["console", "connector", "syncs", _] => Notice::SyncStarted,
            ["console", "jobs", _, "retry"] => Notice::JobRetried,
            ["console", "jobs", _, "cancel"] => Notice::JobCancelled,
            ["console", "subscriptions", _, "cancel"] => Notice::SubscriptionCancelled,
            ["console", "subscriptions", _, "pause"] => Notice::SubscriptionPaused,
            ["console", "subscriptions", _, "resume"] => Notice::SubscriptionResumed,
            ["console", "subscriptions", _, "skip"] => Notice::OrderSkipped,
            _ => return None,
        })
    }
}

/// Where a console page shows its notice (in `layout.html`).
pub const NOTICE_MARK: &str = "<!--notice-->";

/// Shows the notice a console page's query names (`notice=<code>`, see [`Notice`]) in the
/// page, at [`NOTICE_MARK`]: every page gets it, whichever feature renders it. An unknown code
/// shows nothing.
pub async fn show_notice(
    request: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<BoxBody>, actix_web::Error> {
    let notice = (request.method() == Method::GET && request.path().starts_with("/console"))
        .then(|| query::<NoticeQuery>(request.request()).notice)
        .and_then(|code| Notice::parse(&code));
    let response = next.call(request).await?.map_into_boxed_body();
    let Some(notice) = notice else {
        return Ok(response);
    };
    if response.status() != StatusCode::OK {
        return Ok(response);
    }
    let (request, answer) = response.into_parts();
    let (head, body) = answer.into_parts();
    let bytes = actix_web::body::to_bytes(body)
        .await
        .map_err(|error| actix_web::error::ErrorInternalServerError(error.to_string()))?;
    let banner = format!(
        "<p class=\"notice\" role=\"status\" id=\"notice\" data-notice=\"{}\">{}</p>",
        notice.code(),
        notice.text()
    );
    let html = String::from_utf8_lossy(&bytes).replacen(NOTICE_MARK, &banner, 1);
    Ok(ServiceResponse::new(
        request,
        head.set_body(html).map_into_boxed_body(),
    ))
}

#[derive(serde::Deserialize, Default)]
#[serde(default)]
struct NoticeQuery {
    notice: String,
}

/// A page's query, read leniently: a value that does not parse is as if absent.
pub fn query<T: DeserializeOwned + Default>(request: &HttpRequest) -> T {
    serde_urlencoded::from_str(request.query_string()).unwrap_or_default()
}

/// An attempt's outcome in a few words: its status, or why there was none.
pub fn answer(attempt: &AttemptShown) -> String {
    match (attempt.status, &attempt.error) {
        (Some(status), _) => status.to_string(),
        (None, Some(error)) => error.clone(),
        (None, None) => "no answer".to_string(),
    }
}

/// A time as pages show it: UTC to the second.
pub fn when(at: &mercer_domain::Timestamp) -> String {
    let text = at.to_rfc3339();
    text.get(..19).map_or(text.clone(), |prefix| {
        format!("{} UTC", prefix.replace('T', " "))
    })
}
