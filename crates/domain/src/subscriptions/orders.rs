//! A subscription's order as the connector receives it (the connector's Create Order and
//! Create Payment bodies), and what an order does to the subscription's prepaid
//! line items. Pure rules; the scheduler (`scheduler`) places the order.
//!
//! Amounts are in the charged currency: each line item charges its `discounted_price_charged`
//! times its quantity, the subscription's `percent_discount` comes off the items' subtotal, and
//! the shipping lines' `value_charged` are added. A prepaid line item (docs/scheduler.md) charges
//! its whole period (`prepaid_duration` orders) on the order that starts a period and nothing on
//! the others.

use serde::Serialize;

use crate::kernel::ids::{LineItemId, SubscriptionId};
use crate::kernel::time::Timestamp;
use crate::platform::placement::with_payment_key;
use crate::platform::resources::{
    CustomAttribute, CustomAttributes, Decimal, LineItem, Order, OrderAddress, Payment, PlatformId,
};
use crate::subscriptions::resources::{
    Cents, CurrencyCode, PrepaidMetadata, Subscription, SubscriptionAddress, SubscriptionLineItem,
};

/// Create Order's `Idempotency-Key` for the order of `scheduled_at`: the subscription's id and
/// the order date, the same for every attempt of that date.
pub fn idempotency_key(subscription_id: SubscriptionId, scheduled_at: Timestamp) -> String {
    format!("{subscription_id}:{}", scheduled_at.to_rfc3339())
}

/// Mercer's key of the payment of one attempt: a retry pays anew (the payment before was
/// declined or never made); a resumed attempt finds its own payment by it.
pub(crate) fn payment_key(idempotency_key: &str, attempt: i64) -> String {
    format!("{}{attempt}", payment_keys_of_date(idempotency_key))
}

/// What the payment keys of every attempt of one order date begin with.
pub(crate) fn payment_keys_of_date(idempotency_key: &str) -> String {
    format!("{idempotency_key}#")
}

/// What one line item charges on this order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LineCharge {
    /// The line item's id.
    pub line_item_id: LineItemId,
    /// The unit price charged (0 inside a prepaid period).
    pub unit: Cents,
    /// How many units' worth: the quantity, times the period's orders when a prepaid period
    /// starts.
    pub units: i64,
    pub total: Cents,
    /// The unit price before the line item's discounts, when this order charges it (else the
    /// unit charged), and what the units come to at it: what the platform is told the line
    /// comes to before its discounts.
    pub list_unit: Cents,
    pub list_total: Cents,
}

/// The amounts of one order, in the charged currency.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct OrderCharge {
    pub lines: Vec<LineCharge>,
    pub subtotal: Cents,
    pub discount: Cents,
    pub shipping: Cents,
    pub total: Cents,
}

/// Whether this order starts a new prepaid period of the item: nothing prepaid yet, or the
/// period's orders all placed.
fn starts_prepaid_period(prepaid: &PrepaidMetadata) -> bool {
    prepaid.current_recurrence_count <= 0
        || prepaid.current_recurrence_count >= prepaid.prepaid_duration
}

/// The order's amounts: line items, the percent discount off their subtotal (rounded half away
/// from zero, never more than the subtotal), and shipping. `None` when an amount overflows: an
/// order is never charged an amount cut down to what fits. Create and Update Subscription and a
/// change of quantity refuse (422) a subscription whose order this refuses; only a box's
/// contents, known when the order is placed, can still make one too large.
pub(crate) fn try_charge(subscription: &Subscription) -> Option<OrderCharge> {
    let mut lines = Vec::with_capacity(subscription.line_items.len());
    for item in &subscription.line_items {
        let (unit, units) = match &item.prepaid_metadata {
            Some(prepaid) if starts_prepaid_period(prepaid) => (
                item.discounted_price_charged,
                item.quantity.checked_mul(prepaid.prepaid_duration.max(1))?,
            ),
            Some(_) => (Cents::ZERO, item.quantity),
            None => (item.discounted_price_charged, item.quantity),
        };
        let list_unit = if unit == item.discounted_price_charged {
            item.price_charged.max(unit)
        } else {
            unit
        };
        lines.push(LineCharge {
            line_item_id: item.id,
            unit,
            units,
            total: unit.times(units)?,
            list_unit,
            list_total: list_unit.times(units)?,
        });
    }
    let subtotal = Cents::checked_sum(lines.iter().map(|line| line.total))?;
    let shipping = Cents::checked_sum(subscription.shipping_lines.iter().map(|l| l.value_charged))?;
    let discount = percent_discount(subtotal, subscription.percent_discount);
    let total = subtotal.checked_sub(discount)?.checked_add(shipping)?;
    Some(OrderCharge {
        lines,
        subtotal,
        discount,
        shipping,
        total,
    })
}

/// The subscription's percent discount of `subtotal`: exact on the percentage as written,
/// rounded half away from zero, within 0 and the subtotal (a percentage outside 0..100 or not
/// a number takes nothing, or everything).
pub(crate) fn percent_discount(subtotal: Cents, percent: f64) -> Cents {
    let percent = if percent.is_finite() {
        percent.clamp(0.0, 100.0)
    } else {
        0.0
    };
    subtotal
        .percent(percent)
        .unwrap_or(Cents::ZERO)
        .clamp(Cents::ZERO, subtotal.max(Cents::ZERO))
}

fn order_address(address: &SubscriptionAddress, kind: &str, email: Option<&str>) -> OrderAddress {
    OrderAddress {
        address_type: Some(kind.to_string()),
        first_name: address.first_name.clone(),
        last_name: address.last_name.clone(),
        street_1: address.street1.clone(),
        street_2: address.street2.clone(),
        city: address.city.clone(),
        province: address.province.clone(),
        country: address.country.clone(),
        country_code: address.country_code.clone(),
        phone: address.phone.clone(),
        postal_code: address.zip.clone(),
        email: email.map(str::to_string),
        province_code: address.province_code.clone(),
        company: address.company.clone(),
        ..OrderAddress::default()
    }
}

fn order_line(item: &SubscriptionLineItem, line: &LineCharge, currency: &CurrencyCode) -> LineItem {
    let mut attributes: CustomAttributes = item
        .line_item_attributes
        .iter()
        .map(|a| {
            (
                a.name.clone(),
                CustomAttribute::new("line item attribute", a.value.clone()),
            )
        })
        .collect();
    attributes.insert(
        "subscription_line_item_id".to_string(),
        CustomAttribute::new("Mercer's subscription line item", item.id.to_string()),
    );
    if let Some(prepaid) = &item.prepaid_metadata {
        attributes.insert(
            "prepaid_period_starts".to_string(),
            CustomAttribute::new(
                "whether this order starts a prepaid period (and pays for it)",
                starts_prepaid_period(prepaid).to_string(),
            ),
        );
    }
    LineItem {
        platform_product_id: Some(PlatformId::new(item.platform_product_id.clone())),
        platform_variant_id: Some(PlatformId::new(item.platform_variant_id.clone())),
        title: item.title.clone().or_else(|| item.product_name.clone()),
        sku: item.sku.clone(),
        image: item.image.clone(),
        custom_attributes: Some(attributes),
        quantity: Some(item.quantity),
        grams: item.grams.map(|grams| grams as f64),
        weight: item.weight,
        weight_unit: item.weight_unit.clone(),
        taxable: Some(item.taxable),
        requires_shipping: Some(item.requires_shipping),
        price_per_item: Decimal::of_cents(line.list_unit, currency),
        // The list price is at least the unit charged, both at least 0: no overflow.
        discount_per_item: Decimal::of_cents(Cents(line.list_unit.0 - line.unit.0), currency),
        subtotal: Decimal::of_cents(line.list_total, currency),
        discounted_subtotal: Decimal::of_cents(line.total, currency),
        total: Decimal::of_cents(line.total, currency),
        ..LineItem::default()
    }
}

/// The customer an order is for: its platform id (None for a customer the platform does not
/// know yet: the order is then a guest order with the email), and email.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct OrderCustomer {
    pub platform_id: Option<String>,
    pub email: Option<String>,
}

/// Create Order's body for the order of `scheduled_at`, placed at `now`.
pub(crate) fn platform_order(
    subscription: &Subscription,
    charge: &OrderCharge,
    customer: &OrderCustomer,
    scheduled_at: Timestamp,
    now: Timestamp,
) -> Order {
    let currency = &subscription.charged_currency;
    let email = customer.email.as_deref();
    let lines = subscription
        .line_items
        .iter()
        .zip(&charge.lines)
        .map(|(item, line)| order_line(item, line, currency))
        .collect();
    let mut attributes = CustomAttributes::new();
    attributes.insert(
        "subscription_id".to_string(),
        CustomAttribute::new("Mercer's subscription", subscription.id.to_string()),
    );
    attributes.insert(
        "order_datetime".to_string(),
        CustomAttribute::new("the subscription's order date", scheduled_at.to_rfc3339()),
    );
    if let Some(code) = &subscription.discount_code {
        attributes.insert(
            "discount_code".to_string(),
            CustomAttribute::new("the subscription's discount code", code.clone()),
        );
    }
    if !subscription.shipping_lines.is_empty() {
        // The connector's order names its shipping method and subtotal only: the lines themselves
        // go as JSON text, for connectors that want each line's code and tag.
        #[derive(Serialize)]
        struct ShippingLineText<'a> {
            name: &'a str,
            code: Option<&'a str>,
            tag: Option<&'a str>,
            price: Option<Decimal>,
        }
        let lines: Vec<ShippingLineText<'_>> = subscription
            .shipping_lines
            .iter()
            .map(|line| ShippingLineText {
                name: &line.name,
                code: line.code.as_deref(),
                tag: line.tag.as_deref(),
                price: Decimal::of_cents(line.value_charged, currency),
            })
            .collect();
        attributes.insert(
            "shipping_lines".to_string(),
            CustomAttribute::new(
                "the subscription's shipping lines",
                // Text keys and plain values: serializing cannot fail.
                serde_json::to_string(&lines).unwrap_or_default(),
            ),
        );
    }
    let shipping_method = (!subscription.shipping_lines.is_empty()).then(|| {
        subscription
            .shipping_lines
            .iter()
            .map(|line| line.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    });
    Order {
        placed_at: Some(now),
        platform_customer_id: customer.platform_id.clone().map(PlatformId::new),
        shipping_addresses: Some(vec![order_address(
            &subscription.shipping_address,
            "shipping",
            email,
        )]),
        billing_address: Some(order_address(
            &subscription.billing_address,
            "billing",
            email,
        )),
        line_items: Some(lines),
        shipping_method,
        source: Some("subscription".to_string()),
        created_via: Some("mercer".to_string()),
        notes: subscription.order_note.clone(),
        custom_attributes: Some(attributes),
        shipping_subtotal: Decimal::of_cents(charge.shipping, currency),
        discount: Decimal::of_cents(charge.discount, currency),
        subtotal: Decimal::of_cents(charge.subtotal, currency),
        total: Decimal::of_cents(charge.total, currency),
        currency: Some(currency.as_str().to_string()),
        ..Order::default()
    }
}

/// Create Payment's body: the order's total with the subscription's payment method (the
/// gateway as `provider`, the token as `payment_method`), carrying Mercer's `key` of it.
pub(crate) fn platform_payment(
    subscription: &Subscription,
    charge: &OrderCharge,
    key: &str,
) -> Payment {
    let currency = &subscription.charged_currency;
    with_payment_key(
        Payment {
            description: Some(format!("subscription {} order", subscription.id)),
            provider: subscription.payment_gateway_public_id.clone(),
            payment_method: subscription.payment_method_token.clone(),
            currency: Some(currency.as_str().to_string()),
            amount_planned: Decimal::of_cents(charge.total, currency),
            ..Payment::default()
        },
        key,
    )
}

/// The prepaid line items after an order was placed, with `current_recurrence_count` moved
/// on: to 1 when the order started a period, else one more. Items without `prepaid_metadata`
/// are left out.
pub(crate) fn advance_prepaid(
    items: &[SubscriptionLineItem],
    now: Timestamp,
) -> Vec<SubscriptionLineItem> {
    items
        .iter()
        .filter_map(|item| {
            let prepaid = item.prepaid_metadata.as_ref()?;
            let count = if starts_prepaid_period(prepaid) {
                1
            } else {
                prepaid.current_recurrence_count + 1
            };
            let mut item = item.clone();
            if let Some(prepaid) = &mut item.prepaid_metadata {
                prepaid.current_recurrence_count = count;
            }
            item.updated_at = now;
            Some(item)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    /// The order's amounts, for subscriptions whose amounts fit.
    fn charge(subscription: &Subscription) -> OrderCharge {
        try_charge(subscription).expect("the amounts fit")
    }
    use crate::subscriptions::resources::{ShippingLine, tests::subscription as fixture};

    fn at(text: &str) -> Timestamp {
        Timestamp::parse_rfc3339(text).unwrap()
    }

    fn subscription() -> Subscription {
        let mut s = fixture();
        s.line_items.truncate(1);
        let item = &mut s.line_items[0];
        item.quantity = 2;
        // 15.00 less a line item discount of 2.50.
        item.price_charged = Cents(1500);
        item.discounted_price_charged = Cents(1250);
        item.prepaid_metadata = None;
        s.percent_discount = 10.0;
        s.shipping_lines = vec![ShippingLine {
            id: 1,
            subscription_id: s.id,
            name: "Standard".into(),
            code: None,
            tag: None,
            price: Cents(500),
            value: Cents(500),
            value_charged: Cents(675),
            created_at: s.created_at,
            updated_at: s.created_at,
        }];
        s
    }

    #[test]
    fn the_key_is_the_subscription_and_its_order_date() {
        assert_eq!(
            idempotency_key(SubscriptionId(42), at("2026-03-09T13:00:00Z")),
            "42:2026-03-09T13:00:00Z"
        );
        assert_eq!(
            payment_key("42:2026-03-09T13:00:00Z", 2),
            "42:2026-03-09T13:00:00Z#2"
        );
    }

    #[test]
    fn an_order_charges_its_items_less_the_discount_plus_shipping() {
        let s = subscription();
        let charge = charge(&s);
        assert_eq!(charge.subtotal, Cents(2500));
        assert_eq!(charge.discount, Cents(250));
        assert_eq!(charge.shipping, Cents(675));
        assert_eq!(charge.total, Cents(2925));

        let order = platform_order(
            &s,
            &charge,
            &OrderCustomer {
                platform_id: Some("cus_9".into()),
                email: Some("ada@example.test".into()),
            },
            at("2026-03-09T13:00:00Z"),
            at("2026-03-09T13:00:01Z"),
        );
        let json = serde_json::to_value(&order).unwrap();
        assert_eq!(json["platform_customer_id"], "cus_9");
        assert_eq!(json["currency"], s.charged_currency.as_str());
        assert_eq!(json["subtotal"], "25.00");
        assert_eq!(json["discount"], "2.50");
        assert_eq!(json["shipping_subtotal"], "6.75");
        assert_eq!(json["total"], "29.25");
        assert_eq!(json["shipping_method"], "Standard");
        assert_eq!(json["line_items"][0]["quantity"], 2);
        let line = &json["line_items"][0];
        assert_eq!(
            [
                &line["price_per_item"],
                &line["discount_per_item"],
                &line["subtotal"],
                &line["discounted_subtotal"],
                &line["total"]
            ],
            ["15.00", "2.50", "30.00", "25.00", "25.00"]
        );
        let shipping: Value = serde_json::from_str(
            json["custom_attributes"]["shipping_lines"]["value"]
                .as_str()
                .unwrap(),
        )
        .unwrap();
        assert_eq!(
            shipping,
            json!([{"name": "Standard", "code": null, "tag": null, "price": "6.75"}])
        );
        assert_eq!(
            json["custom_attributes"]["subscription_id"]["value"],
            s.id.to_string()
        );
        assert_eq!(
            json["custom_attributes"]["order_datetime"]["value"],
            "2026-03-09T13:00:00Z"
        );
        assert_eq!(json["shipping_addresses"][0]["email"], "ada@example.test");
        assert_eq!(json["billing_address"]["address_type"], "billing");
        assert!(json.get("platform_id").is_none(), "the platform assigns it");

        let payment = platform_payment(&s, &charge, "k#1");
        let json = serde_json::to_value(&payment).unwrap();
        assert_eq!(json["amount_planned"], "29.25");
        assert_eq!(json["provider"], "<PAYMENT_GATEWAY_ID>");
        assert_eq!(json["payment_method"], "<PAYMENT_METHOD_TOKEN>");
        assert_eq!(
            json["custom_attributes"]["mercer_payment_key"]["value"],
            "k#1"
        );
    }

    #[test]
    fn a_prepaid_item_pays_its_period_on_the_order_that_starts_it() {
        let mut s = subscription();
        s.percent_discount = 0.0;
        s.shipping_lines.clear();
        s.line_items[0].prepaid_metadata = Some(PrepaidMetadata {
            id: 1,
            line_item_id: s.line_items[0].id,
            prepaid_duration: 3,
            current_recurrence_count: 0,
            prepaid_continue: None,
        });
        let now = at("2026-03-09T13:00:00Z");
        let mut charged = Vec::new();
        let mut counts = Vec::new();
        for _ in 0..7 {
            charged.push(charge(&s).total.0);
            s.line_items = advance_prepaid(&s.line_items, now);
            counts.push(
                s.line_items[0]
                    .prepaid_metadata
                    .as_ref()
                    .unwrap()
                    .current_recurrence_count,
            );
        }
        // 2 × 12.50 × 3 orders on the first of each period of three, nothing on the others.
        assert_eq!(charged, [7500, 0, 0, 7500, 0, 0, 7500]);
        assert_eq!(counts, [1, 2, 3, 1, 2, 3, 1]);
        assert_eq!(s.line_items[0].updated_at, now);
    }

    #[test]
    fn a_discount_never_exceeds_the_subtotal() {
        let mut s = subscription();
        s.percent_discount = 250.0;
        s.shipping_lines.clear();
        assert_eq!(charge(&s).total, Cents::ZERO);
        s.percent_discount = f64::NAN;
        assert_eq!(charge(&s).discount, Cents::ZERO);
    }

    #[test]
    fn amounts_past_the_largest_are_refused_never_cut_down() {
        let mut s = subscription();
        s.shipping_lines.clear();
        s.line_items[0].quantity = 2;
        s.line_items[0].discounted_price_charged = Cents(i64::MAX / 2 + 1);
        s.line_items[0].price_charged = Cents(i64::MAX / 2 + 1);
        assert_eq!(try_charge(&s), None, "a line's total overflows");
        s.line_items[0].quantity = 1;
        let mut second = s.line_items[0].clone();
        second.id.0 += 1;
        s.line_items.push(second);
        assert_eq!(try_charge(&s), None, "the subtotal overflows");
        s.line_items.truncate(1);
        // The list price is told to the platform too: it must fit even when the charged one does.
        s.line_items[0].quantity = 3;
        s.line_items[0].discounted_price_charged = Cents(1);
        s.line_items[0].price_charged = Cents(i64::MAX / 2);
        assert_eq!(try_charge(&s), None, "the list total overflows");
        s.line_items[0].quantity = 2;
        assert_eq!(charge(&s).lines[0].list_total, Cents(i64::MAX / 2 * 2));
    }

    #[test]
    fn the_percent_discount_is_taken_exactly_as_written() {
        let mut s = subscription();
        s.line_items[0].quantity = 1;
        s.line_items[0].discounted_price_charged = Cents(1500);
        s.shipping_lines.clear();
        // 33.3 % of 15.00 is 4.995, rounded half away from zero to 5.00; worked out in binary
        // floats it was 4.99499999…, and the order was charged a cent more.
        s.percent_discount = 33.3;
        let exact = charge(&s);
        assert_eq!((exact.discount, exact.total), (Cents(500), Cents(1000)));
    }

    #[test]
    fn a_customer_the_platform_does_not_know_gets_a_guest_order() {
        let s = subscription();
        let order = platform_order(
            &s,
            &charge(&s),
            &OrderCustomer {
                platform_id: None,
                email: Some("ada@example.test".into()),
            },
            at("2026-03-09T13:00:00Z"),
            at("2026-03-09T13:00:01Z"),
        );
        assert_eq!(order.platform_customer_id, None);
        assert_eq!(
            order.billing_address.unwrap().email.as_deref(),
            Some("ada@example.test")
        );
    }
}
