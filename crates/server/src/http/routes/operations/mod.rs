//! Operators' routes: liveness, readiness, metrics.

mod health;
mod metrics;

use actix_web::web;

use super::resource;

pub fn configure(config: &mut web::ServiceConfig) {
    config
        .service(resource("/healthz").route(web::get().to(health::healthz)))
        .service(resource("/readyz").route(web::get().to(health::readyz)))
        .service(resource("/metrics").route(web::get().to(metrics::metrics)));
}
