//! What every portal page shares: the session cookie and the signed-in visitor ([`Session`]),
//! the page's headers (a content security policy that allows no script, only the page's own
//! style, the shop's logo, forms to the portal, and framing by the shop's own domains), the
//! page chrome, the pages' money and dates, and the errors a page answers (HTML).

use std::future::Future;
use std::pin::Pin;

use actix_web::dev::Payload;
use actix_web::http::{StatusCode, header};
use actix_web::{FromRequest, HttpRequest, HttpResponse, ResponseError, web};
use askama::Template;
use base64::Engine;
use mercer_domain::Timestamp;
use mercer_domain::access::shop::{Shop, find_shop};
use mercer_domain::kernel::money::{Cents, CurrencyCode};
use mercer_domain::portal::pages::PortalShop;
use mercer_domain::portal::sessions::{self, SESSION_LIFETIME_SECONDS, Visitor};
use mercer_domain::subscriptions::recurrence::ShopZone;
use sha2::{Digest, Sha256};

use crate::http::console::cookie;
use crate::http::error::ApiError;
use crate::http::state::AppState;

/// The session cookie's name (its path is the shop's portal, so each shop's is its own).
pub const COOKIE: &str = "mercer_portal";
/// The accent of a shop that set none.
const DEFAULT_ACCENT: &str = "#2d5bd7";

/// The portal's root path of a shop: `/portal/shops/{shop}`.
pub fn home(shop_identifier: &str) -> String {
    format!("/portal/shops/{shop_identifier}")
}

/// Whether `host` (a `Host` header: a name or address, with an optional port) is this machine.
fn is_loopback_host(host: &str) -> bool {
    url::Url::parse(&format!("http://{host}/"))
        .ok()
        .and_then(|url| {
            url.host().map(|host| match host {
                url::Host::Domain(name) => name.eq_ignore_ascii_case("localhost"),
                url::Host::Ipv4(address) => address.is_loopback(),
                url::Host::Ipv6(address) => address.is_loopback(),
            })
        })
        .unwrap_or(false)
}

/// Whether the request came over plain HTTP to loopback: from this machine, to a loopback
/// host, not through a proxy that says the browser used TLS. Only then is the cookie not
/// `Secure` (a browser keeps no `Secure` cookie it got over plain HTTP).
fn plain_http_to_loopback(request: &HttpRequest) -> bool {
    let from_here = request
        .peer_addr()
        .is_some_and(|address| address.ip().is_loopback());
    let host = request
        .headers()
        .get(header::HOST)
        .and_then(|value| value.to_str().ok())
        .unwrap_or_default();
    from_here && is_loopback_host(host) && request.connection_info().scheme() == "http"
}

/// A `Set-Cookie` value of the session cookie: HttpOnly, SameSite=Lax, on the shop's portal
/// only, Secure unless the request came over plain HTTP to loopback.
pub fn session_cookie(
    request: &HttpRequest,
    shop_identifier: &str,
    token: &str,
    max_age: i64,
) -> String {
    let secure = if plain_http_to_loopback(request) {
        ""
    } else {
        "; Secure"
    };
    format!(
        "{COOKIE}={token}; Path={}; HttpOnly; SameSite=Lax; Max-Age={max_age}{secure}",
        home(shop_identifier)
    )
}

/// Adds `cookie` to `response`.
pub fn with_cookie(mut response: HttpResponse, cookie: &str) -> HttpResponse {
    if let Ok(value) = header::HeaderValue::from_str(cookie) {
        response.headers_mut().append(header::SET_COOKIE, value);
    }
    response
}

/// The signed-in visitor of a portal page: a live session of the path's shop. Without one,
/// the page answers 401 ([`PortalError`]).
pub struct Session {
    pub visitor: Visitor,
    token: String,
    renewed: bool,
}

impl Session {
    /// The answer, with the cookie again when the session was renewed (its 8 hours start
    /// again in the browser too).
    pub fn finish(&self, request: &HttpRequest, response: HttpResponse) -> HttpResponse {
        if !self.renewed {
            return response;
        }
        let cookie = session_cookie(
            request,
            self.visitor.shop.identifier.as_str(),
            &self.token,
            SESSION_LIFETIME_SECONDS,
        );
        with_cookie(response, &cookie)
    }
}

impl FromRequest for Session {
    type Error = PortalError;
    type Future = Pin<Box<dyn Future<Output = Result<Self, PortalError>>>>;

    fn from_request(request: &HttpRequest, _: &mut Payload) -> Self::Future {
        let state = request.app_data::<web::Data<AppState>>().cloned();
        let shop = request
            .match_info()
            .get("shop")
            .unwrap_or_default()
            .to_string();
        let token = cookie(request, COOKIE).filter(|token| !token.is_empty());
        Box::pin(async move {
            let state = state.ok_or_else(|| PortalError::from(ApiError::internal()))?;
            let now = state.now();
            let (visitor, framing) = state
                .read(move |tx| {
                    let visitor = match &token {
                        Some(token) => sessions::session(tx, &shop, token, now)?
                            .map(|visitor| (visitor, token.clone())),
                        None => None,
                    };
                    // Without a session, the error page may still be framed by the shop.
                    let framing = match visitor {
                        Some(_) => None,
                        None => find_shop(tx, &shop).ok(),
                    };
                    Ok((visitor, framing))
                })
                .await?;
            let Some((visitor, token)) = visitor else {
                return Err(PortalError::new(Failure::SignedOut).framed_by(framing.as_ref()));
            };
            let renewed = visitor.stale;
            if renewed {
                let seen = visitor.clone();
                state
                    .write(move |tx| sessions::renew(tx, &seen, now))
                    .await?;
            }
            Ok(Session {
                visitor,
                token,
                renewed,
            })
        })
    }
}

/// The sources of `frame-ancestors`: the shop's own domains over https, or `'none'`.
fn frame_ancestors(shop: Option<&Shop>) -> String {
    let domains: Vec<String> = shop
        .into_iter()
        .flat_map(|shop| {
            [
                shop.custom_domain.as_deref(),
                Some(shop.shop_domain.as_str()),
            ]
        })
        .flatten()
        .map(|domain| domain.trim().to_ascii_lowercase())
        // A host name only: nothing that could end the directive or add a source.
        .filter(|domain| {
            !domain.is_empty()
                && domain
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-')
        })
        .map(|domain| format!("https://{domain}"))
        .collect();
    if domains.is_empty() {
        "'none'".to_string()
    } else {
        domains.join(" ")
    }
}

/// The origin of the shop's logo, for `img-src` (its URL was checked when it was set).
fn logo_origin(logo_url: Option<&str>) -> Option<String> {
    let url = url::Url::parse(logo_url?).ok()?;
    let origin = url.origin();
    origin.is_tuple().then(|| origin.ascii_serialization())
}

/// The content security policy of a page whose only style is `css`: no script, nothing loaded
/// but the shop's logo, forms to the portal only, framed only by the shop's own domains.
pub fn policy(css: &str, shop: Option<&Shop>, logo_url: Option<&str>) -> String {
    let digest = base64::engine::general_purpose::STANDARD.encode(Sha256::digest(css.as_bytes()));
    let images = logo_origin(logo_url).unwrap_or_else(|| "'none'".to_string());
    format!(
        "default-src 'none'; style-src 'sha256-{digest}'; img-src {images}; form-action 'self'; \
         frame-ancestors {}; base-uri 'none'",
        frame_ancestors(shop)
    )
}

/// An HTML page of the portal under `policy`: never cached, never sniffed, sending no
/// referrer.
pub fn page(status: StatusCode, policy: &str, html: String) -> HttpResponse {
    HttpResponse::build(status)
        .content_type("text/html; charset=utf-8")
        .insert_header((header::CACHE_CONTROL, "no-store"))
        .insert_header((header::CONTENT_SECURITY_POLICY, policy))
        .insert_header((header::X_CONTENT_TYPE_OPTIONS, "nosniff"))
        .insert_header(("Referrer-Policy", "no-referrer"))
        .body(html)
}

/// The pages' style sheet, with the shop's accent.
#[derive(Template)]
#[template(path = "portal/style.css", escape = "none")]
struct Style<'a> {
    accent: &'a str,
    ink: &'a str,
}

/// Black or white, whichever reads better on `accent` (`#rgb` or `#rrggbb`).
fn ink_on(accent: &str) -> &'static str {
    let digits = accent.trim_start_matches('#');
    let channel = |index: usize| -> f64 {
        let value = if digits.len() == 3 {
            digits
                .get(index..=index)
                .and_then(|d| u8::from_str_radix(&d.repeat(2), 16).ok())
        } else {
            digits
                .get(index * 2..index * 2 + 2)
                .and_then(|d| u8::from_str_radix(d, 16).ok())
        };
        f64::from(value.unwrap_or(0)) / 255.0
    };
    let luminance = 0.2126 * channel(0) + 0.7152 * channel(1) + 0.0722 * channel(2);
    if luminance > 0.55 { "#111" } else { "#fff" }
}

/// The style sheet of a shop's pages.
pub fn css(accent: Option<&str>) -> String {
    let accent = accent.unwrap_or(DEFAULT_ACCENT);
    Style {
        accent,
        ink: ink_on(accent),
    }
    .render()
    .unwrap_or_default()
}

/// What every signed-in page shows: the shop's name and logo, the visitor's first name, the
/// path of the shop's portal, and the CSRF token of its forms.
pub struct Chrome {
    pub home: String,
    pub shop_name: String,
    pub logo_url: Option<String>,
    pub first_name: Option<String>,
    pub csrf: String,
    pub css: String,
}

impl Chrome {
    pub fn of(shop: &PortalShop, first_name: Option<String>, visitor: &Visitor) -> Chrome {
        Chrome {
            home: home(shop.shop.identifier.as_str()),
            shop_name: shop.name.clone(),
            logo_url: shop.branding.logo_url.clone(),
            first_name,
            csrf: visitor.csrf_token.clone(),
            css: css(shop.branding.accent.as_deref()),
        }
    }

    /// The page's content security policy.
    pub fn policy(&self, shop: &Shop) -> String {
        policy(&self.css, Some(shop), self.logo_url.as_deref())
    }
}

/// A rendered page of `shop` with `status`.
pub fn render(
    status: StatusCode,
    chrome: &Chrome,
    shop: &Shop,
    template: &impl Template,
) -> Result<HttpResponse, PortalError> {
    let html = template
        .render()
        .map_err(|error| ApiError::internal().with_cause(format!("template: {error}")))?;
    Ok(page(status, &chrome.policy(shop), html))
}

/// After an action: on to `location` (post, redirect, get).
pub fn see_other(location: &str) -> HttpResponse {
    HttpResponse::SeeOther()
        .insert_header((header::LOCATION, location))
        .insert_header((header::CACHE_CONTROL, "no-store"))
        .insert_header(("Referrer-Policy", "no-referrer"))
        .finish()
}

/// An amount in `currency`: in the shop's own format when it is the shop's currency
/// (`$12.50`), else with its code (`12.50 EUR`).
pub fn money(shop: &Shop, amount: Cents, currency: &CurrencyCode) -> String {
    let decimal = amount.to_decimal(currency);
    if currency.as_str() == shop.currency && shop.currency_format.contains("{{amount}}") {
        shop.currency_format.replace("{{amount}}", &decimal)
    } else {
        format!("{decimal} {}", currency.as_str())
    }
}

/// A day in the shop's time zone: `Mon 7 Jan 2030`.
pub fn day(shop: &Shop, at: Timestamp) -> String {
    ShopZone::of_shop(&shop.timezone)
        .local_time(at)
        .format("%a %-d %b %Y")
        .to_string()
}

/// A moment in the shop's time zone: `Mon 7 Jan 2030, 09:00 EST`.
pub fn moment(shop: &Shop, at: Timestamp) -> String {
    ShopZone::of_shop(&shop.timezone)
        .local_time(at)
        .format("%a %-d %b %Y, %H:%M %Z")
        .to_string()
}

/// Why a page answers instead of its content.
#[derive(Debug)]
pub enum Failure {
    /// No live session for this shop.
    SignedOut,
    /// A form without the session's CSRF token.
    Csrf,
    /// A form or query that cannot be read.
    BadForm,
    /// Too many token checks for this customer: seconds to wait.
    TooMany(u64),
    /// What the domain, the store or the connector answered.
    Api(ApiError),
}

/// A page's failure, with the shop whose domains may frame its page, when known.
#[derive(Debug)]
pub struct PortalError {
    failure: Failure,
    framing: Option<Box<Shop>>,
}

impl PortalError {
    pub fn new(failure: Failure) -> Self {
        PortalError {
            failure,
            framing: None,
        }
    }

    /// The error page may be framed by `shop`'s domains, as its other pages.
    pub fn framed_by(mut self, shop: Option<&Shop>) -> Self {
        self.framing = shop.cloned().map(Box::new);
        self
    }
}

impl From<ApiError> for PortalError {
    fn from(error: ApiError) -> Self {
        PortalError::new(Failure::Api(error))
    }
}

impl From<Failure> for PortalError {
    fn from(failure: Failure) -> Self {
        PortalError::new(failure)
    }
}

impl std::fmt::Display for PortalError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.message().1)
    }
}

impl PortalError {
    /// The page's heading and sentence: only what the visitor may know.
    fn message(&self) -> (&'static str, &'static str) {
        match &self.failure {
            Failure::SignedOut => (
                "Please sign in again",
                "Your session has ended. Open your subscriptions again from your account on the \
                 shop's site.",
            ),
            Failure::Csrf => (
                "That did not work",
                "This form has expired. Go back, reload the page and try again.",
            ),
            Failure::BadForm => ("That did not work", "The request could not be read."),
            Failure::TooMany(_) => (
                "Too many attempts",
                "Your sign-in was checked too many times in a short while. Wait a few minutes, \
                 then open your subscriptions again from the shop's site.",
            ),
            Failure::Api(error) => match error.status_and_message().0.as_u16() {
                401 => (
                    "We could not confirm it is you",
                    "Open your subscriptions again from your account on the shop's site.",
                ),
                404 => (
                    "Not found",
                    "There is nothing here. It may have moved, or belong to another account.",
                ),
                409 => (
                    "Not available",
                    "This shop's subscriber pages are not available right now.",
                ),
                502 => (
                    "The shop could not confirm your sign-in",
                    "The shop's platform answered wrongly. Try again in a moment.",
                ),
                504 => (
                    "The shop did not answer in time",
                    "The shop's platform did not answer in time. Try again in a moment.",
                ),
                400 | 413 | 415 | 422 => ("That did not work", "The request could not be read."),
                _ => (
                    "Something went wrong",
                    "Something went wrong on our side. Try again in a moment.",
                ),
            },
        }
    }
}

#[derive(Template)]
#[template(path = "portal/error.html")]
struct ErrorPage<'a> {
    status: u16,
    heading: &'a str,
    message: &'a str,
    shop_name: Option<&'a str>,
    css: &'a str,
}

impl ResponseError for PortalError {
    fn status_code(&self) -> StatusCode {
        match &self.failure {
            Failure::SignedOut => StatusCode::UNAUTHORIZED,
            Failure::Csrf => StatusCode::FORBIDDEN,
            Failure::BadForm => StatusCode::BAD_REQUEST,
            Failure::TooMany(_) => StatusCode::TOO_MANY_REQUESTS,
            Failure::Api(error) => error.status_and_message().0,
        }
    }

    fn error_response(&self) -> HttpResponse {
        if let Failure::Api(error) = &self.failure
            && let Some(cause) = error.cause()
        {
            // The cause stays in the log, with the request's span; the page says only what the
            // visitor may know.
            tracing::warn!(target: "mercer::http", "portal page failed: {cause}");
        }
        let status = self.status_code();
        let (heading, message) = self.message();
        let css = css(None);
        let html = ErrorPage {
            status: status.as_u16(),
            heading,
            message,
            shop_name: self
                .framing
                .as_deref()
                .map(mercer_domain::portal::branding::shop_name),
            css: &css,
        }
        .render()
        .unwrap_or_else(|_| message.to_string());
        let mut answer = page(status, &policy(&css, self.framing.as_deref(), None), html);
        if let Failure::TooMany(seconds) = &self.failure
            && let Ok(value) = header::HeaderValue::from_str(&(*seconds).max(1).to_string())
        {
            answer.headers_mut().insert(header::RETRY_AFTER, value);
        }
        answer
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_policy_allows_no_script_and_frames_only_by_the_shops_domains() {
        let css = css(Some("#0a7"));
        let shop = Shop {
            custom_domain: Some("www.brand.test".into()),
            ..test_shop()
        };
        let policy = policy(
            &css,
            Some(&shop),
            Some("https://cdn.example.com/a/logo.png"),
        );
        assert!(policy.contains("default-src 'none'"));
        assert!(!policy.contains("script-src"));
        assert!(
            policy.contains("frame-ancestors https://www.brand.test https://brand.myshop.test")
        );
        assert!(policy.contains("img-src https://cdn.example.com;"));
        let digest =
            base64::engine::general_purpose::STANDARD.encode(Sha256::digest(css.as_bytes()));
        assert!(policy.contains(&format!("style-src 'sha256-{digest}'")));
        // A domain that could add a source is left out.
        let odd = Shop {
            custom_domain: Some("evil.test; script-src *".into()),
            ..test_shop()
        };
        assert!(policy_of(&odd).contains("frame-ancestors https://brand.myshop.test;"));
        assert!(super::policy(&css, None, None).contains("frame-ancestors 'none'"));
    }

    fn policy_of(shop: &Shop) -> String {
        policy("", Some(shop), None)
    }

    fn test_shop() -> Shop {
        Shop {
            id: mercer_domain::kernel::ids::ShopId(1),
            identifier: mercer_domain::access::shop::ShopIdentifier::parse(
                "0123456789abcdef0123456789abcdef",
            )
            .expect("an identifier"),
            shop_domain: "brand.myshop.test".into(),
            custom_domain: None,
            platform_type: "custom".into(),
            timezone: "America/Toronto".into(),
            currency: "USD".into(),
            currency_format: "${{amount}}".into(),
            shop_owner: "Owner".into(),
            admin_email: "owner@example.test".into(),
            pii_redacted_at: None,
            created_at: Timestamp::from_micros(0),
            updated_at: Timestamp::from_micros(0),
            deleted_at: None,
            order_retry_interval_seconds: 86_400,
            order_max_retries: 3,
            expiring_payment_notice_days: 30,
            checkout: Default::default(),
            require_message_signatures: false,
            budgets: Default::default(),
        }
    }

    #[test]
    fn money_and_dates_follow_the_shop() {
        let shop = test_shop();
        let usd = CurrencyCode::parse("USD").expect("a currency");
        let eur = CurrencyCode::parse("EUR").expect("a currency");
        assert_eq!(money(&shop, Cents(1250), &usd), "$12.50");
        assert_eq!(money(&shop, Cents(1250), &eur), "12.50 EUR");
        let at = Timestamp::parse_rfc3339("2030-01-07T14:00:00Z").expect("a time");
        assert_eq!(day(&shop, at), "Mon 7 Jan 2030");
        assert_eq!(moment(&shop, at), "Mon 7 Jan 2030, 09:00 EST");
    }

    #[test]
    fn accents_get_readable_text() {
        assert_eq!(ink_on("#0a7"), "#fff");
        assert_eq!(ink_on("#ffee00"), "#111");
        assert_eq!(ink_on("#fff"), "#111");
    }

    #[test]
    fn only_loopback_hosts_are_loopback() {
        for host in ["127.0.0.1:8080", "localhost", "[::1]:80", "127.1.2.3"] {
            assert!(is_loopback_host(host), "{host}");
        }
        for host in ["shop.example", "10.0.0.1:80", "", "localhost.evil.test"] {
            assert!(!is_loopback_host(host), "{host}");
        }
    }
}
