//! Successful authorizations kept for a short while, so the hot routes (connector events) do
//! not go to the database for the same token on every request. Only successes are kept, for
//! [`ACCESS_TTL`]: a revoked token is refused within that time, by every process.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use mercer_domain::access::auth::Access;

pub const ACCESS_TTL: Duration = Duration::from_secs(2);
/// Beyond this many entries the cache starts afresh rather than grow.
const MAX_ENTRIES: usize = 10_000;

#[derive(Default)]
pub struct AccessCache {
    entries: Mutex<HashMap<(String, String), (Instant, Access)>>,
}

impl AccessCache {
    /// The access of `token_hash` on `shop`, if it was granted less than [`ACCESS_TTL`] ago.
    pub fn get(&self, token_hash: &str, shop: &str) -> Option<Access> {
        let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        let key = (token_hash.to_string(), shop.to_string());
        entries
            .get(&key)
            .filter(|(granted, _)| granted.elapsed() < ACCESS_TTL)
            .map(|(_, access)| access.clone())
    }

    pub fn put(&self, token_hash: &str, shop: &str, access: &Access) {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        if entries.len() >= MAX_ENTRIES {
            entries.clear();
        }
        entries.insert(
            (token_hash.to_string(), shop.to_string()),
            (Instant::now(), access.clone()),
        );
    }
}
