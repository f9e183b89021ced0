//! Checkout webhooks (contract §4.2) and a test delivery (issue 5's integrator tools).

use actix_web::{HttpResponse, web};
use mercer_domain::kernel::outbound::AddressGuard;
use mercer_domain::webhooks::{CHECKOUT_TOPICS, checkout};
use serde::Deserialize;
use serde_json::json;

use crate::http::error::ApiError;
use crate::http::extract::{Authorized, JsonBody, scopes};
use crate::http::state::{AppState, run_blocking};

/// List Webhook Topics.
pub async fn topics(_request: Authorized<scopes::ModifyShopSettings>) -> HttpResponse {
    let topics: Vec<_> = CHECKOUT_TOPICS
        .iter()
        .map(|(id, name)| json!({ "webhook_topic_id": id, "webhook_topic_name": name }))
        .collect();
    HttpResponse::Ok().json(json!({ "data": topics }))
}

/// Checks the callback URL off the async thread: the guard resolves its host.
async fn check_callback(
    state: &AppState,
    url: Option<String>,
) -> Result<Result<String, mercer_domain::FieldError>, ApiError> {
    let guard = state.address_guard;
    run_blocking(move || {
        Ok(checkout::check_callback(
            url.as_deref(),
            &guard as &dyn AddressGuard,
        ))
    })
    .await
}

/// Create Webhook: 201; 422 before the integration secret is configured, for an unknown topic,
/// or for a callback URL that is not absolute http(s) or leads into a private network.
pub async fn create(
    state: web::Data<AppState>,
    request: Authorized<scopes::ModifyShopSettings>,
    body: JsonBody,
) -> Result<HttpResponse, ApiError> {
    let input: checkout::WebhookInput = body.parse()?;
    let callback = check_callback(&state, input.callback_url).await?;
    let (shop, now) = (request.access.shop, state.now());
    let endpoint = state
        .write(move |tx| checkout::create(tx, &shop, input.webhook_topic_id, callback, now))
        .await?;
    Ok(HttpResponse::Created().json(json!({ "data": checkout::resource(&endpoint) })))
}

/// List Webhooks.
pub async fn list(
    state: web::Data<AppState>,
    request: Authorized<scopes::ModifyShopSettings>,
) -> Result<HttpResponse, ApiError> {
    let shop = request.access.shop;
    let resources = state.read(move |tx| checkout::list(tx, &shop)).await?;
    Ok(HttpResponse::Ok().json(json!({ "data": resources })))
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct UpdateBody {
    callback_url: Option<String>,
}

/// Update Webhook: a new callback URL, checked like a new one.
pub async fn update(
    state: web::Data<AppState>,
    request: Authorized<scopes::ModifyShopSettings>,
    path: web::Path<(String, String)>,
    body: JsonBody,
) -> Result<HttpResponse, ApiError> {
    let input: UpdateBody = body.parse()?;
    let callback = check_callback(&state, input.callback_url).await?;
    let (shop, id, now) = (request.access.shop, path.into_inner().1, state.now());
    let endpoint = state
        .write(move |tx| checkout::update(tx, &shop, &id, callback, now))
        .await?;
    Ok(HttpResponse::Ok().json(json!({ "data": checkout::resource(&endpoint) })))
}

/// Delete Webhook: 204; its pending messages are cancelled.
pub async fn delete(
    state: web::Data<AppState>,
    request: Authorized<scopes::ModifyShopSettings>,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let (shop, id, now) = (request.access.shop, path.into_inner().1, state.now());
    state
        .write(move |tx| checkout::delete(tx, &shop, &id, now))
        .await?;
    Ok(HttpResponse::NoContent().finish())
}

#[derive(Deserialize, Default)]
#[serde(default)]
pub struct LogQuery {
    limit: Option<usize>,
}

/// The delivery log's `limit`: 1..250, default 50; 400 otherwise.
pub(crate) fn log_limit(query: &LogQuery) -> Result<usize, ApiError> {
    let limit = query.limit.unwrap_or(50);
    if !(1..=250).contains(&limit) {
        return Err(ApiError::invalid_query(
            "limit",
            "limit must be between 1 and 250",
        ));
    }
    Ok(limit)
}

/// `GET …/webhooks/{id}/deliveries?limit=`: the latest messages (default 50, at most 250),
/// newest first, each with its last attempt.
pub async fn deliveries(
    state: web::Data<AppState>,
    request: Authorized<scopes::ReadShopSettings>,
    path: web::Path<(String, String)>,
    query: web::Query<LogQuery>,
) -> Result<HttpResponse, ApiError> {
    let limit = log_limit(&query)?;
    let (shop, id) = (request.access.shop, path.into_inner().1);
    let log = state
        .read(move |tx| checkout::deliveries(tx, &shop, &id, limit))
        .await?;
    Ok(HttpResponse::Ok().json(json!({ "data": log })))
}

/// `GET …/webhooks/{id}/deliveries/{message_id}`: one message, its payload and every attempt.
pub async fn delivery(
    state: web::Data<AppState>,
    request: Authorized<scopes::ReadShopSettings>,
    path: web::Path<(String, String, String)>,
) -> Result<HttpResponse, ApiError> {
    let (_, id, message_id) = path.into_inner();
    let shop = request.access.shop;
    let message = state
        .read(move |tx| checkout::delivery(tx, &shop, &id, &message_id))
        .await?;
    Ok(HttpResponse::Ok().json(json!({ "data": message })))
}

/// `POST …/webhooks/{id}/deliveries/{message_id}/resend`: 202; sent again with its webhook-id.
pub async fn resend(
    state: web::Data<AppState>,
    request: Authorized<scopes::ModifyShopSettings>,
    path: web::Path<(String, String, String)>,
) -> Result<HttpResponse, ApiError> {
    let (_, id, message_id) = path.into_inner();
    let (shop, now) = (request.access.shop, state.now());
    let resent = message_id.clone();
    state
        .write(move |tx| checkout::resend(tx, &shop, &id, &message_id, now))
        .await?;
    state.webhooks.notify();
    Ok(HttpResponse::Accepted().json(json!({ "data": { "message_id": resent } })))
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct RecoverBody {
    since: Option<String>,
}

/// `since` of a recover body: required, RFC 3339 (422 otherwise).
pub(crate) fn recover_since(body: JsonBody) -> Result<mercer_domain::Timestamp, ApiError> {
    let body: RecoverBody = body.parse()?;
    match body.since.as_deref() {
        None => {
            Err(
                mercer_domain::DomainError::Invalid(vec![mercer_domain::FieldError::required(
                    "since",
                )])
                .into(),
            )
        }
        Some(text) => mercer_domain::Timestamp::parse_rfc3339(text).ok_or_else(|| {
            ApiError::from(mercer_domain::DomainError::invalid(
                "since",
                "invalid_value",
                "since must be an RFC 3339 date-time",
            ))
        }),
    }
}

/// `POST …/webhooks/{id}/recover` `{"since"}`: sends again every failed message created since
/// then; 202 `{"data":{"recovered"}}`.
pub async fn recover(
    state: web::Data<AppState>,
    request: Authorized<scopes::ModifyShopSettings>,
    path: web::Path<(String, String)>,
    body: JsonBody,
) -> Result<HttpResponse, ApiError> {
    let since = recover_since(body)?;
    let (shop, id, now) = (request.access.shop, path.into_inner().1, state.now());
    let recovered = state
        .write(move |tx| checkout::recover(tx, &shop, &id, since, now))
        .await?;
    state.webhooks.notify();
    Ok(HttpResponse::Accepted().json(json!({ "data": { "recovered": recovered } })))
}

/// `POST …/webhooks/{id}/enable`: a disabled webhook gets messages again.
pub async fn enable(
    state: web::Data<AppState>,
    request: Authorized<scopes::ModifyShopSettings>,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let (shop, id, now) = (request.access.shop, path.into_inner().1, state.now());
    let endpoint = state
        .write(move |tx| checkout::enable(tx, &shop, &id, now))
        .await?;
    Ok(HttpResponse::Ok().json(json!({ "data": checkout::resource(&endpoint) })))
}
