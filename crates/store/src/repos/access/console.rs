//! The operator console's staff sessions and audit log.

use diesel::prelude::*;
use mercer_domain::Timestamp;
use mercer_domain::access::ConsoleRepository;
use mercer_domain::access::console::{AuditEntry, NewAuditEntry, NewStaffSession, StaffSession};
use mercer_domain::kernel::error::StoreResult;
use mercer_domain::kernel::ids::{AuditEntryId, ShopId, StaffId, StaffSessionId};

use crate::repos::StoreTx;
use crate::schema::{audit_log, staff_accounts, staff_sessions};
use crate::store::storage_error;

fn time(micros: i64) -> Timestamp {
    Timestamp::from_micros(micros)
}

#[derive(Queryable, Selectable)]
#[diesel(table_name = audit_log)]
struct AuditRow {
    id: i64,
    shop_id: i64,
    staff_id: i64,
    staff_email: String,
    action: String,
    subject: String,
    at: i64,
}

impl ConsoleRepository for StoreTx<'_> {
    fn insert_staff_session(&mut self, new: &NewStaffSession) -> StoreResult<()> {
        diesel::insert_into(staff_sessions::table)
            .values((
                staff_sessions::token_hash.eq(&new.token_hash),
                staff_sessions::shop_id.eq(new.shop_id.0),
                staff_sessions::staff_id.eq(new.staff_id.0),
                staff_sessions::created_at.eq(new.created_at.as_micros()),
                staff_sessions::last_seen_at.eq(new.created_at.as_micros()),
                staff_sessions::expires_at.eq(new.expires_at.as_micros()),
            ))
            .execute(self.conn)
            .map_err(storage_error)?;
        Ok(())
    }

    fn staff_session_by_hash(&mut self, token_hash: &str) -> StoreResult<Option<StaffSession>> {
        type Row = (i64, i64, i64, String, i64, i64, i64);
        let row: Option<Row> = staff_sessions::table
            .inner_join(staff_accounts::table)
            .filter(staff_sessions::token_hash.eq(token_hash))
            .select((
                staff_sessions::id,
                staff_sessions::shop_id,
                staff_sessions::staff_id,
                staff_accounts::email,
                staff_sessions::created_at,
                staff_sessions::last_seen_at,
                staff_sessions::expires_at,
            ))
            .first(self.conn)
            .optional()
            .map_err(storage_error)?;
        Ok(row.map(
            |(id, shop_id, staff_id, staff_email, created_at, last_seen_at, expires_at)| {
                StaffSession {
                    id: StaffSessionId(id),
                    shop_id: ShopId(shop_id),
                    staff_id: StaffId(staff_id),
                    staff_email,
                    created_at: time(created_at),
                    last_seen_at: time(last_seen_at),
                    expires_at: time(expires_at),
                }
            },
        ))
    }

    fn touch_staff_session(&mut self, id: StaffSessionId, now: Timestamp) -> StoreResult<()> {
        diesel::update(staff_sessions::table.filter(staff_sessions::id.eq(id.0)))
            .set(staff_sessions::last_seen_at.eq(now.as_micros()))
            .execute(self.conn)
            .map_err(storage_error)?;
        Ok(())
    }

    fn delete_staff_session(&mut self, token_hash: &str) -> StoreResult<()> {
        diesel::delete(staff_sessions::table.filter(staff_sessions::token_hash.eq(token_hash)))
            .execute(self.conn)
            .map_err(storage_error)?;
        Ok(())
    }

    fn delete_sessions_of_staff(&mut self, staff_id: StaffId) -> StoreResult<()> {
        diesel::delete(staff_sessions::table.filter(staff_sessions::staff_id.eq(staff_id.0)))
            .execute(self.conn)
            .map_err(storage_error)?;
        Ok(())
    }

    fn forget_staff_sessions(&mut self, idle_before: Timestamp, now: Timestamp) -> StoreResult<()> {
        diesel::delete(
            staff_sessions::table.filter(
                staff_sessions::expires_at
                    .le(now.as_micros())
                    .or(staff_sessions::last_seen_at.lt(idle_before.as_micros())),
            ),
        )
        .execute(self.conn)
        .map_err(storage_error)?;
        Ok(())
    }

    fn insert_audit_entry(&mut self, new: &NewAuditEntry) -> StoreResult<()> {
        diesel::insert_into(audit_log::table)
            .values((
                audit_log::shop_id.eq(new.shop_id.0),
                audit_log::staff_id.eq(new.staff_id.0),
                audit_log::staff_email.eq(&new.staff_email),
                audit_log::action.eq(&new.action),
                audit_log::subject.eq(&new.subject),
                audit_log::at.eq(new.at.as_micros()),
            ))
            .execute(self.conn)
            .map_err(storage_error)?;
        Ok(())
    }

    fn audit_entries(
        &mut self,
        shop_id: ShopId,
        before: Option<AuditEntryId>,
        limit: usize,
    ) -> StoreResult<Vec<AuditEntry>> {
        let mut query = audit_log::table
            .filter(audit_log::shop_id.eq(shop_id.0))
            .into_boxed();
        if let Some(before) = before {
            query = query.filter(audit_log::id.lt(before.0));
        }
        let rows: Vec<AuditRow> = query
            .order(audit_log::id.desc())
            .limit(i64::try_from(limit).unwrap_or(i64::MAX))
            .select(AuditRow::as_select())
            .load(self.conn)
            .map_err(storage_error)?;
        Ok(rows
            .into_iter()
            .map(|row| AuditEntry {
                id: AuditEntryId(row.id),
                shop_id: ShopId(row.shop_id),
                staff_id: StaffId(row.staff_id),
                staff_email: row.staff_email,
                action: row.action,
                subject: row.subject,
                at: time(row.at),
            })
            .collect())
    }
}
