//! Customers and addresses as the subscription API writes and reads them: the rows of
//! `platform_customers` and `customer_addresses` that the platform's events write too.

use diesel::dsl::{case_when, count, max, min, sql};
use diesel::prelude::*;
use diesel::sql_types::BigInt;
use mercer_domain::access::credentials::random_hex;
use mercer_domain::kernel::error::StoreResult;
use mercer_domain::kernel::ids::ShopId;
use mercer_domain::kernel::ids::{AddressId, CustomerId};
use mercer_domain::platform::resources::CustomerAddress;
use mercer_domain::subscriptions::repository::{
    CustomerFields, CustomerListQuery, CustomerStatus, IdPage, StoredAddress,
    SubscriptionCustomerRepository, SummaryFigures,
};
use mercer_domain::subscriptions::resources::SubscriptionStatus;
use mercer_domain::{StorageError, Timestamp};

use super::{corrupt, offset, time};
use crate::connection::{DbConnection, on_backend};
use crate::repos::StoreTx;
use crate::repos::directory::{contains_pattern, lower};
use crate::schema::{customer_addresses, platform_customers, subscription_schedule, subscriptions};
use crate::store::storage_error;

/// The key of an address made here, until the connector gives it a platform id (which then
/// becomes its key): apart from the platform's keys (its ids, and `#<position>`).
const SERVICE_KEY_PREFIX: &str = "svc:";

/// A NOT NULL text column's value: empty for none.
fn text(value: &Option<String>) -> &str {
    value.as_deref().unwrap_or_default()
}

/// Which customers a List Customers query keeps: its statuses' union, as one condition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Having {
    /// At least one subscription.
    Any,
    /// At least one subscription that is not `inactive`.
    Live,
    /// Subscriptions, all `inactive`.
    OnlyInactive,
}

fn having(statuses: &[CustomerStatus]) -> Having {
    let active = statuses.contains(&CustomerStatus::Active);
    let inactive = statuses.contains(&CustomerStatus::Inactive);
    if statuses.contains(&CustomerStatus::All) || active == inactive {
        // Both (or, never meant to happen, neither): every customer with a subscription.
        Having::Any
    } else if active {
        Having::Live
    } else {
        Having::OnlyInactive
    }
}

/// The live customers of a List Customers query, as a boxed query (not ordered or paged).
macro_rules! listed_customers {
    ($shop_id:expr, $query:expr) => {{
        use platform_customers as t;
        use subscriptions as s;
        let shop_id: ShopId = $shop_id;
        let query: &CustomerListQuery = $query;
        let with_any = || {
            s::table
                .filter(s::shop_id.eq(shop_id.0))
                .select(s::customer_id)
        };
        let with_live = || {
            s::table
                .filter(s::shop_id.eq(shop_id.0))
                .filter(s::subscription_status.ne(SubscriptionStatus::Inactive.as_str()))
                .select(s::customer_id)
        };
        let q = t::table
            .filter(t::shop_id.eq(shop_id.0))
            .filter(t::deleted_at.is_null())
            .into_boxed();
        let mut q = match having(&query.statuses) {
            Having::Any => q.filter(t::id.eq_any(with_any())),
            Having::Live => q.filter(t::id.eq_any(with_live())),
            Having::OnlyInactive => q
                .filter(t::id.eq_any(with_any()))
                .filter(t::id.ne_all(with_live())),
        };
        if let Some(term) = &query.search {
            let pattern = contains_pattern(term);
            q = q.filter(
                lower(t::first_name)
                    .like(pattern.clone())
                    .escape('\\')
                    .or(lower(t::last_name).like(pattern.clone()).escape('\\'))
                    .or(lower(t::first_name.concat(" ").concat(t::last_name))
                        .like(pattern.clone())
                        .escape('\\'))
                    .or(lower(t::email).like(pattern.clone()).escape('\\'))
                    .or(lower(t::phone).like(pattern).escape('\\')),
            );
        }
        q
    }};
}

/// A customer's figures, in the order `subscription_summaries` selects them.
#[derive(Queryable)]
struct SummaryRow {
    customer_id: i64,
    active: i64,
    inactive: i64,
    next_order: Option<i64>,
    last_order: Option<i64>,
    orders: i64,
}

#[derive(Queryable, Selectable)]
#[diesel(table_name = customer_addresses)]
struct AddressRow {
    id: i64,
    shop_id: i64,
    customer_id: i64,
    platform_id: Option<String>,
    is_default: bool,
    document: String,
    created_at: i64,
    updated_at: i64,
    deleted_at: Option<i64>,
}

impl AddressRow {
    fn into_stored(self, customer_platform_id: Option<String>) -> StoreResult<StoredAddress> {
        let address: CustomerAddress = serde_json::from_str(&self.document)
            .map_err(|error| corrupt("customer address", self.id, error))?;
        Ok(StoredAddress {
            id: AddressId(self.id),
            shop_id: ShopId(self.shop_id),
            customer_id: CustomerId(self.customer_id),
            platform_id: self.platform_id,
            customer_platform_id,
            is_default: self.is_default,
            address,
            created_at: time(self.created_at),
            updated_at: time(self.updated_at),
            deleted_at: self.deleted_at.map(time),
        })
    }
}

fn address_document(address: &CustomerAddress) -> StoreResult<String> {
    serde_json::to_string(address)
        .map_err(|error| StorageError::other(format!("an address as JSON: {error}")))
}

/// Makes the customer's other live addresses not the default.
fn clear_other_defaults(
    conn: &mut DbConnection,
    shop_id: ShopId,
    customer_id: i64,
    address_id: i64,
    now: Timestamp,
) -> StoreResult<()> {
    use customer_addresses as t;
    diesel::update(
        t::table
            .filter(t::customer_id.eq(customer_id))
            .filter(t::shop_id.eq(shop_id.0))
            .filter(t::id.ne(address_id))
            .filter(t::deleted_at.is_null())
            .filter(t::is_default.eq(true)),
    )
    .set((t::is_default.eq(false), t::updated_at.eq(now.as_micros())))
    .execute(conn)
    .map_err(storage_error)?;
    Ok(())
}

impl SubscriptionCustomerRepository for StoreTx<'_> {
    fn customer_id_by_email(
        &mut self,
        shop_id: ShopId,
        email: &str,
    ) -> StoreResult<Option<CustomerId>> {
        use platform_customers as t;
        // No email is stored as empty text: it is no one's email.
        if email.is_empty() {
            return Ok(None);
        }
        t::table
            .filter(t::shop_id.eq(shop_id.0))
            .filter(t::deleted_at.is_null())
            .filter(lower(t::email).eq(lower(email)))
            .order(t::id.asc())
            .select(t::id)
            .first(self.conn)
            .optional()
            .map(|id| id.map(CustomerId))
            .map_err(storage_error)
    }

    fn insert_customer(
        &mut self,
        shop_id: ShopId,
        fields: &CustomerFields,
        now: Timestamp,
    ) -> StoreResult<CustomerId> {
        use platform_customers as t;
        let values = (
            t::shop_id.eq(shop_id.0),
            t::email.eq(text(&fields.email)),
            t::first_name.eq(text(&fields.first_name)),
            t::last_name.eq(text(&fields.last_name)),
            t::phone.eq(text(&fields.phone)),
            t::notes.eq(fields.notes.as_deref()),
            t::created_at.eq(now.as_micros()),
            t::updated_at.eq(now.as_micros()),
        );
        on_backend!(&mut *self.conn, |c| {
            diesel::insert_into(t::table)
                .values(values)
                .returning(t::id)
                .get_result(c)
        })
        .map(CustomerId)
        .map_err(storage_error)
    }

    fn update_customer(
        &mut self,
        shop_id: ShopId,
        customer_id: CustomerId,
        fields: &CustomerFields,
        now: Timestamp,
    ) -> StoreResult<bool> {
        use platform_customers as t;
        let customer_id = customer_id.0;
        let changed = diesel::update(
            t::table
                .filter(t::id.eq(customer_id))
                .filter(t::shop_id.eq(shop_id.0))
                .filter(t::deleted_at.is_null()),
        )
        .set((
            t::email.eq(text(&fields.email)),
            t::first_name.eq(text(&fields.first_name)),
            t::last_name.eq(text(&fields.last_name)),
            t::phone.eq(text(&fields.phone)),
            t::notes.eq(fields.notes.as_deref()),
            t::updated_at.eq(now.as_micros()),
        ))
        .execute(self.conn)
        .map_err(storage_error)?;
        if changed == 1 {
            // The platform's document keeps the same contact fields (CustomerFields::written_into).
            let document: Option<String> = t::table
                .filter(t::id.eq(customer_id))
                .select(t::document)
                .first(self.conn)
                .map_err(storage_error)?;
            if let Some(written) = document.and_then(|json| fields.written_into(&json)) {
                diesel::update(t::table.filter(t::id.eq(customer_id)))
                    .set(t::document.eq(written))
                    .execute(self.conn)
                    .map_err(storage_error)?;
            }
        }
        Ok(changed == 1)
    }

    fn customer_notes(
        &mut self,
        shop_id: ShopId,
        customer_ids: &[CustomerId],
    ) -> StoreResult<Vec<(CustomerId, String)>> {
        use platform_customers as t;
        if customer_ids.is_empty() {
            return Ok(Vec::new());
        }
        let customer_ids: Vec<i64> = customer_ids.iter().map(|id| id.0).collect();
        let notes: Vec<(i64, String)> = t::table
            .filter(t::shop_id.eq(shop_id.0))
            .filter(t::id.eq_any(customer_ids))
            .filter(t::notes.is_not_null())
            .order(t::id.asc())
            .select((t::id, t::notes.assume_not_null()))
            .load(self.conn)
            .map_err(storage_error)?;
        Ok(notes
            .into_iter()
            .map(|(id, notes)| (CustomerId(id), notes))
            .collect())
    }

    fn list_subscription_customers(
        &mut self,
        shop_id: ShopId,
        query: &CustomerListQuery,
    ) -> StoreResult<IdPage> {
        use platform_customers as t;
        let total: i64 = on_backend!(&mut *self.conn, |c| listed_customers!(shop_id, query)
            .count()
            .get_result(c))
        .map_err(storage_error)?;
        let ids: Vec<i64> = on_backend!(&mut *self.conn, |c| {
            listed_customers!(shop_id, query)
                .order(t::id.asc())
                .limit(query.limit)
                .offset(offset(query.limit, query.page))
                .select(t::id)
                .load(c)
        })
        .map_err(storage_error)?;
        Ok(IdPage {
            ids: ids.into_iter().map(CustomerId).collect(),
            total,
        })
    }

    fn subscription_summaries(
        &mut self,
        shop_id: ShopId,
        customer_ids: &[CustomerId],
    ) -> StoreResult<Vec<SummaryFigures>> {
        use subscription_schedule as s;
        if customer_ids.is_empty() {
            return Ok(Vec::new());
        }
        let customer_ids: Vec<i64> = customer_ids.iter().map(|id| id.0).collect();
        let inactive = SubscriptionStatus::Inactive.as_str();
        let rows: Vec<SummaryRow> = s::table
            .filter(s::shop_id.eq(shop_id.0))
            .filter(s::customer_id.eq_any(customer_ids))
            .group_by(s::customer_id)
            .select((
                s::customer_id,
                count(case_when(s::subscription_status.ne(inactive), s::id)),
                count(case_when(s::subscription_status.eq(inactive), s::id)),
                min(case_when(
                    s::subscription_status.ne(inactive),
                    s::next_order_datetime,
                )),
                max(s::last_order_datetime),
                // SUM of integers is NUMERIC on PostgreSQL.
                sql::<BigInt>("CAST(COALESCE(SUM(orders_processed), 0) AS BIGINT)"),
            ))
            .order(s::customer_id.asc())
            .load(self.conn)
            .map_err(storage_error)?;
        Ok(rows
            .into_iter()
            .map(|row| SummaryFigures {
                customer_id: CustomerId(row.customer_id),
                active_subscription_count: row.active,
                inactive_subscription_count: row.inactive,
                next_order_date: row.next_order.map(time),
                last_order_date: row.last_order.map(time),
                subscription_order_count: row.orders,
            })
            .collect())
    }

    fn addresses_by_ids(
        &mut self,
        shop_id: ShopId,
        ids: &[AddressId],
    ) -> StoreResult<Vec<StoredAddress>> {
        use customer_addresses as t;
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let ids: Vec<i64> = ids.iter().map(|id| id.0).collect();
        let query = t::table
            .inner_join(platform_customers::table)
            .filter(t::shop_id.eq(shop_id.0))
            .into_boxed();
        // One id as `id = $1`: PostgreSQL plans `id = ANY($1)` anew at every call (its generic
        // plan guesses a longer array), which costs more than the read.
        let query = match ids.as_slice() {
            [one] => query.filter(t::id.eq(*one)),
            _ => query.filter(t::id.eq_any(ids)),
        };
        let rows: Vec<(AddressRow, Option<String>)> = query
            .order(t::id.asc())
            .select((AddressRow::as_select(), platform_customers::platform_id))
            .load(self.conn)
            .map_err(storage_error)?;
        rows.into_iter()
            .map(|(row, customer_platform_id)| row.into_stored(customer_platform_id))
            .collect()
    }

    fn insert_address(
        &mut self,
        shop_id: ShopId,
        customer_id: CustomerId,
        address: &CustomerAddress,
        is_default: bool,
        now: Timestamp,
    ) -> StoreResult<AddressId> {
        use customer_addresses as t;
        let customer_id = customer_id.0;
        let values = (
            t::shop_id.eq(shop_id.0),
            t::customer_id.eq(customer_id),
            t::address_key.eq(format!("{SERVICE_KEY_PREFIX}{}", random_hex(16))),
            t::platform_id.eq(None::<String>),
            t::is_default.eq(is_default),
            t::document.eq(address_document(address)?),
            t::created_at.eq(now.as_micros()),
            t::updated_at.eq(now.as_micros()),
        );
        let id: i64 = on_backend!(&mut *self.conn, |c| {
            diesel::insert_into(t::table)
                .values(values)
                .returning(t::id)
                .get_result(c)
        })
        .map_err(storage_error)?;
        if is_default {
            clear_other_defaults(self.conn, shop_id, customer_id, id, now)?;
        }
        Ok(AddressId(id))
    }

    fn update_address(
        &mut self,
        shop_id: ShopId,
        customer_id: CustomerId,
        address_id: AddressId,
        address: &CustomerAddress,
        is_default: bool,
        now: Timestamp,
    ) -> StoreResult<bool> {
        use customer_addresses as t;
        let (customer_id, address_id) = (customer_id.0, address_id.0);
        let changed = diesel::update(
            t::table
                .filter(t::id.eq(address_id))
                .filter(t::shop_id.eq(shop_id.0))
                .filter(t::customer_id.eq(customer_id))
                .filter(t::deleted_at.is_null()),
        )
        .set((
            t::is_default.eq(is_default),
            t::document.eq(address_document(address)?),
            t::updated_at.eq(now.as_micros()),
        ))
        .execute(self.conn)
        .map_err(storage_error)?;
        if changed != 1 {
            return Ok(false);
        }
        if is_default {
            clear_other_defaults(self.conn, shop_id, customer_id, address_id, now)?;
        }
        Ok(true)
    }

    fn delete_address(
        &mut self,
        shop_id: ShopId,
        customer_id: CustomerId,
        address_id: AddressId,
        now: Timestamp,
    ) -> StoreResult<bool> {
        use customer_addresses as t;
        let (customer_id, address_id) = (customer_id.0, address_id.0);
        let changed = diesel::update(
            t::table
                .filter(t::id.eq(address_id))
                .filter(t::shop_id.eq(shop_id.0))
                .filter(t::customer_id.eq(customer_id))
                .filter(t::deleted_at.is_null()),
        )
        .set((
            t::deleted_at.eq(Some(now.as_micros())),
            t::updated_at.eq(now.as_micros()),
        ))
        .execute(self.conn)
        .map_err(storage_error)?;
        Ok(changed == 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_make_one_condition() {
        use CustomerStatus::{Active, All, Inactive};
        assert_eq!(having(&[All]), Having::Any);
        assert_eq!(having(&[Active]), Having::Live);
        assert_eq!(having(&[Inactive]), Having::OnlyInactive);
        assert_eq!(having(&[Active, Inactive]), Having::Any);
        assert_eq!(having(&[Inactive, All]), Having::Any);
        assert_eq!(having(&[]), Having::Any);
    }
}
