//! The platform: destinations, entities and their addresses, the event queue, syncs and the
//! connector outbox, the catalogue.

use mercer_domain::access::credentials::Secret;
use mercer_domain::access::shop::Shop;
use mercer_domain::directory::{DirectoryAddress, DirectoryCustomer};
use mercer_domain::kernel::ids::ShopId;
use mercer_domain::kernel::ids::{CustomerId, EventId};
use mercer_domain::kernel::jobs::JobPayload;
use mercer_domain::platform::catalogue;
use mercer_domain::platform::destinations::{DestinationSettings, Topic};
use mercer_domain::platform::events::{
    CustomerChangedJob, CustomerContact, EntityKind, EntityWrite, EventAction, EventSource,
    NewInboundEvent, Outcome, accept_events, apply_event, event_partition, parse_event,
    parse_event_body,
};
use mercer_domain::platform::outbox::{ConnectorCall, OutboxStatus};
use mercer_domain::platform::sync::SyncStatus;
use mercer_domain::ports::Database;
use mercer_domain::webhooks::{NewWebhookEndpoint, WebhookKind};
use mercer_domain::{DomainError, Timestamp};
use serde_json::{Value, json};

use crate::{at, shop};

// --- platform: destinations ----------------------------------------------------------------

pub(crate) fn settings(topic: Topic) -> DestinationSettings {
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
        db.read(|tx| Ok(tx.destination(ShopId(shop.id.0 + 1), first.id)?))
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
every_database!(destinations_allow_one_live_per_topic);

// --- platform: entities and addresses --------------------------------------------------------

pub(crate) fn customer_event(
    shop_id: ShopId,
    id: &str,
    seconds: i64,
    customer: Value,
) -> NewInboundEvent {
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

pub(crate) fn deleted_event(
    shop_id: ShopId,
    kind: EntityKind,
    id: &str,
    seconds: i64,
) -> NewInboundEvent {
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
    shop_id: ShopId,
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

pub(crate) fn address(id: Option<&str>, city: &str, default: bool) -> Value {
    let mut address = json!({"first_name": "Ada", "street_1": "1 Main St", "city": city, "postal_code": "69001", "country_code": "FR", "is_default": default});
    if let Some(id) = id {
        address["platform_id"] = json!(id);
    }
    address
}

/// Applies events at once, as the receiving route does when nothing waits.
pub(crate) fn accept(db: &impl Database, events: Vec<NewInboundEvent>, now: Timestamp) {
    db.write(|tx| accept_events(tx, &events, now)).unwrap();
}

pub(crate) fn stored_customer(
    db: &impl Database,
    shop_id: ShopId,
    platform_id: &str,
) -> DirectoryCustomer {
    db.read(|tx| Ok(tx.directory_customer_by_platform_id(shop_id, platform_id)?))
        .unwrap()
        .expect("the customer is stored")
}

pub(crate) fn stored_addresses(
    db: &impl Database,
    shop_id: ShopId,
    customer_id: CustomerId,
) -> Vec<DirectoryAddress> {
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
every_database!(applied_customer_addresses_are_keyed_by_id);

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
every_database!(addresses_without_an_id_are_keyed_by_position);

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
every_database!(duplicate_address_ids_keep_the_later_address);

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
every_database!(only_changed_addresses_are_written);

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
every_database!(a_deletion_and_a_newer_save_in_one_batch_leave_the_saved_addresses);

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
    assert_eq!(record.id, customer.id.0);
    assert_eq!(
        (record.platform_updated_at, record.platform_deleted_at),
        (Some(at(10)), None)
    );
    assert!(record.document.unwrap().contains("ada@example.test"));
}
every_database!(put_platform_entities_with_a_stale_previous_document);

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
every_database!(entities_of_every_kind_are_held_by_shop_and_platform_id);

// --- platform: customers made through the subscription API ----------------------------------

/// What the applier tells a change of a customer made through the subscription API against,
/// before the platform's document of it is held: its row's name, email and phone, by platform
/// id (empty is none), for the shop's live customers only.
fn customer_contacts_are_what_the_customer_rows_show(db: &impl Database) {
    let other = shop(db, "b.shop.test");
    let shop = shop(db, "a.shop.test");
    let fields = crate::subscriptions::fields(Some("ada@example.test"), Some("Ada"), None);
    let made = db
        .write(|tx| Ok(tx.insert_customer(shop.id, &fields, at(1))?))
        .unwrap();
    assert!(
        db.write(|tx| Ok(tx.set_customer_platform_id(shop.id, made, "c1", at(2))?))
            .unwrap()
    );
    let no_id = crate::subscriptions::fields(Some("nobody@example.test"), None, None);
    db.write(|tx| Ok(tx.insert_customer(shop.id, &no_id, at(1))?))
        .unwrap();
    accept(
        db,
        vec![
            customer_event(
                shop.id,
                "c2",
                10,
                json!({"email": "grace@example.test", "first_name": "Grace", "last_name": "",
                    "phone": "+1 613 555 0100"}),
            ),
            customer_event(shop.id, "c3", 10, json!({"email": "gone@example.test"})),
            deleted_event(shop.id, EntityKind::Customer, "c3", 20),
            customer_event(other.id, "c1", 10, json!({"email": "other@example.test"})),
        ],
        at(30),
    );
    let contact = |first: Option<&str>, email: &str, phone: Option<&str>| CustomerContact {
        first_name: first.map(str::to_string),
        last_name: None,
        email: Some(email.to_string()),
        phone: phone.map(str::to_string),
    };
    let mut contacts = db
        .read(|tx| Ok(tx.customer_contacts(shop.id, &["c1", "c2", "c3", "c9"])?))
        .unwrap();
    contacts.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(
        contacts,
        [
            (
                "c1".to_string(),
                contact(Some("Ada"), "ada@example.test", None)
            ),
            (
                "c2".to_string(),
                contact(Some("Grace"), "grace@example.test", Some("+1 613 555 0100"))
            ),
        ],
        "unknown and deleted ones are left out, another shop's is not read"
    );
    assert!(
        db.read(|tx| Ok(tx.customer_contacts(shop.id, &[])?))
            .unwrap()
            .is_empty()
    );
}
every_database!(customer_contacts_are_what_the_customer_rows_show);

/// A subscriber made through the subscription API and created on the platform, renamed there
/// before the platform's echo of its creation arrives: the change of what the subscription API
/// shows is announced (a `platform.customer_changed` job); an echo that shows the same is not.
fn a_platform_change_of_a_customer_made_here_is_told_against_its_row(db: &impl Database) {
    let shop = shop(db, "a.shop.test");
    db.write(|tx| {
        Ok(tx.insert_webhook_endpoint(&NewWebhookEndpoint {
            shop_id: shop.id,
            kind: WebhookKind::Subscription,
            topic: "customer_updated".into(),
            callback_url: "http://127.0.0.1:9/hook".into(),
            secret: Some(Secret::new("endpoint-secret")),
            created_at: at(1),
        })?)
    })
    .unwrap();
    for (email, platform_id) in [("ada@example.test", "c1"), ("bob@example.test", "c2")] {
        let fields = crate::subscriptions::fields(Some(email), Some("Ada"), None);
        let id = db
            .write(|tx| Ok(tx.insert_customer(shop.id, &fields, at(1))?))
            .unwrap();
        db.write(|tx| Ok(tx.set_customer_platform_id(shop.id, id, platform_id, at(2))?))
            .unwrap();
    }
    accept(
        db,
        vec![
            customer_event(
                shop.id,
                "c1",
                10,
                json!({"email": "ada@example.test", "first_name": "Augusta"}),
            ),
            customer_event(
                shop.id,
                "c2",
                10,
                json!({"email": "bob@example.test", "first_name": "Ada"}),
            ),
        ],
        at(30),
    );
    let announced: Vec<String> = db
        .read(|tx| Ok(tx.list_jobs(None, 100)?))
        .unwrap()
        .iter()
        .filter(|job| job.kind == CustomerChangedJob::KIND)
        .map(|job| {
            job.payload::<CustomerChangedJob>()
                .unwrap()
                .platform_customer_id
        })
        .collect();
    assert_eq!(announced, ["c1"]);
    assert_eq!(
        stored_customer(db, shop.id, "c1").first_name.as_deref(),
        Some("Augusta")
    );
}
every_database!(a_platform_change_of_a_customer_made_here_is_told_against_its_row);

// --- platform: the event queue --------------------------------------------------------------

fn queued(db: &impl Database, now: Timestamp) -> Vec<(EventId, String, i64)> {
    db.read(|tx| Ok(tx.pending_inbound_events(None, 100, now)?))
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
        .read(|tx| Ok(tx.pending_inbound_events(None, 10, at(0))?))
        .unwrap();
    assert_eq!(
        stored
            .iter()
            .map(|e| e.as_ref().unwrap().event.clone())
            .collect::<Vec<_>>(),
        events,
        "stored as received, in order"
    );
    let ids: Vec<EventId> = queued(db, at(0)).iter().map(|(id, _, _)| *id).collect();
    assert!(ids.windows(2).all(|pair| pair[0] < pair[1]));
    assert_eq!(
        db.read(|tx| Ok(tx.pending_inbound_events(None, 2, at(0))?))
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
    assert!(
        db.write(|tx| Ok(tx.lock_event_partition(event_partition(shop.id))?))
            .unwrap()
    );

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
    let failed = db
        .read(|tx| Ok(tx.failed_inbound_events(None, 10)?))
        .unwrap();
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
        .write(|tx| Ok(tx.requeue_failed_inbound_events(None, Some(&[ids[2]]))?))
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
        .write(|tx| Ok(tx.requeue_failed_inbound_events(None, None)?))
        .unwrap();
    assert_eq!(all, [ids[3]]);
    assert_eq!(
        db.read(|tx| Ok(tx.count_failed_inbound_events()?)).unwrap(),
        0
    );
    let requeued = db
        .read(|tx| Ok(tx.pending_inbound_events(None, 10, at(60))?))
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
every_database!(the_event_queue_keeps_order_postpones_sets_aside_and_requeues);

fn new_events_take_ids_after_events_set_aside(db: &impl Database) {
    let shop = shop(db, "a.shop.test");
    let event = |id: &str| customer_event(shop.id, id, 10, json!({}));
    db.write(|tx| Ok(tx.insert_inbound_events(&[event("c1"), event("c2")])?))
        .unwrap();
    let ids: Vec<EventId> = queued(db, at(0)).iter().map(|(id, _, _)| *id).collect();
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
    db.write(|tx| Ok(tx.requeue_failed_inbound_events(None, None)?))
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
every_database!(new_events_take_ids_after_events_set_aside);

/// An applier looks at the queue's oldest shops first, then takes the events of the shops
/// whose partitions it holds: each shop's in arrival order, other shops' left alone.
fn the_queue_names_its_oldest_shops_and_gives_the_events_of_some(db: &impl Database) {
    let (a, b, c) = (
        shop(db, "a.shop.test"),
        shop(db, "b.shop.test"),
        shop(db, "c.shop.test"),
    );
    let event = |shop: &Shop, id: &str| customer_event(shop.id, id, 10, json!({}));
    let events = [
        event(&b, "b1"),
        event(&a, "a1"),
        event(&b, "b2"),
        event(&c, "c1"),
        event(&a, "a2"),
    ];
    db.write(|tx| Ok(tx.insert_inbound_events(&events)?))
        .unwrap();
    let shops = |limit| {
        db.read(|tx| Ok(tx.pending_event_shops(limit, at(0))?))
            .unwrap()
    };
    assert_eq!(
        shops(10),
        [b.id, a.id, c.id],
        "each once, by its first event"
    );
    assert_eq!(shops(2), [b.id, a.id], "within the oldest `limit` events");
    let of = |wanted: &[ShopId], limit| -> Vec<String> {
        db.read(|tx| Ok(tx.pending_inbound_events(Some(wanted), limit, at(0))?))
            .unwrap()
            .into_iter()
            .map(|event| event.unwrap().event.platform_id)
            .collect()
    };
    assert_eq!(of(&[a.id, c.id], 10), ["a1", "c1", "a2"]);
    assert_eq!(of(&[b.id], 1), ["b1"]);
    assert!(of(&[], 10).is_empty());
}
every_database!(the_queue_names_its_oldest_shops_and_gives_the_events_of_some);

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
every_database!(sync_runs_are_one_running_per_shop_and_topic);

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
every_database!(outbox_calls_are_claimed_retried_and_finished);

// --- platform: the catalogue -----------------------------------------------------------------

/// A product of the catalogue, saved as the platform's event would.
fn catalogue_product(db: &impl Database, shop_id: ShopId, product: Value, seconds: i64) {
    // Received when the platform made it: a time ahead of the receiving clock is refused.
    let made = product["platform_updated_at"]
        .as_str()
        .and_then(Timestamp::parse_rfc3339)
        .unwrap_or(at(seconds));
    let body = json!({ "data": { "product": product } });
    let event = parse_event_body(
        shop_id,
        EntityKind::Product,
        EventAction::Saved,
        body.to_string().as_bytes(),
        EventSource::Webhook,
        made,
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
    let found = |shop_id: ShopId, ids: &[&str]| {
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
        // Received when the platform deleted it.
        Timestamp::parse_rfc3339("2026-11-03T00:00:00Z").unwrap(),
    )
    .unwrap();
    db.write(|tx| apply_event(tx, &deletion, at(3))).unwrap();
    assert_eq!(found(first.id, &["var-1"]), []);
}
every_database!(the_catalogue_finds_live_variants_by_platform_id);

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
    let ids = |shop_id: ShopId, sku: &str| {
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
        // Received when the platform deleted it.
        Timestamp::parse_rfc3339("2026-11-03T00:00:00Z").unwrap(),
    )
    .unwrap();
    db.write(|tx| apply_event(tx, &deletion, at(3))).unwrap();
    assert_eq!(ids(first.id, "SHARED"), Vec::<String>::new());
}
every_database!(the_catalogue_finds_variants_by_sku);
