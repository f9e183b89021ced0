//! `mercer-vendure serve`: the Vendure connector for one Mercer shop.

use std::process::ExitCode;
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use actix_web::{App, HttpServer};
use clap::{Parser, Subcommand};
use mercer_outbound::PrivateAddressGuard;
use mercer_vendure::reconcile;
use mercer_vendure::relay::Relay;
use mercer_vendure::server::{Connector, routes};
use mercer_vendure::vendure::Vendure;
use serde_json::json;

#[derive(Parser)]
#[command(
    name = "mercer-vendure",
    version,
    about = "A Mercer platform connector for Vendure.",
    help_expected = true
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the connector operations for one shop, and send Vendure's changes to Mercer.
    Serve(Serve),
}

#[derive(clap::Args)]
struct Serve {
    /// Address and port to listen on.
    #[arg(long, env = "MERCER_VENDURE_BIND", default_value = "127.0.0.1:4100")]
    bind: String,
    /// Vendure's root URL: the connector calls `{URL}/admin-api` and `{URL}/shop-api`.
    #[arg(long, env = "MERCER_VENDURE_VENDURE_URL")]
    vendure_url: String,
    /// A Vendure Admin API key (a superadmin's, or one with the customer, order, catalog and
    /// settings permissions).
    #[arg(long, env = "MERCER_VENDURE_VENDURE_API_KEY", hide_env_values = true)]
    vendure_api_key: String,
    /// The Mercer shop identifier the connector serves.
    #[arg(long, env = "MERCER_VENDURE_SHOP")]
    shop: String,
    /// The shop's connector shared secret (`mercer secret rotate --kind connector`).
    #[arg(long, env = "MERCER_VENDURE_SECRET", hide_env_values = true)]
    secret: String,
    /// Mercer's base URL, where events are sent.
    #[arg(long, env = "MERCER_VENDURE_MERCER_URL")]
    mercer_url: String,
    /// A Mercer API token of the shop with write_customers, write_orders and write_products.
    #[arg(long, env = "MERCER_VENDURE_MERCER_TOKEN", hide_env_values = true)]
    mercer_token: String,
    /// Seconds between reconcile passes.
    #[arg(
        long,
        env = "MERCER_VENDURE_RECONCILE_INTERVAL_S",
        default_value_t = 60
    )]
    reconcile_interval_s: u64,
    /// The URL Vendure reaches the connector at (default: http:// and the bind address).
    #[arg(long, env = "MERCER_VENDURE_PUBLIC_URL")]
    public_url: Option<String>,
    /// Allow Vendure and Mercer on loopback or private networks (local development, tests).
    #[arg(long, env = "MERCER_VENDURE_ALLOW_PRIVATE_TARGETS")]
    allow_private_targets: bool,
}

fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("MERCER_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
}

/// Tells the plugin where to push and with which secret; retried until Vendure answers, so a
/// connector started before Vendure registers once Vendure is up.
fn register_with_plugin(vendure: Vendure, url: String, secret: String) {
    thread::spawn(move || {
        let mut wait = Duration::from_millis(500);
        loop {
            let registered = vendure.admin::<serde_json::Value>(
                "mutation($url: String!, $secret: String!) { setMercerConnector(url: $url, secret: $secret) }",
                json!({ "url": url, "secret": secret }),
            );
            match registered {
                Ok(_) => {
                    tracing::info!(url, "the Mercer plugin forwards Vendure's changes here");
                    return;
                }
                Err(error) => {
                    tracing::warn!(%error, "could not reach the Mercer plugin; retrying");
                    thread::sleep(wait);
                    wait = (wait * 2).min(Duration::from_secs(30));
                }
            }
        }
    });
}

fn serve(args: Serve) -> std::io::Result<()> {
    let guard = match args.allow_private_targets {
        true => PrivateAddressGuard::ALLOW_PRIVATE,
        false => PrivateAddressGuard::STRICT,
    };
    let vendure = Vendure::new(&args.vendure_url, &args.vendure_api_key, guard);
    let relay = Relay::new(&args.mercer_url, &args.mercer_token, &args.shop, guard);
    let listener = std::net::TcpListener::bind(&args.bind)?;
    let address = listener.local_addr()?;
    let public_url = args
        .public_url
        .clone()
        .unwrap_or_else(|| format!("http://{address}"));
    register_with_plugin(vendure.clone(), public_url.clone(), args.secret.clone());
    let interval = Duration::from_secs(args.reconcile_interval_s.max(1));
    reconcile::spawn(vendure.clone(), relay.clone(), public_url, interval);
    let connector = Arc::new(Connector::new(&args.shop, &args.secret, vendure, relay));
    tracing::info!(%address, shop = args.shop, "mercer-vendure listening");
    println!("mercer-vendure listening on http://{address}");
    actix_web::rt::System::new().block_on(
        HttpServer::new(move || {
            App::new()
                .wrap(actix_web::middleware::from_fn(
                    mercer_vendure::server::log_call,
                ))
                .configure(routes(Arc::clone(&connector)))
        })
        .listen(listener)?
        .run(),
    )
}

fn main() -> ExitCode {
    init_logging();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Serve(args) => serve(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("mercer-vendure: {error}");
            ExitCode::FAILURE
        }
    }
}
