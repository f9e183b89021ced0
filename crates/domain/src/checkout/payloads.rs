//! The payloads of the six checkout topics, enqueued as checkout webhook messages
//! in the transaction of the change they report.

use serde::Serialize;

use crate::access::shop::Shop;
use crate::checkout::repository::{CheckoutOrder, CheckoutRepositories, CheckoutStatus};
use crate::checkout::shown::{
    ApplicationState, EmptyList, ProductData, ShownCustomer, ShownDiscount,
};
use crate::checkout::state::{
    CheckoutCustomer, CheckoutDocument, CheckoutLineItem, CheckoutMetaData, CheckoutTax,
};
use crate::checkout::storefront::resumable_link;
use crate::checkout::sweeps::{Fulfillment, fulfillment_data};
use crate::directory::DirectoryRepository;
use crate::kernel::error::DomainError;
use crate::kernel::ids::CheckoutOrderId;
use crate::kernel::money::Cents;
use crate::kernel::time::Timestamp;
use crate::webhooks::{self, WebhookKind, enqueue_all_for_topic, enqueue_for_topic};

/// The checkout topics (ids 1..6).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Topic {
    /// `order/processed`: Process Order went through.
    OrderProcessed,
    /// `order/created`: the platform has the order and its payments.
    OrderCreated,
    /// `order/fulfilled`: the platform fulfilled the order.
    OrderFulfilled,
    /// `order/abandoned`: the checkout was left untouched, with items and an email.
    OrderAbandoned,
    /// `order/failed`: a payment was declined, or the push to the platform failed for good.
    OrderFailed,
    /// `gift_card/created`: one for each gift card sold, while the shop's gift cards are on.
    GiftCardCreated,
}

impl Topic {
    /// The topic's name, as webhooks are registered for it.
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

/// The payload of order/processed, order/created, order/failed and order/fulfilled:
/// `application_state` is the one the storefront was shown.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct OrderPayload {
    pub platform_domain: String,
    pub domain: String,
    pub application_state: ApplicationState,
    pub order_id: CheckoutOrderId,
    pub public_order_id: String,
    pub platform_order_id: String,
    pub platform_friendly_identifier: String,
    pub order_source: &'static str,
    pub order_source_name: &'static str,
    pub fulfillment_status: &'static str,
    /// `[]` until the order is fulfilled; then the fulfillment, as order/fulfilled reports it.
    pub fulfillment_data: FulfillmentData,
}

/// An order's `fulfillment_data`: none yet (`[]`), or the fulfillment's.
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub(crate) enum FulfillmentData {
    None(EmptyList),
    Fulfilled(Box<Fulfillment>),
}

/// The payload of `order` under one of the order topics.
pub(crate) fn order_payload(
    shop: &Shop,
    order: &CheckoutOrder,
    application_state: ApplicationState,
    fulfillment: Option<Fulfillment>,
) -> OrderPayload {
    let (platform_domain, domain) = domains(shop);
    OrderPayload {
        platform_domain,
        domain,
        application_state,
        order_id: order.id,
        public_order_id: order.public_order_id.clone(),
        platform_order_id: order.platform_order_id.clone().unwrap_or_default(),
        platform_friendly_identifier: order
            .document
            .platform_friendly_identifier
            .clone()
            .or_else(|| order.platform_order_id.clone())
            .unwrap_or_default(),
        order_source: ORDER_SOURCE,
        order_source_name: ORDER_SOURCE_NAME,
        fulfillment_status: if fulfillment.is_some() {
            "fulfilled"
        } else {
            "unfulfilled"
        },
        fulfillment_data: match fulfillment {
            Some(data) => FulfillmentData::Fulfilled(Box::new(data)),
            None => FulfillmentData::None(EmptyList),
        },
    }
}

/// What a checkout's messages are about: the console lists them by it.
pub fn subject(order: &CheckoutOrder) -> String {
    format!("checkout:{}", order.public_order_id)
}

/// Enqueues `topic` (order/processed, order/created, order/failed) about `order`.
pub fn emit(
    tx: &mut dyn CheckoutRepositories,
    shop: &Shop,
    order: &CheckoutOrder,
    topic: Topic,
    application_state: ApplicationState,
    now: Timestamp,
) -> Result<(), DomainError> {
    let payload = order_payload(shop, order, application_state, None);
    enqueue_for_topic(
        tx,
        shop.id,
        WebhookKind::Checkout,
        topic.as_str(),
        &payload,
        Some(&subject(order)),
        now,
    )?;
    Ok(())
}

/// Enqueues order/fulfilled with its `fulfillment_data` (an object).
pub(crate) fn emit_fulfilled(
    tx: &mut dyn CheckoutRepositories,
    shop: &Shop,
    order: &CheckoutOrder,
    fulfillment_data: Fulfillment,
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
        Some(&subject(order)),
        now,
    )?;
    Ok(())
}

/// A line item of order/abandoned: the abandoned payload writes `properties` as name/value pairs and
/// `visible` as a number here, and the line's parts in this order.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct AbandonedLineItem {
    pub discounts: Vec<ShownDiscount>,
    pub fees: EmptyList,
    pub taxes: Vec<CheckoutTax>,
    pub product_data: ProductData<Vec<Property>, u8>,
}

/// A line item property as a name/value pair.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Property {
    /// The property's name.
    pub name: String,
    /// The property's value.
    pub value: String,
}

/// order/abandoned's payload.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct AbandonedPayload {
    pub customer: ShownCustomer,
    pub line_items: Vec<AbandonedLineItem>,
    pub order_meta_data: CheckoutMetaData,
    pub public_order_id: String,
    pub resumable_link: String,
}

/// Enqueues order/abandoned (the customer, line items, meta data and the link
/// that resumes the checkout).
pub(crate) fn emit_abandoned(
    tx: &mut dyn CheckoutRepositories,
    shop: &Shop,
    order: &CheckoutOrder,
    now: Timestamp,
) -> Result<(), DomainError> {
    let platform_id = platform_customer_id(tx, shop, order.document.email())?;
    let payload = abandoned_payload(order, platform_id.as_deref());
    enqueue_for_topic(
        tx,
        shop.id,
        WebhookKind::Checkout,
        Topic::OrderAbandoned.as_str(),
        &payload,
        Some(&subject(order)),
        now,
    )?;
    Ok(())
}

/// order/abandoned's payload of `order`, whose customer the platform knows as `platform_id`.
fn abandoned_payload(order: &CheckoutOrder, platform_id: Option<&str>) -> AbandonedPayload {
    let document = &order.document;
    let line_items = document
        .line_items
        .iter()
        .zip(document.line_shares())
        .map(|(item, shares)| {
            let properties = item
                .properties
                .iter()
                .map(|(name, value)| Property {
                    name: name.clone(),
                    value: value.clone(),
                })
                .collect();
            AbandonedLineItem {
                discounts: shares.shown_discounts(),
                fees: EmptyList,
                taxes: shares.taxes.clone(),
                product_data: ProductData::of(item, properties, 1),
            }
        })
        .collect();
    AbandonedPayload {
        customer: document.shown_customer(platform_id),
        line_items,
        order_meta_data: document.order_meta_data.clone(),
        public_order_id: order.public_order_id.clone(),
        resumable_link: document.resumable_link.clone(),
    }
}

/// The platform's id of the shop's customer of `email`, when the directory knows them (a
/// Customer Saved event or a sync brought them).
pub(crate) fn platform_customer_id(
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

/// gift_card/created's payload for one card. The card's customer is the
/// checkout's guest: no platform customer.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct GiftCardPayload {
    pub platform_domain: String,
    pub domain: String,
    pub platform_order_id: String,
    pub public_order_id: String,
    pub platform_customer_id: Option<String>,
    pub customer: GiftCardCustomer,
    pub gift_card_email: String,
    pub gift_card_token: String,
    pub gift_card_key: String,
    pub gift_card_amount: Cents,
    pub line_item_key: String,
    pub sku: String,
}

/// Who bought a gift card.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct GiftCardCustomer {
    pub email_address: String,
    pub first_name: String,
    pub last_name: String,
}

/// gift_card/created's payload for one card of line item `item`.
pub(crate) fn gift_card_payload(
    shop: &Shop,
    order: &CheckoutOrder,
    item: &CheckoutLineItem,
    key: &str,
    token: &str,
) -> GiftCardPayload {
    let (platform_domain, domain) = domains(shop);
    let customer = order.document.customer.clone().unwrap_or_default();
    GiftCardPayload {
        platform_domain,
        domain,
        platform_order_id: order.platform_order_id.clone().unwrap_or_default(),
        public_order_id: order.public_order_id.clone(),
        platform_customer_id: None,
        gift_card_email: customer.email_address.clone(),
        customer: GiftCardCustomer {
            email_address: customer.email_address,
            first_name: customer.first_name,
            last_name: customer.last_name,
        },
        gift_card_token: token.to_string(),
        gift_card_key: key.to_string(),
        gift_card_amount: item.price,
        line_item_key: item.line_item_key.clone(),
        sku: item.sku.clone(),
    }
}

/// Enqueues gift_card/created for each card's payload, with one read of the endpoints.
pub(crate) fn emit_gift_cards(
    tx: &mut dyn CheckoutRepositories,
    shop: &Shop,
    order: &CheckoutOrder,
    payloads: &[GiftCardPayload],
    now: Timestamp,
) -> Result<(), DomainError> {
    enqueue_all_for_topic(
        tx,
        shop.id,
        WebhookKind::Checkout,
        Topic::GiftCardCreated.as_str(),
        payloads,
        Some(&subject(order)),
        now,
    )?;
    Ok(())
}

/// A sample payload of a topic, marked `"test": true`: what a test delivery sends.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct SamplePayload<T> {
    pub test: bool,
    #[serde(flatten)]
    pub payload: T,
}

/// The payload of a test delivery: the topic's payload for a sample order.
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub(crate) enum TestPayload {
    Abandoned(Box<SamplePayload<AbandonedPayload>>),
    GiftCard(Box<SamplePayload<GiftCardPayload>>),
    Order(Box<SamplePayload<OrderPayload>>),
}

/// An order of one test product for a test customer, as a test delivery shows it.
fn sample_order(shop: &Shop, now: Timestamp) -> CheckoutOrder {
    let public_order_id = "0".repeat(32);
    let mut document =
        CheckoutDocument::new(&shop.currency, resumable_link(shop, &public_order_id));
    document.customer = Some(CheckoutCustomer {
        public_id: format!("{}a", "0".repeat(31)),
        first_name: "Test".to_string(),
        last_name: "Customer".to_string(),
        email_address: "test.customer@example.test".to_string(),
        accepts_marketing: false,
    });
    document.line_items = vec![CheckoutLineItem {
        line_item_key: "test-line".to_string(),
        product_id: "1".to_string(),
        variant_id: "1".to_string(),
        title: "Test product".to_string(),
        product_title: "Test product".to_string(),
        sku: "TEST-SKU".to_string(),
        barcode: String::new(),
        image_url: String::new(),
        description: "A test product".to_string(),
        vendor: String::new(),
        tags: String::new(),
        price: Cents(1000),
        compare_at_price: Cents::ZERO,
        quantity: 1,
        weight: 0.0,
        weight_unit: "g".to_string(),
        requires_shipping: true,
        taxable: true,
        properties: Default::default(),
    }];
    CheckoutOrder {
        id: CheckoutOrderId(0),
        shop_id: shop.id,
        public_order_id,
        status: CheckoutStatus::Open,
        platform_order_id: Some("test-order".to_string()),
        last_activity_at: now,
        abandoned_at: None,
        fulfilled_at: None,
        version: 0,
        document,
        created_at: now,
        updated_at: now,
    }
}

/// The payload a test delivery of `topic` sends: the topic's own shape, for a sample order.
pub(crate) fn test_payload(shop: &Shop, topic: &str, now: Timestamp) -> TestPayload {
    let order = sample_order(shop, now);
    match topic {
        "order/abandoned" => TestPayload::Abandoned(Box::new(SamplePayload {
            test: true,
            payload: abandoned_payload(&order, None),
        })),
        "gift_card/created" => {
            let item = &order.document.line_items[0];
            TestPayload::GiftCard(Box::new(SamplePayload {
                test: true,
                payload: gift_card_payload(shop, &order, item, "test-key", "test-token"),
            }))
        }
        _ => {
            let fulfillment = (topic == Topic::OrderFulfilled.as_str())
                .then(|| fulfillment_data(&order, None, now));
            let state = order.document.application_state(&order.public_order_id);
            TestPayload::Order(Box::new(SamplePayload {
                test: true,
                payload: order_payload(shop, &order, state, fulfillment),
            }))
        }
    }
}

/// Send Test Webhook: enqueues a sample payload of the webhook's topic for it alone; the
/// message's `webhook-id`. A disabled webhook refuses (422).
pub fn send_test(
    tx: &mut dyn CheckoutRepositories,
    shop: &Shop,
    public_id: &str,
    now: Timestamp,
) -> Result<String, DomainError> {
    let endpoint = webhooks::checkout::find(tx, shop, public_id)?;
    if !endpoint.is_active() {
        return Err(webhooks::checkout::disabled());
    }
    let payload = test_payload(shop, &endpoint.topic, now);
    let (_, message_id) = webhooks::enqueue_for_endpoint(tx, &endpoint, &payload, now)?;
    Ok(message_id)
}
