//! API overrides and OAuth records against both real databases.

#![allow(clippy::unwrap_used)] // test code: a panic is a failed assertion

use mercer_domain::Timestamp;
use mercer_domain::access::credentials::{ScopeSet, Secret, TokenSource, hash_token, mint_token};
use mercer_domain::access::oauth::{NewAuthorizationCode, create_app, create_staff};
use mercer_domain::access::shop::{ShopInput, create_shop};
use mercer_domain::overrides::{NewApiOverride, OverrideType};
use mercer_domain::ports::Database;
use mercer_store::testing::TestDatabase;
use mercer_store::{Backend, backend_tests};

fn now() -> Timestamp {
    Timestamp::from_micros(1_700_000_000_000_000)
}

fn overrides_round_trip_and_the_newest_of_a_type_wins(backend: Backend) {
    let (_db, store) = TestDatabase::migrated(backend);
    store
        .write(|tx| {
            let shop = create_shop(
                tx,
                ShopInput {
                    shop_domain: "o.shop.test".into(),
                    ..ShopInput::default()
                },
                now(),
            )?;
            let new = |url: &str, at: Timestamp| NewApiOverride {
                shop_id: shop.id,
                override_type: OverrideType::Tax,
                url: url.to_string(),
                shared_secret: Secret::new("secret-123"),
                created_at: at,
            };
            let first = tx.insert_override(&new("https://a.test/", now()))?;
            let second = tx.insert_override(&new("https://b.test/", now()))?;
            assert_eq!(first.public_id.len(), 32);
            assert_ne!(first.public_id, second.public_id);
            let newest = tx.newest_override(shop.id, OverrideType::Tax)?.unwrap();
            assert_eq!(newest.url, "https://b.test/");
            assert_eq!(newest.shared_secret.expose(), "secret-123");
            assert!(
                tx.newest_override(shop.id, OverrideType::Shipping)?
                    .is_none()
            );
            let mut changed = first.clone();
            changed.override_type = OverrideType::Shipping;
            changed.shared_secret = Secret::new("another-secret");
            changed.updated_at = now().plus_seconds(5);
            tx.update_override(&changed)?;
            let stored = tx
                .override_by_public_id(shop.id, &first.public_id)?
                .unwrap();
            assert_eq!(stored, changed);
            tx.delete_override(second.id)?;
            assert_eq!(tx.overrides_of_shop(shop.id)?, vec![changed]);
            Ok(())
        })
        .unwrap();
}

fn a_code_is_redeemed_once(backend: Backend) {
    let (_db, store) = TestDatabase::migrated(backend);
    store
        .write(|tx| {
            let shop = create_shop(
                tx,
                ShopInput {
                    shop_domain: "c.shop.test".into(),
                    ..ShopInput::default()
                },
                now(),
            )?;
            let uris = [
                "https://a.test/cb".to_string(),
                "http://127.0.0.1:7/cb".to_string(),
            ];
            let app = create_app(tx, "App", &uris, now())?.app;
            let found = tx.oauth_app_by_client_id(&app.client_id)?.unwrap();
            assert_eq!(found.redirect_uris, uris);
            let staff = create_staff(
                tx,
                shop.identifier.as_str(),
                "a@b.test",
                "long enough password",
                now(),
            )?;
            let later = now().plus_seconds(30);
            let stored = tx.staff_account(shop.id, "a@b.test")?.unwrap();
            assert_eq!(stored, staff);

            let scopes = ScopeSet::parse("read_orders").unwrap();
            tx.insert_authorization_code(&NewAuthorizationCode {
                code_hash: hash_token("the-code"),
                app_id: app.id,
                shop_id: shop.id,
                staff_id: staff.id,
                redirect_uri: uris[0].clone(),
                scopes: scopes.clone(),
                code_challenge: Some("c".repeat(43)),
                expires_at: later,
                created_at: now(),
            })?;
            let code = tx
                .authorization_code_by_hash(&hash_token("the-code"))?
                .unwrap();
            assert_eq!(code.scopes, scopes);
            assert_eq!(code.used_at, None);
            let (_, record) = mint_token(shop.id, "oauth", scopes, TokenSource::OAuth, now());
            let token = tx.insert_token(&record)?;
            assert!(tx.redeem_authorization_code(code.id, token.id, now())?);
            assert!(!tx.redeem_authorization_code(code.id, token.id, now())?);
            let used = tx
                .authorization_code_by_hash(&hash_token("the-code"))?
                .unwrap();
            assert_eq!((used.used_at, used.token_id), (Some(now()), Some(token.id)));
            Ok(())
        })
        .unwrap();
}

backend_tests!(
    overrides_round_trip_and_the_newest_of_a_type_wins,
    a_code_is_redeemed_once,
);
