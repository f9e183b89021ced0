//! Webhook endpoints, messages and attempts.

use mercer_domain::kernel::ids::ShopId;
use std::collections::BTreeMap;
use std::time::Duration;

use diesel::prelude::*;
use mercer_domain::access::credentials::{Secret, random_hex};
use mercer_domain::kernel::error::StoreResult;
use mercer_domain::kernel::ids::{MessageId, WebhookId};
use mercer_domain::webhooks::WebhookRepository;
use mercer_domain::webhooks::console::MessageFilter;
use mercer_domain::webhooks::{
    AttemptOutcome, DeliveryAttempt, MessageStatus, MessageUpdate, NewWebhookEndpoint,
    NewWebhookMessage, Reservation, WebhookEndpoint, WebhookKind, WebhookMessage,
};
use mercer_domain::{StorageError, Timestamp};

use crate::connection::{DbConnection, on_backend};
use crate::repos::{ROWS_PER_STATEMENT, StoreTx};
use crate::schema::{webhook_attempts, webhook_endpoints, webhook_messages};
use crate::store::{storable, storage_error};

mod live;
mod retention;
mod throttles;

/// Writes each message's state after its attempt in a batch. PostgreSQL: one statement for the
/// whole batch over arrays of the new values, one round trip however many messages (a message's
/// `delivered_at` is its own, so grouping alike updates made a statement per message). SQLite:
/// one prepared statement, row after row, which costs no round trip.
fn update_messages(conn: &mut DbConnection, updates: &[MessageUpdate]) -> QueryResult<()> {
    match conn {
        DbConnection::Pg(c) => {
            use diesel::sql_types::{Array, BigInt, Nullable, Text};
            for chunk in updates.chunks(ROWS_PER_STATEMENT) {
                let ids: Vec<i64> = chunk.iter().map(|u| u.id.0).collect();
                let statuses: Vec<&str> = chunk.iter().map(|u| u.status.as_str()).collect();
                let attempts: Vec<i64> = chunk.iter().map(|u| u.attempts).collect();
                let next: Vec<i64> = chunk
                    .iter()
                    .map(|u| u.next_attempt_at.as_micros())
                    .collect();
                let delivered: Vec<Option<i64>> = chunk
                    .iter()
                    .map(|u| u.delivered_at.map(Timestamp::as_micros))
                    .collect();
                diesel::sql_query(
                    "UPDATE webhook_messages AS m SET status = v.status, attempts = v.attempts, \
                     next_attempt_at = v.next_attempt_at, delivered_at = v.delivered_at, \
                     updated_at = COALESCE(v.delivered_at, v.next_attempt_at) \
                     FROM unnest($1, $2, $3, $4, $5) \
                     AS v(id, status, attempts, next_attempt_at, delivered_at) WHERE m.id = v.id",
                )
                .bind::<Array<BigInt>, _>(ids)
                .bind::<Array<Text>, _>(statuses)
                .bind::<Array<BigInt>, _>(attempts)
                .bind::<Array<BigInt>, _>(next)
                .bind::<Array<Nullable<BigInt>>, _>(delivered)
                .execute(c)?;
            }
        }
        DbConnection::Sqlite(c) => {
            for update in updates {
                let delivered_at = update.delivered_at.map(Timestamp::as_micros);
                let next_attempt_at = update.next_attempt_at.as_micros();
                diesel::update(webhook_messages::table.find(update.id.0))
                    .set((
                        webhook_messages::status.eq(update.status.as_str()),
                        webhook_messages::attempts.eq(update.attempts),
                        webhook_messages::next_attempt_at.eq(next_attempt_at),
                        webhook_messages::delivered_at.eq(delivered_at),
                        webhook_messages::updated_at.eq(delivered_at.unwrap_or(next_attempt_at)),
                    ))
                    .execute(c)?;
            }
        }
    }
    Ok(())
}

#[derive(Queryable, Selectable)]
#[diesel(table_name = webhook_endpoints)]
struct EndpointRow {
    id: i64,
    public_id: String,
    shop_id: i64,
    kind: String,
    topic: String,
    callback_url: String,
    secret: Option<String>,
    disabled_at: Option<i64>,
    disabled_reason: Option<String>,
    failing_since: Option<i64>,
    created_at: i64,
    updated_at: i64,
    deleted_at: Option<i64>,
    rate_limit_per_s: Option<i32>,
}

fn time(micros: i64) -> Timestamp {
    Timestamp::from_micros(micros)
}

impl EndpointRow {
    fn into_endpoint(self) -> StoreResult<(WebhookEndpoint, bool)> {
        let kind = WebhookKind::parse(&self.kind)
            .ok_or_else(|| StorageError::other(format!("stored webhook kind {:?}", self.kind)))?;
        Ok((
            WebhookEndpoint {
                id: WebhookId(self.id),
                public_id: self.public_id,
                shop_id: ShopId(self.shop_id),
                kind,
                topic: self.topic,
                callback_url: self.callback_url,
                secret: self.secret.map(Secret::new),
                disabled_at: self.disabled_at.map(time),
                disabled_reason: self.disabled_reason,
                failing_since: self.failing_since.map(time),
                created_at: time(self.created_at),
                updated_at: time(self.updated_at),
                rate_limit_per_s: self
                    .rate_limit_per_s
                    .and_then(|rate| u32::try_from(rate).ok()),
            },
            self.deleted_at.is_some(),
        ))
    }
}

#[derive(Queryable, QueryableByName, Selectable)]
#[diesel(table_name = webhook_messages)]
struct MessageRow {
    id: i64,
    message_id: String,
    shop_id: i64,
    endpoint_id: i64,
    topic: String,
    /// None once the retention purge emptied it.
    payload: Option<String>,
    status: String,
    attempts: i64,
    next_attempt_at: i64,
    created_at: i64,
    delivered_at: Option<i64>,
    request_id: Option<String>,
    trace_parent: Option<String>,
    purged_at: Option<i64>,
}

impl TryFrom<MessageRow> for WebhookMessage {
    type Error = StorageError;

    fn try_from(row: MessageRow) -> Result<Self, StorageError> {
        Ok(WebhookMessage {
            id: MessageId(row.id),
            message_id: row.message_id,
            shop_id: ShopId(row.shop_id),
            endpoint_id: WebhookId(row.endpoint_id),
            topic: row.topic,
            payload: row.payload.unwrap_or_default(),
            status: MessageStatus::parse(&row.status).ok_or_else(|| {
                StorageError::other(format!("stored message status {:?}", row.status))
            })?,
            attempts: row.attempts,
            next_attempt_at: time(row.next_attempt_at),
            created_at: time(row.created_at),
            delivered_at: row.delivered_at.map(time),
            request_id: row.request_id,
            trace_parent: row.trace_parent,
            purged_at: row.purged_at.map(time),
        })
    }
}

#[derive(Queryable, Selectable)]
#[diesel(table_name = webhook_attempts)]
struct AttemptRow {
    message_id: i64,
    attempted_at: i64,
    status: Option<i32>,
    latency_us: i64,
    response: Option<String>,
    error: Option<String>,
    retry_after_ms: Option<i64>,
}

impl AttemptRow {
    fn into_attempt(self) -> DeliveryAttempt {
        DeliveryAttempt {
            message_row: MessageId(self.message_id),
            attempted_at: time(self.attempted_at),
            outcome: AttemptOutcome {
                status: self.status.and_then(|s| u16::try_from(s).ok()),
                latency: Duration::from_micros(u64::try_from(self.latency_us).unwrap_or(0)),
                response: self.response,
                error: self.error,
                retry_after: self
                    .retry_after_ms
                    .and_then(|ms| u64::try_from(ms).ok())
                    .map(Duration::from_millis),
            },
        }
    }
}

#[derive(Insertable)]
#[diesel(table_name = webhook_attempts, treat_none_as_default_value = false)]
struct NewAttemptRow<'a> {
    message_id: i64,
    attempted_at: i64,
    status: Option<i32>,
    latency_us: i64,
    response: Option<std::borrow::Cow<'a, str>>,
    error: Option<std::borrow::Cow<'a, str>>,
    retry_after_ms: Option<i64>,
}

#[derive(Insertable)]
#[diesel(table_name = webhook_messages)]
struct NewMessageRow<'a> {
    message_id: &'a str,
    shop_id: i64,
    endpoint_id: i64,
    topic: &'a str,
    payload: &'a str,
    status: &'static str,
    attempts: i64,
    next_attempt_at: i64,
    created_at: i64,
    updated_at: i64,
    subject: Option<&'a str>,
    request_id: Option<&'a str>,
    trace_parent: Option<&'a str>,
}

/// Takes up to `limit` due messages, oldest due first, by moving their next attempt to
/// `lease_until`, and answers them as updated, in id order.
///
/// PostgreSQL: one statement, which saves the dispatcher the round trips of a transaction
/// (`Database::write_statement`); several processes share the queue, so each takes rows the
/// others have not locked. The status is written out, not bound, so that every plan, a cached
/// generic one too, can use the partial index `webhook_messages_due`.
///
/// The statement commits without waiting for its WAL to reach the disk (`synchronous_commit`
/// off for this statement's own transaction only), which takes a flush off every message's way
/// to its receiver. Nothing is lost by it: a claim lost in a crash of PostgreSQL only makes the
/// message due again, which at-least-once allows, and the attempt's record, which commits
/// synchronously, flushes the WAL before it, the claim's included.
///
/// SQLite: a read and an update in the caller's write transaction, which cost no round trip;
/// the one statement measured slower there.
fn claim(
    conn: &mut DbConnection,
    now: i64,
    limit: usize,
    lease_until: i64,
) -> QueryResult<Vec<MessageRow>> {
    use diesel::sql_types::BigInt;
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let mut rows: Vec<MessageRow> = match conn {
        DbConnection::Sqlite(c) => {
            let mut rows: Vec<MessageRow> = webhook_messages::table
                .filter(diesel::dsl::sql::<diesel::sql_types::Bool>(
                    throttles::PENDING_UNTHROTTLED,
                ))
                .filter(webhook_messages::next_attempt_at.le(now))
                .order(webhook_messages::next_attempt_at.asc())
                .limit(limit)
                .select(MessageRow::as_select())
                .load(c)?;
            lease_rows(c, &mut rows, lease_until)?;
            rows
        }
        DbConnection::Pg(c) => diesel::sql_query(
            // The claimed ids are a materialized CTE: as an `IN (subquery)` the planner may run
            // the subquery more than once, and with SKIP LOCKED each run can take other rows,
            // claiming more than the limit.
            "WITH lease_only AS (SELECT set_config('synchronous_commit', 'off', true)), \
             claimed AS MATERIALIZED (SELECT id AS claimed_id FROM webhook_messages \
             WHERE status = 'pending' \
             AND NOT throttled AND next_attempt_at <= $2 ORDER BY next_attempt_at LIMIT $3 \
             FOR UPDATE SKIP LOCKED) \
             UPDATE webhook_messages SET next_attempt_at = $1 FROM lease_only, claimed \
             WHERE webhook_messages.id = claimed.claimed_id \
             RETURNING id, message_id, shop_id, endpoint_id, topic, payload, status, attempts, \
             next_attempt_at, created_at, delivered_at, request_id, trace_parent, purged_at",
        )
        .bind::<BigInt, _>(lease_until)
        .bind::<BigInt, _>(now)
        .bind::<BigInt, _>(limit)
        .load(c)?,
    };
    rows.sort_unstable_by_key(|row| row.id);
    Ok(rows)
}

/// SQLite's half of a claim: the messages read are leased until `lease_until` (no other claim
/// takes them before then), in the database and in the rows answered.
fn lease_rows(
    c: &mut diesel::SqliteConnection,
    rows: &mut [MessageRow],
    lease_until: i64,
) -> QueryResult<()> {
    let ids: Vec<i64> = rows.iter().map(|row| row.id).collect();
    if !ids.is_empty() {
        diesel::update(webhook_messages::table.filter(webhook_messages::id.eq_any(&ids)))
            .set(webhook_messages::next_attempt_at.eq(lease_until))
            .execute(c)?;
    }
    for row in rows {
        row.next_attempt_at = lease_until;
    }
    Ok(())
}

impl WebhookRepository for StoreTx<'_> {
    fn insert_webhook_endpoint(
        &mut self,
        new: &NewWebhookEndpoint,
    ) -> StoreResult<WebhookEndpoint> {
        let values = (
            webhook_endpoints::public_id.eq(random_hex(16)),
            webhook_endpoints::shop_id.eq(new.shop_id.0),
            webhook_endpoints::kind.eq(new.kind.as_str()),
            webhook_endpoints::topic.eq(&new.topic),
            webhook_endpoints::callback_url.eq(&new.callback_url),
            webhook_endpoints::secret.eq(new.secret.as_ref().map(Secret::expose)),
            webhook_endpoints::created_at.eq(new.created_at.as_micros()),
            webhook_endpoints::updated_at.eq(new.created_at.as_micros()),
        );
        let row: EndpointRow = on_backend!(&mut *self.conn, |c| {
            diesel::insert_into(webhook_endpoints::table)
                .values(values)
                .returning(EndpointRow::as_returning())
                .get_result(c)
        })
        .map_err(storage_error)?;
        Ok(row.into_endpoint()?.0)
    }

    fn webhook_endpoint(
        &mut self,
        shop_id: ShopId,
        public_id: &str,
    ) -> StoreResult<Option<WebhookEndpoint>> {
        webhook_endpoints::table
            .filter(webhook_endpoints::shop_id.eq(shop_id.0))
            .filter(webhook_endpoints::public_id.eq(public_id))
            .filter(webhook_endpoints::deleted_at.is_null())
            .select(EndpointRow::as_select())
            .first(self.conn)
            .optional()
            .map_err(storage_error)?
            .map(|row| row.into_endpoint().map(|(endpoint, _)| endpoint))
            .transpose()
    }

    fn webhook_endpoints_by_ids(
        &mut self,
        ids: &[WebhookId],
    ) -> StoreResult<Vec<(WebhookEndpoint, bool)>> {
        let ids: Vec<i64> = ids.iter().map(|id| id.0).collect();
        let rows: Vec<EndpointRow> = webhook_endpoints::table
            .filter(webhook_endpoints::id.eq_any(ids))
            .select(EndpointRow::as_select())
            .load(self.conn)
            .map_err(storage_error)?;
        Ok(rows
            .into_iter()
            // An unreadable endpoint is left out (its messages then fail), rather than failing
            // the dispatcher's batch with every other endpoint's messages in it.
            .filter_map(|row| {
                let id = row.id;
                EndpointRow::into_endpoint(row)
                    .inspect_err(|error| log::error!(target: "mercer::webhooks", "webhook endpoint {id} is unreadable: {error}"))
                    .ok()
            })
            .collect())
    }

    fn webhook_endpoints(
        &mut self,
        shop_id: ShopId,
        kind: WebhookKind,
    ) -> StoreResult<Vec<WebhookEndpoint>> {
        webhook_endpoints::table
            .filter(webhook_endpoints::shop_id.eq(shop_id.0))
            .filter(webhook_endpoints::kind.eq(kind.as_str()))
            .filter(webhook_endpoints::deleted_at.is_null())
            .order(webhook_endpoints::id.asc())
            .select(EndpointRow::as_select())
            .load(self.conn)
            .map_err(storage_error)?
            .into_iter()
            .map(|row| row.into_endpoint().map(|(endpoint, _)| endpoint))
            .collect()
    }

    fn active_webhook_endpoints(
        &mut self,
        shop_id: ShopId,
        kind: WebhookKind,
        topics: &[&str],
    ) -> StoreResult<Vec<WebhookEndpoint>> {
        // The shop's active endpoints of the kind whose topic passes `$topic`.
        macro_rules! active_of {
            ($topic:expr) => {
                webhook_endpoints::table
                    .filter($topic)
                    .filter(webhook_endpoints::shop_id.eq(shop_id.0))
                    .filter(webhook_endpoints::kind.eq(kind.as_str()))
                    .filter(webhook_endpoints::deleted_at.is_null())
                    .filter(webhook_endpoints::disabled_at.is_null())
                    .order(webhook_endpoints::id.asc())
                    .select(EndpointRow::as_select())
                    .load(self.conn)
            };
        }
        // Two fixed statements, not a boxed one, so that each stays prepared (every webhook
        // enqueue reads them); one topic as `= $1`, since PostgreSQL plans `= ANY($1)` anew at
        // every call.
        let rows: Vec<EndpointRow> = match topics {
            [one] => active_of!(webhook_endpoints::topic.eq(*one)),
            _ => active_of!(webhook_endpoints::topic.eq_any(topics)),
        }
        .map_err(storage_error)?;
        rows.into_iter()
            .map(|row| row.into_endpoint().map(|(endpoint, _)| endpoint))
            .collect()
    }

    fn update_webhook_endpoint(
        &mut self,
        endpoint: &WebhookEndpoint,
        now: Timestamp,
    ) -> StoreResult<()> {
        diesel::update(webhook_endpoints::table.find(endpoint.id.0))
            .set((
                webhook_endpoints::callback_url.eq(&endpoint.callback_url),
                webhook_endpoints::topic.eq(&endpoint.topic),
                webhook_endpoints::secret.eq(endpoint.secret.as_ref().map(Secret::expose)),
                webhook_endpoints::updated_at.eq(now.as_micros()),
            ))
            .execute(self.conn)
            .map_err(storage_error)?;
        Ok(())
    }

    fn delete_webhook_endpoint(&mut self, id: WebhookId, now: Timestamp) -> StoreResult<()> {
        diesel::update(webhook_endpoints::table.find(id.0))
            .set((
                webhook_endpoints::deleted_at.eq(Some(now.as_micros())),
                webhook_endpoints::updated_at.eq(now.as_micros()),
            ))
            .execute(self.conn)
            .map_err(storage_error)?;
        throttles::clear(self.conn, id, now).map_err(storage_error)?;
        self.end_pending_webhook_messages(id, MessageStatus::Cancelled, now)?;
        Ok(())
    }

    fn set_webhook_endpoint_health(
        &mut self,
        id: WebhookId,
        failing_since: Option<Timestamp>,
        disabled: Option<(Timestamp, &str)>,
        now: Timestamp,
    ) -> StoreResult<()> {
        let target = webhook_endpoints::table.find(id.0);
        let failing = webhook_endpoints::failing_since.eq(failing_since.map(Timestamp::as_micros));
        let result = match disabled {
            Some((at, reason)) => diesel::update(target)
                .set((
                    failing,
                    webhook_endpoints::disabled_at.eq(Some(at.as_micros())),
                    webhook_endpoints::disabled_reason.eq(Some(storable(reason))),
                    webhook_endpoints::updated_at.eq(now.as_micros()),
                ))
                .execute(self.conn),
            None => diesel::update(target).set(failing).execute(self.conn),
        };
        result.map_err(storage_error)?;
        Ok(())
    }

    fn enable_webhook_endpoint(&mut self, id: WebhookId, now: Timestamp) -> StoreResult<()> {
        diesel::update(webhook_endpoints::table.find(id.0))
            .set((
                webhook_endpoints::disabled_at.eq(None::<i64>),
                webhook_endpoints::disabled_reason.eq(None::<String>),
                webhook_endpoints::failing_since.eq(None::<i64>),
                webhook_endpoints::updated_at.eq(now.as_micros()),
            ))
            .execute(self.conn)
            .map_err(storage_error)?;
        Ok(())
    }

    fn insert_webhook_messages(
        &mut self,
        messages: &[NewWebhookMessage],
    ) -> StoreResult<Vec<MessageId>> {
        let mut ids = Vec::with_capacity(messages.len());
        for chunk in messages.chunks(ROWS_PER_STATEMENT) {
            let rows: Vec<NewMessageRow<'_>> = chunk
                .iter()
                .map(|m| NewMessageRow {
                    message_id: &m.message_id,
                    shop_id: m.shop_id.0,
                    endpoint_id: m.endpoint_id.0,
                    topic: &m.topic,
                    payload: &m.payload,
                    status: MessageStatus::Pending.as_str(),
                    attempts: 0,
                    next_attempt_at: m.created_at.as_micros(),
                    created_at: m.created_at.as_micros(),
                    updated_at: m.created_at.as_micros(),
                    subject: m.subject.as_deref(),
                    request_id: m.request_id.as_deref(),
                    trace_parent: m.trace_parent.as_deref(),
                })
                .collect();
            let returned: Vec<(i64, String)> = on_backend!(&mut *self.conn, |c| {
                diesel::insert_into(webhook_messages::table)
                    .values(&rows)
                    .returning((webhook_messages::id, webhook_messages::message_id))
                    .get_results(c)
            })
            .map_err(storage_error)?;
            // Rows come back in insertion order on both databases; keyed anyway, to be sure.
            let by_message: BTreeMap<String, i64> = returned
                .into_iter()
                .map(|(id, message_id)| (message_id, id))
                .collect();
            for message in chunk {
                ids.push(MessageId(*by_message.get(&message.message_id).ok_or_else(
                    || StorageError::other("a message id did not come back"),
                )?));
            }
        }
        let throttled: Vec<i64> = messages
            .iter()
            .zip(&ids)
            .filter(|(message, _)| message.throttled)
            .map(|(_, id)| id.0)
            .collect();
        throttles::mark_inserted(self.conn, &throttled).map_err(storage_error)?;
        Ok(ids)
    }

    fn insert_webhook_messages_for_live_endpoints(
        &mut self,
        kind: WebhookKind,
        messages: &[NewWebhookMessage],
    ) -> StoreResult<Vec<Option<MessageId>>> {
        live::insert(self.conn, kind, messages).map_err(storage_error)
    }

    /// A claimed message's next attempt moves to the lease's end, so no other worker takes it
    /// meanwhile; if this worker dies, the message is due again when the lease ends.
    fn claim_webhook_messages(
        &mut self,
        now: Timestamp,
        limit: usize,
        lease_until: Timestamp,
    ) -> StoreResult<Vec<WebhookMessage>> {
        let rows = claim(self.conn, now.as_micros(), limit, lease_until.as_micros())
            .map_err(storage_error)?;
        rows.into_iter().map(WebhookMessage::try_from).collect()
    }

    fn set_webhook_rate_limit(
        &mut self,
        id: WebhookId,
        rate_limit_per_s: Option<u32>,
        now: Timestamp,
    ) -> StoreResult<()> {
        throttles::set_rate_limit(self.conn, id, rate_limit_per_s, now).map_err(storage_error)
    }

    fn claim_throttled_webhook_messages(
        &mut self,
        now: Timestamp,
        limit: usize,
        ready_by: Timestamp,
        stretch: Duration,
        lease_until: Timestamp,
    ) -> StoreResult<Vec<Reservation>> {
        throttles::claim(self.conn, now, limit, (ready_by, stretch), lease_until)
    }

    fn release_webhook_messages(&mut self, ids: &[MessageId], at: Timestamp) -> StoreResult<()> {
        throttles::release(self.conn, ids, at).map_err(storage_error)
    }

    fn webhook_throttle_upkeep(&mut self, now: Timestamp) -> StoreResult<bool> {
        throttles::upkeep(self.conn, now).map_err(storage_error)
    }

    fn pending_webhook_messages(
        &mut self,
        endpoint_ids: &[WebhookId],
    ) -> StoreResult<Vec<(WebhookId, i64)>> {
        throttles::pending_by_endpoint(self.conn, endpoint_ids).map_err(storage_error)
    }

    fn record_webhook_attempts(
        &mut self,
        attempts: &[DeliveryAttempt],
        updates: &[MessageUpdate],
    ) -> StoreResult<()> {
        for chunk in attempts.chunks(ROWS_PER_STATEMENT) {
            let rows: Vec<NewAttemptRow<'_>> = chunk
                .iter()
                .map(|attempt| NewAttemptRow {
                    message_id: attempt.message_row.0,
                    attempted_at: attempt.attempted_at.as_micros(),
                    status: attempt.outcome.status.map(i32::from),
                    latency_us: i64::try_from(attempt.outcome.latency.as_micros())
                        .unwrap_or(i64::MAX),
                    response: attempt.outcome.response.as_deref().map(storable),
                    error: attempt.outcome.error.as_deref().map(storable),
                    retry_after_ms: attempt
                        .outcome
                        .retry_after
                        .and_then(|d| i64::try_from(d.as_millis()).ok()),
                })
                .collect();
            on_backend!(&mut *self.conn, |c| diesel::insert_into(
                webhook_attempts::table
            )
            .values(&rows)
            .execute(c))
            .map_err(storage_error)?;
        }
        update_messages(self.conn, updates).map_err(storage_error)
    }

    fn end_pending_webhook_messages(
        &mut self,
        endpoint_id: WebhookId,
        status: MessageStatus,
        now: Timestamp,
    ) -> StoreResult<u64> {
        let ended = diesel::update(
            webhook_messages::table
                .filter(webhook_messages::endpoint_id.eq(endpoint_id.0))
                .filter(webhook_messages::status.eq(MessageStatus::Pending.as_str())),
        )
        .set((
            webhook_messages::status.eq(status.as_str()),
            webhook_messages::updated_at.eq(now.as_micros()),
        ))
        .execute(self.conn)
        .map_err(storage_error)?;
        Ok(ended as u64)
    }

    fn webhook_queue_depth(&mut self, now: Timestamp) -> StoreResult<(i64, i64)> {
        throttles::queue_depth(self.conn, now).map_err(storage_error)
    }

    fn webhook_message(&mut self, message_id: &str) -> StoreResult<Option<WebhookMessage>> {
        webhook_messages::table
            .filter(webhook_messages::message_id.eq(message_id))
            .select(MessageRow::as_select())
            .first(self.conn)
            .optional()
            .map_err(storage_error)?
            .map(WebhookMessage::try_from)
            .transpose()
    }

    fn webhook_messages_of_endpoint(
        &mut self,
        endpoint_id: WebhookId,
        limit: usize,
    ) -> StoreResult<Vec<WebhookMessage>> {
        webhook_messages::table
            .filter(webhook_messages::endpoint_id.eq(endpoint_id.0))
            .order(webhook_messages::id.desc())
            .limit(limit as i64)
            .select(MessageRow::as_select())
            .load(self.conn)
            .map_err(storage_error)?
            .into_iter()
            .map(WebhookMessage::try_from)
            .collect()
    }

    fn webhook_messages_of_shop(
        &mut self,
        shop_id: ShopId,
        filter: &MessageFilter,
        before: Option<MessageId>,
        limit: usize,
    ) -> StoreResult<Vec<WebhookMessage>> {
        let mut query = webhook_messages::table
            .filter(webhook_messages::shop_id.eq(shop_id.0))
            .into_boxed();
        if let Some(topic) = &filter.topic {
            query = query.filter(webhook_messages::topic.eq(topic));
        }
        if let Some(status) = filter.status {
            query = query.filter(webhook_messages::status.eq(status.as_str()));
        }
        if let Some(before) = before {
            query = query.filter(webhook_messages::id.lt(before.0));
        }
        query
            .order(webhook_messages::id.desc())
            .limit(i64::try_from(limit).unwrap_or(i64::MAX))
            .select(MessageRow::as_select())
            .load(self.conn)
            .map_err(storage_error)?
            .into_iter()
            .map(WebhookMessage::try_from)
            .collect()
    }

    fn webhook_message_row_at(
        &mut self,
        shop_id: ShopId,
        at: Timestamp,
    ) -> StoreResult<Option<MessageId>> {
        // By the (shop_id, created_at) index: one entry read, however far back `at` is.
        webhook_messages::table
            .filter(webhook_messages::shop_id.eq(shop_id.0))
            .filter(webhook_messages::created_at.le(at.as_micros()))
            .order((
                webhook_messages::created_at.desc(),
                webhook_messages::id.desc(),
            ))
            .select(webhook_messages::id)
            .first(self.conn)
            .optional()
            .map(|row| row.map(MessageId))
            .map_err(storage_error)
    }

    fn webhook_messages_about(
        &mut self,
        shop_id: ShopId,
        subject: &str,
        limit: usize,
    ) -> StoreResult<Vec<WebhookMessage>> {
        webhook_messages::table
            .filter(webhook_messages::shop_id.eq(shop_id.0))
            .filter(webhook_messages::subject.eq(subject))
            .order(webhook_messages::id.desc())
            .limit(i64::try_from(limit).unwrap_or(i64::MAX))
            .select(MessageRow::as_select())
            .load(self.conn)
            .map_err(storage_error)?
            .into_iter()
            .map(WebhookMessage::try_from)
            .collect()
    }

    fn count_shop_webhook_messages(
        &mut self,
        shop_id: ShopId,
        status: MessageStatus,
    ) -> StoreResult<i64> {
        webhook_messages::table
            .filter(webhook_messages::shop_id.eq(shop_id.0))
            .filter(webhook_messages::status.eq(status.as_str()))
            .count()
            .get_result(self.conn)
            .map_err(storage_error)
    }

    fn webhook_attempts(&mut self, message_row: MessageId) -> StoreResult<Vec<DeliveryAttempt>> {
        Ok(webhook_attempts::table
            .filter(webhook_attempts::message_id.eq(message_row.0))
            .order(webhook_attempts::id.asc())
            .select(AttemptRow::as_select())
            .load(self.conn)
            .map_err(storage_error)?
            .into_iter()
            .map(AttemptRow::into_attempt)
            .collect())
    }

    fn last_webhook_attempts(
        &mut self,
        message_rows: &[MessageId],
    ) -> StoreResult<Vec<DeliveryAttempt>> {
        // A message has a handful of attempts at most: reading them all in one query beats one
        // query per message.
        let mut last: Vec<DeliveryAttempt> = Vec::new();
        for chunk in message_rows.chunks(ROWS_PER_STATEMENT) {
            let chunk: Vec<i64> = chunk.iter().map(|row| row.0).collect();
            let rows: Vec<AttemptRow> = webhook_attempts::table
                .filter(webhook_attempts::message_id.eq_any(chunk))
                .order(webhook_attempts::id.asc())
                .select(AttemptRow::as_select())
                .load(self.conn)
                .map_err(storage_error)?;
            for attempt in rows.into_iter().map(AttemptRow::into_attempt) {
                match last
                    .iter_mut()
                    .find(|a| a.message_row == attempt.message_row)
                {
                    Some(earlier) => *earlier = attempt,
                    None => last.push(attempt),
                }
            }
        }
        Ok(last)
    }

    fn requeue_webhook_message(&mut self, id: MessageId, now: Timestamp) -> StoreResult<()> {
        // A purged message has nothing left to send.
        diesel::update(
            webhook_messages::table
                .find(id.0)
                .filter(webhook_messages::purged_at.is_null()),
        )
        .set((
            webhook_messages::status.eq(MessageStatus::Pending.as_str()),
            webhook_messages::next_attempt_at.eq(now.as_micros()),
            webhook_messages::updated_at.eq(now.as_micros()),
        ))
        .execute(self.conn)
        .map_err(storage_error)?;
        Ok(())
    }

    fn requeue_failed_webhook_messages(
        &mut self,
        endpoint_id: WebhookId,
        since: Timestamp,
        now: Timestamp,
    ) -> StoreResult<u64> {
        let count = diesel::update(
            webhook_messages::table
                .filter(webhook_messages::endpoint_id.eq(endpoint_id.0))
                .filter(webhook_messages::status.eq(MessageStatus::Failed.as_str()))
                .filter(webhook_messages::created_at.ge(since.as_micros()))
                .filter(webhook_messages::purged_at.is_null()),
        )
        .set((
            webhook_messages::status.eq(MessageStatus::Pending.as_str()),
            webhook_messages::next_attempt_at.eq(now.as_micros()),
            webhook_messages::updated_at.eq(now.as_micros()),
        ))
        .execute(self.conn)
        .map_err(storage_error)?;
        Ok(count as u64)
    }

    fn purge_webhook_messages(
        &mut self,
        finished_before: Timestamp,
        limit: usize,
        now: Timestamp,
    ) -> StoreResult<usize> {
        retention::purge(
            self.conn,
            finished_before.as_micros(),
            limit,
            now.as_micros(),
        )
        .map_err(storage_error)
    }

    fn count_disabled_webhook_endpoints(&mut self) -> StoreResult<i64> {
        webhook_endpoints::table
            .filter(webhook_endpoints::deleted_at.is_null())
            .filter(webhook_endpoints::disabled_at.is_not_null())
            .count()
            .get_result(self.conn)
            .map_err(storage_error)
    }
}
