//! The job runner end to end (docs/jobs.md): syncs and outbox deliveries run as jobs, survive a
//! SIGKILL, and are run once each when two processes share one PostgreSQL database.

use mercer_domain::kernel::ids::{ShopId, SyncId};
use std::collections::HashMap;
use std::time::Duration;

use mercer_domain::checkout::sweeps::AbandonmentJob;
use mercer_domain::kernel::activity::ActivityPruneJob;
use mercer_domain::kernel::jobs::{Job, JobPayload};
use mercer_domain::platform::outbox::{ConnectorCall, OutboxStatus, request_connector_change};
use mercer_domain::ports::Database;
use mercer_domain::subscriptions::scheduler::SchedulerJob;
use mercer_domain::webhooks::retention::WebhookRetentionJob;
use mercer_platform_sim::{Faults, RunningSimulator};
use mercer_tests::{Backend, MercerServer, TestDatabase, backend_tests, wait_until};
use serde_json::{Value, json};

/// A shop with a customers destination on the simulator, and that many customers there.
struct SimShop {
    identifier: String,
    token: String,
    id: ShopId,
    customers: Vec<String>,
}

fn sim_shop(
    server: &MercerServer,
    sim: &RunningSimulator,
    identifier: String,
    secret: &str,
    token: String,
    customers: usize,
) -> SimShop {
    sim.simulator.add_shop(&identifier, secret, None);
    let customers = {
        let mut state = sim.simulator.lock();
        (0..customers)
            .map(|n| {
                let customer = serde_json::from_value(
                    json!({"email": format!("p{n}@example.test"), "first_name": format!("F{n}")}),
                )
                .unwrap();
                let created = state.create_customer(&identifier, customer).unwrap();
                created.platform_id.unwrap().as_str().to_string()
            })
            .collect()
    };
    let body = json!({"data": {"destination": {"shop_identifier": identifier, "topic": "customers", "destination": sim.base_url, "version": "v1", "timeout_ms": 5000}}});
    let created = server
        .post(&format!(
            "/integrations/v1/shops/{identifier}/platform_connector_destinations"
        ))
        .bearer(&token)
        .json(&body);
    assert_eq!(created.status, 200, "{}", created.text);
    let store = server.database().open_store();
    let id = store
        .read(|tx| Ok(mercer_domain::access::shop::find_shop(tx, &identifier)?.id))
        .unwrap();
    SimShop {
        identifier,
        token,
        id,
        customers,
    }
}

/// The demo shop of a first start, with its secret rotated so the test knows it.
fn demo_shop(server: &MercerServer, sim: &RunningSimulator, customers: usize) -> SimShop {
    let demo = server.demo().clone();
    let secret = server.rotate_connector_secret(&demo.shop, &demo.token);
    sim_shop(server, sim, demo.shop, &secret, demo.token, customers)
}

/// A new shop made with the CLI.
fn new_shop(server: &MercerServer, sim: &RunningSimulator, n: usize, customers: usize) -> SimShop {
    let created = server
        .cli(&["shop", "create", "--domain", &format!("shop{n}.jobs.test")])
        .values();
    let token = server
        .cli(&["token", "create", "--shop", &created[0], "--scope", "all"])
        .value();
    sim_shop(
        server,
        sim,
        created[0].clone(),
        &created[1],
        token,
        customers,
    )
}

fn start_sync(server: &MercerServer, shop: &SimShop) -> i64 {
    let started = server
        .post(&format!("/customers/v2/shops/{}/sync", shop.identifier))
        .bearer(&shop.token)
        .call();
    assert_eq!(started.status, 202, "{}", started.text);
    started.json()["data"]["sync"]["id"].as_i64().unwrap()
}

fn sync_status(server: &MercerServer, shop: &SimShop, run: i64) -> Value {
    server
        .get(&format!(
            "/customers/v2/shops/{}/sync/{run}",
            shop.identifier
        ))
        .bearer(&shop.token)
        .call()
        .json()["data"]["sync"]
        .clone()
}

fn list_calls(sim: &RunningSimulator) -> usize {
    sim.simulator
        .lock()
        .requests
        .iter()
        .filter(|r| r.method == "GET" && r.path.ends_with("/customers"))
        .count()
}

/// Jobs in the table, but the subscription scheduler's recurring one (always there).
fn remaining_jobs(server: &MercerServer) -> usize {
    jobs_but_the_recurring(server.database()).len()
}

/// The jobs queued or running, but the recurring ones every start enqueues (the subscription
/// scheduler, the abandoned-checkout sweep, the activity prune).
fn jobs_but_the_recurring(database: &TestDatabase) -> Vec<Job> {
    database
        .open_store()
        .read(|tx| Ok(tx.list_jobs(None, 100)?))
        .unwrap()
        .into_iter()
        .filter(|job| {
            ![
                SchedulerJob::KIND,
                AbandonmentJob::KIND,
                ActivityPruneJob::KIND,
                WebhookRetentionJob::KIND,
            ]
            .contains(&job.kind.as_str())
        })
        .collect()
}

/// SIGKILL in the middle of a sync: after the restart, once the killed process's lease has run
/// out, the same run goes on from the page it had reached and ends with every customer, the
/// pages already stored not fetched again.
fn a_sync_killed_midway_goes_on_after_a_restart(backend: Backend) {
    let args = ["--allow-private-targets", "--job-lease", "2"];
    let server = MercerServer::start_with(TestDatabase::create(backend), &args);
    let sim = RunningSimulator::start().unwrap();
    let shop = demo_shop(&server, &sim, 2000);
    // 250 a page: 8 pages, each answered after 300 ms.
    sim.simulator.lock().faults = Faults {
        delay_ms: Some(300),
        ..Faults::default()
    };
    let run = start_sync(&server, &shop);
    assert!(
        wait_until(Duration::from_secs(30), || sync_status(&server, &shop, run)
            ["pages"]
            .as_i64()
            .unwrap_or(0)
            >= 3),
        "the sync stores pages"
    );
    server.signal("KILL");
    let database = server.into_database();
    let before = sync_status_in(&database, run);
    assert_eq!(before.0, "running", "killed mid-sync");
    let restarted = MercerServer::start_with(database, &args);
    assert!(
        wait_until(Duration::from_secs(60), || sync_status(
            &restarted, &shop, run
        )["status"]
            != "running"),
        "the sync ends after the restart"
    );
    let done = sync_status(&restarted, &shop, run);
    assert_eq!(
        (
            done["status"].as_str(),
            done["pages"].as_i64(),
            done["items"].as_i64()
        ),
        (Some("succeeded"), Some(8), Some(2000)),
        "{done}"
    );
    // Eight pages, and at most the one in flight when the process died fetched twice.
    let calls = list_calls(&sim);
    let mut figures = mercer_tests::chaos::Figures::new("sigkill during a sync", backend);
    figures
        .set("pages_before_the_kill", before.1)
        .set("pages", done["pages"].as_i64().unwrap_or(0))
        .set("items", done["items"].as_i64().unwrap_or(0))
        .set("page_fetches", calls)
        .set("pages_fetched_twice", calls.saturating_sub(8));
    figures.report();
    assert!((8..=9).contains(&calls), "{calls} list calls");
    // The line is logged just after the run's end is committed, and read from the process's
    // standard error by a thread: it may come a moment after the status.
    assert!(
        wait_until(Duration::from_secs(10), || restarted
            .log()
            .contains(&format!("customers sync {run} of shop"))),
        "the restarted process ended the sync: {}",
        restarted.log()
    );
    // The job is deleted when its handler returns, a moment after the run's end is logged.
    assert!(
        wait_until(Duration::from_secs(10), || remaining_jobs(&restarted) == 0),
        "a done job is deleted: {:?}",
        jobs_but_the_recurring(restarted.database())
    );
}

/// A connector that fails for now (two 503s) holds a sync up, not ends it: its job is tried
/// again after 5 s, then 10 s, from its cursor, and the run succeeds. One that will not answer
/// otherwise (404) ends the run at once, tried once.
fn a_sync_is_retried_past_a_connector_failing_for_now(backend: Backend) {
    let args = ["--allow-private-targets", "--job-lease", "2"];
    let server = MercerServer::start_with(TestDatabase::create(backend), &args);
    let sim = RunningSimulator::start().unwrap();
    let shop = demo_shop(&server, &sim, 300);
    sim.simulator.lock().faults = Faults {
        status: Some(503),
        times: Some(2),
        ..Faults::default()
    };
    let run = start_sync(&server, &shop);
    assert!(
        wait_until(Duration::from_secs(40), || sync_status(&server, &shop, run)
            ["status"]
            != "running"),
        "the sync ends: {}",
        server.log()
    );
    let done = sync_status(&server, &shop, run);
    assert_eq!(
        (done["status"].as_str(), done["items"].as_i64()),
        (Some("succeeded"), Some(300)),
        "{done}"
    );
    // Two refused, then the two pages.
    assert_eq!(list_calls(&sim), 4);

    sim.simulator.lock().faults = Faults {
        status: Some(404),
        ..Faults::default()
    };
    let run = start_sync(&server, &shop);
    assert!(wait_until(Duration::from_secs(20), || sync_status(
        &server, &shop, run
    )["status"]
        != "running"));
    let failed = sync_status(&server, &shop, run);
    assert_eq!(failed["status"], "failed", "{failed}");
    assert!(
        failed["error"].as_str().unwrap_or_default().contains("404"),
        "{failed}"
    );
    assert_eq!(list_calls(&sim), 5, "a 404 is not tried again");
}

fn sync_status_in(database: &TestDatabase, run: i64) -> (String, i64) {
    let store = database.open_store();
    let run = store
        .read(|tx| Ok(tx.sync_run(SyncId(run))?))
        .unwrap()
        .unwrap();
    (run.status.as_str().to_string(), run.pages)
}

/// SIGTERM in the middle of a sync: the process stops after the page in flight instead of
/// waiting for the sync's end, the job goes back to the queue at once (the attempt not
/// counted), and the next start goes on with it without waiting for a lease to run out (the
/// default lease, 30 s, is longer than this test may take).
fn a_sync_stopped_gracefully_goes_on_at_the_next_start(backend: Backend) {
    let args = ["--allow-private-targets"];
    let mut server = MercerServer::start_with(TestDatabase::create(backend), &args);
    let sim = RunningSimulator::start().unwrap();
    let shop = demo_shop(&server, &sim, 2000);
    sim.simulator.lock().faults = Faults {
        delay_ms: Some(300),
        ..Faults::default()
    };
    let run = start_sync(&server, &shop);
    assert!(wait_until(Duration::from_secs(30), || sync_status(
        &server, &shop, run
    )["pages"]
        .as_i64()
        .unwrap_or(0)
        >= 2));
    server.signal("TERM");
    let status = server
        .wait_for_exit(Duration::from_secs(10))
        .expect("the process stops without waiting for the sync's end");
    assert!(status.success(), "{status:?}\n{}", server.output());
    let database = server.into_database();
    let jobs = jobs_but_the_recurring(&database);
    assert_eq!(jobs.len(), 1, "{jobs:?}");
    assert_eq!(
        (
            jobs[0].kind.as_str(),
            jobs[0].state.as_str(),
            jobs[0].attempts
        ),
        ("platform.sync", "queued", 0),
        "released, the attempt not counted"
    );
    let (status, pages) = sync_status_in(&database, run);
    assert!(
        status == "running" && pages < 8,
        "{status}, {pages} page(s)"
    );
    let restarted = MercerServer::start_with(database, &args);
    assert!(
        wait_until(Duration::from_secs(20), || sync_status(
            &restarted, &shop, run
        )["status"]
            != "running"),
        "taken up at once, not after a lease"
    );
    let done = sync_status(&restarted, &shop, run);
    assert_eq!(
        (
            done["status"].as_str(),
            done["pages"].as_i64(),
            done["items"].as_i64()
        ),
        (Some("succeeded"), Some(8), Some(2000)),
        "{done}"
    );
    assert_eq!(list_calls(&sim), 8, "no page fetched twice");
}

/// `mercer jobs list|retry|cancel`, and the jobs on `/metrics`. A job whose payload does not
/// read fails at once, for good.
fn operators_list_retry_and_cancel_jobs(backend: Backend) {
    let server = MercerServer::start(backend);
    server.database().execute(
        "INSERT INTO jobs (kind, payload, state, run_at, attempts, max_attempts, created_at, updated_at) \
         VALUES ('platform.sync', 'not json', 'queued', 0, 0, 5, 0, 0)",
    );
    let failed = || server.cli(&["jobs", "list", "--state", "failed"]);
    assert!(
        wait_until(Duration::from_secs(10), || failed()
            .stdout
            .contains("platform.sync")),
        "{}",
        server.log()
    );
    let listed = failed();
    assert!(listed.success, "{}", listed.stderr);
    let line = listed.stdout.lines().nth(1).unwrap().to_string();
    let id = line.split_whitespace().next().unwrap().to_string();
    assert!(line.contains("failed") && line.contains("1/5"), "{line}");
    assert!(line.contains("payload does not read"), "{line}");
    // Errors carry remote text: a control character is printed escaped.
    let escape = match backend {
        Backend::Sqlite => "char(27)",
        Backend::Postgres => "chr(27)",
    };
    server.database().execute(&format!(
        "UPDATE jobs SET last_error = 'bad' || {escape} || '[31m' WHERE id = {id}"
    ));
    let listed = failed();
    assert!(
        listed.stdout.contains("bad\\u{1b}[31m"),
        "{}",
        listed.stdout
    );
    assert!(!listed.stdout.contains('\u{1b}'));

    assert_eq!(server.cli(&["jobs", "cancel", &id]).value(), "1");
    let cancelled = server.cli(&["jobs", "list", "--state", "cancelled"]).stdout;
    assert!(cancelled.contains("platform.sync"), "{cancelled}");
    assert_eq!(server.cli(&["jobs", "cancel", &id, "999999"]).value(), "0");
    assert_eq!(server.cli(&["jobs", "retry", &id]).value(), "1");
    // Run again, failed again.
    assert!(wait_until(Duration::from_secs(10), || failed()
        .stdout
        .contains("platform.sync")));
    assert_eq!(server.cli(&["jobs", "retry", "--all"]).value(), "1");
    server
        .cli(&["jobs", "list", "--state", "done"])
        .assert_failed_with("not one of queued, running, failed, cancelled");
    server
        .cli(&["jobs", "retry"])
        .assert_failed_with("required");

    // The job put back by `retry --all` runs and fails a third time: counted once per failure
    // (the counter moves just after the state is written, so the scrape waits for it).
    let third_failure = r#"mercer_jobs_total{kind="platform.sync",outcome="failed"} 3"#;
    assert!(wait_until(Duration::from_secs(10), || server
        .get("/metrics")
        .call()
        .text
        .contains(third_failure)));
    let metrics = server.get("/metrics").call().text;
    assert!(
        metrics.contains(r#"mercer_jobs{kind="platform.outbox",state="queued"} 0"#),
        "{metrics}"
    );
}

backend_tests!(
    a_sync_killed_midway_goes_on_after_a_restart,
    a_sync_is_retried_past_a_connector_failing_for_now,
    a_sync_stopped_gracefully_goes_on_at_the_next_start,
    operators_list_retry_and_cancel_jobs,
);

/// Two `mercer serve` processes on one PostgreSQL database, three job workers each: syncs of
/// eight shops and fifteen outbox calls per shop. Every page is fetched once and every call made
/// once.
#[test]
fn two_processes_on_one_postgres_run_each_job_once() {
    const SHOPS: usize = 8;
    const CALLS: usize = 15;
    let args = ["--allow-private-targets", "--job-workers", "3"];
    let first = MercerServer::start_with(TestDatabase::create(Backend::Postgres), &args);
    let second = MercerServer::start_with(TestDatabase::attach(first.database()), &args);
    assert!(second.demo.is_none());
    let servers = [&first, &second];
    let sim = RunningSimulator::start().unwrap();
    let shops: Vec<SimShop> = (0..SHOPS)
        .map(|n| new_shop(servers[n % 2], &sim, n, 300))
        .collect();
    let store = first.database().open_store();
    let runs: Vec<i64> = shops
        .iter()
        .enumerate()
        .map(|(n, shop)| start_sync(servers[n % 2], shop))
        .collect();
    let now = mercer_domain::Timestamp::now();
    for shop in &shops {
        for customer in shop.customers.iter().take(CALLS) {
            let call = ConnectorCall::UpdateCustomer {
                platform_id: customer.clone(),
                customer: serde_json::from_value(json!({"last_name": "Updated"})).unwrap(),
            };
            let recorded = store
                .write(|tx| request_connector_change(tx, shop.id, &call, now))
                .unwrap();
            assert!(recorded.is_some());
        }
    }
    let all_done = wait_until(Duration::from_secs(120), || {
        let synced = shops
            .iter()
            .zip(&runs)
            .all(|(shop, run)| sync_status(&first, shop, *run)["status"] != "running");
        let delivered = shops.iter().all(|shop| {
            store
                .read(|tx| Ok(tx.outbox_entries(shop.id)?))
                .unwrap()
                .iter()
                .all(|entry| entry.status != OutboxStatus::Pending)
        });
        synced && delivered
    });
    assert!(all_done, "every sync and every call ends");
    for (shop, run) in shops.iter().zip(&runs) {
        let done = sync_status(&second, shop, *run);
        assert_eq!(
            (done["status"].as_str(), done["items"].as_i64()),
            (Some("succeeded"), Some(300)),
            "{done}"
        );
        let entries = store.read(|tx| Ok(tx.outbox_entries(shop.id)?)).unwrap();
        assert!(
            entries
                .iter()
                .all(|entry| (entry.status, entry.attempts) == (OutboxStatus::Delivered, 1)),
            "{entries:?}"
        );
    }
    assert_eq!(list_calls(&sim), SHOPS * 2, "each page fetched once");
    let mut updates: HashMap<String, usize> = HashMap::new();
    for request in sim.simulator.lock().requests.iter() {
        if request.method == "PATCH" {
            *updates.entry(request.path.clone()).or_default() += 1;
        }
    }
    assert_eq!(updates.len(), SHOPS * CALLS, "every call made");
    assert!(
        updates.values().all(|count| *count == 1),
        "no call made twice: {updates:?}"
    );
    assert!(wait_until(Duration::from_secs(5), || remaining_jobs(
        &first
    ) == 0));
    let ran = |server: &MercerServer| {
        let metrics = server.get("/metrics").call().text;
        metrics.contains(r#"mercer_jobs_total{kind="platform.sync",outcome="succeeded"}"#)
            || metrics.contains(r#"mercer_jobs_total{kind="platform.outbox",outcome="succeeded"}"#)
    };
    assert!(ran(&first) && ran(&second), "both processes ran jobs");
}
