//! Subscription customers and their addresses (seed 002 §4.1, contract §5): one customer record
//! per shop, shared with the directory; changes reach the platform through the connector outbox.

use actix_web::{HttpRequest, HttpResponse, web};
use mercer_domain::access::auth::Access;
use mercer_domain::subscriptions::customers::{self, parse_customer_list_query, parse_page};
use mercer_domain::subscriptions::input::{parse_customer_address, parse_customer_update};
use mercer_domain::subscriptions::operations::customer_subscriptions;
use serde_json::{Value, json};

use crate::http::error::ApiError;
use crate::http::extract::{Authorized, JsonBody, query_pairs, scopes};
use crate::http::state::AppState;

/// The body as JSON (400 when it is not), within the limits every database stores.
pub(super) fn json_value(body: JsonBody) -> Result<Value, ApiError> {
    let bytes = body.bytes()?;
    serde_json::from_slice(&bytes).map_err(ApiError::malformed_json)
}

/// A numeric id of the path, or 404 (no resource has any other id).
pub(super) fn path_id(text: &str, resource: &'static str) -> Result<i64, ApiError> {
    text.parse()
        .map_err(|_| ApiError::from(mercer_domain::DomainError::not_found(resource)))
}

/// After a change: the webhook dispatcher and the job runner (connector calls) have work.
pub(super) fn wake(state: &AppState) {
    state.webhooks.notify();
    state.jobs.notify();
}

fn shop_of(access: &Access) -> mercer_domain::access::shop::Shop {
    access.shop.clone()
}

/// `GET …/customers?status=&search=&limit=&page=` → `{"customers", "pagination"}`.
pub async fn list(
    state: web::Data<AppState>,
    request: Authorized<scopes::ReadSubscriptions>,
    http: HttpRequest,
) -> Result<HttpResponse, ApiError> {
    let query = parse_customer_list_query(&query_pairs(&http)?)?;
    let shop = shop_of(&request.access);
    let (customers, pagination) = state
        .read(move |tx| customers::list_customers(tx, &shop, &query))
        .await?;
    Ok(HttpResponse::Ok().json(json!({ "customers": customers, "pagination": pagination })))
}

/// `GET …/customers/{customer_id}` → `{"customer"}`.
pub async fn get(
    state: web::Data<AppState>,
    request: Authorized<scopes::ReadSubscriptions>,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let id = path_id(&path.1, "customer")?;
    let shop = shop_of(&request.access);
    let customer = state
        .read(move |tx| customers::get_customer(tx, &shop, id))
        .await?;
    Ok(HttpResponse::Ok().json(json!({ "customer": customer })))
}

/// `PUT …/customers/{customer_id}` `{"customer": {first_name, last_name, phone, email, notes}}`.
pub async fn update(
    state: web::Data<AppState>,
    request: Authorized<scopes::WriteSubscriptions>,
    path: web::Path<(String, String)>,
    body: JsonBody,
) -> Result<HttpResponse, ApiError> {
    let id = path_id(&path.1, "customer")?;
    let update = parse_customer_update(&json_value(body)?)?;
    let (shop, now) = (shop_of(&request.access), state.now());
    let customer = state
        .write(move |tx| customers::update_customer(tx, &shop, id, &update, now))
        .await?;
    wake(&state);
    Ok(HttpResponse::Ok().json(json!({ "customer": customer })))
}

/// `GET …/customers/{customer_id}/addresses` → `{"customer_addresses"}`.
pub async fn list_addresses(
    state: web::Data<AppState>,
    request: Authorized<scopes::ReadSubscriptions>,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let id = path_id(&path.1, "customer")?;
    let shop = shop_of(&request.access);
    let addresses = state
        .read(move |tx| customers::list_addresses(tx, &shop, id))
        .await?;
    Ok(HttpResponse::Ok().json(json!({ "customer_addresses": addresses })))
}

/// `POST …/customers/{customer_id}/addresses` `{"customer_address"}` → `{"customer_address"}`.
pub async fn create_address(
    state: web::Data<AppState>,
    request: Authorized<scopes::WriteSubscriptions>,
    path: web::Path<(String, String)>,
    body: JsonBody,
) -> Result<HttpResponse, ApiError> {
    let id = path_id(&path.1, "customer")?;
    let body = parse_customer_address(&json_value(body)?)?;
    let (shop, now) = (shop_of(&request.access), state.now());
    let address = state
        .write(move |tx| {
            customers::create_address(tx, &shop, id, &body.address, body.is_default, now)
        })
        .await?;
    wake(&state);
    Ok(HttpResponse::Ok().json(json!({ "customer_address": address })))
}

/// `PUT …/customers/{customer_id}/addresses/{address_id}` `{"customer_address"}`.
pub async fn update_address(
    state: web::Data<AppState>,
    request: Authorized<scopes::WriteSubscriptions>,
    path: web::Path<(String, String, String)>,
    body: JsonBody,
) -> Result<HttpResponse, ApiError> {
    let customer_id = path_id(&path.1, "customer")?;
    let address_id = path_id(&path.2, "customer_address")?;
    let body = parse_customer_address(&json_value(body)?)?;
    let (shop, now) = (shop_of(&request.access), state.now());
    let address = state
        .write(move |tx| {
            customers::update_address(
                tx,
                &shop,
                customer_id,
                address_id,
                &body.address,
                body.is_default,
                now,
            )
        })
        .await?;
    wake(&state);
    Ok(HttpResponse::Ok().json(json!({ "customer_address": address })))
}

/// `DELETE …/customers/{customer_id}/addresses/{address_id}` → 204.
pub async fn delete_address(
    state: web::Data<AppState>,
    request: Authorized<scopes::WriteSubscriptions>,
    path: web::Path<(String, String, String)>,
) -> Result<HttpResponse, ApiError> {
    let customer_id = path_id(&path.1, "customer")?;
    let address_id = path_id(&path.2, "customer_address")?;
    let (shop, now) = (shop_of(&request.access), state.now());
    state
        .write(move |tx| customers::delete_address(tx, &shop, customer_id, address_id, now))
        .await?;
    wake(&state);
    Ok(HttpResponse::NoContent().finish())
}

/// `GET …/customers/{customer_id}/subscriptions?limit=&page=` → `{"subscriptions",
/// "pagination"}`.
pub async fn subscriptions(
    state: web::Data<AppState>,
    request: Authorized<scopes::ReadSubscriptions>,
    path: web::Path<(String, String)>,
    http: HttpRequest,
) -> Result<HttpResponse, ApiError> {
    let id = path_id(&path.1, "customer")?;
    let (limit, page) = parse_page(&query_pairs(&http)?)?;
    let shop = shop_of(&request.access);
    let (subscriptions, pagination) = state
        .read(move |tx| customer_subscriptions(tx, &shop, id, limit, page))
        .await?;
    Ok(
        HttpResponse::Ok()
            .json(json!({ "subscriptions": subscriptions, "pagination": pagination })),
    )
}
