//! A misbehaving connector during syncs, outbox calls and order placements: errors (500), slow
//! answers (past the destination's `timeout_ms`), refused connections (nothing listening),
//! malformed JSON, and a verification answer signed with a wrong secret. Each is handled as the
//! docs say: a failure that may pass is tried again and the work completes; one that will not
//! (malformed) is reported, on the sync run or the outbox entry; a placement is tried again
//! after the shop's retry interval and places its order once.

use mercer_domain::kernel::ids::{OutboxCallId, ShopId};
use std::thread;
use std::time::{Duration, Instant};

use mercer_domain::platform::outbox::{ConnectorCall, OutboxStatus, request_connector_change};
use mercer_domain::ports::Database;
use mercer_platform_sim::{Faults, MercerLink, RunningSimulator, Simulator};
use mercer_store::Store;
use mercer_tests::chaos::Figures;
use mercer_tests::{Backend, MercerServer, TestDatabase, backend_tests, wait_until};
use serde_json::{Value, json};

use crate::scheduler::{start, subscription, wait_for};
use crate::subscriptions::{Api, id_of};

/// Each fault the connector shows, once.
#[derive(Debug, Clone, Copy)]
enum Fault {
    ServerError,
    Slow,
    Refused,
    Malformed,
}

const FAULTS: [Fault; 4] = [
    Fault::ServerError,
    Fault::Slow,
    Fault::Refused,
    Fault::Malformed,
];

/// The destinations' `timeout_ms`; a slow answer takes longer.
const TIMEOUT_MS: i64 = 1_000;

/// Mercer (scheduler every 200 ms, loopback allowed) with the simulator as the demo shop's
/// customers and orders connector.
struct Platform<'a> {
    api: Api<'a>,
    /// The platform's state, kept while it is not served.
    simulator: Simulator,
    port: u16,
    serving: Option<RunningSimulator>,
    store: Store,
    shop_id: ShopId,
}

impl<'a> Platform<'a> {
    fn new(server: &'a MercerServer) -> Platform<'a> {
        let api = Api::demo(server);
        let secret = server.rotate_connector_secret(&api.shop, &api.token);
        let sim = RunningSimulator::start().unwrap();
        let link = MercerLink {
            base_url: server.base_url.clone(),
            token: api.token.clone(),
        };
        sim.simulator.add_shop(&api.shop, &secret, Some(link));
        let store = server.database().open_store();
        let shop_id = store
            .read(|tx| Ok(mercer_domain::access::shop::find_shop(tx, &api.shop)?.id))
            .unwrap();
        Platform {
            api,
            simulator: sim.simulator.clone(),
            port: sim.port(),
            serving: Some(sim),
            store,
            shop_id,
        }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn register(&self, topic: &str) -> (u16, Value) {
        let body = json!({"data": {"destination": {"shop_identifier": self.api.shop,
            "topic": topic, "destination": self.url(), "version": "v1",
            "timeout_ms": TIMEOUT_MS}}});
        let answer = self
            .api
            .server
            .post(&format!(
                "/integrations/v1/shops/{}/platform_connector_destinations",
                self.api.shop
            ))
            .bearer(&self.api.token)
            .json(&body);
        (answer.status, answer.json())
    }

    /// Starts `work` with the connector showing `fault` on its next request: refused
    /// connections last two seconds, then the platform is served again on its address.
    fn under<T>(&mut self, fault: Fault, work: impl FnOnce(&Platform<'a>) -> T) -> T {
        let faults = match fault {
            Fault::ServerError => Faults {
                status: Some(500),
                times: Some(1),
                ..Faults::default()
            },
            Fault::Slow => Faults {
                delay_ms: Some(u64::try_from(TIMEOUT_MS).unwrap() + 700),
                times: Some(1),
                ..Faults::default()
            },
            Fault::Malformed => Faults {
                malformed_json: true,
                times: Some(1),
                ..Faults::default()
            },
            Fault::Refused => {
                drop(self.serving.take());
                let started = work(self);
                thread::sleep(Duration::from_secs(2));
                self.serving = Some(
                    RunningSimulator::serve(self.simulator.clone(), self.port)
                        .expect("the simulator served again on its port"),
                );
                return started;
            }
        };
        self.simulator.lock().faults = faults;
        work(self)
    }

    fn outbox_entry(&self, id: OutboxCallId) -> mercer_domain::platform::outbox::OutboxEntry {
        self.store
            .read(|tx| Ok(tx.outbox_entries(self.shop_id)?))
            .unwrap()
            .into_iter()
            .find(|entry| entry.id == id)
            .expect("the outbox entry")
    }

    fn orders(&self) -> usize {
        self.simulator
            .lock()
            .shops
            .get(&self.api.shop)
            .map_or(0, |data| data.orders.len())
    }
}

/// The sync's end as `(status, error)`, waiting at most a minute.
fn sync_under(platform: &mut Platform<'_>, fault: Fault) -> (String, String) {
    let run = platform.under(fault, |platform| {
        let started = platform
            .api
            .server
            .post(&format!("/customers/v2/shops/{}/sync", platform.api.shop))
            .bearer(&platform.api.token)
            .call();
        assert_eq!(started.status, 202, "{}", started.text);
        started.json()["data"]["sync"]["id"].as_i64().unwrap()
    });
    let path = format!("/customers/v2/shops/{}/sync/{run}", platform.api.shop);
    let mut last = Value::Null;
    let ended = wait_until(Duration::from_secs(60), || {
        last = platform
            .api
            .server
            .get(&path)
            .bearer(&platform.api.token)
            .call()
            .json()["data"]["sync"]
            .clone();
        last["status"] != "running"
    });
    assert!(ended, "sync under {fault:?} still running: {last}");
    (
        last["status"].as_str().unwrap_or_default().to_string(),
        last["error"].as_str().unwrap_or_default().to_string(),
    )
}

/// The outbox entry of an Update Customer recorded under `fault`, once it is delivered or
/// failed.
fn outbox_under(
    platform: &mut Platform<'_>,
    fault: Fault,
    customer: &str,
) -> mercer_domain::platform::outbox::OutboxEntry {
    let id = platform.under(fault, |platform| {
        let call = ConnectorCall::UpdateCustomer {
            platform_id: customer.to_string(),
            customer: serde_json::from_value(json!({"first_name": format!("{fault:?}")})).unwrap(),
        };
        platform
            .store
            .write(|tx| {
                request_connector_change(
                    tx,
                    platform.shop_id,
                    &call,
                    mercer_domain::Timestamp::now(),
                )
            })
            .unwrap()
            .expect("the call is recorded")
    });
    let settled = wait_until(Duration::from_secs(60), || {
        platform.outbox_entry(id).status != OutboxStatus::Pending
    });
    let entry = platform.outbox_entry(id);
    assert!(settled, "outbox call under {fault:?}: {entry:?}");
    entry
}

fn a_misbehaving_connector_is_retried_or_reported_as_documented(backend: Backend) {
    let server = start(
        TestDatabase::create(backend),
        &["--scheduler-interval-ms", "200"],
    );
    let mut platform = Platform::new(&server);
    let started = Instant::now();
    let mut figures = Figures::new("connector faults", backend);

    // A verification answer signed with a wrong secret: the destination is not registered.
    platform.simulator.lock().faults = Faults {
        wrong_hmac: true,
        ..Faults::default()
    };
    let (status, refused) = platform.register("customers");
    assert_eq!(status, 502, "{refused}");
    assert_eq!(
        refused["errors"][0]["type"],
        "connector.verification_failed"
    );
    platform.simulator.lock().faults = Faults::default();
    for topic in ["customers", "orders"] {
        let (status, body) = platform.register(topic);
        assert_eq!(status, 200, "{body}");
    }
    let customer = {
        let mut state = platform.simulator.lock();
        for n in 0..3 {
            state
                .create_customer(
                    &platform.api.shop,
                    serde_json::from_value(json!({"email": format!("c{n}@example.test")})).unwrap(),
                )
                .unwrap();
        }
        state.shops[&platform.api.shop]
            .customers
            .keys()
            .next()
            .cloned()
            .unwrap()
    };

    let mut retried = 0;
    for fault in FAULTS {
        let (status, error) = sync_under(&mut platform, fault);
        let entry = outbox_under(&mut platform, fault, &customer);
        match fault {
            Fault::Malformed => {
                assert_eq!(status, "failed", "a malformed page ends the sync: {error}");
                assert!(error.contains("malformed"), "{error}");
                assert_eq!(entry.status, OutboxStatus::Failed, "{entry:?}");
                assert_eq!(entry.attempts, 1, "not retried: {entry:?}");
                assert!(entry.last_error.is_some(), "{entry:?}");
            }
            _ => {
                assert_eq!(status, "succeeded", "{fault:?}: {error}");
                assert_eq!(
                    entry.status,
                    OutboxStatus::Delivered,
                    "{fault:?}: {entry:?}"
                );
                assert_eq!(entry.attempts, 2, "{fault:?}: retried once: {entry:?}");
                retried += 1;
            }
        }
    }
    figures
        .set("syncs", FAULTS.len())
        .set("outbox_calls", FAULTS.len())
        .set("retried_to_success", 2 * retried);

    // Placements: each fault on Create Order, the order placed once after a retry.
    server
        .cli(&[
            "shop",
            "update",
            "--shop",
            &platform.api.shop,
            "--order-retry-interval",
            "1",
        ])
        .value();
    let mut placed = 0;
    for (n, fault) in FAULTS.into_iter().enumerate() {
        let id = id_of(&platform.api.create(&subscription(
            &format!("fault{n}@example.test"),
            json!({"subscription_status": "active",
                   "next_order_datetime": "2030-01-07T14:00:00Z"}),
        )));
        // Whatever the new customer sends the connector goes first, unfaulted.
        assert!(wait_until(Duration::from_secs(30), || {
            platform
                .store
                .read(|tx| Ok(tx.outbox_entries(platform.shop_id)?))
                .unwrap()
                .iter()
                .all(|entry| entry.status != OutboxStatus::Pending)
        }));
        let before = platform.orders();
        platform.under(fault, |platform| {
            platform.api.server.database().execute(&format!(
                "UPDATE subscriptions SET next_order_datetime = 1000000 WHERE id = {id}"
            ));
        });
        let done = wait_for(&platform.api, id, 60, |s| s["orders_processed"] == 1);
        let code = done["last_failure_code"].as_str().unwrap_or_default();
        let expected = match fault {
            Fault::ServerError => "connector_failed",
            Fault::Slow => "connector_timeout",
            Fault::Refused => "connector_unreachable",
            Fault::Malformed => "connector_malformed",
        };
        assert_eq!(code, expected, "{fault:?}: {done}");
        assert_eq!(platform.orders(), before + 1, "{fault:?}: one order, once");
        placed += 1;
    }
    figures
        .set("placements_retried_and_placed_once", placed)
        .set("seconds", started.elapsed().as_secs());
    figures.report();
}

backend_tests!(a_misbehaving_connector_is_retried_or_reported_as_documented);
