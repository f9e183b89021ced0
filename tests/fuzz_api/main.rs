//! Schema fuzzing: schemathesis sends generated requests to every operation of the real
//! `mercer`'s OpenAPI document, on each database, as the demo shop, following the document's
//! links from creates to reads. It must find no server error (5xx) and no answer that breaks
//! the document.
//!
//! The shop is seeded first (`seed.rs`): the platform simulator as its connector, a product,
//! a subscription group, a subscription, a webhook subscription, a box with a product, a size
//! and a time slot, a checkout order and a platform customer with a token. Each security scheme gets its credential
//! and the operations on those records get their ids, so generated bodies reach the handlers
//! with real records behind them.
//!
//! `cargo xtask test` runs it briefly (`MERCER_FUZZ_SECONDS`, default 45 s per database);
//! `cargo xtask fuzz-api` runs it long. Outgoing calls are limited to loopback
//! (`--loopback-targets-only`): the fuzzer's URLs never lead Mercer off the machine.

mod seed;

use mercer_tests::schemathesis::{fuzz, max_time};
use mercer_tests::{Backend, MercerServer, TestDatabase, backend_tests};

backend_tests!(schemathesis_finds_no_server_error_and_no_answer_off_the_document);

fn schemathesis_finds_no_server_error_and_no_answer_off_the_document(backend: Backend) {
    let server = MercerServer::start_with(
        TestDatabase::create_migrated(backend),
        &["--loopback-targets-only"],
    );
    let seeded = seed::seed(&server);
    let name = backend.name();
    let findings =
        fuzz(&server, name, max_time(45), &seeded.plan).unwrap_or_else(|error| panic!("{error}"));
    println!(
        "schemathesis on {name}: {} operations, {} cases, {} failures (report {})",
        findings.operations,
        findings.cases,
        findings.failures,
        findings.report.display()
    );
    assert!(
        findings.exit_code == 0 && findings.failures == 0,
        "schemathesis found {} failures on {name} (exit {}):\n{}",
        findings.failures,
        findings.exit_code,
        findings.output
    );
    assert!(
        findings.cases > 0 && findings.operations > 0,
        "{}",
        findings.output
    );
}
