//! The ports: what the domain needs from the outside world, as traits. `mercer-store` implements
//! the storage ports over SQLite and PostgreSQL; [`crate::testing`] implements them in memory.

use crate::credentials::{ApiToken, NewApiToken};
use crate::error::{DomainError, StorageError};
use crate::secrets::{SecretKind, SharedSecret};
use crate::shop::{NewShop, Shop, ShopIdentifier};
use crate::time::Timestamp;

pub type StoreResult<T> = Result<T, StorageError>;

pub trait ShopRepository {
    fn insert_shop(&mut self, shop: &NewShop) -> StoreResult<Shop>;
    fn shop_by_identifier(&mut self, identifier: &ShopIdentifier) -> StoreResult<Option<Shop>>;
    fn shop_by_domain(&mut self, domain: &str) -> StoreResult<Option<Shop>>;
    fn count_shops(&mut self) -> StoreResult<i64>;
    /// All shops, oldest first.
    fn list_shops(&mut self) -> StoreResult<Vec<Shop>>;
}

pub trait TokenRepository {
    fn insert_token(&mut self, token: &NewApiToken) -> StoreResult<ApiToken>;
    /// The token with this SHA-256 hash, unless it was revoked.
    fn active_token_by_hash(&mut self, token_hash: &str) -> StoreResult<Option<ApiToken>>;
    /// Every token of the shop, revoked ones included, oldest first.
    fn tokens_of_shop(&mut self, shop_id: i64) -> StoreResult<Vec<ApiToken>>;
    /// Marks the token revoked; false when the shop has no such live token.
    fn revoke_token(&mut self, shop_id: i64, token_id: i64, at: Timestamp) -> StoreResult<bool>;
}

pub trait SecretRepository {
    fn shared_secret(
        &mut self,
        shop_id: i64,
        kind: SecretKind,
    ) -> StoreResult<Option<SharedSecret>>;
    /// Inserts or replaces the shop's secret of that kind.
    fn save_shared_secret(&mut self, secret: &SharedSecret) -> StoreResult<()>;
}

/// Everything a use case may touch inside one unit of work.
pub trait Repositories: ShopRepository + TokenRepository + SecretRepository {}

impl<T: ShopRepository + TokenRepository + SecretRepository> Repositories for T {}

/// A database that runs units of work. `write` runs its closure in one transaction that commits
/// only when the closure returns `Ok`; `read` is for work that changes nothing.
pub trait Database: Clone + Send + Sync + 'static {
    fn read<T>(
        &self,
        work: impl FnOnce(&mut dyn Repositories) -> Result<T, DomainError>,
    ) -> Result<T, DomainError>;

    fn write<T>(
        &self,
        work: impl FnOnce(&mut dyn Repositories) -> Result<T, DomainError>,
    ) -> Result<T, DomainError>;
}

/// The time of day, as a port so rules about time are testable.
pub trait Clock: Send + Sync + 'static {
    fn now(&self) -> Timestamp;
}

#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Timestamp {
        Timestamp::now()
    }
}
