//! A customer or address row the platform's event made merged into the one Mercer made: when a
//! platform pushes its Saved event of a customer the connector just created before Mercer
//! records the platform id answered (the domain's `record_customer_platform_id` and
//! `record_address_platform_id` decide when; this only carries the merge out, in the caller's
//! transaction).

use diesel::prelude::*;
use mercer_domain::kernel::ids::{AddressId, CustomerId, ShopId};
use mercer_domain::platform::addresses::AddressKey;

use crate::connection::DbConnection;
use crate::schema::{
    customer_addresses, customer_group_members, customer_labels, platform_customers, subscriptions,
};

/// Another row of the customer of address `address_id` (of the shop) with this key.
pub(super) fn sibling_address_by_key(
    conn: &mut DbConnection,
    shop_id: ShopId,
    address_id: AddressId,
    key: &str,
) -> QueryResult<Option<AddressId>> {
    use customer_addresses as t;
    let customer_id: Option<i64> = t::table
        .filter(t::id.eq(address_id.0))
        .filter(t::shop_id.eq(shop_id.0))
        .select(t::customer_id)
        .first(conn)
        .optional()?;
    let Some(customer_id) = customer_id else {
        return Ok(None);
    };
    let sibling: Option<i64> = t::table
        .filter(t::customer_id.eq(customer_id))
        .filter(t::address_key.eq(key))
        .filter(t::id.ne(address_id.0))
        .select(t::id)
        .first(conn)
        .optional()?;
    Ok(sibling.map(AddressId))
}

/// An address row's columns that the platform's events write: key, platform id, default,
/// document, deletion.
type AddressState = (String, Option<String>, bool, String, Option<i64>);

/// See `PlatformRepository::merge_address_rows`.
pub(super) fn merge_address_rows(
    conn: &mut DbConnection,
    shop_id: ShopId,
    kept: AddressId,
    duplicate: AddressId,
    now: i64,
) -> QueryResult<bool> {
    use customer_addresses as t;
    let customer_id: Option<i64> = t::table
        .filter(t::id.eq(kept.0))
        .filter(t::shop_id.eq(shop_id.0))
        .filter(t::platform_id.is_null())
        .select(t::customer_id)
        .first(conn)
        .optional()?;
    let Some(customer_id) = customer_id else {
        return Ok(false);
    };
    let taken: Option<AddressState> = t::table
        .filter(t::id.eq(duplicate.0))
        .filter(t::id.ne(kept.0))
        .filter(t::customer_id.eq(customer_id))
        .select((
            t::address_key,
            t::platform_id,
            t::is_default,
            t::document,
            t::deleted_at,
        ))
        .first(conn)
        .optional()?;
    let Some((key, platform_id, is_default, document, deleted_at)) = taken else {
        return Ok(false);
    };
    // The duplicate gives its key up first: a key is unique among the customer's rows.
    diesel::update(t::table.filter(t::id.eq(duplicate.0)))
        .set((
            t::address_key.eq(AddressKey::merged(duplicate.0).into_string()),
            t::platform_id.eq(None::<String>),
            t::deleted_at.eq(Some(deleted_at.unwrap_or(now))),
            t::updated_at.eq(now),
        ))
        .execute(conn)?;
    diesel::update(t::table.filter(t::id.eq(kept.0)))
        .set((
            t::address_key.eq(key),
            t::platform_id.eq(platform_id),
            t::is_default.eq(is_default),
            t::document.eq(document),
            t::deleted_at.eq(deleted_at),
            t::updated_at.eq(now),
        ))
        .execute(conn)?;
    {
        use subscriptions as s;
        diesel::update(
            s::table
                .filter(s::shop_id.eq(shop_id.0))
                .filter(s::billing_address_id.eq(duplicate.0)),
        )
        .set(s::billing_address_id.eq(kept.0))
        .execute(conn)?;
        diesel::update(
            s::table
                .filter(s::shop_id.eq(shop_id.0))
                .filter(s::shipping_address_id.eq(duplicate.0)),
        )
        .set(s::shipping_address_id.eq(kept.0))
        .execute(conn)?;
    }
    Ok(true)
}

/// A customer row's columns that the platform's events write: platform id, email, first and
/// last name, phone, platform times, document, deletion.
type CustomerState = (
    Option<String>,
    String,
    String,
    String,
    String,
    Option<i64>,
    Option<i64>,
    Option<i64>,
    Option<String>,
    Option<i64>,
);

/// See `PlatformRepository::merge_customer_rows`.
pub(super) fn merge_customer_rows(
    conn: &mut DbConnection,
    shop_id: ShopId,
    kept: CustomerId,
    duplicate: CustomerId,
    now: i64,
) -> QueryResult<bool> {
    use platform_customers as t;
    if kept == duplicate {
        return Ok(false);
    }
    let made_here: Option<i64> = t::table
        .filter(t::id.eq(kept.0))
        .filter(t::shop_id.eq(shop_id.0))
        .filter(t::platform_id.is_null())
        .select(t::id)
        .first(conn)
        .optional()?;
    if made_here.is_none() {
        return Ok(false);
    }
    let taken: Option<CustomerState> = t::table
        .filter(t::id.eq(duplicate.0))
        .filter(t::shop_id.eq(shop_id.0))
        .select((
            t::platform_id,
            t::email,
            t::first_name,
            t::last_name,
            t::phone,
            t::platform_created_at,
            t::platform_updated_at,
            t::platform_deleted_at,
            t::document,
            t::deleted_at,
        ))
        .first(conn)
        .optional()?;
    let Some((
        platform_id,
        email,
        first_name,
        last_name,
        phone,
        platform_created_at,
        platform_updated_at,
        platform_deleted_at,
        document,
        deleted_at,
    )) = taken
    else {
        return Ok(false);
    };
    // The duplicate gives its platform id up first: it is unique in the shop.
    diesel::update(t::table.filter(t::id.eq(duplicate.0)))
        .set((
            t::platform_id.eq(None::<String>),
            t::deleted_at.eq(Some(deleted_at.unwrap_or(now))),
            t::updated_at.eq(now),
        ))
        .execute(conn)?;
    diesel::update(t::table.filter(t::id.eq(kept.0)))
        .set((
            t::platform_id.eq(platform_id),
            t::email.eq(email),
            t::first_name.eq(first_name),
            t::last_name.eq(last_name),
            t::phone.eq(phone),
            t::platform_created_at.eq(platform_created_at),
            t::platform_updated_at.eq(platform_updated_at),
            t::platform_deleted_at.eq(platform_deleted_at),
            t::document.eq(document),
            t::deleted_at.eq(deleted_at),
            t::updated_at.eq(now),
        ))
        .execute(conn)?;
    diesel::update(
        customer_addresses::table.filter(customer_addresses::customer_id.eq(duplicate.0)),
    )
    .set(customer_addresses::customer_id.eq(kept.0))
    .execute(conn)?;
    move_labels(conn, kept, duplicate)?;
    move_groups(conn, kept, duplicate)?;
    diesel::update(
        subscriptions::table
            .filter(subscriptions::shop_id.eq(shop_id.0))
            .filter(subscriptions::customer_id.eq(duplicate.0)),
    )
    .set(subscriptions::customer_id.eq(kept.0))
    .execute(conn)?;
    Ok(true)
}

/// The duplicate's labels become kept's, but for those of a name kept has a live label of (a
/// customer's live labels have distinct names): they stay with the deleted duplicate.
fn move_labels(
    conn: &mut DbConnection,
    kept: CustomerId,
    duplicate: CustomerId,
) -> QueryResult<()> {
    use customer_labels as l;
    let names: Vec<String> = l::table
        .filter(l::customer_id.eq(kept.0))
        .filter(l::deleted_at.is_null())
        .select(l::name)
        .load(conn)?;
    diesel::update(
        l::table
            .filter(l::customer_id.eq(duplicate.0))
            .filter(l::name.ne_all(names)),
    )
    .set(l::customer_id.eq(kept.0))
    .execute(conn)?;
    Ok(())
}

/// The duplicate's customer groups become kept's too.
fn move_groups(
    conn: &mut DbConnection,
    kept: CustomerId,
    duplicate: CustomerId,
) -> QueryResult<()> {
    use customer_group_members as m;
    let theirs: Vec<i64> = m::table
        .filter(m::customer_id.eq(duplicate.0))
        .select(m::group_id)
        .load(conn)?;
    if theirs.is_empty() {
        return Ok(());
    }
    let ours: Vec<i64> = m::table
        .filter(m::customer_id.eq(kept.0))
        .select(m::group_id)
        .load(conn)?;
    for group in theirs.iter().filter(|group| !ours.contains(group)) {
        diesel::insert_into(m::table)
            .values((m::customer_id.eq(kept.0), m::group_id.eq(group)))
            .execute(conn)?;
    }
    diesel::delete(m::table.filter(m::customer_id.eq(duplicate.0))).execute(conn)?;
    Ok(())
}
