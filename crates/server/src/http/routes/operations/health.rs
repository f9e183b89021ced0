//! Liveness and readiness for load balancers and orchestrators.

use actix_web::{HttpResponse, web};
use serde::Serialize;
use utoipa::ToSchema;

use crate::http::error::ApiError;
use crate::http::state::{AppState, run_blocking};

/// `{"status": "ok", "version": "0.1.0"}`.
#[derive(Serialize, ToSchema)]
pub struct Liveness {
    #[schema(pattern = "^ok$")]
    status: &'static str,
    /// The version of the running `mercer` binary (what `mercer --version` prints).
    #[schema(example = "0.1.0")]
    version: &'static str,
}

/// `{"status": "ready", "database": "sqlite"}`.
#[derive(Serialize, ToSchema)]
pub struct Readiness {
    #[schema(pattern = "^ready$")]
    status: &'static str,
    /// The database Mercer runs on: `sqlite` or `postgres`.
    database: &'static str,
}

/// Checks liveness.
///
/// The process is up and answering; the answer names the binary's version.
#[utoipa::path(get, path = "/healthz", operation_id = "get_liveness", summary = "Check liveness", tag = "Operations",
    responses((status = 200, body = Liveness)))]
pub async fn healthz() -> HttpResponse {
    HttpResponse::Ok().json(Liveness {
        status: "ok",
        version: env!("CARGO_PKG_VERSION"),
    })
}

/// Checks readiness.
///
/// The process is up and the database answers too; otherwise the service is unavailable.
#[utoipa::path(get, path = "/readyz", operation_id = "get_readiness", summary = "Check readiness", tag = "Operations",
    responses((status = 200, body = Readiness)))]
pub async fn readyz(state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    let store = state.store.clone();
    let backend = store.backend().name();
    // On the blocking pool like every handler's storage work, so its line names the request.
    match run_blocking(move || Ok(store.ping())).await {
        Ok(Ok(())) => Ok(HttpResponse::Ok().json(Readiness {
            status: "ready",
            database: backend,
        })),
        Ok(Err(error)) => {
            log::warn!("readiness check failed: {error}");
            Err(ApiError::unavailable("the database does not answer"))
        }
        Err(_) => Err(ApiError::unavailable("the database check could not run")),
    }
}
