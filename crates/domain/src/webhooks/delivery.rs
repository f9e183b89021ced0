//! Webhooks Mercer sends: endpoints that subscribe to topics, messages
//! enqueued in the same transaction as the change that causes them, and the delivery rules —
//! the retry schedule with jitter and `Retry-After`, disabling on 410 or after days of failure.
//!
//! The sending itself (signing, HTTP, the address guard) is `mercer-webhooks`'s; the rules are
//! here so they are tested without a network.

use crate::kernel::ids::ShopId;
use std::time::Duration;

use serde::Serialize;

use super::WebhookRepositories;
use crate::access::credentials::{Secret, random_hex};
use crate::kernel::error::DomainError;
use crate::kernel::ids::{MessageId, WebhookId};
use crate::kernel::jobs::{current_request_id, current_trace_parent};
use crate::kernel::time::Timestamp;

/// Which family an endpoint belongs to: how its deliveries are signed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, strum::IntoStaticStr, strum::EnumString)]
#[strum(serialize_all = "snake_case")]
pub enum WebhookKind {
    /// Checkout webhooks: draft-cavage `Signature` with the shop's integration secret.
    Checkout,
    /// Subscription webhooks: `x-svc-signature` with the endpoint's own secret.
    Subscription,
}

impl WebhookKind {
    /// The kind as stored: `checkout` or `subscription`.
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    /// The kind stored as `text`; None for an unknown one.
    pub fn parse(text: &str) -> Option<Self> {
        text.parse().ok()
    }
}

/// The checkout topics, by their fixed ids.
pub const CHECKOUT_TOPICS: [(i64, &str); 7] = [
    (1, "order/processed"),
    (2, "order/created"),
    (3, "order/fulfilled"),
    (4, "order/abandoned"),
    (5, "order/failed"),
    (6, "gift_card/created"),
    (7, "webhook/disabled"),
];

pub(crate) fn checkout_topic(id: i64) -> Option<&'static str> {
    CHECKOUT_TOPICS
        .iter()
        .find(|(topic_id, _)| *topic_id == id)
        .map(|(_, name)| *name)
}

pub(crate) fn checkout_topic_id(name: &str) -> Option<i64> {
    CHECKOUT_TOPICS
        .iter()
        .find(|(_, topic)| *topic == name)
        .map(|(id, _)| *id)
}

/// A webhook endpoint: a shop's callback URL subscribed to one topic, with its health.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebhookEndpoint {
    /// The endpoint's row id (the service's integer).
    pub id: WebhookId,
    /// The id clients see: 32 hex characters for checkout webhooks.
    pub public_id: String,
    /// The shop the endpoint belongs to (the service's integer).
    pub shop_id: ShopId,
    /// Which family it belongs to, and so how its deliveries are signed.
    pub kind: WebhookKind,
    /// The topic it subscribes to, by name (`order/created` for a checkout webhook).
    pub topic: String,
    /// The URL deliveries are sent to.
    pub callback_url: String,
    /// The endpoint's own secret (subscription webhooks); checkout webhooks use the shop's
    /// integration secret at the time of sending.
    pub secret: Option<Secret>,
    /// When Mercer disabled the endpoint; None while it is active.
    pub disabled_at: Option<Timestamp>,
    /// Why Mercer disabled it (a 410 answer, days of failures).
    pub disabled_reason: Option<String>,
    /// When the endpoint started failing without a success since.
    pub failing_since: Option<Timestamp>,
    /// When the endpoint was created.
    pub created_at: Timestamp,
    /// When it last changed: an update, a deletion, Mercer disabling it, enabling it again.
    pub updated_at: Timestamp,
    /// At most how many deliveries to it start per second, however many processes deliver
    /// (1..=[`MAX_RATE_LIMIT_PER_S`]); None when unthrottled.
    pub rate_limit_per_s: Option<u32>,
}

impl WebhookEndpoint {
    /// Whether the endpoint gets deliveries: Mercer has not disabled it.
    pub fn is_active(&self) -> bool {
        self.disabled_at.is_none()
    }
}

/// An endpoint to store; the store gives it its ids, and it starts active and healthy.
#[derive(Debug, Clone)]
pub struct NewWebhookEndpoint {
    /// The shop it belongs to (the service's integer).
    pub shop_id: ShopId,
    /// Which family it belongs to.
    pub kind: WebhookKind,
    /// The topic it subscribes to, by name.
    pub topic: String,
    /// The URL deliveries are sent to, already checked.
    pub callback_url: String,
    /// The endpoint's own secret: `Some` for subscription webhooks, `None` for checkout webhooks.
    pub secret: Option<Secret>,
    /// When it is created.
    pub created_at: Timestamp,
}

/// Where a message is in its delivery, as stored and as the delivery log shows it.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Serialize,
    utoipa::ToSchema,
    strum::IntoStaticStr,
    strum::EnumString,
)]
#[strum(serialize_all = "snake_case")]
#[serde(rename_all = "snake_case")]
pub enum MessageStatus {
    /// Waiting for an attempt, its first or the next one.
    Pending,
    /// An attempt got a 2xx answer.
    Delivered,
    /// Given up: the schedule ran out, or the endpoint was disabled.
    Failed,
    /// The endpoint went away before delivery.
    Cancelled,
}

impl MessageStatus {
    /// The status as stored and shown: `pending`, `delivered`, `failed` or `cancelled`.
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    /// The status stored as `text`; None for an unknown one.
    pub fn parse(text: &str) -> Option<Self> {
        text.parse().ok()
    }
}

/// One message to one endpoint; its `message_id` (`webhook-id`) stays the same on every attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebhookMessage {
    /// The message's row id (the service's integer).
    pub id: MessageId,
    /// The `webhook-id`: `msg_` and 32 hex characters, the same on every attempt.
    pub message_id: String,
    /// The shop the message belongs to (the service's integer).
    pub shop_id: ShopId,
    /// The endpoint's row id.
    pub endpoint_id: WebhookId,
    /// The topic, by name, as the endpoint's was when the message was enqueued.
    pub topic: String,
    /// The body to send, as JSON text; empty once purged ([`WebhookMessage::purged_at`]).
    pub payload: String,
    /// Where the message is in its delivery.
    pub status: MessageStatus,
    /// How many attempts have been made so far.
    pub attempts: i64,
    /// When the next attempt is due while pending (a worker's claim moves it to the lease's end).
    pub next_attempt_at: Timestamp,
    /// When the message was enqueued.
    pub created_at: Timestamp,
    /// When an attempt got a 2xx answer.
    pub delivered_at: Option<Timestamp>,
    /// The id of the request whose handling enqueued it, when a request's did, so that its
    /// delivery's log lines can be traced back to that request.
    pub request_id: Option<String>,
    /// The trace context it was enqueued in (a W3C `traceparent` value), which its delivery
    /// attempts continue; None when traces are not exported or outside a traced span.
    pub trace_parent: Option<String>,
    /// When the retention purge emptied its payload (then empty) and deleted its attempts;
    /// None while they are kept.
    pub purged_at: Option<Timestamp>,
}

/// A message to store: it starts pending, due at `created_at`, with no attempts.
#[derive(Debug, Clone)]
pub struct NewWebhookMessage {
    /// The `webhook-id`: `msg_` and 32 hex characters.
    pub message_id: String,
    /// The shop the message belongs to (the service's integer).
    pub shop_id: ShopId,
    /// The endpoint's row id.
    pub endpoint_id: WebhookId,
    /// The topic, by name.
    pub topic: String,
    /// The body to send, as JSON text.
    pub payload: String,
    /// When it is enqueued, and so first due.
    pub created_at: Timestamp,
    /// What it is about, when something lists its messages (`checkout:{public_order_id}`).
    pub subject: Option<String>,
    /// The id of the request whose handling enqueues it, when a request's does.
    pub request_id: Option<String>,
    /// The trace context it is enqueued in ([`current_trace_parent`]).
    pub trace_parent: Option<String>,
    /// Whether its endpoint is throttled (has a `rate_limit_per_s`): its deliveries then wait
    /// for their send times.
    pub throttled: bool,
}

/// What one attempt got back.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AttemptOutcome {
    /// The HTTP status, when there was an answer.
    pub status: Option<u16>,
    /// How long the attempt took, until the answer or the error.
    pub latency: Duration,
    /// The first KiB of the answer's body.
    pub response: Option<String>,
    /// Why there was no usable answer (timeout, refused, blocked address).
    pub error: Option<String>,
    /// The answer's `Retry-After`, when it had one.
    pub retry_after: Option<Duration>,
}

impl AttemptOutcome {
    /// Whether the answer was a 2xx.
    pub fn succeeded(&self) -> bool {
        self.status
            .is_some_and(|status| (200..300).contains(&status))
    }
}

/// A message's state after an attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MessageUpdate {
    /// The message's row id.
    pub id: MessageId,
    /// Its new status.
    pub status: MessageStatus,
    /// How many attempts it has had now.
    pub attempts: i64,
    /// When it is next due (while pending; otherwise the time of the attempt).
    pub next_attempt_at: Timestamp,
    /// When it was delivered, if this attempt delivered it.
    pub delivered_at: Option<Timestamp>,
}

/// One recorded attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeliveryAttempt {
    /// The message's row id (not its `webhook-id`).
    pub message_row: MessageId,
    /// When the attempt was made.
    pub attempted_at: Timestamp,
    /// What it got back.
    pub outcome: AttemptOutcome,
}

/// When to try again after failures, and when to give up on an endpoint.
#[derive(Debug, Clone, PartialEq)]
pub struct RetryPolicy {
    /// The delay before each attempt: the first is the initial one (normally 0).
    pub delays: Vec<Duration>,
    /// How much a delay may vary either way (0.2 = ±20%).
    pub jitter: f64,
    /// The longest a `Retry-After` is honoured.
    pub max_retry_after: Duration,
    /// An endpoint that has only failed for this long is disabled.
    pub disable_after: Duration,
}

const MINUTE: u64 = 60;
const HOUR: u64 = 60 * MINUTE;

impl Default for RetryPolicy {
    /// Immediately, then 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h, each ±20%; `Retry-After` up
    /// to 10 h; endpoints disabled after 5 days of failures only.
    fn default() -> Self {
        RetryPolicy {
            delays: [
                0,
                5,
                5 * MINUTE,
                30 * MINUTE,
                2 * HOUR,
                5 * HOUR,
                10 * HOUR,
                10 * HOUR,
            ]
            .into_iter()
            .map(Duration::from_secs)
            .collect(),
            jitter: 0.2,
            max_retry_after: Duration::from_secs(10 * HOUR),
            disable_after: Duration::from_secs(5 * 24 * HOUR),
        }
    }
}

/// What follows an attempt.
#[derive(Debug, Clone, PartialEq)]
pub enum AfterAttempt {
    /// The answer was a 2xx: the message is delivered.
    Delivered,
    /// Try again at this time.
    Retry(Timestamp),
    /// The schedule ran out: the message failed.
    GiveUp,
    /// The endpoint is disabled (410, or failing too long): this message fails and the
    /// endpoint's other pending messages stop.
    Disable(String),
}

/// An endpoint's health after an attempt: since when it has failed without a success (None
/// after a success), and why it was disabled, if this attempt disabled it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndpointHealth {
    /// Since when the endpoint has failed without a success; None after a success.
    pub failing_since: Option<Timestamp>,
    /// Why this attempt disabled the endpoint, if it did.
    pub disabled: Option<String>,
}

impl AfterAttempt {
    /// What this decision makes of the message (its `attempts`-th attempt, made at `sent_at`)
    /// and of its endpoint, which had been failing since `failing_since`.
    pub fn settle(
        &self,
        message_id: MessageId,
        attempts: i64,
        failing_since: Option<Timestamp>,
        sent_at: Timestamp,
    ) -> (MessageUpdate, EndpointHealth) {
        let still_failing = Some(failing_since.unwrap_or(sent_at));
        let (status, next_attempt_at, delivered_at, health) = match self {
            AfterAttempt::Delivered => (
                MessageStatus::Delivered,
                sent_at,
                Some(sent_at),
                EndpointHealth {
                    failing_since: None,
                    disabled: None,
                },
            ),
            AfterAttempt::Retry(at) => (
                MessageStatus::Pending,
                *at,
                None,
                EndpointHealth {
                    failing_since: still_failing,
                    disabled: None,
                },
            ),
            AfterAttempt::GiveUp => (
                MessageStatus::Failed,
                sent_at,
                None,
                EndpointHealth {
                    failing_since: still_failing,
                    disabled: None,
                },
            ),
            AfterAttempt::Disable(reason) => (
                MessageStatus::Failed,
                sent_at,
                None,
                EndpointHealth {
                    failing_since: still_failing,
                    disabled: Some(reason.clone()),
                },
            ),
        };
        let update = MessageUpdate {
            id: message_id,
            status,
            attempts,
            next_attempt_at,
            delivered_at,
        };
        (update, health)
    }
}

fn micros(duration: Duration) -> i64 {
    i64::try_from(duration.as_micros()).unwrap_or(i64::MAX)
}

impl RetryPolicy {
    /// Parses `0s,5s,5m,30m,2h,5h,10h,10h` (units ms, s, m, h).
    pub fn parse_delays(text: &str) -> Result<Vec<Duration>, String> {
        text.split(',')
            .map(str::trim)
            .filter(|part| !part.is_empty())
            .map(|part| {
                let (number, unit) = part.split_at(
                    part.find(|c: char| !c.is_ascii_digit())
                        .unwrap_or(part.len()),
                );
                let number: u64 = number
                    .parse()
                    .map_err(|_| format!("{part:?} is not a duration such as 5s"))?;
                Ok(match unit {
                    "ms" => Duration::from_millis(number),
                    "s" | "" => Duration::from_secs(number),
                    "m" => Duration::from_secs(number * MINUTE),
                    "h" => Duration::from_secs(number * HOUR),
                    _ => return Err(format!("{part:?}: the unit must be ms, s, m or h")),
                })
            })
            .collect::<Result<Vec<_>, _>>()
            .and_then(|delays| {
                if delays.is_empty() {
                    Err("no delays given".to_string())
                } else {
                    Ok(delays)
                }
            })
    }

    /// The rules after `attempts` attempts of which this one got `outcome`. `failing_since` is
    /// the endpoint's, before this attempt. `spread` is a random number in [-1, 1] that picks
    /// the jitter.
    pub fn after_attempt(
        &self,
        attempts: i64,
        outcome: &AttemptOutcome,
        failing_since: Option<Timestamp>,
        now: Timestamp,
        spread: f64,
    ) -> AfterAttempt {
        if outcome.succeeded() {
            return AfterAttempt::Delivered;
        }
        if outcome.status == Some(410) {
            return AfterAttempt::Disable("the endpoint answered 410 Gone".to_string());
        }
        let failing_since = failing_since.unwrap_or(now);
        if now.as_micros() - failing_since.as_micros() >= micros(self.disable_after) {
            return AfterAttempt::Disable(format!(
                "every delivery failed for {} hours",
                self.disable_after.as_secs() / HOUR
            ));
        }
        let Some(delay) = usize::try_from(attempts)
            .ok()
            .and_then(|n| self.delays.get(n))
        else {
            return AfterAttempt::GiveUp;
        };
        let factor = 1.0 + self.jitter * spread.clamp(-1.0, 1.0);
        let jittered = Duration::from_secs_f64(delay.as_secs_f64() * factor);
        // A receiver's own Retry-After wins over the schedule, within bounds.
        let wait = match outcome.retry_after {
            Some(asked) => asked.min(self.max_retry_after),
            None => jittered,
        };
        AfterAttempt::Retry(Timestamp::from_micros(
            now.as_micros().saturating_add(micros(wait)),
        ))
    }
}

/// A new `webhook-id`: `msg_` and 32 hex characters.
pub(crate) fn new_message_id() -> String {
    format!("msg_{}", random_hex(16))
}

/// Enqueues `payload` for every active endpoint of the shop on `topic`, in the caller's
/// transaction, about `subject` if it names one; returns the messages' row ids (none when
/// nobody subscribes). The messages keep the id of the request being handled on this thread,
/// if any ([`crate::kernel::jobs::within_request`]).
pub fn enqueue_for_topic(
    tx: &mut dyn WebhookRepositories,
    shop_id: ShopId,
    kind: WebhookKind,
    topic: &str,
    payload: &impl Serialize,
    subject: Option<&str>,
    now: Timestamp,
) -> Result<Vec<MessageId>, DomainError> {
    let payloads = std::slice::from_ref(payload);
    enqueue_all_for_topic(tx, shop_id, kind, topic, payloads, subject, now)
}

/// A payload as the message's body.
fn payload_text(payload: &impl Serialize) -> Result<String, DomainError> {
    serde_json::to_string(payload).map_err(|error| {
        DomainError::from(crate::StorageError::other(format!(
            "a webhook payload did not serialize: {error}"
        )))
    })
}

/// Enqueues each of `payloads` for every active endpoint of `topic`, as [`enqueue_for_topic`]
/// does one, with one read of the endpoints and one insert.
pub(crate) fn enqueue_all_for_topic(
    tx: &mut dyn WebhookRepositories,
    shop_id: ShopId,
    kind: WebhookKind,
    topic: &str,
    payloads: &[impl Serialize],
    subject: Option<&str>,
    now: Timestamp,
) -> Result<Vec<MessageId>, DomainError> {
    let listeners = Listeners::read(tx, shop_id, kind, &[topic])?;
    let messages = listeners.messages(topic, payloads, subject, now)?;
    listeners.insert(tx, &messages)
}

/// The shop's active endpoints of one kind for some topics, read at once, so that a change
/// that says several topics enqueues them all with one read and one insert.
pub(crate) struct Listeners {
    shop_id: ShopId,
    endpoints: Vec<WebhookEndpoint>,
}

impl Listeners {
    /// The shop's active endpoints of `kind` for any of `topics`.
    pub(crate) fn read(
        tx: &mut dyn WebhookRepositories,
        shop_id: ShopId,
        kind: WebhookKind,
        topics: &[&str],
    ) -> Result<Listeners, DomainError> {
        Ok(Listeners {
            shop_id,
            endpoints: tx.active_webhook_endpoints(shop_id, kind, topics)?,
        })
    }

    /// Whether an endpoint listens to `topic`: if none does, its payload need not be made.
    pub(crate) fn listen_to(&self, topic: &str) -> bool {
        self.endpoints
            .iter()
            .any(|endpoint| endpoint.topic == topic)
    }

    /// A message of each of `payloads` for every endpoint of `topic`, in that order; none
    /// (and nothing serialized) when no endpoint listens. The messages keep the id of the
    /// request being handled on this thread, if any ([`crate::kernel::jobs::within_request`]).
    pub(crate) fn messages(
        &self,
        topic: &str,
        payloads: &[impl Serialize],
        subject: Option<&str>,
        now: Timestamp,
    ) -> Result<Vec<NewWebhookMessage>, DomainError> {
        if !self.listen_to(topic) {
            return Ok(Vec::new());
        }
        let texts = payloads
            .iter()
            .map(payload_text)
            .collect::<Result<Vec<String>, DomainError>>()?;
        let request_id = current_request_id();
        let request_id = request_id.as_deref();
        let trace_parent = current_trace_parent();
        let trace_parent = trace_parent.as_deref();
        let listening: Vec<&WebhookEndpoint> = self
            .endpoints
            .iter()
            .filter(|endpoint| endpoint.topic == topic)
            .collect();
        Ok(texts
            .into_iter()
            .flat_map(|payload| {
                listening.iter().map(move |endpoint| NewWebhookMessage {
                    message_id: new_message_id(),
                    shop_id: self.shop_id,
                    endpoint_id: endpoint.id,
                    topic: topic.to_string(),
                    payload: payload.clone(),
                    created_at: now,
                    subject: subject.map(str::to_string),
                    request_id: request_id.map(str::to_string),
                    trace_parent: trace_parent.map(str::to_string),
                    throttled: endpoint.rate_limit_per_s.is_some(),
                })
            })
            .collect())
    }

    /// Stores `messages` in one insert; nothing to do for none.
    pub(crate) fn insert(
        &self,
        tx: &mut dyn WebhookRepositories,
        messages: &[NewWebhookMessage],
    ) -> Result<Vec<MessageId>, DomainError> {
        if messages.is_empty() {
            return Ok(Vec::new());
        }
        Ok(tx.insert_webhook_messages(messages)?)
    }
}

/// Enqueues `payload` for one endpoint (a test delivery, a resend), in the caller's
/// transaction; returns the message's row id and `webhook-id`.
pub fn enqueue_for_endpoint(
    tx: &mut dyn WebhookRepositories,
    endpoint: &WebhookEndpoint,
    payload: &impl Serialize,
    now: Timestamp,
) -> Result<(MessageId, String), DomainError> {
    let mut message =
        message_for_known_endpoint(endpoint.shop_id, &KnownEndpoint::of(endpoint), payload, now)?;
    message.throttled = endpoint.rate_limit_per_s.is_some();
    let row = tx
        .insert_webhook_messages(std::slice::from_ref(&message))?
        .first()
        .copied()
        .ok_or_else(|| crate::StorageError::other("no message id came back"))?;
    Ok((row, message.message_id))
}

/// What a caller keeps of an endpoint to enqueue for it later without reading it first: its
/// row id and topic. A message made for it is stored only while the endpoint still takes it
/// (`WebhookRepository::insert_webhook_messages_for_live_endpoints`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KnownEndpoint {
    /// The endpoint's row id.
    pub id: WebhookId,
    /// Its topic, by name, which the payload was made for.
    pub topic: String,
}

impl KnownEndpoint {
    /// What to keep of `endpoint`.
    pub fn of(endpoint: &WebhookEndpoint) -> KnownEndpoint {
        KnownEndpoint {
            id: endpoint.id,
            topic: endpoint.topic.clone(),
        }
    }
}

/// A message of `payload` for one endpoint of the shop, not stored yet. It keeps the id of the
/// request being handled on this thread and the trace context it is made in, as every enqueued
/// message does. `throttled` is false: storing it for a live endpoint reads that from the
/// endpoint.
pub fn message_for_known_endpoint(
    shop_id: ShopId,
    endpoint: &KnownEndpoint,
    payload: &impl Serialize,
    now: Timestamp,
) -> Result<NewWebhookMessage, DomainError> {
    Ok(NewWebhookMessage {
        message_id: new_message_id(),
        shop_id,
        endpoint_id: endpoint.id,
        topic: endpoint.topic.clone(),
        payload: payload_text(payload)?,
        created_at: now,
        subject: None,
        request_id: current_request_id().map(|id| id.to_string()),
        trace_parent: current_trace_parent(),
        throttled: false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> Timestamp {
        Timestamp::from_micros(1_700_000_000_000_000)
    }

    fn failed(status: u16) -> AttemptOutcome {
        AttemptOutcome {
            status: Some(status),
            ..AttemptOutcome::default()
        }
    }

    fn retry_in(after: AfterAttempt) -> Duration {
        match after {
            AfterAttempt::Retry(at) => {
                Duration::from_micros((at.as_micros() - now().as_micros()) as u64)
            }
            other => panic!("expected a retry, got {other:?}"),
        }
    }

    #[test]
    fn each_decision_settles_the_message_and_the_endpoint() {
        let (sent, since, later) = (now(), now().plus_seconds(-60), now().plus_seconds(300));
        let settle =
            |after: AfterAttempt, failing_since| after.settle(MessageId(7), 3, failing_since, sent);

        let (update, health) = settle(AfterAttempt::Delivered, Some(since));
        assert_eq!(
            (
                update.id,
                update.status,
                update.attempts,
                update.delivered_at
            ),
            (MessageId(7), MessageStatus::Delivered, 3, Some(sent))
        );
        assert_eq!(
            (health.failing_since, health.disabled),
            (None, None),
            "a success resets"
        );

        let (update, health) = settle(AfterAttempt::Retry(later), Some(since));
        assert_eq!(
            (update.status, update.next_attempt_at, update.delivered_at),
            (MessageStatus::Pending, later, None)
        );
        assert_eq!(
            health.failing_since,
            Some(since),
            "still failing since the first failure"
        );
        let (_, health) = settle(AfterAttempt::Retry(later), None);
        assert_eq!(
            health.failing_since,
            Some(sent),
            "a first failure starts the count"
        );

        let (update, health) = settle(AfterAttempt::GiveUp, None);
        assert_eq!(
            (update.status, health.disabled),
            (MessageStatus::Failed, None)
        );
        assert_eq!(health.failing_since, Some(sent));

        let (update, health) = settle(AfterAttempt::Disable("gone".into()), Some(since));
        assert_eq!(update.status, MessageStatus::Failed);
        assert_eq!(
            (health.failing_since, health.disabled.as_deref()),
            (Some(since), Some("gone"))
        );
    }

    #[test]
    fn the_schedule_without_jitter() {
        let policy = RetryPolicy::default();
        let waits: Vec<u64> = (1..=7)
            .map(|attempts| {
                retry_in(policy.after_attempt(attempts, &failed(500), None, now(), 0.0)).as_secs()
            })
            .collect();
        assert_eq!(waits, [5, 300, 1800, 7200, 18_000, 36_000, 36_000]);
        assert_eq!(
            policy.after_attempt(8, &failed(500), None, now(), 0.0),
            AfterAttempt::GiveUp
        );
    }

    #[test]
    fn jitter_stays_within_twenty_percent() {
        let policy = RetryPolicy::default();
        assert_eq!(
            retry_in(policy.after_attempt(1, &failed(500), None, now(), 1.0)),
            Duration::from_secs(6)
        );
        assert_eq!(
            retry_in(policy.after_attempt(1, &failed(500), None, now(), -1.0)),
            Duration::from_secs(4)
        );
        assert_eq!(
            retry_in(policy.after_attempt(1, &failed(500), None, now(), 7.0)),
            Duration::from_secs(6),
            "spread is clamped"
        );
    }

    #[test]
    fn retry_after_is_honoured_up_to_ten_hours() {
        let policy = RetryPolicy::default();
        let asked = |seconds| AttemptOutcome {
            status: Some(503),
            retry_after: Some(Duration::from_secs(seconds)),
            ..AttemptOutcome::default()
        };
        assert_eq!(
            retry_in(policy.after_attempt(1, &asked(120), None, now(), 0.0)),
            Duration::from_secs(120)
        );
        assert_eq!(
            retry_in(policy.after_attempt(1, &asked(2), None, now(), 0.0)),
            Duration::from_secs(2),
            "a shorter wait asked for is taken"
        );
        assert_eq!(
            retry_in(policy.after_attempt(1, &asked(50 * 3600), None, now(), 0.0)),
            Duration::from_secs(10 * 3600)
        );
    }

    #[test]
    fn success_410_and_long_failure() {
        let policy = RetryPolicy::default();
        assert_eq!(
            policy.after_attempt(3, &failed(204), Some(now()), now(), 0.0),
            AfterAttempt::Delivered
        );
        assert!(matches!(
            policy.after_attempt(1, &failed(410), None, now(), 0.0),
            AfterAttempt::Disable(_)
        ));
        let six_days_ago = now().plus_seconds(-6 * 24 * 3600);
        assert!(matches!(
            policy.after_attempt(2, &failed(500), Some(six_days_ago), now(), 0.0),
            AfterAttempt::Disable(_)
        ));
        let timeout = AttemptOutcome {
            error: Some("timed out".into()),
            ..AttemptOutcome::default()
        };
        assert!(matches!(
            policy.after_attempt(1, &timeout, None, now(), 0.0),
            AfterAttempt::Retry(_)
        ));
    }

    #[test]
    fn delays_parse_with_units() {
        assert_eq!(
            RetryPolicy::parse_delays("0s, 200ms,5m,2h,7").unwrap(),
            [
                Duration::ZERO,
                Duration::from_millis(200),
                Duration::from_secs(300),
                Duration::from_secs(7200),
                Duration::from_secs(7)
            ]
        );
        assert!(RetryPolicy::parse_delays("5 days").is_err());
        assert!(RetryPolicy::parse_delays("").is_err());
    }

    #[test]
    fn checkout_topics_have_fixed_ids() {
        assert_eq!(checkout_topic(1), Some("order/processed"));
        assert_eq!(checkout_topic(6), Some("gift_card/created"));
        assert_eq!(checkout_topic(7), Some("webhook/disabled"));
        assert_eq!(checkout_topic(8), None);
        // The catalogue's topics are these, by the same ids.
        for topic in crate::checkout::payloads::Topic::ALL {
            assert_eq!(checkout_topic(topic.id()), Some(topic.as_str()));
        }
        assert_eq!(checkout_topic_id("order/failed"), Some(5));
    }
}

/// Ends every webhook endpoint of a shop being deleted, of both kinds: each is marked deleted
/// and its waiting messages cancelled, and none gets new ones, so nothing more is sent in the
/// name of a shop that is gone. How many it ended.
pub fn end_shop_endpoints(
    tx: &mut dyn WebhookRepositories,
    shop_id: ShopId,
    now: Timestamp,
) -> Result<usize, DomainError> {
    let mut ended = 0;
    for kind in [WebhookKind::Checkout, WebhookKind::Subscription] {
        for endpoint in tx.webhook_endpoints(shop_id, kind)? {
            tx.delete_webhook_endpoint(endpoint.id, now)?;
            ended += 1;
        }
    }
    Ok(ended)
}

/// What an attempt's failure reads as in the operational webhooks: its error, or the HTTP
/// status it got (`HTTP 500`), as the delivery log shows one or the other.
pub fn failure_text(outcome: &AttemptOutcome) -> String {
    match (&outcome.error, outcome.status) {
        (Some(error), _) => error.clone(),
        (None, Some(status)) => format!("HTTP {status}"),
        (None, None) => "no answer".to_string(),
    }
}

/// Tells the shop's other live endpoints of the same kind registered for the operational topic
/// (`endpoint_disabled`, `webhook/disabled`) that `disabled` was just disabled, in the caller's
/// transaction (the one that disables it); the disabled endpoint itself gets nothing. Returns
/// the messages' row ids (none when nobody listens, or the shop is gone).
pub fn announce_endpoint_disabled(
    tx: &mut dyn WebhookRepositories,
    disabled: &WebhookEndpoint,
    failing_since: Timestamp,
    last_error: &str,
    now: Timestamp,
) -> Result<Vec<MessageId>, DomainError> {
    use super::operational::{
        EndpointDisabled, endpoint_disabled_payload, endpoint_disabled_topic,
    };
    let Some(shop) = tx
        .shop_by_id(disabled.shop_id)?
        .filter(|shop| shop.deleted_at.is_none())
    else {
        return Ok(Vec::new());
    };
    let topic = endpoint_disabled_topic(disabled.kind);
    let listeners: Vec<WebhookEndpoint> = tx
        .active_webhook_endpoints(shop.id, disabled.kind, &[topic])?
        .into_iter()
        .filter(|endpoint| endpoint.id != disabled.id)
        .collect();
    if listeners.is_empty() {
        return Ok(Vec::new());
    }
    let body = EndpointDisabled {
        endpoint_id: disabled.public_id.clone(),
        topic: disabled.topic.clone(),
        url: disabled.callback_url.clone(),
        failures_since: failing_since,
        last_error: last_error.to_string(),
    };
    let payload = payload_text(&endpoint_disabled_payload(
        disabled.kind,
        shop.identifier.as_str(),
        &body,
        now,
    ))?;
    let messages: Vec<NewWebhookMessage> = listeners
        .iter()
        .map(|endpoint| NewWebhookMessage {
            message_id: new_message_id(),
            shop_id: shop.id,
            endpoint_id: endpoint.id,
            topic: topic.to_string(),
            payload: payload.clone(),
            created_at: now,
            subject: None,
            request_id: current_request_id().map(|id| id.to_string()),
            trace_parent: current_trace_parent(),
            throttled: endpoint.rate_limit_per_s.is_some(),
        })
        .collect();
    Ok(tx.insert_webhook_messages(&messages)?)
}

/// A webhook's delivery log and the tools over it (resend, recover), for every kind of webhook:
/// the caller has found the endpoint (of its kind, of its shop).
pub mod log {
    use serde::Serialize;
    use serde_json::Value;
    use utoipa::ToSchema;

    use super::{DeliveryAttempt, MessageStatus, WebhookEndpoint, WebhookMessage};
    use crate::kernel::error::DomainError;
    use crate::kernel::ids::MessageId;
    use crate::kernel::time::Timestamp;
    use crate::webhooks::WebhookRepositories;

    /// A message of the webhook by its `webhook-id`, or 404.
    fn message_of(
        tx: &mut dyn WebhookRepositories,
        endpoint: &WebhookEndpoint,
        message_id: &str,
    ) -> Result<WebhookMessage, DomainError> {
        tx.webhook_message(message_id)?
            .filter(|message| message.endpoint_id == endpoint.id)
            .ok_or(DomainError::not_found("message"))
    }

    /// An attempt as the delivery log shows it: the answer's first KiB, never a header.
    #[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
    pub struct AttemptShown {
        /// When the attempt was made.
        pub attempted_at: Timestamp,
        /// The HTTP status, when there was an answer.
        pub status: Option<u16>,
        /// How long the attempt took, in milliseconds.
        pub latency_ms: f64,
        /// The first KiB of the answer's body.
        pub response: Option<String>,
        /// Why there was no usable answer (timeout, refused, blocked address).
        pub error: Option<String>,
    }

    impl AttemptShown {
        pub(crate) fn of(attempt: &DeliveryAttempt) -> AttemptShown {
            AttemptShown {
                attempted_at: attempt.attempted_at,
                status: attempt.outcome.status,
                latency_ms: attempt.outcome.latency.as_secs_f64() * 1000.0,
                response: attempt.outcome.response.clone(),
                error: attempt.outcome.error.clone(),
            }
        }
    }

    /// A message as the delivery log shows it; `next_attempt_at` only while it is pending.
    #[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
    pub struct MessageShown {
        /// The `webhook-id`, the same on every attempt.
        pub message_id: String,
        /// The topic, by name.
        pub topic: String,
        /// Where the message is in its delivery.
        pub status: MessageStatus,
        /// How many attempts have been made so far.
        pub attempts: i64,
        /// When the message was enqueued.
        pub created_at: Timestamp,
        /// When the next attempt is due; only while the message is pending.
        pub next_attempt_at: Option<Timestamp>,
        /// When an attempt got a 2xx answer.
        pub delivered_at: Option<Timestamp>,
        /// Whether the retention purge has emptied the payload and deleted the attempts, as it
        /// does for messages finished longer ago than the retention period.
        pub payload_purged: bool,
        /// When the payload and attempts were purged.
        pub purged_at: Option<Timestamp>,
    }

    impl MessageShown {
        pub(crate) fn of(message: &WebhookMessage) -> MessageShown {
            MessageShown {
                message_id: message.message_id.clone(),
                topic: message.topic.clone(),
                status: message.status,
                attempts: message.attempts,
                created_at: message.created_at,
                next_attempt_at: (message.status == MessageStatus::Pending)
                    .then_some(message.next_attempt_at),
                delivered_at: message.delivered_at,
                payload_purged: message.purged_at.is_some(),
                purged_at: message.purged_at,
            }
        }
    }

    /// A line of the delivery log: a message and its last attempt.
    #[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
    pub struct DeliveryLine {
        /// The message, its fields inline.
        #[serde(flatten)]
        pub message: MessageShown,
        /// Its latest attempt; None before the first.
        pub last_attempt: Option<AttemptShown>,
    }

    /// One delivery: the message's fields, with every attempt in place of their count, and
    /// the payload as sent.
    #[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
    pub struct Delivery {
        /// The message's `webhook-id`.
        pub message_id: String,
        /// The topic it reports.
        pub topic: String,
        /// Where it stands.
        pub status: MessageStatus,
        /// Every attempt, oldest first.
        pub attempts: Vec<AttemptShown>,
        /// When it was queued.
        pub created_at: Timestamp,
        /// When it is tried next, while it is pending.
        pub next_attempt_at: Option<Timestamp>,
        /// When an attempt delivered it.
        pub delivered_at: Option<Timestamp>,
        /// The body sent: whatever the topic's payload is; null once purged.
        pub payload: Value,
        /// Whether the retention purge has emptied the payload and deleted the attempts.
        pub payload_purged: bool,
        /// When the payload and attempts were purged.
        pub purged_at: Option<Timestamp>,
    }

    /// The webhook's delivery log: its latest messages, newest first, each with its last attempt.
    pub fn deliveries(
        tx: &mut dyn WebhookRepositories,
        endpoint: &WebhookEndpoint,
        limit: usize,
    ) -> Result<Vec<DeliveryLine>, DomainError> {
        let messages = tx.webhook_messages_of_endpoint(endpoint.id, limit)?;
        let rows: Vec<MessageId> = messages.iter().map(|m| m.id).collect();
        let last_attempts = tx.last_webhook_attempts(&rows)?;
        Ok(messages
            .iter()
            .map(|message| DeliveryLine {
                message: MessageShown::of(message),
                last_attempt: last_attempts
                    .iter()
                    .find(|attempt| attempt.message_row == message.id)
                    .map(AttemptShown::of),
            })
            .collect())
    }

    /// One message with its payload and every attempt.
    pub fn delivery(
        tx: &mut dyn WebhookRepositories,
        endpoint: &WebhookEndpoint,
        message_id: &str,
    ) -> Result<Delivery, DomainError> {
        let message = message_of(tx, endpoint, message_id)?;
        let attempts = tx.webhook_attempts(message.id)?;
        let shown = MessageShown::of(&message);
        Ok(Delivery {
            message_id: shown.message_id,
            topic: shown.topic,
            status: shown.status,
            attempts: attempts.iter().map(AttemptShown::of).collect(),
            created_at: shown.created_at,
            next_attempt_at: shown.next_attempt_at,
            delivered_at: shown.delivered_at,
            payload: serde_json::from_str(&message.payload).unwrap_or(Value::Null),
            payload_purged: shown.payload_purged,
            purged_at: shown.purged_at,
        })
    }

    /// Sends a message again, with the same `webhook-id`, whatever became of it; a message
    /// whose payload was purged is refused (422 `message.purged`).
    pub fn resend(
        tx: &mut dyn WebhookRepositories,
        endpoint: &WebhookEndpoint,
        message_id: &str,
        now: Timestamp,
    ) -> Result<(), DomainError> {
        if !endpoint.is_active() {
            return Err(disabled());
        }
        let message = message_of(tx, endpoint, message_id)?;
        if message.purged_at.is_some() {
            return Err(purged());
        }
        tx.requeue_webhook_message(message.id, now)?;
        Ok(())
    }

    /// The 422 `message.purged` for a message whose payload the retention purge emptied:
    /// there is nothing left to send again.
    pub fn purged() -> DomainError {
        DomainError::Unprocessable {
            code: "message.purged",
            message: "the message's payload was purged".to_string(),
        }
    }

    /// Sends again every message of the webhook that failed, created since `since`, but those
    /// whose payload was purged; how many.
    pub fn recover(
        tx: &mut dyn WebhookRepositories,
        endpoint: &WebhookEndpoint,
        since: Timestamp,
        now: Timestamp,
    ) -> Result<u64, DomainError> {
        if !endpoint.is_active() {
            return Err(disabled());
        }
        Ok(tx.requeue_failed_webhook_messages(endpoint.id, since, now)?)
    }

    /// The 422 `webhook.disabled` for a disabled webhook, which must be enabled again before a
    /// resend, a recover or a test delivery.
    pub fn disabled() -> DomainError {
        DomainError::Unprocessable {
            code: "webhook.disabled",
            message: "the webhook is disabled; enable it again first (POST …/webhooks/{id}/enable)"
                .to_string(),
        }
    }
}

/// Checkout webhooks: registration, changes and the resource clients see.
pub mod checkout {
    pub use super::log::disabled;

    use serde::{Deserialize, Serialize};
    use utoipa::ToSchema;

    use super::{
        NewWebhookEndpoint, WebhookEndpoint, WebhookKind, checkout_topic, checkout_topic_id,
    };
    use crate::access::secrets::SecretKind;
    use crate::access::shop::Shop;
    use crate::kernel::body::{Check, Field};
    use crate::kernel::error::{DomainError, FieldError, Problems};
    use crate::kernel::outbound::{AddressGuard, check_callback_url};
    use crate::kernel::time::Timestamp;
    use crate::webhooks::{
        WebhookRepositories, apply_rate_limit, read_rate_limit, read_rate_limit_change,
    };

    /// The body of Create Webhook: the topic's id and the callback URL, both checked by [`create`].
    /// Either missing is `None` (serde's rule for `Option` fields), refused by [`create`].
    #[derive(Debug, Clone, Default, Deserialize, ToSchema)]
    #[schema(as = CheckoutWebhookInput)]
    pub struct WebhookInput {
        /// The topic's fixed id (1..7, as in `CHECKOUT_TOPICS`); required.
        #[schema(required = true, value_type = i64, minimum = 1, maximum = 7)]
        pub webhook_topic_id: Option<i64>,
        /// The URL deliveries go to: absolute http(s), at most 2048 characters, not into a
        /// private network; required, checked by [`check_callback`].
        #[schema(required = true, value_type = String, format = "uri", max_length = 2048)]
        pub callback_url: Option<String>,
        /// At most how many deliveries to the webhook start per second (an integer from 1 to
        /// 10,000, or its decimal text), however many Mercer processes deliver; messages beyond
        /// it wait their turn in the queue, which is not a failed attempt. Left out or null: no
        /// limit.
        #[schema(value_type = Option<i64>, minimum = 1, maximum = 10000, example = 20)]
        #[serde(default)]
        pub rate_limit_per_s: Field<i64>,
    }

    /// Checks a callback URL's form and, through the guard, where it leads (422 either way).
    /// Runs before any transaction: the guard resolves names.
    pub fn check_callback(
        url: Option<&str>,
        guard: &dyn AddressGuard,
    ) -> Result<String, FieldError> {
        let url = url.ok_or_else(|| FieldError::required("callback_url"))?;
        let url = check_callback_url("callback_url", url)?;
        guard.check(&url).map_err(|reason| {
            FieldError::new(
                "callback_url",
                "address_not_allowed",
                format!("callback_url is not allowed: {reason}"),
            )
        })?;
        Ok(url)
    }

    /// Create Webhook, with the callback URL already checked; `rate_limit_per_s` as sent.
    pub fn create(
        tx: &mut dyn WebhookRepositories,
        shop: &Shop,
        topic_id: Option<i64>,
        callback: Result<String, FieldError>,
        rate_limit_per_s: Field<i64>,
        now: Timestamp,
    ) -> Result<WebhookEndpoint, DomainError> {
        if tx
            .shared_secret(shop.id, SecretKind::CheckoutIntegration)?
            .is_none()
        {
            return Err(DomainError::Unprocessable {
                code: "integration.not_configured",
                message: "configure the integration's shared secret first (POST /checkout/shop/{shop}/integration/config)"
                    .to_string(),
            });
        }
        let mut problems = Problems::new();
        let topic = match topic_id {
            None => {
                problems.push(FieldError::required("webhook_topic_id"));
                None
            }
            Some(id) => problems.check(checkout_topic(id).ok_or_else(|| {
                FieldError::new(
                    "webhook_topic_id",
                    "invalid_value",
                    "webhook_topic_id must be one of the ids of List Webhook Topics (1..7)",
                )
            })),
        };
        let url = problems.check(callback);
        let rate_limit_per_s = read_rate_limit(&mut Check::root(&mut problems), rate_limit_per_s);
        problems.into_result()?;
        let (Some(topic), Some(callback_url)) = (topic, url) else {
            return Err(DomainError::invalid(
                "webhook_topic_id",
                "invalid",
                "the webhook is invalid",
            ));
        };
        let mut endpoint = tx.insert_webhook_endpoint(&NewWebhookEndpoint {
            shop_id: shop.id,
            kind: WebhookKind::Checkout,
            topic: topic.to_string(),
            callback_url,
            secret: None,
            created_at: now,
        })?;
        apply_rate_limit(tx, &mut endpoint, rate_limit_per_s, now)?;
        Ok(endpoint)
    }

    /// List Webhooks: the shop's checkout webhooks.
    pub fn list(
        tx: &mut dyn WebhookRepositories,
        shop: &Shop,
    ) -> Result<Vec<CheckoutWebhookResource>, DomainError> {
        let endpoints = tx.webhook_endpoints(shop.id, WebhookKind::Checkout)?;
        Ok(endpoints.iter().map(resource).collect())
    }

    /// A checkout webhook of the shop by the id clients see, or 404 (another shop's, a
    /// subscription webhook's, a deleted one).
    pub fn find(
        tx: &mut dyn WebhookRepositories,
        shop: &Shop,
        public_id: &str,
    ) -> Result<WebhookEndpoint, DomainError> {
        tx.webhook_endpoint(shop.id, public_id)?
            .filter(|endpoint| endpoint.kind == WebhookKind::Checkout)
            .ok_or(DomainError::not_found("webhook"))
    }

    /// Update Webhook: a new callback URL, already checked (`None`: not sent), and the rate
    /// limit as sent (left out keeps it, null clears it).
    pub fn update(
        tx: &mut dyn WebhookRepositories,
        shop: &Shop,
        public_id: &str,
        callback: Option<Result<String, FieldError>>,
        rate_limit_per_s: Field<i64>,
        now: Timestamp,
    ) -> Result<WebhookEndpoint, DomainError> {
        let mut endpoint = find(tx, shop, public_id)?;
        let mut problems = Problems::new();
        let url = callback.and_then(|callback| problems.check(callback));
        let rate_limit_per_s =
            read_rate_limit_change(&mut Check::root(&mut problems), rate_limit_per_s);
        problems.into_result()?;
        if let Some(url) = url {
            endpoint.callback_url = url;
            tx.update_webhook_endpoint(&endpoint, now)?;
        }
        if let Some(rate_limit_per_s) = rate_limit_per_s {
            apply_rate_limit(tx, &mut endpoint, rate_limit_per_s, now)?;
        }
        find(tx, shop, public_id)
    }

    /// Delete Webhook: marks the webhook deleted and cancels its pending messages.
    pub fn delete(
        tx: &mut dyn WebhookRepositories,
        shop: &Shop,
        public_id: &str,
        now: Timestamp,
    ) -> Result<(), DomainError> {
        let endpoint = find(tx, shop, public_id)?;
        tx.delete_webhook_endpoint(endpoint.id, now)?;
        Ok(())
    }

    /// The webhook's delivery log: its latest messages, newest first, each with its last attempt.
    pub fn deliveries(
        tx: &mut dyn WebhookRepositories,
        shop: &Shop,
        public_id: &str,
        limit: usize,
    ) -> Result<Vec<super::log::DeliveryLine>, DomainError> {
        let endpoint = find(tx, shop, public_id)?;
        super::log::deliveries(tx, &endpoint, limit)
    }

    /// One message with its payload and every attempt.
    pub fn delivery(
        tx: &mut dyn WebhookRepositories,
        shop: &Shop,
        public_id: &str,
        message_id: &str,
    ) -> Result<super::log::Delivery, DomainError> {
        let endpoint = find(tx, shop, public_id)?;
        super::log::delivery(tx, &endpoint, message_id)
    }

    /// Sends a message again, with the same `webhook-id`, whatever became of it; a message
    /// whose payload was purged is refused (422 `message.purged`).
    pub fn resend(
        tx: &mut dyn WebhookRepositories,
        shop: &Shop,
        public_id: &str,
        message_id: &str,
        now: Timestamp,
    ) -> Result<(), DomainError> {
        let endpoint = find(tx, shop, public_id)?;
        super::log::resend(tx, &endpoint, message_id, now)
    }

    /// Sends again every message of the webhook that failed, created since `since`; how many.
    pub fn recover(
        tx: &mut dyn WebhookRepositories,
        shop: &Shop,
        public_id: &str,
        since: Timestamp,
        now: Timestamp,
    ) -> Result<u64, DomainError> {
        let endpoint = find(tx, shop, public_id)?;
        super::log::recover(tx, &endpoint, since, now)
    }

    /// Enables a disabled webhook again, as new (its failure history forgotten).
    pub fn enable(
        tx: &mut dyn WebhookRepositories,
        shop: &Shop,
        public_id: &str,
        now: Timestamp,
    ) -> Result<WebhookEndpoint, DomainError> {
        let endpoint = find(tx, shop, public_id)?;
        tx.enable_webhook_endpoint(endpoint.id, now)?;
        find(tx, shop, public_id)
    }

    /// A checkout webhook as answers show it, and whether Mercer disabled it (and why); never
    /// its secret.
    #[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
    pub struct CheckoutWebhookResource {
        /// The webhook's id clients see: 32 hex characters.
        pub id: String,
        /// The topic's fixed id (1..7); None if the topic is not one of the checkout topics.
        pub webhook_topic_id: Option<i64>,
        /// The topic, by name (`order/created`).
        pub webhook_topic_name: String,
        /// The URL deliveries are sent to.
        pub callback_url: String,
        /// When the webhook was created.
        pub created_at: Timestamp,
        /// When it last changed.
        pub updated_at: Timestamp,
        /// When Mercer disabled it; None while it is active.
        pub disabled_at: Option<Timestamp>,
        /// Why Mercer disabled it (a 410 answer, days of failures).
        pub disabled_reason: Option<String>,
        /// At most how many deliveries to the webhook start per second (1 to 10,000); null
        /// when there is no limit.
        #[schema(minimum = 1, maximum = 10000, example = 20)]
        pub rate_limit_per_s: Option<u32>,
    }

    /// A checkout webhook as answers show it.
    pub fn resource(endpoint: &WebhookEndpoint) -> CheckoutWebhookResource {
        CheckoutWebhookResource {
            id: endpoint.public_id.clone(),
            webhook_topic_id: checkout_topic_id(&endpoint.topic),
            webhook_topic_name: endpoint.topic.clone(),
            callback_url: endpoint.callback_url.clone(),
            created_at: endpoint.created_at,
            updated_at: endpoint.updated_at,
            disabled_at: endpoint.disabled_at,
            disabled_reason: endpoint.disabled_reason.clone(),
            rate_limit_per_s: endpoint.rate_limit_per_s,
        }
    }
}
