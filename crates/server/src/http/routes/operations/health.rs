//! Liveness and readiness for load balancers and orchestrators.

use actix_web::{HttpResponse, web};
use serde_json::json;

use crate::http::error::ApiError;
use crate::http::state::AppState;

/// The process is up and answering.
pub async fn healthz() -> HttpResponse {
    HttpResponse::Ok().json(json!({ "status": "ok" }))
}

/// The database answers too; 503 otherwise.
pub async fn readyz(state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    let store = state.store.clone();
    let backend = store.backend().name();
    match web::block(move || store.ping()).await {
        Ok(Ok(())) => {
            Ok(HttpResponse::Ok().json(json!({ "status": "ready", "database": backend })))
        }
        Ok(Err(error)) => {
            log::warn!("readiness check failed: {error}");
            Err(ApiError::unavailable("the database does not answer"))
        }
        Err(_) => Err(ApiError::unavailable("the database check could not run")),
    }
}
