//! Webhooks: endpoints, messages with one `webhook-id` for all their attempts, the retry policy
//! and what a decision makes of a message and its endpoint, checkout webhook registration.

pub mod catalogue;
pub mod console;
mod delivery;
pub mod operational;
mod repository;
pub mod retention;
mod throttling;

pub use delivery::*;
pub use repository::{WebhookDatabase, WebhookRepositories, WebhookRepository};
pub use throttling::*;

use serde::Serialize;

use crate::kernel::time::Timestamp;

/// The body of a subscription webhook: its topic, the shop, when it happened and `data`, what
/// the topic is about.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct Envelope<Data> {
    /// The topic's name (`subscription_created`), as `X-Svc-Topic` also carries it.
    pub topic: String,
    /// The shop's identifier.
    pub shop_identifier: String,
    /// When the change happened.
    pub created_at: Timestamp,
    /// What the topic is about.
    pub data: Data,
}
