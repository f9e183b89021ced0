//! `cargo xtask bench console`: the operator console's pages over a busy shop (docs/benchmarks.md).
//!
//! On each database: the demo shop with two checkout webhook endpoints and 100,000 webhook
//! messages over the last 28 hours (92% delivered, 6% failed, 2% pending and not yet due), each
//! sent one with its attempt, seeded with set-based SQL (`sqlite3`, `psql`). A staff member signs
//! in; then each page is fetched on one keep-alive connection, one request at a time: the
//! overview, the messages' first page, a page 50,000 messages deep, 14 hours back, filtered by
//! topic and by status, a message, the jobs, connector, checkouts and audit pages. p50 and p99
//! of each are printed against the target, 50 ms; a target missed is reported, never a failure.

use std::time::{Duration, Instant};

use crate::bench::{Mercer, ms, start_mercer};
use crate::bench_subscriptions::{Database, Dialect, on_each_database};

const MESSAGES: i64 = 100_000;
const TARGET_MS: f64 = 50.0;
const WARM_UP: usize = 5;
const SAMPLES: usize = 40;
const EMAIL: &str = "bench@console.test";
const PASSWORD: &str = "a long bench password";

/// The seed: two endpoints, the messages (one second apart, the newest now), an attempt for each
/// message sent, and the shop's activity counts of those 28 hours.
fn seed_script(dialect: Dialect, shop_id: i64, now_micros: i64) -> String {
    let endpoints = format!(
        "INSERT INTO webhook_endpoints (public_id, shop_id, kind, topic, callback_url, created_at, updated_at) VALUES \
         ('bench0000000000000000000000000001', {shop_id}, 'checkout', 'order/created', 'http://127.0.0.1:9/hook', {now_micros}, {now_micros}), \
         ('bench0000000000000000000000000002', {shop_id}, 'checkout', 'order/processed', 'http://127.0.0.1:9/hook', {now_micros}, {now_micros});\n"
    );
    let endpoint = |n: i64| {
        format!(
            "(SELECT id FROM webhook_endpoints WHERE public_id = 'bench000000000000000000000000000{n}')"
        )
    };
    let (numbers, message_id) = match dialect {
        Dialect::Sqlite => (
            format!(
                "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < {MESSAGES})"
            ),
            "printf('msg_bench%023d', i)".to_string(),
        ),
        Dialect::Postgres => (
            format!("WITH n(i) AS (SELECT generate_series(1, {MESSAGES})::bigint)"),
            "'msg_bench' || lpad(i::text, 23, '0')".to_string(),
        ),
    };
    // Far in the future: the pending ones are never due while the bench runs.
    let later = 4_102_444_800_000_000_i64;
    let messages = format!(
        "{numbers} INSERT INTO webhook_messages (message_id, shop_id, endpoint_id, topic, payload, status, attempts, next_attempt_at, created_at, updated_at, delivered_at) \
         SELECT {message_id}, {shop_id}, \
         CASE WHEN i % 2 = 0 THEN {e1} ELSE {e2} END, \
         CASE WHEN i % 2 = 0 THEN 'order/created' ELSE 'order/processed' END, \
         '{{\"bench\":true}}', \
         CASE WHEN i % 50 = 0 THEN 'pending' WHEN i % 16 = 0 THEN 'failed' ELSE 'delivered' END, \
         CASE WHEN i % 50 = 0 THEN 0 ELSE 1 END, \
         CASE WHEN i % 50 = 0 THEN {later} ELSE {now_micros} END, \
         {now_micros} - ({MESSAGES} - i) * 1000000, {now_micros}, \
         CASE WHEN i % 50 = 0 OR i % 16 = 0 THEN NULL ELSE {now_micros} - ({MESSAGES} - i) * 1000000 END \
         FROM n;\n",
        e1 = endpoint(1),
        e2 = endpoint(2),
    );
    let attempts = format!(
        "INSERT INTO webhook_attempts (message_id, attempted_at, status, latency_us, response) \
         SELECT id, created_at, CASE WHEN status = 'failed' THEN 500 ELSE 200 END, 1500, 'ok' \
         FROM webhook_messages WHERE shop_id = {shop_id} AND status <> 'pending';\n"
    );
    // The activity counts the work would have added: the deliveries' as the messages ended,
    // and, for a shop as busy in every other way, as many of each other activity.
    let activity: String = [
        ("webhooks.sent", "status <> 'pending'"),
        ("webhooks.delivered", "status = 'delivered'"),
        ("webhooks.failed", "status = 'failed'"),
        ("events.received", "1 = 1"),
        ("events.applied", "1 = 1"),
        ("events.set_aside", "status = 'failed'"),
        ("scheduler.orders_placed", "status = 'delivered'"),
        ("checkouts.processed", "status = 'delivered'"),
        ("checkouts.abandoned", "status = 'failed'"),
    ]
    .iter()
    .map(|(name, which)| {
        format!(
            "INSERT INTO shop_activity (shop_id, bucket, activity, count) \
             SELECT {shop_id}, (created_at / 300000000) * 300000000, '{name}', COUNT(*) \
             FROM webhook_messages WHERE shop_id = {shop_id} AND {which} \
             GROUP BY (created_at / 300000000) * 300000000;\n"
        )
    })
    .collect();
    let analyze = match dialect {
        Dialect::Sqlite => "ANALYZE;\n",
        Dialect::Postgres => {
            "ANALYZE webhook_endpoints, webhook_messages, webhook_attempts, shop_activity;\n"
        }
    };
    format!("BEGIN;\n{endpoints}{messages}{attempts}{activity}COMMIT;\n{analyze}")
}

/// An agent that keeps its connection and follows no redirect.
fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .max_redirects(0)
        .timeout_global(Some(Duration::from_secs(30)))
        .build()
        .into()
}

fn value_of(html: &str, name: &str) -> Option<String> {
    html.split(&format!("name=\"{name}\" value=\""))
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .map(str::to_string)
}

fn cookie_of(response: &ureq::http::Response<ureq::Body>, name: &str) -> Option<String> {
    response
        .headers()
        .get_all("set-cookie")
        .iter()
        .filter_map(|value| value.to_str().ok())
        .find(|value| value.starts_with(&format!("{name}=")))
        .and_then(|value| value.split(';').next())
        .map(str::to_string)
}

/// Signs the bench's staff member in; the session cookie.
fn sign_in(agent: &ureq::Agent, mercer: &Mercer) -> Result<String, String> {
    let base = &mercer.base_url;
    let mut form = agent
        .get(format!("{base}/console/sign-in"))
        .call()
        .map_err(|e| e.to_string())?;
    let pre = cookie_of(&form, "mercer_console_sign_in").ok_or("no sign-in cookie")?;
    let html = form
        .body_mut()
        .read_to_string()
        .map_err(|e| e.to_string())?;
    let csrf = value_of(&html, "csrf").ok_or("no CSRF token on the sign-in form")?;
    let answer = agent
        .post(format!("{base}/console/sign-in"))
        .header("Cookie", &pre)
        .send_form([
            ("csrf", csrf.as_str()),
            ("shop", mercer.shop.as_str()),
            ("email", EMAIL),
            ("password", PASSWORD),
        ])
        .map_err(|e| e.to_string())?;
    cookie_of(&answer, "mercer_console")
        .ok_or_else(|| format!("signing in answered {}", answer.status()))
}

/// p50 and p99 of `path`'s page, in milliseconds.
fn time_page(
    agent: &ureq::Agent,
    base: &str,
    cookie: &str,
    path: &str,
) -> Result<(f64, f64), String> {
    let mut latencies = Vec::with_capacity(SAMPLES);
    for n in 0..WARM_UP + SAMPLES {
        let started = Instant::now();
        let mut answer = agent
            .get(format!("{base}{path}"))
            .header("Cookie", cookie)
            .call()
            .map_err(|e| format!("{path}: {e}"))?;
        let status = answer.status().as_u16();
        answer
            .body_mut()
            .read_to_string()
            .map_err(|e| format!("{path}: {e}"))?;
        let took = started.elapsed();
        if status != 200 {
            return Err(format!("{path} answered {status}"));
        }
        if n >= WARM_UP {
            latencies.push(took);
        }
    }
    latencies.sort();
    let at = |p: f64| ms(latencies[((latencies.len() as f64 - 1.0) * p).round() as usize]);
    Ok((at(0.50), at(0.99)))
}

fn run_backend(binary: &str, name: &str, database: &Database) -> Result<(), String> {
    let url = database.url();
    let mercer = start_mercer(binary, &url, &[])?;
    let staff = std::process::Command::new(binary)
        .args([
            "--database-url",
            &url,
            "--log-level",
            "error",
            "staff",
            "create",
        ])
        .args(["--shop", &mercer.shop, "--email", EMAIL, "--password-stdin"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn()
        .and_then(|mut child| {
            use std::io::Write;
            if let Some(mut stdin) = child.stdin.take() {
                stdin.write_all(format!("{PASSWORD}\n").as_bytes())?;
            }
            child.wait()
        })
        .map_err(|e| e.to_string())?;
    if !staff.success() {
        return Err("mercer staff create failed".to_string());
    }
    let shop_id = database.integer(&format!(
        "SELECT id FROM shops WHERE identifier = '{}'",
        mercer.shop
    ))?;
    let now_micros = i64::try_from(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_err(|e| e.to_string())?
            .as_micros(),
    )
    .map_err(|e| e.to_string())?;
    let seeding = Instant::now();
    database.run(&seed_script(database.dialect(), shop_id, now_micros))?;
    let deep = database.integer(&format!(
        "SELECT id FROM webhook_messages WHERE shop_id = {shop_id} ORDER BY id DESC LIMIT 1 OFFSET {}",
        MESSAGES / 2
    ))?;
    println!(
        "{name}: {MESSAGES} messages seeded in {:.1} s",
        seeding.elapsed().as_secs_f64()
    );
    // The Webhooks page jumped 14 hours back, as its form sends the time.
    let seconds = now_micros / 1_000_000 - 14 * 3600;
    let until = database.run(&match database.dialect() {
        Dialect::Sqlite => format!("SELECT strftime('%Y-%m-%dT%H:%M:%S', {seconds}, 'unixepoch');"),
        Dialect::Postgres => format!(
            "SELECT to_char(to_timestamp({seconds}) AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS');"
        ),
    })?;
    let agent = agent();
    let cookie = sign_in(&agent, &mercer)?;
    let pages = [
        ("overview", "/console".to_string()),
        ("messages, first page", "/console/webhooks".to_string()),
        (
            "messages, 50,000 deep",
            format!("/console/webhooks?before={deep}"),
        ),
        (
            "messages 14 hours back",
            format!("/console/webhooks?until={}", until.replace(':', "%3A")),
        ),
        (
            "messages of a topic",
            "/console/webhooks?topic=order%2Fcreated".to_string(),
        ),
        (
            "failed messages",
            "/console/webhooks?status=failed".to_string(),
        ),
        (
            "pending messages (2%)",
            "/console/webhooks?status=pending".to_string(),
        ),
        (
            "a message",
            format!("/console/webhooks/messages/msg_bench{:023}", MESSAGES / 2),
        ),
        ("jobs", "/console/jobs".to_string()),
        ("connector", "/console/connector".to_string()),
        ("checkouts", "/console/checkouts".to_string()),
        ("audit log", "/console/audit".to_string()),
    ];
    println!(
        "  {:<24} {:>9} {:>9}   target p99 < {TARGET_MS} ms",
        "page", "p50 ms", "p99 ms"
    );
    let mut missed = Vec::new();
    for (label, path) in &pages {
        let (p50, p99) = time_page(&agent, &mercer.base_url, &cookie, path)?;
        let verdict = if p99 < TARGET_MS { "met" } else { "MISSED" };
        if p99 >= TARGET_MS {
            missed.push(*label);
        }
        println!("  {label:<24} {p50:>9.2} {p99:>9.2}   {verdict}");
    }
    if missed.is_empty() {
        println!("  every page met the target");
    } else {
        println!("  target missed by: {}", missed.join(", "));
    }
    Ok(())
}

/// The release half of `cargo xtask bench console`.
pub fn console(binary: &str) -> Result<(), String> {
    println!(
        "console benchmark: the operator console's pages over {MESSAGES} webhook messages of one shop; one keep-alive connection, one request at a time, {SAMPLES} samples a page"
    );
    on_each_database("console", |label, database| {
        run_backend(binary, label, database)
    })
}
