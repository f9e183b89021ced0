//! What the operator console shows of a shop's connector, and the actions it takes on it: the
//! events set aside with their error, and putting one back into the queue, written to the audit
//! log in the same transaction.

use crate::access::console::{ConsoleStaff, record_action};
use crate::kernel::error::DomainError;
use crate::kernel::time::Timestamp;
use crate::platform::events::{FailedInboundEvent, requeue_set_aside};
use crate::platform::{PlatformDatabase, PlatformRepositories};

/// The shop's events set aside, oldest first.
pub fn set_aside_events(
    tx: &mut dyn PlatformRepositories,
    shop_id: i64,
    limit: usize,
) -> Result<Vec<FailedInboundEvent>, DomainError> {
    Ok(tx.failed_inbound_events(Some(shop_id), limit)?)
}

/// Puts the shop's event `id` back into the queue (the applier takes it from there) and records
/// who did it; another shop's event is `not_found`.
pub fn retry_event(
    db: &impl PlatformDatabase,
    staff: &ConsoleStaff,
    id: i64,
    now: Timestamp,
) -> Result<(), DomainError> {
    db.write_tx(|tx| {
        requeue_set_aside(tx, Some(staff.shop.id), Some(&[id]))?;
        record_action(tx, staff, "platform_event.retry", &id.to_string(), now)
    })
}
