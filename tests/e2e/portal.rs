//! The subscriber portal (`/portal/shops/{shop}`), on SQLite and PostgreSQL, against the real
//! `mercer` binary and the platform simulator's customer tokens: the entry (the session cookie
//! and its attributes, the 303 without the token, a refused token's 401, the connector's 502
//! and 504, the bound on token checks), the pages (only the customer's own subscriptions,
//! markup escaped, the headers), every action (what the API then shows, and the webhook it
//! sends), refusals (422 with the problem, nothing changed), forged forms (403), and isolation
//! between customers (404) and shops (401).

use std::time::Duration;

use mercer_platform_sim::RunningSimulator;
use mercer_tests::receiver::Receiver;
use mercer_tests::{Answer, Backend, MercerServer, TestDatabase, backend_tests, wait_until};
use serde_json::{Value, json};

use crate::box_builder::{Admin, box_product, set_up};
use crate::box_shoppers::{platform, sim_admin};
use crate::subscriptions::TOPICS;

/// A first name and a product title holding markup: the pages must show them as text.
const MARKED_NAME: &str = "Ada<script>alert('name')</script>";
const MARKED_TITLE: &str = "<b>Mug</b><script>alert('title')</script>";

/// A customer made on the platform (which pushes Customer Saved to Mercer); their platform id.
pub(crate) fn platform_customer(
    sim: &RunningSimulator,
    shop: &str,
    email: &str,
    first_name: &str,
) -> String {
    let (status, made) = sim_admin(
        "POST",
        &format!("{}/admin/shops/{shop}/customers", sim.base_url),
        Some(json!({"email": email, "first_name": first_name})),
    );
    assert_eq!(status, 200, "{made}");
    made["data"]["platform_id"].as_str().unwrap().to_string()
}

/// A token the platform issues its customer.
pub(crate) fn issue_token(sim: &RunningSimulator, shop: &str, customer: &str) -> String {
    let (status, issued) = sim_admin(
        "POST",
        &format!(
            "{}/admin/shops/{shop}/customers/{customer}/token",
            sim.base_url
        ),
        None,
    );
    assert_eq!(status, 200, "{issued}");
    issued["token"].as_str().unwrap().to_string()
}

fn validations(sim: &RunningSimulator) -> usize {
    sim.simulator
        .lock()
        .requests
        .iter()
        .filter(|request| request.path.ends_with("/validate"))
        .count()
}

/// The demo shop with a veg box (a size of 1..4, a slot holding the first order, carrot and
/// kale offered), the simulator as its customers connector, and the group's id.
pub(crate) struct World<'a> {
    pub(crate) admin: Admin<'a>,
    pub(crate) sim: RunningSimulator,
    pub(crate) group: i64,
    pub(crate) box_id: i64,
    pub(crate) size: i64,
    pub(crate) slot: i64,
    pub(crate) carrot: i64,
    pub(crate) kale: i64,
}

pub(crate) fn world(server: &MercerServer) -> World<'_> {
    let (admin, group) = set_up(server);
    let sim = platform(&admin, &["customers"]);
    let box_id = admin.ok(
        "POST",
        "/boxes",
        Some(&json!({"svc_subscription_group_id": group, "box_name": "Veg box"})),
        201,
    )["data"]["box"]["id"]
        .as_i64()
        .unwrap();
    let carrot = box_product(&admin, "carrot")["id"].as_i64().unwrap();
    let kale = box_product(&admin, "kale")["id"].as_i64().unwrap();
    let size = admin.ok(
        "POST",
        &format!("/boxes/{box_id}/box_sizes"),
        Some(&json!({"box_size_name": "Small", "min_quantity": 1, "max_quantity": 4})),
        200,
    )["data"]["id"]
        .as_i64()
        .unwrap();
    let slot = admin.ok(
        "POST",
        &format!("/boxes/{box_id}/time_slots"),
        Some(
            &json!({"time_slot_name": "Week 2", "visibility_date": "2020-01-01T00:00:00Z",
            "selection_deadline_date": "2030-01-08T00:00:00Z",
            "start_date": "2030-01-09T00:00:00Z", "end_date": "2030-01-11T23:59:59Z"}),
        ),
        201,
    )["data"]["time-slot"]["id"]
        .as_i64()
        .unwrap();
    for product in [carrot, kale] {
        admin.ok(
            "POST",
            &format!("/time_slots/{slot}/options"),
            Some(&json!({"box_product_id": product})),
            200,
        );
    }
    World {
        admin,
        sim,
        group,
        box_id,
        size,
        slot,
        carrot,
        kale,
    }
}

impl World<'_> {
    pub(crate) fn shop(&self) -> &str {
        &self.admin.shop
    }

    /// A customer of the platform and their active subscription (a box line item and a mug
    /// titled with markup), weekly from 10 January 2030: (platform id, subscription).
    fn subscriber(&self, email: &str, first_name: &str) -> (String, Value) {
        let customer = self.customer(email, first_name);
        let group = self.api("GET", &format!("/subscription_groups/{}", self.group), None);
        let rule = group["subscription_group"]["billing_rules"][0]["id"].clone();
        let made = self.api(
            "POST",
            "/subscriptions",
            Some(json!({
                "customer": {"email": email},
                "subscription": {
                    "subscription_status": "active",
                    "next_order_datetime": "2030-01-10T09:00:00Z",
                    "line_items": [
                        {"platform_product_id": "veg", "platform_variant_id": "carrot",
                         "quantity": 1, "price": 2000, "subscription_group_id": self.group,
                         "interval_id": rule},
                        {"platform_product_id": "mug", "platform_variant_id": "mug",
                         "quantity": 1, "price": 900, "title": MARKED_TITLE}],
                    "shipping_address": {"street1": "1 Rue", "city": "Lyon", "country_code": "FR"}}})),
        );
        (customer, made["subscription"].clone())
    }

    /// A customer made on the platform, once Mercer's directory has them: their platform id.
    pub(crate) fn customer(&self, email: &str, first_name: &str) -> String {
        let customer = platform_customer(&self.sim, self.shop(), email, first_name);
        let server = self.admin.server;
        let known = format!(
            "/customers/v2/shops/{}/customers/pid/{customer}",
            self.shop()
        );
        assert!(wait_until(Duration::from_secs(10), || {
            server.get(&known).bearer(&self.admin.token).call().status == 200
        }));
        customer
    }

    /// The subscription API of the shop: the answer's JSON (any 2xx).
    pub(crate) fn api(&self, method: &str, rest: &str, body: Option<Value>) -> Value {
        let call = self
            .admin
            .server
            .request(
                method,
                &format!("/subscriptions/v1/shops/{}{rest}", self.shop()),
            )
            .bearer(&self.admin.token);
        let answer = match body {
            Some(body) => call.json(&body),
            None => call.call(),
        };
        assert!(
            (200..300).contains(&answer.status),
            "{method} {rest}: {} {}",
            answer.status,
            answer.text
        );
        answer.json()
    }

    pub(crate) fn subscription(&self, id: &Value) -> Value {
        self.api("GET", &format!("/subscriptions/{id}"), None)["subscription"].clone()
    }

    /// The entry link of `customer` with a fresh platform token.
    pub(crate) fn entry(&self, customer: &str) -> String {
        let token = issue_token(&self.sim, self.shop(), customer);
        format!(
            "/portal/shops/{}/enter?customer={customer}&token={token}",
            self.shop()
        )
    }
}

/// The value of the `Set-Cookie` header named `name`, whole.
fn set_cookie<'a>(answer: &'a Answer, name: &str) -> &'a str {
    answer
        .headers
        .iter()
        .find(|(key, value)| {
            key.eq_ignore_ascii_case("set-cookie") && value.starts_with(&format!("{name}="))
        })
        .map(|(_, value)| value.as_str())
        .unwrap_or_else(|| panic!("no {name} cookie in {:?}", answer.headers))
}

/// A browser signed in to one shop's portal.
struct Browser<'a> {
    server: &'a MercerServer,
    shop: String,
    cookie: String,
}

impl<'a> Browser<'a> {
    /// Follows the entry link; the session cookie it set.
    fn enter(server: &'a MercerServer, shop: &str, link: &str) -> Browser<'a> {
        let entered = server.get(link).call();
        assert_eq!(entered.status, 303, "{}", entered.text);
        let cookie = set_cookie(&entered, "mercer_portal");
        let pair = cookie.split(';').next().unwrap().to_string();
        Browser {
            server,
            shop: shop.to_string(),
            cookie: pair,
        }
    }

    fn path(&self, rest: &str) -> String {
        format!("/portal/shops/{}{rest}", self.shop)
    }

    fn get(&self, rest: &str) -> Answer {
        self.server
            .get(&self.path(rest))
            .header("Cookie", &self.cookie)
            .call()
    }

    /// The page's CSRF token (every form carries the same one).
    fn csrf(&self, rest: &str) -> String {
        let page = self.get(rest);
        assert_eq!(page.status, 200, "{}", page.text);
        csrf_of(&page.text)
    }

    fn post(&self, rest: &str, fields: &[(&str, &str)]) -> Answer {
        self.server
            .post(&self.path(rest))
            .header("Cookie", &self.cookie)
            .form(fields)
    }

    /// Posts the action `action` of subscription `id` with the page's CSRF token.
    fn act(&self, id: &Value, action: &str, fields: &[(&str, &str)]) -> Answer {
        let page = format!("/subscriptions/{id}");
        let csrf = self.csrf(&page);
        let mut all = vec![("csrf", csrf.as_str())];
        all.extend_from_slice(fields);
        self.post(&format!("{page}/{action}"), &all)
    }

    /// [`Self::act`], which must succeed: 303 to the subscription's page.
    fn done(&self, id: &Value, action: &str, fields: &[(&str, &str)]) {
        let answer = self.act(id, action, fields);
        assert_eq!(answer.status, 303, "{action}: {}", answer.text);
        assert_eq!(
            answer.header("location"),
            Some(self.path(&format!("/subscriptions/{id}")).as_str()),
            "{action}"
        );
    }
}

fn csrf_of(html: &str) -> String {
    let marker = "name=\"csrf\" value=\"";
    let start = html.find(marker).expect("a form with a CSRF token") + marker.len();
    html[start..].split('"').next().unwrap().to_string()
}

/// Asserts an HTML page of the portal with `status` and its headers.
fn assert_page(answer: &Answer, status: u16) {
    assert_eq!(answer.status, status, "{}", answer.text);
    assert_eq!(
        answer.header("content-type"),
        Some("text/html; charset=utf-8")
    );
    assert_eq!(answer.header("x-content-type-options"), Some("nosniff"));
    assert_eq!(answer.header("referrer-policy"), Some("no-referrer"));
    assert_eq!(answer.header("cache-control"), Some("no-store"));
    let policy = answer.header("content-security-policy").unwrap();
    assert!(policy.contains("default-src 'none'"), "{policy}");
    assert!(!policy.contains("script-src"), "{policy}");
    assert!(policy.contains("form-action 'self'"), "{policy}");
    assert!(
        !answer.text.contains("<script"),
        "no script in the page: {}",
        answer.text
    );
}

fn entry_opens_a_session_and_refuses_what_it_cannot_check(backend: Backend) {
    let server =
        MercerServer::start_with(TestDatabase::create(backend), &["--allow-private-targets"]);
    let w = world(&server);
    let (ada, _) = w.subscriber("ada@example.test", "Ada");
    let link = w.entry(&ada);
    let token = link.rsplit("token=").next().unwrap().to_string();
    let entered = server.get(&link).call();
    assert_eq!(entered.status, 303, "{}", entered.text);
    let home = format!("/portal/shops/{}", w.shop());
    assert_eq!(entered.header("location"), Some(home.as_str()));
    let cookie = set_cookie(&entered, "mercer_portal");
    let attributes: Vec<&str> = cookie.split("; ").skip(1).collect();
    assert_eq!(
        attributes,
        [
            format!("Path={home}").as_str(),
            "HttpOnly",
            "SameSite=Lax",
            "Max-Age=28800"
        ],
        "no Secure over plain HTTP to loopback: {cookie}"
    );
    assert!(
        !cookie.contains(&token),
        "the session is not the platform's token"
    );
    let browser = Browser::enter(&server, w.shop(), &w.entry(&ada));
    let page = browser.get("");
    assert_page(&page, 200);
    assert!(!page.text.contains(&token), "no token in the page");
    // Only the shop's own domain may frame it.
    let policy = page.header("content-security-policy").unwrap();
    assert!(
        policy.contains("frame-ancestors https://demo.mercer.test;"),
        "{policy}"
    );
    // An https request (a proxy that says so) gets a Secure cookie.
    let secure = server
        .get(&w.entry(&ada))
        .header("X-Forwarded-Proto", "https")
        .call();
    assert!(set_cookie(&secure, "mercer_portal").ends_with("; Secure"));

    // Refused: no token, a forged one, another customer's; each a 401 page and no cookie,
    // which the shop's own domain may frame, as the portal it embeds.
    let framed_by_the_shop = |answer: &Answer| {
        let policy = answer.header("content-security-policy").unwrap();
        assert!(
            policy.contains("frame-ancestors https://demo.mercer.test;"),
            "{policy}"
        );
    };
    for refused in [
        format!("{home}/enter?customer={ada}"),
        format!("{home}/enter?customer={ada}&token=forged"),
        format!("{home}/enter?customer=someone-else&token={token}"),
    ] {
        let answer = server.get(&refused).call();
        assert_page(&answer, 401);
        assert!(answer.header("set-cookie").is_none(), "{refused}");
        framed_by_the_shop(&answer);
    }
    // No such shop: 404, which no site may frame.
    let nowhere = server
        .get("/portal/shops/0123456789abcdef0123456789abcdef/enter?customer=a&token=b")
        .call();
    assert_page(&nowhere, 404);
    assert!(
        nowhere
            .header("content-security-policy")
            .unwrap()
            .contains("frame-ancestors 'none'")
    );
    // The connector failing is 502, slow 504; neither opens a session.
    let faults = format!("{}/admin/faults", w.sim.base_url);
    sim_admin("PUT", &faults, Some(json!({"status": 500})));
    let failed = server.get(&w.entry(&ada)).call();
    assert_page(&failed, 502);
    framed_by_the_shop(&failed);
    sim_admin("PUT", &faults, Some(json!({"delay_ms": 2000})));
    let slow = server.get(&w.entry(&ada)).call();
    assert_page(&slow, 504);
    framed_by_the_shop(&slow);
    sim_admin("DELETE", &faults, None);

    // Reloading an entry link is bounded per customer: at most 10 checks in 5 minutes, then
    // 429 with Retry-After, without asking the connector.
    let bob = platform_customer(&w.sim, w.shop(), "bob@example.test", "Bob");
    let before = validations(&w.sim);
    let forged = format!("{home}/enter?customer={bob}&token=forged");
    for _ in 0..10 {
        assert_page(&server.get(&forged).call(), 401);
    }
    let limited = server.get(&forged).call();
    assert_page(&limited, 429);
    assert!(limited.header("retry-after").is_some());
    assert_eq!(validations(&w.sim) - before, 10);
    // An active token already checked costs nothing and is not bounded.
    let again = w.entry(&ada);
    for _ in 0..12 {
        assert_eq!(server.get(&again).call().status, 303);
    }

    // Signing out ends the session and clears the cookie.
    let csrf = browser.csrf("");
    let forged_out = browser.post("/sign-out", &[("csrf", "wrong")]);
    assert_page(&forged_out, 403);
    let out = browser.post("/sign-out", &[("csrf", &csrf)]);
    assert_page(&out, 200);
    assert!(set_cookie(&out, "mercer_portal").contains("Max-Age=0"));
    assert_page(&browser.get(""), 401);
}

fn pages_show_the_customers_own_subscriptions_with_markup_escaped(backend: Backend) {
    let server =
        MercerServer::start_with(TestDatabase::create(backend), &["--allow-private-targets"]);
    let w = world(&server);
    let (ada, adas) = w.subscriber("ada@example.test", MARKED_NAME);
    let (bob, bobs) = w.subscriber("bob@example.test", "Bob");
    // The shop's branding, from the command line; a colour that is not one is refused.
    server
        .cli(&[
            "shop",
            "update",
            "--shop",
            w.shop(),
            "--portal-accent",
            "red",
        ])
        .assert_failed_with("portal_accent");
    let branded = server.cli(&[
        "shop",
        "update",
        "--shop",
        w.shop(),
        "--portal-accent",
        "#0A7",
        "--portal-logo-url",
        "https://cdn.example.com/brand/logo.png",
    ]);
    assert!(branded.success, "{}", branded.stderr);
    let browser = Browser::enter(&server, w.shop(), &w.entry(&ada));
    let list = browser.get("");
    assert_page(&list, 200);
    assert!(list.text.contains("--accent:#0a7"), "{}", list.text);
    assert!(
        list.text
            .contains("<img class=\"logo\" src=\"https://cdn.example.com/brand/logo.png\""),
        "{}",
        list.text
    );
    let policy = list.header("content-security-policy").unwrap();
    assert!(
        policy.contains("img-src https://cdn.example.com;"),
        "{policy}"
    );
    assert!(
        list.text
            .contains(&format!("id=\"subscription-{}\"", adas["id"]))
    );
    assert!(
        !list
            .text
            .contains(&format!("id=\"subscription-{}\"", bobs["id"]))
    );
    // Greeted by first name, as text.
    assert!(
        list.text
            .contains("Hello, Ada&#60;script&#62;alert(&#39;name&#39;)&#60;/script&#62;")
            || list
                .text
                .contains("Hello, Ada&lt;script&gt;alert(&#x27;name&#x27;)&lt;/script&gt;"),
        "{}",
        list.text
    );
    let page = browser.get(&format!("/subscriptions/{}", adas["id"]));
    assert_page(&page, 200);
    assert!(!page.text.contains("<b>Mug</b>"), "{}", page.text);
    assert!(page.text.contains("Mug"), "{}", page.text);
    // Money in the subscription's currency, dates in the shop's zone; the box's upcoming order.
    assert!(page.text.contains("$20.00"), "{}", page.text);
    assert!(page.text.contains("Thu 10 Jan 2030"), "{}", page.text);
    assert!(
        page.text
            .contains(&format!("id=\"box-{}-0\"", adas["line_items"][0]["id"]))
    );
    // Bob's subscription is not Ada's to see; nor one that does not exist; nor a non-number.
    for missing in [
        format!("/subscriptions/{}", bobs["id"]),
        "/subscriptions/999999".to_string(),
        "/subscriptions/nope".to_string(),
    ] {
        assert_page(&browser.get(&missing), 404);
    }
    // Bob sees his own.
    let bob_browser = Browser::enter(&server, w.shop(), &w.entry(&bob));
    assert_page(
        &bob_browser.get(&format!("/subscriptions/{}", bobs["id"])),
        200,
    );
    // Without a session: 401.
    let bare = server.get(&format!("/portal/shops/{}", w.shop())).call();
    assert_page(&bare, 401);
}

/// The webhooks of the shop's subscription topics, delivered to `receiver` at
/// `/topic/{name}`.
fn hooks(w: &World<'_>, receiver: &Receiver, topics: &[&str]) {
    for topic in topics {
        let id = TOPICS.iter().position(|t| t == topic).unwrap() + 1;
        w.api(
            "POST",
            "/webhooks/subscriptions",
            Some(json!({"webhook_subscription": {
                "callback_url": format!("{}/topic/{topic}", receiver.url),
                "webhook_topic_id": id, "shared_secret": "portal-secret"}})),
        );
    }
}

/// How many webhooks of `topic` about subscription `id` arrived.
fn count(receiver: &Receiver, topic: &str, id: &Value) -> usize {
    let about = |body: &[u8]| {
        serde_json::from_slice::<Value>(body)
            .map(|payload| {
                payload["data"]["id"] == *id || payload["data"]["subscription"]["id"] == *id
            })
            .unwrap_or(false)
    };
    receiver
        .received()
        .iter()
        .filter(|r| r.target.ends_with(&format!("/topic/{topic}")) && about(&r.body))
        .count()
}

/// Waits for a webhook of `topic` about subscription `id`, and counts them.
fn delivered(receiver: &Receiver, topic: &str, id: &Value) -> usize {
    wait_until(Duration::from_secs(15), || count(receiver, topic, id) > 0);
    count(receiver, topic, id)
}

/// The box of the next order, 10 January: the page offers the slot's products; the choice is
/// the box builder's selection, and the subscription's webhook says so.
fn choose_a_box(w: &World<'_>, browser: &Browser<'_>, receiver: &Receiver, ada: &str, sub: &Value) {
    let id = &sub["id"];
    let line = sub["line_items"][0]["id"].to_string();
    let page = browser.get(&format!("/subscriptions/{id}"));
    assert!(
        page.text.contains(&format!("id=\"box-{line}-0\"")),
        "{}",
        page.text
    );
    let chosen = browser.act(
        id,
        "box",
        &[
            ("line_item_id", &line),
            ("order_datetime", "2030-01-10T09:00:00Z"),
            ("box_size_id", &w.size.to_string()),
            ("time_slot_id", &w.slot.to_string()),
            ("box_product_id[]", &w.carrot.to_string()),
            ("choice_quantity[]", "2"),
            ("box_product_id[]", &w.kale.to_string()),
            ("choice_quantity[]", "0"),
        ],
    );
    assert_eq!(chosen.status, 303, "{}", chosen.text);
    let selections = w
        .admin
        .ok("GET", &format!("/customers/{ada}/selections"), None, 200);
    let selection = &selections["data"]["selections"][0];
    assert_eq!(
        selection["svc_platform_subscription_line_item_id"].to_string(),
        line
    );
    assert_eq!(
        selection["line_items"],
        json!([{"box_product_id": w.carrot, "choice_quantity": 2}])
    );
    assert_eq!(delivered(receiver, "subscription_updated", id), 1);
    let shown = browser.get(&format!("/subscriptions/{id}"));
    assert!(shown.text.contains("Your choice:"), "{}", shown.text);
}

/// A second billing rule of the group, monthly, chosen in the portal; then the weekly one again.
fn change_how_often(w: &World<'_>, browser: &Browser<'_>, receiver: &Receiver, id: &Value) {
    let group = w.api("GET", &format!("/subscription_groups/{}", w.group), None);
    let weekly = group["subscription_group"]["billing_rules"][0]["id"].clone();
    let changed = w.api(
        "PUT",
        &format!("/subscription_groups/{}", w.group),
        Some(json!({"subscription_group": {"billing_rules": [
            {"id": weekly, "interval_number": 1, "interval_type": "week"},
            {"interval_number": 1, "interval_type": "month"}]}})),
    );
    let monthly = changed["subscription_group"]["billing_rules"][1]["id"].to_string();
    // The resume moved the next order already: that was a frequency update too.
    let frequency_before = count(receiver, "subscription_frequency_updated", id);
    browser.done(id, "frequency", &[("interval_id", &monthly)]);
    let after = w.subscription(id);
    assert!(
        after["order_rrule"]
            .as_str()
            .unwrap()
            .contains("FREQ=MONTHLY"),
        "{after}"
    );
    assert!(wait_until(Duration::from_secs(15), || {
        count(receiver, "subscription_frequency_updated", id) == frequency_before + 1
    }));
    browser.done(id, "frequency", &[("interval_id", &weekly.to_string())]);
}

fn every_action_changes_what_the_api_shows_and_sends_its_webhook(backend: Backend) {
    let server =
        MercerServer::start_with(TestDatabase::create(backend), &["--allow-private-targets"]);
    let w = world(&server);
    let receiver = Receiver::start();
    hooks(
        &w,
        &receiver,
        &[
            "subscription_skipped",
            "subscription_paused",
            "subscription_resumed",
            "subscription_quantity_updated",
            "subscription_frequency_updated",
            "subscription_shipping_address_updated",
            "subscription_updated",
            "subscription_cancelled",
        ],
    );
    let (ada, sub) = w.subscriber("ada@example.test", "Ada");
    let id = sub["id"].clone();
    let browser = Browser::enter(&server, w.shop(), &w.entry(&ada));

    choose_a_box(&w, &browser, &receiver, &ada, &sub);

    browser.done(&id, "skip", &[]);
    let after = w.subscription(&id);
    assert_eq!(after["next_order_datetime"], "2030-01-17T09:00:00Z");
    assert_eq!(
        after["latest_status_log"]["metadata"]["user"]["type"],
        "customer"
    );
    assert_eq!(delivered(&receiver, "subscription_skipped", &id), 1);

    browser.done(&id, "pause", &[("resume_on", "2031-01-01")]);
    let after = w.subscription(&id);
    assert_eq!(after["subscription_status"], "paused");
    assert_eq!(after["resume_on"], "2031-01-01");
    assert_eq!(delivered(&receiver, "subscription_paused", &id), 1);

    browser.done(&id, "resume", &[]);
    assert_eq!(w.subscription(&id)["subscription_status"], "active");
    assert_eq!(delivered(&receiver, "subscription_resumed", &id), 1);

    let mug = sub["line_items"][1]["id"].to_string();
    browser.done(
        &id,
        "quantity",
        &[("line_item_id", &mug), ("quantity", "3")],
    );
    assert_eq!(w.subscription(&id)["line_items"][1]["quantity"], 3);
    assert_eq!(
        delivered(&receiver, "subscription_quantity_updated", &id),
        1
    );

    change_how_often(&w, &browser, &receiver, &id);

    browser.done(
        &id,
        "address",
        &[
            ("first_name", "Ada"),
            ("street1", "2 Rue Neuve"),
            ("city", "Paris"),
            ("zip", "75001"),
            ("country_code", "FR"),
            ("company", ""),
        ],
    );
    let after = w.subscription(&id);
    assert_eq!(after["shipping_address"]["street1"], "2 Rue Neuve");
    assert_eq!(after["shipping_address"]["company"], Value::Null);
    assert_eq!(
        delivered(&receiver, "subscription_shipping_address_updated", &id),
        1
    );

    browser.done(
        &id,
        "cancel",
        &[("reason", ""), ("comment", "Moving abroad")],
    );
    let after = w.subscription(&id);
    assert_eq!(after["subscription_status"], "inactive");
    assert_eq!(delivered(&receiver, "subscription_cancelled", &id), 1);
    let cancelled = receiver
        .received()
        .into_iter()
        .find(|r| r.target.ends_with("/topic/subscription_cancelled"))
        .unwrap();
    let payload: Value = serde_json::from_slice(&cancelled.body).unwrap();
    assert_eq!(
        payload["cancellation"],
        json!({"reason": null, "comment": "Moving abroad"}),
        "{payload}"
    );
}

fn refusals_forged_forms_and_other_customers_or_shops_change_nothing(backend: Backend) {
    let server =
        MercerServer::start_with(TestDatabase::create(backend), &["--allow-private-targets"]);
    let w = world(&server);
    let (ada, adas) = w.subscriber("ada@example.test", "Ada");
    let (_, bobs) = w.subscriber("bob@example.test", "Bob");
    let id = adas["id"].clone();
    let browser = Browser::enter(&server, w.shop(), &w.entry(&ada));
    let before = w.subscription(&id);
    let mug = adas["line_items"][1]["id"].to_string();

    // A quantity out of range: 422, the page again with the problem beside the field.
    let refused = browser.act(
        &id,
        "quantity",
        &[("line_item_id", &mug), ("quantity", "0")],
    );
    assert_page(&refused, 422);
    assert!(
        refused
            .text
            .contains(&format!("id=\"quantity-{mug}-quantity-error\"")),
        "{}",
        refused.text
    );
    assert!(refused.text.contains("aria-invalid=\"true\""));
    // An address without its street, a resume date in the past, a state that does not allow
    // the action, a box over its size's maximum: 422 each.
    let no_street = browser.act(&id, "address", &[("city", "Paris"), ("country_code", "FR")]);
    assert_page(&no_street, 422);
    assert!(no_street.text.contains("id=\"address-street1-error\""));
    // A street longer than the API takes (64 KiB of text): refused beside its field.
    let long_street = "y".repeat(64 * 1024 + 1);
    let too_long = browser.act(
        &id,
        "address",
        &[
            ("street1", &long_street),
            ("city", "Paris"),
            ("country_code", "FR"),
        ],
    );
    assert_page(&too_long, 422);
    assert!(
        too_long.text.contains("id=\"address-street1-error\""),
        "{}",
        too_long.text
    );
    let past = browser.act(&id, "pause", &[("resume_on", "2001-01-01")]);
    assert_page(&past, 422);
    assert!(
        past.text.contains("id=\"resume_on-error\""),
        "{}",
        past.text
    );
    let resume = browser.act(&id, "resume", &[]);
    assert_page(&resume, 422);
    assert!(resume.text.contains("role=\"alert\""));
    let line = adas["line_items"][0]["id"].to_string();
    let too_many = browser.act(
        &id,
        "box",
        &[
            ("line_item_id", &line),
            ("order_datetime", "2030-01-10T09:00:00Z"),
            ("box_size_id", &w.size.to_string()),
            ("time_slot_id", &w.slot.to_string()),
            ("box_product_id[]", &w.carrot.to_string()),
            ("choice_quantity[]", "9"),
        ],
    );
    assert_page(&too_many, 422);
    assert!(
        too_many
            .text
            .contains(&format!("id=\"box-{line}-0-quantity-error\"")),
        "{}",
        too_many.text
    );
    // More products than Create Selection takes (250): refused beside the quantities.
    let (size, slot) = (w.size.to_string(), w.slot.to_string());
    let products: Vec<String> = (1..=251).map(|p| (p + 1_000).to_string()).collect();
    let mut fields = vec![
        ("line_item_id", line.as_str()),
        ("order_datetime", "2030-01-10T09:00:00Z"),
        ("box_size_id", size.as_str()),
        ("time_slot_id", slot.as_str()),
    ];
    for product in &products {
        fields.extend([
            ("box_product_id[]", product.as_str()),
            ("choice_quantity[]", "1"),
        ]);
    }
    let crowded = browser.act(&id, "box", &fields);
    assert_page(&crowded, 422);
    assert!(
        crowded.text.contains("At most 250 products may be chosen"),
        "{}",
        crowded.text
    );
    // A form without the session's CSRF token, or with a wrong one: 403.
    let page = format!("/subscriptions/{id}/skip");
    assert_page(&browser.post(&page, &[]), 403);
    assert_page(&browser.post(&page, &[("csrf", "forged")]), 403);
    // Nothing changed, and no selection was made.
    assert_eq!(w.subscription(&id), before);
    let selections = w
        .admin
        .ok("GET", &format!("/customers/{ada}/selections"), None, 200);
    assert_eq!(selections["pagination"]["total"], 0);

    // Another customer's subscription: 404, unchanged.
    let bob_before = w.subscription(&bobs["id"]);
    for action in ["skip", "cancel", "pause"] {
        assert_page(&browser.act_on(&id, &bobs["id"], action), 404);
    }
    assert_eq!(w.subscription(&bobs["id"]), bob_before);

    // A session of this shop does nothing on another: 401 there, its subscription unchanged.
    let other = server
        .cli(&["shop", "create", "--domain", "other.portal.test"])
        .values()[0]
        .clone();
    let token = server
        .cli(&[
            "token",
            "create",
            "--shop",
            &other,
            "--scope",
            "read_subscriptions",
            "--scope",
            "write_subscriptions",
        ])
        .value();
    let theirs = server
        .post(&format!("/subscriptions/v1/shops/{other}/subscriptions"))
        .bearer(&token)
        .json(&json!({"customer": {"email": "ada@example.test"},
            "subscription": {"subscription_status": "active",
                "next_order_datetime": "2030-01-10T09:00:00Z",
                "order_rrule": "DTSTART:20300110T090000Z\nRRULE:FREQ=WEEKLY",
                "line_items": [{"platform_product_id": "p", "platform_variant_id": "v",
                    "quantity": 1, "price": 100}],
                "shipping_address": {"street1": "1 Rue", "city": "Lyon", "country_code": "FR"}}}));
    assert_eq!(theirs.status, 200, "{}", theirs.text);
    let theirs = theirs.json()["subscription"].clone();
    let elsewhere = Browser {
        server: &server,
        shop: other.clone(),
        cookie: browser.cookie.clone(),
    };
    assert_page(&elsewhere.get(""), 401);
    assert_page(
        &elsewhere.get(&format!("/subscriptions/{}", theirs["id"])),
        401,
    );
    let csrf = browser.csrf("");
    let posted = elsewhere.post(
        &format!("/subscriptions/{}/cancel", theirs["id"]),
        &[("csrf", &csrf)],
    );
    assert_page(&posted, 401);
    let unchanged = server
        .get(&format!(
            "/subscriptions/v1/shops/{other}/subscriptions/{}",
            theirs["id"]
        ))
        .bearer(&token)
        .call()
        .json();
    assert_eq!(unchanged["subscription"]["subscription_status"], "active");
}

impl Browser<'_> {
    /// Posts `action` to subscription `target` with the CSRF token of `own`'s page.
    fn act_on(&self, own: &Value, target: &Value, action: &str) -> Answer {
        let csrf = self.csrf(&format!("/subscriptions/{own}"));
        self.post(
            &format!("/subscriptions/{target}/{action}"),
            &[("csrf", &csrf)],
        )
    }
}

backend_tests!(
    entry_opens_a_session_and_refuses_what_it_cannot_check,
    pages_show_the_customers_own_subscriptions_with_markup_escaped,
    every_action_changes_what_the_api_shows_and_sends_its_webhook,
    refusals_forged_forms_and_other_customers_or_shops_change_nothing,
);
