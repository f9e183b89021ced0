//! `X-Request-Id` on every answer (issue 12 item 4): the client's when it sends a usable one,
//! else a new one; in the request's log line too.

use mercer_tests::{Backend, MercerServer, TestDatabase, backend_tests};
use serde_json::json;

fn is_new_id(id: &str) -> bool {
    id.len() == 32 && id.bytes().all(|b| b.is_ascii_hexdigit())
}

fn every_answer_carries_a_request_id(backend: Backend) {
    let server = MercerServer::start(backend);
    let demo = server.demo().clone();
    let shop_path = format!("/subscriptions/v1/shops/{}/shop", demo.shop);
    let events = format!(
        "/customers/v1/shops/{}/platforms/custom/webhooks/customers/saved",
        demo.shop
    );
    // Successes and failures of every kind, from the route, the extractors and the framework.
    let answers = [
        server.get(&shop_path).bearer(&demo.token).call(),
        server.get(&shop_path).call(),
        server.get("/no/such/route").call(),
        server.request("DELETE", "/healthz").call(),
        server.post(&events).bearer(&demo.token).json(&json!({})),
        server
            .get(&format!("{shop_path}?x=%00"))
            .bearer(&demo.token)
            .call(),
        server
            .get(&shop_path)
            .header("Svc-API-Version-Date", "yesterday")
            .call(),
    ];
    let mut ids = Vec::new();
    for answer in &answers {
        let id = answer
            .header("x-request-id")
            .unwrap_or_else(|| panic!("no X-Request-Id on {} {}", answer.status, answer.text));
        assert!(is_new_id(id), "{id}");
        ids.push(id.to_string());
    }
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), answers.len(), "a new id for each request");

    // The client's own id comes back, and is in the log line of its request.
    let answer = server
        .get(&shop_path)
        .bearer(&demo.token)
        .header("X-Request-Id", "client-chosen-42")
        .call();
    assert_eq!(answer.header("x-request-id"), Some("client-chosen-42"));
    let error = server
        .get("/no/such/route")
        .header("X-Request-Id", "client-chosen-43")
        .call();
    assert_eq!(error.header("x-request-id"), Some("client-chosen-43"));
    mercer_tests::wait_until(std::time::Duration::from_secs(5), || {
        server.log().contains("request_id=client-chosen-42")
    });
    assert!(
        server.log().contains("request_id=client-chosen-42"),
        "{}",
        server.log()
    );
    // One that could not go into a log line or a header as it is gets replaced.
    for unusable in ["has space", &"x".repeat(129)] {
        let answer = server
            .get(&shop_path)
            .bearer(&demo.token)
            .header("X-Request-Id", unusable)
            .call();
        let id = answer.header("x-request-id").unwrap_or_default();
        assert!(is_new_id(id), "{unusable:?} gave {id:?}");
    }
}

/// With `--log-format json` every log line is one JSON object with a level, a target and a
/// message, and a request's line carries its request id.
fn json_log_lines_carry_the_request_id(backend: Backend) {
    let server = MercerServer::start_with(
        TestDatabase::create_migrated(backend),
        &["--log-format", "json"],
    );
    let demo = server.demo().clone();
    let answer = server
        .get(&format!("/subscriptions/v1/shops/{}/shop", demo.shop))
        .bearer(&demo.token)
        .header("X-Request-Id", "json-log-7")
        .call();
    assert_eq!(answer.header("x-request-id"), Some("json-log-7"));
    let logged = mercer_tests::wait_until(std::time::Duration::from_secs(5), || {
        server.log().contains("json-log-7")
    });
    let log = server.log();
    assert!(logged, "{log}");
    let lines: Vec<serde_json::Value> = log
        .lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| {
            serde_json::from_str(line).unwrap_or_else(|_| panic!("not a JSON object: {line}"))
        })
        .collect();
    for line in &lines {
        for key in ["timestamp", "level", "target", "message"] {
            assert!(line[key].is_string(), "no {key}: {line}");
        }
    }
    let request_line = lines
        .iter()
        .find(|line| line["request_id"] == "json-log-7")
        .unwrap_or_else(|| panic!("no line with the request id: {log}"));
    assert_eq!(request_line["level"], "INFO");
    assert_eq!(request_line["target"], "mercer::http");
    let message = request_line["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with(&format!(
            "GET /subscriptions/v1/shops/{}/shop 200 ",
            demo.shop
        )),
        "{message}"
    );
}

backend_tests!(
    every_answer_carries_a_request_id,
    json_log_lines_carry_the_request_id
);
