//! What webhooks need from storage: endpoints, messages and their attempts.

use crate::access::AccessRepositories;
use crate::kernel::activity::ActivityRepository;
use crate::kernel::error::StoreResult;
use crate::kernel::ids::ShopId;
use crate::kernel::ids::{MessageId, WebhookId};
use crate::kernel::time::Timestamp;
use crate::webhooks::console::MessageFilter;
use crate::webhooks::{
    DeliveryAttempt, MessageStatus, MessageUpdate, NewWebhookEndpoint, NewWebhookMessage,
    Reservation, WebhookEndpoint, WebhookKind, WebhookMessage,
};

crate::feature_database!(
    /// The database as webhooks sees it.
    WebhookDatabase,
    WebhookRepositories
);

/// Every repository the webhooks' use cases may touch in one unit of work (with the activity
/// counts deliveries add to).
pub trait WebhookRepositories: AccessRepositories + ActivityRepository + WebhookRepository {}

impl<T> WebhookRepositories for T where
    T: AccessRepositories + ActivityRepository + WebhookRepository + ?Sized
{
}

/// Webhook endpoints, the messages queued for them, and every delivery attempt.
pub trait WebhookRepository {
    /// Stores a new endpoint, with a new public id (32 hex characters), and returns it.
    fn insert_webhook_endpoint(
        &mut self,
        endpoint: &NewWebhookEndpoint,
    ) -> StoreResult<WebhookEndpoint>;
    /// An endpoint of the shop by the id clients see, unless deleted.
    fn webhook_endpoint(
        &mut self,
        shop_id: ShopId,
        public_id: &str,
    ) -> StoreResult<Option<WebhookEndpoint>>;
    /// Endpoints by row id, deleted ones included (the dispatcher needs them all).
    fn webhook_endpoints_by_ids(
        &mut self,
        ids: &[WebhookId],
    ) -> StoreResult<Vec<(WebhookEndpoint, bool)>>;
    /// The shop's endpoints of a kind that are not deleted, oldest first.
    fn webhook_endpoints(
        &mut self,
        shop_id: ShopId,
        kind: WebhookKind,
    ) -> StoreResult<Vec<WebhookEndpoint>>;
    /// The endpoints that get messages of any of `topics`: not deleted, not disabled; oldest
    /// first.
    fn active_webhook_endpoints(
        &mut self,
        shop_id: ShopId,
        kind: WebhookKind,
        topics: &[&str],
    ) -> StoreResult<Vec<WebhookEndpoint>>;
    /// Writes the endpoint's callback URL, topic and secret, and `updated_at` = `now`.
    fn update_webhook_endpoint(
        &mut self,
        endpoint: &WebhookEndpoint,
        now: Timestamp,
    ) -> StoreResult<()>;
    /// Marks the endpoint deleted and cancels its pending messages.
    fn delete_webhook_endpoint(&mut self, id: WebhookId, now: Timestamp) -> StoreResult<()>;
    /// Records whether the endpoint is failing (and since when), and disables it with a reason.
    fn set_webhook_endpoint_health(
        &mut self,
        id: WebhookId,
        failing_since: Option<Timestamp>,
        disabled: Option<(Timestamp, &str)>,
        now: Timestamp,
    ) -> StoreResult<()>;
    /// Enables a disabled endpoint again, as new.
    fn enable_webhook_endpoint(&mut self, id: WebhookId, now: Timestamp) -> StoreResult<()>;
    /// Stores messages; returns their row ids in order.
    fn insert_webhook_messages(
        &mut self,
        messages: &[NewWebhookMessage],
    ) -> StoreResult<Vec<MessageId>>;
    /// Stores each message only if its endpoint (`endpoint_id`) still takes it: of the
    /// message's shop, of `kind` and of the message's topic, neither deleted nor disabled. A
    /// message stored is marked throttled when its endpoint has a rate limit (the message's own
    /// `throttled` is not read). One statement on PostgreSQL, so it may run by
    /// `Database::write_statement`. Answers each message's row id, in order, None for one not
    /// stored.
    fn insert_webhook_messages_for_live_endpoints(
        &mut self,
        kind: WebhookKind,
        messages: &[NewWebhookMessage],
    ) -> StoreResult<Vec<Option<MessageId>>>;
    /// Up to `limit` pending messages due by `now`, the oldest due taken first, leased: each
    /// is answered, in id order, with its next attempt moved to `lease_until`, so no claim takes
    /// it again before then. One statement, so it may run by `Database::write_statement`.
    fn claim_webhook_messages(
        &mut self,
        now: Timestamp,
        limit: usize,
        lease_until: Timestamp,
    ) -> StoreResult<Vec<WebhookMessage>>;
    /// Sets (`Some`) or clears (`None`) the endpoint's `rate_limit_per_s`, with its throttle,
    /// and marks its pending messages throttled or not: once cleared, they go with the
    /// unthrottled ones at once.
    fn set_webhook_rate_limit(
        &mut self,
        id: WebhookId,
        rate_limit_per_s: Option<u32>,
        now: Timestamp,
    ) -> StoreResult<()>;
    /// Claims due messages of throttled endpoints, at most `limit`, each endpoint's in a
    /// [`Reservation`] of send times from the throttle's next free time (at `now` or later, and
    /// only a throttle free by `ready_by`) for at most `stretch`; the throttles move past
    /// them. The messages are leased until `lease_until`. Throttles another claim holds are
    /// skipped. In a write transaction.
    fn claim_throttled_webhook_messages(
        &mut self,
        now: Timestamp,
        limit: usize,
        ready_by: Timestamp,
        stretch: std::time::Duration,
        lease_until: Timestamp,
    ) -> StoreResult<Vec<Reservation>>;
    /// Puts claimed messages back in the queue, due at `at`, as they were: no attempt, the
    /// same attempt count (a throttled message that missed its send time).
    fn release_webhook_messages(&mut self, ids: &[MessageId], at: Timestamp) -> StoreResult<()>;
    /// Whether any endpoint is throttled. Also unmarks the pending messages still marked
    /// throttled whose endpoint no longer is (enqueued while its limit was being cleared).
    fn webhook_throttle_upkeep(&mut self, now: Timestamp) -> StoreResult<bool>;
    /// How many pending messages each of these endpoints has (those with none are left out).
    fn pending_webhook_messages(
        &mut self,
        endpoint_ids: &[WebhookId],
    ) -> StoreResult<Vec<(WebhookId, i64)>>;
    /// Stores attempts and the messages' new states.
    fn record_webhook_attempts(
        &mut self,
        attempts: &[DeliveryAttempt],
        updates: &[MessageUpdate],
    ) -> StoreResult<()>;
    /// Ends the endpoint's pending messages with `status`; how many.
    fn end_pending_webhook_messages(
        &mut self,
        endpoint_id: WebhookId,
        status: MessageStatus,
        now: Timestamp,
    ) -> StoreResult<u64>;
    /// (due now, due later) among pending messages.
    fn webhook_queue_depth(&mut self, now: Timestamp) -> StoreResult<(i64, i64)>;
    /// A message by its `webhook-id`.
    fn webhook_message(&mut self, message_id: &str) -> StoreResult<Option<WebhookMessage>>;
    /// The endpoint's messages, newest first.
    fn webhook_messages_of_endpoint(
        &mut self,
        endpoint_id: WebhookId,
        limit: usize,
    ) -> StoreResult<Vec<WebhookMessage>>;
    /// The shop's messages that `filter` keeps, newest first, older than the row `before`.
    fn webhook_messages_of_shop(
        &mut self,
        shop_id: ShopId,
        filter: &MessageFilter,
        before: Option<MessageId>,
        limit: usize,
    ) -> StoreResult<Vec<WebhookMessage>>;
    /// The row id of the shop's newest message created at or before `at`, if there is one.
    fn webhook_message_row_at(
        &mut self,
        shop_id: ShopId,
        at: Timestamp,
    ) -> StoreResult<Option<MessageId>>;
    /// The shop's messages about `subject`, newest first.
    fn webhook_messages_about(
        &mut self,
        shop_id: ShopId,
        subject: &str,
        limit: usize,
    ) -> StoreResult<Vec<WebhookMessage>>;
    /// How many of the shop's messages are in `status`.
    fn count_shop_webhook_messages(
        &mut self,
        shop_id: ShopId,
        status: MessageStatus,
    ) -> StoreResult<i64>;
    /// A message's attempts, oldest first.
    fn webhook_attempts(&mut self, message_row: MessageId) -> StoreResult<Vec<DeliveryAttempt>>;
    /// The last attempt of each of these messages that has one (in no particular order).
    fn last_webhook_attempts(
        &mut self,
        message_rows: &[MessageId],
    ) -> StoreResult<Vec<DeliveryAttempt>>;
    /// How many endpoints are disabled.
    fn count_disabled_webhook_endpoints(&mut self) -> StoreResult<i64>;
    /// The retention purge of up to `limit` messages finished (not pending) before
    /// `finished_before` and not purged yet, oldest finished first: their attempts are deleted,
    /// their payload emptied and `purged_at` set to `now`; the rows stay. How many.
    fn purge_webhook_messages(
        &mut self,
        finished_before: Timestamp,
        limit: usize,
        now: Timestamp,
    ) -> StoreResult<usize>;
    /// Makes a message pending and due at `now` again (its `webhook-id` stays), unless it was
    /// purged.
    fn requeue_webhook_message(&mut self, id: MessageId, now: Timestamp) -> StoreResult<()>;
    /// Makes the endpoint's failed messages created since `since` pending and due again, but
    /// purged ones; how many.
    fn requeue_failed_webhook_messages(
        &mut self,
        endpoint_id: WebhookId,
        since: Timestamp,
        now: Timestamp,
    ) -> StoreResult<u64>;
}
