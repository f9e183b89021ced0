//! The connector kit: what a connector needs to trust Mercer's calls.
//!
//! Every call from Mercer carries two signatures, and a connector built with the kit checks
//! both with [`verify_call`]:
//!
//! - `X-HMAC` (and `X-Compatible-HMAC`) over `X-HMAC-Timestamp`, the original scheme: it covers
//!   only the timestamp, so on its own a captured header pair works on any operation for 5
//!   minutes;
//! - an HTTP Message Signature (RFC 9421, `Signature-Input` and `Signature`) over the method,
//!   the URI and the body's `Content-Digest`, with `created` and a `nonce`: bound to one
//!   operation and one body, and refused the second time (a [`NonceCache`] remembers nonces).
//!
//! Verify's answer carries `X-HMAC` ([`verification_answer`]) and `X-Verification-Proof`
//! ([`verification_proof`] of the request's nonce), which an echo of Mercer's headers cannot
//! make.
//!
//! ```
//! use mercer_connector::kit::{verify_request, SignedHeaders, DEFAULT_MAX_SKEW_SECONDS};
//! use mercer_domain::Timestamp;
//!
//! let now = Timestamp::parse_rfc3339("2024-03-01T10:30:00Z").unwrap();
//! let signature = mercer_signing::x_hmac("connector-secret", "2024-03-01T10:30:00Z");
//! let headers = SignedHeaders {
//!     timestamp: Some("2024-03-01T10:30:00Z"),
//!     hmac: Some(&signature),
//!     compatible_hmac: Some(&signature),
//! };
//! assert!(verify_request(&headers, "connector-secret", now, DEFAULT_MAX_SKEW_SECONDS).is_ok());
//! ```

use std::collections::HashMap;
use std::sync::Mutex;

use mercer_domain::Timestamp;
use mercer_signing::message_signature::{self, Request, SignatureError};
use mercer_signing::{verify_x_hmac, x_hmac};

/// How far a request's `X-HMAC-Timestamp` may be from the connector's clock.
pub const DEFAULT_MAX_SKEW_SECONDS: i64 = 5 * 60;

/// The signing headers of a request from Mercer, as the connector received them.
#[derive(Debug, Clone, Copy, Default)]
pub struct SignedHeaders<'a> {
    /// `X-HMAC-Timestamp`.
    pub timestamp: Option<&'a str>,
    /// `X-HMAC`: under the shop's current secret.
    pub hmac: Option<&'a str>,
    /// `X-Compatible-HMAC`: under the previous secret during a rotation's grace.
    pub compatible_hmac: Option<&'a str>,
}

/// Why a request is not trusted as Mercer's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VerifyError {
    /// The request lacks this signing header.
    MissingHeader(&'static str),
    /// `X-HMAC-Timestamp` is not an RFC 3339 date-time.
    BadTimestamp,
    /// The timestamp is further from now than allowed (a replay, or a wrong clock).
    Stale {
        /// How far it is from now, in seconds.
        skew_seconds: i64,
    },
    /// Neither `X-HMAC` nor `X-Compatible-HMAC` matches the connector's secret.
    BadSignature,
    /// No message signature verifies under the connector's secret (a wrong secret, another
    /// method, URI or digest than the request's, or headers that do not parse).
    BadMessageSignature(String),
    /// The message signature verifies but does not cover this component (`@method`,
    /// `@target-uri`, `content-digest` for a body) or lacks this parameter (`created`, `nonce`).
    Uncovered(&'static str),
    /// `Content-Digest` is not the SHA-256 of the body.
    BadContentDigest,
    /// The message signature's nonce was seen before: a replayed call.
    Replayed,
    /// The nonce cache is full of live nonces: the call is refused rather than let a replay
    /// through.
    NonceCacheFull,
}

impl std::fmt::Display for VerifyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            VerifyError::MissingHeader(name) => write!(f, "missing header {name}"),
            VerifyError::BadTimestamp => {
                f.write_str("X-HMAC-Timestamp is not an RFC 3339 date-time")
            }
            VerifyError::Stale { skew_seconds } => {
                write!(f, "X-HMAC-Timestamp is {skew_seconds} s from now")
            }
            VerifyError::BadSignature => f.write_str("the HMAC does not match"),
            VerifyError::BadMessageSignature(why) => {
                write!(f, "the message signature does not verify: {why}")
            }
            VerifyError::Uncovered(what) => {
                write!(f, "the message signature does not cover {what}")
            }
            VerifyError::BadContentDigest => {
                f.write_str("Content-Digest is not the SHA-256 of the body")
            }
            VerifyError::Replayed => f.write_str("the message signature's nonce was seen before"),
            VerifyError::NonceCacheFull => f.write_str("too many calls to remember their nonces"),
        }
    }
}

impl std::error::Error for VerifyError {}

/// Checks a request from Mercer against the connector's secret: the timestamp within
/// `max_skew_seconds` of `now`, and `X-HMAC` or `X-Compatible-HMAC` matching. A connector that
/// still holds the previous secret during a rotation matches `X-Compatible-HMAC`.
///
/// A stale or forged request is refused with the reason, for the connector's log (its answer
/// to Mercer should say no more than 401):
///
/// ```
/// use mercer_connector::kit::{SignedHeaders, VerifyError, verify_request};
/// use mercer_domain::Timestamp;
///
/// let sent = "2024-03-01T10:30:00Z";
/// let signature = mercer_signing::x_hmac("connector-secret", sent);
/// let headers = SignedHeaders {
///     timestamp: Some(sent),
///     hmac: Some(&signature),
///     compatible_hmac: None,
/// };
/// let later = Timestamp::parse_rfc3339("2024-03-01T10:40:00Z").unwrap();
/// assert_eq!(
///     verify_request(&headers, "connector-secret", later, 300),
///     Err(VerifyError::Stale { skew_seconds: 600 })
/// );
/// let now = Timestamp::parse_rfc3339(sent).unwrap();
/// assert_eq!(
///     verify_request(&headers, "another-secret", now, 300),
///     Err(VerifyError::BadSignature)
/// );
/// let unsigned = SignedHeaders { hmac: None, ..headers };
/// assert_eq!(
///     verify_request(&unsigned, "connector-secret", now, 300),
///     Err(VerifyError::MissingHeader("X-HMAC"))
/// );
/// ```
pub fn verify_request(
    headers: &SignedHeaders<'_>,
    secret: &str,
    now: Timestamp,
    max_skew_seconds: i64,
) -> Result<(), VerifyError> {
    let timestamp = headers
        .timestamp
        .ok_or(VerifyError::MissingHeader("X-HMAC-Timestamp"))?;
    let hmac = headers.hmac.ok_or(VerifyError::MissingHeader("X-HMAC"))?;
    let sent = Timestamp::parse_rfc3339(timestamp).ok_or(VerifyError::BadTimestamp)?;
    let skew_seconds = (now.as_micros() - sent.as_micros()).abs() / 1_000_000;
    if skew_seconds > max_skew_seconds {
        return Err(VerifyError::Stale { skew_seconds });
    }
    let matches = verify_x_hmac(secret, timestamp, hmac)
        || headers
            .compatible_hmac
            .is_some_and(|compatible| verify_x_hmac(secret, timestamp, compatible));
    if matches {
        Ok(())
    } else {
        Err(VerifyError::BadSignature)
    }
}

/// The `X-HMAC` response header a connector sends back from Verify Platform Connector
/// Destination: the HMAC of the request's `X-HMAC-Timestamp` under its secret.
///
/// ```
/// use mercer_connector::kit::verification_answer;
///
/// // Mercer's verification call carries `X-HMAC-Timestamp`; the connector echoes its HMAC.
/// let answer = verification_answer("connector-secret", "2024-03-01T10:30:00Z");
/// assert!(mercer_signing::verify_x_hmac("connector-secret", "2024-03-01T10:30:00Z", &answer));
/// ```
pub fn verification_answer(secret: &str, request_timestamp: &str) -> String {
    x_hmac(secret, request_timestamp)
}

/// The nonces of verified calls, each kept until its signature is too old to be accepted
/// anyway (`created` plus the allowed skew), so a replay within that time is refused. Bounded:
/// once `capacity` live nonces are held, new calls are refused ([`VerifyError::NonceCacheFull`])
/// rather than a nonce forgotten early. Share one per connector process (it locks inside).
#[derive(Debug)]
pub struct NonceCache {
    capacity: usize,
    seen: Mutex<HashMap<String, i64>>,
}

/// How many live nonces a [`NonceCache::default`] holds: 100 000, about 330 calls a second
/// for 5 minutes.
pub const DEFAULT_NONCE_CAPACITY: usize = 100_000;

/// The longest nonce accepted, in bytes (Mercer's are 32 hex digits).
pub const MAX_NONCE_BYTES: usize = 128;

impl Default for NonceCache {
    fn default() -> Self {
        NonceCache::new(DEFAULT_NONCE_CAPACITY)
    }
}

impl NonceCache {
    /// A cache of at most `capacity` live nonces.
    pub fn new(capacity: usize) -> Self {
        NonceCache {
            capacity: capacity.max(1),
            seen: Mutex::new(HashMap::new()),
        }
    }

    /// Remembers `nonce` until `keep_until` (unix seconds). `Err(Replayed)` when it is already
    /// remembered; `Err(NonceCacheFull)` when `capacity` live nonces are held.
    pub fn remember(&self, nonce: &str, keep_until: i64, now: i64) -> Result<(), VerifyError> {
        let mut seen = self
            .seen
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if seen.get(nonce).is_some_and(|until| *until >= now) {
            return Err(VerifyError::Replayed);
        }
        if seen.len() >= self.capacity {
            seen.retain(|_, until| *until >= now);
            if seen.len() >= self.capacity {
                return Err(VerifyError::NonceCacheFull);
            }
        }
        seen.insert(nonce.to_string(), keep_until);
        Ok(())
    }

    /// How many nonces are held (expired ones included until the next sweep).
    pub fn len(&self) -> usize {
        self.seen
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .len()
    }

    /// Whether no nonce is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A request from Mercer as its message signature is checked.
#[derive(Debug, Clone, Copy)]
pub struct SignedMessage<'a> {
    /// The method (`GET`, `POST`…).
    pub method: &'a str,
    /// The URI Mercer called: the destination's base URL as registered (scheme, host, port) with
    /// the request's path and query as received, e.g.
    /// `https://connector.example/v1/shops/SHOP/customers?limit=50` ([`target_uri`] builds it).
    pub target_uri: &'a str,
    /// `Signature-Input`.
    pub signature_input: Option<&'a str>,
    /// `Signature`.
    pub signature: Option<&'a str>,
    /// `Content-Digest`.
    pub content_digest: Option<&'a str>,
    /// The raw body (empty for GET and DELETE).
    pub body: &'a [u8],
}

/// `{scheme}://{authority}{path and query}`: the `@target-uri` of a request received at
/// `authority` (the `Host` header, or the registered destination's host behind a proxy) over
/// `scheme`. A connector behind a proxy that ends TLS passes `https` and its public host.
///
/// ```
/// use mercer_connector::kit::target_uri;
///
/// assert_eq!(
///     target_uri("https", "connector.example", "/v1/shops/abc/customers?limit=1"),
///     "https://connector.example/v1/shops/abc/customers?limit=1"
/// );
/// ```
pub fn target_uri(scheme: &str, authority: &str, path_and_query: &str) -> String {
    format!(
        "{}://{}{path_and_query}",
        scheme.to_ascii_lowercase(),
        authority.to_ascii_lowercase()
    )
}

/// What a verified message signature said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifiedMessage {
    /// The label of the signature that verified (`sig1`; `sig2` is the previous secret's during
    /// a rotation's grace).
    pub label: String,
    /// Its nonce: Verify's answer proves the secret with [`verification_proof`] of it.
    pub nonce: String,
    /// Its `created`, unix seconds.
    pub created: i64,
}

fn bad_message(error: SignatureError) -> VerifyError {
    VerifyError::BadMessageSignature(error.to_string())
}

/// Checks a request's HTTP Message Signature against the connector's secret: some signature of
/// `Signature-Input` verifies (Mercer sends `sig1` keyed with the current secret and, during a
/// rotation's grace, `sig2` with the previous one: either is accepted); it covers `@method`,
/// `@target-uri` and, when the request has a body, `content-digest`, which must be the body's
/// SHA-256; its `created` is within `max_skew_seconds` of `now`; and its nonce was not seen
/// before (it is remembered in `nonces` from then on).
pub fn verify_message(
    message: &SignedMessage<'_>,
    secret: &str,
    now: Timestamp,
    max_skew_seconds: i64,
    nonces: &NonceCache,
) -> Result<VerifiedMessage, VerifyError> {
    let input = message
        .signature_input
        .ok_or(VerifyError::MissingHeader("Signature-Input"))?;
    let signature = message
        .signature
        .ok_or(VerifyError::MissingHeader("Signature"))?;
    let mut fields = Vec::new();
    if let Some(digest) = message.content_digest {
        fields.push(("content-digest", digest));
    }
    let request = Request {
        method: message.method,
        target_uri: message.target_uri,
        headers: &fields,
    };
    let verified = message_signature::verify_any(secret.as_bytes(), &request, input, signature)
        .map_err(bad_message)?;
    let covers = |name: &str| verified.components.iter().any(|c| c == name);
    for required in ["@method", "@target-uri"] {
        if !covers(required) {
            return Err(VerifyError::Uncovered(required));
        }
    }
    if !message.body.is_empty() && !covers("content-digest") {
        return Err(VerifyError::Uncovered("content-digest"));
    }
    if covers("content-digest") {
        let digest = message
            .content_digest
            .ok_or(VerifyError::MissingHeader("Content-Digest"))?;
        if !message_signature::content_digest_matches(digest, message.body) {
            return Err(VerifyError::BadContentDigest);
        }
    }
    let created = verified.created.ok_or(VerifyError::Uncovered("created"))?;
    let nonce = verified
        .nonce
        .filter(|nonce| !nonce.is_empty() && nonce.len() <= MAX_NONCE_BYTES)
        .ok_or(VerifyError::Uncovered("nonce"))?;
    let now_seconds = now.as_micros().div_euclid(1_000_000);
    let skew_seconds = now_seconds.saturating_sub(created).saturating_abs();
    if skew_seconds > max_skew_seconds {
        return Err(VerifyError::Stale { skew_seconds });
    }
    if verified
        .expires
        .is_some_and(|expires| expires < now_seconds)
    {
        return Err(VerifyError::Stale { skew_seconds });
    }
    nonces.remember(
        &nonce,
        created.saturating_add(max_skew_seconds),
        now_seconds,
    )?;
    Ok(VerifiedMessage {
        label: verified.label,
        nonce,
        created,
    })
}

/// The most entities a page of a List operation holds, and the page size of a call whose
/// `limit` is missing or outside 1..=250.
pub const DEFAULT_PAGE_LIMIT: usize = 250;

/// A List operation's `limit` as a connector reads it: 1..=250, anything else (or nothing) is
/// [`DEFAULT_PAGE_LIMIT`].
///
/// ```
/// use mercer_connector::kit::page_limit;
///
/// assert_eq!(page_limit(Some("10")), 10);
/// assert_eq!(page_limit(Some("0")), 250);
/// assert_eq!(page_limit(Some("251")), 250);
/// assert_eq!(page_limit(Some("ten")), 250);
/// assert_eq!(page_limit(None), 250);
/// ```
pub fn page_limit(text: Option<&str>) -> usize {
    text.and_then(|t| t.trim().parse::<usize>().ok())
        .filter(|n| (1..=DEFAULT_PAGE_LIMIT).contains(n))
        .unwrap_or(DEFAULT_PAGE_LIMIT)
}

/// Checks everything Mercer signs on a call: `X-HMAC` ([`verify_request`]) and the message
/// signature ([`verify_message`]). A connector answers 401 to any error, and acts on nothing.
pub fn verify_call(
    headers: &SignedHeaders<'_>,
    message: &SignedMessage<'_>,
    secret: &str,
    now: Timestamp,
    max_skew_seconds: i64,
    nonces: &NonceCache,
) -> Result<VerifiedMessage, VerifyError> {
    verify_request(headers, secret, now, max_skew_seconds)?;
    verify_message(message, secret, now, max_skew_seconds, nonces)
}

/// The `X-Verification-Proof` response header of Verify: base64 HMAC-SHA256 of the
/// verification request's nonce (from [`verify_message`]) under the connector's secret. With it
/// a shop that requires message signatures registers the connector; an echo of Mercer's own
/// headers cannot make it.
///
/// ```
/// use mercer_connector::kit::verification_proof;
///
/// let proof = verification_proof("connector-secret", "9f2c51e0a4b37d68c1e05f9a2b4d7c13");
/// assert!(mercer_signing::message_signature::verify_verification_proof(
///     "connector-secret",
///     "9f2c51e0a4b37d68c1e05f9a2b4d7c13",
///     &proof
/// ));
/// ```
pub fn verification_proof(secret: &str, nonce: &str) -> String {
    message_signature::verification_proof(secret, nonce)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &str = "connector-secret";
    const WHEN: &str = "2024-03-01T10:30:00Z";

    fn now() -> Timestamp {
        Timestamp::parse_rfc3339(WHEN).unwrap()
    }

    #[test]
    fn accepts_the_current_or_the_compatible_signature() {
        let good = x_hmac(SECRET, WHEN);
        let other = x_hmac("another-secret", WHEN);
        let check = |hmac: &str, compatible: &str| {
            verify_request(
                &SignedHeaders {
                    timestamp: Some(WHEN),
                    hmac: Some(hmac),
                    compatible_hmac: Some(compatible),
                },
                SECRET,
                now(),
                300,
            )
        };
        assert_eq!(check(&good, &good), Ok(()));
        assert_eq!(
            check(&other, &good),
            Ok(()),
            "a connector on the old secret matches X-Compatible-HMAC"
        );
        assert_eq!(check(&other, &other), Err(VerifyError::BadSignature));
    }

    #[test]
    fn refuses_stale_missing_or_malformed_timestamps() {
        let at = |timestamp: &'static str| {
            let hmac = x_hmac(SECRET, timestamp);
            verify_request(
                &SignedHeaders {
                    timestamp: Some(timestamp),
                    hmac: Some(&hmac),
                    compatible_hmac: None,
                },
                SECRET,
                now(),
                300,
            )
        };
        assert_eq!(at("2024-03-01T10:34:59Z"), Ok(()));
        assert_eq!(
            at("2024-03-01T10:24:00Z"),
            Err(VerifyError::Stale { skew_seconds: 360 })
        );
        assert_eq!(at("yesterday"), Err(VerifyError::BadTimestamp));
        let missing = verify_request(&SignedHeaders::default(), SECRET, now(), 300);
        assert_eq!(missing, Err(VerifyError::MissingHeader("X-HMAC-Timestamp")));
    }

    #[test]
    fn the_verification_answer_is_the_timestamps_hmac() {
        assert_eq!(verification_answer(SECRET, WHEN), x_hmac(SECRET, WHEN));
    }

    use crate::client::{SignedCall, Signing, sign_call};
    use mercer_domain::access::credentials::Secret;
    use mercer_domain::platform::connector::ConnectorTarget;

    const URI: &str = "https://connector.example/v1/shops/0123456789abcdef0123456789abcdef/orders";

    fn target(secret: &str, compatible: &str) -> ConnectorTarget {
        ConnectorTarget {
            base_url: "https://connector.example".into(),
            version: "v1".into(),
            shop_identifier: "0123456789abcdef0123456789abcdef".into(),
            timeout: std::time::Duration::from_secs(1),
            secret: Secret::new(secret),
            compatible_secret: Secret::new(compatible),
        }
    }

    /// A call as Mercer signs it, at `WHEN`.
    fn mercer_call(target: &ConnectorTarget, method: &str, body: Option<&[u8]>) -> SignedCall {
        let signing = Signing::Exact {
            at: now(),
            nonce: *b"0123456789abcdef",
        };
        sign_call(target, method, URI, body, signing).unwrap()
    }

    fn message<'a>(
        call: &'a SignedCall,
        method: &'a str,
        uri: &'a str,
        body: &'a [u8],
    ) -> SignedMessage<'a> {
        let (input, signature) = call.message_signature.as_ref().unwrap();
        SignedMessage {
            method,
            target_uri: uri,
            signature_input: Some(input),
            signature: Some(signature),
            content_digest: call.content_digest.as_deref(),
            body,
        }
    }

    fn check(
        message: &SignedMessage<'_>,
        nonces: &NonceCache,
    ) -> Result<VerifiedMessage, VerifyError> {
        verify_message(message, SECRET, now(), 300, nonces)
    }

    #[test]
    fn mercers_call_verifies_once_and_its_replay_is_refused() {
        let call = mercer_call(&target(SECRET, SECRET), "POST", Some(b"{}"));
        let nonces = NonceCache::default();
        let verified = check(&message(&call, "POST", URI, b"{}"), &nonces).unwrap();
        assert_eq!(verified.label, "sig1");
        assert_eq!(verified.nonce, hex_nonce());
        assert_eq!(verified.created, now().as_micros() / 1_000_000);
        assert_eq!(
            check(&message(&call, "POST", URI, b"{}"), &nonces),
            Err(VerifyError::Replayed)
        );
        // Another connector process has its own cache: the same headers verify there once.
        assert!(check(&message(&call, "POST", URI, b"{}"), &NonceCache::default()).is_ok());
    }

    fn hex_nonce() -> String {
        "30313233343536373839616263646566".to_string()
    }

    #[test]
    fn another_method_uri_or_body_is_refused() {
        let call = mercer_call(&target(SECRET, SECRET), "POST", Some(b"{}"));
        let nonces = NonceCache::default();
        let other_uri = URI.replace("/orders", "/customers");
        for (method, uri, body) in [
            ("PATCH", URI, &b"{}"[..]),
            ("POST", other_uri.as_str(), &b"{}"[..]),
        ] {
            assert!(
                matches!(
                    check(&message(&call, method, uri, body), &nonces),
                    Err(VerifyError::BadMessageSignature(_))
                ),
                "{method} {uri}"
            );
        }
        assert_eq!(
            check(&message(&call, "POST", URI, br#"{"forged":true}"#), &nonces),
            Err(VerifyError::BadContentDigest)
        );
        // A body the digest does not cover at all: a GET's signature sent with a body.
        let get = mercer_call(&target(SECRET, SECRET), "GET", None);
        assert_eq!(
            check(&message(&get, "GET", URI, b"{}"), &nonces),
            Err(VerifyError::Uncovered("content-digest"))
        );
        // None of the refused calls used up the nonce.
        assert!(check(&message(&call, "POST", URI, b"{}"), &nonces).is_ok());
    }

    #[test]
    fn a_wrong_secret_or_missing_headers_are_refused() {
        let call = mercer_call(&target("another-secret", "another-secret"), "GET", None);
        let nonces = NonceCache::default();
        assert!(matches!(
            check(&message(&call, "GET", URI, b""), &nonces),
            Err(VerifyError::BadMessageSignature(_))
        ));
        let unsigned = SignedMessage {
            signature_input: None,
            ..message(&call, "GET", URI, b"")
        };
        assert_eq!(
            check(&unsigned, &nonces),
            Err(VerifyError::MissingHeader("Signature-Input"))
        );
    }

    #[test]
    fn a_created_more_than_five_minutes_off_is_refused() {
        let call = mercer_call(&target(SECRET, SECRET), "GET", None);
        let nonces = NonceCache::default();
        let later = now().plus_seconds(301);
        assert_eq!(
            verify_message(
                &message(&call, "GET", URI, b""),
                SECRET,
                later,
                300,
                &nonces
            ),
            Err(VerifyError::Stale { skew_seconds: 301 })
        );
        let earlier = now().plus_seconds(-301);
        assert_eq!(
            verify_message(
                &message(&call, "GET", URI, b""),
                SECRET,
                earlier,
                300,
                &nonces
            ),
            Err(VerifyError::Stale { skew_seconds: 301 })
        );
        let in_time = now().plus_seconds(300);
        assert!(
            verify_message(
                &message(&call, "GET", URI, b""),
                SECRET,
                in_time,
                300,
                &nonces
            )
            .is_ok()
        );
    }

    #[test]
    fn during_a_rotation_either_secret_verifies() {
        // Mercer holds the new secret and, for the grace period, the previous one.
        let call = mercer_call(&target("the-new-secret", SECRET), "GET", None);
        let (input, _) = call.message_signature.as_ref().unwrap();
        assert!(
            input.starts_with("sig1=") && input.contains(", sig2="),
            "{input}"
        );
        let on_old = verify_message(
            &message(&call, "GET", URI, b""),
            SECRET,
            now(),
            300,
            &NonceCache::default(),
        );
        assert_eq!(
            on_old.unwrap().label,
            "sig2",
            "a connector still on the previous secret"
        );
        let on_new = verify_message(
            &message(&call, "GET", URI, b""),
            "the-new-secret",
            now(),
            300,
            &NonceCache::default(),
        );
        assert_eq!(on_new.unwrap().label, "sig1");
        // Outside a grace period there is one signature.
        let single = mercer_call(&target(SECRET, SECRET), "GET", None);
        assert!(!single.message_signature.unwrap().0.contains("sig2"));
    }

    #[test]
    fn verify_call_needs_both_signatures() {
        let call = mercer_call(&target(SECRET, SECRET), "GET", None);
        let (hmac, compatible) = call.hmac.clone().unwrap();
        let headers = SignedHeaders {
            timestamp: Some(&call.timestamp),
            hmac: Some(&hmac),
            compatible_hmac: Some(&compatible),
        };
        let nonces = NonceCache::default();
        let without_message = SignedMessage {
            signature: None,
            ..message(&call, "GET", URI, b"")
        };
        assert_eq!(
            verify_call(&headers, &without_message, SECRET, now(), 300, &nonces),
            Err(VerifyError::MissingHeader("Signature"))
        );
        let no_hmac = SignedHeaders {
            hmac: None,
            ..headers
        };
        assert_eq!(
            verify_call(
                &no_hmac,
                &message(&call, "GET", URI, b""),
                SECRET,
                now(),
                300,
                &nonces
            ),
            Err(VerifyError::MissingHeader("X-HMAC"))
        );
        assert!(
            verify_call(
                &headers,
                &message(&call, "GET", URI, b""),
                SECRET,
                now(),
                300,
                &nonces
            )
            .is_ok()
        );
    }

    #[test]
    fn the_nonce_cache_forgets_only_expired_nonces_and_is_bounded() {
        let cache = NonceCache::new(2);
        assert_eq!(cache.remember("a", 100, 0), Ok(()));
        assert_eq!(cache.remember("a", 100, 50), Err(VerifyError::Replayed));
        assert_eq!(cache.remember("b", 200, 50), Ok(()));
        assert_eq!(
            cache.remember("c", 200, 50),
            Err(VerifyError::NonceCacheFull)
        );
        // Once `a` expired, its room is taken again.
        assert_eq!(cache.remember("c", 200, 101), Ok(()));
        assert_eq!(cache.len(), 2);
        assert_eq!(
            cache.remember("a", 300, 150),
            Err(VerifyError::NonceCacheFull)
        );
        assert_eq!(
            cache.remember("b", 300, 201),
            Ok(()),
            "an expired nonce is no replay"
        );
        assert_eq!(cache.len(), 1, "the expired ones were swept");
    }

    #[test]
    fn the_proof_is_the_hmac_of_the_nonce() {
        let proof = verification_proof(SECRET, "abc");
        assert!(
            mercer_signing::message_signature::verify_verification_proof(SECRET, "abc", &proof)
        );
        assert_ne!(proof, verification_proof(SECRET, "abd"));
        assert_ne!(proof, verification_proof("another-secret", "abc"));
    }
}
