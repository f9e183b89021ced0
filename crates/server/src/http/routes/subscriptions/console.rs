//! The console's Subscriptions page: the due report (what `mercer subscriptions due` prints),
//! and a subscription's status log and order attempts.

use actix_web::{HttpResponse, web};
use askama::Template;
use mercer_domain::kernel::ids::SubscriptionId;
use mercer_domain::subscriptions::console::{SubscriptionHistory, history};
use mercer_domain::subscriptions::scheduler::{DueEntry, due_report};
use serde::Deserialize;

use crate::http::console::{Chrome, ConsoleError, PAGE_SIZE, Staff, render, when};
use crate::http::extract::TypedPath;
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

/// `/console/subscriptions/{id}`. An id that is not a number is the subscription's 404,
/// answered after the session is checked (see `TypedPath`).
#[derive(Deserialize)]
pub struct SubscriptionPath {
    id: SubscriptionId,
}

/// `GET /console/subscriptions/{id}`: a subscription's status log and order attempts, newest
/// first.
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
