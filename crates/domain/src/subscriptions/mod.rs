//! Subscriptions (seed 002 §2–§7, contract §5): the resources, the Create Subscription body,
//! `order_rrule` and the order dates it gives, the state machine with its status log and
//! webhook topics, and the List Subscriptions query. Pure rules so far: the store, routes,
//! use cases and webhook deliveries come with the rest of the subscriptions issue
//! (docs/subscriptions.md).

pub mod customers;
pub mod input;
pub mod operations;
pub mod query;
pub mod recurrence;
pub mod repository;
pub mod resources;
pub mod states;
pub mod topics;
pub mod webhooks;
