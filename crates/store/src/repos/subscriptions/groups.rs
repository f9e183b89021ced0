//! Subscription groups (migration 14): a row each, its products as JSON, its billing rules as
//! rows in their order, and the line items that name them found by their columns.

use diesel::dsl::count_star;
use diesel::prelude::*;
use mercer_domain::kernel::error::StoreResult;
use mercer_domain::kernel::ids::ShopId;
use mercer_domain::kernel::ids::{BillingRuleId, GroupId};
use mercer_domain::subscriptions::groups::{BillingRule, GroupProduct, IntervalType, StoredGroup};
use mercer_domain::subscriptions::repository::SubscriptionGroupRepository;
use mercer_domain::subscriptions::resources::SubscriptionStatus;

use super::{corrupt, offset, time};
use crate::connection::{DbConnection, on_backend};
use crate::repos::StoreTx;
use crate::schema::{
    boxes, subscription_group_billing_rules, subscription_groups, subscription_line_items,
    subscriptions,
};
use crate::store::storage_error;

#[derive(Queryable, Selectable)]
#[diesel(table_name = subscription_groups)]
struct GroupRow {
    id: i64,
    name: String,
    percent_discount: f64,
    products: String,
    created_at: i64,
    updated_at: i64,
}

#[derive(Queryable, Selectable)]
#[diesel(table_name = subscription_group_billing_rules)]
struct RuleRow {
    id: i64,
    subscription_group_id: i64,
    interval_number: i32,
    interval_type: String,
    interval_name: String,
    billing_rule: String,
}

/// `{platform_product_id, platform_variant_id}` as stored in `products`.
#[derive(serde::Serialize, serde::Deserialize)]
struct ProductJson {
    platform_product_id: String,
    platform_variant_id: Option<String>,
}

impl RuleRow {
    fn into_rule(self) -> StoreResult<BillingRule> {
        Ok(BillingRule {
            id: BillingRuleId(self.id),
            subscription_group_id: GroupId(self.subscription_group_id),
            interval_number: i64::from(self.interval_number),
            interval_type: IntervalType::parse(&self.interval_type)
                .ok_or_else(|| corrupt("billing rule", self.id, "interval_type"))?,
            interval_name: self.interval_name,
            billing_rule: self.billing_rule,
        })
    }
}

fn products_json(products: &[GroupProduct]) -> StoreResult<String> {
    let rows: Vec<ProductJson> = products
        .iter()
        .map(|product| ProductJson {
            platform_product_id: product.platform_product_id.clone(),
            platform_variant_id: product.platform_variant_id.clone(),
        })
        .collect();
    serde_json::to_string(&rows).map_err(|error| corrupt("subscription group", 0, error))
}

/// The query of [`StoreTx::live_line_items`].
type LiveLineItems = diesel::dsl::Filter<
    diesel::dsl::Filter<
        diesel::dsl::InnerJoin<subscription_line_items::table, subscriptions::table>,
        diesel::dsl::Eq<subscription_line_items::shop_id, i64>,
    >,
    diesel::dsl::NotEq<subscriptions::subscription_status, &'static str>,
>;

impl StoreTx<'_> {
    /// The groups of these rows, with their billing rules.
    fn whole_groups(&mut self, rows: Vec<GroupRow>) -> StoreResult<Vec<StoredGroup>> {
        let ids: Vec<i64> = rows.iter().map(|row| row.id).collect();
        let mut rules: Vec<RuleRow> = subscription_group_billing_rules::table
            .filter(subscription_group_billing_rules::subscription_group_id.eq_any(&ids))
            .order((
                subscription_group_billing_rules::subscription_group_id,
                subscription_group_billing_rules::position,
            ))
            .select(RuleRow::as_select())
            .load(self.conn)
            .map_err(storage_error)?;
        rows.into_iter()
            .map(|row| {
                let products: Vec<ProductJson> = serde_json::from_str(&row.products)
                    .map_err(|error| corrupt("subscription group", row.id, error))?;
                let (own, rest): (Vec<RuleRow>, Vec<RuleRow>) = std::mem::take(&mut rules)
                    .into_iter()
                    .partition(|rule| rule.subscription_group_id == row.id);
                rules = rest;
                Ok(StoredGroup {
                    id: GroupId(row.id),
                    name: row.name,
                    percent_discount: row.percent_discount,
                    products: products
                        .into_iter()
                        .map(|product| GroupProduct {
                            platform_product_id: product.platform_product_id,
                            platform_variant_id: product.platform_variant_id,
                        })
                        .collect(),
                    billing_rules: own
                        .into_iter()
                        .map(RuleRow::into_rule)
                        .collect::<StoreResult<_>>()?,
                    created_at: time(row.created_at),
                    updated_at: time(row.updated_at),
                })
            })
            .collect()
    }

    /// Inserts the group's row, or updates it; its id.
    fn write_group_row(&mut self, shop_id: ShopId, group: &StoredGroup) -> StoreResult<i64> {
        use subscription_groups as t;
        let products = products_json(&group.products)?;
        if group.id != GroupId(0) {
            diesel::update(
                t::table
                    .filter(t::id.eq(group.id.0))
                    .filter(t::shop_id.eq(shop_id.0)),
            )
            .set((
                t::name.eq(&group.name),
                t::percent_discount.eq(group.percent_discount),
                t::products.eq(&products),
                t::updated_at.eq(group.updated_at.as_micros()),
            ))
            .execute(self.conn)
            .map_err(storage_error)?;
            return Ok(group.id.0);
        }
        let values = (
            t::shop_id.eq(shop_id.0),
            t::name.eq(&group.name),
            t::percent_discount.eq(group.percent_discount),
            t::products.eq(&products),
            t::created_at.eq(group.created_at.as_micros()),
            t::updated_at.eq(group.updated_at.as_micros()),
        );
        on_backend!(&mut *self.conn, |c| {
            diesel::insert_into(t::table)
                .values(values)
                .returning(t::id)
                .get_result::<i64>(c)
        })
        .map_err(storage_error)
    }

    /// Writes the group's rules in their order: new ones inserted, the others updated, and the
    /// group's rules not among them deleted.
    fn write_group_rules(
        &mut self,
        shop_id: ShopId,
        group_id: i64,
        group: &StoredGroup,
    ) -> StoreResult<()> {
        use subscription_group_billing_rules as t;
        let kept: Vec<i64> = group
            .billing_rules
            .iter()
            .map(|rule| rule.id.0)
            .filter(|id| *id != 0)
            .collect();
        diesel::delete(
            t::table
                .filter(t::subscription_group_id.eq(group_id))
                .filter(t::id.ne_all(&kept)),
        )
        .execute(self.conn)
        .map_err(storage_error)?;
        let now = group.updated_at.as_micros();
        for (position, rule) in group.billing_rules.iter().enumerate() {
            let position = i32::try_from(position).unwrap_or(i32::MAX);
            let number = i32::try_from(rule.interval_number).unwrap_or(i32::MAX);
            if rule.id != BillingRuleId(0) {
                diesel::update(
                    t::table
                        .filter(t::id.eq(rule.id.0))
                        .filter(t::subscription_group_id.eq(group_id)),
                )
                .set((
                    t::position.eq(position),
                    t::interval_number.eq(number),
                    t::interval_type.eq(rule.interval_type.as_str()),
                    t::interval_name.eq(&rule.interval_name),
                    t::billing_rule.eq(&rule.billing_rule),
                    t::updated_at.eq(now),
                ))
                .execute(self.conn)
                .map_err(storage_error)?;
                continue;
            }
            diesel::insert_into(t::table)
                .values((
                    t::shop_id.eq(shop_id.0),
                    t::subscription_group_id.eq(group_id),
                    t::position.eq(position),
                    t::interval_number.eq(number),
                    t::interval_type.eq(rule.interval_type.as_str()),
                    t::interval_name.eq(&rule.interval_name),
                    t::billing_rule.eq(&rule.billing_rule),
                    t::created_at.eq(now),
                    t::updated_at.eq(now),
                ))
                .execute(self.conn)
                .map_err(storage_error)?;
        }
        Ok(())
    }

    /// The line items of the shop's subscriptions that are not `inactive`.
    fn live_line_items(shop_id: ShopId) -> LiveLineItems {
        subscription_line_items::table
            .inner_join(subscriptions::table)
            .filter(subscription_line_items::shop_id.eq(shop_id.0))
            .filter(subscriptions::subscription_status.ne(SubscriptionStatus::Inactive.as_str()))
    }
}

impl SubscriptionGroupRepository for StoreTx<'_> {
    fn subscription_groups(
        &mut self,
        shop_id: ShopId,
        limit: i64,
        page: i64,
    ) -> StoreResult<(Vec<StoredGroup>, i64)> {
        use subscription_groups as t;
        let total: i64 = t::table
            .filter(t::shop_id.eq(shop_id.0))
            .select(count_star())
            .first(self.conn)
            .map_err(storage_error)?;
        let rows: Vec<GroupRow> = t::table
            .filter(t::shop_id.eq(shop_id.0))
            .order(t::id.asc())
            .limit(limit)
            .offset(offset(limit, page))
            .select(GroupRow::as_select())
            .load(self.conn)
            .map_err(storage_error)?;
        Ok((self.whole_groups(rows)?, total))
    }

    fn subscription_group(
        &mut self,
        shop_id: ShopId,
        id: GroupId,
    ) -> StoreResult<Option<StoredGroup>> {
        use subscription_groups as t;
        let id = id.0;
        let rows: Vec<GroupRow> = t::table
            .filter(t::shop_id.eq(shop_id.0))
            .filter(t::id.eq(id))
            .select(GroupRow::as_select())
            .load(self.conn)
            .map_err(storage_error)?;
        Ok(self.whole_groups(rows)?.pop())
    }

    fn save_subscription_group(
        &mut self,
        shop_id: ShopId,
        group: &StoredGroup,
    ) -> StoreResult<StoredGroup> {
        let id = self.write_group_row(shop_id, group)?;
        self.write_group_rules(shop_id, id, group)?;
        self.subscription_group(shop_id, GroupId(id))?
            .ok_or_else(|| corrupt("subscription group", id, "it was not stored"))
    }

    fn delete_subscription_group(&mut self, shop_id: ShopId, id: GroupId) -> StoreResult<bool> {
        let id = id.0;
        diesel::delete(
            subscription_group_billing_rules::table
                .filter(subscription_group_billing_rules::subscription_group_id.eq(id))
                .filter(subscription_group_billing_rules::shop_id.eq(shop_id.0)),
        )
        .execute(self.conn)
        .map_err(storage_error)?;
        let deleted = diesel::delete(
            subscription_groups::table
                .filter(subscription_groups::id.eq(id))
                .filter(subscription_groups::shop_id.eq(shop_id.0)),
        )
        .execute(self.conn)
        .map_err(storage_error)?;
        Ok(deleted == 1)
    }

    fn lock_subscription_group(&mut self, shop_id: ShopId, id: GroupId) -> StoreResult<()> {
        let id = id.0;
        match &mut *self.conn {
            // SQLite's write transactions (BEGIN IMMEDIATE) run one at a time already.
            DbConnection::Sqlite(_) => Ok(()),
            DbConnection::Pg(c) => subscription_groups::table
                .filter(subscription_groups::id.eq(id))
                .filter(subscription_groups::shop_id.eq(shop_id.0))
                .select(subscription_groups::id)
                .for_update()
                .load::<i64>(c)
                .map(drop)
                .map_err(storage_error),
        }
    }

    fn live_subscriptions_of_group(
        &mut self,
        shop_id: ShopId,
        group_id: GroupId,
    ) -> StoreResult<i64> {
        let subscriptions: Vec<i64> = Self::live_line_items(shop_id)
            .filter(subscription_line_items::subscription_group_id.eq(group_id.0))
            .select(subscription_line_items::subscription_id)
            .distinct()
            .load(self.conn)
            .map_err(storage_error)?;
        Ok(i64::try_from(subscriptions.len()).unwrap_or(i64::MAX))
    }

    fn boxes_of_group(&mut self, shop_id: ShopId, group_id: GroupId) -> StoreResult<i64> {
        boxes::table
            .filter(boxes::shop_id.eq(shop_id.0))
            .filter(boxes::subscription_group_id.eq(group_id.0))
            .select(count_star())
            .first(self.conn)
            .map_err(storage_error)
    }

    fn billing_rules_in_use(
        &mut self,
        shop_id: ShopId,
        rule_ids: &[BillingRuleId],
    ) -> StoreResult<Vec<BillingRuleId>> {
        if rule_ids.is_empty() {
            return Ok(Vec::new());
        }
        let rule_ids: Vec<i64> = rule_ids.iter().map(|id| id.0).collect();
        let mut used: Vec<i64> = Self::live_line_items(shop_id)
            .filter(subscription_line_items::subscription_group_billing_rules_id.eq_any(rule_ids))
            .select(subscription_line_items::subscription_group_billing_rules_id.assume_not_null())
            .distinct()
            .load(self.conn)
            .map_err(storage_error)?;
        used.sort_unstable();
        Ok(used.into_iter().map(BillingRuleId).collect())
    }
}
