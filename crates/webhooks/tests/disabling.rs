//! The disabling of an endpoint that only fails (docs/api-conventions.md: "5 days
//! of failures without a success"), through the dispatcher's own bookkeeping: `dispatch_batch`
//! with a test clock, a real loopback receiver, and a real database of either kind. The period
//! is hours on the command line, so only a clock of our own can cross it in a test.

#![allow(clippy::unwrap_used)] // test code: a panic is a failed assertion

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::atomic::{AtomicU16, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mercer_domain::Timestamp;
use mercer_domain::access::credentials::Secret;
use mercer_domain::access::shop::{ShopInput, create_shop};
use mercer_domain::kernel::time::Clock;
use mercer_domain::ports::Database;
use mercer_domain::webhooks::{
    MessageStatus, NewWebhookEndpoint, RetryPolicy, WebhookEndpoint, WebhookKind, WebhookMessage,
    enqueue_for_endpoint,
};
use mercer_store::testing::TestDatabase;
use mercer_store::{Backend, Store, backend_tests};
use mercer_webhooks::{BatchReport, DispatcherConfig, Sender, dispatch_batch};
use serde_json::json;

const HOUR: i64 = 3600;
const DAY: i64 = 24 * HOUR;

fn at(seconds: i64) -> Timestamp {
    Timestamp::from_micros(1_700_000_000_000_000).plus_seconds(seconds)
}

/// A clock the test moves by hand.
struct TestClock(Mutex<Timestamp>);

impl TestClock {
    fn set(&self, now: Timestamp) {
        *self.0.lock().unwrap() = now;
    }
}

impl Clock for TestClock {
    fn now(&self) -> Timestamp {
        *self.0.lock().unwrap()
    }
}

/// A loopback receiver answering every request with the status it is set to; counts requests.
struct Receiver {
    url: String,
    status: Arc<AtomicU16>,
    received: Arc<AtomicUsize>,
}

impl Receiver {
    fn start(status: u16) -> Receiver {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/hook", listener.local_addr().unwrap());
        let (answer, received) = (
            Arc::new(AtomicU16::new(status)),
            Arc::new(AtomicUsize::new(0)),
        );
        let (answering, counting) = (answer.clone(), received.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming().map_while(Result::ok) {
                let mut reader = BufReader::new(&stream);
                let (mut line, mut length) = (String::new(), 0);
                while reader.read_line(&mut line).is_ok_and(|n| n > 2) {
                    if let Some((name, value)) = line.split_once(':')
                        && name.eq_ignore_ascii_case("content-length")
                    {
                        length = value.trim().parse().unwrap_or(0);
                    }
                    line.clear();
                }
                let mut body = vec![0; length];
                let _ = reader.read_exact(&mut body);
                counting.fetch_add(1, Ordering::SeqCst);
                let status = answering.load(Ordering::SeqCst);
                let _ = (&stream).write_all(
                    format!(
                        "HTTP/1.1 {status} Status\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                    )
                    .as_bytes(),
                );
            }
        });
        Receiver {
            url,
            status: answer,
            received,
        }
    }

    fn answer(&self, status: u16) {
        self.status.store(status, Ordering::SeqCst);
    }

    fn received(&self) -> usize {
        self.received.load(Ordering::SeqCst)
    }
}

/// One claim at a time, so a disabling leaves the endpoint's other messages pending in the
/// database, where only the disabling's own bookkeeping can stop them. Retries every hour, far
/// past the 5 days, so no message gives up on its own before the endpoint is disabled.
fn config() -> DispatcherConfig {
    let mut delays = vec![Duration::ZERO];
    delays.extend([Duration::from_secs(3600); 200]);
    DispatcherConfig {
        batch: 1,
        address_guard: mercer_outbound::PrivateAddressGuard::ALLOW_PRIVATE,
        timeout: Duration::from_secs(5),
        policy: RetryPolicy {
            delays,
            jitter: 0.0,
            ..RetryPolicy::default()
        },
        ..DispatcherConfig::default()
    }
}

struct Setup {
    _db: TestDatabase,
    store: Store,
    endpoint: WebhookEndpoint,
    receiver: Receiver,
    sender: Sender,
    config: DispatcherConfig,
    clock: TestClock,
}

fn setup(backend: Backend, status: u16) -> Setup {
    setup_with(backend, status, config())
}

fn setup_with(backend: Backend, status: u16, config: DispatcherConfig) -> Setup {
    let (db, store) = TestDatabase::migrated(backend);
    let receiver = Receiver::start(status);
    let shop = store
        .write(|tx| {
            create_shop(
                tx,
                ShopInput {
                    shop_domain: "a.shop.test".into(),
                    ..ShopInput::default()
                },
                at(0),
            )
        })
        .unwrap();
    // A subscription endpoint signs with its own secret: no shop setting to configure.
    let new = NewWebhookEndpoint {
        shop_id: shop.id,
        kind: WebhookKind::Subscription,
        topic: "subscription_created".into(),
        callback_url: receiver.url.clone(),
        secret: Some(Secret::new("endpoint-secret")),
        created_at: at(0),
    };
    let endpoint = store
        .write(|tx| Ok(tx.insert_webhook_endpoint(&new)?))
        .unwrap();
    Setup {
        _db: db,
        store,
        endpoint,
        receiver,
        sender: Sender::new(&config),
        config,
        clock: TestClock(Mutex::new(at(0))),
    }
}

impl Setup {
    fn enqueue(&self, now: Timestamp) -> String {
        self.store
            .write(|tx| enqueue_for_endpoint(tx, &self.endpoint, &json!({"n": 1}), now))
            .unwrap()
            .1
    }

    /// Runs batches at `now` until one claims nothing; the sum of their reports.
    fn dispatch_at(&self, now: Timestamp) -> BatchReport {
        self.clock.set(now);
        let mut total = BatchReport::default();
        loop {
            let report =
                dispatch_batch(&self.store, &self.sender, &self.config, &self.clock).unwrap();
            if report.claimed == 0 {
                return total;
            }
            total.claimed += report.claimed;
            total.delivered += report.delivered;
            total.retried += report.retried;
            total.failed += report.failed;
        }
    }

    fn endpoint(&self) -> WebhookEndpoint {
        self.store
            .read(|tx| Ok(tx.webhook_endpoints_by_ids(&[self.endpoint.id])?))
            .unwrap()
            .remove(0)
            .0
    }

    fn message(&self, message_id: &str) -> WebhookMessage {
        self.store
            .read(|tx| Ok(tx.webhook_message(message_id)?))
            .unwrap()
            .unwrap()
    }
}

fn report(claimed: usize, delivered: usize, retried: usize, failed: usize) -> BatchReport {
    BatchReport {
        claimed,
        delivered,
        retried,
        failed,
    }
}

fn an_endpoint_failing_for_5_days_is_disabled_and_its_messages_stop(backend: Backend) {
    let setup = setup(backend, 500);
    let (one, two) = (setup.enqueue(at(0)), setup.enqueue(at(0)));

    assert_eq!(setup.dispatch_at(at(0)), report(2, 0, 2, 0));
    let endpoint = setup.endpoint();
    assert_eq!(endpoint.failing_since, Some(at(0)));
    assert_eq!(endpoint.disabled_at, None);

    // One second before the 5 days are up: still enabled, both messages retry, and the
    // failures are still counted from the first one.
    let before = at(5 * DAY - 1);
    assert_eq!(setup.dispatch_at(before), report(2, 0, 2, 0));
    let endpoint = setup.endpoint();
    assert_eq!(
        (endpoint.disabled_at, endpoint.failing_since),
        (None, Some(at(0)))
    );
    for id in [&one, &two] {
        let message = setup.message(id);
        assert_eq!(
            (message.status, message.attempts, message.next_attempt_at),
            (MessageStatus::Pending, 2, before.plus_seconds(HOUR))
        );
    }
    assert_eq!(setup.receiver.received(), 4);

    // The next attempt is past the 5 days: it fails, the endpoint is disabled, and the other
    // message, still pending in the database, stops without being sent.
    let after = before.plus_seconds(HOUR);
    assert_eq!(setup.dispatch_at(after), report(1, 0, 0, 1));
    assert_eq!(setup.receiver.received(), 5);
    let endpoint = setup.endpoint();
    assert_eq!(endpoint.disabled_at, Some(after));
    assert_eq!(
        endpoint.disabled_reason.as_deref(),
        Some("every delivery failed for 120 hours")
    );
    let mut ended: Vec<(MessageStatus, i64)> = [&one, &two]
        .iter()
        .map(|id| setup.message(id))
        .map(|m| (m.status, m.attempts))
        .collect();
    ended.sort_by_key(|(_, attempts)| *attempts);
    assert_eq!(
        ended,
        [(MessageStatus::Failed, 2), (MessageStatus::Failed, 3)],
        "one message failed on its attempt, the other stopped unsent"
    );

    // Nothing is sent to a disabled endpoint afterwards.
    assert_eq!(setup.dispatch_at(at(10 * DAY)), report(0, 0, 0, 0));
    assert_eq!(setup.receiver.received(), 5);
}

fn a_success_in_between_resets_failing_since(backend: Backend) {
    let setup = setup(backend, 500);
    let first = setup.enqueue(at(0));
    assert_eq!(setup.dispatch_at(at(0)), report(1, 0, 1, 0));
    assert_eq!(setup.endpoint().failing_since, Some(at(0)));

    // Three days in, one success: the endpoint is no longer failing.
    setup.receiver.answer(200);
    assert_eq!(setup.dispatch_at(at(3 * DAY)), report(1, 1, 0, 0));
    assert_eq!(setup.message(&first).status, MessageStatus::Delivered);
    assert_eq!(setup.endpoint().failing_since, None);

    // It fails again: the failing starts anew.
    setup.receiver.answer(500);
    let second = setup.enqueue(at(3 * DAY));
    assert_eq!(setup.dispatch_at(at(3 * DAY)), report(1, 0, 1, 0));
    assert_eq!(setup.endpoint().failing_since, Some(at(3 * DAY)));

    // Past 5 days since the first failure, but not since the success: not disabled.
    assert_eq!(setup.dispatch_at(at(5 * DAY + HOUR)), report(1, 0, 1, 0));
    let endpoint = setup.endpoint();
    assert_eq!(
        (endpoint.disabled_at, endpoint.failing_since),
        (None, Some(at(3 * DAY)))
    );
    assert_eq!(setup.message(&second).status, MessageStatus::Pending);

    // 5 days after the failing started anew, it is.
    assert_eq!(setup.dispatch_at(at(8 * DAY + HOUR)), report(1, 0, 0, 1));
    assert_eq!(setup.endpoint().disabled_at, Some(at(8 * DAY + HOUR)));
    assert_eq!(setup.message(&second).status, MessageStatus::Failed);
}

/// Both messages in one claimed batch: the one after the disabling attempt is `failed` like
/// those still in the queue (`cancelled` is for a deleted webhook).
fn a_message_claimed_with_the_disabling_one_fails_too(backend: Backend) {
    let setup = setup_with(
        backend,
        500,
        DispatcherConfig {
            batch: 2,
            ..config()
        },
    );
    let (one, two) = (setup.enqueue(at(0)), setup.enqueue(at(0)));
    assert_eq!(setup.dispatch_at(at(0)), report(2, 0, 2, 0));
    let after = at(5 * DAY + HOUR);
    setup.dispatch_at(after);
    assert_eq!(setup.endpoint().disabled_at, Some(after));
    assert_eq!(setup.receiver.received(), 3, "the second one is not sent");
    for id in [&one, &two] {
        assert_eq!(setup.message(id).status, MessageStatus::Failed);
    }
}

backend_tests!(
    a_message_claimed_with_the_disabling_one_fails_too,
    an_endpoint_failing_for_5_days_is_disabled_and_its_messages_stop,
    a_success_in_between_resets_failing_since,
);
