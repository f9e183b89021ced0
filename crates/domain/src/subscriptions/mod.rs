//! Subscriptions: the resources, the Create Subscription body,
//! `order_rrule` and the order dates it gives, the state machine with its status log and
//! webhook topics, the List Subscriptions query, the use cases (docs/subscriptions.md) and the
//! scheduler that places their orders through the connector (docs/scheduler.md).

pub mod analytics;
pub mod cancellation;
pub mod console;
pub mod customers;
pub mod dunning;
pub mod groups;
pub mod imports;
pub mod input;
pub mod operations;
pub mod orders;
pub mod pausing;
pub mod query;
pub mod recurrence;
pub mod repository;
pub mod resources;
pub mod scheduler;
pub mod states;
pub mod topics;
pub mod webhooks;
