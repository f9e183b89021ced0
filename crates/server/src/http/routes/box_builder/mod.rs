//! The box builder's routes. The admin routes under
//! `/box_builder/v1/shops/{shop}`: boxes, box products, box sizes, time slots and their
//! options (reads `read_subscription_groups`, writes `write_subscription_groups`), customers'
//! selections and the box line items (reads `read_subscriptions`, writes
//! `write_subscriptions`). Box sizes take the scopes of the other box resources: a token that
//! may only read orders must not change how many products a box holds. The storefront's under
//! `/box_builder/v1/storefront/shops/{shop}`, with no credentials; the customer's own under
//! `/box_builder/v1/customer/shops/{shop}/customers/{platform_customer_id}` with their
//! platform's `token`. Both answer any origin. Success bodies wrap in `data`; lists add
//! `pagination`. The console's Boxes pages are in `console.rs`.

mod answers;
mod console;
mod customer;
mod handlers;
mod storefront;

use actix_web::web;

use super::{resource, storefront_resource};

/// This folder's routes in the OpenAPI document (`crate::http::openapi`).
#[derive(utoipa::OpenApi)]
#[openapi(paths(
    handlers::list_boxes,
    handlers::create_box,
    handlers::get_box,
    handlers::update_box,
    handlers::delete_box,
    handlers::list_box_products,
    handlers::create_box_product,
    handlers::get_box_product,
    handlers::update_box_product,
    handlers::delete_box_product,
    handlers::list_box_sizes,
    handlers::create_box_size,
    handlers::update_box_sizes,
    handlers::get_box_size,
    handlers::update_box_size,
    handlers::list_time_slots,
    handlers::create_time_slot,
    handlers::get_time_slot,
    handlers::update_time_slot,
    handlers::delete_time_slot,
    handlers::list_time_slot_options,
    handlers::create_time_slot_option,
    handlers::delete_time_slot_option,
    handlers::list_selections,
    handlers::create_selection,
    handlers::get_selection,
    handlers::update_selection,
    handlers::delete_selection,
    handlers::list_box_line_items,
    handlers::get_box_line_item,
    storefront::list_boxes,
    storefront::get_box,
    storefront::list_time_slots,
    storefront::list_box_sizes,
    customer::list_selections,
    customer::create_selection,
    customer::get_selection,
    customer::update_selection,
))]
pub struct Api;

pub fn configure(config: &mut web::ServiceConfig) {
    config
        .service(
            resource("/box_builder/v1/shops/{shop}/boxes")
                .route(web::get().to(handlers::list_boxes))
                .route(web::post().to(handlers::create_box)),
        )
        .service(
            resource("/box_builder/v1/shops/{shop}/boxes/{box_id}")
                .route(web::get().to(handlers::get_box))
                .route(web::patch().to(handlers::update_box))
                .route(web::delete().to(handlers::delete_box)),
        )
        .service(
            resource("/box_builder/v1/shops/{shop}/box_products")
                .route(web::get().to(handlers::list_box_products))
                .route(web::post().to(handlers::create_box_product)),
        )
        .service(
            resource("/box_builder/v1/shops/{shop}/box_products/{box_product_id}")
                .route(web::get().to(handlers::get_box_product))
                .route(web::patch().to(handlers::update_box_product))
                .route(web::delete().to(handlers::delete_box_product)),
        )
        .service(
            resource("/box_builder/v1/shops/{shop}/boxes/{box_id}/box_sizes")
                .route(web::get().to(handlers::list_box_sizes))
                .route(web::post().to(handlers::create_box_size))
                .route(web::put().to(handlers::update_box_sizes)),
        )
        .service(
            resource("/box_builder/v1/shops/{shop}/box_sizes/{box_size_id}")
                .route(web::get().to(handlers::get_box_size))
                .route(web::patch().to(handlers::update_box_size)),
        )
        .service(
            resource("/box_builder/v1/shops/{shop}/boxes/{box_id}/time_slots")
                .route(web::get().to(handlers::list_time_slots))
                .route(web::post().to(handlers::create_time_slot)),
        )
        .service(
            resource("/box_builder/v1/shops/{shop}/time_slots/{time_slot_id}")
                .route(web::get().to(handlers::get_time_slot))
                .route(web::patch().to(handlers::update_time_slot))
                .route(web::delete().to(handlers::delete_time_slot)),
        )
        .service(
            resource("/box_builder/v1/shops/{shop}/time_slots/{time_slot_id}/options")
                .route(web::get().to(handlers::list_time_slot_options))
                .route(web::post().to(handlers::create_time_slot_option)),
        )
        .service(
            resource(
                "/box_builder/v1/shops/{shop}/time_slots/{time_slot_id}/options/{box_product_id}",
            )
            .route(web::delete().to(handlers::delete_time_slot_option)),
        )
        .service(
            resource("/box_builder/v1/shops/{shop}/customers/{platform_customer_id}/selections")
                .route(web::get().to(handlers::list_selections))
                .route(web::post().to(handlers::create_selection)),
        )
        .service(
            resource(
                "/box_builder/v1/shops/{shop}/customers/{platform_customer_id}/selections/{selection_id}",
            )
            .route(web::get().to(handlers::get_selection))
            .route(web::patch().to(handlers::update_selection))
            .route(web::delete().to(handlers::delete_selection)),
        )
        .service(
            resource("/box_builder/v1/shops/{shop}/subscription_line_items")
                .route(web::get().to(handlers::list_box_line_items)),
        )
        .service(
            resource("/box_builder/v1/shops/{shop}/subscription_line_items/{line_item_id}")
                .route(web::get().to(handlers::get_box_line_item)),
        );
    configure_storefront(config);
    configure_customer(config);
    // The operator console's pages (HTML, left out of the OpenAPI document).
    config
        .service(resource("/console/boxes").route(web::get().to(console::boxes)))
        .service(resource("/console/boxes/{id}").route(web::get().to(console::subscription_box)));
}

fn configure_storefront(config: &mut web::ServiceConfig) {
    config
        .service(
            storefront_resource("/box_builder/v1/storefront/shops/{shop}/boxes")
                .route(web::get().to(storefront::list_boxes)),
        )
        .service(
            storefront_resource("/box_builder/v1/storefront/shops/{shop}/boxes/{box_id}")
                .route(web::get().to(storefront::get_box)),
        )
        .service(
            storefront_resource(
                "/box_builder/v1/storefront/shops/{shop}/boxes/{box_id}/time_slots",
            )
            .route(web::get().to(storefront::list_time_slots)),
        )
        .service(
            storefront_resource("/box_builder/v1/storefront/shops/{shop}/boxes/{box_id}/box_sizes")
                .route(web::get().to(storefront::list_box_sizes)),
        );
}

fn configure_customer(config: &mut web::ServiceConfig) {
    config
        .service(
            storefront_resource(
                "/box_builder/v1/customer/shops/{shop}/customers/{platform_customer_id}/selections",
            )
            .route(web::get().to(customer::list_selections))
            .route(web::post().to(customer::create_selection)),
        )
        .service(
            storefront_resource(
                "/box_builder/v1/customer/shops/{shop}/customers/{platform_customer_id}/selections/{selection_id}",
            )
            .route(web::get().to(customer::get_selection))
            .route(web::patch().to(customer::update_selection)),
        );
}
