//! What every feature uses from storage: the jobs queue and the shops' activity counts.

mod activity;
mod jobs;
