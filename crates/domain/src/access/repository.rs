//! What access needs from storage: shops, tokens, shared secrets, OAuth apps and staff.

use crate::access::console::{AuditEntry, NewAuditEntry, NewStaffSession, StaffSession};
use crate::access::credentials::{ApiToken, NewApiToken};
use crate::access::oauth::{
    AuthorizationCode, NewAuthorizationCode, NewOAuthApp, NewStaffAccount, OAuthApp, SignInKey,
    StaffAccount,
};
use crate::access::secrets::{SecretKind, SharedSecret};
use crate::access::shop::{NewShop, Shop, ShopIdentifier};
use crate::kernel::error::StoreResult;
use crate::kernel::ids::{
    AuditEntryId, AuthorizationCodeId, OAuthAppId, ShopId, StaffId, StaffSessionId, TokenId,
};
use crate::kernel::time::Timestamp;

crate::feature_database!(
    /// The database as access sees it.
    AccessDatabase,
    AccessRepositories
);

/// Every repository access's use cases may touch in one unit of work.
pub trait AccessRepositories:
    ShopRepository + TokenRepository + SecretRepository + OAuthRepository + ConsoleRepository
{
}

impl<T> AccessRepositories for T where
    T: ShopRepository
        + TokenRepository
        + SecretRepository
        + OAuthRepository
        + ConsoleRepository
        + ?Sized
{
}

/// Shops and their settings.
pub trait ShopRepository {
    /// Stores a new shop, with the default subscription and checkout settings, and returns it.
    fn insert_shop(&mut self, shop: &NewShop) -> StoreResult<Shop>;
    /// The shop with this identifier, deleted or not.
    fn shop_by_identifier(&mut self, identifier: &ShopIdentifier) -> StoreResult<Option<Shop>>;
    /// The shop with this domain (lowercase), deleted or not.
    fn shop_by_domain(&mut self, domain: &str) -> StoreResult<Option<Shop>>;
    /// The shop with this row id, deleted or not.
    fn shop_by_id(&mut self, id: ShopId) -> StoreResult<Option<Shop>>;
    /// How many shops there are, deleted ones included.
    fn count_shops(&mut self) -> StoreResult<i64>;
    /// Writes the shop's settings (time zone, currency and its format) and `updated_at`.
    fn update_shop_settings(&mut self, shop: &Shop) -> StoreResult<()>;
    /// All shops, oldest first.
    fn list_shops(&mut self) -> StoreResult<Vec<Shop>>;
    /// Sets the shop's `deleted_at`, unless it is deleted already: false then.
    fn mark_shop_deleted(&mut self, shop_id: ShopId, at: Timestamp) -> StoreResult<bool>;
}

/// API tokens, kept as hashes.
pub trait TokenRepository {
    /// Stores a new token record and returns it.
    fn insert_token(&mut self, token: &NewApiToken) -> StoreResult<ApiToken>;
    /// The token with this SHA-256 hash, unless it was revoked.
    fn active_token_by_hash(&mut self, token_hash: &str) -> StoreResult<Option<ApiToken>>;
    /// Every token of the shop, revoked ones included, oldest first.
    fn tokens_of_shop(&mut self, shop_id: ShopId) -> StoreResult<Vec<ApiToken>>;
    /// Marks the token revoked; false when the shop has no such live token.
    fn revoke_token(
        &mut self,
        shop_id: ShopId,
        token_id: TokenId,
        at: Timestamp,
    ) -> StoreResult<bool>;
    /// Revokes every live token of the shop; answers how many.
    fn revoke_shop_tokens(&mut self, shop_id: ShopId, at: Timestamp) -> StoreResult<usize>;
    /// Sets the token's `last_used_at` to `at`, unless it is after `unless_after` (a use noted
    /// lately): one conditional update. Answers whether it wrote.
    fn note_token_use(
        &mut self,
        token_id: TokenId,
        at: Timestamp,
        unless_after: Timestamp,
    ) -> StoreResult<bool>;
}

/// The shops' shared secrets, one of each kind a shop.
pub trait SecretRepository {
    /// The shop's secret of `kind`, if it has one.
    fn shared_secret(
        &mut self,
        shop_id: ShopId,
        kind: SecretKind,
    ) -> StoreResult<Option<SharedSecret>>;
    /// Inserts or replaces the shop's secret of that kind.
    fn save_shared_secret(&mut self, secret: &SharedSecret) -> StoreResult<()>;
}

/// OAuth apps, staff accounts and authorization codes.
pub trait OAuthRepository {
    /// Stores a new app and returns it.
    fn insert_oauth_app(&mut self, new: &NewOAuthApp) -> StoreResult<OAuthApp>;
    /// The app with this client id, revoked or not.
    fn oauth_app_by_client_id(&mut self, client_id: &str) -> StoreResult<Option<OAuthApp>>;
    /// Every app, revoked ones included, oldest first.
    fn list_oauth_apps(&mut self) -> StoreResult<Vec<OAuthApp>>;
    /// Marks the app revoked, unless it already is: false then.
    fn revoke_oauth_app(&mut self, id: OAuthAppId, at: Timestamp) -> StoreResult<bool>;
    /// The tokens issued to the app (those its codes were exchanged for), revoked ones too.
    fn oauth_app_tokens(&mut self, id: OAuthAppId) -> StoreResult<Vec<ApiToken>>;
    /// The shop's staff accounts, oldest first.
    fn staff_of_shop(&mut self, shop_id: ShopId) -> StoreResult<Vec<StaffAccount>>;
    /// Deletes the staff account, with its sessions and the authorization codes it approved.
    fn delete_staff_account(&mut self, id: StaffId) -> StoreResult<()>;
    /// Replaces the account's password hash.
    fn set_staff_password(
        &mut self,
        id: StaffId,
        password_hash: &str,
        at: Timestamp,
    ) -> StoreResult<()>;
    /// Notes that the account's staff member signed in at `at`.
    fn note_staff_sign_in(&mut self, id: StaffId, at: Timestamp) -> StoreResult<()>;
    /// Stores a new staff account and returns it.
    fn insert_staff_account(&mut self, new: &NewStaffAccount) -> StoreResult<StaffAccount>;
    /// The shop's staff account with this email (trimmed and lowercase).
    fn staff_account(&mut self, shop_id: ShopId, email: &str) -> StoreResult<Option<StaffAccount>>;
    /// The staff account with this row id.
    fn staff_account_by_id(&mut self, id: StaffId) -> StoreResult<Option<StaffAccount>>;
    /// Until when the pair's sign-ins are locked, if they ever were and it is stored.
    fn sign_in_locked_until(&mut self, key: &SignInKey) -> StoreResult<Option<Timestamp>>;
    /// Adds one to the pair's failed sign-ins in one statement (so failures at the same
    /// moment all count), and answers the new count.
    fn count_sign_in_failure(&mut self, key: &SignInKey, now: Timestamp) -> StoreResult<i32>;
    /// Locks the pair's sign-ins until `until`; its failures must have been counted.
    fn lock_sign_in(
        &mut self,
        key: &SignInKey,
        until: Timestamp,
        now: Timestamp,
    ) -> StoreResult<()>;
    /// Forgets the pair's failures (a sign-in succeeded).
    fn clear_sign_in_failures(&mut self, key: &SignInKey) -> StoreResult<()>;
    /// Forgets every pair not touched since `before`.
    fn forget_sign_in_failures(&mut self, before: Timestamp) -> StoreResult<()>;
    /// Stores a new authorization code.
    fn insert_authorization_code(&mut self, new: &NewAuthorizationCode) -> StoreResult<()>;
    /// The code with this SHA-256 hash, used or expired ones included.
    fn authorization_code_by_hash(
        &mut self,
        code_hash: &str,
    ) -> StoreResult<Option<AuthorizationCode>>;
    /// Marks the code used for this token, unless it already was: false then.
    fn redeem_authorization_code(
        &mut self,
        id: AuthorizationCodeId,
        token_id: TokenId,
        now: Timestamp,
    ) -> StoreResult<bool>;
}

/// The operator console's staff sessions and audit log.
pub trait ConsoleRepository {
    /// Stores a new session.
    fn insert_staff_session(&mut self, new: &NewStaffSession) -> StoreResult<()>;
    /// The session with this token hash, with its staff account's email.
    fn staff_session_by_hash(&mut self, token_hash: &str) -> StoreResult<Option<StaffSession>>;
    /// Notes that the session was seen at `now`.
    fn touch_staff_session(&mut self, id: StaffSessionId, now: Timestamp) -> StoreResult<()>;
    /// Deletes the session with this token hash, if there is one.
    fn delete_staff_session(&mut self, token_hash: &str) -> StoreResult<()>;
    /// Deletes every session of the staff account (its password changed).
    fn delete_sessions_of_staff(&mut self, staff_id: StaffId) -> StoreResult<()>;
    /// Deletes the sessions that have ended: expired by `now`, or last seen before `idle_before`.
    fn forget_staff_sessions(&mut self, idle_before: Timestamp, now: Timestamp) -> StoreResult<()>;
    /// Appends a line to the audit log.
    fn insert_audit_entry(&mut self, new: &NewAuditEntry) -> StoreResult<()>;
    /// The shop's audit log, newest first, before the entry `before` when given.
    fn audit_entries(
        &mut self,
        shop_id: ShopId,
        before: Option<AuditEntryId>,
        limit: usize,
    ) -> StoreResult<Vec<AuditEntry>>;
}
