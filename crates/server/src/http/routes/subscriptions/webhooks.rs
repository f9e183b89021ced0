//! Subscription webhook registration (seed 002 §4.3, contract §5): List Webhook Topics and the
//! webhook subscriptions of a shop. The shared secret is write-only: no answer carries it.

use actix_web::{HttpResponse, web};
use mercer_domain::FieldError;
use mercer_domain::kernel::outbound::AddressGuard;
use mercer_domain::subscriptions::webhooks::{
    self as registration, NewWebhookSubscription, WebhookSubscriptionBody,
    WebhookSubscriptionUpdate,
};
use serde_json::json;

use crate::http::error::ApiError;
use crate::http::extract::{Authorized, JsonBody, scopes};
use crate::http::routes::webhooks::handlers::{LogQuery, log_limit, recover_since};
use crate::http::state::{AppState, run_blocking};

/// `GET …/webhooks/topics` → `{"webhook_topics":[{"id","name"}]}`, ids 1..20.
pub async fn topics(_request: Authorized<scopes::ReadSubscriptions>) -> HttpResponse {
    HttpResponse::Ok().json(json!({ "webhook_topics": registration::topics() }))
}

/// Checks the callback URL off the async thread: the guard resolves its host.
async fn check_callback(
    state: &AppState,
    url: Option<String>,
) -> Result<Result<String, FieldError>, ApiError> {
    let guard = state.address_guard;
    run_blocking(move || {
        Ok(registration::check_callback(
            url.as_deref(),
            &guard as &dyn AddressGuard,
        ))
    })
    .await
}

/// `POST …/webhooks/subscriptions` `{"webhook_subscription":{callback_url, webhook_topic_id,
/// shared_secret}}` → 201 `{"webhook_subscription"}`; 422 with each problem's path.
pub async fn create(
    state: web::Data<AppState>,
    request: Authorized<scopes::WriteSubscriptions>,
    body: JsonBody,
) -> Result<HttpResponse, ApiError> {
    let fields = body.parse::<WebhookSubscriptionBody>()?.fields()?;
    let callback = check_callback(&state, fields.callback_url.clone()).await?;
    let new = NewWebhookSubscription::parse(fields, callback)?;
    let (shop, now) = (request.access.shop, state.now());
    let endpoint = state
        .write(move |tx| registration::create(tx, &shop, new, now))
        .await?;
    Ok(HttpResponse::Created()
        .json(json!({ "webhook_subscription": registration::resource(&endpoint) })))
}

/// `GET …/webhooks/subscriptions` → `{"webhook_subscriptions":[…]}`, oldest first.
pub async fn list(
    state: web::Data<AppState>,
    request: Authorized<scopes::ReadSubscriptions>,
) -> Result<HttpResponse, ApiError> {
    let shop = request.access.shop;
    let endpoints = state.read(move |tx| registration::list(tx, &shop)).await?;
    let resources: Vec<_> = endpoints.iter().map(registration::resource).collect();
    Ok(HttpResponse::Ok().json(json!({ "webhook_subscriptions": resources })))
}

/// `GET …/webhooks/subscriptions/{id}` → `{"webhook_subscription"}`; 404 when the shop has none
/// of that id.
pub async fn get(
    state: web::Data<AppState>,
    request: Authorized<scopes::ReadSubscriptions>,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let (shop, id) = (request.access.shop, path.into_inner().1);
    let endpoint = state
        .read(move |tx| registration::find(tx, &shop, &id))
        .await?;
    Ok(HttpResponse::Ok()
        .json(json!({ "webhook_subscription": registration::resource(&endpoint) })))
}

/// `PATCH …/webhooks/subscriptions/{id}` `{"webhook_subscription":{callback_url}}`: a new
/// callback URL, checked like a new one; another topic or a new secret is 422 `immutable`.
pub async fn update(
    state: web::Data<AppState>,
    request: Authorized<scopes::WriteSubscriptions>,
    path: web::Path<(String, String)>,
    body: JsonBody,
) -> Result<HttpResponse, ApiError> {
    let fields = body.parse::<WebhookSubscriptionBody>()?.fields()?;
    let callback = match fields.callback_url.clone() {
        Some(url) => Some(check_callback(&state, Some(url)).await?),
        None => None,
    };
    let update = WebhookSubscriptionUpdate::new(&fields, callback);
    let (shop, id, now) = (request.access.shop, path.into_inner().1, state.now());
    let endpoint = state
        .write(move |tx| registration::update(tx, &shop, &id, update, now))
        .await?;
    Ok(HttpResponse::Ok()
        .json(json!({ "webhook_subscription": registration::resource(&endpoint) })))
}

/// `DELETE …/webhooks/subscriptions/{id}` → 204; its pending messages are cancelled.
pub async fn delete(
    state: web::Data<AppState>,
    request: Authorized<scopes::WriteSubscriptions>,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let (shop, id, now) = (request.access.shop, path.into_inner().1, state.now());
    state
        .write(move |tx| registration::delete(tx, &shop, &id, now))
        .await?;
    Ok(HttpResponse::NoContent().finish())
}

/// `GET …/webhooks/subscriptions/{id}/deliveries?limit=` → `{"deliveries":[message]}`, newest
/// first (the checkout webhooks' delivery log, docs/api-conventions.md).
pub async fn deliveries(
    state: web::Data<AppState>,
    request: Authorized<scopes::ReadSubscriptions>,
    path: web::Path<(String, String)>,
    query: web::Query<LogQuery>,
) -> Result<HttpResponse, ApiError> {
    let limit = log_limit(&query)?;
    let (shop, id) = (request.access.shop, path.into_inner().1);
    let log = state
        .read(move |tx| registration::deliveries(tx, &shop, &id, limit))
        .await?;
    Ok(HttpResponse::Ok().json(json!({ "deliveries": log })))
}

/// `GET …/webhooks/subscriptions/{id}/deliveries/{message_id}` → `{"delivery"}` with its
/// payload and every attempt.
pub async fn delivery(
    state: web::Data<AppState>,
    request: Authorized<scopes::ReadSubscriptions>,
    path: web::Path<(String, String, String)>,
) -> Result<HttpResponse, ApiError> {
    let (_, id, message_id) = path.into_inner();
    let shop = request.access.shop;
    let message = state
        .read(move |tx| registration::delivery(tx, &shop, &id, &message_id))
        .await?;
    Ok(HttpResponse::Ok().json(json!({ "delivery": message })))
}

/// `POST …/webhooks/subscriptions/{id}/deliveries/{message_id}/resend` → 202 `{"message_id"}`.
pub async fn resend(
    state: web::Data<AppState>,
    request: Authorized<scopes::WriteSubscriptions>,
    path: web::Path<(String, String, String)>,
) -> Result<HttpResponse, ApiError> {
    let (_, id, message_id) = path.into_inner();
    let (shop, now) = (request.access.shop, state.now());
    let resent = message_id.clone();
    state
        .write(move |tx| registration::resend(tx, &shop, &id, &message_id, now))
        .await?;
    state.webhooks.notify();
    Ok(HttpResponse::Accepted().json(json!({ "message_id": resent })))
}

/// `POST …/webhooks/subscriptions/{id}/recover` `{"since"}` → 202 `{"recovered"}`.
pub async fn recover(
    state: web::Data<AppState>,
    request: Authorized<scopes::WriteSubscriptions>,
    path: web::Path<(String, String)>,
    body: JsonBody,
) -> Result<HttpResponse, ApiError> {
    let since = recover_since(body)?;
    let (shop, id, now) = (request.access.shop, path.into_inner().1, state.now());
    let recovered = state
        .write(move |tx| registration::recover(tx, &shop, &id, since, now))
        .await?;
    state.webhooks.notify();
    Ok(HttpResponse::Accepted().json(json!({ "recovered": recovered })))
}

/// `POST …/webhooks/subscriptions/{id}/enable` → `{"webhook_subscription"}`.
pub async fn enable(
    state: web::Data<AppState>,
    request: Authorized<scopes::WriteSubscriptions>,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let (shop, id, now) = (request.access.shop, path.into_inner().1, state.now());
    let endpoint = state
        .write(move |tx| registration::enable(tx, &shop, &id, now))
        .await?;
    Ok(HttpResponse::Ok()
        .json(json!({ "webhook_subscription": registration::resource(&endpoint) })))
}
