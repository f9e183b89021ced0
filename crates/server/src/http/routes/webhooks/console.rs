//! The console's Webhooks page: the shop's endpoints with their health, its messages by topic
//! and status, a message's attempts; resending a message and recovering an endpoint.

use actix_web::{HttpRequest, HttpResponse, web};
use askama::Template;
use mercer_domain::webhooks::MessageStatus;
use mercer_domain::webhooks::console::{
    self, EndpointLine, MessageDetail, MessageFilter, MessageLine,
};
use mercer_domain::webhooks::log::AttemptShown;
use serde::Deserialize;

use crate::http::console::{
    ActionForm, Chrome, ConfirmPage, ConsoleError, PAGE_SIZE, Staff, form, query, render,
    see_other, when,
};
use crate::http::extract::RawBody;
use crate::http::state::AppState;

/// The statuses a list may be filtered by.
const STATUSES: [MessageStatus; 4] = [
    MessageStatus::Pending,
    MessageStatus::Delivered,
    MessageStatus::Failed,
    MessageStatus::Cancelled,
];

#[derive(Deserialize, Default)]
#[serde(default)]
struct ListQuery {
    topic: String,
    status: String,
    before: Option<i64>,
}

impl ListQuery {
    fn filter(&self) -> MessageFilter {
        let topic = self.topic.trim();
        MessageFilter {
            topic: (!topic.is_empty()).then(|| topic.to_string()),
            status: MessageStatus::parse(self.status.trim()),
        }
    }
}

#[derive(Template)]
#[template(path = "console/webhooks.html")]
struct WebhooksPage {
    chrome: Chrome,
    endpoints: Vec<EndpointLine>,
    topics: Vec<String>,
    topic: String,
    status: String,
    statuses: Vec<&'static str>,
    lines: Vec<MessageLine>,
    next_page: Option<String>,
}

impl WebhooksPage {
    fn when(&self, at: &mercer_domain::Timestamp) -> String {
        when(at)
    }

    fn answer(&self, attempt: &AttemptShown) -> String {
        answer_of(attempt)
    }
}

/// An attempt's outcome in a few words: its status, or why there was none.
fn answer_of(attempt: &AttemptShown) -> String {
    match (attempt.status, &attempt.error) {
        (Some(status), _) => status.to_string(),
        (None, Some(error)) => error.clone(),
        (None, None) => "no answer".to_string(),
    }
}

/// The query string of a page of the same list, older than `before`.
fn page_link(topic: &str, status: &str, before: i64) -> String {
    serde_urlencoded::to_string([
        ("topic", topic),
        ("status", status),
        ("before", &before.to_string()),
    ])
    .unwrap_or_default()
}

/// `GET /console/webhooks`: endpoints, then messages (newest first, filtered, paged).
pub async fn page(
    state: web::Data<AppState>,
    request: HttpRequest,
    Staff(staff): Staff,
) -> Result<HttpResponse, ConsoleError> {
    let list: ListQuery = query(&request);
    let (shop_id, filter, before) = (staff.shop.id, list.filter(), list.before);
    let (endpoints, page) = state
        .read(move |tx| {
            Ok((
                console::endpoints(tx, shop_id)?,
                console::messages(tx, shop_id, &filter, before, PAGE_SIZE)?,
            ))
        })
        .await?;
    let mut topics: Vec<String> = endpoints.iter().map(|e| e.topic.clone()).collect();
    topics.sort();
    topics.dedup();
    let status = list.filter().status.map_or("", MessageStatus::as_str);
    render(&WebhooksPage {
        chrome: Chrome::of(&staff, "webhooks"),
        next_page: page
            .next_before
            .map(|before| page_link(list.topic.trim(), status, before)),
        endpoints,
        topics,
        topic: list.topic.trim().to_string(),
        status: status.to_string(),
        statuses: STATUSES.iter().map(|s| s.as_str()).collect(),
        lines: page.lines,
    })
}

#[derive(Template)]
#[template(path = "console/message.html")]
struct MessagePage {
    chrome: Chrome,
    detail: MessageDetail,
}

impl MessagePage {
    fn when(&self, at: &mercer_domain::Timestamp) -> String {
        when(at)
    }

    /// The payload indented, to read; as stored if it is not JSON.
    fn payload(&self) -> String {
        serde_json::from_str::<serde_json::Value>(&self.detail.payload)
            .and_then(|value| serde_json::to_string_pretty(&value))
            .unwrap_or_else(|_| self.detail.payload.clone())
    }

    fn answer(&self, attempt: &AttemptShown) -> String {
        answer_of(attempt)
    }
}

/// `GET /console/webhooks/messages/{message_id}`: a message, its attempts and its payload.
pub async fn message(
    state: web::Data<AppState>,
    path: web::Path<String>,
    Staff(staff): Staff,
) -> Result<HttpResponse, ConsoleError> {
    let (shop_id, message_id) = (staff.shop.id, path.into_inner());
    let detail = state
        .read(move |tx| console::message(tx, shop_id, &message_id))
        .await?;
    render(&MessagePage {
        chrome: Chrome::of(&staff, "webhooks"),
        detail,
    })
}

/// `POST /console/webhooks/messages/{message_id}/resend`: asks to confirm, then sends the
/// message again and goes back to it.
pub async fn resend(
    state: web::Data<AppState>,
    path: web::Path<String>,
    Staff(staff): Staff,
    body: RawBody,
) -> Result<HttpResponse, ConsoleError> {
    let fields: ActionForm = form(&staff, body)?;
    let message_id = path.into_inner();
    let back = format!("/console/webhooks/messages/{message_id}");
    if !fields.confirmed() {
        return render(&ConfirmPage {
            chrome: Chrome::of(&staff, "webhooks"),
            question: &format!("Send message {message_id} again, with the same webhook-id?"),
            action: &format!("{back}/resend"),
            button: "Resend",
            back: &back,
        });
    }
    let (store, now) = (state.store.clone(), state.now());
    let id = message_id.clone();
    crate::http::state::run_blocking(move || console::resend(&store, &staff, &id, now)).await?;
    Ok(see_other(&back))
}

/// `POST /console/webhooks/endpoints/{id}/recover`: asks to confirm, then enables the endpoint
/// again and sends its failed messages again.
pub async fn recover(
    state: web::Data<AppState>,
    path: web::Path<String>,
    Staff(staff): Staff,
    body: RawBody,
) -> Result<HttpResponse, ConsoleError> {
    let fields: ActionForm = form(&staff, body)?;
    let public_id = path.into_inner();
    if !fields.confirmed() {
        return render(&ConfirmPage {
            chrome: Chrome::of(&staff, "webhooks"),
            question: &format!(
                "Enable webhook {public_id} again (if Mercer disabled it) and send again the \
                 messages that failed since it started failing?"
            ),
            action: &format!("/console/webhooks/endpoints/{public_id}/recover"),
            button: "Recover",
            back: "/console/webhooks",
        });
    }
    let (store, now) = (state.store.clone(), state.now());
    crate::http::state::run_blocking(move || console::recover(&store, &staff, &public_id, now))
        .await?;
    Ok(see_other("/console/webhooks"))
}
