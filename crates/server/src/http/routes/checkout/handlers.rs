//! Init Order and the shop's checkout settings: API-token routes.

use actix_web::{HttpResponse, web};
use mercer_domain::access::shop::{find_shop, update_shop_settings};
use mercer_domain::checkout::input::parse_init;
use mercer_domain::checkout::payloads::send_test;
use mercer_domain::checkout::settings::{parse_settings_patch, settings_resource};
use mercer_domain::checkout::storefront;
use mercer_domain::kernel::outbound::AddressGuard;
use serde_json::{Value, json};

use crate::http::error::ApiError;
use crate::http::extract::{Authorized, JsonBody, scopes};
use crate::http::state::{AppState, run_blocking};

/// Init Order (`write_orders`): the order made from the cart, and the storefront's token of
/// it: `{"data": {"jwt_token", "public_order_id", "application_state", "initial_data"}}`.
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
    Ok(HttpResponse::Ok().json(json!({ "data": data })))
}

/// The shop's checkout settings (`modify_shop_settings`).
pub async fn settings(
    state: web::Data<AppState>,
    request: Authorized<scopes::ModifyShopSettings>,
) -> Result<HttpResponse, ApiError> {
    // Read now, not from the credentials' cache: a change shows at once.
    let identifier = request.access.shop.identifier.clone();
    let shop = state
        .read(move |tx| find_shop(tx, identifier.as_str()))
        .await?;
    Ok(HttpResponse::Ok().json(json!({ "data": settings_resource(&shop.checkout) })))
}

/// Changes the settings given; every invalid value is a 422 and then nothing changes.
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
    Ok(HttpResponse::Ok().json(json!({ "data": settings_resource(&shop.checkout) })))
}

/// `POST /checkout/shop/{shop}/webhooks/{id}/test`: enqueues a sample payload of the webhook's
/// topic, marked `"test": true`, and answers 202 with its `webhook-id`. A checkout route: the
/// sample is a checkout order's.
pub async fn test_webhook(
    state: web::Data<AppState>,
    request: Authorized<scopes::ModifyShopSettings>,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let (shop, id, now) = (request.access.shop, path.into_inner().1, state.now());
    let message = state
        .write(move |tx| send_test(tx, &shop, &id, now))
        .await?;
    state.webhooks.notify();
    Ok(HttpResponse::Accepted().json(json!({ "data": { "message_id": message } })))
}
