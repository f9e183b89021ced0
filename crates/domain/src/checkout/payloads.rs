//! The payloads of the checkout topics, enqueued as checkout webhook messages in the
//! transaction of the change they report, and each topic's JSON Schema, generated from them.

use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;

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
use crate::webhooks::catalogue::{NamedSchemas, named_schema, self_contained_schema_with};
use crate::webhooks::operational::EndpointDisabled;
use crate::webhooks::{
    self, KnownEndpoint, NewWebhookMessage, WebhookKind, enqueue_all_for_topic, enqueue_for_topic,
};

/// The checkout topics (ids 1..7).
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
    /// `webhook/disabled`: deliveries to one of the shop's checkout webhooks were disabled
    /// after failing for too long (or on a 410 answer).
    WebhookDisabled,
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
            Topic::WebhookDisabled => "webhook/disabled",
        }
    }

    /// Every topic, by id: a topic's id is its position plus one.
    pub const ALL: [Topic; 7] = [
        Topic::OrderProcessed,
        Topic::OrderCreated,
        Topic::OrderFulfilled,
        Topic::OrderAbandoned,
        Topic::OrderFailed,
        Topic::GiftCardCreated,
        Topic::WebhookDisabled,
    ];

    /// The topic's `webhook_topic_id`.
    pub fn id(self) -> i64 {
        Topic::ALL
            .iter()
            .position(|topic| *topic == self)
            .map_or(0, |index| index as i64 + 1)
    }

    /// The topic named `name` (`order/created`); `None` for an unknown name.
    pub fn parse(name: &str) -> Option<Topic> {
        Topic::ALL.into_iter().find(|topic| topic.as_str() == name)
    }

    /// When the topic is sent, as the catalogue describes it.
    pub fn description(self) -> &'static str {
        match self {
            Topic::OrderProcessed => {
                "Process Order went through: the order is paid and queued for the platform."
            }
            Topic::OrderCreated => "The platform has the order and its payments.",
            Topic::OrderFulfilled => "The platform fulfilled the order.",
            Topic::OrderAbandoned => "The checkout was left untouched, with items and an email.",
            Topic::OrderFailed => {
                "A payment was declined, or the push to the platform failed for good."
            }
            Topic::GiftCardCreated => {
                "A gift card was sold (one message per card), while the shop's gift cards are on."
            }
            Topic::WebhookDisabled => {
                "Deliveries to one of the shop's checkout webhooks were disabled after failing for too long, or on a 410 answer."
            }
        }
    }
}

/// A checkout topic's delivered body: the topic's payload, and `"test": true` when it is a
/// test delivery (Send Test Webhook) of sample data.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct CheckoutDelivery<Payload> {
    /// `true` on a test delivery of sample data; absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub test: Option<bool>,
    /// The topic's payload.
    #[serde(flatten)]
    pub payload: Payload,
}

/// The JSON Schema (2020-12, self-contained) of what `topic` delivers, generated from its
/// payload type.
pub fn payload_schema(topic: Topic) -> Value {
    match topic {
        Topic::OrderProcessed
        | Topic::OrderCreated
        | Topic::OrderFulfilled
        | Topic::OrderFailed => delivery_schema::<OrderPayload>(),
        Topic::OrderAbandoned => delivery_schema::<AbandonedPayload>(),
        Topic::GiftCardCreated => delivery_schema::<GiftCardPayload>(),
        Topic::WebhookDisabled => delivery_schema::<EndpointDisabled>(),
    }
}

/// A checkout topic as List Webhook Topics shows it.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct CheckoutWebhookTopic {
    /// The topic's fixed id (1..7).
    #[schema(minimum = 1, maximum = 7)]
    pub webhook_topic_id: i64,
    /// The topic's name (`order/created`).
    pub webhook_topic_name: &'static str,
    /// The JSON Schema (2020-12) of the topic's whole delivered body, self-contained (the
    /// types it refers to are in its own `$defs`).
    #[schema(value_type = Object)]
    pub schema: Value,
}

/// List Webhook Topics: every checkout topic, by id, with its schema.
pub fn webhook_topics() -> Vec<CheckoutWebhookTopic> {
    Topic::ALL
        .into_iter()
        .map(|topic| CheckoutWebhookTopic {
            webhook_topic_id: topic.id(),
            webhook_topic_name: topic.as_str(),
            schema: payload_schema(topic),
        })
        .collect()
}

fn delivery_schema<Payload: ToSchema>() -> Value {
    let mut named = NamedSchemas::new();
    named_schema::<Payload>(&mut named);
    self_contained_schema_with::<CheckoutDelivery<Payload>>(named)
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
#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(as = CheckoutOrderPayload)]
pub(crate) struct OrderPayload {
    /// The shop's domain on the platform.
    pub platform_domain: String,
    /// The domain the shop's customers see (the platform's when it has no custom one).
    pub domain: String,
    /// The checkout as the storefront was shown it.
    pub application_state: ApplicationState,
    /// The checkout order's id.
    pub order_id: CheckoutOrderId,
    /// The checkout order's public id.
    pub public_order_id: String,
    /// The platform's id of the order; empty before the platform has it.
    pub platform_order_id: String,
    /// The platform's friendly name of the order (else its id); empty before it has one.
    pub platform_friendly_identifier: String,
    /// `headless_checkout`.
    pub order_source: &'static str,
    /// `Mercer headless checkout`.
    pub order_source_name: &'static str,
    /// `unfulfilled`, or `fulfilled` on order/fulfilled.
    pub fulfillment_status: &'static str,
    /// `[]` until the order is fulfilled; then the fulfillment, as order/fulfilled reports it.
    pub fulfillment_data: FulfillmentData,
}

/// An order's `fulfillment_data`: none yet (`[]`), or the fulfillment's.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(untagged)]
#[schema(as = CheckoutFulfillmentData)]
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
#[derive(Debug, Clone, Serialize, ToSchema)]
pub(crate) struct AbandonedLineItem {
    /// The line's share of the order's discounts.
    pub discounts: Vec<ShownDiscount>,
    /// Always `[]`.
    pub fees: EmptyList,
    /// The line's taxes.
    pub taxes: Vec<CheckoutTax>,
    /// The line's product.
    #[schema(inline)]
    pub product_data: ProductData<Vec<Property>, u8>,
}

/// A line item property as a name/value pair.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
#[schema(as = CheckoutProperty)]
pub struct Property {
    /// The property's name.
    pub name: String,
    /// The property's value.
    pub value: String,
}

/// order/abandoned's payload.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub(crate) struct AbandonedPayload {
    /// The checkout's customer.
    pub customer: ShownCustomer,
    /// The checkout's line items.
    pub line_items: Vec<AbandonedLineItem>,
    /// The checkout's meta data.
    pub order_meta_data: CheckoutMetaData,
    /// The checkout order's public id.
    pub public_order_id: String,
    /// The link that resumes the checkout.
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
#[derive(Debug, Clone, Serialize, ToSchema)]
pub(crate) struct GiftCardPayload {
    /// The shop's domain on the platform.
    pub platform_domain: String,
    /// The domain the shop's customers see.
    pub domain: String,
    /// The platform's id of the order; empty before the platform has it.
    pub platform_order_id: String,
    /// The checkout order's public id.
    pub public_order_id: String,
    /// Always `null`: the card's customer is the checkout's guest.
    pub platform_customer_id: Option<String>,
    /// Who bought the card.
    pub customer: GiftCardCustomer,
    /// Where the card is sent.
    pub gift_card_email: String,
    /// The card's token.
    pub gift_card_token: String,
    /// The card's key.
    pub gift_card_key: String,
    /// The card's amount, in cents.
    #[schema(value_type = i64)]
    pub gift_card_amount: Cents,
    /// The key of the line item that sold it.
    pub line_item_key: String,
    /// The gift card product's SKU.
    pub sku: String,
}

/// Who bought a gift card.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub(crate) struct GiftCardCustomer {
    /// Email address.
    pub email_address: String,
    /// First name.
    pub first_name: String,
    /// Last name.
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
fn sample<T>(payload: T) -> Box<CheckoutDelivery<T>> {
    Box::new(CheckoutDelivery {
        test: Some(true),
        payload,
    })
}

/// The payload of a test delivery: the topic's payload for a sample order.
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub(crate) enum TestPayload {
    Abandoned(Box<CheckoutDelivery<AbandonedPayload>>),
    GiftCard(Box<CheckoutDelivery<GiftCardPayload>>),
    Order(Box<CheckoutDelivery<OrderPayload>>),
    Disabled(Box<CheckoutDelivery<EndpointDisabled>>),
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
    match Topic::parse(topic) {
        Some(Topic::OrderAbandoned) => {
            TestPayload::Abandoned(sample(abandoned_payload(&order, None)))
        }
        Some(Topic::GiftCardCreated) => {
            let item = &order.document.line_items[0];
            TestPayload::GiftCard(sample(gift_card_payload(
                shop,
                &order,
                item,
                "test-key",
                "test-token",
            )))
        }
        Some(Topic::WebhookDisabled) => TestPayload::Disabled(sample(EndpointDisabled {
            endpoint_id: "0".repeat(32),
            topic: Topic::OrderCreated.as_str().to_string(),
            url: "https://hooks.example.test/orders".to_string(),
            failures_since: now,
            last_error: "HTTP 500".to_string(),
        })),
        _ => {
            let fulfillment = (topic == Topic::OrderFulfilled.as_str())
                .then(|| fulfillment_data(&order, None, now));
            let state = order.document.application_state(&order.public_order_id);
            TestPayload::Order(sample(order_payload(shop, &order, state, fulfillment)))
        }
    }
}

/// Send Test Webhook: enqueues a sample payload of the webhook's topic for it alone; the
/// message's `webhook-id`, and the webhook as [`test_message`] takes it next time. A disabled
/// webhook refuses (422).
pub fn send_test(
    tx: &mut dyn CheckoutRepositories,
    shop: &Shop,
    public_id: &str,
    now: Timestamp,
) -> Result<(String, KnownEndpoint), DomainError> {
    let endpoint = webhooks::checkout::find(tx, shop, public_id)?;
    if !endpoint.is_active() {
        return Err(webhooks::checkout::disabled());
    }
    let payload = test_payload(shop, &endpoint.topic, now);
    let (_, message_id) = webhooks::enqueue_for_endpoint(tx, &endpoint, &payload, now)?;
    Ok((message_id, KnownEndpoint::of(&endpoint)))
}

/// Send Test Webhook for a webhook known from an earlier one, without reading it: the message
/// to store, for `insert_webhook_messages_for_live_endpoints` of checkout webhooks, which
/// stores it only while the webhook is still the shop's, active and of that topic. When it is
/// not stored, [`send_test`] gives the answer (404, 422, or a message after all).
pub fn test_message(
    shop: &Shop,
    endpoint: &KnownEndpoint,
    now: Timestamp,
) -> Result<NewWebhookMessage, DomainError> {
    let payload = test_payload(shop, &endpoint.topic, now);
    webhooks::message_for_known_endpoint(shop.id, endpoint, &payload, now)
}
