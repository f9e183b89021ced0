//! A `mercer serve` process's row in the database's table of running processes: registered once
//! it has migrated, refreshed by a heartbeat on a thread of its own (the store blocks), removed
//! when it stops cleanly. A binary with migrations to apply refuses to while processes of
//! another schema are alive; and should a newer Mercer migrate the database anyway (after this
//! process's row went stale), the heartbeat finds the migration it does not know and stops the
//! process rather than let it write with stale assumptions.

use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use mercer_domain::Timestamp;
use mercer_store::Store;
use mercer_store::processes::{Heartbeat, Registration};
use tokio::sync::oneshot;

/// How often a process refreshes its row.
pub const INTERVAL: Duration = Duration::from_secs(10);

/// Overrides [`INTERVAL`], in milliseconds: for tests, which cannot wait three heartbeats of
/// ten seconds. Not a setting.
const INTERVAL_VARIABLE: &str = "MERCER_HEARTBEAT_INTERVAL_MS";

/// The interval this process heartbeats at.
pub fn interval() -> Duration {
    std::env::var(INTERVAL_VARIABLE)
        .ok()
        .and_then(|text| text.parse::<u64>().ok())
        .filter(|millis| *millis > 0)
        .map_or(INTERVAL, Duration::from_millis)
}

/// The running heartbeat.
pub struct Presence {
    store: Store,
    registration: Registration,
    stop: Option<Sender<()>>,
    thread: Option<JoinHandle<()>>,
    /// Why the heartbeat stopped the process, once it did.
    newer: Arc<Mutex<Option<String>>>,
}

impl Presence {
    /// Registers the process and starts its heartbeat. `newer` is told once (with the refusal)
    /// when the database turns out to be migrated by a newer Mercer: the server must stop.
    pub fn start(
        store: &Store,
        interval: Duration,
        newer: oneshot::Sender<String>,
    ) -> Result<Presence, mercer_domain::StorageError> {
        let registration = store.register_process(interval, Timestamp::now())?;
        let (stop, stopped) = mpsc::channel::<()>();
        let found = Arc::new(Mutex::new(None));
        let thread = {
            let (store, registration, found) = (store.clone(), registration.clone(), found.clone());
            std::thread::Builder::new()
                .name("mercer-heartbeat".to_string())
                .spawn(move || {
                    let mut newer = Some(newer);
                    loop {
                        match stopped.recv_timeout(interval) {
                            Err(RecvTimeoutError::Timeout) => {}
                            Ok(()) | Err(RecvTimeoutError::Disconnected) => return,
                        }
                        match store.heartbeat(&registration, Timestamp::now()) {
                            Ok(Heartbeat::Serving) => {}
                            Ok(Heartbeat::NewerDatabase(refusal)) => {
                                log::error!("stopping: {refusal}");
                                *found.lock().unwrap_or_else(|e| e.into_inner()) =
                                    Some(refusal.clone());
                                if let Some(newer) = newer.take() {
                                    let _ = newer.send(refusal);
                                }
                                return;
                            }
                            // The database may be restarting: the next heartbeat tries again,
                            // and the row is stale only after three missed ones.
                            Err(error) => log::warn!("heartbeat: {error}"),
                        }
                    }
                })
                .map_err(|error| {
                    mercer_domain::StorageError::other(format!(
                        "cannot start the heartbeat thread: {error}"
                    ))
                })?
        };
        Ok(Presence {
            store: store.clone(),
            registration,
            stop: Some(stop),
            thread: Some(thread),
            newer: found,
        })
    }

    /// Stops the heartbeat and removes the process's row; returns why the heartbeat stopped the
    /// process, if it did.
    pub fn stop(mut self) -> Option<String> {
        self.halt();
        self.newer.lock().unwrap_or_else(|e| e.into_inner()).take()
    }

    fn halt(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        if let Err(error) = self.store.unregister_process(&self.registration) {
            log::warn!("cannot remove this process from the running processes: {error}");
        }
    }
}

impl Drop for Presence {
    fn drop(&mut self) {
        if self.thread.is_some() {
            self.halt();
        }
    }
}
