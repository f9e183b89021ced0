//! Operators' routes: liveness, readiness, metrics, and the API's OpenAPI document.

mod console;
mod document;
mod health;
mod metrics;

use actix_web::web;

use super::resource;

/// This folder's routes in the OpenAPI document (`crate::http::openapi`).
#[derive(utoipa::OpenApi)]
#[openapi(paths(
    health::healthz,
    health::readyz,
    metrics::metrics,
    document::openapi_json,
    document::reference_page
))]
pub struct Api;

pub fn configure(config: &mut web::ServiceConfig) {
    config
        .service(resource("/healthz").route(web::get().to(health::healthz)))
        .service(resource("/readyz").route(web::get().to(health::readyz)))
        .service(resource("/metrics").route(web::get().to(metrics::metrics)))
        .service(resource("/openapi.json").route(web::get().to(document::openapi_json)))
        .service(resource("/docs").route(web::get().to(document::reference_page)))
        // The operator console's overview and jobs (HTML, left out of the OpenAPI document).
        .service(resource("/console").route(web::get().to(console::page)))
        .service(resource("/console/jobs").route(web::get().to(console::jobs)))
        .service(resource("/console/jobs/{id}/retry").route(web::post().to(console::retry_job)))
        .service(resource("/console/jobs/{id}/cancel").route(web::post().to(console::cancel_job)));
}
