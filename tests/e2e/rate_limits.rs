//! Request budgets end to end: a token's budget (429 with Retry-After, the error body and the
//! X-RateLimit-* headers), a shop's own budgets set and cleared with `mercer shop update`
//! (per token, connector events, storefront), none on /healthz, /readyz and /metrics, refusals
//! counted in /metrics, and one budget shared by two processes on one PostgreSQL database.

use std::time::{Duration, Instant};

use mercer_tests::{Answer, Backend, MercerServer, TestDatabase, backend_tests, wait_until};
use serde_json::json;

fn shop_path(shop: &str) -> String {
    format!("/subscriptions/v1/shops/{shop}/shop")
}

fn number(answer: &Answer, header: &str) -> u64 {
    answer
        .header(header)
        .unwrap_or_else(|| panic!("no {header} on {} {}", answer.status, answer.text))
        .parse()
        .unwrap_or_else(|_| panic!("{header} is no whole number"))
}

/// Sends `request` until it is refused (at most `most` times): the answers allowed, and the
/// refusal.
fn until_refused(most: usize, request: impl Fn() -> Answer) -> (Vec<Answer>, Answer) {
    let mut allowed = Vec::new();
    for _ in 0..most {
        let answer = request();
        if answer.status == 429 {
            return (allowed, answer);
        }
        allowed.push(answer);
    }
    panic!("no 429 in {most} requests");
}

/// Asserts the 429 of `budget`: Retry-After of at least a second, the headers, the error body.
fn assert_refusal(answer: &Answer, budget: &str, limit: u64) {
    let entries = answer.assert_error(429, "rate_limited");
    assert_eq!(entries[0]["sub_type"], budget, "{}", answer.text);
    assert_eq!(entries[0]["severity"], "critical");
    assert!(number(answer, "retry-after") >= 1);
    assert_eq!(number(answer, "x-ratelimit-limit"), limit);
    assert_eq!(number(answer, "x-ratelimit-remaining"), 0);
    assert!(number(answer, "x-ratelimit-reset") >= 1);
}

fn shop_update(server: &MercerServer, shop: &str, flags: &[&str]) {
    let mut args = vec!["shop", "update", "--shop", shop];
    args.extend_from_slice(flags);
    let output = server.cli(&args);
    assert!(output.success, "{}", output.stderr);
}

fn a_tokens_budget_refuses_past_its_burst(backend: Backend) {
    let server = MercerServer::start_with(
        TestDatabase::create_migrated(backend),
        &["--rate-limit-per-s", "2"],
    );
    let demo = server.demo().clone();
    let path = shop_path(&demo.shop);
    let get = || server.get(&path).bearer(&demo.token).call();
    // Burst 4 at 2/s: four at once (a fifth if a token refilled meanwhile), then 429.
    let (allowed, refused) = until_refused(20, get);
    assert!(
        (4..=5).contains(&allowed.len()),
        "{} allowed",
        allowed.len()
    );
    let first = &allowed[0];
    assert_eq!(first.status, 200, "{}", first.text);
    assert_eq!(number(first, "x-ratelimit-limit"), 4);
    assert_eq!(number(first, "x-ratelimit-remaining"), 3);
    assert_eq!(
        number(first, "x-ratelimit-reset"),
        1,
        "one token short: 0.5 s, rounded up"
    );
    assert!(first.header("retry-after").is_none());
    assert_refusal(&refused, "token", 4);

    // No budget on the operations routes, with a token or without.
    for route in ["/healthz", "/readyz", "/metrics"] {
        let answer = server.get(route).bearer(&demo.token).call();
        assert_eq!(answer.status, 200, "{route}: {}", answer.text);
        assert!(answer.header("x-ratelimit-limit").is_none(), "{route}");
    }
    let metrics = server.get("/metrics").call().text;
    let counted = metrics.lines().any(|line| {
        line.starts_with("mercer_rate_limited_total")
            && line.contains(&format!("shop=\"{}\"", demo.shop))
            && line.contains("budget=\"token\"")
    });
    assert!(counted, "{metrics}");

    // The shop's own budget wins over the server's (within the access cache's 2 s).
    shop_update(&server, &demo.shop, &["--rate-limit-per-s", "50"]);
    assert!(wait_until(Duration::from_secs(5), || {
        get().header("x-ratelimit-limit") == Some("100")
    }));
    // Cleared, the server's applies again.
    shop_update(&server, &demo.shop, &["--rate-limit-per-s", "none"]);
    assert!(wait_until(Duration::from_secs(5), || {
        get().header("x-ratelimit-limit") == Some("4")
    }));
}

fn a_shops_connector_events_and_storefront_have_budgets_of_their_own(backend: Backend) {
    let server = MercerServer::start(backend);
    let demo = server.demo().clone();
    // Off by default: no headers.
    let plain = server
        .get(&shop_path(&demo.shop))
        .bearer(&demo.token)
        .call();
    assert_eq!(plain.status, 200);
    assert!(plain.header("x-ratelimit-limit").is_none());
    shop_update(
        &server,
        &demo.shop,
        &[
            "--connector-events-rate-limit-per-s",
            "1",
            "--storefront-rate-limit-per-s",
            "1",
        ],
    );
    let events = format!(
        "/customers/v1/shops/{}/platforms/custom/webhooks/customers/saved",
        demo.shop
    );
    let event = |n: usize| {
        json!({"id": format!("c-{n}"), "email": format!("c{n}@example.test"),
               "updated_at": "2026-01-01T00:00:00Z"})
    };
    // Budgets are read within 2 s of the change.
    std::thread::sleep(Duration::from_millis(2100));
    let counter = std::cell::Cell::new(0);
    let (allowed, refused) = until_refused(20, || {
        counter.set(counter.get() + 1);
        server
            .post(&events)
            .bearer(&demo.token)
            .json(&event(counter.get()))
    });
    assert!(
        (2..=3).contains(&allowed.len()),
        "{} allowed",
        allowed.len()
    );
    assert_eq!(number(&allowed[0], "x-ratelimit-limit"), 2);
    assert_refusal(&refused, "connector_events", 2);
    // The token's other routes are not the connector events' budget.
    let other = server
        .get(&shop_path(&demo.shop))
        .bearer(&demo.token)
        .call();
    assert_eq!(other.status, 200);

    let storefront = format!(
        "/checkout/storefront/{}/{}/payments",
        demo.shop,
        "0".repeat(32)
    );
    let (allowed, refused) = until_refused(20, || server.get(&storefront).call());
    assert!(
        (2..=3).contains(&allowed.len()),
        "{} allowed",
        allowed.len()
    );
    assert_ne!(allowed[0].status, 429);
    assert_refusal(&refused, "storefront", 2);
    // The CORS layer is outside the budget: a page of another origin can read the 429.
    let cors = server
        .get(&storefront)
        .header("Origin", "https://shop.example.test")
        .call();
    assert_eq!(cors.status, 429);
    assert!(cors.header("access-control-allow-origin").is_some());
}

/// Two processes on one PostgreSQL database share a token's budget: together they admit no
/// more than the burst plus the rate over the time (within the slices each holds).
#[test]
fn two_processes_on_one_postgres_share_a_tokens_budget() {
    let args = ["--rate-limit-per-s", "20"];
    let first = MercerServer::start_with(TestDatabase::create(Backend::Postgres), &args);
    let second = MercerServer::start_with(TestDatabase::attach(first.database()), &args);
    let demo = first.demo().clone();
    let path = shop_path(&demo.shop);
    let run = Duration::from_secs(3);
    let started = Instant::now();
    let admitted: usize = std::thread::scope(|scope| {
        let handles: Vec<_> = [&first, &second, &first, &second]
            .into_iter()
            .map(|server| {
                let (path, token) = (&path, &demo.token);
                scope.spawn(move || {
                    let mut admitted = 0;
                    while started.elapsed() < run {
                        let answer = server.get(path).bearer(token).call();
                        match answer.status {
                            200 => admitted += 1,
                            429 => {}
                            status => panic!("{status}: {}", answer.text),
                        }
                    }
                    admitted
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).sum()
    });
    let elapsed = started.elapsed().as_secs_f64();
    let budget = 40.0 + 20.0 * elapsed;
    let ratio = admitted as f64 / budget;
    eprintln!(
        "two processes admitted {admitted} in {elapsed:.2} s against a budget of {budget:.0} \
         ({:+.1}%)",
        (ratio - 1.0) * 100.0
    );
    assert!(ratio <= 1.10, "over the budget: {admitted} of {budget:.0}");
    assert!(
        ratio >= 0.80,
        "far under the budget: {admitted} of {budget:.0}"
    );
}

backend_tests!(
    a_tokens_budget_refuses_past_its_burst,
    a_shops_connector_events_and_storefront_have_budgets_of_their_own
);
