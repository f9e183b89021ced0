//! Webhooks: endpoints, messages with one `webhook-id` for all their attempts, the retry policy
//! and what a decision makes of a message and its endpoint, checkout webhook registration.

pub mod console;
mod delivery;
mod repository;

pub use delivery::*;
pub use repository::{WebhookDatabase, WebhookRepositories, WebhookRepository};
