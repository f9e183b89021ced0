//! The platform connector's storage on both real databases: destinations, entities and the
//! event rules, the event queue, syncs, the outbox and the directory's queries.

#![allow(clippy::unwrap_used)] // test code: a panic is a failed assertion

use mercer_domain::access::shop::{Shop, ShopInput, create_shop};
use mercer_domain::directory::{
    DirectoryAddress, DirectoryCustomer, DirectoryQuery, parse_directory_query,
};
use mercer_domain::kernel::ids::ShopId;
use mercer_domain::kernel::ids::{CustomerId, EventId, OutboxCallId};
use mercer_domain::kernel::time::{Clock, SystemClock};
use mercer_domain::platform::destinations::{DestinationSettings, Topic};
use mercer_domain::platform::events::{
    Accepted, EntityKind, EntityWrite, EventAction, EventSource, accept_events, apply_pending,
    event_partition, parse_event, retry_failed_events,
};
use mercer_domain::platform::outbox::{ConnectorCall, OutboxStatus};
use mercer_domain::platform::sync::SyncStatus;
use mercer_domain::ports::Database;
use mercer_domain::{DomainError, StorageError, Timestamp};
use mercer_store::testing::{POISONED_EMAIL, TestDatabase, claim_concurrently};
use mercer_store::{Backend, Store, backend_tests};
use serde_json::{Value, json};

fn at(seconds: i64) -> Timestamp {
    Timestamp::from_micros(1_700_000_000_000_000).plus_seconds(seconds)
}

fn shop(store: &Store, domain: &str) -> Shop {
    store
        .write(|tx| {
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

fn settings(topic: Topic) -> DestinationSettings {
    DestinationSettings {
        topic,
        url: "http://127.0.0.1:9/connector".into(),
        version: "v1".into(),
        timeout_ms: 500,
    }
}

fn destinations_allow_one_live_per_topic(backend: Backend) {
    let (_db, store) = TestDatabase::migrated(backend);
    let shop = shop(&store, "a.shop.test");
    let first = store
        .write(|tx| Ok(tx.insert_destination(shop.id, &settings(Topic::Customers), at(1))?))
        .unwrap();
    assert_eq!(first.timeout_ms, 500);
    let second =
        store.write(|tx| Ok(tx.insert_destination(shop.id, &settings(Topic::Customers), at(2))?));
    let Err(DomainError::Storage(error)) = second else {
        panic!("a second live destination must be refused")
    };
    assert!(error.is_unique_violation());
    store
        .write(|tx| Ok(tx.insert_destination(shop.id, &settings(Topic::Orders), at(2))?))
        .unwrap();
    store
        .write(|tx| Ok(tx.delete_destination(shop.id, first.id, at(3))?))
        .unwrap();
    let again = store
        .write(|tx| Ok(tx.insert_destination(shop.id, &settings(Topic::Customers), at(4))?))
        .unwrap();
    let live = store.read(|tx| Ok(tx.live_destinations(shop.id)?)).unwrap();
    assert_eq!(
        live.iter().map(|d| d.topic).collect::<Vec<_>>(),
        [Topic::Orders, Topic::Customers]
    );
    assert_eq!(live[1].id, again.id);
    let deleted = store
        .read(|tx| Ok(tx.destination(shop.id, first.id)?))
        .unwrap()
        .unwrap();
    assert_eq!(deleted.deleted_at, Some(at(3)));
    let mut changed = settings(Topic::Customers);
    changed.timeout_ms = 30_000;
    store
        .write(|tx| Ok(tx.update_destination(shop.id, again.id, &changed, at(5))?))
        .unwrap();
    let updated = store
        .read(|tx| Ok(tx.live_destination(shop.id, Topic::Customers)?))
        .unwrap()
        .unwrap();
    assert_eq!((updated.timeout_ms, updated.updated_at), (30_000, at(5)));
}

fn customer_event(
    shop_id: ShopId,
    id: &str,
    seconds: i64,
    customer: Value,
) -> mercer_domain::platform::events::NewInboundEvent {
    let mut body = customer;
    body["platform_id"] = json!(id);
    body["platform_updated_at"] = json!(at(seconds).to_rfc3339());
    parse_event(
        shop_id,
        EntityKind::Customer,
        EventAction::Saved,
        &json!({"data": {"customer": body}}),
        EventSource::Webhook,
        // Received when the platform made it (a time ahead of the receiving clock is refused).
        at(seconds),
    )
    .unwrap()
}

fn deleted_event(
    shop_id: ShopId,
    kind: EntityKind,
    id: &str,
    seconds: i64,
) -> mercer_domain::platform::events::NewInboundEvent {
    let body = json!({"data": {kind.as_str(): {"platform_id": id, "platform_deleted_at": at(seconds).to_rfc3339()}}});
    parse_event(
        shop_id,
        kind,
        EventAction::Deleted,
        &body,
        EventSource::Webhook,
        // Received when the platform made it (a time ahead of the receiving clock is refused).
        at(seconds),
    )
    .unwrap()
}

fn address(id: &str, city: &str, default: bool) -> Value {
    json!({"platform_id": id, "first_name": "Ada", "street_1": "1 Main St", "city": city, "postal_code": "69001", "country_code": "FR", "is_default": default})
}

/// The directory's view of a stored customer (which must be there).
fn stored_customer(store: &Store, shop_id: ShopId, platform_id: &str) -> DirectoryCustomer {
    store
        .read(|tx| Ok(tx.directory_customer_by_platform_id(shop_id, platform_id)?))
        .unwrap()
        .expect("the customer is stored")
}

/// A stored customer's addresses, as the directory reads them.
fn stored_addresses(
    store: &Store,
    shop_id: ShopId,
    customer_id: CustomerId,
) -> Vec<DirectoryAddress> {
    store
        .read(|tx| Ok(tx.addresses_of_customers(shop_id, &[customer_id])?))
        .unwrap()
}

fn queue_and_apply(store: &Store, events: Vec<mercer_domain::platform::events::NewInboundEvent>) {
    store
        .write(|tx| Ok(tx.insert_inbound_events(&events)?))
        .unwrap();
    while apply_pending(store, &SystemClock, 100).unwrap().events > 0 {}
}

fn events_are_queued_then_applied_in_order(backend: Backend) {
    let (_db, store) = TestDatabase::migrated(backend);
    let shop = shop(&store, "a.shop.test");
    let events = vec![
        customer_event(
            shop.id,
            "c1",
            30,
            json!({"email": "newest@example.test", "addresses": [address("a1", "Lyon", true), address("a2", "Paris", false)]}),
        ),
        customer_event(shop.id, "c1", 10, json!({"email": "oldest@example.test"})),
        customer_event(
            shop.id,
            "c2",
            10,
            json!({"email": "two@example.test", "first_name": "Grace"}),
        ),
        deleted_event(shop.id, EntityKind::Customer, "c2", 20),
        customer_event(shop.id, "c2", 15, json!({"email": "late@example.test"})),
    ];
    store
        .write(|tx| Ok(tx.insert_inbound_events(&events)?))
        .unwrap();
    assert_eq!(
        store
            .read(|tx| Ok(tx.count_pending_inbound_events()?))
            .unwrap(),
        5
    );
    let pending = store
        .read(|tx| Ok(tx.pending_inbound_events(None, 10, Timestamp::now())?))
        .unwrap();
    assert_eq!(
        pending
            .iter()
            .map(|e| e.as_ref().unwrap().event.clone())
            .collect::<Vec<_>>(),
        events,
        "stored as received, in order"
    );
    assert_eq!(apply_pending(&store, &SystemClock, 3).unwrap().events, 3);
    assert_eq!(apply_pending(&store, &SystemClock, 10).unwrap().events, 2);
    assert_eq!(
        store
            .read(|tx| Ok(tx.count_pending_inbound_events()?))
            .unwrap(),
        0
    );

    let c1 = stored_customer(&store, shop.id, "c1");
    assert_eq!(c1.email.as_deref(), Some("newest@example.test"));
    let addresses = stored_addresses(&store, shop.id, c1.id);
    // Events carry no platform_customer_id on addresses: it is the owning customer's.
    assert!(!addresses.is_empty());
    assert!(
        addresses
            .iter()
            .all(|a| a.platform_customer_id.as_deref() == Some("c1"))
    );
    assert_eq!(
        addresses
            .iter()
            .map(|a| a.city.clone().unwrap())
            .collect::<Vec<_>>(),
        ["Lyon", "Paris"]
    );
    assert!(addresses[0].is_default && !addresses[1].is_default);
    assert_eq!(addresses[0].zip.as_deref(), Some("69001"));
    let c2 = stored_customer(&store, shop.id, "c2");
    assert!(
        c2.deleted_at.is_some(),
        "deleted, and the older save after it was dropped"
    );
}

fn addresses_keep_their_ids_across_saves(backend: Backend) {
    let (_db, store) = TestDatabase::migrated(backend);
    let shop = shop(&store, "a.shop.test");
    queue_and_apply(
        &store,
        vec![customer_event(
            shop.id,
            "c1",
            10,
            json!({"addresses": [address("a1", "Lyon", true), address("a2", "Paris", false)]}),
        )],
    );
    let customer = stored_customer(&store, shop.id, "c1");
    let before = stored_addresses(&store, shop.id, customer.id);
    queue_and_apply(
        &store,
        vec![customer_event(
            shop.id,
            "c1",
            20,
            json!({"addresses": [address("a2", "Marseille", true), address("a3", "Nice", false)]}),
        )],
    );
    let after = stored_addresses(&store, shop.id, customer.id);
    assert_eq!(after.len(), 2, "a1 is gone");
    assert_eq!(after[0].id, before[1].id, "a2 kept its id");
    assert_eq!(after[0].city.as_deref(), Some("Marseille"));
    assert_eq!(after[1].platform_id.as_deref(), Some("a3"));
    // An event without addresses leaves them alone.
    queue_and_apply(
        &store,
        vec![customer_event(
            shop.id,
            "c1",
            30,
            json!({"first_name": "Ada"}),
        )],
    );
    assert_eq!(stored_addresses(&store, shop.id, customer.id).len(), 2);
}

fn accept(
    store: &Store,
    events: Vec<mercer_domain::platform::events::NewInboundEvent>,
    now: Timestamp,
) -> Accepted {
    store.write(|tx| accept_events(tx, &events, now)).unwrap()
}

fn pending(store: &Store) -> i64 {
    store
        .read(|tx| Ok(tx.count_pending_inbound_events()?))
        .unwrap()
}

fn customer_group_memberships_go_with_their_customer_and_group_rows(backend: Backend) {
    let (db, store) = TestDatabase::migrated(backend);
    let shop = shop(&store, "a.shop.test");
    let groups = json!({"groups": [{"platform_id": "g1", "name": "Wholesale"}, {"platform_id": "g2", "name": "VIP"}]});
    queue_and_apply(
        &store,
        vec![
            customer_event(shop.id, "c1", 10, groups.clone()),
            customer_event(shop.id, "c2", 10, groups),
        ],
    );
    let count = |table: &str| db.count(&format!("SELECT count(*) AS n FROM {table}"));
    assert_eq!(
        (count("customer_groups"), count("customer_group_members")),
        (2, 4)
    );
    // Were customers ever deleted for real, their memberships would go with them; the groups
    // stay. A group deleted takes its memberships along.
    db.execute("DELETE FROM platform_customers WHERE platform_id = 'c1'");
    assert_eq!(
        (count("customer_groups"), count("customer_group_members")),
        (2, 2)
    );
    db.execute("DELETE FROM customer_groups WHERE platform_id = 'g1'");
    assert_eq!(
        (count("customer_groups"), count("customer_group_members")),
        (1, 1)
    );
}

fn events_apply_at_once_unless_others_wait(backend: Backend) {
    let (_db, store) = TestDatabase::migrated(backend);
    let shop = shop(&store, "a.shop.test");
    let saved =
        |seconds: i64, email: &str| customer_event(shop.id, "c1", seconds, json!({"email": email}));
    assert_eq!(
        accept(&store, vec![saved(10, "first@example.test")], at(100)),
        Accepted::Applied
    );
    assert_eq!(pending(&store), 0, "nothing queued");
    let email = |store: &Store| stored_customer(store, shop.id, "c1").email;
    assert_eq!(email(&store).as_deref(), Some("first@example.test"));
    // Something waits (a sync's page, say): new events queue behind it, in order.
    store
        .write(|tx| Ok(tx.insert_inbound_events(&[saved(20, "queued@example.test")])?))
        .unwrap();
    assert_eq!(
        accept(&store, vec![saved(15, "older@example.test")], at(200)),
        Accepted::Queued
    );
    assert_eq!(pending(&store), 2);
    assert_eq!(
        email(&store).as_deref(),
        Some("first@example.test"),
        "not applied yet"
    );
    while apply_pending(&store, &SystemClock, 100).unwrap().events > 0 {}
    assert_eq!(
        email(&store).as_deref(),
        Some("queued@example.test"),
        "the older one was dropped"
    );
}

fn only_changed_addresses_are_written(backend: Backend) {
    let (_db, store) = TestDatabase::migrated(backend);
    let shop = shop(&store, "a.shop.test");
    let saved = |seconds: i64, addresses: Value| {
        customer_event(shop.id, "c1", seconds, json!({"addresses": addresses}))
    };
    accept(
        &store,
        vec![saved(
            10,
            json!([address("a1", "Lyon", true), address("a2", "Paris", false)]),
        )],
        at(100),
    );
    let customer_id = stored_customer(&store, shop.id, "c1").id;
    let addresses = |store: &Store| stored_addresses(store, shop.id, customer_id);
    accept(
        &store,
        vec![saved(
            20,
            json!([address("a1", "Nice", true), address("a2", "Paris", false)]),
        )],
        at(200),
    );
    let rows = addresses(&store);
    assert_eq!(rows.len(), 2);
    assert_eq!(
        (rows[0].city.as_deref(), rows[0].updated_at),
        (Some("Nice"), at(200))
    );
    assert_eq!(
        rows[1].updated_at,
        at(100),
        "a2 did not change, so it was not written"
    );
    // Deleted, then back with a2 only: a1 must not come back with it.
    accept(
        &store,
        vec![deleted_event(shop.id, EntityKind::Customer, "c1", 30)],
        at(300),
    );
    accept(
        &store,
        vec![saved(40, json!([address("a2", "Paris", false)]))],
        at(400),
    );
    let rows = addresses(&store);
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0].platform_id.as_deref(), Some("a2"));
}

/// A deletion and a newer save of the same customer in one batch: the store has no previous
/// document to compare with and goes by the stored rows, so the addresses the save leaves out
/// are gone and the one it keeps keeps its id.
fn a_deletion_and_a_newer_save_in_one_batch_leave_the_saved_addresses(backend: Backend) {
    let (_db, store) = TestDatabase::migrated(backend);
    let shop = shop(&store, "a.shop.test");
    accept(
        &store,
        vec![customer_event(
            shop.id,
            "c1",
            10,
            json!({"addresses": [address("a1", "Lyon", true), address("a2", "Paris", false)]}),
        )],
        at(100),
    );
    let customer_id = stored_customer(&store, shop.id, "c1").id;
    let addresses = |store: &Store| stored_addresses(store, shop.id, customer_id);
    let a2_id = addresses(&store)
        .iter()
        .find(|row| row.platform_id.as_deref() == Some("a2"))
        .unwrap()
        .id;
    accept(
        &store,
        vec![
            deleted_event(shop.id, EntityKind::Customer, "c1", 20),
            customer_event(
                shop.id,
                "c1",
                30,
                json!({"addresses": [address("a2", "Nice", false)]}),
            ),
        ],
        at(200),
    );
    let rows = addresses(&store);
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!((rows[0].id, rows[0].city.as_deref()), (a2_id, Some("Nice")));
}

/// Rows believed stored are updated in place; when one is not there after all (the domain's
/// knowledge is stale), the write still lands, by insertion.
fn writes_to_rows_believed_stored_still_land_when_they_are_not(backend: Backend) {
    let (_db, store) = TestDatabase::migrated(backend);
    let shop = shop(&store, "a.shop.test");
    let customer_document = |city: &str| {
        customer_event(
            shop.id,
            "c1",
            10,
            json!({"email": "ada@example.test", "addresses": [address("a1", city, true)]}),
        )
        .document
        .unwrap()
        .entity()
        .clone()
    };
    let now = at(100);
    store
        .write(|tx| {
            let document = customer_document("Lyon");
            tx.put_platform_entities(
                shop.id,
                EntityKind::Customer,
                &[EntityWrite {
                    stored_id: Some(424_242),
                    platform_id: "c1".to_string(),
                    platform_updated_at: Some(at(10)),
                    platform_deleted_at: None,
                    json: Some(document.to_json().unwrap()),
                    document: Some(document),
                    // Says a1 is stored (with another city): it is not.
                    previous: Some(customer_document("Paris")),
                }],
                now,
            )?;
            Ok(())
        })
        .unwrap();
    let customer = stored_customer(&store, shop.id, "c1");
    assert_eq!(customer.email.as_deref(), Some("ada@example.test"));
    let addresses = stored_addresses(&store, shop.id, customer.id);
    assert_eq!(addresses.len(), 1, "{addresses:?}");
    assert_eq!(addresses[0].city.as_deref(), Some("Lyon"));
}

fn orders_products_and_categories_follow_the_same_rules(backend: Backend) {
    let (_db, store) = TestDatabase::migrated(backend);
    let shop = shop(&store, "a.shop.test");
    let event = |kind: EntityKind, seconds: i64, body: Value| {
        let mut body = body;
        body["platform_updated_at"] = json!(at(seconds).to_rfc3339());
        parse_event(
            shop.id,
            kind,
            EventAction::Saved,
            &json!({"data": {kind.as_str(): body}}),
            EventSource::Webhook,
            at(0),
        )
        .unwrap()
    };
    queue_and_apply(
        &store,
        vec![
            event(
                EntityKind::Order,
                10,
                json!({"platform_id": "o1", "fulfillment_status": "unfulfilled", "total": "10.00"}),
            ),
            event(
                EntityKind::Order,
                20,
                json!({"platform_id": "o1", "fulfillment_status": "fulfilled"}),
            ),
            event(
                EntityKind::Product,
                10,
                json!({"platform_id": "p1", "name": "Tea", "variants": [{"platform_id": "v1", "sku": "TEA-1", "price": "4.50"}, {"platform_id": "v2", "sku": "TEA-2"}]}),
            ),
            event(
                EntityKind::Product,
                5,
                json!({"platform_id": "p1", "name": "Old tea"}),
            ),
            event(
                EntityKind::Category,
                10,
                json!({"platform_id": "k1", "name": "Drinks"}),
            ),
            deleted_event(shop.id, EntityKind::Category, "k1", 20),
        ],
    );
    let order = store
        .read(|tx| Ok(tx.platform_entity(shop.id, EntityKind::Order, "o1")?))
        .unwrap()
        .unwrap();
    let document: Value = serde_json::from_str(order.document.as_deref().unwrap()).unwrap();
    assert_eq!(document["fulfillment_status"], "fulfilled");
    assert_eq!(
        document["total"], "10.00",
        "fields the newer event left out stay"
    );
    let product = store
        .read(|tx| Ok(tx.platform_entity(shop.id, EntityKind::Product, "p1")?))
        .unwrap()
        .unwrap();
    let document: Value = serde_json::from_str(product.document.as_deref().unwrap()).unwrap();
    assert_eq!(document["name"], "Tea");
    assert_eq!(document["variants"].as_array().unwrap().len(), 2);
    let category = store
        .read(|tx| Ok(tx.platform_entity(shop.id, EntityKind::Category, "k1")?))
        .unwrap()
        .unwrap();
    assert_eq!(category.platform_deleted_at, Some(at(20)));
}

fn sync_runs_are_one_at_a_time(backend: Backend) {
    let (_db, store) = TestDatabase::migrated(backend);
    let shop = shop(&store, "a.shop.test");
    let run = store
        .write(|tx| Ok(tx.insert_sync_run(shop.id, Topic::Customers, at(1))?))
        .unwrap();
    let Err(DomainError::Storage(error)) =
        store.write(|tx| Ok(tx.insert_sync_run(shop.id, Topic::Customers, at(2))?))
    else {
        panic!("a second running sync must be refused");
    };
    assert!(error.is_unique_violation());
    store
        .write(|tx| Ok(tx.insert_sync_run(shop.id, Topic::Orders, at(2))?))
        .unwrap();
    store
        .write(|tx| Ok(tx.record_sync_page(run.id, 250, 1, Some("p2"), at(3))?))
        .unwrap();
    store
        .write(|tx| Ok(tx.record_sync_page(run.id, 10, 0, None, at(4))?))
        .unwrap();
    store
        .write(|tx| Ok(tx.finish_sync(run.id, SyncStatus::Succeeded, None, at(5))?))
        .unwrap();
    let done = store.read(|tx| Ok(tx.sync_run(run.id)?)).unwrap().unwrap();
    assert_eq!(
        (
            done.status,
            done.pages,
            done.items,
            done.skipped,
            done.finished_at
        ),
        (SyncStatus::Succeeded, 2, 260, 1, Some(at(5)))
    );
    assert!(
        store
            .read(|tx| Ok(tx.running_sync(shop.id, Topic::Customers)?))
            .unwrap()
            .is_none()
    );
    store
        .write(|tx| Ok(tx.insert_sync_run(shop.id, Topic::Customers, at(6))?))
        .unwrap();
}

fn outbox_calls_are_claimed_leased_and_retried(backend: Backend) {
    let (_db, store) = TestDatabase::migrated(backend);
    let shop = shop(&store, "a.shop.test");
    let call = ConnectorCall::DeleteCustomer {
        platform_id: "c1".into(),
    };
    let id = store
        .write(|tx| Ok(tx.insert_outbox_call(shop.id, &call, at(0))?))
        .unwrap();
    assert!(
        store
            .write(|tx| Ok(tx.claim_outbox_calls(shop.id, at(-1), 10, at(100))?))
            .unwrap()
            .is_empty(),
        "not due yet"
    );
    let claimed = store
        .write(|tx| Ok(tx.claim_outbox_calls(shop.id, at(1), 10, at(100))?))
        .unwrap();
    assert_eq!(claimed.len(), 1);
    assert_eq!(claimed[0].call, call);
    assert!(
        store
            .write(|tx| Ok(tx.claim_outbox_calls(shop.id, at(2), 10, at(100))?))
            .unwrap()
            .is_empty(),
        "leased"
    );
    store
        .write(|tx| Ok(tx.retry_outbox_call(id, 1, at(10), "connector answered 500")?))
        .unwrap();
    let again = store
        .write(|tx| Ok(tx.claim_outbox_calls(shop.id, at(10), 10, at(200))?))
        .unwrap();
    assert_eq!(
        (again[0].attempts, again[0].last_error.as_deref()),
        (1, Some("connector answered 500"))
    );
    store
        .write(|tx| Ok(tx.finish_outbox_call(id, OutboxStatus::Delivered, 2, None, at(11))?))
        .unwrap();
    assert!(
        store
            .write(|tx| Ok(tx.claim_outbox_calls(shop.id, at(500), 10, at(600))?))
            .unwrap()
            .is_empty(),
        "delivered calls stay done"
    );
    let entries = store.read(|tx| Ok(tx.outbox_entries(shop.id)?)).unwrap();
    assert_eq!(
        (entries[0].status, entries[0].attempts),
        (OutboxStatus::Delivered, 2)
    );
}

/// Two claimers overlapping in time never take the same call. The second claims while the
/// first one's transaction is still open: on PostgreSQL it skips the rows the first one locked
/// (`SKIP LOCKED`) and gets others at once; on SQLite the first one's write transaction
/// (`BEGIN IMMEDIATE`) makes it wait, and it then sees the first one's lease. Then four claimers
/// drain the rest, each call claimed exactly once.
fn concurrent_claimers_never_share_a_call(backend: Backend) {
    let (_db, store) = TestDatabase::migrated(backend);
    let shop = shop(&store, "a.shop.test");
    for n in 0..60 {
        let call = ConnectorCall::DeleteCustomer {
            platform_id: format!("c{n}"),
        };
        store
            .write(|tx| Ok(tx.insert_outbox_call(shop.id, &call, at(0))?))
            .unwrap();
    }
    let shop_id = shop.id;
    let claim = move |store: &Store, limit: usize| -> Vec<OutboxCallId> {
        store
            .write(|tx| Ok(tx.claim_outbox_calls(shop_id, at(1), limit, at(1000))?))
            .unwrap()
            .into_iter()
            .map(|entry| entry.id)
            .collect()
    };

    let (first_ids, second_ids) = claim_concurrently(backend, &store, move |tx, _| {
        Ok(tx
            .claim_outbox_calls(shop_id, at(1), 5, at(1000))?
            .into_iter()
            .map(|entry| entry.id)
            .collect())
    });
    assert_eq!(first_ids.len(), 5);
    assert_eq!(second_ids.len(), 5);
    assert!(
        second_ids.iter().all(|id| !first_ids.contains(id)),
        "overlapping claims share no call: {first_ids:?} and {second_ids:?}"
    );

    let workers: Vec<_> = (0..4)
        .map(|_| {
            let store = store.clone();
            std::thread::spawn(move || {
                let mut mine = Vec::new();
                // Bounded, so a claim that leases nothing fails the test instead of spinning.
                for _ in 0..60 {
                    let batch = claim(&store, 5);
                    if batch.is_empty() {
                        break;
                    }
                    mine.extend(batch);
                }
                mine
            })
        })
        .collect();
    let mut all: Vec<OutboxCallId> = first_ids.into_iter().chain(second_ids).collect();
    all.extend(workers.into_iter().flat_map(|w| w.join().unwrap()));
    all.sort_unstable();
    let before = all.len();
    all.dedup();
    assert_eq!(
        (before, all.len()),
        (60, 60),
        "every call claimed exactly once"
    );
}

fn directory(store: &Store, shop: &Shop, query: &[(&str, &str)]) -> (Vec<String>, i64) {
    let pairs: Vec<(String, String)> = query
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let query: DirectoryQuery = parse_directory_query(&pairs).unwrap();
    let page = store
        .read(|tx| Ok(tx.list_directory_customers(shop.id, &query)?))
        .unwrap();
    (
        page.customers
            .into_iter()
            .map(|c| c.platform_id.unwrap())
            .collect(),
        page.total,
    )
}

fn the_directory_filters_sorts_and_pages(backend: Backend) {
    let (_db, store) = TestDatabase::migrated(backend);
    let shop = shop(&store, "a.shop.test");
    let other = self::shop(&store, "b.shop.test");
    let people = [
        ("c1", "ada@example.test", "Ada", "Lovelace"),
        ("c2", "grace@navy.test", "Grace", "Hopper"),
        ("c3", "alan@example.test", "alan", "Turing"),
        ("c4", "Barbara@Example.test", "Barbara", "Liskov"),
        ("c5", "edsger@example.test", "Edsger", "Dijkstra"),
    ];
    let events: Vec<_> = people
        .iter()
        .enumerate()
        .map(|(n, (id, email, first, last))| customer_event(shop.id, id, n as i64, json!({"email": email, "first_name": first, "last_name": last, "platform_created_at": at(n as i64 * 100).to_rfc3339()})))
        .chain([customer_event(other.id, "x1", 0, json!({"email": "ada@example.test"}))])
        .chain([deleted_event(shop.id, EntityKind::Customer, "c5", 50)])
        .collect();
    queue_and_apply(&store, events);

    assert_eq!(
        directory(&store, &shop, &[]),
        (vec!["c1".into(), "c2".into(), "c3".into(), "c4".into()], 4),
        "deleted customers and other shops stay out"
    );
    assert_eq!(
        directory(&store, &shop, &[("search", "EXAMPLE")]).1,
        3,
        "search ignores case"
    );
    assert_eq!(directory(&store, &shop, &[("search", "hop")]).0, ["c2"]);
    assert_eq!(
        directory(&store, &shop, &[("search", "%")]).1,
        0,
        "wildcards in a search are literal"
    );
    assert_eq!(
        directory(&store, &shop, &[("orderby", "first_name")]).0,
        ["c1", "c3", "c4", "c2"],
        "names sort ignoring case"
    );
    assert_eq!(
        directory(
            &store,
            &shop,
            &[("orderby", "last_name"), ("orderdirection", "desc")]
        )
        .0,
        ["c3", "c1", "c4", "c2"]
    );
    assert_eq!(
        directory(&store, &shop, &[("orderby", "email")]).0,
        ["c1", "c3", "c4", "c2"]
    );
    let c2_id = stored_customer(&store, shop.id, "c2").id;
    assert_eq!(
        directory(&store, &shop, &[("since_id", &c2_id.to_string())]).0,
        ["c3", "c4"]
    );
    assert_eq!(
        directory(
            &store,
            &shop,
            &[("filter", &format!("gte(id:{c2_id}),lt(id:{})", c2_id.0 + 2))]
        )
        .0,
        ["c2", "c3"]
    );
    assert_eq!(
        directory(&store, &shop, &[("filter", "like(email:%@example.test)")]).0,
        ["c1", "c3", "c4"]
    );
    assert_eq!(
        directory(&store, &shop, &[("filter", "eq(first_name:alan)")]).0,
        ["c3"]
    );
    let cutoff = at(150).to_rfc3339();
    assert_eq!(
        directory(
            &store,
            &shop,
            &[("filter", &format!("lt(platform_created_at:{cutoff})"))]
        )
        .0,
        ["c1", "c2"]
    );
    assert_eq!(
        directory(
            &store,
            &shop,
            &[("ids", &format!("{c2_id},{}", c2_id.0 + 1))]
        )
        .0,
        ["c2", "c3"]
    );
    let page2 = directory(&store, &shop, &[("limit", "3"), ("page", "2")]);
    assert_eq!(page2, (vec!["c4".into()], 4));
    assert_eq!(
        directory(&store, &shop, &[("limit", "3"), ("page", "3")]),
        (vec![], 4)
    );
    let later = Timestamp::now().plus_seconds(60).to_rfc3339();
    assert_eq!(directory(&store, &shop, &[("updated_at_min", &later)]).1, 0);
    assert_eq!(directory(&store, &shop, &[("updated_at_max", &later)]).1, 4);

    let c1 = stored_customer(&store, shop.id, "c1");
    let vip = store
        .write(|tx| Ok(tx.insert_label(shop.id, c1.id, "vip", at(1))?))
        .unwrap();
    store
        .write(|tx| Ok(tx.insert_label(shop.id, c2_id, "vip", at(1))?))
        .unwrap();
    assert_eq!(
        directory(&store, &shop, &[("label", "vip")]).0,
        ["c1", "c2"]
    );
    assert!(
        store
            .write(|tx| Ok(tx.delete_label(shop.id, c1.id, vip.id, at(2))?))
            .unwrap()
    );
    assert!(
        !store
            .write(|tx| Ok(tx.delete_label(shop.id, c1.id, vip.id, at(3))?))
            .unwrap()
    );
    assert_eq!(directory(&store, &shop, &[("label", "vip")]).0, ["c2"]);
}

/// A partition's lock is one transaction's at a time, other partitions stay free, and it ends
/// with its transaction (SQLite has one applying process: every lock is taken).
fn a_partition_lock_is_exclusive_and_partitions_are_apart(backend: Backend) {
    let (_db, store) = TestDatabase::migrated(backend);
    let (held_tx, held_rx) = std::sync::mpsc::channel();
    let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
    let holder = {
        let store = store.clone();
        std::thread::spawn(move || {
            store
                .write(|tx| {
                    assert!(tx.lock_event_partition(3)?);
                    held_tx.send(()).unwrap();
                    release_rx.recv().unwrap();
                    Ok(())
                })
                .unwrap();
        })
    };
    held_rx.recv().unwrap();
    if backend == Backend::Postgres {
        assert!(
            !store.write(|tx| Ok(tx.lock_event_partition(3)?)).unwrap(),
            "another transaction holds partition 3"
        );
        assert!(
            store.write(|tx| Ok(tx.lock_event_partition(4)?)).unwrap(),
            "partition 4 is free"
        );
    }
    release_tx.send(()).unwrap();
    holder.join().unwrap();
    assert!(
        store.write(|tx| Ok(tx.lock_event_partition(3)?)).unwrap(),
        "released with its transaction"
    );
}

/// Two appliers on one database: while one holds a shop's partition mid-batch, the other
/// applies the other shops' events and leaves that shop's alone; when the first dies (its
/// transaction rolls back), its partition is taken over and nothing is lost. PostgreSQL only:
/// on SQLite one process applies, and every partition lock is its own.
#[test]
fn a_held_partition_is_left_alone_and_taken_over_when_its_holder_dies() {
    let (_db, store) = TestDatabase::migrated(Backend::Postgres);
    let mut shops = Vec::new();
    while shops.len() < 2 {
        let made = shop(&store, &format!("s{}.shop.test", shops.len()));
        shops.push(made);
    }
    let (held, other) = (&shops[0], &shops[1]);
    assert_ne!(event_partition(held.id), event_partition(other.id));
    let events: Vec<_> = shops
        .iter()
        .flat_map(|shop| {
            [10, 20].map(|seconds| {
                let email = format!("{}-{seconds}@example.test", shop.id);
                customer_event(shop.id, "c1", seconds, json!({"email": email}))
            })
        })
        .collect();
    store
        .write(|tx| Ok(tx.insert_inbound_events(&events)?))
        .unwrap();
    let (locked_tx, locked_rx) = std::sync::mpsc::channel();
    let (die_tx, die_rx) = std::sync::mpsc::channel::<()>();
    let holder = {
        let (store, partition) = (store.clone(), event_partition(held.id));
        std::thread::spawn(move || {
            let died: Result<(), DomainError> = store.write(|tx| {
                assert!(tx.lock_event_partition(partition)?);
                locked_tx.send(()).unwrap();
                die_rx.recv().unwrap();
                Err(DomainError::Storage(StorageError::other(
                    "the process died",
                )))
            });
            assert!(died.is_err());
        })
    };
    locked_rx.recv().unwrap();
    let batch = apply_pending(&store, &SystemClock, 100).unwrap();
    assert_eq!(
        (batch.events, batch.held_elsewhere),
        (2, true),
        "the other shop's two events, and word of the held partition"
    );
    let email = |shop: &Shop| {
        store
            .read(|tx| Ok(tx.directory_customer_by_platform_id(shop.id, "c1")?))
            .unwrap()
            .and_then(|customer| customer.email)
    };
    assert_eq!(email(other), Some(format!("{}-20@example.test", other.id)));
    assert_eq!(email(held), None, "left to the partition's holder");
    die_tx.send(()).unwrap();
    holder.join().unwrap();
    let batch = apply_pending(&store, &SystemClock, 100).unwrap();
    assert_eq!((batch.events, batch.held_elsewhere), (2, false));
    assert_eq!(email(held), Some(format!("{}-20@example.test", held.id)));
}

/// The ingest writer's queueing: every event in order, or none when one of them cannot be
/// stored, whether the batch fits in one INSERT (PostgreSQL: run without a transaction) or not.
fn queued_batches_are_stored_whole_or_not_at_all(backend: Backend) {
    let (_db, store) = TestDatabase::migrated(backend);
    let shop = shop(&store, "a.shop.test");
    let pending = || {
        store
            .read(|tx| Ok(tx.count_pending_inbound_events()?))
            .unwrap()
    };
    let batch =
        |count: usize, first: usize| -> Vec<mercer_domain::platform::events::NewInboundEvent> {
            (first..first + count)
                .map(|n| customer_event(shop.id, &format!("c{n}"), n as i64, json!({})))
                .collect()
        };
    // No shop 999999: the foreign key refuses this event.
    let unstorable = customer_event(ShopId(999_999), "nobody", 1, json!({}));

    let small = batch(3, 0);
    store.queue_inbound_events(&small).unwrap();
    let stored = store
        .read(|tx| Ok(tx.pending_inbound_events(None, 10, Timestamp::now())?))
        .unwrap();
    assert_eq!(
        stored
            .into_iter()
            .map(|e| e.unwrap().event)
            .collect::<Vec<_>>(),
        small
    );

    let mut refused = batch(2, 10);
    refused.push(unstorable.clone());
    assert!(store.queue_inbound_events(&refused).is_err());
    assert_eq!(pending(), 3, "a refused small batch leaves nothing behind");

    // More events than one INSERT holds, the unstorable one last (in the last INSERT).
    let mut large = batch(1_500, 100);
    assert!(store.queue_inbound_events(&large).is_ok());
    assert_eq!(pending(), 1_503);
    large.push(unstorable);
    assert!(store.queue_inbound_events(&large).is_err());
    assert_eq!(
        pending(),
        1_503,
        "a refused large batch leaves nothing behind"
    );
}

/// A clock the test moves by hand.
struct TestClock(std::sync::Mutex<Timestamp>);

impl TestClock {
    fn advance(&self, seconds: i64) {
        let mut now = self.0.lock().unwrap();
        *now = now.plus_seconds(seconds);
    }
}

impl Clock for TestClock {
    fn now(&self) -> Timestamp {
        *self.0.lock().unwrap()
    }
}

fn an_event_that_fails_to_apply_is_retried_then_set_aside_while_the_queue_goes_on(
    backend: Backend,
) {
    let (db, store) = TestDatabase::migrated(backend);
    let (a, b) = (shop(&store, "a.shop.test"), shop(&store, "b.shop.test"));
    db.fail_customer_writes();
    let clock = TestClock(std::sync::Mutex::new(Timestamp::now()));
    let events = vec![
        customer_event(a.id, "c1", 10, json!({"email": "one@example.test"})),
        customer_event(a.id, "p", 10, json!({"email": POISONED_EMAIL})),
        customer_event(a.id, "c2", 10, json!({"email": "two@example.test"})),
        customer_event(b.id, "c3", 10, json!({"email": "three@example.test"})),
    ];
    store
        .write(|tx| Ok(tx.insert_inbound_events(&events)?))
        .unwrap();

    // The batch fails; one at a time, c1 applies and the poisoned event fails its first attempt.
    assert_eq!(apply_pending(&store, &clock, 10).unwrap().events, 2);
    assert_eq!(
        stored_customer(&store, a.id, "c1").email.as_deref(),
        Some("one@example.test")
    );
    // The poisoned entity's later save applies by the out-of-sequence rule.
    let later = customer_event(a.id, "p", 20, json!({"email": "cured@example.test"}));
    store
        .write(|tx| Ok(tx.insert_inbound_events(&[later])?))
        .unwrap();
    // The events behind it apply, of both shops, while it waits for its retry.
    assert_eq!(apply_pending(&store, &clock, 10).unwrap().events, 3);
    assert_eq!(
        stored_customer(&store, b.id, "c3").email.as_deref(),
        Some("three@example.test")
    );
    assert_eq!(
        stored_customer(&store, a.id, "p").email.as_deref(),
        Some("cured@example.test")
    );
    assert_eq!(pending(&store), 1, "the failed event waits for its retry");
    assert_eq!(
        apply_pending(&store, &clock, 10).unwrap().events,
        0,
        "not due yet"
    );

    // Tried again after 1 s, it is older than the save applied meanwhile: skipped, not failed.
    clock.advance(1);
    assert_eq!(apply_pending(&store, &clock, 10).unwrap().events, 1);
    assert_eq!(pending(&store), 0);
    assert_eq!(
        stored_customer(&store, a.id, "p").email.as_deref(),
        Some("cured@example.test")
    );

    // An event with no later save fails its three attempts (again after 1 s, then 4 s) and is
    // set aside.
    let stuck = customer_event(b.id, "q", 10, json!({"email": POISONED_EMAIL}));
    store
        .write(|tx| Ok(tx.insert_inbound_events(std::slice::from_ref(&stuck))?))
        .unwrap();
    assert_eq!(apply_pending(&store, &clock, 10).unwrap().events, 1);
    clock.advance(1);
    assert_eq!(apply_pending(&store, &clock, 10).unwrap().events, 1);
    assert_eq!(pending(&store), 1);
    clock.advance(3);
    assert_eq!(
        apply_pending(&store, &clock, 10).unwrap().events,
        0,
        "not due yet"
    );
    clock.advance(1);
    assert_eq!(apply_pending(&store, &clock, 10).unwrap().events, 1);
    assert_eq!(pending(&store), 0);
    let failed = store
        .read(|tx| Ok(tx.failed_inbound_events(None, 10)?))
        .unwrap();
    assert_eq!(failed.len(), 1);
    assert_eq!(
        (
            failed[0].shop_id,
            failed[0].kind.as_str(),
            failed[0].action.as_str()
        ),
        (b.id, "customer", "saved")
    );
    assert_eq!(failed[0].platform_id, stuck.platform_id);
    assert_eq!(failed[0].attempts, 3);
    assert!(
        failed[0].error.contains("forced failure"),
        "{}",
        failed[0].error
    );
    assert_eq!(
        store
            .read(|tx| Ok(tx.count_failed_inbound_events()?))
            .unwrap(),
        1
    );

    // An unknown id is refused and changes nothing; the known one goes back under its id.
    assert!(matches!(
        retry_failed_events(&store, Some(&[failed[0].id, EventId(999_999)])),
        Err(DomainError::NotFound { .. })
    ));
    assert_eq!(
        store
            .read(|tx| Ok(tx.count_failed_inbound_events()?))
            .unwrap(),
        1
    );
    db.heal_customer_writes();
    assert_eq!(
        retry_failed_events(&store, None).unwrap(),
        vec![failed[0].id]
    );
    let queued = store
        .read(|tx| Ok(tx.pending_inbound_events(None, 10, clock.now())?))
        .unwrap();
    let queued = queued[0].as_ref().unwrap();
    assert_eq!(
        (queued.id, queued.attempts, &queued.event),
        (failed[0].id, 0, &stuck)
    );
    assert_eq!(apply_pending(&store, &clock, 10).unwrap().events, 1);
    assert_eq!(
        stored_customer(&store, b.id, "q").email.as_deref(),
        Some(POISONED_EMAIL)
    );
    assert_eq!(
        store
            .read(|tx| Ok(tx.count_failed_inbound_events()?))
            .unwrap(),
        0
    );
    assert!(retry_failed_events(&store, None).unwrap().is_empty());
}

fn an_unreadable_outbox_call_is_failed_and_the_others_are_claimed(backend: Backend) {
    let (db, store) = TestDatabase::migrated(backend);
    let shop = shop(&store, "a.shop.test");
    let call = |id: &str| ConnectorCall::DeleteCustomer {
        platform_id: id.into(),
    };
    let ids: Vec<OutboxCallId> = ["c1", "c2", "c3"]
        .iter()
        .map(|id| {
            store
                .write(|tx| Ok(tx.insert_outbox_call(shop.id, &call(id), at(0))?))
                .unwrap()
        })
        .collect();
    db.execute(&format!(
        "UPDATE connector_outbox SET call = 'not a call' WHERE id = {}",
        ids[1]
    ));
    let claimed = store
        .write(|tx| Ok(tx.claim_outbox_calls(shop.id, at(1), 10, at(100))?))
        .unwrap();
    assert_eq!(
        claimed.iter().map(|entry| entry.id).collect::<Vec<_>>(),
        vec![ids[0], ids[2]]
    );
    // Failed, it is never claimed again (after the lease, the other two are).
    let again = store
        .write(|tx| Ok(tx.claim_outbox_calls(shop.id, at(200), 10, at(300))?))
        .unwrap();
    assert_eq!(
        again.iter().map(|entry| entry.id).collect::<Vec<_>>(),
        vec![ids[0], ids[2]]
    );
}

fn an_unreadable_queued_event_is_set_aside_and_the_others_apply(backend: Backend) {
    let (db, store) = TestDatabase::migrated(backend);
    let shop = shop(&store, "a.shop.test");
    let events: Vec<_> = ["c1", "c2", "c3"]
        .iter()
        .map(|id| customer_event(shop.id, id, 10, json!({"email": format!("{id}@x.test")})))
        .collect();
    store
        .write(|tx| Ok(tx.insert_inbound_events(&events)?))
        .unwrap();
    db.execute("UPDATE inbound_events SET entity = 'gadget' WHERE platform_id = 'c2'");
    assert_eq!(apply_pending(&store, &SystemClock, 10).unwrap().events, 3);
    assert_eq!(pending(&store), 0);
    for id in ["c1", "c3"] {
        assert_eq!(
            stored_customer(&store, shop.id, id).email,
            Some(format!("{id}@x.test"))
        );
    }
    let failed = store
        .read(|tx| Ok(tx.failed_inbound_events(None, 10)?))
        .unwrap();
    assert_eq!(failed.len(), 1);
    assert_eq!(
        (failed[0].kind.as_str(), failed[0].platform_id.as_str()),
        ("gadget", "c2")
    );
    assert!(
        failed[0].error.starts_with("unreadable: "),
        "{}",
        failed[0].error
    );
}

backend_tests!(
    an_unreadable_queued_event_is_set_aside_and_the_others_apply,
    an_unreadable_outbox_call_is_failed_and_the_others_are_claimed,
    an_event_that_fails_to_apply_is_retried_then_set_aside_while_the_queue_goes_on,
    destinations_allow_one_live_per_topic,
    events_are_queued_then_applied_in_order,
    queued_batches_are_stored_whole_or_not_at_all,
    addresses_keep_their_ids_across_saves,
    customer_group_memberships_go_with_their_customer_and_group_rows,
    events_apply_at_once_unless_others_wait,
    only_changed_addresses_are_written,
    writes_to_rows_believed_stored_still_land_when_they_are_not,
    a_deletion_and_a_newer_save_in_one_batch_leave_the_saved_addresses,
    orders_products_and_categories_follow_the_same_rules,
    sync_runs_are_one_at_a_time,
    outbox_calls_are_claimed_leased_and_retried,
    concurrent_claimers_never_share_a_call,
    the_directory_filters_sorts_and_pages,
    a_partition_lock_is_exclusive_and_partitions_are_apart,
);
