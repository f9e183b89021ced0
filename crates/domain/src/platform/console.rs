//! What the operator console shows of a shop's connector, and the actions it takes on it:
//! destinations, syncs, the outbox, events pending and set aside; putting an event back into
//! the queue and starting a sync, each written to the audit log in the same transaction.

use crate::access::console::{ConsoleStaff, record_action};
use crate::kernel::error::DomainError;
use crate::kernel::ids::EventId;
use crate::kernel::ids::ShopId;
use crate::kernel::time::Timestamp;
use crate::platform::destinations::{Destination, Topic, list_destinations};
use crate::platform::events::{FailedInboundEvent, requeue_set_aside};
use crate::platform::outbox::OutboxEntry;
use crate::platform::sync::{SyncRun, start_sync};
use crate::platform::{PlatformDatabase, PlatformRepositories};

/// The Connector page of one shop.
#[derive(Debug, Clone)]
pub struct ConnectorView {
    /// Live destinations; each was verified by a signed call when it was created or last
    /// changed (its `updated_at`).
    pub destinations: Vec<Destination>,
    /// The latest sync runs, newest first.
    pub syncs: Vec<SyncRun>,
    /// The latest outbox calls, newest first.
    pub outbox: Vec<OutboxEntry>,
    /// Events waiting to be applied.
    pub events_pending: i64,
    /// Events set aside, oldest first.
    pub set_aside: Vec<FailedInboundEvent>,
}

/// What the Connector page shows, `limit` lines of each list.
pub fn connector_view(
    tx: &mut dyn PlatformRepositories,
    staff: &ConsoleStaff,
    limit: usize,
) -> Result<ConnectorView, DomainError> {
    let shop_id = staff.shop.id;
    Ok(ConnectorView {
        destinations: list_destinations(tx, &staff.shop)?,
        syncs: tx.recent_sync_runs(shop_id, limit)?,
        outbox: tx.recent_outbox_entries(shop_id, limit)?,
        events_pending: tx.count_shop_pending_events(shop_id)?,
        set_aside: set_aside_events(tx, shop_id, limit)?,
    })
}

/// Starts a sync of `topic` (as the API's Start Sync does) and records who did it.
pub fn start_shop_sync(
    db: &impl PlatformDatabase,
    staff: &ConsoleStaff,
    topic: Topic,
    now: Timestamp,
) -> Result<SyncRun, DomainError> {
    db.write_tx(|tx| {
        let run = start_sync(tx, &staff.shop, topic, now)?;
        let subject = format!("{} {}", topic.as_str(), run.id);
        record_action(tx, staff, "sync.start", &subject, now)?;
        Ok(run)
    })
}

/// The shop's events set aside, oldest first.
pub fn set_aside_events(
    tx: &mut dyn PlatformRepositories,
    shop_id: ShopId,
    limit: usize,
) -> Result<Vec<FailedInboundEvent>, DomainError> {
    Ok(tx.failed_inbound_events(Some(shop_id), limit)?)
}

/// Puts the shop's event `id` back into the queue (the applier takes it from there) and records
/// who did it; another shop's event is `not_found`.
pub fn retry_event(
    db: &impl PlatformDatabase,
    staff: &ConsoleStaff,
    id: EventId,
    now: Timestamp,
) -> Result<(), DomainError> {
    db.write_tx(|tx| {
        requeue_set_aside(tx, Some(staff.shop.id), Some(&[id]))?;
        record_action(tx, staff, "platform_event.retry", &id.to_string(), now)
    })
}
