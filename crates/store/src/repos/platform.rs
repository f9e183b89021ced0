//! The platform's customers (with addresses), orders, products (with variants) and categories.

use std::collections::HashSet;

use diesel::prelude::*;
use diesel::upsert::excluded;
use mercer_domain::Timestamp;
use mercer_domain::events::{EntityDocument, EntityKind, EntityRecord, SavedEntity};
use mercer_domain::platform::{Category, Customer, CustomerAddress, Order, Product, Variant};
use mercer_domain::ports::{PlatformRepository, StoreResult};

use super::StoreTx;
use crate::connection::{DbConnection, on_backend};
use crate::schema::{
    customer_addresses, platform_categories, platform_customers, platform_orders,
    platform_products, product_variants,
};
use crate::store::storage_error;

type RecordColumns = (i64, Option<i64>, Option<i64>, Option<String>);

macro_rules! record_of {
    ($conn:expr, $table:ident, $shop_id:expr, $platform_id:expr) => {
        $table::table
            .filter($table::shop_id.eq($shop_id))
            .filter($table::platform_id.eq($platform_id))
            .select((
                $table::id,
                $table::platform_updated_at,
                $table::platform_deleted_at,
                $table::document,
            ))
            .first::<RecordColumns>($conn)
            .optional()
    };
}

/// Marks the entity deleted, or leaves a tombstone for an entity never seen.
macro_rules! delete_or_tombstone {
    ($conn:expr, $table:ident, $shop_id:expr, $platform_id:expr, $deleted_at:expr, $now:expr) => {
        (|| -> QueryResult<()> {
            let changed = diesel::update(
                $table::table
                    .filter($table::shop_id.eq($shop_id))
                    .filter($table::platform_id.eq($platform_id)),
            )
            .set((
                $table::platform_deleted_at.eq(Some($deleted_at)),
                $table::deleted_at.eq(Some($now)),
                $table::updated_at.eq($now),
            ))
            .execute($conn)?;
            if changed == 0 {
                diesel::insert_into($table::table)
                    .values((
                        $table::shop_id.eq($shop_id),
                        $table::platform_id.eq($platform_id),
                        $table::platform_deleted_at.eq(Some($deleted_at)),
                        $table::created_at.eq($now),
                        $table::updated_at.eq($now),
                        $table::deleted_at.eq(Some($now)),
                    ))
                    .execute($conn)?;
            }
            Ok(())
        })()
    };
}

fn micros(time: Option<Timestamp>) -> Option<i64> {
    time.map(Timestamp::as_micros)
}

#[derive(Insertable, AsChangeset)]
#[diesel(table_name = customer_addresses, treat_none_as_null = true)]
struct AddressValues<'a> {
    shop_id: i64,
    customer_id: i64,
    platform_id: Option<&'a str>,
    is_default: bool,
    document: String,
    updated_at: i64,
    deleted_at: Option<i64>,
}

impl<'a> AddressValues<'a> {
    fn new(shop_id: i64, customer_id: i64, address: &'a CustomerAddress, now: i64) -> Self {
        AddressValues {
            shop_id,
            customer_id,
            platform_id: address.platform_id.as_ref().map(|id| id.as_str()),
            is_default: address.is_default.unwrap_or(false),
            document: serde_json::to_string(address).unwrap_or_else(|_| "{}".to_string()),
            updated_at: now,
            deleted_at: None,
        }
    }
}

/// Makes the customer's live addresses those of the event: matched by platform id they keep
/// their ids, new ones are added, missing ones are marked deleted.
fn sync_addresses(
    conn: &mut DbConnection,
    shop_id: i64,
    customer_id: i64,
    addresses: &[CustomerAddress],
    now: i64,
) -> QueryResult<()> {
    let existing: Vec<(i64, Option<String>)> = customer_addresses::table
        .filter(customer_addresses::customer_id.eq(customer_id))
        .filter(customer_addresses::deleted_at.is_null())
        .select((customer_addresses::id, customer_addresses::platform_id))
        .load(conn)?;
    let mut kept = HashSet::new();
    let mut new_rows = Vec::new();
    for address in addresses {
        let values = AddressValues::new(shop_id, customer_id, address, now);
        let matched = values.platform_id.and_then(|platform_id| {
            existing
                .iter()
                .find(|(id, stored)| stored.as_deref() == Some(platform_id) && !kept.contains(id))
                .map(|(id, _)| *id)
        });
        match matched {
            Some(id) => {
                diesel::update(customer_addresses::table.find(id))
                    .set(&values)
                    .execute(conn)?;
                kept.insert(id);
            }
            None => new_rows.push((values, customer_addresses::created_at.eq(now))),
        }
    }
    if !new_rows.is_empty() {
        on_backend!(&mut *conn, |c| diesel::insert_into(
            customer_addresses::table
        )
        .values(&new_rows)
        .execute(c))?;
    }
    let gone: Vec<i64> = existing
        .iter()
        .map(|(id, _)| *id)
        .filter(|id| !kept.contains(id))
        .collect();
    if !gone.is_empty() {
        diesel::update(customer_addresses::table.filter(customer_addresses::id.eq_any(gone)))
            .set((
                customer_addresses::deleted_at.eq(Some(now)),
                customer_addresses::updated_at.eq(now),
            ))
            .execute(conn)?;
    }
    Ok(())
}

fn save_customer(
    conn: &mut DbConnection,
    shop_id: i64,
    entity: &SavedEntity,
    customer: &Customer,
    now: i64,
) -> QueryResult<()> {
    use platform_customers as t;
    let values = (
        t::shop_id.eq(shop_id),
        t::platform_id.eq(&entity.platform_id),
        t::email.eq(customer.email.as_deref().unwrap_or_default()),
        t::first_name.eq(customer.first_name.as_deref().unwrap_or_default()),
        t::last_name.eq(customer.last_name.as_deref().unwrap_or_default()),
        t::phone.eq(customer.phone.as_deref().unwrap_or_default()),
        t::platform_created_at.eq(micros(customer.platform_created_at)),
        t::platform_updated_at.eq(Some(entity.platform_updated_at.as_micros())),
        t::platform_deleted_at.eq(None::<i64>),
        t::document.eq(Some(&entity.json)),
        t::created_at.eq(now),
        t::updated_at.eq(now),
        t::deleted_at.eq(None::<i64>),
    );
    let id: i64 = on_backend!(&mut *conn, |c| {
        diesel::insert_into(t::table)
            .values(values)
            .on_conflict((t::shop_id, t::platform_id))
            .do_update()
            .set((
                t::email.eq(excluded(t::email)),
                t::first_name.eq(excluded(t::first_name)),
                t::last_name.eq(excluded(t::last_name)),
                t::phone.eq(excluded(t::phone)),
                t::platform_created_at.eq(excluded(t::platform_created_at)),
                t::platform_updated_at.eq(excluded(t::platform_updated_at)),
                t::platform_deleted_at.eq(excluded(t::platform_deleted_at)),
                t::document.eq(excluded(t::document)),
                t::updated_at.eq(excluded(t::updated_at)),
                t::deleted_at.eq(excluded(t::deleted_at)),
            ))
            .returning(t::id)
            .get_result(c)
    })?;
    if let Some(addresses) = &customer.addresses {
        sync_addresses(conn, shop_id, id, addresses, now)?;
    }
    Ok(())
}

fn save_order(
    conn: &mut DbConnection,
    shop_id: i64,
    entity: &SavedEntity,
    order: &Order,
    now: i64,
) -> QueryResult<()> {
    use platform_orders as t;
    let values = (
        t::shop_id.eq(shop_id),
        t::platform_id.eq(&entity.platform_id),
        t::platform_customer_id.eq(order.platform_customer_id.as_ref().map(|id| id.as_str())),
        t::order_number.eq(order.order_number.as_deref()),
        t::fulfillment_status.eq(order.fulfillment_status.as_deref()),
        t::financial_status.eq(order.financial_status.as_deref()),
        t::placed_at.eq(micros(order.placed_at)),
        t::platform_updated_at.eq(Some(entity.platform_updated_at.as_micros())),
        t::platform_deleted_at.eq(None::<i64>),
        t::document.eq(Some(&entity.json)),
        t::created_at.eq(now),
        t::updated_at.eq(now),
        t::deleted_at.eq(None::<i64>),
    );
    on_backend!(&mut *conn, |c| {
        diesel::insert_into(t::table)
            .values(values)
            .on_conflict((t::shop_id, t::platform_id))
            .do_update()
            .set((
                t::platform_customer_id.eq(excluded(t::platform_customer_id)),
                t::order_number.eq(excluded(t::order_number)),
                t::fulfillment_status.eq(excluded(t::fulfillment_status)),
                t::financial_status.eq(excluded(t::financial_status)),
                t::placed_at.eq(excluded(t::placed_at)),
                t::platform_updated_at.eq(excluded(t::platform_updated_at)),
                t::platform_deleted_at.eq(excluded(t::platform_deleted_at)),
                t::document.eq(excluded(t::document)),
                t::updated_at.eq(excluded(t::updated_at)),
                t::deleted_at.eq(excluded(t::deleted_at)),
            ))
            .execute(c)
    })?;
    Ok(())
}

/// Makes the product's live variants those of the event, matched by platform id.
fn sync_variants(
    conn: &mut DbConnection,
    shop_id: i64,
    product_id: i64,
    variants: &[Variant],
    now: i64,
) -> QueryResult<()> {
    use product_variants as t;
    let existing: Vec<(i64, Option<String>)> = t::table
        .filter(t::product_id.eq(product_id))
        .filter(t::deleted_at.is_null())
        .select((t::id, t::platform_id))
        .load(conn)?;
    let mut kept = HashSet::new();
    for variant in variants {
        let platform_id = variant.platform_id.as_ref().map(|id| id.as_str());
        let document = serde_json::to_string(variant).unwrap_or_else(|_| "{}".to_string());
        let values = (
            t::platform_id.eq(platform_id),
            t::sku.eq(variant.sku.as_deref()),
            t::name.eq(variant.name.as_deref()),
            t::price.eq(variant.price.as_ref().map(|price| price.as_str())),
            t::inventory_quantity.eq(variant.inventory_quantity),
            t::document.eq(&document),
            t::updated_at.eq(now),
            t::deleted_at.eq(None::<i64>),
        );
        let matched = platform_id.and_then(|platform_id| {
            existing
                .iter()
                .find(|(id, stored)| stored.as_deref() == Some(platform_id) && !kept.contains(id))
                .map(|(id, _)| *id)
        });
        match matched {
            Some(id) => {
                diesel::update(t::table.find(id))
                    .set(values)
                    .execute(conn)?;
                kept.insert(id);
            }
            None => {
                diesel::insert_into(t::table)
                    .values((
                        values,
                        t::shop_id.eq(shop_id),
                        t::product_id.eq(product_id),
                        t::created_at.eq(now),
                    ))
                    .execute(conn)?;
            }
        }
    }
    let gone: Vec<i64> = existing
        .iter()
        .map(|(id, _)| *id)
        .filter(|id| !kept.contains(id))
        .collect();
    if !gone.is_empty() {
        diesel::update(t::table.filter(t::id.eq_any(gone)))
            .set((t::deleted_at.eq(Some(now)), t::updated_at.eq(now)))
            .execute(conn)?;
    }
    Ok(())
}

fn save_product(
    conn: &mut DbConnection,
    shop_id: i64,
    entity: &SavedEntity,
    product: &Product,
    now: i64,
) -> QueryResult<()> {
    use platform_products as t;
    let values = (
        t::shop_id.eq(shop_id),
        t::platform_id.eq(&entity.platform_id),
        t::name.eq(product.name.as_deref()),
        t::handle.eq(product.handle.as_deref()),
        t::published.eq(product.published),
        t::platform_updated_at.eq(Some(entity.platform_updated_at.as_micros())),
        t::platform_deleted_at.eq(None::<i64>),
        t::document.eq(Some(&entity.json)),
        t::created_at.eq(now),
        t::updated_at.eq(now),
        t::deleted_at.eq(None::<i64>),
    );
    let id: i64 = on_backend!(&mut *conn, |c| {
        diesel::insert_into(t::table)
            .values(values)
            .on_conflict((t::shop_id, t::platform_id))
            .do_update()
            .set((
                t::name.eq(excluded(t::name)),
                t::handle.eq(excluded(t::handle)),
                t::published.eq(excluded(t::published)),
                t::platform_updated_at.eq(excluded(t::platform_updated_at)),
                t::platform_deleted_at.eq(excluded(t::platform_deleted_at)),
                t::document.eq(excluded(t::document)),
                t::updated_at.eq(excluded(t::updated_at)),
                t::deleted_at.eq(excluded(t::deleted_at)),
            ))
            .returning(t::id)
            .get_result(c)
    })?;
    if let Some(variants) = &product.variants {
        sync_variants(conn, shop_id, id, variants, now)?;
    }
    Ok(())
}

fn save_category(
    conn: &mut DbConnection,
    shop_id: i64,
    entity: &SavedEntity,
    category: &Category,
    now: i64,
) -> QueryResult<()> {
    use platform_categories as t;
    let values = (
        t::shop_id.eq(shop_id),
        t::platform_id.eq(&entity.platform_id),
        t::name.eq(category.name.as_deref()),
        t::image_url.eq(category.image_url.as_deref()),
        t::platform_updated_at.eq(Some(entity.platform_updated_at.as_micros())),
        t::platform_deleted_at.eq(None::<i64>),
        t::document.eq(Some(&entity.json)),
        t::created_at.eq(now),
        t::updated_at.eq(now),
        t::deleted_at.eq(None::<i64>),
    );
    on_backend!(&mut *conn, |c| {
        diesel::insert_into(t::table)
            .values(values)
            .on_conflict((t::shop_id, t::platform_id))
            .do_update()
            .set((
                t::name.eq(excluded(t::name)),
                t::image_url.eq(excluded(t::image_url)),
                t::platform_updated_at.eq(excluded(t::platform_updated_at)),
                t::platform_deleted_at.eq(excluded(t::platform_deleted_at)),
                t::document.eq(excluded(t::document)),
                t::updated_at.eq(excluded(t::updated_at)),
                t::deleted_at.eq(excluded(t::deleted_at)),
            ))
            .execute(c)
    })?;
    Ok(())
}

impl PlatformRepository for StoreTx<'_> {
    fn platform_entity(
        &mut self,
        shop_id: i64,
        kind: EntityKind,
        platform_id: &str,
    ) -> StoreResult<Option<EntityRecord>> {
        let conn = &mut *self.conn;
        let row = match kind {
            EntityKind::Customer => record_of!(conn, platform_customers, shop_id, platform_id),
            EntityKind::Order => record_of!(conn, platform_orders, shop_id, platform_id),
            EntityKind::Product => record_of!(conn, platform_products, shop_id, platform_id),
            EntityKind::Category => record_of!(conn, platform_categories, shop_id, platform_id),
        }
        .map_err(storage_error)?;
        Ok(row.map(|(id, updated, deleted, document)| EntityRecord {
            id,
            platform_updated_at: updated.map(Timestamp::from_micros),
            platform_deleted_at: deleted.map(Timestamp::from_micros),
            document,
        }))
    }

    fn save_platform_entity(
        &mut self,
        shop_id: i64,
        entity: &SavedEntity,
        now: Timestamp,
    ) -> StoreResult<()> {
        let conn = &mut *self.conn;
        let now = now.as_micros();
        match &entity.document {
            EntityDocument::Customer(customer) => {
                save_customer(conn, shop_id, entity, customer, now)
            }
            EntityDocument::Order(order) => save_order(conn, shop_id, entity, order, now),
            EntityDocument::Product(product) => save_product(conn, shop_id, entity, product, now),
            EntityDocument::Category(category) => {
                save_category(conn, shop_id, entity, category, now)
            }
        }
        .map_err(storage_error)
    }

    fn delete_platform_entity(
        &mut self,
        shop_id: i64,
        kind: EntityKind,
        platform_id: &str,
        deleted_at: Timestamp,
        now: Timestamp,
    ) -> StoreResult<()> {
        let conn = &mut *self.conn;
        let (deleted_at, now) = (deleted_at.as_micros(), now.as_micros());
        match kind {
            EntityKind::Customer => delete_or_tombstone!(
                conn,
                platform_customers,
                shop_id,
                platform_id,
                deleted_at,
                now
            ),
            EntityKind::Order => {
                delete_or_tombstone!(conn, platform_orders, shop_id, platform_id, deleted_at, now)
            }
            EntityKind::Product => delete_or_tombstone!(
                conn,
                platform_products,
                shop_id,
                platform_id,
                deleted_at,
                now
            ),
            EntityKind::Category => delete_or_tombstone!(
                conn,
                platform_categories,
                shop_id,
                platform_id,
                deleted_at,
                now
            ),
        }
        .map_err(storage_error)
    }
}
