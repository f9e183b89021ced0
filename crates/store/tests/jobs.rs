//! The jobs queue against both real databases (docs/jobs.md): claiming, leases, unique keys,
//! retries, operators' retry and cancel, and concurrent claimers.

#![allow(clippy::unwrap_used)] // test code: a panic is a failed assertion

use std::sync::mpsc;
use std::time::Duration;

use mercer_domain::kernel::ids::JobId;
use mercer_domain::kernel::jobs::{Enqueued, Job, JobState, NewJob};
use mercer_domain::ports::Database;
use mercer_domain::{DomainError, StorageError, Timestamp};
use mercer_store::testing::{TestDatabase, claim_concurrently};
use mercer_store::{Backend, Store, backend_tests};

fn at(seconds: i64) -> Timestamp {
    Timestamp::from_micros(1_700_000_000_000_000).plus_seconds(seconds)
}

fn new_job(kind: &'static str, key: Option<&str>, run_at: Timestamp) -> NewJob {
    NewJob {
        kind,
        payload: r#"{"n":1}"#.to_string(),
        unique_key: key.map(str::to_string),
        run_at,
        max_attempts: 3,
        shop_id: None,
        request_id: None,
        trace_parent: None,
    }
}

fn enqueue(store: &Store, job: &NewJob) -> Enqueued {
    store.write(|tx| Ok(tx.enqueue_job(job, at(0))?)).unwrap()
}

fn claim(store: &Store, worker: &str, now: Timestamp, lease_until: Timestamp) -> Vec<Job> {
    store
        .write(|tx| Ok(tx.claim_jobs(&["test.a"], worker, now, lease_until, 10)?))
        .unwrap()
}

fn job(store: &Store, id: JobId) -> Option<Job> {
    store.read(|tx| Ok(tx.job(id)?)).unwrap()
}

fn jobs_are_claimed_leased_and_deleted_when_done(backend: Backend) {
    let (_db, store) = TestDatabase::migrated(backend);
    let Enqueued::New(id) = enqueue(&store, &new_job("test.a", None, at(10))) else {
        panic!("a job without a key is new");
    };
    enqueue(&store, &new_job("test.b", None, at(0)));
    let due = |now| {
        store
            .read(|tx| Ok(tx.has_due_jobs(&["test.a"], now)?))
            .unwrap()
    };
    assert!(!due(at(9)));
    assert!(
        claim(&store, "w1", at(9), at(100)).is_empty(),
        "not due yet"
    );
    assert!(due(at(10)));
    let claimed = claim(&store, "w1", at(10), at(100));
    assert_eq!(claimed.len(), 1, "only the kinds asked for");
    let claimed = &claimed[0];
    assert_eq!(
        (
            claimed.id,
            claimed.state,
            claimed.attempts,
            claimed.locked_by.as_deref(),
            claimed.payload.as_str()
        ),
        (id, JobState::Running, 1, Some("w1"), r#"{"n":1}"#)
    );
    assert!(claim(&store, "w2", at(50), at(150)).is_empty(), "leased");
    assert!(
        !due(at(50)) && due(at(100)),
        "due again when the lease ends"
    );
    assert!(
        !store
            .write(|tx| Ok(tx.complete_job(id, "w2", None, at(51))?))
            .unwrap(),
        "only the holder completes it"
    );
    assert!(
        store
            .write(|tx| Ok(tx.complete_job(id, "w1", None, at(51))?))
            .unwrap()
    );
    assert_eq!(job(&store, id), None, "a done job is deleted");
}

fn a_job_whose_lease_ran_out_is_claimed_again(backend: Backend) {
    let (_db, store) = TestDatabase::migrated(backend);
    let id = enqueue(&store, &new_job("test.a", None, at(0))).id();
    claim(&store, "crashed", at(1), at(30));
    assert!(
        store
            .write(|tx| Ok(tx.renew_job_leases(&[id], "crashed", at(60), at(20))?))
            .unwrap()
            == [id],
        "a living holder extends its lease"
    );
    assert!(claim(&store, "w2", at(31), at(100)).is_empty(), "renewed");
    let again = claim(&store, "w2", at(60), at(100));
    assert_eq!((again[0].id, again[0].attempts), (id, 2), "taken over");
    assert!(
        store
            .write(|tx| Ok(tx.renew_job_leases(&[id], "crashed", at(200), at(61))?))
            .unwrap()
            .is_empty(),
        "the former holder's renewal finds the job gone"
    );
    assert!(
        !store
            .write(|tx| Ok(tx.retry_job(id, "crashed", at(70), "late", at(61))?))
            .unwrap()
    );
    // The third attempt is the last: when its lease too runs out, the job fails.
    let third = claim(&store, "w3", at(100), at(130));
    assert_eq!(third[0].attempts, 3);
    assert!(claim(&store, "w4", at(130), at(200)).is_empty());
    let failed = job(&store, id).unwrap();
    assert_eq!(
        (failed.state, failed.last_error.as_deref()),
        (
            JobState::Failed,
            Some("its worker stopped during the last attempt")
        )
    );
}

fn unique_keys_coalesce_and_a_running_job_runs_again(backend: Backend) {
    let (_db, store) = TestDatabase::migrated(backend);
    let id = enqueue(&store, &new_job("test.a", Some("k"), at(100))).id();
    assert_eq!(
        enqueue(&store, &new_job("test.a", Some("k"), at(50))),
        Enqueued::Coalesced(id)
    );
    assert_eq!(
        enqueue(&store, &new_job("test.a", Some("k"), at(80))),
        Enqueued::Coalesced(id)
    );
    assert_eq!(job(&store, id).unwrap().run_at, at(50), "the soonest wins");
    assert_eq!(claim(&store, "w", at(50), at(200))[0].id, id);
    // Enqueued while it runs: it runs once more after this run.
    assert_eq!(
        enqueue(&store, &new_job("test.a", Some("k"), at(60))),
        Enqueued::Coalesced(id)
    );
    assert!(
        store
            .write(|tx| Ok(tx.complete_job(id, "w", None, at(70))?))
            .unwrap()
    );
    let queued = job(&store, id).unwrap();
    assert_eq!(
        (queued.state, queued.run_at, queued.attempts),
        (JobState::Queued, at(60), 0)
    );
    claim(&store, "w", at(70), at(200));
    store
        .write(|tx| Ok(tx.complete_job(id, "w", None, at(71))?))
        .unwrap();
    assert_eq!(job(&store, id), None);
    let Enqueued::New(next) = enqueue(&store, &new_job("test.a", Some("k"), at(0))) else {
        panic!("the key is free once its job is done");
    };
    assert_ne!(next, id);
    // A failed job frees its key too.
    claim(&store, "w", at(1), at(200));
    store
        .write(|tx| Ok(tx.fail_job(next, "w", "broken", at(2))?))
        .unwrap();
    let third = enqueue(&store, &new_job("test.a", Some("k"), at(0))).id();
    assert_ne!(third, next);
    assert_eq!(
        store
            .write(|tx| Ok(tx.requeue_jobs(Some(&[next]), at(3))?))
            .unwrap(),
        Vec::<JobId>::new(),
        "not requeued while another job holds its key"
    );
}

fn jobs_enqueued_together_are_new_or_coalesced_as_one_at_a_time(backend: Backend) {
    let (_db, store) = TestDatabase::migrated(backend);
    let held = enqueue(&store, &new_job("test.a", Some("held"), at(100))).id();
    let batch = [
        new_job("test.a", Some("one"), at(10)),
        new_job("test.a", Some("held"), at(40)),
        new_job("test.a", Some("two"), at(20)),
    ];
    let answers = store
        .write(|tx| Ok(tx.enqueue_jobs(&batch, at(0))?))
        .unwrap();
    assert_eq!(answers.len(), 3);
    assert!(matches!(answers[0], Enqueued::New(_)), "{answers:?}");
    assert_eq!(
        answers[1],
        Enqueued::Coalesced(held),
        "the held key folds in"
    );
    assert!(matches!(answers[2], Enqueued::New(_)), "{answers:?}");
    assert_ne!(answers[0].id(), answers[2].id());
    let one = job(&store, answers[0].id()).unwrap();
    let two = job(&store, answers[2].id()).unwrap();
    assert_eq!(
        (one.unique_key.as_deref(), one.run_at, one.state),
        (Some("one"), at(10), JobState::Queued),
        "each id answers its own job"
    );
    assert_eq!(
        (two.unique_key.as_deref(), two.run_at),
        (Some("two"), at(20))
    );
    assert_eq!(
        job(&store, held).unwrap().run_at,
        at(40),
        "the soonest wins"
    );
    // Keys repeated within one call: the second folds into the first, as one at a time.
    let twice = [
        new_job("test.a", Some("again"), at(30)),
        new_job("test.a", Some("again"), at(5)),
    ];
    let answers = store
        .write(|tx| Ok(tx.enqueue_jobs(&twice, at(0))?))
        .unwrap();
    assert_eq!(answers[1], Enqueued::Coalesced(answers[0].id()));
    assert_eq!(job(&store, answers[0].id()).unwrap().run_at, at(5));
}

fn recurring_jobs_come_back_and_enqueues_roll_back_with_their_transaction(backend: Backend) {
    let (_db, store) = TestDatabase::migrated(backend);
    let id = enqueue(&store, &new_job("test.a", Some("tick"), at(0))).id();
    claim(&store, "w", at(0), at(30));
    store
        .write(|tx| Ok(tx.complete_job(id, "w", Some(at(3600)), at(1))?))
        .unwrap();
    let queued = job(&store, id).unwrap();
    assert_eq!((queued.state, queued.run_at), (JobState::Queued, at(3600)));
    let rolled_back: Result<(), DomainError> = store.write(|tx| {
        tx.enqueue_job(&new_job("test.a", None, at(0)), at(0))?;
        Err(StorageError::other("the caller's change failed").into())
    });
    assert!(rolled_back.is_err());
    let all = store.read(|tx| Ok(tx.list_jobs(None, 10)?)).unwrap();
    assert_eq!(all.len(), 1, "the enqueue went with its transaction");
}

fn failed_runs_back_off_and_operators_retry_and_cancel(backend: Backend) {
    let (_db, store) = TestDatabase::migrated(backend);
    let id = enqueue(&store, &new_job("test.a", None, at(0))).id();
    claim(&store, "w", at(0), at(30));
    store
        .write(|tx| Ok(tx.retry_job(id, "w", at(5), "connector down\0", at(1))?))
        .unwrap();
    let waiting = job(&store, id).unwrap();
    assert_eq!(
        (waiting.state, waiting.run_at, waiting.attempts),
        (JobState::Queued, at(5), 1)
    );
    assert_eq!(
        waiting.last_error.as_deref(),
        Some("connector down\u{FFFD}")
    );
    assert!(claim(&store, "w", at(4), at(30)).is_empty());
    claim(&store, "w", at(5), at(30));
    // Stopping early: back at once, the attempt not counted.
    store
        .write(|tx| Ok(tx.release_job(id, "w", at(6))?))
        .unwrap();
    let released = job(&store, id).unwrap();
    assert_eq!(
        (released.state, released.run_at, released.attempts),
        (JobState::Queued, at(6), 1)
    );
    claim(&store, "w", at(6), at(30));
    store
        .write(|tx| Ok(tx.fail_job(id, "w", "gave up", at(7))?))
        .unwrap();
    assert!(claim(&store, "w", at(1000), at(2000)).is_empty(), "failed");
    let failed = store
        .read(|tx| Ok(tx.list_jobs(Some(JobState::Failed), 10)?))
        .unwrap();
    assert_eq!(failed.len(), 1);
    let counts = store.read(|tx| Ok(tx.count_jobs()?)).unwrap();
    assert_eq!(
        counts
            .iter()
            .map(|c| (c.kind.as_str(), c.state, c.count))
            .collect::<Vec<_>>(),
        [("test.a", JobState::Failed, 1)]
    );
    assert_eq!(
        store.write(|tx| Ok(tx.requeue_jobs(None, at(8))?)).unwrap(),
        [id]
    );
    let requeued = job(&store, id).unwrap();
    assert_eq!(
        (requeued.state, requeued.attempts, requeued.run_at),
        (JobState::Queued, 0, at(8))
    );
    assert_eq!(
        store
            .write(|tx| Ok(tx.cancel_jobs(&[id, JobId(999)], at(9))?))
            .unwrap(),
        [id]
    );
    assert!(
        claim(&store, "w", at(1000), at(2000)).is_empty(),
        "cancelled"
    );
    // A running job cancelled: its holder's lease is gone.
    let running = enqueue(&store, &new_job("test.a", None, at(0))).id();
    claim(&store, "w", at(10), at(40));
    store
        .write(|tx| Ok(tx.cancel_jobs(&[running], at(11))?))
        .unwrap();
    assert!(
        store
            .write(|tx| Ok(tx.renew_job_leases(&[running], "w", at(50), at(12))?))
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        store
            .write(|tx| Ok(tx.requeue_jobs(Some(&[id, running]), at(13))?))
            .unwrap(),
        [id, running],
        "cancelled jobs can be requeued by id"
    );
}

/// Two claimers overlapping in time never take the same job: on PostgreSQL the second skips
/// the row the first locked (`SKIP LOCKED`) and does not wait; on SQLite the first one's write
/// transaction makes it wait, and it then sees the first one's lease. Then four claimers drain
/// the rest one job at a time, as the runner's workers do: each job claimed exactly once.
fn concurrent_claimers_never_share_a_job(backend: Backend) {
    let (_db, store) = TestDatabase::migrated(backend);
    for _ in 0..60 {
        enqueue(&store, &new_job("test.a", None, at(0)));
    }
    let claim_one = |store: &Store, worker: &str| -> Vec<JobId> {
        store
            .write(|tx| Ok(tx.claim_jobs(&["test.a"], worker, at(1), at(1000), 1)?))
            .unwrap()
            .into_iter()
            .map(|job| job.id)
            .collect()
    };
    let (first_ids, second_ids) = claim_concurrently(backend, &store, |tx, worker| {
        Ok(tx
            .claim_jobs(&["test.a"], worker, at(1), at(1000), 1)?
            .into_iter()
            .map(|job| job.id)
            .collect())
    });
    assert_eq!((first_ids.len(), second_ids.len()), (1, 1));
    assert_ne!(first_ids, second_ids);

    let workers: Vec<_> = (0..4)
        .map(|n| {
            let store = store.clone();
            std::thread::spawn(move || {
                let mut mine = Vec::new();
                for _ in 0..60 {
                    let batch = claim_one(&store, &format!("w{n}"));
                    if batch.is_empty() {
                        break;
                    }
                    mine.extend(batch);
                }
                mine
            })
        })
        .collect();
    let mut all: Vec<JobId> = first_ids.into_iter().chain(second_ids).collect();
    all.extend(workers.into_iter().flat_map(|w| w.join().unwrap()));
    all.sort_unstable();
    let before = all.len();
    all.dedup();
    assert_eq!(
        (before, all.len()),
        (60, 60),
        "every job claimed exactly once"
    );
}

/// Two transactions enqueue one key at once: the second waits for the first (PostgreSQL's
/// insert on the unique index, SQLite's lock), then coalesces; neither fails.
fn racing_enqueues_of_one_key_coalesce(backend: Backend) {
    let (_db, store) = TestDatabase::migrated(backend);
    let (inserted_tx, inserted_rx) = mpsc::channel();
    let (release_tx, release_rx) = mpsc::channel::<()>();
    let first = {
        let store = store.clone();
        std::thread::spawn(move || {
            store
                .write(|tx| {
                    let enqueued = tx.enqueue_job(&new_job("test.a", Some("k"), at(0)), at(0))?;
                    inserted_tx.send(()).unwrap();
                    release_rx.recv().unwrap();
                    Ok(enqueued)
                })
                .unwrap()
        })
    };
    inserted_rx.recv().unwrap();
    let second = {
        let store = store.clone();
        std::thread::spawn(move || enqueue(&store, &new_job("test.a", Some("k"), at(0))))
    };
    std::thread::sleep(Duration::from_millis(200));
    release_tx.send(()).unwrap();
    let first = first.join().unwrap();
    let second = second.join().unwrap();
    assert!(matches!(first, Enqueued::New(_)));
    assert_eq!(second, Enqueued::Coalesced(first.id()));
    assert_eq!(
        store.read(|tx| Ok(tx.list_jobs(None, 10)?)).unwrap().len(),
        1
    );
}

/// A job enqueued while a request is handled keeps the request's id through its claim, a
/// retry and an operator's requeue; one enqueued outside a request has none, and a job that
/// coalesces into an unfinished one keeps that job's.
fn jobs_keep_the_request_that_enqueued_them(backend: Backend) {
    use mercer_domain::kernel::jobs::{JobPayload, enqueue as enqueue_payload, within_request};

    #[derive(serde::Serialize, serde::Deserialize)]
    struct Keyed;
    impl JobPayload for Keyed {
        const KIND: &'static str = "test.a";
        fn unique_key(&self) -> Option<String> {
            Some("keyed".into())
        }
    }
    #[derive(serde::Serialize, serde::Deserialize)]
    struct Plain;
    impl JobPayload for Plain {
        const KIND: &'static str = "test.b";
    }

    let (_db, store) = TestDatabase::migrated(backend);
    let request = |id: &str| Some(std::sync::Arc::from(id));
    // As the HTTP edge runs a request's storage work: on another thread, within the request.
    let keyed = within_request(request("req-7"), || {
        store
            .write(|tx| enqueue_payload(tx, None, &Keyed, at(0), at(0)))
            .unwrap()
            .id()
    });
    let plain = store
        .write(|tx| enqueue_payload(tx, None, &Plain, at(0), at(0)))
        .unwrap()
        .id();
    let coalesced = within_request(request("req-8"), || {
        store
            .write(|tx| enqueue_payload(tx, None, &Keyed, at(0), at(0)))
            .unwrap()
    });
    assert_eq!(coalesced, Enqueued::Coalesced(keyed));
    let request_id = |id| job(&store, id).unwrap().request_id;
    assert_eq!(request_id(keyed).as_deref(), Some("req-7"));
    assert_eq!(request_id(plain), None);

    let claimed = claim(&store, "w1", at(1), at(30));
    assert_eq!(claimed.len(), 1);
    assert_eq!(claimed[0].request_id.as_deref(), Some("req-7"));
    assert!(
        store
            .write(|tx| Ok(tx.retry_job(keyed, "w1", at(2), "down", at(1))?))
            .unwrap()
    );
    let claimed = claim(&store, "w1", at(2), at(30));
    assert_eq!(claimed[0].request_id.as_deref(), Some("req-7"));
    assert!(
        store
            .write(|tx| Ok(tx.fail_job(keyed, "w1", "down", at(3))?))
            .unwrap()
    );
    store
        .write(|tx| Ok(tx.requeue_jobs(Some(&[keyed]), at(4))?))
        .unwrap();
    let listed = store.read(|tx| Ok(tx.list_jobs(None, 10)?)).unwrap();
    let kept: Vec<(JobId, Option<&str>)> = listed
        .iter()
        .map(|job| (job.id, job.request_id.as_deref()))
        .collect();
    assert_eq!(kept, [(keyed, Some("req-7")), (plain, None)]);
}

/// When traces are exported, a job keeps the trace context it was enqueued in (the domain's
/// `current_trace_parent`), and its claim reads it back; a job that coalesces into an unfinished
/// one keeps that job's, and one enqueued outside a traced span has none.
fn jobs_keep_the_trace_they_were_enqueued_in(backend: Backend) {
    use std::cell::RefCell;

    use mercer_domain::kernel::jobs::{
        JobPayload, TraceContextHooks, enqueue as enqueue_payload, install_trace_context_hooks,
    };

    thread_local! {
        static TRACE: RefCell<Option<String>> = const { RefCell::new(None) };
    }
    // This test binary's others never set TRACE: they enqueue outside any trace.
    install_trace_context_hooks(TraceContextHooks {
        capture: || TRACE.with(|trace| trace.borrow().clone()),
        continue_trace: |_| {},
    });
    let within_trace = |parent: Option<&str>, work: &dyn Fn() -> Enqueued| {
        TRACE.with(|trace| *trace.borrow_mut() = parent.map(str::to_string));
        let enqueued = work();
        TRACE.with(|trace| *trace.borrow_mut() = None);
        enqueued
    };

    #[derive(serde::Serialize, serde::Deserialize)]
    struct Keyed;
    impl JobPayload for Keyed {
        const KIND: &'static str = "test.a";
        fn unique_key(&self) -> Option<String> {
            Some("traced".into())
        }
    }
    #[derive(serde::Serialize, serde::Deserialize)]
    struct Plain;
    impl JobPayload for Plain {
        const KIND: &'static str = "test.a";
    }
    const FIRST: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    const SECOND: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

    let (_db, store) = TestDatabase::migrated(backend);
    let keyed = within_trace(Some(FIRST), &|| {
        store
            .write(|tx| enqueue_payload(tx, None, &Keyed, at(0), at(0)))
            .unwrap()
    });
    let coalesced = within_trace(Some(SECOND), &|| {
        store
            .write(|tx| enqueue_payload(tx, None, &Keyed, at(0), at(0)))
            .unwrap()
    });
    assert_eq!(coalesced, Enqueued::Coalesced(keyed.id()));
    let plain = within_trace(None, &|| {
        store
            .write(|tx| enqueue_payload(tx, None, &Plain, at(0), at(0)))
            .unwrap()
    });
    let mut claimed: Vec<(JobId, Option<String>)> = claim(&store, "w1", at(1), at(30))
        .into_iter()
        .map(|job| (job.id, job.trace_parent))
        .collect();
    claimed.sort();
    assert_eq!(
        claimed,
        [(keyed.id(), Some(FIRST.to_string())), (plain.id(), None)]
    );
}

backend_tests!(
    jobs_keep_the_trace_they_were_enqueued_in,
    jobs_keep_the_request_that_enqueued_them,
    jobs_are_claimed_leased_and_deleted_when_done,
    a_job_whose_lease_ran_out_is_claimed_again,
    unique_keys_coalesce_and_a_running_job_runs_again,
    jobs_enqueued_together_are_new_or_coalesced_as_one_at_a_time,
    recurring_jobs_come_back_and_enqueues_roll_back_with_their_transaction,
    failed_runs_back_off_and_operators_retry_and_cancel,
    concurrent_claimers_never_share_a_job,
    racing_enqueues_of_one_key_coalesce,
);
