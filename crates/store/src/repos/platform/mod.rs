//! Destinations, platform entities (and customers' groups), the inbound event queue, sync runs
//! and the connector outbox.

mod customer_groups;
mod destinations;
mod entities;
pub(crate) mod events;
mod merges;
mod outbox;
mod sync;
