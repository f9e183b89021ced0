//! The console's Overview (the shop's figures of the last hour and day, and its subscription
//! analytics over a period with a chart of each day) and Jobs page (the shop's jobs by state;
//! retrying or cancelling one).

use actix_web::{HttpRequest, HttpResponse, web};
use askama::Template;
use chrono::NaiveDate;
use mercer_domain::DomainError;
use mercer_domain::kernel::activity::{Activity, ActivityFigures};
use mercer_domain::kernel::ids::JobId;
use mercer_domain::kernel::jobs::{Job, JobFilter, JobState};
use mercer_domain::operations::{
    SET_ASIDE_SHOWN, ShopOverview, cancel_shop_job, retry_shop_job, shop_jobs, shop_overview,
};
use mercer_domain::subscriptions::analytics::{AnalyticsQuery, Period};
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
    /// The analytics form's problems (the last 30 days are shown instead).
    problems: Vec<String>,
    /// The shop's time zone, which the period's days are in.
    zone: String,
}

/// The analytics form: both days, or neither for the last 30 days.
#[derive(Deserialize, Default)]
#[serde(default)]
struct PeriodQuery {
    from: String,
    to: String,
}

impl PeriodQuery {
    /// The period asked for (`None`: the default), or the problems of the form as sentences.
    fn period(&self) -> Result<Option<Period>, Vec<String>> {
        if self.from.trim().is_empty() && self.to.trim().is_empty() {
            return Ok(None);
        }
        let asked: AnalyticsQuery = serde_json::from_value(serde_json::json!({
            "from": self.from, "to": self.to,
        }))
        .unwrap_or_default();
        asked.validate().map(Some).map_err(|error| match error {
            DomainError::Invalid(problems) => problems.into_iter().map(|p| p.message).collect(),
            other => vec![other.to_string()],
        })
    }
}

/// Cents as the page writes them: `-1,234.56`.
fn money(cents: i64) -> String {
    let sign = if cents < 0 { "-" } else { "" };
    let cents = cents.unsigned_abs();
    format!("{sign}{}.{:02}", grouped(cents / 100), cents % 100)
}

/// A whole number with thousands separators: `1,234,567`.
fn grouped(number: u64) -> String {
    let digits = number.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, digit) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(digit);
    }
    out
}

fn count(number: i64) -> String {
    let sign = if number < 0 { "-" } else { "" };
    format!("{sign}{}", grouped(number.unsigned_abs()))
}

/// One figure of the analytics list.
struct FigureRow {
    label: &'static str,
    value: String,
}

/// A line chart of one value per day, as SVG markup made from numbers and fixed text only
/// (so nothing in it needs escaping). It scales to its container (a phone's 390 px included)
/// through its `viewBox`; its title and description say what it shows, and the figures are on
/// the page as text too.
fn line_chart(
    id: &str,
    title: &str,
    points: &[(NaiveDate, i64)],
    show: fn(i64) -> String,
) -> String {
    const WIDTH: f64 = 360.0;
    const HEIGHT: f64 = 150.0;
    const LEFT: f64 = 62.0;
    const RIGHT: f64 = 8.0;
    const TOP: f64 = 10.0;
    const BOTTOM: f64 = 26.0;
    let (Some(first), Some(last)) = (points.first(), points.last()) else {
        return String::new();
    };
    let low = points.iter().map(|p| p.1).min().unwrap_or(0);
    let high = points.iter().map(|p| p.1).max().unwrap_or(0);
    let (plot_w, plot_h) = (WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM);
    // Coordinates only: the figures themselves are written from the integers.
    let x = |i: usize| {
        if points.len() < 2 {
            LEFT + plot_w / 2.0
        } else {
            LEFT + plot_w * i as f64 / (points.len() - 1) as f64
        }
    };
    let y = |value: i64| {
        if high == low {
            TOP + plot_h / 2.0
        } else {
            TOP + plot_h * (high - value) as f64 / (high - low) as f64
        }
    };
    let line: Vec<String> = points
        .iter()
        .enumerate()
        .map(|(i, (_, value))| format!("{:.1},{:.1}", x(i), y(*value)))
        .collect();
    let description = format!(
        "{} on {}, {} on {}; lowest {}, highest {}.",
        show(first.1),
        first.0,
        show(last.1),
        last.0,
        show(low),
        show(high)
    );
    let bottom = TOP + plot_h;
    format!(
        concat!(
            "<svg role=\"img\" aria-labelledby=\"{id}-title {id}-desc\" viewBox=\"0 0 {w} {h}\" ",
            "width=\"100%\" preserveAspectRatio=\"xMidYMid meet\" font-size=\"11\" ",
            "font-family=\"system-ui,sans-serif\">",
            "<title id=\"{id}-title\">{title}</title><desc id=\"{id}-desc\">{desc}</desc>",
            "<rect x=\"0\" y=\"0\" width=\"{w}\" height=\"{h}\" fill=\"#fff\"/>",
            "<line x1=\"{left}\" y1=\"{top}\" x2=\"{left}\" y2=\"{bottom}\" stroke=\"#bbb\"/>",
            "<line x1=\"{left}\" y1=\"{bottom}\" x2=\"{right}\" y2=\"{bottom}\" stroke=\"#bbb\"/>",
            "<text x=\"{label_x}\" y=\"{high_y}\" text-anchor=\"end\" fill=\"#555\">{high}</text>",
            "<text x=\"{label_x}\" y=\"{low_y}\" text-anchor=\"end\" fill=\"#555\">{low}</text>",
            "<text x=\"{left}\" y=\"{date_y}\" fill=\"#555\">{first_day}</text>",
            "<text x=\"{right}\" y=\"{date_y}\" text-anchor=\"end\" fill=\"#555\">{last_day}</text>",
            "<polyline points=\"{line}\" fill=\"none\" stroke=\"#2d5bd7\" stroke-width=\"2\" ",
            "stroke-linejoin=\"round\"/>",
            "</svg>"
        ),
        id = id,
        w = WIDTH,
        h = HEIGHT,
        title = title,
        desc = description,
        left = LEFT,
        top = TOP,
        bottom = bottom,
        right = WIDTH - RIGHT,
        label_x = LEFT - 4.0,
        high_y = y(high) + 4.0,
        low_y = y(low) + 4.0,
        high = show(high),
        low = show(low),
        date_y = HEIGHT - 8.0,
        first_day = first.0,
        last_day = last.0,
        line = line.join(" "),
    )
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
    fn period(&self) -> (String, String) {
        let period = self.overview.analytics.period;
        (period.from.to_string(), period.to.to_string())
    }

    fn figures(&self) -> Vec<FigureRow> {
        let a = &self.overview.analytics.analytics;
        let row = |label, value| FigureRow { label, value };
        vec![
            row("Active at the start", count(a.active_start)),
            row("Active at the end", count(a.active_end)),
            row("New", count(a.new)),
            row("Cancelled", count(a.cancelled)),
            row("Paused", count(a.paused)),
            row(
                "Churn rate",
                a.churn_rate.map_or_else(
                    || "none (no subscription active at the start)".into(),
                    |rate| format!("{rate:.4}"),
                ),
            ),
            row("MRR at the start", money(a.mrr_start_cents)),
            row("MRR at the end", money(a.mrr_end_cents)),
            row("Orders placed", count(a.orders_placed)),
            row("Orders failed", count(a.orders_failed)),
            row("Revenue", money(a.revenue_cents)),
        ]
    }

    fn reasons(&self) -> Vec<(String, String)> {
        self.overview
            .analytics
            .analytics
            .cancellation_reasons
            .iter()
            .map(|r| {
                let reason = r.reason.clone().unwrap_or_else(|| "(none given)".into());
                (reason, count(r.count))
            })
            .collect()
    }

    fn active_chart(&self) -> String {
        let days = &self.overview.analytics.days;
        let points: Vec<_> = days.iter().map(|d| (d.day, d.active)).collect();
        line_chart(
            "active-chart",
            "Active subscriptions at the end of each day",
            &points,
            count,
        )
    }

    fn mrr_chart(&self) -> String {
        let days = &self.overview.analytics.days;
        let points: Vec<_> = days.iter().map(|d| (d.day, d.mrr_cents)).collect();
        line_chart("mrr-chart", "MRR at the end of each day", &points, money)
    }

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

/// `GET /console`, `?from=DATE&to=DATE` for the analytics' period (the last 30 days without).
pub async fn page(
    state: web::Data<AppState>,
    request: HttpRequest,
    Staff(staff): Staff,
) -> Result<HttpResponse, ConsoleError> {
    let asked: PeriodQuery = query(&request);
    let (period, problems) = match asked.period() {
        Ok(period) => (period, Vec::new()),
        Err(problems) => (None, problems),
    };
    let (shop, now) = (staff.shop.clone(), state.now());
    let overview = state
        .read(move |tx| shop_overview(tx, &shop, period, now))
        .await?;
    render(&OverviewPage {
        chrome: Chrome::of(&staff, "overview"),
        overview,
        set_aside_shown: SET_ASIDE_SHOWN,
        problems,
        zone: staff.shop.timezone.clone(),
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
