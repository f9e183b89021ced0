//! Request budgets (rate limits): a token bucket per budget, the budgets a shop sets, and the
//! port through which processes on one database share a bucket.
//!
//! A budget of `N` per second is a bucket that holds at most `2 × N` tokens (the burst) and
//! refills at `N` tokens a second; a request takes one token or is refused. A refusal says when
//! a token will be back (`Retry-After`, whole seconds, at least 1); every answer under a budget
//! says the burst (`X-RateLimit-Limit`), the whole tokens left (`X-RateLimit-Remaining`) and
//! the seconds until the bucket is full again (`X-RateLimit-Reset`).
//!
//! Three kinds of budget: one per API token (every token-authenticated route), and one per
//! shop for its connector events and one for its storefront and checkout routes. Each is off
//! unless the shop sets it or the server gives a default for every shop.

use std::time::Duration;

use crate::kernel::error::StorageError;

/// The highest budget, in requests per second.
pub const MAX_RATE_LIMIT_PER_S: u32 = 1_000_000;

/// Which budget a request is counted against.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BudgetKind {
    /// One API token's requests.
    Token,
    /// A shop's connector events.
    ConnectorEvents,
    /// A shop's storefront and checkout routes.
    Storefront,
}

impl BudgetKind {
    /// The name in metrics and documents.
    pub fn name(self) -> &'static str {
        match self {
            BudgetKind::Token => "token",
            BudgetKind::ConnectorEvents => "connector_events",
            BudgetKind::Storefront => "storefront",
        }
    }
}

/// The budgets a shop sets, each in requests per second; None leaves the server's default
/// (`serve --rate-limit-per-s` and its siblings), which may be off too.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RequestBudgets {
    /// Per API token of the shop.
    pub per_token: Option<u32>,
    /// The shop's connector events.
    pub connector_events: Option<u32>,
    /// The shop's storefront and checkout routes.
    pub storefront: Option<u32>,
}

impl RequestBudgets {
    /// The budget of `kind`.
    pub fn of(&self, kind: BudgetKind) -> Option<u32> {
        match kind {
            BudgetKind::Token => self.per_token,
            BudgetKind::ConnectorEvents => self.connector_events,
            BudgetKind::Storefront => self.storefront,
        }
    }

    /// These budgets, each falling back to `defaults`' where unset.
    pub fn or(&self, defaults: &RequestBudgets) -> RequestBudgets {
        RequestBudgets {
            per_token: self.per_token.or(defaults.per_token),
            connector_events: self.connector_events.or(defaults.connector_events),
            storefront: self.storefront.or(defaults.storefront),
        }
    }

    /// Whether no budget is set.
    pub fn is_empty(&self) -> bool {
        *self == RequestBudgets::default()
    }
}

/// A change of one budget by `mercer shop update`: set to a rate, or cleared (back to the
/// server's default).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BudgetChange {
    /// This many requests per second.
    Set(u32),
    /// Back to the server's default.
    Clear,
}

impl BudgetChange {
    /// `none` (clear) or a whole number of requests per second, 1 to [`MAX_RATE_LIMIT_PER_S`].
    pub fn parse(text: &str) -> Result<BudgetChange, String> {
        let text = text.trim();
        if text.eq_ignore_ascii_case("none") {
            return Ok(BudgetChange::Clear);
        }
        text.parse::<u32>()
            .ok()
            .filter(|rate| (1..=MAX_RATE_LIMIT_PER_S).contains(rate))
            .map(BudgetChange::Set)
            .ok_or_else(|| {
                format!("{text:?}: give a whole number from 1 to {MAX_RATE_LIMIT_PER_S}, or none")
            })
    }

    /// The budget after the change.
    pub fn applied(self) -> Option<u32> {
        match self {
            BudgetChange::Set(rate) => Some(rate),
            BudgetChange::Clear => None,
        }
    }
}

/// The burst of a budget of `per_s`: twice the rate.
pub fn burst_of(per_s: u32) -> u32 {
    per_s.saturating_mul(2)
}

/// What a bucket answered one request, and what the answer's headers say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decision {
    /// Whether the request may go on.
    pub allowed: bool,
    /// The burst (`X-RateLimit-Limit`).
    pub limit: u32,
    /// Whole tokens left (`X-RateLimit-Remaining`).
    pub remaining: u32,
    /// Seconds until the bucket is full again, rounded up (`X-RateLimit-Reset`).
    pub reset_s: u64,
    /// When refused: seconds until a token is back, rounded up and at least 1 (`Retry-After`).
    pub retry_after_s: Option<u64>,
}

/// Whole seconds for `seconds`, rounded up.
fn ceil_seconds(seconds: f64) -> u64 {
    if seconds <= 0.0 {
        0
    } else {
        seconds.ceil() as u64
    }
}

/// A token bucket. Time is a reading of a monotonic clock (the time since any fixed instant),
/// given to each call, so the arithmetic is the same under test and in the server.
#[derive(Debug, Clone, PartialEq)]
pub struct TokenBucket {
    per_s: u32,
    tokens: f64,
    at: Duration,
}

impl TokenBucket {
    /// A full bucket of a budget of `per_s` (at least 1) requests per second.
    pub fn full(per_s: u32, now: Duration) -> TokenBucket {
        let per_s = per_s.max(1);
        TokenBucket {
            per_s,
            tokens: f64::from(burst_of(per_s)),
            at: now,
        }
    }

    /// A bucket of a budget of `per_s` holding `tokens` (up to the burst) at `now`: a shared
    /// bucket as a lease left it.
    pub fn with_tokens(per_s: u32, tokens: f64, now: Duration) -> TokenBucket {
        let mut bucket = TokenBucket::full(per_s, now);
        bucket.tokens = tokens.clamp(0.0, bucket.burst());
        bucket
    }

    /// The budget, requests per second.
    pub fn per_s(&self) -> u32 {
        self.per_s
    }

    fn burst(&self) -> f64 {
        f64::from(burst_of(self.per_s))
    }

    /// Tokens there at `now` (a reading earlier than the last one adds nothing).
    pub fn tokens_at(&self, now: Duration) -> f64 {
        let elapsed = now.saturating_sub(self.at).as_secs_f64();
        (self.tokens + elapsed * f64::from(self.per_s)).min(self.burst())
    }

    fn refill(&mut self, now: Duration) {
        self.tokens = self.tokens_at(now);
        self.at = self.at.max(now);
    }

    /// A new rate: the tokens there stay, up to the new burst.
    pub fn set_rate(&mut self, per_s: u32, now: Duration) {
        self.refill(now);
        self.per_s = per_s.max(1);
        self.tokens = self.tokens.min(self.burst());
    }

    /// Seconds until `wanted` tokens are there, from `tokens`.
    fn seconds_until(&self, tokens: f64, wanted: f64) -> f64 {
        (wanted - tokens).max(0.0) / f64::from(self.per_s)
    }

    /// Takes one token at `now`, or refuses.
    pub fn take(&mut self, now: Duration) -> Decision {
        self.refill(now);
        let allowed = self.tokens >= 1.0;
        if allowed {
            self.tokens -= 1.0;
        }
        self.decision(allowed)
    }

    /// Takes up to `wanted` whole tokens at `now`; how many it took. A process sharing a
    /// bucket with others takes a slice of it at once this way ([`SharedBudgets::lease`]).
    pub fn take_up_to(&mut self, wanted: u32, now: Duration) -> u32 {
        self.refill(now);
        let taken = self.tokens.floor().min(f64::from(wanted)).max(0.0);
        self.tokens -= taken;
        taken as u32
    }

    /// The answer for a request just allowed or refused, from the bucket as it is now.
    pub fn decision(&self, allowed: bool) -> Decision {
        let retry = self.seconds_until(self.tokens, 1.0);
        Decision {
            allowed,
            limit: burst_of(self.per_s),
            remaining: self.tokens.max(0.0).floor() as u32,
            reset_s: ceil_seconds(self.seconds_until(self.tokens, self.burst())),
            retry_after_s: (!allowed).then(|| ceil_seconds(retry).max(1)),
        }
    }

    /// The answer for a refusal while the bucket is empty and `wait` remains before the next
    /// try (a process sharing the bucket waits for its next slice).
    pub fn refusal_after(&self, wait: Duration) -> Decision {
        Decision {
            retry_after_s: Some(ceil_seconds(wait.as_secs_f64()).max(1)),
            ..self.decision(false)
        }
    }
}

/// A slice of a shared bucket taken by one process.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Lease {
    /// Whole tokens taken.
    pub granted: u32,
    /// Tokens left in the shared bucket after the slice was taken.
    pub left: f64,
}

/// Buckets shared by every process on one database: a process takes a slice of a budget at a
/// time and spends it locally, so most requests never ask the database.
pub trait SharedBudgets: Send + Sync {
    /// Takes up to `wanted` whole tokens from the shared bucket `key` of a budget of `per_s`
    /// (a new bucket starts full), as [`TokenBucket::take_up_to`] does, on the database's
    /// clock.
    fn lease(&self, key: &str, per_s: u32, wanted: u32) -> Result<Lease, StorageError>;

    /// Drops the buckets no lease touched for `idle` (those of deleted shops and revoked
    /// tokens among them): a bucket idle for longer than its refill time is full, as a new one
    /// starts. Answers how many were dropped.
    fn forget_idle(&self, idle: Duration) -> Result<usize, StorageError>;
}

/// The slice a process takes of a shared budget of `per_s` at once: a tenth of a second's
/// worth, at least one token. The slices the processes hold are the tolerance of sharing: a
/// slice a process has not spent is lost to the others for at most [`LEASE_LIFETIME`].
pub fn lease_size(per_s: u32) -> u32 {
    per_s.div_ceil(10).max(1)
}

/// How long a process may spend a slice it took: past it, what is left of the slice is
/// dropped, so that the tokens spent in any stretch of time stay within the budget plus the
/// slices in flight.
pub const LEASE_LIFETIME: Duration = Duration::from_secs(1);

#[cfg(test)]
mod tests {
    use super::*;

    fn s(seconds: f64) -> Duration {
        Duration::from_secs_f64(seconds)
    }

    #[test]
    fn a_full_bucket_allows_the_burst_then_refuses() {
        let mut bucket = TokenBucket::full(5, s(0.0));
        for taken in 1..=10 {
            let decision = bucket.take(s(0.0));
            assert!(decision.allowed, "request {taken} of the burst of 10");
            assert_eq!(decision.limit, 10);
            assert_eq!(decision.remaining, 10 - taken);
        }
        let refused = bucket.take(s(0.0));
        assert!(!refused.allowed);
        assert_eq!(refused.remaining, 0);
        // One token takes 0.2 s at 5/s: Retry-After is rounded up to a whole second.
        assert_eq!(refused.retry_after_s, Some(1));
        // Full again in 10 tokens / 5 per s = 2 s.
        assert_eq!(refused.reset_s, 2);
    }

    #[test]
    fn the_bucket_refills_at_the_rate_and_never_past_the_burst() {
        let mut bucket = TokenBucket::full(4, s(0.0));
        for _ in 0..8 {
            assert!(bucket.take(s(0.0)).allowed);
        }
        assert!(!bucket.take(s(0.0)).allowed);
        // 0.5 s at 4/s: two tokens.
        assert!(bucket.take(s(0.5)).allowed);
        assert!(bucket.take(s(0.5)).allowed);
        assert!(!bucket.take(s(0.5)).allowed);
        // An hour later the bucket holds the burst, not more.
        assert_eq!(bucket.tokens_at(s(3600.0)), 8.0);
        let after = bucket.take(s(3600.0));
        assert_eq!(after.remaining, 7);
        assert_eq!(after.reset_s, 1, "one token at 4/s is 0.25 s, rounded up");
    }

    #[test]
    fn retry_after_is_the_wait_for_one_token_rounded_up() {
        // 1 request a second, burst 2: empty, the next token is a whole second away.
        let mut bucket = TokenBucket::full(1, s(0.0));
        assert!(bucket.take(s(0.0)).allowed);
        assert!(bucket.take(s(0.0)).allowed);
        assert_eq!(bucket.take(s(0.0)).retry_after_s, Some(1));
        // 0.3 s later, 0.7 s remain: still 1.
        assert_eq!(bucket.take(s(0.3)).retry_after_s, Some(1));
        // A slower budget is impossible (at least 1/s), but a long wait rounds up too.
        let waiting = bucket.refusal_after(s(2.2));
        assert_eq!(waiting.retry_after_s, Some(3));
        assert!(!waiting.allowed);
    }

    #[test]
    fn a_clock_reading_from_the_past_adds_nothing() {
        let mut bucket = TokenBucket::full(1, s(10.0));
        bucket.take(s(10.0));
        bucket.take(s(10.0));
        assert!(
            !bucket.take(s(5.0)).allowed,
            "an earlier reading refills nothing"
        );
        assert!(bucket.take(s(11.0)).allowed);
    }

    #[test]
    fn take_up_to_takes_whole_tokens_only() {
        let mut bucket = TokenBucket::full(10, s(0.0));
        assert_eq!(bucket.take_up_to(15, s(0.0)), 15);
        assert_eq!(bucket.take_up_to(15, s(0.0)), 5);
        assert_eq!(bucket.take_up_to(15, s(0.0)), 0);
        // 0.25 s at 10/s: 2.5 tokens, two of them whole.
        assert_eq!(bucket.take_up_to(15, s(0.25)), 2);
        assert!((bucket.tokens_at(s(0.25)) - 0.5).abs() < 1e-9);
    }

    #[test]
    fn a_new_rate_keeps_the_tokens_up_to_the_new_burst() {
        let mut bucket = TokenBucket::full(100, s(0.0));
        bucket.set_rate(2, s(0.0));
        assert_eq!(bucket.decision(true).remaining, 4);
        bucket.set_rate(50, s(0.0));
        assert_eq!(
            bucket.decision(true).remaining,
            4,
            "a higher rate adds no tokens at once"
        );
    }

    #[test]
    fn budget_changes_parse_a_rate_or_none() {
        assert_eq!(BudgetChange::parse("25"), Ok(BudgetChange::Set(25)));
        assert_eq!(BudgetChange::parse("None"), Ok(BudgetChange::Clear));
        for bad in ["0", "-1", "1.5", "", "lots", "1000001"] {
            assert!(BudgetChange::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_shops_budgets_fall_back_to_the_defaults() {
        let shop = RequestBudgets {
            per_token: Some(5),
            ..RequestBudgets::default()
        };
        let defaults = RequestBudgets {
            per_token: Some(50),
            storefront: Some(20),
            connector_events: None,
        };
        let effective = shop.or(&defaults);
        assert_eq!(effective.of(BudgetKind::Token), Some(5));
        assert_eq!(effective.of(BudgetKind::Storefront), Some(20));
        assert_eq!(effective.of(BudgetKind::ConnectorEvents), None);
        assert!(RequestBudgets::default().is_empty());
        assert_eq!(lease_size(5), 1);
        assert_eq!(lease_size(1000), 100);
    }
}
