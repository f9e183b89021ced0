//! The reliability suite (docs/operations.md, "What Mercer guarantees"): Mercer killed with
//! SIGKILL under load, its PostgreSQL stopped and started, its SQLite disk filled, its connector
//! misbehaving, and every route of the OpenAPI document tried with another shop's token. Each
//! scenario checks that nothing is lost and reports its figures
//! (`mercer_tests::chaos::Figures`).
//!
//! `cargo xtask test` runs the short form; `cargo xtask chaos` the full one (`MERCER_CHAOS=full`:
//! more rounds, more load), together with the kill tests of the scheduler (`scheduler.rs`) and
//! of syncs (`jobs.rs`), and prints every scenario's figures. `cargo xtask chaos retention`
//! runs the soak of the webhook retention (`retention.rs`), ignored otherwise: it takes minutes.

mod connector_faults;
mod database_down;
mod disk_full;
mod isolation;
mod kills;
mod retention;

use std::collections::BTreeMap;

use mercer_tests::chaos::Outcome;

/// Statuses a request may get while Mercer is killed or its database is down or full, besides
/// the one it succeeds with: 503 (with `Retry-After`), 507, or no answer at all. Anything else
/// (a 500, a 502) is a failure, listed.
pub(crate) fn unexpected_answers<'a>(
    outcomes: impl Iterator<Item = &'a Outcome>,
    success: u16,
) -> BTreeMap<String, usize> {
    let mut unexpected = BTreeMap::new();
    for outcome in outcomes {
        let fine = match outcome {
            Outcome::Answered(status, _) if *status == success => true,
            Outcome::Answered(503, retry_after) => retry_after.is_some(),
            Outcome::Answered(507, _) => true,
            Outcome::Answered(..) => false,
            Outcome::Unanswered => true,
        };
        if !fine {
            *unexpected.entry(format!("{outcome:?}")).or_default() += 1;
        }
    }
    unexpected
}
