//! `mercer`: the HTTP API server and the operator's command line, in one binary.

use std::process::ExitCode;

use mercer_server::cli::Command;
use mercer_server::tracing_export::TraceExport;
use mercer_server::{commands, config, logging};

/// mimalloc: the server allocates many short-lived buffers (JSON documents, rows) on several
/// threads, where glibc's allocator spent a tenth of the CPU in the ingest benchmark.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    // The command line, with the settings file's values for what it left unset.
    let cli = match config::load(std::env::args_os()) {
        Ok(cli) => cli,
        Err(config::ConfigError::Clap(error)) => error.exit(),
        Err(error) => {
            eprintln!("error: {error}");
            return ExitCode::FAILURE;
        }
    };
    // Traces are the server's: `serve --otlp-endpoint` alone exports them.
    let otlp_endpoint = match &cli.command {
        Command::Serve(args) => args.otlp_endpoint.as_deref(),
        _ => None,
    };
    let traces = match otlp_endpoint.map(TraceExport::start).transpose() {
        Ok(traces) => traces,
        Err(error) => {
            eprintln!("error: {error}");
            return ExitCode::FAILURE;
        }
    };
    logging::init(&cli.log_level, cli.log_format, traces.as_ref());
    let result = commands::run(cli);
    // After serve's graceful stop: the spans still queued are sent.
    if let Some(traces) = traces {
        traces.shutdown();
    }
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error}");
            ExitCode::FAILURE
        }
    }
}
