//! The HTTP API: actix-web app, routes, extractors, errors, and the server's life cycle.

pub mod access_cache;
pub mod error;
pub mod extract;
pub mod middleware;
pub mod routes;
pub mod sign_in_limiter;
pub mod state;

use std::net::SocketAddr;

use actix_web::middleware::from_fn;
use actix_web::{App, HttpServer, web};

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
        // A path segment that does not parse (an id that is not a number) names no resource.
        .app_data(
            web::PathConfig::default().error_handler(|_, _| ApiError::route_not_found().into()),
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
        .wrap(from_fn(middleware::api_version))
        .wrap(from_fn(middleware::log_request))
}

pub struct ServeOptions {
    pub bind: String,
    pub workers: Option<usize>,
    /// How long a graceful stop waits for requests in flight.
    pub shutdown_timeout_secs: u64,
}

/// A bound server: its addresses are known before it runs (the bind may ask for port 0).
pub struct BoundServer {
    server: actix_web::dev::Server,
    pub addresses: Vec<SocketAddr>,
}

pub fn bind(state: AppState, options: &ServeOptions) -> std::io::Result<BoundServer> {
    let state = web::Data::new(state);
    let mut server = HttpServer::new(move || app(state.clone()))
        // Signals are ours (see `BoundServer::run`): actix would stop at once on SIGINT.
        .disable_signals()
        .shutdown_timeout(options.shutdown_timeout_secs);
    if let Some(workers) = options.workers {
        server = server.workers(workers);
    }
    let server = server.bind(&options.bind)?;
    let addresses = server.addrs();
    Ok(BoundServer {
        server: server.run(),
        addresses,
    })
}

impl BoundServer {
    /// Serves until SIGTERM or SIGINT, then stops gracefully: no new connections, requests in
    /// flight are answered (up to the shutdown timeout).
    pub async fn run(self) -> std::io::Result<()> {
        let handle = self.server.handle();
        actix_web::rt::spawn(async move {
            let signal = wait_for_stop_signal().await;
            log::info!("{signal} received: finishing requests in flight, then stopping");
            handle.stop(true).await;
        });
        self.server.await
    }
}

async fn wait_for_stop_signal() -> &'static str {
    use actix_web::rt::signal::unix::{SignalKind, signal};
    let (Ok(mut terminate), Ok(mut interrupt)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        log::error!("cannot listen for SIGTERM/SIGINT; stop the process with SIGKILL");
        std::future::pending::<()>().await;
        unreachable!()
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
