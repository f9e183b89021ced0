//! `cargo xtask bench ingest`: the event ingest benchmark of docs/benchmarks.md.
//!
//! 50,000 Customer Saved events (10,000 customers, five versions each, two addresses; one
//! event in five delivered after a newer version of its customer) posted by 32 keep-alive
//! connections on loopback to a release `mercer`, on SQLite and on PostgreSQL, and the same
//! load against a bare actix handler that answers 202 (the floor) and against the same handler
//! answering after a round trip to another thread (the handoff floor), before the first backend
//! and after each. Prints accepted events/s, p50/p99 accept latency, the time from the last
//! 202 until every event is applied, mercer's CPU per event (by thread), peak memory, and the
//! ratio to each floor measured around the run.
//!
//! The load generator runs in this process (xtask re-runs itself in release mode for it) and
//! speaks HTTP/1.1 over plain sockets, so it takes little of the two cores from the server.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

pub(crate) const CUSTOMERS: usize = 10_000;
const VERSIONS: usize = 5;
const CONNECTIONS: usize = 32;

/// The events in delivery order: (path suffix is fixed) bodies, and the customers' final emails.
pub(crate) fn events() -> Vec<String> {
    let base = 1_700_000_000i64;
    let mut order: Vec<(usize, usize)> = Vec::with_capacity(CUSTOMERS * VERSIONS);
    // Interleave customers; within each, swap one adjacent pair of versions so one event in
    // five (the older of the pair) arrives after a newer one and must be dropped.
    let mut seed: u64 = 0x6d65_7263;
    let mut per_customer: Vec<Vec<usize>> =
        (0..CUSTOMERS).map(|_| (1..=VERSIONS).collect()).collect();
    for versions in &mut per_customer {
        seed = seed
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        let k = (seed >> 33) as usize % (VERSIONS - 1);
        versions.swap(k, k + 1);
    }
    for round in 0..VERSIONS {
        for (customer, versions) in per_customer.iter().enumerate() {
            order.push((customer, versions[round]));
        }
    }
    order
        .into_iter()
        .map(|(customer, version)| {
            let updated = chrono_like(base + customer as i64 + version as i64 * 100_000);
            json!({"data": {"customer": {
                "platform_id": format!("bench-{customer:06}"),
                "platform_created_at": chrono_like(base),
                "platform_updated_at": updated,
                "email": format!("customer{customer:06}.v{version}@bench.example.test"),
                "first_name": format!("First{customer}"),
                "last_name": format!("Last{customer}"),
                "phone": format!("+1555{customer:07}"),
                "addresses": [
                    {"platform_id": format!("bench-{customer:06}-ship"), "address_type": "shipping", "first_name": format!("First{customer}"), "last_name": format!("Last{customer}"), "street_1": format!("{version} Main Street"), "street_2": "Suite 100", "city": "Springfield", "province": "Illinois", "province_code": "IL", "country": "United States", "country_code": "US", "postal_code": "62701", "phone": "+15551234567", "company": "Acme", "is_default": true},
                    {"platform_id": format!("bench-{customer:06}-bill"), "address_type": "billing", "first_name": format!("First{customer}"), "last_name": format!("Last{customer}"), "street_1": "1 Market Square", "city": "Shelbyville", "province": "Illinois", "province_code": "IL", "country": "United States", "country_code": "US", "postal_code": "62565", "is_default": false}
                ]
            }}})
            .to_string()
        })
        .collect()
}

/// RFC 3339 UTC of unix seconds, without a date library.
fn chrono_like(seconds: i64) -> String {
    let days = seconds.div_euclid(86_400);
    let rem = seconds.rem_euclid(86_400);
    // Civil from days (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = if m <= 2 { y + 1 } else { y };
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

pub(crate) struct LoadResult {
    pub(crate) accepted: usize,
    pub(crate) failed: usize,
    elapsed: Duration,
    latencies: Vec<Duration>,
    last_accept: Instant,
}

impl LoadResult {
    pub(crate) fn rate(&self) -> f64 {
        self.accepted as f64 / self.elapsed.as_secs_f64()
    }

    fn percentile(&self, p: f64) -> Duration {
        if self.latencies.is_empty() {
            return Duration::ZERO;
        }
        let index = ((self.latencies.len() as f64 - 1.0) * p).round() as usize;
        self.latencies[index]
    }
}

/// A keep-alive HTTP/1.1 connection that posts JSON and reads the status. Hand-rolled so the
/// load generator costs little CPU next to the server it measures on the same two cores.
pub(crate) struct Connection {
    address: String,
    reader: BufReader<TcpStream>,
    writer: TcpStream,
}

impl Connection {
    pub(crate) fn open(address: &str) -> std::io::Result<Connection> {
        let stream = TcpStream::connect(address)?;
        stream.set_nodelay(true)?;
        stream.set_read_timeout(Some(Duration::from_secs(60)))?;
        Ok(Connection {
            address: address.to_string(),
            reader: BufReader::new(stream.try_clone()?),
            writer: stream,
        })
    }

    /// Posts `body` to `path`; the answer's status and body.
    pub(crate) fn post(
        &mut self,
        path: &str,
        authorization: Option<&str>,
        body: &str,
    ) -> std::io::Result<(u16, String)> {
        self.request("POST", path, authorization, Some(body))
    }

    /// Sends `method path` with `body` as JSON, if any; the answer's status and body.
    pub(crate) fn request(
        &mut self,
        method: &str,
        path: &str,
        authorization: Option<&str>,
        body: Option<&str>,
    ) -> std::io::Result<(u16, String)> {
        let body = body.unwrap_or_default();
        let mut request = format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n",
            self.address,
            body.len()
        );
        if let Some(authorization) = authorization {
            request.push_str("Authorization: ");
            request.push_str(authorization);
            request.push_str("\r\n");
        }
        request.push_str("\r\n");
        request.push_str(body);
        self.writer.write_all(request.as_bytes())?;
        let mut line = String::new();
        self.reader.read_line(&mut line)?;
        let status: u16 = line
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| std::io::Error::other(format!("bad status line {line:?}")))?;
        let (mut length, mut close) = (0usize, false);
        loop {
            line.clear();
            if self.reader.read_line(&mut line)? == 0 {
                return Err(std::io::Error::other("connection closed"));
            }
            let header = line.trim_end();
            if header.is_empty() {
                break;
            }
            if let Some((name, value)) = header.split_once(':') {
                if name.eq_ignore_ascii_case("content-length") {
                    length = value.trim().parse().unwrap_or(0);
                } else if name.eq_ignore_ascii_case("connection")
                    && value.trim().eq_ignore_ascii_case("close")
                {
                    close = true;
                }
            }
        }
        let mut answer = vec![0u8; length];
        self.reader.read_exact(&mut answer)?;
        if close {
            *self = Connection::open(&self.address.clone())?;
        }
        Ok((status, String::from_utf8_lossy(&answer).into_owned()))
    }
}

/// Posts every body once over `CONNECTIONS` keep-alive connections.
fn load(base_url: &str, path: &str, token: Option<&str>, bodies: &Arc<Vec<String>>) -> LoadResult {
    let targets = [(
        path.to_string(),
        token.map(|token| format!("Bearer {token}")),
    )];
    load_spread(&[base_url.to_string()], &targets, bodies, Arc::new(|_| 0))
}

/// Which of the targets a body goes to, by its index.
pub(crate) type TargetOf = Arc<dyn Fn(usize) -> usize + Send + Sync>;

/// Posts every body once over `CONNECTIONS` keep-alive connections, connection `n` to
/// `base_urls[n % len]`: body `i` to the path and authorization of `targets[target_of(i)]`.
pub(crate) fn load_spread(
    base_urls: &[String],
    targets: &[(String, Option<String>)],
    bodies: &Arc<Vec<String>>,
    target_of: TargetOf,
) -> LoadResult {
    let next = Arc::new(AtomicUsize::new(0));
    let targets = Arc::new(targets.to_vec());
    let started = Instant::now();
    let threads: Vec<_> = (0..CONNECTIONS)
        .map(|n| {
            let address = base_urls[n % base_urls.len()]
                .trim_start_matches("http://")
                .to_string();
            let (next, bodies, targets, target_of) = (
                next.clone(),
                bodies.clone(),
                targets.clone(),
                target_of.clone(),
            );
            std::thread::spawn(move || {
                let mut latencies = Vec::new();
                let (mut accepted, mut failed) = (0, 0);
                let mut last = Instant::now();
                let mut connection = match Connection::open(&address) {
                    Ok(connection) => connection,
                    Err(error) => {
                        eprintln!("  cannot connect: {error}");
                        return (latencies, accepted, bodies.len(), last);
                    }
                };
                loop {
                    let index = next.fetch_add(1, Ordering::Relaxed);
                    let Some(body) = bodies.get(index) else { break };
                    let Some((path, authorization)) = targets.get(target_of(index)) else {
                        failed += 1;
                        continue;
                    };
                    let sent = Instant::now();
                    match connection.post(path, authorization.as_deref(), body) {
                        Ok((202, _)) => {
                            last = Instant::now();
                            latencies.push(last - sent);
                            accepted += 1;
                        }
                        Ok((status, text)) => {
                            if failed == 0 {
                                eprintln!("  unexpected {status}: {text}");
                            }
                            failed += 1;
                        }
                        Err(error) => {
                            if failed == 0 {
                                eprintln!("  request failed: {error}");
                            }
                            failed += 1;
                            match Connection::open(&address) {
                                Ok(fresh) => connection = fresh,
                                Err(_) => break,
                            }
                        }
                    }
                }
                (latencies, accepted, failed, last)
            })
        })
        .collect();
    let mut result = LoadResult {
        accepted: 0,
        failed: 0,
        elapsed: Duration::ZERO,
        latencies: Vec::new(),
        last_accept: started,
    };
    for thread in threads {
        if let Ok((latencies, accepted, failed, last)) = thread.join() {
            result.latencies.extend(latencies);
            result.accepted += accepted;
            result.failed += failed;
            result.last_accept = result.last_accept.max(last);
        }
    }
    result.elapsed = result.last_accept - started;
    result.latencies.sort_unstable();
    result
}

/// Reads the child's stdout until it prints its address; returns the lines read.
pub(crate) fn wait_for_listen(child: &mut Child, marker: &str) -> Result<Vec<String>, String> {
    let stdout = child.stdout.take().ok_or("no stdout")?;
    let mut reader = BufReader::new(stdout);
    let mut lines = Vec::new();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).map_err(|e| e.to_string())? == 0 {
            return Err(format!(
                "the process ended before printing {marker:?}: {lines:?}"
            ));
        }
        let done = line.contains(marker);
        lines.push(line.trim_end().to_string());
        if done {
            // Keep draining so the child never blocks on a full pipe.
            std::thread::spawn(move || for _ in reader.lines() {});
            return Ok(lines);
        }
    }
}

pub(crate) fn value_after(lines: &[String], label: &str) -> Option<String> {
    lines.iter().find_map(|line| {
        line.trim()
            .strip_prefix(label)
            .map(|rest| rest.trim().to_string())
    })
}

pub(crate) fn peak_memory_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
}

/// CPU time (user + system) a process has used so far, from `/proc/PID/stat` (Linux's
/// USER_HZ is 100 on every architecture it runs on).
pub(crate) fn cpu_seconds(pid: u32) -> Option<f64> {
    cpu_seconds_of(&format!("/proc/{pid}/stat"))
}

/// CPU time (user + system) the PostgreSQL backends serving `database_url`'s database have used
/// so far (the server runs on this machine; a pool's backends live as long as the pool). `None`
/// for another database or when psql cannot tell.
pub(crate) fn postgres_cpu_seconds(database_url: &str) -> Option<f64> {
    let (_, name) = database_url.strip_prefix("postgres")?.rsplit_once('/')?;
    let admin = std::env::var("MERCER_TEST_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".to_string());
    let query = format!("SELECT pid FROM pg_stat_activity WHERE datname = '{name}'");
    let output = Command::new("psql")
        .args([admin.as_str(), "-Atc", &query])
        .output()
        .ok()?;
    let pids = String::from_utf8_lossy(&output.stdout);
    Some(
        pids.lines()
            .filter_map(|pid| cpu_seconds(pid.trim().parse().ok()?))
            .sum(),
    )
}

/// User + system seconds from a `/proc/…/stat` file (a process's or a thread's).
fn cpu_seconds_of(stat_path: &str) -> Option<f64> {
    let stat = std::fs::read_to_string(stat_path).ok()?;
    // Fields after the parenthesised command name; utime and stime are the 12th and 13th.
    let mut fields = stat.rsplit_once(") ")?.1.split(' ').skip(11);
    let user: u64 = fields.next()?.parse().ok()?;
    let system: u64 = fields.next()?.parse().ok()?;
    Some((user + system) as f64 / 100.0)
}

/// CPU time (user + system) used so far by each of a process's threads, summed by thread name
/// (actix's workers share one), busiest first.
pub(crate) fn cpu_seconds_by_thread(pid: u32) -> Vec<(String, f64)> {
    let mut by_name: Vec<(String, f64)> = Vec::new();
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return by_name;
    };
    for task in tasks.flatten() {
        let Ok(tid) = task.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let name = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        let name = name
            .trim()
            .split('|')
            .next()
            .unwrap_or_default()
            .to_string();
        let Some(seconds) = cpu_seconds_of(&format!("/proc/{pid}/task/{tid}/stat")) else {
            continue;
        };
        match by_name.iter_mut().find(|(known, _)| *known == name) {
            Some((_, total)) => *total += seconds,
            None => by_name.push((name, seconds)),
        }
    }
    by_name.sort_by(|a, b| b.1.total_cmp(&a.1));
    by_name
}

/// Microseconds of a process's CPU per request over a load, when both readings exist.
fn cpu_micros_per_request(before: Option<f64>, after: Option<f64>, requests: usize) -> String {
    match (before, after) {
        (Some(before), Some(after)) if requests > 0 => {
            format!("{:.1} µs", (after - before) * 1e6 / requests as f64)
        }
        _ => "?".to_string(),
    }
}

pub(crate) struct Mercer {
    pub(crate) child: Child,
    pub(crate) base_url: String,
    /// The demo shop and token, printed on the first start of an empty database.
    pub(crate) shop: String,
    pub(crate) token: String,
    pub(crate) database_url: String,
}

impl Drop for Mercer {
    fn drop(&mut self) {
        // SIGINT: mercer stops gracefully, and perf (when profiling) writes its data out.
        let _ = Command::new("kill")
            .args(["-INT", &self.child.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub(crate) fn start_mercer(
    binary: &str,
    database_url: &str,
    serve_args: &[&str],
) -> Result<Mercer, String> {
    // MERCER_BENCH_PROFILE=FILE runs mercer under `perf record`, for finding where time goes.
    let mut command = match std::env::var("MERCER_BENCH_PROFILE") {
        Ok(file) => {
            let mut perf = Command::new("perf");
            // One file per process started, numbered in order of start.
            static STARTED: AtomicUsize = AtomicUsize::new(0);
            let n = STARTED.fetch_add(1, Ordering::Relaxed);
            let output = format!("{file}.{}.{n}", std::process::id());
            perf.args(["record", "-F", "499", "-g", "-o", &output, "--", binary]);
            perf
        }
        Err(_) => Command::new(binary),
    };
    let mut child = command
        .args([
            "--database-url",
            database_url,
            "--log-level",
            "warn",
            "serve",
            "--bind",
            "127.0.0.1:0",
        ])
        .args(serve_args)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| format!("cannot start {binary}: {e}"))?;
    let lines = wait_for_listen(&mut child, "Mercer listening on")?;
    let base_url = value_after(&lines, "Mercer listening on")
        .and_then(|rest| rest.split_whitespace().next().map(str::to_string))
        .ok_or("no address")?;
    let shop = value_after(&lines, "shop_identifier").unwrap_or_default();
    let token = value_after(&lines, "API token").unwrap_or_default();
    Ok(Mercer {
        child,
        base_url,
        shop,
        token,
        database_url: database_url.to_string(),
    })
}

pub(crate) fn pending(binary: &str, database_url: &str) -> Option<u64> {
    let output = Command::new(binary)
        .args([
            "--database-url",
            database_url,
            "--log-level",
            "error",
            "events",
            "pending",
        ])
        .output()
        .ok()?;
    String::from_utf8_lossy(&output.stdout).trim().parse().ok()
}

fn directory_check(mercer: &Mercer) -> Result<String, String> {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let url = format!(
        "{}/customers/v2/shops/{}/customers?limit=1",
        mercer.base_url, mercer.shop
    );
    let mut response = agent
        .get(&url)
        .header("Authorization", &format!("Bearer {}", mercer.token))
        .call()
        .map_err(|e| e.to_string())?;
    let body: Value = serde_json::from_str(
        &response
            .body_mut()
            .read_to_string()
            .map_err(|e| e.to_string())?,
    )
    .map_err(|e| e.to_string())?;
    let total = body["pagination"]["total"].as_u64().unwrap_or(0);
    let sample = format!(
        "{}/customers/v2/shops/{}/customers/pid/bench-004242",
        mercer.base_url, mercer.shop
    );
    let mut response = agent
        .get(&sample)
        .header("Authorization", &format!("Bearer {}", mercer.token))
        .call()
        .map_err(|e| e.to_string())?;
    let customer: Value = serde_json::from_str(
        &response
            .body_mut()
            .read_to_string()
            .map_err(|e| e.to_string())?,
    )
    .map_err(|e| e.to_string())?;
    let email = customer["customer"]["email"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    if total != CUSTOMERS as u64 || email != "customer004242.v5@bench.example.test" {
        return Err(format!(
            "wrong final state: {total} customers, sample email {email:?}"
        ));
    }
    Ok(format!(
        "{total} customers, every one at its newest version (sample checked)"
    ))
}

fn run_backend(
    binary: &str,
    name: &str,
    database_url: &str,
    bodies: &Arc<Vec<String>>,
    floors: &mut [Floor],
) -> Result<(), String> {
    let floors_before: Vec<f64> = floors.iter().map(|floor| floor.rate).collect();
    let mercer = start_mercer(binary, database_url, &[])?;
    let path = format!(
        "/customers/v1/shops/{}/platforms/custom/webhooks/customers/saved",
        mercer.shop
    );
    let cpu_before = cpu_seconds(mercer.child.id());
    let threads_before = cpu_seconds_by_thread(mercer.child.id());
    let result = load(&mercer.base_url, &path, Some(&mercer.token), bodies);
    let applied_at = loop {
        match pending(binary, &mercer.database_url) {
            Some(0) => break Instant::now(),
            Some(_) => std::thread::sleep(Duration::from_millis(20)),
            None => return Err("cannot read the queue".to_string()),
        }
        if result.last_accept.elapsed() > Duration::from_secs(600) {
            return Err("events still pending after 10 minutes".to_string());
        }
    };
    let drain = applied_at.saturating_duration_since(result.last_accept);
    let cpu = cpu_micros_per_request(cpu_before, cpu_seconds(mercer.child.id()), result.accepted);
    let mut spent: Vec<(String, f64)> = cpu_seconds_by_thread(mercer.child.id())
        .into_iter()
        .map(|(name, seconds)| {
            let before = threads_before
                .iter()
                .find(|(known, _)| *known == name)
                .map_or(0.0, |(_, before)| *before);
            (name, seconds - before)
        })
        .filter(|(_, seconds)| *seconds >= 0.01)
        .collect();
    spent.sort_by(|a, b| b.1.total_cmp(&a.1));
    let threads: Vec<String> = spent
        .into_iter()
        .map(|(name, seconds)| {
            format!(
                "{name} {:.1}",
                seconds * 1e6 / result.accepted.max(1) as f64
            )
        })
        .collect();
    let memory = peak_memory_kib(mercer.child.id()).map_or("?".to_string(), |kib| {
        format!("{:.0} MiB", kib as f64 / 1024.0)
    });
    let check = directory_check(&mercer)?;
    drop(mercer);
    // The machine's speed drifts from run to run: the share is taken against each floor
    // measured just before and just after this load.
    let shares: Vec<String> = floors
        .iter_mut()
        .zip(floors_before)
        .map(|(floor, before)| {
            let after = floor.measure(bodies, &format!("after {name}"));
            let rate = (before + after) / 2.0;
            format!(
                "{:.0}% of {} ({rate:.0} requests/s)",
                100.0 * result.rate() / rate,
                floor.name
            )
        })
        .collect();
    println!("{name}:");
    println!(
        "  accepted        {} events ({} failed) in {:.2} s",
        result.accepted,
        result.failed,
        result.elapsed.as_secs_f64()
    );
    println!("  throughput      {:.0} events/s", result.rate());
    println!(
        "  share           {} (each floor: the mean of its runs before and after)",
        shares.join(", ")
    );
    println!(
        "  accept latency  p50 {:.2} ms, p99 {:.2} ms",
        ms(result.percentile(0.5)),
        ms(result.percentile(0.99))
    );
    println!(
        "  all applied     {:.2} s after the last 202",
        drain.as_secs_f64()
    );
    println!("  mercer's CPU    {cpu} per event (user + system, until all applied)");
    println!(
        "  by thread       {} µs per event (same span)",
        threads.join(", ")
    );
    println!("  peak memory     {memory} (mercer's VmHWM)");
    println!("  final state     {check}");
    if result.failed > 0 {
        return Err(format!("{} events were refused", result.failed));
    }
    Ok(())
}

pub(crate) fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1000.0
}

/// The floor: the same load against a bare actix handler (`xtask bench-floor`) in a process
/// of its own, measured before the first backend and after each.
struct Floor {
    child: Child,
    url: String,
    /// Its short name in the shares ("the floor", "the handoff floor") and what it is.
    name: &'static str,
    what: &'static str,
    /// Requests/s of the latest measurement.
    rate: f64,
}

impl Floor {
    fn start(xtask: &str, handoff: bool) -> Result<Floor, String> {
        let mut command = Command::new(xtask);
        command.arg("bench-floor");
        if handoff {
            command.arg("--handoff");
        }
        let (name, what) = if handoff {
            (
                "the handoff floor",
                "the same handler, answering after a round trip to another thread",
            )
        } else {
            ("the floor", "bare actix handler answering 202")
        };
        let mut child = command
            .stdout(Stdio::piped())
            .spawn()
            .map_err(|e| e.to_string())?;
        let lines = wait_for_listen(&mut child, "Floor listening on")?;
        let url = value_after(&lines, "Floor listening on").unwrap_or_default();
        Ok(Floor {
            child,
            url,
            name,
            what,
            rate: 0.0,
        })
    }

    /// Runs the load against the floor, prints its figures and returns its requests/s.
    fn measure(&mut self, bodies: &Arc<Vec<String>>, when: &str) -> f64 {
        // A backend's run leaves dirty pages that the kernel writes back meanwhile: flush
        // them first, so the floor is not measured against that.
        let _ = Command::new("sync").status();
        let cpu_before = cpu_seconds(self.child.id());
        let result = load(&self.url, "/customers/saved", None, bodies);
        let cpu = cpu_micros_per_request(cpu_before, cpu_seconds(self.child.id()), result.accepted);
        println!("{} ({}), {when}:", self.name, self.what);
        println!(
            "  throughput      {:.0} requests/s, p50 {:.2} ms, p99 {:.2} ms",
            result.rate(),
            ms(result.percentile(0.5)),
            ms(result.percentile(0.99))
        );
        println!("  server's CPU    {cpu} per request (user + system)");
        self.rate = result.rate();
        self.rate
    }
}

impl Drop for Floor {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Mean time for a token to go from one thread to another and back over channels: what a
/// hand-off between an HTTP worker and the writer costs on this machine when the other thread
/// sleeps (on virtual machines it can cost more than the work handed off).
fn wake_round_trip_micros() -> f64 {
    const TRIPS: u32 = 2_000;
    let (to_echo, echo_in) = std::sync::mpsc::channel::<u32>();
    let (echo_out, from_echo) = std::sync::mpsc::channel::<u32>();
    let echo = std::thread::spawn(move || {
        while let Ok(token) = echo_in.recv() {
            if echo_out.send(token).is_err() {
                break;
            }
        }
    });
    let started = Instant::now();
    for trip in 0..TRIPS {
        if to_echo.send(trip).is_err() || from_echo.recv().is_err() {
            break;
        }
    }
    let elapsed = started.elapsed();
    drop(to_echo);
    let _ = echo.join();
    elapsed.as_secs_f64() * 1e6 / f64::from(TRIPS)
}

/// `xtask bench-floor [--handoff]`: a bare actix handler answering 202 to every POST, with
/// mercer's workers. With `--handoff` the handler first passes each request to one other thread
/// and answers once that thread has replied, which it does at once: the shape of mercer's ingest
/// (HTTP workers must not block, one writer thread stores) with no work done, so the cost of
/// the shape alone shows.
pub fn floor_server(handoff: bool) -> Result<(), String> {
    use actix_web::{App, HttpResponse, HttpServer, web};
    type Reply = tokio::sync::oneshot::Sender<()>;
    let (jobs, queue) = std::sync::mpsc::channel::<Reply>();
    if handoff {
        // Takes whatever is queued and replies to all of it, as mercer's writer takes a batch.
        std::thread::spawn(move || {
            while let Ok(first) = queue.recv() {
                let _ = first.send(());
                while let Ok(next) = queue.try_recv() {
                    let _ = next.send(());
                }
            }
        });
    }
    actix_web::rt::System::new().block_on(async {
        let mut server = HttpServer::new(move || {
            let jobs = jobs.clone();
            App::new().default_service(web::to(move |_body: web::Bytes| {
                let jobs = jobs.clone();
                async move {
                    if handoff {
                        let (reply, answer) = tokio::sync::oneshot::channel();
                        if jobs.send(reply).is_err() || answer.await.is_err() {
                            return HttpResponse::InternalServerError().finish();
                        }
                    }
                    HttpResponse::Accepted().finish()
                }
            }))
        });
        // The worker count mercer is given, if any (mercer reads the same variable).
        if let Some(workers) = std::env::var("MERCER_WORKERS")
            .ok()
            .and_then(|n| n.parse::<usize>().ok())
        {
            server = server.workers(workers);
        }
        let server = server.bind("127.0.0.1:0").map_err(|e| e.to_string())?;
        let address = server
            .addrs()
            .first()
            .map(|a| a.to_string())
            .unwrap_or_default();
        println!("Floor listening on http://{address}");
        let _ = std::io::stdout().flush();
        server.run().await.map_err(|e| e.to_string())
    })
}

pub(crate) fn postgres_database() -> Result<Option<String>, String> {
    let admin = std::env::var("MERCER_TEST_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".to_string());
    let name = format!("mercer_bench_{}", std::process::id());
    let status = Command::new("psql")
        .args([admin.as_str(), "-qc", &format!("CREATE DATABASE {name}")])
        .status();
    match status {
        Ok(status) if status.success() => {
            // MERCER_BENCH_PG_SETTINGS="log_min_duration_statement=0;…": settings of the bench's
            // database, such as every statement and its time in the server's log, for finding
            // what a request costs.
            let settings = std::env::var("MERCER_BENCH_PG_SETTINGS").unwrap_or_default();
            for (setting, value) in settings.split(';').filter_map(|s| s.split_once('=')) {
                let alter = format!("ALTER DATABASE {name} SET {setting} = '{value}'");
                let _ = Command::new("psql")
                    .args([admin.as_str(), "-qc", &alter])
                    .status();
            }
            let base = admin
                .rsplit_once('/')
                .map_or(admin.as_str(), |(base, _)| base);
            Ok(Some(format!("{base}/{name}")))
        }
        _ => Ok(None),
    }
}

pub(crate) fn drop_postgres_database(url: &str) {
    let admin = std::env::var("MERCER_TEST_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".to_string());
    if let Some((_, name)) = url.rsplit_once('/') {
        let _ = Command::new("psql")
            .args([
                admin.as_str(),
                "-qc",
                &format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"),
            ])
            .status();
    }
}

/// Runs `run_backend(label, database_url)` on a SQLite file in a temporary folder named after
/// `bench`, then on a PostgreSQL database of its own when one can be made (dropped after).
/// `MERCER_BENCH_DATABASE=sqlite` or `=postgres` runs one of the two, for a quicker look.
pub(crate) fn on_both_databases(
    bench: &str,
    run_backend: impl Fn(&str, &str) -> Result<(), String>,
) -> Result<(), String> {
    let dir = std::env::temp_dir().join(format!("mercer-bench-{bench}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let sqlite = format!("sqlite://{}", dir.join("bench.db").display());
    let only = std::env::var("MERCER_BENCH_DATABASE").unwrap_or_default();
    if only != "postgres" {
        let result = run_backend("SQLite", &sqlite);
        let _ = std::fs::remove_dir_all(&dir);
        result?;
    }
    if only == "sqlite" {
        println!("PostgreSQL: NOT RUN (MERCER_BENCH_DATABASE=sqlite)");
        return Ok(());
    }
    match postgres_database()? {
        Some(url) => {
            let result = run_backend("PostgreSQL", &url);
            drop_postgres_database(&url);
            result
        }
        None => {
            println!("PostgreSQL: NOT RUN (psql could not create a database)");
            Ok(())
        }
    }
}

/// The release half of `cargo xtask bench ingest`.
pub fn ingest(binary: &str, xtask: &str) -> Result<(), String> {
    let bodies = Arc::new(events());
    let bytes: usize = bodies.iter().map(String::len).sum();
    println!(
        "ingest benchmark: {} Customer Saved events ({} customers x {VERSIONS} versions, 1 in 5 out of order), {} bytes each on average, {CONNECTIONS} keep-alive connections",
        bodies.len(),
        CUSTOMERS,
        bytes / bodies.len()
    );

    println!(
        "thread wake-up round trip on this machine: {:.1} µs (two threads passing a token back and forth)",
        wake_round_trip_micros()
    );
    let mut floors = [Floor::start(xtask, false)?, Floor::start(xtask, true)?];
    for floor in &mut floors {
        floor.measure(&bodies, "before the backends");
    }

    let dir = std::env::temp_dir().join(format!("mercer-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let sqlite = format!("sqlite://{}", dir.join("bench.db").display());
    let sqlite_result = run_backend(binary, "SQLite", &sqlite, &bodies, &mut floors);
    let _ = std::fs::remove_dir_all(&dir);
    sqlite_result?;

    match postgres_database()? {
        Some(url) => {
            let result = run_backend(binary, "PostgreSQL", &url, &bodies, &mut floors);
            drop_postgres_database(&url);
            result?;
        }
        None => println!("PostgreSQL: NOT RUN (psql could not create a database)"),
    }
    Ok(())
}
