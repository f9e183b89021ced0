//! Sync runs.

use diesel::prelude::*;
use mercer_domain::kernel::error::StoreResult;
use mercer_domain::kernel::ids::{ShopId, SyncId};
use mercer_domain::platform::SyncRepository;
use mercer_domain::platform::destinations::Topic;
use mercer_domain::platform::sync::{SyncRun, SyncStatus};
use mercer_domain::{StorageError, Timestamp};

use crate::connection::on_backend;
use crate::repos::StoreTx;
use crate::schema::sync_runs;
use crate::store::{storable, storage_error};

#[derive(Queryable, Selectable)]
#[diesel(table_name = sync_runs)]
struct SyncRow {
    id: i64,
    shop_id: i64,
    topic: String,
    status: String,
    pages: i64,
    items: i64,
    skipped: i64,
    error: Option<String>,
    started_at: i64,
    heartbeat_at: i64,
    finished_at: Option<i64>,
    next_cursor: Option<String>,
}

impl TryFrom<SyncRow> for SyncRun {
    type Error = StorageError;

    fn try_from(row: SyncRow) -> Result<Self, StorageError> {
        Ok(SyncRun {
            id: SyncId(row.id),
            shop_id: ShopId(row.shop_id),
            topic: Topic::parse(&row.topic)
                .ok_or_else(|| StorageError::other("stored sync topic"))?,
            status: SyncStatus::parse(&row.status)
                .ok_or_else(|| StorageError::other("stored sync status"))?,
            pages: row.pages,
            items: row.items,
            skipped: row.skipped,
            error: row.error,
            started_at: Timestamp::from_micros(row.started_at),
            heartbeat_at: Timestamp::from_micros(row.heartbeat_at),
            finished_at: row.finished_at.map(Timestamp::from_micros),
            next_cursor: row.next_cursor,
        })
    }
}

impl SyncRepository for StoreTx<'_> {
    fn running_sync(&mut self, shop_id: ShopId, topic: Topic) -> StoreResult<Option<SyncRun>> {
        sync_runs::table
            .filter(sync_runs::shop_id.eq(shop_id.0))
            .filter(sync_runs::topic.eq(topic.as_str()))
            .filter(sync_runs::status.eq(SyncStatus::Running.as_str()))
            .select(SyncRow::as_select())
            .first(self.conn)
            .optional()
            .map_err(storage_error)?
            .map(SyncRun::try_from)
            .transpose()
    }

    fn insert_sync_run(
        &mut self,
        shop_id: ShopId,
        topic: Topic,
        now: Timestamp,
    ) -> StoreResult<SyncRun> {
        let values = (
            sync_runs::shop_id.eq(shop_id.0),
            sync_runs::topic.eq(topic.as_str()),
            sync_runs::status.eq(SyncStatus::Running.as_str()),
            sync_runs::pages.eq(0),
            sync_runs::items.eq(0),
            sync_runs::skipped.eq(0),
            sync_runs::started_at.eq(now.as_micros()),
            sync_runs::heartbeat_at.eq(now.as_micros()),
        );
        let row: SyncRow = on_backend!(&mut *self.conn, |c| {
            diesel::insert_into(sync_runs::table)
                .values(values)
                .returning(SyncRow::as_returning())
                .get_result(c)
        })
        .map_err(storage_error)?;
        row.try_into()
    }

    fn record_sync_page(
        &mut self,
        id: SyncId,
        items: i64,
        skipped: i64,
        next_cursor: Option<&str>,
        now: Timestamp,
    ) -> StoreResult<bool> {
        let running = sync_runs::table
            .find(id.0)
            .filter(sync_runs::status.eq(SyncStatus::Running.as_str()));
        let changed = diesel::update(running)
            .set((
                sync_runs::pages.eq(sync_runs::pages + 1),
                sync_runs::items.eq(sync_runs::items + items),
                sync_runs::skipped.eq(sync_runs::skipped + skipped),
                // The connector's cursor: a NUL in it (which PostgreSQL refuses) is replaced.
                sync_runs::next_cursor.eq(next_cursor.map(storable)),
                sync_runs::heartbeat_at.eq(now.as_micros()),
            ))
            .execute(self.conn)
            .map_err(storage_error)?;
        Ok(changed == 1)
    }

    fn finish_sync(
        &mut self,
        id: SyncId,
        status: SyncStatus,
        error: Option<&str>,
        now: Timestamp,
    ) -> StoreResult<()> {
        diesel::update(sync_runs::table.find(id.0))
            .set((
                sync_runs::status.eq(status.as_str()),
                sync_runs::error.eq(error.map(storable)),
                sync_runs::heartbeat_at.eq(now.as_micros()),
                sync_runs::finished_at.eq(Some(now.as_micros())),
            ))
            .execute(self.conn)
            .map_err(storage_error)?;
        Ok(())
    }

    fn recent_sync_runs(&mut self, shop_id: ShopId, limit: usize) -> StoreResult<Vec<SyncRun>> {
        sync_runs::table
            .filter(sync_runs::shop_id.eq(shop_id.0))
            .order(sync_runs::id.desc())
            .limit(i64::try_from(limit).unwrap_or(i64::MAX))
            .select(SyncRow::as_select())
            .load(self.conn)
            .map_err(storage_error)?
            .into_iter()
            .map(SyncRun::try_from)
            .collect()
    }

    fn sync_run(&mut self, id: SyncId) -> StoreResult<Option<SyncRun>> {
        sync_runs::table
            .find(id.0)
            .select(SyncRow::as_select())
            .first(self.conn)
            .optional()
            .map_err(storage_error)?
            .map(SyncRun::try_from)
            .transpose()
    }
}
