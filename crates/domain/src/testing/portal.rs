//! The subscriber portal's sessions and the shops' branding, in memory, by the store's rules
//! (`repos/portal/`).

use super::MemoryState;
use crate::kernel::error::{StorageError, StoreResult};
use crate::kernel::ids::{PortalSessionId, ShopId};
use crate::kernel::time::Timestamp;
use crate::portal::PortalRepository;
use crate::portal::branding::PortalBranding;
use crate::portal::sessions::{NewPortalSession, PortalSession};

impl PortalRepository for MemoryState {
    fn insert_portal_session(&mut self, new: &NewPortalSession) -> StoreResult<()> {
        if self
            .portal_sessions
            .iter()
            .any(|(_, hash)| *hash == new.token_hash)
        {
            return Err(StorageError::unique_violation(
                "the portal session's token hash is taken",
            ));
        }
        if !self.shops.iter().any(|shop| shop.id == new.shop_id) {
            return Err(StorageError::other("no such shop"));
        }
        self.portal_session_count += 1;
        self.portal_sessions.push((
            PortalSession {
                id: PortalSessionId(self.portal_session_count),
                shop_id: new.shop_id,
                platform_customer_id: new.platform_customer_id.clone(),
                created_at: new.created_at,
                last_seen_at: new.created_at,
                expires_at: new.expires_at,
            },
            new.token_hash.clone(),
        ));
        Ok(())
    }

    fn portal_session_by_hash(&mut self, token_hash: &str) -> StoreResult<Option<PortalSession>> {
        Ok(self
            .portal_sessions
            .iter()
            .find(|(_, hash)| hash == token_hash)
            .map(|(session, _)| session.clone()))
    }

    fn renew_portal_session(
        &mut self,
        id: PortalSessionId,
        seen_at: Timestamp,
        expires_at: Timestamp,
    ) -> StoreResult<()> {
        for (session, _) in &mut self.portal_sessions {
            if session.id == id {
                session.last_seen_at = seen_at;
                session.expires_at = expires_at;
            }
        }
        Ok(())
    }

    fn delete_portal_session(&mut self, token_hash: &str) -> StoreResult<()> {
        self.portal_sessions.retain(|(_, hash)| hash != token_hash);
        Ok(())
    }

    fn forget_portal_sessions(&mut self, now: Timestamp) -> StoreResult<()> {
        self.portal_sessions
            .retain(|(session, _)| session.expires_at > now);
        Ok(())
    }

    fn portal_branding(&mut self, shop_id: ShopId) -> StoreResult<PortalBranding> {
        Ok(self
            .portal_branding
            .get(&shop_id)
            .cloned()
            .unwrap_or_default())
    }

    fn set_portal_branding(
        &mut self,
        shop_id: ShopId,
        branding: &PortalBranding,
        now: Timestamp,
    ) -> StoreResult<bool> {
        let Some(shop) = self.shops.iter_mut().find(|shop| shop.id == shop_id) else {
            return Ok(false);
        };
        shop.updated_at = now;
        self.portal_branding.insert(shop_id, branding.clone());
        Ok(true)
    }
}
