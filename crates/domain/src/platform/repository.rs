//! What the platform feature needs from storage: destinations, platform entities, the inbound
//! event queue, sync runs and the connector outbox.

use crate::access::AccessRepositories;
use crate::kernel::activity::ActivityRepository;
use crate::kernel::error::StoreResult;
use crate::kernel::ids::ShopId;
use crate::kernel::ids::{
    AddressId, CustomerGroupId, CustomerId, DestinationId, EventId, OutboxCallId, SyncId,
};
use crate::kernel::jobs::JobRepository;
use crate::kernel::time::Timestamp;
use crate::platform::customer_groups::NewCustomerGroup;
use crate::platform::destinations::{Destination, DestinationSettings, Topic};
use crate::platform::events::{
    CustomerContact, EntityKind, EntityRecord, EntityWrite, FailedInboundEvent, InboundEvent,
    NewInboundEvent, Outcome, UnreadableEvent,
};
use crate::platform::outbox::{ConnectorCall, OutboxEntry, OutboxStatus};
use crate::platform::sync::{SyncRun, SyncStatus};

crate::feature_database!(
    /// The database as platform sees it.
    PlatformDatabase,
    PlatformRepositories
);

/// Every repository the platform feature's use cases may touch in one unit of work (access's
/// and the kernel's jobs queue and activity counts included: a feature may use them).
pub trait PlatformRepositories:
    AccessRepositories
    + DestinationRepository
    + PlatformRepository
    + EventQueueRepository
    + SyncRepository
    + OutboxRepository
    + JobRepository
    + ActivityRepository
{
}

impl<T> PlatformRepositories for T where
    T: AccessRepositories
        + DestinationRepository
        + PlatformRepository
        + EventQueueRepository
        + SyncRepository
        + OutboxRepository
        + JobRepository
        + ActivityRepository
        + ?Sized
{
}

/// The shops' connector destinations.
pub trait DestinationRepository {
    /// Stores a new live destination of the shop; a unique violation when its topic has a live
    /// one already.
    fn insert_destination(
        &mut self,
        shop_id: ShopId,
        settings: &DestinationSettings,
        now: Timestamp,
    ) -> StoreResult<Destination>;
    /// Replaces the settings of the shop's destination `id`.
    fn update_destination(
        &mut self,
        shop_id: ShopId,
        id: DestinationId,
        settings: &DestinationSettings,
        now: Timestamp,
    ) -> StoreResult<()>;
    /// Marks the shop's destination `id` deleted at `now`.
    fn delete_destination(
        &mut self,
        shop_id: ShopId,
        id: DestinationId,
        now: Timestamp,
    ) -> StoreResult<()>;
    /// A destination of the shop, deleted or not.
    fn destination(
        &mut self,
        shop_id: ShopId,
        id: DestinationId,
    ) -> StoreResult<Option<Destination>>;
    /// The shop's live destination of `topic`, if it has one.
    fn live_destination(
        &mut self,
        shop_id: ShopId,
        topic: Topic,
    ) -> StoreResult<Option<Destination>>;
    /// The shop's live destinations, oldest first.
    fn live_destinations(&mut self, shop_id: ShopId) -> StoreResult<Vec<Destination>>;
}

/// Customers, orders, products and categories received from the platform.
pub trait PlatformRepository {
    /// Whether anything hears of the shop's customers changing their name, email or phone: a
    /// live subscription webhook of topic `customer_updated`, the one listener of
    /// [`CustomerChangedJob`](crate::platform::events::CustomerChangedJob). The applier enqueues
    /// that job only then, so a shop without one pays nothing for its customers' changes.
    fn hears_customer_changes(&mut self, shop_id: ShopId) -> StoreResult<bool>;

    /// The name, email and phone Mercer shows for the shop's live customers of these platform
    /// ids (their rows' columns, which the subscription API reads), each with its platform id;
    /// unknown and deleted ones are left out. The applier tells a change of a customer made
    /// through the subscription API, whose platform document it does not hold yet, against these.
    fn customer_contacts(
        &mut self,
        shop_id: ShopId,
        platform_ids: &[&str],
    ) -> StoreResult<Vec<(String, CustomerContact)>>;

    /// What is held of these entities of one kind; unknown ones are left out.
    fn platform_entities(
        &mut self,
        shop_id: ShopId,
        kind: EntityKind,
        platform_ids: &[&str],
    ) -> StoreResult<Vec<(String, EntityRecord)>>;

    /// Inserts or replaces entities of one kind (and what is pulled out of them: addresses,
    /// variants), each with its whole state: document, platform times, deletion.
    fn put_platform_entities(
        &mut self,
        shop_id: ShopId,
        kind: EntityKind,
        entities: &[EntityWrite],
        now: Timestamp,
    ) -> StoreResult<()>;

    /// The ids of the shop's customers of these platform ids, deleted or not, each with its
    /// platform id; unknown ones are left out.
    fn customer_ids(
        &mut self,
        shop_id: ShopId,
        platform_ids: &[&str],
    ) -> StoreResult<Vec<(String, CustomerId)>>;

    /// Stores the shop's customer groups by platform id (each given once): an unknown one is
    /// added with its name (empty when none is given), a known one takes the name given when it
    /// differs (and its `updated_at` is `now` then), and one given without a name is left as
    /// it is. Returns the id of each, with its platform id.
    fn put_customer_groups(
        &mut self,
        shop_id: ShopId,
        groups: &[NewCustomerGroup],
        now: Timestamp,
    ) -> StoreResult<Vec<(String, CustomerGroupId)>>;

    /// Makes each customer's groups exactly those listed with it (groups of the shop, each
    /// listed once): memberships not listed are removed, those missing added, the others left
    /// alone. Customers not given keep theirs.
    fn set_customer_groups(
        &mut self,
        shop_id: ShopId,
        memberships: &[(CustomerId, Vec<CustomerGroupId>)],
    ) -> StoreResult<()>;

    /// The catalogue kept from Product Saved events: for each of these variant platform ids
    /// that a live product of the shop has, the variant id and that product.
    fn products_of_variants(
        &mut self,
        shop_id: ShopId,
        variant_ids: &[&str],
    ) -> StoreResult<Vec<(String, EntityRecord)>>;

    /// The platform ids of the live variants of the shop's live products whose SKU is `sku`
    /// (each once, in order). Variants without a platform id are left out.
    fn variant_ids_of_sku(&mut self, shop_id: ShopId, sku: &str) -> StoreResult<Vec<String>>;

    /// What is held of one entity, if anything.
    fn platform_entity(
        &mut self,
        shop_id: ShopId,
        kind: EntityKind,
        platform_id: &str,
    ) -> StoreResult<Option<EntityRecord>> {
        Ok(self
            .platform_entities(shop_id, kind, &[platform_id])?
            .into_iter()
            .next()
            .map(|(_, record)| record))
    }

    /// The platform id of a customer of the shop (by Mercer's id): None when it has none yet
    /// (made by the subscription API, not yet answered by the connector) or is unknown.
    fn customer_platform_id(
        &mut self,
        shop_id: ShopId,
        customer_id: CustomerId,
    ) -> StoreResult<Option<String>>;
    /// The platform id of an address of the shop (by Mercer's id), as `customer_platform_id`.
    fn address_platform_id(
        &mut self,
        shop_id: ShopId,
        address_id: AddressId,
    ) -> StoreResult<Option<String>>;
    /// Records the platform id the connector answered for a customer made by Mercer. Leaves a
    /// customer that already has one alone; false then, or when there is no such customer. A
    /// unique violation when another customer of the shop has it (one the platform's event made
    /// first: [`record_customer_platform_id`](crate::platform::outbox::record_customer_platform_id)
    /// merges them instead).
    fn set_customer_platform_id(
        &mut self,
        shop_id: ShopId,
        customer_id: CustomerId,
        platform_id: &str,
        now: Timestamp,
    ) -> StoreResult<bool>;
    /// Records the platform id the connector answered for an address made by Mercer; it keys
    /// the address from then on (its `address_key`), so the platform's next event of the
    /// customer matches it. Leaves an address that already has one alone; false then. A unique
    /// violation when another row of the customer has that key (one the platform's event made
    /// first: [`record_address_platform_id`](crate::platform::outbox::record_address_platform_id)
    /// merges them instead).
    fn set_address_platform_id(
        &mut self,
        shop_id: ShopId,
        address_id: AddressId,
        platform_id: &str,
        now: Timestamp,
    ) -> StoreResult<bool>;
    /// Another row of the customer of the shop's address `address_id` whose key is `key`,
    /// deleted or not; None when there is none (or no such address).
    fn sibling_address_by_key(
        &mut self,
        shop_id: ShopId,
        address_id: AddressId,
        key: &str,
    ) -> StoreResult<Option<AddressId>>;
    /// Makes the shop's address `kept` (made by Mercer, without a platform id yet) the row of
    /// `duplicate`, another row of the same customer: `kept` takes its key, platform id, default
    /// flag, document and deletion (`updated_at` is `now`), and keeps its id and `created_at`;
    /// subscriptions whose billing or shipping address is `duplicate` get `kept` instead; the
    /// duplicate is marked deleted (when it is not yet), without a platform id, under
    /// [`AddressKey::merged`](crate::platform::addresses::AddressKey::merged) of its id. False,
    /// and nothing changed, when `kept` has a platform id or either row is not there.
    fn merge_address_rows(
        &mut self,
        shop_id: ShopId,
        kept: AddressId,
        duplicate: AddressId,
        now: Timestamp,
    ) -> StoreResult<bool>;
    /// Makes the shop's customer `kept` (made by Mercer, without a platform id yet) the row of
    /// `duplicate`, another customer of the shop: `kept` takes its platform id and what the
    /// platform's events write (email, names, phone, platform times, document, deletion;
    /// `updated_at` is `now`), and keeps its id, notes and `created_at`; the duplicate's
    /// addresses, labels, customer groups and subscriptions become `kept`'s; the duplicate is
    /// marked deleted (when it is not yet), without a platform id. False, and nothing changed,
    /// when `kept` has a platform id or either customer is not there.
    fn merge_customer_rows(
        &mut self,
        shop_id: ShopId,
        kept: CustomerId,
        duplicate: CustomerId,
        now: Timestamp,
    ) -> StoreResult<bool>;
}

/// The durable queue of events received and not yet applied.
pub trait EventQueueRepository {
    /// Queues checked events, in the order given (the order they are applied in).
    fn insert_inbound_events(&mut self, events: &[NewInboundEvent]) -> StoreResult<()>;
    /// The oldest unapplied events due by `now` (an event waiting to be retried is due at its
    /// `retry_at`), of these shops (every shop's when None), in order of arrival; a row that
    /// does not read back comes as unreadable.
    fn pending_inbound_events(
        &mut self,
        shops: Option<&[ShopId]>,
        limit: usize,
        now: Timestamp,
    ) -> StoreResult<Vec<Result<InboundEvent, UnreadableEvent>>>;
    /// The shops of the oldest `limit` events due by `now`, each once, in order of its first
    /// event: where an applier should look first.
    fn pending_event_shops(&mut self, limit: usize, now: Timestamp) -> StoreResult<Vec<ShopId>>;
    /// Records that these events were applied, with what outcome; they are pending no more
    /// (the store may forget them).
    fn mark_inbound_events(
        &mut self,
        outcomes: &[(EventId, Outcome)],
        at: Timestamp,
    ) -> StoreResult<()>;
    /// How many events wait to be applied.
    fn count_pending_inbound_events(&mut self) -> StoreResult<i64>;
    /// How many of the shop's events wait to be applied.
    fn count_shop_pending_events(&mut self, shop_id: ShopId) -> StoreResult<i64>;
    /// Whether any event waits to be applied (cheaper than counting them).
    fn has_pending_inbound_events(&mut self) -> StoreResult<bool>;
    /// Takes the right to apply the events of one partition of the queue
    /// ([`event_partition`](crate::platform::events::event_partition)) until the transaction
    /// ends; false when another process's transaction holds it. A partition's events are
    /// applied by one applier at a time, which keeps each shop's order. A store that one
    /// process alone applies from (SQLite, memory) answers true.
    fn lock_event_partition(&mut self, partition: i64) -> StoreResult<bool>;
    /// Records a failed attempt at applying a queued event; it is due again at `retry_at`.
    fn postpone_inbound_event(
        &mut self,
        id: EventId,
        attempts: i64,
        error: &str,
        retry_at: Timestamp,
    ) -> StoreResult<()>;
    /// Moves a queued event that failed its last attempt out of the queue, with its error.
    fn set_aside_inbound_event(
        &mut self,
        id: EventId,
        attempts: i64,
        error: &str,
        at: Timestamp,
    ) -> StoreResult<()>;
    /// Events set aside, oldest first: a shop's (the console), or every shop's (None).
    fn failed_inbound_events(
        &mut self,
        shop_id: Option<ShopId>,
        limit: usize,
    ) -> StoreResult<Vec<FailedInboundEvent>>;
    /// How many events are set aside.
    fn count_failed_inbound_events(&mut self) -> StoreResult<i64>;
    /// Puts events set aside back into the queue under their own ids (every one when `ids` is
    /// None), with their attempts reset; only a shop's when `shop_id` names one. Returns the ids
    /// put back.
    fn requeue_failed_inbound_events(
        &mut self,
        shop_id: Option<ShopId>,
        ids: Option<&[EventId]>,
    ) -> StoreResult<Vec<EventId>>;
}

/// Sync runs: a shop's pulls of a topic's lists from its connector.
pub trait SyncRepository {
    /// The shop's running sync of `topic`, if there is one.
    fn running_sync(&mut self, shop_id: ShopId, topic: Topic) -> StoreResult<Option<SyncRun>>;
    /// Stores a new running sync of `topic`, started at `now`, with no page pulled yet.
    fn insert_sync_run(
        &mut self,
        shop_id: ShopId,
        topic: Topic,
        now: Timestamp,
    ) -> StoreResult<SyncRun>;
    /// Counts a page pulled, keeps the cursor of the next one (None after the last), and
    /// reports the run alive; false (nothing changed) when the run is no longer running.
    fn record_sync_page(
        &mut self,
        id: SyncId,
        items: i64,
        skipped: i64,
        next_cursor: Option<&str>,
        now: Timestamp,
    ) -> StoreResult<bool>;
    /// Ends the run with `status` and, when it failed, its error.
    fn finish_sync(
        &mut self,
        id: SyncId,
        status: SyncStatus,
        error: Option<&str>,
        now: Timestamp,
    ) -> StoreResult<()>;
    /// A sync run by its id, if there is one.
    fn sync_run(&mut self, id: SyncId) -> StoreResult<Option<SyncRun>>;
    /// The shop's latest sync runs of every topic, newest first.
    fn recent_sync_runs(&mut self, shop_id: ShopId, limit: usize) -> StoreResult<Vec<SyncRun>>;
}

/// Calls to make on connectors, kept until made.
pub trait OutboxRepository {
    /// Records a pending call for the shop's connector, due at `now`; returns its id.
    fn insert_outbox_call(
        &mut self,
        shop_id: ShopId,
        call: &ConnectorCall,
        now: Timestamp,
    ) -> StoreResult<OutboxCallId>;
    /// The shop's pending calls due by `now` that no other worker holds, oldest due first,
    /// leased until `lease_until`.
    fn claim_outbox_calls(
        &mut self,
        shop_id: ShopId,
        now: Timestamp,
        limit: usize,
        lease_until: Timestamp,
    ) -> StoreResult<Vec<OutboxEntry>>;
    /// Records a failed attempt at a call: it is pending again, due at `next_attempt_at`.
    fn retry_outbox_call(
        &mut self,
        id: OutboxCallId,
        attempts: i64,
        next_attempt_at: Timestamp,
        error: &str,
    ) -> StoreResult<()>;
    /// Ends a call with `status` (delivered, failed or cancelled), its attempts and last error.
    fn finish_outbox_call(
        &mut self,
        id: OutboxCallId,
        status: OutboxStatus,
        attempts: i64,
        error: Option<&str>,
        now: Timestamp,
    ) -> StoreResult<()>;
    /// The shop's calls, oldest first.
    fn outbox_entries(&mut self, shop_id: ShopId) -> StoreResult<Vec<OutboxEntry>>;
    /// The shop's latest calls, newest first.
    fn recent_outbox_entries(
        &mut self,
        shop_id: ShopId,
        limit: usize,
    ) -> StoreResult<Vec<OutboxEntry>>;
    /// When the shop's next pending call is due (or its lease ends); None when none is pending.
    fn next_outbox_attempt(&mut self, shop_id: ShopId) -> StoreResult<Option<Timestamp>>;
    /// The shops with pending calls.
    fn shops_with_pending_outbox_calls(&mut self) -> StoreResult<Vec<ShopId>>;
}
