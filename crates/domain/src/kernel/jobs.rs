//! Background work as typed jobs on one durable queue (docs/jobs.md). A job is a kind, a JSON
//! payload and a time to run at; a worker claims it with a lease, runs it, and then deletes it
//! (done), puts it back with a later time (retry, or a recurring job's next run), or marks it
//! failed for an operator. Every feature's background work uses this queue; the payload types
//! live with their feature (`platform::sync::SyncJob`, `platform::outbox::OutboxJob`).

use crate::kernel::ids::{JobId, ShopId};
use std::cell::RefCell;
use std::sync::Arc;

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::kernel::error::{DomainError, StorageError, StoreResult};
use crate::kernel::time::Timestamp;

/// Where a job stands in the queue. A job that is done is deleted, so it has no state.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, strum::IntoStaticStr, strum::EnumString,
)]
#[strum(serialize_all = "snake_case")]
#[serde(rename_all = "lowercase")]
pub enum JobState {
    /// Waiting for its `run_at`.
    Queued,
    /// Claimed by a worker until its lease ends; due again if the lease runs out.
    Running,
    /// Gave up: its last attempt failed, or it failed for good. `mercer jobs retry` requeues it.
    Failed,
    /// Cancelled by an operator.
    Cancelled,
}

impl JobState {
    /// Every state.
    pub const ALL: [JobState; 4] = [
        JobState::Queued,
        JobState::Running,
        JobState::Failed,
        JobState::Cancelled,
    ];

    /// The state's name as stored and shown (`queued`, `running`, `failed`, `cancelled`).
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    /// The state named `text`; `None` for an unknown name.
    pub fn parse(text: &str) -> Option<Self> {
        text.parse().ok()
    }
}

/// A job as it is stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Job {
    /// The job's id in the queue.
    pub id: JobId,
    /// The job's kind, [`JobPayload::KIND`] of its payload type (`feature.name`).
    pub kind: String,
    /// The payload as JSON text; read it with [`Job::payload`].
    pub payload: String,
    /// The key that makes the work one job at a time, when it has one
    /// ([`JobPayload::unique_key`]).
    pub unique_key: Option<String>,
    /// Where the job stands.
    pub state: JobState,
    /// When a queued job is due; while it runs, when its lease ends.
    pub run_at: Timestamp,
    /// Attempts started, the running one included.
    pub attempts: i64,
    /// Attempts allowed before the job fails ([`JobPayload::MAX_ATTEMPTS`]).
    pub max_attempts: i64,
    /// The worker that holds the job while it runs; `None` otherwise.
    pub locked_by: Option<String>,
    /// Why the last attempt failed, when it did.
    pub last_error: Option<String>,
    /// When the job was first enqueued.
    pub created_at: Timestamp,
    /// When the job last changed.
    pub updated_at: Timestamp,
    /// The shop it works for, when it works for one; None for process-wide jobs.
    pub shop_id: Option<ShopId>,
    /// The id of the request whose handling enqueued it (its `X-Request-Id`), so that its log
    /// lines can be traced back to that request; None for a job enqueued outside a request
    /// (the scheduler, a sweep, the command line).
    pub request_id: Option<String>,
    /// The trace context it was enqueued in (a W3C `traceparent` value), which its run
    /// continues; None when traces are not exported or it was enqueued outside a traced span.
    /// Read when a job is claimed (listings leave it out).
    pub trace_parent: Option<String>,
}

impl Job {
    /// The payload as its kind's type. A payload that does not read is a permanent failure.
    pub fn payload<J: JobPayload>(&self) -> Result<J, JobFailure> {
        serde_json::from_str(&self.payload).map_err(|error| {
            JobFailure::permanent(format!(
                "the {} job's payload does not read: {error}",
                self.kind
            ))
        })
    }

    /// Whether a failure now is the last one allowed.
    pub fn is_last_attempt(&self) -> bool {
        self.attempts >= self.max_attempts
    }
}

/// A job to enqueue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewJob {
    /// The job's kind, [`JobPayload::KIND`].
    pub kind: &'static str,
    /// The payload as JSON text.
    pub payload: String,
    /// The key that coalesces it with an unfinished job, when it has one.
    pub unique_key: Option<String>,
    /// When the job is due.
    pub run_at: Timestamp,
    /// Attempts allowed before the job fails.
    pub max_attempts: i64,
    /// The shop it works for, when it works for one (the console lists a shop's jobs).
    pub shop_id: Option<ShopId>,
    /// The id of the request whose handling enqueues it, when a request's does. A job that
    /// coalesces into an unfinished one keeps that job's.
    pub request_id: Option<String>,
    /// The trace context it is enqueued in ([`current_trace_parent`]).
    pub trace_parent: Option<String>,
}

/// A kind of job: the payload it carries and its rules.
pub trait JobPayload: Serialize + DeserializeOwned {
    /// The kind's name in the table, `feature.name`. Never rename one that may be queued.
    const KIND: &'static str;
    /// Attempts before the job fails (a crash during an attempt counts as one).
    const MAX_ATTEMPTS: i64 = 10;
    /// Jobs of this kind one worker may claim in one transaction and run side by side, each
    /// on a thread of its own: for short jobs that mostly wait (on a connector, on a commit),
    /// so that a burst of them is not placed one at a time per worker. 1: one at a time.
    const BATCH: usize = 1;

    /// Names the work when it must be done by one job at a time: while a job with the key is
    /// queued or running, enqueueing it again coalesces into that job (see [`Enqueued`]).
    fn unique_key(&self) -> Option<String> {
        None
    }
}

/// What enqueueing did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Enqueued {
    /// A new job, with its id.
    New(JobId),
    /// A queued job with the key now runs no later than asked; a running one runs once more
    /// when it ends.
    Coalesced(JobId),
}

impl Enqueued {
    /// The id of the job that will do the work, new or coalesced.
    pub fn id(self) -> JobId {
        match self {
            Enqueued::New(id) | Enqueued::Coalesced(id) => id,
        }
    }
}

/// What one run of a job came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobOutcome {
    /// The work is done: the job is deleted (or runs again if it was enqueued meanwhile).
    Done,
    /// A recurring job: it runs again at this time, attempts counted from zero.
    RunAgainAt(Timestamp),
    /// The job stopped early because the worker is stopping or lost its lease: it goes back
    /// to the queue, due now, and this attempt does not count.
    Interrupted,
}

/// A failed run: retried with backoff unless permanent or the last attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobFailure {
    /// What went wrong; kept as the job's `last_error`.
    pub message: String,
    /// Whether another attempt would fail the same way, so the job fails now.
    pub permanent: bool,
}

impl JobFailure {
    /// A failure worth another attempt.
    pub fn retry(message: impl Into<String>) -> Self {
        JobFailure {
            message: message.into(),
            permanent: false,
        }
    }

    /// A failure another attempt would not mend: the job fails now.
    pub fn permanent(message: impl Into<String>) -> Self {
        JobFailure {
            message: message.into(),
            permanent: true,
        }
    }
}

impl From<DomainError> for JobFailure {
    /// Storage errors and remote failures are worth another attempt; a job whose input is
    /// wrong is not.
    fn from(error: DomainError) -> Self {
        let permanent = !matches!(error, DomainError::Storage(_) | DomainError::Remote { .. });
        JobFailure {
            message: error.to_string(),
            permanent,
        }
    }
}

impl From<StorageError> for JobFailure {
    fn from(error: StorageError) -> Self {
        JobFailure::retry(error.to_string())
    }
}

/// Seconds before the attempt after the n-th failed one: 5 s doubling, at most an hour.
pub(crate) fn backoff_seconds(attempts: i64) -> i64 {
    let doublings = attempts.saturating_sub(1).clamp(0, 20) as u32;
    (5_i64 << doublings).min(3600)
}

/// What becomes of a job whose attempt failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AfterFailure {
    /// Queued again for another attempt at this time.
    RetryAt(Timestamp),
    /// Failed for good: the failure was permanent or the attempt was the last.
    Fail,
}

/// What becomes of `job` after `failure` at `now`: it fails when the failure is permanent or the
/// attempt was its last, otherwise it is retried after a backoff (5 s doubling, at most an hour).
pub fn after_failure(job: &Job, failure: &JobFailure, now: Timestamp) -> AfterFailure {
    if failure.permanent || job.is_last_attempt() {
        AfterFailure::Fail
    } else {
        AfterFailure::RetryAt(now.plus_seconds(backoff_seconds(job.attempts)))
    }
}

/// How a running job learns that it should stop early: its process is stopping, or its lease
/// was lost (it ran out, or an operator cancelled the job). A long job looks between steps
/// and answers [`JobOutcome::Interrupted`].
///
/// A runner's control also lets the job end itself in its own unit of work
/// ([`JobControl::complete_in`]): the work's outcome and the job's completion then commit
/// together, one commit less than the runner's completion after it, and no crash can fall
/// between the two.
pub trait JobControl {
    /// Whether the job should stop now and answer [`JobOutcome::Interrupted`].
    fn should_stop(&self) -> bool;

    /// Which run of its job this is: 1 for the first claim, more after a crash, a lost lease
    /// or a failed attempt. None outside a runner (a test running a job to its end), which a
    /// job takes as "maybe not the first".
    fn attempt(&self) -> Option<i64> {
        None
    }

    /// Completes the job (as [`JobOutcome::Done`] would) in `tx`, the job's own transaction,
    /// so that the runner writes no completion after the handler answers `Done`. The
    /// completion commits or rolls back with `tx`; a handler that calls this and then fails
    /// rolls it back with its work. Outside a runner it does nothing.
    fn complete_in(&self, tx: &mut dyn JobRepository, now: Timestamp) -> StoreResult<()> {
        let _ = (tx, now);
        Ok(())
    }
}

/// A control that never stops: for running a job to its end (tests).
pub struct RunToEnd;

impl JobControl for RunToEnd {
    fn should_stop(&self) -> bool {
        false
    }
}

/// Which of a shop's jobs a list shows: every one when both are None.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JobFilter {
    /// Only jobs in this state.
    pub state: Option<JobState>,
    /// Only jobs of this kind.
    pub kind: Option<String>,
}

/// Jobs of one kind in one state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct JobCount {
    /// The jobs' kind.
    pub kind: String,
    /// The jobs' state.
    pub state: JobState,
    /// How many jobs of the kind are in the state.
    pub count: i64,
}

/// The storage of the jobs queue. Every change to a claimed job names the worker that holds
/// it, and does nothing (false) when the worker no longer does: its lease ran out and another
/// worker took the job, or an operator cancelled it.
pub trait JobRepository {
    /// Inserts a job, or coalesces it into the unfinished job with its unique key.
    fn enqueue_job(&mut self, job: &NewJob, now: Timestamp) -> StoreResult<Enqueued>;
    /// [`Self::enqueue_job`] for each of `jobs`, answered in their order; a store may insert
    /// them in one statement.
    fn enqueue_jobs(&mut self, jobs: &[NewJob], now: Timestamp) -> StoreResult<Vec<Enqueued>> {
        jobs.iter().map(|job| self.enqueue_job(job, now)).collect()
    }
    /// Claims up to `limit` due jobs of `kinds` (queued, or running with an ended lease) for
    /// `worker` until `lease_until`, counting an attempt. A job whose ended lease was its
    /// last attempt is failed instead. PostgreSQL: `FOR UPDATE SKIP LOCKED`.
    fn claim_jobs(
        &mut self,
        kinds: &[&str],
        worker: &str,
        now: Timestamp,
        lease_until: Timestamp,
        limit: usize,
    ) -> StoreResult<Vec<Job>>;
    /// Whether a job of `kinds` is due: a read, so idle workers look without taking SQLite's
    /// write lock.
    fn has_due_jobs(&mut self, kinds: &[&str], now: Timestamp) -> StoreResult<bool>;
    /// Extends the leases `worker` still holds among `ids`; returns those.
    fn renew_job_leases(
        &mut self,
        ids: &[JobId],
        worker: &str,
        lease_until: Timestamp,
        now: Timestamp,
    ) -> StoreResult<Vec<JobId>>;
    /// The run succeeded: deletes the job, or queues it again at `again_at` (a recurring job)
    /// or when it was enqueued again meanwhile, whichever is sooner, with attempts from zero.
    fn complete_job(
        &mut self,
        id: JobId,
        worker: &str,
        again_at: Option<Timestamp>,
        now: Timestamp,
    ) -> StoreResult<bool>;
    /// The run failed and is tried again at `run_at`.
    fn retry_job(
        &mut self,
        id: JobId,
        worker: &str,
        run_at: Timestamp,
        error: &str,
        now: Timestamp,
    ) -> StoreResult<bool>;
    /// The run failed for good.
    fn fail_job(
        &mut self,
        id: JobId,
        worker: &str,
        error: &str,
        now: Timestamp,
    ) -> StoreResult<bool>;
    /// The run stopped early: queued again, due now, the attempt not counted.
    fn release_job(&mut self, id: JobId, worker: &str, now: Timestamp) -> StoreResult<bool>;
    /// The job with `id`, when there is one (a done job is deleted).
    fn job(&mut self, id: JobId) -> StoreResult<Option<Job>>;
    /// Jobs oldest first, of one state or all.
    fn list_jobs(&mut self, state: Option<JobState>, limit: usize) -> StoreResult<Vec<Job>>;
    /// The shop's jobs that `filter` keeps, newest first, older than the job `before`.
    fn shop_jobs(
        &mut self,
        shop_id: ShopId,
        filter: &JobFilter,
        before: Option<JobId>,
        limit: usize,
    ) -> StoreResult<Vec<Job>>;
    /// How many jobs there are of each kind in each state.
    fn count_jobs(&mut self) -> StoreResult<Vec<JobCount>>;
    /// How many of the shop's jobs there are of each kind in each state.
    fn count_shop_jobs(&mut self, shop_id: ShopId) -> StoreResult<Vec<JobCount>>;
    /// Failed or cancelled jobs among `ids` (every failed one when None) queued again, due
    /// now, attempts from zero; not one whose key an unfinished job holds. Returns their ids.
    fn requeue_jobs(&mut self, ids: Option<&[JobId]>, now: Timestamp) -> StoreResult<Vec<JobId>>;
    /// Queued, running or failed jobs among `ids` cancelled; returns their ids.
    fn cancel_jobs(&mut self, ids: &[JobId], now: Timestamp) -> StoreResult<Vec<JobId>>;
}

/// `mercer jobs list`: jobs oldest first, of one state or all (a done job is deleted).
pub fn list_jobs(
    tx: &mut dyn JobRepository,
    state: Option<JobState>,
    limit: usize,
) -> Result<Vec<Job>, DomainError> {
    Ok(tx.list_jobs(state, limit)?)
}

/// `mercer jobs retry`: failed or cancelled jobs among `ids` (every failed one when None)
/// queued again, due now, attempts from zero; not one whose key an unfinished job holds.
/// Returns the ids queued again.
pub fn retry_jobs(
    tx: &mut dyn JobRepository,
    ids: Option<&[JobId]>,
    now: Timestamp,
) -> Result<Vec<JobId>, DomainError> {
    Ok(tx.requeue_jobs(ids, now)?)
}

/// `mercer jobs cancel`: queued, running or failed jobs among `ids` cancelled (a running one
/// stops at its next step: its runner finds its lease gone). Returns the ids cancelled.
pub fn cancel_jobs(
    tx: &mut dyn JobRepository,
    ids: &[JobId],
    now: Timestamp,
) -> Result<Vec<JobId>, DomainError> {
    Ok(tx.cancel_jobs(ids, now)?)
}

thread_local! {
    /// The id of the request being handled on this thread, set by [`within_request`].
    static REQUEST_ID: RefCell<Option<Arc<str>>> = const { RefCell::new(None) };
}

/// Runs `work` as part of handling the request `request_id` (None: of no request): every job
/// [`enqueue`] enqueues on this thread meanwhile keeps the id. The HTTP edge sets it around a
/// request's handling and its storage work; the job runner around a job, so that the jobs a
/// job enqueues keep the request that caused it. Read from a thread-local rather than passed
/// down, because jobs are enqueued deep inside every feature's domain code. The id in force
/// before is back afterwards, even when `work` panics.
pub fn within_request<R>(request_id: Option<Arc<str>>, work: impl FnOnce() -> R) -> R {
    struct Restore(Option<Arc<str>>);
    impl Drop for Restore {
        fn drop(&mut self) {
            let previous = self.0.take();
            // Fails only while the thread is being torn down, when nothing reads it any more.
            let _ = REQUEST_ID.try_with(|id| *id.borrow_mut() = previous);
        }
    }
    let _restore = Restore(REQUEST_ID.with(|id| id.replace(request_id)));
    work()
}

/// The id of the request being handled on this thread ([`within_request`]), if any.
pub fn current_request_id() -> Option<Arc<str>> {
    REQUEST_ID.with(|id| id.borrow().clone())
}

/// How the process that exports traces (`serve --otlp-endpoint`) reads and continues them:
/// the domain enqueues jobs and webhook messages deep in every feature, and the runners that
/// take them up later (other threads, other processes) continue the trace they were enqueued
/// in, without the domain knowing how spans are kept.
#[derive(Debug, Clone, Copy)]
pub struct TraceContextHooks {
    /// The trace context of the span this thread is in, as a W3C `traceparent` value
    /// (`00-{trace id}-{span id}-{flags}`); None outside any traced span.
    pub capture: fn() -> Option<String>,
    /// Makes the span this thread is in a child of the span a `traceparent` value names
    /// (a value that does not read is ignored).
    pub continue_trace: fn(&str),
}

static TRACE_CONTEXT_HOOKS: std::sync::OnceLock<TraceContextHooks> = std::sync::OnceLock::new();

/// Installs the hooks once per process, when traces are exported; false when some already
/// were. Without them, no trace context is read or kept: [`current_trace_parent`] is None.
pub fn install_trace_context_hooks(hooks: TraceContextHooks) -> bool {
    TRACE_CONTEXT_HOOKS.set(hooks).is_ok()
}

/// Whether this process exports traces (its hooks are installed).
pub fn traces_exported() -> bool {
    TRACE_CONTEXT_HOOKS.get().is_some()
}

/// The trace context a job or a webhook message enqueued now keeps, so that its run or its
/// delivery joins the trace of the request (or job) that enqueued it: the current span's, as a
/// `traceparent` value. None when traces are not exported, or outside any traced span.
pub fn current_trace_parent() -> Option<String> {
    TRACE_CONTEXT_HOOKS
        .get()
        .and_then(|hooks| (hooks.capture)())
}

/// Continues the trace `trace_parent` names (a job's, a message's) in the current span: it
/// becomes that span's child. Nothing when traces are not exported or there is none.
pub fn continue_trace(trace_parent: Option<&str>) {
    if let (Some(hooks), Some(trace_parent)) = (TRACE_CONTEXT_HOOKS.get(), trace_parent) {
        (hooks.continue_trace)(trace_parent);
    }
}

/// Enqueues `job` (for the shop `shop_id` names, if it works for one), due at `run_at`, in
/// the caller's transaction. It keeps the id of the request being handled on this thread,
/// if any ([`within_request`]).
pub fn enqueue<J: JobPayload>(
    tx: &mut (impl JobRepository + ?Sized),
    shop_id: Option<ShopId>,
    job: &J,
    run_at: Timestamp,
    now: Timestamp,
) -> Result<Enqueued, DomainError> {
    Ok(tx.enqueue_job(&new_job(shop_id, job, run_at)?, now)?)
}

/// [`enqueue`] for each of `jobs`, in one statement where the store can.
pub fn enqueue_each<J: JobPayload>(
    tx: &mut (impl JobRepository + ?Sized),
    shop_id: Option<ShopId>,
    jobs: &[J],
    run_at: Timestamp,
    now: Timestamp,
) -> Result<Vec<Enqueued>, DomainError> {
    let new = jobs
        .iter()
        .map(|job| new_job(shop_id, job, run_at))
        .collect::<Result<Vec<NewJob>, DomainError>>()?;
    Ok(tx.enqueue_jobs(&new, now)?)
}

/// The row of `job` to enqueue, with the request and trace it is made in.
fn new_job<J: JobPayload>(
    shop_id: Option<ShopId>,
    job: &J,
    run_at: Timestamp,
) -> Result<NewJob, DomainError> {
    let payload = serde_json::to_string(job)
        .map_err(|error| StorageError::other(format!("a {} job: {error}", J::KIND)))?;
    Ok(NewJob {
        kind: J::KIND,
        payload,
        unique_key: job.unique_key(),
        run_at,
        max_attempts: J::MAX_ATTEMPTS,
        shop_id,
        request_id: current_request_id().map(|id| id.to_string()),
        trace_parent: current_trace_parent(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_an_hour() {
        assert_eq!(backoff_seconds(1), 5);
        assert_eq!(backoff_seconds(2), 10);
        assert_eq!(backoff_seconds(4), 40);
        assert_eq!(backoff_seconds(10), 2560);
        assert_eq!(backoff_seconds(11), 3600);
        assert_eq!(backoff_seconds(i64::MAX), 3600);
        assert_eq!(backoff_seconds(0), 5);
    }

    #[test]
    fn failures_retry_until_the_last_attempt_or_a_permanent_one() {
        let now = Timestamp::from_micros(0);
        let mut job = Job {
            id: JobId(1),
            kind: "k".into(),
            payload: "{}".into(),
            unique_key: None,
            state: JobState::Running,
            run_at: now,
            attempts: 1,
            max_attempts: 3,
            locked_by: Some("w".into()),
            last_error: None,
            created_at: now,
            updated_at: now,
            shop_id: None,
            request_id: None,
            trace_parent: None,
        };
        let retry = JobFailure::retry("down");
        assert_eq!(
            after_failure(&job, &retry, now),
            AfterFailure::RetryAt(now.plus_seconds(5))
        );
        assert_eq!(
            after_failure(&job, &JobFailure::permanent("bad"), now),
            AfterFailure::Fail
        );
        job.attempts = 3;
        assert_eq!(after_failure(&job, &retry, now), AfterFailure::Fail);
    }

    /// The memory store keeps the queue's rules too: a key coalesces, a running job enqueued
    /// again runs once more, a recurring one comes back at its time.
    #[test]
    fn the_memory_queue_coalesces_and_requeues() {
        use crate::testing::MemoryState;

        #[derive(serde::Serialize, serde::Deserialize)]
        struct Tick;
        impl JobPayload for Tick {
            const KIND: &'static str = "test.tick";
            fn unique_key(&self) -> Option<String> {
                Some("tick".into())
            }
        }

        let at = |seconds| Timestamp::from_micros(0).plus_seconds(seconds);
        let mut state = MemoryState::default();
        let id = enqueue(&mut state, None, &Tick, at(10), at(0))
            .unwrap()
            .id();
        assert_eq!(
            enqueue(&mut state, None, &Tick, at(5), at(0)).unwrap(),
            Enqueued::Coalesced(id)
        );
        assert!(
            state
                .claim_jobs(&["test.tick"], "w", at(4), at(60), 5)
                .unwrap()
                .is_empty()
        );
        let claimed = state
            .claim_jobs(&["test.tick"], "w", at(5), at(60), 5)
            .unwrap();
        assert_eq!((claimed[0].id, claimed[0].attempts), (id, 1));
        enqueue(&mut state, None, &Tick, at(20), at(6)).unwrap();
        assert!(state.complete_job(id, "w", Some(at(3600)), at(7)).unwrap());
        let queued = state.job(id).unwrap().unwrap();
        assert_eq!(
            (queued.state, queued.run_at, queued.attempts),
            (JobState::Queued, at(20), 0)
        );
        state
            .claim_jobs(&["test.tick"], "w", at(20), at(60), 5)
            .unwrap();
        assert!(!state.complete_job(id, "other", None, at(21)).unwrap());
        assert!(state.complete_job(id, "w", None, at(21)).unwrap());
        assert_eq!(state.job(id).unwrap(), None);
    }

    /// A job enqueued while a request is handled keeps the request's id; one enqueued outside
    /// any request, or after it, keeps none.
    #[test]
    fn jobs_keep_the_request_that_enqueued_them() {
        use crate::testing::MemoryState;

        #[derive(serde::Serialize, serde::Deserialize)]
        struct Note;
        impl JobPayload for Note {
            const KIND: &'static str = "test.note";
        }

        let now = Timestamp::from_micros(0);
        let mut state = MemoryState::default();
        let enqueue_one = |state: &mut MemoryState| {
            let id = enqueue(state, None, &Note, now, now).unwrap().id();
            state.job(id).unwrap().unwrap().request_id
        };
        let (inside, nested, after_nested) = within_request(Some("req-1".into()), || {
            let inside = enqueue_one(&mut state);
            let nested = within_request(None, || enqueue_one(&mut state));
            (inside, nested, enqueue_one(&mut state))
        });
        assert_eq!(inside.as_deref(), Some("req-1"));
        assert_eq!(nested, None);
        assert_eq!(after_nested.as_deref(), Some("req-1"));
        assert_eq!(enqueue_one(&mut state), None);
        assert_eq!(current_request_id(), None);
    }
}
