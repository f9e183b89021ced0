//! HTTP Message Signatures on connector calls, end to end: a destination that only echoes the
//! `X-HMAC` it receives (it holds no secret) is registered while the shop does not require
//! message signatures, and refused once it does, while the simulator (which proves the secret)
//! is registered either way; and no signing header reaches the log, even at trace level.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::time::Duration;

use mercer_platform_sim::RunningSimulator;
use mercer_tests::{Answer, Backend, MercerServer, TestDatabase, backend_tests, wait_until};
use serde_json::json;

/// A destination that knows no secret: it answers every request 200 `{}` with the request's own
/// `X-HMAC` copied into its answer. Bound to loopback only; it serves until the test ends.
fn echo_destination() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { continue };
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream);
                let mut echoed = String::new();
                let mut line = String::new();
                while reader.read_line(&mut line).is_ok_and(|read| read > 2) {
                    if let Some((name, value)) = line.split_once(':')
                        && name.eq_ignore_ascii_case("x-hmac")
                    {
                        echoed = value.trim().to_string();
                    }
                    line.clear();
                }
                let answer = format!(
                    "HTTP/1.1 200 OK\r\nX-HMAC: {echoed}\r\nContent-Type: application/json\r\n\
                     Content-Length: 2\r\nConnection: close\r\n\r\n{{}}"
                );
                let _ = reader.get_mut().write_all(answer.as_bytes());
            });
        }
    });
    url
}

struct Shop {
    server: MercerServer,
    shop: String,
    token: String,
}

impl Shop {
    /// Mercer on loopback targets, its demo shop, and `require` set by `mercer shop update`
    /// before any API call reads the shop.
    fn start(backend: Backend, require: Option<&str>, extra: &[&str]) -> Shop {
        let mut args = vec!["--allow-private-targets"];
        args.extend_from_slice(extra);
        let server = MercerServer::start_with(TestDatabase::create(backend), &args);
        let demo = server.demo().clone();
        if let Some(setting) = require {
            let output = server.cli(&[
                "shop",
                "update",
                "--shop",
                &demo.shop,
                "--require-message-signatures",
                setting,
            ]);
            assert!(
                output
                    .stderr
                    .contains(&format!("message signatures required {setting}")),
                "{}",
                output.stderr
            );
        }
        Shop {
            server,
            shop: demo.shop,
            token: demo.token,
        }
    }

    fn simulator(&self) -> RunningSimulator {
        let sim = RunningSimulator::start().unwrap();
        let secret = self.server.demo().connector_secret.clone();
        sim.simulator.add_shop(&self.shop, &secret, None);
        sim
    }

    fn destinations(&self) -> String {
        format!(
            "/integrations/v1/shops/{}/platform_connector_destinations",
            self.shop
        )
    }

    fn create(&self, topic: &str, url: &str) -> Answer {
        let body = json!({"data": {"destination": {"topic": topic, "destination": url, "timeout_ms": 5000}}});
        self.server
            .post(&self.destinations())
            .bearer(&self.token)
            .json(&body)
    }

    fn live(&self) -> usize {
        let listed = self
            .server
            .get(&self.destinations())
            .bearer(&self.token)
            .call();
        assert_eq!(listed.status, 200, "{}", listed.text);
        listed.json()["data"]["destinations"]
            .as_array()
            .unwrap()
            .len()
    }
}

fn an_echo_of_x_hmac_registers_while_message_signatures_are_not_required(backend: Backend) {
    let shop = Shop::start(backend, None, &[]);
    let echoed = shop.create("customers", &echo_destination());
    assert_eq!(echoed.status, 200, "the original scheme: {}", echoed.text);
    let sim = shop.simulator();
    let answer = shop.create("orders", &sim.base_url);
    assert_eq!(answer.status, 200, "{}", answer.text);
    assert_eq!(shop.live(), 2);
}

fn a_shop_requiring_message_signatures_refuses_an_echo_and_takes_the_simulator(backend: Backend) {
    let shop = Shop::start(backend, Some("on"), &[]);
    let echoed = shop.create("customers", &echo_destination());
    let errors = echoed.assert_error(502, "connector.verification_failed");
    let message = errors[0]["message"].as_str().unwrap_or_default();
    assert!(message.contains("X-Verification-Proof"), "{}", echoed.text);
    assert_eq!(shop.live(), 0, "nothing was stored");
    let sim = shop.simulator();
    let answer = shop.create("customers", &sim.base_url);
    assert_eq!(answer.status, 200, "{}", answer.text);
    assert_eq!(shop.live(), 1);
    // Updating to the echo is refused too, and leaves the destination as it was.
    let id = answer.json()["data"]["destination"]["id"].as_i64().unwrap();
    let moved = shop
        .server
        .request("PATCH", &format!("{}/{id}", shop.destinations()))
        .bearer(&shop.token)
        .json(&json!({"data": {"destination": {"destination": echo_destination()}}}));
    moved.assert_error(502, "connector.verification_failed");
    let kept = shop
        .server
        .get(&format!("{}/{id}", shop.destinations()))
        .bearer(&shop.token)
        .call();
    assert_eq!(
        kept.json()["data"]["destination"]["destination"],
        sim.base_url.as_str()
    );
}

/// Every 12 characters in a row of `value`: a signature split over lines of a byte dump still
/// shows one of them.
fn pieces(value: &str) -> Vec<String> {
    let chars: Vec<char> = value.chars().collect();
    chars
        .windows(12.min(chars.len()))
        .map(|window| window.iter().collect())
        .collect()
}

fn signing_headers_stay_out_of_the_log_at_trace_level(backend: Backend) {
    let shop = Shop::start(backend, None, &["--log-level", "trace"]);
    let sim = shop.simulator();
    let answer = shop.create("customers", &sim.base_url);
    assert_eq!(answer.status, 200, "{}", answer.text);
    let sent: Vec<String> = sim
        .simulator
        .lock()
        .requests
        .iter()
        .flat_map(|request| request.signing_headers.clone())
        .collect();
    assert!(
        sent.len() >= 4,
        "X-HMAC, X-Compatible-HMAC, Signature-Input, Signature: {sent:?}"
    );
    // The outgoing call was logged (ureq's own lines), so the log was looked at its fullest.
    let logged = wait_until(Duration::from_secs(5), || {
        shop.server.log().contains("POST /integrations/v1/shops/")
    });
    let log = shop.server.log();
    assert!(logged, "{log}");
    assert!(
        log.contains("TRACE") || log.contains("DEBUG"),
        "a trace-level log"
    );
    for value in &sent {
        for piece in pieces(value) {
            assert!(
                !log.contains(&piece),
                "the log holds a signing header ({value}):\n{log}"
            );
        }
    }
    assert!(!log.to_ascii_lowercase().contains("x-hmac:"), "{log}");
}

backend_tests!(
    an_echo_of_x_hmac_registers_while_message_signatures_are_not_required,
    a_shop_requiring_message_signatures_refuses_an_echo_and_takes_the_simulator,
    signing_headers_stay_out_of_the_log_at_trace_level,
);
