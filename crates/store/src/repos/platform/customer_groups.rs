//! Customer groups and who belongs to them, as the applier stores them once a batch's customers
//! are written (the decisions are the domain's `platform::customer_groups`). Lookups and writes
//! go in chunks of ids, one statement each, so a batch costs a few statements a shop whatever
//! its customers.

use std::collections::{HashMap, HashSet};

use diesel::prelude::*;
use mercer_domain::kernel::ids::{CustomerGroupId, CustomerId, ShopId};
use mercer_domain::platform::customer_groups::NewCustomerGroup;

use crate::connection::{DbConnection, on_backend, planned_each_time};
use crate::repos::ROWS_PER_STATEMENT;
use crate::schema::{customer_group_members, customer_groups, platform_customers};

/// The ids of the shop's customers of these platform ids, deleted or not.
pub(super) fn customer_ids(
    conn: &mut DbConnection,
    shop_id: ShopId,
    platform_ids: &[&str],
) -> QueryResult<Vec<(String, CustomerId)>> {
    use platform_customers as t;
    let mut found = Vec::with_capacity(platform_ids.len());
    for chunk in platform_ids.chunks(ROWS_PER_STATEMENT) {
        let rows: Vec<(String, i64)> = planned_each_time(conn, |c| {
            t::table
                .filter(t::shop_id.eq(shop_id.0))
                .filter(t::platform_id.assume_not_null().eq_any(chunk))
                .select((t::platform_id.assume_not_null(), t::id))
                .load(c)
        })?;
        found.extend(rows.into_iter().map(|(id, row)| (id, CustomerId(row))));
    }
    Ok(found)
}

/// The shop's groups of these platform ids: (platform id, id, name).
fn stored_groups(
    conn: &mut DbConnection,
    shop_id: ShopId,
    platform_ids: &[&str],
) -> QueryResult<Vec<(String, i64, String)>> {
    use customer_groups as t;
    let mut found = Vec::with_capacity(platform_ids.len());
    for chunk in platform_ids.chunks(ROWS_PER_STATEMENT) {
        found.extend(
            t::table
                .filter(t::shop_id.eq(shop_id.0))
                .filter(t::platform_id.eq_any(chunk))
                .select((t::platform_id, t::id, t::name))
                .load::<(String, i64, String)>(conn)?,
        );
    }
    Ok(found)
}

#[derive(Insertable)]
#[diesel(table_name = customer_groups)]
struct GroupRow<'a> {
    shop_id: i64,
    platform_id: &'a str,
    name: &'a str,
    created_at: i64,
    updated_at: i64,
}

/// Adds the shop's unknown groups, renames the known ones given another name, and answers
/// every group's id. A group another transaction adds meanwhile is taken as it is stored.
pub(super) fn put_customer_groups(
    conn: &mut DbConnection,
    shop_id: ShopId,
    groups: &[NewCustomerGroup],
    now: i64,
) -> QueryResult<Vec<(String, CustomerGroupId)>> {
    use customer_groups as t;
    if groups.is_empty() {
        return Ok(Vec::new());
    }
    let platform_ids: Vec<&str> = groups.iter().map(|g| g.platform_id.as_str()).collect();
    let stored: HashMap<String, (i64, String)> = stored_groups(conn, shop_id, &platform_ids)?
        .into_iter()
        .map(|(platform_id, id, name)| (platform_id, (id, name)))
        .collect();
    let mut ids: Vec<(String, CustomerGroupId)> = Vec::with_capacity(groups.len());
    let mut new_rows = Vec::new();
    for group in groups {
        match stored.get(&group.platform_id) {
            Some((id, name)) => {
                if let Some(given) = group.name.as_deref().filter(|given| given != name) {
                    diesel::update(t::table.filter(t::id.eq(id)))
                        .set((t::name.eq(given), t::updated_at.eq(now)))
                        .execute(conn)?;
                }
                ids.push((group.platform_id.clone(), CustomerGroupId(*id)));
            }
            None => new_rows.push(GroupRow {
                shop_id: shop_id.0,
                platform_id: &group.platform_id,
                name: group.name.as_deref().unwrap_or_default(),
                created_at: now,
                updated_at: now,
            }),
        }
    }
    let mut added: HashSet<String> = HashSet::with_capacity(new_rows.len());
    for chunk in new_rows.chunks(ROWS_PER_STATEMENT) {
        let rows: Vec<(String, i64)> = on_backend!(&mut *conn, |c| {
            diesel::insert_into(t::table)
                .values(chunk)
                .on_conflict((t::shop_id, t::platform_id))
                .do_nothing()
                .returning((t::platform_id, t::id))
                .get_results(c)
        })?;
        for (platform_id, id) in rows {
            added.insert(platform_id.clone());
            ids.push((platform_id, CustomerGroupId(id)));
        }
    }
    // Added by another transaction since the lookup: its row as it stands.
    let raced: Vec<&str> = new_rows
        .iter()
        .map(|row| row.platform_id)
        .filter(|id| !added.contains(*id))
        .collect();
    if !raced.is_empty() {
        ids.extend(
            stored_groups(conn, shop_id, &raced)?
                .into_iter()
                .map(|(platform_id, id, _)| (platform_id, CustomerGroupId(id))),
        );
    }
    Ok(ids)
}

/// Makes each customer's memberships (among the shop's groups) those listed: reads what they
/// are, then deletes and inserts only the difference.
pub(super) fn set_customer_groups(
    conn: &mut DbConnection,
    shop_id: ShopId,
    memberships: &[(CustomerId, Vec<CustomerGroupId>)],
) -> QueryResult<()> {
    use customer_group_members as m;
    use customer_groups as g;
    if memberships.is_empty() {
        return Ok(());
    }
    let customers: Vec<i64> = memberships.iter().map(|(id, _)| id.0).collect();
    let mut stored: HashSet<(i64, i64)> = HashSet::new();
    for chunk in customers.chunks(ROWS_PER_STATEMENT) {
        stored.extend(
            m::table
                .inner_join(g::table)
                .filter(g::shop_id.eq(shop_id.0))
                .filter(m::customer_id.eq_any(chunk))
                .select((m::customer_id, m::group_id))
                .load::<(i64, i64)>(conn)?,
        );
    }
    let mut wanted: HashSet<(i64, i64)> = HashSet::new();
    let mut added: Vec<(i64, i64)> = Vec::new();
    for (customer, groups) in memberships {
        for group in groups {
            let pair = (customer.0, group.0);
            if wanted.insert(pair) && !stored.contains(&pair) {
                added.push(pair);
            }
        }
    }
    // The memberships to remove, by customer: one statement each customer that loses any.
    let mut removed: HashMap<i64, Vec<i64>> = HashMap::new();
    for pair in stored.iter().filter(|pair| !wanted.contains(pair)) {
        removed.entry(pair.0).or_default().push(pair.1);
    }
    for (customer, groups) in removed {
        diesel::delete(
            m::table
                .filter(m::customer_id.eq(customer))
                .filter(m::group_id.eq_any(groups)),
        )
        .execute(conn)?;
    }
    for chunk in added.chunks(ROWS_PER_STATEMENT) {
        let rows: Vec<_> = chunk
            .iter()
            .map(|(customer, group)| (m::customer_id.eq(customer), m::group_id.eq(group)))
            .collect();
        on_backend!(&mut *conn, |c| {
            diesel::insert_into(m::table)
                .values(&rows)
                .on_conflict_do_nothing()
                .execute(c)
        })?;
    }
    Ok(())
}
