//! The headless checkout (issue 15; docs/checkout.md): the storefront API that the
//! vendor's frontend library drives, its orders and `application_state`, the overrides it calls,
//! the built-in test gateway, and the six checkout topics it fires.

pub mod console;
pub mod input;
pub mod payloads;
pub mod processing;
pub mod repository;
pub mod settings;
pub mod shown;
pub mod state;
pub mod storefront;
pub mod sweeps;
pub mod token;

#[cfg(test)]
mod tests;
