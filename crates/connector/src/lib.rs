#![warn(missing_docs)]
//! Mercer's side of the platform connector interface:
//!
//! - [`HttpConnector`], the client for every connector operation (it implements the domain's
//!   [`PlatformConnector`] port): signed requests,
//!   the destination's timeout, typed answers and distinct errors;
//! - [`kit`], for people who write connectors: checks Mercer's signed requests and computes the
//!   verification answer;
//! - [`conformance`], the checks `mercer conformance` runs against a connector.
//!
//! Everything here blocks (ureq): call it from worker threads, never from an async task.

mod client;
pub mod conformance;
pub mod kit;

pub use client::{HttpConnector, Pages};
pub use mercer_domain::platform::connector::{
    ConnectorError, ConnectorResult, ConnectorTarget, Page, PlatformConnector,
};
/// The resources of the connector interface, for connector authors.
pub use mercer_domain::platform::resources as types;

/// Headers of the connector interface.
pub mod headers {
    /// The time the call was signed at (RFC 3339, UTC, seconds).
    pub const TIMESTAMP: &str = "X-HMAC-Timestamp";
    /// The HMAC of the timestamp under the shop's current connector secret.
    pub const HMAC: &str = "X-HMAC";
    /// The same under the previous secret while a rotation's grace runs.
    pub const COMPATIBLE_HMAC: &str = "X-Compatible-HMAC";
    /// The HTTP Message Signature's parameters and covered components (RFC 9421).
    pub const SIGNATURE_INPUT: &str = "Signature-Input";
    /// The HTTP Message Signature itself (RFC 9421).
    pub const SIGNATURE: &str = "Signature";
    /// The body's SHA-256 (RFC 9530), which the message signature covers.
    pub const CONTENT_DIGEST: &str = "Content-Digest";
    /// Verify's answer: the HMAC of the verification request's nonce.
    pub const VERIFICATION_PROOF: &str = "X-Verification-Proof";
    /// Create Order's key: the same key answers the order made first.
    pub const IDEMPOTENCY_KEY: &str = "Idempotency-Key";
    /// The exact `User-Agent` of Mercer's calls, for connectors' firewalls.
    pub const USER_AGENT: &str = "Svc-API";
}

/// The README's examples, compiled and run as doctests.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
