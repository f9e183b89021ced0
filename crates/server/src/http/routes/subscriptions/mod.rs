//! Subscription routes (seed 002 §4.1–4.3, contract §5) under `/subscriptions/v1/shops/{shop}`:
//! so far the webhook subscriptions (reads `read_subscriptions`, writes `write_subscriptions`).

mod webhooks;

use actix_web::web;

use super::resource;

pub fn configure(config: &mut web::ServiceConfig) {
    config
        .service(
            resource("/subscriptions/v1/shops/{shop}/webhooks/topics")
                .route(web::get().to(webhooks::topics)),
        )
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
        );
}
