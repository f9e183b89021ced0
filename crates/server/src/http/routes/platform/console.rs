//! The console's Connector page: the shop's destinations and the events set aside with their
//! error; putting one back into the queue.

use actix_web::{HttpResponse, web};
use askama::Template;
use mercer_domain::platform::console;
use mercer_domain::platform::destinations::{Destination, list_destinations};
use mercer_domain::platform::events::FailedInboundEvent;

use crate::http::console::{
    ActionForm, Chrome, ConfirmPage, ConsoleError, PAGE_SIZE, Staff, form, render, see_other, when,
};
use crate::http::extract::RawBody;
use crate::http::state::{AppState, run_blocking};

#[derive(Template)]
#[template(path = "console/connector.html")]
struct ConnectorPage {
    chrome: Chrome,
    destinations: Vec<Destination>,
    set_aside: Vec<FailedInboundEvent>,
}

impl ConnectorPage {
    fn when(&self, at: &mercer_domain::Timestamp) -> String {
        when(at)
    }
}

/// `GET /console/connector`
pub async fn page(
    state: web::Data<AppState>,
    Staff(staff): Staff,
) -> Result<HttpResponse, ConsoleError> {
    let shop = staff.shop.clone();
    let (destinations, set_aside) = state
        .read(move |tx| {
            Ok((
                list_destinations(tx, &shop)?,
                console::set_aside_events(tx, shop.id, PAGE_SIZE)?,
            ))
        })
        .await?;
    render(&ConnectorPage {
        chrome: Chrome::of(&staff, "connector"),
        destinations,
        set_aside,
    })
}

/// `POST /console/connector/events/{id}/retry`: asks to confirm, then puts the event back into
/// the queue.
pub async fn retry_event(
    state: web::Data<AppState>,
    path: web::Path<i64>,
    Staff(staff): Staff,
    body: RawBody,
) -> Result<HttpResponse, ConsoleError> {
    let fields: ActionForm = form(&staff, body)?;
    let id = path.into_inner();
    if !fields.confirmed() {
        return render(&ConfirmPage {
            chrome: Chrome::of(&staff, "connector"),
            question: &format!("Put event {id} back into the queue, to be applied again?"),
            action: &format!("/console/connector/events/{id}/retry"),
            button: "Retry",
            back: "/console/connector",
        });
    }
    let (store, now) = (state.store.clone(), state.now());
    run_blocking(move || console::retry_event(&store, &staff, id, now)).await?;
    Ok(see_other("/console/connector"))
}
