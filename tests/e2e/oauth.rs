//! The OAuth 2.0 authorization code flow over HTTP: apps and staff from the CLI,
//! the sign-in and consent form, redirects with code and state, the token endpoint with a
//! client secret or PKCE, RFC 6749 errors, and sign-in rate limiting. The same page in a real
//! browser is `browser.rs`.

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use mercer_tests::{Answer, Backend, MercerServer, backend_tests};
use serde_json::json;
use sha2::{Digest, Sha256};
use std::time::Duration;

pub const REDIRECT: &str = "http://127.0.0.1:9/callback";
pub const PASSWORD: &str = "a long staff password";

pub struct OAuthWorld {
    pub shop: String,
    pub client_id: String,
    pub client_secret: String,
    pub email: String,
}

/// Registers an app with `redirect` and a staff account on the demo shop, through the CLI.
pub fn oauth_world(server: &MercerServer, redirect: &str) -> OAuthWorld {
    let shop = server.demo().shop.clone();
    let app = server.cli(&[
        "app",
        "create",
        "--name",
        "Box Builder",
        "--redirect-uri",
        redirect,
    ]);
    assert!(app.success, "{}", app.stderr);
    let lines: Vec<&str> = app.stdout.lines().collect();
    assert_eq!(lines.len(), 2, "client id and secret: {}", app.stdout);
    assert!(lines[0].starts_with("mci_") && lines[1].starts_with("mcs_"));
    let email = "owner@demo.test".to_string();
    let staff = mercer_tests::run_cli_with_input(
        server.database(),
        &[
            "staff",
            "create",
            "--shop",
            &shop,
            "--email",
            &email,
            "--password-stdin",
        ],
        &format!("{PASSWORD}\n"),
    );
    assert!(staff.success, "{}", staff.stderr);
    OAuthWorld {
        shop,
        client_id: lines[0].to_string(),
        client_secret: lines[1].to_string(),
        email,
    }
}

fn authorize_query(world: &OAuthWorld, extra: &[(&str, &str)]) -> Vec<(String, String)> {
    let mut pairs: Vec<(String, String)> = [
        ("client_id", world.client_id.as_str()),
        ("redirect_uri", REDIRECT),
        ("scope", "read_shop_settings read_orders"),
        ("state", "state-123"),
        ("response_type", "code"),
        ("shop", world.shop.as_str()),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    for (name, value) in extra {
        pairs.retain(|(k, _)| k != name);
        if !value.is_empty() {
            pairs.push((name.to_string(), value.to_string()));
        }
    }
    pairs
}

fn query_string(pairs: &[(String, String)]) -> String {
    pairs
        .iter()
        .map(|(k, v)| {
            format!(
                "{}={}",
                mercer_tests::form_encode(k),
                mercer_tests::form_encode(v)
            )
        })
        .collect::<Vec<_>>()
        .join("&")
}

fn percent_decode(text: &str) -> String {
    let bytes = text.replace('+', " ").into_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap();
            out.push(u8::from_str_radix(hex, 16).unwrap());
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).unwrap()
}

/// The query parameters of a redirect's `Location`.
pub fn location_params(answer: &Answer) -> Vec<(String, String)> {
    assert_eq!(answer.status, 303, "expected a redirect: {}", answer.text);
    let location = answer.header("location").unwrap();
    assert!(
        location.starts_with(REDIRECT) || location.contains("/callback"),
        "{location}"
    );
    let query = location.split_once('?').map(|(_, q)| q).unwrap_or_default();
    query
        .split('&')
        .filter_map(|pair| pair.split_once('='))
        .map(|(k, v)| (percent_decode(k), percent_decode(v)))
        .collect()
}

pub fn param(params: &[(String, String)], name: &str) -> Option<String> {
    params
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.clone())
}

fn submit(server: &MercerServer, query: &[(String, String)], fields: &[(&str, &str)]) -> Answer {
    let mut all: Vec<(&str, &str)> = query
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    all.extend_from_slice(fields);
    server.post("/accounts/dashboard/authorize").form(&all)
}

fn sign_in(
    server: &MercerServer,
    world: &OAuthWorld,
    query: &[(String, String)],
    password: &str,
) -> Answer {
    submit(
        server,
        query,
        &[
            ("email", &world.email),
            ("password", password),
            ("decision", "approve"),
        ],
    )
}

fn token(server: &MercerServer, fields: &[(&str, &str)]) -> Answer {
    server.post("/auth/oauth2/token").form(fields)
}

fn the_authorization_code_flow_issues_a_scoped_token(backend: Backend) {
    let server = MercerServer::in_process(backend);
    let world = oauth_world(&server, REDIRECT);
    let query = authorize_query(&world, &[]);

    let page = server
        .get(&format!(
            "/accounts/dashboard/authorize?{}",
            query_string(&query)
        ))
        .call();
    assert_eq!(page.status, 200, "{}", page.text);
    assert!(
        page.header("content-type")
            .unwrap()
            .starts_with("text/html")
    );
    assert_eq!(page.header("x-frame-options"), Some("DENY"));
    for needle in [
        "Box Builder",
        "See shop settings",
        "See orders",
        "name=\"password\"",
        "<form",
    ] {
        assert!(page.text.contains(needle), "{needle} missing from the page");
    }
    assert!(
        !page.text.contains("<script"),
        "the page must work without JavaScript"
    );

    // A wrong password shows the form again, 401, and says so.
    let wrong = sign_in(&server, &world, &query, "not the password");
    assert_eq!(wrong.status, 401);
    assert!(wrong.text.contains("not right"));

    // Deny goes back with access_denied and the state.
    let denied = location_params(&submit(&server, &query, &[("decision", "deny")]));
    assert_eq!(param(&denied, "error").as_deref(), Some("access_denied"));
    assert_eq!(param(&denied, "state").as_deref(), Some("state-123"));

    let approved = location_params(&sign_in(&server, &world, &query, PASSWORD));
    assert_eq!(param(&approved, "state").as_deref(), Some("state-123"));
    let code = param(&approved, "code").expect("a code");

    let exchange = [
        ("grant_type", "authorization_code"),
        ("code", code.as_str()),
        ("redirect_uri", REDIRECT),
        ("client_id", world.client_id.as_str()),
        ("client_secret", world.client_secret.as_str()),
    ];
    let issued = token(&server, &exchange);
    assert_eq!(issued.status, 200, "{}", issued.text);
    assert_eq!(issued.header("cache-control"), Some("no-store"));
    let issued = issued.json();
    assert_eq!(issued["token_type"], "Bearer");
    assert_eq!(issued["scope"], "read_orders read_shop_settings");
    assert_eq!(issued["shop_identifier"], world.shop.as_str());
    let access = issued["access_token"].as_str().unwrap().to_string();

    // An ordinary API token: its scopes work, others are 403.
    let overrides = format!("/checkout/shop/{}/overrides", world.shop);
    let listed = server.get(&overrides).bearer(&access).call();
    assert_eq!(listed.status, 200, "{}", listed.text);
    server
        .post(&overrides)
        .bearer(&access)
        .json(&json!({}))
        .assert_error(403, "auth.forbidden");
    let tokens = server.cli(&["token", "list", "--shop", &world.shop]);
    assert!(tokens.stdout.contains("oauth"), "{}", tokens.stdout);

    // The code is single-use: a second exchange fails and revokes the token it gave.
    let again = token(&server, &exchange);
    assert_eq!(again.status, 400);
    assert_eq!(again.json()["error"], "invalid_grant");
    // Revoked tokens are refused within the access cache's 2 seconds (docs/api-conventions.md).
    assert!(mercer_tests::wait_until(Duration::from_secs(5), || {
        server.get(&overrides).bearer(&access).call().status == 401
    }));

    // JSON bodies and HTTP Basic client authentication work too.
    let approved = location_params(&sign_in(&server, &world, &query, PASSWORD));
    let code = param(&approved, "code").unwrap();
    let basic = STANDARD.encode(format!("{}:{}", world.client_id, world.client_secret));
    let by_json = server
        .post("/auth/oauth2/token")
        .header("Authorization", &format!("Basic {basic}"))
        .json(
            &json!({ "grant_type": "authorization_code", "code": code, "redirect_uri": REDIRECT }),
        );
    assert_eq!(by_json.status, 200, "{}", by_json.text);
}

fn pkce_lets_a_public_client_exchange_without_a_secret(backend: Backend) {
    let server = MercerServer::in_process(backend);
    let world = oauth_world(&server, REDIRECT);
    let verifier = "pkce-verifier-0123456789-abcdefghijklmnopqrstuvwxyz";
    let challenge = URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes()));
    let query = authorize_query(
        &world,
        &[
            ("code_challenge", &challenge),
            ("code_challenge_method", "S256"),
        ],
    );
    let code = param(
        &location_params(&sign_in(&server, &world, &query, PASSWORD)),
        "code",
    )
    .unwrap();
    let exchange = |verifier: &str| {
        token(
            &server,
            &[
                ("grant_type", "authorization_code"),
                ("code", &code),
                ("redirect_uri", REDIRECT),
                ("client_id", &world.client_id),
                ("code_verifier", verifier),
            ],
        )
    };
    let wrong = exchange("pkce-verifier-0123456789-abcdefghijklmnopqrstuvwxyZ");
    assert_eq!(
        (wrong.status, wrong.json()["error"].clone()),
        (400, json!("invalid_grant"))
    );
    let issued = exchange(verifier);
    assert_eq!(issued.status, 200, "{}", issued.text);
}

fn bad_requests_get_rfc_6749_errors(backend: Backend) {
    let server = MercerServer::in_process(backend);
    let world = oauth_world(&server, REDIRECT);
    let page = |extra: &[(&str, &str)]| {
        server
            .get(&format!(
                "/accounts/dashboard/authorize?{}",
                query_string(&authorize_query(&world, extra))
            ))
            .call()
    };
    // An unknown client or redirect URI is shown, never redirected to.
    for extra in [
        [("client_id", "mci_unknown")],
        [("redirect_uri", "http://127.0.0.1:9/elsewhere")],
        [("client_id", "")],
    ] {
        let answer = page(&extra);
        assert_eq!(answer.status, 400, "{extra:?}");
        assert!(answer.header("location").is_none());
    }
    for (extra, error) in [
        (
            vec![("response_type", "token")],
            "unsupported_response_type",
        ),
        (vec![("scope", "read_orders become_admin")], "invalid_scope"),
        (vec![("scope", "")], "invalid_scope"),
        (
            vec![
                ("code_challenge", "x".repeat(43).leak() as &str),
                ("code_challenge_method", "plain"),
            ],
            "invalid_request",
        ),
    ] {
        let params = location_params(&page(&extra));
        assert_eq!(param(&params, "error").as_deref(), Some(error), "{extra:?}");
        assert_eq!(param(&params, "state").as_deref(), Some("state-123"));
    }

    let query = authorize_query(&world, &[]);
    let code = param(
        &location_params(&sign_in(&server, &world, &query, PASSWORD)),
        "code",
    )
    .unwrap();
    let base = [
        ("grant_type", "authorization_code"),
        ("code", code.as_str()),
        ("redirect_uri", REDIRECT),
        ("client_id", world.client_id.as_str()),
        ("client_secret", world.client_secret.as_str()),
    ];
    let with = |name: &str, value: &str| {
        let fields: Vec<(&str, &str)> = base
            .iter()
            .map(|(k, v)| if *k == name { (*k, value) } else { (*k, *v) })
            .filter(|(_, v)| !v.is_empty())
            .collect();
        token(&server, &fields)
    };
    for (name, value, status, error) in [
        ("grant_type", "password", 400, "unsupported_grant_type"),
        ("grant_type", "", 400, "invalid_request"),
        ("code", "", 400, "invalid_request"),
        ("client_secret", "mcs_wrong", 401, "invalid_client"),
        ("client_secret", "", 401, "invalid_client"),
        ("client_id", "mci_unknown", 401, "invalid_client"),
        ("code", "0123456789abcdef", 400, "invalid_grant"),
        (
            "redirect_uri",
            "http://127.0.0.1:9/elsewhere",
            400,
            "invalid_grant",
        ),
    ] {
        let answer = with(name, value);
        assert_eq!(answer.status, status, "{name}={value}: {}", answer.text);
        assert_eq!(answer.json()["error"], error, "{name}={value}");
        if status == 401 {
            assert!(answer.header("www-authenticate").is_some());
        }
    }
    let unsupported = server
        .post("/auth/oauth2/token")
        .header("Content-Type", "text/plain")
        .send_bytes(Some(b"grant_type=authorization_code".to_vec()));
    assert_eq!(unsupported.json()["error"], "invalid_request");
    // None of the failures above used the code up.
    assert_eq!(with("grant_type", "authorization_code").status, 200);
}

fn failed_sign_ins_are_rate_limited(backend: Backend) {
    let server = MercerServer::in_process(backend);
    let world = oauth_world(&server, REDIRECT);
    let query = authorize_query(&world, &[]);
    for attempt in 1..=4 {
        assert_eq!(
            sign_in(&server, &world, &query, "wrong password").status,
            401,
            "attempt {attempt}"
        );
    }
    let locked = sign_in(&server, &world, &query, "wrong password");
    assert_eq!(locked.status, 429);
    let wait: u64 = locked.header("retry-after").unwrap().parse().unwrap();
    assert!((1..=30).contains(&wait), "{wait}");
    // While locked, even the right password waits.
    assert_eq!(sign_in(&server, &world, &query, PASSWORD).status, 429);
}

/// Signs in as `email` with `password` from the local address `source` (any of 127.0.0.0/8
/// reaches the server): the answer's status and `Retry-After`.
fn sign_in_from(
    source: [u8; 4],
    server: &MercerServer,
    query: &[(String, String)],
    email: &str,
    password: &str,
) -> (u16, Option<String>) {
    use std::io::{BufRead, BufReader, Write};
    let mut fields = query.to_vec();
    for (name, value) in [
        ("email", email),
        ("password", password),
        ("decision", "approve"),
    ] {
        fields.push((name.to_string(), value.to_string()));
    }
    let body = query_string(&fields);
    let target: std::net::SocketAddr = server
        .base_url
        .trim_start_matches("http://")
        .parse()
        .unwrap();
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    socket
        .bind(&std::net::SocketAddr::from((source, 0)).into())
        .unwrap();
    socket.connect(&target.into()).unwrap();
    let mut stream: std::net::TcpStream = socket.into();
    write!(
        stream,
        "POST /accounts/dashboard/authorize HTTP/1.1\r\nHost: mercer\r\nConnection: close\r\n\
         Content-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut reader = BufReader::new(stream);
    let mut status = String::new();
    reader.read_line(&mut status).unwrap();
    let mut retry_after = None;
    for line in reader.lines().map_while(Result::ok) {
        if line.is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':')
            && name.eq_ignore_ascii_case("retry-after")
        {
            retry_after = Some(value.trim().to_string());
        }
    }
    let code = status.split_whitespace().nth(1).unwrap().parse().unwrap();
    (code, retry_after)
}

fn a_lock_holds_one_account_and_address_and_tells_no_account_apart(backend: Backend) {
    let server = MercerServer::in_process(backend);
    let world = oauth_world(&server, REDIRECT);
    let query = authorize_query(&world, &[]);
    let guesses = |email: &str| -> Vec<(u16, Option<String>)> {
        (0..6)
            .map(|_| sign_in_from([127, 0, 0, 1], &server, &query, email, "wrong password"))
            .collect()
    };
    // A real account and an unknown one are answered alike, lock included.
    for email in [world.email.as_str(), "nobody@demo.test"] {
        let answers = guesses(email);
        let statuses: Vec<u16> = answers.iter().map(|(status, _)| *status).collect();
        assert_eq!(statuses, [401, 401, 401, 401, 429, 429], "{email}");
        assert_eq!(answers[4].1.as_deref(), Some("30"), "{email}");
        assert!(answers[5].1.is_some(), "{email}");
    }
    // The owner, from another address, is not locked out by these guesses.
    let (status, _) = sign_in_from([127, 0, 0, 2], &server, &query, &world.email, PASSWORD);
    assert_eq!(status, 303, "the owner signs in from elsewhere");
    // From the guessing address the account stays locked, even for the right password.
    let (status, _) = sign_in_from([127, 0, 0, 1], &server, &query, &world.email, PASSWORD);
    assert_eq!(status, 429);
}

fn a_burst_of_sign_ins_cannot_outrun_the_lock(backend: Backend) {
    let server = MercerServer::in_process(backend);
    let world = oauth_world(&server, REDIRECT);
    let query = authorize_query(&world, &[]);
    let statuses: Vec<u16> = std::thread::scope(|scope| {
        let attempts: Vec<_> = (0..16)
            .map(|_| scope.spawn(|| sign_in(&server, &world, &query, "wrong password").status))
            .collect();
        attempts.into_iter().map(|a| a.join().unwrap()).collect()
    });
    let wrong = statuses.iter().filter(|s| **s == 401).count();
    let limited = statuses.iter().filter(|s| **s == 429).count();
    assert_eq!(wrong + limited, 16, "{statuses:?}");
    // At most four passwords were checked before the fifth failure locked the account.
    assert!(wrong <= 4, "{statuses:?}");
}

/// What the request carries (its `state`, the shop typed in) comes back in the form's fields as
/// text, escaped: it cannot add markup to the page.
fn the_consent_page_escapes_what_the_request_carries(backend: Backend) {
    let server = MercerServer::in_process(backend);
    let world = oauth_world(&server, REDIRECT);
    let hostile = "\"><script>alert('x')</script>&";
    let query = authorize_query(&world, &[("state", hostile), ("shop", hostile)]);
    let page = server
        .get(&format!(
            "/accounts/dashboard/authorize?{}",
            query_string(&query)
        ))
        .call();
    assert_eq!(page.status, 200, "{}", page.text);
    assert!(!page.text.contains("<script"), "{}", page.text);
    assert!(
        page.text.contains("script&#62;alert(&#39;x&#39;)"),
        "the text is kept, escaped: {}",
        page.text
    );
    assert!(page.text.contains("Box Builder wants access to your shop"));
}

backend_tests!(
    the_authorization_code_flow_issues_a_scoped_token,
    the_consent_page_escapes_what_the_request_carries,
    pkce_lets_a_public_client_exchange_without_a_secret,
    bad_requests_get_rfc_6749_errors,
    failed_sign_ins_are_rate_limited,
    a_lock_holds_one_account_and_address_and_tells_no_account_apart,
    a_burst_of_sign_ins_cannot_outrun_the_lock,
);
