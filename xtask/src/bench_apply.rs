//! `cargo xtask bench ingest --processes 1,2,4`: the apply work of several `mercer` processes
//! on one PostgreSQL database.
//!
//! The ingest benchmark's 50,000 Customer Saved events, their 10,000 customers spread over 64
//! shops, posted by 32 keep-alive connections spread over N processes, on a new database for
//! each N. Every process's applier takes the queue's partitions it can lock. For each N it
//! prints the events applied per second (from the first post until the queue is empty), each
//! process's share of the apply work (its `mercer_events_applied_total`), and checks that every
//! customer ends at its newest version.

use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::bench::{
    CUSTOMERS, Mercer, drop_postgres_database, events, load_spread, pending, postgres_database,
    start_mercer,
};

/// Shops the customers are spread over: as many as the queue has partitions.
const SHOPS: usize = 64;

/// The release half of `cargo xtask bench ingest --processes N,M,…`.
pub fn processes(binary: &str, counts: &[usize]) -> Result<(), String> {
    let bodies = Arc::new(events());
    println!(
        "apply scale-out benchmark: {} Customer Saved events of {CUSTOMERS} customers in {SHOPS} shops, on one PostgreSQL database, for {} process(es) in turn",
        bodies.len(),
        counts
            .iter()
            .map(usize::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    );
    let mut rates: Vec<(usize, f64)> = Vec::new();
    for &count in counts {
        let url = postgres_database()?
            .ok_or("PostgreSQL is required: psql could not create a database")?;
        let result = run(binary, &url, count, &bodies);
        drop_postgres_database(&url);
        rates.push((count, result?));
    }
    if let Some(&(_, alone)) = rates.iter().find(|(count, _)| *count == 1) {
        for (count, rate) in &rates {
            println!(
                "{count} process(es): {rate:.0} events applied/s, {:.2}x one process",
                rate / alone
            );
        }
    }
    Ok(())
}

/// A new shop made with the CLI, and an API token of it.
pub(crate) fn new_shop(binary: &str, url: &str, n: usize) -> Result<(String, String), String> {
    let cli = |args: &[&str]| -> Result<Vec<String>, String> {
        let output = Command::new(binary)
            .args(["--database-url", url, "--log-level", "error"])
            .args(args)
            .output()
            .map_err(|e| format!("cannot run {binary}: {e}"))?;
        if !output.status.success() {
            return Err(format!(
                "mercer {} failed: {}",
                args.join(" "),
                String::from_utf8_lossy(&output.stderr)
            ));
        }
        Ok(String::from_utf8_lossy(&output.stdout)
            .lines()
            .map(str::to_string)
            .collect())
    };
    let domain = format!("shop{n}.bench.test");
    let shop = cli(&["shop", "create", "--domain", &domain])?
        .into_iter()
        .next()
        .ok_or("shop create printed nothing")?;
    let token = cli(&["token", "create", "--shop", &shop, "--scope", "all"])?
        .into_iter()
        .next()
        .ok_or("token create printed nothing")?;
    Ok((shop, token))
}

/// The events this process applied, from its `/metrics`.
fn applied_by(mercer: &Mercer) -> Result<f64, String> {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let text = agent
        .get(&format!("{}/metrics", mercer.base_url))
        .call()
        .map_err(|e| e.to_string())?
        .body_mut()
        .read_to_string()
        .map_err(|e| e.to_string())?;
    Ok(text
        .lines()
        .find_map(|line| line.strip_prefix("mercer_events_applied_total "))
        .and_then(|value| value.trim().parse().ok())
        .unwrap_or(0.0))
}

/// How many customers hold their newest version (`.v5` in the email), by psql.
fn customers_at_newest(url: &str) -> Result<(u64, u64), String> {
    let output = Command::new("psql")
        .args([
            url,
            "-tAc",
            "SELECT count(*), count(*) FILTER (WHERE email LIKE '%.v5@%') FROM platform_customers",
        ])
        .output()
        .map_err(|e| format!("cannot run psql: {e}"))?;
    let text = String::from_utf8_lossy(&output.stdout);
    let mut counts = text.trim().split('|').map(|n| n.parse::<u64>());
    match (counts.next(), counts.next()) {
        (Some(Ok(all)), Some(Ok(newest))) => Ok((all, newest)),
        _ => Err(format!("psql answered {text:?}")),
    }
}

/// One run with `count` processes; answers the events applied per second.
fn run(binary: &str, url: &str, count: usize, bodies: &Arc<Vec<String>>) -> Result<f64, String> {
    // The first process migrates the database; the shops are made before the others start.
    let mut mercers = vec![start_mercer(binary, url, &[])?];
    let shops: Vec<(String, String)> = (0..SHOPS)
        .map(|n| new_shop(binary, url, n))
        .collect::<Result<_, _>>()?;
    for _ in 1..count {
        mercers.push(start_mercer(binary, url, &[])?);
    }
    let addresses: Vec<String> = mercers.iter().map(|m| m.base_url.clone()).collect();
    let targets: Vec<(String, Option<String>)> = shops
        .iter()
        .map(|(shop, token)| {
            (
                format!("/customers/v1/shops/{shop}/platforms/custom/webhooks/customers/saved"),
                Some(format!("Bearer {token}")),
            )
        })
        .collect();
    let started = Instant::now();
    let result = load_spread(
        &addresses,
        &targets,
        bodies,
        Arc::new(|index| (index % CUSTOMERS) % SHOPS),
    );
    loop {
        match pending(binary, url) {
            Some(0) => break,
            Some(_) => std::thread::sleep(Duration::from_millis(20)),
            None => return Err("cannot read the queue".to_string()),
        }
        if started.elapsed() > Duration::from_secs(900) {
            return Err("events still pending after 15 minutes".to_string());
        }
    }
    let elapsed = started.elapsed();
    let applied: Vec<f64> = mercers.iter().map(applied_by).collect::<Result<_, _>>()?;
    let total: f64 = applied.iter().sum();
    let (customers, newest) = customers_at_newest(url)?;
    let rate = result.accepted as f64 / elapsed.as_secs_f64();
    println!("{count} process(es):");
    println!(
        "  accepted        {} events ({} failed) at {:.0} events/s",
        result.accepted,
        result.failed,
        result.rate()
    );
    println!(
        "  all applied     {:.2} s after the first post: {rate:.0} events applied/s",
        elapsed.as_secs_f64()
    );
    for (n, events) in applied.iter().enumerate() {
        println!(
            "  process {}: {:.0}% of the apply work ({events:.0} events)",
            n + 1,
            100.0 * events / total.max(1.0)
        );
    }
    println!("  final state     {customers} customers, {newest} at their newest version");
    if result.failed > 0 {
        return Err(format!("{} events were refused", result.failed));
    }
    if customers != CUSTOMERS as u64 || newest != customers {
        return Err("not every customer is at its newest version".to_string());
    }
    Ok(rate)
}
