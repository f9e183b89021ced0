//! What the server does at its edge, before and around the routes: how many connections one
//! client address may hold, how long a connection that says nothing is kept, the reference
//! page's security headers (and, in a real browser with no way off loopback, that it renders),
//! and links that never take their host from a request's headers.

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use mercer_tests::browser::{browser, report_skip};
use mercer_tests::{Backend, MercerServer, TestDatabase, backend_tests, wait_until};
use serde_json::{Value, json};

fn address(server: &MercerServer) -> SocketAddr {
    server
        .base_url
        .trim_start_matches("http://")
        .parse()
        .unwrap()
}

/// A connection to `target` from the loopback address `source` (Linux answers on all of
/// 127.0.0.0/8), that sends nothing yet.
fn connect_from(source: [u8; 4], target: SocketAddr) -> TcpStream {
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    socket.bind(&SocketAddr::from((source, 0)).into()).unwrap();
    socket.connect(&target.into()).unwrap();
    socket.into()
}

const HERE: [u8; 4] = [127, 0, 0, 1];
const ELSEWHERE: [u8; 4] = [127, 0, 0, 2];

#[derive(Debug, PartialEq)]
enum Seen {
    /// Nothing to read yet: the connection is open.
    Open,
    /// The server closed it (end of stream, or a reset) without writing a byte.
    ClosedSilently,
    /// The server wrote something.
    Wrote(String),
}

/// What `stream` shows now, without waiting.
fn look(stream: &TcpStream) -> Seen {
    stream.set_nonblocking(true).unwrap();
    let mut bytes = [0u8; 256];
    let seen = match (&*stream).read(&mut bytes) {
        Ok(0) => Seen::ClosedSilently,
        Ok(n) => Seen::Wrote(String::from_utf8_lossy(&bytes[..n]).into_owned()),
        Err(error) if error.kind() == ErrorKind::WouldBlock => Seen::Open,
        Err(_) => Seen::ClosedSilently,
    };
    stream.set_nonblocking(false).unwrap();
    seen
}

/// Sends `GET /healthz` on `stream` and answers the status line (empty when the connection
/// was closed instead).
fn healthz(stream: &mut TcpStream) -> String {
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    if stream
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: mercer\r\n\r\n")
        .is_err()
    {
        return String::new();
    }
    let mut answer = Vec::new();
    let mut byte = [0u8; 1];
    while !answer.ends_with(b"\r\n") {
        match stream.read(&mut byte) {
            Ok(1) => answer.push(byte[0]),
            _ => break,
        }
    }
    String::from_utf8_lossy(&answer).trim().to_string()
}

/// 300 silent connections from one address, past its cap of 50: the 250 over it are closed at
/// once, with no answer; the 50 are kept and served. Another client address is served
/// meanwhile, and the first one is again once its connections close.
fn one_client_address_holds_at_most_its_cap_of_connections(backend: Backend) {
    let server = MercerServer::start_with(
        TestDatabase::create_migrated(backend),
        // A long first-byte deadline: what closes connections here is the cap alone.
        &[
            "--max-connections-per-ip",
            "50",
            "--first-byte-timeout-s",
            "120",
        ],
    );
    let target = address(&server);
    let streams: Vec<TcpStream> = (0..300).map(|_| connect_from(HERE, target)).collect();
    let settled = wait_until(Duration::from_secs(30), || {
        streams
            .iter()
            .filter(|stream| look(stream) == Seen::ClosedSilently)
            .count()
            == 250
    });
    let seen: Vec<Seen> = streams.iter().map(look).collect();
    assert!(
        settled,
        "closed: {}, open: {}, written to: {:?}",
        seen.iter().filter(|s| **s == Seen::ClosedSilently).count(),
        seen.iter().filter(|s| **s == Seen::Open).count(),
        seen.iter().find(|s| matches!(s, Seen::Wrote(_)))
    );
    let mut held: Vec<TcpStream> = streams
        .into_iter()
        .zip(&seen)
        .filter(|(_, seen)| **seen == Seen::Open)
        .map(|(stream, _)| stream)
        .collect();
    assert_eq!(held.len(), 50, "{seen:?}");

    // One more from the same address is closed at once (long before any deadline)...
    let mut one_more = connect_from(HERE, target);
    assert_eq!(healthz(&mut one_more), "", "served past the cap");
    // ...while another client address is served.
    let mut elsewhere = connect_from(ELSEWHERE, target);
    assert_eq!(healthz(&mut elsewhere), "HTTP/1.1 200 OK");

    // The 50 kept are served.
    for stream in &mut held {
        assert_eq!(healthz(stream), "HTTP/1.1 200 OK");
    }
    // Once they close, the address is served again.
    drop(held);
    let served = wait_until(Duration::from_secs(20), || {
        healthz(&mut connect_from(HERE, target)) == "HTTP/1.1 200 OK"
    });
    assert!(
        served,
        "the address is not served after its connections closed"
    );
}

/// Connections that never send a byte are closed once the first-byte deadline passes, without
/// an answer; one that sends its request is served as usual.
fn a_connection_that_sends_nothing_is_closed_after_the_first_byte_deadline(backend: Backend) {
    let server = MercerServer::start_with(
        TestDatabase::create_migrated(backend),
        &[
            "--first-byte-timeout-s",
            "1",
            "--max-connections-per-ip",
            "0",
        ],
    );
    let target = address(&server);
    let silent: Vec<TcpStream> = (0..300).map(|_| connect_from(HERE, target)).collect();
    let mut prompt = connect_from(HERE, target);
    assert_eq!(healthz(&mut prompt), "HTTP/1.1 200 OK");
    let closed = wait_until(Duration::from_secs(60), || {
        silent.iter().all(|stream| look(stream) != Seen::Open)
    });
    let seen: Vec<Seen> = silent.iter().map(look).collect();
    assert!(
        closed,
        "still open after 60 s: {}",
        seen.iter().filter(|s| **s == Seen::Open).count()
    );
    assert!(
        seen.iter().all(|s| *s == Seen::ClosedSilently),
        "a silent connection got an answer: {:?}",
        seen.iter().find(|s| matches!(s, Seen::Wrote(_)))
    );
    // The server serves new connections afterwards.
    assert_eq!(healthz(&mut connect_from(HERE, target)), "HTTP/1.1 200 OK");
}

/// Sends `request` (a whole HTTP/1.1 request with `Connection: close`) and answers the status
/// line and the JSON body.
fn raw_exchange(server: &MercerServer, request: &str) -> (String, Value) {
    let mut stream = TcpStream::connect(address(server)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    stream.write_all(request.as_bytes()).unwrap();
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).unwrap();
    let answer = String::from_utf8_lossy(&answer).into_owned();
    let (head, body) = answer.split_once("\r\n\r\n").expect("an answer's head");
    let status = head.lines().next().unwrap_or_default().to_string();
    (status, serde_json::from_str(body).unwrap_or(Value::Null))
}

/// The directory's page links with every header that names a host forged: each is either
/// relative or under the configured public URL, never on the forged host.
fn page_links_never_take_their_host_from_the_request(backend: Backend) {
    let forged_headers = "Host: evil.example\r\nX-Forwarded-Host: evil.example\r\n\
                          X-Forwarded-Proto: https\r\nForwarded: host=evil.example;proto=https\r\n";
    for public_url in [None, Some("https://api.example.test/mercer/")] {
        let mut args = vec![];
        if let Some(url) = public_url {
            args.extend(["--public-url", url]);
        }
        let server = MercerServer::in_process_with(backend, &args);
        let demo = server.demo().clone();
        for id in 1..=3 {
            let saved = server
                .post(&format!(
                    "/customers/v1/shops/{}/platforms/custom/webhooks/customers/saved",
                    demo.shop
                ))
                .bearer(&demo.token)
                .json(&json!({"data": {"customer": {
                    "platform_id": format!("c{id}"),
                    "platform_updated_at": "2026-01-01T00:00:00Z",
                    "email": format!("c{id}@example.test"),
                }}}));
            assert_eq!(saved.status, 202, "{}", saved.text);
        }
        let list = format!("/customers/v2/shops/{}/customers", demo.shop);
        let applied = wait_until(Duration::from_secs(30), || {
            server.get(&list).bearer(&demo.token).call().json()["pagination"]["total"] == 3
        });
        assert!(applied, "the three customers are listed");

        let (status, body) = raw_exchange(
            &server,
            &format!(
                "GET {list}?limit=1&page=2 HTTP/1.1\r\n{forged_headers}\
                 Authorization: Bearer {}\r\nConnection: close\r\n\r\n",
                demo.token
            ),
        );
        assert_eq!(status, "HTTP/1.1 200 OK", "{body}");
        let next = body["pagination"]["next_url"].as_str().unwrap().to_string();
        let previous = body["pagination"]["previous_url"]
            .as_str()
            .unwrap()
            .to_string();
        let base = match public_url {
            Some(_) => "https://api.example.test/mercer",
            None => "",
        };
        assert_eq!(next, format!("{base}{list}?limit=1&page=3"));
        assert_eq!(previous, format!("{base}{list}?limit=1&page=1"));
        for link in [&next, &previous] {
            assert!(!link.contains("evil"), "{link}");
            assert!(!link.starts_with("//"), "{link}");
        }
    }
}

backend_tests!(
    one_client_address_holds_at_most_its_cap_of_connections,
    a_connection_that_sends_nothing_is_closed_after_the_first_byte_deadline,
    page_links_never_take_their_host_from_the_request,
);

/// `GET /docs` cannot be framed, has its type fixed, and may run only its own inline blocks
/// (by hash) and reach only this server; a client holding the page gets a 304.
#[test]
fn the_reference_page_forbids_framing_sniffing_and_anything_from_elsewhere() {
    let server = MercerServer::in_process(Backend::Sqlite);
    let page = server.get("/docs").call();
    assert_eq!(page.status, 200);
    assert_eq!(page.header("x-frame-options"), Some("DENY"));
    assert_eq!(page.header("x-content-type-options"), Some("nosniff"));
    let policy = page.header("content-security-policy").unwrap_or_default();
    let directive = |name: &str| {
        policy
            .split(';')
            .map(str::trim)
            .find_map(|part| part.strip_prefix(name))
            .map(|sources| sources.split_whitespace().collect::<Vec<_>>())
            .unwrap_or_else(|| panic!("no {name} in {policy}"))
    };
    assert_eq!(directive("default-src "), ["'none'"]);
    assert_eq!(directive("frame-ancestors "), ["'none'"]);
    assert_eq!(directive("connect-src "), ["'self'"]);
    let scripts = directive("script-src ");
    assert!(
        !scripts.is_empty() && scripts.iter().all(|source| source.starts_with("'sha256-")),
        "scripts other than the page's own blocks: {policy}"
    );
    assert!(
        directive("style-src ")
            .iter()
            .all(|source| source.starts_with("'sha256-")),
        "{policy}"
    );
    assert!(
        !page.text.contains("src=\"http") && !page.text.contains("href=\"http"),
        "the page loads something from elsewhere"
    );
    let etag = page.header("etag").expect("an ETag").to_string();
    let again = server.get("/docs").header("If-None-Match", &etag).call();
    assert_eq!(again.status, 304);
    assert!(again.text.is_empty());
    assert_eq!(again.header("x-frame-options"), Some("DENY"));
}

/// The reference page in headless Chromium, every request off loopback refused: the list of
/// operations renders from what Mercer serves alone, the page asks for nothing elsewhere, and
/// its content security policy refuses nothing it needs.
#[test]
fn the_reference_page_renders_in_a_browser_with_no_way_off_loopback() {
    let browser = match browser() {
        Ok(browser) => browser,
        Err(skipped) => {
            report_skip(&skipped);
            return;
        }
    };
    let server = MercerServer::in_process(Backend::Sqlite);
    let view = browser.reference_page(&server.url("/docs"));
    assert_eq!(view.status, 200);
    assert_eq!(view.title, "Mercer API");
    assert!(
        view.summaries
            .iter()
            .any(|summary| summary.contains("Get a customer by ID")),
        "{:?}",
        view.summaries
    );
    // The example bodies are built from the types and their fields' examples, not `null`.
    let example = |summary: &str| -> serde_json::Value {
        let text = view.examples[summary].as_str().unwrap_or_default();
        serde_json::from_str(text).unwrap_or_else(|error| panic!("{summary}: {error}: {text:?}"))
    };
    let subscription = example("Create a subscription");
    assert_eq!(
        subscription["customer"]["email"], "ada@example.com",
        "{subscription}"
    );
    assert_eq!(
        subscription["subscription"]["line_items"][0]["platform_variant_id"], "2001",
        "{subscription}"
    );
    let destination = example("Create a destination");
    assert_eq!(
        destination["data"]["destination"]["destination"], "https://connector.example.com/mercer",
        "{destination}"
    );
    assert!(view.off_loopback.is_empty(), "{:?}", view.off_loopback);
    assert!(view.refused.is_empty(), "{:?}", view.refused);
    assert!(view.errors.is_empty(), "{:?}", view.errors);
}
