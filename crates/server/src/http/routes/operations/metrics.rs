//! `GET /metrics`: Prometheus's text format. Queue depths are read from the database at each
//! scrape; counters and histograms are kept by the code that counts (HTTP middleware, webhook
//! dispatchers, the job runner).

use actix_web::{HttpRequest, HttpResponse, web};
use mercer_domain::DomainError;
use mercer_domain::kernel::jobs::{JobPayload, JobState};
use mercer_domain::operations::queue_figures;
use mercer_domain::platform::outbox::OutboxJob;
use mercer_domain::platform::sync::SyncJob;
use mercer_domain::subscriptions::scheduler::{OrderJob, SchedulerJob};

use crate::http::error::ApiError;
use crate::http::extract::bearer_token;
use crate::http::state::{AppState, run_blocking};

/// Gets metrics.
///
/// The server's metrics, for Prometheus to scrape.
#[utoipa::path(get, path = "/metrics", operation_id = "get_metrics", summary = "Get metrics", tag = "Operations",
    responses((status = 200, description = "The metrics in Prometheus's text format",
        content_type = "text/plain; version=0.0.4", body = String)))]
pub async fn metrics(
    state: web::Data<AppState>,
    request: HttpRequest,
) -> Result<HttpResponse, ApiError> {
    // With `--metrics-token`, only a scraper that presents it reads the figures.
    if let Some(expected) = &state.metrics_token {
        let given = bearer_token(&request);
        if !given.is_some_and(|given| expected.matches(given.expose())) {
            return Err(ApiError::from(DomainError::Unauthenticated));
        }
    }
    let (store, now) = (state.store.clone(), state.now());
    let figures = run_blocking(move || {
        use mercer_domain::ports::Database;
        store.read(|tx| queue_figures(tx, now))
    })
    .await?;
    let jobs = &figures.jobs;
    // Every known kind in every state, so a count that falls to zero reads zero.
    let known = [
        SyncJob::KIND,
        OutboxJob::KIND,
        SchedulerJob::KIND,
        OrderJob::KIND,
    ];
    for kind in known {
        for state in JobState::ALL {
            let count = jobs
                .iter()
                .find(|count| count.kind == kind && count.state == state)
                .map_or(0, |count| count.count);
            metrics::gauge!("mercer_jobs", "kind" => kind, "state" => state.as_str())
                .set(count as f64);
        }
    }
    for count in jobs
        .iter()
        .filter(|count| !known.contains(&count.kind.as_str()))
    {
        metrics::gauge!("mercer_jobs", "kind" => count.kind.clone(), "state" => count.state.as_str())
            .set(count.count as f64);
    }
    metrics::gauge!("mercer_webhook_queue_depth", "state" => "due")
        .set(figures.webhooks_due as f64);
    metrics::gauge!("mercer_webhook_queue_depth", "state" => "delayed")
        .set(figures.webhooks_delayed as f64);
    metrics::gauge!("mercer_webhook_endpoints_disabled").set(figures.disabled_endpoints as f64);
    metrics::gauge!("mercer_inbound_events_pending").set(figures.pending_events as f64);
    metrics::gauge!("mercer_inbound_events_failed").set(figures.failed_events as f64);
    let backlog = &figures.scheduler;
    for (state, count) in [
        ("due", backlog.due),
        ("processing", backlog.processing),
        ("waiting_retry", backlog.waiting_retry),
    ] {
        metrics::gauge!("mercer_subscription_orders_pending", "state" => state).set(count as f64);
    }
    Ok(HttpResponse::Ok()
        .content_type("text/plain; version=0.0.4; charset=utf-8")
        .body(state.metrics.render()))
}
