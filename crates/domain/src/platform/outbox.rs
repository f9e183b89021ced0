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
            let Some(shop) = tx.shop_by_id(entry.shop_id)? else {
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
            Ok(outcome) => db.write_tx(|tx| {
                let now = clock.now();
                match &outcome {
                    CallOutcome::CustomerCreated {
                        customer_id,
                        platform_id,
                    } => {
                        tx.set_customer_platform_id(entry.shop_id, *customer_id, platform_id, now)?;
                    }
                    CallOutcome::AddressCreated {
                        address_id,
                        platform_id,
                    } => {
                        tx.set_address_platform_id(entry.shop_id, *address_id, platform_id, now)?;
                    }
                    CallOutcome::Done | CallOutcome::NotYet(_) => {}
                }
                Ok(tx.finish_outbox_call(entry.id, OutboxStatus::Delivered, attempts, None, now)?)
            })?,
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
}
