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
        let dunning = &self.history.dunning;
        let source = if dunning.set {
            "the shop's dunning policy"
        } else {
            "the shop's retry settings (no dunning policy set)"
        };
        format!("{} ({source})", dunning.policy.describe())
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
