//! The runner itself: worker threads that claim due jobs from the jobs table, run each with
//! the handler registered for its kind, and record how it ended; a lease keeper that extends
//! the leases of the jobs this process runs, so a job outlives its lease only when its process
//! dies. Workers wake on an in-process signal after an enqueue and poll otherwise (another
//! process's enqueue, a retry coming due, a lease running out).

use std::cell::Cell;
use std::collections::HashMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use mercer_domain::kernel::error::{StorageError, StoreResult};
use mercer_domain::kernel::ids::JobId;
use mercer_domain::kernel::jobs::{
    AfterFailure, Job, JobControl, JobFailure, JobOutcome, JobPayload, JobRepository,
    after_failure, continue_trace, within_request,
};
use mercer_domain::kernel::time::{Clock, OffsetClock, Timestamp};
use mercer_domain::kernel::wake::Wake;
use mercer_domain::ports::Database;

/// Runs one job of a kind: its payload is already read.
type Handler = Box<dyn Fn(&Job, &dyn JobControl) -> Result<JobOutcome, JobFailure> + Send + Sync>;

/// The kinds this process runs, each with its handler. A process claims only kinds it knows,
/// so an older process beside a newer one leaves the newer kinds alone.
#[derive(Default)]
pub struct JobHandlers {
    handlers: HashMap<&'static str, Handler>,
    /// [`JobPayload::BATCH`] of each kind.
    batches: HashMap<&'static str, usize>,
}

impl JobHandlers {
    /// Runs jobs of `J`'s kind with `run`, which gets the payload read as `J`, the job as
    /// stored and its [`JobControl`]. A payload that does not read fails the job for good.
    /// Registering a kind again replaces its handler.
    pub fn register<J: JobPayload + 'static>(
        mut self,
        run: impl Fn(J, &Job, &dyn JobControl) -> Result<JobOutcome, JobFailure> + Send + Sync + 'static,
    ) -> Self {
        let handler: Handler = Box::new(move |job, control| run(job.payload::<J>()?, job, control));
        self.handlers.insert(J::KIND, handler);
        self.batches.insert(J::KIND, J::BATCH.max(1));
        self
    }

    /// How many jobs of `kind` a worker claims and runs at once.
    fn batch(&self, kind: &str) -> usize {
        self.batches.get(kind).copied().unwrap_or(1)
    }

    fn kinds(&self) -> Vec<&'static str> {
        let mut kinds: Vec<&'static str> = self.handlers.keys().copied().collect();
        kinds.sort_unstable();
        kinds
    }
}

/// How a runner runs: its threads, its leases and how often it polls.
#[derive(Debug, Clone)]
pub struct JobRunnerConfig {
    /// Worker threads; 0 runs no job in this process.
    pub workers: usize,
    /// How long a claimed job is held before another worker may take it, unless renewed.
    pub lease: Duration,
    /// How often idle workers look for due jobs nobody told them about.
    pub poll: Duration,
}

impl Default for JobRunnerConfig {
    fn default() -> Self {
        JobRunnerConfig {
            workers: 2,
            lease: Duration::from_secs(30),
            poll: Duration::from_millis(500),
        }
    }
}

/// The jobs this process runs now, each with the flag that tells it to stop early.
type InFlight = Arc<Mutex<HashMap<JobId, Arc<AtomicBool>>>>;

struct Shared<D> {
    db: D,
    /// Mercer's clock: when jobs are due, leases end, outcomes are recorded.
    clock: OffsetClock,
    handlers: JobHandlers,
    kinds: Vec<&'static str>,
    config: JobRunnerConfig,
    /// Names this process in `locked_by`.
    worker_id: String,
    wake: Wake,
    /// Tells workers (and through `JobControl`, running jobs) to stop.
    stop: Arc<AtomicBool>,
    /// Tells the lease keeper to stop, once the workers have.
    keeper_stop: AtomicBool,
    in_flight: InFlight,
}

struct Control<'a> {
    stop: &'a AtomicBool,
    lost: &'a AtomicBool,
    job: &'a Job,
    worker: &'a str,
    /// Set when the handler completed its job in its own transaction: whether the worker still
    /// held it then.
    completed: Cell<Option<bool>>,
}

impl JobControl for Control<'_> {
    fn should_stop(&self) -> bool {
        self.stop.load(Ordering::Relaxed) || self.lost.load(Ordering::Relaxed)
    }

    fn attempt(&self) -> Option<i64> {
        Some(self.job.attempts)
    }

    fn complete_in(&self, tx: &mut dyn JobRepository, now: Timestamp) -> StoreResult<()> {
        let held = tx.complete_job(self.job.id, self.worker, None, now)?;
        self.completed.set(Some(held));
        Ok(())
    }
}

/// The running job runner of one process, over the database `D`.
pub struct JobRunner<D: Database> {
    shared: Arc<Shared<D>>,
    workers: Vec<JoinHandle<()>>,
    keeper: Option<JoinHandle<()>>,
}

/// When a lease taken `now` ends.
fn lease_end(now: Timestamp, lease: Duration) -> Timestamp {
    let micros = i64::try_from(lease.as_micros()).unwrap_or(i64::MAX);
    Timestamp::from_micros(now.as_micros().saturating_add(micros))
}

impl<D: Database> JobRunner<D> {
    /// Starts `config.workers` worker threads (none: this process runs no job) and the lease
    /// keeper, claiming jobs of the kinds in `handlers` from `db`. `clock` is Mercer's: when
    /// jobs are due, leases end, outcomes are recorded. `wake` makes idle workers look at once.
    pub fn start(
        db: D,
        clock: OffsetClock,
        handlers: JobHandlers,
        config: JobRunnerConfig,
        wake: Wake,
    ) -> std::io::Result<JobRunner<D>> {
        let stop = Arc::new(AtomicBool::new(false));
        // Unique per process start: a restarted process does not take its predecessor's jobs
        // for its own.
        let worker_id = format!(
            "{}:{}:{:x}",
            hostname(),
            std::process::id(),
            Timestamp::now().as_micros()
        );
        let shared = Arc::new(Shared {
            db,
            clock,
            kinds: handlers.kinds(),
            handlers,
            config: config.clone(),
            worker_id,
            wake: wake.clone(),
            stop: stop.clone(),
            keeper_stop: AtomicBool::new(false),
            in_flight: Arc::default(),
        });
        let mut workers = Vec::with_capacity(config.workers);
        for n in 0..config.workers {
            let shared = shared.clone();
            workers.push(
                std::thread::Builder::new()
                    .name(format!("mercer-jobs-{n}"))
                    .spawn(move || work(&shared))?,
            );
        }
        let keeper = if config.workers > 0 {
            let shared = shared.clone();
            Some(
                std::thread::Builder::new()
                    .name("mercer-job-leases".to_string())
                    .spawn(move || keep_leases(&shared))?,
            )
        } else {
            None
        };
        Ok(JobRunner {
            shared,
            workers,
            keeper,
        })
    }

    /// Wakes the workers: a job was enqueued.
    pub fn wake(&self) -> Wake {
        self.shared.wake.clone()
    }

    /// Asks running jobs to stop at their next step (they go back to the queue, due now) and
    /// joins every worker, then the lease keeper (which renews leases until the last job ends).
    pub fn stop(self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        self.shared.wake.notify();
        for worker in self.workers {
            let _ = worker.join();
        }
        self.shared.keeper_stop.store(true, Ordering::Relaxed);
        if let Some(keeper) = self.keeper {
            let _ = keeper.join();
        }
    }
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|name| name.trim().to_string())
        .unwrap_or_else(|_| "mercer".to_string())
}

fn work<D: Database>(shared: &Shared<D>) {
    while !shared.stop.load(Ordering::Relaxed) {
        let now = shared.clock.now();
        let lease_until = lease_end(now, shared.config.lease);
        // Look first, then claim: an idle poll is a read, not a write transaction (on SQLite
        // a writer waiting for the lock would delay the ingest writer's next commit).
        let claimed = shared
            .db
            .read(|tx| Ok(tx.has_due_jobs(&shared.kinds, now)?))
            .and_then(|due| match due {
                false => Ok(Vec::new()),
                true => shared
                    .db
                    .write(|tx| Ok(claim(shared, tx, now, lease_until)?)),
            });
        match claimed {
            Ok(jobs) if jobs.is_empty() => shared.wake.wait(shared.config.poll),
            Ok(jobs) if jobs.len() == 1 => run_one(shared, &jobs[0]),
            // A batch: side by side, each on a thread of its own; the next claim once all ended.
            Ok(jobs) => std::thread::scope(|scope| {
                for job in &jobs {
                    let spawned = std::thread::Builder::new()
                        .name("mercer-jobs-batch".to_string())
                        .spawn_scoped(scope, move || run_one(shared, job));
                    if spawned.is_err() {
                        // No thread to be had: run it here, after the others started.
                        run_one(shared, job);
                    }
                }
            }),
            Err(error) => {
                log::error!(target: "mercer::jobs", "claiming jobs failed: {error}");
                shared.wake.wait(shared.config.poll);
            }
        }
    }
}

/// Claims the earliest due job of the kinds this process knows and, when its kind runs in
/// batches ([`JobPayload::BATCH`]), more due jobs of that kind, in the caller's transaction: one
/// commit for the batch.
fn claim<D: Database>(
    shared: &Shared<D>,
    tx: &mut dyn JobRepository,
    now: Timestamp,
    lease_until: Timestamp,
) -> StoreResult<Vec<Job>> {
    let worker = shared.worker_id.as_str();
    let mut jobs = tx.claim_jobs(&shared.kinds, worker, now, lease_until, 1)?;
    let Some(kind) = jobs.first().map(|job| job.kind.clone()) else {
        return Ok(jobs);
    };
    let batch = shared.handlers.batch(&kind);
    if batch > 1 {
        jobs.extend(tx.claim_jobs(&[kind.as_str()], worker, now, lease_until, batch - 1)?);
    }
    Ok(jobs)
}

/// Runs one job in its span (kind, id, attempt, and `request_id`: the request whose handling
/// enqueued it, when one did), which every line it logs names. The jobs it enqueues keep that
/// request's id too, so a request can be followed through the jobs its jobs cause. When traces
/// are exported, the span continues the trace the job was enqueued in.
#[tracing::instrument(
    target = "mercer::jobs",
    name = "job",
    level = "error",
    skip_all,
    fields(
        kind = %job.kind,
        id = job.id.0,
        attempt = job.attempts,
        request_id = job.request_id.as_deref(),
    )
)]
fn run_one<D: Database>(shared: &Shared<D>, job: &Job) {
    // First, before anything starts the span's own trace context.
    continue_trace(job.trace_parent.as_deref());
    let lost = Arc::new(AtomicBool::new(false));
    lock(&shared.in_flight).insert(job.id, lost.clone());
    let started = Instant::now();
    let control = Control {
        stop: &shared.stop,
        lost: &lost,
        job,
        worker: &shared.worker_id,
        completed: Cell::new(None),
    };
    let request = job.request_id.as_deref().map(Arc::from);
    let result = match shared.handlers.handlers.get(job.kind.as_str()) {
        Some(handler) => catch_unwind(AssertUnwindSafe(|| {
            within_request(request, || handler(job, &control))
        }))
        .unwrap_or_else(|_| Err(JobFailure::retry("the job panicked"))),
        None => Err(JobFailure::permanent("no handler for this kind")),
    };
    let outcome = match (&result, control.completed.get()) {
        // The handler's transaction completed the job with its work.
        (Ok(_), Some(held)) => recorded(job, Ok::<_, StorageError>(held), "succeeded"),
        _ => record(shared, job, &result),
    };
    lock(&shared.in_flight).remove(&job.id);
    metrics::counter!("mercer_jobs_total", "kind" => job.kind.clone(), "outcome" => outcome)
        .increment(1);
    metrics::histogram!("mercer_job_duration_seconds", "kind" => job.kind.clone())
        .record(started.elapsed().as_secs_f64());
}

/// Records how a run ended; names the outcome for the metrics.
fn record<D: Database>(
    shared: &Shared<D>,
    job: &Job,
    result: &Result<JobOutcome, JobFailure>,
) -> &'static str {
    let (db, worker, now) = (&shared.db, shared.worker_id.as_str(), shared.clock.now());
    let (outcome, recorded_result) = match result {
        Ok(JobOutcome::Done) => (
            "succeeded",
            db.write(|tx| Ok(tx.complete_job(job.id, worker, None, now)?)),
        ),
        Ok(JobOutcome::RunAgainAt(at)) => (
            "succeeded",
            db.write(|tx| Ok(tx.complete_job(job.id, worker, Some(*at), now)?)),
        ),
        Ok(JobOutcome::Interrupted) => (
            "interrupted",
            db.write(|tx| Ok(tx.release_job(job.id, worker, now)?)),
        ),
        Err(failure) => {
            log::warn!(
                target: "mercer::jobs",
                "{} job {} failed (attempt {} of {}): {}",
                job.kind, job.id, job.attempts, job.max_attempts, failure.message
            );
            match after_failure(job, failure, now) {
                AfterFailure::RetryAt(at) => (
                    "retried",
                    db.write(|tx| Ok(tx.retry_job(job.id, worker, at, &failure.message, now)?)),
                ),
                AfterFailure::Fail => (
                    "failed",
                    db.write(|tx| Ok(tx.fail_job(job.id, worker, &failure.message, now)?)),
                ),
            }
        }
    };
    recorded(job, recorded_result, outcome)
}

/// Names how a run ended once its end was written (or not).
fn recorded(
    job: &Job,
    written: Result<bool, impl std::fmt::Display>,
    outcome: &'static str,
) -> &'static str {
    match written {
        Ok(true) => outcome,
        // The lease ran out and another worker has the job, or it was cancelled.
        Ok(false) => {
            log::warn!(target: "mercer::jobs", "{} job {} was no longer held when it ended", job.kind, job.id);
            "lost"
        }
        // Left as it is: due again when its lease ends.
        Err(error) => {
            log::error!(target: "mercer::jobs", "recording the end of {} job {} failed: {error}", job.kind, job.id);
            "unrecorded"
        }
    }
}

/// Extends this process's leases every third of a lease; a job whose lease is gone (taken
/// over, cancelled) is told to stop. Ends after the workers.
fn keep_leases<D: Database>(shared: &Shared<D>) {
    let every = shared.config.lease / 3;
    let mut last = Instant::now();
    loop {
        if shared.keeper_stop.load(Ordering::Relaxed) {
            return;
        }
        let ids: Vec<JobId> = lock(&shared.in_flight).keys().copied().collect();
        if last.elapsed() >= every && !ids.is_empty() {
            last = Instant::now();
            let now = shared.clock.now();
            let until = lease_end(now, shared.config.lease);
            match shared
                .db
                .write(|tx| Ok(tx.renew_job_leases(&ids, &shared.worker_id, until, now)?))
            {
                Ok(held) => {
                    for (id, lost) in lock(&shared.in_flight).iter() {
                        if ids.contains(id) && !held.contains(id) {
                            lost.store(true, Ordering::Relaxed);
                        }
                    }
                }
                Err(error) => {
                    log::warn!(target: "mercer::jobs", "renewing job leases failed: {error}");
                }
            }
        }
        std::thread::sleep(Duration::from_millis(100).min(every.max(Duration::from_millis(10))));
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}
