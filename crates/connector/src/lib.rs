//! Mercer's side of the platform connector interface (seed 000, contract §3):
//!
//! - [`HttpConnector`], the client for every connector operation (it implements the domain's
//!   [`PlatformConnector`](mercer_domain::platform::connector::PlatformConnector) port): signed requests,
//!   the destination's timeout, typed answers and distinct errors;
//! - [`kit`], for people who write connectors: checks Mercer's signed requests and computes the
//!   verification answer.
//!
//! Everything here blocks (ureq): call it from worker threads, never from an async task.

mod client;
pub mod kit;

pub use client::{HttpConnector, Pages};
pub use mercer_domain::platform::connector::{
    ConnectorError, ConnectorResult, ConnectorTarget, Page, PlatformConnector,
};
/// The resources of the connector interface, for connector authors.
pub use mercer_domain::platform::resources as types;

/// Headers of the connector interface.
pub mod headers {
    pub const TIMESTAMP: &str = "X-HMAC-Timestamp";
    pub const HMAC: &str = "X-HMAC";
    pub const COMPATIBLE_HMAC: &str = "X-Compatible-HMAC";
    pub const IDEMPOTENCY_KEY: &str = "Idempotency-Key";
    /// The exact `User-Agent` of Mercer's calls, for connectors' firewalls.
    pub const USER_AGENT: &str = "Svc-API";
}

/// The README's examples, compiled and run as doctests.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
