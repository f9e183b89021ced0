//! The subscription analytics counters (subscriptions::analytics): additions are upserts into
//! the shop's day rows; a period reads its days' rows and the running figures' rows before it.

use std::collections::BTreeMap;

use diesel::prelude::*;
use diesel::upsert::excluded;
use mercer_domain::StorageError;
use mercer_domain::kernel::error::StoreResult;
use mercer_domain::kernel::ids::{ShopId, SubscriptionId};
use mercer_domain::subscriptions::analytics::{AnalyticsRepository, DayCount, Metric};

use crate::connection::DbConnection;
use crate::repos::{ROWS_PER_STATEMENT, StoreTx, next_counter_shard};
use crate::schema::{analytics_backfill, shop_analytics as t, subscriptions};
use crate::store::storage_error;

/// The rows found, a day's metric's shards summed into one count.
fn rows(shop_id: ShopId, found: Vec<(i64, String, i64)>) -> StoreResult<Vec<DayCount>> {
    let mut summed: BTreeMap<(i64, String), i64> = BTreeMap::new();
    for (day, metric, value) in found {
        let sum = summed.entry((day, metric)).or_default();
        *sum = sum.checked_add(value).ok_or_else(|| {
            StorageError::other("shop analytics: a count past the largest integer")
        })?;
    }
    summed
        .into_iter()
        .map(|((day, metric), value)| {
            Ok(DayCount {
                shop_id,
                day,
                metric: Metric::parse(&metric).ok_or_else(|| {
                    StorageError::other(format!("shop analytics: unknown metric {metric:?}"))
                })?,
                value,
            })
        })
        .collect()
}

impl AnalyticsRepository for StoreTx<'_> {
    fn add_analytics(&mut self, counts: &[DayCount]) -> StoreResult<()> {
        if let Some(held) = self.held.as_deref_mut() {
            held.hold_analytics(counts);
            return Ok(());
        }
        let names: Vec<String> = counts.iter().map(|count| count.metric.name()).collect();
        let shard = match &*self.conn {
            DbConnection::Pg(_) => next_counter_shard(),
            DbConnection::Sqlite(_) => 0,
        };
        let row = |(count, name): (&DayCount, &String)| {
            (
                t::shop_id.eq(count.shop_id.0),
                t::day.eq(count.day),
                t::metric.eq(name.clone()),
                t::shard.eq(shard),
                t::value.eq(count.value),
            )
        };
        match &mut *self.conn {
            // One statement per chunk: the rows of a tally are distinct, so none is upserted
            // twice in one statement.
            DbConnection::Pg(c) => {
                let all: Vec<_> = counts.iter().zip(&names).map(row).collect();
                for chunk in all.chunks(ROWS_PER_STATEMENT) {
                    diesel::insert_into(t::table)
                        .values(chunk)
                        .on_conflict((t::shop_id, t::day, t::metric, t::shard))
                        .do_update()
                        .set(t::value.eq(t::value + excluded(t::value)))
                        .execute(c)
                        .map_err(storage_error)?;
                }
            }
            // A row at a time: one prepared statement diesel keeps (see kernel/activity.rs).
            DbConnection::Sqlite(c) => {
                for pair in counts.iter().zip(&names) {
                    diesel::insert_into(t::table)
                        .values(row(pair))
                        .on_conflict((t::shop_id, t::day, t::metric, t::shard))
                        .do_update()
                        .set(t::value.eq(t::value + excluded(t::value)))
                        .execute(c)
                        .map_err(storage_error)?;
                }
            }
        }
        Ok(())
    }

    fn analytics_before(
        &mut self,
        shop_id: ShopId,
        day: i64,
        metrics: &[Metric],
    ) -> StoreResult<Vec<DayCount>> {
        let names: Vec<String> = metrics.iter().map(Metric::name).collect();
        let found = t::table
            .filter(t::shop_id.eq(shop_id.0))
            .filter(t::day.lt(day))
            .filter(t::metric.eq_any(names))
            .select((t::day, t::metric, t::value))
            .load::<(i64, String, i64)>(self.conn)
            .map_err(storage_error)?;
        rows(shop_id, found)
    }

    fn analytics_between(
        &mut self,
        shop_id: ShopId,
        from: i64,
        to: i64,
    ) -> StoreResult<Vec<DayCount>> {
        let found = t::table
            .filter(t::shop_id.eq(shop_id.0))
            .filter(t::day.between(from, to))
            .select((t::day, t::metric, t::value))
            .load::<(i64, String, i64)>(self.conn)
            .map_err(storage_error)?;
        rows(shop_id, found)
    }

    fn analytics_backfill_pending(&mut self) -> StoreResult<bool> {
        let found: Option<i64> = analytics_backfill::table
            .select(analytics_backfill::id)
            .first(self.conn)
            .optional()
            .map_err(storage_error)?;
        Ok(found.is_some())
    }

    fn finish_analytics_backfill(&mut self) -> StoreResult<()> {
        diesel::delete(analytics_backfill::table)
            .execute(self.conn)
            .map_err(storage_error)?;
        Ok(())
    }

    fn subscription_ids_after(
        &mut self,
        after: SubscriptionId,
        limit: usize,
    ) -> StoreResult<Vec<(ShopId, SubscriptionId)>> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        Ok(subscriptions::table
            .filter(subscriptions::id.gt(after.0))
            .order(subscriptions::id.asc())
            .limit(limit)
            .select((subscriptions::shop_id, subscriptions::id))
            .load::<(i64, i64)>(self.conn)
            .map_err(storage_error)?
            .into_iter()
            .map(|(shop, id)| (ShopId(shop), SubscriptionId(id)))
            .collect())
    }
}
