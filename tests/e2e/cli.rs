//! The operator's command line, run as a user runs it, on both databases.

use std::time::Duration;

use mercer_tests::{
    Answer, Backend, MercerServer, TestDatabase, backend_tests, mercer_binary, run_cli,
    run_cli_with_input, wait_until,
};
use serde_json::json;

fn shop_create_prints_the_identifier_and_secret_and_refuses_bad_input(backend: Backend) {
    let database = TestDatabase::create(backend);
    let created = run_cli(
        &database,
        &[
            "shop",
            "create",
            "--domain",
            "Example.MyShop.test",
            "--currency",
            "CAD",
        ],
    );
    let values = created.values();
    assert_eq!(
        values.len(),
        2,
        "identifier, then secret: {}",
        created.stdout
    );
    let (shop, secret) = (values[0].clone(), &values[1]);
    // The connector secret: 64 hex characters, shown this once.
    assert_eq!(secret.len(), 64, "{secret}");
    assert!(secret.bytes().all(|b| b.is_ascii_hexdigit()));
    assert_eq!(shop.len(), 32);
    assert!(
        shop.bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
    );

    let listing = run_cli(&database, &["shop", "list"]);
    assert!(
        listing.stdout.contains(&shop) && listing.stdout.contains("example.myshop.test"),
        "{}",
        listing.stdout
    );
    // The time zone and currency show, under their headings.
    let header = listing.stdout.lines().next().unwrap();
    let row = listing.stdout.lines().nth(1).unwrap();
    for (heading, value) in [("TIMEZONE", "UTC"), ("CURRENCY", "CAD")] {
        assert_eq!(header.find(heading), row.find(value), "{}", listing.stdout);
    }

    let duplicate = run_cli(
        &database,
        &["shop", "create", "--domain", "example.myshop.test"],
    );
    duplicate.assert_failed_with("already exists");

    let invalid = run_cli(
        &database,
        &[
            "shop",
            "create",
            "--domain",
            "not a domain",
            "--currency",
            "dollars",
        ],
    );
    invalid.assert_failed_with("shop_domain");
    invalid.assert_failed_with("currency");
}

fn token_create_checks_shop_and_scopes(backend: Backend) {
    let database = TestDatabase::create(backend);
    let shop =
        run_cli(&database, &["shop", "create", "--domain", "a.shop.test"]).values()[0].clone();
    let token = run_cli(
        &database,
        &[
            "token",
            "create",
            "--shop",
            &shop,
            "--scope",
            "read_orders",
            "--scope",
            "write_orders",
        ],
    )
    .value();
    assert!(token.starts_with("mct_"));

    let listing = run_cli(&database, &["token", "list", "--shop", &shop]);
    assert!(
        listing.stdout.contains("read_orders write_orders"),
        "{}",
        listing.stdout
    );
    assert!(
        listing.stdout.contains(&token[..12]),
        "the prefix identifies the token"
    );
    assert!(!listing.stdout.contains(&token));

    let unknown_scope = run_cli(
        &database,
        &[
            "token",
            "create",
            "--shop",
            &shop,
            "--scope",
            "read_everything",
        ],
    );
    unknown_scope.assert_failed_with("read_everything");

    let unknown_shop = run_cli(
        &database,
        &[
            "token",
            "create",
            "--shop",
            "ffffffffffffffffffffffffffffffff",
            "--scope",
            "all",
        ],
    );
    unknown_shop.assert_failed_with("shop not found");

    let revoke_unknown = run_cli(&database, &["token", "revoke", "--shop", &shop, "999"]);
    revoke_unknown.assert_failed_with("token not found");
    // The prefix `token list` shows revokes it too.
    let prefix = &token[..12];
    let revoked = run_cli(&database, &["token", "revoke", "--shop", &shop, prefix]);
    assert!(revoked.success, "{}", revoked.stderr);
    let listing = run_cli(&database, &["token", "list", "--shop", &shop]);
    let line = listing
        .stdout
        .lines()
        .find(|line| line.contains(prefix))
        .unwrap();
    let revoked_at = cell(&listing.stdout, prefix, "REVOKED");
    assert!(revoked_at.starts_with("20"), "revoked: {line}");
    // The columns line up: every row's PREFIX starts where the header's does.
    let header = listing.stdout.lines().next().unwrap();
    assert_eq!(
        line.find(prefix),
        header.find("PREFIX"),
        "{}",
        listing.stdout
    );
}

fn secret_rotate_prints_a_new_secret_once(backend: Backend) {
    let database = TestDatabase::create(backend);
    let shop =
        run_cli(&database, &["shop", "create", "--domain", "a.shop.test"]).values()[0].clone();
    let first = run_cli(
        &database,
        &["secret", "rotate", "--shop", &shop, "--kind", "connector"],
    );
    let first_secret = first.value();
    assert_eq!(first_secret.len(), 64);
    let second = run_cli(
        &database,
        &["secret", "rotate", "--shop", &shop, "--kind", "connector"],
    );
    assert_ne!(second.value(), first_secret);
    assert!(
        second.stderr.contains("previous one stays valid until"),
        "{}",
        second.stderr
    );

    let bad_kind = run_cli(
        &database,
        &["secret", "rotate", "--shop", &shop, "--kind", "password"],
    );
    bad_kind.assert_failed_with("connector");
}

fn migrate_applies_once(backend: Backend) {
    let database = TestDatabase::create(backend);
    let first = run_cli(&database, &["migrate"]);
    assert!(first.success, "{}", first.stderr);
    assert!(first.stdout.contains("applied"), "{}", first.stdout);
    let second = run_cli(&database, &["migrate"]);
    assert!(
        second.stdout.contains("already up to date"),
        "{}",
        second.stdout
    );
}

/// `shop update` changes the time zone and currency that Get Shop Information answers; a bad
/// value changes nothing and names the option.
fn shop_update_sets_the_time_zone_and_currency(backend: Backend) {
    let server = MercerServer::start(backend);
    let demo = server.demo().clone();
    let path = format!("/subscriptions/v1/shops/{}/shop", demo.shop);
    let shop = || server.get(&path).bearer(&demo.token).call().json()["shop"].clone();
    assert_eq!(shop()["timezone"], "UTC");

    server
        .cli(&[
            "shop",
            "update",
            "--shop",
            &demo.shop,
            "--timezone",
            "Mars/Base",
        ])
        .assert_failed_with("timezone");
    server
        .cli(&["shop", "update", "--shop", &demo.shop])
        .assert_failed_with("nothing to change");
    server
        .cli(&[
            "shop",
            "update",
            "--shop",
            "ffffffffffffffffffffffffffffffff",
            "--currency",
            "CAD",
        ])
        .assert_failed_with("not found");
    let updated = server.cli(&[
        "shop",
        "update",
        "--shop",
        &demo.shop,
        "--timezone",
        "America/Toronto",
        "--currency",
        "CAD",
    ]);
    assert!(updated.success, "{}", updated.stderr);
    // Authorizations are cached for 2 s, the shop with them.
    assert!(wait_until(Duration::from_secs(5), || {
        let shop = shop();
        shop["timezone"] == "America/Toronto" && shop["currency"] == "CAD"
    }));
    assert_eq!(shop()["currency_format"], "${{amount}}");

    // How failed subscription orders are retried (issue 14's settings).
    server
        .cli(&[
            "shop",
            "update",
            "--shop",
            &demo.shop,
            "--order-max-retries",
            "101",
        ])
        .assert_failed_with("order_max_retries");
    let retries = server.cli(&[
        "shop",
        "update",
        "--shop",
        &demo.shop,
        "--order-retry-interval",
        "3600",
        "--order-max-retries",
        "5",
    ]);
    assert!(retries.success, "{}", retries.stderr);
    assert!(
        retries.stderr.contains("every 3600 s up to 5 times"),
        "{}",
        retries.stderr
    );

    // The checkout's settings (issue 15).
    let settings = format!("/checkout/shop/{}/settings", demo.shop);
    let checkout = || server.get(&settings).bearer(&demo.token).call().json()["data"].clone();
    assert_eq!(checkout()["abandoned_cart_emails"], true);
    for (flag, value, problem) in [
        ("--flat-shipping-rate", "-5", "flat_shipping_rate"),
        ("--abandoned-cart-emails", "maybe", "on or off"),
    ] {
        server
            .cli(&["shop", "update", "--shop", &demo.shop, flag, value])
            .assert_failed_with(problem);
    }
    let changed = server.cli(&[
        "shop",
        "update",
        "--shop",
        &demo.shop,
        "--abandoned-cart-emails",
        "off",
        "--gift-cards",
        "on",
        "--gift-card-sku",
        "GC-10",
        "--gift-card-sku",
        "GC-25",
        "--flat-shipping-rate",
        "650",
    ]);
    assert!(changed.success, "{}", changed.stderr);
    assert_eq!(
        checkout(),
        json!({"abandoned_cart_emails": false, "gift_cards_enabled": true,
               "gift_card_skus": ["GC-10", "GC-25"], "flat_shipping_rate": 650})
    );
    let cleared = server.cli(&[
        "shop",
        "update",
        "--shop",
        &demo.shop,
        "--clear-gift-card-skus",
    ]);
    assert!(cleared.success, "{}", cleared.stderr);
    assert_eq!(checkout()["gift_card_skus"], json!([]));
}

backend_tests!(
    shop_create_prints_the_identifier_and_secret_and_refuses_bad_input,
    shop_update_sets_the_time_zone_and_currency,
    token_create_checks_shop_and_scopes,
    secret_rotate_prints_a_new_secret_once,
    migrate_applies_once,
    staff_accounts_are_listed_removed_and_given_new_passwords,
    a_revoked_apps_tokens_are_refused,
    a_deleted_shop_answers_as_an_unknown_shop,
    token_list_shows_each_tokens_last_use,
    metrics_need_the_metrics_token_when_one_is_set,
    a_settings_file_gives_serve_its_database_and_port,
);

#[test]
fn help_explains_every_setting() {
    let help = |args: &[&str]| {
        let output = std::process::Command::new(mercer_binary())
            .args(args)
            .output()
            .unwrap();
        assert!(output.status.success());
        String::from_utf8_lossy(&output.stdout).into_owned()
    };
    let top = help(&["--help"]);
    for word in [
        "serve",
        "migrate",
        "shop",
        "token",
        "secret",
        "--database-url",
        "DATABASE_URL",
        "--log-level",
        "MERCER_LOG",
    ] {
        assert!(
            top.contains(word),
            "`mercer --help` mentions {word}:\n{top}"
        );
    }
    let serve = help(&["serve", "--help"]);
    for word in [
        "--bind",
        "MERCER_BIND",
        "127.0.0.1:8080",
        "sqlite://mercer.db",
        "--max-body-bytes",
        "--shutdown-timeout",
        "--abandonment-delay-s",
        "MERCER_ABANDONMENT_DELAY_S",
        "--abandonment-interval-s",
        "MERCER_ABANDONMENT_INTERVAL_S",
        "--scheduler-interval-ms",
    ] {
        assert!(
            serve.contains(word),
            "`mercer serve --help` mentions {word}:\n{serve}"
        );
    }
}

#[test]
fn an_unsupported_database_url_is_refused_clearly() {
    let output = std::process::Command::new(mercer_binary())
        .args(["--database-url", "mysql://root@localhost/mercer", "migrate"])
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("sqlite://") && stderr.contains("postgres://"),
        "{stderr}"
    );
}

// ---------------------------------------------------------------------------------------------
// The operator's account commands: staff, apps, deleting a shop, tokens' last use.

/// The shop's audit log, newest first, as (who, action, subject).
fn audit_lines(database: &TestDatabase, shop: &str) -> Vec<(String, String, String)> {
    use mercer_domain::ports::Database;
    let store = database.open_store();
    store
        .read(|tx| {
            let shop = tx
                .shop_by_identifier(
                    &mercer_domain::access::shop::ShopIdentifier::parse(shop).expect("an id"),
                )?
                .expect("the shop, deleted or not");
            mercer_domain::access::console::audit_log(tx, shop.id, None, 100)
        })
        .unwrap()
        .into_iter()
        .map(|entry| (entry.staff_email, entry.action, entry.subject))
        .collect()
}

/// Signs in to the console: 303 and a session cookie when the credentials are right.
fn console_sign_in(server: &MercerServer, shop: &str, email: &str, password: &str) -> Answer {
    let form = server.get("/console/sign-in").call();
    assert_eq!(form.status, 200);
    let csrf = form
        .text
        .split("name=\"csrf\" value=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .unwrap()
        .to_string();
    let cookie = form
        .header("set-cookie")
        .unwrap()
        .split(';')
        .next()
        .unwrap();
    server
        .post("/console/sign-in")
        .header("Cookie", cookie)
        .form(&[
            ("csrf", csrf.as_str()),
            ("shop", shop),
            ("email", email),
            ("password", password),
        ])
}

/// The session cookie a successful sign-in set.
fn session_cookie(signed_in: &Answer) -> String {
    assert_eq!(signed_in.status, 303, "{}", signed_in.text);
    signed_in
        .headers
        .iter()
        .filter(|(name, _)| name.eq_ignore_ascii_case("set-cookie"))
        .map(|(_, value)| value.as_str())
        .find(|value| value.starts_with("mercer_console="))
        .and_then(|value| value.split(';').next())
        .unwrap()
        .to_string()
}

/// The value in `column` of the table row holding `needle` (columns are aligned under their
/// headings).
fn cell(listing: &str, needle: &str, column: &str) -> String {
    let header = listing.lines().next().unwrap();
    let start = header
        .find(column)
        .unwrap_or_else(|| panic!("{column}: {listing}"));
    let row = listing
        .lines()
        .find(|line| line.contains(needle))
        .unwrap_or_else(|| panic!("{needle}: {listing}"));
    row[start..]
        .split_whitespace()
        .next()
        .unwrap_or("")
        .to_string()
}

fn staff_accounts_are_listed_removed_and_given_new_passwords(backend: Backend) {
    let server = MercerServer::in_process(backend);
    let shop = server.demo().shop.clone();
    let email = "ops@demo.test";
    let create = |password: &str| {
        run_cli_with_input(
            server.database(),
            &[
                "staff",
                "create",
                "--shop",
                &shop,
                "--email",
                email,
                "--password-stdin",
            ],
            &format!("{password}\n"),
        )
    };
    let first_password = "the first long password";
    assert!(create(first_password).success);
    let twice = create(first_password);
    twice.assert_failed_with("already has a staff account");
    twice.assert_failed_with("staff reset-password");

    let listing = server.cli(&["staff", "list", "--shop", &shop]).stdout;
    assert_eq!(cell(&listing, email, "LAST_SIGN_IN"), "-", "{listing}");
    let session = session_cookie(&console_sign_in(&server, &shop, email, first_password));
    let listing = server.cli(&["staff", "list", "--shop", &shop]).stdout;
    let signed_in_at = cell(&listing, email, "LAST_SIGN_IN");
    assert!(signed_in_at.starts_with("20"), "{listing}");
    assert!(!listing.contains("argon2"), "no password hash: {listing}");

    // A generated password: printed once; the old one stops working, the session ends.
    let reset = server.cli(&["staff", "reset-password", "--shop", &shop, "--email", email]);
    let generated = reset.value();
    assert!(generated.len() >= 10, "{generated}");
    assert_eq!(
        console_sign_in(&server, &shop, email, first_password).status,
        401
    );
    let page = server.get("/console").header("Cookie", &session).call();
    assert_eq!(page.status, 303, "the old session ended");
    session_cookie(&console_sign_in(&server, &shop, email, &generated));
    // One read from standard input: nothing printed.
    let chosen = "a password chosen by hand";
    let from_stdin = run_cli_with_input(
        server.database(),
        &[
            "staff",
            "reset-password",
            "--shop",
            &shop,
            "--email",
            "OPS@demo.test",
            "--password-stdin",
        ],
        &format!("{chosen}\n"),
    );
    assert!(from_stdin.success, "{}", from_stdin.stderr);
    assert_eq!(from_stdin.stdout, "", "nothing secret printed");
    assert_eq!(
        console_sign_in(&server, &shop, email, &generated).status,
        401
    );
    session_cookie(&console_sign_in(&server, &shop, email, chosen));
    run_cli_with_input(
        server.database(),
        &[
            "staff",
            "reset-password",
            "--shop",
            &shop,
            "--email",
            email,
            "--password-stdin",
        ],
        "short\n",
    )
    .assert_failed_with("at least 10 characters");

    let removed = server.cli(&["staff", "remove", "--shop", &shop, "--email", email]);
    assert!(removed.success, "{}", removed.stderr);
    assert_eq!(console_sign_in(&server, &shop, email, chosen).status, 401);
    let listing = server.cli(&["staff", "list", "--shop", &shop]).stdout;
    assert!(!listing.contains(email), "{listing}");
    server
        .cli(&["staff", "remove", "--shop", &shop, "--email", email])
        .assert_failed_with("not found");

    let actions: Vec<String> = audit_lines(server.database(), &shop)
        .into_iter()
        .map(|(who, action, subject)| {
            assert_eq!((who.as_str(), subject.as_str()), ("cli", email));
            action
        })
        .collect();
    assert_eq!(
        actions,
        [
            "staff.remove",
            "staff.reset_password",
            "staff.reset_password",
            "staff.create"
        ]
    );
}

/// Signs `world`'s staff member in on the consent page and exchanges the code: an app's token.
fn app_token(server: &MercerServer, world: &crate::oauth::OAuthWorld) -> String {
    use crate::oauth::{PASSWORD, REDIRECT, location_params, param};
    let approved = server.post("/accounts/dashboard/authorize").form(&[
        ("client_id", world.client_id.as_str()),
        ("redirect_uri", REDIRECT),
        ("scope", "read_shop_settings"),
        ("state", "s"),
        ("response_type", "code"),
        ("shop", world.shop.as_str()),
        ("email", world.email.as_str()),
        ("password", PASSWORD),
        ("decision", "approve"),
    ]);
    let code = param(&location_params(&approved), "code").expect("a code");
    let issued = server.post("/auth/oauth2/token").form(&[
        ("grant_type", "authorization_code"),
        ("code", code.as_str()),
        ("redirect_uri", REDIRECT),
        ("client_id", world.client_id.as_str()),
        ("client_secret", world.client_secret.as_str()),
    ]);
    assert_eq!(issued.status, 200, "{}", issued.text);
    issued.json()["access_token"].as_str().unwrap().to_string()
}

fn a_revoked_apps_tokens_are_refused(backend: Backend) {
    let server = MercerServer::in_process(backend);
    let world = crate::oauth::oauth_world(&server, crate::oauth::REDIRECT);
    let token = app_token(&server, &world);
    let overrides = format!("/checkout/shop/{}/overrides", world.shop);
    let status = || server.get(&overrides).bearer(&token).call().status;
    assert_eq!(status(), 200);

    let listing = server.cli(&["app", "list"]).stdout;
    assert_eq!(cell(&listing, &world.client_id, "LIVE_TOKENS"), "1");
    assert_eq!(cell(&listing, &world.client_id, "REVOKED"), "-");
    assert!(!listing.contains(&world.client_secret), "{listing}");

    let revoked = server.cli(&["app", "revoke", &world.client_id]);
    assert!(revoked.success, "{}", revoked.stderr);
    assert!(revoked.stderr.contains("1 token(s)"), "{}", revoked.stderr);
    // Authorizations are cached for 2 s.
    assert!(wait_until(Duration::from_secs(5), || status() == 401));
    let listing = server.cli(&["app", "list"]).stdout;
    assert_eq!(cell(&listing, &world.client_id, "LIVE_TOKENS"), "0");
    assert!(cell(&listing, &world.client_id, "REVOKED").starts_with("20"));
    // A revoked app cannot start the flow again.
    let again = server.post("/accounts/dashboard/authorize").form(&[
        ("client_id", world.client_id.as_str()),
        ("redirect_uri", crate::oauth::REDIRECT),
        ("scope", "read_shop_settings"),
        ("response_type", "code"),
    ]);
    assert_ne!(again.status, 303, "no redirect with a code");
    server
        .cli(&["app", "revoke", "mci_00000000000000000000000000000000"])
        .assert_failed_with("app not found");

    let audit = audit_lines(server.database(), &world.shop);
    assert_eq!(audit[0].0, "cli");
    assert_eq!(audit[0].1, "app.revoke");
    assert!(audit[0].2.contains(&world.client_id), "{audit:?}");
}

fn a_deleted_shop_answers_as_an_unknown_shop(backend: Backend) {
    let server = MercerServer::in_process(backend);
    let demo = server.demo().clone();
    let other = server
        .cli(&["shop", "create", "--domain", "other.shop.test"])
        .values()[0]
        .clone();
    let other_token = server
        .cli(&["token", "create", "--shop", &other, "--scope", "all"])
        .value();
    crate::console::staff(&server, &demo.shop, "ops@demo.test");
    let info = |shop: &str, token: &str| {
        server
            .get(&format!("/subscriptions/v1/shops/{shop}/shop"))
            .bearer(token)
            .call()
    };
    assert_eq!(info(&demo.shop, &demo.token).status, 200);

    let unconfirmed = server.cli(&["shop", "delete", "--shop", &demo.shop]);
    unconfirmed.assert_failed_with("--yes");
    assert_eq!(info(&demo.shop, &demo.token).status, 200, "nothing changed");

    let deleted = server.cli(&["shop", "delete", "--shop", &demo.shop, "--yes"]);
    assert!(deleted.success, "{}", deleted.stderr);
    assert!(wait_until(Duration::from_secs(5), || {
        info(&demo.shop, &demo.token).status == 401
    }));
    // Another shop's token sees it as it sees a shop that never was.
    let unknown = info("ffffffffffffffffffffffffffffffff", &other_token);
    let gone = info(&demo.shop, &other_token);
    assert_eq!(unknown.status, 404);
    assert_eq!(
        (gone.status, gone.errors()),
        (unknown.status, unknown.errors())
    );
    assert_eq!(info(&other, &other_token).status, 200, "other shops go on");
    // Its staff cannot sign in; the command line sees no such shop.
    assert_eq!(
        console_sign_in(&server, &demo.shop, "ops@demo.test", crate::oauth::PASSWORD).status,
        401
    );
    server
        .cli(&["token", "list", "--shop", &demo.shop])
        .assert_failed_with("shop not found");
    server
        .cli(&["shop", "delete", "--shop", &demo.shop, "--yes"])
        .assert_failed_with("shop not found");
    let shops = server.cli(&["shop", "list"]).stdout;
    assert!(
        cell(&shops, &demo.shop, "DELETED").starts_with("20"),
        "{shops}"
    );
    assert_eq!(cell(&shops, &other, "DELETED"), "-", "{shops}");

    let audit = audit_lines(server.database(), &demo.shop);
    assert_eq!(
        audit[0],
        (
            "cli".into(),
            "shop.delete".into(),
            "demo.mercer.test".into()
        )
    );
}

fn token_list_shows_each_tokens_last_use(backend: Backend) {
    let server = MercerServer::in_process(backend);
    let demo = server.demo().clone();
    let created = server.cli(&[
        "token",
        "create",
        "--shop",
        &demo.shop,
        "--scope",
        "read_shop_settings",
        "--name",
        "reporting",
    ]);
    let token = created.value();
    let prefix = &token[..12];
    let listing = || server.cli(&["token", "list", "--shop", &demo.shop]).stdout;
    let first = listing();
    assert_eq!(cell(&first, prefix, "LAST_USED"), "-", "{first}");
    assert_eq!(cell(&first, prefix, "SCOPES"), "read_shop_settings");
    assert_eq!(cell(&first, prefix, "NAME"), "reporting");
    assert!(!first.contains(&token), "never the token itself");

    let answer = server
        .get(&format!("/checkout/shop/{}/overrides", demo.shop))
        .bearer(&token)
        .call();
    assert_eq!(answer.status, 200);
    // Written beside the request, not before its answer.
    let mut seen = String::new();
    assert!(
        wait_until(Duration::from_secs(5), || {
            seen = listing();
            cell(&seen, prefix, "LAST_USED").starts_with("20")
        }),
        "{seen}"
    );
    let audit = audit_lines(server.database(), &demo.shop);
    assert_eq!(audit[0].1, "token.create");
    assert!(audit[0].2.contains("reporting"), "{audit:?}");
}

fn metrics_need_the_metrics_token_when_one_is_set(backend: Backend) {
    let token = "scrape-token-4f1c";
    let guarded = MercerServer::start_with(
        TestDatabase::create_migrated(backend),
        &["--metrics-token", token],
    );
    let scrape = |server: &MercerServer, bearer: Option<&str>| {
        let call = server.get("/metrics");
        match bearer {
            Some(bearer) => call.bearer(bearer).call(),
            None => call.call(),
        }
    };
    scrape(&guarded, None).assert_error(401, "auth.unauthenticated");
    for wrong in ["scrape-token-4f1d", "scrape-token-4f1", "x"] {
        scrape(&guarded, Some(wrong)).assert_error(401, "auth.unauthenticated");
    }
    let read = scrape(&guarded, Some(token));
    assert_eq!(read.status, 200, "{}", read.text);
    assert!(
        read.text.contains("mercer_http_requests_total"),
        "{}",
        read.text
    );
    // The rest of the API is as it was; the token is in no log line.
    assert_eq!(guarded.get("/healthz").call().status, 200);
    assert!(!guarded.output().contains(token));
    assert!(
        !guarded.log().contains("/metrics is open"),
        "{}",
        guarded.log()
    );

    // Without a token: open, and the start says so.
    let open = MercerServer::start(backend);
    assert_eq!(scrape(&open, None).status, 200);
    assert!(
        open.log().contains("GET /metrics is open to anyone"),
        "{}",
        open.log()
    );
}

/// `mercer --config FILE serve` listens on the file's port and uses the file's database, with
/// no flag; `config show` names where each setting came from, an environment variable winning
/// over the file, and never prints a secret.
fn a_settings_file_gives_serve_its_database_and_port(backend: Backend) {
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};
    let database = TestDatabase::create_migrated(backend);
    let port = mercer_tests::chaos::free_port();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("mercer.toml");
    std::fs::write(
        &path,
        format!(
            "database_url = \"{}\"\nlog_level = \"warn\"\n\n[serve]\nbind = \"127.0.0.1:{port}\"\n\
             workers = 1\ndb_pool_size = 3\nmetrics_token = \"file-metrics-secret\"\n",
            database.url_string()
        ),
    )
    .unwrap();
    let mercer = |args: &[&str]| {
        let mut command = Command::new(mercer_binary());
        command
            .args(args)
            .env_remove("DATABASE_URL")
            .env_remove("MERCER_BIND")
            .env_remove("MERCER_CONFIG")
            .stdin(Stdio::null());
        command
    };
    let config = path.to_str().unwrap();
    let mut child = mercer(&["--config", config, "serve"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let listening = lines
        .map_while(Result::ok)
        .find(|line| line.starts_with("Mercer listening on "));
    let answer = ureq::get(&format!("http://127.0.0.1:{port}/healthz"))
        .call()
        .map(|answer| answer.status().as_u16());
    let _ = child.kill();
    let _ = child.wait();
    let listening = listening.expect("mercer started");
    assert!(
        listening.contains(&format!("127.0.0.1:{port}")),
        "{listening}"
    );
    assert_eq!(answer.ok(), Some(200));
    // The first start on the file's database made its demo shop there.
    let shops = run_cli(&database, &["shop", "list"]);
    assert!(
        shops.stdout.contains("demo.mercer.test"),
        "{}",
        shops.stdout
    );

    // Where each setting came from; the metrics token never shown.
    let shown = mercer(&["config", "show"])
        .env("MERCER_CONFIG", config)
        .env("MERCER_DB_POOL_SIZE", "8")
        .output()
        .unwrap();
    assert!(shown.status.success());
    let shown = String::from_utf8_lossy(&shown.stdout).into_owned();
    let line = |key: &str| {
        shown
            .lines()
            .find(|line| line.starts_with(&format!("{key} = ")))
            .unwrap_or_else(|| panic!("{key}: {shown}"))
            .to_string()
    };
    assert!(line("bind").ends_with("# file"), "{shown}");
    assert!(line("log_level").ends_with("# file"), "{shown}");
    assert_eq!(line("db_pool_size"), "db_pool_size = \"8\"  # environment");
    assert!(line("webhook_lease").ends_with("# default"), "{shown}");
    assert_eq!(line("metrics_token"), "metrics_token = \"***\"  # file");
    assert!(!shown.contains("file-metrics-secret"));

    // A typo is refused, naming the key.
    std::fs::write(&path, "[serve]\nbnd = \"127.0.0.1:1\"\n").unwrap();
    let refused = mercer(&["--config", config, "serve"]).output().unwrap();
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("unknown key [serve] bnd"), "{stderr}");
}
