//! The OAuth 2.0 authorization code flow: the sign-in and consent page, and the
//! token endpoint. The page is plain server-rendered HTML with a form: it works without
//! JavaScript. Errors of the token endpoint are RFC 6749 section 5.2 JSON, not Mercer's JSON error body.

use actix_web::http::{StatusCode, header};
use actix_web::{HttpRequest, HttpResponse, ResponseError, web};
use askama::Template;
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use mercer_domain::access::credentials::Scope;
use mercer_domain::access::oauth::{
    self, AuthorizeError, AuthorizeForm, AuthorizeParams, OAuthError, TokenParams, ValidAuthorize,
};
use mercer_domain::kernel::limits;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa::openapi::schema::{AnyOfBuilder, Schema};
use utoipa::openapi::{Ref, RefOr};

use crate::http::error::ApiError;
use crate::http::extract::RawBody;
use crate::http::html;
use crate::http::openapi::ErrorBody;
use crate::http::sign_in_limiter;
use crate::http::state::{AppState, run_blocking};

const AUTHORIZE_PATH: &str = "/accounts/dashboard/authorize";
const WRONG_CREDENTIALS: &str = "The shop, email or password is not right.";

/// What a staff member may let an app do, in words.
fn scope_text(scope: Scope) -> &'static str {
    match scope {
        Scope::ReadCustomers => "See customers",
        Scope::WriteCustomers => "Change customers",
        Scope::ReadOrders => "See orders",
        Scope::WriteOrders => "Create and change orders",
        Scope::ReadProducts => "See products",
        Scope::WriteProducts => "Change products",
        Scope::ReadShopSettings => "See shop settings",
        Scope::ModifyShopSettings => "Change shop settings (overrides, webhooks)",
        Scope::ReadSubscriptions => "See subscriptions",
        Scope::WriteSubscriptions => "Create and change subscriptions",
        Scope::ReadSubscriptionGroups => "See subscription groups",
        Scope::WriteSubscriptionGroups => "Change subscription groups",
    }
}

/// An HTML answer that no one may frame or cache; a page that cannot be rendered is a 500.
fn page(status: StatusCode, template: &impl Template) -> HttpResponse {
    match template.render() {
        Ok(html) => html::page(status, html::CONSENT_POLICY, html),
        Err(error) => ApiError::internal()
            .with_cause(format!("template: {error}"))
            .error_response(),
    }
}

#[derive(Template)]
#[template(path = "oauth/error.html")]
struct ErrorPage<'a> {
    message: &'a str,
}

fn error_page(status: StatusCode, message: &str) -> HttpResponse {
    page(status, &ErrorPage { message })
}

/// The sign-in and consent form, with the request carried in hidden fields.
#[derive(Template)]
#[template(path = "oauth/consent.html")]
struct ConsentPage<'a> {
    app: &'a str,
    /// Each scope asked for: in words, and its name.
    scopes: Vec<(&'static str, &'static str)>,
    alert: Option<&'a str>,
    action: &'static str,
    hidden: Vec<(&'static str, &'a str)>,
    shop: &'a str,
    email: &'a str,
    /// The host the browser goes back to.
    destination: String,
}

fn consent_page(
    status: StatusCode,
    request: &ValidAuthorize,
    params: &AuthorizeParams,
    alert: Option<&str>,
    email: &str,
) -> HttpResponse {
    let hidden = [
        ("client_id", &params.client_id),
        ("redirect_uri", &params.redirect_uri),
        ("scope", &params.scope),
        ("state", &params.state),
        ("response_type", &params.response_type),
        ("code_challenge", &params.code_challenge),
        ("code_challenge_method", &params.code_challenge_method),
    ]
    .into_iter()
    .filter_map(|(name, value)| value.as_deref().map(|value| (name, value)))
    .collect();
    let destination = url::Url::parse(&request.redirect_uri)
        .ok()
        .and_then(|url| url.host_str().map(str::to_string))
        .unwrap_or_default();
    let template = ConsentPage {
        app: &request.app.name,
        scopes: request
            .scopes
            .iter()
            .map(|scope| (scope_text(scope), scope.as_str()))
            .collect(),
        alert,
        action: AUTHORIZE_PATH,
        hidden,
        shop: params.shop.as_deref().unwrap_or_default(),
        email,
        destination,
    };
    page(status, &template)
}

/// Back to the client: `redirect_uri` with these query pairs added (RFC 6749 section 4.1.2).
fn redirect_to(redirect_uri: &str, pairs: &[(&str, Option<&str>)]) -> HttpResponse {
    let Ok(mut url) = url::Url::parse(redirect_uri) else {
        return error_page(StatusCode::BAD_REQUEST, "The redirect_uri is not a URL.");
    };
    {
        let mut query = url.query_pairs_mut();
        for (name, value) in pairs {
            if let Some(value) = value {
                query.append_pair(name, value);
            }
        }
    }
    HttpResponse::SeeOther()
        .insert_header((header::LOCATION, url.to_string()))
        .insert_header((header::CACHE_CONTROL, "no-store"))
        .finish()
}

fn refuse(error: AuthorizeError) -> HttpResponse {
    match error {
        AuthorizeError::NoRedirect(message) => error_page(StatusCode::BAD_REQUEST, &message),
        AuthorizeError::Redirect {
            redirect_uri,
            error,
            description,
            state,
        } => redirect_to(
            &redirect_uri,
            &[
                ("error", Some(error)),
                ("error_description", Some(&description)),
                ("state", state.as_deref()),
            ],
        ),
    }
}

async fn check(
    state: &AppState,
    params: AuthorizeParams,
) -> Result<Result<(ValidAuthorize, AuthorizeParams), AuthorizeError>, ApiError> {
    state
        .read(move |tx| Ok(oauth::check_authorize(tx, &params).map(|valid| (valid, params))))
        .await
}

/// Shows the OAuth sign-in and consent page.
///
/// The start of the OAuth 2.0 authorization code flow (RFC 6749 section 4.1.1): an HTML page with a
/// form that signs a staff member in and asks them to approve the app's scopes. A request that
/// cannot be used goes back to the app's `redirect_uri` with the error, or, when there is no
/// `redirect_uri` to trust, is an HTML error page.
#[utoipa::path(get, path = "/accounts/dashboard/authorize", operation_id = "show_oauth_authorize_page", summary = "Show the OAuth sign-in and consent page", tag = "OAuth",
    params(
        ("client_id" = Option<String>, Query, description = "The app's client id; required"),
        ("redirect_uri" = Option<String>, Query, description = "Where to send the browser back; may be left out when the app registered only one"),
        ("scope" = Option<String>, Query, description = "The scopes asked for, separated by spaces; required"),
        ("state" = Option<String>, Query, description = "An opaque value sent back unchanged with the code or the error"),
        ("response_type" = Option<String>, Query, description = "Must be `code`"),
        ("code_challenge" = Option<String>, Query, description = "The PKCE challenge (43 to 128 characters of base64url), if the client uses PKCE"),
        ("code_challenge_method" = Option<String>, Query, description = "Must be `S256` when a challenge is given"),
        ("shop" = Option<String>, Query, description = "The shop, by its domain or its identifier, filled in the form")),
    responses(
        (status = 200, description = "The sign-in and consent page", content_type = "text/html", body = String),
        (status = 303, description = "Back to the app: `redirect_uri` with `error`, `error_description` and `state` (RFC 6749 section 4.1.2.1)",
            headers(("Location" = String, description = "The app's `redirect_uri` with the error"))),
        (status = 400, description = "The request cannot be used and names no `redirect_uri` to go back to (an HTML page), or a bad `Svc-API-Version-Date` (the JSON error)",
            content((String = "text/html"), (ErrorBody = "application/json")))))]
pub async fn authorize_page(
    state: web::Data<AppState>,
    request: HttpRequest,
) -> Result<HttpResponse, ApiError> {
    let Ok(params) = serde_urlencoded::from_str::<AuthorizeParams>(request.query_string()) else {
        return Ok(error_page(
            StatusCode::BAD_REQUEST,
            "The request's query cannot be read.",
        ));
    };
    Ok(match check(&state, params).await? {
        Ok((valid, params)) => consent_page(StatusCode::OK, &valid, &params, None, ""),
        Err(error) => refuse(error),
    })
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct SignInFields {
    email: String,
    password: String,
    decision: String,
}

fn too_many(wait_seconds: u64) -> HttpResponse {
    let mut answer = error_page(
        StatusCode::TOO_MANY_REQUESTS,
        &format!("Too many failed sign-ins. Try again in {wait_seconds} seconds."),
    );
    if let Ok(value) = header::HeaderValue::from_str(&wait_seconds.to_string()) {
        answer.headers_mut().insert(header::RETRY_AFTER, value);
    }
    answer
}

/// Submits the OAuth sign-in and consent form.
///
/// The sign-in and consent page's form. Either way the browser goes back to the app's
/// `redirect_uri` (RFC 6749 section 4.1.2): with `code` and `state` once the staff member signed in
/// and approved, with `error=access_denied` when they denied. Wrong credentials show the page
/// again; repeated failures are refused for a while.
#[utoipa::path(post, path = "/accounts/dashboard/authorize", operation_id = "submit_oauth_authorize_form", summary = "Submit the OAuth sign-in and consent form", tag = "OAuth",
    request_body(content = AuthorizeForm, content_type = "application/x-www-form-urlencoded"),
    responses(
        (status = 303, description = "Back to the app: `redirect_uri` with `code` and `state` once approved, or with `error`, `error_description` and `state`",
            headers(("Location" = String, description = "The app's `redirect_uri` with the code or the error"))),
        (status = 400, description = "The form cannot be read, or the request cannot be used and names no `redirect_uri` to go back to (an HTML page); or a body that cannot be read or a bad `Svc-API-Version-Date` (the JSON error)",
            content((String = "text/html"), (ErrorBody = "application/json"))),
        (status = 401, description = "The shop, email or password is not right: the page again, with an alert", content_type = "text/html", body = String),
        (status = 429, description = "Too many failed sign-ins: an HTML page", content_type = "text/html", body = String,
            headers(("Retry-After" = i64, description = "Seconds to wait")))))]
pub async fn authorize_submit(
    state: web::Data<AppState>,
    request: HttpRequest,
    body: RawBody,
) -> Result<HttpResponse, ApiError> {
    let body = body.bytes()?;
    let (Ok(params), Ok(fields), false) = (
        serde_urlencoded::from_bytes::<AuthorizeParams>(&body),
        serde_urlencoded::from_bytes::<SignInFields>(&body),
        form_holds_nul(&body),
    ) else {
        return Ok(error_page(
            StatusCode::BAD_REQUEST,
            "The form cannot be read.",
        ));
    };
    let (valid, params) = match check(&state, params).await? {
        Ok(checked) => checked,
        Err(error) => return Ok(refuse(error)),
    };
    let back = |pairs: &[(&str, Option<&str>)]| redirect_to(&valid.redirect_uri, pairs);
    if fields.decision != "approve" {
        return Ok(back(&[
            ("error", Some("access_denied")),
            (
                "error_description",
                Some("the shop's staff denied the request"),
            ),
            ("state", valid.state.as_deref()),
        ]));
    }
    let address = state.client_address(&request);
    // Counted as a failure from here on, forgiven below if it succeeds.
    if let Err(wait) = state.sign_ins.begin(address) {
        return Ok(too_many(wait.as_secs().max(1)));
    }
    let (shop_reference, email) = (
        params.shop.clone().unwrap_or_default(),
        fields.email.clone(),
    );
    let client = sign_in_limiter::client_key(address).to_string();
    let now = state.now();
    let attempt = state
        .read(move |tx| oauth::begin_sign_in(tx, &shop_reference, &email, &client))
        .await?;
    // Whether or not the account exists, from here on it is answered the same way. One
    // attempt at a time per key, so a burst cannot outrun the lock; the lock is read once the
    // key is claimed, after the attempt before (which may have locked it) has ended.
    let Some(_claim) = state.sign_ins.claim_account(&attempt.key) else {
        return Ok(too_many(1));
    };
    let Ok(_permit) = state.sign_ins.checks.acquire().await else {
        return Err(ApiError::internal().with_cause("the password check limiter is closed"));
    };
    let (store, approved, password) = (state.store.clone(), valid.clone(), fields.password.clone());
    let outcome =
        run_blocking(move || oauth::sign_in(&store, &approved, attempt, &password, now)).await?;
    match outcome {
        oauth::SignIn::Locked {
            retry_after_seconds,
        } => Ok(too_many(u64::try_from(retry_after_seconds).unwrap_or(1))),
        oauth::SignIn::WrongCredentials => Ok(consent_page(
            StatusCode::UNAUTHORIZED,
            &valid,
            &params,
            Some(WRONG_CREDENTIALS),
            &fields.email,
        )),
        oauth::SignIn::Approved { code } => {
            state.sign_ins.forgive(address);
            Ok(back(&[
                ("code", Some(code.expose())),
                ("state", valid.state.as_deref()),
            ]))
        }
    }
}

/// An RFC 6749 section 5.2 error of the token endpoint: `{"error", "error_description"}`.
#[derive(Serialize, ToSchema)]
pub struct OAuthErrorBody<'a> {
    /// The RFC 6749 error code (`invalid_request`, `invalid_client`, `invalid_grant`,
    /// `unauthorized_client`, `unsupported_grant_type`, `invalid_scope`).
    error: &'a str,
    /// What went wrong, for a developer.
    error_description: &'a str,
}

/// A 400 of the token endpoint: RFC 6749's error, or the JSON error body when the request
/// is refused before the endpoint reads it (a bad `Svc-API-Version-Date`, a NUL in the query).
pub struct TokenRefusal;

impl utoipa::PartialSchema for TokenRefusal {
    fn schema() -> RefOr<Schema> {
        AnyOfBuilder::new()
            .item(Ref::from_schema_name(OAuthErrorBody::name()))
            .item(Ref::from_schema_name(ErrorBody::name()))
            .into()
    }
}

impl ToSchema for TokenRefusal {
    fn schemas(schemas: &mut Vec<(String, RefOr<Schema>)>) {
        use utoipa::PartialSchema;
        schemas.push((
            OAuthErrorBody::name().into_owned(),
            OAuthErrorBody::schema(),
        ));
    }
}

/// A token the code was exchanged for (RFC 6749 section 5.1).
#[derive(Serialize, ToSchema)]
pub struct OAuthToken<'a> {
    /// The new API access token, shown this once.
    access_token: &'a str,
    /// Always `Bearer`.
    #[schema(pattern = "^Bearer$")]
    token_type: &'static str,
    /// The scopes the token has, separated by spaces: those the staff member approved.
    scope: String,
    /// The identifier of the shop the token is bound to.
    shop_identifier: &'a str,
}

fn oauth_error(error: &OAuthError) -> HttpResponse {
    let status = if error.error == "invalid_client" {
        StatusCode::UNAUTHORIZED
    } else {
        StatusCode::BAD_REQUEST
    };
    let mut answer = HttpResponse::build(status);
    answer
        .insert_header((header::CACHE_CONTROL, "no-store"))
        .insert_header((header::PRAGMA, "no-cache"));
    if status == StatusCode::UNAUTHORIZED {
        answer.insert_header((header::WWW_AUTHENTICATE, "Basic realm=\"mercer\""));
    }
    answer.json(OAuthErrorBody {
        error: error.error,
        error_description: &error.description,
    })
}

/// Client credentials from `Authorization: Basic` (RFC 6749 section 2.3.1), if sent.
fn basic_credentials(request: &HttpRequest) -> Option<(String, String)> {
    let value = request
        .headers()
        .get(header::AUTHORIZATION)?
        .to_str()
        .ok()?;
    let encoded = value.strip_prefix("Basic ")?;
    let decoded = String::from_utf8(STANDARD.decode(encoded.trim()).ok()?).ok()?;
    let (id, secret) = decoded.split_once(':')?;
    let unescape = |text: &str| {
        url::form_urlencoded::parse(format!("v={text}").as_bytes())
            .next()
            .map(|(_, value)| value.into_owned())
            .unwrap_or_default()
    };
    let (id, secret) = (unescape(id), unescape(secret));
    // No stored client id or secret holds a NUL; PostgreSQL could not even compare one.
    (!id.contains('\0') && !secret.contains('\0')).then_some((id, secret))
}

/// Whether a form body holds a NUL, raw or percent-encoded: no field Mercer reads may (no
/// database stores one), so such a form is refused before it is read.
pub(crate) fn form_holds_nul(body: &[u8]) -> bool {
    body.contains(&0) || body.windows(3).any(|window| window == b"%00")
}

/// Exchanges an authorization code for a token.
///
/// Trades the code, with the client secret or a PKCE verifier, for an API access token. The
/// parameters come as form fields (RFC 6749 section 4.1.3) or as JSON; the client may authenticate
/// with `Authorization: Basic` instead of `client_id` and `client_secret`. Errors are RFC 6749
/// section 5.2's `error` and `error_description`.
#[utoipa::path(post, path = "/auth/oauth2/token", operation_id = "exchange_oauth_code", summary = "Exchange an authorization code for a token", tag = "OAuth",
    request_body(content((TokenParams = "application/x-www-form-urlencoded"), (TokenParams = "application/json"))),
    responses(
        (status = 200, body = OAuthToken<'_>, headers(("Cache-Control" = String, description = "`no-store`"))),
        (status = 400, description = "The request is refused (RFC 6749 section 5.2), or refused before it is read (the JSON error)", body = TokenRefusal),
        (status = 401, description = "`invalid_client`: the client is unknown or its secret wrong", body = OAuthErrorBody<'_>,
            headers(("WWW-Authenticate" = String, description = "`Basic realm=\"mercer\"`"))),
        (status = 408, description = "`invalid_request`: the body was not sent in time", body = OAuthErrorBody<'_>),
        (status = 413, description = "`invalid_request`: the body is too large", body = OAuthErrorBody<'_>)))]
pub async fn token(
    state: web::Data<AppState>,
    request: HttpRequest,
    body: RawBody,
) -> Result<HttpResponse, ApiError> {
    // Even a body too large, or too slow, is refused in RFC 6749's form here.
    let body = match body.bytes() {
        Ok(body) => body,
        Err(error) => {
            let (status, description) = error.status_and_message();
            let mut answer = oauth_error(&OAuthError {
                error: "invalid_request",
                description,
            });
            *answer.status_mut() = status;
            return Ok(answer);
        }
    };
    let content_type = request
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    let nul = "parameters must not contain the character U+0000";
    let parsed = match content_type.as_str() {
        "application/x-www-form-urlencoded" if form_holds_nul(&body) => Err(nul.to_string()),
        "application/x-www-form-urlencoded" => {
            serde_urlencoded::from_bytes::<TokenParams>(&body).map_err(|e| e.to_string())
        }
        "application/json" => limits::check_json_body(&body)
            .map_err(|problem| problem.message)
            .and_then(|()| serde_json::from_slice::<TokenParams>(&body).map_err(|e| e.to_string())),
        _ => Err("send the parameters as application/x-www-form-urlencoded or JSON".to_string()),
    };
    let mut params = match parsed {
        Ok(params) => params,
        Err(why) => {
            return Ok(oauth_error(&OAuthError {
                error: "invalid_request",
                description: why,
            }));
        }
    };
    if let Some((id, secret)) = basic_credentials(&request) {
        if params.client_id.as_deref().is_some_and(|given| given != id) {
            return Ok(oauth_error(&OAuthError {
                error: "invalid_request",
                description: "client_id differs from the Authorization header's".to_string(),
            }));
        }
        params.client_id = Some(id);
        params.client_secret = Some(secret);
    }
    let now = state.now();
    let outcome = state
        .write(move |tx| oauth::exchange_code(tx, &params, now))
        .await?;
    Ok(match outcome {
        oauth::Exchange::Issued(issued) => HttpResponse::Ok()
            .insert_header((header::CACHE_CONTROL, "no-store"))
            .insert_header((header::PRAGMA, "no-cache"))
            .json(OAuthToken {
                access_token: issued.access_token.expose(),
                token_type: "Bearer",
                scope: issued.scopes.to_string(),
                shop_identifier: issued.shop.identifier.as_str(),
            }),
        oauth::Exchange::Refused(error) => oauth_error(&error),
    })
}
