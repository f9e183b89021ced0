//! The storefront's reads (docs/box-builder.md "Storefront"): a shop's boxes,
//! their sizes, and their time slots once visible, for shoppers with no credentials. Only what
//! a shop shows its visitors: no selections, no subscription line items, no other shop's data.

use crate::access::shop::find_shop;
use crate::box_builder::admin::{self, Page};
use crate::box_builder::repository::{BoxBuilderRepositories, TimeSlotFilter};
use crate::box_builder::resources::{BoxSize, SubscriptionBox, TimeSlot};
use crate::kernel::error::DomainError;
use crate::kernel::ids::BoxId;
use crate::kernel::time::Timestamp;

/// Storefront: List Boxes of the shop `shop_identifier` (404 for no such shop).
pub fn storefront_boxes(
    tx: &mut dyn BoxBuilderRepositories,
    shop_identifier: &str,
    limit: i64,
    page: i64,
) -> Result<Page<SubscriptionBox>, DomainError> {
    let shop = find_shop(tx, shop_identifier)?;
    admin::list_boxes(tx, &shop, limit, page)
}

/// Storefront: Get Box.
pub fn storefront_box(
    tx: &mut dyn BoxBuilderRepositories,
    shop_identifier: &str,
    box_id: BoxId,
) -> Result<SubscriptionBox, DomainError> {
    let shop = find_shop(tx, shop_identifier)?;
    admin::get_box(tx, &shop, box_id)
}

/// Storefront: List Time Slots: only those whose `visibility_date` is not after `now`;
/// `holding` narrows them to the slots holding that instant, as the admin list does.
pub fn storefront_time_slots(
    tx: &mut dyn BoxBuilderRepositories,
    shop_identifier: &str,
    box_id: BoxId,
    holding: Option<Timestamp>,
    now: Timestamp,
    limit: i64,
    page: i64,
) -> Result<Page<TimeSlot>, DomainError> {
    let shop = find_shop(tx, shop_identifier)?;
    let filter = TimeSlotFilter {
        holding,
        visible_at: Some(now),
    };
    admin::list_time_slots(tx, &shop, box_id, filter, limit, page)
}

/// Storefront: Get Box Sizes.
pub fn storefront_box_sizes(
    tx: &mut dyn BoxBuilderRepositories,
    shop_identifier: &str,
    box_id: BoxId,
    limit: i64,
    page: i64,
) -> Result<Page<BoxSize>, DomainError> {
    let shop = find_shop(tx, shop_identifier)?;
    admin::list_box_sizes(tx, &shop, box_id, limit, page)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::box_builder::repository::BoxBuilderDatabase;
    use crate::box_builder::selections::tests::{NOW, at, world};
    use crate::kernel::ids::TimeSlotId;

    #[test]
    fn the_storefront_shows_the_shops_boxes_and_only_visible_slots() {
        let w = world();
        let shop = w.shop.identifier.as_str().to_string();
        let (boxes, pagination) =
            w.db.read_tx(|tx| storefront_boxes(tx, &shop, 50, 1))
                .unwrap();
        assert_eq!((boxes[0].id, pagination.total), (w.box_id, 1));
        assert_eq!(boxes[0].shop_identifier, shop);
        let slots = |now: &str, holding: Option<&str>| {
            w.db.read_tx(|tx| {
                storefront_time_slots(tx, &shop, w.box_id, holding.map(at), at(now), 50, 1)
            })
            .unwrap()
            .0
            .into_iter()
            .map(|slot| slot.id)
            .collect::<Vec<_>>()
        };
        // The slot is visible from 1 January 2030.
        assert_eq!(slots(NOW, None), [w.slot]);
        assert_eq!(
            slots("2029-12-31T23:59:59Z", None),
            Vec::<TimeSlotId>::new()
        );
        assert_eq!(slots(NOW, Some("2030-01-08T00:00:00Z")), [w.slot]);
        assert_eq!(
            slots(NOW, Some("2030-02-08T00:00:00Z")),
            Vec::<TimeSlotId>::new()
        );
        let sizes =
            w.db.read_tx(|tx| storefront_box_sizes(tx, &shop, w.box_id, 50, 1))
                .unwrap();
        assert_eq!(sizes.0[0].id, w.size);
        // No such shop, or a box of none: 404.
        assert!(matches!(
            w.db.read_tx(|tx| storefront_boxes(tx, "0123456789abcdef0123456789abcdef", 50, 1)),
            Err(DomainError::NotFound { resource: "shop" })
        ));
        assert!(matches!(
            w.db.read_tx(|tx| storefront_box(tx, &shop, BoxId(w.box_id.0 + 100))),
            Err(DomainError::NotFound { resource: "box" })
        ));
    }
}
