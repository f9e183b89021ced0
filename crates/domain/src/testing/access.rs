//! Shops, tokens, shared secrets and OAuth, in memory.

use super::MemoryState;
use crate::access::console::{AuditEntry, NewAuditEntry, NewStaffSession, StaffSession};
use crate::access::credentials::{ApiToken, NewApiToken};
use crate::access::oauth::{
    AuthorizationCode, NewAuthorizationCode, NewOAuthApp, NewStaffAccount, OAuthApp, SignInKey,
    StaffAccount,
};
use crate::access::secrets::{SecretKind, SharedSecret};
use crate::access::shop::{
    CheckoutSettings, DEFAULT_EXPIRING_PAYMENT_NOTICE_DAYS, DEFAULT_ORDER_MAX_RETRIES,
    DEFAULT_ORDER_RETRY_INTERVAL_SECONDS, NewShop, Shop, ShopIdentifier,
};
use crate::access::*;
use crate::kernel::error::{StorageError, StoreResult};
use crate::kernel::ids::{
    AuditEntryId, AuthorizationCodeId, OAuthAppId, ShopId, StaffId, StaffSessionId, TokenId,
};

/// What the store's unique constraint answers when `taken`.
fn unique(taken: bool, what: &str) -> StoreResult<()> {
    if taken {
        return Err(StorageError::unique_violation(format!("{what} is taken")));
    }
    Ok(())
}
use crate::kernel::time::Timestamp;

impl ShopRepository for MemoryState {
    fn insert_shop(&mut self, new: &NewShop) -> StoreResult<Shop> {
        unique(
            self.shops
                .iter()
                .any(|s| s.shop_domain == new.shop_domain || s.identifier == new.identifier),
            "the shop's domain or identifier",
        )?;
        let shop = Shop {
            id: ShopId(self.shops.len() as i64 + 1),
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
            order_retry_interval_seconds: DEFAULT_ORDER_RETRY_INTERVAL_SECONDS,
            order_max_retries: DEFAULT_ORDER_MAX_RETRIES,
            expiring_payment_notice_days: DEFAULT_EXPIRING_PAYMENT_NOTICE_DAYS,
            checkout: CheckoutSettings::default(),
            require_message_signatures: false,
            budgets: Default::default(),
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

    fn shop_by_id(&mut self, id: ShopId) -> StoreResult<Option<Shop>> {
        Ok(self.shops.iter().find(|s| s.id == id).cloned())
    }

    fn count_shops(&mut self) -> StoreResult<i64> {
        Ok(self.shops.len() as i64)
    }

    fn update_shop_settings(&mut self, shop: &Shop) -> StoreResult<()> {
        if let Some(stored) = self.shops.iter_mut().find(|s| s.id == shop.id) {
            stored.timezone = shop.timezone.clone();
            stored.currency = shop.currency.clone();
            stored.currency_format = shop.currency_format.clone();
            stored.order_retry_interval_seconds = shop.order_retry_interval_seconds;
            stored.order_max_retries = shop.order_max_retries;
            stored.expiring_payment_notice_days = shop.expiring_payment_notice_days;
            stored.checkout = shop.checkout.clone();
            stored.require_message_signatures = shop.require_message_signatures;
            stored.updated_at = shop.updated_at;
        }
        Ok(())
    }

    fn list_shops(&mut self) -> StoreResult<Vec<Shop>> {
        Ok(self.shops.clone())
    }

    fn mark_shop_deleted(&mut self, shop_id: ShopId, at: Timestamp) -> StoreResult<bool> {
        match self
            .shops
            .iter_mut()
            .find(|s| s.id == shop_id && s.deleted_at.is_none())
        {
            Some(shop) => {
                shop.deleted_at = Some(at);
                shop.updated_at = at;
                Ok(true)
            }
            None => Ok(false),
        }
    }
}

impl TokenRepository for MemoryState {
    fn insert_token(&mut self, new: &NewApiToken) -> StoreResult<ApiToken> {
        unique(
            self.tokens.iter().any(|(_, hash)| *hash == new.token_hash),
            "the token hash",
        )?;
        let token = ApiToken {
            id: TokenId(self.tokens.len() as i64 + 1),
            shop_id: new.shop_id,
            name: new.name.clone(),
            token_prefix: new.token_prefix.clone(),
            scopes: new.scopes.clone(),
            source: new.source,
            created_at: new.created_at,
            revoked_at: None,
            last_used_at: None,
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

    fn tokens_of_shop(&mut self, shop_id: ShopId) -> StoreResult<Vec<ApiToken>> {
        Ok(self
            .tokens
            .iter()
            .filter(|(token, _)| token.shop_id == shop_id)
            .map(|(token, _)| token.clone())
            .collect())
    }

    fn revoke_token(
        &mut self,
        shop_id: ShopId,
        token_id: TokenId,
        at: Timestamp,
    ) -> StoreResult<bool> {
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

    fn revoke_shop_tokens(&mut self, shop_id: ShopId, at: Timestamp) -> StoreResult<usize> {
        let mut revoked = 0;
        for (token, _) in &mut self.tokens {
            if token.shop_id == shop_id && token.revoked_at.is_none() {
                token.revoked_at = Some(at);
                revoked += 1;
            }
        }
        Ok(revoked)
    }

    fn note_token_use(
        &mut self,
        token_id: TokenId,
        at: Timestamp,
        unless_after: Timestamp,
    ) -> StoreResult<bool> {
        let due = self.tokens.iter_mut().find(|(token, _)| {
            token.id == token_id && token.last_used_at.is_none_or(|last| last <= unless_after)
        });
        Ok(match due {
            Some((token, _)) => {
                token.last_used_at = Some(at);
                true
            }
            None => false,
        })
    }
}

impl SecretRepository for MemoryState {
    fn shared_secret(
        &mut self,
        shop_id: ShopId,
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

impl OAuthRepository for MemoryState {
    fn insert_oauth_app(&mut self, new: &NewOAuthApp) -> StoreResult<OAuthApp> {
        unique(
            self.oauth_apps
                .iter()
                .any(|app| app.client_id == new.client_id),
            "the client id",
        )?;
        let app = OAuthApp {
            id: OAuthAppId(self.oauth_apps.len() as i64 + 1),
            client_id: new.client_id.clone(),
            client_secret_hash: new.client_secret_hash.clone(),
            name: new.name.clone(),
            redirect_uris: new.redirect_uris.clone(),
            created_at: new.created_at,
            revoked_at: None,
        };
        self.oauth_apps.push(app.clone());
        Ok(app)
    }

    fn oauth_app_by_client_id(&mut self, client_id: &str) -> StoreResult<Option<OAuthApp>> {
        Ok(self
            .oauth_apps
            .iter()
            .find(|app| app.client_id == client_id)
            .cloned())
    }

    fn insert_staff_account(&mut self, new: &NewStaffAccount) -> StoreResult<StaffAccount> {
        unique(
            self.staff
                .iter()
                .any(|s| s.shop_id == new.shop_id && s.email == new.email),
            "the staff email",
        )?;
        // Accounts may be deleted: ids follow the highest, as a sequence does.
        let next = self.staff.iter().map(|s| s.id.0).max().unwrap_or(0) + 1;
        let staff = StaffAccount {
            id: StaffId(next),
            shop_id: new.shop_id,
            email: new.email.clone(),
            password_hash: new.password_hash.clone(),
            created_at: new.created_at,
            last_sign_in_at: None,
        };
        self.staff.push(staff.clone());
        Ok(staff)
    }

    fn staff_account(&mut self, shop_id: ShopId, email: &str) -> StoreResult<Option<StaffAccount>> {
        Ok(self
            .staff
            .iter()
            .find(|s| s.shop_id == shop_id && s.email == email)
            .cloned())
    }

    fn staff_account_by_id(&mut self, id: StaffId) -> StoreResult<Option<StaffAccount>> {
        Ok(self.staff.iter().find(|s| s.id == id).cloned())
    }

    fn list_oauth_apps(&mut self) -> StoreResult<Vec<OAuthApp>> {
        Ok(self.oauth_apps.clone())
    }

    fn revoke_oauth_app(&mut self, id: OAuthAppId, at: Timestamp) -> StoreResult<bool> {
        match self
            .oauth_apps
            .iter_mut()
            .find(|app| app.id == id && app.revoked_at.is_none())
        {
            Some(app) => {
                app.revoked_at = Some(at);
                Ok(true)
            }
            None => Ok(false),
        }
    }

    fn oauth_app_tokens(&mut self, id: OAuthAppId) -> StoreResult<Vec<ApiToken>> {
        let issued: Vec<TokenId> = self
            .codes
            .iter()
            .filter(|(code, _)| code.app_id == id)
            .filter_map(|(code, _)| code.token_id)
            .collect();
        Ok(self
            .tokens
            .iter()
            .filter(|(token, _)| issued.contains(&token.id))
            .map(|(token, _)| token.clone())
            .collect())
    }

    fn staff_of_shop(&mut self, shop_id: ShopId) -> StoreResult<Vec<StaffAccount>> {
        Ok(self
            .staff
            .iter()
            .filter(|s| s.shop_id == shop_id)
            .cloned()
            .collect())
    }

    fn delete_staff_account(&mut self, id: StaffId) -> StoreResult<()> {
        self.codes.retain(|(code, _)| code.staff_id != id);
        self.delete_sessions_of_staff(id)?;
        self.staff.retain(|s| s.id != id);
        Ok(())
    }

    fn set_staff_password(
        &mut self,
        id: StaffId,
        password_hash: &str,
        _at: Timestamp,
    ) -> StoreResult<()> {
        if let Some(staff) = self.staff.iter_mut().find(|s| s.id == id) {
            staff.password_hash = password_hash.to_string();
        }
        Ok(())
    }

    fn note_staff_sign_in(&mut self, id: StaffId, at: Timestamp) -> StoreResult<()> {
        if let Some(staff) = self.staff.iter_mut().find(|s| s.id == id) {
            staff.last_sign_in_at = Some(at);
        }
        Ok(())
    }

    fn sign_in_locked_until(&mut self, key: &SignInKey) -> StoreResult<Option<Timestamp>> {
        Ok(self
            .sign_in_failures
            .get(key)
            .and_then(|(_, until, _)| *until))
    }

    fn count_sign_in_failure(&mut self, key: &SignInKey, now: Timestamp) -> StoreResult<i32> {
        let entry = self
            .sign_in_failures
            .entry(key.clone())
            .or_insert((0, None, now));
        entry.0 += 1;
        entry.2 = now;
        Ok(entry.0)
    }

    fn lock_sign_in(
        &mut self,
        key: &SignInKey,
        until: Timestamp,
        now: Timestamp,
    ) -> StoreResult<()> {
        if let Some(entry) = self.sign_in_failures.get_mut(key) {
            entry.1 = Some(until);
            entry.2 = now;
        }
        Ok(())
    }

    fn clear_sign_in_failures(&mut self, key: &SignInKey) -> StoreResult<()> {
        self.sign_in_failures.remove(key);
        Ok(())
    }

    fn forget_sign_in_failures(&mut self, before: Timestamp) -> StoreResult<()> {
        self.sign_in_failures
            .retain(|_, (_, _, touched)| *touched >= before);
        Ok(())
    }

    fn insert_authorization_code(&mut self, new: &NewAuthorizationCode) -> StoreResult<()> {
        unique(
            self.codes.iter().any(|(_, hash)| *hash == new.code_hash),
            "the code hash",
        )?;
        let code = AuthorizationCode {
            id: AuthorizationCodeId(self.codes.len() as i64 + 1),
            app_id: new.app_id,
            shop_id: new.shop_id,
            staff_id: new.staff_id,
            redirect_uri: new.redirect_uri.clone(),
            scopes: new.scopes.clone(),
            code_challenge: new.code_challenge.clone(),
            expires_at: new.expires_at,
            used_at: None,
            token_id: None,
        };
        self.codes.push((code, new.code_hash.clone()));
        Ok(())
    }

    fn authorization_code_by_hash(
        &mut self,
        code_hash: &str,
    ) -> StoreResult<Option<AuthorizationCode>> {
        Ok(self
            .codes
            .iter()
            .find(|(_, hash)| hash == code_hash)
            .map(|(code, _)| code.clone()))
    }

    fn redeem_authorization_code(
        &mut self,
        id: AuthorizationCodeId,
        token_id: TokenId,
        now: Timestamp,
    ) -> StoreResult<bool> {
        match self
            .codes
            .iter_mut()
            .find(|(code, _)| code.id == id && code.used_at.is_none())
        {
            Some((code, _)) => {
                code.used_at = Some(now);
                code.token_id = Some(token_id);
                Ok(true)
            }
            None => Ok(false),
        }
    }
}

impl ConsoleRepository for MemoryState {
    fn insert_staff_session(&mut self, new: &NewStaffSession) -> StoreResult<()> {
        unique(
            self.staff_sessions
                .iter()
                .flatten()
                .any(|(_, hash)| *hash == new.token_hash),
            "the session's token hash",
        )?;
        let email = self
            .staff
            .iter()
            .find(|staff| staff.id == new.staff_id)
            .map(|staff| staff.email.clone())
            .ok_or_else(|| StorageError::other("no such staff account"))?;
        let session = StaffSession {
            id: StaffSessionId(self.staff_sessions.len() as i64 + 1),
            shop_id: new.shop_id,
            staff_id: new.staff_id,
            staff_email: email,
            created_at: new.created_at,
            last_seen_at: new.created_at,
            expires_at: new.expires_at,
        };
        self.staff_sessions
            .push(Some((session, new.token_hash.clone())));
        Ok(())
    }

    fn staff_session_by_hash(&mut self, token_hash: &str) -> StoreResult<Option<StaffSession>> {
        Ok(self
            .staff_sessions
            .iter()
            .flatten()
            .find(|(_, hash)| hash == token_hash)
            .map(|(session, _)| session.clone()))
    }

    fn touch_staff_session(&mut self, id: StaffSessionId, now: Timestamp) -> StoreResult<()> {
        for (session, _) in self.staff_sessions.iter_mut().flatten() {
            if session.id == id {
                session.last_seen_at = now;
            }
        }
        Ok(())
    }

    fn delete_staff_session(&mut self, token_hash: &str) -> StoreResult<()> {
        for slot in &mut self.staff_sessions {
            if slot.as_ref().is_some_and(|(_, hash)| hash == token_hash) {
                *slot = None;
            }
        }
        Ok(())
    }

    fn delete_sessions_of_staff(&mut self, staff_id: StaffId) -> StoreResult<()> {
        for slot in &mut self.staff_sessions {
            if slot
                .as_ref()
                .is_some_and(|(session, _)| session.staff_id == staff_id)
            {
                *slot = None;
            }
        }
        Ok(())
    }

    fn forget_staff_sessions(&mut self, idle_before: Timestamp, now: Timestamp) -> StoreResult<()> {
        for slot in &mut self.staff_sessions {
            if slot.as_ref().is_some_and(|(session, _)| {
                session.expires_at <= now || session.last_seen_at < idle_before
            }) {
                *slot = None;
            }
        }
        Ok(())
    }

    fn insert_audit_entry(&mut self, new: &NewAuditEntry) -> StoreResult<()> {
        self.audit_log.push(AuditEntry {
            id: AuditEntryId(self.audit_log.len() as i64 + 1),
            shop_id: new.shop_id,
            staff_id: new.staff_id,
            staff_email: new.staff_email.clone(),
            action: new.action.clone(),
            subject: new.subject.clone(),
            at: new.at,
        });
        Ok(())
    }

    fn audit_entries(
        &mut self,
        shop_id: ShopId,
        before: Option<AuditEntryId>,
        limit: usize,
    ) -> StoreResult<Vec<AuditEntry>> {
        Ok(self
            .audit_log
            .iter()
            .rev()
            .filter(|entry| entry.shop_id == shop_id && before.is_none_or(|id| entry.id < id))
            .take(limit)
            .cloned()
            .collect())
    }
}
