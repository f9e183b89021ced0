//! Box orders (docs/box-builder.md "Box orders"): what the scheduler's order of a box
//! subscription holds. On each order, a line item sold under a box's group gives way to the
//! box's contents for that order date:
//!
//! - the customer's selection: each chosen variant at its catalogue price × `choice_quantity`;
//! - without a selection, the merchant's pick: the options of the time slot holding the date,
//!   in their order, one each, cycling until the box's first size's `min_quantity` (one of each
//!   option when that is 0);
//! - a chosen product that left the catalogue since is replaced by the merchant's pick of as
//!   many, and the order's note says which.
//!
//! The subscription's `percent_discount` comes off the order as off any other (`orders::charge`).

use crate::access::shop::Shop;
use crate::box_builder::repository::{BoxBuilderDatabase, BoxBuilderRepositories, TimeSlotFilter};
use crate::box_builder::resources::{BoxProduct, SelectionItem, SubscriptionBox};
use crate::kernel::error::DomainError;
use crate::kernel::money::Cents;
use crate::kernel::time::Timestamp;
use crate::platform::catalogue::{self, CatalogueVariant};
use crate::subscriptions::operations::{charged, too_large};
use crate::subscriptions::resources::{LineItemAttribute, Subscription, SubscriptionLineItem};
use crate::subscriptions::scheduler::{ComposedOrder, OrderContents};

/// The scheduler's [`OrderContents`] for boxes, reading in a unit of work of its own.
pub struct BoxOrders<D> {
    db: D,
}

impl<D> BoxOrders<D> {
    /// The box orders of the database `db`.
    pub fn new(db: D) -> Self {
        BoxOrders { db }
    }
}

impl<D: BoxBuilderDatabase + Send + Sync> OrderContents for BoxOrders<D> {
    fn compose(
        &self,
        shop: &Shop,
        subscription: &Subscription,
        order_datetime: Timestamp,
    ) -> Result<Option<ComposedOrder>, DomainError> {
        self.db
            .read_tx(|tx| compose_box_order(tx, shop, subscription, order_datetime))
    }
}

/// A product that goes in a box: on sale, with its unit price in the subscription's base
/// currency, and how many.
#[derive(Debug, Clone)]
struct Packed {
    product: BoxProduct,
    variant: CatalogueVariant,
    price: Cents,
    quantity: i64,
}

impl Packed {
    fn describe(&self) -> String {
        describe(&self.product, Some(&self.variant))
    }
}

/// How a box product reads in a note: its variant's name and ids.
fn describe(product: &BoxProduct, variant: Option<&CatalogueVariant>) -> String {
    let name = variant.and_then(|v| v.variant.name.clone().or_else(|| v.product.name.clone()));
    let ids = format!(
        "{}/{}",
        product.platform_product_id, product.platform_variant_id
    );
    match name {
        Some(name) => format!("{name} ({ids})"),
        None => ids,
    }
}

/// The order of `subscription` on `order_datetime` with its box line items filled; None when it
/// sells no box (the order holds its line items as subscribed).
pub(crate) fn compose_box_order(
    tx: &mut dyn BoxBuilderRepositories,
    shop: &Shop,
    subscription: &Subscription,
    order_datetime: Timestamp,
) -> Result<Option<ComposedOrder>, DomainError> {
    let mut boxed = false;
    let mut line_items = Vec::with_capacity(subscription.line_items.len());
    let mut notes = Vec::new();
    for item in &subscription.line_items {
        let box_id = match item.subscription_group_id {
            Some(group) => tx.box_of_group(shop.id, group)?,
            None => None,
        };
        let the_box = match box_id {
            Some(id) => tx.subscription_box(shop.id, id)?,
            None => None,
        };
        let Some(the_box) = the_box else {
            line_items.push(item.clone());
            continue;
        };
        boxed = true;
        let (packed, note) = pack(tx, shop, subscription, &the_box, item, order_datetime)?;
        notes.push(note);
        if packed.is_empty() {
            line_items.push(item.clone());
        }
        for content in &packed {
            line_items.push(content_line(subscription, item, &the_box, content)?);
        }
    }
    // The box's order must be chargeable: its amounts work out without overflow.
    if boxed {
        let mut composed = subscription.clone();
        composed.line_items = line_items.clone();
        if crate::subscriptions::orders::try_charge(&composed).is_none() {
            return Err(too_large("line_items"));
        }
    }
    Ok(boxed.then(|| ComposedOrder {
        line_items,
        note: Some(notes.join("\n")).filter(|note| !note.is_empty()),
    }))
}

/// What goes in the box of `item` on the order of `at`, and the note saying how it was chosen.
fn pack(
    tx: &mut dyn BoxBuilderRepositories,
    shop: &Shop,
    subscription: &Subscription,
    the_box: &SubscriptionBox,
    item: &SubscriptionLineItem,
    at: Timestamp,
) -> Result<(Vec<Packed>, String), DomainError> {
    let name = &the_box.box_name;
    let selection = tx.selection_of_date(shop.id, item.id, at)?;
    let slot = match &selection {
        Some(stored) => tx.time_slot(shop.id, stored.selection.time_slot_id)?,
        None => {
            let holding = TimeSlotFilter {
                holding: Some(at),
                visible_at: None,
            };
            let (slots, _) = tx.time_slots(shop.id, the_box.id, holding, 1, 1)?;
            slots.into_iter().next()
        }
    };
    let Some(slot) = slot else {
        let note = format!(
            "{name}: no time slot holds this order's date; the box's line item is sent as subscribed."
        );
        return Ok((Vec::new(), note));
    };
    let offered = on_sale(tx, shop, subscription, &slot.box_products)?;
    let slot_name = &slot.time_slot_name;
    let Some(stored) = selection else {
        let (sizes, _) = tx.box_sizes(shop.id, the_box.id, 1, 1)?;
        let count = match sizes.first() {
            Some(size) if size.min_quantity > 0 => size.min_quantity,
            _ => offered.len() as i64,
        };
        let packed = merchant_pick(&offered, count);
        let note = if packed.is_empty() {
            format!(
                "{name}: no selection for this order, and nothing in {slot_name} is on sale; the box's line item is sent as subscribed."
            )
        } else {
            format!("{name}: no selection for this order; the merchant's pick from {slot_name}.")
        };
        return Ok((packed, note));
    };
    let (mut packed, gone) = chosen(tx, shop, subscription, &stored.selection.line_items)?;
    let mut note = format!("{name}: the customer's selection for {slot_name}.");
    let missing: i64 = gone.iter().map(|(_, quantity)| quantity).sum();
    if missing > 0 {
        let gone: Vec<String> = gone
            .iter()
            .map(|(what, quantity)| format!("{what} ×{quantity}"))
            .collect();
        let replacements = merchant_pick(&offered, missing);
        let by: Vec<String> = replacements
            .iter()
            .map(|r| format!("{} ×{}", r.describe(), r.quantity))
            .collect();
        note.push_str(&format!(" No longer sold: {}", gone.join(", ")));
        if by.is_empty() {
            note.push_str("; nothing on sale in the slot replaces it.");
        } else {
            note.push_str(&format!("; replaced by {}.", by.join(", ")));
        }
        for replacement in replacements {
            add(&mut packed, replacement);
        }
    }
    Ok((packed, note))
}

/// A chosen product no longer sold: how it reads in the note, and how many were chosen.
type Gone = (String, i64);

/// The selection's products still on sale, and those no longer (described, with how many were
/// chosen).
fn chosen(
    tx: &mut dyn BoxBuilderRepositories,
    shop: &Shop,
    subscription: &Subscription,
    items: &[SelectionItem],
) -> Result<(Vec<Packed>, Vec<Gone>), DomainError> {
    let (mut packed, mut gone) = (Vec::new(), Vec::new());
    for choice in items {
        let Some(product) = tx.box_product(shop.id, choice.box_product_id)? else {
            gone.push((
                format!("box product {}", choice.box_product_id),
                choice.choice_quantity,
            ));
            continue;
        };
        match on_sale(tx, shop, subscription, std::slice::from_ref(&product))?.pop() {
            Some(mut sold) => {
                sold.quantity = choice.choice_quantity;
                add(&mut packed, sold);
            }
            None => gone.push((describe(&product, None), choice.choice_quantity)),
        }
    }
    Ok((packed, gone))
}

/// The products of `products` on sale (a live variant of the catalogue, of that product, with
/// a price), in their order, one each.
fn on_sale(
    tx: &mut dyn BoxBuilderRepositories,
    shop: &Shop,
    subscription: &Subscription,
    products: &[BoxProduct],
) -> Result<Vec<Packed>, DomainError> {
    let ids: Vec<&str> = products
        .iter()
        .map(|p| p.platform_variant_id.as_str())
        .collect();
    let found = catalogue::variants(tx, shop.id, &ids)?;
    Ok(products
        .iter()
        .filter_map(|product| {
            let variant = found.get(&product.platform_variant_id)?;
            let of_product = variant.product.platform_id.as_ref()?.as_str();
            if of_product != product.platform_product_id {
                return None;
            }
            let price = variant.variant.price.as_ref()?;
            let price = Cents::from_decimal(price.as_str(), &subscription.base_currency)?;
            Some(Packed {
                product: product.clone(),
                variant: variant.clone(),
                price,
                quantity: 1,
            })
        })
        .collect())
}

/// The merchant's pick of `count` products: the products on sale, in their order, one each,
/// cycling.
fn merchant_pick(offered: &[Packed], count: i64) -> Vec<Packed> {
    let mut picked = Vec::new();
    if offered.is_empty() {
        return picked;
    }
    for index in 0..usize::try_from(count).unwrap_or(0) {
        let mut one = offered[index % offered.len()].clone();
        one.quantity = 1;
        add(&mut picked, one);
    }
    picked
}

/// Adds to the box: a product already in it gets the quantity added.
fn add(packed: &mut Vec<Packed>, more: Packed) {
    match packed.iter_mut().find(|p| p.product.id == more.product.id) {
        Some(there) => there.quantity = there.quantity.saturating_add(more.quantity),
        None => packed.push(more),
    }
}

/// One product of the box as a line of the order: the catalogue's variant at its price, as
/// many as chosen for each box the line item holds; it keeps the box line item's id and
/// attributes, and says which box product it is.
fn content_line(
    subscription: &Subscription,
    item: &SubscriptionLineItem,
    the_box: &SubscriptionBox,
    content: &Packed,
) -> Result<SubscriptionLineItem, DomainError> {
    let rate = subscription.base_to_charged_exchange_rate;
    let quantity = content
        .quantity
        .checked_mul(item.quantity.max(1))
        .ok_or_else(|| too_large("line_items.quantity"))?;
    let price_charged = charged(content.price, rate)?;
    let full = content
        .price
        .times(quantity)
        .ok_or_else(|| too_large("line_items.quantity"))?;
    let variant = &content.variant.variant;
    let mut attributes = item.line_item_attributes.clone();
    attributes.push(LineItemAttribute {
        name: "box_product_id".to_string(),
        value: content.product.id.to_string(),
        created_at: item.created_at,
        updated_at: item.updated_at,
        subscription_id: item.subscription_id,
        line_item_id: item.id,
    });
    Ok(SubscriptionLineItem {
        platform_id: None,
        platform_product_id: content.product.platform_product_id.clone(),
        platform_variant_id: content.product.platform_variant_id.clone(),
        title: Some(format!(
            "{}: {}",
            the_box.box_name,
            variant
                .name
                .clone()
                .or_else(|| content.variant.product.name.clone())
                .unwrap_or_else(|| content.product.platform_variant_id.clone())
        )),
        product_name: content.variant.product.name.clone(),
        variant_name: variant.name.clone(),
        sku: variant.sku.clone(),
        image: content.variant.image_url(),
        quantity,
        price: content.price,
        price_charged,
        discounted_price: content.price,
        discounted_price_charged: price_charged,
        full_price: full,
        full_price_charged: charged(full, rate)?,
        requires_shipping: variant.require_shipping.unwrap_or(true),
        taxable: !variant.tax_exempt.unwrap_or(false),
        grams: None,
        weight: None,
        weight_unit: None,
        discounts: Vec::new(),
        line_item_attributes: attributes,
        ..item.clone()
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::box_builder::selections::tests::{NOW, World, at, event, world};
    use crate::platform::events::EntityKind;
    use crate::subscriptions::operations::get_subscription;

    const ORDER: &str = "2030-01-07T09:00:00Z";

    fn compose(w: &World, order: &str) -> ComposedOrder {
        let subscription =
            w.db.read_tx(|tx| get_subscription(tx, &w.shop, w.subscription, false))
                .unwrap();
        BoxOrders::new(w.db.clone())
            .compose(&w.shop, &subscription, at(order))
            .unwrap()
            .expect("the subscription sells a box")
    }

    /// The order's lines: variant, quantity and unit price.
    fn lines(order: &ComposedOrder) -> Vec<(String, i64, i64)> {
        order
            .line_items
            .iter()
            .map(|item| {
                (
                    item.platform_variant_id.clone(),
                    item.quantity,
                    item.price.0,
                )
            })
            .collect()
    }

    #[test]
    fn the_box_holds_the_customers_selection_at_catalogue_prices() {
        let w = world();
        let items = json!([{"box_product_id": w.kale, "choice_quantity": 3}, {"box_product_id": w.carrot, "choice_quantity": 1}]);
        w.create("cust-1", w.body(items), NOW).unwrap();
        let order = compose(&w, ORDER);
        // The box line item gives way to the chosen products, in the order chosen; the other
        // line item stays as subscribed.
        assert_eq!(
            lines(&order),
            [
                ("kale".to_string(), 3, 300),
                ("carrot".to_string(), 1, 200),
                ("kale".to_string(), 1, 1000),
            ]
        );
        let kale = &order.line_items[0];
        assert_eq!(kale.id, w.line_item, "the box line item's id");
        assert_eq!(kale.full_price.0, 900);
        assert!(
            kale.line_item_attributes
                .iter()
                .any(|a| a.name == "box_product_id" && a.value == w.kale.to_string())
        );
        assert_eq!(
            order.note.as_deref(),
            Some("Veg box: the customer's selection for Week 1.")
        );
    }

    #[test]
    fn without_a_selection_the_box_holds_the_merchants_pick() {
        let w = world();
        let order = compose(&w, ORDER);
        // The first size's minimum (2): the slot's options in their order, one each.
        assert_eq!(
            lines(&order)[..2],
            [("carrot".to_string(), 1, 200), ("kale".to_string(), 1, 300)]
        );
        assert!(
            order
                .note
                .unwrap()
                .contains("the merchant's pick from Week 1")
        );
        // No slot holds the date: the line item as subscribed, and the note says why.
        let later = compose(&w, "2030-02-04T09:00:00Z");
        assert_eq!(lines(&later)[0], ("carrot".to_string(), 1, 1000));
        assert!(later.note.unwrap().contains("no time slot holds"));
    }

    #[test]
    fn a_chosen_product_no_longer_sold_is_replaced_by_the_merchants_pick() {
        let w = world();
        let items = json!([{"box_product_id": w.carrot, "choice_quantity": 1}, {"box_product_id": w.kale, "choice_quantity": 1}]);
        w.create("cust-1", w.body(items), NOW).unwrap();
        // The platform stops selling carrots.
        event(
            &w.db,
            &w.shop,
            EntityKind::Product,
            json!({"data": {"product": {"platform_id": "veg",
            "platform_updated_at": "2026-11-02T00:00:00Z",
            "variants": [{"platform_id": "kale", "price": "3.50"}]}}}),
        );
        let order = compose(&w, ORDER);
        assert_eq!(lines(&order)[..1], [("kale".to_string(), 2, 350)]);
        let note = order.note.unwrap();
        assert!(note.contains("No longer sold: veg/carrot ×1"), "{note}");
        assert!(note.contains("replaced by veg/kale ×1"), "{note}");
    }

    #[test]
    fn a_subscription_without_a_box_is_placed_as_subscribed() {
        let w = world();
        let subscription =
            w.db.read_tx(|tx| get_subscription(tx, &w.shop, w.subscription, false))
                .unwrap();
        let mut plain = subscription.clone();
        plain.line_items.retain(|item| item.id == w.other_line_item);
        let composed = BoxOrders::new(w.db.clone())
            .compose(&w.shop, &plain, at(ORDER))
            .unwrap();
        assert_eq!(composed, None);
    }
}
