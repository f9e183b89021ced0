//! What the operator console shows of a shop's headless checkouts: the recent ones with their
//! state, and a checkout with its items, its addresses and the webhooks it fired (messages
//! enqueued about it, by subject).

use crate::checkout::payloads::subject;
use crate::checkout::repository::{CheckoutOrder, CheckoutRepositories, CheckoutStatus};
use crate::checkout::state::CheckoutAddress;
use crate::kernel::error::DomainError;
use crate::kernel::ids::{CheckoutOrderId, ShopId};
use crate::kernel::money::{Cents, CurrencyCode};
use crate::kernel::time::Timestamp;
use crate::webhooks::console::{MessageLine, lines_of};

/// The most webhooks a checkout's page lists.
pub const MESSAGES_SHOWN: usize = 100;

/// A checkout as the console lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckoutLine {
    /// The id the checkout's row has (a page's cursor).
    pub id: CheckoutOrderId,
    /// The storefront's id of the checkout.
    pub public_order_id: String,
    /// Where it is: `open`, `processed`, `created` or `failed`.
    pub status: CheckoutStatus,
    /// What happened after: `abandoned` or `fulfilled`, when either did.
    pub after: Option<&'static str>,
    /// The shopper's email, once given.
    pub email: Option<String>,
    /// How many line items it holds.
    pub items: usize,
    /// Its total, in its currency's major unit, with the currency.
    pub total: String,
    /// The platform's order id, once the platform has the order.
    pub platform_order_id: Option<String>,
    /// When the shopper last changed it.
    pub last_activity_at: Timestamp,
    /// When it started.
    pub created_at: Timestamp,
}

impl CheckoutLine {
    fn of(order: &CheckoutOrder) -> CheckoutLine {
        let document = &order.document;
        let total = match CurrencyCode::parse(&document.currency) {
            Some(currency) => format!(
                "{} {}",
                document.amounts().total.to_decimal(&currency),
                currency.as_str()
            ),
            None => String::new(),
        };
        CheckoutLine {
            id: order.id,
            public_order_id: order.public_order_id.clone(),
            status: order.status,
            after: if order.fulfilled_at.is_some() {
                Some("fulfilled")
            } else if order.abandoned_at.is_some() {
                Some("abandoned")
            } else {
                None
            },
            email: document.email().map(str::to_string),
            items: document.line_items.len(),
            total,
            platform_order_id: order.platform_order_id.clone(),
            last_activity_at: order.last_activity_at,
            created_at: order.created_at,
        }
    }
}

/// The shop's checkouts, newest first, of one status or all, older than the checkout `before`.
pub fn checkouts(
    tx: &mut dyn CheckoutRepositories,
    shop_id: ShopId,
    status: Option<CheckoutStatus>,
    before: Option<CheckoutOrderId>,
    limit: usize,
) -> Result<Vec<CheckoutLine>, DomainError> {
    Ok(tx
        .checkout_orders_of_shop(shop_id, status, before, limit)?
        .iter()
        .map(CheckoutLine::of)
        .collect())
}

/// A checkout's line item as its page shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ItemLine {
    /// The variant's title, else the product's.
    pub title: String,
    /// The variant's SKU; empty when it has none.
    pub sku: String,
    /// The variant's platform id.
    pub variant_id: String,
    /// How many units.
    pub quantity: i64,
    /// The price of one unit, in the major unit with the currency.
    pub price: String,
    /// Price times quantity, in the major unit with the currency; empty when it cannot be
    /// written (an unknown currency, an amount too large).
    pub total: String,
}

/// A checkout and the webhooks it fired, newest first.
#[derive(Debug, Clone, PartialEq)]
pub struct CheckoutDetail {
    /// The checkout.
    pub checkout: CheckoutLine,
    /// Its line items, in the order they were added.
    pub items: Vec<ItemLine>,
    /// Where it ships, once given.
    pub shipping_address: Option<CheckoutAddress>,
    /// Its billing address, once given.
    pub billing_address: Option<CheckoutAddress>,
    /// Its messages (up to [`MESSAGES_SHOWN`]), each with its last attempt.
    pub messages: Vec<MessageLine>,
}

fn item_lines(order: &CheckoutOrder) -> Vec<ItemLine> {
    let currency = CurrencyCode::parse(&order.document.currency);
    let money = |amount: Option<Cents>| match (amount, &currency) {
        (Some(amount), Some(currency)) => {
            format!("{} {}", amount.to_decimal(currency), currency.as_str())
        }
        _ => String::new(),
    };
    order
        .document
        .line_items
        .iter()
        .map(|item| ItemLine {
            title: if item.title.is_empty() {
                item.product_title.clone()
            } else {
                item.title.clone()
            },
            sku: item.sku.clone(),
            variant_id: item.variant_id.clone(),
            quantity: item.quantity,
            price: money(Some(item.price)),
            total: money(item.price.times(item.quantity)),
        })
        .collect()
}

/// The shop's checkout `public_order_id` with its webhooks; 404 for another shop's.
pub fn checkout(
    tx: &mut dyn CheckoutRepositories,
    shop_id: ShopId,
    public_order_id: &str,
) -> Result<CheckoutDetail, DomainError> {
    let order = tx
        .checkout_order(shop_id, public_order_id)?
        .ok_or_else(|| DomainError::not_found("checkout"))?;
    let messages = tx.webhook_messages_about(shop_id, &subject(&order), MESSAGES_SHOWN)?;
    Ok(CheckoutDetail {
        checkout: CheckoutLine::of(&order),
        items: item_lines(&order),
        shipping_address: order.document.shipping_address.clone(),
        billing_address: order.document.billing_address.clone(),
        messages: lines_of(tx, &messages)?,
    })
}
