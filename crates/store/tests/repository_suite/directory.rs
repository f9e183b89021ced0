//! The customer directory: customers, addresses and labels.

use mercer_domain::directory::parse_directory_query;
use mercer_domain::kernel::ids::CustomerId;
use mercer_domain::platform::events::EntityKind;
use mercer_domain::ports::Database;
use serde_json::json;

use crate::platform::{accept, address, customer_event, deleted_event, stored_customer};
use crate::{at, shop};

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
    let mut listed: Vec<CustomerId> = page.customers.iter().map(|c| c.id).collect();
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
every_database!(the_directory_reads_customers_addresses_and_labels);
