//! `cargo xtask bench budgets`: request budgets keep one shop's flood from another shop
//! (docs/rate-limits.md, docs/benchmarks.md).
//!
//! On each database, one `mercer serve --rate-limit-per-s 100` (every token: 100 requests a
//! second, burst 200) and two shops, each with its own token:
//!
//! 1. Shop B alone: `GET …/shop` paced at [`B_RATE`] a second for [`RUN`], each request timed
//!    from when it was due (so a stall counts for every request it holds up).
//! 2. The same again while shop A sends ten times its budget (1,000 requests a second, paced,
//!    over [`A_CONNECTIONS`] connections); nearly all of A's are refused with 429.
//!
//! Prints B's p50 and p99 in both runs, the ratio of the two p99s and A's counts. Target (issue
//! 47): the ratio at most 1.5.

use std::time::{Duration, Instant};

use crate::bench::{Connection, Mercer, ms, on_both_databases, start_mercer};
use crate::bench_apply::new_shop;
use crate::bench_subscriptions::percentile;

/// Each token's budget, requests a second.
const BUDGET: u32 = 100;
/// Shop B's steady rate: half its budget.
const B_RATE: u32 = 50;
/// Shop A's flood: ten times its budget.
const A_RATE: u32 = 10 * BUDGET;
const A_CONNECTIONS: u32 = 4;
const RUN: Duration = Duration::from_secs(10);
const TARGET_RATIO: f64 = 1.5;

pub fn budgets(binary: &str) -> Result<(), String> {
    println!(
        "Request budgets: every token {BUDGET}/s (burst {}); shop B at {B_RATE}/s for {} s, \
         alone, then while shop A sends {A_RATE}/s",
        2 * BUDGET,
        RUN.as_secs()
    );
    on_both_databases("budgets", |label, url| run(binary, label, url))
}

/// The latencies of a paced run, sorted, and the count of each status answered.
type Paced = (Vec<Duration>, Vec<(u16, usize)>);

/// Sends `GET path` paced at `rate` a second over one connection until `until`: the latency of
/// each answer from when it was due, and the count of each status.
fn paced(
    address: &str,
    path: &str,
    authorization: &str,
    rate: u32,
    until: Instant,
) -> Result<Paced, String> {
    let mut connection = Connection::open(address).map_err(|e| e.to_string())?;
    let interval = Duration::from_secs_f64(1.0 / f64::from(rate));
    let mut due = Instant::now();
    let (mut latencies, mut statuses) = (Vec::new(), Vec::<(u16, usize)>::new());
    while due < until {
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        let (status, text) = connection
            .request("GET", path, Some(authorization), None)
            .map_err(|e| format!("GET {path}: {e}"))?;
        latencies.push(due.elapsed());
        match statuses.iter_mut().find(|(s, _)| *s == status) {
            Some((_, count)) => *count += 1,
            None => statuses.push((status, 1)),
        }
        if status != 200 && status != 429 {
            return Err(format!("GET {path} answered {status}: {text}"));
        }
        due += interval;
    }
    latencies.sort();
    Ok((latencies, statuses))
}

fn count(statuses: &[(u16, usize)], status: u16) -> usize {
    statuses
        .iter()
        .filter(|(s, _)| *s == status)
        .map(|(_, n)| n)
        .sum()
}

fn run(binary: &str, label: &str, url: &str) -> Result<(), String> {
    let budget = BUDGET.to_string();
    let mercer: Mercer = start_mercer(binary, url, &["--rate-limit-per-s", &budget])?;
    let (shop_b, token_b) = new_shop(binary, url, 2)?;
    let address = mercer.base_url.trim_start_matches("http://").to_string();
    let path = |shop: &str| format!("/subscriptions/v1/shops/{shop}/shop");
    let (path_a, path_b) = (path(&mercer.shop), path(&shop_b));
    let (auth_a, auth_b) = (
        format!("Bearer {}", mercer.token),
        format!("Bearer {token_b}"),
    );
    // Warm up both shops' caches.
    paced(
        &address,
        &path_b,
        &auth_b,
        B_RATE,
        Instant::now() + Duration::from_secs(1),
    )?;
    let alone = paced(&address, &path_b, &auth_b, B_RATE, Instant::now() + RUN)?;
    std::thread::sleep(Duration::from_secs(2));
    let until = Instant::now() + RUN;
    let (flooded, flood) = std::thread::scope(|scope| {
        let floods: Vec<_> = (0..A_CONNECTIONS)
            .map(|_| {
                let (address, path_a, auth_a) = (&address, &path_a, &auth_a);
                scope.spawn(move || paced(address, path_a, auth_a, A_RATE / A_CONNECTIONS, until))
            })
            .collect();
        let flooded = paced(&address, &path_b, &auth_b, B_RATE, until);
        let mut flood = Vec::new();
        for handle in floods {
            match handle.join() {
                Ok(Ok((_, statuses))) => flood.extend(statuses),
                Ok(Err(error)) => return (Err(error), flood),
                Err(_) => return (Err("a flooding thread panicked".to_string()), flood),
            }
        }
        (flooded, flood)
    });
    let flooded = flooded?;
    let p = |latencies: &[Duration], q: f64| ms(percentile(latencies, q));
    let (alone_p99, flooded_p99) = (p(&alone.0, 0.99), p(&flooded.0, 0.99));
    let ratio = flooded_p99 / alone_p99.max(0.001);
    let (sent, refused) = (count(&flood, 200) + count(&flood, 429), count(&flood, 429));
    println!(
        "{label}: shop B alone: {} requests, p50 {:.2} ms, p99 {alone_p99:.2} ms, max {:.2} ms, \
         {} refused",
        alone.0.len(),
        p(&alone.0, 0.5),
        p(&alone.0, 1.0),
        count(&alone.1, 429)
    );
    println!(
        "{label}: shop B while shop A floods: {} requests, p50 {:.2} ms, p99 {flooded_p99:.2} \
         ms, max {:.2} ms, {} refused; shop A sent {sent} ({:.0}/s), {refused} refused with 429, \
         {} allowed",
        flooded.0.len(),
        p(&flooded.0, 0.5),
        p(&flooded.0, 1.0),
        count(&flooded.1, 429),
        sent as f64 / RUN.as_secs_f64(),
        count(&flood, 200)
    );
    println!(
        "{label}: p99 ratio {ratio:.2} (target <= {TARGET_RATIO}: {})",
        if ratio <= TARGET_RATIO {
            "met"
        } else {
            "MISSED"
        }
    );
    Ok(())
}
