//! The customer directory: customers, addresses, labels and customer groups.

use mercer_domain::directory::{
    get_customer_by_platform_id, list_customers, parse_directory_query,
};
use mercer_domain::kernel::ids::{CustomerGroupId, CustomerId};
use mercer_domain::platform::customer_groups::NewCustomerGroup;
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

fn group(platform_id: &str, name: Option<&str>) -> NewCustomerGroup {
    NewCustomerGroup {
        platform_id: platform_id.to_string(),
        name: name.map(str::to_string),
    }
}

fn customer_groups_are_the_shops_renamed_in_place_and_read_by_customer(db: &impl Database) {
    let shop = shop(db, "a.shop.test");
    let other = self::shop(db, "b.shop.test");
    accept(
        db,
        vec![
            customer_event(shop.id, "c1", 10, json!({})),
            customer_event(shop.id, "c2", 10, json!({})),
            customer_event(other.id, "c1", 10, json!({})),
        ],
        at(100),
    );
    let (c1, c2) = (
        stored_customer(db, shop.id, "c1").id,
        stored_customer(db, shop.id, "c2").id,
    );
    let theirs = stored_customer(db, other.id, "c1").id;
    let mut ids = db
        .read(|tx| Ok(tx.customer_ids(shop.id, &["c2", "c1", "unknown"])?))
        .unwrap();
    ids.sort();
    assert_eq!(ids, [("c1".to_string(), c1), ("c2".to_string(), c2)]);

    let added = db
        .write(|tx| {
            Ok(tx.put_customer_groups(
                shop.id,
                &[group("g1", Some("Wholesale")), group("g2", None)],
                at(200),
            )?)
        })
        .unwrap();
    let id_of = |list: &[(String, CustomerGroupId)], platform_id: &str| {
        list.iter()
            .find(|(id, _)| id == platform_id)
            .map(|(_, id)| *id)
            .expect("the group's id is answered")
    };
    let (g1, g2) = (id_of(&added, "g1"), id_of(&added, "g2"));
    assert_ne!(g1, g2);
    let theirs_added = db
        .write(|tx| {
            Ok(tx.put_customer_groups(other.id, &[group("g1", Some("Theirs"))], at(200))?)
        })
        .unwrap();
    let their_g1 = id_of(&theirs_added, "g1");
    assert_ne!(their_g1, g1, "a group is the shop's");

    // Known ones keep their ids: renamed when the name given differs, left alone without one.
    let again = db
        .write(|tx| {
            Ok(tx.put_customer_groups(
                shop.id,
                &[
                    group("g2", Some("VIP")),
                    group("g1", None),
                    group("g3", Some("Staff")),
                ],
                at(300),
            )?)
        })
        .unwrap();
    assert_eq!((id_of(&again, "g1"), id_of(&again, "g2")), (g1, g2));
    let g3 = id_of(&again, "g3");
    db.write(|tx| {
        Ok(tx.put_customer_groups(shop.id, &[group("g1", Some("Wholesale"))], at(400))?)
    })
    .unwrap();

    db.write(|tx| {
        tx.set_customer_groups(shop.id, &[(c1, vec![g3, g1, g2]), (c2, vec![g2])])?;
        tx.set_customer_groups(other.id, &[(theirs, vec![their_g1])])?;
        Ok(())
    })
    .unwrap();
    let read = |customers: &[CustomerId]| {
        db.read(|tx| Ok(tx.groups_of_customers(shop.id, customers)?))
            .unwrap()
            .into_iter()
            .map(|m| {
                (
                    m.customer_id,
                    m.id,
                    m.platform_id,
                    m.name,
                    m.created_at,
                    m.updated_at,
                )
            })
            .collect::<Vec<_>>()
    };
    let row = |customer, id, platform_id: &str, name: &str, created, updated| {
        (
            customer,
            id,
            platform_id.to_string(),
            name.to_string(),
            created,
            updated,
        )
    };
    assert_eq!(
        read(&[c2, c1, theirs]),
        [
            row(c1, g1, "g1", "Wholesale", at(200), at(200)),
            row(c1, g2, "g2", "VIP", at(200), at(300)),
            row(c1, g3, "g3", "Staff", at(300), at(300)),
            row(c2, g2, "g2", "VIP", at(200), at(300)),
        ],
        "by customer then group id, this shop's only; the same name again changes nothing"
    );
    assert!(read(&[]).is_empty());

    // A customer's list replaces its memberships; customers not given keep theirs.
    db.write(|tx| Ok(tx.set_customer_groups(shop.id, &[(c1, vec![g2])])?))
        .unwrap();
    assert_eq!(
        read(&[c1, c2]),
        [
            row(c1, g2, "g2", "VIP", at(200), at(300)),
            row(c2, g2, "g2", "VIP", at(200), at(300)),
        ]
    );
    db.write(|tx| Ok(tx.set_customer_groups(shop.id, &[(c2, vec![]), (c1, vec![g2, g1])])?))
        .unwrap();
    assert_eq!(
        read(&[c1, c2]),
        [
            row(c1, g1, "g1", "Wholesale", at(200), at(200)),
            row(c1, g2, "g2", "VIP", at(200), at(300)),
        ]
    );
    assert_eq!(
        db.read(|tx| Ok(tx.groups_of_customers(other.id, &[theirs])?))
            .unwrap()
            .into_iter()
            .map(|m| (m.id, m.name))
            .collect::<Vec<_>>(),
        [(their_g1, "Theirs".to_string())]
    );
}
every_database!(customer_groups_are_the_shops_renamed_in_place_and_read_by_customer);

/// (platform id, name) of the customer's groups, as the directory answers them.
fn groups_shown(
    db: &impl Database,
    shop: &mercer_domain::access::shop::Shop,
    customer: &str,
) -> Vec<(String, String)> {
    db.read(|tx| get_customer_by_platform_id(tx, shop, customer))
        .unwrap()
        .groups
        .into_iter()
        .map(|g| (g.platform_id, g.name))
        .collect()
}

fn customer_saved_events_give_the_directory_its_groups(db: &impl Database) {
    let shop = shop(db, "a.shop.test");
    let named = |list: &[(&str, &str)]| {
        list.iter()
            .map(|(id, name)| (id.to_string(), name.to_string()))
            .collect::<Vec<_>>()
    };
    accept(
        db,
        vec![
            customer_event(
                shop.id,
                "c1",
                10,
                json!({"groups": [{"platform_id": "g1", "name": "Wholesale"}, {"platform_id": "g2", "name": "VIP"}]}),
            ),
            customer_event(
                shop.id,
                "c2",
                10,
                json!({"groups": [{"platform_id": "g2", "name": "VIP"}]}),
            ),
        ],
        at(100),
    );
    assert_eq!(
        groups_shown(db, &shop, "c1"),
        named(&[("g2", "VIP"), ("g1", "Wholesale")])
    );
    // Left out: unchanged. Given: the whole list, and the newest name.
    accept(
        db,
        vec![
            customer_event(shop.id, "c1", 20, json!({"email": "ada@example.test"})),
            customer_event(
                shop.id,
                "c2",
                20,
                json!({"groups": [{"platform_id": "g1", "name": "Trade"}]}),
            ),
        ],
        at(200),
    );
    assert_eq!(
        groups_shown(db, &shop, "c1"),
        named(&[("g1", "Trade"), ("g2", "VIP")])
    );
    assert_eq!(groups_shown(db, &shop, "c2"), named(&[("g1", "Trade")]));
    // A stale event changes nothing; an empty list empties the customer's groups.
    accept(
        db,
        vec![
            customer_event(shop.id, "c1", 15, json!({"groups": []})),
            customer_event(shop.id, "c2", 30, json!({"groups": []})),
        ],
        at(300),
    );
    assert_eq!(
        groups_shown(db, &shop, "c1"),
        named(&[("g1", "Trade"), ("g2", "VIP")])
    );
    let query = parse_directory_query(&[]).unwrap();
    let page = db.read(|tx| list_customers(tx, &shop, &query)).unwrap();
    let mut listed: Vec<(String, usize)> = page
        .customers
        .iter()
        .map(|c| (c.platform_id.string_value.clone(), c.groups.len()))
        .collect();
    listed.sort();
    assert_eq!(listed, [("c1".to_string(), 2), ("c2".to_string(), 0)]);
}
every_database!(customer_saved_events_give_the_directory_its_groups);
