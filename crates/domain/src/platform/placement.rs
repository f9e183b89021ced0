//! Placing an order on the platform through the connector: Create Order with an
//! `Idempotency-Key`, then Create Payment, so that a caller that runs the steps again after a
//! crash, a timeout or a failed payment creates neither the order nor the payment twice.
//!
//! - The order: the connector returns the order it created first for a key it saw before.
//! - The payment: Create Payment takes no key, so each payment carries one of Mercer's in its
//!   `custom_attributes` (`PAYMENT_KEY_ATTRIBUTE`); a caller that may have sent it before
//!   (it resumes a step whose answer it never stored) looks for it in the order's payments
//!   (Get Order) before paying.
//!
//! A declined payment is an answer, not a connector failure: a payment answered with a failed
//! status (or, without a status, whose transactions all failed), or a 402.

use crate::platform::connector::{ConnectorError, ConnectorTarget, PlatformConnector};
use crate::platform::resources::{CustomAttribute, Order, Payment};

/// The `custom_attributes` entry of a payment that holds Mercer's key of it.
pub(crate) const PAYMENT_KEY_ATTRIBUTE: &str = "mercer_payment_key";

/// Statuses of a payment or transaction that mean it did not go through.
const FAILED_STATUSES: [&str; 9] = [
    "declined",
    "failed",
    "failure",
    "error",
    "voided",
    "void",
    "cancelled",
    "canceled",
    "rejected",
];

/// The step a placement stopped at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlacementStep {
    /// Create Order, with the placement's idempotency key.
    CreateOrder,
    /// Get Order, to look for a payment made before.
    GetOrder,
    /// Create Payment.
    CreatePayment,
}

impl PlacementStep {
    /// The connector operation's name, as messages give it (`Create Order`…).
    pub fn name(self) -> &'static str {
        match self {
            PlacementStep::CreateOrder => "Create Order",
            PlacementStep::GetOrder => "Get Order",
            PlacementStep::CreatePayment => "Create Payment",
        }
    }
}

/// Why a placement stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PlacementError {
    /// The connector failed, timed out, or answered what cannot be read.
    Connector {
        /// The step that failed.
        step: PlacementStep,
        /// How the connector call failed.
        error: ConnectorError,
    },
    /// The payment was declined; the text is the payment's status.
    Declined {
        /// The payment's (or its transactions') failed status, or `402 Payment Required`.
        status: String,
    },
}

impl PlacementError {
    /// A short code for the failure (`last_failure_code` of a subscription).
    pub fn code(&self) -> &'static str {
        match self {
            PlacementError::Declined { .. } => "payment_declined",
            PlacementError::Connector { error, .. } => match error {
                ConnectorError::Timeout(_) => "connector_timeout",
                ConnectorError::Unreachable(_) | ConnectorError::Refused(_) => {
                    "connector_unreachable"
                }
                ConnectorError::NotFound => "connector_not_found",
                ConnectorError::Failed { .. } => "connector_failed",
                ConnectorError::Malformed(_) | ConnectorError::BadSignature => {
                    "connector_malformed"
                }
            },
        }
    }

    /// One sentence for people; it says nothing of the network (connector errors never do).
    pub fn message(&self) -> String {
        match self {
            PlacementError::Declined { status } => {
                format!("the payment was declined (status {status:?})")
            }
            PlacementError::Connector { step, error } => format!("{}: {error}", step.name()),
        }
    }
}

fn connector(step: PlacementStep) -> impl Fn(ConnectorError) -> PlacementError {
    move |error| PlacementError::Connector { step, error }
}

/// The payment's failed status, when it did not go through: its own status when it has one,
/// else that of its transactions when every one of them failed.
pub(crate) fn declined_status(payment: &Payment) -> Option<String> {
    let failed = |status: &Option<String>| {
        status.as_deref().is_some_and(|status| {
            FAILED_STATUSES
                .iter()
                .any(|failed| status.trim().eq_ignore_ascii_case(failed))
        })
    };
    if payment.status.is_some() {
        return failed(&payment.status)
            .then(|| payment.status.clone())
            .flatten();
    }
    let transactions = payment.transactions.as_deref().unwrap_or_default();
    if !transactions.is_empty() && transactions.iter().all(|t| failed(&t.status)) {
        return transactions.first().and_then(|t| t.status.clone());
    }
    None
}

/// Mercer's key of a payment, when it carries one.
pub(crate) fn payment_key(payment: &Payment) -> Option<&str> {
    payment
        .custom_attributes
        .as_ref()?
        .get(PAYMENT_KEY_ATTRIBUTE)
        .map(|attribute| attribute.value.as_str())
}

/// `payment` carrying `key` in its custom attributes.
pub(crate) fn with_payment_key(mut payment: Payment, key: &str) -> Payment {
    payment.custom_attributes.get_or_insert_default().insert(
        PAYMENT_KEY_ATTRIBUTE.to_string(),
        CustomAttribute {
            description: "Mercer's key of this payment".to_string(),
            value: key.to_string(),
        },
    );
    payment
}

/// The order the platform holds: its id, and its name for people (`order_number`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlacedOrder {
    /// The order's platform id.
    pub platform_id: String,
    /// The order's number for people, when the platform gave a non-empty one.
    pub order_number: Option<String>,
}

/// Create Order with `idempotency_key`; the order the platform made (the first one created
/// with the key, when the connector saw it before).
pub fn create_order(
    connector_client: &dyn PlatformConnector,
    target: &ConnectorTarget,
    order: &Order,
    idempotency_key: &str,
) -> Result<PlacedOrder, PlacementError> {
    let created = connector_client
        .create_order(target, order, Some(idempotency_key))
        .map_err(connector(PlacementStep::CreateOrder))?;
    match created.platform_id {
        Some(id) if !id.is_blank() => Ok(PlacedOrder {
            platform_id: id.as_str().to_string(),
            order_number: created.order_number.filter(|number| !number.is_empty()),
        }),
        _ => Err(PlacementError::Connector {
            step: PlacementStep::CreateOrder,
            error: ConnectorError::Malformed("the created order has no platform_id".to_string()),
        }),
    }
}

/// A payment that went through: its platform id, when the connector gave one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Paid {
    /// The payment's platform id, if the connector answered one.
    pub platform_payment_id: Option<String>,
}

/// Pays for platform order `platform_order_id` once. `payment` carries its key
/// ([`with_payment_key`]). With `earlier_keys` (the order existed before this call, so a payment
/// for it may have gone through without its answer reaching the caller), the order's payments
/// are searched first (Get Order): one whose key starts with `earlier_keys` and that was not
/// declined is the answer, and so is this payment's own key found declined; only then is Create
/// Payment called.
pub(crate) fn pay_once(
    connector_client: &dyn PlatformConnector,
    target: &ConnectorTarget,
    platform_order_id: &str,
    payment: &Payment,
    earlier_keys: Option<&str>,
) -> Result<Paid, PlacementError> {
    if let Some(prefix) = earlier_keys {
        let order = connector_client
            .get_order(target, platform_order_id)
            .map_err(connector(PlacementStep::GetOrder))?;
        if let Some(earlier) = earlier_payment(order.payments.unwrap_or_default(), payment, prefix)
        {
            return paid(&earlier);
        }
    }
    match connector_client.create_payment(target, platform_order_id, payment) {
        Ok(created) => paid(&created),
        // Payment Required: the platform's way of saying declined.
        Err(ConnectorError::Failed { status: 402 }) => Err(PlacementError::Declined {
            status: "402 Payment Required".to_string(),
        }),
        Err(error) => Err(connector(PlacementStep::CreatePayment)(error)),
    }
}

/// Among an order's `payments`, the one that answers for `payment`: a payment keyed with
/// `prefix` that went through, else `payment`'s own (declined) one.
fn earlier_payment(payments: Vec<Payment>, payment: &Payment, prefix: &str) -> Option<Payment> {
    let own = payment_key(payment).filter(|key| !key.is_empty());
    let mut own_declined = None;
    for earlier in payments {
        let Some(key) = payment_key(&earlier) else {
            continue;
        };
        let own_key = Some(key) == own;
        let ours = own_key || (!prefix.is_empty() && key.starts_with(prefix));
        if ours && declined_status(&earlier).is_none() {
            return Some(earlier);
        }
        if own_key {
            own_declined = Some(earlier);
        }
    }
    own_declined
}

fn paid(payment: &Payment) -> Result<Paid, PlacementError> {
    match declined_status(payment) {
        Some(status) => Err(PlacementError::Declined { status }),
        None => Ok(Paid {
            platform_payment_id: payment
                .platform_id
                .as_ref()
                .map(|id| id.as_str().to_string()),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::platform::resources::Transaction;

    fn payment(status: Option<&str>, transactions: &[&str]) -> Payment {
        Payment {
            status: status.map(str::to_string),
            transactions: (!transactions.is_empty()).then(|| {
                transactions
                    .iter()
                    .map(|status| Transaction {
                        status: Some(status.to_string()),
                        ..Transaction::default()
                    })
                    .collect()
            }),
            ..Payment::default()
        }
    }

    #[test]
    fn a_payment_is_declined_by_its_status_or_all_its_transactions() {
        assert_eq!(
            declined_status(&payment(Some("Declined"), &[])),
            Some("Declined".into())
        );
        assert_eq!(declined_status(&payment(Some("paid"), &["failure"])), None);
        assert_eq!(
            declined_status(&payment(None, &["failure", "error"])),
            Some("failure".into())
        );
        assert_eq!(
            declined_status(&payment(None, &["failure", "success"])),
            None
        );
        assert_eq!(declined_status(&payment(None, &[])), None);
        assert_eq!(declined_status(&payment(Some("pending"), &[])), None);
    }

    #[test]
    fn a_payment_carries_its_key() {
        let keyed = with_payment_key(Payment::default(), "42:2026-01-05T09:00:00Z#1");
        assert_eq!(payment_key(&keyed), Some("42:2026-01-05T09:00:00Z#1"));
        assert_eq!(payment_key(&Payment::default()), None);
        let json = serde_json::to_value(&keyed).unwrap();
        assert_eq!(
            json["custom_attributes"][PAYMENT_KEY_ATTRIBUTE]["value"],
            "42:2026-01-05T09:00:00Z#1"
        );
    }

    #[test]
    fn failures_have_codes_and_say_nothing_of_the_network() {
        let timeout = PlacementError::Connector {
            step: PlacementStep::CreateOrder,
            error: ConnectorError::Timeout(std::time::Duration::from_secs(20)),
        };
        assert_eq!(timeout.code(), "connector_timeout");
        assert!(timeout.message().starts_with("Create Order: "));
        let unreachable = PlacementError::Connector {
            step: PlacementStep::CreatePayment,
            error: ConnectorError::Unreachable("10.0.0.1:443 refused".into()),
        };
        assert!(!unreachable.message().contains("10.0.0.1"));
        assert_eq!(
            PlacementError::Declined {
                status: "declined".into()
            }
            .code(),
            "payment_declined"
        );
    }
}
