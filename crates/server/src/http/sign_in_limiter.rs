//! Sign-in failures per client address: past a limit in a window, that address waits (429).
//! Accounts lock on their own as well (the domain's rule, kept in the database); this stops one
//! address from trying many accounts.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Failures an address may have in one window.
const MAX_FAILURES: u32 = 20;
const WINDOW: Duration = Duration::from_secs(10 * 60);
/// Past this many addresses, expired windows are dropped.
const PRUNE_AT: usize = 10_000;

#[derive(Debug, Default)]
pub struct SignInLimiter {
    windows: Mutex<HashMap<IpAddr, (Instant, u32)>>,
}

impl SignInLimiter {
    /// How long the address must wait, if it has used up its failures.
    pub fn wait(&self, address: IpAddr) -> Option<Duration> {
        let windows = self.windows.lock().unwrap_or_else(|e| e.into_inner());
        let (started, failures) = windows.get(&address)?;
        let ends = *started + WINDOW;
        let now = Instant::now();
        (*failures >= MAX_FAILURES && ends > now).then(|| ends - now)
    }

    pub fn record_failure(&self, address: IpAddr) {
        let mut windows = self.windows.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        if windows.len() >= PRUNE_AT {
            windows.retain(|_, (started, _)| *started + WINDOW > now);
        }
        let entry = windows.entry(address).or_insert((now, 0));
        if entry.0 + WINDOW <= now {
            *entry = (now, 0);
        }
        entry.1 += 1;
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
        for _ in 0..MAX_FAILURES - 1 {
            limiter.record_failure(address);
        }
        assert_eq!(limiter.wait(address), None);
        limiter.record_failure(address);
        let wait = limiter.wait(address).expect("a wait");
        assert!(wait <= WINDOW && wait > WINDOW - Duration::from_secs(5));
        assert_eq!(limiter.wait(other), None);
    }
}
