//! `cargo xtask bench dispatch`: the webhook delivery benchmark of docs/benchmarks.md.
//!
//! On each database: 20,000 messages queued through the test-delivery route, on 32 connections,
//! by a process that does not deliver (so the queue is full) — the enqueue route's accepted
//! messages per second at saturation — then delivered by a second process to a local receiver
//! that answers 200 at once — deliveries per second at saturation; then 5,000 messages offered
//! at 1,000 per second (on 4 connections) through the same route — enqueue-to-delivery latency
//! and the route's 202 (p50, p99); and peak memory. The delivery floor (a bare HTTP client
//! posting to the same receiver on as many connections as
//! Mercer has delivery workers, before and after) frames the saturation as a share.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::bench::{
    Connection, Mercer, cpu_seconds, cpu_seconds_by_thread, ms, on_both_databases, peak_memory_kib,
    start_mercer,
};

const SATURATION_MESSAGES: usize = 20_000;
const PACED_MESSAGES: usize = 5_000;
const PACED_RATE: f64 = 1_000.0;
/// Connections the paced messages are offered on, each at its share of the rate.
const PACED_SENDERS: usize = 4;
/// Connections the saturation's messages are enqueued on, each sending its next request as soon
/// as its last is answered: enough that the route, not the clients, sets the rate (the rate no
/// longer rises with more on this machine; docs/benchmarks.md).
/// `MERCER_BENCH_ENQUEUE_CLIENTS=N` tries another number.
fn enqueue_clients() -> usize {
    std::env::var("MERCER_BENCH_ENQUEUE_CLIENTS")
        .ok()
        .and_then(|text| text.parse().ok())
        .filter(|&clients| clients > 0)
        .unwrap_or(32)
}
const SECRET: &str = "bench-integration-secret";

/// A receiver that answers 200 at once and notes when each `webhook-id` arrived (the
/// scheduler benchmark's too).
#[derive(Clone)]
pub(crate) struct Receiver {
    pub(crate) url: String,
    arrivals: Arc<Mutex<HashMap<String, Instant>>>,
}

fn serve_connection(stream: TcpStream, arrivals: Arc<Mutex<HashMap<String, Instant>>>) {
    let _ = stream.set_nodelay(true);
    let Ok(mut writer) = stream.try_clone() else {
        return;
    };
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    loop {
        line.clear();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let (mut length, mut id) = (0usize, None);
        loop {
            line.clear();
            if reader.read_line(&mut line).unwrap_or(0) == 0 {
                return;
            }
            let header = line.trim_end();
            if header.is_empty() {
                break;
            }
            if let Some((name, value)) = header.split_once(':') {
                if name.eq_ignore_ascii_case("content-length") {
                    length = value.trim().parse().unwrap_or(0);
                } else if name.eq_ignore_ascii_case("webhook-id") {
                    id = Some(value.trim().to_string());
                }
            }
        }
        let mut body = vec![0u8; length];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        if let Some(id) = id {
            arrivals
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .entry(id)
                .or_insert_with(Instant::now);
        }
        if writer
            .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
            .is_err()
        {
            return;
        }
    }
}

impl Receiver {
    pub(crate) fn start() -> Result<Receiver, String> {
        let listener = TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
        let url = format!(
            "http://{}/hook",
            listener.local_addr().map_err(|e| e.to_string())?
        );
        let arrivals = Arc::new(Mutex::new(HashMap::new()));
        let shared = arrivals.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().map_while(Result::ok) {
                let arrivals = shared.clone();
                std::thread::spawn(move || serve_connection(stream, arrivals));
            }
        });
        Ok(Receiver { url, arrivals })
    }

    pub(crate) fn count(&self) -> usize {
        self.arrivals
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .len()
    }

    pub(crate) fn take(&self) -> HashMap<String, Instant> {
        std::mem::take(&mut *self.arrivals.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

fn connect(mercer: &Mercer) -> Result<Connection, String> {
    Connection::open(mercer.base_url.trim_start_matches("http://")).map_err(|e| e.to_string())
}

/// Configures the integration secret and registers a checkout webhook to the receiver.
fn register(mercer: &Mercer, receiver: &Receiver) -> Result<String, String> {
    let mut connection = connect(mercer)?;
    let authorization = format!("Bearer {}", mercer.token);
    let config = format!("/checkout/shop/{}/integration/config", mercer.shop);
    connection
        .post(
            &config,
            Some(&authorization),
            &format!("{{\"shared_secret\":\"{SECRET}\"}}"),
        )
        .map_err(|e| e.to_string())?;
    let body = format!(
        "{{\"webhook_topic_id\":2,\"callback_url\":\"{}\"}}",
        receiver.url
    );
    let (status, text) = connection
        .post(
            &format!("/checkout/shop/{}/webhooks", mercer.shop),
            Some(&authorization),
            &body,
        )
        .map_err(|e| e.to_string())?;
    if status != 201 {
        return Err(format!("creating the webhook answered {status}: {text}"));
    }
    let created: Value = serde_json::from_str(&text).map_err(|e| e.to_string())?;
    created["data"]["id"]
        .as_str()
        .map(str::to_string)
        .ok_or_else(|| "no webhook id".to_string())
}

fn test_path(shop: &str, webhook: &str) -> String {
    format!("/checkout/shop/{shop}/webhooks/{webhook}/test")
}

fn message_id(text: &str) -> Option<String> {
    serde_json::from_str::<Value>(text).ok()?["data"]["message_id"]
        .as_str()
        .map(str::to_string)
}

/// Enqueues `count` messages over `clients` connections as fast as they go; returns the rate:
/// the route's accepted messages per second at saturation.
fn enqueue_all(
    mercer: &Mercer,
    shop: &str,
    token: &str,
    webhook: &str,
    count: usize,
    clients: usize,
) -> Result<f64, String> {
    let next = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let threads: Vec<_> = (0..clients)
        .map(|_| {
            let next = next.clone();
            let (path, authorization) = (test_path(shop, webhook), format!("Bearer {token}"));
            let mut connection = connect(mercer);
            std::thread::spawn(move || -> Result<(), String> {
                let connection = connection.as_mut().map_err(|e| e.clone())?;
                while next.fetch_add(1, Ordering::Relaxed) < count {
                    let (status, text) = connection
                        .post(&path, Some(&authorization), "")
                        .map_err(|e| e.to_string())?;
                    if status != 202 {
                        return Err(format!("the test route answered {status}: {text}"));
                    }
                }
                Ok(())
            })
        })
        .collect();
    for thread in threads {
        thread
            .join()
            .map_err(|_| "an enqueuing thread panicked".to_string())??;
    }
    Ok(count as f64 / started.elapsed().as_secs_f64())
}

fn wait_for(receiver: &Receiver, count: usize, limit: Duration) -> Result<(), String> {
    let deadline = Instant::now() + limit;
    while receiver.count() < count {
        if Instant::now() > deadline {
            return Err(format!(
                "only {} of {count} messages arrived within {limit:?}",
                receiver.count()
            ));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    Ok(())
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted
        .get(((sorted.len() as f64 - 1.0) * p).round() as usize)
        .copied()
        .unwrap_or_default()
}

/// Mercer's delivery workers (`serve`'s default `--webhook-workers`).
const DELIVERY_WORKERS: usize = 4;

/// The delivery floor: the same receiver fed `SATURATION_MESSAGES` posts by a bare HTTP client
/// with as many keep-alive connections as Mercer has delivery workers, bodies of a test
/// delivery's size. Answers requests per second.
fn delivery_floor(receiver: &Receiver) -> Result<f64, String> {
    let address = receiver
        .url
        .trim_start_matches("http://")
        .split('/')
        .next()
        .unwrap_or_default()
        .to_string();
    let body = format!(
        "{{\"topic\":\"order/processed\",\"data\":\"{}\"}}",
        "x".repeat(900)
    );
    let next = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let threads: Vec<_> = (0..DELIVERY_WORKERS)
        .map(|_| {
            let (next, address, body) = (next.clone(), address.clone(), body.clone());
            std::thread::spawn(move || -> Result<(), String> {
                let mut connection = Connection::open(&address).map_err(|e| e.to_string())?;
                while next.fetch_add(1, Ordering::Relaxed) < SATURATION_MESSAGES {
                    let (status, _) = connection
                        .post("/hook", None, &body)
                        .map_err(|e| e.to_string())?;
                    if status != 200 {
                        return Err(format!("the receiver answered {status}"));
                    }
                }
                Ok(())
            })
        })
        .collect();
    for thread in threads {
        thread
            .join()
            .map_err(|_| "a floor thread panicked".to_string())??;
    }
    Ok(SATURATION_MESSAGES as f64 / started.elapsed().as_secs_f64())
}

fn run_backend(binary: &str, name: &str, database_url: &str) -> Result<(), String> {
    let receiver = Receiver::start()?;
    let floor_before = delivery_floor(&receiver)?;
    // A process that only enqueues: the queue fills without being drained.
    let enqueuer = start_mercer(
        binary,
        database_url,
        &["--allow-private-targets", "--webhook-workers", "0"],
    )?;
    let (shop, token) = (enqueuer.shop.clone(), enqueuer.token.clone());
    let webhook = register(&enqueuer, &receiver)?;
    let clients = enqueue_clients();
    let enqueue_rate = enqueue_all(
        &enqueuer,
        &shop,
        &token,
        &webhook,
        SATURATION_MESSAGES,
        clients,
    )?;
    drop(enqueuer);

    let dispatcher = start_mercer(binary, database_url, &["--allow-private-targets"])?;
    wait_for(&receiver, SATURATION_MESSAGES, Duration::from_secs(600))?;
    let arrivals: Vec<Instant> = receiver.take().into_values().collect();
    let first = arrivals.iter().min().copied().unwrap_or_else(Instant::now);
    let last = arrivals.iter().max().copied().unwrap_or_else(Instant::now);
    let saturation = SATURATION_MESSAGES as f64 / (last - first).as_secs_f64().max(1e-9);
    // CPU until the queue is delivered, start-up included (tens of milliseconds).
    let cpu_per_delivery = cpu_seconds(dispatcher.child.id()).map_or("?".to_string(), |seconds| {
        format!("{:.0} µs", seconds * 1e6 / SATURATION_MESSAGES as f64)
    });
    let mut by_thread = cpu_seconds_by_thread(dispatcher.child.id());
    by_thread.sort_by(|a, b| b.1.total_cmp(&a.1));
    let by_thread: Vec<String> = by_thread
        .iter()
        .filter(|(_, seconds)| *seconds >= 0.01)
        .map(|(name, seconds)| format!("{name} {:.0}", seconds * 1e6 / SATURATION_MESSAGES as f64))
        .collect();
    let floor = (floor_before + delivery_floor(&receiver)?) / 2.0;

    // Paced: PACED_RATE messages a second through the API, on PACED_SENDERS connections with
    // interleaved slots, each timed from its request to its arrival.
    let started = Instant::now();
    let senders: Vec<_> = (0..PACED_SENDERS)
        .map(|sender| {
            let connection = connect(&dispatcher);
            let (path, authorization) = (test_path(&shop, &webhook), format!("Bearer {token}"));
            std::thread::spawn(move || -> Result<Vec<Paced>, String> {
                let mut connection = connection?;
                let interval = Duration::from_secs_f64(1.0 / PACED_RATE);
                let mut sent = Vec::new();
                for n in (sender..PACED_MESSAGES).step_by(PACED_SENDERS) {
                    let slot = started + interval * n as u32;
                    if let Some(wait) = slot.checked_duration_since(Instant::now()) {
                        std::thread::sleep(wait);
                    }
                    let at = Instant::now();
                    let (status, text) = connection
                        .post(&path, Some(&authorization), "")
                        .map_err(|e| e.to_string())?;
                    if status != 202 {
                        return Err(format!("the test route answered {status}: {text}"));
                    }
                    sent.push(Paced {
                        message_id: message_id(&text).ok_or("no message id")?,
                        sent_at: at,
                        answered_in: at.elapsed(),
                    });
                }
                Ok(sent)
            })
        })
        .collect();
    let mut sent: Vec<Paced> = Vec::with_capacity(PACED_MESSAGES);
    for sender in senders {
        sent.extend(
            sender
                .join()
                .map_err(|_| "a paced sender panicked".to_string())??,
        );
    }
    let offered = PACED_MESSAGES as f64 / started.elapsed().as_secs_f64();
    wait_for(&receiver, PACED_MESSAGES, Duration::from_secs(120))?;
    let arrivals = receiver.take();
    let mut latencies: Vec<Duration> = sent
        .iter()
        .filter_map(|paced| {
            arrivals
                .get(&paced.message_id)
                .map(|arrived| arrived.saturating_duration_since(paced.sent_at))
        })
        .collect();
    latencies.sort_unstable();
    let mut answers: Vec<Duration> = sent.iter().map(|paced| paced.answered_in).collect();
    answers.sort_unstable();
    let memory = peak_memory_kib(dispatcher.child.id()).map_or("?".to_string(), |kib| {
        format!("{:.0} MiB", kib as f64 / 1024.0)
    });
    println!("{name}:");
    println!(
        "  enqueue route   {enqueue_rate:.0} accepted/s at saturation ({SATURATION_MESSAGES} messages through the test-delivery route, {clients} connections, nothing delivering)"
    );
    println!(
        "  saturation      {saturation:.0} deliveries/s ({SATURATION_MESSAGES} queued, {DELIVERY_WORKERS} workers)"
    );
    println!(
        "  mercer's CPU    {cpu_per_delivery} per delivery at saturation (by thread: {} µs)",
        by_thread.join(", ")
    );
    println!(
        "  share           {:.0}% of the delivery floor ({floor:.0} requests/s: a bare client on {DELIVERY_WORKERS} connections to the same receiver, mean of before and after)",
        100.0 * saturation / floor
    );
    println!(
        "  at {offered:.0}/s offered  enqueue-to-delivery p50 {:.1} ms, p99 {:.1} ms ({} of {PACED_MESSAGES} timed)",
        ms(percentile(&latencies, 0.5)),
        ms(percentile(&latencies, 0.99)),
        latencies.len()
    );
    println!(
        "                  of which the enqueue route's 202: p50 {:.1} ms, p99 {:.1} ms",
        ms(percentile(&answers, 0.5)),
        ms(percentile(&answers, 0.99)),
    );
    println!("  peak memory     {memory} (the delivering process's VmHWM)");
    drop(dispatcher);
    Ok(())
}

/// A paced message: its id, when its request was sent, and how long the route took to answer.
struct Paced {
    message_id: String,
    sent_at: Instant,
    answered_in: Duration,
}

/// The release half of `cargo xtask bench dispatch`.
pub fn dispatch(binary: &str) -> Result<(), String> {
    println!(
        "dispatch benchmark: a local receiver answering 200 at once; {SATURATION_MESSAGES} queued messages, then {PACED_MESSAGES} at {PACED_RATE:.0}/s"
    );
    on_both_databases("dispatch", |name, url| run_backend(binary, name, url))
}
