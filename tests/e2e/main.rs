//! End-to-end tests: the real `mercer` binary, over HTTP, on SQLite and on PostgreSQL.
//! One test binary for the whole suite keeps link times down.

mod cli;
mod foundation;
mod lifecycle;
