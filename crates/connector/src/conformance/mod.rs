//! Conformance checks of a platform connector: what `mercer conformance` runs. Each check sends
//! real calls to the connector (signed with [`HttpConnector`](crate::HttpConnector)'s code) and
//! judges the answers by one rule of docs/connector.md, whose section it names.
//!
//! The checks write only test data (customers under [`TEST_EMAIL_DOMAIN`], an order marked
//! `test: true`), and delete what the interface can delete when they end, whether they passed
//! or not. Create Payment is never called: on a real platform it could move money.
//!
//! ```no_run
//! use std::time::Duration;
//! use mercer_connector::conformance::{Config, run};
//! use mercer_domain::access::credentials::Secret;
//! use mercer_outbound::PrivateAddressGuard;
//!
//! let config = Config {
//!     connector_url: "https://connector.example".to_string(),
//!     shop_identifier: "2f5399246f392b6fdfb4fd901b3281af".to_string(),
//!     secret: Secret::new("connector-secret"),
//!     timeout: Duration::from_secs(20),
//!     guard: PrivateAddressGuard::STRICT,
//!     customer_token: None,
//! };
//! let report = run(&config).expect("a public https URL");
//! for result in &report.results {
//!     println!("{} {} {}", result.name, result.passed, result.detail);
//! }
//! ```

mod absence;
mod checks;
mod lists;
mod records;
mod session;
mod signing;
mod testdata;

use std::time::Duration;

use mercer_domain::access::credentials::Secret;
use mercer_domain::kernel::outbound::AddressGuard;
use mercer_outbound::PrivateAddressGuard;
use serde::Serialize;

pub use checks::{CHECKS, Check};
pub use testdata::TEST_EMAIL_DOMAIN;

use session::Session;

/// What to check, and how to reach it.
#[derive(Debug, Clone)]
pub struct Config {
    /// The connector's base URL; operations are under `{url}/v1/shops/{shop}`.
    pub connector_url: String,
    /// The shop the checks act for (the connector must know it).
    pub shop_identifier: String,
    /// The shop's connector shared secret, which signs every call.
    pub secret: Secret,
    /// How long each call may take: past it, the call fails as Mercer's would.
    pub timeout: Duration,
    /// Which addresses may be called; Mercer's own calls use the same guard.
    pub guard: PrivateAddressGuard,
    /// A token the platform issued to one of its customers, so that Validate Customer JWT is
    /// also seen answering `active: true`.
    pub customer_token: Option<CustomerToken>,
}

/// A customer token issued by the platform, for the Validate Customer JWT check.
#[derive(Debug, Clone)]
pub struct CustomerToken {
    /// The customer the token belongs to.
    pub platform_customer_id: String,
    /// The token.
    pub token: String,
}

/// The outcome of one check.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CheckResult {
    /// The check's name (`verification-echo`).
    pub name: &'static str,
    /// Where its rule is stated (`docs/connector.md`, then the section sign and its number).
    pub section: &'static str,
    /// Whether the connector followed the rule.
    pub passed: bool,
    /// Why it failed; for a pass, a note or nothing.
    pub detail: String,
}

/// The outcomes of every check, in the order of [`CHECKS`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Report {
    /// One result per check.
    pub results: Vec<CheckResult>,
    /// Test records the connector interface cannot delete (orders), for the author to remove.
    pub left_on_platform: Vec<String>,
}

impl Report {
    /// Whether every check passed.
    pub fn passed(&self) -> bool {
        self.results.iter().all(|result| result.passed)
    }

    /// How many checks failed.
    pub fn failures(&self) -> usize {
        self.results.iter().filter(|result| !result.passed).count()
    }
}

/// Why the checks could not start.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SetupError {
    /// The connector URL is not an http(s) URL, or leads where the guard refuses to go.
    #[error("the connector URL is not allowed: {0}")]
    NotAllowed(String),
}

/// A check's verdict: `Ok(note)` passed, `Err(reason)` failed.
pub(crate) type Outcome = Result<String, String>;

/// Where the checks put their verdicts, in the order they run.
pub(crate) type Record<'a> = dyn FnMut(&'static Check, Outcome) + 'a;

/// Runs every check against the connector, then deletes the test data. Blocks (one call at a
/// time) for up to a few dozen calls' timeouts.
pub fn run(config: &Config) -> Result<Report, SetupError> {
    // The registration check Mercer makes on a destination URL, before any call.
    // Its hint names `mercer serve`'s flag: the caller knows its own.
    config
        .guard
        .check(&config.connector_url)
        .map_err(|reason| {
            let reason = reason.trim_end_matches(mercer_outbound::PRIVATE_TARGETS_HINT);
            SetupError::NotAllowed(reason.to_string())
        })?;
    let mut session = Session::new(config);
    let mut results = Vec::with_capacity(CHECKS.len());
    let mut record = |check: &'static Check, outcome: Outcome| {
        log::info!(target: "mercer::conformance", "{}: {}", check.name,
            if outcome.is_ok() { "pass" } else { "fail" });
        results.push(CheckResult {
            name: check.name,
            section: check.section,
            passed: outcome.is_ok(),
            detail: outcome.unwrap_or_else(|reason| reason),
        });
    };
    signing::run(&mut session, &mut record);
    let verified = session.verified;
    records::create(&mut session, verified, &mut record);
    lists::run(&mut session, &mut record);
    records::run(&mut session, config.customer_token.as_ref(), &mut record);
    record(&checks::JSON_ANSWERS, session.json_answers());
    let removed = testdata::remove(&mut session);
    record(&checks::TEST_DATA_REMOVED, removed);
    Ok(Report {
        results,
        left_on_platform: session.left_on_platform(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(url: &str, guard: PrivateAddressGuard) -> Config {
        Config {
            connector_url: url.to_string(),
            shop_identifier: "0123456789abcdef0123456789abcdef".to_string(),
            secret: Secret::new("s"),
            timeout: Duration::from_millis(500),
            guard,
            customer_token: None,
        }
    }

    #[test]
    fn a_loopback_connector_is_refused_like_mercer_refuses_it() {
        let refused = run(&config("http://127.0.0.1:9", PrivateAddressGuard::STRICT));
        assert_eq!(
            refused,
            Err(SetupError::NotAllowed(
                "it leads to a loopback address".to_string()
            ))
        );
    }

    #[test]
    fn an_unreachable_connector_fails_every_check_but_writes_nothing() {
        // Port 9 (discard) is closed on this machine's loopback.
        let report = run(&config(
            "http://127.0.0.1:9",
            PrivateAddressGuard::ALLOW_PRIVATE,
        ))
        .expect("loopback allowed");
        let names: Vec<&str> = report.results.iter().map(|r| r.name).collect();
        let expected: Vec<&str> = CHECKS.iter().map(|c| c.name).collect();
        assert_eq!(
            names, expected,
            "one result per check, in the catalogue's order"
        );
        let verification = &report.results[0];
        assert!(!verification.passed);
        assert!(
            verification.detail.contains("could not be reached"),
            "{}",
            verification.detail
        );
        let create = report
            .results
            .iter()
            .find(|r| r.name == "create-customer")
            .expect("listed");
        assert!(create.detail.starts_with("not run"), "{}", create.detail);
        // Nothing was written, so nothing is left: the clean-up row passes.
        assert!(report.results.last().is_some_and(|r| r.passed));
        assert!(report.left_on_platform.is_empty());
        assert!(!report.passed());
    }
}
