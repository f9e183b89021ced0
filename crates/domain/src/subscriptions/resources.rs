//! The resources of the subscription API (seed 002 §2.1–2.4), as Mercer answers them: the
//! seed's field names exactly, money as integer cents (contract §1), times RFC 3339 UTC.
//!
//! Fields the seed lists are always written, `null` when there is no value, so every answer has
//! one shape. Ids are the service's integers.

use std::fmt;

use serde::{Deserialize, Serialize};

pub use crate::kernel::money::{CURRENCY_CODES, Cents, CurrencyCode};
use crate::kernel::time::Timestamp;

/// The statuses of a subscription (seed 002 §3, contract §5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SubscriptionStatus {
    Active,
    Inactive,
    Processing,
    Scheduled,
    Paused,
}

impl SubscriptionStatus {
    /// In the order seed 002 §4.2 lists them as a filter.
    pub const ALL: [SubscriptionStatus; 5] = [
        SubscriptionStatus::Active,
        SubscriptionStatus::Inactive,
        SubscriptionStatus::Processing,
        SubscriptionStatus::Scheduled,
        SubscriptionStatus::Paused,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            SubscriptionStatus::Active => "active",
            SubscriptionStatus::Inactive => "inactive",
            SubscriptionStatus::Processing => "processing",
            SubscriptionStatus::Scheduled => "scheduled",
            SubscriptionStatus::Paused => "paused",
        }
    }

    pub fn parse(text: &str) -> Option<SubscriptionStatus> {
        SubscriptionStatus::ALL
            .into_iter()
            .find(|status| status.as_str() == text)
    }
}

impl fmt::Display for SubscriptionStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A subscription address (seed 002 §2.2).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubscriptionAddress {
    pub id: i64,
    pub shop_identifier: String,
    pub platform_id: Option<i64>,
    pub customer_id: i64,
    pub platform_type: String,
    pub platform_customer_id: Option<i64>,
    pub first_name: Option<String>,
    pub last_name: Option<String>,
    pub company: Option<String>,
    pub phone: Option<String>,
    pub street1: Option<String>,
    pub street2: Option<String>,
    pub city: Option<String>,
    pub province: Option<String>,
    pub province_code: Option<String>,
    pub country: Option<String>,
    pub country_code: Option<String>,
    pub zip: Option<String>,
    pub is_default: bool,
    pub address_use: Option<String>,
    pub address_source: Option<String>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

/// `subscription_summary` of a subscription customer (seed 002 §2.1).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubscriptionSummary {
    pub svc_platform_customer_id: Option<i64>,
    pub next_order_date: Option<Timestamp>,
    pub last_order_date: Option<Timestamp>,
    pub active_subscription_count: i64,
    pub inactive_subscription_count: i64,
    pub subscription_order_count: i64,
}

/// A label of a subscription customer (seed 002 §2.1).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CustomerLabel {
    pub id: i64,
    pub customer_id: i64,
    pub name: String,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    pub deleted_at: Option<Timestamp>,
}

/// A subscription customer (seed 002 §2.1).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubscriptionCustomer {
    pub id: i64,
    pub platform_id: Option<String>,
    pub cashier_public_id: Option<String>,
    pub first_name: Option<String>,
    pub last_name: Option<String>,
    pub phone: Option<String>,
    pub email: Option<String>,
    pub notes: Option<String>,
    pub addresses: Vec<SubscriptionAddress>,
    pub default_address: Option<SubscriptionAddress>,
    pub subscription_summary: SubscriptionSummary,
    pub labels: Vec<CustomerLabel>,
}

/// A discount of a line item (seed 002 §2.4). Its money fields are cents like every other
/// (contract §1 wins over the seed's "numbers").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LineItemDiscount {
    pub id: i64,
    pub subscription_line_item_id: i64,
    pub shop_id: i64,
    pub full_price: Cents,
    pub fixed_value: Cents,
    pub fixed_value_charged: Cents,
    pub discount_type: String,
    pub percentage_value: f64,
    pub description: Option<String>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    pub deleted_at: Option<Timestamp>,
}

/// `prepaid_metadata` of a line item (seed 002 §2.4).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PrepaidMetadata {
    pub id: i64,
    pub line_item_id: i64,
    pub prepaid_duration: i64,
    pub current_recurrence_count: i64,
    pub prepaid_continue: Option<String>,
}

/// One of `line_item_attributes` (seed 002 §2.4).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LineItemAttribute {
    pub name: String,
    pub value: String,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    pub subscription_id: i64,
    pub line_item_id: i64,
}

/// A subscription line item (seed 002 §2.4).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SubscriptionLineItem {
    pub id: i64,
    pub subscription_id: i64,
    pub subscription_group_id: Option<i64>,
    pub subscription_group_billing_rules_id: Option<i64>,
    pub platform_id: Option<String>,
    pub platform_product_id: String,
    pub platform_variant_id: String,
    pub title: Option<String>,
    pub product_name: Option<String>,
    pub variant_name: Option<String>,
    pub sku: Option<String>,
    pub image: Option<String>,
    pub quantity: i64,
    pub price: Cents,
    pub price_charged: Cents,
    pub discounted_price: Cents,
    pub discounted_price_charged: Cents,
    pub full_price: Cents,
    pub full_price_charged: Cents,
    pub requires_shipping: bool,
    pub taxable: bool,
    pub grams: Option<i64>,
    pub weight: Option<f64>,
    pub weight_unit: Option<String>,
    pub discounts: Vec<LineItemDiscount>,
    pub prepaid_metadata: Option<PrepaidMetadata>,
    pub line_item_attributes: Vec<LineItemAttribute>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

/// A shipping line of a subscription (seed 002 §2.4).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShippingLine {
    pub id: i64,
    pub subscription_id: i64,
    pub name: String,
    pub code: Option<String>,
    pub tag: Option<String>,
    pub price: Cents,
    pub value: Cents,
    pub value_charged: Cents,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

/// The month a payment method expires, written `YYYY-MM` (`payment_details.expires_at` and the
/// payment method change's `expires_at`: a Mercer extension of seed 002). A card is good through
/// the last day of its month, so it expires at the first instant of the next month (UTC).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PaymentExpiry {
    year: i32,
    month: u32,
}

impl PaymentExpiry {
    /// `YYYY-MM`, a year from 2000 to 9999 and a month from 01 to 12.
    pub fn parse(text: &str) -> Option<PaymentExpiry> {
        let (year, month) = text.split_once('-')?;
        let digits =
            |part: &str, len: usize| part.len() == len && part.bytes().all(|b| b.is_ascii_digit());
        if !digits(year, 4) || !digits(month, 2) {
            return None;
        }
        let (year, month): (i32, u32) = (year.parse().ok()?, month.parse().ok()?);
        ((2000..=9999).contains(&year) && (1..=12).contains(&month))
            .then_some(PaymentExpiry { year, month })
    }

    /// The instant the method stops being good: the first of the following month, 00:00 UTC.
    pub fn expires_at(self) -> Timestamp {
        let (year, month) = if self.month == 12 {
            (self.year + 1, 1)
        } else {
            (self.year, self.month + 1)
        };
        chrono::NaiveDate::from_ymd_opt(year, month, 1)
            .and_then(|day| day.and_hms_opt(0, 0, 0))
            .map(|start| Timestamp::from(start.and_utc()))
            .unwrap_or(Timestamp::from_micros(i64::MAX))
    }

    /// The month whose [`Self::expires_at`] is `at` (as the store keeps it).
    pub fn from_expires_at(at: Timestamp) -> Option<PaymentExpiry> {
        use chrono::Datelike;
        let day = at.to_datetime().date_naive();
        let (year, month) = if day.month() == 1 {
            (day.year() - 1, 12)
        } else {
            (day.year(), day.month() - 1)
        };
        let expiry = PaymentExpiry { year, month };
        (expiry.expires_at() == at).then_some(expiry)
    }
}

impl fmt::Display for PaymentExpiry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:04}-{:02}", self.year, self.month)
    }
}

impl Serialize for PaymentExpiry {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for PaymentExpiry {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = <std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
        PaymentExpiry::parse(&text).ok_or_else(|| {
            serde::de::Error::custom(format!("{text:?} is not a year and month such as 2027-03"))
        })
    }
}

/// `last_failure_details` (seed 002 §2.3).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FailureDetails {
    pub message: String,
}

/// Who acted, in a status log entry's `metadata.user`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ActorType {
    /// A client of the API, with an API access token (`id` is the token's).
    Api,
    /// A staff account of the shop.
    Staff,
    /// The customer, through a storefront.
    Customer,
    /// Mercer itself: the scheduler placing orders, activating scheduled subscriptions.
    System,
}

/// `metadata.user` of a status log entry: `{type, id, name}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Actor {
    #[serde(rename = "type")]
    pub kind: ActorType,
    pub id: i64,
    pub name: String,
}

impl Actor {
    /// Mercer's own scheduler.
    pub fn system() -> Actor {
        Actor {
            kind: ActorType::System,
            id: 0,
            name: "Mercer".to_string(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatusLogMetadata {
    pub user: Actor,
}

/// `latest_status_log` (seed 002 §2.3): what the last action did and who did it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatusLog {
    pub id: i64,
    pub subscription_status: SubscriptionStatus,
    pub reason: String,
    pub metadata: StatusLogMetadata,
    pub created_at: Timestamp,
    pub subscription_id: i64,
}

/// A subscription (seed 002 §2.3).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Subscription {
    pub id: i64,
    pub shop_id: i64,
    pub customer_id: i64,
    pub billing_address_id: i64,
    pub shipping_address_id: i64,
    pub orders_processed: i64,
    pub current_retries: i64,
    pub external_id: Option<String>,
    pub idempotency_key: Option<String>,
    /// `null` unless the list or get asked for `expand=customer`.
    pub customer: Option<Box<SubscriptionCustomer>>,
    pub next_order_datetime: Option<Timestamp>,
    pub next_payment_datetime: Option<Timestamp>,
    pub next_processing_datetime: Option<Timestamp>,
    pub last_payment_datetime: Option<Timestamp>,
    pub last_order_datetime: Option<Timestamp>,
    pub last_processed_datetime: Option<Timestamp>,
    pub status_changed_at: Option<Timestamp>,
    pub placed_at: Option<Timestamp>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    pub subscription_status: SubscriptionStatus,
    pub payment_method_token: Option<String>,
    pub payment_gateway_public_id: Option<String>,
    /// When the payment method expires (a Mercer extension; `null` when unknown).
    pub payment_method_expires_at: Option<PaymentExpiry>,
    pub payment_rrule: String,
    pub payment_rrule_text: String,
    pub order_rrule: String,
    pub order_rrule_text: String,
    pub charged_currency: CurrencyCode,
    pub base_currency: CurrencyCode,
    pub base_to_charged_exchange_rate: f64,
    pub percent_discount: f64,
    pub discount_code: Option<String>,
    pub line_items: Vec<SubscriptionLineItem>,
    pub shipping_lines: Vec<ShippingLine>,
    pub billing_address: SubscriptionAddress,
    pub shipping_address: SubscriptionAddress,
    pub last_failure_code: Option<String>,
    pub last_failure_reason: Option<String>,
    pub last_failure_details: Option<FailureDetails>,
    pub latest_status_log: Option<StatusLog>,
    pub note: Option<String>,
    pub order_note: Option<String>,
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use serde_json::{Value, json};

    pub(crate) fn at(text: &str) -> Timestamp {
        Timestamp::parse_rfc3339(text).unwrap()
    }

    pub(crate) fn address(id: i64) -> SubscriptionAddress {
        SubscriptionAddress {
            id,
            shop_identifier: "0123456789abcdef0123456789abcdef".into(),
            platform_id: None,
            customer_id: 7,
            platform_type: "custom".into(),
            platform_customer_id: None,
            first_name: Some("Ada".into()),
            last_name: Some("Lovelace".into()),
            company: None,
            phone: None,
            street1: Some("1 Analytical Way".into()),
            street2: None,
            city: Some("London".into()),
            province: None,
            province_code: None,
            country: Some("United Kingdom".into()),
            country_code: Some("GB".into()),
            zip: Some("N1 9GU".into()),
            is_default: true,
            address_use: Some("shipping".into()),
            address_source: Some("subscription".into()),
            created_at: at("2024-01-01T00:00:00Z"),
            updated_at: at("2024-01-01T00:00:00Z"),
        }
    }

    pub(crate) fn subscription() -> Subscription {
        let now = at("2024-03-01T09:00:00Z");
        Subscription {
            id: 1,
            shop_id: 2,
            customer_id: 7,
            billing_address_id: 10,
            shipping_address_id: 11,
            orders_processed: 0,
            current_retries: 0,
            external_id: None,
            idempotency_key: Some("key-1".into()),
            customer: None,
            next_order_datetime: Some(at("2024-03-04T09:00:00Z")),
            next_payment_datetime: None,
            next_processing_datetime: None,
            last_payment_datetime: None,
            last_order_datetime: None,
            last_processed_datetime: None,
            status_changed_at: Some(now),
            placed_at: None,
            created_at: now,
            updated_at: now,
            subscription_status: SubscriptionStatus::Active,
            payment_method_token: Some("<PAYMENT_METHOD_TOKEN>".into()),
            payment_gateway_public_id: Some("<PAYMENT_GATEWAY_ID>".into()),
            payment_method_expires_at: PaymentExpiry::parse("2027-03"),
            payment_rrule: "DTSTART:20240304T090000Z\nRRULE:FREQ=WEEKLY;INTERVAL=2".into(),
            payment_rrule_text: "every 2 weeks on Monday".into(),
            order_rrule: "DTSTART:20240304T090000Z\nRRULE:FREQ=WEEKLY;INTERVAL=2".into(),
            order_rrule_text: "every 2 weeks on Monday".into(),
            charged_currency: CurrencyCode::parse("CAD").unwrap(),
            base_currency: CurrencyCode::parse("USD").unwrap(),
            base_to_charged_exchange_rate: 1.35,
            percent_discount: 0.0,
            discount_code: None,
            line_items: vec![SubscriptionLineItem {
                id: 3,
                subscription_id: 1,
                subscription_group_id: Some(4),
                subscription_group_billing_rules_id: None,
                platform_id: None,
                platform_product_id: "p-1".into(),
                platform_variant_id: "v-1".into(),
                title: Some("Coffee".into()),
                product_name: Some("Coffee".into()),
                variant_name: None,
                sku: None,
                image: None,
                quantity: 2,
                price: Cents(1250),
                price_charged: Cents(1688),
                discounted_price: Cents(1250),
                discounted_price_charged: Cents(1688),
                full_price: Cents(2500),
                full_price_charged: Cents(3375),
                requires_shipping: true,
                taxable: true,
                grams: Some(500),
                weight: Some(0.5),
                weight_unit: Some("kg".into()),
                discounts: vec![LineItemDiscount {
                    id: 5,
                    subscription_line_item_id: 3,
                    shop_id: 2,
                    full_price: Cents(2500),
                    fixed_value: Cents(100),
                    fixed_value_charged: Cents(135),
                    discount_type: "fixed".into(),
                    percentage_value: 0.0,
                    description: None,
                    created_at: now,
                    updated_at: now,
                    deleted_at: None,
                }],
                prepaid_metadata: Some(PrepaidMetadata {
                    id: 6,
                    line_item_id: 3,
                    prepaid_duration: 3,
                    current_recurrence_count: 1,
                    prepaid_continue: Some("auto_renew".into()),
                }),
                line_item_attributes: vec![LineItemAttribute {
                    name: "grind".into(),
                    value: "fine".into(),
                    created_at: now,
                    updated_at: now,
                    subscription_id: 1,
                    line_item_id: 3,
                }],
                created_at: now,
                updated_at: now,
            }],
            shipping_lines: vec![ShippingLine {
                id: 8,
                subscription_id: 1,
                name: "Standard".into(),
                code: Some("std".into()),
                tag: None,
                price: Cents(500),
                value: Cents(500),
                value_charged: Cents(675),
                created_at: now,
                updated_at: now,
            }],
            billing_address: address(10),
            shipping_address: address(11),
            last_failure_code: None,
            last_failure_reason: None,
            last_failure_details: None,
            latest_status_log: Some(StatusLog {
                id: 9,
                subscription_status: SubscriptionStatus::Active,
                reason: "created".into(),
                metadata: StatusLogMetadata {
                    user: Actor {
                        kind: ActorType::Api,
                        id: 12,
                        name: "API token 12".into(),
                    },
                },
                created_at: now,
                subscription_id: 1,
            }),
            note: None,
            order_note: None,
        }
    }

    fn keys(value: &Value) -> Vec<&str> {
        let mut keys: Vec<&str> = value
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        keys.sort_unstable();
        keys
    }

    fn sorted(mut names: Vec<&'static str>) -> Vec<&'static str> {
        names.sort_unstable();
        names
    }

    #[test]
    fn a_subscription_has_every_field_of_the_seed_by_its_name() {
        let value = serde_json::to_value(subscription()).unwrap();
        assert_eq!(
            keys(&value),
            sorted(vec![
                "id",
                "shop_id",
                "customer_id",
                "billing_address_id",
                "shipping_address_id",
                "orders_processed",
                "current_retries",
                "external_id",
                "idempotency_key",
                "customer",
                "next_order_datetime",
                "next_payment_datetime",
                "next_processing_datetime",
                "last_payment_datetime",
                "last_order_datetime",
                "last_processed_datetime",
                "status_changed_at",
                "placed_at",
                "created_at",
                "updated_at",
                "subscription_status",
                "payment_method_token",
                "payment_gateway_public_id",
                "payment_method_expires_at",
                "payment_rrule",
                "order_rrule",
                "payment_rrule_text",
                "order_rrule_text",
                "charged_currency",
                "base_currency",
                "base_to_charged_exchange_rate",
                "percent_discount",
                "discount_code",
                "line_items",
                "shipping_lines",
                "billing_address",
                "shipping_address",
                "last_failure_code",
                "last_failure_reason",
                "last_failure_details",
                "latest_status_log",
                "note",
                "order_note",
            ])
        );
        assert_eq!(value["customer"], Value::Null);
        assert_eq!(value["subscription_status"], "active");
        assert_eq!(value["next_order_datetime"], "2024-03-04T09:00:00Z");
        assert_eq!(value["charged_currency"], "CAD");
        assert_eq!(value["payment_method_expires_at"], "2027-03");
        assert_eq!(
            value["latest_status_log"],
            json!({
                "id": 9,
                "subscription_status": "active",
                "reason": "created",
                "metadata": {"user": {"type": "api", "id": 12, "name": "API token 12"}},
                "created_at": "2024-03-01T09:00:00Z",
                "subscription_id": 1
            })
        );
    }

    #[test]
    fn line_items_carry_discounts_prepaid_metadata_and_attributes_with_money_in_cents() {
        let value = serde_json::to_value(subscription()).unwrap();
        let item = &value["line_items"][0];
        assert_eq!(
            keys(item),
            sorted(vec![
                "id",
                "subscription_id",
                "subscription_group_id",
                "subscription_group_billing_rules_id",
                "platform_id",
                "platform_product_id",
                "platform_variant_id",
                "title",
                "product_name",
                "variant_name",
                "sku",
                "image",
                "quantity",
                "price",
                "price_charged",
                "discounted_price",
                "discounted_price_charged",
                "full_price",
                "full_price_charged",
                "requires_shipping",
                "taxable",
                "grams",
                "weight",
                "weight_unit",
                "discounts",
                "prepaid_metadata",
                "line_item_attributes",
                "created_at",
                "updated_at",
            ])
        );
        assert_eq!(item["price"], json!(1250));
        assert_eq!(item["full_price"], json!(2500));
        assert_eq!(
            keys(&item["discounts"][0]),
            sorted(vec![
                "id",
                "subscription_line_item_id",
                "shop_id",
                "full_price",
                "fixed_value",
                "fixed_value_charged",
                "discount_type",
                "percentage_value",
                "description",
                "created_at",
                "updated_at",
                "deleted_at",
            ])
        );
        assert_eq!(
            keys(&item["prepaid_metadata"]),
            sorted(vec![
                "id",
                "line_item_id",
                "prepaid_duration",
                "current_recurrence_count",
                "prepaid_continue",
            ])
        );
        assert_eq!(
            keys(&item["line_item_attributes"][0]),
            sorted(vec![
                "name",
                "value",
                "created_at",
                "updated_at",
                "subscription_id",
                "line_item_id",
            ])
        );
        assert_eq!(
            keys(&value["shipping_lines"][0]),
            sorted(vec![
                "id",
                "subscription_id",
                "name",
                "code",
                "tag",
                "price",
                "value",
                "value_charged",
                "created_at",
                "updated_at",
            ])
        );
        assert_eq!(value["shipping_lines"][0]["value_charged"], json!(675));
    }

    #[test]
    fn addresses_have_the_seed_fields() {
        let value = serde_json::to_value(address(1)).unwrap();
        assert_eq!(
            keys(&value),
            sorted(vec![
                "id",
                "shop_identifier",
                "platform_id",
                "customer_id",
                "platform_type",
                "platform_customer_id",
                "first_name",
                "last_name",
                "company",
                "phone",
                "street1",
                "street2",
                "city",
                "province",
                "province_code",
                "country",
                "country_code",
                "zip",
                "is_default",
                "address_use",
                "address_source",
                "created_at",
                "updated_at",
            ])
        );
    }

    #[test]
    fn a_customer_has_the_seed_fields_and_summary() {
        let customer = SubscriptionCustomer {
            id: 7,
            platform_id: Some("c-7".into()),
            cashier_public_id: None,
            first_name: Some("Ada".into()),
            last_name: None,
            phone: None,
            email: Some("ada@example.test".into()),
            notes: None,
            addresses: vec![address(10)],
            default_address: Some(address(10)),
            subscription_summary: SubscriptionSummary {
                svc_platform_customer_id: Some(7),
                next_order_date: None,
                last_order_date: None,
                active_subscription_count: 1,
                inactive_subscription_count: 0,
                subscription_order_count: 3,
            },
            labels: vec![],
        };
        let value = serde_json::to_value(&customer).unwrap();
        assert_eq!(
            keys(&value),
            sorted(vec![
                "id",
                "platform_id",
                "cashier_public_id",
                "first_name",
                "last_name",
                "phone",
                "email",
                "notes",
                "addresses",
                "default_address",
                "subscription_summary",
                "labels",
            ])
        );
        assert_eq!(
            keys(&value["subscription_summary"]),
            sorted(vec![
                "svc_platform_customer_id",
                "next_order_date",
                "last_order_date",
                "active_subscription_count",
                "inactive_subscription_count",
                "subscription_order_count",
            ])
        );
        let mut expanded = subscription();
        expanded.customer = Some(Box::new(customer));
        let value = serde_json::to_value(&expanded).unwrap();
        assert_eq!(value["customer"]["email"], "ada@example.test");
    }

    #[test]
    fn a_subscription_reads_back_what_it_writes() {
        let original = subscription();
        let text = serde_json::to_string(&original).unwrap();
        let back: Subscription = serde_json::from_str(&text).unwrap();
        assert_eq!(back, original);
    }

    #[test]
    fn statuses_parse_and_print_their_names() {
        for status in SubscriptionStatus::ALL {
            assert_eq!(SubscriptionStatus::parse(status.as_str()), Some(status));
            assert_eq!(
                serde_json::to_value(status).unwrap(),
                json!(status.as_str())
            );
        }
        assert_eq!(SubscriptionStatus::parse("Active"), None);
        assert_eq!(SubscriptionStatus::parse("cancelled"), None);
    }

    #[test]
    fn a_payment_expiry_is_a_year_and_month_good_through_its_last_day() {
        let march = PaymentExpiry::parse("2027-03").unwrap();
        assert_eq!(march.to_string(), "2027-03");
        assert_eq!(march.expires_at(), at("2027-04-01T00:00:00Z"));
        assert_eq!(
            PaymentExpiry::from_expires_at(march.expires_at()),
            Some(march)
        );
        let december = PaymentExpiry::parse("2026-12").unwrap();
        assert_eq!(december.expires_at(), at("2027-01-01T00:00:00Z"));
        assert_eq!(
            PaymentExpiry::from_expires_at(december.expires_at()),
            Some(december)
        );
        assert!(PaymentExpiry::parse("2027-02").unwrap() < march);
        for bad in [
            "2027-3",
            "2027-13",
            "2027-00",
            "27-03",
            "2027/03",
            "1999-12",
            "2027-03-01",
            "",
        ] {
            assert_eq!(PaymentExpiry::parse(bad), None, "{bad}");
        }
        assert_eq!(
            PaymentExpiry::from_expires_at(at("2027-04-02T00:00:00Z")),
            None,
            "not the start of a month"
        );
        let json: PaymentExpiry = serde_json::from_str("\"2028-11\"").unwrap();
        assert_eq!(serde_json::to_string(&json).unwrap(), "\"2028-11\"");
    }

    #[test]
    fn cents_are_whole_numbers() {
        assert_eq!(serde_json::from_str::<Cents>("1250").unwrap(), Cents(1250));
        assert!(serde_json::from_str::<Cents>("12.5").is_err());
        assert!(serde_json::from_str::<Cents>("\"12\"").is_err());
        assert_eq!(Cents(1250).times(3), Some(Cents(3750)));
        assert_eq!(Cents(i64::MAX).times(2), None);
    }

    #[test]
    fn currency_codes_are_current_iso_4217_codes() {
        assert!(
            CURRENCY_CODES.windows(2).all(|pair| pair[0] < pair[1]),
            "sorted, for binary search"
        );
        assert!(
            CURRENCY_CODES
                .iter()
                .all(|code| { code.len() == 3 && code.bytes().all(|b| b.is_ascii_uppercase()) })
        );
        for code in ["USD", "EUR", "JPY", "CAD", "GBP", "CHF", "AED", "ZWG"] {
            assert_eq!(CurrencyCode::parse(code).unwrap().as_str(), code);
        }
        for code in ["usd", "XXX", "XTS", "XAU", "HRK", "ABC", "US", "USDD", ""] {
            assert_eq!(CurrencyCode::parse(code), None, "{code}");
        }
        assert!(serde_json::from_str::<CurrencyCode>("\"QQQ\"").is_err());
    }
}
