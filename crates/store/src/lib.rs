//! Mercer's storage: one diesel code base over SQLite (bundled, the embedded default) and
//! PostgreSQL (production), an r2d2 pool, embedded migrations, and the implementations of the
//! domain's storage ports.
//!
//! Everything here blocks: call it from worker threads or `web::block`, never from an async task.

pub mod backup;
mod budgets;
mod connection;
mod migrations;
pub mod processes;
mod repos;
mod rows;
pub mod schema;
mod store;
mod url;

#[cfg(feature = "testing")]
pub mod testing;

pub use connection::DbConnection;
pub use migrations::MigrationStatus;
pub use store::{OpenError, PoolOptions, Store};
pub use url::{Backend, DatabaseUrl, UrlError};
