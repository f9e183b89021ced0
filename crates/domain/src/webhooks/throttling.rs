//! Per-endpoint throttling: an endpoint's `rate_limit_per_s`, how a request body sets or
//! clears it, and the send times the dispatcher's claims hand out.
//!
//! Deliveries to a throttled endpoint start at least `1/rate_limit_per_s` seconds apart, across
//! every process delivering from the database. A claim locks the endpoint's throttle row and
//! reserves a stretch of time for the messages it takes ([`Reservation`]): the first may start
//! at `first_start`, each one after at least `interval` after the one before, the last no later
//! than `last_start`; the throttle's next free time becomes `last_start + interval`. A message
//! the worker cannot start by `last_start` goes back to the queue as it was (no attempt), to be
//! claimed again in a later stretch.

use std::time::Duration;

use super::{WebhookEndpoint, WebhookMessage, WebhookRepositories};
use crate::kernel::body::{Check, Field};
use crate::kernel::error::{DomainError, FieldError};
use crate::kernel::ids::WebhookId;
use crate::kernel::time::Timestamp;

/// The highest `rate_limit_per_s`.
pub const MAX_RATE_LIMIT_PER_S: u32 = 10_000;

/// A given `rate_limit_per_s` (1..=[`MAX_RATE_LIMIT_PER_S`]), or 422 `out_of_range` on `path`.
pub fn check_rate_limit(path: &str, value: i64) -> Result<u32, FieldError> {
    u32::try_from(value)
        .ok()
        .filter(|rate| (1..=MAX_RATE_LIMIT_PER_S).contains(rate))
        .ok_or_else(|| {
            FieldError::new(
                path,
                "out_of_range",
                format!("{path} must be an integer between 1 and {MAX_RATE_LIMIT_PER_S}"),
            )
        })
}

/// The `rate_limit_per_s` of a create body: None when left out or null; a value that is not
/// an integer, or out of range, is a problem on its path.
pub fn read_rate_limit(check: &mut Check<'_>, given: Field<i64>) -> Option<u32> {
    let value = check.optional("rate_limit_per_s", given)?;
    let path = check.field("rate_limit_per_s");
    check.check(check_rate_limit(&path, value))
}

/// The `rate_limit_per_s` of an update body: None when left out (kept), `Some(None)` when null
/// (cleared), `Some(Some(rate))` when set; problems as on create.
pub fn read_rate_limit_change(check: &mut Check<'_>, given: Field<i64>) -> Option<Option<u32>> {
    match check.settable("rate_limit_per_s", given)? {
        None => Some(None),
        Some(value) => {
            let path = check.field("rate_limit_per_s");
            check.check(check_rate_limit(&path, value)).map(Some)
        }
    }
}

/// The least time between two starts at `rate_limit_per_s`, in microseconds, rounded up so
/// that the starts are never closer than `1/rate_limit_per_s` seconds.
pub fn interval_us(rate_limit_per_s: u32) -> i64 {
    let rate = i64::from(rate_limit_per_s.max(1));
    (1_000_000 + rate - 1) / rate
}

/// How much later than its nominal send time a stretch's last message may still start: the
/// slack a worker has for waking late, taken from the next stretch (a fifth of the interval,
/// from 0.2 to 10 ms).
pub fn reservation_slack_us(interval_us: i64) -> i64 {
    (interval_us / 5).clamp(200, 10_000)
}

/// A stretch of send times for some of one throttled endpoint's messages, handed out by a
/// claim (see the module's documentation).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reservation {
    /// The endpoint.
    pub endpoint_id: WebhookId,
    /// The earliest start of the first message.
    pub first_start: Timestamp,
    /// The latest start of any message of the stretch.
    pub last_start: Timestamp,
    /// The least time between two starts.
    pub interval: Duration,
    /// The messages claimed, in the order they are to be sent.
    pub messages: Vec<WebhookMessage>,
}

/// Sets or clears the endpoint's `rate_limit_per_s` in the caller's transaction, when it
/// changes; `endpoint` then shows the new limit.
pub fn apply_rate_limit(
    tx: &mut dyn WebhookRepositories,
    endpoint: &mut WebhookEndpoint,
    rate_limit_per_s: Option<u32>,
    now: Timestamp,
) -> Result<(), DomainError> {
    if endpoint.rate_limit_per_s == rate_limit_per_s {
        return Ok(());
    }
    tx.set_webhook_rate_limit(endpoint.id, rate_limit_per_s, now)?;
    endpoint.rate_limit_per_s = rate_limit_per_s;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::error::Problems;

    #[test]
    fn the_interval_never_lets_starts_come_closer_than_the_rate_allows() {
        assert_eq!(interval_us(1), 1_000_000);
        assert_eq!(interval_us(20), 50_000);
        assert_eq!(interval_us(3), 333_334);
        assert_eq!(interval_us(MAX_RATE_LIMIT_PER_S), 100);
        for rate in [1, 3, 7, 20, 333, 9_999, 10_000] {
            assert!(interval_us(rate) * i64::from(rate) >= 1_000_000, "{rate}");
        }
    }

    #[test]
    fn the_slack_stays_between_its_bounds() {
        assert_eq!(reservation_slack_us(100), 200);
        assert_eq!(reservation_slack_us(20_000), 4_000);
        assert_eq!(reservation_slack_us(50_000), 10_000);
        assert_eq!(reservation_slack_us(1_000_000), 10_000);
    }

    fn read(given: Field<i64>) -> (Option<u32>, Vec<(String, &'static str)>) {
        let mut problems = Problems::new();
        let mut check = Check::root(&mut problems);
        let mut nested = check.nested("webhook_subscription");
        let rate = read_rate_limit(&mut nested, given);
        let found = problems
            .into_result()
            .err()
            .map(|error| match error {
                DomainError::Invalid(problems) => problems
                    .into_iter()
                    .map(|problem| (problem.field.clone(), problem.code))
                    .collect(),
                _ => Vec::new(),
            })
            .unwrap_or_default();
        (rate, found)
    }

    #[test]
    fn a_rate_limit_is_an_integer_from_1_to_10000() {
        assert_eq!(read(Field::Given(20)), (Some(20), Vec::new()));
        assert_eq!(read(Field::Given(1)), (Some(1), Vec::new()));
        assert_eq!(read(Field::Given(10_000)), (Some(10_000), Vec::new()));
        assert_eq!(read(Field::Absent), (None, Vec::new()));
        assert_eq!(read(Field::Null), (None, Vec::new()));
        let path = "webhook_subscription.rate_limit_per_s".to_string();
        for wrong in [0, -1, 10_001, i64::MAX] {
            assert_eq!(
                read(Field::Given(wrong)),
                (None, vec![(path.clone(), "out_of_range")]),
                "{wrong}"
            );
        }
    }

    #[test]
    fn an_update_keeps_clears_or_sets_the_rate_limit() {
        let change = |given| {
            let mut problems = Problems::new();
            let mut check = Check::root(&mut problems);
            let change = read_rate_limit_change(&mut check, given);
            (change, problems.into_result().is_ok())
        };
        assert_eq!(change(Field::Absent), (None, true));
        assert_eq!(change(Field::Null), (Some(None), true));
        assert_eq!(change(Field::Given(5)), (Some(Some(5)), true));
        assert_eq!(change(Field::Given(0)), (None, false));
    }
}
