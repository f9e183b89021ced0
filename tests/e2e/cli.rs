//! The operator's command line, run as a user runs it, on both databases.

use std::time::Duration;

use mercer_tests::{
    Backend, MercerServer, TestDatabase, backend_tests, mercer_binary, run_cli, wait_until,
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
    assert!(!line.contains("  -  "), "revoked: {line}");
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
