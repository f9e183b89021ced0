//! The retention purge of webhook messages: a finished message (delivered, failed or
//! cancelled) past the retention period loses its attempts and its payload; its row stays, with
//! `purged_at`, so the delivery log still lists it.
//!
//! Both queries name the finished, unpurged messages with the literal predicate of the partial
//! index `webhook_messages_purgeable` (`purged_at IS NULL AND status <> 'pending'`), written out
//! rather than bound so that every plan can use it: a purge reads the expired messages from the
//! index, oldest first, and nothing else.

use diesel::prelude::*;
use diesel::sql_types::{Array, BigInt};

use crate::connection::DbConnection;
use crate::schema::{webhook_attempts, webhook_messages};

#[derive(QueryableByName)]
struct Row {
    #[diesel(sql_type = BigInt)]
    id: i64,
}

/// Purges up to `limit` messages finished before `finished_before` (their `updated_at`, the time
/// they ended) and not purged yet: deletes their attempts, sets their payload to NULL and
/// `purged_at` to `now`. Returns how many. Run it in a write transaction.
///
/// PostgreSQL: the messages are taken `FOR UPDATE SKIP LOCKED`, so a purge never waits on a row
/// another transaction holds (a resend, a delivery being recorded): it takes that one next
/// time. The update checks again that the message is still finished and unpurged.
pub(super) fn purge(
    conn: &mut DbConnection,
    finished_before: i64,
    limit: usize,
    now: i64,
) -> QueryResult<usize> {
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let ids: Vec<i64> = match conn {
        // The CTE runs once (a subquery under `IN` may be run again per row, and take more
        // than `limit`).
        DbConnection::Pg(c) => diesel::sql_query(
            "WITH expired AS MATERIALIZED (SELECT id FROM webhook_messages \
               WHERE purged_at IS NULL AND status <> 'pending' AND updated_at < $2 \
               ORDER BY updated_at, id LIMIT $3 FOR UPDATE SKIP LOCKED) \
             UPDATE webhook_messages AS m SET payload = NULL, purged_at = $1 FROM expired \
             WHERE m.id = expired.id AND m.purged_at IS NULL AND m.status <> 'pending' \
             RETURNING m.id",
        )
        .bind::<BigInt, _>(now)
        .bind::<BigInt, _>(finished_before)
        .bind::<BigInt, _>(limit)
        .load::<Row>(c)?
        .into_iter()
        .map(|row| row.id)
        .collect(),
        DbConnection::Sqlite(c) => {
            // The caller's write transaction holds the only writer: nothing changes in between.
            let ids: Vec<i64> = diesel::sql_query(
                "SELECT id FROM webhook_messages \
                 WHERE purged_at IS NULL AND status <> 'pending' AND updated_at < ? \
                 ORDER BY updated_at, id LIMIT ?",
            )
            .bind::<BigInt, _>(finished_before)
            .bind::<BigInt, _>(limit)
            .load::<Row>(c)?
            .into_iter()
            .map(|row| row.id)
            .collect();
            if !ids.is_empty() {
                diesel::update(webhook_messages::table.filter(webhook_messages::id.eq_any(&ids)))
                    .set((
                        webhook_messages::payload.eq(None::<String>),
                        webhook_messages::purged_at.eq(Some(now)),
                    ))
                    .execute(c)?;
            }
            ids
        }
    };
    if ids.is_empty() {
        return Ok(0);
    }
    match conn {
        DbConnection::Pg(c) => {
            diesel::sql_query("DELETE FROM webhook_attempts WHERE message_id = ANY($1)")
                .bind::<Array<BigInt>, _>(&ids)
                .execute(c)?;
        }
        DbConnection::Sqlite(c) => {
            diesel::delete(
                webhook_attempts::table.filter(webhook_attempts::message_id.eq_any(&ids)),
            )
            .execute(c)?;
        }
    }
    Ok(ids.len())
}
