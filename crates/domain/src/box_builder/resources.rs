//! The box builder's resources, as the API shows them. The store keeps them
//! without their shop's identifier, which `InShop::in_shop` adds on the way out.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::access::shop::Shop;
use crate::kernel::ids::{
    BoxId, BoxProductId, BoxSizeId, GroupId, LineItemId, SelectionId, TimeSlotId,
};
use crate::kernel::time::Timestamp;
use crate::subscriptions::resources::SubscriptionLineItem;

/// The one pricing mode of a box size.
pub(crate) const FLEXIBLE_PRICING: &str = "flexible_pricing";

/// A key/value pair kept with a box, a box product, a time slot or a box's subscription line
/// item.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Attribute {
    /// Unique among the attributes of its resource.
    pub id: i64,
    /// The identifier of its shop; empty as stored, filled in when shown.
    #[serde(default)]
    pub shop_identifier: String,
    /// The key, unique among its resource's attributes (1 to 255 characters).
    pub attribute_key: String,
    /// The value.
    pub attribute_value: String,
    /// When the key was added.
    pub created_at: Timestamp,
    /// When its value last changed.
    pub updated_at: Timestamp,
}

/// A box: a subscription group made a build-your-own box.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct SubscriptionBox {
    /// The box's id (the service's integer).
    #[schema(value_type = i64)]
    pub id: BoxId,
    /// The id of the subscription group it is sold under (one box per group).
    #[schema(value_type = i64)]
    pub svc_subscription_group_id: GroupId,
    /// The identifier of its shop; empty as stored, filled in when shown.
    pub shop_identifier: String,
    /// The box's name, for people (1 to 255 characters).
    pub box_name: String,
    /// When it was created.
    pub created_at: Timestamp,
    /// When it was last changed.
    pub updated_at: Timestamp,
    /// Its attributes.
    pub attributes: Vec<Attribute>,
}

/// A product (a variant of the catalogue) boxes may hold.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct BoxProduct {
    /// The box product's id (the service's integer).
    #[schema(value_type = i64)]
    pub id: BoxProductId,
    /// The platform id of the catalogue's product.
    pub platform_product_id: String,
    /// The platform id of the product's variant, a live one when the box product was saved.
    pub platform_variant_id: String,
    /// When it was created.
    pub created_at: Timestamp,
    /// When it was last changed.
    pub updated_at: Timestamp,
    /// Its attributes.
    pub attributes: Vec<Attribute>,
}

/// How many products a box of this size holds.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct BoxSize {
    /// The size's id (the service's integer).
    #[schema(value_type = i64)]
    pub id: BoxSizeId,
    /// The id of its box.
    #[schema(value_type = i64)]
    pub box_id: BoxId,
    /// The identifier of its shop; empty as stored, filled in when shown.
    pub shop_identifier: String,
    /// The size's name, for people (1 to 255 characters).
    pub box_size_name: String,
    /// How a box of this size is priced: `flexible_pricing`, the only mode (kept and shown only).
    pub pricing_mode: String,
    /// The fewest products a box of this size holds (0 or more).
    pub min_quantity: i64,
    /// The most products a box of this size holds (at least `min_quantity`).
    pub max_quantity: i64,
    /// When it was created.
    pub created_at: Timestamp,
    /// When it was last changed.
    pub updated_at: Timestamp,
}

/// A delivery window of a box: what is offered in it, and until when it can be chosen.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct TimeSlot {
    /// The slot's id (the service's integer).
    #[schema(value_type = i64)]
    pub id: TimeSlotId,
    /// The id of its box.
    #[schema(value_type = i64)]
    pub box_id: BoxId,
    /// The identifier of its shop; empty as stored, filled in when shown.
    pub shop_identifier: String,
    /// The slot's name, for people.
    pub time_slot_name: String,
    /// When the slot starts: the first order time it holds.
    pub start_date: Timestamp,
    /// When the slot ends: the last order time it holds.
    pub end_date: Timestamp,
    /// The last time a selection for the slot may be made or changed (by `start_date`).
    pub selection_deadline_date: Timestamp,
    /// When the storefront starts showing the slot (by the selection deadline).
    pub visibility_date: Timestamp,
    /// When it was created.
    pub created_at: Timestamp,
    /// When it was last changed.
    pub updated_at: Timestamp,
    /// Its attributes.
    pub attributes: Vec<Attribute>,
    /// The products offered in the slot (its options), in the order they were added.
    pub box_products: Vec<BoxProduct>,
}

/// A product offered in a time slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
pub struct TimeSlotOption {
    /// The id of the box product offered.
    #[schema(value_type = i64)]
    pub box_product_id: BoxProductId,
    /// The id of the slot that offers it.
    #[schema(value_type = i64)]
    pub time_slot_id: TimeSlotId,
}

/// A product chosen for a box, and how many.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct SelectionItem {
    /// The id of the box product chosen.
    #[schema(value_type = i64)]
    pub box_product_id: BoxProductId,
    /// How many of it go in each box (at least 1).
    #[schema(minimum = 1)]
    pub choice_quantity: i64,
}

/// What a customer chose for one order (`order_datetime`) of a box subscription line item.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct Selection {
    /// The selection's id (the service's integer).
    #[schema(value_type = i64)]
    pub id: SelectionId,
    /// The id of the box's subscription line item (the service's integer).
    #[schema(value_type = i64)]
    pub svc_platform_subscription_line_item_id: LineItemId,
    /// The id of the box size chosen.
    #[schema(value_type = i64)]
    pub box_size_id: BoxSizeId,
    /// The id of the time slot chosen.
    #[schema(value_type = i64)]
    pub time_slot_id: TimeSlotId,
    /// The time of the order it is for, within the slot.
    pub order_datetime: Timestamp,
    /// The products chosen; their quantities add up to within the size's bounds.
    pub line_items: Vec<SelectionItem>,
    /// When it was made.
    pub created_at: Timestamp,
    /// When it was last changed.
    pub updated_at: Timestamp,
}

/// A selection as stored: with the customer (platform id) it belongs to and its box.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredSelection {
    /// The selection.
    pub selection: Selection,
    /// The platform id of the customer who made it.
    pub platform_customer_id: String,
    /// The id of the box it is for.
    pub box_id: BoxId,
}

/// A subscription line item sold under a box's group: that box's line item.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct BoxLineItem {
    /// The identifier of its shop; empty until shown.
    pub shop_identifier: String,
    /// The id of the box sold under the line item's group.
    #[schema(value_type = i64)]
    pub box_id: BoxId,
    /// The subscription line item's id (the service's integer).
    #[schema(value_type = i64)]
    pub svc_platform_subscription_line_item_id: LineItemId,
    /// The line item's `line_item_attributes`, each numbered by its place (from 1).
    pub attributes: Vec<Attribute>,
    /// When the line item was created.
    pub created_at: Timestamp,
    /// When the line item was last changed.
    pub updated_at: Timestamp,
}

impl BoxLineItem {
    /// The line item of the box `box_id`: its `line_item_attributes` are its attributes, each
    /// numbered by its place (from 1).
    pub fn of(item: &SubscriptionLineItem, box_id: BoxId) -> BoxLineItem {
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
