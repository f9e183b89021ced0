//! The body of Create Subscription checked into a typed value. Every problem is
//! a [`FieldError`] naming its field by its path in the body (`subscription.line_items[0].quantity`),
//! and all of them are reported at once (422). The bodies of the actions (skip,
//! quantity, frequency, shipping address, payment method) are checked here too.
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

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};
use utoipa::ToSchema;

use crate::access::shop::Shop;
use crate::kernel::error::{DomainError, FieldError, Problems};
use crate::kernel::fields::{Fields, at_most, check_email, read_body, type_error};
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
    pub subscription_group_id: Option<i64>,
    /// The group's billing rule the line item's `interval_id` names.
    pub subscription_group_billing_rules_id: Option<i64>,
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

/// A year and month, `YYYY-MM` (a payment method's expiry).
fn expiry(fields: &mut Fields<'_, '_>, name: &str) -> Option<PaymentExpiry> {
    let field = fields.field(name);
    let expiry = match fields.get(name)? {
        Value::String(text) => PaymentExpiry::parse(text.trim()),
        _ => None,
    };
    if expiry.is_none() {
        let message = format!("{field} must be a year and month such as 2027-03");
        fields
            .problems
            .push(FieldError::new(field, "invalid_value", message));
    }
    expiry
}

fn customer(fields: &mut Fields<'_, '_>) -> Option<CustomerInput> {
    let email = fields.required_text("email");
    if let Some(email) = &email {
        let field = fields.field("email");
        fields.problems.check(check_email(field, email));
    }
    let first_name = fields.text("first_name");
    let last_name = fields.text("last_name");
    let phone = fields.text("phone");
    let notes = fields.text("notes");
    Some(CustomerInput {
        email: email?,
        first_name,
        last_name,
        phone,
        notes,
    })
}

fn address(fields: &mut Fields<'_, '_>) -> Option<AddressInput> {
    let first_name = fields.text("first_name");
    let last_name = fields.text("last_name");
    let company = fields.text("company");
    let phone = fields.text("phone");
    let street1 = fields.required_text("street1");
    let street2 = fields.text("street2");
    let city = fields.required_text("city");
    let province = fields.text("province");
    let province_code = fields.text("province_code");
    let country = fields.text("country");
    let country_code = fields.required_text("country_code").and_then(|code| {
        let upper = code.to_ascii_uppercase();
        if upper.len() == 2 && upper.bytes().all(|b| b.is_ascii_uppercase()) {
            Some(upper)
        } else {
            let field = fields.field("country_code");
            let message = format!("{field} must be an ISO 3166-1 alpha-2 code such as CA");
            fields
                .problems
                .push(FieldError::new(field, "invalid_value", message));
            None
        }
    });
    let zip = fields.text("zip");
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

fn line_item(fields: &mut Fields<'_, '_>) -> Option<LineItemInput> {
    let platform_product_id = fields.required_id("platform_product_id");
    let platform_variant_id = fields.required_id("platform_variant_id");
    let quantity = match fields.integer("quantity") {
        None if fields.get("quantity").is_none() => {
            fields
                .problems
                .push(FieldError::required(fields.field("quantity")));
            None
        }
        Some(quantity) if !(1..=MAX_QUANTITY).contains(&quantity) => {
            let field = fields.field("quantity");
            let message = format!("{field} must be from 1 to {MAX_QUANTITY}");
            fields
                .problems
                .push(FieldError::new(field, "out_of_range", message));
            None
        }
        quantity => quantity,
    };
    let price = match fields.get("price") {
        None => {
            fields
                .problems
                .push(FieldError::required(fields.field("price")));
            None
        }
        // Cents given as decimal text are read too.
        Some(Value::String(text)) if text.trim().parse::<i64>().is_ok() => {
            match text.trim().parse::<i64>() {
                Ok(cents) if (0..=MAX_PRICE.0).contains(&cents) => Some(Cents(cents)),
                _ => {
                    let field = fields.field("price");
                    let message = price_range(&field);
                    fields
                        .problems
                        .push(FieldError::new(field, "out_of_range", message));
                    None
                }
            }
        }
        Some(Value::Number(number)) if number.is_i64() || number.is_u64() => {
            match number.as_i64() {
                Some(cents) if (0..=MAX_PRICE.0).contains(&cents) => Some(Cents(cents)),
                _ => {
                    let field = fields.field("price");
                    let message = price_range(&field);
                    fields
                        .problems
                        .push(FieldError::new(field, "out_of_range", message));
                    None
                }
            }
        }
        Some(_) => {
            fields.problems.push(type_error(
                fields.field("price"),
                "an integer number of cents",
            ));
            None
        }
    };
    let subscription_group_id = fields.integer("subscription_group_id");
    let attributes = line_item_attributes(fields);
    let prepaid_present = fields.get("prepaid_metadata").is_some();
    let prepaid = fields
        .object("prepaid_metadata")
        .map(|mut prepaid_fields| prepaid(&mut prepaid_fields));
    let prepaid = match (prepaid_present, prepaid) {
        (false, _) => None,
        (true, Some(Some(prepaid))) => Some(prepaid),
        // Its problem is recorded.
        (true, _) => return None,
    };
    let details = line_item_details(fields);
    let discounts = line_item_discounts(fields);
    Some(LineItemInput {
        platform_product_id: platform_product_id?,
        platform_variant_id: platform_variant_id?,
        quantity: quantity?,
        price: price?,
        subscription_group_id,
        subscription_group_billing_rules_id: None,
        prepaid,
        attributes: attributes?,
        details,
        discounts: discounts?,
    })
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

/// A line item's own account of its product (see [`LineItemDetails`]).
fn line_item_details(fields: &mut Fields<'_, '_>) -> LineItemDetails {
    let grams = fields.integer("grams");
    if grams.is_some_and(|grams| grams < 0) {
        let field = fields.field("grams");
        let message = format!("{field} must be at least 0");
        fields
            .problems
            .push(FieldError::new(field, "out_of_range", message));
    }
    let weight = fields.number("weight");
    if weight.is_some_and(|weight| weight < 0.0) {
        let field = fields.field("weight");
        let message = format!("{field} must be at least 0");
        fields
            .problems
            .push(FieldError::new(field, "out_of_range", message));
    }
    LineItemDetails {
        title: fields.text("title"),
        product_name: fields.text("product_name"),
        variant_name: fields.text("variant_name"),
        sku: fields.text("sku"),
        image: fields.text("image"),
        grams,
        weight,
        weight_unit: fields.text("weight_unit"),
        requires_shipping: fields.boolean("requires_shipping"),
        taxable: fields.boolean("taxable"),
    }
}

/// Cents of at least 0, as a JSON integer or its decimal text; a problem on `name` otherwise.
fn cents(fields: &mut Fields<'_, '_>, name: &str) -> Option<Cents> {
    let amount = fields.integer(name)?;
    if amount < 0 {
        let field = fields.field(name);
        let message = format!("{field} must be an amount of at least 0, in cents");
        fields
            .problems
            .push(FieldError::new(field, "out_of_range", message));
        return None;
    }
    Some(Cents(amount))
}

/// A line item's `discounts` (see [`DiscountInput`]); None when one has a problem (recorded).
fn line_item_discounts(fields: &mut Fields<'_, '_>) -> Option<Vec<DiscountInput>> {
    let Some(items) = fields.array("discounts", MAX_LINE_ITEM_DISCOUNTS) else {
        return fields.get("discounts").is_none().then(Vec::new);
    };
    let mut discounts = Vec::with_capacity(items.len());
    let mut failed = false;
    for (index, item) in items.iter().enumerate() {
        let Some(mut discount) = fields.element("discounts", index, item) else {
            failed = true;
            continue;
        };
        let kind = discount.required_text("discount_type");
        let value = match kind.as_deref() {
            Some("percentage") => match discount.number("percentage_value") {
                Some(percent) if (0.0..=100.0).contains(&percent) => {
                    Some(DiscountValue::Percentage(percent))
                }
                Some(_) => {
                    let field = discount.field("percentage_value");
                    let message = format!("{field} must be from 0 to 100");
                    discount
                        .problems
                        .push(FieldError::new(field, "out_of_range", message));
                    None
                }
                None => {
                    let field = discount.field("percentage_value");
                    discount.problems.push(FieldError::required(field));
                    None
                }
            },
            Some("fixed_amount") => match cents(&mut discount, "fixed_value") {
                Some(amount) => Some(DiscountValue::Fixed(amount)),
                None if discount.get("fixed_value").is_none() => {
                    let field = discount.field("fixed_value");
                    discount.problems.push(FieldError::required(field));
                    None
                }
                None => None,
            },
            Some(_) => {
                let field = discount.field("discount_type");
                let message = format!("{field} must be percentage or fixed_amount");
                discount
                    .problems
                    .push(FieldError::new(field, "invalid_value", message));
                None
            }
            None => None,
        };
        let description = discount.text("description");
        match value {
            Some(value) => discounts.push(DiscountInput { value, description }),
            None => failed = true,
        }
    }
    (!failed).then_some(discounts)
}

/// `shipping_lines` (see [`ShippingLineInput`]): None when absent, or when one has a problem
/// (recorded).
fn shipping_lines(fields: &mut Fields<'_, '_>) -> Option<Vec<ShippingLineInput>> {
    let items = fields.array("shipping_lines", MAX_SHIPPING_LINES)?;
    let mut lines = Vec::with_capacity(items.len());
    let mut failed = false;
    for (index, item) in items.iter().enumerate() {
        let Some(mut line) = fields.element("shipping_lines", index, item) else {
            failed = true;
            continue;
        };
        let name = line.required_text("name");
        let price = match line.get("price") {
            None => Some(Cents::ZERO),
            Some(_) => cents(&mut line, "price").and_then(|price| {
                if price <= MAX_PRICE {
                    return Some(price);
                }
                let field = line.field("price");
                let message = price_range(&field);
                line.problems
                    .push(FieldError::new(field, "out_of_range", message));
                None
            }),
        };
        let (code, tag) = (line.text("code"), line.text("tag"));
        match (name, price) {
            (Some(name), Some(price)) => lines.push(ShippingLineInput {
                name,
                code,
                tag,
                price,
            }),
            _ => failed = true,
        }
    }
    (!failed).then_some(lines)
}

/// `line_item_attributes`: `[{"name", "value"}]`, each name 1..255 characters and given once,
/// at most [`MAX_LINE_ITEM_ATTRIBUTES`]. None when one has a problem (recorded).
fn line_item_attributes(fields: &mut Fields<'_, '_>) -> Option<Vec<(String, String)>> {
    let Some(items) = fields.array("line_item_attributes", MAX_LINE_ITEM_ATTRIBUTES) else {
        return fields.get("line_item_attributes").is_none().then(Vec::new);
    };
    let mut pairs: Vec<(String, String)> = Vec::with_capacity(items.len());
    let mut all_read = true;
    for (index, item) in items.iter().enumerate() {
        let Some(mut attribute) = fields.element("line_item_attributes", index, item) else {
            all_read = false;
            continue;
        };
        let name = attribute.required_text("name");
        let value = attribute.text("value").unwrap_or_default();
        let Some(name) = name else {
            all_read = false;
            continue;
        };
        let field = attribute.field("name");
        let problem = if name.chars().count() > 255 {
            Some(("length", format!("{field} must be at most 255 characters")))
        } else if pairs.iter().any(|(seen, _)| *seen == name) {
            Some(("duplicate", format!("{field} repeats the name {name:?}")))
        } else {
            None
        };
        match problem {
            Some((code, message)) => {
                attribute
                    .problems
                    .push(FieldError::new(field, code, message));
                all_read = false;
            }
            None => pairs.push((name, value)),
        }
    }
    all_read.then_some(pairs)
}

fn prepaid(fields: &mut Fields<'_, '_>) -> Option<PrepaidInput> {
    let duration = match fields.integer("prepaid_duration") {
        None if fields.get("prepaid_duration").is_none() => {
            fields
                .problems
                .push(FieldError::required(fields.field("prepaid_duration")));
            None
        }
        Some(duration) if !(1..=MAX_PREPAID_DURATION).contains(&duration) => {
            let field = fields.field("prepaid_duration");
            let message = format!("{field} must be 1 to {MAX_PREPAID_DURATION} orders");
            fields
                .problems
                .push(FieldError::new(field, "out_of_range", message));
            None
        }
        duration => duration,
    };
    let count = match fields.integer("current_recurrence_count") {
        Some(count) if count < 0 || duration.is_some_and(|duration| count > duration) => {
            let field = fields.field("current_recurrence_count");
            let message = format!("{field} must be 0 to prepaid_duration");
            fields
                .problems
                .push(FieldError::new(field, "out_of_range", message));
            return None;
        }
        count => count.unwrap_or(0),
    };
    let prepaid_continue = fields.text("prepaid_continue");
    Some(PrepaidInput {
        prepaid_duration: duration?,
        current_recurrence_count: count,
        prepaid_continue,
    })
}

fn line_items(fields: &mut Fields<'_, '_>) -> Option<Vec<LineItemInput>> {
    let field = fields.field("line_items");
    let items = match fields.get("line_items") {
        None => {
            fields.problems.push(FieldError::required(field));
            return None;
        }
        Some(Value::Array(items)) => items,
        Some(_) => {
            fields.problems.push(type_error(field, "an array"));
            return None;
        }
    };
    if items.is_empty() {
        let message = format!("{field} must hold at least one line item");
        fields
            .problems
            .push(FieldError::new(field, "empty", message));
        return None;
    }
    let items = at_most(&field, items, MAX_LINE_ITEMS, fields.problems);
    let mut checked = Vec::with_capacity(items.len());
    let mut all_ok = true;
    for (index, item) in items.iter().enumerate() {
        let item_path = format!("{field}[{index}]");
        let Value::Object(map) = item else {
            fields.problems.push(type_error(item_path, "an object"));
            all_ok = false;
            continue;
        };
        let mut item_fields = Fields {
            path: item_path,
            map,
            problems: &mut *fields.problems,
        };
        match line_item(&mut item_fields) {
            Some(item) => checked.push(item),
            None => all_ok = false,
        }
    }
    all_ok.then_some(checked)
}

fn payment_details(fields: &mut Fields<'_, '_>) -> Option<PaymentDetails> {
    let gateway_name = fields.required_text("gateway_name");
    let gateway_customer_id = fields.text("gateway_customer_id");
    let gateway_payment_id = fields.text("gateway_payment_id");
    let expires_present = fields.get("expires_at").is_some();
    let expires_at = expiry(fields, "expires_at");
    if expires_present && expires_at.is_none() {
        return None;
    }
    Some(PaymentDetails {
        gateway_name: gateway_name?,
        gateway_customer_id,
        gateway_payment_id,
        expires_at,
    })
}

/// `Some(None)` when absent (a default applies), `None` when wrong (its problem recorded).
fn currency(fields: &mut Fields<'_, '_>, name: &str) -> Option<Option<CurrencyCode>> {
    let wrong_type = fields.is_not_text(name);
    let Some(text) = fields.text(name) else {
        return (!wrong_type).then_some(None);
    };
    match CurrencyCode::parse(&text) {
        Some(code) => Some(Some(code)),
        None => {
            let field = fields.field(name);
            let message =
                format!("{field} must be an ISO 4217 currency code such as USD, not {text:?}");
            fields
                .problems
                .push(FieldError::new(field, "invalid_currency", message));
            None
        }
    }
}

/// `Some(None)` when absent (the rule decides), `None` when wrong (its problem recorded).
fn status(fields: &mut Fields<'_, '_>) -> Option<Option<SubscriptionStatus>> {
    let wrong_type = fields.is_not_text("subscription_status");
    let Some(text) = fields.text("subscription_status") else {
        return (!wrong_type).then_some(None);
    };
    let field = fields.field("subscription_status");
    match SubscriptionStatus::parse(&text) {
        Some(SubscriptionStatus::Processing) => {
            let message = format!(
                "{field} cannot be processing: only Mercer sets it, while it places an order"
            );
            fields
                .problems
                .push(FieldError::new(field, "invalid_value", message));
            None
        }
        Some(status) => Some(Some(status)),
        None => {
            let message =
                format!("{field} must be one of active, inactive, scheduled, paused, not {text:?}");
            fields
                .problems
                .push(FieldError::new(field, "invalid_value", message));
            None
        }
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
        let mut problems = Problems::new();
        for problem in &groups.problems {
            problems.push(problem.clone());
        }
        let empty = Map::new();
        let root_map = body.as_object().unwrap_or(&empty);
        let mut root = Fields {
            path: String::new(),
            map: root_map,
            problems: &mut problems,
        };

        let customer = match root.object("customer") {
            Some(mut fields) => customer(&mut fields),
            None => {
                if root.get("customer").is_none() {
                    root.problems.push(FieldError::required("customer"));
                }
                None
            }
        };
        let subscription_present = root.get("subscription").is_some();
        let Some(mut sub) = root.object("subscription") else {
            if !subscription_present {
                problems.push(FieldError::required("subscription"));
            }
            return Err(problems_into_error(problems));
        };

        let idempotency_key = sub.text("idempotency_key");
        let external_id = sub.text("external_id");
        let next_order_datetime = sub.time("next_order_datetime");
        let last_order_datetime = sub.time("last_order_datetime");
        let placed_at = sub.time("placed_at");
        let status = status(&mut sub);

        let rrule_field = sub.field("order_rrule");
        let schedule = order_schedule(&mut sub, shop, now, groups, next_order_datetime);
        let (base_currency, charged_currency, rate) = currencies(&mut sub, shop);

        let line_items = line_items(&mut sub);
        let billing_present = sub.get("billing_address").is_some();
        let billing_address = sub
            .object("billing_address")
            .and_then(|mut f| address(&mut f));
        let shipping_present = sub.get("shipping_address").is_some();
        let shipping_address = sub
            .object("shipping_address")
            .and_then(|mut f| address(&mut f));
        if !shipping_present {
            sub.problems
                .push(FieldError::required(sub.field("shipping_address")));
        }
        let payment_present = sub.get("payment_details").is_some();
        let payment_details = sub
            .object("payment_details")
            .and_then(|mut f| payment_details(&mut f));
        let discount_code = sub.text("discount_code");
        let note = sub.text("note");
        let order_note = sub.text("order_note");
        let shipping_lines = shipping_lines(&mut sub).unwrap_or_default();
        let percent_discount =
            crate::subscriptions::groups::percent_discount(&mut sub, "percent_discount")
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
            &mut sub,
            schedule.as_ref(),
            status,
            next_order_datetime,
            now,
            &rrule_field,
        );

        problems.into_result()?;
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
        .complete(body_fingerprint(body))
    }
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
    sub: &mut Fields<'_, '_>,
    shop: &Shop,
    now: Timestamp,
    groups: &GroupReferences,
    next_order_datetime: Option<Timestamp>,
) -> Option<OrderSchedule> {
    let zone = ShopZone::of_shop(&shop.timezone);
    let rrule_field = sub.field("order_rrule");
    match sub.get("order_rrule") {
        None => match &groups.billing_rule {
            Some(rule) => {
                let start = next_order_datetime.unwrap_or(now);
                let ical = start.to_rfc3339_seconds().replace(['-', ':'], "");
                let text = format!("DTSTART:{ical}\nRRULE:{rule}");
                sub.problems
                    .check(OrderSchedule::parse(&text, zone, &rrule_field))
            }
            // The interval_id meant to give the rule has its problem already.
            None if groups.names_interval => None,
            None => {
                sub.problems.push(FieldError::required(&rrule_field));
                None
            }
        },
        Some(Value::String(text)) => {
            sub.problems
                .check(OrderSchedule::parse(text, zone, &rrule_field))
        }
        Some(_) => {
            sub.problems.push(type_error(rrule_field, "a string"));
            None
        }
    }
}

/// The body's base and charged currencies (the shop's, then the base one, by default) and the
/// exchange rate between them (1 by default, and 1 when they are the same); `None` for each
/// with a problem recorded.
fn currencies(
    sub: &mut Fields<'_, '_>,
    shop: &Shop,
) -> (Option<CurrencyCode>, Option<CurrencyCode>, Option<f64>) {
    let base_currency = currency(sub, "base_currency").map(|code| {
        code.or_else(|| CurrencyCode::parse(&shop.currency))
            .ok_or_else(|| FieldError::required(sub.field("base_currency")))
    });
    let base_currency = match base_currency {
        Some(Ok(code)) => Some(code),
        Some(Err(problem)) => {
            sub.problems.push(problem);
            None
        }
        None => None,
    };
    let charged_currency =
        currency(sub, "charged_currency").and_then(|code| code.or_else(|| base_currency.clone()));
    let rate_field = sub.field("base_to_charged_exchange_rate");
    let rate = match sub.get("base_to_charged_exchange_rate") {
        // No rate between two currencies: the one would be charged for the other, as is.
        None if base_currency.is_some()
            && charged_currency.is_some()
            && base_currency != charged_currency =>
        {
            let message = format!(
                "{rate_field} is required when charged_currency differs from base_currency"
            );
            sub.problems
                .push(FieldError::new(rate_field.clone(), "required", message));
            None
        }
        None => Some(1.0),
        Some(_) => sub
            .number("base_to_charged_exchange_rate")
            .and_then(|rate| {
                if is_exchange_rate(rate) {
                    Some(rate)
                } else {
                    let message = rate_range(&rate_field);
                    sub.problems
                        .push(FieldError::new(rate_field.clone(), "out_of_range", message));
                    None
                }
            }),
    };
    if let (Some(base), Some(charged), Some(rate)) = (&base_currency, &charged_currency, rate)
        && base == charged
        && rate != 1.0
    {
        let message =
            format!("{rate_field} must be 1 when base_currency and charged_currency are the same");
        sub.problems
            .push(FieldError::new(rate_field, "invalid_value", message));
    }
    (base_currency, charged_currency, rate)
}

/// The status and first order date, which follow from the rule once it is known good: the
/// status given, else `scheduled` for a rule that starts later and `active` otherwise; the
/// date given, else the rule's first date from now (for an inactive subscription, whether or
/// not it is in the future), else the upcoming one (a problem when the rule has none).
fn first_order(
    sub: &mut Fields<'_, '_>,
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
        (Some(schedule), Some(_)) => sub
            .problems
            .check(schedule.upcoming_order(now, &[], rrule_field))
            .map(Some),
        _ => None,
    };
    (status, next_order)
}

/// Skip a ship date: `{"order_datetime"}`, the date to skip (its day in the shop's zone counts;
/// see `recurrence::plan_skip`).
pub fn parse_skip(body: &Value) -> Result<Timestamp, DomainError> {
    read_body(body, |fields| {
        if fields.get("order_datetime").is_none() {
            fields.problems.push(FieldError::required("order_datetime"));
            return None;
        }
        fields.time("order_datetime")
    })
}

/// Change quantity: `{"quantity"}`, from 1 to 10,000.
pub fn parse_quantity(body: &Value) -> Result<i64, DomainError> {
    read_body(body, |fields| match fields.integer("quantity") {
        None if fields.get("quantity").is_none() => {
            fields.problems.push(FieldError::required("quantity"));
            None
        }
        Some(quantity) if !(1..=MAX_QUANTITY).contains(&quantity) => {
            fields.problems.push(FieldError::new(
                "quantity",
                "out_of_range",
                format!("quantity must be from 1 to {MAX_QUANTITY}"),
            ));
            None
        }
        quantity => quantity,
    })
}

/// Change frequency: `{"order_rrule"}`, checked as at creation.
pub fn parse_frequency(body: &Value, shop: &Shop) -> Result<OrderSchedule, DomainError> {
    let zone = ShopZone::of_shop(&shop.timezone);
    read_body(body, |fields| match fields.get("order_rrule") {
        Some(Value::String(text)) => {
            fields
                .problems
                .check(OrderSchedule::parse(text, zone, "order_rrule"))
        }
        Some(_) => {
            fields
                .problems
                .push(type_error("order_rrule".to_string(), "a string"));
            None
        }
        None => {
            fields.problems.push(FieldError::required("order_rrule"));
            None
        }
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
        address_id: i64,
    },
}

/// `{"shipping_address": {…}}` or `{"address_id"}`: exactly one of them.
pub fn parse_shipping_address_change(body: &Value) -> Result<ShippingAddressChange, DomainError> {
    read_body(body, |fields| {
        let has_address = fields.get("shipping_address").is_some();
        let has_id = fields.get("address_id").is_some();
        match (has_address, has_id) {
            (true, true) => {
                fields.problems.push(FieldError::new(
                    "address_id",
                    "invalid_value",
                    "give shipping_address or address_id, not both",
                ));
                None
            }
            (false, false) => {
                fields
                    .problems
                    .push(FieldError::required("shipping_address"));
                None
            }
            (true, false) => fields
                .object("shipping_address")
                .and_then(|mut address_fields| address(&mut address_fields))
                .map(|address| ShippingAddressChange::New(Box::new(address))),
            (false, true) => fields
                .integer("address_id")
                .map(|address_id| ShippingAddressChange::Existing { address_id }),
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

/// `{"payment_method_token","payment_gateway_public_id","expires_at"?}`, the first two
/// required; `expires_at` is `YYYY-MM`.
pub fn parse_payment_method_change(body: &Value) -> Result<PaymentMethodChange, DomainError> {
    read_body(body, |fields| {
        let token = fields.required_text("payment_method_token");
        let gateway = fields.required_text("payment_gateway_public_id");
        let expires_present = fields.get("expires_at").is_some();
        let expires_at = expiry(fields, "expires_at");
        if expires_present && expires_at.is_none() {
            return None;
        }
        Some(PaymentMethodChange {
            payment_method_token: token?,
            payment_gateway_public_id: gateway?,
            expires_at,
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

/// A text field to set: `Some(None)` clears it (null or blank), `None` leaves it.
fn settable_text(fields: &mut Fields<'_, '_>, name: &str) -> Option<Option<String>> {
    if !fields.map.contains_key(name) {
        return None;
    }
    if fields.get(name).is_none() {
        return Some(None);
    }
    let wrong_type = fields.is_not_text(name);
    let text = fields.text(name);
    (!wrong_type).then_some(text)
}

fn customer_update(fields: &mut Fields<'_, '_>) -> CustomerUpdate {
    let email = match fields.get("email") {
        None => None,
        Some(_) => {
            let email = fields.required_text("email");
            if let Some(email) = &email {
                let field = fields.field("email");
                fields.problems.check(check_email(field, email));
            }
            email
        }
    };
    CustomerUpdate {
        email,
        first_name: settable_text(fields, "first_name"),
        last_name: settable_text(fields, "last_name"),
        phone: settable_text(fields, "phone"),
        notes: settable_text(fields, "notes"),
    }
}

/// Update Customer: `{"customer": {first_name, last_name, phone, email, notes}}`.
pub fn parse_customer_update(body: &Value) -> Result<CustomerUpdate, DomainError> {
    read_body(body, |fields| match fields.object("customer") {
        Some(mut customer) => Some(customer_update(&mut customer)),
        None => {
            if fields.get("customer").is_none() {
                fields.problems.push(FieldError::required("customer"));
            }
            None
        }
    })
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
    read_body(body, |fields| {
        let Some(mut address_fields) = fields.object("customer_address") else {
            if fields.get("customer_address").is_none() {
                fields
                    .problems
                    .push(FieldError::required("customer_address"));
            }
            return None;
        };
        let is_default = match address_fields.get("is_default") {
            None => None,
            Some(Value::Bool(flag)) => Some(*flag),
            Some(_) => {
                let field = address_fields.field("is_default");
                address_fields
                    .problems
                    .push(type_error(field, "true or false"));
                None
            }
        };
        let address = address(&mut address_fields)?;
        Some(AddressBody {
            address,
            is_default,
        })
    })
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
    pub billing_address_id: Option<i64>,
    /// Given: the id of the customer's live address to ship to.
    pub shipping_address_id: Option<i64>,
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

fn rule(fields: &mut Fields<'_, '_>, name: &str, zone: ShopZone) -> Option<OrderSchedule> {
    let field = fields.field(name);
    match fields.get(name)? {
        Value::String(text) => fields
            .problems
            .check(OrderSchedule::parse(text, zone, &field)),
        _ => {
            fields.problems.push(type_error(field, "a string"));
            None
        }
    }
}

fn count(fields: &mut Fields<'_, '_>, name: &str) -> Option<i64> {
    let value = fields.integer(name)?;
    if value < 0 {
        let field = fields.field(name);
        let message = format!("{field} must be 0 or more");
        fields
            .problems
            .push(FieldError::new(field, "out_of_range", message));
        return None;
    }
    Some(value)
}

/// `{"subscription": {…}}` of Update Subscription, every problem a 422 on its path.
pub fn parse_subscription_update(
    body: &Value,
    shop: &Shop,
) -> Result<SubscriptionUpdate, DomainError> {
    let zone = ShopZone::of_shop(&shop.timezone);
    read_body(body, |root| {
        let Some(mut sub) = root.object("subscription") else {
            if root.get("subscription").is_none() {
                root.problems.push(FieldError::required("subscription"));
            }
            return None;
        };
        let customer = sub.object("customer").map(|mut c| customer_update(&mut c));
        let rate_field = sub.field("base_to_charged_exchange_rate");
        let rate = sub
            .number("base_to_charged_exchange_rate")
            .and_then(|rate| {
                if is_exchange_rate(rate) {
                    Some(rate)
                } else {
                    let message = rate_range(&rate_field);
                    sub.problems
                        .push(FieldError::new(rate_field.clone(), "out_of_range", message));
                    None
                }
            });
        let failure_message = match sub.map.get("last_failure_details") {
            None => None,
            Some(Value::Null) => Some(None),
            Some(_) => sub
                .object("last_failure_details")
                .map(|mut details| details.text("message")),
        };
        let update = SubscriptionUpdate {
            customer,
            external_id: settable_text(&mut sub, "external_id"),
            idempotency_key: settable_text(&mut sub, "idempotency_key"),
            next_order_datetime: sub.time("next_order_datetime"),
            next_payment_datetime: sub.time("next_payment_datetime"),
            next_processing_datetime: sub.time("next_processing_datetime"),
            last_payment_datetime: sub.time("last_payment_datetime"),
            last_order_datetime: sub.time("last_order_datetime"),
            last_processed_datetime: sub.time("last_processed_datetime"),
            placed_at: sub.time("placed_at"),
            subscription_status: status(&mut sub).flatten(),
            payment_method_token: sub.text("payment_method_token"),
            payment_gateway_public_id: sub.text("payment_gateway_public_id"),
            payment_method_expires_at: match sub.map.get("payment_method_expires_at") {
                None => None,
                Some(Value::Null) => Some(None),
                Some(_) => expiry(&mut sub, "payment_method_expires_at").map(Some),
            },
            order_rrule: rule(&mut sub, "order_rrule", zone),
            payment_rrule: rule(&mut sub, "payment_rrule", zone),
            current_retries: count(&mut sub, "current_retries"),
            orders_processed: count(&mut sub, "orders_processed"),
            charged_currency: currency(&mut sub, "charged_currency").flatten(),
            base_currency: currency(&mut sub, "base_currency").flatten(),
            base_to_charged_exchange_rate: rate,
            billing_address: sub
                .object("billing_address")
                .and_then(|mut f| address(&mut f)),
            shipping_address: sub
                .object("shipping_address")
                .and_then(|mut f| address(&mut f)),
            billing_address_id: sub.integer("billing_address_id"),
            shipping_address_id: sub.integer("shipping_address_id"),
            discount_code: settable_text(&mut sub, "discount_code"),
            last_failure_code: settable_text(&mut sub, "last_failure_code"),
            last_failure_reason: settable_text(&mut sub, "last_failure_reason"),
            last_failure_message: failure_message,
            note: settable_text(&mut sub, "note"),
            order_note: settable_text(&mut sub, "order_note"),
            shipping_lines: shipping_lines(&mut sub),
        };
        Some(update)
    })
}

fn problems_into_error(problems: Problems) -> DomainError {
    match problems.into_result() {
        Err(error) => error,
        Ok(()) => DomainError::invalid("subscription", "required", "subscription is required"),
    }
}

// The request bodies as the OpenAPI document describes them: doc-only types listing every
// field the parsers above read, in their canonical form (ids and numbers given as text are read
// too; that leniency is not described).

/// The fields of an address a body gives (the create fields): a subscription's
/// billing or shipping address, or a customer's address.
#[derive(ToSchema)]
pub struct SubscriptionAddressFields {
    /// The recipient's first name.
    #[schema(example = "Ada")]
    pub first_name: Option<String>,
    /// The recipient's last name.
    #[schema(example = "Lovelace")]
    pub last_name: Option<String>,
    /// The company name.
    pub company: Option<String>,
    /// A phone number at the address.
    pub phone: Option<String>,
    /// The first line of the street address (not blank).
    #[schema(example = "12 Market Street", min_length = 1)]
    pub street1: String,
    /// The second line of the street address.
    pub street2: Option<String>,
    /// The city (not blank).
    #[schema(example = "Portland", min_length = 1)]
    pub city: String,
    /// The province or state, by name.
    pub province: Option<String>,
    /// The province or state, by code.
    #[schema(example = "OR")]
    pub province_code: Option<String>,
    /// The country, by name.
    pub country: Option<String>,
    /// The country's ISO 3166-1 alpha-2 code, such as `CA` (read in any case, kept upper case).
    #[schema(example = "US", pattern = "^[A-Za-z]{2}$")]
    pub country_code: String,
    /// The postal code.
    #[schema(example = "97205")]
    pub zip: Option<String>,
}

/// The body of Create and Update Customer Address.
#[derive(ToSchema)]
pub struct SubscriptionCustomerAddressRequest {
    /// The address's fields.
    pub customer_address: SubscriptionCustomerAddressFields,
}

/// A customer's address as Create and Update Customer Address take it.
#[derive(ToSchema)]
pub struct SubscriptionCustomerAddressFields {
    /// The recipient's first name.
    pub first_name: Option<String>,
    /// The recipient's last name.
    pub last_name: Option<String>,
    /// The company name.
    pub company: Option<String>,
    /// A phone number at the address.
    pub phone: Option<String>,
    /// The first line of the street address (not blank).
    #[schema(min_length = 1)]
    pub street1: String,
    /// The second line of the street address.
    pub street2: Option<String>,
    /// The city (not blank).
    #[schema(min_length = 1)]
    pub city: String,
    /// The province or state, by name.
    pub province: Option<String>,
    /// The province or state, by code.
    pub province_code: Option<String>,
    /// The country, by name.
    pub country: Option<String>,
    /// The country's ISO 3166-1 alpha-2 code, such as `CA` (read in any case, kept upper case).
    #[schema(pattern = "^[A-Za-z]{2}$")]
    pub country_code: String,
    /// The postal code.
    pub zip: Option<String>,
    /// Whether it is the customer's default address. Left out, a new address is the default
    /// when the customer has none, and an update keeps what the address was.
    pub is_default: Option<bool>,
}

/// The body of Update Customer: the fields given change, the others stay.
#[derive(ToSchema)]
pub struct SubscriptionCustomerUpdateRequest {
    /// The customer's fields to change.
    pub customer: SubscriptionCustomerUpdateFields,
}

/// A customer's fields to change (Update Customer, and Update Subscription's `customer`):
/// those given; null or blank text clears a field (but `email`, which cannot be cleared).
#[derive(ToSchema)]
pub struct SubscriptionCustomerUpdateFields {
    /// The customer's new first name.
    pub first_name: Option<String>,
    /// The customer's new last name.
    pub last_name: Option<String>,
    /// The customer's new phone number.
    pub phone: Option<String>,
    /// The customer's new email address (checked).
    #[schema(format = Email)]
    pub email: Option<String>,
    /// The customer's new notes.
    pub notes: Option<String>,
}

/// The body of Create Subscription.
#[derive(ToSchema)]
pub struct SubscriptionCreateRequest {
    /// The subscription's customer: the shop's live customer with this email, or a new one.
    pub customer: SubscriptionCreateCustomerFields,
    /// The subscription.
    pub subscription: SubscriptionCreateFields,
}

/// `customer` of Create Subscription: found by its email (compared without case), or created
/// with these fields.
#[derive(ToSchema)]
pub struct SubscriptionCreateCustomerFields {
    /// The customer's email address (checked).
    #[schema(example = "ada@example.com", format = Email)]
    pub email: String,
    /// The first name of a customer created here.
    #[schema(example = "Ada")]
    pub first_name: Option<String>,
    /// The last name of a customer created here.
    #[schema(example = "Lovelace")]
    pub last_name: Option<String>,
    /// The phone number of a customer created here.
    pub phone: Option<String>,
    /// The notes of a customer created here.
    pub notes: Option<String>,
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
#[derive(ToSchema)]
pub struct SubscriptionCreateFields {
    /// The client's key for the request: the same key and body again answer the first
    /// subscription; the same key with another body is 409.
    #[schema(example = "2b1f6c1e-order-42")]
    pub idempotency_key: Option<String>,
    /// The client's own reference for the subscription.
    pub external_id: Option<String>,
    /// When the first order is due; else the rule's first date from now.
    pub next_order_datetime: Option<Timestamp>,
    /// The date of the subscription's last order (an imported subscription's).
    pub last_order_datetime: Option<Timestamp>,
    /// When the subscription was placed.
    pub placed_at: Option<Timestamp>,
    /// The status; else `scheduled` for a rule that starts later and `active` otherwise.
    pub subscription_status: Option<SettableSubscriptionStatus>,
    /// The order rule: RFC 5545 `DTSTART`, `RRULE` and `EXDATE` lines (times without a zone
    /// are the shop's). Required unless a line item names a billing rule (`interval_id`), whose
    /// RRULE then starts at `next_order_datetime` (else now).
    #[schema(example = "DTSTART:20250106T090000\nRRULE:FREQ=WEEKLY;INTERVAL=2")]
    pub order_rrule: Option<String>,
    /// The ISO 4217 currency of the prices; the shop's by default.
    #[schema(example = "USD", pattern = "^[A-Z]{3}$")]
    pub base_currency: Option<String>,
    /// The ISO 4217 currency orders are charged in; `base_currency` by default.
    #[schema(pattern = "^[A-Z]{3}$")]
    pub charged_currency: Option<String>,
    /// What one unit of the base currency is in the charged currency: 0.000001 to 1000000, 1
    /// (the default) when the currencies are the same, and required when they differ.
    #[schema(minimum = 0.000001, maximum = 1000000)]
    pub base_to_charged_exchange_rate: Option<f64>,
    /// The percent (0 to 100) orders take off their items; else the first line item's group's,
    /// else 0.
    #[schema(minimum = 0, maximum = 100)]
    pub percent_discount: Option<f64>,
    /// The line items, 1 to 250.
    #[schema(min_items = 1, max_items = 250)]
    pub line_items: Vec<SubscriptionLineItemFields>,
    /// The address to bill; the shipping address when left out.
    pub billing_address: Option<SubscriptionAddressFields>,
    /// The address orders ship to.
    pub shipping_address: SubscriptionAddressFields,
    /// The payment method.
    pub payment_details: Option<SubscriptionPaymentDetailsFields>,
    /// A discount code, kept and sent with each order.
    pub discount_code: Option<String>,
    /// A note on the subscription, kept and shown.
    pub note: Option<String>,
    /// A note sent as the `notes` of each order.
    pub order_note: Option<String>,
    /// The shipping lines, at most 20.
    #[schema(max_items = 20)]
    pub shipping_lines: Option<Vec<SubscriptionShippingLineFields>>,
}

/// A line item of Create Subscription. The product fields (`title` to `taxable`) are kept when
/// the catalogue does not have the variant; the catalogue's values win when it does.
#[derive(ToSchema)]
pub struct SubscriptionLineItemFields {
    /// The product's platform id.
    #[schema(example = "1001")]
    pub platform_product_id: String,
    /// The variant's platform id.
    #[schema(example = "2001")]
    pub platform_variant_id: String,
    /// How many units each order has, 1 to 10000.
    #[schema(example = 1, minimum = 1, maximum = 10000)]
    pub quantity: i64,
    /// The unit price, in cents of the base currency: 0 to 100000000.
    #[schema(example = 2500, minimum = 0, maximum = 100000000)]
    pub price: i64,
    /// The subscription group the line item is sold under: a group of the shop.
    pub subscription_group_id: Option<i64>,
    /// One of that group's billing rules (needs `subscription_group_id`).
    pub interval_id: Option<i64>,
    /// For a line item one payment covers several orders of.
    pub prepaid_metadata: Option<SubscriptionPrepaidFields>,
    /// Name and value pairs kept with the line item and sent with its orders, at most 50.
    #[schema(max_items = 50)]
    pub line_item_attributes: Option<Vec<SubscriptionLineItemAttributeFields>>,
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
    /// The item's weight in grams.
    #[schema(minimum = 0)]
    pub grams: Option<i64>,
    /// The item's weight, in `weight_unit`.
    #[schema(minimum = 0)]
    pub weight: Option<f64>,
    /// The unit of `weight`.
    pub weight_unit: Option<String>,
    /// Whether the item is shipped (true when left out).
    pub requires_shipping: Option<bool>,
    /// Whether the item is taxed (true when left out).
    pub taxable: Option<bool>,
    /// Discounts taken off the unit price in this order, at most 10.
    #[schema(max_items = 10)]
    pub discounts: Option<Vec<SubscriptionLineItemDiscountFields>>,
}

/// A line item's `prepaid_metadata`: one payment covers `prepaid_duration` orders.
#[derive(ToSchema)]
pub struct SubscriptionPrepaidFields {
    /// How many orders one payment covers.
    #[schema(minimum = 1, maximum = 1000)]
    pub prepaid_duration: i64,
    /// How many orders of the current period were placed already (0 to `prepaid_duration`;
    /// 0 when left out).
    #[schema(minimum = 0)]
    pub current_recurrence_count: Option<i64>,
    /// Kept and shown as given.
    pub prepaid_continue: Option<String>,
}

/// One of a line item's `line_item_attributes`.
#[derive(ToSchema)]
pub struct SubscriptionLineItemAttributeFields {
    /// The attribute's name, once per line item.
    #[schema(min_length = 1, max_length = 255)]
    pub name: String,
    /// The attribute's value (empty when left out).
    pub value: Option<String>,
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
#[derive(ToSchema)]
pub struct SubscriptionLineItemDiscountFields {
    /// How the discount takes off the unit price.
    pub discount_type: SubscriptionDiscountType,
    /// The percent of the unit price taken; required for a `percentage` discount.
    #[schema(minimum = 0, maximum = 100)]
    pub percentage_value: Option<f64>,
    /// The cents of the base currency taken off each unit; required for a `fixed_amount`
    /// discount.
    #[schema(minimum = 0)]
    pub fixed_value: Option<i64>,
    /// The discount's description, kept and shown.
    pub description: Option<String>,
}

/// A shipping line of Create and Update Subscription.
#[derive(ToSchema)]
pub struct SubscriptionShippingLineFields {
    /// The shipping method's name (not blank).
    #[schema(min_length = 1)]
    pub name: String,
    /// The shipping method's code.
    pub code: Option<String>,
    /// A tag of the line.
    pub tag: Option<String>,
    /// The price of the shipping, in cents of the base currency: 0 (when left out) to
    /// 100000000.
    #[schema(minimum = 0, maximum = 100000000)]
    pub price: Option<i64>,
}

/// `payment_details` of Create Subscription.
#[derive(ToSchema)]
pub struct SubscriptionPaymentDetailsFields {
    /// The payment gateway: shown as `payment_gateway_public_id`.
    pub gateway_name: String,
    /// The customer's id at the gateway: kept, never shown.
    pub gateway_customer_id: Option<String>,
    /// The payment method's token: shown as `payment_method_token`.
    pub gateway_payment_id: Option<String>,
    /// When the method expires.
    pub expires_at: Option<PaymentExpiry>,
}

/// The body of Update Subscription: the fields given change, the others stay. The rule texts
/// are generated from the rules, and `latest_status_log` is written by actions only.
#[derive(ToSchema)]
pub struct SubscriptionUpdateRequest {
    /// The fields to change.
    pub subscription: SubscriptionUpdateFields,
}

/// `subscription` of Update Subscription. Null or blank text clears a text field.
#[derive(ToSchema)]
pub struct SubscriptionUpdateFields {
    /// Changes of the subscription's customer, as Update Customer makes them.
    pub customer: Option<SubscriptionCustomerUpdateFields>,
    /// The client's own reference.
    pub external_id: Option<String>,
    /// The idempotency key, which no other subscription of the shop may have.
    pub idempotency_key: Option<String>,
    /// The next order date; a change ends a retry wait (unless `next_processing_datetime` is
    /// given too).
    pub next_order_datetime: Option<Timestamp>,
    /// The next payment date.
    pub next_payment_datetime: Option<Timestamp>,
    /// The end of a retry wait.
    pub next_processing_datetime: Option<Timestamp>,
    /// When a payment was last made.
    pub last_payment_datetime: Option<Timestamp>,
    /// The order date of the last order.
    pub last_order_datetime: Option<Timestamp>,
    /// When the last order was placed.
    pub last_processed_datetime: Option<Timestamp>,
    /// When the subscription was placed.
    pub placed_at: Option<Timestamp>,
    /// The status to move to, taken as the action it maps to.
    pub subscription_status: Option<SettableSubscriptionStatus>,
    /// The new payment method's token.
    pub payment_method_token: Option<String>,
    /// The new payment method's gateway.
    pub payment_gateway_public_id: Option<String>,
    /// When the payment method expires; null clears it.
    pub payment_method_expires_at: Option<PaymentExpiry>,
    /// The order rule, checked as at creation; it is the payment rule too unless
    /// `payment_rrule` is given.
    pub order_rrule: Option<String>,
    /// The payment rule.
    pub payment_rrule: Option<String>,
    /// Failed attempts at the current order.
    #[schema(minimum = 0)]
    pub current_retries: Option<i64>,
    /// How many orders were placed.
    #[schema(minimum = 0)]
    pub orders_processed: Option<i64>,
    /// The ISO 4217 currency orders are charged in.
    #[schema(pattern = "^[A-Z]{3}$")]
    pub charged_currency: Option<String>,
    /// The ISO 4217 currency of the prices.
    #[schema(pattern = "^[A-Z]{3}$")]
    pub base_currency: Option<String>,
    /// What one unit of the base currency is in the charged currency: 0.000001 to 1000000,
    /// and given whenever a currency changed and the two differ.
    #[schema(minimum = 0.000001, maximum = 1000000)]
    pub base_to_charged_exchange_rate: Option<f64>,
    /// A new address of the customer, which the subscription bills to.
    pub billing_address: Option<SubscriptionAddressFields>,
    /// A new address of the customer, which the subscription ships to.
    pub shipping_address: Option<SubscriptionAddressFields>,
    /// The id of the customer's live address to bill to.
    pub billing_address_id: Option<i64>,
    /// The id of the customer's live address to ship to.
    pub shipping_address_id: Option<i64>,
    /// The discount code.
    pub discount_code: Option<String>,
    /// The code of the last failed order attempt.
    pub last_failure_code: Option<String>,
    /// That failure as a sentence.
    pub last_failure_reason: Option<String>,
    /// That failure's details; null (or no `message`) clears them.
    pub last_failure_details: Option<SubscriptionFailureDetailsFields>,
    /// The note on the subscription.
    pub note: Option<String>,
    /// The note sent with each order.
    pub order_note: Option<String>,
    /// The shipping lines from now on (`[]` removes them), at most 20.
    #[schema(max_items = 20)]
    pub shipping_lines: Option<Vec<SubscriptionShippingLineFields>>,
}

/// `last_failure_details` of Update Subscription.
#[derive(ToSchema)]
pub struct SubscriptionFailureDetailsFields {
    /// What failed.
    pub message: Option<String>,
}

/// The body of Skip: the order date to skip (its day in the shop's zone counts).
#[derive(ToSchema)]
pub struct SubscriptionSkipRequest {
    /// The order date to skip.
    pub order_datetime: Timestamp,
}

/// The body of Change Quantity.
#[derive(ToSchema)]
pub struct SubscriptionQuantityRequest {
    /// The line item's new quantity, 1 to 10000.
    #[schema(minimum = 1, maximum = 10000)]
    pub quantity: i64,
}

/// The body of Change Frequency.
#[derive(ToSchema)]
pub struct SubscriptionFrequencyRequest {
    /// The new order rule, checked as at creation.
    pub order_rrule: String,
}

/// The body of Change Shipping Address: exactly one of `shipping_address` (a new address,
/// added to the customer) and `address_id` (one of the customer's).
#[derive(ToSchema)]
pub struct SubscriptionShippingAddressRequest {
    /// A new address of the customer.
    pub shipping_address: Option<SubscriptionAddressFields>,
    /// The id of one of the customer's addresses.
    pub address_id: Option<i64>,
}

/// The body of Change Payment Method.
#[derive(ToSchema)]
pub struct SubscriptionPaymentMethodRequest {
    /// The new payment method's token (not blank).
    #[schema(min_length = 1)]
    pub payment_method_token: String,
    /// The gateway that takes the token (not blank).
    #[schema(min_length = 1)]
    pub payment_gateway_public_id: String,
    /// When the new method expires.
    pub expires_at: Option<PaymentExpiry>,
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
            id: 1,
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
                subscription_group_id: Some(4),
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
            ShippingAddressChange::Existing { address_id: 12 }
        );
        assert_eq!(
            parse_shipping_address_change(&json!({"address_id": " 2 "})).unwrap(),
            ShippingAddressChange::Existing { address_id: 2 }
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
}
