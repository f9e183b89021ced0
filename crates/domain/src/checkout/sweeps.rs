//! What happens to a checkout after the storefront: `order/abandoned` for checkouts left
//! untouched (a recurring job), `order/fulfilled` when the platform says its order is fulfilled
//! (the platform's [`OrderFulfilledJob`], enqueued by the Order Saved event that fulfils it).

use crate::kernel::ids::ShopId;
use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use crate::access::shop::Shop;
use crate::checkout::payloads;
use crate::checkout::repository::{CheckoutDatabase, CheckoutStatus};
use crate::checkout::shown::{EmptyList, ItemReference};
use crate::kernel::activity::{Activity, record_one};
use crate::kernel::error::DomainError;
use crate::kernel::jobs::{JobControl, JobPayload};
use crate::kernel::money::Cents;
use crate::kernel::time::Timestamp;
use crate::platform::events::{EntityDocument, EntityKind, OrderFulfilledJob};
use crate::platform::resources::Order;

/// The recurring sweep of abandoned checkouts: one, under a fixed key, enqueued at every
/// start of `mercer serve`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AbandonmentJob {}

impl JobPayload for AbandonmentJob {
    const KIND: &'static str = "checkout.abandonment";

    fn unique_key(&self) -> Option<String> {
        Some(Self::KIND.to_string())
    }
}

/// A checkout untouched this long is abandoned (an hour by default).
pub const DEFAULT_ABANDONMENT_DELAY_SECONDS: i64 = 60 * 60;
/// How often the sweep runs (five minutes by default).
pub const DEFAULT_ABANDONMENT_INTERVAL_SECONDS: i64 = 5 * 60;
/// Checkouts reported in one transaction.
const ABANDONMENT_BATCH: usize = 100;

/// Emits `order/abandoned` once for each open checkout with items and an email untouched for
/// `delay_seconds`, of shops whose built-in abandoned-cart emails are off. Returns how many.
pub fn sweep_abandoned<D: CheckoutDatabase>(
    db: &D,
    now: Timestamp,
    delay_seconds: i64,
    control: &dyn JobControl,
) -> Result<usize, DomainError> {
    let idle_since = now.plus_seconds(-delay_seconds);
    let mut reported = 0;
    loop {
        if control.should_stop() {
            return Ok(reported);
        }
        let (found, sent) = db.write_tx(|tx| {
            let orders = tx.abandoned_checkout_orders(idle_since, ABANDONMENT_BATCH)?;
            let mut shops: HashMap<ShopId, Option<Shop>> = HashMap::new();
            let mut sent = 0;
            for mut order in orders.iter().cloned() {
                let shop = match shops.get(&order.shop_id) {
                    Some(shop) => shop.clone(),
                    None => {
                        let shop = tx.shop_by_id(order.shop_id)?;
                        shops.insert(order.shop_id, shop.clone());
                        shop
                    }
                };
                let Some(shop) = shop else {
                    continue;
                };
                order.abandoned_at = Some(now);
                // Changed at the storefront meanwhile: not abandoned after all.
                if !tx.save_checkout_order(&order)? {
                    continue;
                }
                payloads::emit_abandoned(tx, &shop, &order, now)?;
                record_one(tx, shop.id, Activity::CheckoutsAbandoned, now, 1)?;
                sent += 1;
            }
            Ok((orders.len(), sent))
        })?;
        reported += sent;
        if found < ABANDONMENT_BATCH {
            return Ok(reported);
        }
    }
}

/// `fulfillment_data` of order/fulfilled: the checkout's amounts in cents, what
/// was fulfilled, and the platform order's tracking when its custom attributes carry it
/// (`tracking_company`, `tracking_number`, `tracking_url`). A checkout has no fees.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[schema(as = CheckoutFulfillment)]
pub(crate) struct Fulfillment {
    /// The order's total, in cents.
    #[schema(value_type = i64)]
    pub total_value: Cents,
    /// Its shipping, in cents.
    #[schema(value_type = i64)]
    pub total_shipping_value: Cents,
    /// Its discounts, in cents.
    #[schema(value_type = i64)]
    pub total_discount: Cents,
    /// Always 0: a checkout has no fees.
    #[schema(value_type = i64)]
    pub total_fees: Cents,
    /// Always 0: a checkout has no fees.
    #[schema(value_type = i64)]
    pub total_order_fees: Cents,
    /// Its taxes, in cents.
    #[schema(value_type = i64)]
    pub total_tax: Cents,
    /// The fulfilling location.
    pub location_id: i64,
    /// How many units were fulfilled.
    pub item_count: i64,
    /// The shipping line that shipped it.
    pub shipping_details: Vec<ShippingDetail>,
    /// The fulfilled line items.
    pub fulfilled_items: Vec<ItemReference>,
    /// Always `[]`.
    pub order_fees: EmptyList,
    /// The carrier; empty when the platform order does not say.
    pub tracking_company: String,
    /// The tracking number; empty when the platform order does not say.
    pub tracking_number: String,
    /// The tracking URL; empty when the platform order does not say.
    pub tracking_url: String,
    /// `YYYY-MM-DD HH:MM:SS`, as the payload writes it.
    pub fulfilled_at: String,
}

/// The shipping line that shipped a fulfilled order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[schema(as = CheckoutShippingDetail)]
pub(crate) struct ShippingDetail {
    /// The shipping rate's id.
    pub id: String,
    /// The shipping rate's description.
    pub description: String,
    /// Its price, in cents.
    #[schema(value_type = i64)]
    pub amount: Cents,
}

pub(crate) fn fulfillment_data(
    order: &crate::checkout::repository::CheckoutOrder,
    platform_order: Option<&Order>,
    now: Timestamp,
) -> Fulfillment {
    let document = &order.document;
    let amounts = document.amounts();
    let tracking = |name: &str| {
        platform_order
            .and_then(|o| o.custom_attributes.as_ref())
            .and_then(|attributes| attributes.get(name))
            .map(|attribute| attribute.value.clone())
            .unwrap_or_default()
    };
    Fulfillment {
        total_value: amounts.total,
        total_shipping_value: amounts.shipping,
        total_discount: amounts.discounts,
        total_fees: Cents::ZERO,
        total_order_fees: Cents::ZERO,
        total_tax: amounts.taxes,
        location_id: 0,
        item_count: document
            .line_items
            .iter()
            .fold(0i64, |count, item| count.saturating_add(item.quantity)),
        shipping_details: document
            .selected_shipping
            .iter()
            .map(|line| ShippingDetail {
                id: line.id.clone(),
                description: line.description.clone(),
                amount: line.amount,
            })
            .collect(),
        fulfilled_items: document.line_items.iter().map(ItemReference::of).collect(),
        order_fees: EmptyList,
        tracking_company: tracking("tracking_company"),
        tracking_number: tracking("tracking_number"),
        tracking_url: tracking("tracking_url"),
        fulfilled_at: now.to_date_time_seconds(),
    }
}

/// What became of a platform order's fulfilment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fulfilment {
    /// `order/fulfilled` was sent.
    Sent,
    /// Not a checkout's order, or reported already: nothing to do.
    Nothing,
    /// The checkout's push is not over (`order/created` not sent yet): try again later, so the
    /// topics come in their order.
    NotYet,
}

/// The platform fulfilled an order: `order/fulfilled`, once, when it is a checkout's.
pub fn order_fulfilled<D: CheckoutDatabase>(
    db: &D,
    job: &OrderFulfilledJob,
    now: Timestamp,
) -> Result<Fulfilment, DomainError> {
    // Most fulfilled orders are no checkout's (every one a sync brings): a read tells.
    let found = db.read_tx(|tx| {
        Ok(tx.checkout_order_of_platform_order(job.shop_id, &job.platform_order_id)?)
    })?;
    match found {
        None => return Ok(Fulfilment::Nothing),
        Some(order) if order.fulfilled_at.is_some() => return Ok(Fulfilment::Nothing),
        Some(order) if order.status == CheckoutStatus::Processed => return Ok(Fulfilment::NotYet),
        Some(_) => {}
    }
    db.write_tx(|tx| {
        let Some(mut order) =
            tx.checkout_order_of_platform_order(job.shop_id, &job.platform_order_id)?
        else {
            return Ok(Fulfilment::Nothing);
        };
        if order.fulfilled_at.is_some() {
            return Ok(Fulfilment::Nothing);
        }
        let Some(shop) = tx.shop_by_id(job.shop_id)? else {
            return Ok(Fulfilment::Nothing);
        };
        let platform_order = tx
            .platform_entity(job.shop_id, EntityKind::Order, &job.platform_order_id)?
            .and_then(|record| record.document)
            .and_then(|json| EntityDocument::parse(EntityKind::Order, &json).ok())
            .and_then(|document| match document {
                EntityDocument::Order(order) => Some(*order),
                _ => None,
            });
        order.fulfilled_at = Some(now);
        order.updated_at = now;
        if !tx.save_checkout_order(&order)? {
            return Ok(Fulfilment::NotYet);
        }
        let data = fulfillment_data(&order, platform_order.as_ref(), now);
        payloads::emit_fulfilled(tx, &shop, &order, data, now)?;
        Ok(Fulfilment::Sent)
    })
}
