//! The subscriptions' request bodies: Create and Update Subscription, the actions (skip,
//! quantity, frequency, shipping address, payment method), Update Customer and the customer's
//! addresses. Each is one typed struct (see `kernel::body`) that serde reads, the OpenAPI
//! document shows, and whose validate pass checks it into the use case's input. Every problem
//! is a [`FieldError`] naming its field by its path in the body
//! (`subscription.line_items[0].quantity`), and all of them are reported at once (422).
//!
//! ```json
//! {"customer": {"first_name","last_name","email","phone","notes"},
//!  "subscription": {"idempotency_key","external_id","next_order_datetime","last_order_datetime",
//!    "placed_at","subscription_status","order_rrule","base_currency","charged_currency",
//!    "base_to_charged_exchange_rate",
//!    "line_items": [{"platform_product_id","platform_variant_id","quantity","price","subscription_group_id",
//!                    "prepaid_metadata"?: {"prepaid_duration","current_recurrence_count"?,"prepaid_continue"?}}],
//!    "billing_address": {…}, "shipping_address": {…},
//!    "payment_details": {"gateway_name","gateway_customer_id","gateway_payment_id","expires_at"?},
//!    "discount_code","note","order_note"}}
//! ```

use std::fmt;

use serde::Deserialize;
use serde_json::Value;
use sha2::{Digest, Sha256};
use utoipa::ToSchema;

use crate::access::shop::Shop;
use crate::kernel::body::{
    BodyObject, Check, Field, FieldValue, Mismatch, RawText, TextId, check_email, parse_object,
    read_body, wrong_type,
};
use crate::kernel::error::{DomainError, FieldError, Problems};
use crate::kernel::ids::{AddressId, BillingRuleId, GroupId};
use crate::kernel::money::{
    MAX_EXCHANGE_RATE, MAX_PRICE, MAX_QUANTITY, MIN_EXCHANGE_RATE, is_exchange_rate,
};
use crate::kernel::time::Timestamp;
use crate::subscriptions::groups::GroupReferences;
use crate::subscriptions::recurrence::{OrderSchedule, ShopZone};
use crate::subscriptions::resources::{Cents, CurrencyCode, PaymentExpiry, SubscriptionStatus};

/// At most this many line items in one subscription.
pub(crate) const MAX_LINE_ITEMS: usize = 250;

/// `customer` of the body: found by its email, or created.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CustomerInput {
    /// The customer's email address (required, checked): the shop's live customer with it is
    /// the subscription's, compared without case.
    pub email: String,
    /// The first name of a customer created here.
    pub first_name: Option<String>,
    /// The last name of a customer created here.
    pub last_name: Option<String>,
    /// The phone number of a customer created here.
    pub phone: Option<String>,
    /// The notes of a customer created here.
    pub notes: Option<String>,
}

/// A billing or shipping address of the body (the create fields).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AddressInput {
    /// The recipient's first name.
    pub first_name: Option<String>,
    /// The recipient's last name.
    pub last_name: Option<String>,
    /// The company name.
    pub company: Option<String>,
    /// A phone number at the address.
    pub phone: Option<String>,
    /// The first line of the street address (required).
    pub street1: String,
    /// The second line of the street address.
    pub street2: Option<String>,
    /// The city (required).
    pub city: String,
    /// The province or state, by name.
    pub province: Option<String>,
    /// The province or state, by code.
    pub province_code: Option<String>,
    /// The country, by name.
    pub country: Option<String>,
    /// ISO 3166-1 alpha-2, upper case.
    pub country_code: String,
    /// The postal code.
    pub zip: Option<String>,
}

/// What a line item's body says of its product (`title`, `product_name`, `variant_name`,
/// `sku`, `image`, `grams`, `weight`, `weight_unit`, `requires_shipping`, `taxable`): kept when
/// the catalogue does not have the variant; the catalogue's values win when it does.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LineItemDetails {
    /// The line item's title.
    pub title: Option<String>,
    /// The product's name.
    pub product_name: Option<String>,
    /// The variant's name.
    pub variant_name: Option<String>,
    /// The variant's SKU.
    pub sku: Option<String>,
    /// The URL of the item's image.
    pub image: Option<String>,
    /// The item's weight in grams, at least 0.
    pub grams: Option<i64>,
    /// The item's weight in `weight_unit`, at least 0.
    pub weight: Option<f64>,
    /// The unit of `weight`.
    pub weight_unit: Option<String>,
    /// Whether the item is shipped; absent, it is.
    pub requires_shipping: Option<bool>,
    /// Whether the item is taxed; absent, it is.
    pub taxable: Option<bool>,
}

/// How a line item discount takes off its unit price.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum DiscountValue {
    /// This percent of the unit price (0 to 100).
    Percentage(f64),
    /// This many cents of the base currency, off each unit.
    Fixed(Cents),
}

/// A line item's discount as Create Subscription takes it (a Mercer extension of the subscription API's
/// line item `discounts`): `{"discount_type": "percentage", "percentage_value"}` or
/// `{"discount_type": "fixed_amount", "fixed_value"}`, with an optional `description`.
#[derive(Debug, Clone, PartialEq)]
pub struct DiscountInput {
    /// What the discount takes off each unit.
    pub value: DiscountValue,
    /// The discount's description, kept and shown.
    pub description: Option<String>,
}

/// A shipping line as Create and Update Subscription take it: `name` (required), `code`,
/// `tag`, `price` (cents of the base currency, at least 0).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShippingLineInput {
    /// The shipping method's name (required).
    pub name: String,
    /// The shipping method's code.
    pub code: Option<String>,
    /// A tag of the line.
    pub tag: Option<String>,
    /// The price of the shipping, in cents of the base currency (0 when left out).
    pub price: Cents,
}

/// Most shipping lines one subscription keeps.
pub(crate) const MAX_SHIPPING_LINES: usize = 20;
/// Most discounts one line item keeps.
pub(crate) const MAX_LINE_ITEM_DISCOUNTS: usize = 10;

/// A line item of the Create Subscription body, checked.
#[derive(Debug, Clone, PartialEq)]
pub struct LineItemInput {
    /// The product's platform id, as a string (the body may give an integer).
    pub platform_product_id: String,
    /// The variant's platform id, as a string (the body may give an integer).
    pub platform_variant_id: String,
    /// How many units each order has, at least 1.
    pub quantity: i64,
    /// The unit price in the base currency.
    pub price: Cents,
    /// The subscription group the line item is sold under (the service's integer); it must be
    /// a group of the shop.
    pub subscription_group_id: Option<GroupId>,
    /// The group's billing rule the line item's `interval_id` names.
    pub subscription_group_billing_rules_id: Option<BillingRuleId>,
    /// `prepaid_metadata`, for a line item one payment covers several orders of.
    pub prepaid: Option<PrepaidInput>,
    /// `line_item_attributes` as (name, value) pairs, in the order given.
    pub attributes: Vec<(String, String)>,
    /// What the body says of the product, for a variant the catalogue does not have.
    pub details: LineItemDetails,
    /// `discounts`, taken off the unit price in this order (at most 10).
    pub discounts: Vec<DiscountInput>,
}

/// Most `line_item_attributes` one line item keeps.
pub(crate) const MAX_LINE_ITEM_ATTRIBUTES: usize = 50;

/// Most orders one prepaid payment may cover.
pub(crate) const MAX_PREPAID_DURATION: i64 = 1_000;

/// A line item's `prepaid_metadata` (a Mercer extension of the create body): one payment covers
/// `prepaid_duration` orders; `current_recurrence_count` of them are placed already.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrepaidInput {
    /// How many orders one payment covers (1 to 1,000; required).
    pub prepaid_duration: i64,
    /// How many orders of the current period were placed already (0 to `prepaid_duration`;
    /// 0 when left out).
    pub current_recurrence_count: i64,
    /// Kept and shown as given; Mercer does not interpret it.
    pub prepaid_continue: Option<String>,
}

/// `payment_details`: kept with the subscription. `gateway_payment_id` is the payment method
/// token: it is shown only as `payment_method_token`, and `gateway_name` as
/// `payment_gateway_public_id`; `gateway_customer_id` is never shown.
#[derive(Clone, PartialEq, Eq)]
pub struct PaymentDetails {
    /// The payment gateway (required): shown as `payment_gateway_public_id`.
    pub gateway_name: String,
    /// The customer's id at the gateway: kept, never shown.
    pub gateway_customer_id: Option<String>,
    /// Integrations that keep the method at their gateway by customer send none: the subscription then has no payment method token until one is given.
    pub gateway_payment_id: Option<String>,
    /// When the method expires (a Mercer extension).
    pub expires_at: Option<PaymentExpiry>,
}

impl fmt::Debug for PaymentDetails {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PaymentDetails")
            .field("gateway_name", &self.gateway_name)
            .field(
                "gateway_customer_id",
                &self.gateway_customer_id.as_ref().map(|_| "[redacted]"),
            )
            .field("gateway_payment_id", &"[redacted]")
            .field("expires_at", &self.expires_at)
            .finish()
    }
}

/// A checked Create Subscription body.
#[derive(Debug, Clone)]
pub struct NewSubscription {
    /// The customer to find by email, or create.
    pub customer: CustomerInput,
    /// The client's key for the request: the same key again is the same subscription.
    pub idempotency_key: Option<String>,
    /// The client's own reference for the subscription.
    pub external_id: Option<String>,
    /// The status given, else `scheduled` for a rule that starts later and `active`
    /// otherwise; never `processing`.
    pub status: SubscriptionStatus,
    /// The checked order rule: the body's `order_rrule`, or the one its groups' billing rule
    /// gives.
    pub schedule: OrderSchedule,
    /// `order_rrule_text`, and `payment_rrule_text` (payment follows the order rule).
    pub order_rrule_text: String,
    /// Given, or the rule's first date from now on; `None` only for an inactive subscription
    /// whose rule has ended.
    pub next_order_datetime: Option<Timestamp>,
    /// The date of the subscription's last order, as given (an imported subscription's).
    pub last_order_datetime: Option<Timestamp>,
    /// When the subscription was placed, as given.
    pub placed_at: Option<Timestamp>,
    /// The currency of the prices: given, else the shop's.
    pub base_currency: CurrencyCode,
    /// The currency orders are charged in: given, else `base_currency`.
    pub charged_currency: CurrencyCode,
    /// What one unit of the base currency is in the charged currency: given (above 0, and 1
    /// when the currencies are the same), else 1.
    pub base_to_charged_exchange_rate: f64,
    /// The line items, 1 to 250, in the order given.
    pub line_items: Vec<LineItemInput>,
    /// The address to bill: the shipping address when the body gives none.
    pub billing_address: AddressInput,
    /// The address orders ship to (required).
    pub shipping_address: AddressInput,
    /// The payment method, when given.
    pub payment_details: Option<PaymentDetails>,
    /// A discount code, kept and sent with each order.
    pub discount_code: Option<String>,
    /// A note on the subscription, kept and shown.
    pub note: Option<String>,
    /// A note sent as the `notes` of each order.
    pub order_note: Option<String>,
    /// The shipping lines, at most 20 (none when left out).
    pub shipping_lines: Vec<ShippingLineInput>,
    /// The body's `percent_discount`, else its first group's, else 0.
    pub percent_discount: f64,
    /// SHA-256 (hex) of the body with its object keys sorted: a repeated `idempotency_key` with
    /// the same fingerprint is the same request (200 with the first subscription),
    /// with another one a conflict (409).
    pub fingerprint: String,
}

/// A price as written: a whole number of cents, or its decimal text. It is kept even out of
/// range, so that the range is what is reported; `None` is a whole number past what an `i64`
/// holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WholeCents(pub Option<i64>);

impl FieldValue for WholeCents {
    fn read(value: Value) -> Field<Self> {
        match &value {
            Value::String(text) => match text.trim().parse::<i64>() {
                Ok(cents) => Field::Given(WholeCents(Some(cents))),
                Err(_) => Field::Invalid(wrong_type("an integer number of cents")),
            },
            Value::Number(number) if number.is_i64() || number.is_u64() => {
                Field::Given(WholeCents(number.as_i64()))
            }
            _ => Field::Invalid(wrong_type("an integer number of cents")),
        }
    }
}

/// A year and month, `YYYY-MM` (a payment method's expiry); blank text is not one.
impl FieldValue for PaymentExpiry {
    fn read(value: Value) -> Field<Self> {
        let read = match &value {
            Value::String(text) => PaymentExpiry::parse(text.trim()),
            _ => None,
        };
        read.map_or(
            Field::Invalid(Mismatch {
                code: "invalid_value",
                expected: "a year and month such as 2027-03",
            }),
            Field::Given,
        )
    }
}

/// Text as a field holds it when the client writes `text` (trimmed; blank is
/// [`Field::Blank`]): for bodies built in Rust, read as the API reads them.
pub fn text_field(text: impl Into<String>) -> Field<String> {
    String::read(Value::String(text.into()))
}

/// A platform id as a field holds it when the client writes `text` (see [`text_field`]).
pub fn id_field(text: impl Into<String>) -> Field<TextId> {
    TextId::read(Value::String(text.into()))
}

/// A time as a field holds it when the client writes it: one RFC 3339 cannot write (past the
/// year 9999) does not read back, as its text would not.
pub fn time_field(time: Timestamp) -> Field<Timestamp> {
    if time.is_writable() {
        Field::Given(time)
    } else {
        Timestamp::read(Value::String(time.to_rfc3339()))
    }
}

/// An expiry as a field holds it when the client writes `text` (`YYYY-MM`).
pub fn expiry_field(text: impl Into<String>) -> Field<PaymentExpiry> {
    PaymentExpiry::read(Value::String(text.into()))
}

/// `Some` as a given value, `None` as null.
pub fn given_or_null<T>(value: Option<T>) -> Field<T> {
    value.map_or(Field::Null, Field::Given)
}

/// Why a price is refused: its range.
fn price_range(field: &str) -> String {
    format!(
        "{field} must be a price from 0 to {} minor units (cents)",
        MAX_PRICE.0
    )
}

/// Why an exchange rate is refused: its range.
fn rate_range(field: &str) -> String {
    format!("{field} must be a number from {MIN_EXCHANGE_RATE} to {MAX_EXCHANGE_RATE}")
}

/// An exchange rate given: a number from [`MIN_EXCHANGE_RATE`] to [`MAX_EXCHANGE_RATE`].
fn exchange_rate(check: &mut Check<'_>, given: Field<f64>) -> Option<f64> {
    let name = "base_to_charged_exchange_rate";
    let rate = check.optional(name, given)?;
    if is_exchange_rate(rate) {
        Some(rate)
    } else {
        check.problem(name, "out_of_range", rate_range);
        None
    }
}

/// Cents of at least 0, when given.
fn cents(check: &mut Check<'_>, name: &str, given: Field<i64>) -> Option<Cents> {
    let amount = check.optional(name, given)?;
    if amount < 0 {
        check.problem(name, "out_of_range", |field| {
            format!("{field} must be an amount of at least 0, in cents")
        });
        return None;
    }
    Some(Cents(amount))
}

/// A currency code given: `Some(None)` when left out or blank (a default applies), `None`
/// when wrong (its problem recorded).
fn currency(
    check: &mut Check<'_>,
    name: &str,
    given: Field<String>,
) -> Option<Option<CurrencyCode>> {
    let text = match given {
        Field::Absent | Field::Null | Field::Blank => return Some(None),
        given => check.optional(name, given)?,
    };
    match CurrencyCode::parse(&text) {
        Some(code) => Some(Some(code)),
        None => {
            check.problem(name, "invalid_currency", |field| {
                format!("{field} must be an ISO 4217 currency code such as USD, not {text:?}")
            });
            None
        }
    }
}

/// `subscription_status` given: `Some(None)` when left out or blank (the rule decides), `None`
/// when wrong (its problem recorded).
fn status(check: &mut Check<'_>, given: Field<String>) -> Option<Option<SubscriptionStatus>> {
    let name = "subscription_status";
    let text = match given {
        Field::Absent | Field::Null | Field::Blank => return Some(None),
        given => check.optional(name, given)?,
    };
    match SubscriptionStatus::parse(&text) {
        Some(SubscriptionStatus::Processing) => {
            check.problem(name, "invalid_value", |field| {
                format!(
                    "{field} cannot be processing: only Mercer sets it, while it places an order"
                )
            });
            None
        }
        Some(status) => Some(Some(status)),
        None => {
            check.problem(name, "invalid_value", |field| {
                format!("{field} must be one of active, inactive, scheduled, paused, not {text:?}")
            });
            None
        }
    }
}

/// An order or payment rule given, checked as at creation (times without a zone are `zone`'s).
fn rule(
    check: &mut Check<'_>,
    name: &str,
    given: Field<RawText>,
    zone: ShopZone,
) -> Option<OrderSchedule> {
    let RawText(text) = check.optional(name, given)?;
    let field = check.field(name);
    check.check(OrderSchedule::parse(&text, zone, &field))
}

/// The fields of an address a body gives (the create fields): a subscription's
/// billing or shipping address, or a customer's address.
#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct SubscriptionAddressFields {
    /// The recipient's first name.
    #[serde(default)]
    #[schema(value_type = Option<String>, example = "Ada")]
    pub first_name: Field<String>,
    /// The recipient's last name.
    #[serde(default)]
    #[schema(value_type = Option<String>, example = "Lovelace")]
    pub last_name: Field<String>,
    /// The company name.
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub company: Field<String>,
    /// A phone number at the address.
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub phone: Field<String>,
    /// The first line of the street address (not blank).
    #[serde(default)]
    #[schema(value_type = String, required = true, example = "12 Market Street", min_length = 1)]
    pub street1: Field<String>,
    /// The second line of the street address.
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub street2: Field<String>,
    /// The city (not blank).
    #[serde(default)]
    #[schema(value_type = String, required = true, example = "Portland", min_length = 1)]
    pub city: Field<String>,
    /// The province or state, by name.
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub province: Field<String>,
    /// The province or state, by code.
    #[serde(default)]
    #[schema(value_type = Option<String>, example = "OR")]
    pub province_code: Field<String>,
    /// The country, by name.
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub country: Field<String>,
    /// The country's ISO 3166-1 alpha-2 code, such as `CA` (read in any case, kept upper case).
    #[serde(default)]
    #[schema(value_type = String, required = true, example = "US", pattern = "^[A-Za-z]{2}$")]
    pub country_code: Field<String>,
    /// The postal code.
    #[serde(default)]
    #[schema(value_type = Option<String>, example = "97205")]
    pub zip: Field<String>,
}
impl BodyObject for SubscriptionAddressFields {}

impl SubscriptionAddressFields {
    fn validate(self, check: &mut Check<'_>) -> Option<AddressInput> {
        let first_name = check.optional("first_name", self.first_name);
        let last_name = check.optional("last_name", self.last_name);
        let company = check.optional("company", self.company);
        let phone = check.optional("phone", self.phone);
        let street1 = check.required("street1", self.street1);
        let street2 = check.optional("street2", self.street2);
        let city = check.required("city", self.city);
        let province = check.optional("province", self.province);
        let province_code = check.optional("province_code", self.province_code);
        let country = check.optional("country", self.country);
        let country_code = check
            .required("country_code", self.country_code)
            .and_then(|code| {
                let upper = code.to_ascii_uppercase();
                if upper.len() == 2 && upper.bytes().all(|b| b.is_ascii_uppercase()) {
                    Some(upper)
                } else {
                    check.problem("country_code", "invalid_value", |field| {
                        format!("{field} must be an ISO 3166-1 alpha-2 code such as CA")
                    });
                    None
                }
            });
        let zip = check.optional("zip", self.zip);
        Some(AddressInput {
            first_name,
            last_name,
            company,
            phone,
            street1: street1?,
            street2,
            city: city?,
            province,
            province_code,
            country,
            country_code: country_code?,
            zip,
        })
    }

    /// The address at field `name` of `check`'s object, when given (an address that is not an
    /// object is its problem).
    fn at(check: &mut Check<'_>, name: &str, given: Field<Self>) -> Option<AddressInput> {
        check
            .optional(name, given)
            .and_then(|fields| fields.validate(&mut check.nested(name)))
    }
}

/// The body of Create and Update Customer Address.
#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct SubscriptionCustomerAddressRequest {
    /// The address's fields.
    #[serde(default)]
    #[schema(value_type = SubscriptionCustomerAddressFields, required = true)]
    pub customer_address: Field<SubscriptionCustomerAddressFields>,
}
impl BodyObject for SubscriptionCustomerAddressRequest {}

/// A customer's address as Create and Update Customer Address take it.
#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct SubscriptionCustomerAddressFields {
    /// The recipient's first name.
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub first_name: Field<String>,
    /// The recipient's last name.
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub last_name: Field<String>,
    /// The company name.
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub company: Field<String>,
    /// A phone number at the address.
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub phone: Field<String>,
    /// The first line of the street address (not blank).
    #[serde(default)]
    #[schema(value_type = String, required = true, min_length = 1)]
    pub street1: Field<String>,
    /// The second line of the street address.
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub street2: Field<String>,
    /// The city (not blank).
    #[serde(default)]
    #[schema(value_type = String, required = true, min_length = 1)]
    pub city: Field<String>,
    /// The province or state, by name.
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub province: Field<String>,
    /// The province or state, by code.
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub province_code: Field<String>,
    /// The country, by name.
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub country: Field<String>,
    /// The country's ISO 3166-1 alpha-2 code, such as `CA` (read in any case, kept upper case).
    #[serde(default)]
    #[schema(value_type = String, required = true, pattern = "^[A-Za-z]{2}$")]
    pub country_code: Field<String>,
    /// The postal code.
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub zip: Field<String>,
    /// Whether it is the customer's default address. Left out, a new address is the default
    /// when the customer has none, and an update keeps what the address was.
    #[serde(default)]
    #[schema(value_type = Option<bool>)]
    pub is_default: Field<bool>,
}
impl BodyObject for SubscriptionCustomerAddressFields {}

impl SubscriptionCustomerAddressFields {
    /// The address's own fields, and `is_default`.
    fn split(self) -> (SubscriptionAddressFields, Field<bool>) {
        let address = SubscriptionAddressFields {
            first_name: self.first_name,
            last_name: self.last_name,
            company: self.company,
            phone: self.phone,
            street1: self.street1,
            street2: self.street2,
            city: self.city,
            province: self.province,
            province_code: self.province_code,
            country: self.country,
            country_code: self.country_code,
            zip: self.zip,
        };
        (address, self.is_default)
    }
}

/// Create / Update Customer Address: `{"customer_address": {…, is_default}}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AddressBody {
    /// The address's fields.
    pub address: AddressInput,
    /// Absent: a new address is the default when the customer has none; an update keeps it.
    pub is_default: Option<bool>,
}

/// Reads a Create / Update Customer Address body; every problem is a 422 on its path in
/// `customer_address`.
pub fn parse_customer_address(body: &Value) -> Result<AddressBody, DomainError> {
    read_body::<SubscriptionCustomerAddressRequest, _>(body, |body, check| {
        let fields = check.required("customer_address", body.customer_address)?;
        let mut check = check.nested("customer_address");
        let (address, is_default) = fields.split();
        let is_default = match is_default {
            Field::Given(flag) => Some(flag),
            Field::Invalid(_) => {
                check.problem("is_default", "invalid_type", |field| {
                    format!("{field} must be true or false")
                });
                None
            }
            Field::Absent | Field::Null | Field::Blank => None,
        };
        let address = address.validate(&mut check)?;
        Some(AddressBody {
            address,
            is_default,
        })
    })
}

/// The fields of a customer that Update Customer (and Update Subscription's `customer`)
/// changes: those given; the others stay. Blank text clears a field (but `email`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CustomerUpdate {
    /// Given: the new email address (checked); it cannot be cleared.
    pub email: Option<String>,
    /// Given: the new first name; `Some(None)` clears it (null or blank).
    pub first_name: Option<Option<String>>,
    /// Given: the new last name; `Some(None)` clears it (null or blank).
    pub last_name: Option<Option<String>>,
    /// Given: the new phone number; `Some(None)` clears it (null or blank).
    pub phone: Option<Option<String>>,
    /// Given: the new notes; `Some(None)` clears them (null or blank).
    pub notes: Option<Option<String>>,
}

/// The body of Update Customer: the fields given change, the others stay.
#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct SubscriptionCustomerUpdateRequest {
    /// The customer's fields to change.
    #[serde(default)]
    #[schema(value_type = SubscriptionCustomerUpdateFields, required = true)]
    pub customer: Field<SubscriptionCustomerUpdateFields>,
}
impl BodyObject for SubscriptionCustomerUpdateRequest {}

/// A customer's fields to change (Update Customer, and Update Subscription's `customer`):
/// those given; null or blank text clears a field (but `email`, which cannot be cleared).
#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct SubscriptionCustomerUpdateFields {
    /// The customer's new first name.
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub first_name: Field<String>,
    /// The customer's new last name.
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub last_name: Field<String>,
    /// The customer's new phone number.
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub phone: Field<String>,
    /// The customer's new email address (checked).
    #[serde(default)]
    #[schema(value_type = Option<String>, format = Email)]
    pub email: Field<String>,
    /// The customer's new notes.
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub notes: Field<String>,
}
impl BodyObject for SubscriptionCustomerUpdateFields {}

impl SubscriptionCustomerUpdateFields {
    fn validate(self, check: &mut Check<'_>) -> CustomerUpdate {
        // An email given must be one: it cannot be cleared.
        let email = match self.email {
            Field::Absent | Field::Null => None,
            given => {
                let email = check.required("email", given);
                if let Some(email) = &email {
                    let field = check.field("email");
                    check.check(check_email(field, email));
                }
                email
            }
        };
        CustomerUpdate {
            email,
            first_name: check.settable("first_name", self.first_name),
            last_name: check.settable("last_name", self.last_name),
            phone: check.settable("phone", self.phone),
            notes: check.settable("notes", self.notes),
        }
    }
}

/// Update Customer: `{"customer": {first_name, last_name, phone, email, notes}}`.
pub fn parse_customer_update(body: &Value) -> Result<CustomerUpdate, DomainError> {
    read_body::<SubscriptionCustomerUpdateRequest, _>(body, |body, check| {
        let fields = check.required("customer", body.customer)?;
        Some(fields.validate(&mut check.nested("customer")))
    })
}

/// The body of Skip: the order date to skip (its day in the shop's zone counts).
#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct SubscriptionSkipRequest {
    /// The order date to skip.
    #[serde(default)]
    #[schema(value_type = Timestamp, required = true)]
    pub order_datetime: Field<Timestamp>,
}
impl BodyObject for SubscriptionSkipRequest {}

/// Skip a ship date: `{"order_datetime"}`, the date to skip (its day in the shop's zone counts;
/// see `recurrence::plan_skip`).
pub fn parse_skip(body: &Value) -> Result<Timestamp, DomainError> {
    read_body::<SubscriptionSkipRequest, _>(body, |body, check| {
        check.required("order_datetime", body.order_datetime)
    })
}

/// The body of Change Quantity.
#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct SubscriptionQuantityRequest {
    /// The line item's new quantity, 1 to 10000.
    #[serde(default)]
    #[schema(value_type = i64, required = true, minimum = 1, maximum = 10000)]
    pub quantity: Field<i64>,
}
impl BodyObject for SubscriptionQuantityRequest {}

/// A line item's quantity: required, from 1 to [`MAX_QUANTITY`].
fn quantity(check: &mut Check<'_>, given: Field<i64>) -> Option<i64> {
    let quantity = check.required("quantity", given)?;
    if (1..=MAX_QUANTITY).contains(&quantity) {
        Some(quantity)
    } else {
        check.problem("quantity", "out_of_range", |field| {
            format!("{field} must be from 1 to {MAX_QUANTITY}")
        });
        None
    }
}

/// Change quantity: `{"quantity"}`, from 1 to 10,000.
pub fn parse_quantity(body: &Value) -> Result<i64, DomainError> {
    read_body::<SubscriptionQuantityRequest, _>(body, |body, check| quantity(check, body.quantity))
}

/// The body of Change Frequency.
#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct SubscriptionFrequencyRequest {
    /// The new order rule, checked as at creation.
    #[serde(default)]
    #[schema(value_type = String, required = true)]
    pub order_rrule: Field<RawText>,
}
impl BodyObject for SubscriptionFrequencyRequest {}

/// Change frequency: `{"order_rrule"}`, checked as at creation.
pub fn parse_frequency(body: &Value, shop: &Shop) -> Result<OrderSchedule, DomainError> {
    let zone = ShopZone::of_shop(&shop.timezone);
    read_body::<SubscriptionFrequencyRequest, _>(body, |body, check| {
        let RawText(text) = check.required("order_rrule", body.order_rrule)?;
        check.check(OrderSchedule::parse(&text, zone, "order_rrule"))
    })
}

/// Change shipping address: a new address, or one of the customer's by id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ShippingAddressChange {
    /// `{"shipping_address": {…}}`: a new address, added to the customer.
    New(Box<AddressInput>),
    /// `{"address_id"}`: one of the customer's addresses.
    Existing {
        /// The address's id (the service's integer).
        address_id: AddressId,
    },
}

/// The body of Change Shipping Address: exactly one of `shipping_address` (a new address,
/// added to the customer) and `address_id` (one of the customer's).
#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct SubscriptionShippingAddressRequest {
    /// A new address of the customer.
    #[serde(default)]
    #[schema(value_type = Option<SubscriptionAddressFields>)]
    pub shipping_address: Field<SubscriptionAddressFields>,
    /// The id of one of the customer's addresses.
    #[serde(default)]
    #[schema(value_type = Option<i64>)]
    pub address_id: Field<i64>,
}
impl BodyObject for SubscriptionShippingAddressRequest {}

/// `{"shipping_address": {…}}` or `{"address_id"}`: exactly one of them.
pub fn parse_shipping_address_change(body: &Value) -> Result<ShippingAddressChange, DomainError> {
    read_body::<SubscriptionShippingAddressRequest, _>(body, |body, check| {
        match (body.shipping_address.is_given(), body.address_id.is_given()) {
            (true, true) => {
                check.push(FieldError::new(
                    check.field("address_id"),
                    "invalid_value",
                    "give shipping_address or address_id, not both",
                ));
                None
            }
            (false, false) => {
                check.push(FieldError::required(check.field("shipping_address")));
                None
            }
            (true, false) => {
                SubscriptionAddressFields::at(check, "shipping_address", body.shipping_address)
                    .map(|address| ShippingAddressChange::New(Box::new(address)))
            }
            (false, true) => check
                .optional("address_id", body.address_id)
                .map(|address_id| ShippingAddressChange::Existing {
                    address_id: AddressId(address_id),
                }),
        }
    })
}

/// Change payment method: the new token and gateway (the token is never shown but as the
/// subscription's `payment_method_token`).
#[derive(Clone, PartialEq, Eq)]
pub struct PaymentMethodChange {
    /// The new payment method's token (required).
    pub payment_method_token: String,
    /// The gateway that takes the token (required).
    pub payment_gateway_public_id: String,
    /// When the new method expires (a Mercer extension).
    pub expires_at: Option<PaymentExpiry>,
}

impl fmt::Debug for PaymentMethodChange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PaymentMethodChange")
            .field("payment_method_token", &"[redacted]")
            .field("payment_gateway_public_id", &self.payment_gateway_public_id)
            .field("expires_at", &self.expires_at)
            .finish()
    }
}

/// The body of Change Payment Method.
#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct SubscriptionPaymentMethodRequest {
    /// The new payment method's token (not blank).
    #[serde(default)]
    #[schema(value_type = String, required = true, min_length = 1)]
    pub payment_method_token: Field<String>,
    /// The gateway that takes the token (not blank).
    #[serde(default)]
    #[schema(value_type = String, required = true, min_length = 1)]
    pub payment_gateway_public_id: Field<String>,
    /// When the new method expires.
    #[serde(default)]
    #[schema(value_type = Option<PaymentExpiry>)]
    pub expires_at: Field<PaymentExpiry>,
}
impl BodyObject for SubscriptionPaymentMethodRequest {}

/// `{"payment_method_token","payment_gateway_public_id","expires_at"?}`, the first two
/// required; `expires_at` is `YYYY-MM`.
pub fn parse_payment_method_change(body: &Value) -> Result<PaymentMethodChange, DomainError> {
    read_body::<SubscriptionPaymentMethodRequest, _>(body, |body, check| {
        let token = check.required("payment_method_token", body.payment_method_token);
        let gateway = check.required("payment_gateway_public_id", body.payment_gateway_public_id);
        let expires_wrong = matches!(body.expires_at, Field::Invalid(_));
        let expires_at = check.optional("expires_at", body.expires_at);
        if expires_wrong {
            return None;
        }
        Some(PaymentMethodChange {
            payment_method_token: token?,
            payment_gateway_public_id: gateway?,
            expires_at,
        })
    })
}

/// The body of Create Subscription.
#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct SubscriptionCreateRequest {
    /// The subscription's customer: the shop's live customer with this email, or a new one.
    #[serde(default)]
    #[schema(value_type = SubscriptionCreateCustomerFields, required = true)]
    pub customer: Field<SubscriptionCreateCustomerFields>,
    /// The subscription.
    #[serde(default)]
    #[schema(value_type = SubscriptionCreateFields, required = true)]
    pub subscription: Field<SubscriptionCreateFields>,
}
impl BodyObject for SubscriptionCreateRequest {}

/// `customer` of Create Subscription: found by its email (compared without case), or created
/// with these fields.
#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct SubscriptionCreateCustomerFields {
    /// The customer's email address (checked).
    #[serde(default)]
    #[schema(value_type = String, required = true, example = "ada@example.com", format = Email)]
    pub email: Field<String>,
    /// The first name of a customer created here.
    #[serde(default)]
    #[schema(value_type = Option<String>, example = "Ada")]
    pub first_name: Field<String>,
    /// The last name of a customer created here.
    #[serde(default)]
    #[schema(value_type = Option<String>, example = "Lovelace")]
    pub last_name: Field<String>,
    /// The phone number of a customer created here.
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub phone: Field<String>,
    /// The notes of a customer created here.
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub notes: Field<String>,
}
impl BodyObject for SubscriptionCreateCustomerFields {}

impl SubscriptionCreateCustomerFields {
    fn validate(self, check: &mut Check<'_>) -> Option<CustomerInput> {
        let email = check.required("email", self.email);
        if let Some(email) = &email {
            let field = check.field("email");
            check.check(check_email(field, email));
        }
        let first_name = check.optional("first_name", self.first_name);
        let last_name = check.optional("last_name", self.last_name);
        let phone = check.optional("phone", self.phone);
        let notes = check.optional("notes", self.notes);
        Some(CustomerInput {
            email: email?,
            first_name,
            last_name,
            phone,
            notes,
        })
    }
}

/// A status a client may give a subscription: any but `processing`, which only Mercer sets.
#[derive(ToSchema)]
#[schema(rename_all = "snake_case")]
pub enum SettableSubscriptionStatus {
    /// Live: its orders are placed when they come due.
    Active,
    /// Ended.
    Inactive,
    /// Waiting for its first order.
    Scheduled,
    /// Paused: no order is placed until it is resumed.
    Paused,
}

/// `subscription` of Create Subscription.
#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct SubscriptionCreateFields {
    /// The client's key for the request: the same key and body again answer the first
    /// subscription; the same key with another body is 409.
    #[serde(default)]
    #[schema(value_type = Option<String>, example = "2b1f6c1e-order-42")]
    pub idempotency_key: Field<String>,
    /// The client's own reference for the subscription.
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub external_id: Field<String>,
    /// When the first order is due; else the rule's first date from now.
    #[serde(default)]
    #[schema(value_type = Option<Timestamp>)]
    pub next_order_datetime: Field<Timestamp>,
    /// The date of the subscription's last order (an imported subscription's).
    #[serde(default)]
    #[schema(value_type = Option<Timestamp>)]
    pub last_order_datetime: Field<Timestamp>,
    /// When the subscription was placed.
    #[serde(default)]
    #[schema(value_type = Option<Timestamp>)]
    pub placed_at: Field<Timestamp>,
    /// The status; else `scheduled` for a rule that starts later and `active` otherwise.
    #[serde(default)]
    #[schema(value_type = Option<SettableSubscriptionStatus>)]
    pub subscription_status: Field<String>,
    /// The order rule: RFC 5545 `DTSTART`, `RRULE` and `EXDATE` lines (times without a zone
    /// are the shop's). Required unless a line item names a billing rule (`interval_id`), whose
    /// RRULE then starts at `next_order_datetime` (else now).
    #[serde(default)]
    #[schema(
        value_type = Option<String>,
        example = "DTSTART:20250106T090000\nRRULE:FREQ=WEEKLY;INTERVAL=2"
    )]
    pub order_rrule: Field<RawText>,
    /// The ISO 4217 currency of the prices; the shop's by default.
    #[serde(default)]
    #[schema(value_type = Option<String>, example = "USD", pattern = "^[A-Z]{3}$")]
    pub base_currency: Field<String>,
    /// The ISO 4217 currency orders are charged in; `base_currency` by default.
    #[serde(default)]
    #[schema(value_type = Option<String>, pattern = "^[A-Z]{3}$")]
    pub charged_currency: Field<String>,
    /// What one unit of the base currency is in the charged currency: 0.000001 to 1000000, 1
    /// (the default) when the currencies are the same, and required when they differ.
    #[serde(default)]
    #[schema(value_type = Option<f64>, minimum = 0.000001, maximum = 1000000)]
    pub base_to_charged_exchange_rate: Field<f64>,
    /// The percent (0 to 100) orders take off their items; else the first line item's group's,
    /// else 0.
    #[serde(default)]
    #[schema(value_type = Option<f64>, minimum = 0, maximum = 100)]
    pub percent_discount: Field<f64>,
    /// The line items, 1 to 250.
    #[serde(default)]
    #[schema(
        value_type = Vec<SubscriptionLineItemFields>,
        required = true,
        min_items = 1,
        max_items = 250
    )]
    pub line_items: Field<Vec<Field<SubscriptionLineItemFields>>>,
    /// The address to bill; the shipping address when left out.
    #[serde(default)]
    #[schema(value_type = Option<SubscriptionAddressFields>)]
    pub billing_address: Field<SubscriptionAddressFields>,
    /// The address orders ship to.
    #[serde(default)]
    #[schema(value_type = SubscriptionAddressFields, required = true)]
    pub shipping_address: Field<SubscriptionAddressFields>,
    /// The payment method.
    #[serde(default)]
    #[schema(value_type = Option<SubscriptionPaymentDetailsFields>)]
    pub payment_details: Field<SubscriptionPaymentDetailsFields>,
    /// A discount code, kept and sent with each order.
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub discount_code: Field<String>,
    /// A note on the subscription, kept and shown.
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub note: Field<String>,
    /// A note sent as the `notes` of each order.
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub order_note: Field<String>,
    /// The shipping lines, at most 20.
    #[serde(default)]
    #[schema(value_type = Option<Vec<SubscriptionShippingLineFields>>, max_items = 20)]
    pub shipping_lines: Field<Vec<Field<SubscriptionShippingLineFields>>>,
}
impl BodyObject for SubscriptionCreateFields {}

/// A line item of Create Subscription. The product fields (`title` to `taxable`) are kept when
/// the catalogue does not have the variant; the catalogue's values win when it does.
#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct SubscriptionLineItemFields {
    /// The product's platform id.
    #[serde(default)]
    #[schema(value_type = String, required = true, example = "1001")]
    pub platform_product_id: Field<TextId>,
    /// The variant's platform id.
    #[serde(default)]
    #[schema(value_type = String, required = true, example = "2001")]
    pub platform_variant_id: Field<TextId>,
    /// How many units each order has, 1 to 10000.
    #[serde(default)]
    #[schema(value_type = i64, required = true, example = 1, minimum = 1, maximum = 10000)]
    pub quantity: Field<i64>,
    /// The unit price, in cents of the base currency: 0 to 100000000.
    #[serde(default)]
    #[schema(
        value_type = i64,
        required = true,
        example = 2500,
        minimum = 0,
        maximum = 100000000
    )]
    pub price: Field<WholeCents>,
    /// The subscription group the line item is sold under: a group of the shop.
    #[serde(default)]
    #[schema(value_type = Option<i64>)]
    pub subscription_group_id: Field<i64>,
    /// One of that group's billing rules (needs `subscription_group_id`).
    #[serde(default)]
    #[schema(value_type = Option<i64>)]
    pub interval_id: Field<i64>,
    /// For a line item one payment covers several orders of.
    #[serde(default)]
    #[schema(value_type = Option<SubscriptionPrepaidFields>)]
    pub prepaid_metadata: Field<SubscriptionPrepaidFields>,
    /// Name and value pairs kept with the line item and sent with its orders, at most 50.
    #[serde(default)]
    #[schema(value_type = Option<Vec<SubscriptionLineItemAttributeFields>>, max_items = 50)]
    pub line_item_attributes: Field<Vec<Field<SubscriptionLineItemAttributeFields>>>,
    /// The line item's title.
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub title: Field<String>,
    /// The product's name.
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub product_name: Field<String>,
    /// The variant's name.
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub variant_name: Field<String>,
    /// The variant's SKU.
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub sku: Field<String>,
    /// The URL of the item's image.
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub image: Field<String>,
    /// The item's weight in grams.
    #[serde(default)]
    #[schema(value_type = Option<i64>, minimum = 0)]
    pub grams: Field<i64>,
    /// The item's weight, in `weight_unit`.
    #[serde(default)]
    #[schema(value_type = Option<f64>, minimum = 0)]
    pub weight: Field<f64>,
    /// The unit of `weight`.
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub weight_unit: Field<String>,
    /// Whether the item is shipped (true when left out).
    #[serde(default)]
    #[schema(value_type = Option<bool>)]
    pub requires_shipping: Field<bool>,
    /// Whether the item is taxed (true when left out).
    #[serde(default)]
    #[schema(value_type = Option<bool>)]
    pub taxable: Field<bool>,
    /// Discounts taken off the unit price in this order, at most 10.
    #[serde(default)]
    #[schema(value_type = Option<Vec<SubscriptionLineItemDiscountFields>>, max_items = 10)]
    pub discounts: Field<Vec<Field<SubscriptionLineItemDiscountFields>>>,
}
impl BodyObject for SubscriptionLineItemFields {}

impl SubscriptionLineItemFields {
    fn validate(self, check: &mut Check<'_>) -> Option<LineItemInput> {
        let Self {
            platform_product_id,
            platform_variant_id,
            quantity: given_quantity,
            price,
            subscription_group_id,
            interval_id: _,
            prepaid_metadata,
            line_item_attributes: attributes,
            title,
            product_name,
            variant_name,
            sku,
            image,
            grams,
            weight,
            weight_unit,
            requires_shipping,
            taxable,
            discounts,
        } = self;
        let platform_product_id = check.required("platform_product_id", platform_product_id);
        let platform_variant_id = check.required("platform_variant_id", platform_variant_id);
        let quantity = quantity(check, given_quantity);
        let price = check
            .required("price", price)
            .and_then(|WholeCents(cents)| match cents {
                Some(cents) if (0..=MAX_PRICE.0).contains(&cents) => Some(Cents(cents)),
                _ => {
                    check.problem("price", "out_of_range", price_range);
                    None
                }
            });
        let subscription_group_id = check.optional("subscription_group_id", subscription_group_id);
        let attributes = line_item_attributes(check, attributes);
        let prepaid = if prepaid_metadata.is_given() {
            let prepaid = check
                .optional("prepaid_metadata", prepaid_metadata)
                .and_then(|fields| fields.validate(&mut check.nested("prepaid_metadata")));
            // Its problem is recorded; the line item's other fields are not read.
            Some(prepaid?)
        } else {
            None
        };
        // The line item's own account of its product (see `LineItemDetails`).
        let grams = check.optional("grams", grams);
        if grams.is_some_and(|grams| grams < 0) {
            check.problem("grams", "out_of_range", |field| {
                format!("{field} must be at least 0")
            });
        }
        let weight = check.optional("weight", weight);
        if weight.is_some_and(|weight| weight < 0.0) {
            check.problem("weight", "out_of_range", |field| {
                format!("{field} must be at least 0")
            });
        }
        let details = LineItemDetails {
            title: check.optional("title", title),
            product_name: check.optional("product_name", product_name),
            variant_name: check.optional("variant_name", variant_name),
            sku: check.optional("sku", sku),
            image: check.optional("image", image),
            grams,
            weight,
            weight_unit: check.optional("weight_unit", weight_unit),
            requires_shipping: check.optional("requires_shipping", requires_shipping),
            taxable: check.optional("taxable", taxable),
        };
        let discounts = line_item_discounts(check, discounts);
        Some(LineItemInput {
            platform_product_id: platform_product_id?.0,
            platform_variant_id: platform_variant_id?.0,
            quantity: quantity?,
            price: price?,
            subscription_group_id: subscription_group_id.map(GroupId),
            subscription_group_billing_rules_id: None,
            prepaid,
            attributes: attributes?,
            details,
            discounts: discounts?,
        })
    }
}

/// A line item's `prepaid_metadata`: one payment covers `prepaid_duration` orders.
#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct SubscriptionPrepaidFields {
    /// How many orders one payment covers.
    #[serde(default)]
    #[schema(value_type = i64, required = true, minimum = 1, maximum = 1000)]
    pub prepaid_duration: Field<i64>,
    /// How many orders of the current period were placed already (0 to `prepaid_duration`;
    /// 0 when left out).
    #[serde(default)]
    #[schema(value_type = Option<i64>, minimum = 0)]
    pub current_recurrence_count: Field<i64>,
    /// Kept and shown as given.
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub prepaid_continue: Field<String>,
}
impl BodyObject for SubscriptionPrepaidFields {}

impl SubscriptionPrepaidFields {
    fn validate(self, check: &mut Check<'_>) -> Option<PrepaidInput> {
        let duration = check
            .required("prepaid_duration", self.prepaid_duration)
            .and_then(|duration| {
                if (1..=MAX_PREPAID_DURATION).contains(&duration) {
                    Some(duration)
                } else {
                    check.problem("prepaid_duration", "out_of_range", |field| {
                        format!("{field} must be 1 to {MAX_PREPAID_DURATION} orders")
                    });
                    None
                }
            });
        let count = match check.optional("current_recurrence_count", self.current_recurrence_count)
        {
            Some(count) if count < 0 || duration.is_some_and(|duration| count > duration) => {
                check.problem("current_recurrence_count", "out_of_range", |field| {
                    format!("{field} must be 0 to prepaid_duration")
                });
                return None;
            }
            count => count.unwrap_or(0),
        };
        let prepaid_continue = check.optional("prepaid_continue", self.prepaid_continue);
        Some(PrepaidInput {
            prepaid_duration: duration?,
            current_recurrence_count: count,
            prepaid_continue,
        })
    }
}

/// One of a line item's `line_item_attributes`.
#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct SubscriptionLineItemAttributeFields {
    /// The attribute's name, once per line item.
    #[serde(default)]
    #[schema(value_type = String, required = true, min_length = 1, max_length = 255)]
    pub name: Field<String>,
    /// The attribute's value (empty when left out).
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub value: Field<String>,
}
impl BodyObject for SubscriptionLineItemAttributeFields {}

/// `line_item_attributes`: `[{"name", "value"}]`, each name 1..255 characters and given once,
/// at most [`MAX_LINE_ITEM_ATTRIBUTES`]; none when left out. `None` when one has a problem
/// (recorded).
fn line_item_attributes(
    check: &mut Check<'_>,
    given: Field<Vec<Field<SubscriptionLineItemAttributeFields>>>,
) -> Option<Vec<(String, String)>> {
    let name = "line_item_attributes";
    if !given.is_given() {
        return Some(Vec::new());
    }
    let items = check.optional(name, given)?;
    let mut names: Vec<String> = Vec::new();
    check
        .each(
            name,
            Field::Given(items),
            MAX_LINE_ITEM_ATTRIBUTES,
            |check, attribute| {
                let name = check.required("name", attribute.name);
                let value = check.optional("value", attribute.value).unwrap_or_default();
                let name = name?;
                if name.chars().count() > 255 {
                    check.problem("name", "length", |field| {
                        format!("{field} must be at most 255 characters")
                    });
                    return None;
                }
                if names.contains(&name) {
                    check.problem("name", "duplicate", |field| {
                        format!("{field} repeats the name {name:?}")
                    });
                    return None;
                }
                names.push(name.clone());
                Some((name, value))
            },
        )
        .and_then(|read| read.into_iter().collect())
}

/// How a line item discount takes off its unit price.
#[derive(ToSchema)]
#[schema(rename_all = "snake_case")]
pub enum SubscriptionDiscountType {
    /// `percentage_value` percent of the unit price.
    Percentage,
    /// `fixed_value` cents of the base currency off each unit.
    FixedAmount,
}

/// A line item's discount.
#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct SubscriptionLineItemDiscountFields {
    /// How the discount takes off the unit price.
    #[serde(default)]
    #[schema(value_type = SubscriptionDiscountType, required = true)]
    pub discount_type: Field<String>,
    /// The percent of the unit price taken; required for a `percentage` discount.
    #[serde(default)]
    #[schema(value_type = Option<f64>, minimum = 0, maximum = 100)]
    pub percentage_value: Field<f64>,
    /// The cents of the base currency taken off each unit; required for a `fixed_amount`
    /// discount.
    #[serde(default)]
    #[schema(value_type = Option<i64>, minimum = 0)]
    pub fixed_value: Field<i64>,
    /// The discount's description, kept and shown.
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub description: Field<String>,
}
impl BodyObject for SubscriptionLineItemDiscountFields {}

impl SubscriptionLineItemDiscountFields {
    fn validate(self, check: &mut Check<'_>) -> Option<DiscountInput> {
        let kind = check.required("discount_type", self.discount_type);
        // Only the value of the type given is read.
        let value = match kind.as_deref() {
            Some("percentage") => match check.optional("percentage_value", self.percentage_value) {
                Some(percent) if (0.0..=100.0).contains(&percent) => {
                    Some(DiscountValue::Percentage(percent))
                }
                Some(_) => {
                    check.problem("percentage_value", "out_of_range", |field| {
                        format!("{field} must be from 0 to 100")
                    });
                    None
                }
                None => {
                    check.push(FieldError::required(check.field("percentage_value")));
                    None
                }
            },
            Some("fixed_amount") => {
                let given = self.fixed_value.is_given();
                match cents(check, "fixed_value", self.fixed_value) {
                    Some(amount) => Some(DiscountValue::Fixed(amount)),
                    None if !given => {
                        check.push(FieldError::required(check.field("fixed_value")));
                        None
                    }
                    None => None,
                }
            }
            Some(_) => {
                check.problem("discount_type", "invalid_value", |field| {
                    format!("{field} must be percentage or fixed_amount")
                });
                None
            }
            None => None,
        };
        let description = check.optional("description", self.description);
        Some(DiscountInput {
            value: value?,
            description,
        })
    }
}

/// A line item's `discounts` (see [`DiscountInput`]); none when left out. `None` when one has
/// a problem (recorded).
fn line_item_discounts(
    check: &mut Check<'_>,
    given: Field<Vec<Field<SubscriptionLineItemDiscountFields>>>,
) -> Option<Vec<DiscountInput>> {
    if !given.is_given() {
        return Some(Vec::new());
    }
    let items = check.optional("discounts", given)?;
    check
        .each(
            "discounts",
            Field::Given(items),
            MAX_LINE_ITEM_DISCOUNTS,
            |check, discount| discount.validate(check),
        )
        .and_then(|read| read.into_iter().collect())
}

/// A shipping line of Create and Update Subscription.
#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct SubscriptionShippingLineFields {
    /// The shipping method's name (not blank).
    #[serde(default)]
    #[schema(value_type = String, required = true, min_length = 1)]
    pub name: Field<String>,
    /// The shipping method's code.
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub code: Field<String>,
    /// A tag of the line.
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub tag: Field<String>,
    /// The price of the shipping, in cents of the base currency: 0 (when left out) to
    /// 100000000.
    #[serde(default)]
    #[schema(value_type = Option<i64>, minimum = 0, maximum = 100000000)]
    pub price: Field<i64>,
}
impl BodyObject for SubscriptionShippingLineFields {}

impl SubscriptionShippingLineFields {
    fn validate(self, check: &mut Check<'_>) -> Option<ShippingLineInput> {
        let name = check.required("name", self.name);
        let price = if self.price.is_given() {
            cents(check, "price", self.price).and_then(|price| {
                if price <= MAX_PRICE {
                    return Some(price);
                }
                check.problem("price", "out_of_range", price_range);
                None
            })
        } else {
            Some(Cents::ZERO)
        };
        let code = check.optional("code", self.code);
        let tag = check.optional("tag", self.tag);
        Some(ShippingLineInput {
            name: name?,
            code,
            tag,
            price: price?,
        })
    }
}

/// `shipping_lines` (see [`ShippingLineInput`]): `None` when left out, or when one has a
/// problem (recorded).
fn shipping_lines(
    check: &mut Check<'_>,
    given: Field<Vec<Field<SubscriptionShippingLineFields>>>,
) -> Option<Vec<ShippingLineInput>> {
    let items = check.optional("shipping_lines", given)?;
    check
        .each(
            "shipping_lines",
            Field::Given(items),
            MAX_SHIPPING_LINES,
            |check, line| line.validate(check),
        )
        .and_then(|read| read.into_iter().collect())
}

/// `payment_details` of Create Subscription.
#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct SubscriptionPaymentDetailsFields {
    /// The payment gateway: shown as `payment_gateway_public_id`.
    #[serde(default)]
    #[schema(value_type = String, required = true)]
    pub gateway_name: Field<String>,
    /// The customer's id at the gateway: kept, never shown.
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub gateway_customer_id: Field<String>,
    /// The payment method's token: shown as `payment_method_token`.
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub gateway_payment_id: Field<String>,
    /// When the method expires.
    #[serde(default)]
    #[schema(value_type = Option<PaymentExpiry>)]
    pub expires_at: Field<PaymentExpiry>,
}
impl BodyObject for SubscriptionPaymentDetailsFields {}

impl SubscriptionPaymentDetailsFields {
    fn validate(self, check: &mut Check<'_>) -> Option<PaymentDetails> {
        let gateway_name = check.required("gateway_name", self.gateway_name);
        let gateway_customer_id = check.optional("gateway_customer_id", self.gateway_customer_id);
        let gateway_payment_id = check.optional("gateway_payment_id", self.gateway_payment_id);
        let expires_wrong = matches!(self.expires_at, Field::Invalid(_));
        let expires_at = check.optional("expires_at", self.expires_at);
        if expires_wrong {
            return None;
        }
        Some(PaymentDetails {
            gateway_name: gateway_name?,
            gateway_customer_id,
            gateway_payment_id,
            expires_at,
        })
    }
}

/// JSON text with every object's keys sorted, so equal bodies write equal text.
fn canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (index, key) in keys.into_iter().enumerate() {
                if index > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                if let Some(value) = map.get(key) {
                    canonical(value, out);
                }
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (index, item) in items.iter().enumerate() {
                if index > 0 {
                    out.push(',');
                }
                canonical(item, out);
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

/// The fingerprint of a request body: equal for bodies that differ only in key order or
/// spacing.
pub(crate) fn body_fingerprint(body: &Value) -> String {
    let mut text = String::new();
    canonical(body, &mut text);
    hex::encode(Sha256::digest(text.as_bytes()))
}

impl NewSubscription {
    /// Checks a Create Subscription body for `shop` at `now`: its time zone is the rule's (for
    /// times without a zone) and its currency the default `base_currency`. A body naming
    /// subscription groups is checked with [`Self::parse_with`].
    pub fn parse(
        body: &Value,
        shop: &Shop,
        now: Timestamp,
    ) -> Result<NewSubscription, DomainError> {
        Self::parse_with(body, shop, now, &GroupReferences::default())
    }

    /// [`Self::parse`], with what the groups the line items name give
    /// (`groups::group_references`): their problems, each line item's billing rule, the rule
    /// of a body without `order_rrule` (`DTSTART` = `next_order_datetime`, else now, with the
    /// first line item's billing rule), and the discount of a body without
    /// `percent_discount`.
    pub fn parse_with(
        body: &Value,
        shop: &Shop,
        now: Timestamp,
        groups: &GroupReferences,
    ) -> Result<NewSubscription, DomainError> {
        parse_object::<SubscriptionCreateRequest>(body).validate(
            shop,
            now,
            groups,
            body_fingerprint(body),
        )
    }
}

impl SubscriptionCreateRequest {
    /// The `subscription_group_id` and `interval_id` each line item names, by index (`None`
    /// where one is left out or not an integer): what `groups::group_references` looks up.
    pub fn group_ids(&self) -> Vec<(Option<GroupId>, Option<BillingRuleId>)> {
        let Some(Field::Given(items)) = self
            .subscription
            .value()
            .map(|subscription| &subscription.line_items)
        else {
            return Vec::new();
        };
        items
            .iter()
            .map(|item| match item {
                Field::Given(item) => (
                    item.subscription_group_id.value().copied().map(GroupId),
                    item.interval_id.value().copied().map(BillingRuleId),
                ),
                _ => (None, None),
            })
            .collect()
    }

    /// Checks the body for `shop` at `now` with what its groups give (see
    /// [`NewSubscription::parse_with`]); `fingerprint` tells a repeated `idempotency_key`'s
    /// body from another.
    pub fn validate(
        self,
        shop: &Shop,
        now: Timestamp,
        groups: &GroupReferences,
        fingerprint: String,
    ) -> Result<NewSubscription, DomainError> {
        let mut problems = Problems::new();
        for problem in &groups.problems {
            problems.push(problem.clone());
        }
        let mut root = Check::root(&mut problems);
        let customer = root
            .required("customer", self.customer)
            .and_then(|fields| fields.validate(&mut root.nested("customer")));
        let Some(fields) = root.required("subscription", self.subscription) else {
            return Err(problems_into_error(problems));
        };
        let parts = fields.validate(
            &mut root.nested("subscription"),
            customer,
            shop,
            now,
            groups,
        );
        problems.into_result()?;
        parts.complete(fingerprint)
    }
}

impl SubscriptionCreateFields {
    fn validate(
        self,
        check: &mut Check<'_>,
        customer: Option<CustomerInput>,
        shop: &Shop,
        now: Timestamp,
        groups: &GroupReferences,
    ) -> Parts {
        let idempotency_key = check.optional("idempotency_key", self.idempotency_key);
        let external_id = check.optional("external_id", self.external_id);
        let next_order_datetime = check.optional("next_order_datetime", self.next_order_datetime);
        let last_order_datetime = check.optional("last_order_datetime", self.last_order_datetime);
        let placed_at = check.optional("placed_at", self.placed_at);
        let status = status(check, self.subscription_status);

        let rrule_field = check.field("order_rrule");
        let schedule = order_schedule(
            check,
            self.order_rrule,
            shop,
            now,
            groups,
            next_order_datetime,
        );
        let (base_currency, charged_currency, rate) = currencies(
            check,
            self.base_currency,
            self.charged_currency,
            self.base_to_charged_exchange_rate,
            shop,
        );

        let line_items = line_items(check, self.line_items);
        let billing_present = self.billing_address.is_given();
        let billing_address =
            SubscriptionAddressFields::at(check, "billing_address", self.billing_address);
        let shipping_present = self.shipping_address.is_given();
        let shipping_address =
            SubscriptionAddressFields::at(check, "shipping_address", self.shipping_address);
        if !shipping_present {
            check.push(FieldError::required(check.field("shipping_address")));
        }
        let payment_present = self.payment_details.is_given();
        let payment_details = check
            .optional("payment_details", self.payment_details)
            .and_then(|fields| fields.validate(&mut check.nested("payment_details")));
        let discount_code = check.optional("discount_code", self.discount_code);
        let note = check.optional("note", self.note);
        let order_note = check.optional("order_note", self.order_note);
        let shipping_lines = shipping_lines(check, self.shipping_lines).unwrap_or_default();
        let percent_discount = crate::subscriptions::groups::percent_discount(
            check,
            "percent_discount",
            self.percent_discount,
        )
        .or(groups.percent_discount)
        .unwrap_or(0.0);
        let line_items = line_items.map(|mut items| {
            for (index, item) in items.iter_mut().enumerate() {
                item.subscription_group_billing_rules_id =
                    groups.billing_rule_ids.get(&index).copied();
            }
            items
        });

        let (status, next_order) = first_order(
            check,
            schedule.as_ref(),
            status,
            next_order_datetime,
            now,
            &rrule_field,
        );
        Parts {
            customer,
            idempotency_key,
            external_id,
            status,
            schedule,
            next_order,
            last_order_datetime,
            placed_at,
            base_currency,
            charged_currency,
            rate,
            line_items,
            billing_present,
            billing_address,
            shipping_address,
            payment_present,
            payment_details,
            discount_code,
            note,
            order_note,
            shipping_lines,
            percent_discount,
        }
    }
}

/// The line items: 1 to [`MAX_LINE_ITEMS`], each checked; `None` when one has a problem
/// (recorded).
fn line_items(
    check: &mut Check<'_>,
    given: Field<Vec<Field<SubscriptionLineItemFields>>>,
) -> Option<Vec<LineItemInput>> {
    let items = check.required("line_items", given)?;
    if items.is_empty() {
        check.problem("line_items", "empty", |field| {
            format!("{field} must hold at least one line item")
        });
        return None;
    }
    check
        .each(
            "line_items",
            Field::Given(items),
            MAX_LINE_ITEMS,
            |check, item| item.validate(check),
        )
        .and_then(|read| read.into_iter().collect())
}

/// A Create Subscription body as read, each part `None` where a problem was recorded.
struct Parts {
    customer: Option<CustomerInput>,
    idempotency_key: Option<String>,
    external_id: Option<String>,
    status: Option<SubscriptionStatus>,
    schedule: Option<OrderSchedule>,
    next_order: Option<Option<Timestamp>>,
    last_order_datetime: Option<Timestamp>,
    placed_at: Option<Timestamp>,
    base_currency: Option<CurrencyCode>,
    charged_currency: Option<CurrencyCode>,
    rate: Option<f64>,
    line_items: Option<Vec<LineItemInput>>,
    billing_present: bool,
    billing_address: Option<AddressInput>,
    shipping_address: Option<AddressInput>,
    payment_present: bool,
    payment_details: Option<PaymentDetails>,
    discount_code: Option<String>,
    note: Option<String>,
    order_note: Option<String>,
    shipping_lines: Vec<ShippingLineInput>,
    percent_discount: f64,
}

impl Parts {
    /// The subscription the parts make, once no problem was recorded (the billing address is
    /// the shipping one when the body gives none). A part still missing is a gap in the checks.
    fn complete(self, fingerprint: String) -> Result<NewSubscription, DomainError> {
        let (
            Some(customer),
            Some(schedule),
            Some(status),
            Some(next_order_datetime),
            Some(base_currency),
            Some(charged_currency),
            Some(rate),
            Some(line_items),
            Some(shipping_address),
        ) = (
            self.customer,
            self.schedule,
            self.status,
            self.next_order,
            self.base_currency,
            self.charged_currency,
            self.rate,
            self.line_items,
            self.shipping_address,
        )
        else {
            // Every None above recorded its problem; this is a gap in the checks.
            return Err(DomainError::invalid(
                "subscription",
                "invalid_value",
                "the subscription could not be read",
            ));
        };
        let billing_address = match (self.billing_present, self.billing_address) {
            (false, _) => shipping_address.clone(),
            (true, Some(address)) => address,
            (true, None) => {
                return Err(DomainError::invalid(
                    "subscription.billing_address",
                    "invalid_value",
                    "the billing address could not be read",
                ));
            }
        };
        if self.payment_present && self.payment_details.is_none() {
            return Err(DomainError::invalid(
                "subscription.payment_details",
                "invalid_value",
                "the payment details could not be read",
            ));
        }
        Ok(NewSubscription {
            customer,
            idempotency_key: self.idempotency_key,
            external_id: self.external_id,
            status,
            order_rrule_text: schedule.text(),
            schedule,
            next_order_datetime,
            last_order_datetime: self.last_order_datetime,
            placed_at: self.placed_at,
            base_currency,
            charged_currency,
            base_to_charged_exchange_rate: rate,
            line_items,
            billing_address,
            shipping_address,
            payment_details: self.payment_details,
            discount_code: self.discount_code,
            note: self.note,
            order_note: self.order_note,
            shipping_lines: self.shipping_lines,
            percent_discount: self.percent_discount,
            fingerprint,
        })
    }
}

/// The body's order schedule: its `order_rrule`, or the rule its groups' billing rule gives
/// (`DTSTART` = `next_order_datetime`, else now); `None` when a problem is recorded.
fn order_schedule(
    check: &mut Check<'_>,
    given: Field<RawText>,
    shop: &Shop,
    now: Timestamp,
    groups: &GroupReferences,
    next_order_datetime: Option<Timestamp>,
) -> Option<OrderSchedule> {
    let zone = ShopZone::of_shop(&shop.timezone);
    let rrule_field = check.field("order_rrule");
    match given {
        Field::Given(RawText(text)) => check.check(OrderSchedule::parse(&text, zone, &rrule_field)),
        Field::Invalid(mismatch) => {
            check.push(mismatch.at(rrule_field));
            None
        }
        Field::Absent | Field::Null | Field::Blank => match &groups.billing_rule {
            Some(rule) => {
                let start = next_order_datetime.unwrap_or(now);
                let ical = start.to_rfc3339_seconds().replace(['-', ':'], "");
                let text = format!("DTSTART:{ical}\nRRULE:{rule}");
                check.check(OrderSchedule::parse(&text, zone, &rrule_field))
            }
            // The interval_id meant to give the rule has its problem already.
            None if groups.names_interval => None,
            None => {
                check.push(FieldError::required(&rrule_field));
                None
            }
        },
    }
}

/// The body's base and charged currencies (the shop's, then the base one, by default) and the
/// exchange rate between them (1 by default, and 1 when they are the same); `None` for each
/// with a problem recorded.
fn currencies(
    check: &mut Check<'_>,
    base: Field<String>,
    charged: Field<String>,
    rate: Field<f64>,
    shop: &Shop,
) -> (Option<CurrencyCode>, Option<CurrencyCode>, Option<f64>) {
    let base_currency = match currency(check, "base_currency", base) {
        Some(Some(code)) => Some(code),
        Some(None) => {
            let code = CurrencyCode::parse(&shop.currency);
            if code.is_none() {
                check.push(FieldError::required(check.field("base_currency")));
            }
            code
        }
        None => None,
    };
    let charged_currency = currency(check, "charged_currency", charged)
        .and_then(|code| code.or_else(|| base_currency.clone()));
    let rate_field = check.field("base_to_charged_exchange_rate");
    let rate = match rate {
        // No rate between two currencies: the one would be charged for the other, as is.
        Field::Absent | Field::Null
            if base_currency.is_some()
                && charged_currency.is_some()
                && base_currency != charged_currency =>
        {
            let message = format!(
                "{rate_field} is required when charged_currency differs from base_currency"
            );
            check.push(FieldError::new(rate_field.clone(), "required", message));
            None
        }
        Field::Absent | Field::Null => Some(1.0),
        given => exchange_rate(check, given),
    };
    if let (Some(base), Some(charged), Some(rate)) = (&base_currency, &charged_currency, rate)
        && base == charged
        && rate != 1.0
    {
        let message =
            format!("{rate_field} must be 1 when base_currency and charged_currency are the same");
        check.push(FieldError::new(rate_field, "invalid_value", message));
    }
    (base_currency, charged_currency, rate)
}

/// Update Subscription: the fields given change, the others stay. The rule
/// texts are generated from the rules (given texts are ignored), and `latest_status_log` is
/// written by actions only (ignored here).
#[derive(Debug, Clone, Default)]
pub struct SubscriptionUpdate {
    /// Given: changes of the subscription's customer, as Update Customer makes them.
    pub customer: Option<CustomerUpdate>,
    /// Given: the new `external_id`; `Some(None)` clears it (null or blank).
    pub external_id: Option<Option<String>>,
    /// Given: the new `idempotency_key`, which no other subscription of the shop may have;
    /// `Some(None)` clears it (null or blank).
    pub idempotency_key: Option<Option<String>>,
    /// Given: the new next order date; a change ends a retry wait (unless
    /// `next_processing_datetime` is given too).
    pub next_order_datetime: Option<Timestamp>,
    /// Given: the new next payment date.
    pub next_payment_datetime: Option<Timestamp>,
    /// Given: the end of a retry wait.
    pub next_processing_datetime: Option<Timestamp>,
    /// Given: the new `last_payment_datetime`.
    pub last_payment_datetime: Option<Timestamp>,
    /// Given: the new `last_order_datetime`.
    pub last_order_datetime: Option<Timestamp>,
    /// Given: the new `last_processed_datetime`.
    pub last_processed_datetime: Option<Timestamp>,
    /// Given: the new `placed_at`.
    pub placed_at: Option<Timestamp>,
    /// Given: the status to move to, taken as the action it maps to; never `processing`.
    pub subscription_status: Option<SubscriptionStatus>,
    /// Given: the new payment method's token.
    pub payment_method_token: Option<String>,
    /// Given: the new payment method's gateway.
    pub payment_gateway_public_id: Option<String>,
    /// `Some(None)` clears it (null).
    pub payment_method_expires_at: Option<Option<PaymentExpiry>>,
    /// Given: the new order rule, checked as at creation; it is the payment rule too unless
    /// `payment_rrule` is given.
    pub order_rrule: Option<OrderSchedule>,
    /// Given: the new payment rule.
    pub payment_rrule: Option<OrderSchedule>,
    /// Given: the new `current_retries`, 0 or more.
    pub current_retries: Option<i64>,
    /// Given: the new `orders_processed`, 0 or more.
    pub orders_processed: Option<i64>,
    /// Given: the new charged currency.
    pub charged_currency: Option<CurrencyCode>,
    /// Given: the new base currency.
    pub base_currency: Option<CurrencyCode>,
    /// Given: the new exchange rate, a number above 0.
    pub base_to_charged_exchange_rate: Option<f64>,
    /// Given: a new address of the customer, which the subscription bills to.
    pub billing_address: Option<AddressInput>,
    /// Given: a new address of the customer, which the subscription ships to.
    pub shipping_address: Option<AddressInput>,
    /// Given: the id of the customer's live address to bill to.
    pub billing_address_id: Option<AddressId>,
    /// Given: the id of the customer's live address to ship to.
    pub shipping_address_id: Option<AddressId>,
    /// Given: the new discount code; `Some(None)` clears it (null or blank).
    pub discount_code: Option<Option<String>>,
    /// Given: the new `last_failure_code`; `Some(None)` clears it (null or blank).
    pub last_failure_code: Option<Option<String>>,
    /// Given: the new `last_failure_reason`; `Some(None)` clears it (null or blank).
    pub last_failure_reason: Option<Option<String>>,
    /// Given: the new `last_failure_details.message`; `Some(None)` clears the details (null,
    /// or no `message`).
    pub last_failure_message: Option<Option<String>>,
    /// Given: the new note; `Some(None)` clears it (null or blank).
    pub note: Option<Option<String>>,
    /// Given: the new order note; `Some(None)` clears it (null or blank).
    pub order_note: Option<Option<String>>,
    /// Given: the subscription's shipping lines from now on (`[]` removes them).
    pub shipping_lines: Option<Vec<ShippingLineInput>>,
}

/// The body of Update Subscription: the fields given change, the others stay. The rule texts
/// are generated from the rules, and `latest_status_log` is written by actions only.
#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct SubscriptionUpdateRequest {
    /// The fields to change.
    #[serde(default)]
    #[schema(value_type = SubscriptionUpdateFields, required = true)]
    pub subscription: Field<SubscriptionUpdateFields>,
}
impl BodyObject for SubscriptionUpdateRequest {}

/// `subscription` of Update Subscription. Null or blank text clears a text field.
#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct SubscriptionUpdateFields {
    /// Changes of the subscription's customer, as Update Customer makes them.
    #[serde(default)]
    #[schema(value_type = Option<SubscriptionCustomerUpdateFields>)]
    pub customer: Field<SubscriptionCustomerUpdateFields>,
    /// The client's own reference.
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub external_id: Field<String>,
    /// The idempotency key, which no other subscription of the shop may have.
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub idempotency_key: Field<String>,
    /// The next order date; a change ends a retry wait (unless `next_processing_datetime` is
    /// given too).
    #[serde(default)]
    #[schema(value_type = Option<Timestamp>)]
    pub next_order_datetime: Field<Timestamp>,
    /// The next payment date.
    #[serde(default)]
    #[schema(value_type = Option<Timestamp>)]
    pub next_payment_datetime: Field<Timestamp>,
    /// The end of a retry wait.
    #[serde(default)]
    #[schema(value_type = Option<Timestamp>)]
    pub next_processing_datetime: Field<Timestamp>,
    /// When a payment was last made.
    #[serde(default)]
    #[schema(value_type = Option<Timestamp>)]
    pub last_payment_datetime: Field<Timestamp>,
    /// The order date of the last order.
    #[serde(default)]
    #[schema(value_type = Option<Timestamp>)]
    pub last_order_datetime: Field<Timestamp>,
    /// When the last order was placed.
    #[serde(default)]
    #[schema(value_type = Option<Timestamp>)]
    pub last_processed_datetime: Field<Timestamp>,
    /// When the subscription was placed.
    #[serde(default)]
    #[schema(value_type = Option<Timestamp>)]
    pub placed_at: Field<Timestamp>,
    /// The status to move to, taken as the action it maps to.
    #[serde(default)]
    #[schema(value_type = Option<SettableSubscriptionStatus>)]
    pub subscription_status: Field<String>,
    /// The new payment method's token.
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub payment_method_token: Field<String>,
    /// The new payment method's gateway.
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub payment_gateway_public_id: Field<String>,
    /// When the payment method expires; null clears it.
    #[serde(default)]
    #[schema(value_type = Option<PaymentExpiry>)]
    pub payment_method_expires_at: Field<PaymentExpiry>,
    /// The order rule, checked as at creation; it is the payment rule too unless
    /// `payment_rrule` is given.
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub order_rrule: Field<RawText>,
    /// The payment rule.
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub payment_rrule: Field<RawText>,
    /// Failed attempts at the current order.
    #[serde(default)]
    #[schema(value_type = Option<i64>, minimum = 0)]
    pub current_retries: Field<i64>,
    /// How many orders were placed.
    #[serde(default)]
    #[schema(value_type = Option<i64>, minimum = 0)]
    pub orders_processed: Field<i64>,
    /// The ISO 4217 currency orders are charged in.
    #[serde(default)]
    #[schema(value_type = Option<String>, pattern = "^[A-Z]{3}$")]
    pub charged_currency: Field<String>,
    /// The ISO 4217 currency of the prices.
    #[serde(default)]
    #[schema(value_type = Option<String>, pattern = "^[A-Z]{3}$")]
    pub base_currency: Field<String>,
    /// What one unit of the base currency is in the charged currency: 0.000001 to 1000000,
    /// and given whenever a currency changed and the two differ.
    #[serde(default)]
    #[schema(value_type = Option<f64>, minimum = 0.000001, maximum = 1000000)]
    pub base_to_charged_exchange_rate: Field<f64>,
    /// A new address of the customer, which the subscription bills to.
    #[serde(default)]
    #[schema(value_type = Option<SubscriptionAddressFields>)]
    pub billing_address: Field<SubscriptionAddressFields>,
    /// A new address of the customer, which the subscription ships to.
    #[serde(default)]
    #[schema(value_type = Option<SubscriptionAddressFields>)]
    pub shipping_address: Field<SubscriptionAddressFields>,
    /// The id of the customer's live address to bill to.
    #[serde(default)]
    #[schema(value_type = Option<i64>)]
    pub billing_address_id: Field<i64>,
    /// The id of the customer's live address to ship to.
    #[serde(default)]
    #[schema(value_type = Option<i64>)]
    pub shipping_address_id: Field<i64>,
    /// The discount code.
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub discount_code: Field<String>,
    /// The code of the last failed order attempt.
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub last_failure_code: Field<String>,
    /// That failure as a sentence.
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub last_failure_reason: Field<String>,
    /// That failure's details; null (or no `message`) clears them.
    #[serde(default)]
    #[schema(value_type = Option<SubscriptionFailureDetailsFields>)]
    pub last_failure_details: Field<SubscriptionFailureDetailsFields>,
    /// The note on the subscription.
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub note: Field<String>,
    /// The note sent with each order.
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub order_note: Field<String>,
    /// The shipping lines from now on (`[]` removes them), at most 20.
    #[serde(default)]
    #[schema(value_type = Option<Vec<SubscriptionShippingLineFields>>, max_items = 20)]
    pub shipping_lines: Field<Vec<Field<SubscriptionShippingLineFields>>>,
}
impl BodyObject for SubscriptionUpdateFields {}

/// `last_failure_details` of Update Subscription.
#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct SubscriptionFailureDetailsFields {
    /// What failed.
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub message: Field<String>,
}
impl BodyObject for SubscriptionFailureDetailsFields {}

/// A count given: 0 or more.
fn count(check: &mut Check<'_>, name: &str, given: Field<i64>) -> Option<i64> {
    let value = check.optional(name, given)?;
    if value < 0 {
        check.problem(name, "out_of_range", |field| {
            format!("{field} must be 0 or more")
        });
        return None;
    }
    Some(value)
}

impl SubscriptionUpdateFields {
    fn validate(self, check: &mut Check<'_>, zone: ShopZone) -> SubscriptionUpdate {
        let customer = check
            .optional("customer", self.customer)
            .map(|fields| fields.validate(&mut check.nested("customer")));
        let rate = exchange_rate(check, self.base_to_charged_exchange_rate);
        let failure_message = match self.last_failure_details {
            Field::Absent => None,
            Field::Null => Some(None),
            given => check
                .optional("last_failure_details", given)
                .map(|details| {
                    check
                        .nested("last_failure_details")
                        .optional("message", details.message)
                }),
        };
        SubscriptionUpdate {
            customer,
            external_id: check.settable("external_id", self.external_id),
            idempotency_key: check.settable("idempotency_key", self.idempotency_key),
            next_order_datetime: check.optional("next_order_datetime", self.next_order_datetime),
            next_payment_datetime: check
                .optional("next_payment_datetime", self.next_payment_datetime),
            next_processing_datetime: check
                .optional("next_processing_datetime", self.next_processing_datetime),
            last_payment_datetime: check
                .optional("last_payment_datetime", self.last_payment_datetime),
            last_order_datetime: check.optional("last_order_datetime", self.last_order_datetime),
            last_processed_datetime: check
                .optional("last_processed_datetime", self.last_processed_datetime),
            placed_at: check.optional("placed_at", self.placed_at),
            subscription_status: status(check, self.subscription_status).flatten(),
            payment_method_token: check.optional("payment_method_token", self.payment_method_token),
            payment_gateway_public_id: check
                .optional("payment_gateway_public_id", self.payment_gateway_public_id),
            payment_method_expires_at: check
                .settable("payment_method_expires_at", self.payment_method_expires_at),
            order_rrule: rule(check, "order_rrule", self.order_rrule, zone),
            payment_rrule: rule(check, "payment_rrule", self.payment_rrule, zone),
            current_retries: count(check, "current_retries", self.current_retries),
            orders_processed: count(check, "orders_processed", self.orders_processed),
            charged_currency: currency(check, "charged_currency", self.charged_currency).flatten(),
            base_currency: currency(check, "base_currency", self.base_currency).flatten(),
            base_to_charged_exchange_rate: rate,
            billing_address: SubscriptionAddressFields::at(
                check,
                "billing_address",
                self.billing_address,
            ),
            shipping_address: SubscriptionAddressFields::at(
                check,
                "shipping_address",
                self.shipping_address,
            ),
            billing_address_id: check
                .optional("billing_address_id", self.billing_address_id)
                .map(AddressId),
            shipping_address_id: check
                .optional("shipping_address_id", self.shipping_address_id)
                .map(AddressId),
            discount_code: check.settable("discount_code", self.discount_code),
            last_failure_code: check.settable("last_failure_code", self.last_failure_code),
            last_failure_reason: check.settable("last_failure_reason", self.last_failure_reason),
            last_failure_message: failure_message,
            note: check.settable("note", self.note),
            order_note: check.settable("order_note", self.order_note),
            shipping_lines: shipping_lines(check, self.shipping_lines),
        }
    }
}

/// `{"subscription": {…}}` of Update Subscription, every problem a 422 on its path.
pub fn parse_subscription_update(
    body: &Value,
    shop: &Shop,
) -> Result<SubscriptionUpdate, DomainError> {
    let zone = ShopZone::of_shop(&shop.timezone);
    read_body::<SubscriptionUpdateRequest, _>(body, |body, check| {
        let fields = check.required("subscription", body.subscription)?;
        Some(fields.validate(&mut check.nested("subscription"), zone))
    })
}

fn problems_into_error(problems: Problems) -> DomainError {
    match problems.into_result() {
        Err(error) => error,
        Ok(()) => DomainError::invalid("subscription", "required", "subscription is required"),
    }
}

/// The status and first order date, which follow from the rule once it is known good: the
/// status given, else `scheduled` for a rule that starts later and `active` otherwise; the
/// date given, else the rule's first date from now (for an inactive subscription, whether or
/// not it is in the future), else the upcoming one (a problem when the rule has none).
fn first_order(
    check: &mut Check<'_>,
    schedule: Option<&OrderSchedule>,
    status: Option<Option<SubscriptionStatus>>,
    next_order_datetime: Option<Timestamp>,
    now: Timestamp,
    rrule_field: &str,
) -> (Option<SubscriptionStatus>, Option<Option<Timestamp>>) {
    let status = schedule.and_then(|schedule| {
        Some(status?.unwrap_or(if schedule.start() > now {
            SubscriptionStatus::Scheduled
        } else {
            SubscriptionStatus::Active
        }))
    });
    let next_order = match (schedule, status) {
        (Some(_), _) if next_order_datetime.is_some() => Some(next_order_datetime),
        (Some(schedule), Some(SubscriptionStatus::Inactive)) => Some(schedule.first_from(now, &[])),
        (Some(schedule), Some(_)) => check
            .check(schedule.upcoming_order(now, &[], rrule_field))
            .map(Some),
        _ => None,
    };
    (status, next_order)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::access::shop::ShopIdentifier;

    fn at(text: &str) -> Timestamp {
        Timestamp::parse_rfc3339(text).unwrap()
    }

    fn shop() -> Shop {
        Shop {
            id: crate::kernel::ids::ShopId(1),
            identifier: ShopIdentifier::parse("0123456789abcdef0123456789abcdef").unwrap(),
            shop_domain: "example.myshop.test".into(),
            custom_domain: None,
            platform_type: "custom".into(),
            timezone: "America/Toronto".into(),
            currency: "CAD".into(),
            currency_format: "${{amount}}".into(),
            shop_owner: "Owner".into(),
            admin_email: "owner@example.test".into(),
            pii_redacted_at: None,
            created_at: at("2024-01-01T00:00:00Z"),
            updated_at: at("2024-01-01T00:00:00Z"),
            deleted_at: None,
            order_retry_interval_seconds: 86_400,
            order_max_retries: 3,
            expiring_payment_notice_days: 30,
            checkout: Default::default(),
            require_message_signatures: false,
            budgets: Default::default(),
        }
    }

    const NOW: &str = "2024-03-05T12:00:00Z";

    fn body() -> Value {
        json!({
            "customer": {
                "first_name": "Ada",
                "last_name": "Lovelace",
                "email": "ada@example.test",
                "phone": "+1 555 0100",
                "notes": "VIP"
            },
            "subscription": {
                "idempotency_key": "order-1001",
                "external_id": "ext-1",
                "subscription_status": "active",
                "order_rrule": "DTSTART:20240304T090000\nRRULE:FREQ=WEEKLY;INTERVAL=2;BYDAY=MO",
                "base_currency": "USD",
                "charged_currency": "CAD",
                "base_to_charged_exchange_rate": 1.35,
                "line_items": [{
                    "platform_product_id": "p-1",
                    "platform_variant_id": 22,
                    "quantity": 2,
                    "price": 1250,
                    "subscription_group_id": 4
                }],
                "shipping_address": {
                    "first_name": "Ada",
                    "last_name": "Lovelace",
                    "street1": "1 Analytical Way",
                    "city": "Toronto",
                    "province": "Ontario",
                    "province_code": "ON",
                    "country": "Canada",
                    "country_code": "ca",
                    "zip": "M5V 2T6"
                },
                "payment_details": {
                    "gateway_name": "test",
                    "gateway_customer_id": "cus_1",
                    "gateway_payment_id": "tok_success"
                },
                "discount_code": "WELCOME",
                "note": "staff note",
                "order_note": "leave at the door"
            }
        })
    }

    fn parse(body: &Value) -> Result<NewSubscription, DomainError> {
        NewSubscription::parse(body, &shop(), at(NOW))
    }

    fn problems(body: &Value) -> Vec<(String, &'static str)> {
        match parse(body) {
            Err(DomainError::Invalid(problems)) => problems
                .into_iter()
                .map(|problem| (problem.field, problem.code))
                .collect(),
            other => panic!("expected 422, got {other:?}"),
        }
    }

    /// The body with the field at `pointer` set (added when absent).
    fn with(mut body: Value, pointer: &str, value: Value) -> Value {
        let (parent, name) = pointer.rsplit_once('/').unwrap();
        match body.pointer_mut(parent).unwrap() {
            Value::Object(map) => {
                map.insert(name.to_string(), value);
            }
            Value::Array(items) => items[name.parse::<usize>().unwrap()] = value,
            other => panic!("{other}"),
        }
        body
    }

    fn without(mut body: Value, parent: &str, name: &str) -> Value {
        body.pointer_mut(parent)
            .and_then(Value::as_object_mut)
            .unwrap()
            .remove(name);
        body
    }

    #[test]
    fn a_good_body_is_checked_into_a_typed_value() {
        let new = parse(&body()).unwrap();
        assert_eq!(new.customer.email, "ada@example.test");
        assert_eq!(new.customer.notes.as_deref(), Some("VIP"));
        assert_eq!(new.status, SubscriptionStatus::Active);
        assert_eq!(new.order_rrule_text, "every 2 weeks on Monday");
        assert_eq!(
            new.schedule.source(),
            "DTSTART:20240304T090000\nRRULE:FREQ=WEEKLY;INTERVAL=2;BYDAY=MO"
        );
        // The shop's zone: 09:00 in Toronto, two weeks after the 4th.
        assert_eq!(new.next_order_datetime, Some(at("2024-03-18T13:00:00Z")));
        assert_eq!(new.base_currency.as_str(), "USD");
        assert_eq!(new.charged_currency.as_str(), "CAD");
        assert_eq!(new.base_to_charged_exchange_rate, 1.35);
        assert_eq!(
            new.line_items,
            vec![LineItemInput {
                platform_product_id: "p-1".into(),
                platform_variant_id: "22".into(),
                quantity: 2,
                price: Cents(1250),
                subscription_group_id: Some(GroupId(4)),
                subscription_group_billing_rules_id: None,
                prepaid: None,
                attributes: Vec::new(),
                details: LineItemDetails::default(),
                discounts: Vec::new(),
            }]
        );
        assert_eq!(new.shipping_address.country_code, "CA");
        // No billing address: the shipping address bills too.
        assert_eq!(new.billing_address, new.shipping_address);
        let payment = new.payment_details.clone().unwrap();
        assert_eq!(payment.gateway_payment_id.as_deref(), Some("tok_success"));
        assert!(!format!("{new:?}").contains("tok_success"));
        assert!(!format!("{new:?}").contains("cus_1"));
        assert_eq!(new.idempotency_key.as_deref(), Some("order-1001"));
        assert_eq!(new.fingerprint.len(), 64);
    }

    #[test]
    fn defaults_come_from_the_shop_and_the_rule() {
        let mut body = body();
        for name in [
            "subscription_status",
            "base_currency",
            "charged_currency",
            "base_to_charged_exchange_rate",
            "payment_details",
        ] {
            body = without(body, "/subscription", name);
        }
        let new = parse(&body).unwrap();
        assert_eq!(new.base_currency.as_str(), "CAD");
        assert_eq!(new.charged_currency.as_str(), "CAD");
        assert_eq!(new.base_to_charged_exchange_rate, 1.0);
        assert_eq!(new.status, SubscriptionStatus::Active);
        assert_eq!(new.payment_details, None);

        // A rule that starts later: scheduled, first order at its start.
        let later = with(
            body.clone(),
            "/subscription/order_rrule",
            json!("DTSTART:20240401T090000\nRRULE:FREQ=MONTHLY"),
        );
        let new = parse(&later).unwrap();
        assert_eq!(new.status, SubscriptionStatus::Scheduled);
        assert_eq!(new.next_order_datetime, Some(at("2024-04-01T13:00:00Z")));
        assert_eq!(new.order_rrule_text, "every month on the 1st");

        // A given next order date is kept.
        let given = with(
            body,
            "/subscription/next_order_datetime",
            json!("2024-03-07T10:00:00-05:00"),
        );
        assert_eq!(
            parse(&given).unwrap().next_order_datetime,
            Some(at("2024-03-07T15:00:00Z"))
        );
    }

    #[test]
    fn every_invalid_field_is_named_at_once() {
        let mut body = body();
        body = with(body, "/subscription/base_currency", json!("usd"));
        body = with(body, "/subscription/charged_currency", json!("EURO"));
        body = with(body, "/subscription/line_items/0/quantity", json!(0));
        body = with(body, "/subscription/line_items/0/price", json!(-1));
        body = with(
            body,
            "/subscription/subscription_status",
            json!("cancelled"),
        );
        body = with(body, "/subscription/placed_at", json!("yesterday"));
        body = with(
            body,
            "/subscription/order_rrule",
            json!("DTSTART:20240304T090000Z"),
        );
        body = with(body, "/customer/email", json!("not-an-email"));
        assert_eq!(
            problems(&body),
            vec![
                ("customer.email".to_string(), "invalid_email"),
                ("subscription.placed_at".to_string(), "invalid_date"),
                (
                    "subscription.subscription_status".to_string(),
                    "invalid_value"
                ),
                ("subscription.order_rrule".to_string(), "not_recurring"),
                ("subscription.base_currency".to_string(), "invalid_currency"),
                (
                    "subscription.charged_currency".to_string(),
                    "invalid_currency"
                ),
                (
                    "subscription.line_items[0].quantity".to_string(),
                    "out_of_range"
                ),
                (
                    "subscription.line_items[0].price".to_string(),
                    "out_of_range"
                ),
            ]
        );
    }

    #[test]
    fn each_rule_of_the_issue_is_a_422_on_its_field() {
        let cases: Vec<(Value, &str, &str)> = vec![
            (
                with(body(), "/subscription/charged_currency", json!("XYZ")),
                "subscription.charged_currency",
                "invalid_currency",
            ),
            (
                with(body(), "/subscription/line_items/0/quantity", json!(-3)),
                "subscription.line_items[0].quantity",
                "out_of_range",
            ),
            (
                with(body(), "/subscription/line_items/0/quantity", json!(1.5)),
                "subscription.line_items[0].quantity",
                "invalid_type",
            ),
            (
                with(body(), "/subscription/line_items/0/price", json!(-100)),
                "subscription.line_items[0].price",
                "out_of_range",
            ),
            (
                with(body(), "/subscription/line_items/0/price", json!(12.5)),
                "subscription.line_items[0].price",
                "invalid_type",
            ),
            (
                with(body(), "/subscription/line_items/0/price", json!("12.50")),
                "subscription.line_items[0].price",
                "invalid_type",
            ),
            (
                with(
                    body(),
                    "/subscription/order_rrule",
                    json!("RRULE:FREQ=SOMETIMES"),
                ),
                "subscription.order_rrule",
                "invalid_rrule",
            ),
            (
                with(
                    body(),
                    "/subscription/order_rrule",
                    json!("DTSTART:20240304T090000\nRRULE:FREQ=DAILY;COUNT=1"),
                ),
                "subscription.order_rrule",
                "not_recurring",
            ),
            (
                with(
                    body(),
                    "/subscription/order_rrule",
                    json!("DTSTART:20230304T090000\nRRULE:FREQ=DAILY;COUNT=3"),
                ),
                "subscription.order_rrule",
                "no_upcoming_order",
            ),
            (
                with(body(), "/subscription/order_rrule", json!(7)),
                "subscription.order_rrule",
                "invalid_type",
            ),
            (
                without(body(), "/subscription", "order_rrule"),
                "subscription.order_rrule",
                "required",
            ),
            (
                with(body(), "/subscription/line_items", json!([])),
                "subscription.line_items",
                "empty",
            ),
            (
                without(body(), "/subscription", "line_items"),
                "subscription.line_items",
                "required",
            ),
            (
                with(body(), "/subscription/line_items", json!({"quantity": 1})),
                "subscription.line_items",
                "invalid_type",
            ),
            (
                with(body(), "/subscription/line_items/0", json!("p-1")),
                "subscription.line_items[0]",
                "invalid_type",
            ),
            (
                without(body(), "/subscription/line_items/0", "platform_variant_id"),
                "subscription.line_items[0].platform_variant_id",
                "required",
            ),
            (
                with(
                    body(),
                    "/subscription/subscription_status",
                    json!("processing"),
                ),
                "subscription.subscription_status",
                "invalid_value",
            ),
            (
                with(body(), "/subscription/subscription_status", json!(1)),
                "subscription.subscription_status",
                "invalid_type",
            ),
            (
                with(
                    body(),
                    "/subscription/next_order_datetime",
                    json!("2024-13-01"),
                ),
                "subscription.next_order_datetime",
                "invalid_date",
            ),
            (
                with(
                    body(),
                    "/subscription/last_order_datetime",
                    json!(1700000000),
                ),
                "subscription.last_order_datetime",
                "invalid_date",
            ),
            (
                with(
                    body(),
                    "/subscription/base_to_charged_exchange_rate",
                    json!(0),
                ),
                "subscription.base_to_charged_exchange_rate",
                "out_of_range",
            ),
            (
                with(body(), "/subscription/charged_currency", json!("USD")),
                "subscription.base_to_charged_exchange_rate",
                "invalid_value",
            ),
            (
                without(body(), "/customer", "email"),
                "customer.email",
                "required",
            ),
            (
                with(body(), "/customer/email", json!("  ")),
                "customer.email",
                "required",
            ),
            (without(body(), "", "customer"), "customer", "required"),
            (
                without(body(), "/subscription", "shipping_address"),
                "subscription.shipping_address",
                "required",
            ),
            (
                without(body(), "/subscription/shipping_address", "street1"),
                "subscription.shipping_address.street1",
                "required",
            ),
            (
                with(
                    body(),
                    "/subscription/shipping_address/country_code",
                    json!("CAN"),
                ),
                "subscription.shipping_address.country_code",
                "invalid_value",
            ),
            (
                with(
                    body(),
                    "/subscription/billing_address",
                    json!({"city": "Paris"}),
                ),
                "subscription.billing_address.street1",
                "required",
            ),
            (
                with(
                    body(),
                    "/subscription/payment_details/gateway_payment_id",
                    json!(7),
                ),
                "subscription.payment_details.gateway_payment_id",
                "invalid_type",
            ),
            (
                with(body(), "/subscription/note", json!(["a"])),
                "subscription.note",
                "invalid_type",
            ),
        ];
        for (body, field, code) in cases {
            let found = problems(&body);
            assert!(
                found.contains(&(field.to_string(), code)),
                "{field} {code}: {found:?}"
            );
        }
    }

    #[test]
    fn a_body_without_a_subscription_or_not_an_object_is_422() {
        assert_eq!(
            problems(&json!({"customer": {"email": "ada@example.test"}})),
            vec![("subscription".to_string(), "required")]
        );
        assert_eq!(
            problems(&json!([])),
            vec![
                ("customer".to_string(), "required"),
                ("subscription".to_string(), "required")
            ]
        );
        assert_eq!(
            problems(&json!({"customer": "ada", "subscription": 3})),
            vec![
                ("customer".to_string(), "invalid_type"),
                ("subscription".to_string(), "invalid_type")
            ]
        );
    }

    #[test]
    fn an_inactive_subscription_may_have_ended() {
        let body = with(
            with(
                body(),
                "/subscription/order_rrule",
                json!("DTSTART:20230304T090000\nRRULE:FREQ=DAILY;COUNT=3"),
            ),
            "/subscription/subscription_status",
            json!("inactive"),
        );
        let new = parse(&body).unwrap();
        assert_eq!(new.status, SubscriptionStatus::Inactive);
        assert_eq!(new.next_order_datetime, None);
    }

    fn action_problems<T: std::fmt::Debug>(
        result: Result<T, DomainError>,
    ) -> Vec<(String, &'static str)> {
        match result {
            Err(DomainError::Invalid(problems)) => problems
                .into_iter()
                .map(|problem| (problem.field, problem.code))
                .collect(),
            other => panic!("expected 422, got {other:?}"),
        }
    }

    fn one(field: &str, code: &'static str) -> Vec<(String, &'static str)> {
        vec![(field.to_string(), code)]
    }

    #[test]
    fn action_bodies_are_checked_naming_their_fields() {
        assert_eq!(
            parse_skip(&json!({"order_datetime": "2024-03-18T09:00:00Z"})).unwrap(),
            at("2024-03-18T09:00:00Z")
        );
        assert_eq!(
            action_problems(parse_skip(&json!({}))),
            one("order_datetime", "required")
        );
        assert_eq!(
            action_problems(parse_skip(&json!({"order_datetime": "next monday"}))),
            one("order_datetime", "invalid_date")
        );

        assert_eq!(parse_quantity(&json!({"quantity": 3})).unwrap(), 3);
        assert_eq!(
            action_problems(parse_quantity(&json!({"quantity": 0}))),
            one("quantity", "out_of_range")
        );
        // Integers given as decimal text are read; other text is not an integer.
        assert_eq!(parse_quantity(&json!({"quantity": "2"})).unwrap(), 2);
        assert_eq!(
            action_problems(parse_quantity(&json!({"quantity": "two"}))),
            one("quantity", "invalid_type")
        );
        assert_eq!(
            action_problems(parse_quantity(&json!(null))),
            one("quantity", "required")
        );

        let schedule = parse_frequency(
            &json!({"order_rrule": "DTSTART:20240304T090000\nRRULE:FREQ=MONTHLY;BYDAY=1MO"}),
            &shop(),
        )
        .unwrap();
        assert_eq!(schedule.text(), "every month on the first Monday");
        assert_eq!(schedule.zone_name(), "America/Toronto");
        assert_eq!(
            action_problems(parse_frequency(
                &json!({"order_rrule": "DTSTART:20240304T090000"}),
                &shop()
            )),
            one("order_rrule", "not_recurring")
        );

        assert_eq!(
            parse_shipping_address_change(&json!({"address_id": 12})).unwrap(),
            ShippingAddressChange::Existing {
                address_id: AddressId(12)
            }
        );
        assert_eq!(
            parse_shipping_address_change(&json!({"address_id": " 2 "})).unwrap(),
            ShippingAddressChange::Existing {
                address_id: AddressId(2)
            }
        );
        assert_eq!(
            action_problems(parse_shipping_address_change(&json!({"address_id": "2a"}))),
            one("address_id", "invalid_type")
        );
        match parse_shipping_address_change(&json!({"shipping_address": {
            "street1": "2 Rue de la Paix", "city": "Paris", "country_code": "FR"
        }}))
        .unwrap()
        {
            ShippingAddressChange::New(address) => assert_eq!(address.city, "Paris"),
            other => panic!("{other:?}"),
        }
        assert_eq!(
            action_problems(parse_shipping_address_change(
                &json!({"shipping_address": {"city": "Paris"}})
            )),
            vec![
                ("shipping_address.street1".to_string(), "required"),
                ("shipping_address.country_code".to_string(), "required")
            ]
        );
        assert_eq!(
            action_problems(parse_shipping_address_change(
                &json!({"address_id": 1, "shipping_address": {}})
            )),
            one("address_id", "invalid_value")
        );
        assert_eq!(
            action_problems(parse_shipping_address_change(&json!({}))),
            one("shipping_address", "required")
        );

        let change = parse_payment_method_change(
            &json!({"payment_method_token": "tok_new", "payment_gateway_public_id": "test"}),
        )
        .unwrap();
        assert_eq!(change.payment_method_token, "tok_new");
        assert!(!format!("{change:?}").contains("tok_new"));
        assert_eq!(
            action_problems(parse_payment_method_change(
                &json!({"payment_gateway_public_id": "test"})
            )),
            one("payment_method_token", "required")
        );
        let change = parse_payment_method_change(&json!({
            "payment_method_token": "tok_new", "payment_gateway_public_id": "test",
            "expires_at": "2027-03"
        }))
        .unwrap();
        assert_eq!(change.expires_at, PaymentExpiry::parse("2027-03"));
        assert_eq!(
            action_problems(parse_payment_method_change(&json!({
                "payment_method_token": "tok_new", "payment_gateway_public_id": "test",
                "expires_at": "03/27"
            }))),
            one("expires_at", "invalid_value")
        );
    }

    #[test]
    fn line_item_attributes_are_kept_in_order_with_unique_names() {
        let path = "/subscription/line_items/0/line_item_attributes";
        let given = with(
            body(),
            path,
            json!([{"name": "gift_note", "value": "For Ada"}, {"name": "wrap", "extra": 1}]),
        );
        assert_eq!(
            parse(&given).unwrap().line_items[0].attributes,
            [
                ("gift_note".to_string(), "For Ada".to_string()),
                ("wrap".to_string(), String::new())
            ]
        );
        let twice = with(
            body(),
            path,
            json!([{"name": "a"}, {"name": "a"}, {"value": "b"}]),
        );
        assert_eq!(
            problems(&twice),
            [
                (
                    "subscription.line_items[0].line_item_attributes[1].name".to_string(),
                    "duplicate"
                ),
                (
                    "subscription.line_items[0].line_item_attributes[2].name".to_string(),
                    "required"
                ),
            ]
        );
        let many: Vec<Value> = (0..51).map(|i| json!({"name": format!("n{i}")})).collect();
        assert_eq!(
            problems(&with(body(), path, Value::Array(many))),
            [(
                "subscription.line_items[0].line_item_attributes".to_string(),
                "too_many"
            )]
        );
    }

    #[test]
    fn payment_expiry_and_prepaid_line_items_are_read_and_checked() {
        let body = with(
            with(
                body(),
                "/subscription/payment_details/expires_at",
                json!("2027-03"),
            ),
            "/subscription/line_items/0/prepaid_metadata",
            json!({"prepaid_duration": 3, "prepaid_continue": "auto_renew"}),
        );
        let new = parse(&body).unwrap();
        assert_eq!(
            new.payment_details.unwrap().expires_at,
            PaymentExpiry::parse("2027-03")
        );
        assert_eq!(
            new.line_items[0].prepaid,
            Some(PrepaidInput {
                prepaid_duration: 3,
                current_recurrence_count: 0,
                prepaid_continue: Some("auto_renew".into()),
            })
        );

        let bad = with(
            with(
                body.clone(),
                "/subscription/payment_details/expires_at",
                json!("2027-13"),
            ),
            "/subscription/line_items/0/prepaid_metadata",
            json!({"prepaid_duration": 0}),
        );
        assert_eq!(
            problems(&bad),
            [
                (
                    "subscription.line_items[0].prepaid_metadata.prepaid_duration".to_string(),
                    "out_of_range"
                ),
                (
                    "subscription.payment_details.expires_at".to_string(),
                    "invalid_value"
                ),
            ]
        );
        let counted_past = with(
            body.clone(),
            "/subscription/line_items/0/prepaid_metadata",
            json!({"prepaid_duration": 2, "current_recurrence_count": 3}),
        );
        assert_eq!(
            problems(&counted_past),
            [(
                "subscription.line_items[0].prepaid_metadata.current_recurrence_count".to_string(),
                "out_of_range"
            )]
        );
        let missing = with(
            body,
            "/subscription/line_items/0/prepaid_metadata",
            json!({"prepaid_continue": "auto_renew"}),
        );
        assert_eq!(
            problems(&missing),
            [(
                "subscription.line_items[0].prepaid_metadata.prepaid_duration".to_string(),
                "required"
            )]
        );
    }

    #[test]
    fn the_fingerprint_ignores_key_order_and_spacing_only() {
        let a: Value = serde_json::from_str(r#"{"a": 1, "b": {"c": [1, 2], "d": "x"}}"#).unwrap();
        let b: Value = serde_json::from_str(r#"{"b":{"d":"x","c":[1,2]},"a":1}"#).unwrap();
        let c: Value = serde_json::from_str(r#"{"b":{"d":"x","c":[2,1]},"a":1}"#).unwrap();
        assert_eq!(body_fingerprint(&a), body_fingerprint(&b));
        assert_ne!(body_fingerprint(&a), body_fingerprint(&c));
        let changed = with(body(), "/subscription/line_items/0/quantity", json!(3));
        assert_ne!(
            parse(&body()).unwrap().fingerprint,
            parse(&changed).unwrap().fingerprint
        );
    }

    #[test]
    fn rates_quantities_and_prices_are_bounded() {
        let rate = "/subscription/base_to_charged_exchange_rate";
        let item = "/subscription/line_items/0";
        for (pointer, good, bad, field) in [
            (
                rate,
                json!(0.000001),
                json!(0.00000099),
                "base_to_charged_exchange_rate",
            ),
            (
                rate,
                json!(1_000_000),
                json!(1_000_000.01),
                "base_to_charged_exchange_rate",
            ),
            (
                rate,
                json!("0.000001"),
                json!(1e-9),
                "base_to_charged_exchange_rate",
            ),
            (
                rate,
                json!(1_000_000),
                json!(1e308),
                "base_to_charged_exchange_rate",
            ),
            (item, json!(10_000), json!(10_001), "line_items[0].quantity"),
            (item, json!(1), json!(i64::MAX), "line_items[0].quantity"),
            (
                item,
                json!(100_000_000),
                json!(100_000_001),
                "line_items[0].price",
            ),
            (item, json!(0), json!("100000001"), "line_items[0].price"),
        ] {
            let pointer = if pointer == item {
                format!("{item}/{}", field.rsplit('.').next().unwrap())
            } else {
                pointer.to_string()
            };
            assert!(
                parse(&with(body(), &pointer, good.clone())).is_ok(),
                "{pointer} {good}"
            );
            assert_eq!(
                problems(&with(body(), &pointer, bad.clone())),
                one(&format!("subscription.{field}"), "out_of_range"),
                "{pointer} {bad}"
            );
        }
        let shipping = |price: Value| {
            with(
                body(),
                "/subscription/shipping_lines",
                json!([{"name": "Ground", "price": price}]),
            )
        };
        assert!(parse(&shipping(json!(100_000_000))).is_ok());
        assert_eq!(
            problems(&shipping(json!(100_000_001))),
            one("subscription.shipping_lines[0].price", "out_of_range")
        );
        // Charged in another currency with no rate: refused, never charged as is.
        assert_eq!(
            problems(&without(
                body(),
                "/subscription",
                "base_to_charged_exchange_rate"
            )),
            one("subscription.base_to_charged_exchange_rate", "required")
        );
        assert_eq!(
            parse_quantity(&json!({"quantity": 10_000})).unwrap(),
            10_000
        );
        assert_eq!(
            action_problems(parse_quantity(&json!({"quantity": 10_001}))),
            one("quantity", "out_of_range")
        );
        let update = |rate: Value| {
            parse_subscription_update(
                &json!({"subscription": {"base_to_charged_exchange_rate": rate}}),
                &shop(),
            )
        };
        assert!(update(json!(0.000001)).is_ok());
        assert_eq!(
            action_problems(update(json!(1e-9))),
            one("subscription.base_to_charged_exchange_rate", "out_of_range")
        );
        assert_eq!(
            action_problems(update(json!(1_000_000.5))),
            one("subscription.base_to_charged_exchange_rate", "out_of_range")
        );
    }

    fn codes(problems: Vec<FieldError>) -> Vec<(String, &'static str)> {
        problems
            .into_iter()
            .map(|problem| (problem.field, problem.code))
            .collect()
    }

    fn named(pairs: &[(&str, &'static str)]) -> Vec<(String, &'static str)> {
        pairs
            .iter()
            .map(|(field, code)| (field.to_string(), *code))
            .collect()
    }

    #[test]
    fn a_create_body_of_wrong_types_text_numbers_and_blanks_is_read_as_before() {
        let wrong = json!({
            "customer": {"email": "  ", "first_name": 7, "phone": ""},
            "subscription": {
                "idempotency_key": "  ", "external_id": 12, "next_order_datetime": "",
                "placed_at": 5, "subscription_status": "  ", "order_rrule": 7,
                "base_currency": 3, "charged_currency": "",
                "base_to_charged_exchange_rate": "abc", "percent_discount": "101",
                "line_items": [
                    {"platform_product_id": 12, "platform_variant_id": 1.5, "quantity": "3",
                     "price": " 250 ", "subscription_group_id": "x",
                     "line_item_attributes": "no", "grams": "-1", "weight": "heavy",
                     "requires_shipping": "yes",
                     "discounts": [{"discount_type": "percentage", "percentage_value": "abc"}, 5]},
                    "nope",
                    {"platform_product_id": " ", "platform_variant_id": "v", "quantity": 0,
                     "price": 1.5, "title": 5,
                     "prepaid_metadata": {"prepaid_duration": "2", "current_recurrence_count": "3"}}
                ],
                "billing_address": [],
                "shipping_address": {"street1": " ", "city": 4, "country_code": "usa"},
                "payment_details": {"gateway_name": "", "expires_at": ""},
                "note": false,
                "shipping_lines": [{"name": "", "price": "-5"}, {"name": "G", "price": "12"}]
            }
        });
        assert_eq!(
            problems(&wrong),
            named(&[
                ("customer.email", "required"),
                ("customer.first_name", "invalid_type"),
                ("subscription.external_id", "invalid_type"),
                ("subscription.next_order_datetime", "invalid_date"),
                ("subscription.placed_at", "invalid_date"),
                ("subscription.order_rrule", "invalid_type"),
                ("subscription.base_currency", "invalid_type"),
                ("subscription.base_to_charged_exchange_rate", "invalid_type"),
                (
                    "subscription.line_items[0].platform_variant_id",
                    "invalid_type"
                ),
                (
                    "subscription.line_items[0].subscription_group_id",
                    "invalid_type"
                ),
                (
                    "subscription.line_items[0].line_item_attributes",
                    "invalid_type"
                ),
                ("subscription.line_items[0].grams", "out_of_range"),
                ("subscription.line_items[0].weight", "invalid_type"),
                (
                    "subscription.line_items[0].requires_shipping",
                    "invalid_type"
                ),
                (
                    "subscription.line_items[0].discounts[0].percentage_value",
                    "invalid_type"
                ),
                (
                    "subscription.line_items[0].discounts[0].percentage_value",
                    "required"
                ),
                ("subscription.line_items[0].discounts[1]", "invalid_type"),
                ("subscription.line_items[1]", "invalid_type"),
                ("subscription.line_items[2].platform_product_id", "required"),
                ("subscription.line_items[2].quantity", "out_of_range"),
                ("subscription.line_items[2].price", "invalid_type"),
                (
                    "subscription.line_items[2].prepaid_metadata.current_recurrence_count",
                    "out_of_range"
                ),
                ("subscription.billing_address", "invalid_type"),
                ("subscription.shipping_address.street1", "required"),
                ("subscription.shipping_address.city", "invalid_type"),
                (
                    "subscription.shipping_address.country_code",
                    "invalid_value"
                ),
                ("subscription.payment_details.gateway_name", "required"),
                ("subscription.payment_details.expires_at", "invalid_value"),
                ("subscription.note", "invalid_type"),
                ("subscription.shipping_lines[0].name", "required"),
                ("subscription.shipping_lines[0].price", "out_of_range"),
                ("subscription.percent_discount", "out_of_range"),
            ])
        );
        // Numbers given as text, blanks left out, and integer ids read as text.
        let mut text = body();
        text = with(text, "/subscription/line_items/0/quantity", json!(" 3 "));
        text = with(text, "/subscription/line_items/0/price", json!("250"));
        text = with(
            text,
            "/subscription/line_items/0/platform_product_id",
            json!(101),
        );
        text = with(
            text,
            "/subscription/base_to_charged_exchange_rate",
            json!("1.5"),
        );
        text = with(text, "/subscription/percent_discount", json!(" 12.5 "));
        text = with(text, "/subscription/note", json!("  "));
        text = with(text, "/subscription/subscription_status", json!(""));
        text = with(
            text,
            "/subscription/shipping_lines",
            json!([{"name": " Ground ", "price": "500", "code": ""}]),
        );
        let new = parse(&text).unwrap();
        let item = &new.line_items[0];
        assert_eq!(
            (item.quantity, item.price, item.platform_product_id.as_str()),
            (3, Cents(250), "101")
        );
        assert_eq!(new.base_to_charged_exchange_rate, 1.5);
        assert_eq!(new.percent_discount, 12.5);
        assert_eq!(new.note, None);
        assert_eq!(new.status, SubscriptionStatus::Active);
        assert_eq!(
            new.shipping_lines,
            [ShippingLineInput {
                name: "Ground".into(),
                code: None,
                tag: None,
                price: Cents(500),
            }]
        );
    }

    #[test]
    fn an_update_body_of_wrong_types_text_numbers_and_blanks_is_read_as_before() {
        let wrong = json!({"subscription": {
            "customer": {"email": "", "first_name": null, "last_name": "  ", "phone": 5},
            "base_to_charged_exchange_rate": "0", "last_failure_details": "x",
            "subscription_status": "processing", "payment_method_token": 1,
            "order_rrule": 5, "current_retries": "-1", "charged_currency": "usd",
            "shipping_address_id": "x", "note": 4, "shipping_lines": {},
            "billing_address": {"street1": "1 Way"}
        }});
        assert_eq!(
            action_problems(parse_subscription_update(&wrong, &shop())),
            named(&[
                ("subscription.customer.email", "required"),
                ("subscription.customer.phone", "invalid_type"),
                ("subscription.base_to_charged_exchange_rate", "out_of_range"),
                ("subscription.last_failure_details", "invalid_type"),
                ("subscription.subscription_status", "invalid_value"),
                ("subscription.payment_method_token", "invalid_type"),
                ("subscription.order_rrule", "invalid_type"),
                ("subscription.current_retries", "out_of_range"),
                ("subscription.charged_currency", "invalid_currency"),
                ("subscription.billing_address.city", "required"),
                ("subscription.billing_address.country_code", "required"),
                ("subscription.shipping_address_id", "invalid_type"),
                ("subscription.note", "invalid_type"),
                ("subscription.shipping_lines", "invalid_type"),
            ])
        );
        let update = parse_subscription_update(
            &json!({"subscription": {
                "external_id": null, "idempotency_key": " ", "payment_method_expires_at": null,
                "orders_processed": "2", "billing_address_id": " 7 ", "discount_code": "",
                "last_failure_details": {"message": "  "}, "charged_currency": "  ",
                "base_to_charged_exchange_rate": "2", "customer": {"last_name": "  "},
                "order_note": " leave it ", "shipping_lines": []
            }}),
            &shop(),
        )
        .unwrap();
        assert_eq!(update.external_id, Some(None));
        assert_eq!(update.idempotency_key, Some(None));
        assert_eq!(update.payment_method_expires_at, Some(None));
        assert_eq!(update.orders_processed, Some(2));
        assert_eq!(update.billing_address_id, Some(AddressId(7)));
        assert_eq!(update.discount_code, Some(None));
        assert_eq!(update.last_failure_message, Some(None));
        assert_eq!(update.charged_currency, None);
        assert_eq!(update.base_to_charged_exchange_rate, Some(2.0));
        assert_eq!(
            update.customer,
            Some(CustomerUpdate {
                last_name: Some(None),
                ..CustomerUpdate::default()
            })
        );
        assert_eq!(update.order_note, Some(Some("leave it".into())));
        assert_eq!(update.shipping_lines, Some(Vec::new()));
        assert_eq!(update.note, None);
        assert_eq!(
            codes(
                match parse_subscription_update(&json!({"subscription": "x"}), &shop()) {
                    Err(DomainError::Invalid(problems)) => problems,
                    other => panic!("{other:?}"),
                }
            ),
            named(&[("subscription", "invalid_type")])
        );
    }

    #[test]
    fn customer_bodies_of_wrong_types_text_numbers_and_blanks_are_read_as_before() {
        assert_eq!(
            action_problems(parse_customer_update(&json!({"customer": {
                "email": " ada@example.test ", "first_name": "", "notes": 3
            }}))),
            one("customer.notes", "invalid_type")
        );
        assert_eq!(
            parse_customer_update(&json!({"customer": {
                "email": " ada@example.test ", "first_name": "", "last_name": null,
                "phone": " 555 "
            }}))
            .unwrap(),
            CustomerUpdate {
                email: Some("ada@example.test".into()),
                first_name: Some(None),
                last_name: Some(None),
                phone: Some(Some("555".into())),
                notes: None,
            }
        );
        assert_eq!(
            action_problems(parse_customer_update(&json!({"customer": []}))),
            one("customer", "invalid_type")
        );
        assert_eq!(
            action_problems(parse_customer_update(&json!({"customer": null}))),
            one("customer", "required")
        );
        assert_eq!(
            action_problems(parse_customer_update(
                &json!({"customer": {"email": "nope"}})
            )),
            one("customer.email", "invalid_email")
        );

        let wrong = parse_customer_address(&json!({"customer_address": {
            "is_default": "yes", "street1": 5, "city": " ", "country_code": "C1", "zip": 90210
        }}));
        let Err(DomainError::Invalid(found)) = wrong else {
            panic!("{wrong:?}");
        };
        assert_eq!(
            found[0].message,
            "customer_address.is_default must be true or false"
        );
        assert_eq!(
            codes(found),
            named(&[
                ("customer_address.is_default", "invalid_type"),
                ("customer_address.street1", "invalid_type"),
                ("customer_address.city", "required"),
                ("customer_address.country_code", "invalid_value"),
                ("customer_address.zip", "invalid_type"),
            ])
        );
        let body = parse_customer_address(&json!({"customer_address": {
            "street1": " 1 Way ", "city": "Paris", "country_code": "fr", "is_default": false,
            "zip": ""
        }}))
        .unwrap();
        assert_eq!(
            (
                body.address.street1.as_str(),
                body.address.country_code.as_str(),
                body.address.zip.clone(),
                body.is_default
            ),
            ("1 Way", "FR", None, Some(false))
        );
        assert_eq!(
            action_problems(parse_customer_address(&json!({"customer_address": 3}))),
            one("customer_address", "invalid_type")
        );
        assert_eq!(
            action_problems(parse_customer_address(&json!("x"))),
            one("customer_address", "required")
        );
    }

    #[test]
    fn action_bodies_of_wrong_types_text_numbers_and_blanks_are_read_as_before() {
        assert_eq!(
            action_problems(parse_skip(&json!({"order_datetime": ""}))),
            one("order_datetime", "invalid_date")
        );
        assert_eq!(
            action_problems(parse_skip(&json!({"order_datetime": null}))),
            one("order_datetime", "required")
        );
        assert_eq!(parse_quantity(&json!({"quantity": " 12 "})).unwrap(), 12);
        for wrong in [json!(""), json!(2.5), json!(true), json!([1])] {
            assert_eq!(
                action_problems(parse_quantity(&json!({"quantity": wrong}))),
                one("quantity", "invalid_type")
            );
        }
        assert_eq!(
            action_problems(parse_quantity(&json!({"quantity": "0"}))),
            one("quantity", "out_of_range")
        );
        assert_eq!(
            action_problems(parse_frequency(&json!({"order_rrule": ["x"]}), &shop())),
            one("order_rrule", "invalid_type")
        );
        assert_eq!(
            action_problems(parse_frequency(&json!({"order_rrule": null}), &shop())),
            one("order_rrule", "required")
        );
        // A blank rule goes to the rule's own check, which finds it missing.
        assert_eq!(
            action_problems(parse_frequency(&json!({"order_rrule": " "}), &shop())),
            one("order_rrule", "required")
        );

        assert_eq!(
            action_problems(parse_shipping_address_change(
                &json!({"shipping_address": "x"})
            )),
            one("shipping_address", "invalid_type")
        );
        assert_eq!(
            action_problems(parse_shipping_address_change(&json!({"address_id": ""}))),
            one("address_id", "invalid_type")
        );
        assert_eq!(
            parse_shipping_address_change(&json!({"shipping_address": null, "address_id": "3"}))
                .unwrap(),
            ShippingAddressChange::Existing {
                address_id: AddressId(3)
            }
        );
        assert_eq!(
            action_problems(parse_shipping_address_change(
                &json!({"shipping_address": {"zip": 5}, "address_id": null})
            )),
            named(&[
                ("shipping_address.street1", "required"),
                ("shipping_address.city", "required"),
                ("shipping_address.country_code", "required"),
                ("shipping_address.zip", "invalid_type"),
            ])
        );
        assert_eq!(
            action_problems(parse_payment_method_change(&json!({
                "payment_method_token": " ", "payment_gateway_public_id": 5,
                "expires_at": 202703
            }))),
            named(&[
                ("payment_method_token", "required"),
                ("payment_gateway_public_id", "invalid_type"),
                ("expires_at", "invalid_value"),
            ])
        );
        let change = parse_payment_method_change(&json!({
            "payment_method_token": " tok ", "payment_gateway_public_id": "test",
            "expires_at": " 2027-03 "
        }))
        .unwrap();
        assert_eq!(change.payment_method_token, "tok");
        assert_eq!(change.expires_at, PaymentExpiry::parse("2027-03"));
    }
}
