//! What the portal's pages show, as typed values: the visitor's subscriptions, and one of them
//! with its items at the prices the next order charges, its recent orders, the billing rules it
//! may change to, and for a box the contents of its upcoming orders.
//!
//! A subscription is the visitor's when its customer is the shop's customer with the
//! visitor's platform id. Another customer's subscription, or another shop's, is `NotFound`,
//! exactly as one that does not exist: the portal never says a subscription exists that the
//! visitor may not see.

use crate::access::shop::Shop;
use crate::box_builder::orders::compose_box_order;
use crate::box_builder::repository::TimeSlotFilter;
use crate::box_builder::resources::{BoxSize, Selection, SubscriptionBox, TimeSlot};
use crate::kernel::error::DomainError;
use crate::kernel::ids::{BoxProductId, CustomerId, LineItemId, SubscriptionId};
use crate::kernel::money::Cents;
use crate::kernel::time::Timestamp;
use crate::platform::catalogue;
use crate::portal::branding::{PortalBranding, shop_name};
use crate::portal::repository::PortalRepositories;
use crate::portal::sessions::Visitor;
use crate::subscriptions::cancellation::{CancellationReason, cancellation_reasons};
use crate::subscriptions::groups::BillingRule;
use crate::subscriptions::operations::{charged, customer_subscriptions, get_subscription};
use crate::subscriptions::orders::try_charge;
use crate::subscriptions::recurrence::{OrderSchedule, ShopZone};
use crate::subscriptions::repository::SubscriptionOrder;
use crate::subscriptions::resources::{Subscription, SubscriptionLineItem, SubscriptionStatus};
use crate::subscriptions::states::{Action, transition};

/// The most subscriptions the list shows.
const MAX_LISTED: i64 = 250;
/// How many of a subscription's latest order attempts its page shows.
const RECENT_ORDERS: usize = 10;
/// How many upcoming orders of a box its page shows.
const UPCOMING_BOXES: usize = 3;

/// The shop a page is for: its name and branding, and its time zone for dates.
#[derive(Debug, Clone)]
pub struct PortalShop {
    /// The shop.
    pub shop: Shop,
    /// Its name on the pages ([`shop_name`]).
    pub name: String,
    /// Its accent colour and logo.
    pub branding: PortalBranding,
}

/// The customer a page greets.
#[derive(Debug, Clone)]
pub struct PortalCustomer {
    /// The customer's id, when Mercer knows the platform's customer.
    pub id: Option<CustomerId>,
    /// The customer's id on the shop's platform.
    pub platform_id: String,
    /// Their first name, when known.
    pub first_name: Option<String>,
}

/// The list of the visitor's subscriptions.
#[derive(Debug, Clone)]
pub struct Overview {
    /// The shop.
    pub shop: PortalShop,
    /// The visitor.
    pub customer: PortalCustomer,
    /// Their subscriptions, by id, each with what its next order charges.
    pub subscriptions: Vec<SubscriptionCard>,
}

/// A subscription in the list.
#[derive(Debug, Clone)]
pub struct SubscriptionCard {
    /// The subscription.
    pub subscription: Subscription,
    /// What its next order charges, in its charged currency (None if it cannot be worked out).
    pub total: Option<Cents>,
}

/// One line item at the price its next order charges (the charged currency).
#[derive(Debug, Clone)]
pub struct LineShown {
    /// The line item.
    pub item: SubscriptionLineItem,
    /// The unit price after the line item's discounts.
    pub unit: Cents,
    /// The unit price before them (the same when there are none).
    pub list_unit: Cents,
    /// What the line comes to.
    pub total: Cents,
}

/// What the subscription's next order charges, in its charged currency.
#[derive(Debug, Clone)]
pub struct OrderAmounts {
    /// The line items.
    pub lines: Vec<LineShown>,
    /// The lines' sum.
    pub subtotal: Cents,
    /// The subscription's percent discount of the subtotal.
    pub discount: Cents,
    /// The shipping lines' sum.
    pub shipping: Cents,
    /// What the order charges.
    pub total: Cents,
}

/// A billing rule the subscription may change to.
#[derive(Debug, Clone)]
pub struct IntervalChoice {
    /// The group's rule.
    pub rule: BillingRule,
    /// Whether the subscription follows it now.
    pub current: bool,
}

/// One product that goes in a box.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BoxContent {
    /// What it is.
    pub title: String,
    /// How many.
    pub quantity: i64,
}

/// A product the customer may choose for a box.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BoxOption {
    /// The box product.
    pub box_product_id: BoxProductId,
    /// Its name.
    pub name: String,
    /// Its unit price in the charged currency, when on sale.
    pub price: Option<Cents>,
    /// How many the customer's selection holds (0 without a selection).
    pub chosen: i64,
}

/// An upcoming order of a box line item: what it will hold, and what the customer may choose.
#[derive(Debug, Clone)]
pub struct UpcomingBox {
    /// The box's line item.
    pub line_item_id: LineItemId,
    /// The box.
    pub the_box: SubscriptionBox,
    /// The order's date.
    pub order_datetime: Timestamp,
    /// The time slot holding the date (the selection's, when there is one).
    pub slot: Option<TimeSlot>,
    /// Whether the customer may choose now: the slot is shown and its deadline not passed.
    pub open: bool,
    /// The box's sizes, with their minimum and maximum.
    pub sizes: Vec<BoxSize>,
    /// The customer's selection for the order, if they made one.
    pub selection: Option<Selection>,
    /// What the order will hold: the selection, or the merchant's pick.
    pub contents: Vec<BoxContent>,
    /// The products of the slot, with the selection's quantities.
    pub options: Vec<BoxOption>,
}

/// One subscription's page.
#[derive(Debug, Clone)]
pub struct SubscriptionView {
    /// The shop.
    pub shop: PortalShop,
    /// The visitor.
    pub customer: PortalCustomer,
    /// The subscription.
    pub subscription: Subscription,
    /// What its next order charges; None if it cannot be worked out.
    pub amounts: Option<OrderAmounts>,
    /// Its latest order attempts, newest first.
    pub orders: Vec<SubscriptionOrder>,
    /// The billing rules of its groups.
    pub intervals: Vec<IntervalChoice>,
    /// Its box line items' upcoming orders.
    pub boxes: Vec<UpcomingBox>,
    /// The shop's reasons a subscription may be cancelled for (none: no reason is asked).
    pub reasons: Vec<CancellationReason>,
    /// What its status lets the visitor do now.
    pub allowed: Allowed,
}

/// The actions a subscription's status allows, by the same state machine as the API's.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Allowed {
    /// Skip the next order (there is one, and the status allows it).
    pub skip: bool,
    /// Pause.
    pub pause: bool,
    /// Resume.
    pub resume: bool,
    /// Cancel.
    pub cancel: bool,
    /// Change quantities, frequency, address and box contents.
    pub change: bool,
}

impl Allowed {
    fn of(subscription: &Subscription) -> Allowed {
        let from = subscription.subscription_status;
        let can = |action| transition(from, action).is_ok();
        Allowed {
            skip: can(Action::Skip) && subscription.next_order_datetime.is_some(),
            pause: can(Action::Pause),
            resume: can(Action::Resume),
            cancel: can(Action::Cancel),
            change: can(Action::ChangeQuantity),
        }
    }
}

/// The shop as its pages show it.
pub fn portal_shop(
    tx: &mut dyn PortalRepositories,
    shop: &Shop,
) -> Result<PortalShop, DomainError> {
    Ok(PortalShop {
        shop: shop.clone(),
        name: shop_name(shop).to_string(),
        branding: tx.portal_branding(shop.id)?,
    })
}

/// The visitor as Mercer knows them: the shop's live customer with their platform id, if any.
fn customer_of(
    tx: &mut dyn PortalRepositories,
    visitor: &Visitor,
) -> Result<PortalCustomer, DomainError> {
    let found = tx
        .directory_customer_by_platform_id(visitor.shop.id, &visitor.platform_customer_id)?
        .filter(|customer| customer.deleted_at.is_none());
    Ok(PortalCustomer {
        id: found.as_ref().map(|customer| customer.id),
        platform_id: visitor.platform_customer_id.clone(),
        first_name: found
            .and_then(|customer| customer.first_name)
            .map(|name| name.trim().to_string())
            .filter(|name| !name.is_empty()),
    })
}

/// The visitor's subscription `id`, with the visitor; `NotFound` for another customer's, as
/// for none.
pub(crate) fn owned(
    tx: &mut dyn PortalRepositories,
    visitor: &Visitor,
    id: SubscriptionId,
) -> Result<(PortalCustomer, Subscription), DomainError> {
    let customer = customer_of(tx, visitor)?;
    let not_found = || DomainError::not_found("subscription");
    let customer_id = customer.id.ok_or_else(not_found)?;
    let subscription = match get_subscription(tx, &visitor.shop, id, false) {
        Err(DomainError::NotFound { .. }) => return Err(not_found()),
        other => other?,
    };
    if subscription.customer_id != customer_id {
        return Err(not_found());
    }
    Ok((customer, subscription))
}

/// The visitor's subscriptions, by id.
pub fn overview(
    tx: &mut dyn PortalRepositories,
    visitor: &Visitor,
) -> Result<Overview, DomainError> {
    let shop = portal_shop(tx, &visitor.shop)?;
    let customer = customer_of(tx, visitor)?;
    let subscriptions = match customer.id {
        Some(id) => match customer_subscriptions(tx, &visitor.shop, id, MAX_LISTED, 1) {
            Ok((list, _)) => list,
            Err(DomainError::NotFound { .. }) => Vec::new(),
            Err(error) => return Err(error),
        },
        None => Vec::new(),
    };
    Ok(Overview {
        shop,
        customer,
        subscriptions: subscriptions
            .into_iter()
            .map(|subscription| SubscriptionCard {
                total: try_charge(&subscription).map(|charge| charge.total),
                subscription,
            })
            .collect(),
    })
}

/// The visitor's subscription `id` with everything its page shows; `NotFound` for another
/// customer's.
pub fn subscription_page(
    tx: &mut dyn PortalRepositories,
    visitor: &Visitor,
    id: SubscriptionId,
    now: Timestamp,
) -> Result<SubscriptionView, DomainError> {
    let (customer, subscription) = owned(tx, visitor, id)?;
    let shop = portal_shop(tx, &visitor.shop)?;
    let orders = tx.orders_of_subscriptions(&[id], RECENT_ORDERS)?;
    let intervals = intervals(tx, &visitor.shop, &subscription)?;
    let boxes = upcoming_boxes(tx, visitor, &subscription, now)?;
    let reasons = cancellation_reasons(tx, &visitor.shop)?.cancellation_reasons;
    Ok(SubscriptionView {
        amounts: amounts(&subscription),
        allowed: Allowed::of(&subscription),
        shop,
        customer,
        subscription,
        orders,
        intervals,
        boxes,
        reasons,
    })
}

fn amounts(subscription: &Subscription) -> Option<OrderAmounts> {
    let charge = try_charge(subscription)?;
    let lines = subscription
        .line_items
        .iter()
        .zip(&charge.lines)
        .map(|(item, line)| LineShown {
            item: item.clone(),
            unit: line.unit,
            list_unit: line.list_unit,
            total: line.total,
        })
        .collect();
    Some(OrderAmounts {
        lines,
        subtotal: charge.subtotal,
        discount: charge.discount,
        shipping: charge.shipping,
        total: charge.total,
    })
}

/// The billing rules of the groups the subscription's line items are sold under, in the
/// groups' order; the one whose rule the subscription follows now is `current`.
pub(crate) fn intervals(
    tx: &mut dyn PortalRepositories,
    shop: &Shop,
    subscription: &Subscription,
) -> Result<Vec<IntervalChoice>, DomainError> {
    let mut groups = Vec::new();
    for item in &subscription.line_items {
        if let Some(group) = item.subscription_group_id
            && !groups.contains(&group)
        {
            groups.push(group);
        }
    }
    let followed = subscription
        .order_rrule
        .lines()
        .find_map(|line| line.trim().strip_prefix("RRULE:"))
        .map(str::trim)
        .unwrap_or_default()
        .to_string();
    let mut choices = Vec::new();
    for group in groups {
        let Some(stored) = tx.subscription_group(shop.id, group)? else {
            continue;
        };
        for rule in stored.billing_rules {
            choices.push(IntervalChoice {
                current: rule.billing_rule.eq_ignore_ascii_case(&followed),
                rule,
            });
        }
    }
    Ok(choices)
}

/// The next order dates of a subscription that orders, from its `next_order_datetime` on.
fn next_order_dates(
    tx: &mut dyn PortalRepositories,
    shop: &Shop,
    subscription: &Subscription,
    count: usize,
) -> Result<Vec<Timestamp>, DomainError> {
    let Some(first) = subscription.next_order_datetime else {
        return Ok(Vec::new());
    };
    // A paused or cancelled subscription has no order coming.
    if matches!(
        subscription.subscription_status,
        SubscriptionStatus::Inactive | SubscriptionStatus::Paused
    ) {
        return Ok(Vec::new());
    }
    let skipped = tx
        .subscription(shop.id, subscription.id)?
        .map(|stored| stored.state.skipped_dates)
        .unwrap_or_default();
    let Ok(schedule) = OrderSchedule::parse(
        &subscription.order_rrule,
        ShopZone::of_shop(&shop.timezone),
        "order_rrule",
    ) else {
        return Ok(vec![first]);
    };
    let mut dates = vec![first];
    while dates.len() < count {
        let Some(last) = dates.last().copied() else {
            break;
        };
        match schedule.next_after(last, &skipped) {
            Some(next) => dates.push(next),
            None => break,
        }
    }
    Ok(dates)
}

/// The upcoming orders of the subscription's box line items.
fn upcoming_boxes(
    tx: &mut dyn PortalRepositories,
    visitor: &Visitor,
    subscription: &Subscription,
    now: Timestamp,
) -> Result<Vec<UpcomingBox>, DomainError> {
    let shop = &visitor.shop;
    let mut box_items = Vec::new();
    for item in &subscription.line_items {
        let Some(group) = item.subscription_group_id else {
            continue;
        };
        let the_box = match tx.box_of_group(shop.id, group)? {
            Some(id) => tx.subscription_box(shop.id, id)?,
            None => None,
        };
        if let Some(the_box) = the_box {
            box_items.push((item.id, the_box));
        }
    }
    if box_items.is_empty() {
        return Ok(Vec::new());
    }
    let dates = next_order_dates(tx, shop, subscription, UPCOMING_BOXES)?;
    let mut boxes = Vec::new();
    for at in dates {
        let composed = compose_box_order(tx, shop, subscription, at).ok().flatten();
        for (line_item_id, the_box) in &box_items {
            let contents = composed
                .iter()
                .flat_map(|order| &order.line_items)
                .filter(|line| {
                    line.id == *line_item_id
                        && line
                            .line_item_attributes
                            .iter()
                            .any(|attribute| attribute.name == "box_product_id")
                })
                .map(|line| BoxContent {
                    title: line
                        .variant_name
                        .clone()
                        .or_else(|| line.product_name.clone())
                        .unwrap_or_else(|| line.platform_variant_id.clone()),
                    quantity: line.quantity,
                })
                .collect();
            boxes.push(upcoming_box(
                tx,
                shop,
                subscription,
                *line_item_id,
                the_box.clone(),
                at,
                contents,
                now,
            )?);
        }
    }
    Ok(boxes)
}

/// One box line item's order of `at`: its slot, sizes, selection and the slot's products.
#[allow(clippy::too_many_arguments)]
fn upcoming_box(
    tx: &mut dyn PortalRepositories,
    shop: &Shop,
    subscription: &Subscription,
    line_item_id: LineItemId,
    the_box: SubscriptionBox,
    at: Timestamp,
    contents: Vec<BoxContent>,
    now: Timestamp,
) -> Result<UpcomingBox, DomainError> {
    let selection = tx
        .selection_of_date(shop.id, line_item_id, at)?
        .map(|stored| stored.selection);
    let slot = match &selection {
        Some(selection) => tx.time_slot(shop.id, selection.time_slot_id)?,
        None => {
            let holding = TimeSlotFilter {
                holding: Some(at),
                visible_at: None,
            };
            tx.time_slots(shop.id, the_box.id, holding, 1, 1)?
                .0
                .into_iter()
                .next()
        }
    };
    let (sizes, _) = tx.box_sizes(shop.id, the_box.id, 100, 1)?;
    let open = slot
        .as_ref()
        .is_some_and(|slot| slot.visibility_date <= now && now <= slot.selection_deadline_date);
    let options = match &slot {
        Some(slot) => box_options(tx, shop, subscription, slot, selection.as_ref())?,
        None => Vec::new(),
    };
    Ok(UpcomingBox {
        line_item_id,
        the_box,
        order_datetime: at,
        slot,
        open,
        sizes,
        selection,
        contents,
        options,
    })
}

/// The slot's products, named and priced from the catalogue, with the selection's quantities.
fn box_options(
    tx: &mut dyn PortalRepositories,
    shop: &Shop,
    subscription: &Subscription,
    slot: &TimeSlot,
    selection: Option<&Selection>,
) -> Result<Vec<BoxOption>, DomainError> {
    let ids: Vec<&str> = slot
        .box_products
        .iter()
        .map(|product| product.platform_variant_id.as_str())
        .collect();
    let found = catalogue::variants(tx, shop.id, &ids)?;
    Ok(slot
        .box_products
        .iter()
        .map(|product| {
            let variant = found.get(&product.platform_variant_id).filter(|found| {
                found.product.platform_id.as_ref().map(|id| id.as_str())
                    == Some(product.platform_product_id.as_str())
            });
            let name = variant
                .and_then(|v| v.variant.name.clone().or_else(|| v.product.name.clone()))
                .unwrap_or_else(|| product.platform_variant_id.clone());
            let price = variant
                .and_then(|v| v.variant.price.as_ref())
                .and_then(|price| Cents::from_decimal(price.as_str(), &subscription.base_currency))
                .and_then(|price| charged(price, subscription.base_to_charged_exchange_rate).ok());
            let chosen = selection
                .into_iter()
                .flat_map(|selection| &selection.line_items)
                .filter(|item| item.box_product_id == product.id)
                .map(|item| item.choice_quantity)
                .sum();
            BoxOption {
                box_product_id: product.id,
                name,
                price,
                chosen,
            }
        })
        .collect())
}
