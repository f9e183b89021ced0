//! Customer, order and product syncs: pull every page of the connector's list
//! and feed each entity through the same queue and rules as the connector's events. A product
//! sync lists the categories, then the products. A sync runs as a job ([`SyncJob`],
//! docs/jobs.md) that goes on from the stored cursor when it is taken up again.

use crate::kernel::ids::{ShopId, SyncId};
use serde::{Deserialize, Serialize};

use crate::access::shop::Shop;
use crate::kernel::error::DomainError;
use crate::kernel::jobs::{Job, JobControl, JobFailure, JobOutcome, JobPayload, enqueue};
use crate::kernel::time::Clock;
use crate::kernel::time::Timestamp;
use crate::platform::connector::{ConnectorError, ConnectorTarget, PlatformConnector};
use crate::platform::destinations::{Topic, live_target};
use crate::platform::events::{
    NewInboundEvent, synced_category_events, synced_customer_events, synced_order_events,
    synced_product_events,
};
use crate::platform::resources::Pagination;
use crate::platform::{PlatformDatabase, PlatformRepositories};

/// Where a sync run stands.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, utoipa::ToSchema, strum::IntoStaticStr, strum::EnumString,
)]
#[strum(serialize_all = "snake_case")]
#[schema(rename_all = "lowercase")]
pub enum SyncStatus {
    /// Pulling pages.
    Running,
    /// Every page was pulled.
    Succeeded,
    /// Stopped on an error, which the run keeps.
    Failed,
}

impl SyncStatus {
    /// The status's stored name (`running`, `succeeded`, `failed`).
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    /// The status of a stored name, or `None` for any other text.
    pub fn parse(text: &str) -> Option<Self> {
        text.parse().ok()
    }
}

/// One sync of a topic for a shop, as stored: its progress, and how it ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyncRun {
    /// The run's id (the service's integer).
    pub id: SyncId,
    /// The id of the shop it syncs.
    pub shop_id: ShopId,
    /// The topic whose lists it pulls.
    pub topic: Topic,
    /// Where it stands.
    pub status: SyncStatus,
    /// How many pages were pulled so far.
    pub pages: i64,
    /// How many entities those pages listed, skipped ones included.
    pub items: i64,
    /// Entities the connector listed without a platform id or time: not applied.
    pub skipped: i64,
    /// Why it failed, when it did.
    pub error: Option<String>,
    /// When it started.
    pub started_at: Timestamp,
    /// When it last reported alive (each page); a running sync silent for long is taken for dead.
    pub heartbeat_at: Timestamp,
    /// When it ended; `None` while it runs.
    pub finished_at: Option<Timestamp>,
    /// Where the next page starts: the sync goes on from here after a restart.
    pub next_cursor: Option<String>,
}

/// A sync run as answers show it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct SyncResource {
    /// The run's id (the service's integer).
    #[schema(value_type = i64)]
    pub id: SyncId,
    /// The topic it syncs (`customers`, `orders` or `products`).
    #[schema(value_type = Topic)]
    pub topic: &'static str,
    /// Where it stands (`running`, `succeeded` or `failed`).
    #[schema(value_type = SyncStatus)]
    pub status: &'static str,
    /// How many pages were pulled so far.
    pub pages: i64,
    /// How many entities those pages listed, skipped ones included.
    pub items: i64,
    /// How many of them were not applied (no platform id or time, or refused).
    pub skipped: i64,
    /// Why it failed, when it did.
    pub error: Option<String>,
    /// When it started.
    pub started_at: Timestamp,
    /// When it ended; `None` while it runs.
    pub finished_at: Option<Timestamp>,
}

impl SyncResource {
    /// The resource of `run`.
    pub fn of(run: &SyncRun) -> SyncResource {
        SyncResource {
            id: run.id,
            topic: run.topic.as_str(),
            status: run.status.as_str(),
            pages: run.pages,
            items: run.items,
            skipped: run.skipped,
            error: run.error.clone(),
            started_at: run.started_at,
            finished_at: run.finished_at,
        }
    }
}

/// The shop's sync run `id` of `topic`; 404 for another shop's, another topic's, or none.
pub fn find_run(
    tx: &mut dyn PlatformRepositories,
    shop: &Shop,
    topic: Topic,
    id: SyncId,
) -> Result<SyncRun, DomainError> {
    tx.sync_run(id)?
        .filter(|run| run.shop_id == shop.id && run.topic == topic)
        .ok_or(DomainError::not_found("sync"))
}

/// The job that pulls a sync run's pages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SyncJob {
    /// The id of the sync run to go on with.
    pub run_id: SyncId,
}

impl JobPayload for SyncJob {
    const KIND: &'static str = "platform.sync";
    const MAX_ATTEMPTS: i64 = 5;

    fn unique_key(&self) -> Option<String> {
        Some(format!("platform.sync:{}", self.run_id))
    }
}

/// A running sync that has not reported for this long is taken for dead (its process stopped).
pub(crate) const SYNC_STALE_AFTER_SECONDS: i64 = 120;
/// The page size asked of the connector (its maximum).
pub(crate) const SYNC_PAGE_SIZE: u32 = 250;

/// Where a product sync stands, as its stored cursor says: listing the categories, then the
/// products, each from a connector cursor (none: the list's first page). Stored as
/// `categories:{cursor}` and `products:{cursor}`; a run that has not started has no cursor.
#[derive(Debug, Clone, PartialEq, Eq)]
enum ProductSyncAt {
    Categories(Option<String>),
    Products(Option<String>),
}

impl ProductSyncAt {
    fn parse(stored: Option<&str>) -> ProductSyncAt {
        let cursor = |rest: &str| Some(rest.to_string()).filter(|rest| !rest.is_empty());
        match stored {
            Some(stored) => match stored.split_once(':') {
                Some(("products", rest)) => ProductSyncAt::Products(cursor(rest)),
                Some((_, rest)) => ProductSyncAt::Categories(cursor(rest)),
                None => ProductSyncAt::Categories(cursor(stored)),
            },
            None => ProductSyncAt::Categories(None),
        }
    }

    fn stored(&self) -> String {
        match self {
            ProductSyncAt::Categories(cursor) => {
                format!("categories:{}", cursor.as_deref().unwrap_or_default())
            }
            ProductSyncAt::Products(cursor) => {
                format!("products:{}", cursor.as_deref().unwrap_or_default())
            }
        }
    }
}

/// Starts a sync of `topic` for the shop and enqueues its job; 409 while one runs or when the
/// topic has no destination.
pub fn start_sync(
    tx: &mut dyn PlatformRepositories,
    shop: &Shop,
    topic: Topic,
    now: Timestamp,
) -> Result<SyncRun, DomainError> {
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
    let run = tx.insert_sync_run(shop.id, topic, now).map_err(|error| {
        if error.is_unique_violation() {
            running()
        } else {
            error.into()
        }
    })?;
    enqueue(tx, Some(run.shop_id), &SyncJob { run_id: run.id }, now, now)?;
    Ok(run)
}

/// How pulling pages ended, short of an error.
enum Pulled {
    /// The last page is stored, and the run ended as succeeded with it.
    All,
    /// Asked to stop between pages: the job goes back to the queue.
    Stopped,
    /// The run ended meanwhile (declared abandoned): nothing more to do.
    Ended,
}

/// Why pulling pages stopped short.
#[derive(Debug)]
enum PullError {
    /// May go through later: a storage error, or a connector that failed for now (5xx, 429,
    /// 408, a timeout, nothing listening).
    Transient(String),
    /// Will not: a 404, a malformed answer, a cursor that goes nowhere, a deleted destination.
    Fatal(String),
}

impl From<DomainError> for PullError {
    fn from(error: DomainError) -> Self {
        match error {
            DomainError::Storage(error) => PullError::Transient(error.to_string()),
            other => PullError::Fatal(other.to_string()),
        }
    }
}

impl From<ConnectorError> for PullError {
    fn from(error: ConnectorError) -> Self {
        if error.is_transient() {
            PullError::Transient(error.to_string())
        } else {
            PullError::Fatal(error.to_string())
        }
    }
}

/// Runs a sync's job: pulls the pages from where the run stopped (its stored cursor) to the
/// last. A transient failure (storage, or a connector failing for now) fails the job's
/// attempt, tried again with backoff from the stored cursor, and ends the run as failed on the
/// job's last attempt; any other connector error ends it at once.
pub fn run_sync_job(
    db: &impl PlatformDatabase,
    connector: &dyn PlatformConnector,
    clock: &dyn Clock,
    sync: SyncJob,
    job: &Job,
    control: &dyn JobControl,
) -> Result<JobOutcome, JobFailure> {
    let found = db.read_tx(|tx| {
        let Some(run) = tx.sync_run(sync.run_id)? else {
            return Ok(None);
        };
        // A deleted shop's sync ends: nothing more is asked of its platform.
        Ok(tx
            .shop_by_id(run.shop_id)?
            .filter(|shop| shop.deleted_at.is_none())
            .map(|shop| (run, shop)))
    })?;
    let Some((run, shop)) = found else {
        return Ok(JobOutcome::Done);
    };
    if run.status != SyncStatus::Running {
        return Ok(JobOutcome::Done);
    }
    let error = match pull_pages(db, connector, clock, &shop, &run, control) {
        Ok(Pulled::All) => {
            log_end(db, run.id);
            return Ok(JobOutcome::Done);
        }
        Ok(Pulled::Ended) => return Ok(JobOutcome::Done),
        Ok(Pulled::Stopped) => return Ok(JobOutcome::Interrupted),
        Err(PullError::Transient(error)) if !job.is_last_attempt() => {
            log::warn!(
                target: "mercer::sync",
                "{} sync {} of shop {}: {error}; tried again from its cursor",
                run.topic.as_str(),
                run.id,
                run.shop_id
            );
            return Err(JobFailure::retry(error));
        }
        Err(PullError::Transient(error) | PullError::Fatal(error)) => error,
    };
    db.write_tx(|tx| Ok(tx.finish_sync(run.id, SyncStatus::Failed, Some(&error), clock.now())?))?;
    log_end(db, run.id);
    Ok(JobOutcome::Done)
}

fn log_end(db: &impl PlatformDatabase, id: SyncId) {
    if let Ok(Some(run)) = db.read_tx(|tx| Ok(tx.sync_run(id)?)) {
        log::info!(
            target: "mercer::sync",
            "{} sync {} of shop {} ended {}: {} page(s), {} item(s)",
            run.topic.as_str(),
            run.id,
            run.shop_id,
            run.status.as_str(),
            run.pages,
            run.items
        );
    }
}

/// One page pulled from the connector.
struct PulledPage {
    /// Its entities as events to queue.
    events: Vec<NewInboundEvent>,
    /// How many of the entities it listed were skipped (no id or time, or refused).
    skipped: usize,
    /// How many entities it listed.
    count: usize,
    /// The run's stored cursor for the next page; None after the last page.
    next: Option<String>,
}

impl PulledPage {
    fn of(
        (events, skipped): (Vec<NewInboundEvent>, usize),
        count: usize,
        next: Option<String>,
    ) -> Self {
        PulledPage {
            events,
            skipped,
            count,
            next,
        }
    }
}

/// The page of the run's list at `cursor` (the run's stored cursor).
fn pull_page(
    connector: &dyn PlatformConnector,
    target: &ConnectorTarget,
    shop_id: ShopId,
    topic: Topic,
    cursor: Option<&str>,
    now: Timestamp,
) -> Result<PulledPage, ConnectorError> {
    let limit = Some(SYNC_PAGE_SIZE);
    let next = |pagination: &Pagination| pagination.next_cursor().map(str::to_string);
    Ok(match topic {
        Topic::Customers => {
            let page = connector.list_customers(target, limit, cursor, None)?;
            let events = synced_customer_events(shop_id, &page.items, now);
            PulledPage::of(events, page.items.len(), next(&page.pagination))
        }
        Topic::Orders => {
            let page = connector.list_orders(target, limit, cursor)?;
            let events = synced_order_events(shop_id, &page.items, now);
            PulledPage::of(events, page.items.len(), next(&page.pagination))
        }
        Topic::Products => match ProductSyncAt::parse(cursor) {
            ProductSyncAt::Categories(at) => {
                let page = connector.list_categories(target, limit, at.as_deref())?;
                let events = synced_category_events(shop_id, &page.items, now);
                // After the last page of categories come the products, from their first.
                let then = match next(&page.pagination) {
                    Some(cursor) => ProductSyncAt::Categories(Some(cursor)),
                    None => ProductSyncAt::Products(None),
                };
                PulledPage::of(events, page.items.len(), Some(then.stored()))
            }
            ProductSyncAt::Products(at) => {
                let page = connector.list_products(target, limit, at.as_deref())?;
                let events = synced_product_events(shop_id, &page.items, now);
                let then = next(&page.pagination)
                    .map(|cursor| ProductSyncAt::Products(Some(cursor)).stored());
                PulledPage::of(events, page.items.len(), then)
            }
        },
    })
}

fn pull_pages(
    db: &impl PlatformDatabase,
    connector: &dyn PlatformConnector,
    clock: &dyn Clock,
    shop: &Shop,
    run: &SyncRun,
    control: &dyn JobControl,
) -> Result<Pulled, PullError> {
    let mut cursor: Option<String> = run.next_cursor.clone();
    loop {
        if control.should_stop() {
            return Ok(Pulled::Stopped);
        }
        let now = clock.now();
        let (_, target) = db
            .read_tx(|tx| live_target(tx, shop, run.topic, now))?
            .ok_or_else(|| DomainError::Conflict {
                code: "destination.missing",
                message: "the destination was deleted during the sync".to_string(),
            })?;
        let PulledPage {
            events,
            skipped,
            count,
            next,
        } = pull_page(
            connector,
            &target,
            shop.id,
            run.topic,
            cursor.as_deref(),
            now,
        )?;
        if next.is_some() && next == cursor {
            return Err(PullError::Fatal(
                "the connector returned the same cursor twice".to_string(),
            ));
        }
        // The page's events, the run's counters and the next cursor in one transaction (the
        // last page ends the run in it too): a run taken up again after a crash neither skips
        // nor repeats a stored page.
        let recorded = db.write_tx(|tx| {
            let (items, skipped) = (count as i64, skipped as i64);
            if !tx.record_sync_page(run.id, items, skipped, next.as_deref(), now)? {
                return Ok(false);
            }
            tx.insert_inbound_events(&events)?;
            if next.is_none() {
                tx.finish_sync(run.id, SyncStatus::Succeeded, None, now)?;
            }
            Ok(true)
        })?;
        match next {
            _ if !recorded => return Ok(Pulled::Ended),
            Some(next) => cursor = Some(next),
            None => return Ok(Pulled::All),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_product_sync_lists_categories_then_products_from_its_stored_cursor() {
        use ProductSyncAt::{Categories, Products};
        let cases = [
            (None, Categories(None)),
            (Some("categories:"), Categories(None)),
            (Some("categories:c:2"), Categories(Some("c:2".into()))),
            (Some("products:"), Products(None)),
            (Some("products:p 7"), Products(Some("p 7".into()))),
        ];
        for (stored, at) in cases {
            assert_eq!(ProductSyncAt::parse(stored), at, "{stored:?}");
            if let Some(stored) = stored {
                assert_eq!(at.stored(), stored);
            }
        }
    }
}
