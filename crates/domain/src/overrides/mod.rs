//! API overrides: their rules, picking the one that applies to an order, the typed answers, and
//! the `OverrideCaller` port.

mod repository;
mod rules;

pub use repository::{OverrideDatabase, OverrideRepositories, OverrideRepository};
pub use rules::*;
