//! Subscription webhook registration: List Webhook Topics and the
//! webhook subscriptions of a shop. The shared secret is write-only: no answer carries it.

use actix_web::{HttpResponse, web};
use mercer_domain::FieldError;
use mercer_domain::Timestamp;
use mercer_domain::kernel::outbound::AddressGuard;
use mercer_domain::subscriptions::topics::WebhookTopic;
use mercer_domain::subscriptions::webhooks::{
    self as registration, NewWebhookSubscription, WebhookSubscriptionBody,
    WebhookSubscriptionResource, WebhookSubscriptionUpdate, WebhookSubscriptionUpdateBody,
};
use mercer_domain::webhooks::log::{Delivery, DeliveryLine};
use serde::Serialize;
use utoipa::ToSchema;

use crate::http::error::ApiError;
use crate::http::extract::{Authorized, JsonBody, TypedPath, scopes};
use crate::http::routes::webhooks::handlers::{
    DeliveryPath, LogQuery, WebhookPath, log_limit, recover_since,
};
use crate::http::state::{AppState, run_blocking};

/// `{"webhook_topics": […]}`: every topic, by id, each with the JSON Schema of its payload.
#[derive(Serialize, ToSchema)]
pub struct SubscriptionWebhookTopicList {
    webhook_topics: Vec<WebhookTopic>,
}

/// `{"webhook_subscription": {…}}`; the shared secret never appears.
#[derive(Serialize, ToSchema)]
pub struct WebhookSubscriptionAnswer {
    webhook_subscription: WebhookSubscriptionResource,
}

fn webhook_subscription_answer(
    endpoint: &mercer_domain::webhooks::WebhookEndpoint,
) -> WebhookSubscriptionAnswer {
    WebhookSubscriptionAnswer {
        webhook_subscription: registration::resource(endpoint),
    }
}

/// `{"webhook_subscriptions": […]}`, oldest first.
#[derive(Serialize, ToSchema)]
pub struct WebhookSubscriptionList {
    webhook_subscriptions: Vec<WebhookSubscriptionResource>,
}

/// `{"deliveries": […]}`: the delivery log, newest first.
#[derive(Serialize, ToSchema)]
pub struct SubscriptionWebhookDeliveries {
    deliveries: Vec<DeliveryLine>,
}

/// `{"delivery": {…}}`: one message with its payload and every attempt.
#[derive(Serialize, ToSchema)]
pub struct SubscriptionWebhookDelivery {
    delivery: Delivery,
}

/// `{"message_id"}`: the message queued to be sent again.
#[derive(Serialize, ToSchema)]
pub struct SubscriptionWebhookResent {
    /// The message's `webhook-id`, the same as before.
    message_id: String,
}

/// `{"recovered"}`: how many failed messages were queued to be sent again.
#[derive(Serialize, ToSchema)]
pub struct SubscriptionWebhookRecovered {
    recovered: u64,
}

/// The body of Recover: the failed messages created since then are sent again.
#[derive(ToSchema)]
#[allow(dead_code)] // Described, never built: `recover_since` reads the body.
pub struct SubscriptionWebhookRecoverRequest {
    /// An RFC 3339 date-time.
    since: Timestamp,
}

/// Lists webhook topics.
///
/// Every topic a webhook subscription can follow, with its id (1 to 21), its name and the JSON
/// Schema (2020-12, self-contained) of the body its deliveries carry.
#[utoipa::path(get, path = "/subscriptions/v1/shops/{shop}/webhooks/topics", operation_id = "list_subscription_webhook_topics", summary = "List webhook topics", tag = "Subscription webhooks",
    params(("shop" = String, Path, description = "The shop's identifier")),
    security(("api_token" = ["read_subscriptions"]), ("oauth2" = ["read_subscriptions"])),
    responses((status = 200, body = SubscriptionWebhookTopicList)))]
pub async fn topics(_request: Authorized<scopes::ReadSubscriptions>) -> HttpResponse {
    HttpResponse::Ok().json(SubscriptionWebhookTopicList {
        webhook_topics: registration::topics(),
    })
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

/// Creates a webhook subscription.
///
/// Takes the callback URL, the topic's id and the shared secret, and optionally a rate limit
/// (`rate_limit_per_s`). Each invalid field is reported with its path.
#[utoipa::path(post, path = "/subscriptions/v1/shops/{shop}/webhooks/subscriptions", operation_id = "create_webhook_subscription", summary = "Create a webhook subscription", tag = "Subscription webhooks",
    request_body = WebhookSubscriptionBody,
    params(("shop" = String, Path, description = "The shop's identifier")),
    security(("api_token" = ["write_subscriptions"]), ("oauth2" = ["write_subscriptions"])),
    responses((status = 201, body = WebhookSubscriptionAnswer)))]
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
    Ok(HttpResponse::Created().json(webhook_subscription_answer(&endpoint)))
}

/// Lists webhook subscriptions.
///
/// The shop's webhook subscriptions, oldest first.
#[utoipa::path(get, path = "/subscriptions/v1/shops/{shop}/webhooks/subscriptions", operation_id = "list_webhook_subscriptions", summary = "List webhook subscriptions", tag = "Subscription webhooks",
    params(("shop" = String, Path, description = "The shop's identifier")),
    security(("api_token" = ["read_subscriptions"]), ("oauth2" = ["read_subscriptions"])),
    responses((status = 200, body = WebhookSubscriptionList)))]
pub async fn list(
    state: web::Data<AppState>,
    request: Authorized<scopes::ReadSubscriptions>,
) -> Result<HttpResponse, ApiError> {
    let shop = request.access.shop;
    let endpoints = state.read(move |tx| registration::list(tx, &shop)).await?;
    let resources: Vec<_> = endpoints.iter().map(registration::resource).collect();
    Ok(HttpResponse::Ok().json(WebhookSubscriptionList {
        webhook_subscriptions: resources,
    }))
}

/// Gets a webhook subscription.
///
/// A webhook subscription of the shop; another id is not found.
#[utoipa::path(get, path = "/subscriptions/v1/shops/{shop}/webhooks/subscriptions/{id}", operation_id = "get_webhook_subscription", summary = "Get a webhook subscription", tag = "Subscription webhooks",
    params(("shop" = String, Path, description = "The shop's identifier"), ("id" = String, Path, description = "The webhook subscription's id (32 hex characters)")),
    security(("api_token" = ["read_subscriptions"]), ("oauth2" = ["read_subscriptions"])),
    responses((status = 200, body = WebhookSubscriptionAnswer)))]
pub async fn get(
    state: web::Data<AppState>,
    request: Authorized<scopes::ReadSubscriptions>,
    path: TypedPath<WebhookPath>,
) -> Result<HttpResponse, ApiError> {
    let (shop, id) = (request.access.shop, path.get()?.id);
    let endpoint = state
        .read(move |tx| registration::find(tx, &shop, &id))
        .await?;
    Ok(HttpResponse::Ok().json(webhook_subscription_answer(&endpoint)))
}

/// Updates a webhook subscription.
///
/// The fields given (callback URL, topic, shared secret, rate limit) replace the stored ones,
/// each checked as at creation; a null rate limit removes it.
#[utoipa::path(patch, path = "/subscriptions/v1/shops/{shop}/webhooks/subscriptions/{id}", operation_id = "update_webhook_subscription", summary = "Update a webhook subscription", tag = "Subscription webhooks",
    request_body = WebhookSubscriptionUpdateBody,
    params(("shop" = String, Path, description = "The shop's identifier"), ("id" = String, Path, description = "The webhook subscription's id (32 hex characters)")),
    security(("api_token" = ["write_subscriptions"]), ("oauth2" = ["write_subscriptions"])),
    responses((status = 200, body = WebhookSubscriptionAnswer)))]
pub async fn update(
    state: web::Data<AppState>,
    request: Authorized<scopes::WriteSubscriptions>,
    path: TypedPath<WebhookPath>,
    body: JsonBody,
) -> Result<HttpResponse, ApiError> {
    let fields = body.parse::<WebhookSubscriptionUpdateBody>()?.fields()?;
    let callback = match fields.callback_url.clone() {
        Some(url) => Some(check_callback(&state, Some(url)).await?),
        None => None,
    };
    let update = WebhookSubscriptionUpdate::new(&fields, callback);
    let (shop, id, now) = (request.access.shop, path.get()?.id, state.now());
    let endpoint = state
        .write(move |tx| registration::update(tx, &shop, &id, update, now))
        .await?;
    Ok(HttpResponse::Ok().json(webhook_subscription_answer(&endpoint)))
}

/// Deletes a webhook subscription.
///
/// Its pending messages are cancelled.
#[utoipa::path(delete, path = "/subscriptions/v1/shops/{shop}/webhooks/subscriptions/{id}", operation_id = "delete_webhook_subscription", summary = "Delete a webhook subscription", tag = "Subscription webhooks",
    params(("shop" = String, Path, description = "The shop's identifier"), ("id" = String, Path, description = "The webhook subscription's id (32 hex characters)")),
    security(("api_token" = ["write_subscriptions"]), ("oauth2" = ["write_subscriptions"])),
    responses((status = 204, description = "Deleted")))]
pub async fn delete(
    state: web::Data<AppState>,
    request: Authorized<scopes::WriteSubscriptions>,
    path: TypedPath<WebhookPath>,
) -> Result<HttpResponse, ApiError> {
    let (shop, id, now) = (request.access.shop, path.get()?.id, state.now());
    state
        .write(move |tx| registration::delete(tx, &shop, &id, now))
        .await?;
    Ok(HttpResponse::NoContent().finish())
}

/// Lists a webhook subscription's deliveries.
///
/// The latest messages, newest first, each with its last attempt; the same delivery log as the
/// checkout webhooks'.
#[utoipa::path(get, path = "/subscriptions/v1/shops/{shop}/webhooks/subscriptions/{id}/deliveries", operation_id = "list_webhook_subscription_deliveries", summary = "List a webhook subscription's deliveries", tag = "Subscription webhooks",
    params(("shop" = String, Path, description = "The shop's identifier"), ("id" = String, Path, description = "The webhook subscription's id (32 hex characters)"),
        ("limit" = Option<i64>, Query, minimum = 1, maximum = 250, description = "Messages listed (default 50)")),
    security(("api_token" = ["read_subscriptions"]), ("oauth2" = ["read_subscriptions"])),
    responses((status = 200, body = SubscriptionWebhookDeliveries)))]
pub async fn deliveries(
    state: web::Data<AppState>,
    request: Authorized<scopes::ReadSubscriptions>,
    path: TypedPath<WebhookPath>,
    query: web::Query<LogQuery>,
) -> Result<HttpResponse, ApiError> {
    let id = path.get()?.id;
    let limit = log_limit(&query)?;
    let shop = request.access.shop;
    let log = state
        .read(move |tx| registration::deliveries(tx, &shop, &id, limit))
        .await?;
    Ok(HttpResponse::Ok().json(SubscriptionWebhookDeliveries { deliveries: log }))
}

/// Gets a webhook subscription delivery.
///
/// One message, with its payload and every attempt.
#[utoipa::path(get, path = "/subscriptions/v1/shops/{shop}/webhooks/subscriptions/{id}/deliveries/{message_id}", operation_id = "get_webhook_subscription_delivery", summary = "Get a webhook subscription delivery", tag = "Subscription webhooks",
    params(("shop" = String, Path, description = "The shop's identifier"), ("id" = String, Path, description = "The webhook subscription's id (32 hex characters)"), ("message_id" = String, Path, description = "The message's `webhook-id`")),
    security(("api_token" = ["read_subscriptions"]), ("oauth2" = ["read_subscriptions"])),
    responses((status = 200, body = SubscriptionWebhookDelivery)))]
pub async fn delivery(
    state: web::Data<AppState>,
    request: Authorized<scopes::ReadSubscriptions>,
    path: TypedPath<DeliveryPath>,
) -> Result<HttpResponse, ApiError> {
    let DeliveryPath { id, message_id } = path.get()?;
    let shop = request.access.shop;
    let message = state
        .read(move |tx| registration::delivery(tx, &shop, &id, &message_id))
        .await?;
    Ok(HttpResponse::Ok().json(SubscriptionWebhookDelivery { delivery: message }))
}

/// Resends a webhook subscription delivery.
///
/// Sends the message again and answers with its id. A message whose payload and attempts were
/// purged (finished longer ago than the retention period) cannot be: 422 `message.purged`.
#[utoipa::path(post, path = "/subscriptions/v1/shops/{shop}/webhooks/subscriptions/{id}/deliveries/{message_id}/resend", operation_id = "resend_webhook_subscription_delivery", summary = "Resend a webhook subscription delivery", tag = "Subscription webhooks",
    params(("shop" = String, Path, description = "The shop's identifier"), ("id" = String, Path, description = "The webhook subscription's id (32 hex characters)"), ("message_id" = String, Path, description = "The message's `webhook-id`")),
    security(("api_token" = ["write_subscriptions"]), ("oauth2" = ["write_subscriptions"])),
    responses((status = 202, body = SubscriptionWebhookResent)))]
pub async fn resend(
    state: web::Data<AppState>,
    request: Authorized<scopes::WriteSubscriptions>,
    path: TypedPath<DeliveryPath>,
) -> Result<HttpResponse, ApiError> {
    let DeliveryPath { id, message_id } = path.get()?;
    let (shop, now) = (request.access.shop, state.now());
    let resent = message_id.clone();
    state
        .write(move |tx| registration::resend(tx, &shop, &id, &message_id, now))
        .await?;
    state.webhooks.notify();
    Ok(HttpResponse::Accepted().json(SubscriptionWebhookResent { message_id: resent }))
}

/// Recovers failed webhook subscription deliveries.
///
/// Sends again every failed message created since the time given, and answers with how many.
#[utoipa::path(post, path = "/subscriptions/v1/shops/{shop}/webhooks/subscriptions/{id}/recover", operation_id = "recover_webhook_subscription_deliveries", summary = "Recover failed webhook subscription deliveries", tag = "Subscription webhooks",
    request_body = SubscriptionWebhookRecoverRequest,
    params(("shop" = String, Path, description = "The shop's identifier"), ("id" = String, Path, description = "The webhook subscription's id (32 hex characters)")),
    security(("api_token" = ["write_subscriptions"]), ("oauth2" = ["write_subscriptions"])),
    responses((status = 202, body = SubscriptionWebhookRecovered)))]
pub async fn recover(
    state: web::Data<AppState>,
    request: Authorized<scopes::WriteSubscriptions>,
    path: TypedPath<WebhookPath>,
    body: JsonBody,
) -> Result<HttpResponse, ApiError> {
    let since = recover_since(body)?;
    let (shop, id, now) = (request.access.shop, path.get()?.id, state.now());
    let recovered = state
        .write(move |tx| registration::recover(tx, &shop, &id, since, now))
        .await?;
    state.webhooks.notify();
    Ok(HttpResponse::Accepted().json(SubscriptionWebhookRecovered { recovered }))
}

/// Enables a webhook subscription.
///
/// A disabled webhook subscription gets messages again.
#[utoipa::path(post, path = "/subscriptions/v1/shops/{shop}/webhooks/subscriptions/{id}/enable", operation_id = "enable_webhook_subscription", summary = "Enable a webhook subscription", tag = "Subscription webhooks",
    params(("shop" = String, Path, description = "The shop's identifier"), ("id" = String, Path, description = "The webhook subscription's id (32 hex characters)")),
    security(("api_token" = ["write_subscriptions"]), ("oauth2" = ["write_subscriptions"])),
    responses((status = 200, body = WebhookSubscriptionAnswer)))]
pub async fn enable(
    state: web::Data<AppState>,
    request: Authorized<scopes::WriteSubscriptions>,
    path: TypedPath<WebhookPath>,
) -> Result<HttpResponse, ApiError> {
    let (shop, id, now) = (request.access.shop, path.get()?.id, state.now());
    let endpoint = state
        .write(move |tx| registration::enable(tx, &shop, &id, now))
        .await?;
    Ok(HttpResponse::Ok().json(webhook_subscription_answer(&endpoint)))
}
