//! Destinations, platform entities, the inbound event queue, sync runs and the connector outbox.

mod destinations;
mod entities;
pub(crate) mod events;
mod outbox;
mod sync;
