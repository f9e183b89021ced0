//! The box builder's storage (migration 15): a row per box, box product, box size and time
//! slot, their attributes as JSON beside them; a slot's products are its options' rows, in the
//! order they were added.

use diesel::dsl::count_star;
use diesel::prelude::*;
use mercer_domain::box_builder::repository::{
    BoxRepository, LineItemOwner, SelectionFilter, TimeSlotFilter,
};
use mercer_domain::box_builder::resources::{
    Attribute, BoxLineItem, BoxProduct, BoxSize, Selection, SelectionItem, StoredSelection,
    SubscriptionBox, TimeSlot,
};
use mercer_domain::kernel::error::StoreResult;
use mercer_domain::kernel::ids::ShopId;
use mercer_domain::kernel::ids::{
    BoxId, BoxProductId, BoxSizeId, GroupId, LineItemId, SelectionId, SubscriptionId, TimeSlotId,
};
use mercer_domain::{StorageError, Timestamp};

use crate::connection::on_backend;
use crate::repos::StoreTx;
use crate::repos::subscriptions::records::LineItemRow;
use crate::schema::{
    box_products, box_selections, box_sizes, boxes, platform_customers, subscription_line_items,
    subscriptions, time_slot_options, time_slots,
};
use crate::store::storage_error;

fn time(micros: i64) -> Timestamp {
    Timestamp::from_micros(micros)
}

fn corrupt(what: &str, id: i64, detail: impl std::fmt::Display) -> StorageError {
    StorageError::other(format!("stored {what} {id} does not read back: {detail}"))
}

/// Where a 1-based page of `limit` rows starts.
fn offset(limit: i64, page: i64) -> i64 {
    page.max(1).saturating_sub(1).saturating_mul(limit.max(0))
}

fn attributes_of(json: &str, what: &str, id: i64) -> StoreResult<Vec<Attribute>> {
    serde_json::from_str(json).map_err(|error| corrupt(what, id, error))
}

fn attributes_json(attributes: &[Attribute]) -> StoreResult<String> {
    serde_json::to_string(attributes).map_err(|error| corrupt("attributes", 0, error))
}

#[derive(Queryable, Selectable)]
#[diesel(table_name = boxes)]
struct BoxRow {
    id: i64,
    subscription_group_id: i64,
    box_name: String,
    attributes: String,
    created_at: i64,
    updated_at: i64,
}

impl BoxRow {
    fn into_box(self) -> StoreResult<SubscriptionBox> {
        Ok(SubscriptionBox {
            id: BoxId(self.id),
            svc_subscription_group_id: GroupId(self.subscription_group_id),
            shop_identifier: String::new(),
            box_name: self.box_name,
            created_at: time(self.created_at),
            updated_at: time(self.updated_at),
            attributes: attributes_of(&self.attributes, "box", self.id)?,
        })
    }
}

#[derive(Queryable, Selectable)]
#[diesel(table_name = box_products)]
struct ProductRow {
    id: i64,
    platform_product_id: String,
    platform_variant_id: String,
    attributes: String,
    created_at: i64,
    updated_at: i64,
}

impl ProductRow {
    fn into_product(self) -> StoreResult<BoxProduct> {
        Ok(BoxProduct {
            id: BoxProductId(self.id),
            platform_product_id: self.platform_product_id,
            platform_variant_id: self.platform_variant_id,
            created_at: time(self.created_at),
            updated_at: time(self.updated_at),
            attributes: attributes_of(&self.attributes, "box product", self.id)?,
        })
    }
}

#[derive(Queryable, Selectable)]
#[diesel(table_name = box_sizes)]
struct SizeRow {
    id: i64,
    box_id: i64,
    box_size_name: String,
    pricing_mode: String,
    min_quantity: i64,
    max_quantity: i64,
    created_at: i64,
    updated_at: i64,
}

impl From<SizeRow> for BoxSize {
    fn from(row: SizeRow) -> BoxSize {
        BoxSize {
            id: BoxSizeId(row.id),
            box_id: BoxId(row.box_id),
            shop_identifier: String::new(),
            box_size_name: row.box_size_name,
            pricing_mode: row.pricing_mode,
            min_quantity: row.min_quantity,
            max_quantity: row.max_quantity,
            created_at: time(row.created_at),
            updated_at: time(row.updated_at),
        }
    }
}

#[derive(Queryable, Selectable)]
#[diesel(table_name = time_slots)]
struct SlotRow {
    id: i64,
    box_id: i64,
    time_slot_name: String,
    start_date: i64,
    end_date: i64,
    selection_deadline_date: i64,
    visibility_date: i64,
    attributes: String,
    created_at: i64,
    updated_at: i64,
}

#[derive(Queryable, Selectable)]
#[diesel(table_name = box_selections)]
struct SelectionRow {
    id: i64,
    platform_customer_id: String,
    subscription_line_item_id: i64,
    box_id: i64,
    box_size_id: i64,
    time_slot_id: i64,
    order_datetime: i64,
    line_items: String,
    created_at: i64,
    updated_at: i64,
}

impl SelectionRow {
    fn into_selection(self) -> StoreResult<StoredSelection> {
        let line_items: Vec<SelectionItem> = serde_json::from_str(&self.line_items)
            .map_err(|error| corrupt("selection", self.id, error))?;
        Ok(StoredSelection {
            selection: Selection {
                id: SelectionId(self.id),
                svc_platform_subscription_line_item_id: LineItemId(self.subscription_line_item_id),
                box_size_id: BoxSizeId(self.box_size_id),
                time_slot_id: TimeSlotId(self.time_slot_id),
                order_datetime: time(self.order_datetime),
                line_items,
                created_at: time(self.created_at),
                updated_at: time(self.updated_at),
            },
            platform_customer_id: self.platform_customer_id,
            box_id: BoxId(self.box_id),
        })
    }
}

fn rows_into_selections(rows: Vec<SelectionRow>) -> StoreResult<Vec<StoredSelection>> {
    rows.into_iter().map(SelectionRow::into_selection).collect()
}

/// (line item id, box id, created, updated) of the line items sold under a box's group.
/// A subscription line item and the box sold under its group.
type BoxLineItemRow = (LineItemRow, i64);

fn box_line_item((row, box_id): BoxLineItemRow) -> StoreResult<BoxLineItem> {
    Ok(BoxLineItem::of(&row.into_line_item()?, BoxId(box_id)))
}

impl StoreTx<'_> {
    /// The slots of these rows, each with its products in the order they were offered.
    fn whole_slots(&mut self, rows: Vec<SlotRow>) -> StoreResult<Vec<TimeSlot>> {
        let ids: Vec<i64> = rows.iter().map(|row| row.id).collect();
        let offered: Vec<(i64, ProductRow)> = time_slot_options::table
            .inner_join(box_products::table)
            .filter(time_slot_options::time_slot_id.eq_any(&ids))
            .order(time_slot_options::id.asc())
            .select((time_slot_options::time_slot_id, ProductRow::as_select()))
            .load(self.conn)
            .map_err(storage_error)?;
        let mut products: Vec<(i64, BoxProduct)> = Vec::with_capacity(offered.len());
        for (slot, row) in offered {
            products.push((slot, row.into_product()?));
        }
        rows.into_iter()
            .map(|row| {
                Ok(TimeSlot {
                    id: TimeSlotId(row.id),
                    box_id: BoxId(row.box_id),
                    shop_identifier: String::new(),
                    time_slot_name: row.time_slot_name,
                    start_date: time(row.start_date),
                    end_date: time(row.end_date),
                    selection_deadline_date: time(row.selection_deadline_date),
                    visibility_date: time(row.visibility_date),
                    created_at: time(row.created_at),
                    updated_at: time(row.updated_at),
                    attributes: attributes_of(&row.attributes, "time slot", row.id)?,
                    box_products: products
                        .iter()
                        .filter(|(slot, _)| *slot == row.id)
                        .map(|(_, product)| product.clone())
                        .collect(),
                })
            })
            .collect()
    }

    fn delete_slots(&mut self, slot_ids: &[i64]) -> StoreResult<()> {
        diesel::delete(
            time_slot_options::table.filter(time_slot_options::time_slot_id.eq_any(slot_ids)),
        )
        .execute(self.conn)
        .map_err(storage_error)?;
        diesel::delete(time_slots::table.filter(time_slots::id.eq_any(slot_ids)))
            .execute(self.conn)
            .map_err(storage_error)?;
        Ok(())
    }
}

impl BoxRepository for StoreTx<'_> {
    fn boxes(
        &mut self,
        shop_id: ShopId,
        limit: i64,
        page: i64,
    ) -> StoreResult<(Vec<SubscriptionBox>, i64)> {
        let total: i64 = boxes::table
            .filter(boxes::shop_id.eq(shop_id.0))
            .select(count_star())
            .first(self.conn)
            .map_err(storage_error)?;
        let rows: Vec<BoxRow> = boxes::table
            .filter(boxes::shop_id.eq(shop_id.0))
            .order(boxes::id.asc())
            .limit(limit)
            .offset(offset(limit, page))
            .select(BoxRow::as_select())
            .load(self.conn)
            .map_err(storage_error)?;
        Ok((
            rows.into_iter()
                .map(BoxRow::into_box)
                .collect::<StoreResult<_>>()?,
            total,
        ))
    }

    fn subscription_box(
        &mut self,
        shop_id: ShopId,
        id: BoxId,
    ) -> StoreResult<Option<SubscriptionBox>> {
        boxes::table
            .filter(boxes::shop_id.eq(shop_id.0))
            .filter(boxes::id.eq(id.0))
            .select(BoxRow::as_select())
            .first(self.conn)
            .optional()
            .map_err(storage_error)?
            .map(BoxRow::into_box)
            .transpose()
    }

    fn box_of_group(&mut self, shop_id: ShopId, group_id: GroupId) -> StoreResult<Option<BoxId>> {
        let found: Option<i64> = boxes::table
            .filter(boxes::shop_id.eq(shop_id.0))
            .filter(boxes::subscription_group_id.eq(group_id.0))
            .select(boxes::id)
            .first(self.conn)
            .optional()
            .map_err(storage_error)?;
        Ok(found.map(BoxId))
    }

    fn save_box(
        &mut self,
        shop_id: ShopId,
        subscription_box: &SubscriptionBox,
    ) -> StoreResult<SubscriptionBox> {
        use boxes as t;
        let attributes = attributes_json(&subscription_box.attributes)?;
        let id = if subscription_box.id.0 != 0 {
            diesel::update(
                t::table
                    .filter(t::id.eq(subscription_box.id.0))
                    .filter(t::shop_id.eq(shop_id.0)),
            )
            .set((
                t::subscription_group_id.eq(subscription_box.svc_subscription_group_id.0),
                t::box_name.eq(&subscription_box.box_name),
                t::attributes.eq(&attributes),
                t::updated_at.eq(subscription_box.updated_at.as_micros()),
            ))
            .execute(self.conn)
            .map_err(storage_error)?;
            subscription_box.id.0
        } else {
            let values = (
                t::shop_id.eq(shop_id.0),
                t::subscription_group_id.eq(subscription_box.svc_subscription_group_id.0),
                t::box_name.eq(&subscription_box.box_name),
                t::attributes.eq(&attributes),
                t::created_at.eq(subscription_box.created_at.as_micros()),
                t::updated_at.eq(subscription_box.updated_at.as_micros()),
            );
            on_backend!(&mut *self.conn, |c| diesel::insert_into(t::table)
                .values(values)
                .returning(t::id)
                .get_result::<i64>(c))
            .map_err(storage_error)?
        };
        self.subscription_box(shop_id, BoxId(id))?
            .ok_or_else(|| corrupt("box", id, "it was not stored"))
    }

    fn delete_box(&mut self, shop_id: ShopId, id: BoxId) -> StoreResult<bool> {
        let id = id.0;
        let slots: Vec<i64> = time_slots::table
            .filter(time_slots::shop_id.eq(shop_id.0))
            .filter(time_slots::box_id.eq(id))
            .select(time_slots::id)
            .load(self.conn)
            .map_err(storage_error)?;
        self.delete_slots(&slots)?;
        diesel::delete(
            box_sizes::table
                .filter(box_sizes::shop_id.eq(shop_id.0))
                .filter(box_sizes::box_id.eq(id)),
        )
        .execute(self.conn)
        .map_err(storage_error)?;
        let deleted = diesel::delete(
            boxes::table
                .filter(boxes::shop_id.eq(shop_id.0))
                .filter(boxes::id.eq(id)),
        )
        .execute(self.conn)
        .map_err(storage_error)?;
        Ok(deleted == 1)
    }

    fn box_products(
        &mut self,
        shop_id: ShopId,
        limit: i64,
        page: i64,
    ) -> StoreResult<(Vec<BoxProduct>, i64)> {
        let total: i64 = box_products::table
            .filter(box_products::shop_id.eq(shop_id.0))
            .select(count_star())
            .first(self.conn)
            .map_err(storage_error)?;
        let rows: Vec<ProductRow> = box_products::table
            .filter(box_products::shop_id.eq(shop_id.0))
            .order(box_products::id.asc())
            .limit(limit)
            .offset(offset(limit, page))
            .select(ProductRow::as_select())
            .load(self.conn)
            .map_err(storage_error)?;
        Ok((
            rows.into_iter()
                .map(ProductRow::into_product)
                .collect::<StoreResult<_>>()?,
            total,
        ))
    }

    fn box_product(
        &mut self,
        shop_id: ShopId,
        id: BoxProductId,
    ) -> StoreResult<Option<BoxProduct>> {
        box_products::table
            .filter(box_products::shop_id.eq(shop_id.0))
            .filter(box_products::id.eq(id.0))
            .select(ProductRow::as_select())
            .first(self.conn)
            .optional()
            .map_err(storage_error)?
            .map(ProductRow::into_product)
            .transpose()
    }

    fn save_box_product(
        &mut self,
        shop_id: ShopId,
        product: &BoxProduct,
    ) -> StoreResult<BoxProduct> {
        use box_products as t;
        let attributes = attributes_json(&product.attributes)?;
        let id = if product.id.0 != 0 {
            diesel::update(
                t::table
                    .filter(t::id.eq(product.id.0))
                    .filter(t::shop_id.eq(shop_id.0)),
            )
            .set((
                t::platform_product_id.eq(&product.platform_product_id),
                t::platform_variant_id.eq(&product.platform_variant_id),
                t::attributes.eq(&attributes),
                t::updated_at.eq(product.updated_at.as_micros()),
            ))
            .execute(self.conn)
            .map_err(storage_error)?;
            product.id.0
        } else {
            let values = (
                t::shop_id.eq(shop_id.0),
                t::platform_product_id.eq(&product.platform_product_id),
                t::platform_variant_id.eq(&product.platform_variant_id),
                t::attributes.eq(&attributes),
                t::created_at.eq(product.created_at.as_micros()),
                t::updated_at.eq(product.updated_at.as_micros()),
            );
            on_backend!(&mut *self.conn, |c| diesel::insert_into(t::table)
                .values(values)
                .returning(t::id)
                .get_result::<i64>(c))
            .map_err(storage_error)?
        };
        self.box_product(shop_id, BoxProductId(id))?
            .ok_or_else(|| corrupt("box product", id, "it was not stored"))
    }

    fn delete_box_product(&mut self, shop_id: ShopId, id: BoxProductId) -> StoreResult<bool> {
        let id = id.0;
        diesel::delete(
            time_slot_options::table
                .filter(time_slot_options::shop_id.eq(shop_id.0))
                .filter(time_slot_options::box_product_id.eq(id)),
        )
        .execute(self.conn)
        .map_err(storage_error)?;
        let deleted = diesel::delete(
            box_products::table
                .filter(box_products::shop_id.eq(shop_id.0))
                .filter(box_products::id.eq(id)),
        )
        .execute(self.conn)
        .map_err(storage_error)?;
        Ok(deleted == 1)
    }

    fn box_sizes(
        &mut self,
        shop_id: ShopId,
        box_id: BoxId,
        limit: i64,
        page: i64,
    ) -> StoreResult<(Vec<BoxSize>, i64)> {
        let of_box = box_sizes::table
            .filter(box_sizes::shop_id.eq(shop_id.0))
            .filter(box_sizes::box_id.eq(box_id.0));
        let total: i64 = of_box
            .select(count_star())
            .first(self.conn)
            .map_err(storage_error)?;
        let rows: Vec<SizeRow> = of_box
            .order(box_sizes::id.asc())
            .limit(limit)
            .offset(offset(limit, page))
            .select(SizeRow::as_select())
            .load(self.conn)
            .map_err(storage_error)?;
        Ok((rows.into_iter().map(BoxSize::from).collect(), total))
    }

    fn box_size(&mut self, shop_id: ShopId, id: BoxSizeId) -> StoreResult<Option<BoxSize>> {
        Ok(box_sizes::table
            .filter(box_sizes::shop_id.eq(shop_id.0))
            .filter(box_sizes::id.eq(id.0))
            .select(SizeRow::as_select())
            .first(self.conn)
            .optional()
            .map_err(storage_error)?
            .map(BoxSize::from))
    }

    fn save_box_size(&mut self, shop_id: ShopId, size: &BoxSize) -> StoreResult<BoxSize> {
        use box_sizes as t;
        let id = if size.id.0 != 0 {
            diesel::update(
                t::table
                    .filter(t::id.eq(size.id.0))
                    .filter(t::shop_id.eq(shop_id.0)),
            )
            .set((
                t::box_size_name.eq(&size.box_size_name),
                t::pricing_mode.eq(&size.pricing_mode),
                t::min_quantity.eq(size.min_quantity),
                t::max_quantity.eq(size.max_quantity),
                t::updated_at.eq(size.updated_at.as_micros()),
            ))
            .execute(self.conn)
            .map_err(storage_error)?;
            size.id.0
        } else {
            let values = (
                t::shop_id.eq(shop_id.0),
                t::box_id.eq(size.box_id.0),
                t::box_size_name.eq(&size.box_size_name),
                t::pricing_mode.eq(&size.pricing_mode),
                t::min_quantity.eq(size.min_quantity),
                t::max_quantity.eq(size.max_quantity),
                t::created_at.eq(size.created_at.as_micros()),
                t::updated_at.eq(size.updated_at.as_micros()),
            );
            on_backend!(&mut *self.conn, |c| diesel::insert_into(t::table)
                .values(values)
                .returning(t::id)
                .get_result::<i64>(c))
            .map_err(storage_error)?
        };
        self.box_size(shop_id, BoxSizeId(id))?
            .ok_or_else(|| corrupt("box size", id, "it was not stored"))
    }

    fn time_slots(
        &mut self,
        shop_id: ShopId,
        box_id: BoxId,
        filter: TimeSlotFilter,
        limit: i64,
        page: i64,
    ) -> StoreResult<(Vec<TimeSlot>, i64)> {
        // An absent bound is one every slot meets.
        let holding = filter.holding.map(Timestamp::as_micros);
        let visible_at = filter.visible_at.map_or(i64::MAX, Timestamp::as_micros);
        let filtered = time_slots::table
            .filter(time_slots::shop_id.eq(shop_id.0))
            .filter(time_slots::box_id.eq(box_id.0))
            .filter(time_slots::start_date.le(holding.unwrap_or(i64::MAX)))
            .filter(time_slots::end_date.ge(holding.unwrap_or(i64::MIN)))
            .filter(time_slots::visibility_date.le(visible_at));
        let total: i64 = filtered
            .select(count_star())
            .first(self.conn)
            .map_err(storage_error)?;
        let rows: Vec<SlotRow> = filtered
            .order((time_slots::start_date.asc(), time_slots::id.asc()))
            .limit(limit)
            .offset(offset(limit, page))
            .select(SlotRow::as_select())
            .load(self.conn)
            .map_err(storage_error)?;
        Ok((self.whole_slots(rows)?, total))
    }

    fn time_slot(&mut self, shop_id: ShopId, id: TimeSlotId) -> StoreResult<Option<TimeSlot>> {
        let rows: Vec<SlotRow> = time_slots::table
            .filter(time_slots::shop_id.eq(shop_id.0))
            .filter(time_slots::id.eq(id.0))
            .select(SlotRow::as_select())
            .load(self.conn)
            .map_err(storage_error)?;
        Ok(self.whole_slots(rows)?.pop())
    }

    fn save_time_slot(&mut self, shop_id: ShopId, slot: &TimeSlot) -> StoreResult<TimeSlot> {
        use time_slots as t;
        let attributes = attributes_json(&slot.attributes)?;
        let id = if slot.id.0 != 0 {
            diesel::update(
                t::table
                    .filter(t::id.eq(slot.id.0))
                    .filter(t::shop_id.eq(shop_id.0)),
            )
            .set((
                t::time_slot_name.eq(&slot.time_slot_name),
                t::start_date.eq(slot.start_date.as_micros()),
                t::end_date.eq(slot.end_date.as_micros()),
                t::selection_deadline_date.eq(slot.selection_deadline_date.as_micros()),
                t::visibility_date.eq(slot.visibility_date.as_micros()),
                t::attributes.eq(&attributes),
                t::updated_at.eq(slot.updated_at.as_micros()),
            ))
            .execute(self.conn)
            .map_err(storage_error)?;
            slot.id.0
        } else {
            let values = (
                t::shop_id.eq(shop_id.0),
                t::box_id.eq(slot.box_id.0),
                t::time_slot_name.eq(&slot.time_slot_name),
                t::start_date.eq(slot.start_date.as_micros()),
                t::end_date.eq(slot.end_date.as_micros()),
                t::selection_deadline_date.eq(slot.selection_deadline_date.as_micros()),
                t::visibility_date.eq(slot.visibility_date.as_micros()),
                t::attributes.eq(&attributes),
                t::created_at.eq(slot.created_at.as_micros()),
                t::updated_at.eq(slot.updated_at.as_micros()),
            );
            on_backend!(&mut *self.conn, |c| diesel::insert_into(t::table)
                .values(values)
                .returning(t::id)
                .get_result::<i64>(c))
            .map_err(storage_error)?
        };
        self.time_slot(shop_id, TimeSlotId(id))?
            .ok_or_else(|| corrupt("time slot", id, "it was not stored"))
    }

    fn delete_time_slot(&mut self, shop_id: ShopId, id: TimeSlotId) -> StoreResult<bool> {
        let found: Vec<i64> = time_slots::table
            .filter(time_slots::shop_id.eq(shop_id.0))
            .filter(time_slots::id.eq(id.0))
            .select(time_slots::id)
            .load(self.conn)
            .map_err(storage_error)?;
        self.delete_slots(&found)?;
        Ok(!found.is_empty())
    }

    fn add_time_slot_option(
        &mut self,
        shop_id: ShopId,
        time_slot_id: TimeSlotId,
        box_product_id: BoxProductId,
        now: Timestamp,
    ) -> StoreResult<bool> {
        use time_slot_options as t;
        let added = on_backend!(&mut *self.conn, |c| diesel::insert_into(t::table)
            .values((
                t::shop_id.eq(shop_id.0),
                t::time_slot_id.eq(time_slot_id.0),
                t::box_product_id.eq(box_product_id.0),
                t::created_at.eq(now.as_micros()),
            ))
            .on_conflict((t::time_slot_id, t::box_product_id))
            .do_nothing()
            .execute(c))
        .map_err(storage_error)?;
        Ok(added == 1)
    }

    fn remove_time_slot_option(
        &mut self,
        shop_id: ShopId,
        time_slot_id: TimeSlotId,
        box_product_id: BoxProductId,
    ) -> StoreResult<bool> {
        use time_slot_options as t;
        let removed = diesel::delete(
            t::table
                .filter(t::shop_id.eq(shop_id.0))
                .filter(t::time_slot_id.eq(time_slot_id.0))
                .filter(t::box_product_id.eq(box_product_id.0)),
        )
        .execute(self.conn)
        .map_err(storage_error)?;
        Ok(removed == 1)
    }

    fn line_item_owner(
        &mut self,
        shop_id: ShopId,
        line_item_id: LineItemId,
    ) -> StoreResult<Option<LineItemOwner>> {
        let found: Option<(i64, Option<i64>, Option<String>)> = subscription_line_items::table
            .inner_join(subscriptions::table.inner_join(platform_customers::table))
            .filter(subscription_line_items::shop_id.eq(shop_id.0))
            .filter(subscription_line_items::id.eq(line_item_id.0))
            .select((
                subscription_line_items::subscription_id,
                subscription_line_items::subscription_group_id,
                platform_customers::platform_id,
            ))
            .first(self.conn)
            .optional()
            .map_err(storage_error)?;
        Ok(found.map(
            |(subscription_id, group, platform_customer_id)| LineItemOwner {
                subscription_id: SubscriptionId(subscription_id),
                platform_customer_id,
                subscription_group_id: group.map(GroupId),
            },
        ))
    }

    fn selections(
        &mut self,
        shop_id: ShopId,
        platform_customer_id: &str,
        filter: SelectionFilter,
        limit: i64,
        page: i64,
    ) -> StoreResult<(Vec<StoredSelection>, i64)> {
        use box_selections as t;
        // An absent filter is a bound every selection meets.
        let line_item = filter.line_item_id.map(|id| id.0);
        let at = filter.order_datetime.map(Timestamp::as_micros);
        let matching = t::table
            .filter(t::shop_id.eq(shop_id.0))
            .filter(t::platform_customer_id.eq(platform_customer_id))
            .filter(t::subscription_line_item_id.ge(line_item.unwrap_or(i64::MIN)))
            .filter(t::subscription_line_item_id.le(line_item.unwrap_or(i64::MAX)))
            .filter(t::order_datetime.ge(at.unwrap_or(i64::MIN)))
            .filter(t::order_datetime.le(at.unwrap_or(i64::MAX)));
        let total: i64 = matching
            .select(count_star())
            .first(self.conn)
            .map_err(storage_error)?;
        let rows: Vec<SelectionRow> = matching
            .order(t::id.asc())
            .limit(limit)
            .offset(offset(limit, page))
            .select(SelectionRow::as_select())
            .load(self.conn)
            .map_err(storage_error)?;
        Ok((rows_into_selections(rows)?, total))
    }

    fn selection(
        &mut self,
        shop_id: ShopId,
        id: SelectionId,
    ) -> StoreResult<Option<StoredSelection>> {
        let rows: Vec<SelectionRow> = box_selections::table
            .filter(box_selections::shop_id.eq(shop_id.0))
            .filter(box_selections::id.eq(id.0))
            .select(SelectionRow::as_select())
            .load(self.conn)
            .map_err(storage_error)?;
        Ok(rows_into_selections(rows)?.pop())
    }

    fn selection_of_date(
        &mut self,
        shop_id: ShopId,
        line_item_id: LineItemId,
        order_datetime: Timestamp,
    ) -> StoreResult<Option<StoredSelection>> {
        let rows: Vec<SelectionRow> = box_selections::table
            .filter(box_selections::shop_id.eq(shop_id.0))
            .filter(box_selections::subscription_line_item_id.eq(line_item_id.0))
            .filter(box_selections::order_datetime.eq(order_datetime.as_micros()))
            .select(SelectionRow::as_select())
            .load(self.conn)
            .map_err(storage_error)?;
        Ok(rows_into_selections(rows)?.pop())
    }

    fn save_selection(
        &mut self,
        shop_id: ShopId,
        stored: &StoredSelection,
    ) -> StoreResult<StoredSelection> {
        use box_selections as t;
        let selection = &stored.selection;
        let line_items = serde_json::to_string(&selection.line_items)
            .map_err(|error| corrupt("selection", selection.id.0, error))?;
        let id = if selection.id.0 != 0 {
            diesel::update(
                t::table
                    .filter(t::id.eq(selection.id.0))
                    .filter(t::shop_id.eq(shop_id.0)),
            )
            .set((
                t::subscription_line_item_id.eq(selection.svc_platform_subscription_line_item_id.0),
                t::box_id.eq(stored.box_id.0),
                t::box_size_id.eq(selection.box_size_id.0),
                t::time_slot_id.eq(selection.time_slot_id.0),
                t::order_datetime.eq(selection.order_datetime.as_micros()),
                t::line_items.eq(&line_items),
                t::updated_at.eq(selection.updated_at.as_micros()),
            ))
            .execute(self.conn)
            .map_err(storage_error)?;
            selection.id.0
        } else {
            let values = (
                t::shop_id.eq(shop_id.0),
                t::platform_customer_id.eq(&stored.platform_customer_id),
                t::subscription_line_item_id.eq(selection.svc_platform_subscription_line_item_id.0),
                t::box_id.eq(stored.box_id.0),
                t::box_size_id.eq(selection.box_size_id.0),
                t::time_slot_id.eq(selection.time_slot_id.0),
                t::order_datetime.eq(selection.order_datetime.as_micros()),
                t::line_items.eq(&line_items),
                t::created_at.eq(selection.created_at.as_micros()),
                t::updated_at.eq(selection.updated_at.as_micros()),
            );
            on_backend!(&mut *self.conn, |c| diesel::insert_into(t::table)
                .values(values)
                .returning(t::id)
                .get_result::<i64>(c))
            .map_err(storage_error)?
        };
        self.selection(shop_id, SelectionId(id))?
            .ok_or_else(|| corrupt("selection", id, "it was not stored"))
    }

    fn delete_selection(&mut self, shop_id: ShopId, id: SelectionId) -> StoreResult<bool> {
        let deleted = diesel::delete(
            box_selections::table
                .filter(box_selections::shop_id.eq(shop_id.0))
                .filter(box_selections::id.eq(id.0)),
        )
        .execute(self.conn)
        .map_err(storage_error)?;
        Ok(deleted == 1)
    }

    fn selections_of_box(&mut self, shop_id: ShopId, box_id: BoxId) -> StoreResult<i64> {
        box_selections::table
            .filter(box_selections::shop_id.eq(shop_id.0))
            .filter(box_selections::box_id.eq(box_id.0))
            .select(count_star())
            .first(self.conn)
            .map_err(storage_error)
    }

    fn selections_of_time_slot(
        &mut self,
        shop_id: ShopId,
        time_slot_id: TimeSlotId,
    ) -> StoreResult<i64> {
        box_selections::table
            .filter(box_selections::shop_id.eq(shop_id.0))
            .filter(box_selections::time_slot_id.eq(time_slot_id.0))
            .select(count_star())
            .first(self.conn)
            .map_err(storage_error)
    }

    fn box_line_items(
        &mut self,
        shop_id: ShopId,
        limit: i64,
        page: i64,
    ) -> StoreResult<(Vec<BoxLineItem>, i64)> {
        let of_boxes = subscription_line_items::table
            .inner_join(
                boxes::table.on(boxes::subscription_group_id
                    .nullable()
                    .eq(subscription_line_items::subscription_group_id)
                    .and(boxes::shop_id.eq(subscription_line_items::shop_id))),
            )
            .filter(subscription_line_items::shop_id.eq(shop_id.0));
        let total: i64 = of_boxes
            .select(count_star())
            .first(self.conn)
            .map_err(storage_error)?;
        let rows: Vec<BoxLineItemRow> = of_boxes
            .order(subscription_line_items::id.asc())
            .limit(limit)
            .offset(offset(limit, page))
            .select((LineItemRow::as_select(), boxes::id))
            .load(self.conn)
            .map_err(storage_error)?;
        let items = rows
            .into_iter()
            .map(box_line_item)
            .collect::<StoreResult<_>>()?;
        Ok((items, total))
    }

    fn box_line_item(
        &mut self,
        shop_id: ShopId,
        line_item_id: LineItemId,
    ) -> StoreResult<Option<BoxLineItem>> {
        let row: Option<BoxLineItemRow> = subscription_line_items::table
            .inner_join(
                boxes::table.on(boxes::subscription_group_id
                    .nullable()
                    .eq(subscription_line_items::subscription_group_id)
                    .and(boxes::shop_id.eq(subscription_line_items::shop_id))),
            )
            .filter(subscription_line_items::shop_id.eq(shop_id.0))
            .filter(subscription_line_items::id.eq(line_item_id.0))
            .select((LineItemRow::as_select(), boxes::id))
            .first(self.conn)
            .optional()
            .map_err(storage_error)?;
        row.map(box_line_item).transpose()
    }
}
