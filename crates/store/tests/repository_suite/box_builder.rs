//! The box builder: boxes and their resources, customers' selections.

use mercer_domain::DomainError;
use mercer_domain::box_builder::input::parse_selection;
use mercer_domain::box_builder::repository::{
    BoxBuilderDatabase, LineItemOwner, SelectionFilter, TimeSlotFilter,
};
use mercer_domain::box_builder::resources::{
    Attribute, BoxProduct, BoxSize, Selection, SelectionItem, StoredSelection, SubscriptionBox,
    TimeSlot,
};
use mercer_domain::box_builder::selections::update_selection;
use mercer_domain::kernel::ids::ShopId;
use mercer_domain::kernel::ids::{BoxId, BoxProductId, BoxSizeId, SelectionId, TimeSlotId};
use mercer_domain::ports::Database;
use mercer_domain::subscriptions::groups::{IntervalType, StoredGroup};
use mercer_domain::subscriptions::resources::SubscriptionStatus;
use serde_json::json;

use crate::subscriptions::{
    fields, line_item, plain_state, read_subscription, rule, stored_group, subscriber,
};
use crate::{at, shop};

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
                    id: BoxId(0),
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
    assert!(veg.id > BoxId(0));
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
        id: BoxProductId(0),
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
                    id: BoxSizeId(0),
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
        id: TimeSlotId(0),
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
every_database!(box_resources_round_trip_by_shop_and_deletions_cascade);

/// The shop's weekly group "Veg", its box "Veg box" with `attributes`, and the box's size
/// "Small" (1 to 4, flexible pricing).
fn veg_box_with_a_small_size(
    db: &impl Database,
    shop_id: ShopId,
    attributes: Vec<Attribute>,
) -> (StoredGroup, SubscriptionBox, BoxSize) {
    let group = db
        .write(|tx| {
            Ok(tx.save_subscription_group(
                shop_id,
                &stored_group("Veg", vec![rule(0, 1, IntervalType::Week)]),
            )?)
        })
        .unwrap();
    let veg = db
        .write(|tx| {
            Ok(tx.save_box(
                shop_id,
                &SubscriptionBox {
                    id: BoxId(0),
                    svc_subscription_group_id: group.id,
                    shop_identifier: String::new(),
                    box_name: "Veg box".into(),
                    created_at: at(1),
                    updated_at: at(1),
                    attributes,
                },
            )?)
        })
        .unwrap();
    let size = db
        .write(|tx| {
            Ok(tx.save_box_size(
                shop_id,
                &BoxSize {
                    id: BoxSizeId(0),
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
    (group, veg, size)
}

fn selections_are_a_customers_per_line_item_and_order_date(db: &impl Database) {
    let shop_a = shop(db, "a.shop.test");
    let shop_b = shop(db, "b.shop.test");
    let attribute = Attribute {
        id: 1,
        shop_identifier: String::new(),
        attribute_key: "season".into(),
        attribute_value: "winter".into(),
        created_at: at(1),
        updated_at: at(1),
    };
    let (group, veg, size) = veg_box_with_a_small_size(db, shop_a.id, vec![attribute.clone()]);
    let slot = |name: &str| TimeSlot {
        id: TimeSlotId(0),
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
            id: SelectionId(0),
            svc_platform_subscription_line_item_id: box_item,
            box_size_id: size.id,
            time_slot_id: week_one,
            order_datetime: at(order_at),
            line_items: vec![SelectionItem {
                box_product_id: BoxProductId(9),
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
    assert!(first.selection.id > SelectionId(0) && second.selection.id > first.selection.id);
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
every_database!(selections_are_a_customers_per_line_item_and_order_date);

/// A selection whose time slot's deadline has passed does not change, not even to move to a
/// slot still open: the use case refuses it the same on every database.
fn a_selection_stays_in_a_slot_whose_deadline_passed(db: &impl Database) {
    let shop_a = shop(db, "a.shop.test");
    let (group, veg, size) = veg_box_with_a_small_size(db, shop_a.id, Vec::new());
    let carrot = db
        .write(|tx| {
            Ok(tx.save_box_product(
                shop_a.id,
                &BoxProduct {
                    id: BoxProductId(0),
                    platform_product_id: "veg".into(),
                    platform_variant_id: "carrot".into(),
                    created_at: at(2),
                    updated_at: at(2),
                    attributes: Vec::new(),
                },
            )?)
        })
        .unwrap();
    // Two slots of the same dates offering carrots: choices close at 40 s, and at 45 s.
    let slot = |name: &str, deadline: i64| TimeSlot {
        id: TimeSlotId(0),
        box_id: veg.id,
        shop_identifier: String::new(),
        time_slot_name: name.into(),
        start_date: at(50),
        end_date: at(500),
        selection_deadline_date: at(deadline),
        visibility_date: at(1),
        created_at: at(2),
        updated_at: at(2),
        attributes: Vec::new(),
        box_products: Vec::new(),
    };
    let (early, late) = db
        .write(|tx| {
            let early = tx.save_time_slot(shop_a.id, &slot("Early", 40))?.id;
            let late = tx.save_time_slot(shop_a.id, &slot("Late", 45))?.id;
            for id in [early, late] {
                tx.add_time_slot_option(shop_a.id, id, carrot.id, at(2))?;
            }
            Ok((early, late))
        })
        .unwrap();
    let (known, address) = subscriber(db, shop_a.id, &fields(None, None, None));
    db.write(|tx| Ok(tx.set_customer_platform_id(shop_a.id, known, "c-1", at(2))?))
        .unwrap();
    let mut boxed = line_item("veg", 1, 10);
    boxed.subscription_group_id = Some(group.id);
    let state = plain_state(known, address, SubscriptionStatus::Active);
    let subscription = db
        .write(|tx| Ok(tx.insert_subscription(shop_a.id, &state, &[boxed], at(10))?))
        .unwrap();
    let box_item = read_subscription(db, shop_a.id, subscription).line_items[0].id;
    let made = db
        .write(|tx| {
            Ok(tx.save_selection(
                shop_a.id,
                &StoredSelection {
                    selection: Selection {
                        id: SelectionId(0),
                        svc_platform_subscription_line_item_id: box_item,
                        box_size_id: size.id,
                        time_slot_id: early,
                        order_datetime: at(100),
                        line_items: vec![SelectionItem {
                            box_product_id: carrot.id,
                            choice_quantity: 2,
                        }],
                        created_at: at(20),
                        updated_at: at(20),
                    },
                    platform_customer_id: "c-1".into(),
                    box_id: veg.id,
                },
            )?)
        })
        .unwrap();
    let id = made.selection.id;
    let move_to = |slot: TimeSlotId, now: i64| {
        let input = parse_selection(&json!({"selection": {"time_slot_id": slot}}), false).unwrap();
        db.write_tx(|tx| update_selection(tx, &shop_a, "c-1", id, input, at(now)))
    };
    // At 42 s the early slot is closed, the late one open: the move is refused on the slot.
    match move_to(late, 42) {
        Err(DomainError::Invalid(problems)) => assert_eq!(
            problems
                .iter()
                .map(|p| (p.field.as_str(), p.code))
                .collect::<Vec<_>>(),
            [("selection.time_slot_id", "past_deadline")]
        ),
        other => panic!("must be refused past the deadline: {other:?}"),
    }
    let kept = db
        .read(|tx| Ok(tx.selection(shop_a.id, id)?))
        .unwrap()
        .unwrap();
    assert_eq!(kept.selection.time_slot_id, early, "nothing changed");
    // Before the early slot's deadline, the same move is taken.
    assert_eq!(move_to(late, 30).unwrap().time_slot_id, late);
}
every_database!(a_selection_stays_in_a_slot_whose_deadline_passed);
