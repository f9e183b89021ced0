//! The resources of the platform connector interface (seed 000 §2), as typed models.
//!
//! Every field is optional so the same types carry complete entities, partial updates (fields
//! left out are left alone) and create requests (no `platform_id` yet). Absent fields are not
//! serialized; unknown fields are ignored. Money, rates and weights are decimal strings,
//! checked on the way in; times are RFC 3339.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Deserializer, Serialize};

use crate::kernel::money::{Cents, CurrencyCode};
use crate::kernel::time::Timestamp;

/// A decimal amount written as a string (`"12.50"`, `"-3"`), as the connector interface writes
/// money, rates and variant weights.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct Decimal(String);

impl Decimal {
    /// `amount` in `currency`'s units (1250 cents of USD: "12.50").
    pub fn of_cents(amount: Cents, currency: &CurrencyCode) -> Option<Decimal> {
        Decimal::parse(&amount.to_decimal(currency))
    }

    pub fn parse(text: &str) -> Option<Decimal> {
        let digits = text.strip_prefix('-').unwrap_or(text);
        let (whole, fraction) = match digits.split_once('.') {
            Some((whole, fraction)) => (whole, Some(fraction)),
            None => (digits, None),
        };
        let all_digits = |part: &str| !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit());
        let valid = all_digits(whole) && fraction.is_none_or(all_digits) && text.len() <= 40;
        valid.then(|| Decimal(text.to_string()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether the amount is below zero (`"-0.00"` is not).
    pub fn is_negative(&self) -> bool {
        self.0
            .strip_prefix('-')
            .is_some_and(|digits| digits.bytes().any(|b| b.is_ascii_digit() && b != b'0'))
    }
}

impl<'de> Deserialize<'de> for Decimal {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = <std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
        Decimal::parse(&text).ok_or_else(|| {
            serde::de::Error::custom(format!(
                "{text:?} is not a decimal string such as \"12.50\""
            ))
        })
    }
}

/// An id assigned by the platform. The interface writes them as strings; platforms with
/// numeric ids may send numbers, which are kept as their decimal text.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(transparent)]
pub struct PlatformId(String);

impl PlatformId {
    pub fn new(text: impl Into<String>) -> Self {
        PlatformId(text.into())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn is_blank(&self) -> bool {
        self.0.trim().is_empty()
    }
}

impl fmt::Display for PlatformId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for PlatformId {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(PlatformIdVisitor)
    }
}

/// Strings and integers are platform ids; anything else is refused with one message.
struct PlatformIdVisitor;

impl PlatformIdVisitor {
    fn refuse<E: serde::de::Error>() -> E {
        E::custom("expected a platform id (a string or an integer)")
    }
}

impl<'de> serde::de::Visitor<'de> for PlatformIdVisitor {
    type Value = PlatformId;

    fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("a platform id (a string or an integer)")
    }

    fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<PlatformId, E> {
        Ok(PlatformId(text.to_string()))
    }

    fn visit_string<E: serde::de::Error>(self, text: String) -> Result<PlatformId, E> {
        Ok(PlatformId(text))
    }

    fn visit_i64<E: serde::de::Error>(self, number: i64) -> Result<PlatformId, E> {
        Ok(PlatformId(number.to_string()))
    }

    fn visit_u64<E: serde::de::Error>(self, number: u64) -> Result<PlatformId, E> {
        Ok(PlatformId(number.to_string()))
    }

    fn visit_f64<E: serde::de::Error>(self, _: f64) -> Result<PlatformId, E> {
        Err(Self::refuse())
    }

    fn visit_bool<E: serde::de::Error>(self, _: bool) -> Result<PlatformId, E> {
        Err(Self::refuse())
    }

    fn visit_unit<E: serde::de::Error>(self) -> Result<PlatformId, E> {
        Err(Self::refuse())
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, _: A) -> Result<PlatformId, A::Error> {
        Err(Self::refuse())
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, _: A) -> Result<PlatformId, A::Error> {
        Err(Self::refuse())
    }
}

/// `{description, value}`: an entry of `custom_attributes`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct CustomAttribute {
    pub description: String,
    pub value: String,
}

impl CustomAttribute {
    pub fn new(description: &str, value: impl Into<String>) -> CustomAttribute {
        CustomAttribute {
            description: description.to_string(),
            value: value.into(),
        }
    }
}

pub(crate) type CustomAttributes = BTreeMap<String, CustomAttribute>;

macro_rules! model {
    (
        $(#[$meta:meta])*
        pub struct $name:ident {
            $( $(#[$field_meta:meta])* $field:ident : $ty:ty ),* $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
        #[serde(default)]
        pub struct $name {
            $(
                $(#[$field_meta])*
                #[serde(skip_serializing_if = "Option::is_none")]
                pub $field: Option<$ty>,
            )*
        }

        impl $name {
            /// The fields this one leaves out take `base`'s values: applied to an incoming
            /// partial update, the stored fields it does not mention stay. Returns whether
            /// `base` had any such field.
            pub fn fill_from(&mut self, base: &$name) -> bool {
                let mut filled = false;
                $(
                    if self.$field.is_none() && base.$field.is_some() {
                        self.$field = base.$field.clone();
                        filled = true;
                    }
                )*
                filled
            }

            /// Whether every field `incoming` has is already here with the same value.
            pub fn covers(&self, incoming: &$name) -> bool {
                true $(&& (incoming.$field.is_none() || self.$field == incoming.$field))*
            }
        }
    };
}

model! {
    /// A customer's address (seed 000 §2 Customer address; also the body and answer of the
    /// address operations, which add `platform_customer_id` and `email`).
    pub struct CustomerAddress {
        platform_id: PlatformId,
        platform_customer_id: PlatformId,
        address_type: String,
        address_use: String,
        company: String,
        city: String,
        country: String,
        country_code: String,
        first_name: String,
        last_name: String,
        phone: String,
        email: String,
        postal_code: String,
        province: String,
        province_code: String,
        street_1: String,
        street_2: String,
        is_default: bool,
    }
}

model! {
    pub struct Customer {
        platform_id: PlatformId,
        platform_created_at: Timestamp,
        platform_updated_at: Timestamp,
        email: String,
        first_name: String,
        last_name: String,
        phone: String,
        addresses: Vec<CustomerAddress>,
    }
}

model! {
    pub struct OrderAddress {
        platform_id: PlatformId,
        address_type: String,
        first_name: String,
        last_name: String,
        street_1: String,
        street_2: String,
        city: String,
        province: String,
        country: String,
        country_code: String,
        phone: String,
        postal_code: String,
        email: String,
        province_code: String,
        company: String,
    }
}

model! {
    pub struct Tax {
        amount: Decimal,
        name: String,
        rate: Decimal,
        tag: String,
    }
}

model! {
    pub struct LineItem {
        platform_id: PlatformId,
        platform_product_id: PlatformId,
        platform_variant_id: PlatformId,
        cart_line_item_platform_id: PlatformId,
        title: String,
        sku: String,
        url: String,
        image: String,
        custom_attributes: CustomAttributes,
        quantity: i64,
        grams: f64,
        weight: f64,
        weight_unit: String,
        taxable: bool,
        requires_shipping: bool,
        taxes: Vec<Tax>,
        price_per_item: Decimal,
        discount_per_item: Decimal,
        total: Decimal,
        subtotal: Decimal,
        total_tax: Decimal,
        discounted_subtotal: Decimal,
    }
}

model! {
    pub struct Transaction {
        platform_id: PlatformId,
        provider_transaction_id: String,
        amount: Decimal,
        currency: String,
        status: String,
        r#type: String,
    }
}

model! {
    pub struct Payment {
        platform_id: PlatformId,
        platform_created_at: Timestamp,
        platform_updated_at: Timestamp,
        transactions: Vec<Transaction>,
        description: String,
        provider: String,
        payment_method: String,
        currency: String,
        amount_planned: Decimal,
        status: String,
        custom_attributes: CustomAttributes,
    }
}

model! {
    pub struct Order {
        platform_id: PlatformId,
        platform_updated_at: Timestamp,
        placed_at: Timestamp,
        order_number: String,
        platform_customer_id: PlatformId,
        shipping_addresses: Vec<OrderAddress>,
        billing_address: OrderAddress,
        line_items: Vec<LineItem>,
        payments: Vec<Payment>,
        shipping_method: String,
        browser_ip: String,
        source: String,
        created_via: String,
        locale: String,
        test: bool,
        notes: String,
        public_notes: String,
        custom_attributes: CustomAttributes,
        shipping_subtotal: Decimal,
        shipping_tax: Decimal,
        discount: Decimal,
        subtotal: Decimal,
        subtotal_tax: Decimal,
        total_tax: Decimal,
        total: Decimal,
        refunded_amount: Decimal,
        shipping_taxes: Vec<Tax>,
        currency: String,
        order_status: String,
        fulfillment_status: String,
        financial_status: String,
    }
}

model! {
    pub struct VariantOptionValue {
        platform_id: PlatformId,
        platform_product_option_id: PlatformId,
        label: String,
        name: String,
    }
}

model! {
    pub struct Variant {
        platform_id: PlatformId,
        name: String,
        sku: String,
        /// The variant's barcode (GTIN, UPC, EAN), when the platform has one: a Mercer
        /// extension of seed 000's variant, shown as the checkout's `product_data.barcode`.
        barcode: String,
        image_url: String,
        inventory_tracking_entity: String,
        inventory_tracking_service: String,
        tax_code: String,
        weight_unit: String,
        compare_at_price: Decimal,
        cost: Decimal,
        price: Decimal,
        weight: Decimal,
        grams: f64,
        inventory_quantity: i64,
        allow_backorder: bool,
        require_shipping: bool,
        tax_exempt: bool,
        localized_names: BTreeMap<String, String>,
        option_values: Vec<VariantOptionValue>,
    }
}

model! {
    pub struct OptionValue {
        platform_id: PlatformId,
        is_default: bool,
        label: String,
        position: i64,
    }
}

model! {
    pub struct ProductOption {
        platform_id: PlatformId,
        name: String,
        position: i64,
        option_values: Vec<OptionValue>,
    }
}

model! {
    pub struct Image {
        platform_id: PlatformId,
        name: String,
        src: String,
        position: i64,
    }
}

model! {
    pub struct Category {
        platform_id: PlatformId,
        platform_updated_at: Timestamp,
        image_url: String,
        name: String,
    }
}

model! {
    pub struct Product {
        platform_id: PlatformId,
        platform_updated_at: Timestamp,
        name: String,
        description: String,
        handle: String,
        url: String,
        vendor: String,
        r#type: String,
        tax_code: String,
        tags: String,
        published: bool,
        inventory_quantity: i64,
        inventory_tracking_entity: String,
        inventory_tracking_service: String,
        localized_names: BTreeMap<String, String>,
        localized_descriptions: BTreeMap<String, String>,
        categories: Vec<Category>,
        variants: Vec<Variant>,
        options: Vec<ProductOption>,
        images: Vec<Image>,
    }
}

impl Product {
    /// The paths (under the product) of its variants' prices that are below zero: `price`,
    /// `compare_at_price` and `cost`. A catalogue price is never negative; a cart priced from
    /// one would pay the shopper.
    pub fn negative_prices(&self) -> Vec<String> {
        let mut found = Vec::new();
        for (index, variant) in self.variants.iter().flatten().enumerate() {
            for (name, price) in [
                ("price", &variant.price),
                ("compare_at_price", &variant.compare_at_price),
                ("cost", &variant.cost),
            ] {
                if price.as_ref().is_some_and(Decimal::is_negative) {
                    found.push(format!("variants[{index}].{name}"));
                }
            }
        }
        found
    }
}

/// `pagination` of the connector's list operations: opaque cursors, empty or absent at the end.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Pagination {
    pub next: Option<String>,
    pub prev: Option<String>,
}

impl Pagination {
    /// The cursor of the next page, if there is one.
    pub fn next_cursor(&self) -> Option<&str> {
        self.next.as_deref().filter(|cursor| !cursor.is_empty())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn decimals_are_strings_of_digits() {
        for good in ["0", "12.50", "-3", "1000000.0001"] {
            assert!(Decimal::parse(good).is_some(), "{good}");
        }
        for bad in ["", "12,50", "1e3", ".5", "5.", "--1", "abc", " 1"] {
            assert!(Decimal::parse(bad).is_none(), "{bad}");
        }
        assert!(
            serde_json::from_value::<Decimal>(json!(12.5)).is_err(),
            "numbers are refused"
        );
    }

    #[test]
    fn platform_ids_accept_strings_and_integers() {
        let id: PlatformId = serde_json::from_value(json!("cus_1")).unwrap();
        assert_eq!(id.as_str(), "cus_1");
        let id: PlatformId = serde_json::from_value(json!(7_230_000_000_123_i64)).unwrap();
        assert_eq!(id.as_str(), "7230000000123");
        assert!(serde_json::from_value::<PlatformId>(json!({"id": 1})).is_err());
    }

    #[test]
    fn unknown_fields_are_ignored_and_absent_ones_not_written() {
        let customer: Customer = serde_json::from_value(json!({
            "platform_id": "c1",
            "email": "a@example.test",
            "loyalty_tier": "gold",
            "addresses": [{"platform_id": "a1", "city": "Lyon", "is_default": true}]
        }))
        .unwrap();
        assert_eq!(customer.email.as_deref(), Some("a@example.test"));
        let written = serde_json::to_value(&customer).unwrap();
        assert_eq!(
            written,
            json!({
                "platform_id": "c1",
                "email": "a@example.test",
                "addresses": [{"platform_id": "a1", "city": "Lyon", "is_default": true}]
            })
        );
    }

    #[test]
    fn a_full_order_round_trips() {
        let order = json!({
            "platform_id": "o1",
            "platform_updated_at": "2024-03-01T10:30:00Z",
            "placed_at": "2024-03-01T10:00:00Z",
            "order_number": "1001",
            "platform_customer_id": "c1",
            "billing_address": {"first_name": "Ada", "country_code": "FR"},
            "shipping_addresses": [{"first_name": "Ada"}],
            "line_items": [{
                "platform_variant_id": "v1", "quantity": 2, "price_per_item": "10.00",
                "taxes": [{"amount": "2.00", "name": "VAT", "rate": "0.2", "tag": "vat"}],
                "custom_attributes": {"gift": {"description": "Gift wrap", "value": "yes"}}
            }],
            "payments": [{"amount_planned": "24.00", "transactions": [{"amount": "24.00", "type": "sale"}]}],
            "test": false,
            "total": "24.00",
            "currency": "EUR",
            "fulfillment_status": "unfulfilled"
        });
        let parsed: Order = serde_json::from_value(order.clone()).unwrap();
        assert_eq!(parsed.line_items.as_ref().unwrap()[0].quantity, Some(2));
        assert_eq!(serde_json::to_value(&parsed).unwrap(), order);
    }

    #[test]
    fn money_as_a_number_is_refused() {
        let result = serde_json::from_value::<Order>(json!({"line_items": [{"total": 5}]}));
        assert!(result.is_err());
    }

    #[test]
    fn the_last_page_has_no_next_cursor() {
        let last: Pagination = serde_json::from_value(json!({"next": "", "prev": "abc"})).unwrap();
        assert_eq!(last.next_cursor(), None);
        let absent: Pagination = serde_json::from_value(json!({})).unwrap();
        assert_eq!(absent.next_cursor(), None);
        let more: Pagination = serde_json::from_value(json!({"next": "abc"})).unwrap();
        assert_eq!(more.next_cursor(), Some("abc"));
    }
}
