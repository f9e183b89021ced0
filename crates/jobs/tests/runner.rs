//! The job runner with real threads against a real queue, on three targets: the in-memory
//! database, the store on SQLite and the store on PostgreSQL. Each test is written once over
//! `&impl Database`; `every_database!(name)` under it makes `name::memory`, `name::sqlite` and
//! `name::postgres`. Outcomes are read back from the database.
//!
//! Leases are 300 ms and idle workers poll every 50 ms, so a test takes a second or two; the one
//! that waits out the first retry's backoff (5 s, the domain's rule) takes about six. Waits are
//! bounded polls of 10 s; a fixed pause is used only to show that something does not happen.

#![allow(clippy::unwrap_used)] // test code: a panic is a failed assertion

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::ThreadId;
use std::time::{Duration, Instant};

use mercer_domain::Timestamp;
use mercer_domain::kernel::ids::JobId;
use mercer_domain::kernel::jobs::{
    Enqueued, Job, JobOutcome, JobPayload, JobState, NewJob, current_request_id, enqueue,
    within_request,
};
use mercer_domain::kernel::time::{Clock, OffsetClock};
use mercer_domain::kernel::wake::Wake;
use mercer_domain::ports::Database;
use mercer_jobs::{JobHandlers, JobRunner, JobRunnerConfig};
use serde::{Deserialize, Serialize};

use mercer_store::every_database;

const LEASE: Duration = Duration::from_millis(300);
const POLL: Duration = Duration::from_millis(50);
/// The longest any wait of these tests lasts before it counts as a failure.
const DEADLINE: Duration = Duration::from_secs(10);

/// Sleeps for `millis`, then is done.
#[derive(Serialize, Deserialize)]
struct Sleep {
    millis: u64,
}

impl JobPayload for Sleep {
    const KIND: &'static str = "test.sleep";
}

/// Done at once.
#[derive(Serialize, Deserialize)]
struct Note {}

impl JobPayload for Note {
    const KIND: &'static str = "test.note";
}

/// Panics on its first attempt.
#[derive(Serialize, Deserialize)]
struct Flaky {}

impl JobPayload for Flaky {
    const KIND: &'static str = "test.flaky";
}

/// A kind no runner of these tests has a handler for.
#[derive(Serialize, Deserialize)]
struct Unknown {}

impl JobPayload for Unknown {
    const KIND: &'static str = "test.unknown";
}

/// Runs until its control says stop.
#[derive(Serialize, Deserialize)]
struct UntilStopped {}

impl JobPayload for UntilStopped {
    const KIND: &'static str = "test.until_stopped";
}

/// One job at a time under a fixed key.
#[derive(Serialize, Deserialize)]
struct Keyed {}

impl JobPayload for Keyed {
    const KIND: &'static str = "test.keyed";

    fn unique_key(&self) -> Option<String> {
        Some("test.keyed".to_string())
    }
}

/// Enqueues a [`Note`], which the runner of its test leaves queued.
#[derive(Serialize, Deserialize)]
struct FollowUp {}

impl JobPayload for FollowUp {
    const KIND: &'static str = "test.follow_up";
}

/// What a handler saw of one run.
#[derive(Debug, Clone)]
struct Run {
    attempts: i64,
    started: Timestamp,
    thread: ThreadId,
    told_to_stop: bool,
}

/// The runs of every handler that shares it, in the order they started.
#[derive(Clone, Default)]
struct Runs(Arc<Mutex<Vec<Run>>>);

impl Runs {
    fn begin(&self, job: &Job) -> usize {
        let mut runs = self.0.lock().unwrap();
        runs.push(Run {
            attempts: job.attempts,
            started: now(),
            thread: std::thread::current().id(),
            told_to_stop: false,
        });
        runs.len() - 1
    }

    fn told_to_stop(&self, run: usize) {
        self.0.lock().unwrap()[run].told_to_stop = true;
    }

    fn all(&self) -> Vec<Run> {
        self.0.lock().unwrap().clone()
    }
}

fn now() -> Timestamp {
    OffsetClock::SYSTEM.now()
}

fn start<D: Database>(db: &D, workers: usize, handlers: JobHandlers) -> JobRunner<D> {
    let config = JobRunnerConfig {
        workers,
        lease: LEASE,
        poll: POLL,
    };
    JobRunner::start(
        db.clone(),
        OffsetClock::SYSTEM,
        handlers,
        config,
        Wake::default(),
    )
    .unwrap()
}

fn enqueue_now<J: JobPayload>(db: &impl Database, payload: &J) -> Enqueued {
    db.write(|tx| enqueue(tx, None, payload, now(), now()))
        .unwrap()
}

fn job(db: &impl Database, id: JobId) -> Option<Job> {
    db.read(|tx| Ok(tx.job(id)?)).unwrap()
}

fn all_jobs(db: &impl Database) -> Vec<Job> {
    db.read(|tx| Ok(tx.list_jobs(None, 100)?)).unwrap()
}

/// Polls `done` until it holds; fails the test after [`DEADLINE`].
fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + DEADLINE;
    while !done() {
        assert!(Instant::now() < deadline, "waited {DEADLINE:?} for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Runs for `millis`, noting whether it was told to stop meanwhile.
fn sleeping(runs: &Runs) -> JobHandlers {
    let runs = runs.clone();
    JobHandlers::default().register(move |sleep: Sleep, job, control| {
        let run = runs.begin(job);
        let started = Instant::now();
        while started.elapsed() < Duration::from_millis(sleep.millis) {
            if control.should_stop() {
                runs.told_to_stop(run);
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        Ok(JobOutcome::Done)
    })
}

fn noting(runs: &Runs) -> JobHandlers {
    let runs = runs.clone();
    JobHandlers::default().register(move |_: Note, job, _control| {
        runs.begin(job);
        Ok(JobOutcome::Done)
    })
}

// --- leases ----------------------------------------------------------------------------------

/// A job that runs four leases long keeps its lease (the keeper renews it) and its holder: a
/// second runner polling all along never takes it.
fn a_running_jobs_lease_is_renewed_and_no_other_runner_takes_it(db: &impl Database) {
    let runs = Runs::default();
    let first = start(db, 1, sleeping(&runs));
    let id = enqueue_now(db, &Sleep { millis: 1200 }).id();
    wait_for("the first runner to claim the job", || {
        job(db, id).is_some_and(|job| job.state == JobState::Running)
    });
    let claimed = job(db, id).unwrap();
    let (holder, first_lease_end) = (claimed.locked_by.clone(), claimed.run_at);
    assert!(holder.is_some());
    let second = start(db, 1, sleeping(&runs));

    let (mut latest_lease_end, mut held_past_first_lease) = (first_lease_end, false);
    let deadline = Instant::now() + DEADLINE;
    loop {
        let seen_at = now();
        let Some(running) = job(db, id) else {
            break;
        };
        assert_eq!(running.state, JobState::Running);
        assert_eq!(running.locked_by, holder, "another worker took the job");
        assert_eq!(running.attempts, 1, "the job was claimed again");
        latest_lease_end = latest_lease_end.max(running.run_at);
        held_past_first_lease |= seen_at > first_lease_end;
        assert!(Instant::now() < deadline, "the job never ended");
        std::thread::sleep(Duration::from_millis(20));
    }
    second.stop();
    first.stop();

    assert!(held_past_first_lease, "the job ran past its first lease");
    let renewed_by = latest_lease_end.as_micros() - first_lease_end.as_micros();
    assert!(
        renewed_by >= 600_000,
        "the lease moved only {renewed_by} µs past its first end"
    );
    let runs = runs.all();
    assert_eq!(runs.len(), 1, "{runs:?}");
    assert_eq!(runs[0].attempts, 1);
    assert!(!runs[0].told_to_stop, "the job was told its lease was lost");
}
every_database!(a_running_jobs_lease_is_renewed_and_no_other_runner_takes_it);

/// A worker that claimed a job and died renews nothing: once its lease ends, a runner takes the
/// job over and completes it, and the dead worker's attempt counts.
fn a_job_whose_worker_died_is_taken_over_when_its_lease_ends(db: &impl Database) {
    let id = enqueue_now(db, &Note {}).id();
    let dead_lease_end = now().plus(Duration::from_secs(1));
    let claimed = db
        .write(|tx| {
            Ok(tx.claim_jobs(
                &[Note::KIND],
                "a worker that died",
                now(),
                dead_lease_end,
                1,
            )?)
        })
        .unwrap();
    assert_eq!(claimed.len(), 1);
    assert_eq!(claimed[0].attempts, 1);

    let runs = Runs::default();
    let runner = start(db, 1, noting(&runs));
    wait_for("the runner to complete the job", || job(db, id).is_none());
    runner.stop();

    let runs = runs.all();
    assert_eq!(runs.len(), 1, "{runs:?}");
    assert_eq!(runs[0].attempts, 2, "the dead worker's attempt counts");
    assert!(
        runs[0].started >= dead_lease_end,
        "taken over at {} before the lease ended at {}",
        runs[0].started.to_rfc3339(),
        dead_lease_end.to_rfc3339()
    );
}
every_database!(a_job_whose_worker_died_is_taken_over_when_its_lease_ends);

// --- failures ----------------------------------------------------------------------------------

/// A panic is a failed attempt: the job is retried after the backoff and done on its second
/// attempt, by the same worker thread, which survived the panic.
fn a_panicking_handler_is_retried_and_its_worker_survives(db: &impl Database) {
    let runs = Runs::default();
    let handlers = {
        let runs = runs.clone();
        JobHandlers::default().register(move |_: Flaky, job, _control| {
            runs.begin(job);
            if job.attempts == 1 {
                panic!("the first attempt of a flaky job panics");
            }
            Ok(JobOutcome::Done)
        })
    };
    let runner = start(db, 1, handlers);
    let id = enqueue_now(db, &Flaky {}).id();
    wait_for("the panic to be recorded as a failed attempt", || {
        job(db, id).is_some_and(|job| job.last_error.is_some())
    });
    let retried = job(db, id).unwrap();
    assert_eq!(retried.state, JobState::Queued);
    assert_eq!(retried.attempts, 1);
    assert_eq!(retried.last_error.as_deref(), Some("the job panicked"));
    wait_for("the second attempt to complete the job", || {
        job(db, id).is_none()
    });
    runner.stop();

    let runs = runs.all();
    assert_eq!(
        runs.iter().map(|run| run.attempts).collect::<Vec<_>>(),
        [1, 2]
    );
    assert_eq!(
        runs[0].thread, runs[1].thread,
        "the worker thread was replaced"
    );
}
every_database!(a_panicking_handler_is_retried_and_its_worker_survives);

/// A payload that does not read as its kind's type fails the job at once, without calling the
/// handler: no attempt could read it better.
fn a_payload_that_does_not_read_fails_the_job_at_once(db: &impl Database) {
    let id = db
        .write(|tx| {
            Ok(tx.enqueue_job(
                &NewJob {
                    kind: Note::KIND,
                    payload: "not json".to_string(),
                    unique_key: None,
                    run_at: now(),
                    max_attempts: 10,
                    shop_id: None,
                    request_id: None,
                    trace_parent: None,
                },
                now(),
            )?)
        })
        .unwrap()
        .id();
    let runs = Runs::default();
    let runner = start(db, 1, noting(&runs));
    wait_for("the job to fail", || {
        job(db, id).is_some_and(|job| job.state == JobState::Failed)
    });
    runner.stop();

    let failed = job(db, id).unwrap();
    assert_eq!(failed.attempts, 1);
    let error = failed.last_error.unwrap_or_default();
    assert!(error.contains("does not read"), "{error}");
    assert!(runs.all().is_empty(), "the handler was called");
}
every_database!(a_payload_that_does_not_read_fails_the_job_at_once);

/// A runner claims only the kinds it has handlers for: a job of another kind stays queued,
/// unattempted, for a process that knows it. (The runner's branch for a claimed job of a kind
/// without a handler cannot be reached: the claim asks for the handlers' kinds only.)
fn a_runner_leaves_kinds_it_does_not_know_queued(db: &impl Database) {
    let unknown = enqueue_now(db, &Unknown {}).id();
    let known = enqueue_now(db, &Note {}).id();
    let runs = Runs::default();
    let runner = start(db, 1, noting(&runs));
    // The known job, due after the unknown one, shows the runner has looked at the queue.
    wait_for("the known job to be done", || job(db, known).is_none());
    std::thread::sleep(POLL * 4);
    runner.stop();

    let left = job(db, unknown).unwrap();
    assert_eq!(left.state, JobState::Queued);
    assert_eq!(left.attempts, 0);
    assert_eq!(left.locked_by, None);
    assert_eq!(runs.all().len(), 1);
}
every_database!(a_runner_leaves_kinds_it_does_not_know_queued);

// --- cancellation ------------------------------------------------------------------------------

/// An operator's cancel takes a running job's lease away: at its next renewal the keeper finds
/// it gone and the handler's `should_stop` turns true; the job stays cancelled and no runner
/// claims it again.
fn a_cancelled_running_job_is_told_to_stop_and_does_not_come_back(db: &impl Database) {
    let runs = Runs::default();
    let handlers = {
        let runs = runs.clone();
        JobHandlers::default().register(move |_: UntilStopped, job, control| {
            let run = runs.begin(job);
            let started = Instant::now();
            while started.elapsed() < DEADLINE {
                if control.should_stop() {
                    runs.told_to_stop(run);
                    return Ok(JobOutcome::Interrupted);
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            Ok(JobOutcome::Done)
        })
    };
    let runner = start(db, 1, handlers);
    let id = enqueue_now(db, &UntilStopped {}).id();
    wait_for("the job to start", || !runs.all().is_empty());
    let cancelled = db.write(|tx| Ok(tx.cancel_jobs(&[id], now())?)).unwrap();
    assert_eq!(cancelled, [id]);
    wait_for("the handler to be told to stop", || {
        runs.all().iter().any(|run| run.told_to_stop)
    });
    // Several leases and polls: time enough for the job to be claimed again if it could be.
    std::thread::sleep(LEASE * 3);
    runner.stop();

    assert_eq!(runs.all().len(), 1, "the cancelled job ran again");
    let left = job(db, id).unwrap();
    assert_eq!(left.state, JobState::Cancelled);
    assert_eq!(left.locked_by, None);
}
every_database!(a_cancelled_running_job_is_told_to_stop_and_does_not_come_back);

// --- unique keys ---------------------------------------------------------------------------

/// Enqueues with one key while its job is queued are one job, which runs once.
fn enqueues_with_one_key_while_queued_run_once(db: &impl Database) {
    let id = enqueue_now(db, &Keyed {}).id();
    assert_eq!(enqueue_now(db, &Keyed {}), Enqueued::Coalesced(id));
    assert_eq!(enqueue_now(db, &Keyed {}), Enqueued::Coalesced(id));
    let runs = Arc::new(AtomicUsize::new(0));
    let handlers = {
        let runs = runs.clone();
        JobHandlers::default().register(move |_: Keyed, _job, _control| {
            runs.fetch_add(1, Ordering::SeqCst);
            Ok(JobOutcome::Done)
        })
    };
    let runner = start(db, 2, handlers);
    wait_for("the job to be done", || job(db, id).is_none());
    std::thread::sleep(POLL * 6);
    runner.stop();

    assert_eq!(runs.load(Ordering::SeqCst), 1);
    assert!(all_jobs(db).is_empty(), "{:?}", all_jobs(db));
}
every_database!(enqueues_with_one_key_while_queued_run_once);

/// Enqueues with the key of a running job make it run once more after this run, never beside
/// it, though a second worker is idle.
fn an_enqueue_with_the_key_while_it_runs_runs_it_once_more_after(db: &impl Database) {
    let (runs, running, overlapped, gate) = (
        Arc::new(AtomicUsize::new(0)),
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicBool::new(false)),
    );
    let handlers = {
        let (runs, running, overlapped, gate) = (
            runs.clone(),
            running.clone(),
            overlapped.clone(),
            gate.clone(),
        );
        JobHandlers::default().register(move |_: Keyed, _job, _control| {
            if running.swap(true, Ordering::SeqCst) {
                overlapped.store(true, Ordering::SeqCst);
            }
            let run = runs.fetch_add(1, Ordering::SeqCst) + 1;
            let started = Instant::now();
            // The first run holds on until the test has enqueued again.
            while run == 1 && !gate.load(Ordering::SeqCst) && started.elapsed() < DEADLINE {
                std::thread::sleep(Duration::from_millis(10));
            }
            running.store(false, Ordering::SeqCst);
            Ok(JobOutcome::Done)
        })
    };
    let runner = start(db, 2, handlers);
    let id = enqueue_now(db, &Keyed {}).id();
    wait_for("the first run to start", || {
        runs.load(Ordering::SeqCst) == 1
    });
    assert_eq!(enqueue_now(db, &Keyed {}), Enqueued::Coalesced(id));
    assert_eq!(enqueue_now(db, &Keyed {}), Enqueued::Coalesced(id));
    gate.store(true, Ordering::SeqCst);
    wait_for("the second run to end", || {
        runs.load(Ordering::SeqCst) == 2 && job(db, id).is_none()
    });
    std::thread::sleep(POLL * 6);
    runner.stop();

    assert_eq!(runs.load(Ordering::SeqCst), 2);
    assert!(
        !overlapped.load(Ordering::SeqCst),
        "two runs of one key overlapped"
    );
    assert!(all_jobs(db).is_empty(), "{:?}", all_jobs(db));
}
every_database!(an_enqueue_with_the_key_while_it_runs_runs_it_once_more_after);

// --- requests --------------------------------------------------------------------------------

/// A job runs within the request that enqueued it: its handler sees the request's id, and the
/// jobs it enqueues keep it. A job enqueued outside a request passes none on.
fn a_job_passes_its_request_on_to_the_jobs_it_enqueues(db: &impl Database) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let handlers = {
        let (seen, db) = (seen.clone(), db.clone());
        JobHandlers::default().register(move |_: FollowUp, job, _control| {
            let request = current_request_id().map(|id| id.to_string());
            seen.lock().unwrap().push((job.id, request));
            db.write(|tx| enqueue(tx, None, &Note {}, now(), now()))?;
            Ok(JobOutcome::Done)
        })
    };
    let from_request = within_request(Some(Arc::from("req-1")), || {
        enqueue_now(db, &FollowUp {}).id()
    });
    let from_nowhere = enqueue_now(db, &FollowUp {}).id();
    assert_eq!(
        job(db, from_request).unwrap().request_id.as_deref(),
        Some("req-1")
    );
    let runner = start(db, 1, handlers);
    wait_for("both jobs to run", || seen.lock().unwrap().len() == 2);
    runner.stop();

    let mut seen = seen.lock().unwrap().clone();
    seen.sort();
    let mut expected = vec![
        (from_request, Some("req-1".to_string())),
        (from_nowhere, None),
    ];
    expected.sort();
    assert_eq!(seen, expected);
    let mut notes: Vec<Option<String>> = all_jobs(db)
        .into_iter()
        .filter(|job| job.kind == Note::KIND)
        .map(|job| job.request_id)
        .collect();
    notes.sort();
    assert_eq!(notes, [None, Some("req-1".to_string())]);
    assert_eq!(current_request_id(), None);
}
every_database!(a_job_passes_its_request_on_to_the_jobs_it_enqueues);

// --- completion in the handler's transaction -------------------------------------------------

/// Enqueues a [`Note`] and completes itself in the same transaction; the first run then fails
/// that transaction when `fail_first` is set.
#[derive(Serialize, Deserialize)]
struct SelfCompleting {
    fail_first: bool,
}

impl JobPayload for SelfCompleting {
    const KIND: &'static str = "test.self_completing";
}

/// A handler that completes its job in its own transaction ends the job with its work: a
/// transaction that fails rolls the completion back too, so the job is retried (its control
/// says which run it is); one that commits leaves no job behind, and the runner writes no
/// completion after it.
fn a_job_completed_in_its_own_transaction_ends_with_its_work_or_not_at_all(db: &impl Database) {
    let attempts = Arc::new(Mutex::new(Vec::new()));
    let handlers = {
        let (attempts, db) = (attempts.clone(), db.clone());
        JobHandlers::default().register(move |payload: SelfCompleting, _job, control| {
            let attempt = control.attempt();
            attempts.lock().unwrap().push(attempt);
            db.write(|tx| {
                enqueue(tx, None, &Note {}, now(), now())?;
                control.complete_in(tx, now())?;
                if payload.fail_first && attempt == Some(1) {
                    return Err(mercer_domain::kernel::error::StorageError::other(
                        "the commit failed",
                    )
                    .into());
                }
                Ok(())
            })?;
            Ok(JobOutcome::Done)
        })
    };
    let failing = enqueue_now(db, &SelfCompleting { fail_first: true }).id();
    let runner = start(db, 1, handlers);
    wait_for("the failed first run", || {
        !attempts.lock().unwrap().is_empty()
    });
    std::thread::sleep(Duration::from_millis(200));
    let after_failure = job(db, failing).expect("the rolled-back completion left the job");
    assert_eq!(
        (after_failure.state, after_failure.attempts),
        (JobState::Queued, 1),
        "queued for a retry"
    );
    assert!(
        all_jobs(db).iter().all(|job| job.kind != Note::KIND),
        "the work was rolled back with the completion"
    );
    let done = enqueue_now(db, &SelfCompleting { fail_first: false }).id();
    wait_for("the second job to end", || job(db, done).is_none());
    runner.stop();
    assert_eq!(attempts.lock().unwrap().clone(), [Some(1), Some(1)]);
    let notes = all_jobs(db)
        .into_iter()
        .filter(|job| job.kind == Note::KIND)
        .count();
    assert_eq!(notes, 1, "the work committed with the completion");
}
every_database!(a_job_completed_in_its_own_transaction_ends_with_its_work_or_not_at_all);

/// Sleeps a while; two of them are claimed together and run side by side.
#[derive(Serialize, Deserialize)]
struct Paired {}

impl JobPayload for Paired {
    const KIND: &'static str = "test.paired";
    const BATCH: usize = 2;
}

/// A kind that runs in batches: one worker claims two of its jobs at once and runs them side by
/// side, on threads of their own, each completed once.
fn a_batched_kind_runs_side_by_side_on_one_worker(db: &impl Database) {
    let runs = Runs::default();
    let handlers = {
        let runs = runs.clone();
        JobHandlers::default().register(move |_: Paired, job, _control| {
            runs.begin(job);
            std::thread::sleep(Duration::from_millis(200));
            Ok(JobOutcome::Done)
        })
    };
    let ids = [
        enqueue_now(db, &Paired {}).id(),
        enqueue_now(db, &Paired {}).id(),
    ];
    let runner = start(db, 1, handlers);
    wait_for("both jobs to end", || {
        ids.iter().all(|id| job(db, *id).is_none())
    });
    runner.stop();
    let all = runs.all();
    assert_eq!(all.len(), 2, "each job ran once");
    assert_ne!(all[0].thread, all[1].thread, "on threads of their own");
    let apart = all[1].started.as_micros() - all[0].started.as_micros();
    assert!(
        apart.abs() < 150_000,
        "side by side, not one after the other ({apart} µs apart)"
    );
}
every_database!(a_batched_kind_runs_side_by_side_on_one_worker);
