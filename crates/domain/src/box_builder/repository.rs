//! What the box builder needs from storage. Resources travel without their shop's identifier
//! (`resources::InShop` adds it); a resource of id 0 is inserted by its `save_…`.

use crate::box_builder::resources::{
    BoxLineItem, BoxProduct, BoxSize, StoredSelection, SubscriptionBox, TimeSlot,
};
use crate::kernel::error::StoreResult;
use crate::kernel::ids::ShopId;
use crate::kernel::ids::{
    BoxId, BoxProductId, BoxSizeId, GroupId, LineItemId, SelectionId, SubscriptionId, TimeSlotId,
};
use crate::kernel::time::Timestamp;
use crate::subscriptions::repository::SubscriptionRepositories;

crate::feature_database!(
    /// The database as the box builder sees it.
    BoxBuilderDatabase,
    BoxBuilderRepositories
);

/// Every repository the box builder's use cases may touch in one unit of work: its own, and
/// the subscriptions' (the groups boxes are sold under, the platform's catalogue).
pub trait BoxBuilderRepositories: SubscriptionRepositories + BoxRepository {}

impl<T> BoxBuilderRepositories for T where T: SubscriptionRepositories + BoxRepository + ?Sized {}

/// Which time slots a list shows.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TimeSlotFilter {
    /// Only slots whose `start_date..=end_date` holds this instant.
    pub holding: Option<Timestamp>,
    /// Only slots whose `visibility_date` is at or before this instant (the storefront's).
    pub visible_at: Option<Timestamp>,
}

/// Whose a subscription line item is: its subscription, the platform id of that subscription's
/// customer (none until the platform gave one), and the group it is sold under.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineItemOwner {
    /// The id of the line item's subscription (the service's integer).
    pub subscription_id: SubscriptionId,
    /// The platform id of the subscription's customer; `None` until the platform gave one.
    pub platform_customer_id: Option<String>,
    /// The id of the subscription group the line item is sold under, if any.
    pub subscription_group_id: Option<GroupId>,
}

/// Which of a customer's selections a list shows.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SelectionFilter {
    /// Only the selections of this subscription line item.
    pub line_item_id: Option<LineItemId>,
    /// Only the selections for the order of this time.
    pub order_datetime: Option<Timestamp>,
}

/// The box builder's own storage: boxes, box products, sizes, time slots and their options, and
/// selections.
pub trait BoxRepository {
    /// A page of the shop's boxes by id, and how many it has.
    fn boxes(
        &mut self,
        shop_id: ShopId,
        limit: i64,
        page: i64,
    ) -> StoreResult<(Vec<SubscriptionBox>, i64)>;
    /// The shop's box `id`, if it has one.
    fn subscription_box(
        &mut self,
        shop_id: ShopId,
        id: BoxId,
    ) -> StoreResult<Option<SubscriptionBox>>;
    /// The box a group serves, if one does.
    fn box_of_group(&mut self, shop_id: ShopId, group_id: GroupId) -> StoreResult<Option<BoxId>>;
    /// Stores the box (id 0 inserts it), answering it as stored.
    fn save_box(
        &mut self,
        shop_id: ShopId,
        subscription_box: &SubscriptionBox,
    ) -> StoreResult<SubscriptionBox>;
    /// Deletes the box with its sizes, time slots and their options.
    fn delete_box(&mut self, shop_id: ShopId, id: BoxId) -> StoreResult<bool>;

    /// A page of the shop's box products by id, and how many it has.
    fn box_products(
        &mut self,
        shop_id: ShopId,
        limit: i64,
        page: i64,
    ) -> StoreResult<(Vec<BoxProduct>, i64)>;
    /// The shop's box product `id`, if it has one.
    fn box_product(&mut self, shop_id: ShopId, id: BoxProductId)
    -> StoreResult<Option<BoxProduct>>;
    /// Stores the box product (id 0 inserts it), answering it as stored.
    fn save_box_product(
        &mut self,
        shop_id: ShopId,
        product: &BoxProduct,
    ) -> StoreResult<BoxProduct>;
    /// Deletes the box product and takes it out of every slot's options.
    fn delete_box_product(&mut self, shop_id: ShopId, id: BoxProductId) -> StoreResult<bool>;

    /// A page of the box's sizes by id, and how many it has.
    fn box_sizes(
        &mut self,
        shop_id: ShopId,
        box_id: BoxId,
        limit: i64,
        page: i64,
    ) -> StoreResult<(Vec<BoxSize>, i64)>;
    /// The shop's box size `id`, if it has one.
    fn box_size(&mut self, shop_id: ShopId, id: BoxSizeId) -> StoreResult<Option<BoxSize>>;
    /// Stores the size (id 0 inserts it), answering it as stored.
    fn save_box_size(&mut self, shop_id: ShopId, size: &BoxSize) -> StoreResult<BoxSize>;

    /// A page of the box's time slots by start, then id, with their products; and how many
    /// match.
    fn time_slots(
        &mut self,
        shop_id: ShopId,
        box_id: BoxId,
        filter: TimeSlotFilter,
        limit: i64,
        page: i64,
    ) -> StoreResult<(Vec<TimeSlot>, i64)>;
    /// The shop's time slot `id`, with its products, if it has one.
    fn time_slot(&mut self, shop_id: ShopId, id: TimeSlotId) -> StoreResult<Option<TimeSlot>>;
    /// Stores the slot's own fields (its products are its options, changed on their own).
    fn save_time_slot(&mut self, shop_id: ShopId, slot: &TimeSlot) -> StoreResult<TimeSlot>;
    /// Deletes the slot with its options.
    fn delete_time_slot(&mut self, shop_id: ShopId, id: TimeSlotId) -> StoreResult<bool>;
    /// Offers the box product in the slot; false when it was already.
    fn add_time_slot_option(
        &mut self,
        shop_id: ShopId,
        time_slot_id: TimeSlotId,
        box_product_id: BoxProductId,
        now: Timestamp,
    ) -> StoreResult<bool>;
    /// Stops offering the box product in the slot; false when the slot did not offer it.
    fn remove_time_slot_option(
        &mut self,
        shop_id: ShopId,
        time_slot_id: TimeSlotId,
        box_product_id: BoxProductId,
    ) -> StoreResult<bool>;

    /// Whose the shop's subscription line item `line_item_id` is; `None` for an unknown one.
    fn line_item_owner(
        &mut self,
        shop_id: ShopId,
        line_item_id: LineItemId,
    ) -> StoreResult<Option<LineItemOwner>>;
    /// A page of the customer's selections by id, and how many match.
    fn selections(
        &mut self,
        shop_id: ShopId,
        platform_customer_id: &str,
        filter: SelectionFilter,
        limit: i64,
        page: i64,
    ) -> StoreResult<(Vec<StoredSelection>, i64)>;
    /// The shop's selection `id`, of any customer, if it has one.
    fn selection(
        &mut self,
        shop_id: ShopId,
        id: SelectionId,
    ) -> StoreResult<Option<StoredSelection>>;
    /// The selection of a line item's order of that date, if one was made.
    fn selection_of_date(
        &mut self,
        shop_id: ShopId,
        line_item_id: LineItemId,
        order_datetime: Timestamp,
    ) -> StoreResult<Option<StoredSelection>>;
    /// Stores the selection (id 0 inserts it).
    fn save_selection(
        &mut self,
        shop_id: ShopId,
        selection: &StoredSelection,
    ) -> StoreResult<StoredSelection>;
    /// Deletes the shop's selection `id`; false when there is no such selection.
    fn delete_selection(&mut self, shop_id: ShopId, id: SelectionId) -> StoreResult<bool>;
    /// How many selections the box's, or the time slot's, orders have.
    fn selections_of_box(&mut self, shop_id: ShopId, box_id: BoxId) -> StoreResult<i64>;
    /// How many selections chose the time slot.
    fn selections_of_time_slot(
        &mut self,
        shop_id: ShopId,
        time_slot_id: TimeSlotId,
    ) -> StoreResult<i64>;
    /// A page of the line items sold under a box's group, by id, and how many there are.
    fn box_line_items(
        &mut self,
        shop_id: ShopId,
        limit: i64,
        page: i64,
    ) -> StoreResult<(Vec<BoxLineItem>, i64)>;
    /// The line item `line_item_id` as a box's, when it is sold under a box's group.
    fn box_line_item(
        &mut self,
        shop_id: ShopId,
        line_item_id: LineItemId,
    ) -> StoreResult<Option<BoxLineItem>>;
}
