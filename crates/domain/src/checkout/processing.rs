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
use crate::checkout::state::{
    CheckoutAddress, CheckoutCustomer, CheckoutDiscount, CheckoutDocument, CheckoutLineItem,
    CheckoutPayment, CheckoutShippingLine,
};
use crate::checkout::storefront::{
    APPROVING_TOKEN, CheckoutContext, InventoryResult, InventoryStage, ORDER_RRULE_PROPERTY,
    OrderAnswer, SUBSCRIPTION_GROUP_PROPERTY, StorefrontCall, check_plan, inventory_check, read,
    same_code, shown, value_discount,
};
use crate::kernel::activity::{Activity, record_one};
use crate::kernel::body::Field;
use crate::kernel::body::RawText;
use crate::kernel::error::{DomainError, FieldError};
use crate::kernel::ids::CheckoutOrderId;
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
use crate::subscriptions::groups::group_references_of;
use crate::subscriptions::input::{
    MAX_LINE_ITEM_ATTRIBUTES, SubscriptionAddressFields, SubscriptionCreateCustomerFields,
    SubscriptionCreateFields, SubscriptionCreateRequest, SubscriptionLineItemAttributeFields,
    SubscriptionLineItemFields, SubscriptionPaymentDetailsFields, SubscriptionShippingLineFields,
    WholeCents, body_fingerprint, expiry_field, given_or_null, id_field, text_field, time_field,
};
use crate::subscriptions::operations::create_subscription;
use crate::subscriptions::recurrence::{OrderSchedule, ShopZone};
use crate::subscriptions::resources::Actor;
use crate::subscriptions::resources::Subscription;
use crate::subscriptions::webhooks::{
    CheckoutFirstOrder, DeclinedCheckoutOrder, ProposedAddress, ProposedAttribute,
    ProposedCustomer, ProposedLineItem, ProposedShippingLine, ProposedSubscription,
    emit_checkout_order_created, emit_checkout_payment_failed,
};

/// Pushes a processed checkout to the platform.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PushOrderJob {
    /// The id of the checkout to push (the service's integer).
    pub checkout_id: CheckoutOrderId,
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
        let plan = PlanSubscription::new(shop, order, &rule, &group, &items, index, placed);
        let (subscription, created) = match plan.create(tx, shop, now) {
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
        let first_order = CheckoutFirstOrder {
            source: "checkout",
            public_order_id: order.public_order_id.clone(),
            platform_order_id: order.platform_order_id.clone(),
            order_datetime: placed,
            total: plan_total(&items),
            currency: order.document.currency.clone(),
        };
        emit_checkout_order_created(tx, shop, &subscription, first_order, now)?;
    }
    Ok(())
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
        let plan = PlanSubscription::new(shop, order, &rule, &group, &items, index, now);
        let attempt = DeclinedCheckoutOrder {
            source: "checkout",
            public_order_id: order.public_order_id.clone(),
            platform_order_id: None,
            status: "failed",
            failure_code: "payment_declined",
            failure_reason: "the payment was declined",
            total: plan_total(&items),
            currency: order.document.currency.clone(),
        };
        emit_checkout_payment_failed(tx, shop, plan.proposed(), attempt, now)?;
    }
    Ok(())
}

/// The subscription a plan of the order makes, as a Create Subscription body says it. What it
/// holds is chosen here once; [`Self::request`] is the typed body, checked exactly as an API
/// client's is, and [`Self::body`] the same body as JSON: what the declined plan's webhook
/// shows, and what a repeated plan's idempotency fingerprint is taken of.
struct PlanSubscription<'a> {
    customer: CheckoutCustomer,
    idempotency_key: String,
    rule: &'a str,
    currency: &'a str,
    line_items: Vec<PlanLine<'a>>,
    shipping_line: Option<&'a CheckoutShippingLine>,
    shipping_address: Option<&'a CheckoutAddress>,
    billing_address: Option<&'a CheckoutAddress>,
    payment: Option<&'a CheckoutPayment>,
    placed: Timestamp,
    next_order: Option<Timestamp>,
    external_id: &'a str,
}

/// A line item of a plan: its group, and its other properties kept as its attributes.
struct PlanLine<'a> {
    item: &'a CheckoutLineItem,
    group: Option<i64>,
    attributes: Vec<(&'a String, &'a String)>,
}

impl<'a> PlanSubscription<'a> {
    fn new(
        shop: &Shop,
        order: &'a CheckoutOrder,
        rule: &'a str,
        group: &str,
        items: &[&'a CheckoutLineItem],
        index: usize,
        placed: Timestamp,
    ) -> Self {
        let document = &order.document;
        // This order is the plan's first: the next is the rule's first date after it.
        let next_order =
            OrderSchedule::parse(rule, ShopZone::of_shop(&shop.timezone), "order_rrule")
                .ok()
                .and_then(|schedule| schedule.next_after(placed, &[]));
        // Checked at init: the group is an integer.
        let group = group.parse::<i64>().ok();
        let line_items = items
            .iter()
            .map(|item| PlanLine {
                item,
                group,
                // The line item's other properties stay with it, as its attributes.
                attributes: item
                    .properties
                    .iter()
                    .filter(|(name, _)| {
                        name.as_str() != ORDER_RRULE_PROPERTY
                            && name.as_str() != SUBSCRIPTION_GROUP_PROPERTY
                            // What an attribute name may be (1 to 255 characters).
                            && (1..=255).contains(&name.trim().chars().count())
                    })
                    .take(MAX_LINE_ITEM_ATTRIBUTES)
                    .collect(),
            })
            .collect();
        PlanSubscription {
            customer: document.customer.clone().unwrap_or_default(),
            idempotency_key: format!("checkout:{}:{index}", order.public_order_id),
            rule,
            currency: &document.currency,
            line_items,
            // The shipping line the shopper chose ships every order of the plan.
            shipping_line: document.selected_shipping.as_ref(),
            shipping_address: document
                .shipping_address
                .as_ref()
                .or(document.billing_address.as_ref()),
            billing_address: document.billing_address.as_ref(),
            payment: document.payments.first(),
            placed,
            next_order,
            external_id: &order.public_order_id,
        }
    }

    /// Creates the plan's subscription: its groups read, its body checked, then Create
    /// Subscription (with the plan's idempotency key, so a repeated push makes it once).
    fn create(
        &self,
        tx: &mut dyn CheckoutRepositories,
        shop: &Shop,
        now: Timestamp,
    ) -> Result<(Subscription, bool), DomainError> {
        let request = self.request();
        let groups =
            group_references_of(tx, shop, &request.group_ids(), "subscription.line_items")?;
        let fingerprint = body_fingerprint(&self.body());
        let new = request.validate(shop, now, &groups, fingerprint)?;
        create_subscription(tx, shop, new, Actor::system(), now)
    }

    /// The plan's Create Subscription body, typed.
    fn request(&self) -> SubscriptionCreateRequest {
        let address = |address: &CheckoutAddress| SubscriptionAddressFields {
            first_name: text_field(&address.first_name),
            last_name: text_field(&address.last_name),
            company: text_field(&address.business_name),
            phone: text_field(&address.phone_number),
            street1: text_field(&address.address_line_1),
            street2: text_field(&address.address_line_2),
            city: text_field(&address.city),
            province: text_field(&address.province),
            province_code: text_field(&address.province_code),
            country: text_field(&address.country),
            country_code: text_field(&address.country_code),
            zip: text_field(&address.postal_code),
        };
        let line_items = self
            .line_items
            .iter()
            .map(|line| {
                let attributes = line
                    .attributes
                    .iter()
                    .map(|(name, value)| {
                        Field::Given(SubscriptionLineItemAttributeFields {
                            name: text_field(*name),
                            value: text_field(*value),
                        })
                    })
                    .collect();
                Field::Given(SubscriptionLineItemFields {
                    platform_product_id: id_field(&line.item.product_id),
                    platform_variant_id: id_field(&line.item.variant_id),
                    quantity: Field::Given(line.item.quantity),
                    price: Field::Given(WholeCents(Some(line.item.price.0))),
                    subscription_group_id: line.group.map_or(Field::Absent, Field::Given),
                    line_item_attributes: Field::Given(attributes),
                    ..SubscriptionLineItemFields::default()
                })
            })
            .collect();
        let shipping_lines = self
            .shipping_line
            .iter()
            .map(|chosen| {
                Field::Given(SubscriptionShippingLineFields {
                    name: text_field(&chosen.description),
                    code: text_field(&chosen.code),
                    tag: text_field("checkout"),
                    price: Field::Given(chosen.amount.0),
                })
            })
            .collect();
        let payment = self
            .payment
            .map(|payment| SubscriptionPaymentDetailsFields {
                gateway_name: text_field(&payment.gateway_public_id),
                gateway_payment_id: text_field(&payment.token),
                expires_at: payment
                    .expires_at
                    .as_ref()
                    .map_or(Field::Null, expiry_field),
                ..SubscriptionPaymentDetailsFields::default()
            });
        SubscriptionCreateRequest {
            customer: Field::Given(SubscriptionCreateCustomerFields {
                email: text_field(&self.customer.email_address),
                first_name: text_field(&self.customer.first_name),
                last_name: text_field(&self.customer.last_name),
                ..SubscriptionCreateCustomerFields::default()
            }),
            subscription: Field::Given(SubscriptionCreateFields {
                idempotency_key: text_field(&self.idempotency_key),
                order_rrule: Field::Given(RawText(self.rule.to_string())),
                charged_currency: text_field(self.currency),
                base_currency: text_field(self.currency),
                line_items: Field::Given(line_items),
                shipping_lines: Field::Given(shipping_lines),
                shipping_address: given_or_null(self.shipping_address.map(address)),
                billing_address: given_or_null(self.billing_address.map(address)),
                payment_details: given_or_null(payment),
                placed_at: time_field(self.placed),
                last_order_datetime: time_field(self.placed),
                next_order_datetime: self.next_order.map_or(Field::Null, time_field),
                external_id: text_field(self.external_id),
                ..SubscriptionCreateFields::default()
            }),
        }
    }

    /// The subscription the plan would make, as `subscription_payment_failed` shows it when the
    /// checkout's payment is declined: its Create Subscription body, saying nothing of the
    /// payment that failed (no payment details, no idempotency key), `id` null and its customer.
    fn proposed(&self) -> ProposedSubscription {
        let address = |a: &CheckoutAddress| ProposedAddress {
            first_name: a.first_name.clone(),
            last_name: a.last_name.clone(),
            company: a.business_name.clone(),
            phone: a.phone_number.clone(),
            street1: a.address_line_1.clone(),
            street2: a.address_line_2.clone(),
            city: a.city.clone(),
            province: a.province.clone(),
            province_code: a.province_code.clone(),
            country: a.country.clone(),
            country_code: a.country_code.clone(),
            zip: a.postal_code.clone(),
        };
        ProposedSubscription {
            order_rrule: self.rule.to_string(),
            charged_currency: self.currency.to_string(),
            base_currency: self.currency.to_string(),
            line_items: self
                .line_items
                .iter()
                .map(|line| ProposedLineItem {
                    platform_product_id: line.item.product_id.clone(),
                    platform_variant_id: line.item.variant_id.clone(),
                    quantity: line.item.quantity,
                    price: line.item.price,
                    subscription_group_id: line.group,
                    line_item_attributes: line
                        .attributes
                        .iter()
                        .map(|(name, value)| ProposedAttribute {
                            name: name.to_string(),
                            value: value.to_string(),
                        })
                        .collect(),
                })
                .collect(),
            shipping_lines: self
                .shipping_line
                .iter()
                .map(|chosen| ProposedShippingLine {
                    name: chosen.description.clone(),
                    code: chosen.code.clone(),
                    tag: "checkout".to_string(),
                    price: chosen.amount,
                })
                .collect(),
            shipping_address: self.shipping_address.map(address),
            billing_address: self.billing_address.map(address),
            placed_at: self.placed,
            last_order_datetime: self.placed,
            next_order_datetime: self.next_order,
            external_id: self.external_id.to_string(),
            id: None,
            customer: ProposedCustomer {
                email: self.customer.email_address.clone(),
                first_name: self.customer.first_name.clone(),
                last_name: self.customer.last_name.clone(),
            },
        }
    }

    /// The plan's Create Subscription body as JSON.
    fn body(&self) -> Value {
        let address = |address: Option<&CheckoutAddress>| {
            address.map(|a| {
                json!({
                    "first_name": a.first_name, "last_name": a.last_name, "company": a.business_name,
                    "phone": a.phone_number, "street1": a.address_line_1, "street2": a.address_line_2,
                    "city": a.city, "province": a.province, "province_code": a.province_code,
                    "country": a.country, "country_code": a.country_code, "zip": a.postal_code,
                })
            })
        };
        let line_items: Vec<Value> = self
            .line_items
            .iter()
            .map(|line| {
                let mut json = json!({
                    "platform_product_id": line.item.product_id,
                    "platform_variant_id": line.item.variant_id,
                    "quantity": line.item.quantity,
                    "price": line.item.price,
                });
                if let Some(group) = line.group {
                    json["subscription_group_id"] = json!(group);
                }
                let attributes: Vec<Value> = line
                    .attributes
                    .iter()
                    .map(|(name, value)| json!({"name": name, "value": value}))
                    .collect();
                json["line_item_attributes"] = json!(attributes);
                json
            })
            .collect();
        let shipping_lines: Vec<Value> = self
            .shipping_line
            .iter()
            .map(|chosen| {
                json!({"name": chosen.description, "code": chosen.code, "tag": "checkout",
                       "price": chosen.amount})
            })
            .collect();
        json!({
            "customer": {
                "email": self.customer.email_address,
                "first_name": self.customer.first_name,
                "last_name": self.customer.last_name,
            },
            "subscription": {
                "idempotency_key": self.idempotency_key,
                "order_rrule": self.rule,
                "charged_currency": self.currency,
                "base_currency": self.currency,
                "line_items": line_items,
                "shipping_lines": shipping_lines,
                "shipping_address": address(self.shipping_address),
                "billing_address": address(self.billing_address),
                "payment_details": self.payment.map(|p| json!({
                    "gateway_name": p.gateway_public_id,
                    "gateway_payment_id": p.token,
                    "expires_at": p.expires_at,
                })),
                "placed_at": self.placed,
                "last_order_datetime": self.placed,
                "next_order_datetime": self.next_order,
                "external_id": self.external_id,
            }
        })
    }
}

#[cfg(test)]
mod plan_tests {
    use super::*;
    use crate::access::shop::ShopIdentifier;
    use crate::kernel::ids::GroupId;
    use crate::subscriptions::groups::GroupReferences;
    use crate::subscriptions::input::NewSubscription;

    fn at(text: &str) -> Timestamp {
        Timestamp::parse_rfc3339(text).unwrap()
    }

    fn shop() -> Shop {
        Shop {
            id: crate::kernel::ids::ShopId(1),
            identifier: ShopIdentifier::parse("0123456789abcdef0123456789abcdef").unwrap(),
            shop_domain: "example.myshop.test".into(),
            custom_domain: None,
            platform_type: "custom".into(),
            timezone: "America/Toronto".into(),
            currency: "USD".into(),
            currency_format: "${{amount}}".into(),
            shop_owner: "Owner".into(),
            admin_email: "owner@example.test".into(),
            pii_redacted_at: None,
            created_at: at("2024-01-01T00:00:00Z"),
            updated_at: at("2024-01-01T00:00:00Z"),
            deleted_at: None,
            order_retry_interval_seconds: 86_400,
            order_max_retries: 3,
            expiring_payment_notice_days: 30,
            checkout: Default::default(),
            require_message_signatures: false,
            budgets: Default::default(),
        }
    }

    fn order(document: Value) -> CheckoutOrder {
        let now = at("2024-03-05T12:00:00Z");
        CheckoutOrder {
            id: CheckoutOrderId(1),
            shop_id: crate::kernel::ids::ShopId(1),
            public_order_id: "0123abcd".into(),
            status: CheckoutStatus::Processed,
            platform_order_id: None,
            last_activity_at: now,
            abandoned_at: None,
            fulfilled_at: None,
            version: 1,
            document: serde_json::from_value(document).unwrap(),
            created_at: now,
            updated_at: now,
        }
    }

    fn document(item: Value, extra: Value) -> Value {
        let mut document = json!({
            "currency": "USD", "customer": null, "shipping_address": null,
            "billing_address": null, "available_shipping_lines": [], "selected_shipping": null,
            "taxes": [], "discounts": [], "payments": [], "is_processed": true,
            "resumable_link": "", "processed_at": "2024-03-05T12:00:00Z",
            "order_meta_data": {"cart_parameters": {}, "note_attributes": {}, "notes": "", "tags": []},
        });
        let mut line = json!({
            "line_item_key": "k", "product_id": "p-1", "variant_id": "v-1", "title": "t",
            "product_title": "p", "sku": "", "image_url": "", "description": "", "vendor": "",
            "tags": "", "price": 1250, "compare_at_price": 0, "quantity": 2, "weight": 0.0,
            "weight_unit": "g", "requires_shipping": true, "taxable": true,
            "properties": {"order_rrule": "DTSTART:20240304T090000\nRRULE:FREQ=WEEKLY",
                           "subscription_group_id": "4", "gift": " for Ada "},
        });
        for (key, value) in item.as_object().unwrap() {
            line[key] = value.clone();
        }
        document["line_items"] = json!([line]);
        for (key, value) in extra.as_object().unwrap() {
            document[key] = value.clone();
        }
        document
    }

    /// What the plan's typed body checks into, and what its JSON body read by Create
    /// Subscription's own parser does: the same subscription, or the same problems.
    fn both(order: &CheckoutOrder) -> (String, String) {
        let shop = shop();
        let now = at("2024-03-05T12:00:00Z");
        let groups = GroupReferences::default();
        let plans = plans(&order.document);
        let ((rule, group), items) = &plans[0];
        let plan = PlanSubscription::new(&shop, order, rule, group, items, 0, now);
        let body = plan.body();
        let request = plan.request();
        assert_eq!(request.group_ids(), [(Some(GroupId(4)), None)]);
        let typed = request.validate(&shop, now, &groups, body_fingerprint(&body));
        let parsed = NewSubscription::parse_with(&body, &shop, now, &groups);
        (format!("{typed:?}"), format!("{parsed:?}"))
    }

    #[test]
    fn a_plans_typed_body_checks_as_its_json_body_does() {
        let address = json!({
            "first_name": " Ada ", "last_name": "", "address_line_1": "1 Way",
            "address_line_2": "  ", "country": "Canada", "city": "Toronto", "province": "",
            "country_code": "ca", "province_code": "ON", "postal_code": "M5V",
            "business_name": "", "phone_number": " 555 ",
        });
        let good = order(document(
            json!({}),
            json!({
                "customer": {"public_id": "c", "first_name": "Ada", "last_name": " ",
                             "email_address": " ada@example.test ", "accepts_marketing": false},
                "shipping_address": address,
                "selected_shipping": {"id": "flat_rate", "description": " Ground ",
                                      "amount": 500, "code": ""},
                "payments": [{"id": "p", "gateway_public_id": "test", "token": "tok_success",
                              "amount": 0, "type": "credit_card", "display_string": "",
                              "retain": false, "expires_at": " 2027-03 "}],
            }),
        ));
        let (typed, parsed) = both(&good);
        assert!(typed.starts_with("Ok"), "{typed}");
        assert_eq!(typed, parsed);

        // Blanks, a wrong expiry, a price and a quantity out of range, and no customer.
        let wrong = order(document(
            json!({"product_id": "  ", "price": -5, "quantity": 0,
                   "properties": {"order_rrule": "DTSTART:20240304T090000\nRRULE:FREQ=WEEKLY",
                                  "subscription_group_id": "4", "": "x"}}),
            json!({
                "currency": "usd",
                "billing_address": {"address_line_1": " ", "city": "", "country_code": "USA"},
                "payments": [{"id": "p", "gateway_public_id": "", "token": "", "amount": 0,
                              "type": "credit_card", "display_string": "", "retain": false,
                              "expires_at": "03/27"}],
            }),
        ));
        let (typed, parsed) = both(&wrong);
        assert!(typed.starts_with("Err"), "{typed}");
        assert_eq!(typed, parsed);
    }
    #[test]
    fn every_topics_test_delivery_fits_its_schema() {
        use crate::checkout::payloads::{Topic, payload_schema, test_payload};
        let now = at("2024-03-05T12:00:00Z");
        for topic in Topic::ALL {
            let body = serde_json::to_value(test_payload(&shop(), topic.as_str(), now)).unwrap();
            assert_eq!(body["test"], true, "{}", topic.as_str());
            let problems = crate::webhooks::catalogue::violations(&payload_schema(topic), &body);
            assert!(
                problems.is_empty(),
                "{}: {problems:?}\n{body}",
                topic.as_str()
            );
        }
        // The real payloads have no `test`, and fit too.
        let declined = order(document(json!({}), json!({})));
        let shown = declined
            .document
            .application_state(&declined.public_order_id);
        let body = serde_json::to_value(crate::checkout::payloads::order_payload(
            &shop(),
            &declined,
            shown,
            None,
        ))
        .unwrap();
        assert!(body.get("test").is_none());
        let problems =
            crate::webhooks::catalogue::violations(&payload_schema(Topic::OrderFailed), &body);
        assert!(problems.is_empty(), "{problems:?}");
    }

    #[test]
    fn a_declined_plans_proposed_subscription_is_its_body_without_the_payment() {
        let address = json!({
            "first_name": "Ada", "last_name": "L", "address_line_1": "1 Way",
            "address_line_2": "", "country": "Canada", "city": "Toronto", "province": "",
            "country_code": "CA", "province_code": "ON", "postal_code": "M5V",
            "business_name": "", "phone_number": "555",
        });
        let declined = order(document(
            json!({}),
            json!({
                "customer": {"public_id": "c", "first_name": "Ada", "last_name": "L",
                             "email_address": "ada@example.test", "accepts_marketing": false},
                "billing_address": address,
                "selected_shipping": {"id": "flat_rate", "description": "Ground",
                                      "amount": 500, "code": "g"},
                "payments": [{"id": "p", "gateway_public_id": "test", "token": "tok_declined",
                              "amount": 0, "type": "credit_card", "display_string": "",
                              "retain": false, "expires_at": "2027-03"}],
            }),
        ));
        let plans = plans(&declined.document);
        let ((rule, group), items) = &plans[0];
        let now = at("2024-03-05T12:00:00Z");
        let plan = PlanSubscription::new(&shop(), &declined, rule, group, items, 0, now);
        let body = plan.body();
        let mut expected = body["subscription"].clone();
        let fields = expected.as_object_mut().unwrap();
        fields.remove("payment_details");
        fields.remove("idempotency_key");
        fields.insert("id".to_string(), Value::Null);
        fields.insert("customer".to_string(), body["customer"].clone());
        assert_eq!(serde_json::to_value(plan.proposed()).unwrap(), expected);
        let schema = crate::subscriptions::topics::payload_schema(
            crate::subscriptions::topics::Topic::SubscriptionPaymentFailed,
        );
        let body = json!({
            "topic": "subscription_payment_failed", "shop_identifier": "s",
            "created_at": "2024-03-05T12:00:00Z", "data": expected,
            "order": {"source": "checkout", "public_order_id": "p", "platform_order_id": null,
                      "status": "failed", "failure_code": "payment_declined",
                      "failure_reason": "the payment was declined", "total": 2500,
                      "currency": "USD"},
        });
        let problems = crate::webhooks::catalogue::violations(&schema, &body);
        assert!(problems.is_empty(), "{problems:?}");
    }
}
