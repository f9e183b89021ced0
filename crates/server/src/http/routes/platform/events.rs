//! Events from connectors and sync triggers.

use actix_web::{HttpResponse, web};
use mercer_domain::access::shop::Shop;
use mercer_domain::kernel::ids::SyncId;
use mercer_domain::platform::destinations::Topic;
use mercer_domain::platform::events::{
    CategoryDeletedEvent, CategorySavedEvent, CustomerDeletedEvent, CustomerSavedEvent, EntityKind,
    EventAction, EventBodyError, EventSource, OrderDeletedEvent, OrderSavedEvent,
    ProductDeletedEvent, ProductSavedEvent, parse_event_body,
};
use mercer_domain::platform::sync::{SyncResource, find_run, start_sync};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::http::error::ApiError;
use crate::http::extract::{Authorized, JsonBody, RequiredScope, TypedPath, scopes};
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

/// One handler per event route, each with its own operation in the OpenAPI document: the route's
/// path, its operation id, the scope it needs (its name, for the document, beside its type), the
/// body's schema, the operation's short title and its description. Each answers 202 with no body
/// once the event is stored.
macro_rules! event_routes {
    ($($name:ident => $scope:ident, $kind:ident, $action:ident, $path:literal, $operation_id:literal,
       $scope_name:literal, $body:ty, $summary:literal, $doc:literal;)+) => {
        $(
            #[doc = $doc]
            #[utoipa::path(post, path = $path, operation_id = $operation_id, summary = $summary, description = $doc, tag = "Platform events",
                request_body = $body,
                params(("shop" = String, Path, description = "The shop's identifier")),
                security(("api_token" = [$scope_name]), ("oauth2" = [$scope_name])),
                responses((status = 202, description = "The event is stored; it is applied in order of arrival")))]
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
    customer_saved => WriteCustomers, Customer, Saved,
        "/customers/v1/shops/{shop}/platforms/custom/webhooks/customers/saved",
        "send_customer_saved_event", "write_customers", CustomerSavedEvent,
        "Receive a Customer Saved event",
        "A customer was created or changed on the platform.";
    customer_deleted => WriteCustomers, Customer, Deleted,
        "/customers/v1/shops/{shop}/platforms/custom/webhooks/customers/deleted",
        "send_customer_deleted_event", "write_customers", CustomerDeletedEvent,
        "Receive a Customer Deleted event",
        "A customer was deleted on the platform.";
    order_saved => WriteOrders, Order, Saved,
        "/orders/v1/shops/{shop}/platforms/custom/webhooks/orders/saved",
        "send_order_saved_event", "write_orders", OrderSavedEvent,
        "Receive an Order Saved event",
        "An order was created or changed on the platform.";
    order_deleted => WriteOrders, Order, Deleted,
        "/orders/v1/shops/{shop}/platforms/custom/webhooks/orders/deleted",
        "send_order_deleted_event", "write_orders", OrderDeletedEvent,
        "Receive an Order Deleted event",
        "An order was deleted on the platform.";
    product_saved => WriteProducts, Product, Saved,
        "/products/v1/shops/{shop}/platforms/custom/webhooks/products/saved",
        "send_product_saved_event", "write_products", ProductSavedEvent,
        "Receive a Product Saved event",
        "A product (with its variants) was created or changed on the platform.";
    product_deleted => WriteProducts, Product, Deleted,
        "/products/v1/shops/{shop}/platforms/custom/webhooks/products/deleted",
        "send_product_deleted_event", "write_products", ProductDeletedEvent,
        "Receive a Product Deleted event",
        "A product was deleted on the platform.";
    category_saved => WriteProducts, Category, Saved,
        "/products/v1/shops/{shop}/platforms/custom/webhooks/categories/saved",
        "send_category_saved_event", "write_products", CategorySavedEvent,
        "Receive a Category Saved event",
        "A product category was created or changed on the platform.";
    category_deleted => WriteProducts, Category, Deleted,
        "/products/v1/shops/{shop}/platforms/custom/webhooks/categories/deleted",
        "send_category_deleted_event", "write_products", CategoryDeletedEvent,
        "Receive a Category Deleted event",
        "A product category was deleted on the platform.";
}

/// `{"data": {"sync": {…}}}`.
#[derive(Serialize, ToSchema)]
pub struct SyncAnswer {
    data: SyncAnswerData,
}

/// `data` of [`SyncAnswer`].
#[derive(Serialize, ToSchema)]
pub struct SyncAnswerData {
    sync: SyncResource,
}

fn sync_answer(sync: SyncResource) -> SyncAnswer {
    SyncAnswer {
        data: SyncAnswerData { sync },
    }
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
    Ok(HttpResponse::Accepted().json(sync_answer(SyncResource::of(&run))))
}

/// Starts a customer sync.
///
/// Reads every page of the connector's customer list and applies it as events.
#[utoipa::path(post, path = "/customers/v2/shops/{shop}/sync", operation_id = "start_customer_sync", summary = "Start a customer sync", tag = "Platform syncs",
    params(("shop" = String, Path, description = "The shop's identifier")),
    security(("api_token" = ["write_customers"]), ("oauth2" = ["write_customers"])),
    responses((status = 202, body = SyncAnswer)))]
pub async fn sync_customers(
    state: web::Data<AppState>,
    request: Authorized<scopes::WriteCustomers>,
) -> Result<HttpResponse, ApiError> {
    trigger(state, request.access.shop, Topic::Customers).await
}

/// Starts an order sync.
///
/// Reads every page of the connector's order list and applies it as events.
#[utoipa::path(post, path = "/orders/v2/shops/{shop}/sync", operation_id = "start_order_sync", summary = "Start an order sync", tag = "Platform syncs",
    params(("shop" = String, Path, description = "The shop's identifier")),
    security(("api_token" = ["write_orders"]), ("oauth2" = ["write_orders"])),
    responses((status = 202, body = SyncAnswer)))]
pub async fn sync_orders(
    state: web::Data<AppState>,
    request: Authorized<scopes::WriteOrders>,
) -> Result<HttpResponse, ApiError> {
    trigger(state, request.access.shop, Topic::Orders).await
}

/// Starts a product sync.
///
/// Reads the connector's categories, then its products, and applies them as events.
#[utoipa::path(post, path = "/products/v2/shops/{shop}/sync", operation_id = "start_product_sync", summary = "Start a product sync", tag = "Platform syncs",
    params(("shop" = String, Path, description = "The shop's identifier")),
    security(("api_token" = ["write_products"]), ("oauth2" = ["write_products"])),
    responses((status = 202, body = SyncAnswer)))]
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
    id: SyncId,
) -> Result<HttpResponse, ApiError> {
    let run = state.read(move |tx| find_run(tx, &shop, topic, id)).await?;
    Ok(HttpResponse::Ok().json(sync_answer(SyncResource::of(&run))))
}

/// `…/sync/{id}`.
#[derive(Deserialize)]
pub struct SyncPath {
    id: SyncId,
}

/// Gets a customer sync.
///
/// How a customer sync is doing.
#[utoipa::path(get, path = "/customers/v2/shops/{shop}/sync/{id}", operation_id = "get_customer_sync", summary = "Get a customer sync", tag = "Platform syncs",
    params(("shop" = String, Path, description = "The shop's identifier"), ("id" = i64, Path, description = "The sync's id")),
    security(("api_token" = ["read_customers"]), ("oauth2" = ["read_customers"])),
    responses((status = 200, body = SyncAnswer)))]
pub async fn customer_sync_status(
    state: web::Data<AppState>,
    request: Authorized<scopes::ReadCustomers>,
    path: TypedPath<SyncPath>,
) -> Result<HttpResponse, ApiError> {
    let id = path.get()?.id;
    sync_status(state, request.access.shop, Topic::Customers, id).await
}

/// Gets an order sync.
///
/// How an order sync is doing.
#[utoipa::path(get, path = "/orders/v2/shops/{shop}/sync/{id}", operation_id = "get_order_sync", summary = "Get an order sync", tag = "Platform syncs",
    params(("shop" = String, Path, description = "The shop's identifier"), ("id" = i64, Path, description = "The sync's id")),
    security(("api_token" = ["read_orders"]), ("oauth2" = ["read_orders"])),
    responses((status = 200, body = SyncAnswer)))]
pub async fn order_sync_status(
    state: web::Data<AppState>,
    request: Authorized<scopes::ReadOrders>,
    path: TypedPath<SyncPath>,
) -> Result<HttpResponse, ApiError> {
    let id = path.get()?.id;
    sync_status(state, request.access.shop, Topic::Orders, id).await
}

/// Gets a product sync.
///
/// How a product sync is doing.
#[utoipa::path(get, path = "/products/v2/shops/{shop}/sync/{id}", operation_id = "get_product_sync", summary = "Get a product sync", tag = "Platform syncs",
    params(("shop" = String, Path, description = "The shop's identifier"), ("id" = i64, Path, description = "The sync's id")),
    security(("api_token" = ["read_products"]), ("oauth2" = ["read_products"])),
    responses((status = 200, body = SyncAnswer)))]
pub async fn product_sync_status(
    state: web::Data<AppState>,
    request: Authorized<scopes::ReadProducts>,
    path: TypedPath<SyncPath>,
) -> Result<HttpResponse, ApiError> {
    let id = path.get()?.id;
    sync_status(state, request.access.shop, Topic::Products, id).await
}

/// The connector event routes' patterns, as `configure` registers them: first of all the app's
/// routes, so a path of one of these shapes is that route's whatever else is registered.
const EVENT_ROUTE_PATTERNS: [&str; 8] = [
    "/customers/v1/shops/{shop}/platforms/custom/webhooks/customers/saved",
    "/customers/v1/shops/{shop}/platforms/custom/webhooks/customers/deleted",
    "/orders/v1/shops/{shop}/platforms/custom/webhooks/orders/saved",
    "/orders/v1/shops/{shop}/platforms/custom/webhooks/orders/deleted",
    "/products/v1/shops/{shop}/platforms/custom/webhooks/products/saved",
    "/products/v1/shops/{shop}/platforms/custom/webhooks/products/deleted",
    "/products/v1/shops/{shop}/platforms/custom/webhooks/categories/saved",
    "/products/v1/shops/{shop}/platforms/custom/webhooks/categories/deleted",
];

/// The pattern of the connector event route `path` is on, told by comparing segments: what
/// actix's `match_pattern` answers for it before routing, without its regex (with the
/// `unicode` feature off, a pike VM run that cost about 5% of an HTTP worker's time per event).
/// None for any other path.
pub fn event_route_pattern(path: &str) -> Option<&'static str> {
    EVENT_ROUTE_PATTERNS
        .iter()
        .copied()
        .find(|pattern| segments_match(pattern, path))
}

/// Whether `path` has `pattern`'s segments, its `{shop}` being any non-empty segment (actix's
/// `[^/]+`).
fn segments_match(pattern: &str, path: &str) -> bool {
    let mut parts = path.split('/');
    pattern.split('/').all(|expected| match parts.next() {
        Some(part) if expected == "{shop}" => !part.is_empty(),
        Some(part) => part == expected,
        None => false,
    }) && parts.next().is_none()
}

#[cfg(test)]
mod tests {
    use actix_web::middleware::{Next, from_fn};
    use actix_web::test as actix_test;
    use actix_web::{App, HttpResponse};

    use super::*;

    fn paths() -> Vec<String> {
        let mut paths = Vec::new();
        for pattern in EVENT_ROUTE_PATTERNS {
            for shop in ["s", "demo-shop", "%2F", "sh%20op", "a.b", "9"] {
                paths.push(pattern.replace("{shop}", shop));
            }
            paths.push(pattern.replace("{shop}", ""));
            paths.push(pattern.replace("{shop}", "a/b"));
            paths.push(format!("{}/", pattern.replace("{shop}", "s")));
            paths.push(format!("/x{}", pattern.replace("{shop}", "s")));
            paths.push(pattern.replace("{shop}", "s").replace("/v1/", "/v2/"));
            paths.push(pattern.replace("{shop}/", "s/extra/"));
        }
        paths.extend(
            [
                "/",
                "",
                "/customers/v2/shops/s/sync",
                "/customers/v1/shops/s",
            ]
            .map(str::to_string),
        );
        paths
    }

    /// Answers, for every request, what actix's `match_pattern` gives before routing.
    async fn pattern_before_routing(
        request: actix_web::dev::ServiceRequest,
        _: Next<actix_web::body::BoxBody>,
    ) -> Result<actix_web::dev::ServiceResponse, actix_web::Error> {
        let pattern = request.match_pattern().unwrap_or_default();
        Ok(request.into_response(HttpResponse::Ok().body(pattern)))
    }

    /// In the whole app's route table, every path gets the pattern actix finds for it, or None
    /// where that is another route's or no route's.
    #[actix_web::test]
    async fn event_route_patterns_are_actix_own_in_the_app() {
        let app = actix_test::init_service(
            App::new()
                .configure(crate::http::routes::configure)
                .wrap(from_fn(pattern_before_routing)),
        )
        .await;
        let mut matched = 0;
        for path in paths() {
            let uri = if path.is_empty() {
                "/".to_string()
            } else {
                path.clone()
            };
            let request = actix_test::TestRequest::post().uri(&uri).to_request();
            let answer = actix_test::call_service(&app, request).await;
            let actix =
                String::from_utf8(actix_test::read_body(answer).await.to_vec()).expect("text");
            match event_route_pattern(&uri) {
                Some(pattern) => {
                    assert_eq!(pattern, actix, "{uri}");
                    matched += 1;
                }
                None => assert!(
                    !EVENT_ROUTE_PATTERNS.contains(&actix.as_str()),
                    "{uri}: actix found {actix}"
                ),
            }
        }
        assert_eq!(matched, EVENT_ROUTE_PATTERNS.len() * 6);
    }

    /// The table lists the event operations of the OpenAPI document.
    #[test]
    fn the_table_is_the_event_routes() {
        use utoipa::OpenApi;
        let document = super::super::Api::openapi();
        let events: Vec<&str> = document
            .paths
            .paths
            .keys()
            .map(String::as_str)
            .filter(|path| path.contains("/platforms/custom/webhooks/"))
            .collect();
        let mut table = EVENT_ROUTE_PATTERNS.to_vec();
        table.sort_unstable();
        let mut events = events;
        events.sort_unstable();
        assert_eq!(table, events);
    }
}
