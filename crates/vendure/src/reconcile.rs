//! The reconcile pass: every interval, what changed in Vendure since the last pass (lists
//! sorted by `updatedAt`, and the soft deletions) is sent to Mercer again. A push the plugin
//! gave up on, or one made while the connector was down, is delivered this way, late.
//!
//! When the last pass started is kept in Vendure (the plugin's `mercerReconciledAt`, by the
//! connector's URL), so a restarted connector goes on from there. The first pass of a new shop starts from now: what
//! existed before is pulled by Mercer's sync.

use std::thread;
use std::time::Duration;

use mercer_domain::Timestamp;
use serde::Deserialize;
use serde_json::json;

use crate::relay::{Change, Relay, RelayError};
use crate::vendure::{Vendure, VendureError};

/// How far before the last pass's start a pass looks: Vendure on SQLite keeps whole seconds.
const OVERLAP_SECONDS: i64 = 2;
/// How many changed entities one list call reads.
const PAGE: usize = 100;

/// The lists a pass reads, by the plugin's entity names.
const LISTS: &[(&str, &str)] = &[
    ("customer", "customers"),
    ("collection", "collections"),
    ("product", "products"),
    ("order", "orders"),
];

/// Runs a pass every `interval`, for ever, on its own thread, for the connector Vendure reaches
/// at `connector_url`.
pub fn spawn(
    vendure: Vendure,
    relay: Relay,
    connector_url: String,
    interval: Duration,
) -> thread::JoinHandle<()> {
    thread::spawn(move || {
        loop {
            thread::sleep(interval);
            match run_pass(&vendure, &relay, &connector_url) {
                Ok(sent) if sent > 0 => tracing::info!(sent, "reconciled changes with Mercer"),
                Ok(_) => {}
                Err(error) => tracing::warn!(%error, "a reconcile pass did not finish"),
            }
        }
    })
}

/// One pass: sends every change since the last pass, then records this one's start. Answers
/// how many changes it sent. A change that could not be sent does not stop the others; the
/// pass is then not recorded, so the next one sends it again.
pub fn run_pass(
    vendure: &Vendure,
    relay: &Relay,
    connector_url: &str,
) -> Result<usize, RelayError> {
    let started = Timestamp::now();
    let Some(since) = last_pass(vendure, connector_url)? else {
        record_pass(vendure, connector_url, started)?;
        return Ok(0);
    };
    let changes = changes_since(vendure, since.plus_seconds(-OVERLAP_SECONDS), started)?;
    let mut sent = 0;
    let mut first_failure = None;
    for change in &changes {
        match relay.send(vendure, change) {
            Ok(()) => sent += 1,
            Err(error) => {
                tracing::debug!(entity = change.entity, id = change.id, %error, "a change was not sent");
                first_failure.get_or_insert(error);
            }
        }
    }
    if let Some(error) = first_failure {
        return Err(error);
    }
    record_pass(vendure, connector_url, started)?;
    Ok(sent)
}

/// What changed after `since`: every listed entity updated since (as seen at `started`), then
/// the soft deletions at their own times.
fn changes_since(
    vendure: &Vendure,
    since: Timestamp,
    started: Timestamp,
) -> Result<Vec<Change>, VendureError> {
    let mut changes = Vec::new();
    for (entity, list) in LISTS {
        for id in changed_since(vendure, list, since)? {
            changes.push(Change {
                entity: entity.to_string(),
                id,
                kind: "updated".to_string(),
                at: started,
            });
        }
    }
    for entity in ["customer", "product"] {
        for (id, at) in deleted_since(vendure, entity, since)? {
            changes.push(Change {
                entity: entity.to_string(),
                id,
                kind: "deleted".to_string(),
                at,
            });
        }
    }
    Ok(changes)
}

fn last_pass(vendure: &Vendure, connector_url: &str) -> Result<Option<Timestamp>, VendureError> {
    #[derive(Deserialize)]
    struct Last {
        #[serde(rename = "mercerReconciledAt")]
        at: Option<Timestamp>,
    }
    let Last { at } = vendure.admin(
        "query($url: String!) { mercerReconciledAt(url: $url) }",
        json!({ "url": connector_url }),
    )?;
    Ok(at)
}

fn record_pass(vendure: &Vendure, connector_url: &str, at: Timestamp) -> Result<(), VendureError> {
    vendure.admin::<serde_json::Value>(
        "mutation($url: String!, $at: DateTime!) { setMercerReconciledAt(url: $url, at: $at) }",
        json!({ "url": connector_url, "at": at }),
    )?;
    Ok(())
}

/// The ids of the list's entities changed after `since`, oldest change first.
fn changed_since(
    vendure: &Vendure,
    list: &str,
    since: Timestamp,
) -> Result<Vec<String>, VendureError> {
    #[derive(Deserialize)]
    struct Answer {
        list: Items,
    }
    #[derive(Deserialize)]
    struct Items {
        items: Vec<Id>,
        #[serde(rename = "totalItems")]
        total: usize,
    }
    #[derive(Deserialize)]
    struct Id {
        id: String,
    }
    let query = format!(
        "query($after: DateTime!, $skip: Int!, $take: Int!) {{
            list: {list}(options: {{
                filter: {{updatedAt: {{after: $after}}}}, sort: {{updatedAt: ASC}},
                skip: $skip, take: $take
            }}) {{ items {{ id }} totalItems }}
        }}"
    );
    let mut ids = Vec::new();
    loop {
        let variables = json!({ "after": since, "skip": ids.len(), "take": PAGE });
        let Answer { list } = vendure.admin(&query, variables)?;
        let done = list.items.is_empty() || ids.len() + list.items.len() >= list.total;
        ids.extend(list.items.into_iter().map(|item| item.id));
        if done {
            return Ok(ids);
        }
    }
}

/// The entities (customers or products) soft-deleted at or after `since`, with their times.
fn deleted_since(
    vendure: &Vendure,
    entity: &str,
    since: Timestamp,
) -> Result<Vec<(String, Timestamp)>, VendureError> {
    #[derive(Deserialize)]
    struct Answer {
        #[serde(rename = "mercerDeleted")]
        deleted: Vec<Deletion>,
    }
    #[derive(Deserialize)]
    struct Deletion {
        id: String,
        #[serde(rename = "deletedAt")]
        deleted_at: Timestamp,
    }
    let Answer { deleted } = vendure.admin(
        "query($entity: String!, $since: DateTime!, $take: Int!) {
            mercerDeleted(entity: $entity, since: $since, take: $take) { id deletedAt }
        }",
        json!({ "entity": entity, "since": since, "take": 1000 }),
    )?;
    Ok(deleted
        .into_iter()
        .map(|deletion| (deletion.id, deletion.deleted_at))
        .collect())
}
