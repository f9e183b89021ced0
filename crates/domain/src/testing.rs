//! An in-memory implementation of the storage ports, for testing use cases without a database.
//! A unit of work runs on a copy of the state that replaces the state only when the work
//! succeeds, which is what a transaction does.

use std::sync::{Arc, Mutex, MutexGuard};

use crate::credentials::{ApiToken, NewApiToken};
use crate::error::DomainError;
use crate::ports::{
    Database, Repositories, SecretRepository, ShopRepository, StoreResult, TokenRepository,
};
use crate::secrets::{SecretKind, SharedSecret};
use crate::shop::{NewShop, Shop, ShopIdentifier};
use crate::time::Timestamp;

#[derive(Debug, Clone, Default)]
pub struct MemoryState {
    pub shops: Vec<Shop>,
    pub tokens: Vec<(ApiToken, String)>,
    pub secrets: Vec<SharedSecret>,
}

#[derive(Debug, Clone, Default)]
pub struct MemoryDatabase {
    state: Arc<Mutex<MemoryState>>,
}

impl MemoryDatabase {
    fn lock(&self) -> MutexGuard<'_, MemoryState> {
        // A test that panicked while holding the lock leaves usable state behind.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Lets a test reach into the state directly.
    pub fn with_state<T>(&self, f: impl FnOnce(&mut MemoryState) -> T) -> T {
        f(&mut self.lock())
    }
}

impl Database for MemoryDatabase {
    fn read<T>(
        &self,
        work: impl FnOnce(&mut dyn Repositories) -> Result<T, DomainError>,
    ) -> Result<T, DomainError> {
        let mut copy = self.lock().clone();
        work(&mut copy)
    }

    fn write<T>(
        &self,
        work: impl FnOnce(&mut dyn Repositories) -> Result<T, DomainError>,
    ) -> Result<T, DomainError> {
        let mut state = self.lock();
        let mut copy = state.clone();
        let result = work(&mut copy)?;
        *state = copy;
        Ok(result)
    }
}

impl ShopRepository for MemoryState {
    fn insert_shop(&mut self, new: &NewShop) -> StoreResult<Shop> {
        let shop = Shop {
            id: self.shops.len() as i64 + 1,
            identifier: new.identifier.clone(),
            shop_domain: new.shop_domain.clone(),
            custom_domain: new.custom_domain.clone(),
            platform_type: new.platform_type.clone(),
            timezone: new.timezone.clone(),
            currency: new.currency.clone(),
            currency_format: new.currency_format.clone(),
            shop_owner: new.shop_owner.clone(),
            admin_email: new.admin_email.clone(),
            pii_redacted_at: None,
            created_at: new.created_at,
            updated_at: new.created_at,
            deleted_at: None,
        };
        self.shops.push(shop.clone());
        Ok(shop)
    }

    fn shop_by_identifier(&mut self, identifier: &ShopIdentifier) -> StoreResult<Option<Shop>> {
        Ok(self
            .shops
            .iter()
            .find(|s| &s.identifier == identifier)
            .cloned())
    }

    fn shop_by_domain(&mut self, domain: &str) -> StoreResult<Option<Shop>> {
        Ok(self.shops.iter().find(|s| s.shop_domain == domain).cloned())
    }

    fn count_shops(&mut self) -> StoreResult<i64> {
        Ok(self.shops.len() as i64)
    }

    fn list_shops(&mut self) -> StoreResult<Vec<Shop>> {
        Ok(self.shops.clone())
    }
}

impl TokenRepository for MemoryState {
    fn insert_token(&mut self, new: &NewApiToken) -> StoreResult<ApiToken> {
        let token = ApiToken {
            id: self.tokens.len() as i64 + 1,
            shop_id: new.shop_id,
            name: new.name.clone(),
            token_prefix: new.token_prefix.clone(),
            scopes: new.scopes.clone(),
            source: new.source,
            created_at: new.created_at,
            revoked_at: None,
        };
        self.tokens.push((token.clone(), new.token_hash.clone()));
        Ok(token)
    }

    fn active_token_by_hash(&mut self, token_hash: &str) -> StoreResult<Option<ApiToken>> {
        Ok(self
            .tokens
            .iter()
            .find(|(token, hash)| hash == token_hash && token.revoked_at.is_none())
            .map(|(token, _)| token.clone()))
    }

    fn tokens_of_shop(&mut self, shop_id: i64) -> StoreResult<Vec<ApiToken>> {
        Ok(self
            .tokens
            .iter()
            .filter(|(token, _)| token.shop_id == shop_id)
            .map(|(token, _)| token.clone())
            .collect())
    }

    fn revoke_token(&mut self, shop_id: i64, token_id: i64, at: Timestamp) -> StoreResult<bool> {
        let live = self.tokens.iter_mut().find(|(token, _)| {
            token.id == token_id && token.shop_id == shop_id && token.revoked_at.is_none()
        });
        Ok(match live {
            Some((token, _)) => {
                token.revoked_at = Some(at);
                true
            }
            None => false,
        })
    }
}

impl SecretRepository for MemoryState {
    fn shared_secret(
        &mut self,
        shop_id: i64,
        kind: SecretKind,
    ) -> StoreResult<Option<SharedSecret>> {
        Ok(self
            .secrets
            .iter()
            .find(|s| s.shop_id == shop_id && s.kind == kind)
            .cloned())
    }

    fn save_shared_secret(&mut self, secret: &SharedSecret) -> StoreResult<()> {
        self.secrets
            .retain(|s| !(s.shop_id == secret.shop_id && s.kind == secret.kind));
        self.secrets.push(secret.clone());
        Ok(())
    }
}
