//! Destinations, platform entities, the event queue, syncs and the outbox, in memory.

use super::{CustomerColumns, MemoryAddress, MemoryCustomerGroup, MemoryEntity, MemoryState};
use crate::kernel::error::{StorageError, StoreResult};
use crate::kernel::ids::ShopId;
use crate::kernel::ids::{
    AddressId, CustomerGroupId, CustomerId, DestinationId, EventId, OutboxCallId, SyncId,
};
use crate::kernel::time::Timestamp;
use crate::platform::addresses::{
    AddressChanges, AddressKey, AddressesBefore, StoredAddress, address_changes,
};
use crate::platform::customer_groups::NewCustomerGroup;
use crate::platform::destinations::{Destination, DestinationSettings, Topic};
use crate::platform::events::{
    CustomerContact, EntityDocument, EntityKind, EntityRecord, EntityWrite, FailedInboundEvent,
    InboundEvent, NewInboundEvent, Outcome, UnreadableEvent,
};
use crate::platform::outbox::{ConnectorCall, OutboxEntry, OutboxStatus};
use crate::platform::sync::{SyncRun, SyncStatus};
use crate::platform::*;

impl DestinationRepository for MemoryState {
    fn insert_destination(
        &mut self,
        shop_id: ShopId,
        settings: &DestinationSettings,
        now: Timestamp,
    ) -> StoreResult<Destination> {
        // As the store's partial unique index: one live destination per shop and topic.
        if self
            .destinations
            .iter()
            .any(|d| d.shop_id == shop_id && d.topic == settings.topic && d.deleted_at.is_none())
        {
            return Err(StorageError::unique_violation(
                "a live destination of this topic exists",
            ));
        }
        let destination = Destination {
            id: DestinationId(self.destinations.len() as i64 + 1),
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
        shop_id: ShopId,
        id: DestinationId,
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

    fn delete_destination(
        &mut self,
        shop_id: ShopId,
        id: DestinationId,
        now: Timestamp,
    ) -> StoreResult<()> {
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

    fn destination(
        &mut self,
        shop_id: ShopId,
        id: DestinationId,
    ) -> StoreResult<Option<Destination>> {
        Ok(self
            .destinations
            .iter()
            .find(|d| d.id == id && d.shop_id == shop_id)
            .cloned())
    }

    fn live_destination(
        &mut self,
        shop_id: ShopId,
        topic: Topic,
    ) -> StoreResult<Option<Destination>> {
        Ok(self
            .destinations
            .iter()
            .find(|d| d.shop_id == shop_id && d.topic == topic && d.deleted_at.is_none())
            .cloned())
    }

    fn live_destinations(&mut self, shop_id: ShopId) -> StoreResult<Vec<Destination>> {
        Ok(self
            .destinations
            .iter()
            .filter(|d| d.shop_id == shop_id && d.deleted_at.is_none())
            .cloned()
            .collect())
    }
}

impl MemoryState {
    pub(super) fn entity_mut(
        &mut self,
        shop_id: ShopId,
        kind: EntityKind,
        platform_id: &str,
    ) -> Option<&mut MemoryEntity> {
        self.entities.iter_mut().find(|e| {
            e.shop_id == shop_id && e.kind == kind && e.platform_id.as_deref() == Some(platform_id)
        })
    }

    /// A customer of the shop by Mercer's id, deleted or not.
    pub(super) fn customer_mut(
        &mut self,
        shop_id: ShopId,
        id: CustomerId,
    ) -> Option<&mut MemoryEntity> {
        self.entities
            .iter_mut()
            .find(|e| e.shop_id == shop_id && e.kind == EntityKind::Customer && e.record.id == id.0)
    }
}

/// The columns a write puts in a customer's row, as the store pulls them out of its document:
/// empty texts when absent; notes are not the platform's and are kept.
fn columns_of(write: &EntityWrite, notes: Option<String>) -> CustomerColumns {
    let customer = match &write.document {
        Some(EntityDocument::Customer(customer)) => Some(&**customer),
        _ => None,
    };
    let text = |pick: fn(&crate::platform::resources::Customer) -> &Option<String>| {
        customer.and_then(|c| pick(c).clone()).unwrap_or_default()
    };
    CustomerColumns {
        email: text(|c| &c.email),
        first_name: text(|c| &c.first_name),
        last_name: text(|c| &c.last_name),
        phone: text(|c| &c.phone),
        notes,
    }
}

impl MemoryState {
    /// The queued events due by `now`, in order of arrival.
    fn due_events(&self, now: Timestamp) -> impl Iterator<Item = &InboundEvent> {
        self.events
            .iter()
            .filter(move |(event, outcome)| {
                outcome.is_none()
                    && self
                        .event_retry_at
                        .get(&event.id.0)
                        .is_none_or(|due| *due <= now)
            })
            .map(|(event, _)| event)
    }
}

impl PlatformRepository for MemoryState {
    fn hears_customer_changes(&mut self, shop_id: ShopId) -> StoreResult<bool> {
        let topic = crate::subscriptions::topics::Topic::CustomerUpdated.as_str();
        Ok(self.webhook_endpoints.iter().any(|(endpoint, deleted)| {
            !deleted
                && endpoint.shop_id == shop_id
                && endpoint.kind == crate::webhooks::WebhookKind::Subscription
                && endpoint.topic == topic
                && endpoint.is_active()
        }))
    }

    fn customer_contacts(
        &mut self,
        shop_id: ShopId,
        platform_ids: &[&str],
    ) -> StoreResult<Vec<(String, CustomerContact)>> {
        Ok(self
            .entities
            .iter()
            .filter(|e| e.shop_id == shop_id && e.kind == EntityKind::Customer)
            .filter(|e| e.record.platform_deleted_at.is_none())
            .filter_map(|e| {
                let id = e
                    .platform_id
                    .as_deref()
                    .filter(|id| platform_ids.contains(id))?;
                let c = &e.columns;
                let contact =
                    CustomerContact::from_columns(&c.first_name, &c.last_name, &c.email, &c.phone);
                Some((id.to_string(), contact))
            })
            .collect())
    }

    fn platform_entities(
        &mut self,
        shop_id: ShopId,
        kind: EntityKind,
        platform_ids: &[&str],
    ) -> StoreResult<Vec<(String, EntityRecord)>> {
        Ok(self
            .entities
            .iter()
            .filter(|e| e.shop_id == shop_id && e.kind == kind)
            .filter_map(|e| {
                let id = e.platform_id.as_deref()?;
                platform_ids
                    .contains(&id)
                    .then(|| (id.to_string(), e.record.clone()))
            })
            .collect())
    }

    fn customer_ids(
        &mut self,
        shop_id: ShopId,
        platform_ids: &[&str],
    ) -> StoreResult<Vec<(String, CustomerId)>> {
        Ok(self
            .entities
            .iter()
            .filter(|e| e.shop_id == shop_id && e.kind == EntityKind::Customer)
            .filter_map(|e| {
                let id = e.platform_id.as_deref()?;
                platform_ids
                    .contains(&id)
                    .then(|| (id.to_string(), CustomerId(e.record.id)))
            })
            .collect())
    }

    fn put_customer_groups(
        &mut self,
        shop_id: ShopId,
        groups: &[NewCustomerGroup],
        now: Timestamp,
    ) -> StoreResult<Vec<(String, CustomerGroupId)>> {
        let mut ids = Vec::with_capacity(groups.len());
        for group in groups {
            let stored = self
                .customer_groups
                .iter_mut()
                .find(|g| g.shop_id == shop_id && g.platform_id == group.platform_id);
            let id = match stored {
                Some(stored) => {
                    if let Some(name) = group.name.as_ref().filter(|name| **name != stored.name) {
                        stored.name = name.clone();
                        stored.updated_at = now;
                    }
                    stored.id
                }
                None => {
                    let id = CustomerGroupId(self.customer_groups.len() as i64 + 1);
                    self.customer_groups.push(MemoryCustomerGroup {
                        id,
                        shop_id,
                        platform_id: group.platform_id.clone(),
                        name: group.name.clone().unwrap_or_default(),
                        created_at: now,
                        updated_at: now,
                    });
                    id
                }
            };
            ids.push((group.platform_id.clone(), id));
        }
        Ok(ids)
    }

    fn set_customer_groups(
        &mut self,
        _shop_id: ShopId,
        memberships: &[(CustomerId, Vec<CustomerGroupId>)],
    ) -> StoreResult<()> {
        for (customer_id, groups) in memberships {
            // As the store's foreign keys: a customer and groups that exist. That they are the
            // shop's is the caller's to see to.
            let known_customer = self
                .entities
                .iter()
                .any(|e| e.kind == EntityKind::Customer && e.record.id == customer_id.0);
            let known_groups = groups
                .iter()
                .all(|group| self.customer_groups.iter().any(|g| g.id == *group));
            if !known_customer || !known_groups {
                return Err(StorageError::other(
                    "a membership names a customer or a group that is not stored",
                ));
            }
            self.customer_group_members
                .retain(|(customer, group)| customer != customer_id || groups.contains(group));
            for group in groups {
                self.customer_group_members.insert((*customer_id, *group));
            }
        }
        Ok(())
    }

    fn products_of_variants(
        &mut self,
        shop_id: ShopId,
        variant_ids: &[&str],
    ) -> StoreResult<Vec<(String, EntityRecord)>> {
        let mut found = Vec::new();
        for entity in &self.entities {
            let live = entity.record.platform_deleted_at.is_none();
            let Some(EntityDocument::Product(product)) = &entity.document else {
                continue;
            };
            if entity.shop_id != shop_id || entity.kind != EntityKind::Product || !live {
                continue;
            }
            for variant in product.variants.iter().flatten() {
                if let Some(id) = &variant.platform_id
                    && variant_ids.contains(&id.as_str())
                {
                    found.push((id.as_str().to_string(), entity.record.clone()));
                }
            }
        }
        Ok(found)
    }

    fn variant_ids_of_sku(&mut self, shop_id: ShopId, sku: &str) -> StoreResult<Vec<String>> {
        let mut found = std::collections::BTreeSet::new();
        for entity in &self.entities {
            let live = entity.record.platform_deleted_at.is_none();
            let Some(EntityDocument::Product(product)) = &entity.document else {
                continue;
            };
            if entity.shop_id != shop_id || entity.kind != EntityKind::Product || !live {
                continue;
            }
            for variant in product.variants.iter().flatten() {
                if variant.sku.as_deref() == Some(sku)
                    && let Some(id) = &variant.platform_id
                {
                    found.insert(id.as_str().to_string());
                }
            }
        }
        Ok(found.into_iter().collect())
    }

    fn put_platform_entities(
        &mut self,
        shop_id: ShopId,
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
                    existing.columns = columns_of(write, existing.columns.notes.take());
                    existing.updated_at = now;
                }
                None => self.entities.push(MemoryEntity {
                    shop_id,
                    kind,
                    platform_id: Some(write.platform_id.clone()),
                    record: record(next_id),
                    document: write.document.clone(),
                    columns: columns_of(write, None),
                    created_at: now,
                    updated_at: now,
                }),
            }
        }
        if kind == EntityKind::Customer {
            self.put_addresses(shop_id, entities, now);
        }
        Ok(())
    }

    fn customer_platform_id(
        &mut self,
        shop_id: ShopId,
        customer_id: CustomerId,
    ) -> StoreResult<Option<String>> {
        Ok(self
            .customer_mut(shop_id, customer_id)
            .and_then(|customer| customer.platform_id.clone()))
    }

    fn address_platform_id(
        &mut self,
        shop_id: ShopId,
        address_id: AddressId,
    ) -> StoreResult<Option<String>> {
        Ok(self
            .addresses
            .iter()
            .find(|a| a.shop_id == shop_id && a.id == address_id.0)
            .and_then(|a| a.row.platform_id.clone()))
    }

    fn set_customer_platform_id(
        &mut self,
        shop_id: ShopId,
        customer_id: CustomerId,
        platform_id: &str,
        now: Timestamp,
    ) -> StoreResult<bool> {
        if self
            .customer_mut(shop_id, customer_id)
            .is_none_or(|customer| customer.platform_id.is_some())
        {
            return Ok(false);
        }
        // As the store's unique key (shop, platform id).
        if self
            .entity_mut(shop_id, EntityKind::Customer, platform_id)
            .is_some()
        {
            return Err(StorageError::unique_violation(
                "a customer of the shop has this platform id",
            ));
        }
        if let Some(customer) = self.customer_mut(shop_id, customer_id) {
            customer.platform_id = Some(platform_id.to_string());
            customer.updated_at = now;
        }
        Ok(true)
    }

    fn set_address_platform_id(
        &mut self,
        shop_id: ShopId,
        address_id: AddressId,
        platform_id: &str,
        now: Timestamp,
    ) -> StoreResult<bool> {
        let Some(customer_id) = self
            .addresses
            .iter()
            .find(|a| a.shop_id == shop_id && a.id == address_id.0 && a.row.platform_id.is_none())
            .map(|a| a.customer_id)
        else {
            return Ok(false);
        };
        // As the store's unique key (customer, address key).
        if self
            .addresses
            .iter()
            .any(|a| a.customer_id == customer_id && a.row.key.as_str() == platform_id)
        {
            return Err(StorageError::unique_violation(
                "an address of the customer has this key",
            ));
        }
        if let Some(address) = self.addresses.iter_mut().find(|a| a.id == address_id.0) {
            address.row.platform_id = Some(platform_id.to_string());
            address.row.key = AddressKey::stored(platform_id);
            address.updated_at = now;
        }
        Ok(true)
    }

    fn sibling_address_by_key(
        &mut self,
        shop_id: ShopId,
        address_id: AddressId,
        key: &str,
    ) -> StoreResult<Option<AddressId>> {
        let Some(customer_id) = self
            .addresses
            .iter()
            .find(|a| a.shop_id == shop_id && a.id == address_id.0)
            .map(|a| a.customer_id)
        else {
            return Ok(None);
        };
        Ok(self
            .addresses
            .iter()
            .find(|a| {
                a.customer_id == customer_id && a.id != address_id.0 && a.row.key.as_str() == key
            })
            .map(|a| AddressId(a.id)))
    }

    fn merge_address_rows(
        &mut self,
        shop_id: ShopId,
        kept: AddressId,
        duplicate: AddressId,
        now: Timestamp,
    ) -> StoreResult<bool> {
        let Some(customer_id) = self
            .addresses
            .iter()
            .find(|a| a.shop_id == shop_id && a.id == kept.0 && a.row.platform_id.is_none())
            .map(|a| a.customer_id)
        else {
            return Ok(false);
        };
        let Some(other) = self
            .addresses
            .iter_mut()
            .find(|a| a.customer_id == customer_id && a.id == duplicate.0 && a.id != kept.0)
        else {
            return Ok(false);
        };
        let taken = (other.row.clone(), other.deleted_at);
        other.row.key = AddressKey::merged(other.id);
        other.row.platform_id = None;
        other.deleted_at = other.deleted_at.or(Some(now));
        other.updated_at = now;
        if let Some(address) = self.addresses.iter_mut().find(|a| a.id == kept.0) {
            (address.row, address.deleted_at) = taken;
            address.updated_at = now;
        }
        for subscription in &mut self.subscriptions {
            let state = &mut subscription.state;
            if state.billing_address_id == duplicate {
                state.billing_address_id = kept;
            }
            if state.shipping_address_id == duplicate {
                state.shipping_address_id = kept;
            }
        }
        Ok(true)
    }

    fn merge_customer_rows(
        &mut self,
        shop_id: ShopId,
        kept: CustomerId,
        duplicate: CustomerId,
        now: Timestamp,
    ) -> StoreResult<bool> {
        if kept == duplicate
            || self
                .customer_mut(shop_id, kept)
                .is_none_or(|customer| customer.platform_id.is_some())
        {
            return Ok(false);
        }
        let Some(other) = self.customer_mut(shop_id, duplicate) else {
            return Ok(false);
        };
        let taken = (
            other.platform_id.take(),
            other.record.clone(),
            other.document.clone(),
            other.columns.clone(),
        );
        // This store tells a deleted customer by its platform deletion.
        other.record.platform_deleted_at = other.record.platform_deleted_at.or(Some(now));
        other.updated_at = now;
        if let Some(customer) = self.customer_mut(shop_id, kept) {
            let (platform_id, record, document, columns) = taken;
            customer.platform_id = platform_id;
            customer.record = EntityRecord {
                id: kept.0,
                ..record
            };
            customer.document = document;
            customer.columns = CustomerColumns {
                notes: customer.columns.notes.take(),
                ..columns
            };
            customer.updated_at = now;
        }
        for address in &mut self.addresses {
            if address.customer_id == duplicate.0 {
                address.customer_id = kept.0;
            }
        }
        let kept_names: Vec<String> = self
            .labels
            .iter()
            .filter(|l| l.label.customer_id == kept && l.label.deleted_at.is_none())
            .map(|l| l.label.name.clone())
            .collect();
        for label in &mut self.labels {
            let label = &mut label.label;
            if label.customer_id == duplicate && !kept_names.contains(&label.name) {
                label.customer_id = kept;
            }
        }
        let groups: Vec<CustomerGroupId> = self
            .customer_group_members
            .iter()
            .filter(|(customer, _)| *customer == duplicate)
            .map(|(_, group)| *group)
            .collect();
        for group in groups {
            self.customer_group_members.remove(&(duplicate, group));
            self.customer_group_members.insert((kept, group));
        }
        for subscription in &mut self.subscriptions {
            if subscription.state.customer_id == duplicate {
                subscription.state.customer_id = kept;
            }
        }
        Ok(true)
    }
}

impl MemoryState {
    /// As the store does: each customer whose document has `addresses` gets the rows the
    /// domain's [`address_changes`] says, decided against its previous document when the write
    /// has one and against its rows as they were before the batch otherwise; then every row
    /// written (in place by key, or added), then every row gone marked deleted.
    fn put_addresses(&mut self, shop_id: ShopId, writes: &[EntityWrite], now: Timestamp) {
        // The store writes the customers it knows by their previous document first.
        let mut known: Vec<(i64, AddressChanges)> = Vec::new();
        let mut unknown: Vec<(i64, AddressChanges)> = Vec::new();
        for write in writes {
            let Some(EntityDocument::Customer(customer)) = &write.document else {
                continue;
            };
            let Some(addresses) = &customer.addresses else {
                continue;
            };
            let Some(customer_id) = self
                .entity_mut(shop_id, EntityKind::Customer, &write.platform_id)
                .map(|entity| entity.record.id)
            else {
                continue;
            };
            let previous = match &write.previous {
                Some(EntityDocument::Customer(previous)) => previous.addresses.as_deref(),
                _ => None,
            };
            match previous {
                Some(previous) => known.push((
                    customer_id,
                    address_changes(AddressesBefore::Document(previous), addresses),
                )),
                None => {
                    let stored: Vec<StoredAddress> = self
                        .addresses
                        .iter()
                        .filter(|a| a.customer_id == customer_id)
                        .map(|a| StoredAddress {
                            row: a.row.clone(),
                            deleted: a.deleted_at.is_some(),
                        })
                        .collect();
                    unknown.push((
                        customer_id,
                        address_changes(AddressesBefore::Stored(&stored), addresses),
                    ));
                }
            }
        }
        let changes: Vec<(i64, AddressChanges)> = known.into_iter().chain(unknown).collect();
        for (customer_id, decided) in &changes {
            for write in &decided.written {
                match self
                    .addresses
                    .iter_mut()
                    .find(|a| a.customer_id == *customer_id && a.row.key == write.row.key)
                {
                    Some(stored) => {
                        stored.row = write.row.clone();
                        stored.updated_at = now;
                        stored.deleted_at = None;
                    }
                    None => {
                        let id = self.addresses.len() as i64 + 1;
                        self.addresses.push(MemoryAddress {
                            id,
                            shop_id,
                            customer_id: *customer_id,
                            row: write.row.clone(),
                            created_at: now,
                            updated_at: now,
                            deleted_at: None,
                        });
                    }
                }
            }
        }
        for (customer_id, decided) in &changes {
            for key in &decided.gone {
                for stored in self.addresses.iter_mut().filter(|a| {
                    a.customer_id == *customer_id && a.row.key == *key && a.deleted_at.is_none()
                }) {
                    stored.deleted_at = Some(now);
                    stored.updated_at = now;
                }
            }
        }
    }
}

impl EventQueueRepository for MemoryState {
    fn insert_inbound_events(&mut self, events: &[NewInboundEvent]) -> StoreResult<()> {
        for event in events {
            // Ids are never reused, as on the databases (a set-aside event keeps its own).
            let id = EventId(self.events.len() as i64 + self.failed_events.len() as i64 + 1);
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
        shops: Option<&[ShopId]>,
        limit: usize,
        now: Timestamp,
    ) -> StoreResult<Vec<Result<InboundEvent, UnreadableEvent>>> {
        Ok(self
            .due_events(now)
            .filter(|event| shops.is_none_or(|shops| shops.contains(&event.event.shop_id)))
            .take(limit)
            .map(|event| Ok(event.clone()))
            .collect())
    }

    fn pending_event_shops(&mut self, limit: usize, now: Timestamp) -> StoreResult<Vec<ShopId>> {
        let mut shops: Vec<ShopId> = Vec::new();
        for event in self.due_events(now).take(limit) {
            if !shops.contains(&event.event.shop_id) {
                shops.push(event.event.shop_id);
            }
        }
        Ok(shops)
    }

    fn mark_inbound_events(
        &mut self,
        outcomes: &[(EventId, Outcome)],
        _at: Timestamp,
    ) -> StoreResult<()> {
        for (id, outcome) in outcomes {
            if let Some(entry) = self.events.iter_mut().find(|(e, _)| e.id == *id) {
                entry.1 = Some(*outcome);
            }
        }
        Ok(())
    }

    fn count_shop_pending_events(&mut self, shop_id: ShopId) -> StoreResult<i64> {
        Ok(self
            .events
            .iter()
            .filter(|(event, outcome)| outcome.is_none() && event.event.shop_id == shop_id)
            .count() as i64)
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

    fn lock_event_partition(&mut self, _partition: i64) -> StoreResult<bool> {
        Ok(true)
    }

    fn postpone_inbound_event(
        &mut self,
        id: EventId,
        attempts: i64,
        _error: &str,
        retry_at: Timestamp,
    ) -> StoreResult<()> {
        if let Some((event, _)) = self.events.iter_mut().find(|(e, _)| e.id == id) {
            event.attempts = attempts;
            self.event_retry_at.insert(id.0, retry_at);
        }
        Ok(())
    }

    fn set_aside_inbound_event(
        &mut self,
        id: EventId,
        attempts: i64,
        error: &str,
        at: Timestamp,
    ) -> StoreResult<()> {
        if let Some(index) = self.events.iter().position(|(e, _)| e.id == id) {
            let (queued, _) = self.events.remove(index);
            self.event_retry_at.remove(&id.0);
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

    fn failed_inbound_events(
        &mut self,
        shop_id: Option<ShopId>,
        limit: usize,
    ) -> StoreResult<Vec<FailedInboundEvent>> {
        Ok(self
            .failed_events
            .iter()
            .filter(|(failed, _)| shop_id.is_none_or(|shop| failed.shop_id == shop))
            .take(limit)
            .map(|(failed, _)| failed.clone())
            .collect())
    }

    fn count_failed_inbound_events(&mut self) -> StoreResult<i64> {
        Ok(self.failed_events.len() as i64)
    }

    fn requeue_failed_inbound_events(
        &mut self,
        shop_id: Option<ShopId>,
        ids: Option<&[EventId]>,
    ) -> StoreResult<Vec<EventId>> {
        let (back, kept): (Vec<_>, Vec<_>) = std::mem::take(&mut self.failed_events)
            .into_iter()
            .partition(|(failed, _)| {
                ids.is_none_or(|ids| ids.contains(&failed.id))
                    && shop_id.is_none_or(|shop| failed.shop_id == shop)
            });
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
    fn running_sync(&mut self, shop_id: ShopId, topic: Topic) -> StoreResult<Option<SyncRun>> {
        Ok(self
            .syncs
            .iter()
            .find(|r| r.shop_id == shop_id && r.topic == topic && r.status == SyncStatus::Running)
            .cloned())
    }

    fn insert_sync_run(
        &mut self,
        shop_id: ShopId,
        topic: Topic,
        now: Timestamp,
    ) -> StoreResult<SyncRun> {
        // As the store's partial unique index: one running sync per shop and topic.
        if self
            .syncs
            .iter()
            .any(|r| r.shop_id == shop_id && r.topic == topic && r.status == SyncStatus::Running)
        {
            return Err(StorageError::unique_violation(
                "a sync of this topic is running",
            ));
        }
        let run = SyncRun {
            id: SyncId(self.syncs.len() as i64 + 1),
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
            next_cursor: None,
        };
        self.syncs.push(run.clone());
        Ok(run)
    }

    fn record_sync_page(
        &mut self,
        id: SyncId,
        items: i64,
        skipped: i64,
        next_cursor: Option<&str>,
        now: Timestamp,
    ) -> StoreResult<bool> {
        let Some(run) = self
            .syncs
            .iter_mut()
            .find(|r| r.id == id && r.status == SyncStatus::Running)
        else {
            return Ok(false);
        };
        run.pages += 1;
        run.items += items;
        run.skipped += skipped;
        run.next_cursor = next_cursor.map(str::to_string);
        run.heartbeat_at = now;
        Ok(true)
    }

    fn finish_sync(
        &mut self,
        id: SyncId,
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

    fn recent_sync_runs(&mut self, shop_id: ShopId, limit: usize) -> StoreResult<Vec<SyncRun>> {
        Ok(self
            .syncs
            .iter()
            .rev()
            .filter(|r| r.shop_id == shop_id)
            .take(limit)
            .cloned()
            .collect())
    }

    fn sync_run(&mut self, id: SyncId) -> StoreResult<Option<SyncRun>> {
        Ok(self.syncs.iter().find(|r| r.id == id).cloned())
    }
}

impl OutboxRepository for MemoryState {
    fn insert_outbox_call(
        &mut self,
        shop_id: ShopId,
        call: &ConnectorCall,
        now: Timestamp,
    ) -> StoreResult<OutboxCallId> {
        let id = OutboxCallId(self.outbox.len() as i64 + 1);
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
        shop_id: ShopId,
        now: Timestamp,
        limit: usize,
        lease_until: Timestamp,
    ) -> StoreResult<Vec<OutboxEntry>> {
        let mut claimed = Vec::new();
        for entry in self
            .outbox
            .iter_mut()
            .filter(|e| {
                e.shop_id == shop_id
                    && e.status == OutboxStatus::Pending
                    && e.next_attempt_at <= now
            })
            .take(limit)
        {
            claimed.push(entry.clone());
            entry.next_attempt_at = lease_until;
        }
        Ok(claimed)
    }

    fn retry_outbox_call(
        &mut self,
        id: OutboxCallId,
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
        id: OutboxCallId,
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

    fn outbox_entries(&mut self, shop_id: ShopId) -> StoreResult<Vec<OutboxEntry>> {
        Ok(self
            .outbox
            .iter()
            .filter(|e| e.shop_id == shop_id)
            .cloned()
            .collect())
    }

    fn recent_outbox_entries(
        &mut self,
        shop_id: ShopId,
        limit: usize,
    ) -> StoreResult<Vec<OutboxEntry>> {
        Ok(self
            .outbox
            .iter()
            .rev()
            .filter(|e| e.shop_id == shop_id)
            .take(limit)
            .cloned()
            .collect())
    }

    fn next_outbox_attempt(&mut self, shop_id: ShopId) -> StoreResult<Option<Timestamp>> {
        Ok(self
            .outbox
            .iter()
            .filter(|e| e.shop_id == shop_id && e.status == OutboxStatus::Pending)
            .map(|e| e.next_attempt_at)
            .min())
    }

    fn shops_with_pending_outbox_calls(&mut self) -> StoreResult<Vec<ShopId>> {
        let mut shops: Vec<ShopId> = self
            .outbox
            .iter()
            .filter(|e| e.status == OutboxStatus::Pending)
            .map(|e| e.shop_id)
            .collect();
        shops.sort_unstable();
        shops.dedup();
        Ok(shops)
    }
}
