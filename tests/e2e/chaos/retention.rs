//! Soak of the webhook retention (not in CI: `cargo xtask chaos retention`): a server with a
//! retention of a few minutes, a receiver that takes everything, and messages of 16 KB enqueued
//! without pause for 10 minutes. Every 30 s it prints the messages, the attempts, the purged
//! messages and the webhook tables' size; it fails if, in the run's last third, the size is more
//! than 20% above what it was once the purge had run for a whole period (the first sample at
//! twice the retention: the first period fills the tables, the second brings the purge, and on
//! PostgreSQL the vacuum, to their steady state): the purge must keep up, and the space it frees
//! must be used again.
//!
//! What grows anyway: the purged messages' rows (their ids, topic, status and times, a few
//! hundred bytes each with their index entries), which is why the payloads are large here, as
//! subscription payloads with their orders are.
//!
//! The size: SQLite, the database's pages (`page_count * page_size`: freed pages are used again,
//! the file never shrinks); PostgreSQL, `pg_total_relation_size` of `webhook_messages` and
//! `webhook_attempts`, after a `VACUUM` of both before each sample. PostgreSQL only reuses the
//! space of deleted and updated rows once they are vacuumed, which autovacuum does in
//! production; the machines this runs on may have autovacuum off, so the scenario vacuums
//! itself, as autovacuum would.
//!
//! Knobs: `MERCER_CHAOS_SOAK_SECS` (600), `MERCER_CHAOS_RETENTION_SECS` (120),
//! `MERCER_CHAOS_SAMPLE_SECS` (30), `MERCER_CHAOS_RATE` (messages a second, 20).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use mercer_domain::Timestamp;
use mercer_domain::access::shop::ShopIdentifier;
use mercer_domain::ports::Database;
use mercer_domain::webhooks::enqueue_for_endpoint;
use mercer_tests::chaos::Figures;
use mercer_tests::receiver::Receiver;
use mercer_tests::{Backend, MercerServer, TestDatabase};
use serde_json::json;

use crate::webhooks::{create, shop};

/// Bytes of each message's payload (random hex: it does not compress away).
const PAYLOAD_BYTES: usize = 16 * 1024;

fn knob(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(default)
}

/// `len` hex characters from a xorshift seeded with `seed`.
fn filler(seed: u64, len: usize) -> String {
    let mut state = seed | 1;
    let mut text = String::with_capacity(len + 16);
    while text.len() < len {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        text.push_str(&format!("{state:016x}"));
    }
    text.truncate(len);
    text
}

/// One sample: seconds into the run, messages, attempts, purged messages, bytes.
#[derive(Debug, Clone, Copy)]
struct Sample {
    at: u64,
    messages: i64,
    attempts: i64,
    purged: i64,
    bytes: i64,
}

fn sample(database: &TestDatabase, at: u64) -> Sample {
    let bytes = match database.backend() {
        Backend::Sqlite => database.count(
            "SELECT page_count * page_size AS n FROM pragma_page_count(), pragma_page_size()",
        ),
        Backend::Postgres => {
            database.execute("VACUUM webhook_messages, webhook_attempts");
            database.count(
                "SELECT (pg_total_relation_size('webhook_messages') \
                 + pg_total_relation_size('webhook_attempts'))::BIGINT AS n",
            )
        }
    };
    Sample {
        at,
        messages: database.count("SELECT COUNT(*) AS n FROM webhook_messages"),
        attempts: database.count("SELECT COUNT(*) AS n FROM webhook_attempts"),
        purged: database
            .count("SELECT COUNT(*) AS n FROM webhook_messages WHERE purged_at IS NOT NULL"),
        bytes,
    }
}

fn soak(backend: Backend) {
    let soak_secs = knob("MERCER_CHAOS_SOAK_SECS", 600);
    let retention_secs = knob("MERCER_CHAOS_RETENTION_SECS", 120).max(1);
    let sample_secs = knob("MERCER_CHAOS_SAMPLE_SECS", 30).max(1);
    let rate = knob("MERCER_CHAOS_RATE", 20).max(1);
    assert!(
        soak_secs >= 3 * retention_secs,
        "the soak ({soak_secs} s) must last at least three times the retention ({retention_secs} s)"
    );
    let days = format!("{}", retention_secs as f64 / 86_400.0);
    let server = MercerServer::start_with(
        TestDatabase::create(backend),
        &["--allow-private-targets", "--webhook-retention-days", &days],
    );
    let shop = shop(&server);
    let receiver = Receiver::start();
    let webhook = create(&server, &shop, 1, &receiver.url);
    let store = server.database().open_store();
    let endpoint = store
        .read(|tx| {
            let shop = tx
                .shop_by_identifier(&ShopIdentifier::parse(&shop.id).unwrap())?
                .unwrap();
            Ok(tx.webhook_endpoint(shop.id, webhook["id"].as_str().unwrap())?)
        })
        .unwrap()
        .unwrap();

    let started = Instant::now();
    let deadline = started + Duration::from_secs(soak_secs);
    let (stop, enqueued) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicUsize::new(0)),
    );
    let enqueuer = {
        let (store, stop, enqueued) = (store.clone(), stop.clone(), enqueued.clone());
        std::thread::spawn(move || {
            let pause = Duration::from_micros(1_000_000 / rate);
            let mut n: u64 = 0;
            while !stop.load(Ordering::Relaxed) {
                n += 1;
                let payload = json!({ "n": n, "filler": filler(n, PAYLOAD_BYTES) });
                store
                    .write(|tx| enqueue_for_endpoint(tx, &endpoint, &payload, Timestamp::now()))
                    .unwrap();
                enqueued.fetch_add(1, Ordering::Relaxed);
                std::thread::sleep(pause);
            }
        })
    };

    let mut samples = Vec::new();
    eprintln!(
        "retention soak on {backend:?}: {soak_secs} s, retention {retention_secs} s, {rate} messages/s of {PAYLOAD_BYTES} bytes"
    );
    eprintln!("     s  enqueued  messages  attempts    purged      bytes");
    let mut next = started + Duration::from_secs(sample_secs);
    while next <= deadline {
        std::thread::sleep(next.saturating_duration_since(Instant::now()));
        let taken = sample(server.database(), next.duration_since(started).as_secs());
        eprintln!(
            "{:>6}  {:>8}  {:>8}  {:>8}  {:>8}  {:>9}",
            taken.at,
            enqueued.load(Ordering::Relaxed),
            taken.messages,
            taken.attempts,
            taken.purged,
            taken.bytes
        );
        samples.push(taken);
        next += Duration::from_secs(sample_secs);
    }
    stop.store(true, Ordering::Relaxed);
    enqueuer.join().unwrap();

    // On PostgreSQL the space the purge frees between two samples is used again only after the
    // next sample's VACUUM: the size settles one period later than on SQLite.
    let baseline = samples
        .iter()
        .find(|s| s.at >= 2 * retention_secs)
        .copied()
        .expect("a sample at twice the retention");
    let last_third: Vec<Sample> = samples
        .iter()
        .filter(|s| s.at * 3 >= soak_secs * 2)
        .copied()
        .collect();
    let peak = last_third.iter().map(|s| s.bytes).max().unwrap_or(0);
    let last = *samples.last().unwrap();
    let mut figures = Figures::new("retention_soak", backend);
    figures
        .set("seconds", soak_secs)
        .set("retention_s", retention_secs)
        .set("enqueued", enqueued.load(Ordering::Relaxed))
        .set("purged", last.purged)
        .set("attempts_left", last.attempts)
        .set("bytes_at_two_periods", baseline.bytes)
        .set("bytes_peak_last_third", peak)
        .set(
            "growth_pct",
            (peak - baseline.bytes) * 100 / baseline.bytes.max(1),
        );
    figures.report();
    assert!(last.purged > 0, "nothing was purged");
    // Attempts are deleted with their payloads: what is left is about one period's worth.
    let kept_at_most = i64::try_from((retention_secs + sample_secs * 2) * rate).unwrap_or(i64::MAX);
    assert!(
        last.attempts <= kept_at_most,
        "{} attempts left, more than a period's ({kept_at_most})",
        last.attempts
    );
    assert!(
        peak * 10 <= baseline.bytes * 12,
        "the webhook tables grew from {} bytes at twice the retention to {peak} in the last third (more than 20%)",
        baseline.bytes
    );
}

mod sqlite {
    #[test]
    #[ignore = "a soak of 10 minutes: cargo xtask chaos retention"]
    fn the_webhook_tables_stay_flat_under_retention() {
        super::soak(mercer_tests::Backend::Sqlite)
    }
}

mod postgres {
    #[test]
    #[ignore = "a soak of 10 minutes: cargo xtask chaos retention"]
    fn the_webhook_tables_stay_flat_under_retention() {
        super::soak(mercer_tests::Backend::Postgres)
    }
}
