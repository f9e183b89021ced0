//! The test-delivery route's enqueue: a webhook a test delivery found is enqueued for again
//! without being read first, several requests' messages stored by one statement. Concurrent
//! sends are each stored once, a webhook deleted, disabled or throttled since is answered as
//! before, and a store that fails answers an error, never a 202.

use std::sync::Arc;

use mercer_tests::{Backend, MercerServer, backend_tests};

use crate::webhooks::{Shop, create, send_test, shop};

/// No delivery worker: the messages stay as they were stored.
const QUEUE_ONLY: &[&str] = &["--allow-private-targets", "--webhook-workers", "0"];
const CALLBACK: &str = "http://127.0.0.1:9/hook";

fn test_path(shop: &Shop, id: &str) -> String {
    format!("/checkout/shop/{}/webhooks/{id}/test", shop.id)
}

fn quoted(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

/// 16 clients sending at once, 20 sends each, after a first send: every 202 names a message of
/// its own, stored exactly once for the webhook, pending, with the id of the request that sent it.
fn concurrent_sends_are_each_stored_once(backend: Backend) {
    let server = Arc::new(MercerServer::in_process_with(backend, QUEUE_ONLY));
    let shop = Arc::new(shop(&server));
    let id = create(&server, &shop, 2, CALLBACK)["id"]
        .as_str()
        .unwrap()
        .to_string();
    let first = send_test(&server, &shop, &id);
    let senders: Vec<_> = (0..16)
        .map(|sender| {
            let (server, shop, id) = (server.clone(), shop.clone(), id.clone());
            std::thread::spawn(move || {
                (0..20)
                    .map(|n| {
                        let request_id = format!("enqueue-{sender}-{n}");
                        let answer = server
                            .post(&test_path(&shop, &id))
                            .bearer(&shop.token)
                            .header("X-Request-Id", &request_id)
                            .call();
                        assert_eq!(answer.status, 202, "{}", answer.text);
                        let message = answer.json()["data"]["message_id"]
                            .as_str()
                            .unwrap()
                            .to_string();
                        (message, request_id)
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let mut sent: Vec<(String, String)> = senders
        .into_iter()
        .flat_map(|sender| sender.join().unwrap())
        .collect();
    sent.sort();
    sent.dedup_by(|a, b| a.0 == b.0);
    assert_eq!(sent.len(), 320, "a message id of its own for each 202");
    let database = server.database();
    let stored = database.count(&format!(
        "SELECT COUNT(*) AS n FROM webhook_messages m JOIN webhook_endpoints e \
         ON e.id = m.endpoint_id WHERE e.public_id = {} AND m.status = 'pending' \
         AND m.topic = 'order/created'",
        quoted(&id)
    ));
    let distinct = database.count("SELECT COUNT(DISTINCT message_id) AS n FROM webhook_messages");
    assert_eq!((stored, distinct), (321, 321));
    let (message, request_id) = &sent[137];
    let kept = database.texts(&format!(
        "SELECT request_id AS t FROM webhook_messages WHERE message_id = {}",
        quoted(message)
    ));
    assert_eq!(kept, std::slice::from_ref(request_id));
    assert!(
        database.count(&format!(
            "SELECT COUNT(*) AS n FROM webhook_messages WHERE message_id = {}",
            quoted(&first)
        )) == 1
    );
}

/// A webhook a send found, then changed: throttled since, its next message is marked throttled;
/// disabled, 422 `webhook.disabled`; enabled again, 202; deleted, 404. Nothing is stored for the
/// refused sends.
fn a_webhook_changed_since_its_last_send_is_answered_as_it_is_now(backend: Backend) {
    let server = MercerServer::in_process_with(backend, QUEUE_ONLY);
    let shop = shop(&server);
    let id = create(&server, &shop, 1, CALLBACK)["id"]
        .as_str()
        .unwrap()
        .to_string();
    let database = server.database();
    let throttled = |message: &str| {
        database.count(&format!(
            "SELECT COUNT(*) AS n FROM webhook_messages WHERE message_id = {} AND throttled",
            quoted(message)
        ))
    };
    let plain = send_test(&server, &shop, &id);
    assert_eq!(throttled(&plain), 0);
    let limited = server
        .request(
            "PATCH",
            &format!("/checkout/shop/{}/webhooks/{id}", shop.id),
        )
        .bearer(&shop.token)
        .json(&serde_json::json!({ "rate_limit_per_s": 5 }));
    assert_eq!(limited.status, 200, "{}", limited.text);
    let slowed = send_test(&server, &shop, &id);
    assert_eq!(throttled(&slowed), 1);

    let messages = || database.count("SELECT COUNT(*) AS n FROM webhook_messages");
    let before = messages();
    database.execute(&format!(
        "UPDATE webhook_endpoints SET disabled_at = 1, disabled_reason = 'HTTP 410' \
         WHERE public_id = {}",
        quoted(&id)
    ));
    let refused = server
        .post(&test_path(&shop, &id))
        .bearer(&shop.token)
        .call();
    refused.assert_error(422, "webhook.disabled");
    let enabled = server
        .post(&format!("/checkout/shop/{}/webhooks/{id}/enable", shop.id))
        .bearer(&shop.token)
        .call();
    assert_eq!(enabled.status, 200, "{}", enabled.text);
    send_test(&server, &shop, &id);
    let deleted = server
        .request(
            "DELETE",
            &format!("/checkout/shop/{}/webhooks/{id}", shop.id),
        )
        .bearer(&shop.token)
        .call();
    assert_eq!(deleted.status, 204, "{}", deleted.text);
    let gone = server
        .post(&test_path(&shop, &id))
        .bearer(&shop.token)
        .call();
    assert_eq!(gone.status, 404, "{}", gone.text);
    assert_eq!(
        messages(),
        before + 1,
        "only the send while enabled was stored"
    );
}

/// While the store refuses new messages, a send the route would store in one statement is
/// answered with an error, not a 202, and nothing is stored; once it takes them again, 202.
fn a_store_that_fails_answers_an_error_not_202(backend: Backend) {
    let server = MercerServer::in_process_with(backend, QUEUE_ONLY);
    let shop = shop(&server);
    let id = create(&server, &shop, 2, CALLBACK)["id"]
        .as_str()
        .unwrap()
        .to_string();
    send_test(&server, &shop, &id);
    let database = server.database();
    let (fail, heal) = match backend {
        Backend::Sqlite => (
            "CREATE TRIGGER refuse_messages BEFORE INSERT ON webhook_messages \
             BEGIN SELECT RAISE(ABORT, 'refused by the test'); END;",
            "DROP TRIGGER refuse_messages;",
        ),
        Backend::Postgres => (
            "CREATE FUNCTION refuse_messages() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN \
             RAISE EXCEPTION 'refused by the test'; END $$; \
             CREATE TRIGGER refuse_messages BEFORE INSERT ON webhook_messages \
             FOR EACH ROW EXECUTE FUNCTION refuse_messages();",
            "DROP TRIGGER refuse_messages ON webhook_messages; DROP FUNCTION refuse_messages();",
        ),
    };
    database.execute(fail);
    let refused = server
        .post(&test_path(&shop, &id))
        .bearer(&shop.token)
        .call();
    assert!(refused.status >= 500, "{} {}", refused.status, refused.text);
    assert_eq!(
        database.count("SELECT COUNT(*) AS n FROM webhook_messages"),
        1
    );
    database.execute(heal);
    send_test(&server, &shop, &id);
    assert_eq!(
        database.count("SELECT COUNT(*) AS n FROM webhook_messages"),
        2
    );
}

backend_tests!(
    concurrent_sends_are_each_stored_once,
    a_webhook_changed_since_its_last_send_is_answered_as_it_is_now,
    a_store_that_fails_answers_an_error_not_202,
);
