//! The box builder's resources, in memory, by the store's rules (`repos/box_builder/`).

use super::MemoryState;
use crate::box_builder::repository::{
    BoxRepository, LineItemOwner, SelectionFilter, TimeSlotFilter,
};
use crate::box_builder::resources::{
    BoxLineItem, BoxProduct, BoxSize, StoredSelection, SubscriptionBox, TimeSlot,
};
use crate::directory::DirectoryRepository;
use crate::kernel::error::StoreResult;
use crate::kernel::ids::ShopId;
use crate::kernel::ids::{
    BoxId, BoxProductId, BoxSizeId, GroupId, LineItemId, SelectionId, TimeSlotId,
};
use crate::kernel::time::Timestamp;
use crate::subscriptions::resources::SubscriptionLineItem;

/// A page of `items` (in the order given) and how many there are.
fn page<T: Clone>(items: Vec<T>, limit: i64, page: i64) -> (Vec<T>, i64) {
    let total = items.len() as i64;
    let skip =
        usize::try_from(page.max(1).saturating_sub(1).saturating_mul(limit)).unwrap_or(usize::MAX);
    let take = usize::try_from(limit).unwrap_or(0);
    (items.into_iter().skip(skip).take(take).collect(), total)
}

fn of_shop<T: Clone>(rows: &[(ShopId, T)], shop_id: ShopId) -> impl Iterator<Item = T> + '_ {
    rows.iter()
        .filter(move |(shop, _)| *shop == shop_id)
        .map(|(_, item)| item.clone())
}

/// A resource kept by its id (its integer: the counters hand out the next one).
trait Identified: Clone {
    fn id_mut(&mut self) -> &mut i64;
    fn id(&self) -> i64;
}

macro_rules! identified {
    ($($ty:ty),+) => {$(
        impl Identified for $ty {
            fn id_mut(&mut self) -> &mut i64 {
                &mut self.id.0
            }
            fn id(&self) -> i64 {
                self.id.0
            }
        }
    )+};
}
identified!(SubscriptionBox, BoxProduct, BoxSize, TimeSlot);

impl Identified for StoredSelection {
    fn id_mut(&mut self) -> &mut i64 {
        &mut self.selection.id.0
    }
    fn id(&self) -> i64 {
        self.selection.id.0
    }
}

/// Inserts `item` (id 0: the next id of `counter`) or replaces the row of its id.
fn save<T: Identified>(
    rows: &mut Vec<(ShopId, T)>,
    counter: &mut i64,
    shop_id: ShopId,
    mut item: T,
) -> T {
    if item.id() == 0 {
        *counter += 1;
        *item.id_mut() = *counter;
    }
    let id = item.id();
    rows.retain(|(shop, row)| !(*shop == shop_id && row.id() == id));
    rows.push((shop_id, item.clone()));
    rows.sort_by_key(|(_, row)| row.id());
    item
}

impl MemoryState {
    /// The box line item of a subscription line item sold under a box's group.
    fn box_line_item_of(
        &self,
        shop_id: ShopId,
        item: &SubscriptionLineItem,
    ) -> Option<BoxLineItem> {
        let group = item.subscription_group_id?;
        let sold_in =
            of_shop(&self.boxes, shop_id).find(|b| b.svc_subscription_group_id == group)?;
        Some(BoxLineItem::of(item, sold_in.id))
    }

    /// The slot with its products, in the order they were offered.
    fn whole_slot(&self, mut slot: TimeSlot) -> TimeSlot {
        slot.box_products = self
            .time_slot_options
            .iter()
            .filter(|(slot_id, _)| *slot_id == slot.id.0)
            .filter_map(|(_, product_id)| {
                self.box_products
                    .iter()
                    .find(|(_, product)| product.id.0 == *product_id)
                    .map(|(_, product)| product.clone())
            })
            .collect();
        slot
    }
}

impl BoxRepository for MemoryState {
    fn boxes(
        &mut self,
        shop_id: ShopId,
        limit: i64,
        page_number: i64,
    ) -> StoreResult<(Vec<SubscriptionBox>, i64)> {
        Ok(page(
            of_shop(&self.boxes, shop_id).collect(),
            limit,
            page_number,
        ))
    }

    fn subscription_box(
        &mut self,
        shop_id: ShopId,
        id: BoxId,
    ) -> StoreResult<Option<SubscriptionBox>> {
        Ok(of_shop(&self.boxes, shop_id).find(|b| b.id == id))
    }

    fn box_of_group(&mut self, shop_id: ShopId, group_id: GroupId) -> StoreResult<Option<BoxId>> {
        Ok(of_shop(&self.boxes, shop_id)
            .find(|b| b.svc_subscription_group_id == group_id)
            .map(|b| b.id))
    }

    fn save_box(
        &mut self,
        shop_id: ShopId,
        subscription_box: &SubscriptionBox,
    ) -> StoreResult<SubscriptionBox> {
        Ok(save(
            &mut self.boxes,
            &mut self.box_counts[0],
            shop_id,
            subscription_box.clone(),
        ))
    }

    fn delete_box(&mut self, shop_id: ShopId, id: BoxId) -> StoreResult<bool> {
        let before = self.boxes.len();
        self.boxes
            .retain(|(shop, b)| !(*shop == shop_id && b.id == id));
        if self.boxes.len() == before {
            return Ok(false);
        }
        let slots: Vec<TimeSlotId> = of_shop(&self.time_slots, shop_id)
            .filter(|slot| slot.box_id == id)
            .map(|slot| slot.id)
            .collect();
        self.time_slot_options
            .retain(|(slot, _)| !slots.contains(&TimeSlotId(*slot)));
        self.time_slots
            .retain(|(_, slot)| !slots.contains(&slot.id));
        self.box_sizes
            .retain(|(shop, size)| !(*shop == shop_id && size.box_id == id));
        Ok(true)
    }

    fn box_products(
        &mut self,
        shop_id: ShopId,
        limit: i64,
        page_number: i64,
    ) -> StoreResult<(Vec<BoxProduct>, i64)> {
        Ok(page(
            of_shop(&self.box_products, shop_id).collect(),
            limit,
            page_number,
        ))
    }

    fn box_product(
        &mut self,
        shop_id: ShopId,
        id: BoxProductId,
    ) -> StoreResult<Option<BoxProduct>> {
        Ok(of_shop(&self.box_products, shop_id).find(|p| p.id == id))
    }

    fn save_box_product(
        &mut self,
        shop_id: ShopId,
        product: &BoxProduct,
    ) -> StoreResult<BoxProduct> {
        Ok(save(
            &mut self.box_products,
            &mut self.box_counts[1],
            shop_id,
            product.clone(),
        ))
    }

    fn delete_box_product(&mut self, shop_id: ShopId, id: BoxProductId) -> StoreResult<bool> {
        let before = self.box_products.len();
        self.box_products
            .retain(|(shop, p)| !(*shop == shop_id && p.id == id));
        if self.box_products.len() == before {
            return Ok(false);
        }
        self.time_slot_options
            .retain(|(_, product)| *product != id.0);
        Ok(true)
    }

    fn box_sizes(
        &mut self,
        shop_id: ShopId,
        box_id: BoxId,
        limit: i64,
        page_number: i64,
    ) -> StoreResult<(Vec<BoxSize>, i64)> {
        let sizes = of_shop(&self.box_sizes, shop_id)
            .filter(|s| s.box_id == box_id)
            .collect();
        Ok(page(sizes, limit, page_number))
    }

    fn box_size(&mut self, shop_id: ShopId, id: BoxSizeId) -> StoreResult<Option<BoxSize>> {
        Ok(of_shop(&self.box_sizes, shop_id).find(|s| s.id == id))
    }

    fn save_box_size(&mut self, shop_id: ShopId, size: &BoxSize) -> StoreResult<BoxSize> {
        Ok(save(
            &mut self.box_sizes,
            &mut self.box_counts[2],
            shop_id,
            size.clone(),
        ))
    }

    fn time_slots(
        &mut self,
        shop_id: ShopId,
        box_id: BoxId,
        filter: TimeSlotFilter,
        limit: i64,
        page_number: i64,
    ) -> StoreResult<(Vec<TimeSlot>, i64)> {
        let mut slots: Vec<TimeSlot> = of_shop(&self.time_slots, shop_id)
            .filter(|slot| slot.box_id == box_id)
            .filter(|slot| {
                filter
                    .holding
                    .is_none_or(|at| slot.start_date <= at && at <= slot.end_date)
            })
            .filter(|slot| {
                filter
                    .visible_at
                    .is_none_or(|at| slot.visibility_date <= at)
            })
            .collect();
        slots.sort_by_key(|slot| (slot.start_date, slot.id));
        let (slots, total) = page(slots, limit, page_number);
        Ok((
            slots
                .into_iter()
                .map(|slot| self.whole_slot(slot))
                .collect(),
            total,
        ))
    }

    fn time_slot(&mut self, shop_id: ShopId, id: TimeSlotId) -> StoreResult<Option<TimeSlot>> {
        Ok(of_shop(&self.time_slots, shop_id)
            .find(|slot| slot.id == id)
            .map(|slot| self.whole_slot(slot)))
    }

    fn save_time_slot(&mut self, shop_id: ShopId, slot: &TimeSlot) -> StoreResult<TimeSlot> {
        let mut own = slot.clone();
        own.box_products = Vec::new();
        let saved = save(&mut self.time_slots, &mut self.box_counts[3], shop_id, own);
        Ok(self.whole_slot(saved))
    }

    fn delete_time_slot(&mut self, shop_id: ShopId, id: TimeSlotId) -> StoreResult<bool> {
        let before = self.time_slots.len();
        self.time_slots
            .retain(|(shop, slot)| !(*shop == shop_id && slot.id == id));
        self.time_slot_options.retain(|(slot, _)| *slot != id.0);
        Ok(self.time_slots.len() < before)
    }

    fn add_time_slot_option(
        &mut self,
        _shop_id: ShopId,
        time_slot_id: TimeSlotId,
        box_product_id: BoxProductId,
        _now: Timestamp,
    ) -> StoreResult<bool> {
        let option = (time_slot_id.0, box_product_id.0);
        if self.time_slot_options.contains(&option) {
            return Ok(false);
        }
        self.time_slot_options.push(option);
        Ok(true)
    }

    fn remove_time_slot_option(
        &mut self,
        _shop_id: ShopId,
        time_slot_id: TimeSlotId,
        box_product_id: BoxProductId,
    ) -> StoreResult<bool> {
        let before = self.time_slot_options.len();
        self.time_slot_options
            .retain(|option| *option != (time_slot_id.0, box_product_id.0));
        Ok(self.time_slot_options.len() < before)
    }

    fn line_item_owner(
        &mut self,
        shop_id: ShopId,
        line_item_id: LineItemId,
    ) -> StoreResult<Option<LineItemOwner>> {
        let Some((subscription, item)) = self
            .subscriptions
            .iter()
            .filter(|s| s.shop_id == shop_id)
            .find_map(|s| {
                s.line_items
                    .iter()
                    .find(|item| item.id == line_item_id)
                    .map(|item| (s.clone(), item.clone()))
            })
        else {
            return Ok(None);
        };
        let customer = self.directory_customer(shop_id, subscription.state.customer_id)?;
        Ok(Some(LineItemOwner {
            subscription_id: subscription.id,
            platform_customer_id: customer.and_then(|c| c.platform_id),
            subscription_group_id: item.subscription_group_id,
        }))
    }

    fn selections(
        &mut self,
        shop_id: ShopId,
        platform_customer_id: &str,
        filter: SelectionFilter,
        limit: i64,
        page_number: i64,
    ) -> StoreResult<(Vec<StoredSelection>, i64)> {
        let found = of_shop(&self.box_selections, shop_id)
            .filter(|s| s.platform_customer_id == platform_customer_id)
            .filter(|s| {
                filter
                    .line_item_id
                    .is_none_or(|id| s.selection.svc_platform_subscription_line_item_id == id)
            })
            .filter(|s| {
                filter
                    .order_datetime
                    .is_none_or(|at| s.selection.order_datetime == at)
            })
            .collect();
        Ok(page(found, limit, page_number))
    }

    fn selection(
        &mut self,
        shop_id: ShopId,
        id: SelectionId,
    ) -> StoreResult<Option<StoredSelection>> {
        Ok(of_shop(&self.box_selections, shop_id).find(|s| s.selection.id == id))
    }

    fn selection_of_date(
        &mut self,
        shop_id: ShopId,
        line_item_id: LineItemId,
        order_datetime: Timestamp,
    ) -> StoreResult<Option<StoredSelection>> {
        Ok(of_shop(&self.box_selections, shop_id).find(|s| {
            s.selection.svc_platform_subscription_line_item_id == line_item_id
                && s.selection.order_datetime == order_datetime
        }))
    }

    fn save_selection(
        &mut self,
        shop_id: ShopId,
        selection: &StoredSelection,
    ) -> StoreResult<StoredSelection> {
        Ok(save(
            &mut self.box_selections,
            &mut self.box_counts[4],
            shop_id,
            selection.clone(),
        ))
    }

    fn delete_selection(&mut self, shop_id: ShopId, id: SelectionId) -> StoreResult<bool> {
        let before = self.box_selections.len();
        self.box_selections
            .retain(|(shop, s)| !(*shop == shop_id && s.selection.id == id));
        Ok(self.box_selections.len() < before)
    }

    fn selections_of_box(&mut self, shop_id: ShopId, box_id: BoxId) -> StoreResult<i64> {
        Ok(of_shop(&self.box_selections, shop_id)
            .filter(|s| s.box_id == box_id)
            .count() as i64)
    }

    fn selections_of_time_slot(
        &mut self,
        shop_id: ShopId,
        time_slot_id: TimeSlotId,
    ) -> StoreResult<i64> {
        Ok(of_shop(&self.box_selections, shop_id)
            .filter(|s| s.selection.time_slot_id == time_slot_id)
            .count() as i64)
    }

    fn box_line_items(
        &mut self,
        shop_id: ShopId,
        limit: i64,
        page_number: i64,
    ) -> StoreResult<(Vec<BoxLineItem>, i64)> {
        let mut items: Vec<BoxLineItem> = self
            .subscriptions
            .iter()
            .filter(|s| s.shop_id == shop_id)
            .flat_map(|s| s.line_items.iter())
            .filter_map(|item| self.box_line_item_of(shop_id, item))
            .collect();
        items.sort_by_key(|item| item.svc_platform_subscription_line_item_id);
        Ok(page(items, limit, page_number))
    }

    fn box_line_item(
        &mut self,
        shop_id: ShopId,
        line_item_id: LineItemId,
    ) -> StoreResult<Option<BoxLineItem>> {
        Ok(self
            .subscriptions
            .iter()
            .filter(|s| s.shop_id == shop_id)
            .flat_map(|s| s.line_items.iter())
            .find(|item| item.id == line_item_id)
            .and_then(|item| self.box_line_item_of(shop_id, item)))
    }
}
