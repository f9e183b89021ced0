//! The headless checkout's routes (docs/checkout.md): Init Order and the shop's
//! checkout settings (API token), and the storefront the vendor's frontend library drives under
//! `/checkout/storefront/{shop}/{public_order_id}` (bearer JWT of that one order). Paths are
//! written out whole: tests/e2e/route_scopes.rs reads them here.

mod console;
mod handlers;
mod storefront;

use actix_web::middleware::from_fn;
use actix_web::web;

use super::{resource, storefront_resource};

/// This folder's routes in the OpenAPI document (`crate::http::openapi`).
#[derive(utoipa::OpenApi)]
#[openapi(paths(
    handlers::init,
    handlers::settings,
    handlers::update_settings,
    handlers::test_webhook,
    handlers::topics,
    storefront::add_guest_customer,
    storefront::update_customer,
    storefront::delete_customer,
    storefront::validate_email,
    storefront::set_shipping_address,
    storefront::update_shipping_address,
    storefront::delete_shipping_address,
    storefront::set_billing_address,
    storefront::update_billing_address,
    storefront::delete_billing_address,
    storefront::validate_address,
    storefront::shipping_lines,
    storefront::select_shipping_line,
    storefront::set_taxes,
    storefront::add_discount,
    storefront::delete_discount,
    storefront::validate_discount,
    storefront::payments,
    storefront::add_payment,
    storefront::update_payment,
    storefront::delete_payment,
    storefront::delete_gift_card_payment,
    storefront::add_line_item,
    storefront::update_line_item,
    storefront::delete_line_item,
    storefront::check_inventory,
    storefront::patch_meta_data,
    storefront::refresh,
    storefront::process_order,
    storefront::log
))]
pub struct Api;

/// The checkout topics, each with its payload's schema. Registered before the checkout webhook
/// routes (`routes/webhooks`), whose `/checkout/shop/{shop}/webhooks/{id}` would otherwise take
/// this path and answer 405 to its GET.
pub fn configure_topics(config: &mut web::ServiceConfig) {
    config.service(
        resource("/checkout/shop/{shop}/webhooks/topics").route(web::get().to(handlers::topics)),
    );
}

pub fn configure(config: &mut web::ServiceConfig) {
    config
        .service(
            resource("/checkout/orders/{shop}/init")
                .route(web::post().to(handlers::init))
                // Checkouts begin here: the shop's storefront budget counts them too.
                .wrap(from_fn(crate::http::budgets::storefront)),
        )
        .service(
            resource("/checkout/shop/{shop}/settings")
                .route(web::get().to(handlers::settings))
                .route(web::patch().to(handlers::update_settings)),
        )
        .service(
            resource("/checkout/shop/{shop}/webhooks/{id}/test")
                .route(web::post().to(handlers::test_webhook)),
        )
        .service(
            storefront_resource("/checkout/storefront/{shop}/{public_order_id}/customer/guest")
                .route(web::post().to(storefront::add_guest_customer)),
        )
        .service(
            storefront_resource("/checkout/storefront/{shop}/{public_order_id}/customer")
                .route(web::put().to(storefront::update_customer))
                .route(web::delete().to(storefront::delete_customer)),
        )
        .service(
            storefront_resource(
                "/checkout/storefront/{shop}/{public_order_id}/validate_email_address",
            )
            .route(web::get().to(storefront::validate_email)),
        )
        .service(
            storefront_resource("/checkout/storefront/{shop}/{public_order_id}/addresses/shipping")
                .route(web::post().to(storefront::set_shipping_address))
                .route(web::put().to(storefront::update_shipping_address))
                .route(web::delete().to(storefront::delete_shipping_address)),
        )
        .service(
            storefront_resource("/checkout/storefront/{shop}/{public_order_id}/addresses/billing")
                .route(web::post().to(storefront::set_billing_address))
                .route(web::put().to(storefront::update_billing_address))
                .route(web::delete().to(storefront::delete_billing_address)),
        )
        .service(
            storefront_resource("/checkout/storefront/{shop}/{public_order_id}/validate_address")
                .route(web::get().to(storefront::validate_address)),
        )
        .service(
            storefront_resource("/checkout/storefront/{shop}/{public_order_id}/shipping_lines")
                .route(web::get().to(storefront::shipping_lines))
                .route(web::post().to(storefront::select_shipping_line)),
        )
        .service(
            storefront_resource("/checkout/storefront/{shop}/{public_order_id}/taxes")
                .route(web::post().to(storefront::set_taxes)),
        )
        .service(
            storefront_resource("/checkout/storefront/{shop}/{public_order_id}/discounts")
                .route(web::post().to(storefront::add_discount))
                .route(web::delete().to(storefront::delete_discount)),
        )
        .service(
            storefront_resource(
                "/checkout/storefront/{shop}/{public_order_id}/validate_discount_code",
            )
            .route(web::get().to(storefront::validate_discount)),
        )
        .service(
            storefront_resource("/checkout/storefront/{shop}/{public_order_id}/payments")
                .route(web::get().to(storefront::payments))
                .route(web::post().to(storefront::add_payment))
                .route(web::put().to(storefront::update_payment))
                .route(web::delete().to(storefront::delete_payment)),
        )
        .service(
            storefront_resource("/checkout/storefront/{shop}/{public_order_id}/payments/gift_card")
                .route(web::delete().to(storefront::delete_gift_card_payment)),
        )
        .service(
            storefront_resource("/checkout/storefront/{shop}/{public_order_id}/items")
                .route(web::post().to(storefront::add_line_item))
                .route(web::put().to(storefront::update_line_item))
                .route(web::delete().to(storefront::delete_line_item)),
        )
        .service(
            storefront_resource("/checkout/storefront/{shop}/{public_order_id}/check_inventory")
                .route(web::get().to(storefront::check_inventory)),
        )
        .service(
            storefront_resource("/checkout/storefront/{shop}/{public_order_id}/meta_data")
                .route(web::patch().to(storefront::patch_meta_data)),
        )
        .service(
            storefront_resource("/checkout/storefront/{shop}/{public_order_id}/refresh")
                .route(web::get().to(storefront::refresh)),
        )
        .service(
            storefront_resource("/checkout/storefront/{shop}/{public_order_id}/process_order")
                .route(web::post().to(storefront::process_order)),
        )
        .service(
            storefront_resource("/checkout/storefront/{shop}/{public_order_id}/log")
                .route(web::post().to(storefront::log)),
        )
        // The operator console's pages (HTML, left out of the OpenAPI document).
        .service(resource("/console/checkouts").route(web::get().to(console::page)))
        .service(
            resource("/console/checkouts/{public_order_id}")
                .route(web::get().to(console::checkout)),
        );
}
