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
