//! OAuth apps, staff accounts and authorization codes.

use diesel::prelude::*;
use mercer_domain::access::OAuthRepository;
use mercer_domain::access::credentials::{ApiToken, ScopeSet};
use mercer_domain::access::oauth::{
    AuthorizationCode, NewAuthorizationCode, NewOAuthApp, NewStaffAccount, OAuthApp, SignInKey,
    StaffAccount,
};
use mercer_domain::kernel::error::StoreResult;
use mercer_domain::kernel::ids::{AuthorizationCodeId, OAuthAppId, ShopId, StaffId, TokenId};
use mercer_domain::{StorageError, Timestamp};

use crate::connection::on_backend;
use crate::repos::StoreTx;
use crate::rows::TokenRow;
use crate::schema::{
    api_tokens, oauth_apps, oauth_codes, sign_in_failures, staff_accounts, staff_sessions,
};
use crate::store::storage_error;

fn time(micros: i64) -> Timestamp {
    Timestamp::from_micros(micros)
}

#[derive(Queryable, Selectable)]
#[diesel(table_name = oauth_apps)]
struct AppRow {
    id: i64,
    client_id: String,
    client_secret_hash: String,
    name: String,
    redirect_uris: String,
    created_at: i64,
    revoked_at: Option<i64>,
}

impl TryFrom<AppRow> for OAuthApp {
    type Error = StorageError;

    fn try_from(row: AppRow) -> Result<Self, StorageError> {
        Ok(OAuthApp {
            id: OAuthAppId(row.id),
            client_id: row.client_id,
            client_secret_hash: row.client_secret_hash,
            name: row.name,
            redirect_uris: serde_json::from_str(&row.redirect_uris)
                .map_err(|error| StorageError::other(format!("stored redirect_uris: {error}")))?,
            created_at: time(row.created_at),
            revoked_at: row.revoked_at.map(time),
        })
    }
}

#[derive(Queryable, Selectable)]
#[diesel(table_name = staff_accounts)]
struct StaffRow {
    id: i64,
    shop_id: i64,
    email: String,
    password_hash: String,
    created_at: i64,
    last_sign_in_at: Option<i64>,
}

impl From<StaffRow> for StaffAccount {
    fn from(row: StaffRow) -> Self {
        StaffAccount {
            id: StaffId(row.id),
            shop_id: ShopId(row.shop_id),
            email: row.email,
            password_hash: row.password_hash,
            created_at: time(row.created_at),
            last_sign_in_at: row.last_sign_in_at.map(time),
        }
    }
}

#[derive(Queryable, Selectable)]
#[diesel(table_name = oauth_codes)]
struct CodeRow {
    id: i64,
    app_id: i64,
    shop_id: i64,
    staff_id: i64,
    redirect_uri: String,
    scopes: String,
    code_challenge: Option<String>,
    expires_at: i64,
    used_at: Option<i64>,
    token_id: Option<i64>,
}

impl TryFrom<CodeRow> for AuthorizationCode {
    type Error = StorageError;

    fn try_from(row: CodeRow) -> Result<Self, StorageError> {
        Ok(AuthorizationCode {
            id: AuthorizationCodeId(row.id),
            app_id: OAuthAppId(row.app_id),
            shop_id: ShopId(row.shop_id),
            staff_id: StaffId(row.staff_id),
            redirect_uri: row.redirect_uri,
            scopes: ScopeSet::parse(&row.scopes)
                .map_err(|unknown| StorageError::other(format!("stored scopes {unknown:?}")))?,
            code_challenge: row.code_challenge,
            expires_at: time(row.expires_at),
            used_at: row.used_at.map(time),
            token_id: row.token_id.map(TokenId),
        })
    }
}

impl OAuthRepository for StoreTx<'_> {
    fn insert_oauth_app(&mut self, new: &NewOAuthApp) -> StoreResult<OAuthApp> {
        let uris = serde_json::to_string(&new.redirect_uris)
            .map_err(|error| StorageError::other(error.to_string()))?;
        let values = (
            oauth_apps::client_id.eq(&new.client_id),
            oauth_apps::client_secret_hash.eq(&new.client_secret_hash),
            oauth_apps::name.eq(&new.name),
            oauth_apps::redirect_uris.eq(uris),
            oauth_apps::created_at.eq(new.created_at.as_micros()),
            oauth_apps::updated_at.eq(new.created_at.as_micros()),
        );
        let row: AppRow = on_backend!(&mut *self.conn, |c| {
            diesel::insert_into(oauth_apps::table)
                .values(values)
                .returning(AppRow::as_returning())
                .get_result(c)
        })
        .map_err(storage_error)?;
        row.try_into()
    }

    fn oauth_app_by_client_id(&mut self, client_id: &str) -> StoreResult<Option<OAuthApp>> {
        oauth_apps::table
            .filter(oauth_apps::client_id.eq(client_id))
            .select(AppRow::as_select())
            .first(self.conn)
            .optional()
            .map_err(storage_error)?
            .map(OAuthApp::try_from)
            .transpose()
    }

    fn insert_staff_account(&mut self, new: &NewStaffAccount) -> StoreResult<StaffAccount> {
        let values = (
            staff_accounts::shop_id.eq(new.shop_id.0),
            staff_accounts::email.eq(&new.email),
            staff_accounts::password_hash.eq(&new.password_hash),
            staff_accounts::created_at.eq(new.created_at.as_micros()),
            staff_accounts::updated_at.eq(new.created_at.as_micros()),
        );
        let row: StaffRow = on_backend!(&mut *self.conn, |c| {
            diesel::insert_into(staff_accounts::table)
                .values(values)
                .returning(StaffRow::as_returning())
                .get_result(c)
        })
        .map_err(storage_error)?;
        Ok(row.into())
    }

    fn staff_account(&mut self, shop_id: ShopId, email: &str) -> StoreResult<Option<StaffAccount>> {
        Ok(staff_accounts::table
            .filter(staff_accounts::shop_id.eq(shop_id.0))
            .filter(staff_accounts::email.eq(email))
            .select(StaffRow::as_select())
            .first(self.conn)
            .optional()
            .map_err(storage_error)?
            .map(StaffAccount::from))
    }

    fn staff_account_by_id(&mut self, id: StaffId) -> StoreResult<Option<StaffAccount>> {
        Ok(staff_accounts::table
            .filter(staff_accounts::id.eq(id.0))
            .select(StaffRow::as_select())
            .first(self.conn)
            .optional()
            .map_err(storage_error)?
            .map(StaffAccount::from))
    }

    fn list_oauth_apps(&mut self) -> StoreResult<Vec<OAuthApp>> {
        oauth_apps::table
            .order(oauth_apps::id.asc())
            .select(AppRow::as_select())
            .load(self.conn)
            .map_err(storage_error)?
            .into_iter()
            .map(OAuthApp::try_from)
            .collect()
    }

    fn revoke_oauth_app(&mut self, id: OAuthAppId, at: Timestamp) -> StoreResult<bool> {
        let changed = diesel::update(
            oauth_apps::table
                .filter(oauth_apps::id.eq(id.0))
                .filter(oauth_apps::revoked_at.is_null()),
        )
        .set((
            oauth_apps::revoked_at.eq(at.as_micros()),
            oauth_apps::updated_at.eq(at.as_micros()),
        ))
        .execute(self.conn)
        .map_err(storage_error)?;
        Ok(changed == 1)
    }

    fn oauth_app_tokens(&mut self, id: OAuthAppId) -> StoreResult<Vec<ApiToken>> {
        let issued = oauth_codes::table
            .filter(oauth_codes::app_id.eq(id.0))
            .filter(oauth_codes::token_id.is_not_null())
            .select(oauth_codes::token_id.assume_not_null());
        api_tokens::table
            .filter(api_tokens::id.eq_any(issued))
            .order(api_tokens::id.asc())
            .select(TokenRow::as_select())
            .load(self.conn)
            .map_err(storage_error)?
            .into_iter()
            .map(ApiToken::try_from)
            .collect()
    }

    fn staff_of_shop(&mut self, shop_id: ShopId) -> StoreResult<Vec<StaffAccount>> {
        Ok(staff_accounts::table
            .filter(staff_accounts::shop_id.eq(shop_id.0))
            .order(staff_accounts::id.asc())
            .select(StaffRow::as_select())
            .load(self.conn)
            .map_err(storage_error)?
            .into_iter()
            .map(StaffAccount::from)
            .collect())
    }

    fn delete_staff_account(&mut self, id: StaffId) -> StoreResult<()> {
        // The codes it approved refer to it; its sessions too (deleted with it on either
        // database, but said here rather than left to the cascade).
        diesel::delete(oauth_codes::table.filter(oauth_codes::staff_id.eq(id.0)))
            .execute(self.conn)
            .map_err(storage_error)?;
        diesel::delete(staff_sessions::table.filter(staff_sessions::staff_id.eq(id.0)))
            .execute(self.conn)
            .map_err(storage_error)?;
        diesel::delete(staff_accounts::table.filter(staff_accounts::id.eq(id.0)))
            .execute(self.conn)
            .map_err(storage_error)?;
        Ok(())
    }

    fn set_staff_password(
        &mut self,
        id: StaffId,
        password_hash: &str,
        at: Timestamp,
    ) -> StoreResult<()> {
        diesel::update(staff_accounts::table.filter(staff_accounts::id.eq(id.0)))
            .set((
                staff_accounts::password_hash.eq(password_hash),
                staff_accounts::updated_at.eq(at.as_micros()),
            ))
            .execute(self.conn)
            .map_err(storage_error)?;
        Ok(())
    }

    fn note_staff_sign_in(&mut self, id: StaffId, at: Timestamp) -> StoreResult<()> {
        diesel::update(staff_accounts::table.filter(staff_accounts::id.eq(id.0)))
            .set(staff_accounts::last_sign_in_at.eq(at.as_micros()))
            .execute(self.conn)
            .map_err(storage_error)?;
        Ok(())
    }

    fn sign_in_locked_until(&mut self, key: &SignInKey) -> StoreResult<Option<Timestamp>> {
        use sign_in_failures::dsl as f;
        Ok(f::sign_in_failures
            .filter(f::account_key.eq(&key.account))
            .filter(f::client.eq(&key.client))
            .select(f::locked_until)
            .first::<Option<i64>>(self.conn)
            .optional()
            .map_err(storage_error)?
            .flatten()
            .map(time))
    }

    fn count_sign_in_failure(&mut self, key: &SignInKey, now: Timestamp) -> StoreResult<i32> {
        use sign_in_failures::dsl as f;
        // One statement: failures at the same moment each count (the row is locked, or made,
        // by the one that gets there first).
        on_backend!(&mut *self.conn, |c| {
            diesel::insert_into(f::sign_in_failures)
                .values((
                    f::account_key.eq(&key.account),
                    f::client.eq(&key.client),
                    f::failures.eq(1),
                    f::updated_at.eq(now.as_micros()),
                ))
                .on_conflict((f::account_key, f::client))
                .do_update()
                .set((
                    f::failures.eq(f::failures + 1),
                    f::updated_at.eq(now.as_micros()),
                ))
                .returning(f::failures)
                .get_result::<i32>(c)
        })
        .map_err(storage_error)
    }

    fn lock_sign_in(
        &mut self,
        key: &SignInKey,
        until: Timestamp,
        now: Timestamp,
    ) -> StoreResult<()> {
        use sign_in_failures::dsl as f;
        diesel::update(
            f::sign_in_failures
                .filter(f::account_key.eq(&key.account))
                .filter(f::client.eq(&key.client)),
        )
        .set((
            f::locked_until.eq(until.as_micros()),
            f::updated_at.eq(now.as_micros()),
        ))
        .execute(self.conn)
        .map_err(storage_error)?;
        Ok(())
    }

    fn clear_sign_in_failures(&mut self, key: &SignInKey) -> StoreResult<()> {
        use sign_in_failures::dsl as f;
        diesel::delete(
            f::sign_in_failures
                .filter(f::account_key.eq(&key.account))
                .filter(f::client.eq(&key.client)),
        )
        .execute(self.conn)
        .map_err(storage_error)?;
        Ok(())
    }

    fn forget_sign_in_failures(&mut self, before: Timestamp) -> StoreResult<()> {
        use sign_in_failures::dsl as f;
        diesel::delete(f::sign_in_failures.filter(f::updated_at.lt(before.as_micros())))
            .execute(self.conn)
            .map_err(storage_error)?;
        Ok(())
    }

    fn insert_authorization_code(&mut self, new: &NewAuthorizationCode) -> StoreResult<()> {
        diesel::insert_into(oauth_codes::table)
            .values((
                oauth_codes::code_hash.eq(&new.code_hash),
                oauth_codes::app_id.eq(new.app_id.0),
                oauth_codes::shop_id.eq(new.shop_id.0),
                oauth_codes::staff_id.eq(new.staff_id.0),
                oauth_codes::redirect_uri.eq(&new.redirect_uri),
                oauth_codes::scopes.eq(new.scopes.to_string()),
                oauth_codes::code_challenge.eq(new.code_challenge.as_deref()),
                oauth_codes::expires_at.eq(new.expires_at.as_micros()),
                oauth_codes::created_at.eq(new.created_at.as_micros()),
            ))
            .execute(self.conn)
            .map_err(storage_error)?;
        Ok(())
    }

    fn authorization_code_by_hash(
        &mut self,
        code_hash: &str,
    ) -> StoreResult<Option<AuthorizationCode>> {
        oauth_codes::table
            .filter(oauth_codes::code_hash.eq(code_hash))
            .select(CodeRow::as_select())
            .first(self.conn)
            .optional()
            .map_err(storage_error)?
            .map(AuthorizationCode::try_from)
            .transpose()
    }

    fn redeem_authorization_code(
        &mut self,
        id: AuthorizationCodeId,
        token_id: TokenId,
        now: Timestamp,
    ) -> StoreResult<bool> {
        // The `used_at IS NULL` condition makes a second exchange at the same moment lose.
        let changed = diesel::update(
            oauth_codes::table
                .filter(oauth_codes::id.eq(id.0))
                .filter(oauth_codes::used_at.is_null()),
        )
        .set((
            oauth_codes::used_at.eq(now.as_micros()),
            oauth_codes::token_id.eq(token_id.0),
        ))
        .execute(self.conn)
        .map_err(storage_error)?;
        Ok(changed == 1)
    }
}
