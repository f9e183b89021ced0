//! The webhook enqueue writers: messages the API enqueues for an endpoint it already knows (a
//! test delivery) are stored by a few threads, each taking every message waiting when it is
//! free and storing them in one statement (`insert_webhook_messages_for_live_endpoints`): on
//! PostgreSQL one round trip and one commit (one WAL flush) for a burst of requests instead of
//! four round trips and a commit each. Several writers, so that a statement waiting on the
//! database (or on a busy core) does not hold up the requests behind it when there are few to
//! batch. Each request has its answer only once the statement holding its message committed.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use mercer_domain::kernel::ids::MessageId;
use mercer_domain::ports::Database;
use mercer_domain::webhooks::{NewWebhookMessage, WebhookKind};
use mercer_domain::{DomainError, StorageError};
use mercer_store::Store;
use tokio::sync::oneshot;

/// Most messages one statement stores.
const BATCH: usize = 256;
/// Writer threads: statements in flight at once.
const WRITERS: usize = 4;
/// How often the idle writer looks whether it was asked to stop.
const IDLE_POLL: Duration = Duration::from_millis(500);

type Reply = oneshot::Sender<Result<Option<MessageId>, DomainError>>;

struct Job {
    kind: WebhookKind,
    message: NewWebhookMessage,
    reply: Reply,
}

/// The handle request handlers enqueue through.
#[derive(Clone)]
pub struct WebhookEnqueue {
    jobs: Sender<Job>,
}

impl WebhookEnqueue {
    /// Starts the writer thread. Once `stop` is set, it ends when nothing is left to store.
    /// The callers wake the dispatchers, after their answer is on its way: woken here, they
    /// would take the cores the answers wait for.
    pub fn start(
        store: Store,
        stop: &Arc<AtomicBool>,
    ) -> std::io::Result<(WebhookEnqueue, Vec<JoinHandle<()>>)> {
        let (jobs, received) = mpsc::channel();
        let received = Arc::new(Mutex::new(received));
        let mut threads = Vec::with_capacity(WRITERS);
        for _ in 0..WRITERS {
            let (store, received, stop) = (store.clone(), received.clone(), stop.clone());
            threads.push(
                std::thread::Builder::new()
                    .name("mercer-enqueue".to_string())
                    .spawn(move || writer(store, received, stop))?,
            );
        }
        Ok((WebhookEnqueue { jobs }, threads))
    }

    /// Stores `message` if its endpoint, of `kind`, still takes it; its row id once committed,
    /// None when the endpoint does not take it (the caller then finds out why).
    pub async fn submit(
        &self,
        kind: WebhookKind,
        message: NewWebhookMessage,
    ) -> Result<Option<MessageId>, DomainError> {
        let (reply, answer) = oneshot::channel();
        let stopped = || {
            DomainError::Storage(StorageError::other(
                "the webhook enqueue writer has stopped",
            ))
        };
        self.jobs
            .send(Job {
                kind,
                message,
                reply,
            })
            .map_err(|_| stopped())?;
        answer.await.map_err(|_| stopped())?
    }
}

/// Waits for the first job (at most `wait`), then takes every job already queued, up to
/// [`BATCH`]. None when nothing came.
fn next_batch(jobs: &Receiver<Job>, wait: Duration) -> Result<Option<Vec<Job>>, RecvTimeoutError> {
    let first = match jobs.recv_timeout(wait) {
        Ok(job) => job,
        Err(RecvTimeoutError::Timeout) => return Ok(None),
        Err(disconnected) => return Err(disconnected),
    };
    let mut batch = vec![first];
    while batch.len() < BATCH {
        match jobs.try_recv() {
            Ok(job) => batch.push(job),
            Err(_) => break,
        }
    }
    Ok(Some(batch))
}

/// One writer: waits its turn to take a batch (the others store theirs meanwhile), then
/// stores it.
fn writer(store: Store, jobs: Arc<Mutex<Receiver<Job>>>, stop: Arc<AtomicBool>) {
    loop {
        // Once stopping, the writers queued for the lock behind an idle one do not each wait
        // out a poll.
        let wait = if stop.load(Ordering::Relaxed) {
            Duration::ZERO
        } else {
            IDLE_POLL
        };
        let batch = next_batch(&jobs.lock().unwrap_or_else(|e| e.into_inner()), wait);
        match batch {
            Ok(Some(batch)) => store_batch(&store, batch),
            // Asked to stop and nothing is waiting: every request has had its answer.
            Ok(None) if stop.load(Ordering::Relaxed) => return,
            Ok(None) => {}
            Err(_) => return,
        }
    }
}

/// Stores a batch, one statement per kind of endpoint in it (in practice one), and answers
/// each job. A failed statement answers its error to every job of that statement: none of
/// them was stored.
fn store_batch(store: &Store, batch: Vec<Job>) {
    let mut by_kind: Vec<(WebhookKind, Vec<NewWebhookMessage>, Vec<Reply>)> = Vec::new();
    for job in batch {
        let at = match by_kind.iter().position(|(kind, _, _)| *kind == job.kind) {
            Some(at) => at,
            None => {
                by_kind.push((job.kind, Vec::new(), Vec::new()));
                by_kind.len() - 1
            }
        };
        by_kind[at].1.push(job.message);
        by_kind[at].2.push(job.reply);
    }
    for (kind, messages, replies) in by_kind {
        let result = store.write_statement(|tx| {
            Ok(tx.insert_webhook_messages_for_live_endpoints(kind, &messages)?)
        });
        match result {
            Ok(ids) => {
                for (reply, id) in replies.into_iter().zip(ids) {
                    let _ = reply.send(Ok(id));
                }
            }
            Err(error) => {
                log::error!(target: "mercer::webhooks", "storing {} webhook message(s) failed: {error}", messages.len());
                for reply in replies {
                    let _ = reply.send(Err(error.clone()));
                }
            }
        }
    }
}
