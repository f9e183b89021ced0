//! The console's Overview (the shop's figures of the last hour and day) and Jobs page (the
//! shop's jobs by state; retrying or cancelling one).

use actix_web::{HttpRequest, HttpResponse, web};
use askama::Template;
use mercer_domain::kernel::activity::{Activity, ActivityFigures};
use mercer_domain::kernel::ids::JobId;
use mercer_domain::kernel::jobs::{Job, JobFilter, JobState};
use mercer_domain::operations::{
    SET_ASIDE_SHOWN, ShopOverview, cancel_shop_job, retry_shop_job, shop_jobs, shop_overview,
};
use serde::Deserialize;

use crate::http::console::{
    Ask, Chrome, ConsoleError, PAGE_SIZE, Staff, confirm_then, query, render, when,
};
use crate::http::extract::{RawBody, TypedPath};
use crate::http::state::AppState;

#[derive(Template)]
#[template(path = "console/overview.html")]
struct OverviewPage {
    chrome: Chrome,
    overview: ShopOverview,
    set_aside_shown: usize,
}

/// One line of the overview's activity table.
struct ActivityRow {
    /// The activity's stored name, the row's id.
    key: &'static str,
    label: &'static str,
    /// The page that lists it, or empty.
    link: &'static str,
    last_hour: i64,
    last_day: i64,
}

impl OverviewPage {
    fn rows(&self) -> Vec<ActivityRow> {
        let (hour, day) = (&self.overview.last_hour, &self.overview.last_day);
        let row =
            |activity: Activity, label, link, pick: fn(&ActivityFigures) -> i64| ActivityRow {
                key: activity.as_str(),
                label,
                link,
                last_hour: pick(hour),
                last_day: pick(day),
            };
        vec![
            row(Activity::EventsReceived, "connector events in", "", |f| {
                f.events_received
            }),
            row(Activity::EventsApplied, "events applied", "", |f| {
                f.events_applied
            }),
            row(
                Activity::EventsSetAside,
                "events set aside",
                "/console/connector",
                |f| f.events_set_aside,
            ),
            row(Activity::WebhooksSent, "webhook attempts sent", "", |f| {
                f.webhooks_sent
            }),
            row(
                Activity::WebhooksDelivered,
                "webhooks delivered",
                "/console/webhooks?status=delivered",
                |f| f.webhooks_delivered,
            ),
            row(
                Activity::WebhooksFailed,
                "webhooks failed",
                "/console/webhooks?status=failed",
                |f| f.webhooks_failed,
            ),
            row(
                Activity::OrdersPlaced,
                "orders placed by the scheduler",
                "/console/subscriptions",
                |f| f.orders_placed,
            ),
            row(
                Activity::CheckoutsProcessed,
                "checkouts processed",
                "/console/checkouts",
                |f| f.checkouts_processed,
            ),
            row(
                Activity::CheckoutsAbandoned,
                "checkouts abandoned",
                "/console/checkouts",
                |f| f.checkouts_abandoned,
            ),
        ]
    }
}

/// `GET /console`
pub async fn page(
    state: web::Data<AppState>,
    Staff(staff): Staff,
) -> Result<HttpResponse, ConsoleError> {
    let (shop_id, now) = (staff.shop.id, state.now());
    let overview = state
        .read(move |tx| shop_overview(tx, shop_id, now))
        .await?;
    render(&OverviewPage {
        chrome: Chrome::of(&staff, "overview"),
        overview,
        set_aside_shown: SET_ASIDE_SHOWN,
    })
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct JobsQuery {
    state: String,
    kind: String,
    before: Option<i64>,
}

#[derive(Template)]
#[template(path = "console/jobs.html")]
struct JobsPage {
    chrome: Chrome,
    jobs: Vec<Job>,
    state: String,
    states: Vec<&'static str>,
    kind: String,
    /// The kinds of job the shop has, for the filter.
    kinds: Vec<String>,
    next_page: Option<String>,
}

impl JobsPage {
    fn when(&self, at: &mercer_domain::Timestamp) -> String {
        when(at)
    }

    fn retryable(&self, job: &Job) -> bool {
        matches!(job.state, JobState::Failed | JobState::Cancelled)
    }

    fn cancellable(&self, job: &Job) -> bool {
        matches!(
            job.state,
            JobState::Queued | JobState::Running | JobState::Failed
        )
    }
}

/// `GET /console/jobs`: the shop's jobs, newest first, by state and kind.
pub async fn jobs(
    state: web::Data<AppState>,
    request: HttpRequest,
    Staff(staff): Staff,
) -> Result<HttpResponse, ConsoleError> {
    let list: JobsQuery = query(&request);
    let kind = list.kind.trim().to_string();
    let filter = JobFilter {
        state: JobState::parse(list.state.trim()),
        kind: (!kind.is_empty()).then(|| kind.clone()),
    };
    let shown_state = filter.state.map_or("", JobState::as_str);
    let (shop_id, before) = (staff.shop.id, list.before.map(JobId));
    let (jobs, kinds) = state
        .read(move |tx| shop_jobs(tx, shop_id, &filter, before, PAGE_SIZE))
        .await?;
    let next_page = (jobs.len() == PAGE_SIZE)
        .then(|| jobs.last().map(|job| job.id))
        .flatten()
        .map(|before| {
            serde_urlencoded::to_string([
                ("state", shown_state),
                ("kind", &kind),
                ("before", &before.to_string()),
            ])
            .unwrap_or_default()
        });
    render(&JobsPage {
        chrome: Chrome::of(&staff, "jobs"),
        jobs,
        state: shown_state.to_string(),
        states: JobState::ALL.iter().map(|s| s.as_str()).collect(),
        kind,
        kinds,
        next_page,
    })
}

/// `…/jobs/{id}`.
#[derive(Deserialize)]
pub struct JobPath {
    id: JobId,
}

/// `POST /console/jobs/{id}/retry`: asks to confirm, then queues the job again.
pub async fn retry_job(
    state: web::Data<AppState>,
    request: HttpRequest,
    path: TypedPath<JobPath>,
    Staff(staff): Staff,
    body: RawBody,
) -> Result<HttpResponse, ConsoleError> {
    let id = path.get()?.id;
    let (store, now) = (state.store.clone(), state.now());
    let ask = Ask {
        nav: "jobs",
        question: format!("Queue job {id} again, due now, with its attempts from zero?"),
        button: "Retry",
        back: "/console/jobs".to_string(),
    };
    confirm_then(&request, staff, body, ask, move |staff| {
        retry_shop_job(&store, &staff, id, now)
    })
    .await
}

/// `POST /console/jobs/{id}/cancel`: asks to confirm, then cancels the job.
pub async fn cancel_job(
    state: web::Data<AppState>,
    request: HttpRequest,
    path: TypedPath<JobPath>,
    Staff(staff): Staff,
    body: RawBody,
) -> Result<HttpResponse, ConsoleError> {
    let id = path.get()?.id;
    let (store, now) = (state.store.clone(), state.now());
    let ask = Ask {
        nav: "jobs",
        question: format!("Cancel job {id}? A running job stops at its next step."),
        button: "Cancel the job",
        back: "/console/jobs".to_string(),
    };
    confirm_then(&request, staff, body, ask, move |staff| {
        cancel_shop_job(&store, &staff, id, now)
    })
    .await
}
