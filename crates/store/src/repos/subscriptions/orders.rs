//! The scheduler's storage (docs/scheduler.md): due subscriptions, found through the
//! `(subscription_status, next_order_datetime)` index and locked (`FOR UPDATE SKIP LOCKED` on
//! PostgreSQL, so several processes take different ones), the attempts to place their orders,
//! and payment methods not yet announced as expiring.

use diesel::dsl::count_star;
use diesel::prelude::*;
use mercer_domain::kernel::error::StoreResult;
use mercer_domain::kernel::ids::ShopId;
use mercer_domain::kernel::ids::{SubscriptionId, SubscriptionOrderId};
use mercer_domain::subscriptions::repository::{
    NewSubscriptionOrder, OrderAttemptEnd, OrderAttemptStatus, OrderFilter, SchedulerBacklog,
    StoredSubscription, SubscriptionOrder, SubscriptionOrderRepository,
};
use mercer_domain::subscriptions::resources::SubscriptionStatus;
use mercer_domain::{StorageError, Timestamp};

use super::records::whole_subscriptions;
use super::{corrupt, time};
use crate::connection::{
    DbConnection, KeepPrepared, on_backend, planned_each_time, statement_sites,
};
use crate::repos::StoreTx;
use crate::schema::{
    shops, subscription_orders, subscription_payment_notices, subscription_resumptions,
    subscription_schedule,
};
use crate::store::{storable, storage_error};

statement_sites!(FinishPlaced, FinishFailed);

#[derive(Queryable, Selectable)]
#[diesel(table_name = subscription_orders)]
struct OrderRow {
    id: i64,
    shop_id: i64,
    subscription_id: i64,
    scheduled_at: i64,
    attempt: i64,
    idempotency_key: String,
    status: String,
    due_at: i64,
    platform_order_id: Option<String>,
    platform_payment_id: Option<String>,
    failure_code: Option<String>,
    failure_reason: Option<String>,
    finished_at: Option<i64>,
    created_at: i64,
    updated_at: i64,
}

impl OrderRow {
    fn into_order(self) -> StoreResult<SubscriptionOrder> {
        let status = OrderAttemptStatus::parse(&self.status)
            .ok_or_else(|| corrupt("subscription order", self.id, "status"))?;
        Ok(SubscriptionOrder {
            id: SubscriptionOrderId(self.id),
            shop_id: ShopId(self.shop_id),
            subscription_id: SubscriptionId(self.subscription_id),
            scheduled_at: time(self.scheduled_at),
            attempt: self.attempt,
            idempotency_key: self.idempotency_key,
            status,
            due_at: time(self.due_at),
            platform_order_id: self.platform_order_id,
            platform_payment_id: self.platform_payment_id,
            failure_code: self.failure_code,
            failure_reason: self.failure_reason,
            finished_at: self.finished_at.map(time),
            created_at: time(self.created_at),
            updated_at: time(self.updated_at),
        })
    }
}

fn orders(rows: Vec<OrderRow>) -> StoreResult<Vec<SubscriptionOrder>> {
    rows.into_iter().map(OrderRow::into_order).collect()
}

const PLACING: &str = "placing";

/// Subscriptions in `$status` whose order is due at `$now`: the date has come, no retry wait
/// runs. Read along the `(subscription_status, next_order_datetime)` index.
macro_rules! due {
    ($status:expr, $now:expr) => {{
        use subscription_schedule as s;
        s::table
            .filter(s::subscription_status.eq($status))
            .filter(s::next_order_datetime.le($now))
            .filter(
                s::next_processing_datetime
                    .is_null()
                    .or(s::next_processing_datetime.le($now)),
            )
    }};
}

impl SubscriptionOrderRepository for StoreTx<'_> {
    fn lock_due_subscriptions(
        &mut self,
        status: SubscriptionStatus,
        now: Timestamp,
        limit: usize,
    ) -> StoreResult<Vec<(ShopId, SubscriptionId)>> {
        use subscription_schedule as s;
        let (status, now, limit) = (status.as_str(), now.as_micros(), limit as i64);
        // A deleted shop places no more orders. Its ids are read once per statement (a few
        // rows, usually none), so the due rows still come off the status and date index.
        let deleted_shops = || {
            shops::table
                .filter(shops::deleted_at.is_not_null())
                .select(shops::id)
        };
        // Ties of the order date come in the index's order: no sort of a large tie. Planned
        // for its values, as the queues are: the table changes fast under a burst.
        planned_each_time(self.conn, |conn| match conn {
            // The claiming transaction is `BEGIN IMMEDIATE`: one claimer at a time.
            DbConnection::Sqlite(c) => due!(status, now)
                .filter(s::shop_id.ne_all(deleted_shops()))
                .order(s::next_order_datetime.asc())
                .limit(limit)
                .select((s::shop_id, s::id))
                .load::<(i64, i64)>(c),
            // Several processes claim at once: each takes rows the others have not locked.
            DbConnection::Pg(c) => due!(status, now)
                .filter(s::shop_id.ne_all(deleted_shops()))
                .order(s::next_order_datetime.asc())
                .limit(limit)
                .select((s::shop_id, s::id))
                .for_update()
                .skip_locked()
                .load::<(i64, i64)>(c),
        })
        .map(|due| {
            due.into_iter()
                .map(|(shop_id, id)| (ShopId(shop_id), SubscriptionId(id)))
                .collect()
        })
        .map_err(storage_error)
    }

    fn subscriptions_by_ids(
        &mut self,
        shop_id: ShopId,
        ids: &[SubscriptionId],
    ) -> StoreResult<Vec<StoredSubscription>> {
        let ids: Vec<i64> = ids.iter().map(|id| id.0).collect();
        whole_subscriptions(self.conn, shop_id, &ids)
    }

    fn insert_subscription_order(
        &mut self,
        order: &NewSubscriptionOrder,
    ) -> StoreResult<SubscriptionOrderId> {
        self.insert_subscription_orders(std::slice::from_ref(order))?
            .pop()
            .ok_or_else(|| StorageError::other("an inserted attempt's id did not come back"))
    }

    fn insert_subscription_orders(
        &mut self,
        orders: &[NewSubscriptionOrder],
    ) -> StoreResult<Vec<SubscriptionOrderId>> {
        use subscription_orders as t;
        if orders.is_empty() {
            return Ok(Vec::new());
        }
        let rows: Vec<_> = orders
            .iter()
            .map(|order| {
                (
                    t::shop_id.eq(order.shop_id.0),
                    t::subscription_id.eq(order.subscription_id.0),
                    t::scheduled_at.eq(order.scheduled_at.as_micros()),
                    t::attempt.eq(order.attempt),
                    t::idempotency_key.eq(order.idempotency_key.as_str()),
                    t::status.eq(PLACING),
                    t::due_at.eq(order.due_at.as_micros()),
                    t::created_at.eq(order.created_at.as_micros()),
                    t::updated_at.eq(order.created_at.as_micros()),
                )
            })
            .collect();
        // A multi-row insert's RETURNING promises no order: each id is matched to its attempt
        // by the attempt's unique key (subscription, order date, attempt).
        let inserted: Vec<(i64, i64, i64, i64)> = on_backend!(&mut *self.conn, |c| {
            diesel::insert_into(t::table)
                .values(&rows)
                .returning((t::id, t::subscription_id, t::scheduled_at, t::attempt))
                .get_results(c)
        })
        .map_err(storage_error)?;
        orders
            .iter()
            .map(|order| {
                let key = (
                    order.subscription_id.0,
                    order.scheduled_at.as_micros(),
                    order.attempt,
                );
                inserted
                    .iter()
                    .find(|(_, subscription, date, attempt)| {
                        (*subscription, *date, *attempt) == key
                    })
                    .map(|(id, ..)| SubscriptionOrderId(*id))
                    .ok_or_else(|| {
                        StorageError::other("an inserted attempt's id did not come back")
                    })
            })
            .collect()
    }

    fn subscription_order(
        &mut self,
        id: SubscriptionOrderId,
    ) -> StoreResult<Option<SubscriptionOrder>> {
        use subscription_orders as t;
        t::table
            .filter(t::id.eq(id.0))
            .select(OrderRow::as_select())
            .first(self.conn)
            .optional()
            .map_err(storage_error)?
            .map(OrderRow::into_order)
            .transpose()
    }

    fn attempts_of_date(
        &mut self,
        subscription_id: SubscriptionId,
        scheduled_at: Timestamp,
    ) -> StoreResult<Vec<SubscriptionOrder>> {
        use subscription_orders as t;
        // The unique index (subscription_id, scheduled_at, attempt) gives them in order.
        let rows = t::table
            .filter(t::subscription_id.eq(subscription_id.0))
            .filter(t::scheduled_at.eq(scheduled_at.as_micros()))
            .order(t::attempt.asc())
            .select(OrderRow::as_select())
            .load(self.conn)
            .map_err(storage_error)?;
        orders(rows)
    }

    fn attempts_of_dates(
        &mut self,
        dates: &[(SubscriptionId, Timestamp)],
    ) -> StoreResult<Vec<SubscriptionOrder>> {
        use subscription_orders as t;
        if dates.is_empty() {
            return Ok(Vec::new());
        }
        let ids: Vec<i64> = dates.iter().map(|(id, _)| id.0).collect();
        let days: Vec<i64> = dates.iter().map(|(_, at)| at.as_micros()).collect();
        // Each subscription's and each date's attempts, then only the pairs asked for.
        let rows = t::table
            .filter(t::subscription_id.eq_any(&ids))
            .filter(t::scheduled_at.eq_any(&days))
            .order((t::subscription_id.asc(), t::attempt.asc()))
            .select(OrderRow::as_select())
            .load(self.conn)
            .map_err(storage_error)?;
        let attempts = orders(rows)?;
        Ok(attempts
            .into_iter()
            .filter(|attempt| dates.contains(&(attempt.subscription_id, attempt.scheduled_at)))
            .collect())
    }

    fn set_order_platform_id(
        &mut self,
        id: SubscriptionOrderId,
        platform_order_id: &str,
        now: Timestamp,
    ) -> StoreResult<()> {
        use subscription_orders as t;
        diesel::update(
            t::table
                .filter(t::id.eq(id.0))
                .filter(t::status.eq(PLACING)),
        )
        .set((
            t::platform_order_id.eq(storable(platform_order_id).as_ref()),
            t::updated_at.eq(now.as_micros()),
        ))
        .execute(self.conn)
        .map(drop)
        .map_err(storage_error)
    }

    fn finish_subscription_order(
        &mut self,
        id: SubscriptionOrderId,
        end: &OrderAttemptEnd,
        now: Timestamp,
    ) -> StoreResult<Option<SubscriptionOrder>> {
        use subscription_orders as t;
        let placing = t::table
            .filter(t::id.eq(id.0))
            .filter(t::status.eq(PLACING));
        // Kept prepared (diesel plans an UPDATE anew each time otherwise): one runs per order.
        let ended: Vec<OrderRow> = match end {
            OrderAttemptEnd::Placed {
                platform_order_id,
                platform_payment_id,
            } => {
                let platform_order_id = storable(platform_order_id);
                let platform_payment_id = platform_payment_id
                    .as_deref()
                    .map(|id| storable(id).into_owned());
                on_backend!(&mut *self.conn, |c| {
                    KeepPrepared::<FinishPlaced, _>::new(
                        diesel::update(placing)
                            .set((
                                t::status.eq(OrderAttemptStatus::Placed.as_str()),
                                t::platform_order_id.eq(platform_order_id.as_ref()),
                                t::platform_payment_id.eq(platform_payment_id.as_deref()),
                                t::finished_at.eq(now.as_micros()),
                                t::updated_at.eq(now.as_micros()),
                            ))
                            .returning(OrderRow::as_returning()),
                    )
                    .load(c)
                })
            }
            OrderAttemptEnd::Failed { code, reason } => {
                let reason = storable(reason);
                on_backend!(&mut *self.conn, |c| {
                    KeepPrepared::<FinishFailed, _>::new(
                        diesel::update(placing)
                            .set((
                                t::status.eq(OrderAttemptStatus::Failed.as_str()),
                                t::failure_code.eq(code.as_str()),
                                t::failure_reason.eq(reason.as_ref()),
                                t::finished_at.eq(now.as_micros()),
                                t::updated_at.eq(now.as_micros()),
                            ))
                            .returning(OrderRow::as_returning()),
                    )
                    .load(c)
                })
            }
        }
        .map_err(storage_error)?;
        ended
            .into_iter()
            .next()
            .map(OrderRow::into_order)
            .transpose()
    }

    fn count_placing_orders(&mut self) -> StoreResult<i64> {
        use subscription_orders as t;
        // The partial index of attempts placing, which a generic plan could not use.
        planned_each_time(self.conn, |conn| {
            t::table
                .filter(t::status.eq(PLACING))
                .select(count_star())
                .get_result(conn)
        })
        .map_err(storage_error)
    }

    fn stalled_subscription_orders(
        &mut self,
        before: Timestamp,
        limit: usize,
    ) -> StoreResult<Vec<SubscriptionOrder>> {
        use subscription_orders as t;
        let rows = planned_each_time(self.conn, |conn| {
            t::table
                .filter(t::status.eq(PLACING))
                .filter(t::created_at.lt(before.as_micros()))
                .order((t::created_at.asc(), t::id.asc()))
                .limit(limit as i64)
                .select(OrderRow::as_select())
                .load(conn)
        })
        .map_err(storage_error)?;
        orders(rows)
    }

    fn orders_of_subscriptions(
        &mut self,
        subscription_ids: &[SubscriptionId],
        per_subscription: usize,
    ) -> StoreResult<Vec<SubscriptionOrder>> {
        use subscription_orders as t;
        let mut found = Vec::new();
        // One short read of the (subscription_id, id) index per subscription.
        for &subscription_id in subscription_ids {
            let rows = t::table
                .filter(t::subscription_id.eq(subscription_id.0))
                .order(t::id.desc())
                .limit(per_subscription as i64)
                .select(OrderRow::as_select())
                .load(self.conn)
                .map_err(storage_error)?;
            found.extend(orders(rows)?);
        }
        Ok(found)
    }

    fn shop_subscription_orders(
        &mut self,
        shop_id: ShopId,
        filter: &OrderFilter,
        limit: usize,
    ) -> StoreResult<Vec<SubscriptionOrder>> {
        use subscription_orders as t;
        let mut query = t::table.filter(t::shop_id.eq(shop_id.0)).into_boxed();
        if let Some(status) = filter.status {
            query = query.filter(t::status.eq(status.as_str()));
        }
        if let Some(from) = filter.from {
            query = query.filter(t::scheduled_at.ge(from.as_micros()));
        }
        if let Some(until) = filter.until {
            query = query.filter(t::scheduled_at.lt(until.as_micros()));
        }
        if let Some((at, id)) = filter.before {
            let at = at.as_micros();
            // The bound on scheduled_at alone is what the index can seek to; the OR settles
            // the attempts of that same date.
            query = query.filter(t::scheduled_at.le(at)).filter(
                t::scheduled_at
                    .lt(at)
                    .or(t::scheduled_at.eq(at).and(t::id.lt(id.0))),
            );
        }
        let rows = query
            .order((t::scheduled_at.desc(), t::id.desc()))
            .limit(i64::try_from(limit).unwrap_or(i64::MAX))
            .select(OrderRow::as_select())
            .load(self.conn)
            .map_err(storage_error)?;
        orders(rows)
    }

    fn upcoming_subscription_ids(
        &mut self,
        shop_id: ShopId,
        until: Timestamp,
        limit: usize,
    ) -> StoreResult<Vec<SubscriptionId>> {
        use subscription_schedule as s;
        let statuses = [
            SubscriptionStatus::Active,
            SubscriptionStatus::Scheduled,
            SubscriptionStatus::Processing,
        ]
        .map(SubscriptionStatus::as_str);
        s::table
            .filter(s::shop_id.eq(shop_id.0))
            .filter(s::next_order_datetime.le(until.as_micros()))
            .filter(s::subscription_status.eq_any(statuses))
            .order((s::next_order_datetime.asc(), s::id.asc()))
            .limit(limit as i64)
            .select(s::id)
            .load::<i64>(self.conn)
            .map(|ids| ids.into_iter().map(SubscriptionId).collect())
            .map_err(storage_error)
    }

    fn expiring_payment_subscriptions(
        &mut self,
        shop_id: ShopId,
        by: Timestamp,
        limit: usize,
    ) -> StoreResult<Vec<SubscriptionId>> {
        use subscription_payment_notices as n;
        let statuses = [
            SubscriptionStatus::Active,
            SubscriptionStatus::Paused,
            SubscriptionStatus::Scheduled,
        ]
        .map(SubscriptionStatus::as_str);
        // The partial index of methods not yet announced, by shop and expiry.
        n::table
            .filter(n::shop_id.eq(shop_id.0))
            .filter(n::expiring_payment_notified_at.is_null())
            .filter(n::payment_method_expires_at.is_not_null())
            .filter(n::payment_method_expires_at.le(by.as_micros()))
            .filter(n::subscription_status.eq_any(statuses))
            .order((n::payment_method_expires_at.asc(), n::id.asc()))
            .limit(limit as i64)
            .select(n::id)
            .load::<i64>(self.conn)
            .map(|ids| ids.into_iter().map(SubscriptionId).collect())
            .map_err(storage_error)
    }

    fn set_expiring_payment_notified(
        &mut self,
        shop_id: ShopId,
        id: SubscriptionId,
        at: Option<Timestamp>,
    ) -> StoreResult<()> {
        use subscription_payment_notices as n;
        diesel::update(
            n::table
                .filter(n::id.eq(id.0))
                .filter(n::shop_id.eq(shop_id.0)),
        )
        .set(n::expiring_payment_notified_at.eq(at.map(Timestamp::as_micros)))
        .execute(self.conn)
        .map(drop)
        .map_err(storage_error)
    }

    fn scheduler_backlog(&mut self, now: Timestamp) -> StoreResult<SchedulerBacklog> {
        use subscription_schedule as s;
        let now = now.as_micros();
        let active = SubscriptionStatus::Active.as_str();
        let due: i64 = due!(active, now)
            .select(count_star())
            .get_result(self.conn)
            .map_err(storage_error)?;
        // Retry waits are of orders whose date has come: the same index range.
        let waiting_retry: i64 = s::table
            .filter(s::subscription_status.eq(active))
            .filter(s::next_order_datetime.le(now))
            .filter(s::next_processing_datetime.gt(now))
            .select(count_star())
            .get_result(self.conn)
            .map_err(storage_error)?;
        let processing: i64 = s::table
            .filter(s::subscription_status.eq(SubscriptionStatus::Processing.as_str()))
            .select(count_star())
            .get_result(self.conn)
            .map_err(storage_error)?;
        Ok(SchedulerBacklog {
            due,
            processing,
            waiting_retry,
        })
    }

    fn due_resumptions(
        &mut self,
        shop_id: Option<ShopId>,
        now: Timestamp,
        limit: usize,
    ) -> StoreResult<Vec<(ShopId, SubscriptionId)>> {
        use subscription_resumptions as r;
        let mut query = r::table.into_boxed();
        if let Some(shop_id) = shop_id {
            query = query.filter(r::shop_id.eq(shop_id.0));
        }
        // Along the partial index of `resume_at`: only subscriptions paused until a date.
        query
            .filter(r::resume_at.le(now.as_micros()))
            .filter(r::subscription_status.eq(SubscriptionStatus::Paused.as_str()))
            .order((r::resume_at.asc(), r::id.asc()))
            .limit(limit as i64)
            .select((r::shop_id, r::id))
            .load::<(i64, i64)>(self.conn)
            .map(|due| {
                due.into_iter()
                    .map(|(shop_id, id)| (ShopId(shop_id), SubscriptionId(id)))
                    .collect()
            })
            .map_err(storage_error)
    }

    fn lock_due_resumption(
        &mut self,
        shop_id: ShopId,
        id: SubscriptionId,
        now: Timestamp,
    ) -> StoreResult<bool> {
        use subscription_resumptions as r;
        let paused = SubscriptionStatus::Paused.as_str();
        let due = r::table
            .filter(r::id.eq(id.0))
            .filter(r::shop_id.eq(shop_id.0))
            .filter(r::subscription_status.eq(paused))
            .filter(r::resume_at.le(now.as_micros()))
            .select(r::id);
        match &mut *self.conn {
            // The writing transaction is `BEGIN IMMEDIATE`: one writer at a time.
            DbConnection::Sqlite(c) => due.load::<i64>(c),
            // Another scheduler resuming it holds the row: it is that one's.
            DbConnection::Pg(c) => due.for_update().skip_locked().load::<i64>(c),
        }
        .map(|found| !found.is_empty())
        .map_err(storage_error)
    }
}
