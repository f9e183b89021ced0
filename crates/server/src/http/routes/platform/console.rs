//! The console's Connector page: the shop's destinations, syncs, outbox calls, events pending
//! and set aside, and its secrets (never their values); starting a sync and putting an event
//! back into the queue.

use actix_web::{HttpRequest, HttpResponse, web};
use askama::Template;
use mercer_domain::DomainError;
use mercer_domain::access::console::{SecretLine, secret_lines};
use mercer_domain::kernel::ids::EventId;
use mercer_domain::platform::console::{self, ConnectorView};
use mercer_domain::platform::destinations::Topic;
use mercer_domain::platform::outbox::{OutboxEntry, OutboxStatus};
use serde::Deserialize;

use crate::http::console::{
    Ask, Chrome, ConsoleError, PAGE_SIZE, Staff, confirm_then, render, when,
};
use crate::http::error::ApiError;
use crate::http::extract::{RawBody, TypedPath};
use crate::http::state::AppState;

#[derive(Template)]
#[template(path = "console/connector.html")]
struct ConnectorPage {
    chrome: Chrome,
    view: ConnectorView,
    secrets: Vec<SecretLine>,
}

impl ConnectorPage {
    fn when(&self, at: &mercer_domain::Timestamp) -> String {
        when(at)
    }

    fn operation(&self, entry: &OutboxEntry) -> &'static str {
        entry.call.operation()
    }

    /// Whether the call waits for an attempt (its next attempt is worth showing).
    fn waiting(&self, entry: &OutboxEntry) -> bool {
        entry.status == OutboxStatus::Pending
    }
}

/// `GET /console/connector`
pub async fn page(
    state: web::Data<AppState>,
    Staff(staff): Staff,
) -> Result<HttpResponse, ConsoleError> {
    let (seen, now) = (staff.clone(), state.now());
    let (view, secrets) = state
        .read(move |tx| {
            Ok((
                console::connector_view(tx, &seen, PAGE_SIZE)?,
                secret_lines(tx, seen.shop.id, now)?,
            ))
        })
        .await?;
    render(&ConnectorPage {
        chrome: Chrome::of(&staff, "connector"),
        view,
        secrets,
    })
}

/// `POST /console/connector/syncs/{topic}`: asks to confirm, then starts a sync of the topic
/// (as the API's Start Sync does).
pub async fn start_sync(
    state: web::Data<AppState>,
    request: HttpRequest,
    path: web::Path<String>,
    Staff(staff): Staff,
    body: RawBody,
) -> Result<HttpResponse, ConsoleError> {
    let topic = Topic::parse(&path.into_inner()).ok_or_else(|| {
        ConsoleError::Api(ApiError::from(DomainError::not_found("destination topic")))
    })?;
    let (store, now, jobs) = (state.store.clone(), state.now(), state.jobs.clone());
    let ask = Ask {
        nav: "connector",
        question: format!(
            "Pull every {} page from the connector and apply it? Entities change only where \
             the connector's copy is newer.",
            topic.as_str()
        ),
        button: "Start the sync",
        back: "/console/connector".to_string(),
    };
    let answer = confirm_then(&request, staff, body, ask, move |staff| {
        console::start_shop_sync(&store, &staff, topic, now).map(|_run| ())
    })
    .await?;
    jobs.notify();
    Ok(answer)
}

/// `…/events/{id}/retry`. An id that is not a number is the event's 404, answered after the
/// session is checked (see `TypedPath`).
#[derive(Deserialize)]
pub struct EventPath {
    id: EventId,
}

/// `POST /console/connector/events/{id}/retry`: asks to confirm, then puts the event back into
/// the queue.
pub async fn retry_event(
    state: web::Data<AppState>,
    request: HttpRequest,
    path: TypedPath<EventPath>,
    Staff(staff): Staff,
    body: RawBody,
) -> Result<HttpResponse, ConsoleError> {
    let id = path.get()?.id;
    let (store, now) = (state.store.clone(), state.now());
    let ask = Ask {
        nav: "connector",
        question: format!("Put event {id} back into the queue, to be applied again?"),
        button: "Retry",
        back: "/console/connector".to_string(),
    };
    confirm_then(&request, staff, body, ask, move |staff| {
        console::retry_event(&store, &staff, id, now)
    })
    .await
}
