//! The shop's subscription settings under `/subscriptions/v1/shops/{shop}/settings`: its
//! cancellation reasons (reads `read_subscriptions`, writes `write_subscriptions`).

use actix_web::{HttpResponse, web};
use mercer_domain::subscriptions::cancellation::{
    CancellationReasons, CancellationReasonsRequest, cancellation_reasons,
    parse_cancellation_reasons, set_cancellation_reasons,
};

use super::customers::json_value;
use crate::http::error::ApiError;
use crate::http::extract::{Authorized, JsonBody, scopes};
use crate::http::state::AppState;

/// Gets the cancellation reasons.
///
/// The reasons a subscription of the shop may be cancelled for, in their order; `[]` until the
/// shop sets some.
#[utoipa::path(get, path = "/subscriptions/v1/shops/{shop}/settings/cancellation_reasons", operation_id = "get_cancellation_reasons", summary = "Get the cancellation reasons", tag = "Subscriptions",
    params(("shop" = String, Path, description = "The shop's identifier")),
    security(("api_token" = ["read_subscriptions"]), ("oauth2" = ["read_subscriptions"])),
    responses((status = 200, body = CancellationReasons)))]
pub async fn cancellation_reasons_get(
    state: web::Data<AppState>,
    request: Authorized<scopes::ReadSubscriptions>,
) -> Result<HttpResponse, ApiError> {
    let shop = request.access.shop;
    let reasons = state
        .read(move |tx| cancellation_reasons(tx, &shop))
        .await?;
    Ok(HttpResponse::Ok().json(reasons))
}

/// Sets the cancellation reasons.
///
/// The list given replaces the shop's (`[]` removes them all). Codes are 1 to 64 of `a-z`,
/// `0-9`, `_` and `-`, unique; labels 1 to 200 characters; at most 50 reasons. Each problem is
/// reported on its path, and then nothing changes.
#[utoipa::path(put, path = "/subscriptions/v1/shops/{shop}/settings/cancellation_reasons", operation_id = "set_cancellation_reasons", summary = "Set the cancellation reasons", tag = "Subscriptions",
    request_body = CancellationReasonsRequest,
    params(("shop" = String, Path, description = "The shop's identifier")),
    security(("api_token" = ["write_subscriptions"]), ("oauth2" = ["write_subscriptions"])),
    responses((status = 200, body = CancellationReasons)))]
pub async fn cancellation_reasons_set(
    state: web::Data<AppState>,
    request: Authorized<scopes::WriteSubscriptions>,
    body: JsonBody,
) -> Result<HttpResponse, ApiError> {
    let reasons = parse_cancellation_reasons(&json_value(body)?)?;
    let (shop, now) = (request.access.shop, state.now());
    let answer = state
        .write(move |tx| set_cancellation_reasons(tx, &shop, reasons, now))
        .await?;
    Ok(HttpResponse::Ok().json(answer))
}
