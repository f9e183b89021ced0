//! `cargo xtask bench analytics`: subscription analytics over a shop of a million subscriptions
//! (docs/benchmarks.md).
//!
//! On each database: the demo shop gets 1,000,000 subscriptions (10,000 customers, two line
//! items each), seeded with set-based SQL as `bench subscriptions` seeds them, so the tables are
//! the size they would be. Its analytics counters are those of 1,000,000 subscription lives over
//! the two years before today, made up here (a creation day, a billing rule, an order total,
//! maybe a cancellation with a reason, a pause and a resume, the scheduler's orders at the rule's
//! pace with one attempt in 30 failing) and counted by the domain's own rules
//! (`subscriptions::analytics::changes`, `monthly_value`, the rules' `average_period_days`, and
//! `Tally`, which merges additions as a unit of work does), then written as rows. Then `GET
//! /analytics` of the last year, of the last 30 days and of the longest period (3,660 days) on
//! one keep-alive connection, one request at a time: p50 and max of each against the target,
//! 1 s. A target missed is reported, never a failure.

use std::time::{Duration, Instant};

use mercer_domain::kernel::ids::ShopId;
use mercer_domain::subscriptions::analytics::{
    Metric, Standing, Tally, changes, day_date, day_number, monthly_value,
};
use mercer_domain::subscriptions::recurrence::{OrderSchedule, ShopZone};
use mercer_domain::subscriptions::resources::{Cents, SubscriptionStatus};

use crate::bench::{ms, start_mercer};
use crate::bench_subscriptions::{Database, Seed, on_each_database, quoted, seed_script};

const SUBSCRIPTIONS: i64 = 1_000_000;
const CUSTOMERS: i64 = 10_000;
/// How far back the subscriptions' lives begin.
const HISTORY_DAYS: i64 = 730;
const TARGET_MS: f64 = 1_000.0;
const WARM_UP: usize = 3;
const SAMPLES: usize = 20;
const RULES: [&str; 5] = [
    "FREQ=WEEKLY",
    "FREQ=WEEKLY;INTERVAL=2",
    "FREQ=MONTHLY",
    "FREQ=MONTHLY;INTERVAL=3",
    "FREQ=DAILY;INTERVAL=10",
];
const REASONS: [Option<&str>; 5] = [
    Some("too_expensive"),
    Some("too_much_product"),
    Some("moved"),
    Some("other"),
    None,
];

/// A small deterministic generator (xorshift64*): the same counters on every run.
struct Random(u64);

impl Random {
    fn below(&mut self, bound: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) % bound.max(1)
    }

    fn range(&mut self, low: i64, high: i64) -> i64 {
        low + i64::try_from(self.below(u64::try_from(high - low).unwrap_or(1))).unwrap_or(0)
    }
}

/// Each rule's average period in days (numerator, denominator), as the domain reads it.
fn periods() -> Result<Vec<(u128, u128)>, String> {
    RULES
        .iter()
        .map(|rule| {
            OrderSchedule::parse(
                &format!("DTSTART:20240101T090000Z\nRRULE:{rule}"),
                ShopZone::UTC,
                "order_rrule",
            )
            .map(|schedule| schedule.average_period_days())
            .map_err(|problem| problem.message)
        })
        .collect()
}

/// Adds what one write does to the tally: the domain's rule for the change from `before` to
/// `after` on `day`.
fn count(
    tally: &mut Tally,
    shop: ShopId,
    day: i64,
    before: Option<&Standing>,
    after: &Standing,
    reason: Option<&str>,
) {
    for (metric, value) in changes(before, after, reason) {
        tally.add(shop, day, metric, value);
    }
}

/// The counters of [`SUBSCRIPTIONS`] made-up subscription lives ending `today` (a day number).
fn counters(shop: ShopId, today: i64) -> Result<(Tally, u64), String> {
    let periods = periods()?;
    let mut random = Random(0x9e37_79b9_7f4a_7c15);
    let mut tally = Tally::default();
    let mut orders = 0u64;
    for _ in 0..SUBSCRIPTIONS {
        let rule = usize::try_from(random.below(RULES.len() as u64)).unwrap_or(0);
        let (numerator, denominator) = periods[rule];
        let total = Cents(random.range(1_000, 9_000));
        let mrr = monthly_value(total, periods[rule])
            .ok_or("an MRR overflows")?
            .0;
        let standing = |status| Standing { status, mrr };
        let created = today - random.range(0, HISTORY_DAYS);
        count(
            &mut tally,
            shop,
            created,
            None,
            &standing(SubscriptionStatus::Active),
            None,
        );
        // One in five is cancelled, one in ten paused for a while, before today.
        let cancelled_on = (random.below(5) == 0).then(|| random.range(created, today + 1));
        if random.below(10) == 0 {
            let paused = random.range(created, today + 1);
            let resumed = paused + random.range(7, 60);
            let active = standing(SubscriptionStatus::Active);
            let pause = standing(SubscriptionStatus::Paused);
            count(&mut tally, shop, paused, Some(&active), &pause, None);
            if resumed <= today && cancelled_on.is_none_or(|day| resumed < day) {
                count(&mut tally, shop, resumed, Some(&pause), &active, None);
            }
        }
        let end = cancelled_on.unwrap_or(today + 1);
        if let Some(day) = cancelled_on {
            let reason = REASONS[usize::try_from(random.below(REASONS.len() as u64)).unwrap_or(0)];
            let before = standing(SubscriptionStatus::Active);
            let after = standing(SubscriptionStatus::Inactive);
            count(&mut tally, shop, day, Some(&before), &after, reason);
        }
        // The scheduler's orders at the rule's pace (whole days), one attempt in 30 failing
        // before the one that is placed.
        let step = i64::try_from(numerator / denominator).unwrap_or(7).max(1);
        let mut day = created;
        while day < end.min(today + 1) {
            if random.below(30) == 0 {
                tally.add(shop, day, Metric::OrdersFailed, 1);
            }
            tally.add(shop, day, Metric::OrdersPlaced, 1);
            tally.add(shop, day, Metric::Revenue, total.0);
            orders += 1;
            day += step;
        }
    }
    Ok((tally, orders))
}

/// The counters as INSERT statements of a few hundred rows each.
fn counter_script(tally: Tally) -> (String, usize) {
    let rows: Vec<String> = tally
        .counts()
        .into_iter()
        .map(|c| {
            format!(
                "({}, {}, {}, {})",
                c.shop_id.0,
                c.day,
                quoted(&c.metric.name()),
                c.value
            )
        })
        .collect();
    let mut script = String::from("BEGIN;\n");
    for chunk in rows.chunks(500) {
        script.push_str("INSERT INTO shop_analytics (shop_id, day, metric, value) VALUES ");
        script.push_str(&chunk.join(", "));
        script.push_str(";\n");
    }
    script.push_str("COMMIT;\nANALYZE shop_analytics;\n");
    (script, rows.len())
}

fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(60)))
        .build()
        .into()
}

/// p50 and max of `url`, in milliseconds; the first answer's body.
fn time(agent: &ureq::Agent, url: &str, token: &str) -> Result<(f64, f64, String), String> {
    let mut latencies = Vec::with_capacity(SAMPLES);
    let mut first = String::new();
    for n in 0..WARM_UP + SAMPLES {
        let started = Instant::now();
        let mut answer = agent
            .get(url)
            .header("Authorization", &format!("Bearer {token}"))
            .call()
            .map_err(|e| format!("{url}: {e}"))?;
        let status = answer.status().as_u16();
        let body = answer
            .body_mut()
            .read_to_string()
            .map_err(|e| format!("{url}: {e}"))?;
        let took = started.elapsed();
        if status != 200 {
            return Err(format!("{url} answered {status}: {body}"));
        }
        if n == 0 {
            first = body;
        }
        if n >= WARM_UP {
            latencies.push(took);
        }
    }
    latencies.sort();
    let p50 = ms(latencies[latencies.len() / 2]);
    let max = ms(*latencies.last().ok_or("no sample")?);
    Ok((p50, max, first))
}

fn run_backend(binary: &str, name: &str, database: &Database) -> Result<(), String> {
    let first = start_mercer(binary, &database.url(), &[])?;
    let (shop, token) = (first.shop.clone(), first.token.clone());
    drop(first);
    if shop.is_empty() || token.is_empty() {
        return Err("the first start printed no demo shop and token".to_string());
    }
    let shop_id = database.integer(&format!(
        "SELECT id FROM shops WHERE identifier = {}",
        quoted(&shop)
    ))?;
    let started = Instant::now();
    let seed = Seed {
        customers: CUSTOMERS,
        subscriptions: SUBSCRIPTIONS,
        next_order: "(1767225600 + (i * 7919 % 1000003) * 31536000 / 1000003) * 1000000"
            .to_string(),
        status: "CASE i % 20 WHEN 0 THEN 'inactive' WHEN 1 THEN 'paused' ELSE 'active' END"
            .to_string(),
    };
    database.run(&seed_script(database.dialect(), shop_id, &seed))?;
    let seeded = started.elapsed();
    // The demo shop's days are UTC's unless its zone says otherwise; today by the system clock.
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_err(|e| e.to_string())?
        .as_secs();
    let today = i64::try_from(now / 86_400).map_err(|e| e.to_string())?;
    let counting = Instant::now();
    let (tally, orders) = counters(ShopId(shop_id), today)?;
    let counted = counting.elapsed();
    let (script, rows) = counter_script(tally);
    database.run(&script)?;
    println!("{name}:");
    println!(
        "  seeded    {SUBSCRIPTIONS} subscriptions with {} line items in {:.0} s; counters of {SUBSCRIPTIONS} lives ({orders} orders) over {HISTORY_DAYS} days counted in {:.1} s: {rows} day rows",
        SUBSCRIPTIONS * 2,
        seeded.as_secs_f64(),
        counted.as_secs_f64()
    );

    let mercer = start_mercer(binary, &database.url(), &[])?;
    let day = |back: i64| day_date(day_number(day_date(today)) - back).to_string();
    let base = format!(
        "{}/subscriptions/v1/shops/{shop}/analytics",
        mercer.base_url
    );
    let agent = agent();
    println!(
        "  {:<34} {:>9} {:>9}   target < {TARGET_MS} ms",
        "request", "p50 ms", "max ms"
    );
    let mut missed = Vec::new();
    for (label, back) in [
        ("GET /analytics, the last year", 364),
        ("GET /analytics, the last 30 days", 29),
        ("GET /analytics, 3,660 days", 3_659),
    ] {
        let url = format!("{base}?from={}&to={}", day(back), day(0));
        let (p50, max, body) = time(&agent, &url, &token)?;
        let verdict = if max < TARGET_MS { "met" } else { "MISSED" };
        if max >= TARGET_MS {
            missed.push(label);
        }
        println!("  {label:<34} {p50:>9.2} {max:>9.2}   {verdict}");
        if back == 364 {
            println!("    {body}");
        }
    }
    drop(mercer);
    if missed.is_empty() {
        println!("  every request met the target");
    } else {
        println!("  target missed by: {}", missed.join(", "));
    }
    Ok(())
}

/// The release half of `cargo xtask bench analytics`.
pub fn analytics(binary: &str) -> Result<(), String> {
    println!(
        "analytics benchmark: GET /analytics over a shop of {SUBSCRIPTIONS} subscriptions with {HISTORY_DAYS} days of counters; one keep-alive connection, one request at a time, {SAMPLES} samples each"
    );
    on_each_database("analytics", |label, database| {
        run_backend(binary, label, database)
    })
}
