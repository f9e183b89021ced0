//! The customer directory's queries: customers, their addresses, labels and groups.

use diesel::prelude::*;
use mercer_domain::Timestamp;
use mercer_domain::directory::DirectoryRepository;
use mercer_domain::directory::{
    CustomerGroupMembership, DirectoryAddress, DirectoryCustomer, DirectoryPage, DirectoryQuery,
    Filter, FilterField, FilterOp, FilterValue, Label, OrderBy,
};
use mercer_domain::kernel::error::StoreResult;
use mercer_domain::kernel::ids::ShopId;
use mercer_domain::kernel::ids::{AddressId, CustomerGroupId, CustomerId, LabelId};
use mercer_domain::platform::resources::CustomerAddress;

use crate::connection::on_backend;
use crate::repos::StoreTx;
use crate::schema::{
    customer_addresses, customer_group_members, customer_groups, customer_labels,
    platform_customers,
};
use crate::store::storage_error;

diesel::define_sql_function! {
    /// SQL lower(): ASCII lowercasing on both databases (C collation on PostgreSQL).
    fn lower(text: diesel::sql_types::Text) -> diesel::sql_types::Text;
}

#[derive(Queryable, Selectable)]
#[diesel(table_name = platform_customers)]
struct CustomerRow {
    id: i64,
    platform_id: Option<String>,
    email: String,
    first_name: String,
    last_name: String,
    phone: String,
    platform_created_at: Option<i64>,
    created_at: i64,
    updated_at: i64,
    deleted_at: Option<i64>,
}

fn non_empty(text: String) -> Option<String> {
    (!text.is_empty()).then_some(text)
}

impl From<CustomerRow> for DirectoryCustomer {
    fn from(row: CustomerRow) -> Self {
        DirectoryCustomer {
            id: CustomerId(row.id),
            platform_id: row.platform_id,
            email: non_empty(row.email),
            first_name: non_empty(row.first_name),
            last_name: non_empty(row.last_name),
            phone: non_empty(row.phone),
            platform_created_at: row.platform_created_at.map(Timestamp::from_micros),
            created_at: Timestamp::from_micros(row.created_at),
            updated_at: Timestamp::from_micros(row.updated_at),
            deleted_at: row.deleted_at.map(Timestamp::from_micros),
        }
    }
}

#[derive(Queryable, Selectable)]
#[diesel(table_name = customer_addresses)]
struct AddressRow {
    id: i64,
    customer_id: i64,
    platform_id: Option<String>,
    is_default: bool,
    document: String,
    created_at: i64,
    updated_at: i64,
    deleted_at: Option<i64>,
}

/// An address row with its owning customer's platform id: an address's `platform_customer_id`
/// is that, whatever the address's own document says (events carry none). A customer made by
/// the subscription API has none until the connector gives it one.
impl AddressRow {
    fn into_address(self, customer_platform_id: Option<String>) -> DirectoryAddress {
        // Stored by this crate from a checked address, so it parses; an empty one if not.
        let address: CustomerAddress = serde_json::from_str(&self.document).unwrap_or_default();
        DirectoryAddress {
            id: AddressId(self.id),
            customer_id: CustomerId(self.customer_id),
            platform_id: self.platform_id,
            platform_customer_id: customer_platform_id.filter(|id| !id.is_empty()),
            first_name: address.first_name,
            last_name: address.last_name,
            company: address.company,
            phone: address.phone,
            street_1: address.street_1,
            street_2: address.street_2,
            city: address.city,
            province: address.province,
            province_code: address.province_code,
            zip: address.postal_code,
            country: address.country,
            country_code: address.country_code,
            address_type: address.address_type,
            address_use: address.address_use,
            is_default: self.is_default,
            created_at: Timestamp::from_micros(self.created_at),
            updated_at: Timestamp::from_micros(self.updated_at),
            deleted_at: self.deleted_at.map(Timestamp::from_micros),
        }
    }
}

#[derive(Queryable, Selectable)]
#[diesel(table_name = customer_labels)]
struct LabelRow {
    id: i64,
    customer_id: i64,
    name: String,
    created_at: i64,
    updated_at: i64,
    deleted_at: Option<i64>,
}

impl From<LabelRow> for Label {
    fn from(row: LabelRow) -> Self {
        Label {
            id: LabelId(row.id),
            customer_id: CustomerId(row.customer_id),
            name: row.name,
            created_at: Timestamp::from_micros(row.created_at),
            updated_at: Timestamp::from_micros(row.updated_at),
            deleted_at: row.deleted_at.map(Timestamp::from_micros),
        }
    }
}

/// `%term%` for LIKE (with `escape('\\')`), with the term's own wildcards taken literally.
pub(crate) fn contains_pattern(term: &str) -> String {
    let escaped = term
        .to_lowercase()
        .replace('\\', "\\\\")
        .replace('%', "\\%")
        .replace('_', "\\_");
    format!("%{escaped}%")
}

/// Applies the query's conditions (not its order or page) to a boxed customers query.
macro_rules! filtered {
    ($shop_id:expr, $query:expr) => {{
        use platform_customers as t;
        let query: &DirectoryQuery = $query;
        let mut q = t::table
            .filter(t::shop_id.eq($shop_id.0))
            .filter(t::deleted_at.is_null())
            .into_boxed();
        if let Some(since) = query.since_id {
            q = q.filter(t::id.gt(since.0));
        }
        if let Some(min) = query.updated_at_min {
            q = q.filter(t::updated_at.ge(min.as_micros()));
        }
        if let Some(max) = query.updated_at_max {
            q = q.filter(t::updated_at.le(max.as_micros()));
        }
        if let Some(ids) = &query.ids {
            q = q.filter(t::id.eq_any(ids.iter().map(|id| id.0).collect::<Vec<i64>>()));
        }
        if let Some(term) = &query.search {
            let pattern = contains_pattern(term);
            q = q.filter(
                lower(t::email)
                    .like(pattern.clone())
                    .escape('\\')
                    .or(lower(t::first_name).like(pattern.clone()).escape('\\'))
                    .or(lower(t::last_name).like(pattern.clone()).escape('\\'))
                    .or(lower(t::phone).like(pattern).escape('\\')),
            );
        }
        if let Some(label) = &query.label {
            q = q.filter(
                t::id.eq_any(
                    customer_labels::table
                        .filter(customer_labels::shop_id.eq($shop_id.0))
                        .filter(customer_labels::name.eq(label.clone()))
                        .filter(customer_labels::deleted_at.is_null())
                        .select(customer_labels::customer_id),
                ),
            );
        }
        for Filter { field, op, value } in &query.filters {
            q = match (field, value) {
                (FilterField::Id, FilterValue::Integer(v)) => {
                    let v = *v;
                    match op {
                        FilterOp::Lt => q.filter(t::id.lt(v)),
                        FilterOp::Lte => q.filter(t::id.le(v)),
                        FilterOp::Gt => q.filter(t::id.gt(v)),
                        FilterOp::Gte => q.filter(t::id.ge(v)),
                        FilterOp::Eq | FilterOp::Like => q.filter(t::id.eq(v)),
                    }
                }
                (FilterField::CreatedAt, FilterValue::Time(v)) => {
                    let v = v.as_micros();
                    match op {
                        FilterOp::Lt => q.filter(t::created_at.lt(v)),
                        FilterOp::Lte => q.filter(t::created_at.le(v)),
                        FilterOp::Gt => q.filter(t::created_at.gt(v)),
                        FilterOp::Gte => q.filter(t::created_at.ge(v)),
                        FilterOp::Eq | FilterOp::Like => q.filter(t::created_at.eq(v)),
                    }
                }
                (FilterField::UpdatedAt, FilterValue::Time(v)) => {
                    let v = v.as_micros();
                    match op {
                        FilterOp::Lt => q.filter(t::updated_at.lt(v)),
                        FilterOp::Lte => q.filter(t::updated_at.le(v)),
                        FilterOp::Gt => q.filter(t::updated_at.gt(v)),
                        FilterOp::Gte => q.filter(t::updated_at.ge(v)),
                        FilterOp::Eq | FilterOp::Like => q.filter(t::updated_at.eq(v)),
                    }
                }
                (FilterField::PlatformCreatedAt, FilterValue::Time(v)) => {
                    let v = v.as_micros();
                    match op {
                        FilterOp::Lt => q.filter(t::platform_created_at.lt(v)),
                        FilterOp::Lte => q.filter(t::platform_created_at.le(v)),
                        FilterOp::Gt => q.filter(t::platform_created_at.gt(v)),
                        FilterOp::Gte => q.filter(t::platform_created_at.ge(v)),
                        FilterOp::Eq | FilterOp::Like => q.filter(t::platform_created_at.eq(v)),
                    }
                }
                (text_field, FilterValue::Text(v)) => {
                    let column = match text_field {
                        FilterField::Email => 0,
                        FilterField::FirstName => 1,
                        FilterField::LastName => 2,
                        FilterField::Phone => 3,
                        _ => 4,
                    };
                    let like = *op == FilterOp::Like;
                    let v = if like { v.to_lowercase() } else { v.clone() };
                    match (column, like) {
                        (0, false) => q.filter(t::email.eq(v)),
                        (0, true) => q.filter(lower(t::email).like(v)),
                        (1, false) => q.filter(t::first_name.eq(v)),
                        (1, true) => q.filter(lower(t::first_name).like(v)),
                        (2, false) => q.filter(t::last_name.eq(v)),
                        (2, true) => q.filter(lower(t::last_name).like(v)),
                        (3, false) => q.filter(t::phone.eq(v)),
                        (3, true) => q.filter(lower(t::phone).like(v)),
                        (_, false) => q.filter(t::platform_id.assume_not_null().eq(v)),
                        (_, true) => q.filter(lower(t::platform_id.assume_not_null()).like(v)),
                    }
                }
                // The domain pairs every field with its type of value.
                _ => q,
            };
        }
        q
    }};
}

impl DirectoryRepository for StoreTx<'_> {
    fn list_directory_customers(
        &mut self,
        shop_id: ShopId,
        query: &DirectoryQuery,
    ) -> StoreResult<DirectoryPage> {
        use platform_customers as t;
        let total: i64 = on_backend!(&mut *self.conn, |c| filtered!(shop_id, query)
            .count()
            .get_result(c))
        .map_err(storage_error)?;
        let rows: Vec<CustomerRow> = on_backend!(&mut *self.conn, |c| {
            let q = filtered!(shop_id, query);
            let q = match (query.order_by, query.descending) {
                (OrderBy::Id, false) => q.order(t::id.asc()),
                (OrderBy::Id, true) => q.order(t::id.desc()),
                (OrderBy::CreatedAt, false) => q.order((t::created_at.asc(), t::id.asc())),
                (OrderBy::CreatedAt, true) => q.order((t::created_at.desc(), t::id.desc())),
                (OrderBy::UpdatedAt, false) => q.order((t::updated_at.asc(), t::id.asc())),
                (OrderBy::UpdatedAt, true) => q.order((t::updated_at.desc(), t::id.desc())),
                (OrderBy::Email, false) => q.order((lower(t::email).asc(), t::id.asc())),
                (OrderBy::Email, true) => q.order((lower(t::email).desc(), t::id.desc())),
                (OrderBy::FirstName, false) => q.order((lower(t::first_name).asc(), t::id.asc())),
                (OrderBy::FirstName, true) => q.order((lower(t::first_name).desc(), t::id.desc())),
                (OrderBy::LastName, false) => q.order((lower(t::last_name).asc(), t::id.asc())),
                (OrderBy::LastName, true) => q.order((lower(t::last_name).desc(), t::id.desc())),
            };
            q.limit(query.limit)
                .offset(query.offset())
                .select(CustomerRow::as_select())
                .load(c)
        })
        .map_err(storage_error)?;
        Ok(DirectoryPage {
            customers: rows.into_iter().map(DirectoryCustomer::from).collect(),
            total,
        })
    }

    fn directory_customer(
        &mut self,
        shop_id: ShopId,
        id: CustomerId,
    ) -> StoreResult<Option<DirectoryCustomer>> {
        Ok(platform_customers::table
            .filter(platform_customers::shop_id.eq(shop_id.0))
            .filter(platform_customers::id.eq(id.0))
            .select(CustomerRow::as_select())
            .first(self.conn)
            .optional()
            .map_err(storage_error)?
            .map(DirectoryCustomer::from))
    }

    fn directory_customers_by_ids(
        &mut self,
        shop_id: ShopId,
        ids: &[CustomerId],
    ) -> StoreResult<Vec<DirectoryCustomer>> {
        let ids: Vec<i64> = ids.iter().map(|id| id.0).collect();
        Ok(platform_customers::table
            .filter(platform_customers::shop_id.eq(shop_id.0))
            .filter(platform_customers::id.eq_any(ids))
            .order(platform_customers::id.asc())
            .select(CustomerRow::as_select())
            .load(self.conn)
            .map_err(storage_error)?
            .into_iter()
            .map(DirectoryCustomer::from)
            .collect())
    }

    fn directory_customer_by_platform_id(
        &mut self,
        shop_id: ShopId,
        platform_id: &str,
    ) -> StoreResult<Option<DirectoryCustomer>> {
        Ok(platform_customers::table
            .filter(platform_customers::shop_id.eq(shop_id.0))
            .filter(
                platform_customers::platform_id
                    .assume_not_null()
                    .eq(platform_id),
            )
            .select(CustomerRow::as_select())
            .first(self.conn)
            .optional()
            .map_err(storage_error)?
            .map(DirectoryCustomer::from))
    }

    fn addresses_of_customers(
        &mut self,
        shop_id: ShopId,
        customer_ids: &[CustomerId],
    ) -> StoreResult<Vec<DirectoryAddress>> {
        if customer_ids.is_empty() {
            return Ok(Vec::new());
        }
        let customer_ids: Vec<i64> = customer_ids.iter().map(|id| id.0).collect();
        let rows: Vec<(AddressRow, Option<String>)> = customer_addresses::table
            .inner_join(platform_customers::table)
            .filter(customer_addresses::shop_id.eq(shop_id.0))
            .filter(customer_addresses::customer_id.eq_any(customer_ids))
            .filter(customer_addresses::deleted_at.is_null())
            .order((
                customer_addresses::customer_id.asc(),
                customer_addresses::id.asc(),
            ))
            .select((AddressRow::as_select(), platform_customers::platform_id))
            .load(self.conn)
            .map_err(storage_error)?;
        Ok(rows
            .into_iter()
            .map(|(row, customer)| row.into_address(customer))
            .collect())
    }

    fn labels_of_customers(
        &mut self,
        shop_id: ShopId,
        customer_ids: &[CustomerId],
    ) -> StoreResult<Vec<Label>> {
        if customer_ids.is_empty() {
            return Ok(Vec::new());
        }
        let customer_ids: Vec<i64> = customer_ids.iter().map(|id| id.0).collect();
        Ok(customer_labels::table
            .filter(customer_labels::shop_id.eq(shop_id.0))
            .filter(customer_labels::customer_id.eq_any(customer_ids))
            .filter(customer_labels::deleted_at.is_null())
            .order((
                customer_labels::customer_id.asc(),
                customer_labels::id.asc(),
            ))
            .select(LabelRow::as_select())
            .load(self.conn)
            .map_err(storage_error)?
            .into_iter()
            .map(Label::from)
            .collect())
    }

    fn groups_of_customers(
        &mut self,
        shop_id: ShopId,
        customer_ids: &[CustomerId],
    ) -> StoreResult<Vec<CustomerGroupMembership>> {
        use customer_group_members as m;
        use customer_groups as g;
        if customer_ids.is_empty() {
            return Ok(Vec::new());
        }
        let customer_ids: Vec<i64> = customer_ids.iter().map(|id| id.0).collect();
        type Columns = (i64, i64, String, String, i64, i64);
        let rows: Vec<Columns> = m::table
            .inner_join(g::table)
            .filter(g::shop_id.eq(shop_id.0))
            .filter(m::customer_id.eq_any(customer_ids))
            .order((m::customer_id.asc(), g::id.asc()))
            .select((
                m::customer_id,
                g::id,
                g::platform_id,
                g::name,
                g::created_at,
                g::updated_at,
            ))
            .load(self.conn)
            .map_err(storage_error)?;
        Ok(rows
            .into_iter()
            .map(
                |(customer_id, id, platform_id, name, created_at, updated_at)| {
                    CustomerGroupMembership {
                        customer_id: CustomerId(customer_id),
                        id: CustomerGroupId(id),
                        platform_id,
                        name,
                        created_at: Timestamp::from_micros(created_at),
                        updated_at: Timestamp::from_micros(updated_at),
                    }
                },
            )
            .collect())
    }

    fn insert_label(
        &mut self,
        shop_id: ShopId,
        customer_id: CustomerId,
        name: &str,
        now: Timestamp,
    ) -> StoreResult<Label> {
        let values = (
            customer_labels::shop_id.eq(shop_id.0),
            customer_labels::customer_id.eq(customer_id.0),
            customer_labels::name.eq(name),
            customer_labels::created_at.eq(now.as_micros()),
            customer_labels::updated_at.eq(now.as_micros()),
        );
        let row: LabelRow = on_backend!(&mut *self.conn, |c| {
            diesel::insert_into(customer_labels::table)
                .values(values)
                .returning(LabelRow::as_returning())
                .get_result(c)
        })
        .map_err(storage_error)?;
        Ok(row.into())
    }

    fn delete_label(
        &mut self,
        shop_id: ShopId,
        customer_id: CustomerId,
        label_id: LabelId,
        now: Timestamp,
    ) -> StoreResult<bool> {
        let changed = diesel::update(
            customer_labels::table
                .filter(customer_labels::id.eq(label_id.0))
                .filter(customer_labels::shop_id.eq(shop_id.0))
                .filter(customer_labels::customer_id.eq(customer_id.0))
                .filter(customer_labels::deleted_at.is_null()),
        )
        .set((
            customer_labels::deleted_at.eq(Some(now.as_micros())),
            customer_labels::updated_at.eq(now.as_micros()),
        ))
        .execute(self.conn)
        .map_err(storage_error)?;
        Ok(changed == 1)
    }
}
