//! `mercer-vendure`: a platform connector for Vendure 3.x.
//!
//! It serves every connector operation for one Mercer shop from Vendure's Admin API (with an
//! API key), checks Mercer's signatures on each call with the connector kit, and sends
//! Vendure's changes to Mercer as events: the Mercer plugin (`plugin/index.js`, loaded by
//! Vendure) pushes each change through Vendure's job queue to `POST /vendure/events`, and a
//! reconcile pass sends what a lost push missed.
//!
//! - [`vendure`]: the Admin API and Shop API client;
//! - [`dev`]: the pinned development Vendure (install and start), for `cargo xtask vendure` and
//!   tests;
//! - [`model`]: Vendure's entities and their mapping to the interface's resources;
//! - [`operations`]: the connector operations;
//! - [`server`]: the HTTP side (operations, plugin pushes, health);
//! - [`relay`]: changes to events, sent to Mercer;
//! - [`reconcile`]: the periodic pass over what changed.

pub mod dev;
pub mod model;
pub mod operations;
pub mod reconcile;
pub mod relay;
pub mod server;
pub mod vendure;
