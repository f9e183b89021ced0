//! Events from connectors and sync triggers (contract §3.4).

use actix_web::{HttpResponse, web};
use mercer_domain::access::shop::Shop;
use mercer_domain::platform::destinations::Topic;
use mercer_domain::platform::events::{
    EntityKind, EventAction, EventBodyError, EventSource, parse_event_body,
};
use mercer_domain::platform::sync::{SyncResource, find_run, start_sync};
use serde_json::json;

use crate::http::error::ApiError;
use crate::http::extract::{Authorized, JsonBody, RequiredScope, scopes};
use crate::http::state::AppState;

/// Checks the event, stores it, and answers 202 with an empty body once it is stored.
async fn accept<S: RequiredScope>(
    state: web::Data<AppState>,
    request: Authorized<S>,
    body: JsonBody,
    kind: EntityKind,
    action: EventAction,
) -> Result<HttpResponse, ApiError> {
    let bytes = body.bytes()?;
    let shop_id = request.access.shop.id;
    let event = parse_event_body(
        shop_id,
        kind,
        action,
        &bytes,
        EventSource::Webhook,
        state.now(),
    )
    .map_err(|error| match error {
        EventBodyError::Malformed(error) => ApiError::malformed_json(error),
        EventBodyError::Invalid(error) => ApiError::from(error),
    })?;
    state.ingest.submit(vec![event]).await?;
    Ok(HttpResponse::Accepted().finish())
}

macro_rules! event_routes {
    ($($name:ident => $scope:ident, $kind:ident, $action:ident;)+) => {
        $(
            pub async fn $name(
                state: web::Data<AppState>,
                request: Authorized<scopes::$scope>,
                body: JsonBody,
            ) -> Result<HttpResponse, ApiError> {
                accept(state, request, body, EntityKind::$kind, EventAction::$action).await
            }
        )+
    };
}

event_routes! {
    customer_saved => WriteCustomers, Customer, Saved;
    customer_deleted => WriteCustomers, Customer, Deleted;
    order_saved => WriteOrders, Order, Saved;
    order_deleted => WriteOrders, Order, Deleted;
    product_saved => WriteProducts, Product, Saved;
    product_deleted => WriteProducts, Product, Deleted;
    category_saved => WriteProducts, Category, Saved;
    category_deleted => WriteProducts, Category, Deleted;
}

/// Starts a sync and enqueues its job (the job runner pulls the pages); 202 at once, 409 while
/// one runs.
async fn trigger(
    state: web::Data<AppState>,
    shop: Shop,
    topic: Topic,
) -> Result<HttpResponse, ApiError> {
    let now = state.now();
    let run = state
        .write(move |tx| start_sync(tx, &shop, topic, now))
        .await?;
    state.jobs.notify();
    Ok(HttpResponse::Accepted().json(json!({ "data": { "sync": SyncResource::of(&run) } })))
}

pub async fn sync_customers(
    state: web::Data<AppState>,
    request: Authorized<scopes::WriteCustomers>,
) -> Result<HttpResponse, ApiError> {
    trigger(state, request.access.shop, Topic::Customers).await
}

pub async fn sync_orders(
    state: web::Data<AppState>,
    request: Authorized<scopes::WriteOrders>,
) -> Result<HttpResponse, ApiError> {
    trigger(state, request.access.shop, Topic::Orders).await
}

/// The product sync: the categories, then the products.
pub async fn sync_products(
    state: web::Data<AppState>,
    request: Authorized<scopes::WriteProducts>,
) -> Result<HttpResponse, ApiError> {
    trigger(state, request.access.shop, Topic::Products).await
}

/// `GET …/sync/{id}`: how a sync is doing.
async fn sync_status(
    state: web::Data<AppState>,
    shop: Shop,
    topic: Topic,
    id: i64,
) -> Result<HttpResponse, ApiError> {
    let run = state.read(move |tx| find_run(tx, &shop, topic, id)).await?;
    Ok(HttpResponse::Ok().json(json!({ "data": { "sync": SyncResource::of(&run) } })))
}

pub async fn customer_sync_status(
    state: web::Data<AppState>,
    request: Authorized<scopes::ReadCustomers>,
    path: web::Path<(String, i64)>,
) -> Result<HttpResponse, ApiError> {
    sync_status(state, request.access.shop, Topic::Customers, path.1).await
}

pub async fn order_sync_status(
    state: web::Data<AppState>,
    request: Authorized<scopes::ReadOrders>,
    path: web::Path<(String, i64)>,
) -> Result<HttpResponse, ApiError> {
    sync_status(state, request.access.shop, Topic::Orders, path.1).await
}

pub async fn product_sync_status(
    state: web::Data<AppState>,
    request: Authorized<scopes::ReadProducts>,
    path: web::Path<(String, i64)>,
) -> Result<HttpResponse, ApiError> {
    sync_status(state, request.access.shop, Topic::Products, path.1).await
}
