//! The console's Checkouts page: the shop's headless checkouts by status, and a checkout with
//! the webhooks it fired.

use actix_web::{HttpRequest, HttpResponse, web};
use askama::Template;
use mercer_domain::checkout::console::{self, CheckoutDetail, CheckoutLine};
use mercer_domain::checkout::repository::CheckoutStatus;
use mercer_domain::kernel::ids::CheckoutOrderId;
use mercer_domain::webhooks::console::MessageLine;
use mercer_domain::webhooks::log::AttemptShown;
use serde::Deserialize;

use crate::http::console::{Chrome, ConsoleError, PAGE_SIZE, Staff, answer, query, render, when};
use crate::http::state::AppState;

#[derive(Deserialize, Default)]
#[serde(default)]
struct ListQuery {
    status: String,
    before: Option<i64>,
}

#[derive(Template)]
#[template(path = "console/checkouts.html")]
struct CheckoutsPage {
    chrome: Chrome,
    checkouts: Vec<CheckoutLine>,
    status: String,
    statuses: Vec<&'static str>,
    next_page: Option<String>,
}

impl CheckoutsPage {
    fn when(&self, at: &mercer_domain::Timestamp) -> String {
        when(at)
    }
}

/// `GET /console/checkouts`: the shop's checkouts, newest first, by status.
pub async fn page(
    state: web::Data<AppState>,
    request: HttpRequest,
    Staff(staff): Staff,
) -> Result<HttpResponse, ConsoleError> {
    let list: ListQuery = query(&request);
    let wanted = CheckoutStatus::parse(list.status.trim());
    let (shop_id, before) = (staff.shop.id, list.before.map(CheckoutOrderId));
    let checkouts = state
        .read(move |tx| console::checkouts(tx, shop_id, wanted, before, PAGE_SIZE))
        .await?;
    let status = wanted.map_or("", CheckoutStatus::as_str);
    let next_page = (checkouts.len() == PAGE_SIZE)
        .then(|| checkouts.last().map(|line| line.id))
        .flatten()
        .map(|before| {
            serde_urlencoded::to_string([("status", status), ("before", &before.to_string())])
                .unwrap_or_default()
        });
    render(&CheckoutsPage {
        chrome: Chrome::of(&staff, "checkouts"),
        checkouts,
        status: status.to_string(),
        statuses: CheckoutStatus::ALL.iter().map(|s| s.as_str()).collect(),
        next_page,
    })
}

#[derive(Template)]
#[template(path = "console/checkout.html")]
struct CheckoutPage {
    chrome: Chrome,
    detail: CheckoutDetail,
    /// The webhooks it fired (the shared message table reads `lines`).
    lines: Vec<MessageLine>,
}

impl CheckoutPage {
    fn when(&self, at: &mercer_domain::Timestamp) -> String {
        when(at)
    }

    fn answer(&self, attempt: &AttemptShown) -> String {
        answer(attempt)
    }
}

/// `GET /console/checkouts/{public_order_id}`: a checkout and the webhooks it fired.
pub async fn checkout(
    state: web::Data<AppState>,
    path: web::Path<String>,
    Staff(staff): Staff,
) -> Result<HttpResponse, ConsoleError> {
    let (shop_id, public_order_id) = (staff.shop.id, path.into_inner());
    let mut detail = state
        .read(move |tx| console::checkout(tx, shop_id, &public_order_id))
        .await?;
    let lines = std::mem::take(&mut detail.messages);
    render(&CheckoutPage {
        chrome: Chrome::of(&staff, "checkouts"),
        detail,
        lines,
    })
}
