//! The subscriber portal (docs/portal.md): the pages where a shop's customer manages their own
//! subscriptions. Its sessions (`sessions`), the shop's branding of its pages (`branding`), what
//! the pages show (`pages`) and what a customer may do there (`actions`), each action through
//! the same use case as the API's.

pub mod actions;
pub mod branding;
pub mod pages;
mod repository;
pub mod sessions;

pub use repository::{PortalDatabase, PortalRepositories, PortalRepository};

#[cfg(test)]
mod tests;
