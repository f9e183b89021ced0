//! The ports: what the domain needs from the outside world, as traits. `mercer-store` implements
//! the storage ports over SQLite and PostgreSQL; [`crate::testing`] implements them in memory.

use crate::credentials::{ApiToken, NewApiToken};
use crate::destinations::{Destination, DestinationSettings, Topic};
use crate::directory::{DirectoryAddress, DirectoryCustomer, DirectoryPage, DirectoryQuery, Label};
use crate::error::{DomainError, StorageError};
use crate::events::{
    EntityKind, EntityRecord, EntityWrite, FailedInboundEvent, InboundEvent, NewInboundEvent,
    Outcome, UnreadableEvent,
};
use crate::oauth::{
    AuthorizationCode, NewAuthorizationCode, NewOAuthApp, NewStaffAccount, OAuthApp, StaffAccount,
};
use crate::outbox::{ConnectorCall, OutboxEntry, OutboxStatus};
use crate::overrides::{ApiOverride, NewApiOverride, OverrideType};
use crate::secrets::{SecretKind, SharedSecret};
use crate::shop::{NewShop, Shop, ShopIdentifier};
use crate::sync::{SyncRun, SyncStatus};
use crate::time::Timestamp;
use crate::webhooks::{
    DeliveryAttempt, MessageStatus, MessageUpdate, NewWebhookEndpoint, NewWebhookMessage,
    WebhookEndpoint, WebhookKind, WebhookMessage,
};

pub type StoreResult<T> = Result<T, StorageError>;

pub trait ShopRepository {
    fn insert_shop(&mut self, shop: &NewShop) -> StoreResult<Shop>;
    fn shop_by_identifier(&mut self, identifier: &ShopIdentifier) -> StoreResult<Option<Shop>>;
    fn shop_by_domain(&mut self, domain: &str) -> StoreResult<Option<Shop>>;
    fn shop_by_id(&mut self, id: i64) -> StoreResult<Option<Shop>>;
    fn count_shops(&mut self) -> StoreResult<i64>;
    /// All shops, oldest first.
    fn list_shops(&mut self) -> StoreResult<Vec<Shop>>;
}

pub trait TokenRepository {
    fn insert_token(&mut self, token: &NewApiToken) -> StoreResult<ApiToken>;
    /// The token with this SHA-256 hash, unless it was revoked.
    fn active_token_by_hash(&mut self, token_hash: &str) -> StoreResult<Option<ApiToken>>;
    /// Every token of the shop, revoked ones included, oldest first.
    fn tokens_of_shop(&mut self, shop_id: i64) -> StoreResult<Vec<ApiToken>>;
    /// Marks the token revoked; false when the shop has no such live token.
    fn revoke_token(&mut self, shop_id: i64, token_id: i64, at: Timestamp) -> StoreResult<bool>;
}

pub trait SecretRepository {
    fn shared_secret(
        &mut self,
        shop_id: i64,
        kind: SecretKind,
    ) -> StoreResult<Option<SharedSecret>>;
    /// Inserts or replaces the shop's secret of that kind.
    fn save_shared_secret(&mut self, secret: &SharedSecret) -> StoreResult<()>;
}

pub trait DestinationRepository {
    fn insert_destination(
        &mut self,
        shop_id: i64,
        settings: &DestinationSettings,
        now: Timestamp,
    ) -> StoreResult<Destination>;
    fn update_destination(
        &mut self,
        shop_id: i64,
        id: i64,
        settings: &DestinationSettings,
        now: Timestamp,
    ) -> StoreResult<()>;
    fn delete_destination(&mut self, shop_id: i64, id: i64, now: Timestamp) -> StoreResult<()>;
    /// A destination of the shop, deleted or not.
    fn destination(&mut self, shop_id: i64, id: i64) -> StoreResult<Option<Destination>>;
    fn live_destination(&mut self, shop_id: i64, topic: Topic) -> StoreResult<Option<Destination>>;
    /// The shop's live destinations, oldest first.
    fn live_destinations(&mut self, shop_id: i64) -> StoreResult<Vec<Destination>>;
}

/// Customers, orders, products and categories received from the platform.
pub trait PlatformRepository {
    /// What is held of these entities of one kind; unknown ones are left out.
    fn platform_entities(
        &mut self,
        shop_id: i64,
        kind: EntityKind,
        platform_ids: &[&str],
    ) -> StoreResult<Vec<(String, EntityRecord)>>;

    /// Inserts or replaces entities of one kind (and what is pulled out of them: addresses,
    /// variants), each with its whole state: document, platform times, deletion.
    fn put_platform_entities(
        &mut self,
        shop_id: i64,
        kind: EntityKind,
        entities: &[EntityWrite],
        now: Timestamp,
    ) -> StoreResult<()>;

    fn platform_entity(
        &mut self,
        shop_id: i64,
        kind: EntityKind,
        platform_id: &str,
    ) -> StoreResult<Option<EntityRecord>> {
        Ok(self
            .platform_entities(shop_id, kind, &[platform_id])?
            .into_iter()
            .next()
            .map(|(_, record)| record))
    }
}

/// The durable queue of events received and not yet applied.
pub trait EventQueueRepository {
    fn insert_inbound_events(&mut self, events: &[NewInboundEvent]) -> StoreResult<()>;
    /// The oldest unapplied events due by `now` (an event waiting to be retried is due at its
    /// `retry_at`), in order of arrival; a row that does not read back comes as unreadable.
    fn pending_inbound_events(
        &mut self,
        limit: usize,
        now: Timestamp,
    ) -> StoreResult<Vec<Result<InboundEvent, UnreadableEvent>>>;
    /// Records that these events were applied, with what outcome; they are pending no more
    /// (the store may forget them).
    fn mark_inbound_events(
        &mut self,
        outcomes: &[(i64, Outcome)],
        at: Timestamp,
    ) -> StoreResult<()>;
    fn count_pending_inbound_events(&mut self) -> StoreResult<i64>;
    /// Whether any event waits to be applied (cheaper than counting them).
    fn has_pending_inbound_events(&mut self) -> StoreResult<bool>;
    /// Takes the right to apply events until the transaction ends; false when another process
    /// holds it. Events must be applied by one applier at a time to keep their order.
    fn lock_event_applier(&mut self) -> StoreResult<bool>;
    /// Records a failed attempt at applying a queued event; it is due again at `retry_at`.
    fn postpone_inbound_event(
        &mut self,
        id: i64,
        attempts: i64,
        error: &str,
        retry_at: Timestamp,
    ) -> StoreResult<()>;
    /// Moves a queued event that failed its last attempt out of the queue, with its error.
    fn set_aside_inbound_event(
        &mut self,
        id: i64,
        attempts: i64,
        error: &str,
        at: Timestamp,
    ) -> StoreResult<()>;
    /// Events set aside, oldest first.
    fn failed_inbound_events(&mut self, limit: usize) -> StoreResult<Vec<FailedInboundEvent>>;
    fn count_failed_inbound_events(&mut self) -> StoreResult<i64>;
    /// Puts events set aside back into the queue under their own ids (every one when `ids` is
    /// None), with their attempts reset; returns the ids put back.
    fn requeue_failed_inbound_events(&mut self, ids: Option<&[i64]>) -> StoreResult<Vec<i64>>;
}

pub trait SyncRepository {
    fn running_sync(&mut self, shop_id: i64, topic: Topic) -> StoreResult<Option<SyncRun>>;
    fn insert_sync_run(
        &mut self,
        shop_id: i64,
        topic: Topic,
        now: Timestamp,
    ) -> StoreResult<SyncRun>;
    /// Counts a page pulled, and reports the run alive.
    fn record_sync_page(
        &mut self,
        id: i64,
        items: i64,
        skipped: i64,
        now: Timestamp,
    ) -> StoreResult<()>;
    fn finish_sync(
        &mut self,
        id: i64,
        status: SyncStatus,
        error: Option<&str>,
        now: Timestamp,
    ) -> StoreResult<()>;
    fn sync_run(&mut self, id: i64) -> StoreResult<Option<SyncRun>>;
}

/// Calls to make on connectors, kept until made.
pub trait OutboxRepository {
    fn insert_outbox_call(
        &mut self,
        shop_id: i64,
        call: &ConnectorCall,
        now: Timestamp,
    ) -> StoreResult<i64>;
    /// Pending calls due by `now` that no other worker holds, leased until `lease_until`.
    fn claim_outbox_calls(
        &mut self,
        now: Timestamp,
        limit: usize,
        lease_until: Timestamp,
    ) -> StoreResult<Vec<OutboxEntry>>;
    fn retry_outbox_call(
        &mut self,
        id: i64,
        attempts: i64,
        next_attempt_at: Timestamp,
        error: &str,
    ) -> StoreResult<()>;
    fn finish_outbox_call(
        &mut self,
        id: i64,
        status: OutboxStatus,
        attempts: i64,
        error: Option<&str>,
        now: Timestamp,
    ) -> StoreResult<()>;
    /// The shop's calls, oldest first.
    fn outbox_entries(&mut self, shop_id: i64) -> StoreResult<Vec<OutboxEntry>>;
}

pub trait DirectoryRepository {
    fn list_directory_customers(
        &mut self,
        shop_id: i64,
        query: &DirectoryQuery,
    ) -> StoreResult<DirectoryPage>;
    /// A customer of the shop, deleted or not.
    fn directory_customer(
        &mut self,
        shop_id: i64,
        id: i64,
    ) -> StoreResult<Option<DirectoryCustomer>>;
    fn directory_customer_by_platform_id(
        &mut self,
        shop_id: i64,
        platform_id: &str,
    ) -> StoreResult<Option<DirectoryCustomer>>;
    /// The live addresses of these customers, by customer then id.
    fn addresses_of_customers(
        &mut self,
        shop_id: i64,
        customer_ids: &[i64],
    ) -> StoreResult<Vec<DirectoryAddress>>;
    /// The live labels of these customers, by customer then id.
    fn labels_of_customers(
        &mut self,
        shop_id: i64,
        customer_ids: &[i64],
    ) -> StoreResult<Vec<Label>>;
    fn insert_label(
        &mut self,
        shop_id: i64,
        customer_id: i64,
        name: &str,
        now: Timestamp,
    ) -> StoreResult<Label>;
    /// Marks a live label deleted; false when there is none.
    fn delete_label(
        &mut self,
        shop_id: i64,
        customer_id: i64,
        label_id: i64,
        now: Timestamp,
    ) -> StoreResult<bool>;
}

/// Webhook endpoints, the messages queued for them, and every delivery attempt.
pub trait WebhookRepository {
    fn insert_webhook_endpoint(
        &mut self,
        endpoint: &NewWebhookEndpoint,
    ) -> StoreResult<WebhookEndpoint>;
    /// An endpoint of the shop by the id clients see, unless deleted.
    fn webhook_endpoint(
        &mut self,
        shop_id: i64,
        public_id: &str,
    ) -> StoreResult<Option<WebhookEndpoint>>;
    /// Endpoints by row id, deleted ones included (the dispatcher needs them all).
    fn webhook_endpoints_by_ids(
        &mut self,
        ids: &[i64],
    ) -> StoreResult<Vec<(WebhookEndpoint, bool)>>;
    /// The shop's endpoints of a kind that are not deleted, oldest first.
    fn webhook_endpoints(
        &mut self,
        shop_id: i64,
        kind: WebhookKind,
    ) -> StoreResult<Vec<WebhookEndpoint>>;
    /// The endpoints that get messages of `topic`: not deleted, not disabled.
    fn active_webhook_endpoints(
        &mut self,
        shop_id: i64,
        kind: WebhookKind,
        topic: &str,
    ) -> StoreResult<Vec<WebhookEndpoint>>;
    fn update_webhook_endpoint_url(
        &mut self,
        id: i64,
        url: &str,
        now: Timestamp,
    ) -> StoreResult<()>;
    /// Marks the endpoint deleted and cancels its pending messages.
    fn delete_webhook_endpoint(&mut self, id: i64, now: Timestamp) -> StoreResult<()>;
    /// Records whether the endpoint is failing (and since when), and disables it with a reason.
    fn set_webhook_endpoint_health(
        &mut self,
        id: i64,
        failing_since: Option<Timestamp>,
        disabled: Option<(Timestamp, &str)>,
        now: Timestamp,
    ) -> StoreResult<()>;
    /// Enables a disabled endpoint again, as new.
    fn enable_webhook_endpoint(&mut self, id: i64, now: Timestamp) -> StoreResult<()>;
    /// Stores messages; returns their row ids in order.
    fn insert_webhook_messages(&mut self, messages: &[NewWebhookMessage]) -> StoreResult<Vec<i64>>;
    /// Pending messages due by `now` that no other worker holds, leased until `lease_until`.
    fn claim_webhook_messages(
        &mut self,
        now: Timestamp,
        limit: usize,
        lease_until: Timestamp,
    ) -> StoreResult<Vec<WebhookMessage>>;
    /// Stores attempts and the messages' new states.
    fn record_webhook_attempts(
        &mut self,
        attempts: &[DeliveryAttempt],
        updates: &[MessageUpdate],
    ) -> StoreResult<()>;
    /// Ends the endpoint's pending messages with `status`; how many.
    fn end_pending_webhook_messages(
        &mut self,
        endpoint_id: i64,
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
        endpoint_id: i64,
        limit: usize,
    ) -> StoreResult<Vec<WebhookMessage>>;
    /// A message's attempts, oldest first.
    fn webhook_attempts(&mut self, message_row: i64) -> StoreResult<Vec<DeliveryAttempt>>;
    /// How many endpoints are disabled.
    fn count_disabled_webhook_endpoints(&mut self) -> StoreResult<i64>;
    /// Makes a message pending and due at `now` again (its `webhook-id` stays).
    fn requeue_webhook_message(&mut self, id: i64, now: Timestamp) -> StoreResult<()>;
    /// Makes the endpoint's failed messages created since `since` pending and due again; how many.
    fn requeue_failed_webhook_messages(
        &mut self,
        endpoint_id: i64,
        since: Timestamp,
        now: Timestamp,
    ) -> StoreResult<u64>;
}

/// API overrides of shops (contract §4.1).
pub trait OverrideRepository {
    fn insert_override(&mut self, new: &NewApiOverride) -> StoreResult<ApiOverride>;
    fn override_by_public_id(
        &mut self,
        shop_id: i64,
        public_id: &str,
    ) -> StoreResult<Option<ApiOverride>>;
    /// The shop's overrides, oldest first.
    fn overrides_of_shop(&mut self, shop_id: i64) -> StoreResult<Vec<ApiOverride>>;
    /// The shop's most recently created override of the type.
    fn newest_override(
        &mut self,
        shop_id: i64,
        override_type: OverrideType,
    ) -> StoreResult<Option<ApiOverride>>;
    /// Writes the type, URL, secret and `updated_at` of a stored override.
    fn update_override(&mut self, stored: &ApiOverride) -> StoreResult<()>;
    fn delete_override(&mut self, id: i64) -> StoreResult<()>;
}

/// OAuth apps, staff accounts and authorization codes (contract §2).
pub trait OAuthRepository {
    fn insert_oauth_app(&mut self, new: &NewOAuthApp) -> StoreResult<OAuthApp>;
    fn oauth_app_by_client_id(&mut self, client_id: &str) -> StoreResult<Option<OAuthApp>>;
    fn insert_staff_account(&mut self, new: &NewStaffAccount) -> StoreResult<StaffAccount>;
    fn staff_account(&mut self, shop_id: i64, email: &str) -> StoreResult<Option<StaffAccount>>;
    fn staff_account_by_id(&mut self, id: i64) -> StoreResult<Option<StaffAccount>>;
    fn set_staff_sign_in_state(
        &mut self,
        id: i64,
        failed_sign_ins: i32,
        locked_until: Option<Timestamp>,
        now: Timestamp,
    ) -> StoreResult<()>;
    /// Adds one to the account's failed sign-ins in one statement; the new count, or `None`
    /// when there is no such account.
    fn increment_staff_sign_in_failures(
        &mut self,
        id: i64,
        now: Timestamp,
    ) -> StoreResult<Option<i32>>;
    fn lock_staff_account(&mut self, id: i64, until: Timestamp, now: Timestamp) -> StoreResult<()>;
    fn insert_authorization_code(&mut self, new: &NewAuthorizationCode) -> StoreResult<()>;
    fn authorization_code_by_hash(
        &mut self,
        code_hash: &str,
    ) -> StoreResult<Option<AuthorizationCode>>;
    /// Marks the code used for this token, unless it already was: false then.
    fn redeem_authorization_code(
        &mut self,
        id: i64,
        token_id: i64,
        now: Timestamp,
    ) -> StoreResult<bool>;
}

/// Everything a use case may touch inside one unit of work.
pub trait Repositories:
    ShopRepository
    + TokenRepository
    + SecretRepository
    + DestinationRepository
    + PlatformRepository
    + EventQueueRepository
    + SyncRepository
    + OutboxRepository
    + DirectoryRepository
    + WebhookRepository
    + OverrideRepository
    + OAuthRepository
{
}

impl<T> Repositories for T where
    T: ShopRepository
        + TokenRepository
        + SecretRepository
        + DestinationRepository
        + PlatformRepository
        + EventQueueRepository
        + SyncRepository
        + OutboxRepository
        + DirectoryRepository
        + WebhookRepository
        + OverrideRepository
        + OAuthRepository
{
}

/// A database that runs units of work. `write` runs its closure in one transaction that commits
/// only when the closure returns `Ok`; `read` is for work that changes nothing.
pub trait Database: Clone + Send + Sync + 'static {
    fn read<T>(
        &self,
        work: impl FnOnce(&mut dyn Repositories) -> Result<T, DomainError>,
    ) -> Result<T, DomainError>;

    fn write<T>(
        &self,
        work: impl FnOnce(&mut dyn Repositories) -> Result<T, DomainError>,
    ) -> Result<T, DomainError>;
}

/// The time of day, as a port so rules about time are testable.
pub trait Clock: Send + Sync + 'static {
    fn now(&self) -> Timestamp;
}

#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Timestamp {
        Timestamp::now()
    }
}
