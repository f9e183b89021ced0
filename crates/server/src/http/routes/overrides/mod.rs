//! API override routes.

mod handlers;

use actix_web::web;

use super::resource;

/// This folder's routes in the OpenAPI document (`crate::http::openapi`).
#[derive(utoipa::OpenApi)]
#[openapi(paths(handlers::create, handlers::list, handlers::update, handlers::delete))]
pub struct Api;

pub fn configure(config: &mut web::ServiceConfig) {
    config
        .service(
            resource("/checkout/shop/{shop}/overrides")
                .route(web::post().to(handlers::create))
                .route(web::get().to(handlers::list)),
        )
        .service(
            resource("/checkout/shop/{shop}/overrides/{id}")
                .route(web::patch().to(handlers::update))
                .route(web::delete().to(handlers::delete)),
        );
}
