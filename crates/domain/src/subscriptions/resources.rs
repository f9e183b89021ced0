//! The resources of the subscription API, as Mercer answers them: the
//! documented field names exactly, money as integer cents, times RFC 3339 UTC.
//!
//! Documented fields are always written, `null` when there is no value, so every answer has
//! one shape. Ids are the service's integers.

use crate::kernel::ids::ShopId;
use std::fmt;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::kernel::ids::{
    AddressId, BillingRuleId, CustomerId, GroupId, LabelId, LineItemId, StatusLogId, SubscriptionId,
};
pub use crate::kernel::money::{CURRENCY_CODES, Cents, CurrencyCode};
use crate::kernel::time::Timestamp;

/// The statuses of a subscription.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    Serialize,
    Deserialize,
    ToSchema,
    strum::IntoStaticStr,
    strum::EnumString,
)]
#[strum(serialize_all = "snake_case")]
#[serde(rename_all = "snake_case")]
pub enum SubscriptionStatus {
    /// Live: the scheduler places its orders when they come due.
    Active,
    /// Ended: cancelled, out of retries, or its rule has no date left. Reactivate makes it
    /// active again.
    Inactive,
    /// Mercer is placing its order; it refuses every client change until the order is placed
    /// or has failed. Only Mercer sets it.
    Processing,
    /// Waiting for its first order (its rule's `DTSTART` is ahead); it becomes active then.
    Scheduled,
    /// Paused by a client: no order is placed until it is resumed.
    Paused,
}

impl SubscriptionStatus {
    /// In the order the API lists them as a filter.
    pub const ALL: [SubscriptionStatus; 5] = [
        SubscriptionStatus::Active,
        SubscriptionStatus::Inactive,
        SubscriptionStatus::Processing,
        SubscriptionStatus::Scheduled,
        SubscriptionStatus::Paused,
    ];

    /// The status's name in the API, such as `active`.
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    /// The status of that name, as [`Self::as_str`] writes it (lower case only); `None` for
    /// any other text.
    pub fn parse(text: &str) -> Option<SubscriptionStatus> {
        text.parse().ok()
    }
}

impl fmt::Display for SubscriptionStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A subscription address.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct SubscriptionAddress {
    /// The address's id (the service's integer).
    #[schema(value_type = i64)]
    pub id: AddressId,
    /// The shop's `shop_identifier` (32 lowercase hex characters).
    pub shop_identifier: String,
    /// The address's platform id when it is a number, else `null` (none yet, or not a number).
    pub platform_id: Option<i64>,
    /// The id of the address's customer (the service's integer).
    #[schema(value_type = i64)]
    pub customer_id: CustomerId,
    /// The shop's platform type, such as `custom`.
    pub platform_type: String,
    /// The platform id of the address's customer when it is a number, else `null` (the
    /// customer's `platform_id` text carries any form).
    pub platform_customer_id: Option<i64>,
    /// The recipient's first name.
    pub first_name: Option<String>,
    /// The recipient's last name.
    pub last_name: Option<String>,
    /// The company name.
    pub company: Option<String>,
    /// A phone number at the address.
    pub phone: Option<String>,
    /// The first line of the street address.
    pub street1: Option<String>,
    /// The second line of the street address.
    pub street2: Option<String>,
    /// The city.
    pub city: Option<String>,
    /// The province or state, by name.
    pub province: Option<String>,
    /// The province or state, by code.
    pub province_code: Option<String>,
    /// The country, by name.
    pub country: Option<String>,
    /// The country's code, such as `GB` (ISO 3166-1 alpha-2, upper case, when given here).
    pub country_code: Option<String>,
    /// The postal code.
    pub zip: Option<String>,
    /// Whether this is the customer's default address (a customer has exactly one).
    pub is_default: bool,
    /// What the address is used for, as the platform names it.
    pub address_use: Option<String>,
    /// Always `null`: no values are defined for it.
    pub address_source: Option<String>,
    /// When the service stored the address.
    pub created_at: Timestamp,
    /// When the service last changed the address.
    pub updated_at: Timestamp,
}

/// `subscription_summary` of a subscription customer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct SubscriptionSummary {
    /// The customer's id (the service's integer): what List Subscriptions' filter of that name
    /// takes.
    #[schema(value_type = Option<i64>)]
    pub svc_platform_customer_id: Option<CustomerId>,
    /// The earliest `next_order_datetime` of the customer's subscriptions that are not
    /// `inactive`; `null` when none has one.
    pub next_order_date: Option<Timestamp>,
    /// The latest `last_order_datetime` of the customer's subscriptions; `null` when none has
    /// one.
    pub last_order_date: Option<Timestamp>,
    /// How many of the customer's subscriptions are not `inactive`.
    pub active_subscription_count: i64,
    /// How many of the customer's subscriptions are `inactive`.
    pub inactive_subscription_count: i64,
    /// The sum of the `orders_processed` of the customer's subscriptions.
    pub subscription_order_count: i64,
}

/// A label of a subscription customer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[schema(as = SubscriptionCustomerLabel)]
pub struct CustomerLabel {
    /// The label's id (the service's integer).
    #[schema(value_type = i64)]
    pub id: LabelId,
    /// The id of the labelled customer (the service's integer).
    #[schema(value_type = i64)]
    pub customer_id: CustomerId,
    /// The label's text.
    pub name: String,
    /// When the label was added.
    pub created_at: Timestamp,
    /// When the label last changed.
    pub updated_at: Timestamp,
    /// When the label was deleted; `null` for the live labels a customer shows.
    pub deleted_at: Option<Timestamp>,
}

/// A subscription customer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct SubscriptionCustomer {
    /// The customer's id (the service's integer): the shop's one record of the customer,
    /// shared with the customer directory.
    #[schema(value_type = i64)]
    pub id: CustomerId,
    /// The customer's platform id (the platform's string); `null` for a customer made here
    /// until the connector answers one.
    pub platform_id: Option<String>,
    /// Always `null`: Mercer has no value for it.
    pub cashier_public_id: Option<String>,
    /// The customer's first name.
    pub first_name: Option<String>,
    /// The customer's last name.
    pub last_name: Option<String>,
    /// The customer's phone number.
    pub phone: Option<String>,
    /// The customer's email address, by which Create Subscription finds the customer.
    pub email: Option<String>,
    /// Notes on the customer, written through the subscription API (the platform sends none).
    pub notes: Option<String>,
    /// The customer's live addresses.
    pub addresses: Vec<SubscriptionAddress>,
    /// The one of `addresses` that is the default; `null` when the customer has none.
    pub default_address: Option<SubscriptionAddress>,
    /// Figures from the customer's subscriptions.
    pub subscription_summary: SubscriptionSummary,
    /// The customer's live labels.
    pub labels: Vec<CustomerLabel>,
}

/// A discount of a line item. Its money fields are cents like every other
/// (never decimal numbers).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[schema(as = SubscriptionLineItemDiscount)]
pub struct LineItemDiscount {
    /// The discount's number within its line item, from 1 in the order given.
    pub id: i64,
    /// The id of its line item (the service's integer).
    #[schema(value_type = i64)]
    pub subscription_line_item_id: LineItemId,
    /// The id of the shop (the service's integer).
    #[schema(value_type = i64)]
    pub shop_id: ShopId,
    /// The line item's unit price, before any discount (base currency).
    #[schema(value_type = i64)]
    pub full_price: Cents,
    /// What this discount takes off the unit price (base currency): a percentage worked out,
    /// or the fixed amount, never more than what the discounts before it left.
    #[schema(value_type = i64)]
    pub fixed_value: Cents,
    /// `fixed_value` in the charged currency, at the subscription's exchange rate.
    #[schema(value_type = i64)]
    pub fixed_value_charged: Cents,
    /// `percentage` or `fixed_amount`.
    pub discount_type: String,
    /// The percent of the unit price taken (0 to 100); 0 for a `fixed_amount` discount.
    pub percentage_value: f64,
    /// The discount's description, as given.
    pub description: Option<String>,
    /// When the discount was made.
    pub created_at: Timestamp,
    /// When the discount last changed.
    pub updated_at: Timestamp,
    /// When the discount was deleted; always `null`, as Mercer deletes no discount.
    pub deleted_at: Option<Timestamp>,
}

/// `prepaid_metadata` of a line item.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[schema(as = SubscriptionPrepaidMetadata)]
pub struct PrepaidMetadata {
    /// The metadata's id: 0, as Mercer keeps it inside its line item.
    pub id: i64,
    /// The id of its line item (the service's integer).
    #[schema(value_type = i64)]
    pub line_item_id: LineItemId,
    /// How many orders one payment covers (1 to 1,000).
    pub prepaid_duration: i64,
    /// How many orders of the current prepaid period were placed (0 to `prepaid_duration`);
    /// an order at 0 or at `prepaid_duration` starts a new period and charges for it.
    pub current_recurrence_count: i64,
    /// Kept and shown as given; Mercer does not interpret it (no values are defined).
    pub prepaid_continue: Option<String>,
}

/// One of `line_item_attributes`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[schema(as = SubscriptionLineItemAttribute)]
pub struct LineItemAttribute {
    /// The attribute's name (1 to 255 characters, once per line item).
    pub name: String,
    /// The attribute's value (empty when none was given).
    pub value: String,
    /// When the attribute was stored.
    pub created_at: Timestamp,
    /// When the attribute last changed.
    pub updated_at: Timestamp,
    /// The id of the line item's subscription (the service's integer).
    #[schema(value_type = i64)]
    pub subscription_id: SubscriptionId,
    /// The id of its line item (the service's integer).
    #[schema(value_type = i64)]
    pub line_item_id: LineItemId,
}

/// A subscription line item.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct SubscriptionLineItem {
    /// The line item's id (the service's integer).
    #[schema(value_type = i64)]
    pub id: LineItemId,
    /// The id of its subscription (the service's integer).
    #[schema(value_type = i64)]
    pub subscription_id: SubscriptionId,
    /// The subscription group it is sold under (the service's integer), if any.
    #[schema(value_type = Option<i64>)]
    pub subscription_group_id: Option<GroupId>,
    /// The group's billing rule it follows (the create body's `interval_id`), if any.
    #[schema(value_type = Option<i64>)]
    pub subscription_group_billing_rules_id: Option<BillingRuleId>,
    /// The line item's platform id; `null` for the line items Mercer makes.
    pub platform_id: Option<String>,
    /// The product's platform id (the platform's string).
    pub platform_product_id: String,
    /// The variant's platform id (the platform's string).
    pub platform_variant_id: String,
    /// The variant's name, else the product's, from the catalogue; else as the body gave it.
    pub title: Option<String>,
    /// The product's name (the catalogue's, else the body's).
    pub product_name: Option<String>,
    /// The variant's name (the catalogue's, else the body's).
    pub variant_name: Option<String>,
    /// The variant's SKU (the catalogue's, else the body's).
    pub sku: Option<String>,
    /// The URL of the variant's image, else of the product's first (the catalogue's, else the
    /// body's).
    pub image: Option<String>,
    /// How many units each order has, at least 1.
    pub quantity: i64,
    /// The unit price, in the base currency.
    #[schema(value_type = i64)]
    pub price: Cents,
    /// `price` in the charged currency, at the subscription's exchange rate.
    #[schema(value_type = i64)]
    pub price_charged: Cents,
    /// The unit price less the line item's discounts, never below zero (base currency).
    #[schema(value_type = i64)]
    pub discounted_price: Cents,
    /// `discounted_price` in the charged currency: what each order charges per unit.
    #[schema(value_type = i64)]
    pub discounted_price_charged: Cents,
    /// `price` × `quantity`, in the base currency.
    #[schema(value_type = i64)]
    pub full_price: Cents,
    /// `full_price` in the charged currency.
    #[schema(value_type = i64)]
    pub full_price_charged: Cents,
    /// Whether the item is shipped (true unless the catalogue or the body says not).
    pub requires_shipping: bool,
    /// Whether the item is taxed (true unless the catalogue or the body says not).
    pub taxable: bool,
    /// The item's weight in grams.
    pub grams: Option<i64>,
    /// The item's weight, in `weight_unit`.
    pub weight: Option<f64>,
    /// The unit of `weight`, as the platform or the body names it.
    pub weight_unit: Option<String>,
    /// The discounts taken off the unit price, in turn (a Mercer extension).
    pub discounts: Vec<LineItemDiscount>,
    /// For a prepaid line item, how many orders one payment covers and where the period
    /// stands; `null` otherwise.
    pub prepaid_metadata: Option<PrepaidMetadata>,
    /// Name and value pairs kept with the line item and sent with its orders.
    pub line_item_attributes: Vec<LineItemAttribute>,
    /// When the line item was stored.
    pub created_at: Timestamp,
    /// When the line item last changed.
    pub updated_at: Timestamp,
}

/// A shipping line of a subscription.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[schema(as = SubscriptionShippingLine)]
pub struct ShippingLine {
    /// The line's number within its subscription, from 1 in the order given.
    pub id: i64,
    /// The id of its subscription (the service's integer).
    #[schema(value_type = i64)]
    pub subscription_id: SubscriptionId,
    /// The shipping method's name; the order's `shipping_method` lists them.
    pub name: String,
    /// The shipping method's code, as given.
    pub code: Option<String>,
    /// A tag of the line, as given.
    pub tag: Option<String>,
    /// The price of the shipping, in the base currency.
    #[schema(value_type = i64)]
    pub price: Cents,
    /// The same amount as `price` (base currency).
    #[schema(value_type = i64)]
    pub value: Cents,
    /// `value` in the charged currency: what each order adds for this line.
    #[schema(value_type = i64)]
    pub value_charged: Cents,
    /// When the line was set.
    pub created_at: Timestamp,
    /// When the line last changed.
    pub updated_at: Timestamp,
}

/// The month a payment method expires, written `YYYY-MM` (`payment_details.expires_at` and the
/// payment method change's `expires_at`: a Mercer extension of the subscription API). A card is good through
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

/// A year and month, `YYYY-MM` (`2027-03`): a string, as [`PaymentExpiry`]'s `Serialize` writes
/// it.
impl utoipa::PartialSchema for PaymentExpiry {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        use utoipa::openapi::schema::{ObjectBuilder, Type};
        ObjectBuilder::new()
            .schema_type(Type::String)
            .pattern(Some("^[0-9]{4}-(0[1-9]|1[0-2])$"))
            .description(Some(
                "The month a payment method expires, `YYYY-MM` (a year from 2000 to 9999); it is \
                 good through the month's last day.",
            ))
            .examples(["2027-03"])
            .into()
    }
}

impl ToSchema for PaymentExpiry {}

/// `last_failure_details`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[schema(as = SubscriptionFailureDetails)]
pub struct FailureDetails {
    /// What failed: the step of the order's placement and the connector's error.
    pub message: String,
}

/// Who acted, in a status log entry's `metadata.user`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
#[schema(as = StatusLogActorType)]
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
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[schema(as = StatusLogActor)]
pub struct Actor {
    /// What kind of actor it is (`type` in JSON).
    #[serde(rename = "type")]
    pub kind: ActorType,
    /// The actor's id within its kind: the API token's for `api`, 0 for Mercer.
    pub id: i64,
    /// The actor's name: the API token's (an OAuth app's token carries the app's name),
    /// `Mercer` for Mercer.
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

/// `metadata` of a status log entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct StatusLogMetadata {
    /// Who took the action.
    pub user: Actor,
    /// On a `cancelled` entry whose canceller gave a reason or a comment (and only there):
    /// both, each `null` when not given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cancellation: Option<crate::subscriptions::cancellation::Cancellation>,
}

/// `latest_status_log`: what the last action did and who did it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct StatusLog {
    /// The entry's id (the service's integer).
    #[schema(value_type = i64)]
    pub id: StatusLogId,
    /// The subscription's status after the action.
    pub subscription_status: SubscriptionStatus,
    /// What the action was, such as `created`, `paused` or `order_placed`.
    pub reason: String,
    /// Who took the action.
    pub metadata: StatusLogMetadata,
    /// When the action was taken.
    pub created_at: Timestamp,
    /// The id of its subscription (the service's integer).
    #[schema(value_type = i64)]
    pub subscription_id: SubscriptionId,
}

/// A subscription.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Subscription {
    /// The subscription's id (the service's integer).
    #[schema(value_type = i64)]
    pub id: SubscriptionId,
    /// The id of its shop (the service's integer).
    #[schema(value_type = i64)]
    pub shop_id: ShopId,
    /// The id of its customer (the service's integer).
    #[schema(value_type = i64)]
    pub customer_id: CustomerId,
    /// The id of the customer's address it bills to.
    #[schema(value_type = i64)]
    pub billing_address_id: AddressId,
    /// The id of the customer's address its orders ship to.
    #[schema(value_type = i64)]
    pub shipping_address_id: AddressId,
    /// How many of its orders Mercer has placed (Update Subscription may set it).
    pub orders_processed: i64,
    /// How many times its current order has failed; 0 once an order is placed, and on
    /// reactivation.
    pub current_retries: i64,
    /// The client's own reference for the subscription, kept as given (a checkout's
    /// subscription has its order's public id).
    pub external_id: Option<String>,
    /// The key Create Subscription was given, unique in the shop: the same key and body again
    /// answer this subscription.
    pub idempotency_key: Option<String>,
    /// `null` unless the list or get asked for `expand=customer`.
    pub customer: Option<Box<SubscriptionCustomer>>,
    /// When its next order is due; `null` when none is (an inactive subscription whose rule
    /// has ended).
    pub next_order_datetime: Option<Timestamp>,
    /// When its next payment falls. Payment follows the order rule: it is set to
    /// `next_order_datetime` at creation, after each order placed and on a change of frequency.
    pub next_payment_datetime: Option<Timestamp>,
    /// The end of the retry wait after a failed order: the order is not tried again before
    /// it. `null` when no wait runs.
    pub next_processing_datetime: Option<Timestamp>,
    /// When Mercer last charged for one of its orders.
    pub last_payment_datetime: Option<Timestamp>,
    /// The order date of its last order placed (or as the client gave it).
    pub last_order_datetime: Option<Timestamp>,
    /// When Mercer last placed one of its orders.
    pub last_processed_datetime: Option<Timestamp>,
    /// When its status last changed (its creation included).
    pub status_changed_at: Option<Timestamp>,
    /// When the subscription was placed, as the client gave it (a checkout's subscription:
    /// when its order was processed).
    pub placed_at: Option<Timestamp>,
    /// When the service stored the subscription.
    pub created_at: Timestamp,
    /// When the subscription last changed.
    pub updated_at: Timestamp,
    /// Its status.
    pub subscription_status: SubscriptionStatus,
    /// The token of the payment method its orders are paid with; `null` until one is given.
    pub payment_method_token: Option<String>,
    /// The payment gateway that takes `payment_method_token` (`payment_details.gateway_name`).
    pub payment_gateway_public_id: Option<String>,
    /// When the payment method expires (a Mercer extension; `null` when unknown).
    pub payment_method_expires_at: Option<PaymentExpiry>,
    /// The payment rule (RFC 5545 text): the order rule, unless Update Subscription gave one.
    pub payment_rrule: String,
    /// `payment_rrule` in plain English, generated from it.
    pub payment_rrule_text: String,
    /// The order rule: RFC 5545 `DTSTART`, `RRULE` and `EXDATE` lines, as given (trimmed,
    /// `\n` line ends).
    pub order_rrule: String,
    /// `order_rrule` in plain English, generated from it, such as `every 2 weeks on Monday`.
    pub order_rrule_text: String,
    /// The currency its orders are charged in.
    #[schema(value_type = String, pattern = "^[A-Z]{3}$")]
    pub charged_currency: CurrencyCode,
    /// The currency of its prices: the shop's unless the client gave one.
    #[schema(value_type = String, pattern = "^[A-Z]{3}$")]
    pub base_currency: CurrencyCode,
    /// What one unit of the base currency is in the charged currency: above 0, and 1 when the
    /// two are the same.
    pub base_to_charged_exchange_rate: f64,
    /// The percent (0 to 100) its orders take off their items.
    pub percent_discount: f64,
    /// A discount code, kept and sent with each of its orders.
    pub discount_code: Option<String>,
    /// Its line items.
    pub line_items: Vec<SubscriptionLineItem>,
    /// Its shipping lines; each order adds their `value_charged`.
    pub shipping_lines: Vec<ShippingLine>,
    /// The address `billing_address_id` names.
    pub billing_address: SubscriptionAddress,
    /// The address `shipping_address_id` names.
    pub shipping_address: SubscriptionAddress,
    /// The code of its last failed order attempt, such as `payment_declined` or
    /// `connector_timeout`; `null` while none has failed.
    pub last_failure_code: Option<String>,
    /// That failure as a sentence.
    pub last_failure_reason: Option<String>,
    /// That failure's details.
    pub last_failure_details: Option<FailureDetails>,
    /// Its latest status log entry; `null` when it has none.
    pub latest_status_log: Option<StatusLog>,
    /// A note on the subscription, kept and shown.
    pub note: Option<String>,
    /// A note sent as the `notes` of each of its orders.
    pub order_note: Option<String>,
    /// The day Mercer resumes the paused subscription by itself (`YYYY-MM-DD`, in the shop's
    /// time zone, as Pause was given it); `null` when it stays paused until resumed, and once
    /// it is not paused.
    #[serde(default)]
    #[schema(value_type = Option<String>, format = Date, example = "2024-07-01")]
    pub resume_on: Option<chrono::NaiveDate>,
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
            id: AddressId(id),
            shop_identifier: "0123456789abcdef0123456789abcdef".into(),
            platform_id: None,
            customer_id: CustomerId(7),
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
            id: SubscriptionId(1),
            shop_id: ShopId(2),
            customer_id: CustomerId(7),
            billing_address_id: AddressId(10),
            shipping_address_id: AddressId(11),
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
                id: LineItemId(3),
                subscription_id: SubscriptionId(1),
                subscription_group_id: Some(GroupId(4)),
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
                    subscription_line_item_id: LineItemId(3),
                    shop_id: ShopId(2),
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
                    line_item_id: LineItemId(3),
                    prepaid_duration: 3,
                    current_recurrence_count: 1,
                    prepaid_continue: Some("auto_renew".into()),
                }),
                line_item_attributes: vec![LineItemAttribute {
                    name: "grind".into(),
                    value: "fine".into(),
                    created_at: now,
                    updated_at: now,
                    subscription_id: SubscriptionId(1),
                    line_item_id: LineItemId(3),
                }],
                created_at: now,
                updated_at: now,
            }],
            shipping_lines: vec![ShippingLine {
                id: 8,
                subscription_id: SubscriptionId(1),
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
                id: StatusLogId(9),
                subscription_status: SubscriptionStatus::Active,
                reason: "created".into(),
                metadata: StatusLogMetadata {
                    user: Actor {
                        kind: ActorType::Api,
                        id: 12,
                        name: "API token 12".into(),
                    },
                    cancellation: None,
                },
                created_at: now,
                subscription_id: SubscriptionId(1),
            }),
            note: None,
            order_note: None,
            resume_on: None,
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
                "resume_on",
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
            id: CustomerId(7),
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
                svc_platform_customer_id: Some(CustomerId(7)),
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
