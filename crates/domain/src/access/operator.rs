//! The operator's account commands: a shop's staff accounts (list, remove, a new password), the
//! OAuth apps (list, revoke) and deleting a shop. Each change is written to the shop's audit log
//! in its own transaction, in the command line's name (`cli`), naming what was
//! changed and never a secret.
//!
//! A deleted shop is kept (soft-deleted) but answers as a shop that does not exist: every lookup
//! by identifier or domain leaves it out, its tokens are revoked (401), its staff can no longer
//! sign in and their console sessions end.

use crate::access::AccessRepositories;
use crate::access::console::record_command;
use crate::access::credentials::{ApiToken, CreatedToken, TokenSource, create_token, revoke_token};
use crate::access::oauth::{
    OAuthApp, StaffAccount, check_new_password, create_staff, hash_password, normalize_email,
};
use crate::access::shop::{Shop, find_shop};
use crate::kernel::error::{DomainError, FieldError};
use crate::kernel::ids::TokenId;
use crate::kernel::time::Timestamp;

/// The audit log's actions for these commands.
pub mod actions {
    /// A staff account was created.
    pub const STAFF_CREATE: &str = "staff.create";
    /// A staff account was removed.
    pub const STAFF_REMOVE: &str = "staff.remove";
    /// A staff account was given a new password.
    pub const STAFF_RESET_PASSWORD: &str = "staff.reset_password";
    /// An OAuth app the shop had approved was revoked, and its tokens with it.
    pub const APP_REVOKE: &str = "app.revoke";
    /// The shop was deleted.
    pub const SHOP_DELETE: &str = "shop.delete";
    /// An API token was created.
    pub const TOKEN_CREATE: &str = "token.create";
    /// An API token was revoked.
    pub const TOKEN_REVOKE: &str = "token.revoke";
}

/// The shop and its staff accounts, oldest first.
pub fn list_staff(
    tx: &mut dyn AccessRepositories,
    shop_identifier: &str,
) -> Result<(Shop, Vec<StaffAccount>), DomainError> {
    let shop = find_shop(tx, shop_identifier)?;
    let staff = tx.staff_of_shop(shop.id)?;
    Ok((shop, staff))
}

/// Creates a staff account ([`create_staff`]) and records it in the shop's audit log.
pub fn add_staff(
    tx: &mut dyn AccessRepositories,
    shop_identifier: &str,
    email: &str,
    password: &str,
    now: Timestamp,
) -> Result<StaffAccount, DomainError> {
    let staff = create_staff(tx, shop_identifier, email, password, now)?;
    record_command(tx, staff.shop_id, actions::STAFF_CREATE, &staff.email, now)?;
    Ok(staff)
}

/// The shop's staff account with this email (trimmed, any case), or 404 `staff`.
fn staff_account(
    tx: &mut dyn AccessRepositories,
    shop: &Shop,
    email: &str,
) -> Result<StaffAccount, DomainError> {
    tx.staff_account(shop.id, &normalize_email(email))?
        .ok_or_else(|| DomainError::not_found("staff account"))
}

/// Removes a staff account: it can no longer sign in, its console sessions end, and the codes
/// it approved but were not yet exchanged can no longer be. Tokens apps already got stay (they
/// are the shop's; `mercer app revoke` or `mercer token revoke` ends them).
pub fn remove_staff(
    tx: &mut dyn AccessRepositories,
    shop_identifier: &str,
    email: &str,
    now: Timestamp,
) -> Result<StaffAccount, DomainError> {
    let shop = find_shop(tx, shop_identifier)?;
    let staff = staff_account(tx, &shop, email)?;
    tx.delete_staff_account(staff.id)?;
    record_command(tx, shop.id, actions::STAFF_REMOVE, &staff.email, now)?;
    Ok(staff)
}

/// Gives a staff account a new password; the old one no longer signs in and the account's
/// console sessions end.
pub fn reset_staff_password(
    tx: &mut dyn AccessRepositories,
    shop_identifier: &str,
    email: &str,
    password: &str,
    now: Timestamp,
) -> Result<StaffAccount, DomainError> {
    let shop = find_shop(tx, shop_identifier)?;
    check_new_password(password).map_err(|problem| DomainError::Invalid(vec![problem]))?;
    let staff = staff_account(tx, &shop, email)?;
    tx.set_staff_password(staff.id, &hash_password(password)?, now)?;
    tx.delete_sessions_of_staff(staff.id)?;
    record_command(
        tx,
        shop.id,
        actions::STAFF_RESET_PASSWORD,
        &staff.email,
        now,
    )?;
    Ok(staff)
}

/// An app as `mercer app list` shows it.
#[derive(Debug, Clone)]
pub struct AppLine {
    /// The app.
    pub app: OAuthApp,
    /// How many of the tokens it was issued are live (not revoked).
    pub live_tokens: usize,
}

/// Every app, revoked ones included, oldest first, each with its live tokens counted.
pub fn list_apps(tx: &mut dyn AccessRepositories) -> Result<Vec<AppLine>, DomainError> {
    let apps = tx.list_oauth_apps()?;
    apps.into_iter()
        .map(|app| {
            let live_tokens = tx
                .oauth_app_tokens(app.id)?
                .iter()
                .filter(|token| token.revoked_at.is_none())
                .count();
            Ok(AppLine { app, live_tokens })
        })
        .collect()
}

/// What revoking an app did.
#[derive(Debug, Clone)]
pub struct RevokedApp {
    /// The app, as it was before.
    pub app: OAuthApp,
    /// The tokens it had been issued that were revoked now.
    pub tokens_revoked: Vec<ApiToken>,
}

/// Revokes an app by its client id: it can no longer ask for or exchange codes, and every live
/// token it was issued is revoked (401 from then on). Each shop whose tokens were revoked gets
/// a line in its audit log. Revoking a revoked app again revokes what is left and answers as
/// the first time did.
pub fn revoke_app(
    tx: &mut dyn AccessRepositories,
    client_id: &str,
    now: Timestamp,
) -> Result<RevokedApp, DomainError> {
    let app = tx
        .oauth_app_by_client_id(client_id.trim())?
        .ok_or_else(|| DomainError::not_found("app"))?;
    tx.revoke_oauth_app(app.id, now)?;
    let mut tokens_revoked = Vec::new();
    for token in tx.oauth_app_tokens(app.id)? {
        if token.revoked_at.is_none() && tx.revoke_token(token.shop_id, token.id, now)? {
            tokens_revoked.push(token);
        }
    }
    let mut shops: Vec<_> = tokens_revoked.iter().map(|token| token.shop_id).collect();
    shops.sort();
    shops.dedup();
    let subject = format!("{} ({})", app.client_id, app.name);
    for shop_id in shops {
        record_command(tx, shop_id, actions::APP_REVOKE, &subject, now)?;
    }
    Ok(RevokedApp {
        app,
        tokens_revoked,
    })
}

/// What deleting a shop did.
#[derive(Debug, Clone)]
pub struct DeletedShop {
    /// The shop, as it was before.
    pub shop: Shop,
    /// How many live tokens were revoked.
    pub tokens_revoked: usize,
}

/// Deletes a shop: it is kept, marked deleted, and from then on answers as an unknown shop
/// (404 to another shop's token, 401 to its own, which are revoked; its staff cannot sign in).
/// `confirmed` is the operator's explicit yes; without it nothing changes. The command deletes
/// the shop through `operations::delete_shop`, which also ends its webhook endpoints.
pub fn delete_shop(
    tx: &mut dyn AccessRepositories,
    shop_identifier: &str,
    confirmed: bool,
    now: Timestamp,
) -> Result<DeletedShop, DomainError> {
    let shop = find_shop(tx, shop_identifier)?;
    if !confirmed {
        return Err(DomainError::Invalid(vec![FieldError::new(
            "yes",
            "confirmation_required",
            format!(
                "deleting shop {} ({}) revokes its tokens and cannot be undone here: confirm \
                 with --yes",
                shop.identifier.as_str(),
                shop.shop_domain
            ),
        )]));
    }
    let tokens_revoked = tx.revoke_shop_tokens(shop.id, now)?;
    tx.mark_shop_deleted(shop.id, now)?;
    record_command(tx, shop.id, actions::SHOP_DELETE, &shop.shop_domain, now)?;
    Ok(DeletedShop {
        shop,
        tokens_revoked,
    })
}

/// Creates an API token as [`create_token`] does, for the command line, and records it (its id
/// and name, never the token) in the shop's audit log.
pub fn add_token(
    tx: &mut dyn AccessRepositories,
    shop_identifier: &str,
    name: &str,
    scopes: &str,
    now: Timestamp,
) -> Result<CreatedToken, DomainError> {
    let created = create_token(tx, shop_identifier, name, scopes, TokenSource::Cli, now)?;
    let subject = format!("{} ({})", created.token.id, created.token.name);
    record_command(
        tx,
        created.token.shop_id,
        actions::TOKEN_CREATE,
        &subject,
        now,
    )?;
    Ok(created)
}

/// Revokes one of the shop's tokens as [`revoke_token`] does, for the command line, and records
/// it in the shop's audit log. Answers the id revoked.
pub fn remove_token(
    tx: &mut dyn AccessRepositories,
    shop_identifier: &str,
    which: &str,
    now: Timestamp,
) -> Result<TokenId, DomainError> {
    let id = revoke_token(tx, shop_identifier, which, now)?;
    let shop = find_shop(tx, shop_identifier)?;
    record_command(tx, shop.id, actions::TOKEN_REVOKE, &id.to_string(), now)?;
    Ok(id)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::access::auth::authorize;
    use crate::access::console::audit_log;
    use crate::access::credentials::{ScopeSet, list_tokens, mint_token, note_token_use};
    use crate::access::oauth::{NewAuthorizationCode, create_app, verify_password};
    use crate::access::shop::{ShopInput, create_shop};
    use crate::ports::Database;
    use crate::testing::MemoryDatabase;

    const PASSWORD: &str = "correct horse battery";

    fn world() -> (MemoryDatabase, Shop, Timestamp) {
        let db = MemoryDatabase::default();
        let now = Timestamp::from_micros(1_000_000_000_000);
        let shop = db
            .write(|tx| {
                let shop = create_shop(
                    tx,
                    ShopInput {
                        shop_domain: "ops.shop.test".into(),
                        ..ShopInput::default()
                    },
                    now,
                )?;
                add_staff(
                    tx,
                    shop.identifier.as_str(),
                    "Ops@Example.test",
                    PASSWORD,
                    now,
                )?;
                Ok(shop)
            })
            .unwrap();
        (db, shop, now)
    }

    fn actions_logged(db: &MemoryDatabase, shop: &Shop) -> Vec<(String, String, String)> {
        db.read(|tx| audit_log(tx, shop.id, None, 100))
            .unwrap()
            .into_iter()
            .map(|entry| (entry.staff_email, entry.action, entry.subject))
            .collect()
    }

    #[test]
    fn staff_are_listed_removed_and_given_new_passwords_with_audit_lines() {
        let (db, shop, now) = world();
        let id = shop.identifier.as_str();
        let (_, staff) = db.read(|tx| list_staff(tx, id)).unwrap();
        assert_eq!(staff.len(), 1);
        assert_eq!(staff[0].email, "ops@example.test");
        assert_eq!(staff[0].last_sign_in_at, None);

        let short = db.write(|tx| reset_staff_password(tx, id, "ops@example.test", "short", now));
        assert!(matches!(short, Err(DomainError::Invalid(ref p)) if p[0].field == "password"));
        let unknown = db.write(|tx| reset_staff_password(tx, id, "who@x.test", PASSWORD, now));
        assert!(matches!(unknown, Err(DomainError::NotFound { .. })));
        let fresh = "a brand new password";
        db.write(|tx| reset_staff_password(tx, id, " OPS@example.test ", fresh, now))
            .unwrap();
        let stored = db.read(|tx| list_staff(tx, id)).unwrap().1.remove(0);
        assert!(verify_password(fresh, &stored.password_hash));
        assert!(!verify_password(PASSWORD, &stored.password_hash));

        db.write(|tx| remove_staff(tx, id, "ops@example.test", now))
            .unwrap();
        assert!(db.read(|tx| list_staff(tx, id)).unwrap().1.is_empty());
        let again = db.write(|tx| remove_staff(tx, id, "ops@example.test", now));
        assert!(matches!(again, Err(DomainError::NotFound { .. })));
        // The email is free again: a new account may take it.
        db.write(|tx| add_staff(tx, id, "ops@example.test", PASSWORD, now))
            .unwrap();

        let logged = actions_logged(&db, &shop);
        let expected: Vec<(String, String, String)> = [
            actions::STAFF_CREATE,
            actions::STAFF_REMOVE,
            actions::STAFF_RESET_PASSWORD,
            actions::STAFF_CREATE,
        ]
        .iter()
        .map(|action| ("cli".into(), action.to_string(), "ops@example.test".into()))
        .collect();
        assert_eq!(logged, expected, "newest first, in the command line's name");
    }

    #[test]
    fn revoking_an_app_revokes_the_tokens_it_was_issued_and_only_those() {
        let (db, shop, now) = world();
        let id = shop.identifier.as_str();
        let (app, issued, own) = db
            .write(|tx| {
                let app = create_app(tx, "Helper", &["https://app.test/cb".into()], now)?.app;
                let staff = tx.staff_of_shop(shop.id)?.remove(0);
                let (issued, record) = mint_token(
                    shop.id,
                    "oauth: Helper",
                    ScopeSet::all(),
                    TokenSource::OAuth,
                    now,
                );
                let token = tx.insert_token(&record)?;
                tx.insert_authorization_code(&NewAuthorizationCode {
                    code_hash: "c".repeat(64),
                    app_id: app.id,
                    shop_id: shop.id,
                    staff_id: staff.id,
                    redirect_uri: String::new(),
                    scopes: ScopeSet::all(),
                    code_challenge: None,
                    expires_at: now,
                    created_at: now,
                })?;
                let code = tx
                    .authorization_code_by_hash(&"c".repeat(64))?
                    .expect("the code");
                tx.redeem_authorization_code(code.id, token.id, now)?;
                let own = add_token(tx, id, "ci", "read_orders", now)?;
                Ok((app, issued, own.secret))
            })
            .unwrap();
        let lines = db.read(|tx| list_apps(tx)).unwrap();
        assert_eq!(lines[0].live_tokens, 1);

        let revoked = db.write(|tx| revoke_app(tx, &app.client_id, now)).unwrap();
        assert_eq!(revoked.tokens_revoked.len(), 1);
        let check = |token: &str| db.read(|tx| authorize(tx, Some(token), id, None));
        assert!(matches!(
            check(issued.expose()),
            Err(DomainError::Unauthenticated)
        ));
        assert!(check(own.expose()).is_ok(), "the shop's own token stays");
        let lines = db.read(|tx| list_apps(tx)).unwrap();
        assert_eq!(lines[0].live_tokens, 0);
        assert_eq!(lines[0].app.revoked_at, Some(now));
        assert!(matches!(
            db.write(|tx| revoke_app(tx, "mci_nothing", now)),
            Err(DomainError::NotFound { resource: "app" })
        ));
        let logged = actions_logged(&db, &shop);
        assert_eq!(logged[0].1, actions::APP_REVOKE);
        assert!(logged[0].2.contains(&app.client_id), "{logged:?}");
    }

    #[test]
    fn a_deleted_shop_needs_confirmation_then_answers_as_unknown() {
        let (db, shop, now) = world();
        let id = shop.identifier.as_str();
        let token = db
            .write(|tx| add_token(tx, id, "ci", "all_but_unknown read_orders", now))
            .map(|created| created.secret);
        assert!(token.is_err(), "an unknown scope is refused");
        let token = db
            .write(|tx| add_token(tx, id, "ci", "read_orders", now))
            .unwrap()
            .secret;

        let refused = db.write(|tx| delete_shop(tx, id, false, now));
        assert!(
            matches!(refused, Err(DomainError::Invalid(ref p)) if p[0].message.contains("--yes"))
        );
        assert!(db.read(|tx| find_shop(tx, id)).is_ok(), "nothing changed");

        let deleted = db.write(|tx| delete_shop(tx, id, true, now)).unwrap();
        assert_eq!(deleted.tokens_revoked, 1);
        assert!(matches!(
            db.read(|tx| authorize(tx, Some(token.expose()), id, None)),
            Err(DomainError::Unauthenticated)
        ));
        assert!(matches!(
            db.read(|tx| find_shop(tx, id)),
            Err(DomainError::NotFound { resource: "shop" })
        ));
        assert!(matches!(
            db.write(|tx| delete_shop(tx, id, true, now)),
            Err(DomainError::NotFound { resource: "shop" })
        ));
        let logged = actions_logged(&db, &shop);
        assert_eq!(logged[0].1, actions::SHOP_DELETE);
    }

    #[test]
    fn a_tokens_last_use_is_written_at_most_once_a_minute() {
        let (db, shop, now) = world();
        let id = shop.identifier.as_str();
        let created = db
            .write(|tx| add_token(tx, id, "ci", "read_orders", now))
            .unwrap();
        let token = created.token.id;
        let note = |at: Timestamp| db.write(|tx| note_token_use(tx, token, at)).unwrap();
        let last_used = || {
            db.read(|tx| list_tokens(tx, id)).unwrap().1[0]
                .last_used_at
                .expect("a last use")
        };
        assert!(note(now));
        assert_eq!(last_used(), now);
        assert!(
            !note(now.plus_seconds(59)),
            "within the minute: not written"
        );
        assert_eq!(last_used(), now);
        assert!(note(now.plus_seconds(60)));
        assert_eq!(last_used(), now.plus_seconds(60));
    }
}
