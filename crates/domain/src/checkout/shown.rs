//! What the storefront and the checkout's webhooks are shown of an order: the
//! `application_state` of the vendor's frontend library (`lib/types`, `IApplicationState`) and
//! the shapes inside it, typed. The stored document is `state`'s; these are views of it.

use std::collections::BTreeMap;

use serde::{Serialize, Serializer};
use utoipa::ToSchema;
use utoipa::openapi::RefOr;
use utoipa::openapi::schema::{AnyOfBuilder, ArrayBuilder, ObjectBuilder, Schema, Type};

use crate::checkout::state::{
    CheckoutAddress, CheckoutDiscount, CheckoutDocument, CheckoutLineItem, CheckoutMetaData,
    CheckoutPayment, CheckoutShippingLine, CheckoutTax, LineShares,
};
use crate::kernel::money::{Cents, CurrencyCode};

/// `[]`: a list the library expects that a Mercer checkout never fills (fees, countries…).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EmptyList;

impl Serialize for EmptyList {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(std::iter::empty::<()>())
    }
}

/// An array that is always empty.
impl utoipa::PartialSchema for EmptyList {
    fn schema() -> RefOr<Schema> {
        ArrayBuilder::new()
            .max_items(Some(0))
            .description(Some("Always `[]`."))
            .into()
    }
}

impl ToSchema for EmptyList {}

/// `{}`: an object the library expects that a Mercer checkout never fills.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, ToSchema)]
pub struct EmptyObject {}

/// An address, or `{}` when none is set (the library reads fields of it either way).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ShownAddress(pub Option<CheckoutAddress>);

impl ShownAddress {
    /// The address, or `{}` when there is none.
    pub fn of(address: Option<&CheckoutAddress>) -> ShownAddress {
        ShownAddress(address.cloned())
    }
}

impl Serialize for ShownAddress {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match &self.0 {
            Some(address) => address.serialize(serializer),
            None => EmptyObject {}.serialize(serializer),
        }
    }
}

/// The address's fields, or `{}`.
impl utoipa::PartialSchema for ShownAddress {
    fn schema() -> RefOr<Schema> {
        AnyOfBuilder::new()
            .item(utoipa::openapi::Ref::from_schema_name(
                CheckoutAddress::name(),
            ))
            .item(
                ObjectBuilder::new()
                    .schema_type(Type::Object)
                    .max_properties(Some(0)),
            )
            .description(Some("An address, or `{}` when none is set."))
            .into()
    }
}

impl ToSchema for ShownAddress {
    fn schemas(schemas: &mut Vec<(String, RefOr<Schema>)>) {
        schemas.push((
            CheckoutAddress::name().into_owned(),
            <CheckoutAddress as utoipa::PartialSchema>::schema(),
        ));
        <CheckoutAddress as ToSchema>::schemas(schemas);
    }
}

/// The customer (`ICustomer`), with the checkout's addresses as `saved_addresses`; a guest has
/// no `public_id` until they give their details.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct ShownCustomer {
    /// The platform's id of the customer, when known; none in `application_state`.
    pub platform_id: Option<String>,
    /// The customer's id at the storefront; none until they give their details.
    pub public_id: Option<String>,
    /// The customer's first name (`""` until given).
    pub first_name: String,
    /// The customer's last name (`""` until given).
    pub last_name: String,
    /// The customer's email (`""` until given).
    pub email_address: String,
    /// Whether the customer accepts marketing.
    pub accepts_marketing: bool,
    /// The checkout's addresses: the shipping one, then the billing one when it differs.
    pub saved_addresses: Vec<CheckoutAddress>,
}

/// The order's addresses (`addresses`), each `{}` until set.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct ShownAddresses {
    /// Where the order ships.
    pub shipping: ShownAddress,
    /// The billing address.
    pub billing: ShownAddress,
}

/// The shipping part of the state; a checkout puts its taxes and discounts on the order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct ShownShipping {
    /// The shipping line chosen, if any.
    pub selected_shipping: Option<CheckoutShippingLine>,
    /// The shipping lines offered.
    pub available_shipping_lines: Vec<CheckoutShippingLine>,
    /// Always `[]`: the order's taxes are on the order.
    pub taxes: EmptyList,
    /// Always `[]`: the order's discounts are on the order.
    pub discounts: EmptyList,
}

/// A discount as shown, with what it takes off the order (`value`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct ShownDiscount {
    /// The discount's code.
    pub code: String,
    /// The discount's description, as the override answered it.
    pub text: String,
    /// What the discount takes off (the order, or one line's share of it).
    #[schema(value_type = i64)]
    pub value: Cents,
    /// Always true: a discount no longer valid is taken off the order.
    pub valid: bool,
    /// Always `discount_override`: every discount comes from the `discount` override.
    pub source: &'static str,
}

impl ShownDiscount {
    /// `discount` as shown, taking `value` off.
    pub fn of(discount: &CheckoutDiscount, value: Cents) -> ShownDiscount {
        ShownDiscount {
            code: discount.code.clone(),
            text: discount.text.clone(),
            value,
            valid: true,
            source: "discount_override",
        }
    }
}

/// A payment (`IPayment`) in the order's currency.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct ShownPayment {
    /// The payment's id.
    pub id: String,
    /// The gateway's public id: `test`, the built-in test gateway.
    pub gateway_public_id: String,
    /// What the payment pays, in `currency`.
    #[schema(value_type = i64)]
    pub amount: Cents,
    /// The order's currency code.
    pub currency: String,
    /// The kind of payment method, such as `credit_card`.
    pub r#type: String,
    /// How the storefront shows the payment method.
    pub display_string: String,
    /// The payment method's token at the gateway.
    pub token: String,
    /// Whether the shopper asked to keep the payment method.
    pub retain: bool,
}

impl ShownPayment {
    /// `payment` as shown, in the order's `currency`.
    pub fn of(payment: &CheckoutPayment, currency: &str) -> ShownPayment {
        ShownPayment {
            id: payment.id.clone(),
            gateway_public_id: payment.gateway_public_id.clone(),
            amount: payment.amount,
            currency: currency.to_string(),
            r#type: payment.r#type.clone(),
            display_string: payment.display_string.clone(),
            token: payment.token.clone(),
            retain: payment.retain,
        }
    }
}

/// `ICurrency` of an ISO 4217 code.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct ShownCurrency {
    /// The currency's ISO 4217 code, such as `USD`.
    pub iso_code: String,
    /// Always 0: Mercer does not know the numeric codes.
    pub iso_numeric_code: u16,
    /// The currency's symbol for a few common currencies (`$`, `€`, `£`, `¥`, `₹`), else `""`.
    pub symbol: &'static str,
    /// Always `${amount}`.
    pub format: &'static str,
    /// Whether amounts of the currency have minor units (true for a code Mercer does not know).
    pub has_decimal: bool,
    /// Always true.
    pub show_iso_code: bool,
}

impl ShownCurrency {
    /// The currency of `code`.
    pub fn of(code: &str) -> ShownCurrency {
        ShownCurrency {
            iso_code: code.to_string(),
            iso_numeric_code: 0,
            symbol: currency_symbol(code),
            format: "${amount}",
            has_decimal: CurrencyCode::parse(code).is_none_or(|code| code.minor_units() > 0),
            show_iso_code: true,
        }
    }
}

fn currency_symbol(code: &str) -> &'static str {
    match code {
        "USD" | "CAD" | "AUD" | "NZD" | "MXN" | "SGD" | "HKD" => "$",
        "EUR" => "€",
        "GBP" => "£",
        "JPY" | "CNY" => "¥",
        "INR" => "₹",
        _ => "",
    }
}

/// A weight as JavaScript writes a number: `0`, not `0.0`, when it is whole.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Weight(pub f64);

impl Serialize for Weight {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let number = self.0;
        if number.fract() == 0.0 && number.abs() < 1e15 {
            serializer.serialize_i64(number as i64)
        } else {
            serializer.serialize_f64(number)
        }
    }
}

/// `product_data` (`IProductData`). The library's types and the abandoned payload write
/// `properties` and `visible` differently, so each view picks their types: a map and `true` for
/// the storefront, name/value pairs and `1` for order/abandoned.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
#[schema(as = CheckoutProductData)]
pub struct ProductData<Properties = BTreeMap<String, String>, Visible = bool> {
    /// The line's key (as `line_item_key`).
    pub id: String,
    /// The variant's own title (its name, else the product's).
    pub title: String,
    /// The product's name.
    pub product_title: String,
    /// The variant's image, else the product's; empty when there is none.
    pub image_url: String,
    // The line's properties: a map for the storefront, name/value pairs for order/abandoned.
    // (No doc comment: utoipa would wrap the inlined type's schema with an `object` one.)
    #[allow(missing_docs)]
    #[schema(inline)]
    pub properties: Properties,
    /// The product's description.
    pub description: String,
    /// How many units.
    pub quantity: i64,
    /// The price of one unit.
    #[schema(value_type = i64)]
    pub price: Cents,
    /// Price times quantity.
    #[schema(value_type = i64)]
    pub total_price: Cents,
    // Always shown: `true` for the storefront, `1` for order/abandoned.
    #[allow(missing_docs)]
    #[schema(inline)]
    pub visible: Visible,
    /// The key that names the line at the storefront.
    pub line_item_key: String,
    /// The variant's barcode; empty when it has none.
    pub barcode: String,
    /// The variant's compare-at price; zero when it has none.
    #[schema(value_type = i64)]
    pub compare_at_price: Cents,
    /// The weight of one unit, in `weight_unit`.
    #[schema(value_type = f64)]
    pub weight: Weight,
    /// The unit of `weight`, such as `g`.
    pub weight_unit: String,
    /// The product's platform id.
    pub product_id: String,
    /// The variant's platform id.
    pub variant_id: String,
    /// Whether the variant is shipped.
    pub requires_shipping: bool,
    /// The variant's SKU; empty when it has none.
    pub sku: String,
    /// Whether the line bears taxes.
    pub taxable: bool,
    /// The product's tags, as the catalogue has them.
    pub tags: String,
    /// The product's vendor.
    pub vendor: String,
}

impl<Properties, Visible> ProductData<Properties, Visible> {
    /// The product data of `item`, with `properties` and `visible` of the view's types.
    pub fn of(
        item: &CheckoutLineItem,
        properties: Properties,
        visible: Visible,
    ) -> ProductData<Properties, Visible> {
        ProductData {
            id: item.line_item_key.clone(),
            title: item.title.clone(),
            product_title: item.product_title.clone(),
            image_url: item.image_url.clone(),
            properties,
            description: item.description.clone(),
            quantity: item.quantity,
            price: item.price,
            total_price: item.total(),
            visible,
            line_item_key: item.line_item_key.clone(),
            barcode: item.barcode.clone(),
            compare_at_price: item.compare_at_price,
            weight: Weight(item.weight),
            weight_unit: item.weight_unit.clone(),
            product_id: item.product_id.clone(),
            variant_id: item.variant_id.clone(),
            requires_shipping: item.requires_shipping,
            sku: item.sku.clone(),
            taxable: item.taxable,
            tags: item.tags.clone(),
            vendor: item.vendor.clone(),
        }
    }
}

/// A line item (`ILineItem`) with its share of the order's taxes and discounts. A checkout has
/// no fees.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct ShownLineItem {
    /// The variant and quantity of the line.
    pub product_data: ProductData,
    /// The line's share of each tax.
    pub taxes: Vec<CheckoutTax>,
    /// Always `[]`.
    pub fees: EmptyList,
    /// The line's share of each discount.
    pub discounts: Vec<ShownDiscount>,
}

impl ShownLineItem {
    /// `item` as shown, with its `shares` of the order's taxes and discounts.
    pub fn of(item: &CheckoutLineItem, shares: &LineShares) -> ShownLineItem {
        ShownLineItem {
            product_data: ProductData::of(item, item.properties.clone(), true),
            taxes: shares.taxes.clone(),
            fees: EmptyList,
            discounts: shares.shown_discounts(),
        }
    }
}

/// A line item as the inventory override and `fulfilled_items` name it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
#[schema(as = CheckoutItemReference)]
pub(crate) struct ItemReference {
    /// The line's key.
    pub line_item_key: String,
    /// The variant's platform id.
    pub platform_variant_id: String,
    /// The product's platform id.
    pub platform_product_id: String,
    /// The variant's SKU; empty when it has none.
    pub sku: String,
    /// How many units.
    pub quantity: i64,
}

impl ItemReference {
    pub fn of(item: &CheckoutLineItem) -> ItemReference {
        ItemReference {
            line_item_key: item.line_item_key.clone(),
            platform_variant_id: item.variant_id.clone(),
            platform_product_id: item.product_id.clone(),
            sku: item.sku.clone(),
            quantity: item.quantity,
        }
    }
}

/// The `application_state` the storefront is shown (`IApplicationState`), and the checkout
/// webhooks carry.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct ApplicationState {
    /// The customer (empty fields until given).
    pub customer: ShownCustomer,
    /// The shipping and billing addresses.
    pub addresses: ShownAddresses,
    /// The order's lines, each with its share of taxes and discounts.
    pub line_items: Vec<ShownLineItem>,
    /// The shipping lines offered and chosen.
    pub shipping: ShownShipping,
    /// The order's taxes.
    pub taxes: Vec<CheckoutTax>,
    /// The order's discounts, each with what it takes off.
    pub discounts: Vec<ShownDiscount>,
    /// The payments added.
    pub payments: Vec<ShownPayment>,
    /// Always `[]`: a checkout has no fees.
    pub fees: EmptyList,
    /// Items + shipping + taxes − discounts.
    #[schema(value_type = i64)]
    pub order_total: Cents,
    /// What is left to pay: the total − payments.
    #[schema(value_type = i64)]
    pub order_balance: Cents,
    /// The order's meta data.
    pub order_meta_data: CheckoutMetaData,
    /// The order's currency.
    pub currency: ShownCurrency,
    /// The currency shown: the order's own.
    pub display_currency: ShownCurrency,
    /// Always 1: amounts are shown in the order's currency.
    pub display_exchange_rate: u8,
    /// Where the customer resumes the checkout.
    pub resumable_link: String,
    /// Always none.
    pub link_to_cart: Option<String>,
    /// Whether Process Order went through.
    pub is_processed: bool,
    /// Always `checkout`.
    pub created_via: &'static str,
    /// Always none.
    pub flow_id: Option<String>,
    /// The order's id at the storefront.
    pub public_order_id: String,
}

impl CheckoutDocument {
    /// The `application_state` of this order.
    pub fn application_state(&self, public_order_id: &str) -> ApplicationState {
        let amounts = self.amounts();
        ApplicationState {
            customer: self.shown_customer(None),
            addresses: ShownAddresses {
                shipping: ShownAddress::of(self.shipping_address.as_ref()),
                billing: ShownAddress::of(self.billing_address.as_ref()),
            },
            line_items: self.shown_line_items(),
            shipping: ShownShipping {
                selected_shipping: self.selected_shipping.clone(),
                available_shipping_lines: self.available_shipping_lines.clone(),
                taxes: EmptyList,
                discounts: EmptyList,
            },
            taxes: self.taxes.clone(),
            discounts: self.shown_discounts(),
            payments: self.shown_payments(),
            fees: EmptyList,
            order_total: amounts.total,
            order_balance: amounts.balance,
            order_meta_data: self.order_meta_data.clone(),
            currency: ShownCurrency::of(&self.currency),
            display_currency: ShownCurrency::of(&self.currency),
            display_exchange_rate: 1,
            resumable_link: self.resumable_link.clone(),
            link_to_cart: None,
            is_processed: self.is_processed,
            created_via: "checkout",
            flow_id: None,
            public_order_id: public_order_id.to_string(),
        }
    }

    /// The customer, with the checkout's addresses as `saved_addresses` and the platform's
    /// id of the customer when it is known.
    pub fn shown_customer(&self, platform_id: Option<&str>) -> ShownCustomer {
        let customer = self.customer.clone().unwrap_or_default();
        ShownCustomer {
            platform_id: platform_id.map(str::to_string),
            public_id: self.customer.as_ref().map(|_| customer.public_id),
            first_name: customer.first_name,
            last_name: customer.last_name,
            email_address: customer.email_address,
            accepts_marketing: customer.accepts_marketing,
            saved_addresses: self.saved_addresses(),
        }
    }

    /// The addresses given in this checkout: the shipping one, then the billing one when it
    /// differs.
    fn saved_addresses(&self) -> Vec<CheckoutAddress> {
        let mut saved: Vec<CheckoutAddress> = Vec::new();
        for address in [&self.shipping_address, &self.billing_address]
            .into_iter()
            .flatten()
        {
            if !saved.contains(address) {
                saved.push(address.clone());
            }
        }
        saved
    }

    /// The line items, each with its shares.
    pub fn shown_line_items(&self) -> Vec<ShownLineItem> {
        self.line_items
            .iter()
            .zip(self.line_shares())
            .map(|(item, shares)| ShownLineItem::of(item, &shares))
            .collect()
    }

    /// The line item of `key`.
    pub fn shown_line_item(&self, key: &str) -> Option<ShownLineItem> {
        self.line_items
            .iter()
            .zip(self.line_shares())
            .find(|(item, _)| item.line_item_key == key)
            .map(|(item, shares)| ShownLineItem::of(item, &shares))
    }

    /// The discounts, each with what it takes off the order.
    pub fn shown_discounts(&self) -> Vec<ShownDiscount> {
        self.discounts
            .iter()
            .zip(self.discount_values())
            .map(|(discount, value)| ShownDiscount::of(discount, value))
            .collect()
    }

    /// The payments, in the order's currency.
    pub fn shown_payments(&self) -> Vec<ShownPayment> {
        self.payments
            .iter()
            .map(|payment| ShownPayment::of(payment, &self.currency))
            .collect()
    }
}

impl LineShares {
    /// The line's discounts, each with what it takes off the line.
    pub fn shown_discounts(&self) -> Vec<ShownDiscount> {
        self.discounts
            .iter()
            .map(|(discount, value)| ShownDiscount::of(discount, *value))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn an_empty_order_shows_the_shapes_the_library_reads() {
        let order = CheckoutDocument::new("JPY", "https://shop.test/r".into());
        let state = serde_json::to_value(order.application_state("abc")).unwrap();
        assert_eq!(state["addresses"]["shipping"], json!({}));
        assert_eq!(state["customer"]["public_id"], json!(null));
        assert_eq!(state["customer"]["saved_addresses"], json!([]));
        assert_eq!(state["fees"], json!([]));
        assert_eq!(state["shipping"]["taxes"], json!([]));
        assert_eq!(state["currency"]["has_decimal"], json!(false));
        assert_eq!(state["currency"]["symbol"], json!("¥"));
        assert_eq!(state["display_exchange_rate"], json!(1));
        assert_eq!(state["link_to_cart"], json!(null));
        assert_eq!(state["public_order_id"], json!("abc"));
    }

    #[test]
    fn whole_weights_are_written_without_a_fraction() {
        assert_eq!(serde_json::to_string(&Weight(250.0)).unwrap(), "250");
        assert_eq!(serde_json::to_string(&Weight(0.5)).unwrap(), "0.5");
    }
}
