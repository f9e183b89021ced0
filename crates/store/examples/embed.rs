//! Embedding Mercer: open a store on SQLite (its migrations applied), create a shop and a
//! subscription through the domain's use cases, and read the subscription back. No server, no
//! HTTP: the same use cases the routes call.
//!
//! ```text
//! cargo run --example embed
//! ```

use mercer_domain::Timestamp;
use mercer_domain::access::shop::{ShopInput, create_shop};
use mercer_domain::ports::Database;
use mercer_domain::subscriptions::operations::{create_subscription_from_body, get_subscription};
use mercer_domain::subscriptions::resources::{Actor, ActorType};
use mercer_store::{DatabaseUrl, PoolOptions, Store};
use serde_json::json;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // Any database Mercer runs on: `postgres://…` works the same.
    let file = std::env::temp_dir().join(format!("mercer-embed-{}.db", std::process::id()));
    let url = DatabaseUrl::parse(&format!("sqlite://{}", file.display()))?;
    let store = Store::open_and_migrate(&url, &PoolOptions::default())?;
    let now = Timestamp::now();

    // Each use case runs in a unit of work: `write` is one transaction, `read` a snapshot.
    let shop = store.write(|tx| {
        let input = ShopInput {
            shop_domain: "embedded.example.test".to_string(),
            timezone: Some("America/Toronto".to_string()),
            ..ShopInput::default()
        };
        create_shop(tx, input, now)
    })?;
    // The body Create Subscription takes over HTTP, checked the same way (a 422's problems
    // come back as `DomainError::Invalid`, each on its field).
    let body = json!({
        "customer": {"email": "ada@example.test", "first_name": "Ada"},
        "subscription": {
            "order_rrule": "DTSTART;TZID=America/Toronto:20300107T090000\nRRULE:FREQ=WEEKLY",
            "line_items": [{"platform_product_id": "coffee", "platform_variant_id": "1kg",
                            "quantity": 2, "price": 1250}],
            "shipping_address": {"street1": "1 Main St", "city": "Toronto", "country_code": "CA"}
        }
    });
    let actor = Actor {
        kind: ActorType::Api,
        id: 0,
        name: "embed example".to_string(),
    };
    let (created, _) =
        store.write(|tx| create_subscription_from_body(tx, &shop, &body, actor, now))?;
    let read = store.read(|tx| get_subscription(tx, &shop, created.id, true))?;

    println!(
        "shop {} has subscription {} ({}), next order {} : {}",
        shop.identifier.as_str(),
        read.id,
        read.subscription_status.as_str(),
        read.next_order_datetime
            .map(|at| at.to_rfc3339())
            .unwrap_or_default(),
        read.order_rrule_text
    );
    assert_eq!(read.line_items[0].quantity, 2);
    drop(store);
    let _ = std::fs::remove_file(&file);
    Ok(())
}
