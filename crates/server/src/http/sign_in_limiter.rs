//! Limits on sign-in attempts in this process, beside the account lock the domain keeps in the
//! database:
//! - a client address gets at most [`MAX_FAILURES`] failures in any [`WINDOW`] (IPv6 addresses
//!   count per /64, the block one client usually holds); an attempt counts as a failure from
//!   its start and is forgiven when it succeeds, so attempts sent at once cannot all slip in;
//! - one attempt at a time per sign-in key (the account named, known or not, with the client's
//!   address), so a burst cannot outrun the lock the domain keeps for that key;
//! - a few password checks at a time in all (Argon2 takes ~19 MiB and a core's time each).

use std::collections::{HashMap, HashSet, VecDeque};
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mercer_domain::access::oauth::SignInKey;
use tokio::sync::Semaphore;

/// Failures an address may have in one window.
pub const MAX_FAILURES: usize = 20;
pub const WINDOW: Duration = Duration::from_secs(10 * 60);
/// Past this many addresses, those without a failure in the window are dropped.
const PRUNE_AT: usize = 10_000;

/// Where failures are counted: the address, or its /64 for IPv6.
pub fn client_key(address: IpAddr) -> IpAddr {
    match address {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let mut segments = v6.segments();
                segments[4..].fill(0);
                IpAddr::from(segments)
            }
        },
        v4 => v4,
    }
}

pub struct SignInLimiter {
    failures: Mutex<HashMap<IpAddr, VecDeque<Instant>>>,
    accounts: Arc<Mutex<HashSet<SignInKey>>>,
    /// Password checks running at once.
    pub checks: Semaphore,
}

impl Default for SignInLimiter {
    fn default() -> Self {
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        SignInLimiter {
            failures: Mutex::default(),
            accounts: Arc::default(),
            checks: Semaphore::new(cores),
        }
    }
}

/// A sign-in key's attempt in progress; the key is free again when it is dropped.
pub struct AccountClaim {
    accounts: Arc<Mutex<HashSet<SignInKey>>>,
    key: SignInKey,
}

impl Drop for AccountClaim {
    fn drop(&mut self) {
        self.accounts
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&self.key);
    }
}

impl SignInLimiter {
    /// Starts an attempt from `address`, counted as a failure until [`Self::forgive`]; or how
    /// long the address must wait.
    pub fn begin(&self, address: IpAddr) -> Result<(), Duration> {
        let now = Instant::now();
        let mut failures = self.failures.lock().unwrap_or_else(|e| e.into_inner());
        if failures.len() >= PRUNE_AT {
            failures.retain(|_, times| times.back().is_some_and(|last| *last + WINDOW > now));
        }
        let times = failures.entry(client_key(address)).or_default();
        while times.front().is_some_and(|first| *first + WINDOW <= now) {
            times.pop_front();
        }
        if times.len() >= MAX_FAILURES {
            let oldest = times.front().copied().unwrap_or(now);
            return Err((oldest + WINDOW).saturating_duration_since(now));
        }
        times.push_back(now);
        Ok(())
    }

    /// The attempt succeeded: it does not count.
    pub fn forgive(&self, address: IpAddr) {
        let mut failures = self.failures.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(times) = failures.get_mut(&client_key(address)) {
            times.pop_back();
        }
    }

    /// The key for this attempt, unless another attempt on it is in progress.
    pub fn claim_account(&self, key: &SignInKey) -> Option<AccountClaim> {
        let mut accounts = self.accounts.lock().unwrap_or_else(|e| e.into_inner());
        accounts.insert(key.clone()).then(|| AccountClaim {
            accounts: self.accounts.clone(),
            key: key.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_waits_after_too_many_failures() {
        let limiter = SignInLimiter::default();
        let address: IpAddr = [10, 0, 0, 1].into();
        let other: IpAddr = [10, 0, 0, 2].into();
        for _ in 0..MAX_FAILURES {
            assert!(limiter.begin(address).is_ok());
        }
        let wait = limiter.begin(address).expect_err("a wait");
        assert!(wait <= WINDOW && wait > WINDOW - Duration::from_secs(5));
        assert!(limiter.begin(other).is_ok());
        // A success is forgiven, and makes room for one more attempt.
        limiter.forgive(address);
        assert!(limiter.begin(address).is_ok());
    }

    #[test]
    fn ipv6_addresses_count_per_64() {
        let limiter = SignInLimiter::default();
        for last in 0..MAX_FAILURES as u16 {
            let address = IpAddr::from([0x2001, 0xdb8, 1, 2, 0, 0, 0, last]);
            assert!(limiter.begin(address).is_ok());
        }
        assert!(
            limiter
                .begin(IpAddr::from([0x2001, 0xdb8, 1, 2, 9, 9, 9, 9]))
                .is_err()
        );
        assert!(
            limiter
                .begin(IpAddr::from([0x2001, 0xdb8, 1, 3, 0, 0, 0, 1]))
                .is_ok()
        );
    }

    #[test]
    fn one_attempt_at_a_time_per_key() {
        let limiter = SignInLimiter::default();
        let key = |account: &str| SignInKey {
            account: account.to_string(),
            client: "10.0.0.1".to_string(),
        };
        let claim = limiter.claim_account(&key("a")).expect("free");
        assert!(limiter.claim_account(&key("a")).is_none());
        assert!(limiter.claim_account(&key("b")).is_some());
        drop(claim);
        assert!(limiter.claim_account(&key("a")).is_some());
    }
}
