//! `mercer`: the HTTP API server and the operator's command line, in one binary.

use std::process::ExitCode;

use clap::Parser;
use mercer_server::{cli, commands, logging};

/// mimalloc: the server allocates many short-lived buffers (JSON documents, rows) on several
/// threads, where glibc's allocator spent a tenth of the CPU in the ingest benchmark.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let cli = cli::Cli::parse();
    logging::init(&cli.log_level, cli.log_format);
    match commands::run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error}");
            ExitCode::FAILURE
        }
    }
}
