//! The subscriber portal in headless Chromium with JavaScript off, on SQLite and PostgreSQL,
//! against the real `mercer` binary and the platform simulator's customer tokens: a subscriber
//! enters through the shop's link, sees their subscriptions, and takes every action by filling
//! and submitting the pages' forms (skip, pause until a date, resume, a quantity, how often,
//! the address, a box's contents, refused above the size's maximum, and cancel with a reason);
//! after each, the API shows the change, logged as the customer's. At 390 px wide the pages do
//! not scroll sideways and their forms work. Another customer's subscription is a 404 page.
//! Screenshots of each page at both widths go to `target/portal-screenshots/<database>/`
//! (docs/portal.md shows the SQLite run's).

use std::path::PathBuf;

use mercer_tests::browser::{browser, report_skip};
use mercer_tests::{Backend, MercerServer, TestDatabase, backend_tests};
use serde_json::{Value, json};

use crate::portal::{World, world};

/// The screenshots the tour takes, at each width.
const PAGES: [&str; 5] = ["list", "subscription", "box", "refused", "cancel"];

fn screenshots(backend: Backend) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../target/portal-screenshots")
        .join(format!("{backend:?}").to_lowercase())
}

/// The catalogue's vegetables with names, newer than the nameless ones `world` saves (so
/// whichever is applied last, these stay).
fn named_vegetables(server: &MercerServer) {
    let demo = server.demo();
    let saved = server
        .post(&format!(
            "/products/v1/shops/{}/platforms/custom/webhooks/products/saved",
            demo.shop
        ))
        .bearer(&demo.token)
        .json(
            &json!({"data": {"product": {"platform_id": "veg", "name": "Vegetables",
            "platform_updated_at": "2026-11-02T00:00:00Z",
            "variants": [{"platform_id": "carrot", "name": "Carrots", "price": "2.00"},
                         {"platform_id": "kale", "name": "Kale", "price": "3.00"}]}}}),
        );
    assert_eq!(saved.status, 202, "{}", saved.text);
}

/// A second time slot, for the box's second order (17 January), with both vegetables.
fn second_week(w: &World<'_>) {
    let box_id = w.box_id;
    let slot = w.admin.ok(
        "POST",
        &format!("/boxes/{box_id}/time_slots"),
        Some(
            &json!({"time_slot_name": "Week 3", "visibility_date": "2020-01-01T00:00:00Z",
            "selection_deadline_date": "2030-01-15T00:00:00Z",
            "start_date": "2030-01-16T00:00:00Z", "end_date": "2030-01-18T23:59:59Z"}),
        ),
        201,
    )["data"]["time-slot"]["id"]
        .as_i64()
        .unwrap();
    for product in [w.carrot, w.kale] {
        w.admin.ok(
            "POST",
            &format!("/time_slots/{slot}/options"),
            Some(&json!({"box_product_id": product})),
            200,
        );
    }
}

/// A coffee club (weekly, or every two weeks) with no box: its group's id and rules.
fn coffee_club(w: &World<'_>) -> (Value, Value, Value) {
    let group = w.api(
        "POST",
        "/subscription_groups",
        Some(
            json!({"subscription_group": {"name": "Coffee club", "billing_rules": [
            {"interval_number": 1, "interval_type": "week"},
            {"interval_number": 2, "interval_type": "week"}]}}),
        ),
    )["subscription_group"]
        .clone();
    let rules = &group["billing_rules"];
    (
        group["id"].clone(),
        rules[0]["id"].clone(),
        rules[1]["id"].clone(),
    )
}

/// A weekly subscription of `email` from 10 January 2030 with one line item.
fn subscribe(w: &World<'_>, email: &str, line: Value) -> Value {
    w.api(
        "POST",
        "/subscriptions",
        Some(json!({
            "customer": {"email": email},
            "subscription": {
                "subscription_status": "active",
                "next_order_datetime": "2030-01-10T09:00:00Z",
                "line_items": [line],
                "shipping_address": {"first_name": "Ada", "last_name": "Lovelace",
                    "street1": "1 Rue de la Paix", "city": "Lyon", "zip": "69001",
                    "country_code": "FR"}}})),
    )["subscription"]
        .clone()
}

/// The shop and its subscribers: Ada with a coffee subscription (weekly or every two weeks)
/// and a veg box, Bob with a coffee subscription of his own.
struct Shop<'a> {
    w: World<'a>,
    ada: String,
    plain: Value,
    boxed: Value,
    bobs: Value,
    /// The coffee club's every-two-weeks rule.
    fortnightly: Value,
}

fn shop(server: &MercerServer) -> Shop<'_> {
    named_vegetables(server);
    let w = world(server);
    second_week(&w);
    let branded = server.cli(&[
        "shop",
        "update",
        "--shop",
        w.shop(),
        "--portal-accent",
        "#0a7",
    ]);
    assert!(branded.success, "{}", branded.stderr);
    w.api(
        "PUT",
        "/settings/cancellation_reasons",
        Some(json!({"cancellation_reasons": [
            {"code": "too_much", "label": "I have too much"},
            {"code": "moving", "label": "I am moving"}]})),
    );
    let (club, weekly, fortnightly) = coffee_club(&w);
    let coffee = json!({"platform_product_id": "coffee", "platform_variant_id": "coffee-1kg",
        "title": "Coffee beans, 1 kg", "quantity": 1, "price": 1450,
        "subscription_group_id": club, "interval_id": weekly});
    let ada = w.customer("ada@example.test", "Ada");
    let plain = subscribe(&w, "ada@example.test", coffee.clone());
    let rule = w.api("GET", &format!("/subscription_groups/{}", w.group), None)
        ["subscription_group"]["billing_rules"][0]["id"]
        .clone();
    let boxed = subscribe(
        &w,
        "ada@example.test",
        json!({"platform_product_id": "veg-box", "platform_variant_id": "veg-box-weekly",
               "title": "Veg box", "quantity": 1, "price": 2400,
               "subscription_group_id": w.group, "interval_id": rule}),
    );
    w.customer("bob@example.test", "Bob");
    let bobs = subscribe(&w, "bob@example.test", coffee);
    Shop {
        w,
        ada,
        plain,
        boxed,
        bobs,
        fortnightly,
    }
}

impl Shop<'_> {
    fn home(&self) -> String {
        format!("/portal/shops/{}", self.w.shop())
    }

    /// The full URL of subscription `id`'s page.
    fn page_of(&self, id: &Value) -> String {
        let server = self.w.admin.server;
        server.url(&format!("{}/subscriptions/{id}", self.home()))
    }

    /// What the browser does (the script's plan).
    fn plan(&self) -> Value {
        let (w, server) = (&self.w, self.w.admin.server);
        json!({
            "api": server.base_url,
            "token": w.admin.token,
            "shop": w.shop(),
            "customer": self.ada,
            "entry": server.url(&w.entry(&self.ada)),
            "home": server.url(&self.home()),
            "plain": {"id": self.plain["id"], "line": self.plain["line_items"][0]["id"],
                      "interval": self.fortnightly},
            "box": {"id": self.boxed["id"], "line": self.boxed["line_items"][0]["id"],
                    "size": w.size, "carrot": w.carrot, "kale": w.kale,
                    "too_many": [3, 2], "chosen": [2, 1]},
            "resume_on": "2031-03-01",
            "address": {"street1": "2 Rue Neuve", "city": "Paris", "zip": "75001"},
            "reason": "moving",
            "comment": "Off to Lisbon for a year",
            "other": self.page_of(&self.bobs["id"]),
        })
    }
}

fn a_subscriber_manages_their_subscriptions_in_a_browser(backend: Backend) {
    let browser = match browser() {
        Ok(browser) => browser,
        Err(skipped) => {
            report_skip(&skipped);
            return;
        }
    };
    let server =
        MercerServer::start_with(TestDatabase::create(backend), &["--allow-private-targets"]);
    let shop = shop(&server);
    let shots = screenshots(backend);
    let seen = browser.portal_tour(&shop.plan(), &shots);

    assert_entry(&seen, &shop);
    let plain = &shop.plain;
    assert_actions(&seen, plain, &shop.page_of(&plain["id"]), &shop.ada);
    assert_boxes(
        &seen,
        &shop.boxed,
        &shop.page_of(&shop.boxed["id"]),
        &shop.w,
    );

    // Another customer's subscription, in the same session: the 404 page.
    assert_eq!(seen["other"]["status"], 404, "{seen}");
    assert!(
        !seen["other"]["body"].as_str().unwrap().contains("Coffee"),
        "{seen}"
    );
    let bobs = shop.w.subscription(&shop.bobs["id"]);
    assert_eq!(bobs["subscription_status"], "active");

    assert_phone(&seen);
    for device in ["desktop", "phone"] {
        for page in PAGES {
            let shot = shots.join(format!("{device}-{page}.png"));
            assert!(shot.exists(), "{}", shot.display());
        }
    }
}

/// Entered: a 303 to the list without the token, a cookie scripts cannot read; greeted by first
/// name, with Ada's two subscriptions and not Bob's.
fn assert_entry(seen: &Value, shop: &Shop<'_>) {
    let (home, plain, boxed) = (shop.home(), &shop.plain, &shop.boxed);
    assert_eq!(seen["entry"]["status"], 303, "{seen}");
    assert_eq!(
        seen["entry"]["url"],
        shop.w.admin.server.url(&home),
        "{seen}"
    );
    assert_eq!(seen["cookie"]["httpOnly"], true, "{seen}");
    assert_eq!(seen["cookie"]["sameSite"], "Lax", "{seen}");
    assert_eq!(seen["cookie"]["path"], home, "{seen}");
    assert_eq!(seen["greeting"], "Hello, Ada", "{seen}");
    assert_eq!(
        seen["listed"],
        json!([
            format!("subscription-{}", plain["id"]),
            format!("subscription-{}", boxed["id"])
        ]),
        "{seen}"
    );
    assert_eq!(seen["opened"]["url"], shop.page_of(&plain["id"]), "{seen}");
    assert_eq!(seen["opened"]["title"], "Coffee beans, 1 kg", "{seen}");
}

/// At 390 px: no sideways scroll, every control inside the screen.
fn assert_phone(seen: &Value) {
    let fits = seen["fits"].as_object().unwrap();
    for page in ["list", "subscription", "box", "refused", "cancel", "other"] {
        let fit = &fits[&format!("phone-{page}")];
        assert_eq!(fit["innerWidth"], 390, "{page}: {fit}");
        assert!(
            fit["scrollWidth"].as_i64().unwrap() <= 390,
            "{page} scrolls sideways: {fit}"
        );
        assert_eq!(fit["outside"], json!([]), "{page}: {fit}");
    }
    assert!(fits["phone-subscription"]["controls"].as_i64().unwrap() > 10);
}

/// What an action's answer and the API after it must show: a 303 back to the page, the change,
/// and a status log entry of the customer `ada` (platform id) with `reason`.
fn assert_done<'a>(
    seen: &'a Value,
    action: &str,
    page: &str,
    ada: &str,
    reason: &str,
) -> &'a Value {
    let done = &seen["actions"][action];
    assert_eq!(done["status"], 303, "{action}: {done}");
    assert_eq!(
        done["location"].as_str().map(|l| page.ends_with(l)),
        Some(true),
        "{action}: {done}"
    );
    assert_eq!(done["url"], page, "{action}: {done}");
    assert_eq!(done["landed"], 200, "{action}: {done}");
    assert_eq!(done["alerts"], json!([]), "no problem shown: {done}");
    let after = &done["after"];
    if !reason.is_empty() {
        let log = &after["latest_status_log"];
        assert_eq!(log["reason"], reason, "{action}: {log}");
        assert_eq!(
            log["metadata"]["user"]["type"], "customer",
            "{action}: {log}"
        );
        assert_eq!(log["metadata"]["user"]["id"], after["customer_id"], "{log}");
        assert_eq!(log["metadata"]["user"]["name"], ada, "{action}: {log}");
    }
    after
}

/// Skip, pause until a date, resume, a quantity, how often, the address and cancel on the
/// coffee subscription.
fn assert_actions(seen: &Value, plain: &Value, page: &str, ada: &str) {
    let skipped = assert_done(seen, "skip", page, ada, "order_skipped");
    assert_eq!(skipped["next_order_datetime"], "2030-01-17T09:00:00Z");

    let paused = assert_done(seen, "pause", page, ada, "paused");
    assert_eq!(paused["subscription_status"], "paused");
    assert_eq!(paused["resume_on"], "2031-03-01");
    assert_eq!(seen["pausedStatus"], "Paused", "{seen}");

    let resumed = assert_done(seen, "resume", page, ada, "resumed");
    assert_eq!(resumed["subscription_status"], "active");
    assert_eq!(resumed["resume_on"], Value::Null);

    let changed = assert_done(seen, "quantity", page, ada, "quantity_changed");
    assert_eq!(changed["line_items"][0]["quantity"], 2);
    assert_eq!(
        seen["actions"]["quantity"]["before"]["line_items"][0]["quantity"],
        1
    );

    let how_often = assert_done(seen, "frequency", page, ada, "frequency_changed");
    let rule = how_often["order_rrule"].as_str().unwrap();
    assert!(rule.contains("FREQ=WEEKLY;INTERVAL=2"), "{rule}");
    assert!(
        !seen["actions"]["frequency"]["before"]["order_rrule"]
            .as_str()
            .unwrap()
            .contains("INTERVAL=2"),
        "{seen}"
    );

    let moved = assert_done(seen, "address", page, ada, "shipping_address_changed");
    let address = &moved["shipping_address"];
    assert_eq!(address["street1"], "2 Rue Neuve");
    assert_eq!(address["city"], "Paris");
    assert_eq!(address["zip"], "75001");
    // The fields left as they were stay.
    assert_eq!(address["first_name"], "Ada");
    assert_eq!(address["country_code"], "FR");
    assert!(
        seen["shownAddress"]
            .as_str()
            .unwrap()
            .contains("2 Rue Neuve"),
        "{seen}"
    );

    let cancelled = assert_done(seen, "cancel", page, ada, "cancelled");
    assert_eq!(cancelled["subscription_status"], "inactive");
    assert_eq!(
        cancelled["latest_status_log"]["metadata"]["cancellation"],
        json!({"reason": "moving", "comment": "Off to Lisbon for a year"})
    );
    assert_eq!(seen["cancelledStatus"], "Cancelled", "{seen}");
    assert_eq!(cancelled["id"], plain["id"]);
}

/// The box's upcoming orders; a choice above the size's maximum refused beside its field with
/// nothing changed; then a choice that fits, for the first order (desktop) and the second
/// (phone).
fn assert_boxes(seen: &Value, boxed: &Value, page: &str, w: &World<'_>) {
    let before = seen["boxBefore"].as_str().unwrap();
    assert!(
        before.contains("Veg box: order of Thu 10 Jan 2030"),
        "{before}"
    );
    assert!(before.contains("Week 2"), "{before}");
    assert!(before.contains("the shop sends:"), "{before}");
    assert!(before.contains("Carrots"), "{before}");
    let line = boxed["line_items"][0]["id"].as_i64().unwrap();
    for (refused, done, order, kept) in [
        ("refused", "box", "2030-01-10T09:00:00Z", 0),
        (
            "refused_on_phone",
            "box_on_phone",
            "2030-01-17T09:00:00Z",
            1,
        ),
    ] {
        let no = &seen["actions"][refused];
        assert_eq!(no["status"], 422, "{no}");
        assert_eq!(no["url"], format!("{page}/box"), "{no}");
        let error = no["fieldError"].as_str().unwrap();
        assert!(
            error.starts_with("The quantities chosen add up to 5") && error.contains("1 to 4"),
            "{error}"
        );
        assert!(
            no["describedBy"]
                .as_str()
                .unwrap()
                .ends_with("-quantity-error"),
            "{no}"
        );
        assert_eq!(
            no["values"],
            json!(["3", "2"]),
            "the form shows what was posted"
        );
        assert_eq!(
            no["alerts"],
            json!([error]),
            "only the field's problem: {no}"
        );
        assert_eq!(no["after"], no["before"], "nothing changed");
        assert_eq!(no["selections"].as_array().unwrap().len(), kept, "{no}");

        let yes = &seen["actions"][done];
        assert_eq!(yes["status"], 303, "{yes}");
        assert_eq!(yes["url"], page, "{yes}");
        assert_eq!(yes["fieldError"], Value::Null, "{yes}");
        assert_eq!(yes["alerts"], json!([]), "{yes}");
        let selection = yes["selections"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["order_datetime"] == order)
            .unwrap_or_else(|| panic!("no selection for {order}: {yes}"));
        assert_eq!(selection["svc_platform_subscription_line_item_id"], line);
        assert_eq!(selection["box_size_id"], w.size);
        assert_eq!(
            selection["line_items"],
            json!([{"box_product_id": w.carrot, "choice_quantity": 2},
                   {"box_product_id": w.kale, "choice_quantity": 1}])
        );
    }
    let after = seen["boxAfter"].as_str().unwrap();
    assert!(after.contains("Your choice:"), "{after}");
    assert!(
        after.contains("Carrots × 2") && after.contains("Kale × 1"),
        "{after}"
    );
}

backend_tests!(a_subscriber_manages_their_subscriptions_in_a_browser);
