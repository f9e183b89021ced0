#![warn(missing_docs)]
//! The job runner (docs/jobs.md): worker threads that claim due jobs of the kinds they know
//! from the domain's jobs queue, run each with its handler, and record how it ended (done,
//! retried with backoff, failed, or interrupted); a lease keeper that renews the leases of the
//! jobs this process runs, so only a dead process's jobs are taken over. A panicking handler is
//! a failed attempt, retried like any other.
//!
//! It runs on any [`mercer_domain::ports::Database`]: the store on SQLite or PostgreSQL, or the
//! in-memory database of the domain's `testing` feature. Everything here blocks: it runs on
//! threads of its own.

mod runner;

pub use runner::{JobHandlers, JobRunner, JobRunnerConfig};

/// The README's example, compiled and run as a doctest.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
