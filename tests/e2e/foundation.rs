//! Errors, credentials and scopes end to end: credentials, scopes, shop scoping, the version header, and the
//! error body of every failure, the framework's own included.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use mercer_tests::{Answer, Backend, MercerServer, backend_tests};
use serde_json::{Value, json};

const UNKNOWN_SHOP: &str = "ffffffffffffffffffffffffffffffff";

fn shop_path(shop: &str) -> String {
    format!("/subscriptions/v1/shops/{shop}/shop")
}

fn config_path(shop: &str) -> String {
    format!("/checkout/shop/{shop}/integration/config")
}

/// A second shop with a token of its own, made with the operator CLI.
fn other_shop(server: &MercerServer) -> (String, String) {
    let shop = server
        .cli(&["shop", "create", "--domain", "other.shop.test"])
        .values()[0]
        .clone();
    let token = server
        .cli(&["token", "create", "--shop", &shop, "--scope", "all"])
        .value();
    (shop, token)
}

fn get_shop_information_answers_with_the_demo_token(backend: Backend) {
    let server = MercerServer::in_process(backend);
    let demo = server.demo().clone();
    let answer = server
        .get(&shop_path(&demo.shop))
        .bearer(&demo.token)
        .call();
    assert_eq!(answer.status, 200, "{}", answer.text);
    let shop = &answer.json()["shop"];
    let keys: Vec<&str> = shop
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        [
            "id",
            "shop_domain",
            "custom_domain",
            "shop_identifer",
            "platform_type",
            "timezone",
            "currency",
            "currency_format",
            "shop_owner",
            "admin_email",
            "pii_redacted_at",
            "created_at",
            "updated_at",
            "deleted_at"
        ],
        "the Shop resource's fields, with its spelling `shop_identifer`"
    );
    assert_eq!(shop["shop_identifer"], demo.shop.as_str());
    assert_eq!(shop["shop_domain"], "demo.mercer.test");
    assert_eq!(shop["platform_type"], "custom");
    assert!(shop["id"].is_i64());
    let created = shop["created_at"].as_str().unwrap();
    assert!(
        created.ends_with('Z') && created.contains('T'),
        "RFC 3339 UTC: {created}"
    );
    assert_eq!(shop["deleted_at"], Value::Null);
    assert_eq!(answer.header("Svc-API-Version-Date"), Some("2022-05-01"));
}

fn missing_or_bad_credentials_are_401(backend: Backend) {
    let server = MercerServer::in_process(backend);
    let demo = server.demo().clone();
    let path = shop_path(&demo.shop);
    let none = server.get(&path).call();
    let entries = none.assert_error(401, "auth.unauthenticated");
    assert_eq!(entries[0]["severity"], "critical");
    assert_eq!(none.header("WWW-Authenticate"), Some("Bearer"));
    server
        .get(&path)
        .bearer("mct_not-a-real-token")
        .call()
        .assert_error(401, "auth.unauthenticated");
    server
        .get(&path)
        .header("Authorization", &format!("Basic {}", demo.token))
        .call()
        .assert_error(401, "auth.unauthenticated");
    // Credentials are checked before the shop: an unknown shop without a token is 401 too.
    server
        .get(&shop_path(UNKNOWN_SHOP))
        .call()
        .assert_error(401, "auth.unauthenticated");
}

fn a_token_of_another_shop_is_403(backend: Backend) {
    let server = MercerServer::in_process(backend);
    let demo = server.demo().clone();
    let (other, other_token) = other_shop(&server);
    let answer = server
        .get(&shop_path(&demo.shop))
        .bearer(&other_token)
        .call();
    let entries = answer.assert_error(403, "auth.forbidden");
    assert_eq!(entries[0]["sub_type"], "other_shop");
    // The same token works on its own shop.
    let own = server.get(&shop_path(&other)).bearer(&other_token).call();
    assert_eq!(own.status, 200);
    assert_eq!(own.json()["shop"]["shop_domain"], "other.shop.test");
}

/// A process keeps successful authorizations for 2 s, keyed by token *and* shop: a token just
/// granted on its own shop is still refused on another shop's path, however warm the cache.
fn a_token_cached_on_its_own_shop_is_refused_on_another(backend: Backend) {
    let server = MercerServer::in_process(backend);
    let demo = server.demo().clone();
    let (other, other_token) = other_shop(&server);
    for (own, token, foreign) in [
        (&other, &other_token, &demo.shop),
        (&demo.shop, &demo.token, &other),
    ] {
        let cached_at = std::time::Instant::now();
        assert_eq!(server.get(&shop_path(own)).bearer(token).call().status, 200);
        let answer = server.get(&shop_path(foreign)).bearer(token).call();
        assert!(
            cached_at.elapsed() < Duration::from_secs(2),
            "the second request must come while the first one's grant is cached"
        );
        let entries = answer.assert_error(403, "auth.forbidden");
        assert_eq!(entries[0]["sub_type"], "other_shop");
    }
}

fn a_token_without_the_scope_is_403(backend: Backend) {
    let server = MercerServer::in_process(backend);
    let demo = server.demo().clone();
    let limited = server
        .cli(&[
            "token",
            "create",
            "--shop",
            &demo.shop,
            "--scope",
            "read_orders,read_customers",
        ])
        .value();
    let answer = server.get(&shop_path(&demo.shop)).bearer(&limited).call();
    let entries = answer.assert_error(403, "auth.forbidden");
    assert_eq!(entries[0]["sub_type"], "missing_scope");
    assert!(
        entries[0]["message"]
            .as_str()
            .unwrap()
            .contains("read_subscriptions")
    );
    let scoped = server
        .cli(&[
            "token",
            "create",
            "--shop",
            &demo.shop,
            "--scope",
            "read_subscriptions",
        ])
        .value();
    assert_eq!(
        server
            .get(&shop_path(&demo.shop))
            .bearer(&scoped)
            .call()
            .status,
        200
    );
}

fn an_unknown_shop_is_404(backend: Backend) {
    let server = MercerServer::in_process(backend);
    let token = server.demo().token.clone();
    let entries = server
        .get(&shop_path(UNKNOWN_SHOP))
        .bearer(&token)
        .call()
        .assert_error(404, "resource.not_found");
    assert_eq!(entries[0]["sub_type"], "shop");
    // An identifier that is not 32 lowercase hex names no shop either.
    server
        .get(&shop_path("DEMO"))
        .bearer(&token)
        .call()
        .assert_error(404, "resource.not_found");
}

fn the_version_header_is_checked(backend: Backend) {
    let server = MercerServer::in_process(backend);
    let demo = server.demo().clone();
    let path = shop_path(&demo.shop);
    let call = |value: &str| {
        server
            .get(&path)
            .bearer(&demo.token)
            .header("Svc-API-Version-Date", value)
            .call()
    };
    for malformed in ["2022-5-1", "not-a-date", "2022-02-30"] {
        let entries = call(malformed).assert_error(400, "version.malformed");
        assert_eq!(entries[0]["field"], "Svc-API-Version-Date");
        assert_eq!(entries[0]["severity"], "validation");
    }
    call("2022-04-30").assert_error(400, "version.unsupported");
    let ok = call("2024-01-15");
    assert_eq!(ok.status, 200);
    assert_eq!(ok.header("Svc-API-Version-Date"), Some("2022-05-01"));
    // The header is checked on every route, before credentials.
    server
        .get(&shop_path(UNKNOWN_SHOP))
        .header("Svc-API-Version-Date", "1999-01-01")
        .call()
        .assert_error(400, "version.unsupported");
}

fn unknown_routes_and_wrong_methods_get_the_error_body(backend: Backend) {
    let server = MercerServer::in_process(backend);
    let demo = server.demo().clone();
    server
        .get("/no/such/route")
        .call()
        .assert_error(404, "resource.not_found");
    let wrong = server
        .request("DELETE", &shop_path(&demo.shop))
        .bearer(&demo.token)
        .call();
    wrong.assert_error(405, "request.method_not_allowed");
    server
        .get(&config_path(&demo.shop))
        .bearer(&demo.token)
        .call()
        .assert_error(405, "request.method_not_allowed");
}

fn json_bodies_are_checked_in_order(backend: Backend) {
    let server = MercerServer::in_process(backend);
    let demo = server.demo().clone();
    let path = config_path(&demo.shop);
    let post = || server.post(&path).bearer(&demo.token);

    let malformed = post()
        .header("Content-Type", "application/json")
        .send_bytes(Some(b"{\"shared_secret\": ".to_vec()));
    malformed.assert_error(400, "request.malformed_json");
    let empty = post()
        .header("Content-Type", "application/json")
        .send_bytes(Some(Vec::new()));
    empty.assert_error(400, "request.malformed_json");

    let untyped = post().send_bytes(Some(br#"{"shared_secret":"long-enough-secret"}"#.to_vec()));
    untyped.assert_error(415, "request.unsupported_media_type");
    let form = post()
        .header("Content-Type", "application/x-www-form-urlencoded")
        .send_bytes(Some(b"shared_secret=long-enough-secret".to_vec()));
    form.assert_error(415, "request.unsupported_media_type");

    let big = format!(r#"{{"shared_secret":"{}"}}"#, "x".repeat(1024 * 1024 + 10));
    let too_large = post()
        .header("Content-Type", "application/json")
        .send_bytes(Some(big.into_bytes()));
    too_large.assert_error(413, "request.too_large");

    let missing = post().json(&json!({}));
    let entries = missing.assert_error(422, "validation.failed");
    assert_eq!(entries[0]["field"], "shared_secret");
    assert_eq!(entries[0]["sub_type"], "required");
    let wrong_type = post().json(&json!({ "shared_secret": 12345678 }));
    let entries = wrong_type.assert_error(422, "validation.failed");
    assert_eq!(entries[0]["field"], "shared_secret");
    for bad in ["short", &"x".repeat(256)] {
        let entries = post()
            .json(&json!({ "shared_secret": bad }))
            .assert_error(422, "validation.failed");
        assert_eq!(entries[0]["sub_type"], "length");
    }

    // Credentials come before the body: a bad body without a token is 401.
    server
        .post(&path)
        .header("Content-Type", "application/json")
        .send_bytes(Some(b"{not json".to_vec()))
        .assert_error(401, "auth.unauthenticated");
}

fn configuring_the_integration_secret_never_returns_it(backend: Backend) {
    let server = MercerServer::in_process(backend);
    let demo = server.demo().clone();
    let secret = "integration-secret-4f8a";
    let answer = server
        .post(&config_path(&demo.shop))
        .bearer(&demo.token)
        .json(&json!({ "shared_secret": secret }));
    assert_eq!(answer.status, 200, "{}", answer.text);
    let body = answer.json();
    assert_eq!(body["data"]["configured"], true);
    assert!(body["data"]["updated_at"].as_str().unwrap().ends_with('Z'));
    assert!(!answer.text.contains(secret));

    let limited = server
        .cli(&[
            "token",
            "create",
            "--shop",
            &demo.shop,
            "--scope",
            "read_shop_settings",
        ])
        .value();
    server
        .post(&config_path(&demo.shop))
        .bearer(&limited)
        .json(&json!({ "shared_secret": secret }))
        .assert_error(403, "auth.forbidden");
}

fn the_connector_secret_rotates_through_the_api(backend: Backend) {
    let server = MercerServer::in_process(backend);
    let demo = server.demo().clone();
    let path = format!("/integrations/v1/shops/{}/shared_secret/rotate", demo.shop);
    let first = server.post(&path).bearer(&demo.token).call();
    assert_eq!(first.status, 200, "{}", first.text);
    let first_secret = first.json()["data"]["shared_secret"]
        .as_str()
        .unwrap()
        .to_string();
    // The shop had its secret from creation (the demo printed it): rotating starts a grace.
    assert_ne!(first_secret, demo.connector_secret);
    assert!(first.json()["data"]["previous_valid_until"].is_string());
    let second = server.post(&path).bearer(&demo.token).call().json();
    assert_ne!(second["data"]["shared_secret"], first_secret.as_str());
    assert!(
        second["data"]["previous_valid_until"].is_string(),
        "a rotation starts a grace period"
    );
    server
        .post(&path)
        .call()
        .assert_error(401, "auth.unauthenticated");
}

fn secrets_and_tokens_never_reach_the_log(backend: Backend) {
    let server = MercerServer::start(backend);
    let demo = server.demo().clone();
    let secret = "integration-secret-in-log-check";
    server
        .post(&config_path(&demo.shop))
        .bearer(&demo.token)
        .json(&json!({ "shared_secret": secret }));
    let rotated = server
        .post(&format!(
            "/integrations/v1/shops/{}/shared_secret/rotate",
            demo.shop
        ))
        .bearer(&demo.token)
        .call()
        .json();
    let connector_secret = rotated["data"]["shared_secret"]
        .as_str()
        .unwrap()
        .to_string();
    server
        .get(&format!(
            "{}?token=query-secret-value",
            shop_path(&demo.shop)
        ))
        .bearer(&demo.token)
        .call();
    let logged = mercer_tests::wait_until(std::time::Duration::from_secs(5), || {
        server.log().contains("GET /subscriptions/v1/shops/")
    });
    let log = server.log();
    assert!(logged, "one line per request: {log}");
    for leaked in [
        demo.token.as_str(),
        secret,
        connector_secret.as_str(),
        "query-secret-value",
    ] {
        assert!(!log.contains(leaked), "the log holds a secret: {log}");
    }
}

fn a_revoked_token_is_refused(backend: Backend) {
    let server = MercerServer::in_process(backend);
    let demo = server.demo().clone();
    let token = server
        .cli(&[
            "token",
            "create",
            "--shop",
            &demo.shop,
            "--scope",
            "all",
            "--name",
            "to-revoke",
        ])
        .value();
    assert_eq!(
        server
            .get(&shop_path(&demo.shop))
            .bearer(&token)
            .call()
            .status,
        200
    );
    let listing = server.cli(&["token", "list", "--shop", &demo.shop]);
    let line = listing
        .stdout
        .lines()
        .find(|l| l.contains("to-revoke"))
        .expect("the token is listed");
    assert!(
        !listing.stdout.contains(&token),
        "a listing never shows a token"
    );
    let id = line.split_whitespace().next().unwrap();
    assert!(
        server
            .cli(&["token", "revoke", "--shop", &demo.shop, id])
            .success
    );
    // A process keeps a successful authorization for up to 2 s; revocation (here by another
    // process, the CLI) takes effect within that.
    let revoked_at = std::time::Instant::now();
    let refused = mercer_tests::wait_until(std::time::Duration::from_secs(5), || {
        server
            .get(&shop_path(&demo.shop))
            .bearer(&token)
            .call()
            .status
            == 401
    });
    assert!(refused, "the revoked token is refused");
    assert!(
        revoked_at.elapsed() < std::time::Duration::from_millis(2600),
        "within the 2 s cache lifetime"
    );
    server
        .get(&shop_path(&demo.shop))
        .bearer(&token)
        .call()
        .assert_error(401, "auth.unauthenticated");
    assert_eq!(
        server
            .get(&shop_path(&demo.shop))
            .bearer(&demo.token)
            .call()
            .status,
        200,
        "other tokens still work"
    );
}

fn internal_errors_leak_nothing(backend: Backend) {
    let server = MercerServer::start(backend);
    let demo = server.demo().clone();
    server.database().execute("DROP TABLE shared_secrets");
    let answer = server
        .post(&config_path(&demo.shop))
        .bearer(&demo.token)
        .json(&json!({ "shared_secret": "long-enough-secret" }));
    let entries = answer.assert_error(500, "internal.error");
    assert_eq!(entries[0]["message"], "internal error");
    for internal in ["shared_secrets", "table", "relation", "SELECT", "INSERT"] {
        assert!(!answer.text.contains(internal), "{}", answer.text);
    }
    // The log is read from the process's stderr by a thread of the harness: give it a moment.
    let logged = mercer_tests::wait_until(std::time::Duration::from_secs(5), || {
        server.log().contains("shared_secrets")
    });
    assert!(logged, "the detail goes to the log instead");
}

fn health_and_readiness(backend: Backend) {
    let server = MercerServer::in_process(backend);
    let health = server.get("/healthz").call();
    assert_eq!(health.status, 200);
    assert_eq!(health.json()["status"], "ok");
    let ready = server.get("/readyz").call();
    assert_eq!(ready.status, 200);
    assert_eq!(ready.json()["database"], backend.name());
}

/// Reads one answer off a raw connection: its head, then `content-length` bytes of body.
fn read_answer(stream: &mut TcpStream) -> Answer {
    let mut head = Vec::new();
    let mut byte = [0u8];
    while !head.ends_with(b"\r\n\r\n") {
        stream.read_exact(&mut byte).expect("an answer head");
        head.push(byte[0]);
    }
    let head = String::from_utf8(head).expect("an ASCII head");
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|line| line.split(' ').nth(1))
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("no status line in {head}"));
    let headers: Vec<(String, String)> = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.to_string(), value.trim().to_string()))
        .collect();
    let length = headers
        .iter()
        .find(|(name, _)| name.eq_ignore_ascii_case("content-length"))
        .and_then(|(_, value)| value.parse().ok())
        .unwrap_or_else(|| panic!("no content-length in {head}"));
    let mut body = vec![0; length];
    stream.read_exact(&mut body).expect("the answer's body");
    Answer {
        status,
        headers,
        text: String::from_utf8(body).expect("a UTF-8 body"),
    }
}

/// httparse refuses a head with a control byte in a header value before any app code runs;
/// the answer is still the JSON error body, and ordinary keep-alive connections are untouched.
fn a_header_with_a_control_byte_gets_the_error_body(backend: Backend) {
    let server = MercerServer::in_process(backend);
    let address = server.base_url.trim_start_matches("http://").to_string();
    let healthz = format!("GET /healthz HTTP/1.1\r\nHost: {address}\r\n\r\n");
    let connect = || {
        let stream = TcpStream::connect(&address).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        stream
    };

    let mut keep_alive = connect();
    for _ in 0..3 {
        keep_alive.write_all(healthz.as_bytes()).unwrap();
        let answer = read_answer(&mut keep_alive);
        assert_eq!(answer.status, 200, "{}", answer.text);
        assert_eq!(answer.json()["status"], "ok");
        assert_eq!(
            answer.header("connection"),
            None,
            "the connection stays open"
        );
    }

    for control in [0x01u8, 0x7f, 0x00] {
        // After an ordinary request on the same connection, as a client reusing it would.
        let mut stream = connect();
        stream.write_all(healthz.as_bytes()).unwrap();
        assert_eq!(read_answer(&mut stream).status, 200);
        let mut request =
            format!("GET /healthz HTTP/1.1\r\nHost: {address}\r\nX-A: a").into_bytes();
        request.extend_from_slice(&[control, b'b']);
        request.extend_from_slice(b"\r\n\r\n");
        stream.write_all(&request).unwrap();
        let answer = read_answer(&mut stream);
        let entries = answer.assert_error(400, "request.malformed");
        assert_eq!(entries.len(), 1, "{}", answer.text);
        assert_eq!(entries[0]["sub_type"], "header");
        assert_eq!(entries[0]["severity"], "validation");
        assert_eq!(entries[0]["field"], Value::Null);
        assert_eq!(answer.header("content-type"), Some("application/json"));
        assert_eq!(answer.header("connection"), Some("close"));
        let mut rest = Vec::new();
        stream.read_to_end(&mut rest).unwrap();
        assert!(rest.is_empty(), "nothing after the answer: {rest:?}");

        // As the first request of a connection too.
        let mut first = connect();
        first.write_all(&request).unwrap();
        read_answer(&mut first).assert_error(400, "request.malformed");
    }

    keep_alive.write_all(healthz.as_bytes()).unwrap();
    assert_eq!(read_answer(&mut keep_alive).status, 200, "still open");
}

/// A head larger than the server accepts (too many header fields, or more bytes than its
/// buffer) is refused before any app code runs; the answer is still the JSON error body (431),
/// and the connection is closed after it.
fn a_head_too_large_gets_the_error_body(backend: Backend) {
    let server = MercerServer::in_process(backend);
    let address = server.base_url.trim_start_matches("http://").to_string();
    let mut stream = TcpStream::connect(&address).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    // More header fields than the server parses (it reads the head whole, so the connection
    // is not reset before the answer is read).
    let fields: String = (0..100).map(|n| format!("X-Field-{n}: {n}\r\n")).collect();
    let request = format!("GET /healthz HTTP/1.1\r\nHost: {address}\r\n{fields}\r\n");
    // The server may answer and close before it has read all of it.
    let _ = stream.write_all(request.as_bytes());
    let answer = read_answer(&mut stream);
    let entries = answer.assert_error(431, "request.too_large");
    assert_eq!(entries.len(), 1, "{}", answer.text);
    assert_eq!(entries[0]["sub_type"], "header_limit");
    assert_eq!(entries[0]["severity"], "validation");
    assert_eq!(entries[0]["field"], Value::Null);
    assert_eq!(answer.header("content-type"), Some("application/json"));
    assert_eq!(answer.header("connection"), Some("close"));
}

/// A head that starts but does not end in time is refused before any app code runs; the answer
/// is still the JSON error body (408), and the connection is closed after it.
fn a_head_that_never_ends_gets_the_error_body(backend: Backend) {
    let server = MercerServer::in_process(backend);
    let address = server.base_url.trim_start_matches("http://").to_string();
    let mut stream = TcpStream::connect(&address).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    stream
        .write_all(format!("GET /healthz HTTP/1.1\r\nHost: {address}\r\n").as_bytes())
        .unwrap();
    let answer = read_answer(&mut stream);
    let entries = answer.assert_error(408, "request.timeout");
    assert_eq!(entries.len(), 1, "{}", answer.text);
    assert_eq!(entries[0]["sub_type"], "head");
    assert_eq!(entries[0]["field"], Value::Null);
    assert_eq!(answer.header("content-type"), Some("application/json"));
    let mut rest = Vec::new();
    stream.read_to_end(&mut rest).unwrap();
    assert!(rest.is_empty(), "nothing after the answer: {rest:?}");
}

backend_tests!(
    get_shop_information_answers_with_the_demo_token,
    missing_or_bad_credentials_are_401,
    a_token_of_another_shop_is_403,
    a_token_cached_on_its_own_shop_is_refused_on_another,
    a_token_without_the_scope_is_403,
    an_unknown_shop_is_404,
    the_version_header_is_checked,
    unknown_routes_and_wrong_methods_get_the_error_body,
    json_bodies_are_checked_in_order,
    configuring_the_integration_secret_never_returns_it,
    the_connector_secret_rotates_through_the_api,
    secrets_and_tokens_never_reach_the_log,
    a_revoked_token_is_refused,
    internal_errors_leak_nothing,
    health_and_readiness,
    a_header_with_a_control_byte_gets_the_error_body,
    a_head_too_large_gets_the_error_body,
    a_head_that_never_ends_gets_the_error_body,
);

#[test]
fn readiness_fails_when_postgres_goes_away() {
    let server = MercerServer::in_process(Backend::Postgres);
    assert_eq!(server.get("/readyz").call().status, 200);
    server.database().destroy();
    let answer = server.get("/readyz").call();
    let entries = answer.assert_error(503, "service.unavailable");
    assert!(
        !answer.text.contains("mercer_test_"),
        "no database detail in the answer: {}",
        answer.text
    );
    assert_eq!(entries[0]["severity"], "critical");
    assert_eq!(
        server.get("/healthz").call().status,
        200,
        "the process itself is still alive"
    );
}
