//! Mercer's domain: resource types, validation and rules, and the ports (traits) through which
//! the rest of the system reaches storage and the outside world.
//!
//! The code is grouped by feature (`access`, `platform`, `directory`, `webhooks`, `overrides`,
//! `subscriptions`, `checkout`, `box_builder`). Each
//! feature owns its types, rules, use cases and repository trait; every feature may use
//! `kernel` and `access`, and other edges are named in docs/ARCHITECTURE.md (checked by
//! `cargo xtask tidy`). `ports` and `operations` only combine the features.
//!
//! Architecture invariant: this crate does no I/O of its own. It depends on no database, HTTP or
//! async crate (checked by `cargo xtask tidy`). Use cases are functions over the ports, so they are
//! tested here against the in-memory database of `testing` (feature `testing`).

#![warn(missing_docs)]

pub mod access;
pub mod box_builder;
pub mod checkout;
pub mod directory;
pub mod kernel;
pub mod operations;
pub mod overrides;
pub mod platform;
pub mod portal;
pub mod ports;
pub mod privacy;
pub mod subscriptions;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
pub mod webhooks;

pub use kernel::error::{DomainError, FieldError, StorageError, StorageErrorKind};
pub use kernel::time::Timestamp;
