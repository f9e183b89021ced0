//! A bound on the connector checks of customer tokens that the subscriber portal's entry asks
//! for, in this process, beside the cache of tokens found active (`short_cache`):
//! - a customer of a shop gets at most [`MAX_CHECKS`] checks in any [`WINDOW`], active or not,
//!   so reloading an entry link (or trying tokens for someone) cannot hammer the platform;
//! - one check at a time per customer, so a burst of reloads makes one call, not many;
//! - at most [`PRUNE_AT`] customers with checks in one window: past that, a customer not yet
//!   counted waits, so made-up customer ids cannot flood the platform or fill the memory.
//!
//! Keys are (shop identifier, platform customer id), as the sign-in limiter keys its failures
//! by address (`sign_in_limiter`).

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Checks a customer may cause in one window.
pub const MAX_CHECKS: usize = 10;
pub const WINDOW: Duration = Duration::from_secs(5 * 60);
/// Past this many customers, those without a check in the window are dropped; when all of
/// them have one, a new customer waits.
pub const PRUNE_AT: usize = 10_000;

/// Whose checks are counted: the shop's identifier and the customer's platform id.
pub type CustomerKey = (String, String);

#[derive(Default)]
pub struct CustomerChecks {
    checks: Mutex<HashMap<CustomerKey, VecDeque<Instant>>>,
    running: Arc<Mutex<HashSet<CustomerKey>>>,
}

/// A customer's check in progress; the customer is free again when it is dropped.
#[derive(Debug)]
pub struct CheckClaim {
    running: Arc<Mutex<HashSet<CustomerKey>>>,
    key: CustomerKey,
}

impl Drop for CheckClaim {
    fn drop(&mut self) {
        self.running
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&self.key);
    }
}

impl CustomerChecks {
    /// Starts a check for `key`, counted in its window; or how long the customer must wait
    /// (another check of theirs is running: a second).
    pub fn begin(&self, key: &CustomerKey) -> Result<CheckClaim, Duration> {
        let claim = {
            let mut running = self.running.lock().unwrap_or_else(|e| e.into_inner());
            if !running.insert(key.clone()) {
                return Err(Duration::from_secs(1));
            }
            CheckClaim {
                running: self.running.clone(),
                key: key.clone(),
            }
        };
        let now = Instant::now();
        let mut checks = self.checks.lock().unwrap_or_else(|e| e.into_inner());
        if checks.len() >= PRUNE_AT {
            checks.retain(|_, times| times.back().is_some_and(|last| *last + WINDOW > now));
            // Still full: checks for that many customers in one window is a flood (made-up
            // customer ids, one after another); a new customer waits, and memory stays bounded.
            if checks.len() >= PRUNE_AT && !checks.contains_key(key) {
                return Err(Duration::from_secs(60));
            }
        }
        let times = checks.entry(key.clone()).or_default();
        while times.front().is_some_and(|first| *first + WINDOW <= now) {
            times.pop_front();
        }
        if times.len() >= MAX_CHECKS {
            let oldest = times.front().copied().unwrap_or(now);
            return Err((oldest + WINDOW).saturating_duration_since(now));
        }
        times.push_back(now);
        Ok(claim)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(shop: &str, customer: &str) -> CustomerKey {
        (shop.to_string(), customer.to_string())
    }

    #[test]
    fn a_customer_waits_after_too_many_checks_and_others_do_not() {
        let limiter = CustomerChecks::default();
        for _ in 0..MAX_CHECKS {
            assert!(limiter.begin(&key("s", "ada")).is_ok());
        }
        let wait = limiter.begin(&key("s", "ada")).expect_err("a wait");
        assert!(wait <= WINDOW && wait > WINDOW - Duration::from_secs(5));
        assert!(limiter.begin(&key("s", "bob")).is_ok());
        assert!(limiter.begin(&key("other", "ada")).is_ok());
    }

    #[test]
    fn a_flood_of_customers_is_bounded_and_known_ones_go_on() {
        let limiter = CustomerChecks::default();
        for n in 0..PRUNE_AT {
            assert!(limiter.begin(&key("s", &n.to_string())).is_ok());
        }
        assert!(limiter.begin(&key("s", "one-too-many")).is_err());
        assert!(
            limiter.begin(&key("s", "7")).is_ok(),
            "a customer already counted"
        );
    }

    #[test]
    fn one_check_at_a_time_per_customer() {
        let limiter = CustomerChecks::default();
        let claim = limiter.begin(&key("s", "ada")).expect("free");
        assert!(limiter.begin(&key("s", "ada")).is_err());
        assert!(limiter.begin(&key("s", "bob")).is_ok());
        drop(claim);
        assert!(limiter.begin(&key("s", "ada")).is_ok());
    }
}
