//! Subscription customers end to end (issue 13):
//! List Customers with its status, search and page; Get / Update Customer and the
//! `customer_updated` webhook; addresses with exactly one default; List Customer Subscriptions;
//! `subscription_summary`; and, against the real binary, the platform simulator receiving the
//! customers and addresses the subscription API makes, a 503 retried until it succeeds.

use mercer_domain::kernel::ids::ShopId;
use std::collections::BTreeSet;
use std::time::Duration;

use mercer_domain::platform::outbox::OutboxStatus;
use mercer_domain::ports::Database;
use mercer_platform_sim::{Faults, MercerLink, RunningSimulator};
use mercer_tests::receiver::Receiver;
use mercer_tests::{Backend, MercerServer, TestDatabase, backend_tests, wait_until};
use serde_json::{Value, json};

use crate::subscriptions::{
    ADDRESS_FIELDS, ALLOW_PRIVATE, Api, CUSTOMER_FIELDS, address, id_of, monday, ok, problems, rfc,
    running_rule, seed_body, with_status,
};

/// [`seed_body`] for a customer of this name and email.
fn body_for(first: &str, last: &str, email: &str) -> Value {
    let mut body = seed_body(email, &running_rule());
    body["customer"]["first_name"] = json!(first);
    body["customer"]["last_name"] = json!(last);
    body
}

fn customer_of(sub: &Value) -> i64 {
    sub["customer_id"].as_i64().unwrap()
}

/// List Customers with `query`: the ids listed, and the pagination.
fn listed(api: &Api<'_>, query: &str) -> (Vec<i64>, Value) {
    let page = ok(api.get(&format!("/customers?{query}")));
    let customers = page["customers"].as_array().unwrap();
    for customer in customers {
        let keys: BTreeSet<&str> = customer
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(keys, CUSTOMER_FIELDS.into_iter().collect(), "{customer}");
    }
    (
        customers.iter().map(id_of).collect(),
        page["pagination"].clone(),
    )
}

fn pagination(count: i64, page: i64, per_page: i64, total: i64, pages: i64) -> Value {
    json!({ "count": count, "current_page": page, "per_page": per_page, "total": total,
            "total_pages": pages })
}

/// The addresses of a customer: `(id, is_default)` in the order listed.
fn addresses(api: &Api<'_>, customer: i64) -> Vec<(i64, bool)> {
    let answer = ok(api.get(&format!("/customers/{customer}/addresses")));
    answer["customer_addresses"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            let keys: BTreeSet<&str> = a.as_object().unwrap().keys().map(String::as_str).collect();
            assert_eq!(keys, ADDRESS_FIELDS.into_iter().collect(), "{a}");
            assert_eq!(a["customer_id"], customer);
            (id_of(a), a["is_default"].as_bool().unwrap())
        })
        .collect()
}

fn the_default(list: &[(i64, bool)]) -> i64 {
    let defaults: Vec<i64> = list.iter().filter(|(_, d)| *d).map(|(id, _)| *id).collect();
    assert_eq!(defaults.len(), 1, "exactly one default: {list:?}");
    defaults[0]
}

fn customers_are_listed_read_updated_and_given_addresses(backend: Backend) {
    let server = MercerServer::in_process_with(backend, ALLOW_PRIVATE);
    let api = Api::demo(&server);
    let receiver = Receiver::start();
    let hook = api.send(
        "POST",
        "/webhooks/subscriptions",
        &json!({ "webhook_subscription": {
            "callback_url": format!("{}/customer_updated", receiver.url),
            "webhook_topic_id": 2, "shared_secret": "customer-updated-secret"
        } }),
    );
    assert_eq!(hook.status, 201, "{}", hook.text);

    // A: active. B: cancelled. C: one active, one cancelled. D: paused.
    let a = api.create(&body_for("Ada", "Lovelace", "ada@example.test"));
    let b = api.create(&body_for("Grace", "Hopper", "grace@example.test"));
    ok(api.send(
        "POST",
        &format!("/subscriptions/{}/cancel", id_of(&b)),
        &json!({}),
    ));
    let c1 = api.create(&body_for("Katherine", "Johnson", "katherine@example.test"));
    let c2 = api.create(&body_for("Katherine", "Johnson", "katherine@example.test"));
    ok(api.send(
        "POST",
        &format!("/subscriptions/{}/cancel", id_of(&c2)),
        &json!({}),
    ));
    let d = api.create(&with_status(
        body_for("Dorothy", "Vaughan", "dorothy@example.test"),
        "paused",
    ));
    let (ca, cb, cc, cd) = (
        customer_of(&a),
        customer_of(&b),
        customer_of(&c1),
        customer_of(&d),
    );
    assert_eq!(customer_of(&c2), cc, "one customer per email");
    let all = vec![ca, cb, cc, cd];

    // Status: active has a subscription that is not inactive; inactive has only inactive ones.
    assert_eq!(listed(&api, "status=active").0, [ca, cc, cd]);
    assert_eq!(listed(&api, "status=inactive").0, [cb]);
    assert_eq!(
        listed(&api, "status%5B%5D=active&status%5B%5D=inactive").0,
        all
    );
    assert_eq!(listed(&api, "status=active&status=inactive").0, all);
    assert_eq!(listed(&api, "status=all").0, all);
    assert_eq!(listed(&api, "").0, all);
    // Search: names, full name, email, any case.
    assert_eq!(listed(&api, "search=hopper").0, [cb]);
    assert_eq!(listed(&api, "search=Grace%20Hopper").0, [cb]);
    assert_eq!(listed(&api, "search=katherine%40").0, [cc]);
    assert_eq!(listed(&api, "search=EXAMPLE.TEST").0, all);
    assert_eq!(listed(&api, "search=nobody").0, Vec::<i64>::new());
    // LIKE's wildcards are the search's own characters.
    assert_eq!(listed(&api, "search=%25").0, Vec::<i64>::new());
    assert_eq!(listed(&api, "search=_").0, Vec::<i64>::new());
    assert_eq!(
        listed(&api, "search=hopper&status=active").0,
        Vec::<i64>::new()
    );
    // Pages.
    let (ids, page) = listed(&api, "limit=3");
    assert_eq!((ids, page), (vec![ca, cb, cc], pagination(3, 1, 3, 4, 2)));
    let (ids, page) = listed(&api, "limit=3&page=2");
    assert_eq!((ids, page), (vec![cd], pagination(1, 2, 3, 4, 2)));
    let (ids, page) = listed(&api, "limit=3&page=3");
    assert_eq!((ids, page), (vec![], pagination(0, 3, 3, 4, 2)));
    let (_, page) = listed(&api, "status=active");
    assert_eq!(page, pagination(3, 1, 50, 3, 1));
    for query in ["status=frozen", "limit=0", "limit=251", "page=0", "page=x"] {
        let answer = api.get(&format!("/customers?{query}"));
        assert_eq!(answer.status, 400, "{query}: {}", answer.text);
        answer.errors();
    }

    // List Subscriptions by customer.
    let of_customers = |query: &str| -> Vec<i64> {
        ok(api.get(&format!("/subscriptions?{query}")))["subscriptions"]
            .as_array()
            .unwrap()
            .iter()
            .map(id_of)
            .collect()
    };
    assert_eq!(
        of_customers(&format!("svc_platform_customer_id={cc}")),
        [id_of(&c1), id_of(&c2)]
    );
    assert_eq!(
        of_customers(&format!(
            "svc_platform_customer_id%5B%5D={ca}&svc_platform_customer_id%5B%5D={cc}"
        )),
        [id_of(&a), id_of(&c1), id_of(&c2)]
    );
    assert_eq!(
        of_customers(&format!(
            "svc_platform_customer_id={cc}&subscription_status=inactive"
        )),
        [id_of(&c2)]
    );

    // Get Customer: the summary counts its subscriptions.
    let katherine = api.customer(cc);
    assert_eq!(katherine["email"], "katherine@example.test");
    let summary = &katherine["subscription_summary"];
    assert_eq!(summary["active_subscription_count"], 1, "{summary}");
    assert_eq!(summary["inactive_subscription_count"], 1);
    assert_eq!(summary["subscription_order_count"], 0);
    assert_eq!(summary["next_order_date"], rfc(monday(0)));
    assert_eq!(summary["last_order_date"], "2024-03-04T09:00:00Z");
    assert!(summary["svc_platform_customer_id"].is_i64(), "{summary}");
    let dorothy = api.customer(cd);
    assert_eq!(
        dorothy["subscription_summary"]["active_subscription_count"],
        1
    );
    assert_eq!(
        dorothy["subscription_summary"]["inactive_subscription_count"],
        0
    );
    let grace = api.customer(cb);
    assert_eq!(
        grace["subscription_summary"]["active_subscription_count"],
        0
    );
    assert_eq!(
        grace["subscription_summary"]["inactive_subscription_count"],
        1
    );
    assert_eq!(
        grace["subscription_summary"]["next_order_date"],
        Value::Null
    );
    for path in ["/customers/999999", "/customers/abc"] {
        api.get(path).assert_error(404, "resource.not_found");
    }

    // Update Customer: notes only, or the same values, emit nothing; a name or an email does.
    let update = |id: i64, body: Value| api.send("PUT", &format!("/customers/{id}"), &body);
    let noted =
        ok(update(ca, json!({ "customer": { "notes": "ring twice" } })))["customer"].clone();
    assert_eq!(noted["notes"], "ring twice");
    assert_eq!(noted["first_name"], "Ada");
    let same = ok(update(ca, json!({ "customer": { "first_name": "Ada" } })))["customer"].clone();
    assert_eq!(same, noted);
    let renamed = ok(update(
        ca,
        json!({ "customer": { "first_name": "Augusta", "last_name": "King" } }),
    ))["customer"]
        .clone();
    assert_eq!(renamed["first_name"], "Augusta");
    assert_eq!(renamed["last_name"], "King");
    assert_eq!(renamed["notes"], "ring twice");
    assert_eq!(renamed["email"], "ada@example.test");
    assert_eq!(api.customer(ca), renamed);
    let moved = ok(update(
        cb,
        json!({ "customer": { "email": "grace.hopper@example.test" } }),
    ))["customer"]
        .clone();
    assert_eq!(moved["email"], "grace.hopper@example.test");
    assert_eq!(
        problems(&update(
            ca,
            json!({ "customer": { "email": "not an email" } })
        )),
        [("customer.email".to_string(), "invalid_email".to_string())]
    );
    assert_eq!(
        problems(&update(ca, json!({}))),
        [("customer".to_string(), "required".to_string())]
    );
    update(999_999, json!({ "customer": { "notes": "x" } }))
        .assert_error(404, "resource.not_found");
    let delivered = wait_until(Duration::from_secs(10), || receiver.received().len() >= 2);
    std::thread::sleep(Duration::from_millis(500));
    let received = receiver.received();
    assert!(delivered, "{received:?}");
    let mut bodies: Vec<Value> = received
        .iter()
        .map(|r| serde_json::from_slice(&r.body).unwrap())
        .collect();
    assert_eq!(
        bodies.len(),
        2,
        "one customer_updated per change: {bodies:?}"
    );
    bodies.sort_by_key(|body| body["data"]["id"].as_i64());
    for body in &bodies {
        assert_eq!(body["topic"], "customer_updated");
        assert_eq!(body["shop_identifier"], api.shop.as_str());
    }
    assert_eq!(bodies[0]["data"], renamed);
    assert_eq!(bodies[1]["data"], moved);

    // Addresses: the subscription's is the first, and the default.
    let first = a["shipping_address_id"].as_i64().unwrap();
    assert_eq!(addresses(&api, ca), [(first, true)]);
    let create = |body: Value| {
        ok(api.send("POST", &format!("/customers/{ca}/addresses"), &body))["customer_address"]
            .clone()
    };
    let with_default = |street: &str, is_default: Option<bool>| {
        let mut fields = address(street, "Montréal");
        if let Some(flag) = is_default {
            fields["is_default"] = json!(flag);
        }
        json!({ "customer_address": fields })
    };
    let second = create(with_default("2 Rue Peel", Some(false)));
    assert_eq!(second["is_default"], false);
    assert_eq!(second["street1"], "2 Rue Peel");
    assert_eq!(second["customer_id"], ca);
    let second = id_of(&second);
    assert_eq!(the_default(&addresses(&api, ca)), first);
    let third = id_of(&create(with_default("3 Rue Drummond", Some(true))));
    let list = addresses(&api, ca);
    assert_eq!(list.len(), 3);
    assert_eq!(the_default(&list), third, "a new default moves it");
    let fourth = id_of(&create(with_default("4 Rue Crescent", None)));
    assert_eq!(the_default(&addresses(&api, ca)), third);
    assert_eq!(
        problems(&api.send(
            "POST",
            &format!("/customers/{ca}/addresses"),
            &json!({ "customer_address": { "city": "Laval" } })
        )),
        [
            (
                "customer_address.street1".to_string(),
                "required".to_string()
            ),
            (
                "customer_address.country_code".to_string(),
                "required".to_string()
            )
        ]
    );

    let put =
        |id: i64, body: Value| api.send("PUT", &format!("/customers/{ca}/addresses/{id}"), &body);
    let changed = ok(put(second, with_default("22 Rue Peel", None)))["customer_address"].clone();
    assert_eq!(changed["street1"], "22 Rue Peel");
    assert_eq!(changed["is_default"], false);
    assert_eq!(
        problems(&put(third, with_default("3 Rue Drummond", Some(false)))),
        [(
            "customer_address.is_default".to_string(),
            "invalid_value".to_string()
        )],
        "the default is unset only by making another the default"
    );
    let promoted =
        ok(put(second, with_default("22 Rue Peel", Some(true))))["customer_address"].clone();
    assert_eq!(promoted["is_default"], true);
    assert_eq!(the_default(&addresses(&api, ca)), second);

    // Deleting the default promotes another; an address a subscription uses stays (409).
    let delete = |id: i64| api.delete(&format!("/customers/{ca}/addresses/{id}"));
    let deleted = delete(second);
    assert_eq!(deleted.status, 204, "{}", deleted.text);
    let list = addresses(&api, ca);
    assert_eq!(
        list.iter().map(|(id, _)| *id).collect::<Vec<_>>(),
        [first, third, fourth]
    );
    assert_eq!(the_default(&list), first, "the oldest other is the default");
    let in_use = delete(first);
    assert_eq!(in_use.status, 409, "{}", in_use.text);
    in_use.errors();
    assert_eq!(delete(fourth).status, 204);
    delete(fourth).assert_error(404, "resource.not_found");
    // Another customer's address is not this one's.
    api.delete(&format!("/customers/{cb}/addresses/{third}"))
        .assert_error(404, "resource.not_found");
    let customer = api.customer(ca);
    let ids: Vec<i64> = customer["addresses"]
        .as_array()
        .unwrap()
        .iter()
        .map(id_of)
        .collect();
    assert_eq!(ids, [first, third]);
    assert_eq!(customer["default_address"]["id"], first);

    // List Customer Subscriptions.
    let subscriptions = |customer: i64, query: &str| {
        ok(api.get(&format!("/customers/{customer}/subscriptions?{query}")))
    };
    let page = subscriptions(cc, "");
    let ids: Vec<i64> = page["subscriptions"]
        .as_array()
        .unwrap()
        .iter()
        .map(id_of)
        .collect();
    assert_eq!(ids, [id_of(&c1), id_of(&c2)]);
    assert_eq!(page["pagination"], pagination(2, 1, 50, 2, 1));
    assert_eq!(page["subscriptions"][0], api.subscription(id_of(&c1)));
    let page = subscriptions(cc, "limit=1&page=2");
    assert_eq!(page["subscriptions"].as_array().unwrap().len(), 1);
    assert_eq!(page["subscriptions"][0]["id"], id_of(&c2));
    assert_eq!(page["pagination"], pagination(1, 2, 1, 2, 2));
    assert_eq!(subscriptions(ca, "")["subscriptions"][0]["id"], id_of(&a));
    api.get("/customers/999999/subscriptions")
        .assert_error(404, "resource.not_found");
}

/// An address that any of the customer's subscriptions uses stays, however many it has: here
/// the newest of 251.
fn an_address_in_use_stays_whatever_the_number_of_subscriptions(backend: Backend) {
    let server = MercerServer::in_process_with(backend, ALLOW_PRIVATE);
    let api = Api::demo(&server);
    let body_of = |n: usize| {
        let mut body = body_for("Many", "Orders", "many@example.test");
        body["subscription"]["shipping_address"] =
            address(&format!("{n} Rue Saint-Denis"), "Montréal");
        body
    };
    // The customer first; then 250 more of its subscriptions from four clients at once.
    let mut subscriptions = vec![api.create(&body_of(0))];
    subscriptions.extend(std::thread::scope(|scope| {
        let workers: Vec<_> = (0..4)
            .map(|worker| {
                let (api, body_of) = (&api, &body_of);
                scope.spawn(move || {
                    (1 + worker..251)
                        .step_by(4)
                        .map(|n| api.create(&body_of(n)))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| w.join().unwrap())
            .collect::<Vec<_>>()
    }));
    subscriptions.sort_by_key(id_of);
    let customer = customer_of(&subscriptions[0]);
    assert!(subscriptions.iter().all(|sub| customer_of(sub) == customer));
    let pages = ok(api.get(&format!(
        "/customers/{customer}/subscriptions?limit=250&page=2"
    )));
    assert_eq!(pages["pagination"], pagination(1, 2, 250, 251, 2));
    for sub in [&subscriptions[250], &subscriptions[0]] {
        let address = sub["shipping_address_id"].as_i64().unwrap();
        let answer = api.delete(&format!("/customers/{customer}/addresses/{address}"));
        assert_eq!(
            answer.status, 409,
            "subscription {} uses address {address}: {}",
            sub["id"], answer.text
        );
        answer.errors();
    }
    let newest = api.subscription(id_of(&subscriptions[250]));
    assert_eq!(
        newest["shipping_address"]["street1"],
        subscriptions[250]["shipping_address"]["street1"]
    );
}

/// Create Subscription finds the customer by email or makes it: clients creating subscriptions
/// for one new email at the same moment end with one customer, made once.
fn concurrent_creates_for_a_new_email_make_one_customer(backend: Backend) {
    let server = MercerServer::in_process_with(backend, ALLOW_PRIVATE);
    let api = Api::demo(&server);
    for round in 0..3 {
        let email = format!("rush{round}@example.test");
        let created: Vec<Value> = std::thread::scope(|scope| {
            let workers: Vec<_> = (0..4)
                .map(|_| {
                    let (api, email) = (&api, &email);
                    scope.spawn(move || api.create(&body_for("Rush", "Hour", email)))
                })
                .collect();
            workers.into_iter().map(|w| w.join().unwrap()).collect()
        });
        let customers: BTreeSet<i64> = created.iter().map(customer_of).collect();
        assert_eq!(
            customers.len(),
            1,
            "{email}: four subscriptions made at once, customers {customers:?}"
        );
    }
    let (ids, _) = listed(&api, "search=rush");
    assert_eq!(ids.len(), 3, "one customer per email: {ids:?}");
}

/// The platform simulator, and Mercer (the real binary) knowing it as the shop's connector.
struct Platform {
    server: MercerServer,
    sim: RunningSimulator,
    shop_id: ShopId,
    store: mercer_store::Store,
}

impl Platform {
    fn start(backend: Backend) -> Platform {
        let server = MercerServer::start_with(TestDatabase::create(backend), ALLOW_PRIVATE);
        let demo = server.demo().clone();
        let rotated = ok(server
            .post(&format!(
                "/integrations/v1/shops/{}/shared_secret/rotate",
                demo.shop
            ))
            .bearer(&demo.token)
            .call());
        let secret = rotated["data"]["shared_secret"]
            .as_str()
            .unwrap()
            .to_string();
        let sim = RunningSimulator::start().unwrap();
        let link = MercerLink {
            base_url: server.base_url.clone(),
            token: demo.token.clone(),
        };
        sim.simulator.add_shop(&demo.shop, &secret, Some(link));
        let store = server.database().open_store();
        let shop = demo.shop.clone();
        let shop_id = store
            .read(move |tx| Ok(mercer_domain::access::shop::find_shop(tx, &shop)?.id))
            .unwrap();
        Platform {
            server,
            sim,
            shop_id,
            store,
        }
    }

    fn register_customers_destination(&self) {
        let demo = self.server.demo();
        let body = json!({ "data": { "destination": {
            "shop_identifier": demo.shop, "topic": "customers",
            "destination": self.sim.base_url, "version": "v1", "timeout_ms": 5000
        } } });
        let answer = self
            .server
            .post(&format!(
                "/integrations/v1/shops/{}/platform_connector_destinations",
                demo.shop
            ))
            .bearer(&demo.token)
            .json(&body);
        assert_eq!(answer.status, 200, "{}", answer.text);
    }

    fn outbox(&self) -> Vec<mercer_domain::platform::outbox::OutboxEntry> {
        let shop_id = self.shop_id;
        self.store
            .read(move |tx| Ok(tx.outbox_entries(shop_id)?))
            .unwrap()
    }

    /// Waits until `count` calls are recorded and all are delivered.
    fn settle(&self, count: usize) {
        let settled = wait_until(Duration::from_secs(30), || {
            let entries = self.outbox();
            entries.len() == count
                && entries
                    .iter()
                    .all(|entry| entry.status == OutboxStatus::Delivered)
        });
        assert!(settled, "{:#?}", self.outbox());
    }

    /// The simulator's customer with this email.
    fn platform_customer(
        &self,
        email: &str,
    ) -> Option<mercer_domain::platform::resources::Customer> {
        let shop = &self.server.demo().shop;
        self.sim.simulator.lock().shops[shop]
            .customers
            .values()
            .find(|c| c.email.as_deref() == Some(email))
            .cloned()
    }

    fn streets_of(&self, email: &str) -> Vec<String> {
        self.platform_customer(email)
            .and_then(|c| c.addresses)
            .unwrap_or_default()
            .iter()
            .filter_map(|a| a.street_1.clone())
            .collect()
    }
}

fn the_platform_receives_customers_and_addresses_made_here(backend: Backend) {
    let platform = Platform::start(backend);
    let api = Api::demo(&platform.server);

    // Without a destination: nothing recorded, nothing called.
    let lonely = api.create(&body_for("Lonely", "Nobody", "lonely@example.test"));
    let lonely_customer = customer_of(&lonely);
    ok(api.send(
        "PUT",
        &format!("/customers/{lonely_customer}"),
        &json!({ "customer": { "first_name": "Alone" } }),
    ));
    ok(api.send(
        "POST",
        &format!("/customers/{lonely_customer}/addresses"),
        &json!({ "customer_address": address("8 Rue Solitaire", "Gaspé") }),
    ));
    std::thread::sleep(Duration::from_millis(1000));
    assert!(platform.outbox().is_empty(), "{:?}", platform.outbox());
    assert!(
        platform.sim.simulator.lock().requests.is_empty(),
        "no destination, no call"
    );
    assert_eq!(api.customer(lonely_customer)["platform_id"], Value::Null);

    platform.register_customers_destination();

    // A subscription for a new email: the customer and its address are created there, and the
    // platform's id is stored.
    let sub = api.create(&body_for("Ada", "Lovelace", "ada@example.test"));
    let customer_id = customer_of(&sub);
    platform.settle(2);
    let remote = platform
        .platform_customer("ada@example.test")
        .expect("the customer was created on the platform");
    assert_eq!(remote.first_name.as_deref(), Some("Ada"));
    assert_eq!(remote.last_name.as_deref(), Some("Lovelace"));
    let platform_id = remote.platform_id.clone().unwrap().as_str().to_string();
    assert_eq!(
        platform.streets_of("ada@example.test"),
        ["1 Rue Sainte-Catherine"]
    );
    let customer = api.customer(customer_id);
    assert_eq!(customer["platform_id"], platform_id.as_str());
    let demo = platform.server.demo().clone();
    let directory = platform
        .server
        .get(&format!(
            "/customers/v2/shops/{}/customers/pid/{platform_id}",
            demo.shop
        ))
        .bearer(&demo.token)
        .call();
    assert_eq!(directory.status, 200, "{}", directory.text);
    assert_eq!(directory.json()["customer"]["id"], customer_id);
    // A second subscription of the same customer creates nothing more there but its address.
    let mut again = body_for("Ada", "Lovelace", "ada@example.test");
    again["subscription"]["shipping_address"] = address("10 Rue Sherbrooke", "Montréal");
    api.create(&again);
    platform.settle(3);
    assert_eq!(
        platform.sim.simulator.lock().shops[&demo.shop]
            .customers
            .values()
            .filter(|c| c.email.as_deref() == Some("ada@example.test"))
            .count(),
        1
    );

    // Update Customer's name reaches it.
    ok(api.send(
        "PUT",
        &format!("/customers/{customer_id}"),
        &json!({ "customer": { "first_name": "Augusta" } }),
    ));
    platform.settle(4);
    let remote = platform.platform_customer("ada@example.test").unwrap();
    assert_eq!(remote.first_name.as_deref(), Some("Augusta"));
    assert_eq!(remote.last_name.as_deref(), Some("Lovelace"));

    // An address created, updated, deleted.
    let made = ok(api.send(
        "POST",
        &format!("/customers/{customer_id}/addresses"),
        &json!({ "customer_address": address("5 Avenue du Parc", "Outremont") }),
    ))["customer_address"]
        .clone();
    let address_id = id_of(&made);
    platform.settle(5);
    let streets = platform.streets_of("ada@example.test");
    assert!(
        streets.contains(&"5 Avenue du Parc".to_string()),
        "{streets:?}"
    );
    ok(api.send(
        "PUT",
        &format!("/customers/{customer_id}/addresses/{address_id}"),
        &json!({ "customer_address": address("6 Avenue Greene", "Westmount") }),
    ));
    platform.settle(6);
    let streets = platform.streets_of("ada@example.test");
    assert!(
        streets.contains(&"6 Avenue Greene".to_string()),
        "{streets:?}"
    );
    assert!(
        !streets.contains(&"5 Avenue du Parc".to_string()),
        "{streets:?}"
    );
    let deleted = api.delete(&format!("/customers/{customer_id}/addresses/{address_id}"));
    assert_eq!(deleted.status, 204, "{}", deleted.text);
    platform.settle(7);
    let streets = platform.streets_of("ada@example.test");
    assert_eq!(streets, ["1 Rue Sainte-Catherine", "10 Rue Sherbrooke"]);

    // A 503 from the platform is retried until it succeeds.
    platform.sim.simulator.lock().faults = Faults {
        status: Some(503),
        times: Some(1),
        ..Faults::default()
    };
    ok(api.send(
        "PUT",
        &format!("/customers/{customer_id}"),
        &json!({ "customer": { "last_name": "King" } }),
    ));
    platform.settle(8);
    let entries = platform.outbox();
    let last = entries.iter().max_by_key(|entry| entry.id).unwrap();
    assert_eq!(
        last.attempts, 2,
        "failed once (503), then delivered: {last:?}"
    );
    assert_eq!(
        platform
            .platform_customer("ada@example.test")
            .unwrap()
            .last_name
            .as_deref(),
        Some("King")
    );
    assert!(
        entries
            .iter()
            .filter(|entry| entry.id != last.id)
            .all(|entry| entry.attempts == 1)
    );
    let statuses: Vec<u16> = platform
        .sim
        .simulator
        .lock()
        .requests
        .iter()
        .map(|r| r.status)
        .collect();
    assert_eq!(
        statuses.iter().filter(|s| **s == 503).count(),
        1,
        "{statuses:?}"
    );

    // The customer made before the destination was never sent.
    assert!(platform.platform_customer("lonely@example.test").is_none());
}

backend_tests!(
    customers_are_listed_read_updated_and_given_addresses,
    an_address_in_use_stays_whatever_the_number_of_subscriptions,
    concurrent_creates_for_a_new_email_make_one_customer,
    the_platform_receives_customers_and_addresses_made_here,
);
