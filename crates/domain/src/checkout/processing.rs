//! Process Order and what follows it (docs/checkout.md): the final inventory
//! check, the discounts valued again, the payments authorized by the test gateway, then
//! `order/processed`; the order pushed to the platform by a job ([`PushOrderJob`]: Create Order
//! with `Idempotency-Key` = `public_order_id`, then Create Payment), then `order/created` with
//! the gift cards and subscriptions it brings, or `order/failed`.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::access::credentials::random_hex;
use crate::access::shop::Shop;
use crate::checkout::payloads::{self, Topic};
use crate::checkout::repository::{
    CheckoutDatabase, CheckoutOrder, CheckoutRepositories, CheckoutStatus,
};
use crate::checkout::state::{CheckoutDiscount, CheckoutDocument, CheckoutLineItem};
use crate::checkout::storefront::{
    APPROVING_TOKEN, CheckoutContext, InventoryResult, InventoryStage, ORDER_RRULE_PROPERTY,
    OrderAnswer, SUBSCRIPTION_GROUP_PROPERTY, StorefrontCall, check_plan, inventory_check, read,
    same_code, shown, value_discount,
};
use crate::kernel::activity::{Activity, record_one};
use crate::kernel::error::{DomainError, FieldError};
use crate::kernel::jobs::{JobFailure, JobPayload, enqueue};
use crate::kernel::money::{Cents, CurrencyCode};
use crate::kernel::time::Timestamp;
use crate::overrides::OverrideDatabase;
use crate::platform::connector::PlatformConnector;
use crate::platform::destinations::{Topic as DestinationTopic, live_target};
use crate::platform::events::{EntityDocument, EntityKind, OrderFulfilledJob};
use crate::platform::placement::{self, PlacementError, with_payment_key};
use crate::platform::resources::{
    CustomAttribute, Decimal, LineItem, Order, OrderAddress, Payment, PlatformId,
};
use crate::subscriptions::input::MAX_LINE_ITEM_ATTRIBUTES;
use crate::subscriptions::operations::create_subscription_from_body;
use crate::subscriptions::recurrence::{OrderSchedule, ShopZone};
use crate::subscriptions::resources::Actor;
use crate::subscriptions::topics::Topic as SubscriptionTopic;
use crate::subscriptions::webhooks::emit_with_order;

/// Pushes a processed checkout to the platform.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PushOrderJob {
    /// The id of the checkout to push (the service's integer).
    pub checkout_id: i64,
}

impl JobPayload for PushOrderJob {
    const KIND: &'static str = "checkout.push_order";
    /// About two and a half minutes of retries (5, 10, 20, 40, 80 s) before the order fails.
    const MAX_ATTEMPTS: i64 = 6;

    fn unique_key(&self) -> Option<String> {
        Some(format!("{}:{}", Self::KIND, self.checkout_id))
    }
}

fn not_ready(field: &str, code: &'static str, message: &str) -> FieldError {
    FieldError::new(field, code, message)
}

/// What the order lacks before it can be processed, each a problem on its part.
fn missing_parts(document: &CheckoutDocument) -> Vec<FieldError> {
    let mut problems = Vec::new();
    if document.email().is_none() {
        problems.push(not_ready(
            "customer",
            "required",
            "the order has no customer: add one with an email address",
        ));
    }
    if document.line_items.is_empty() {
        problems.push(not_ready(
            "line_items",
            "required",
            "the order has no line items",
        ));
    }
    if document.requires_shipping() {
        if document.shipping_address.is_none() {
            problems.push(not_ready(
                "addresses.shipping",
                "required",
                "the order needs a shipping address",
            ));
        }
        if document.selected_shipping.is_none() {
            problems.push(not_ready(
                "shipping_lines",
                "required",
                "choose a shipping line",
            ));
        }
    }
    if document.billing_address.is_none() {
        problems.push(not_ready(
            "addresses.billing",
            "required",
            "the order needs a billing address",
        ));
    }
    problems
}

/// `processOrder`. In order: the order is complete; the final inventory check passes (through
/// the `inventory` override); each discount is valued again (through the `discount` override);
/// the payments cover the total; the test gateway authorizes each. Then the order is processed
/// (`order/processed`) and its push to the platform is queued. A declined payment emits
/// `order/failed` (and `subscription_payment_failed` for each subscription plan) and leaves the
/// order open, without that payment.
pub fn process_order<D: CheckoutDatabase + OverrideDatabase>(
    context: &CheckoutContext<'_, D>,
    call: &StorefrontCall,
) -> Result<OrderAnswer, DomainError> {
    let now = context.now;
    let (shop, mut order) = read(context.db, call, now)?;
    if order.status != CheckoutStatus::Open {
        return Err(DomainError::Unprocessable {
            code: "order.processed",
            message: "the order is processed already".to_string(),
        });
    }
    let problems = missing_parts(&order.document);
    if !problems.is_empty() {
        return Err(DomainError::Invalid(problems));
    }
    let inventory = inventory_check(context, &shop, &order, InventoryStage::Final)?;
    if inventory.result == InventoryResult::Fail {
        return Err(DomainError::invalid(
            "inventory",
            "insufficient_stock",
            format!(
                "some line items are not in stock: {}",
                serde_json::to_string(&inventory.failed_items).unwrap_or_default()
            ),
        ));
    }
    revalue_discounts(context, &shop, &mut order)?;
    check_sellable(&shop, &order.document, now)?;
    let amounts = order.document.try_amounts()?;
    if amounts.balance != Cents::ZERO {
        return Err(DomainError::invalid(
            "payments",
            "balance_not_paid",
            format!(
                "the payments must cover the order total: {} cents are left to pay",
                amounts.balance.0
            ),
        ));
    }
    let declined: Vec<String> = order
        .document
        .payments
        .iter()
        .filter(|payment| payment.token != APPROVING_TOKEN)
        .map(|payment| payment.id.clone())
        .collect();
    order.updated_at = now;
    order.last_activity_at = now;
    if !declined.is_empty() {
        order.document.failure = Some("the payment was declined".to_string());
        let shown = order.document.application_state(&order.public_order_id);
        order
            .document
            .payments
            .retain(|payment| !declined.contains(&payment.id));
        CheckoutDatabase::write_tx(context.db, |tx| {
            if !tx.save_checkout_order(&order)? {
                return Err(busy());
            }
            payloads::emit(tx, &shop, &order, Topic::OrderFailed, shown, now)?;
            announce_declined_plans(tx, &shop, &order, now)
        })?;
        return Err(DomainError::invalid(
            "payments",
            "payment_declined",
            "the payment was declined by the gateway; add another payment",
        ));
    }
    order.document.is_processed = true;
    order.document.processed_at = Some(now);
    order.document.failure = None;
    order.status = CheckoutStatus::Processed;
    CheckoutDatabase::write_tx(context.db, |tx| {
        if !tx.save_checkout_order(&order)? {
            return Err(busy());
        }
        let shown = order.document.application_state(&order.public_order_id);
        payloads::emit(tx, &shop, &order, Topic::OrderProcessed, shown, now)?;
        record_one(tx, shop.id, Activity::CheckoutsProcessed, now, 1)?;
        enqueue(
            tx,
            Some(shop.id),
            &PushOrderJob {
                checkout_id: order.id,
            },
            now,
            now,
        )?;
        Ok(())
    })?;
    order.version += 1;
    Ok(shown(&order))
}

/// What no order is completed with, whatever let it in: a line item priced below zero, a
/// total below zero (the payments then could not cover it, and the shop would owe), or a
/// subscription plan that would make no subscription now (a rule that ended since init).
fn check_sellable(
    shop: &Shop,
    document: &CheckoutDocument,
    now: Timestamp,
) -> Result<(), DomainError> {
    let mut problems: Vec<FieldError> = document
        .line_items
        .iter()
        .enumerate()
        .filter(|(_, item)| item.price < Cents::ZERO)
        .map(|(index, item)| {
            FieldError::new(
                format!("line_items[{index}].price"),
                "negative",
                format!(
                    "the line item {:?} is priced below zero; remove it",
                    item.line_item_key
                ),
            )
        })
        .collect();
    problems.extend(
        document
            .line_items
            .iter()
            .enumerate()
            .filter_map(|(index, item)| {
                let at = format!("line_items[{index}].line_item_properties");
                check_plan(shop, &item.properties, &at, now).err()
            }),
    );
    let total = document.try_amounts()?.total;
    if total < Cents::ZERO {
        problems.push(FieldError::new(
            "order_total",
            "negative",
            format!("the order's total is {} cents, below zero", total.0),
        ));
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(DomainError::Invalid(problems))
    }
}

fn busy() -> DomainError {
    DomainError::Conflict {
        code: "order.busy",
        message: "the order changed while it was processed; try again".to_string(),
    }
}

/// Values each applied discount again: a code no longer valid is dropped (and the order
/// refused, 422 on `discounts`); a new value is kept. What changed is saved, so the storefront
/// sees it (and the balance it leaves) even when the order is refused.
fn revalue_discounts<D: CheckoutDatabase + OverrideDatabase>(
    context: &CheckoutContext<'_, D>,
    shop: &Shop,
    order: &mut CheckoutOrder,
) -> Result<(), DomainError> {
    let before = order.document.discounts.clone();
    let (mut kept, mut invalid) = (Vec::new(), Vec::new());
    for (index, discount) in before.iter().enumerate() {
        match value_discount(context, shop, order, &discount.code, Some(index))? {
            // Two codes the override now answers as one (letter case aside) are one discount.
            Some(valued)
                if kept.iter().any(|k: &CheckoutDiscount| {
                    same_code(&k.code, &valued.code) || same_code(&k.code, &discount.code)
                }) =>
            {
                invalid.push(format!("{} (the same as {})", discount.code, valued.code));
            }
            Some(valued) => kept.push(valued),
            None => invalid.push(discount.code.clone()),
        }
    }
    if kept == before {
        return Ok(());
    }
    order.document.discounts = kept;
    order.updated_at = context.now;
    CheckoutDatabase::write_tx(context.db, |tx| {
        if tx.save_checkout_order(order)? {
            Ok(())
        } else {
            Err(busy())
        }
    })?;
    order.version += 1;
    if invalid.is_empty() {
        return Ok(());
    }
    Err(DomainError::invalid(
        "discounts",
        "invalid_discount",
        format!("no longer valid, removed: {}", invalid.join(", ")),
    ))
}

// ---------------------------------------------------------------------------------------
// Pushing the order to the platform

/// How a run of [`PushOrderJob`] ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pushed {
    /// The platform has the order and its payments: `order/created` was emitted.
    Created {
        /// The platform's id of the order.
        platform_order_id: String,
    },
    /// It failed for good: `order/failed` was emitted.
    Failed {
        /// Why, as the checkout's `failure` records it.
        reason: String,
    },
    /// Nothing to do: the order is not waiting to be pushed.
    Nothing,
}

/// Whether a connector failure may pass if tried again.
fn transient(error: &PlacementError) -> bool {
    match error {
        PlacementError::Declined { .. } => false,
        PlacementError::Connector { error, .. } => error.is_transient(),
    }
}

/// `amount` in the currency named by `currency`, as the platform's resources write it.
fn money_in(currency: &str) -> impl Fn(Cents) -> Option<Decimal> {
    let currency = CurrencyCode::parse(currency);
    move |amount| Decimal::of_cents(amount, currency.as_ref()?)
}

fn order_address(
    address: Option<&crate::checkout::state::CheckoutAddress>,
    email: Option<&str>,
) -> Option<OrderAddress> {
    let address = address?;
    let text = |value: &str| Some(value.to_string()).filter(|v| !v.is_empty());
    Some(OrderAddress {
        first_name: text(&address.first_name),
        last_name: text(&address.last_name),
        company: text(&address.business_name),
        phone: text(&address.phone_number),
        email: email.map(str::to_string),
        street_1: text(&address.address_line_1),
        street_2: text(&address.address_line_2),
        city: text(&address.city),
        province: text(&address.province),
        province_code: text(&address.province_code),
        country: text(&address.country),
        country_code: text(&address.country_code),
        postal_code: text(&address.postal_code),
        ..OrderAddress::default()
    })
}

/// The order as Create Order sends it: the order of the platform's customer
/// `platform_customer_id` when the platform knows the checkout's customer (by email, in the
/// customer directory), else a guest order with the email.
fn platform_order(
    order: &CheckoutOrder,
    platform_customer_id: Option<String>,
    now: Timestamp,
) -> Order {
    let document = &order.document;
    let currency = document.currency.as_str();
    let money = money_in(currency);
    let amounts = document.amounts();
    let email = document.email();
    let line_items = document
        .line_items
        .iter()
        .map(|item| LineItem {
            platform_product_id: Some(PlatformId::new(item.product_id.clone())),
            platform_variant_id: Some(PlatformId::new(item.variant_id.clone())),
            title: Some(item.title.clone()),
            sku: Some(item.sku.clone()).filter(|sku| !sku.is_empty()),
            image: Some(item.image_url.clone()).filter(|url| !url.is_empty()),
            quantity: Some(item.quantity),
            taxable: Some(item.taxable),
            requires_shipping: Some(item.requires_shipping),
            price_per_item: money(item.price),
            subtotal: money(item.total()),
            total: money(item.total()),
            custom_attributes: Some(
                [(
                    "line_item_key".to_string(),
                    CustomAttribute::new(
                        "the checkout's key of the line item",
                        item.line_item_key.clone(),
                    ),
                )]
                .into_iter()
                .collect(),
            ),
            ..LineItem::default()
        })
        .collect();
    Order {
        platform_customer_id: platform_customer_id.map(PlatformId::new),
        shipping_addresses: order_address(document.shipping_address.as_ref(), email)
            .map(|address| vec![address]),
        billing_address: order_address(document.billing_address.as_ref(), email),
        line_items: Some(line_items),
        shipping_method: document
            .selected_shipping
            .as_ref()
            .map(|line| line.description.clone()),
        source: Some("checkout".to_string()),
        created_via: Some("mercer".to_string()),
        notes: Some(document.order_meta_data.notes.clone()).filter(|n| !n.is_empty()),
        placed_at: Some(now),
        currency: Some(currency.to_string()),
        subtotal: money(amounts.items),
        shipping_subtotal: money(amounts.shipping),
        total_tax: money(amounts.taxes),
        discount: money(amounts.discounts),
        total: money(amounts.total),
        custom_attributes: Some(
            [(
                "public_order_id".to_string(),
                CustomAttribute::new("the checkout's order", order.public_order_id.clone()),
            )]
            .into_iter()
            .collect(),
        ),
        ..Order::default()
    }
}

/// Runs a [`PushOrderJob`]: Create Order (the stored platform order when a run got that far),
/// then Create Payment for each payment not paid yet, then the outcome. A connector failure
/// that may pass is retried by the job runner (`Err`), up to `last_attempt`, when the order
/// fails for good; so is a save that met another change of the checkout.
pub fn push_order<D: CheckoutDatabase>(
    db: &D,
    connector: &dyn PlatformConnector,
    job: PushOrderJob,
    last_attempt: bool,
    now: Timestamp,
) -> Result<Pushed, JobFailure> {
    let context = db.read_tx(|tx| {
        let Some(order) = tx.checkout_order_by_id(job.checkout_id)? else {
            return Ok(None);
        };
        if order.status != CheckoutStatus::Processed {
            return Ok(None);
        }
        let Some(shop) = tx.shop_by_id(order.shop_id)? else {
            return Ok(None);
        };
        let target = live_target(tx, &shop, DestinationTopic::Orders, now)?.map(|(_, t)| t);
        let customer = payloads::platform_customer_id(tx, &shop, order.document.email())?;
        Ok(Some((shop, order, target, customer)))
    })?;
    let Some((shop, mut order, target, platform_customer_id)) = context else {
        return Ok(Pushed::Nothing);
    };
    let settle = |order: CheckoutOrder, error: PlacementError| {
        if transient(&error) && !last_attempt {
            return Err(JobFailure::retry(format!(
                "checkout {}: {}",
                order.public_order_id,
                error.message()
            )));
        }
        fail(db, &shop, order, &error.message(), now).map_err(retry_when_busy)
    };
    let Some(target) = target else {
        return fail(db, &shop, order, "the shop has no orders destination", now)
            .map_err(retry_when_busy);
    };
    // Resumed: a run before got the platform's order, and may have paid.
    let resumed = order.platform_order_id.is_some();
    let platform_order_id = match order.platform_order_id.clone() {
        Some(id) => id,
        None => {
            let body = platform_order(&order, platform_customer_id, now);
            let placed =
                match placement::create_order(connector, &target, &body, &order.public_order_id) {
                    Ok(placed) => placed,
                    Err(error) => return settle(order, error),
                };
            order.platform_order_id = Some(placed.platform_id.clone());
            order.document.platform_friendly_identifier = placed.order_number;
            order.updated_at = now;
            // Stored before anything is paid: a run after a crash then looks for the payments
            // before paying. Not stored, nothing is paid: the job is tried again.
            if !db.write_tx(|tx| Ok(tx.save_checkout_order(&order)?))? {
                return Err(JobFailure::retry("the checkout changed meanwhile"));
            }
            order.version += 1;
            placed.platform_id
        }
    };
    let currency = order.document.currency.clone();
    let money = money_in(&currency);
    for payment in &order.document.payments {
        let key = format!("{}#{}", order.public_order_id, payment.id);
        let body = with_payment_key(
            Payment {
                description: Some(format!("Checkout {}", order.public_order_id)),
                provider: Some(payment.gateway_public_id.clone()),
                payment_method: Some(payment.token.clone()),
                currency: Some(currency.clone()),
                amount_planned: money(payment.amount),
                ..Payment::default()
            },
            &key,
        );
        let earlier = resumed.then_some(key.as_str());
        if let Err(error) =
            placement::pay_once(connector, &target, &platform_order_id, &body, earlier)
        {
            return settle(order.clone(), error);
        }
    }
    created(db, &shop, order, now).map_err(retry_when_busy)
}

/// Another change of the checkout came first: the job tries again; anything else as jobs do.
fn retry_when_busy(error: DomainError) -> JobFailure {
    match error {
        DomainError::Conflict {
            code: "order.busy",
            message,
        } => JobFailure::retry(message),
        other => JobFailure::from(other),
    }
}

/// The order failed for good: `order/failed`.
fn fail<D: CheckoutDatabase>(
    db: &D,
    shop: &Shop,
    order: CheckoutOrder,
    reason: &str,
    now: Timestamp,
) -> Result<Pushed, DomainError> {
    let failed = db.write_tx(|tx| {
        // The order as stored, in this transaction: a save of this run may not have gone in.
        let Some(mut stored) = tx.checkout_order_by_id(order.id)? else {
            return Ok(false);
        };
        if stored.status != CheckoutStatus::Processed {
            return Ok(false);
        }
        stored.status = CheckoutStatus::Failed;
        stored.document.failure = Some(reason.to_string());
        stored.updated_at = now;
        if !tx.save_checkout_order(&stored)? {
            return Err(busy());
        }
        let shown = stored.document.application_state(&stored.public_order_id);
        payloads::emit(tx, shop, &stored, Topic::OrderFailed, shown, now)?;
        Ok(true)
    })?;
    if !failed {
        return Ok(Pushed::Nothing);
    }
    log::warn!(target: "mercer::checkout", "checkout {} failed: {reason}", order.public_order_id);
    Ok(Pushed::Failed {
        reason: reason.to_string(),
    })
}

/// The platform has the order: `order/created`, the gift cards it sold, the subscriptions its
/// plans make; and `order/fulfilled`'s job when the platform fulfilled the order before this
/// (some platforms fulfil on receipt).
fn created<D: CheckoutDatabase>(
    db: &D,
    shop: &Shop,
    order: CheckoutOrder,
    now: Timestamp,
) -> Result<Pushed, DomainError> {
    let platform_order_id = order.platform_order_id.clone().unwrap_or_default();
    let made = db.write_tx(|tx| {
        let Some(mut stored) = tx.checkout_order_by_id(order.id)? else {
            return Ok(false);
        };
        if stored.status != CheckoutStatus::Processed {
            return Ok(false);
        }
        stored.status = CheckoutStatus::Created;
        stored.platform_order_id = Some(platform_order_id.clone());
        if stored.document.platform_friendly_identifier.is_none() {
            stored.document.platform_friendly_identifier =
                order.document.platform_friendly_identifier.clone();
        }
        stored.updated_at = now;
        if !tx.save_checkout_order(&stored)? {
            return Err(busy());
        }
        let shown = stored.document.application_state(&stored.public_order_id);
        payloads::emit(tx, shop, &stored, Topic::OrderCreated, shown, now)?;
        gift_cards(tx, shop, &stored, now)?;
        subscriptions(tx, shop, &stored, now)?;
        let fulfilled = tx
            .platform_entity(shop.id, EntityKind::Order, &platform_order_id)?
            .and_then(|record| record.document)
            .is_some_and(|json| is_fulfilled_order(&json));
        if fulfilled {
            let job = OrderFulfilledJob {
                shop_id: shop.id,
                platform_order_id: platform_order_id.clone(),
            };
            enqueue(tx, Some(shop.id), &job, now, now)?;
        }
        Ok(true)
    })?;
    Ok(if made {
        Pushed::Created { platform_order_id }
    } else {
        Pushed::Nothing
    })
}

/// Whether a stored platform order's JSON says it is fulfilled.
fn is_fulfilled_order(json: &str) -> bool {
    matches!(
        EntityDocument::parse(EntityKind::Order, json),
        Ok(EntityDocument::Order(order)) if order
            .fulfillment_status
            .as_deref()
            .is_some_and(|status| status.eq_ignore_ascii_case("fulfilled"))
    )
}

/// `gift_card/created` for each gift card sold (a unit of a line item whose SKU the shop marked
/// as a gift card), while the shop's gift cards are on.
fn gift_cards(
    tx: &mut dyn CheckoutRepositories,
    shop: &Shop,
    order: &CheckoutOrder,
    now: Timestamp,
) -> Result<(), DomainError> {
    let settings = &shop.checkout;
    if !settings.gift_cards_enabled {
        return Ok(());
    }
    let mut cards = Vec::new();
    for item in &order.document.line_items {
        if item.sku.is_empty() || !settings.gift_card_skus.contains(&item.sku) {
            continue;
        }
        for _ in 0..item.quantity.clamp(0, 100) {
            let key = gift_card_key();
            cards.push(payloads::gift_card_payload(
                shop,
                order,
                item,
                &key,
                &random_hex(16),
            ));
        }
    }
    if cards.is_empty() {
        return Ok(());
    }
    payloads::emit_gift_cards(tx, shop, order, &cards, now)
}

/// A gift card's key as people type it: `XXXX-XXXX-XXXX-XXXX` of hex digits, upper case.
fn gift_card_key() -> String {
    let hex = random_hex(8).to_ascii_uppercase();
    hex.as_bytes()
        .chunks(4)
        .map(|chunk| String::from_utf8_lossy(chunk).into_owned())
        .collect::<Vec<_>>()
        .join("-")
}

/// The subscriptions the order's plans make (line items carrying `order_rrule`, grouped by
/// rule and group): `customer_created` for a new customer, `subscription_created`, and
/// `subscription_order_created` for this, its first order, placed when the order was processed
/// (its next order is the rule's first date after that, however late the push comes). A plan
/// that does not make a subscription (checked at init and at Process Order, so not expected)
/// is logged, not failed: the order stands.
fn subscriptions(
    tx: &mut dyn CheckoutRepositories,
    shop: &Shop,
    order: &CheckoutOrder,
    now: Timestamp,
) -> Result<(), DomainError> {
    for (index, ((rule, group), items)) in plans(&order.document).into_iter().enumerate() {
        let placed = order.document.processed_at.unwrap_or(now);
        let body = subscription_body(shop, order, &rule, &group, &items, index, placed);
        let (subscription, created) =
            match create_subscription_from_body(tx, shop, &body, Actor::system(), now) {
                Ok(made) => made,
                Err(error @ DomainError::Invalid(_)) => {
                    log::warn!(
                        target: "mercer::checkout",
                        "checkout {}: its plan {rule:?} makes no subscription: {error}",
                        order.public_order_id
                    );
                    continue;
                }
                Err(error) => return Err(error),
            };
        if !created {
            continue;
        }
        let first_order = FirstOrder {
            source: "checkout",
            public_order_id: &order.public_order_id,
            platform_order_id: order.platform_order_id.as_deref(),
            order_datetime: placed,
            total: plan_total(&items),
            currency: &order.document.currency,
        };
        emit_with_order(
            tx,
            shop,
            SubscriptionTopic::SubscriptionOrderCreated,
            &subscription,
            &first_order,
            now,
        )?;
    }
    Ok(())
}

/// A plan's first order, the checkout's, as the `order` of `subscription_order_created`.
#[derive(Serialize)]
struct FirstOrder<'a> {
    source: &'static str,
    public_order_id: &'a str,
    platform_order_id: Option<&'a str>,
    order_datetime: Timestamp,
    total: Cents,
    currency: &'a str,
}

/// The checkout's order that a declined payment failed, as the `order` of
/// `subscription_payment_failed`: it never reached the platform.
#[derive(Serialize)]
struct DeclinedOrder<'a> {
    source: &'static str,
    public_order_id: &'a str,
    platform_order_id: Option<&'a str>,
    status: &'static str,
    failure_code: &'static str,
    failure_reason: &'static str,
    total: Cents,
    currency: &'a str,
}

/// What a plan's line items come to: a part of the order's items, whose sum is checked
/// before the order is saved, so it fits.
fn plan_total(items: &[&CheckoutLineItem]) -> Cents {
    Cents::checked_sum(items.iter().map(|item| item.total())).unwrap_or(Cents::ZERO)
}

/// A plan of an order: its rule and group, and the line items carrying them.
type Plan<'a> = ((String, String), Vec<&'a CheckoutLineItem>);

/// The order's plans (line items carrying `order_rrule`, grouped by rule and group), in the
/// order of their first line item.
fn plans(document: &CheckoutDocument) -> Vec<Plan<'_>> {
    let mut plans: Vec<Plan<'_>> = Vec::new();
    for item in &document.line_items {
        let Some(rule) = item.properties.get(ORDER_RRULE_PROPERTY) else {
            continue;
        };
        let group = item
            .properties
            .get(SUBSCRIPTION_GROUP_PROPERTY)
            .cloned()
            .unwrap_or_default();
        let plan = (rule.clone(), group);
        match plans.iter_mut().find(|(key, _)| *key == plan) {
            Some((_, items)) => items.push(item),
            None => plans.push((plan, vec![item])),
        }
    }
    plans
}

/// `subscription_payment_failed` for each plan of an order whose payment was declined at
/// Process Order (the payment method fails for the initial subscription
/// transaction). No subscription exists: `data` is the one the plan would make (`id` null,
/// with its `customer`), and `order` the checkout's, failed with `payment_declined`.
fn announce_declined_plans(
    tx: &mut dyn CheckoutRepositories,
    shop: &Shop,
    order: &CheckoutOrder,
    now: Timestamp,
) -> Result<(), DomainError> {
    for (index, ((rule, group), items)) in plans(&order.document).into_iter().enumerate() {
        let body = subscription_body(shop, order, &rule, &group, &items, index, now);
        let mut data = body["subscription"].clone();
        if let Some(fields) = data.as_object_mut() {
            // The would-be subscription says nothing of the payment that failed.
            fields.remove("payment_details");
            fields.remove("idempotency_key");
            fields.insert("id".to_string(), Value::Null);
            fields.insert("customer".to_string(), body["customer"].clone());
        }
        let attempt = DeclinedOrder {
            source: "checkout",
            public_order_id: &order.public_order_id,
            platform_order_id: None,
            status: "failed",
            failure_code: "payment_declined",
            failure_reason: "the payment was declined",
            total: plan_total(&items),
            currency: &order.document.currency,
        };
        emit_with_order(
            tx,
            shop,
            SubscriptionTopic::SubscriptionPaymentFailed,
            data,
            &attempt,
            now,
        )?;
    }
    Ok(())
}

/// A Create Subscription body for a plan of the order. It is JSON, not a
/// typed value, because it goes through the route's own parser
/// ([`create_subscription_from_body`]): a plan is checked exactly as an API client's body is.
fn subscription_body(
    shop: &Shop,
    order: &CheckoutOrder,
    rule: &str,
    group: &str,
    items: &[&CheckoutLineItem],
    index: usize,
    placed: Timestamp,
) -> Value {
    let document = &order.document;
    let customer = document.customer.clone().unwrap_or_default();
    let address = |address: Option<&crate::checkout::state::CheckoutAddress>| {
        address.map(|a| {
            json!({
                "first_name": a.first_name, "last_name": a.last_name, "company": a.business_name,
                "phone": a.phone_number, "street1": a.address_line_1, "street2": a.address_line_2,
                "city": a.city, "province": a.province, "province_code": a.province_code,
                "country": a.country, "country_code": a.country_code, "zip": a.postal_code,
            })
        })
    };
    let shipping = address(document.shipping_address.as_ref())
        .or_else(|| address(document.billing_address.as_ref()));
    let payment = document.payments.first();
    // This order is the plan's first: the next is the rule's first date after it.
    let next_order = OrderSchedule::parse(rule, ShopZone::of_shop(&shop.timezone), "order_rrule")
        .ok()
        .and_then(|schedule| schedule.next_after(placed, &[]));
    let line_items: Vec<Value> = items
        .iter()
        .map(|item| {
            let mut line = json!({
                "platform_product_id": item.product_id,
                "platform_variant_id": item.variant_id,
                "quantity": item.quantity,
                "price": item.price,
            });
            // Checked at init: the group is an integer.
            if let Ok(group) = group.parse::<i64>() {
                line["subscription_group_id"] = json!(group);
            }
            // The line item's other properties stay with it, as its attributes.
            let attributes: Vec<Value> = item
                .properties
                .iter()
                .filter(|(name, _)| {
                    name.as_str() != ORDER_RRULE_PROPERTY
                        && name.as_str() != SUBSCRIPTION_GROUP_PROPERTY
                        // What an attribute name may be (1 to 255 characters).
                        && (1..=255).contains(&name.trim().chars().count())
                })
                .take(MAX_LINE_ITEM_ATTRIBUTES)
                .map(|(name, value)| json!({"name": name, "value": value}))
                .collect();
            line["line_item_attributes"] = json!(attributes);
            line
        })
        .collect();
    // The shipping line the shopper chose ships every order of the plan.
    let shipping_lines: Vec<Value> = document
        .selected_shipping
        .iter()
        .map(|chosen| {
            json!({"name": chosen.description, "code": chosen.code, "tag": "checkout",
                   "price": chosen.amount})
        })
        .collect();
    json!({
        "customer": {
            "email": customer.email_address,
            "first_name": customer.first_name,
            "last_name": customer.last_name,
        },
        "subscription": {
            "idempotency_key": format!("checkout:{}:{index}", order.public_order_id),
            "order_rrule": rule,
            "charged_currency": document.currency,
            "base_currency": document.currency,
            "line_items": line_items,
            "shipping_lines": shipping_lines,
            "shipping_address": shipping,
            "billing_address": address(document.billing_address.as_ref()),
            "payment_details": payment.map(|p| json!({
                "gateway_name": p.gateway_public_id,
                "gateway_payment_id": p.token,
                "expires_at": p.expires_at,
            })),
            "placed_at": placed,
            "last_order_datetime": placed,
            "next_order_datetime": next_order,
            "external_id": order.public_order_id,
        }
    })
}
