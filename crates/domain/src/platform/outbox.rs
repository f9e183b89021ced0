//! Service-side changes of a registered topic:
//! recorded in the same transaction as the change, then delivered to the connector with retries
//! and backoff by the shop's delivery job ([`OutboxJob`], docs/jobs.md), enqueued with the call.
//! Nothing is recorded, and nothing is called, for a topic without a live destination.

use crate::kernel::ids::{AddressId, CustomerId, OutboxCallId, ShopId};
use serde::{Deserialize, Serialize};

use crate::kernel::error::DomainError;
use crate::kernel::jobs::{JobControl, JobFailure, JobOutcome, JobPayload, enqueue};
use crate::kernel::time::Clock;
use crate::kernel::time::Timestamp;
use crate::platform::PlatformDatabase;
use crate::platform::PlatformRepositories;
use crate::platform::connector::{
    ConnectorError, ConnectorResult, ConnectorTarget, PlatformConnector,
};
use crate::platform::destinations::{Topic, live_target};
use crate::platform::events::EntityKind;
use crate::platform::resources::{Customer, CustomerAddress, Order, Payment};

/// One call to make on the connector, as it is kept in the outbox.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "operation", rename_all = "snake_case")]
pub enum ConnectorCall {
    /// Create Customer.
    CreateCustomer {
        /// The customer to create.
        customer: Customer,
    },
    /// Update Customer.
    UpdateCustomer {
        /// The customer's platform id.
        platform_id: String,
        /// The customer's new fields.
        customer: Customer,
    },
    /// Delete Customer.
    DeleteCustomer {
        /// The customer's platform id.
        platform_id: String,
    },
    /// Create Customer Address.
    CreateAddress {
        /// The platform id of the address's customer.
        platform_customer_id: String,
        /// The address to create.
        address: CustomerAddress,
    },
    /// Update Customer Address.
    UpdateAddress {
        /// The platform id of the address's customer.
        platform_customer_id: String,
        /// The address's platform id.
        platform_id: String,
        /// The address's new fields.
        address: CustomerAddress,
    },
    /// Delete Customer Address.
    DeleteAddress {
        /// The platform id of the address's customer.
        platform_customer_id: String,
        /// The address's platform id.
        platform_id: String,
    },
    /// Create Order.
    CreateOrder {
        /// The order to create.
        order: Order,
        /// Sent as `Idempotency-Key`, so a retry does not create the order twice.
        idempotency_key: Option<String>,
    },
    /// Update Order.
    UpdateOrder {
        /// The order's platform id.
        platform_id: String,
        /// The order's new fields.
        order: Order,
    },
    /// Create Payment.
    CreatePayment {
        /// The platform id of the payment's order.
        platform_order_id: String,
        /// The payment to record.
        payment: Payment,
    },
    /// A customer Mercer made (the subscription API): created on the platform, and the platform
    /// id answered is stored. Made once: nothing is called when it has a platform id already.
    CreateServiceCustomer {
        /// The customer's id (the service's integer).
        customer_id: CustomerId,
        /// The customer to create.
        customer: Customer,
    },
    /// A change to a customer, by Mercer's id: its platform id is read when the call is made,
    /// so a change of a customer whose creation is still queued waits for it.
    UpdateServiceCustomer {
        /// The customer's id (the service's integer).
        customer_id: CustomerId,
        /// The customer's new fields.
        customer: Customer,
    },
    /// An address Mercer made, of a customer by Mercer's id; the platform id answered is stored.
    CreateServiceAddress {
        /// The id of the address's customer (the service's integer).
        customer_id: CustomerId,
        /// The address's id (the service's integer).
        address_id: AddressId,
        /// The address to create.
        address: CustomerAddress,
    },
    /// A change to an address Mercer knows, by Mercer's ids: made once both have platform ids.
    UpdateServiceAddress {
        /// The id of the address's customer (the service's integer).
        customer_id: CustomerId,
        /// The address's id (the service's integer).
        address_id: AddressId,
        /// The address's new fields.
        address: CustomerAddress,
    },
    /// The deletion of an address Mercer knows, by Mercer's ids: made once both have platform ids.
    DeleteServiceAddress {
        /// The id of the address's customer (the service's integer).
        customer_id: CustomerId,
        /// The address's id (the service's integer).
        address_id: AddressId,
    },
}

/// The platform ids of the Mercer records a call names, read when it is made.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PlatformIds {
    /// The customer's platform id, if it has one yet.
    pub customer: Option<String>,
    /// The address's platform id, if it has one yet.
    pub address: Option<String>,
}

/// What making a call leaves to record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallOutcome {
    /// The call was made (or had nothing to do); nothing more to record.
    Done,
    /// The platform id of a customer Mercer made.
    CustomerCreated {
        /// The customer's id (the service's integer).
        customer_id: CustomerId,
        /// Its platform id, as the platform answered.
        platform_id: String,
    },
    /// The platform id of an address Mercer made.
    AddressCreated {
        /// The address's id (the service's integer).
        address_id: AddressId,
        /// Its platform id, as the platform answered.
        platform_id: String,
    },
    /// A platform id the call needs is not known yet (its creation is queued or failed): try
    /// again later.
    NotYet(&'static str),
}

const CUSTOMER_NOT_YET: &str = "the customer has no platform id yet";
const ADDRESS_NOT_YET: &str = "the address has no platform id yet";

impl ConnectorCall {
    /// The destination topic whose connector the call goes to.
    pub fn topic(&self) -> Topic {
        match self {
            ConnectorCall::CreateCustomer { .. }
            | ConnectorCall::UpdateCustomer { .. }
            | ConnectorCall::DeleteCustomer { .. }
            | ConnectorCall::CreateAddress { .. }
            | ConnectorCall::UpdateAddress { .. }
            | ConnectorCall::DeleteAddress { .. }
            | ConnectorCall::CreateServiceCustomer { .. }
            | ConnectorCall::UpdateServiceCustomer { .. }
            | ConnectorCall::CreateServiceAddress { .. }
            | ConnectorCall::UpdateServiceAddress { .. }
            | ConnectorCall::DeleteServiceAddress { .. } => Topic::Customers,
            ConnectorCall::CreateOrder { .. }
            | ConnectorCall::UpdateOrder { .. }
            | ConnectorCall::CreatePayment { .. } => Topic::Orders,
        }
    }

    /// The connector operation the call makes (`create_customer`, `create_order`…).
    pub fn operation(&self) -> &'static str {
        match self {
            ConnectorCall::CreateCustomer { .. } | ConnectorCall::CreateServiceCustomer { .. } => {
                "create_customer"
            }
            ConnectorCall::UpdateCustomer { .. } | ConnectorCall::UpdateServiceCustomer { .. } => {
                "update_customer"
            }
            ConnectorCall::DeleteCustomer { .. } => "delete_customer",
            ConnectorCall::CreateAddress { .. } | ConnectorCall::CreateServiceAddress { .. } => {
                "create_address"
            }
            ConnectorCall::UpdateAddress { .. } | ConnectorCall::UpdateServiceAddress { .. } => {
                "update_address"
            }
            ConnectorCall::DeleteAddress { .. } | ConnectorCall::DeleteServiceAddress { .. } => {
                "delete_address"
            }
            ConnectorCall::CreateOrder { .. } => "create_order",
            ConnectorCall::UpdateOrder { .. } => "update_order",
            ConnectorCall::CreatePayment { .. } => "create_payment",
        }
    }

    /// Mercer's ids of the customer and address this call names, when it names them so.
    pub fn service_ids(&self) -> Option<(CustomerId, Option<AddressId>)> {
        match self {
            ConnectorCall::CreateServiceCustomer { customer_id, .. }
            | ConnectorCall::UpdateServiceCustomer { customer_id, .. } => {
                Some((*customer_id, None))
            }
            ConnectorCall::CreateServiceAddress {
                customer_id,
                address_id,
                ..
            }
            | ConnectorCall::UpdateServiceAddress {
                customer_id,
                address_id,
                ..
            }
            | ConnectorCall::DeleteServiceAddress {
                customer_id,
                address_id,
            } => Some((*customer_id, Some(*address_id))),
            _ => None,
        }
    }

    /// Makes the call; `ids` are the platform ids of the Mercer records it names.
    pub fn perform(
        &self,
        connector: &dyn PlatformConnector,
        target: &ConnectorTarget,
        ids: &PlatformIds,
    ) -> ConnectorResult<CallOutcome> {
        let customer_platform_id = ids.customer.as_deref();
        let address_platform_id = ids.address.as_deref();
        match self {
            ConnectorCall::CreateServiceCustomer {
                customer_id,
                customer,
            } => {
                if customer_platform_id.is_some() {
                    return Ok(CallOutcome::Done);
                }
                let created = connector.create_customer(target, customer)?;
                Ok(match created.platform_id {
                    Some(platform_id) => CallOutcome::CustomerCreated {
                        customer_id: *customer_id,
                        platform_id: platform_id.as_str().to_string(),
                    },
                    None => CallOutcome::Done,
                })
            }
            ConnectorCall::UpdateServiceCustomer { customer, .. } => {
                let Some(platform_id) = customer_platform_id else {
                    return Ok(CallOutcome::NotYet(CUSTOMER_NOT_YET));
                };
                connector.update_customer(target, platform_id, customer)?;
                Ok(CallOutcome::Done)
            }
            ConnectorCall::CreateServiceAddress {
                address_id,
                address,
                ..
            } => {
                let Some(customer_platform_id) = customer_platform_id else {
                    return Ok(CallOutcome::NotYet(CUSTOMER_NOT_YET));
                };
                if address_platform_id.is_some() {
                    return Ok(CallOutcome::Done);
                }
                let created = connector.create_address(target, customer_platform_id, address)?;
                Ok(match created.platform_id {
                    Some(platform_id) => CallOutcome::AddressCreated {
                        address_id: *address_id,
                        platform_id: platform_id.as_str().to_string(),
                    },
                    None => CallOutcome::Done,
                })
            }
            ConnectorCall::UpdateServiceAddress { address, .. } => {
                let (Some(customer), Some(platform_id)) =
                    (customer_platform_id, address_platform_id)
                else {
                    return Ok(CallOutcome::NotYet(ADDRESS_NOT_YET));
                };
                connector.update_address(target, customer, platform_id, address)?;
                Ok(CallOutcome::Done)
            }
            ConnectorCall::DeleteServiceAddress { .. } => {
                let (Some(customer), Some(platform_id)) =
                    (customer_platform_id, address_platform_id)
                else {
                    return Ok(CallOutcome::NotYet(ADDRESS_NOT_YET));
                };
                connector.delete_address(target, customer, platform_id)?;
                Ok(CallOutcome::Done)
            }
            other => other
                .perform_plain(connector, target)
                .map(|()| CallOutcome::Done),
        }
    }

    fn perform_plain(
        &self,
        connector: &dyn PlatformConnector,
        target: &ConnectorTarget,
    ) -> ConnectorResult<()> {
        match self {
            ConnectorCall::CreateCustomer { customer } => {
                connector.create_customer(target, customer).map(drop)
            }
            ConnectorCall::UpdateCustomer {
                platform_id,
                customer,
            } => connector
                .update_customer(target, platform_id, customer)
                .map(drop),
            ConnectorCall::DeleteCustomer { platform_id } => {
                connector.delete_customer(target, platform_id)
            }
            ConnectorCall::CreateAddress {
                platform_customer_id,
                address,
            } => connector
                .create_address(target, platform_customer_id, address)
                .map(drop),
            ConnectorCall::UpdateAddress {
                platform_customer_id,
                platform_id,
                address,
            } => connector
                .update_address(target, platform_customer_id, platform_id, address)
                .map(drop),
            ConnectorCall::DeleteAddress {
                platform_customer_id,
                platform_id,
            } => connector.delete_address(target, platform_customer_id, platform_id),
            ConnectorCall::CreateOrder {
                order,
                idempotency_key,
            } => connector
                .create_order(target, order, idempotency_key.as_deref())
                .map(drop),
            ConnectorCall::UpdateOrder { platform_id, order } => {
                connector.update_order(target, platform_id, order).map(drop)
            }
            ConnectorCall::CreatePayment {
                platform_order_id,
                payment,
            } => connector
                .create_payment(target, platform_order_id, payment)
                .map(drop),
            // Made by `perform`, which reads their platform ids first.
            ConnectorCall::CreateServiceCustomer { .. }
            | ConnectorCall::UpdateServiceCustomer { .. }
            | ConnectorCall::CreateServiceAddress { .. }
            | ConnectorCall::UpdateServiceAddress { .. }
            | ConnectorCall::DeleteServiceAddress { .. } => Ok(()),
        }
    }
}

/// Where an outbox call stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, strum::IntoStaticStr, strum::EnumString)]
#[strum(serialize_all = "snake_case")]
pub enum OutboxStatus {
    /// Waiting to be made, or to be tried again.
    Pending,
    /// Made: the connector accepted it.
    Delivered,
    /// Gave up: a permanent error, or every retry failed.
    Failed,
    /// The topic lost its destination before the call could be made.
    Cancelled,
}

impl OutboxStatus {
    /// The status's stored name (`pending`, `delivered`, `failed`, `cancelled`).
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    /// The status of a stored name, or `None` for any other text.
    pub fn parse(text: &str) -> Option<Self> {
        text.parse().ok()
    }
}

/// A call kept in the outbox, with where its delivery stands.
#[derive(Debug, Clone, PartialEq)]
pub struct OutboxEntry {
    /// The entry's id (the service's integer).
    pub id: OutboxCallId,
    /// The id of the shop whose connector is called.
    pub shop_id: ShopId,
    /// The call to make.
    pub call: ConnectorCall,
    /// Where its delivery stands.
    pub status: OutboxStatus,
    /// How many attempts were made so far.
    pub attempts: i64,
    /// When it may be tried (again); the end of the lease while a worker holds it.
    pub next_attempt_at: Timestamp,
    /// The error of the last failed attempt, if any.
    pub last_error: Option<String>,
    /// When it was recorded.
    pub created_at: Timestamp,
}

/// Seconds to wait after the n-th failed attempt; after the last one the call is given up.
pub(crate) const RETRY_AFTER_SECONDS: [i64; 8] = [5, 30, 120, 600, 1800, 3600, 3 * 3600, 6 * 3600];
/// How long a worker holds the calls it claimed before another may take them.
pub(crate) const CLAIM_LEASE_SECONDS: i64 = 120;

/// The job that delivers a shop's due calls: one per shop (its key), so a shop's calls go out
/// in order, from one worker at a time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutboxJob {
    /// The id of the shop whose calls it delivers.
    pub shop_id: ShopId,
}

impl JobPayload for OutboxJob {
    const KIND: &'static str = "platform.outbox";

    fn unique_key(&self) -> Option<String> {
        Some(format!("platform.outbox:{}", self.shop_id))
    }
}

/// Records `call` for the shop's connector and enqueues the shop's delivery job, in the
/// caller's transaction; None (and nothing recorded) when its topic has no live destination.
pub fn request_connector_change(
    tx: &mut dyn PlatformRepositories,
    shop_id: ShopId,
    call: &ConnectorCall,
    now: Timestamp,
) -> Result<Option<OutboxCallId>, DomainError> {
    if tx.live_destination(shop_id, call.topic())?.is_none() {
        return Ok(None);
    }
    let id = tx.insert_outbox_call(shop_id, call, now)?;
    enqueue(tx, Some(shop_id), &OutboxJob { shop_id }, now, now)?;
    Ok(Some(id))
}

/// Enqueues the delivery job of every shop with pending calls (coalescing with those queued),
/// due when its next call is: at start, so no call is left without a job (one whose job
/// failed for good, one recorded by an older version).
pub fn enqueue_waiting_deliveries(
    tx: &mut dyn PlatformRepositories,
    now: Timestamp,
) -> Result<usize, DomainError> {
    let shops = tx.shops_with_pending_outbox_calls()?;
    for &shop_id in &shops {
        let due = tx.next_outbox_attempt(shop_id)?.unwrap_or(now);
        enqueue(tx, Some(shop_id), &OutboxJob { shop_id }, due, now)?;
    }
    Ok(shops.len())
}

/// Runs a shop's delivery job: makes its due calls, then ends, or comes back when the next
/// call waiting for a retry is due.
pub fn deliver_shop_calls(
    db: &impl PlatformDatabase,
    connector: &dyn PlatformConnector,
    clock: &dyn Clock,
    outbox: OutboxJob,
    control: &dyn JobControl,
) -> Result<JobOutcome, JobFailure> {
    loop {
        if control.should_stop() {
            return Ok(JobOutcome::Interrupted);
        }
        if deliver_due_calls(db, connector, clock, outbox.shop_id, 20)? == 0 {
            break;
        }
    }
    let next = db.read_tx(|tx| Ok(tx.next_outbox_attempt(outbox.shop_id)?))?;
    Ok(next.map_or(JobOutcome::Done, JobOutcome::RunAgainAt))
}

/// The next attempt after `attempts` failures, or None when the call is given up.
pub(crate) fn next_attempt(attempts: i64, now: Timestamp) -> Option<Timestamp> {
    let index = usize::try_from(attempts).ok()?.checked_sub(1)?;
    RETRY_AFTER_SECONDS
        .get(index)
        .map(|seconds| now.plus_seconds(*seconds))
}

/// Claims the shop's due calls and makes them. Returns how many were claimed.
pub(crate) fn deliver_due_calls(
    db: &impl PlatformDatabase,
    connector: &dyn PlatformConnector,
    clock: &dyn Clock,
    shop_id: ShopId,
    limit: usize,
) -> Result<usize, DomainError> {
    let now = clock.now();
    let claimed = db.write_tx(|tx| {
        let lease_until = now.plus_seconds(CLAIM_LEASE_SECONDS);
        Ok(tx.claim_outbox_calls(shop_id, now, limit, lease_until)?)
    })?;
    for entry in &claimed {
        let now = clock.now();
        let target = db.read_tx(|tx| {
            // A deleted shop's calls are cancelled as those without a destination.
            let Some(shop) = tx
                .shop_by_id(entry.shop_id)?
                .filter(|shop| shop.deleted_at.is_none())
            else {
                return Ok(None);
            };
            Ok(live_target(tx, &shop, entry.call.topic(), now)?.map(|(_, target)| target))
        });
        let target = match target {
            Ok(Some(target)) => target,
            Ok(None) => {
                db.write_tx(|tx| {
                    Ok(tx.finish_outbox_call(
                        entry.id,
                        OutboxStatus::Cancelled,
                        entry.attempts,
                        Some("no live destination"),
                        now,
                    )?)
                })?;
                continue;
            }
            Err(error) => {
                // The secret went missing, or the database is down: try again later.
                let attempts = entry.attempts + 1;
                let message = error.to_string();
                reschedule(db, entry.id, attempts, &message, now)?;
                continue;
            }
        };
        let attempts = entry.attempts + 1;
        let ids = match entry.call.service_ids() {
            None => PlatformIds::default(),
            Some((customer_id, address_id)) => db.read_tx(|tx| {
                Ok(PlatformIds {
                    customer: tx.customer_platform_id(entry.shop_id, customer_id)?,
                    address: match address_id {
                        Some(id) => tx.address_platform_id(entry.shop_id, id)?,
                        None => None,
                    },
                })
            })?,
        };
        match entry.call.perform(connector, &target, &ids) {
            Ok(CallOutcome::NotYet(reason)) => {
                reschedule(db, entry.id, attempts, reason, clock.now())?
            }
            Ok(outcome) => record_outcome(db, clock, entry, attempts, &outcome)?,
            Err(error) => {
                log::warn!(
                    target: "mercer::outbox",
                    "connector call {} of shop {} failed (attempt {attempts}): {error}",
                    entry.id,
                    entry.shop_id
                );
                if error.is_transient() || matches!(error, ConnectorError::Failed { .. }) {
                    reschedule(db, entry.id, attempts, &error.to_string(), clock.now())?;
                } else {
                    db.write_tx(|tx| {
                        Ok(tx.finish_outbox_call(
                            entry.id,
                            OutboxStatus::Failed,
                            attempts,
                            Some(&error.to_string()),
                            clock.now(),
                        )?)
                    })?;
                }
            }
        }
    }
    Ok(claimed.len())
}

/// Records what a call made leaves to record, and the call delivered, in one transaction. A
/// platform's event of the same customer may be being applied at that very moment (on
/// PostgreSQL the applier runs beside the outbox): its new row, not yet committed when the
/// recording looked, then refuses the platform id (a unique violation). Committed by then, it is
/// found and merged when the recording is tried again, once, at once.
fn record_outcome(
    db: &impl PlatformDatabase,
    clock: &dyn Clock,
    entry: &OutboxEntry,
    attempts: i64,
    outcome: &CallOutcome,
) -> Result<(), DomainError> {
    let record = || {
        db.write_tx(|tx| {
            let now = clock.now();
            match outcome {
                CallOutcome::CustomerCreated {
                    customer_id,
                    platform_id,
                } => {
                    record_customer_platform_id(tx, entry.shop_id, *customer_id, platform_id, now)?;
                }
                CallOutcome::AddressCreated {
                    address_id,
                    platform_id,
                } => {
                    record_address_platform_id(tx, entry.shop_id, *address_id, platform_id, now)?;
                }
                CallOutcome::Done | CallOutcome::NotYet(_) => {}
            }
            Ok(tx.finish_outbox_call(entry.id, OutboxStatus::Delivered, attempts, None, now)?)
        })
    };
    match record() {
        Err(DomainError::Storage(error)) if error.is_unique_violation() => record(),
        recorded => recorded,
    }
}

/// Records the platform id the connector answered for a customer Mercer made. A platform that
/// pushes its own changes may have sent the new customer's Saved event first: applied, it made
/// a second customer row with that platform id. That row is then merged into Mercer's, the one
/// subscriptions name, which takes the platform id and what the event wrote (as the event would
/// have written it, had the id been recorded first); the platform's row is marked deleted. Either
/// way the shop ends with one customer of that platform id: Mercer's. False when the customer
/// has a platform id already, or is not there.
pub fn record_customer_platform_id(
    tx: &mut dyn PlatformRepositories,
    shop_id: ShopId,
    customer_id: CustomerId,
    platform_id: &str,
    now: Timestamp,
) -> Result<bool, DomainError> {
    match tx.platform_entity(shop_id, EntityKind::Customer, platform_id)? {
        Some(other) if other.id != customer_id.0 => {
            Ok(tx.merge_customer_rows(shop_id, customer_id, CustomerId(other.id), now)?)
        }
        // It is this customer's already.
        Some(_) => Ok(false),
        None => Ok(tx.set_customer_platform_id(shop_id, customer_id, platform_id, now)?),
    }
}

/// Records the platform id the connector answered for an address Mercer made: it becomes the
/// address's key. As for customers, the platform's Saved event of the customer may have come
/// first and added a row keyed by that id. That row is then merged into Mercer's (the one
/// subscriptions name), which takes its key, platform id, default flag, document and deletion;
/// the platform's row is marked deleted, and subscriptions naming it name Mercer's instead.
/// Either way the customer ends with one row of that platform id: Mercer's.
/// False when the address has a platform id already, or is not there.
pub fn record_address_platform_id(
    tx: &mut dyn PlatformRepositories,
    shop_id: ShopId,
    address_id: AddressId,
    platform_id: &str,
    now: Timestamp,
) -> Result<bool, DomainError> {
    // An address is keyed by its platform id: the platform's row of it has that key.
    match tx.sibling_address_by_key(shop_id, address_id, platform_id)? {
        Some(duplicate) => Ok(tx.merge_address_rows(shop_id, address_id, duplicate, now)?),
        None => Ok(tx.set_address_platform_id(shop_id, address_id, platform_id, now)?),
    }
}

fn reschedule(
    db: &impl PlatformDatabase,
    id: OutboxCallId,
    attempts: i64,
    error: &str,
    now: Timestamp,
) -> Result<(), DomainError> {
    db.write_tx(|tx| {
        match next_attempt(attempts, now) {
            Some(at) => tx.retry_outbox_call(id, attempts, at, error)?,
            None => tx.finish_outbox_call(id, OutboxStatus::Failed, attempts, Some(error), now)?,
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retries_back_off_then_give_up() {
        let now = Timestamp::from_micros(0);
        assert_eq!(next_attempt(1, now), Some(now.plus_seconds(5)));
        assert_eq!(next_attempt(2, now), Some(now.plus_seconds(30)));
        assert_eq!(next_attempt(8, now), Some(now.plus_seconds(6 * 3600)));
        assert_eq!(next_attempt(9, now), None);
        assert_eq!(next_attempt(0, now), None);
    }

    #[test]
    fn calls_serialize_with_their_operation() {
        let call = ConnectorCall::DeleteAddress {
            platform_customer_id: "c1".into(),
            platform_id: "a1".into(),
        };
        let json = serde_json::to_value(&call).unwrap();
        assert_eq!(json["operation"], "delete_address");
        assert_eq!(serde_json::from_value::<ConnectorCall>(json).unwrap(), call);
        assert_eq!(call.topic(), Topic::Customers);
    }

    mod platform_ids_recorded {
        use std::sync::Arc;

        use serde_json::json;

        use super::*;
        use crate::access::shop::{Shop, ShopInput, create_shop};
        use crate::kernel::jobs::RunToEnd;
        use crate::platform::destinations::DestinationSettings;
        use crate::platform::events::{EventAction, EventSource, accept_events, parse_event};
        use crate::platform::resources::PlatformId;
        use crate::ports::Database;
        use crate::subscriptions::operations::create_subscription_from_body;
        use crate::subscriptions::resources::{Actor, ActorType};
        use crate::testing::{MemoryDatabase, MemoryPlatform};

        struct FixedClock(Timestamp);

        impl Clock for FixedClock {
            fn now(&self) -> Timestamp {
                self.0
            }
        }

        fn now() -> Timestamp {
            Timestamp::parse_rfc3339("2030-01-01T00:00:00Z").unwrap()
        }

        /// A shop whose customers topic has a destination, and a new subscriber made through
        /// the subscription API: its customer and address wait in the outbox to be created.
        fn new_subscriber(db: &MemoryDatabase) -> Shop {
            let shop = db
                .write(|tx| {
                    let input = ShopInput {
                        shop_domain: "echo.shop.test".into(),
                        ..ShopInput::default()
                    };
                    let shop = create_shop(tx, input, now())?;
                    let settings = DestinationSettings {
                        topic: Topic::Customers,
                        url: "http://127.0.0.1:9".into(),
                        version: "v1".into(),
                        timeout_ms: 5000,
                    };
                    tx.insert_destination(shop.id, &settings, now())?;
                    Ok(shop)
                })
                .unwrap();
            let body = json!({"customer": {"email": "ada@example.test", "first_name": "Ada"},
                "subscription": {"order_rrule": "DTSTART:20300107T090000Z\nRRULE:FREQ=WEEKLY",
                    "line_items": [{"platform_product_id": "p", "platform_variant_id": "v",
                                    "quantity": 1, "price": 100}],
                    "shipping_address": {"street1": "1 Main St", "city": "Ottawa", "country_code": "CA"}}});
            let actor = Actor {
                kind: ActorType::Api,
                id: 1,
                name: "test".into(),
            };
            db.write(|tx| create_subscription_from_body(tx, &shop, &body, actor, now()))
                .unwrap();
            shop
        }

        /// Applies the platform's Customer Saved event of `customer` (its `n`-th version).
        fn push_saved(db: &MemoryDatabase, shop: &Shop, customer: &Customer, n: i64) {
            let mut body = serde_json::to_value(customer).unwrap();
            let updated = now().plus_seconds(n);
            body["platform_updated_at"] = json!(updated.to_rfc3339());
            let event = parse_event(
                shop.id,
                EntityKind::Customer,
                EventAction::Saved,
                &json!({"data": {"customer": body}}),
                EventSource::Webhook,
                updated,
            )
            .unwrap();
            db.write(|tx| accept_events(tx, &[event], updated)).unwrap();
        }

        /// A platform whose every save of a customer reaches Mercer as an event before the
        /// connector's answer does, when `echo_first`.
        fn platform(db: &MemoryDatabase, shop: &Shop, echo_first: bool) -> MemoryPlatform {
            let platform = MemoryPlatform::default();
            if echo_first {
                let (db, shop) = (db.clone(), shop.clone());
                let versions = std::sync::atomic::AtomicI64::new(0);
                platform.state(|s| {
                    s.on_customer_saved = Some(Arc::new(move |customer: &Customer| {
                        let n = versions.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                        push_saved(&db, &shop, customer, n + 1);
                    }));
                });
            }
            platform
        }

        fn deliver(db: &MemoryDatabase, platform: &MemoryPlatform, shop: &Shop) {
            let job = OutboxJob { shop_id: shop.id };
            let outcome =
                deliver_shop_calls(db, platform, &FixedClock(now()), job, &RunToEnd).unwrap();
            assert_eq!(outcome, JobOutcome::Done);
        }

        /// The shop's one customer of platform id `cus-1`, Mercer's (the subscription's), with
        /// one live address `adr-1`, the subscription's; every call delivered at once.
        fn assert_one_customer_with_one_address(db: &MemoryDatabase, shop: &Shop) {
            let entries = db.read(|tx| Ok(tx.outbox_entries(shop.id)?)).unwrap();
            let outcomes: Vec<(&str, OutboxStatus, i64)> = entries
                .iter()
                .map(|e| (e.call.operation(), e.status, e.attempts))
                .collect();
            assert_eq!(
                outcomes,
                [
                    ("create_customer", OutboxStatus::Delivered, 1),
                    ("create_address", OutboxStatus::Delivered, 1)
                ]
            );
            let subscription = db.with_state(|state| state.subscriptions[0].state.clone());
            let customer = db
                .read(|tx| Ok(tx.directory_customer_by_platform_id(shop.id, "cus-1")?))
                .unwrap()
                .unwrap();
            assert_eq!(
                customer.id, subscription.customer_id,
                "Mercer's row is kept"
            );
            assert_eq!(customer.deleted_at, None);
            let live = db
                .read(|tx| Ok(tx.customer_id_by_email(shop.id, "ada@example.test")?))
                .unwrap();
            assert_eq!(live, Some(subscription.customer_id));
            let live_customers = db.with_state(|state| {
                state
                    .entities
                    .iter()
                    .filter(|e| e.kind == EntityKind::Customer)
                    .filter(|e| e.record.platform_deleted_at.is_none())
                    .count()
            });
            assert_eq!(live_customers, 1);
            let addresses = db
                .read(|tx| Ok(tx.addresses_of_customers(shop.id, &[customer.id])?))
                .unwrap();
            let ids: Vec<(AddressId, Option<&str>, Option<&str>)> = addresses
                .iter()
                .map(|a| (a.id, a.platform_id.as_deref(), a.city.as_deref()))
                .collect();
            assert_eq!(
                ids,
                [(
                    subscription.shipping_address_id,
                    Some("adr-1"),
                    Some("Ottawa")
                )]
            );
            assert_eq!(
                subscription.billing_address_id,
                subscription.shipping_address_id
            );
        }

        #[test]
        fn the_platforms_events_before_the_answers_leave_one_customer_and_one_address() {
            let db = MemoryDatabase::default();
            let shop = new_subscriber(&db);
            let platform = platform(&db, &shop, true);
            deliver(&db, &platform, &shop);
            // Each event came first and made a row of its own, merged into Mercer's.
            let merged = db.with_state(|state| {
                let customers = state
                    .entities
                    .iter()
                    .filter(|e| e.kind == EntityKind::Customer)
                    .count();
                (customers, state.addresses.len())
            });
            assert_eq!(merged, (2, 2));
            assert_one_customer_with_one_address(&db, &shop);

            // The platform's next change lands on Mercer's rows.
            let mut customer = platform.state(|s| s.customers[0].clone());
            customer.first_name = Some("Augusta".into());
            if let Some(address) = customer.addresses.as_mut().and_then(|a| a.first_mut()) {
                address.platform_id = Some(PlatformId::new("adr-1"));
            }
            push_saved(&db, &shop, &customer, 10);
            assert_one_customer_with_one_address(&db, &shop);
            let first_name = db
                .read(|tx| Ok(tx.directory_customer_by_platform_id(shop.id, "cus-1")?))
                .unwrap()
                .unwrap()
                .first_name;
            assert_eq!(first_name.as_deref(), Some("Augusta"));
        }

        /// A deleted shop's waiting calls are cancelled, none reaching its platform.
        #[test]
        fn a_deleted_shops_calls_are_cancelled() {
            let db = MemoryDatabase::default();
            let shop = new_subscriber(&db);
            db.write(|tx| {
                crate::access::operator::delete_shop(tx, shop.identifier.as_str(), true, now())
            })
            .unwrap();
            let platform = platform(&db, &shop, false);
            deliver(&db, &platform, &shop);
            let entries = db.read(|tx| Ok(tx.outbox_entries(shop.id)?)).unwrap();
            assert_eq!(entries.len(), 2);
            assert!(
                entries.iter().all(|e| e.status == OutboxStatus::Cancelled),
                "{entries:?}"
            );
            assert!(platform.state(|s| s.customers.is_empty()));
        }

        #[test]
        fn the_platforms_events_after_the_answers_leave_one_customer_and_one_address() {
            let db = MemoryDatabase::default();
            let shop = new_subscriber(&db);
            let platform = platform(&db, &shop, false);
            deliver(&db, &platform, &shop);
            let customer = platform.state(|s| s.customers[0].clone());
            push_saved(&db, &shop, &customer, 1);
            assert_one_customer_with_one_address(&db, &shop);
            let merged = db.with_state(|state| {
                let customers = state
                    .entities
                    .iter()
                    .filter(|e| e.kind == EntityKind::Customer)
                    .count();
                (customers, state.addresses.len())
            });
            assert_eq!(merged, (1, 1), "nothing to merge");
        }
    }
}
