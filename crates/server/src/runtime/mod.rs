//! Background work of a `mercer serve` process, each on a thread of its own (diesel and ureq
//! block): the ingest writer that stores events before their 202, the applier that applies
//! them in order, the job runner (`mercer_jobs`, with the handlers of this process's kinds:
//! syncs, connector outbox deliveries, the subscription scheduler and its orders
//! ([`scheduler`]), the checkout's jobs ([`checkout`]), the webhook retention purge
//! ([`retention`])), and on SQLite the checkpointer that
//! copies the WAL back into the database file.

pub mod checkout;
pub mod enqueue;
pub mod retention;
pub mod scheduler;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::thread::JoinHandle;
use std::time::Duration;

use mercer_domain::DomainError;
use mercer_domain::checkout::processing::PushOrderJob;
use mercer_domain::checkout::sweeps::AbandonmentJob;
use mercer_domain::kernel::activity::{self, ActivityPruneJob};
use mercer_domain::kernel::jobs::JobOutcome;
use mercer_domain::kernel::time::{Clock, OffsetClock};
use mercer_domain::platform::connector::PlatformConnectorHandle;
use mercer_domain::platform::events::{
    Accepted, CustomerChangedJob, NewInboundEvent, OrderFulfilledJob, accept_events, apply_pending,
};
use mercer_domain::platform::outbox::{OutboxJob, deliver_shop_calls};
use mercer_domain::platform::sync::{SyncJob, run_sync_job};
use mercer_domain::ports::Database;
use mercer_domain::subscriptions::customers::announce_platform_customer_change;
use mercer_domain::subscriptions::scheduler::{OrderJob, SchedulerJob};
use mercer_domain::webhooks::retention::WebhookRetentionJob;
use mercer_jobs::{JobHandlers, JobRunner, JobRunnerConfig};
use mercer_store::{Backend, Store};
use tokio::sync::oneshot;

pub use self::scheduler::SchedulerConfig;

/// Most events one ingest transaction stores (several requests' worth: group commit).
const INGEST_BATCH: usize = 512;
/// Most events the applier applies in one transaction.
const APPLY_BATCH: usize = 500;
/// On SQLite, where storing waits while applying: small batches keep the 202s quick.
const SQLITE_APPLY_BATCH: usize = 200;
/// How often idle workers look for work nobody told them about (another process's, a retry).
const IDLE_POLL: Duration = Duration::from_millis(500);
/// How soon the applier looks again when due events were in partitions another process held.
const HELD_ELSEWHERE_PAUSE: Duration = Duration::from_millis(5);
/// SQLite: the least time between two checkpoints while events keep coming. Pages written
/// again meanwhile are copied back once.
const CHECKPOINT_INTERVAL: Duration = Duration::from_millis(25);

pub use mercer_domain::kernel::wake::Wake;

struct IngestJob {
    events: Vec<NewInboundEvent>,
    reply: oneshot::Sender<Result<(), DomainError>>,
}

/// The handle request handlers use to store events durably.
#[derive(Clone)]
pub struct Ingest {
    jobs: Sender<IngestJob>,
}

impl Ingest {
    /// Stores the events; returns once they are committed.
    pub async fn submit(&self, events: Vec<NewInboundEvent>) -> Result<(), DomainError> {
        let (reply, answer) = oneshot::channel();
        let stopped = || {
            DomainError::Storage(mercer_domain::StorageError::other(
                "the ingest writer has stopped",
            ))
        };
        self.jobs
            .send(IngestJob { events, reply })
            .map_err(|_| stopped())?;
        answer.await.map_err(|_| stopped())?
    }
}

/// Takes jobs as they come and stores everything waiting in one transaction, so a burst of
/// requests costs one commit, not one each.
/// Waits for the first job (at most `wait`), then takes every job already queued, up to
/// [`INGEST_BATCH`] events. None when nothing came.
fn next_batch(
    jobs: &Receiver<IngestJob>,
    wait: Duration,
) -> Result<Option<Vec<IngestJob>>, RecvTimeoutError> {
    let first = match jobs.recv_timeout(wait) {
        Ok(job) => job,
        Err(RecvTimeoutError::Timeout) => return Ok(None),
        Err(disconnected) => return Err(disconnected),
    };
    let mut count = first.events.len();
    let mut batch = vec![first];
    while count < INGEST_BATCH {
        match jobs.try_recv() {
            Ok(job) => {
                count += job.events.len();
                batch.push(job);
            }
            Err(_) => break,
        }
    }
    Ok(Some(batch))
}

/// Stores a batch of requests' events in one transaction and answers each request. With
/// `apply_at_once`, events nothing waits before are applied in that transaction instead
/// ([`accept_events`]); should applying fail, they are queued as usual.
/// None when storing failed (every request then has its error).
fn store_batch(
    store: &Store,
    clock: &OffsetClock,
    batch: Vec<IngestJob>,
    apply_at_once: bool,
) -> Option<Accepted> {
    let mut events: Vec<NewInboundEvent> = Vec::with_capacity(batch.len());
    let mut replies = Vec::with_capacity(batch.len());
    for job in batch {
        events.extend(job.events);
        replies.push(job.reply);
    }
    let queue = || store.queue_inbound_events(&events);
    let result = if apply_at_once {
        let now = clock.now();
        store
            .write(|tx| accept_events(tx, &events, now))
            .or_else(|error| {
                log::warn!(target: "mercer::events", "applying {} event(s) at once failed ({error}); queueing them", events.len());
                queue().map(|()| Accepted::Queued)
            })
    } else {
        queue().map(|()| Accepted::Queued)
    };
    match &result {
        Ok(Accepted::Applied) => count_applied_here(events.len()),
        Ok(Accepted::Queued) => {}
        Err(error) => {
            log::error!(target: "mercer::ingest", "storing {} event(s) failed: {error}", events.len());
        }
    }
    for reply in replies {
        let _ = reply.send(result.clone().map(|_| ()));
    }
    result.ok()
}

/// PostgreSQL: the ingest writer only stores; appliers (of any process) run beside it.
fn ingest_writer(
    store: Store,
    clock: OffsetClock,
    jobs: Receiver<IngestJob>,
    applier: Wake,
    stop: Arc<AtomicBool>,
) {
    loop {
        match next_batch(&jobs, IDLE_POLL) {
            Ok(Some(batch)) => {
                if store_batch(&store, &clock, batch, false).is_some() {
                    applier.notify();
                }
            }
            // Asked to stop and nothing is waiting: every request has had its answer.
            Ok(None) if stop.load(Ordering::Relaxed) => return,
            Ok(None) => {}
            Err(_) => return,
        }
    }
}

/// SQLite has one writer at a time, and a second writer waiting for the lock sleeps rather
/// than waking when it frees. So one thread does all the event writing: it takes what
/// requests sent and applies it at once when nothing waits before it, or queues it; queued
/// events (and those a sync stored) it applies a small batch at a time between requests,
/// never blocking while work is queued.
fn sqlite_writer(
    store: Store,
    clock: OffsetClock,
    jobs: Receiver<IngestJob>,
    wake: Wake,
    commits: Wake,
    stop: Arc<AtomicBool>,
) {
    let mut backlog = false;
    loop {
        let wait = if backlog {
            Duration::ZERO
        } else {
            IDLE_POLL.min(Duration::from_millis(100))
        };
        let (stored, queued) = match next_batch(&jobs, wait) {
            Ok(Some(batch)) => match store_batch(&store, &clock, batch, true) {
                Some(accepted) => {
                    commits.notify();
                    (true, accepted == Accepted::Queued)
                }
                None => (false, false),
            },
            // Nothing came: a moment to look for events a sync queued.
            Ok(None) => (false, true),
            Err(_) => return,
        };
        if !(backlog || queued) {
            continue;
        }
        backlog = match apply_pending(&store, &clock, SQLITE_APPLY_BATCH) {
            Ok(batch) => {
                count_applied_here(batch.events);
                if batch.events > 0 {
                    commits.notify();
                }
                batch.events > 0
            }
            Err(error) => {
                log::error!(target: "mercer::events", "applying events failed: {error}");
                wake.wait(IDLE_POLL);
                false
            }
        };
        if !stored && !backlog && stop.load(Ordering::Relaxed) {
            return;
        }
    }
}

/// SQLite: copies committed pages back into the database file off the writer's path, at most
/// every [`CHECKPOINT_INTERVAL`] while the writer commits, so the writer's own checkpoint
/// (when the WAL reaches its size) has only the last pages left to copy.
fn checkpointer(store: Store, commits: Wake, stop: Arc<AtomicBool>) {
    loop {
        commits.wait(IDLE_POLL);
        if let Err(error) = store.checkpoint() {
            log::warn!(target: "mercer::store", "checkpoint failed: {error}");
        }
        if stop.load(Ordering::Relaxed) {
            return;
        }
        std::thread::sleep(CHECKPOINT_INTERVAL);
    }
}

/// Counts events this process applied, for `/metrics`: with several processes on one
/// PostgreSQL database, each applies the partitions it holds, and this shows its share.
fn count_applied_here(events: usize) {
    if events > 0 {
        metrics::counter!("mercer_events_applied_total").increment(events as u64);
    }
}

/// PostgreSQL: applies queued events, of the partitions no other process holds.
fn applier(store: Store, clock: OffsetClock, wake: Wake, stop: Arc<AtomicBool>) {
    while !stop.load(Ordering::Relaxed) {
        match apply_pending(&store, &clock, APPLY_BATCH) {
            Ok(batch) if batch.events > 0 => count_applied_here(batch.events),
            // Another process holds what is due: it may be done with it soon.
            Ok(batch) if batch.held_elsewhere => wake.wait(HELD_ELSEWHERE_PAUSE),
            Ok(_) => wake.wait(IDLE_POLL),
            Err(error) => {
                log::error!(target: "mercer::events", "applying events failed: {error}");
                wake.wait(IDLE_POLL);
            }
        }
    }
}

/// The kinds of job a `mercer serve` process runs, with their handlers.
fn job_handlers(
    store: &Store,
    connector: PlatformConnectorHandle,
    clock: OffsetClock,
    config: BackgroundConfig,
    applier: Wake,
) -> JobHandlers {
    let (sync_store, sync_connector) = (store.clone(), connector.clone());
    let (outbox_store, outbox_connector) = (store.clone(), connector.clone());
    let (scheduler_store, order_store) = (store.clone(), store.clone());
    let (push_store, push_connector) = (store.clone(), connector.clone());
    let (sweep_store, fulfilled_store) = (store.clone(), store.clone());
    let (customer_store, prune_store) = (store.clone(), store.clone());
    let retention_store = store.clone();
    let BackgroundConfig {
        scheduler: scheduler_config,
        checkout: checkout_config,
        retention: retention_config,
    } = config;
    JobHandlers::default()
        .register(move |sync: SyncJob, job, control| {
            let ran = run_sync_job(
                &sync_store,
                sync_connector.as_ref(),
                &clock,
                sync,
                job,
                control,
            );
            // The pages' events wait in the queue.
            applier.notify();
            ran
        })
        .register(move |outbox: OutboxJob, _job, control| {
            deliver_shop_calls(
                &outbox_store,
                outbox_connector.as_ref(),
                &clock,
                outbox,
                control,
            )
        })
        .register(move |_: SchedulerJob, _job, control| {
            scheduler::run(&scheduler_store, clock, scheduler_config, control)
        })
        .register(move |order: OrderJob, _job, control| {
            scheduler::place(&order_store, connector.as_ref(), clock, order, control)
        })
        .register(move |push: PushOrderJob, job, _control| {
            checkout::push(&push_store, push_connector.as_ref(), clock, push, job)
        })
        .register(move |_: AbandonmentJob, _job, control| {
            checkout::sweep(&sweep_store, clock, checkout_config, control)
        })
        .register(move |fulfilled: OrderFulfilledJob, _job, _control| {
            checkout::fulfilled(&fulfilled_store, clock, fulfilled)
        })
        .register(move |changed: CustomerChangedJob, _job, _control| {
            customer_store
                .write(|tx| announce_platform_customer_change(tx, &changed, clock.now()))?;
            Ok(JobOutcome::Done)
        })
        .register(move |_: ActivityPruneJob, _job, _control| {
            let now = clock.now();
            let pruned = prune_store.write(|tx| activity::prune(tx, now))?;
            log::debug!(target: "mercer::jobs", "{pruned} activity buckets pruned");
            Ok(JobOutcome::RunAgainAt(
                now.plus_seconds(activity::PRUNE_INTERVAL_SECONDS),
            ))
        })
        .register(move |_: WebhookRetentionJob, _job, control| {
            retention::run(&retention_store, clock, retention_config, control)
        })
}

/// How the recurring jobs run in this process.
#[derive(Debug, Clone, Copy, Default)]
pub struct BackgroundConfig {
    pub scheduler: SchedulerConfig,
    pub checkout: checkout::CheckoutConfig,
    pub retention: retention::RetentionConfig,
}

/// The running workers of one process.
pub struct Workers {
    pub ingest: Ingest,
    pub applier: Wake,
    /// Wakes the job runner after an enqueue.
    pub jobs: Wake,
    runner: JobRunner<Store>,
    /// SQLite's checkpointer (woken by commits; on PostgreSQL nobody waits on it).
    checkpoint: Wake,
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

fn spawn(name: &str, work: impl FnOnce() + Send + 'static) -> std::io::Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name(name.to_string())
        .spawn(work)
}

impl Workers {
    pub fn start(
        store: &Store,
        connector: PlatformConnectorHandle,
        clock: OffsetClock,
        jobs: JobRunnerConfig,
        background: BackgroundConfig,
    ) -> std::io::Result<Workers> {
        let stop = Arc::new(AtomicBool::new(false));
        let applier_wake = Wake::default();
        let checkpoint_wake = Wake::default();
        let (ingested, received) = mpsc::channel();
        let mut threads = Vec::new();
        match store.backend() {
            Backend::Sqlite => {
                let (writer_store, wake, commits, writer_stop) = (
                    store.clone(),
                    applier_wake.clone(),
                    checkpoint_wake.clone(),
                    stop.clone(),
                );
                threads.push(spawn("mercer-writer", move || {
                    sqlite_writer(writer_store, clock, received, wake, commits, writer_stop)
                })?);
                let (store, commits, stop) = (store.clone(), checkpoint_wake.clone(), stop.clone());
                threads.push(spawn("mercer-checkpoint", move || {
                    checkpointer(store, commits, stop)
                })?);
            }
            Backend::Postgres => {
                let (ingest_store, wake, ingest_stop) =
                    (store.clone(), applier_wake.clone(), stop.clone());
                threads.push(spawn("mercer-ingest", move || {
                    ingest_writer(ingest_store, clock, received, wake, ingest_stop)
                })?);
                let (store, wake, stop) = (store.clone(), applier_wake.clone(), stop.clone());
                threads.push(spawn("mercer-applier", move || {
                    applier(store, clock, wake, stop)
                })?);
            }
        }
        let runner = JobRunner::start(
            store.clone(),
            clock,
            job_handlers(store, connector, clock, background, applier_wake.clone()),
            jobs,
            Wake::default(),
        )?;
        Ok(Workers {
            ingest: Ingest { jobs: ingested },
            applier: applier_wake,
            jobs: runner.wake(),
            runner,
            checkpoint: checkpoint_wake,
            stop,
            threads,
        })
    }

    /// Call after the HTTP server has stopped: running jobs stop at their next step and go
    /// back to the queue, the ingest writer stores what is still queued, the applier finishes
    /// its batch, then the threads end.
    pub fn stop(self) {
        self.runner.stop();
        self.stop.store(true, Ordering::Relaxed);
        self.applier.notify();
        self.checkpoint.notify();
        for thread in self.threads {
            let _ = thread.join();
        }
    }
}
