//! Entering and leaving the portal. The shop links a signed-in customer to
//! `/portal/shops/{shop}/enter?customer=…&token=…`; the token is checked as the box builder's
//! customer routes check it (Validate Customer JWT through the shop's connector, with the same
//! cache), within a bound of checks per customer, then a session opens and the browser is sent
//! on, without the token in its address.

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, web};
use askama::Template;
use mercer_domain::access::shop::{ShopIdentifier, find_shop};
use mercer_domain::kernel::limits::check_parameter;
use mercer_domain::portal::branding::shop_name;
use mercer_domain::portal::sessions::{self, SESSION_LIFETIME_SECONDS};
use serde::Deserialize;

use super::shared::{
    COOKIE, Failure, PortalError, Session, css, home, page, policy, see_other, session_cookie,
    with_cookie,
};
use crate::http::console::cookie;
use crate::http::error::ApiError;
use crate::http::extract::{RawBody, check_customer, customer_token_cached};
use crate::http::state::AppState;

/// The longest token passed on to the connector, in bytes.
const MAX_TOKEN_BYTES: usize = 8 * 1024;
/// The longest platform customer id, in characters.
const MAX_CUSTOMER_CHARS: usize = 255;

#[derive(Deserialize, Default)]
#[serde(default)]
struct EntryQuery {
    customer: String,
    token: String,
}

fn refused() -> PortalError {
    PortalError::from(ApiError::from(mercer_domain::DomainError::Unauthenticated))
}

/// `GET /portal/shops/{shop}/enter?customer=…&token=…`: a session cookie and 303 to the
/// portal, or the 401 (token refused), 404 (no such shop), 429 (too many checks), 502 or 504
/// (the connector failed or did not answer) page, which the shop's own domains may frame as
/// they frame the portal's other pages.
pub async fn enter(
    state: web::Data<AppState>,
    request: HttpRequest,
) -> Result<HttpResponse, PortalError> {
    let shop = request
        .match_info()
        .get("shop")
        .unwrap_or_default()
        .to_string();
    if ShopIdentifier::parse(&shop).is_none() {
        return Err(ApiError::from(mercer_domain::DomainError::not_found("shop")).into());
    }
    match open(&state, &request, &shop).await {
        Ok(answer) => Ok(answer),
        Err(error) => {
            let identifier = shop.clone();
            let framing = state
                .read(move |tx| Ok(find_shop(tx, &identifier).ok()))
                .await
                .ok()
                .flatten();
            Err(error.framed_by(framing.as_ref()))
        }
    }
}

/// The entry of [`enter`] for the shop `shop` (an identifier of the right form).
async fn open(
    state: &AppState,
    request: &HttpRequest,
    shop: &str,
) -> Result<HttpResponse, PortalError> {
    let shop = shop.to_string();
    let query: EntryQuery = serde_urlencoded::from_str(request.query_string())
        .map_err(|_| PortalError::new(Failure::BadForm))?;
    let (customer, token) = (
        query.customer.trim().to_string(),
        query.token.trim().to_string(),
    );
    if customer.is_empty() || token.is_empty() || token.len() > MAX_TOKEN_BYTES {
        return Err(refused());
    }
    if check_parameter("customer", &customer, MAX_CUSTOMER_CHARS).is_err() || token.contains('\0') {
        return Err(PortalError::new(Failure::BadForm));
    }
    // A token found active lately costs the connector nothing; any other check counts.
    let _claim = if customer_token_cached(state, &shop, &customer, &token) {
        None
    } else {
        let key = (shop.clone(), customer.clone());
        Some(
            state
                .customer_checks
                .begin(&key)
                .map_err(|wait| PortalError::new(Failure::TooMany(wait.as_secs().max(1))))?,
        )
    };
    let found = check_customer(state, shop.clone(), customer.clone(), token).await?;
    let (earlier, now) = (cookie(request, COOKIE), state.now());
    let session = state
        .write(move |tx| {
            // A session this browser had before ends: one browser, one session.
            if let Some(earlier) = earlier {
                sessions::sign_out(tx, &earlier)?;
            }
            sessions::open_session(tx, &found, &customer, now)
        })
        .await?;
    let cookie = session_cookie(request, &shop, session.expose(), SESSION_LIFETIME_SECONDS);
    Ok(with_cookie(see_other(&home(&shop)), &cookie))
}

#[derive(Template)]
#[template(path = "portal/signed_out.html")]
struct SignedOutPage<'a> {
    shop_name: &'a str,
    css: &'a str,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct SignOutForm {
    csrf: String,
}

/// `POST /portal/shops/{shop}/sign-out`: the session ends, the cookie goes.
pub async fn sign_out(
    state: web::Data<AppState>,
    request: HttpRequest,
    session: Session,
    body: RawBody,
) -> Result<HttpResponse, PortalError> {
    let bytes = body.bytes()?;
    let form: SignOutForm =
        serde_urlencoded::from_bytes(&bytes).map_err(|_| PortalError::new(Failure::BadForm))?;
    let visitor = session.visitor;
    if !sessions::csrf_matches(&visitor, &form.csrf) {
        return Err(PortalError::new(Failure::Csrf).framed_by(Some(&visitor.shop)));
    }
    let token = cookie(&request, COOKIE).unwrap_or_default();
    state
        .write(move |tx| sessions::sign_out(tx, &token))
        .await?;
    let shop = visitor.shop;
    let css = css(None);
    let html = SignedOutPage {
        shop_name: shop_name(&shop),
        css: &css,
    }
    .render()
    .map_err(|error| ApiError::internal().with_cause(format!("template: {error}")))?;
    let answer = page(StatusCode::OK, &policy(&css, Some(&shop), None), html);
    let gone = session_cookie(&request, shop.identifier.as_str(), "", 0);
    Ok(with_cookie(answer, &gone))
}
