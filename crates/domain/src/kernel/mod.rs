//! What every feature uses: errors, time and the clock, the unit-of-work trait features run
//! their transactions through, text limits, the API version header, the outbound address
//! rule and the worker wake-up signal. The kernel uses no feature.

pub mod database;
pub mod error;
pub mod limits;
pub mod outbound;
pub mod time;
pub mod version;
pub mod wake;
