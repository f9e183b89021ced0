//! An in-memory implementation of the storage ports, for testing use cases without a database.
//! A unit of work runs on a copy of the state that replaces the state only when the work
//! succeeds, which is what a transaction does.

use std::sync::{Arc, Mutex, MutexGuard};

use crate::credentials::{ApiToken, NewApiToken};
use crate::destinations::{Destination, DestinationSettings, Topic};
use crate::directory::{DirectoryAddress, DirectoryCustomer, DirectoryPage, DirectoryQuery, Label};
use crate::error::DomainError;
use crate::events::{
    EntityDocument, EntityKind, EntityRecord, EntityWrite, FailedInboundEvent, InboundEvent,
    NewInboundEvent, Outcome, UnreadableEvent,
};
use crate::oauth::{
    AuthorizationCode, NewAuthorizationCode, NewOAuthApp, NewStaffAccount, OAuthApp, StaffAccount,
};
use crate::outbox::{ConnectorCall, OutboxEntry, OutboxStatus};
use crate::overrides::{ApiOverride, NewApiOverride, OverrideType};
use crate::ports::{
    Database, DestinationRepository, DirectoryRepository, EventQueueRepository, OAuthRepository,
    OutboxRepository, OverrideRepository, PlatformRepository, Repositories, SecretRepository,
    ShopRepository, StoreResult, SyncRepository, TokenRepository, WebhookRepository,
};
use crate::secrets::{SecretKind, SharedSecret};
use crate::shop::{NewShop, Shop, ShopIdentifier};
use crate::sync::{SyncRun, SyncStatus};
use crate::time::Timestamp;
use crate::webhooks::{
    DeliveryAttempt, MessageStatus, MessageUpdate, NewWebhookEndpoint, NewWebhookMessage,
    WebhookEndpoint, WebhookKind, WebhookMessage,
};

/// A platform entity as the memory store keeps it.
#[derive(Debug, Clone)]
pub struct MemoryEntity {
    pub shop_id: i64,
    pub kind: EntityKind,
    pub platform_id: String,
    pub record: EntityRecord,
    pub document: Option<EntityDocument>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

#[derive(Debug, Clone, Default)]
pub struct MemoryState {
    pub shops: Vec<Shop>,
    pub tokens: Vec<(ApiToken, String)>,
    pub secrets: Vec<SharedSecret>,
    pub destinations: Vec<Destination>,
    pub entities: Vec<MemoryEntity>,
    /// Events with their outcome once applied.
    pub events: Vec<(InboundEvent, Option<Outcome>)>,
    /// When events that failed to apply are due again, by event id.
    pub event_retry_at: std::collections::HashMap<i64, Timestamp>,
    /// Events set aside after their last attempt, with the event as it was queued.
    pub failed_events: Vec<(FailedInboundEvent, NewInboundEvent)>,
    pub syncs: Vec<SyncRun>,
    pub outbox: Vec<OutboxEntry>,
    pub labels: Vec<Label>,
    /// Endpoints, with whether they are deleted.
    pub webhook_endpoints: Vec<(WebhookEndpoint, bool)>,
    pub webhook_messages: Vec<WebhookMessage>,
    pub webhook_attempts: Vec<DeliveryAttempt>,
    pub overrides: Vec<ApiOverride>,
    pub oauth_apps: Vec<OAuthApp>,
    pub staff: Vec<StaffAccount>,
    /// Codes with their hashes.
    pub codes: Vec<(AuthorizationCode, String)>,
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

impl ShopRepository for MemoryState {
    fn insert_shop(&mut self, new: &NewShop) -> StoreResult<Shop> {
        let shop = Shop {
            id: self.shops.len() as i64 + 1,
            identifier: new.identifier.clone(),
            shop_domain: new.shop_domain.clone(),
            custom_domain: new.custom_domain.clone(),
            platform_type: new.platform_type.clone(),
            timezone: new.timezone.clone(),
            currency: new.currency.clone(),
            currency_format: new.currency_format.clone(),
            shop_owner: new.shop_owner.clone(),
            admin_email: new.admin_email.clone(),
            pii_redacted_at: None,
            created_at: new.created_at,
            updated_at: new.created_at,
            deleted_at: None,
        };
        self.shops.push(shop.clone());
        Ok(shop)
    }

    fn shop_by_identifier(&mut self, identifier: &ShopIdentifier) -> StoreResult<Option<Shop>> {
        Ok(self
            .shops
            .iter()
            .find(|s| &s.identifier == identifier)
            .cloned())
    }

    fn shop_by_domain(&mut self, domain: &str) -> StoreResult<Option<Shop>> {
        Ok(self.shops.iter().find(|s| s.shop_domain == domain).cloned())
    }

    fn shop_by_id(&mut self, id: i64) -> StoreResult<Option<Shop>> {
        Ok(self.shops.iter().find(|s| s.id == id).cloned())
    }

    fn count_shops(&mut self) -> StoreResult<i64> {
        Ok(self.shops.len() as i64)
    }

    fn list_shops(&mut self) -> StoreResult<Vec<Shop>> {
        Ok(self.shops.clone())
    }
}

impl TokenRepository for MemoryState {
    fn insert_token(&mut self, new: &NewApiToken) -> StoreResult<ApiToken> {
        let token = ApiToken {
            id: self.tokens.len() as i64 + 1,
            shop_id: new.shop_id,
            name: new.name.clone(),
            token_prefix: new.token_prefix.clone(),
            scopes: new.scopes.clone(),
            source: new.source,
            created_at: new.created_at,
            revoked_at: None,
        };
        self.tokens.push((token.clone(), new.token_hash.clone()));
        Ok(token)
    }

    fn active_token_by_hash(&mut self, token_hash: &str) -> StoreResult<Option<ApiToken>> {
        Ok(self
            .tokens
            .iter()
            .find(|(token, hash)| hash == token_hash && token.revoked_at.is_none())
            .map(|(token, _)| token.clone()))
    }

    fn tokens_of_shop(&mut self, shop_id: i64) -> StoreResult<Vec<ApiToken>> {
        Ok(self
            .tokens
            .iter()
            .filter(|(token, _)| token.shop_id == shop_id)
            .map(|(token, _)| token.clone())
            .collect())
    }

    fn revoke_token(&mut self, shop_id: i64, token_id: i64, at: Timestamp) -> StoreResult<bool> {
        let live = self.tokens.iter_mut().find(|(token, _)| {
            token.id == token_id && token.shop_id == shop_id && token.revoked_at.is_none()
        });
        Ok(match live {
            Some((token, _)) => {
                token.revoked_at = Some(at);
                true
            }
            None => false,
        })
    }
}

impl SecretRepository for MemoryState {
    fn shared_secret(
        &mut self,
        shop_id: i64,
        kind: SecretKind,
    ) -> StoreResult<Option<SharedSecret>> {
        Ok(self
            .secrets
            .iter()
            .find(|s| s.shop_id == shop_id && s.kind == kind)
            .cloned())
    }

    fn save_shared_secret(&mut self, secret: &SharedSecret) -> StoreResult<()> {
        self.secrets
            .retain(|s| !(s.shop_id == secret.shop_id && s.kind == secret.kind));
        self.secrets.push(secret.clone());
        Ok(())
    }
}

impl DestinationRepository for MemoryState {
    fn insert_destination(
        &mut self,
        shop_id: i64,
        settings: &DestinationSettings,
        now: Timestamp,
    ) -> StoreResult<Destination> {
        let destination = Destination {
            id: self.destinations.len() as i64 + 1,
            shop_id,
            topic: settings.topic,
            url: settings.url.clone(),
            version: settings.version.clone(),
            timeout_ms: settings.timeout_ms,
            created_at: now,
            updated_at: now,
            deleted_at: None,
        };
        self.destinations.push(destination.clone());
        Ok(destination)
    }

    fn update_destination(
        &mut self,
        shop_id: i64,
        id: i64,
        settings: &DestinationSettings,
        now: Timestamp,
    ) -> StoreResult<()> {
        if let Some(d) = self
            .destinations
            .iter_mut()
            .find(|d| d.id == id && d.shop_id == shop_id)
        {
            d.topic = settings.topic;
            d.url = settings.url.clone();
            d.version = settings.version.clone();
            d.timeout_ms = settings.timeout_ms;
            d.updated_at = now;
        }
        Ok(())
    }

    fn delete_destination(&mut self, shop_id: i64, id: i64, now: Timestamp) -> StoreResult<()> {
        if let Some(d) = self
            .destinations
            .iter_mut()
            .find(|d| d.id == id && d.shop_id == shop_id)
        {
            d.deleted_at = Some(now);
            d.updated_at = now;
        }
        Ok(())
    }

    fn destination(&mut self, shop_id: i64, id: i64) -> StoreResult<Option<Destination>> {
        Ok(self
            .destinations
            .iter()
            .find(|d| d.id == id && d.shop_id == shop_id)
            .cloned())
    }

    fn live_destination(&mut self, shop_id: i64, topic: Topic) -> StoreResult<Option<Destination>> {
        Ok(self
            .destinations
            .iter()
            .find(|d| d.shop_id == shop_id && d.topic == topic && d.deleted_at.is_none())
            .cloned())
    }

    fn live_destinations(&mut self, shop_id: i64) -> StoreResult<Vec<Destination>> {
        Ok(self
            .destinations
            .iter()
            .filter(|d| d.shop_id == shop_id && d.deleted_at.is_none())
            .cloned()
            .collect())
    }
}

impl MemoryState {
    fn entity_mut(
        &mut self,
        shop_id: i64,
        kind: EntityKind,
        platform_id: &str,
    ) -> Option<&mut MemoryEntity> {
        self.entities
            .iter_mut()
            .find(|e| e.shop_id == shop_id && e.kind == kind && e.platform_id == platform_id)
    }

    fn directory_entry(entity: &MemoryEntity) -> DirectoryCustomer {
        let customer = match &entity.document {
            Some(EntityDocument::Customer(customer)) => Some(&**customer),
            _ => None,
        };
        let field = |pick: fn(&crate::platform::Customer) -> &Option<String>| {
            customer.and_then(|c| pick(c).clone())
        };
        DirectoryCustomer {
            id: entity.record.id,
            platform_id: Some(entity.platform_id.clone()),
            email: field(|c| &c.email),
            first_name: field(|c| &c.first_name),
            last_name: field(|c| &c.last_name),
            phone: field(|c| &c.phone),
            platform_created_at: customer.and_then(|c| c.platform_created_at),
            created_at: entity.created_at,
            updated_at: entity.updated_at,
            deleted_at: entity.record.platform_deleted_at.map(|_| entity.updated_at),
        }
    }
}

impl PlatformRepository for MemoryState {
    fn platform_entities(
        &mut self,
        shop_id: i64,
        kind: EntityKind,
        platform_ids: &[&str],
    ) -> StoreResult<Vec<(String, EntityRecord)>> {
        Ok(self
            .entities
            .iter()
            .filter(|e| {
                e.shop_id == shop_id
                    && e.kind == kind
                    && platform_ids.contains(&e.platform_id.as_str())
            })
            .map(|e| (e.platform_id.clone(), e.record.clone()))
            .collect())
    }

    fn put_platform_entities(
        &mut self,
        shop_id: i64,
        kind: EntityKind,
        entities: &[EntityWrite],
        now: Timestamp,
    ) -> StoreResult<()> {
        for write in entities {
            let next_id = self.entities.len() as i64 + 1;
            let record = |id| EntityRecord {
                id,
                platform_updated_at: write.platform_updated_at,
                platform_deleted_at: write.platform_deleted_at,
                document: write.json.clone(),
            };
            match self.entity_mut(shop_id, kind, &write.platform_id) {
                Some(existing) => {
                    existing.record = record(existing.record.id);
                    existing.document = write.document.clone();
                    existing.updated_at = now;
                }
                None => self.entities.push(MemoryEntity {
                    shop_id,
                    kind,
                    platform_id: write.platform_id.clone(),
                    record: record(next_id),
                    document: write.document.clone(),
                    created_at: now,
                    updated_at: now,
                }),
            }
        }
        Ok(())
    }
}

impl EventQueueRepository for MemoryState {
    fn insert_inbound_events(&mut self, events: &[NewInboundEvent]) -> StoreResult<()> {
        for event in events {
            // Ids are never reused, as on the databases (a set-aside event keeps its own).
            let id = self.events.len() as i64 + self.failed_events.len() as i64 + 1;
            self.events.push((
                InboundEvent {
                    id,
                    event: event.clone(),
                    attempts: 0,
                },
                None,
            ));
        }
        Ok(())
    }

    fn pending_inbound_events(
        &mut self,
        limit: usize,
        now: Timestamp,
    ) -> StoreResult<Vec<Result<InboundEvent, UnreadableEvent>>> {
        let retry_at = &self.event_retry_at;
        Ok(self
            .events
            .iter()
            .filter(|(event, outcome)| {
                outcome.is_none() && retry_at.get(&event.id).is_none_or(|due| *due <= now)
            })
            .take(limit)
            .map(|(e, _)| Ok(e.clone()))
            .collect())
    }

    fn mark_inbound_events(
        &mut self,
        outcomes: &[(i64, Outcome)],
        _at: Timestamp,
    ) -> StoreResult<()> {
        for (id, outcome) in outcomes {
            if let Some(entry) = self.events.iter_mut().find(|(e, _)| e.id == *id) {
                entry.1 = Some(*outcome);
            }
        }
        Ok(())
    }

    fn count_pending_inbound_events(&mut self) -> StoreResult<i64> {
        Ok(self
            .events
            .iter()
            .filter(|(_, outcome)| outcome.is_none())
            .count() as i64)
    }

    fn has_pending_inbound_events(&mut self) -> StoreResult<bool> {
        Ok(self.events.iter().any(|(_, outcome)| outcome.is_none()))
    }

    fn lock_event_applier(&mut self) -> StoreResult<bool> {
        Ok(true)
    }

    fn postpone_inbound_event(
        &mut self,
        id: i64,
        attempts: i64,
        _error: &str,
        retry_at: Timestamp,
    ) -> StoreResult<()> {
        if let Some((event, _)) = self.events.iter_mut().find(|(e, _)| e.id == id) {
            event.attempts = attempts;
            self.event_retry_at.insert(id, retry_at);
        }
        Ok(())
    }

    fn set_aside_inbound_event(
        &mut self,
        id: i64,
        attempts: i64,
        error: &str,
        at: Timestamp,
    ) -> StoreResult<()> {
        if let Some(index) = self.events.iter().position(|(e, _)| e.id == id) {
            let (queued, _) = self.events.remove(index);
            self.event_retry_at.remove(&id);
            let event = queued.event;
            self.failed_events.push((
                FailedInboundEvent {
                    id,
                    shop_id: event.shop_id,
                    kind: event.kind.as_str().to_string(),
                    action: event.action.as_str().to_string(),
                    platform_id: event.platform_id.clone(),
                    attempts,
                    error: error.to_string(),
                    failed_at: at,
                },
                event,
            ));
        }
        Ok(())
    }

    fn failed_inbound_events(&mut self, limit: usize) -> StoreResult<Vec<FailedInboundEvent>> {
        Ok(self
            .failed_events
            .iter()
            .take(limit)
            .map(|(failed, _)| failed.clone())
            .collect())
    }

    fn count_failed_inbound_events(&mut self) -> StoreResult<i64> {
        Ok(self.failed_events.len() as i64)
    }

    fn requeue_failed_inbound_events(&mut self, ids: Option<&[i64]>) -> StoreResult<Vec<i64>> {
        let (back, kept): (Vec<_>, Vec<_>) = std::mem::take(&mut self.failed_events)
            .into_iter()
            .partition(|(failed, _)| ids.is_none_or(|ids| ids.contains(&failed.id)));
        self.failed_events = kept;
        let requeued = back.iter().map(|(failed, _)| failed.id).collect();
        for (failed, event) in back {
            let event = InboundEvent {
                id: failed.id,
                event,
                attempts: 0,
            };
            let at = self.events.partition_point(|(e, _)| e.id < event.id);
            self.events.insert(at, (event, None));
        }
        Ok(requeued)
    }
}

impl SyncRepository for MemoryState {
    fn running_sync(&mut self, shop_id: i64, topic: Topic) -> StoreResult<Option<SyncRun>> {
        Ok(self
            .syncs
            .iter()
            .find(|r| r.shop_id == shop_id && r.topic == topic && r.status == SyncStatus::Running)
            .cloned())
    }

    fn insert_sync_run(
        &mut self,
        shop_id: i64,
        topic: Topic,
        now: Timestamp,
    ) -> StoreResult<SyncRun> {
        let run = SyncRun {
            id: self.syncs.len() as i64 + 1,
            shop_id,
            topic,
            status: SyncStatus::Running,
            pages: 0,
            items: 0,
            skipped: 0,
            error: None,
            started_at: now,
            heartbeat_at: now,
            finished_at: None,
        };
        self.syncs.push(run.clone());
        Ok(run)
    }

    fn record_sync_page(
        &mut self,
        id: i64,
        items: i64,
        skipped: i64,
        now: Timestamp,
    ) -> StoreResult<()> {
        if let Some(run) = self.syncs.iter_mut().find(|r| r.id == id) {
            run.pages += 1;
            run.items += items;
            run.skipped += skipped;
            run.heartbeat_at = now;
        }
        Ok(())
    }

    fn finish_sync(
        &mut self,
        id: i64,
        status: SyncStatus,
        error: Option<&str>,
        now: Timestamp,
    ) -> StoreResult<()> {
        if let Some(run) = self.syncs.iter_mut().find(|r| r.id == id) {
            run.status = status;
            run.error = error.map(str::to_string);
            run.finished_at = Some(now);
            run.heartbeat_at = now;
        }
        Ok(())
    }

    fn sync_run(&mut self, id: i64) -> StoreResult<Option<SyncRun>> {
        Ok(self.syncs.iter().find(|r| r.id == id).cloned())
    }
}

impl OutboxRepository for MemoryState {
    fn insert_outbox_call(
        &mut self,
        shop_id: i64,
        call: &ConnectorCall,
        now: Timestamp,
    ) -> StoreResult<i64> {
        let id = self.outbox.len() as i64 + 1;
        self.outbox.push(OutboxEntry {
            id,
            shop_id,
            call: call.clone(),
            status: OutboxStatus::Pending,
            attempts: 0,
            next_attempt_at: now,
            last_error: None,
            created_at: now,
        });
        Ok(id)
    }

    /// Memory has one worker: claiming moves the next attempt to the lease's end.
    fn claim_outbox_calls(
        &mut self,
        now: Timestamp,
        limit: usize,
        lease_until: Timestamp,
    ) -> StoreResult<Vec<OutboxEntry>> {
        let mut claimed = Vec::new();
        for entry in self
            .outbox
            .iter_mut()
            .filter(|e| e.status == OutboxStatus::Pending && e.next_attempt_at <= now)
            .take(limit)
        {
            claimed.push(entry.clone());
            entry.next_attempt_at = lease_until;
        }
        Ok(claimed)
    }

    fn retry_outbox_call(
        &mut self,
        id: i64,
        attempts: i64,
        next_attempt_at: Timestamp,
        error: &str,
    ) -> StoreResult<()> {
        if let Some(entry) = self.outbox.iter_mut().find(|e| e.id == id) {
            entry.attempts = attempts;
            entry.next_attempt_at = next_attempt_at;
            entry.last_error = Some(error.to_string());
        }
        Ok(())
    }

    fn finish_outbox_call(
        &mut self,
        id: i64,
        status: OutboxStatus,
        attempts: i64,
        error: Option<&str>,
        _now: Timestamp,
    ) -> StoreResult<()> {
        if let Some(entry) = self.outbox.iter_mut().find(|e| e.id == id) {
            entry.status = status;
            entry.attempts = attempts;
            entry.last_error = error.map(str::to_string);
        }
        Ok(())
    }

    fn outbox_entries(&mut self, shop_id: i64) -> StoreResult<Vec<OutboxEntry>> {
        Ok(self
            .outbox
            .iter()
            .filter(|e| e.shop_id == shop_id)
            .cloned()
            .collect())
    }
}

/// The memory directory lists every live customer by id and ignores the query's filters,
/// sorting and paging: those are SQL, tested against both real databases.
impl DirectoryRepository for MemoryState {
    fn list_directory_customers(
        &mut self,
        shop_id: i64,
        _query: &DirectoryQuery,
    ) -> StoreResult<DirectoryPage> {
        let customers: Vec<DirectoryCustomer> = self
            .entities
            .iter()
            .filter(|e| {
                e.shop_id == shop_id
                    && e.kind == EntityKind::Customer
                    && e.record.platform_deleted_at.is_none()
            })
            .map(MemoryState::directory_entry)
            .collect();
        Ok(DirectoryPage {
            total: customers.len() as i64,
            customers,
        })
    }

    fn directory_customer(
        &mut self,
        shop_id: i64,
        id: i64,
    ) -> StoreResult<Option<DirectoryCustomer>> {
        Ok(self
            .entities
            .iter()
            .find(|e| e.shop_id == shop_id && e.kind == EntityKind::Customer && e.record.id == id)
            .map(MemoryState::directory_entry))
    }

    fn directory_customer_by_platform_id(
        &mut self,
        shop_id: i64,
        platform_id: &str,
    ) -> StoreResult<Option<DirectoryCustomer>> {
        Ok(self
            .entity_mut(shop_id, EntityKind::Customer, platform_id)
            .map(|e| MemoryState::directory_entry(e)))
    }

    fn addresses_of_customers(
        &mut self,
        _shop_id: i64,
        _customer_ids: &[i64],
    ) -> StoreResult<Vec<DirectoryAddress>> {
        Ok(Vec::new())
    }

    fn labels_of_customers(
        &mut self,
        shop_id: i64,
        customer_ids: &[i64],
    ) -> StoreResult<Vec<Label>> {
        let _ = shop_id;
        Ok(self
            .labels
            .iter()
            .filter(|l| customer_ids.contains(&l.customer_id) && l.deleted_at.is_none())
            .cloned()
            .collect())
    }

    fn insert_label(
        &mut self,
        _shop_id: i64,
        customer_id: i64,
        name: &str,
        now: Timestamp,
    ) -> StoreResult<Label> {
        let label = Label {
            id: self.labels.len() as i64 + 1,
            customer_id,
            name: name.to_string(),
            created_at: now,
            updated_at: now,
            deleted_at: None,
        };
        self.labels.push(label.clone());
        Ok(label)
    }

    fn delete_label(
        &mut self,
        _shop_id: i64,
        customer_id: i64,
        label_id: i64,
        now: Timestamp,
    ) -> StoreResult<bool> {
        match self
            .labels
            .iter_mut()
            .find(|l| l.id == label_id && l.customer_id == customer_id && l.deleted_at.is_none())
        {
            Some(label) => {
                label.deleted_at = Some(now);
                Ok(true)
            }
            None => Ok(false),
        }
    }
}

/// Webhooks in memory: enough to test the use cases; the dispatcher's claiming and leasing is
/// tested against the real databases.
impl WebhookRepository for MemoryState {
    fn insert_webhook_endpoint(
        &mut self,
        new: &NewWebhookEndpoint,
    ) -> StoreResult<WebhookEndpoint> {
        let endpoint = WebhookEndpoint {
            id: self.webhook_endpoints.len() as i64 + 1,
            public_id: crate::credentials::random_hex(16),
            shop_id: new.shop_id,
            kind: new.kind,
            topic: new.topic.clone(),
            callback_url: new.callback_url.clone(),
            secret: new.secret.clone(),
            disabled_at: None,
            disabled_reason: None,
            failing_since: None,
            created_at: new.created_at,
            updated_at: new.created_at,
        };
        self.webhook_endpoints.push((endpoint.clone(), false));
        Ok(endpoint)
    }

    fn webhook_endpoint(
        &mut self,
        shop_id: i64,
        public_id: &str,
    ) -> StoreResult<Option<WebhookEndpoint>> {
        Ok(self
            .webhook_endpoints
            .iter()
            .find(|(e, deleted)| !deleted && e.shop_id == shop_id && e.public_id == public_id)
            .map(|(e, _)| e.clone()))
    }

    fn webhook_endpoints_by_ids(
        &mut self,
        ids: &[i64],
    ) -> StoreResult<Vec<(WebhookEndpoint, bool)>> {
        Ok(self
            .webhook_endpoints
            .iter()
            .filter(|(e, _)| ids.contains(&e.id))
            .cloned()
            .collect())
    }

    fn webhook_endpoints(
        &mut self,
        shop_id: i64,
        kind: WebhookKind,
    ) -> StoreResult<Vec<WebhookEndpoint>> {
        Ok(self
            .webhook_endpoints
            .iter()
            .filter(|(e, deleted)| !deleted && e.shop_id == shop_id && e.kind == kind)
            .map(|(e, _)| e.clone())
            .collect())
    }

    fn active_webhook_endpoints(
        &mut self,
        shop_id: i64,
        kind: WebhookKind,
        topic: &str,
    ) -> StoreResult<Vec<WebhookEndpoint>> {
        Ok(self
            .webhook_endpoints(shop_id, kind)?
            .into_iter()
            .filter(|e| e.topic == topic && e.is_active())
            .collect())
    }

    fn update_webhook_endpoint_url(
        &mut self,
        id: i64,
        url: &str,
        now: Timestamp,
    ) -> StoreResult<()> {
        if let Some((endpoint, _)) = self.webhook_endpoints.iter_mut().find(|(e, _)| e.id == id) {
            endpoint.callback_url = url.to_string();
            endpoint.updated_at = now;
        }
        Ok(())
    }

    fn delete_webhook_endpoint(&mut self, id: i64, now: Timestamp) -> StoreResult<()> {
        if let Some(entry) = self.webhook_endpoints.iter_mut().find(|(e, _)| e.id == id) {
            entry.1 = true;
        }
        self.end_pending_webhook_messages(id, MessageStatus::Cancelled, now)?;
        Ok(())
    }

    fn set_webhook_endpoint_health(
        &mut self,
        id: i64,
        failing_since: Option<Timestamp>,
        disabled: Option<(Timestamp, &str)>,
        now: Timestamp,
    ) -> StoreResult<()> {
        if let Some((endpoint, _)) = self.webhook_endpoints.iter_mut().find(|(e, _)| e.id == id) {
            endpoint.failing_since = failing_since;
            if let Some((at, reason)) = disabled {
                endpoint.disabled_at = Some(at);
                endpoint.disabled_reason = Some(reason.to_string());
            }
            endpoint.updated_at = now;
        }
        Ok(())
    }

    fn enable_webhook_endpoint(&mut self, id: i64, now: Timestamp) -> StoreResult<()> {
        if let Some((endpoint, _)) = self.webhook_endpoints.iter_mut().find(|(e, _)| e.id == id) {
            endpoint.disabled_at = None;
            endpoint.disabled_reason = None;
            endpoint.failing_since = None;
            endpoint.updated_at = now;
        }
        Ok(())
    }

    fn insert_webhook_messages(&mut self, messages: &[NewWebhookMessage]) -> StoreResult<Vec<i64>> {
        let mut ids = Vec::new();
        for new in messages {
            let id = self.webhook_messages.len() as i64 + 1;
            self.webhook_messages.push(WebhookMessage {
                id,
                message_id: new.message_id.clone(),
                shop_id: new.shop_id,
                endpoint_id: new.endpoint_id,
                topic: new.topic.clone(),
                payload: new.payload.clone(),
                status: MessageStatus::Pending,
                attempts: 0,
                next_attempt_at: new.created_at,
                created_at: new.created_at,
                delivered_at: None,
            });
            ids.push(id);
        }
        Ok(ids)
    }

    fn claim_webhook_messages(
        &mut self,
        now: Timestamp,
        limit: usize,
        lease_until: Timestamp,
    ) -> StoreResult<Vec<WebhookMessage>> {
        let mut claimed = Vec::new();
        for message in self
            .webhook_messages
            .iter_mut()
            .filter(|m| m.status == MessageStatus::Pending && m.next_attempt_at <= now)
            .take(limit)
        {
            claimed.push(message.clone());
            message.next_attempt_at = lease_until;
        }
        Ok(claimed)
    }

    fn record_webhook_attempts(
        &mut self,
        attempts: &[DeliveryAttempt],
        updates: &[MessageUpdate],
    ) -> StoreResult<()> {
        self.webhook_attempts.extend(attempts.iter().cloned());
        for update in updates {
            if let Some(message) = self.webhook_messages.iter_mut().find(|m| m.id == update.id) {
                message.status = update.status;
                message.attempts = update.attempts;
                message.next_attempt_at = update.next_attempt_at;
                message.delivered_at = update.delivered_at;
            }
        }
        Ok(())
    }

    fn end_pending_webhook_messages(
        &mut self,
        endpoint_id: i64,
        status: MessageStatus,
        _now: Timestamp,
    ) -> StoreResult<u64> {
        let mut ended = 0;
        for message in self
            .webhook_messages
            .iter_mut()
            .filter(|m| m.endpoint_id == endpoint_id && m.status == MessageStatus::Pending)
        {
            message.status = status;
            ended += 1;
        }
        Ok(ended)
    }

    fn webhook_queue_depth(&mut self, now: Timestamp) -> StoreResult<(i64, i64)> {
        let pending = self
            .webhook_messages
            .iter()
            .filter(|m| m.status == MessageStatus::Pending);
        let (due, later): (Vec<_>, Vec<_>) = pending.partition(|m| m.next_attempt_at <= now);
        Ok((due.len() as i64, later.len() as i64))
    }

    fn webhook_message(&mut self, message_id: &str) -> StoreResult<Option<WebhookMessage>> {
        Ok(self
            .webhook_messages
            .iter()
            .find(|m| m.message_id == message_id)
            .cloned())
    }

    fn webhook_messages_of_endpoint(
        &mut self,
        endpoint_id: i64,
        limit: usize,
    ) -> StoreResult<Vec<WebhookMessage>> {
        Ok(self
            .webhook_messages
            .iter()
            .rev()
            .filter(|m| m.endpoint_id == endpoint_id)
            .take(limit)
            .cloned()
            .collect())
    }

    fn webhook_attempts(&mut self, message_row: i64) -> StoreResult<Vec<DeliveryAttempt>> {
        Ok(self
            .webhook_attempts
            .iter()
            .filter(|a| a.message_row == message_row)
            .cloned()
            .collect())
    }

    fn requeue_webhook_message(&mut self, id: i64, now: Timestamp) -> StoreResult<()> {
        if let Some(message) = self.webhook_messages.iter_mut().find(|m| m.id == id) {
            message.status = MessageStatus::Pending;
            message.next_attempt_at = now;
        }
        Ok(())
    }

    fn requeue_failed_webhook_messages(
        &mut self,
        endpoint_id: i64,
        since: Timestamp,
        now: Timestamp,
    ) -> StoreResult<u64> {
        let mut count = 0;
        for message in self.webhook_messages.iter_mut().filter(|m| {
            m.endpoint_id == endpoint_id
                && m.status == MessageStatus::Failed
                && m.created_at >= since
        }) {
            message.status = MessageStatus::Pending;
            message.next_attempt_at = now;
            count += 1;
        }
        Ok(count)
    }

    fn count_disabled_webhook_endpoints(&mut self) -> StoreResult<i64> {
        Ok(self
            .webhook_endpoints
            .iter()
            .filter(|(e, deleted)| !deleted && !e.is_active())
            .count() as i64)
    }
}

impl OverrideRepository for MemoryState {
    fn insert_override(&mut self, new: &NewApiOverride) -> StoreResult<ApiOverride> {
        let stored = ApiOverride {
            id: self.overrides.iter().map(|o| o.id).max().unwrap_or(0) + 1,
            public_id: crate::credentials::random_hex(16),
            shop_id: new.shop_id,
            override_type: new.override_type,
            url: new.url.clone(),
            shared_secret: new.shared_secret.clone(),
            created_at: new.created_at,
            updated_at: new.created_at,
        };
        self.overrides.push(stored.clone());
        Ok(stored)
    }

    fn override_by_public_id(
        &mut self,
        shop_id: i64,
        public_id: &str,
    ) -> StoreResult<Option<ApiOverride>> {
        Ok(self
            .overrides
            .iter()
            .find(|o| o.shop_id == shop_id && o.public_id == public_id)
            .cloned())
    }

    fn overrides_of_shop(&mut self, shop_id: i64) -> StoreResult<Vec<ApiOverride>> {
        Ok(self
            .overrides
            .iter()
            .filter(|o| o.shop_id == shop_id)
            .cloned()
            .collect())
    }

    fn newest_override(
        &mut self,
        shop_id: i64,
        override_type: OverrideType,
    ) -> StoreResult<Option<ApiOverride>> {
        Ok(self
            .overrides
            .iter()
            .filter(|o| o.shop_id == shop_id && o.override_type == override_type)
            .max_by_key(|o| o.id)
            .cloned())
    }

    fn update_override(&mut self, stored: &ApiOverride) -> StoreResult<()> {
        if let Some(existing) = self.overrides.iter_mut().find(|o| o.id == stored.id) {
            *existing = stored.clone();
        }
        Ok(())
    }

    fn delete_override(&mut self, id: i64) -> StoreResult<()> {
        self.overrides.retain(|o| o.id != id);
        Ok(())
    }
}

impl OAuthRepository for MemoryState {
    fn insert_oauth_app(&mut self, new: &NewOAuthApp) -> StoreResult<OAuthApp> {
        let app = OAuthApp {
            id: self.oauth_apps.len() as i64 + 1,
            client_id: new.client_id.clone(),
            client_secret_hash: new.client_secret_hash.clone(),
            name: new.name.clone(),
            redirect_uris: new.redirect_uris.clone(),
            created_at: new.created_at,
            revoked_at: None,
        };
        self.oauth_apps.push(app.clone());
        Ok(app)
    }

    fn oauth_app_by_client_id(&mut self, client_id: &str) -> StoreResult<Option<OAuthApp>> {
        Ok(self
            .oauth_apps
            .iter()
            .find(|app| app.client_id == client_id)
            .cloned())
    }

    fn insert_staff_account(&mut self, new: &NewStaffAccount) -> StoreResult<StaffAccount> {
        let staff = StaffAccount {
            id: self.staff.len() as i64 + 1,
            shop_id: new.shop_id,
            email: new.email.clone(),
            password_hash: new.password_hash.clone(),
            failed_sign_ins: 0,
            locked_until: None,
            created_at: new.created_at,
        };
        self.staff.push(staff.clone());
        Ok(staff)
    }

    fn staff_account(&mut self, shop_id: i64, email: &str) -> StoreResult<Option<StaffAccount>> {
        Ok(self
            .staff
            .iter()
            .find(|s| s.shop_id == shop_id && s.email == email)
            .cloned())
    }

    fn staff_account_by_id(&mut self, id: i64) -> StoreResult<Option<StaffAccount>> {
        Ok(self.staff.iter().find(|s| s.id == id).cloned())
    }

    fn set_staff_sign_in_state(
        &mut self,
        id: i64,
        failed_sign_ins: i32,
        locked_until: Option<Timestamp>,
        _now: Timestamp,
    ) -> StoreResult<()> {
        if let Some(staff) = self.staff.iter_mut().find(|s| s.id == id) {
            staff.failed_sign_ins = failed_sign_ins;
            staff.locked_until = locked_until;
        }
        Ok(())
    }

    fn increment_staff_sign_in_failures(
        &mut self,
        id: i64,
        _now: Timestamp,
    ) -> StoreResult<Option<i32>> {
        Ok(self.staff.iter_mut().find(|s| s.id == id).map(|staff| {
            staff.failed_sign_ins += 1;
            staff.failed_sign_ins
        }))
    }

    fn lock_staff_account(
        &mut self,
        id: i64,
        until: Timestamp,
        _now: Timestamp,
    ) -> StoreResult<()> {
        if let Some(staff) = self.staff.iter_mut().find(|s| s.id == id) {
            staff.locked_until = Some(until);
        }
        Ok(())
    }

    fn insert_authorization_code(&mut self, new: &NewAuthorizationCode) -> StoreResult<()> {
        let code = AuthorizationCode {
            id: self.codes.len() as i64 + 1,
            app_id: new.app_id,
            shop_id: new.shop_id,
            staff_id: new.staff_id,
            redirect_uri: new.redirect_uri.clone(),
            scopes: new.scopes.clone(),
            code_challenge: new.code_challenge.clone(),
            expires_at: new.expires_at,
            used_at: None,
            token_id: None,
        };
        self.codes.push((code, new.code_hash.clone()));
        Ok(())
    }

    fn authorization_code_by_hash(
        &mut self,
        code_hash: &str,
    ) -> StoreResult<Option<AuthorizationCode>> {
        Ok(self
            .codes
            .iter()
            .find(|(_, hash)| hash == code_hash)
            .map(|(code, _)| code.clone()))
    }

    fn redeem_authorization_code(
        &mut self,
        id: i64,
        token_id: i64,
        now: Timestamp,
    ) -> StoreResult<bool> {
        match self
            .codes
            .iter_mut()
            .find(|(code, _)| code.id == id && code.used_at.is_none())
        {
            Some((code, _)) => {
                code.used_at = Some(now);
                code.token_id = Some(token_id);
                Ok(true)
            }
            None => Ok(false),
        }
    }
}
