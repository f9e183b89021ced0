//! The box builder's admin use cases (docs/box-builder.md): boxes, box products,
//! box sizes, time slots and their options. Every answer is the resource as shown for its
//! shop; lists come a page at a time with the box-builder pagination.

use crate::access::shop::Shop;
use crate::box_builder::input::{BoxInput, BoxProductInput, BoxSizeInput, TimeSlotInput};
use crate::box_builder::repository::{BoxBuilderRepositories, TimeSlotFilter};
use crate::box_builder::resources::{
    BoxProduct, BoxSize, FLEXIBLE_PRICING, InShop, SubscriptionBox, TimeSlot, TimeSlotOption,
    merge_attributes,
};
use crate::kernel::body::path;
use crate::kernel::error::{DomainError, FieldError};
use crate::kernel::ids::{BoxId, BoxProductId, BoxSizeId, GroupId, TimeSlotId};
use crate::kernel::time::Timestamp;
use crate::platform::catalogue;
use crate::subscriptions::customers::PagePagination;

/// A page of a list, with its pagination.
pub type Page<T> = (Vec<T>, PagePagination);

fn page_of<T: InShop>(
    shop: &Shop,
    (items, total): (Vec<T>, i64),
    limit: i64,
    page: i64,
) -> Page<T> {
    let items = items.in_shop(shop);
    let pagination = PagePagination::new(items.len(), page, limit, total);
    (items, pagination)
}

fn found<T>(item: Option<T>, what: &'static str) -> Result<T, DomainError> {
    item.ok_or(DomainError::not_found(what))
}

// ---------------------------------------------------------------------------------------
// Boxes

/// List Boxes: a page of the shop's boxes, by id.
pub fn list_boxes(
    tx: &mut dyn BoxBuilderRepositories,
    shop: &Shop,
    limit: i64,
    page: i64,
) -> Result<Page<SubscriptionBox>, DomainError> {
    Ok(page_of(shop, tx.boxes(shop.id, limit, page)?, limit, page))
}

/// Get Box: the shop's box `id`; 404 for none (or another shop's).
pub fn get_box(
    tx: &mut dyn BoxBuilderRepositories,
    shop: &Shop,
    id: BoxId,
) -> Result<SubscriptionBox, DomainError> {
    Ok(found(tx.subscription_box(shop.id, id)?, "box")?.in_shop(shop))
}

/// The group a box is sold under must be the shop's (422), and serve no other box (409).
fn check_group(
    tx: &mut dyn BoxBuilderRepositories,
    shop: &Shop,
    group_id: GroupId,
    box_id: BoxId,
    field: &str,
) -> Result<(), DomainError> {
    tx.lock_subscription_group(shop.id, group_id)?;
    if tx.subscription_group(shop.id, group_id)?.is_none() {
        return Err(DomainError::invalid(
            field,
            "unknown_group",
            format!("the shop has no subscription group {group_id}"),
        ));
    }
    match tx.box_of_group(shop.id, group_id)? {
        Some(other) if other != box_id => Err(DomainError::Conflict {
            code: "box.group_taken",
            message: format!("subscription group {group_id} is sold as box {other} already"),
        }),
        _ => Ok(()),
    }
}

/// Create Box (201): `svc_subscription_group_id` names a group of the shop that no other box
/// is sold under.
pub fn create_box(
    tx: &mut dyn BoxBuilderRepositories,
    shop: &Shop,
    input: BoxInput,
    now: Timestamp,
) -> Result<SubscriptionBox, DomainError> {
    let group = input.svc_subscription_group_id.unwrap_or_default();
    check_group(tx, shop, group, BoxId(0), "box.svc_subscription_group_id")?;
    let new = SubscriptionBox {
        id: BoxId(0),
        svc_subscription_group_id: group,
        shop_identifier: String::new(),
        box_name: input.box_name.unwrap_or_default(),
        created_at: now,
        updated_at: now,
        attributes: merge_attributes(&[], &input.attributes.unwrap_or_default(), now),
    };
    Ok(tx.save_box(shop.id, &new)?.in_shop(shop))
}

/// Update Box: the fields given replace the stored ones (`attributes` by key).
pub fn update_box(
    tx: &mut dyn BoxBuilderRepositories,
    shop: &Shop,
    id: BoxId,
    input: BoxInput,
    now: Timestamp,
) -> Result<SubscriptionBox, DomainError> {
    let mut stored = found(tx.subscription_box(shop.id, id)?, "box")?;
    if let Some(group) = input.svc_subscription_group_id {
        check_group(tx, shop, group, id, "box.svc_subscription_group_id")?;
        stored.svc_subscription_group_id = group;
    }
    if let Some(name) = input.box_name {
        stored.box_name = name;
    }
    if let Some(attributes) = input.attributes {
        stored.attributes = merge_attributes(&stored.attributes, &attributes, now);
    }
    stored.updated_at = now;
    Ok(tx.save_box(shop.id, &stored)?.in_shop(shop))
}

fn in_use(code: &'static str, message: String) -> DomainError {
    DomainError::Conflict { code, message }
}

/// Delete Box (204), with its sizes, time slots and their options; 409 while customers'
/// selections are made of it.
pub fn delete_box(
    tx: &mut dyn BoxBuilderRepositories,
    shop: &Shop,
    id: BoxId,
) -> Result<(), DomainError> {
    let selections = tx.selections_of_box(shop.id, id)?;
    if selections > 0 {
        return Err(in_use(
            "box.in_use",
            format!("{selections} customer selection(s) are made of this box; delete them first"),
        ));
    }
    if !tx.delete_box(shop.id, id)? {
        return Err(DomainError::not_found("box"));
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Box products

/// List Box Products: a page of the shop's box products, by id.
pub fn list_box_products(
    tx: &mut dyn BoxBuilderRepositories,
    shop: &Shop,
    limit: i64,
    page: i64,
) -> Result<Page<BoxProduct>, DomainError> {
    Ok(page_of(
        shop,
        tx.box_products(shop.id, limit, page)?,
        limit,
        page,
    ))
}

/// Get Box Product: the shop's box product `id`; 404 for none (or another shop's).
pub fn get_box_product(
    tx: &mut dyn BoxBuilderRepositories,
    shop: &Shop,
    id: BoxProductId,
) -> Result<BoxProduct, DomainError> {
    Ok(found(tx.box_product(shop.id, id)?, "box_product")?.in_shop(shop))
}

/// The variant must be a live variant of the shop's catalogue (the products Product Saved
/// events and product syncs brought), of that product.
fn check_in_catalogue(
    tx: &mut dyn BoxBuilderRepositories,
    shop: &Shop,
    product_id: &str,
    variant_id: &str,
) -> Result<(), DomainError> {
    let found = catalogue::variants(tx, shop.id, &[variant_id])?;
    let Some(variant) = found.get(variant_id) else {
        return Err(DomainError::invalid(
            "box_product.platform_variant_id",
            "not_in_catalogue",
            format!(
                "variant {variant_id:?} is not in the shop's catalogue: send its product in a \
                 Product Saved event, or sync the products, first"
            ),
        ));
    };
    let owner = variant
        .product
        .platform_id
        .as_ref()
        .map(|id| id.as_str().to_string())
        .unwrap_or_default();
    if owner != product_id {
        return Err(DomainError::invalid(
            "box_product.platform_product_id",
            "not_in_catalogue",
            format!("variant {variant_id:?} is a variant of product {owner:?}, not {product_id:?}"),
        ));
    }
    Ok(())
}

/// Create Box Product (201), of a variant of the catalogue.
pub fn create_box_product(
    tx: &mut dyn BoxBuilderRepositories,
    shop: &Shop,
    input: BoxProductInput,
    now: Timestamp,
) -> Result<BoxProduct, DomainError> {
    let product = BoxProduct {
        id: BoxProductId(0),
        platform_product_id: input.platform_product_id.unwrap_or_default(),
        platform_variant_id: input.platform_variant_id.unwrap_or_default(),
        created_at: now,
        updated_at: now,
        attributes: merge_attributes(&[], &input.attributes.unwrap_or_default(), now),
    };
    check_in_catalogue(
        tx,
        shop,
        &product.platform_product_id,
        &product.platform_variant_id,
    )?;
    Ok(tx.save_box_product(shop.id, &product)?.in_shop(shop))
}

/// Update Box Product: the fields given replace the stored ones; a new variant must be in the
/// catalogue too.
pub fn update_box_product(
    tx: &mut dyn BoxBuilderRepositories,
    shop: &Shop,
    id: BoxProductId,
    input: BoxProductInput,
    now: Timestamp,
) -> Result<BoxProduct, DomainError> {
    let mut stored = found(tx.box_product(shop.id, id)?, "box_product")?;
    let moved = input.platform_product_id.is_some() || input.platform_variant_id.is_some();
    if let Some(product) = input.platform_product_id {
        stored.platform_product_id = product;
    }
    if let Some(variant) = input.platform_variant_id {
        stored.platform_variant_id = variant;
    }
    if moved {
        check_in_catalogue(
            tx,
            shop,
            &stored.platform_product_id,
            &stored.platform_variant_id,
        )?;
    }
    if let Some(attributes) = input.attributes {
        stored.attributes = merge_attributes(&stored.attributes, &attributes, now);
    }
    stored.updated_at = now;
    Ok(tx.save_box_product(shop.id, &stored)?.in_shop(shop))
}

/// Delete Box Product (204): it is taken out of every slot's options too.
pub fn delete_box_product(
    tx: &mut dyn BoxBuilderRepositories,
    shop: &Shop,
    id: BoxProductId,
) -> Result<(), DomainError> {
    if !tx.delete_box_product(shop.id, id)? {
        return Err(DomainError::not_found("box_product"));
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Box sizes

fn box_of(
    tx: &mut dyn BoxBuilderRepositories,
    shop: &Shop,
    box_id: BoxId,
) -> Result<(), DomainError> {
    found(tx.subscription_box(shop.id, box_id)?, "box").map(drop)
}

/// List Box Sizes: a page of the box's sizes, by id; 404 for an unknown box.
pub fn list_box_sizes(
    tx: &mut dyn BoxBuilderRepositories,
    shop: &Shop,
    box_id: BoxId,
    limit: i64,
    page: i64,
) -> Result<Page<BoxSize>, DomainError> {
    box_of(tx, shop, box_id)?;
    Ok(page_of(
        shop,
        tx.box_sizes(shop.id, box_id, limit, page)?,
        limit,
        page,
    ))
}

/// Get Box Size: the shop's box size `id`; 404 for none (or another shop's).
pub fn get_box_size(
    tx: &mut dyn BoxBuilderRepositories,
    shop: &Shop,
    id: BoxSizeId,
) -> Result<BoxSize, DomainError> {
    Ok(found(tx.box_size(shop.id, id)?, "box_size")?.in_shop(shop))
}

/// `input` applied to `size`; `0 ≤ min_quantity ≤ max_quantity` checked, problems named
/// under `at`.
fn sized(
    mut size: BoxSize,
    input: BoxSizeInput,
    at: &str,
    now: Timestamp,
) -> Result<BoxSize, FieldError> {
    if let Some(name) = input.box_size_name {
        size.box_size_name = name;
    }
    if let Some(min) = input.min_quantity {
        size.min_quantity = min;
    }
    if let Some(max) = input.max_quantity {
        size.max_quantity = max;
    }
    if size.max_quantity < size.min_quantity {
        let field = path(at, "max_quantity");
        let message = format!(
            "{field} must be at least min_quantity ({})",
            size.min_quantity
        );
        return Err(FieldError::new(field, "out_of_range", message));
    }
    size.updated_at = now;
    Ok(size)
}

fn new_size(box_id: BoxId, now: Timestamp) -> BoxSize {
    BoxSize {
        id: BoxSizeId(0),
        box_id,
        shop_identifier: String::new(),
        box_size_name: String::new(),
        pricing_mode: FLEXIBLE_PRICING.to_string(),
        min_quantity: 0,
        max_quantity: 0,
        created_at: now,
        updated_at: now,
    }
}

/// Create Box Size.
pub fn create_box_size(
    tx: &mut dyn BoxBuilderRepositories,
    shop: &Shop,
    box_id: BoxId,
    input: BoxSizeInput,
    now: Timestamp,
) -> Result<BoxSize, DomainError> {
    box_of(tx, shop, box_id)?;
    let size = sized(new_size(box_id, now), input, "box_size", now)
        .map_err(|problem| DomainError::Invalid(vec![problem]))?;
    Ok(tx.save_box_size(shop.id, &size)?.in_shop(shop))
}

/// Update Box Size: the fields given replace the stored ones.
pub fn update_box_size(
    tx: &mut dyn BoxBuilderRepositories,
    shop: &Shop,
    id: BoxSizeId,
    input: BoxSizeInput,
    now: Timestamp,
) -> Result<BoxSize, DomainError> {
    let stored = found(tx.box_size(shop.id, id)?, "box_size")?;
    let size = sized(stored, input, "box_size", now)
        .map_err(|problem| DomainError::Invalid(vec![problem]))?;
    Ok(tx.save_box_size(shop.id, &size)?.in_shop(shop))
}

/// Update Box Sizes (bulk): each size with an id (one of this box's) is changed, each without
/// is created, all in the caller's one transaction: a problem with any is a 422 naming it
/// (`[2].max_quantity`), and none is written.
pub fn update_box_sizes(
    tx: &mut dyn BoxBuilderRepositories,
    shop: &Shop,
    box_id: BoxId,
    inputs: Vec<BoxSizeInput>,
    now: Timestamp,
) -> Result<Vec<BoxSize>, DomainError> {
    box_of(tx, shop, box_id)?;
    let mut problems = Vec::new();
    let mut sizes = Vec::with_capacity(inputs.len());
    for (index, input) in inputs.into_iter().enumerate() {
        let at = format!("[{index}]");
        let base = match input.id {
            None => new_size(box_id, now),
            Some(id) => match tx.box_size(shop.id, id)? {
                Some(size) if size.box_id == box_id => size,
                _ => {
                    problems.push(FieldError::new(
                        format!("{at}.id"),
                        "unknown_box_size",
                        format!("box {box_id} has no size {id}"),
                    ));
                    continue;
                }
            },
        };
        match sized(base, input, &at, now) {
            Ok(size) => sizes.push(size),
            Err(problem) => problems.push(problem),
        }
    }
    if !problems.is_empty() {
        return Err(DomainError::Invalid(problems));
    }
    let saved = sizes
        .iter()
        .map(|size| tx.save_box_size(shop.id, size))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(saved.in_shop(shop))
}

// ---------------------------------------------------------------------------------------
// Time slots

/// `visibility_date ≤ selection_deadline_date ≤ start_date ≤ end_date`; the first date out of
/// order is named.
fn check_dates(slot: &TimeSlot, at: &str) -> Result<(), DomainError> {
    let order = [
        ("visibility_date", slot.visibility_date),
        ("selection_deadline_date", slot.selection_deadline_date),
        ("start_date", slot.start_date),
        ("end_date", slot.end_date),
    ];
    for pair in order.windows(2) {
        let ((before, earlier), (after, later)) = (pair[0], pair[1]);
        if later < earlier {
            let field = path(at, after);
            let message = format!("{field} must not be before {before}");
            return Err(DomainError::Invalid(vec![FieldError::new(
                field,
                "out_of_order",
                message,
            )]));
        }
    }
    Ok(())
}

fn slotted(
    mut slot: TimeSlot,
    input: TimeSlotInput,
    now: Timestamp,
) -> Result<TimeSlot, DomainError> {
    if let Some(name) = input.time_slot_name {
        slot.time_slot_name = name;
    }
    let dates = [
        (&mut slot.start_date, input.start_date),
        (&mut slot.end_date, input.end_date),
        (
            &mut slot.selection_deadline_date,
            input.selection_deadline_date,
        ),
        (&mut slot.visibility_date, input.visibility_date),
    ];
    for (date, given) in dates {
        if let Some(given) = given {
            *date = given;
        }
    }
    if let Some(attributes) = input.attributes {
        slot.attributes = merge_attributes(&slot.attributes, &attributes, now);
    }
    check_dates(&slot, &input.path)?;
    slot.updated_at = now;
    Ok(slot)
}

/// List Time Slots of a box; with `holding`, those whose `start_date..=end_date` holds it.
pub fn list_time_slots(
    tx: &mut dyn BoxBuilderRepositories,
    shop: &Shop,
    box_id: BoxId,
    filter: TimeSlotFilter,
    limit: i64,
    page: i64,
) -> Result<Page<TimeSlot>, DomainError> {
    box_of(tx, shop, box_id)?;
    let slots = tx.time_slots(shop.id, box_id, filter, limit, page)?;
    Ok(page_of(shop, slots, limit, page))
}

/// Get Time Slot: the shop's time slot `id`, with its products; 404 for none (or another
/// shop's).
pub fn get_time_slot(
    tx: &mut dyn BoxBuilderRepositories,
    shop: &Shop,
    id: TimeSlotId,
) -> Result<TimeSlot, DomainError> {
    Ok(found(tx.time_slot(shop.id, id)?, "time_slot")?.in_shop(shop))
}

/// Create Time Slot (201).
pub fn create_time_slot(
    tx: &mut dyn BoxBuilderRepositories,
    shop: &Shop,
    box_id: BoxId,
    input: TimeSlotInput,
    now: Timestamp,
) -> Result<TimeSlot, DomainError> {
    box_of(tx, shop, box_id)?;
    let blank = TimeSlot {
        id: TimeSlotId(0),
        box_id,
        shop_identifier: String::new(),
        time_slot_name: String::new(),
        start_date: now,
        end_date: now,
        selection_deadline_date: now,
        visibility_date: now,
        created_at: now,
        updated_at: now,
        attributes: Vec::new(),
        box_products: Vec::new(),
    };
    let slot = slotted(blank, input, now)?;
    Ok(tx.save_time_slot(shop.id, &slot)?.in_shop(shop))
}

/// Update Time Slot: the fields given replace the stored ones; the dates stay in order.
pub fn update_time_slot(
    tx: &mut dyn BoxBuilderRepositories,
    shop: &Shop,
    id: TimeSlotId,
    input: TimeSlotInput,
    now: Timestamp,
) -> Result<TimeSlot, DomainError> {
    let stored = found(tx.time_slot(shop.id, id)?, "time_slot")?;
    let slot = slotted(stored, input, now)?;
    Ok(tx.save_time_slot(shop.id, &slot)?.in_shop(shop))
}

/// Delete Time Slot (204), with its options; 409 while customers' selections are made in it.
pub fn delete_time_slot(
    tx: &mut dyn BoxBuilderRepositories,
    shop: &Shop,
    id: TimeSlotId,
) -> Result<(), DomainError> {
    let selections = tx.selections_of_time_slot(shop.id, id)?;
    if selections > 0 {
        return Err(in_use(
            "time_slot.in_use",
            format!(
                "{selections} customer selection(s) are made in this time slot; delete them first"
            ),
        ));
    }
    if !tx.delete_time_slot(shop.id, id)? {
        return Err(DomainError::not_found("time_slot"));
    }
    Ok(())
}

/// List Time Slot Options: the products offered in the slot, in order.
pub fn list_time_slot_options(
    tx: &mut dyn BoxBuilderRepositories,
    shop: &Shop,
    time_slot_id: TimeSlotId,
) -> Result<Vec<TimeSlotOption>, DomainError> {
    let slot = found(tx.time_slot(shop.id, time_slot_id)?, "time_slot")?;
    Ok(slot
        .box_products
        .iter()
        .map(|product| TimeSlotOption {
            box_product_id: product.id,
            time_slot_id,
        })
        .collect())
}

/// Create Time Slot Option: a box product of the shop (422 on `box_product_id` otherwise) is
/// offered in the slot; offering it again changes nothing.
pub fn add_time_slot_option(
    tx: &mut dyn BoxBuilderRepositories,
    shop: &Shop,
    time_slot_id: TimeSlotId,
    box_product_id: BoxProductId,
    now: Timestamp,
) -> Result<TimeSlotOption, DomainError> {
    found(tx.time_slot(shop.id, time_slot_id)?, "time_slot")?;
    if tx.box_product(shop.id, box_product_id)?.is_none() {
        return Err(DomainError::invalid(
            "box_product_id",
            "unknown_box_product",
            format!("the shop has no box product {box_product_id}"),
        ));
    }
    tx.add_time_slot_option(shop.id, time_slot_id, box_product_id, now)?;
    Ok(TimeSlotOption {
        box_product_id,
        time_slot_id,
    })
}

/// Delete Time Slot Option (204); 404 when the slot does not offer the product.
pub fn remove_time_slot_option(
    tx: &mut dyn BoxBuilderRepositories,
    shop: &Shop,
    time_slot_id: TimeSlotId,
    box_product_id: BoxProductId,
) -> Result<(), DomainError> {
    found(tx.time_slot(shop.id, time_slot_id)?, "time_slot")?;
    if !tx.remove_time_slot_option(shop.id, time_slot_id, box_product_id)? {
        return Err(DomainError::not_found("time_slot_option"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;
    use crate::access::shop::{ShopInput, create_shop};
    use crate::box_builder::input::{
        parse_box, parse_box_product, parse_box_size, parse_box_sizes, parse_time_slot,
    };
    use crate::box_builder::repository::BoxBuilderDatabase;
    use crate::platform::events::{
        EntityKind, EventAction, EventSource, apply_event, parse_event_body,
    };
    use crate::ports::Database;
    use crate::subscriptions::groups::{create_group, delete_group, parse_group};
    use crate::testing::MemoryDatabase;

    fn at(seconds: i64) -> Timestamp {
        Timestamp::from_micros(1_795_000_000_000_000).plus_seconds(seconds)
    }

    struct World {
        db: MemoryDatabase,
        shop: Shop,
        group: GroupId,
    }

    /// A shop with a subscription group and a catalogue of one product with two variants.
    fn world() -> World {
        let db = MemoryDatabase::default();
        let shop = db
            .write(|tx| {
                create_shop(
                    tx,
                    ShopInput {
                        shop_domain: "box.shop.test".into(),
                        ..ShopInput::default()
                    },
                    at(0),
                )
            })
            .unwrap();
        let group = db
            .write(|tx| {
                let input = parse_group(
                    &json!({"name": "Veg", "billing_rules": [{"interval_number": 1, "interval_type": "week"}]}),
                    true,
                )?;
                create_group(tx, &shop, input, at(0))
            })
            .unwrap()
            .id;
        let product = json!({"data": {"product": {"platform_id": "veg", "platform_updated_at": "2026-11-01T00:00:00Z",
            "variants": [{"platform_id": "carrot", "price": "2.00"}, {"platform_id": "kale", "price": "3.00"}]}}});
        let event = parse_event_body(
            shop.id,
            EntityKind::Product,
            EventAction::Saved,
            product.to_string().as_bytes(),
            EventSource::Webhook,
            at(0),
        )
        .unwrap();
        db.write(|tx| apply_event(tx, &event, at(0))).unwrap();
        World { db, shop, group }
    }

    fn refused<T: std::fmt::Debug>(result: Result<T, DomainError>) -> Vec<(String, &'static str)> {
        match result {
            Err(DomainError::Invalid(problems)) => {
                problems.into_iter().map(|p| (p.field, p.code)).collect()
            }
            other => panic!("{other:?}"),
        }
    }

    impl World {
        fn new_box(&self, body: Value) -> Result<SubscriptionBox, DomainError> {
            let input = parse_box(&body, true)?;
            self.db
                .write_tx(|tx| create_box(tx, &self.shop, input, at(1)))
        }

        fn new_product(&self, variant: &str) -> Result<BoxProduct, DomainError> {
            let input = parse_box_product(
                &json!({"box_product": {"platform_product_id": "veg", "platform_variant_id": variant}}),
                true,
            )?;
            self.db
                .write_tx(|tx| create_box_product(tx, &self.shop, input, at(1)))
        }
    }

    #[test]
    fn a_box_is_sold_under_one_group_of_the_shop() {
        let w = world();
        let made = w
            .new_box(
                json!({"box": {"svc_subscription_group_id": w.group, "box_name": "Veg box",
                "attributes": [{"attribute_key": "color", "attribute_value": "green"}]}}),
            )
            .unwrap();
        assert_eq!(made.shop_identifier, w.shop.identifier.as_str());
        assert_eq!(
            made.attributes[0].shop_identifier,
            w.shop.identifier.as_str()
        );
        assert_eq!(
            refused(
                w.new_box(json!({"svc_subscription_group_id": w.group.0 + 9, "box_name": "x"}))
            ),
            [("box.svc_subscription_group_id".to_string(), "unknown_group")]
        );
        let second = w.new_box(json!({"svc_subscription_group_id": w.group, "box_name": "x"}));
        assert!(
            matches!(
                second,
                Err(DomainError::Conflict {
                    code: "box.group_taken",
                    ..
                })
            ),
            "{second:?}"
        );
        // Its group cannot be deleted while it is sold as a box.
        let group_delete = w.db.write_tx(|tx| delete_group(tx, &w.shop, w.group));
        assert!(
            matches!(group_delete, Err(DomainError::Conflict { .. })),
            "{group_delete:?}"
        );
        let renamed =
            w.db.write_tx(|tx| {
                update_box(
                    tx,
                    &w.shop,
                    made.id,
                    parse_box(&json!({"box_name": "Big veg"}), false)?,
                    at(2),
                )
            })
            .unwrap();
        assert_eq!(
            (renamed.box_name.as_str(), renamed.attributes.len()),
            ("Big veg", 1)
        );
        w.db.write_tx(|tx| delete_box(tx, &w.shop, made.id))
            .unwrap();
        w.db.write_tx(|tx| delete_group(tx, &w.shop, w.group))
            .unwrap();
    }

    #[test]
    fn a_box_product_is_a_variant_of_the_catalogue() {
        let w = world();
        let carrot = w.new_product("carrot").unwrap();
        assert_eq!(carrot.platform_variant_id, "carrot");
        assert_eq!(
            refused(w.new_product("parsnip")),
            [(
                "box_product.platform_variant_id".to_string(),
                "not_in_catalogue"
            )]
        );
        let wrong_product = parse_box_product(
            &json!({"platform_product_id": "fruit", "platform_variant_id": "kale"}),
            true,
        )
        .unwrap();
        assert_eq!(
            refused(w.db.write_tx(|tx| create_box_product(tx, &w.shop, wrong_product, at(1)))),
            [(
                "box_product.platform_product_id".to_string(),
                "not_in_catalogue"
            )]
        );
    }

    #[test]
    fn sizes_keep_min_below_max_and_a_bulk_update_is_all_or_nothing() {
        let w = world();
        let veg = w
            .new_box(json!({"svc_subscription_group_id": w.group, "box_name": "Veg box"}))
            .unwrap();
        let small = w
            .db
            .write_tx(|tx| {
                let input = parse_box_size(&json!({"box_size": {"box_size_name": "Small", "min_quantity": 2, "max_quantity": 4}}), true)?;
                create_box_size(tx, &w.shop, veg.id, input, at(1))
            })
            .unwrap();
        assert_eq!(small.pricing_mode, FLEXIBLE_PRICING);
        let bulk = |body: Value| {
            w.db.write_tx(|tx| {
                update_box_sizes(tx, &w.shop, veg.id, parse_box_sizes(&body)?, at(2))
            })
        };
        // One bad size: nothing is written.
        assert_eq!(
            refused(bulk(json!([{"id": small.id, "max_quantity": 6},
                                 {"box_size_name": "Large", "min_quantity": 9, "max_quantity": 8}]))),
            [("[1].max_quantity".to_string(), "out_of_range")]
        );
        let (sizes, _) =
            w.db.read_tx(|tx| list_box_sizes(tx, &w.shop, veg.id, 50, 1))
                .unwrap();
        assert_eq!(sizes, std::slice::from_ref(&small));
        let saved = bulk(json!({"box_sizes": [{"id": small.id, "max_quantity": 6},
                               {"box_size_name": "Large", "min_quantity": 6, "max_quantity": 8}]}))
        .unwrap();
        assert_eq!((saved[0].id, saved[0].max_quantity), (small.id, 6));
        assert_eq!(saved[1].box_size_name, "Large");
        assert_eq!(
            refused(bulk(json!([{"id": 999, "max_quantity": 6}]))),
            [("[0].id".to_string(), "unknown_box_size")]
        );
    }

    #[test]
    fn time_slots_keep_their_dates_in_order_and_offer_box_products() {
        let w = world();
        let veg = w
            .new_box(json!({"svc_subscription_group_id": w.group, "box_name": "Veg box"}))
            .unwrap();
        let slot = |body: Value| {
            w.db.write_tx(|tx| {
                create_time_slot(tx, &w.shop, veg.id, parse_time_slot(&body, true)?, at(1))
            })
        };
        let week = json!({"time_slot": {"time_slot_name": "Week 1",
            "visibility_date": "2026-12-01T00:00:00Z", "selection_deadline_date": "2026-12-05T00:00:00Z",
            "start_date": "2026-12-07T00:00:00Z", "end_date": "2026-12-13T23:59:59Z"}});
        let first = slot(week.clone()).unwrap();
        let mut late = week.clone();
        late["time_slot"]["selection_deadline_date"] = json!("2026-12-08T00:00:00Z");
        assert_eq!(
            refused(slot(late)),
            [("time_slot.start_date".to_string(), "out_of_order")]
        );
        let carrot = w.new_product("carrot").unwrap();
        let kale = w.new_product("kale").unwrap();
        for product in [&kale, &carrot, &kale] {
            w.db.write_tx(|tx| add_time_slot_option(tx, &w.shop, first.id, product.id, at(2)))
                .unwrap();
        }
        let read =
            w.db.read_tx(|tx| get_time_slot(tx, &w.shop, first.id))
                .unwrap();
        assert_eq!(
            read.box_products.iter().map(|p| p.id).collect::<Vec<_>>(),
            [kale.id, carrot.id],
            "in the order offered, once each"
        );
        // The order_datetime filter: slots holding the instant.
        let holding = |instant: &str| {
            let filter = TimeSlotFilter {
                holding: Timestamp::parse_rfc3339(instant),
                visible_at: None,
            };
            w.db.read_tx(|tx| list_time_slots(tx, &w.shop, veg.id, filter, 50, 1))
                .unwrap()
                .0
                .len()
        };
        assert_eq!(
            (
                holding("2026-12-10T12:00:00Z"),
                holding("2026-12-20T00:00:00Z")
            ),
            (1, 0)
        );
        // A box product deleted leaves every slot's options.
        w.db.write_tx(|tx| delete_box_product(tx, &w.shop, kale.id))
            .unwrap();
        let options =
            w.db.read_tx(|tx| list_time_slot_options(tx, &w.shop, first.id))
                .unwrap();
        assert_eq!(
            options,
            [TimeSlotOption {
                box_product_id: carrot.id,
                time_slot_id: first.id
            }]
        );
        assert!(matches!(
            w.db.write_tx(|tx| add_time_slot_option(tx, &w.shop, first.id, kale.id, at(3))),
            Err(DomainError::Invalid(_))
        ));
        w.db.write_tx(|tx| remove_time_slot_option(tx, &w.shop, first.id, carrot.id))
            .unwrap();
        assert!(matches!(
            w.db.write_tx(|tx| remove_time_slot_option(tx, &w.shop, first.id, carrot.id)),
            Err(DomainError::NotFound { .. })
        ));
    }
}
