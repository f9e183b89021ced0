//! The platform connector's routes: connector events, syncs, destinations.

mod console;
mod destinations;
mod events;

pub use events::event_route_pattern;

use actix_web::middleware::from_fn;
use actix_web::web;

use super::resource;

/// This folder's routes in the OpenAPI document (`crate::http::openapi`).
#[derive(utoipa::OpenApi)]
#[openapi(paths(
    events::customer_saved,
    events::customer_deleted,
    events::order_saved,
    events::order_deleted,
    events::product_saved,
    events::product_deleted,
    events::category_saved,
    events::category_deleted,
    destinations::create,
    destinations::list,
    destinations::get,
    destinations::update,
    destinations::delete,
    events::sync_customers,
    events::customer_sync_status,
    events::sync_orders,
    events::order_sync_status,
    events::sync_products,
    events::product_sync_status,
))]
pub struct Api;

pub fn configure(config: &mut web::ServiceConfig) {
    // Connector events first: they are the busiest routes, and actix tries routes in order.
    macro_rules! event_route {
        ($service:literal, $collection:literal, $action:literal, $handler:path) => {
            config.service(
                resource(concat!(
                    "/",
                    $service,
                    "/v1/shops/{shop}/platforms/custom/webhooks/",
                    $collection,
                    "/",
                    $action
                ))
                .route(web::post().to($handler))
                // The shop's connector events budget (off unless set).
                .wrap(from_fn(crate::http::budgets::connector_events)),
            );
        };
    }
    event_route!("customers", "customers", "saved", events::customer_saved);
    event_route!(
        "customers",
        "customers",
        "deleted",
        events::customer_deleted
    );
    event_route!("orders", "orders", "saved", events::order_saved);
    event_route!("orders", "orders", "deleted", events::order_deleted);
    event_route!("products", "products", "saved", events::product_saved);
    event_route!("products", "products", "deleted", events::product_deleted);
    event_route!("products", "categories", "saved", events::category_saved);
    event_route!(
        "products",
        "categories",
        "deleted",
        events::category_deleted
    );
    config
        .service(
            resource("/integrations/v1/shops/{shop}/platform_connector_destinations")
                .route(web::post().to(destinations::create))
                .route(web::get().to(destinations::list)),
        )
        .service(
            resource("/integrations/v1/shops/{shop}/platform_connector_destinations/{id}")
                .route(web::get().to(destinations::get))
                .route(web::patch().to(destinations::update))
                .route(web::put().to(destinations::update))
                .route(web::delete().to(destinations::delete)),
        )
        .service(
            resource("/customers/v2/shops/{shop}/sync")
                .route(web::post().to(events::sync_customers)),
        )
        .service(
            resource("/customers/v2/shops/{shop}/sync/{id}")
                .route(web::get().to(events::customer_sync_status)),
        )
        .service(
            resource("/orders/v2/shops/{shop}/sync").route(web::post().to(events::sync_orders)),
        )
        .service(
            resource("/orders/v2/shops/{shop}/sync/{id}")
                .route(web::get().to(events::order_sync_status)),
        )
        .service(
            resource("/products/v2/shops/{shop}/sync").route(web::post().to(events::sync_products)),
        )
        .service(
            resource("/products/v2/shops/{shop}/sync/{id}")
                .route(web::get().to(events::product_sync_status)),
        )
        // The operator console's pages (HTML, left out of the OpenAPI document).
        .service(resource("/console/connector").route(web::get().to(console::page)))
        .service(
            resource("/console/connector/syncs/{topic}").route(web::post().to(console::start_sync)),
        )
        .service(
            resource("/console/connector/events/{id}/retry")
                .route(web::post().to(console::retry_event)),
        );
}
