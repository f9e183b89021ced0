//! Traces over OTLP/HTTP (`serve --otlp-endpoint`): a collector on loopback receives the spans
//! as OTLP/JSON, and the trace of a Create Subscription request holds the delivery attempts of
//! the webhook messages it enqueued, however much later they ran.

use std::collections::HashMap;
use std::time::Duration;

use mercer_tests::receiver::Receiver;
use mercer_tests::{Backend, MercerServer, TestDatabase, backend_tests, wait_until};
use serde_json::{Value, json};

use crate::subscriptions::{Api, running_rule, seed_body};

const REQUEST_ID: &str = "trace-create-subscription-1";

/// One span as the collector got it.
#[derive(Debug, Clone)]
struct CollectedSpan {
    trace_id: String,
    span_id: String,
    parent_span_id: String,
    name: String,
    attributes: HashMap<String, Value>,
}

/// Every span of every export request the collector got at `/v1/traces`.
fn collected(collector: &Receiver) -> Vec<CollectedSpan> {
    let mut spans = Vec::new();
    for request in collector.received() {
        assert_eq!(request.method, "POST");
        assert_eq!(request.target, "/v1/traces");
        assert_eq!(request.header("content-type"), Some("application/json"));
        let body: Value = serde_json::from_slice(&request.body).expect("an OTLP/JSON body");
        let scope_spans = body["resourceSpans"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|resource| resource["scopeSpans"].as_array().into_iter().flatten());
        for span in scope_spans.flat_map(|scope| scope["spans"].as_array().into_iter().flatten()) {
            let attributes = span["attributes"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|attribute| {
                    let value = attribute["value"]
                        .as_object()
                        .and_then(|value| value.values().next().cloned())
                        .unwrap_or(Value::Null);
                    (
                        attribute["key"].as_str().unwrap_or_default().to_string(),
                        value,
                    )
                })
                .collect();
            let text = |key: &str| span[key].as_str().unwrap_or_default().to_string();
            spans.push(CollectedSpan {
                trace_id: text("traceId"),
                span_id: text("spanId"),
                parent_span_id: text("parentSpanId"),
                name: text("name"),
                attributes,
            });
        }
    }
    spans
}

/// Whether `span`'s chain of parents, among `spans`, reaches `ancestor`.
fn descends_from(span: &CollectedSpan, ancestor: &CollectedSpan, spans: &[CollectedSpan]) -> bool {
    let mut parent = span.parent_span_id.clone();
    for _ in 0..spans.len() {
        if parent == ancestor.span_id {
            return true;
        }
        match spans.iter().find(|candidate| candidate.span_id == parent) {
            Some(next) => parent = next.parent_span_id.clone(),
            None => return false,
        }
    }
    false
}

fn a_request_trace_holds_the_deliveries_it_caused(backend: Backend) {
    let collector = Receiver::answering(|_| (200, "{}".to_string()));
    let receiver = Receiver::start();
    let server = MercerServer::start_with(
        TestDatabase::create(backend),
        &["--allow-private-targets", "--otlp-endpoint", &collector.url],
    );
    let api = Api::demo(&server);
    let registered = api.send(
        "POST",
        "/webhooks/subscriptions",
        &json!({ "webhook_subscription": {
            "callback_url": format!("{}/created", receiver.url),
            "webhook_topic_id": 4,
            "shared_secret": "traced-webhook-secret",
        } }),
    );
    assert_eq!(registered.status, 201, "{}", registered.text);

    let created = server
        .post(&api.path("/subscriptions"))
        .bearer(&api.token)
        .header("X-Request-Id", REQUEST_ID)
        .json(&seed_body("traced@example.test", &running_rule()));
    assert_eq!(created.status, 200, "{}", created.text);
    let delivered = wait_until(Duration::from_secs(20), || {
        receiver
            .received()
            .iter()
            .any(|request| request.target == "/created")
    });
    assert!(delivered, "subscription_created was not delivered");

    // The request's span, then the delivery spans of its trace that lead back to it; the
    // batches go out every second.
    let mut found = None;
    wait_until(Duration::from_secs(20), || {
        let spans = collected(&collector);
        let request = spans.iter().find(|span| {
            span.name == "request" && span.attributes.get("request_id") == Some(&json!(REQUEST_ID))
        });
        let Some(request) = request else {
            return false;
        };
        let deliveries: Vec<CollectedSpan> = spans
            .iter()
            .filter(|span| span.name == "delivery" && span.trace_id == request.trace_id)
            .filter(|span| descends_from(span, request, &spans))
            .cloned()
            .collect();
        if deliveries.is_empty() {
            return false;
        }
        found = Some((request.clone(), deliveries, spans.clone()));
        true
    });
    let Some((request, deliveries, spans)) = found else {
        panic!(
            "no delivery span in the request's trace: {:#?}",
            collected(&collector)
        );
    };
    assert_eq!(request.trace_id.len(), 32);
    assert_eq!(
        request.parent_span_id, "",
        "the request's span is its trace's root"
    );
    assert_eq!(
        request.attributes.get("route"),
        Some(&json!("/subscriptions/v1/shops/{shop}/subscriptions"))
    );
    assert_eq!(request.attributes.get("shop"), Some(&json!(api.shop)));
    assert_eq!(request.attributes.get("method"), Some(&json!("POST")));
    // OTLP/JSON writes 64-bit integers as strings; either reads.
    let status = request.attributes.get("status").map(Value::to_string);
    assert!(
        matches!(status.as_deref(), Some("200" | "\"200\"")),
        "{status:?}"
    );
    // The delivery attempt of the message it enqueued, in a span of its own, whose parent is
    // a database transaction of the request.
    let delivery = &deliveries[0];
    assert_eq!(
        delivery.attributes.get("request_id"),
        Some(&json!(REQUEST_ID))
    );
    let transaction = spans
        .iter()
        .find(|span| span.span_id == delivery.parent_span_id)
        .expect("the delivery's parent was exported");
    assert_eq!(transaction.name, "transaction");
    assert_eq!(transaction.trace_id, request.trace_id);
    assert_eq!(transaction.parent_span_id, request.span_id);
    // Work outside any span (the workers' polls, claims and records) makes no trace.
    assert!(
        spans
            .iter()
            .all(|span| !(span.name == "transaction" && span.parent_span_id.is_empty())),
        "{spans:#?}"
    );
}

backend_tests!(a_request_trace_holds_the_deliveries_it_caused);
