//! Privacy requests under `/subscriptions/v1/shops/{shop}/customers/{customer_id}`: erase a
//! customer's personal data (`write_subscriptions`) and export everything held about them
//! (`read_subscriptions`). `mercer shop redact` erases a whole shop's customers.

mod handlers;

use actix_web::web;

use super::resource;

/// This folder's routes in the OpenAPI document (`crate::http::openapi`).
#[derive(utoipa::OpenApi)]
#[openapi(paths(handlers::redact, handlers::export))]
pub struct Api;

pub fn configure(config: &mut web::ServiceConfig) {
    config
        .service(
            resource("/subscriptions/v1/shops/{shop}/customers/{customer_id}/redact")
                .route(web::post().to(handlers::redact)),
        )
        .service(
            resource("/subscriptions/v1/shops/{shop}/customers/{customer_id}/export")
                .route(web::get().to(handlers::export)),
        );
}
