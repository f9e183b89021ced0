//! The console's sign-in and sign-out, and its audit log page. Sign-in shares the consent
//! page's limits: the per-address limiter of this process and the lock per account and client
//! the domain keeps.

use actix_web::http::{StatusCode, header};
use actix_web::{HttpRequest, HttpResponse, web};
use askama::Template;
use mercer_domain::DomainError;
use mercer_domain::access::console::{self, AuditEntry, ConsoleSignIn};
use mercer_domain::access::credentials::random_hex;
use mercer_domain::access::oauth;
use mercer_domain::access::secrets::SecretKind;
use mercer_domain::kernel::ids::AuditEntryId;
use serde::Deserialize;

use crate::http::console::{
    self as shared, ActionForm, Ask, Chrome, ConsoleError, PAGE_SIZE, SIGN_IN_COOKIE, Staff, query,
    render, render_with, see_other, when,
};
use crate::http::error::ApiError;
use crate::http::extract::RawBody;
use crate::http::sign_in_limiter;
use crate::http::state::{AppState, run_blocking};

const WRONG_CREDENTIALS: &str = "The shop, email or password is not right.";

#[derive(Template)]
#[template(path = "console/sign_in.html")]
struct SignInPage<'a> {
    csrf: &'a str,
    shop: &'a str,
    email: &'a str,
    alert: Option<String>,
}

/// The sign-in page, with a fresh CSRF token in its form and in a cookie beside it (there is no
/// session yet to derive one from).
fn sign_in_page(
    request: &HttpRequest,
    status: StatusCode,
    shop: &str,
    email: &str,
    alert: Option<String>,
) -> Result<HttpResponse, ConsoleError> {
    let csrf = random_hex(16);
    let mut answer = render_with(
        status,
        &SignInPage {
            csrf: &csrf,
            shop,
            email,
            alert,
        },
    )?;
    let cookie = shared::set_cookie(request, SIGN_IN_COOKIE, &csrf, 60 * 60);
    if let Ok(value) = header::HeaderValue::from_str(&cookie) {
        answer.headers_mut().append(header::SET_COOKIE, value);
    }
    Ok(answer)
}

/// `GET /console/sign-in`
pub async fn sign_in_form(request: HttpRequest) -> Result<HttpResponse, ConsoleError> {
    let shop: ShopQuery = query(&request);
    sign_in_page(&request, StatusCode::OK, &shop.shop, "", None)
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct ShopQuery {
    shop: String,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct SignInFields {
    csrf: String,
    shop: String,
    email: String,
    password: String,
}

/// `POST /console/sign-in`: a session cookie and on to the overview, or the form again.
pub async fn sign_in(
    state: web::Data<AppState>,
    request: HttpRequest,
    body: RawBody,
) -> Result<HttpResponse, ConsoleError> {
    let bytes = body.bytes()?;
    // A NUL cannot be looked up in PostgreSQL's text: refused as the consent page refuses it.
    if super::oauth::form_holds_nul(&bytes) {
        return Err(ConsoleError::BadForm);
    }
    let fields: SignInFields =
        serde_urlencoded::from_bytes(&bytes).map_err(|_| ConsoleError::BadForm)?;
    let expected = shared::cookie(&request, SIGN_IN_COOKIE).unwrap_or_default();
    if fields.csrf.is_empty() || fields.csrf != expected {
        return Err(ConsoleError::Csrf);
    }
    let again = |status, alert: String| {
        sign_in_page(&request, status, &fields.shop, &fields.email, Some(alert))
    };
    let too_many = |seconds: u64| {
        again(
            StatusCode::TOO_MANY_REQUESTS,
            format!("Too many failed sign-ins. Try again in {seconds} seconds."),
        )
    };
    let address = state.client_address(&request);
    if let Err(wait) = state.sign_ins.begin(address) {
        return too_many(wait.as_secs().max(1));
    }
    let client = sign_in_limiter::client_key(address).to_string();
    let (shop, email) = (fields.shop.clone(), fields.email.clone());
    let attempt = state
        .read(move |tx| oauth::begin_sign_in(tx, &shop, &email, &client))
        .await?;
    let Some(_claim) = state.sign_ins.claim_account(&attempt.key) else {
        return too_many(1);
    };
    let Ok(_permit) = state.sign_ins.checks.acquire().await else {
        return Err(crate::http::error::ApiError::internal()
            .with_cause("the password check limiter is closed")
            .into());
    };
    let (store, password, now) = (state.store.clone(), fields.password.clone(), state.now());
    match run_blocking(move || console::sign_in(&store, attempt, &password, now)).await? {
        ConsoleSignIn::Locked {
            retry_after_seconds,
        } => too_many(u64::try_from(retry_after_seconds).unwrap_or(1)),
        ConsoleSignIn::WrongCredentials => {
            again(StatusCode::UNAUTHORIZED, WRONG_CREDENTIALS.to_string())
        }
        ConsoleSignIn::SignedIn { token } => {
            state.sign_ins.forgive(address);
            Ok(HttpResponse::SeeOther()
                .insert_header((header::LOCATION, "/console"))
                .insert_header((header::CACHE_CONTROL, "no-store"))
                .append_header((
                    header::SET_COOKIE,
                    shared::session_cookie(&request, token.expose()),
                ))
                .append_header((
                    header::SET_COOKIE,
                    shared::set_cookie(&request, SIGN_IN_COOKIE, "", 0),
                ))
                .finish())
        }
    }
}

/// `POST /console/sign-out`: the session ends, and back to the sign-in page.
pub async fn sign_out(
    state: web::Data<AppState>,
    request: HttpRequest,
    Staff(staff): Staff,
    body: RawBody,
) -> Result<HttpResponse, ConsoleError> {
    let _: ActionForm = shared::form(&staff, body)?;
    if let Some(token) = shared::cookie(&request, shared::COOKIE) {
        state.write(move |tx| console::sign_out(tx, &token)).await?;
    }
    let mut answer = see_other(shared::SIGN_IN_PATH);
    if let Ok(value) =
        header::HeaderValue::from_str(&shared::set_cookie(&request, shared::COOKIE, "", 0))
    {
        answer.headers_mut().append(header::SET_COOKIE, value);
    }
    Ok(answer)
}

#[derive(Template)]
#[template(path = "console/audit.html")]
struct AuditPage {
    chrome: Chrome,
    entries: Vec<AuditEntry>,
    next_before: Option<i64>,
}

impl AuditPage {
    fn when(&self, entry: &AuditEntry) -> String {
        when(&entry.at)
    }
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct PageQuery {
    before: Option<i64>,
}

/// `GET /console/audit`: who did what in the console, newest first.
pub async fn audit(
    state: web::Data<AppState>,
    request: HttpRequest,
    Staff(staff): Staff,
) -> Result<HttpResponse, ConsoleError> {
    let page: PageQuery = query(&request);
    let shop_id = staff.shop.id;
    let entries = state
        .read(move |tx| console::audit_log(tx, shop_id, page.before.map(AuditEntryId), PAGE_SIZE))
        .await?;
    let next_before = (entries.len() == PAGE_SIZE)
        .then(|| entries.last().map(|entry| entry.id.0))
        .flatten();
    render(&AuditPage {
        chrome: Chrome::of(&staff, "audit"),
        entries,
        next_before,
    })
}

#[derive(Template)]
#[template(path = "console/secret.html")]
struct SecretPage<'a> {
    chrome: Chrome,
    kind: &'a str,
    secret: &'a str,
    previous_valid_until: Option<String>,
}

/// `POST /console/secrets/{kind}/rotate`: asks to confirm, then rotates the secret and shows
/// the new one this once (in the answer to the post, never stored by the browser: the page is
/// `no-store`, and the audit log names only the kind).
pub async fn rotate_secret(
    state: web::Data<AppState>,
    request: HttpRequest,
    path: web::Path<String>,
    Staff(staff): Staff,
    body: RawBody,
) -> Result<HttpResponse, ConsoleError> {
    let kind = SecretKind::parse(&path.into_inner())
        .filter(|kind| console::ROTATABLE_SECRETS.contains(kind))
        .ok_or_else(|| ConsoleError::Api(ApiError::from(DomainError::not_found("secret"))))?;
    let ask = Ask {
        nav: "connector",
        question: format!(
            "Make a new {} secret? It is shown once; the previous one still verifies for 24 \
             hours.",
            kind.as_str()
        ),
        button: "Rotate",
        back: "/console/connector".to_string(),
    };
    if let Some(page) = shared::ask_first(&request, &staff, body, &ask)? {
        return Ok(page);
    }
    let (store, now, by) = (state.store.clone(), state.now(), staff.clone());
    let rotated = run_blocking(move || console::rotate_shop_secret(&store, &by, kind, now)).await?;
    render(&SecretPage {
        chrome: Chrome::of(&staff, "connector"),
        kind: kind.as_str(),
        secret: rotated.current.expose(),
        previous_valid_until: rotated.previous_valid_until.as_ref().map(when),
    })
}
