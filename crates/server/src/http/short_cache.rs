//! Successes kept for a short while, so a hot route does not repeat the same check on every
//! request: an API token's authorization (for [`ACCESS_TTL`], so the connector's event routes
//! do not go to the database for every event), and a customer token the shop's connector found
//! active (for [`CUSTOMER_TOKEN_TTL`], so a shopper's clicks do not each call the platform).
//! Only successes are kept: a refused credential is checked again on its next use, and a
//! revoked one is refused once its entry expires.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use mercer_domain::access::auth::Access;
use mercer_domain::access::shop::Shop;

pub const ACCESS_TTL: Duration = Duration::from_secs(2);
/// How long the connector's "active" for a customer token is trusted (contract §7).
pub const CUSTOMER_TOKEN_TTL: Duration = Duration::from_secs(60);
/// Beyond this many entries a cache starts afresh rather than grow.
const MAX_ENTRIES: usize = 10_000;

pub struct ShortCache<K, V> {
    ttl: Duration,
    entries: Mutex<HashMap<K, (Instant, V)>>,
}

impl<K: Hash + Eq, V: Clone> ShortCache<K, V> {
    pub fn new(ttl: Duration) -> Self {
        ShortCache {
            ttl,
            entries: Mutex::new(HashMap::new()),
        }
    }

    /// The value kept for `key`, if it was put less than the cache's time to live ago.
    pub fn get(&self, key: &K) -> Option<V> {
        let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        entries
            .get(key)
            .filter(|(kept, _)| kept.elapsed() < self.ttl)
            .map(|(_, value)| value.clone())
    }

    pub fn put(&self, key: K, value: V) {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        if entries.len() >= MAX_ENTRIES {
            entries.clear();
        }
        entries.insert(key, (Instant::now(), value));
    }
}

/// Authorizations by (token hash, shop identifier).
pub type AccessCache = ShortCache<(String, String), Access>;

/// Shops whose customer a token proved to be, by (token hash, shop identifier, customer's
/// platform id).
pub type CustomerTokenCache = ShortCache<(String, String, String), Shop>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_expire_after_their_time_to_live() {
        let cache: ShortCache<String, u32> = ShortCache::new(Duration::from_millis(50));
        cache.put("a".into(), 1);
        assert_eq!(cache.get(&"a".to_string()), Some(1));
        assert_eq!(cache.get(&"b".to_string()), None);
        std::thread::sleep(Duration::from_millis(60));
        assert_eq!(cache.get(&"a".to_string()), None);
    }
}
