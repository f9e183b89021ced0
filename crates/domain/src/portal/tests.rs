//! The portal's pages and actions on the box builder's test world: a shop with a veg box, and
//! customer `cust-1`'s subscription of a box line item and another line item.

#![cfg(test)]

use serde_json::json;

use crate::access::shop::{Shop, ShopInput, create_shop};
use crate::box_builder::selections::tests::{NOW, World, at, event, world};
use crate::kernel::error::DomainError;
use crate::kernel::ids::SubscriptionId;
use crate::platform::events::EntityKind;
use crate::portal::actions::{AddressForm, BoxForm, PortalAction, act};
use crate::portal::pages::{overview, subscription_page};
use crate::portal::sessions::{Visitor, open_session, session};
use crate::ports::Database;
use crate::subscriptions::operations::{create_subscription_from_body, get_subscription};
use crate::subscriptions::resources::{Actor, ActorType, Subscription, SubscriptionStatus};

/// The visitor of a fresh session of `shop`'s customer `customer`.
fn visitor_of(w: &World, shop: &Shop, customer: &str) -> Visitor {
    let token =
        w.db.write(|tx| open_session(tx, shop, customer, at(NOW)))
            .unwrap();
    w.db.read(|tx| session(tx, shop.identifier.as_str(), token.expose(), at(NOW)))
        .unwrap()
        .expect("a live session")
}

fn visitor(w: &World, customer: &str) -> Visitor {
    visitor_of(w, &w.shop, customer)
}

/// Customer `cust-2`'s own subscription, active, of one line item sold under the world's
/// group that is not the box's.
fn bobs(w: &World) -> SubscriptionId {
    let other_group = subscription(w, w.subscription).line_items[1].subscription_group_id;
    event(
        &w.db,
        &w.shop,
        EntityKind::Customer,
        json!({"data": {"customer": {"platform_id": "cust-2",
        "platform_updated_at": "2026-11-01T00:00:00Z", "email": "bob@example.test",
        "first_name": "Bob"}}}),
    );
    let body = json!({"customer": {"email": "bob@example.test"},
        "subscription": {"order_rrule": "DTSTART:20300107T090000Z\nRRULE:FREQ=WEEKLY",
            "subscription_status": "active",
            "line_items": [{"platform_product_id": "veg", "platform_variant_id": "kale",
                "quantity": 1, "price": 500, "subscription_group_id": other_group}],
            "shipping_address": {"street1": "2 Main St", "city": "Ottawa", "country_code": "CA"}}});
    let actor = Actor {
        kind: ActorType::Api,
        id: 1,
        name: "test".into(),
    };
    w.db.write(|tx| create_subscription_from_body(tx, &w.shop, &body, actor, at(NOW)))
        .unwrap()
        .0
        .id
}

fn subscription(w: &World, id: SubscriptionId) -> Subscription {
    w.db.read(|tx| get_subscription(tx, &w.shop, id, false))
        .unwrap()
}

fn take(
    w: &World,
    visitor: &Visitor,
    id: SubscriptionId,
    action: PortalAction,
) -> Result<Subscription, DomainError> {
    w.db.write(|tx| act(tx, visitor, id, action, at(NOW)))
}

/// The form fields a refusal names, with their codes.
fn refused(result: Result<Subscription, DomainError>) -> Vec<(String, &'static str)> {
    match result {
        Err(DomainError::Invalid(problems)) => {
            problems.into_iter().map(|p| (p.field, p.code)).collect()
        }
        other => panic!("not refused on a field: {other:?}"),
    }
}

#[test]
fn the_overview_lists_the_visitors_own_subscriptions_and_greets_them() {
    let w = world();
    let bobs = bobs(&w);
    event(
        &w.db,
        &w.shop,
        EntityKind::Customer,
        json!({"data": {"customer": {"platform_id": "cust-1",
        "platform_updated_at": "2026-11-02T00:00:00Z", "email": "ada@example.test",
        "first_name": "Ada"}}}),
    );
    let ada = visitor(&w, "cust-1");
    let seen = w.db.read(|tx| overview(tx, &ada)).unwrap();
    let ids: Vec<SubscriptionId> = seen
        .subscriptions
        .iter()
        .map(|card| card.subscription.id)
        .collect();
    assert_eq!(ids, [w.subscription]);
    assert_eq!(seen.customer.first_name.as_deref(), Some("Ada"));
    assert_eq!(seen.shop.name, "sel.shop.test");
    // Two line items of 10.00 each.
    assert_eq!(seen.subscriptions[0].total.map(|t| t.0), Some(2000));
    let bob =
        w.db.read(|tx| overview(tx, &visitor(&w, "cust-2")))
            .unwrap();
    assert_eq!(bob.subscriptions[0].subscription.id, bobs);
    // A customer Mercer does not know has no subscription, and no name to greet.
    let stranger =
        w.db.read(|tx| overview(tx, &visitor(&w, "cust-unknown")))
            .unwrap();
    assert!(stranger.subscriptions.is_empty());
    assert_eq!(stranger.customer.first_name, None);
}

#[test]
fn another_customers_or_another_shops_subscription_is_not_found() {
    let w = world();
    let bobs = bobs(&w);
    let ada = visitor(&w, "cust-1");
    let not_found = |result: Result<_, DomainError>| {
        assert!(
            matches!(
                result,
                Err(DomainError::NotFound {
                    resource: "subscription"
                })
            ),
            "{:?}",
            result.map(|_: ()| ())
        );
    };
    not_found(
        w.db.read(|tx| subscription_page(tx, &ada, bobs, at(NOW)))
            .map(|_| ()),
    );
    not_found(
        w.db.read(|tx| subscription_page(tx, &ada, SubscriptionId(999_999), at(NOW)))
            .map(|_| ()),
    );
    let before = subscription(&w, bobs);
    not_found(take(&w, &ada, bobs, PortalAction::Skip).map(|_| ()));
    not_found(
        take(
            &w,
            &ada,
            bobs,
            PortalAction::Cancel {
                reason: String::new(),
                comment: String::new(),
            },
        )
        .map(|_| ()),
    );
    assert_eq!(subscription(&w, bobs), before, "Bob's is unchanged");
    // The same customer id on another shop reaches nothing of this one.
    let other =
        w.db.write(|tx| {
            create_shop(
                tx,
                ShopInput {
                    shop_domain: "other.shop.test".into(),
                    ..ShopInput::default()
                },
                at(NOW),
            )
        })
        .unwrap();
    let elsewhere = visitor_of(&w, &other, "cust-1");
    not_found(
        w.db.read(|tx| subscription_page(tx, &elsewhere, w.subscription, at(NOW)))
            .map(|_| ()),
    );
    not_found(take(&w, &elsewhere, w.subscription, PortalAction::Skip).map(|_| ()));
    assert!(
        w.db.read(|tx| overview(tx, &elsewhere))
            .unwrap()
            .subscriptions
            .is_empty()
    );
}

#[test]
fn actions_take_the_apis_use_cases_as_the_customer() {
    let w = world();
    let id = bobs(&w);
    let bob = visitor(&w, "cust-2");
    let skipped = take(&w, &bob, id, PortalAction::Skip).unwrap();
    assert_eq!(
        skipped.next_order_datetime,
        Some(at("2030-01-14T09:00:00Z")),
        "the next order is skipped"
    );
    let log = skipped.latest_status_log.expect("a status log entry");
    assert_eq!(log.metadata.user.kind, ActorType::Customer);
    assert_eq!(log.metadata.user.name, "cust-2");
    let paused = take(
        &w,
        &bob,
        id,
        PortalAction::Pause {
            resume_on: "2030-02-01".into(),
        },
    )
    .unwrap();
    assert_eq!(paused.subscription_status, SubscriptionStatus::Paused);
    assert_eq!(
        paused.resume_on.map(|on| on.to_string()).as_deref(),
        Some("2030-02-01")
    );
    let resumed = take(&w, &bob, id, PortalAction::Resume).unwrap();
    assert_eq!(resumed.subscription_status, SubscriptionStatus::Active);
    let quantity = take(
        &w,
        &bob,
        id,
        PortalAction::Quantity {
            line_item_id: subscription(&w, id).line_items[0].id.to_string(),
            quantity: " 3 ".into(),
        },
    )
    .unwrap();
    assert_eq!(quantity.line_items[0].quantity, 3);
    let page =
        w.db.read(|tx| subscription_page(tx, &bob, id, at(NOW)))
            .unwrap();
    let rule = page.intervals[0].rule.clone();
    let changed = take(
        &w,
        &bob,
        id,
        PortalAction::Frequency {
            interval_id: rule.id.to_string(),
        },
    )
    .unwrap();
    assert!(
        changed
            .order_rrule
            .ends_with(&format!("RRULE:{}", rule.billing_rule)),
        "{}",
        changed.order_rrule
    );
    let page =
        w.db.read(|tx| subscription_page(tx, &bob, id, at(NOW)))
            .unwrap();
    assert!(page.intervals[0].current);
    let moved = take(
        &w,
        &bob,
        id,
        PortalAction::Address(AddressForm {
            street1: "2 Rue Neuve".into(),
            city: "Lyon".into(),
            country_code: "FR".into(),
            zip: " ".into(),
            ..AddressForm::default()
        }),
    )
    .unwrap();
    assert_eq!(
        moved.shipping_address.street1.as_deref(),
        Some("2 Rue Neuve")
    );
    assert_eq!(moved.shipping_address.zip, None, "an empty field is absent");
    let cancelled = take(
        &w,
        &bob,
        id,
        PortalAction::Cancel {
            reason: String::new(),
            comment: "Moving abroad".into(),
        },
    )
    .unwrap();
    assert_eq!(cancelled.subscription_status, SubscriptionStatus::Inactive);
    let log = cancelled.latest_status_log.unwrap();
    assert_eq!(
        log.metadata.cancellation.and_then(|c| c.comment).as_deref(),
        Some("Moving abroad")
    );
}

#[test]
fn a_refused_action_names_its_form_field_and_changes_nothing() {
    let w = world();
    let id = bobs(&w);
    let bob = visitor(&w, "cust-2");
    let before = subscription(&w, id);
    let quantity = |line_item_id: String, quantity: &str| PortalAction::Quantity {
        line_item_id,
        quantity: quantity.into(),
    };
    let line = subscription(&w, id).line_items[0].id.to_string();
    assert_eq!(
        refused(take(&w, &bob, id, quantity(line.clone(), "0"))),
        [("quantity".to_string(), "out_of_range")]
    );
    assert_eq!(
        refused(take(&w, &bob, id, quantity(line, "two"))),
        [("quantity".to_string(), "invalid_value")]
    );
    let adas_line = w.line_item.to_string();
    assert_eq!(
        refused(take(&w, &bob, id, quantity(adas_line, "2"))),
        [("line_item_id".to_string(), "invalid_value")]
    );
    let no_street = PortalAction::Address(AddressForm {
        city: "Lyon".into(),
        country_code: "FR".into(),
        ..AddressForm::default()
    });
    assert_eq!(refused(take(&w, &bob, id, no_street))[0].0, "street1");
    assert_eq!(
        refused(take(
            &w,
            &bob,
            id,
            PortalAction::Frequency {
                interval_id: "999999".into()
            }
        )),
        [("interval_id".to_string(), "unknown_billing_rule")]
    );
    for resume_on in ["someday", "2030-01-01"] {
        let problems = refused(take(
            &w,
            &bob,
            id,
            PortalAction::Pause {
                resume_on: resume_on.into(),
            },
        ));
        assert_eq!(problems[0].0, "resume_on", "{resume_on}");
    }
    let cancel = PortalAction::Cancel {
        reason: "too_expensive".into(),
        comment: String::new(),
    };
    assert_eq!(refused(take(&w, &bob, id, cancel))[0].0, "reason");
    assert!(matches!(
        take(&w, &bob, id, PortalAction::Resume),
        Err(DomainError::Unprocessable { .. })
    ));
    assert_eq!(subscription(&w, id), before, "nothing changed");
}

#[test]
fn a_box_shows_its_upcoming_orders_and_takes_the_customers_choice() {
    let w = world();
    let ada = visitor(&w, "cust-1");
    let page =
        w.db.read(|tx| subscription_page(tx, &ada, w.subscription, at(NOW)))
            .unwrap();
    let dates: Vec<String> = page
        .boxes
        .iter()
        .map(|upcoming| upcoming.order_datetime.to_rfc3339())
        .collect();
    assert_eq!(
        dates,
        [
            "2030-01-07T09:00:00Z",
            "2030-01-14T09:00:00Z",
            "2030-01-21T09:00:00Z"
        ]
    );
    let first = &page.boxes[0];
    assert_eq!(first.slot.as_ref().map(|slot| slot.id), Some(w.slot));
    assert!(first.open);
    assert_eq!(
        (first.sizes[0].min_quantity, first.sizes[0].max_quantity),
        (2, 4)
    );
    // No selection yet: the merchant's pick, one of each product of the slot.
    let contents: Vec<(String, i64)> = first
        .contents
        .iter()
        .map(|c| (c.title.clone(), c.quantity))
        .collect();
    assert_eq!(
        contents,
        [("carrot".to_string(), 1), ("kale".to_string(), 1)]
    );
    let prices: Vec<Option<i64>> = first.options.iter().map(|o| o.price.map(|p| p.0)).collect();
    assert_eq!(prices, [Some(200), Some(300)]);
    // No slot holds the next order: nothing to choose.
    assert!(page.boxes[1].slot.is_none() && !page.boxes[1].open);

    let choose = |carrots: &str, kale: &str| {
        PortalAction::Box(BoxForm {
            line_item_id: String::new(),
            order_datetime: "2030-01-07T09:00:00Z".into(),
            box_size_id: w.size.to_string(),
            time_slot_id: w.slot.to_string(),
            choices: vec![
                (w.carrot.to_string(), carrots.into()),
                (w.kale.to_string(), kale.into()),
            ],
        })
    };
    assert_eq!(
        refused(take(&w, &ada, w.subscription, choose("5", "0"))),
        [("choice_quantity".to_string(), "quantity_out_of_range")]
    );
    take(&w, &ada, w.subscription, choose("3", "")).unwrap();
    let page =
        w.db.read(|tx| subscription_page(tx, &ada, w.subscription, at(NOW)))
            .unwrap();
    let first = &page.boxes[0];
    assert!(first.selection.is_some());
    assert_eq!(first.contents.len(), 1);
    assert_eq!(
        (first.contents[0].title.as_str(), first.contents[0].quantity),
        ("carrot", 3)
    );
    let chosen: Vec<i64> = first.options.iter().map(|o| o.chosen).collect();
    assert_eq!(chosen, [3, 0]);
    // Another customer cannot choose for this box.
    let bob = visitor(&w, "cust-2");
    assert!(matches!(
        take(&w, &bob, w.subscription, choose("2", "1")),
        Err(DomainError::NotFound { .. })
    ));
}

#[test]
fn a_form_is_held_to_the_apis_limits_on_text_and_chosen_products() {
    let w = world();
    let id = bobs(&w);
    let bob = visitor(&w, "cust-2");
    let before = subscription(&w, id);
    // Text the API's body limits refuse (over 64 KiB) is refused on its form field.
    let long_street = PortalAction::Address(AddressForm {
        street1: "y".repeat(64 * 1024 + 1),
        city: "Lyon".into(),
        country_code: "FR".into(),
        ..AddressForm::default()
    });
    assert_eq!(
        refused(take(&w, &bob, id, long_street)),
        [("street1".to_string(), "length")]
    );
    let long_city = PortalAction::Address(AddressForm {
        street1: "1 Rue".into(),
        city: "c".repeat(100_000),
        country_code: "FR".into(),
        ..AddressForm::default()
    });
    assert_eq!(
        refused(take(&w, &bob, id, long_city)),
        [("city".to_string(), "length")]
    );
    assert_eq!(subscription(&w, id), before, "nothing changed");

    // A box form choosing more products than Create Selection takes (250) is refused at once.
    let ada = visitor(&w, "cust-1");
    let many = PortalAction::Box(BoxForm {
        line_item_id: String::new(),
        order_datetime: "2030-01-07T09:00:00Z".into(),
        box_size_id: w.size.to_string(),
        time_slot_id: w.slot.to_string(),
        choices: (1..=251)
            .map(|product| (product.to_string(), "1".to_string()))
            .collect(),
    });
    assert_eq!(
        refused(take(&w, &ada, w.subscription, many)),
        [("choice_quantity".to_string(), "too_many")]
    );
    let page =
        w.db.read(|tx| subscription_page(tx, &ada, w.subscription, at(NOW)))
            .unwrap();
    assert!(page.boxes[0].selection.is_none(), "no selection made");
}
