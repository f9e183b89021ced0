#![warn(missing_docs)]
//! The signatures Mercer makes and checks, each with sign and verify, constant-time comparison
//! and known-answer tests: `X-HMAC` and HTTP Message Signatures (RFC 9421) for calls to platform
//! connectors, draft-cavage-12 `Signature` (covering the body through `Digest`) for checkout
//! webhooks and override requests, Standard Webhooks headers on every webhook, and
//! `x-svc-signature` for subscription webhooks.

pub mod cavage;
pub mod message_signature;
pub mod standard_webhooks;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use hmac::{Hmac, Mac};
use sha2::Sha256;
use subtle::ConstantTimeEq;

type HmacSha256 = Hmac<Sha256>;

/// HMAC-SHA256 of `message` keyed with `key`.
pub fn hmac_sha256(key: &[u8], message: &[u8]) -> [u8; 32] {
    // HMAC takes keys of any length, so this cannot fail.
    let mut mac = match HmacSha256::new_from_slice(key) {
        Ok(mac) => mac,
        Err(_) => unreachable!("HMAC accepts keys of any length"),
    };
    mac.update(message);
    mac.finalize().into_bytes().into()
}

/// `X-HMAC` (and `X-Compatible-HMAC`): standard padded base64 of HMAC-SHA256 keyed with the
/// shop's connector secret over the exact bytes of the `X-HMAC-Timestamp` header value.
///
/// ```
/// let timestamp = "2026-11-25T10:00:00Z";
/// let header = mercer_signing::x_hmac("connector-secret", timestamp);
/// assert_eq!(header.len(), 44); // 32 bytes, padded base64
/// assert!(mercer_signing::verify_x_hmac("connector-secret", timestamp, &header));
/// assert!(!mercer_signing::verify_x_hmac("another-secret", timestamp, &header));
/// ```
pub fn x_hmac(secret: &str, timestamp: &str) -> String {
    STANDARD.encode(hmac_sha256(secret.as_bytes(), timestamp.as_bytes()))
}

/// Whether `signature` is the `X-HMAC` of `timestamp` under `secret`, compared in constant time.
/// Surrounding whitespace of the header value is ignored.
///
/// ```
/// let header = mercer_signing::x_hmac("s3cret", "1700000000");
/// assert!(mercer_signing::verify_x_hmac("s3cret", "1700000000", &format!(" {header}\n")));
/// assert!(!mercer_signing::verify_x_hmac("s3cret", "1700000001", &header));
/// ```
pub fn verify_x_hmac(secret: &str, timestamp: &str, signature: &str) -> bool {
    let expected = x_hmac(secret, timestamp);
    expected
        .as_bytes()
        .ct_eq(signature.trim().as_bytes())
        .into()
}

/// Constant-time equality of two texts.
pub fn same(a: &str, b: &str) -> bool {
    a.as_bytes().ct_eq(b.as_bytes()).into()
}

/// `x-svc-signature` of a subscription webhook: lowercase hex HMAC-SHA256 of the raw body,
/// keyed with the subscription's shared secret.
///
/// ```
/// let body = br#"{"topic":"subscription_created"}"#;
/// let header = mercer_signing::svc_signature("webhook-secret", body);
/// assert_eq!(header.len(), 64);
/// assert!(header.chars().all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()));
/// ```
pub fn svc_signature(secret: &str, body: &[u8]) -> String {
    hex::encode(hmac_sha256(secret.as_bytes(), body))
}

/// Whether `header` is the `x-svc-signature` of `body` under `secret` (any letter case,
/// compared in constant time). A receiver checks the raw body, before parsing it.
///
/// ```
/// use mercer_signing::{svc_signature, verify_svc_signature};
///
/// let body = br#"{"topic":"subscription_created"}"#;
/// let header = svc_signature("webhook-secret", body).to_ascii_uppercase();
/// assert!(verify_svc_signature("webhook-secret", body, &header));
/// assert!(!verify_svc_signature("webhook-secret", b"{}", &header));
/// ```
pub fn verify_svc_signature(secret: &str, body: &[u8], header: &str) -> bool {
    same(
        &svc_signature(secret, body),
        &header.trim().to_ascii_lowercase(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hmac_sha256_matches_rfc_4231_test_case_2() {
        let mac = hmac_sha256(b"Jefe", b"what do ya want for nothing?");
        let hex: String = mac.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(
            hex,
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }

    #[test]
    fn x_hmac_is_padded_standard_base64_of_the_timestamp_hmac() {
        assert_eq!(
            x_hmac("Jefe", "what do ya want for nothing?"),
            "W9zBRr9gdU5qBCQmCJV1x1oAPwidJzmDnexYuWTsOEM="
        );
        let signature = x_hmac("connector-secret", "2024-03-01T10:30:00Z");
        assert_eq!(signature.len(), 44);
        assert!(signature.ends_with('='));
    }

    #[test]
    fn svc_signature_is_hex_hmac_of_the_body() {
        // RFC 4231 test case 2 again, as lowercase hex.
        assert_eq!(
            svc_signature("Jefe", b"what do ya want for nothing?"),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
        let signature = svc_signature("sub-secret", b"{\"id\":1}");
        assert!(verify_svc_signature(
            "sub-secret",
            b"{\"id\":1}",
            &signature.to_ascii_uppercase()
        ));
        assert!(!verify_svc_signature(
            "sub-secret",
            b"{\"id\":2}",
            &signature
        ));
    }

    #[test]
    fn verification_accepts_only_the_right_secret_and_timestamp() {
        let signature = x_hmac("connector-secret", "2024-03-01T10:30:00Z");
        assert!(verify_x_hmac(
            "connector-secret",
            "2024-03-01T10:30:00Z",
            &signature
        ));
        assert!(!verify_x_hmac(
            "other-secret",
            "2024-03-01T10:30:00Z",
            &signature
        ));
        assert!(!verify_x_hmac(
            "connector-secret",
            "2024-03-01T10:30:01Z",
            &signature
        ));
        assert!(!verify_x_hmac(
            "connector-secret",
            "2024-03-01T10:30:00Z",
            ""
        ));
    }
}

/// The README's examples, compiled and run as doctests.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
