//! Subscription CSV imports and their progress (migration 90): a row per import, its figures
//! rewritten after every batch of rows.

use diesel::prelude::*;
use mercer_domain::Timestamp;
use mercer_domain::kernel::error::StoreResult;
use mercer_domain::kernel::ids::{ImportId, ShopId};
use mercer_domain::subscriptions::imports::{
    ImportFigures, ImportProgress, ImportRepository, ImportStatus,
};

use super::{corrupt, time};
use crate::connection::on_backend;
use crate::repos::StoreTx;
use crate::schema::subscription_imports as t;
use crate::store::storage_error;

type Row = (i64, i64, i64, i64, i64, i64, i64, i64, String, Option<i64>);

/// A stored count as a count (never negative: only Mercer writes them).
fn count(value: i64) -> u64 {
    u64::try_from(value).unwrap_or_default()
}

fn progress(row: Row) -> StoreResult<ImportProgress> {
    let (id, rows, done, created, skipped, failed, started, updated, status, finished) = row;
    let status = ImportStatus::parse(&status)
        .ok_or_else(|| corrupt("import", id, format!("status {status:?}")))?;
    Ok(ImportProgress {
        id: ImportId(id),
        status,
        figures: ImportFigures {
            rows: count(rows),
            rows_done: count(done),
            created: count(created),
            skipped_existing: count(skipped),
            failed_rows: count(failed),
        },
        started_at: time(started),
        updated_at: time(updated),
        finished_at: finished.map(time),
    })
}

/// A count as stored (a file's rows are far fewer than `i64::MAX`).
fn stored(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

const COLUMNS: (
    t::id,
    t::rows_total,
    t::rows_done,
    t::created,
    t::skipped_existing,
    t::failed_rows,
    t::started_at,
    t::updated_at,
    t::status,
    t::finished_at,
) = (
    t::id,
    t::rows_total,
    t::rows_done,
    t::created,
    t::skipped_existing,
    t::failed_rows,
    t::started_at,
    t::updated_at,
    t::status,
    t::finished_at,
);

impl ImportRepository for StoreTx<'_> {
    fn insert_import(
        &mut self,
        shop_id: ShopId,
        figures: &ImportFigures,
        now: Timestamp,
    ) -> StoreResult<ImportId> {
        let values = (
            t::shop_id.eq(shop_id.0),
            t::rows_total.eq(stored(figures.rows)),
            t::rows_done.eq(stored(figures.rows_done)),
            t::created.eq(stored(figures.created)),
            t::skipped_existing.eq(stored(figures.skipped_existing)),
            t::failed_rows.eq(stored(figures.failed_rows)),
            t::started_at.eq(now.as_micros()),
            t::updated_at.eq(now.as_micros()),
            t::status.eq(ImportStatus::Running.as_str()),
        );
        on_backend!(&mut *self.conn, |c| {
            diesel::insert_into(t::table)
                .values(values)
                .returning(t::id)
                .get_result(c)
        })
        .map(ImportId)
        .map_err(storage_error)
    }

    fn update_import(
        &mut self,
        shop_id: ShopId,
        id: ImportId,
        figures: &ImportFigures,
        status: ImportStatus,
        now: Timestamp,
    ) -> StoreResult<()> {
        let finished = (status != ImportStatus::Running).then_some(now.as_micros());
        diesel::update(
            t::table
                .filter(t::id.eq(id.0))
                .filter(t::shop_id.eq(shop_id.0)),
        )
        .set((
            t::rows_done.eq(stored(figures.rows_done)),
            t::created.eq(stored(figures.created)),
            t::skipped_existing.eq(stored(figures.skipped_existing)),
            t::failed_rows.eq(stored(figures.failed_rows)),
            t::updated_at.eq(now.as_micros()),
            t::status.eq(status.as_str()),
            t::finished_at.eq(finished),
        ))
        .execute(self.conn)
        .map(drop)
        .map_err(storage_error)
    }

    fn import_progress(
        &mut self,
        shop_id: ShopId,
        id: ImportId,
    ) -> StoreResult<Option<ImportProgress>> {
        t::table
            .filter(t::id.eq(id.0))
            .filter(t::shop_id.eq(shop_id.0))
            .select(COLUMNS)
            .first::<Row>(self.conn)
            .optional()
            .map_err(storage_error)?
            .map(progress)
            .transpose()
    }

    fn recent_imports(&mut self, shop_id: ShopId, limit: i64) -> StoreResult<Vec<ImportProgress>> {
        t::table
            .filter(t::shop_id.eq(shop_id.0))
            .order(t::id.desc())
            .limit(limit)
            .select(COLUMNS)
            .load::<Row>(self.conn)
            .map_err(storage_error)?
            .into_iter()
            .map(progress)
            .collect()
    }
}
