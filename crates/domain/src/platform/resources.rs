//! The resources of the platform connector interface, as typed models.
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

    /// `text` as a decimal, when it is one: an optional `-`, digits, and optionally `.` and more
    /// digits, at most 40 characters in all.
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

    /// The decimal as written.
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

/// A decimal string (`"12.50"`, `"-3"`), as [`Decimal::parse`] reads it.
impl utoipa::PartialSchema for Decimal {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        use utoipa::openapi::schema::{ObjectBuilder, Type};
        ObjectBuilder::new()
            .schema_type(Type::String)
            .pattern(Some("^-?[0-9]+(\\.[0-9]+)?$"))
            .max_length(Some(40))
            .description(Some(
                "A decimal amount written as a string (`\"12.50\"`, `\"-3\"`), in the currency's units.",
            ))
            .into()
    }
}

impl utoipa::ToSchema for Decimal {
    fn name() -> std::borrow::Cow<'static, str> {
        std::borrow::Cow::Borrowed("PlatformDecimal")
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
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, utoipa::ToSchema)]
#[serde(transparent)]
pub struct PlatformId(String);

impl PlatformId {
    /// A platform id of this text, taken as it is.
    pub fn new(text: impl Into<String>) -> Self {
        PlatformId(text.into())
    }

    /// The id's text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether the id is empty or only whitespace (no id at all, in effect).
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
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(default)]
#[schema(as = PlatformCustomAttribute)]
pub struct CustomAttribute {
    /// What the attribute is, for people.
    pub description: String,
    /// The attribute's value.
    pub value: String,
}

impl CustomAttribute {
    /// An attribute of `value`, described by `description`.
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
        #[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
        #[serde(default)]
        $(#[$meta])*
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
    /// A customer's address (also the body and answer of the
    /// address operations, which add `platform_customer_id` and `email`).
    #[schema(as = PlatformCustomerAddress)]
    pub struct CustomerAddress {
        /// The address's platform id; absent from create requests.
        platform_id: PlatformId,
        /// The platform id of the address's customer (in the address operations' answers).
        platform_customer_id: PlatformId,
        /// The address's type, as the platform names it.
        address_type: String,
        /// What the address is used for, as the platform names it.
        address_use: String,
        /// The company name.
        company: String,
        /// The city.
        city: String,
        /// The country's name.
        country: String,
        /// The country's code.
        country_code: String,
        /// The recipient's first name.
        first_name: String,
        /// The recipient's last name.
        last_name: String,
        /// A phone number at the address.
        phone: String,
        /// An email address for the address (in the address operations' answers).
        email: String,
        /// The postal code.
        postal_code: String,
        /// The province or state's name.
        province: String,
        /// The province or state's code.
        province_code: String,
        /// The first street line.
        street_1: String,
        /// The second street line.
        street_2: String,
        /// Whether it is the customer's default address.
        is_default: bool,
    }
}

model! {
    /// A customer of the platform: the entity of Customer events and
    /// the body and answer of the customer operations.
    #[schema(as = PlatformCustomer)]
    pub struct Customer {
        /// The customer's platform id; absent from create requests.
        platform_id: PlatformId,
        /// When the platform created the customer.
        platform_created_at: Timestamp,
        /// When the platform last changed the customer; orders its events.
        platform_updated_at: Timestamp,
        /// The customer's email address.
        email: String,
        /// The customer's first name.
        first_name: String,
        /// The customer's last name.
        last_name: String,
        /// The customer's phone number.
        phone: String,
        /// The customer's addresses; left out, they are not changed.
        addresses: Vec<CustomerAddress>,
        /// The customer groups the customer belongs to (a Mercer extension of the connector's
        /// customer); left out, they are not changed; given (even empty), they are the
        /// customer's whole list of groups.
        groups: Vec<CustomerGroup>,
    }
}

model! {
    /// A customer group of the platform (wholesale, staff, VIP), as a customer's `groups` lists it.
    #[schema(as = PlatformCustomerGroup)]
    pub struct CustomerGroup {
        /// The group's platform id: required, it is what the group is known by in the shop.
        platform_id: PlatformId,
        /// The group's name; the newest one given is the group's. Left out, the group keeps
        /// the name it has.
        name: String,
    }
}

model! {
    /// A shipping or billing address of an order.
    #[schema(as = PlatformOrderAddress)]
    pub struct OrderAddress {
        /// The address's platform id; absent from create requests.
        platform_id: PlatformId,
        /// The address's type, as the platform names it.
        address_type: String,
        /// The recipient's first name.
        first_name: String,
        /// The recipient's last name.
        last_name: String,
        /// The first street line.
        street_1: String,
        /// The second street line.
        street_2: String,
        /// The city.
        city: String,
        /// The province or state's name.
        province: String,
        /// The country's name.
        country: String,
        /// The country's code.
        country_code: String,
        /// A phone number at the address.
        phone: String,
        /// The postal code.
        postal_code: String,
        /// An email address for the address.
        email: String,
        /// The province or state's code.
        province_code: String,
        /// The company name.
        company: String,
    }
}

model! {
    /// A tax charged on a line item or on shipping.
    #[schema(as = PlatformTax)]
    pub struct Tax {
        /// The tax charged, in the currency's units.
        amount: Decimal,
        /// The tax's name.
        name: String,
        /// The tax rate, as a decimal string.
        rate: Decimal,
        /// The platform's tag of the tax.
        tag: String,
    }
}

model! {
    /// A line of an order: a quantity of one variant, with its prices and taxes.
    #[schema(as = PlatformLineItem)]
    pub struct LineItem {
        /// The line's platform id; absent from create requests.
        platform_id: PlatformId,
        /// The platform id of the product sold.
        platform_product_id: PlatformId,
        /// The platform id of the variant sold.
        platform_variant_id: PlatformId,
        /// The platform id of the cart line the item came from.
        cart_line_item_platform_id: PlatformId,
        /// The line's title, for people.
        title: String,
        /// The variant's SKU.
        sku: String,
        /// A URL of the item.
        url: String,
        /// The URL of the item's image.
        image: String,
        /// Custom attributes of the line, by name (the checkout keeps its line key here).
        custom_attributes: BTreeMap<String, CustomAttribute>,
        /// How many units are sold.
        quantity: i64,
        /// The weight, in grams.
        grams: f64,
        /// The weight, in `weight_unit`.
        weight: f64,
        /// The unit of `weight`.
        weight_unit: String,
        /// Whether the line is taxed.
        taxable: bool,
        /// Whether the line is shipped.
        requires_shipping: bool,
        /// The taxes charged on the line.
        taxes: Vec<Tax>,
        /// The price of one unit, in the currency's units.
        price_per_item: Decimal,
        /// The discount on one unit, in the currency's units.
        discount_per_item: Decimal,
        /// The line's total, in the currency's units.
        total: Decimal,
        /// The line's subtotal, in the currency's units.
        subtotal: Decimal,
        /// The tax on the line, in the currency's units.
        total_tax: Decimal,
        /// The line's subtotal after discounts, in the currency's units.
        discounted_subtotal: Decimal,
    }
}

model! {
    /// A transaction of a payment at its payment provider.
    #[schema(as = PlatformTransaction)]
    pub struct Transaction {
        /// The transaction's platform id.
        platform_id: PlatformId,
        /// The payment provider's id of the transaction.
        provider_transaction_id: String,
        /// The amount, in the currency's units.
        amount: Decimal,
        /// The currency's code.
        currency: String,
        /// The transaction's status; a failed one (`declined`, `failed`…) did not go through.
        status: String,
        /// The transaction's type, as the platform names it.
        r#type: String,
    }
}

model! {
    /// A payment of an order (the body and answer of Create Payment).
    #[schema(as = PlatformPayment)]
    pub struct Payment {
        /// The payment's platform id; absent from create requests.
        platform_id: PlatformId,
        /// When the platform created the payment.
        platform_created_at: Timestamp,
        /// When the platform last changed the payment.
        platform_updated_at: Timestamp,
        /// The payment's transactions at its provider.
        transactions: Vec<Transaction>,
        /// A description of the payment.
        description: String,
        /// The payment provider.
        provider: String,
        /// The payment method.
        payment_method: String,
        /// The currency's code.
        currency: String,
        /// The amount to pay, in the currency's units.
        amount_planned: Decimal,
        /// The payment's status; a failed one (`declined`, `failed`…) did not go through.
        status: String,
        /// Custom attributes of the payment, by name (Mercer keeps its key of the
        /// payment here).
        custom_attributes: BTreeMap<String, CustomAttribute>,
    }
}

model! {
    /// An order of the platform: the entity of Order events and the body and answer of the
    /// order operations.
    #[schema(as = PlatformOrder)]
    pub struct Order {
        /// The order's platform id; absent from create requests.
        platform_id: PlatformId,
        /// When the platform last changed the order; orders its events.
        platform_updated_at: Timestamp,
        /// When the order was placed.
        placed_at: Timestamp,
        /// The order's number, for people.
        order_number: String,
        /// The platform id of the order's customer.
        platform_customer_id: PlatformId,
        /// Where the order ships.
        shipping_addresses: Vec<OrderAddress>,
        /// The billing address.
        billing_address: OrderAddress,
        /// The order's lines.
        line_items: Vec<LineItem>,
        /// The order's payments.
        payments: Vec<Payment>,
        /// The shipping method's name.
        shipping_method: String,
        /// The IP address of the browser the order was placed from.
        browser_ip: String,
        /// Where the order came from, as the platform names it.
        source: String,
        /// What created the order, as the platform names it.
        created_via: String,
        /// The locale the order was placed in.
        locale: String,
        /// Whether it is a test order.
        test: bool,
        /// Notes of the shop about the order.
        notes: String,
        /// Notes the customer may see.
        public_notes: String,
        /// Custom attributes of the order, by name.
        custom_attributes: BTreeMap<String, CustomAttribute>,
        /// The shipping price before tax, in the currency's units.
        shipping_subtotal: Decimal,
        /// The tax on shipping, in the currency's units.
        shipping_tax: Decimal,
        /// The discount, in the currency's units.
        discount: Decimal,
        /// The lines' subtotal, in the currency's units.
        subtotal: Decimal,
        /// The tax on the subtotal, in the currency's units.
        subtotal_tax: Decimal,
        /// All the tax, in the currency's units.
        total_tax: Decimal,
        /// The order's total, in the currency's units.
        total: Decimal,
        /// What was refunded, in the currency's units.
        refunded_amount: Decimal,
        /// The taxes charged on shipping.
        shipping_taxes: Vec<Tax>,
        /// The currency's code.
        currency: String,
        /// The order's status, as the platform names it.
        order_status: String,
        /// The order's fulfillment status; Mercer acts when it becomes `fulfilled`.
        fulfillment_status: String,
        /// The order's payment status, as the platform names it.
        financial_status: String,
    }
}

model! {
    /// One of the option values that make a variant (its value of one of the product's options).
    #[schema(as = PlatformVariantOptionValue)]
    pub struct VariantOptionValue {
        /// The option value's platform id.
        platform_id: PlatformId,
        /// The platform id of the product option it is a value of.
        platform_product_option_id: PlatformId,
        /// The value's label, for people.
        label: String,
        /// The value's name.
        name: String,
    }
}

model! {
    /// A variant of a product: what a line item sells.
    #[schema(as = PlatformVariant)]
    pub struct Variant {
        /// The variant's platform id.
        platform_id: PlatformId,
        /// The variant's name.
        name: String,
        /// The variant's SKU.
        sku: String,
        /// The variant's barcode (GTIN, UPC, EAN), when the platform has one: a Mercer
        /// extension of the connector's variant, shown as the checkout's `product_data.barcode`.
        barcode: String,
        /// The URL of the variant's image.
        image_url: String,
        /// What tracks the variant's inventory, as the platform names it.
        inventory_tracking_entity: String,
        /// The service that tracks the variant's inventory.
        inventory_tracking_service: String,
        /// The variant's tax code.
        tax_code: String,
        /// The unit of `weight`.
        weight_unit: String,
        /// The price to compare with (before a sale), in the currency's units.
        compare_at_price: Decimal,
        /// What a unit costs the shop, in the currency's units.
        cost: Decimal,
        /// The variant's price, in the currency's units.
        price: Decimal,
        /// The variant's weight, in `weight_unit`.
        weight: Decimal,
        /// The variant's weight, in grams.
        grams: f64,
        /// How many units are in stock.
        inventory_quantity: i64,
        /// Whether it may be ordered out of stock.
        allow_backorder: bool,
        /// Whether it is shipped.
        require_shipping: bool,
        /// Whether it is exempt from tax.
        tax_exempt: bool,
        /// The variant's name by language code.
        localized_names: BTreeMap<String, String>,
        /// The option values that make this variant.
        option_values: Vec<VariantOptionValue>,
    }
}

model! {
    /// A value a product option offers.
    #[schema(as = PlatformOptionValue)]
    pub struct OptionValue {
        /// The value's platform id.
        platform_id: PlatformId,
        /// Whether it is the option's default value.
        is_default: bool,
        /// The value's label, for people.
        label: String,
        /// The value's place among the option's values.
        position: i64,
    }
}

model! {
    /// An option a product's variants differ by (a size, a colour).
    #[schema(as = PlatformProductOption)]
    pub struct ProductOption {
        /// The option's platform id.
        platform_id: PlatformId,
        /// The option's name.
        name: String,
        /// The option's place among the product's options.
        position: i64,
        /// The values it offers.
        option_values: Vec<OptionValue>,
    }
}

model! {
    /// An image of a product.
    #[schema(as = PlatformImage)]
    pub struct Image {
        /// The image's platform id.
        platform_id: PlatformId,
        /// The image's name.
        name: String,
        /// The image's URL.
        src: String,
        /// The image's place among the product's images.
        position: i64,
    }
}

model! {
    /// A product category: the entity of Category events, also listed in its products.
    #[schema(as = PlatformCategory)]
    pub struct Category {
        /// The category's platform id.
        platform_id: PlatformId,
        /// When the platform last changed the category; orders its events.
        platform_updated_at: Timestamp,
        /// The URL of the category's image.
        image_url: String,
        /// The category's name.
        name: String,
    }
}

model! {
    /// A product of the shop's catalogue, with its variants: the entity of Product events.
    #[schema(as = PlatformProduct)]
    pub struct Product {
        /// The product's platform id.
        platform_id: PlatformId,
        /// When the platform last changed the product; orders its events.
        platform_updated_at: Timestamp,
        /// The product's name.
        name: String,
        /// The product's description.
        description: String,
        /// The product's handle (the slug of its URL).
        handle: String,
        /// The product's page URL.
        url: String,
        /// The product's vendor.
        vendor: String,
        /// The product's type, as the shop names it.
        r#type: String,
        /// The product's tax code.
        tax_code: String,
        /// The product's tags, comma separated.
        tags: String,
        /// Whether the product is published.
        published: bool,
        /// How many units are in stock.
        inventory_quantity: i64,
        /// What tracks the product's inventory, as the platform names it.
        inventory_tracking_entity: String,
        /// The service that tracks the product's inventory.
        inventory_tracking_service: String,
        /// The product's name by language code.
        localized_names: BTreeMap<String, String>,
        /// The product's description by language code.
        localized_descriptions: BTreeMap<String, String>,
        /// The categories it is in.
        categories: Vec<Category>,
        /// The product's variants.
        variants: Vec<Variant>,
        /// The options its variants differ by.
        options: Vec<ProductOption>,
        /// The product's images.
        images: Vec<Image>,
    }
}

/// Most items any list of an entity holds (a customer's addresses, a product's variants, images
/// and options, an order's line items…), and most entries any map of it holds (custom
/// attributes, localized names). An event or a synced entity holding more is refused: each item
/// becomes a row or a step of applying it, and one entity must not hold the single writer long.
pub const MAX_ENTITY_LIST_ITEMS: usize = 250;

/// The lists (and maps) of an entity that hold more than [`MAX_ENTITY_LIST_ITEMS`], with their
/// sizes, by their paths under the entity (`addresses`, `variants[3].option_values`). The items
/// of a list over the limit are not looked into.
#[derive(Debug, Default)]
pub(crate) struct OversizedLists(Vec<(String, usize)>);

impl OversizedLists {
    /// Notes `path` when it holds `len` items, more than the limit; answers whether it is within
    /// the limit (so that its items may be looked into).
    fn within(&mut self, path: impl FnOnce() -> String, len: usize) -> bool {
        if len > MAX_ENTITY_LIST_ITEMS {
            self.0.push((path(), len));
            return false;
        }
        true
    }

    /// Notes an optional list or map by its length, as [`OversizedLists::within`].
    fn check(&mut self, path: &str, len: Option<usize>) -> bool {
        len.is_none_or(|len| self.within(|| path.to_string(), len))
    }

    /// The paths found, each with its size.
    pub(crate) fn into_paths(self) -> Vec<(String, usize)> {
        self.0
    }
}

impl Customer {
    /// The lists of the customer over [`MAX_ENTITY_LIST_ITEMS`]: its `addresses` and `groups`.
    pub(crate) fn oversized_lists(&self) -> OversizedLists {
        let mut found = OversizedLists::default();
        found.check("addresses", self.addresses.as_ref().map(Vec::len));
        found.check("groups", self.groups.as_ref().map(Vec::len));
        found
    }

    /// The paths of the customer's groups that have no platform id (absent or blank), such as
    /// `groups[1].platform_id`: a group is known by its platform id alone. A list over
    /// [`MAX_ENTITY_LIST_ITEMS`] is not looked into.
    pub(crate) fn groups_without_id(&self) -> Vec<String> {
        self.groups
            .iter()
            .filter(|groups| groups.len() <= MAX_ENTITY_LIST_ITEMS)
            .flatten()
            .enumerate()
            .filter(|(_, group)| group.platform_id.as_ref().is_none_or(PlatformId::is_blank))
            .map(|(index, _)| format!("groups[{index}].platform_id"))
            .collect()
    }
}

impl Order {
    /// The lists and maps of the order over [`MAX_ENTITY_LIST_ITEMS`]: its `line_items` (and
    /// each one's `taxes` and `custom_attributes`), `shipping_addresses`, `payments` (and each
    /// one's `transactions` and `custom_attributes`), `shipping_taxes` and `custom_attributes`.
    pub(crate) fn oversized_lists(&self) -> OversizedLists {
        let mut found = OversizedLists::default();
        if found.check("line_items", self.line_items.as_ref().map(Vec::len)) {
            for (index, item) in self.line_items.iter().flatten().enumerate() {
                let path = |name: &str| format!("line_items[{index}].{name}");
                found.within(|| path("taxes"), item.taxes.as_ref().map_or(0, Vec::len));
                found.within(
                    || path("custom_attributes"),
                    item.custom_attributes.as_ref().map_or(0, BTreeMap::len),
                );
            }
        }
        found.check(
            "shipping_addresses",
            self.shipping_addresses.as_ref().map(Vec::len),
        );
        if found.check("payments", self.payments.as_ref().map(Vec::len)) {
            for (index, payment) in self.payments.iter().flatten().enumerate() {
                let path = |name: &str| format!("payments[{index}].{name}");
                found.within(
                    || path("transactions"),
                    payment.transactions.as_ref().map_or(0, Vec::len),
                );
                found.within(
                    || path("custom_attributes"),
                    payment.custom_attributes.as_ref().map_or(0, BTreeMap::len),
                );
            }
        }
        found.check("shipping_taxes", self.shipping_taxes.as_ref().map(Vec::len));
        found.check(
            "custom_attributes",
            self.custom_attributes.as_ref().map(BTreeMap::len),
        );
        found
    }
}

impl Product {
    /// The lists and maps of the product over [`MAX_ENTITY_LIST_ITEMS`]: its `variants` (and
    /// each one's `option_values` and `localized_names`), `options` (and each one's
    /// `option_values`), `images`, `categories`, `localized_names` and `localized_descriptions`.
    pub(crate) fn oversized_lists(&self) -> OversizedLists {
        let mut found = OversizedLists::default();
        if found.check("variants", self.variants.as_ref().map(Vec::len)) {
            for (index, variant) in self.variants.iter().flatten().enumerate() {
                let path = |name: &str| format!("variants[{index}].{name}");
                found.within(
                    || path("option_values"),
                    variant.option_values.as_ref().map_or(0, Vec::len),
                );
                found.within(
                    || path("localized_names"),
                    variant.localized_names.as_ref().map_or(0, BTreeMap::len),
                );
            }
        }
        if found.check("options", self.options.as_ref().map(Vec::len)) {
            for (index, option) in self.options.iter().flatten().enumerate() {
                found.within(
                    || format!("options[{index}].option_values"),
                    option.option_values.as_ref().map_or(0, Vec::len),
                );
            }
        }
        found.check("images", self.images.as_ref().map(Vec::len));
        found.check("categories", self.categories.as_ref().map(Vec::len));
        found.check(
            "localized_names",
            self.localized_names.as_ref().map(BTreeMap::len),
        );
        found.check(
            "localized_descriptions",
            self.localized_descriptions.as_ref().map(BTreeMap::len),
        );
        found
    }

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
    /// The cursor of the next page; empty or absent on the last one.
    pub next: Option<String>,
    /// The cursor of the previous page; empty or absent on the first one.
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
