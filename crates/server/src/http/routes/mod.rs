//! The route table. Handlers parse, call the domain, render; nothing else.

mod destinations;
mod directory;
mod events;
mod health;
mod metrics;
mod oauth;
mod overrides;
mod settings;
mod shop;
mod webhooks;

use actix_web::{Resource, web};

use super::error::ApiError;

/// A route whose unlisted methods answer 405 in the contract's error body.
fn resource(path: &str) -> Resource {
    web::resource(path).default_service(web::to(|| async {
        Err::<String, _>(ApiError::method_not_allowed())
    }))
}

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
                .route(web::post().to($handler)),
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
        .service(resource("/healthz").route(web::get().to(health::healthz)))
        .service(resource("/readyz").route(web::get().to(health::readyz)))
        .service(resource("/metrics").route(web::get().to(metrics::metrics)))
        .service(
            resource("/accounts/dashboard/authorize")
                .route(web::get().to(oauth::authorize_page))
                .route(web::post().to(oauth::authorize_submit)),
        )
        .service(resource("/auth/oauth2/token").route(web::post().to(oauth::token)))
        .service(
            resource("/checkout/shop/{shop}/overrides")
                .route(web::post().to(overrides::create))
                .route(web::get().to(overrides::list)),
        )
        .service(
            resource("/checkout/shop/{shop}/overrides/{id}")
                .route(web::patch().to(overrides::update))
                .route(web::delete().to(overrides::delete)),
        )
        .service(
            resource("/checkout/shop/{shop}/webhooks/topics")
                .route(web::get().to(webhooks::topics)),
        )
        .service(
            resource("/checkout/shop/{shop}/webhooks")
                .route(web::post().to(webhooks::create))
                .route(web::get().to(webhooks::list)),
        )
        .service(
            resource("/checkout/shop/{shop}/webhooks/{id}")
                .route(web::patch().to(webhooks::update))
                .route(web::delete().to(webhooks::delete)),
        )
        .service(
            resource("/checkout/shop/{shop}/webhooks/{id}/test")
                .route(web::post().to(webhooks::test)),
        )
        .service(
            resource("/checkout/shop/{shop}/webhooks/{id}/deliveries")
                .route(web::get().to(webhooks::deliveries)),
        )
        .service(
            resource("/checkout/shop/{shop}/webhooks/{id}/deliveries/{message_id}")
                .route(web::get().to(webhooks::delivery)),
        )
        .service(
            resource("/checkout/shop/{shop}/webhooks/{id}/deliveries/{message_id}/resend")
                .route(web::post().to(webhooks::resend)),
        )
        .service(
            resource("/checkout/shop/{shop}/webhooks/{id}/recover")
                .route(web::post().to(webhooks::recover)),
        )
        .service(
            resource("/checkout/shop/{shop}/webhooks/{id}/enable")
                .route(web::post().to(webhooks::enable)),
        )
        .service(
            resource("/subscriptions/v1/shops/{shop}/shop")
                .route(web::get().to(shop::get_shop_information)),
        )
        .service(
            resource("/checkout/shop/{shop}/integration/config")
                .route(web::post().to(settings::configure_integration)),
        )
        .service(
            resource("/integrations/v1/shops/{shop}/shared_secret/rotate")
                .route(web::post().to(settings::rotate_connector_secret)),
        )
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
        );
    config
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
            resource("/customers/v2/shops/{shop}/customers").route(web::get().to(directory::list)),
        )
        .service(
            resource("/customers/v2/shops/{shop}/customers/pid/{platform_id}")
                .route(web::get().to(directory::get_by_platform_id)),
        )
        .service(
            resource("/customers/v2/shops/{shop}/customers/{id}")
                .route(web::get().to(directory::get)),
        )
        .service(
            resource("/customers/v2/shops/{shop}/customers/{id}/addresses")
                .route(web::get().to(directory::addresses)),
        )
        .service(
            resource("/customers/v2/shops/{shop}/customers/{id}/addresses/{address_id}")
                .route(web::get().to(directory::address)),
        )
        .service(
            resource("/customers/v2/shops/{shop}/customers/{id}/labels")
                .route(web::post().to(directory::add_customer_label)),
        )
        .service(
            resource("/customers/v2/shops/{shop}/customers/{id}/labels/{label_id}")
                .route(web::delete().to(directory::delete_customer_label)),
        );
}
