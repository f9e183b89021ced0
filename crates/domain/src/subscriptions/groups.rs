//! Subscription groups (docs/subscriptions.md "Subscription groups"): what
//! subscriptions and boxes are sold under. A group has a name, a discount its subscriptions
//! take, the products it offers, and the billing rules a subscription of it may follow; a
//! line item of Create Subscription (or a checkout's plan) names a group, and may name one of
//! its billing rules as its `interval_id`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use crate::access::shop::Shop;
use crate::kernel::body::{
    BodyObject, Check, Field, RawText, TextId, Wrapped, path, read_resource,
};
use crate::kernel::error::{DomainError, FieldError};
use crate::kernel::ids::{BillingRuleId, GroupId};
use crate::kernel::time::Timestamp;
use crate::subscriptions::customers::PagePagination;

use crate::subscriptions::recurrence::{OrderSchedule, ShopZone};
use crate::subscriptions::repository::SubscriptionRepositories;

/// The unit of a billing rule's interval.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema, strum::IntoStaticStr)]
#[strum(serialize_all = "snake_case")]
#[serde(rename_all = "lowercase")]
pub enum IntervalType {
    /// Days (RRULE `FREQ=DAILY`).
    Day,
    /// Weeks (RRULE `FREQ=WEEKLY`).
    Week,
    /// Months (RRULE `FREQ=MONTHLY`).
    Month,
    /// Years (RRULE `FREQ=YEARLY`).
    Year,
}

impl IntervalType {
    /// Every unit, shortest first.
    pub const ALL: [IntervalType; 4] = [
        IntervalType::Day,
        IntervalType::Week,
        IntervalType::Month,
        IntervalType::Year,
    ];

    /// The unit's name as the resource writes it (`day`, `week`, `month`, `year`).
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    /// `day`, `week`… in any case, or the plural.
    pub fn parse(text: &str) -> Option<IntervalType> {
        let text = text.trim().to_ascii_lowercase();
        let text = text.strip_suffix('s').unwrap_or(&text);
        IntervalType::ALL
            .into_iter()
            .find(|interval| interval.as_str() == text)
    }

    /// The RRULE `FREQ` of the unit.
    fn frequency(self) -> &'static str {
        match self {
            IntervalType::Day => "DAILY",
            IntervalType::Week => "WEEKLY",
            IntervalType::Month => "MONTHLY",
            IntervalType::Year => "YEARLY",
        }
    }

    fn of_frequency(freq: &str) -> Option<IntervalType> {
        IntervalType::ALL
            .into_iter()
            .find(|interval| interval.frequency().eq_ignore_ascii_case(freq.trim()))
    }
}

/// The longest interval a billing rule may have, in its units.
pub(crate) const MAX_INTERVAL_NUMBER: i64 = 366;
/// The longest group name, in characters.
pub(crate) const MAX_NAME_CHARS: usize = 255;
/// The most products one group lists.
pub(crate) const MAX_GROUP_PRODUCTS: usize = 250;
/// The most billing rules one group holds.
pub(crate) const MAX_BILLING_RULES: usize = 50;

/// A product a group offers: a product, or one of its variants.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct GroupProduct {
    /// The product's id on the platform.
    pub platform_product_id: String,
    /// The variant's id on the platform; `None` for the product as a whole.
    pub platform_variant_id: Option<String>,
}

/// How often a subscription of the group orders.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct BillingRule {
    /// The rule's id (the service's integer); a line item names it as its `interval_id`.
    #[schema(value_type = i64)]
    pub id: BillingRuleId,
    /// The id of the group the rule belongs to.
    #[schema(value_type = i64)]
    pub subscription_group_id: GroupId,
    /// How many units between orders (1..=366).
    pub interval_number: i64,
    /// The unit of the interval.
    pub interval_type: IntervalType,
    /// What shoppers read ("Every 2 weeks").
    pub interval_name: String,
    /// The RRULE part of RFC 5545 (`FREQ=WEEKLY;INTERVAL=2`).
    pub billing_rule: String,
}

/// A group as stored: what the repository reads and writes.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredGroup {
    /// 0 for a group not stored yet.
    pub id: GroupId,
    /// The group's name.
    pub name: String,
    /// The discount the group's subscriptions take, a percentage from 0 to 100.
    pub percent_discount: f64,
    /// The products the group offers.
    pub products: Vec<GroupProduct>,
    /// In their order; a rule with id 0 is new.
    pub billing_rules: Vec<BillingRule>,
    /// When the group was created.
    pub created_at: Timestamp,
    /// When the group last changed.
    pub updated_at: Timestamp,
}

/// The subscription group resource.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct SubscriptionGroup {
    /// The group's id (the service's integer).
    #[schema(value_type = i64)]
    pub id: GroupId,
    /// The shop's `shop_identifier` (32 lowercase hex characters).
    pub shop_identifier: String,
    /// The group's name.
    pub name: String,
    /// The discount the group's subscriptions take, a percentage from 0 to 100.
    pub percent_discount: f64,
    /// The products the group offers.
    pub products: Vec<GroupProduct>,
    /// The billing rules a subscription of the group may follow, in their order.
    pub billing_rules: Vec<BillingRule>,
    /// When the group was created.
    pub created_at: Timestamp,
    /// When the group last changed.
    pub updated_at: Timestamp,
}

impl SubscriptionGroup {
    fn of(shop: &Shop, stored: StoredGroup) -> SubscriptionGroup {
        SubscriptionGroup {
            id: stored.id,
            shop_identifier: shop.identifier.as_str().to_string(),
            name: stored.name,
            percent_discount: stored.percent_discount,
            products: stored.products,
            billing_rules: stored.billing_rules,
            created_at: stored.created_at,
            updated_at: stored.updated_at,
        }
    }
}

/// A billing rule as a body gives it; `id` names one of the group's to keep.
#[derive(Debug, Clone, PartialEq)]
pub struct BillingRuleInput {
    /// The id of the group's rule to keep; `None` for a new rule.
    pub id: Option<BillingRuleId>,
    /// How many units between orders (1..=366).
    pub interval_number: i64,
    /// The unit of the interval (from `billing_rule`'s `FREQ` when the body has none).
    pub interval_type: IntervalType,
    /// What shoppers read; made from the interval ("Every 2 weeks") when the body has none.
    pub interval_name: String,
    /// The RRULE (`FREQ=WEEKLY;INTERVAL=2`); made from the interval when the body has none.
    pub billing_rule: String,
}

/// The fields of a group a body gives: all of them to create one, those to replace to update
/// one.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GroupInput {
    /// Where the fields were in the body (`subscription_group`, or empty for a bare object),
    /// for problems found later.
    pub path: String,
    /// The group's name, when given.
    pub name: Option<String>,
    /// The discount, a percentage from 0 to 100, when given.
    pub percent_discount: Option<f64>,
    /// The products, when given: they replace the group's.
    pub products: Option<Vec<GroupProduct>>,
    /// The billing rules, when given: they replace the group's.
    pub billing_rules: Option<Vec<BillingRuleInput>>,
}

/// The body that creates a subscription group. The group's fields may also come bare,
/// without the `subscription_group` key.
#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct GroupRequest {
    /// The group's fields.
    #[serde(default)]
    #[schema(value_type = GroupFields)]
    pub subscription_group: Field<GroupFields>,
}
impl BodyObject for GroupRequest {}
impl Wrapped for GroupRequest {
    type Fields = GroupFields;
    const KEY: &'static str = "subscription_group";
    fn resource(self) -> Field<GroupFields> {
        self.subscription_group
    }
}

/// A new subscription group's fields as a client writes them: `name` and at least one billing
/// rule are needed.
#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct GroupFields {
    /// The group's name (up to 255 characters).
    #[serde(default)]
    #[schema(value_type = String, required = true, example = "Coffee club", max_length = 255)]
    pub name: Field<String>,
    /// The discount of the group's subscriptions, a percentage from 0 to 100.
    #[serde(default)]
    #[schema(value_type = Option<f64>, example = 10.0, minimum = 0, maximum = 100)]
    pub percent_discount: Field<f64>,
    /// The products sold under the group (at most 250).
    #[serde(default)]
    #[schema(value_type = Option<Vec<GroupProduct>>, max_items = 250)]
    pub products: Field<Vec<Field<GroupProductFields>>>,
    /// How often the group's subscriptions bill (1 to 50 rules).
    #[serde(default)]
    #[schema(value_type = Vec<BillingRuleFields>, required = true, min_items = 1, max_items = 50)]
    pub billing_rules: Field<Vec<Field<BillingRuleFields>>>,
}
impl BodyObject for GroupFields {}

/// The body that changes a subscription group. The group's fields may also come bare, without
/// the `subscription_group` key.
#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct GroupUpdateRequest {
    /// The group's fields to change.
    #[serde(default)]
    #[schema(value_type = GroupUpdateFields)]
    pub subscription_group: Field<GroupUpdateFields>,
}
impl BodyObject for GroupUpdateRequest {}
impl Wrapped for GroupUpdateRequest {
    type Fields = GroupUpdateFields;
    const KEY: &'static str = "subscription_group";
    fn resource(self) -> Field<GroupUpdateFields> {
        self.subscription_group
    }
}

/// A subscription group's fields to change: only those given are replaced.
#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct GroupUpdateFields {
    /// The group's name (up to 255 characters).
    #[serde(default)]
    #[schema(value_type = Option<String>, example = "Coffee club", max_length = 255)]
    pub name: Field<String>,
    /// The discount of the group's subscriptions, a percentage from 0 to 100.
    #[serde(default)]
    #[schema(value_type = Option<f64>, example = 10.0, minimum = 0, maximum = 100)]
    pub percent_discount: Field<f64>,
    /// The products sold under the group (at most 250); given, they replace the whole list.
    #[serde(default)]
    #[schema(value_type = Option<Vec<GroupProduct>>, max_items = 250)]
    pub products: Field<Vec<Field<GroupProductFields>>>,
    /// How often the group's subscriptions bill (1 to 50 rules); given, they replace the whole
    /// list.
    #[serde(default)]
    #[schema(value_type = Option<Vec<BillingRuleFields>>, min_items = 1, max_items = 50)]
    pub billing_rules: Field<Vec<Field<BillingRuleFields>>>,
}
impl BodyObject for GroupUpdateFields {}

impl From<GroupUpdateFields> for GroupFields {
    fn from(fields: GroupUpdateFields) -> Self {
        GroupFields {
            name: fields.name,
            percent_discount: fields.percent_discount,
            products: fields.products,
            billing_rules: fields.billing_rules,
        }
    }
}

/// A product a group offers, as a client writes it (documented as [`GroupProduct`]).
#[derive(Debug, Default, Deserialize)]
pub struct GroupProductFields {
    /// The product's id on the platform (an integer is read as its decimal text).
    #[serde(default)]
    pub platform_product_id: Field<TextId>,
    /// The variant's id on the platform; left out or null for the product as a whole.
    #[serde(default)]
    pub platform_variant_id: Field<TextId>,
}
impl BodyObject for GroupProductFields {}

/// One billing rule as a client writes it: `interval_number` and `interval_type`, or an RRULE in
/// `billing_rule` whose `FREQ` and `INTERVAL` stand in for them.
#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct BillingRuleFields {
    /// The rule's id, to keep an existing rule.
    #[serde(default)]
    #[schema(value_type = Option<i64>)]
    pub id: Field<i64>,
    /// Every how many intervals (1 to 366).
    #[serde(default)]
    #[schema(value_type = Option<i64>, minimum = 1, maximum = 366)]
    pub interval_number: Field<i64>,
    /// The interval.
    #[serde(default)]
    #[schema(value_type = Option<IntervalType>)]
    pub interval_type: Field<RawText>,
    /// The rule's name as shoppers see it.
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub interval_name: Field<String>,
    /// An RFC 5545 RRULE (`FREQ=MONTHLY;INTERVAL=1`).
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub billing_rule: Field<String>,
}
impl BodyObject for BillingRuleFields {}

/// `{"subscription_group": {…}}`, or the group's fields bare; every problem named on its path
/// (`subscription_group.billing_rules[0].interval_type`). To create a group, `name` and at
/// least one billing rule are needed.
pub fn parse_group(body: &Value, creating: bool) -> Result<GroupInput, DomainError> {
    if creating {
        read_resource::<GroupRequest, _>(body, |fields, check| Some(fields.validate(check, true)))
    } else {
        read_resource::<GroupUpdateRequest, _>(body, |fields, check| {
            Some(GroupFields::from(fields).validate(check, false))
        })
    }
}

impl GroupFields {
    fn validate(self, check: &mut Check<'_>, creating: bool) -> GroupInput {
        GroupInput {
            path: check.here().to_string(),
            name: group_name(check, self.name, creating),
            percent_discount: percent_discount(check, "percent_discount", self.percent_discount),
            products: products(check, self.products),
            billing_rules: billing_rules(check, self.billing_rules, creating),
        }
    }
}

fn group_name(check: &mut Check<'_>, given: Field<String>, creating: bool) -> Option<String> {
    let name = check.needed("name", given, creating)?;
    if name.chars().count() > MAX_NAME_CHARS {
        check.problem("name", "length", |field| {
            format!("{field} must be at most {MAX_NAME_CHARS} characters")
        });
        return None;
    }
    Some(name)
}

/// A percentage 0..=100 (a number, or its decimal text), when given.
pub fn percent_discount(check: &mut Check<'_>, name: &str, given: Field<f64>) -> Option<f64> {
    let percent = check.optional(name, given)?;
    if (0.0..=100.0).contains(&percent) {
        Some(percent)
    } else {
        check.problem(name, "out_of_range", |field| {
            format!("{field} must be a percentage from 0 to 100")
        });
        None
    }
}

fn products(
    check: &mut Check<'_>,
    given: Field<Vec<Field<GroupProductFields>>>,
) -> Option<Vec<GroupProduct>> {
    let items = check.optional("products", given)?;
    check
        .each(
            "products",
            Field::Given(items),
            MAX_GROUP_PRODUCTS,
            |check, product| {
                let platform_product_id =
                    check.required("platform_product_id", product.platform_product_id);
                let platform_variant_id = if product.platform_variant_id.is_given() {
                    Some(check.required("platform_variant_id", product.platform_variant_id)?)
                } else {
                    None
                };
                Some(GroupProduct {
                    platform_product_id: platform_product_id?.0,
                    platform_variant_id: platform_variant_id.map(|id| id.0),
                })
            },
        )
        .and_then(|read| read.into_iter().collect())
}

fn billing_rules(
    check: &mut Check<'_>,
    given: Field<Vec<Field<BillingRuleFields>>>,
    creating: bool,
) -> Option<Vec<BillingRuleInput>> {
    if !given.is_given() {
        if creating {
            check.push(FieldError::required(check.field("billing_rules")));
        }
        return None;
    }
    let items = check.optional("billing_rules", given)?;
    if items.is_empty() {
        check.problem("billing_rules", "required", |field| {
            format!("{field} must hold at least one billing rule")
        });
        return None;
    }
    // Every rule is read, so that each problem is named.
    check
        .each(
            "billing_rules",
            Field::Given(items),
            MAX_BILLING_RULES,
            |check, rule| rule.validate(check),
        )
        .and_then(|read| read.into_iter().collect())
}

/// `KEY=value` parts of an RRULE, keys upper case.
fn rrule_parts(text: &str) -> BTreeMap<String, String> {
    text.split(';')
        .filter_map(|part| part.split_once('='))
        .map(|(key, value)| (key.trim().to_ascii_uppercase(), value.trim().to_string()))
        .collect()
}

impl BillingRuleFields {
    /// One billing rule: `interval_number` (1..366) and `interval_type`, and `billing_rule`
    /// built from them, or given and checked by the `order_rrule` parser (its `FREQ` and
    /// `INTERVAL` then stand in for missing interval fields).
    fn validate(self, check: &mut Check<'_>) -> Option<BillingRuleInput> {
        let id = check.optional("id", self.id).map(BillingRuleId);
        let rule_given = self.billing_rule.is_given();
        let given_rule = billing_rule_text(check, self.billing_rule);
        let parts = given_rule.as_deref().map(rrule_parts).unwrap_or_default();
        let interval_number = if self.interval_number.is_given() {
            check.optional("interval_number", self.interval_number)
        } else {
            parts
                .get("INTERVAL")
                .map_or(Some(1), |interval| interval.parse().ok())
        };
        let interval_number = interval_number.and_then(|number| {
            if (1..=MAX_INTERVAL_NUMBER).contains(&number) {
                Some(number)
            } else {
                check.problem("interval_number", "out_of_range", |field| {
                    format!("{field} must be from 1 to {MAX_INTERVAL_NUMBER}")
                });
                None
            }
        });
        let interval_type = match self.interval_type {
            Field::Given(RawText(text)) => IntervalType::parse(&text).or_else(|| {
                check.problem("interval_type", "invalid_value", |field| {
                    format!("{field} must be day, week, month or year")
                });
                None
            }),
            Field::Invalid(_) => {
                check.problem("interval_type", "invalid_type", |field| {
                    format!("{field} must be day, week, month or year")
                });
                None
            }
            Field::Absent | Field::Null | Field::Blank => match parts.get("FREQ") {
                Some(freq) => IntervalType::of_frequency(freq),
                // A billing_rule given that does not read has its own problem.
                None if rule_given => None,
                None => {
                    check.push(FieldError::required(check.field("interval_type")));
                    None
                }
            },
        };
        let interval_name = check.optional("interval_name", self.interval_name);
        let (interval_number, interval_type) = (interval_number?, interval_type?);
        let billing_rule = given_rule.unwrap_or_else(|| {
            format!(
                "FREQ={};INTERVAL={interval_number}",
                interval_type.frequency()
            )
        });
        Some(BillingRuleInput {
            id,
            interval_number,
            interval_type,
            interval_name: interval_name
                .unwrap_or_else(|| interval_text(interval_number, interval_type)),
            billing_rule,
        })
    }
}

/// `billing_rule` as given (a leading `RRULE:` taken off), checked as the RRULE of an
/// `order_rrule`; `None` (with its problem) when it does not read, or when it is absent.
fn billing_rule_text(check: &mut Check<'_>, given: Field<String>) -> Option<String> {
    let text = check.optional("billing_rule", given)?;
    let text = text
        .strip_prefix("RRULE:")
        .or_else(|| text.strip_prefix("rrule:"))
        .unwrap_or(&text)
        .trim()
        .to_string();
    let field = check.field("billing_rule");
    if text.contains(['\n', '\r', ':']) {
        let message = format!("{field} is the RRULE part alone, such as FREQ=MONTHLY;INTERVAL=1");
        check.push(FieldError::new(field, "invalid_rrule", message));
        return None;
    }
    let rule = format!("DTSTART:20000101T000000Z\nRRULE:{text}");
    check.check(OrderSchedule::parse(&rule, ShopZone::UTC, &field))?;
    Some(text)
}

/// "Every day", "Every 2 weeks".
fn interval_text(number: i64, interval: IntervalType) -> String {
    match number {
        1 => format!("Every {}", interval.as_str()),
        n => format!("Every {n} {}s", interval.as_str()),
    }
}

fn not_found() -> DomainError {
    DomainError::not_found("subscription_group")
}

fn in_use(what: String) -> DomainError {
    DomainError::Conflict {
        code: "subscription_group.in_use",
        message: what,
    }
}

/// List subscription groups, by id, a page at a time.
pub fn list_groups(
    tx: &mut dyn SubscriptionRepositories,
    shop: &Shop,
    limit: i64,
    page: i64,
) -> Result<(Vec<SubscriptionGroup>, PagePagination), DomainError> {
    let (stored, total) = tx.subscription_groups(shop.id, limit, page)?;
    let groups: Vec<SubscriptionGroup> = stored
        .into_iter()
        .map(|group| SubscriptionGroup::of(shop, group))
        .collect();
    let pagination = PagePagination::new(groups.len(), page, limit, total);
    Ok((groups, pagination))
}

/// Get a subscription group; 404 when the shop has none of that id.
pub fn get_group(
    tx: &mut dyn SubscriptionRepositories,
    shop: &Shop,
    id: GroupId,
) -> Result<SubscriptionGroup, DomainError> {
    let stored = tx.subscription_group(shop.id, id)?.ok_or_else(not_found)?;
    Ok(SubscriptionGroup::of(shop, stored))
}

/// The rules `inputs` make of a group's `current` ones; an `id` that is not one of them is 422
/// on its field under `at` (the body's path of the group).
fn rules_of(
    group_id: GroupId,
    inputs: Vec<BillingRuleInput>,
    current: &[BillingRule],
    at: &str,
) -> Result<Vec<BillingRule>, DomainError> {
    let mut problems = Vec::new();
    let rules = inputs
        .into_iter()
        .enumerate()
        .map(|(index, input)| {
            let id = match input.id {
                Some(id) if current.iter().any(|rule| rule.id == id) => id,
                Some(id) => {
                    let field = path(at, &format!("billing_rules[{index}].id"));
                    let message = format!("the group has no billing rule {id}");
                    problems.push(FieldError::new(field, "unknown_billing_rule", message));
                    BillingRuleId(0)
                }
                None => BillingRuleId(0),
            };
            BillingRule {
                id,
                subscription_group_id: group_id,
                interval_number: input.interval_number,
                interval_type: input.interval_type,
                interval_name: input.interval_name,
                billing_rule: input.billing_rule,
            }
        })
        .collect();
    if problems.is_empty() {
        Ok(rules)
    } else {
        Err(DomainError::Invalid(problems))
    }
}

/// Create a subscription group (201).
pub fn create_group(
    tx: &mut dyn SubscriptionRepositories,
    shop: &Shop,
    input: GroupInput,
    now: Timestamp,
) -> Result<SubscriptionGroup, DomainError> {
    let group = StoredGroup {
        id: GroupId(0),
        name: input.name.unwrap_or_default(),
        percent_discount: input.percent_discount.unwrap_or(0.0),
        products: input.products.unwrap_or_default(),
        billing_rules: rules_of(
            GroupId(0),
            input.billing_rules.unwrap_or_default(),
            &[],
            &input.path,
        )?,
        created_at: now,
        updated_at: now,
    };
    let saved = tx.save_subscription_group(shop.id, &group)?;
    Ok(SubscriptionGroup::of(shop, saved))
}

/// Update a subscription group: the fields given replace the stored ones. `billing_rules`
/// replaces the list: a rule with the `id` of one of the group's is that rule changed, one
/// without is new, and one left out is removed, unless a live subscription follows it (409).
pub fn update_group(
    tx: &mut dyn SubscriptionRepositories,
    shop: &Shop,
    id: GroupId,
    input: GroupInput,
    now: Timestamp,
) -> Result<SubscriptionGroup, DomainError> {
    tx.lock_subscription_group(shop.id, id)?;
    let mut group = tx.subscription_group(shop.id, id)?.ok_or_else(not_found)?;
    if let Some(name) = input.name {
        group.name = name;
    }
    if let Some(percent) = input.percent_discount {
        group.percent_discount = percent;
    }
    if let Some(products) = input.products {
        group.products = products;
    }
    if let Some(inputs) = input.billing_rules {
        let rules = rules_of(id, inputs, &group.billing_rules, &input.path)?;
        let removed: Vec<BillingRuleId> = group
            .billing_rules
            .iter()
            .map(|rule| rule.id)
            .filter(|id| !rules.iter().any(|rule| rule.id == *id))
            .collect();
        let used = tx.billing_rules_in_use(shop.id, &removed)?;
        if let Some(rule) = used.first() {
            return Err(in_use(format!(
                "billing rule {rule} is followed by a live subscription; keep it in billing_rules"
            )));
        }
        group.billing_rules = rules;
    }
    group.updated_at = now;
    let saved = tx.save_subscription_group(shop.id, &group)?;
    Ok(SubscriptionGroup::of(shop, saved))
}

/// Delete a subscription group (204); 409 while a box is sold under it, or a live subscription
/// (one not `inactive`) has a line item of it.
pub fn delete_group(
    tx: &mut dyn SubscriptionRepositories,
    shop: &Shop,
    id: GroupId,
) -> Result<(), DomainError> {
    tx.lock_subscription_group(shop.id, id)?;
    if tx.subscription_group(shop.id, id)?.is_none() {
        return Err(not_found());
    }
    if tx.boxes_of_group(shop.id, id)? > 0 {
        return Err(in_use(
            "a box is sold under this group; delete the box first".to_string(),
        ));
    }
    let live = tx.live_subscriptions_of_group(shop.id, id)?;
    if live > 0 {
        return Err(in_use(format!(
            "{live} live subscription(s) are sold under this group; cancel them first"
        )));
    }
    tx.delete_subscription_group(shop.id, id)?;
    Ok(())
}

/// What the groups a Create Subscription body names give it: each line item's billing rule
/// (by index), the rule of the first that names one, and the first group's discount.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GroupReferences {
    /// The id of the billing rule each line item names, by the line item's index.
    pub billing_rule_ids: BTreeMap<usize, BillingRuleId>,
    /// The RRULE of the first line item's billing rule: the subscription's when its body has
    /// no `order_rrule`.
    pub billing_rule: Option<String>,
    /// The discount of the first group named, a percentage from 0 to 100.
    pub percent_discount: Option<f64>,
    /// Groups or billing rules named that the shop does not have.
    pub problems: Vec<FieldError>,
    /// Whether a line item names an `interval_id` (found or not): the body's rule was meant
    /// to come from it.
    pub names_interval: bool,
}

/// An integer given as a number or as decimal text; `None` for anything else (the body's
/// parser names that problem).
fn integer(value: Option<&Value>) -> Option<i64> {
    match value? {
        Value::String(text) => text.trim().parse().ok(),
        value => value.as_i64(),
    }
}

/// Reads the groups and billing rules the line items at `items_path` of `body` name
/// (`subscription.line_items`): each must be the shop's (422 on its field otherwise). The
/// groups are locked, so none is deleted before the subscription that names it is stored.
pub(crate) fn group_references(
    tx: &mut dyn SubscriptionRepositories,
    shop: &Shop,
    items: &[Value],
    items_path: &str,
) -> Result<GroupReferences, DomainError> {
    let ids: Vec<(Option<GroupId>, Option<BillingRuleId>)> = items
        .iter()
        .map(|item| {
            (
                integer(item.get("subscription_group_id")).map(GroupId),
                integer(item.get("interval_id")).map(BillingRuleId),
            )
        })
        .collect();
    group_references_of(tx, shop, &ids, items_path)
}

/// [`group_references`] of the `(subscription_group_id, interval_id)` each line item names,
/// by index.
pub(crate) fn group_references_of(
    tx: &mut dyn SubscriptionRepositories,
    shop: &Shop,
    ids: &[(Option<GroupId>, Option<BillingRuleId>)],
    items_path: &str,
) -> Result<GroupReferences, DomainError> {
    let mut references = GroupReferences::default();
    let mut groups: BTreeMap<GroupId, Option<StoredGroup>> = BTreeMap::new();
    for (index, &(group_id, interval_id)) in ids.iter().enumerate() {
        let at = |name: &str| format!("{items_path}[{index}].{name}");
        references.names_interval |= interval_id.is_some();
        let Some(group_id) = group_id else {
            if interval_id.is_some() {
                references.problems.push(FieldError::new(
                    at("interval_id"),
                    "invalid_value",
                    "interval_id names a billing rule of the line item's subscription_group_id; \
                     give that too",
                ));
            }
            continue;
        };
        if let std::collections::btree_map::Entry::Vacant(entry) = groups.entry(group_id) {
            tx.lock_subscription_group(shop.id, group_id)?;
            entry.insert(tx.subscription_group(shop.id, group_id)?);
        }
        let Some(Some(group)) = groups.get(&group_id) else {
            references.problems.push(FieldError::new(
                at("subscription_group_id"),
                "unknown_group",
                format!("the shop has no subscription group {group_id}"),
            ));
            continue;
        };
        references
            .percent_discount
            .get_or_insert(group.percent_discount);
        let Some(interval_id) = interval_id else {
            continue;
        };
        match group
            .billing_rules
            .iter()
            .find(|rule| rule.id == interval_id)
        {
            Some(rule) => {
                references.billing_rule_ids.insert(index, rule.id);
                references
                    .billing_rule
                    .get_or_insert_with(|| rule.billing_rule.clone());
            }
            None => references.problems.push(FieldError::new(
                at("interval_id"),
                "unknown_billing_rule",
                format!("subscription group {group_id} has no billing rule {interval_id}"),
            )),
        }
    }
    Ok(references)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn problems(result: Result<GroupInput, DomainError>) -> Vec<(String, &'static str)> {
        match result {
            Err(DomainError::Invalid(problems)) => problems
                .into_iter()
                .map(|problem| (problem.field, problem.code))
                .collect(),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_group_body_is_read_with_its_billing_rules_built_or_checked() {
        let input = parse_group(
            &json!({"subscription_group": {
                "name": "Coffee club", "percent_discount": "12.5",
                "products": [{"platform_product_id": 101, "platform_variant_id": null},
                             {"platform_product_id": "p-2", "platform_variant_id": "v-9"}],
                "billing_rules": [
                    {"interval_number": "2", "interval_type": "weeks"},
                    {"interval_number": 1, "interval_type": "month", "interval_name": "Monthly"},
                    {"billing_rule": "RRULE:FREQ=MONTHLY;INTERVAL=3;BYMONTHDAY=1"}
                ],
                "extra": "ignored"
            }}),
            true,
        )
        .unwrap();
        assert_eq!(input.name.as_deref(), Some("Coffee club"));
        assert_eq!(input.percent_discount, Some(12.5));
        let products = input.products.unwrap();
        assert_eq!(products[0].platform_product_id, "101");
        assert_eq!(products[0].platform_variant_id, None);
        assert_eq!(products[1].platform_variant_id.as_deref(), Some("v-9"));
        let rules = input.billing_rules.unwrap();
        assert_eq!(rules[0].billing_rule, "FREQ=WEEKLY;INTERVAL=2");
        assert_eq!(rules[0].interval_name, "Every 2 weeks");
        assert_eq!(rules[1].interval_name, "Monthly");
        assert_eq!(
            (
                rules[2].interval_number,
                rules[2].interval_type,
                rules[2].billing_rule.as_str()
            ),
            (
                3,
                IntervalType::Month,
                "FREQ=MONTHLY;INTERVAL=3;BYMONTHDAY=1"
            )
        );
        // A bare object reads the same.
        assert!(parse_group(&json!({"name": "Box", "billing_rules": [{"interval_type": "day", "interval_number": 1}]}), true).is_ok());
    }

    #[test]
    fn every_problem_is_named_on_its_path() {
        assert_eq!(
            problems(parse_group(&json!({"subscription_group": {}}), true)),
            [
                ("subscription_group.name".to_string(), "required"),
                ("subscription_group.billing_rules".to_string(), "required")
            ]
        );
        let found = problems(parse_group(
            &json!({"subscription_group": {
            "name": "x".repeat(256), "percent_discount": 101,
            "products": [{"platform_variant_id": "v"}],
            "billing_rules": [
                {"interval_number": 0, "interval_type": "week"},
                {"interval_number": 1, "interval_type": "fortnight"},
                {"billing_rule": "FREQ=HOURLY"},
                {"billing_rule": "DTSTART:20200101T000000Z"}
            ]}}),
            true,
        ));
        assert_eq!(
            found,
            [
                ("subscription_group.name".to_string(), "length"),
                (
                    "subscription_group.percent_discount".to_string(),
                    "out_of_range"
                ),
                (
                    "subscription_group.products[0].platform_product_id".to_string(),
                    "required"
                ),
                (
                    "subscription_group.billing_rules[0].interval_number".to_string(),
                    "out_of_range"
                ),
                (
                    "subscription_group.billing_rules[1].interval_type".to_string(),
                    "invalid_value"
                ),
                (
                    "subscription_group.billing_rules[2].billing_rule".to_string(),
                    "unsupported_rrule"
                ),
                (
                    "subscription_group.billing_rules[3].billing_rule".to_string(),
                    "invalid_rrule"
                ),
            ]
        );
        assert_eq!(
            problems(parse_group(
                &json!({"subscription_group": {"billing_rules": []}}),
                false
            )),
            [("subscription_group.billing_rules".to_string(), "required")]
        );
        // An update may give any field alone.
        let update = parse_group(
            &json!({"subscription_group": {"percent_discount": 5}}),
            false,
        )
        .unwrap();
        assert_eq!(
            (update.name, update.percent_discount, update.billing_rules),
            (None, Some(5.0), None)
        );
        assert_eq!(update.path, "subscription_group");
    }

    #[test]
    fn a_group_body_of_wrong_types_text_numbers_and_blanks_is_read_as_before() {
        let body = json!({"subscription_group": {
            "name": "  ", "percent_discount": "abc",
            "products": [{"platform_product_id": 101, "platform_variant_id": ""}, "x",
                         {"platform_product_id": 1.5}],
            "billing_rules": [
                {"id": "x", "interval_number": "2", "interval_type": 5},
                {"interval_type": "  "},
                {"billing_rule": "  "},
                {"billing_rule": 7, "interval_number": "0"}
            ]
        }});
        let found = match parse_group(&body, true) {
            Err(DomainError::Invalid(problems)) => problems,
            other => panic!("{other:?}"),
        };
        assert_eq!(
            found[6].message,
            "subscription_group.billing_rules[0].interval_type must be day, week, month or year"
        );
        let found: Vec<(String, &str)> = found
            .into_iter()
            .map(|problem| (problem.field, problem.code))
            .collect();
        let expected: Vec<(String, &str)> = [
            ("subscription_group.name", "required"),
            ("subscription_group.percent_discount", "invalid_type"),
            (
                "subscription_group.products[0].platform_variant_id",
                "required",
            ),
            ("subscription_group.products[1]", "invalid_type"),
            (
                "subscription_group.products[2].platform_product_id",
                "invalid_type",
            ),
            ("subscription_group.billing_rules[0].id", "invalid_type"),
            (
                "subscription_group.billing_rules[0].interval_type",
                "invalid_type",
            ),
            (
                "subscription_group.billing_rules[1].interval_type",
                "invalid_value",
            ),
            (
                "subscription_group.billing_rules[3].billing_rule",
                "invalid_type",
            ),
            (
                "subscription_group.billing_rules[3].interval_number",
                "out_of_range",
            ),
        ]
        .into_iter()
        .map(|(field, code)| (field.to_string(), code))
        .collect();
        assert_eq!(found, expected);
        // Text numbers, integer ids and blanks, bare.
        let input = parse_group(
            &json!({"name": " Club ", "percent_discount": " 7.5 ",
                    "products": [{"platform_product_id": 9, "platform_variant_id": null}],
                    "billing_rules": [{"id": " 3 ", "interval_number": "2",
                                       "interval_type": " Weeks ", "interval_name": "  "}]}),
            false,
        )
        .unwrap();
        assert_eq!(input.path, "");
        assert_eq!(input.name.as_deref(), Some("Club"));
        assert_eq!(input.percent_discount, Some(7.5));
        assert_eq!(
            input.products,
            Some(vec![GroupProduct {
                platform_product_id: "9".into(),
                platform_variant_id: None,
            }])
        );
        let rules = input.billing_rules.unwrap();
        assert_eq!(
            (
                rules[0].id,
                rules[0].interval_type,
                rules[0].interval_name.as_str()
            ),
            (Some(BillingRuleId(3)), IntervalType::Week, "Every 2 weeks")
        );
        // A wrapper that is not an object is the only problem named.
        for wrapper in [json!(null), json!("x"), json!([])] {
            assert_eq!(
                problems(parse_group(
                    &json!({"subscription_group": wrapper, "name": 5}),
                    true
                )),
                [("subscription_group".to_string(), "invalid_type")]
            );
        }
        assert_eq!(
            problems(parse_group(&json!({"billing_rules": "x"}), false)),
            [("billing_rules".to_string(), "invalid_type")]
        );
    }
}
