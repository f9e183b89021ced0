//! The platform connector: the platform's resources, destinations and their
//! verification, the connector port, inbound events and their apply rule (customers' groups
//! included), syncs, the outbox of service-side changes, and placing orders exactly once.

pub mod addresses;
pub mod catalogue;
pub mod connector;
pub mod console;
pub mod customer_groups;
pub mod customer_tokens;
pub mod destinations;
pub mod events;
pub mod outbox;
pub mod placement;
mod repository;
pub mod resources;
pub mod sync;

pub use repository::{
    DestinationRepository, EventQueueRepository, OutboxRepository, PlatformDatabase,
    PlatformRepositories, PlatformRepository, SyncRepository,
};
