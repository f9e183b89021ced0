//! What every feature uses: errors, the `filter` query language of lists, time and the clock,
//! the unit-of-work trait features run their transactions through, lenient readers of remote
//! answers, text limits, the API version
//! header, the outbound address rule, the worker wake-up signal and the jobs queue every
//! feature's background work runs on, and the shops' activity counts. The kernel uses no feature.

pub mod activity;
pub mod body;
pub mod database;
pub mod error;
pub mod filter;
pub mod ids;
pub mod jobs;
pub mod lenient;
pub mod limits;
pub mod money;
pub mod outbound;
pub mod time;
pub mod version;
pub mod wake;
