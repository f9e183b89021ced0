//! `mercer`: the HTTP API server and the operator's command line, in one binary.

use std::process::ExitCode;

use clap::Parser;
use mercer_server::{cli, commands};

/// mimalloc: the server allocates many short-lived buffers (JSON documents, rows) on several
/// threads, where glibc's allocator spent a tenth of the CPU in the ingest benchmark.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let cli = cli::Cli::parse();
    let mut logger = env_logger::Builder::new();
    logger.parse_filters(&cli.log_level).format_target(true);
    // At trace level ureq's protocol layer dumps every byte sent and received: the signing
    // headers of connector calls (X-HMAC, Signature-Input, Signature) and of webhooks with them.
    // Its debug lines redact headers, so it never logs below debug, whatever the filter asks.
    let asked = env_logger::Builder::new()
        .parse_filters(&cli.log_level)
        .build();
    let wire_dump = log::Metadata::builder()
        .target("ureq_proto::util")
        .level(log::Level::Trace)
        .build();
    if log::Log::enabled(&asked, &wire_dump) {
        logger.filter_module("ureq_proto", log::LevelFilter::Debug);
    }
    logger.init();
    match commands::run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error}");
            ExitCode::FAILURE
        }
    }
}
