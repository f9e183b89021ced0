//! The checkout's use cases on the memory database, with overrides answering from memory, the
//! platform in memory behind the connector port, and events applied as the platform sends them.

#![cfg(test)]

use crate::kernel::ids::ShopId;
use std::collections::HashMap;
use std::sync::Mutex;

use serde_json::{Value, json};

use crate::access::credentials::Secret;
use crate::access::shop::{Shop, ShopInput, ShopSettings, create_shop, update_shop_settings};
use crate::checkout::input::{parse_address, parse_customer, parse_init, parse_payment};
use crate::checkout::processing::{PushOrderJob, Pushed, process_order, push_order};
use crate::checkout::repository::CheckoutStatus;
use crate::checkout::storefront::{
    self, AddressType, CheckoutContext, StorefrontCall, add_discount, add_payment, init,
    select_shipping_line, set_address, set_customer, set_taxes, shipping_lines,
};
use crate::checkout::sweeps::{Fulfilment, order_fulfilled, sweep_abandoned};
use crate::kernel::error::DomainError;
use crate::kernel::jobs::RunToEnd;
use crate::kernel::outbound::AddressGuard;
use crate::kernel::time::Timestamp;
use crate::overrides::{
    AddressValidation, Discount, DiscountAnswer, NewApiOverride, OverrideAnswer, OverrideCaller,
    OverrideFailure, OverrideRequest, OverrideTarget, OverrideType, ShippingLine, TaxLine,
};
use crate::platform::destinations::{DestinationSettings, Topic as DestinationTopic};
use crate::platform::events::{
    EntityKind, EventAction, EventSource, OrderFulfilledJob, apply_event, parse_event_body,
};
use crate::ports::Database;
use crate::testing::{MemoryDatabase, MemoryPlatform};
use crate::webhooks::{NewWebhookEndpoint, WebhookKind};

const START: i64 = 1_795_000_000_000_000;

/// An answer as the route sends it: its JSON.
trait Json {
    fn json(&self) -> Value;
}

impl<T: serde::Serialize> Json for T {
    fn json(&self) -> Value {
        serde_json::to_value(self).unwrap()
    }
}

fn at(seconds: i64) -> Timestamp {
    Timestamp::from_micros(START + seconds * 1_000_000)
}

struct AllowAll;

impl AddressGuard for AllowAll {
    fn check(&self, _: &str) -> Result<(), String> {
        Ok(())
    }
}

/// How a `discount` override answers a request's data.
type DiscountRule = fn(&Value) -> DiscountAnswer;

/// Overrides answering from memory: what each type answers, and every call made.
#[derive(Default)]
struct Overrides {
    answers: Mutex<HashMap<&'static str, Result<OverrideAnswer, OverrideFailure>>>,
    calls: Mutex<Vec<(String, OverrideRequest)>>,
    /// When set, the `discount` override answers by this rule from the request's data.
    discount_rule: Mutex<Option<DiscountRule>>,
}

impl Overrides {
    fn answer(&self, kind: OverrideType, answer: Result<OverrideAnswer, OverrideFailure>) {
        self.answers.lock().unwrap().insert(kind.as_str(), answer);
    }

    fn calls_to(&self, url: &str) -> usize {
        self.calls
            .lock()
            .unwrap()
            .iter()
            .filter(|(called, _)| called == url)
            .count()
    }
}

impl OverrideCaller for Overrides {
    fn call(
        &self,
        target: &OverrideTarget,
        request: &OverrideRequest,
    ) -> Result<OverrideAnswer, OverrideFailure> {
        self.calls
            .lock()
            .unwrap()
            .push((target.url.clone(), request.clone()));
        if request.override_type == OverrideType::Discount
            && let Some(rule) = *self.discount_rule.lock().unwrap()
        {
            return Ok(OverrideAnswer::Discount(rule(&request.data)));
        }
        self.answers
            .lock()
            .unwrap()
            .get(request.override_type.as_str())
            .cloned()
            .unwrap_or(Err(OverrideFailure::Failed("no answer".into())))
    }
}

struct World {
    db: MemoryDatabase,
    platform: MemoryPlatform,
    overrides: Overrides,
    shop: Shop,
    token: String,
}

const TOPICS: [&str; 6] = [
    "order/processed",
    "order/created",
    "order/fulfilled",
    "order/abandoned",
    "order/failed",
    "gift_card/created",
];

impl World {
    /// A shop with an orders destination, every checkout topic subscribed, a catalogue of a
    /// coffee (12.50, shipped) and a gift card (25.00, not shipped), and the shop's overrides
    /// of shipping, tax and discount.
    fn new() -> World {
        let db = MemoryDatabase::default();
        let shop = db
            .write(|tx| {
                let shop = create_shop(
                    tx,
                    ShopInput {
                        shop_domain: "checkout.shop.test".into(),
                        ..ShopInput::default()
                    },
                    at(0),
                )?;
                tx.insert_destination(
                    shop.id,
                    &DestinationSettings {
                        topic: DestinationTopic::Orders,
                        url: "http://127.0.0.1:9".into(),
                        version: "v1".into(),
                        timeout_ms: 5000,
                    },
                    at(0),
                )?;
                for topic in TOPICS {
                    tx.insert_webhook_endpoint(&NewWebhookEndpoint {
                        shop_id: shop.id,
                        kind: WebhookKind::Checkout,
                        topic: topic.into(),
                        callback_url: "http://127.0.0.1:9/hook".into(),
                        secret: None,
                        created_at: at(0),
                    })?;
                }
                for topic in crate::subscriptions::topics::webhook_topics() {
                    tx.insert_webhook_endpoint(&NewWebhookEndpoint {
                        shop_id: shop.id,
                        kind: WebhookKind::Subscription,
                        topic: topic.name.to_string(),
                        callback_url: "http://127.0.0.1:9/sub".into(),
                        secret: None,
                        created_at: at(0),
                    })?;
                }
                for kind in [
                    OverrideType::Shipping,
                    OverrideType::Tax,
                    OverrideType::Discount,
                ] {
                    tx.insert_override(&NewApiOverride {
                        shop_id: shop.id,
                        override_type: kind,
                        url: format!("http://127.0.0.1:9/shop/{}", kind.as_str()),
                        shared_secret: Secret::new("a shared secret"),
                        created_at: at(0),
                    })?;
                }
                Ok(shop)
            })
            .unwrap();
        let product = json!({"data": {"product": {
        "platform_id": "prd-1", "platform_updated_at": "2026-11-01T00:00:00Z",
        "name": "Coffee", "vendor": "Roaster",
        "variants": [
            {"platform_id": "var-1", "name": "Coffee 1kg", "sku": "COF-1KG", "price": "12.50",
             "require_shipping": true},
            {"platform_id": "var-gc", "name": "Gift card", "sku": "GC-25", "price": "25.00",
             "require_shipping": false}
        ]}}});
        apply(&db, shop.id, EntityKind::Product, &product);
        let overrides = Overrides::default();
        overrides.answer(
            OverrideType::Shipping,
            Ok(OverrideAnswer::Shipping(vec![
                ShippingLine {
                    id: "ground".into(),
                    description: "Ground".into(),
                    amount: 500,
                },
                ShippingLine {
                    id: "air".into(),
                    description: "Air".into(),
                    amount: 1500,
                },
            ])),
        );
        overrides.answer(
            OverrideType::Tax,
            Ok(OverrideAnswer::Tax(vec![TaxLine {
                name: "GST".into(),
                amount: 260,
                rate: 0.05,
                tag: None,
            }])),
        );
        overrides.answer(
            OverrideType::Discount,
            Ok(OverrideAnswer::Discount(DiscountAnswer {
                valid: true,
                discount: Some(Discount {
                    code: "TEN".into(),
                    amount: 1000,
                    text: "10 off".into(),
                }),
            })),
        );
        World {
            db,
            platform: MemoryPlatform::default(),
            overrides,
            shop,
            token: String::new(),
        }
    }

    fn settings(&mut self, settings: ShopSettings) {
        self.shop = self
            .db
            .write(|tx| update_shop_settings(tx, self.shop.identifier.as_str(), settings, at(0)))
            .unwrap();
    }

    fn context(&self, seconds: i64) -> CheckoutContext<'_, MemoryDatabase> {
        CheckoutContext {
            db: &self.db,
            overrides: &self.overrides,
            now: at(seconds),
        }
    }

    /// Init Order of `body`; the call of its storefront.
    fn init(&mut self, body: Value) -> StorefrontCall {
        let input = parse_init(&body, &AllowAll).unwrap();
        let data = self
            .db
            .write(|tx| init(tx, &self.shop, input, at(1)))
            .unwrap()
            .json();
        self.token = data["jwt_token"].as_str().unwrap().to_string();
        StorefrontCall {
            shop_identifier: self.shop.identifier.as_str().to_string(),
            public_order_id: data["public_order_id"].as_str().unwrap().to_string(),
            token: self.token.clone(),
        }
    }

    /// Customer, addresses, the second shipping line, taxes, paid in full with `token`.
    fn ready_to_process(&mut self, call: &StorefrontCall, token: &str) -> Value {
        self.ready_to_pay_with(call, json!({"token": token}))
    }

    /// [`Self::ready_to_process`], the payment's body holding `payment`'s fields too.
    fn ready_to_pay_with(&mut self, call: &StorefrontCall, payment: Value) -> Value {
        let customer = parse_customer(&json!({"first_name": "Ada", "last_name": "Lovelace",
            "email_address": "ada@example.test"}))
        .unwrap();
        set_customer(&self.db, call, customer, at(2)).unwrap();
        let address = parse_address(&json!({"first_name": "Ada", "address_line_1": "1 Main St",
            "city": "Ottawa", "country_code": "CA", "province_code": "ON"}))
        .unwrap();
        let context = self.context(3);
        set_address(&context, call, AddressType::Shipping, address.clone()).unwrap();
        set_address(&context, call, AddressType::Billing, address).unwrap();
        shipping_lines(&context, call).unwrap();
        select_shipping_line(&context, call, "1").unwrap();
        set_taxes(&context, call).unwrap();
        let balance = storefront::refresh(&self.db, call, at(4)).unwrap().json()["application_state"]
            ["order_balance"]
            .as_i64()
            .unwrap();
        let mut body = json!({"gateway_public_id": "test", "amount": balance});
        for (name, value) in payment.as_object().unwrap() {
            body[name] = value.clone();
        }
        let payment = parse_payment(&body).unwrap();
        add_payment(&self.db, call, payment, at(4)).unwrap().json()
    }

    fn push(&self) -> Pushed {
        let order = self.order_by_status(CheckoutStatus::Processed);
        push_order(
            &self.db,
            &self.platform,
            PushOrderJob {
                checkout_id: order.id,
            },
            false,
            at(10),
        )
        .unwrap()
    }

    fn order_by_status(
        &self,
        status: CheckoutStatus,
    ) -> crate::checkout::repository::CheckoutOrder {
        self.db.with_state(|state| {
            state
                .checkout_orders
                .iter()
                .find(|order| order.status == status)
                .cloned()
                .unwrap()
        })
    }

    /// The checkout messages sent so far: (topic, payload).
    fn sent(&self, kind: WebhookKind) -> Vec<(String, Value)> {
        let ids: Vec<_> = self.db.with_state(|state| {
            state
                .webhook_endpoints
                .iter()
                .filter(|(endpoint, _)| endpoint.kind == kind)
                .map(|(endpoint, _)| endpoint.id)
                .collect()
        });
        self.db.with_state(|state| {
            let mut messages: Vec<_> = state
                .webhook_messages
                .iter()
                .filter(|m| ids.contains(&m.endpoint_id))
                .collect();
            messages.sort_by_key(|m| m.id);
            messages
                .iter()
                .map(|m| (m.topic.clone(), serde_json::from_str(&m.payload).unwrap()))
                .collect()
        })
    }

    fn topics(&self) -> Vec<String> {
        self.sent(WebhookKind::Checkout)
            .into_iter()
            .map(|(topic, _)| topic)
            .collect()
    }
}

/// Applies a Saved event of `kind` with `body`, as the connector sends it.
fn apply(db: &MemoryDatabase, shop_id: ShopId, kind: EntityKind, body: &Value) {
    let event = parse_event_body(
        shop_id,
        kind,
        EventAction::Saved,
        body.to_string().as_bytes(),
        EventSource::Webhook,
        at(0),
    )
    .unwrap();
    db.write(|tx| apply_event(tx, &event, at(0))).unwrap();
}

/// The amounts of a state agree: total = items + shipping + taxes − discounts, balance =
/// total − payments.
fn consistent(state: &Value) -> bool {
    let sum = |items: &Value, pick: &dyn Fn(&Value) -> i64| {
        items
            .as_array()
            .map_or(0, |items| items.iter().map(pick).sum::<i64>())
    };
    let items = sum(&state["line_items"], &|item| {
        item["product_data"]["total_price"].as_i64().unwrap()
    });
    let shipping = state["shipping"]["selected_shipping"]["amount"]
        .as_i64()
        .unwrap_or(0);
    let taxes = sum(&state["taxes"], &|tax| tax["value"].as_i64().unwrap());
    let discounts = sum(&state["discounts"], &|d| d["value"].as_i64().unwrap());
    let payments = sum(&state["payments"], &|p| p["amount"].as_i64().unwrap());
    let total = state["order_total"].as_i64().unwrap();
    total == items + shipping + taxes - discounts
        && state["order_balance"].as_i64().unwrap() == total - payments
}

#[test]
fn a_whole_checkout_is_priced_consistently_processed_and_pushed_to_the_platform() {
    let mut w = World::new();
    w.settings(ShopSettings {
        gift_cards_enabled: Some(true),
        gift_card_skus: Some(vec!["GC-25".into()]),
        ..ShopSettings::default()
    });
    let call = w.init(json!({"cart_items": [
        {"platform_id": "var-1", "quantity": 2, "line_item_key": "coffee"},
        {"platform_id": "var-gc", "quantity": 1, "line_item_key": "card"}]}));
    let state =
        storefront::refresh(&w.db, &call, at(2)).unwrap().json()["application_state"].clone();
    assert_eq!(state["order_total"], 2 * 1250 + 2500);
    assert!(consistent(&state));
    w.ready_to_process(&call, "tok_success");
    let context = w.context(3);
    // A discount after the whole balance was paid: the order is overpaid, and consistent.
    let discounted = add_discount(&context, &call, "TEN").unwrap().json();
    let state = &discounted["application_state"];
    assert_eq!(state["order_total"], 5000 + 1500 + 260 - 1000);
    assert_eq!(state["order_balance"], -1000);
    assert_eq!(
        state["shipping"]["selected_shipping"]["id"], "air",
        "chosen by position"
    );
    assert!(consistent(state));
    let overpaid = process_order(&w.context(5), &call);
    assert!(
        matches!(overpaid, Err(DomainError::Invalid(ref p)) if p[0].code == "balance_not_paid"),
        "{overpaid:?}"
    );
    // The payment's amount set to the total, then another payment refused: nothing is left.
    let paid = storefront::payments(&w.db, &call, at(5)).unwrap().json();
    let token = paid["payments"][0]["token"].as_str().unwrap().to_string();
    let update = parse_payment(&json!({"gateway_public_id": "test", "token": token})).unwrap();
    let paid = storefront::update_payment(&w.db, &call, update, at(6))
        .unwrap()
        .json();
    assert_eq!(paid["payment"]["amount"], 5760);
    assert_eq!(paid["application_state"]["order_balance"], 0);
    assert!(consistent(&paid["application_state"]));
    let more =
        parse_payment(&json!({"gateway_public_id": "test", "token": "tok_success"})).unwrap();
    assert!(
        add_payment(&w.db, &call, more, at(6)).is_err(),
        "no balance left"
    );

    let processed = process_order(&w.context(7), &call).unwrap().json();
    assert_eq!(processed["application_state"]["is_processed"], true);
    assert_eq!(w.topics(), ["order/processed"]);
    let (_, payload) = &w.sent(WebhookKind::Checkout)[0];
    assert_eq!(payload["application_state"], processed["application_state"]);
    assert_eq!(payload["public_order_id"], call.public_order_id.as_str());
    assert_eq!(payload["fulfillment_status"], "unfulfilled");
    assert_eq!(payload["fulfillment_data"], json!([]));
    assert_eq!(payload["platform_order_id"], "");
    let after = set_customer(
        &w.db,
        &call,
        parse_customer(&json!({"email_address": "late@example.test"})).unwrap(),
        at(8),
    );
    assert!(
        matches!(
            after,
            Err(DomainError::Unprocessable {
                code: "order.processed",
                ..
            })
        ),
        "{after:?}"
    );

    let Pushed::Created { platform_order_id } = w.push() else {
        panic!("pushed")
    };
    w.platform.state(|p| {
        assert_eq!(
            p.create_order_calls,
            std::slice::from_ref(&call.public_order_id)
        );
        let order = &p.orders[0];
        assert_eq!(order.total.as_ref().map(|t| t.as_str()), Some("57.60"));
        assert_eq!(order.payments.as_ref().map(Vec::len), Some(1));
    });
    assert_eq!(
        w.topics(),
        ["order/processed", "order/created", "gift_card/created"]
    );
    let sent = w.sent(WebhookKind::Checkout);
    assert_eq!(sent[1].1["platform_order_id"], platform_order_id.as_str());
    assert_ne!(sent[1].1["platform_friendly_identifier"], "");
    let card = &sent[2].1;
    assert_eq!(card["gift_card_amount"], 2500);
    assert_eq!(card["customer"]["email_address"], "ada@example.test");
    assert_ne!(card["gift_card_key"], "");
    assert_eq!(
        w.order_by_status(CheckoutStatus::Created).platform_order_id,
        Some(platform_order_id)
    );
}

#[test]
fn an_order_override_wins_and_a_failing_override_is_a_502_not_a_500() {
    let mut w = World::new();
    let call = w.init(json!({
        "cart_items": [{"platform_id": "var-1", "quantity": 1}],
        "overrides": [{"override_type": "shipping", "url": "http://127.0.0.1:9/order/shipping",
                       "shared_secret": "the order's secret"}]}));
    let context = w.context(3);
    shipping_lines(&context, &call).unwrap();
    assert_eq!(w.overrides.calls_to("http://127.0.0.1:9/order/shipping"), 1);
    assert_eq!(w.overrides.calls_to("http://127.0.0.1:9/shop/shipping"), 0);
    w.overrides
        .answer(OverrideType::Tax, Err(OverrideFailure::TimedOut));
    let failed = set_taxes(&context, &call);
    assert!(
        matches!(
            failed,
            Err(DomainError::Remote {
                code: "override.failed",
                timed_out: false,
                ..
            })
        ),
        "{failed:?}"
    );
    w.overrides.answer(
        OverrideType::AddressValidate,
        Ok(OverrideAnswer::AddressValidate(AddressValidation {
            valid: false,
            errors: vec![crate::overrides::AddressError {
                field: "postal_code".into(),
                message: "no such postal code".into(),
            }],
        })),
    );
    w.db.write(|tx| {
        Ok(tx.insert_override(&NewApiOverride {
            shop_id: w.shop.id,
            override_type: OverrideType::AddressValidate,
            url: "http://127.0.0.1:9/shop/address".into(),
            shared_secret: Secret::new("a shared secret"),
            created_at: at(0),
        })?)
    })
    .unwrap();
    let address = parse_address(&json!({"address_line_1": "1 Main", "city": "X",
                                        "country_code": "CA"}))
    .unwrap();
    let refused = set_address(&context, &call, AddressType::Shipping, address);
    assert!(
        matches!(refused, Err(DomainError::Invalid(ref p)) if p[0].field == "postal_code"),
        "{refused:?}"
    );
    let state = storefront::refresh(&w.db, &call, at(4)).unwrap().json();
    assert_eq!(
        state["application_state"]["addresses"]["shipping"],
        json!({})
    );
}

#[test]
fn a_declined_payment_emits_order_failed_and_leaves_the_order_open() {
    let mut w = World::new();
    let call = w.init(json!({"cart_items": [{"platform_id": "var-1", "quantity": 1}]}));
    w.ready_to_process(&call, "tok_decline");
    let declined = process_order(&w.context(7), &call);
    assert!(
        matches!(declined, Err(DomainError::Invalid(ref p)) if p[0].code == "payment_declined"),
        "{declined:?}"
    );
    assert_eq!(w.topics(), ["order/failed"]);
    let (_, payload) = &w.sent(WebhookKind::Checkout)[0];
    assert_eq!(
        payload["application_state"]["payments"][0]["token"],
        "tok_decline"
    );
    let state = storefront::refresh(&w.db, &call, at(8)).unwrap().json();
    assert_eq!(state["application_state"]["is_processed"], false);
    assert_eq!(
        state["application_state"]["payments"],
        json!([]),
        "the declined payment is gone"
    );
    assert!(w.platform.state(|p| p.orders.is_empty()));
}

#[test]
fn a_declined_plan_sends_subscription_payment_failed() {
    let mut w = World::new();
    let call = w.init(
        json!({"cart_items": [{"platform_id": "var-1", "quantity": 2,
        "line_item_properties": {"order_rrule": "DTSTART:20261101T090000Z\nRRULE:FREQ=WEEKLY"}}]}),
    );
    w.ready_to_process(&call, "tok_decline");
    assert!(process_order(&w.context(7), &call).is_err());
    assert_eq!(w.topics(), ["order/failed"]);
    let sent = w.sent(WebhookKind::Subscription);
    let topics: Vec<&str> = sent.iter().map(|(topic, _)| topic.as_str()).collect();
    assert_eq!(topics, ["subscription_payment_failed"]);
    let payload = &sent[0].1;
    // No subscription exists: the one the plan would make, and the checkout's failed order.
    assert_eq!(payload["data"]["id"], Value::Null);
    assert_eq!(payload["data"]["customer"]["email"], "ada@example.test");
    assert_eq!(payload["data"]["line_items"][0]["quantity"], 2);
    assert!(payload["data"].get("payment_details").is_none());
    assert_eq!(
        (
            &payload["order"]["public_order_id"],
            &payload["order"]["failure_code"]
        ),
        (&json!(call.public_order_id), &json!("payment_declined"))
    );
    // An order without a plan sends none.
    let plain = w.init(json!({"cart_items": [{"platform_id": "var-1", "quantity": 1}]}));
    w.ready_to_process(&plain, "tok_decline");
    assert!(process_order(&w.context(8), &plain).is_err());
    assert_eq!(w.sent(WebhookKind::Subscription).len(), 1);
}

#[test]
fn a_payment_methods_expiry_reaches_the_subscription_the_order_makes() {
    let mut w = World::new();
    let call = w.init(
        json!({"cart_items": [{"platform_id": "var-1", "quantity": 1,
        "line_item_properties": {"order_rrule": "DTSTART:20261101T090000Z\nRRULE:FREQ=WEEKLY"}}]}),
    );
    let refused = parse_payment(&json!({"gateway_public_id": "test", "token": "tok_success",
        "extra_payment_data": {"expires_at": "03/27"}}));
    assert!(
        matches!(refused, Err(DomainError::Invalid(ref p)) if p[0].field == "extra_payment_data.expires_at"),
        "{refused:?}"
    );
    w.ready_to_pay_with(
        &call,
        json!({"token": "tok_success", "extra_payment_data": {"expires_at": "2027-03"}}),
    );
    process_order(&w.context(7), &call).unwrap();
    assert!(matches!(w.push(), Pushed::Created { .. }));
    let sent = w.sent(WebhookKind::Subscription);
    let (_, created) = sent
        .iter()
        .find(|(topic, _)| topic == "subscription_created")
        .unwrap();
    assert_eq!(created["data"]["payment_method_expires_at"], "2027-03");
}

#[test]
fn a_platform_failing_for_good_emits_order_failed_and_a_passing_failure_is_retried() {
    let mut w = World::new();
    let call = w.init(json!({"cart_items": [{"platform_id": "var-1", "quantity": 1}]}));
    w.ready_to_process(&call, "tok_success");
    process_order(&w.context(7), &call).unwrap();
    let order = w.order_by_status(CheckoutStatus::Processed);
    let job = PushOrderJob {
        checkout_id: order.id,
    };
    w.platform.state(|p| p.failing_orders = 1);
    let retried = push_order(&w.db, &w.platform, job, false, at(10));
    assert!(retried.is_err(), "a 500 is tried again");
    assert_eq!(w.topics(), ["order/processed"]);
    w.platform.state(|p| p.failing_orders = 1);
    let last = push_order(&w.db, &w.platform, job, true, at(20)).unwrap();
    assert!(matches!(last, Pushed::Failed { .. }), "{last:?}");
    assert_eq!(w.topics(), ["order/processed", "order/failed"]);
    assert_eq!(
        w.db.read(|tx| Ok(tx.checkout_order_by_id(order.id)?))
            .unwrap()
            .unwrap()
            .status,
        CheckoutStatus::Failed
    );
    assert!(matches!(
        push_order(&w.db, &w.platform, job, false, at(30)).unwrap(),
        Pushed::Nothing
    ));
}

#[test]
fn a_subscription_plan_becomes_a_subscription_when_the_order_is_created() {
    let mut w = World::new();
    // The plan's group, 10% off.
    let group =
        w.db.write(|tx| {
            let input = crate::subscriptions::groups::parse_group(
                &json!({"subscription_group": {"name": "Coffee club", "percent_discount": 10,
                        "billing_rules": [{"interval_number": 1, "interval_type": "week"}]}}),
                true,
            )?;
            crate::subscriptions::groups::create_group(tx, &w.shop, input, at(0))
        })
        .unwrap();
    // A group the shop does not have is refused at init.
    let unknown = parse_init(
        &json!({"cart_items": [{"platform_id": "var-1", "quantity": 1,
                "line_item_properties": {"subscription_group_id": group.id.0 + 1,
                    "order_rrule": "DTSTART:20261101T090000Z\nRRULE:FREQ=WEEKLY"}}]}),
        &AllowAll,
    )
    .unwrap();
    let refused = w.db.write(|tx| init(tx, &w.shop, unknown, at(1)));
    assert!(
        matches!(refused, Err(DomainError::Invalid(ref p))
            if p[0].field == "cart_items[0].line_item_properties.subscription_group_id"
                && p[0].code == "unknown_group"),
        "{refused:?}"
    );
    let call = w.init(json!({"cart_items": [
        {"platform_id": "var-1", "quantity": 2, "line_item_key": "plan",
         "line_item_properties": {"subscription_group_id": group.id.to_string(),
                                  "order_rrule": "DTSTART:20261101T090000Z\nRRULE:FREQ=WEEKLY"}}]}));
    w.ready_to_process(&call, "tok_success");
    process_order(&w.context(7), &call).unwrap();
    assert!(matches!(w.push(), Pushed::Created { .. }));
    let topics: Vec<String> = w
        .sent(WebhookKind::Subscription)
        .into_iter()
        .map(|(topic, _)| topic)
        .collect();
    assert_eq!(
        topics,
        [
            "customer_created",
            "subscription_created",
            "subscription_order_created"
        ]
    );
    let (_, created) = &w.sent(WebhookKind::Subscription)[2];
    assert_eq!(created["data"]["line_items"][0]["quantity"], 2);
    assert_eq!(
        created["data"]["line_items"][0]["subscription_group_id"],
        group.id.0
    );
    assert_eq!(
        created["data"]["percent_discount"], 10.0,
        "the group's discount"
    );
    assert_eq!(created["data"]["payment_method_token"], "tok_success");
    assert_eq!(
        created["order"]["public_order_id"],
        call.public_order_id.as_str()
    );
    let next =
        Timestamp::parse_rfc3339(created["data"]["next_order_datetime"].as_str().unwrap()).unwrap();
    assert!(next > at(10), "the next order comes after this one");
    // A plan whose rule does not read is refused at init.
    let bad = parse_init(
        &json!({"cart_items": [{"platform_id": "var-1", "quantity": 1,
                                "line_item_properties": {"order_rrule": "every tuesday"}}]}),
        &AllowAll,
    )
    .unwrap();
    let refused = w.db.write(|tx| init(tx, &w.shop, bad, at(1)));
    assert!(
        matches!(refused, Err(DomainError::Invalid(ref p))
            if p[0].field == "cart_items[0].line_item_properties.order_rrule"),
        "{refused:?}"
    );
}

#[test]
fn an_unknown_variant_or_a_token_of_another_order_is_refused() {
    let mut w = World::new();
    let unknown = parse_init(
        &json!({"cart_items": [{"platform_id": "var-1", "quantity": 1},
                               {"platform_id": "nope", "quantity": 1}]}),
        &AllowAll,
    )
    .unwrap();
    let refused = w.db.write(|tx| init(tx, &w.shop, unknown, at(1)));
    assert!(
        matches!(refused, Err(DomainError::Invalid(ref p))
            if p[0].field == "cart_items[1].platform_id" && p[0].code == "unknown_variant"),
        "{refused:?}"
    );
    let first = w.init(json!({"cart_items": [{"platform_id": "var-1", "quantity": 1}]}));
    let second = w.init(json!({"cart_items": [{"platform_id": "var-1", "quantity": 1}]}));
    let crossed = StorefrontCall {
        token: second.token.clone(),
        ..first.clone()
    };
    assert!(matches!(
        storefront::refresh(&w.db, &crossed, at(2)),
        Err(DomainError::Unauthenticated)
    ));
    let expired = storefront::refresh(&w.db, &first, at(24 * 3600 + 2));
    assert!(matches!(expired, Err(DomainError::Unauthenticated)));
    assert!(storefront::refresh(&w.db, &first, at(2)).is_ok());
}

#[test]
fn a_fulfilled_platform_order_emits_order_fulfilled_once() {
    let mut w = World::new();
    let call = w.init(json!({"cart_items": [{"platform_id": "var-1", "quantity": 3}]}));
    w.ready_to_process(&call, "tok_success");
    process_order(&w.context(7), &call).unwrap();
    let Pushed::Created { platform_order_id } = w.push() else {
        panic!("pushed")
    };
    let saved = |status: &str, at_time: &str| {
        json!({"data": {"order": {"platform_id": platform_order_id,
            "platform_updated_at": at_time, "fulfillment_status": status,
            "custom_attributes": {"tracking_number": {"description": "", "value": "1Z999"}}}}})
    };
    apply(
        &w.db,
        w.shop.id,
        EntityKind::Order,
        &saved("unfulfilled", "2026-11-02T00:00:00Z"),
    );
    apply(
        &w.db,
        w.shop.id,
        EntityKind::Order,
        &saved("fulfilled", "2026-11-03T00:00:00Z"),
    );
    apply(
        &w.db,
        w.shop.id,
        EntityKind::Order,
        &saved("fulfilled", "2026-11-04T00:00:00Z"),
    );
    let jobs =
        w.db.read(|tx| Ok(tx.list_jobs(None, 100)?))
            .unwrap()
            .into_iter()
            .filter(|job| job.kind == <OrderFulfilledJob as crate::kernel::jobs::JobPayload>::KIND)
            .collect::<Vec<_>>();
    assert_eq!(
        jobs.len(),
        1,
        "enqueued when the order became fulfilled, not again"
    );
    let job: OrderFulfilledJob = jobs[0].payload().unwrap();
    assert_eq!(
        order_fulfilled(&w.db, &job, at(40)).unwrap(),
        Fulfilment::Sent
    );
    assert_eq!(
        order_fulfilled(&w.db, &job, at(41)).unwrap(),
        Fulfilment::Nothing,
        "once"
    );
    let sent = w.sent(WebhookKind::Checkout);
    let (topic, payload) = sent.last().unwrap();
    assert_eq!(topic, "order/fulfilled");
    assert_eq!(payload["fulfillment_status"], "fulfilled");
    let data = &payload["fulfillment_data"];
    assert!(data.is_object(), "fulfillment_data is an object");
    assert_eq!(data["item_count"], 3);
    assert_eq!(data["tracking_number"], "1Z999");
    assert_eq!(
        data["total_value"],
        payload["application_state"]["order_total"]
    );
    assert!(data["fulfilled_at"].as_str().unwrap().len() == 19);
}

#[test]
fn an_abandoned_checkout_is_reported_once_and_only_while_the_shops_emails_are_off() {
    let mut w = World::new();
    let call = w.init(
        json!({"cart_items": [{"platform_id": "var-1", "quantity": 1}],
                             "customer": {"email_address": "gone@example.test"}}),
    );
    // No email: not reported.
    w.init(json!({"cart_items": [{"platform_id": "var-1", "quantity": 1}]}));
    let hour = 3600;
    assert_eq!(
        sweep_abandoned(&w.db, at(2 * hour), hour, &RunToEnd).unwrap(),
        0,
        "emails on"
    );
    w.settings(ShopSettings {
        abandoned_cart_emails: Some(false),
        ..ShopSettings::default()
    });
    assert_eq!(
        sweep_abandoned(&w.db, at(hour - 10), hour, &RunToEnd).unwrap(),
        0,
        "too soon"
    );
    assert_eq!(
        sweep_abandoned(&w.db, at(2 * hour), hour, &RunToEnd).unwrap(),
        1
    );
    assert_eq!(
        sweep_abandoned(&w.db, at(3 * hour), hour, &RunToEnd).unwrap(),
        0,
        "once"
    );
    assert_eq!(w.topics(), ["order/abandoned"]);
    let (_, payload) = &w.sent(WebhookKind::Checkout)[0];
    assert_eq!(payload["public_order_id"], call.public_order_id.as_str());
    assert_eq!(payload["customer"]["email_address"], "gone@example.test");
    assert_eq!(
        payload["line_items"][0]["product_data"]["properties"],
        json!([])
    );
    assert!(
        payload["resumable_link"]
            .as_str()
            .unwrap()
            .ends_with(&call.public_order_id)
    );
}

#[test]
fn discounts_valued_again_at_process_order_are_kept_and_taxes_follow_discounts() {
    let mut w = World::new();
    let call = w.init(json!({"cart_items": [{"platform_id": "var-1", "quantity": 4}]}));
    w.ready_to_process(&call, "tok_success");
    let taxed = w.overrides.calls_to("http://127.0.0.1:9/shop/tax");
    let context = w.context(5);
    add_discount(&context, &call, "TEN").unwrap();
    assert_eq!(
        w.overrides.calls_to("http://127.0.0.1:9/shop/tax"),
        taxed + 1,
        "taxes worked out again with the discount"
    );
    // Paid in full, then the discount is worth more at Process Order.
    let paid = storefront::payments(&w.db, &call, at(5)).unwrap().json();
    let id = paid["payments"][0]["id"].as_str().unwrap().to_string();
    let update = parse_payment(&json!({"gateway_public_id": "test", "token": "tok_success",
                                       "id": id}))
    .unwrap();
    storefront::update_payment(&w.db, &call, update, at(6)).unwrap();
    w.overrides.answer(
        OverrideType::Discount,
        Ok(OverrideAnswer::Discount(DiscountAnswer {
            valid: true,
            discount: Some(Discount {
                code: "TEN".into(),
                amount: 1500,
                text: "15 off".into(),
            }),
        })),
    );
    let refused = process_order(&w.context(7), &call);
    assert!(
        matches!(refused, Err(DomainError::Invalid(ref p)) if p[0].code == "balance_not_paid"),
        "{refused:?}"
    );
    let state =
        storefront::refresh(&w.db, &call, at(8)).unwrap().json()["application_state"].clone();
    assert_eq!(
        state["discounts"][0]["value"], 1500,
        "the new value is kept"
    );
    assert_eq!(state["order_balance"], -500);
    assert!(consistent(&state));
    let update = parse_payment(&json!({"gateway_public_id": "test", "token": "tok_success",
                                       "id": id, "amount": state["order_total"]}))
    .unwrap();
    storefront::update_payment(&w.db, &call, update, at(9)).unwrap();
    process_order(&w.context(10), &call).unwrap();
}

#[test]
fn payments_are_named_by_id_and_a_key_of_another_variant_is_refused() {
    let mut w = World::new();
    let call = w.init(
        json!({"cart_items": [{"platform_id": "var-1", "quantity": 1,
                                             "line_item_key": "a"}]}),
    );
    let pay = |amount: i64| {
        parse_payment(&json!({"gateway_public_id": "test", "token": "tok_success",
                              "amount": amount}))
        .unwrap()
    };
    add_payment(&w.db, &call, pay(500), at(2)).unwrap();
    let both = add_payment(&w.db, &call, pay(750), at(3)).unwrap().json();
    let second = both["payment"]["id"].as_str().unwrap().to_string();
    storefront::delete_payment(&w.db, &call, Some(&second), "tok_success", at(4)).unwrap();
    let left = storefront::payments(&w.db, &call, at(5)).unwrap().json();
    assert_eq!(
        left["payments"].as_array().unwrap().len(),
        1,
        "one payment removed"
    );
    assert_eq!(left["payments"][0]["amount"], 500);
    let item = crate::checkout::input::parse_add_line_item(
        &json!({"platform_id": "var-gc", "quantity": 1, "line_item_key": "a"}),
    )
    .unwrap();
    let taken = storefront::add_line_item(&w.db, &call, item, at(6));
    assert!(
        matches!(taken, Err(DomainError::Invalid(ref p)) if p[0].code == "key_taken"),
        "{taken:?}"
    );
    let twice = parse_init(
        &json!({"cart_items": [{"platform_id": "var-1", "quantity": 1, "line_item_key": "k"},
                               {"platform_id": "var-gc", "quantity": 1, "line_item_key": "k"}]}),
        &AllowAll,
    )
    .unwrap();
    let refused = w.db.write(|tx| init(tx, &w.shop, twice, at(7)));
    assert!(
        matches!(refused, Err(DomainError::Invalid(ref p)) if p[0].field == "cart_items[1].line_item_key"),
        "{refused:?}"
    );
}

#[test]
fn an_order_the_platform_fulfilled_on_receipt_is_reported_fulfilled_after_created() {
    let mut w = World::new();
    let call = w.init(json!({"cart_items": [{"platform_id": "var-1", "quantity": 1}]}));
    w.ready_to_process(&call, "tok_success");
    process_order(&w.context(7), &call).unwrap();
    // The platform's Order Saved event, fulfilled, before Mercer knows the order is the
    // checkout's (the memory platform names its first order ord-1).
    apply(
        &w.db,
        w.shop.id,
        EntityKind::Order,
        &json!({"data": {"order": {"platform_id": "ord-1",
            "platform_updated_at": "2026-11-02T00:00:00Z", "fulfillment_status": "fulfilled"}}}),
    );
    let job = OrderFulfilledJob {
        shop_id: w.shop.id,
        platform_order_id: "ord-1".into(),
    };
    assert_eq!(
        order_fulfilled(&w.db, &job, at(9)).unwrap(),
        Fulfilment::Nothing,
        "no checkout has the order yet"
    );
    // That job is done, and gone.
    let kind = <OrderFulfilledJob as crate::kernel::jobs::JobPayload>::KIND;
    w.db.write(|tx| {
        for claimed in tx.claim_jobs(&[kind], "test", at(9), at(60), 10)? {
            tx.complete_job(claimed.id, "test", None, at(9))?;
        }
        Ok(())
    })
    .unwrap();
    assert!(matches!(w.push(), Pushed::Created { .. }));
    let jobs: Vec<_> =
        w.db.read(|tx| Ok(tx.list_jobs(None, 100)?))
            .unwrap()
            .into_iter()
            .filter(|job| job.kind == kind)
            .collect();
    assert_eq!(jobs.len(), 1, "enqueued again when the order was created");
    assert_eq!(
        order_fulfilled(&w.db, &job, at(11)).unwrap(),
        Fulfilment::Sent
    );
    assert_eq!(
        w.topics(),
        ["order/processed", "order/created", "order/fulfilled"]
    );
}

#[test]
fn a_line_item_is_added_by_its_sku_alone_when_one_variant_has_it() {
    let mut w = World::new();
    // Another product shares the gift card's SKU.
    apply(
        &w.db,
        w.shop.id,
        EntityKind::Product,
        &json!({"data": {"product": {"platform_id": "prd-2", "name": "Card bundle",
            "platform_updated_at": "2026-11-01T00:00:00Z",
            "variants": [{"platform_id": "var-gc2", "sku": "GC-25", "price": "50.00"}]}}}),
    );
    let call = w.init(json!({"cart_items": [{"platform_id": "var-1", "quantity": 1}]}));
    let by_sku = |sku: &str| {
        crate::checkout::input::parse_add_line_item(
            &json!({"sku": sku, "quantity": 2, "line_item_key": "more"}),
        )
        .unwrap()
    };
    let added = storefront::add_line_item(&w.db, &call, by_sku("COF-1KG"), at(2))
        .unwrap()
        .json();
    assert_eq!(added["line_item"]["product_data"]["variant_id"], "var-1");
    assert_eq!(added["line_item"]["product_data"]["quantity"], 2);
    let state =
        storefront::refresh(&w.db, &call, at(3)).unwrap().json()["application_state"].clone();
    assert_eq!(state["line_items"].as_array().unwrap().len(), 2);
    assert!(consistent(&state), "{state}");
    let refused = |sku: &str| match storefront::add_line_item(&w.db, &call, by_sku(sku), at(4)) {
        Err(DomainError::Invalid(problems)) => (problems[0].field.clone(), problems[0].code),
        other => panic!("{sku}: {other:?}"),
    };
    assert_eq!(refused("NONE"), ("sku".to_string(), "unknown_variant"));
    assert_eq!(refused("GC-25"), ("sku".to_string(), "ambiguous_sku"));
}

// ---------------------------------------------------------------------------------------
// What a hostile probe found (issue 23): each test reproduces a hole, then holds it shut.

/// The data of every call made to the discount override, in order.
fn discount_requests(w: &World) -> Vec<Value> {
    w.overrides
        .calls
        .lock()
        .unwrap()
        .iter()
        .filter(|(_, request)| request.override_type == OverrideType::Discount)
        .map(|(_, request)| request.data.clone())
        .collect()
}

#[test]
fn a_code_in_any_spelling_the_override_takes_is_one_discount() {
    let mut w = World::new();
    let call = w.init(json!({"cart_items": [
        {"platform_id": "var-1", "quantity": 2, "line_item_key": "coffee"}]}));
    // The override takes any case and answers the code as "TEN", as the probe's did.
    for code in ["ten", "Ten", "TEN", "tEn"] {
        add_discount(&w.context(2), &call, code).unwrap();
    }
    let state =
        storefront::refresh(&w.db, &call, at(3)).unwrap().json()["application_state"].clone();
    assert_eq!(state["discounts"].as_array().unwrap().len(), 1, "{state}");
    assert_eq!(state["discounts"][0]["code"], "TEN");
    assert_eq!(state["order_total"], 2 * 1250 - 1000);
    assert!(consistent(&state));
    // The override is shown every discount applied already, the code asked about in another
    // letter case included.
    let requests = discount_requests(&w);
    assert_eq!(requests[0]["code"], "ten");
    assert_eq!(requests[0]["applied_discounts"], json!([]));
    for request in &requests[1..] {
        assert_eq!(
            request["applied_discounts"],
            json!([{"code": "TEN", "amount": 1000, "text": "10 off"}]),
            "{request}"
        );
    }
    add_discount(&w.context(2), &call, "OTHER").unwrap();
    assert_eq!(
        discount_requests(&w)[4]["applied_discounts"],
        json!([{"code": "TEN", "amount": 1000, "text": "10 off"}])
    );
    let state =
        storefront::refresh(&w.db, &call, at(3)).unwrap().json()["application_state"].clone();
    assert_eq!(
        state["discounts"].as_array().unwrap().len(),
        1,
        "answered as TEN"
    );
    // Removed by the code the shopper typed, in the case they typed it.
    storefront::delete_discount(&w.context(4), &call, "ten").unwrap();
    let state =
        storefront::refresh(&w.db, &call, at(5)).unwrap().json()["application_state"].clone();
    assert_eq!(state["discounts"], json!([]));
    assert_eq!(state["order_total"], 2 * 1250);
}

#[test]
fn codes_with_invisible_characters_are_refused() {
    use crate::checkout::input::parse_discount_code;
    for code in [
        "TE\u{200B}N",
        "\u{FEFF}TEN",
        "TEN\u{2060}",
        "T\u{00AD}EN",
        "TE\u{00A0}N",
    ] {
        let refused = parse_discount_code(&json!({ "code": code }));
        assert!(
            matches!(refused, Err(DomainError::Invalid(ref p))
                if p[0].field == "code" && p[0].code == "invalid_character"),
            "{code:?}: {refused:?}"
        );
    }
    assert_eq!(
        parse_discount_code(&json!({"code": " TEN "})).unwrap(),
        "TEN"
    );
}

/// A Product Saved event for `prd-neg` whose one variant has `price`.
fn product_priced(price: &str) -> Value {
    json!({"data": {"product": {
        "platform_id": "prd-neg", "platform_updated_at": "2026-11-02T00:00:00Z", "name": "Neg",
        "variants": [{"platform_id": "var-neg", "price": price, "require_shipping": false}]}}})
}

#[test]
fn a_negative_catalogue_price_is_refused_at_intake_and_never_sold() {
    let mut w = World::new();
    for field in ["price", "compare_at_price", "cost"] {
        let mut body = product_priced("1.00");
        body["data"]["product"]["variants"][0][field] = json!("-5.00");
        let refused = parse_event_body(
            w.shop.id,
            EntityKind::Product,
            EventAction::Saved,
            body.to_string().as_bytes(),
            EventSource::Webhook,
            at(0),
        );
        let path = format!("data.product.variants[0].{field}");
        assert!(
            matches!(refused, Err(crate::platform::events::EventBodyError::Invalid(
                DomainError::Invalid(ref p))) if p[0].field == path && p[0].code == "negative"),
            "{field}: {refused:?}"
        );
    }
    assert!(
        parse_event_body(
            w.shop.id,
            EntityKind::Product,
            EventAction::Saved,
            product_priced("-0.00").to_string().as_bytes(),
            EventSource::Webhook,
            at(0),
        )
        .is_ok(),
        "minus zero is zero"
    );
    // A price stored before intake refused them is not sold.
    let mut stored = parse_event_body(
        w.shop.id,
        EntityKind::Product,
        EventAction::Saved,
        product_priced("5.00").to_string().as_bytes(),
        EventSource::Webhook,
        at(0),
    )
    .unwrap();
    let mut product: crate::platform::resources::Product =
        serde_json::from_value(product_priced("5.00")["data"]["product"].clone()).unwrap();
    product.variants.as_mut().unwrap()[0].price =
        crate::platform::resources::Decimal::parse("-5.00");
    stored.document = Some(
        crate::platform::events::EventDocument::new(
            crate::platform::events::EntityDocument::Product(Box::new(product)),
        )
        .unwrap(),
    );
    w.db.write(|tx| apply_event(tx, &stored, at(0))).unwrap();
    let input = parse_init(
        &json!({"cart_items": [{"platform_id": "var-neg", "quantity": 1}]}),
        &AllowAll,
    )
    .unwrap();
    let refused = w.db.write(|tx| init(tx, &w.shop, input, at(1)));
    assert!(
        matches!(refused, Err(DomainError::Invalid(ref p))
            if p[0].field == "cart_items[0].platform_id" && p[0].code == "unpriced_variant"),
        "{refused:?}"
    );
    // And an order holding one anyway (made before) is never processed: its total, shipped
    // at 15.00, would be 0 and need no payment.
    let call = w.init(json!({"cart_items": [
        {"platform_id": "var-1", "quantity": 1, "line_item_key": "coffee"}]}));
    w.ready_to_process(&call, "tok_success");
    let mut order = w.order_by_status(CheckoutStatus::Open);
    order.document.line_items[0].price = crate::kernel::money::Cents(-1500);
    order.document.payments.clear();
    order.document.taxes.clear();
    w.db.write(|tx| Ok(tx.save_checkout_order(&order)?))
        .unwrap();
    let state =
        storefront::refresh(&w.db, &call, at(6)).unwrap().json()["application_state"].clone();
    assert_eq!(state["order_total"], 0, "{state}");
    let refused = process_order(&w.context(7), &call);
    assert!(
        matches!(refused, Err(DomainError::Invalid(ref p))
            if p.iter().any(|p| p.field == "line_items[0].price" && p.code == "negative")),
        "{refused:?}"
    );
    assert!(w.topics().is_empty(), "nothing processed: {:?}", w.topics());
}

#[test]
fn the_balance_a_refused_payment_names_is_the_orders_own() {
    let mut w = World::new();
    let call = w.init(json!({"cart_items": [
        {"platform_id": "var-1", "quantity": 2, "line_item_key": "coffee"}]}));
    w.ready_to_process(&call, "tok_success");
    add_discount(&w.context(5), &call, "TEN").unwrap();
    let more =
        parse_payment(&json!({"gateway_public_id": "test", "token": "tok_success"})).unwrap();
    let refused = add_payment(&w.db, &call, more, at(6));
    match refused {
        Err(DomainError::Invalid(ref p)) => {
            assert_eq!(
                (p[0].field.as_str(), p[0].code),
                ("amount", "nothing_to_pay")
            );
            assert!(p[0].message.contains("-1000 cents"), "{}", p[0].message);
        }
        other => panic!("{other:?}"),
    }
    // Changing the one payment: it may cover the total, 3260, and the message says the
    // balance is -1000.
    let token = storefront::payments(&w.db, &call, at(6)).unwrap().json()["payments"][0]["token"]
        .as_str()
        .unwrap()
        .to_string();
    let update = parse_payment(&json!({"gateway_public_id": "test", "token": token,
                                       "amount": 5000}))
    .unwrap();
    match storefront::update_payment(&w.db, &call, update, at(7)) {
        Err(DomainError::Invalid(ref p)) => {
            assert_eq!(p[0].code, "exceeds_balance");
            assert!(
                p[0].message.contains("3260 cents left to pay")
                    && p[0].message.contains("balance is -1000 cents"),
                "{}",
                p[0].message
            );
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_plan_without_an_upcoming_order_is_refused_before_anything_is_charged() {
    let mut w = World::new();
    let plan = |rule: &str| {
        parse_init(
            &json!({"cart_items": [{"platform_id": "var-1", "quantity": 1,
                                    "line_item_properties": {"order_rrule": rule}}]}),
            &AllowAll,
        )
        .unwrap()
    };
    // The probe's rule: two days of 2020, long gone.
    let ended = plan("DTSTART:20200101T090000Z\nRRULE:FREQ=DAILY;COUNT=2");
    let refused = w.db.write(|tx| init(tx, &w.shop, ended, at(1)));
    assert!(
        matches!(refused, Err(DomainError::Invalid(ref p))
            if p[0].field == "cart_items[0].line_item_properties.order_rrule"
                && p[0].code == "no_upcoming_order"),
        "{refused:?}"
    );
    // A daily rule begun long ago still has dates.
    let old = plan("DTSTART:19000101T090000Z\nRRULE:FREQ=DAILY");
    assert!(w.db.write(|tx| init(tx, &w.shop, old, at(1))).is_ok());
    // A rule that ends between init and Process Order: refused there, nothing paid.
    let call = w.init(json!({"cart_items": [
        {"platform_id": "var-1", "quantity": 1, "line_item_key": "plan",
         "line_item_properties": {
             "order_rrule": "DTSTART:20261101T120000Z\nRRULE:FREQ=DAILY;UNTIL=20261118T120000Z"}}]}));
    w.ready_to_process(&call, "tok_success");
    // An hour later, 12:06 of 18 November: its last date has gone by.
    let late = process_order(&w.context(3_600), &call);
    assert!(
        matches!(late, Err(DomainError::Invalid(ref p))
            if p[0].field == "line_items[0].line_item_properties.order_rrule"
                && p[0].code == "no_upcoming_order"),
        "{late:?}"
    );
    assert!(w.topics().is_empty(), "{:?}", w.topics());
}

#[test]
fn a_plan_processed_in_time_makes_its_subscription_however_late_the_push() {
    let mut w = World::new();
    // Its last date is 12:00 on 18 November; the order is processed at 11:06 that day.
    let call = w.init(json!({"cart_items": [
        {"platform_id": "var-1", "quantity": 1, "line_item_key": "plan",
         "line_item_properties": {
             "order_rrule": "DTSTART:20261101T120000Z\nRRULE:FREQ=DAILY;UNTIL=20261118T120000Z"}}]}));
    w.ready_to_process(&call, "tok_success");
    process_order(&w.context(5), &call).unwrap();
    // The push runs two days later, the rule long ended: the subscription is made all the
    // same, with the order date the rule had left when the order was processed.
    let order = w.order_by_status(CheckoutStatus::Processed);
    let job = PushOrderJob {
        checkout_id: order.id,
    };
    assert!(matches!(
        push_order(&w.db, &w.platform, job, false, at(2 * 86_400)).unwrap(),
        Pushed::Created { .. }
    ));
    let sent = w.sent(WebhookKind::Subscription);
    let (_, created) = sent
        .iter()
        .find(|(topic, _)| topic == "subscription_created")
        .expect("a subscription was made");
    assert_eq!(
        created["data"]["next_order_datetime"],
        "2026-11-18T12:00:00Z"
    );
    assert_eq!(created["data"]["placed_at"], at(5).to_rfc3339());
}

/// A `discount` override that allows one discount per order: 2.50 off, under the code as typed,
/// unless a discount is applied already.
fn one_per_order(data: &Value) -> DiscountAnswer {
    let applied = data["applied_discounts"].as_array().map_or(0, Vec::len);
    DiscountAnswer {
        valid: applied == 0,
        discount: (applied == 0).then(|| Discount {
            code: data["code"].as_str().unwrap_or_default().to_string(),
            amount: 250,
            text: "2.50 off".into(),
        }),
    }
}

#[test]
fn a_code_differing_only_by_letter_case_is_not_a_second_discount() {
    let mut w = World::new();
    *w.overrides.discount_rule.lock().unwrap() = Some(one_per_order);
    let call = w.init(json!({"cart_items": [
        {"platform_id": "var-1", "quantity": 1, "line_item_key": "coffee"}]}));
    add_discount(&w.context(2), &call, "SAVE").unwrap();
    for code in ["save", "Save", "sAVE"] {
        let refused = add_discount(&w.context(2), &call, code);
        assert!(
            matches!(refused, Err(DomainError::Invalid(ref p)) if p[0].code == "invalid_discount"),
            "{code}: {refused:?}"
        );
    }
    // The override was shown SAVE each time it was asked about another spelling of it.
    for request in &discount_requests(&w)[1..] {
        assert_eq!(request["applied_discounts"][0]["code"], "SAVE", "{request}");
    }
    let state =
        storefront::refresh(&w.db, &call, at(3)).unwrap().json()["application_state"].clone();
    assert_eq!(state["discounts"].as_array().unwrap().len(), 1, "{state}");
    assert_eq!(state["order_total"], 1250 - 250);

    // An override that takes every code, answering it as typed, or answering no code: each
    // spelling values the one discount again.
    fn any_code_as_typed(data: &Value) -> DiscountAnswer {
        DiscountAnswer {
            valid: true,
            discount: Some(Discount {
                code: data["code"].as_str().unwrap_or_default().to_string(),
                amount: 250,
                text: String::new(),
            }),
        }
    }
    fn any_code_unnamed(_: &Value) -> DiscountAnswer {
        DiscountAnswer {
            valid: true,
            discount: Some(Discount {
                code: String::new(),
                amount: 250,
                text: String::new(),
            }),
        }
    }
    for rule in [any_code_as_typed as DiscountRule, any_code_unnamed] {
        *w.overrides.discount_rule.lock().unwrap() = Some(rule);
        for code in ["save", "Save", "sAVE", "SAVE"] {
            add_discount(&w.context(4), &call, code).unwrap();
        }
        let state =
            storefront::refresh(&w.db, &call, at(5)).unwrap().json()["application_state"].clone();
        assert_eq!(state["discounts"].as_array().unwrap().len(), 1, "{state}");
        assert_eq!(state["order_total"], 1250 - 250);
        assert!(consistent(&state));
    }
    // Processed: the one discount, valued again without itself among those applied.
    *w.overrides.discount_rule.lock().unwrap() = Some(one_per_order);
    w.ready_to_process(&call, "tok_success");
    let processed = process_order(&w.context(6), &call).unwrap().json();
    let state = &processed["application_state"];
    assert_eq!(state["discounts"].as_array().unwrap().len(), 1, "{state}");
    assert_eq!(state["discounts"][0]["value"], 250);
}

/// The field and code of a 422's first problem.
fn first_problem<T: std::fmt::Debug>(result: Result<T, DomainError>) -> (String, &'static str) {
    match result {
        Err(DomainError::Invalid(problems)) => (problems[0].field.clone(), problems[0].code),
        other => panic!("expected 422, got {other:?}"),
    }
}

/// Properties of one name whose JSON (`{"k":"…"}`) is `bytes` long.
fn properties_of(bytes: usize) -> Value {
    json!({ "k": "v".repeat(bytes - 8) })
}

#[test]
fn line_item_properties_hold_at_most_16_kib() {
    use crate::checkout::input::parse_add_line_item;
    let line = |properties: Value| {
        json!({"cart_items": [{"platform_id": "var-1", "quantity": 1,
                               "line_item_properties": properties}]})
    };
    assert!(parse_init(&line(properties_of(16 * 1024)), &AllowAll).is_ok());
    assert_eq!(
        first_problem(parse_init(&line(properties_of(16 * 1024 + 1)), &AllowAll)),
        (
            "cart_items[0].line_item_properties".to_string(),
            "too_large"
        )
    );
    let added = |name: &str, properties: Value| {
        let mut body = json!({"platform_id": "var-1", "quantity": 1});
        body[name] = properties;
        parse_add_line_item(&body)
    };
    assert!(added("line_item_properties", properties_of(16 * 1024)).is_ok());
    assert_eq!(
        first_problem(added("line_item_properties", properties_of(16 * 1024 + 1))),
        ("line_item_properties".to_string(), "too_large")
    );
    assert_eq!(
        first_problem(added("properties", properties_of(16 * 1024 + 1))),
        ("properties".to_string(), "too_large")
    );
}

#[test]
fn a_checkout_holds_at_most_512_kib() {
    use crate::checkout::input::{parse_add_line_item, parse_meta_data_patch};
    use crate::checkout::state::MAX_DOCUMENT_BYTES;
    let mut w = World::new();
    // Lines of 16 KiB properties each: Init Order of 40 of them is over 512 KiB.
    let lines: Vec<Value> = (0..40)
        .map(|index| {
            json!({"platform_id": "var-1", "quantity": 1,
                            "line_item_key": format!("line-{index}"),
                            "line_item_properties": properties_of(16 * 1024)})
        })
        .collect();
    let input = parse_init(&json!({ "cart_items": lines }), &AllowAll).unwrap();
    assert_eq!(
        first_problem(w.db.write(|tx| init(tx, &w.shop, input, at(1)))),
        ("cart_items".to_string(), "too_large")
    );
    // Added one by one at the storefront: the line that would take it over is refused, and the
    // order stays as it was.
    let call = w.init(json!({"cart_items": [{"platform_id": "var-1", "quantity": 1}]}));
    let mut added = 0;
    let refused = loop {
        let body = json!({"platform_id": "var-1", "quantity": 1,
                          "line_item_key": format!("line-{added}"),
                          "line_item_properties": properties_of(16 * 1024)});
        match storefront::add_line_item(&w.db, &call, parse_add_line_item(&body).unwrap(), at(2)) {
            Ok(_) => added += 1,
            refused => break refused,
        }
        assert!(added < 40, "never refused");
    };
    assert_eq!(
        first_problem(refused),
        ("line_item_properties".to_string(), "too_large")
    );
    let order = w.order_by_status(CheckoutStatus::Open);
    assert_eq!(order.document.line_items.len(), added + 1);
    let size = serde_json::to_vec(&order.document).unwrap().len();
    assert!(
        size <= MAX_DOCUMENT_BYTES && size > MAX_DOCUMENT_BYTES - 17 * 1024,
        "{size}"
    );
    // Meta data too.
    let patch = parse_meta_data_patch(&json!({"notes": "n".repeat(60 * 1024)})).unwrap();
    assert_eq!(
        first_problem(storefront::patch_meta_data(&w.db, &call, patch, at(3))),
        ("order_meta_data".to_string(), "too_large")
    );
    // An order stored over the limit before it existed can still shrink, never grow.
    let mut order = w.order_by_status(CheckoutStatus::Open);
    order.document.order_meta_data.notes = "n".repeat(60 * 1024);
    w.db.write(|tx| Ok(tx.save_checkout_order(&order)?))
        .unwrap();
    let patch = parse_meta_data_patch(&json!({"notes": "n".repeat(50 * 1024)})).unwrap();
    storefront::patch_meta_data(&w.db, &call, patch, at(4)).unwrap();
    storefront::delete_line_item(&w.db, &call, "line-0", at(5)).unwrap();
}

#[test]
fn quantities_are_1_to_10000_and_prices_at_most_100000000_minor_units() {
    use crate::checkout::input::{parse_add_line_item, parse_line_item_quantity};
    let mut w = World::new();
    let cart =
        |quantity: i64| json!({"cart_items": [{"platform_id": "var-1", "quantity": quantity}]});
    assert!(parse_init(&cart(10_000), &AllowAll).is_ok());
    for out in [0, 10_001, i64::MAX] {
        assert_eq!(
            first_problem(parse_init(&cart(out), &AllowAll)),
            ("cart_items[0].quantity".to_string(), "out_of_range"),
            "{out}"
        );
    }
    let add =
        |quantity: i64| parse_add_line_item(&json!({"platform_id": "var-1", "quantity": quantity}));
    assert!(add(10_000).is_ok());
    assert_eq!(
        first_problem(add(10_001)),
        ("quantity".to_string(), "out_of_range")
    );
    let update = |quantity: i64| {
        parse_line_item_quantity(&json!({"line_item_key": "k", "quantity": quantity}))
    };
    assert!(update(10_000).is_ok());
    assert_eq!(
        first_problem(update(10_001)),
        ("quantity".to_string(), "out_of_range")
    );
    // Two lines of one key add up to at most 10,000.
    let input = parse_init(
        &json!({"cart_items": [
            {"platform_id": "var-1", "quantity": 10_000, "line_item_key": "a"},
            {"platform_id": "var-1", "quantity": 1, "line_item_key": "a"}]}),
        &AllowAll,
    )
    .unwrap();
    assert_eq!(
        first_problem(w.db.write(|tx| init(tx, &w.shop, input, at(1)))),
        ("cart_items[1].quantity".to_string(), "out_of_range")
    );
    // A catalogue price of 1,000,000.00 sells; one cent more does not.
    apply(
        &w.db,
        w.shop.id,
        EntityKind::Product,
        &product_priced("1000000.00"),
    );
    let call = w.init(json!({"cart_items": [{"platform_id": "var-neg", "quantity": 10_000}]}));
    let state =
        storefront::refresh(&w.db, &call, at(2)).unwrap().json()["application_state"].clone();
    assert_eq!(state["order_total"], 100_000_000i64 * 10_000);
    let mut dearer = product_priced("1000000.01");
    dearer["data"]["product"]["platform_updated_at"] = json!("2026-11-03T00:00:00Z");
    apply(&w.db, w.shop.id, EntityKind::Product, &dearer);
    let input = parse_init(
        &json!({"cart_items": [{"platform_id": "var-neg", "quantity": 1}]}),
        &AllowAll,
    )
    .unwrap();
    assert_eq!(
        first_problem(w.db.write(|tx| init(tx, &w.shop, input, at(3)))),
        ("cart_items[0].platform_id".to_string(), "unpriced_variant")
    );
}

#[test]
fn an_order_whose_amounts_overflow_is_never_saved_nor_charged() {
    let mut w = World::new();
    let call = w.init(json!({"cart_items": [
        {"platform_id": "var-1", "quantity": 1, "line_item_key": "coffee"}]}));
    w.ready_to_process(&call, "tok_success");
    // An order stored before the bounds, its amounts past what i64 holds.
    let mut order = w.order_by_status(CheckoutStatus::Open);
    order.document.line_items[0].price = crate::kernel::money::Cents(i64::MAX / 2);
    order.document.line_items[0].quantity = 3;
    w.db.write(|tx| Ok(tx.save_checkout_order(&order)?))
        .unwrap();
    assert_eq!(
        first_problem(process_order(&w.context(7), &call)),
        ("order_total".to_string(), "out_of_range")
    );
    let customer = parse_customer(&json!({"email_address": "ada@example.test"})).unwrap();
    assert_eq!(
        first_problem(set_customer(&w.db, &call, customer, at(8))),
        ("order_total".to_string(), "out_of_range")
    );
    assert!(w.topics().is_empty(), "nothing processed: {:?}", w.topics());
}

#[test]
fn an_order_of_a_customer_the_platform_knows_is_theirs_not_a_guests() {
    let mut w = World::new();
    // The platform's customer of the checkout's email, received as a Customer Saved event.
    apply(
        &w.db,
        w.shop.id,
        EntityKind::Customer,
        &json!({"data": {"customer": {"platform_id": "cus-ada",
            "platform_updated_at": "2026-11-01T00:00:00Z", "email": "ada@example.test",
            "first_name": "Ada"}}}),
    );
    let call = w.init(json!({"cart_items": [
        {"platform_id": "var-1", "quantity": 1, "line_item_key": "coffee"}]}));
    w.ready_to_process(&call, "tok_success");
    process_order(&w.context(5), &call).unwrap();
    assert!(matches!(w.push(), Pushed::Created { .. }));
    w.platform.state(|p| {
        assert_eq!(
            p.orders[0]
                .platform_customer_id
                .as_ref()
                .map(|id| id.as_str()),
            Some("cus-ada")
        );
    });
    // A customer the platform does not know: a guest order, with the email on its addresses.
    let call = w.init(json!({"cart_items": [
        {"platform_id": "var-1", "quantity": 1, "line_item_key": "coffee"}]}));
    let customer = parse_customer(&json!({"email_address": "guest@example.test"})).unwrap();
    w.ready_to_process(&call, "tok_success");
    set_customer(&w.db, &call, customer, at(5)).unwrap();
    process_order(&w.context(6), &call).unwrap();
    assert!(matches!(w.push(), Pushed::Created { .. }));
    w.platform.state(|p| {
        assert_eq!(p.orders[1].platform_customer_id, None);
        let billing = p.orders[1].billing_address.as_ref().unwrap();
        assert_eq!(billing.email.as_deref(), Some("guest@example.test"));
    });
}
