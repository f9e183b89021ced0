//! Subscriptions (seed 002): customers, addresses, subscriptions, actions and states,
//! recurrence, and the scheduler's rules. Pure rules so far; the store, routes and webhooks
//! come with the rest of the subscriptions issue (docs/subscriptions.md).

pub mod recurrence;
pub mod resources;
pub mod states;
pub mod topics;
pub mod input;
