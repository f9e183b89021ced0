//! The shop's dunning policy under `/subscriptions/v1/shops/{shop}/settings/dunning`: how failed
//! subscription orders are retried, and what follows the last retry (reads
//! `read_subscriptions`, writes `write_subscriptions`).

use actix_web::{HttpResponse, web};
use mercer_domain::subscriptions::dunning::{
    Dunning, DunningRequest, dunning_policy, parse_dunning, set_dunning_policy,
};

use super::customers::json_value;
use crate::http::error::ApiError;
use crate::http::extract::{Authorized, JsonBody, scopes};
use crate::http::state::AppState;

/// Gets the dunning policy.
///
/// The waits, in seconds, before each retry of a failed subscription order, and what happens
/// when the last retry fails. Until the shop sets a policy, it is the one its retry settings
/// describe: `order_max_retries` waits of `order_retry_interval_seconds`, then `cancel`.
#[utoipa::path(get, path = "/subscriptions/v1/shops/{shop}/settings/dunning", operation_id = "get_dunning_policy", summary = "Get the dunning policy", tag = "Subscriptions",
    params(("shop" = String, Path, description = "The shop's identifier")),
    security(("api_token" = ["read_subscriptions"]), ("oauth2" = ["read_subscriptions"])),
    responses((status = 200, body = Dunning)))]
pub async fn get(
    state: web::Data<AppState>,
    request: Authorized<scopes::ReadSubscriptions>,
) -> Result<HttpResponse, ApiError> {
    let shop = request.access.shop;
    let answer = state.read(move |tx| dunning_policy(tx, &shop)).await?;
    Ok(HttpResponse::Ok().json(answer))
}

/// Sets the dunning policy.
///
/// The policy given replaces the shop's: 0 to 100 waits of 1 to 2,592,000 seconds (30 days),
/// numbers or their text, and `at_max_retries` `cancel`, `pause` or `skip_order`. Each problem
/// is reported on its path (`dunning.retry_intervals_s[2]`), and then nothing changes. An order
/// already waiting for a retry keeps its wait; its next failure follows the new policy.
#[utoipa::path(put, path = "/subscriptions/v1/shops/{shop}/settings/dunning", operation_id = "set_dunning_policy", summary = "Set the dunning policy", tag = "Subscriptions",
    request_body = DunningRequest,
    params(("shop" = String, Path, description = "The shop's identifier")),
    security(("api_token" = ["write_subscriptions"]), ("oauth2" = ["write_subscriptions"])),
    responses((status = 200, body = Dunning)))]
pub async fn set(
    state: web::Data<AppState>,
    request: Authorized<scopes::WriteSubscriptions>,
    body: JsonBody,
) -> Result<HttpResponse, ApiError> {
    let policy = parse_dunning(&json_value(body)?)?;
    let (shop, now) = (request.access.shop, state.now());
    let answer = state
        .write(move |tx| set_dunning_policy(tx, &shop, policy, now))
        .await?;
    Ok(HttpResponse::Ok().json(answer))
}
