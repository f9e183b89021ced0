//! What the subscriber portal needs from storage: its sessions, and the shop's branding of its
//! pages. Everything else it reads and changes through the subscriptions' and the box builder's
//! use cases.

use crate::box_builder::repository::BoxBuilderRepositories;
use crate::kernel::error::StoreResult;
use crate::kernel::ids::{PortalSessionId, ShopId};
use crate::kernel::time::Timestamp;
use crate::portal::branding::PortalBranding;
use crate::portal::sessions::{NewPortalSession, PortalSession};

crate::feature_database!(
    /// The database as the subscriber portal sees it.
    PortalDatabase,
    PortalRepositories
);

/// Every repository the portal's use cases may touch in one unit of work: its own, and the box
/// builder's (which holds the subscriptions', the directory's and the platform's).
pub trait PortalRepositories: BoxBuilderRepositories + PortalRepository {}

impl<T> PortalRepositories for T where T: BoxBuilderRepositories + PortalRepository + ?Sized {}

/// The portal's own storage: sessions (found by their token's hash, never the token) and the
/// shop's branding columns.
pub trait PortalRepository {
    /// Stores a new session.
    fn insert_portal_session(&mut self, new: &NewPortalSession) -> StoreResult<()>;
    /// The session with this token hash, if there is one (ended or not).
    fn portal_session_by_hash(&mut self, token_hash: &str) -> StoreResult<Option<PortalSession>>;
    /// Notes that the session was used at `seen_at`; it now ends at `expires_at`.
    fn renew_portal_session(
        &mut self,
        id: PortalSessionId,
        seen_at: Timestamp,
        expires_at: Timestamp,
    ) -> StoreResult<()>;
    /// Deletes the session with this token hash, if there is one.
    fn delete_portal_session(&mut self, token_hash: &str) -> StoreResult<()>;
    /// Deletes every session that ended at or before `now`, of every shop.
    fn forget_portal_sessions(&mut self, now: Timestamp) -> StoreResult<()>;
    /// The shop's branding of the portal (none of it set for a shop that has none).
    fn portal_branding(&mut self, shop_id: ShopId) -> StoreResult<PortalBranding>;
    /// Writes the shop's branding; false when there is no such shop.
    fn set_portal_branding(
        &mut self,
        shop_id: ShopId,
        branding: &PortalBranding,
        now: Timestamp,
    ) -> StoreResult<bool>;
}
