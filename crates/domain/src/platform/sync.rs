//! Customer and order syncs (contract §3.4): pull every page of the connector's list and feed
//! each entity through the same queue and rules as the connector's events.

use crate::access::shop::Shop;
use crate::kernel::error::DomainError;
use crate::kernel::time::Clock;
use crate::kernel::time::Timestamp;
use crate::platform::connector::{ConnectorError, PlatformConnector};
use crate::platform::destinations::{Topic, live_target};
use crate::platform::events::{synced_customer_events, synced_order_events};
use crate::platform::{PlatformDatabase, PlatformRepositories};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SyncStatus {
    Running,
    Succeeded,
    Failed,
}

impl SyncStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            SyncStatus::Running => "running",
            SyncStatus::Succeeded => "succeeded",
            SyncStatus::Failed => "failed",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "running" => Some(SyncStatus::Running),
            "succeeded" => Some(SyncStatus::Succeeded),
            "failed" => Some(SyncStatus::Failed),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyncRun {
    pub id: i64,
    pub shop_id: i64,
    pub topic: Topic,
    pub status: SyncStatus,
    pub pages: i64,
    pub items: i64,
    /// Entities the connector listed without a platform id or time: not applied.
    pub skipped: i64,
    pub error: Option<String>,
    pub started_at: Timestamp,
    pub heartbeat_at: Timestamp,
    pub finished_at: Option<Timestamp>,
}

/// A running sync that has not reported for this long is taken for dead (its process stopped).
pub const SYNC_STALE_AFTER_SECONDS: i64 = 120;
/// The page size asked of the connector (its maximum).
pub const SYNC_PAGE_SIZE: u32 = 250;

fn syncable(topic: Topic) -> Result<(), DomainError> {
    match topic {
        Topic::Customers | Topic::Orders => Ok(()),
        Topic::Products => Err(DomainError::invalid(
            "topic",
            "invalid_value",
            "only customers and orders can be synced",
        )),
    }
}

/// Starts a sync of `topic` for the shop; 409 while one runs or when the topic has no destination.
pub fn start_sync(
    tx: &mut dyn PlatformRepositories,
    shop: &Shop,
    topic: Topic,
    now: Timestamp,
) -> Result<SyncRun, DomainError> {
    syncable(topic)?;
    if tx.live_destination(shop.id, topic)?.is_none() {
        return Err(DomainError::Conflict {
            code: "destination.missing",
            message: format!(
                "the shop has no destination for {}: create one first",
                topic.as_str()
            ),
        });
    }
    let running = || DomainError::Conflict {
        code: "sync.running",
        message: format!("a {} sync is already running for this shop", topic.as_str()),
    };
    if let Some(run) = tx.running_sync(shop.id, topic)? {
        if run.heartbeat_at.plus_seconds(SYNC_STALE_AFTER_SECONDS) > now {
            return Err(running());
        }
        tx.finish_sync(
            run.id,
            SyncStatus::Failed,
            Some("abandoned: its process stopped reporting"),
            now,
        )?;
    }
    tx.insert_sync_run(shop.id, topic, now).map_err(|error| {
        if error.is_unique_violation() {
            running()
        } else {
            error.into()
        }
    })
}

/// Pulls every page and queues the entities; records the outcome on the run.
pub fn run_sync(
    db: &impl PlatformDatabase,
    connector: &dyn PlatformConnector,
    clock: &dyn Clock,
    shop: &Shop,
    run: &SyncRun,
) -> Result<SyncRun, DomainError> {
    let result = pull_pages(db, connector, clock, shop, run);
    let (status, error) = match &result {
        Ok(()) => (SyncStatus::Succeeded, None),
        Err(error) => (SyncStatus::Failed, Some(error.to_string())),
    };
    db.write_tx(|tx| {
        tx.finish_sync(run.id, status, error.as_deref(), clock.now())?;
        tx.sync_run(run.id)?.ok_or(DomainError::not_found("sync"))
    })
}

fn pull_pages(
    db: &impl PlatformDatabase,
    connector: &dyn PlatformConnector,
    clock: &dyn Clock,
    shop: &Shop,
    run: &SyncRun,
) -> Result<(), DomainError> {
    let failed = |error: ConnectorError| error.into_domain("connector.failed");
    let mut cursor: Option<String> = None;
    loop {
        let now = clock.now();
        let (_, target) = db
            .read_tx(|tx| live_target(tx, shop, run.topic, now))?
            .ok_or_else(|| DomainError::Conflict {
                code: "destination.missing",
                message: "the destination was deleted during the sync".to_string(),
            })?;
        let (events, skipped, next, count) = match run.topic {
            Topic::Customers => {
                let page = connector
                    .list_customers(&target, Some(SYNC_PAGE_SIZE), cursor.as_deref(), None)
                    .map_err(failed)?;
                let (events, skipped) = synced_customer_events(shop.id, &page.items, now);
                (
                    events,
                    skipped,
                    page.pagination.next_cursor().map(str::to_string),
                    page.items.len(),
                )
            }
            Topic::Orders => {
                let page = connector
                    .list_orders(&target, Some(SYNC_PAGE_SIZE), cursor.as_deref())
                    .map_err(failed)?;
                let (events, skipped) = synced_order_events(shop.id, &page.items, now);
                (
                    events,
                    skipped,
                    page.pagination.next_cursor().map(str::to_string),
                    page.items.len(),
                )
            }
            Topic::Products => return syncable(run.topic),
        };
        db.write_tx(|tx| {
            tx.insert_inbound_events(&events)?;
            tx.record_sync_page(run.id, count as i64, skipped as i64, now)?;
            Ok(())
        })?;
        match next {
            Some(next) if Some(&next) == cursor.as_ref() => {
                return Err(DomainError::Remote {
                    code: "connector.failed",
                    timed_out: false,
                    message: "the connector returned the same cursor twice".to_string(),
                });
            }
            Some(next) => cursor = Some(next),
            None => return Ok(()),
        }
    }
}
