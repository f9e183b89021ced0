//! The subscription webhook topics, with the ids List Webhook Topics gives them:
//! 1..21 in the documented order.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use super::resources::{Subscription, SubscriptionCustomer};
use super::webhooks::{
    CancelledEnvelope, CreatedOrder, Envelope, FailedOrder, OrderAttemptShown, OrderEnvelope,
    PaymentFailedData,
};
use crate::webhooks::catalogue::{
    NamedSchemas, fix_property, named_schema, self_contained_schema_with,
};
use crate::webhooks::operational::EndpointDisabled;

/// A subscription webhook topic; it is written as its snake-case name (`customer_created`).
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    strum::IntoStaticStr,
    strum::EnumString,
)]
#[strum(serialize_all = "snake_case")]
#[serde(rename_all = "snake_case")]
pub enum Topic {
    /// A customer was created for a new subscription (no customer had the email).
    CustomerCreated,
    /// A subscription customer's name, email or phone changed, here or on the platform.
    CustomerUpdated,
    /// A subscription was cancelled, ended after its last order, or was cancelled by the shop's
    /// dunning policy after its order's last retry failed.
    SubscriptionCancelled,
    /// A subscription was created.
    SubscriptionCreated,
    /// The subscription's payment method changed (sent with `subscription_payment_method_updated`).
    SubscriptionCreditCardUpdated,
    /// The subscription's payment method expires within the shop's notice period.
    SubscriptionExpiringPayment,
    /// The order rule or `next_order_datetime` was changed by a client.
    SubscriptionFrequencyUpdated,
    /// An order of the subscription was placed on the platform.
    SubscriptionOrderCreated,
    /// An order failed on its last attempt: no more retries (the shop's dunning policy's
    /// `at_max_retries` follows).
    SubscriptionOrderMaxRetriesReached,
    /// An attempt to place an order of the subscription failed.
    SubscriptionOrderTransactionFailed,
    /// The payment failed on the subscription's first transaction, before any order was placed.
    SubscriptionPaymentFailed,
    /// The subscription was paused (by a client, or by the shop's dunning policy).
    SubscriptionPaused,
    /// The subscription's payment method changed.
    SubscriptionPaymentMethodUpdated,
    /// A line item's quantity changed.
    SubscriptionQuantityUpdated,
    /// A cancelled subscription was made active again.
    SubscriptionReactivated,
    /// A paused subscription was made active again.
    SubscriptionResumed,
    /// The subscription's shipping address changed.
    SubscriptionShippingAddressUpdated,
    /// A ship date of the subscription was skipped (by a client, or given up by the shop's
    /// dunning policy after its order's last retry failed).
    SubscriptionSkipped,
    /// The scheduler is about to place an order of the subscription (its first attempt).
    SubscriptionUpcomingOrder,
    /// Any change of the subscription; sent last, after the change's own topics.
    SubscriptionUpdated,
    /// Deliveries to one of the shop's webhook subscriptions were disabled after failing for
    /// too long (or on a 410 answer).
    EndpointDisabled,
}

impl Topic {
    /// Every topic, in the documented order: a topic's id is its position plus one.
    pub const ALL: [Topic; 21] = [
        Topic::CustomerCreated,
        Topic::CustomerUpdated,
        Topic::SubscriptionCancelled,
        Topic::SubscriptionCreated,
        Topic::SubscriptionCreditCardUpdated,
        Topic::SubscriptionExpiringPayment,
        Topic::SubscriptionFrequencyUpdated,
        Topic::SubscriptionOrderCreated,
        Topic::SubscriptionOrderMaxRetriesReached,
        Topic::SubscriptionOrderTransactionFailed,
        Topic::SubscriptionPaymentFailed,
        Topic::SubscriptionPaused,
        Topic::SubscriptionPaymentMethodUpdated,
        Topic::SubscriptionQuantityUpdated,
        Topic::SubscriptionReactivated,
        Topic::SubscriptionResumed,
        Topic::SubscriptionShippingAddressUpdated,
        Topic::SubscriptionSkipped,
        Topic::SubscriptionUpcomingOrder,
        Topic::SubscriptionUpdated,
        Topic::EndpointDisabled,
    ];

    /// The `webhook_topic_id` of webhook registration.
    pub fn id(self) -> i64 {
        Topic::ALL
            .iter()
            .position(|topic| *topic == self)
            .map_or(0, |index| index as i64 + 1)
    }

    /// The topic with `webhook_topic_id` `id` (1..=21); `None` for any other id.
    pub fn from_id(id: i64) -> Option<Topic> {
        let index = usize::try_from(id.checked_sub(1)?).ok()?;
        Topic::ALL.get(index).copied()
    }

    /// The topic's name, as webhooks carry it (`X-Svc-Topic`) and List Webhook Topics shows it.
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    /// The topic named `name` (`subscription_paused`); `None` for an unknown name.
    pub fn parse(name: &str) -> Option<Topic> {
        name.parse().ok()
    }

    /// When the topic is sent, as the catalogue describes it.
    pub fn description(self) -> &'static str {
        match self {
            Topic::CustomerCreated => {
                "A customer was created for a new subscription (no customer had the email)."
            }
            Topic::CustomerUpdated => {
                "A subscription customer's name, email or phone changed, here or on the platform."
            }
            Topic::SubscriptionCancelled => {
                "A subscription was cancelled, ended after its last order, or was cancelled by the shop's dunning policy after its order's last retry failed."
            }
            Topic::SubscriptionCreated => "A subscription was created.",
            Topic::SubscriptionCreditCardUpdated => {
                "The subscription's payment method changed (sent with subscription_payment_method_updated)."
            }
            Topic::SubscriptionExpiringPayment => {
                "The subscription's payment method expires within the shop's notice period."
            }
            Topic::SubscriptionFrequencyUpdated => {
                "The order rule or next_order_datetime was changed by a client."
            }
            Topic::SubscriptionOrderCreated => {
                "An order of the subscription was placed on the platform (by the scheduler, or the checkout that created the subscription)."
            }
            Topic::SubscriptionOrderMaxRetriesReached => {
                "An order failed on its last attempt: no more retries."
            }
            Topic::SubscriptionOrderTransactionFailed => {
                "An attempt to place an order of the subscription failed."
            }
            Topic::SubscriptionPaymentFailed => {
                "The payment failed on the subscription's first transaction, before any order was placed (or the checkout that would have created it was declined)."
            }
            Topic::SubscriptionPaused => {
                "The subscription was paused (by a client, or by the shop's dunning policy)."
            }
            Topic::SubscriptionPaymentMethodUpdated => "The subscription's payment method changed.",
            Topic::SubscriptionQuantityUpdated => "A line item's quantity changed.",
            Topic::SubscriptionReactivated => "A cancelled subscription was made active again.",
            Topic::SubscriptionResumed => "A paused subscription was made active again.",
            Topic::SubscriptionShippingAddressUpdated => {
                "The subscription's shipping address changed."
            }
            Topic::SubscriptionSkipped => {
                "A ship date of the subscription was skipped (by a client, or given up by the shop's dunning policy)."
            }
            Topic::SubscriptionUpcomingOrder => {
                "The scheduler is about to place an order of the subscription (its first attempt)."
            }
            Topic::SubscriptionUpdated => {
                "Any change of the subscription; sent last, after the change's own topics."
            }
            Topic::EndpointDisabled => {
                "Deliveries to one of the shop's webhook subscriptions were disabled after failing for too long, or on a 410 answer."
            }
        }
    }
}

/// The JSON Schema (2020-12, self-contained) of what `topic` delivers, generated from the
/// payload types its messages are built of; `topic` is fixed to the topic's name.
pub fn payload_schema(topic: Topic) -> Value {
    let mut schema = match topic {
        Topic::CustomerCreated | Topic::CustomerUpdated => {
            envelope_schema::<SubscriptionCustomer>()
        }
        Topic::SubscriptionCancelled => {
            let mut named = NamedSchemas::new();
            named_schema::<Subscription>(&mut named);
            self_contained_schema_with::<CancelledEnvelope<Subscription>>(named)
        }
        Topic::SubscriptionUpcomingOrder
        | Topic::SubscriptionOrderTransactionFailed
        | Topic::SubscriptionOrderMaxRetriesReached => {
            order_envelope_schema::<Subscription, OrderAttemptShown>()
        }
        Topic::SubscriptionOrderCreated => order_envelope_schema::<Subscription, CreatedOrder>(),
        Topic::SubscriptionPaymentFailed => {
            order_envelope_schema::<PaymentFailedData, FailedOrder>()
        }
        Topic::EndpointDisabled => envelope_schema::<EndpointDisabled>(),
        Topic::SubscriptionCreated
        | Topic::SubscriptionCreditCardUpdated
        | Topic::SubscriptionExpiringPayment
        | Topic::SubscriptionFrequencyUpdated
        | Topic::SubscriptionPaused
        | Topic::SubscriptionPaymentMethodUpdated
        | Topic::SubscriptionQuantityUpdated
        | Topic::SubscriptionReactivated
        | Topic::SubscriptionResumed
        | Topic::SubscriptionShippingAddressUpdated
        | Topic::SubscriptionSkipped
        | Topic::SubscriptionUpdated => envelope_schema::<Subscription>(),
    };
    fix_property(&mut schema, "topic", topic.as_str());
    schema
}

fn envelope_schema<Data: ToSchema>() -> Value {
    let mut named = NamedSchemas::new();
    named_schema::<Data>(&mut named);
    self_contained_schema_with::<Envelope<Data>>(named)
}

fn order_envelope_schema<Data: ToSchema, Order: ToSchema>() -> Value {
    let mut named = NamedSchemas::new();
    named_schema::<Data>(&mut named);
    named_schema::<Order>(&mut named);
    self_contained_schema_with::<OrderEnvelope<Data, Order>>(named)
}

/// One entry of List Webhook Topics: `{"id","name","schema"}`.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
#[schema(as = SubscriptionWebhookTopic)]
pub struct WebhookTopic {
    /// The topic's `webhook_topic_id` (1..=21).
    #[schema(minimum = 1, maximum = 21)]
    pub id: i64,
    /// The topic's name (`subscription_created`).
    pub name: &'static str,
    /// The JSON Schema (2020-12) of the topic's whole delivered body, self-contained (the
    /// types it refers to are in its own `$defs`).
    #[schema(value_type = Object)]
    pub schema: Value,
}

/// The `webhook_topics` of List Webhook Topics, by id.
pub fn webhook_topics() -> Vec<WebhookTopic> {
    Topic::ALL
        .into_iter()
        .map(|topic| WebhookTopic {
            id: topic.id(),
            name: topic.as_str(),
            schema: payload_schema(topic),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every topic, in the documented order.
    const SEED_ORDER: [&str; 21] = [
        "customer_created",
        "customer_updated",
        "subscription_cancelled",
        "subscription_created",
        "subscription_credit_card_updated",
        "subscription_expiring_payment",
        "subscription_frequency_updated",
        "subscription_order_created",
        "subscription_order_max_retries_reached",
        "subscription_order_transaction_failed",
        "subscription_payment_failed",
        "subscription_paused",
        "subscription_payment_method_updated",
        "subscription_quantity_updated",
        "subscription_reactivated",
        "subscription_resumed",
        "subscription_shipping_address_updated",
        "subscription_skipped",
        "subscription_upcoming_order",
        "subscription_updated",
        "endpoint_disabled",
    ];

    #[test]
    fn ids_are_one_to_twenty_one_in_the_documented_order() {
        for (index, name) in SEED_ORDER.iter().enumerate() {
            let id = index as i64 + 1;
            let topic = Topic::from_id(id).unwrap();
            assert_eq!(topic.as_str(), *name);
            assert_eq!(topic.id(), id);
            assert_eq!(Topic::parse(name), Some(topic));
        }
        assert_eq!(Topic::from_id(0), None);
        assert_eq!(Topic::from_id(22), None);
        assert_eq!(Topic::from_id(-1), None);
        assert_eq!(Topic::parse("subscription_exploded"), None);
    }

    #[test]
    fn list_webhook_topics_and_serde_use_the_names() {
        let list = serde_json::to_value(webhook_topics()).unwrap();
        for (index, (id, name)) in [
            (1, "customer_created"),
            (20, "subscription_updated"),
            (21, "endpoint_disabled"),
        ]
        .into_iter()
        .enumerate()
        {
            let entry = &list[[0, 19, 20][index]];
            assert_eq!(
                (entry["id"].as_i64(), entry["name"].as_str()),
                (Some(id), Some(name))
            );
            assert_eq!(entry["schema"], payload_schema(Topic::parse(name).unwrap()));
        }
        assert_eq!(list.as_array().unwrap().len(), 21);
        for topic in Topic::ALL {
            assert_eq!(
                serde_json::to_value(topic).unwrap(),
                serde_json::json!(topic.as_str())
            );
        }
    }
}
