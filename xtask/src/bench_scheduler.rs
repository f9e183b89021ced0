//! `cargo xtask bench scheduler`: the subscription scheduler benchmark of docs/benchmarks.md.
//!
//! On each database, for each size (10,000 then 100,000 due orders; `MERCER_BENCH_SCHEDULER_SIZES`
//! chooses others, `10000` for a quick run): one shop with that many active subscriptions (as
//! many customers with their platform ids, two line items each), seeded with the subscriptions
//! benchmark's SQL with their next order years ahead, on a new database; a release `mercer
//! serve` (the scheduler every second), the release platform simulator as the shop's orders
//! destination, and a receiver of `subscription_order_created` in this process. Then one UPDATE
//! makes every order due at the same instant, and the run ends when the receiver has every
//! subscription's webhook. It prints orders placed per second, p50/p99 from the due time to the
//! order's placement and to the webhook's delivery, and what the simulator holds: one order per
//! subscription, each with its own Idempotency-Key, each paid once. On PostgreSQL the first size
//! runs again with two `mercer serve` processes on the one database, and its rate is compared
//! with one process's.
//!
//! First, the floor: the simulator's own capacity for Create Order + Create Payment pairs on
//! this machine (signed calls from several threads at once, for ten seconds), and each run's
//! share of it. Targets (issue 47): 10,000 placed within 10 s on SQLite and 20 s on PostgreSQL;
//! two processes at least 1.5 times one's rate; a target missed is reported, never a failure.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

use crate::bench::{
    drop_postgres_database, peak_memory_kib, postgres_database, start_mercer, wait_for_listen,
};
use crate::bench_dispatch::Receiver;
use crate::bench_subscriptions::{Database, Seed, percentile, quoted, seed_script};

/// The sizes run by default: due orders at one instant.
const SIZES: [i64; 2] = [10_000, 100_000];
/// How long the floor's load runs.
const FLOOR_LOAD: Duration = Duration::from_secs(10);
/// Threads calling the simulator at once for the floor.
const FLOOR_THREADS: usize = 8;
/// Seeded orders are due on 2030-01-07, until the benchmark moves them.
const FAR_AHEAD_MICROS: i64 = 1_894_006_800_000_000;
/// Longest the benchmark waits for every webhook.
const DEADLINE: Duration = Duration::from_secs(900);
/// `subscription_order_created`'s id in List Webhook Topics.
const ORDER_CREATED_TOPIC: i64 = 8;

/// The platform simulator, a process of its own; killed when dropped.
struct Simulator {
    child: Child,
    base_url: String,
}

impl Drop for Simulator {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_simulator(binary: &str) -> Result<Simulator, String> {
    let mut child = Command::new(binary)
        // 100,000 orders are 200,000 signed calls within the replay window: room for them.
        .args([
            "serve",
            "--bind",
            "127.0.0.1:0",
            "--nonce-capacity",
            "1000000",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| format!("cannot start {binary}: {e}"))?;
    let lines = wait_for_listen(&mut child, "Platform simulator listening on")?;
    let base_url = lines
        .iter()
        .find_map(|line| line.trim().strip_prefix("Platform simulator listening on "))
        .map(|url| url.trim().to_string())
        .ok_or("the simulator printed no address")?;
    Ok(Simulator { child, base_url })
}

fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(120)))
        .build()
        .into()
}

/// Sends `body` (or nothing) with the bearer `token`; the JSON answer, failing unless 2xx.
fn call(
    method: &str,
    url: &str,
    token: Option<&str>,
    body: Option<Value>,
) -> Result<Value, String> {
    let mut request = ureq::http::Request::builder().method(method).uri(url);
    if let Some(token) = token {
        request = request.header("Authorization", format!("Bearer {token}"));
    }
    let result = match body {
        Some(body) => agent().run(
            request
                .header("Content-Type", "application/json")
                .body(body.to_string())
                .map_err(|e| e.to_string())?,
        ),
        None => agent().run(request.body(()).map_err(|e| e.to_string())?),
    };
    let mut answer = result.map_err(|e| format!("{method} {url}: {e}"))?;
    let status = answer.status().as_u16();
    // The simulator's state of 10,000 orders is larger than ureq reads by default (10 MB).
    let text = answer
        .body_mut()
        .with_config()
        .limit(1 << 30)
        .read_to_string()
        .map_err(|e| format!("{method} {url}: {e}"))?;
    if !(200..300).contains(&status) {
        return Err(format!("{method} {url} answered {status}: {text}"));
    }
    Ok(serde_json::from_str(&text).unwrap_or(Value::Null))
}

fn now_micros() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros() as i64)
        .unwrap_or_default()
}

fn seconds(duration: Duration) -> f64 {
    duration.as_secs_f64()
}

/// The shop's orders destination on the simulator, and a webhook of
/// `subscription_order_created` to the receiver.
fn connect(
    base_url: &str,
    shop: &str,
    token: &str,
    simulator: &Simulator,
    receiver: &Receiver,
) -> Result<(), String> {
    let rotated = call(
        "POST",
        &format!("{base_url}/integrations/v1/shops/{shop}/shared_secret/rotate"),
        Some(token),
        None,
    )?;
    let secret = rotated["data"]["shared_secret"]
        .as_str()
        .ok_or("no rotated secret")?;
    call(
        "PUT",
        &format!("{}/admin/shops/{shop}", simulator.base_url),
        None,
        Some(json!({"secret": secret})),
    )?;
    call(
        "POST",
        &format!("{base_url}/integrations/v1/shops/{shop}/platform_connector_destinations"),
        Some(token),
        Some(
            json!({"data": {"destination": {"shop_identifier": shop, "topic": "orders",
            "destination": simulator.base_url, "version": "v1", "timeout_ms": 20000}}}),
        ),
    )?;
    call(
        "POST",
        &format!("{base_url}/subscriptions/v1/shops/{shop}/webhooks/subscriptions"),
        Some(token),
        Some(
            json!({"webhook_subscription": {"callback_url": receiver.url,
            "webhook_topic_id": ORDER_CREATED_TOPIC, "shared_secret": "bench-webhook-secret"}}),
        ),
    )?;
    Ok(())
}

/// Durations in `text`, one a line in microseconds, sorted.
fn durations(text: &str) -> Vec<Duration> {
    let mut all: Vec<Duration> = text
        .lines()
        .filter_map(|line| line.trim().parse::<i64>().ok())
        .map(|micros| Duration::from_micros(micros.max(0) as u64))
        .collect();
    all.sort();
    all
}

fn verdict(met: bool) -> &'static str {
    if met { "MET" } else { "NOT MET" }
}

/// One run's setting: how many orders are due, how many `mercer serve` processes share them.
#[derive(Clone, Copy)]
struct Run {
    size: i64,
    processes: usize,
}

/// What a run measured.
struct Measured {
    placed: usize,
    last_placed: Duration,
    rate: f64,
}

/// Seeds `run.size` active subscriptions on `database` (a new one) with their orders far ahead.
fn seed(
    binaries: &Binaries,
    database: &Database,
    size: i64,
) -> Result<(String, String, i64), String> {
    let first = start_mercer(&binaries.mercer, &database.url(), &[])?;
    let (shop, token) = (first.shop.clone(), first.token.clone());
    drop(first);
    if shop.is_empty() || token.is_empty() {
        return Err("the first start printed no demo shop and token".to_string());
    }
    let shop_id = database.integer(&format!(
        "SELECT id FROM shops WHERE identifier = {}",
        quoted(&shop)
    ))?;
    let seed = Seed {
        customers: size,
        subscriptions: size,
        next_order: FAR_AHEAD_MICROS.to_string(),
        status: "'active'".to_string(),
    };
    let started = Instant::now();
    database.run(&seed_script(database.dialect(), shop_id, &seed))?;
    println!(
        "  seeded          {size} active subscriptions of {size} customers in {:.1} s",
        seconds(started.elapsed())
    );
    Ok((shop, token, shop_id))
}

/// Waits until the receiver has `size` webhooks, saying how far it is every ten seconds.
fn wait_for_webhooks(receiver: &Receiver, size: usize, due: Instant) -> Result<(), String> {
    let mut reported = Instant::now();
    while receiver.count() < size {
        if due.elapsed() > DEADLINE {
            return Err(format!(
                "{} of {size} webhooks after {} s",
                receiver.count(),
                DEADLINE.as_secs()
            ));
        }
        if reported.elapsed() > Duration::from_secs(10) {
            reported = Instant::now();
            println!(
                "    … {:.0} s: {} webhooks received",
                seconds(due.elapsed()),
                receiver.count()
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Ok(())
}

fn run_backend(
    binaries: &Binaries,
    database: &Database,
    run: Run,
    serve_args: &[&str],
) -> Result<Measured, String> {
    let (shop, token, shop_id) = seed(binaries, database, run.size)?;
    let simulator = start_simulator(&binaries.simulator)?;
    let receiver = Receiver::start()?;
    let mut args = vec!["--allow-private-targets", "--scheduler-interval-ms", "1000"];
    args.extend_from_slice(serve_args);
    let mut processes = Vec::with_capacity(run.processes);
    for _ in 0..run.processes {
        processes.push(start_mercer(&binaries.mercer, &database.url(), &args)?);
    }
    connect(&processes[0].base_url, &shop, &token, &simulator, &receiver)?;

    // Every order due at once, now.
    let due_micros = now_micros();
    let due = Instant::now();
    let timeout = match database {
        Database::Sqlite { .. } => ".timeout 30000\n",
        Database::Postgres { .. } => "",
    };
    database.run(&format!(
        "{timeout}UPDATE subscriptions SET next_order_datetime = {due_micros} WHERE shop_id = {shop_id};\n"
    ))?;
    wait_for_webhooks(&receiver, run.size as usize, due)?;
    let all_received = due.elapsed();
    let peaks: Vec<Option<u64>> = processes
        .iter()
        .map(|mercer| peak_memory_kib(mercer.child.id()))
        .collect();
    let mut arrivals: Vec<Duration> = receiver
        .take()
        .into_values()
        .map(|at| at.saturating_duration_since(due))
        .collect();
    arrivals.sort();
    let measured = report_attempts(database, shop_id, &arrivals, all_received)?;
    report_simulator(&simulator, &shop)?;
    let peaks: Vec<String> = peaks
        .iter()
        .map(|peak| {
            peak.map_or("?".to_string(), |kib| {
                format!("{:.0} MiB", kib as f64 / 1024.0)
            })
        })
        .collect();
    println!("  peak memory     {} (VmHWM)", peaks.join(", "));
    drop(processes);
    Ok(measured)
}

/// Prints the attempts' figures: placed per second, due → begun, placed and webhook.
fn report_attempts(
    database: &Database,
    shop_id: i64,
    arrivals: &[Duration],
    all_received: Duration,
) -> Result<Measured, String> {
    // From the attempts: when each order was begun (claimed, its job enqueued) and placed,
    // from its due time.
    let begun = durations(&database.run(&format!(
        "SELECT created_at - due_at FROM subscription_orders WHERE shop_id = {shop_id};\n"
    ))?);
    let placed = durations(&database.run(&format!(
        "SELECT finished_at - due_at FROM subscription_orders WHERE status = 'placed' AND shop_id = {shop_id};\n"
    ))?);
    let failed = database.integer(&format!(
        "SELECT count(*) FROM subscription_orders WHERE status <> 'placed' AND shop_id = {shop_id}"
    ))?;
    let last_placed = placed.last().copied().unwrap_or_default();
    let rate = placed.len() as f64 / seconds(last_placed).max(1e-9);
    println!(
        "  placed          {} orders in {:.1} s from their due time: {rate:.0} orders/s ({failed} attempts not placed)",
        placed.len(),
        seconds(last_placed)
    );
    println!(
        "  due → begun     p50 {:.2} s, p99 {:.2} s, the first after {:.1} s, the last after {:.1} s (claimed, attempt and job made)",
        seconds(percentile(&begun, 0.5)),
        seconds(percentile(&begun, 0.99)),
        seconds(begun.first().copied().unwrap_or_default()),
        seconds(begun.last().copied().unwrap_or_default())
    );
    println!(
        "  due → placed    p50 {:.2} s, p99 {:.2} s",
        seconds(percentile(&placed, 0.5)),
        seconds(percentile(&placed, 0.99))
    );
    println!(
        "  due → webhook   p50 {:.2} s, p99 {:.2} s (subscription_order_created received; the last after {:.1} s)",
        seconds(percentile(arrivals, 0.5)),
        seconds(percentile(arrivals, 0.99)),
        seconds(all_received)
    );
    Ok(Measured {
        placed: placed.len(),
        last_placed,
        rate,
    })
}

/// Prints what the simulator holds: orders, distinct Idempotency-Keys, orders paid once.
fn report_simulator(simulator: &Simulator, shop: &str) -> Result<(), String> {
    let state = call(
        "GET",
        &format!("{}/admin/shops/{shop}/state", simulator.base_url),
        None,
        None,
    )?;
    let orders = state["orders"].as_array().cloned().unwrap_or_default();
    let paid_once = orders
        .iter()
        .filter(|order| order["payments"].as_array().map_or(0, Vec::len) == 1)
        .count();
    let keys: std::collections::BTreeSet<&str> = state["requests"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .filter(|r| {
            r["method"] == "POST" && r["path"].as_str().is_some_and(|p| p.ends_with("/orders"))
        })
        .filter_map(|r| r["idempotency_key"].as_str())
        .collect();
    println!(
        "  simulator       {} orders, {} distinct Idempotency-Keys, {paid_once} paid once",
        orders.len(),
        keys.len()
    );
    Ok(())
}

struct Binaries {
    mercer: String,
    simulator: String,
}

/// The sizes to run: `MERCER_BENCH_SCHEDULER_SIZES` (`10000,100000`), else [`SIZES`].
fn sizes() -> Result<Vec<i64>, String> {
    match std::env::var("MERCER_BENCH_SCHEDULER_SIZES") {
        Ok(list) if !list.trim().is_empty() => list
            .split(',')
            .map(|size| {
                size.trim()
                    .parse::<i64>()
                    .ok()
                    .filter(|size| *size > 0)
                    .ok_or_else(|| format!("MERCER_BENCH_SCHEDULER_SIZES: {size:?} is not a size"))
            })
            .collect(),
        _ => Ok(SIZES.to_vec()),
    }
}

/// The simulator's own capacity: Create Order + Create Payment pairs per second, signed as
/// Mercer signs them, from [`FLOOR_THREADS`] threads at once for [`FLOOR_LOAD`].
fn floor(binaries: &Binaries) -> Result<f64, String> {
    use mercer_connector::types::{Order, Payment};
    use mercer_connector::{ConnectorTarget, HttpConnector, PlatformConnector};
    use mercer_domain::access::credentials::Secret;
    use mercer_outbound::PrivateAddressGuard;

    let simulator = start_simulator(&binaries.simulator)?;
    let (shop, secret) = ("0123456789abcdef0123456789abcdef", "bench-floor-secret");
    call(
        "PUT",
        &format!("{}/admin/shops/{shop}", simulator.base_url),
        None,
        Some(json!({"secret": secret})),
    )?;
    let target = ConnectorTarget {
        base_url: simulator.base_url.clone(),
        version: "v1".to_string(),
        shop_identifier: shop.to_string(),
        timeout: Duration::from_secs(20),
        secret: Secret::new(secret.to_string()),
        compatible_secret: Secret::new(secret.to_string()),
    };
    // An order as the scheduler's: two line items, the addresses, its attributes.
    let address = json!({"first_name": "Ada", "last_name": "Lovelace", "street1": "1 Main St",
        "city": "Portland", "province_code": "OR", "zip": "97201", "country_code": "US",
        "email": "ada@example.test"});
    let item = |n: i64| {
        json!({"platform_product_id": format!("p-{n}"), "platform_variant_id": format!("v-{n}"),
        "title": "Coffee beans", "sku": format!("SKU-{n}"), "quantity": 2, "price_per_item": "12.50",
        "subtotal": "25.00", "total": "25.00", "taxable": true, "requires_shipping": true})
    };
    let order: Order = serde_json::from_value(json!({"platform_customer_id": "cus-1",
        "currency": "USD", "line_items": [item(1), item(2)], "subtotal": "50.00",
        "discount": "0.00", "shipping_subtotal": "0.00", "total": "50.00",
        "shipping_addresses": [address], "billing_address": address, "source": "subscription",
        "created_via": "mercer",
        "custom_attributes": {"subscription_id": {"description": "subscription", "value": "1"}}}))
    .map_err(|e| format!("the floor's order: {e}"))?;
    let payment: Payment = serde_json::from_value(json!({"provider": "test",
        "payment_method": "tok_success", "amount_planned": "50.00", "currency": "USD",
        "custom_attributes": {"mercer_payment_key": {"description": "key", "value": "floor#1"}}}))
    .map_err(|e| format!("the floor's payment: {e}"))?;
    let pairs = std::sync::atomic::AtomicUsize::new(0);
    let failures = std::sync::atomic::AtomicUsize::new(0);
    let started = Instant::now();
    std::thread::scope(|scope| {
        for thread in 0..FLOOR_THREADS {
            let (target, order, payment) = (&target, &order, &payment);
            let (pairs, failures) = (&pairs, &failures);
            scope.spawn(move || {
                let client = HttpConnector::new(PrivateAddressGuard::ALLOW_PRIVATE);
                let mut n = 0_u64;
                while started.elapsed() < FLOOR_LOAD {
                    n += 1;
                    let key = format!("floor-{thread}-{n}");
                    let paid = client
                        .create_order(target, order, Some(&key))
                        .ok()
                        .and_then(|made| made.platform_id)
                        .and_then(|id| client.create_payment(target, id.as_str(), payment).ok());
                    let counter = if paid.is_some() { pairs } else { failures };
                    counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
            });
        }
    });
    let elapsed = seconds(started.elapsed());
    let pairs = pairs.into_inner();
    let failures = failures.into_inner();
    if pairs == 0 {
        return Err(format!(
            "the floor: no pair went through ({failures} failed)"
        ));
    }
    let rate = pairs as f64 / elapsed;
    println!(
        "floor: the simulator alone took {pairs} Create Order + Create Payment pairs in {elapsed:.1} s from {FLOOR_THREADS} threads: {rate:.0} pairs/s ({failures} failed)"
    );
    Ok(rate)
}

/// Runs `run` on a new database of `kind` (`SQLite` or `PostgreSQL`), removed afterwards.
fn on_new_database<T>(
    kind: &str,
    work: impl FnOnce(&Database) -> Result<T, String>,
) -> Result<Option<T>, String> {
    static RUNS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    if kind == "SQLite" {
        let n = RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir =
            std::env::temp_dir().join(format!("mercer-bench-scheduler-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
        let database = Database::Sqlite {
            path: dir.join("bench.db"),
        };
        let result = work(&database);
        let _ = std::fs::remove_dir_all(&dir);
        return result.map(Some);
    }
    match postgres_database()? {
        Some(url) => {
            let database = Database::Postgres { url: url.clone() };
            let result = work(&database);
            drop_postgres_database(&url);
            result.map(Some)
        }
        None => {
            println!("PostgreSQL: NOT RUN (psql could not create a database)");
            Ok(None)
        }
    }
}

fn share(rate: f64, floor: f64) -> String {
    format!(
        "  floor share     {:.0}% of the simulator's {floor:.0} pairs/s",
        100.0 * rate / floor.max(1e-9)
    )
}

/// One database's blocks: each size with one process, then (PostgreSQL) the first size with two.
fn run_database(
    binaries: &Binaries,
    kind: &str,
    sizes: &[i64],
    floor: f64,
    serve_args: &[&str],
) -> Result<(), String> {
    let limit = if kind == "SQLite" { 10.0 } else { 20.0 };
    let mut first_rate = None;
    for &size in sizes {
        println!("{kind}, {size} due orders ({}):", serve_args.join(" "));
        let run = Run { size, processes: 1 };
        let Some(measured) = on_new_database(kind, |database| {
            run_backend(binaries, database, run, serve_args)
        })?
        else {
            return Ok(());
        };
        println!("{}", share(measured.rate, floor));
        // The targets are for 10,000 orders; other sizes keep their rate.
        let target = Duration::from_secs_f64(limit * size as f64 / 10_000.0);
        println!(
            "  target: all {size} placed within {:.0} s: {} ({:.1} s)",
            seconds(target),
            verdict(measured.placed == size as usize && measured.last_placed <= target),
            seconds(measured.last_placed)
        );
        first_rate.get_or_insert(measured.rate);
    }
    if kind != "PostgreSQL" {
        return Ok(());
    }
    let (Some(&size), Some(one)) = (sizes.first(), first_rate) else {
        return Ok(());
    };
    println!(
        "{kind}, {size} due orders, 2 processes ({}):",
        serve_args.join(" ")
    );
    let run = Run { size, processes: 2 };
    if let Some(two) = on_new_database(kind, |database| {
        run_backend(binaries, database, run, serve_args)
    })? {
        let times = two.rate / one.max(1e-9);
        println!(
            "PostgreSQL, 2 processes: placed {} orders in {:.1} s: {:.0} orders/s, {times:.2}× one process's rate",
            two.placed,
            seconds(two.last_placed),
            two.rate
        );
        println!("{}", share(two.rate, floor));
        println!(
            "  target: at least 1.5× one process's rate: {}",
            verdict(two.placed == size as usize && times >= 1.5)
        );
    }
    Ok(())
}

/// The release half of `cargo xtask bench scheduler`. `MERCER_BENCH_SERVE_ARGS` adds arguments
/// to `mercer serve` (`--job-workers 8`, say), to compare settings; `MERCER_BENCH_DATABASE`
/// (`sqlite`, `postgres`) runs one database; `MERCER_BENCH_SCHEDULER_SIZES` the sizes.
pub fn scheduler(mercer: &str) -> Result<(), String> {
    let simulator = std::path::Path::new(mercer)
        .with_file_name("mercer-platform-sim")
        .display()
        .to_string();
    let binaries = Binaries {
        mercer: mercer.to_string(),
        simulator,
    };
    let extra = std::env::var("MERCER_BENCH_SERVE_ARGS").unwrap_or_default();
    let serve_args: Vec<&str> = extra.split_whitespace().collect();
    let sizes = sizes()?;
    println!(
        "scheduler benchmark: subscriptions due at one instant ({}), placed through the platform simulator (Create Order, Create Payment), subscription_order_created delivered to a local receiver",
        sizes
            .iter()
            .map(i64::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    );
    let floor = floor(&binaries)?;
    let only = std::env::var("MERCER_BENCH_DATABASE").unwrap_or_default();
    if only != "postgres" {
        run_database(&binaries, "SQLite", &sizes, floor, &serve_args)?;
    }
    if only == "sqlite" {
        println!("PostgreSQL: NOT RUN (MERCER_BENCH_DATABASE=sqlite)");
        return Ok(());
    }
    run_database(&binaries, "PostgreSQL", &sizes, floor, &serve_args)
}
