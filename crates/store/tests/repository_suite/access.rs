//! Access: shops and their settings, tokens, shared secrets, OAuth apps, staff and codes.

use mercer_domain::DomainError;
use mercer_domain::access::credentials::{ApiToken, NewApiToken, ScopeSet, Secret, TokenSource};
use mercer_domain::access::oauth::{NewAuthorizationCode, NewOAuthApp, NewStaffAccount, SignInKey};
use mercer_domain::access::secrets::{SecretKind, SharedSecret};
use mercer_domain::access::shop::{
    CheckoutSettings, ShopInput, ShopSettings, update_shop_settings,
};
use mercer_domain::kernel::ids::ShopId;
use mercer_domain::ports::Database;
use mercer_domain::subscriptions::resources::Cents;

use crate::{assert_taken, at, shop};

fn shops_are_found_by_domain_identifier_and_id(db: &impl Database) {
    let first = shop(db, "a.shop.test");
    let second = shop(db, "b.shop.test");
    assert_ne!(first.id, second.id);
    assert_ne!(first.identifier, second.identifier);
    let (by_domain, by_id, by_identifier, missing, count, all) = db
        .read(|tx| {
            Ok((
                tx.shop_by_domain("b.shop.test")?,
                tx.shop_by_id(first.id)?,
                tx.shop_by_identifier(&second.identifier)?,
                tx.shop_by_domain("c.shop.test")?,
                tx.count_shops()?,
                tx.list_shops()?,
            ))
        })
        .unwrap();
    assert_eq!(by_domain.map(|s| s.id), Some(second.id));
    assert_eq!(
        by_id.map(|s| s.shop_domain),
        Some("a.shop.test".to_string())
    );
    assert_eq!(by_identifier.map(|s| s.id), Some(second.id));
    assert!(missing.is_none());
    assert_eq!(count, 2);
    assert_eq!(
        all.iter().map(|s| s.id).collect::<Vec<_>>(),
        [first.id, second.id],
        "oldest first"
    );
    let stored = all[0].clone();
    assert_eq!(
        (stored.created_at, stored.updated_at, stored.deleted_at),
        (at(0), at(0), None)
    );
}
every_database!(shops_are_found_by_domain_identifier_and_id);

fn shop_settings_are_written_to_that_shop_only(db: &impl Database) {
    let first = shop(db, "a.shop.test");
    let second = shop(db, "b.shop.test");
    let settings = ShopSettings {
        timezone: Some("Europe/Paris".to_string()),
        currency: Some("EUR".to_string()),
        order_retry_interval_seconds: Some(600),
        order_max_retries: Some(5),
        expiring_payment_notice_days: Some(14),
        abandoned_cart_emails: Some(false),
        gift_cards_enabled: Some(true),
        gift_card_skus: Some(vec!["GC-10".into(), "GC-25".into()]),
        flat_shipping_rate: Some(750),
        require_message_signatures: Some(true),
        budgets: Default::default(),
    };
    assert!(!first.require_message_signatures, "off for a new shop");
    db.write(|tx| update_shop_settings(tx, first.identifier.as_str(), settings, at(60)))
        .unwrap();
    let (first, second) = db
        .read(|tx| Ok((tx.shop_by_id(first.id)?, tx.shop_by_id(second.id)?)))
        .unwrap();
    let first = first.unwrap();
    assert_eq!(
        (
            first.timezone.as_str(),
            first.currency.as_str(),
            first.currency_format.as_str(),
            first.updated_at
        ),
        ("Europe/Paris", "EUR", "€{{amount}}", at(60))
    );
    assert_eq!(
        (
            first.order_retry_interval_seconds,
            first.order_max_retries,
            first.expiring_payment_notice_days
        ),
        (600, 5, 14)
    );
    assert_eq!(
        first.checkout,
        CheckoutSettings {
            abandoned_cart_emails: false,
            gift_cards_enabled: true,
            gift_card_skus: vec!["GC-10".into(), "GC-25".into()],
            flat_shipping_rate: Cents(750),
        }
    );
    assert!(first.require_message_signatures);
    let second = second.unwrap();
    assert!(!second.require_message_signatures);
    assert_eq!(
        (
            second.timezone.as_str(),
            second.currency.as_str(),
            second.updated_at
        ),
        ("UTC", "USD", at(0))
    );
    assert_eq!(
        (
            second.order_retry_interval_seconds,
            second.order_max_retries,
            second.expiring_payment_notice_days
        ),
        (86_400, 3, 30),
        "a new shop's defaults"
    );
    assert_eq!(second.checkout, CheckoutSettings::default());
}
every_database!(shop_settings_are_written_to_that_shop_only);

fn a_second_shop_with_a_taken_domain_is_refused(db: &impl Database) {
    let first = shop(db, "a.shop.test");
    let again = db.write(|tx| {
        let new = ShopInput {
            shop_domain: "a.shop.test".into(),
            ..ShopInput::default()
        }
        .validate(at(1))?;
        Ok(tx.insert_shop(&new)?)
    });
    let Err(DomainError::Storage(error)) = again else {
        panic!("the domain is taken: {again:?}")
    };
    assert!(error.is_unique_violation());
    assert_eq!(db.read(|tx| Ok(tx.count_shops()?)).unwrap(), 1);
    assert!(
        db.read(|tx| Ok(tx.shop_by_id(first.id)?))
            .unwrap()
            .is_some()
    );
}
every_database!(a_second_shop_with_a_taken_domain_is_refused);

fn new_token(shop_id: ShopId, hash: &str, seconds: i64) -> NewApiToken {
    NewApiToken {
        shop_id,
        name: format!("token {hash}"),
        token_hash: hash.to_string(),
        token_prefix: "mrc_1234".to_string(),
        scopes: ScopeSet::all(),
        source: TokenSource::Cli,
        created_at: at(seconds),
    }
}

fn tokens_are_found_by_hash_until_revoked(db: &impl Database) {
    let shop = shop(db, "a.shop.test");
    let other = self::shop(db, "b.shop.test");
    let (one, two): (ApiToken, ApiToken) = db
        .write(|tx| {
            Ok((
                tx.insert_token(&new_token(shop.id, "hash-1", 1))?,
                tx.insert_token(&new_token(shop.id, "hash-2", 2))?,
            ))
        })
        .unwrap();
    db.write(|tx| Ok(tx.insert_token(&new_token(other.id, "hash-3", 3))?))
        .unwrap();
    assert_taken(db.write(|tx| Ok(tx.insert_token(&new_token(other.id, "hash-1", 3))?)));
    let found = db
        .read(|tx| Ok(tx.active_token_by_hash("hash-1")?))
        .unwrap()
        .unwrap();
    assert_eq!(found, one);
    assert_eq!(found.scopes, ScopeSet::all());
    assert_eq!(found.source, TokenSource::Cli);
    assert!(
        !db.write(|tx| Ok(tx.revoke_token(other.id, one.id, at(4))?))
            .unwrap(),
        "another shop's token"
    );
    assert!(
        db.write(|tx| Ok(tx.revoke_token(shop.id, one.id, at(4))?))
            .unwrap()
    );
    assert!(
        !db.write(|tx| Ok(tx.revoke_token(shop.id, one.id, at(5))?))
            .unwrap(),
        "revoked already"
    );
    assert!(
        db.read(|tx| Ok(tx.active_token_by_hash("hash-1")?))
            .unwrap()
            .is_none()
    );
    let tokens = db.read(|tx| Ok(tx.tokens_of_shop(shop.id)?)).unwrap();
    assert_eq!(
        tokens
            .iter()
            .map(|t| (t.id, t.revoked_at))
            .collect::<Vec<_>>(),
        [(one.id, Some(at(4))), (two.id, None)],
        "revoked ones included, oldest first"
    );
}
every_database!(tokens_are_found_by_hash_until_revoked);

fn shared_secrets_are_one_per_shop_and_kind(db: &impl Database) {
    let shop = shop(db, "a.shop.test");
    // create_shop made the connector secret.
    let connector = db
        .read(|tx| Ok(tx.shared_secret(shop.id, SecretKind::Connector)?))
        .unwrap()
        .unwrap();
    assert_eq!(connector.kind, SecretKind::Connector);
    assert!(
        db.read(|tx| Ok(tx.shared_secret(shop.id, SecretKind::CheckoutIntegration)?))
            .unwrap()
            .is_none()
    );
    let rotated = SharedSecret {
        shop_id: shop.id,
        kind: SecretKind::Connector,
        current: Secret::new("new-secret"),
        previous: Some(connector.current.clone()),
        previous_valid_until: Some(at(60)),
        created_at: connector.created_at,
        updated_at: at(10),
    };
    let checkout = SharedSecret {
        kind: SecretKind::CheckoutIntegration,
        previous: None,
        previous_valid_until: None,
        ..rotated.clone()
    };
    db.write(|tx| {
        tx.save_shared_secret(&rotated)?;
        tx.save_shared_secret(&checkout)?;
        Ok(())
    })
    .unwrap();
    let (connector, checkout) = db
        .read(|tx| {
            Ok((
                tx.shared_secret(shop.id, SecretKind::Connector)?.unwrap(),
                tx.shared_secret(shop.id, SecretKind::CheckoutIntegration)?
                    .unwrap(),
            ))
        })
        .unwrap();
    assert_eq!(connector.current.expose(), "new-secret");
    assert_eq!(connector.previous, rotated.previous);
    assert_eq!(
        (connector.previous_valid_until, connector.updated_at),
        (Some(at(60)), at(10))
    );
    assert_eq!(checkout.current.expose(), "new-secret");
    assert!(checkout.previous.is_none());
}
every_database!(shared_secrets_are_one_per_shop_and_kind);

fn oauth_apps_staff_and_codes(db: &impl Database) {
    let shop = shop(db, "a.shop.test");
    let app = db
        .write(|tx| {
            Ok(tx.insert_oauth_app(&NewOAuthApp {
                client_id: "client-1".into(),
                client_secret_hash: "secret-hash".into(),
                name: "An app".into(),
                redirect_uris: vec!["https://app.test/a".into(), "https://app.test/b".into()],
                created_at: at(1),
            })?)
        })
        .unwrap();
    assert_taken(db.write(|tx| {
        Ok(tx.insert_oauth_app(&NewOAuthApp {
            client_id: "client-1".into(),
            client_secret_hash: "other".into(),
            name: "Another app".into(),
            redirect_uris: Vec::new(),
            created_at: at(1),
        })?)
    }));
    let found = db
        .read(|tx| Ok(tx.oauth_app_by_client_id("client-1")?))
        .unwrap()
        .unwrap();
    assert_eq!(found, app);
    assert_eq!(found.redirect_uris.len(), 2);
    assert!(found.revoked_at.is_none());
    assert!(
        db.read(|tx| Ok(tx.oauth_app_by_client_id("client-2")?))
            .unwrap()
            .is_none()
    );

    let staff = db
        .write(|tx| {
            Ok(tx.insert_staff_account(&NewStaffAccount {
                shop_id: shop.id,
                email: "staff@a.shop.test".into(),
                password_hash: "phc".into(),
                created_at: at(2),
            })?)
        })
        .unwrap();
    assert_eq!(staff.email, "staff@a.shop.test");
    assert_taken(db.write(|tx| {
        Ok(tx.insert_staff_account(&NewStaffAccount {
            shop_id: shop.id,
            email: "staff@a.shop.test".into(),
            password_hash: "phc".into(),
            created_at: at(2),
        })?)
    }));
    let by_email = db
        .read(|tx| Ok(tx.staff_account(shop.id, "staff@a.shop.test")?))
        .unwrap();
    assert_eq!(by_email, Some(staff.clone()));
    assert!(
        db.read(|tx| Ok(tx.staff_account(ShopId(shop.id.0 + 1), "staff@a.shop.test")?))
            .unwrap()
            .is_none()
    );
    // Sign-in failures, by account and client address together.
    let key = |account: &str, client: &str| SignInKey {
        account: account.to_string(),
        client: client.to_string(),
    };
    let (owner, other) = (key("acct-1", "192.0.2.1"), key("acct-1", "198.51.100.7"));
    let failures = db
        .write(|tx| {
            Ok((
                tx.count_sign_in_failure(&owner, at(3))?,
                tx.count_sign_in_failure(&owner, at(3))?,
                tx.count_sign_in_failure(&other, at(3))?,
            ))
        })
        .unwrap();
    assert_eq!(failures, (1, 2, 1));
    db.write(|tx| Ok(tx.lock_sign_in(&owner, at(100), at(4))?))
        .unwrap();
    let locks = db
        .read(|tx| {
            Ok((
                tx.sign_in_locked_until(&owner)?,
                tx.sign_in_locked_until(&other)?,
                tx.sign_in_locked_until(&key("acct-2", "192.0.2.1"))?,
            ))
        })
        .unwrap();
    assert_eq!(locks, (Some(at(100)), None, None));
    db.write(|tx| Ok(tx.clear_sign_in_failures(&owner)?))
        .unwrap();
    assert_eq!(
        db.write(|tx| Ok(tx.count_sign_in_failure(&owner, at(5))?))
            .unwrap(),
        1,
        "counted afresh"
    );
    assert_eq!(
        db.read(|tx| Ok(tx.sign_in_locked_until(&owner)?)).unwrap(),
        None
    );
    // Pairs left alone since before the cut are forgotten; later ones stay.
    db.write(|tx| Ok(tx.forget_sign_in_failures(at(4))?))
        .unwrap();
    let after = db
        .write(|tx| {
            Ok((
                tx.count_sign_in_failure(&owner, at(6))?,
                tx.count_sign_in_failure(&other, at(6))?,
            ))
        })
        .unwrap();
    assert_eq!(
        after,
        (2, 1),
        "the owner's (touched at 5) kept, the other's (at 3) forgotten"
    );

    let token = db
        .write(|tx| Ok(tx.insert_token(&new_token(shop.id, "oauth-token", 6))?))
        .unwrap();
    db.write(|tx| {
        Ok(tx.insert_authorization_code(&NewAuthorizationCode {
            code_hash: "code-hash".into(),
            app_id: app.id,
            shop_id: shop.id,
            staff_id: staff.id,
            redirect_uri: "https://app.test/a".into(),
            scopes: ScopeSet::all(),
            code_challenge: Some("challenge".into()),
            expires_at: at(600),
            created_at: at(6),
        })?)
    })
    .unwrap();
    assert_taken(db.write(|tx| {
        Ok(tx.insert_authorization_code(&NewAuthorizationCode {
            code_hash: "code-hash".into(),
            app_id: app.id,
            shop_id: shop.id,
            staff_id: staff.id,
            redirect_uri: "https://app.test/b".into(),
            scopes: ScopeSet::all(),
            code_challenge: None,
            expires_at: at(600),
            created_at: at(6),
        })?)
    }));
    let code = db
        .read(|tx| Ok(tx.authorization_code_by_hash("code-hash")?))
        .unwrap()
        .unwrap();
    assert_eq!(
        (code.app_id, code.shop_id, code.staff_id, code.expires_at),
        (app.id, shop.id, staff.id, at(600))
    );
    assert_eq!(code.code_challenge.as_deref(), Some("challenge"));
    assert_eq!((code.used_at, code.token_id), (None, None));
    assert!(
        db.write(|tx| Ok(tx.redeem_authorization_code(code.id, token.id, at(7))?))
            .unwrap()
    );
    assert!(
        !db.write(|tx| Ok(tx.redeem_authorization_code(code.id, token.id, at(8))?))
            .unwrap(),
        "a code is redeemed once"
    );
    let used = db
        .read(|tx| Ok(tx.authorization_code_by_hash("code-hash")?))
        .unwrap()
        .unwrap();
    assert_eq!((used.used_at, used.token_id), (Some(at(7)), Some(token.id)));
}
every_database!(oauth_apps_staff_and_codes);

fn console_sessions_are_found_touched_and_forgotten(db: &impl Database) {
    use mercer_domain::access::console::{NewAuditEntry, NewStaffSession};
    let shop = shop(db, "console.shop.test");
    let staff = db
        .write(|tx| {
            Ok(tx.insert_staff_account(&NewStaffAccount {
                shop_id: shop.id,
                email: "ops@console.test".into(),
                password_hash: "not-a-real-hash".into(),
                created_at: at(0),
            })?)
        })
        .unwrap();
    let new = |hash: &str, expires| NewStaffSession {
        token_hash: hash.into(),
        shop_id: shop.id,
        staff_id: staff.id,
        created_at: at(0),
        expires_at: at(expires),
    };
    db.write(|tx| {
        tx.insert_staff_session(&new("kept", 1000))?;
        tx.insert_staff_session(&new("expired", 50))?;
        tx.insert_staff_session(&new("idle", 1000))?;
        Ok(())
    })
    .unwrap();
    assert_taken(db.write(|tx| Ok(tx.insert_staff_session(&new("kept", 10))?)));
    let kept = db
        .read(|tx| Ok(tx.staff_session_by_hash("kept")?))
        .unwrap()
        .unwrap();
    assert_eq!(kept.staff_email, "ops@console.test");
    assert_eq!((kept.last_seen_at, kept.expires_at), (at(0), at(1000)));
    db.write(|tx| Ok(tx.touch_staff_session(kept.id, at(90))?))
        .unwrap();
    // At 100: "expired" has expired, "idle" was last seen before 60; "kept" was seen at 90.
    db.write(|tx| Ok(tx.forget_staff_sessions(at(60), at(100))?))
        .unwrap();
    let found = |hash: &str| db.read(|tx| Ok(tx.staff_session_by_hash(hash)?)).unwrap();
    assert_eq!(found("kept").unwrap().last_seen_at, at(90));
    assert!(found("expired").is_none() && found("idle").is_none());
    db.write(|tx| Ok(tx.delete_staff_session("kept")?)).unwrap();
    assert!(found("kept").is_none());

    let other = crate::shop(db, "other.console.test");
    db.write(|tx| {
        for (shop_id, subject) in [
            (shop.id, "a"),
            (other.id, "x"),
            (shop.id, "b"),
            (shop.id, "c"),
        ] {
            tx.insert_audit_entry(&NewAuditEntry {
                shop_id,
                staff_id: staff.id,
                staff_email: "ops@console.test".into(),
                action: "webhook_message.resend".into(),
                subject: subject.into(),
                at: at(5),
            })?;
        }
        Ok(())
    })
    .unwrap();
    let page = |before| {
        db.read(|tx| Ok(tx.audit_entries(shop.id, before, 2)?))
            .unwrap()
    };
    let first = page(None);
    let subjects = |entries: &[mercer_domain::access::console::AuditEntry]| {
        entries
            .iter()
            .map(|e| e.subject.clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(subjects(&first), ["c", "b"]);
    assert_eq!(subjects(&page(Some(first[1].id))), ["a"]);
    assert_eq!(first[0].at, at(5));
}
every_database!(console_sessions_are_found_touched_and_forgotten);

/// What the operator's account commands need: shops marked deleted with their tokens revoked,
/// a token's last use written at most once per window, apps listed and revoked with the tokens
/// they were issued, and staff accounts listed, re-passworded, signed in and deleted with their
/// sessions and codes.
fn operator_commands_change_shops_tokens_apps_and_staff(db: &impl Database) {
    use mercer_domain::access::console::NewStaffSession;
    let shop = shop(db, "ops.shop.test");
    let other = self::shop(db, "other.shop.test");
    let (mine, theirs) = db
        .write(|tx| {
            let mine = tx.insert_token(&new_token(shop.id, "hash-mine", 1))?;
            tx.insert_token(&new_token(shop.id, "hash-mine-2", 1))?;
            let theirs = tx.insert_token(&new_token(other.id, "hash-theirs", 1))?;
            Ok((mine, theirs))
        })
        .unwrap();
    assert_eq!(mine.last_used_at, None);
    // Last use: written, then not within the window, then again after it.
    let note = |at_s: i64, unless_after: i64| {
        db.write(|tx| Ok(tx.note_token_use(mine.id, at(at_s), at(unless_after))?))
            .unwrap()
    };
    assert!(note(100, 40));
    assert!(!note(130, 70), "used at 100, after 70: not written");
    assert!(note(161, 101));
    let listed = db.read(|tx| Ok(tx.tokens_of_shop(shop.id)?)).unwrap();
    assert_eq!(listed[0].last_used_at, Some(at(161)));
    assert_eq!(listed[1].last_used_at, None);

    // Staff: listed, new password, sign-in noted, deleted with its sessions and codes.
    let app = db
        .write(|tx| {
            Ok(tx.insert_oauth_app(&NewOAuthApp {
                client_id: "mci_ops".into(),
                client_secret_hash: "h".into(),
                name: "Ops app".into(),
                redirect_uris: vec!["https://app.test/cb".into()],
                created_at: at(1),
            })?)
        })
        .unwrap();
    let staff = db
        .write(|tx| {
            let staff = tx.insert_staff_account(&NewStaffAccount {
                shop_id: shop.id,
                email: "ops@ops.test".into(),
                password_hash: "old".into(),
                created_at: at(2),
            })?;
            tx.set_staff_password(staff.id, "new", at(3))?;
            tx.note_staff_sign_in(staff.id, at(4))?;
            tx.insert_staff_session(&NewStaffSession {
                token_hash: "session".into(),
                shop_id: shop.id,
                staff_id: staff.id,
                created_at: at(4),
                expires_at: at(1000),
            })?;
            tx.insert_authorization_code(&NewAuthorizationCode {
                code_hash: "code".into(),
                app_id: app.id,
                shop_id: shop.id,
                staff_id: staff.id,
                redirect_uri: String::new(),
                scopes: ScopeSet::all(),
                code_challenge: None,
                expires_at: at(600),
                created_at: at(4),
            })?;
            let code = tx.authorization_code_by_hash("code")?.expect("the code");
            tx.redeem_authorization_code(code.id, mine.id, at(5))?;
            Ok(staff)
        })
        .unwrap();
    let listed = db.read(|tx| Ok(tx.staff_of_shop(shop.id)?)).unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].password_hash, "new");
    assert_eq!(listed[0].last_sign_in_at, Some(at(4)));
    assert!(
        db.read(|tx| Ok(tx.staff_of_shop(other.id)?))
            .unwrap()
            .is_empty()
    );

    // Apps: listed; the tokens their codes were exchanged for; revoked once.
    let apps = db.read(|tx| Ok(tx.list_oauth_apps()?)).unwrap();
    assert_eq!(apps, vec![app.clone()]);
    let issued = db.read(|tx| Ok(tx.oauth_app_tokens(app.id)?)).unwrap();
    assert_eq!(issued.iter().map(|t| t.id).collect::<Vec<_>>(), [mine.id]);
    let revoked = db
        .write(|tx| {
            Ok((
                tx.revoke_oauth_app(app.id, at(6))?,
                tx.revoke_oauth_app(app.id, at(7))?,
            ))
        })
        .unwrap();
    assert_eq!(revoked, (true, false));
    let app_now = db
        .read(|tx| Ok(tx.oauth_app_by_client_id("mci_ops")?))
        .unwrap()
        .unwrap();
    assert_eq!(app_now.revoked_at, Some(at(6)));

    // Sessions of one account end; deleting the account takes its codes.
    db.write(|tx| Ok(tx.delete_sessions_of_staff(staff.id)?))
        .unwrap();
    assert!(
        db.read(|tx| Ok(tx.staff_session_by_hash("session")?))
            .unwrap()
            .is_none()
    );
    db.write(|tx| Ok(tx.delete_staff_account(staff.id)?))
        .unwrap();
    assert!(
        db.read(|tx| Ok(tx.staff_of_shop(shop.id)?))
            .unwrap()
            .is_empty()
    );
    assert!(
        db.read(|tx| Ok(tx.authorization_code_by_hash("code")?))
            .unwrap()
            .is_none()
    );

    // A shop marked deleted once, its live tokens revoked, another shop's left alone.
    let (marked, again, count) = db
        .write(|tx| {
            Ok((
                tx.mark_shop_deleted(shop.id, at(8))?,
                tx.mark_shop_deleted(shop.id, at(9))?,
                tx.revoke_shop_tokens(shop.id, at(8))?,
            ))
        })
        .unwrap();
    assert_eq!((marked, again, count), (true, false, 2));
    let stored = db.read(|tx| Ok(tx.shop_by_id(shop.id)?)).unwrap().unwrap();
    assert_eq!(stored.deleted_at, Some(at(8)));
    assert!(
        db.read(|tx| Ok(tx.active_token_by_hash("hash-mine")?))
            .unwrap()
            .is_none()
    );
    let still = db
        .read(|tx| Ok(tx.active_token_by_hash("hash-theirs")?))
        .unwrap();
    assert_eq!(still.map(|t| t.id), Some(theirs.id));
}
every_database!(operator_commands_change_shops_tokens_apps_and_staff);
