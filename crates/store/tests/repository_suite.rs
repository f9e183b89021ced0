//! One repository suite, three targets: every test here is written once against
//! `mercer_domain::ports::Database` and runs on the in-memory database (`memory::name`), the
//! store on SQLite (`sqlite::name`) and the store on PostgreSQL (`postgres::name`). The real
//! store is the reference: where the memory database answers otherwise, the memory database is
//! wrong. So the fake the domain's own tests run on cannot drift from the real thing.
//!
//! It covers what the memory database claims to model. Not covered, because memory does not
//! model them (they are SQL, tested in the store's other suites on both real databases): the
//! directory's filters, sorting and paging; concurrent claimers and the leases between
//! workers; the applier lock held by another process; rows that do not read back.

#![allow(clippy::unwrap_used)] // test code: a panic is a failed assertion

use std::time::Duration;

use mercer_domain::access::credentials::{ApiToken, NewApiToken, ScopeSet, Secret, TokenSource};
use mercer_domain::access::oauth::{NewAuthorizationCode, NewOAuthApp, NewStaffAccount, SignInKey};
use mercer_domain::access::secrets::{SecretKind, SharedSecret};
use mercer_domain::access::shop::{
    CheckoutSettings, Shop, ShopInput, ShopSettings, create_shop, update_shop_settings,
};
use mercer_domain::box_builder::repository::{LineItemOwner, SelectionFilter, TimeSlotFilter};
use mercer_domain::box_builder::resources::{
    Attribute, BoxProduct, BoxSize, Selection, SelectionItem, StoredSelection, SubscriptionBox,
    TimeSlot,
};
use mercer_domain::checkout::repository::{CheckoutStatus, NewCheckoutOrder};
use mercer_domain::checkout::state::{CheckoutCustomer, CheckoutDocument, CheckoutLineItem};
use mercer_domain::directory::{DirectoryAddress, DirectoryCustomer, parse_directory_query};
use mercer_domain::kernel::jobs::{Enqueued, JobState, NewJob};
use mercer_domain::overrides::{NewApiOverride, OverrideType};
use mercer_domain::platform::catalogue;
use mercer_domain::platform::destinations::{DestinationSettings, Topic};
use mercer_domain::platform::events::{
    EntityKind, EntityWrite, EventAction, EventSource, NewInboundEvent, Outcome, accept_events,
    apply_event, parse_event, parse_event_body,
};
use mercer_domain::platform::outbox::{ConnectorCall, OutboxStatus};
use mercer_domain::platform::resources::CustomerAddress;
use mercer_domain::platform::sync::SyncStatus;
use mercer_domain::ports::Database;
use mercer_domain::subscriptions::groups::{BillingRule, GroupProduct, IntervalType, StoredGroup};
use mercer_domain::subscriptions::query::{Cursor, ListQuery, parse_filters};
use mercer_domain::subscriptions::repository::{
    CustomerFields, CustomerListQuery, CustomerStatus, NewSubscriptionOrder, OrderAttemptEnd,
    OrderAttemptStatus, StoredAddress, StoredSubscription, SubscriptionState, SummaryFigures,
};
use mercer_domain::subscriptions::resources::{
    Actor, ActorType, Cents, CurrencyCode, FailureDetails, LineItemAttribute, LineItemDiscount,
    PaymentExpiry, PrepaidMetadata, ShippingLine, SubscriptionLineItem, SubscriptionStatus,
};
use mercer_domain::subscriptions::states::NewStatusLog;
use mercer_domain::webhooks::{
    AttemptOutcome, DeliveryAttempt, MessageStatus, MessageUpdate, NewWebhookEndpoint,
    NewWebhookMessage, WebhookEndpoint, WebhookKind,
};
use mercer_domain::{DomainError, Timestamp};
use serde_json::{Value, json};

/// Turns `fn name(db: &impl Database)` functions into one test per target: `memory::name`,
/// `sqlite::name` and `postgres::name`, each on a database of its own.
macro_rules! repository_suite {
    ($($name:ident),+ $(,)?) => {
        mod memory {
            $(
                #[test]
                fn $name() {
                    super::$name(&mercer_domain::testing::MemoryDatabase::default())
                }
            )+
        }
        mod sqlite {
            $(
                #[test]
                fn $name() {
                    let (_db, store) =
                        mercer_store::testing::TestDatabase::migrated(mercer_store::Backend::Sqlite);
                    super::$name(&store)
                }
            )+
        }
        mod postgres {
            $(
                #[test]
                fn $name() {
                    let (_db, store) = mercer_store::testing::TestDatabase::migrated(
                        mercer_store::Backend::Postgres,
                    );
                    super::$name(&store)
                }
            )+
        }
    };
}

fn at(seconds: i64) -> Timestamp {
    Timestamp::from_micros(1_700_000_000_000_000).plus_seconds(seconds)
}

fn shop(db: &impl Database, domain: &str) -> Shop {
    db.write(|tx| {
        create_shop(
            tx,
            ShopInput {
                shop_domain: domain.into(),
                ..ShopInput::default()
            },
            at(0),
        )
    })
    .unwrap()
}

/// Asserts that the work was refused by a unique constraint.
fn assert_taken<T: std::fmt::Debug>(result: Result<T, DomainError>) {
    let Err(DomainError::Storage(error)) = &result else {
        panic!("must be refused as taken: {result:?}")
    };
    assert!(error.is_unique_violation(), "{error:?}");
}

// --- access: shops, tokens, secrets, OAuth -------------------------------------------------

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
    };
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
    let second = second.unwrap();
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

fn new_token(shop_id: i64, hash: &str, seconds: i64) -> NewApiToken {
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
        db.read(|tx| Ok(tx.staff_account(shop.id + 1, "staff@a.shop.test")?))
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

// --- platform: destinations ----------------------------------------------------------------

fn settings(topic: Topic) -> DestinationSettings {
    DestinationSettings {
        topic,
        url: "http://127.0.0.1:9/connector".into(),
        version: "v1".into(),
        timeout_ms: 500,
    }
}

fn destinations_allow_one_live_per_topic(db: &impl Database) {
    let shop = shop(db, "a.shop.test");
    let first = db
        .write(|tx| Ok(tx.insert_destination(shop.id, &settings(Topic::Customers), at(1))?))
        .unwrap();
    assert_eq!((first.timeout_ms, first.created_at), (500, at(1)));
    let second =
        db.write(|tx| Ok(tx.insert_destination(shop.id, &settings(Topic::Customers), at(2))?));
    let Err(DomainError::Storage(error)) = second else {
        panic!("a second live destination must be refused: {second:?}")
    };
    assert!(error.is_unique_violation());
    db.write(|tx| Ok(tx.insert_destination(shop.id, &settings(Topic::Orders), at(2))?))
        .unwrap();
    db.write(|tx| Ok(tx.delete_destination(shop.id, first.id, at(3))?))
        .unwrap();
    let again = db
        .write(|tx| Ok(tx.insert_destination(shop.id, &settings(Topic::Customers), at(4))?))
        .unwrap();
    let live = db.read(|tx| Ok(tx.live_destinations(shop.id)?)).unwrap();
    assert_eq!(
        live.iter().map(|d| d.topic).collect::<Vec<_>>(),
        [Topic::Orders, Topic::Customers]
    );
    assert_eq!(live[1].id, again.id);
    let deleted = db
        .read(|tx| Ok(tx.destination(shop.id, first.id)?))
        .unwrap()
        .unwrap();
    assert_eq!(deleted.deleted_at, Some(at(3)));
    assert!(
        db.read(|tx| Ok(tx.destination(shop.id + 1, first.id)?))
            .unwrap()
            .is_none(),
        "another shop's"
    );
    let mut changed = settings(Topic::Customers);
    changed.timeout_ms = 30_000;
    db.write(|tx| Ok(tx.update_destination(shop.id, again.id, &changed, at(5))?))
        .unwrap();
    let updated = db
        .read(|tx| Ok(tx.live_destination(shop.id, Topic::Customers)?))
        .unwrap()
        .unwrap();
    assert_eq!(
        (updated.id, updated.timeout_ms, updated.updated_at),
        (again.id, 30_000, at(5))
    );
    assert!(
        db.read(|tx| Ok(tx.live_destination(shop.id, Topic::Products)?))
            .unwrap()
            .is_none()
    );
}

// --- platform: entities and addresses --------------------------------------------------------

fn customer_event(shop_id: i64, id: &str, seconds: i64, customer: Value) -> NewInboundEvent {
    let mut body = customer;
    body["platform_id"] = json!(id);
    body["platform_updated_at"] = json!(at(seconds).to_rfc3339());
    parse_event(
        shop_id,
        EntityKind::Customer,
        EventAction::Saved,
        &json!({"data": {"customer": body}}),
        EventSource::Webhook,
        at(0),
    )
    .unwrap()
}

fn deleted_event(shop_id: i64, kind: EntityKind, id: &str, seconds: i64) -> NewInboundEvent {
    let body = json!({"data": {kind.as_str(): {"platform_id": id, "platform_deleted_at": at(seconds).to_rfc3339()}}});
    parse_event(
        shop_id,
        kind,
        EventAction::Deleted,
        &body,
        EventSource::Webhook,
        at(0),
    )
    .unwrap()
}

fn saved_event(
    shop_id: i64,
    kind: EntityKind,
    id: &str,
    seconds: i64,
    mut body: Value,
) -> NewInboundEvent {
    body["platform_id"] = json!(id);
    body["platform_updated_at"] = json!(at(seconds).to_rfc3339());
    parse_event(
        shop_id,
        kind,
        EventAction::Saved,
        &json!({"data": {kind.as_str(): body}}),
        EventSource::Webhook,
        at(0),
    )
    .unwrap()
}

fn address(id: Option<&str>, city: &str, default: bool) -> Value {
    let mut address = json!({"first_name": "Ada", "street_1": "1 Main St", "city": city, "postal_code": "69001", "country_code": "FR", "is_default": default});
    if let Some(id) = id {
        address["platform_id"] = json!(id);
    }
    address
}

/// Applies events at once, as the receiving route does when nothing waits.
fn accept(db: &impl Database, events: Vec<NewInboundEvent>, now: Timestamp) {
    db.write(|tx| accept_events(tx, &events, now)).unwrap();
}

fn stored_customer(db: &impl Database, shop_id: i64, platform_id: &str) -> DirectoryCustomer {
    db.read(|tx| Ok(tx.directory_customer_by_platform_id(shop_id, platform_id)?))
        .unwrap()
        .expect("the customer is stored")
}

fn stored_addresses(db: &impl Database, shop_id: i64, customer_id: i64) -> Vec<DirectoryAddress> {
    db.read(|tx| Ok(tx.addresses_of_customers(shop_id, &[customer_id])?))
        .unwrap()
}

/// (platform id, city, default) of each address, in the directory's order.
fn summary(addresses: &[DirectoryAddress]) -> Vec<(Option<String>, Option<String>, bool)> {
    addresses
        .iter()
        .map(|a| (a.platform_id.clone(), a.city.clone(), a.is_default))
        .collect()
}

fn applied_customer_addresses_are_keyed_by_id(db: &impl Database) {
    let shop = shop(db, "a.shop.test");
    accept(
        db,
        vec![customer_event(
            shop.id,
            "c1",
            10,
            json!({"email": "ada@example.test", "addresses": [address(Some("a1"), "Lyon", true), address(Some("a2"), "Paris", false)]}),
        )],
        at(100),
    );
    let customer = stored_customer(db, shop.id, "c1");
    assert_eq!(customer.email.as_deref(), Some("ada@example.test"));
    let before = stored_addresses(db, shop.id, customer.id);
    assert_eq!(
        summary(&before),
        [
            (Some("a1".into()), Some("Lyon".into()), true),
            (Some("a2".into()), Some("Paris".into()), false)
        ]
    );
    let first = &before[0];
    assert_eq!(first.customer_id, customer.id);
    assert_eq!(
        first.platform_customer_id.as_deref(),
        Some("c1"),
        "events carry no platform_customer_id on addresses: it is the owning customer's"
    );
    assert_eq!(
        (first.first_name.as_deref(), first.street_1.as_deref()),
        (Some("Ada"), Some("1 Main St"))
    );
    assert_eq!(
        (first.zip.as_deref(), first.country_code.as_deref()),
        (Some("69001"), Some("FR"))
    );
    assert_eq!(
        (first.created_at, first.updated_at, first.deleted_at),
        (at(100), at(100), None)
    );
    accept(
        db,
        vec![customer_event(
            shop.id,
            "c1",
            20,
            json!({"addresses": [address(Some("a2"), "Marseille", true), address(Some("a3"), "Nice", false)]}),
        )],
        at(200),
    );
    let after = stored_addresses(db, shop.id, customer.id);
    assert_eq!(after.len(), 2, "a1 is gone: {after:?}");
    assert_eq!(after[0].id, before[1].id, "a2 kept its id");
    assert_eq!(
        summary(&after),
        [
            (Some("a2".into()), Some("Marseille".into()), true),
            (Some("a3".into()), Some("Nice".into()), false)
        ]
    );
    assert_eq!(
        (after[0].created_at, after[0].updated_at),
        (at(100), at(200))
    );
    // An event without addresses leaves them alone.
    accept(
        db,
        vec![customer_event(
            shop.id,
            "c1",
            30,
            json!({"first_name": "Ada"}),
        )],
        at(300),
    );
    assert_eq!(stored_addresses(db, shop.id, customer.id), after);
}

fn addresses_without_an_id_are_keyed_by_position(db: &impl Database) {
    let shop = shop(db, "a.shop.test");
    let saved = |seconds: i64, addresses: Value| {
        customer_event(shop.id, "c1", seconds, json!({"addresses": addresses}))
    };
    accept(
        db,
        vec![saved(
            10,
            json!([address(None, "Lyon", true), address(None, "Paris", false)]),
        )],
        at(100),
    );
    let customer_id = stored_customer(db, shop.id, "c1").id;
    let before = stored_addresses(db, shop.id, customer_id);
    assert_eq!(
        summary(&before),
        [
            (None, Some("Lyon".into()), true),
            (None, Some("Paris".into()), false)
        ]
    );
    // Swapped: the rows are positions, so both are rewritten in place.
    accept(
        db,
        vec![saved(
            20,
            json!([address(None, "Paris", false), address(None, "Lyon", true)]),
        )],
        at(200),
    );
    let swapped = stored_addresses(db, shop.id, customer_id);
    assert_eq!(
        swapped.iter().map(|a| a.id).collect::<Vec<_>>(),
        before.iter().map(|a| a.id).collect::<Vec<_>>()
    );
    assert_eq!(
        summary(&swapped),
        [
            (None, Some("Paris".into()), false),
            (None, Some("Lyon".into()), true)
        ]
    );
    // One dropped: the last position goes.
    accept(
        db,
        vec![saved(30, json!([address(None, "Paris", false)]))],
        at(300),
    );
    let left = stored_addresses(db, shop.id, customer_id);
    assert_eq!(left.len(), 1);
    assert_eq!((left[0].id, left[0].updated_at), (before[0].id, at(200)));
}

fn duplicate_address_ids_keep_the_later_address(db: &impl Database) {
    let shop = shop(db, "a.shop.test");
    accept(
        db,
        vec![customer_event(
            shop.id,
            "c1",
            10,
            json!({"addresses": [address(Some("a1"), "Lyon", true), address(Some("a2"), "Paris", false), address(Some("a1"), "Nice", false)]}),
        )],
        at(100),
    );
    let customer_id = stored_customer(db, shop.id, "c1").id;
    assert_eq!(
        summary(&stored_addresses(db, shop.id, customer_id)),
        [
            (Some("a2".into()), Some("Paris".into()), false),
            (Some("a1".into()), Some("Nice".into()), false)
        ],
        "the later a1 wins, and is written after a2"
    );
}

fn only_changed_addresses_are_written(db: &impl Database) {
    let shop = shop(db, "a.shop.test");
    let saved = |seconds: i64, addresses: Value| {
        customer_event(shop.id, "c1", seconds, json!({"addresses": addresses}))
    };
    accept(
        db,
        vec![saved(
            10,
            json!([
                address(Some("a1"), "Lyon", true),
                address(Some("a2"), "Paris", false)
            ]),
        )],
        at(100),
    );
    let customer_id = stored_customer(db, shop.id, "c1").id;
    accept(
        db,
        vec![saved(
            20,
            json!([
                address(Some("a1"), "Nice", true),
                address(Some("a2"), "Paris", false)
            ]),
        )],
        at(200),
    );
    let rows = stored_addresses(db, shop.id, customer_id);
    assert_eq!(rows.len(), 2);
    assert_eq!(
        (rows[0].city.as_deref(), rows[0].updated_at),
        (Some("Nice"), at(200))
    );
    assert_eq!(rows[1].updated_at, at(100), "a2 did not change");
    // Deleted, then back with a2 only: a1 must not come back with it.
    accept(
        db,
        vec![deleted_event(shop.id, EntityKind::Customer, "c1", 30)],
        at(300),
    );
    let deleted = stored_customer(db, shop.id, "c1");
    assert_eq!(deleted.deleted_at, Some(at(300)));
    assert_eq!(
        stored_addresses(db, shop.id, customer_id).len(),
        2,
        "a deletion leaves the address rows as they were"
    );
    accept(
        db,
        vec![saved(40, json!([address(Some("a2"), "Paris", false)]))],
        at(400),
    );
    let rows = stored_addresses(db, shop.id, customer_id);
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(
        (rows[0].platform_id.as_deref(), rows[0].updated_at),
        (Some("a2"), at(100))
    );
    assert!(stored_customer(db, shop.id, "c1").deleted_at.is_none());
}

fn a_deletion_and_a_newer_save_in_one_batch_leave_the_saved_addresses(db: &impl Database) {
    let shop = shop(db, "a.shop.test");
    accept(
        db,
        vec![customer_event(
            shop.id,
            "c1",
            10,
            json!({"addresses": [address(Some("a1"), "Lyon", true), address(Some("a2"), "Paris", false)]}),
        )],
        at(100),
    );
    let customer_id = stored_customer(db, shop.id, "c1").id;
    let a2_id = stored_addresses(db, shop.id, customer_id)[1].id;
    accept(
        db,
        vec![
            deleted_event(shop.id, EntityKind::Customer, "c1", 20),
            customer_event(
                shop.id,
                "c1",
                30,
                json!({"addresses": [address(Some("a2"), "Nice", false)]}),
            ),
        ],
        at(200),
    );
    let rows = stored_addresses(db, shop.id, customer_id);
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!((rows[0].id, rows[0].city.as_deref()), (a2_id, Some("Nice")));
}

/// Written straight through the repository: a stale `previous` (it says a1 is stored, with
/// another city) still leaves the rows the document says.
fn put_platform_entities_with_a_stale_previous_document(db: &impl Database) {
    let shop = shop(db, "a.shop.test");
    let document = |city: &str| {
        customer_event(
            shop.id,
            "c1",
            10,
            json!({"email": "ada@example.test", "addresses": [address(Some("a1"), city, true)]}),
        )
        .document
        .unwrap()
        .entity()
        .clone()
    };
    db.write(|tx| {
        let current = document("Lyon");
        tx.put_platform_entities(
            shop.id,
            EntityKind::Customer,
            &[EntityWrite {
                stored_id: Some(424_242),
                platform_id: "c1".to_string(),
                platform_updated_at: Some(at(10)),
                platform_deleted_at: None,
                json: Some(current.to_json().unwrap()),
                document: Some(current),
                previous: Some(document("Paris")),
            }],
            at(100),
        )?;
        Ok(())
    })
    .unwrap();
    let customer = stored_customer(db, shop.id, "c1");
    assert_eq!(customer.email.as_deref(), Some("ada@example.test"));
    let addresses = stored_addresses(db, shop.id, customer.id);
    assert_eq!(
        summary(&addresses),
        [(Some("a1".into()), Some("Lyon".into()), true)]
    );
    let record = db
        .read(|tx| Ok(tx.platform_entity(shop.id, EntityKind::Customer, "c1")?))
        .unwrap()
        .unwrap();
    assert_eq!(record.id, customer.id);
    assert_eq!(
        (record.platform_updated_at, record.platform_deleted_at),
        (Some(at(10)), None)
    );
    assert!(record.document.unwrap().contains("ada@example.test"));
}

fn entities_of_every_kind_are_held_by_shop_and_platform_id(db: &impl Database) {
    let shop = shop(db, "a.shop.test");
    let other = self::shop(db, "b.shop.test");
    accept(
        db,
        vec![
            saved_event(
                shop.id,
                EntityKind::Order,
                "o1",
                10,
                json!({"order_number": "1001"}),
            ),
            saved_event(
                shop.id,
                EntityKind::Product,
                "p1",
                10,
                json!({"name": "Tea", "variants": [{"platform_id": "v1", "sku": "T-1", "price": "4.50"}]}),
            ),
            saved_event(
                shop.id,
                EntityKind::Category,
                "k1",
                10,
                json!({"name": "Drinks"}),
            ),
            saved_event(
                shop.id,
                EntityKind::Order,
                "o2",
                10,
                json!({"order_number": "1002"}),
            ),
            deleted_event(shop.id, EntityKind::Order, "o2", 20),
            deleted_event(shop.id, EntityKind::Product, "p9", 20),
        ],
        at(100),
    );
    accept(
        db,
        vec![saved_event(
            other.id,
            EntityKind::Order,
            "o1",
            10,
            json!({"order_number": "9"}),
        )],
        at(100),
    );
    let (orders, products, categories) = db
        .read(|tx| {
            Ok((
                tx.platform_entities(shop.id, EntityKind::Order, &["o1", "o2", "o3"])?,
                tx.platform_entities(shop.id, EntityKind::Product, &["p1", "p9"])?,
                tx.platform_entities(shop.id, EntityKind::Category, &["k1", "o1"])?,
            ))
        })
        .unwrap();
    let mut orders = orders;
    orders.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(
        orders.iter().map(|(id, _)| id.as_str()).collect::<Vec<_>>(),
        ["o1", "o2"],
        "unknown ones are left out"
    );
    let o1 = &orders[0].1;
    assert_eq!(
        (o1.platform_updated_at, o1.platform_deleted_at),
        (Some(at(10)), None)
    );
    assert!(o1.document.as_deref().unwrap().contains("1001"));
    let o2 = &orders[1].1;
    assert_eq!(o2.platform_deleted_at, Some(at(20)));
    assert!(
        o2.document.as_deref().unwrap().contains("1002"),
        "a deleted entity keeps its last document"
    );
    let mut products = products;
    products.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(products.len(), 2);
    assert!(products[0].1.document.as_deref().unwrap().contains("T-1"));
    assert_eq!(
        (
            products[1].1.platform_deleted_at,
            products[1].1.document.clone()
        ),
        (Some(at(20)), None),
        "known only from its deletion"
    );
    assert_eq!(
        categories
            .iter()
            .map(|(id, _)| id.as_str())
            .collect::<Vec<_>>(),
        ["k1"],
        "kinds are apart"
    );
    let theirs = db
        .read(|tx| Ok(tx.platform_entity(other.id, EntityKind::Order, "o1")?))
        .unwrap()
        .unwrap();
    assert_ne!(theirs.id, o1.id, "shops are apart");
}

// --- platform: the event queue --------------------------------------------------------------

fn queued(db: &impl Database, now: Timestamp) -> Vec<(i64, String, i64)> {
    db.read(|tx| Ok(tx.pending_inbound_events(100, now)?))
        .unwrap()
        .into_iter()
        .map(|event| {
            let event = event.unwrap();
            (event.id, event.event.platform_id, event.attempts)
        })
        .collect()
}

fn the_event_queue_keeps_order_postpones_sets_aside_and_requeues(db: &impl Database) {
    let shop = shop(db, "a.shop.test");
    let events: Vec<NewInboundEvent> = ["c1", "c2", "c3", "c4"]
        .iter()
        .map(|id| {
            customer_event(
                shop.id,
                id,
                10,
                json!({"email": format!("{id}@example.test")}),
            )
        })
        .collect();
    assert!(!db.read(|tx| Ok(tx.has_pending_inbound_events()?)).unwrap());
    db.write(|tx| Ok(tx.insert_inbound_events(&events)?))
        .unwrap();
    let stored = db
        .read(|tx| Ok(tx.pending_inbound_events(10, at(0))?))
        .unwrap();
    assert_eq!(
        stored
            .iter()
            .map(|e| e.as_ref().unwrap().event.clone())
            .collect::<Vec<_>>(),
        events,
        "stored as received, in order"
    );
    let ids: Vec<i64> = queued(db, at(0)).iter().map(|(id, _, _)| *id).collect();
    assert!(ids.windows(2).all(|pair| pair[0] < pair[1]));
    assert_eq!(
        db.read(|tx| Ok(tx.pending_inbound_events(2, at(0))?))
            .unwrap()
            .len(),
        2,
        "the limit"
    );
    assert_eq!(
        db.read(|tx| Ok(tx.count_pending_inbound_events()?))
            .unwrap(),
        4
    );
    assert!(db.read(|tx| Ok(tx.has_pending_inbound_events()?)).unwrap());
    assert!(db.write(|tx| Ok(tx.lock_event_applier()?)).unwrap());

    // c1 applied; c2 postponed to 60; c3 set aside.
    db.write(|tx| {
        tx.mark_inbound_events(&[(ids[0], Outcome::Applied)], at(1))?;
        tx.postpone_inbound_event(ids[1], 1, "connector down", at(60))?;
        tx.set_aside_inbound_event(ids[2], 5, "gave up", at(2))?;
        Ok(())
    })
    .unwrap();
    assert_eq!(
        queued(db, at(59)),
        [(ids[3], "c4".to_string(), 0)],
        "c2 is not due before 60"
    );
    assert_eq!(
        queued(db, at(60)),
        [(ids[1], "c2".to_string(), 1), (ids[3], "c4".to_string(), 0)]
    );
    assert_eq!(
        db.read(|tx| Ok(tx.count_pending_inbound_events()?))
            .unwrap(),
        2,
        "a postponed event is still pending"
    );
    let failed = db.read(|tx| Ok(tx.failed_inbound_events(10)?)).unwrap();
    assert_eq!(failed.len(), 1);
    let c3 = &failed[0];
    assert_eq!(
        (c3.id, c3.shop_id, c3.kind.as_str(), c3.action.as_str()),
        (ids[2], shop.id, "customer", "saved")
    );
    assert_eq!(
        (
            c3.platform_id.as_str(),
            c3.attempts,
            c3.error.as_str(),
            c3.failed_at
        ),
        ("c3", 5, "gave up", at(2))
    );
    assert_eq!(
        db.read(|tx| Ok(tx.count_failed_inbound_events()?)).unwrap(),
        1
    );

    // c4 set aside too; only c3 is put back, under its own id, with its attempts reset.
    db.write(|tx| Ok(tx.set_aside_inbound_event(ids[3], 5, "gave up", at(3))?))
        .unwrap();
    let back = db
        .write(|tx| Ok(tx.requeue_failed_inbound_events(Some(&[ids[2]]))?))
        .unwrap();
    assert_eq!(back, [ids[2]]);
    assert_eq!(
        queued(db, at(60)),
        [(ids[1], "c2".to_string(), 1), (ids[2], "c3".to_string(), 0)],
        "back in its place"
    );
    assert_eq!(
        db.read(|tx| Ok(tx.count_failed_inbound_events()?)).unwrap(),
        1
    );
    let all = db
        .write(|tx| Ok(tx.requeue_failed_inbound_events(None)?))
        .unwrap();
    assert_eq!(all, [ids[3]]);
    assert_eq!(
        db.read(|tx| Ok(tx.count_failed_inbound_events()?)).unwrap(),
        0
    );
    let requeued = db
        .read(|tx| Ok(tx.pending_inbound_events(10, at(60))?))
        .unwrap();
    assert_eq!(
        requeued.last().unwrap().as_ref().unwrap().event,
        events[3],
        "the event as it was queued"
    );
    db.write(|tx| {
        tx.mark_inbound_events(
            &[
                (ids[1], Outcome::Applied),
                (ids[2], Outcome::Stale),
                (ids[3], Outcome::Unchanged),
            ],
            at(70),
        )?;
        Ok(())
    })
    .unwrap();
    assert_eq!(
        db.read(|tx| Ok(tx.count_pending_inbound_events()?))
            .unwrap(),
        0
    );
    assert!(!db.read(|tx| Ok(tx.has_pending_inbound_events()?)).unwrap());
}

fn new_events_take_ids_after_events_set_aside(db: &impl Database) {
    let shop = shop(db, "a.shop.test");
    let event = |id: &str| customer_event(shop.id, id, 10, json!({}));
    db.write(|tx| Ok(tx.insert_inbound_events(&[event("c1"), event("c2")])?))
        .unwrap();
    let ids: Vec<i64> = queued(db, at(0)).iter().map(|(id, _, _)| *id).collect();
    db.write(|tx| {
        tx.set_aside_inbound_event(ids[1], 1, "no", at(1))?;
        tx.mark_inbound_events(&[(ids[0], Outcome::Applied)], at(1))?;
        Ok(())
    })
    .unwrap();
    db.write(|tx| Ok(tx.insert_inbound_events(&[event("c3")])?))
        .unwrap();
    let c3 = queued(db, at(0));
    assert_eq!(c3.len(), 1);
    assert!(c3[0].0 > ids[1], "ids are never reused");
    db.write(|tx| Ok(tx.requeue_failed_inbound_events(None)?))
        .unwrap();
    assert_eq!(
        queued(db, at(0))
            .iter()
            .map(|(_, id, _)| id.as_str())
            .collect::<Vec<_>>(),
        ["c2", "c3"],
        "by id: the requeued event before the newer one"
    );
}

// --- platform: syncs and the outbox ---------------------------------------------------------

fn sync_runs_are_one_running_per_shop_and_topic(db: &impl Database) {
    let shop = shop(db, "a.shop.test");
    assert!(
        db.read(|tx| Ok(tx.running_sync(shop.id, Topic::Customers)?))
            .unwrap()
            .is_none()
    );
    let run = db
        .write(|tx| Ok(tx.insert_sync_run(shop.id, Topic::Customers, at(1))?))
        .unwrap();
    assert_eq!(
        (run.status, run.pages, run.items, run.skipped),
        (SyncStatus::Running, 0, 0, 0)
    );
    assert_eq!(
        (run.started_at, run.heartbeat_at, run.finished_at),
        (at(1), at(1), None)
    );
    let second = db.write(|tx| Ok(tx.insert_sync_run(shop.id, Topic::Customers, at(2))?));
    let Err(DomainError::Storage(error)) = second else {
        panic!("a second running sync must be refused: {second:?}")
    };
    assert!(error.is_unique_violation());
    let orders = db
        .write(|tx| Ok(tx.insert_sync_run(shop.id, Topic::Orders, at(2))?))
        .unwrap();
    assert_ne!(orders.id, run.id);
    assert!(
        db.write(|tx| Ok(tx.record_sync_page(run.id, 10, 1, Some("page-2"), at(3))?))
            .unwrap()
    );
    db.write(|tx| Ok(tx.record_sync_page(run.id, 5, 0, None, at(4))?))
        .unwrap();
    let running = db
        .read(|tx| Ok(tx.running_sync(shop.id, Topic::Customers)?))
        .unwrap()
        .unwrap();
    assert_eq!(
        (running.id, running.pages, running.items, running.skipped),
        (run.id, 2, 15, 1)
    );
    assert_eq!((running.heartbeat_at, running.next_cursor), (at(4), None));
    db.write(|tx| Ok(tx.finish_sync(run.id, SyncStatus::Failed, Some("connector down"), at(5))?))
        .unwrap();
    let finished = db.read(|tx| Ok(tx.sync_run(run.id)?)).unwrap().unwrap();
    assert_eq!(
        (
            finished.status,
            finished.error.as_deref(),
            finished.finished_at
        ),
        (SyncStatus::Failed, Some("connector down"), Some(at(5)))
    );
    assert!(
        !db.write(|tx| Ok(tx.record_sync_page(run.id, 1, 0, None, at(6))?))
            .unwrap(),
        "a finished run counts no more pages"
    );
    assert_eq!(
        db.read(|tx| Ok(tx.sync_run(run.id)?))
            .unwrap()
            .unwrap()
            .pages,
        2
    );
    assert!(
        db.read(|tx| Ok(tx.running_sync(shop.id, Topic::Customers)?))
            .unwrap()
            .is_none()
    );
    let next = db
        .write(|tx| Ok(tx.insert_sync_run(shop.id, Topic::Customers, at(7))?))
        .unwrap();
    assert_ne!(next.id, run.id, "a new run once the last one finished");
}

fn delete_call(platform_id: &str) -> ConnectorCall {
    ConnectorCall::DeleteCustomer {
        platform_id: platform_id.to_string(),
    }
}

fn outbox_calls_are_claimed_retried_and_finished(db: &impl Database) {
    let shop = shop(db, "a.shop.test");
    let other = self::shop(db, "b.shop.test");
    let (one, two, three) = db
        .write(|tx| {
            Ok((
                tx.insert_outbox_call(shop.id, &delete_call("c1"), at(1))?,
                tx.insert_outbox_call(shop.id, &delete_call("c2"), at(2))?,
                tx.insert_outbox_call(other.id, &delete_call("c3"), at(3))?,
            ))
        })
        .unwrap();
    let entries = db.read(|tx| Ok(tx.outbox_entries(shop.id)?)).unwrap();
    assert_eq!(entries.iter().map(|e| e.id).collect::<Vec<_>>(), [one, two]);
    let first = &entries[0];
    assert_eq!(first.call, delete_call("c1"));
    assert_eq!(
        (
            first.status,
            first.attempts,
            first.next_attempt_at,
            first.created_at
        ),
        (OutboxStatus::Pending, 0, at(1), at(1))
    );
    assert!(first.last_error.is_none());
    let claimed = db
        .write(|tx| Ok(tx.claim_outbox_calls(shop.id, at(1), 10, at(31))?))
        .unwrap();
    assert_eq!(
        claimed.iter().map(|e| e.id).collect::<Vec<_>>(),
        [one],
        "c2 is not due yet, c3 is another shop's"
    );
    assert!(
        db.write(|tx| Ok(tx.claim_outbox_calls(shop.id, at(2), 10, at(32))?))
            .unwrap()
            .iter()
            .all(|e| e.id == two),
        "the leased call is held"
    );
    db.write(|tx| Ok(tx.retry_outbox_call(one, 1, at(100), "timeout")?))
        .unwrap();
    let retried = db.read(|tx| Ok(tx.outbox_entries(shop.id)?)).unwrap()[0].clone();
    assert_eq!(
        (retried.status, retried.attempts, retried.next_attempt_at),
        (OutboxStatus::Pending, 1, at(100))
    );
    assert_eq!(retried.last_error.as_deref(), Some("timeout"));
    assert!(
        db.write(|tx| Ok(tx.claim_outbox_calls(shop.id, at(99), 10, at(129))?))
            .unwrap()
            .iter()
            .all(|e| e.id == two),
        "not due before 100 (c2's lease ended at 32)"
    );
    assert_eq!(
        db.write(|tx| Ok(tx.claim_outbox_calls(shop.id, at(100), 10, at(130))?))
            .unwrap()
            .iter()
            .map(|e| e.id)
            .collect::<Vec<_>>(),
        [one]
    );
    assert_eq!(
        db.read(|tx| Ok(tx.next_outbox_attempt(shop.id)?)).unwrap(),
        Some(at(129)),
        "the end of the earliest lease"
    );
    db.write(|tx| {
        tx.finish_outbox_call(one, OutboxStatus::Delivered, 2, None, at(101))?;
        tx.finish_outbox_call(two, OutboxStatus::Failed, 3, Some("refused"), at(101))?;
        Ok(())
    })
    .unwrap();
    let finished = db.read(|tx| Ok(tx.outbox_entries(shop.id)?)).unwrap();
    assert_eq!(
        finished
            .iter()
            .map(|e| (e.status, e.attempts, e.last_error.clone()))
            .collect::<Vec<_>>(),
        [
            (OutboxStatus::Delivered, 2, None),
            (OutboxStatus::Failed, 3, Some("refused".to_string()))
        ]
    );
    assert!(
        db.write(|tx| Ok(tx.claim_outbox_calls(shop.id, at(1000), 10, at(1030))?))
            .unwrap()
            .is_empty(),
        "finished calls are not claimed"
    );
    assert_eq!(
        db.read(|tx| Ok(tx.next_outbox_attempt(shop.id)?)).unwrap(),
        None
    );
    assert_eq!(
        db.read(|tx| Ok(tx.next_outbox_attempt(other.id)?)).unwrap(),
        Some(at(3))
    );
    assert_eq!(
        db.read(|tx| Ok(tx.shops_with_pending_outbox_calls()?))
            .unwrap(),
        [other.id]
    );
    assert_eq!(
        db.write(|tx| Ok(tx.claim_outbox_calls(other.id, at(1000), 10, at(1030))?))
            .unwrap()
            .iter()
            .map(|e| e.id)
            .collect::<Vec<_>>(),
        [three]
    );
}

// --- directory ------------------------------------------------------------------------------

fn the_directory_reads_customers_addresses_and_labels(db: &impl Database) {
    let shop = shop(db, "a.shop.test");
    let other = self::shop(db, "b.shop.test");
    accept(
        db,
        vec![
            customer_event(
                shop.id,
                "c1",
                10,
                json!({"email": "ada@example.test", "first_name": "Ada", "last_name": "", "platform_created_at": at(-100).to_rfc3339(), "addresses": [address(Some("a1"), "Lyon", true)]}),
            ),
            customer_event(
                shop.id,
                "c2",
                10,
                json!({"email": "grace@example.test", "addresses": [address(None, "Paris", false)]}),
            ),
            customer_event(shop.id, "c3", 10, json!({"email": "gone@example.test"})),
            deleted_event(shop.id, EntityKind::Customer, "c3", 20),
        ],
        at(100),
    );
    accept(
        db,
        vec![customer_event(
            other.id,
            "c1",
            10,
            json!({"email": "theirs@example.test", "addresses": [address(Some("a1"), "Nice", true)]}),
        )],
        at(100),
    );
    let c1 = stored_customer(db, shop.id, "c1");
    assert_eq!(c1.platform_id.as_deref(), Some("c1"));
    assert_eq!(
        (c1.email.as_deref(), c1.first_name.as_deref()),
        (Some("ada@example.test"), Some("Ada"))
    );
    assert_eq!(
        (c1.last_name.as_deref(), c1.phone.as_deref()),
        (None, None),
        "an empty or absent text is none"
    );
    assert_eq!(c1.platform_created_at, Some(at(-100)));
    assert_eq!(
        (c1.created_at, c1.updated_at, c1.deleted_at),
        (at(100), at(100), None)
    );
    let by_id = db
        .read(|tx| Ok(tx.directory_customer(shop.id, c1.id)?))
        .unwrap();
    assert_eq!(by_id, Some(c1.clone()));
    assert!(
        db.read(|tx| Ok(tx.directory_customer(other.id, c1.id)?))
            .unwrap()
            .is_none(),
        "another shop's customer"
    );
    let c2 = stored_customer(db, shop.id, "c2");
    let c3 = stored_customer(db, shop.id, "c3");
    assert_eq!(c3.deleted_at, Some(at(100)), "deleted customers are found");
    assert_eq!(c3.email, None, "and keep nothing of their document");
    let theirs = stored_customer(db, other.id, "c1");

    // Every live customer, whatever the order: memory does not sort, filter or page.
    let query = parse_directory_query(&[]).unwrap();
    let page = db
        .read(|tx| Ok(tx.list_directory_customers(shop.id, &query)?))
        .unwrap();
    let mut listed: Vec<i64> = page.customers.iter().map(|c| c.id).collect();
    listed.sort_unstable();
    let mut live = vec![c1.id, c2.id];
    live.sort_unstable();
    assert_eq!((listed, page.total), (live, 2));

    let addresses = db
        .read(|tx| Ok(tx.addresses_of_customers(shop.id, &[c2.id, c1.id, c3.id, theirs.id])?))
        .unwrap();
    assert_eq!(
        addresses
            .iter()
            .map(|a| (
                a.customer_id,
                a.platform_id.clone(),
                a.platform_customer_id.clone()
            ))
            .collect::<Vec<_>>(),
        [
            (c1.id, Some("a1".to_string()), Some("c1".to_string())),
            (c2.id, None, Some("c2".to_string()))
        ],
        "by customer then id, this shop's only"
    );
    assert!(
        db.read(|tx| Ok(tx.addresses_of_customers(shop.id, &[])?))
            .unwrap()
            .is_empty()
    );

    let (vip, late, other_label) = db
        .write(|tx| {
            Ok((
                tx.insert_label(shop.id, c2.id, "vip", at(200))?,
                tx.insert_label(shop.id, c1.id, "late", at(201))?,
                tx.insert_label(shop.id, c1.id, "vip", at(202))?,
            ))
        })
        .unwrap();
    assert_eq!(
        (
            vip.customer_id,
            vip.name.as_str(),
            vip.created_at,
            vip.updated_at,
            vip.deleted_at
        ),
        (c2.id, "vip", at(200), at(200), None)
    );
    let labels = db
        .read(|tx| Ok(tx.labels_of_customers(shop.id, &[c1.id, c2.id])?))
        .unwrap();
    assert_eq!(
        labels.iter().map(|l| l.id).collect::<Vec<_>>(),
        [late.id, other_label.id, vip.id],
        "by customer then id"
    );
    assert!(
        !db.write(|tx| Ok(tx.delete_label(shop.id, c1.id, vip.id, at(300))?))
            .unwrap(),
        "not this customer's label"
    );
    assert!(
        !db.write(|tx| Ok(tx.delete_label(other.id, c2.id, vip.id, at(300))?))
            .unwrap(),
        "not this shop's label"
    );
    assert!(
        db.write(|tx| Ok(tx.delete_label(shop.id, c2.id, vip.id, at(300))?))
            .unwrap()
    );
    assert!(
        !db.write(|tx| Ok(tx.delete_label(shop.id, c2.id, vip.id, at(301))?))
            .unwrap(),
        "deleted already"
    );
    let labels = db
        .read(|tx| Ok(tx.labels_of_customers(shop.id, &[c1.id, c2.id])?))
        .unwrap();
    assert_eq!(
        labels.iter().map(|l| l.id).collect::<Vec<_>>(),
        [late.id, other_label.id]
    );
    assert!(
        db.read(|tx| Ok(tx.labels_of_customers(other.id, &[c1.id])?))
            .unwrap()
            .is_empty(),
        "another shop's labels"
    );
}

// --- webhooks -------------------------------------------------------------------------------

fn new_endpoint(shop_id: i64, kind: WebhookKind, topic: &str, seconds: i64) -> NewWebhookEndpoint {
    NewWebhookEndpoint {
        shop_id,
        kind,
        topic: topic.into(),
        callback_url: "http://127.0.0.1:9/hook".into(),
        secret: (kind == WebhookKind::Subscription).then(|| Secret::new("endpoint-secret")),
        created_at: at(seconds),
    }
}

fn endpoint(db: &impl Database, new: NewWebhookEndpoint) -> WebhookEndpoint {
    db.write(|tx| Ok(tx.insert_webhook_endpoint(&new)?))
        .unwrap()
}

fn webhook_endpoints_live_and_die(db: &impl Database) {
    let shop = shop(db, "a.shop.test");
    let one = endpoint(
        db,
        new_endpoint(shop.id, WebhookKind::Checkout, "order/processed", 1),
    );
    let two = endpoint(
        db,
        new_endpoint(shop.id, WebhookKind::Checkout, "order/processed", 2),
    );
    let failed = endpoint(
        db,
        new_endpoint(shop.id, WebhookKind::Checkout, "order/failed", 3),
    );
    let subscription = endpoint(
        db,
        new_endpoint(shop.id, WebhookKind::Subscription, "order/processed", 4),
    );
    assert_eq!(one.public_id.len(), 32);
    assert_ne!(one.public_id, two.public_id);
    assert_eq!(subscription.secret, Some(Secret::new("endpoint-secret")));
    assert_eq!(
        (
            one.created_at,
            one.updated_at,
            one.disabled_at,
            one.failing_since
        ),
        (at(1), at(1), None, None)
    );
    let found = db
        .read(|tx| Ok(tx.webhook_endpoint(shop.id, &one.public_id)?))
        .unwrap();
    assert_eq!(found, Some(one.clone()));
    assert!(
        db.read(|tx| Ok(tx.webhook_endpoint(shop.id + 1, &one.public_id)?))
            .unwrap()
            .is_none()
    );
    let checkout = db
        .read(|tx| Ok(tx.webhook_endpoints(shop.id, WebhookKind::Checkout)?))
        .unwrap();
    assert_eq!(
        checkout.iter().map(|e| e.id).collect::<Vec<_>>(),
        [one.id, two.id, failed.id],
        "oldest first, of the kind"
    );
    db.write(|tx| {
        let mut moved = two.clone();
        moved.callback_url = "http://127.0.0.1:9/other".to_string();
        tx.update_webhook_endpoint(&moved, at(5))?;
        tx.set_webhook_endpoint_health(one.id, Some(at(6)), None, at(6))?;
        Ok(())
    })
    .unwrap();
    let active = db
        .read(|tx| {
            Ok(tx.active_webhook_endpoints(shop.id, WebhookKind::Checkout, "order/processed")?)
        })
        .unwrap();
    assert_eq!(
        active.iter().map(|e| e.id).collect::<Vec<_>>(),
        [one.id, two.id]
    );
    assert_eq!(
        active[0].failing_since,
        Some(at(6)),
        "failing, still active"
    );
    assert_eq!(
        (active[1].callback_url.as_str(), active[1].updated_at),
        ("http://127.0.0.1:9/other", at(5))
    );
    let mut retopic = subscription.clone();
    retopic.topic = "subscription_paused".to_string();
    retopic.secret = Some(Secret::new("rotated-endpoint-secret"));
    db.write(|tx| Ok(tx.update_webhook_endpoint(&retopic, at(5))?))
        .unwrap();
    let stored = db
        .read(|tx| Ok(tx.webhook_endpoint(shop.id, &subscription.public_id)?))
        .unwrap()
        .unwrap();
    assert_eq!(
        (stored.topic.as_str(), stored.secret, stored.updated_at),
        (
            "subscription_paused",
            Some(Secret::new("rotated-endpoint-secret")),
            at(5)
        )
    );
    db.write(|tx| {
        Ok(tx.set_webhook_endpoint_health(
            one.id,
            Some(at(6)),
            Some((at(7), "failing for days")),
            at(7),
        )?)
    })
    .unwrap();
    let disabled = db
        .read(|tx| Ok(tx.webhook_endpoint(shop.id, &one.public_id)?))
        .unwrap()
        .unwrap();
    assert_eq!(
        (
            disabled.disabled_at,
            disabled.disabled_reason.as_deref(),
            disabled.updated_at
        ),
        (Some(at(7)), Some("failing for days"), at(7))
    );
    assert_eq!(
        db.read(|tx| Ok(tx.active_webhook_endpoints(
            shop.id,
            WebhookKind::Checkout,
            "order/processed"
        )?))
        .unwrap()
        .iter()
        .map(|e| e.id)
        .collect::<Vec<_>>(),
        [two.id]
    );
    assert_eq!(
        db.read(|tx| Ok(tx.count_disabled_webhook_endpoints()?))
            .unwrap(),
        1
    );
    db.write(|tx| Ok(tx.enable_webhook_endpoint(one.id, at(8))?))
        .unwrap();
    let enabled = db
        .read(|tx| Ok(tx.webhook_endpoint(shop.id, &one.public_id)?))
        .unwrap()
        .unwrap();
    assert_eq!(
        (
            enabled.disabled_at,
            enabled.disabled_reason,
            enabled.failing_since,
            enabled.updated_at
        ),
        (None, None, None, at(8)),
        "as new"
    );
    assert_eq!(
        db.read(|tx| Ok(tx.count_disabled_webhook_endpoints()?))
            .unwrap(),
        0
    );
    db.write(|tx| Ok(tx.delete_webhook_endpoint(two.id, at(9))?))
        .unwrap();
    assert!(
        db.read(|tx| Ok(tx.webhook_endpoint(shop.id, &two.public_id)?))
            .unwrap()
            .is_none()
    );
    let mut by_ids = db
        .read(|tx| Ok(tx.webhook_endpoints_by_ids(&[one.id, two.id])?))
        .unwrap();
    by_ids.sort_by_key(|(e, _)| e.id);
    assert_eq!(
        by_ids
            .iter()
            .map(|(e, deleted)| (e.id, *deleted))
            .collect::<Vec<_>>(),
        [(one.id, false), (two.id, true)],
        "deleted ones included"
    );
    assert_eq!(
        db.read(|tx| Ok(tx.webhook_endpoints(shop.id, WebhookKind::Checkout)?))
            .unwrap()
            .len(),
        2
    );
}

fn message(shop_id: i64, endpoint_id: i64, n: u32, seconds: i64) -> NewWebhookMessage {
    NewWebhookMessage {
        message_id: format!("msg_{n}"),
        shop_id,
        endpoint_id,
        topic: "order/processed".into(),
        payload: json!({"n": n}).to_string(),
        created_at: at(seconds),
    }
}

fn webhook_messages_are_claimed_attempted_and_requeued(db: &impl Database) {
    let shop = shop(db, "a.shop.test");
    let hook = endpoint(
        db,
        new_endpoint(shop.id, WebhookKind::Checkout, "order/processed", 0),
    );
    let other = endpoint(
        db,
        new_endpoint(shop.id, WebhookKind::Checkout, "order/processed", 0),
    );
    let ids = db
        .write(|tx| {
            Ok(tx.insert_webhook_messages(&[
                message(shop.id, hook.id, 1, 1),
                message(shop.id, hook.id, 2, 2),
                message(shop.id, other.id, 3, 3),
            ])?)
        })
        .unwrap();
    assert_eq!(ids.len(), 3);
    assert_taken(
        db.write(|tx| Ok(tx.insert_webhook_messages(&[message(shop.id, other.id, 1, 4)])?)),
    );
    let first = db
        .read(|tx| Ok(tx.webhook_message("msg_1")?))
        .unwrap()
        .unwrap();
    assert_eq!(
        (first.id, first.endpoint_id, first.status, first.attempts),
        (ids[0], hook.id, MessageStatus::Pending, 0)
    );
    assert_eq!(
        (first.next_attempt_at, first.created_at, first.delivered_at),
        (at(1), at(1), None)
    );
    assert_eq!(first.payload, json!({"n": 1}).to_string());
    assert_eq!(
        db.read(|tx| Ok(tx.webhook_queue_depth(at(2))?)).unwrap(),
        (2, 1)
    );
    let claimed = db
        .write(|tx| Ok(tx.claim_webhook_messages(at(2), 10, at(32))?))
        .unwrap();
    let mut claimed_ids: Vec<i64> = claimed.iter().map(|m| m.id).collect();
    claimed_ids.sort_unstable();
    assert_eq!(claimed_ids, [ids[0], ids[1]]);
    assert!(
        db.write(|tx| Ok(tx.claim_webhook_messages(at(3), 10, at(33))?))
            .unwrap()
            .iter()
            .all(|m| m.id == ids[2]),
        "leased messages are held"
    );
    let outcome = |status: u16| AttemptOutcome {
        status: Some(status),
        latency: Duration::from_millis(12),
        response: Some("body".into()),
        error: None,
        retry_after: None,
    };
    db.write(|tx| {
        Ok(tx.record_webhook_attempts(
            &[
                DeliveryAttempt {
                    message_row: ids[0],
                    attempted_at: at(4),
                    outcome: outcome(500),
                },
                DeliveryAttempt {
                    message_row: ids[0],
                    attempted_at: at(5),
                    outcome: outcome(200),
                },
                DeliveryAttempt {
                    message_row: ids[1],
                    attempted_at: at(5),
                    outcome: outcome(410),
                },
            ],
            &[
                MessageUpdate {
                    id: ids[0],
                    status: MessageStatus::Delivered,
                    attempts: 2,
                    next_attempt_at: at(5),
                    delivered_at: Some(at(5)),
                },
                MessageUpdate {
                    id: ids[1],
                    status: MessageStatus::Failed,
                    attempts: 1,
                    next_attempt_at: at(5),
                    delivered_at: None,
                },
            ],
        )?)
    })
    .unwrap();
    let attempts = db.read(|tx| Ok(tx.webhook_attempts(ids[0])?)).unwrap();
    assert_eq!(
        attempts
            .iter()
            .map(|a| (a.attempted_at, a.outcome.status))
            .collect::<Vec<_>>(),
        [(at(4), Some(500)), (at(5), Some(200))],
        "oldest first"
    );
    assert_eq!(attempts[1].outcome.latency, Duration::from_millis(12));
    assert_eq!(attempts[1].outcome.response.as_deref(), Some("body"));
    let delivered = db
        .read(|tx| Ok(tx.webhook_message("msg_1")?))
        .unwrap()
        .unwrap();
    assert_eq!(
        (delivered.status, delivered.attempts, delivered.delivered_at),
        (MessageStatus::Delivered, 2, Some(at(5)))
    );
    let newest_first = db
        .read(|tx| Ok(tx.webhook_messages_of_endpoint(hook.id, 10)?))
        .unwrap();
    assert_eq!(
        newest_first.iter().map(|m| m.id).collect::<Vec<_>>(),
        [ids[1], ids[0]]
    );
    assert_eq!(
        db.read(|tx| Ok(tx.webhook_messages_of_endpoint(hook.id, 1)?))
            .unwrap()
            .len(),
        1
    );

    // The failed one, created at 2: requeued when created since 2, not since 3.
    assert_eq!(
        db.write(|tx| Ok(tx.requeue_failed_webhook_messages(hook.id, at(3), at(10))?))
            .unwrap(),
        0
    );
    assert_eq!(
        db.write(|tx| Ok(tx.requeue_failed_webhook_messages(hook.id, at(2), at(10))?))
            .unwrap(),
        1
    );
    let again = db
        .read(|tx| Ok(tx.webhook_message("msg_2")?))
        .unwrap()
        .unwrap();
    assert_eq!(
        (again.status, again.next_attempt_at),
        (MessageStatus::Pending, at(10))
    );
    db.write(|tx| Ok(tx.requeue_webhook_message(ids[0], at(11))?))
        .unwrap();
    let resent = db
        .read(|tx| Ok(tx.webhook_message("msg_1")?))
        .unwrap()
        .unwrap();
    assert_eq!(
        (
            resent.status,
            resent.next_attempt_at,
            resent.message_id.as_str()
        ),
        (MessageStatus::Pending, at(11), "msg_1")
    );
    assert_eq!(
        db.write(|tx| Ok(tx.end_pending_webhook_messages(
            hook.id,
            MessageStatus::Failed,
            at(12)
        )?))
        .unwrap(),
        2
    );
    assert_eq!(
        db.read(|tx| Ok(tx.webhook_queue_depth(at(100))?)).unwrap(),
        (1, 0)
    );
    // Deleting the other endpoint cancels its pending message.
    db.write(|tx| Ok(tx.delete_webhook_endpoint(other.id, at(13))?))
        .unwrap();
    let cancelled = db
        .read(|tx| Ok(tx.webhook_message("msg_3")?))
        .unwrap()
        .unwrap();
    assert_eq!(cancelled.status, MessageStatus::Cancelled);
    assert_eq!(
        db.read(|tx| Ok(tx.webhook_queue_depth(at(100))?)).unwrap(),
        (0, 0)
    );
}

// --- overrides ------------------------------------------------------------------------------

fn overrides_are_kept_per_shop(db: &impl Database) {
    let shop = shop(db, "a.shop.test");
    let other = self::shop(db, "b.shop.test");
    let new = |shop_id: i64, override_type: OverrideType, seconds: i64| NewApiOverride {
        shop_id,
        override_type,
        url: format!("https://hooks.test/{seconds}"),
        shared_secret: Secret::new("override-secret"),
        created_at: at(seconds),
    };
    let (tax, shipping, tax_again) = db
        .write(|tx| {
            Ok((
                tx.insert_override(&new(shop.id, OverrideType::Tax, 1))?,
                tx.insert_override(&new(shop.id, OverrideType::Shipping, 2))?,
                tx.insert_override(&new(shop.id, OverrideType::Tax, 3))?,
            ))
        })
        .unwrap();
    db.write(|tx| Ok(tx.insert_override(&new(other.id, OverrideType::Tax, 4))?))
        .unwrap();
    assert_eq!(tax.public_id.len(), 32);
    assert_eq!((tax.created_at, tax.updated_at), (at(1), at(1)));
    let found = db
        .read(|tx| Ok(tx.override_by_public_id(shop.id, &tax.public_id)?))
        .unwrap();
    assert_eq!(found, Some(tax.clone()));
    assert!(
        db.read(|tx| Ok(tx.override_by_public_id(other.id, &tax.public_id)?))
            .unwrap()
            .is_none()
    );
    assert_eq!(
        db.read(|tx| Ok(tx.overrides_of_shop(shop.id)?))
            .unwrap()
            .iter()
            .map(|o| o.id)
            .collect::<Vec<_>>(),
        [tax.id, shipping.id, tax_again.id],
        "oldest first"
    );
    let newest = db
        .read(|tx| Ok(tx.newest_override(shop.id, OverrideType::Tax)?))
        .unwrap();
    assert_eq!(newest.map(|o| o.id), Some(tax_again.id));
    assert!(
        db.read(|tx| Ok(tx.newest_override(shop.id, OverrideType::Discount)?))
            .unwrap()
            .is_none()
    );
    let mut changed = shipping.clone();
    changed.override_type = OverrideType::Discount;
    changed.url = "https://hooks.test/changed".into();
    changed.shared_secret = Secret::new("rotated");
    changed.updated_at = at(10);
    db.write(|tx| Ok(tx.update_override(&changed)?)).unwrap();
    let updated = db
        .read(|tx| Ok(tx.override_by_public_id(shop.id, &shipping.public_id)?))
        .unwrap();
    assert_eq!(updated, Some(changed));
    db.write(|tx| Ok(tx.delete_override(tax.id)?)).unwrap();
    assert_eq!(
        db.read(|tx| Ok(tx.overrides_of_shop(shop.id)?))
            .unwrap()
            .iter()
            .map(|o| o.id)
            .collect::<Vec<_>>(),
        [shipping.id, tax_again.id]
    );
}

// --- subscriptions: customers and addresses made here -----------------------------------------

fn fields(
    email: Option<&str>,
    first_name: Option<&str>,
    last_name: Option<&str>,
) -> CustomerFields {
    CustomerFields {
        email: email.map(str::to_string),
        first_name: first_name.map(str::to_string),
        last_name: last_name.map(str::to_string),
        phone: None,
        notes: None,
    }
}

fn new_customer(db: &impl Database, shop_id: i64, fields: &CustomerFields, seconds: i64) -> i64 {
    db.write(|tx| Ok(tx.insert_customer(shop_id, fields, at(seconds))?))
        .unwrap()
}

fn postal(city: &str) -> CustomerAddress {
    CustomerAddress {
        first_name: Some("Ada".into()),
        street_1: Some("1 Main St".into()),
        city: Some(city.into()),
        postal_code: Some("69001".into()),
        country_code: Some("FR".into()),
        ..CustomerAddress::default()
    }
}

fn new_address(
    db: &impl Database,
    shop_id: i64,
    customer_id: i64,
    city: &str,
    is_default: bool,
    seconds: i64,
) -> i64 {
    db.write(|tx| {
        Ok(tx.insert_address(shop_id, customer_id, &postal(city), is_default, at(seconds))?)
    })
    .unwrap()
}

fn addresses_by_ids(db: &impl Database, shop_id: i64, ids: &[i64]) -> Vec<StoredAddress> {
    db.read(|tx| Ok(tx.addresses_by_ids(shop_id, ids)?))
        .unwrap()
}

/// The ids of the customer's live addresses that are the default, from the directory.
fn defaults(db: &impl Database, shop_id: i64, customer_id: i64) -> Vec<i64> {
    stored_addresses(db, shop_id, customer_id)
        .iter()
        .filter(|a| a.is_default)
        .map(|a| a.id)
        .collect()
}

fn customers_are_read_by_ids_of_their_shop_only(db: &impl Database) {
    let shop = shop(db, "a.shop.test");
    let other = self::shop(db, "b.shop.test");
    let second = new_customer(db, shop.id, &fields(Some("b@example.test"), None, None), 2);
    let first = new_customer(db, shop.id, &fields(Some("a@example.test"), None, None), 1);
    let theirs = new_customer(db, other.id, &fields(Some("c@example.test"), None, None), 3);
    let found = db
        .read(|tx| {
            Ok(tx.directory_customers_by_ids(shop.id, &[first, theirs, second, second + 1000])?)
        })
        .unwrap();
    let mut expected = vec![first, second];
    expected.sort_unstable();
    let ids: Vec<i64> = found.iter().map(|customer| customer.id).collect();
    assert_eq!(
        ids, expected,
        "by id, another shop's and unknown ids left out"
    );
    assert!(
        db.read(|tx| Ok(tx.directory_customers_by_ids(shop.id, &[])?))
            .unwrap()
            .is_empty()
    );
}

fn a_customer_made_here_has_no_platform_id_until_the_connector_gives_one(db: &impl Database) {
    let shop = shop(db, "a.shop.test");
    let made = CustomerFields {
        phone: Some("".into()),
        notes: Some("leave at the door".into()),
        ..fields(Some("Ada@Example.test"), Some("Ada"), Some(""))
    };
    let id = new_customer(db, shop.id, &made, 10);
    let address = new_address(db, shop.id, id, "Lyon", true, 11);

    let customer = db
        .read(|tx| Ok(tx.directory_customer(shop.id, id)?))
        .unwrap()
        .expect("the customer is in the directory");
    assert_eq!(customer.platform_id, None);
    assert_eq!(
        (customer.email.as_deref(), customer.first_name.as_deref()),
        (Some("Ada@Example.test"), Some("Ada"))
    );
    assert_eq!(
        (customer.last_name.as_deref(), customer.phone.as_deref()),
        (None, None),
        "an empty text is none"
    );
    assert_eq!(
        (
            customer.created_at,
            customer.updated_at,
            customer.deleted_at
        ),
        (at(10), at(10), None)
    );
    let page = db
        .read(|tx| Ok(tx.list_directory_customers(shop.id, &parse_directory_query(&[]).unwrap())?))
        .unwrap();
    assert_eq!(
        (page.customers, page.total),
        (vec![customer.clone()], 1),
        "listed with the others"
    );
    let rows = stored_addresses(db, shop.id, id);
    assert_eq!(
        rows.iter()
            .map(|a| (a.id, a.platform_id.clone(), a.platform_customer_id.clone()))
            .collect::<Vec<_>>(),
        [(address, None, None)]
    );
    let (platform_id, address_platform_id, notes) = db
        .read(|tx| {
            Ok((
                tx.customer_platform_id(shop.id, id)?,
                tx.address_platform_id(shop.id, address)?,
                tx.customer_notes(shop.id, &[id])?,
            ))
        })
        .unwrap();
    assert_eq!((platform_id, address_platform_id), (None, None));
    assert_eq!(notes, [(id, "leave at the door".to_string())]);

    // The connector answers its platform id: recorded once, and only for this shop.
    let other = self::shop(db, "b.shop.test");
    let (elsewhere, first, again, unknown) = db
        .write(|tx| {
            Ok((
                tx.set_customer_platform_id(other.id, id, "c1", at(20))?,
                tx.set_customer_platform_id(shop.id, id, "c1", at(20))?,
                tx.set_customer_platform_id(shop.id, id, "c2", at(21))?,
                tx.set_customer_platform_id(shop.id, id + 1000, "c3", at(21))?,
            ))
        })
        .unwrap();
    assert_eq!(
        (elsewhere, first, again, unknown),
        (false, true, false, false)
    );
    assert_eq!(
        db.read(|tx| Ok(tx.customer_platform_id(shop.id, id)?))
            .unwrap()
            .as_deref(),
        Some("c1")
    );
    let known = stored_customer(db, shop.id, "c1");
    assert_eq!((known.id, known.updated_at), (id, at(20)));
    assert_eq!(
        stored_addresses(db, shop.id, id)[0]
            .platform_customer_id
            .as_deref(),
        Some("c1"),
        "its addresses name it"
    );

    // The platform's event of that customer updates the same record.
    accept(
        db,
        vec![customer_event(
            shop.id,
            "c1",
            30,
            json!({"email": "ada@platform.test", "first_name": "Ada", "last_name": "Lovelace"}),
        )],
        at(300),
    );
    let page = db
        .read(|tx| Ok(tx.list_directory_customers(shop.id, &parse_directory_query(&[]).unwrap())?))
        .unwrap();
    assert_eq!(page.total, 1, "one customer, not two: {:?}", page.customers);
    let updated = &page.customers[0];
    assert_eq!(updated.id, id);
    assert_eq!(updated.platform_id.as_deref(), Some("c1"));
    assert_eq!(
        (updated.email.as_deref(), updated.last_name.as_deref()),
        (Some("ada@platform.test"), Some("Lovelace"))
    );
    assert_eq!((updated.created_at, updated.updated_at), (at(10), at(300)));
    let record = db
        .read(|tx| Ok(tx.platform_entity(shop.id, EntityKind::Customer, "c1")?))
        .unwrap()
        .unwrap();
    assert_eq!((record.id, record.platform_updated_at), (id, Some(at(30))));
    assert_eq!(
        db.read(|tx| Ok(tx.customer_notes(shop.id, &[id])?))
            .unwrap(),
        [(id, "leave at the door".to_string())],
        "the platform's events leave the notes alone"
    );
    assert_eq!(
        stored_addresses(db, shop.id, id)
            .iter()
            .map(|a| a.id)
            .collect::<Vec<_>>(),
        [address],
        "an event without addresses leaves them alone"
    );
}

fn a_platform_id_another_customer_has_is_refused(db: &impl Database) {
    let shop = shop(db, "a.shop.test");
    accept(
        db,
        vec![customer_event(
            shop.id,
            "c1",
            10,
            json!({"email": "ada@example.test"}),
        )],
        at(100),
    );
    let id = new_customer(
        db,
        shop.id,
        &fields(Some("grace@example.test"), None, None),
        10,
    );
    assert_taken(db.write(|tx| Ok(tx.set_customer_platform_id(shop.id, id, "c1", at(20))?)));
    assert_eq!(
        db.read(|tx| Ok(tx.customer_platform_id(shop.id, id)?))
            .unwrap(),
        None
    );
}

fn customers_made_here_are_updated_and_found_by_email_without_case(db: &impl Database) {
    let shop = shop(db, "a.shop.test");
    let other = self::shop(db, "b.shop.test");
    accept(
        db,
        vec![
            customer_event(shop.id, "c1", 10, json!({"email": "Bob@Example.test"})),
            customer_event(shop.id, "c2", 10, json!({"email": "gone@example.test"})),
            deleted_event(shop.id, EntityKind::Customer, "c2", 20),
        ],
        at(100),
    );
    let bob = stored_customer(db, shop.id, "c1").id;
    let first = new_customer(
        db,
        shop.id,
        &fields(Some("Ada@Example.test"), None, None),
        110,
    );
    let second = new_customer(
        db,
        shop.id,
        &fields(Some("ADA@example.TEST"), None, None),
        111,
    );
    let zoe = new_customer(
        db,
        other.id,
        &fields(Some("zoe@example.test"), None, None),
        112,
    );
    let by_email = |shop_id: i64, email: &str| {
        db.read(|tx| Ok(tx.customer_id_by_email(shop_id, email)?))
            .unwrap()
    };
    assert_eq!(
        by_email(shop.id, "ada@example.test"),
        Some(first),
        "the oldest"
    );
    assert_eq!(by_email(shop.id, "bob@EXAMPLE.test"), Some(bob));
    assert_eq!(
        by_email(shop.id, "gone@example.test"),
        None,
        "a deleted customer keeps no email"
    );
    assert_eq!(
        by_email(shop.id, "zoe@example.test"),
        None,
        "this shop's only"
    );
    assert_eq!(by_email(other.id, "Zoe@Example.Test"), Some(zoe));
    assert_eq!(by_email(shop.id, "ada@example"), None, "the whole address");
    new_customer(db, shop.id, &fields(None, Some("Noemail"), None), 113);
    assert_eq!(by_email(shop.id, ""), None, "no email is no one's");

    // Every field written; an absent one cleared.
    let changed = CustomerFields {
        email: Some("ada@new.test".into()),
        first_name: Some("Ada".into()),
        last_name: None,
        phone: Some("+33 1 23 45 67 89".into()),
        notes: Some("fragile".into()),
    };
    let (written, unknown, elsewhere) = db
        .write(|tx| {
            Ok((
                tx.update_customer(shop.id, first, &changed, at(200))?,
                tx.update_customer(shop.id, first + 1000, &changed, at(200))?,
                tx.update_customer(other.id, first, &changed, at(200))?,
            ))
        })
        .unwrap();
    assert_eq!((written, unknown, elsewhere), (true, false, false));
    let customer = db
        .read(|tx| Ok(tx.directory_customer(shop.id, first)?))
        .unwrap()
        .unwrap();
    assert_eq!(
        (
            customer.email.as_deref(),
            customer.first_name.as_deref(),
            customer.last_name.as_deref(),
            customer.phone.as_deref()
        ),
        (
            Some("ada@new.test"),
            Some("Ada"),
            None,
            Some("+33 1 23 45 67 89")
        )
    );
    assert_eq!(
        (customer.created_at, customer.updated_at),
        (at(110), at(200))
    );
    assert_eq!(by_email(shop.id, "ADA@example.test"), Some(second));
    assert_eq!(
        db.read(|tx| Ok(tx.customer_notes(shop.id, &[second, first, bob])?))
            .unwrap(),
        [(first, "fragile".to_string())],
        "customers without notes are left out"
    );
    // A deleted customer is not updated.
    let gone = stored_customer(db, shop.id, "c2").id;
    assert!(
        !db.write(|tx| Ok(tx.update_customer(shop.id, gone, &changed, at(300))?))
            .unwrap()
    );
}

fn addresses_made_here_keep_one_default(db: &impl Database) {
    let shop = shop(db, "a.shop.test");
    let other = self::shop(db, "b.shop.test");
    let customer = new_customer(
        db,
        shop.id,
        &fields(Some("ada@example.test"), None, None),
        10,
    );
    let neighbour = new_customer(
        db,
        shop.id,
        &fields(Some("bob@example.test"), None, None),
        10,
    );
    let theirs = new_address(db, shop.id, neighbour, "Nice", true, 11);
    let lyon = new_address(db, shop.id, customer, "Lyon", true, 20);
    let paris = new_address(db, shop.id, customer, "Paris", false, 21);
    assert_eq!(defaults(db, shop.id, customer), [lyon]);
    let lille = new_address(db, shop.id, customer, "Lille", true, 22);
    assert_eq!(
        defaults(db, shop.id, customer),
        [lille],
        "the new default takes over"
    );
    assert_eq!(
        defaults(db, shop.id, neighbour),
        [theirs],
        "another customer's default stays"
    );

    let read = addresses_by_ids(db, shop.id, &[paris, lille, lyon]);
    assert_eq!(
        read.iter().map(|a| a.id).collect::<Vec<_>>(),
        [lyon, paris, lille],
        "by id"
    );
    let first = &read[1];
    assert_eq!(
        (first.shop_id, first.customer_id, first.is_default),
        (shop.id, customer, false)
    );
    assert_eq!(
        (
            first.platform_id.clone(),
            first.customer_platform_id.clone()
        ),
        (None, None)
    );
    assert_eq!(first.address, postal("Paris"));
    assert_eq!(
        (first.created_at, first.updated_at, first.deleted_at),
        (at(21), at(21), None)
    );
    assert!(
        addresses_by_ids(db, other.id, &[lyon]).is_empty(),
        "another shop's"
    );

    // Rewritten in place, made the default.
    let update = |shop_id: i64, customer_id: i64, id: i64, city: &str, default: bool, seconds| {
        db.write(|tx| {
            Ok(tx.update_address(
                shop_id,
                customer_id,
                id,
                &postal(city),
                default,
                at(seconds),
            )?)
        })
        .unwrap()
    };
    assert!(update(shop.id, customer, paris, "Marseille", true, 30));
    assert_eq!(defaults(db, shop.id, customer), [paris]);
    let marseille = &addresses_by_ids(db, shop.id, &[paris])[0];
    assert_eq!(marseille.address, postal("Marseille"));
    assert_eq!(
        (
            marseille.is_default,
            marseille.created_at,
            marseille.updated_at
        ),
        (true, at(21), at(30))
    );
    assert!(update(shop.id, customer, lyon, "Lyon", false, 31));
    assert_eq!(
        defaults(db, shop.id, customer),
        [paris],
        "not the default: the others keep theirs"
    );
    assert!(
        !update(shop.id, neighbour, paris, "Nice", false, 32),
        "another customer's"
    );
    assert!(
        !update(other.id, customer, paris, "Nice", false, 32),
        "another shop's"
    );
    assert!(!update(shop.id, customer, paris + 1000, "Nice", false, 32));

    // Deleted: gone from the directory, still read by id; the others' flags untouched.
    let delete = |customer_id: i64, id: i64, seconds| {
        db.write(|tx| Ok(tx.delete_address(shop.id, customer_id, id, at(seconds))?))
            .unwrap()
    };
    assert!(!delete(neighbour, paris, 40), "another customer's");
    assert!(delete(customer, paris, 40));
    assert!(!delete(customer, paris, 41), "already deleted");
    assert!(
        !update(shop.id, customer, paris, "Nice", false, 42),
        "a deleted address"
    );
    assert_eq!(
        stored_addresses(db, shop.id, customer)
            .iter()
            .map(|a| (a.id, a.is_default))
            .collect::<Vec<_>>(),
        [(lyon, false), (lille, false)]
    );
    let deleted = &addresses_by_ids(db, shop.id, &[paris])[0];
    assert_eq!(
        (
            deleted.deleted_at,
            deleted.updated_at,
            deleted.address.city.as_deref()
        ),
        (Some(at(40)), at(40), Some("Marseille"))
    );
    // A new default does not revive the deleted one's flag either way.
    assert!(update(shop.id, customer, lille, "Lille", true, 50));
    assert_eq!(defaults(db, shop.id, customer), [lille]);
}

fn an_address_given_its_platform_id_is_the_one_the_platforms_events_update(db: &impl Database) {
    let shop = shop(db, "a.shop.test");
    let customer = new_customer(
        db,
        shop.id,
        &fields(Some("ada@example.test"), None, None),
        10,
    );
    let lyon = new_address(db, shop.id, customer, "Lyon", true, 11);
    let paris = new_address(db, shop.id, customer, "Paris", false, 12);
    let (elsewhere, first, again, unknown) = db
        .write(|tx| {
            Ok((
                tx.set_address_platform_id(shop.id + 1000, lyon, "a1", at(20))?,
                tx.set_address_platform_id(shop.id, lyon, "a1", at(20))?,
                tx.set_address_platform_id(shop.id, lyon, "a9", at(21))?,
                tx.set_address_platform_id(shop.id, paris + 1000, "a2", at(21))?,
            ))
        })
        .unwrap();
    assert_eq!(
        (elsewhere, first, again, unknown),
        (false, true, false, false)
    );
    let (lyon_id, paris_id) = db
        .read(|tx| {
            Ok((
                tx.address_platform_id(shop.id, lyon)?,
                tx.address_platform_id(shop.id, paris)?,
            ))
        })
        .unwrap();
    assert_eq!((lyon_id.as_deref(), paris_id), (Some("a1"), None));
    let read = &addresses_by_ids(db, shop.id, &[lyon])[0];
    assert_eq!(
        (read.platform_id.as_deref(), read.updated_at),
        (Some("a1"), at(20))
    );
    assert!(
        db.write(|tx| Ok(tx.set_customer_platform_id(shop.id, customer, "c1", at(22))?))
            .unwrap()
    );
    assert_eq!(
        addresses_by_ids(db, shop.id, &[lyon])[0]
            .customer_platform_id
            .as_deref(),
        Some("c1")
    );

    // The platform's next event of the customer: a1 is the row made here, rewritten in place;
    // the address it does not have (Paris, never given a platform id) is gone.
    accept(
        db,
        vec![customer_event(
            shop.id,
            "c1",
            30,
            json!({"email": "ada@example.test", "addresses": [address(Some("a1"), "Grenoble", true)]}),
        )],
        at(300),
    );
    let rows = stored_addresses(db, shop.id, customer);
    assert_eq!(
        rows.iter()
            .map(|a| (a.id, a.platform_id.clone(), a.city.clone(), a.is_default))
            .collect::<Vec<_>>(),
        [(
            lyon,
            Some("a1".to_string()),
            Some("Grenoble".to_string()),
            true
        )],
        "one row for a1: the same"
    );
    assert_eq!((rows[0].created_at, rows[0].updated_at), (at(11), at(300)));
    assert_eq!(
        addresses_by_ids(db, shop.id, &[paris])[0].deleted_at,
        Some(at(300))
    );
}

fn an_address_key_the_customer_has_is_refused(db: &impl Database) {
    let shop = shop(db, "a.shop.test");
    accept(
        db,
        vec![customer_event(
            shop.id,
            "c1",
            10,
            json!({"addresses": [address(Some("a1"), "Lyon", true)]}),
        )],
        at(100),
    );
    let customer = stored_customer(db, shop.id, "c1").id;
    let made = new_address(db, shop.id, customer, "Paris", false, 110);
    assert_eq!(stored_addresses(db, shop.id, customer).len(), 2);
    assert_taken(db.write(|tx| Ok(tx.set_address_platform_id(shop.id, made, "a1", at(120))?)));
    assert_eq!(
        db.read(|tx| Ok(tx.address_platform_id(shop.id, made)?))
            .unwrap(),
        None
    );
}

// --- subscriptions ------------------------------------------------------------------------------

fn currency(code: &str) -> CurrencyCode {
    CurrencyCode::parse(code).unwrap()
}

/// A subscription's state with nothing optional set.
fn plain_state(customer_id: i64, address_id: i64, status: SubscriptionStatus) -> SubscriptionState {
    SubscriptionState {
        customer_id,
        billing_address_id: address_id,
        shipping_address_id: address_id,
        orders_processed: 0,
        current_retries: 0,
        external_id: None,
        idempotency_key: None,
        idempotency_fingerprint: None,
        next_order_datetime: None,
        next_payment_datetime: None,
        next_processing_datetime: None,
        last_payment_datetime: None,
        last_order_datetime: None,
        last_processed_datetime: None,
        status_changed_at: None,
        placed_at: None,
        updated_at: at(0),
        subscription_status: status,
        payment_method_token: None,
        payment_gateway_public_id: None,
        payment_gateway_customer_id: None,
        payment_method_expires_at: None,
        payment_rrule: "RRULE:FREQ=WEEKLY".into(),
        payment_rrule_text: "every week".into(),
        order_rrule: "RRULE:FREQ=WEEKLY".into(),
        order_rrule_text: "every week".into(),
        charged_currency: currency("USD"),
        base_currency: currency("USD"),
        base_to_charged_exchange_rate: 1.0,
        percent_discount: 0.0,
        discount_code: None,
        shipping_lines: Vec::new(),
        last_failure_code: None,
        last_failure_reason: None,
        last_failure_details: None,
        skipped_dates: Vec::new(),
        note: None,
        order_note: None,
    }
}

/// A subscription's state with every field set.
fn full_state(customer_id: i64, billing: i64, shipping: i64) -> SubscriptionState {
    SubscriptionState {
        customer_id,
        billing_address_id: billing,
        shipping_address_id: shipping,
        orders_processed: 3,
        current_retries: 1,
        external_id: Some("ext-1".into()),
        idempotency_key: Some("key-1".into()),
        idempotency_fingerprint: Some("f1ngerpr1nt".into()),
        next_order_datetime: Some(at(1000)),
        next_payment_datetime: Some(at(1001)),
        next_processing_datetime: Some(at(999)),
        last_payment_datetime: Some(at(500)),
        last_order_datetime: Some(at(501)),
        last_processed_datetime: Some(at(502)),
        status_changed_at: Some(at(100)),
        placed_at: Some(at(101)),
        updated_at: at(102),
        subscription_status: SubscriptionStatus::Paused,
        payment_method_token: Some("tok_1".into()),
        payment_gateway_public_id: Some("gw_1".into()),
        payment_gateway_customer_id: Some("gwc_1".into()),
        payment_method_expires_at: PaymentExpiry::parse("2027-03"),
        payment_rrule: "DTSTART:20240304T090000Z\nRRULE:FREQ=WEEKLY;INTERVAL=2".into(),
        payment_rrule_text: "every 2 weeks on Monday".into(),
        order_rrule: "DTSTART:20240304T090000Z\nRRULE:FREQ=MONTHLY".into(),
        order_rrule_text: "every month".into(),
        charged_currency: currency("CAD"),
        base_currency: currency("USD"),
        base_to_charged_exchange_rate: 1.35,
        percent_discount: 12.5,
        discount_code: Some("WELCOME".into()),
        shipping_lines: vec![ShippingLine {
            id: 1,
            subscription_id: 0,
            name: "Standard".into(),
            code: Some("std".into()),
            tag: Some("ground".into()),
            price: Cents(500),
            value: Cents(500),
            value_charged: Cents(675),
            created_at: at(100),
            updated_at: at(100),
        }],
        last_failure_code: Some("card_declined".into()),
        last_failure_reason: Some("declined".into()),
        last_failure_details: Some(FailureDetails {
            message: "The card was declined".into(),
        }),
        skipped_dates: vec![at(2000), at(4000)],
        note: Some("a note".into()),
        order_note: Some("an order note".into()),
    }
}

/// A line item as a use case hands it over: no ids yet.
fn line_item(product: &str, quantity: i64, seconds: i64) -> SubscriptionLineItem {
    SubscriptionLineItem {
        id: 0,
        subscription_id: 0,
        subscription_group_id: Some(4),
        subscription_group_billing_rules_id: None,
        platform_id: None,
        platform_product_id: product.into(),
        platform_variant_id: format!("{product}-v"),
        title: Some("Coffee".into()),
        product_name: Some("Coffee".into()),
        variant_name: Some("Whole beans".into()),
        sku: Some("COF-1".into()),
        image: None,
        quantity,
        price: Cents(1250),
        price_charged: Cents(1688),
        discounted_price: Cents(1150),
        discounted_price_charged: Cents(1553),
        full_price: Cents(1250 * quantity),
        full_price_charged: Cents(1688 * quantity),
        requires_shipping: true,
        taxable: false,
        grams: Some(500),
        weight: Some(0.5),
        weight_unit: Some("kg".into()),
        discounts: vec![LineItemDiscount {
            id: 5,
            subscription_line_item_id: 0,
            shop_id: 0,
            full_price: Cents(1250),
            fixed_value: Cents(100),
            fixed_value_charged: Cents(135),
            discount_type: "fixed".into(),
            percentage_value: 0.0,
            description: Some("loyalty".into()),
            created_at: at(seconds),
            updated_at: at(seconds),
            deleted_at: None,
        }],
        prepaid_metadata: Some(PrepaidMetadata {
            id: 6,
            line_item_id: 0,
            prepaid_duration: 3,
            current_recurrence_count: 1,
            prepaid_continue: Some("auto_renew".into()),
        }),
        line_item_attributes: vec![LineItemAttribute {
            name: "grind".into(),
            value: "fine".into(),
            created_at: at(seconds),
            updated_at: at(seconds),
            subscription_id: 0,
            line_item_id: 0,
        }],
        created_at: at(seconds),
        updated_at: at(seconds),
    }
}

/// A customer made here with one address: (customer, address).
fn subscriber(db: &impl Database, shop_id: i64, fields: &CustomerFields) -> (i64, i64) {
    let customer = new_customer(db, shop_id, fields, 1);
    (
        customer,
        new_address(db, shop_id, customer, "Lyon", true, 1),
    )
}

fn insert_subscription(
    db: &impl Database,
    shop_id: i64,
    state: &SubscriptionState,
    seconds: i64,
) -> i64 {
    db.write(|tx| {
        Ok(tx.insert_subscription(shop_id, state, &[line_item("p1", 1, seconds)], at(seconds))?)
    })
    .unwrap()
}

fn read_subscription(db: &impl Database, shop_id: i64, id: i64) -> StoredSubscription {
    db.read(|tx| Ok(tx.subscription(shop_id, id)?))
        .unwrap()
        .expect("the subscription is stored")
}

fn a_subscription_reads_back_as_it_was_inserted(db: &impl Database) {
    let shop = shop(db, "a.shop.test");
    let other = self::shop(db, "b.shop.test");
    let (customer, billing) =
        subscriber(db, shop.id, &fields(Some("ada@example.test"), None, None));
    let shipping = new_address(db, shop.id, customer, "Paris", false, 2);
    let state = full_state(customer, billing, shipping);
    let items = [line_item("p1", 2, 50), line_item("p2", 1, 50)];
    let id = db
        .write(|tx| Ok(tx.insert_subscription(shop.id, &state, &items, at(50))?))
        .unwrap();
    let stored = read_subscription(db, shop.id, id);
    assert_eq!(
        (stored.id, stored.shop_id, stored.created_at),
        (id, shop.id, at(50))
    );
    assert_eq!(stored.state, state, "every field as written");
    assert_eq!(stored.latest_status_log, None);
    let ids: Vec<i64> = stored.line_items.iter().map(|item| item.id).collect();
    assert_eq!(ids.len(), 2);
    assert!(
        ids[0] > 0 && ids[0] < ids[1],
        "the store gives ids, in order: {ids:?}"
    );
    let expected: Vec<SubscriptionLineItem> = items
        .iter()
        .zip(&ids)
        .map(|(item, &item_id)| {
            let mut item = item.clone();
            item.id = item_id;
            item.subscription_id = id;
            item.discounts[0].subscription_line_item_id = item_id;
            item.prepaid_metadata.as_mut().unwrap().line_item_id = item_id;
            item.line_item_attributes[0].line_item_id = item_id;
            item.line_item_attributes[0].subscription_id = id;
            item
        })
        .collect();
    assert_eq!(stored.line_items, expected, "line items refer to their ids");

    let second = insert_subscription(
        db,
        shop.id,
        &plain_state(customer, billing, SubscriptionStatus::Active),
        60,
    );
    assert!(second > id, "ids ascend");
    let plain = read_subscription(db, shop.id, second);
    assert_eq!(
        plain.state,
        plain_state(customer, billing, SubscriptionStatus::Active)
    );
    assert!(
        plain.line_items[0].id > ids[1],
        "line item ids are the database's, not the subscription's"
    );
    let (elsewhere, unknown) = db
        .read(|tx| {
            Ok((
                tx.subscription(other.id, id)?,
                tx.subscription(shop.id, second + 1000)?,
            ))
        })
        .unwrap();
    assert!(elsewhere.is_none() && unknown.is_none());
}

fn an_idempotency_key_is_taken_once_per_shop(db: &impl Database) {
    let shop = shop(db, "a.shop.test");
    let other = self::shop(db, "b.shop.test");
    let (customer, address) = subscriber(db, shop.id, &fields(None, None, None));
    let (their_customer, their_address) = subscriber(db, other.id, &fields(None, None, None));
    let keyed = |customer, address, key: Option<&str>, fingerprint: &str| SubscriptionState {
        idempotency_key: key.map(str::to_string),
        idempotency_fingerprint: Some(fingerprint.to_string()),
        ..plain_state(customer, address, SubscriptionStatus::Active)
    };
    let first = insert_subscription(db, shop.id, &keyed(customer, address, Some("k1"), "f1"), 10);
    let theirs = insert_subscription(
        db,
        other.id,
        &keyed(their_customer, their_address, Some("k1"), "f2"),
        11,
    );
    // Without a key, as many as wanted.
    insert_subscription(db, shop.id, &keyed(customer, address, None, "f3"), 12);
    insert_subscription(db, shop.id, &keyed(customer, address, None, "f4"), 13);
    let by_key = |shop_id: i64, key: &str| {
        db.read(|tx| Ok(tx.subscription_by_idempotency_key(shop_id, key)?))
            .unwrap()
    };
    assert_eq!(by_key(shop.id, "k1"), Some((first, Some("f1".to_string()))));
    assert_eq!(
        by_key(other.id, "k1"),
        Some((theirs, Some("f2".to_string())))
    );
    assert_eq!(by_key(shop.id, "k2"), None);
    assert_taken(db.write(|tx| {
        Ok(tx.insert_subscription(
            shop.id,
            &keyed(customer, address, Some("k1"), "f5"),
            &[line_item("p1", 1, 20)],
            at(20),
        )?)
    }));
    assert_eq!(
        db.read(|tx| Ok(tx.count_subscriptions(shop.id, &ListQuery::default())?))
            .unwrap(),
        3,
        "the refused one left nothing behind"
    );
    assert_eq!(by_key(shop.id, "k1"), Some((first, Some("f1".to_string()))));
}

fn a_saved_subscription_reads_back_with_its_new_state(db: &impl Database) {
    let shop = shop(db, "a.shop.test");
    let other = self::shop(db, "b.shop.test");
    let (customer, address) = subscriber(db, shop.id, &fields(None, None, None));
    let second_address = new_address(db, shop.id, customer, "Paris", false, 2);
    let id = insert_subscription(
        db,
        shop.id,
        &plain_state(customer, address, SubscriptionStatus::Active),
        10,
    );
    let before = read_subscription(db, shop.id, id);
    let changed = full_state(customer, second_address, address);
    let (saved, elsewhere, unknown) = db
        .write(|tx| {
            Ok((
                tx.save_subscription(shop.id, id, &changed)?,
                tx.save_subscription(
                    other.id,
                    id,
                    &plain_state(customer, address, SubscriptionStatus::Inactive),
                )?,
                tx.save_subscription(shop.id, id + 1000, &changed)?,
            ))
        })
        .unwrap();
    assert_eq!((saved, elsewhere, unknown), (true, false, false));
    let after = read_subscription(db, shop.id, id);
    assert_eq!(after.state, changed);
    assert_eq!(
        (after.created_at, &after.line_items),
        (before.created_at, &before.line_items),
        "the creation time and line items stay"
    );
    // Saved back to nothing optional: every field cleared.
    let cleared = plain_state(customer, address, SubscriptionStatus::Inactive);
    assert!(
        db.write(|tx| Ok(tx.save_subscription(shop.id, id, &cleared)?))
            .unwrap()
    );
    assert_eq!(read_subscription(db, shop.id, id).state, cleared);
}

fn rule(id: i64, number: i64, interval: IntervalType) -> BillingRule {
    BillingRule {
        id,
        subscription_group_id: 0,
        interval_number: number,
        interval_type: interval,
        interval_name: format!("Every {number} {}", interval.as_str()),
        billing_rule: format!("FREQ=X;INTERVAL={number}"),
    }
}

fn stored_group(name: &str, rules: Vec<BillingRule>) -> StoredGroup {
    StoredGroup {
        id: 0,
        name: name.into(),
        percent_discount: 12.5,
        products: vec![
            GroupProduct {
                platform_product_id: "p1".into(),
                platform_variant_id: None,
            },
            GroupProduct {
                platform_product_id: "p2".into(),
                platform_variant_id: Some("v9".into()),
            },
        ],
        billing_rules: rules,
        created_at: at(1),
        updated_at: at(1),
    }
}

fn subscription_groups_keep_their_rules_in_order_and_by_shop(db: &impl Database) {
    let shop_a = shop(db, "a.shop.test");
    let shop_b = shop(db, "b.shop.test");
    let save = |shop_id: i64, group: &StoredGroup| {
        db.write(|tx| Ok(tx.save_subscription_group(shop_id, group)?))
            .unwrap()
    };
    let first = save(
        shop_a.id,
        &stored_group(
            "Coffee",
            vec![
                rule(0, 2, IntervalType::Week),
                rule(0, 1, IntervalType::Month),
            ],
        ),
    );
    assert!(first.id > 0);
    assert_eq!(first.products, stored_group("", vec![]).products);
    assert_eq!(first.percent_discount, 12.5);
    let ids: Vec<i64> = first.billing_rules.iter().map(|rule| rule.id).collect();
    assert!(ids[0] > 0 && ids[1] > ids[0], "{ids:?}");
    assert!(
        first
            .billing_rules
            .iter()
            .all(|rule| rule.subscription_group_id == first.id)
    );
    assert_eq!(first.billing_rules[1].interval_type, IntervalType::Month);
    save(
        shop_a.id,
        &stored_group("Tea", vec![rule(0, 1, IntervalType::Day)]),
    );
    save(
        shop_b.id,
        &stored_group("Other shop", vec![rule(0, 1, IntervalType::Year)]),
    );
    let read = |shop_id: i64, id: i64| {
        db.read(|tx| Ok(tx.subscription_group(shop_id, id)?))
            .unwrap()
    };
    assert_eq!(read(shop_a.id, first.id), Some(first.clone()));
    assert_eq!(read(shop_b.id, first.id), None, "another shop's");
    let (page, total) = db
        .read(|tx| Ok(tx.subscription_groups(shop_a.id, 1, 2)?))
        .unwrap();
    assert_eq!(total, 2);
    assert_eq!(
        page.iter().map(|g| g.name.as_str()).collect::<Vec<_>>(),
        ["Tea"]
    );
    // Rules rewritten: the second kept and changed, moved first; a new one; the first dropped.
    let mut changed = first.clone();
    let mut kept = first.billing_rules[1].clone();
    kept.interval_name = "Monthly".into();
    changed.billing_rules = vec![kept.clone(), rule(0, 3, IntervalType::Week)];
    changed.name = "Coffee+".into();
    changed.updated_at = at(5);
    let saved = save(shop_a.id, &changed);
    assert_eq!(saved.id, first.id);
    assert_eq!(saved.name, "Coffee+");
    assert_eq!(saved.billing_rules[0], kept);
    assert_eq!(saved.billing_rules[1].interval_number, 3);
    assert!(saved.billing_rules[1].id > ids[1]);
    assert_eq!(saved.billing_rules.len(), 2);
    assert_eq!((saved.created_at, saved.updated_at), (at(1), at(5)));
    // In use: line items of live subscriptions name the group and a rule.
    let (customer, address) = subscriber(db, shop_a.id, &fields(None, None, None));
    let mut item = line_item("p1", 1, 10);
    item.subscription_group_id = Some(first.id);
    item.subscription_group_billing_rules_id = Some(kept.id);
    let live = plain_state(customer, address, SubscriptionStatus::Active);
    let ended = plain_state(customer, address, SubscriptionStatus::Inactive);
    for state in [&live, &live, &ended] {
        db.write(|tx| {
            Ok(tx.insert_subscription(shop_a.id, state, std::slice::from_ref(&item), at(10))?)
        })
        .unwrap();
    }
    let in_use = db
        .read(|tx| {
            Ok((
                tx.live_subscriptions_of_group(shop_a.id, first.id)?,
                tx.live_subscriptions_of_group(shop_b.id, first.id)?,
                tx.billing_rules_in_use(shop_a.id, &[kept.id, saved.billing_rules[1].id])?,
                tx.billing_rules_in_use(shop_a.id, &[])?,
            ))
        })
        .unwrap();
    assert_eq!(in_use, (2, 0, vec![kept.id], vec![]));
    // Deleted with its rules, by its shop only.
    assert!(
        !db.write(|tx| Ok(tx.delete_subscription_group(shop_b.id, first.id)?))
            .unwrap()
    );
    assert!(
        db.write(|tx| Ok(tx.delete_subscription_group(shop_a.id, first.id)?))
            .unwrap()
    );
    assert_eq!(read(shop_a.id, first.id), None);
}

fn box_resources_round_trip_by_shop_and_deletions_cascade(db: &impl Database) {
    let shop_a = shop(db, "a.shop.test");
    let shop_b = shop(db, "b.shop.test");
    let group = db
        .write(|tx| {
            Ok(tx.save_subscription_group(
                shop_a.id,
                &stored_group("Veg", vec![rule(0, 1, IntervalType::Week)]),
            )?)
        })
        .unwrap();
    let attribute = Attribute {
        id: 1,
        shop_identifier: String::new(),
        attribute_key: "color".into(),
        attribute_value: "green".into(),
        created_at: at(1),
        updated_at: at(1),
    };
    let veg = db
        .write(|tx| {
            Ok(tx.save_box(
                shop_a.id,
                &SubscriptionBox {
                    id: 0,
                    svc_subscription_group_id: group.id,
                    shop_identifier: String::new(),
                    box_name: "Veg box".into(),
                    created_at: at(1),
                    updated_at: at(1),
                    attributes: vec![attribute.clone()],
                },
            )?)
        })
        .unwrap();
    assert!(veg.id > 0);
    assert_eq!(veg.attributes, std::slice::from_ref(&attribute));
    let found = db
        .read(|tx| {
            Ok((
                tx.subscription_box(shop_a.id, veg.id)?,
                tx.subscription_box(shop_b.id, veg.id)?,
                tx.box_of_group(shop_a.id, group.id)?,
                tx.boxes_of_group(shop_a.id, group.id)?,
                tx.boxes(shop_a.id, 50, 1)?,
            ))
        })
        .unwrap();
    assert_eq!(found.0, Some(veg.clone()));
    assert_eq!((found.1, found.2, found.3), (None, Some(veg.id), 1));
    assert_eq!(found.4, (vec![veg.clone()], 1));
    // Products, a size and two slots, one offering both products.
    let product = |variant: &str| BoxProduct {
        id: 0,
        platform_product_id: "veg".into(),
        platform_variant_id: variant.into(),
        created_at: at(2),
        updated_at: at(2),
        attributes: Vec::new(),
    };
    let carrot = db
        .write(|tx| Ok(tx.save_box_product(shop_a.id, &product("carrot"))?))
        .unwrap();
    let kale = db
        .write(|tx| Ok(tx.save_box_product(shop_a.id, &product("kale"))?))
        .unwrap();
    let size = db
        .write(|tx| {
            Ok(tx.save_box_size(
                shop_a.id,
                &BoxSize {
                    id: 0,
                    box_id: veg.id,
                    shop_identifier: String::new(),
                    box_size_name: "Small".into(),
                    pricing_mode: "flexible_pricing".into(),
                    min_quantity: 2,
                    max_quantity: 4,
                    created_at: at(2),
                    updated_at: at(2),
                },
            )?)
        })
        .unwrap();
    assert_eq!((size.min_quantity, size.max_quantity), (2, 4));
    let slot = |name: &str, start: i64| TimeSlot {
        id: 0,
        box_id: veg.id,
        shop_identifier: String::new(),
        time_slot_name: name.into(),
        start_date: at(start),
        end_date: at(start + 100),
        selection_deadline_date: at(start - 10),
        visibility_date: at(start - 20),
        created_at: at(2),
        updated_at: at(2),
        attributes: vec![attribute.clone()],
        box_products: Vec::new(),
    };
    let later = db
        .write(|tx| Ok(tx.save_time_slot(shop_a.id, &slot("Later", 1000))?))
        .unwrap();
    let sooner = db
        .write(|tx| Ok(tx.save_time_slot(shop_a.id, &slot("Sooner", 500))?))
        .unwrap();
    let offered = db
        .write(|tx| {
            Ok((
                tx.add_time_slot_option(shop_a.id, sooner.id, kale.id, at(3))?,
                tx.add_time_slot_option(shop_a.id, sooner.id, carrot.id, at(3))?,
                tx.add_time_slot_option(shop_a.id, sooner.id, kale.id, at(3))?,
                tx.add_time_slot_option(shop_a.id, later.id, kale.id, at(3))?,
            ))
        })
        .unwrap();
    assert_eq!(offered, (true, true, false, true));
    let slots = |filter: TimeSlotFilter| {
        db.read(|tx| Ok(tx.time_slots(shop_a.id, veg.id, filter, 50, 1)?))
            .unwrap()
    };
    let (all, total) = slots(TimeSlotFilter::default());
    assert_eq!(total, 2);
    assert_eq!(
        all.iter()
            .map(|s| s.time_slot_name.as_str())
            .collect::<Vec<_>>(),
        ["Sooner", "Later"]
    );
    assert_eq!(
        all[0]
            .box_products
            .iter()
            .map(|p| p.platform_variant_id.as_str())
            .collect::<Vec<_>>(),
        ["kale", "carrot"]
    );
    assert_eq!(all[0].attributes, std::slice::from_ref(&attribute));
    let holding = slots(TimeSlotFilter {
        holding: Some(at(1050)),
        visible_at: None,
    });
    assert_eq!((holding.0.len(), holding.0[0].id), (1, later.id));
    let visible = slots(TimeSlotFilter {
        holding: None,
        visible_at: Some(at(600)),
    });
    assert_eq!((visible.1, visible.0[0].id), (1, sooner.id));
    // A product deleted leaves the slots it was offered in; a slot deleted takes its options.
    assert!(
        db.write(|tx| Ok(tx.delete_box_product(shop_a.id, kale.id)?))
            .unwrap()
    );
    let sooner_now = db
        .read(|tx| Ok(tx.time_slot(shop_a.id, sooner.id)?))
        .unwrap()
        .unwrap();
    assert_eq!(sooner_now.box_products, std::slice::from_ref(&carrot));
    assert!(
        db.write(|tx| Ok(tx.remove_time_slot_option(shop_a.id, sooner.id, carrot.id)?))
            .unwrap()
    );
    assert!(
        !db.write(|tx| Ok(tx.remove_time_slot_option(shop_a.id, sooner.id, carrot.id)?))
            .unwrap()
    );
    assert!(
        !db.write(|tx| Ok(tx.delete_box(shop_b.id, veg.id)?))
            .unwrap(),
        "another shop's"
    );
    assert!(
        db.write(|tx| Ok(tx.delete_box(shop_a.id, veg.id)?))
            .unwrap()
    );
    let gone = db
        .read(|tx| {
            Ok((
                tx.time_slot(shop_a.id, later.id)?,
                tx.box_size(shop_a.id, size.id)?,
                tx.box_product(shop_a.id, carrot.id)?.is_some(),
            ))
        })
        .unwrap();
    assert_eq!(
        gone,
        (None, None, true),
        "slots and sizes go with the box; products stay"
    );
}

fn selections_are_a_customers_per_line_item_and_order_date(db: &impl Database) {
    let shop_a = shop(db, "a.shop.test");
    let shop_b = shop(db, "b.shop.test");
    let group = db
        .write(|tx| {
            Ok(tx.save_subscription_group(
                shop_a.id,
                &stored_group("Veg", vec![rule(0, 1, IntervalType::Week)]),
            )?)
        })
        .unwrap();
    let attribute = Attribute {
        id: 1,
        shop_identifier: String::new(),
        attribute_key: "season".into(),
        attribute_value: "winter".into(),
        created_at: at(1),
        updated_at: at(1),
    };
    let veg = db
        .write(|tx| {
            Ok(tx.save_box(
                shop_a.id,
                &SubscriptionBox {
                    id: 0,
                    svc_subscription_group_id: group.id,
                    shop_identifier: String::new(),
                    box_name: "Veg box".into(),
                    created_at: at(1),
                    updated_at: at(1),
                    attributes: vec![attribute.clone()],
                },
            )?)
        })
        .unwrap();
    let size = db
        .write(|tx| {
            Ok(tx.save_box_size(
                shop_a.id,
                &BoxSize {
                    id: 0,
                    box_id: veg.id,
                    shop_identifier: String::new(),
                    box_size_name: "Small".into(),
                    pricing_mode: "flexible_pricing".into(),
                    min_quantity: 1,
                    max_quantity: 4,
                    created_at: at(2),
                    updated_at: at(2),
                },
            )?)
        })
        .unwrap();
    let slot = |name: &str| TimeSlot {
        id: 0,
        box_id: veg.id,
        shop_identifier: String::new(),
        time_slot_name: name.into(),
        start_date: at(50),
        end_date: at(500),
        selection_deadline_date: at(40),
        visibility_date: at(1),
        created_at: at(2),
        updated_at: at(2),
        attributes: Vec::new(),
        box_products: Vec::new(),
    };
    let (week_one, week_two) = db
        .write(|tx| {
            Ok((
                tx.save_time_slot(shop_a.id, &slot("One"))?.id,
                tx.save_time_slot(shop_a.id, &slot("Two"))?.id,
            ))
        })
        .unwrap();
    // A subscriber the platform knows (c-1), with a box line item and a plain one; and one it
    // does not know yet.
    let (known, address) = subscriber(db, shop_a.id, &fields(None, None, None));
    db.write(|tx| Ok(tx.set_customer_platform_id(shop_a.id, known, "c-1", at(2))?))
        .unwrap();
    let mut boxed = line_item("veg", 1, 10);
    boxed.subscription_group_id = Some(group.id);
    let mut plain = line_item("mug", 1, 10);
    plain.subscription_group_id = None;
    let state = plain_state(known, address, SubscriptionStatus::Active);
    let subscription = db
        .write(|tx| {
            Ok(tx.insert_subscription(shop_a.id, &state, &[boxed.clone(), plain], at(10))?)
        })
        .unwrap();
    let items = read_subscription(db, shop_a.id, subscription).line_items;
    let (box_item, plain_item) = (items[0].id, items[1].id);
    let (unknown, unknown_address) = subscriber(db, shop_a.id, &fields(None, None, None));
    let unknown_state = plain_state(unknown, unknown_address, SubscriptionStatus::Active);
    let theirs = db
        .write(|tx| {
            Ok(tx.insert_subscription(
                shop_a.id,
                &unknown_state,
                std::slice::from_ref(&boxed),
                at(11),
            )?)
        })
        .unwrap();
    let their_item = read_subscription(db, shop_a.id, theirs).line_items[0].id;
    let owners = db
        .read(|tx| {
            Ok((
                tx.line_item_owner(shop_a.id, box_item)?,
                tx.line_item_owner(shop_a.id, plain_item)?,
                tx.line_item_owner(shop_a.id, their_item)?,
                tx.line_item_owner(shop_b.id, box_item)?,
            ))
        })
        .unwrap();
    assert_eq!(
        owners,
        (
            Some(LineItemOwner {
                subscription_id: subscription,
                platform_customer_id: Some("c-1".into()),
                subscription_group_id: Some(group.id),
            }),
            Some(LineItemOwner {
                subscription_id: subscription,
                platform_customer_id: Some("c-1".into()),
                subscription_group_id: None,
            }),
            Some(LineItemOwner {
                subscription_id: theirs,
                platform_customer_id: None,
                subscription_group_id: Some(group.id),
            }),
            None,
        )
    );
    // The box's line items: those sold under its group, with their own attributes.
    let (box_items, total) = db
        .read(|tx| Ok(tx.box_line_items(shop_a.id, 1, 1)?))
        .unwrap();
    assert_eq!(total, 2);
    assert_eq!(box_items.len(), 1, "one a page");
    assert_eq!(
        (
            box_items[0].svc_platform_subscription_line_item_id,
            box_items[0].box_id,
            &box_items[0].attributes
        ),
        (
            box_item,
            veg.id,
            &vec![Attribute {
                id: 1,
                shop_identifier: String::new(),
                attribute_key: "grind".into(),
                attribute_value: "fine".into(),
                created_at: at(10),
                updated_at: at(10),
            }]
        )
    );
    let single = db
        .read(|tx| {
            Ok((
                tx.box_line_item(shop_a.id, their_item)?.map(|i| i.box_id),
                tx.box_line_item(shop_a.id, plain_item)?,
                tx.box_line_item(shop_b.id, box_item)?,
            ))
        })
        .unwrap();
    assert_eq!(single, (Some(veg.id), None, None));
    // Selections: stored per customer, found by line item and order date, rewritten in place.
    let selection = |order_at: i64, quantity: i64| StoredSelection {
        selection: Selection {
            id: 0,
            svc_platform_subscription_line_item_id: box_item,
            box_size_id: size.id,
            time_slot_id: week_one,
            order_datetime: at(order_at),
            line_items: vec![SelectionItem {
                box_product_id: 9,
                choice_quantity: quantity,
            }],
            created_at: at(20),
            updated_at: at(20),
        },
        platform_customer_id: "c-1".into(),
        box_id: veg.id,
    };
    let first = db
        .write(|tx| Ok(tx.save_selection(shop_a.id, &selection(100, 2))?))
        .unwrap();
    let second = db
        .write(|tx| Ok(tx.save_selection(shop_a.id, &selection(200, 3))?))
        .unwrap();
    assert!(first.selection.id > 0 && second.selection.id > first.selection.id);
    assert_eq!(
        first.selection.line_items,
        selection(100, 2).selection.line_items
    );
    assert_eq!(
        (first.platform_customer_id.as_str(), first.box_id),
        ("c-1", veg.id)
    );
    let list = |customer: &str, filter: SelectionFilter| {
        db.read(|tx| Ok(tx.selections(shop_a.id, customer, filter, 50, 1)?))
            .unwrap()
    };
    let ids = |(found, total): (Vec<StoredSelection>, i64)| {
        (
            found.iter().map(|s| s.selection.id).collect::<Vec<_>>(),
            total,
        )
    };
    let (a, b) = (first.selection.id, second.selection.id);
    assert_eq!(
        ids(list("c-1", SelectionFilter::default())),
        (vec![a, b], 2)
    );
    assert_eq!(ids(list("c-2", SelectionFilter::default())), (vec![], 0));
    let on_date = SelectionFilter {
        line_item_id: None,
        order_datetime: Some(at(200)),
    };
    assert_eq!(ids(list("c-1", on_date)), (vec![b], 1));
    let of_plain_item = SelectionFilter {
        line_item_id: Some(plain_item),
        order_datetime: None,
    };
    assert_eq!(ids(list("c-1", of_plain_item)), (vec![], 0));
    let found = db
        .read(|tx| {
            Ok((
                tx.selection_of_date(shop_a.id, box_item, at(100))?
                    .map(|s| s.selection.id),
                tx.selection_of_date(shop_a.id, box_item, at(150))?,
                tx.selection_of_date(shop_b.id, box_item, at(100))?,
                tx.selection(shop_b.id, a)?,
                tx.selections_of_box(shop_a.id, veg.id)?,
                tx.selections_of_time_slot(shop_a.id, week_one)?,
                tx.selections_of_time_slot(shop_a.id, week_two)?,
            ))
        })
        .unwrap();
    assert_eq!(found, (Some(a), None, None, None, 2, 2, 0));
    let mut changed = first.clone();
    changed.selection.time_slot_id = week_two;
    changed.selection.line_items[0].choice_quantity = 4;
    changed.selection.updated_at = at(30);
    let saved = db
        .write(|tx| Ok(tx.save_selection(shop_a.id, &changed)?))
        .unwrap();
    assert_eq!(saved, changed, "rewritten in place, created_at kept");
    assert!(
        !db.write(|tx| Ok(tx.delete_selection(shop_b.id, a)?))
            .unwrap()
    );
    assert!(
        db.write(|tx| Ok(tx.delete_selection(shop_a.id, a)?))
            .unwrap()
    );
    let left = db
        .read(|tx| {
            Ok((
                tx.selection(shop_a.id, a)?,
                tx.selections_of_time_slot(shop_a.id, week_two)?,
                tx.selections_of_box(shop_a.id, veg.id)?,
            ))
        })
        .unwrap();
    assert_eq!(left, (None, 0, 1));
}

fn a_line_item_is_rewritten_on_its_own_subscription(db: &impl Database) {
    let shop = shop(db, "a.shop.test");
    let (customer, address) = subscriber(db, shop.id, &fields(None, None, None));
    let state = plain_state(customer, address, SubscriptionStatus::Active);
    let id = db
        .write(|tx| {
            Ok(tx.insert_subscription(
                shop.id,
                &state,
                &[line_item("p1", 1, 10), line_item("p2", 2, 10)],
                at(10),
            )?)
        })
        .unwrap();
    let other_subscription = insert_subscription(db, shop.id, &state, 11);
    let before = read_subscription(db, shop.id, id);
    let (first, second) = (before.line_items[0].id, before.line_items[1].id);
    let mut item = before.line_items[1].clone();
    item.quantity = 5;
    item.full_price = Cents(item.price.0 * 5);
    item.full_price_charged = Cents(item.price.0 * 5 + 1);
    let update = |shop_id: i64, subscription_id: i64, item: &SubscriptionLineItem| {
        db.write(|tx| Ok(tx.update_line_item(shop_id, subscription_id, item, at(50))?))
            .unwrap()
    };
    assert!(update(shop.id, id, &item));
    assert!(
        !update(shop.id, other_subscription, &item),
        "another subscription's line item"
    );
    let mut unknown = item.clone();
    unknown.id = second + 1000;
    assert!(!update(shop.id, id, &unknown));
    assert!(!update(shop.id + 1000, id, &item), "another shop");
    let after = read_subscription(db, shop.id, id);
    assert_eq!(after.line_items[0], before.line_items[0]);
    let changed = &after.line_items[1];
    assert_eq!(
        (changed.id, changed.quantity, changed.updated_at),
        (second, 5, at(50))
    );
    assert_eq!(
        (changed.full_price, changed.full_price_charged),
        (item.full_price, item.full_price_charged)
    );
    assert_eq!(changed.created_at, before.line_items[1].created_at);
    assert_eq!(first, after.line_items[0].id);
}

fn the_latest_status_log_is_the_last_one_inserted(db: &impl Database) {
    let shop = shop(db, "a.shop.test");
    let (customer, address) = subscriber(db, shop.id, &fields(None, None, None));
    let state = plain_state(customer, address, SubscriptionStatus::Active);
    let id = insert_subscription(db, shop.id, &state, 10);
    let other = insert_subscription(db, shop.id, &state, 11);
    let actor = Actor {
        kind: ActorType::Api,
        id: 12,
        name: "API token 12".into(),
    };
    let log = |subscription_id: i64, status, reason: &str, seconds| {
        db.write(|tx| {
            Ok(tx.insert_status_log(
                shop.id,
                &NewStatusLog::new(subscription_id, status, reason, actor.clone(), at(seconds)),
            )?)
        })
        .unwrap()
    };
    let created = log(id, SubscriptionStatus::Active, "created", 10);
    assert_eq!(
        (
            created.subscription_id,
            created.subscription_status,
            created.reason.as_str(),
            &created.metadata.user,
            created.created_at
        ),
        (id, SubscriptionStatus::Active, "created", &actor, at(10))
    );
    assert_eq!(
        read_subscription(db, shop.id, id).latest_status_log,
        Some(created.clone())
    );
    let paused = log(id, SubscriptionStatus::Paused, "paused by the customer", 20);
    assert!(paused.id > created.id);
    let theirs = log(other, SubscriptionStatus::Inactive, "cancelled", 30);
    assert_eq!(
        read_subscription(db, shop.id, id).latest_status_log,
        Some(paused)
    );
    assert_eq!(
        read_subscription(db, shop.id, other).latest_status_log,
        Some(theirs)
    );
}

fn list(db: &impl Database, shop_id: i64, query: &ListQuery) -> (Vec<i64>, bool) {
    let page = db
        .read(|tx| Ok(tx.list_subscriptions(shop_id, query)?))
        .unwrap();
    (
        page.subscriptions.iter().map(|s| s.id).collect(),
        page.has_more,
    )
}

fn count(db: &impl Database, shop_id: i64, query: &ListQuery) -> i64 {
    db.read(|tx| Ok(tx.count_subscriptions(shop_id, query)?))
        .unwrap()
}

fn totals_by_status_follow_every_status_change(db: &impl Database) {
    use SubscriptionStatus::{Active, Inactive, Paused};
    let shop = shop(db, "a.shop.test");
    let other = self::shop(db, "b.shop.test");
    let (customer, address) = subscriber(db, shop.id, &fields(None, None, None));
    let (theirs, their_address) = subscriber(db, other.id, &fields(None, None, None));
    let ids: Vec<i64> = (0..4)
        .map(|n| insert_subscription(db, shop.id, &plain_state(customer, address, Active), n))
        .collect();
    insert_subscription(db, other.id, &plain_state(theirs, their_address, Active), 9);
    let count = |statuses: &[SubscriptionStatus]| {
        let query = ListQuery {
            statuses: statuses.to_vec(),
            ..ListQuery::default()
        };
        db.read(|tx| Ok(tx.count_subscriptions(shop.id, &query)?))
            .unwrap()
    };
    assert_eq!((count(&[]), count(&[Active]), count(&[Paused])), (4, 4, 0));
    let save = |id: i64, status: SubscriptionStatus| {
        db.write(|tx| {
            Ok(tx.save_subscription(shop.id, id, &plain_state(customer, address, status))?)
        })
        .unwrap()
    };
    save(ids[0], Paused);
    save(ids[1], Inactive);
    save(ids[2], Inactive);
    save(ids[2], Inactive);
    save(ids[1], Active);
    assert_eq!(count(&[Active]), 2);
    assert_eq!(count(&[Paused]), 1);
    assert_eq!(count(&[Inactive]), 1);
    assert_eq!(count(&[Active, Paused]), 3);
    assert_eq!(count(&[]), 4, "another shop's are not counted");
}

fn subscriptions_are_listed_by_status_customer_and_filter(db: &impl Database) {
    let shop = shop(db, "a.shop.test");
    let other = self::shop(db, "b.shop.test");
    let (ada, ada_address) = subscriber(db, shop.id, &fields(None, None, None));
    let (bob, bob_address) = subscriber(db, shop.id, &fields(None, None, None));
    let (zoe, zoe_address) = subscriber(db, other.id, &fields(None, None, None));
    let made = |customer, address, status, next: Option<i64>, orders| SubscriptionState {
        next_order_datetime: next.map(at),
        orders_processed: orders,
        ..plain_state(customer, address, status)
    };
    use SubscriptionStatus::{Active, Inactive, Paused};
    let s1 = insert_subscription(
        db,
        shop.id,
        &made(ada, ada_address, Active, Some(100), 0),
        1,
    );
    let s2 = insert_subscription(
        db,
        shop.id,
        &made(bob, bob_address, Paused, Some(200), 2),
        2,
    );
    let theirs = insert_subscription(
        db,
        other.id,
        &made(zoe, zoe_address, Active, Some(100), 9),
        3,
    );
    let s3 = insert_subscription(db, shop.id, &made(ada, ada_address, Inactive, None, 5), 4);
    let s4 = insert_subscription(
        db,
        shop.id,
        &made(bob, bob_address, Active, Some(300), 3),
        5,
    );
    let s5 = insert_subscription(
        db,
        shop.id,
        &made(ada, ada_address, Paused, Some(400), 1),
        6,
    );

    let all = ListQuery::default();
    assert_eq!(
        list(db, shop.id, &all),
        (vec![s1, s2, s3, s4, s5], false),
        "this shop's, by id"
    );
    assert_eq!(list(db, other.id, &all), (vec![theirs], false));
    assert_eq!(count(db, shop.id, &all), 5);

    let by_status = ListQuery {
        statuses: vec![Paused, Inactive],
        ..ListQuery::default()
    };
    assert_eq!(list(db, shop.id, &by_status).0, [s2, s3, s5]);
    assert_eq!(count(db, shop.id, &by_status), 3);
    let by_customer = ListQuery {
        customer_ids: vec![bob],
        ..ListQuery::default()
    };
    assert_eq!(list(db, shop.id, &by_customer).0, [s2, s4]);
    let both = ListQuery {
        statuses: vec![Active],
        customer_ids: vec![bob, zoe],
        ..ListQuery::default()
    };
    assert_eq!(list(db, shop.id, &both).0, [s4]);
    assert_eq!(count(db, shop.id, &both), 1);

    // A time range on next_order_datetime: a subscription without one is in no range.
    let range = ListQuery {
        filters: parse_filters(&format!(
            "gte(next_order_datetime:{}),lt(next_order_datetime:{})",
            at(200).to_rfc3339(),
            at(400).to_rfc3339()
        ))
        .unwrap(),
        ..ListQuery::default()
    };
    assert_eq!(list(db, shop.id, &range).0, [s2, s4]);
    assert_eq!(count(db, shop.id, &range), 2);
    let before = ListQuery {
        filters: parse_filters(&format!(
            "lte(next_order_datetime:{})",
            at(200).to_rfc3339()
        ))
        .unwrap(),
        ..ListQuery::default()
    };
    assert_eq!(list(db, shop.id, &before).0, [s1, s2]);
    // An integer field.
    let orders = ListQuery {
        filters: parse_filters("gte(orders_processed:2)").unwrap(),
        ..ListQuery::default()
    };
    assert_eq!(list(db, shop.id, &orders).0, [s2, s3, s4]);
    let exactly = ListQuery {
        statuses: vec![Active, Paused],
        filters: parse_filters("eq(orders_processed:1)").unwrap(),
        ..ListQuery::default()
    };
    assert_eq!(list(db, shop.id, &exactly).0, [s5]);

    // Pages of two, each after the last one's id: every subscription exactly once.
    let mut seen = Vec::new();
    let mut cursor = None;
    let mut pages = 0;
    loop {
        let query = ListQuery {
            limit: 2,
            cursor,
            ..ListQuery::default()
        };
        let (ids, has_more) = list(db, shop.id, &query);
        assert_eq!(
            count(db, shop.id, &query),
            5,
            "the count ignores the cursor and the limit"
        );
        assert!(ids.len() <= 2);
        pages += 1;
        seen.extend(ids.iter().copied());
        if !has_more {
            break;
        }
        cursor = Some(Cursor::after(*ids.last().unwrap()));
        assert!(pages < 10, "paging must end");
    }
    assert_eq!((seen, pages), (vec![s1, s2, s3, s4, s5], 3));
    let paused_after_s2 = ListQuery {
        statuses: vec![Paused],
        limit: 1,
        cursor: Some(Cursor::after(s2)),
        ..ListQuery::default()
    };
    assert_eq!(list(db, shop.id, &paused_after_s2), (vec![s5], false));
    let first_paused = ListQuery {
        cursor: None,
        ..paused_after_s2.clone()
    };
    assert_eq!(list(db, shop.id, &first_paused), (vec![s2], true));
    assert_eq!(count(db, shop.id, &paused_after_s2), 2);
}

fn a_customers_subscriptions_come_in_pages(db: &impl Database) {
    let shop = shop(db, "a.shop.test");
    let (ada, ada_address) = subscriber(db, shop.id, &fields(None, None, None));
    let (bob, bob_address) = subscriber(db, shop.id, &fields(None, None, None));
    let mut adas = Vec::new();
    for n in 0..3 {
        adas.push(insert_subscription(
            db,
            shop.id,
            &plain_state(ada, ada_address, SubscriptionStatus::Active),
            n,
        ));
        insert_subscription(
            db,
            shop.id,
            &plain_state(bob, bob_address, SubscriptionStatus::Active),
            n,
        );
    }
    let page = |customer: i64, limit: i64, page: i64| {
        let (subscriptions, total) = db
            .read(|tx| Ok(tx.customer_subscriptions(shop.id, customer, limit, page)?))
            .unwrap();
        (
            subscriptions.iter().map(|s| s.id).collect::<Vec<_>>(),
            total,
        )
    };
    assert_eq!(page(ada, 2, 1), (adas[..2].to_vec(), 3));
    assert_eq!(page(ada, 2, 2), (adas[2..].to_vec(), 3));
    assert_eq!(page(ada, 2, 3), (vec![], 3));
    assert_eq!(page(ada, 10, 1), (adas.clone(), 3));
    let none = new_customer(db, shop.id, &fields(None, None, None), 9);
    assert_eq!(page(none, 10, 1), (vec![], 0));
    let (subscriptions, _) = db
        .read(|tx| Ok(tx.customer_subscriptions(shop.id, ada, 1, 1)?))
        .unwrap();
    assert_eq!(
        subscriptions[0],
        read_subscription(db, shop.id, adas[0]),
        "whole subscriptions"
    );
}

fn customer_list(
    db: &impl Database,
    shop_id: i64,
    statuses: &[CustomerStatus],
    search: Option<&str>,
    limit: i64,
    page: i64,
) -> (Vec<i64>, i64) {
    let query = CustomerListQuery {
        statuses: statuses.to_vec(),
        search: search.map(str::to_string),
        limit,
        page,
    };
    let page = db
        .read(|tx| Ok(tx.list_subscription_customers(shop_id, &query)?))
        .unwrap();
    (page.ids, page.total)
}

fn subscription_customers_are_listed_by_status_and_search(db: &impl Database) {
    let shop = shop(db, "a.shop.test");
    let other = self::shop(db, "b.shop.test");
    use CustomerStatus::{Active, All, Inactive};
    let (ada, ada_address) = subscriber(
        db,
        shop.id,
        &CustomerFields {
            phone: Some("+1 555 0100".into()),
            ..fields(Some("ada@example.test"), Some("Ada"), Some("Lovelace"))
        },
    );
    let (bob, bob_address) = subscriber(
        db,
        shop.id,
        &fields(Some("bob@example.test"), Some("Bob"), Some("Byron")),
    );
    let (cy, cy_address) = subscriber(
        db,
        shop.id,
        &fields(Some("cy@Example.test"), Some("Cy"), None),
    );
    let (_nobody, _) = subscriber(
        db,
        shop.id,
        &fields(Some("nobody@example.test"), Some("Ada"), None),
    );
    let (zoe, zoe_address) = subscriber(
        db,
        other.id,
        &fields(Some("zoe@example.test"), Some("Zoe"), None),
    );
    // A platform customer with a subscription, then deleted.
    accept(
        db,
        vec![customer_event(
            shop.id,
            "c9",
            10,
            json!({"email": "gone@example.test"}),
        )],
        at(100),
    );
    let gone = stored_customer(db, shop.id, "c9").id;
    let gone_address = new_address(db, shop.id, gone, "Lyon", true, 101);
    use SubscriptionStatus as S;
    for (customer, address, status) in [
        (ada, ada_address, S::Inactive),
        (ada, ada_address, S::Paused),
        (bob, bob_address, S::Inactive),
        (bob, bob_address, S::Inactive),
        (cy, cy_address, S::Active),
        (gone, gone_address, S::Active),
    ] {
        insert_subscription(db, shop.id, &plain_state(customer, address, status), 10);
    }
    insert_subscription(db, other.id, &plain_state(zoe, zoe_address, S::Active), 10);
    accept(
        db,
        vec![deleted_event(shop.id, EntityKind::Customer, "c9", 20)],
        at(200),
    );

    let listed = |statuses: &[CustomerStatus], search: Option<&str>| {
        customer_list(db, shop.id, statuses, search, 50, 1)
    };
    assert_eq!(
        listed(&[All], None),
        (vec![ada, bob, cy], 3),
        "customers with a subscription, live, of this shop"
    );
    assert_eq!(
        listed(&[Active], None),
        (vec![ada, cy], 2),
        "one that is not inactive"
    );
    assert_eq!(listed(&[Inactive], None), (vec![bob], 1), "all inactive");
    assert_eq!(
        listed(&[Inactive, Active], None),
        (vec![ada, bob, cy], 3),
        "the union"
    );
    assert_eq!(
        customer_list(db, other.id, &[All], None, 50, 1),
        (vec![zoe], 1)
    );

    assert_eq!(
        listed(&[All], Some("ADA")),
        (vec![ada], 1),
        "first name, without case"
    );
    assert_eq!(listed(&[All], Some("byron")), (vec![bob], 1), "last name");
    assert_eq!(
        listed(&[All], Some("ada lovelace")),
        (vec![ada], 1),
        "full name"
    );
    assert_eq!(
        listed(&[All], Some("example.test")),
        (vec![ada, bob, cy], 3),
        "email"
    );
    assert_eq!(
        listed(&[All], Some("cy@example")),
        (vec![cy], 1),
        "email, without case"
    );
    assert_eq!(listed(&[All], Some("555 01")), (vec![ada], 1), "phone");
    assert_eq!(
        listed(&[Active], Some("O")),
        (vec![ada], 1),
        "search and status together"
    );
    assert_eq!(
        listed(&[All], Some("_")),
        (vec![], 0),
        "a wildcard of SQL is a plain character"
    );
    assert_eq!(
        listed(&[All], Some("%")),
        (vec![], 0),
        "a wildcard of SQL is a plain character"
    );

    assert_eq!(
        customer_list(db, shop.id, &[All], None, 2, 1),
        (vec![ada, bob], 3)
    );
    assert_eq!(
        customer_list(db, shop.id, &[All], None, 2, 2),
        (vec![cy], 3)
    );
    assert_eq!(customer_list(db, shop.id, &[All], None, 2, 3), (vec![], 3));
}

fn subscription_summaries_count_and_date_a_customers_subscriptions(db: &impl Database) {
    let shop = shop(db, "a.shop.test");
    let other = self::shop(db, "b.shop.test");
    let (ada, ada_address) = subscriber(db, shop.id, &fields(None, None, None));
    let (bob, bob_address) = subscriber(db, shop.id, &fields(None, None, None));
    let (nobody, _) = subscriber(db, shop.id, &fields(None, None, None));
    let (zoe, zoe_address) = subscriber(db, other.id, &fields(None, None, None));
    let made = |customer, address, status, next: Option<i64>, last: Option<i64>, orders| {
        SubscriptionState {
            next_order_datetime: next.map(at),
            last_order_datetime: last.map(at),
            orders_processed: orders,
            ..plain_state(customer, address, status)
        }
    };
    use SubscriptionStatus as S;
    for state in [
        made(ada, ada_address, S::Active, Some(500), Some(100), 2),
        made(ada, ada_address, S::Paused, Some(300), Some(400), 1),
        // Inactive: its next order date counts for nothing, its last one does.
        made(ada, ada_address, S::Inactive, Some(200), Some(900), 4),
        made(ada, ada_address, S::Scheduled, None, None, 0),
        made(bob, bob_address, S::Inactive, Some(100), None, 3),
    ] {
        insert_subscription(db, shop.id, &state, 10);
    }
    insert_subscription(
        db,
        other.id,
        &made(zoe, zoe_address, S::Active, Some(50), Some(50), 7),
        10,
    );
    let figures = db
        .read(|tx| Ok(tx.subscription_summaries(shop.id, &[nobody, bob, ada, zoe])?))
        .unwrap();
    let mut figures = figures;
    figures.sort_by_key(|f| f.customer_id);
    assert_eq!(
        figures,
        [
            SummaryFigures {
                customer_id: ada,
                active_subscription_count: 3,
                inactive_subscription_count: 1,
                next_order_date: Some(at(300)),
                last_order_date: Some(at(900)),
                subscription_order_count: 7,
            },
            SummaryFigures {
                customer_id: bob,
                active_subscription_count: 0,
                inactive_subscription_count: 1,
                next_order_date: None,
                last_order_date: None,
                subscription_order_count: 3,
            },
        ],
        "customers without subscriptions (here) are left out"
    );
    assert!(
        db.read(|tx| Ok(tx.subscription_summaries(shop.id, &[])?))
            .unwrap()
            .is_empty()
    );
}

// --- units of work --------------------------------------------------------------------------

fn a_failed_unit_of_work_leaves_nothing_behind(db: &impl Database) {
    let shop = shop(db, "a.shop.test");
    let result: Result<(), DomainError> = db.write(|tx| {
        tx.insert_destination(shop.id, &settings(Topic::Customers), at(1))?;
        Err(DomainError::NotFound { resource: "test" })
    });
    assert!(result.is_err());
    assert!(
        db.read(|tx| Ok(tx.live_destinations(shop.id)?))
            .unwrap()
            .is_empty()
    );
}

fn new_job(key: Option<&str>, run_at: Timestamp) -> NewJob {
    NewJob {
        kind: "test.job",
        payload: "{}".to_string(),
        unique_key: key.map(str::to_string),
        run_at,
        max_attempts: 2,
    }
}

fn the_jobs_queue_claims_coalesces_retries_and_requeues(db: &impl Database) {
    let kinds = ["test.job"];
    let enqueue = |key, run_at| {
        db.write(|tx| Ok(tx.enqueue_job(&new_job(key, run_at), at(0))?))
            .unwrap()
    };
    let claim = |worker: &str, now, lease_until| {
        db.write(|tx| Ok(tx.claim_jobs(&kinds, worker, now, lease_until, 10)?))
            .unwrap()
    };
    let job = |id| db.read(|tx| Ok(tx.job(id)?)).unwrap();
    let keyed = enqueue(Some("k"), at(20)).id();
    assert_eq!(enqueue(Some("k"), at(10)), Enqueued::Coalesced(keyed));
    let plain = enqueue(None, at(15)).id();
    assert!(!db.read(|tx| Ok(tx.has_due_jobs(&kinds, at(9))?)).unwrap());
    assert!(claim("w", at(9), at(100)).is_empty());
    let claimed = claim("w", at(15), at(100));
    assert_eq!(
        claimed
            .iter()
            .map(|job| (job.id, job.state, job.attempts))
            .collect::<Vec<_>>(),
        [(keyed, JobState::Running, 1), (plain, JobState::Running, 1)],
        "the longest due first"
    );
    assert!(claim("v", at(50), at(150)).is_empty(), "leased");
    assert_eq!(
        db.write(|tx| Ok(tx.renew_job_leases(&[keyed, plain], "w", at(120), at(50))?))
            .unwrap(),
        [keyed, plain]
    );
    // Enqueued while it runs: queued again when this run ends.
    assert_eq!(enqueue(Some("k"), at(60)), Enqueued::Coalesced(keyed));
    assert!(
        !db.write(|tx| Ok(tx.complete_job(keyed, "v", None, at(61))?))
            .unwrap(),
        "only the holder"
    );
    assert!(
        db.write(|tx| Ok(tx.complete_job(keyed, "w", None, at(61))?))
            .unwrap()
    );
    let again = job(keyed).unwrap();
    assert_eq!(
        (again.state, again.run_at, again.attempts),
        (JobState::Queued, at(60), 0)
    );
    db.write(|tx| Ok(tx.retry_job(plain, "w", at(70), "down", at(62))?))
        .unwrap();
    let retried = job(plain).unwrap();
    assert_eq!(
        (retried.state, retried.run_at, retried.last_error.as_deref()),
        (JobState::Queued, at(70), Some("down"))
    );
    assert_eq!(claim("w", at(70), at(200)).len(), 2);
    db.write(|tx| Ok(tx.release_job(keyed, "w", at(71))?))
        .unwrap();
    assert_eq!(
        job(keyed).unwrap().attempts,
        0,
        "a released run does not count"
    );
    db.write(|tx| Ok(tx.fail_job(plain, "w", "gave up", at(72))?))
        .unwrap();
    // The keyed job's lease runs out during its last attempt: failed when next claimed.
    assert_eq!(claim("w", at(73), at(80))[0].id, keyed);
    assert_eq!(claim("w", at(80), at(90))[0].attempts, 2);
    assert!(claim("w", at(90), at(100)).is_empty());
    assert_eq!(
        db.read(|tx| Ok(tx.list_jobs(Some(JobState::Failed), 10)?))
            .unwrap()
            .iter()
            .map(|job| job.id)
            .collect::<Vec<_>>(),
        [keyed, plain]
    );
    let counts = db.read(|tx| Ok(tx.count_jobs()?)).unwrap();
    assert_eq!(
        counts
            .iter()
            .map(|count| (count.kind.as_str(), count.state, count.count))
            .collect::<Vec<_>>(),
        [("test.job", JobState::Failed, 2)]
    );
    let newer = enqueue(Some("k"), at(0)).id();
    assert_eq!(
        db.write(|tx| Ok(tx.requeue_jobs(None, at(91))?)).unwrap(),
        [plain],
        "not the one whose key a newer job holds"
    );
    assert_eq!(
        db.write(|tx| Ok(tx.cancel_jobs(&[newer, plain, 999], at(92))?))
            .unwrap(),
        [plain, newer]
    );
    assert!(claim("w", at(1000), at(2000)).is_empty());
    db.write(|tx| Ok(tx.complete_job(newer, "w", None, at(93))?))
        .unwrap();
    assert_eq!(job(newer).unwrap().state, JobState::Cancelled);
}

// --- the scheduler ------------------------------------------------------------------------------

/// An active subscription of `customer` whose next order is at `next` seconds.
fn due_at(
    db: &impl Database,
    shop_id: i64,
    customer: (i64, i64),
    status: SubscriptionStatus,
    next: i64,
    retry: Option<i64>,
) -> i64 {
    let mut state = plain_state(customer.0, customer.1, status);
    state.next_order_datetime = Some(at(next));
    state.next_processing_datetime = retry.map(at);
    insert_subscription(db, shop_id, &state, 1)
}

fn due_subscriptions_are_found_by_status_date_and_retry_wait(db: &impl Database) {
    let shop = shop(db, "a.shop.test");
    let other = self::shop(db, "b.shop.test");
    let ours = subscriber(db, shop.id, &fields(Some("a@example.test"), None, None));
    let theirs = subscriber(db, other.id, &fields(Some("b@example.test"), None, None));
    use SubscriptionStatus::{Active, Paused, Processing, Scheduled};
    let later = due_at(db, shop.id, ours, Active, 300, None);
    let earliest = due_at(db, other.id, theirs, Active, 100, None);
    let middle = due_at(db, shop.id, ours, Active, 200, Some(150));
    let waiting = due_at(db, shop.id, ours, Active, 100, Some(1_000));
    let future = due_at(db, shop.id, ours, Active, 10_000, None);
    let paused = due_at(db, shop.id, ours, Paused, 100, None);
    let processing = due_at(db, shop.id, ours, Processing, 100, None);
    let scheduled = due_at(db, shop.id, ours, Scheduled, 100, None);
    let mut undated = plain_state(ours.0, ours.1, Active);
    undated.next_order_datetime = None;
    insert_subscription(db, shop.id, &undated, 1);

    let due = |status, now, limit| {
        db.write(|tx| Ok(tx.lock_due_subscriptions(status, at(now), limit)?))
            .unwrap()
    };
    assert_eq!(
        due(Active, 500, 10),
        [(other.id, earliest), (shop.id, middle), (shop.id, later)],
        "every shop's, by order date; not before the retry wait ends"
    );
    assert_eq!(
        due(Active, 500, 2),
        [(other.id, earliest), (shop.id, middle)]
    );
    assert!(due(Active, 99, 10).is_empty());
    assert_eq!(
        due(Active, 1_000, 10).len(),
        4,
        "the wait is over at its time"
    );
    assert!(due(Active, 1_000, 10).contains(&(shop.id, waiting)));
    assert!(!due(Active, 1_000, 10).contains(&(shop.id, future)));
    assert_eq!(due(Scheduled, 500, 10), [(shop.id, scheduled)]);
    assert_eq!(due(Paused, 500, 10), [(shop.id, paused)]);
    assert_eq!(due(Processing, 500, 10), [(shop.id, processing)]);

    let backlog = db.read(|tx| Ok(tx.scheduler_backlog(at(500))?)).unwrap();
    assert_eq!(
        (backlog.due, backlog.processing, backlog.waiting_retry),
        (3, 1, 1)
    );
    let upcoming = db
        .read(|tx| Ok(tx.upcoming_subscription_ids(shop.id, at(300), 10)?))
        .unwrap();
    assert_eq!(
        upcoming,
        [waiting, processing, scheduled, middle, later],
        "active, scheduled and processing of the shop, by order date then id"
    );
    let whole = db
        .read(|tx| Ok(tx.subscriptions_by_ids(shop.id, &[later, middle, earliest])?))
        .unwrap();
    assert_eq!(
        whole.iter().map(|s| s.id).collect::<Vec<_>>(),
        [later, middle],
        "in the order asked, of the shop only"
    );
}

fn new_attempt(
    subscription_id: i64,
    shop_id: i64,
    scheduled: i64,
    attempt: i64,
) -> NewSubscriptionOrder {
    NewSubscriptionOrder {
        shop_id,
        subscription_id,
        scheduled_at: at(scheduled),
        attempt,
        idempotency_key: format!("{subscription_id}:{scheduled}"),
        due_at: at(scheduled + attempt),
        created_at: at(scheduled + 10 * attempt),
    }
}

fn order_attempts_are_kept_and_end_once(db: &impl Database) {
    let shop = shop(db, "a.shop.test");
    let customer = subscriber(db, shop.id, &fields(None, None, None));
    let one = due_at(db, shop.id, customer, SubscriptionStatus::Active, 100, None);
    let two = due_at(db, shop.id, customer, SubscriptionStatus::Active, 100, None);
    let insert = |order: NewSubscriptionOrder| {
        db.write(|tx| Ok(tx.insert_subscription_order(&order)?))
            .unwrap()
    };
    let first = insert(new_attempt(one, shop.id, 100, 1));
    let again =
        db.write(|tx| Ok(tx.insert_subscription_order(&new_attempt(one, shop.id, 100, 1))?));
    assert!(
        matches!(again, Err(DomainError::Storage(ref e)) if e.is_unique_violation()),
        "one row per attempt of a date: {again:?}"
    );
    let stored = db
        .read(|tx| Ok(tx.subscription_order(first)?))
        .unwrap()
        .unwrap();
    assert_eq!(
        (
            stored.subscription_id,
            stored.scheduled_at,
            stored.attempt,
            stored.status,
            stored.due_at,
            stored.created_at
        ),
        (
            one,
            at(100),
            1,
            OrderAttemptStatus::Placing,
            at(101),
            at(110)
        )
    );
    assert_eq!(stored.idempotency_key, format!("{one}:100"));
    assert_eq!(stored.platform_order_id, None);

    db.write(|tx| Ok(tx.set_order_platform_id(first, "ord-1", at(111))?))
        .unwrap();
    let of_date = |id, scheduled| {
        db.read(|tx| Ok(tx.attempts_of_date(id, at(scheduled))?))
            .unwrap()
            .into_iter()
            .map(|attempt| (attempt.id, attempt.attempt, attempt.platform_order_id))
            .collect::<Vec<_>>()
    };
    assert_eq!(of_date(one, 100), [(first, 1, Some("ord-1".to_string()))]);
    assert_eq!(of_date(one, 200), []);
    assert_eq!(of_date(two, 100), []);

    let failed = OrderAttemptEnd::Failed {
        code: "payment_declined".into(),
        reason: "the payment was declined".into(),
    };
    assert!(
        db.write(|tx| Ok(tx.finish_subscription_order(first, &failed, at(120))?))
            .unwrap()
    );
    let placed = OrderAttemptEnd::Placed {
        platform_order_id: "ord-1".into(),
        platform_payment_id: Some("pay-1".into()),
    };
    assert!(
        !db.write(|tx| Ok(tx.finish_subscription_order(first, &placed, at(121))?))
            .unwrap(),
        "an attempt ends once"
    );
    let ended = db
        .read(|tx| Ok(tx.subscription_order(first)?))
        .unwrap()
        .unwrap();
    assert_eq!(ended.status, OrderAttemptStatus::Failed);
    assert_eq!(ended.failure_code.as_deref(), Some("payment_declined"));
    assert_eq!(
        ended.failure_reason.as_deref(),
        Some("the payment was declined")
    );
    assert_eq!(ended.finished_at, Some(at(120)));
    db.write(|tx| Ok(tx.set_order_platform_id(first, "ord-9", at(122))?))
        .unwrap();
    assert_eq!(
        db.read(|tx| Ok(tx.subscription_order(first)?))
            .unwrap()
            .unwrap()
            .platform_order_id
            .as_deref(),
        Some("ord-1"),
        "an ended attempt keeps its platform order"
    );

    let retry = insert(new_attempt(one, shop.id, 100, 2));
    assert_eq!(
        of_date(one, 100),
        [(first, 1, Some("ord-1".to_string())), (retry, 2, None)],
        "the date's attempts, first first, with the platform order"
    );
    assert!(
        db.write(|tx| Ok(tx.finish_subscription_order(retry, &placed, at(130))?))
            .unwrap()
    );
    let done = db
        .read(|tx| Ok(tx.subscription_order(retry)?))
        .unwrap()
        .unwrap();
    assert_eq!(
        (
            done.status,
            done.platform_order_id.as_deref(),
            done.platform_payment_id.as_deref()
        ),
        (OrderAttemptStatus::Placed, Some("ord-1"), Some("pay-1"))
    );

    let placing = || db.read(|tx| Ok(tx.count_placing_orders()?)).unwrap();
    assert_eq!(placing(), 0, "both ended");
    let other = insert(new_attempt(two, shop.id, 100, 1));
    assert_eq!(placing(), 1);
    let stalled = |before| {
        db.read(|tx| Ok(tx.stalled_subscription_orders(at(before), 10)?))
            .unwrap()
            .iter()
            .map(|o| o.id)
            .collect::<Vec<_>>()
    };
    assert_eq!(stalled(111), [other], "placing ones begun before the time");
    assert!(stalled(110).is_empty());
    let recent = db
        .read(|tx| Ok(tx.orders_of_subscriptions(&[one, two], 1)?))
        .unwrap()
        .iter()
        .map(|o| o.id)
        .collect::<Vec<_>>();
    assert_eq!(recent, [retry, other], "the latest of each");
    let all = db
        .read(|tx| Ok(tx.orders_of_subscriptions(&[one], 5)?))
        .unwrap()
        .iter()
        .map(|o| o.id)
        .collect::<Vec<_>>();
    assert_eq!(all, [retry, first], "newest first");
}

fn payment_methods_expiring_are_announced_once(db: &impl Database) {
    let shop = shop(db, "a.shop.test");
    let other = self::shop(db, "b.shop.test");
    let customer = subscriber(db, shop.id, &fields(None, None, None));
    let theirs = subscriber(db, other.id, &fields(None, None, None));
    let with_expiry = |shop_id: i64, customer: (i64, i64), status, expiry: &str| {
        let mut state = plain_state(customer.0, customer.1, status);
        state.payment_method_expires_at = PaymentExpiry::parse(expiry);
        insert_subscription(db, shop_id, &state, 1)
    };
    use SubscriptionStatus::{Active, Inactive, Paused, Scheduled};
    let march = with_expiry(shop.id, customer, Active, "2027-03");
    let february = with_expiry(shop.id, customer, Paused, "2027-02");
    let scheduled = with_expiry(shop.id, customer, Scheduled, "2027-02");
    with_expiry(shop.id, customer, Inactive, "2027-01");
    with_expiry(shop.id, customer, Active, "2027-06");
    with_expiry(other.id, theirs, Active, "2027-01");
    assert_eq!(
        read_subscription(db, shop.id, march)
            .state
            .payment_method_expires_at,
        PaymentExpiry::parse("2027-03"),
        "the month reads back"
    );
    let expiring = |by: &str| {
        db.read(|tx| {
            Ok(tx.expiring_payment_subscriptions(
                shop.id,
                Timestamp::parse_rfc3339(by).unwrap(),
                10,
            )?)
        })
        .unwrap()
    };
    // March 2027 expires at 2027-04-01T00:00Z.
    assert_eq!(
        expiring("2027-04-01T00:00:00Z"),
        [february, scheduled, march],
        "not inactive, this shop's, soonest first"
    );
    assert_eq!(expiring("2027-03-31T23:59:59Z"), [february, scheduled]);
    db.write(|tx| Ok(tx.set_expiring_payment_notified(shop.id, february, Some(at(5)))?))
        .unwrap();
    db.write(|tx| Ok(tx.set_expiring_payment_notified(other.id, march, Some(at(5)))?))
        .unwrap();
    assert_eq!(
        expiring("2027-04-01T00:00:00Z"),
        [scheduled, march],
        "announced once; another shop's call changes nothing"
    );
    db.write(|tx| Ok(tx.set_expiring_payment_notified(shop.id, february, None)?))
        .unwrap();
    assert_eq!(expiring("2027-03-01T00:00:00Z"), [february, scheduled]);
}

/// A product of the catalogue, saved as the platform's event would.
fn catalogue_product(db: &impl Database, shop_id: i64, product: Value, seconds: i64) {
    let body = json!({ "data": { "product": product } });
    let event = parse_event_body(
        shop_id,
        EntityKind::Product,
        EventAction::Saved,
        body.to_string().as_bytes(),
        EventSource::Webhook,
        at(seconds),
    )
    .unwrap();
    db.write(|tx| apply_event(tx, &event, at(seconds))).unwrap();
}

fn the_catalogue_finds_live_variants_by_platform_id(db: &impl Database) {
    let first = shop(db, "a.shop.test");
    let other = shop(db, "b.shop.test");
    let coffee = json!({"platform_id": "prd-1", "platform_updated_at": "2026-11-01T00:00:00Z",
        "name": "Coffee", "variants": [
            {"platform_id": "var-1", "sku": "C-1", "price": "12.50"},
            {"platform_id": "var-2", "sku": "C-2", "price": "20.00"}]});
    catalogue_product(db, first.id, coffee.clone(), 1);
    catalogue_product(db, other.id, coffee, 1);
    let found = |shop_id: i64, ids: &[&str]| {
        let mut found: Vec<(String, String)> = db
            .read(|tx| catalogue::variants(tx, shop_id, ids))
            .unwrap()
            .into_iter()
            .map(|(id, item)| (id, item.variant.sku.unwrap_or_default()))
            .collect();
        found.sort();
        found
    };
    assert_eq!(
        found(first.id, &["var-1", "var-2", "var-9"]),
        [
            ("var-1".into(), "C-1".into()),
            ("var-2".into(), "C-2".into())
        ]
    );
    // A later save without var-2: it is gone; the other shop's catalogue is its own.
    catalogue_product(
        db,
        first.id,
        json!({"platform_id": "prd-1", "platform_updated_at": "2026-11-02T00:00:00Z",
               "variants": [{"platform_id": "var-1", "sku": "C-1", "price": "13.00"}]}),
        2,
    );
    assert_eq!(
        found(first.id, &["var-1", "var-2"]),
        [("var-1".into(), "C-1".into())]
    );
    assert_eq!(
        found(other.id, &["var-2"]),
        [("var-2".into(), "C-2".into())]
    );
    let price = db
        .read(|tx| catalogue::variants(tx, first.id, &["var-1"]))
        .unwrap()["var-1"]
        .variant
        .price
        .clone()
        .unwrap();
    assert_eq!(price.as_str(), "13.00", "the latest save");
    // A deleted product has no variants.
    let deletion = parse_event_body(
        first.id,
        EntityKind::Product,
        EventAction::Deleted,
        json!({"data": {"product": {"platform_id": "prd-1",
                                     "platform_deleted_at": "2026-11-03T00:00:00Z"}}})
        .to_string()
        .as_bytes(),
        EventSource::Webhook,
        at(3),
    )
    .unwrap();
    db.write(|tx| apply_event(tx, &deletion, at(3))).unwrap();
    assert_eq!(found(first.id, &["var-1"]), []);
}

/// `addLineItem` by SKU alone: the live variants of the shop's live products with that SKU,
/// each once, by platform id.
fn the_catalogue_finds_variants_by_sku(db: &impl Database) {
    let first = shop(db, "a.shop.test");
    let other = shop(db, "b.shop.test");
    catalogue_product(
        db,
        first.id,
        json!({"platform_id": "prd-1", "platform_updated_at": "2026-11-01T00:00:00Z",
               "variants": [{"platform_id": "var-1", "sku": "C-1", "price": "12.50"},
                            {"platform_id": "var-2", "sku": "SHARED", "price": "1.00"},
                            {"sku": "NO-ID", "price": "1.00"}]}),
        1,
    );
    catalogue_product(
        db,
        first.id,
        json!({"platform_id": "prd-2", "platform_updated_at": "2026-11-01T00:00:00Z",
               "variants": [{"platform_id": "var-3", "sku": "SHARED", "price": "2.00"}]}),
        1,
    );
    catalogue_product(
        db,
        other.id,
        json!({"platform_id": "prd-9", "platform_updated_at": "2026-11-01T00:00:00Z",
               "variants": [{"platform_id": "var-9", "sku": "C-1", "price": "9.00"}]}),
        1,
    );
    let ids = |shop_id: i64, sku: &str| {
        db.read(|tx| Ok(tx.variant_ids_of_sku(shop_id, sku)?))
            .unwrap()
    };
    assert_eq!(
        ids(first.id, "C-1"),
        ["var-1"],
        "the other shop's is its own"
    );
    assert_eq!(ids(other.id, "C-1"), ["var-9"]);
    assert_eq!(ids(first.id, "SHARED"), ["var-2", "var-3"]);
    assert_eq!(
        ids(first.id, "NO-ID"),
        Vec::<String>::new(),
        "no platform id"
    );
    assert_eq!(ids(first.id, "c-1"), Vec::<String>::new(), "SKUs are exact");
    // A later save moves the SKU; a deleted product has no variants.
    catalogue_product(
        db,
        first.id,
        json!({"platform_id": "prd-1", "platform_updated_at": "2026-11-02T00:00:00Z",
               "variants": [{"platform_id": "var-1", "sku": "C-1B", "price": "12.50"}]}),
        2,
    );
    assert_eq!(ids(first.id, "C-1"), Vec::<String>::new());
    assert_eq!(ids(first.id, "C-1B"), ["var-1"]);
    assert_eq!(ids(first.id, "SHARED"), ["var-3"]);
    let deletion = parse_event_body(
        first.id,
        EntityKind::Product,
        EventAction::Deleted,
        json!({"data": {"product": {"platform_id": "prd-2",
                                     "platform_deleted_at": "2026-11-03T00:00:00Z"}}})
        .to_string()
        .as_bytes(),
        EventSource::Webhook,
        at(3),
    )
    .unwrap();
    db.write(|tx| apply_event(tx, &deletion, at(3))).unwrap();
    assert_eq!(ids(first.id, "SHARED"), Vec::<String>::new());
}

fn a_checkout(shop_id: i64, email: Option<&str>, items: usize, seconds: i64) -> NewCheckoutOrder {
    let mut document = CheckoutDocument::new("USD", "https://x.test/r".into());
    document.customer = email.map(|email| CheckoutCustomer {
        email_address: email.to_string(),
        ..CheckoutCustomer::default()
    });
    for n in 0..items {
        document.line_items.push(CheckoutLineItem {
            line_item_key: format!("k{n}"),
            product_id: "p".into(),
            variant_id: "v".into(),
            title: "T".into(),
            product_title: "T".into(),
            sku: "S".into(),
            barcode: String::new(),
            image_url: String::new(),
            description: String::new(),
            vendor: String::new(),
            tags: String::new(),
            price: Cents(500),
            compare_at_price: Cents(0),
            quantity: 1,
            weight: 0.0,
            weight_unit: "g".into(),
            requires_shipping: true,
            taxable: true,
            properties: Default::default(),
        });
    }
    NewCheckoutOrder {
        shop_id,
        public_order_id: format!("{shop_id:0>16}{seconds:0>16}"),
        document,
        created_at: at(seconds),
    }
}

fn checkout_orders_are_kept_saved_once_per_version_and_swept(db: &impl Database) {
    let first = shop(db, "a.shop.test");
    let other = shop(db, "b.shop.test");
    let insert =
        |new: NewCheckoutOrder| db.write(|tx| Ok(tx.insert_checkout_order(&new)?)).unwrap();
    let order = insert(a_checkout(first.id, Some("ada@example.test"), 2, 10));
    assert_eq!((order.status, order.version), (CheckoutStatus::Open, 1));
    let again = db.write(|tx| Ok(tx.insert_checkout_order(&a_checkout(first.id, None, 0, 10))?));
    assert!(
        matches!(again, Err(DomainError::Storage(ref e)) if e.is_unique_violation()),
        "one public_order_id: {again:?}"
    );
    let read = db
        .read(|tx| Ok(tx.checkout_order(first.id, &order.public_order_id)?))
        .unwrap()
        .unwrap();
    assert_eq!(read, order, "reads back as inserted");
    assert_eq!(
        db.read(|tx| Ok(tx.checkout_order(other.id, &order.public_order_id)?))
            .unwrap(),
        None,
        "another shop's"
    );

    let mut changed = order.clone();
    changed.platform_order_id = Some("ord-7".into());
    changed.status = CheckoutStatus::Created;
    changed.document.is_processed = true;
    changed.updated_at = at(20);
    assert!(
        db.write(|tx| Ok(tx.save_checkout_order(&changed)?))
            .unwrap()
    );
    assert!(
        !db.write(|tx| Ok(tx.save_checkout_order(&changed)?))
            .unwrap(),
        "a save from an older read is refused"
    );
    let saved = db
        .read(|tx| Ok(tx.checkout_order_by_id(order.id)?))
        .unwrap()
        .unwrap();
    assert_eq!(saved.version, 2);
    assert_eq!(saved.status, CheckoutStatus::Created);
    assert!(saved.document.is_processed);
    assert_eq!(
        db.read(|tx| Ok(tx.checkout_order_of_platform_order(first.id, "ord-7")?))
            .unwrap()
            .map(|o| o.id),
        Some(order.id)
    );
    assert_eq!(
        db.read(|tx| Ok(tx.checkout_order_of_platform_order(other.id, "ord-7")?))
            .unwrap(),
        None
    );

    // Abandonment: open, with items and an email, untouched, not reported, emails off.
    let idle = insert(a_checkout(first.id, Some("idle@example.test"), 1, 30));
    insert(a_checkout(first.id, None, 1, 31));
    insert(a_checkout(first.id, Some("empty@example.test"), 0, 32));
    insert(a_checkout(first.id, Some("late@example.test"), 1, 500));
    let theirs = insert(a_checkout(other.id, Some("other@example.test"), 1, 33));
    let swept = |until: i64| {
        db.read(|tx| Ok(tx.abandoned_checkout_orders(at(until), 10)?))
            .unwrap()
            .into_iter()
            .map(|o| o.id)
            .collect::<Vec<_>>()
    };
    assert_eq!(swept(100), Vec::<i64>::new(), "every shop's emails are on");
    for shop in [&first, &other] {
        db.write(|tx| {
            update_shop_settings(
                tx,
                shop.identifier.as_str(),
                ShopSettings {
                    abandoned_cart_emails: Some(false),
                    ..ShopSettings::default()
                },
                at(40),
            )
        })
        .unwrap();
    }
    assert_eq!(
        swept(100),
        [idle.id, theirs.id],
        "the longest untouched first"
    );
    let mut reported = idle.clone();
    reported.abandoned_at = Some(at(101));
    assert!(
        db.write(|tx| Ok(tx.save_checkout_order(&reported)?))
            .unwrap()
    );
    assert_eq!(swept(100), [theirs.id]);
}

repository_suite!(
    subscription_groups_keep_their_rules_in_order_and_by_shop,
    box_resources_round_trip_by_shop_and_deletions_cascade,
    selections_are_a_customers_per_line_item_and_order_date,
    shops_are_found_by_domain_identifier_and_id,
    shop_settings_are_written_to_that_shop_only,
    a_second_shop_with_a_taken_domain_is_refused,
    tokens_are_found_by_hash_until_revoked,
    shared_secrets_are_one_per_shop_and_kind,
    oauth_apps_staff_and_codes,
    destinations_allow_one_live_per_topic,
    applied_customer_addresses_are_keyed_by_id,
    addresses_without_an_id_are_keyed_by_position,
    duplicate_address_ids_keep_the_later_address,
    only_changed_addresses_are_written,
    a_deletion_and_a_newer_save_in_one_batch_leave_the_saved_addresses,
    put_platform_entities_with_a_stale_previous_document,
    entities_of_every_kind_are_held_by_shop_and_platform_id,
    the_event_queue_keeps_order_postpones_sets_aside_and_requeues,
    new_events_take_ids_after_events_set_aside,
    sync_runs_are_one_running_per_shop_and_topic,
    outbox_calls_are_claimed_retried_and_finished,
    the_directory_reads_customers_addresses_and_labels,
    webhook_endpoints_live_and_die,
    webhook_messages_are_claimed_attempted_and_requeued,
    overrides_are_kept_per_shop,
    the_jobs_queue_claims_coalesces_retries_and_requeues,
    a_failed_unit_of_work_leaves_nothing_behind,
    customers_are_read_by_ids_of_their_shop_only,
    a_customer_made_here_has_no_platform_id_until_the_connector_gives_one,
    a_platform_id_another_customer_has_is_refused,
    customers_made_here_are_updated_and_found_by_email_without_case,
    addresses_made_here_keep_one_default,
    an_address_given_its_platform_id_is_the_one_the_platforms_events_update,
    an_address_key_the_customer_has_is_refused,
    a_subscription_reads_back_as_it_was_inserted,
    an_idempotency_key_is_taken_once_per_shop,
    a_saved_subscription_reads_back_with_its_new_state,
    a_line_item_is_rewritten_on_its_own_subscription,
    the_latest_status_log_is_the_last_one_inserted,
    totals_by_status_follow_every_status_change,
    subscriptions_are_listed_by_status_customer_and_filter,
    a_customers_subscriptions_come_in_pages,
    subscription_customers_are_listed_by_status_and_search,
    subscription_summaries_count_and_date_a_customers_subscriptions,
    due_subscriptions_are_found_by_status_date_and_retry_wait,
    order_attempts_are_kept_and_end_once,
    payment_methods_expiring_are_announced_once,
    the_catalogue_finds_live_variants_by_platform_id,
    the_catalogue_finds_variants_by_sku,
    checkout_orders_are_kept_saved_once_per_version_and_swept,
);
