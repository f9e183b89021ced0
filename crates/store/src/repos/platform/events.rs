//! The durable queue of inbound events.

use diesel::prelude::*;
use mercer_domain::kernel::error::StoreResult;
use mercer_domain::kernel::ids::EventId;
use mercer_domain::kernel::ids::ShopId;
use mercer_domain::platform::EventQueueRepository;
use mercer_domain::platform::events::{
    EntityKind, EventAction, EventDocument, EventSource, FailedInboundEvent, InboundEvent,
    NewInboundEvent, Outcome, UnreadableEvent,
};
use mercer_domain::{StorageError, Timestamp};

use crate::connection::{DbConnection, KeepPrepared, planned_each_time, statement_sites};
use crate::repos::StoreTx;

statement_sites!(InsertEvent);
use crate::schema::{failed_inbound_events, inbound_events};
use crate::store::{storable, storage_error};

/// Most events one PostgreSQL INSERT stores (8 values a row; PostgreSQL allows 65535).
pub(crate) const EVENTS_PER_INSERT: usize = 1000;

/// The first key of the advisory locks of the event queue's partitions on PostgreSQL (the
/// second is the partition): "merc". Two-key advisory locks are apart from one-key ones.
const PARTITION_LOCK_CLASS: i32 = 0x6d65_7263;

/// `treat_none_as_default_value = false`: a missing document is bound as NULL, so the insert's
/// SQL text never varies, as `KeepPrepared` requires.
#[derive(Insertable)]
#[diesel(table_name = inbound_events, treat_none_as_default_value = false)]
struct NewEventRow<'a> {
    shop_id: i64,
    entity: &'static str,
    action: &'static str,
    platform_id: &'a str,
    occurred_at: i64,
    document: Option<&'a str>,
    source: &'static str,
    received_at: i64,
}

#[derive(Queryable, Selectable)]
#[diesel(table_name = inbound_events)]
struct EventRow {
    id: i64,
    shop_id: i64,
    entity: String,
    action: String,
    platform_id: String,
    occurred_at: i64,
    document: Option<String>,
    source: String,
    received_at: i64,
    attempts: i64,
}

/// The columns an event has, in the queue and set aside alike, in [`EventRow`]'s order;
/// `$extra` columns or values follow.
macro_rules! event_columns {
    ($table:ident $(, $extra:expr)*) => {
        (
            $table::id,
            $table::shop_id,
            $table::entity,
            $table::action,
            $table::platform_id,
            $table::occurred_at,
            $table::document,
            $table::source,
            $table::received_at
            $(, $extra)*
        )
    };
}

impl TryFrom<EventRow> for InboundEvent {
    type Error = StorageError;

    fn try_from(row: EventRow) -> Result<Self, StorageError> {
        let corrupt =
            |what: &str| StorageError::other(format!("stored event {} has a bad {what}", row.id));
        let kind = EntityKind::parse(&row.entity).ok_or_else(|| corrupt("entity"))?;
        let document = row
            .document
            .map(|json| EventDocument::from_json(kind, json))
            .transpose()
            .map_err(|_| corrupt("document"))?;
        Ok(InboundEvent {
            id: EventId(row.id),
            event: NewInboundEvent {
                shop_id: ShopId(row.shop_id),
                kind,
                action: EventAction::parse(&row.action).ok_or_else(|| corrupt("action"))?,
                platform_id: row.platform_id,
                occurred_at: Timestamp::from_micros(row.occurred_at),
                document,
                source: EventSource::parse(&row.source).ok_or_else(|| corrupt("source"))?,
                received_at: Timestamp::from_micros(row.received_at),
            },
            attempts: row.attempts,
        })
    }
}

fn lock_partition(conn: &mut DbConnection, partition: i64) -> QueryResult<bool> {
    use diesel::sql_types::{Bool, Integer};
    match conn {
        // One process per SQLite file, and its write transaction already excludes the others.
        DbConnection::Sqlite(_) => Ok(true),
        DbConnection::Pg(c) => {
            // Partitions are below EVENT_PARTITIONS; a wrong one fails rather than wraps.
            let partition = i32::try_from(partition)
                .map_err(|_| diesel::result::Error::QueryBuilderError("bad partition".into()))?;
            diesel::select(
                diesel::dsl::sql::<Bool>("pg_try_advisory_xact_lock(")
                    .bind::<Integer, _>(PARTITION_LOCK_CLASS)
                    .sql(", ")
                    .bind::<Integer, _>(partition)
                    .sql(")"),
            )
            .get_result(c)
        }
    }
}

impl EventQueueRepository for StoreTx<'_> {
    fn insert_inbound_events(&mut self, events: &[NewInboundEvent]) -> StoreResult<()> {
        if events.is_empty() {
            return Ok(());
        }
        let rows: Vec<NewEventRow<'_>> = events
            .iter()
            .map(|event| NewEventRow {
                shop_id: event.shop_id.0,
                entity: event.kind.as_str(),
                action: event.action.as_str(),
                platform_id: &event.platform_id,
                occurred_at: event.occurred_at.as_micros(),
                document: event.document.as_ref().map(EventDocument::json),
                source: event.source.as_str(),
                received_at: event.received_at.as_micros(),
            })
            .collect();
        match &mut *self.conn {
            // One prepared statement, row after row (see `KeepPrepared`).
            DbConnection::Sqlite(c) => {
                for row in &rows {
                    KeepPrepared::<InsertEvent, _>::new(
                        diesel::insert_into(inbound_events::table)
                            .values(row)
                            .returning(inbound_events::id),
                    )
                    .get_result::<i64>(c)
                    .map_err(storage_error)?;
                }
            }
            // One statement per chunk: PostgreSQL allows 65535 bound values.
            DbConnection::Pg(c) => {
                for chunk in rows.chunks(EVENTS_PER_INSERT) {
                    diesel::insert_into(inbound_events::table)
                        .values(chunk)
                        .execute(c)
                        .map_err(storage_error)?;
                }
            }
        }
        Ok(())
    }

    fn pending_inbound_events(
        &mut self,
        shops: Option<&[ShopId]>,
        limit: usize,
        now: Timestamp,
    ) -> StoreResult<Vec<Result<InboundEvent, UnreadableEvent>>> {
        let rows: Vec<EventRow> = planned_each_time(self.conn, |conn| {
            let mut query = inbound_events::table
                .filter(inbound_events::retry_at.le(now.as_micros()))
                .into_boxed();
            if let Some(shops) = shops {
                let shops: Vec<i64> = shops.iter().map(|shop| shop.0).collect();
                query = query.filter(inbound_events::shop_id.eq_any(shops));
            }
            query
                .order(inbound_events::id.asc())
                .limit(limit as i64)
                .select(EventRow::as_select())
                .load(conn)
        })
        .map_err(storage_error)?;
        Ok(rows
            .into_iter()
            .map(|row| {
                let id = EventId(row.id);
                InboundEvent::try_from(row).map_err(|error| UnreadableEvent {
                    id,
                    reason: error.detail,
                })
            })
            .collect())
    }

    fn pending_event_shops(&mut self, limit: usize, now: Timestamp) -> StoreResult<Vec<ShopId>> {
        let shops: Vec<i64> = planned_each_time(self.conn, |conn| {
            inbound_events::table
                .filter(inbound_events::retry_at.le(now.as_micros()))
                .order(inbound_events::id.asc())
                .limit(limit as i64)
                .select(inbound_events::shop_id)
                .load(conn)
        })
        .map_err(storage_error)?;
        let mut first_seen: Vec<ShopId> = Vec::new();
        for shop in shops.into_iter().map(ShopId) {
            if !first_seen.contains(&shop) {
                first_seen.push(shop);
            }
        }
        Ok(first_seen)
    }

    /// Applied events are removed: the queue holds only what is still to apply, so storing an
    /// event costs one insert and applying it one delete, with no index of pending rows to keep.
    fn mark_inbound_events(
        &mut self,
        outcomes: &[(EventId, Outcome)],
        _at: Timestamp,
    ) -> StoreResult<()> {
        let ids: Vec<i64> = outcomes.iter().map(|(id, _)| id.0).collect();
        for chunk in ids.chunks(1000) {
            planned_each_time(self.conn, |conn| {
                diesel::delete(inbound_events::table.filter(inbound_events::id.eq_any(chunk)))
                    .execute(conn)
            })
            .map_err(storage_error)?;
        }
        if log::log_enabled!(target: "mercer::events", log::Level::Debug) {
            let stale = outcomes
                .iter()
                .filter(|(_, outcome)| *outcome == Outcome::Stale)
                .count();
            log::debug!(target: "mercer::events", "applied {} event(s), {stale} out of sequence", outcomes.len());
        }
        Ok(())
    }

    fn count_pending_inbound_events(&mut self) -> StoreResult<i64> {
        inbound_events::table
            .count()
            .get_result(self.conn)
            .map_err(storage_error)
    }

    fn count_shop_pending_events(&mut self, shop_id: ShopId) -> StoreResult<i64> {
        // No index by shop: the queue holds only what waits, and ingest stays one insert.
        inbound_events::table
            .filter(inbound_events::shop_id.eq(shop_id.0))
            .count()
            .get_result(self.conn)
            .map_err(storage_error)
    }

    fn has_pending_inbound_events(&mut self) -> StoreResult<bool> {
        diesel::select(diesel::dsl::exists(
            inbound_events::table.select(inbound_events::id),
        ))
        .get_result(self.conn)
        .map_err(storage_error)
    }

    fn lock_event_partition(&mut self, partition: i64) -> StoreResult<bool> {
        lock_partition(self.conn, partition).map_err(storage_error)
    }

    fn postpone_inbound_event(
        &mut self,
        id: EventId,
        attempts: i64,
        error: &str,
        retry_at: Timestamp,
    ) -> StoreResult<()> {
        diesel::update(inbound_events::table.find(id.0))
            .set((
                inbound_events::attempts.eq(attempts),
                inbound_events::last_error.eq(storable(error)),
                inbound_events::retry_at.eq(retry_at.as_micros()),
            ))
            .execute(self.conn)
            .map_err(storage_error)?;
        Ok(())
    }

    fn set_aside_inbound_event(
        &mut self,
        id: EventId,
        attempts: i64,
        error: &str,
        at: Timestamp,
    ) -> StoreResult<()> {
        use diesel::sql_types::{BigInt, Text};
        let id = id.0;
        diesel::insert_into(failed_inbound_events::table)
            .values(inbound_events::table.find(id).select(event_columns!(
                inbound_events,
                attempts.into_sql::<BigInt>(),
                storable(error).into_owned().into_sql::<Text>(),
                at.as_micros().into_sql::<BigInt>()
            )))
            .into_columns(event_columns!(
                failed_inbound_events,
                failed_inbound_events::attempts,
                failed_inbound_events::error,
                failed_inbound_events::failed_at
            ))
            .execute(self.conn)
            .map_err(storage_error)?;
        diesel::delete(inbound_events::table.find(id))
            .execute(self.conn)
            .map_err(storage_error)?;
        Ok(())
    }

    fn failed_inbound_events(
        &mut self,
        shop_id: Option<ShopId>,
        limit: usize,
    ) -> StoreResult<Vec<FailedInboundEvent>> {
        type Row = (i64, i64, String, String, String, i64, String, i64);
        let mut query = failed_inbound_events::table.into_boxed();
        if let Some(shop_id) = shop_id {
            query = query.filter(failed_inbound_events::shop_id.eq(shop_id.0));
        }
        let rows: Vec<Row> = query
            .order(failed_inbound_events::id.asc())
            .limit(limit as i64)
            .select((
                failed_inbound_events::id,
                failed_inbound_events::shop_id,
                failed_inbound_events::entity,
                failed_inbound_events::action,
                failed_inbound_events::platform_id,
                failed_inbound_events::attempts,
                failed_inbound_events::error,
                failed_inbound_events::failed_at,
            ))
            .load(self.conn)
            .map_err(storage_error)?;
        Ok(rows
            .into_iter()
            .map(
                |(id, shop_id, kind, action, platform_id, attempts, error, failed_at)| {
                    FailedInboundEvent {
                        id: EventId(id),
                        shop_id: ShopId(shop_id),
                        kind,
                        action,
                        platform_id,
                        attempts,
                        error,
                        failed_at: Timestamp::from_micros(failed_at),
                    }
                },
            )
            .collect())
    }

    fn count_failed_inbound_events(&mut self) -> StoreResult<i64> {
        failed_inbound_events::table
            .count()
            .get_result(self.conn)
            .map_err(storage_error)
    }

    fn requeue_failed_inbound_events(
        &mut self,
        shop_id: Option<ShopId>,
        ids: Option<&[EventId]>,
    ) -> StoreResult<Vec<EventId>> {
        let mut chosen = failed_inbound_events::table
            .select(failed_inbound_events::id)
            .order(failed_inbound_events::id.asc())
            .into_boxed();
        if let Some(shop_id) = shop_id {
            chosen = chosen.filter(failed_inbound_events::shop_id.eq(shop_id.0));
        }
        if let Some(ids) = ids {
            let ids: Vec<i64> = ids.iter().map(|id| id.0).collect();
            chosen = chosen.filter(failed_inbound_events::id.eq_any(ids));
        }
        let requeued: Vec<i64> = chosen.load(self.conn).map_err(storage_error)?;
        for chunk in requeued.chunks(1000) {
            let rows =
                || failed_inbound_events::table.filter(failed_inbound_events::id.eq_any(chunk));
            diesel::insert_into(inbound_events::table)
                .values(rows().select(event_columns!(failed_inbound_events)))
                .into_columns(event_columns!(inbound_events))
                .execute(self.conn)
                .map_err(storage_error)?;
            diesel::delete(rows())
                .execute(self.conn)
                .map_err(storage_error)?;
        }
        Ok(requeued.into_iter().map(EventId).collect())
    }
}
