//! `cargo xtask bench vendure`: the Vendure connector benchmark of docs/benchmarks.md.
//!
//! One pinned development Vendure on SQLite (installed into `target/vendure`, its data under
//! `target/bench-vendure/<pid>`), a release `mercer serve` on a new SQLite file there, and the
//! release `mercer-vendure` for Mercer's demo shop, registered as the shop's `customers`
//! destination. Everything on loopback. It prints:
//!
//! 1. Change to applied. 600 customers are made in Vendure before the connector starts (so no
//!    push of theirs is queued) and brought into Mercer's directory with a customer sync. Then:
//!    - unloaded: 20 of them changed one at a time, each once the previous one was applied;
//!    - paced: customer i's last name changed at t_i, 20 a second for 30 s, paced by deadlines
//!      (several senders, so a slow answer does not hold the next change up), then each
//!      customer read from Mercer's directory until it shows its new last name.
//!
//!    A change's latency is `updated_at` (when Mercer applied the event) minus t_i, both on this
//!    machine's clock: p50, p99, max, and how many arrived within 2 minutes of the last change
//!    (and when the last one did). The path: Vendure's event, the Mercer plugin's job queue
//!    (polled every 100 ms), its signed push to the connector, the connector's read of the
//!    customer from the Admin API, its Customer Saved event to Mercer, and Mercer's apply.
//! 2. Each connector operation called directly, signed as Mercer signs it
//!    (`mercer_connector::HttpConnector`), 50 times in a row: p50 and p99.
//! 3. The connector's memory: VmRSS once it is ready and idle, VmHWM (its peak) after the load.
//!
//! The benchmark's own Admin API calls (the merchant's changes) use a session of the
//! development Vendure's superadmin, not the API key: Vendure checks an API key with bcrypt on
//! every request, which would make the load generator, not the connector, the bottleneck. The
//! connector uses its API key, as deployed. Its reconcile pass runs once an hour here: a pass
//! re-sends what changed since the last one, which would add Vendure reads to the measured path
//! and nothing to what it measures. Figures only: nothing about them is asserted.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use mercer_connector::types::{Customer, CustomerAddress, Order, Payment};
use mercer_connector::{ConnectorTarget, HttpConnector, PlatformConnector};
use mercer_domain::Timestamp;
use mercer_domain::access::credentials::Secret;
use mercer_outbound::PrivateAddressGuard;
use mercer_vendure::dev::{self, Database, Options, RunningVendure};
use serde_json::{Value, json};

use crate::bench::{cpu_seconds, ms, peak_memory_kib, start_mercer, wait_for_listen};
use crate::bench_subscriptions::percentile;

/// Customers made, then each changed once at the paced rate.
const CUSTOMERS: usize = 600;
/// Changes a second.
const RATE: f64 = 20.0;
/// Threads sending the changes, each at its deadline.
const SENDERS: usize = 4;
/// Changes made one at a time, before the paced ones.
const UNLOADED: usize = 20;
/// How long after the last change arrivals are counted.
const ARRIVAL: Duration = Duration::from_secs(120);
/// How much longer the benchmark waits for the rest, so the next part starts on a quiet Vendure.
const DRAIN: Duration = Duration::from_secs(600);
/// Calls of each connector operation.
const CALLS: usize = 50;
/// The first start of a Vendure seeds it.
const VENDURE_START: Duration = Duration::from_secs(300);
/// The seeded variant the orders are of.
const PRODUCT_SLUG: &str = "house-blend";
const VARIANT_SKU: &str = "HB-250";
/// The development Vendure's superadmin (`crates/vendure/dev/start.js`).
const SUPERADMIN: (&str, &str) = ("superadmin", "superadmin");

fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(60)))
        .build()
        .into()
}

/// Vendure's Admin API, as the superadmin signed in.
struct Admin {
    url: String,
    /// `Bearer <session token>`.
    authorization: String,
    agent: ureq::Agent,
}

/// The `data` of a GraphQL answer; a GraphQL error fails.
fn graphql_data(answer: &mut ureq::http::Response<ureq::Body>) -> Result<Value, String> {
    let text = answer
        .body_mut()
        .read_to_string()
        .map_err(|e| format!("Vendure: {e}"))?;
    let value: Value =
        serde_json::from_str(&text).map_err(|e| format!("Vendure answered {text:?}: {e}"))?;
    if let Some(errors) = value.get("errors") {
        return Err(format!("Vendure: {errors}"));
    }
    Ok(value["data"].clone())
}

impl Admin {
    /// Signs the development superadmin in.
    fn sign_in(url: &str) -> Result<Admin, String> {
        let agent = agent();
        let body = json!({
            "query": "mutation($u: String!, $p: String!) { login(username: $u, password: $p) { ... on CurrentUser { id } ... on ErrorResult { errorCode message } } }",
            "variables": { "u": SUPERADMIN.0, "p": SUPERADMIN.1 },
        });
        let mut answer = agent
            .post(format!("{url}/admin-api"))
            .header("Content-Type", "application/json")
            .send(body.to_string())
            .map_err(|e| format!("Vendure: {e}"))?;
        let token = answer
            .headers()
            .get("vendure-auth-token")
            .and_then(|value| value.to_str().ok())
            .map(str::to_string);
        let data = graphql_data(&mut answer)?;
        let token = token.ok_or_else(|| format!("the superadmin's login answered {data}"))?;
        Ok(Admin {
            url: url.to_string(),
            authorization: format!("Bearer {token}"),
            agent,
        })
    }

    /// The operation's `data`; a GraphQL error fails.
    fn call(&self, query: &str, variables: Value) -> Result<Value, String> {
        let body = json!({ "query": query, "variables": variables }).to_string();
        let mut answer = self
            .agent
            .post(format!("{}/admin-api", self.url))
            .header("Authorization", &self.authorization)
            .header("Content-Type", "application/json")
            .send(body)
            .map_err(|e| format!("Vendure: {e}"))?;
        graphql_data(&mut answer)
    }

    /// Changes the customer's last name.
    fn rename(&self, id: &str, last_name: &str) -> Result<(), String> {
        let data = self.call(
            "mutation($input: UpdateCustomerInput!) {
                updateCustomer(input: $input) { ... on Customer { id } ... on ErrorResult { errorCode message } }
            }",
            json!({ "input": { "id": id, "lastName": last_name } }),
        )?;
        match data["updateCustomer"]["id"].is_string() {
            true => Ok(()),
            false => Err(format!("updateCustomer answered {data}")),
        }
    }
}

/// Sends `body` (or nothing) to Mercer with the bearer `token`; the status and JSON answer.
fn mercer_call(
    agent: &ureq::Agent,
    method: &str,
    url: &str,
    token: &str,
    body: Option<Value>,
) -> Result<(u16, Value), String> {
    let request = ureq::http::Request::builder()
        .method(method)
        .uri(url)
        .header("Authorization", format!("Bearer {token}"));
    let result = match body {
        Some(body) => agent.run(
            request
                .header("Content-Type", "application/json")
                .body(body.to_string())
                .map_err(|e| e.to_string())?,
        ),
        None => agent.run(request.body(()).map_err(|e| e.to_string())?),
    };
    let mut answer = result.map_err(|e| format!("{method} {url}: {e}"))?;
    let status = answer.status().as_u16();
    let text = answer
        .body_mut()
        .read_to_string()
        .map_err(|e| format!("{method} {url}: {e}"))?;
    Ok((status, serde_json::from_str(&text).unwrap_or(Value::Null)))
}

/// The same, failing unless 2xx.
fn mercer_ok(
    agent: &ureq::Agent,
    method: &str,
    url: &str,
    token: &str,
    body: Option<Value>,
) -> Result<Value, String> {
    match mercer_call(agent, method, url, token, body)? {
        (200..=299, answer) => Ok(answer),
        (status, answer) => Err(format!("{method} {url} answered {status}: {answer}")),
    }
}

/// `mercer-vendure serve`, killed when dropped.
struct Connector {
    child: Child,
    url: String,
}

impl Drop for Connector {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What the benchmark runs against.
struct World {
    mercer_url: String,
    shop: String,
    token: String,
    secret: String,
    connector: Connector,
    admin: Admin,
    agent: ureq::Agent,
}

impl World {
    /// The customer of this Vendure id in Mercer's directory: its last name and when Mercer
    /// last changed it; None while Mercer has no such customer.
    fn directory_customer(&self, id: &str) -> Option<(String, Timestamp)> {
        let url = format!(
            "{}/customers/v2/shops/{}/customers/pid/{id}",
            self.mercer_url, self.shop
        );
        let Ok((200, answer)) = mercer_call(&self.agent, "GET", &url, &self.token, None) else {
            return None;
        };
        let customer = &answer["customer"];
        let updated_at = customer["updated_at"]
            .as_str()
            .and_then(Timestamp::parse_rfc3339)?;
        let last_name = customer["last_name"].as_str()?.to_string();
        Some((last_name, updated_at))
    }

    /// Mercer's platform ids of the directory's customers.
    fn directory_ids(&self) -> Result<Vec<String>, String> {
        let mut found = Vec::new();
        for page in 1.. {
            let url = format!(
                "{}/customers/v2/shops/{}/customers?limit=250&page={page}",
                self.mercer_url, self.shop
            );
            let answer = mercer_ok(&self.agent, "GET", &url, &self.token, None)?;
            let customers = answer["customers"].as_array().cloned().unwrap_or_default();
            found.extend(customers.iter().filter_map(|customer| {
                customer["platform_id"]["string_value"]
                    .as_str()
                    .map(str::to_string)
            }));
            if customers.is_empty() || answer["pagination"]["next_url"].is_null() {
                break;
            }
        }
        Ok(found)
    }
}

fn free_port() -> Result<u16, String> {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|address| address.port())
        .map_err(|e| format!("no free loopback port: {e}"))
}

/// Removes the data of benchmark runs whose process is gone.
fn remove_stale_data(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let alive = name
            .parse::<u32>()
            .is_ok_and(|pid| PathBuf::from(format!("/proc/{pid}")).exists());
        if !alive {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// `Vm…:` of `/proc/<pid>/status`, in KiB.
fn status_kib(pid: u32, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|line| line.strip_prefix(field))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
}

fn mib(kib: Option<u64>) -> String {
    kib.map_or("?".to_string(), |kib| {
        format!("{:.1} MiB", kib as f64 / 1024.0)
    })
}

/// Calls `done` every `every` until it answers true (true) or `limit` has passed (false).
fn wait_until(limit: Duration, every: Duration, mut done: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        if done() {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(every);
    }
}

/// Starts the connector for the shop and waits until it answers `/readyz` and the plugin
/// forwards to it.
fn start_connector(
    binary: &str,
    vendure: &RunningVendure,
    admin: &Admin,
    mercer_url: &str,
    shop: &str,
    secret: &str,
    token: &str,
) -> Result<Connector, String> {
    let mut child = Command::new(binary)
        .args(["serve", "--bind", "127.0.0.1:0", "--allow-private-targets"])
        .args(["--vendure-url", &vendure.url])
        .args(["--vendure-api-key", &vendure.api_key])
        .args(["--shop", shop, "--secret", secret])
        .args(["--mercer-url", mercer_url, "--mercer-token", token])
        .args(["--reconcile-interval-s", "3600"])
        .env("MERCER_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| format!("cannot start {binary}: {e}"))?;
    let lines = wait_for_listen(&mut child, "mercer-vendure listening on")?;
    let url = lines
        .iter()
        .find_map(|line| line.trim().strip_prefix("mercer-vendure listening on "))
        .map(|url| url.trim().to_string())
        .ok_or("the connector printed no address")?;
    let connector = Connector { child, url };
    let agent = agent();
    let every = Duration::from_millis(100);
    let ready = wait_until(Duration::from_secs(30), every, || {
        agent
            .get(format!("{}/readyz", connector.url))
            .call()
            .is_ok_and(|answer| answer.status().as_u16() == 200)
    });
    if !ready {
        return Err("the connector was not ready within 30 s".to_string());
    }
    let registered = wait_until(Duration::from_secs(30), every, || {
        admin
            .call("{ mercerConnectorUrls }", json!({}))
            .is_ok_and(|data| {
                data["mercerConnectorUrls"].as_array().is_some_and(|urls| {
                    urls.iter()
                        .any(|url| url.as_str() == Some(connector.url.as_str()))
                })
            })
    });
    if !registered {
        return Err("the connector did not register with the plugin within 30 s".to_string());
    }
    Ok(connector)
}

fn micros_since_epoch(time: SystemTime) -> i64 {
    time.duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros() as i64)
        .unwrap_or_default()
}

fn seconds(duration: Duration) -> f64 {
    duration.as_secs_f64()
}

/// Latencies in microseconds (negative ones counted as 0), sorted.
fn sorted_latencies(micros: impl Iterator<Item = i64>) -> Vec<Duration> {
    let mut all: Vec<Duration> = micros
        .map(|micros| Duration::from_micros(micros.max(0) as u64))
        .collect();
    all.sort_unstable();
    all
}

/// The customers of part 1, made in Vendure before the connector runs; their Vendure ids.
fn make_customers(admin: &Admin) -> Result<Vec<String>, String> {
    let started = Instant::now();
    let mut ids = Vec::with_capacity(CUSTOMERS);
    for i in 0..CUSTOMERS {
        let data = admin.call(
            "mutation($input: CreateCustomerInput!) {
                createCustomer(input: $input) { ... on Customer { id } ... on ErrorResult { errorCode message } }
            }",
            json!({ "input": { "emailAddress": format!("bench-{i}@example.test"),
                "firstName": "Bench", "lastName": format!("Customer{i}") } }),
        )?;
        let id = data["createCustomer"]["id"]
            .as_str()
            .ok_or_else(|| format!("createCustomer answered {data}"))?;
        ids.push(id.to_string());
    }
    println!(
        "  setup            {CUSTOMERS} customers made in Vendure in {:.1} s, before the connector started",
        seconds(started.elapsed())
    );
    Ok(ids)
}

/// Brings the customers into Mercer's directory with a customer sync (List Customers through
/// the connector).
fn sync_customers(world: &World, ids: &[String]) -> Result<(), String> {
    let started = Instant::now();
    let sync = mercer_ok(
        &world.agent,
        "POST",
        &format!(
            "{}/customers/v2/shops/{}/sync",
            world.mercer_url, world.shop
        ),
        &world.token,
        None,
    )?;
    let mut listed = 0;
    let synced = wait_until(ARRIVAL, Duration::from_millis(500), || {
        listed = world.directory_ids().map_or(0, |found| {
            ids.iter().filter(|id| found.contains(id)).count()
        });
        listed == ids.len()
    });
    println!(
        "  setup            {listed} of them in Mercer's directory {:.1} s after a customer sync started",
        seconds(started.elapsed())
    );
    match synced {
        true => Ok(()),
        false => Err(format!(
            "the customer sync ({sync}) brought {listed} of {} customers in {} s",
            ids.len(),
            ARRIVAL.as_secs()
        )),
    }
}

/// Unloaded: each change made once the previous one was applied; the latencies, sorted.
fn unloaded(world: &World, ids: &[String]) -> Result<Vec<Duration>, String> {
    let mut latencies = Vec::with_capacity(ids.len());
    for (n, id) in ids.iter().enumerate() {
        let name = format!("Alone{n}");
        let changed_at = micros_since_epoch(SystemTime::now());
        world.admin.rename(id, &name)?;
        let mut applied = None;
        wait_until(Duration::from_secs(60), Duration::from_millis(10), || {
            applied = world
                .directory_customer(id)
                .filter(|(last_name, _)| *last_name == name)
                .map(|(_, at)| at.as_micros());
            applied.is_some()
        });
        let at = applied.ok_or_else(|| format!("customer {id}'s change did not arrive in 60 s"))?;
        latencies.push(at - changed_at);
    }
    Ok(sorted_latencies(latencies.into_iter()))
}

/// What one paced change's sender saw.
struct Sent {
    index: usize,
    /// How long after its deadline the change was sent.
    lag: Duration,
    /// The Admin API's round trip.
    round_trip: Duration,
    error: Option<String>,
}

/// Part 1's figures, for the summary.
struct Applied {
    unloaded_p50: Duration,
    p50: Duration,
    p99: Duration,
    arrived: usize,
}

/// Part 1: change to applied, one at a time and then at a steady rate.
fn change_to_applied(world: &World, ids: &[String], connector_pid: u32) -> Result<Applied, String> {
    // The unloaded ones are the last customers: the paced run changes them last, long after.
    let alone = unloaded(world, &ids[ids.len() - UNLOADED..])?;
    println!(
        "  unloaded         {UNLOADED} changes one at a time: change → applied p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
        ms(percentile(&alone, 0.5)),
        ms(percentile(&alone, 0.99)),
        ms(alone.last().copied().unwrap_or_default()),
    );
    std::thread::sleep(Duration::from_secs(2));

    let cpu_before = cpu_seconds(connector_pid);
    let interval = Duration::from_secs_f64(1.0 / RATE);
    let (start, start_wall) = (Instant::now(), SystemTime::now());
    let slot = AtomicUsize::new(0);
    let sent = Mutex::new(Vec::with_capacity(CUSTOMERS));
    std::thread::scope(|scope| {
        for _ in 0..SENDERS {
            scope.spawn(|| {
                loop {
                    let index = slot.fetch_add(1, Ordering::Relaxed);
                    let Some(id) = ids.get(index) else {
                        return;
                    };
                    let due = start + interval * index as u32;
                    if let Some(wait) = due.checked_duration_since(Instant::now()) {
                        std::thread::sleep(wait);
                    }
                    let sent_at = Instant::now();
                    let error = world.admin.rename(id, &format!("Changed{index}")).err();
                    sent.lock().unwrap_or_else(|e| e.into_inner()).push(Sent {
                        index,
                        lag: sent_at.saturating_duration_since(due),
                        round_trip: sent_at.elapsed(),
                        error,
                    });
                }
            });
        }
    });
    let sending = start.elapsed();
    let sent = sent.into_inner().unwrap_or_else(|e| e.into_inner());
    let failed: Vec<&Sent> = sent.iter().filter(|s| s.error.is_some()).collect();

    // Each customer read back until it shows its new last name.
    let t0 = micros_since_epoch(start_wall);
    let due = |index: usize| t0 + (interval.as_micros() as i64) * index as i64;
    let mut applied: HashMap<usize, i64> = HashMap::new();
    let mut pending: Vec<usize> = sent
        .iter()
        .filter(|s| s.error.is_none())
        .map(|s| s.index)
        .collect();
    pending.sort_unstable();
    let waited_from = Instant::now();
    while !pending.is_empty() && waited_from.elapsed() < ARRIVAL + DRAIN {
        pending.retain(|&index| {
            let name = format!("Changed{index}");
            match world.directory_customer(&ids[index]) {
                Some((last_name, at)) if last_name == name => {
                    applied.insert(index, at.as_micros() - due(index));
                    false
                }
                _ => true,
            }
        });
        if !pending.is_empty() {
            std::thread::sleep(Duration::from_millis(250));
        }
    }
    let cpu_after = cpu_seconds(connector_pid);
    // Counted by when Mercer applied each change, not by when this loop saw it.
    let last_change = t0 + sending.as_micros() as i64;
    let in_time = applied
        .iter()
        .filter(|&(&index, &latency)| {
            due(index) + latency <= last_change + ARRIVAL.as_micros() as i64
        })
        .count();
    let last_applied = applied
        .iter()
        .map(|(index, latency)| due(*index) + latency)
        .max()
        .map(|at| Duration::from_micros((at - t0).max(0) as u64));

    let latencies = sorted_latencies(applied.values().copied());
    let mut lags: Vec<Duration> = sent.iter().map(|s| s.lag).collect();
    lags.sort_unstable();
    let mut round_trips: Vec<Duration> = sent.iter().map(|s| s.round_trip).collect();
    round_trips.sort_unstable();
    println!(
        "  paced, sent      {} changes in {:.1} s ({:.1}/s, {RATE:.0}/s asked); after their deadline by p50 {:.1} ms, p99 {:.1} ms; updateCustomer round trip p50 {:.1} ms, p99 {:.1} ms{}",
        sent.len(),
        seconds(sending),
        sent.len() as f64 / seconds(sending),
        ms(percentile(&lags, 0.5)),
        ms(percentile(&lags, 0.99)),
        ms(percentile(&round_trips, 0.5)),
        ms(percentile(&round_trips, 0.99)),
        match failed.first() {
            Some(first) => format!(
                "; {} FAILED (first: {})",
                failed.len(),
                first.error.as_deref().unwrap_or_default()
            ),
            None => String::new(),
        }
    );
    println!(
        "  paced, applied   change → applied p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms; {in_time} of {CUSTOMERS} applied within {} s of the last change, {} in all, the last {:.1} s after the first change",
        ms(percentile(&latencies, 0.5)),
        ms(percentile(&latencies, 0.99)),
        ms(latencies.last().copied().unwrap_or_default()),
        ARRIVAL.as_secs(),
        applied.len(),
        seconds(last_applied.unwrap_or_default()),
    );
    if let (Some(before), Some(after)) = (cpu_before, cpu_after) {
        println!(
            "  connector CPU    {:.2} s over the paced run, {:.2} ms a change",
            after - before,
            (after - before) * 1000.0 / CUSTOMERS as f64
        );
    }
    Ok(Applied {
        unloaded_p50: percentile(&alone, 0.5),
        p50: percentile(&latencies, 0.5),
        p99: percentile(&latencies, 0.99),
        arrived: in_time,
    })
}

/// One operation's timings.
struct Timings {
    name: &'static str,
    latencies: Vec<Duration>,
    failures: usize,
    first_failure: Option<String>,
}

/// `call(n)` for n in 0..CALLS, one after another, each timed; the answers of those that
/// succeeded (None for the others).
fn timed<T>(
    name: &'static str,
    mut call: impl FnMut(usize) -> Result<T, String>,
) -> (Timings, Vec<Option<T>>) {
    let mut timings = Timings {
        name,
        latencies: Vec::with_capacity(CALLS),
        failures: 0,
        first_failure: None,
    };
    let mut answers = Vec::with_capacity(CALLS);
    for n in 0..CALLS {
        let started = Instant::now();
        let result = call(n);
        let elapsed = started.elapsed();
        match result {
            Ok(answer) => {
                timings.latencies.push(elapsed);
                answers.push(Some(answer));
            }
            Err(error) => {
                timings.failures += 1;
                timings.first_failure.get_or_insert(error);
                answers.push(None);
            }
        }
    }
    timings.latencies.sort_unstable();
    (timings, answers)
}

/// The nth answer of an earlier operation, or why there is none.
fn earlier<'a, T>(answers: &'a [Option<T>], n: usize, what: &str) -> Result<&'a T, String> {
    answers
        .get(n)
        .and_then(Option::as_ref)
        .ok_or_else(|| format!("no {what} to call it on"))
}

/// Part 2: every operation, signed, 50 calls each.
fn operations(world: &World) -> Result<Vec<Timings>, String> {
    let client = HttpConnector::new(PrivateAddressGuard::ALLOW_PRIVATE);
    let target = ConnectorTarget {
        base_url: world.connector.url.clone(),
        version: "v1".to_string(),
        shop_identifier: world.shop.clone(),
        timeout: Duration::from_secs(30),
        secret: Secret::new(world.secret.clone()),
        compatible_secret: Secret::new(world.secret.clone()),
    };
    let found = world.admin.call(
        "query($slug: String!) { products(options: {filter: {slug: {eq: $slug}}}) { items { variants { id sku } } } }",
        json!({ "slug": PRODUCT_SLUG }),
    )?;
    let variant = found["products"]["items"][0]["variants"]
        .as_array()
        .and_then(|variants| variants.iter().find(|v| v["sku"] == VARIANT_SKU))
        .and_then(|v| v["id"].as_str())
        .ok_or_else(|| format!("no seeded variant {VARIANT_SKU}: {found}"))?
        .to_string();
    let address = json!({ "first_name": "Ada", "last_name": "Lovelace", "street_1": "1 Main St",
        "city": "Portland", "province_code": "OR", "postal_code": "97201", "country_code": "US" });
    let failed = |e: mercer_connector::ConnectorError| format!("{e} ({e:?})");
    let run = std::process::id();
    let mut all = Vec::new();

    let (timings, _) = timed("Verify", |_| client.verify(&target).map_err(failed));
    all.push(timings);
    let (timings, _) = timed("List Customers", |_| {
        client
            .list_customers(&target, Some(50), None, None)
            .map_err(failed)
    });
    all.push(timings);
    let (timings, customers) = timed("Create Customer", |n| {
        let customer: Customer =
            serde_json::from_value(json!({ "email": format!("bench-op-{run}-{n}@example.test"),
            "first_name": "Op", "last_name": format!("Customer{n}") }))
            .map_err(|e| e.to_string())?;
        let made = client.create_customer(&target, &customer).map_err(failed)?;
        made.platform_id
            .map(|id| id.as_str().to_string())
            .ok_or_else(|| "a customer without platform_id".to_string())
    });
    all.push(timings);
    let (timings, _) = timed("Update Customer", |n| {
        let id = earlier(&customers, n, "customer")?;
        let change: Customer =
            serde_json::from_value(json!({ "last_name": format!("Updated{n}") }))
                .map_err(|e| e.to_string())?;
        client.update_customer(&target, id, &change).map_err(failed)
    });
    all.push(timings);
    let (timings, _) = timed("Create Address", |n| {
        let id = earlier(&customers, n, "customer")?;
        let sent: CustomerAddress =
            serde_json::from_value(address.clone()).map_err(|e| e.to_string())?;
        client.create_address(&target, id, &sent).map_err(failed)
    });
    all.push(timings);
    let (timings, _) = timed("List Products", |_| {
        client
            .list_products(&target, Some(50), None)
            .map_err(failed)
    });
    all.push(timings);
    let (timings, _) = timed("List Categories", |_| {
        client.list_categories(&target, None, None).map_err(failed)
    });
    all.push(timings);
    let (timings, orders) = timed("Create Order", |n| {
        let customer = earlier(&customers, n, "customer")?;
        let order: Order = serde_json::from_value(json!({
            "platform_customer_id": customer, "currency": "USD",
            "line_items": [{ "platform_variant_id": variant, "quantity": 1 }],
            "shipping_addresses": [address], "billing_address": address }))
        .map_err(|e| e.to_string())?;
        let key = format!("bench-{run}-{n}");
        let made = client
            .create_order(&target, &order, Some(&key))
            .map_err(failed)?;
        let id = made
            .platform_id
            .map(|id| id.as_str().to_string())
            .ok_or("an order without platform_id")?;
        let total = made.total.map(|total| total.as_str().to_string());
        Ok((id, total))
    });
    all.push(timings);
    let (timings, _) = timed("Get Order", |n| {
        let (id, _) = earlier(&orders, n, "order")?;
        client.get_order(&target, id).map_err(failed)
    });
    all.push(timings);
    let (timings, _) = timed("Create Payment", |n| {
        let (id, total) = earlier(&orders, n, "order")?;
        let payment: Payment = serde_json::from_value(json!({
            "provider": "bench", "payment_method": "card", "currency": "USD",
            "amount_planned": total, "status": "paid",
            "transactions": [{ "provider_transaction_id": format!("bench-{run}-{n}"),
                "amount": total, "currency": "USD", "status": "success", "type": "charge" }] }))
        .map_err(|e| e.to_string())?;
        client.create_payment(&target, id, &payment).map_err(failed)
    });
    all.push(timings);
    Ok(all)
}

fn print_operation(timings: &Timings) {
    println!(
        "    {:<16} p50 {:>7.1} ms  p99 {:>7.1} ms  ({} calls{})",
        timings.name,
        ms(percentile(&timings.latencies, 0.5)),
        ms(percentile(&timings.latencies, 0.99)),
        timings.latencies.len(),
        match &timings.first_failure {
            Some(first) => format!(", {} FAILED, first: {first}", timings.failures),
            None => String::new(),
        }
    );
}

fn run(binaries: &Binaries, data: &Path) -> Result<(), String> {
    let node_modules = dev::install(&binaries.target.join("vendure"))?;
    let options = Options {
        port: free_port()?,
        data_dir: data.join("vendure"),
        database: Database::Sqlite,
        quiet: true,
        exit_with_parent: Some(std::process::id()),
    };
    let started = Instant::now();
    let vendure = dev::start(&node_modules, &options, VENDURE_START)?;
    println!(
        "  Vendure          {} on SQLite, seeded and answering after {:.1} s",
        vendure.url,
        seconds(started.elapsed())
    );
    let admin = Admin::sign_in(&vendure.url)?;

    let database_url = format!("sqlite://{}", data.join("mercer.db").display());
    let mercer = start_mercer(
        &binaries.mercer,
        &database_url,
        &["--allow-private-targets"],
    )?;
    let (shop, token) = (mercer.shop.clone(), mercer.token.clone());
    if shop.is_empty() || token.is_empty() {
        return Err("the first start printed no demo shop and token".to_string());
    }
    let agent = agent();
    let rotated = mercer_ok(
        &agent,
        "POST",
        &format!(
            "{}/integrations/v1/shops/{shop}/shared_secret/rotate",
            mercer.base_url
        ),
        &token,
        None,
    )?;
    let secret = rotated["data"]["shared_secret"]
        .as_str()
        .ok_or_else(|| format!("no rotated secret in {rotated}"))?
        .to_string();
    let ids = make_customers(&admin)?;

    let connector = start_connector(
        &binaries.connector,
        &vendure,
        &admin,
        &mercer.base_url,
        &shop,
        &secret,
        &token,
    )?;
    mercer_ok(
        &agent,
        "POST",
        &format!(
            "{}/integrations/v1/shops/{shop}/platform_connector_destinations",
            mercer.base_url
        ),
        &token,
        Some(
            json!({"data": {"destination": {"topic": "customers", "destination": connector.url}}}),
        ),
    )?;
    let connector_pid = connector.child.id();
    std::thread::sleep(Duration::from_secs(2));
    let idle = status_kib(connector_pid, "VmRSS:");
    println!(
        "  connector        {} RSS, ready and registered, idle",
        mib(idle)
    );

    let world = World {
        mercer_url: mercer.base_url.clone(),
        shop,
        token,
        secret,
        connector,
        admin,
        agent,
    };
    sync_customers(&world, &ids)?;
    println!(
        "change to applied (latency = Mercer's updated_at - when the change was due, on one clock):"
    );
    let applied = change_to_applied(&world, &ids, connector_pid)?;

    println!("connector operations, called directly and signed, {CALLS} calls each in a row:");
    let operations = operations(&world)?;
    for timings in &operations {
        print_operation(timings);
    }

    let peak = peak_memory_kib(connector_pid);
    let after = status_kib(connector_pid, "VmRSS:");
    println!(
        "  connector memory {} RSS idle, {} peak (VmHWM), {} RSS after the load",
        mib(idle),
        mib(peak),
        mib(after)
    );
    let slowest = operations
        .iter()
        .max_by_key(|timings| percentile(&timings.latencies, 0.99));
    let failures: usize = operations.iter().map(|timings| timings.failures).sum();
    println!(
        "summary: a Vendure change applied in Mercer p50 {:.0} ms unloaded; at {RATE:.0}/s p50 {:.0} ms, p99 {:.0} ms ({} of {CUSTOMERS} within {} s); slowest operation {} (p99 {:.0} ms); {failures} failed calls; connector {} idle, {} peak",
        ms(applied.unloaded_p50),
        ms(applied.p50),
        ms(applied.p99),
        applied.arrived,
        ARRIVAL.as_secs(),
        slowest.map_or("?", |timings| timings.name),
        ms(slowest.map_or(Duration::ZERO, |timings| percentile(
            &timings.latencies,
            0.99
        ))),
        mib(idle),
        mib(peak)
    );
    drop(world);
    drop(mercer);
    drop(vendure);
    Ok(())
}

struct Binaries {
    mercer: String,
    connector: String,
    /// Cargo's target folder: `target/vendure` and `target/bench-vendure` are in it.
    target: PathBuf,
}

/// The release half of `cargo xtask bench vendure`.
pub fn vendure(mercer: &str) -> Result<(), String> {
    let release = Path::new(mercer)
        .parent()
        .ok_or("the mercer binary is in no folder")?;
    let binaries = Binaries {
        mercer: mercer.to_string(),
        connector: release.join("mercer-vendure").display().to_string(),
        target: release
            .parent()
            .ok_or("the release folder is in no folder")?
            .to_path_buf(),
    };
    println!(
        "Vendure connector benchmark: the pinned Vendure, mercer-vendure and mercer (release) on SQLite, on loopback, {} cores",
        std::thread::available_parallelism().map_or(0, usize::from)
    );
    let runs = binaries.target.join("bench-vendure");
    remove_stale_data(&runs);
    let data = runs.join(std::process::id().to_string());
    std::fs::create_dir_all(&data).map_err(|e| format!("cannot create {}: {e}", data.display()))?;
    let result = run(&binaries, &data);
    let _ = std::fs::remove_dir_all(&data);
    result
}
