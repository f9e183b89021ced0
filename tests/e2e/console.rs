//! The operator console (`/console`), on SQLite and PostgreSQL:
//! - in headless Chromium with JavaScript off: a staff member signs in, finds a failed delivery
//!   by topic, reads its attempts, resends it and sees the new attempt arrive at a local
//!   receiver; retries an event set aside and sees it applied; a form posted without its CSRF
//!   token is refused; another shop's staff member sees none of it;
//! - over plain HTTP: the cookie's and the pages' headers, the sign-in form's own CSRF token,
//!   the lock after repeated failures, signing out;
//! - behind a trusted proxy (`--trusted-proxies`): the lock holds the client `X-Forwarded-For`
//!   names, not the proxy; without the flag the header is ignored.

use std::path::PathBuf;
use std::time::Duration;

use mercer_domain::ports::Database;
use mercer_domain::webhooks::MessageStatus;
use mercer_store::testing::POISONED_EMAIL;
use mercer_tests::browser::{ConsoleTour, browser, report_skip};
use mercer_tests::receiver::{Receiver, Reply};
use mercer_tests::{Answer, Backend, MercerServer, TestDatabase, backend_tests, wait_until};

use crate::hostile_input::{Shop as ConnectorShop, counts, customer, customer_saved, stored_email};
use crate::oauth::PASSWORD;
use crate::webhooks::{create, send_test, shop};

/// A staff account of `shop` with [`PASSWORD`].
pub(crate) fn staff(server: &MercerServer, shop: &str, email: &str) {
    let made = mercer_tests::run_cli_with_input(
        server.database(),
        &[
            "staff",
            "create",
            "--shop",
            shop,
            "--email",
            email,
            "--password-stdin",
        ],
        &format!("{PASSWORD}\n"),
    );
    assert!(made.success, "{}", made.stderr);
}

/// Another shop, with a staff account `other@other.test`.
fn other_shop(server: &MercerServer) -> String {
    let other = server
        .cli(&["shop", "create", "--domain", "other.shop.test"])
        .values()[0]
        .clone();
    staff(server, &other, "other@other.test");
    other
}

fn screenshots(backend: Backend) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../target/console-screenshots")
        .join(format!("{backend:?}").to_lowercase())
}

fn a_staff_member_resends_a_failed_delivery_and_retries_an_event_in_a_browser(backend: Backend) {
    let browser = match browser() {
        Ok(browser) => browser,
        Err(skipped) => {
            report_skip(&skipped);
            return;
        }
    };
    // One attempt per message: the scripted 500 fails it for good.
    let server = MercerServer::start_with(
        TestDatabase::create(backend),
        &["--allow-private-targets", "--webhook-retry-schedule", "0s"],
    );
    let shop = shop(&server);
    // Each endpoint its own receiver, so the scripted 500 goes to the failing one whatever
    // order the two messages are sent in.
    let receiver = Receiver::start();
    let elsewhere = Receiver::start();
    let failing = create(&server, &shop, 1, &receiver.url);
    let other_topic = create(&server, &shop, 2, &elsewhere.url);
    let topic = failing["webhook_topic_name"].as_str().unwrap().to_string();
    receiver.script(&[Reply::status(500)]);
    let failed = send_test(&server, &shop, failing["id"].as_str().unwrap());
    let delivered = send_test(&server, &shop, other_topic["id"].as_str().unwrap());
    let store = server.database().open_store();
    let status_of = |message_id: &str| {
        store
            .read(|tx| Ok(tx.webhook_message(message_id)?))
            .unwrap()
            .map(|m| m.status)
    };
    assert!(wait_until(Duration::from_secs(15), || {
        status_of(&failed) == Some(MessageStatus::Failed)
            && status_of(&delivered) == Some(MessageStatus::Delivered)
    }));

    // An event that cannot be applied (a trigger refuses it) is set aside after its attempts;
    // its cause is then fixed, so a retry applies it.
    server.database().fail_customer_writes();
    let connector = ConnectorShop {
        identifier: shop.id.clone(),
        token: shop.token.clone(),
    };
    let answer = customer_saved(&server, &connector, &customer("poisoned", POISONED_EMAIL));
    assert_eq!(answer.status, 202, "{}", answer.text);
    assert!(
        wait_until(Duration::from_secs(30), || counts(&store) == (0, 1)),
        "pending, set aside: {:?}",
        counts(&store)
    );
    server.database().heal_customer_writes();

    // A job of the shop that gave up, for the Jobs page (a kind no worker runs).
    store
        .write(|tx| {
            use mercer_domain::access::shop::ShopIdentifier;
            let id = ShopIdentifier::parse(&shop.id).unwrap();
            let shop_id = tx.shop_by_identifier(&id)?.unwrap().id;
            let now = mercer_domain::Timestamp::now();
            let job = tx.enqueue_job(
                &mercer_domain::kernel::jobs::NewJob {
                    kind: "console.example",
                    payload: "{}".to_string(),
                    unique_key: None,
                    run_at: now,
                    max_attempts: 3,
                    shop_id: Some(shop_id),
                    request_id: None,
                    trace_parent: None,
                },
                now,
            )?;
            tx.cancel_jobs(&[job.id()], now)?;
            Ok(())
        })
        .unwrap();
    // A subscription whose order date has passed, for the Subscriptions page.
    let subscriptions = crate::subscriptions::Api::demo(&server);
    let due = subscriptions.create(&crate::scheduler::subscription(
        "due@example.test",
        serde_json::json!({"subscription_status": "active",
                           "next_order_datetime": "2026-03-02T14:00:00Z"}),
    ));
    // A checkout, and a webhook about it, for the Checkouts pages.
    let checkout = crate::checkout::init(
        &server,
        &crate::checkout::Shop {
            id: shop.id.clone(),
            token: shop.token.clone(),
        },
        serde_json::json!({"cart_items": [], "customer": {"email_address": "shopper@example.test"}}),
    );
    let public_order_id = checkout["public_order_id"].as_str().unwrap().to_string();
    // The checkout's items and addresses, a box, a failed order and the shop's cancellation
    // reasons, for the pages that show them.
    crate::console_pages::seed_checkout_contents(&server, &shop.id, &public_order_id);
    crate::console_pages::seed_box(&server);
    crate::console_pages::seed_attempt(
        &server,
        &shop.id,
        due["id"].as_i64().unwrap(),
        "2026-02-23T14:00:00Z",
        mercer_domain::subscriptions::repository::OrderAttemptEnd::Failed {
            code: "payment_declined".to_string(),
            reason: "the card was declined".to_string(),
        },
    );
    let reasons = subscriptions.send(
        "PUT",
        "/settings/cancellation_reasons",
        &serde_json::json!({"cancellation_reasons": [
            {"code": "too_expensive", "label": "It costs too much"},
            {"code": "moving", "label": "Moving away"}]}),
    );
    assert_eq!(reasons.status, 200, "{}", reasons.text);
    store
        .write(|tx| {
            use mercer_domain::access::shop::ShopIdentifier;
            use mercer_domain::webhooks::{WebhookKind, enqueue_for_topic};
            let id = ShopIdentifier::parse(&shop.id).unwrap();
            let shop_id = tx.shop_by_identifier(&id)?.unwrap().id;
            enqueue_for_topic(
                tx,
                shop_id,
                WebhookKind::Checkout,
                other_topic["webhook_topic_name"].as_str().unwrap(),
                &serde_json::json!({"public_order_id": public_order_id}),
                Some(&format!("checkout:{public_order_id}")),
                mercer_domain::Timestamp::now(),
            )
        })
        .unwrap();
    staff(&server, &shop.id, "ops@demo.test");
    let other = other_shop(&server);
    let shots = screenshots(backend);
    let seen = browser.console_tour(&ConsoleTour {
        base_url: &server.base_url,
        shop: &shop.id,
        email: "ops@demo.test",
        password: PASSWORD,
        other_shop: &other,
        other_email: "other@other.test",
        topic: &topic,
        screenshots: &shots,
    });
    let text = |key: &str| seen[key].as_str().unwrap_or_default().to_string();

    // Signed in, with a cookie scripts cannot read and other sites cannot send.
    assert!(text("afterSignIn").ends_with("/console"), "{seen}");
    assert_eq!(seen["cookie"]["httpOnly"], true, "{seen}");
    assert_eq!(seen["cookie"]["sameSite"], "Strict", "{seen}");
    assert!(text("overview").contains("webhook attempts sent"), "{seen}");

    // Found by topic and status: the failed one, with its 500.
    let topics = seen["rowTopics"].as_array().unwrap();
    assert!(!topics.is_empty(), "{seen}");
    assert!(topics.iter().all(|t| *t == topic.as_str()), "{seen}");
    assert_eq!(text("messageId"), failed);
    assert_eq!(seen["attemptsBefore"], 1, "{seen}");
    assert_eq!(text("firstAnswer"), "500");

    // Resent: the receiver got the same webhook-id again, and the page shows the attempt.
    assert_eq!(seen["attemptsAfter"], 2, "{seen}");
    assert_eq!(text("statusAfter"), "delivered");
    let arrivals = || {
        receiver
            .received()
            .iter()
            .filter(|r| r.header("webhook-id") == Some(failed.as_str()))
            .count()
    };
    assert_eq!(arrivals(), 2);

    // The event set aside, with its error, retried and applied.
    assert!(text("setAsideError").contains("forced failure"), "{seen}");
    assert_eq!(seen["setAsideCleared"], true, "{seen}");
    assert_eq!(
        stored_email(&store, &shop.id, "poisoned").as_deref(),
        Some(POISONED_EMAIL)
    );

    // Both actions are in the audit log, with who did them.
    let audit = seen["audit"].as_array().unwrap();
    let line_with = |action: &str| {
        audit
            .iter()
            .filter_map(|line| line.as_str())
            .find(|line| line.contains(action))
            .map(str::to_string)
    };
    let resend = line_with("webhook_message.resend").expect("the resend is audited");
    assert!(
        resend.contains(&failed) && resend.contains("ops@demo.test"),
        "{resend}"
    );
    assert!(line_with("platform_event.retry").is_some(), "{audit:?}");

    // A form posted with the session's cookie but without its CSRF token is refused, and does
    // nothing.
    assert_eq!(seen["forgedStatus"], 403, "{seen}");
    assert!(text("forgedBody").contains("CSRF"), "{seen}");
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(arrivals(), 2);

    // Another shop's staff member sees none of it.
    assert!(text("otherAfterSignIn").ends_with("/console"), "{seen}");
    let theirs = text("otherWebhooks");
    assert!(
        !theirs.contains(&failed) && !theirs.contains(&delivered),
        "{theirs}"
    );
    assert!(theirs.contains("no webhook endpoint"), "{theirs}");
    assert_eq!(seen["otherMessageStatus"], 404, "{seen}");
    assert!(
        !text("otherAudit").contains("webhook_message.resend"),
        "{seen}"
    );
    assert!(text("jobs").contains("console.example"), "{seen}");
    assert_eq!(text("secretShown").len(), 64, "{seen}");
    assert_eq!(seen["checkoutMessages"], 1, "{seen}");
    assert_eq!(
        text("subscriptionHeading"),
        format!("Subscription {}", due["id"])
    );
    // Every action ends with its notice; the new pages find what was seeded.
    assert!(
        text("resentNotice").contains("queued to be sent again"),
        "{seen}"
    );
    assert!(
        text("settingsNotice").contains("dunning policy is saved"),
        "{seen}"
    );
    assert_eq!(seen["searchRows"], 1, "{seen}");
    assert_eq!(text("customerEmail"), "due@example.test");
    assert_eq!(seen["orderRows"], 1, "{seen}");
    assert_eq!(seen["boxSlots"], 1, "{seen}");
    // At 390 px no page scrolls sideways, and every control of its forms is on screen.
    let fits = seen["fits"].as_object().unwrap();
    assert_eq!(fits.len(), 11, "{seen}");
    for (page, fit) in fits {
        assert!(
            fit["scrollWidth"].as_i64() <= fit["innerWidth"].as_i64(),
            "{page} scrolls sideways: {fit}"
        );
        assert_eq!(fit["outside"], serde_json::json!([]), "{page}: {fit}");
        assert!(fit["controls"].as_i64() > Some(0), "{page}: {fit}");
    }
    for page in [
        "subscriptions-due",
        "cancel",
        "customers",
        "customer",
        "orders",
        "boxes",
        "box",
        "settings",
        "customers-phone",
        "box-phone",
        "cancel-phone",
        "checkouts",
        "checkout",
        "secret",
        "subscription",
        "jobs",
        "sign-in",
        "overview",
        "webhooks",
        "message",
        "connector",
        "audit",
    ] {
        assert!(shots.join(format!("{page}.png")).exists(), "{page}.png");
    }
}

fn header<'a>(answer: &'a Answer, name: &str) -> Vec<&'a str> {
    answer
        .headers
        .iter()
        .filter(|(key, _)| key.eq_ignore_ascii_case(name))
        .map(|(_, value)| value.as_str())
        .collect()
}

/// The sign-in form's CSRF token and the cookie that carries it.
fn sign_in_form(server: &MercerServer) -> (String, String) {
    let form = server.get("/console/sign-in").call();
    assert_eq!(form.status, 200);
    let csrf = form
        .text
        .split("name=\"csrf\" value=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .unwrap()
        .to_string();
    let cookie = header(&form, "set-cookie")[0]
        .split(';')
        .next()
        .unwrap()
        .to_string();
    (csrf, cookie)
}

fn sign_in(server: &MercerServer, shop: &str, email: &str, password: &str) -> Answer {
    sign_in_forwarded(server, shop, email, password, None)
}

/// [`sign_in`] with `X-Forwarded-For: forwarded_for`, as a proxy in front of Mercer would send
/// it (the request still comes from 127.0.0.1).
fn sign_in_forwarded(
    server: &MercerServer,
    shop: &str,
    email: &str,
    password: &str,
    forwarded_for: Option<&str>,
) -> Answer {
    let (csrf, cookie) = sign_in_form(server);
    let call = server.post("/console/sign-in").header("Cookie", &cookie);
    let call = match forwarded_for {
        Some(value) => call.header("X-Forwarded-For", value),
        None => call,
    };
    call.form(&[
        ("csrf", csrf.as_str()),
        ("shop", shop),
        ("email", email),
        ("password", password),
    ])
}

/// Behind a trusted proxy (`--trusted-proxies 127.0.0.1`, the address this test connects
/// from), the lockout pairs the account with the client `X-Forwarded-For` names: wrong
/// passwords from 203.0.113.7 lock the account there only, and it signs in from 203.0.113.8.
/// Entries a client writes in front of the proxy's are not believed. Without the flag the
/// header is ignored: every attempt is 127.0.0.1's, and the lock holds whatever it says.
fn behind_a_trusted_proxy_the_lockout_pairs_the_account_with_the_forwarded_client(
    backend: Backend,
) {
    const EMAIL: &str = "ops@demo.test";
    const LOCKED_OUT: &str = "203.0.113.7";
    const ELSEWHERE: &str = "203.0.113.8";
    let guess_until_locked = |server: &MercerServer, shop: &str| {
        let statuses: Vec<u16> = (0..6)
            .map(|_| {
                sign_in_forwarded(server, shop, EMAIL, "not the password", Some(LOCKED_OUT)).status
            })
            .collect();
        assert_eq!(statuses.first(), Some(&401), "{statuses:?}");
        assert_eq!(statuses.last(), Some(&429), "{statuses:?}");
    };

    let proxied = MercerServer::start_with(
        TestDatabase::create_migrated(backend),
        &["--trusted-proxies", "127.0.0.1"],
    );
    let shop = proxied.demo().shop.clone();
    staff(&proxied, &shop, EMAIL);
    guess_until_locked(&proxied, &shop);
    let right = |forwarded_for: &str| {
        sign_in_forwarded(&proxied, &shop, EMAIL, PASSWORD, Some(forwarded_for)).status
    };
    assert_eq!(right(LOCKED_OUT), 429, "the client that guessed is locked");
    // A client cannot pass for another by writing it first: the proxy appends the address it
    // was reached from, and that is the one read.
    assert_eq!(right(&format!("{ELSEWHERE}, {LOCKED_OUT}")), 429);
    assert_eq!(
        right(ELSEWHERE),
        303,
        "another client of the proxy signs in"
    );
    // Without the header, the proxy itself is the client, and it is not locked either.
    assert_eq!(
        sign_in(&proxied, &shop, EMAIL, PASSWORD).status,
        303,
        "127.0.0.1 is not locked"
    );

    let direct = MercerServer::start(backend);
    let shop = direct.demo().shop.clone();
    staff(&direct, &shop, EMAIL);
    guess_until_locked(&direct, &shop);
    assert_eq!(
        sign_in_forwarded(&direct, &shop, EMAIL, PASSWORD, Some(ELSEWHERE)).status,
        429,
        "without --trusted-proxies, X-Forwarded-For is ignored"
    );
}

fn sessions_cookies_and_headers_are_as_a_staff_console_needs(backend: Backend) {
    let server = MercerServer::start(backend);
    let shop = server.demo().shop.clone();
    staff(&server, &shop, "ops@demo.test");

    // Without a session every page goes to the sign-in page.
    for path in [
        "/console",
        "/console/webhooks",
        "/console/connector",
        "/console/audit",
    ] {
        let answer = server.get(path).call();
        assert_eq!(answer.status, 303, "{path}");
        assert_eq!(header(&answer, "location"), ["/console/sign-in"], "{path}");
    }
    // The sign-in form has a CSRF token of its own: a post without it (or with another) is 403.
    let (_, cookie) = sign_in_form(&server);
    let forged = server
        .post("/console/sign-in")
        .header("Cookie", &cookie)
        .form(&[
            ("csrf", "guessed"),
            ("shop", shop.as_str()),
            ("email", "ops@demo.test"),
            ("password", PASSWORD),
        ]);
    assert_eq!(forged.status, 403, "{}", forged.text);
    // A NUL in a field is a 400, not a lookup the database cannot make.
    let (csrf, cookie) = sign_in_form(&server);
    let nul = server
        .post("/console/sign-in")
        .header("Cookie", &cookie)
        .form(&[
            ("csrf", csrf.as_str()),
            ("shop", "shop\u{0}"),
            ("email", "ops@demo.test"),
            ("password", PASSWORD),
        ]);
    assert_eq!(nul.status, 400, "{}", nul.text);

    let signed_in = sign_in(&server, &shop, "ops@demo.test", PASSWORD);
    assert_eq!(signed_in.status, 303, "{}", signed_in.text);
    let session = header(&signed_in, "set-cookie")
        .into_iter()
        .find(|c| c.starts_with("mercer_console="))
        .unwrap()
        .to_string();
    for attribute in ["HttpOnly", "SameSite=Strict", "Path=/console"] {
        assert!(session.contains(attribute), "{session}");
    }
    assert!(!session.contains("Secure"), "plain HTTP: {session}");
    let cookie = session.split(';').next().unwrap().to_string();
    let page = server
        .get("/console/webhooks")
        .header("Cookie", &cookie)
        .call();
    assert_eq!(page.status, 200);
    assert_eq!(header(&page, "x-frame-options"), ["DENY"]);
    assert_eq!(header(&page, "cache-control"), ["no-store"]);
    assert!(header(&page, "content-security-policy")[0].contains("frame-ancestors 'none'"));
    // Behind a proxy that says the browser came over TLS, the cookie is Secure.
    let (csrf, pre) = sign_in_form(&server);
    let proxied = server
        .post("/console/sign-in")
        .header("Cookie", &pre)
        .header("X-Forwarded-Proto", "https")
        .form(&[
            ("csrf", csrf.as_str()),
            ("shop", shop.as_str()),
            ("email", "ops@demo.test"),
            ("password", PASSWORD),
        ]);
    assert!(
        header(&proxied, "set-cookie")
            .iter()
            .any(|c| c.starts_with("mercer_console=mss_") && c.contains("; Secure")),
        "{:?}",
        proxied.headers
    );

    // Signing out needs the form's token, and ends the session.
    let refused = server
        .post("/console/sign-out")
        .header("Cookie", &cookie)
        .form(&[("csrf", "nope")]);
    assert_eq!(refused.status, 403);
    let csrf = page
        .text
        .split("name=\"csrf\" value=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .unwrap()
        .to_string();
    let out = server
        .post("/console/sign-out")
        .header("Cookie", &cookie)
        .form(&[("csrf", csrf.as_str())]);
    assert_eq!(out.status, 303);
    let after = server.get("/console").header("Cookie", &cookie).call();
    assert_eq!(after.status, 303, "the session ended");

    // Wrong passwords: 401 with the form again, then the pair is locked (429), the right
    // password included, as on the consent page.
    let wrong = sign_in(&server, &shop, "ops@demo.test", "not the password");
    assert_eq!(wrong.status, 401);
    assert!(wrong.text.contains("not right"), "{}", wrong.text);
    let mut statuses = Vec::new();
    for _ in 0..5 {
        statuses.push(sign_in(&server, &shop, "ops@demo.test", "not the password").status);
    }
    assert_eq!(statuses.last(), Some(&429), "{statuses:?}");
    assert_eq!(
        sign_in(&server, &shop, "ops@demo.test", PASSWORD).status,
        429
    );
}

/// A signed-in session's cookie and the CSRF token of its forms.
pub(crate) fn session(server: &MercerServer, shop: &str, email: &str) -> (String, String) {
    let signed_in = sign_in(server, shop, email, PASSWORD);
    assert_eq!(signed_in.status, 303, "{}", signed_in.text);
    let cookie = header(&signed_in, "set-cookie")
        .into_iter()
        .find(|c| c.starts_with("mercer_console="))
        .and_then(|c| c.split(';').next())
        .unwrap()
        .to_string();
    let page = server.get("/console").header("Cookie", &cookie).call();
    let csrf = page
        .text
        .split("name=\"csrf\" value=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .unwrap()
        .to_string();
    (cookie, csrf)
}

fn the_jobs_page_lists_the_shops_jobs_and_retries_and_cancels_them(backend: Backend) {
    use mercer_domain::access::shop::ShopIdentifier;
    use mercer_domain::kernel::jobs::{JobState, NewJob};
    let server = MercerServer::start(backend);
    let shop = server.demo().shop.clone();
    staff(&server, &shop, "ops@demo.test");
    let other = other_shop(&server);
    let store = server.database().open_store();
    let shop_id = |identifier: &str| {
        store
            .read(|tx| Ok(tx.shop_by_identifier(&ShopIdentifier::parse(identifier).unwrap())?))
            .unwrap()
            .unwrap()
            .id
    };
    // A kind no worker runs, so the jobs stay as the test leaves them.
    let job = |shop_id| NewJob {
        kind: "console.test",
        payload: "{}".to_string(),
        unique_key: None,
        run_at: mercer_domain::Timestamp::now(),
        max_attempts: 3,
        shop_id: Some(shop_id),
        request_id: None,
        trace_parent: None,
    };
    let (ours, theirs) = store
        .write(|tx| {
            let ours = tx.enqueue_job(&job(shop_id(&shop)), mercer_domain::Timestamp::now())?;
            let theirs = tx.enqueue_job(&job(shop_id(&other)), mercer_domain::Timestamp::now())?;
            Ok((ours.id(), theirs.id()))
        })
        .unwrap();
    let state_of = |id| store.read(|tx| Ok(tx.job(id)?)).unwrap().unwrap().state;

    let (cookie, csrf) = session(&server, &shop, "ops@demo.test");
    let page = server.get("/console/jobs").header("Cookie", &cookie).call();
    assert_eq!(page.status, 200);
    assert!(page.text.contains("console.test"), "{}", page.text);
    assert!(page.text.contains(&format!("/console/jobs/{ours}/cancel")));
    assert!(
        !page.text.contains(&format!("/console/jobs/{theirs}/")),
        "another shop's job"
    );

    // By kind: the filter offers the shop's kinds, and keeps only the one chosen.
    assert!(
        page.text.contains("<option value=\"console.test\""),
        "{}",
        page.text
    );
    let of_kind = server
        .get("/console/jobs?kind=console.test")
        .header("Cookie", &cookie)
        .call();
    assert!(
        of_kind
            .text
            .contains(&format!("/console/jobs/{ours}/cancel"))
    );
    let of_other = server
        .get("/console/jobs?kind=platform.sync")
        .header("Cookie", &cookie)
        .call();
    assert!(
        of_other.text.contains("id=\"no-jobs\""),
        "{}",
        of_other.text
    );

    // An action asks to confirm first, and does nothing until confirmed.
    let post = |path: &str, fields: &[(&str, &str)]| {
        server.post(path).header("Cookie", &cookie).form(fields)
    };
    let cancel = format!("/console/jobs/{ours}/cancel");
    let asked = post(&cancel, &[("csrf", &csrf)]);
    assert_eq!(asked.status, 200);
    assert!(asked.text.contains("Are you sure?"), "{}", asked.text);
    assert_eq!(state_of(ours), JobState::Queued);
    let done = post(&cancel, &[("csrf", &csrf), ("confirm", "yes")]);
    assert_eq!(done.status, 303, "{}", done.text);
    assert_eq!(state_of(ours), JobState::Cancelled);
    let cancelled = server
        .get("/console/jobs?state=cancelled")
        .header("Cookie", &cookie)
        .call();
    assert!(
        cancelled
            .text
            .contains(&format!("/console/jobs/{ours}/retry"))
    );
    let retried = post(
        &format!("/console/jobs/{ours}/retry"),
        &[("csrf", &csrf), ("confirm", "yes")],
    );
    assert_eq!(retried.status, 303, "{}", retried.text);
    assert_eq!(state_of(ours), JobState::Queued);
    // Retrying a queued job is refused, and says why.
    let again = post(
        &format!("/console/jobs/{ours}/retry"),
        &[("csrf", &csrf), ("confirm", "yes")],
    );
    assert_eq!(again.status, 422, "{}", again.text);
    // Another shop's job is not found, and stays as it was.
    let foreign = post(
        &format!("/console/jobs/{theirs}/cancel"),
        &[("csrf", &csrf), ("confirm", "yes")],
    );
    assert_eq!(foreign.status, 404, "{}", foreign.text);
    assert_eq!(state_of(theirs), JobState::Queued);
    // Without the CSRF token, nothing happens.
    let forged = post(&cancel, &[("confirm", "yes")]);
    assert_eq!(forged.status, 403);
    assert_eq!(state_of(ours), JobState::Queued);

    let audit = server
        .get("/console/audit")
        .header("Cookie", &cookie)
        .call();
    assert!(audit.text.contains("job.cancel") && audit.text.contains("job.retry"));
    assert_eq!(
        audit.text.matches("ops@demo.test").count(),
        4,
        "two actions, the account's creation by the command line, and the header"
    );
}

fn the_subscriptions_page_shows_the_due_report_and_a_history(backend: Backend) {
    use crate::scheduler::subscription;
    use crate::subscriptions::{Api, id_of};
    // The scheduler looks once an hour: the subscription stays due while the test looks.
    let server = MercerServer::start_with(
        TestDatabase::create(backend),
        &["--scheduler-interval-ms", "3600000"],
    );
    let api = Api::demo(&server);
    staff(&server, &api.shop, "ops@demo.test");
    let other = other_shop(&server);
    let made = api.create(&subscription(
        "due@example.test",
        serde_json::json!({"subscription_status": "active",
                           "next_order_datetime": "2026-03-02T14:00:00Z"}),
    ));
    let id = id_of(&made);

    let (cookie, _) = session(&server, &api.shop, "ops@demo.test");
    let due = server
        .get("/console/subscriptions")
        .header("Cookie", &cookie)
        .call();
    assert_eq!(due.status, 200);
    assert!(
        due.text
            .contains(&format!("href=\"/console/subscriptions/{id}\"")),
        "{}",
        due.text
    );
    assert!(due.text.contains("2026-03-02 14:00:00 UTC"), "{}", due.text);
    let page = server
        .get(&format!("/console/subscriptions/{id}"))
        .header("Cookie", &cookie)
        .call();
    assert_eq!(page.status, 200);
    assert!(page.text.contains("id=\"status-log\""), "{}", page.text);
    assert!(page.text.contains("<code>created</code>"), "{}", page.text);

    // Another shop's staff member finds neither.
    let (theirs, _) = session(&server, &other, "other@other.test");
    let foreign = server
        .get(&format!("/console/subscriptions/{id}"))
        .header("Cookie", &theirs)
        .call();
    assert_eq!(foreign.status, 404);
    let their_due = server
        .get("/console/subscriptions")
        .header("Cookie", &theirs)
        .call();
    assert!(
        !their_due
            .text
            .contains(&format!("/console/subscriptions/{id}"))
    );
}

/// The last hour's and the last day's figures of an activity on the overview page.
fn activity(page: &str, key: &str) -> (i64, i64) {
    let row = page
        .split(&format!("<tr id=\"{key}\">"))
        .nth(1)
        .and_then(|rest| rest.split("</tr>").next())
        .unwrap_or_else(|| panic!("no row {key} in {page}"));
    let cells: Vec<i64> = row
        .split("<td class=\"num\">")
        .skip(1)
        .filter_map(|cell| cell.split('<').next()?.trim().parse().ok())
        .collect();
    assert_eq!(cells.len(), 2, "{row}");
    (cells[0], cells[1])
}

fn the_overview_counts_the_shops_deliveries_and_events(backend: Backend) {
    let server = MercerServer::start_with(
        TestDatabase::create(backend),
        &["--allow-private-targets", "--webhook-retry-schedule", "0s"],
    );
    let shop = shop(&server);
    let (failing_receiver, receiver) = (Receiver::start(), Receiver::start());
    let failing = create(&server, &shop, 1, &failing_receiver.url);
    let working = create(&server, &shop, 2, &receiver.url);
    failing_receiver.script(&[Reply::status(500)]);
    let failed = send_test(&server, &shop, failing["id"].as_str().unwrap());
    let delivered = send_test(&server, &shop, working["id"].as_str().unwrap());
    let store = server.database().open_store();
    let status_of = |message_id: &str| {
        store
            .read(|tx| Ok(tx.webhook_message(message_id)?))
            .unwrap()
            .map(|m| m.status)
    };
    assert!(wait_until(Duration::from_secs(15), || {
        status_of(&failed) == Some(MessageStatus::Failed)
            && status_of(&delivered) == Some(MessageStatus::Delivered)
    }));
    let connector = ConnectorShop {
        identifier: shop.id.clone(),
        token: shop.token.clone(),
    };
    for n in 0..3 {
        let email = format!("c{n}@example.test");
        let answer = customer_saved(&server, &connector, &customer(&format!("c{n}"), &email));
        assert_eq!(answer.status, 202, "{}", answer.text);
    }
    assert!(wait_until(Duration::from_secs(15), || counts(&store).0 == 0));

    staff(&server, &shop.id, "ops@demo.test");
    let (cookie, _) = session(&server, &shop.id, "ops@demo.test");
    let page = server.get("/console").header("Cookie", &cookie).call();
    assert_eq!(page.status, 200);
    assert_eq!(activity(&page.text, "webhooks.sent"), (2, 2));
    assert_eq!(activity(&page.text, "webhooks.delivered"), (1, 1));
    assert_eq!(activity(&page.text, "webhooks.failed"), (1, 1));
    assert_eq!(activity(&page.text, "events.received"), (3, 3));
    assert_eq!(activity(&page.text, "events.applied"), (3, 3));
    assert_eq!(activity(&page.text, "events.set_aside"), (0, 0));
    assert_eq!(activity(&page.text, "checkouts.processed"), (0, 0));

    // Another shop's overview counts none of it.
    let other = other_shop(&server);
    let (theirs, _) = session(&server, &other, "other@other.test");
    let page = server.get("/console").header("Cookie", &theirs).call();
    assert_eq!(activity(&page.text, "webhooks.sent"), (0, 0));
    assert_eq!(activity(&page.text, "events.received"), (0, 0));
}

/// The text of the element with `id` (to its first closing tag), or panics.
fn element<'a>(page: &'a str, id: &str) -> &'a str {
    page.split(&format!("id=\"{id}\""))
        .nth(1)
        .and_then(|rest| rest.split_once('>'))
        .and_then(|(_, rest)| rest.split('<').next())
        .unwrap_or_else(|| panic!("no #{id} in {page}"))
}

/// The Connector page's sync and secret actions and the Checkouts page, against the platform
/// simulator: a sync started from the console runs; a rotated secret is shown once, never in
/// the audit log; an abandoned checkout is listed with the order/abandoned webhook it fired.
fn syncs_secrets_and_checkouts_work_from_the_console(backend: Backend) {
    use crate::checkout::{init, override_server, set_up};
    use mercer_domain::access::secrets::SecretKind;
    use mercer_platform_sim::RunningSimulator;
    let sim = RunningSimulator::start().unwrap();
    let (hooks, overrides) = (Receiver::start(), override_server());
    let server = MercerServer::start_with(
        TestDatabase::create(backend),
        &[
            "--allow-private-targets",
            "--abandonment-delay-s",
            "1",
            "--abandonment-interval-s",
            "1",
        ],
    );
    let shop = set_up(&server, &sim, &hooks, &overrides);
    staff(&server, &shop.id, "ops@demo.test");
    let (cookie, csrf) = session(&server, &shop.id, "ops@demo.test");
    let get = |path: &str| server.get(path).header("Cookie", &cookie).call();
    let post = |path: &str, fields: &[(&str, &str)]| {
        server.post(path).header("Cookie", &cookie).form(fields)
    };

    // The destination, and a sync of its topic started from the console.
    let connector = get("/console/connector");
    assert_eq!(connector.status, 200);
    assert!(connector.text.contains(&sim.base_url), "{}", connector.text);
    assert!(connector.text.contains("id=\"no-syncs\""));
    let sync = "/console/connector/syncs/orders";
    let asked = post(sync, &[("csrf", &csrf)]);
    assert!(asked.text.contains("Are you sure?"), "{}", asked.text);
    assert!(get("/console/connector").text.contains("id=\"no-syncs\""));
    assert_eq!(
        post(sync, &[("csrf", &csrf), ("confirm", "yes")]).status,
        303
    );
    assert!(
        wait_until(Duration::from_secs(20), || {
            let page = get("/console/connector").text;
            page.contains("id=\"syncs\"") && page.contains("status succeeded")
        }),
        "{}",
        get("/console/connector").text
    );
    assert_eq!(
        post(
            "/console/connector/syncs/nothing",
            &[("csrf", &csrf), ("confirm", "yes")]
        )
        .status,
        404
    );

    // An abandoned checkout, with the webhook it fired.
    server
        .request("PATCH", &format!("/checkout/shop/{}/settings", shop.id))
        .bearer(&shop.token)
        .json(&serde_json::json!({"abandoned_cart_emails": false}));
    let order = init(
        &server,
        &shop,
        serde_json::json!({"cart_items": [{"platform_id": "var-coffee", "quantity": 2}],
                           "customer": {"email_address": "left@example.test",
                                        "first_name": "Left"}}),
    );
    let public_order_id = order["public_order_id"].as_str().unwrap().to_string();
    let checkout_page = format!("/console/checkouts/{public_order_id}");
    assert!(
        wait_until(Duration::from_secs(20), || get(&checkout_page)
            .text
            .contains("order/abandoned")),
        "{}",
        get(&checkout_page).text
    );
    let page = get(&checkout_page).text;
    assert_eq!(element(&page, "checkout-status"), "open");
    assert!(page.contains("abandoned"), "{page}");
    assert!(page.contains("left@example.test"), "{page}");
    let list = get("/console/checkouts?status=open").text;
    assert!(list.contains(&checkout_page), "{list}");
    assert!(
        !get("/console/checkouts?status=processed")
            .text
            .contains(&checkout_page)
    );
    assert_eq!(
        activity(&get("/console").text, "checkouts.abandoned"),
        (1, 1)
    );

    // The connector secret rotated: shown once, on a page no cache keeps, and it is the one
    // Mercer now signs with; the audit log names the kind, never the value.
    let rotate = "/console/secrets/connector/rotate";
    assert!(
        post(rotate, &[("csrf", &csrf)])
            .text
            .contains("Are you sure?")
    );
    let shown = post(rotate, &[("csrf", &csrf), ("confirm", "yes")]);
    assert_eq!(shown.status, 200, "{}", shown.text);
    assert!(
        shown
            .headers
            .iter()
            .any(|(name, value)| name == "cache-control" && value.contains("no-store"))
    );
    let secret = element(&shown.text, "secret").to_string();
    assert_eq!(secret.len(), 64, "{secret}");
    let store = server.database().open_store();
    let stored = store
        .read(|tx| {
            use mercer_domain::access::shop::ShopIdentifier;
            let id = tx
                .shop_by_identifier(&ShopIdentifier::parse(&shop.id).unwrap())?
                .unwrap()
                .id;
            Ok(tx.shared_secret(id, SecretKind::Connector)?)
        })
        .unwrap()
        .unwrap();
    assert_eq!(stored.current.expose(), secret);
    assert!(!get("/console/connector").text.contains(&secret));
    let audit = get("/console/audit").text;
    assert!(
        audit.contains("secret.rotate") && audit.contains("sync.start"),
        "{audit}"
    );
    assert!(!audit.contains(&secret));
    // The checkout's token secret never leaves Mercer.
    assert_eq!(
        post(
            "/console/secrets/checkout_token/rotate",
            &[("csrf", &csrf), ("confirm", "yes")]
        )
        .status,
        404
    );
    // Without the CSRF token nothing rotates.
    assert_eq!(post(rotate, &[("confirm", "yes")]).status, 403);

    // Another shop sees neither the checkout nor the sync.
    let other = other_shop(&server);
    let (theirs, _) = session(&server, &other, "other@other.test");
    let their = |path: &str| server.get(path).header("Cookie", &theirs).call();
    assert_eq!(their(&checkout_page).status, 404);
    assert!(!their("/console/checkouts").text.contains(&public_order_id));
    assert!(their("/console/connector").text.contains("id=\"no-syncs\""));
}

/// The Webhooks page jumps to a time: messages sent at or before it, newest first.
fn the_webhooks_page_jumps_to_a_time(backend: Backend) {
    let server = MercerServer::start_with(
        TestDatabase::create(backend),
        &["--allow-private-targets", "--webhook-retry-schedule", "0s"],
    );
    let shop = shop(&server);
    let receiver = Receiver::start();
    let endpoint = create(&server, &shop, 1, &receiver.url);
    let first = send_test(&server, &shop, endpoint["id"].as_str().unwrap());
    std::thread::sleep(Duration::from_millis(1100));
    let second = send_test(&server, &shop, endpoint["id"].as_str().unwrap());
    staff(&server, &shop.id, "ops@demo.test");
    let (cookie, _) = session(&server, &shop.id, "ops@demo.test");
    let list = |query: &str| {
        server
            .get(&format!("/console/webhooks?{query}"))
            .header("Cookie", &cookie)
            .call()
            .text
    };
    let all = list("");
    assert!(all.contains(&first) && all.contains(&second));
    let store = server.database().open_store();
    let created = store
        .read(|tx| Ok(tx.webhook_message(&first)?))
        .unwrap()
        .unwrap()
        .created_at;
    // To the second, rounded up: the first message is at or before it, the second after.
    let at = created.plus_seconds(1).to_rfc3339();
    let until = format!("until={}", &at[..19]);
    let jumped = list(&until);
    assert!(jumped.contains(&first), "{jumped}");
    assert!(!jumped.contains(&second), "{jumped}");
    assert!(
        jumped.contains(&format!("value=\"{}\"", &at[..19])),
        "{jumped}"
    );
    assert!(list("until=2001-01-01T00:00").contains("No message matches"));
}

backend_tests!(
    syncs_secrets_and_checkouts_work_from_the_console,
    the_webhooks_page_jumps_to_a_time,
    the_overview_counts_the_shops_deliveries_and_events,
    the_subscriptions_page_shows_the_due_report_and_a_history,
    a_staff_member_resends_a_failed_delivery_and_retries_an_event_in_a_browser,
    sessions_cookies_and_headers_are_as_a_staff_console_needs,
    behind_a_trusted_proxy_the_lockout_pairs_the_account_with_the_forwarded_client,
    the_jobs_page_lists_the_shops_jobs_and_retries_and_cancels_them,
);
