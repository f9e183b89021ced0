//! The store against both real databases: every storage port, transactions and migrations.

#![allow(clippy::unwrap_used)] // test code: a panic is a failed assertion

use mercer_domain::access::credentials::{
    NewApiToken, ScopeSet, Secret, TokenSource, hash_token, mint_token,
};
use mercer_domain::access::secrets::{SecretKind, SharedSecret, rotate_secret};
use mercer_domain::access::shop::{ShopInput, bootstrap_demo, create_shop};
use mercer_domain::kernel::ids::ShopId;
use mercer_domain::ports::Database;
use mercer_domain::{DomainError, Timestamp};
use mercer_store::testing::TestDatabase;
use mercer_store::{Backend, DatabaseUrl, Store, backend_tests};

fn now() -> Timestamp {
    Timestamp::from_micros(1_700_000_000_000_000)
}

fn shop_input(domain: &str) -> ShopInput {
    ShopInput {
        shop_domain: domain.to_string(),
        ..ShopInput::default()
    }
}

fn migrations_apply_once(backend: Backend) {
    let database = TestDatabase::create(backend);
    let store = database.open_store();
    let applied = store.migrate().unwrap();
    assert!(!applied.is_empty(), "a fresh database gets every migration");
    assert!(
        store.migrate().unwrap().is_empty(),
        "a second run applies nothing"
    );
    store.ping().unwrap();
}

fn shops_round_trip(backend: Backend) {
    let (_db, store) = TestDatabase::migrated(backend);
    let created = store
        .write(|tx| create_shop(tx, shop_input("a.shop.test"), now()))
        .unwrap();
    assert!(created.id > ShopId(0));
    let found = store
        .read(|tx| Ok(tx.shop_by_identifier(&created.identifier)?))
        .unwrap()
        .unwrap();
    assert_eq!(found, created);
    assert_eq!(found.created_at, now());
    let by_domain = store
        .read(|tx| Ok(tx.shop_by_domain("a.shop.test")?))
        .unwrap();
    assert_eq!(by_domain.map(|s| s.id), Some(created.id));
    store
        .write(|tx| create_shop(tx, shop_input("b.shop.test"), now()))
        .unwrap();
    assert_eq!(store.read(|tx| Ok(tx.count_shops()?)).unwrap(), 2);
    let domains: Vec<String> = store
        .read(|tx| Ok(tx.list_shops()?))
        .unwrap()
        .into_iter()
        .map(|s| s.shop_domain)
        .collect();
    assert_eq!(domains, ["a.shop.test", "b.shop.test"]);
}

fn duplicate_domains_are_refused_by_the_database_too(backend: Backend) {
    let (_db, store) = TestDatabase::migrated(backend);
    let first = shop_input("a.shop.test").validate(now()).unwrap();
    let mut second = shop_input("a.shop.test").validate(now()).unwrap();
    second.identifier = mercer_domain::access::shop::ShopIdentifier::generate();
    store.write(|tx| Ok(tx.insert_shop(&first)?)).unwrap();
    let clash = store.write(|tx| Ok(tx.insert_shop(&second)?));
    let Err(DomainError::Storage(error)) = clash else {
        panic!("expected a storage error, got {clash:?}");
    };
    assert!(error.is_unique_violation(), "{error}");
    assert_eq!(store.read(|tx| Ok(tx.count_shops()?)).unwrap(), 1);
}

fn tokens_are_found_by_hash_until_revoked(backend: Backend) {
    let (_db, store) = TestDatabase::migrated(backend);
    let shop = store
        .write(|tx| create_shop(tx, shop_input("a.shop.test"), now()))
        .unwrap();
    let scopes = ScopeSet::parse("read_orders write_customers").unwrap();
    let (secret, record) = mint_token(shop.id, "ci", scopes.clone(), TokenSource::Cli, now());
    let stored = store.write(|tx| Ok(tx.insert_token(&record)?)).unwrap();
    assert_eq!(stored.scopes, scopes);
    assert_eq!(stored.source, TokenSource::Cli);
    assert_eq!(stored.revoked_at, None);

    let found = store
        .read(|tx| Ok(tx.active_token_by_hash(&hash_token(secret.expose()))?))
        .unwrap();
    assert_eq!(found.as_ref().map(|t| t.id), Some(stored.id));
    let plain = store
        .read(|tx| Ok(tx.active_token_by_hash(secret.expose())?))
        .unwrap();
    assert!(plain.is_none(), "the token itself is not what is stored");

    assert!(
        store
            .write(|tx| Ok(tx.revoke_token(ShopId(shop.id.0 + 1), stored.id, now())?))
            .map(|changed| !changed)
            .unwrap(),
        "another shop cannot revoke the token"
    );
    assert!(
        store
            .write(|tx| Ok(tx.revoke_token(shop.id, stored.id, now())?))
            .unwrap()
    );
    assert!(
        !store
            .write(|tx| Ok(tx.revoke_token(shop.id, stored.id, now())?))
            .unwrap()
    );
    let gone = store
        .read(|tx| Ok(tx.active_token_by_hash(&hash_token(secret.expose()))?))
        .unwrap();
    assert!(gone.is_none());
    let listed = store.read(|tx| Ok(tx.tokens_of_shop(shop.id)?)).unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].revoked_at, Some(now()));
}

fn foreign_keys_are_enforced(backend: Backend) {
    let (_db, store) = TestDatabase::migrated(backend);
    let orphan = NewApiToken {
        shop_id: ShopId(999),
        name: "orphan".into(),
        token_hash: hash_token("x"),
        token_prefix: "mct_x".into(),
        scopes: ScopeSet::all(),
        source: TokenSource::Cli,
        created_at: now(),
    };
    assert!(store.write(|tx| Ok(tx.insert_token(&orphan)?)).is_err());
}

fn shared_secrets_upsert_and_rotate(backend: Backend) {
    let (_db, store) = TestDatabase::migrated(backend);
    let shop = store
        .write(|tx| create_shop(tx, shop_input("a.shop.test"), now()))
        .unwrap();
    let first = store
        .write(|tx| rotate_secret(tx, shop.id, SecretKind::Connector, now()))
        .unwrap()
        .current;
    let later = now().plus_seconds(10);
    let second = store
        .write(|tx| rotate_secret(tx, shop.id, SecretKind::Connector, later))
        .unwrap()
        .current;
    let stored: SharedSecret = store
        .read(|tx| Ok(tx.shared_secret(shop.id, SecretKind::Connector)?))
        .unwrap()
        .unwrap();
    assert_eq!(stored.current, second);
    assert_eq!(stored.previous, Some(first.clone()));
    assert_eq!(
        stored.previous_valid_until,
        Some(later.plus_seconds(24 * 3600))
    );
    assert_eq!(stored.created_at, now());
    assert_eq!(stored.updated_at, later);
    let other_kind = store
        .read(|tx| Ok(tx.shared_secret(shop.id, SecretKind::CheckoutIntegration)?))
        .unwrap();
    assert!(other_kind.is_none());
    assert_ne!(first, Secret::new(""));
}

fn a_failed_unit_of_work_leaves_nothing_behind(backend: Backend) {
    let (_db, store) = TestDatabase::migrated(backend);
    let result: Result<(), DomainError> = store.write(|tx| {
        create_shop(tx, shop_input("a.shop.test"), now())?;
        Err(DomainError::not_found("anything"))
    });
    assert!(result.is_err());
    assert_eq!(store.read(|tx| Ok(tx.count_shops()?)).unwrap(), 0);
    // The connection went back to the pool clean: the next unit of work commits.
    store
        .write(|tx| create_shop(tx, shop_input("b.shop.test"), now()))
        .unwrap();
    assert_eq!(store.read(|tx| Ok(tx.count_shops()?)).unwrap(), 1);
}

fn a_panicking_unit_of_work_does_not_poison_the_pool(backend: Backend) {
    let (_db, store) = TestDatabase::migrated(backend);
    let panicking = store.clone();
    let outcome = std::thread::spawn(move || {
        let _: Result<(), DomainError> = panicking.write(|tx| {
            create_shop(tx, shop_input("a.shop.test"), now())?;
            panic!("work panicked inside its transaction");
        });
    })
    .join();
    assert!(outcome.is_err());
    for i in 0..6 {
        store
            .write(|tx| create_shop(tx, shop_input(&format!("s{i}.shop.test")), now()))
            .unwrap();
    }
    assert_eq!(store.read(|tx| Ok(tx.count_shops()?)).unwrap(), 6);
}

fn concurrent_writers_all_land(backend: Backend) {
    let (_db, store) = TestDatabase::migrated(backend);
    let threads: Vec<_> = (0..6)
        .map(|t| {
            let store = store.clone();
            std::thread::spawn(move || {
                for i in 0..15 {
                    // Read then write in one transaction: the pattern that needs BEGIN IMMEDIATE on SQLite.
                    store
                        .write(|tx| {
                            tx.count_shops()?;
                            create_shop(tx, shop_input(&format!("t{t}-{i}.shop.test")), now())
                        })
                        .unwrap();
                }
            })
        })
        .collect();
    for thread in threads {
        thread.join().unwrap();
    }
    assert_eq!(store.read(|tx| Ok(tx.count_shops()?)).unwrap(), 90);
}

fn processes_starting_together_make_one_demo(backend: Backend) {
    let (_db, store) = TestDatabase::migrated(backend);
    let barrier = std::sync::Arc::new(std::sync::Barrier::new(4));
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let store = store.clone();
            let barrier = barrier.clone();
            std::thread::spawn(move || {
                barrier.wait();
                store
                    .write(|tx| bootstrap_demo(tx, now()))
                    .map(|demo| demo.is_some())
            })
        })
        .collect();
    let made: Vec<bool> = threads
        .into_iter()
        .map(|t| t.join().unwrap().unwrap())
        .collect();
    assert_eq!(made.iter().filter(|made| **made).count(), 1, "{made:?}");
    assert_eq!(store.read(|tx| Ok(tx.count_shops()?)).unwrap(), 1);
}

backend_tests!(
    processes_starting_together_make_one_demo,
    migrations_apply_once,
    shops_round_trip,
    duplicate_domains_are_refused_by_the_database_too,
    tokens_are_found_by_hash_until_revoked,
    foreign_keys_are_enforced,
    shared_secrets_upsert_and_rotate,
    a_failed_unit_of_work_leaves_nothing_behind,
    a_panicking_unit_of_work_does_not_poison_the_pool,
    concurrent_writers_all_land,
);

#[test]
fn sqlite_runs_in_wal_mode() {
    let (database, store) = TestDatabase::migrated(Backend::Sqlite);
    store
        .write(|tx| create_shop(tx, shop_input("a.shop.test"), now()))
        .unwrap();
    let DatabaseUrl::Sqlite { path } = database.url() else {
        unreachable!()
    };
    assert!(
        std::path::Path::new(&format!("{path}-wal")).exists(),
        "WAL file next to the database"
    );
}

/// Committing leaves pages in the WAL (the committing connection does not checkpoint a small
/// WAL); `checkpoint` copies them back into the database file.
#[test]
fn sqlite_checkpoints_copy_the_wal_back_when_asked() {
    let (database, store) = TestDatabase::migrated(Backend::Sqlite);
    let DatabaseUrl::Sqlite { path } = database.url() else {
        unreachable!()
    };
    let size = || std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
    let before = size();
    for n in 0..200 {
        store
            .write(|tx| create_shop(tx, shop_input(&format!("shop{n}.test")), now()))
            .unwrap();
    }
    assert_eq!(size(), before, "commits stay in the WAL");
    store.checkpoint().unwrap();
    assert!(size() > before, "{} bytes, was {before}", size());
}

#[test]
fn opening_an_unreachable_server_fails_with_a_redacted_url() {
    let url = DatabaseUrl::parse("postgres://mercer:topsecret@127.0.0.1:1/mercer").unwrap();
    let options = mercer_store::PoolOptions {
        max_connections: 1,
        connection_timeout: std::time::Duration::from_millis(300),
    };
    let Err(error) = Store::open(&url, &options) else {
        panic!("nothing listens on port 1");
    };
    let message = error.to_string();
    assert!(message.contains("127.0.0.1:1"), "{message}");
    assert!(!message.contains("topsecret"), "{message}");
}
