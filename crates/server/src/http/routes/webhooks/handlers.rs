//! Checkout webhooks and a test delivery (issue 5's integrator tools).

use actix_web::{HttpResponse, web};
use mercer_domain::kernel::body::Field;
use mercer_domain::kernel::outbound::AddressGuard;
use mercer_domain::webhooks::checkout;
use mercer_domain::webhooks::checkout::{CheckoutWebhookResource, WebhookInput};
use mercer_domain::webhooks::log::{Delivery, DeliveryLine};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::http::error::ApiError;
use crate::http::extract::{Authorized, JsonBody, scopes};
use crate::http::state::{AppState, run_blocking};

/// `{"data": webhook}`.
#[derive(Serialize, ToSchema)]
pub struct CheckoutWebhookAnswer {
    data: CheckoutWebhookResource,
}

fn webhook_answer(data: CheckoutWebhookResource) -> CheckoutWebhookAnswer {
    CheckoutWebhookAnswer { data }
}

/// `{"data": [webhook, …]}`.
#[derive(Serialize, ToSchema)]
pub struct CheckoutWebhookList {
    data: Vec<CheckoutWebhookResource>,
}

/// `{"data": [delivery line, …]}`: the latest messages, newest first.
#[derive(Serialize, ToSchema)]
pub struct CheckoutDeliveryLog {
    data: Vec<DeliveryLine>,
}

/// `{"data": delivery}`: one message, its payload and every attempt.
#[derive(Serialize, ToSchema)]
pub struct CheckoutDeliveryAnswer {
    data: Delivery,
}

/// A message queued to be sent.
#[derive(Serialize, ToSchema)]
pub struct CheckoutQueuedMessage {
    /// The message's `webhook-id`, the same on every attempt.
    message_id: String,
}

/// `{"data": {"message_id"}}`: a message queued (a resend, a test delivery).
#[derive(Serialize, ToSchema)]
pub struct CheckoutQueuedMessageAnswer {
    data: CheckoutQueuedMessage,
}

impl CheckoutQueuedMessageAnswer {
    pub fn of(message_id: String) -> CheckoutQueuedMessageAnswer {
        CheckoutQueuedMessageAnswer {
            data: CheckoutQueuedMessage { message_id },
        }
    }
}

/// How many failed messages were queued again.
#[derive(Serialize, ToSchema)]
pub struct CheckoutRecovered {
    /// How many failed messages were queued again.
    recovered: u64,
}

/// `{"data": {"recovered"}}`.
#[derive(Serialize, ToSchema)]
pub struct CheckoutRecoverAnswer {
    data: CheckoutRecovered,
}

/// `…/webhooks/{id}`: a webhook by the id clients see (32 hex characters).
#[derive(Deserialize)]
pub(crate) struct WebhookPath {
    pub(crate) id: String,
}

/// `…/webhooks/{id}/deliveries/{message_id}`: one of its messages, by its `webhook-id`.
#[derive(Deserialize)]
pub(crate) struct DeliveryPath {
    pub(crate) id: String,
    pub(crate) message_id: String,
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

/// Creates a checkout webhook.
///
/// Refused before the integration secret is configured, for an unknown topic, and for a callback
/// URL that is not absolute http(s) or that leads into a private network.
/// `rate_limit_per_s`, when given, spaces the starts of its deliveries.
#[utoipa::path(post, path = "/checkout/shop/{shop}/webhooks", operation_id = "create_checkout_webhook", summary = "Create a checkout webhook", tag = "Checkout: webhooks",
    request_body = WebhookInput,
    params(("shop" = String, Path, description = "The shop's identifier")),
    security(("api_token" = ["modify_shop_settings"]), ("oauth2" = ["modify_shop_settings"])),
    responses((status = 201, body = CheckoutWebhookAnswer)))]
pub async fn create(
    state: web::Data<AppState>,
    request: Authorized<scopes::ModifyShopSettings>,
    body: JsonBody,
) -> Result<HttpResponse, ApiError> {
    let input: WebhookInput = body.parse()?;
    let callback = check_callback(&state, input.callback_url).await?;
    let (shop, now) = (request.access.shop, state.now());
    let endpoint = state
        .write(move |tx| {
            checkout::create(
                tx,
                &shop,
                input.webhook_topic_id,
                callback,
                input.rate_limit_per_s,
                now,
            )
        })
        .await?;
    Ok(HttpResponse::Created().json(webhook_answer(checkout::resource(&endpoint))))
}

/// Lists checkout webhooks.
#[utoipa::path(get, path = "/checkout/shop/{shop}/webhooks", operation_id = "list_checkout_webhooks", summary = "List checkout webhooks", tag = "Checkout: webhooks",
    params(("shop" = String, Path, description = "The shop's identifier")),
    security(("api_token" = ["modify_shop_settings"]), ("oauth2" = ["modify_shop_settings"])),
    responses((status = 200, body = CheckoutWebhookList)))]
pub async fn list(
    state: web::Data<AppState>,
    request: Authorized<scopes::ModifyShopSettings>,
) -> Result<HttpResponse, ApiError> {
    let shop = request.access.shop;
    let data = state.read(move |tx| checkout::list(tx, &shop)).await?;
    Ok(HttpResponse::Ok().json(CheckoutWebhookList { data }))
}

/// The body of Update Webhook: the fields given change, and at least one is needed.
#[derive(Deserialize, Default, ToSchema)]
pub struct CheckoutWebhookUpdate {
    /// The new URL deliveries go to: absolute http(s), at most 2048 characters, not into a
    /// private network; required unless `rate_limit_per_s` is given.
    #[schema(format = "uri", max_length = 2048)]
    #[serde(default)]
    callback_url: Option<String>,
    /// At most how many deliveries to the webhook start per second (an integer from 1 to
    /// 10,000, or its decimal text), however many Mercer processes deliver. Null removes the
    /// limit; left out, it stays as it is.
    #[schema(value_type = Option<i64>, minimum = 1, maximum = 10000, example = 20)]
    #[serde(default)]
    rate_limit_per_s: Field<i64>,
}

/// Updates a checkout webhook.
///
/// Sets a new callback URL, checked like a new webhook's, and sets or clears the webhook's
/// rate limit (`rate_limit_per_s`).
#[utoipa::path(patch, path = "/checkout/shop/{shop}/webhooks/{id}", operation_id = "update_checkout_webhook", summary = "Update a checkout webhook", tag = "Checkout: webhooks",
    request_body = CheckoutWebhookUpdate,
    params(("shop" = String, Path, description = "The shop's identifier"), ("id" = String, Path, description = "The webhook's id (32 hex characters)")),
    security(("api_token" = ["modify_shop_settings"]), ("oauth2" = ["modify_shop_settings"])),
    responses((status = 200, body = CheckoutWebhookAnswer)))]
pub async fn update(
    state: web::Data<AppState>,
    request: Authorized<scopes::ModifyShopSettings>,
    path: web::Path<WebhookPath>,
    body: JsonBody,
) -> Result<HttpResponse, ApiError> {
    let input: CheckoutWebhookUpdate = body.parse()?;
    // A body with neither field is told its callback URL is required, as before there was a
    // limit to change.
    let callback = match input.callback_url {
        None if !input.rate_limit_per_s.is_absent() => None,
        url => Some(check_callback(&state, url).await?),
    };
    let rate_limit_per_s = input.rate_limit_per_s;
    let (shop, id, now) = (request.access.shop, path.into_inner().id, state.now());
    let endpoint = state
        .write(move |tx| checkout::update(tx, &shop, &id, callback, rate_limit_per_s, now))
        .await?;
    Ok(HttpResponse::Ok().json(webhook_answer(checkout::resource(&endpoint))))
}

/// Deletes a checkout webhook.
///
/// Its pending messages are cancelled.
#[utoipa::path(delete, path = "/checkout/shop/{shop}/webhooks/{id}", operation_id = "delete_checkout_webhook", summary = "Delete a checkout webhook", tag = "Checkout: webhooks",
    params(("shop" = String, Path, description = "The shop's identifier"), ("id" = String, Path, description = "The webhook's id (32 hex characters)")),
    security(("api_token" = ["modify_shop_settings"]), ("oauth2" = ["modify_shop_settings"])),
    responses((status = 204, description = "Deleted")))]
pub async fn delete(
    state: web::Data<AppState>,
    request: Authorized<scopes::ModifyShopSettings>,
    path: web::Path<WebhookPath>,
) -> Result<HttpResponse, ApiError> {
    let (shop, id, now) = (request.access.shop, path.into_inner().id, state.now());
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

/// Lists a checkout webhook's deliveries.
///
/// The latest messages (50 by default, at most 250), newest first, each with its last attempt.
#[utoipa::path(get, path = "/checkout/shop/{shop}/webhooks/{id}/deliveries", operation_id = "list_checkout_webhook_deliveries", summary = "List a checkout webhook's deliveries", tag = "Checkout: webhooks",
    params(("shop" = String, Path, description = "The shop's identifier"), ("id" = String, Path, description = "The webhook's id (32 hex characters)"),
        ("limit" = Option<i64>, Query, minimum = 1, maximum = 250, description = "How many of the latest messages, 1 to 250 (default 50)")),
    security(("api_token" = ["read_shop_settings"]), ("oauth2" = ["read_shop_settings"])),
    responses((status = 200, body = CheckoutDeliveryLog)))]
pub async fn deliveries(
    state: web::Data<AppState>,
    request: Authorized<scopes::ReadShopSettings>,
    path: web::Path<WebhookPath>,
    query: web::Query<LogQuery>,
) -> Result<HttpResponse, ApiError> {
    let limit = log_limit(&query)?;
    let (shop, id) = (request.access.shop, path.into_inner().id);
    let log = state
        .read(move |tx| checkout::deliveries(tx, &shop, &id, limit))
        .await?;
    Ok(HttpResponse::Ok().json(CheckoutDeliveryLog { data: log }))
}

/// Gets a checkout webhook delivery.
///
/// One message, with its payload and every attempt.
#[utoipa::path(get, path = "/checkout/shop/{shop}/webhooks/{id}/deliveries/{message_id}", operation_id = "get_checkout_webhook_delivery", summary = "Get a checkout webhook delivery", tag = "Checkout: webhooks",
    params(("shop" = String, Path, description = "The shop's identifier"), ("id" = String, Path, description = "The webhook's id (32 hex characters)"),
        ("message_id" = String, Path, description = "The message's `webhook-id` (`msg_` and 32 hex characters)")),
    security(("api_token" = ["read_shop_settings"]), ("oauth2" = ["read_shop_settings"])),
    responses((status = 200, body = CheckoutDeliveryAnswer)))]
pub async fn delivery(
    state: web::Data<AppState>,
    request: Authorized<scopes::ReadShopSettings>,
    path: web::Path<DeliveryPath>,
) -> Result<HttpResponse, ApiError> {
    let DeliveryPath { id, message_id } = path.into_inner();
    let shop = request.access.shop;
    let message = state
        .read(move |tx| checkout::delivery(tx, &shop, &id, &message_id))
        .await?;
    Ok(HttpResponse::Ok().json(CheckoutDeliveryAnswer { data: message }))
}

/// Resends a checkout webhook delivery.
///
/// Sends the message again, with the same `webhook-id`. A message whose payload and attempts
/// were purged (finished longer ago than the retention period) cannot be: 422 `message.purged`.
#[utoipa::path(post, path = "/checkout/shop/{shop}/webhooks/{id}/deliveries/{message_id}/resend", operation_id = "resend_checkout_webhook_delivery", summary = "Resend a checkout webhook delivery", tag = "Checkout: webhooks",
    params(("shop" = String, Path, description = "The shop's identifier"), ("id" = String, Path, description = "The webhook's id (32 hex characters)"),
        ("message_id" = String, Path, description = "The message's `webhook-id` (`msg_` and 32 hex characters)")),
    security(("api_token" = ["modify_shop_settings"]), ("oauth2" = ["modify_shop_settings"])),
    responses((status = 202, body = CheckoutQueuedMessageAnswer)))]
pub async fn resend(
    state: web::Data<AppState>,
    request: Authorized<scopes::ModifyShopSettings>,
    path: web::Path<DeliveryPath>,
) -> Result<HttpResponse, ApiError> {
    let DeliveryPath { id, message_id } = path.into_inner();
    let (shop, now) = (request.access.shop, state.now());
    let resent = message_id.clone();
    state
        .write(move |tx| checkout::resend(tx, &shop, &id, &message_id, now))
        .await?;
    state.webhooks.notify();
    Ok(HttpResponse::Accepted().json(CheckoutQueuedMessageAnswer::of(resent)))
}

/// The body of a recover: from when failed messages are sent again. A missing `since` is
/// `None` (serde's rule for `Option` fields), refused by [`recover_since`].
#[derive(Deserialize, Default, ToSchema)]
pub struct RecoverBody {
    /// The messages created since then (an RFC 3339 date-time) are sent again; required.
    #[schema(required = true, value_type = String, format = DateTime)]
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

/// Recovers failed checkout webhook deliveries.
///
/// Sends again every failed message created since the time given, and answers with how many.
#[utoipa::path(post, path = "/checkout/shop/{shop}/webhooks/{id}/recover", operation_id = "recover_checkout_webhook_deliveries", summary = "Recover failed checkout webhook deliveries", tag = "Checkout: webhooks",
    request_body = RecoverBody,
    params(("shop" = String, Path, description = "The shop's identifier"), ("id" = String, Path, description = "The webhook's id (32 hex characters)")),
    security(("api_token" = ["modify_shop_settings"]), ("oauth2" = ["modify_shop_settings"])),
    responses((status = 202, body = CheckoutRecoverAnswer)))]
pub async fn recover(
    state: web::Data<AppState>,
    request: Authorized<scopes::ModifyShopSettings>,
    path: web::Path<WebhookPath>,
    body: JsonBody,
) -> Result<HttpResponse, ApiError> {
    let since = recover_since(body)?;
    let (shop, id, now) = (request.access.shop, path.into_inner().id, state.now());
    let recovered = state
        .write(move |tx| checkout::recover(tx, &shop, &id, since, now))
        .await?;
    state.webhooks.notify();
    Ok(HttpResponse::Accepted().json(CheckoutRecoverAnswer {
        data: CheckoutRecovered { recovered },
    }))
}

/// Enables a checkout webhook.
///
/// A disabled webhook gets messages again.
#[utoipa::path(post, path = "/checkout/shop/{shop}/webhooks/{id}/enable", operation_id = "enable_checkout_webhook", summary = "Enable a checkout webhook", tag = "Checkout: webhooks",
    params(("shop" = String, Path, description = "The shop's identifier"), ("id" = String, Path, description = "The webhook's id (32 hex characters)")),
    security(("api_token" = ["modify_shop_settings"]), ("oauth2" = ["modify_shop_settings"])),
    responses((status = 200, body = CheckoutWebhookAnswer)))]
pub async fn enable(
    state: web::Data<AppState>,
    request: Authorized<scopes::ModifyShopSettings>,
    path: web::Path<WebhookPath>,
) -> Result<HttpResponse, ApiError> {
    let (shop, id, now) = (request.access.shop, path.into_inner().id, state.now());
    let endpoint = state
        .write(move |tx| checkout::enable(tx, &shop, &id, now))
        .await?;
    Ok(HttpResponse::Ok().json(webhook_answer(checkout::resource(&endpoint))))
}
