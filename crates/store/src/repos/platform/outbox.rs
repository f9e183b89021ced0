//! The outbox of calls to connectors.

use diesel::prelude::*;
use mercer_domain::kernel::error::StoreResult;
use mercer_domain::kernel::ids::{OutboxCallId, ShopId};
use mercer_domain::platform::OutboxRepository;
use mercer_domain::platform::outbox::{ConnectorCall, OutboxEntry, OutboxStatus};
use mercer_domain::{StorageError, Timestamp};

use crate::connection::{DbConnection, on_backend};
use crate::repos::StoreTx;
use crate::schema::connector_outbox;
use crate::store::{storable, storage_error};

#[derive(Queryable, Selectable)]
#[diesel(table_name = connector_outbox)]
struct OutboxRow {
    id: i64,
    shop_id: i64,
    call: String,
    status: String,
    attempts: i64,
    next_attempt_at: i64,
    last_error: Option<String>,
    created_at: i64,
}

impl TryFrom<OutboxRow> for OutboxEntry {
    type Error = StorageError;

    fn try_from(row: OutboxRow) -> Result<Self, StorageError> {
        Ok(OutboxEntry {
            id: OutboxCallId(row.id),
            shop_id: ShopId(row.shop_id),
            call: serde_json::from_str(&row.call).map_err(|error| {
                StorageError::other(format!(
                    "stored connector call {} does not parse: {error}",
                    row.id
                ))
            })?,
            status: OutboxStatus::parse(&row.status)
                .ok_or_else(|| StorageError::other("stored outbox status"))?,
            attempts: row.attempts,
            next_attempt_at: Timestamp::from_micros(row.next_attempt_at),
            last_error: row.last_error,
            created_at: Timestamp::from_micros(row.created_at),
        })
    }
}

/// The shop's pending calls due by `$now`, oldest due first (in the order recorded).
macro_rules! due {
    ($shop_id:expr, $now:expr, $limit:expr) => {
        connector_outbox::table
            .filter(connector_outbox::shop_id.eq($shop_id.0))
            .filter(connector_outbox::status.eq(OutboxStatus::Pending.as_str()))
            .filter(connector_outbox::next_attempt_at.le($now))
            .order((
                connector_outbox::next_attempt_at.asc(),
                connector_outbox::id.asc(),
            ))
            .limit($limit as i64)
            .select(OutboxRow::as_select())
    };
}

fn claim(
    conn: &mut DbConnection,
    shop_id: ShopId,
    now: i64,
    limit: usize,
) -> QueryResult<Vec<OutboxRow>> {
    match conn {
        DbConnection::Sqlite(c) => due!(shop_id, now, limit).load(c),
        // Several workers may deliver at once: each takes rows the others have not locked.
        DbConnection::Pg(c) => due!(shop_id, now, limit).for_update().skip_locked().load(c),
    }
}

impl OutboxRepository for StoreTx<'_> {
    fn insert_outbox_call(
        &mut self,
        shop_id: ShopId,
        call: &ConnectorCall,
        now: Timestamp,
    ) -> StoreResult<OutboxCallId> {
        let json =
            serde_json::to_string(call).map_err(|error| StorageError::other(error.to_string()))?;
        let values = (
            connector_outbox::shop_id.eq(shop_id.0),
            connector_outbox::topic.eq(call.topic().as_str()),
            connector_outbox::call.eq(&json),
            connector_outbox::status.eq(OutboxStatus::Pending.as_str()),
            connector_outbox::attempts.eq(0),
            connector_outbox::next_attempt_at.eq(now.as_micros()),
            connector_outbox::created_at.eq(now.as_micros()),
            connector_outbox::updated_at.eq(now.as_micros()),
        );
        on_backend!(&mut *self.conn, |c| {
            diesel::insert_into(connector_outbox::table)
                .values(values)
                .returning(connector_outbox::id)
                .get_result(c)
        })
        .map(OutboxCallId)
        .map_err(storage_error)
    }

    /// A claimed call's next attempt moves to the lease's end, so no other worker takes it
    /// meanwhile; if this worker dies, the call is due again when the lease ends.
    fn claim_outbox_calls(
        &mut self,
        shop_id: ShopId,
        now: Timestamp,
        limit: usize,
        lease_until: Timestamp,
    ) -> StoreResult<Vec<OutboxEntry>> {
        let rows = claim(self.conn, shop_id, now.as_micros(), limit).map_err(storage_error)?;
        let ids: Vec<i64> = rows.iter().map(|row| row.id).collect();
        if !ids.is_empty() {
            diesel::update(connector_outbox::table.filter(connector_outbox::id.eq_any(&ids)))
                .set((
                    connector_outbox::next_attempt_at.eq(lease_until.as_micros()),
                    connector_outbox::locked_until.eq(Some(lease_until.as_micros())),
                ))
                .execute(self.conn)
                .map_err(storage_error)?;
        }
        // A row that does not read back (a call stored by another version, a hand edit) is
        // failed with the reason, so it cannot hold up the calls claimed with it.
        let mut entries = Vec::with_capacity(rows.len());
        for row in rows {
            let id = row.id;
            match OutboxEntry::try_from(row) {
                Ok(entry) => entries.push(entry),
                Err(error) => {
                    log::error!(target: "mercer::outbox", "connector call {id} is unreadable and failed: {error}");
                    diesel::update(connector_outbox::table.find(id))
                        .set((
                            connector_outbox::status.eq(OutboxStatus::Failed.as_str()),
                            connector_outbox::locked_until.eq(None::<i64>),
                            connector_outbox::last_error
                                .eq(Some(storable(&error.to_string()).into_owned())),
                        ))
                        .execute(self.conn)
                        .map_err(storage_error)?;
                }
            }
        }
        Ok(entries)
    }

    fn retry_outbox_call(
        &mut self,
        id: OutboxCallId,
        attempts: i64,
        next_attempt_at: Timestamp,
        error: &str,
    ) -> StoreResult<()> {
        diesel::update(connector_outbox::table.find(id.0))
            .set((
                connector_outbox::attempts.eq(attempts),
                connector_outbox::next_attempt_at.eq(next_attempt_at.as_micros()),
                connector_outbox::locked_until.eq(None::<i64>),
                connector_outbox::last_error.eq(Some(storable(error))),
            ))
            .execute(self.conn)
            .map_err(storage_error)?;
        Ok(())
    }

    fn finish_outbox_call(
        &mut self,
        id: OutboxCallId,
        status: OutboxStatus,
        attempts: i64,
        error: Option<&str>,
        now: Timestamp,
    ) -> StoreResult<()> {
        diesel::update(connector_outbox::table.find(id.0))
            .set((
                connector_outbox::status.eq(status.as_str()),
                connector_outbox::attempts.eq(attempts),
                connector_outbox::locked_until.eq(None::<i64>),
                connector_outbox::last_error.eq(error.map(storable)),
                connector_outbox::updated_at.eq(now.as_micros()),
            ))
            .execute(self.conn)
            .map_err(storage_error)?;
        Ok(())
    }

    fn outbox_entries(&mut self, shop_id: ShopId) -> StoreResult<Vec<OutboxEntry>> {
        connector_outbox::table
            .filter(connector_outbox::shop_id.eq(shop_id.0))
            .order(connector_outbox::id.asc())
            .select(OutboxRow::as_select())
            .load(self.conn)
            .map_err(storage_error)?
            .into_iter()
            .map(OutboxEntry::try_from)
            .collect()
    }

    fn recent_outbox_entries(
        &mut self,
        shop_id: ShopId,
        limit: usize,
    ) -> StoreResult<Vec<OutboxEntry>> {
        connector_outbox::table
            .filter(connector_outbox::shop_id.eq(shop_id.0))
            .order(connector_outbox::id.desc())
            .limit(i64::try_from(limit).unwrap_or(i64::MAX))
            .select(OutboxRow::as_select())
            .load(self.conn)
            .map_err(storage_error)?
            .into_iter()
            .map(OutboxEntry::try_from)
            .collect()
    }

    fn next_outbox_attempt(&mut self, shop_id: ShopId) -> StoreResult<Option<Timestamp>> {
        let next: Option<i64> = connector_outbox::table
            .filter(connector_outbox::shop_id.eq(shop_id.0))
            .filter(connector_outbox::status.eq(OutboxStatus::Pending.as_str()))
            .select(diesel::dsl::min(connector_outbox::next_attempt_at))
            .first(self.conn)
            .map_err(storage_error)?;
        Ok(next.map(Timestamp::from_micros))
    }

    fn shops_with_pending_outbox_calls(&mut self) -> StoreResult<Vec<ShopId>> {
        connector_outbox::table
            .filter(connector_outbox::status.eq(OutboxStatus::Pending.as_str()))
            .select(connector_outbox::shop_id)
            .distinct()
            .order(connector_outbox::shop_id.asc())
            .load::<i64>(self.conn)
            .map(|shops| shops.into_iter().map(ShopId).collect())
            .map_err(storage_error)
    }
}
