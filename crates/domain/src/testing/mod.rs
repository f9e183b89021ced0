//! An in-memory implementation of the storage ports, for testing use cases without a database.
//! A unit of work runs on a copy of the state that replaces the state only when the work
//! succeeds, which is what a transaction does. One file per feature, as in the domain.

mod access;
mod analytics;
mod box_builder;
mod checkout;
mod connector;
mod directory;
mod kernel;
mod overrides;
mod platform;
mod portal;
mod privacy;
mod subscriptions;
mod webhooks;

pub use connector::{MemoryPlatform, PlatformState};

use crate::kernel::ids::ShopId;
use std::sync::{Arc, Mutex, MutexGuard};

use crate::access::credentials::ApiToken;
use crate::access::oauth::{AuthorizationCode, OAuthApp, StaffAccount};
use crate::access::secrets::SharedSecret;
use crate::access::shop::Shop;
use crate::directory::Label;
use crate::kernel::error::DomainError;
use crate::kernel::time::Timestamp;
use crate::overrides::ApiOverride;
use crate::platform::destinations::Destination;
use crate::platform::events::{
    EntityDocument, EntityKind, EntityRecord, FailedInboundEvent, InboundEvent, NewInboundEvent,
    Outcome,
};
use crate::platform::outbox::OutboxEntry;
use crate::platform::sync::SyncRun;
use crate::ports::{Database, Repositories};
use crate::subscriptions::repository::{StoredSubscription, SubscriptionOrder};
use crate::subscriptions::resources::StatusLog;
use crate::webhooks::{DeliveryAttempt, WebhookEndpoint, WebhookMessage};

/// A platform entity as the memory store keeps it.
#[derive(Debug, Clone)]
pub struct MemoryEntity {
    /// The shop the entity belongs to.
    pub shop_id: ShopId,
    /// Customer, order, product or category.
    pub kind: EntityKind,
    /// None for a customer made by the subscription API until the connector gives it one.
    pub platform_id: Option<String>,
    /// What Mercer holds of the entity: its id (ids from 1), platform times and JSON text.
    pub record: EntityRecord,
    /// The entity's document as read; absent for an entity known only from its deletion.
    pub document: Option<EntityDocument>,
    /// A customer's own columns (the directory reads these, not the document).
    pub columns: CustomerColumns,
    /// When Mercer first stored the entity.
    pub created_at: Timestamp,
    /// When Mercer last wrote the entity.
    pub updated_at: Timestamp,
}

/// A customer's columns as the store keeps them: the texts NOT NULL, empty when absent, written
/// from the platform's document by its events and from the subscription API's fields; `notes`
/// only by the subscription API.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CustomerColumns {
    /// The customer's email address; empty when absent.
    pub email: String,
    /// The customer's first name; empty when absent.
    pub first_name: String,
    /// The customer's last name; empty when absent.
    pub last_name: String,
    /// The customer's phone number; empty when absent.
    pub phone: String,
    /// Notes on the customer, written only by the subscription API.
    pub notes: Option<String>,
}

/// A label with the shop it belongs to.
#[derive(Debug, Clone)]
pub struct MemoryLabel {
    /// The shop the label belongs to.
    pub shop_id: ShopId,
    /// The label as the directory shows it.
    pub label: Label,
}

/// A customer group of a shop as the memory store keeps it.
#[derive(Debug, Clone)]
pub struct MemoryCustomerGroup {
    /// The group's id (ids from 1).
    pub id: crate::kernel::ids::CustomerGroupId,
    /// The shop the group belongs to.
    pub shop_id: ShopId,
    /// The group's platform id, unique in its shop.
    pub platform_id: String,
    /// The group's name.
    pub name: String,
    /// When the group was first stored.
    pub created_at: Timestamp,
    /// When the group last changed.
    pub updated_at: Timestamp,
}

/// A customer's address row as the memory store keeps it.
#[derive(Debug, Clone)]
pub struct MemoryAddress {
    /// The row's id (ids from 1).
    pub id: i64,
    /// The shop the customer belongs to.
    pub shop_id: ShopId,
    /// The customer's entity id.
    pub customer_id: i64,
    /// The address's columns.
    pub row: crate::platform::addresses::AddressRow,
    /// When the row was first stored.
    pub created_at: Timestamp,
    /// When the row last changed.
    pub updated_at: Timestamp,
    /// When the address left the customer's document; `None` while it is there.
    pub deleted_at: Option<Timestamp>,
}

/// Everything the memory store holds, as plain collections; a unit of work changes a copy.
/// Ids are given in order from 1, as the collections grow.
#[derive(Debug, Clone, Default)]
pub struct MemoryState {
    /// Shops by id (ids from 1).
    pub shops: Vec<Shop>,
    /// API tokens, each with the hash of the token.
    pub tokens: Vec<(ApiToken, String)>,
    /// Shops' shared secrets.
    pub secrets: Vec<SharedSecret>,
    /// Platform destinations, deleted ones included (their `deleted_at` set).
    pub destinations: Vec<Destination>,
    /// Platform entities of every kind and shop (entity ids from 1).
    pub entities: Vec<MemoryEntity>,
    /// Customers' address rows, kept by the domain's address rules as the store keeps them.
    pub addresses: Vec<MemoryAddress>,
    /// Events with their outcome once applied.
    pub events: Vec<(InboundEvent, Option<Outcome>)>,
    /// When events that failed to apply are due again, by event id.
    pub event_retry_at: std::collections::HashMap<i64, Timestamp>,
    /// Events set aside after their last attempt, with the event as it was queued.
    pub failed_events: Vec<(FailedInboundEvent, NewInboundEvent)>,
    /// Sync runs by id (ids from 1).
    pub syncs: Vec<SyncRun>,
    /// Outbox entries: calls to make on the connector.
    pub outbox: Vec<OutboxEntry>,
    /// The directory's labels, each with its shop.
    pub labels: Vec<MemoryLabel>,
    /// When customers' personal data was erased, by customer id (customers never erased absent).
    pub customer_pii_redacted_at: std::collections::BTreeMap<i64, Timestamp>,
    /// Customer groups of every shop (ids from 1).
    pub customer_groups: Vec<MemoryCustomerGroup>,
    /// Which customers belong to which groups: (customer id, group id), each once.
    pub customer_group_members: std::collections::BTreeSet<(
        crate::kernel::ids::CustomerId,
        crate::kernel::ids::CustomerGroupId,
    )>,
    /// Endpoints, with whether they are deleted.
    pub webhook_endpoints: Vec<(WebhookEndpoint, bool)>,
    /// Webhook messages, one per message and endpoint.
    pub webhook_messages: Vec<WebhookMessage>,
    /// What messages are about, by message row id (those enqueued with a subject).
    pub message_subjects: std::collections::HashMap<i64, String>,
    /// Every recorded delivery attempt of a webhook message.
    pub webhook_attempts: Vec<DeliveryAttempt>,
    /// Shops' API overrides.
    pub overrides: Vec<ApiOverride>,
    /// OAuth apps by id (ids from 1).
    pub oauth_apps: Vec<OAuthApp>,
    /// Staff accounts, who sign in during the OAuth flow.
    pub staff: Vec<StaffAccount>,
    /// Failed sign-ins by key: the count, the lock, when last touched.
    pub sign_in_failures: std::collections::HashMap<
        crate::access::oauth::SignInKey,
        (i32, Option<Timestamp>, Timestamp),
    >,
    /// Codes with their hashes.
    pub codes: Vec<(AuthorizationCode, String)>,
    /// Console sessions, each with its token hash (ids from 1, kept after deletion as None).
    pub staff_sessions: Vec<Option<(crate::access::console::StaffSession, String)>>,
    /// The console's audit log (ids from 1).
    pub audit_log: Vec<crate::access::console::AuditEntry>,
    /// The jobs queue.
    pub jobs: Vec<MemoryJob>,
    /// Subscriptions by id (ids from 1), each with its line items and latest status log.
    pub subscriptions: Vec<StoredSubscription>,
    /// How many line items were ever stored: the next one's id is one more.
    pub line_item_count: i64,
    /// Every status log entry, with its shop.
    pub status_logs: Vec<(ShopId, StatusLog)>,
    /// The scheduler's order attempts, by id (ids from 1).
    pub subscription_orders: Vec<SubscriptionOrder>,
    /// When `subscription_expiring_payment` was emitted for a subscription's payment method.
    pub expiring_payment_notified:
        std::collections::BTreeMap<crate::kernel::ids::SubscriptionId, Timestamp>,
    /// Checkouts by id (ids from 1).
    pub checkout_orders: Vec<crate::checkout::repository::CheckoutOrder>,
    /// Shops' cancellation reasons, in their order.
    pub cancellation_reasons: std::collections::BTreeMap<
        ShopId,
        Vec<crate::subscriptions::cancellation::CancellationReason>,
    >,
    /// Shops' dunning policies, for the shops that set one.
    pub dunning_policies:
        std::collections::BTreeMap<ShopId, crate::subscriptions::dunning::DunningPolicy>,
    /// Subscription imports with their shop, by id (ids from 1).
    pub subscription_imports: Vec<(ShopId, crate::subscriptions::imports::ImportProgress)>,
    /// Subscription groups with their shop, and how many groups and billing rules were ever
    /// stored (the next ids).
    pub subscription_groups: Vec<(ShopId, crate::subscriptions::groups::StoredGroup)>,
    /// How many subscription groups were ever stored: the next one's id is one more.
    pub group_count: i64,
    /// How many billing rules were ever stored: the next one's id is one more.
    pub billing_rule_count: i64,
    /// The box builder's resources with their shop (time slots without their products: the
    /// options below give them), and how many of each were ever stored (the next ids).
    pub boxes: Vec<(ShopId, crate::box_builder::resources::SubscriptionBox)>,
    /// Box products, each with its shop.
    pub box_products: Vec<(ShopId, crate::box_builder::resources::BoxProduct)>,
    /// Box sizes, each with its shop.
    pub box_sizes: Vec<(ShopId, crate::box_builder::resources::BoxSize)>,
    /// Time slots, each with its shop (their products are in `time_slot_options`).
    pub time_slots: Vec<(ShopId, crate::box_builder::resources::TimeSlot)>,
    /// (time slot, box product), in the order they were added.
    pub time_slot_options: Vec<(i64, i64)>,
    /// Customers' box selections, each with its shop.
    pub box_selections: Vec<(ShopId, crate::box_builder::resources::StoredSelection)>,
    /// How many boxes, box products, box sizes, time slots and selections (in this order) were
    /// ever stored: the next id of each is one more.
    pub box_counts: [i64; 5],
    /// Shops' activity counts by (shop, bucket start, activity).
    pub activity: std::collections::BTreeMap<(ShopId, i64, crate::kernel::activity::Activity), i64>,
    /// Shops' subscription analytics counters by (shop, day number, metric).
    pub analytics:
        std::collections::BTreeMap<(ShopId, i64, crate::subscriptions::analytics::Metric), i64>,
    /// Whether the analytics counters wait for a backfill.
    pub analytics_backfill_pending: bool,
    /// Subscriber portal sessions, each with its token hash (ended ones removed).
    pub portal_sessions: Vec<(crate::portal::sessions::PortalSession, String)>,
    /// How many portal sessions were ever stored: the next one's id is one more.
    pub portal_session_count: i64,
    /// Shops' branding of their portal, by shop (none set for a shop not listed).
    pub portal_branding:
        std::collections::BTreeMap<ShopId, crate::portal::branding::PortalBranding>,
}

/// A job as the memory store keeps it: with when it runs again if enqueued while running.
#[derive(Debug, Clone)]
pub struct MemoryJob {
    /// The job as the store keeps it.
    pub job: crate::kernel::jobs::Job,
    /// When it runs again after this run, because it was enqueued again while running.
    pub again_at: Option<Timestamp>,
}

/// The in-memory [`Database`]: one [`MemoryState`] shared by its clones. A unit of work runs on
/// a copy that replaces the state only when the work returns `Ok`.
#[derive(Debug, Clone, Default)]
pub struct MemoryDatabase {
    state: Arc<Mutex<MemoryState>>,
}

impl MemoryDatabase {
    fn lock(&self) -> MutexGuard<'_, MemoryState> {
        // A test that panicked while holding the lock leaves usable state behind.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Lets a test reach into the state directly.
    pub fn with_state<T>(&self, f: impl FnOnce(&mut MemoryState) -> T) -> T {
        f(&mut self.lock())
    }
}

impl Database for MemoryDatabase {
    fn read<T>(
        &self,
        work: impl FnOnce(&mut dyn Repositories) -> Result<T, DomainError>,
    ) -> Result<T, DomainError> {
        let mut copy = self.lock().clone();
        work(&mut copy)
    }

    fn write<T>(
        &self,
        work: impl FnOnce(&mut dyn Repositories) -> Result<T, DomainError>,
    ) -> Result<T, DomainError> {
        let mut state = self.lock();
        let mut copy = state.clone();
        let result = work(&mut copy)?;
        *state = copy;
        Ok(result)
    }
}
