//! What the operator console shows of a shop's boxes: the boxes, and a box with its sizes, its
//! time slots (delivery windows with their selection deadlines and how many selections each
//! holds) and the products offered in them, each read through the API's own use cases.

use crate::access::shop::Shop;
use crate::box_builder::admin::{get_box, list_box_sizes, list_boxes, list_time_slots};
use crate::box_builder::repository::{BoxBuilderRepositories, TimeSlotFilter};
use crate::box_builder::resources::{BoxProduct, BoxSize, SubscriptionBox, TimeSlot};
use crate::kernel::error::DomainError;
use crate::kernel::ids::BoxId;

/// A page of the shop's boxes.
#[derive(Debug, Clone, PartialEq)]
pub struct BoxPage {
    /// The boxes, by id.
    pub boxes: Vec<SubscriptionBox>,
    /// Whether another page follows.
    pub has_more: bool,
}

/// Page `page` (from 1) of the shop's boxes, `limit` a page.
pub fn boxes(
    tx: &mut dyn BoxBuilderRepositories,
    shop: &Shop,
    page: i64,
    limit: i64,
) -> Result<BoxPage, DomainError> {
    let (boxes, pagination) = list_boxes(tx, shop, limit, page.max(1))?;
    Ok(BoxPage {
        boxes,
        has_more: pagination.current_page < pagination.total_pages,
    })
}

/// A time slot with how many customers' selections are made in it.
#[derive(Debug, Clone, PartialEq)]
pub struct SlotLine {
    /// The slot, with the products it offers.
    pub slot: TimeSlot,
    /// How many selections are made in it.
    pub selections: i64,
}

/// A box with its sizes, a page of its time slots and the products those slots offer.
#[derive(Debug, Clone, PartialEq)]
pub struct BoxDetail {
    /// The box.
    pub subscription_box: SubscriptionBox,
    /// Its sizes (the first `limit`), by id.
    pub sizes: Vec<BoxSize>,
    /// Its time slots of the page, by start.
    pub slots: Vec<SlotLine>,
    /// Whether more slots follow.
    pub more_slots: bool,
    /// The products the page's slots offer, each once, in the order first offered.
    pub products: Vec<BoxProduct>,
}

/// The shop's box `id` (404 for another shop's) with its sizes and page `slot_page` of its
/// time slots, `limit` a page.
pub fn box_detail(
    tx: &mut dyn BoxBuilderRepositories,
    shop: &Shop,
    id: BoxId,
    slot_page: i64,
    limit: i64,
) -> Result<BoxDetail, DomainError> {
    let subscription_box = get_box(tx, shop, id)?;
    let (sizes, _) = list_box_sizes(tx, shop, id, limit, 1)?;
    let (slots, pagination) = list_time_slots(
        tx,
        shop,
        id,
        TimeSlotFilter::default(),
        limit,
        slot_page.max(1),
    )?;
    let mut products: Vec<BoxProduct> = Vec::new();
    let mut lines = Vec::with_capacity(slots.len());
    for slot in slots {
        for product in &slot.box_products {
            if !products.iter().any(|p| p.id == product.id) {
                products.push(product.clone());
            }
        }
        let selections = tx.selections_of_time_slot(shop.id, slot.id)?;
        lines.push(SlotLine { slot, selections });
    }
    Ok(BoxDetail {
        subscription_box,
        sizes,
        slots: lines,
        more_slots: pagination.current_page < pagination.total_pages,
        products,
    })
}
