//! The console's Subscriptions page: the due report (what `mercer subscriptions due` prints),
//! and a subscription's status log and order attempts.

use actix_web::{HttpResponse, web};
use askama::Template;
use mercer_domain::subscriptions::console::{SubscriptionHistory, history};
use mercer_domain::subscriptions::scheduler::{DueEntry, due_report};

use crate::http::console::{Chrome, ConsoleError, PAGE_SIZE, Staff, render, when};
use crate::http::state::AppState;

#[derive(Template)]
#[template(path = "console/subscriptions.html")]
struct DuePage {
    chrome: Chrome,
    entries: Vec<DueEntry>,
    at: String,
}

impl DuePage {
    fn when(&self, at: &Option<mercer_domain::Timestamp>) -> String {
        at.as_ref().map_or_else(|| "-".to_string(), when)
    }
}

/// `GET /console/subscriptions`: the subscriptions whose order is due now, being placed, or
/// waiting for a retry, earliest first, with why.
pub async fn due(
    state: web::Data<AppState>,
    Staff(staff): Staff,
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

#[derive(Template)]
#[template(path = "console/subscription.html")]
struct HistoryPage {
    chrome: Chrome,
    history: SubscriptionHistory,
}

impl HistoryPage {
    fn when(&self, at: &mercer_domain::Timestamp) -> String {
        when(at)
    }

    fn next_order(&self) -> String {
        self.history
            .subscription
            .state
            .next_order_datetime
            .as_ref()
            .map_or_else(|| "-".to_string(), when)
    }
}

/// `GET /console/subscriptions/{id}`: a subscription's status log and order attempts, newest
/// first.
pub async fn subscription(
    state: web::Data<AppState>,
    path: web::Path<i64>,
    Staff(staff): Staff,
) -> Result<HttpResponse, ConsoleError> {
    let (shop, id) = (staff.shop.clone(), path.into_inner());
    let history = state
        .read(move |tx| history(tx, &shop, id, PAGE_SIZE))
        .await?;
    render(&HistoryPage {
        chrome: Chrome::of(&staff, "subscriptions"),
        history,
    })
}
