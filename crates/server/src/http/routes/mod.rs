//! The route table. Handlers parse, call the domain, render; nothing else.

mod health;
mod settings;
mod shop;

use actix_web::{Resource, web};

use super::error::ApiError;

/// A route whose unlisted methods answer 405 in the contract's error body.
fn resource(path: &str) -> Resource {
    web::resource(path).default_service(web::to(|| async {
        Err::<String, _>(ApiError::method_not_allowed())
    }))
}

pub fn configure(config: &mut web::ServiceConfig) {
    config
        .service(resource("/healthz").route(web::get().to(health::healthz)))
        .service(resource("/readyz").route(web::get().to(health::readyz)))
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
        );
}
