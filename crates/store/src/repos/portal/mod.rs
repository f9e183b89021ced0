//! The subscriber portal's sessions (found by their token's hash) and the shops' branding of
//! their portal (two columns of `shops`, read and written only here).

use diesel::prelude::*;
use mercer_domain::Timestamp;
use mercer_domain::kernel::error::StoreResult;
use mercer_domain::kernel::ids::{PortalSessionId, ShopId};
use mercer_domain::portal::PortalRepository;
use mercer_domain::portal::branding::PortalBranding;
use mercer_domain::portal::sessions::{NewPortalSession, PortalSession};

use crate::repos::StoreTx;
use crate::schema::{portal_sessions, shops};
use crate::store::storage_error;

#[derive(Queryable, Selectable)]
#[diesel(table_name = portal_sessions)]
struct SessionRow {
    id: i64,
    shop_id: i64,
    platform_customer_id: String,
    created_at: i64,
    last_seen_at: i64,
    expires_at: i64,
}

impl From<SessionRow> for PortalSession {
    fn from(row: SessionRow) -> Self {
        PortalSession {
            id: PortalSessionId(row.id),
            shop_id: ShopId(row.shop_id),
            platform_customer_id: row.platform_customer_id,
            created_at: Timestamp::from_micros(row.created_at),
            last_seen_at: Timestamp::from_micros(row.last_seen_at),
            expires_at: Timestamp::from_micros(row.expires_at),
        }
    }
}

#[derive(Queryable, Selectable)]
#[diesel(table_name = shops)]
struct BrandingRow {
    portal_accent: Option<String>,
    portal_logo_url: Option<String>,
}

impl PortalRepository for StoreTx<'_> {
    fn insert_portal_session(&mut self, new: &NewPortalSession) -> StoreResult<()> {
        diesel::insert_into(portal_sessions::table)
            .values((
                portal_sessions::token_hash.eq(&new.token_hash),
                portal_sessions::shop_id.eq(new.shop_id.0),
                portal_sessions::platform_customer_id.eq(&new.platform_customer_id),
                portal_sessions::created_at.eq(new.created_at.as_micros()),
                portal_sessions::last_seen_at.eq(new.created_at.as_micros()),
                portal_sessions::expires_at.eq(new.expires_at.as_micros()),
            ))
            .execute(self.conn)
            .map_err(storage_error)?;
        Ok(())
    }

    fn portal_session_by_hash(&mut self, token_hash: &str) -> StoreResult<Option<PortalSession>> {
        let row: Option<SessionRow> = portal_sessions::table
            .filter(portal_sessions::token_hash.eq(token_hash))
            .select(SessionRow::as_select())
            .first(self.conn)
            .optional()
            .map_err(storage_error)?;
        Ok(row.map(PortalSession::from))
    }

    fn renew_portal_session(
        &mut self,
        id: PortalSessionId,
        seen_at: Timestamp,
        expires_at: Timestamp,
    ) -> StoreResult<()> {
        diesel::update(portal_sessions::table.filter(portal_sessions::id.eq(id.0)))
            .set((
                portal_sessions::last_seen_at.eq(seen_at.as_micros()),
                portal_sessions::expires_at.eq(expires_at.as_micros()),
            ))
            .execute(self.conn)
            .map_err(storage_error)?;
        Ok(())
    }

    fn delete_portal_session(&mut self, token_hash: &str) -> StoreResult<()> {
        diesel::delete(portal_sessions::table.filter(portal_sessions::token_hash.eq(token_hash)))
            .execute(self.conn)
            .map_err(storage_error)?;
        Ok(())
    }

    fn forget_portal_sessions(&mut self, now: Timestamp) -> StoreResult<()> {
        diesel::delete(
            portal_sessions::table.filter(portal_sessions::expires_at.le(now.as_micros())),
        )
        .execute(self.conn)
        .map_err(storage_error)?;
        Ok(())
    }

    fn portal_branding(&mut self, shop_id: ShopId) -> StoreResult<PortalBranding> {
        let row: Option<BrandingRow> = shops::table
            .filter(shops::id.eq(shop_id.0))
            .select(BrandingRow::as_select())
            .first(self.conn)
            .optional()
            .map_err(storage_error)?;
        Ok(
            row.map_or_else(PortalBranding::default, |row| PortalBranding {
                accent: row.portal_accent,
                logo_url: row.portal_logo_url,
            }),
        )
    }

    fn set_portal_branding(
        &mut self,
        shop_id: ShopId,
        branding: &PortalBranding,
        now: Timestamp,
    ) -> StoreResult<bool> {
        let changed = diesel::update(shops::table.filter(shops::id.eq(shop_id.0)))
            .set((
                shops::portal_accent.eq(&branding.accent),
                shops::portal_logo_url.eq(&branding.logo_url),
                shops::updated_at.eq(now.as_micros()),
            ))
            .execute(self.conn)
            .map_err(storage_error)?;
        Ok(changed > 0)
    }
}
