//! Mercer inside another program: what `mercer serve` runs (store, workers, webhook dispatcher,
//! the HTTP server with its transport), started on a thread of its own and stopped on drop. The
//! API tests run it in-process; only what needs the real binary (signals, the CLI's
//! output, several processes) starts `mercer`.

use std::sync::mpsc;
use std::thread::JoinHandle;

use clap::Parser;
use mercer_domain::access::shop::DemoCredentials;

use crate::cli::{Cli, Command};
use crate::commands::{self, CommandError, Services};
use crate::http;

/// A running in-process Mercer.
pub struct EmbeddedServer {
    /// `http://127.0.0.1:PORT`.
    pub base_url: String,
    /// The demo credentials a first start on an empty database makes.
    pub demo: Option<DemoCredentials>,
    handle: actix_web::dev::ServerHandle,
    thread: Option<JoinHandle<()>>,
}

impl EmbeddedServer {
    /// Starts Mercer on `database_url` as `mercer --database-url URL serve ARGS…` would (bind
    /// with `--bind 127.0.0.1:0` for a free port). `/metrics` renders a recorder of its own,
    /// which is not installed: counters go to whatever recorder the program installed.
    pub fn start(database_url: &str, serve_args: &[&str]) -> Result<EmbeddedServer, CommandError> {
        let cli = Cli::try_parse_from(
            ["mercer", "--database-url", database_url, "serve"]
                .iter()
                .chain(serve_args),
        )
        .map_err(|error| CommandError::Usage(error.to_string()))?;
        let Command::Serve(args) = cli.command else {
            return Err(CommandError::Usage("not a serve command".to_string()));
        };
        let url = mercer_store::DatabaseUrl::parse(&cli.database_url)?;
        let metrics = metrics_exporter_prometheus::PrometheusBuilder::new()
            .build_recorder()
            .handle();
        let options = commands::serve_options(&args);
        let listeners = http::listen(&options.bind)?;
        let (state, services, demo) = commands::start_services(&url, &args, metrics)?;
        let (bound_tx, bound_rx) = mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("mercer-embedded".to_string())
            .spawn(move || run(state, services, listeners, &options, bound_tx))?;
        let (base_url, handle) = bound_rx
            .recv()
            .map_err(|_| CommandError::Usage("the embedded server did not start".to_string()))??;
        Ok(EmbeddedServer {
            base_url,
            demo,
            handle,
            thread: Some(thread),
        })
    }
}

type Bound = Result<(String, actix_web::dev::ServerHandle), CommandError>;

/// The server thread: binds, reports where, serves until stopped, then stops the services.
fn run(
    state: http::state::AppState,
    mut services: Services,
    listeners: Vec<std::net::TcpListener>,
    options: &http::ServeOptions,
    bound: mpsc::Sender<Bound>,
) {
    let watched = &mut services;
    let served = actix_web::rt::System::new().block_on(async move {
        let server = match http::bind(state, listeners, options) {
            Ok(server) => server,
            Err(error) => {
                let _ = bound.send(Err(error.into()));
                return Ok(());
            }
        };
        let base = server
            .addresses
            .first()
            .map(commands::reachable)
            .unwrap_or_default();
        let _ = bound.send(Ok((base, server.handle())));
        watched.stop_server_on_a_newer_database(server.handle());
        server.run_until_stopped().await
    });
    if let Err(error) = served {
        log::error!("the embedded server stopped with an error: {error}");
    }
    if let Some(refusal) = services.stop() {
        log::error!("the embedded server stopped: {refusal}");
    }
}

impl Drop for EmbeddedServer {
    /// Stops gracefully (requests in flight are answered) and joins the server and its workers.
    fn drop(&mut self) {
        let handle = self.handle.clone();
        actix_web::rt::System::new().block_on(handle.stop(true));
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
