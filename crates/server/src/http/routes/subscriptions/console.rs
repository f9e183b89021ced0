//! The console's subscription pages: the subscriptions found by status, customer, email and
//! next order date (and the due report, what `mercer subscriptions due` prints); a
//! subscription's status log and order attempts with its actions; the subscription customers;
//! the order attempts the scheduler made; and the shop's dunning policy and cancellation
//! reasons, shown and changed through forms.

use actix_web::{HttpRequest, HttpResponse, web};
use askama::Template;
use chrono::NaiveDate;
use mercer_domain::DomainError;
use mercer_domain::Timestamp;
use mercer_domain::kernel::ids::{CustomerId, SubscriptionId, SubscriptionOrderId};
use mercer_domain::subscriptions::cancellation::CancellationReason;
use mercer_domain::subscriptions::console::{
    self, ConsoleAction, CustomerDetail, SubscriptionBrowse, SubscriptionHistory,
    SubscriptionSearch, history,
};
use mercer_domain::subscriptions::dunning::{AtMaxRetries, ShopDunning};
use mercer_domain::subscriptions::repository::{
    OrderAttemptStatus, OrderFilter, SubscriptionOrder,
};
use mercer_domain::subscriptions::resources::{
    Subscription, SubscriptionAddress, SubscriptionCustomer, SubscriptionStatus,
};
use mercer_domain::subscriptions::scheduler::{DueEntry, due_report};
use serde::Deserialize;

use crate::http::console::{
    Ask, Chrome, ConsoleError, CsrfForm, Notice, PAGE_SIZE, Staff, confirm_then, form, query,
    render, render_with, see_other, when,
};
use crate::http::extract::{RawBody, TypedPath};
use crate::http::state::{AppState, run_blocking};

/// A time as pages show it, or `-`.
fn maybe_when(at: &Option<Timestamp>) -> String {
    at.as_ref().map_or_else(|| "-".to_string(), when)
}

/// The start of a `YYYY-MM-DD` day (UTC), and of the day after: a form's date, read leniently
/// (anything else is no date).
fn day(text: &str) -> Option<(Timestamp, Timestamp)> {
    let date = NaiveDate::parse_from_str(text.trim(), "%Y-%m-%d").ok()?;
    let start = date.and_hms_opt(0, 0, 0)?.and_utc();
    let next = date.succ_opt()?.and_hms_opt(0, 0, 0)?.and_utc();
    Some((Timestamp::from(start), Timestamp::from(next)))
}

/// A text field of a query: trimmed, None when blank.
fn given(text: &str) -> Option<String> {
    let text = text.trim();
    (!text.is_empty()).then(|| text.to_string())
}

/// A query's query string of `pairs`, for the next page's link.
fn query_string(pairs: &[(&str, &str)]) -> String {
    serde_urlencoded::to_string(
        pairs
            .iter()
            .filter(|(_, value)| !value.is_empty())
            .collect::<Vec<_>>(),
    )
    .unwrap_or_default()
}

// ---------------------------------------------------------------------------------------
// The list and the due report

#[derive(Deserialize, Default)]
#[serde(default)]
struct ListQuery {
    view: String,
    status: String,
    customer: String,
    email: String,
    from: String,
    until: String,
    after: Option<i64>,
}

#[derive(Template)]
#[template(path = "console/subscriptions.html")]
struct ListPage {
    chrome: Chrome,
    browse: SubscriptionBrowse,
    status: String,
    statuses: Vec<&'static str>,
    customer: String,
    email: String,
    from: String,
    until: String,
    next_page: Option<String>,
}

impl ListPage {
    fn when(&self, at: &Option<Timestamp>) -> String {
        maybe_when(at)
    }
}

#[derive(Template)]
#[template(path = "console/subscriptions_due.html")]
struct DuePage {
    chrome: Chrome,
    entries: Vec<DueEntry>,
    at: String,
}

impl DuePage {
    fn when(&self, at: &Option<Timestamp>) -> String {
        maybe_when(at)
    }
}

/// `GET /console/subscriptions`: the shop's subscriptions by id, found by status, customer
/// (name, email or phone), exact email and next order date, 50 a page; with `view=due`, the
/// due report: the subscriptions whose order is due now, being placed, or waiting for a retry,
/// earliest first, with why.
pub async fn list(
    state: web::Data<AppState>,
    request: HttpRequest,
    Staff(staff): Staff,
) -> Result<HttpResponse, ConsoleError> {
    let list: ListQuery = query(&request);
    if list.view == "due" {
        return due(state, staff).await;
    }
    let status = SubscriptionStatus::parse(list.status.trim());
    let (from, until) = (day(&list.from), day(&list.until));
    let search = SubscriptionSearch {
        status,
        customer: given(&list.customer),
        email: given(&list.email),
        from: from.map(|(start, _)| start),
        until: until.map(|(_, next)| next),
        after: list.after.map(SubscriptionId),
    };
    let shop = staff.shop.clone();
    let browse = state
        .read(move |tx| console::browse(tx, &shop, &search, PAGE_SIZE))
        .await?;
    let shown_status = status.map_or("", SubscriptionStatus::as_str);
    let (from, until) = (
        if from.is_some() { list.from.trim() } else { "" },
        if until.is_some() {
            list.until.trim()
        } else {
            ""
        },
    );
    let next_page = browse
        .has_more
        .then(|| browse.lines.last())
        .flatten()
        .map(|last| {
            query_string(&[
                ("status", shown_status),
                ("customer", list.customer.trim()),
                ("email", list.email.trim()),
                ("from", from),
                ("until", until),
                ("after", &last.id.to_string()),
            ])
        });
    render(&ListPage {
        chrome: Chrome::of(&staff, "subscriptions"),
        browse,
        status: shown_status.to_string(),
        statuses: SubscriptionStatus::ALL.iter().map(|s| s.as_str()).collect(),
        customer: list.customer.trim().to_string(),
        email: list.email.trim().to_string(),
        from: from.to_string(),
        until: until.to_string(),
        next_page,
    })
}

async fn due(
    state: web::Data<AppState>,
    staff: mercer_domain::access::console::ConsoleStaff,
) -> Result<HttpResponse, ConsoleError> {
    let (shop, now) = (staff.shop.clone(), state.now());
    let entries = state
        .read(move |tx| due_report(tx, &shop, now, PAGE_SIZE))
        .await?;
    render(&DuePage {
        chrome: Chrome::of(&staff, "subscriptions"),
        entries,
        at: when(&now),
    })
}

// ---------------------------------------------------------------------------------------
// A subscription and its actions

#[derive(Template)]
#[template(path = "console/subscription.html")]
struct HistoryPage {
    chrome: Chrome,
    history: SubscriptionHistory,
}

impl HistoryPage {
    fn when(&self, at: &Timestamp) -> String {
        when(at)
    }

    /// Where the current order is in the shop's dunning policy: `retry 1 of 3` once its first
    /// attempt failed (the retry it waits for, or is at), `none (3 allowed)` before, `all 3 used`
    /// when the last failed too.
    fn retries(&self) -> String {
        let failures = self.history.subscription.state.current_retries;
        let allowed = self.history.dunning.policy.max_retries();
        if failures <= 0 {
            format!("none ({allowed} allowed)")
        } else if failures <= allowed {
            format!("retry {failures} of {allowed}")
        } else {
            format!("all {allowed} used")
        }
    }

    /// The shop's dunning policy in words, and where it comes from.
    fn dunning(&self) -> String {
        dunning_words(&self.history.dunning)
    }

    fn next_order(&self) -> String {
        maybe_when(&self.history.subscription.state.next_order_datetime)
    }

    /// The actions the subscription's status allows: (path's last segment, button, whether it
    /// ends the subscription).
    fn actions(&self) -> Vec<(&'static str, &'static str, bool)> {
        let state = &self.history.subscription.state;
        let mut actions = Vec::new();
        match state.subscription_status {
            SubscriptionStatus::Active => {
                actions.push(("pause", "Pause…", false));
                if state.next_order_datetime.is_some() {
                    actions.push(("skip", "Skip the next order…", false));
                }
            }
            SubscriptionStatus::Paused => actions.push(("resume", "Resume…", false)),
            _ => {}
        }
        if state.subscription_status != SubscriptionStatus::Inactive {
            actions.push(("cancel", "Cancel…", true));
        }
        actions
    }
}

fn dunning_words(dunning: &ShopDunning) -> String {
    let source = if dunning.set {
        "the shop's dunning policy"
    } else {
        "the shop's retry settings (no dunning policy set)"
    };
    format!("{} ({source})", dunning.policy.describe())
}

/// `/console/subscriptions/{id}…`. An id that is not a number is the subscription's 404,
/// answered after the session is checked (see `TypedPath`).
#[derive(Deserialize)]
pub struct SubscriptionPath {
    id: SubscriptionId,
}

/// `GET /console/subscriptions/{id}`: a subscription's status log and order attempts, newest
/// first, and the actions its status allows.
pub async fn subscription(
    state: web::Data<AppState>,
    path: TypedPath<SubscriptionPath>,
    Staff(staff): Staff,
) -> Result<HttpResponse, ConsoleError> {
    let id = path.get()?.id;
    let shop = staff.shop.clone();
    let history = state
        .read(move |tx| history(tx, &shop, id, PAGE_SIZE))
        .await?;
    render(&HistoryPage {
        chrome: Chrome::of(&staff, "subscriptions"),
        history,
    })
}

/// An action of the subscription page that asks to confirm, then runs through the API's own
/// use case.
async fn simple_action(
    state: web::Data<AppState>,
    request: HttpRequest,
    path: TypedPath<SubscriptionPath>,
    staff: mercer_domain::access::console::ConsoleStaff,
    body: RawBody,
    action: ConsoleAction,
    (question, button): (&str, &str),
) -> Result<HttpResponse, ConsoleError> {
    let id = path.get()?.id;
    let (store, now) = (state.store.clone(), state.now());
    let ask = Ask {
        nav: "subscriptions",
        question: format!("{question} (subscription {id})"),
        button,
        back: format!("/console/subscriptions/{id}"),
    };
    let answer = confirm_then(&request, staff, body, ask, move |staff| {
        console::act(&store, &staff, id, &action, now)
    })
    .await?;
    state.webhooks.notify();
    state.jobs.notify();
    Ok(answer)
}

/// `POST /console/subscriptions/{id}/pause`: asks to confirm, then pauses the subscription.
pub async fn pause(
    state: web::Data<AppState>,
    request: HttpRequest,
    path: TypedPath<SubscriptionPath>,
    Staff(staff): Staff,
    body: RawBody,
) -> Result<HttpResponse, ConsoleError> {
    let words = (
        "Pause this subscription? No order is placed until it is resumed.",
        "Pause",
    );
    simple_action(
        state,
        request,
        path,
        staff,
        body,
        ConsoleAction::Pause,
        words,
    )
    .await
}

/// `POST /console/subscriptions/{id}/resume`: asks to confirm, then resumes the subscription.
pub async fn resume(
    state: web::Data<AppState>,
    request: HttpRequest,
    path: TypedPath<SubscriptionPath>,
    Staff(staff): Staff,
    body: RawBody,
) -> Result<HttpResponse, ConsoleError> {
    let words = ("Make this subscription active again?", "Resume");
    simple_action(
        state,
        request,
        path,
        staff,
        body,
        ConsoleAction::Resume,
        words,
    )
    .await
}

/// `POST /console/subscriptions/{id}/skip`: asks to confirm, then skips the next order.
pub async fn skip(
    state: web::Data<AppState>,
    request: HttpRequest,
    path: TypedPath<SubscriptionPath>,
    Staff(staff): Staff,
    body: RawBody,
) -> Result<HttpResponse, ConsoleError> {
    let words = (
        "Skip this subscription's next order? The order after it becomes the next.",
        "Skip the order",
    );
    simple_action(
        state,
        request,
        path,
        staff,
        body,
        ConsoleAction::SkipNext,
        words,
    )
    .await
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct CancelForm {
    csrf: String,
    confirm: String,
    reason: String,
    comment: String,
}

impl CsrfForm for CancelForm {
    fn csrf(&self) -> &str {
        &self.csrf
    }
}

#[derive(Template)]
#[template(path = "console/cancel.html")]
struct CancelPage {
    chrome: Chrome,
    id: SubscriptionId,
    reasons: Vec<CancellationReason>,
    reason: String,
    comment: String,
    problems: Vec<String>,
}

/// `POST /console/subscriptions/{id}/cancel`: first the form that asks to confirm, with the
/// shop's cancellation reasons and a comment; confirmed, cancels the subscription as Cancel
/// Subscription does (the reason must be one of the shop's; the comment at most 1,000
/// characters: otherwise the form again, 422, saying why).
pub async fn cancel(
    state: web::Data<AppState>,
    path: TypedPath<SubscriptionPath>,
    Staff(staff): Staff,
    body: RawBody,
) -> Result<HttpResponse, ConsoleError> {
    let id = path.get()?.id;
    let fields: CancelForm = form(&staff, body)?;
    let shop = staff.shop.clone();
    let reasons = state
        .read(move |tx| console::cancel_form(tx, &shop, id))
        .await?;
    let page = |problems: Vec<String>, fields: &CancelForm| CancelPage {
        chrome: Chrome::of(&staff, "subscriptions"),
        id,
        reasons: reasons.clone(),
        reason: fields.reason.clone(),
        comment: fields.comment.clone(),
        problems,
    };
    if fields.confirm != "yes" {
        return render(&page(Vec::new(), &fields));
    }
    let (store, now, who) = (state.store.clone(), state.now(), staff.clone());
    let action = ConsoleAction::Cancel {
        reason: fields.reason.clone(),
        comment: fields.comment.clone(),
    };
    match attempt(move || console::act(&store, &who, id, &action, now)).await? {
        None => {
            state.webhooks.notify();
            state.jobs.notify();
            Ok(see_other(
                &Notice::SubscriptionCancelled.on(&format!("/console/subscriptions/{id}")),
            ))
        }
        Some(problems) => render_with(
            actix_web::http::StatusCode::UNPROCESSABLE_ENTITY,
            &page(problems, &fields),
        ),
    }
}

/// The problems of an input the API refuses (422: its fields, or what the state does not
/// allow), as sentences for the form; any other failure stays an error.
fn problems_of(error: DomainError) -> Result<Vec<String>, DomainError> {
    match error {
        DomainError::Invalid(fields) => Ok(fields
            .into_iter()
            .map(|problem| {
                if problem.message.contains(&problem.field) {
                    problem.message
                } else {
                    format!("{}: {}", problem.field, problem.message)
                }
            })
            .collect()),
        DomainError::Unprocessable { message, .. } => Ok(vec![message]),
        other => Err(other),
    }
}

/// Runs `work` off the async threads: None when it went through, the problems when the input
/// was refused (see [`problems_of`]).
async fn attempt<F>(work: F) -> Result<Option<Vec<String>>, ConsoleError>
where
    F: FnOnce() -> Result<(), DomainError> + Send + 'static,
{
    Ok(run_blocking(move || match work() {
        Ok(()) => Ok(None),
        Err(error) => problems_of(error).map(Some),
    })
    .await?)
}

// ---------------------------------------------------------------------------------------
// Customers

#[derive(Deserialize, Default)]
#[serde(default)]
struct CustomersQuery {
    search: String,
    page: Option<i64>,
}

#[derive(Template)]
#[template(path = "console/customers.html")]
struct CustomersPage {
    chrome: Chrome,
    customers: Vec<SubscriptionCustomer>,
    search: String,
    next_page: Option<String>,
}

impl CustomersPage {
    fn name(&self, customer: &SubscriptionCustomer) -> String {
        name_of(&customer.first_name, &customer.last_name)
    }

    fn when(&self, at: &Option<Timestamp>) -> String {
        maybe_when(at)
    }
}

fn name_of(first: &Option<String>, last: &Option<String>) -> String {
    [first, last]
        .into_iter()
        .flatten()
        .map(String::as_str)
        .filter(|part| !part.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

/// `GET /console/customers`: the shop's subscription customers, 50 a page; `search` finds
/// them by name, email or phone (a text with `@` is an exact email).
pub async fn customers(
    state: web::Data<AppState>,
    request: HttpRequest,
    Staff(staff): Staff,
) -> Result<HttpResponse, ConsoleError> {
    let list: CustomersQuery = query(&request);
    let search = given(&list.search);
    let page = list.page.unwrap_or(1).clamp(1, i64::from(u16::MAX));
    let shop = staff.shop.clone();
    let wanted = search.clone();
    let found = state
        .read(move |tx| console::customers(tx, &shop, wanted.as_deref(), page, PAGE_SIZE as i64))
        .await?;
    let search = search.unwrap_or_default();
    let next_page = found
        .has_more
        .then(|| query_string(&[("search", &search), ("page", &(page + 1).to_string())]));
    render(&CustomersPage {
        chrome: Chrome::of(&staff, "customers"),
        customers: found.customers,
        search,
        next_page,
    })
}

#[derive(Deserialize)]
pub struct CustomerPath {
    id: CustomerId,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct PageQuery {
    page: Option<i64>,
}

#[derive(Template)]
#[template(path = "console/customer.html")]
struct CustomerPage {
    chrome: Chrome,
    detail: CustomerDetail,
    next_page: Option<i64>,
}

impl CustomerPage {
    fn name(&self) -> String {
        name_of(
            &self.detail.customer.first_name,
            &self.detail.customer.last_name,
        )
    }

    fn when(&self, at: &Option<Timestamp>) -> String {
        maybe_when(at)
    }

    fn address(&self, address: &SubscriptionAddress) -> String {
        [
            name_of(&address.first_name, &address.last_name),
            address.company.clone().unwrap_or_default(),
            address.street1.clone().unwrap_or_default(),
            address.street2.clone().unwrap_or_default(),
            [
                address.zip.clone().unwrap_or_default(),
                address.city.clone().unwrap_or_default(),
            ]
            .join(" ")
            .trim()
            .to_string(),
            address.province.clone().unwrap_or_default(),
            address.country.clone().unwrap_or_default(),
            address.phone.clone().unwrap_or_default(),
        ]
        .into_iter()
        .filter(|part| !part.trim().is_empty())
        .collect::<Vec<_>>()
        .join(", ")
    }

    fn items(&self, subscription: &Subscription) -> String {
        subscription
            .line_items
            .iter()
            .map(|item| {
                format!(
                    "{} × {}",
                    item.quantity,
                    item.title.as_deref().unwrap_or("item")
                )
            })
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// `GET /console/customers/{id}`: a subscription customer with their addresses and their
/// subscriptions (50 a page).
pub async fn customer(
    state: web::Data<AppState>,
    request: HttpRequest,
    path: TypedPath<CustomerPath>,
    Staff(staff): Staff,
) -> Result<HttpResponse, ConsoleError> {
    let id = path.get()?.id;
    let page = query::<PageQuery>(&request)
        .page
        .unwrap_or(1)
        .clamp(1, i64::from(u16::MAX));
    let shop = staff.shop.clone();
    let detail = state
        .read(move |tx| console::customer(tx, &shop, id, page, PAGE_SIZE as i64))
        .await?;
    let shown = page.saturating_mul(PAGE_SIZE as i64);
    let next_page = (shown < detail.total).then_some(page + 1);
    render(&CustomerPage {
        chrome: Chrome::of(&staff, "customers"),
        detail,
        next_page,
    })
}

// ---------------------------------------------------------------------------------------
// Orders the scheduler placed

#[derive(Deserialize, Default)]
#[serde(default)]
struct OrdersQuery {
    status: String,
    from: String,
    until: String,
    /// The cursor: the last order date shown (microseconds) and the last attempt's id.
    before_at: Option<i64>,
    before_id: Option<i64>,
}

#[derive(Template)]
#[template(path = "console/orders.html")]
struct OrdersPage {
    chrome: Chrome,
    orders: Vec<SubscriptionOrder>,
    status: String,
    statuses: Vec<&'static str>,
    from: String,
    until: String,
    next_page: Option<String>,
}

impl OrdersPage {
    fn when(&self, at: &Timestamp) -> String {
        when(at)
    }
}

/// `GET /console/orders`: the order attempts the subscription scheduler made for the shop,
/// newest order date first, by status (placing, placed, failed) and order date, 50 a page.
pub async fn orders(
    state: web::Data<AppState>,
    request: HttpRequest,
    Staff(staff): Staff,
) -> Result<HttpResponse, ConsoleError> {
    let list: OrdersQuery = query(&request);
    let (from, until) = (day(&list.from), day(&list.until));
    let filter = OrderFilter {
        status: OrderAttemptStatus::parse(list.status.trim()),
        from: from.map(|(start, _)| start),
        until: until.map(|(_, next)| next),
        before: list
            .before_at
            .zip(list.before_id)
            .map(|(at, id)| (Timestamp::from_micros(at), SubscriptionOrderId(id))),
    };
    let shown_status = filter.status.map_or("", OrderAttemptStatus::as_str);
    let shop = staff.shop.clone();
    let orders = state
        .read(move |tx| console::orders(tx, &shop, &filter, PAGE_SIZE))
        .await?;
    let (from, until) = (
        if from.is_some() { list.from.trim() } else { "" },
        if until.is_some() {
            list.until.trim()
        } else {
            ""
        },
    );
    let next_page = (orders.len() == PAGE_SIZE)
        .then(|| orders.last())
        .flatten()
        .map(|last| {
            query_string(&[
                ("status", shown_status),
                ("from", from),
                ("until", until),
                ("before_at", &last.scheduled_at.as_micros().to_string()),
                ("before_id", &last.id.to_string()),
            ])
        });
    render(&OrdersPage {
        chrome: Chrome::of(&staff, "orders"),
        orders,
        status: shown_status.to_string(),
        statuses: ["placing", "placed", "failed"].to_vec(),
        from: from.to_string(),
        until: until.to_string(),
        next_page,
    })
}

// ---------------------------------------------------------------------------------------
// Settings: the dunning policy and the cancellation reasons

#[derive(Template)]
#[template(path = "console/settings.html")]
struct SettingsPage {
    chrome: Chrome,
    dunning: ShopDunning,
    /// The retry waits as the form shows them (seconds, comma-separated).
    intervals: String,
    at_max_retries: String,
    outcomes: Vec<(&'static str, &'static str)>,
    dunning_problems: Vec<String>,
    /// The reasons as the form shows them: one `code: label` a line.
    reasons: String,
    reason_problems: Vec<String>,
}

impl SettingsPage {
    fn dunning_words(&self) -> String {
        dunning_words(&self.dunning)
    }
}

/// What the settings page shows, before any form is posted.
async fn settings_page(
    state: &web::Data<AppState>,
    staff: &mercer_domain::access::console::ConsoleStaff,
) -> Result<SettingsPage, ConsoleError> {
    let shop = staff.shop.clone();
    let (dunning, reasons) = state.read(move |tx| console::settings(tx, &shop)).await?;
    let intervals = dunning
        .policy
        .retry_intervals_s
        .iter()
        .map(i64::to_string)
        .collect::<Vec<_>>()
        .join(", ");
    let at_max_retries = dunning.policy.at_max_retries.as_str().to_string();
    Ok(SettingsPage {
        chrome: Chrome::of(staff, "settings"),
        dunning,
        intervals,
        at_max_retries,
        outcomes: AtMaxRetries::ALL
            .iter()
            .map(|outcome| (outcome.as_str(), outcome.describe()))
            .collect(),
        dunning_problems: Vec::new(),
        reasons: reasons
            .iter()
            .map(|reason| format!("{}: {}", reason.code, reason.label))
            .collect::<Vec<_>>()
            .join("\n"),
        reason_problems: Vec::new(),
    })
}

/// `GET /console/settings`: the shop's dunning policy and cancellation reasons, each in a form.
pub async fn settings(
    state: web::Data<AppState>,
    Staff(staff): Staff,
) -> Result<HttpResponse, ConsoleError> {
    render(&settings_page(&state, &staff).await?)
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct DunningForm {
    csrf: String,
    retry_intervals: String,
    at_max_retries: String,
}

impl CsrfForm for DunningForm {
    fn csrf(&self) -> &str {
        &self.csrf
    }
}

/// `POST /console/settings/dunning`: replaces the shop's dunning policy as Set Dunning Policy
/// does: the waits (seconds, separated by commas or spaces) and the outcome after the last
/// retry. A policy the API refuses is the form again, 422, with each problem.
pub async fn save_dunning(
    state: web::Data<AppState>,
    Staff(staff): Staff,
    body: RawBody,
) -> Result<HttpResponse, ConsoleError> {
    let fields: DunningForm = form(&staff, body)?;
    let waits: Vec<serde_json::Value> = fields
        .retry_intervals
        .split(|c: char| c == ',' || c.is_whitespace())
        .filter(|wait| !wait.is_empty())
        .map(|wait| serde_json::Value::String(wait.to_string()))
        .collect();
    let body = serde_json::json!({"dunning": {
        "retry_intervals_s": waits,
        "at_max_retries": fields.at_max_retries.trim(),
    }});
    let (store, now, who) = (state.store.clone(), state.now(), staff.clone());
    match attempt(move || console::save_dunning(&store, &who, &body, now)).await? {
        None => Ok(see_other(&Notice::DunningSaved.on("/console/settings"))),
        Some(problems) => {
            let mut page = settings_page(&state, &staff).await?;
            page.intervals = fields.retry_intervals;
            page.at_max_retries = fields.at_max_retries;
            page.dunning_problems = problems;
            render_with(actix_web::http::StatusCode::UNPROCESSABLE_ENTITY, &page)
        }
    }
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct ReasonsForm {
    csrf: String,
    reasons: String,
}

impl CsrfForm for ReasonsForm {
    fn csrf(&self) -> &str {
        &self.csrf
    }
}

/// `POST /console/settings/cancellation-reasons`: replaces the shop's cancellation reasons as
/// Set Cancellation Reasons does, one `code: label` a line (blank lines skipped). A list the API
/// refuses is the form again, 422, with each problem (`cancellation_reasons[2]` is the third
/// line given).
pub async fn save_reasons(
    state: web::Data<AppState>,
    Staff(staff): Staff,
    body: RawBody,
) -> Result<HttpResponse, ConsoleError> {
    let fields: ReasonsForm = form(&staff, body)?;
    let reasons: Vec<serde_json::Value> = fields
        .reasons
        .lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| {
            let (code, label) = line.split_once(':').unwrap_or((line, ""));
            serde_json::json!({"code": code.trim(), "label": label.trim()})
        })
        .collect();
    let body = serde_json::json!({ "cancellation_reasons": reasons });
    let (store, now, who) = (state.store.clone(), state.now(), staff.clone());
    match attempt(move || console::save_reasons(&store, &who, &body, now)).await? {
        None => Ok(see_other(&Notice::ReasonsSaved.on("/console/settings"))),
        Some(problems) => {
            let mut page = settings_page(&state, &staff).await?;
            page.reasons = fields.reasons;
            page.reason_problems = problems;
            render_with(actix_web::http::StatusCode::UNPROCESSABLE_ENTITY, &page)
        }
    }
}
