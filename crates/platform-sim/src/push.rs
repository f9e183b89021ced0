//! Pushing the platform's own changes to Mercer as Saved and Deleted events.

use std::time::Duration;

use mercer_domain::Timestamp;
use serde::Serialize;
use serde_json::json;

use crate::state::MercerLink;

/// What the simulator pushes: which kind of entity, and whether it was saved or deleted.
#[derive(Debug, Clone, Copy)]
pub enum EventKind {
    Customer,
    Order,
    Product,
    Category,
}

impl EventKind {
    fn path(self) -> (&'static str, &'static str, &'static str) {
        match self {
            EventKind::Customer => ("customers", "customers", "customer"),
            EventKind::Order => ("orders", "orders", "order"),
            EventKind::Product => ("products", "products", "product"),
            EventKind::Category => ("products", "categories", "category"),
        }
    }
}

/// The outcome of one push: Mercer's status, or why it could not be reached.
#[derive(Debug, Clone, Serialize)]
pub struct PushOutcome {
    pub status: Option<u16>,
    pub error: Option<String>,
}

fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(10)))
        .build()
        .into()
}

fn post(link: &MercerLink, path: &str, body: serde_json::Value) -> PushOutcome {
    let url = format!("{}{path}", link.base_url.trim_end_matches('/'));
    match agent()
        .post(&url)
        .header("Authorization", &format!("Bearer {}", link.token))
        .header("Content-Type", "application/json")
        .send(body.to_string())
    {
        Ok(response) => PushOutcome {
            status: Some(response.status().as_u16()),
            error: None,
        },
        Err(error) => PushOutcome {
            status: None,
            error: Some(error.to_string()),
        },
    }
}

/// Pushes a Saved event with the complete entity.
pub fn saved<T: Serialize>(
    link: &MercerLink,
    shop: &str,
    kind: EventKind,
    entity: &T,
) -> PushOutcome {
    let (service, collection, key) = kind.path();
    let path = format!("/{service}/v1/shops/{shop}/platforms/custom/webhooks/{collection}/saved");
    post(link, &path, json!({ "data": { key: entity } }))
}

/// Pushes a Deleted event.
pub fn deleted(
    link: &MercerLink,
    shop: &str,
    kind: EventKind,
    platform_id: &str,
    at: Timestamp,
) -> PushOutcome {
    let (service, collection, key) = kind.path();
    let path = format!("/{service}/v1/shops/{shop}/platforms/custom/webhooks/{collection}/deleted");
    post(
        link,
        &path,
        json!({ "data": { key: { "platform_id": platform_id, "platform_deleted_at": at } } }),
    )
}
