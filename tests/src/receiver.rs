//! A webhook receiver for tests: a real HTTP server on loopback that answers as told (statuses,
//! delays, in order) and keeps every request it got.
//!
//! Every webhook it gets (a request naming its topic in `X-Svc-Topic`) is checked against the
//! topic's JSON Schema, the one List Webhook Topics serves: a body that does not fit is recorded,
//! and reading the requests ([`Receiver::received`]) then fails the test, naming the topic, the
//! path of the value at fault and what is wrong.

use std::collections::{HashMap, VecDeque};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread;
use std::time::Duration;

/// One request as it arrived.
#[derive(Debug, Clone)]
pub struct Received {
    pub method: String,
    pub target: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Received {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(key, _)| key.eq_ignore_ascii_case(name))
            .map(|(_, value)| value.as_str())
    }
}

/// How to answer one request.
#[derive(Debug, Clone, Copy)]
pub struct Reply {
    pub status: u16,
    pub delay: Duration,
    /// Extra headers of the answer (e.g. `Retry-After`).
    pub headers: &'static [(&'static str, &'static str)],
}

impl Reply {
    pub fn status(status: u16) -> Reply {
        Reply {
            status,
            delay: Duration::ZERO,
            headers: &[],
        }
    }
}

/// Computes an answer's status and JSON body from the request (an override server).
pub type Responder = Arc<dyn Fn(&Received) -> (u16, String) + Send + Sync>;

#[derive(Default)]
struct State {
    received: Vec<Received>,
    /// What the webhooks received so far do not fit in their topic's schema.
    violations: Vec<String>,
    script: VecDeque<Reply>,
    otherwise: Option<Reply>,
}

/// The receiver; it runs until the test process ends.
#[derive(Clone)]
pub struct Receiver {
    pub url: String,
    state: Arc<Mutex<State>>,
}

fn read_request(reader: &mut BufReader<TcpStream>) -> Option<Received> {
    let mut line = String::new();
    if reader.read_line(&mut line).ok()? == 0 {
        return None;
    }
    let mut parts = line.split_whitespace();
    let method = parts.next()?.to_string();
    let target = parts.next()?.to_string();
    let mut headers = Vec::new();
    let mut length = 0;
    loop {
        line.clear();
        reader.read_line(&mut line).ok()?;
        let header = line.trim_end();
        if header.is_empty() {
            break;
        }
        let (name, value) = header.split_once(':')?;
        if name.eq_ignore_ascii_case("content-length") {
            length = value.trim().parse().ok()?;
        }
        headers.push((name.trim().to_string(), value.trim().to_string()));
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).ok()?;
    Some(Received {
        method,
        target,
        headers,
        body,
    })
}

impl Receiver {
    /// Starts a receiver that answers 200 unless told otherwise.
    pub fn start() -> Receiver {
        Self::listen(None)
    }

    /// Starts a server whose answers `responder` computes; a scripted reply's delay still
    /// applies first, and its status only when the responder is not asked.
    pub fn answering(
        responder: impl Fn(&Received) -> (u16, String) + Send + Sync + 'static,
    ) -> Receiver {
        Self::listen(Some(Arc::new(responder)))
    }

    fn listen(responder: Option<Responder>) -> Receiver {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind a receiver");
        let url = format!("http://{}", listener.local_addr().expect("an address"));
        let state = Arc::new(Mutex::new(State::default()));
        let shared = state.clone();
        thread::spawn(move || {
            for stream in listener.incoming().map_while(Result::ok) {
                let state = shared.clone();
                let responder = responder.clone();
                thread::spawn(move || {
                    let Ok(writer) = stream.try_clone() else {
                        return;
                    };
                    let mut writer = writer;
                    let mut reader = BufReader::new(stream);
                    while let Some(request) = read_request(&mut reader) {
                        let answered = responder.as_ref().map(|respond| respond(&request));
                        let violations = webhook_violations(&request);
                        let reply = {
                            let mut state = state.lock().unwrap_or_else(|e| e.into_inner());
                            state.violations.extend(violations);
                            state.received.push(request);
                            state
                                .script
                                .pop_front()
                                .or(state.otherwise)
                                .unwrap_or(Reply::status(200))
                        };
                        thread::sleep(reply.delay);
                        let (status, kind, body) = match answered {
                            Some((status, body)) => (status, "application/json", body),
                            None => (reply.status, "text/plain", "ok".to_string()),
                        };
                        let extra: String = reply
                            .headers
                            .iter()
                            .map(|(name, value)| format!("{name}: {value}\r\n"))
                            .collect();
                        let answer = format!(
                            "HTTP/1.1 {status} Status\r\nContent-Length: {}\r\nContent-Type: {kind}\r\n{extra}\r\n{body}",
                            body.len()
                        );
                        if writer.write_all(answer.as_bytes()).is_err() {
                            return;
                        }
                    }
                });
            }
        });
        Receiver { url, state }
    }

    /// The next requests get these answers, in order.
    pub fn script(&self, replies: &[Reply]) {
        self.state
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .script
            .extend(replies.iter().copied());
    }

    /// Once the script is used up, every request gets this answer.
    pub fn otherwise(&self, reply: Reply) {
        self.state
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .otherwise = Some(reply);
    }

    /// Every request received so far. Fails the test when a webhook among them does not fit
    /// its topic's schema.
    pub fn received(&self) -> Vec<Received> {
        let state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        assert!(
            state.violations.is_empty(),
            "webhooks that do not fit their topic's schema:\n{}",
            state.violations.join("\n")
        );
        state.received.clone()
    }

    /// What the webhooks received so far do not fit in their topic's schema, each naming the
    /// topic, the path of the value at fault and the error.
    pub fn violations(&self) -> Vec<String> {
        self.state
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .violations
            .clone()
    }
}

/// Every topic's schema, by name, from the domain's catalogue (what the topics routes serve).
pub fn topic_schemas() -> &'static HashMap<&'static str, serde_json::Value> {
    use mercer_domain::checkout::payloads::{self as checkout, Topic as CheckoutTopic};
    use mercer_domain::subscriptions::topics::{self as subscription, Topic};
    static SCHEMAS: OnceLock<HashMap<&'static str, serde_json::Value>> = OnceLock::new();
    SCHEMAS.get_or_init(|| {
        let subscription = Topic::ALL
            .into_iter()
            .map(|topic| (topic.as_str(), subscription::payload_schema(topic)));
        let checkout = CheckoutTopic::ALL
            .into_iter()
            .map(|topic| (topic.as_str(), checkout::payload_schema(topic)));
        subscription.chain(checkout).collect()
    })
}

/// What in `body` does not fit the schema of `topic`: one line per error, naming the topic and
/// the path of the value at fault.
pub fn payload_violations(topic: &str, body: &[u8]) -> Vec<String> {
    let Some(schema) = topic_schemas().get(topic) else {
        return vec![format!("{topic}: not a topic of the catalogue")];
    };
    let body: serde_json::Value = match serde_json::from_slice(body) {
        Ok(body) => body,
        Err(error) => return vec![format!("{topic}: the body is not JSON: {error}")],
    };
    let validator = match jsonschema::draft202012::new(schema) {
        Ok(validator) => validator,
        Err(error) => return vec![format!("{topic}: the schema does not compile: {error}")],
    };
    validator
        .iter_errors(&body)
        .map(|error| format!("{topic}: at {:?}: {error}", error.instance_path().as_str()))
        .collect()
}

/// A webhook's problems with its topic's schema; none for a request that is not a webhook.
fn webhook_violations(request: &Received) -> Vec<String> {
    match request.header("X-Svc-Topic") {
        Some(topic) => payload_violations(topic, &request.body),
        None => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn deliver(receiver: &Receiver, topic: &str, body: &str) {
        let body: serde_json::Value = serde_json::from_str(body).expect("a JSON body");
        ureq::post(format!("{}/hook", receiver.url))
            .header("X-Svc-Topic", topic)
            .send_json(body)
            .expect("the receiver answers");
    }

    #[test]
    fn a_webhook_that_does_not_fit_its_topics_schema_fails_the_reading() {
        let receiver = Receiver::start();
        let fits = r#"{"endpoint_id":"e","topic":"order/created","url":"http://127.0.0.1:9/",
            "failures_since":"2024-03-05T12:00:00Z","last_error":"HTTP 500"}"#;
        deliver(&receiver, "webhook/disabled", fits);
        assert_eq!(receiver.received().len(), 1);
        deliver(&receiver, "webhook/disabled", r#"{"endpoint_id":5}"#);
        let violations = receiver.violations();
        assert!(
            violations
                .iter()
                .any(|line| line.starts_with("webhook/disabled: at \"/endpoint_id\"")),
            "{violations:?}"
        );
        assert!(violations.iter().any(|line| line.contains("last_error")));
        let reading = std::panic::catch_unwind(|| receiver.received());
        assert!(reading.is_err(), "reading a bad webhook must fail the test");
    }
}
