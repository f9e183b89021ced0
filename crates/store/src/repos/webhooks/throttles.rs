//! Per-endpoint throttling (the rules are `mercer_domain::webhooks`' throttling module): the
//! throttle rows, the `throttled` mark on messages, and the claim that hands out send times.
//!
//! A throttled endpoint has a row in `webhook_throttles`: the least time between two starts
//! (`interval_us`) and the earliest start of its next delivery (`next_slot_at`). Its messages
//! are marked `throttled`, which keeps them out of the everyday claim (whose partial index
//! leaves them out, so its cost does not change with a throttled backlog); [`claim`] takes them
//! per endpoint, under the lock of the endpoint's throttle row.
//!
//! A limit cleared (or an endpoint deleted) leaves its row with `interval_us` 0 and the time of
//! the change in `next_slot_at`: a message enqueued by a transaction that read the endpoint
//! before the change, and so marked throttled after it, is still claimed (at once, unspaced)
//! rather than left behind. [`upkeep`] removes such rows once nothing can be marked so any more.

use std::time::Duration;

use diesel::dsl::{exists, sql};
use diesel::prelude::*;
use diesel::sql_types::{BigInt, Bool};
use mercer_domain::Timestamp;
use mercer_domain::kernel::ids::{MessageId, WebhookId};
use mercer_domain::webhooks::{
    MessageStatus, Reservation, WebhookMessage, interval_us, reservation_slack_us,
};
use mercer_domain::{StorageError, kernel::error::StoreResult};

use super::MessageRow;
use crate::connection::{DbConnection, on_backend};
use crate::schema::{webhook_endpoints, webhook_messages, webhook_throttles};
use crate::store::storage_error;

diesel::table! {
    /// The columns of `webhook_messages` throttling reads and writes, `throttled` among them
    /// (the full declaration in `schema.rs` has no room left for it).
    #[sql_name = "webhook_messages"]
    throttled_messages (id) {
        id -> BigInt,
        endpoint_id -> BigInt,
        status -> Text,
        next_attempt_at -> BigInt,
        throttled -> Bool,
    }
}

diesel::allow_tables_to_appear_in_same_query!(throttled_messages, webhook_throttles);

/// How long the row of a cleared throttle stays (microseconds): longer than any transaction
/// that read the endpoint before the change may still take to enqueue.
const CLEARED_KEPT_US: i64 = 10 * 60 * 1_000_000;

/// The pending messages of throttled endpoints, written as the partial index
/// `webhook_messages_throttled_due` is defined (so that every plan, a generic one too, can
/// use it).
pub(super) const PENDING_THROTTLED: &str = "status = 'pending' AND throttled";
/// The pending messages of every other endpoint, written as `webhook_messages_due` is.
pub(super) const PENDING_UNTHROTTLED: &str = "status = 'pending' AND NOT throttled";

/// Sets or clears the endpoint's limit (`WebhookRepository::set_webhook_rate_limit`).
pub(super) fn set_rate_limit(
    conn: &mut DbConnection,
    id: WebhookId,
    rate_limit_per_s: Option<u32>,
    now: Timestamp,
) -> QueryResult<()> {
    diesel::update(webhook_endpoints::table.find(id.0))
        .set((
            webhook_endpoints::rate_limit_per_s
                .eq(rate_limit_per_s.and_then(|rate| i32::try_from(rate).ok())),
            webhook_endpoints::updated_at.eq(now.as_micros()),
        ))
        .execute(&mut *conn)?;
    match rate_limit_per_s {
        Some(rate) => {
            let cleared_before: Option<i64> = webhook_throttles::table
                .find(id.0)
                .filter(webhook_throttles::interval_us.eq(0))
                .select(webhook_throttles::next_slot_at)
                .first(&mut *conn)
                .optional()?;
            // A throttle made anew, or one cleared before, is free from now on; a changed one
            // keeps the send times it has handed out.
            let values = (
                webhook_throttles::endpoint_id.eq(id.0),
                webhook_throttles::interval_us.eq(interval_us(rate)),
                webhook_throttles::next_slot_at.eq(now.as_micros()),
            );
            on_backend!(&mut *conn, |c| {
                match cleared_before {
                    Some(_) => diesel::update(webhook_throttles::table.find(id.0))
                        .set(values)
                        .execute(c),
                    None => diesel::insert_into(webhook_throttles::table)
                        .values(values)
                        .on_conflict(webhook_throttles::endpoint_id)
                        .do_update()
                        .set(webhook_throttles::interval_us.eq(interval_us(rate)))
                        .execute(c),
                }
            })?;
        }
        None => clear(conn, id, now)?,
    }
    // The endpoint's pending messages follow: cleared, they are the everyday claim's at once.
    diesel::update(
        throttled_messages::table
            .filter(throttled_messages::endpoint_id.eq(id.0))
            .filter(throttled_messages::status.eq(MessageStatus::Pending.as_str()))
            .filter(throttled_messages::throttled.eq(rate_limit_per_s.is_none())),
    )
    .set(throttled_messages::throttled.eq(rate_limit_per_s.is_some()))
    .execute(conn)?;
    Ok(())
}

/// Makes the endpoint's throttle, if it has one, a cleared one (see the module's
/// documentation).
pub(super) fn clear(conn: &mut DbConnection, id: WebhookId, now: Timestamp) -> QueryResult<()> {
    diesel::update(webhook_throttles::table.find(id.0))
        .set((
            webhook_throttles::interval_us.eq(0),
            webhook_throttles::next_slot_at.eq(now.as_micros()),
        ))
        .execute(conn)?;
    Ok(())
}

/// Marks messages just inserted throttled, in the transaction that inserted them (so that no
/// claim ever sees them unmarked).
pub(super) fn mark_inserted(conn: &mut DbConnection, ids: &[i64]) -> QueryResult<()> {
    if !ids.is_empty() {
        diesel::update(throttled_messages::table.filter(throttled_messages::id.eq_any(ids)))
            .set(throttled_messages::throttled.eq(true))
            .execute(conn)?;
    }
    Ok(())
}

/// Puts claimed messages back, due at `at`; nothing else about them changes.
pub(super) fn release(
    conn: &mut DbConnection,
    ids: &[MessageId],
    at: Timestamp,
) -> QueryResult<()> {
    let ids: Vec<i64> = ids.iter().map(|id| id.0).collect();
    if !ids.is_empty() {
        diesel::update(
            webhook_messages::table
                .filter(webhook_messages::id.eq_any(ids))
                .filter(webhook_messages::status.eq(MessageStatus::Pending.as_str())),
        )
        .set(webhook_messages::next_attempt_at.eq(at.as_micros()))
        .execute(conn)?;
    }
    Ok(())
}

/// Removes the rows of throttles cleared long enough ago whose endpoint has no message marked
/// throttled left, and tells whether any throttle remains.
pub(super) fn upkeep(conn: &mut DbConnection, now: Timestamp) -> QueryResult<bool> {
    let cutoff = now.as_micros().saturating_sub(CLEARED_KEPT_US);
    let marked = throttled_messages::table
        .filter(throttled_messages::endpoint_id.eq(webhook_throttles::endpoint_id))
        .filter(sql::<Bool>(PENDING_THROTTLED));
    diesel::delete(
        webhook_throttles::table
            .filter(webhook_throttles::interval_us.eq(0))
            .filter(webhook_throttles::next_slot_at.lt(cutoff))
            .filter(diesel::dsl::not(exists(marked))),
    )
    .execute(&mut *conn)?;
    let any = webhook_throttles::table.select(webhook_throttles::endpoint_id);
    on_backend!(conn, |c| diesel::select(exists(any)).get_result(c))
}

#[derive(QueryableByName)]
#[diesel(table_name = webhook_throttles)]
struct ThrottleRow {
    endpoint_id: i64,
    interval_us: i64,
    next_slot_at: i64,
}

/// The throttles with messages due by `now` whose next send time is by `ready_by`, the
/// soonest first, locked on PostgreSQL (those another claim holds are skipped).
fn lock_ready_throttles(
    conn: &mut DbConnection,
    now: i64,
    ready_by: i64,
    limit: i64,
) -> QueryResult<Vec<ThrottleRow>> {
    // Unqualified, `status` and `throttled` can only be the messages'.
    let due = format!(
        "EXISTS (SELECT 1 FROM webhook_messages m WHERE m.endpoint_id = t.endpoint_id \
         AND {PENDING_THROTTLED} AND m.next_attempt_at <= "
    );
    match conn {
        DbConnection::Pg(c) => diesel::sql_query(format!(
            "SELECT t.endpoint_id, t.interval_us, t.next_slot_at FROM webhook_throttles t \
             WHERE t.next_slot_at <= $1 AND {due}$2) \
             ORDER BY t.next_slot_at LIMIT $3 FOR UPDATE OF t SKIP LOCKED"
        ))
        .bind::<BigInt, _>(ready_by)
        .bind::<BigInt, _>(now)
        .bind::<BigInt, _>(limit)
        .load(c),
        // SQLite's writers take turns (the caller's transaction began IMMEDIATE): nobody else
        // reads the throttles meanwhile.
        DbConnection::Sqlite(c) => diesel::sql_query(format!(
            "SELECT t.endpoint_id, t.interval_us, t.next_slot_at FROM webhook_throttles t \
             WHERE t.next_slot_at <= ? AND {due}?) ORDER BY t.next_slot_at LIMIT ?"
        ))
        .bind::<BigInt, _>(ready_by)
        .bind::<BigInt, _>(now)
        .bind::<BigInt, _>(limit)
        .load(c),
    }
}

/// Leases up to `count` of the endpoint's due messages, the oldest due first; answers them in
/// id order.
fn lease_due(
    conn: &mut DbConnection,
    endpoint_id: i64,
    now: i64,
    count: i64,
    lease_until: i64,
) -> QueryResult<Vec<MessageRow>> {
    let mut rows: Vec<MessageRow> = match conn {
        DbConnection::Pg(c) => diesel::sql_query(format!(
            // A materialized CTE, as the unthrottled claim's: never more rows than the limit.
            "WITH claimed AS MATERIALIZED (SELECT id AS claimed_id FROM webhook_messages \
             WHERE endpoint_id = $2 AND {PENDING_THROTTLED} AND next_attempt_at <= $3 \
             ORDER BY next_attempt_at, id LIMIT $4 FOR UPDATE SKIP LOCKED) \
             UPDATE webhook_messages SET next_attempt_at = $1 FROM claimed \
             WHERE webhook_messages.id = claimed.claimed_id RETURNING webhook_messages.*"
        ))
        .bind::<BigInt, _>(lease_until)
        .bind::<BigInt, _>(endpoint_id)
        .bind::<BigInt, _>(now)
        .bind::<BigInt, _>(count)
        .load(c)?,
        DbConnection::Sqlite(c) => {
            let mut rows: Vec<MessageRow> = webhook_messages::table
                .filter(webhook_messages::endpoint_id.eq(endpoint_id))
                .filter(sql::<Bool>(PENDING_THROTTLED))
                .filter(webhook_messages::next_attempt_at.le(now))
                .order((
                    webhook_messages::next_attempt_at.asc(),
                    webhook_messages::id.asc(),
                ))
                .limit(count)
                .select(MessageRow::as_select())
                .load(&mut *c)?;
            super::lease_rows(c, &mut rows, lease_until)?;
            rows
        }
    };
    rows.sort_unstable_by_key(|row| row.id);
    Ok(rows)
}

/// The throttled claim (`WebhookRepository::claim_throttled_webhook_messages`), in the caller's
/// write transaction.
///
/// Each ready throttle (free by `ready_by`), locked, gives its endpoint a stretch of send times:
/// from its next free time (or `now`, if that has passed), one interval apart, as many as its
/// due messages, what is left of `limit` and the stretch's length allow. Each stretch ends with
/// slack, so the longer they are the closer deliveries come to the limit. The throttle's next free time becomes the
/// stretch's latest start (its last nominal send time plus the slack of
/// `reservation_slack_us`) plus one interval, so a later claim, here or in another process,
/// hands out nothing closer.
pub(super) fn claim(
    conn: &mut DbConnection,
    now: Timestamp,
    limit: usize,
    (ready_by, stretch): (Timestamp, Duration),
    lease_until: Timestamp,
) -> StoreResult<Vec<Reservation>> {
    let now = now.as_micros();
    let ready_by = ready_by.as_micros().max(now);
    let stretch = i64::try_from(stretch.as_micros()).unwrap_or(i64::MAX);
    let mut left = i64::try_from(limit).unwrap_or(i64::MAX);
    let throttles = lock_ready_throttles(conn, now, ready_by, left).map_err(storage_error)?;
    let mut reservations = Vec::new();
    for throttle in throttles {
        if left == 0 {
            break;
        }
        let first = throttle.next_slot_at.max(now);
        let interval = throttle.interval_us.max(0);
        let fits = match interval {
            // A cleared throttle: its stray messages go at once.
            0 => left,
            interval => (stretch / interval + 1).min(left),
        };
        let rows = lease_due(
            conn,
            throttle.endpoint_id,
            now,
            fits,
            lease_until.as_micros(),
        )
        .map_err(storage_error)?;
        if rows.is_empty() {
            continue;
        }
        let taken = i64::try_from(rows.len()).unwrap_or(i64::MAX);
        left -= taken;
        let last_start = match interval {
            0 => first.saturating_add(stretch),
            interval => first + (taken - 1) * interval + reservation_slack_us(interval),
        };
        if interval > 0 {
            diesel::update(webhook_throttles::table.find(throttle.endpoint_id))
                .set(webhook_throttles::next_slot_at.eq(last_start + interval))
                .execute(&mut *conn)
                .map_err(storage_error)?;
        }
        reservations.push(Reservation {
            endpoint_id: WebhookId(throttle.endpoint_id),
            first_start: Timestamp::from_micros(first),
            last_start: Timestamp::from_micros(last_start),
            interval: Duration::from_micros(u64::try_from(interval).unwrap_or(0)),
            messages: rows
                .into_iter()
                .map(WebhookMessage::try_from)
                .collect::<Result<Vec<_>, StorageError>>()?,
        });
    }
    Ok(reservations)
}

/// How many pending messages each endpoint has: one count over each partial index.
pub(super) fn pending_by_endpoint(
    conn: &mut DbConnection,
    endpoint_ids: &[WebhookId],
) -> QueryResult<Vec<(WebhookId, i64)>> {
    let ids: Vec<i64> = endpoint_ids.iter().map(|id| id.0).collect();
    let mut counts: Vec<(WebhookId, i64)> = Vec::new();
    for pending in [PENDING_UNTHROTTLED, PENDING_THROTTLED] {
        let rows: Vec<(i64, i64)> = webhook_messages::table
            .filter(sql::<Bool>(pending))
            .filter(webhook_messages::endpoint_id.eq_any(&ids))
            .group_by(webhook_messages::endpoint_id)
            .select((webhook_messages::endpoint_id, diesel::dsl::count_star()))
            .load(&mut *conn)?;
        for (endpoint_id, count) in rows {
            match counts.iter_mut().find(|(id, _)| id.0 == endpoint_id) {
                Some((_, total)) => *total += count,
                None => counts.push((WebhookId(endpoint_id), count)),
            }
        }
    }
    Ok(counts)
}

/// (due by `now`, due later) among pending messages: each kind counted over its own partial
/// index.
pub(super) fn queue_depth(conn: &mut DbConnection, now: Timestamp) -> QueryResult<(i64, i64)> {
    let (mut due, mut later) = (0, 0);
    for pending in [PENDING_UNTHROTTLED, PENDING_THROTTLED] {
        due += webhook_messages::table
            .filter(sql::<Bool>(pending))
            .filter(webhook_messages::next_attempt_at.le(now.as_micros()))
            .count()
            .get_result::<i64>(&mut *conn)?;
        later += webhook_messages::table
            .filter(sql::<Bool>(pending))
            .filter(webhook_messages::next_attempt_at.gt(now.as_micros()))
            .count()
            .get_result::<i64>(&mut *conn)?;
    }
    Ok((due, later))
}
