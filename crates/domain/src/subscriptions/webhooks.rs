//! Subscription webhook registration: the bodies of Create and
//! Update webhook subscription, checked with every problem on its path, and the use cases over
//! the webhooks feature's endpoints (kind `subscription`, one topic and its own shared secret
//! each, signed by the dispatcher with `x-svc-signature` and the Standard Webhooks headers).
//!
//! The callback URL is checked as checkout webhooks check theirs (`check_callback_url`, then the
//! address guard), before any transaction: the guard resolves names.

use serde::{Deserialize, Serialize};

use super::cancellation::Cancellation;
use super::resources::{Cents, Subscription, SubscriptionCustomer};
use super::topics::{Topic, WebhookTopic, webhook_topics};
use crate::access::credentials::Secret;
use crate::access::shop::Shop;
use crate::kernel::body::{Check, Field};
use crate::kernel::error::{DomainError, FieldError, Problems};
use crate::kernel::ids::SubscriptionOrderId;
use crate::kernel::outbound::{AddressGuard, check_callback_url};
use crate::kernel::time::Timestamp;
use crate::webhooks::{
    Listeners, NewWebhookEndpoint, WebhookEndpoint, WebhookKind, WebhookRepositories,
    apply_rate_limit, read_rate_limit, read_rate_limit_change,
};

/// The key the bodies and answers wrap a webhook subscription in.
pub(crate) const WRAPPER: &str = "webhook_subscription";
const CALLBACK_URL: &str = "webhook_subscription.callback_url";
const TOPIC_ID: &str = "webhook_subscription.webhook_topic_id";
const SHARED_SECRET: &str = "webhook_subscription.shared_secret";

/// `shared_secret` length, in characters.
pub(crate) const SECRET_MIN_CHARS: usize = 8;
pub(crate) const SECRET_MAX_CHARS: usize = 255;

/// The fields of a Create webhook subscription body's `{"webhook_subscription": {…}}`, as sent:
/// all are needed, and a missing one is a 422 `required` on its path.
#[derive(Debug, Clone, Default, Deserialize, Serialize, utoipa::ToSchema)]
#[serde(default)]
pub struct WebhookSubscriptionFields {
    /// The absolute http(s) URL the webhooks are sent to.
    #[schema(
        example = "https://hooks.example.com/mercer",
        format = "uri",
        value_type = String,
        required = true
    )]
    pub callback_url: Option<String>,
    /// The topic's id, as List Webhook Topics gives it (1..=21).
    #[schema(example = 1, minimum = 1, maximum = 21, value_type = i64, required = true)]
    pub webhook_topic_id: Option<i64>,
    /// The secret the webhooks are signed with (8 to 255 characters, not blank). It is never
    /// shown again.
    #[schema(
        example = "a-long-shared-secret",
        min_length = 8,
        max_length = 255,
        value_type = String,
        required = true
    )]
    pub shared_secret: Option<String>,
    /// At most how many deliveries to the webhook start per second (an integer from 1 to
    /// 10,000, or its decimal text), however many Mercer processes deliver; messages beyond it
    /// wait their turn in the queue, which is not a failed attempt. Left out or null: no limit.
    #[schema(value_type = Option<i64>, minimum = 1, maximum = 10000, example = 20)]
    #[serde(skip_serializing)]
    pub rate_limit_per_s: Field<i64>,
}

/// The fields of an Update webhook subscription body's `{"webhook_subscription": {…}}`: those
/// given replace the stored ones.
// A body of the wrong type is told it expected a `WebhookSubscriptionFields`, as before this
// type had a name of its own; the same holds for the update body.
#[derive(Debug, Clone, Default, Deserialize, Serialize, utoipa::ToSchema)]
#[serde(default, expecting = "struct WebhookSubscriptionFields")]
pub struct WebhookSubscriptionUpdateFields {
    /// The absolute http(s) URL the webhooks are sent to.
    #[schema(example = "https://hooks.example.com/mercer", format = "uri")]
    pub callback_url: Option<String>,
    /// The topic's id, as List Webhook Topics gives it (1..=21).
    #[schema(example = 1, minimum = 1, maximum = 21)]
    pub webhook_topic_id: Option<i64>,
    /// The secret the webhooks are signed with (8 to 255 characters, not blank). It is never
    /// shown again.
    #[schema(example = "a-long-shared-secret", min_length = 8, max_length = 255)]
    pub shared_secret: Option<String>,
    /// At most how many deliveries to the webhook start per second (an integer from 1 to
    /// 10,000, or its decimal text), however many Mercer processes deliver; messages beyond it
    /// wait their turn in the queue, which is not a failed attempt. Null removes the limit;
    /// left out, it stays as it is.
    #[schema(value_type = Option<i64>, minimum = 1, maximum = 10000, example = 20)]
    #[serde(skip_serializing)]
    pub rate_limit_per_s: Field<i64>,
}

impl From<WebhookSubscriptionUpdateFields> for WebhookSubscriptionFields {
    fn from(fields: WebhookSubscriptionUpdateFields) -> Self {
        WebhookSubscriptionFields {
            callback_url: fields.callback_url,
            webhook_topic_id: fields.webhook_topic_id,
            shared_secret: fields.shared_secret,
            rate_limit_per_s: fields.rate_limit_per_s,
        }
    }
}

/// The body of Create webhook subscription.
#[derive(Debug, Clone, Default, Deserialize, Serialize, utoipa::ToSchema)]
#[serde(default)]
pub struct WebhookSubscriptionBody {
    /// The wrapped fields; a body without them is refused (422).
    #[schema(required = true, value_type = WebhookSubscriptionFields)]
    pub webhook_subscription: Option<WebhookSubscriptionFields>,
}

impl WebhookSubscriptionBody {
    /// The wrapped fields, or 422 `required` on `webhook_subscription`.
    pub fn fields(self) -> Result<WebhookSubscriptionFields, DomainError> {
        self.webhook_subscription
            .ok_or_else(|| DomainError::Invalid(vec![FieldError::required(WRAPPER)]))
    }
}

/// The body of Update webhook subscription; its wrapper is required as on create.
#[derive(Debug, Clone, Default, Deserialize, Serialize, utoipa::ToSchema)]
#[serde(default, expecting = "struct WebhookSubscriptionBody")]
pub struct WebhookSubscriptionUpdateBody {
    /// The wrapped fields to change; a body without them is refused (422).
    #[schema(required = true, value_type = WebhookSubscriptionUpdateFields)]
    pub webhook_subscription: Option<WebhookSubscriptionUpdateFields>,
}

impl WebhookSubscriptionUpdateBody {
    /// The wrapped fields (for [`WebhookSubscriptionUpdate::new`]), or 422 `required` on
    /// `webhook_subscription`.
    pub fn fields(self) -> Result<WebhookSubscriptionFields, DomainError> {
        self.webhook_subscription
            .map(WebhookSubscriptionFields::from)
            .ok_or_else(|| DomainError::Invalid(vec![FieldError::required(WRAPPER)]))
    }
}

/// List Webhook Topics: `{"webhook_topics":[{"id","name","schema"}]}`, ids 1..21.
pub fn topics() -> Vec<WebhookTopic> {
    webhook_topics()
}

/// Checks a callback URL's form and, through the guard, where it leads (422 on
/// `webhook_subscription.callback_url` either way). Call it outside any transaction.
pub fn check_callback(url: Option<&str>, guard: &dyn AddressGuard) -> Result<String, FieldError> {
    let url = url.ok_or_else(|| FieldError::required(CALLBACK_URL))?;
    let url = check_callback_url(CALLBACK_URL, url)?;
    guard.check(&url).map_err(|reason| {
        FieldError::new(
            CALLBACK_URL,
            "address_not_allowed",
            format!("{CALLBACK_URL} is not allowed: {reason}"),
        )
    })?;
    Ok(url)
}

fn check_topic(id: Option<i64>) -> Result<Topic, FieldError> {
    let id = id.ok_or_else(|| FieldError::required(TOPIC_ID))?;
    Topic::from_id(id).ok_or_else(|| {
        FieldError::new(
            TOPIC_ID,
            "invalid_value",
            format!("{TOPIC_ID} must be one of the ids of List Webhook Topics (1..21)"),
        )
    })
}

fn check_secret(secret: Option<String>) -> Result<Secret, FieldError> {
    let secret = secret.ok_or_else(|| FieldError::required(SHARED_SECRET))?;
    let length = secret.chars().count();
    if !(SECRET_MIN_CHARS..=SECRET_MAX_CHARS).contains(&length) {
        return Err(FieldError::new(
            SHARED_SECRET,
            "invalid_length",
            format!(
                "{SHARED_SECRET} must be {SECRET_MIN_CHARS} to {SECRET_MAX_CHARS} characters long"
            ),
        ));
    }
    if secret.trim().is_empty() {
        return Err(FieldError::new(
            SHARED_SECRET,
            "blank",
            format!("{SHARED_SECRET} must not be blank"),
        ));
    }
    Ok(Secret::new(secret))
}

/// A checked Create webhook subscription body.
#[derive(Debug, Clone)]
pub struct NewWebhookSubscription {
    /// The topic the webhook is sent for.
    pub topic: Topic,
    /// The checked callback URL.
    pub callback_url: String,
    /// The secret the webhooks are signed with.
    pub shared_secret: Secret,
    /// At most how many deliveries start per second; None: no limit.
    pub rate_limit_per_s: Option<u32>,
}

impl NewWebhookSubscription {
    /// Every problem of the body at once; `callback` is [`check_callback`]'s answer.
    pub fn parse(
        fields: WebhookSubscriptionFields,
        callback: Result<String, FieldError>,
    ) -> Result<Self, DomainError> {
        let mut problems = Problems::new();
        let callback_url = problems.check(callback);
        let topic = problems.check(check_topic(fields.webhook_topic_id));
        let shared_secret = problems.check(check_secret(fields.shared_secret));
        let rate_limit_per_s = read_rate_limit(
            &mut Check::root(&mut problems).nested(WRAPPER),
            fields.rate_limit_per_s,
        );
        problems.into_result()?;
        match (topic, callback_url, shared_secret) {
            (Some(topic), Some(callback_url), Some(shared_secret)) => Ok(NewWebhookSubscription {
                topic,
                callback_url,
                shared_secret,
                rate_limit_per_s,
            }),
            _ => Err(DomainError::invalid(
                WRAPPER,
                "invalid",
                "the body is invalid",
            )),
        }
    }
}

/// A checked Update webhook subscription body: any of the callback URL, the topic and the
/// shared secret, each checked as at creation.
#[derive(Debug, Clone)]
pub struct WebhookSubscriptionUpdate {
    /// The new topic's id, as sent (checked when the update is applied); `None` keeps it.
    pub webhook_topic_id: Option<i64>,
    /// [`check_callback`]'s answer for a new callback URL; `None` keeps it.
    pub callback_url: Option<Result<String, FieldError>>,
    /// The new shared secret, as sent (checked when the update is applied); `None` keeps it.
    pub shared_secret: Option<String>,
    /// The rate limit, as sent (checked when the update is applied): left out keeps it, null
    /// clears it.
    pub rate_limit_per_s: Field<i64>,
}

impl WebhookSubscriptionUpdate {
    /// `callback` is [`check_callback`]'s answer when the body has a `callback_url`.
    pub fn new(
        fields: &WebhookSubscriptionFields,
        callback: Option<Result<String, FieldError>>,
    ) -> Self {
        WebhookSubscriptionUpdate {
            webhook_topic_id: fields.webhook_topic_id,
            callback_url: callback,
            shared_secret: fields.shared_secret.clone(),
            rate_limit_per_s: fields.rate_limit_per_s.clone(),
        }
    }

    /// The endpoint as it becomes, once every given field is checked; every problem is
    /// reported, and then nothing changes.
    pub fn check(self, endpoint: &WebhookEndpoint) -> Result<WebhookEndpoint, DomainError> {
        let mut problems = Problems::new();
        let url = self.callback_url.and_then(|url| problems.check(url));
        let topic = self
            .webhook_topic_id
            .and_then(|id| problems.check(check_topic(Some(id))));
        let secret = self
            .shared_secret
            .and_then(|secret| problems.check(check_secret(Some(secret))));
        let rate_limit_per_s = read_rate_limit_change(
            &mut Check::root(&mut problems).nested(WRAPPER),
            self.rate_limit_per_s,
        );
        problems.into_result()?;
        let mut changed = endpoint.clone();
        if let Some(rate_limit_per_s) = rate_limit_per_s {
            changed.rate_limit_per_s = rate_limit_per_s;
        }
        if let Some(url) = url {
            changed.callback_url = url;
        }
        if let Some(topic) = topic {
            changed.topic = topic.as_str().to_string();
        }
        if let Some(secret) = secret {
            changed.secret = Some(secret);
        }
        Ok(changed)
    }
}

/// Create webhook subscription.
pub fn create(
    tx: &mut dyn WebhookRepositories,
    shop: &Shop,
    new: NewWebhookSubscription,
    now: Timestamp,
) -> Result<WebhookEndpoint, DomainError> {
    let mut endpoint = tx.insert_webhook_endpoint(&NewWebhookEndpoint {
        shop_id: shop.id,
        kind: WebhookKind::Subscription,
        topic: new.topic.as_str().to_string(),
        callback_url: new.callback_url,
        secret: Some(new.shared_secret),
        created_at: now,
    })?;
    apply_rate_limit(tx, &mut endpoint, new.rate_limit_per_s, now)?;
    Ok(endpoint)
}

/// The shop's webhook subscriptions, oldest first.
pub fn list(
    tx: &mut dyn WebhookRepositories,
    shop: &Shop,
) -> Result<Vec<WebhookEndpoint>, DomainError> {
    Ok(tx.webhook_endpoints(shop.id, WebhookKind::Subscription)?)
}

/// A webhook subscription of the shop, or 404 (another shop's, a checkout webhook's id, a
/// deleted one).
pub fn find(
    tx: &mut dyn WebhookRepositories,
    shop: &Shop,
    id: &str,
) -> Result<WebhookEndpoint, DomainError> {
    tx.webhook_endpoint(shop.id, id)?
        .filter(|endpoint| endpoint.kind == WebhookKind::Subscription)
        .ok_or(DomainError::not_found("webhook_subscription"))
}

/// Update webhook subscription.
pub fn update(
    tx: &mut dyn WebhookRepositories,
    shop: &Shop,
    id: &str,
    update: WebhookSubscriptionUpdate,
    now: Timestamp,
) -> Result<WebhookEndpoint, DomainError> {
    let endpoint = find(tx, shop, id)?;
    let changed = update.check(&endpoint)?;
    let rate_changed = changed.rate_limit_per_s != endpoint.rate_limit_per_s;
    if changed.callback_url == endpoint.callback_url
        && changed.topic == endpoint.topic
        && changed.secret.as_ref().map(Secret::expose)
            == endpoint.secret.as_ref().map(Secret::expose)
    {
        if !rate_changed {
            return Ok(endpoint);
        }
    } else {
        tx.update_webhook_endpoint(&changed, now)?;
    }
    if rate_changed {
        tx.set_webhook_rate_limit(endpoint.id, changed.rate_limit_per_s, now)?;
    }
    find(tx, shop, id)
}

/// Delete webhook subscription; its pending messages are cancelled.
pub fn delete(
    tx: &mut dyn WebhookRepositories,
    shop: &Shop,
    id: &str,
    now: Timestamp,
) -> Result<(), DomainError> {
    let endpoint = find(tx, shop, id)?;
    tx.delete_webhook_endpoint(endpoint.id, now)?;
    Ok(())
}

/// A webhook subscription as answers show it; the shared secret never appears.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct WebhookSubscriptionResource {
    /// The id clients see (32 hex characters).
    pub id: String,
    /// Where the webhooks are sent.
    pub callback_url: String,
    /// The topic's id (1..=21); `None` when the stored topic is not a subscription topic.
    pub webhook_topic_id: Option<i64>,
    /// The topic's name (`subscription_created`).
    pub webhook_topic_name: String,
    /// When the webhook subscription was created.
    pub created_at: Timestamp,
    /// When the webhook subscription last changed.
    pub updated_at: Timestamp,
    /// When deliveries to the webhook were disabled; `None` while it is active.
    pub disabled_at: Option<Timestamp>,
    /// Why deliveries were disabled; `None` while it is active.
    pub disabled_reason: Option<String>,
    /// At most how many deliveries to the webhook start per second (1 to 10,000); null when
    /// there is no limit.
    #[schema(minimum = 1, maximum = 10000, example = 20)]
    pub rate_limit_per_s: Option<u32>,
}

/// A webhook subscription as answers show it.
pub fn resource(endpoint: &WebhookEndpoint) -> WebhookSubscriptionResource {
    WebhookSubscriptionResource {
        id: endpoint.public_id.clone(),
        callback_url: endpoint.callback_url.clone(),
        webhook_topic_id: Topic::parse(&endpoint.topic).map(Topic::id),
        webhook_topic_name: endpoint.topic.clone(),
        created_at: endpoint.created_at,
        updated_at: endpoint.updated_at,
        disabled_at: endpoint.disabled_at,
        disabled_reason: endpoint.disabled_reason.clone(),
        rate_limit_per_s: endpoint.rate_limit_per_s,
    }
}

/// The webhook subscription's delivery log, newest first (the dispatcher's, as for checkout
/// webhooks).
pub fn deliveries(
    tx: &mut dyn WebhookRepositories,
    shop: &Shop,
    id: &str,
    limit: usize,
) -> Result<Vec<crate::webhooks::log::DeliveryLine>, DomainError> {
    let endpoint = find(tx, shop, id)?;
    crate::webhooks::log::deliveries(tx, &endpoint, limit)
}

/// One message of the webhook subscription, with its payload and every attempt.
pub fn delivery(
    tx: &mut dyn WebhookRepositories,
    shop: &Shop,
    id: &str,
    message_id: &str,
) -> Result<crate::webhooks::log::Delivery, DomainError> {
    let endpoint = find(tx, shop, id)?;
    crate::webhooks::log::delivery(tx, &endpoint, message_id)
}

/// Sends a message again, with the same `webhook-id`.
pub fn resend(
    tx: &mut dyn WebhookRepositories,
    shop: &Shop,
    id: &str,
    message_id: &str,
    now: Timestamp,
) -> Result<(), DomainError> {
    let endpoint = find(tx, shop, id)?;
    crate::webhooks::log::resend(tx, &endpoint, message_id, now)
}

/// Sends again every failed message created since `since`; how many.
pub fn recover(
    tx: &mut dyn WebhookRepositories,
    shop: &Shop,
    id: &str,
    since: Timestamp,
    now: Timestamp,
) -> Result<u64, DomainError> {
    let endpoint = find(tx, shop, id)?;
    crate::webhooks::log::recover(tx, &endpoint, since, now)
}

/// A disabled webhook subscription gets messages again.
pub fn enable(
    tx: &mut dyn WebhookRepositories,
    shop: &Shop,
    id: &str,
    now: Timestamp,
) -> Result<WebhookEndpoint, DomainError> {
    let endpoint = find(tx, shop, id)?;
    tx.enable_webhook_endpoint(endpoint.id, now)?;
    find(tx, shop, id)
}

/// The body of a subscription webhook (the webhooks feature's, which its operational topic
/// uses too).
pub use crate::webhooks::Envelope;

/// The body of `subscription_cancelled`: the envelope and why the subscription was cancelled.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct CancelledEnvelope<Data> {
    /// `subscription_cancelled`.
    pub topic: String,
    /// The shop's identifier.
    pub shop_identifier: String,
    /// When the subscription was cancelled.
    pub created_at: Timestamp,
    /// The subscription.
    pub data: Data,
    /// The reason and comment the cancellation was given; both `null` when it ended on its own
    /// (the end of its rule) or no reason was given.
    pub cancellation: Cancellation,
}

/// The body of a topic about one of the subscription's orders: the envelope and the order.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct OrderEnvelope<Data, Order> {
    /// The topic's name (`subscription_order_created`).
    pub topic: String,
    /// The shop's identifier.
    pub shop_identifier: String,
    /// When it happened.
    pub created_at: Timestamp,
    /// The subscription the order is of.
    pub data: Data,
    /// The order.
    pub order: Order,
}

/// The `order` of `subscription_order_created`: the scheduler's attempt that placed it, or the
/// checkout's order that created the subscription (its first).
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
#[serde(untagged)]
pub enum CreatedOrder {
    /// An order placed by the scheduler.
    Attempt(OrderAttemptShown),
    /// The checkout order that created the subscription.
    Checkout(CheckoutFirstOrder),
}

/// The `order` of `subscription_payment_failed`: the scheduler's failed attempt, or the
/// checkout order whose payment was declined.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
#[serde(untagged)]
pub enum FailedOrder {
    /// A failed attempt of the scheduler.
    Attempt(OrderAttemptShown),
    /// The checkout order whose payment was declined; it never reached the platform.
    Checkout(DeclinedCheckoutOrder),
}

/// The `data` of `subscription_payment_failed`: the subscription, or, when the payment of the
/// checkout that would have created it was declined, the subscription it would have been.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
#[serde(untagged)]
pub enum PaymentFailedData {
    /// The subscription whose order's payment failed.
    Subscription(Box<Subscription>),
    /// The subscription a declined checkout would have created (`id` null).
    Proposed(Box<ProposedSubscription>),
}

fn envelope<Data>(shop: &Shop, topic: Topic, data: Data, now: Timestamp) -> Envelope<Data> {
    Envelope {
        topic: topic.as_str().to_string(),
        shop_identifier: shop.identifier.as_str().to_string(),
        created_at: now,
        data,
    }
}

/// Enqueues `topic`, one of the topics about a subscription without an order
/// (`subscription_created`, `subscription_updated`, …), with the subscription as its `data`,
/// for every live webhook subscription of the shop to it, in the caller's transaction.
/// `subscription_cancelled` says no reason ([`emit_cancelled`] gives one).
pub fn emit(
    tx: &mut dyn WebhookRepositories,
    shop: &Shop,
    topic: Topic,
    subscription: &Subscription,
    now: Timestamp,
) -> Result<(), DomainError> {
    if topic == Topic::SubscriptionCancelled {
        return emit_cancelled(tx, shop, subscription, &Cancellation::default(), now);
    }
    enqueue(
        tx,
        shop,
        topic,
        &envelope(shop, topic, subscription, now),
        now,
    )
}

/// Enqueues a customer topic (`customer_created`, `customer_updated`) with the customer as its
/// `data`.
pub fn emit_customer(
    tx: &mut dyn WebhookRepositories,
    shop: &Shop,
    topic: Topic,
    customer: &SubscriptionCustomer,
    now: Timestamp,
) -> Result<(), DomainError> {
    enqueue(tx, shop, topic, &envelope(shop, topic, customer, now), now)
}

/// `subscription_cancelled`: the payload's `cancellation` is the reason and comment it was
/// given.
pub(crate) fn emit_cancelled(
    tx: &mut dyn WebhookRepositories,
    shop: &Shop,
    subscription: &Subscription,
    cancellation: &Cancellation,
    now: Timestamp,
) -> Result<(), DomainError> {
    let topic = Topic::SubscriptionCancelled;
    let payload = CancelledEnvelope {
        topic: topic.as_str().to_string(),
        shop_identifier: shop.identifier.as_str().to_string(),
        created_at: now,
        data: subscription,
        cancellation: cancellation.clone(),
    };
    enqueue(tx, shop, topic, &payload, now)
}

/// A topic about one of the subscriptions' orders (`subscription_upcoming_order`,
/// `subscription_order_*`, `subscription_payment_failed`) with the scheduler's attempt as its
/// `order` (docs/scheduler.md), for several subscriptions and their attempts, with one read of
/// the shop's endpoints and one insert.
pub(crate) fn emit_each_with_attempt(
    tx: &mut dyn WebhookRepositories,
    shop: &Shop,
    topic: Topic,
    attempts: &[(&Subscription, &OrderAttemptShown)],
    now: Timestamp,
) -> Result<(), DomainError> {
    if attempts.is_empty() {
        return Ok(());
    }
    let payloads: Vec<_> = attempts
        .iter()
        .map(|(subscription, attempt)| OrderEnvelope {
            topic: topic.as_str().to_string(),
            shop_identifier: shop.identifier.as_str().to_string(),
            created_at: now,
            data: *subscription,
            order: *attempt,
        })
        .collect();
    crate::webhooks::enqueue_all_for_topic(
        tx,
        shop.id,
        WebhookKind::Subscription,
        topic.as_str(),
        &payloads,
        None,
        now,
    )?;
    Ok(())
}

/// Whether a topic's payload carries the order attempt as its `order`.
fn carries_attempt(topic: Topic) -> bool {
    matches!(
        topic,
        Topic::SubscriptionUpcomingOrder
            | Topic::SubscriptionOrderCreated
            | Topic::SubscriptionOrderTransactionFailed
            | Topic::SubscriptionOrderMaxRetriesReached
            | Topic::SubscriptionPaymentFailed
    )
}

/// Enqueues each of `topics`, in that order, about the subscription and the order attempt
/// that changed it: the order topics with the attempt as their `order` (as
/// [`emit_each_with_attempt`]), the others as [`emit`] does. One read of the shop's endpoints and
/// one insert for them all.
pub(crate) fn emit_about_attempt(
    tx: &mut dyn WebhookRepositories,
    shop: &Shop,
    topics: &[Topic],
    subscription: &Subscription,
    attempt: &OrderAttemptShown,
    now: Timestamp,
) -> Result<(), DomainError> {
    let names: Vec<&str> = topics.iter().map(|topic| topic.as_str()).collect();
    let listeners = Listeners::read(tx, shop.id, WebhookKind::Subscription, &names)?;
    let mut messages = Vec::new();
    for &topic in topics {
        let name = topic.as_str();
        let made = if carries_attempt(topic) {
            let payload = OrderEnvelope {
                topic: name.to_string(),
                shop_identifier: shop.identifier.as_str().to_string(),
                created_at: now,
                data: subscription,
                order: attempt,
            };
            listeners.messages(name, &[payload], None, now)?
        } else if topic == Topic::SubscriptionCancelled {
            let payload = CancelledEnvelope {
                topic: name.to_string(),
                shop_identifier: shop.identifier.as_str().to_string(),
                created_at: now,
                data: subscription,
                cancellation: Cancellation::default(),
            };
            listeners.messages(name, &[payload], None, now)?
        } else {
            let payload = envelope(shop, topic, subscription, now);
            listeners.messages(name, &[payload], None, now)?
        };
        messages.extend(made);
    }
    listeners.insert(tx, &messages)?;
    Ok(())
}

/// `subscription_order_created` for a subscription a checkout created: its `order` is the
/// checkout's.
pub(crate) fn emit_checkout_order_created(
    tx: &mut dyn WebhookRepositories,
    shop: &Shop,
    subscription: &Subscription,
    order: CheckoutFirstOrder,
    now: Timestamp,
) -> Result<(), DomainError> {
    let topic = Topic::SubscriptionOrderCreated;
    let payload = OrderEnvelope {
        topic: topic.as_str().to_string(),
        shop_identifier: shop.identifier.as_str().to_string(),
        created_at: now,
        data: subscription,
        order: CreatedOrder::Checkout(order),
    };
    enqueue(tx, shop, topic, &payload, now)
}

/// `subscription_payment_failed` for a checkout whose payment was declined: `data` is the
/// subscription it would have created, `order` the checkout's.
pub(crate) fn emit_checkout_payment_failed(
    tx: &mut dyn WebhookRepositories,
    shop: &Shop,
    proposed: ProposedSubscription,
    order: DeclinedCheckoutOrder,
    now: Timestamp,
) -> Result<(), DomainError> {
    let topic = Topic::SubscriptionPaymentFailed;
    let payload = OrderEnvelope {
        topic: topic.as_str().to_string(),
        shop_identifier: shop.identifier.as_str().to_string(),
        created_at: now,
        data: PaymentFailedData::Proposed(Box::new(proposed)),
        order: FailedOrder::Checkout(order),
    };
    enqueue(tx, shop, topic, &payload, now)
}

/// A plan's first order, the checkout's, as the `order` of `subscription_order_created`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct CheckoutFirstOrder {
    /// `checkout`.
    pub source: &'static str,
    /// The checkout order's public id.
    pub public_order_id: String,
    /// The platform's id of the order; `null` before the platform has it.
    pub platform_order_id: Option<String>,
    /// When the order was placed.
    pub order_datetime: Timestamp,
    /// What the plan's line items of the order come to, in cents.
    #[schema(value_type = i64)]
    pub total: Cents,
    /// The order's currency.
    pub currency: String,
}

/// The checkout's order that a declined payment failed, as the `order` of
/// `subscription_payment_failed`: it never reached the platform.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct DeclinedCheckoutOrder {
    /// `checkout`.
    pub source: &'static str,
    /// The checkout order's public id.
    pub public_order_id: String,
    /// Always `null`: the order never reached the platform.
    pub platform_order_id: Option<String>,
    /// `failed`.
    pub status: &'static str,
    /// `payment_declined`.
    pub failure_code: &'static str,
    /// Why it failed.
    pub failure_reason: &'static str,
    /// What the plan's line items of the order come to, in cents.
    #[schema(value_type = i64)]
    pub total: Cents,
    /// The order's currency.
    pub currency: String,
}

/// An attempt to place an order of a subscription, as the `order` of a webhook payload.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct OrderAttemptShown {
    /// The attempt's id.
    pub id: SubscriptionOrderId,
    /// The order date the attempt is for.
    pub order_datetime: Timestamp,
    /// The attempt's number for its order date, from 1.
    pub attempt: i64,
    /// The idempotency key the order is placed on the platform with.
    pub idempotency_key: String,
    /// The attempt's status (`pending`, `processing`, `succeeded`, `failed`, …).
    pub status: &'static str,
    /// When the attempt is due.
    pub due_at: Timestamp,
    /// The platform's id of the order; `null` until it is placed.
    pub platform_order_id: Option<String>,
    /// The platform's id of the payment; `null` until it is charged.
    pub platform_payment_id: Option<String>,
    /// Why the attempt failed (a code); `null` unless it failed.
    pub failure_code: Option<String>,
    /// Why the attempt failed, in words; `null` unless it failed.
    pub failure_reason: Option<String>,
    /// The line items' total, in cents.
    #[schema(value_type = i64)]
    pub subtotal: Cents,
    /// The discount, in cents.
    #[schema(value_type = i64)]
    pub discount: Cents,
    /// The shipping, in cents.
    #[schema(value_type = i64)]
    pub shipping: Cents,
    /// What is charged, in cents.
    #[schema(value_type = i64)]
    pub total: Cents,
    /// The charged currency.
    pub currency: String,
}

/// The subscription a checkout plan would have created, as `subscription_payment_failed` shows
/// it when the checkout's payment was declined: the Create Subscription body it would have
/// sent, without its payment details and idempotency key, with `id` null and its `customer`.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct ProposedSubscription {
    /// The order rule (an RFC 5545 RRULE).
    pub order_rrule: String,
    /// The charged currency.
    pub charged_currency: String,
    /// The base currency (the charged one).
    pub base_currency: String,
    /// The plan's line items.
    pub line_items: Vec<ProposedLineItem>,
    /// The shipping line the shopper chose, if any.
    pub shipping_lines: Vec<ProposedShippingLine>,
    /// Where the orders would ship; `null` without an address.
    pub shipping_address: Option<ProposedAddress>,
    /// The billing address; `null` without one.
    pub billing_address: Option<ProposedAddress>,
    /// When the checkout was placed.
    pub placed_at: Timestamp,
    /// The checkout's order date.
    pub last_order_datetime: Timestamp,
    /// The rule's next order date after the checkout; `null` when it has none.
    pub next_order_datetime: Option<Timestamp>,
    /// The checkout order's public id.
    pub external_id: String,
    /// Always `null`: no subscription was created.
    #[schema(value_type = Option<i64>)]
    pub id: Option<i64>,
    /// Who the subscription would have been for.
    pub customer: ProposedCustomer,
}

/// A line item of a [`ProposedSubscription`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct ProposedLineItem {
    /// The platform's product id.
    pub platform_product_id: String,
    /// The platform's variant id.
    pub platform_variant_id: String,
    /// How many.
    pub quantity: i64,
    /// The unit price, in cents.
    #[schema(value_type = i64)]
    pub price: Cents,
    /// The subscription group; absent without one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subscription_group_id: Option<i64>,
    /// The line item's other properties.
    pub line_item_attributes: Vec<ProposedAttribute>,
}

/// A line item attribute of a [`ProposedSubscription`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct ProposedAttribute {
    /// The attribute's name.
    pub name: String,
    /// The attribute's value.
    pub value: String,
}

/// The shipping line of a [`ProposedSubscription`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct ProposedShippingLine {
    /// The shipping rate's description.
    pub name: String,
    /// The shipping rate's code.
    pub code: String,
    /// `checkout`.
    pub tag: String,
    /// Its price, in cents.
    #[schema(value_type = i64)]
    pub price: Cents,
}

/// An address of a [`ProposedSubscription`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct ProposedAddress {
    /// First name.
    pub first_name: String,
    /// Last name.
    pub last_name: String,
    /// Company.
    pub company: String,
    /// Phone.
    pub phone: String,
    /// First street line.
    pub street1: String,
    /// Second street line.
    pub street2: String,
    /// City.
    pub city: String,
    /// Province.
    pub province: String,
    /// Province code.
    pub province_code: String,
    /// Country.
    pub country: String,
    /// Country code.
    pub country_code: String,
    /// Postal code.
    pub zip: String,
}

/// The customer of a [`ProposedSubscription`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct ProposedCustomer {
    /// Email address.
    pub email: String,
    /// First name.
    pub first_name: String,
    /// Last name.
    pub last_name: String,
}

fn enqueue(
    tx: &mut dyn WebhookRepositories,
    shop: &Shop,
    topic: Topic,
    payload: &impl Serialize,
    now: Timestamp,
) -> Result<(), DomainError> {
    crate::webhooks::enqueue_for_topic(
        tx,
        shop.id,
        WebhookKind::Subscription,
        topic.as_str(),
        payload,
        None,
        now,
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Allow;
    impl AddressGuard for Allow {
        fn check(&self, _url: &str) -> Result<(), String> {
            Ok(())
        }
    }

    struct Deny;
    impl AddressGuard for Deny {
        fn check(&self, _url: &str) -> Result<(), String> {
            Err("a private address".to_string())
        }
    }

    fn fields(topic: Option<i64>, secret: Option<&str>) -> WebhookSubscriptionFields {
        WebhookSubscriptionFields {
            callback_url: Some("https://hooks.example.test/in".to_string()),
            webhook_topic_id: topic,
            shared_secret: secret.map(str::to_string),
            rate_limit_per_s: Default::default(),
        }
    }

    fn problems(error: DomainError) -> Vec<(String, &'static str)> {
        match error {
            DomainError::Invalid(problems) => problems
                .into_iter()
                .map(|problem| (problem.field, problem.code))
                .collect(),
            other => panic!("not a 422: {other:?}"),
        }
    }

    fn endpoint(topic: &str) -> WebhookEndpoint {
        WebhookEndpoint {
            id: crate::kernel::ids::WebhookId(1),
            public_id: "0123456789abcdef0123456789abcdef".to_string(),
            shop_id: crate::kernel::ids::ShopId(1),
            kind: WebhookKind::Subscription,
            topic: topic.to_string(),
            callback_url: "https://hooks.example.test/in".to_string(),
            secret: Some(Secret::new("a-secret-of-ours")),
            disabled_at: None,
            disabled_reason: None,
            failing_since: None,
            created_at: Timestamp::from_micros(0),
            updated_at: Timestamp::from_micros(0),
            rate_limit_per_s: None,
        }
    }

    #[test]
    fn a_complete_body_is_accepted() {
        let body = fields(Some(4), Some("12345678"));
        let callback = check_callback(body.callback_url.as_deref(), &Allow);
        let new = NewWebhookSubscription::parse(body, callback).unwrap();
        assert_eq!(new.topic, Topic::SubscriptionCreated);
        assert_eq!(new.callback_url, "https://hooks.example.test/in");
        assert_eq!(new.shared_secret.expose(), "12345678");
        let longest = "s".repeat(SECRET_MAX_CHARS);
        let body = fields(Some(21), Some(&longest));
        assert!(NewWebhookSubscription::parse(body, Ok("https://a.test/".to_string())).is_ok());
        // Characters, not bytes: 255 two-byte characters fit.
        let wide = "é".repeat(SECRET_MAX_CHARS);
        let body = fields(Some(1), Some(&wide));
        assert!(NewWebhookSubscription::parse(body, Ok("https://a.test/".to_string())).is_ok());
    }

    #[test]
    fn every_problem_is_named_on_its_path() {
        let error = NewWebhookSubscription::parse(
            WebhookSubscriptionFields::default(),
            check_callback(None, &Allow),
        )
        .unwrap_err();
        assert_eq!(
            problems(error),
            [
                (CALLBACK_URL.to_string(), "required"),
                (TOPIC_ID.to_string(), "required"),
                (SHARED_SECRET.to_string(), "required"),
            ]
        );
        for (topic, secret, field, code) in [
            (0, "12345678", TOPIC_ID, "invalid_value"),
            (22, "12345678", TOPIC_ID, "invalid_value"),
            (-3, "12345678", TOPIC_ID, "invalid_value"),
            (1, "1234567", SHARED_SECRET, "invalid_length"),
            (1, "", SHARED_SECRET, "invalid_length"),
            (1, "        ", SHARED_SECRET, "blank"),
        ] {
            let error = NewWebhookSubscription::parse(
                fields(Some(topic), Some(secret)),
                Ok("https://a.test/".to_string()),
            )
            .unwrap_err();
            assert_eq!(
                problems(error),
                [(field.to_string(), code)],
                "{topic} {secret:?}"
            );
        }
        let too_long = "s".repeat(SECRET_MAX_CHARS + 1);
        let error = NewWebhookSubscription::parse(
            fields(Some(1), Some(&too_long)),
            Ok("https://a.test/".to_string()),
        )
        .unwrap_err();
        assert_eq!(
            problems(error),
            [(SHARED_SECRET.to_string(), "invalid_length")]
        );
    }

    #[test]
    fn callback_urls_are_checked_like_checkout_webhooks() {
        assert_eq!(
            check_callback(Some("ftp://a.test/"), &Allow)
                .unwrap_err()
                .field,
            CALLBACK_URL
        );
        assert_eq!(
            check_callback(Some("not a url"), &Allow).unwrap_err().code,
            "invalid_url"
        );
        let denied = check_callback(Some("http://10.0.0.1/"), &Deny).unwrap_err();
        assert_eq!(
            (denied.field.as_str(), denied.code),
            (CALLBACK_URL, "address_not_allowed")
        );
    }

    #[test]
    fn an_update_changes_the_url_topic_and_secret_each_checked() {
        let current = endpoint("subscription_created");
        let all = WebhookSubscriptionUpdate {
            webhook_topic_id: Some(12),
            callback_url: Some(Ok("https://new.test/".to_string())),
            shared_secret: Some("a-new-secret".to_string()),
            rate_limit_per_s: Default::default(),
        };
        let changed = all.check(&current).unwrap();
        assert_eq!(changed.callback_url, "https://new.test/");
        assert_eq!(changed.topic, "subscription_paused");
        assert_eq!(
            changed.secret.as_ref().map(Secret::expose),
            Some("a-new-secret")
        );
        assert_eq!(changed.id, current.id);

        let nothing = WebhookSubscriptionUpdate::new(&WebhookSubscriptionFields::default(), None);
        let same = nothing.check(&current).unwrap();
        assert_eq!(
            (same.callback_url, same.topic),
            (current.callback_url.clone(), current.topic.clone())
        );

        let everything_wrong = WebhookSubscriptionUpdate {
            webhook_topic_id: Some(99),
            callback_url: Some(Err(FieldError::new(CALLBACK_URL, "invalid_url", "bad"))),
            shared_secret: Some("short".to_string()),
            rate_limit_per_s: Default::default(),
        };
        assert_eq!(
            problems(everything_wrong.check(&current).unwrap_err()),
            [
                (CALLBACK_URL.to_string(), "invalid_url"),
                (TOPIC_ID.to_string(), "invalid_value"),
                (SHARED_SECRET.to_string(), "invalid_length"),
            ]
        );
    }

    #[test]
    fn the_resource_never_shows_the_secret() {
        let shown = serde_json::to_value(resource(&endpoint("subscription_paused"))).unwrap();
        assert_eq!(shown["webhook_topic_id"], 12);
        assert_eq!(shown["webhook_topic_name"], "subscription_paused");
        assert!(!shown.to_string().contains("a-secret-of-ours"));
        assert!(shown.get("shared_secret").is_none());
    }

    #[test]
    fn a_body_without_its_wrapper_is_422_on_the_wrapper() {
        let error = WebhookSubscriptionBody::default().fields().unwrap_err();
        assert_eq!(problems(error), [(WRAPPER.to_string(), "required")]);
        let error = WebhookSubscriptionUpdateBody::default()
            .fields()
            .unwrap_err();
        assert_eq!(problems(error), [(WRAPPER.to_string(), "required")]);
    }

    #[test]
    fn the_update_body_reads_and_fails_as_the_create_body_does() {
        let given = serde_json::json!({"webhook_subscription": {"webhook_topic_id": 3}});
        let body: WebhookSubscriptionUpdateBody = serde_json::from_value(given).unwrap();
        let fields = body.fields().unwrap();
        assert_eq!(fields.webhook_topic_id, Some(3));
        assert_eq!((fields.callback_url, fields.shared_secret), (None, None));
        for wrong in [
            serde_json::json!([]),
            serde_json::json!("text"),
            serde_json::json!({"webhook_subscription": 5}),
            serde_json::json!({"webhook_subscription": {"webhook_topic_id": "three"}}),
        ] {
            let create = serde_json::from_value::<WebhookSubscriptionBody>(wrong.clone());
            let update = serde_json::from_value::<WebhookSubscriptionUpdateBody>(wrong.clone());
            assert_eq!(
                create.map(drop).map_err(|error| error.to_string()),
                update.map(drop).map_err(|error| error.to_string()),
                "{wrong}"
            );
        }
    }
}
