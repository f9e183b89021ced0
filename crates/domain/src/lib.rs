//! Mercer's domain: resource types, validation and rules, and the ports (traits) through which
//! the rest of the system reaches storage and the outside world.
//!
//! Architecture invariant: this crate does no I/O of its own. It depends on no database, HTTP or
//! async crate (checked by `cargo xtask tidy`). Use cases are functions over the ports, so they are
//! tested here against the in-memory store of [`testing`].

pub mod auth;
pub mod connector;
pub mod credentials;
pub mod destinations;
pub mod directory;
pub mod error;
pub mod events;
pub mod limits;
pub mod oauth;
pub mod outbox;
pub mod overrides;
pub mod platform;
pub mod ports;
pub mod secrets;
pub mod shop;
pub mod sync;
pub mod testing;
pub mod time;
pub mod version;
pub mod wake;
pub mod webhooks;

pub use error::{DomainError, FieldError, StorageError, StorageErrorKind};
pub use time::Timestamp;
