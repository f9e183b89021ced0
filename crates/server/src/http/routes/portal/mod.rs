//! The subscriber portal (docs/portal.md): server-rendered pages under
//! `/portal/shops/{shop}` where a shop's customer manages their own subscriptions. HTML, not
//! the API's JSON, and left out of the OpenAPI document. The entry checks the customer's
//! platform token as the box builder's customer routes do and opens a session (a cookie for
//! that shop's portal only); every page needs that session, every form its CSRF token.

mod actions;
mod entry;
mod pages;
mod shared;

use actix_web::web;

use super::resource;

pub fn configure(config: &mut web::ServiceConfig) {
    config
        .service(resource("/portal/shops/{shop}/enter").route(web::get().to(entry::enter)))
        .service(resource("/portal/shops/{shop}/sign-out").route(web::post().to(entry::sign_out)))
        .service(resource("/portal/shops/{shop}").route(web::get().to(pages::overview)))
        .service(
            resource("/portal/shops/{shop}/subscriptions/{id}")
                .route(web::get().to(pages::subscription)),
        )
        .service(
            resource("/portal/shops/{shop}/subscriptions/{id}/{action}")
                .route(web::post().to(actions::take)),
        );
}
