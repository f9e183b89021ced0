//! Subscriptions: customers and addresses made here, subscriptions, their groups, line items,
//! status log, lists and summaries.

use mercer_domain::directory::parse_directory_query;
use mercer_domain::kernel::ids::ShopId;
use mercer_domain::kernel::ids::{
    AddressId, BillingRuleId, CustomerId, GroupId, LineItemId, SubscriptionId,
};
use mercer_domain::platform::customer_groups::NewCustomerGroup;
use mercer_domain::platform::events::EntityKind;
use mercer_domain::platform::outbox::{record_address_platform_id, record_customer_platform_id};
use mercer_domain::platform::resources::CustomerAddress;
use mercer_domain::ports::Database;
use mercer_domain::subscriptions::cancellation::{Cancellation, CancellationReason};
use mercer_domain::subscriptions::groups::{BillingRule, GroupProduct, IntervalType, StoredGroup};
use mercer_domain::subscriptions::imports::{ImportFigures, ImportStatus};
use mercer_domain::subscriptions::pausing::AutoResume;
use mercer_domain::subscriptions::query::{Cursor, ListQuery, parse_filters};
use mercer_domain::subscriptions::repository::{
    CustomerFields, CustomerListQuery, CustomerStatus, StoredAddress, StoredSubscription,
    SubscriptionState, SummaryFigures,
};
use mercer_domain::subscriptions::resources::{
    Actor, ActorType, Cents, CurrencyCode, FailureDetails, LineItemAttribute, LineItemDiscount,
    PaymentExpiry, PrepaidMetadata, ShippingLine, SubscriptionLineItem, SubscriptionStatus,
};
use mercer_domain::subscriptions::states::NewStatusLog;
use mercer_domain::{DomainError, StorageError};
use serde_json::json;

use crate::platform::{
    accept, address, customer_event, deleted_event, stored_addresses, stored_customer,
};
use crate::{assert_taken, at, shop};

// --- subscriptions: customers and addresses made here -----------------------------------------

pub(crate) fn fields(
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

fn new_customer(
    db: &impl Database,
    shop_id: ShopId,
    fields: &CustomerFields,
    seconds: i64,
) -> CustomerId {
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
    shop_id: ShopId,
    customer_id: CustomerId,
    city: &str,
    is_default: bool,
    seconds: i64,
) -> AddressId {
    db.write(|tx| {
        Ok(tx.insert_address(shop_id, customer_id, &postal(city), is_default, at(seconds))?)
    })
    .unwrap()
}

fn addresses_by_ids(db: &impl Database, shop_id: ShopId, ids: &[AddressId]) -> Vec<StoredAddress> {
    db.read(|tx| Ok(tx.addresses_by_ids(shop_id, ids)?))
        .unwrap()
}

/// The ids of the customer's live addresses that are the default, from the directory.
fn defaults(db: &impl Database, shop_id: ShopId, customer_id: CustomerId) -> Vec<AddressId> {
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
            Ok(tx.directory_customers_by_ids(
                shop.id,
                &[first, theirs, second, CustomerId(second.0 + 1000)],
            )?)
        })
        .unwrap();
    let mut expected = vec![first, second];
    expected.sort_unstable();
    let ids: Vec<CustomerId> = found.iter().map(|customer| customer.id).collect();
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
every_database!(customers_are_read_by_ids_of_their_shop_only);

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
                tx.set_customer_platform_id(shop.id, CustomerId(id.0 + 1000), "c3", at(21))?,
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
    assert_eq!(
        (record.id, record.platform_updated_at),
        (id.0, Some(at(30)))
    );
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
every_database!(a_customer_made_here_has_no_platform_id_until_the_connector_gives_one);

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
every_database!(a_platform_id_another_customer_has_is_refused);

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
    let by_email = |shop_id: ShopId, email: &str| {
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
                tx.update_customer(shop.id, CustomerId(first.0 + 1000), &changed, at(200))?,
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
    let gone = stored_customer(db, shop.id, "c2").id.0;
    assert!(
        !db.write(|tx| Ok(tx.update_customer(shop.id, CustomerId(gone), &changed, at(300))?))
            .unwrap()
    );
}
every_database!(customers_made_here_are_updated_and_found_by_email_without_case);

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
    let update = |shop_id: ShopId,
                  customer_id: CustomerId,
                  id: AddressId,
                  city: &str,
                  default: bool,
                  seconds| {
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
    assert!(!update(
        shop.id,
        customer,
        AddressId(paris.0 + 1000),
        "Nice",
        false,
        32
    ));

    // Deleted: gone from the directory, still read by id; the others' flags untouched.
    let delete = |customer_id: CustomerId, id: AddressId, seconds| {
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
every_database!(addresses_made_here_keep_one_default);

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
                tx.set_address_platform_id(ShopId(shop.id.0 + 1000), lyon, "a1", at(20))?,
                tx.set_address_platform_id(shop.id, lyon, "a1", at(20))?,
                tx.set_address_platform_id(shop.id, lyon, "a9", at(21))?,
                tx.set_address_platform_id(shop.id, AddressId(paris.0 + 1000), "a2", at(21))?,
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
every_database!(an_address_given_its_platform_id_is_the_one_the_platforms_events_update);

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
    let customer = stored_customer(db, shop.id, "c1").id.0;
    let made = new_address(db, shop.id, CustomerId(customer), "Paris", false, 110);
    assert_eq!(stored_addresses(db, shop.id, CustomerId(customer)).len(), 2);
    assert_taken(db.write(|tx| Ok(tx.set_address_platform_id(shop.id, made, "a1", at(120))?)));
    assert_eq!(
        db.read(|tx| Ok(tx.address_platform_id(shop.id, made)?))
            .unwrap(),
        None
    );
}
every_database!(an_address_key_the_customer_has_is_refused);

/// (id, platform id, city, default) of the customer's live addresses, by id.
fn live_addresses(
    db: &impl Database,
    shop_id: ShopId,
    customer_id: CustomerId,
) -> Vec<(AddressId, Option<String>, Option<String>, bool)> {
    stored_addresses(db, shop_id, customer_id)
        .into_iter()
        .map(|a| (a.id, a.platform_id, a.city, a.is_default))
        .collect()
}

fn an_address_the_platforms_event_made_first_is_merged_into_the_one_made_here(db: &impl Database) {
    let shop = shop(db, "a.shop.test");
    let customer = new_customer(
        db,
        shop.id,
        &fields(Some("ada@example.test"), None, None),
        10,
    );
    let lyon = new_address(db, shop.id, customer, "Lyon", true, 11);
    assert!(
        db.write(|tx| Ok(tx.set_customer_platform_id(shop.id, customer, "c1", at(12))?))
            .unwrap()
    );
    // The platform created lyon as a1 and pushed the customer's event before the connector's
    // answer was recorded: a row of its own for a1 (and lyon, not in the document, gone).
    accept(
        db,
        vec![customer_event(
            shop.id,
            "c1",
            20,
            json!({"email": "ada@example.test", "addresses": [address(Some("a1"), "Lyon", true)]}),
        )],
        at(200),
    );
    let rows = live_addresses(db, shop.id, customer);
    assert_eq!(rows.len(), 1);
    let platform_row = rows[0].0;
    assert_ne!(platform_row, lyon);
    // A subscription made meanwhile ships to the platform's row.
    let state = SubscriptionState {
        shipping_address_id: platform_row,
        ..plain_state(customer, lyon, SubscriptionStatus::Active)
    };
    let subscription = insert_subscription(db, shop.id, &state, 30);
    assert_taken(db.write(|tx| Ok(tx.set_address_platform_id(shop.id, lyon, "a1", at(40))?)));

    assert!(
        db.write(|tx| record_address_platform_id(tx, shop.id, lyon, "a1", at(40)))
            .unwrap()
    );
    assert_eq!(
        live_addresses(db, shop.id, customer),
        [(lyon, Some("a1".into()), Some("Lyon".into()), true)],
        "one row for a1: the one made here"
    );
    let kept = &addresses_by_ids(db, shop.id, &[lyon])[0];
    assert_eq!(
        (kept.created_at, kept.updated_at, kept.deleted_at),
        (at(11), at(40), None)
    );
    let merged = &addresses_by_ids(db, shop.id, &[platform_row])[0];
    assert_eq!(
        (merged.platform_id.as_deref(), merged.deleted_at),
        (None, Some(at(40)))
    );
    let state = read_subscription(db, shop.id, subscription).state;
    assert_eq!(
        (state.billing_address_id, state.shipping_address_id),
        (lyon, lyon)
    );
    assert_eq!(
        db.read(|tx| Ok(tx.address_platform_id(shop.id, lyon)?))
            .unwrap()
            .as_deref(),
        Some("a1")
    );
    assert!(
        !db.write(|tx| record_address_platform_id(tx, shop.id, lyon, "a1", at(50)))
            .unwrap(),
        "recorded already"
    );

    // The platform's next event rewrites the row made here.
    accept(
        db,
        vec![customer_event(
            shop.id,
            "c1",
            60,
            json!({"email": "ada@example.test", "addresses": [address(Some("a1"), "Grenoble", true)]}),
        )],
        at(600),
    );
    assert_eq!(
        live_addresses(db, shop.id, customer),
        [(lyon, Some("a1".into()), Some("Grenoble".into()), true)]
    );
}
every_database!(an_address_the_platforms_event_made_first_is_merged_into_the_one_made_here);

fn an_address_recorded_before_the_platforms_event_has_nothing_to_merge(db: &impl Database) {
    let shop = shop(db, "a.shop.test");
    let customer = new_customer(
        db,
        shop.id,
        &fields(Some("ada@example.test"), None, None),
        10,
    );
    let lyon = new_address(db, shop.id, customer, "Lyon", true, 11);
    db.write(|tx| Ok(tx.set_customer_platform_id(shop.id, customer, "c1", at(12))?))
        .unwrap();
    assert!(
        db.write(|tx| record_address_platform_id(tx, shop.id, lyon, "a1", at(20)))
            .unwrap()
    );
    accept(
        db,
        vec![customer_event(
            shop.id,
            "c1",
            30,
            json!({"email": "ada@example.test", "addresses": [address(Some("a1"), "Lyon", true)]}),
        )],
        at(300),
    );
    assert_eq!(
        live_addresses(db, shop.id, customer),
        [(lyon, Some("a1".into()), Some("Lyon".into()), true)]
    );
}
every_database!(an_address_recorded_before_the_platforms_event_has_nothing_to_merge);

fn a_customer_the_platforms_event_made_first_is_merged_into_the_one_made_here(db: &impl Database) {
    let shop = shop(db, "a.shop.test");
    let made_fields = CustomerFields {
        notes: Some("leave at the door".into()),
        ..fields(Some("ada@example.test"), Some("Ada"), None)
    };
    let made = new_customer(db, shop.id, &made_fields, 10);
    let lyon = new_address(db, shop.id, made, "Lyon", true, 11);
    let subscription = insert_subscription(
        db,
        shop.id,
        &plain_state(made, lyon, SubscriptionStatus::Active),
        12,
    );
    // The platform created the customer as c1 and pushed its event before the connector's
    // answer was recorded: a customer row of its own.
    accept(
        db,
        vec![customer_event(
            shop.id,
            "c1",
            20,
            json!({"email": "ada@example.test", "first_name": "Augusta",
                "addresses": [address(Some("a9"), "Paris", false)]}),
        )],
        at(200),
    );
    let platform_row = stored_customer(db, shop.id, "c1").id;
    assert_ne!(platform_row, made);
    let paris = live_addresses(db, shop.id, platform_row)[0].0;
    // Meanwhile: labels, a group and a subscription on the platform's row.
    let theirs = insert_subscription(
        db,
        shop.id,
        &plain_state(platform_row, paris, SubscriptionStatus::Active),
        30,
    );
    db.write(|tx| {
        tx.insert_label(shop.id, platform_row, "vip", at(31))?;
        tx.insert_label(shop.id, platform_row, "gold", at(31))?;
        tx.insert_label(shop.id, made, "gold", at(31))?;
        let group = NewCustomerGroup {
            platform_id: "g1".into(),
            name: Some("Wholesale".into()),
        };
        let groups = tx.put_customer_groups(shop.id, &[group], at(31))?;
        tx.set_customer_groups(shop.id, &[(platform_row, vec![groups[0].1])])?;
        Ok(())
    })
    .unwrap();
    assert_taken(db.write(|tx| Ok(tx.set_customer_platform_id(shop.id, made, "c1", at(40))?)));

    assert!(
        db.write(|tx| record_customer_platform_id(tx, shop.id, made, "c1", at(40)))
            .unwrap()
    );
    let customer = stored_customer(db, shop.id, "c1");
    assert_eq!(customer.id, made, "one customer for c1: the one made here");
    assert_eq!(
        (
            customer.first_name.as_deref(),
            customer.created_at,
            customer.updated_at,
            customer.deleted_at
        ),
        (Some("Augusta"), at(10), at(40), None),
        "with what the platform's event wrote"
    );
    assert_eq!(
        db.read(|tx| Ok(tx.customer_notes(shop.id, &[made])?))
            .unwrap(),
        [(made, "leave at the door".to_string())]
    );
    assert_eq!(
        db.read(|tx| Ok(tx.customer_id_by_email(shop.id, "ada@example.test")?))
            .unwrap(),
        Some(made)
    );
    let merged = db
        .read(|tx| Ok(tx.directory_customer(shop.id, platform_row)?))
        .unwrap()
        .unwrap();
    assert_eq!(
        (merged.platform_id, merged.deleted_at),
        (None, Some(at(40)))
    );
    assert_eq!(
        live_addresses(db, shop.id, made),
        [
            (lyon, None, Some("Lyon".into()), true),
            (paris, Some("a9".into()), Some("Paris".into()), false)
        ]
    );
    let labels = |customer| -> Vec<String> {
        let mut names: Vec<String> = db
            .read(|tx| Ok(tx.labels_of_customers(shop.id, &[customer])?))
            .unwrap()
            .into_iter()
            .map(|label| label.name)
            .collect();
        names.sort();
        names
    };
    assert_eq!(labels(made), ["gold", "vip"]);
    assert_eq!(labels(platform_row), ["gold"], "a name it has stays behind");
    let groups = |customer| -> Vec<String> {
        db.read(|tx| Ok(tx.groups_of_customers(shop.id, &[customer])?))
            .unwrap()
            .into_iter()
            .map(|group| group.platform_id)
            .collect()
    };
    assert_eq!(groups(made), ["g1"]);
    assert!(groups(platform_row).is_empty());
    for id in [subscription, theirs] {
        assert_eq!(read_subscription(db, shop.id, id).state.customer_id, made);
    }
    assert!(
        !db.write(|tx| record_customer_platform_id(tx, shop.id, made, "c1", at(50)))
            .unwrap(),
        "recorded already"
    );

    // The platform's next event lands on the customer made here.
    accept(
        db,
        vec![customer_event(
            shop.id,
            "c1",
            60,
            json!({"email": "ada@example.test", "first_name": "Ada",
                "addresses": [address(Some("a9"), "Paris", false)]}),
        )],
        at(600),
    );
    let customer = stored_customer(db, shop.id, "c1");
    assert_eq!(
        (customer.id, customer.first_name.as_deref()),
        (made, Some("Ada"))
    );
    assert_eq!(live_addresses(db, shop.id, made).len(), 2);
}
every_database!(a_customer_the_platforms_event_made_first_is_merged_into_the_one_made_here);

// --- subscriptions ------------------------------------------------------------------------------

fn currency(code: &str) -> CurrencyCode {
    CurrencyCode::parse(code).unwrap()
}

/// A subscription's state with nothing optional set.
pub(crate) fn plain_state(
    customer_id: CustomerId,
    address_id: AddressId,
    status: SubscriptionStatus,
) -> SubscriptionState {
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
        resume_on: None,
    }
}

/// A subscription's state with every field set.
fn full_state(
    customer_id: CustomerId,
    billing: AddressId,
    shipping: AddressId,
) -> SubscriptionState {
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
            subscription_id: SubscriptionId(0),
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
        resume_on: AutoResume::read("2031-02-28", at(3000)),
    }
}

/// A line item as a use case hands it over: no ids yet.
pub(crate) fn line_item(product: &str, quantity: i64, seconds: i64) -> SubscriptionLineItem {
    SubscriptionLineItem {
        id: LineItemId(0),
        subscription_id: SubscriptionId(0),
        subscription_group_id: Some(GroupId(4)),
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
            subscription_line_item_id: LineItemId(0),
            shop_id: ShopId(0),
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
            line_item_id: LineItemId(0),
            prepaid_duration: 3,
            current_recurrence_count: 1,
            prepaid_continue: Some("auto_renew".into()),
        }),
        line_item_attributes: vec![LineItemAttribute {
            name: "grind".into(),
            value: "fine".into(),
            created_at: at(seconds),
            updated_at: at(seconds),
            subscription_id: SubscriptionId(0),
            line_item_id: LineItemId(0),
        }],
        created_at: at(seconds),
        updated_at: at(seconds),
    }
}

/// A customer made here with one address: (customer, address).
pub(crate) fn subscriber(
    db: &impl Database,
    shop_id: ShopId,
    fields: &CustomerFields,
) -> (CustomerId, AddressId) {
    let customer = new_customer(db, shop_id, fields, 1);
    (
        customer,
        new_address(db, shop_id, customer, "Lyon", true, 1),
    )
}

pub(crate) fn insert_subscription(
    db: &impl Database,
    shop_id: ShopId,
    state: &SubscriptionState,
    seconds: i64,
) -> SubscriptionId {
    db.write(|tx| {
        Ok(tx.insert_subscription(shop_id, state, &[line_item("p1", 1, seconds)], at(seconds))?)
    })
    .unwrap()
}

pub(crate) fn read_subscription(
    db: &impl Database,
    shop_id: ShopId,
    id: SubscriptionId,
) -> StoredSubscription {
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
    let ids: Vec<LineItemId> = stored.line_items.iter().map(|item| item.id).collect();
    assert_eq!(ids.len(), 2);
    assert!(
        ids[0] > LineItemId(0) && ids[0] < ids[1],
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
                tx.subscription(shop.id, SubscriptionId(second.0 + 1000))?,
            ))
        })
        .unwrap();
    assert!(elsewhere.is_none() && unknown.is_none());
}
every_database!(a_subscription_reads_back_as_it_was_inserted);

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
    let by_key = |shop_id: ShopId, key: &str| {
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
every_database!(an_idempotency_key_is_taken_once_per_shop);

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
                tx.save_subscription(shop.id, SubscriptionId(id.0 + 1000), &changed)?,
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
every_database!(a_saved_subscription_reads_back_with_its_new_state);

/// The save and the entry in one: the state as written, the entry stored with its cancellation
/// and made the latest, and another subscription of the shop left as it was.
fn a_save_with_its_status_log_entry_writes_both(db: &impl Database) {
    let shop = shop(db, "a.shop.test");
    let (customer, address) = subscriber(db, shop.id, &fields(None, None, None));
    let second_address = new_address(db, shop.id, customer, "Paris", false, 2);
    let state = plain_state(customer, address, SubscriptionStatus::Active);
    let id = insert_subscription(db, shop.id, &state, 10);
    let other = insert_subscription(db, shop.id, &state, 11);
    let actor = Actor {
        kind: ActorType::Customer,
        id: 7,
        name: "Ada".into(),
    };
    let mut entry = NewStatusLog::new(id, SubscriptionStatus::Inactive, "cancelled", actor, at(20));
    entry.metadata.cancellation = Some(Cancellation {
        reason: Some("moving".into()),
        comment: Some("Off to Lisbon".into()),
    });
    let mut changed = full_state(customer, second_address, address);
    changed.subscription_status = SubscriptionStatus::Inactive;
    let stored = db
        .write(|tx| Ok(tx.save_with_status_log(shop.id, id, &changed, &entry)?))
        .unwrap();
    assert_eq!(stored, entry.clone().stored(stored.id));
    let after = read_subscription(db, shop.id, id);
    assert_eq!(after.state, changed);
    assert_eq!(after.latest_status_log, Some(stored.clone()));
    let logs = db
        .read(|tx| Ok(tx.status_logs_of_subscription(shop.id, id, 10)?))
        .unwrap();
    assert_eq!(logs, [stored]);
    let untouched = read_subscription(db, shop.id, other);
    assert_eq!(untouched.state, state);
    assert_eq!(untouched.latest_status_log, None);
}
every_database!(a_save_with_its_status_log_entry_writes_both);

pub(crate) fn rule(id: i64, number: i64, interval: IntervalType) -> BillingRule {
    BillingRule {
        id: BillingRuleId(id),
        subscription_group_id: GroupId(0),
        interval_number: number,
        interval_type: interval,
        interval_name: format!("Every {number} {}", interval.as_str()),
        billing_rule: format!("FREQ=X;INTERVAL={number}"),
    }
}

pub(crate) fn stored_group(name: &str, rules: Vec<BillingRule>) -> StoredGroup {
    StoredGroup {
        id: GroupId(0),
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
    let save = |shop_id: ShopId, group: &StoredGroup| {
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
    assert!(first.id > GroupId(0));
    assert_eq!(first.products, stored_group("", vec![]).products);
    assert_eq!(first.percent_discount, 12.5);
    let ids: Vec<BillingRuleId> = first.billing_rules.iter().map(|rule| rule.id).collect();
    assert!(ids[0] > BillingRuleId(0) && ids[1] > ids[0], "{ids:?}");
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
    let read = |shop_id: ShopId, id: i64| {
        db.read(|tx| Ok(tx.subscription_group(shop_id, GroupId(id))?))
            .unwrap()
    };
    assert_eq!(read(shop_a.id, first.id.0), Some(first.clone()));
    assert_eq!(read(shop_b.id, first.id.0), None, "another shop's");
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
    assert_eq!(read(shop_a.id, first.id.0), None);
}
every_database!(subscription_groups_keep_their_rules_in_order_and_by_shop);

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
    let update = |shop_id: ShopId, subscription_id: SubscriptionId, item: &SubscriptionLineItem| {
        db.write(|tx| Ok(tx.update_line_item(shop_id, subscription_id, item, at(50))?))
            .unwrap()
    };
    assert!(update(shop.id, id, &item));
    assert!(
        !update(shop.id, other_subscription, &item),
        "another subscription's line item"
    );
    let mut unknown = item.clone();
    unknown.id = LineItemId(second.0 + 1000);
    assert!(!update(shop.id, id, &unknown));
    assert!(!update(ShopId(shop.id.0 + 1000), id, &item), "another shop");
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
every_database!(a_line_item_is_rewritten_on_its_own_subscription);

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
                &NewStatusLog::new(
                    SubscriptionId(subscription_id),
                    status,
                    reason,
                    actor.clone(),
                    at(seconds),
                ),
            )?)
        })
        .unwrap()
    };
    let created = log(id.0, SubscriptionStatus::Active, "created", 10);
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
    let paused = log(
        id.0,
        SubscriptionStatus::Paused,
        "paused by the customer",
        20,
    );
    assert!(paused.id > created.id);
    let theirs = log(other.0, SubscriptionStatus::Inactive, "cancelled", 30);
    assert_eq!(
        read_subscription(db, shop.id, id).latest_status_log,
        Some(paused.clone())
    );
    assert_eq!(
        read_subscription(db, shop.id, other).latest_status_log,
        Some(theirs.clone())
    );
    // A subscription's log, newest first, its own entries only, of its shop only.
    let logs = |shop_id, subscription_id, limit| {
        db.read(|tx| Ok(tx.status_logs_of_subscription(shop_id, subscription_id, limit)?))
            .unwrap()
    };
    assert_eq!(logs(shop.id, id, 10), [paused.clone(), created]);
    assert_eq!(logs(shop.id, id, 1), [paused]);
    assert_eq!(logs(shop.id, other, 10), [theirs]);
    assert!(logs(ShopId(shop.id.0 + 1), id, 10).is_empty());
}
every_database!(the_latest_status_log_is_the_last_one_inserted);

fn list(db: &impl Database, shop_id: ShopId, query: &ListQuery) -> (Vec<SubscriptionId>, bool) {
    let page = db
        .read(|tx| Ok(tx.list_subscriptions(shop_id, query)?))
        .unwrap();
    (
        page.subscriptions.iter().map(|s| s.id).collect(),
        page.has_more,
    )
}

fn count(db: &impl Database, shop_id: ShopId, query: &ListQuery) -> i64 {
    db.read(|tx| Ok(tx.count_subscriptions(shop_id, query)?))
        .unwrap()
}

fn totals_by_status_follow_every_status_change(db: &impl Database) {
    use SubscriptionStatus::{Active, Inactive, Paused};
    let shop = shop(db, "a.shop.test");
    let other = self::shop(db, "b.shop.test");
    let (customer, address) = subscriber(db, shop.id, &fields(None, None, None));
    let (theirs, their_address) = subscriber(db, other.id, &fields(None, None, None));
    let ids: Vec<SubscriptionId> = (0..4)
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
    let save = |id: SubscriptionId, status: SubscriptionStatus| {
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
every_database!(totals_by_status_follow_every_status_change);

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
every_database!(subscriptions_are_listed_by_status_customer_and_filter);

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
            .read(|tx| Ok(tx.customer_subscriptions(shop.id, CustomerId(customer), limit, page)?))
            .unwrap();
        (
            subscriptions.iter().map(|s| s.id).collect::<Vec<_>>(),
            total,
        )
    };
    assert_eq!(page(ada.0, 2, 1), (adas[..2].to_vec(), 3));
    assert_eq!(page(ada.0, 2, 2), (adas[2..].to_vec(), 3));
    assert_eq!(page(ada.0, 2, 3), (vec![], 3));
    assert_eq!(page(ada.0, 10, 1), (adas.clone(), 3));
    let none = new_customer(db, shop.id, &fields(None, None, None), 9);
    assert_eq!(page(none.0, 10, 1), (vec![], 0));
    let (subscriptions, _) = db
        .read(|tx| Ok(tx.customer_subscriptions(shop.id, ada, 1, 1)?))
        .unwrap();
    assert_eq!(
        subscriptions[0],
        read_subscription(db, shop.id, adas[0]),
        "whole subscriptions"
    );
}
every_database!(a_customers_subscriptions_come_in_pages);

fn customer_list(
    db: &impl Database,
    shop_id: ShopId,
    statuses: &[CustomerStatus],
    search: Option<&str>,
    limit: i64,
    page: i64,
) -> (Vec<CustomerId>, i64) {
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
    let gone = stored_customer(db, shop.id, "c9").id.0;
    let gone_address = new_address(db, shop.id, CustomerId(gone), "Lyon", true, 101);
    use SubscriptionStatus as S;
    for (customer, address, status) in [
        (ada, ada_address, S::Inactive),
        (ada, ada_address, S::Paused),
        (bob, bob_address, S::Inactive),
        (bob, bob_address, S::Inactive),
        (cy, cy_address, S::Active),
        (CustomerId(gone), gone_address, S::Active),
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
every_database!(subscription_customers_are_listed_by_status_and_search);

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
every_database!(subscription_summaries_count_and_date_a_customers_subscriptions);

fn a_cancellation_is_kept_on_its_status_log_entry(db: &impl Database) {
    let shop = shop(db, "a.shop.test");
    let (customer, address) = subscriber(db, shop.id, &fields(None, None, None));
    let id = insert_subscription(
        db,
        shop.id,
        &plain_state(customer, address, SubscriptionStatus::Active),
        10,
    );
    let actor = Actor {
        kind: ActorType::Customer,
        id: 0,
        name: "Ada".into(),
    };
    let mut logged = Vec::new();
    for (seconds, cancellation) in [
        (
            20,
            Some(Cancellation {
                reason: Some("moving".into()),
                comment: Some("Off to Lisbon — for good".into()),
            }),
        ),
        (
            30,
            Some(Cancellation {
                reason: None,
                comment: Some("no reason".into()),
            }),
        ),
        (40, None),
    ] {
        let mut entry = NewStatusLog::new(
            id,
            SubscriptionStatus::Inactive,
            "cancelled",
            actor.clone(),
            at(seconds),
        );
        entry.metadata.cancellation = cancellation.clone();
        let stored = db
            .write(|tx| Ok(tx.insert_status_log(shop.id, &entry)?))
            .unwrap();
        assert_eq!(stored.metadata.cancellation, cancellation);
        logged.push(stored);
    }
    let read = db
        .read(|tx| Ok(tx.status_logs_of_subscription(shop.id, id, 10)?))
        .unwrap();
    logged.reverse();
    assert_eq!(read, logged, "read back as written, newest first");
    assert_eq!(
        read_subscription(db, shop.id, id).latest_status_log,
        Some(logged[0].clone())
    );
}
every_database!(a_cancellation_is_kept_on_its_status_log_entry);

fn cancellation_reasons_are_replaced_whole_and_kept_in_order_by_shop(db: &impl Database) {
    let shop = shop(db, "a.shop.test");
    let other = self::shop(db, "b.shop.test");
    let reason = |code: &str, label: &str| CancellationReason {
        code: code.into(),
        label: label.into(),
    };
    let reasons = |shop_id| db.read(|tx| Ok(tx.cancellation_reasons(shop_id)?)).unwrap();
    assert!(reasons(shop.id).is_empty(), "none until set");
    let first = vec![
        reason("too_expensive", "It costs too much"),
        reason("moving", "I am moving"),
        reason("a-1", "Ünïcode ✓"),
    ];
    db.write(|tx| Ok(tx.replace_cancellation_reasons(shop.id, &first, at(1))?))
        .unwrap();
    db.write(|tx| {
        Ok(tx.replace_cancellation_reasons(other.id, &[reason("moving", "Theirs")], at(1))?)
    })
    .unwrap();
    assert_eq!(reasons(shop.id), first);
    let second = vec![reason("moving", "Moving away"), reason("other", "Other")];
    db.write(|tx| Ok(tx.replace_cancellation_reasons(shop.id, &second, at(2))?))
        .unwrap();
    assert_eq!(reasons(shop.id), second, "replaced, in the new order");
    assert_eq!(reasons(other.id), [reason("moving", "Theirs")]);
    // A code twice in one list is refused, and the list before stays.
    assert_taken(db.write(|tx| {
        Ok(tx.replace_cancellation_reasons(
            shop.id,
            &[reason("x", "X"), reason("x", "Again")],
            at(3),
        )?)
    }));
    assert_eq!(reasons(shop.id), second);
    db.write(|tx| Ok(tx.replace_cancellation_reasons(shop.id, &[], at(4))?))
        .unwrap();
    assert!(reasons(shop.id).is_empty());
}
every_database!(cancellation_reasons_are_replaced_whole_and_kept_in_order_by_shop);

fn a_dunning_policy_is_stored_by_shop_and_replaced_whole(db: &impl Database) {
    use mercer_domain::subscriptions::dunning::{AtMaxRetries, DunningPolicy};
    let shop = shop(db, "a.shop.test");
    let other = self::shop(db, "b.shop.test");
    let stored = |shop_id| db.read(|tx| Ok(tx.dunning_policy(shop_id)?)).unwrap();
    assert_eq!(stored(shop.id), None, "none until set");
    let first = DunningPolicy {
        retry_intervals_s: vec![86_400, 259_200, 2_592_000],
        at_max_retries: AtMaxRetries::SkipOrder,
    };
    db.write(|tx| Ok(tx.save_dunning_policy(shop.id, &first, at(1))?))
        .unwrap();
    assert_eq!(stored(shop.id), Some(first.clone()));
    assert_eq!(stored(other.id), None, "one shop's policy is its own");
    // Saved again: replaced whole, one row a shop.
    for second in [
        DunningPolicy {
            retry_intervals_s: Vec::new(),
            at_max_retries: AtMaxRetries::Pause,
        },
        DunningPolicy {
            retry_intervals_s: vec![1; 100],
            at_max_retries: AtMaxRetries::Cancel,
        },
    ] {
        db.write(|tx| Ok(tx.save_dunning_policy(shop.id, &second, at(2))?))
            .unwrap();
        assert_eq!(stored(shop.id), Some(second));
    }
    // A failed unit of work leaves the policy before it.
    let failed: Result<(), _> = db.write(|tx| {
        tx.save_dunning_policy(shop.id, &first, at(3))?;
        Err(mercer_domain::DomainError::not_found("shop"))
    });
    assert!(failed.is_err());
    assert_eq!(
        stored(shop.id).unwrap().at_max_retries,
        AtMaxRetries::Cancel
    );
}
every_database!(a_dunning_policy_is_stored_by_shop_and_replaced_whole);

// --- subscription imports ---------------------------------------------------------------------

fn import_figures(rows: u64, created: u64, failed_rows: u64) -> ImportFigures {
    ImportFigures {
        rows,
        rows_done: created + failed_rows,
        created,
        skipped_existing: 0,
        failed_rows,
    }
}

fn imports_are_recorded_with_their_progress_by_shop(db: &impl Database) {
    let shop = shop(db, "a.shop.test");
    let other = self::shop(db, "b.shop.test");
    let started = import_figures(500, 0, 3);
    let id = db
        .write(|tx| Ok(tx.insert_import(shop.id, &started, at(1))?))
        .unwrap();
    let get = |shop_id, id| db.read(|tx| Ok(tx.import_progress(shop_id, id)?)).unwrap();
    let first = get(shop.id, id).unwrap();
    assert_eq!(
        (
            first.status,
            first.figures,
            first.started_at,
            first.finished_at
        ),
        (ImportStatus::Running, started, at(1), None)
    );
    assert_eq!(
        get(other.id, id),
        None,
        "another shop's import is not found"
    );

    let midway = import_figures(500, 200, 3);
    db.write(|tx| Ok(tx.update_import(shop.id, id, &midway, ImportStatus::Running, at(2))?))
        .unwrap();
    let moved = get(shop.id, id).unwrap();
    assert_eq!(
        (moved.figures, moved.updated_at, moved.finished_at),
        (midway, at(2), None)
    );
    // Another shop's update changes nothing.
    let wrong = import_figures(500, 499, 1);
    db.write(|tx| Ok(tx.update_import(other.id, id, &wrong, ImportStatus::Done, at(3))?))
        .unwrap();
    assert_eq!(get(shop.id, id).unwrap(), moved);
    let done = import_figures(500, 497, 3);
    db.write(|tx| Ok(tx.update_import(shop.id, id, &done, ImportStatus::Done, at(4))?))
        .unwrap();
    let ended = get(shop.id, id).unwrap();
    assert_eq!(
        (ended.status, ended.figures, ended.finished_at),
        (ImportStatus::Done, done, Some(at(4)))
    );

    let second = db
        .write(|tx| Ok(tx.insert_import(shop.id, &started, at(5))?))
        .unwrap();
    db.write(|tx| Ok(tx.insert_import(other.id, &started, at(5))?))
        .unwrap();
    let recent = |limit| {
        db.read(|tx| Ok(tx.recent_imports(shop.id, limit)?))
            .unwrap()
            .iter()
            .map(|p| p.id)
            .collect::<Vec<_>>()
    };
    assert_eq!(recent(10), [second, id], "newest first, the shop's own");
    assert_eq!(recent(1), [second]);
}
every_database!(imports_are_recorded_with_their_progress_by_shop);

/// `write_each`: each item a unit of work of its own, whose failure undoes only its own
/// changes; the outcomes in order.
fn write_each_keeps_the_items_that_succeed_and_undoes_those_that_fail(db: &impl Database) {
    let shop = shop(db, "a.shop.test");
    let items = [1_u64, 2, 3, 4, 5];
    let outcomes = db
        .write_each(&items, |tx, n| {
            let id = tx.insert_import(shop.id, &import_figures(*n, 0, 0), at(1))?;
            if n % 2 == 0 {
                return Err(DomainError::invalid("n", "even", "an even item fails"));
            }
            Ok(id)
        })
        .unwrap();
    let kept: Vec<_> = outcomes.iter().filter_map(|o| o.as_ref().ok()).collect();
    let failed = outcomes.iter().filter(|o| o.is_err()).count();
    assert_eq!((kept.len(), failed), (3, 2), "{outcomes:?}");
    assert!(outcomes[1].is_err() && outcomes[3].is_err());
    let rows: Vec<u64> = db
        .read(|tx| Ok(tx.recent_imports(shop.id, 10)?))
        .unwrap()
        .iter()
        .map(|p| p.figures.rows)
        .collect();
    assert_eq!(rows, [5, 3, 1], "the failed items left nothing");

    // A storage failure ends the call with it: the items after it are not run.
    let storage = db.write_each(&items, |tx, n| {
        tx.insert_import(shop.id, &import_figures(100 + n, 0, 0), at(2))?;
        if *n == 2 {
            return Err(DomainError::Storage(StorageError::other(
                "the disk went away",
            )));
        }
        Ok(())
    });
    assert!(
        matches!(storage, Err(DomainError::Storage(_))),
        "{storage:?}"
    );
    let after: Vec<u64> = db
        .read(|tx| Ok(tx.recent_imports(shop.id, 10)?))
        .unwrap()
        .iter()
        .map(|p| p.figures.rows)
        .filter(|rows| *rows > 102)
        .collect();
    assert!(after.is_empty(), "{after:?}");
}
every_database!(write_each_keeps_the_items_that_succeed_and_undoes_those_that_fail);
