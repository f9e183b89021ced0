//! The console's Webhooks page: the shop's endpoints with their health, its messages by topic
//! and status, a message's attempts; resending a message and recovering an endpoint.

use actix_web::{HttpRequest, HttpResponse, web};
use askama::Template;
use mercer_domain::Timestamp;
use mercer_domain::kernel::ids::MessageId;
use mercer_domain::webhooks::MessageStatus;
use mercer_domain::webhooks::console::{
    self, EndpointLine, MessageDetail, MessageFilter, MessageLine,
};
use mercer_domain::webhooks::log::AttemptShown;
use serde::Deserialize;

use crate::http::console::{
    Ask, Chrome, ConsoleError, PAGE_SIZE, Staff, answer, confirm_then, query, render, when,
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
    /// Start at the messages created at or before this time (UTC), as a `datetime-local`
    /// field sends it (`2026-11-26T09:30`) or in RFC 3339.
    until: String,
}

impl ListQuery {
    /// The time `until` names, if it names one.
    fn until(&self) -> Option<Timestamp> {
        let text = self.until.trim();
        match text.len() {
            16 => Timestamp::parse_rfc3339(&format!("{text}:00Z")),
            19 => Timestamp::parse_rfc3339(&format!("{text}Z")),
            _ => Timestamp::parse_rfc3339(text),
        }
    }

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
    /// The time the list was jumped to, as the form's field shows it.
    until: String,
    statuses: Vec<&'static str>,
    lines: Vec<MessageLine>,
    next_page: Option<String>,
}

impl WebhooksPage {
    fn when(&self, at: &mercer_domain::Timestamp) -> String {
        when(at)
    }

    fn answer(&self, attempt: &AttemptShown) -> String {
        answer(attempt)
    }
}

/// The query string of a page of the same list, older than `before`.
fn page_link(topic: &str, status: &str, before: MessageId) -> String {
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
    let (shop_id, filter, before, until) = (
        staff.shop.id,
        list.filter(),
        list.before.map(MessageId),
        list.until(),
    );
    let (endpoints, page) = state
        .read(move |tx| {
            // A time jumps the list there; a page's cursor, once paging, wins.
            let before = match (before, until) {
                (None, Some(at)) => {
                    Some(console::cursor_at(tx, shop_id, at)?.unwrap_or(MessageId(1)))
                }
                _ => before,
            };
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
        until: until.map_or_else(String::new, |at| {
            when(&at).replace(" UTC", "").replace(' ', "T")
        }),
        statuses: STATUSES.iter().map(|s| s.as_str()).collect(),
        lines: page.lines,
    })
}

#[derive(Template)]
#[template(path = "console/message.html")]
struct MessagePage {
    chrome: Chrome,
    detail: MessageDetail,
    /// Days finished messages keep their payload and attempts (`--webhook-retention-days`).
    retention_days: f64,
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
        answer(attempt)
    }

    /// The retention period in days, as given (`30 days`, `0.5 days`).
    fn retention(&self) -> String {
        let days = self.retention_days;
        if (days - 1.0).abs() < f64::EPSILON {
            "1 day".to_string()
        } else {
            format!("{days} days")
        }
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
        retention_days: state.webhook_retention_days,
    })
}

/// `POST /console/webhooks/messages/{message_id}/resend`: asks to confirm, then sends the
/// message again and goes back to it.
pub async fn resend(
    state: web::Data<AppState>,
    request: HttpRequest,
    path: web::Path<String>,
    Staff(staff): Staff,
    body: RawBody,
) -> Result<HttpResponse, ConsoleError> {
    let (message_id, store, now) = (path.into_inner(), state.store.clone(), state.now());
    let ask = Ask {
        nav: "webhooks",
        question: format!("Send message {message_id} again, with the same webhook-id?"),
        button: "Resend",
        back: format!("/console/webhooks/messages/{message_id}"),
    };
    confirm_then(&request, staff, body, ask, move |staff| {
        console::resend(&store, &staff, &message_id, now)
    })
    .await
}

/// `POST /console/webhooks/endpoints/{id}/recover`: asks to confirm, then enables the endpoint
/// again and sends its failed messages again.
pub async fn recover(
    state: web::Data<AppState>,
    request: HttpRequest,
    path: web::Path<String>,
    Staff(staff): Staff,
    body: RawBody,
) -> Result<HttpResponse, ConsoleError> {
    let (public_id, store, now) = (path.into_inner(), state.store.clone(), state.now());
    let ask = Ask {
        nav: "webhooks",
        question: format!(
            "Enable webhook {public_id} again (if Mercer disabled it) and send again the \
             messages that failed since it started failing?"
        ),
        button: "Recover",
        back: "/console/webhooks".to_string(),
    };
    confirm_then(&request, staff, body, ask, move |staff| {
        console::recover(&store, &staff, &public_id, now).map(|_requeued| ())
    })
    .await
}
