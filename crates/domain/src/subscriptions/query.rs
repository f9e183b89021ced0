//! The query of List Subscriptions: `subscription_status`,
//! `svc_platform_customer_id`, `expand=customer`, `limit`, the opaque keyset `cursor`, and
//! `filter` on the subscription's integer and date-time fields with `lt lte gt gte eq`
//! (the syntax is `kernel::filter`'s, shared with the directory). Every problem is a 400
//! naming its parameter.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

use crate::kernel::error::{DomainError, FieldError};
use crate::kernel::filter::{
    Condition, FilterOp, FilterValue, MAX_FILTER_CONDITIONS, MAX_LISTED_IDS, bad_filter, gather,
    integer_value, split_conditions, time_value,
};
use crate::kernel::ids::{CustomerId, SubscriptionId};
use crate::kernel::limits::{MAX_ID_CHARS, check_parameter};
use crate::subscriptions::repository::StoredSubscription;
use crate::subscriptions::resources::SubscriptionStatus;

/// How many items a page of a subscriptions list holds when the query gives no `limit`.
pub const DEFAULT_LIMIT: i64 = 50;
pub(crate) const MAX_LIMIT: i64 = 250;

/// The fields a filter may name: the integer and date-time fields of a subscription.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, strum::IntoStaticStr, strum::EnumString)]
#[strum(serialize_all = "snake_case")]
pub enum FilterField {
    /// `id`: the subscription's id.
    Id,
    /// `shop_id`: the id of the subscription's shop.
    ShopId,
    /// `customer_id`: the id of the subscription's customer.
    CustomerId,
    /// `billing_address_id`: the id of the billing address.
    BillingAddressId,
    /// `shipping_address_id`: the id of the shipping address.
    ShippingAddressId,
    /// `orders_processed`: how many of the subscription's orders were placed.
    OrdersProcessed,
    /// `current_retries`: failed attempts at the current order.
    CurrentRetries,
    /// `next_order_datetime`: when the next order falls.
    NextOrderDatetime,
    /// `next_payment_datetime`: when the next payment falls.
    NextPaymentDatetime,
    /// `next_processing_datetime`: when the retry wait of a failed order ends.
    NextProcessingDatetime,
    /// `last_payment_datetime`: when a payment was last made.
    LastPaymentDatetime,
    /// `last_order_datetime`: the order date of the last order placed.
    LastOrderDatetime,
    /// `last_processed_datetime`: when the last order was placed.
    LastProcessedDatetime,
    /// `status_changed_at`: when `subscription_status` last changed.
    StatusChangedAt,
    /// `placed_at`: when the subscription was placed, as Create Subscription gave it.
    PlacedAt,
    /// `created_at`: when Mercer stored the subscription.
    CreatedAt,
    /// `updated_at`: when the subscription last changed.
    UpdatedAt,
}

impl FilterField {
    /// Every field a filter may name.
    pub const ALL: [FilterField; 17] = [
        FilterField::Id,
        FilterField::ShopId,
        FilterField::CustomerId,
        FilterField::BillingAddressId,
        FilterField::ShippingAddressId,
        FilterField::OrdersProcessed,
        FilterField::CurrentRetries,
        FilterField::NextOrderDatetime,
        FilterField::NextPaymentDatetime,
        FilterField::NextProcessingDatetime,
        FilterField::LastPaymentDatetime,
        FilterField::LastOrderDatetime,
        FilterField::LastProcessedDatetime,
        FilterField::StatusChangedAt,
        FilterField::PlacedAt,
        FilterField::CreatedAt,
        FilterField::UpdatedAt,
    ];

    /// The field's name, as a filter writes it (`next_order_datetime`).
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    /// The field named `name`; `None` for a name a filter may not use.
    pub fn parse(name: &str) -> Option<FilterField> {
        name.parse().ok()
    }

    /// Whether the field holds an integer (an id or a count); the others are date-times.
    pub fn is_integer(self) -> bool {
        matches!(
            self,
            FilterField::Id
                | FilterField::ShopId
                | FilterField::CustomerId
                | FilterField::BillingAddressId
                | FilterField::ShippingAddressId
                | FilterField::OrdersProcessed
                | FilterField::CurrentRetries
        )
    }
}

/// One checked condition: an integer field with an integer, a date-time field with a time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Filter {
    /// The field compared.
    pub field: FilterField,
    /// The comparison (`lt lte gt gte eq`).
    pub op: FilterOp,
    /// The value compared with: an integer for an integer field, a time for a date-time one.
    pub value: FilterValue,
}

impl Filter {
    /// Whether `subscription` meets the condition. A date-time that is not set meets none
    /// (as SQL's NULL compares), so `lt(placed_at:…)` leaves out subscriptions never placed.
    pub fn matches(&self, subscription: &StoredSubscription) -> bool {
        let (id, shop_id, created_at) = (
            subscription.id,
            subscription.shop_id,
            subscription.created_at,
        );
        let s = &subscription.state;
        let integer = match self.field {
            FilterField::Id => Some(id.0),
            FilterField::ShopId => Some(shop_id.0),
            FilterField::CustomerId => Some(s.customer_id.0),
            FilterField::BillingAddressId => Some(s.billing_address_id.0),
            FilterField::ShippingAddressId => Some(s.shipping_address_id.0),
            FilterField::OrdersProcessed => Some(s.orders_processed),
            FilterField::CurrentRetries => Some(s.current_retries),
            _ => None,
        };
        let time = match self.field {
            FilterField::NextOrderDatetime => s.next_order_datetime,
            FilterField::NextPaymentDatetime => s.next_payment_datetime,
            FilterField::NextProcessingDatetime => s.next_processing_datetime,
            FilterField::LastPaymentDatetime => s.last_payment_datetime,
            FilterField::LastOrderDatetime => s.last_order_datetime,
            FilterField::LastProcessedDatetime => s.last_processed_datetime,
            FilterField::StatusChangedAt => s.status_changed_at,
            FilterField::PlacedAt => s.placed_at,
            FilterField::CreatedAt => Some(created_at),
            FilterField::UpdatedAt => Some(s.updated_at),
            _ => None,
        };
        match (&self.value, integer, time) {
            (FilterValue::Integer(value), Some(actual), _) => self.op.holds(&actual, value),
            (FilterValue::Time(value), _, Some(actual)) => self.op.holds(&actual, value),
            _ => false,
        }
    }
}

/// Parses `lt(next_order_datetime:2024-06-01T00:00:00Z),gte(orders_processed:2)`.
pub fn parse_filters(text: &str) -> Result<Vec<Filter>, FieldError> {
    split_conditions(text, &FilterOp::COMPARISONS)?
        .into_iter()
        .map(|Condition { op, field, value }| {
            let name = field;
            let field = FilterField::parse(name).ok_or_else(|| {
                bad_filter(format!(
                    "unknown filter field {name:?}; use an integer or date-time field of a \
                     subscription such as next_order_datetime"
                ))
            })?;
            let value = if field.is_integer() {
                FilterValue::Integer(integer_value(value)?)
            } else {
                FilterValue::Time(time_value(value)?)
            };
            Ok(Filter { field, op, value })
        })
        .collect()
}

/// Where a page of List Subscriptions starts: after this subscription id (subscriptions are
/// listed by id), and the walk's `total` as its first page counted it. Clients see it only as
/// the opaque `pagination.next`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cursor {
    /// The id of the last subscription of the previous page; the page starts after it.
    pub after_id: SubscriptionId,
    /// Counted on the walk's first page and carried on: a deep page does not count again
    /// (`s1:{after_id}` without it is read too).
    pub total: Option<i64>,
}

const CURSOR_PREFIX: &str = "s1:";

impl Cursor {
    /// A cursor after subscription `after_id`, without a total.
    pub fn after(after_id: SubscriptionId) -> Cursor {
        Cursor {
            after_id,
            total: None,
        }
    }

    /// The opaque text clients get as `pagination.next`: base64url of `s1:{after_id}[:{total}]`.
    pub fn encode(self) -> String {
        let text = match self.total {
            Some(total) => format!("{CURSOR_PREFIX}{}:{total}", self.after_id),
            None => format!("{CURSOR_PREFIX}{}", self.after_id),
        };
        URL_SAFE_NO_PAD.encode(text)
    }

    /// The cursor [`Cursor::encode`] wrote; `None` for text it could not have written.
    pub fn decode(text: &str) -> Option<Cursor> {
        let bytes = URL_SAFE_NO_PAD.decode(text.trim()).ok()?;
        let text = String::from_utf8(bytes).ok()?;
        let rest = text.strip_prefix(CURSOR_PREFIX)?;
        let (after_id, total) = match rest.split_once(':') {
            Some((id, total)) => (id, Some(total.parse().ok().filter(|t: &i64| *t >= 0)?)),
            None => (rest, None),
        };
        Some(Cursor {
            after_id: SubscriptionId(after_id.parse().ok()?),
            total,
        })
    }
}

/// A checked List Subscriptions query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListQuery {
    /// Empty: every status.
    pub statuses: Vec<SubscriptionStatus>,
    /// Empty: every customer.
    pub customer_ids: Vec<CustomerId>,
    /// Whether `expand=customer` asked for each subscription's customer.
    pub expand_customer: bool,
    /// The most subscriptions a page holds (1..=250, default 50).
    pub limit: i64,
    /// Where the page starts; `None` for the first page.
    pub cursor: Option<Cursor>,
    /// The `filter` conditions, all of which a subscription must meet.
    pub filters: Vec<Filter>,
}

impl Default for ListQuery {
    fn default() -> Self {
        ListQuery {
            statuses: Vec::new(),
            customer_ids: Vec::new(),
            expand_customer: false,
            limit: DEFAULT_LIMIT,
            cursor: None,
            filters: Vec::new(),
        }
    }
}

impl ListQuery {
    /// Whether `subscription` belongs in the list (cursor aside).
    pub fn matches(&self, subscription: &StoredSubscription) -> bool {
        let state = &subscription.state;
        (self.statuses.is_empty() || self.statuses.contains(&state.subscription_status))
            && (self.customer_ids.is_empty() || self.customer_ids.contains(&state.customer_id))
            && self
                .cursor
                .is_none_or(|cursor| subscription.id > cursor.after_id)
            && self
                .filters
                .iter()
                .all(|filter| filter.matches(subscription))
    }
}

fn bad(name: &str, message: impl Into<String>) -> FieldError {
    FieldError::new(name, "invalid_value", message)
}

/// The values of a parameter given once, repeated, as `name[]`, or joined by commas.
fn each_value(value: &str) -> impl Iterator<Item = &str> {
    value
        .split(',')
        .map(str::trim)
        .filter(|item| !item.is_empty())
}

/// Checks the query of List Subscriptions; every problem is a 400 naming its parameter.
/// Parameters it does not know are left alone.
pub fn parse_list_query(pairs: &[(String, String)]) -> Result<ListQuery, DomainError> {
    let mut query = ListQuery::default();
    let mut problems = Vec::new();
    for (key, value) in pairs {
        let key = key.strip_suffix("[]").unwrap_or(key);
        let result = (|| {
            match key {
                "subscription_status" => {
                    for name in each_value(value) {
                        let status = SubscriptionStatus::parse(name).ok_or_else(|| {
                            bad(
                                key,
                                format!(
                                    "subscription_status must be active, inactive, processing, \
                                     scheduled or paused, not {name:?}"
                                ),
                            )
                        })?;
                        if !query.statuses.contains(&status) {
                            query.statuses.push(status);
                        }
                    }
                }
                "svc_platform_customer_id" => {
                    let ids = each_value(value)
                        .map(|id| {
                            id.parse().map(CustomerId).map_err(|_| {
                                bad(key, "svc_platform_customer_id must be an integer")
                            })
                        })
                        .collect::<Result<Vec<CustomerId>, _>>()?;
                    gather(key, "ids", MAX_LISTED_IDS, &mut query.customer_ids, ids)?;
                }
                "expand" => {
                    for name in each_value(value) {
                        if name != "customer" {
                            return Err(bad(key, format!("expand takes customer, not {name:?}")));
                        }
                        query.expand_customer = true;
                    }
                }
                "limit" => {
                    let limit: i64 = value
                        .trim()
                        .parse()
                        .map_err(|_| bad(key, "limit must be an integer"))?;
                    if !(1..=MAX_LIMIT).contains(&limit) {
                        return Err(bad(key, format!("limit must be between 1 and {MAX_LIMIT}")));
                    }
                    query.limit = limit;
                }
                "cursor" => {
                    check_parameter(key, value, MAX_ID_CHARS)?;
                    if !value.trim().is_empty() {
                        query.cursor = Some(Cursor::decode(value).ok_or_else(|| {
                            bad(key, "cursor must be a pagination.next of an earlier page")
                        })?);
                    }
                }
                "filter" => gather(
                    key,
                    "conditions",
                    MAX_FILTER_CONDITIONS,
                    &mut query.filters,
                    parse_filters(value)?,
                )?,
                _ => {}
            }
            Ok(())
        })();
        if let Err(problem) = result {
            problems.push(problem);
        }
    }
    if problems.is_empty() {
        Ok(query)
    } else {
        Err(DomainError::BadRequest(problems))
    }
}

#[cfg(test)]
mod tests {
    use crate::kernel::time::Timestamp;

    /// A time bound of a filter, as the tests build one.
    fn time_filter(field: FilterField, op: FilterOp, at: Timestamp) -> Filter {
        Filter {
            field,
            op,
            value: FilterValue::Time(at),
        }
    }

    use super::*;
    use crate::subscriptions::repository::tests::stored;
    use crate::subscriptions::resources::tests::subscription;

    fn pairs(items: &[(&str, &str)]) -> Vec<(String, String)> {
        items
            .iter()
            .map(|(key, value)| (key.to_string(), value.to_string()))
            .collect()
    }

    fn at(text: &str) -> Timestamp {
        Timestamp::parse_rfc3339(text).unwrap()
    }

    #[test]
    fn filters_on_integer_and_date_time_fields() {
        let filters = parse_filters(
            "lt(next_order_datetime:2024-06-01T00:00:00Z),gte(orders_processed:2),eq(id:7)",
        )
        .unwrap();
        assert_eq!(
            filters,
            vec![
                Filter {
                    field: FilterField::NextOrderDatetime,
                    op: FilterOp::Lt,
                    value: FilterValue::Time(at("2024-06-01T00:00:00Z")),
                },
                Filter {
                    field: FilterField::OrdersProcessed,
                    op: FilterOp::Gte,
                    value: FilterValue::Integer(2),
                },
                Filter {
                    field: FilterField::Id,
                    op: FilterOp::Eq,
                    value: FilterValue::Integer(7),
                },
            ]
        );
        for field in FilterField::ALL {
            let value = if field.is_integer() {
                "1"
            } else {
                "2024-01-01T00:00:00Z"
            };
            let text = format!("gt({}:{value})", field.as_str());
            assert_eq!(parse_filters(&text).unwrap()[0].field, field);
        }
    }

    #[test]
    fn unknown_fields_operators_and_bad_values_are_400_on_filter() {
        for (text, why) in [
            ("gt(shoe_size:5)", "unknown filter field"),
            ("gt(subscription_status:active)", "unknown filter field"),
            ("like(id:5)", "unknown operator"),
            ("between(id:5)", "unknown operator"),
            ("gt(id:five)", "integer"),
            ("gt(created_at:yesterday)", "RFC 3339"),
            ("gt(id:5) lt(id:9)", "commas"),
        ] {
            let error = parse_filters(text).unwrap_err();
            assert_eq!(error.field, "filter");
            assert!(error.message.contains(why), "{text}: {}", error.message);
            match parse_list_query(&pairs(&[("filter", text)])) {
                Err(DomainError::BadRequest(problems)) => assert_eq!(problems[0].field, "filter"),
                other => panic!("{text}: {other:?}"),
            }
        }
    }

    #[test]
    fn a_filter_matches_like_sql_would() {
        let mut s = stored(&subscription());
        s.state.orders_processed = 3;
        let check = |text: &str, s: &StoredSubscription| parse_filters(text).unwrap()[0].matches(s);
        assert!(check("gte(orders_processed:3)", &s));
        assert!(!check("gt(orders_processed:3)", &s));
        assert!(check("lt(next_order_datetime:2024-03-05T00:00:00Z)", &s));
        assert!(!check("lt(next_order_datetime:2024-03-04T09:00:00Z)", &s));
        assert!(check(
            "eq(next_order_datetime:2024-03-04T04:00:00-05:00)",
            &s
        ));
        // placed_at is not set: no condition on it holds.
        assert!(!check("lt(placed_at:2100-01-01T00:00:00Z)", &s));
        assert!(!check("gt(placed_at:1970-01-01T00:00:00Z)", &s));
    }

    #[test]
    fn the_list_query_reads_every_parameter() {
        let cursor = Cursor::after(SubscriptionId(41)).encode();
        let query = parse_list_query(&pairs(&[
            ("subscription_status[]", "active"),
            ("subscription_status[]", "paused,active"),
            ("svc_platform_customer_id", "7,8"),
            ("expand", "customer"),
            ("limit", "10"),
            ("cursor", &cursor),
            ("filter", "gt(id:1)"),
            ("filter[]", "lt(created_at:2030-01-01T00:00:00Z)"),
            ("unrelated", "x"),
        ]))
        .unwrap();
        assert_eq!(
            query.statuses,
            vec![SubscriptionStatus::Active, SubscriptionStatus::Paused]
        );
        assert_eq!(query.customer_ids, vec![CustomerId(7), CustomerId(8)]);
        assert!(query.expand_customer);
        assert_eq!(query.limit, 10);
        assert_eq!(query.cursor, Some(Cursor::after(SubscriptionId(41))));
        assert_eq!(query.filters.len(), 2);
        assert_eq!(parse_list_query(&[]).unwrap(), ListQuery::default());
    }

    #[test]
    fn bad_parameters_are_400_naming_each() {
        let error = parse_list_query(&pairs(&[
            ("subscription_status", "cancelled"),
            ("svc_platform_customer_id", "ada"),
            ("expand", "orders"),
            ("limit", "251"),
            ("cursor", "not-a-cursor"),
        ]))
        .unwrap_err();
        match error {
            DomainError::BadRequest(problems) => {
                let fields: Vec<&str> = problems.iter().map(|p| p.field.as_str()).collect();
                assert_eq!(
                    fields,
                    vec![
                        "subscription_status",
                        "svc_platform_customer_id",
                        "expand",
                        "limit",
                        "cursor"
                    ]
                );
            }
            other => panic!("{other:?}"),
        }
        for limit in ["0", "-1", "x"] {
            assert!(parse_list_query(&pairs(&[("limit", limit)])).is_err());
        }
    }

    #[test]
    fn cursors_are_opaque_and_round_trip() {
        let cursor = Cursor::after(SubscriptionId(123_456));
        let text = cursor.encode();
        assert!(!text.contains("123456"));
        assert_eq!(Cursor::decode(&text), Some(cursor));
        let counted = Cursor {
            after_id: SubscriptionId(7),
            total: Some(1_000),
        };
        assert_eq!(Cursor::decode(&counted.encode()), Some(counted));
        // `s1:7:x`, `s1:7:-1`: a total that is not a count is no cursor.
        assert_eq!(Cursor::decode("czE6Nzp4"), None);
        assert_eq!(Cursor::decode("czE6NzotMQ"), None);
        assert_eq!(Cursor::decode("MTIz"), None);
        assert_eq!(Cursor::decode("%%%"), None);
    }

    #[test]
    fn the_query_keeps_what_matches() {
        let s = stored(&subscription());
        let mut query = ListQuery::default();
        assert!(query.matches(&s));
        query.statuses = vec![SubscriptionStatus::Paused];
        assert!(!query.matches(&s));
        query.statuses = vec![SubscriptionStatus::Active];
        query.cursor = Some(Cursor::after(s.id));
        assert!(!query.matches(&s));
        query.cursor = Some(Cursor::after(SubscriptionId(s.id.0 - 1)));
        query.customer_ids = vec![s.state.customer_id];
        query.filters = vec![time_filter(
            FilterField::NextOrderDatetime,
            FilterOp::Lte,
            at("2024-03-04T09:00:00Z"),
        )];
        assert!(query.matches(&s));
        query.customer_ids = vec![CustomerId(s.state.customer_id.0 + 1)];
        assert!(!query.matches(&s));
    }

    #[test]
    fn filters_and_customer_ids_are_bounded_over_all_their_repeats() {
        let refused = |pairs: &[(String, String)]| match parse_list_query(pairs) {
            Err(DomainError::BadRequest(mut problems)) => problems.remove(0),
            other => panic!("{other:?}"),
        };
        let conditions = |n: usize| vec!["gt(orders_processed:1)"; n].join(",");
        let (sixty, forty) = (conditions(60), conditions(40));
        assert!(parse_list_query(&pairs(&[("filter", &sixty), ("filter", &forty)])).is_ok());
        let problem = refused(&pairs(&[
            ("filter", &sixty),
            ("filter", &forty),
            ("filter", "gt(orders_processed:1)"),
        ]));
        assert_eq!(
            (problem.field.as_str(), problem.code),
            ("filter", "too_many")
        );
        let ids: Vec<String> = (0..=MAX_LISTED_IDS).map(|id| id.to_string()).collect();
        let problem = refused(&pairs(&[("svc_platform_customer_id", &ids.join(","))]));
        assert_eq!(
            (problem.field.as_str(), problem.code),
            ("svc_platform_customer_id", "too_many")
        );
    }
}
