//! The subscription use cases: create (idempotent), get,
//! list, update and the nine actions. Each runs in the caller's transaction, writes its status
//! log entry and enqueues its webhooks in the order `states::topics` gives.

use crate::kernel::ids::ShopId;
use serde::Serialize;
use serde_json::Value;

use crate::access::shop::Shop;
use crate::kernel::error::{DomainError, FieldError};
use crate::kernel::ids::{AddressId, CustomerId, LineItemId, SubscriptionId};
use crate::kernel::time::Timestamp;
use crate::platform::catalogue::{self, CatalogueVariant};
use crate::subscriptions::analytics::{count_created, count_saved};
use crate::subscriptions::cancellation::{CancelRequest, Cancellation, check_reason};
use crate::subscriptions::customers::{
    PagePagination, add_address, customer_resources, find_or_create_customer,
    stored_address_resource, update_customer,
};
use crate::subscriptions::groups::group_references;
use crate::subscriptions::input::{
    DiscountValue, LineItemInput, NewSubscription, PaymentMethodChange, ShippingAddressChange,
    ShippingLineInput, SubscriptionUpdate,
};
use crate::subscriptions::pausing::{PauseRequest, plan_resume};
use crate::subscriptions::query::{Cursor, ListQuery};
use crate::subscriptions::recurrence::{OrderSchedule, ShopZone, next_order_on_return, plan_skip};
use crate::subscriptions::repository::{
    StoredSubscription, SubscriptionRepositories, SubscriptionState,
};
use crate::subscriptions::resources::{
    Actor, Cents, FailureDetails, LineItemAttribute, LineItemDiscount, PrepaidMetadata,
    ShippingLine, Subscription, SubscriptionLineItem, SubscriptionStatus,
};
use crate::subscriptions::states::{
    Action, ActionOutcome, CREATED_REASON, INVALID_TRANSITION, NewStatusLog,
    action_for_status_change, creation_topics, take_action, topics,
};
use crate::subscriptions::topics::Topic;
use crate::subscriptions::webhooks::{emit, emit_cancelled, emit_customer};

/// The pagination of List Subscriptions: `next` is the opaque cursor of the
/// next page, null on the last.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct CursorPagination {
    /// How many subscriptions the whole list holds (counted on its first page).
    pub total: i64,
    /// How many subscriptions this page holds.
    pub count: i64,
    /// The most subscriptions a page holds (the query's `limit`).
    pub per_page: i64,
    /// How many pages the whole list fills.
    pub total_pages: i64,
    /// The cursor of the next page; `None` on the last page.
    pub next: Option<String>,
}

/// An amount of the base currency in the charged currency: `cents × rate`, worked out exactly
/// on the rate as written (`Cents::at_rate`) and rounded half away from zero; 422 on the
/// exchange rate when it is too large to charge.
pub(crate) fn charged(amount: Cents, rate: f64) -> Result<Cents, DomainError> {
    amount
        .at_rate(rate)
        .ok_or_else(|| too_large("subscription.base_to_charged_exchange_rate"))
}

/// Amounts too large to charge, worked out from `field`: 422.
pub(crate) fn too_large(field: &str) -> DomainError {
    DomainError::invalid(
        field,
        "out_of_range",
        format!("{field} makes amounts too large to charge"),
    )
}

/// A unit price times a quantity: 422 on `field` when it overflows.
fn price_times(price: Cents, quantity: i64, field: &str) -> Result<Cents, DomainError> {
    price.times(quantity).ok_or_else(|| too_large(field))
}

/// A subscription's order must be chargeable: its amounts (every line, the subtotal,
/// shipping and total, in the charged currency) work out without overflow, else 422.
fn check_chargeable(subscription: &Subscription) -> Result<(), DomainError> {
    crate::subscriptions::orders::try_charge(subscription)
        .map(|_| ())
        .ok_or_else(|| too_large("subscription.line_items"))
}

/// A line item's unit price less its discounts (each taken off the unit price: a percentage
/// rounded half away from zero, a fixed amount as given), never below zero; and the
/// discounts as shown, with what each took.
fn discounted(
    input: &LineItemInput,
    shop_id: ShopId,
    rate: f64,
    now: Timestamp,
) -> Result<(Cents, Vec<LineItemDiscount>), DomainError> {
    let mut left = input.price.0;
    let mut shown = Vec::with_capacity(input.discounts.len());
    for (index, discount) in input.discounts.iter().enumerate() {
        let (kind, percent, wanted) = match discount.value {
            DiscountValue::Percentage(percent) => (
                "percentage",
                percent,
                input.price.percent(percent).map_or(0, |taken| taken.0),
            ),
            DiscountValue::Fixed(amount) => ("fixed_amount", 0.0, amount.0),
        };
        let taken = wanted.clamp(0, left);
        left -= taken;
        shown.push(LineItemDiscount {
            id: index as i64 + 1,
            subscription_line_item_id: LineItemId(0),
            shop_id,
            full_price: input.price,
            fixed_value: Cents(taken),
            fixed_value_charged: charged(Cents(taken), rate)?,
            discount_type: kind.to_string(),
            percentage_value: percent,
            description: discount.description.clone(),
            created_at: now,
            updated_at: now,
            deleted_at: None,
        });
    }
    Ok((Cents(left), shown))
}

/// The line items of a new subscription, each variant looked up in the catalogue (the
/// variant of that product, live).
fn line_items_of(
    tx: &mut dyn SubscriptionRepositories,
    shop: &Shop,
    inputs: &[LineItemInput],
    rate: f64,
    now: Timestamp,
) -> Result<Vec<SubscriptionLineItem>, DomainError> {
    let ids: Vec<&str> = inputs
        .iter()
        .map(|item| item.platform_variant_id.as_str())
        .collect();
    let found = catalogue::variants(tx, shop.id, &ids)?;
    inputs
        .iter()
        .enumerate()
        .map(|(index, item)| {
            let of_product = found.get(&item.platform_variant_id).filter(|found| {
                found.product.platform_id.as_ref().map(|id| id.as_str())
                    == Some(item.platform_product_id.as_str())
            });
            line_item(item, index, of_product, shop.id, rate, now)
        })
        .collect()
}

/// Shipping lines as stored: numbered from 1, each `value` its price, charged at `rate`.
fn shipping_lines_of(
    inputs: &[ShippingLineInput],
    rate: f64,
    now: Timestamp,
) -> Result<Vec<ShippingLine>, DomainError> {
    inputs
        .iter()
        .enumerate()
        .map(|(index, line)| -> Result<ShippingLine, DomainError> {
            Ok(ShippingLine {
                id: index as i64 + 1,
                subscription_id: SubscriptionId(0),
                name: line.name.clone(),
                code: line.code.clone(),
                tag: line.tag.clone(),
                price: line.price,
                value: line.price,
                value_charged: charged(line.price, rate)?,
                created_at: now,
                updated_at: now,
            })
        })
        .collect()
}

/// A line item: what the catalogue says of its variant when it has it (title, names, SKU,
/// image, weight, shipping and tax), else what the body said.
fn line_item(
    input: &LineItemInput,
    index: usize,
    found: Option<&CatalogueVariant>,
    shop_id: ShopId,
    rate: f64,
    now: Timestamp,
) -> Result<SubscriptionLineItem, DomainError> {
    let full = price_times(
        input.price,
        input.quantity,
        &format!("subscription.line_items[{index}].quantity"),
    )?;
    let (unit, discounts) = discounted(input, shop_id, rate, now)?;
    let given = &input.details;
    let (product, variant) = match found {
        Some(found) => (Some(&found.product), Some(&found.variant)),
        None => (None, None),
    };
    let product_name = product
        .and_then(|p| p.name.clone())
        .or_else(|| given.product_name.clone());
    let variant_name = variant
        .and_then(|v| v.name.clone())
        .or_else(|| given.variant_name.clone());
    Ok(SubscriptionLineItem {
        id: LineItemId(0),
        subscription_id: SubscriptionId(0),
        subscription_group_id: input.subscription_group_id,
        subscription_group_billing_rules_id: input.subscription_group_billing_rules_id,
        platform_id: None,
        platform_product_id: input.platform_product_id.clone(),
        platform_variant_id: input.platform_variant_id.clone(),
        title: match found {
            Some(_) => variant_name.clone().or_else(|| product_name.clone()),
            None => given.title.clone(),
        },
        product_name,
        variant_name,
        sku: variant
            .and_then(|v| v.sku.clone())
            .or_else(|| given.sku.clone()),
        image: found
            .and_then(CatalogueVariant::image_url)
            .or_else(|| given.image.clone()),
        quantity: input.quantity,
        price: input.price,
        price_charged: charged(input.price, rate)?,
        discounted_price: unit,
        discounted_price_charged: charged(unit, rate)?,
        full_price: full,
        full_price_charged: charged(full, rate)?,
        requires_shipping: variant
            .and_then(|v| v.require_shipping)
            .or(given.requires_shipping)
            .unwrap_or(true),
        taxable: variant
            .and_then(|v| v.tax_exempt)
            .map(|exempt| !exempt)
            .or(given.taxable)
            .unwrap_or(true),
        grams: variant
            .and_then(|v| v.grams)
            .map(|grams| grams.round() as i64)
            .or(given.grams),
        weight: variant
            .and_then(|v| v.weight.as_ref())
            .and_then(|w| w.as_str().parse::<f64>().ok())
            .or(given.weight),
        weight_unit: variant
            .and_then(|v| v.weight_unit.clone())
            .or_else(|| given.weight_unit.clone()),
        discounts,
        prepaid_metadata: input.prepaid.as_ref().map(|prepaid| PrepaidMetadata {
            id: 0,
            line_item_id: LineItemId(0),
            prepaid_duration: prepaid.prepaid_duration,
            current_recurrence_count: prepaid.current_recurrence_count,
            prepaid_continue: prepaid.prepaid_continue.clone(),
        }),
        line_item_attributes: input
            .attributes
            .iter()
            .map(|(name, value)| LineItemAttribute {
                name: name.clone(),
                value: value.clone(),
                created_at: now,
                updated_at: now,
                subscription_id: SubscriptionId(0),
                line_item_id: LineItemId(0),
            })
            .collect(),
        created_at: now,
        updated_at: now,
    })
}

/// Stored subscriptions as answers show them: their addresses, and customers when expanded.
pub(crate) fn resources(
    tx: &mut dyn SubscriptionRepositories,
    shop: &Shop,
    stored: Vec<StoredSubscription>,
    expand_customer: bool,
) -> Result<Vec<Subscription>, DomainError> {
    let mut address_ids: Vec<AddressId> = stored
        .iter()
        .flat_map(|s| [s.state.billing_address_id, s.state.shipping_address_id])
        .collect();
    address_ids.sort_unstable();
    address_ids.dedup();
    let addresses = tx.addresses_by_ids(shop.id, &address_ids)?;
    let customers = if expand_customer {
        let mut ids: Vec<CustomerId> = stored.iter().map(|s| s.state.customer_id).collect();
        ids.sort_unstable();
        ids.dedup();
        customer_resources(tx, shop, &ids)?
    } else {
        Vec::new()
    };
    let address = |id: AddressId| {
        addresses
            .iter()
            .find(|a| a.id == id)
            .map(|a| stored_address_resource(shop, a))
            .ok_or_else(|| {
                DomainError::Storage(crate::kernel::error::StorageError::other(format!(
                    "address {id} of a subscription is missing"
                )))
            })
    };
    stored
        .into_iter()
        .map(|s| {
            let billing = address(s.state.billing_address_id)?;
            let shipping = address(s.state.shipping_address_id)?;
            let customer = customers
                .iter()
                .find(|c| c.id == s.state.customer_id)
                .cloned()
                .map(Box::new);
            Ok(s.into_resource(billing, shipping, customer))
        })
        .collect()
}

fn stored(
    tx: &mut dyn SubscriptionRepositories,
    shop: &Shop,
    id: SubscriptionId,
) -> Result<StoredSubscription, DomainError> {
    tx.subscription(shop.id, id)?
        .ok_or(DomainError::not_found("subscription"))
}

/// Get Subscription.
pub fn get_subscription(
    tx: &mut dyn SubscriptionRepositories,
    shop: &Shop,
    id: SubscriptionId,
    expand_customer: bool,
) -> Result<Subscription, DomainError> {
    let subscription = stored(tx, shop, id)?;
    let mut list = resources(tx, shop, vec![subscription], expand_customer)?;
    list.pop().ok_or(DomainError::not_found("subscription"))
}

/// List Subscriptions: a page after the query's cursor, and the pagination with the next cursor.
pub fn list_subscriptions(
    tx: &mut dyn SubscriptionRepositories,
    shop: &Shop,
    query: &ListQuery,
) -> Result<(Vec<Subscription>, CursorPagination), DomainError> {
    let page = tx.list_subscriptions(shop.id, query)?;
    // Counted on a walk's first page only, then carried by the cursor.
    let total = match query.cursor.and_then(|cursor| cursor.total) {
        Some(total) => total,
        None => tx.count_subscriptions(shop.id, query)?,
    };
    let next = page
        .has_more
        .then(|| page.subscriptions.last())
        .flatten()
        .map(|last| {
            Cursor {
                after_id: last.id,
                total: Some(total),
            }
            .encode()
        });
    let subscriptions = resources(tx, shop, page.subscriptions, query.expand_customer)?;
    let pagination = CursorPagination {
        total,
        count: i64::try_from(subscriptions.len()).unwrap_or(i64::MAX),
        per_page: query.limit,
        total_pages: (total + query.limit - 1) / query.limit,
        next,
    };
    Ok((subscriptions, pagination))
}

/// List Customer Subscriptions.
pub fn customer_subscriptions(
    tx: &mut dyn SubscriptionRepositories,
    shop: &Shop,
    customer_id: CustomerId,
    limit: i64,
    page: i64,
) -> Result<(Vec<Subscription>, PagePagination), DomainError> {
    match tx.directory_customer(shop.id, customer_id)? {
        Some(customer) if customer.deleted_at.is_none() => {}
        _ => return Err(DomainError::not_found("customer")),
    }
    let (stored, total) = tx.customer_subscriptions(shop.id, customer_id, limit, page)?;
    let subscriptions = resources(tx, shop, stored, false)?;
    let pagination = PagePagination::new(subscriptions.len(), page, limit, total);
    Ok((subscriptions, pagination))
}

fn idempotency_conflict() -> DomainError {
    DomainError::Conflict {
        code: "subscription.idempotency_conflict",
        message: "idempotency_key was used for a subscription with another body".to_string(),
    }
}

/// Create Subscription from its body: the subscription groups and billing rules its line
/// items name are read (each must be the shop's: 422 on its field), then the body is checked
/// with what they give, then [`create_subscription`].
pub fn create_subscription_from_body(
    tx: &mut dyn SubscriptionRepositories,
    shop: &Shop,
    body: &Value,
    actor: Actor,
    now: Timestamp,
) -> Result<(Subscription, bool), DomainError> {
    let items = body
        .pointer("/subscription/line_items")
        .and_then(Value::as_array)
        .map_or(&[][..], Vec::as_slice);
    let groups = group_references(tx, shop, items, "subscription.line_items")?;
    let new = NewSubscription::parse_with(body, shop, now, &groups)?;
    create_subscription(tx, shop, new, actor, now)
}

/// Create Subscription. With an `idempotency_key` the shop used before: the first subscription
/// when the body is the same (`Ok((subscription, false))`), 409 when it differs.
pub fn create_subscription(
    tx: &mut dyn SubscriptionRepositories,
    shop: &Shop,
    new: NewSubscription,
    actor: Actor,
    now: Timestamp,
) -> Result<(Subscription, bool), DomainError> {
    // Concurrent creations with one key, or for one new email, run one after the other.
    if let Some(key) = &new.idempotency_key {
        tx.lock_for_create(&format!("subscription:{}:{key}", shop.id))?;
    }
    tx.lock_for_create(&format!(
        "customer:{}:{}",
        shop.id,
        new.customer.email.to_lowercase()
    ))?;
    if let Some(key) = &new.idempotency_key
        && let Some((id, fingerprint)) = tx.subscription_by_idempotency_key(shop.id, key)?
    {
        if fingerprint.as_deref() != Some(new.fingerprint.as_str()) {
            return Err(idempotency_conflict());
        }
        return Ok((get_subscription(tx, shop, id, false)?, false));
    }
    let (customer_id, customer_created) = find_or_create_customer(tx, shop, &new.customer, now)?;
    let shipping_address_id = add_address(tx, shop, customer_id, &new.shipping_address, None, now)?;
    let billing_address_id = if new.billing_address == new.shipping_address {
        shipping_address_id
    } else {
        add_address(tx, shop, customer_id, &new.billing_address, None, now)?
    };
    let rate = new.base_to_charged_exchange_rate;
    let line_items = line_items_of(tx, shop, &new.line_items, rate, now)?;
    let rule = new.schedule.source().to_string();
    let (token, gateway, gateway_customer, expires_at) = match new.payment_details {
        Some(details) => (
            details.gateway_payment_id,
            Some(details.gateway_name),
            details.gateway_customer_id,
            details.expires_at,
        ),
        None => (None, None, None, None),
    };
    let state = SubscriptionState {
        customer_id,
        billing_address_id,
        shipping_address_id,
        orders_processed: 0,
        current_retries: 0,
        external_id: new.external_id,
        idempotency_key: new.idempotency_key,
        idempotency_fingerprint: Some(new.fingerprint),
        next_order_datetime: new.next_order_datetime,
        next_payment_datetime: new.next_order_datetime,
        next_processing_datetime: None,
        last_payment_datetime: None,
        last_order_datetime: new.last_order_datetime,
        last_processed_datetime: None,
        status_changed_at: Some(now),
        placed_at: new.placed_at,
        updated_at: now,
        subscription_status: new.status,
        payment_method_token: token,
        payment_gateway_public_id: gateway,
        payment_gateway_customer_id: gateway_customer,
        payment_method_expires_at: expires_at,
        payment_rrule: rule.clone(),
        payment_rrule_text: new.order_rrule_text.clone(),
        order_rrule: rule,
        order_rrule_text: new.order_rrule_text,
        charged_currency: new.charged_currency,
        base_currency: new.base_currency,
        base_to_charged_exchange_rate: rate,
        percent_discount: new.percent_discount,
        discount_code: new.discount_code,
        shipping_lines: shipping_lines_of(&new.shipping_lines, rate, now)?,
        last_failure_code: None,
        last_failure_reason: None,
        last_failure_details: None,
        skipped_dates: Vec::new(),
        note: new.note,
        order_note: new.order_note,
        resume_on: None,
    };
    let id = tx
        .insert_subscription(shop.id, &state, &line_items, now)
        .map_err(|error| {
            // Not expected: creations and updates with one key hold its lock.
            if error.is_unique_violation() {
                idempotency_conflict()
            } else {
                DomainError::Storage(error)
            }
        })?;

    tx.insert_status_log(
        shop.id,
        &NewStatusLog::new(id, new.status, CREATED_REASON, actor, now),
    )?;
    count_created(tx, shop, &state, &line_items, now)?;
    let subscription = get_subscription(tx, shop, id, false)?;
    check_chargeable(&subscription)?;
    for topic in creation_topics(customer_created) {
        match topic {
            Topic::CustomerCreated => {
                // The customer was made in this transaction; should it not be shown (never
                // expected), nothing is announced rather than a `null` customer.
                let customers = customer_resources(tx, shop, &[customer_id])?;
                if let Some(customer) = customers.first() {
                    emit_customer(tx, shop, topic, customer, now)?;
                }
            }
            _ => emit(tx, shop, topic, &subscription, now)?,
        }
    }
    Ok((subscription, true))
}

/// A client's action on a subscription, with its checked body.
#[derive(Debug, Clone)]
pub enum ActionRequest {
    /// Cancel the subscription, with an optional reason (one of the shop's codes) and comment.
    Cancel(CancelRequest),
    /// Make a cancelled subscription active again.
    Reactivate,
    /// Pause the subscription, optionally until a date (after today in the shop's zone).
    Pause(PauseRequest),
    /// Make a paused subscription active again.
    Resume,
    /// Skip a ship date.
    Skip {
        /// The date to skip: its day in the shop's zone counts.
        order_datetime: Timestamp,
    },
    /// Change a line item's quantity.
    ChangeQuantity {
        /// The line item's id (the service's integer).
        line_item_id: LineItemId,
        /// The new quantity, at least 1.
        quantity: i64,
    },
    /// Replace the order rule (`order_rrule`) with this checked one.
    ChangeFrequency(Box<OrderSchedule>),
    /// Ship to a new address, or to another of the customer's.
    ChangeShippingAddress(ShippingAddressChange),
    /// Charge a new payment method.
    ChangePaymentMethod(PaymentMethodChange),
}

impl ActionRequest {
    /// The state machine's action the request is.
    pub fn action(&self) -> Action {
        match self {
            ActionRequest::Cancel(_) => Action::Cancel,
            ActionRequest::Reactivate => Action::Reactivate,
            ActionRequest::Pause(_) => Action::Pause,
            ActionRequest::Resume => Action::Resume,
            ActionRequest::Skip { .. } => Action::Skip,
            ActionRequest::ChangeQuantity { .. } => Action::ChangeQuantity,
            ActionRequest::ChangeFrequency(_) => Action::ChangeFrequency,
            ActionRequest::ChangeShippingAddress(_) => Action::ChangeShippingAddress,
            ActionRequest::ChangePaymentMethod(_) => Action::ChangePaymentMethod,
        }
    }
}

/// The stored rule of a subscription, read in the shop's zone.
pub(crate) fn schedule_of(
    shop: &Shop,
    state: &SubscriptionState,
) -> Result<OrderSchedule, DomainError> {
    OrderSchedule::parse(
        &state.order_rrule,
        ShopZone::of_shop(&shop.timezone),
        "order_rrule",
    )
    .map_err(|problem| DomainError::Invalid(vec![problem]))
}

/// An address id given for a subscription: one of its customer's live addresses.
fn customer_address(
    tx: &mut dyn SubscriptionRepositories,
    shop: &Shop,
    customer_id: CustomerId,
    address_id: AddressId,
    field: &str,
) -> Result<AddressId, DomainError> {
    let found = tx
        .addresses_by_ids(shop.id, &[address_id])?
        .into_iter()
        .any(|a| a.customer_id == customer_id && a.deleted_at.is_none());
    if found {
        Ok(address_id)
    } else {
        Err(DomainError::Invalid(vec![FieldError::new(
            field,
            "invalid_value",
            format!("{field} must be an address of the subscription's customer"),
        )]))
    }
}

/// Takes a client's action on a subscription: checks the move, changes the subscription,
/// writes the status log entry and enqueues the webhooks it implies.
pub fn take_subscription_action(
    tx: &mut dyn SubscriptionRepositories,
    shop: &Shop,
    id: SubscriptionId,
    request: ActionRequest,
    actor: Actor,
    now: Timestamp,
) -> Result<Subscription, DomainError> {
    tx.lock_subscription(shop.id, id)?;
    let current = stored(tx, shop, id)?;
    let mut state = current.state.clone();
    let action = request.action();
    // Refused moves are refused before any body is looked at against the subscription.
    crate::subscriptions::states::transition(state.subscription_status, action)?;
    let applied = apply_request(tx, shop, &current, &mut state, request, now)?;
    if state.next_order_datetime != current.state.next_order_datetime {
        // A new order date: a retry wait for the one before is over.
        state.next_processing_datetime = None;
    }
    let mut outcome = take_action(
        id,
        state.subscription_status,
        action,
        actor,
        now,
        applied.moved,
    )?;
    // The entry keeps what the canceller said, when they said something.
    outcome.log.metadata.cancellation = applied
        .cancellation
        .clone()
        .filter(|given| given.reason.is_some() || given.comment.is_some());
    if outcome.status_changed {
        state.status_changed_at = Some(now);
    }
    state.subscription_status = outcome.status;
    if state.subscription_status != SubscriptionStatus::Paused {
        // A pause's date ends with the pause (a resume or a cancel).
        state.resume_on = None;
    }
    state.updated_at = now;
    tx.save_subscription(shop.id, id, &state)?;
    tx.insert_status_log(shop.id, &outcome.log)?;
    let subscription = get_subscription(tx, shop, id, false)?;
    check_chargeable(&subscription)?;
    let reason = applied
        .cancellation
        .as_ref()
        .and_then(|given| given.reason.as_deref());
    count_saved(
        tx,
        shop,
        (&current.state, &current.line_items),
        (&state, &subscription.line_items),
        reason,
        now,
    )?;
    emit_outcome(
        tx,
        shop,
        &outcome.topics,
        &subscription,
        applied.cancellation.as_ref(),
        now,
    )?;
    Ok(subscription)
}

/// Enqueues an action's topics about `subscription`: `subscription_cancelled` with the
/// cancellation's reason and comment.
fn emit_outcome(
    tx: &mut dyn SubscriptionRepositories,
    shop: &Shop,
    topics: &[Topic],
    subscription: &Subscription,
    cancellation: Option<&Cancellation>,
    now: Timestamp,
) -> Result<(), DomainError> {
    for &topic in topics {
        match (topic, cancellation) {
            (Topic::SubscriptionCancelled, Some(cancellation)) => {
                emit_cancelled(tx, shop, subscription, cancellation, now)?
            }
            _ => emit(tx, shop, topic, subscription, now)?,
        }
    }
    Ok(())
}

/// A subscription coming back (resume, reactivate): its next order date kept when still ahead,
/// else its rule's next one. Whether the date moved.
fn come_back(
    shop: &Shop,
    state: &mut SubscriptionState,
    now: Timestamp,
) -> Result<bool, DomainError> {
    let schedule = schedule_of(shop, state)?;
    let (next, moved) = next_order_on_return(
        &schedule,
        state.next_order_datetime,
        &state.skipped_dates,
        now,
        "order_rrule",
    )
    .map_err(|problem| DomainError::Invalid(vec![problem]))?;
    state.next_order_datetime = Some(next);
    Ok(moved)
}

/// Skips the order of `order_datetime`'s day (see `recurrence::plan_skip`). Whether the next
/// order date moved.
fn skip(
    shop: &Shop,
    state: &mut SubscriptionState,
    order_datetime: Timestamp,
    now: Timestamp,
) -> Result<bool, DomainError> {
    let schedule = schedule_of(shop, state)?;
    let plan = plan_skip(
        &schedule,
        order_datetime,
        state.next_order_datetime,
        &state.skipped_dates,
        now,
        "order_datetime",
    )
    .map_err(|problem| DomainError::Invalid(vec![problem]))?;
    state.skipped_dates.retain(|at| *at > now);
    state.skipped_dates.push(plan.skipped);
    state.skipped_dates.sort();
    state.next_order_datetime = plan.next_order_datetime;
    Ok(plan.next_order_moved)
}

/// What a request changed beside the state: whether the next order date moved, and a
/// cancellation's reason and comment.
struct Applied {
    moved: bool,
    cancellation: Option<Cancellation>,
}

/// A request's changes to the subscription's `state` (its line items and addresses written as
/// they change), checked against the subscription and the shop.
fn apply_request(
    tx: &mut dyn SubscriptionRepositories,
    shop: &Shop,
    current: &StoredSubscription,
    state: &mut SubscriptionState,
    request: ActionRequest,
    now: Timestamp,
) -> Result<Applied, DomainError> {
    let id = current.id;
    let mut applied = Applied {
        moved: false,
        cancellation: None,
    };
    match request {
        ActionRequest::Cancel(cancel) => {
            applied.cancellation = Some(check_reason(tx, shop, cancel)?);
        }
        ActionRequest::Pause(pause) => {
            state.resume_on = pause
                .resume_on
                .map(|on| plan_resume(shop, on, now, "resume_on"))
                .transpose()?;
        }
        ActionRequest::Reactivate | ActionRequest::Resume => {
            if matches!(request, ActionRequest::Reactivate) {
                // A reactivated subscription starts afresh: failures before it do not count.
                state.current_retries = 0;
            }
            applied.moved = come_back(shop, state, now)?;
        }
        ActionRequest::Skip { order_datetime } => {
            applied.moved = skip(shop, state, order_datetime, now)?;
        }
        ActionRequest::ChangeQuantity {
            line_item_id,
            quantity,
        } => {
            let mut item = current
                .line_items
                .iter()
                .find(|item| item.id == line_item_id)
                .cloned()
                .ok_or(DomainError::not_found("line_item"))?;
            item.quantity = quantity;
            item.full_price = price_times(item.price, quantity, "quantity")?;
            item.full_price_charged =
                charged(item.full_price, state.base_to_charged_exchange_rate)?;
            tx.update_line_item(shop.id, id, &item, now)?;
        }
        ActionRequest::ChangeFrequency(schedule) => {
            state.order_rrule = schedule.source().to_string();
            state.order_rrule_text = schedule.text();
            state.payment_rrule = state.order_rrule.clone();
            state.payment_rrule_text = state.order_rrule_text.clone();
            // A live subscription must have an order ahead: a rule without one is refused.
            if state.subscription_status != SubscriptionStatus::Inactive {
                let next = schedule
                    .upcoming_order(now, &state.skipped_dates, "order_rrule")
                    .map_err(|problem| DomainError::Invalid(vec![problem]))?;
                state.next_order_datetime = Some(next);
                state.next_payment_datetime = state.next_order_datetime;
            }
        }
        ActionRequest::ChangeShippingAddress(change) => {
            state.shipping_address_id = match change {
                ShippingAddressChange::New(input) => {
                    add_address(tx, shop, state.customer_id, &input, None, now)?
                }
                ShippingAddressChange::Existing { address_id } => {
                    customer_address(tx, shop, state.customer_id, address_id, "address_id")?
                }
            };
        }
        ActionRequest::ChangePaymentMethod(change) => {
            state.payment_method_token = Some(change.payment_method_token);
            state.payment_gateway_public_id = Some(change.payment_gateway_public_id);
            state.payment_method_expires_at = change.expires_at;
            // A new method: an order waiting to be retried is tried again at once.
            state.next_processing_datetime = None;
            tx.set_expiring_payment_notified(shop.id, id, None)?;
        }
    }
    Ok(applied)
}

fn set<T>(target: &mut T, value: Option<T>) {
    if let Some(value) = value {
        *target = value;
    }
}

/// Update Subscription: writes the fields given. A status change is the action it maps to
/// (the same state machine and status log); changes of the rule, `next_order_datetime`, the
/// shipping address or the payment method emit their own topics, then `subscription_updated`.
pub fn update_subscription(
    tx: &mut dyn SubscriptionRepositories,
    shop: &Shop,
    id: SubscriptionId,
    update: SubscriptionUpdate,
    actor: Actor,
    now: Timestamp,
) -> Result<Subscription, DomainError> {
    tx.lock_subscription(shop.id, id)?;
    let current = stored(tx, shop, id)?;
    if current.state.subscription_status == SubscriptionStatus::Processing {
        return Err(DomainError::Unprocessable {
            code: INVALID_TRANSITION,
            message: "a subscription cannot be updated while its order is being placed \
                      (processing); try again in a moment"
                .to_string(),
        });
    }
    let status_action = match update.subscription_status {
        Some(to) => action_for_status_change(current.state.subscription_status, to)?,
        None => None,
    };
    if let Some(customer) = &update.customer {
        update_customer(tx, shop, current.state.customer_id, customer, now)?;
    }
    check_idempotency_key(tx, shop, id, &update)?;
    let before = current.state.clone();
    let mut state = current.state;
    apply_fields(&mut state, &update, now)?;
    apply_addresses(tx, shop, &mut state, &update, now)?;
    let log = apply_status(shop, id, &mut state, status_action, &update, actor, now)?;
    let payment_changed = payment_changed(&before, &state);
    if update.next_processing_datetime.is_none()
        && (state.next_order_datetime != before.next_order_datetime || payment_changed)
    {
        // A new order date or payment method: a retry wait is over.
        state.next_processing_datetime = None;
    }
    if payment_changed {
        tx.set_expiring_payment_notified(shop.id, id, None)?;
    }
    if state == before {
        return get_subscription(tx, shop, id, false);
    }
    let topics = topics_of_update(&before, &state, log.as_ref());
    state.updated_at = now;
    tx.save_subscription(shop.id, id, &state)?;
    if let Some(log) = log {
        tx.insert_status_log(shop.id, &log.log)?;
    }
    let subscription = get_subscription(tx, shop, id, false)?;
    check_chargeable(&subscription)?;
    count_saved(
        tx,
        shop,
        (&before, &current.line_items),
        (&state, &subscription.line_items),
        None,
        now,
    )?;
    for topic in topics {
        emit(tx, shop, topic, &subscription, now)?;
    }
    Ok(subscription)
}

/// A new idempotency key is no other subscription's (its creation is locked meanwhile).
fn check_idempotency_key(
    tx: &mut dyn SubscriptionRepositories,
    shop: &Shop,
    id: SubscriptionId,
    update: &SubscriptionUpdate,
) -> Result<(), DomainError> {
    let Some(Some(key)) = &update.idempotency_key else {
        return Ok(());
    };
    tx.lock_for_create(&format!("subscription:{}:{key}", shop.id))?;
    match tx.subscription_by_idempotency_key(shop.id, key)? {
        Some((other_id, _)) if other_id != id => Err(DomainError::Conflict {
            code: "subscription.idempotency_key_taken",
            message: "another subscription of the shop has this idempotency_key".to_string(),
        }),
        _ => Ok(()),
    }
}

/// The update's fields applied to the state: its rules ([`apply_rules`]), dates, payment
/// method, counters, currencies (one currency, a rate of 1), texts and shipping lines.
/// Addresses and the status are the next steps'.
fn apply_fields(
    state: &mut SubscriptionState,
    update: &SubscriptionUpdate,
    now: Timestamp,
) -> Result<(), DomainError> {
    apply_rules(state, update, now)?;
    let update = update.clone();
    set(&mut state.external_id, update.external_id);
    set(&mut state.idempotency_key, update.idempotency_key);
    set(
        &mut state.next_order_datetime,
        update.next_order_datetime.map(Some),
    );
    set(
        &mut state.next_payment_datetime,
        update.next_payment_datetime.map(Some),
    );
    set(
        &mut state.next_processing_datetime,
        update.next_processing_datetime.map(Some),
    );
    set(
        &mut state.last_payment_datetime,
        update.last_payment_datetime.map(Some),
    );
    set(
        &mut state.last_order_datetime,
        update.last_order_datetime.map(Some),
    );
    set(
        &mut state.last_processed_datetime,
        update.last_processed_datetime.map(Some),
    );
    set(&mut state.placed_at, update.placed_at.map(Some));
    set(
        &mut state.payment_method_token,
        update.payment_method_token.map(Some),
    );
    set(
        &mut state.payment_gateway_public_id,
        update.payment_gateway_public_id.map(Some),
    );
    set(
        &mut state.payment_method_expires_at,
        update.payment_method_expires_at,
    );
    set(&mut state.current_retries, update.current_retries);
    set(&mut state.orders_processed, update.orders_processed);
    let currency_changed = update.charged_currency.is_some() || update.base_currency.is_some();
    set(&mut state.charged_currency, update.charged_currency);
    set(&mut state.base_currency, update.base_currency);
    set(
        &mut state.base_to_charged_exchange_rate,
        update.base_to_charged_exchange_rate,
    );
    if currency_changed
        && update.base_to_charged_exchange_rate.is_none()
        && state.base_currency != state.charged_currency
    {
        return Err(DomainError::invalid(
            "subscription.base_to_charged_exchange_rate",
            "required",
            "subscription.base_to_charged_exchange_rate is required when a currency changes and \
             charged_currency differs from base_currency",
        ));
    }
    if state.base_currency == state.charged_currency && state.base_to_charged_exchange_rate != 1.0 {
        return Err(DomainError::invalid(
            "subscription.base_to_charged_exchange_rate",
            "invalid_value",
            "subscription.base_to_charged_exchange_rate must be 1 when base_currency and \
             charged_currency are the same",
        ));
    }
    set(&mut state.discount_code, update.discount_code);
    set(&mut state.last_failure_code, update.last_failure_code);
    set(&mut state.last_failure_reason, update.last_failure_reason);
    if let Some(message) = update.last_failure_message {
        state.last_failure_details = message.map(|message| FailureDetails { message });
    }
    set(&mut state.note, update.note);
    set(&mut state.order_note, update.order_note);
    if let Some(lines) = &update.shipping_lines {
        state.shipping_lines = shipping_lines_of(lines, state.base_to_charged_exchange_rate, now)?;
    }
    Ok(())
}

/// The update's order and payment rules (the payment rule follows a new order rule unless
/// given); a subscription left live must have an order ahead under its new rule.
fn apply_rules(
    state: &mut SubscriptionState,
    update: &SubscriptionUpdate,
    now: Timestamp,
) -> Result<(), DomainError> {
    if let Some(schedule) = &update.order_rrule {
        state.order_rrule = schedule.source().to_string();
        state.order_rrule_text = schedule.text();
        if update.payment_rrule.is_none() {
            state.payment_rrule = state.order_rrule.clone();
            state.payment_rrule_text = state.order_rrule_text.clone();
        }
        let ends_inactive = update
            .subscription_status
            .unwrap_or(state.subscription_status)
            == SubscriptionStatus::Inactive;
        if update.next_order_datetime.is_none() && !ends_inactive {
            let next = schedule
                .upcoming_order(now, &state.skipped_dates, "subscription.order_rrule")
                .map_err(|problem| DomainError::Invalid(vec![problem]))?;
            state.next_order_datetime = Some(next);
        }
    }
    if let Some(schedule) = &update.payment_rrule {
        state.payment_rrule = schedule.source().to_string();
        state.payment_rrule_text = schedule.text();
    }
    Ok(())
}

/// The update's addresses: one of the customer's by id, or a new one of theirs.
fn apply_addresses(
    tx: &mut dyn SubscriptionRepositories,
    shop: &Shop,
    state: &mut SubscriptionState,
    update: &SubscriptionUpdate,
    now: Timestamp,
) -> Result<(), DomainError> {
    if let Some(address_id) = update.billing_address_id {
        state.billing_address_id = customer_address(
            tx,
            shop,
            state.customer_id,
            address_id,
            "subscription.billing_address_id",
        )?;
    }
    if let Some(address_id) = update.shipping_address_id {
        state.shipping_address_id = customer_address(
            tx,
            shop,
            state.customer_id,
            address_id,
            "subscription.shipping_address_id",
        )?;
    }
    if let Some(input) = &update.billing_address {
        state.billing_address_id = add_address(tx, shop, state.customer_id, input, None, now)?;
    }
    if let Some(input) = &update.shipping_address {
        state.shipping_address_id = add_address(tx, shop, state.customer_id, input, None, now)?;
    }
    Ok(())
}

/// A status change the update asks for, taken as its action would be (a subscription that
/// comes back gets its next order date moved ahead, a reactivation its retries reset): the
/// action's outcome, with its status log and topics.
fn apply_status(
    shop: &Shop,
    id: SubscriptionId,
    state: &mut SubscriptionState,
    action: Option<Action>,
    update: &SubscriptionUpdate,
    actor: Actor,
    now: Timestamp,
) -> Result<Option<ActionOutcome>, DomainError> {
    let Some(action) = action else {
        return Ok(None);
    };
    let moved = if matches!(action, Action::Resume | Action::Reactivate)
        && update.next_order_datetime.is_none()
    {
        let schedule = schedule_of(shop, state)?;
        let (next, moved) = next_order_on_return(
            &schedule,
            state.next_order_datetime,
            &state.skipped_dates,
            now,
            "subscription.order_rrule",
        )
        .map_err(|problem| DomainError::Invalid(vec![problem]))?;
        state.next_order_datetime = Some(next);
        moved
    } else {
        false
    };
    if action == Action::Reactivate && update.current_retries.is_none() {
        state.current_retries = 0;
    }
    let outcome = take_action(id, state.subscription_status, action, actor, now, moved)?;
    state.subscription_status = outcome.status;
    state.status_changed_at = Some(now);
    if state.subscription_status != SubscriptionStatus::Paused {
        // A pause's date ends with the pause.
        state.resume_on = None;
    }
    Ok(Some(outcome))
}

fn payment_changed(before: &SubscriptionState, after: &SubscriptionState) -> bool {
    after.payment_method_token != before.payment_method_token
        || after.payment_gateway_public_id != before.payment_gateway_public_id
        || after.payment_method_expires_at != before.payment_method_expires_at
}

/// The topics a changed subscription emits, each once, `subscription_updated` last: the status
/// action's, a new rule or order date, a new shipping address, a new payment method.
fn topics_of_update(
    before: &SubscriptionState,
    after: &SubscriptionState,
    status: Option<&ActionOutcome>,
) -> Vec<Topic> {
    let mut emitted: Vec<Topic> = status
        .map(|outcome| outcome.topics.clone())
        .unwrap_or_default();
    if after.order_rrule != before.order_rrule
        || after.next_order_datetime != before.next_order_datetime
    {
        emitted.push(Topic::SubscriptionFrequencyUpdated);
    }
    if after.shipping_address_id != before.shipping_address_id {
        emitted.push(Topic::SubscriptionShippingAddressUpdated);
    }
    if payment_changed(before, after) {
        emitted.extend(topics(Action::ChangePaymentMethod, false));
    }
    let mut ordered: Vec<Topic> = Vec::new();
    for topic in emitted {
        if topic != Topic::SubscriptionUpdated && !ordered.contains(&topic) {
            ordered.push(topic);
        }
    }
    ordered.push(Topic::SubscriptionUpdated);
    ordered
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::access::shop::ShopIdentifier;
    use crate::kernel::ids::{BillingRuleId, GroupId};
    use crate::subscriptions::input::{CustomerUpdate, parse_frequency};
    use crate::subscriptions::repository::SubscriptionDatabase;
    use crate::subscriptions::resources::ActorType;
    use crate::testing::MemoryDatabase;
    use crate::webhooks::{NewWebhookEndpoint, WebhookKind};

    fn at(text: &str) -> Timestamp {
        Timestamp::parse_rfc3339(text).unwrap()
    }

    const NOW: &str = "2024-03-05T12:00:00Z";

    fn shop() -> Shop {
        Shop {
            id: ShopId(1),
            identifier: ShopIdentifier::parse("0123456789abcdef0123456789abcdef").unwrap(),
            shop_domain: "example.myshop.test".into(),
            custom_domain: None,
            platform_type: "custom".into(),
            timezone: "UTC".into(),
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

    fn actor() -> Actor {
        Actor {
            kind: ActorType::Api,
            id: 3,
            name: "demo".into(),
        }
    }

    fn body(key: &str) -> Value {
        json!({
            "customer": {"first_name": "Ada", "last_name": "Lovelace", "email": "ada@example.test"},
            "subscription": {
                "idempotency_key": key,
                "subscription_status": "active",
                "order_rrule": "DTSTART:20240304T090000Z\nRRULE:FREQ=WEEKLY;BYDAY=MO",
                "line_items": [{"platform_product_id": "p-1", "platform_variant_id": "v-1",
                                "quantity": 2, "price": 1250}],
                "shipping_address": {"street1": "1 Analytical Way", "city": "London",
                                     "country_code": "GB"},
                "payment_details": {"gateway_name": "stripe", "gateway_payment_id": "pm_1",
                                    "gateway_customer_id": "cus_secret"}
            }
        })
    }

    /// A database with one webhook subscription per topic; `messages` reads the topics sent.
    fn database() -> MemoryDatabase {
        let db = MemoryDatabase::default();
        db.write_tx(|tx| {
            for topic in crate::subscriptions::topics::webhook_topics() {
                tx.insert_webhook_endpoint(&NewWebhookEndpoint {
                    shop_id: ShopId(1),
                    kind: WebhookKind::Subscription,
                    topic: topic.name.to_string(),
                    callback_url: "http://127.0.0.1:9/hook".into(),
                    secret: None,
                    created_at: at(NOW),
                })?;
            }
            Ok(())
        })
        .unwrap();
        db
    }

    /// The topics enqueued so far, in order.
    fn topics_sent(db: &MemoryDatabase) -> Vec<String> {
        db.with_state(|state| {
            let mut messages: Vec<_> = state.webhook_messages.iter().collect();
            messages.sort_by_key(|message| message.id);
            messages.iter().map(|m| m.topic.clone()).collect()
        })
    }

    fn create(db: &MemoryDatabase, key: &str) -> Result<(Subscription, bool), DomainError> {
        let now = at(NOW);
        let new = NewSubscription::parse(&body(key), &shop(), now)?;
        db.write_tx(|tx| create_subscription(tx, &shop(), new, actor(), now))
    }

    fn act(
        db: &MemoryDatabase,
        id: SubscriptionId,
        request: ActionRequest,
    ) -> Result<Subscription, DomainError> {
        db.write_tx(|tx| take_subscription_action(tx, &shop(), id, request, actor(), at(NOW)))
    }

    #[test]
    fn create_stores_the_subscription_and_emits_its_topics() {
        let db = database();
        let (subscription, created) = create(&db, "k-1").unwrap();
        assert!(created);
        assert_eq!(subscription.subscription_status, SubscriptionStatus::Active);
        assert_eq!(
            subscription.next_order_datetime,
            Some(at("2024-03-11T09:00:00Z"))
        );
        assert_eq!(subscription.line_items[0].full_price, Cents(2500));
        assert_eq!(
            subscription.billing_address_id,
            subscription.shipping_address_id
        );
        assert_eq!(subscription.payment_method_token.as_deref(), Some("pm_1"));
        assert!(
            !serde_json::to_string(&subscription)
                .unwrap()
                .contains("cus_secret")
        );
        let log = subscription.latest_status_log.unwrap();
        assert_eq!((log.reason.as_str(), log.metadata.user.id), ("created", 3));
        assert_eq!(
            topics_sent(&db),
            ["customer_created", "subscription_created"]
        );

        // The same email again: the same customer, no customer_created.
        let (second, _) = create(&db, "k-2").unwrap();
        assert_eq!(second.customer_id, subscription.customer_id);
        assert_eq!(topics_sent(&db).len(), 3);
    }

    #[test]
    fn the_same_key_and_body_answers_the_first_and_another_body_conflicts() {
        let db = database();
        let (first, _) = create(&db, "k-1").unwrap();
        let (again, created) = create(&db, "k-1").unwrap();
        assert!(!created);
        assert_eq!(again.id, first.id);
        assert_eq!(topics_sent(&db).len(), 2, "a repeated create emits nothing");
        let mut other = body("k-1");
        other["subscription"]["line_items"][0]["quantity"] = json!(3);
        let new = NewSubscription::parse(&other, &shop(), at(NOW)).unwrap();
        let error = db
            .write_tx(|tx| create_subscription(tx, &shop(), new, actor(), at(NOW)))
            .unwrap_err();
        assert!(matches!(
            error,
            DomainError::Conflict {
                code: "subscription.idempotency_conflict",
                ..
            }
        ));
    }

    #[test]
    fn every_message_sent_fits_its_topics_schema() {
        let db = database();
        let (s, _) = create(&db, "k-1").unwrap();
        act(&db, s.id, ActionRequest::Pause(PauseRequest::default())).unwrap();
        act(&db, s.id, ActionRequest::Resume).unwrap();
        act(&db, s.id, ActionRequest::Cancel(CancelRequest::default())).unwrap();
        let messages = db.with_state(|state| state.webhook_messages.clone());
        assert!(messages.len() >= 8, "{}", messages.len());
        for message in messages {
            let topic = Topic::parse(&message.topic).unwrap();
            let body: Value = serde_json::from_str(&message.payload).unwrap();
            assert!(!body["data"].is_null(), "{}", message.topic);
            let schema = crate::subscriptions::topics::payload_schema(topic);
            let problems = crate::webhooks::catalogue::violations(&schema, &body);
            assert!(
                problems.is_empty(),
                "{}: {problems:?}\n{body}",
                message.topic
            );
        }
    }

    #[test]
    fn each_action_moves_the_status_and_emits_its_topics_in_order() {
        let db = database();
        let (s, _) = create(&db, "k-1").unwrap();
        let sent_before = topics_sent(&db).len();
        let paused = act(&db, s.id, ActionRequest::Pause(PauseRequest::default())).unwrap();
        assert_eq!(paused.subscription_status, SubscriptionStatus::Paused);
        assert_eq!(paused.latest_status_log.unwrap().reason, "paused");
        let resumed = act(&db, s.id, ActionRequest::Resume).unwrap();
        assert_eq!(resumed.subscription_status, SubscriptionStatus::Active);
        // Skipping the next order moves it a week on.
        let skipped = act(
            &db,
            s.id,
            ActionRequest::Skip {
                order_datetime: at("2024-03-11T00:00:00Z"),
            },
        )
        .unwrap();
        assert_eq!(
            skipped.next_order_datetime,
            Some(at("2024-03-18T09:00:00Z"))
        );
        let line_item_id = s.line_items[0].id;
        let changed = act(
            &db,
            s.id,
            ActionRequest::ChangeQuantity {
                line_item_id,
                quantity: 5,
            },
        )
        .unwrap();
        assert_eq!(changed.line_items[0].quantity, 5);
        let schedule = parse_frequency(
            &json!({"order_rrule": "DTSTART:20240304T090000Z\nRRULE:FREQ=WEEKLY;INTERVAL=2"}),
            &shop(),
        )
        .unwrap();
        let frequency = act(
            &db,
            s.id,
            ActionRequest::ChangeFrequency(Box::new(schedule)),
        )
        .unwrap();
        assert_eq!(frequency.order_rrule_text, "every 2 weeks on Monday");
        let cancelled = act(&db, s.id, ActionRequest::Cancel(CancelRequest::default())).unwrap();
        assert_eq!(cancelled.subscription_status, SubscriptionStatus::Inactive);
        assert_eq!(
            topics_sent(&db)[sent_before..],
            [
                "subscription_paused",
                "subscription_updated",
                "subscription_resumed",
                "subscription_updated",
                "subscription_skipped",
                "subscription_frequency_updated",
                "subscription_updated",
                "subscription_quantity_updated",
                "subscription_updated",
                "subscription_frequency_updated",
                "subscription_updated",
                "subscription_cancelled",
                "subscription_updated",
            ]
        );
    }

    #[test]
    fn a_refused_move_is_422_and_changes_nothing() {
        let db = database();
        let (s, _) = create(&db, "k-1").unwrap();
        let sent = topics_sent(&db).len();
        for request in [ActionRequest::Resume, ActionRequest::Reactivate] {
            match act(&db, s.id, request) {
                Err(DomainError::Unprocessable { code, .. }) => {
                    assert_eq!(code, "subscription.invalid_transition")
                }
                other => panic!("{other:?}"),
            }
        }
        assert_eq!(topics_sent(&db).len(), sent);
        let stored = db
            .read_tx(|tx| get_subscription(tx, &shop(), s.id, false))
            .unwrap();
        assert_eq!(stored.latest_status_log.unwrap().reason, "created");
    }

    #[test]
    fn update_maps_a_status_change_to_its_action_and_sends_each_topic_once() {
        let db = database();
        let (s, _) = create(&db, "k-1").unwrap();
        let sent = topics_sent(&db).len();
        let update = crate::subscriptions::input::parse_subscription_update(
            &json!({"subscription": {
                "subscription_status": "paused",
                "next_order_datetime": "2024-04-01T09:00:00Z",
                "note": "gift"
            }}),
            &shop(),
        )
        .unwrap();
        let updated = db
            .write_tx(|tx| update_subscription(tx, &shop(), s.id, update, actor(), at(NOW)))
            .unwrap();
        assert_eq!(updated.subscription_status, SubscriptionStatus::Paused);
        assert_eq!(updated.note.as_deref(), Some("gift"));
        assert_eq!(
            topics_sent(&db)[sent..],
            [
                "subscription_paused",
                "subscription_frequency_updated",
                "subscription_updated"
            ]
        );
        // Scheduled is refused from paused.
        let refused = crate::subscriptions::input::parse_subscription_update(
            &json!({"subscription": {"subscription_status": "scheduled"}}),
            &shop(),
        )
        .unwrap();
        assert!(
            db.write_tx(|tx| update_subscription(tx, &shop(), s.id, refused, actor(), at(NOW)))
                .is_err()
        );
    }

    #[test]
    fn a_rule_with_no_order_ahead_is_refused_for_a_live_subscription() {
        let db = database();
        let (s, _) = create(&db, "k-1").unwrap();
        let sent = topics_sent(&db).len();
        let ended = "DTSTART:20200101T090000Z\nRRULE:FREQ=DAILY;COUNT=2";
        let schedule = parse_frequency(&json!({ "order_rrule": ended }), &shop()).unwrap();
        let refused = act(
            &db,
            s.id,
            ActionRequest::ChangeFrequency(Box::new(schedule)),
        );
        assert!(
            matches!(refused, Err(DomainError::Invalid(ref p))
                if p[0].field == "order_rrule" && p[0].code == "no_upcoming_order"),
            "{refused:?}"
        );
        let update = crate::subscriptions::input::parse_subscription_update(
            &json!({"subscription": {"order_rrule": ended}}),
            &shop(),
        )
        .unwrap();
        let refused =
            db.write_tx(|tx| update_subscription(tx, &shop(), s.id, update, actor(), at(NOW)));
        assert!(
            matches!(refused, Err(DomainError::Invalid(ref p))
                if p[0].field == "subscription.order_rrule" && p[0].code == "no_upcoming_order"),
            "{refused:?}"
        );
        let unchanged = db
            .read_tx(|tx| get_subscription(tx, &shop(), s.id, false))
            .unwrap();
        assert_eq!(unchanged.order_rrule, s.order_rrule);
        assert_eq!(unchanged.next_order_datetime, s.next_order_datetime);
        assert_eq!(topics_sent(&db).len(), sent, "nothing sent");
        // Ending the subscription in the same update is not refused: it orders no more.
        let cancel = crate::subscriptions::input::parse_subscription_update(
            &json!({"subscription": {"order_rrule": ended, "subscription_status": "inactive"}}),
            &shop(),
        )
        .unwrap();
        let cancelled = db
            .write_tx(|tx| update_subscription(tx, &shop(), s.id, cancel, actor(), at(NOW)))
            .unwrap();
        assert_eq!(cancelled.subscription_status, SubscriptionStatus::Inactive);
        // Nor does it come back with that rule once its next date has gone by: it would be
        // active and never order.
        let later = at("2024-04-01T00:00:00Z");
        let refused = db.write_tx(|tx| {
            take_subscription_action(tx, &shop(), s.id, ActionRequest::Reactivate, actor(), later)
        });
        assert!(
            matches!(refused, Err(DomainError::Invalid(ref p))
                if p[0].field == "order_rrule" && p[0].code == "no_upcoming_order"),
            "{refused:?}"
        );
    }

    fn new_group(
        db: &MemoryDatabase,
        body: Value,
    ) -> crate::subscriptions::groups::SubscriptionGroup {
        use crate::subscriptions::groups::{create_group, parse_group};
        db.write_tx(|tx| create_group(tx, &shop(), parse_group(&body, true)?, at(NOW)))
            .unwrap()
    }

    fn coffee_club(db: &MemoryDatabase) -> crate::subscriptions::groups::SubscriptionGroup {
        new_group(
            db,
            json!({"subscription_group": {"name": "Coffee club", "percent_discount": 15,
                "products": [{"platform_product_id": "p-1"}],
                "billing_rules": [{"interval_number": 2, "interval_type": "week"},
                                  {"interval_number": 1, "interval_type": "month"}]}}),
        )
    }

    /// A Create Subscription body as a TypeScript integration writes it: every id a string,
    /// fields the API does not name, payment details without `gateway_payment_id`, and no
    /// `order_rrule`: the line item's billing rule gives it.
    fn typescript_body(group: GroupId, interval: BillingRuleId) -> Value {
        json!({
            "customer": {"first_name": "Ada", "last_name": "Lovelace", "email": "ts@example.test"},
            "subscription": {
                "idempotency_key": "ts-1",
                "next_order_datetime": "2024-03-11T09:00:00Z",
                "line_items": [{"platform_product_id": "101", "platform_variant_id": "202",
                                "quantity": "2", "price": "1250",
                                "subscription_group_id": group.to_string(),
                                "interval_id": interval.to_string(),
                                "__typename": "LineItem"}],
                "shipping_address": {"street1": "1 Analytical Way", "city": "London",
                                     "country_code": "GB"},
                "payment_details": {"gateway_name": "stripe", "gateway_customer_id": "cus_1"},
                "clientMutationId": "abc"
            }
        })
    }

    #[test]
    fn a_group_and_its_billing_rule_make_the_subscriptions_rule_and_discount() {
        let db = database();
        let group = coffee_club(&db);
        let monthly = group.billing_rules[1].id;
        let (created, _) = db
            .write_tx(|tx| {
                create_subscription_from_body(
                    tx,
                    &shop(),
                    &typescript_body(group.id, monthly),
                    actor(),
                    at(NOW),
                )
            })
            .unwrap();
        assert_eq!(
            created.order_rrule,
            "DTSTART:20240311T090000Z\nRRULE:FREQ=MONTHLY;INTERVAL=1"
        );
        assert_eq!(
            created.next_order_datetime,
            Some(at("2024-03-11T09:00:00Z"))
        );
        assert_eq!(created.percent_discount, 15.0);
        let item = &created.line_items[0];
        assert_eq!(
            (
                item.subscription_group_id,
                item.subscription_group_billing_rules_id,
                item.quantity
            ),
            (Some(group.id), Some(monthly), 2)
        );
        assert_eq!(created.payment_method_token, None);
        // A body's own percent_discount wins over the group's.
        let mut own = typescript_body(group.id, monthly);
        own["subscription"]["idempotency_key"] = json!("ts-2");
        own["subscription"]["percent_discount"] = json!(5);
        let (created, _) = db
            .write_tx(|tx| create_subscription_from_body(tx, &shop(), &own, actor(), at(NOW)))
            .unwrap();
        assert_eq!(created.percent_discount, 5.0);
    }

    #[test]
    fn groups_and_billing_rules_named_must_be_the_shops() {
        let db = database();
        let group = coffee_club(&db);
        let other = new_group(
            &db,
            json!({"name": "Tea", "billing_rules": [{"interval_number": 1, "interval_type": "day"}]}),
        );
        let problems = |body: Value| -> Vec<(String, &'static str)> {
            match db
                .write_tx(|tx| create_subscription_from_body(tx, &shop(), &body, actor(), at(NOW)))
            {
                Err(DomainError::Invalid(problems)) => {
                    problems.into_iter().map(|p| (p.field, p.code)).collect()
                }
                other => panic!("{other:?}"),
            }
        };
        let field = |name: &str| format!("subscription.line_items[0].{name}");
        assert_eq!(
            problems(typescript_body(GroupId(group.id.0 + 100), BillingRuleId(1))),
            [(field("subscription_group_id"), "unknown_group")]
        );
        assert_eq!(
            problems(typescript_body(group.id, other.billing_rules[0].id)),
            [(field("interval_id"), "unknown_billing_rule")]
        );
        let mut no_group = typescript_body(group.id, group.billing_rules[0].id);
        no_group["subscription"]["line_items"][0]
            .as_object_mut()
            .unwrap()
            .remove("subscription_group_id");
        assert_eq!(
            problems(no_group),
            [(field("interval_id"), "invalid_value")]
        );
        // Without an interval_id, a body without order_rrule has no rule.
        let mut no_interval = typescript_body(group.id, BillingRuleId(1));
        no_interval["subscription"]["line_items"][0]
            .as_object_mut()
            .unwrap()
            .remove("interval_id");
        assert_eq!(
            problems(no_interval),
            [("subscription.order_rrule".to_string(), "required")]
        );
    }

    #[test]
    fn groups_are_listed_updated_and_deleted_unless_in_use() {
        use crate::subscriptions::groups::{
            delete_group, get_group, list_groups, parse_group, update_group,
        };
        let db = database();
        let group = coffee_club(&db);
        for name in ["Tea", "Cocoa"] {
            new_group(
                &db,
                json!({"name": name, "billing_rules": [{"interval_number": 1, "interval_type": "day"}]}),
            );
        }
        let (page, pagination) = db.read_tx(|tx| list_groups(tx, &shop(), 2, 2)).unwrap();
        assert_eq!(
            page.iter().map(|g| g.name.as_str()).collect::<Vec<_>>(),
            ["Cocoa"]
        );
        assert_eq!(
            (pagination.total, pagination.total_pages, pagination.count),
            (3, 2, 1)
        );
        // A subscription follows the monthly rule.
        let monthly = group.billing_rules[1].id;
        let mut body = typescript_body(group.id, monthly);
        body["subscription"]["subscription_status"] = json!("active");
        let (subscription, _) = db
            .write_tx(|tx| create_subscription_from_body(tx, &shop(), &body, actor(), at(NOW)))
            .unwrap();
        let update = |body: Value| {
            db.write_tx(|tx| {
                update_group(tx, &shop(), group.id, parse_group(&body, false)?, at(NOW))
            })
        };
        // Dropping the rule it follows is refused; keeping it (by id) and adding one is not.
        let dropped =
            update(json!({"billing_rules": [{"interval_number": 3, "interval_type": "week"}]}));
        assert!(
            matches!(
                dropped,
                Err(DomainError::Conflict {
                    code: "subscription_group.in_use",
                    ..
                })
            ),
            "{dropped:?}"
        );
        let updated = update(json!({"subscription_group": {"name": "Coffee club+",
            "billing_rules": [{"id": monthly, "interval_number": 1, "interval_type": "month",
                               "interval_name": "Monthly"},
                              {"interval_number": 3, "interval_type": "week"}]}}))
        .unwrap();
        assert_eq!(updated.name, "Coffee club+");
        assert_eq!(updated.billing_rules[0].id, monthly);
        assert_eq!(updated.billing_rules[0].interval_name, "Monthly");
        assert_eq!(
            updated.billing_rules[1].billing_rule,
            "FREQ=WEEKLY;INTERVAL=3"
        );
        assert_eq!(updated.percent_discount, 15.0, "fields left out are kept");
        let unknown = update(
            json!({"subscription_group": {"billing_rules": [{"id": 999, "interval_number": 1, "interval_type": "day"}]}}),
        );
        assert!(
            matches!(unknown, Err(DomainError::Invalid(ref p))
                if p[0].field == "subscription_group.billing_rules[0].id"),
            "{unknown:?}"
        );
        // Deleting is refused while the subscription lives, then done once it is cancelled.
        let refused = db.write_tx(|tx| delete_group(tx, &shop(), group.id));
        assert!(
            matches!(
                refused,
                Err(DomainError::Conflict {
                    code: "subscription_group.in_use",
                    ..
                })
            ),
            "{refused:?}"
        );
        act(
            &db,
            subscription.id,
            ActionRequest::Cancel(CancelRequest::default()),
        )
        .unwrap();
        db.write_tx(|tx| delete_group(tx, &shop(), group.id))
            .unwrap();
        assert!(matches!(
            db.read_tx(|tx| get_group(tx, &shop(), group.id)),
            Err(DomainError::NotFound { .. })
        ));
    }

    #[test]
    fn a_customer_update_emits_customer_updated_only_for_shown_fields() {
        let db = database();
        let (s, _) = create(&db, "k-1").unwrap();
        let sent = topics_sent(&db).len();
        let notes = CustomerUpdate {
            notes: Some(Some("likes tea".into())),
            ..CustomerUpdate::default()
        };
        let customer = db
            .write_tx(|tx| {
                crate::subscriptions::customers::update_customer(
                    tx,
                    &shop(),
                    s.customer_id,
                    &notes,
                    at(NOW),
                )
            })
            .unwrap();
        assert_eq!(customer.notes.as_deref(), Some("likes tea"));
        assert_eq!(topics_sent(&db).len(), sent);
        let name = CustomerUpdate {
            last_name: Some(Some("King".into())),
            ..CustomerUpdate::default()
        };
        db.write_tx(|tx| {
            crate::subscriptions::customers::update_customer(
                tx,
                &shop(),
                s.customer_id,
                &name,
                at(NOW),
            )
        })
        .unwrap();
        assert_eq!(topics_sent(&db)[sent..], ["customer_updated"]);
        // No destination: nothing is sent to a connector.
        assert!(db.with_state(|state| state.outbox.is_empty()));
    }

    #[test]
    fn a_walk_keeps_the_total_its_first_page_counted() {
        let db = database();
        for key in ["k-1", "k-2", "k-3"] {
            create(&db, key).unwrap();
        }
        let first_query = ListQuery {
            limit: 1,
            ..ListQuery::default()
        };
        let (_, first) = db
            .read_tx(|tx| list_subscriptions(tx, &shop(), &first_query))
            .unwrap();
        assert_eq!((first.total, first.total_pages), (3, 3));
        create(&db, "k-4").unwrap();
        let next = ListQuery {
            limit: 1,
            cursor: first.next.as_deref().and_then(Cursor::decode),
            ..ListQuery::default()
        };
        assert_eq!(next.cursor.and_then(|cursor| cursor.total), Some(3));
        let (page, second) = db
            .read_tx(|tx| list_subscriptions(tx, &shop(), &next))
            .unwrap();
        assert_eq!(page.len(), 1);
        assert_eq!(second.total, 3, "counted once per walk");
        let (_, fresh) = db
            .read_tx(|tx| list_subscriptions(tx, &shop(), &first_query))
            .unwrap();
        assert_eq!(fresh.total, 4, "a new walk counts again");
    }

    #[test]
    fn line_items_take_the_catalogues_details_discounts_and_shipping_lines() {
        use crate::platform::events::{
            EntityKind, EventAction, EventSource, apply_event, parse_event_body,
        };
        let db = database();
        let product = json!({"data": {"product": {"platform_id": "p-1", "name": "Coffee",
            "platform_updated_at": "2024-01-01T00:00:00Z",
            "images": [{"src": "https://img.test/coffee.png"}],
            "variants": [{"platform_id": "v-1", "name": "Coffee 1kg", "sku": "COF-1KG",
                "price": "12.50", "grams": 1000, "weight": "1", "weight_unit": "kg",
                "require_shipping": true, "tax_exempt": true}]}}});
        let event = parse_event_body(
            ShopId(1),
            EntityKind::Product,
            EventAction::Saved,
            product.to_string().as_bytes(),
            EventSource::Webhook,
            at(NOW),
        )
        .unwrap();
        crate::ports::Database::write(&db, |tx| apply_event(tx, &event, at(NOW))).unwrap();
        let mut body = body("k-1");
        body["subscription"]["line_items"] = json!([
            {"platform_product_id": "p-1", "platform_variant_id": "v-1", "quantity": 2,
             "price": 1250, "title": "ignored: the catalogue has it",
             "discounts": [{"discount_type": "percentage", "percentage_value": "10"},
                           {"discount_type": "fixed_amount", "fixed_value": 100,
                            "description": "loyalty"}]},
            {"platform_product_id": "p-2", "platform_variant_id": "v-2", "quantity": 1,
             "price": "300", "title": "Mug", "sku": "MUG", "grams": "350",
             "requires_shipping": false, "taxable": false}]);
        body["subscription"]["shipping_lines"] =
            json!([{"name": "Standard", "code": "STD", "tag": "ground", "price": "500"}]);
        let new = NewSubscription::parse(&body, &shop(), at(NOW)).unwrap();
        let (made, _) = db
            .write_tx(|tx| create_subscription(tx, &shop(), new, actor(), at(NOW)))
            .unwrap();
        let (coffee, mug) = (&made.line_items[0], &made.line_items[1]);
        assert_eq!(
            (
                coffee.title.as_deref(),
                coffee.product_name.as_deref(),
                coffee.variant_name.as_deref(),
                coffee.sku.as_deref(),
                coffee.image.as_deref(),
            ),
            (
                Some("Coffee 1kg"),
                Some("Coffee"),
                Some("Coffee 1kg"),
                Some("COF-1KG"),
                Some("https://img.test/coffee.png")
            )
        );
        assert_eq!(
            (coffee.grams, coffee.weight, coffee.weight_unit.as_deref()),
            (Some(1000), Some(1.0), Some("kg"))
        );
        assert!(coffee.requires_shipping && !coffee.taxable, "tax exempt");
        // 12.50 less 10 % (1.25) less 1.00.
        assert_eq!(coffee.discounted_price, Cents(1025));
        assert_eq!(
            coffee
                .discounts
                .iter()
                .map(|d| (d.discount_type.as_str(), d.fixed_value.0))
                .collect::<Vec<_>>(),
            [("percentage", 125), ("fixed_amount", 100)]
        );
        // Not in the catalogue: what the body said.
        assert_eq!(
            (mug.title.as_deref(), mug.sku.as_deref(), mug.grams),
            (Some("Mug"), Some("MUG"), Some(350))
        );
        assert!(!mug.requires_shipping && !mug.taxable);
        assert_eq!(made.shipping_lines.len(), 1);
        let line = &made.shipping_lines[0];
        assert_eq!(
            (
                line.subscription_id,
                line.name.as_str(),
                line.code.as_deref(),
                line.price
            ),
            (made.id, "Standard", Some("STD"), Cents(500))
        );
        // The order charges the discounted items and the shipping line.
        let charged = crate::subscriptions::orders::try_charge(&made).unwrap();
        assert_eq!(charged.subtotal, Cents(2 * 1025 + 300));
        assert_eq!(charged.shipping, Cents(500));

        // Update Subscription replaces the shipping lines; [] removes them.
        for (lines, count) in [
            (json!([{"name": "Express", "price": 1500}]), 1),
            (json!([]), 0),
        ] {
            let update = crate::subscriptions::input::parse_subscription_update(
                &json!({"subscription": {"shipping_lines": lines}}),
                &shop(),
            )
            .unwrap();
            let updated = db
                .write_tx(|tx| update_subscription(tx, &shop(), made.id, update, actor(), at(NOW)))
                .unwrap();
            assert_eq!(updated.shipping_lines.len(), count);
        }
        // Problems are 422s on their paths.
        let mut wrong = body.clone();
        wrong["subscription"]["idempotency_key"] = json!("k-2");
        wrong["subscription"]["shipping_lines"] = json!([{"price": -1}]);
        wrong["subscription"]["line_items"][0]["discounts"] =
            json!([{"discount_type": "percentage", "percentage_value": 120}]);
        let Err(DomainError::Invalid(problems)) = NewSubscription::parse(&wrong, &shop(), at(NOW))
        else {
            panic!("expected 422")
        };
        let fields: Vec<&str> = problems.iter().map(|p| p.field.as_str()).collect();
        for field in [
            "subscription.shipping_lines[0].name",
            "subscription.shipping_lines[0].price",
            "subscription.line_items[0].discounts[0].percentage_value",
        ] {
            assert!(fields.contains(&field), "{field}: {fields:?}");
        }
    }

    #[test]
    fn amounts_are_charged_at_the_rate_as_written_and_never_overflow() {
        let db = database();
        let make = |body: &Value| {
            let new = NewSubscription::parse(body, &shop(), at(NOW))?;
            db.write_tx(|tx| create_subscription(tx, &shop(), new, actor(), at(NOW)))
        };
        let mut rated = body("k-rate");
        let sub = &mut rated["subscription"];
        sub["base_currency"] = json!("USD");
        sub["charged_currency"] = json!("CAD");
        sub["base_to_charged_exchange_rate"] = json!("1.005");
        sub["line_items"][0]["price"] = json!(100);
        sub["line_items"][0]["quantity"] = json!(1);
        let (s, _) = make(&rated).unwrap();
        // 100 × 1.005 = 100.5, rounded up: as floats it is 100.49999999999999.
        assert_eq!(s.line_items[0].price_charged, Cents(101));
        // The largest quantity: 10,000 × 100 × 1.005.
        let changed = act(
            &db,
            s.id,
            ActionRequest::ChangeQuantity {
                line_item_id: s.line_items[0].id,
                quantity: 10_000,
            },
        )
        .unwrap();
        assert_eq!(changed.line_items[0].full_price_charged, Cents(1_005_000));

        // Each line at the largest price, quantity and rate fits; 250 of them do not.
        let mut huge = body("k-huge");
        let sub = &mut huge["subscription"];
        sub["base_currency"] = json!("USD");
        sub["charged_currency"] = json!("CAD");
        sub["base_to_charged_exchange_rate"] = json!(1_000_000);
        let line = json!({"platform_product_id": "p-1", "platform_variant_id": "v-1",
                          "quantity": 10_000, "price": 100_000_000});
        sub["line_items"] = json!(vec![line; 250]);
        match make(&huge) {
            Err(DomainError::Invalid(problems)) => {
                assert_eq!(problems[0].field, "subscription.line_items");
                assert_eq!(problems[0].code, "out_of_range");
            }
            other => panic!("expected 422, got {other:?}"),
        }

        // Another charged currency needs its rate, on update too.
        let update = |body: Value| {
            let update =
                crate::subscriptions::input::parse_subscription_update(&body, &shop()).unwrap();
            db.write_tx(|tx| update_subscription(tx, &shop(), s.id, update, actor(), at(NOW)))
        };
        match update(json!({"subscription": {"charged_currency": "EUR"}})) {
            Err(DomainError::Invalid(problems)) => {
                assert_eq!(
                    problems[0].field,
                    "subscription.base_to_charged_exchange_rate"
                );
                assert_eq!(problems[0].code, "required");
            }
            other => panic!("expected 422, got {other:?}"),
        }
        let updated = update(json!({"subscription": {"charged_currency": "EUR",
                                                     "base_to_charged_exchange_rate": 0.9}}))
        .unwrap();
        assert_eq!(updated.charged_currency.as_str(), "EUR");
    }
}
