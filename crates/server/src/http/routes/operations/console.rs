//! The console's Overview: the shop's figures of the last hour and day.

use actix_web::{HttpResponse, web};
use askama::Template;
use mercer_domain::operations::{DeliveryFigures, SET_ASIDE_SHOWN, ShopOverview, shop_overview};

use crate::http::console::{Chrome, ConsoleError, Staff, render};
use crate::http::state::AppState;

#[derive(Template)]
#[template(path = "console/overview.html")]
struct OverviewPage {
    chrome: Chrome,
    overview: ShopOverview,
    set_aside_shown: usize,
}

impl OverviewPage {
    fn periods(&self) -> [(&'static str, &DeliveryFigures); 2] {
        [
            ("last hour", &self.overview.last_hour),
            ("last day", &self.overview.last_day),
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
