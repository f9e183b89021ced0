//! Standard Webhooks (standardwebhooks.com): `webhook-id`, `webhook-timestamp` and
//! `webhook-signature: v1,{base64 HMAC-SHA256 of "{id}.{timestamp}.{body}"}`.
//!
//! The key is the shared secret's bytes. Verifiers that take a `whsec_` secret (the reference
//! libraries) are given `whsec_` followed by the standard base64 of those bytes: see
//! [`whsec`].

use base64::Engine;
use base64::engine::general_purpose::STANDARD;

use crate::{hmac_sha256, same};

/// `v1,{signature}` for one message.
///
/// ```
/// use mercer_signing::standard_webhooks::{sign, verify};
///
/// let body = br#"{"order_id":1}"#;
/// let header = sign(b"shared-secret", "msg_1", 1_700_000_000, body);
/// assert!(header.starts_with("v1,"));
/// assert!(verify(b"shared-secret", "msg_1", 1_700_000_000, body, &header));
/// ```
pub fn sign(key: &[u8], message_id: &str, timestamp: i64, body: &[u8]) -> String {
    let mut signed = format!("{message_id}.{timestamp}.").into_bytes();
    signed.extend_from_slice(body);
    format!("v1,{}", STANDARD.encode(hmac_sha256(key, &signed)))
}

/// Whether any of the space-separated signatures of `header` is this message's (a header may
/// carry several while a secret is rotated).
///
/// ```
/// use mercer_signing::standard_webhooks::{sign, verify};
///
/// let old = sign(b"old-secret", "msg_1", 1_700_000_000, b"{}");
/// let new = sign(b"new-secret", "msg_1", 1_700_000_000, b"{}");
/// let header = format!("{old} {new}");
/// assert!(verify(b"new-secret", "msg_1", 1_700_000_000, b"{}", &header));
/// assert!(!verify(b"new-secret", "msg_2", 1_700_000_000, b"{}", &header));
/// ```
pub fn verify(key: &[u8], message_id: &str, timestamp: i64, body: &[u8], header: &str) -> bool {
    let expected = sign(key, message_id, timestamp, body);
    header
        .split_whitespace()
        .any(|candidate| same(&expected, candidate))
}

/// The key of a `whsec_…` secret (its base64 part, decoded).
pub fn key_from_whsec(secret: &str) -> Option<Vec<u8>> {
    STANDARD
        .decode(secret.strip_prefix("whsec_").unwrap_or(secret))
        .ok()
}

/// The `whsec_` form of a shared secret, for the reference verifiers.
///
/// ```
/// use mercer_signing::standard_webhooks::{key_from_whsec, whsec};
///
/// let secret = "shared-secret";
/// assert_eq!(key_from_whsec(&whsec(secret)).unwrap(), secret.as_bytes());
/// ```
pub fn whsec(secret: &str) -> String {
    format!("whsec_{}", STANDARD.encode(secret.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_specifications_example_vector() {
        let key = key_from_whsec("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
        let body = br#"{"test": 2432232314}"#;
        let signature = sign(&key, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1_614_265_330, body);
        assert_eq!(signature, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
        assert!(verify(
            &key,
            "msg_p5jXN8AQM9LWM0D4loKWxJek",
            1_614_265_330,
            body,
            &format!("v1,bogus {signature}")
        ));
        assert!(!verify(
            &key,
            "msg_p5jXN8AQM9LWM0D4loKWxJek",
            1_614_265_331,
            body,
            &signature
        ));
    }

    #[test]
    fn a_shared_secret_round_trips_through_whsec() {
        let secret = "integration-secret-4f8a";
        assert_eq!(key_from_whsec(&whsec(secret)).unwrap(), secret.as_bytes());
    }
}
