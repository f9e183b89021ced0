//! Selections (docs/box-builder.md "Selections"): what a subscribed customer
//! chooses for one order of a box, checked by the box's rules; and the box's subscription line
//! items. The admin routes and the customer's own routes share these use cases.

use crate::access::shop::Shop;
use crate::box_builder::admin::Page;
use crate::box_builder::input::SelectionInput;
use crate::box_builder::repository::{BoxBuilderRepositories, SelectionFilter};
use crate::box_builder::resources::{BoxLineItem, InShop, Selection, StoredSelection};
use crate::kernel::body::path;
use crate::kernel::error::{DomainError, FieldError};
use crate::kernel::ids::{BoxId, LineItemId, SelectionId};
use crate::kernel::time::Timestamp;
use crate::subscriptions::customers::PagePagination;
use crate::subscriptions::operations::get_subscription;
use crate::subscriptions::topics::Topic;
use crate::subscriptions::webhooks::emit;

/// The customer's selection of this id; 404 for another customer's.
fn own_selection(
    tx: &mut dyn BoxBuilderRepositories,
    shop: &Shop,
    platform_customer_id: &str,
    id: SelectionId,
) -> Result<StoredSelection, DomainError> {
    tx.selection(shop.id, id)?
        .filter(|stored| stored.platform_customer_id == platform_customer_id)
        .ok_or(DomainError::not_found("selection"))
}

/// List Selections of a customer, by id; `svc_platform_subscription_line_item_id` and
/// `order_datetime` narrow it.
pub fn list_selections(
    tx: &mut dyn BoxBuilderRepositories,
    shop: &Shop,
    platform_customer_id: &str,
    filter: SelectionFilter,
    limit: i64,
    page: i64,
) -> Result<Page<Selection>, DomainError> {
    let (stored, total) = tx.selections(shop.id, platform_customer_id, filter, limit, page)?;
    let selections: Vec<Selection> = stored.into_iter().map(|s| s.selection).collect();
    let pagination = PagePagination::new(selections.len(), page, limit, total);
    Ok((selections, pagination))
}

/// Get Selection: the customer's selection `id` (by platform id); 404 for none, or another
/// customer's.
pub fn get_selection(
    tx: &mut dyn BoxBuilderRepositories,
    shop: &Shop,
    platform_customer_id: &str,
    id: SelectionId,
) -> Result<Selection, DomainError> {
    Ok(own_selection(tx, shop, platform_customer_id, id)?.selection)
}

fn problem(at: &str, field: &str, code: &'static str, message: String) -> FieldError {
    FieldError::new(path(at, field), code, message)
}

/// The problem of a selection made or changed after its time slot's `selection_deadline_date`.
fn past_deadline(at: &str, deadline: Timestamp) -> FieldError {
    problem(
        at,
        "time_slot_id",
        "past_deadline",
        format!("the time slot's selections closed at {deadline}"),
    )
}

/// A stored selection may change only while its own time slot takes selections: once that
/// slot's `selection_deadline_date` has passed, its order is being prepared, and the selection
/// may not leave it either (422 `past_deadline` on `time_slot_id`, whatever the change and
/// whether or not a new slot is open). The same for the admin routes and the customer's.
fn check_still_open(
    tx: &mut dyn BoxBuilderRepositories,
    shop: &Shop,
    stored: &Selection,
    at: &str,
    now: Timestamp,
) -> Result<(), DomainError> {
    match tx.time_slot(shop.id, stored.time_slot_id)? {
        Some(slot) if now > slot.selection_deadline_date => {
            Err(DomainError::Invalid(vec![past_deadline(
                at,
                slot.selection_deadline_date,
            )]))
        }
        _ => Ok(()),
    }
}

/// Checks a selection by the box's rules, every problem at once (422 on its field), and
/// answers its box: the line item is the customer's and sold under a box's group; the size
/// and the slot are that box's; `order_datetime` lies within the slot; it is made before the
/// slot's `selection_deadline_date`; every product chosen is offered in the slot; and the
/// quantities chosen add up to within the size's `min_quantity..=max_quantity`.
fn check(
    tx: &mut dyn BoxBuilderRepositories,
    shop: &Shop,
    platform_customer_id: &str,
    selection: &Selection,
    at: &str,
    now: Timestamp,
) -> Result<BoxId, DomainError> {
    let mut problems = Vec::new();
    let line_item = selection.svc_platform_subscription_line_item_id;
    let owner = tx.line_item_owner(shop.id, line_item)?;
    let box_id = match &owner {
        None => {
            problems.push(problem(
                at,
                "svc_platform_subscription_line_item_id",
                "unknown_line_item",
                format!("the shop has no subscription line item {line_item}"),
            ));
            None
        }
        Some(owner) if owner.platform_customer_id.as_deref() != Some(platform_customer_id) => {
            problems.push(problem(
                at,
                "svc_platform_subscription_line_item_id",
                "not_the_customers",
                format!(
                    "subscription line item {line_item} is not customer {platform_customer_id:?}'s"
                ),
            ));
            None
        }
        Some(owner) => match owner.subscription_group_id {
            Some(group) => tx.box_of_group(shop.id, group)?,
            None => None,
        }
        .or_else(|| {
            problems.push(problem(
                at,
                "svc_platform_subscription_line_item_id",
                "not_a_box_line_item",
                format!("subscription line item {line_item} is not sold under a box's group"),
            ));
            None
        }),
    };
    let size = tx
        .box_size(shop.id, selection.box_size_id)?
        .filter(|size| box_id.is_none_or(|box_id| size.box_id == box_id));
    if size.is_none() {
        problems.push(problem(
            at,
            "box_size_id",
            "unknown_box_size",
            format!("the line item's box has no size {}", selection.box_size_id),
        ));
    }
    let slot = tx
        .time_slot(shop.id, selection.time_slot_id)?
        .filter(|slot| box_id.is_none_or(|box_id| slot.box_id == box_id));
    match &slot {
        None => problems.push(problem(
            at,
            "time_slot_id",
            "unknown_time_slot",
            format!(
                "the line item's box has no time slot {}",
                selection.time_slot_id
            ),
        )),
        Some(slot) => {
            if selection.order_datetime < slot.start_date
                || selection.order_datetime > slot.end_date
            {
                problems.push(problem(
                    at,
                    "order_datetime",
                    "outside_time_slot",
                    format!(
                        "order_datetime must lie within the time slot, {} to {}",
                        slot.start_date, slot.end_date
                    ),
                ));
            }
            if now > slot.selection_deadline_date {
                problems.push(past_deadline(at, slot.selection_deadline_date));
            }
            for (index, item) in selection.line_items.iter().enumerate() {
                if !slot
                    .box_products
                    .iter()
                    .any(|p| p.id == item.box_product_id)
                {
                    problems.push(problem(
                        at,
                        &format!("line_items[{index}].box_product_id"),
                        "not_offered",
                        format!(
                            "box product {} is not offered in this time slot",
                            item.box_product_id
                        ),
                    ));
                }
            }
        }
    }
    if let Some(size) = &size {
        let chosen: i64 = selection
            .line_items
            .iter()
            .fold(0i64, |sum, item| sum.saturating_add(item.choice_quantity));
        if chosen < size.min_quantity || chosen > size.max_quantity {
            problems.push(problem(
                at,
                "line_items",
                "quantity_out_of_range",
                format!(
                    "the quantities chosen add up to {chosen}; a {} holds {} to {}",
                    size.box_size_name, size.min_quantity, size.max_quantity
                ),
            ));
        }
    }
    match (problems.is_empty(), box_id) {
        (true, Some(box_id)) => Ok(box_id),
        _ => Err(DomainError::Invalid(problems)),
    }
}

/// Stores a checked selection and tells the subscription's webhooks (`subscription_updated`).
fn store(
    tx: &mut dyn BoxBuilderRepositories,
    shop: &Shop,
    stored: StoredSelection,
    now: Timestamp,
) -> Result<Selection, DomainError> {
    let saved = tx.save_selection(shop.id, &stored)?;
    let line_item = saved.selection.svc_platform_subscription_line_item_id;
    if let Some(owner) = tx.line_item_owner(shop.id, line_item)? {
        let subscription = get_subscription(tx, shop, owner.subscription_id, false)?;
        emit(tx, shop, Topic::SubscriptionUpdated, &subscription, now)?;
    }
    Ok(saved.selection.in_shop(shop))
}

/// Create Selection: checked by the box's rules. A selection for the same line item and order
/// date replaces the one made before (it keeps its id): a line item's order has one selection.
pub fn create_selection(
    tx: &mut dyn BoxBuilderRepositories,
    shop: &Shop,
    platform_customer_id: &str,
    input: SelectionInput,
    now: Timestamp,
) -> Result<Selection, DomainError> {
    let line_item = input.line_item_id.unwrap_or_default();
    let order_datetime = input.order_datetime.unwrap_or(now);
    let earlier = tx.selection_of_date(shop.id, line_item, order_datetime)?;
    let selection = Selection {
        id: earlier
            .as_ref()
            .map_or(SelectionId(0), |earlier| earlier.selection.id),
        svc_platform_subscription_line_item_id: line_item,
        box_size_id: input.box_size_id.unwrap_or_default(),
        time_slot_id: input.time_slot_id.unwrap_or_default(),
        order_datetime,
        line_items: input.line_items.unwrap_or_default(),
        created_at: earlier.map_or(now, |earlier| earlier.selection.created_at),
        updated_at: now,
    };
    let box_id = check(tx, shop, platform_customer_id, &selection, &input.path, now)?;
    let stored = StoredSelection {
        selection,
        platform_customer_id: platform_customer_id.to_string(),
        box_id,
    };
    store(tx, shop, stored, now)
}

/// Update Selection: the fields given replace the stored ones, and the whole is checked again
/// (the deadline of the slot it ends in included). A selection whose own slot's deadline has
/// passed does not change at all ([`check_still_open`]), not even to move to an open slot.
/// Moved onto another line item's date that has a selection, it is 409.
pub fn update_selection(
    tx: &mut dyn BoxBuilderRepositories,
    shop: &Shop,
    platform_customer_id: &str,
    id: SelectionId,
    input: SelectionInput,
    now: Timestamp,
) -> Result<Selection, DomainError> {
    let mut stored = own_selection(tx, shop, platform_customer_id, id)?;
    check_still_open(tx, shop, &stored.selection, &input.path, now)?;
    let selection = &mut stored.selection;
    if let Some(line_item) = input.line_item_id {
        selection.svc_platform_subscription_line_item_id = line_item;
    }
    if let Some(size) = input.box_size_id {
        selection.box_size_id = size;
    }
    if let Some(slot) = input.time_slot_id {
        selection.time_slot_id = slot;
    }
    if let Some(at) = input.order_datetime {
        selection.order_datetime = at;
    }
    if let Some(items) = input.line_items {
        selection.line_items = items;
    }
    selection.updated_at = now;
    if let Some(other) = tx.selection_of_date(
        shop.id,
        selection.svc_platform_subscription_line_item_id,
        selection.order_datetime,
    )? && other.selection.id != id
    {
        return Err(DomainError::Conflict {
            code: "selection.taken",
            message: format!(
                "selection {} is this line item's for that order date already; change it instead",
                other.selection.id
            ),
        });
    }
    stored.box_id = check(
        tx,
        shop,
        platform_customer_id,
        &stored.selection,
        &input.path,
        now,
    )?;
    store(tx, shop, stored, now)
}

/// Delete Selection (204): that order of the box gets the merchant's pick.
pub fn delete_selection(
    tx: &mut dyn BoxBuilderRepositories,
    shop: &Shop,
    platform_customer_id: &str,
    id: SelectionId,
) -> Result<(), DomainError> {
    own_selection(tx, shop, platform_customer_id, id)?;
    tx.delete_selection(shop.id, id)?;
    Ok(())
}

/// List Subscription Line Items: those sold under a box's group.
pub fn list_box_line_items(
    tx: &mut dyn BoxBuilderRepositories,
    shop: &Shop,
    limit: i64,
    page: i64,
) -> Result<Page<BoxLineItem>, DomainError> {
    let (items, total) = tx.box_line_items(shop.id, limit, page)?;
    let items = items.in_shop(shop);
    let pagination = PagePagination::new(items.len(), page, limit, total);
    Ok((items, pagination))
}

/// Get Subscription Line Item; 404 for one not sold under a box's group.
pub fn get_box_line_item(
    tx: &mut dyn BoxBuilderRepositories,
    shop: &Shop,
    line_item_id: LineItemId,
) -> Result<BoxLineItem, DomainError> {
    Ok(tx
        .box_line_item(shop.id, line_item_id)?
        .ok_or(DomainError::not_found("subscription_line_item"))?
        .in_shop(shop))
}

#[cfg(test)]
pub(crate) mod tests {
    use serde_json::{Value, json};

    use super::*;
    use crate::access::shop::{ShopInput, create_shop};
    use crate::box_builder::admin::{
        add_time_slot_option, create_box, create_box_product, create_box_size, create_time_slot,
        delete_box, delete_time_slot,
    };
    use crate::box_builder::input::{
        parse_box, parse_box_product, parse_box_size, parse_selection, parse_time_slot,
    };
    use crate::box_builder::repository::BoxBuilderDatabase;
    use crate::kernel::ids::SubscriptionId;
    use crate::kernel::ids::{BoxProductId, BoxSizeId, TimeSlotId};
    use crate::platform::events::{
        EntityKind, EventAction, EventSource, apply_event, parse_event_body,
    };
    use crate::ports::Database;
    use crate::subscriptions::groups::{create_group, parse_group};
    use crate::subscriptions::operations::create_subscription_from_body;
    use crate::subscriptions::resources::{Actor, ActorType};
    use crate::testing::MemoryDatabase;
    use crate::webhooks::{NewWebhookEndpoint, WebhookKind};

    pub(crate) fn at(text: &str) -> Timestamp {
        Timestamp::parse_rfc3339(text).unwrap()
    }

    pub(crate) const NOW: &str = "2030-01-02T00:00:00Z";

    /// A shop with a box, for the box builder's use-case tests (see [`world`]).
    pub(crate) struct World {
        pub(crate) db: MemoryDatabase,
        pub(crate) shop: Shop,
        pub(crate) box_id: BoxId,
        pub(crate) size: BoxSizeId,
        pub(crate) slot: TimeSlotId,
        pub(crate) carrot: BoxProductId,
        pub(crate) kale: BoxProductId,
        pub(crate) line_item: LineItemId,
        pub(crate) other_line_item: LineItemId,
        pub(crate) subscription: SubscriptionId,
    }

    pub(crate) fn event(db: &MemoryDatabase, shop: &Shop, kind: EntityKind, body: Value) {
        let event = parse_event_body(
            shop.id,
            kind,
            EventAction::Saved,
            body.to_string().as_bytes(),
            EventSource::Webhook,
            at(NOW),
        )
        .unwrap();
        db.write(|tx| apply_event(tx, &event, at(NOW))).unwrap();
    }

    /// A veg box (a size of 2..4, a slot of the week of 7 January 2030 offering carrot and kale,
    /// choices until the 5th), and a subscription of customer `cust-1` with one line item of
    /// the box's group and one of another group.
    pub(crate) fn world() -> World {
        let db = MemoryDatabase::default();
        let shop = db
            .write(|tx| {
                create_shop(
                    tx,
                    ShopInput {
                        shop_domain: "sel.shop.test".into(),
                        ..ShopInput::default()
                    },
                    at(NOW),
                )
            })
            .unwrap();
        db.write(|tx| {
            Ok(tx.insert_webhook_endpoint(&NewWebhookEndpoint {
                shop_id: shop.id,
                kind: WebhookKind::Subscription,
                topic: "subscription_updated".into(),
                callback_url: "http://127.0.0.1:9/hook".into(),
                secret: None,
                created_at: at(NOW),
            })?)
        })
        .unwrap();
        event(
            &db,
            &shop,
            EntityKind::Product,
            json!({"data": {"product": {"platform_id": "veg",
            "platform_updated_at": "2026-11-01T00:00:00Z",
            "variants": [{"platform_id": "carrot", "price": "2.00"}, {"platform_id": "kale", "price": "3.00"}]}}}),
        );
        event(
            &db,
            &shop,
            EntityKind::Customer,
            json!({"data": {"customer": {"platform_id": "cust-1",
            "platform_updated_at": "2026-11-01T00:00:00Z", "email": "ada@example.test"}}}),
        );
        let now = at(NOW);
        let group = |name: &str| {
            db.write(|tx| {
                let input = parse_group(&json!({"name": name, "billing_rules": [{"interval_number": 1, "interval_type": "week"}]}), true)?;
                create_group(tx, &shop, input, now)
            })
            .unwrap()
            .id
        };
        let (veg, other) = (group("Veg"), group("Other"));
        let world = db
            .write_tx(|tx| {
                let made = create_box(tx, &shop, parse_box(&json!({"svc_subscription_group_id": veg, "box_name": "Veg box"}), true)?, now)?;
                let size = create_box_size(tx, &shop, made.id, parse_box_size(&json!({"box_size_name": "Small", "min_quantity": 2, "max_quantity": 4}), true)?, now)?;
                let slot = create_time_slot(tx, &shop, made.id, parse_time_slot(&json!({"time_slot_name": "Week 1",
                    "visibility_date": "2030-01-01T00:00:00Z", "selection_deadline_date": "2030-01-05T00:00:00Z",
                    "start_date": "2030-01-07T00:00:00Z", "end_date": "2030-01-13T23:59:59Z"}), true)?, now)?;
                let product = |variant: &str| parse_box_product(&json!({"platform_product_id": "veg", "platform_variant_id": variant}), true);
                let carrot = create_box_product(tx, &shop, product("carrot")?, now)?;
                let kale = create_box_product(tx, &shop, product("kale")?, now)?;
                add_time_slot_option(tx, &shop, slot.id, carrot.id, now)?;
                add_time_slot_option(tx, &shop, slot.id, kale.id, now)?;
                let body = json!({"customer": {"email": "ada@example.test"},
                    "subscription": {"order_rrule": "DTSTART:20300107T090000Z\nRRULE:FREQ=WEEKLY",
                        "line_items": [
                            {"platform_product_id": "veg", "platform_variant_id": "carrot", "quantity": 1, "price": 1000, "subscription_group_id": veg},
                            {"platform_product_id": "veg", "platform_variant_id": "kale", "quantity": 1, "price": 1000, "subscription_group_id": other}],
                        "shipping_address": {"street1": "1 Main St", "city": "Ottawa", "country_code": "CA"}}});
                let actor = Actor { kind: ActorType::Api, id: 1, name: "test".into() };
                let (subscription, _) = create_subscription_from_body(tx, &shop, &body, actor, now)?;
                Ok((made.id, size.id, slot.id, carrot.id, kale.id, subscription.line_items[0].id, subscription.line_items[1].id, subscription.id))
            })
            .unwrap();
        let (box_id, size, slot, carrot, kale, line_item, other_line_item, subscription) = world;
        World {
            db,
            shop,
            box_id,
            size,
            slot,
            carrot,
            kale,
            line_item,
            other_line_item,
            subscription,
        }
    }

    impl World {
        pub(crate) fn body(&self, items: Value) -> Value {
            json!({"selection": {"svc_platform_subscription_line_item_id": self.line_item,
                "box_size_id": self.size, "time_slot_id": self.slot,
                "order_datetime": "2030-01-07T09:00:00Z", "line_items": items}})
        }

        pub(crate) fn create(
            &self,
            customer: &str,
            body: Value,
            now: &str,
        ) -> Result<Selection, DomainError> {
            let input = parse_selection(&body, true)?;
            self.db
                .write_tx(|tx| create_selection(tx, &self.shop, customer, input, at(now)))
        }

        fn topics(&self) -> usize {
            self.db.with_state(|state| state.webhook_messages.len())
        }
    }

    fn problems(result: Result<Selection, DomainError>) -> Vec<(String, &'static str)> {
        match result {
            Err(DomainError::Invalid(problems)) => {
                problems.into_iter().map(|p| (p.field, p.code)).collect()
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_selection_is_made_replaced_changed_and_deleted() {
        let w = world();
        let sent = w.topics();
        let items = json!([{"box_product_id": w.carrot, "choice_quantity": 2}, {"box_product_id": w.kale, "choice_quantity": 1}]);
        let made = w.create("cust-1", w.body(items), NOW).unwrap();
        assert_eq!(made.line_items.len(), 2);
        assert_eq!(w.topics(), sent + 1, "subscription_updated");
        // The same line item and date again: the same selection, its products replaced.
        let again = w
            .create(
                "cust-1",
                w.body(json!([{"box_product_id": w.kale, "choice_quantity": 3}])),
                NOW,
            )
            .unwrap();
        assert_eq!(again.id, made.id);
        assert_eq!(
            again.line_items,
            [crate::box_builder::resources::SelectionItem {
                box_product_id: w.kale,
                choice_quantity: 3
            }]
        );
        let (listed, pagination) = w
            .db
            .read_tx(|tx| list_selections(tx, &w.shop, "cust-1", SelectionFilter::default(), 50, 1))
            .unwrap();
        assert_eq!((listed.len(), pagination.total), (1, 1));
        // Another customer sees none of it.
        assert!(matches!(
            w.db.read_tx(|tx| get_selection(tx, &w.shop, "cust-2", made.id)),
            Err(DomainError::NotFound { .. })
        ));
        let changed =
            w.db.write_tx(|tx| {
                let input = parse_selection(
                    &json!({"line_items": [{"box_product_id": w.carrot, "choice_quantity": 4}]}),
                    false,
                )?;
                update_selection(tx, &w.shop, "cust-1", made.id, input, at(NOW))
            })
            .unwrap();
        assert_eq!(changed.line_items[0].choice_quantity, 4);
        // While it stands, its box and slot stay.
        assert!(matches!(
            w.db.write_tx(|tx| delete_box(tx, &w.shop, w.box_id)),
            Err(DomainError::Conflict {
                code: "box.in_use",
                ..
            })
        ));
        assert!(matches!(
            w.db.write_tx(|tx| delete_time_slot(tx, &w.shop, w.slot)),
            Err(DomainError::Conflict {
                code: "time_slot.in_use",
                ..
            })
        ));
        w.db.write_tx(|tx| delete_selection(tx, &w.shop, "cust-1", made.id))
            .unwrap();
        w.db.write_tx(|tx| delete_box(tx, &w.shop, w.box_id))
            .unwrap();
    }

    #[test]
    fn every_rule_of_a_selection_is_a_422_on_its_field() {
        let w = world();
        let fine = json!([{"box_product_id": w.carrot, "choice_quantity": 2}]);
        // Too few, too many.
        assert_eq!(
            problems(w.create(
                "cust-1",
                w.body(json!([{"box_product_id": w.carrot, "choice_quantity": 1}])),
                NOW
            )),
            [("selection.line_items".to_string(), "quantity_out_of_range")]
        );
        assert_eq!(
            problems(w.create("cust-1", w.body(json!([{"box_product_id": w.carrot, "choice_quantity": 3}, {"box_product_id": w.kale, "choice_quantity": 2}])), NOW)),
            [("selection.line_items".to_string(), "quantity_out_of_range")]
        );
        // A product the slot does not offer.
        let mut not_offered =
            w.body(json!([{"box_product_id": w.kale.0 + 100, "choice_quantity": 2}]));
        assert_eq!(
            problems(w.create("cust-1", not_offered.clone(), NOW)),
            [(
                "selection.line_items[0].box_product_id".to_string(),
                "not_offered"
            )]
        );
        // Outside the slot.
        not_offered["selection"]["line_items"] = fine.clone();
        not_offered["selection"]["order_datetime"] = json!("2030-01-20T09:00:00Z");
        assert_eq!(
            problems(w.create("cust-1", not_offered, NOW)),
            [("selection.order_datetime".to_string(), "outside_time_slot")]
        );
        // After the deadline.
        assert_eq!(
            problems(w.create("cust-1", w.body(fine.clone()), "2030-01-06T00:00:00Z")),
            [("selection.time_slot_id".to_string(), "past_deadline")]
        );
        // Another customer's line item; a line item not of a box.
        assert_eq!(
            problems(w.create("cust-2", w.body(fine.clone()), NOW)),
            [(
                "selection.svc_platform_subscription_line_item_id".to_string(),
                "not_the_customers"
            )]
        );
        let mut other = w.body(fine.clone());
        other["selection"]["svc_platform_subscription_line_item_id"] = json!(w.other_line_item);
        assert_eq!(
            problems(w.create("cust-1", other, NOW)),
            [(
                "selection.svc_platform_subscription_line_item_id".to_string(),
                "not_a_box_line_item"
            )]
        );
        let mut unknown_size = w.body(fine);
        unknown_size["selection"]["box_size_id"] = json!(w.size.0 + 100);
        assert_eq!(
            problems(w.create("cust-1", unknown_size, NOW)),
            [("selection.box_size_id".to_string(), "unknown_box_size")]
        );
    }

    #[test]
    fn a_selection_cannot_leave_a_slot_whose_deadline_has_passed() {
        let w = world();
        let two_carrots = json!([{"box_product_id": w.carrot, "choice_quantity": 2}]);
        let made = w.create("cust-1", w.body(two_carrots), NOW).unwrap();
        // A later slot of the same dates, still open after the first one's deadline.
        let later =
            w.db.write_tx(|tx| {
                let slot = create_time_slot(
                    tx,
                    &w.shop,
                    w.box_id,
                    parse_time_slot(
                        &json!({"time_slot_name": "Week 1, late",
                        "visibility_date": "2030-01-01T00:00:00Z",
                        "selection_deadline_date": "2030-01-06T12:00:00Z",
                        "start_date": "2030-01-07T00:00:00Z", "end_date": "2030-01-13T23:59:59Z"}),
                        true,
                    )?,
                    at(NOW),
                )?;
                add_time_slot_option(tx, &w.shop, slot.id, w.carrot, at(NOW))?;
                Ok(slot.id)
            })
            .unwrap();
        let update = |body: Value, now: &str| {
            let input = parse_selection(&body, false)?;
            w.db.write_tx(|tx| update_selection(tx, &w.shop, "cust-1", made.id, input, at(now)))
        };
        let move_to_later = json!({"selection": {"time_slot_id": later}});
        // After the first slot's deadline (5 January), before the later one's: the move is
        // refused, and so is any other change.
        let closed = "2030-01-06T00:00:00Z";
        assert_eq!(
            problems(update(move_to_later.clone(), closed)),
            [("selection.time_slot_id".to_string(), "past_deadline")]
        );
        assert_eq!(
            problems(update(
                json!({"line_items": [{"box_product_id": w.carrot, "choice_quantity": 3}]}),
                closed
            )),
            [("time_slot_id".to_string(), "past_deadline")]
        );
        let kept =
            w.db.read_tx(|tx| get_selection(tx, &w.shop, "cust-1", made.id))
                .unwrap();
        assert_eq!(kept, made, "nothing changed");
        // Before the deadline, the same move is taken.
        let moved = update(move_to_later, NOW).unwrap();
        assert_eq!(moved.time_slot_id, later);
    }

    #[test]
    fn the_box_line_items_are_those_of_a_boxs_group() {
        let w = world();
        let (items, pagination) =
            w.db.read_tx(|tx| list_box_line_items(tx, &w.shop, 50, 1))
                .unwrap();
        assert_eq!(pagination.total, 1);
        assert_eq!(
            (
                items[0].box_id,
                items[0].svc_platform_subscription_line_item_id
            ),
            (w.box_id, w.line_item)
        );
        assert_eq!(items[0].shop_identifier, w.shop.identifier.as_str());
        assert!(matches!(
            w.db.read_tx(|tx| get_box_line_item(tx, &w.shop, w.other_line_item)),
            Err(DomainError::NotFound { .. })
        ));
    }
}
