//! Vendure's entities as the connector reads them (the GraphQL selections and their shapes),
//! and their mapping to the connector interface's resources.
//!
//! Every `platform_id` is the Vendure id as text. Money: Vendure's integers in the currency's
//! minor units become decimal strings in that currency (exactly, by the currency's exponent).

use std::collections::BTreeMap;

use mercer_domain::Timestamp;
use mercer_domain::kernel::money::{Cents, CurrencyCode};
use mercer_domain::platform::resources::{
    Category, CustomAttribute, Customer, CustomerAddress, CustomerGroup, Decimal, Image, LineItem,
    OptionValue, Order, OrderAddress, Payment, PlatformId, Product, ProductOption, Transaction,
    Variant, VariantOptionValue,
};
use serde::Deserialize;

/// The fields of a customer the connector reads.
pub const CUSTOMER_FIELDS: &str = "
    id createdAt updatedAt firstName lastName phoneNumber emailAddress
    groups { id name }
    addresses { ...MercerAddress }
";

/// The fields of an address the connector reads.
pub const ADDRESS_FRAGMENT: &str = "
fragment MercerAddress on Address {
    id fullName company streetLine1 streetLine2 city province postalCode phoneNumber
    defaultShippingAddress defaultBillingAddress
    country { code name }
    customFields { provinceCode }
}";

/// The fields of an order the connector reads.
pub const ORDER_FIELDS: &str = "
    id createdAt updatedAt orderPlacedAt code state active currencyCode
    customer { id emailAddress }
    shippingAddress { ...MercerOrderAddress }
    billingAddress { ...MercerOrderAddress }
    lines {
        id quantity unitPrice discountedUnitPrice linePrice lineTax discountedLinePrice
        discountedLinePriceWithTax taxRate
        productVariant { id productId name sku }
    }
    discounts { amount description }
    shippingLines { shippingMethod { name } }
    shipping shippingWithTax subTotal subTotalWithTax total totalWithTax
    payments { id createdAt updatedAt method amount state transactionId errorMessage metadata }
    customFields { mercerIdempotencyKey mercerTest mercerAttributes }
    history(options: {filter: {type: {eq: \"ORDER_NOTE\"}}, sort: {id: DESC}, take: 20}) {
        items { isPublic data }
    }
";

/// The fields of an order's address the connector reads.
pub const ORDER_ADDRESS_FRAGMENT: &str = "
fragment MercerOrderAddress on OrderAddress {
    fullName company streetLine1 streetLine2 city province postalCode country countryCode
    phoneNumber
}";

/// The fields of a product the connector reads.
pub const PRODUCT_FIELDS: &str = "
    id updatedAt name slug description enabled
    translations { languageCode name description }
    assets { id name source }
    optionGroups { id name options { id code name } }
    collections { id name updatedAt isPrivate featuredAsset { preview } }
    variants {
        id name sku price currencyCode stockOnHand stockAllocated trackInventory
        options { id code name groupId }
        translations { languageCode name }
        featuredAsset { preview }
    }
";

/// The fields of a collection the connector reads.
pub const COLLECTION_FIELDS: &str = "id updatedAt name isPrivate featuredAsset { preview }";

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VCustomer {
    pub id: String,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    pub first_name: String,
    pub last_name: String,
    pub phone_number: Option<String>,
    pub email_address: String,
    #[serde(default)]
    pub groups: Vec<VGroup>,
    #[serde(default)]
    pub addresses: Option<Vec<VAddress>>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct VGroup {
    pub id: String,
    pub name: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VAddress {
    pub id: String,
    pub full_name: Option<String>,
    pub company: Option<String>,
    pub street_line1: String,
    pub street_line2: Option<String>,
    pub city: Option<String>,
    pub province: Option<String>,
    pub postal_code: Option<String>,
    pub phone_number: Option<String>,
    pub default_shipping_address: Option<bool>,
    pub default_billing_address: Option<bool>,
    pub country: VCountry,
    #[serde(default)]
    pub custom_fields: Option<VAddressFields>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct VCountry {
    pub code: String,
    pub name: String,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VAddressFields {
    pub province_code: Option<String>,
}

fn text(value: &Option<String>) -> Option<String> {
    value.clone().filter(|v| !v.is_empty())
}

/// `fullName` split at its first space: Vendure keeps one name, the interface two.
pub fn split_name(full: Option<&str>) -> (Option<String>, Option<String>) {
    let full = full.unwrap_or_default().trim();
    if full.is_empty() {
        return (None, None);
    }
    match full.split_once(' ') {
        Some((first, last)) => (Some(first.to_string()), Some(last.trim().to_string())),
        None => (Some(full.to_string()), None),
    }
}

/// The interface's two names as Vendure's one.
pub fn full_name(first: Option<&str>, last: Option<&str>) -> String {
    [
        first.unwrap_or_default().trim(),
        last.unwrap_or_default().trim(),
    ]
    .into_iter()
    .filter(|part| !part.is_empty())
    .collect::<Vec<_>>()
    .join(" ")
}

impl VAddress {
    pub fn to_address(&self, customer_id: &str) -> CustomerAddress {
        let (first_name, last_name) = split_name(self.full_name.as_deref());
        let is_default = self.default_shipping_address.unwrap_or(false);
        let billing_only = !is_default && self.default_billing_address.unwrap_or(false);
        CustomerAddress {
            platform_id: Some(PlatformId::new(self.id.as_str())),
            platform_customer_id: Some(PlatformId::new(customer_id)),
            address_type: Some(if billing_only { "billing" } else { "shipping" }.to_string()),
            company: text(&self.company),
            city: text(&self.city),
            country: Some(self.country.name.clone()),
            country_code: Some(self.country.code.clone()),
            first_name,
            last_name,
            phone: text(&self.phone_number),
            postal_code: text(&self.postal_code),
            province: text(&self.province),
            province_code: self
                .custom_fields
                .as_ref()
                .and_then(|fields| text(&fields.province_code)),
            street_1: Some(self.street_line1.clone()),
            street_2: text(&self.street_line2),
            is_default: Some(is_default),
            ..CustomerAddress::default()
        }
    }
}

impl VCustomer {
    pub fn to_customer(&self) -> Customer {
        let addresses = self.addresses.as_ref().map(|addresses| {
            addresses
                .iter()
                .map(|address| {
                    let mut address = address.to_address(&self.id);
                    address.email = Some(self.email_address.clone());
                    address
                })
                .collect()
        });
        Customer {
            platform_id: Some(PlatformId::new(self.id.as_str())),
            platform_created_at: Some(self.created_at),
            platform_updated_at: Some(self.updated_at),
            email: Some(self.email_address.clone()),
            first_name: Some(self.first_name.clone()),
            last_name: Some(self.last_name.clone()),
            phone: text(&self.phone_number),
            addresses,
            groups: Some(
                self.groups
                    .iter()
                    .map(|group| CustomerGroup {
                        platform_id: Some(PlatformId::new(group.id.as_str())),
                        name: Some(group.name.clone()),
                    })
                    .collect(),
            ),
        }
    }
}

/// Vendure's integer amount in the currency's minor units as the interface's decimal string.
pub fn money(amount: i64, currency: &CurrencyCode) -> Option<Decimal> {
    Decimal::of_cents(Cents(amount), currency)
}

/// An interface decimal as Vendure's integer in minor units; None when it is not a decimal
/// of that currency (more places than the currency has).
pub fn minor_units(amount: &Decimal, currency: &CurrencyCode) -> Option<i64> {
    Cents::from_decimal(amount.as_str(), currency).map(|cents| cents.0)
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VOrder {
    pub id: String,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    pub order_placed_at: Option<Timestamp>,
    pub code: String,
    pub state: String,
    pub currency_code: String,
    pub customer: Option<VOrderCustomer>,
    pub shipping_address: Option<VOrderAddress>,
    pub billing_address: Option<VOrderAddress>,
    pub lines: Vec<VOrderLine>,
    #[serde(default)]
    pub discounts: Vec<VDiscount>,
    #[serde(default)]
    pub shipping_lines: Vec<VShippingLine>,
    pub shipping: i64,
    pub shipping_with_tax: i64,
    pub sub_total: i64,
    pub sub_total_with_tax: i64,
    pub total: i64,
    pub total_with_tax: i64,
    #[serde(default)]
    pub payments: Option<Vec<VPayment>>,
    #[serde(default)]
    pub custom_fields: Option<VOrderFields>,
    pub history: VHistory,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VOrderCustomer {
    pub id: String,
    pub email_address: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VOrderAddress {
    pub full_name: Option<String>,
    pub company: Option<String>,
    pub street_line1: Option<String>,
    pub street_line2: Option<String>,
    pub city: Option<String>,
    pub province: Option<String>,
    pub postal_code: Option<String>,
    pub country: Option<String>,
    pub country_code: Option<String>,
    pub phone_number: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VOrderLine {
    pub id: String,
    pub quantity: i64,
    pub unit_price: i64,
    pub discounted_unit_price: i64,
    pub line_price: i64,
    pub line_tax: i64,
    pub discounted_line_price: i64,
    pub discounted_line_price_with_tax: i64,
    pub product_variant: VLineVariant,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VLineVariant {
    pub id: String,
    pub product_id: String,
    pub name: String,
    pub sku: String,
}

#[derive(Debug, Clone, Deserialize)]
pub struct VDiscount {
    pub amount: i64,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VShippingLine {
    pub shipping_method: VNamed,
}

#[derive(Debug, Clone, Deserialize)]
pub struct VNamed {
    pub name: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VPayment {
    pub id: String,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    pub method: String,
    pub amount: i64,
    pub state: String,
    pub transaction_id: Option<String>,
    /// What Create Payment was sent as `custom_attributes` (Mercer's key of the payment).
    #[serde(default)]
    pub metadata: Option<serde_json::Value>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VOrderFields {
    pub mercer_idempotency_key: Option<String>,
    pub mercer_test: Option<bool>,
    pub mercer_attributes: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct VHistory {
    pub items: Vec<VHistoryEntry>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VHistoryEntry {
    pub is_public: bool,
    pub data: serde_json::Value,
}

impl VOrderAddress {
    fn to_address(&self) -> Option<OrderAddress> {
        let street = text(&self.street_line1)?;
        let (first_name, last_name) = split_name(self.full_name.as_deref());
        Some(OrderAddress {
            first_name,
            last_name,
            street_1: Some(street),
            street_2: text(&self.street_line2),
            city: text(&self.city),
            province: text(&self.province),
            country: text(&self.country),
            country_code: text(&self.country_code),
            phone: text(&self.phone_number),
            postal_code: text(&self.postal_code),
            company: text(&self.company),
            ..OrderAddress::default()
        })
    }
}

/// The interface's financial status of a Vendure order state.
fn financial_status(state: &str) -> &'static str {
    match state {
        "PaymentSettled" | "PartiallyShipped" | "Shipped" | "PartiallyDelivered" | "Delivered" => {
            "paid"
        }
        "PaymentAuthorized" => "authorized",
        "Cancelled" => "voided",
        _ => "pending",
    }
}

/// The interface's fulfillment status of a Vendure order state (Mercer acts on `fulfilled`).
fn fulfillment_status(state: &str) -> &'static str {
    match state {
        "Shipped" | "Delivered" => "fulfilled",
        "PartiallyShipped" | "PartiallyDelivered" => "partial",
        _ => "unfulfilled",
    }
}

/// The newest order note of the kind (`isPublic`), from the order's history.
fn latest_note(history: &VHistory, public: bool) -> Option<String> {
    history
        .items
        .iter()
        .find_map(|entry| match entry.is_public == public {
            true => entry
                .data
                .get("note")
                .and_then(serde_json::Value::as_str)
                .map(str::to_string),
            false => None,
        })
}

impl VOrder {
    pub fn currency(&self) -> Option<CurrencyCode> {
        CurrencyCode::parse(&self.currency_code)
    }

    pub fn to_order(&self) -> Option<Order> {
        let currency = self.currency()?;
        let money = |amount: i64| money(amount, &currency);
        let fields = self.custom_fields.clone().unwrap_or_default();
        let custom_attributes = fields
            .mercer_attributes
            .as_deref()
            .and_then(|json| serde_json::from_str::<BTreeMap<String, CustomAttribute>>(json).ok());
        let line_items = self
            .lines
            .iter()
            .map(|line| line.to_line_item(&currency))
            .collect();
        let payments = self
            .payments
            .iter()
            .flatten()
            .map(|payment| payment.to_payment(&currency))
            .collect();
        let discount: i64 = self.discounts.iter().map(|d| d.amount).sum();
        Some(Order {
            platform_id: Some(PlatformId::new(self.id.as_str())),
            platform_updated_at: Some(self.updated_at),
            placed_at: self.order_placed_at.or(Some(self.created_at)),
            order_number: Some(self.code.clone()),
            platform_customer_id: self
                .customer
                .as_ref()
                .map(|customer| PlatformId::new(customer.id.as_str())),
            shipping_addresses: Some(
                self.shipping_address
                    .as_ref()
                    .and_then(VOrderAddress::to_address)
                    .into_iter()
                    .collect(),
            ),
            billing_address: self
                .billing_address
                .as_ref()
                .and_then(VOrderAddress::to_address),
            line_items: Some(line_items),
            payments: Some(payments),
            shipping_method: self
                .shipping_lines
                .first()
                .map(|line| line.shipping_method.name.clone()),
            source: Some("vendure".to_string()),
            test: fields.mercer_test,
            notes: latest_note(&self.history, false),
            public_notes: latest_note(&self.history, true),
            custom_attributes,
            shipping_subtotal: money(self.shipping),
            shipping_tax: money(self.shipping_with_tax - self.shipping),
            discount: money(-discount),
            subtotal: money(self.sub_total),
            subtotal_tax: money(self.sub_total_with_tax - self.sub_total),
            total_tax: money(self.total_with_tax - self.total),
            total: money(self.total_with_tax),
            currency: Some(currency.as_str().to_string()),
            order_status: Some(self.state.clone()),
            fulfillment_status: Some(fulfillment_status(&self.state).to_string()),
            financial_status: Some(financial_status(&self.state).to_string()),
            ..Order::default()
        })
    }
}

impl VOrderLine {
    fn to_line_item(&self, currency: &CurrencyCode) -> LineItem {
        let money = |amount: i64| money(amount, currency);
        LineItem {
            platform_id: Some(PlatformId::new(self.id.as_str())),
            platform_product_id: Some(PlatformId::new(self.product_variant.product_id.as_str())),
            platform_variant_id: Some(PlatformId::new(self.product_variant.id.as_str())),
            title: Some(self.product_variant.name.clone()),
            sku: Some(self.product_variant.sku.clone()),
            quantity: Some(self.quantity),
            requires_shipping: Some(true),
            taxable: Some(self.line_tax != 0),
            price_per_item: money(self.unit_price),
            discount_per_item: money(self.unit_price - self.discounted_unit_price),
            subtotal: money(self.line_price),
            discounted_subtotal: money(self.discounted_line_price),
            total_tax: money(self.line_tax),
            total: money(self.discounted_line_price_with_tax),
            ..LineItem::default()
        }
    }
}

impl VPayment {
    /// The interface's payment status of a Vendure payment state.
    fn status(&self) -> &'static str {
        match self.state.as_str() {
            "Settled" => "paid",
            "Authorized" => "authorized",
            "Declined" | "Error" => "declined",
            "Cancelled" => "cancelled",
            _ => "pending",
        }
    }

    pub fn to_payment(&self, currency: &CurrencyCode) -> Payment {
        let amount = money(self.amount, currency);
        let status = self.status().to_string();
        Payment {
            platform_id: Some(PlatformId::new(self.id.as_str())),
            platform_created_at: Some(self.created_at),
            platform_updated_at: Some(self.updated_at),
            transactions: Some(vec![Transaction {
                platform_id: Some(PlatformId::new(self.id.as_str())),
                provider_transaction_id: text(&self.transaction_id),
                amount: amount.clone(),
                currency: Some(currency.as_str().to_string()),
                status: Some(status.clone()),
                r#type: Some("sale".to_string()),
            }]),
            provider: Some(self.method.clone()),
            payment_method: Some(self.method.clone()),
            currency: Some(currency.as_str().to_string()),
            amount_planned: amount,
            status: Some(status),
            custom_attributes: self
                .metadata
                .clone()
                .and_then(|metadata| serde_json::from_value(metadata).ok()),
            ..Payment::default()
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VProduct {
    pub id: String,
    pub updated_at: Timestamp,
    pub name: String,
    pub slug: String,
    pub description: String,
    pub enabled: bool,
    #[serde(default)]
    pub translations: Vec<VTranslation>,
    #[serde(default)]
    pub assets: Vec<VAsset>,
    #[serde(default)]
    pub option_groups: Vec<VOptionGroup>,
    #[serde(default)]
    pub collections: Vec<VCollection>,
    #[serde(default)]
    pub variants: Vec<VVariant>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VTranslation {
    pub language_code: String,
    pub name: String,
    #[serde(default)]
    pub description: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct VAsset {
    pub id: String,
    pub name: String,
    pub source: String,
}

#[derive(Debug, Clone, Deserialize)]
pub struct VOptionGroup {
    pub id: String,
    pub name: String,
    pub options: Vec<VOption>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VOption {
    pub id: String,
    pub code: String,
    pub name: String,
    #[serde(default)]
    pub group_id: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct VPreview {
    pub preview: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VCollection {
    pub id: String,
    pub updated_at: Timestamp,
    pub name: String,
    #[serde(default)]
    pub is_private: bool,
    pub featured_asset: Option<VPreview>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VVariant {
    pub id: String,
    pub name: String,
    pub sku: String,
    pub price: i64,
    pub currency_code: String,
    pub stock_on_hand: i64,
    pub stock_allocated: i64,
    pub track_inventory: String,
    #[serde(default)]
    pub options: Vec<VOption>,
    #[serde(default)]
    pub translations: Vec<VTranslation>,
    pub featured_asset: Option<VPreview>,
}

impl VCollection {
    pub fn to_category(&self) -> Category {
        Category {
            platform_id: Some(PlatformId::new(self.id.as_str())),
            platform_updated_at: Some(self.updated_at),
            image_url: self.featured_asset.as_ref().map(|a| a.preview.clone()),
            name: Some(self.name.clone()),
        }
    }
}

impl VVariant {
    fn to_variant(&self) -> Variant {
        let currency = CurrencyCode::parse(&self.currency_code);
        Variant {
            platform_id: Some(PlatformId::new(self.id.as_str())),
            name: Some(self.name.clone()),
            sku: Some(self.sku.clone()),
            image_url: self.featured_asset.as_ref().map(|a| a.preview.clone()),
            inventory_tracking_service: Some("vendure".to_string()),
            price: currency.and_then(|currency| money(self.price, &currency)),
            inventory_quantity: Some(self.stock_on_hand - self.stock_allocated),
            allow_backorder: Some(self.track_inventory == "FALSE"),
            require_shipping: Some(true),
            localized_names: Some(
                self.translations
                    .iter()
                    .map(|t| (t.language_code.clone(), t.name.clone()))
                    .collect(),
            ),
            option_values: Some(
                self.options
                    .iter()
                    .map(|option| VariantOptionValue {
                        platform_id: Some(PlatformId::new(option.id.as_str())),
                        platform_product_option_id: option.group_id.as_deref().map(PlatformId::new),
                        label: Some(option.name.clone()),
                        name: Some(option.code.clone()),
                    })
                    .collect(),
            ),
            ..Variant::default()
        }
    }
}

impl VProduct {
    pub fn to_product(&self) -> Product {
        let variants: Vec<Variant> = self.variants.iter().map(VVariant::to_variant).collect();
        let inventory = variants
            .iter()
            .filter_map(|variant| variant.inventory_quantity)
            .sum();
        Product {
            platform_id: Some(PlatformId::new(self.id.as_str())),
            platform_updated_at: Some(self.updated_at),
            name: Some(self.name.clone()),
            description: Some(self.description.clone()),
            handle: Some(self.slug.clone()),
            published: Some(self.enabled),
            inventory_quantity: Some(inventory),
            inventory_tracking_service: Some("vendure".to_string()),
            localized_names: Some(
                self.translations
                    .iter()
                    .map(|t| (t.language_code.clone(), t.name.clone()))
                    .collect(),
            ),
            localized_descriptions: Some(
                self.translations
                    .iter()
                    .filter_map(|t| Some((t.language_code.clone(), t.description.clone()?)))
                    .collect(),
            ),
            categories: Some(
                self.collections
                    .iter()
                    .filter(|collection| !collection.is_private)
                    .map(VCollection::to_category)
                    .collect(),
            ),
            variants: Some(variants),
            options: Some(
                self.option_groups
                    .iter()
                    .zip(1..)
                    .map(|(group, position)| ProductOption {
                        platform_id: Some(PlatformId::new(group.id.as_str())),
                        name: Some(group.name.clone()),
                        position: Some(position),
                        option_values: Some(
                            group
                                .options
                                .iter()
                                .zip(1..)
                                .map(|(option, position)| OptionValue {
                                    platform_id: Some(PlatformId::new(option.id.as_str())),
                                    is_default: Some(position == 1),
                                    label: Some(option.name.clone()),
                                    position: Some(position),
                                })
                                .collect(),
                        ),
                    })
                    .collect(),
            ),
            images: Some(
                self.assets
                    .iter()
                    .zip(1..)
                    .map(|(asset, position)| Image {
                        platform_id: Some(PlatformId::new(asset.id.as_str())),
                        name: Some(asset.name.clone()),
                        src: Some(asset.source.clone()),
                        position: Some(position),
                    })
                    .collect(),
            ),
            ..Product::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_name_splits_at_its_first_space_and_joins_back() {
        assert_eq!(
            split_name(Some("Mary Ann Smith")),
            (Some("Mary".to_string()), Some("Ann Smith".to_string()))
        );
        assert_eq!(split_name(Some("Cher")), (Some("Cher".to_string()), None));
        assert_eq!(split_name(Some("  ")), (None, None));
        assert_eq!(full_name(Some("Mary"), Some("Ann Smith")), "Mary Ann Smith");
        assert_eq!(full_name(None, Some("Smith")), "Smith");
    }

    #[test]
    fn money_converts_exactly_by_the_currency_exponent() {
        let usd = CurrencyCode::parse("USD").unwrap();
        let jpy = CurrencyCode::parse("JPY").unwrap();
        assert_eq!(money(1250, &usd).unwrap().as_str(), "12.50");
        assert_eq!(money(1250, &jpy).unwrap().as_str(), "1250");
        let twelve_fifty = Decimal::parse("12.50").unwrap();
        assert_eq!(minor_units(&twelve_fifty, &usd), Some(1250));
        assert_eq!(minor_units(&Decimal::parse("12.505").unwrap(), &usd), None);
    }
}
