//! `cargo xtask bench mixed`: the mixed load benchmark of docs/benchmarks.md.
//!
//! On each database, with the release binary:
//!
//! 1. Start-up: Mercer started 5 times on its existing database; the time from the process's
//!    start to the first 200 of `GET /readyz`, and its resident memory (RSS, and of it the
//!    anonymous and the file-backed pages) 2 s later, idle, each start reading the binary anew.
//! 2. Saturation, each path alone for 10 s over 8 keep-alive connections: connector events in
//!    (`customers/saved`), webhooks out (test deliveries, each timed from its enqueue to its
//!    arrival at a local receiver), subscription reads and writes (Get Subscription and a line
//!    item's quantity, in turn), and checkout calls in the order the vendor's frontend library
//!    makes them (Init Order, then the guest customer, the shipping and billing addresses, the
//!    shipping lines and a refresh).
//!    Then the four together, as fast as they go for 10 s: each path's saturation rate in the
//!    mix (the paths share two cores with each other and with the load generator, so half of
//!    each alone would, together, saturate the machine again).
//! 3. Mixed: the four together for 60 s, each paced at half its rate in the saturated mix; each
//!    request timed from when it was due to be sent (so a stall is counted for every request
//!    it holds up). Throughput and p50 / p99 of each, and Mercer's peak memory.
//!
//! Targets (issue 29): idle under 30 MiB RSS; ready in under 200 ms on an existing SQLite
//! database; no p99 over 50 ms at half of each path's saturation throughput.

use std::collections::HashMap;
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::bench::{Connection, Mercer, ms, on_both_databases, peak_memory_kib, start_mercer};
use crate::bench_dispatch::Receiver;
use crate::bench_subscriptions::percentile;

const SATURATION: Duration = Duration::from_secs(10);
const MIXED: Duration = Duration::from_secs(60);
const CONNECTIONS: usize = 8;
const STARTS: usize = 5;
const SUBSCRIPTIONS: usize = 50;
const SECRET: &str = "bench-integration-secret";
const ADDRESS: &str = r#"{"first_name":"Ada","last_name":"Lovelace","address_line_1":"1 Main St","address_line_2":"","country":"Canada","city":"Ottawa","province":"Ontario","country_code":"CA","province_code":"ON","postal_code":"K1A 0A1","business_name":"","phone_number":""}"#;

/// The four paths.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Path {
    Events,
    Webhooks,
    Subscriptions,
    Checkout,
}

const PATHS: [Path; 4] = [
    Path::Events,
    Path::Webhooks,
    Path::Subscriptions,
    Path::Checkout,
];

impl Path {
    fn name(self) -> &'static str {
        match self {
            Path::Events => "events in",
            Path::Webhooks => "webhooks out",
            Path::Subscriptions => "subscription reads and writes",
            Path::Checkout => "checkout calls",
        }
    }
}

/// What the load needs to know of the shop.
struct Shop {
    address: String,
    shop: String,
    authorization: String,
    webhook: String,
    /// (subscription id, line item id)
    subscriptions: Vec<(i64, i64)>,
    receiver: Receiver,
    /// When each test delivery was enqueued, by message id.
    enqueued: Mutex<HashMap<String, Instant>>,
    next: AtomicUsize,
}

/// One worker's state: its connection and, for checkout, where its sequence is.
struct Worker<'a> {
    shop: &'a Shop,
    connection: Connection,
    checkout: Option<(String, String)>,
    step: usize,
}

impl Worker<'_> {
    fn open(shop: &Shop) -> Result<Worker<'_>, String> {
        Ok(Worker {
            shop,
            connection: Connection::open(&shop.address).map_err(|e| e.to_string())?,
            checkout: None,
            step: 0,
        })
    }

    fn expect(
        &mut self,
        method: &str,
        path: &str,
        auth: Option<&str>,
        body: Option<&str>,
        status: u16,
    ) -> Result<String, String> {
        let (got, text) = self
            .connection
            .request(method, path, auth, body)
            .map_err(|e| format!("{method} {path}: {e}"))?;
        if got == status {
            Ok(text)
        } else {
            Err(format!("{method} {path} answered {got}: {text}"))
        }
    }

    /// One request of `path`.
    fn call(&mut self, path: Path) -> Result<(), String> {
        let shop = self.shop;
        let n = shop.next.fetch_add(1, Ordering::Relaxed);
        let auth = Some(shop.authorization.as_str());
        match path {
            Path::Events => {
                let body = format!(
                    r#"{{"data":{{"customer":{{"platform_id":"mixed-{n}","platform_updated_at":"2026-11-01T00:00:00Z","email":"mixed{n}@example.test"}}}}}}"#
                );
                let route = format!(
                    "/customers/v1/shops/{}/platforms/custom/webhooks/customers/saved",
                    shop.shop
                );
                self.expect("POST", &route, auth, Some(&body), 202)?;
            }
            Path::Webhooks => {
                let route = format!(
                    "/checkout/shop/{}/webhooks/{}/test",
                    shop.shop, shop.webhook
                );
                let sent = Instant::now();
                let text = self.expect("POST", &route, auth, Some(""), 202)?;
                let id = serde_json::from_str::<Value>(&text)
                    .ok()
                    .and_then(|v| v["data"]["message_id"].as_str().map(str::to_string));
                if let Some(id) = id {
                    shop.enqueued
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .insert(id, sent);
                }
            }
            Path::Subscriptions => {
                let (id, line_item) = shop.subscriptions[n % shop.subscriptions.len()];
                let base = format!("/subscriptions/v1/shops/{}/subscriptions/{id}", shop.shop);
                if n.is_multiple_of(2) {
                    self.expect("GET", &base, auth, None, 200)?;
                } else {
                    let body = format!(r#"{{"quantity":{}}}"#, 1 + n % 5);
                    let route = format!("{base}/line_items/{line_item}/quantity");
                    self.expect("PUT", &route, auth, Some(&body), 200)?;
                }
            }
            Path::Checkout => self.checkout_step()?,
        }
        Ok(())
    }

    /// The next call of the library's sequence: Init Order, then five storefront calls with
    /// the order's JWT.
    fn checkout_step(&mut self) -> Result<(), String> {
        let shop = self.shop;
        let step = self.step;
        self.step = (self.step + 1) % 6;
        if step == 0 {
            let text = self.expect(
                "POST",
                &format!("/checkout/orders/{}/init", shop.shop),
                Some(&shop.authorization),
                Some(r#"{"cart_items":[{"platform_id":"var-coffee","quantity":1}]}"#),
                200,
            )?;
            let data: Value = serde_json::from_str(&text).map_err(|e| e.to_string())?;
            self.checkout = Some((
                data["data"]["public_order_id"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
                format!(
                    "Bearer {}",
                    data["data"]["jwt_token"].as_str().unwrap_or_default()
                ),
            ));
            return Ok(());
        }
        let (order, jwt) = self.checkout.clone().ok_or("no checkout")?;
        let base = format!("/checkout/storefront/{}/{order}", shop.shop);
        let guest = r#"{"first_name":"Ada","last_name":"Lovelace","email_address":"ada@example.test","accepts_marketing":false}"#;
        let (method, rest, body) = match step {
            1 => ("POST", "/customer/guest", Some(guest)),
            2 => ("POST", "/addresses/shipping", Some(ADDRESS)),
            3 => ("POST", "/addresses/billing", Some(ADDRESS)),
            4 => ("GET", "/shipping_lines", None),
            _ => ("GET", "/refresh", None),
        };
        self.expect(method, &format!("{base}{rest}"), Some(&jwt), body, 200)?;
        Ok(())
    }
}

/// Each path's latencies and how many requests failed.
#[derive(Default)]
struct Timings {
    latencies: Vec<Duration>,
    failures: usize,
    first_failure: Option<String>,
}

impl Timings {
    fn record(&mut self, result: Result<(), String>, latency: Duration) {
        match result {
            Ok(()) => self.latencies.push(latency),
            Err(error) => {
                self.failures += 1;
                self.first_failure.get_or_insert(error);
            }
        }
    }
}

/// `path` over `CONNECTIONS` connections for `length`: as fast as it goes (`rate` None), or
/// paced at `rate` requests a second, each timed from when it was due.
fn drive(shop: &Shop, path: Path, rate: Option<f64>, length: Duration) -> Result<Timings, String> {
    let started = Instant::now();
    let timings = Mutex::new(Timings::default());
    let slot = AtomicUsize::new(0);
    std::thread::scope(|scope| -> Result<(), String> {
        let mut workers = Vec::new();
        for _ in 0..CONNECTIONS {
            let mut worker = Worker::open(shop)?;
            let (timings, slot) = (&timings, &slot);
            workers.push(scope.spawn(move || {
                loop {
                    let due = match rate {
                        Some(rate) => {
                            let index = slot.fetch_add(1, Ordering::Relaxed);
                            started + Duration::from_secs_f64(index as f64 / rate)
                        }
                        None => Instant::now(),
                    };
                    if due.duration_since(started) >= length {
                        return;
                    }
                    if let Some(wait) = due.checked_duration_since(Instant::now()) {
                        std::thread::sleep(wait);
                    }
                    let result = worker.call(path);
                    let latency = due.elapsed();
                    timings
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .record(result, latency);
                }
            }));
        }
        for worker in workers {
            worker
                .join()
                .map_err(|_| "a load thread panicked".to_string())?;
        }
        Ok(())
    })?;
    let mut timings = timings.into_inner().unwrap_or_else(|e| e.into_inner());
    timings.latencies.sort_unstable();
    Ok(timings)
}

/// Enqueue-to-arrival times of the test deliveries enqueued so far, once they arrived (at
/// most 30 s); forgets them.
fn delivery_latencies(shop: &Shop) -> Vec<Duration> {
    let enqueued = std::mem::take(&mut *shop.enqueued.lock().unwrap_or_else(|e| e.into_inner()));
    let deadline = Instant::now() + Duration::from_secs(30);
    while shop.receiver.count() < enqueued.len() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let arrivals = shop.receiver.take();
    let mut latencies: Vec<Duration> = enqueued
        .iter()
        .filter_map(|(id, sent)| {
            arrivals
                .get(id)
                .map(|at| at.saturating_duration_since(*sent))
        })
        .collect();
    latencies.sort_unstable();
    latencies
}

/// A process's resident memory, KiB: in all, and of it the anonymous pages (its heap, stacks
/// and relocated data: memory it holds) and the file-backed ones (pages of the executable and
/// libraries mapped in, which the page cache shares and can reclaim).
#[derive(Debug, Clone, Copy, Default)]
struct Resident {
    total: u64,
    anonymous: u64,
    file: u64,
}

fn resident_kib(pid: u32) -> Option<Resident> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| {
        status
            .lines()
            .find_map(|line| line.strip_prefix(name))
            .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
    };
    Some(Resident {
        total: field("VmRSS:")?,
        anonymous: field("RssAnon:")?,
        file: field("RssFile:")?,
    })
}

/// Drops `binary`'s pages from the page cache, so that every start maps it in from a cold read.
/// The file-backed part of RSS depends on how the cached pages were made: the kernel maps a
/// cached large folio whole, and a file the linker or `cp` just wrote is cached in larger
/// folios than one read back, so the same binary measured 22.7 to 28.0 MiB RSS by how it
/// was last written or read. Dropping the pages first measures every binary alike. A binary
/// just built or copied is synced first: the page cache keeps dirty pages.
fn drop_cached_pages(binary: &str) {
    #[cfg(target_os = "linux")]
    if let Ok(file) = std::fs::File::open(binary) {
        let _ = file.sync_data();
        let _ = rustix::fs::fadvise(&file, 0, None, rustix::fs::Advice::DontNeed);
    }
    #[cfg(not(target_os = "linux"))]
    let _ = binary;
}

/// Starts Mercer on its existing database, its binary read from disk anew; the time to its
/// first `GET /readyz` 200, its resident memory after 2 s of rest, and the process.
fn timed_start(
    binary: &str,
    database_url: &str,
    args: &[&str],
) -> Result<(Duration, Resident, Mercer), String> {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map_err(|e| e.to_string())?
        .port();
    let address = format!("127.0.0.1:{port}");
    drop_cached_pages(binary);
    let started = Instant::now();
    let child = Command::new(binary)
        .args([
            "--database-url",
            database_url,
            "--log-level",
            "warn",
            "serve",
            "--bind",
            &address,
        ])
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| format!("cannot start {binary}: {e}"))?;
    let mercer = Mercer {
        child,
        base_url: format!("http://{address}"),
        shop: String::new(),
        token: String::new(),
        database_url: database_url.to_string(),
    };
    let ready = loop {
        if let Ok(mut connection) = Connection::open(&address)
            && let Ok((200, _)) = connection.request("GET", "/readyz", None, None)
        {
            break started.elapsed();
        }
        if started.elapsed() > Duration::from_secs(30) {
            return Err("mercer was not ready within 30 s".to_string());
        }
        std::thread::sleep(Duration::from_millis(1));
    };
    std::thread::sleep(Duration::from_secs(2));
    let idle = resident_kib(mercer.child.id()).unwrap_or_default();
    Ok((ready, idle, mercer))
}

/// The demo shop, made ready for the load: the coffee in the catalogue, the integration
/// secret and a checkout webhook to `receiver`, and subscriptions to read and change.
fn set_up(mercer: &Mercer, receiver: Receiver) -> Result<Shop, String> {
    let address = mercer.base_url.trim_start_matches("http://").to_string();
    let mut connection = Connection::open(&address).map_err(|e| e.to_string())?;
    let authorization = format!("Bearer {}", mercer.token);
    let auth = Some(authorization.as_str());
    let mut ask = |method: &str, path: String, body: Value, ok: &[u16]| -> Result<Value, String> {
        let (status, text) = connection
            .request(method, &path, auth, Some(&body.to_string()))
            .map_err(|e| e.to_string())?;
        if ok.contains(&status) {
            Ok(serde_json::from_str(&text).unwrap_or(Value::Null))
        } else {
            Err(format!("{method} {path} answered {status}: {text}"))
        }
    };
    let shop = mercer.shop.clone();
    ask(
        "POST",
        format!("/products/v1/shops/{shop}/platforms/custom/webhooks/products/saved"),
        json!({"data": {"product": {"platform_id": "prd-coffee", "platform_updated_at": "2026-11-01T00:00:00Z",
            "name": "Coffee", "variants": [{"platform_id": "var-coffee", "name": "Coffee 1kg",
            "sku": "COF-1KG", "price": "12.50", "require_shipping": true}]}}}),
        &[202],
    )?;
    ask(
        "POST",
        format!("/checkout/shop/{shop}/integration/config"),
        json!({"shared_secret": SECRET}),
        &[200],
    )?;
    let webhook = ask(
        "POST",
        format!("/checkout/shop/{shop}/webhooks"),
        json!({"webhook_topic_id": 2, "callback_url": receiver.url}),
        &[201],
    )?["data"]["id"]
        .as_str()
        .ok_or("no webhook id")?
        .to_string();
    let mut subscriptions = Vec::new();
    for n in 0..SUBSCRIPTIONS {
        let made = ask(
            "POST",
            format!("/subscriptions/v1/shops/{shop}/subscriptions"),
            json!({
            "customer": {"email": format!("sub{n}@example.test"), "first_name": "Ada"},
            "subscription": {
                "order_rrule": "DTSTART;TZID=UTC:20300107T090000\nRRULE:FREQ=WEEKLY",
                "line_items": [{"platform_product_id": "prd-coffee", "platform_variant_id": "var-coffee",
                                "quantity": 1, "price": 1250}],
                "shipping_address": {"street1": "1 Main St", "city": "New York", "country_code": "US"},
                "payment_details": {"gateway_name": "test", "gateway_payment_id": "tok_success"}}}),
            &[200, 201],
        )?;
        let id = made["subscription"]["id"]
            .as_i64()
            .ok_or("no subscription id")?;
        let item = made["subscription"]["line_items"][0]["id"]
            .as_i64()
            .ok_or("no line item id")?;
        subscriptions.push((id, item));
    }
    // The catalogue event is applied a moment after its 202.
    std::thread::sleep(Duration::from_millis(500));
    Ok(Shop {
        address,
        shop,
        authorization,
        webhook,
        subscriptions,
        receiver,
        enqueued: Mutex::new(HashMap::new()),
        next: AtomicUsize::new(0),
    })
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

fn run_backend(binary: &str, name: &str, database_url: &str) -> Result<(), String> {
    let args = ["--allow-private-targets"];
    let receiver = Receiver::start()?;
    // The first start makes the schema and the demo shop.
    let first = start_mercer(binary, database_url, &args)?;
    let (shop_id, token) = (first.shop.clone(), first.token.clone());
    drop(first);

    let mut starts = Vec::new();
    let mut running = None;
    for _ in 0..STARTS {
        let (ready, idle, mercer) = timed_start(binary, database_url, &args)?;
        starts.push((ready, idle));
        running = Some(mercer);
    }
    let mut mercer = running.ok_or("no start")?;
    mercer.shop = shop_id;
    mercer.token = token;
    let shop = set_up(&mercer, receiver)?;

    println!("\n{name}:");
    let mut ready: Vec<Duration> = starts.iter().map(|(ready, _)| *ready).collect();
    ready.sort_unstable();
    let idle = starts
        .iter()
        .map(|(_, idle)| *idle)
        .max_by_key(|idle| idle.total)
        .unwrap_or_default();
    println!(
        "  start to ready   median {:.0} ms (of {STARTS}: {:.0}..{:.0} ms), target < 200 ms on SQLite",
        ms(ready[STARTS / 2]),
        ms(ready[0]),
        ms(ready[STARTS - 1])
    );
    println!(
        "  idle memory      {:.1} MiB RSS (largest of {STARTS} starts; anonymous {:.1}, \
         file-backed {:.1}), target < 30 MiB",
        mib(idle.total),
        mib(idle.anonymous),
        mib(idle.file)
    );

    println!(
        "  saturation, each path alone for {} s, {CONNECTIONS} connections:",
        SATURATION.as_secs()
    );
    for path in PATHS {
        let timings = drive(&shop, path, None, SATURATION)?;
        print_row(path, &timings, SATURATION, None);
        if path == Path::Webhooks {
            print_deliveries(&delivery_latencies(&shop), SATURATION);
        }
    }
    println!(
        "  saturation, the four together for {} s, {CONNECTIONS} connections each:",
        SATURATION.as_secs()
    );
    let together = all_four(&shop, |_| None, SATURATION)?;
    let mut saturation = HashMap::new();
    for (path, timings) in &together {
        print_row(*path, timings, SATURATION, None);
        saturation.insert(
            *path,
            timings.latencies.len() as f64 / SATURATION.as_secs_f64(),
        );
    }
    print_deliveries(&delivery_latencies(&shop), SATURATION);

    println!(
        "  mixed, the four together for {} s, each paced at half its rate in the saturated mix:",
        MIXED.as_secs()
    );
    let results = all_four(&shop, |path| Some(saturation[&path] / 2.0), MIXED)?;
    let mut worst_p99 = Duration::ZERO;
    for (path, timings) in &results {
        worst_p99 = worst_p99.max(percentile(&timings.latencies, 0.99));
        print_row(*path, timings, MIXED, Some(saturation[path] / 2.0));
    }
    let deliveries = delivery_latencies(&shop);
    worst_p99 = worst_p99.max(percentile(&deliveries, 0.99));
    print_deliveries(&deliveries, MIXED);
    println!(
        "  worst p99 {:.1} ms (target < 50 ms); peak memory {:.1} MiB",
        ms(worst_p99),
        mib(peak_memory_kib(mercer.child.id()).unwrap_or(0))
    );
    Ok(())
}

/// The four paths at once for `length`, each at the rate `rate` gives it (None: as fast as
/// it goes).
fn all_four(
    shop: &Shop,
    rate: impl Fn(Path) -> Option<f64>,
    length: Duration,
) -> Result<Vec<(Path, Timings)>, String> {
    std::thread::scope(|scope| {
        let runs: Vec<_> = PATHS
            .iter()
            .map(|path| {
                let rate = rate(*path);
                (*path, scope.spawn(move || drive(shop, *path, rate, length)))
            })
            .collect();
        runs.into_iter()
            .map(|(path, run)| {
                let timings = run.join().map_err(|_| "a load panicked".to_string())??;
                Ok((path, timings))
            })
            .collect()
    })
}

fn print_row(path: Path, timings: &Timings, length: Duration, asked: Option<f64>) {
    println!(
        "    {:<30} {:>7.0}/s{}  p50 {:>7.1} ms  p99 {:>7.1} ms{}",
        path.name(),
        timings.latencies.len() as f64 / length.as_secs_f64(),
        asked.map_or(String::new(), |rate| format!(" of {rate:>5.0}/s asked")),
        ms(percentile(&timings.latencies, 0.50)),
        ms(percentile(&timings.latencies, 0.99)),
        failures(timings)
    );
}

fn print_deliveries(latencies: &[Duration], length: Duration) {
    println!(
        "    {:<30} {:>7.0}/s  p50 {:>7.1} ms  p99 {:>7.1} ms  (enqueue to arrival)",
        "  their deliveries",
        latencies.len() as f64 / length.as_secs_f64(),
        ms(percentile(latencies, 0.50)),
        ms(percentile(latencies, 0.99))
    );
}

fn failures(timings: &Timings) -> String {
    match &timings.first_failure {
        Some(first) => format!("  {} FAILED (first: {first})", timings.failures),
        None => String::new(),
    }
}

/// The release half of `cargo xtask bench mixed`.
pub fn mixed(binary: &str) -> Result<(), String> {
    on_both_databases("mixed", |name, url| run_backend(binary, name, url))
}
