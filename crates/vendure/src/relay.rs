//! Vendure's changes on their way to Mercer: the plugin's pushes, checked and read back from
//! the Admin API, become the interface's Saved and Deleted events; a reconcile pass sends what
//! changed since the last one, so a push that was lost is still delivered, late.
//!
//! Every event carries the entity's current state and Vendure's `updatedAt` as its
//! `platform_updated_at`; Mercer's out-of-sequence rule drops a stale or repeated one, so a
//! change sent twice (by a push and by the reconcile pass) is applied once.

use std::time::Duration;

use base64::Engine;
use mercer_domain::Timestamp;
use mercer_outbound::PrivateAddressGuard;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::operations;
use crate::vendure::{Vendure, VendureError};

/// How far a push's timestamp may be from the connector's clock.
const PUSH_MAX_SKEW_SECONDS: i64 = 5 * 60;

/// A change the plugin pushed (`POST /vendure/events`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Change {
    /// `customer`, `order`, `product` or `collection`.
    pub entity: String,
    /// The entity's Vendure id.
    pub id: String,
    /// `created`, `updated` or `deleted`.
    #[serde(rename = "type")]
    pub kind: String,
    /// When the plugin saw the change (the deletion time of a deleted entity).
    pub at: Timestamp,
}

/// The plugin's signature of a push: base64 HMAC-SHA256 under the secret over the timestamp,
/// a newline and the body.
pub fn push_signature(secret: &str, timestamp: &str, body: &[u8]) -> String {
    let mut message = Vec::with_capacity(timestamp.len() + 1 + body.len());
    message.extend_from_slice(timestamp.as_bytes());
    message.push(b'\n');
    message.extend_from_slice(body);
    let mac = mercer_signing::hmac_sha256(secret.as_bytes(), &message);
    base64::engine::general_purpose::STANDARD.encode(mac)
}

/// Checks a push's `X-Mercer-Timestamp` and `X-Mercer-Signature`.
pub fn verify_push(
    secret: &str,
    timestamp: &str,
    signature: &str,
    body: &[u8],
    now: Timestamp,
) -> Result<(), &'static str> {
    let at = Timestamp::parse_rfc3339(timestamp).ok_or("X-Mercer-Timestamp is not a time")?;
    let skew = now.to_datetime().timestamp() - at.to_datetime().timestamp();
    if skew.abs() > PUSH_MAX_SKEW_SECONDS {
        return Err("X-Mercer-Timestamp is more than 5 minutes off");
    }
    let expected = push_signature(secret, timestamp, body);
    match mercer_signing::same(&expected, signature.trim()) {
        true => Ok(()),
        false => Err("X-Mercer-Signature does not match"),
    }
}

/// Why a change did not reach Mercer.
#[derive(Debug, thiserror::Error)]
pub enum RelayError {
    #[error(transparent)]
    Vendure(#[from] VendureError),
    /// Mercer could not be reached, or answered a status that asks for a retry.
    #[error("Mercer did not take the event: {0}")]
    Mercer(String),
}

/// Where events go: Mercer's URL, the token that may send the shop's events, and the shop.
#[derive(Clone)]
pub struct Relay {
    mercer_url: String,
    token: String,
    shop: String,
    agent: ureq::Agent,
}

impl std::fmt::Debug for Relay {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The token stays out of logs.
        f.debug_struct("Relay")
            .field("mercer_url", &self.mercer_url)
            .field("shop", &self.shop)
            .finish()
    }
}

/// The interface's name of each kind of entity: the service and collection in an event's
/// path, and the key of its body.
fn event_path(entity: &str) -> Option<(&'static str, &'static str, &'static str)> {
    Some(match entity {
        "customer" => ("customers", "customers", "customer"),
        "order" => ("orders", "orders", "order"),
        "product" => ("products", "products", "product"),
        "collection" => ("products", "categories", "category"),
        _ => return None,
    })
}

impl Relay {
    pub fn new(mercer_url: &str, token: &str, shop: &str, guard: PrivateAddressGuard) -> Relay {
        let config = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(20)));
        Relay {
            mercer_url: mercer_url.trim_end_matches('/').to_string(),
            token: token.to_string(),
            shop: shop.to_string(),
            agent: mercer_outbound::agent(guard, config),
        }
    }

    /// Reads the changed entity from Vendure and sends its event to Mercer. An entity Vendure
    /// no longer has is sent as deleted, at the time the change was seen.
    pub fn send(&self, vendure: &Vendure, change: &Change) -> Result<(), RelayError> {
        let Some((service, collection, key)) = event_path(&change.entity) else {
            tracing::debug!(
                entity = change.entity,
                "ignored a change of an unknown kind"
            );
            return Ok(());
        };
        let current = match change.kind.as_str() {
            "deleted" => Err(VendureError::NotFound),
            _ => current_state(vendure, &change.entity, &change.id),
        };
        let (action, body) = match current {
            Ok(Some(entity)) => ("saved", json!({ "data": { key: entity } })),
            // An order that is still a cart is not an order of the interface yet.
            Ok(None) => return Ok(()),
            Err(VendureError::NotFound) => (
                "deleted",
                json!({ "data": { key: {
                    "platform_id": change.id,
                    "platform_deleted_at": change.at,
                } } }),
            ),
            Err(error) => return Err(error.into()),
        };
        let path = format!(
            "{}/{service}/v1/shops/{}/platforms/custom/webhooks/{collection}/{action}",
            self.mercer_url, self.shop
        );
        self.post(&path, &body)
    }

    fn post(&self, url: &str, body: &Value) -> Result<(), RelayError> {
        let answer = self
            .agent
            .post(url)
            .header("Authorization", &format!("Bearer {}", self.token))
            .header("Content-Type", "application/json")
            .send(body.to_string())
            .map_err(|error| RelayError::Mercer(error.to_string()))?;
        let status = answer.status().as_u16();
        match status {
            200..=299 => Ok(()),
            // Mercer refused the event itself: sending it again would not change that, so the
            // change is lost to Mercer until the next one; an error, for the operator to see.
            400 | 404 | 409 | 422 => {
                let reason = answer.into_body().read_to_string().unwrap_or_default();
                tracing::error!(status, url, reason, "Mercer refused an event");
                Ok(())
            }
            _ => Err(RelayError::Mercer(format!("status {status}"))),
        }
    }
}

/// The entity's current state as the interface shows it; None for an order that is a cart.
fn current_state(vendure: &Vendure, entity: &str, id: &str) -> Result<Option<Value>, VendureError> {
    let value = match entity {
        "customer" => json!(operations::customer(vendure, id)?.to_customer()),
        "order" => {
            let order = operations::order(vendure, id)?;
            if matches!(order.state.as_str(), "Created" | "AddingItems") {
                return Ok(None);
            }
            json!(operations::get_order(vendure, id)?)
        }
        "product" => json!(operations::product(vendure, id)?),
        "collection" => json!(operations::category(vendure, id)?),
        _ => return Ok(None),
    };
    Ok(Some(value))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_push_signed_with_the_secret_verifies_and_any_change_breaks_it() {
        let now = Timestamp::parse_rfc3339("2026-11-28T10:00:00Z").unwrap();
        let body =
            br#"{"entity":"customer","id":"2","type":"updated","at":"2026-11-28T10:00:00Z"}"#;
        let signature = push_signature("secret", "2026-11-28T10:00:00Z", body);
        assert_eq!(
            verify_push("secret", "2026-11-28T10:00:00Z", &signature, body, now),
            Ok(())
        );
        assert!(verify_push("other", "2026-11-28T10:00:00Z", &signature, body, now).is_err());
        assert!(verify_push("secret", "2026-11-28T10:00:01Z", &signature, body, now).is_err());
        let mut changed = body.to_vec();
        changed[20] = b'3';
        assert!(verify_push("secret", "2026-11-28T10:00:00Z", &signature, &changed, now).is_err());
        let late = Timestamp::parse_rfc3339("2026-11-28T10:06:00Z").unwrap();
        assert!(verify_push("secret", "2026-11-28T10:00:00Z", &signature, body, late).is_err());
    }

    #[test]
    fn the_plugin_and_the_connector_sign_alike() {
        // What the plugin's `sign` (Node's crypto) answers for these inputs.
        let signature = push_signature("s3cret", "2026-11-28T06:37:32Z", br#"{"a":1}"#);
        assert_eq!(signature, "+0DsvL9T5e0z+o6n5pWRixfhbhtJWtNi/HzePAELT8M=");
    }
}
