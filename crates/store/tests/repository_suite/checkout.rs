//! Checkout orders.

use mercer_domain::DomainError;
use mercer_domain::access::shop::{ShopSettings, update_shop_settings};
use mercer_domain::checkout::repository::{CheckoutStatus, NewCheckoutOrder};
use mercer_domain::checkout::state::{CheckoutCustomer, CheckoutDocument, CheckoutLineItem};
use mercer_domain::kernel::ids::{CheckoutOrderId, ShopId};
use mercer_domain::ports::Database;
use mercer_domain::subscriptions::resources::Cents;

use crate::{at, shop};

fn a_checkout(
    shop_id: ShopId,
    email: Option<&str>,
    items: usize,
    seconds: i64,
) -> NewCheckoutOrder {
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
    assert_eq!(
        swept(100),
        Vec::<CheckoutOrderId>::new(),
        "every shop's emails are on"
    );
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
every_database!(checkout_orders_are_kept_saved_once_per_version_and_swept);
