//! A reference e-commerce platform behind a connector, served from memory.
//!
//! It answers every connector operation by the rules of docs/connector.md, checks Mercer's HMACs with the
//! connector kit, pushes Saved and Deleted events to a Mercer server when its own data changes
//! (through its admin API), and can be told to misbehave (statuses, delays, wrong HMACs,
//! malformed JSON) for fault tests. Run it as `mercer-platform-sim serve`, or embed it with
//! [`RunningSimulator::start`].

pub mod push;
pub mod server;
pub mod state;

pub use server::{RunningSimulator, Simulator, app};
pub use state::{DECLINED_TOKEN, Faults, MercerLink};
