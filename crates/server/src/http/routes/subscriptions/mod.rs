//! Subscription routes under `/subscriptions/v1/shops/{shop}`
//! (reads `read_subscriptions`, writes `write_subscriptions`): customers and their addresses,
//! subscriptions and their actions, the shop's cancellation reasons and dunning policy, the
//! webhook subscriptions;
//! and the subscription groups
//! (`read_subscription_groups`, `write_subscription_groups`).

mod analytics;
mod console;
mod customers;
mod dunning;
mod groups;
mod imports;
mod operations;
mod settings;
mod webhooks;

use actix_web::web;

use super::resource;

/// This folder's routes in the OpenAPI document (`crate::http::openapi`).
#[derive(utoipa::OpenApi)]
#[openapi(paths(
    customers::list,
    customers::get,
    customers::update,
    customers::list_addresses,
    customers::create_address,
    customers::update_address,
    customers::delete_address,
    customers::subscriptions,
    operations::list,
    operations::create,
    operations::get,
    operations::update,
    operations::cancel,
    operations::reactivate,
    operations::pause,
    operations::resume,
    operations::skip,
    operations::change_quantity,
    operations::change_frequency,
    operations::change_shipping_address,
    operations::change_payment_method,
    imports::import,
    imports::list,
    imports::get,
    imports::export,
    settings::cancellation_reasons_get,
    settings::cancellation_reasons_set,
    dunning::get,
    dunning::set,
    analytics::get,
    groups::list,
    groups::create,
    groups::get,
    groups::update,
    groups::delete,
    webhooks::topics,
    webhooks::create,
    webhooks::list,
    webhooks::get,
    webhooks::update,
    webhooks::delete,
    webhooks::deliveries,
    webhooks::delivery,
    webhooks::resend,
    webhooks::recover,
    webhooks::enable,
))]
pub struct Api;

pub fn configure(config: &mut web::ServiceConfig) {
    config
        .service(
            resource("/subscriptions/v1/shops/{shop}/customers").route(web::get().to(customers::list)),
        )
        .service(
            resource("/subscriptions/v1/shops/{shop}/customers/{customer_id}")
                .route(web::get().to(customers::get))
                .route(web::put().to(customers::update)),
        )
        .service(
            resource("/subscriptions/v1/shops/{shop}/customers/{customer_id}/addresses")
                .route(web::get().to(customers::list_addresses))
                .route(web::post().to(customers::create_address)),
        )
        .service(
            resource("/subscriptions/v1/shops/{shop}/customers/{customer_id}/addresses/{address_id}")
                .route(web::put().to(customers::update_address))
                .route(web::delete().to(customers::delete_address)),
        )
        .service(
            resource("/subscriptions/v1/shops/{shop}/customers/{customer_id}/subscriptions")
                .route(web::get().to(customers::subscriptions)),
        )
        .service(
            resource("/subscriptions/v1/shops/{shop}/subscriptions")
                .route(web::get().to(operations::list))
                .route(web::post().to(operations::create)),
        )
        .service(
            resource("/subscriptions/v1/shops/{shop}/subscriptions/{id}")
                .route(web::get().to(operations::get))
                .route(web::put().to(operations::update)),
        )
        .service(resource("/subscriptions/v1/shops/{shop}/subscriptions/{id}/cancel").route(web::post().to(operations::cancel)))
        .service(
            resource("/subscriptions/v1/shops/{shop}/subscriptions/{id}/reactivate").route(web::post().to(operations::reactivate)),
        )
        .service(resource("/subscriptions/v1/shops/{shop}/subscriptions/{id}/pause").route(web::post().to(operations::pause)))
        .service(resource("/subscriptions/v1/shops/{shop}/subscriptions/{id}/resume").route(web::post().to(operations::resume)))
        .service(resource("/subscriptions/v1/shops/{shop}/subscriptions/{id}/skip").route(web::post().to(operations::skip)))
        .service(
            resource("/subscriptions/v1/shops/{shop}/subscriptions/{id}/line_items/{line_item_id}/quantity")
                .route(web::put().to(operations::change_quantity)),
        )
        .service(
            resource("/subscriptions/v1/shops/{shop}/subscriptions/{id}/frequency")
                .route(web::put().to(operations::change_frequency)),
        )
        .service(
            resource("/subscriptions/v1/shops/{shop}/subscriptions/{id}/shipping_address")
                .route(web::put().to(operations::change_shipping_address)),
        )
        .service(
            resource("/subscriptions/v1/shops/{shop}/subscriptions/{id}/payment_method")
                .route(web::put().to(operations::change_payment_method)),
        )
        .service(
            resource("/subscriptions/v1/shops/{shop}/imports")
                .route(web::post().to(imports::import))
                .route(web::get().to(imports::list)),
        )
        .service(resource("/subscriptions/v1/shops/{shop}/imports/{import_id}").route(web::get().to(imports::get)))
        .service(
            resource("/subscriptions/v1/shops/{shop}/exports/subscriptions").route(web::get().to(imports::export)),
        )
        .service(
            resource("/subscriptions/v1/shops/{shop}/settings/cancellation_reasons")
                .route(web::get().to(settings::cancellation_reasons_get))
                .route(web::put().to(settings::cancellation_reasons_set)),
        )
        .service(resource("/subscriptions/v1/shops/{shop}/analytics").route(web::get().to(analytics::get)))
        .service(
            resource("/subscriptions/v1/shops/{shop}/settings/dunning")
                .route(web::get().to(dunning::get))
                .route(web::put().to(dunning::set)),
        )
        .service(
            resource("/subscriptions/v1/shops/{shop}/subscription_groups")
                .route(web::get().to(groups::list))
                .route(web::post().to(groups::create)),
        )
        .service(
            resource("/subscriptions/v1/shops/{shop}/subscription_groups/{id}")
                .route(web::get().to(groups::get))
                .route(web::put().to(groups::update))
                .route(web::patch().to(groups::update))
                .route(web::delete().to(groups::delete)),
        )
        .service(resource("/subscriptions/v1/shops/{shop}/webhooks/topics").route(web::get().to(webhooks::topics)))
        .service(
            resource("/subscriptions/v1/shops/{shop}/webhooks/subscriptions")
                .route(web::post().to(webhooks::create))
                .route(web::get().to(webhooks::list)),
        )
        .service(
            resource("/subscriptions/v1/shops/{shop}/webhooks/subscriptions/{id}")
                .route(web::get().to(webhooks::get))
                .route(web::patch().to(webhooks::update))
                .route(web::delete().to(webhooks::delete)),
        )
        .service(
            resource("/subscriptions/v1/shops/{shop}/webhooks/subscriptions/{id}/deliveries")
                .route(web::get().to(webhooks::deliveries)),
        )
        .service(
            resource(
                "/subscriptions/v1/shops/{shop}/webhooks/subscriptions/{id}/deliveries/{message_id}",
            )
            .route(web::get().to(webhooks::delivery)),
        )
        .service(
            resource(
                "/subscriptions/v1/shops/{shop}/webhooks/subscriptions/{id}/deliveries/{message_id}/resend",
            )
            .route(web::post().to(webhooks::resend)),
        )
        .service(
            resource("/subscriptions/v1/shops/{shop}/webhooks/subscriptions/{id}/recover")
                .route(web::post().to(webhooks::recover)),
        )
        .service(
            resource("/subscriptions/v1/shops/{shop}/webhooks/subscriptions/{id}/enable")
                .route(web::post().to(webhooks::enable)),
        )
        // The operator console's pages (HTML, left out of the OpenAPI document).
        .service(resource("/console/subscriptions").route(web::get().to(console::list)))
        .service(
            resource("/console/subscriptions/{id}").route(web::get().to(console::subscription)),
        )
        .service(
            resource("/console/subscriptions/{id}/cancel").route(web::post().to(console::cancel)),
        )
        .service(
            resource("/console/subscriptions/{id}/pause").route(web::post().to(console::pause)),
        )
        .service(
            resource("/console/subscriptions/{id}/resume").route(web::post().to(console::resume)),
        )
        .service(resource("/console/subscriptions/{id}/skip").route(web::post().to(console::skip)))
        .service(resource("/console/customers").route(web::get().to(console::customers)))
        .service(resource("/console/customers/{id}").route(web::get().to(console::customer)))
        .service(resource("/console/orders").route(web::get().to(console::orders)))
        .service(resource("/console/settings").route(web::get().to(console::settings)))
        .service(
            resource("/console/settings/dunning").route(web::post().to(console::save_dunning)),
        )
        .service(
            resource("/console/settings/cancellation-reasons")
                .route(web::post().to(console::save_reasons)),
        );
}
