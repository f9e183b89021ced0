//! Subscription analytics end to end against the real `mercer` binary on SQLite and PostgreSQL
//! (docs/subscriptions.md, "Analytics"). A shop in New York gets, on two days of its own (the
//! binary's clock started at each with `--clock-start`, restarted between them), subscriptions
//! of five billing rules with quantities, line item and percent discounts and a shipping line;
//! some are cancelled with and without a reason, paused, resumed, changed in quantity, and the
//! scheduler places one order and fails another through the platform simulator. Every figure
//! of `GET /analytics` is worked out here from what was seeded, to the cent, for periods that
//! hold both days, one of them, and none; bad queries are 422s on their parameter; and the
//! console's overview shows the same figures with a chart.

use std::collections::BTreeMap;

use mercer_platform_sim::{DECLINED_TOKEN, RunningSimulator};
use mercer_tests::{Backend, TestDatabase, backend_tests};
use serde_json::{Value, json};

use crate::console::{session, staff};
use crate::scheduler::{connect_orders, orders, start, wait_for};
use crate::subscriptions::{Api, id_of, ok, problems};

const ZONE: &str = "America/New_York";
/// 03:00 UTC on 7 January is still 6 January in New York: the first day's events are the 6th's.
const FIRST_DAY_CLOCK: &str = "2030-01-07T03:00:00Z";
/// 09:59:50 in New York on 8 January, ten seconds before two orders come due.
const SECOND_DAY_CLOCK: &str = "2030-01-08T14:59:50Z";
const ORDER_DATE: &str = "2030-01-08T15:00:00Z";
const LATER: &str = "2030-02-01T15:00:00Z";

/// A subscription as this test seeds it, with the figures it works out for it.
struct Seeded {
    rule: &'static str,
    /// (unit price, quantity, fixed discount per unit)
    items: Vec<(i64, i64, i64)>,
    percent: i64,
    shipping: i64,
}

impl Seeded {
    /// One order's total after discounts: the items' discounted prices times their quantities,
    /// less the percent discount of that subtotal rounded half up, plus shipping.
    fn order_total(&self) -> i64 {
        let subtotal: i64 = self
            .items
            .iter()
            .map(|(price, quantity, off)| (price - off) * quantity)
            .sum();
        let discount = (subtotal * self.percent * 2 + 100) / 200;
        subtotal - discount + self.shipping
    }

    /// The order total over 30 days at the rule's average pace, rounded half up: `total × 30 ÷
    /// days`, the days between orders as `numerator / denominator`.
    fn mrr(&self) -> i64 {
        // A month is 146,097 / 4,800 days on average.
        let (numerator, denominator): (i64, i64) = match self.rule {
            "FREQ=WEEKLY" => (7, 1),
            "FREQ=WEEKLY;INTERVAL=2" => (14, 1),
            "FREQ=DAILY;INTERVAL=10" => (10, 1),
            "FREQ=MONTHLY" => (146_097, 4_800),
            "FREQ=MONTHLY;INTERVAL=3" => (3 * 146_097, 4_800),
            other => panic!("no pace worked out for {other}"),
        };
        let scaled = i128::from(self.order_total()) * 30 * i128::from(denominator);
        let numerator = i128::from(numerator);
        i64::try_from((scaled + numerator / 2) / numerator).unwrap()
    }

    fn body(&self, email: &str, next: &str, token: &str) -> Value {
        let items: Vec<Value> = self
            .items
            .iter()
            .enumerate()
            .map(|(i, (price, quantity, off))| {
                let mut item = json!({"platform_product_id": format!("p{i}"),
                    "platform_variant_id": format!("v{i}"), "quantity": quantity, "price": price});
                if *off > 0 {
                    item["discounts"] =
                        json!([{"discount_type": "fixed_amount", "fixed_value": off}]);
                }
                item
            })
            .collect();
        let mut subscription = json!({
            "subscription_status": "active",
            // The rule starts on the next order date: no date of it comes before.
            "order_rrule": format!("DTSTART:{}\nRRULE:{}", next.replace(['-', ':'], ""), self.rule),
            "next_order_datetime": next,
            "line_items": items,
            "percent_discount": self.percent,
            "shipping_address": {"street1": "1 Main St", "city": "New York", "country_code": "US"},
            "payment_details": {"gateway_name": "test", "gateway_payment_id": token}
        });
        if self.shipping > 0 {
            subscription["shipping_lines"] = json!([{"name": "Standard", "price": self.shipping}]);
        }
        json!({"customer": {"email": email, "first_name": "Ada"}, "subscription": subscription})
    }
}

/// What the test expects of one period.
#[derive(Default)]
struct Expected {
    active_start: i64,
    active_end: i64,
    new: i64,
    cancelled: i64,
    paused: i64,
    mrr_start: i64,
    mrr_end: i64,
    placed: i64,
    failed: i64,
    revenue: i64,
    reasons: BTreeMap<Option<&'static str>, i64>,
}

impl Expected {
    fn answer(&self, currency: &str) -> Value {
        let churn = if self.active_start == 0 {
            Value::Null
        } else {
            // Four decimals, half up.
            let ten_thousandths =
                (self.cancelled * 20_000 + self.active_start) / (2 * self.active_start);
            json!(ten_thousandths as f64 / 10_000.0)
        };
        let mut reasons: Vec<(Option<&str>, i64)> =
            self.reasons.iter().map(|(r, c)| (*r, *c)).collect();
        reasons.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        json!({"analytics": {
            "currency": currency,
            "active_start": self.active_start,
            "active_end": self.active_end,
            "new": self.new,
            "cancelled": self.cancelled,
            "paused": self.paused,
            "churn_rate": churn,
            "mrr_start_cents": self.mrr_start,
            "mrr_end_cents": self.mrr_end,
            "orders_placed": self.placed,
            "orders_failed": self.failed,
            "revenue_cents": self.revenue,
            "cancellation_reasons": reasons.iter()
                .map(|(reason, count)| json!({"reason": reason, "count": count}))
                .collect::<Vec<_>>(),
        }})
    }
}

fn analytics(api: &Api<'_>, from: &str, to: &str) -> Value {
    ok(api.get(&format!("/analytics?from={from}&to={to}")))
}

fn action(api: &Api<'_>, id: i64, name: &str, body: Value) {
    ok(api.send("POST", &format!("/subscriptions/{id}/{name}"), &body));
}

fn the_figures_of_a_period_are_what_was_seeded_in_it(backend: Backend) {
    let sim = RunningSimulator::start().unwrap();
    let server = start(
        TestDatabase::create(backend),
        &["--clock-start", FIRST_DAY_CLOCK],
    );
    let api = Api::demo(&server);
    let zone = server.cli(&["shop", "update", "--shop", &api.shop, "--timezone", ZONE]);
    assert!(zone.success, "{}", zone.stderr);
    connect_orders(&server, &api.shop, &api.token, &sim);
    ok(api.send(
        "PUT",
        "/settings/cancellation_reasons",
        &json!({"cancellation_reasons": [{"code": "too_expensive", "label": "Too expensive"},
                                         {"code": "moved", "label": "Moved away"}]}),
    ));
    // A failed order waits a day for its retry: one failure in this test.
    ok(api.send(
        "PUT",
        "/settings/dunning",
        &json!({"dunning": {"retry_intervals_s": [86400], "at_max_retries": "cancel"}}),
    ));

    // The first day (6 January in New York).
    let weekly = Seeded {
        rule: "FREQ=WEEKLY",
        items: vec![(1250, 2, 0)],
        percent: 0,
        shipping: 0,
    };
    let monthly = Seeded {
        rule: "FREQ=MONTHLY",
        items: vec![(2000, 1, 200)],
        percent: 10,
        shipping: 500,
    };
    let ten_days = Seeded {
        rule: "FREQ=DAILY;INTERVAL=10",
        items: vec![(999, 3, 0)],
        percent: 0,
        shipping: 0,
    };
    let quarterly = Seeded {
        rule: "FREQ=MONTHLY;INTERVAL=3",
        items: vec![(4500, 1, 0), (300, 2, 0)],
        percent: 15,
        shipping: 0,
    };
    let fortnightly = Seeded {
        rule: "FREQ=WEEKLY;INTERVAL=2",
        items: vec![(1000, 1, 0)],
        percent: 0,
        shipping: 0,
    };
    let s1 = api.create(&weekly.body("s1@example.test", ORDER_DATE, "tok_success"));
    let currency = s1["charged_currency"].as_str().unwrap().to_string();
    let s1 = id_of(&s1);
    let s2 = id_of(&api.create(&monthly.body("s2@example.test", ORDER_DATE, DECLINED_TOKEN)));
    let s3 = id_of(&api.create(&ten_days.body("s3@example.test", LATER, "tok_success")));
    let s4 = id_of(&api.create(&quarterly.body("s4@example.test", LATER, "tok_success")));
    let s5 = id_of(&api.create(&fortnightly.body("s5@example.test", LATER, "tok_success")));
    action(
        &api,
        s5,
        "cancel",
        json!({"reason": "too_expensive", "comment": "pricey"}),
    );
    action(&api, s4, "pause", json!({}));

    let first_day = Expected {
        active_start: 0,
        active_end: 3,
        new: 5,
        cancelled: 1,
        paused: 1,
        mrr_start: 0,
        mrr_end: weekly.mrr() + monthly.mrr() + ten_days.mrr(),
        reasons: BTreeMap::from([(Some("too_expensive"), 1)]),
        ..Expected::default()
    };
    assert_eq!(
        analytics(&api, "2030-01-06", "2030-01-06"),
        first_day.answer(&currency)
    );
    // UTC's day of those events (the 7th) is no day of the shop's.
    let seventh = Expected {
        active_start: 3,
        active_end: 3,
        mrr_start: first_day.mrr_end,
        mrr_end: first_day.mrr_end,
        ..Expected::default()
    };
    assert_eq!(
        analytics(&api, "2030-01-07", "2030-01-07"),
        seventh.answer(&currency)
    );

    // The second day (8 January in New York): the two orders come due.
    let (shop, token) = (api.shop.clone(), api.token.clone());
    drop(api);
    let server = start(server.into_database(), &["--clock-start", SECOND_DAY_CLOCK]);
    let api = Api {
        server: &server,
        shop,
        token,
    };
    wait_for(&api, s1, 30, |s| s["orders_processed"] == 1);
    wait_for(&api, s2, 30, |s| s["current_retries"] == 1);
    let placed = orders(&sim, &api.shop);
    assert_eq!(placed.len(), 2, "one order each, one of them declined");
    let s1_now = api.subscription(s1);
    let line = id_of(&s1_now["line_items"][0]);
    ok(api.send(
        "PUT",
        &format!("/subscriptions/{s1}/line_items/{line}/quantity"),
        &json!({"quantity": 3}),
    ));
    action(&api, s3, "cancel", json!({"reason": "moved"}));
    action(&api, s4, "resume", json!({}));
    let extra = Seeded {
        rule: "FREQ=WEEKLY",
        items: vec![(700, 1, 0)],
        percent: 0,
        shipping: 0,
    };
    let s6 = id_of(&api.create(&extra.body("s6@example.test", LATER, "tok_success")));
    action(&api, s6, "cancel", json!({}));

    let weekly_of_three = Seeded {
        items: vec![(1250, 3, 0)],
        ..weekly
    };
    let second_day = Expected {
        active_start: 3,
        active_end: 3,
        new: 1,
        cancelled: 2,
        paused: 0,
        mrr_start: first_day.mrr_end,
        mrr_end: weekly_of_three.mrr() + monthly.mrr() + quarterly.mrr(),
        placed: 1,
        failed: 1,
        // The weekly order as it was placed: two units.
        revenue: 2 * 1250,
        reasons: BTreeMap::from([(Some("moved"), 1), (None, 1)]),
    };
    assert_eq!(
        analytics(&api, "2030-01-07", "2030-01-08"),
        second_day.answer(&currency)
    );
    let both = Expected {
        active_start: 0,
        active_end: 3,
        new: 6,
        cancelled: 3,
        paused: 1,
        mrr_start: 0,
        mrr_end: second_day.mrr_end,
        placed: 1,
        failed: 1,
        revenue: 2500,
        reasons: BTreeMap::from([(Some("too_expensive"), 1), (Some("moved"), 1), (None, 1)]),
    };
    assert_eq!(
        analytics(&api, "2030-01-06", "2030-12-31"),
        both.answer(&currency)
    );
    let before = Expected::default();
    assert_eq!(
        analytics(&api, "2029-01-01", "2030-01-05"),
        before.answer(&currency)
    );

    // Bad queries: each problem on its parameter.
    let bad = |query: &str| problems(&api.get(&format!("/analytics{query}")));
    let pair = |field: &str, code: &str| (field.to_string(), code.to_string());
    assert_eq!(
        bad("?from=2030-01-06"),
        [pair("to", "required")],
        "a missing date"
    );
    assert_eq!(bad(""), [pair("from", "required"), pair("to", "required")]);
    assert_eq!(
        bad("?from=2030-13-01&to=8.1.2030"),
        [pair("from", "invalid_date"), pair("to", "invalid_date")]
    );
    assert_eq!(
        bad("?from=2030-01-08&to=2030-01-07"),
        [pair("to", "out_of_range")]
    );
    assert_eq!(
        bad("?from=2000-01-01&to=2030-01-07"),
        [pair("to", "out_of_range")]
    );

    // The console's overview: the same figures, with a chart.
    staff(&server, &api.shop, "ops@analytics.test");
    let (cookie, _) = session(&server, &api.shop, "ops@analytics.test");
    let page = server
        .get("/console?from=2030-01-07&to=2030-01-08")
        .header("Cookie", &cookie)
        .call();
    assert_eq!(page.status, 200, "{}", page.text);
    let html = &page.text;
    assert!(html.contains("<svg"), "no chart: {html}");
    for (label, figure) in [
        ("Active at the start", second_day.active_start.to_string()),
        ("New", second_day.new.to_string()),
        ("Cancelled", second_day.cancelled.to_string()),
        ("Orders placed", second_day.placed.to_string()),
        ("Orders failed", second_day.failed.to_string()),
        ("MRR at the end", cents(second_day.mrr_end)),
        ("Revenue", cents(second_day.revenue)),
    ] {
        let shown = format!("<dt>{label}</dt><dd>{figure}");
        assert!(html.contains(&shown), "{shown} not in {html}");
    }
    assert!(html.contains("moved"), "{html}");
}

/// Cents as the console writes them: `1,234.56`.
fn cents(amount: i64) -> String {
    let whole = (amount / 100).to_string();
    let mut grouped = String::new();
    for (i, digit) in whole.chars().enumerate() {
        if i > 0 && (whole.len() - i).is_multiple_of(3) {
            grouped.push(',');
        }
        grouped.push(digit);
    }
    format!("{grouped}.{:02}", amount % 100)
}

backend_tests!(the_figures_of_a_period_are_what_was_seeded_in_it);
