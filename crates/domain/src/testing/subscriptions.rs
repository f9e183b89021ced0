//! The subscriptions' customers, addresses and subscriptions, in memory, by the rules of the
//! store's (`repos/subscriptions/`): customers and addresses are the platform's rows (one
//! customer record per shop), those made here without a platform id until the connector gives
//! one.

use super::{CustomerColumns, MemoryAddress, MemoryEntity, MemoryState};
use crate::access::credentials::random_hex;
use crate::kernel::error::{StorageError, StoreResult};
use crate::kernel::ids::ShopId;
use crate::kernel::ids::{
    AddressId, BillingRuleId, CustomerId, GroupId, LineItemId, StatusLogId, SubscriptionId,
    SubscriptionOrderId,
};
use crate::kernel::time::Timestamp;
use crate::platform::addresses::{AddressKey, AddressRow};
use crate::platform::events::{EntityKind, EntityRecord};
use crate::platform::resources::CustomerAddress;
use crate::subscriptions::cancellation::{CancellationReason, CancellationReasonRepository};
use crate::subscriptions::dunning::{DunningPolicy, DunningPolicyRepository};
use crate::subscriptions::groups::StoredGroup;
use crate::subscriptions::query::ListQuery;
use crate::subscriptions::repository::{
    CustomerFields, CustomerListQuery, CustomerStatus, IdPage, NewSubscriptionOrder,
    OrderAttemptEnd, OrderAttemptStatus, OrderFilter, SchedulerBacklog, StoredAddress,
    StoredSubscription, SubscriptionCustomerRepository, SubscriptionGroupRepository,
    SubscriptionOrder, SubscriptionOrderRepository, SubscriptionPage, SubscriptionRepository,
    SubscriptionState, SummaryFigures,
};
use crate::subscriptions::resources::{StatusLog, SubscriptionLineItem, SubscriptionStatus};
use crate::subscriptions::states::NewStatusLog;

/// The columns of the subscription API's fields: an absent text is an empty one.
fn columns_of(fields: &CustomerFields) -> CustomerColumns {
    let text = |value: &Option<String>| value.clone().unwrap_or_default();
    CustomerColumns {
        email: text(&fields.email),
        first_name: text(&fields.first_name),
        last_name: text(&fields.last_name),
        phone: text(&fields.phone),
        notes: fields.notes.clone(),
    }
}

fn is_live_customer(entity: &MemoryEntity, shop_id: ShopId) -> bool {
    entity.shop_id == shop_id
        && entity.kind == EntityKind::Customer
        && entity.record.platform_deleted_at.is_none()
}

/// A 1-based page of `items`.
fn page_of<T>(items: Vec<T>, limit: i64, page: i64) -> Vec<T> {
    let skip = (page.max(1) - 1).saturating_mul(limit.max(0));
    items
        .into_iter()
        .skip(usize::try_from(skip).unwrap_or(usize::MAX))
        .take(usize::try_from(limit).unwrap_or(0))
        .collect()
}

/// Whether a customer's columns hold `search`, without case.
fn found_by(columns: &CustomerColumns, search: &str) -> bool {
    let search = search.to_lowercase();
    let full_name = format!("{} {}", columns.first_name, columns.last_name);
    [
        &columns.first_name,
        &columns.last_name,
        &full_name,
        &columns.email,
        &columns.phone,
    ]
    .iter()
    .any(|text| text.to_lowercase().contains(&search))
}

impl MemoryState {
    /// The shop's subscriptions of a customer, by id.
    fn subscriptions_of(
        &self,
        shop_id: ShopId,
        customer_id: CustomerId,
    ) -> Vec<&StoredSubscription> {
        self.subscriptions
            .iter()
            .filter(|s| s.shop_id == shop_id && s.state.customer_id == customer_id)
            .collect()
    }

    /// The customer's other live addresses stop being the default.
    fn clear_other_defaults(&mut self, customer_id: i64, address_id: i64, now: Timestamp) {
        for other in self.addresses.iter_mut().filter(|a| {
            a.customer_id == customer_id
                && a.id != address_id
                && a.deleted_at.is_none()
                && a.row.is_default
        }) {
            other.row.is_default = false;
            other.updated_at = now;
        }
    }

    fn live_address_mut(
        &mut self,
        shop_id: ShopId,
        customer_id: i64,
        address_id: i64,
    ) -> Option<&mut MemoryAddress> {
        self.addresses.iter_mut().find(|a| {
            a.shop_id == shop_id
                && a.customer_id == customer_id
                && a.id == address_id
                && a.deleted_at.is_none()
        })
    }
}

/// An address as JSON text, as the store keeps it.
fn address_document(address: &CustomerAddress) -> String {
    serde_json::to_string(address).unwrap_or_else(|_| "{}".to_string())
}

impl SubscriptionCustomerRepository for MemoryState {
    fn customer_id_by_email(
        &mut self,
        shop_id: ShopId,
        email: &str,
    ) -> StoreResult<Option<CustomerId>> {
        // No email is stored as empty text: it is no one's email.
        if email.is_empty() {
            return Ok(None);
        }
        let email = email.to_lowercase();
        Ok(self
            .entities
            .iter()
            .filter(|e| is_live_customer(e, shop_id) && e.columns.email.to_lowercase() == email)
            .map(|e| e.record.id)
            .min()
            .map(CustomerId))
    }

    fn insert_customer(
        &mut self,
        shop_id: ShopId,
        fields: &CustomerFields,
        now: Timestamp,
    ) -> StoreResult<CustomerId> {
        let id = self.entities.len() as i64 + 1;
        self.entities.push(MemoryEntity {
            shop_id,
            kind: EntityKind::Customer,
            platform_id: None,
            record: EntityRecord {
                id,
                platform_updated_at: None,
                platform_deleted_at: None,
                document: None,
            },
            document: None,
            columns: columns_of(fields),
            created_at: now,
            updated_at: now,
        });
        Ok(CustomerId(id))
    }

    fn update_customer(
        &mut self,
        shop_id: ShopId,
        customer_id: CustomerId,
        fields: &CustomerFields,
        now: Timestamp,
    ) -> StoreResult<bool> {
        match self
            .customer_mut(shop_id, customer_id)
            .filter(|customer| customer.record.platform_deleted_at.is_none())
        {
            Some(customer) => {
                customer.columns = columns_of(fields);
                if let Some(document) = &customer.record.document {
                    customer.record.document = fields.written_into(document);
                }
                customer.updated_at = now;
                Ok(true)
            }
            None => Ok(false),
        }
    }

    fn customer_notes(
        &mut self,
        shop_id: ShopId,
        customer_ids: &[CustomerId],
    ) -> StoreResult<Vec<(CustomerId, String)>> {
        let mut notes: Vec<(CustomerId, String)> = self
            .entities
            .iter()
            .filter(|e| {
                e.shop_id == shop_id
                    && e.kind == EntityKind::Customer
                    && customer_ids.contains(&CustomerId(e.record.id))
            })
            .filter_map(|e| Some((CustomerId(e.record.id), e.columns.notes.clone()?)))
            .collect();
        notes.sort_unstable();
        Ok(notes)
    }

    fn list_subscription_customers(
        &mut self,
        shop_id: ShopId,
        query: &CustomerListQuery,
    ) -> StoreResult<IdPage> {
        let mut ids: Vec<CustomerId> = self
            .entities
            .iter()
            .filter(|e| is_live_customer(e, shop_id))
            .filter(|e| {
                query
                    .search
                    .as_deref()
                    .is_none_or(|search| found_by(&e.columns, search))
            })
            .filter(|e| {
                let subscriptions = self.subscriptions_of(shop_id, CustomerId(e.record.id));
                let inactive = |s: &&StoredSubscription| {
                    s.state.subscription_status == SubscriptionStatus::Inactive
                };
                // No status (never meant to happen) is every customer with a subscription.
                let all = [CustomerStatus::All];
                let statuses = if query.statuses.is_empty() {
                    &all[..]
                } else {
                    &query.statuses[..]
                };
                statuses.iter().any(|status| match status {
                    CustomerStatus::All => !subscriptions.is_empty(),
                    CustomerStatus::Active => subscriptions.iter().any(|s| !inactive(s)),
                    CustomerStatus::Inactive => {
                        !subscriptions.is_empty() && subscriptions.iter().all(inactive)
                    }
                })
            })
            .map(|e| CustomerId(e.record.id))
            .collect();
        ids.sort_unstable();
        let total = ids.len() as i64;
        Ok(IdPage {
            ids: page_of(ids, query.limit, query.page),
            total,
        })
    }

    fn subscription_summaries(
        &mut self,
        shop_id: ShopId,
        customer_ids: &[CustomerId],
    ) -> StoreResult<Vec<SummaryFigures>> {
        let mut ids = customer_ids.to_vec();
        ids.sort_unstable();
        ids.dedup();
        Ok(ids
            .into_iter()
            .filter_map(|customer_id| {
                let subscriptions = self.subscriptions_of(shop_id, customer_id);
                if subscriptions.is_empty() {
                    return None;
                }
                let (inactive, active): (Vec<&StoredSubscription>, Vec<&StoredSubscription>) =
                    subscriptions
                        .iter()
                        .partition(|s| s.state.subscription_status == SubscriptionStatus::Inactive);
                Some(SummaryFigures {
                    customer_id,
                    active_subscription_count: active.len() as i64,
                    inactive_subscription_count: inactive.len() as i64,
                    next_order_date: active
                        .iter()
                        .filter_map(|s| s.state.next_order_datetime)
                        .min(),
                    last_order_date: subscriptions
                        .iter()
                        .filter_map(|s| s.state.last_order_datetime)
                        .max(),
                    subscription_order_count: subscriptions
                        .iter()
                        .map(|s| s.state.orders_processed)
                        .sum(),
                })
            })
            .collect())
    }

    fn addresses_by_ids(
        &mut self,
        shop_id: ShopId,
        ids: &[AddressId],
    ) -> StoreResult<Vec<StoredAddress>> {
        let mut rows: Vec<&MemoryAddress> = self
            .addresses
            .iter()
            .filter(|a| a.shop_id == shop_id && ids.contains(&AddressId(a.id)))
            .collect();
        rows.sort_by_key(|a| a.id);
        Ok(rows
            .into_iter()
            .map(|row| StoredAddress {
                id: AddressId(row.id),
                shop_id: row.shop_id,
                customer_id: CustomerId(row.customer_id),
                platform_id: row.row.platform_id.clone(),
                customer_platform_id: self
                    .entities
                    .iter()
                    .find(|e| e.kind == EntityKind::Customer && e.record.id == row.customer_id)
                    .and_then(|e| e.platform_id.clone()),
                is_default: row.row.is_default,
                address: serde_json::from_str(&row.row.document).unwrap_or_default(),
                created_at: row.created_at,
                updated_at: row.updated_at,
                deleted_at: row.deleted_at,
            })
            .collect())
    }

    fn insert_address(
        &mut self,
        shop_id: ShopId,
        customer_id: CustomerId,
        address: &CustomerAddress,
        is_default: bool,
        now: Timestamp,
    ) -> StoreResult<AddressId> {
        let (customer_id, id) = (customer_id.0, self.addresses.len() as i64 + 1);
        if is_default {
            self.clear_other_defaults(customer_id, id, now);
        }
        self.addresses.push(MemoryAddress {
            id,
            shop_id,
            customer_id,
            row: AddressRow {
                // Unique per customer, and never a platform id nor a position.
                key: AddressKey::stored(format!("svc:{}", random_hex(16))),
                platform_id: None,
                is_default,
                document: address_document(address),
            },
            created_at: now,
            updated_at: now,
            deleted_at: None,
        });
        Ok(AddressId(id))
    }

    fn update_address(
        &mut self,
        shop_id: ShopId,
        customer_id: CustomerId,
        address_id: AddressId,
        address: &CustomerAddress,
        is_default: bool,
        now: Timestamp,
    ) -> StoreResult<bool> {
        let (customer_id, address_id) = (customer_id.0, address_id.0);
        let Some(row) = self.live_address_mut(shop_id, customer_id, address_id) else {
            return Ok(false);
        };
        row.row.document = address_document(address);
        row.row.is_default = is_default;
        row.updated_at = now;
        if is_default {
            self.clear_other_defaults(customer_id, address_id, now);
        }
        Ok(true)
    }

    fn delete_address(
        &mut self,
        shop_id: ShopId,
        customer_id: CustomerId,
        address_id: AddressId,
        now: Timestamp,
    ) -> StoreResult<bool> {
        let (customer_id, address_id) = (customer_id.0, address_id.0);
        let Some(row) = self.live_address_mut(shop_id, customer_id, address_id) else {
            return Ok(false);
        };
        row.deleted_at = Some(now);
        row.updated_at = now;
        Ok(true)
    }
}

/// A line item as read back: its ids, and its parts' references to them.
fn with_ids(
    item: &SubscriptionLineItem,
    id: LineItemId,
    subscription_id: SubscriptionId,
    now: Timestamp,
) -> SubscriptionLineItem {
    let mut item = item.clone();
    item.id = id;
    item.subscription_id = subscription_id;
    item.created_at = now;
    item.updated_at = now;
    for discount in &mut item.discounts {
        discount.subscription_line_item_id = id;
    }
    if let Some(prepaid) = &mut item.prepaid_metadata {
        prepaid.line_item_id = id;
    }
    for attribute in &mut item.line_item_attributes {
        attribute.line_item_id = id;
        attribute.subscription_id = subscription_id;
    }
    item
}

impl MemoryState {
    fn subscription_mut(
        &mut self,
        shop_id: ShopId,
        id: SubscriptionId,
    ) -> Option<&mut StoredSubscription> {
        self.subscriptions
            .iter_mut()
            .find(|s| s.shop_id == shop_id && s.id == id)
    }

    /// The shop's subscriptions `query` matches (cursor included), by id.
    fn matching(&self, shop_id: ShopId, query: &ListQuery) -> Vec<&StoredSubscription> {
        self.subscriptions
            .iter()
            .filter(|s| s.shop_id == shop_id && query.matches(s))
            .collect()
    }
}

impl SubscriptionRepository for MemoryState {
    fn subscription_by_idempotency_key(
        &mut self,
        shop_id: ShopId,
        key: &str,
    ) -> StoreResult<Option<(SubscriptionId, Option<String>)>> {
        Ok(self
            .subscriptions
            .iter()
            .find(|s| s.shop_id == shop_id && s.state.idempotency_key.as_deref() == Some(key))
            .map(|s| (s.id, s.state.idempotency_fingerprint.clone())))
    }

    fn insert_subscription(
        &mut self,
        shop_id: ShopId,
        state: &SubscriptionState,
        line_items: &[SubscriptionLineItem],
        now: Timestamp,
    ) -> StoreResult<SubscriptionId> {
        // As the store's partial unique index (shop, idempotency key).
        if let Some(key) = &state.idempotency_key
            && self
                .subscription_by_idempotency_key(shop_id, key)?
                .is_some()
        {
            return Err(StorageError::unique_violation(
                "a subscription of the shop has this idempotency key",
            ));
        }
        let id = SubscriptionId(self.subscriptions.len() as i64 + 1);
        let mut items = Vec::with_capacity(line_items.len());
        for item in line_items {
            self.line_item_count += 1;
            items.push(with_ids(item, LineItemId(self.line_item_count), id, now));
        }
        self.subscriptions.push(StoredSubscription {
            id,
            shop_id,
            created_at: now,
            state: state.clone(),
            line_items: items,
            latest_status_log: None,
        });
        Ok(id)
    }

    fn save_subscription(
        &mut self,
        shop_id: ShopId,
        id: SubscriptionId,
        state: &SubscriptionState,
    ) -> StoreResult<bool> {
        if self.subscription_mut(shop_id, id).is_none() {
            return Ok(false);
        }
        // The same index: a key may only be taken once in the shop.
        if let Some(key) = &state.idempotency_key
            && self.subscriptions.iter().any(|s| {
                s.shop_id == shop_id && s.id != id && s.state.idempotency_key.as_ref() == Some(key)
            })
        {
            return Err(StorageError::unique_violation(
                "a subscription of the shop has this idempotency key",
            ));
        }
        match self.subscription_mut(shop_id, id) {
            Some(subscription) => {
                subscription.state = state.clone();
                Ok(true)
            }
            None => Ok(false),
        }
    }

    fn update_line_item(
        &mut self,
        shop_id: ShopId,
        subscription_id: SubscriptionId,
        item: &SubscriptionLineItem,
        now: Timestamp,
    ) -> StoreResult<bool> {
        let stored = self
            .subscription_mut(shop_id, subscription_id)
            .and_then(|s| s.line_items.iter_mut().find(|stored| stored.id == item.id));
        match stored {
            Some(stored) => {
                let created_at = stored.created_at;
                *stored = item.clone();
                stored.subscription_id = subscription_id;
                stored.created_at = created_at;
                stored.updated_at = now;
                Ok(true)
            }
            None => Ok(false),
        }
    }

    fn lock_subscription(&mut self, _shop_id: ShopId, _id: SubscriptionId) -> StoreResult<()> {
        // One unit of work at a time already.
        Ok(())
    }

    fn lock_for_create(&mut self, _key: &str) -> StoreResult<()> {
        // One unit of work at a time already.
        Ok(())
    }

    fn insert_status_log(
        &mut self,
        shop_id: ShopId,
        entry: &NewStatusLog,
    ) -> StoreResult<StatusLog> {
        let log = entry
            .clone()
            .stored(StatusLogId(self.status_logs.len() as i64 + 1));
        self.status_logs.push((shop_id, log.clone()));
        if let Some(subscription) = self.subscription_mut(shop_id, entry.subscription_id) {
            subscription.latest_status_log = Some(log.clone());
        }
        Ok(log)
    }

    fn status_logs_of_subscription(
        &mut self,
        shop_id: ShopId,
        subscription_id: SubscriptionId,
        limit: usize,
    ) -> StoreResult<Vec<StatusLog>> {
        Ok(self
            .status_logs
            .iter()
            .rev()
            .filter(|(shop, log)| *shop == shop_id && log.subscription_id == subscription_id)
            .take(limit)
            .map(|(_, log)| log.clone())
            .collect())
    }

    fn subscription(
        &mut self,
        shop_id: ShopId,
        id: SubscriptionId,
    ) -> StoreResult<Option<StoredSubscription>> {
        Ok(self.subscription_mut(shop_id, id).map(|s| s.clone()))
    }

    fn list_subscriptions(
        &mut self,
        shop_id: ShopId,
        query: &ListQuery,
    ) -> StoreResult<SubscriptionPage> {
        let matching = self.matching(shop_id, query);
        let limit = usize::try_from(query.limit).unwrap_or(0);
        Ok(SubscriptionPage {
            has_more: matching.len() > limit,
            subscriptions: matching.into_iter().take(limit).cloned().collect(),
        })
    }

    fn count_subscriptions(&mut self, shop_id: ShopId, query: &ListQuery) -> StoreResult<i64> {
        let all = ListQuery {
            cursor: None,
            ..query.clone()
        };
        Ok(self.matching(shop_id, &all).len() as i64)
    }

    fn customer_subscriptions(
        &mut self,
        shop_id: ShopId,
        customer_id: CustomerId,
        limit: i64,
        page: i64,
    ) -> StoreResult<(Vec<StoredSubscription>, i64)> {
        let all: Vec<StoredSubscription> = self
            .subscriptions_of(shop_id, customer_id)
            .into_iter()
            .cloned()
            .collect();
        let total = all.len() as i64;
        Ok((page_of(all, limit, page), total))
    }
}

/// Whether the subscription's order is due at `now`: its date has come and no retry wait runs.
fn is_due(state: &SubscriptionState, now: Timestamp) -> bool {
    state.next_order_datetime.is_some_and(|next| next <= now)
        && state
            .next_processing_datetime
            .is_none_or(|retry| retry <= now)
}

impl SubscriptionOrderRepository for MemoryState {
    fn lock_due_subscriptions(
        &mut self,
        status: SubscriptionStatus,
        now: Timestamp,
        limit: usize,
    ) -> StoreResult<Vec<(ShopId, SubscriptionId)>> {
        let mut due: Vec<&StoredSubscription> = self
            .subscriptions
            .iter()
            .filter(|s| s.state.subscription_status == status && is_due(&s.state, now))
            .filter(|s| {
                // A deleted shop's subscriptions are left out, as the store leaves them out.
                !self
                    .shops
                    .iter()
                    .any(|shop| shop.id == s.shop_id && shop.deleted_at.is_some())
            })
            .collect();
        due.sort_by_key(|s| (s.state.next_order_datetime, s.id));
        Ok(due
            .into_iter()
            .take(limit)
            .map(|s| (s.shop_id, s.id))
            .collect())
    }

    fn subscriptions_by_ids(
        &mut self,
        shop_id: ShopId,
        ids: &[SubscriptionId],
    ) -> StoreResult<Vec<StoredSubscription>> {
        Ok(ids
            .iter()
            .filter_map(|id| self.subscription_mut(shop_id, *id).map(|s| s.clone()))
            .collect())
    }

    fn insert_subscription_order(
        &mut self,
        order: &NewSubscriptionOrder,
    ) -> StoreResult<SubscriptionOrderId> {
        // As the store's unique key (subscription, order date, attempt).
        if self.subscription_orders.iter().any(|o| {
            o.subscription_id == order.subscription_id
                && o.scheduled_at == order.scheduled_at
                && o.attempt == order.attempt
        }) {
            return Err(StorageError::unique_violation(
                "the subscription has this attempt of this order date",
            ));
        }
        let id = SubscriptionOrderId(self.subscription_orders.len() as i64 + 1);
        self.subscription_orders.push(SubscriptionOrder {
            id,
            shop_id: order.shop_id,
            subscription_id: order.subscription_id,
            scheduled_at: order.scheduled_at,
            attempt: order.attempt,
            idempotency_key: order.idempotency_key.clone(),
            status: OrderAttemptStatus::Placing,
            due_at: order.due_at,
            platform_order_id: None,
            platform_payment_id: None,
            failure_code: None,
            failure_reason: None,
            finished_at: None,
            created_at: order.created_at,
            updated_at: order.created_at,
        });
        Ok(id)
    }

    fn subscription_order(
        &mut self,
        id: SubscriptionOrderId,
    ) -> StoreResult<Option<SubscriptionOrder>> {
        Ok(self
            .subscription_orders
            .iter()
            .find(|o| o.id == id)
            .cloned())
    }

    fn attempts_of_date(
        &mut self,
        subscription_id: SubscriptionId,
        scheduled_at: Timestamp,
    ) -> StoreResult<Vec<SubscriptionOrder>> {
        let mut attempts: Vec<SubscriptionOrder> = self
            .subscription_orders
            .iter()
            .filter(|o| o.subscription_id == subscription_id && o.scheduled_at == scheduled_at)
            .cloned()
            .collect();
        attempts.sort_by_key(|o| o.attempt);
        Ok(attempts)
    }

    fn set_order_platform_id(
        &mut self,
        id: SubscriptionOrderId,
        platform_order_id: &str,
        now: Timestamp,
    ) -> StoreResult<()> {
        if let Some(order) = self
            .subscription_orders
            .iter_mut()
            .find(|o| o.id == id && o.status == OrderAttemptStatus::Placing)
        {
            order.platform_order_id = Some(platform_order_id.to_string());
            order.updated_at = now;
        }
        Ok(())
    }

    fn finish_subscription_order(
        &mut self,
        id: SubscriptionOrderId,
        end: &OrderAttemptEnd,
        now: Timestamp,
    ) -> StoreResult<Option<SubscriptionOrder>> {
        let Some(order) = self
            .subscription_orders
            .iter_mut()
            .find(|o| o.id == id && o.status == OrderAttemptStatus::Placing)
        else {
            return Ok(None);
        };
        match end {
            OrderAttemptEnd::Placed {
                platform_order_id,
                platform_payment_id,
            } => {
                order.status = OrderAttemptStatus::Placed;
                order.platform_order_id = Some(platform_order_id.clone());
                order.platform_payment_id = platform_payment_id.clone();
            }
            OrderAttemptEnd::Failed { code, reason } => {
                order.status = OrderAttemptStatus::Failed;
                order.failure_code = Some(code.clone());
                order.failure_reason = Some(reason.clone());
            }
        }
        order.finished_at = Some(now);
        order.updated_at = now;
        Ok(Some(order.clone()))
    }

    fn count_placing_orders(&mut self) -> StoreResult<i64> {
        Ok(self
            .subscription_orders
            .iter()
            .filter(|o| o.status == OrderAttemptStatus::Placing)
            .count() as i64)
    }

    fn stalled_subscription_orders(
        &mut self,
        before: Timestamp,
        limit: usize,
    ) -> StoreResult<Vec<SubscriptionOrder>> {
        let mut stalled: Vec<SubscriptionOrder> = self
            .subscription_orders
            .iter()
            .filter(|o| o.status == OrderAttemptStatus::Placing && o.created_at < before)
            .cloned()
            .collect();
        stalled.sort_by_key(|o| (o.created_at, o.id));
        stalled.truncate(limit);
        Ok(stalled)
    }

    fn orders_of_subscriptions(
        &mut self,
        subscription_ids: &[SubscriptionId],
        per_subscription: usize,
    ) -> StoreResult<Vec<SubscriptionOrder>> {
        let mut found = Vec::new();
        for &subscription_id in subscription_ids {
            found.extend(
                self.subscription_orders
                    .iter()
                    .rev()
                    .filter(|o| o.subscription_id == subscription_id)
                    .take(per_subscription)
                    .cloned(),
            );
        }
        Ok(found)
    }

    fn shop_subscription_orders(
        &mut self,
        shop_id: ShopId,
        filter: &OrderFilter,
        limit: usize,
    ) -> StoreResult<Vec<SubscriptionOrder>> {
        let mut found: Vec<SubscriptionOrder> = self
            .subscription_orders
            .iter()
            .filter(|o| o.shop_id == shop_id && filter.matches(o))
            .cloned()
            .collect();
        found.sort_by_key(|o| std::cmp::Reverse((o.scheduled_at, o.id)));
        found.truncate(limit);
        Ok(found)
    }

    fn upcoming_subscription_ids(
        &mut self,
        shop_id: ShopId,
        until: Timestamp,
        limit: usize,
    ) -> StoreResult<Vec<SubscriptionId>> {
        use SubscriptionStatus::{Active, Processing, Scheduled};
        let mut upcoming: Vec<&StoredSubscription> = self
            .subscriptions
            .iter()
            .filter(|s| {
                s.shop_id == shop_id
                    && [Active, Scheduled, Processing].contains(&s.state.subscription_status)
                    && s.state
                        .next_order_datetime
                        .is_some_and(|next| next <= until)
            })
            .collect();
        upcoming.sort_by_key(|s| (s.state.next_order_datetime, s.id));
        Ok(upcoming.into_iter().take(limit).map(|s| s.id).collect())
    }

    fn expiring_payment_subscriptions(
        &mut self,
        shop_id: ShopId,
        by: Timestamp,
        limit: usize,
    ) -> StoreResult<Vec<SubscriptionId>> {
        use SubscriptionStatus::{Active, Paused, Scheduled};
        let mut expiring: Vec<(Timestamp, SubscriptionId)> = self
            .subscriptions
            .iter()
            .filter(|s| {
                s.shop_id == shop_id
                    && [Active, Paused, Scheduled].contains(&s.state.subscription_status)
                    && !self.expiring_payment_notified.contains_key(&s.id)
            })
            .filter_map(|s| {
                let expires_at = s.state.payment_method_expires_at?.expires_at();
                (expires_at <= by).then_some((expires_at, s.id))
            })
            .collect();
        expiring.sort();
        Ok(expiring.into_iter().take(limit).map(|(_, id)| id).collect())
    }

    fn set_expiring_payment_notified(
        &mut self,
        shop_id: ShopId,
        id: SubscriptionId,
        at: Option<Timestamp>,
    ) -> StoreResult<()> {
        if self.subscription_mut(shop_id, id).is_none() {
            return Ok(());
        }
        match at {
            Some(at) => self.expiring_payment_notified.insert(id, at),
            None => self.expiring_payment_notified.remove(&id),
        };
        Ok(())
    }

    fn scheduler_backlog(&mut self, now: Timestamp) -> StoreResult<SchedulerBacklog> {
        let mut backlog = SchedulerBacklog::default();
        for s in &self.subscriptions {
            let state = &s.state;
            match state.subscription_status {
                SubscriptionStatus::Processing => backlog.processing += 1,
                SubscriptionStatus::Active
                    if state.next_order_datetime.is_some_and(|next| next <= now) =>
                {
                    if is_due(state, now) {
                        backlog.due += 1;
                    } else {
                        backlog.waiting_retry += 1;
                    }
                }
                _ => {}
            }
        }
        Ok(backlog)
    }

    fn due_resumptions(
        &mut self,
        shop_id: Option<ShopId>,
        now: Timestamp,
        limit: usize,
    ) -> StoreResult<Vec<(ShopId, SubscriptionId)>> {
        let mut due: Vec<(Timestamp, ShopId, SubscriptionId)> = self
            .subscriptions
            .iter()
            .filter(|s| shop_id.is_none_or(|shop_id| s.shop_id == shop_id))
            .filter(|s| is_due_to_resume(&s.state, now))
            .filter_map(|s| s.state.resume_on.map(|resume| (resume.at, s.shop_id, s.id)))
            .collect();
        due.sort();
        Ok(due
            .into_iter()
            .take(limit)
            .map(|(_, shop_id, id)| (shop_id, id))
            .collect())
    }

    fn lock_due_resumption(
        &mut self,
        shop_id: ShopId,
        id: SubscriptionId,
        now: Timestamp,
    ) -> StoreResult<bool> {
        // One unit of work at a time already: only whether it is due.
        Ok(self
            .subscription_mut(shop_id, id)
            .is_some_and(|s| is_due_to_resume(&s.state, now)))
    }
}

/// Whether a paused subscription's automatic resume has come at `now`.
fn is_due_to_resume(state: &SubscriptionState, now: Timestamp) -> bool {
    state.subscription_status == SubscriptionStatus::Paused
        && state.resume_on.is_some_and(|resume| resume.at <= now)
}

impl CancellationReasonRepository for MemoryState {
    fn cancellation_reasons(&mut self, shop_id: ShopId) -> StoreResult<Vec<CancellationReason>> {
        Ok(self
            .cancellation_reasons
            .get(&shop_id)
            .cloned()
            .unwrap_or_default())
    }

    fn replace_cancellation_reasons(
        &mut self,
        shop_id: ShopId,
        reasons: &[CancellationReason],
        _now: Timestamp,
    ) -> StoreResult<()> {
        // As the store's unique key (shop, code).
        for (index, reason) in reasons.iter().enumerate() {
            if reasons[..index].iter().any(|r| r.code == reason.code) {
                return Err(StorageError::unique_violation(
                    "a cancellation reason of the shop has this code",
                ));
            }
        }
        self.cancellation_reasons.insert(shop_id, reasons.to_vec());
        Ok(())
    }
}

impl DunningPolicyRepository for MemoryState {
    fn dunning_policy(&mut self, shop_id: ShopId) -> StoreResult<Option<DunningPolicy>> {
        Ok(self.dunning_policies.get(&shop_id).cloned())
    }

    fn save_dunning_policy(
        &mut self,
        shop_id: ShopId,
        policy: &DunningPolicy,
        _now: Timestamp,
    ) -> StoreResult<()> {
        self.dunning_policies.insert(shop_id, policy.clone());
        Ok(())
    }
}

impl crate::subscriptions::imports::ImportRepository for MemoryState {
    fn insert_import(
        &mut self,
        shop_id: ShopId,
        figures: &crate::subscriptions::imports::ImportFigures,
        now: Timestamp,
    ) -> StoreResult<crate::kernel::ids::ImportId> {
        let id = crate::kernel::ids::ImportId(self.subscription_imports.len() as i64 + 1);
        let progress = crate::subscriptions::imports::ImportProgress {
            id,
            status: crate::subscriptions::imports::ImportStatus::Running,
            figures: *figures,
            started_at: now,
            updated_at: now,
            finished_at: None,
        };
        self.subscription_imports.push((shop_id, progress));
        Ok(id)
    }

    fn update_import(
        &mut self,
        shop_id: ShopId,
        id: crate::kernel::ids::ImportId,
        figures: &crate::subscriptions::imports::ImportFigures,
        status: crate::subscriptions::imports::ImportStatus,
        now: Timestamp,
    ) -> StoreResult<()> {
        let found = self
            .subscription_imports
            .iter_mut()
            .find(|(shop, progress)| *shop == shop_id && progress.id == id);
        if let Some((_, progress)) = found {
            progress.figures = *figures;
            progress.status = status;
            progress.updated_at = now;
            if status != crate::subscriptions::imports::ImportStatus::Running {
                progress.finished_at = Some(now);
            }
        }
        Ok(())
    }

    fn import_progress(
        &mut self,
        shop_id: ShopId,
        id: crate::kernel::ids::ImportId,
    ) -> StoreResult<Option<crate::subscriptions::imports::ImportProgress>> {
        Ok(self
            .subscription_imports
            .iter()
            .find(|(shop, progress)| *shop == shop_id && progress.id == id)
            .map(|(_, progress)| progress.clone()))
    }

    fn recent_imports(
        &mut self,
        shop_id: ShopId,
        limit: i64,
    ) -> StoreResult<Vec<crate::subscriptions::imports::ImportProgress>> {
        Ok(self
            .subscription_imports
            .iter()
            .rev()
            .filter(|(shop, _)| *shop == shop_id)
            .take(usize::try_from(limit).unwrap_or(0))
            .map(|(_, progress)| progress.clone())
            .collect())
    }
}

impl MemoryState {
    /// The line items of the shop's subscriptions that are not `inactive`.
    fn live_line_items(
        &self,
        shop_id: ShopId,
    ) -> impl Iterator<Item = (SubscriptionId, &SubscriptionLineItem)> {
        self.subscriptions
            .iter()
            .filter(move |s| {
                s.shop_id == shop_id && s.state.subscription_status != SubscriptionStatus::Inactive
            })
            .flat_map(|s| s.line_items.iter().map(move |item| (s.id, item)))
    }
}

impl SubscriptionGroupRepository for MemoryState {
    fn subscription_groups(
        &mut self,
        shop_id: ShopId,
        limit: i64,
        page: i64,
    ) -> StoreResult<(Vec<StoredGroup>, i64)> {
        let mut groups: Vec<StoredGroup> = self
            .subscription_groups
            .iter()
            .filter(|(shop, _)| *shop == shop_id)
            .map(|(_, group)| group.clone())
            .collect();
        groups.sort_by_key(|group| group.id);
        let total = groups.len() as i64;
        let skip = usize::try_from(page.max(1).saturating_sub(1).saturating_mul(limit))
            .unwrap_or(usize::MAX);
        let take = usize::try_from(limit).unwrap_or(0);
        Ok((groups.into_iter().skip(skip).take(take).collect(), total))
    }

    fn subscription_group(
        &mut self,
        shop_id: ShopId,
        id: GroupId,
    ) -> StoreResult<Option<StoredGroup>> {
        Ok(self
            .subscription_groups
            .iter()
            .find(|(shop, group)| *shop == shop_id && group.id == id)
            .map(|(_, group)| group.clone()))
    }

    fn save_subscription_group(
        &mut self,
        shop_id: ShopId,
        group: &StoredGroup,
    ) -> StoreResult<StoredGroup> {
        let mut saved = group.clone();
        if saved.id == GroupId(0) {
            self.group_count += 1;
            saved.id = GroupId(self.group_count);
        }
        for rule in &mut saved.billing_rules {
            if rule.id == BillingRuleId(0) {
                self.billing_rule_count += 1;
                rule.id = BillingRuleId(self.billing_rule_count);
            }
            rule.subscription_group_id = saved.id;
        }
        self.subscription_groups
            .retain(|(shop, stored)| !(*shop == shop_id && stored.id == saved.id));
        self.subscription_groups.push((shop_id, saved.clone()));
        Ok(saved)
    }

    fn delete_subscription_group(&mut self, shop_id: ShopId, id: GroupId) -> StoreResult<bool> {
        let before = self.subscription_groups.len();
        self.subscription_groups
            .retain(|(shop, group)| !(*shop == shop_id && group.id == id));
        Ok(self.subscription_groups.len() < before)
    }

    fn lock_subscription_group(&mut self, _shop_id: ShopId, _id: GroupId) -> StoreResult<()> {
        Ok(())
    }

    fn live_subscriptions_of_group(
        &mut self,
        shop_id: ShopId,
        group_id: GroupId,
    ) -> StoreResult<i64> {
        let mut subscriptions: Vec<SubscriptionId> = self
            .live_line_items(shop_id)
            .filter(|(_, item)| item.subscription_group_id == Some(group_id))
            .map(|(id, _)| id)
            .collect();
        subscriptions.dedup();
        Ok(subscriptions.len() as i64)
    }

    fn boxes_of_group(&mut self, shop_id: ShopId, group_id: GroupId) -> StoreResult<i64> {
        Ok(self
            .boxes
            .iter()
            .filter(|(shop, b)| *shop == shop_id && b.svc_subscription_group_id == group_id)
            .count() as i64)
    }

    fn billing_rules_in_use(
        &mut self,
        shop_id: ShopId,
        rule_ids: &[BillingRuleId],
    ) -> StoreResult<Vec<BillingRuleId>> {
        let mut used: Vec<BillingRuleId> = self
            .live_line_items(shop_id)
            .filter_map(|(_, item)| item.subscription_group_billing_rules_id)
            .filter(|id| rule_ids.contains(id))
            .collect();
        used.sort_unstable();
        used.dedup();
        Ok(used)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_are_one_based_and_end_empty() {
        let items = vec![1, 2, 3, 4, 5];
        assert_eq!(page_of(items.clone(), 2, 1), [1, 2]);
        assert_eq!(page_of(items.clone(), 2, 3), [5]);
        assert!(page_of(items.clone(), 2, 4).is_empty());
        assert!(page_of(items, 0, 1).is_empty());
    }

    #[test]
    fn a_search_finds_each_field_and_the_full_name_without_case() {
        let columns = CustomerColumns {
            email: "Ada@Example.test".into(),
            first_name: "Ada".into(),
            last_name: "Lovelace".into(),
            phone: "+1 555 0100".into(),
            notes: None,
        };
        for found in ["ada", "LOVE", "a lovelace", "example.TEST", "555 01"] {
            assert!(found_by(&columns, found), "{found}");
        }
        for missed in ["ada  lovelace", "%", "_", "bob"] {
            assert!(!found_by(&columns, missed), "{missed}");
        }
    }

    #[test]
    fn a_saved_state_may_not_take_another_subscriptions_key() {
        let mut state = MemoryState::default();
        let keyed = |key: &str| SubscriptionState {
            idempotency_key: Some(key.into()),
            ..crate::subscriptions::repository::tests::stored(
                &crate::subscriptions::resources::tests::subscription(),
            )
            .state
        };
        let now = Timestamp::from_micros(0);
        let first = state
            .insert_subscription(ShopId(1), &keyed("k1"), &[], now)
            .unwrap();
        let second = state
            .insert_subscription(ShopId(1), &keyed("k2"), &[], now)
            .unwrap();
        assert!(
            state
                .save_subscription(ShopId(1), second, &keyed("k1"))
                .unwrap_err()
                .is_unique_violation()
        );
        assert!(
            state
                .save_subscription(ShopId(1), first, &keyed("k1"))
                .unwrap()
        );
        assert!(
            !state
                .save_subscription(ShopId(1), SubscriptionId(99), &keyed("k1"))
                .unwrap()
        );
        assert!(
            state
                .save_subscription(ShopId(2), second, &keyed("k1"))
                .is_ok()
        );
    }
}
