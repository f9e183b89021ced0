//! What the operator console shows of a shop's webhooks, and the actions it takes on them:
//! every endpoint with its health, the shop's messages by topic and status (newest first, paged
//! by row id), a message with its attempts; resending a message and recovering a disabled
//! endpoint, each written to the audit log in its own transaction.

use crate::kernel::ids::ShopId;
use serde::Serialize;

use super::log::{AttemptShown, MessageShown};
use super::{
    MessageStatus, WebhookDatabase, WebhookEndpoint, WebhookKind, WebhookMessage,
    WebhookRepositories,
};
use crate::access::console::{ConsoleStaff, record_action};
use crate::kernel::error::DomainError;
use crate::kernel::ids::{MessageId, WebhookId};
use crate::kernel::time::Timestamp;

/// Which messages a list shows: all when both are None.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MessageFilter {
    /// Only messages of this topic.
    pub topic: Option<String>,
    /// Only messages in this state.
    pub status: Option<MessageStatus>,
}

/// An endpoint as the console lists it; never its secret.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EndpointLine {
    /// The id clients see.
    pub public_id: String,
    /// `checkout` or `subscription`.
    pub kind: &'static str,
    /// The topic it gets.
    pub topic: String,
    /// Where deliveries go.
    pub callback_url: String,
    /// When it started failing without a success since.
    pub failing_since: Option<Timestamp>,
    /// When Mercer disabled it, and why.
    pub disabled_at: Option<Timestamp>,
    /// Why Mercer disabled it.
    pub disabled_reason: Option<String>,
    /// At most how many deliveries to it start per second; None when unthrottled.
    pub rate_limit_per_s: Option<u32>,
    /// Its backlog: how many of its messages are pending.
    pub pending: i64,
}

impl EndpointLine {
    fn of(endpoint: &WebhookEndpoint, pending: &[(WebhookId, i64)]) -> EndpointLine {
        EndpointLine {
            public_id: endpoint.public_id.clone(),
            kind: match endpoint.kind {
                WebhookKind::Checkout => "checkout",
                WebhookKind::Subscription => "subscription",
            },
            topic: endpoint.topic.clone(),
            callback_url: endpoint.callback_url.clone(),
            failing_since: endpoint.failing_since,
            disabled_at: endpoint.disabled_at,
            disabled_reason: endpoint.disabled_reason.clone(),
            rate_limit_per_s: endpoint.rate_limit_per_s,
            pending: pending
                .iter()
                .find(|(id, _)| *id == endpoint.id)
                .map_or(0, |(_, count)| *count),
        }
    }
}

/// A line of the shop's message list.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MessageLine {
    /// The message.
    pub message: MessageShown,
    /// Its endpoint's callback URL.
    pub callback_url: String,
    /// Its latest attempt; None before the first.
    pub last_attempt: Option<AttemptShown>,
}

/// A page of the shop's messages, and the cursor of the next (older) one.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MessagePage {
    /// The messages, newest first.
    pub lines: Vec<MessageLine>,
    /// Where the next page starts (`before`), when there may be one.
    pub next_before: Option<MessageId>,
}

/// A message with its endpoint, payload and every attempt.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MessageDetail {
    /// The message.
    pub message: MessageShown,
    /// Its endpoint.
    pub endpoint: EndpointLine,
    /// Every attempt, oldest first.
    pub attempts: Vec<AttemptShown>,
    /// The body sent, as stored.
    pub payload: String,
}

/// Every endpoint of the shop, checkout ones first, oldest first within a kind, each with its
/// backlog.
pub fn endpoints(
    tx: &mut dyn WebhookRepositories,
    shop_id: ShopId,
) -> Result<Vec<EndpointLine>, DomainError> {
    let mut endpoints = Vec::new();
    for kind in [WebhookKind::Checkout, WebhookKind::Subscription] {
        endpoints.extend(tx.webhook_endpoints(shop_id, kind)?);
    }
    let ids: Vec<WebhookId> = endpoints.iter().map(|endpoint| endpoint.id).collect();
    let pending = tx.pending_webhook_messages(&ids)?;
    Ok(endpoints
        .iter()
        .map(|endpoint| EndpointLine::of(endpoint, &pending))
        .collect())
}

/// A page of the shop's messages that `filter` keeps, older than the row `before` when given.
pub fn messages(
    tx: &mut dyn WebhookRepositories,
    shop_id: ShopId,
    filter: &MessageFilter,
    before: Option<MessageId>,
    limit: usize,
) -> Result<MessagePage, DomainError> {
    let messages = tx.webhook_messages_of_shop(shop_id, filter, before, limit)?;
    let lines = lines_of(tx, &messages)?;
    let next_before = (messages.len() == limit)
        .then(|| messages.last().map(|m| m.id))
        .flatten();
    Ok(MessagePage { lines, next_before })
}

/// The list lines of `messages`: each with its endpoint's URL and its last attempt, read in
/// two queries.
pub fn lines_of(
    tx: &mut dyn WebhookRepositories,
    messages: &[WebhookMessage],
) -> Result<Vec<MessageLine>, DomainError> {
    let endpoint_ids: Vec<WebhookId> = messages.iter().map(|m| m.endpoint_id).collect();
    let endpoints = tx.webhook_endpoints_by_ids(&endpoint_ids)?;
    let rows: Vec<MessageId> = messages.iter().map(|m| m.id).collect();
    let last_attempts = tx.last_webhook_attempts(&rows)?;
    let lines = messages
        .iter()
        .map(|message| MessageLine {
            message: MessageShown::of(message),
            callback_url: endpoints
                .iter()
                .find(|(endpoint, _)| endpoint.id == message.endpoint_id)
                .map(|(endpoint, _)| endpoint.callback_url.clone())
                .unwrap_or_default(),
            last_attempt: last_attempts
                .iter()
                .find(|attempt| attempt.message_row == message.id)
                .map(AttemptShown::of),
        })
        .collect();
    Ok(lines)
}

/// The cursor (`before`) of the list that starts at the shop's newest message created at or
/// before `at`: ids grow with time, so the list goes back from there. None when no message
/// is that old (the list is then empty).
pub fn cursor_at(
    tx: &mut dyn WebhookRepositories,
    shop_id: ShopId,
    at: Timestamp,
) -> Result<Option<MessageId>, DomainError> {
    Ok(tx
        .webhook_message_row_at(shop_id, at)?
        .map(|row| MessageId(row.0.saturating_add(1))))
}

/// The shop's message with this `webhook-id`, or 404 (another shop's too).
pub fn message(
    tx: &mut dyn WebhookRepositories,
    shop_id: ShopId,
    message_id: &str,
) -> Result<MessageDetail, DomainError> {
    let message = tx
        .webhook_message(message_id)?
        .filter(|message| message.shop_id == shop_id)
        .ok_or_else(|| DomainError::not_found("message"))?;
    let endpoint = tx
        .webhook_endpoints_by_ids(&[message.endpoint_id])?
        .into_iter()
        .next()
        .map(|(endpoint, _)| endpoint)
        .ok_or_else(|| DomainError::not_found("webhook"))?;
    let attempts = tx.webhook_attempts(message.id)?;
    let pending = tx.pending_webhook_messages(&[endpoint.id])?;
    Ok(MessageDetail {
        message: MessageShown::of(&message),
        endpoint: EndpointLine::of(&endpoint, &pending),
        attempts: attempts.iter().map(AttemptShown::of).collect(),
        payload: message.payload.clone(),
    })
}

/// Sends the shop's message again, with the same `webhook-id` (as Resend Delivery does), and
/// records who did it.
pub fn resend(
    db: &impl WebhookDatabase,
    staff: &ConsoleStaff,
    message_id: &str,
    now: Timestamp,
) -> Result<(), DomainError> {
    db.write_tx(|tx| {
        let detail = message(tx, staff.shop.id, message_id)?;
        let endpoint = tx
            .webhook_endpoint(staff.shop.id, &detail.endpoint.public_id)?
            .ok_or_else(|| DomainError::not_found("webhook"))?;
        super::log::resend(tx, &endpoint, message_id, now)?;
        record_action(tx, staff, "webhook_message.resend", message_id, now)
    })
}

/// Recovers an endpoint: enables it again if Mercer disabled it, and sends again the messages
/// that failed since it started failing (an hour before, for those caught just then); how many.
pub fn recover(
    db: &impl WebhookDatabase,
    staff: &ConsoleStaff,
    public_id: &str,
    now: Timestamp,
) -> Result<u64, DomainError> {
    db.write_tx(|tx| {
        let endpoint = tx
            .webhook_endpoint(staff.shop.id, public_id)?
            .ok_or_else(|| DomainError::not_found("webhook"))?;
        let since = endpoint
            .failing_since
            .or(endpoint.disabled_at)
            .unwrap_or(now)
            .plus_seconds(-60 * 60);
        if !endpoint.is_active() {
            tx.enable_webhook_endpoint(endpoint.id, now)?;
        }
        let sent_again = tx.requeue_failed_webhook_messages(endpoint.id, since, now)?;
        record_action(tx, staff, "webhook_endpoint.recover", public_id, now)?;
        Ok(sent_again)
    })
}
