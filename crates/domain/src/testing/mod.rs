//! An in-memory implementation of the storage ports, for testing use cases without a database.
//! A unit of work runs on a copy of the state that replaces the state only when the work
//! succeeds, which is what a transaction does. One file per feature, as in the domain.

mod access;
mod box_builder;
mod checkout;
mod connector;
mod directory;
mod kernel;
mod overrides;
mod platform;
mod subscriptions;
mod webhooks;

pub use connector::{MemoryPlatform, PlatformState};

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
    pub shop_id: i64,
    pub kind: EntityKind,
    /// None for a customer made by the subscription API until the connector gives it one.
    pub platform_id: Option<String>,
    pub record: EntityRecord,
    pub document: Option<EntityDocument>,
    /// A customer's own columns (the directory reads these, not the document).
    pub columns: CustomerColumns,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

/// A customer's columns as the store keeps them: the texts NOT NULL, empty when absent, written
/// from the platform's document by its events and from the subscription API's fields; `notes`
/// only by the subscription API.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CustomerColumns {
    pub email: String,
    pub first_name: String,
    pub last_name: String,
    pub phone: String,
    pub notes: Option<String>,
}

/// A label with the shop it belongs to.
#[derive(Debug, Clone)]
pub struct MemoryLabel {
    pub shop_id: i64,
    pub label: Label,
}

/// A customer's address row as the memory store keeps it.
#[derive(Debug, Clone)]
pub struct MemoryAddress {
    pub id: i64,
    pub shop_id: i64,
    /// The customer's entity id.
    pub customer_id: i64,
    pub row: crate::platform::addresses::AddressRow,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    pub deleted_at: Option<Timestamp>,
}

#[derive(Debug, Clone, Default)]
pub struct MemoryState {
    pub shops: Vec<Shop>,
    pub tokens: Vec<(ApiToken, String)>,
    pub secrets: Vec<SharedSecret>,
    pub destinations: Vec<Destination>,
    pub entities: Vec<MemoryEntity>,
    /// Customers' address rows, kept by the domain's address rules as the store keeps them.
    pub addresses: Vec<MemoryAddress>,
    /// Events with their outcome once applied.
    pub events: Vec<(InboundEvent, Option<Outcome>)>,
    /// When events that failed to apply are due again, by event id.
    pub event_retry_at: std::collections::HashMap<i64, Timestamp>,
    /// Events set aside after their last attempt, with the event as it was queued.
    pub failed_events: Vec<(FailedInboundEvent, NewInboundEvent)>,
    pub syncs: Vec<SyncRun>,
    pub outbox: Vec<OutboxEntry>,
    pub labels: Vec<MemoryLabel>,
    /// Endpoints, with whether they are deleted.
    pub webhook_endpoints: Vec<(WebhookEndpoint, bool)>,
    pub webhook_messages: Vec<WebhookMessage>,
    pub webhook_attempts: Vec<DeliveryAttempt>,
    pub overrides: Vec<ApiOverride>,
    pub oauth_apps: Vec<OAuthApp>,
    pub staff: Vec<StaffAccount>,
    /// Failed sign-ins by key: the count, the lock, when last touched.
    pub sign_in_failures: std::collections::HashMap<
        crate::access::oauth::SignInKey,
        (i32, Option<Timestamp>, Timestamp),
    >,
    /// Codes with their hashes.
    pub codes: Vec<(AuthorizationCode, String)>,
    pub jobs: Vec<MemoryJob>,
    /// Subscriptions by id (ids from 1), each with its line items and latest status log.
    pub subscriptions: Vec<StoredSubscription>,
    /// How many line items were ever stored: the next one's id is one more.
    pub line_item_count: i64,
    /// Every status log entry, with its shop.
    pub status_logs: Vec<(i64, StatusLog)>,
    /// The scheduler's order attempts, by id (ids from 1).
    pub subscription_orders: Vec<SubscriptionOrder>,
    /// When `subscription_expiring_payment` was emitted for a subscription's payment method.
    pub expiring_payment_notified: std::collections::BTreeMap<i64, Timestamp>,
    /// Checkouts by id (ids from 1).
    pub checkout_orders: Vec<crate::checkout::repository::CheckoutOrder>,
    /// Subscription groups with their shop, and how many groups and billing rules were ever
    /// stored (the next ids).
    pub subscription_groups: Vec<(i64, crate::subscriptions::groups::StoredGroup)>,
    pub group_count: i64,
    pub billing_rule_count: i64,
    /// The box builder's resources with their shop (time slots without their products: the
    /// options below give them), and how many of each were ever stored (the next ids).
    pub boxes: Vec<(i64, crate::box_builder::resources::SubscriptionBox)>,
    pub box_products: Vec<(i64, crate::box_builder::resources::BoxProduct)>,
    pub box_sizes: Vec<(i64, crate::box_builder::resources::BoxSize)>,
    pub time_slots: Vec<(i64, crate::box_builder::resources::TimeSlot)>,
    /// (time slot, box product), in the order they were added.
    pub time_slot_options: Vec<(i64, i64)>,
    pub box_selections: Vec<(i64, crate::box_builder::resources::StoredSelection)>,
    pub box_counts: [i64; 5],
}

/// A job as the memory store keeps it: with when it runs again if enqueued while running.
#[derive(Debug, Clone)]
pub struct MemoryJob {
    pub job: crate::kernel::jobs::Job,
    pub again_at: Option<Timestamp>,
}

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
