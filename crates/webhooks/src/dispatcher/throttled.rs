//! Deliveries to throttled endpoints (those with a `rate_limit_per_s`).
//!
//! A worker claims a stretch of send times per endpoint ([`Reservation`]) and sends its
//! messages one after the other: the first at the stretch's start, each next one at least one
//! interval after the previous one started, none after the stretch's latest start. A message it
//! cannot start in time (the receiver was slow, the worker woke late) goes back to the queue as
//! it was: no attempt, no failure, nothing about the endpoint's health; a later claim gives it a
//! new time. The stretches the claims hand out never overlap, across every process sharing the
//! database, so starts stay an interval apart everywhere.
//!
//! Workers only look for throttled messages while some endpoint is throttled ([`ThrottleWatch`],
//! one look-up a second for the whole process), so the everyday claim costs what it did.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use mercer_domain::kernel::ids::MessageId;
use mercer_domain::kernel::time::Clock;
use mercer_domain::ports::Database;
use mercer_domain::webhooks::{Reservation, WebhookMessage};
use mercer_domain::{DomainError, Timestamp};

use super::{Batch, BatchReport, DispatcherConfig, Sender, read_targets};

/// How long a stretch of send times one claim hands out for an endpoint lasts at most: about
/// how long a worker is held sending one claim's throttled messages.
pub const THROTTLE_WINDOW: Duration = Duration::from_millis(500);
/// How often a worker looks for throttled messages while its last look found none.
const THROTTLE_POLL: Duration = Duration::from_millis(50);
/// How often a process checks whether any endpoint is throttled.
const WATCH_EVERY: Duration = Duration::from_secs(1);

fn later(at: Timestamp, by: Duration) -> Timestamp {
    Timestamp::from_micros(
        at.as_micros()
            .saturating_add(i64::try_from(by.as_micros()).unwrap_or(i64::MAX)),
    )
}

/// Whether any endpoint is throttled, as a process's workers know it: looked up, with the
/// throttles' upkeep, at most once every [`WATCH_EVERY`].
#[derive(Debug, Default)]
pub struct ThrottleWatch {
    /// When it was last looked up, and what was found.
    known: Mutex<Option<(Instant, bool)>>,
}

impl ThrottleWatch {
    pub fn new() -> ThrottleWatch {
        ThrottleWatch::default()
    }

    /// Whether any endpoint is throttled (as of at most [`WATCH_EVERY`] ago). One worker looks
    /// it up while the others go on with what was known.
    pub fn in_use(&self, db: &impl Database, clock: &dyn Clock) -> bool {
        let known = {
            let Ok(mut known) = self.known.lock() else {
                return true;
            };
            match *known {
                Some((at, in_use)) if at.elapsed() < WATCH_EVERY => return in_use,
                // This worker looks it up; meanwhile the others go on with the old answer.
                Some((_, in_use)) => {
                    *known = Some((Instant::now(), in_use));
                    Some(in_use)
                }
                None => None,
            }
        };
        let in_use = match db.write(|tx| Ok(tx.webhook_throttle_upkeep(clock.now())?)) {
            Ok(in_use) => in_use,
            Err(error) => {
                log::error!(target: "mercer::webhooks", "looking for throttled endpoints failed: {error}");
                // Throttled messages keep going rather than waiting for the database's answer.
                known.unwrap_or(true)
            }
        };
        if let Ok(mut known) = self.known.lock() {
            *known = Some((Instant::now(), in_use));
        }
        in_use
    }
}

/// One worker's turns at throttled messages: at once again after a turn that found some, after
/// [`THROTTLE_POLL`] otherwise.
#[derive(Debug)]
pub(super) struct ThrottledTurns {
    next: Instant,
    in_use: bool,
}

impl ThrottledTurns {
    pub(super) fn new() -> ThrottledTurns {
        ThrottledTurns {
            next: Instant::now(),
            in_use: false,
        }
    }

    /// Takes a turn if one is due and some endpoint is throttled; whether it sent anything.
    pub(super) fn take(
        &mut self,
        watch: &ThrottleWatch,
        db: &impl Database,
        sender: &Sender,
        config: &DispatcherConfig,
        clock: &dyn Clock,
    ) -> bool {
        if Instant::now() < self.next {
            return false;
        }
        self.in_use = watch.in_use(db, clock);
        if !self.in_use {
            return false;
        }
        let claimed = match dispatch_throttled_batch(db, sender, config, clock) {
            Ok(report) => report.claimed,
            Err(error) => {
                log::error!(target: "mercer::webhooks", "dispatching throttled messages failed: {error}");
                0
            }
        };
        self.next = match claimed {
            0 => Instant::now() + THROTTLE_POLL,
            _ => Instant::now(),
        };
        claimed > 0
    }

    /// How long an idle worker may wait before its next turn, at most `idle`.
    pub(super) fn idle_wait(&self, idle: Duration) -> Duration {
        match self.in_use {
            true => idle.min(self.next.saturating_duration_since(Instant::now())),
            false => idle,
        }
    }
}

/// Claims stretches of send times for throttled endpoints' due messages and sends them in
/// time (see the module's documentation); records the attempts as [`super::dispatch_batch`]
/// does. The report's `claimed` counts the messages sent or ended, not those put back.
pub fn dispatch_throttled_batch(
    db: &impl Database,
    sender: &Sender,
    config: &DispatcherConfig,
    clock: &dyn Clock,
) -> Result<BatchReport, DomainError> {
    let now = clock.now();
    let lease_until = later(now, config.lease);
    // A throttle free within a poll is taken now; one free later is left to a later poll, which
    // comes in time (a worker holds a stretch no longer than it needs).
    let ready_by = later(now, THROTTLE_POLL);
    let reservations: Vec<Reservation> = db.write(|tx| {
        Ok(tx.claim_throttled_webhook_messages(
            now,
            config.batch,
            ready_by,
            THROTTLE_WINDOW,
            lease_until,
        )?)
    })?;
    if reservations.is_empty() {
        return Ok(BatchReport::default());
    }
    let claimed: Vec<WebhookMessage> = reservations
        .iter()
        .flat_map(|reservation| reservation.messages.iter().cloned())
        .collect();
    let targets = read_targets(db, &claimed)?;
    let mut stretches: Vec<Stretch> = reservations
        .into_iter()
        .map(|reservation| Stretch {
            last_start: reservation.last_start,
            interval: reservation.interval,
            next_start: reservation.first_start,
            messages: reservation.messages.into(),
        })
        .collect();
    let mut batch = Batch::default();
    let mut put_back: Vec<MessageId> = Vec::new();
    // The stretch whose next message may start soonest, until every one is done. Sent from
    // this thread, one after the other: the thread that decides a start sends the request
    // right away (no other thread's waking comes between), on a connection it keeps.
    while let Some(stretch) = stretches
        .iter_mut()
        .filter(|stretch| !stretch.messages.is_empty())
        .min_by_key(|stretch| stretch.next_start)
    {
        let started = wait_until(stretch.next_start, clock);
        if started > stretch.last_start {
            put_back.extend(stretch.messages.drain(..).map(|message| message.id));
            continue;
        }
        if let Some(message) = stretch.messages.pop_front() {
            batch.report.claimed += 1;
            // Recorded as starting when the schedule let it, the time the next one keeps its
            // distance from.
            batch.deliver(message, &targets, sender, config, &StartedAt(started));
        }
        stretch.next_start = later(started, stretch.interval);
    }
    if !put_back.is_empty() {
        log::debug!(target: "mercer::webhooks", "{} throttled messages missed their send times and wait for new ones", put_back.len());
        db.write(|tx| Ok(tx.release_webhook_messages(&put_back, clock.now())?))?;
    }
    batch.record(db, clock.now())?;
    Ok(batch.report)
}

/// One endpoint's stretch being sent.
struct Stretch {
    last_start: Timestamp,
    interval: Duration,
    /// When the next message may start.
    next_start: Timestamp,
    messages: VecDeque<WebhookMessage>,
}

/// Mercer's time as one throttled delivery sees it: its start.
struct StartedAt(Timestamp);

impl Clock for StartedAt {
    fn now(&self) -> Timestamp {
        self.0
    }
}

/// Sleeps until `at` by `clock` and answers the time then. A clock that does not move with the
/// system's (a test's) is slept for once.
fn wait_until(at: Timestamp, clock: &dyn Clock) -> Timestamp {
    for _ in 0..3 {
        let now = clock.now();
        let ahead = at.as_micros() - now.as_micros();
        if ahead <= 0 {
            return now;
        }
        std::thread::sleep(Duration::from_micros(ahead.unsigned_abs()));
    }
    clock.now().max(at)
}
