//! What the box builder needs from storage. Resources travel without their shop's identifier
//! (`resources::InShop` adds it); a resource of id 0 is inserted by its `save_…`.

use crate::box_builder::resources::{BoxProduct, BoxSize, SubscriptionBox, TimeSlot};
use crate::kernel::error::StoreResult;
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

pub trait BoxRepository {
    /// A page of the shop's boxes by id, and how many it has.
    fn boxes(
        &mut self,
        shop_id: i64,
        limit: i64,
        page: i64,
    ) -> StoreResult<(Vec<SubscriptionBox>, i64)>;
    fn subscription_box(&mut self, shop_id: i64, id: i64) -> StoreResult<Option<SubscriptionBox>>;
    /// The box a group serves, if one does.
    fn box_of_group(&mut self, shop_id: i64, group_id: i64) -> StoreResult<Option<i64>>;
    fn save_box(
        &mut self,
        shop_id: i64,
        subscription_box: &SubscriptionBox,
    ) -> StoreResult<SubscriptionBox>;
    /// Deletes the box with its sizes, time slots and their options.
    fn delete_box(&mut self, shop_id: i64, id: i64) -> StoreResult<bool>;

    fn box_products(
        &mut self,
        shop_id: i64,
        limit: i64,
        page: i64,
    ) -> StoreResult<(Vec<BoxProduct>, i64)>;
    fn box_product(&mut self, shop_id: i64, id: i64) -> StoreResult<Option<BoxProduct>>;
    fn save_box_product(&mut self, shop_id: i64, product: &BoxProduct) -> StoreResult<BoxProduct>;
    /// Deletes the box product and takes it out of every slot's options.
    fn delete_box_product(&mut self, shop_id: i64, id: i64) -> StoreResult<bool>;

    /// A page of the box's sizes by id, and how many it has.
    fn box_sizes(
        &mut self,
        shop_id: i64,
        box_id: i64,
        limit: i64,
        page: i64,
    ) -> StoreResult<(Vec<BoxSize>, i64)>;
    fn box_size(&mut self, shop_id: i64, id: i64) -> StoreResult<Option<BoxSize>>;
    fn save_box_size(&mut self, shop_id: i64, size: &BoxSize) -> StoreResult<BoxSize>;

    /// A page of the box's time slots by start, then id, with their products; and how many
    /// match.
    fn time_slots(
        &mut self,
        shop_id: i64,
        box_id: i64,
        filter: TimeSlotFilter,
        limit: i64,
        page: i64,
    ) -> StoreResult<(Vec<TimeSlot>, i64)>;
    fn time_slot(&mut self, shop_id: i64, id: i64) -> StoreResult<Option<TimeSlot>>;
    /// Stores the slot's own fields (its products are its options, changed on their own).
    fn save_time_slot(&mut self, shop_id: i64, slot: &TimeSlot) -> StoreResult<TimeSlot>;
    /// Deletes the slot with its options.
    fn delete_time_slot(&mut self, shop_id: i64, id: i64) -> StoreResult<bool>;
    /// Offers the box product in the slot; false when it was already.
    fn add_time_slot_option(
        &mut self,
        shop_id: i64,
        time_slot_id: i64,
        box_product_id: i64,
        now: Timestamp,
    ) -> StoreResult<bool>;
    fn remove_time_slot_option(
        &mut self,
        shop_id: i64,
        time_slot_id: i64,
        box_product_id: i64,
    ) -> StoreResult<bool>;
}
