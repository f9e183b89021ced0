//! A wake-up call for a worker thread, with polling as the fallback.

use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

/// A signal that wakes a waiting worker; clones share it. A notification sent while nobody
/// waits is kept, so the next wait returns at once.
#[derive(Clone, Default)]
pub struct Wake(Arc<(Mutex<bool>, Condvar)>);

impl Wake {
    /// Wakes whoever waits on the signal now, or the next wait.
    pub fn notify(&self) {
        let (flag, condvar) = &*self.0;
        *flag.lock().unwrap_or_else(|e| e.into_inner()) = true;
        condvar.notify_all();
    }

    /// Waits for a notification or `timeout`, whichever comes first.
    pub fn wait(&self, timeout: Duration) {
        let (flag, condvar) = &*self.0;
        let guard = flag.lock().unwrap_or_else(|e| e.into_inner());
        let (mut guard, _) = condvar
            .wait_timeout_while(guard, timeout, |woken| !*woken)
            .unwrap_or_else(|e| e.into_inner());
        *guard = false;
    }
}
