//! Init Order and the shop's checkout settings: API-token routes.

use actix_web::{HttpResponse, web};
use mercer_domain::access::shop::Shop;
use mercer_domain::access::shop::{find_shop, update_shop_settings};
use mercer_domain::checkout::input::{CheckoutInitRequest, parse_init};
use mercer_domain::checkout::payloads::{
    CheckoutWebhookTopic, send_test, test_message, webhook_topics,
};
use mercer_domain::checkout::settings::{
    CheckoutSettingsPatch, SettingsResource, parse_settings_patch, settings_resource,
};
use mercer_domain::checkout::storefront::{self, InitAnswer};
use mercer_domain::kernel::outbound::AddressGuard;
use mercer_domain::kernel::time::Timestamp;
use mercer_domain::webhooks::WebhookKind;
use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;

use super::super::webhooks::handlers::CheckoutQueuedMessageAnswer;
use crate::http::error::ApiError;
use crate::http::extract::{Authorized, JsonBody, TypedPath, scopes};
use crate::http::routes::webhooks::handlers::WebhookPath;
use crate::http::state::{AppState, run_blocking};

/// `{"data": {"jwt_token", "public_order_id", "application_state", "initial_data",
/// "vaulting_enabled"}}`.
#[derive(Serialize, ToSchema)]
pub struct InitOrderAnswer {
    data: InitAnswer,
}

/// `{"data": settings}`.
#[derive(Serialize, ToSchema)]
pub struct CheckoutSettingsAnswer {
    data: SettingsResource,
}

/// Creates a checkout order.
///
/// Makes a checkout order from the cart and answers with it and the storefront's token for it: the
/// JWT, the public order id, the application state and the initial data. Needs the `write_orders`
/// scope.
#[utoipa::path(post, path = "/checkout/orders/{shop}/init", operation_id = "init_checkout_order", summary = "Create a checkout order", tag = "Checkout: orders",
    request_body = CheckoutInitRequest,
    params(("shop" = String, Path, description = "The shop's identifier")),
    security(("api_token" = ["write_orders"]), ("oauth2" = ["write_orders"])),
    responses((status = 200, body = InitOrderAnswer)))]
pub async fn init(
    state: web::Data<AppState>,
    request: Authorized<scopes::WriteOrders>,
    body: JsonBody,
) -> Result<HttpResponse, ApiError> {
    let body: Value = body.parse()?;
    let (shop, now, guard) = (request.access.shop, state.now(), state.address_guard);
    // The overrides given for the order are checked like the shop's: the guard resolves names.
    let input = run_blocking(move || parse_init(&body, &guard as &dyn AddressGuard)).await?;
    let data = state
        .write(move |tx| storefront::init(tx, &shop, input, now))
        .await?;
    Ok(HttpResponse::Ok().json(InitOrderAnswer { data }))
}

/// Gets the checkout settings.
///
/// The shop's checkout settings. Needs the `modify_shop_settings` scope.
#[utoipa::path(get, path = "/checkout/shop/{shop}/settings", operation_id = "get_checkout_settings", summary = "Get the checkout settings", tag = "Checkout: settings",
    params(("shop" = String, Path, description = "The shop's identifier")),
    security(("api_token" = ["modify_shop_settings"]), ("oauth2" = ["modify_shop_settings"])),
    responses((status = 200, body = CheckoutSettingsAnswer)))]
pub async fn settings(
    state: web::Data<AppState>,
    request: Authorized<scopes::ModifyShopSettings>,
) -> Result<HttpResponse, ApiError> {
    // Read now, not from the credentials' cache: a change shows at once.
    let identifier = request.access.shop.identifier.clone();
    let shop = state
        .read(move |tx| find_shop(tx, identifier.as_str()))
        .await?;
    Ok(HttpResponse::Ok().json(CheckoutSettingsAnswer {
        data: settings_resource(&shop.checkout),
    }))
}

/// Updates the checkout settings.
///
/// Changes the settings given. Every invalid value is reported, and then nothing changes.
#[utoipa::path(patch, path = "/checkout/shop/{shop}/settings", operation_id = "update_checkout_settings", summary = "Update the checkout settings", tag = "Checkout: settings",
    request_body = CheckoutSettingsPatch,
    params(("shop" = String, Path, description = "The shop's identifier")),
    security(("api_token" = ["modify_shop_settings"]), ("oauth2" = ["modify_shop_settings"])),
    responses((status = 200, body = CheckoutSettingsAnswer)))]
pub async fn update_settings(
    state: web::Data<AppState>,
    request: Authorized<scopes::ModifyShopSettings>,
    body: JsonBody,
) -> Result<HttpResponse, ApiError> {
    let body: Value = body.parse()?;
    let changes = parse_settings_patch(&body)?;
    let (identifier, now) = (request.access.shop.identifier.clone(), state.now());
    let shop = state
        .write(move |tx| update_shop_settings(tx, identifier.as_str(), changes, now))
        .await?;
    Ok(HttpResponse::Ok().json(CheckoutSettingsAnswer {
        data: settings_resource(&shop.checkout),
    }))
}

/// Sends a test webhook message.
///
/// Enqueues a sample payload of the webhook's topic, marked `"test": true`, and answers with its
/// `webhook-id`. The sample is a checkout order's.
#[utoipa::path(post, path = "/checkout/shop/{shop}/webhooks/{id}/test", operation_id = "test_checkout_webhook", summary = "Send a test webhook message", tag = "Checkout: webhooks",
    params(("shop" = String, Path, description = "The shop's identifier"), ("id" = String, Path, description = "The webhook's id (32 hex characters)")),
    security(("api_token" = ["modify_shop_settings"]), ("oauth2" = ["modify_shop_settings"])),
    responses((status = 202, body = CheckoutQueuedMessageAnswer)))]
pub async fn test_webhook(
    state: web::Data<AppState>,
    request: Authorized<scopes::ModifyShopSettings>,
    path: TypedPath<WebhookPath>,
) -> Result<HttpResponse, ApiError> {
    let id = path.get()?.id;
    let (shop, now) = (request.access.shop, state.now());
    let key = (shop.id.0, id.clone());
    if let Some(message) = send_test_to_known(&state, &shop, &key, now).await? {
        state.webhooks.notify();
        return Ok(HttpResponse::Accepted().json(CheckoutQueuedMessageAnswer::of(message)));
    }
    let (message, endpoint) = state
        .write(move |tx| send_test(tx, &shop, &id, now))
        .await?;
    state.known_webhooks.put(key, endpoint);
    state.webhooks.notify();
    Ok(HttpResponse::Accepted().json(CheckoutQueuedMessageAnswer::of(message)))
}

/// A test delivery to a webhook an earlier one found: its message, stored in one statement
/// with whatever other requests' messages wait, and its `webhook-id` once committed. None when the webhook is not known here, or no longer takes
/// the message (deleted, disabled, changed): the caller then goes the long way, which answers
/// why.
async fn send_test_to_known(
    state: &AppState,
    shop: &Shop,
    key: &(i64, String),
    now: Timestamp,
) -> Result<Option<String>, ApiError> {
    let Some(endpoint) = state.known_webhooks.get(key) else {
        return Ok(None);
    };
    let message = test_message(shop, &endpoint, now)?;
    let message_id = message.message_id.clone();
    match state
        .webhook_enqueue
        .submit(WebhookKind::Checkout, message)
        .await?
    {
        Some(_) => Ok(Some(message_id)),
        None => {
            state.known_webhooks.forget(key);
            Ok(None)
        }
    }
}

/// `{"data": [topic, …]}`: the checkout topics, each with the JSON Schema of its payload.
#[derive(Serialize, ToSchema)]
pub struct CheckoutWebhookTopics {
    data: Vec<CheckoutWebhookTopic>,
}

/// Lists checkout webhook topics.
///
/// Every checkout topic, with its fixed id (1 to 7), its name and the JSON Schema (2020-12,
/// self-contained) of the body its deliveries carry.
#[utoipa::path(get, path = "/checkout/shop/{shop}/webhooks/topics", operation_id = "list_checkout_webhook_topics", summary = "List checkout webhook topics", tag = "Checkout: webhooks",
    params(("shop" = String, Path, description = "The shop's identifier")),
    security(("api_token" = ["modify_shop_settings"]), ("oauth2" = ["modify_shop_settings"])),
    responses((status = 200, body = CheckoutWebhookTopics)))]
pub async fn topics(_request: Authorized<scopes::ModifyShopSettings>) -> HttpResponse {
    HttpResponse::Ok().json(CheckoutWebhookTopics {
        data: webhook_topics(),
    })
}
