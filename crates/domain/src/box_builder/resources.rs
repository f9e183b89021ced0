//! The box builder's resources (seed 002 §2.7), as the API shows them. The store keeps them
//! without their shop's identifier, which [`InShop::in_shop`] adds on the way out.

use serde::{Deserialize, Serialize};

use crate::access::shop::Shop;
use crate::kernel::time::Timestamp;
use crate::subscriptions::resources::SubscriptionLineItem;

/// The one pricing mode of a box size.
pub(crate) const FLEXIBLE_PRICING: &str = "flexible_pricing";

/// A key/value pair kept with a box, a box product, a time slot or a box's subscription line
/// item.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attribute {
    /// Unique among the attributes of its resource.
    pub id: i64,
    #[serde(default)]
    pub shop_identifier: String,
    pub attribute_key: String,
    pub attribute_value: String,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

/// A box: a subscription group made a build-your-own box.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SubscriptionBox {
    pub id: i64,
    pub svc_subscription_group_id: i64,
    pub shop_identifier: String,
    pub box_name: String,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    pub attributes: Vec<Attribute>,
}

/// A product (a variant of the catalogue) boxes may hold.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BoxProduct {
    pub id: i64,
    pub platform_product_id: String,
    pub platform_variant_id: String,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    pub attributes: Vec<Attribute>,
}

/// How many products a box of this size holds.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BoxSize {
    pub id: i64,
    pub box_id: i64,
    pub shop_identifier: String,
    pub box_size_name: String,
    pub pricing_mode: String,
    pub min_quantity: i64,
    pub max_quantity: i64,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

/// A delivery window of a box: what is offered in it, and until when it can be chosen.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TimeSlot {
    pub id: i64,
    pub box_id: i64,
    pub shop_identifier: String,
    pub time_slot_name: String,
    pub start_date: Timestamp,
    pub end_date: Timestamp,
    pub selection_deadline_date: Timestamp,
    pub visibility_date: Timestamp,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    pub attributes: Vec<Attribute>,
    /// The products offered in the slot (its options), in the order they were added.
    pub box_products: Vec<BoxProduct>,
}

/// A product offered in a time slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct TimeSlotOption {
    pub box_product_id: i64,
    pub time_slot_id: i64,
}

/// A product chosen for a box, and how many.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SelectionItem {
    pub box_product_id: i64,
    pub choice_quantity: i64,
}

/// What a customer chose for one order (`order_datetime`) of a box subscription line item.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Selection {
    pub id: i64,
    pub svc_platform_subscription_line_item_id: i64,
    pub box_size_id: i64,
    pub time_slot_id: i64,
    pub order_datetime: Timestamp,
    pub line_items: Vec<SelectionItem>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

/// A selection as stored: with the customer (platform id) it belongs to and its box.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredSelection {
    pub selection: Selection,
    pub platform_customer_id: String,
    pub box_id: i64,
}

/// A subscription line item sold under a box's group: that box's line item.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BoxLineItem {
    pub shop_identifier: String,
    pub box_id: i64,
    pub svc_platform_subscription_line_item_id: i64,
    pub attributes: Vec<Attribute>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

impl BoxLineItem {
    /// The line item of the box `box_id`: its `line_item_attributes` are its attributes, each
    /// numbered by its place (from 1).
    pub fn of(item: &SubscriptionLineItem, box_id: i64) -> BoxLineItem {
        let attributes = item
            .line_item_attributes
            .iter()
            .zip(1..)
            .map(|(attribute, id)| Attribute {
                id,
                shop_identifier: String::new(),
                attribute_key: attribute.name.clone(),
                attribute_value: attribute.value.clone(),
                created_at: attribute.created_at,
                updated_at: attribute.updated_at,
            })
            .collect();
        BoxLineItem {
            shop_identifier: String::new(),
            box_id,
            svc_platform_subscription_line_item_id: item.id,
            attributes,
            created_at: item.created_at,
            updated_at: item.updated_at,
        }
    }
}

/// A resource as shown for its shop: its (and its attributes') `shop_identifier` filled in.
pub(crate) trait InShop {
    fn in_shop(self, shop: &Shop) -> Self;
}

fn attributes_in(shop: &Shop, attributes: &mut [Attribute]) {
    for attribute in attributes {
        attribute.shop_identifier = shop.identifier.as_str().to_string();
    }
}

impl InShop for SubscriptionBox {
    fn in_shop(mut self, shop: &Shop) -> Self {
        self.shop_identifier = shop.identifier.as_str().to_string();
        attributes_in(shop, &mut self.attributes);
        self
    }
}

impl InShop for BoxProduct {
    fn in_shop(mut self, shop: &Shop) -> Self {
        attributes_in(shop, &mut self.attributes);
        self
    }
}

impl InShop for BoxSize {
    fn in_shop(mut self, shop: &Shop) -> Self {
        self.shop_identifier = shop.identifier.as_str().to_string();
        self
    }
}

impl InShop for TimeSlot {
    fn in_shop(mut self, shop: &Shop) -> Self {
        self.shop_identifier = shop.identifier.as_str().to_string();
        attributes_in(shop, &mut self.attributes);
        self.box_products = self
            .box_products
            .into_iter()
            .map(|product| product.in_shop(shop))
            .collect();
        self
    }
}

impl InShop for Selection {
    fn in_shop(self, _shop: &Shop) -> Self {
        self
    }
}

impl InShop for BoxLineItem {
    fn in_shop(mut self, shop: &Shop) -> Self {
        self.shop_identifier = shop.identifier.as_str().to_string();
        attributes_in(shop, &mut self.attributes);
        self
    }
}

impl<T: InShop> InShop for Vec<T> {
    fn in_shop(self, shop: &Shop) -> Self {
        self.into_iter().map(|item| item.in_shop(shop)).collect()
    }
}

/// The attributes `given` (key, value) make of `current`: an attribute of a key kept keeps its
/// id and creation time (its value and `updated_at` change when the value does), a new key is
/// a new attribute, and a key left out is removed.
pub(crate) fn merge_attributes(
    current: &[Attribute],
    given: &[(String, String)],
    now: Timestamp,
) -> Vec<Attribute> {
    let mut next_id = current.iter().map(|a| a.id).max().unwrap_or(0);
    given
        .iter()
        .map(
            |(key, value)| match current.iter().find(|a| a.attribute_key == *key) {
                Some(kept) if kept.attribute_value == *value => kept.clone(),
                Some(kept) => Attribute {
                    attribute_value: value.clone(),
                    updated_at: now,
                    ..kept.clone()
                },
                None => {
                    next_id += 1;
                    Attribute {
                        id: next_id,
                        shop_identifier: String::new(),
                        attribute_key: key.clone(),
                        attribute_value: value.clone(),
                        created_at: now,
                        updated_at: now,
                    }
                }
            },
        )
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attributes_keep_their_ids_by_key() {
        let at = |s: i64| Timestamp::from_micros(s * 1_000_000);
        let first = merge_attributes(
            &[],
            &[("color".into(), "red".into()), ("size".into(), "L".into())],
            at(1),
        );
        assert_eq!(first.iter().map(|a| a.id).collect::<Vec<_>>(), [1, 2]);
        let second = merge_attributes(
            &first,
            &[
                ("size".into(), "XL".into()),
                ("color".into(), "red".into()),
                ("new".into(), "x".into()),
            ],
            at(2),
        );
        assert_eq!(second[0].id, 2);
        assert_eq!(
            (second[0].attribute_value.as_str(), second[0].updated_at),
            ("XL", at(2))
        );
        assert_eq!(second[1], first[0], "unchanged");
        assert_eq!(second[2].id, 3);
        assert_eq!(second.len(), 3);
    }
}
