//! The customer directory's routes.

mod handlers;

use actix_web::web;

use super::resource;

/// This folder's routes in the OpenAPI document (`crate::http::openapi`).
#[derive(utoipa::OpenApi)]
#[openapi(paths(
    handlers::list,
    handlers::get_by_platform_id,
    handlers::get,
    handlers::addresses,
    handlers::address,
    handlers::add_customer_label,
    handlers::delete_customer_label,
))]
pub struct Api;

pub fn configure(config: &mut web::ServiceConfig) {
    config
        .service(
            resource("/customers/v2/shops/{shop}/customers").route(web::get().to(handlers::list)),
        )
        .service(
            resource("/customers/v2/shops/{shop}/customers/pid/{platform_id}")
                .route(web::get().to(handlers::get_by_platform_id)),
        )
        .service(
            resource("/customers/v2/shops/{shop}/customers/{id}")
                .route(web::get().to(handlers::get)),
        )
        .service(
            resource("/customers/v2/shops/{shop}/customers/{id}/addresses")
                .route(web::get().to(handlers::addresses)),
        )
        .service(
            resource("/customers/v2/shops/{shop}/customers/{id}/addresses/{address_id}")
                .route(web::get().to(handlers::address)),
        )
        .service(
            resource("/customers/v2/shops/{shop}/customers/{id}/labels")
                .route(web::post().to(handlers::add_customer_label)),
        )
        .service(
            resource("/customers/v2/shops/{shop}/customers/{id}/labels/{label_id}")
                .route(web::delete().to(handlers::delete_customer_label)),
        );
}
