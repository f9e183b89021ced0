//! The payloads of the six checkout topics (seed 001 §2), enqueued as checkout webhook messages
//! in the transaction of the change they report.

use serde_json::{Value, json};

use crate::access::shop::Shop;
use crate::checkout::repository::{CheckoutOrder, CheckoutRepositories};
use crate::checkout::state::{CheckoutLineItem, meta_data_json, product_data};
use crate::directory::DirectoryRepository;
use crate::kernel::error::DomainError;
use crate::kernel::time::Timestamp;
use crate::webhooks::{WebhookKind, enqueue_all_for_topic, enqueue_for_topic};

/// The checkout topics (contract §4.2's ids 1..6).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Topic {
    OrderProcessed,
    OrderCreated,
    OrderFulfilled,
    OrderAbandoned,
    OrderFailed,
    GiftCardCreated,
}

impl Topic {
    pub fn as_str(self) -> &'static str {
        match self {
            Topic::OrderProcessed => "order/processed",
            Topic::OrderCreated => "order/created",
            Topic::OrderFulfilled => "order/fulfilled",
            Topic::OrderAbandoned => "order/abandoned",
            Topic::OrderFailed => "order/failed",
            Topic::GiftCardCreated => "gift_card/created",
        }
    }
}

/// Where the order came from, as the payloads name it.
const ORDER_SOURCE: &str = "headless_checkout";
const ORDER_SOURCE_NAME: &str = "Mercer headless checkout";

/// The shop's domains: `platform_domain` its domain on the platform, `domain` the one its
/// customers see.
fn domains(shop: &Shop) -> (String, String) {
    let platform = shop.shop_domain.clone();
    let public = shop
        .custom_domain
        .clone()
        .unwrap_or_else(|| platform.clone());
    (platform, public)
}

/// The payload of order/processed, order/created, order/failed and order/fulfilled (seed 001
/// §2): `application_state` is the one the storefront was shown.
pub fn order_payload(
    shop: &Shop,
    order: &CheckoutOrder,
    application_state: Value,
    fulfillment: Option<Value>,
) -> Value {
    let (platform_domain, domain) = domains(shop);
    let fulfilled = fulfillment.is_some();
    json!({
        "platform_domain": platform_domain,
        "domain": domain,
        "application_state": application_state,
        "order_id": order.id,
        "public_order_id": order.public_order_id,
        "platform_order_id": order.platform_order_id.clone().unwrap_or_default(),
        "platform_friendly_identifier": order
            .document
            .platform_friendly_identifier
            .clone()
            .or_else(|| order.platform_order_id.clone())
            .unwrap_or_default(),
        "order_source": ORDER_SOURCE,
        "order_source_name": ORDER_SOURCE_NAME,
        "fulfillment_status": if fulfilled { "fulfilled" } else { "unfulfilled" },
        "fulfillment_data": fulfillment.unwrap_or_else(|| json!([])),
    })
}

/// Enqueues `topic` (order/processed, order/created, order/failed) about `order`.
pub fn emit(
    tx: &mut dyn CheckoutRepositories,
    shop: &Shop,
    order: &CheckoutOrder,
    topic: Topic,
    application_state: Value,
    now: Timestamp,
) -> Result<(), DomainError> {
    let payload = order_payload(shop, order, application_state, None);
    enqueue_for_topic(
        tx,
        shop.id,
        WebhookKind::Checkout,
        topic.as_str(),
        &payload,
        now,
    )?;
    Ok(())
}

/// Enqueues order/fulfilled with its `fulfillment_data` (an object, seed 001 §2).
pub fn emit_fulfilled(
    tx: &mut dyn CheckoutRepositories,
    shop: &Shop,
    order: &CheckoutOrder,
    fulfillment_data: Value,
    now: Timestamp,
) -> Result<(), DomainError> {
    let shown = order.document.application_state(&order.public_order_id);
    let payload = order_payload(shop, order, shown, Some(fulfillment_data));
    enqueue_for_topic(
        tx,
        shop.id,
        WebhookKind::Checkout,
        Topic::OrderFulfilled.as_str(),
        &payload,
        now,
    )?;
    Ok(())
}

/// Enqueues order/abandoned (seed 001 §2: the customer, line items, meta data and the link
/// that resumes the checkout).
pub fn emit_abandoned(
    tx: &mut dyn CheckoutRepositories,
    shop: &Shop,
    order: &CheckoutOrder,
    now: Timestamp,
) -> Result<(), DomainError> {
    let document = &order.document;
    // Seed 001 writes `properties` as an array and `visible` as a number here.
    let line_items: Vec<Value> = document
        .line_items
        .iter()
        .zip(document.line_shares())
        .map(|(item, shares)| {
            let properties: Vec<Value> = item
                .properties
                .iter()
                .map(|(name, value)| json!({"name": name, "value": value}))
                .collect();
            json!({
                "discounts": shares.discounts_json(),
                "fees": [],
                "taxes": shares.taxes_json(),
                "product_data": product_data(item, json!(properties), json!(1)),
            })
        })
        .collect();
    let platform_id = platform_customer_id(tx, shop, document.email())?;
    let payload = json!({
        "customer": document.customer_json(platform_id.as_deref()),
        "line_items": line_items,
        "order_meta_data": meta_data_json(&document.order_meta_data),
        "public_order_id": order.public_order_id,
        "resumable_link": document.resumable_link,
    });
    enqueue_for_topic(
        tx,
        shop.id,
        WebhookKind::Checkout,
        Topic::OrderAbandoned.as_str(),
        &payload,
        now,
    )?;
    Ok(())
}

/// The platform's id of the shop's customer of `email`, when the directory knows them (a
/// Customer Saved event or a sync brought them).
fn platform_customer_id(
    tx: &mut dyn CheckoutRepositories,
    shop: &Shop,
    email: Option<&str>,
) -> Result<Option<String>, DomainError> {
    let Some(email) = email else {
        return Ok(None);
    };
    let Some(id) = tx.customer_id_by_email(shop.id, email)? else {
        return Ok(None);
    };
    Ok(DirectoryRepository::directory_customer(tx, shop.id, id)?
        .filter(|customer| customer.deleted_at.is_none())
        .and_then(|customer| customer.platform_id))
}

/// gift_card/created's payload for one card of line item `item`.
pub fn gift_card_payload(
    shop: &Shop,
    order: &CheckoutOrder,
    item: &CheckoutLineItem,
    key: &str,
    token: &str,
) -> Value {
    let (platform_domain, domain) = domains(shop);
    let customer = order.document.customer.clone().unwrap_or_default();
    json!({
        "platform_domain": platform_domain,
        "domain": domain,
        "platform_order_id": order.platform_order_id.clone().unwrap_or_default(),
        "public_order_id": order.public_order_id,
        "platform_customer_id": null,
        "customer": {
            "email_address": customer.email_address,
            "first_name": customer.first_name,
            "last_name": customer.last_name,
        },
        "gift_card_email": customer.email_address,
        "gift_card_token": token,
        "gift_card_key": key,
        "gift_card_amount": item.price,
        "line_item_key": item.line_item_key,
        "sku": item.sku,
    })
}

/// Enqueues gift_card/created for each card's payload, with one read of the endpoints.
pub fn emit_gift_cards(
    tx: &mut dyn CheckoutRepositories,
    shop: &Shop,
    payloads: &[Value],
    now: Timestamp,
) -> Result<(), DomainError> {
    enqueue_all_for_topic(
        tx,
        shop.id,
        WebhookKind::Checkout,
        Topic::GiftCardCreated.as_str(),
        payloads,
        now,
    )?;
    Ok(())
}
