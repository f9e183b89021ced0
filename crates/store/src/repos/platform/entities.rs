//! The platform's customers (with addresses), orders, products (with variants) and categories.
//! Writes come in batches (the applier's). On SQLite each row goes through one statement that
//! stays prepared (a statement whose shape varies, such as a multi-row insert, is prepared anew
//! every time, which costs more than the rows); on PostgreSQL rows go in chunks, one round trip
//! each. Columns are pulled out of the typed documents the domain hands over.

use mercer_domain::kernel::ids::{AddressId, CustomerGroupId, CustomerId, ShopId};
use std::collections::{HashMap, HashSet, VecDeque};

use diesel::prelude::*;
use diesel::upsert::excluded;
use mercer_domain::Timestamp;
use mercer_domain::kernel::error::StoreResult;
use mercer_domain::platform::PlatformRepository;
use mercer_domain::platform::addresses::{
    AddressChanges, AddressKey, AddressesBefore, StoredAddress, address_changes,
};
use mercer_domain::platform::customer_groups::NewCustomerGroup;
use mercer_domain::platform::events::{
    CustomerContact, EntityDocument, EntityKind, EntityRecord, EntityWrite,
};
use mercer_domain::platform::resources::{Category, Customer, Order, PlatformId, Product, Variant};

use crate::connection::{
    DbConnection, KeepPrepared, on_backend, planned_each_time, statement_sites,
};
use crate::repos::{ROWS_PER_STATEMENT, StoreTx};

statement_sites!(
    UpsertCustomer,
    UpdateCustomer,
    UpsertAddress,
    UpdateAddress,
    MarkAddressGone,
    UpsertOrder,
    UpsertProduct,
    UpsertCategory,
);
use crate::schema::{
    customer_addresses, platform_categories, platform_customers, platform_orders,
    platform_products, product_variants, webhook_endpoints,
};
use crate::store::storage_error;

type RecordColumns = (String, i64, Option<i64>, Option<i64>, Option<String>);

/// The stored records of `ids`: one prepared lookup per id on SQLite, `IN` lists elsewhere.
/// `$key` is the table's `platform_id` as `Text` (customers' is nullable: a customer made by
/// the subscription API has none, and the lookup is by a given id).
macro_rules! records_of {
    ($conn:expr, $table:ident, $key:expr, $shop_id:expr, $ids:expr) => {{
        let columns = (
            $key,
            $table::id,
            $table::platform_updated_at,
            $table::platform_deleted_at,
            $table::document,
        );
        let mut found: Vec<RecordColumns> = Vec::with_capacity($ids.len());
        let mut load = || -> QueryResult<()> {
            match $conn {
                DbConnection::Sqlite(c) => {
                    for id in $ids {
                        found.extend(
                            $table::table
                                .filter($table::shop_id.eq($shop_id.0))
                                .filter($key.eq(*id))
                                .select(columns)
                                // Not `first()`: SQLite prepares a statement again whenever
                                // its `LIMIT ?` is bound anew. The unique index allows one row.
                                .load::<RecordColumns>(c)?,
                        );
                    }
                }
                DbConnection::Pg(_) => {
                    for chunk in $ids.chunks(ROWS_PER_STATEMENT) {
                        found.extend(planned_each_time($conn, |c| {
                            $table::table
                                .filter($table::shop_id.eq($shop_id.0))
                                .filter($key.eq_any(chunk))
                                .select(columns)
                                .load::<RecordColumns>(c)
                        })?);
                    }
                }
            }
            Ok(())
        };
        load().map(|()| found)
    }};
}

fn micros(time: Option<Timestamp>) -> Option<i64> {
    time.map(Timestamp::as_micros)
}

/// Mercer's own deletion time: set when the platform's deletion is.
fn deleted_at(write: &EntityWrite, now: i64) -> Option<i64> {
    write.platform_deleted_at.map(|_| now)
}

fn id_text(id: &Option<PlatformId>) -> Option<&str> {
    id.as_ref().map(PlatformId::as_str)
}

fn customer_of(write: &EntityWrite) -> Option<&Customer> {
    match &write.document {
        Some(EntityDocument::Customer(customer)) => Some(customer),
        _ => None,
    }
}

fn order_of(write: &EntityWrite) -> Option<&Order> {
    match &write.document {
        Some(EntityDocument::Order(order)) => Some(order),
        _ => None,
    }
}

fn product_of(write: &EntityWrite) -> Option<&Product> {
    match &write.document {
        Some(EntityDocument::Product(product)) => Some(product),
        _ => None,
    }
}

fn category_of(write: &EntityWrite) -> Option<&Category> {
    match &write.document {
        Some(EntityDocument::Category(category)) => Some(category),
        _ => None,
    }
}

/// A text field of a write's customer, empty when absent (the columns are NOT NULL).
fn customer_text(write: &EntityWrite, pick: fn(&Customer) -> &Option<String>) -> &str {
    customer_of(write)
        .and_then(|customer| pick(customer).as_deref())
        .unwrap_or_default()
}

fn json_text<T: serde::Serialize>(value: &T) -> String {
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
struct AddressRow {
    shop_id: i64,
    customer_id: i64,
    address_key: String,
    platform_id: Option<String>,
    is_default: bool,
    document: String,
    created_at: i64,
    updated_at: i64,
    deleted_at: Option<i64>,
    /// Whether a row with this key is stored: it is then updated in place.
    #[diesel(skip_insertion)]
    stored: bool,
}

/// An address row as stored: (customer, key, platform id, default, document, deleted).
type StoredColumns = (i64, String, Option<String>, bool, String, Option<i64>);

fn put_customers(
    conn: &mut DbConnection,
    shop_id: ShopId,
    writes: &[EntityWrite],
    now: i64,
) -> QueryResult<()> {
    use platform_customers as t;
    let rows: Vec<CustomerRow<'_>> = writes
        .iter()
        .map(|write| CustomerRow {
            shop_id: shop_id.0,
            platform_id: &write.platform_id,
            email: customer_text(write, |c| &c.email),
            first_name: customer_text(write, |c| &c.first_name),
            last_name: customer_text(write, |c| &c.last_name),
            phone: customer_text(write, |c| &c.phone),
            platform_created_at: micros(customer_of(write).and_then(|c| c.platform_created_at)),
            platform_updated_at: micros(write.platform_updated_at),
            platform_deleted_at: micros(write.platform_deleted_at),
            document: write.json.as_deref(),
            created_at: now,
            updated_at: now,
            deleted_at: deleted_at(write, now),
        })
        .collect();
    // The columns a write replaces (not the key, nor `created_at`), listed once for the
    // upsert and the in-place update alike.
    macro_rules! changes {
        ($value:ident) => {
            changes!(
                $value: email,
                first_name,
                last_name,
                phone,
                platform_created_at,
                platform_updated_at,
                platform_deleted_at,
                document,
                updated_at,
                deleted_at
            )
        };
        (excluded: $($column:ident),+) => { ($(t::$column.eq(excluded(t::$column)),)+) };
        ($row:ident: $($column:ident),+) => { ($(t::$column.eq($row.$column),)+) };
    }
    macro_rules! upsert {
        ($values:expr) => {
            diesel::insert_into(t::table)
                .values($values)
                .on_conflict((t::shop_id, t::platform_id))
                .do_update()
                .set(changes!(excluded))
                .returning((t::platform_id.assume_not_null(), t::id))
        };
    }
    let mut ids: HashMap<String, i64> = HashMap::with_capacity(rows.len());
    match &mut *conn {
        DbConnection::Sqlite(c) => {
            for (row, write) in rows.iter().zip(writes) {
                // A row known to exist is updated in place: no conflict to detect, and (one
                // row by its id) no statement journal. Should it be gone, the upsert follows.
                if let Some(id) = write.stored_id {
                    // The key too, so a stale id can never land on another entity's row.
                    let updated = KeepPrepared::<UpdateCustomer, _>::new(
                        diesel::update(
                            t::table
                                .filter(t::id.eq(id))
                                .filter(t::shop_id.eq(shop_id.0))
                                .filter(t::platform_id.assume_not_null().eq(row.platform_id)),
                        )
                        .set(changes!(row))
                        .returning(t::id),
                    )
                    .load::<i64>(c)?;
                    if !updated.is_empty() {
                        ids.insert(write.platform_id.clone(), id);
                        continue;
                    }
                }
                let (platform_id, id) = KeepPrepared::<UpsertCustomer, _>::new(upsert!(row))
                    .get_result::<(String, i64)>(c)?;
                ids.insert(platform_id, id);
            }
        }
        DbConnection::Pg(c) => {
            for chunk in rows.chunks(ROWS_PER_STATEMENT) {
                ids.extend(upsert!(chunk).get_results::<(String, i64)>(c)?);
            }
        }
    }
    put_addresses(conn, shop_id, writes, &ids, now)
}

/// The stored address rows of `customers`, live or not.
fn stored_addresses(conn: &mut DbConnection, customers: &[i64]) -> QueryResult<Vec<StoredColumns>> {
    use customer_addresses as t;
    let columns = (
        t::customer_id,
        t::address_key,
        t::platform_id,
        t::is_default,
        t::document,
        t::deleted_at,
    );
    let mut stored = Vec::new();
    match conn {
        DbConnection::Sqlite(c) => {
            for customer in customers {
                stored.extend(
                    t::table
                        .filter(t::customer_id.eq(customer))
                        .select(columns)
                        .load::<StoredColumns>(c)?,
                );
            }
        }
        DbConnection::Pg(_) => {
            for chunk in customers.chunks(ROWS_PER_STATEMENT) {
                stored.extend(planned_each_time(conn, |c| {
                    t::table
                        .filter(t::customer_id.eq_any(chunk))
                        .select(columns)
                        .load::<StoredColumns>(c)
                })?);
            }
        }
    }
    Ok(stored)
}

/// The rows that make a customer's address rows those of its document (the domain's
/// [`address_changes`]), and the keys to mark gone.
fn collect_changes(
    shop_id: ShopId,
    customer_id: i64,
    changes: AddressChanges,
    now: i64,
    changed: &mut Vec<AddressRow>,
    gone: &mut Vec<(i64, String)>,
) {
    changed.extend(changes.written.into_iter().map(|write| AddressRow {
        shop_id: shop_id.0,
        customer_id,
        address_key: write.row.key.into_string(),
        platform_id: write.row.platform_id,
        is_default: write.row.is_default,
        document: write.row.document,
        created_at: now,
        updated_at: now,
        deleted_at: None,
        stored: write.stored,
    }));
    gone.extend(
        changes
            .gone
            .into_iter()
            .map(|key| (customer_id, key.into_string())),
    );
}

/// Makes each live customer's addresses those of its document: matched by key they keep their
/// ids; the others are marked deleted. Only rows that change are written: compared with the
/// customer's previous document when the domain has it, with the stored rows otherwise (the
/// decision is the domain's [`address_changes`]). Customers whose document leaves `addresses`
/// out keep theirs.
fn put_addresses(
    conn: &mut DbConnection,
    shop_id: ShopId,
    writes: &[EntityWrite],
    ids: &HashMap<String, i64>,
    now: i64,
) -> QueryResult<()> {
    use customer_addresses as t;
    let mut changed: Vec<AddressRow> = Vec::new();
    let mut gone: Vec<(i64, String)> = Vec::new();
    // Customers known only from the store: (customer, its document's addresses).
    let mut unknown = Vec::new();
    for write in writes {
        let (Some(addresses), Some(&customer_id)) = (
            customer_of(write).and_then(|c| c.addresses.as_ref()),
            ids.get(&write.platform_id),
        ) else {
            continue;
        };
        let previous = match &write.previous {
            Some(EntityDocument::Customer(previous)) => previous.addresses.as_deref(),
            _ => None,
        };
        match previous {
            Some(previous) => {
                let changes = address_changes(AddressesBefore::Document(previous), addresses);
                collect_changes(shop_id, customer_id, changes, now, &mut changed, &mut gone);
            }
            None => unknown.push((customer_id, addresses)),
        }
    }
    if !unknown.is_empty() {
        let customers: Vec<i64> = unknown.iter().map(|(customer, _)| *customer).collect();
        // Each customer's rows, in the order read, grouped in one pass.
        let mut by_customer: HashMap<i64, Vec<StoredAddress>> = HashMap::new();
        for (customer_id, key, platform_id, is_default, document, deleted_at) in
            stored_addresses(conn, &customers)?
        {
            by_customer
                .entry(customer_id)
                .or_default()
                .push(StoredAddress {
                    row: mercer_domain::platform::addresses::AddressRow {
                        key: AddressKey::stored(key),
                        platform_id,
                        is_default,
                        document,
                    },
                    deleted: deleted_at.is_some(),
                });
        }
        for (customer_id, addresses) in unknown {
            let rows = by_customer.remove(&customer_id).unwrap_or_default();
            let changes = address_changes(AddressesBefore::Stored(&rows), addresses);
            collect_changes(shop_id, customer_id, changes, now, &mut changed, &mut gone);
        }
    }
    // As for customers: the replaced columns, listed once.
    macro_rules! changes {
        ($value:ident) => {
            changes!($value: platform_id, is_default, document, updated_at, deleted_at)
        };
        (excluded: $($column:ident),+) => { ($(t::$column.eq(excluded(t::$column)),)+) };
        ($row:ident: $($column:ident),+) => { ($(t::$column.eq(&$row.$column),)+) };
    }
    macro_rules! upsert {
        ($values:expr) => {
            diesel::insert_into(t::table)
                .values($values)
                .on_conflict((t::customer_id, t::address_key))
                .do_update()
                .set(changes!(excluded))
        };
    }
    macro_rules! mark_gone {
        ($customer_id:expr, $key:expr) => {
            diesel::update(
                t::table
                    .filter(t::customer_id.eq($customer_id))
                    .filter(t::address_key.eq($key))
                    .filter(t::deleted_at.is_null()),
            )
            .set((t::deleted_at.eq(Some(now)), t::updated_at.eq(now)))
        };
    }
    match conn {
        DbConnection::Sqlite(c) => {
            for row in &changed {
                // As for customers: in place when stored (one row by its unique key).
                if row.stored {
                    let updated = KeepPrepared::<UpdateAddress, _>::new(
                        diesel::update(
                            t::table
                                .filter(t::customer_id.eq(row.customer_id))
                                .filter(t::address_key.eq(&row.address_key)),
                        )
                        .set(changes!(row))
                        .returning(t::id),
                    )
                    .load::<i64>(c)?;
                    if !updated.is_empty() {
                        continue;
                    }
                }
                KeepPrepared::<UpsertAddress, _>::new(upsert!(row).returning(t::id))
                    .get_result::<i64>(c)?;
            }
            for (customer_id, key) in &gone {
                KeepPrepared::<MarkAddressGone, _>::new(
                    mark_gone!(customer_id, key).returning(t::id),
                )
                .load::<i64>(c)?;
            }
        }
        DbConnection::Pg(c) => {
            for chunk in changed.chunks(ROWS_PER_STATEMENT) {
                upsert!(chunk).execute(c)?;
            }
            for (customer_id, key) in &gone {
                mark_gone!(customer_id, key).execute(c)?;
            }
        }
    }
    Ok(())
}

/// Upserts one row of an entity table by (shop_id, platform_id): the entity's own columns,
/// then those every entity table has. A conflict updates all of them but the key and
/// created_at. Evaluates to the row's id.
macro_rules! upsert_entity {
    ($conn:expr, $site:ty, $write:expr, $shop_id:expr, $now:expr, { $($column:ident: $value:expr),* $(,)? }) => {{
        let (write, now) = ($write, $now);
        let values = (
            t::shop_id.eq($shop_id.0),
            t::platform_id.eq(&write.platform_id),
            $(t::$column.eq($value),)*
            t::platform_updated_at.eq(micros(write.platform_updated_at)),
            t::platform_deleted_at.eq(micros(write.platform_deleted_at)),
            t::document.eq(write.json.as_deref()),
            t::created_at.eq(now),
            t::updated_at.eq(now),
            t::deleted_at.eq(deleted_at(write, now)),
        );
        on_backend!(&mut *$conn, |c| {
            KeepPrepared::<$site, _>::new(
                diesel::insert_into(t::table)
                    .values(values)
                    .on_conflict((t::shop_id, t::platform_id))
                    .do_update()
                    .set((
                        $(t::$column.eq(excluded(t::$column)),)*
                        t::platform_updated_at.eq(excluded(t::platform_updated_at)),
                        t::platform_deleted_at.eq(excluded(t::platform_deleted_at)),
                        t::document.eq(excluded(t::document)),
                        t::updated_at.eq(excluded(t::updated_at)),
                        t::deleted_at.eq(excluded(t::deleted_at)),
                    ))
                    .returning(t::id),
            )
            .get_result::<i64>(c)
        })
    }};
}

fn put_orders(
    conn: &mut DbConnection,
    shop_id: ShopId,
    writes: &[EntityWrite],
    now: i64,
) -> QueryResult<()> {
    use platform_orders as t;
    for write in writes {
        let order = order_of(write);
        upsert_entity!(conn, UpsertOrder, write, shop_id, now, {
            platform_customer_id: order.and_then(|o| id_text(&o.platform_customer_id)),
            order_number: order.and_then(|o| o.order_number.as_deref()),
            fulfillment_status: order.and_then(|o| o.fulfillment_status.as_deref()),
            financial_status: order.and_then(|o| o.financial_status.as_deref()),
            placed_at: micros(order.and_then(|o| o.placed_at)),
        })?;
    }
    Ok(())
}

/// Makes the product's live variants those of its document, matched by platform id.
fn sync_variants(
    conn: &mut DbConnection,
    shop_id: ShopId,
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
    // The stored rows of each platform id, in the order read: a variant takes the first not
    // taken yet (a hash lookup, not a scan of the rows for each variant).
    let mut unmatched: HashMap<&str, VecDeque<i64>> = HashMap::new();
    for (id, stored) in &existing {
        if let Some(stored) = stored {
            unmatched.entry(stored.as_str()).or_default().push_back(*id);
        }
    }
    for variant in variants {
        let platform_id = id_text(&variant.platform_id);
        let document = json_text(variant);
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
        let matched = platform_id
            .and_then(|platform_id| unmatched.get_mut(platform_id))
            .and_then(VecDeque::pop_front);
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
                        t::shop_id.eq(shop_id.0),
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
    shop_id: ShopId,
    writes: &[EntityWrite],
    now: i64,
) -> QueryResult<()> {
    use platform_products as t;
    for write in writes {
        let product = product_of(write);
        let id = upsert_entity!(conn, UpsertProduct, write, shop_id, now, {
            name: product.and_then(|p| p.name.as_deref()),
            handle: product.and_then(|p| p.handle.as_deref()),
            published: product.and_then(|p| p.published),
        })?;
        if let Some(variants) = product.and_then(|p| p.variants.as_ref()) {
            sync_variants(conn, shop_id, id, variants, now)?;
        }
    }
    Ok(())
}

fn put_categories(
    conn: &mut DbConnection,
    shop_id: ShopId,
    writes: &[EntityWrite],
    now: i64,
) -> QueryResult<()> {
    use platform_categories as t;
    for write in writes {
        let category = category_of(write);
        upsert_entity!(conn, UpsertCategory, write, shop_id, now, {
            name: category.and_then(|c| c.name.as_deref()),
            image_url: category.and_then(|c| c.image_url.as_deref()),
        })?;
    }
    Ok(())
}

impl PlatformRepository for StoreTx<'_> {
    fn customer_contacts(
        &mut self,
        shop_id: ShopId,
        platform_ids: &[&str],
    ) -> StoreResult<Vec<(String, CustomerContact)>> {
        use platform_customers as t;
        type Columns = (String, String, String, String, String);
        let mut found = Vec::with_capacity(platform_ids.len());
        for chunk in platform_ids.chunks(ROWS_PER_STATEMENT) {
            let rows: Vec<Columns> = planned_each_time(self.conn, |c| {
                t::table
                    .filter(t::shop_id.eq(shop_id.0))
                    .filter(t::platform_id.assume_not_null().eq_any(chunk))
                    .filter(t::deleted_at.is_null())
                    .select((
                        t::platform_id.assume_not_null(),
                        t::first_name,
                        t::last_name,
                        t::email,
                        t::phone,
                    ))
                    .load::<Columns>(c)
            })
            .map_err(storage_error)?;
            found.extend(rows.into_iter().map(|(id, first, last, email, phone)| {
                let contact = CustomerContact::from_columns(&first, &last, &email, &phone);
                (id, contact)
            }));
        }
        Ok(found)
    }

    fn hears_customer_changes(&mut self, shop_id: ShopId) -> StoreResult<bool> {
        // The subscription webhooks' kind and topic as the webhooks and subscriptions features
        // store them (a store feature reads no other's code); the repository suite checks them
        // against the domain's names.
        diesel::select(diesel::dsl::exists(
            webhook_endpoints::table
                .filter(webhook_endpoints::shop_id.eq(shop_id.0))
                .filter(webhook_endpoints::kind.eq("subscription"))
                .filter(webhook_endpoints::topic.eq("customer_updated"))
                .filter(webhook_endpoints::deleted_at.is_null())
                .filter(webhook_endpoints::disabled_at.is_null()),
        ))
        .get_result(self.conn)
        .map_err(storage_error)
    }

    fn customer_ids(
        &mut self,
        shop_id: ShopId,
        platform_ids: &[&str],
    ) -> StoreResult<Vec<(String, CustomerId)>> {
        super::customer_groups::customer_ids(self.conn, shop_id, platform_ids)
            .map_err(storage_error)
    }

    fn put_customer_groups(
        &mut self,
        shop_id: ShopId,
        groups: &[NewCustomerGroup],
        now: Timestamp,
    ) -> StoreResult<Vec<(String, CustomerGroupId)>> {
        super::customer_groups::put_customer_groups(self.conn, shop_id, groups, now.as_micros())
            .map_err(storage_error)
    }

    fn set_customer_groups(
        &mut self,
        shop_id: ShopId,
        memberships: &[(CustomerId, Vec<CustomerGroupId>)],
    ) -> StoreResult<()> {
        super::customer_groups::set_customer_groups(self.conn, shop_id, memberships)
            .map_err(storage_error)
    }

    fn products_of_variants(
        &mut self,
        shop_id: ShopId,
        variant_ids: &[&str],
    ) -> StoreResult<Vec<(String, EntityRecord)>> {
        use platform_products as p;
        use product_variants as v;
        // Only variants with one of these ids match: their id is not null.
        let rows: Vec<RecordColumns> = v::table
            .inner_join(p::table)
            .filter(v::shop_id.eq(shop_id.0))
            .filter(v::platform_id.eq_any(variant_ids))
            .filter(v::deleted_at.is_null())
            .filter(p::deleted_at.is_null())
            .filter(p::platform_deleted_at.is_null())
            .select((
                v::platform_id.assume_not_null(),
                p::id,
                p::platform_updated_at,
                p::platform_deleted_at,
                p::document,
            ))
            .load(self.conn)
            .map_err(storage_error)?;
        Ok(rows
            .into_iter()
            .map(|(variant_id, id, updated, deleted, document)| {
                let record = EntityRecord {
                    id,
                    platform_updated_at: updated.map(Timestamp::from_micros),
                    platform_deleted_at: deleted.map(Timestamp::from_micros),
                    document,
                };
                (variant_id, record)
            })
            .collect())
    }

    fn variant_ids_of_sku(&mut self, shop_id: ShopId, sku: &str) -> StoreResult<Vec<String>> {
        use platform_products as p;
        use product_variants as v;
        v::table
            .inner_join(p::table)
            .filter(v::shop_id.eq(shop_id.0))
            .filter(v::sku.eq(sku))
            .filter(v::platform_id.is_not_null())
            .filter(v::deleted_at.is_null())
            .filter(p::deleted_at.is_null())
            .filter(p::platform_deleted_at.is_null())
            .select(v::platform_id.assume_not_null())
            .distinct()
            .order(v::platform_id)
            .load(self.conn)
            .map_err(storage_error)
    }

    fn platform_entities(
        &mut self,
        shop_id: ShopId,
        kind: EntityKind,
        platform_ids: &[&str],
    ) -> StoreResult<Vec<(String, EntityRecord)>> {
        let conn = &mut *self.conn;
        let rows = match kind {
            EntityKind::Customer => {
                let key = platform_customers::platform_id.assume_not_null();
                records_of!(conn, platform_customers, key, shop_id, platform_ids)
            }
            EntityKind::Order => {
                let key = platform_orders::platform_id;
                records_of!(conn, platform_orders, key, shop_id, platform_ids)
            }
            EntityKind::Product => {
                let key = platform_products::platform_id;
                records_of!(conn, platform_products, key, shop_id, platform_ids)
            }
            EntityKind::Category => {
                let key = platform_categories::platform_id;
                records_of!(conn, platform_categories, key, shop_id, platform_ids)
            }
        }
        .map_err(storage_error)?;
        Ok(rows
            .into_iter()
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
            })
            .collect())
    }

    fn put_platform_entities(
        &mut self,
        shop_id: ShopId,
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

    fn customer_platform_id(
        &mut self,
        shop_id: ShopId,
        customer_id: CustomerId,
    ) -> StoreResult<Option<String>> {
        use platform_customers as t;
        Ok(t::table
            .filter(t::id.eq(customer_id.0))
            .filter(t::shop_id.eq(shop_id.0))
            .select(t::platform_id)
            .first::<Option<String>>(self.conn)
            .optional()
            .map_err(storage_error)?
            .flatten())
    }

    fn address_platform_id(
        &mut self,
        shop_id: ShopId,
        address_id: AddressId,
    ) -> StoreResult<Option<String>> {
        use customer_addresses as t;
        Ok(t::table
            .filter(t::id.eq(address_id.0))
            .filter(t::shop_id.eq(shop_id.0))
            .select(t::platform_id)
            .first::<Option<String>>(self.conn)
            .optional()
            .map_err(storage_error)?
            .flatten())
    }

    fn set_customer_platform_id(
        &mut self,
        shop_id: ShopId,
        customer_id: CustomerId,
        platform_id: &str,
        now: Timestamp,
    ) -> StoreResult<bool> {
        use platform_customers as t;
        let changed = diesel::update(
            t::table
                .filter(t::id.eq(customer_id.0))
                .filter(t::shop_id.eq(shop_id.0))
                .filter(t::platform_id.is_null()),
        )
        .set((
            t::platform_id.eq(platform_id),
            t::updated_at.eq(now.as_micros()),
        ))
        .execute(self.conn)
        .map_err(storage_error)?;
        Ok(changed == 1)
    }

    /// The platform id becomes the address's key too (as an address the platform sent is
    /// keyed), so its next event of the customer updates this row instead of adding one.
    fn set_address_platform_id(
        &mut self,
        shop_id: ShopId,
        address_id: AddressId,
        platform_id: &str,
        now: Timestamp,
    ) -> StoreResult<bool> {
        use customer_addresses as t;
        let changed = diesel::update(
            t::table
                .filter(t::id.eq(address_id.0))
                .filter(t::shop_id.eq(shop_id.0))
                .filter(t::platform_id.is_null()),
        )
        .set((
            t::platform_id.eq(platform_id),
            t::address_key.eq(platform_id),
            t::updated_at.eq(now.as_micros()),
        ))
        .execute(self.conn)
        .map_err(storage_error)?;
        Ok(changed == 1)
    }

    fn sibling_address_by_key(
        &mut self,
        shop_id: ShopId,
        address_id: AddressId,
        key: &str,
    ) -> StoreResult<Option<AddressId>> {
        super::merges::sibling_address_by_key(self.conn, shop_id, address_id, key)
            .map_err(storage_error)
    }

    fn merge_address_rows(
        &mut self,
        shop_id: ShopId,
        kept: AddressId,
        duplicate: AddressId,
        now: Timestamp,
    ) -> StoreResult<bool> {
        super::merges::merge_address_rows(self.conn, shop_id, kept, duplicate, now.as_micros())
            .map_err(storage_error)
    }

    fn merge_customer_rows(
        &mut self,
        shop_id: ShopId,
        kept: CustomerId,
        duplicate: CustomerId,
        now: Timestamp,
    ) -> StoreResult<bool> {
        super::merges::merge_customer_rows(self.conn, shop_id, kept, duplicate, now.as_micros())
            .map_err(storage_error)
    }
}
