//! What every feature uses from storage: the jobs queue.

mod jobs;
