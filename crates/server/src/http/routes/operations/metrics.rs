//! `GET /metrics`: Prometheus's text format. Queue depths are read from the database at each
//! scrape; counters and histograms are kept by the code that counts (HTTP middleware, webhook
//! dispatchers).

use actix_web::{HttpResponse, web};

use crate::http::error::ApiError;
use crate::http::state::{AppState, run_blocking};

pub async fn metrics(state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    let (store, now) = (state.store.clone(), state.now());
    let ((due, delayed), disabled, pending_events, failed_events) = run_blocking(move || {
        use mercer_domain::ports::Database;
        store.read(|tx| {
            Ok((
                tx.webhook_queue_depth(now)?,
                tx.count_disabled_webhook_endpoints()?,
                tx.count_pending_inbound_events()?,
                tx.count_failed_inbound_events()?,
            ))
        })
    })
    .await?;
    metrics::gauge!("mercer_webhook_queue_depth", "state" => "due").set(due as f64);
    metrics::gauge!("mercer_webhook_queue_depth", "state" => "delayed").set(delayed as f64);
    metrics::gauge!("mercer_webhook_endpoints_disabled").set(disabled as f64);
    metrics::gauge!("mercer_inbound_events_pending").set(pending_events as f64);
    metrics::gauge!("mercer_inbound_events_failed").set(failed_events as f64);
    Ok(HttpResponse::Ok()
        .content_type("text/plain; version=0.0.4; charset=utf-8")
        .body(state.metrics.render()))
}
