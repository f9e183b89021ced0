//! Access routes: OAuth sign-in and token exchange, shared secrets, the shop's information.

mod console;
mod oauth;
mod secrets;
mod shop;

use actix_web::web;

use super::resource;

/// This folder's routes in the OpenAPI document (`crate::http::openapi`).
#[derive(utoipa::OpenApi)]
#[openapi(paths(
    oauth::authorize_page,
    oauth::authorize_submit,
    oauth::token,
    shop::get_shop_information,
    secrets::configure_integration,
    secrets::rotate_connector_secret,
))]
pub struct Api;

pub fn configure(config: &mut web::ServiceConfig) {
    config
        .service(
            resource("/accounts/dashboard/authorize")
                .route(web::get().to(oauth::authorize_page))
                .route(web::post().to(oauth::authorize_submit)),
        )
        .service(resource("/auth/oauth2/token").route(web::post().to(oauth::token)))
        .service(
            resource("/subscriptions/v1/shops/{shop}/shop")
                .route(web::get().to(shop::get_shop_information)),
        )
        .service(
            resource("/checkout/shop/{shop}/integration/config")
                .route(web::post().to(secrets::configure_integration)),
        )
        .service(
            resource("/integrations/v1/shops/{shop}/shared_secret/rotate")
                .route(web::post().to(secrets::rotate_connector_secret)),
        )
        // The operator console's pages (HTML, left out of the OpenAPI document).
        .service(
            resource("/console/sign-in")
                .route(web::get().to(console::sign_in_form))
                .route(web::post().to(console::sign_in)),
        )
        .service(resource("/console/sign-out").route(web::post().to(console::sign_out)))
        .service(resource("/console/audit").route(web::get().to(console::audit)))
        .service(
            resource("/console/secrets/{kind}/rotate")
                .route(web::post().to(console::rotate_secret)),
        );
}
