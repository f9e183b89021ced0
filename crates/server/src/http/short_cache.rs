//! Successes kept for a short while, so a hot route does not repeat the same check on every
//! request: an API token's authorization (for [`ACCESS_TTL`], so the connector's event routes
//! do not go to the database for every event), and a customer token the shop's connector found
//! active (for [`CUSTOMER_TOKEN_TTL`], so a shopper's clicks do not each call the platform).
//! Only successes are kept: a refused credential is checked again on its next use, and a
//! revoked one is refused once its entry expires.
//!
//! Each cache holds at most [`MAX_ENTRIES`] entries: past that, the least used ones are evicted
//! (the others stay), so a flood of distinct credentials cannot grow the memory.

use std::hash::Hash;
use std::time::Duration;

use mercer_domain::access::auth::Access;
use mercer_domain::access::shop::Shop;
use mercer_domain::webhooks::KnownEndpoint;

pub const ACCESS_TTL: Duration = Duration::from_secs(2);
/// How long the connector's "active" for a customer token is trusted before the platform is
/// asked again.
pub const CUSTOMER_TOKEN_TTL: Duration = Duration::from_secs(60);
/// The most entries a cache holds.
const MAX_ENTRIES: u64 = 10_000;

pub struct ShortCache<K, V> {
    entries: moka::sync::Cache<K, V>,
}

impl<K, V> ShortCache<K, V>
where
    K: Hash + Eq + Send + Sync + 'static,
    V: Clone + Send + Sync + 'static,
{
    pub fn new(ttl: Duration) -> Self {
        Self::bounded(ttl, MAX_ENTRIES)
    }

    fn bounded(ttl: Duration, max_entries: u64) -> Self {
        ShortCache {
            entries: moka::sync::Cache::builder()
                .max_capacity(max_entries)
                .time_to_live(ttl)
                .build(),
        }
    }

    /// The value kept for `key`, if it was put less than the cache's time to live ago.
    pub fn get(&self, key: &K) -> Option<V> {
        self.entries.get(key)
    }

    pub fn put(&self, key: K, value: V) {
        self.entries.insert(key, value);
    }

    /// Drops what is kept for `key`.
    pub fn forget(&self, key: &K) {
        self.entries.invalidate(key);
    }
}

/// Authorizations by (token hash, shop identifier).
pub type AccessCache = ShortCache<(String, String), Access>;

/// How long a checkout webhook's row id and topic are kept for its test deliveries. Nothing
/// depends on them being current: the statement that stores a message checks the webhook
/// again, and one it does not store goes the long way (which answers a deleted or disabled
/// webhook's error). The time only bounds how long an entry stays unused.
pub const KNOWN_WEBHOOK_TTL: Duration = Duration::from_secs(300);

/// Checkout webhooks by (shop's row id, webhook's public id), as a test delivery found them.
pub type KnownWebhooks = ShortCache<(i64, String), KnownEndpoint>;

/// API tokens whose last use this process wrote lately, by token id: a token in it is not
/// written again until its entry expires (`TOKEN_USE_PRECISION_SECONDS`), so requests do not
/// each write.
pub type TokenUses = ShortCache<i64, ()>;

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

    #[test]
    fn a_cache_stays_within_its_bound_without_starting_afresh() {
        let cache: ShortCache<u32, u32> = ShortCache::bounded(Duration::from_secs(60), 100);
        for key in 0..1_000 {
            cache.put(key, key);
        }
        cache.entries.run_pending_tasks();
        let kept = cache.entries.entry_count();
        assert!(
            kept <= 100,
            "{kept} entries kept, more than the bound of 100"
        );
        assert!(kept > 0, "the cache emptied itself instead of evicting");
    }
}
