//! SIGKILL of `mercer serve` under load, then a restart on the same database: during event
//! ingest every 202 ends applied; during webhook dispatch every message is delivered at least
//! once; while box selections are written none is half-written or lost. (The scheduler's and a
//! sync's kills are `scheduler.rs` and `jobs.rs`.)

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use std::thread;
use std::time::Duration;

use mercer_tests::chaos::{EventLoad, Figures, Outcome, scaled, tally};
use mercer_tests::receiver::{Receiver, Reply};
use mercer_tests::{Backend, Call, MercerServer, TestDatabase, backend_tests, wait_until};
use serde_json::{Value, json};

use super::unexpected_answers;
use crate::box_builder::{Admin, box_product, customer_saved, set_up, subscribe};
use crate::webhooks::{create, send_test, shop};

/// Kills the server (SIGKILL) and starts another on its database with `args`.
fn kill_and_restart(server: MercerServer, args: &[&str]) -> MercerServer {
    let database = server.into_database();
    MercerServer::start_with(database, args)
}

/// The platform ids of the customers the chaos load stored, once no event waits to be
/// applied (at most `timeout`).
pub(crate) fn stored_customers(database: &TestDatabase, timeout: Duration) -> BTreeSet<String> {
    let drained = wait_until(timeout, || {
        database.count("SELECT count(*) AS n FROM inbound_events") == 0
    });
    assert!(drained, "events still wait to be applied after {timeout:?}");
    database
        .texts("SELECT platform_id AS t FROM platform_customers WHERE platform_id LIKE 'chaos-%'")
        .into_iter()
        .collect()
}

/// Checks the end of an event load: every 202 is applied, none set aside, none stored twice,
/// and no answer but 202, 503 with `Retry-After` or none. Sets the figures.
pub(crate) fn check_events_applied(
    sent: &[mercer_tests::chaos::SentEvent],
    database: &TestDatabase,
    figures: &mut Figures,
) {
    let stored = stored_customers(database, Duration::from_secs(120));
    let accepted: Vec<&str> = sent
        .iter()
        .filter(|event| event.accepted())
        .map(|event| event.platform_id.as_str())
        .collect();
    let lost: Vec<&&str> = accepted
        .iter()
        .filter(|id| !stored.contains(**id))
        .collect();
    let rows = database
        .count("SELECT count(*) AS n FROM platform_customers WHERE platform_id LIKE 'chaos-%'");
    let set_aside = database.count("SELECT count(*) AS n FROM failed_inbound_events");
    let counts = tally(sent);
    let stored_unanswered = sent
        .iter()
        .filter(|event| event.outcome == Outcome::Unanswered && stored.contains(&event.platform_id))
        .count();
    figures
        .set("sent", sent.len())
        .set("answered_202", accepted.len())
        .set("answered_503", counts.get("503").copied().unwrap_or(0))
        .set("unanswered", counts.get("unanswered").copied().unwrap_or(0))
        .set("stored_though_unanswered", stored_unanswered)
        .set("applied_of_202", accepted.len() - lost.len())
        .set("lost", lost.len())
        .set("set_aside", set_aside)
        .set(
            "duplicates",
            rows - i64::try_from(stored.len()).unwrap_or(0),
        );
    figures.report();
    assert!(
        !accepted.is_empty(),
        "some events were accepted: {counts:?}"
    );
    assert!(
        lost.is_empty(),
        "{} events answered 202 were not applied: {:?}",
        lost.len(),
        lost.iter().take(10).collect::<Vec<_>>()
    );
    assert_eq!(set_aside, 0, "events set aside");
    assert_eq!(rows, i64::try_from(stored.len()).unwrap_or(0), "duplicates");
    let unexpected = unexpected_answers(sent.iter().map(|event| &event.outcome), 202);
    assert!(unexpected.is_empty(), "unexpected answers: {unexpected:?}");
}

/// Events sent by four threads while the server is killed and restarted, round after round:
/// every event answered 202 ends applied, once.
fn every_event_answered_202_is_applied_across_sigkills(backend: Backend) {
    let rounds = scaled(2, 8);
    let mut server = MercerServer::start(backend);
    let demo = server.demo().clone();
    let load = EventLoad::start(&server.base_url, &demo.shop, &demo.token, 4);
    for round in 0..rounds {
        // Killed at a different moment each round: in a batch, between batches, mid-apply.
        thread::sleep(Duration::from_millis(400 + 300 * (round % 4)));
        server = kill_and_restart(server, &[]);
        load.point_at(&server.base_url);
    }
    thread::sleep(Duration::from_millis(500));
    let sent = load.finish();
    let mut figures = Figures::new("sigkill during event ingest", backend);
    figures.set("kills", rounds);
    check_events_applied(&sent, server.database(), &mut figures);
}

/// Test deliveries queued, then the server killed while it delivers them, round after round:
/// every message reaches the receiver at least once.
fn every_webhook_message_is_delivered_at_least_once_across_sigkills(backend: Backend) {
    let (count, rounds) = scaled((300, 2), (2_000, 5));
    // Claimed messages of a killed process come back after 3 s, not the default 60.
    let args = ["--allow-private-targets", "--webhook-lease", "3"];
    let receiver = Receiver::start();
    // A receiver that takes a moment, so the kill finds deliveries in flight.
    receiver.otherwise(Reply {
        status: 200,
        delay: Duration::from_millis(5),
        headers: &[],
    });
    let mut server = MercerServer::start_with(TestDatabase::create_migrated(backend), &args);
    let shop = shop(&server);
    let webhook = create(&server, &shop, 2, &format!("{}/hook", receiver.url))["id"]
        .as_str()
        .unwrap()
        .to_string();
    let queued: BTreeSet<String> = (0..count)
        .map(|_| send_test(&server, &shop, &webhook))
        .collect();
    let delivered = |receiver: &Receiver| -> Vec<String> {
        receiver
            .received()
            .iter()
            .filter_map(|request| request.header("webhook-id").map(str::to_string))
            .collect()
    };
    for round in 1..=rounds {
        let goal = count * round / (rounds + 1);
        assert!(
            wait_until(Duration::from_secs(60), || delivered(&receiver).len()
                >= goal),
            "deliveries stalled before kill {round}: {}",
            server.log()
        );
        server = kill_and_restart(server, &args);
    }
    let all_there = wait_until(Duration::from_secs(120), || {
        let seen: BTreeSet<String> = delivered(&receiver).into_iter().collect();
        queued.is_subset(&seen)
    });
    let received = delivered(&receiver);
    let distinct: BTreeSet<&String> = received.iter().collect();
    let missing = queued.iter().filter(|id| !distinct.contains(id)).count();
    let mut figures = Figures::new("sigkill during webhook dispatch", backend);
    figures
        .set("kills", rounds)
        .set("messages", count)
        .set("deliveries", received.len())
        .set("delivered_distinct", distinct.len())
        .set("lost", missing)
        .set("duplicates", received.len() - distinct.len());
    figures.report();
    assert!(all_there, "{missing} messages never delivered");
    let undelivered = server
        .database()
        .count("SELECT count(*) AS n FROM webhook_messages WHERE status <> 'delivered'");
    assert!(
        wait_until(Duration::from_secs(30), || server.database().count(
            "SELECT count(*) AS n FROM webhook_messages WHERE status <> 'delivered'"
        ) == 0),
        "{undelivered} messages not marked delivered"
    );
}

/// One selection being rewritten over and over: its line items carry the round it was written
/// in, the same on both products, so a half-written one shows.
struct SelectionWriter {
    customer: String,
    body: Box<dyn Fn(i64) -> Value + Send>,
}

/// Selections rewritten by four customers while the server is killed: after the restart each
/// holds one whole write (both products of one round), never older than its last 200.
fn no_box_selection_is_half_written_or_lost_across_sigkills(backend: Backend) {
    let rounds = scaled(2, 6);
    let server = MercerServer::start(backend);
    let (admin, group) = set_up(&server);
    let (shop, token) = (admin.shop.clone(), admin.token.clone());
    let writers = selection_writers(&admin, group);
    drop(admin);
    let base_url = Arc::new(RwLock::new(server.base_url.clone()));
    let stop = Arc::new(AtomicBool::new(false));
    let threads: Vec<_> = writers
        .into_iter()
        .map(|writer| {
            let (base_url, stop) = (base_url.clone(), stop.clone());
            let path = format!(
                "/box_builder/v1/shops/{shop}/customers/{}/selections",
                writer.customer
            );
            let token = token.clone();
            thread::spawn(move || {
                // (round written, how the request ended)
                let mut writes: Vec<(i64, Outcome)> = Vec::new();
                let mut round = 1;
                while !stop.load(Ordering::Relaxed) {
                    let base = base_url.read().map(|url| url.clone()).unwrap_or_default();
                    let outcome = match Call::to("POST", &format!("{base}{path}"))
                        .bearer(&token)
                        .try_json(&(writer.body)(round))
                    {
                        Ok(answer) => Outcome::Answered(
                            answer.status,
                            answer.header("Retry-After").map(str::to_string),
                        ),
                        Err(_) => Outcome::Unanswered,
                    };
                    if outcome != Outcome::Answered(200, None) {
                        thread::sleep(Duration::from_millis(25));
                    }
                    writes.push((round, outcome));
                    round = round % 40 + 1;
                }
                (writer.customer, writes)
            })
        })
        .collect();
    let mut server = server;
    for round in 0..rounds {
        thread::sleep(Duration::from_millis(500 + 250 * (round % 3)));
        server = kill_and_restart(server, &[]);
        if let Ok(mut url) = base_url.write() {
            *url = server.base_url.clone();
        }
    }
    thread::sleep(Duration::from_millis(400));
    stop.store(true, Ordering::Relaxed);
    let written: BTreeMap<String, Vec<(i64, Outcome)>> = threads
        .into_iter()
        .map(|thread| thread.join().expect("a writer panicked"))
        .collect();

    let (mut half_written, mut lost, mut writes, mut accepted) = (0, 0, 0, 0);
    for (customer, attempts) in &written {
        writes += attempts.len();
        accepted += attempts
            .iter()
            .filter(|(_, outcome)| *outcome == Outcome::Answered(200, None))
            .count();
        let stored = Call::to(
            "GET",
            &server.url(&format!(
                "/box_builder/v1/shops/{shop}/customers/{customer}/selections"
            )),
        )
        .bearer(&token)
        .call()
        .json();
        let selections = stored["data"]["selections"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        assert_eq!(selections.len(), 1, "{customer}: one selection: {stored}");
        let quantities: Vec<i64> = selections[0]["line_items"]
            .as_array()
            .map(|items| {
                items
                    .iter()
                    .filter_map(|item| item["choice_quantity"].as_i64())
                    .collect()
            })
            .unwrap_or_default();
        if quantities.len() != 2 || quantities[0] != quantities[1] {
            half_written += 1;
            continue;
        }
        // The last write answered 200, and those after it that may have been stored too.
        let last_ok = attempts
            .iter()
            .rposition(|(_, outcome)| *outcome == Outcome::Answered(200, None));
        let possible: BTreeSet<i64> = match last_ok {
            Some(at) => attempts[at..].iter().map(|(round, _)| *round).collect(),
            None => attempts.iter().map(|(round, _)| *round).collect(),
        };
        if !possible.contains(&quantities[0]) {
            lost += 1;
        }
    }
    let mut figures = Figures::new("sigkill while box selections are written", backend);
    figures
        .set("kills", rounds)
        .set("writes", writes)
        .set("answered_200", accepted)
        .set("selections", written.len())
        .set("half_written", half_written)
        .set("older_than_last_200", lost);
    figures.report();
    assert_eq!(half_written, 0, "half-written selections");
    assert_eq!(lost, 0, "selections older than their last 200");
    let unexpected =
        unexpected_answers(written.values().flatten().map(|(_, outcome)| outcome), 200);
    assert!(unexpected.is_empty(), "unexpected answers: {unexpected:?}");
}

/// A box of carrot and kale with a size of 2..80 and an open slot, and four subscribed
/// customers: a writer each, writing `choice_quantity` = round on both products.
fn selection_writers(admin: &Admin<'_>, group: i64) -> Vec<SelectionWriter> {
    let box_id = admin.ok(
        "POST",
        "/boxes",
        Some(&json!({"svc_subscription_group_id": group, "box_name": "Chaos box"})),
        201,
    )["data"]["box"]["id"]
        .as_i64()
        .unwrap();
    let carrot = box_product(admin, "carrot")["id"].as_i64().unwrap();
    let kale = box_product(admin, "kale")["id"].as_i64().unwrap();
    let size = admin.ok(
        "POST",
        &format!("/boxes/{box_id}/box_sizes"),
        Some(&json!({"box_size_name": "Any", "min_quantity": 2, "max_quantity": 80})),
        200,
    )["data"]["id"]
        .as_i64()
        .unwrap();
    let slot = admin.ok(
        "POST",
        &format!("/boxes/{box_id}/time_slots"),
        Some(
            &json!({"time_slot_name": "Open", "visibility_date": "2020-01-01T00:00:00Z",
            "selection_deadline_date": "2030-01-04T00:00:00Z",
            "start_date": "2030-01-07T00:00:00Z", "end_date": "2030-01-13T23:59:59Z"}),
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
    (0..4)
        .map(|n| {
            let customer = format!("chaos-box-{n}");
            let email = customer_saved(admin, &customer);
            let (line_item, _) = subscribe(admin, &customer, &email, group);
            SelectionWriter {
                customer,
                body: Box::new(move |round| {
                    json!({"selection": {"svc_platform_subscription_line_item_id": line_item,
                        "box_size_id": size, "time_slot_id": slot,
                        "order_datetime": "2030-01-10T09:00:00Z",
                        "line_items": [
                            {"box_product_id": carrot, "choice_quantity": round},
                            {"box_product_id": kale, "choice_quantity": round}]}})
                }),
            }
        })
        .collect()
}

backend_tests!(
    every_event_answered_202_is_applied_across_sigkills,
    every_webhook_message_is_delivered_at_least_once_across_sigkills,
    no_box_selection_is_half_written_or_lost_across_sigkills,
);
