//! Operational webhooks: messages about the webhooks themselves, sent to the shop's endpoints
//! subscribed to them (`endpoint_disabled` for subscription endpoints, `webhook/disabled` for
//! checkout webhooks) when deliveries to one of its endpoints are disabled.

use serde::Serialize;

use super::Envelope;
use super::WebhookKind;
use crate::kernel::time::Timestamp;

/// The subscription topic that reports a disabled endpoint.
pub const SUBSCRIPTION_ENDPOINT_DISABLED: &str = "endpoint_disabled";
/// The checkout topic that reports a disabled webhook.
pub const CHECKOUT_WEBHOOK_DISABLED: &str = "webhook/disabled";

/// What `endpoint_disabled` / `webhook/disabled` report: an endpoint no longer gets deliveries.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct EndpointDisabled {
    /// The disabled endpoint's id, as the webhook registration routes show it.
    pub endpoint_id: String,
    /// The topic the disabled endpoint was subscribed to.
    pub topic: String,
    /// The disabled endpoint's callback URL.
    pub url: String,
    /// Since when deliveries to it had been failing.
    pub failures_since: Timestamp,
    /// The last delivery error (an HTTP status or a transport error).
    pub last_error: String,
}

/// The topic that reports a disabled endpoint of `kind`.
pub fn endpoint_disabled_topic(kind: WebhookKind) -> &'static str {
    match kind {
        WebhookKind::Subscription => SUBSCRIPTION_ENDPOINT_DISABLED,
        WebhookKind::Checkout => CHECKOUT_WEBHOOK_DISABLED,
    }
}

/// The subscription webhook body of `endpoint_disabled`.
pub fn subscription_endpoint_disabled(
    shop_identifier: &str,
    disabled: &EndpointDisabled,
    now: Timestamp,
) -> Envelope<EndpointDisabled> {
    Envelope {
        topic: SUBSCRIPTION_ENDPOINT_DISABLED.to_string(),
        shop_identifier: shop_identifier.to_string(),
        created_at: now,
        data: disabled.clone(),
    }
}

/// The whole body delivered for a disabled endpoint of `kind`: for subscription endpoints the
/// subscription envelope of `endpoint_disabled` with `disabled` as its `data`; for checkout
/// webhooks `disabled` itself, as checkout payloads carry their fields at the top level.
/// Enqueue it on [`endpoint_disabled_topic`]`(kind)`.
pub fn endpoint_disabled_payload(
    kind: WebhookKind,
    shop_identifier: &str,
    disabled: &EndpointDisabled,
    now: Timestamp,
) -> serde_json::Value {
    let body = match kind {
        WebhookKind::Subscription => serde_json::to_value(subscription_endpoint_disabled(
            shop_identifier,
            disabled,
            now,
        )),
        WebhookKind::Checkout => serde_json::to_value(disabled),
    };
    // Strings and a timestamp always serialize.
    body.unwrap_or(serde_json::Value::Null)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn disabled() -> EndpointDisabled {
        EndpointDisabled {
            endpoint_id: "0123456789abcdef0123456789abcdef".to_string(),
            topic: "subscription_created".to_string(),
            url: "http://127.0.0.1:9/in".to_string(),
            failures_since: Timestamp::from_micros(0),
            last_error: "HTTP 500".to_string(),
        }
    }

    #[test]
    fn the_subscription_payload_is_enveloped_and_the_checkout_one_is_not() {
        let now = Timestamp::from_micros(86_400_000_000);
        let body = endpoint_disabled_payload(WebhookKind::Subscription, "shop-1", &disabled(), now);
        assert_eq!(body["topic"], "endpoint_disabled");
        assert_eq!(body["shop_identifier"], "shop-1");
        assert_eq!(body["created_at"], "1970-01-02T00:00:00Z");
        assert_eq!(
            body["data"]["endpoint_id"],
            "0123456789abcdef0123456789abcdef"
        );
        assert_eq!(body["data"]["failures_since"], "1970-01-01T00:00:00Z");
        let body = endpoint_disabled_payload(WebhookKind::Checkout, "shop-1", &disabled(), now);
        assert_eq!(
            body,
            serde_json::json!({
                "endpoint_id": "0123456789abcdef0123456789abcdef",
                "topic": "subscription_created",
                "url": "http://127.0.0.1:9/in",
                "failures_since": "1970-01-01T00:00:00Z",
                "last_error": "HTTP 500",
            })
        );
        assert_eq!(
            endpoint_disabled_topic(WebhookKind::Checkout),
            "webhook/disabled"
        );
    }
}
