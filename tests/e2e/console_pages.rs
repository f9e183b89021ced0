//! The console's pages for the shop's daily work, on SQLite and PostgreSQL: subscriptions
//! found by status, customer, email and next order date (and the due report); the subscription
//! customers and a customer's page; the orders the scheduler placed; boxes with their sizes,
//! time slots and products; a checkout's items and addresses; the dunning policy and the
//! cancellation reasons changed through forms (what the API answers follows); the subscription
//! actions; the notice every action ends with; markup in names shown as text; another shop's
//! records out of sight.

use mercer_domain::Timestamp;
use mercer_domain::access::shop::ShopIdentifier;
use mercer_domain::kernel::ids::{ShopId, SubscriptionId};
use mercer_domain::ports::Database;
use mercer_domain::subscriptions::repository::{NewSubscriptionOrder, OrderAttemptEnd};
use mercer_tests::{Answer, Backend, MercerServer, TestDatabase, backend_tests};
use serde_json::{Value, json};

use crate::console::{session, staff};
use crate::scheduler::subscription;
use crate::subscriptions::{Api, id_of};

/// A server whose scheduler looks once an hour, so subscriptions stay as the test made them.
fn quiet_server(backend: Backend) -> MercerServer {
    MercerServer::start_with(
        TestDatabase::create(backend),
        &["--scheduler-interval-ms", "3600000"],
    )
}

/// Another shop with its staff member `other@other.test`; their session cookie.
fn other_staff(server: &MercerServer) -> String {
    let other = server
        .cli(&["shop", "create", "--domain", "other.shop.test"])
        .values()[0]
        .clone();
    staff(server, &other, "other@other.test");
    session(server, &other, "other@other.test").0
}

fn shop_id(server: &MercerServer, identifier: &str) -> ShopId {
    let store = server.database().open_store();
    store
        .read(|tx| Ok(tx.shop_by_identifier(&ShopIdentifier::parse(identifier).unwrap())?))
        .unwrap()
        .unwrap()
        .id
}

/// A subscription of `email` whose customer is called `first_name`, next order at `next`.
fn subscribe(api: &Api<'_>, email: &str, first_name: &str, next: &str) -> Value {
    let mut body = subscription(
        email,
        json!({"subscription_status": "active", "next_order_datetime": next}),
    );
    body["customer"]["first_name"] = json!(first_name);
    api.create(&body)
}

/// A box of the demo shop, "<b>Veg</b> box", with a size Small (2 to 4), a time slot Week 1
/// and the product `carrot` offered in it: the box builder's admin, and the box's id.
pub(crate) fn seed_box(server: &MercerServer) -> (crate::box_builder::Admin<'_>, i64) {
    use crate::box_builder::{box_product, set_up};
    let (admin, group) = set_up(server);
    let made = admin.ok(
        "POST",
        "/boxes",
        Some(&json!({"box": {"svc_subscription_group_id": group,
                             "box_name": "<b>Veg</b> box"}})),
        201,
    )["data"]["box"]
        .clone();
    let box_id = made["id"].as_i64().unwrap();
    admin.ok(
        "POST",
        &format!("/boxes/{box_id}/box_sizes"),
        Some(
            &json!({"box_size": {"box_size_name": "Small", "min_quantity": 2, "max_quantity": 4}}),
        ),
        200,
    );
    let slot = admin.ok(
        "POST",
        &format!("/boxes/{box_id}/time_slots"),
        Some(&json!({"time_slot": {"time_slot_name": "Week 1",
            "visibility_date": "2030-01-01T00:00:00Z", "selection_deadline_date": "2030-01-04T00:00:00Z",
            "start_date": "2030-01-07T00:00:00Z", "end_date": "2030-01-13T23:59:59Z"}})),
        201,
    )["data"]["time-slot"]["id"]
        .as_i64()
        .unwrap();
    let product = box_product(&admin, "carrot");
    admin.ok(
        "POST",
        &format!("/time_slots/{slot}/options"),
        Some(&json!({"box_product_id": product["id"]})),
        200,
    );
    (admin, box_id)
}

/// Puts three "Carrots" at 2.50 and a shipping and billing address (Ada `<i>Lovelace</i>`,
/// Ottawa) into the shop's checkout `public_id`, as the storefront's calls would.
pub(crate) fn seed_checkout_contents(server: &MercerServer, shop: &str, public_id: &str) {
    let shop = shop_id(server, shop);
    let store = server.database().open_store();
    store
        .write(|tx| {
            let mut order = tx.checkout_order(shop, public_id)?.unwrap();
            let address: mercer_domain::checkout::state::CheckoutAddress =
                serde_json::from_value(json!({"first_name": "Ada", "last_name": "<i>Lovelace</i>",
                    "address_line_1": "1 Main St", "address_line_2": "", "country": "Canada",
                    "city": "Ottawa", "province": "Ontario", "country_code": "CA",
                    "province_code": "ON", "postal_code": "K1A 0A1", "business_name": "",
                    "phone_number": ""}))
                .unwrap();
            order.document.shipping_address = Some(address.clone());
            order.document.billing_address = Some(address);
            order.document.line_items.push(
                serde_json::from_value(json!({"line_item_key": "k", "product_id": "veg",
                    "variant_id": "carrot", "title": "Carrots", "product_title": "Veg",
                    "sku": "CAR-1", "image_url": "", "description": "", "vendor": "",
                    "tags": "", "price": 250, "compare_at_price": 0, "quantity": 3,
                    "weight": 0.0, "weight_unit": "g", "requires_shipping": true,
                    "taxable": true}))
                .unwrap(),
            );
            tx.save_checkout_order(&order)?;
            Ok(())
        })
        .unwrap();
}

/// An order attempt of the shop's subscription `id` for the order date `at`, ended as `end`
/// (what the scheduler records).
pub(crate) fn seed_attempt(
    server: &MercerServer,
    shop: &str,
    id: i64,
    at: &str,
    end: OrderAttemptEnd,
) {
    let shop = shop_id(server, shop);
    let at = Timestamp::parse_rfc3339(at).unwrap();
    let store = server.database().open_store();
    store
        .write(|tx| {
            let order = tx.insert_subscription_order(&NewSubscriptionOrder {
                shop_id: shop,
                subscription_id: SubscriptionId(id),
                scheduled_at: at,
                attempt: 1,
                idempotency_key: format!("console-{id}-{}", at.as_micros()),
                due_at: at,
                created_at: at,
            })?;
            tx.finish_subscription_order(order, &end, at)?;
            Ok(())
        })
        .unwrap();
}

/// Whether `page` shows `raw` as text: its markup escaped (as `&lt;` or `&#60;`), never as
/// markup.
fn shows_as_text(page: &str, raw: &str) -> bool {
    let page = page
        .replace("&#60;", "&lt;")
        .replace("&#62;", "&gt;")
        .replace("&#34;", "&quot;")
        .replace("&#39;", "'");
    let escaped = raw
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;");
    page.contains(&escaped) && !page.contains(raw)
}

fn link(id: i64) -> String {
    format!("href=\"/console/subscriptions/{id}\"")
}

fn location(answer: &Answer) -> String {
    answer
        .headers
        .iter()
        .find(|(key, _)| key.eq_ignore_ascii_case("location"))
        .map(|(_, value)| value.clone())
        .unwrap_or_default()
}

fn the_subscription_customer_and_order_pages_find_what_they_are_asked(backend: Backend) {
    let server = quiet_server(backend);
    let api = Api::demo(&server);
    staff(&server, &api.shop, "ops@demo.test");
    let ada = subscribe(&api, "ada@example.test", "Ada", "2026-03-02T14:00:00Z");
    let bob = subscribe(
        &api,
        "bob@example.test",
        "<script>alert(1)</script>Bob",
        "2026-04-06T14:00:00Z",
    );
    let (ada_id, bob_id) = (id_of(&ada), id_of(&bob));
    let ada_customer = ada["customer_id"].as_i64().unwrap();
    let (cookie, _) = session(&server, &api.shop, "ops@demo.test");
    let get = |path: &str| {
        let answer = server.get(path).header("Cookie", &cookie).call();
        assert_eq!(answer.status, 200, "{path}: {}", answer.text);
        answer.text
    };

    // Every subscription, then by exact email, by customer name, by status, by next order date.
    let all = get("/console/subscriptions");
    assert!(
        all.contains(&link(ada_id)) && all.contains(&link(bob_id)),
        "{all}"
    );
    let by_email = get("/console/subscriptions?email=ADA%40example.test");
    assert!(by_email.contains(&link(ada_id)), "{by_email}");
    assert!(!by_email.contains(&link(bob_id)), "{by_email}");
    let by_name = get("/console/subscriptions?customer=bob");
    assert!(by_name.contains(&link(bob_id)) && !by_name.contains(&link(ada_id)));
    // A name's markup is text.
    assert!(
        shows_as_text(&by_name, "<script>alert(1)</script>Bob"),
        "{by_name}"
    );
    let paused = get("/console/subscriptions?status=paused");
    assert!(paused.contains("id=\"no-subscriptions\""), "{paused}");
    let march = get("/console/subscriptions?from=2026-03-01&until=2026-03-02");
    assert!(
        march.contains(&link(ada_id)) && !march.contains(&link(bob_id)),
        "{march}"
    );
    let nobody = get("/console/subscriptions?email=nobody%40example.test");
    assert!(nobody.contains("id=\"no-subscriptions\""), "{nobody}");
    // The due report stays, as a tab.
    let due = get("/console/subscriptions?view=due");
    assert!(
        due.contains("id=\"due\"") && due.contains(&link(ada_id)),
        "{due}"
    );

    // Customers: found by email or name, and a customer's page with subscriptions and address.
    let customers = get("/console/customers?search=ada%40example.test");
    assert!(customers.contains(&format!("href=\"/console/customers/{ada_customer}\"")));
    assert!(!customers.contains("bob@example.test"), "{customers}");
    let by_name = get("/console/customers?search=Bob");
    assert!(by_name.contains("bob@example.test") && !by_name.contains("ada@example.test"));
    assert!(!by_name.contains("<script>"), "{by_name}");
    let page = get(&format!("/console/customers/{ada_customer}"));
    assert!(
        page.contains(&link(ada_id)) && !page.contains(&link(bob_id)),
        "{page}"
    );
    assert!(
        page.contains("1 Main St") && page.contains("New York"),
        "{page}"
    );
    assert!(
        page.contains("id=\"customer-email\">ada@example.test"),
        "{page}"
    );

    // Orders the scheduler placed: one placed for Ada's, one failed for Bob's.
    let attempt =
        |id: i64, at: &str, end: OrderAttemptEnd| seed_attempt(&server, &api.shop, id, at, end);
    attempt(
        ada_id,
        "2026-03-02T14:00:00Z",
        OrderAttemptEnd::Placed {
            platform_order_id: "order-ada".to_string(),
            platform_payment_id: None,
        },
    );
    attempt(
        bob_id,
        "2026-04-06T14:00:00Z",
        OrderAttemptEnd::Failed {
            code: "payment_declined".to_string(),
            reason: "the card was declined".to_string(),
        },
    );
    let orders = get("/console/orders");
    assert!(
        orders.contains(&link(ada_id)) && orders.contains(&link(bob_id)),
        "{orders}"
    );
    assert!(orders.contains("order-ada"), "{orders}");
    let failed = get("/console/orders?status=failed");
    assert!(
        failed.contains(&link(bob_id)) && !failed.contains(&link(ada_id)),
        "{failed}"
    );
    assert!(failed.contains("payment_declined"), "{failed}");
    let in_march = get("/console/orders?from=2026-03-01&until=2026-03-31");
    assert!(in_march.contains(&link(ada_id)) && !in_march.contains(&link(bob_id)));
    let placing = get("/console/orders?status=placing");
    assert!(placing.contains("id=\"no-orders\""), "{placing}");

    // Another shop's staff member finds none of it.
    let theirs = other_staff(&server);
    let their = |path: &str| server.get(path).header("Cookie", &theirs).call();
    for path in [
        "/console/subscriptions",
        "/console/subscriptions?email=ada%40example.test",
        "/console/customers",
        "/console/orders",
    ] {
        let answer = their(path);
        assert_eq!(answer.status, 200, "{path}");
        let customer = format!("href=\"/console/customers/{ada_customer}\"");
        assert!(
            !answer.text.contains(&link(ada_id)) && !answer.text.contains(&customer),
            "{path}: {}",
            answer.text
        );
    }
    let searched = their("/console/subscriptions?email=ada%40example.test").text;
    assert!(searched.contains("id=\"no-subscriptions\""), "{searched}");
    assert_eq!(
        their(&format!("/console/customers/{ada_customer}")).status,
        404
    );
}

fn settings_forms_and_subscription_actions_end_with_a_notice(backend: Backend) {
    let server = quiet_server(backend);
    let api = Api::demo(&server);
    staff(&server, &api.shop, "ops@demo.test");
    let made = subscribe(&api, "ada@example.test", "Ada", "2030-03-04T14:00:00Z");
    let id = id_of(&made);
    let (cookie, csrf) = session(&server, &api.shop, "ops@demo.test");
    let get = |path: &str| server.get(path).header("Cookie", &cookie).call();
    let post = |path: &str, fields: &[(&str, &str)]| {
        server.post(path).header("Cookie", &cookie).form(fields)
    };
    // An action's redirect names its notice; the page it leads to says it.
    let notice_of = |answer: &Answer, code: &str| {
        assert_eq!(answer.status, 303, "{}", answer.text);
        let to = location(answer);
        assert!(to.ends_with(&format!("notice={code}")), "{to}");
        let page = get(&to);
        assert_eq!(page.status, 200);
        assert!(
            page.text.contains(&format!("data-notice=\"{code}\"")),
            "{}",
            page.text
        );
        page.text
    };

    // The cancellation reasons: saved through the form, as the API then answers them.
    let reasons = "too_expensive: It costs <b>too</b> much\n\nmoving: Moving away";
    let saved = post(
        "/console/settings/cancellation-reasons",
        &[("csrf", &csrf), ("reasons", reasons)],
    );
    let page = notice_of(&saved, "reasons_saved");
    assert!(shows_as_text(&page, "It costs <b>too</b> much"), "{page}");
    let listed = api.get("/settings/cancellation_reasons").json();
    assert_eq!(
        listed["cancellation_reasons"],
        json!([{"code": "too_expensive", "label": "It costs <b>too</b> much"},
               {"code": "moving", "label": "Moving away"}])
    );
    // A list the API refuses is the form again, saying why, and nothing changes.
    let refused = post(
        "/console/settings/cancellation-reasons",
        &[("csrf", &csrf), ("reasons", "Not A Code: x")],
    );
    assert_eq!(refused.status, 422, "{}", refused.text);
    assert!(
        refused.text.contains("id=\"reason-problems\""),
        "{}",
        refused.text
    );
    assert!(
        refused.text.contains("cancellation_reasons[0].code"),
        "{}",
        refused.text
    );
    assert_eq!(api.get("/settings/cancellation_reasons").json(), listed);

    // The dunning policy, likewise.
    let saved = post(
        "/console/settings/dunning",
        &[
            ("csrf", &csrf),
            ("retry_intervals", "60, 3600"),
            ("at_max_retries", "pause"),
        ],
    );
    let page = notice_of(&saved, "dunning_saved");
    assert!(page.contains("value=\"60, 3600\""), "{page}");
    let dunning = api.get("/settings/dunning").json();
    assert_eq!(
        dunning["dunning"],
        json!({"retry_intervals_s": [60, 3600], "at_max_retries": "pause"})
    );
    let refused = post(
        "/console/settings/dunning",
        &[
            ("csrf", &csrf),
            ("retry_intervals", "0"),
            ("at_max_retries", "pause"),
        ],
    );
    assert_eq!(refused.status, 422, "{}", refused.text);
    assert!(
        refused.text.contains("retry_intervals_s[0]"),
        "{}",
        refused.text
    );
    assert_eq!(api.get("/settings/dunning").json(), dunning);
    // Without the CSRF token, nothing happens.
    let forged = post(
        "/console/settings/dunning",
        &[("retry_intervals", "5"), ("at_max_retries", "cancel")],
    );
    assert_eq!(forged.status, 403);
    assert_eq!(api.get("/settings/dunning").json(), dunning);

    // Pause, resume and skip: each asks first, then acts through the API's use case.
    let status = || api.subscription(id)["subscription_status"].clone();
    let act = |action: &str| format!("/console/subscriptions/{id}/{action}");
    let asked = post(&act("pause"), &[("csrf", &csrf)]);
    assert!(asked.text.contains("Are you sure?"), "{}", asked.text);
    assert_eq!(status(), "active");
    notice_of(
        &post(&act("pause"), &[("csrf", &csrf), ("confirm", "yes")]),
        "subscription_paused",
    );
    assert_eq!(status(), "paused");
    notice_of(
        &post(&act("resume"), &[("csrf", &csrf), ("confirm", "yes")]),
        "subscription_resumed",
    );
    assert_eq!(status(), "active");
    let before = api.subscription(id)["next_order_datetime"].clone();
    notice_of(
        &post(&act("skip"), &[("csrf", &csrf), ("confirm", "yes")]),
        "order_skipped",
    );
    assert_ne!(api.subscription(id)["next_order_datetime"], before);

    // Cancel: the form offers the shop's reasons; a reason not among them is refused.
    let form = post(&act("cancel"), &[("csrf", &csrf)]);
    assert_eq!(form.status, 200);
    assert!(
        form.text.contains("<option value=\"moving\""),
        "{}",
        form.text
    );
    let refused = post(
        &act("cancel"),
        &[("csrf", &csrf), ("confirm", "yes"), ("reason", "bored")],
    );
    assert_eq!(refused.status, 422, "{}", refused.text);
    assert!(refused.text.contains("id=\"problems\""), "{}", refused.text);
    assert_eq!(status(), "active");
    let page = notice_of(
        &post(
            &act("cancel"),
            &[
                ("csrf", &csrf),
                ("confirm", "yes"),
                ("reason", "moving"),
                ("comment", "<i>bye</i>"),
            ],
        ),
        "subscription_cancelled",
    );
    assert!(shows_as_text(&page, "“<i>bye</i>”"), "{page}");
    let cancelled = api.subscription(id);
    assert_eq!(cancelled["subscription_status"], "inactive");
    let log = &cancelled["latest_status_log"]["metadata"];
    assert_eq!(log["cancellation"]["reason"], "moving");
    assert_eq!(log["cancellation"]["comment"], "<i>bye</i>");
    assert_eq!(log["user"]["name"], "ops@demo.test");

    // A job cancelled and retried from the Jobs page ends with its notice too.
    let shop = shop_id(&server, &api.shop);
    let store = server.database().open_store();
    let job = store
        .write(|tx| {
            let now = Timestamp::now();
            Ok(tx
                .enqueue_job(
                    &mercer_domain::kernel::jobs::NewJob {
                        kind: "console.test",
                        payload: "{}".to_string(),
                        unique_key: None,
                        run_at: now,
                        max_attempts: 3,
                        shop_id: Some(shop),
                        request_id: None,
                        trace_parent: None,
                    },
                    now,
                )?
                .id())
        })
        .unwrap();
    notice_of(
        &post(
            &format!("/console/jobs/{job}/cancel"),
            &[("csrf", &csrf), ("confirm", "yes")],
        ),
        "job_cancelled",
    );
    notice_of(
        &post(
            &format!("/console/jobs/{job}/retry"),
            &[("csrf", &csrf), ("confirm", "yes")],
        ),
        "job_retried",
    );

    // A code the console does not know, or markup, shows no notice.
    for query in ["notice=hacked", "notice=%3Cscript%3E"] {
        let page = get(&format!("/console/settings?{query}")).text;
        assert!(!page.contains("id=\"notice\""), "{page}");
        assert!(!page.contains("<script>"), "{page}");
    }

    // Every action is in the audit log.
    let audit = get("/console/audit").text;
    for action in [
        "cancellation_reasons.set",
        "dunning.set",
        "subscription.pause",
        "subscription.resume",
        "subscription.skip",
        "subscription.cancel",
        "job.cancel",
        "job.retry",
    ] {
        assert!(audit.contains(action), "{action}: {audit}");
    }

    // Another shop's staff member can neither see nor act on the subscription.
    let theirs = other_staff(&server);
    let page = server
        .get(&format!("/console/subscriptions/{id}"))
        .header("Cookie", &theirs)
        .call();
    assert_eq!(page.status, 404);
}

fn the_box_and_checkout_pages_show_what_they_hold(backend: Backend) {
    let server = MercerServer::start(backend);
    let (admin, box_id) = seed_box(&server);
    staff(&server, &admin.shop, "ops@demo.test");
    let (cookie, _) = session(&server, &admin.shop, "ops@demo.test");
    let get = |path: &str| server.get(path).header("Cookie", &cookie).call();
    let boxes = get("/console/boxes");
    assert_eq!(boxes.status, 200);
    assert!(
        boxes
            .text
            .contains(&format!("href=\"/console/boxes/{box_id}\""))
    );
    assert!(
        shows_as_text(&boxes.text, "<b>Veg</b> box"),
        "{}",
        boxes.text
    );
    let page = get(&format!("/console/boxes/{box_id}"));
    assert_eq!(page.status, 200);
    for shown in [
        "id=\"sizes\"",
        "Small",
        "2 to 4",
        "Week 1",
        "2030-01-07 00:00:00 UTC",
        "2030-01-04 00:00:00 UTC",
        "carrot",
    ] {
        assert!(page.text.contains(shown), "{shown}: {}", page.text);
    }
    assert!(shows_as_text(&page.text, "<b>Veg</b> box"), "{}", page.text);

    // A checkout with an item and its addresses.
    let checkout = crate::checkout::init(
        &server,
        &crate::checkout::Shop {
            id: admin.shop.clone(),
            token: admin.token.clone(),
        },
        json!({"cart_items": [], "customer": {"email_address": "shopper@example.test"}}),
    );
    let public_id = checkout["public_order_id"].as_str().unwrap().to_string();
    seed_checkout_contents(&server, &admin.shop, &public_id);
    let page = get(&format!("/console/checkouts/{public_id}"));
    assert_eq!(page.status, 200, "{}", page.text);
    for shown in [
        "Carrots",
        "CAR-1",
        "id=\"shipping-address\"",
        "K1A 0A1",
        "Ottawa",
    ] {
        assert!(page.text.contains(shown), "{shown}: {}", page.text);
    }
    assert!(
        shows_as_text(&page.text, "<i>Lovelace</i>"),
        "{}",
        page.text
    );
    let items = page.text.split("id=\"items\"").nth(1).unwrap_or_default();
    assert_eq!(
        items.matches("data-label=\"Quantity\"").count(),
        1,
        "{items}"
    );

    // Another shop's staff member sees neither the box nor the checkout.
    let theirs = other_staff(&server);
    let their = |path: &str| server.get(path).header("Cookie", &theirs).call();
    assert_eq!(their(&format!("/console/boxes/{box_id}")).status, 404);
    assert!(their("/console/boxes").text.contains("id=\"no-boxes\""));
    assert_eq!(
        their(&format!("/console/checkouts/{public_id}")).status,
        404
    );
}

backend_tests!(
    the_subscription_customer_and_order_pages_find_what_they_are_asked,
    settings_forms_and_subscription_actions_end_with_a_notice,
    the_box_and_checkout_pages_show_what_they_hold,
);
