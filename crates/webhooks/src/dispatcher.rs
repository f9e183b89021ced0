//! The dispatcher: workers claim due messages, sign and send them, record every attempt, and
//! schedule what follows by the domain's [`RetryPolicy`].

use mercer_domain::kernel::ids::ShopId;
use std::collections::HashMap;
use std::io::Read;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use mercer_domain::access::credentials::Secret;
use mercer_domain::access::secrets::SecretKind;
use mercer_domain::kernel::activity::{Activity, Tally};
use mercer_domain::kernel::ids::WebhookId;
use mercer_domain::kernel::time::Clock;
use mercer_domain::kernel::wake::Wake;
use mercer_domain::ports::Database;
use mercer_domain::webhooks::{
    AfterAttempt, AttemptOutcome, DeliveryAttempt, EndpointHealth, MessageStatus, MessageUpdate,
    RetryPolicy, WebhookEndpoint, WebhookKind, WebhookMessage, announce_endpoint_disabled,
    failure_text,
};
use mercer_domain::{DomainError, Timestamp};
use mercer_outbound::PrivateAddressGuard;
use mercer_signing::{cavage, standard_webhooks, svc_signature};

mod throttled;

pub use throttled::{THROTTLE_WINDOW, ThrottleWatch, dispatch_throttled_batch};

#[derive(Debug, Clone)]
pub struct DispatcherConfig {
    /// Threads sending at once.
    pub workers: usize,
    /// Messages one worker claims at a time.
    pub batch: usize,
    pub connect_timeout: Duration,
    /// The whole attempt, answer included.
    pub timeout: Duration,
    /// Where callbacks may lead.
    pub address_guard: PrivateAddressGuard,
    pub policy: RetryPolicy,
    /// How long a claimed message is held by its worker before another may take it.
    pub lease: Duration,
    /// How often idle workers look for due messages nobody woke them for.
    pub idle_poll: Duration,
}

impl Default for DispatcherConfig {
    fn default() -> Self {
        DispatcherConfig {
            workers: 4,
            batch: 16,
            connect_timeout: Duration::from_secs(5),
            timeout: Duration::from_secs(15),
            address_guard: PrivateAddressGuard::STRICT,
            policy: RetryPolicy::default(),
            lease: Duration::from_secs(60),
            idle_poll: Duration::from_millis(250),
        }
    }
}

/// The most of an answer's body that is kept with the attempt.
const RESPONSE_KEPT: u64 = 1024;

/// A request ready to send.
pub struct OutgoingWebhook {
    pub url: String,
    pub headers: Vec<(&'static str, String)>,
    pub body: Vec<u8>,
}

/// The headers of one delivery: Standard Webhooks on every message; the draft-cavage
/// `Signature`, `Date` and `Digest` (the body's SHA-256) for checkout webhooks;
/// `x-svc-signature` for subscription webhooks.
pub fn build_request(
    endpoint: &WebhookEndpoint,
    message: &WebhookMessage,
    secret: &Secret,
    now: Timestamp,
) -> OutgoingWebhook {
    let body = message.payload.as_bytes().to_vec();
    let timestamp = now.as_micros() / 1_000_000;
    let mut headers = vec![
        ("Content-Type", "application/json".to_string()),
        ("User-Agent", "Svc-API".to_string()),
        ("webhook-id", message.message_id.clone()),
        ("webhook-timestamp", timestamp.to_string()),
        (
            "webhook-signature",
            standard_webhooks::sign(
                secret.expose().as_bytes(),
                &message.message_id,
                timestamp,
                &body,
            ),
        ),
        ("X-Svc-Topic", message.topic.clone()),
    ];
    match endpoint.kind {
        WebhookKind::Checkout => {
            let date = http_date(now);
            let target = request_target(&endpoint.callback_url);
            let digest = cavage::digest(&body);
            headers.push((
                "Signature",
                cavage::signature_header(secret.expose(), "POST", &target, &date, &digest),
            ));
            headers.push(("Date", date));
            headers.push(("Digest", digest));
        }
        WebhookKind::Subscription => {
            headers.push(("x-svc-signature", svc_signature(secret.expose(), &body)))
        }
    }
    OutgoingWebhook {
        url: endpoint.callback_url.clone(),
        headers,
        body,
    }
}

/// A `Date` header value (IMF-fixdate).
pub(crate) fn http_date(now: Timestamp) -> String {
    now.to_datetime()
        .format("%a, %d %b %Y %H:%M:%S GMT")
        .to_string()
}

/// The path and query of a URL, as draft-cavage's `(request-target)` signs them.
pub(crate) fn request_target(url: &str) -> String {
    url::Url::parse(url)
        .map(|url| match url.query() {
            Some(query) => format!("{}?{query}", url.path()),
            None => url.path().to_string(),
        })
        .unwrap_or_else(|_| "/".to_string())
}

/// `Retry-After` as seconds or an HTTP date.
fn retry_after(value: &str, now: Timestamp) -> Option<Duration> {
    let value = value.trim();
    if let Ok(seconds) = value.parse::<u64>() {
        return Some(Duration::from_secs(seconds));
    }
    let at = chrono::DateTime::parse_from_rfc2822(value).ok()?;
    let wait = at.timestamp_micros() - now.as_micros();
    Some(Duration::from_micros(u64::try_from(wait).unwrap_or(0)))
}

/// A random spread in [-1, 1] for the retry jitter.
fn spread() -> f64 {
    let mut bytes = [0u8; 8];
    if getrandom::fill(&mut bytes).is_err() {
        return 0.0;
    }
    (u64::from_le_bytes(bytes) as f64 / u64::MAX as f64) * 2.0 - 1.0
}

/// What an attempt's record says of a failed call. Integrators read it in the delivery log, so
/// it says what went wrong without what the network looks like (OS errors, addresses): the
/// detail goes to the debug log.
fn error_text(error: &ureq::Error, timeout: Duration) -> String {
    if let Some(refused) = mercer_outbound::refusal(error) {
        return format!("refused: {refused}");
    }
    match error {
        ureq::Error::Timeout(_) => format!("no answer within {timeout:?}"),
        error if mercer_outbound::is_unreachable(error) => {
            log::debug!(target: "mercer::webhooks", "a webhook endpoint could not be reached: {error}");
            "the endpoint could not be reached".to_string()
        }
        other => other.to_string(),
    }
}

/// One worker's sending: an HTTP agent whose resolver holds the guard.
pub struct Sender {
    agent: ureq::Agent,
    timeout: Duration,
}

impl Sender {
    pub fn new(config: &DispatcherConfig) -> Sender {
        let agent = mercer_outbound::agent(
            config.address_guard,
            ureq::Agent::config_builder()
                .http_status_as_error(false)
                .timeout_connect(Some(config.connect_timeout))
                .timeout_global(Some(config.timeout))
                .user_agent("Svc-API"),
        );
        Sender {
            agent,
            timeout: config.timeout,
        }
    }

    /// Sends one request and reports what came back. A callback leading into a private network
    /// is refused by the agent's resolver, before any connection: an attempt without status.
    pub fn send(&self, request: &OutgoingWebhook, now: Timestamp) -> AttemptOutcome {
        let started = Instant::now();
        let mut builder = self.agent.post(&request.url);
        for (name, value) in &request.headers {
            builder = builder.header(*name, value.as_str());
        }
        match builder.send(&request.body[..]) {
            Ok(mut response) => {
                let status = response.status().as_u16();
                let asked = response
                    .headers()
                    .get("retry-after")
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| retry_after(v, now));
                let mut kept = Vec::new();
                let _ = response
                    .body_mut()
                    .as_reader()
                    .take(RESPONSE_KEPT)
                    .read_to_end(&mut kept);
                AttemptOutcome {
                    status: Some(status),
                    latency: started.elapsed(),
                    response: Some(String::from_utf8_lossy(&kept).into_owned()),
                    error: None,
                    retry_after: asked,
                }
            }
            Err(error) => AttemptOutcome {
                latency: started.elapsed(),
                error: Some(error_text(&error, self.timeout)),
                ..AttemptOutcome::default()
            },
        }
    }
}

/// What one batch did, for the caller's logs and counters.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct BatchReport {
    pub claimed: usize,
    pub delivered: usize,
    pub retried: usize,
    pub failed: usize,
}

fn outcome_label(after: &AfterAttempt) -> &'static str {
    match after {
        AfterAttempt::Delivered => "delivered",
        AfterAttempt::Retry(_) => "retried",
        AfterAttempt::GiveUp => "failed",
        AfterAttempt::Disable(_) => "disabled",
    }
}

/// Claims due messages, sends them, records the attempts, and schedules what follows.
pub fn dispatch_batch(
    db: &impl Database,
    sender: &Sender,
    config: &DispatcherConfig,
    clock: &dyn Clock,
) -> Result<BatchReport, DomainError> {
    let now = clock.now();
    let lease_until = Timestamp::from_micros(
        now.as_micros() + i64::try_from(config.lease.as_micros()).unwrap_or(i64::MAX),
    );
    let claimed =
        db.write_statement(|tx| Ok(tx.claim_webhook_messages(now, config.batch, lease_until)?))?;
    if claimed.is_empty() {
        return Ok(BatchReport::default());
    }
    let targets = read_targets(db, &claimed)?;
    let mut batch = Batch {
        report: BatchReport {
            claimed: claimed.len(),
            ..BatchReport::default()
        },
        ..Batch::default()
    };
    for message in claimed {
        batch.deliver(message, &targets, sender, config, clock);
    }
    batch.record(db, clock.now())?;
    Ok(batch.report)
}

/// The endpoints of a batch's messages (with whether each is deleted), and the checkout
/// integration secret of each shop with a checkout endpoint among them.
struct Targets {
    endpoints: HashMap<WebhookId, (WebhookEndpoint, bool)>,
    checkout_secrets: HashMap<ShopId, Option<Secret>>,
}

fn read_targets(db: &impl Database, claimed: &[WebhookMessage]) -> Result<Targets, DomainError> {
    let endpoint_ids: Vec<WebhookId> = claimed.iter().map(|m| m.endpoint_id).collect();
    db.read(|tx| {
        let endpoints: HashMap<WebhookId, (WebhookEndpoint, bool)> = tx
            .webhook_endpoints_by_ids(&endpoint_ids)?
            .into_iter()
            .map(|(e, deleted)| (e.id, (e, deleted)))
            .collect();
        let mut checkout_secrets: HashMap<ShopId, Option<Secret>> = HashMap::new();
        for (endpoint, _) in endpoints.values() {
            if endpoint.kind == WebhookKind::Checkout
                && !checkout_secrets.contains_key(&endpoint.shop_id)
            {
                let secret = tx
                    .shared_secret(endpoint.shop_id, SecretKind::CheckoutIntegration)?
                    .map(|s| s.current);
                checkout_secrets.insert(endpoint.shop_id, secret);
            }
        }
        Ok(Targets {
            endpoints,
            checkout_secrets,
        })
    })
}

/// What a batch did, recorded together at its end.
#[derive(Default)]
struct Batch {
    report: BatchReport,
    attempts: Vec<DeliveryAttempt>,
    updates: Vec<MessageUpdate>,
    /// Per endpoint: its failing-since after this batch, and a disabling if one happened.
    health: HashMap<WebhookId, EndpointHealth>,
    /// Per endpoint: its failing-since as the batch read it, so an unchanged health is not
    /// written again.
    read_failing_since: HashMap<WebhookId, Option<Timestamp>>,
    /// Messages ended without an attempt.
    unsent: Vec<MessageUpdate>,
    /// The shops' activity: attempts made, messages delivered and failed.
    activity: Tally,
    /// Each endpoint the batch disabled, with its last attempt's failure as the delivery log
    /// shows it.
    disabled_endpoints: HashMap<WebhookId, (WebhookEndpoint, String)>,
}

impl Batch {
    /// Sends one message, or ends it unsent when it cannot go (its endpoint unreadable,
    /// deleted or disabled), and notes what follows by the retry policy. In its span (message
    /// id, endpoint, and `request_id`: the request whose handling enqueued the message, when
    /// one did), which every line it logs names. When traces are exported, the span continues
    /// the trace the message was enqueued in.
    #[tracing::instrument(
        target = "mercer::webhooks",
        name = "delivery",
        level = "error",
        skip_all,
        fields(
            message_id = %message.message_id,
            endpoint = message.endpoint_id.0,
            request_id = message.request_id.as_deref(),
        )
    )]
    fn deliver(
        &mut self,
        message: WebhookMessage,
        targets: &Targets,
        sender: &Sender,
        config: &DispatcherConfig,
        clock: &dyn Clock,
    ) {
        // First, before anything starts the span's own trace context.
        mercer_domain::kernel::jobs::continue_trace(message.trace_parent.as_deref());
        let Some((endpoint, deleted)) = targets.endpoints.get(&message.endpoint_id) else {
            // Its endpoint could not be read: the message fails now rather than coming back
            // after every lease.
            self.end_unsent(&message, MessageStatus::Failed, clock.now());
            return;
        };
        let sent_at = clock.now();
        let disabled_here = self
            .health
            .get(&endpoint.id)
            .is_some_and(|health| health.disabled.is_some());
        if *deleted || !endpoint.is_active() || disabled_here {
            // As documented: `cancelled` when the webhook was deleted, `failed` when it was
            // disabled (as its messages still in the queue are, by end_pending_webhook_messages).
            let status = if *deleted {
                MessageStatus::Cancelled
            } else {
                MessageStatus::Failed
            };
            self.end_unsent(&message, status, sent_at);
            return;
        }
        let secret = match endpoint.kind {
            WebhookKind::Checkout => targets
                .checkout_secrets
                .get(&endpoint.shop_id)
                .cloned()
                .flatten(),
            WebhookKind::Subscription => endpoint.secret.clone(),
        };
        let outcome = attempt(sender, endpoint, &message, secret.as_ref());
        let attempts_made = message.attempts + 1;
        let failing_since = self
            .health
            .get(&endpoint.id)
            .map_or(endpoint.failing_since, |health| health.failing_since);
        let after =
            config
                .policy
                .after_attempt(attempts_made, &outcome, failing_since, sent_at, spread());
        report_attempt(&message, attempts_made, &outcome, &after);
        match &after {
            AfterAttempt::Delivered => self.report.delivered += 1,
            AfterAttempt::Retry(_) => self.report.retried += 1,
            AfterAttempt::GiveUp | AfterAttempt::Disable(_) => self.report.failed += 1,
        }
        self.activity
            .add(message.shop_id, Activity::WebhooksSent, sent_at, 1);
        match &after {
            AfterAttempt::Delivered => {
                self.activity
                    .add(message.shop_id, Activity::WebhooksDelivered, sent_at, 1);
            }
            AfterAttempt::Retry(_) => {}
            AfterAttempt::GiveUp | AfterAttempt::Disable(_) => {
                self.activity
                    .add(message.shop_id, Activity::WebhooksFailed, sent_at, 1);
            }
        }
        if let AfterAttempt::Disable(_) = &after {
            self.disabled_endpoints
                .insert(endpoint.id, (endpoint.clone(), failure_text(&outcome)));
        }
        let (update, endpoint_health) =
            after.settle(message.id, attempts_made, failing_since, sent_at);
        self.health.insert(endpoint.id, endpoint_health);
        self.read_failing_since
            .entry(endpoint.id)
            .or_insert(endpoint.failing_since);
        self.attempts.push(DeliveryAttempt {
            message_row: message.id,
            attempted_at: sent_at,
            outcome,
        });
        self.updates.push(update);
    }

    fn end_unsent(&mut self, message: &WebhookMessage, status: MessageStatus, at: Timestamp) {
        if status == MessageStatus::Failed {
            self.activity
                .add(message.shop_id, Activity::WebhooksFailed, at, 1);
        }
        self.unsent.push(MessageUpdate {
            id: message.id,
            status,
            attempts: message.attempts,
            next_attempt_at: at,
            delivered_at: None,
        });
    }

    /// Records the attempts, the messages' new states and the endpoints' health where it
    /// changed, in one transaction; a disabled endpoint's pending messages end failed, and the
    /// shop's endpoints registered for the operational topic of its kind are told of it.
    fn record(&mut self, db: &impl Database, now: Timestamp) -> Result<(), DomainError> {
        let mut updates = std::mem::take(&mut self.updates);
        updates.append(&mut self.unsent);
        let mut activity = std::mem::take(&mut self.activity);
        db.write(|tx| {
            tx.record_webhook_attempts(&self.attempts, &updates)?;
            for (endpoint_id, health) in &self.health {
                let unchanged = health.disabled.is_none()
                    && self.read_failing_since.get(endpoint_id) == Some(&health.failing_since);
                if unchanged {
                    continue;
                }
                let disabled = health.disabled.as_deref().map(|reason| (now, reason));
                tx.set_webhook_endpoint_health(*endpoint_id, health.failing_since, disabled, now)?;
                if disabled.is_some() {
                    let ended =
                        tx.end_pending_webhook_messages(*endpoint_id, MessageStatus::Failed, now)?;
                    if let Some((endpoint, last_error)) = self.disabled_endpoints.get(endpoint_id) {
                        let ended = i64::try_from(ended).unwrap_or(i64::MAX);
                        activity.add(endpoint.shop_id, Activity::WebhooksFailed, now, ended);
                        let failing_since = health.failing_since.unwrap_or(now);
                        announce_endpoint_disabled(tx, endpoint, failing_since, last_error, now)?;
                    }
                    log::warn!(target: "mercer::webhooks", "endpoint {endpoint_id} disabled");
                }
            }
            activity.record(tx)?;
            Ok(())
        })
    }
}

/// One attempt to send `message`, signed with `secret`; without a secret, an attempt that
/// failed for that reason.
fn attempt(
    sender: &Sender,
    endpoint: &WebhookEndpoint,
    message: &WebhookMessage,
    secret: Option<&Secret>,
) -> AttemptOutcome {
    match secret {
        // Times on the wire are the system's: the receiver checks them against its clock.
        Some(secret) => {
            let wire_now = Timestamp::now();
            sender.send(
                &build_request(endpoint, message, secret, wire_now),
                wire_now,
            )
        }
        None => AttemptOutcome {
            error: Some("no shared secret to sign with is configured".to_string()),
            ..AttemptOutcome::default()
        },
    }
}

/// An attempt's metrics and log line.
fn report_attempt(
    message: &WebhookMessage,
    attempts_made: i64,
    outcome: &AttemptOutcome,
    after: &AfterAttempt,
) {
    metrics::counter!("mercer_webhook_deliveries_total", "outcome" => outcome_label(after))
        .increment(1);
    metrics::histogram!("mercer_webhook_attempt_seconds").record(outcome.latency.as_secs_f64());
    log::info!(
        target: "mercer::webhooks",
        "{} {} attempt {attempts_made}: {} {:.1}ms → {}",
        message.message_id,
        message.topic,
        outcome.status.map_or_else(|| outcome.error.clone().unwrap_or_default(), |s| s.to_string()),
        outcome.latency.as_secs_f64() * 1000.0,
        outcome_label(after)
    );
}

/// Runs `config.workers` threads (none: this process only enqueues) until `stop`; `wake`
/// makes idle workers look at once. `clock` is Mercer's (when messages are due, attempts'
/// times); signatures carry the system's time.
pub fn start<D: Database, C: Clock + Clone>(
    db: D,
    config: DispatcherConfig,
    clock: C,
    wake: Wake,
    stop: Arc<AtomicBool>,
) -> std::io::Result<Vec<std::thread::JoinHandle<()>>> {
    let watch = Arc::new(ThrottleWatch::new());
    (0..config.workers)
        .map(|n| {
            let (db, config, wake, stop) = (db.clone(), config.clone(), wake.clone(), stop.clone());
            let (clock, watch) = (clock.clone(), watch.clone());
            std::thread::Builder::new().name(format!("mercer-webhooks-{n}")).spawn(move || {
                let sender = Sender::new(&config);
                // Throttled endpoints' messages, in turns of their own (`throttled`).
                let mut throttled = throttled::ThrottledTurns::new();
                while !stop.load(Ordering::Relaxed) {
                    let busy = match dispatch_batch(&db, &sender, &config, &clock) {
                        Ok(report) => report.claimed > 0,
                        Err(error) => {
                            log::error!(target: "mercer::webhooks", "dispatching failed: {error}");
                            false
                        }
                    };
                    let sent_throttled = throttled.take(&watch, &db, &sender, &config, &clock);
                    if !busy && !sent_throttled {
                        wake.wait(throttled.idle_wait(config.idle_poll));
                    }
                }
            })
        })
        .collect()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    #[test]
    fn https_callbacks_get_a_tls_handshake() {
        // A server that is not TLS: the attempt must fail in the handshake, which shows TLS is
        // built in (without it ureq refuses https before connecting).
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        std::thread::spawn(move || {
            use std::io::Write;
            for mut stream in listener.incoming().map_while(Result::ok) {
                let _ = stream.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
            }
        });
        let sender = Sender::new(&DispatcherConfig {
            address_guard: PrivateAddressGuard::ALLOW_PRIVATE,
            timeout: Duration::from_secs(5),
            ..DispatcherConfig::default()
        });
        let outcome = sender.send(
            &OutgoingWebhook {
                url: format!("https://127.0.0.1:{port}/hook"),
                headers: Vec::new(),
                body: Vec::new(),
            },
            Timestamp::from_micros(0),
        );
        let error = outcome.error.unwrap_or_default().to_lowercase();
        assert!(outcome.status.is_none());
        // With TLS built in, rustls reads the plain answer as a corrupt record; without it,
        // ureq says "tls required, but transport is unsecured" and never tries.
        assert!(error.contains("corrupt message"), "{error}");
    }

    #[test]
    fn an_unreachable_endpoint_is_recorded_without_network_details() {
        let port = {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            listener.local_addr().unwrap().port()
        };
        let sender = Sender::new(&DispatcherConfig {
            address_guard: PrivateAddressGuard::ALLOW_PRIVATE,
            ..DispatcherConfig::default()
        });
        let outcome = sender.send(
            &OutgoingWebhook {
                url: format!("http://127.0.0.1:{port}/hook"),
                headers: Vec::new(),
                body: Vec::new(),
            },
            Timestamp::from_micros(0),
        );
        assert_eq!(
            outcome.error.as_deref(),
            Some("the endpoint could not be reached")
        );
    }

    /// A loopback server answering every connection with `answer`; it counts connections.
    pub(crate) fn local_server(answer: String) -> (String, Arc<std::sync::atomic::AtomicUsize>) {
        use std::io::{BufRead, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let connections = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counted = connections.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().map_while(Result::ok) {
                counted.fetch_add(1, Ordering::SeqCst);
                let mut reader = std::io::BufReader::new(&stream);
                let mut line = String::new();
                // The head; then the body is left unread, the answer does not wait for it.
                while reader.read_line(&mut line).is_ok_and(|n| n > 2) {
                    line.clear();
                }
                let _ = (&stream).write_all(answer.as_bytes());
            }
        });
        (url, connections)
    }

    /// A server that redirects everything to `location`.
    pub(crate) fn redirecting_to(location: &str) -> (String, Arc<std::sync::atomic::AtomicUsize>) {
        local_server(format!(
            "HTTP/1.1 307 Temporary Redirect\r\nLocation: {location}\r\n\
             Content-Length: 0\r\nConnection: close\r\n\r\n"
        ))
    }

    #[test]
    fn redirects_are_not_followed() {
        let (target, reached) =
            local_server("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n".to_string());
        let (redirecting, asked) = redirecting_to(&format!("{target}/stolen"));
        let sender = Sender::new(&DispatcherConfig {
            address_guard: PrivateAddressGuard::ALLOW_PRIVATE,
            ..DispatcherConfig::default()
        });
        let outcome = sender.send(
            &OutgoingWebhook {
                url: format!("{redirecting}/hook"),
                headers: vec![("Signature", "signed".to_string())],
                body: b"{}".to_vec(),
            },
            Timestamp::from_micros(0),
        );
        assert_eq!(outcome.status, Some(307), "{outcome:?}");
        assert_eq!(asked.load(Ordering::SeqCst), 1);
        std::thread::sleep(Duration::from_millis(100));
        assert_eq!(
            reached.load(Ordering::SeqCst),
            0,
            "the redirect was followed"
        );
    }

    #[test]
    fn loopback_callbacks_are_refused_before_connecting() {
        let (url, reached) =
            local_server("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n".to_string());
        let sender = Sender::new(&DispatcherConfig::default());
        let outcome = sender.send(
            &OutgoingWebhook {
                url: format!("{url}/hook"),
                headers: Vec::new(),
                body: Vec::new(),
            },
            Timestamp::from_micros(0),
        );
        assert_eq!(outcome.status, None);
        assert_eq!(
            outcome.error.as_deref(),
            Some("refused: it leads to a loopback address")
        );
        std::thread::sleep(Duration::from_millis(100));
        assert_eq!(reached.load(Ordering::SeqCst), 0);
    }

    fn endpoint(kind: WebhookKind, url: &str) -> WebhookEndpoint {
        let at = Timestamp::from_micros(0);
        WebhookEndpoint {
            id: WebhookId(1),
            public_id: "0".repeat(32),
            shop_id: ShopId(1),
            kind,
            topic: "subscription_created".into(),
            callback_url: url.into(),
            secret: None,
            disabled_at: None,
            disabled_reason: None,
            failing_since: None,
            created_at: at,
            updated_at: at,
            rate_limit_per_s: None,
        }
    }

    fn message() -> WebhookMessage {
        WebhookMessage {
            id: mercer_domain::kernel::ids::MessageId(7),
            message_id: "msg_0123".into(),
            shop_id: ShopId(1),
            endpoint_id: WebhookId(1),
            topic: "subscription_created".into(),
            payload: "{\"id\":42}".into(),
            status: MessageStatus::Pending,
            attempts: 0,
            next_attempt_at: Timestamp::from_micros(0),
            created_at: Timestamp::from_micros(0),
            delivered_at: None,
            request_id: None,
            trace_parent: None,
            purged_at: None,
        }
    }

    fn header<'a>(request: &'a OutgoingWebhook, name: &str) -> Option<&'a str> {
        request
            .headers
            .iter()
            .find(|(key, _)| key.eq_ignore_ascii_case(name))
            .map(|(_, value)| value.as_str())
    }

    #[test]
    fn subscription_webhooks_carry_x_svc_signature_and_standard_webhooks() {
        let now = Timestamp::parse_rfc3339("2024-03-01T10:00:00Z").unwrap();
        let secret = Secret::new("subscription-secret");
        let request = build_request(
            &endpoint(WebhookKind::Subscription, "https://example.test/hooks"),
            &message(),
            &secret,
            now,
        );
        assert_eq!(request.body, b"{\"id\":42}");
        assert_eq!(
            header(&request, "x-svc-signature"),
            Some(svc_signature("subscription-secret", b"{\"id\":42}").as_str())
        );
        assert!(
            header(&request, "Signature").is_none(),
            "no draft-cavage signature on subscription webhooks"
        );
        assert_eq!(header(&request, "webhook-id"), Some("msg_0123"));
        assert_eq!(header(&request, "webhook-timestamp"), Some("1709287200"));
        assert!(standard_webhooks::verify(
            b"subscription-secret",
            "msg_0123",
            1_709_287_200,
            b"{\"id\":42}",
            header(&request, "webhook-signature").unwrap()
        ));
        assert_eq!(
            header(&request, "X-Svc-Topic"),
            Some("subscription_created")
        );
    }

    #[test]
    fn checkout_webhooks_sign_the_path_and_query_the_date_and_the_body_digest() {
        let now = Timestamp::parse_rfc3339("2024-03-01T10:00:00Z").unwrap();
        let secret = Secret::new("integration-secret");
        let request = build_request(
            &endpoint(WebhookKind::Checkout, "https://example.test/hooks/a?shop=1"),
            &message(),
            &secret,
            now,
        );
        assert_eq!(
            header(&request, "Date"),
            Some("Fri, 01 Mar 2024 10:00:00 GMT")
        );
        let digest = header(&request, "Digest").unwrap();
        assert_eq!(digest, cavage::digest(&request.body));
        let signature = header(&request, "Signature").unwrap();
        assert!(signature.contains(r#"headers="(request-target) date digest""#));
        let signed = cavage::SignedRequest {
            method: "POST",
            path_and_query: "/hooks/a?shop=1",
            date: "Fri, 01 Mar 2024 10:00:00 GMT",
            digest: Some(digest),
            body: &request.body,
        };
        assert!(cavage::verify("integration-secret", &signed, signature));
        let tampered = cavage::SignedRequest {
            body: b"{\"topic\":\"forged\"}",
            ..signed
        };
        assert!(!cavage::verify("integration-secret", &tampered, signature));
        assert!(header(&request, "x-svc-signature").is_none());
    }

    #[test]
    fn retry_after_reads_seconds_and_dates() {
        let now = Timestamp::parse_rfc3339("2024-03-01T10:00:00Z").unwrap();
        assert_eq!(retry_after("120", now), Some(Duration::from_secs(120)));
        assert_eq!(
            retry_after("Fri, 01 Mar 2024 10:01:00 GMT", now),
            Some(Duration::from_secs(60))
        );
        assert_eq!(retry_after("soon", now), None);
    }

    #[test]
    fn spread_stays_in_range() {
        for _ in 0..100 {
            let s = spread();
            assert!((-1.0..=1.0).contains(&s));
        }
    }
}
