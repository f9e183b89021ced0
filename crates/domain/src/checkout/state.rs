//! What a checkout holds: its stored document (what the storefront is shown of it is
//! `shown`'s). Money is integer cents of the order's currency, and the totals are always computed, never
//! stored: `order_total` = items + shipping + taxes − discounts, `order_balance` =
//! `order_total` − payments.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::access::credentials::Secret;
use crate::kernel::error::DomainError;
use crate::kernel::money::Cents;
use crate::kernel::time::Timestamp;
use crate::overrides::{OrderOverride, OverrideTarget, OverrideType};

/// A customer of the checkout (`ICustomer`): a guest, with no platform id.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckoutCustomer {
    /// The customer's id at the storefront (32 random hex digits).
    pub public_id: String,
    /// The customer's first name; may be empty.
    pub first_name: String,
    /// The customer's last name; may be empty.
    pub last_name: String,
    /// The customer's email, checked when given.
    pub email_address: String,
    /// Whether the customer accepts marketing (false unless they said so).
    pub accepts_marketing: bool,
}

/// An address as the storefront gives and shows it (`IAddress`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(default)]
pub struct CheckoutAddress {
    /// The first name on the address.
    pub first_name: String,
    /// The last name on the address.
    pub last_name: String,
    /// The first street line (needed).
    pub address_line_1: String,
    /// The second street line.
    pub address_line_2: String,
    /// The country, by name.
    pub country: String,
    /// The city (needed).
    pub city: String,
    /// The province or state, by name.
    pub province: String,
    /// The country's ISO 3166-1 alpha-2 code, upper case (needed).
    pub country_code: String,
    /// The province or state, by code.
    pub province_code: String,
    /// The postal code.
    pub postal_code: String,
    /// The company on the address.
    pub business_name: String,
    /// The phone number on the address.
    pub phone_number: String,
}

/// A line item: the variant as the catalogue had it when it was added.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CheckoutLineItem {
    /// The key that names the line at the storefront, unique in the order.
    pub line_item_key: String,
    /// The product's platform id (`""` when it has none).
    pub product_id: String,
    /// The variant's platform id.
    pub variant_id: String,
    /// The variant's own title (its name, else the product's).
    pub title: String,
    /// The product's name.
    pub product_title: String,
    /// The variant's SKU; empty when it has none.
    pub sku: String,
    /// The catalogue variant's barcode; empty when it has none.
    #[serde(default)]
    pub barcode: String,
    /// The variant's image, else the product's; empty when there is none.
    pub image_url: String,
    /// The product's description.
    pub description: String,
    /// The product's vendor.
    pub vendor: String,
    /// The product's tags, as the catalogue has them.
    pub tags: String,
    /// The price of one unit, in the order's currency.
    pub price: Cents,
    /// The variant's compare-at price; zero when it has none.
    pub compare_at_price: Cents,
    /// How many units.
    pub quantity: i64,
    /// The weight of one unit, in `weight_unit`; 0 when unknown.
    pub weight: f64,
    /// The unit of `weight` (`g` when the catalogue gives none).
    pub weight_unit: String,
    /// Whether the variant is shipped (true unless the catalogue says otherwise).
    pub requires_shipping: bool,
    /// Whether the line bears taxes (false for a tax-exempt variant).
    pub taxable: bool,
    /// `line_item_properties` given at init: a subscription plan among them (docs/checkout.md).
    #[serde(default)]
    pub properties: BTreeMap<String, String>,
}

impl CheckoutLineItem {
    /// Price times quantity; `None` when it overflows.
    pub fn checked_total(&self) -> Option<Cents> {
        self.price.times(self.quantity)
    }

    /// Price times quantity, as shown. A stored order's totals always fit (see
    /// [`CheckoutDocument::check_storable`]); zero would be shown for one that did not.
    pub fn total(&self) -> Cents {
        self.checked_total().unwrap_or(Cents::ZERO)
    }
}

/// A shipping line (`IShippingLine`): offered by the `shipping` override or the shop's flat
/// rate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct CheckoutShippingLine {
    /// The line's id: the `shipping` override's, or `flat_rate`.
    pub id: String,
    /// The line's description, as the shopper sees it.
    pub description: String,
    /// What the line costs.
    #[schema(value_type = i64)]
    pub amount: Cents,
    /// The line's code: `flat_rate` for the flat rate, else empty.
    pub code: String,
}

/// A tax (`ITax`), from the `tax` override.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct CheckoutTax {
    /// The tax's name, such as `VAT`.
    pub name: String,
    /// The tax's amount, added to the order's total.
    #[schema(value_type = i64)]
    pub value: Cents,
    /// Whether the tax is included in the prices; always false for taxes of the `tax` override.
    pub is_included: bool,
}

/// A discount applied (`IDiscount`), as the `discount` override valued it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckoutDiscount {
    /// The code as the override answered it; the one the shopper entered when it answered none.
    pub code: String,
    /// The discount's description, as the override answered it.
    pub text: String,
    /// What the override says the discount is worth; what it takes off may be less.
    pub value: Cents,
}

/// A payment (`IPayment`) through the built-in test gateway.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckoutPayment {
    /// The payment's id (24 random hex digits).
    pub id: String,
    /// The gateway's public id: `test`, the built-in test gateway.
    pub gateway_public_id: String,
    /// The payment method's token: the test gateway approves `tok_success` only.
    pub token: String,
    /// What the payment pays of the order.
    pub amount: Cents,
    /// The kind of payment method, such as `credit_card`.
    pub r#type: String,
    /// How the storefront shows the payment method.
    pub display_string: String,
    /// Whether the shopper asked to keep the payment method (the test gateway keeps none).
    pub retain: bool,
    /// The payment method's expiry month (`YYYY-MM`), when the storefront gave one.
    #[serde(default)]
    pub expires_at: Option<String>,
}

/// Order meta data (`IOrderMetaData`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct CheckoutMetaData {
    /// The cart's parameters, name to value.
    pub cart_parameters: BTreeMap<String, String>,
    /// The order's note attributes, name to value.
    pub note_attributes: BTreeMap<String, String>,
    /// The order's notes; the platform's order carries them.
    pub notes: String,
    /// The order's tags.
    pub tags: Vec<String>,
}

/// An override given for this order in the init body (it wins over the shop's). Its secret is
/// never shown, nor printed (`Debug`).
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredOrderOverride {
    /// The override's type, as `OverrideType` names it (`shipping`, `tax`, `discount`, ...).
    pub override_type: String,
    /// Where the override is called.
    pub url: String,
    /// The secret the override's calls are signed with.
    pub shared_secret: String,
}

impl std::fmt::Debug for StoredOrderOverride {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoredOrderOverride")
            .field("override_type", &self.override_type)
            .field("url", &self.url)
            .field("shared_secret", &"<redacted>")
            .finish()
    }
}

/// Everything a checkout holds, stored as one JSON document.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CheckoutDocument {
    /// The order's currency code: the shop's when the order was made.
    pub currency: String,
    /// The guest customer, once given.
    pub customer: Option<CheckoutCustomer>,
    /// Where the order ships, once given.
    pub shipping_address: Option<CheckoutAddress>,
    /// The billing address, once given.
    pub billing_address: Option<CheckoutAddress>,
    /// The order's lines.
    pub line_items: Vec<CheckoutLineItem>,
    /// The shipping lines offered for the shipping address.
    pub available_shipping_lines: Vec<CheckoutShippingLine>,
    /// The shipping line chosen, if any; its amount is the order's shipping.
    pub selected_shipping: Option<CheckoutShippingLine>,
    /// The taxes the `tax` override answered.
    pub taxes: Vec<CheckoutTax>,
    /// The discount codes applied, in the order they were.
    pub discounts: Vec<CheckoutDiscount>,
    /// The payments added, through the test gateway.
    pub payments: Vec<CheckoutPayment>,
    /// The order's meta data: cart parameters, note attributes, notes and tags.
    pub order_meta_data: CheckoutMetaData,
    /// Whether Process Order went through.
    pub is_processed: bool,
    /// Where the customer resumes the checkout on the shop's storefront.
    pub resumable_link: String,
    /// Overrides given for this order at Init Order; they win over the shop's.
    #[serde(default)]
    pub order_overrides: Vec<StoredOrderOverride>,
    /// The platform's name of the order (`order_number`), once Create Order answered.
    #[serde(default)]
    pub platform_friendly_identifier: Option<String>,
    /// Why the last push to the platform, or the last payment, failed.
    #[serde(default)]
    pub failure: Option<String>,
    /// When Process Order accepted the order: when its subscription plans' first order was
    /// placed, whenever the push to the platform comes.
    #[serde(default)]
    pub processed_at: Option<Timestamp>,
}

/// A checkout line's `line_item_properties` hold at most this many bytes, written as JSON.
pub const MAX_LINE_ITEM_PROPERTIES_BYTES: usize = 16 * 1024;
/// A checkout's stored document is at most this many bytes, written as JSON.
pub const MAX_DOCUMENT_BYTES: usize = 512 * 1024;

/// The order's amounts, computed from what it holds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Amounts {
    /// The line items' totals.
    pub items: Cents,
    /// The selected shipping line's amount (zero when none is selected).
    pub shipping: Cents,
    /// The taxes.
    pub taxes: Cents,
    /// What the discounts take off, never more than the items.
    pub discounts: Cents,
    /// Items + shipping + taxes − discounts.
    pub total: Cents,
    /// What the payments pay.
    pub payments: Cents,
    /// What is left to pay: total − payments.
    pub balance: Cents,
}

/// The amounts of an order too large to charge: 422 on `order_total`.
pub(crate) fn too_large() -> DomainError {
    DomainError::invalid(
        "order_total",
        "out_of_range",
        "the order's amounts are too large to charge",
    )
}

impl CheckoutDocument {
    /// A new order's document: no customer, items or anything else yet.
    pub fn new(currency: &str, resumable_link: String) -> CheckoutDocument {
        CheckoutDocument {
            currency: currency.to_string(),
            customer: None,
            shipping_address: None,
            billing_address: None,
            line_items: Vec::new(),
            available_shipping_lines: Vec::new(),
            selected_shipping: None,
            taxes: Vec::new(),
            discounts: Vec::new(),
            payments: Vec::new(),
            order_meta_data: CheckoutMetaData::default(),
            is_processed: false,
            resumable_link,
            order_overrides: Vec::new(),
            platform_friendly_identifier: None,
            failure: None,
            processed_at: None,
        }
    }

    /// The customer's email, when one was given.
    pub fn email(&self) -> Option<&str> {
        self.customer
            .as_ref()
            .map(|customer| customer.email_address.as_str())
            .filter(|email| !email.is_empty())
    }

    /// Whether any line item is shipped.
    pub fn requires_shipping(&self) -> bool {
        self.line_items.iter().any(|item| item.requires_shipping)
    }

    /// What each discount takes off: its value, but never more than the items left after the
    /// discounts before it, so discounts never take the items below zero.
    pub fn discount_values(&self) -> Vec<Cents> {
        let mut left = Cents::checked_sum(self.line_items.iter().map(CheckoutLineItem::total))
            .unwrap_or(Cents::ZERO)
            .0
            .max(0);
        self.discounts
            .iter()
            .map(|discount| {
                let taken = discount.value.0.clamp(0, left);
                left -= taken;
                Cents(taken)
            })
            .collect()
    }

    /// Each line item's share of the order's taxes (over the taxable items) and discounts
    /// (over all items), in proportion to its total; over the lines, the shares add up to the
    /// order's taxes and discounts exactly.
    pub fn line_shares(&self) -> Vec<LineShares> {
        let totals: Vec<i64> = self.line_items.iter().map(|item| item.total().0).collect();
        let taxable: Vec<i64> = self
            .line_items
            .iter()
            .zip(&totals)
            .map(|(item, total)| if item.taxable { *total } else { 0 })
            .collect();
        let mut shares = vec![LineShares::default(); self.line_items.len()];
        for tax in &self.taxes {
            for (line, value) in shares.iter_mut().zip(share_out(tax.value.0, &taxable)) {
                if value > 0 {
                    line.taxes.push(CheckoutTax {
                        value: Cents(value),
                        ..tax.clone()
                    });
                }
            }
        }
        for (discount, taken) in self.discounts.iter().zip(self.discount_values()) {
            for (line, value) in shares.iter_mut().zip(share_out(taken.0, &totals)) {
                if value > 0 {
                    line.discounts.push((discount.clone(), Cents(value)));
                }
            }
        }
        shares
    }

    /// The amounts, worked out exactly: 422 on `order_total` when one overflows. Every path
    /// that charges or saves the order uses this.
    pub fn try_amounts(&self) -> Result<Amounts, DomainError> {
        let totals = self
            .line_items
            .iter()
            .map(|item| item.checked_total().ok_or_else(too_large))
            .collect::<Result<Vec<Cents>, DomainError>>()?;
        let items = Cents::checked_sum(totals).ok_or_else(too_large)?;
        let shipping = self
            .selected_shipping
            .as_ref()
            .map_or(Cents::ZERO, |line| line.amount);
        let taxes =
            Cents::checked_sum(self.taxes.iter().map(|tax| tax.value)).ok_or_else(too_large)?;
        let discounts = Cents::checked_sum(self.discount_values()).ok_or_else(too_large)?;
        let total = items
            .checked_add(shipping)
            .and_then(|total| total.checked_add(taxes))
            .and_then(|total| total.checked_sub(discounts))
            .ok_or_else(too_large)?;
        let payments = Cents::checked_sum(self.payments.iter().map(|payment| payment.amount))
            .ok_or_else(too_large)?;
        Ok(Amounts {
            items,
            shipping,
            taxes,
            discounts,
            total,
            payments,
            balance: total.checked_sub(payments).ok_or_else(too_large)?,
        })
    }

    /// The amounts, as shown. A stored order's amounts always fit ([`Self::check_storable`]);
    /// all zero would be shown for one that did not.
    pub fn amounts(&self) -> Amounts {
        self.try_amounts().unwrap_or_default()
    }

    /// The document's size as stored: its JSON's bytes.
    pub fn stored_size(&self) -> usize {
        // A document of plain typed values with text keys: serializing cannot fail.
        serde_json::to_vec(self).map_or(usize::MAX, |json| json.len())
    }

    /// What every saved order is: its amounts work out ([`Self::try_amounts`]), and it is at
    /// most [`MAX_DOCUMENT_BYTES`] of JSON, else 422 on `field`, the part of the order the
    /// change was about. An order stored larger before this limit may still shrink: a change
    /// that leaves it no larger than `before` bytes passes.
    pub fn check_storable(&self, field: &str, before: Option<usize>) -> Result<(), DomainError> {
        self.try_amounts()?;
        let size = self.stored_size();
        if size > MAX_DOCUMENT_BYTES && before.is_none_or(|before| size > before) {
            return Err(DomainError::invalid(
                field,
                "too_large",
                format!(
                    "the order would hold {size} bytes, over its limit of {MAX_DOCUMENT_BYTES} \
                     (512 KiB)"
                ),
            ));
        }
        Ok(())
    }

    /// The overrides given for this order, as overrides picks them.
    pub fn order_overrides(&self) -> Vec<OrderOverride> {
        self.order_overrides
            .iter()
            .filter_map(|stored| {
                Some(OrderOverride {
                    override_type: OverrideType::parse(&stored.override_type)?,
                    target: OverrideTarget {
                        url: stored.url.clone(),
                        shared_secret: Secret::new(stored.shared_secret.clone()),
                    },
                })
            })
            .collect()
    }
}

/// What one line item bears of the order's taxes and discounts (a discount with the value it
/// takes off the line). A checkout has no fees.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LineShares {
    /// The line's share of each tax, with the share as the tax's value; none of zero.
    pub taxes: Vec<CheckoutTax>,
    /// The line's share of each discount, with what it takes off the line; none of zero.
    pub discounts: Vec<(CheckoutDiscount, Cents)>,
}

/// `amount` shared out in proportion to `weights`: each share rounded down, and the cents left
/// over one each to the largest remainders (the first lines on a tie), so the shares add up to
/// `amount` exactly. All zero when the weights are.
fn share_out(amount: i64, weights: &[i64]) -> Vec<i64> {
    let total: i128 = weights.iter().map(|w| i128::from((*w).max(0))).sum();
    if total == 0 || amount <= 0 {
        return vec![0; weights.len()];
    }
    let exact: Vec<(i64, i128)> = weights
        .iter()
        .map(|w| {
            let scaled = i128::from(amount) * i128::from((*w).max(0));
            ((scaled / total) as i64, scaled % total)
        })
        .collect();
    let mut shares: Vec<i64> = exact.iter().map(|(share, _)| *share).collect();
    let mut left = amount - shares.iter().sum::<i64>();
    let mut order: Vec<usize> = (0..weights.len()).collect();
    order.sort_by(|a, b| exact[*b].1.cmp(&exact[*a].1).then(a.cmp(b)));
    for index in order {
        if left == 0 {
            break;
        }
        if weights[index] > 0 {
            shares[index] += 1;
            left -= 1;
        }
    }
    shares
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn item(price: i64, quantity: i64) -> CheckoutLineItem {
        CheckoutLineItem {
            line_item_key: format!("k{price}"),
            product_id: "p".into(),
            variant_id: "v".into(),
            title: "T".into(),
            product_title: "T".into(),
            sku: "S".into(),
            barcode: String::new(),
            image_url: String::new(),
            description: String::new(),
            vendor: String::new(),
            tags: String::new(),
            price: Cents(price),
            compare_at_price: Cents::ZERO,
            quantity,
            weight: 0.0,
            weight_unit: "g".into(),
            requires_shipping: true,
            taxable: true,
            properties: BTreeMap::new(),
        }
    }

    #[test]
    fn totals_add_items_shipping_taxes_and_take_discounts_and_payments() {
        let mut order = CheckoutDocument::new("USD", "https://shop.test/r".into());
        order.line_items = vec![item(1250, 2), item(500, 1)];
        order.selected_shipping = Some(CheckoutShippingLine {
            id: "0".into(),
            description: "Flat".into(),
            amount: Cents(700),
            code: String::new(),
        });
        order.taxes = vec![CheckoutTax {
            name: "VAT".into(),
            value: Cents(300),
            is_included: false,
        }];
        order.discounts = vec![CheckoutDiscount {
            code: "TEN".into(),
            text: "10 off".into(),
            value: Cents(1000),
        }];
        order.payments = vec![CheckoutPayment {
            id: "p1".into(),
            gateway_public_id: "test".into(),
            token: "tok_success".into(),
            amount: Cents(2000),
            r#type: "credit_card".into(),
            display_string: String::new(),
            retain: false,
            expires_at: None,
        }];
        let amounts = order.amounts();
        assert_eq!(amounts.items, Cents(3000));
        assert_eq!(amounts.total, Cents(3000 + 700 + 300 - 1000));
        assert_eq!(amounts.balance, Cents(3000 + 700 + 300 - 1000 - 2000));
        let state = serde_json::to_value(order.application_state("abc")).unwrap();
        assert_eq!(state["order_total"], 3000);
        assert_eq!(state["order_balance"], 1000);
        assert_eq!(state["line_items"][0]["product_data"]["total_price"], 2500);
        assert_eq!(state["addresses"]["shipping"], json!({}));
    }

    #[test]
    fn discounts_never_take_the_items_below_zero() {
        let mut order = CheckoutDocument::new("USD", String::new());
        order.line_items = vec![item(500, 1)];
        order.discounts = vec![
            CheckoutDiscount {
                code: "ALL".into(),
                text: String::new(),
                value: Cents(900),
            },
            CheckoutDiscount {
                code: "MORE".into(),
                text: String::new(),
                value: Cents(100),
            },
        ];
        assert_eq!(order.amounts().total, Cents::ZERO);
        let state = serde_json::to_value(order.application_state("x")).unwrap();
        assert_eq!(state["discounts"][0]["value"], 500, "what it takes off");
        assert_eq!(state["discounts"][1]["value"], 0);
    }

    #[test]
    fn taxes_and_discounts_are_shared_out_over_the_line_items_to_the_cent() {
        let mut order = CheckoutDocument::new("USD", String::new());
        let mut untaxed = item(100, 1);
        untaxed.taxable = false;
        order.line_items = vec![item(1000, 1), item(500, 1), untaxed];
        order.taxes = vec![CheckoutTax {
            name: "GST".into(),
            value: Cents(101),
            is_included: false,
        }];
        order.discounts = vec![CheckoutDiscount {
            code: "TEN".into(),
            text: "10 off".into(),
            value: Cents(1000),
        }];
        let shares = order.line_shares();
        let taxes: Vec<i64> = shares
            .iter()
            .map(|line| line.taxes.iter().map(|tax| tax.value.0).sum())
            .collect();
        // 101 over 1000 and 500: 67.33 and 33.67, the odd cent to the larger remainder; none
        // on the untaxed line.
        assert_eq!(taxes, [67, 34, 0]);
        let discounts: Vec<i64> = shares
            .iter()
            .map(|line| line.discounts.iter().map(|(_, value)| value.0).sum())
            .collect();
        assert_eq!(discounts, [625, 313, 62]);
        assert_eq!(discounts.iter().sum::<i64>(), 1000);
        let state = serde_json::to_value(order.application_state("x")).unwrap();
        assert_eq!(state["line_items"][0]["taxes"][0]["name"], "GST");
        assert_eq!(state["line_items"][1]["discounts"][0]["code"], "TEN");
        assert_eq!(state["line_items"][2]["taxes"], json!([]));
    }

    #[test]
    fn the_customer_shows_the_checkouts_addresses() {
        let mut order = CheckoutDocument::new("USD", String::new());
        let home = CheckoutAddress {
            city: "Ottawa".into(),
            ..CheckoutAddress::default()
        };
        order.shipping_address = Some(home.clone());
        order.billing_address = Some(home);
        let customer = serde_json::to_value(order.shown_customer(Some("cus_1"))).unwrap();
        assert_eq!(customer["platform_id"], "cus_1");
        assert_eq!(customer["saved_addresses"].as_array().unwrap().len(), 1);
        assert_eq!(customer["saved_addresses"][0]["city"], "Ottawa");
    }
}
