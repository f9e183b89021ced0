//! The console's Boxes pages: the shop's boxes, and a box with its sizes, its time slots
//! (delivery windows, selection deadlines, how many selections each holds) and the products
//! they offer.

use actix_web::{HttpRequest, HttpResponse, web};
use askama::Template;
use mercer_domain::Timestamp;
use mercer_domain::box_builder::console::{self, BoxDetail};
use mercer_domain::box_builder::resources::SubscriptionBox;
use mercer_domain::kernel::ids::BoxId;
use serde::Deserialize;

use crate::http::console::{Chrome, ConsoleError, PAGE_SIZE, Staff, query, render, when};
use crate::http::extract::TypedPath;
use crate::http::state::AppState;

#[derive(Deserialize, Default)]
#[serde(default)]
struct PageQuery {
    page: Option<i64>,
}

/// A page number of a query: 1 when absent, bounded.
fn page_of(request: &HttpRequest) -> i64 {
    query::<PageQuery>(request)
        .page
        .unwrap_or(1)
        .clamp(1, i64::from(u16::MAX))
}

#[derive(Template)]
#[template(path = "console/boxes.html")]
struct BoxesPage {
    chrome: Chrome,
    boxes: Vec<SubscriptionBox>,
    next_page: Option<i64>,
}

impl BoxesPage {
    fn when(&self, at: &Timestamp) -> String {
        when(at)
    }
}

/// `GET /console/boxes`: the shop's boxes, by id, 50 a page.
pub async fn boxes(
    state: web::Data<AppState>,
    request: HttpRequest,
    Staff(staff): Staff,
) -> Result<HttpResponse, ConsoleError> {
    let page = page_of(&request);
    let shop = staff.shop.clone();
    let found = state
        .read(move |tx| console::boxes(tx, &shop, page, PAGE_SIZE as i64))
        .await?;
    render(&BoxesPage {
        chrome: Chrome::of(&staff, "boxes"),
        next_page: found.has_more.then_some(page + 1),
        boxes: found.boxes,
    })
}

#[derive(Template)]
#[template(path = "console/box.html")]
struct BoxPage {
    chrome: Chrome,
    detail: BoxDetail,
    next_page: Option<i64>,
}

impl BoxPage {
    fn when(&self, at: &Timestamp) -> String {
        when(at)
    }
}

/// `/console/boxes/{id}`. An id that is not a number is the box's 404, answered after the
/// session is checked (see `TypedPath`).
#[derive(Deserialize)]
pub struct BoxPath {
    id: BoxId,
}

/// `GET /console/boxes/{id}`: a box with its sizes, its time slots by start (50 a page) with
/// their selections, and the products they offer.
pub async fn subscription_box(
    state: web::Data<AppState>,
    request: HttpRequest,
    path: TypedPath<BoxPath>,
    Staff(staff): Staff,
) -> Result<HttpResponse, ConsoleError> {
    let id = path.get()?.id;
    let page = page_of(&request);
    let shop = staff.shop.clone();
    let detail = state
        .read(move |tx| console::box_detail(tx, &shop, id, page, PAGE_SIZE as i64))
        .await?;
    render(&BoxPage {
        chrome: Chrome::of(&staff, "boxes"),
        next_page: detail.more_slots.then_some(page + 1),
        detail,
    })
}
