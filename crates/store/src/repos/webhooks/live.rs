//! Messages stored only for endpoints that still take them, the endpoint read and the message
//! written by one statement: the API's enqueue of a message for an endpoint it already knows
//! (a test delivery) costs one round trip, and a batch of several requests' messages one too.

use std::collections::HashMap;

use diesel::prelude::*;
use diesel::sql_types::{Array, BigInt, Nullable, Text};
use mercer_domain::kernel::ids::MessageId;
use mercer_domain::webhooks::{NewWebhookMessage, WebhookKind};

use crate::connection::DbConnection;

#[derive(QueryableByName)]
struct Stored {
    #[diesel(sql_type = BigInt)]
    id: i64,
    #[diesel(sql_type = Text)]
    message_id: String,
}

/// The columns written and what each takes: the message's values, and from the endpoint its
/// shop, id and topic (the same as the message's, which the join required) and whether it is
/// throttled. The endpoint must be of the kind, neither deleted nor disabled.
const COLUMNS: &str = "INSERT INTO webhook_messages (message_id, shop_id, endpoint_id, topic, \
     payload, status, attempts, next_attempt_at, created_at, updated_at, subject, request_id, \
     trace_parent, throttled)";
const VALUES: &str = "SELECT v.message_id, e.shop_id, e.id, e.topic, v.payload, 'pending', 0, \
     v.created_at, v.created_at, v.created_at, v.subject, v.request_id, v.trace_parent, \
     e.rate_limit_per_s IS NOT NULL";
const LIVE: &str = "e.deleted_at IS NULL AND e.disabled_at IS NULL";

/// Stores the messages whose endpoints still take them; each message's row id in order, None
/// for one not stored. PostgreSQL: one statement over arrays of the messages' values, one round
/// trip (and, outside a transaction, one commit) however many. SQLite: one prepared statement
/// per message, which costs no round trip.
pub(super) fn insert(
    conn: &mut DbConnection,
    kind: WebhookKind,
    messages: &[NewWebhookMessage],
) -> QueryResult<Vec<Option<MessageId>>> {
    if messages.is_empty() {
        return Ok(Vec::new());
    }
    let stored: Vec<Stored> = match conn {
        DbConnection::Pg(c) => {
            let column = |get: fn(&NewWebhookMessage) -> &str| -> Vec<&str> {
                messages.iter().map(get).collect()
            };
            let optional = |get: fn(&NewWebhookMessage) -> Option<&str>| -> Vec<Option<&str>> {
                messages.iter().map(get).collect()
            };
            // Ordered by the arrays' order, so the rows' ids follow the messages'.
            diesel::sql_query(format!(
                "{COLUMNS} {VALUES} FROM unnest($1, $2, $3, $4, $5, $6, $7, $8, $9) \
                 WITH ORDINALITY AS v(message_id, shop_id, endpoint_id, topic, payload, \
                 created_at, subject, request_id, trace_parent, n) \
                 JOIN webhook_endpoints e ON e.id = v.endpoint_id AND e.shop_id = v.shop_id \
                 AND e.topic = v.topic AND e.kind = $10 AND {LIVE} \
                 ORDER BY v.n RETURNING id, message_id"
            ))
            .bind::<Array<Text>, _>(column(|m| &m.message_id))
            .bind::<Array<BigInt>, _>(messages.iter().map(|m| m.shop_id.0).collect::<Vec<_>>())
            .bind::<Array<BigInt>, _>(messages.iter().map(|m| m.endpoint_id.0).collect::<Vec<_>>())
            .bind::<Array<Text>, _>(column(|m| &m.topic))
            .bind::<Array<Text>, _>(column(|m| &m.payload))
            .bind::<Array<BigInt>, _>(
                messages
                    .iter()
                    .map(|m| m.created_at.as_micros())
                    .collect::<Vec<_>>(),
            )
            .bind::<Array<Nullable<Text>>, _>(optional(|m| m.subject.as_deref()))
            .bind::<Array<Nullable<Text>>, _>(optional(|m| m.request_id.as_deref()))
            .bind::<Array<Nullable<Text>>, _>(optional(|m| m.trace_parent.as_deref()))
            .bind::<Text, _>(kind.as_str())
            .load(c)?
        }
        DbConnection::Sqlite(c) => {
            let statement = format!(
                "{COLUMNS} {VALUES} FROM (SELECT ? AS message_id, ? AS payload, ? AS created_at, \
                 ? AS subject, ? AS request_id, ? AS trace_parent) AS v \
                 JOIN webhook_endpoints e ON e.id = ? AND e.shop_id = ? AND e.topic = ? \
                 AND e.kind = ? AND {LIVE} RETURNING id, message_id"
            );
            let mut stored = Vec::with_capacity(messages.len());
            for m in messages {
                stored.extend(
                    diesel::sql_query(&statement)
                        .bind::<Text, _>(&m.message_id)
                        .bind::<Text, _>(&m.payload)
                        .bind::<BigInt, _>(m.created_at.as_micros())
                        .bind::<Nullable<Text>, _>(m.subject.as_deref())
                        .bind::<Nullable<Text>, _>(m.request_id.as_deref())
                        .bind::<Nullable<Text>, _>(m.trace_parent.as_deref())
                        .bind::<BigInt, _>(m.endpoint_id.0)
                        .bind::<BigInt, _>(m.shop_id.0)
                        .bind::<Text, _>(&m.topic)
                        .bind::<Text, _>(kind.as_str())
                        .load::<Stored>(c)?,
                );
            }
            stored
        }
    };
    // Matched by `webhook-id` (unique), whatever order the rows came back in.
    let mut ids: HashMap<String, i64> = stored
        .into_iter()
        .map(|row| (row.message_id, row.id))
        .collect();
    Ok(messages
        .iter()
        .map(|m| ids.remove(&m.message_id).map(MessageId))
        .collect())
}
