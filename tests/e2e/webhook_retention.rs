//! The retention of webhook payloads and attempts end to end: `mercer serve` with a retention of
//! 0.0001 day (8.64 s) purges a delivered message's payload and attempts once that long has
//! passed since its delivery; the delivery log (API and console) still lists it, says it was
//! purged, and refuses to send it again.

use std::time::Duration;

use mercer_domain::ports::Database;
use mercer_domain::webhooks::MessageStatus;
use mercer_tests::receiver::Receiver;
use mercer_tests::{Backend, MercerServer, TestDatabase, backend_tests, wait_until};

use crate::console::{session, staff};
use crate::webhooks::{create, send_test, shop};

fn a_delivered_message_is_purged_after_the_retention_period(backend: Backend) {
    let server = MercerServer::start_with(
        TestDatabase::create(backend),
        &[
            "--allow-private-targets",
            "--webhook-retention-days",
            "0.0001",
        ],
    );
    let shop = shop(&server);
    let receiver = Receiver::start();
    let webhook = create(&server, &shop, 1, &receiver.url);
    let id = webhook["id"].as_str().unwrap().to_string();
    let base = format!("/checkout/shop/{}/webhooks/{id}", shop.id);
    let message_id = send_test(&server, &shop, &id);
    let store = server.database().open_store();
    let read = || {
        store
            .read(|tx| Ok(tx.webhook_message(&message_id)?))
            .unwrap()
            .unwrap()
    };
    assert!(wait_until(Duration::from_secs(10), || read().status
        == MessageStatus::Delivered));
    let delivered_at = read().delivered_at.unwrap();

    // Before the period ends: everything is there.
    let one = server
        .get(&format!("{base}/deliveries/{message_id}"))
        .bearer(&shop.token)
        .call()
        .json();
    if read().purged_at.is_none() {
        assert_eq!(one["data"]["payload_purged"], false, "{one}");
        assert_eq!(one["data"]["payload"]["test"], true, "{one}");
        assert_eq!(one["data"]["attempts"].as_array().unwrap().len(), 1);
    }

    // The purge runs every quarter period: the message is purged within the period and a
    // quarter, never before the period.
    assert!(
        wait_until(Duration::from_secs(40), || read().purged_at.is_some()),
        "not purged"
    );
    let purged = read();
    let purged_at = purged.purged_at.unwrap();
    assert!(
        purged_at.as_micros() - delivered_at.as_micros() >= 8_640_000,
        "purged {}s after delivery, before the period",
        (purged_at.as_micros() - delivered_at.as_micros()) / 1_000_000
    );
    assert_eq!(purged.status, MessageStatus::Delivered);
    assert_eq!(purged.payload, "");
    let attempts = store
        .read(|tx| Ok(tx.webhook_attempts(purged.id)?))
        .unwrap();
    assert!(attempts.is_empty(), "{attempts:?}");

    // The delivery log still lists it, purged.
    let log = server
        .get(&format!("{base}/deliveries"))
        .bearer(&shop.token)
        .call()
        .json();
    let line = &log["data"][0];
    assert_eq!(line["message_id"], message_id.as_str());
    assert_eq!(line["status"], "delivered");
    assert_eq!(line["payload_purged"], true);
    assert_eq!(line["purged_at"], purged_at.to_rfc3339());
    assert!(line["last_attempt"].is_null());
    let one = server
        .get(&format!("{base}/deliveries/{message_id}"))
        .bearer(&shop.token)
        .call()
        .json();
    assert_eq!(one["data"]["payload_purged"], true);
    assert!(one["data"]["payload"].is_null());
    assert_eq!(one["data"]["attempts"], serde_json::json!([]));

    // Nothing is left to send again.
    let refused = server
        .post(&format!("{base}/deliveries/{message_id}/resend"))
        .bearer(&shop.token)
        .call();
    assert_eq!(refused.status, 422, "{}", refused.text);
    assert!(
        refused.text.contains("message.purged")
            && refused.text.contains("the message's payload was purged"),
        "{}",
        refused.text
    );
    assert_eq!(read().status, MessageStatus::Delivered);

    // The console's message page says so, and offers no resend.
    staff(&server, &shop.id, "ops@demo.test");
    let (cookie, _) = session(&server, &shop.id, "ops@demo.test");
    let page = server
        .get(&format!("/console/webhooks/messages/{message_id}"))
        .header("Cookie", &cookie)
        .call();
    assert_eq!(page.status, 200);
    assert!(
        page.text.contains("Payload purged after 0.0001 days"),
        "{}",
        page.text
    );
    assert!(!page.text.contains("/resend\""), "{}", page.text);
}

backend_tests!(a_delivered_message_is_purged_after_the_retention_period);
