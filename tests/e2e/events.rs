//! Connector events end to end: the 202 is given only for stored events, the
//! out-of-sequence rule's tie between a save and a deletion of the same time, and what intake
//! refuses (lists over 250 items, times ahead of Mercer's clock).

use std::time::Duration;

use mercer_domain::access::shop::ShopIdentifier;
use mercer_domain::platform::events::{EntityKind, EntityRecord};
use mercer_domain::ports::Database;
use mercer_store::testing::POISONED_EMAIL;
use mercer_store::testing::TestDatabase;
use mercer_tests::{Answer, Backend, MercerServer, backend_tests, wait_until};
use serde_json::{Value, json};

fn time(seconds: i64) -> String {
    mercer_domain::Timestamp::from_micros(1_700_000_000_000_000)
        .plus_seconds(seconds)
        .to_rfc3339()
}

fn event(server: &MercerServer, action: &str, customer: Value) -> Answer {
    let demo = server.demo();
    server
        .post(&format!(
            "/customers/v1/shops/{}/platforms/custom/webhooks/customers/{action}",
            demo.shop
        ))
        .bearer(&demo.token)
        .json(&json!({"data": {"customer": customer}}))
}

fn directory_status(server: &MercerServer, platform_id: &str) -> u16 {
    let demo = server.demo();
    server
        .get(&format!(
            "/customers/v2/shops/{}/customers/pid/{platform_id}",
            demo.shop
        ))
        .bearer(&demo.token)
        .call()
        .status
}

/// Makes every insert into `inbound_events` fail, as a full disk or a lost connection would.
fn fail_event_queueing(server: &MercerServer) {
    let database = server.database();
    database.execute(match database.backend() {
        Backend::Sqlite => {
            "CREATE TRIGGER refuse_events BEFORE INSERT ON inbound_events \
             BEGIN SELECT RAISE(ABORT, 'forced failure'); END;"
        }
        Backend::Postgres => {
            "CREATE FUNCTION refuse_events() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN \
             RAISE EXCEPTION 'forced failure'; END $$; \
             CREATE TRIGGER refuse_events BEFORE INSERT ON inbound_events \
             FOR EACH ROW EXECUTE FUNCTION refuse_events();"
        }
    });
}

fn heal_event_queueing(server: &MercerServer) {
    server
        .database()
        .execute(match server.database().backend() {
            Backend::Sqlite => "DROP TRIGGER refuse_events;",
            Backend::Postgres => {
                "DROP TRIGGER refuse_events ON inbound_events; DROP FUNCTION refuse_events();"
            }
        });
}

/// The ingest writer answers a request only after its events are committed: when storing
/// fails, the client gets a JSON 500, never a 202 for an event that was lost.
fn an_event_that_cannot_be_stored_gets_a_500_never_a_202(backend: Backend) {
    let server = MercerServer::start(backend);
    // Storing an event takes one of two paths: on SQLite with an empty queue the writer applies
    // it at once (writing the customer), and queues it only if that fails; on PostgreSQL it
    // always queues it. Both are made to fail, so whichever path is taken, nothing is stored.
    server.database().fail_customer_writes();
    fail_event_queueing(&server);
    let customer =
        json!({"platform_id": "c1", "platform_updated_at": time(10), "email": POISONED_EMAIL});
    let mut request_ids = Vec::new();
    for _ in 0..3 {
        let answer = event(&server, "saved", customer.clone());
        assert_ne!(answer.status, 202, "a 202 for an event that was not stored");
        answer.assert_error(500, "internal.error");
        // The answer says nothing of the cause; the log has it, once, with the request's method,
        // route pattern and id.
        assert!(!answer.text.contains("storage"), "{}", answer.text);
        request_ids.push(
            answer
                .header("x-request-id")
                .unwrap_or_default()
                .to_string(),
        );
    }
    let route = "POST /customers/v1/shops/{shop}/platforms/custom/webhooks/customers/saved failed: storage failure";
    wait_until(Duration::from_secs(5), || {
        server
            .log()
            .contains(&format!("request_id={}", request_ids[2]))
    });
    let log = server.log();
    for id in &request_ids {
        let lines: Vec<&str> = log
            .lines()
            .filter(|line| line.contains(route) && line.contains(&format!("request_id={id}")))
            .collect();
        assert_eq!(
            lines.len(),
            1,
            "one line with the cause per failed request:\n{log}"
        );
    }
    let store = server.database().open_store();
    assert_eq!(
        store
            .read(|tx| Ok(tx.count_pending_inbound_events()?))
            .unwrap(),
        0
    );
    assert_eq!(directory_status(&server, "c1"), 404);

    // The same event is accepted once storing works again: the 500 came from the storing.
    heal_event_queueing(&server);
    server.database().heal_customer_writes();
    assert_eq!(event(&server, "saved", customer).status, 202);
    let applied = wait_until(Duration::from_secs(10), || {
        directory_status(&server, "c1") == 200
    });
    assert!(applied, "the accepted event is applied");
}

/// A save and a deletion with the same time: the deletion wins, in either order of arrival.
fn a_deletion_wins_a_same_time_tie_with_a_save(backend: Backend) {
    let server = MercerServer::start(backend);
    let saved = |id: &str| {
        let answer = event(
            &server,
            "saved",
            json!({"platform_id": id, "platform_updated_at": time(10), "email": "a@example.test"}),
        );
        assert_eq!(answer.status, 202, "{}", answer.text);
    };
    let deleted = |id: &str| {
        let answer = event(
            &server,
            "deleted",
            json!({"platform_id": id, "platform_deleted_at": time(10)}),
        );
        assert_eq!(answer.status, 202, "{}", answer.text);
    };
    // Saved, then deleted at the same time: the deletion applies.
    saved("c1");
    deleted("c1");
    // Deleted, then saved at the same time: the save is stale.
    deleted("c2");
    saved("c2");
    // A control that shows events are applied by now: saved at a later time than its deletion.
    deleted("c3");
    let answer = event(
        &server,
        "saved",
        json!({"platform_id": "c3", "platform_updated_at": time(11), "email": "b@example.test"}),
    );
    assert_eq!(answer.status, 202);
    let store = server.database().open_store();
    let applied = wait_until(Duration::from_secs(10), || {
        store
            .read(|tx| Ok(tx.count_pending_inbound_events()?))
            .unwrap()
            == 0
            && directory_status(&server, "c3") == 200
    });
    assert!(applied, "events still pending after 10 s");
    assert_eq!(
        directory_status(&server, "c1"),
        404,
        "saved then deleted at the same time: deleted"
    );
    assert_eq!(
        directory_status(&server, "c2"),
        404,
        "deleted then saved at the same time: still deleted"
    );
}

/// What is held of the demo shop's entity of `kind`, if anything.
fn stored_entity(
    server: &MercerServer,
    kind: EntityKind,
    platform_id: &str,
) -> Option<EntityRecord> {
    let identifier = ShopIdentifier::parse(&server.demo().shop).unwrap();
    server
        .database()
        .open_store()
        .read(|tx| {
            let shop = tx.shop_by_identifier(&identifier)?.expect("the demo shop");
            Ok(tx.platform_entity(shop.id, kind, platform_id)?)
        })
        .unwrap()
}

/// An entity holds at most 250 addresses, variants or line items: a Saved event with one more
/// is 422 naming the list, and nothing of it is stored; one with 250 is accepted and applied.
fn an_entity_with_more_than_250_items_in_a_list_is_refused(backend: Backend) {
    let server = MercerServer::start(backend);
    let demo = server.demo();
    let cases = [
        (
            "customers",
            EntityKind::Customer,
            "addresses",
            json!({"city": "Lyon"}),
        ),
        (
            "products",
            EntityKind::Product,
            "variants",
            json!({"price": "1.00"}),
        ),
        (
            "orders",
            EntityKind::Order,
            "line_items",
            json!({"quantity": 1}),
        ),
    ];
    for (topic, kind, list, item) in cases {
        let key = kind.as_str();
        let saved = |platform_id: &str, count: usize| {
            let entity = json!({"platform_id": platform_id, "platform_updated_at": time(10),
                list: vec![item.clone(); count]});
            server
                .post(&format!(
                    "/{topic}/v1/shops/{}/platforms/custom/webhooks/{topic}/saved",
                    demo.shop
                ))
                .bearer(&demo.token)
                .json(&json!({"data": {key: entity}}))
        };
        let refused = saved("over", 251);
        let entries = refused.assert_error(422, "validation.failed");
        assert_eq!(entries[0]["field"], format!("data.{key}.{list}"), "{key}");
        assert_eq!(entries[0]["sub_type"], "too_many");
        assert_eq!(saved("full", 250).status, 202, "{key}: 250 are accepted");
        let applied = wait_until(Duration::from_secs(10), || {
            stored_entity(&server, kind, "full").is_some()
        });
        assert!(applied, "{key}: the accepted event is applied");
        let document: Value = serde_json::from_str(
            &stored_entity(&server, kind, "full")
                .unwrap()
                .document
                .unwrap(),
        )
        .unwrap();
        assert_eq!(document[list].as_array().map(Vec::len), Some(250), "{key}");
        assert!(
            stored_entity(&server, kind, "over").is_none(),
            "{key}: nothing of the refused event is stored"
        );
    }
    let store = server.database().open_store();
    assert_eq!(
        store
            .read(|tx| Ok(tx.count_pending_inbound_events()?))
            .unwrap(),
        0
    );
}

/// A `platform_updated_at` or `platform_deleted_at` more than 10 minutes after Mercer's clock
/// is 422 naming it: it would win over every true event of the entity until then.
fn a_time_more_than_ten_minutes_ahead_is_refused(backend: Backend) {
    let server = MercerServer::start(backend);
    let ahead = |minutes: i64| {
        mercer_domain::Timestamp::now()
            .plus_seconds(minutes * 60)
            .to_rfc3339()
    };
    let refused = event(
        &server,
        "saved",
        json!({"platform_id": "c1", "platform_updated_at": ahead(11)}),
    );
    let entries = refused.assert_error(422, "validation.failed");
    assert_eq!(entries[0]["field"], "data.customer.platform_updated_at");
    let refused = event(
        &server,
        "deleted",
        json!({"platform_id": "c1", "platform_deleted_at": ahead(11)}),
    );
    let entries = refused.assert_error(422, "validation.failed");
    assert_eq!(entries[0]["field"], "data.customer.platform_deleted_at");
    assert!(stored_entity(&server, EntityKind::Customer, "c1").is_none());

    let accepted = event(
        &server,
        "saved",
        json!({"platform_id": "c1", "platform_updated_at": ahead(9)}),
    );
    assert_eq!(accepted.status, 202, "{}", accepted.text);
    let accepted = event(
        &server,
        "deleted",
        json!({"platform_id": "c2", "platform_deleted_at": ahead(9)}),
    );
    assert_eq!(accepted.status, 202, "{}", accepted.text);
}

backend_tests!(
    an_event_that_cannot_be_stored_gets_a_500_never_a_202,
    a_deletion_wins_a_same_time_tie_with_a_save,
    an_entity_with_more_than_250_items_in_a_list_is_refused,
    a_time_more_than_ten_minutes_ahead_is_refused,
);

/// The events this process applied, from its `/metrics`.
fn applied_here(server: &MercerServer) -> u64 {
    let metrics = server.get("/metrics").call().text;
    metrics
        .lines()
        .find_map(|line| line.strip_prefix("mercer_events_applied_total "))
        .and_then(|value| value.trim().parse().ok())
        .unwrap_or(0)
}

/// Two `mercer serve` processes on one PostgreSQL database, each taking half of the requests:
/// four versions of each of 8 customers of 12 shops, shuffled, so most customers see an older
/// version after a newer one. The two appliers share the queue by partition; every event is
/// applied once, by one of them, and every customer ends at its newest version.
#[test]
fn two_processes_on_one_postgres_apply_shuffled_events_of_many_shops() {
    const SHOPS: usize = 12;
    const CUSTOMERS: usize = 8;
    const VERSIONS: i64 = 4;
    let first = MercerServer::start_with(TestDatabase::create(Backend::Postgres), &[]);
    let second = MercerServer::start_with(TestDatabase::attach(first.database()), &[]);
    let shops: Vec<(String, String)> = (0..SHOPS)
        .map(|n| {
            let domain = format!("shop{n}.apply.test");
            let shop = first.cli(&["shop", "create", "--domain", &domain]).values()[0].clone();
            let token = first
                .cli(&["token", "create", "--shop", &shop, "--scope", "all"])
                .value();
            (shop, token)
        })
        .collect();
    let mut events: Vec<(usize, usize, i64)> = Vec::new();
    for shop in 0..SHOPS {
        for customer in 0..CUSTOMERS {
            events.extend((1..=VERSIONS).map(|version| (shop, customer, version)));
        }
    }
    // A fixed shuffle (xorshift), so a failure can be replayed.
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    for i in (1..events.len()).rev() {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        events.swap(i, (seed % (i as u64 + 1)) as usize);
    }
    let email = |shop: usize, customer: usize, version: i64| {
        format!("c{customer}.v{version}@shop{shop}.apply.test")
    };
    std::thread::scope(|scope| {
        for (part, chunk) in events.chunks(events.len().div_ceil(4)).enumerate() {
            let server = if part % 2 == 0 { &first } else { &second };
            let (shops, email) = (&shops, &email);
            scope.spawn(move || {
                for &(shop, customer, version) in chunk {
                    let (identifier, token) = &shops[shop];
                    let customer_body = json!({
                        "platform_id": format!("c{customer}"),
                        "platform_updated_at": time(version * 10),
                        "email": email(shop, customer, version),
                    });
                    let answer = server
                        .post(&format!(
                            "/customers/v1/shops/{identifier}/platforms/custom/webhooks/customers/saved"
                        ))
                        .bearer(token)
                        .json(&json!({"data": {"customer": customer_body}}));
                    assert_eq!(answer.status, 202, "{}", answer.text);
                }
            });
        }
    });
    let store = first.database().open_store();
    let applied = wait_until(Duration::from_secs(60), || {
        store
            .read(|tx| Ok(tx.count_pending_inbound_events()?))
            .unwrap()
            == 0
    });
    assert!(applied, "events still pending after 60 s");
    let by_process = [applied_here(&first), applied_here(&second)];
    assert_eq!(
        by_process.iter().sum::<u64>(),
        events.len() as u64,
        "each event applied once, by one process: {by_process:?}"
    );
    for (shop, (identifier, token)) in shops.iter().enumerate() {
        for customer in 0..CUSTOMERS {
            let answer = second
                .get(&format!(
                    "/customers/v2/shops/{identifier}/customers/pid/c{customer}"
                ))
                .bearer(token)
                .call();
            assert_eq!(answer.status, 200, "{}", answer.text);
            assert_eq!(
                answer.json()["customer"]["email"],
                email(shop, customer, VERSIONS),
                "shop {shop}, customer {customer}"
            );
        }
    }
}
