//! The platform connector end to end: the real `mercer` binary and the
//! platform simulator talking HTTP to each other, on SQLite and on PostgreSQL.

use std::time::Duration;

use mercer_domain::kernel::ids::{AddressId, CustomerId, ShopId};
use mercer_domain::platform::outbox::{ConnectorCall, OutboxStatus, request_connector_change};
use mercer_domain::ports::Database;
use mercer_platform_sim::{Faults, MercerLink, RunningSimulator};
use mercer_store::Store;
use mercer_tests::receiver::Receiver;
use mercer_tests::{Answer, Backend, MercerServer, TestDatabase, backend_tests, wait_until};
use serde_json::{Value, json};

struct World {
    server: MercerServer,
    sim: RunningSimulator,
    shop: String,
    token: String,
    store: Store,
}

impl World {
    /// Mercer and the simulator, both on loopback: Mercer runs with `--allow-private-targets`.
    fn new(backend: Backend) -> World {
        World::start(MercerServer::start_with(
            TestDatabase::create(backend),
            &["--allow-private-targets"],
        ))
    }

    fn start(server: MercerServer) -> World {
        let demo = server.demo().clone();
        let secret = server.rotate_connector_secret(&demo.shop, &demo.token);
        let sim = RunningSimulator::start().unwrap();
        let link = MercerLink {
            base_url: server.base_url.clone(),
            token: demo.token.clone(),
        };
        sim.simulator.add_shop(&demo.shop, &secret, Some(link));
        let store = server.database().open_store();
        World {
            server,
            sim,
            shop: demo.shop,
            token: demo.token,
            store,
        }
    }

    fn destinations(&self) -> String {
        format!(
            "/integrations/v1/shops/{}/platform_connector_destinations",
            self.shop
        )
    }

    fn create_destination(&self, topic: &str, url: &str, timeout_ms: i64) -> Answer {
        let body = json!({"data": {"destination": {"shop_identifier": self.shop, "topic": topic, "destination": url, "version": "v1", "timeout_ms": timeout_ms}}});
        self.server
            .post(&self.destinations())
            .bearer(&self.token)
            .json(&body)
    }

    fn register(&self, topic: &str) -> i64 {
        let answer = self.create_destination(topic, &self.sim.base_url, 5000);
        assert_eq!(answer.status, 200, "{}", answer.text);
        answer.json()["data"]["destination"]["id"].as_i64().unwrap()
    }

    fn fault(&self, faults: Faults) {
        self.sim.simulator.lock().faults = faults;
    }

    fn event(&self, service: &str, collection: &str, action: &str, body: &Value) -> Answer {
        let path = format!(
            "/{service}/v1/shops/{}/platforms/custom/webhooks/{collection}/{action}",
            self.shop
        );
        self.server.post(&path).bearer(&self.token).json(body)
    }

    fn customer_saved(&self, customer: Value) -> Answer {
        self.event(
            "customers",
            "customers",
            "saved",
            &json!({"data": {"customer": customer}}),
        )
    }

    /// Waits until every stored event is applied.
    fn wait_applied(&self) {
        let applied = wait_until(Duration::from_secs(30), || {
            self.store
                .read(|tx| Ok(tx.count_pending_inbound_events()?))
                .unwrap()
                == 0
        });
        assert!(applied, "events still pending after 30 s");
    }

    fn directory(&self, query: &str) -> Answer {
        self.server
            .get(&format!(
                "/customers/v2/shops/{}/customers{query}",
                self.shop
            ))
            .bearer(&self.token)
            .call()
    }

    fn directory_customer(&self, platform_id: &str) -> Answer {
        self.server
            .get(&format!(
                "/customers/v2/shops/{}/customers/pid/{platform_id}",
                self.shop
            ))
            .bearer(&self.token)
            .call()
    }

    fn requests_to_sim(&self) -> Vec<mercer_platform_sim::state::RequestRecord> {
        self.sim.simulator.lock().requests.clone()
    }
}

fn time(seconds: i64) -> String {
    mercer_domain::Timestamp::from_micros(1_700_000_000_000_000)
        .plus_seconds(seconds)
        .to_rfc3339()
}

fn destinations_are_verified_with_the_connector(backend: Backend) {
    let w = World::new(backend);
    let created = w.create_destination("customers", &w.sim.base_url, 5000);
    assert_eq!(created.status, 200, "{}", created.text);
    let destination = &created.json()["data"]["destination"];
    assert_eq!(destination["topic"], "customers");
    assert_eq!(destination["destination"], w.sim.base_url.as_str());
    assert_eq!(destination["shop_identifier"], w.shop.as_str());
    assert_eq!(
        (
            destination["version"].as_str(),
            destination["timeout_ms"].as_i64()
        ),
        (Some("v1"), Some(5000))
    );
    assert!(destination["deleted_at"].is_null());
    let id = destination["id"].as_i64().unwrap();
    let verification = w
        .requests_to_sim()
        .into_iter()
        .find(|r| r.path.ends_with("/verification"))
        .expect("the connector was called");
    assert_eq!(
        verification.path,
        format!("/v1/shops/{}/verification", w.shop)
    );

    let again = w.create_destination("customers", &w.sim.base_url, 5000);
    again.assert_error(409, "destination.topic_taken");

    let listed = w
        .server
        .get(&w.destinations())
        .bearer(&w.token)
        .call()
        .json();
    assert_eq!(listed["data"]["destinations"].as_array().unwrap().len(), 1);
    let one = w
        .server
        .get(&format!("{}/{id}", w.destinations()))
        .bearer(&w.token)
        .call();
    assert_eq!(one.json()["data"]["destination"]["id"], id);

    let patched = w
        .server
        .request("PATCH", &format!("{}/{id}", w.destinations()))
        .bearer(&w.token)
        .json(&json!({"data": {"destination": {"timeout_ms": 2500}}}));
    assert_eq!(patched.status, 200, "{}", patched.text);
    assert_eq!(patched.json()["data"]["destination"]["timeout_ms"], 2500);
    assert_eq!(
        patched.json()["data"]["destination"]["topic"],
        "customers",
        "omitted fields stay"
    );
    let put = w
        .server
        .request("PUT", &format!("{}/{id}", w.destinations()))
        .bearer(&w.token)
        .json(&json!({"data": {"destination": {"timeout_ms": 3000}}}));
    assert_eq!(put.json()["data"]["destination"]["timeout_ms"], 3000);

    let deleted = w
        .server
        .request("DELETE", &format!("{}/{id}", w.destinations()))
        .bearer(&w.token)
        .call();
    assert_eq!(deleted.status, 204);
    let after = w
        .server
        .get(&format!("{}/{id}", w.destinations()))
        .bearer(&w.token)
        .call()
        .json();
    assert!(
        after["data"]["destination"]["deleted_at"].is_string(),
        "a deleted destination shows when"
    );
    assert!(
        w.server
            .get(&w.destinations())
            .bearer(&w.token)
            .call()
            .json()["data"]["destinations"]
            .as_array()
            .unwrap()
            .is_empty()
    );
    w.server
        .request("DELETE", &format!("{}/{id}", w.destinations()))
        .bearer(&w.token)
        .call()
        .assert_error(404, "resource.not_found");
    w.server
        .get(&format!("{}/99999", w.destinations()))
        .bearer(&w.token)
        .call()
        .assert_error(404, "resource.not_found");
    // An id that is not a number names the destination it was to find, as an unknown one does.
    let errors = w
        .server
        .get(&format!("{}/abc", w.destinations()))
        .bearer(&w.token)
        .call()
        .assert_error(404, "resource.not_found");
    assert_eq!(errors[0]["sub_type"], "destination", "{errors:?}");
    assert_eq!(
        w.create_destination("customers", &w.sim.base_url, 5000)
            .status,
        200,
        "the topic is free again"
    );
}

/// Starts a customer sync and waits (up to 30 s) for its end; its resource then.
fn customer_sync_to_the_end(server: &MercerServer, shop: &str, token: &str) -> Value {
    let sync = format!("/customers/v2/shops/{shop}/sync");
    let started = server.post(&sync).bearer(token).call();
    assert_eq!(started.status, 202, "{}", started.text);
    let run = started.json()["data"]["sync"]["id"].as_i64().unwrap();
    let status = || {
        server
            .get(&format!("{sync}/{run}"))
            .bearer(token)
            .call()
            .json()["data"]["sync"]
            .clone()
    };
    assert!(wait_until(Duration::from_secs(30), || status()["status"] != "running"));
    status()
}

fn a_connector_on_the_previous_secret_is_called_through_the_grace_but_not_verified(
    backend: Backend,
) {
    let w = World::new(backend);
    let id = w.register("customers");
    // Mercer rotates; the simulator still holds the secret of World::new.
    let rotate = format!("/integrations/v1/shops/{}/shared_secret/rotate", w.shop);
    let rotated = w.server.post(&rotate).bearer(&w.token).call().json();
    let new_secret = rotated["data"]["shared_secret"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(rotated["data"]["previous_valid_until"].is_string());
    // Operations go on through the grace: X-Compatible-HMAC carries the old secret's HMAC.
    let done = customer_sync_to_the_end(&w.server, &w.shop, &w.token);
    assert_eq!(done["status"], "succeeded", "{done}");
    // Verification takes the current secret only: the connector still on the old one is refused.
    let path = format!("{}/{id}", w.destinations());
    let patch = |timeout_ms: i64| {
        w.server
            .request("PATCH", &path)
            .bearer(&w.token)
            .json(&json!({"data": {"destination": {"timeout_ms": timeout_ms}}}))
    };
    patch(4000).assert_error(502, "connector.verification_failed");
    // Once the connector takes the new secret, it verifies.
    w.sim.simulator.add_shop(&w.shop, &new_secret, None);
    let updated = patch(4000);
    assert_eq!(updated.status, 200, "{}", updated.text);
    // A connector on a secret Mercer never had is refused.
    w.sim.simulator.add_shop(&w.shop, "some-other-secret", None);
    patch(3000).assert_error(502, "connector.verification_failed");
}

/// A new shop has its connector secret from the start: the demo's, printed once, is all a
/// connector needs, with no rotation first.
fn a_new_shop_registers_a_destination_without_a_rotation(backend: Backend) {
    let server =
        MercerServer::start_with(TestDatabase::create(backend), &["--allow-private-targets"]);
    let demo = server.demo().clone();
    let sim = RunningSimulator::start().unwrap();
    sim.simulator
        .add_shop(&demo.shop, &demo.connector_secret, None);
    let body = json!({"data": {"destination": {"shop_identifier": demo.shop, "topic": "customers",
        "destination": sim.base_url, "version": "v1", "timeout_ms": 5000}}});
    let created = server
        .post(&format!(
            "/integrations/v1/shops/{}/platform_connector_destinations",
            demo.shop
        ))
        .bearer(&demo.token)
        .json(&body);
    assert_eq!(created.status, 200, "{}", created.text);
}

fn an_update_naming_another_id_is_422(backend: Backend) {
    let w = World::new(backend);
    let id = w.register("customers");
    let path = format!("{}/{id}", w.destinations());
    let patch = |body: Value| {
        w.server
            .request("PATCH", &path)
            .bearer(&w.token)
            .json(&body)
    };
    let answer = patch(json!({"data": {"destination": {"id": id + 1, "timeout_ms": 4000}}}));
    let errors = answer.assert_error(422, "validation.failed");
    assert_eq!(errors[0]["field"], "data.destination.id", "{}", answer.text);
    let unchanged = w.server.get(&path).bearer(&w.token).call().json();
    assert_eq!(unchanged["data"]["destination"]["timeout_ms"], 5000);
    // The path's own id, as a number or as text, is fine.
    for same in [json!(id), json!(id.to_string())] {
        let answer = patch(json!({"data": {"destination": {"id": same, "timeout_ms": 4000}}}));
        assert_eq!(answer.status, 200, "{}", answer.text);
    }
}

fn bad_connectors_are_refused_and_nothing_is_stored(backend: Backend) {
    let w = World::new(backend);
    w.fault(Faults {
        wrong_hmac: true,
        ..Faults::default()
    });
    let entries = w
        .create_destination("customers", &w.sim.base_url, 5000)
        .assert_error(502, "connector.verification_failed");
    assert_eq!(entries[0]["severity"], "critical");
    w.fault(Faults {
        status: Some(500),
        ..Faults::default()
    });
    w.create_destination("customers", &w.sim.base_url, 5000)
        .assert_error(502, "connector.verification_failed");
    w.fault(Faults {
        malformed_json: true,
        wrong_hmac: true,
        ..Faults::default()
    });
    w.create_destination("orders", &w.sim.base_url, 5000)
        .assert_error(502, "connector.verification_failed");
    w.fault(Faults {
        delay_ms: Some(1500),
        ..Faults::default()
    });
    let started = std::time::Instant::now();
    w.create_destination("customers", &w.sim.base_url, 300)
        .assert_error(504, "connector.timeout");
    assert!(
        started.elapsed() < Duration::from_millis(1400),
        "timeout_ms bounds the call"
    );
    w.fault(Faults::default());
    w.create_destination("customers", "http://127.0.0.1:9/nothing-listens", 5000)
        .assert_error(502, "connector.verification_failed");
    assert!(
        w.server
            .get(&w.destinations())
            .bearer(&w.token)
            .call()
            .json()["data"]["destinations"]
            .as_array()
            .unwrap()
            .is_empty()
    );

    // An update that the connector does not confirm changes nothing either.
    let id = w.register("customers");
    w.fault(Faults {
        status: Some(500),
        ..Faults::default()
    });
    let path = format!("{}/{id}", w.destinations());
    w.server
        .request("PATCH", &path)
        .bearer(&w.token)
        .json(&json!({"data": {"destination": {"timeout_ms": 999}}}))
        .assert_error(502, "connector.verification_failed");
    w.fault(Faults::default());
    assert_eq!(
        w.server.get(&path).bearer(&w.token).call().json()["data"]["destination"]["timeout_ms"],
        5000
    );
}

fn destination_input_is_checked_field_by_field(backend: Backend) {
    let w = World::new(backend);
    let post = |body: Value| {
        w.server
            .post(&w.destinations())
            .bearer(&w.token)
            .json(&body)
    };
    let field_of = |answer: Answer| -> Vec<String> {
        answer
            .assert_error(422, "validation.failed")
            .iter()
            .map(|e| e["field"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(field_of(post(json!({}))), ["data"]);
    assert_eq!(field_of(post(json!({"data": {}}))), ["data.destination"]);
    assert_eq!(
        field_of(post(json!({"data": {"destination": {}}}))),
        ["data.destination.topic", "data.destination.destination"]
    );
    let base = |extra: Value| {
        let mut destination = json!({"topic": "customers", "destination": w.sim.base_url});
        destination
            .as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        post(json!({"data": {"destination": destination}}))
    };
    assert_eq!(
        field_of(base(json!({"topic": "invoices"}))),
        ["data.destination.topic"]
    );
    assert_eq!(
        field_of(base(json!({"destination": "ftp://example.test"}))),
        ["data.destination.destination"]
    );
    assert_eq!(
        field_of(base(json!({"destination": "not a url"}))),
        ["data.destination.destination"]
    );
    assert_eq!(
        field_of(base(json!({"version": "v9"}))),
        ["data.destination.version"]
    );
    assert_eq!(
        field_of(base(json!({"timeout_ms": 99}))),
        ["data.destination.timeout_ms"]
    );
    assert_eq!(
        field_of(base(json!({"timeout_ms": 30001}))),
        ["data.destination.timeout_ms"]
    );
    assert_eq!(
        field_of(base(json!({"timeout_ms": "fast"}))),
        ["data.destination.timeout_ms"]
    );
    assert_eq!(
        field_of(base(
            json!({"shop_identifier": "ffffffffffffffffffffffffffffffff"})
        )),
        ["data.destination.shop_identifier"]
    );
    assert_eq!(
        base(json!({"timeout_ms": 100})).status,
        200,
        "the bounds themselves are allowed"
    );

    let limited = w
        .server
        .cli(&[
            "token",
            "create",
            "--shop",
            &w.shop,
            "--scope",
            "read_shop_settings",
        ])
        .value();
    w.server
        .post(&w.destinations())
        .bearer(&limited)
        .json(&json!({}))
        .assert_error(403, "auth.forbidden");
    assert_eq!(
        w.server
            .get(&w.destinations())
            .bearer(&limited)
            .call()
            .status,
        200
    );

    // Without a connector secret there is nothing to verify with: a shop from before every new
    // shop got one.
    let other = w
        .server
        .cli(&["shop", "create", "--domain", "nosecret.shop.test"])
        .values()[0]
        .clone();
    w.server.database().execute(
        "DELETE FROM shared_secrets WHERE shop_id = \
         (SELECT id FROM shops WHERE shop_domain = 'nosecret.shop.test')",
    );
    let other_token = w
        .server
        .cli(&["token", "create", "--shop", &other, "--scope", "all"])
        .value();
    let body =
        json!({"data": {"destination": {"topic": "customers", "destination": w.sim.base_url}}});
    let path = format!("/integrations/v1/shops/{other}/platform_connector_destinations");
    w.server
        .post(&path)
        .bearer(&other_token)
        .json(&body)
        .assert_error(409, "connector.secret_not_configured");
}

fn every_invalid_event_is_422_and_stores_nothing(backend: Backend) {
    let w = World::new(backend);
    for (service, collection, key) in [
        ("customers", "customers", "customer"),
        ("orders", "orders", "order"),
        ("products", "products", "product"),
        ("products", "categories", "category"),
    ] {
        let cases = [
            ("saved", json!({}), "data"),
            ("saved", json!({"data": {}}), &*format!("data.{key}")),
            (
                "saved",
                json!({"data": {key: {"platform_updated_at": time(0)}}}),
                &*format!("data.{key}.platform_id"),
            ),
            (
                "saved",
                json!({"data": {key: {"platform_id": "x1"}}}),
                &*format!("data.{key}.platform_updated_at"),
            ),
            (
                "saved",
                json!({"data": {key: {"platform_id": "x1", "platform_updated_at": "last week"}}}),
                &*format!("data.{key}.platform_updated_at"),
            ),
            (
                "deleted",
                json!({"data": {key: {"platform_deleted_at": time(0)}}}),
                &*format!("data.{key}.platform_id"),
            ),
            (
                "deleted",
                json!({"data": {key: {"platform_id": "x1"}}}),
                &*format!("data.{key}.platform_deleted_at"),
            ),
            (
                "deleted",
                json!({"data": {key: {"platform_id": "x1", "platform_deleted_at": 17}}}),
                &*format!("data.{key}.platform_deleted_at"),
            ),
        ]
        .map(|(action, body, field)| (action, body, field.to_string()));
        for (action, body, field) in cases {
            let answer = w.event(service, collection, action, &body);
            let entries = answer.assert_error(422, "validation.failed");
            assert_eq!(
                entries[0]["field"],
                field.as_str(),
                "{service}/{collection}/{action} {body}"
            );
        }
        let ok = w.event(
            service,
            collection,
            "saved",
            &json!({"data": {key: {"platform_id": "x1", "platform_updated_at": time(0)}}}),
        );
        assert_eq!(
            (ok.status, ok.text.as_str()),
            (202, ""),
            "202 with an empty body"
        );
        let gone = w.event(
            service,
            collection,
            "deleted",
            &json!({"data": {key: {"platform_id": "x1", "platform_deleted_at": time(1)}}}),
        );
        assert_eq!(gone.status, 202);
    }
    w.event("customers", "customers", "saved", &json!({"data": {"customer": {"platform_id": "c9", "platform_updated_at": time(0), "addresses": [{"city": 7}]}}}))
        .assert_error(422, "validation.failed");
    w.event("orders", "orders", "saved", &json!({"data": {"order": {"platform_id": "o9", "platform_updated_at": time(0), "total": 12.5}}}))
        .assert_error(422, "validation.failed");
    w.wait_applied();
    // The valid events were stored and applied; the refused ones left nothing.
    use mercer_domain::platform::events::EntityKind;
    let shop_id = w
        .store
        .read(|tx| Ok(mercer_domain::access::shop::find_shop(tx, &w.shop)?.id))
        .unwrap();
    for kind in EntityKind::ALL {
        let record = w
            .store
            .read(|tx| Ok(tx.platform_entity(shop_id, kind, "x1")?))
            .unwrap()
            .unwrap();
        assert!(
            record.platform_deleted_at.is_some(),
            "{kind:?} x1 saved then deleted"
        );
    }
    assert!(
        w.store
            .read(|tx| Ok(tx.platform_entity(shop_id, EntityKind::Customer, "c9")?))
            .unwrap()
            .is_none()
    );
    assert!(
        w.store
            .read(|tx| Ok(tx.platform_entity(shop_id, EntityKind::Order, "o9")?))
            .unwrap()
            .is_none()
    );

    let read_only = w
        .server
        .cli(&[
            "token",
            "create",
            "--shop",
            &w.shop,
            "--scope",
            "read_customers",
        ])
        .value();
    let path = format!(
        "/customers/v1/shops/{}/platforms/custom/webhooks/customers/saved",
        w.shop
    );
    w.server
        .post(&path)
        .bearer(&read_only)
        .json(&json!({}))
        .assert_error(403, "auth.forbidden");
}

fn shuffled_deliveries_end_at_the_newest_version(backend: Backend) {
    let w = World::new(backend);
    let mut deliveries = Vec::new();
    for customer in 0..15 {
        for version in 1..=5 {
            deliveries.push((customer, version));
        }
    }
    // A fixed shuffle: deliveries arrive out of order, and several versions of one customer race.
    let mut seed: u64 = 0x5eed;
    for i in (1..deliveries.len()).rev() {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        deliveries.swap(i, (seed >> 33) as usize % (i + 1));
    }
    let threads: Vec<_> = deliveries
        .chunks(deliveries.len() / 4 + 1)
        .map(|chunk| {
            let chunk = chunk.to_vec();
            let (url, token, shop) = (w.server.base_url.clone(), w.token.clone(), w.shop.clone());
            std::thread::spawn(move || {
                let agent: ureq::Agent = ureq::Agent::config_builder().http_status_as_error(false).build().into();
                for (customer, version) in chunk {
                    let body = json!({"data": {"customer": {
                        "platform_id": format!("c{customer}"),
                        "platform_updated_at": time(version * 10),
                        "email": format!("c{customer}-v{version}@example.test"),
                        "addresses": [{"platform_id": format!("a{customer}"), "city": format!("City v{version}")}]
                    }}});
                    let answer = agent
                        .post(&format!("{url}/customers/v1/shops/{shop}/platforms/custom/webhooks/customers/saved"))
                        .header("Authorization", &format!("Bearer {token}"))
                        .send_json(body)
                        .unwrap();
                    assert_eq!(answer.status().as_u16(), 202);
                }
            })
        })
        .collect();
    for thread in threads {
        thread.join().unwrap();
    }
    w.wait_applied();
    for customer in 0..15 {
        let found = w.directory_customer(&format!("c{customer}")).json();
        assert_eq!(
            found["customer"]["email"],
            format!("c{customer}-v5@example.test")
        );
        assert_eq!(found["customer"]["addresses"][0]["city"], "City v5");
    }
    assert_eq!(w.directory("").json()["pagination"]["total"], 15);
}

fn a_deletion_then_a_newer_save_brings_the_customer_back(backend: Backend) {
    let w = World::new(backend);
    assert_eq!(w.customer_saved(json!({"platform_id": "c1", "platform_updated_at": time(10), "email": "one@example.test"})).status, 202);
    assert_eq!(
        w.event(
            "customers",
            "customers",
            "deleted",
            &json!({"data": {"customer": {"platform_id": "c1", "platform_deleted_at": time(20)}}})
        )
        .status,
        202
    );
    assert_eq!(w.customer_saved(json!({"platform_id": "c1", "platform_updated_at": time(15), "email": "stale@example.test"})).status, 202);
    w.wait_applied();
    w.directory_customer("c1")
        .assert_error(404, "resource.not_found");
    assert_eq!(w.customer_saved(json!({"platform_id": "c1", "platform_updated_at": time(30), "email": "back@example.test"})).status, 202);
    w.wait_applied();
    let back = w.directory_customer("c1");
    assert_eq!(back.status, 200);
    assert_eq!(back.json()["customer"]["email"], "back@example.test");
    // An equal timestamp with equal content changes nothing, not even updated_at.
    let before = back.json()["customer"]["updated_at"].clone();
    w.customer_saved(
        json!({"platform_id": "c1", "platform_updated_at": time(30), "email": "back@example.test"}),
    );
    w.wait_applied();
    assert_eq!(
        w.directory_customer("c1").json()["customer"]["updated_at"],
        before
    );
}

/// (platform id, name) of each group of a directory answer's customer, in the answer's order.
fn groups_of(customer: &Value) -> Vec<(String, String)> {
    customer["groups"]
        .as_array()
        .expect("groups is a list")
        .iter()
        .map(|group| {
            (
                group["platform_id"].as_str().unwrap().to_string(),
                group["name"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

fn named(groups: &[(&str, &str)]) -> Vec<(String, String)> {
    groups
        .iter()
        .map(|(id, name)| (id.to_string(), name.to_string()))
        .collect()
}

fn customer_groups_given_changed_and_left_out_reach_the_directory(backend: Backend) {
    let w = World::new(backend);
    let saved = |customer: Value| {
        let answer = w.customer_saved(customer);
        assert_eq!(answer.status, 202, "{}", answer.text);
    };
    saved(
        json!({"platform_id": "c1", "platform_updated_at": time(10), "email": "ada@example.test",
        "groups": [{"platform_id": "7", "name": "Wholesale"}, {"platform_id": 9, "name": "VIP"}]}),
    );
    saved(
        json!({"platform_id": "c2", "platform_updated_at": time(10), "email": "grace@example.test",
        "groups": [{"platform_id": "7", "name": "Wholesale"}]}),
    );
    w.wait_applied();
    let c1 = w.directory_customer("c1").json()["customer"].clone();
    assert_eq!(
        groups_of(&c1),
        named(&[("9", "VIP"), ("7", "Wholesale")]),
        "given: by name"
    );
    let wholesale = c1["groups"][1].clone();
    assert!(wholesale["id"].as_i64().is_some(), "{wholesale}");
    assert_eq!(wholesale["shop_identifier"], w.shop.as_str());
    assert!(wholesale["created_at"].is_string() && wholesale["updated_at"].is_string());

    // Left out: the groups stay as they are, whatever else changes.
    saved(
        json!({"platform_id": "c1", "platform_updated_at": time(20), "email": "ada@new.example.test"}),
    );
    w.wait_applied();
    let c1 = w.directory_customer("c1").json()["customer"].clone();
    assert_eq!(c1["email"], "ada@new.example.test");
    assert_eq!(
        groups_of(&c1),
        named(&[("9", "VIP"), ("7", "Wholesale")]),
        "left out: unchanged"
    );

    // Changed: the list given is the whole list, and the group takes its new name for every
    // member; a stale event changes nothing.
    saved(json!({"platform_id": "c1", "platform_updated_at": time(30),
        "groups": [{"platform_id": "7", "name": "Trade"}]}));
    saved(json!({"platform_id": "c1", "platform_updated_at": time(25), "groups": []}));
    w.wait_applied();
    let c1 = w.directory_customer("c1").json()["customer"].clone();
    assert_eq!(groups_of(&c1), named(&[("7", "Trade")]));
    assert_eq!(
        c1["groups"][0]["id"], wholesale["id"],
        "the same group, renamed"
    );
    let c2_id = w.directory_customer("c2").json()["customer"]["id"].clone();
    let by_id = w
        .server
        .get(&format!("/customers/v2/shops/{}/customers/{c2_id}", w.shop))
        .bearer(&w.token)
        .call();
    assert_eq!(by_id.status, 200, "{}", by_id.text);
    assert_eq!(
        groups_of(&by_id.json()["customer"]),
        named(&[("7", "Trade")])
    );

    // Given empty: none.
    saved(json!({"platform_id": "c2", "platform_updated_at": time(40), "groups": []}));
    w.wait_applied();
    let page = w.directory("?orderby=email").json();
    let listed: Vec<(String, Vec<(String, String)>)> = page["customers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["platform_id"]["string_value"]
                    .as_str()
                    .unwrap()
                    .to_string(),
                groups_of(c),
            )
        })
        .collect();
    assert_eq!(
        listed,
        [
            ("c1".to_string(), named(&[("7", "Trade")])),
            ("c2".to_string(), vec![]),
        ]
    );

    // A group is known by its platform id: one without is refused, naming it.
    let refused = w.customer_saved(json!({"platform_id": "c1", "platform_updated_at": time(50),
        "groups": [{"platform_id": "7"}, {"name": "Nameless"}]}));
    let entries = refused.assert_error(422, "validation.failed");
    assert_eq!(entries[0]["field"], "data.customer.groups[1].platform_id");
}

fn a_sync_pulls_every_page_and_the_directory_serves_it(backend: Backend) {
    let w = World::new(backend);
    let sync = format!("/customers/v2/shops/{}/sync", w.shop);
    w.server
        .post(&sync)
        .bearer(&w.token)
        .call()
        .assert_error(409, "destination.missing");
    w.register("customers");
    {
        let mut state = w.sim.simulator.lock();
        for n in 0..1000 {
            let customer = serde_json::from_value(json!({
                "email": format!("person{n:04}@{}", if n % 2 == 0 { "even.test" } else { "odd.test" }),
                "first_name": format!("First{n:04}"),
                "last_name": format!("Last{:04}", 999 - n),
                "addresses": [{"city": "Springfield", "postal_code": "12345", "country_code": "US", "is_default": true}, {"city": "Shelbyville", "country_code": "US"}]
            }))
            .unwrap();
            state.create_customer(&w.shop, customer).unwrap();
        }
    }
    w.fault(Faults {
        delay_ms: Some(200),
        times: Some(2),
        ..Faults::default()
    });
    let started = w.server.post(&sync).bearer(&w.token).call();
    assert_eq!(started.status, 202, "{}", started.text);
    let run = started.json()["data"]["sync"].clone();
    assert_eq!(run["status"], "running");
    w.server
        .post(&sync)
        .bearer(&w.token)
        .call()
        .assert_error(409, "sync.running");
    let id = run["id"].as_i64().unwrap();
    let status = |w: &World| {
        w.server
            .get(&format!("{sync}/{id}"))
            .bearer(&w.token)
            .call()
            .json()["data"]["sync"]
            .clone()
    };
    assert!(
        wait_until(Duration::from_secs(60), || status(&w)["status"]
            != "running"),
        "the sync ends"
    );
    let done = status(&w);
    assert_eq!(
        (
            done["status"].as_str(),
            done["pages"].as_i64(),
            done["items"].as_i64()
        ),
        (Some("succeeded"), Some(4), Some(1000)),
        "{done}"
    );
    let list_calls = w
        .requests_to_sim()
        .iter()
        .filter(|r| r.path.ends_with("/customers") && r.method == "GET")
        .count();
    assert_eq!(list_calls, 4, "four pages of 250");
    w.wait_applied();

    let first = w
        .directory("?limit=100&page=2&orderby=last_name&orderdirection=desc")
        .json();
    let pagination = &first["pagination"];
    assert_eq!(
        (
            pagination["total"].as_i64(),
            pagination["count"].as_i64(),
            pagination["per_page"].as_i64()
        ),
        (Some(1000), Some(100), Some(100))
    );
    assert_eq!(
        (
            pagination["current_page"].as_i64(),
            pagination["total_pages"].as_i64()
        ),
        (Some(2), Some(10))
    );
    let next_url = pagination["next_url"].as_str().unwrap();
    assert!(
        next_url.contains("page=3") && next_url.contains("orderby=last_name"),
        "{next_url}"
    );
    assert!(
        pagination["previous_url"]
            .as_str()
            .unwrap()
            .contains("page=1")
    );
    let customers = first["customers"].as_array().unwrap();
    assert_eq!(customers[0]["last_name"], "Last0899");
    assert_eq!(customers[99]["last_name"], "Last0800");
    let shape = &customers[0];
    for key in [
        "id",
        "shop_identifier",
        "platform_type",
        "first_name",
        "last_name",
        "email",
        "phone",
        "tags",
        "created_at",
        "updated_at",
        "deleted_at",
        "platform_created_at",
        "platform_id",
        "addresses",
        "default_address",
        "labels",
        "groups",
    ] {
        assert!(
            shape.get(key).is_some(),
            "directory customer has {key}: {shape}"
        );
    }
    assert_eq!(shape["addresses"].as_array().unwrap().len(), 2);
    assert_eq!(shape["default_address"]["city"], "Springfield");
    assert!(
        shape["platform_id"]["string_value"]
            .as_str()
            .unwrap()
            .starts_with("cus_")
    );
    for key in [
        "svc_customer_id",
        "country_iso2",
        "zip",
        "company",
        "street_2",
        "phone",
        "platform_customer_id",
    ] {
        assert!(
            shape["addresses"][0].get(key).is_some(),
            "directory address has {key}"
        );
    }
    assert_eq!(
        shape["addresses"][0]["company"],
        json!({"value": "", "valid": false})
    );

    let last = w.directory("?limit=100&page=10").json();
    assert!(last["pagination"]["next_url"].is_null());
    assert_eq!(
        w.directory("?search=PERSON0042").json()["pagination"]["total"],
        1
    );
    assert_eq!(
        w.directory("?filter=like(email:%25@odd.test)&limit=1")
            .json()["pagination"]["total"],
        500
    );
    let id = customers[0]["id"].as_i64().unwrap();
    let after_id = w.directory(&format!("?since_id={id}&limit=1")).json()["pagination"]["total"]
        .as_i64()
        .unwrap();
    let greater =
        w.directory(&format!("?filter=gt(id:{id})&limit=1")).json()["pagination"]["total"]
            .as_i64()
            .unwrap();
    assert_eq!(after_id, greater);
    assert!(after_id > 0 && after_id < 1000, "{after_id}");
    assert_eq!(
        w.directory(&format!("?filter=gte(id:{id}),lte(id:{id})"))
            .json()["customers"][0]["id"],
        id
    );
    for (query, parameter) in [
        ("?orderby=shoe_size", "orderby"),
        ("?filter=gt(shoe_size:1)", "filter"),
        ("?filter=between(id:1)", "filter"),
        ("?limit=500", "limit"),
        ("?page=0", "page"),
        ("?updated_at_min=yesterday", "updated_at_min"),
    ] {
        let entries = w
            .directory(query)
            .assert_error(400, "request.invalid_query");
        assert_eq!(entries[0]["field"], parameter, "{query}");
    }

    let one = w
        .server
        .get(&format!("/customers/v2/shops/{}/customers/{id}", w.shop))
        .bearer(&w.token)
        .call()
        .json();
    assert_eq!(one["customer"]["id"], id);
    let platform_id = one["customer"]["platform_id"]["string_value"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(
        w.directory_customer(&platform_id).json()["customer"]["id"],
        id
    );
    let addresses = w
        .server
        .get(&format!(
            "/customers/v2/shops/{}/customers/{id}/addresses",
            w.shop
        ))
        .bearer(&w.token)
        .call()
        .json();
    let address_id = addresses["addresses"][1]["id"].as_i64().unwrap();
    let address = w
        .server
        .get(&format!(
            "/customers/v2/shops/{}/customers/{id}/addresses/{address_id}",
            w.shop
        ))
        .bearer(&w.token)
        .call()
        .json();
    assert_eq!(address["address"]["city"], "Shelbyville");
    w.server
        .get(&format!(
            "/customers/v2/shops/{}/customers/{id}/addresses/999999",
            w.shop
        ))
        .bearer(&w.token)
        .call()
        .assert_error(404, "resource.not_found");
    w.server
        .get(&format!("/customers/v2/shops/{}/customers/999999", w.shop))
        .bearer(&w.token)
        .call()
        .assert_error(404, "resource.not_found");

    let labels = format!("/customers/v2/shops/{}/customers/{id}/labels", w.shop);
    let added = w
        .server
        .post(&labels)
        .bearer(&w.token)
        .json(&json!({"name": "vip"}));
    assert_eq!(added.status, 201, "{}", added.text);
    let label_id = added.json()["label"]["id"].as_i64().unwrap();
    assert_eq!(
        w.server
            .post(&labels)
            .bearer(&w.token)
            .json(&json!({"name": "vip"}))
            .status,
        200,
        "adding it again changes nothing"
    );
    w.server
        .post(&labels)
        .bearer(&w.token)
        .json(&json!({}))
        .assert_error(422, "validation.failed");
    let tagged = w.directory("?label=vip").json();
    assert_eq!(tagged["pagination"]["total"], 1);
    assert_eq!(tagged["customers"][0]["labels"][0]["name"], "vip");
    assert_eq!(
        w.server
            .request("DELETE", &format!("{labels}/{label_id}"))
            .bearer(&w.token)
            .call()
            .status,
        204
    );
    w.server
        .request("DELETE", &format!("{labels}/{label_id}"))
        .bearer(&w.token)
        .call()
        .assert_error(404, "resource.not_found");
    assert_eq!(w.directory("?label=vip").json()["pagination"]["total"], 0);
}

fn the_simulators_own_changes_reach_the_directory(backend: Backend) {
    let w = World::new(backend);
    let created: Value = {
        let mut state = w.sim.simulator.lock();
        let customer = state
            .create_customer(
                &w.shop,
                serde_json::from_value(json!({"email": "pushed@example.test"})).unwrap(),
            )
            .unwrap();
        serde_json::to_value(customer).unwrap()
    };
    // The admin API is what pushes; call it as a platform operator would.
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let mut answer = agent
        .post(&format!(
            "{}/admin/shops/{}/customers",
            w.sim.base_url, w.shop
        ))
        .send_json(json!({"email": "via-admin@example.test", "first_name": "Pushed"}))
        .unwrap();
    let body: Value = serde_json::from_str(&answer.body_mut().read_to_string().unwrap()).unwrap();
    assert_eq!(body["push"]["status"], 202, "{body}");
    let platform_id = body["data"]["platform_id"].as_str().unwrap().to_string();
    w.wait_applied();
    assert_eq!(
        w.directory_customer(&platform_id).json()["customer"]["first_name"],
        "Pushed"
    );
    assert!(created["platform_id"].is_string());

    let mut answer = agent
        .delete(&format!(
            "{}/admin/shops/{}/customers/{platform_id}",
            w.sim.base_url, w.shop
        ))
        .call()
        .unwrap();
    let body: Value = serde_json::from_str(&answer.body_mut().read_to_string().unwrap()).unwrap();
    assert_eq!(body["push"]["status"], 202, "{body}");
    w.wait_applied();
    w.directory_customer(&platform_id)
        .assert_error(404, "resource.not_found");
}

fn service_side_changes_reach_the_connector_through_the_outbox(backend: Backend) {
    let w = World::new(backend);
    let shop_id = w
        .store
        .read(|tx| Ok(mercer_domain::access::shop::find_shop(tx, &w.shop)?.id))
        .unwrap();
    let now = mercer_domain::Timestamp::now();
    let customer_id = {
        let mut state = w.sim.simulator.lock();
        let customer = state
            .create_customer(
                &w.shop,
                serde_json::from_value(
                    json!({"email": "a@example.test", "addresses": [{"city": "Lyon"}]}),
                )
                .unwrap(),
            )
            .unwrap();
        customer.platform_id.unwrap().as_str().to_string()
    };
    let update = ConnectorCall::UpdateCustomer {
        platform_id: customer_id.clone(),
        customer: serde_json::from_value(json!({"first_name": "Ada"})).unwrap(),
    };
    assert_eq!(
        w.store
            .write(|tx| request_connector_change(tx, shop_id, &update, now))
            .unwrap(),
        None,
        "no destination: nothing recorded"
    );

    w.register("customers");
    w.register("orders");
    let address_id = w.sim.simulator.lock().shops[&w.shop].customers[&customer_id]
        .addresses
        .as_ref()
        .unwrap()[0]
        .platform_id
        .clone()
        .unwrap()
        .as_str()
        .to_string();
    w.fault(Faults {
        status: Some(503),
        times: Some(1),
        ..Faults::default()
    });
    let calls = vec![
        update,
        ConnectorCall::CreateAddress {
            platform_customer_id: customer_id.clone(),
            address: serde_json::from_value(json!({"city": "Paris"})).unwrap(),
        },
        ConnectorCall::UpdateAddress {
            platform_customer_id: customer_id.clone(),
            platform_id: address_id.clone(),
            address: serde_json::from_value(json!({"city": "Marseille"})).unwrap(),
        },
        ConnectorCall::CreateOrder {
            order: serde_json::from_value(json!({"order_number": "5001", "total": "9.00"}))
                .unwrap(),
            idempotency_key: Some("sub-7-2030-01-01".into()),
        },
        ConnectorCall::CreateCustomer {
            customer: serde_json::from_value(json!({"email": "new@example.test"})).unwrap(),
        },
    ];
    for call in &calls {
        assert!(
            w.store
                .write(|tx| request_connector_change(tx, shop_id, call, now))
                .unwrap()
                .is_some()
        );
    }
    let delivered = || {
        w.store
            .read(|tx| Ok(tx.outbox_entries(shop_id)?))
            .unwrap()
            .iter()
            .all(|entry| entry.status == OutboxStatus::Delivered)
    };
    assert!(
        wait_until(Duration::from_secs(30), delivered),
        "{:?}",
        w.store.read(|tx| Ok(tx.outbox_entries(shop_id)?)).unwrap()
    );
    let entries = w.store.read(|tx| Ok(tx.outbox_entries(shop_id)?)).unwrap();
    let attempts: Vec<i64> = entries.iter().map(|entry| entry.attempts).collect();
    assert_eq!(
        attempts.iter().filter(|&&n| n == 2).count(),
        1,
        "one call failed once (503) and was retried: {attempts:?}"
    );
    assert_eq!(
        attempts.iter().filter(|&&n| n == 1).count(),
        calls.len() - 1
    );
    assert!(entries.iter().all(|entry| entry.last_error.is_none()));

    let state = w.sim.simulator.lock();
    let data = &state.shops[&w.shop];
    let customer = &data.customers[&customer_id];
    assert_eq!(customer.first_name.as_deref(), Some("Ada"));
    let cities: Vec<&str> = customer
        .addresses
        .as_ref()
        .unwrap()
        .iter()
        .filter_map(|a| a.city.as_deref())
        .collect();
    assert_eq!(cities, ["Marseille", "Paris"]);
    let order = data.orders.values().next().unwrap();
    assert_eq!(order.order_number.as_deref(), Some("5001"));
    assert_eq!(
        data.idempotency.get("sub-7-2030-01-01"),
        order
            .platform_id
            .as_ref()
            .map(|id| id.as_str().to_string())
            .as_ref()
    );
    assert!(
        data.customers
            .values()
            .any(|c| c.email.as_deref() == Some("new@example.test"))
    );
    drop(state);

    // Follow-up calls on the created order, and removal.
    let order_id = w.sim.simulator.lock().shops[&w.shop]
        .orders
        .keys()
        .next()
        .unwrap()
        .clone();
    let more = vec![
        ConnectorCall::CreatePayment {
            platform_order_id: order_id.clone(),
            payment: serde_json::from_value(json!({"amount_planned": "9.00", "provider": "test"}))
                .unwrap(),
        },
        ConnectorCall::UpdateOrder {
            platform_id: order_id.clone(),
            order: serde_json::from_value(json!({"financial_status": "paid"})).unwrap(),
        },
        ConnectorCall::DeleteAddress {
            platform_customer_id: customer_id.clone(),
            platform_id: address_id,
        },
        ConnectorCall::DeleteCustomer {
            platform_id: customer_id.clone(),
        },
    ];
    for call in &more {
        w.store
            .write(|tx| {
                request_connector_change(tx, shop_id, call, mercer_domain::Timestamp::now())
            })
            .unwrap();
    }
    assert!(wait_until(Duration::from_secs(30), delivered));
    let state = w.sim.simulator.lock();
    let data = &state.shops[&w.shop];
    assert_eq!(
        data.orders[&order_id].financial_status.as_deref(),
        Some("paid")
    );
    assert_eq!(
        data.orders[&order_id].payments.as_ref().map(Vec::len),
        Some(1)
    );
    assert!(data.deleted_customers.contains_key(&customer_id));
    drop(state);

    // Once the topic's destination is gone, nothing is recorded and nothing is sent.
    let id = w
        .server
        .get(&w.destinations())
        .bearer(&w.token)
        .call()
        .json()["data"]["destinations"][0]["id"]
        .as_i64()
        .unwrap();
    let before = w.requests_to_sim().len();
    assert_eq!(
        w.server
            .request("DELETE", &format!("{}/{id}", w.destinations()))
            .bearer(&w.token)
            .call()
            .status,
        204
    );
    assert_eq!(
        w.store
            .write(|tx| request_connector_change(
                tx,
                shop_id,
                &more[3],
                mercer_domain::Timestamp::now()
            ))
            .unwrap(),
        None
    );
    std::thread::sleep(Duration::from_millis(700));
    assert_eq!(w.requests_to_sim().len(), before);
}

/// The 422 of a destination the SSRF guard refuses.
fn assert_refused_address(answer: &Answer, url: &str) {
    assert_eq!(answer.status, 422, "{url}: {}", answer.text);
    let entries = answer.errors();
    assert_eq!(entries[0]["type"], "validation.failed", "{url}");
    assert_eq!(entries[0]["field"], "data.destination.destination", "{url}");
    assert_eq!(entries[0]["sub_type"], "address_not_allowed", "{url}");
    // It names the flag an operator would use for a local connector.
    let message = entries[0]["message"].as_str().unwrap_or_default();
    assert!(message.contains("--allow-private-targets"), "{message}");
}

fn private_destinations_are_refused_without_the_flag(backend: Backend) {
    let w = World::new(backend);
    let id = w.register("customers");
    let sim_url = w.sim.base_url.clone();
    let port = sim_url.rsplit(':').next().unwrap().to_string();
    // The same process without --allow-private-targets.
    let shop = w.shop.clone();
    let token = w.token.clone();
    let database = w.server.into_database();
    let strict = MercerServer::start_with(database, &[]);
    let destinations = format!("/integrations/v1/shops/{shop}/platform_connector_destinations");
    let create = |url: &str| {
        strict
            .post(&destinations)
            .bearer(&token)
            .json(&json!({"data": {"destination": {"topic": "orders", "destination": url}}}))
    };
    for url in [
        sim_url.clone(),
        format!("http://localhost:{port}"),
        format!("http://2130706433:{port}"),
        format!("http://0x7f.1:{port}"),
        "http://10.0.0.1".to_string(),
        "http://169.254.169.254/latest".to_string(),
        format!("http://[::1]:{port}"),
        // IPv4-mapped, IPv4-compatible, NAT64, 6to4, Teredo (client, then server), discard.
        format!("http://[::ffff:127.0.0.1]:{port}"),
        format!("http://[::127.0.0.1]:{port}"),
        format!("http://[64:ff9b::7f00:1]:{port}"),
        format!("http://[2002:7f00:1::1]:{port}"),
        format!("http://[2001:0:4136:e378:8000:63bf:80ff:fffe]:{port}"),
        format!("http://[2001:0:7f00:1::f7f7:f7f7]:{port}"),
        format!("http://[100::1]:{port}"),
    ] {
        assert_refused_address(&create(&url), &url);
    }
    assert_eq!(
        w.sim
            .simulator
            .lock()
            .requests
            .iter()
            .filter(|r| r.path.ends_with("/verification"))
            .count(),
        1,
        "only the first registration, with the flag, reached the connector"
    );
    // Updating the destination stored while private targets were allowed is refused too.
    let updated = strict
        .request("PATCH", &format!("{destinations}/{id}"))
        .bearer(&token)
        .json(&json!({"data": {"destination": {"timeout_ms": 3000}}}));
    assert_refused_address(&updated, &sim_url);
    // And calling it is refused when the call is made: a sync fails without reaching it.
    let before = w.sim.simulator.lock().requests.len();
    let done = customer_sync_to_the_end(&strict, &shop, &token);
    assert_eq!(done["status"], "failed", "{done}");
    assert_eq!(
        done["error"], "the connector could not be reached",
        "{done}"
    );
    assert_eq!(w.sim.simulator.lock().requests.len(), before);
}

fn redirects_are_not_followed_and_carry_no_signature(backend: Backend) {
    let w = World::new(backend);
    let elsewhere = Receiver::start();
    let redirect = |status: u16| Faults {
        status: Some(status),
        location: Some(format!("{}/stolen", elsewhere.url)),
        ..Faults::default()
    };
    // The verification call answered with a redirect: refused, not followed.
    w.fault(redirect(307));
    let entries = w
        .create_destination("customers", &w.sim.base_url, 5000)
        .assert_error(502, "connector.verification_failed");
    assert_eq!(
        entries[0]["message"],
        "the connector answered with an error (HTTP 307)"
    );
    assert_eq!(w.requests_to_sim().len(), 1, "one call, to the destination");
    // An operation answered with a redirect: the sync fails, nothing follows it.
    w.fault(Faults::default());
    w.register("customers");
    w.fault(redirect(302));
    let done = customer_sync_to_the_end(&w.server, &w.shop, &w.token);
    assert_eq!(done["status"], "failed", "{done}");
    assert_eq!(
        done["error"], "the connector answered with an error (HTTP 302)",
        "{done}"
    );
    std::thread::sleep(Duration::from_millis(200));
    let reached = elsewhere.received();
    assert!(
        reached.is_empty(),
        "the redirect's target got requests (X-HMAC: {:?})",
        reached
            .iter()
            .map(|r| r.header("X-HMAC"))
            .collect::<Vec<_>>()
    );
}

fn an_unreachable_connector_is_reported_without_network_details(backend: Backend) {
    let w = World::new(backend);
    let entries = w
        .create_destination("customers", "http://127.0.0.1:9/nothing-listens", 5000)
        .assert_error(502, "connector.verification_failed");
    let message = entries[0]["message"].as_str().unwrap();
    assert_eq!(message, "the connector could not be reached");
    for revealing in ["os error", "refused", "127.0.0.1"] {
        assert!(!message.contains(revealing), "{message}");
    }
}

/// A platform that pushes its own Saved event of every change (as Vendure does): the events of
/// the customer and the address the outbox creates for a new subscriber reach Mercer before the
/// connector's answers do. Applied before the answers are recorded, each made a row of its own,
/// which the recording merges into Mercer's; applied while they are recorded (PostgreSQL's
/// applier runs beside the outbox), the recording is tried again and merges them too. Either
/// way: one customer and one address, the subscription's, and every call delivered at once.
fn the_platforms_own_events_before_the_outbox_records_its_answers_make_no_duplicates(
    backend: Backend,
) {
    let w = World::new(backend);
    let shop_id = w
        .store
        .read(|tx| Ok(mercer_domain::access::shop::find_shop(tx, &w.shop)?.id))
        .unwrap();
    w.register("customers");

    // Each event pushed, then the answer held long enough for Mercer to apply the event.
    w.sim.simulator.lock().push_connector_saves = Some(500);
    let (ada, ada_address) = one_customer_one_address(&w, shop_id, "ada@example.test", 2);
    // The platform's event made a customer row before the answer was recorded: merged since,
    // it is deleted and has no platform id. (It was stored after Mercer's; PostgreSQL may skip
    // ids, hence the range.)
    let later: Vec<CustomerId> = (ada + 1..ada + 50).map(CustomerId).collect();
    let merged = w
        .store
        .read(|tx| Ok(tx.directory_customers_by_ids(shop_id, &later)?))
        .unwrap();
    assert_eq!(
        merged.len(),
        1,
        "the platform's event came first: {merged:?}"
    );
    assert_eq!(merged[0].email.as_deref(), Some("ada@example.test"));
    assert_eq!(merged[0].platform_id, None);
    assert!(merged[0].deleted_at.is_some());
    // So was the address's row.
    let later: Vec<AddressId> = (ada_address + 1..ada_address + 50).map(AddressId).collect();
    let merged = w
        .store
        .read(|tx| Ok(tx.addresses_by_ids(shop_id, &later)?))
        .unwrap();
    let merged: Vec<_> = merged
        .iter()
        .filter(|a| a.customer_id == CustomerId(ada))
        .collect();
    assert_eq!(
        merged.len(),
        1,
        "the platform's event came first: {merged:?}"
    );
    assert_eq!(merged[0].platform_id, None);
    assert!(merged[0].deleted_at.is_some());

    // Answered at once: the events race the recording, whichever wins.
    w.sim.simulator.lock().push_connector_saves = Some(0);
    one_customer_one_address(&w, shop_id, "bob@example.test", 4);
    assert_eq!(w.directory("").json()["pagination"]["total"], 2);
}

/// Creates a subscription for a new subscriber and waits until the shop's `calls` calls are
/// delivered; then the subscriber is one customer of its platform id, with one address, the
/// subscription's, keyed by the platform's id, each call delivered at its first attempt.
/// Returns the ids of the customer and its address.
fn one_customer_one_address(w: &World, shop_id: ShopId, email: &str, calls: usize) -> (i64, i64) {
    use crate::subscriptions::{Api, running_rule, seed_body};

    let api = Api::demo(&w.server);
    let subscription = api.create(&seed_body(email, &running_rule()));
    let customer_id = subscription["customer_id"].as_i64().unwrap();
    let address_id = subscription["shipping_address_id"].as_i64().unwrap();
    assert_eq!(subscription["billing_address_id"], address_id);

    let outbox = || w.store.read(|tx| Ok(tx.outbox_entries(shop_id)?)).unwrap();
    let delivered = wait_until(Duration::from_secs(30), || {
        let entries = outbox();
        entries.len() == calls
            && entries
                .iter()
                .all(|entry| entry.status == OutboxStatus::Delivered)
    });
    assert!(delivered, "{:#?}\n{}", outbox(), w.server.log());
    for entry in outbox() {
        assert_eq!(
            (entry.attempts, entry.last_error),
            (1, None),
            "{}",
            entry.call.operation()
        );
    }
    w.wait_applied();

    let (customer_pid, address_pid) = {
        let state = w.sim.simulator.lock();
        let customer = state.shops[&w.shop]
            .customers
            .values()
            .find(|c| c.email.as_deref() == Some(email))
            .cloned()
            .expect("the customer was created on the platform");
        let addresses = customer.addresses.unwrap_or_default();
        assert_eq!(addresses.len(), 1);
        (
            customer.platform_id.unwrap().as_str().to_string(),
            addresses[0]
                .platform_id
                .clone()
                .unwrap()
                .as_str()
                .to_string(),
        )
    };
    let directory = w.directory_customer(&customer_pid);
    assert_eq!(directory.status, 200, "{}", directory.text);
    let customer = directory.json()["customer"].clone();
    assert_eq!(customer["id"], customer_id);
    let addresses = customer["addresses"].as_array().unwrap().clone();
    assert_eq!(addresses.len(), 1, "{customer}");
    assert_eq!(addresses[0]["id"], address_id);
    assert_eq!(
        addresses[0]["platform_id"]["string_value"],
        address_pid.as_str()
    );
    let searched = w.directory(&format!("?search={email}")).json();
    assert_eq!(searched["pagination"]["total"], 1, "{searched}");
    let listed = api.get(&format!("/customers/{customer_id}/addresses"));
    assert_eq!(listed.status, 200, "{}", listed.text);
    let listed = listed.json()["customer_addresses"].clone();
    assert_eq!(listed.as_array().map(Vec::len), Some(1), "{listed}");
    assert_eq!(listed[0]["id"], address_id);
    let subscription = api.subscription(subscription["id"].as_i64().unwrap());
    assert_eq!(subscription["shipping_address_id"], address_id);
    assert_eq!(subscription["billing_address_id"], address_id);
    (customer_id, address_id)
}

backend_tests!(
    destinations_are_verified_with_the_connector,
    private_destinations_are_refused_without_the_flag,
    redirects_are_not_followed_and_carry_no_signature,
    an_unreachable_connector_is_reported_without_network_details,
    a_connector_on_the_previous_secret_is_called_through_the_grace_but_not_verified,
    a_new_shop_registers_a_destination_without_a_rotation,
    an_update_naming_another_id_is_422,
    bad_connectors_are_refused_and_nothing_is_stored,
    destination_input_is_checked_field_by_field,
    every_invalid_event_is_422_and_stores_nothing,
    shuffled_deliveries_end_at_the_newest_version,
    a_deletion_then_a_newer_save_brings_the_customer_back,
    customer_groups_given_changed_and_left_out_reach_the_directory,
    a_sync_pulls_every_page_and_the_directory_serves_it,
    the_simulators_own_changes_reach_the_directory,
    service_side_changes_reach_the_connector_through_the_outbox,
    the_platforms_own_events_before_the_outbox_records_its_answers_make_no_duplicates,
);
