//! Checkout webhook routes: endpoints, deliveries, resend, recover, enable (the test send is
//! the checkout's: its sample is a checkout order).

mod console;
pub(super) mod handlers;

use actix_web::web;

use super::resource;

/// This folder's routes in the OpenAPI document (`crate::http::openapi`).
#[derive(utoipa::OpenApi)]
#[openapi(paths(
    handlers::create,
    handlers::list,
    handlers::update,
    handlers::delete,
    handlers::deliveries,
    handlers::delivery,
    handlers::resend,
    handlers::recover,
    handlers::enable
))]
pub struct Api;

pub fn configure(config: &mut web::ServiceConfig) {
    config
        .service(
            resource("/checkout/shop/{shop}/webhooks")
                .route(web::post().to(handlers::create))
                .route(web::get().to(handlers::list)),
        )
        .service(
            resource("/checkout/shop/{shop}/webhooks/{id}")
                .route(web::patch().to(handlers::update))
                .route(web::delete().to(handlers::delete)),
        )
        .service(
            resource("/checkout/shop/{shop}/webhooks/{id}/deliveries")
                .route(web::get().to(handlers::deliveries)),
        )
        .service(
            resource("/checkout/shop/{shop}/webhooks/{id}/deliveries/{message_id}")
                .route(web::get().to(handlers::delivery)),
        )
        .service(
            resource("/checkout/shop/{shop}/webhooks/{id}/deliveries/{message_id}/resend")
                .route(web::post().to(handlers::resend)),
        )
        .service(
            resource("/checkout/shop/{shop}/webhooks/{id}/recover")
                .route(web::post().to(handlers::recover)),
        )
        .service(
            resource("/checkout/shop/{shop}/webhooks/{id}/enable")
                .route(web::post().to(handlers::enable)),
        )
        // The operator console's pages (HTML, left out of the OpenAPI document).
        .service(resource("/console/webhooks").route(web::get().to(console::page)))
        .service(
            resource("/console/webhooks/messages/{message_id}")
                .route(web::get().to(console::message)),
        )
        .service(
            resource("/console/webhooks/messages/{message_id}/resend")
                .route(web::post().to(console::resend)),
        )
        .service(
            resource("/console/webhooks/endpoints/{id}/recover")
                .route(web::post().to(console::recover)),
        );
}
