//! Shops' activity counts (kernel::activity): a tally is added with upserts.

use std::collections::BTreeMap;

use diesel::prelude::*;
use diesel::upsert::excluded;
use mercer_domain::kernel::activity::{Activity, ActivityCount, ActivityRepository};
use mercer_domain::kernel::error::StoreResult;
use mercer_domain::kernel::ids::ShopId;
use mercer_domain::{StorageError, Timestamp};

use crate::connection::{DbConnection, KeepPrepared, statement_sites};
use crate::repos::{ROWS_PER_STATEMENT, StoreTx, next_counter_shard};
use crate::schema::shop_activity as t;
use crate::store::storage_error;

statement_sites!(AddActivity);

impl ActivityRepository for StoreTx<'_> {
    fn add_activity(&mut self, counts: &[ActivityCount]) -> StoreResult<()> {
        if let Some(held) = self.held.as_deref_mut() {
            held.hold_activity(counts);
            return Ok(());
        }
        let shard = match &*self.conn {
            DbConnection::Pg(_) => next_counter_shard(),
            DbConnection::Sqlite(_) => 0,
        };
        let row = |count: &ActivityCount| {
            (
                t::shop_id.eq(count.shop_id.0),
                t::bucket.eq(count.bucket.as_micros()),
                t::activity.eq(count.activity.as_str()),
                t::shard.eq(shard),
                t::count.eq(count.count),
            )
        };
        match &mut *self.conn {
            // One statement for the whole tally, one round trip: its buckets are distinct, so
            // no row is upserted twice in it.
            DbConnection::Pg(c) => {
                for chunk in counts.chunks(ROWS_PER_STATEMENT) {
                    let rows: Vec<_> = chunk.iter().map(row).collect();
                    diesel::insert_into(t::table)
                        .values(&rows)
                        .on_conflict((t::shop_id, t::bucket, t::activity, t::shard))
                        .do_update()
                        .set(t::count.eq(t::count + excluded(t::count)))
                        .execute(c)
                        .map_err(storage_error)?;
                }
            }
            // A row at a time: one prepared statement, kept (diesel declines to cache an
            // upsert by itself; it was parsed and planned again for every row, twice in every
            // ingest transaction), and no round trip.
            DbConnection::Sqlite(c) => {
                for count in counts {
                    KeepPrepared::<AddActivity, _>::new(
                        diesel::insert_into(t::table)
                            .values(row(count))
                            .on_conflict((t::shop_id, t::bucket, t::activity, t::shard))
                            .do_update()
                            .set(t::count.eq(t::count + excluded(t::count)))
                            .returning(t::count),
                    )
                    .get_result::<i64>(c)
                    .map_err(storage_error)?;
                }
            }
        }
        Ok(())
    }

    fn shop_activity_since(
        &mut self,
        shop_id: ShopId,
        since: Timestamp,
    ) -> StoreResult<Vec<ActivityCount>> {
        let rows = t::table
            .filter(t::shop_id.eq(shop_id.0))
            .filter(t::bucket.ge(since.as_micros()))
            .select((t::bucket, t::activity, t::count))
            .load::<(i64, String, i64)>(self.conn)
            .map_err(storage_error)?;
        // A bucket's shards summed: one count per bucket and activity.
        let mut summed: BTreeMap<(i64, String), i64> = BTreeMap::new();
        for (bucket, activity, count) in rows {
            let sum = summed.entry((bucket, activity)).or_default();
            *sum = sum.checked_add(count).ok_or_else(|| {
                StorageError::other("shop activity: a count past the largest integer")
            })?;
        }
        summed
            .into_iter()
            .map(|((bucket, activity), count)| {
                Ok(ActivityCount {
                    shop_id,
                    activity: Activity::parse(&activity).ok_or_else(|| {
                        StorageError::other(format!("shop activity: unknown {activity:?}"))
                    })?,
                    bucket: Timestamp::from_micros(bucket),
                    count,
                })
            })
            .collect()
    }

    fn prune_activity(&mut self, before: Timestamp) -> StoreResult<usize> {
        diesel::delete(t::table.filter(t::bucket.lt(before.as_micros())))
            .execute(self.conn)
            .map_err(storage_error)
    }
}
