//! Mercer's server: the HTTP API (actix-web), the operator's command line, and the composition
//! root that starts the store, the workers and the webhook dispatcher. The `mercer` binary is a
//! thin `main` over [`commands::run`]; [`embedded`] runs the same server inside another program.

pub mod cli;
pub mod commands;
pub mod config;
pub mod embedded;
pub mod heartbeat;
pub mod http;
pub mod logging;
pub mod runtime;
pub mod table;
pub mod tracing_export;
