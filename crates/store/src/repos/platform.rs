//! The platform's customers (with addresses), orders, products (with variants) and categories.
//! Writes come in batches (the applier's): one upsert statement per kind and chunk. Columns are
//! pulled out of the checked JSON documents the domain hands over.

use std::collections::{HashMap, HashSet};

use diesel::prelude::*;
use diesel::upsert::excluded;
use mercer_domain::Timestamp;
use mercer_domain::events::{Document, EntityKind, EntityRecord, EntityWrite, text, time};
use mercer_domain::ports::{PlatformRepository, StoreResult};
use serde_json::Value;

use super::StoreTx;
use crate::connection::{DbConnection, on_backend};
use crate::schema::{
    customer_addresses, platform_categories, platform_customers, platform_orders,
    platform_products, product_variants,
};
use crate::store::storage_error;

/// Rows per statement: well under both databases' limits on bound values.
const CHUNK: usize = 400;

type RecordColumns = (String, i64, Option<i64>, Option<i64>, Option<String>);

macro_rules! records_of {
    ($conn:expr, $table:ident, $shop_id:expr, $ids:expr) => {
        $table::table
            .filter($table::shop_id.eq($shop_id))
            .filter($table::platform_id.eq_any($ids))
            .select((
                $table::platform_id,
                $table::id,
                $table::platform_updated_at,
                $table::platform_deleted_at,
                $table::document,
            ))
            .load::<RecordColumns>($conn)
    };
}

fn micros(time: Option<Timestamp>) -> Option<i64> {
    time.map(Timestamp::as_micros)
}

/// Mercer's own deletion time: set when the platform's deletion is.
fn deleted_at(write: &EntityWrite, now: i64) -> Option<i64> {
    write.platform_deleted_at.map(|_| now)
}

/// A text field of a write's document, when the entity is live.
fn field<'a>(write: &'a EntityWrite, name: &str) -> Option<&'a str> {
    write
        .document
        .as_ref()
        .and_then(|document| text(document, name))
}

fn json_text(value: &Document) -> String {
    serde_json::to_string(value).unwrap_or_else(|_| "{}".to_string())
}

#[derive(Insertable)]
#[diesel(table_name = platform_customers, treat_none_as_default_value = false)]
struct CustomerRow<'a> {
    shop_id: i64,
    platform_id: &'a str,
    email: &'a str,
    first_name: &'a str,
    last_name: &'a str,
    phone: &'a str,
    platform_created_at: Option<i64>,
    platform_updated_at: Option<i64>,
    platform_deleted_at: Option<i64>,
    document: Option<&'a str>,
    created_at: i64,
    updated_at: i64,
    deleted_at: Option<i64>,
}

#[derive(Insertable)]
#[diesel(table_name = customer_addresses, treat_none_as_default_value = false)]
struct AddressRow<'a> {
    shop_id: i64,
    customer_id: i64,
    address_key: String,
    platform_id: Option<&'a str>,
    is_default: bool,
    document: String,
    created_at: i64,
    updated_at: i64,
    deleted_at: Option<i64>,
}

fn put_customers(
    conn: &mut DbConnection,
    shop_id: i64,
    writes: &[EntityWrite],
    now: i64,
) -> QueryResult<()> {
    use platform_customers as t;
    let mut ids: HashMap<String, i64> = HashMap::new();
    for chunk in writes.chunks(CHUNK) {
        let rows: Vec<CustomerRow<'_>> = chunk
            .iter()
            .map(|write| CustomerRow {
                shop_id,
                platform_id: &write.platform_id,
                email: field(write, "email").unwrap_or_default(),
                first_name: field(write, "first_name").unwrap_or_default(),
                last_name: field(write, "last_name").unwrap_or_default(),
                phone: field(write, "phone").unwrap_or_default(),
                platform_created_at: micros(
                    write
                        .document
                        .as_ref()
                        .and_then(|d| time(d, "platform_created_at")),
                ),
                platform_updated_at: micros(write.platform_updated_at),
                platform_deleted_at: micros(write.platform_deleted_at),
                document: write.json.as_deref(),
                created_at: now,
                updated_at: now,
                deleted_at: deleted_at(write, now),
            })
            .collect();
        let returned: Vec<(i64, String)> = on_backend!(&mut *conn, |c| {
            diesel::insert_into(t::table)
                .values(&rows)
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
                .returning((t::id, t::platform_id))
                .get_results(c)
        })?;
        ids.extend(
            returned
                .into_iter()
                .map(|(id, platform_id)| (platform_id, id)),
        );
    }
    put_addresses(conn, shop_id, writes, &ids, now)
}

/// Makes each live customer's addresses those of its document: matched by platform id (or
/// position, for addresses without one) they keep their ids; the others are marked deleted.
/// Customers whose document leaves `addresses` out keep theirs.
fn put_addresses(
    conn: &mut DbConnection,
    shop_id: i64,
    writes: &[EntityWrite],
    ids: &HashMap<String, i64>,
    now: i64,
) -> QueryResult<()> {
    use customer_addresses as t;
    let mut rows: Vec<AddressRow<'_>> = Vec::new();
    let mut customers = Vec::new();
    for write in writes {
        let Some(document) = &write.document else {
            continue;
        };
        let (Some(Value::Array(addresses)), Some(&customer_id)) =
            (document.get("addresses"), ids.get(&write.platform_id))
        else {
            continue;
        };
        customers.push(customer_id);
        let mut keys = HashSet::new();
        for (position, address) in addresses.iter().enumerate() {
            let Value::Object(address) = address else {
                continue;
            };
            let platform_id = text(address, "platform_id");
            let key = platform_id.map_or_else(|| format!("#{position}"), str::to_string);
            // Two addresses with one platform id: the later wins, as it would field by field.
            if !keys.insert(key.clone()) {
                rows.retain(|row| !(row.customer_id == customer_id && row.address_key == key));
            }
            rows.push(AddressRow {
                shop_id,
                customer_id,
                address_key: key,
                platform_id,
                is_default: address
                    .get("is_default")
                    .and_then(Value::as_bool)
                    .unwrap_or(false),
                document: json_text(address),
                created_at: now,
                updated_at: now,
                deleted_at: None,
            });
        }
    }
    for chunk in rows.chunks(CHUNK) {
        on_backend!(&mut *conn, |c| {
            diesel::insert_into(t::table)
                .values(chunk)
                .on_conflict((t::customer_id, t::address_key))
                .do_update()
                .set((
                    t::platform_id.eq(excluded(t::platform_id)),
                    t::is_default.eq(excluded(t::is_default)),
                    t::document.eq(excluded(t::document)),
                    t::updated_at.eq(excluded(t::updated_at)),
                    t::deleted_at.eq(excluded(t::deleted_at)),
                ))
                .execute(c)
        })?;
    }
    // Every address written above carries `now`; the live ones that do not are gone.
    for chunk in customers.chunks(CHUNK) {
        diesel::update(
            t::table
                .filter(t::customer_id.eq_any(chunk))
                .filter(t::deleted_at.is_null())
                .filter(t::updated_at.ne(now)),
        )
        .set((t::deleted_at.eq(Some(now)), t::updated_at.eq(now)))
        .execute(conn)?;
    }
    Ok(())
}

fn put_orders(
    conn: &mut DbConnection,
    shop_id: i64,
    writes: &[EntityWrite],
    now: i64,
) -> QueryResult<()> {
    use platform_orders as t;
    for write in writes {
        let values = (
            t::shop_id.eq(shop_id),
            t::platform_id.eq(&write.platform_id),
            t::platform_customer_id.eq(field(write, "platform_customer_id")),
            t::order_number.eq(field(write, "order_number")),
            t::fulfillment_status.eq(field(write, "fulfillment_status")),
            t::financial_status.eq(field(write, "financial_status")),
            t::placed_at.eq(micros(
                write.document.as_ref().and_then(|d| time(d, "placed_at")),
            )),
            t::platform_updated_at.eq(micros(write.platform_updated_at)),
            t::platform_deleted_at.eq(micros(write.platform_deleted_at)),
            t::document.eq(write.json.as_deref()),
            t::created_at.eq(now),
            t::updated_at.eq(now),
            t::deleted_at.eq(deleted_at(write, now)),
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
    }
    Ok(())
}

/// Makes the product's live variants those of its document, matched by platform id.
fn sync_variants(
    conn: &mut DbConnection,
    shop_id: i64,
    product_id: i64,
    variants: &[Value],
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
        let Value::Object(variant) = variant else {
            continue;
        };
        let platform_id = text(variant, "platform_id");
        let document = json_text(variant);
        let values = (
            t::platform_id.eq(platform_id),
            t::sku.eq(text(variant, "sku")),
            t::name.eq(text(variant, "name")),
            t::price.eq(text(variant, "price")),
            t::inventory_quantity.eq(variant.get("inventory_quantity").and_then(Value::as_i64)),
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

fn put_products(
    conn: &mut DbConnection,
    shop_id: i64,
    writes: &[EntityWrite],
    now: i64,
) -> QueryResult<()> {
    use platform_products as t;
    for write in writes {
        let published = write
            .document
            .as_ref()
            .and_then(|d| d.get("published"))
            .and_then(Value::as_bool);
        let values = (
            t::shop_id.eq(shop_id),
            t::platform_id.eq(&write.platform_id),
            t::name.eq(field(write, "name")),
            t::handle.eq(field(write, "handle")),
            t::published.eq(published),
            t::platform_updated_at.eq(micros(write.platform_updated_at)),
            t::platform_deleted_at.eq(micros(write.platform_deleted_at)),
            t::document.eq(write.json.as_deref()),
            t::created_at.eq(now),
            t::updated_at.eq(now),
            t::deleted_at.eq(deleted_at(write, now)),
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
        if let Some(Value::Array(variants)) =
            write.document.as_ref().and_then(|d| d.get("variants"))
        {
            sync_variants(conn, shop_id, id, variants, now)?;
        }
    }
    Ok(())
}

fn put_categories(
    conn: &mut DbConnection,
    shop_id: i64,
    writes: &[EntityWrite],
    now: i64,
) -> QueryResult<()> {
    use platform_categories as t;
    for write in writes {
        let values = (
            t::shop_id.eq(shop_id),
            t::platform_id.eq(&write.platform_id),
            t::name.eq(field(write, "name")),
            t::image_url.eq(field(write, "image_url")),
            t::platform_updated_at.eq(micros(write.platform_updated_at)),
            t::platform_deleted_at.eq(micros(write.platform_deleted_at)),
            t::document.eq(write.json.as_deref()),
            t::created_at.eq(now),
            t::updated_at.eq(now),
            t::deleted_at.eq(deleted_at(write, now)),
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
    }
    Ok(())
}

impl PlatformRepository for StoreTx<'_> {
    fn platform_entities(
        &mut self,
        shop_id: i64,
        kind: EntityKind,
        platform_ids: &[&str],
    ) -> StoreResult<Vec<(String, EntityRecord)>> {
        let mut found = Vec::with_capacity(platform_ids.len());
        for chunk in platform_ids.chunks(CHUNK) {
            let conn = &mut *self.conn;
            let rows = match kind {
                EntityKind::Customer => records_of!(conn, platform_customers, shop_id, chunk),
                EntityKind::Order => records_of!(conn, platform_orders, shop_id, chunk),
                EntityKind::Product => records_of!(conn, platform_products, shop_id, chunk),
                EntityKind::Category => records_of!(conn, platform_categories, shop_id, chunk),
            }
            .map_err(storage_error)?;
            found.extend(
                rows.into_iter()
                    .map(|(platform_id, id, updated, deleted, document)| {
                        (
                            platform_id,
                            EntityRecord {
                                id,
                                platform_updated_at: updated.map(Timestamp::from_micros),
                                platform_deleted_at: deleted.map(Timestamp::from_micros),
                                document,
                            },
                        )
                    }),
            );
        }
        Ok(found)
    }

    fn put_platform_entities(
        &mut self,
        shop_id: i64,
        kind: EntityKind,
        entities: &[EntityWrite],
        now: Timestamp,
    ) -> StoreResult<()> {
        let conn = &mut *self.conn;
        let now = now.as_micros();
        match kind {
            EntityKind::Customer => put_customers(conn, shop_id, entities, now),
            EntityKind::Order => put_orders(conn, shop_id, entities, now),
            EntityKind::Product => put_products(conn, shop_id, entities, now),
            EntityKind::Category => put_categories(conn, shop_id, entities, now),
        }
        .map_err(storage_error)
    }
}
