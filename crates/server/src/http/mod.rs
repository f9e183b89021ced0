//! The HTTP API: actix-web app, routes, extractors, errors, and the server's life cycle.

pub mod budgets;
pub mod client_address;
pub mod console;
pub mod customer_checks;
pub mod error;
pub mod extract;
pub mod html;
pub mod links;
pub mod middleware;
pub mod openapi;
pub mod routes;
pub mod short_cache;
pub mod sign_in_limiter;
pub mod state;
pub mod transport;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use actix_http::{HttpService, KeepAlive};
use actix_service::{IntoServiceFactory, ServiceFactoryExt, map_config};
use actix_web::dev::AppConfig;
use actix_web::middleware::from_fn;
use actix_web::{App, web};

use error::ApiError;
use state::AppState;

/// The whole app, ready for `HttpServer::new` or actix's test harness.
pub fn app(
    state: web::Data<AppState>,
) -> App<
    impl actix_web::dev::ServiceFactory<
        actix_web::dev::ServiceRequest,
        Config = (),
        Response = actix_web::dev::ServiceResponse<impl actix_web::body::MessageBody>,
        Error = actix_web::Error,
        InitError = (),
    >,
> {
    let max_body = state.max_body_bytes;
    App::new()
        .app_data(state)
        .app_data(web::PayloadConfig::new(max_body))
        // A path's id that is not a number is its resource's 404; another segment that does not
        // parse names no resource.
        .app_data(
            web::PathConfig::default()
                .error_handler(|error, _| ApiError::path_not_found(&error).into()),
        )
        .app_data(
            web::QueryConfig::default().error_handler(|error, _| {
                ApiError::invalid_query("query", error.to_string()).into()
            }),
        )
        .configure(routes::configure)
        .default_service(web::to(|| async {
            Err::<String, _>(ApiError::route_not_found())
        }))
        .wrap(from_fn(console::show_notice))
        .wrap(from_fn(middleware::api_version))
        .wrap(from_fn(middleware::body_deadline))
        .wrap(from_fn(middleware::log_request))
}

pub struct ServeOptions {
    pub bind: String,
    pub workers: Option<usize>,
    /// How long a graceful stop waits for requests in flight.
    pub shutdown_timeout_secs: u64,
    /// Most client connections open at once, all workers together.
    pub max_connections: usize,
    /// Most connections one client address holds open at once; 0 for no cap.
    pub max_connections_per_ip: usize,
    /// How long a new connection may stay silent before it is closed.
    pub first_byte_timeout: Duration,
}

/// A bound server: its addresses are known before it runs (the bind may ask for port 0).
pub struct BoundServer {
    server: actix_web::dev::Server,
    pub addresses: Vec<SocketAddr>,
}

/// Listens on `address` (every address it resolves to). `serve` does this first, before it
/// touches the database: a port that is taken stops it before anything is created, with an
/// error naming the address.
pub fn listen(address: &str) -> std::io::Result<Vec<std::net::TcpListener>> {
    transport::listeners(address).map_err(|error| {
        std::io::Error::new(error.kind(), format!("cannot listen on {address}: {error}"))
    })
}

/// Serves on `listeners` (from [`listen`]). It is actix-web's `HttpServer` assembled by hand,
/// with its settings, so that connections go through `transport::ContractStream` (the
/// JSON error body on actix-http's bare parse-error answers).
pub fn bind(
    state: AppState,
    listeners: Vec<std::net::TcpListener>,
    options: &ServeOptions,
) -> std::io::Result<BoundServer> {
    let state = web::Data::new(state);
    let mut builder = actix_server::Server::build()
        // Signals are ours (see `BoundServer::run`): actix would stop at once on SIGINT.
        .disable_signals()
        .shutdown_timeout(options.shutdown_timeout_secs);
    let workers = options.workers.unwrap_or_else(|| {
        std::thread::available_parallelism().map_or(2, std::num::NonZeroUsize::get)
    });
    // actix counts connections per worker: the cap is shared out, rounding up.
    builder = builder
        .workers(workers)
        .max_concurrent_connections(options.max_connections.div_ceil(workers.max(1)));
    // One count per client address for every listener and worker.
    let admission = Arc::new(transport::Admission {
        per_address: transport::PerAddressCap::new(options.max_connections_per_ip),
        first_byte_timeout: options.first_byte_timeout,
    });
    // A head begun must be whole within 5 s of the connection's start, or within the first-byte
    // deadline when that is longer.
    let head_timeout = options.first_byte_timeout.max(Duration::from_secs(5));
    let mut addresses = Vec::new();
    for listener in listeners {
        let address = listener.local_addr()?;
        // Lets idle keep-alive connections close when a graceful stop begins.
        let stopping = builder.graceful_shutdown_signal();
        let state = state.clone();
        let admission = admission.clone();
        let factory = move || {
            let stopping = stopping.clone();
            let app = app(state.clone())
                .into_factory()
                .map_err(|error: actix_web::Error| error.error_response());
            let host = address.to_string();
            let http = HttpService::build()
                .graceful_shutdown_signal(move || {
                    let stopping = stopping.clone();
                    async move { stopping.notified().await }
                })
                .keep_alive(KeepAlive::default())
                .client_request_timeout(head_timeout)
                .client_disconnect_timeout(Duration::from_secs(1))
                .h1_allow_half_closed(true)
                .local_addr(address)
                // `AppConfig::new` is crate-private; this is its public (hidden) twin.
                .finish(map_config(app, move |()| {
                    AppConfig::__priv_test_new(false, host.clone(), address)
                }));
            transport::accept(admission.clone()).and_then(http)
        };
        builder = builder.listen(format!("mercer-{address}"), listener, factory)?;
        addresses.push(address);
    }
    Ok(BoundServer {
        server: builder.run(),
        addresses,
    })
}

impl BoundServer {
    /// Serves until SIGTERM or SIGINT (taken by `stop`, perhaps before serving began), then
    /// stops gracefully: no new connections, requests in flight are answered (up to the
    /// shutdown timeout).
    pub async fn run(self, stop: StopSignals) -> std::io::Result<()> {
        let handle = self.server.handle();
        actix_web::rt::spawn(async move {
            let signal = stop.received().await;
            log::info!("{signal} received: finishing requests in flight, then stopping");
            handle.stop(true).await;
        });
        self.server.await
    }

    /// The handle that stops the server (for a server run without [`BoundServer::run`]'s
    /// signal handling).
    pub fn handle(&self) -> actix_web::dev::ServerHandle {
        self.server.handle()
    }

    /// Serves until stopped through [`BoundServer::handle`]; signals are left to the caller.
    pub async fn run_until_stopped(self) -> std::io::Result<()> {
        self.server.await
    }
}

/// SIGTERM and SIGINT, taken from the moment [`StopSignals::listen`] is called: one that
/// comes before [`StopSignals::received`] is awaited is kept, not lost.
pub struct StopSignals {
    signals: Option<(
        actix_web::rt::signal::unix::Signal,
        actix_web::rt::signal::unix::Signal,
    )>,
}

impl StopSignals {
    /// Takes SIGTERM and SIGINT away from their default (ending the process at once). Called
    /// within the runtime that will await them.
    pub fn listen() -> StopSignals {
        use actix_web::rt::signal::unix::{SignalKind, signal};
        let signals = match (
            signal(SignalKind::terminate()),
            signal(SignalKind::interrupt()),
        ) {
            (Ok(terminate), Ok(interrupt)) => Some((terminate, interrupt)),
            _ => {
                log::error!("cannot listen for SIGTERM/SIGINT; stop the process with SIGKILL");
                None
            }
        };
        StopSignals { signals }
    }

    /// The name of the first signal received.
    pub async fn received(self) -> &'static str {
        let Some((mut terminate, mut interrupt)) = self.signals else {
            return std::future::pending().await;
        };
        std::future::poll_fn(|cx| {
            if terminate.poll_recv(cx).is_ready() {
                std::task::Poll::Ready("SIGTERM")
            } else if interrupt.poll_recv(cx).is_ready() {
                std::task::Poll::Ready("SIGINT")
            } else {
                std::task::Poll::Pending
            }
        })
        .await
    }
}
