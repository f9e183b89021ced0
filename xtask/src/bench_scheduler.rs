//! `cargo xtask bench scheduler`: the subscription scheduler benchmark of docs/benchmarks.md.
//!
//! On each database: one shop with 10,000 active subscriptions (10,000 customers with their
//! platform ids, two line items each), seeded with the subscriptions benchmark's SQL with their
//! next order years ahead; a release `mercer serve` (the scheduler every second), the release
//! platform simulator as the shop's orders destination, and a receiver of
//! `subscription_order_created` in this process. Then one UPDATE makes every order due at the
//! same instant, and the run ends when the receiver has every subscription's webhook. It prints
//! orders placed per second, p50/p99 from the due time to the order's placement and to the
//! webhook's delivery, and what the simulator holds: one order per subscription, each with its
//! own Idempotency-Key, each paid once. Target: all 10,000 placed within 60 s on SQLite and 90 s
//! on PostgreSQL; a target missed is reported, never a failure.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

use crate::bench::{peak_memory_kib, start_mercer, wait_for_listen};
use crate::bench_dispatch::Receiver;
use crate::bench_subscriptions::{
    Database, Seed, on_each_database, percentile, quoted, seed_script,
};

const SUBSCRIPTIONS: i64 = 10_000;
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
        .args(["serve", "--bind", "127.0.0.1:0"])
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

fn run_backend(
    binaries: &Binaries,
    name: &str,
    database: &Database,
    target: Duration,
    serve_args: &[&str],
) -> Result<(), String> {
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
        customers: SUBSCRIPTIONS,
        subscriptions: SUBSCRIPTIONS,
        next_order: FAR_AHEAD_MICROS.to_string(),
        status: "'active'".to_string(),
    };
    let started = Instant::now();
    database.run(&seed_script(database.dialect(), shop_id, &seed))?;
    println!("{name} ({}):", serve_args.join(" "));
    println!(
        "  seeded          {SUBSCRIPTIONS} active subscriptions of {SUBSCRIPTIONS} customers in {:.1} s",
        seconds(started.elapsed())
    );

    let simulator = start_simulator(&binaries.simulator)?;
    let receiver = Receiver::start()?;
    let mut args = vec!["--allow-private-targets", "--scheduler-interval-ms", "1000"];
    args.extend_from_slice(serve_args);
    let mercer = start_mercer(&binaries.mercer, &database.url(), &args)?;
    connect(&mercer.base_url, &shop, &token, &simulator, &receiver)?;

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
    let mut reported = Instant::now();
    while receiver.count() < SUBSCRIPTIONS as usize {
        if due.elapsed() > DEADLINE {
            return Err(format!(
                "{} of {SUBSCRIPTIONS} webhooks after {} s",
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
    let all_received = due.elapsed();
    let peak = peak_memory_kib(mercer.child.id());
    let mut arrivals: Vec<Duration> = receiver
        .take()
        .into_values()
        .map(|at| at.saturating_duration_since(due))
        .collect();
    arrivals.sort();

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
        seconds(percentile(&arrivals, 0.5)),
        seconds(percentile(&arrivals, 0.99)),
        seconds(all_received)
    );

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
    println!(
        "  peak memory     {}",
        peak.map_or("?".to_string(), |kib| format!(
            "{:.0} MiB (VmHWM)",
            kib as f64 / 1024.0
        ))
    );
    println!(
        "  target: all {SUBSCRIPTIONS} placed within {} s: {} ({:.1} s)",
        target.as_secs(),
        verdict(placed.len() == SUBSCRIPTIONS as usize && last_placed <= target),
        seconds(last_placed)
    );
    drop(mercer);
    Ok(())
}

struct Binaries {
    mercer: String,
    simulator: String,
}

/// The release half of `cargo xtask bench scheduler`. `MERCER_BENCH_SERVE_ARGS` adds arguments
/// to `mercer serve` (`--job-workers 8`, say), to compare settings.
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
    println!(
        "scheduler benchmark: {SUBSCRIPTIONS} subscriptions due at one instant, placed through the platform simulator (Create Order, Create Payment), subscription_order_created delivered to a local receiver"
    );
    on_each_database("scheduler", |label, database| {
        let target = match database {
            Database::Sqlite { .. } => Duration::from_secs(60),
            Database::Postgres { .. } => Duration::from_secs(90),
        };
        run_backend(&binaries, label, database, target, &serve_args)
    })
}
