//! `mercer-platform-sim`: run the simulated platform, or drive a running one.

use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use actix_web::{HttpServer, web};
use clap::{Parser, Subcommand};
use mercer_platform_sim::{Simulator, app};
use serde_json::{Value, json};

/// Where the simulator listens, and where its commands find it, unless told otherwise.
const DEFAULT_URL: &str = "http://127.0.0.1:9090";

#[derive(Parser)]
#[command(
    name = "mercer-platform-sim",
    version,
    about = "A simulated e-commerce platform behind a Mercer platform connector.",
    help_expected = true
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the connector operations and the admin API.
    Serve {
        /// Address and port; port 0 picks a free one (printed). Without it, the host and port of
        /// --admin-url.
        #[arg(long, env = "SIM_BIND")]
        bind: Option<String>,
        /// The simulator's base URL, as the other commands take it: without --bind, `serve`
        /// listens at its host and port, so one variable names the simulator for every command.
        #[arg(long, env = "SIM_ADMIN_URL", default_value = DEFAULT_URL)]
        admin_url: String,
        /// Live nonces of signed calls remembered against replays (each kept for the 5-minute
        /// skew window); calls beyond them are refused. Raise it for loads of more calls than
        /// this in five minutes.
        #[arg(long, env = "SIM_NONCE_CAPACITY", default_value_t = mercer_connector::kit::DEFAULT_NONCE_CAPACITY)]
        nonce_capacity: usize,
    },
    /// Register a shop: its connector secret, and where to push its events.
    Shop {
        /// The simulator's base URL (where `serve` listens); its admin API is under /admin.
        #[arg(long, env = "SIM_ADMIN_URL", default_value = DEFAULT_URL)]
        admin_url: String,
        /// The shop's identifier (Mercer's shop_identifier).
        #[arg(long)]
        shop: String,
        /// The shop's connector shared secret (from `mercer secret rotate --kind connector`).
        #[arg(long)]
        secret: String,
        /// Mercer's base URL, to push events to.
        #[arg(long)]
        mercer_url: Option<String>,
        /// A Mercer API token with write_customers, write_orders and write_products.
        #[arg(long)]
        mercer_token: Option<String>,
    },
    /// Create a customer on the platform (pushes Customer Saved to Mercer).
    CreateCustomer {
        /// The simulator's base URL (where `serve` listens); its admin API is under /admin.
        #[arg(long, env = "SIM_ADMIN_URL", default_value = DEFAULT_URL)]
        admin_url: String,
        /// The shop's identifier (Mercer's shop_identifier).
        #[arg(long)]
        shop: String,
        /// The customer's email.
        #[arg(long)]
        email: String,
        /// The customer's first name.
        #[arg(long)]
        first_name: Option<String>,
        /// The customer's last name.
        #[arg(long)]
        last_name: Option<String>,
    },
    /// Delete a customer on the platform (pushes Customer Deleted to Mercer).
    DeleteCustomer {
        /// The simulator's base URL (where `serve` listens); its admin API is under /admin.
        #[arg(long, env = "SIM_ADMIN_URL", default_value = DEFAULT_URL)]
        admin_url: String,
        /// The shop's identifier (Mercer's shop_identifier).
        #[arg(long)]
        shop: String,
        /// The customer's platform id (`cus_…`).
        #[arg(long)]
        platform_id: String,
    },
    /// Create or change a product on the platform (pushes Product Saved to Mercer).
    CreateProduct {
        /// The simulator's base URL (where `serve` listens); its admin API is under /admin.
        #[arg(long, env = "SIM_ADMIN_URL", default_value = DEFAULT_URL)]
        admin_url: String,
        /// The shop's identifier (Mercer's shop_identifier).
        #[arg(long)]
        shop: String,
        /// The product's platform id; the platform makes one when left out.
        #[arg(long)]
        platform_id: Option<String>,
        /// The product's name.
        #[arg(long)]
        name: String,
        /// A variant as `ID=PRICE` (`carrot-1kg=2.50`): its platform id (and SKU) and price.
        /// Repeat for more variants.
        #[arg(long = "variant", value_name = "ID=PRICE", required = true)]
        variants: Vec<String>,
    },
    /// Issue a token to a customer of the platform (printed as {"token"}), the kind a storefront
    /// hands a signed-in shopper; Validate Customer JWT finds it active.
    CustomerToken {
        /// The simulator's base URL (where `serve` listens); its admin API is under /admin.
        #[arg(long, env = "SIM_ADMIN_URL", default_value = DEFAULT_URL)]
        admin_url: String,
        /// The shop's identifier (Mercer's shop_identifier).
        #[arg(long)]
        shop: String,
        /// The customer's platform id (`cus_…`).
        #[arg(long)]
        platform_id: String,
    },
    /// Revoke every token of a customer: Validate Customer JWT finds them inactive.
    RevokeCustomerTokens {
        /// The simulator's base URL (where `serve` listens); its admin API is under /admin.
        #[arg(long, env = "SIM_ADMIN_URL", default_value = DEFAULT_URL)]
        admin_url: String,
        /// The shop's identifier (Mercer's shop_identifier).
        #[arg(long)]
        shop: String,
        /// The customer's platform id (`cus_…`).
        #[arg(long)]
        platform_id: String,
    },
    /// Fill the platform with customers and orders without pushing events (for syncs).
    Seed {
        /// The simulator's base URL (where `serve` listens); its admin API is under /admin.
        #[arg(long, env = "SIM_ADMIN_URL", default_value = DEFAULT_URL)]
        admin_url: String,
        /// The shop's identifier (Mercer's shop_identifier).
        #[arg(long)]
        shop: String,
        /// Customers to make.
        #[arg(long, default_value_t = 0)]
        customers: usize,
        /// Orders to make, of the shop's customers.
        #[arg(long, default_value_t = 0)]
        orders: usize,
        /// Products of two variants each, in categories of ten.
        #[arg(long, default_value_t = 0)]
        products: usize,
    },
    /// Make connector operations misbehave; `--clear` makes them behave again.
    Fault {
        /// The simulator's base URL (where `serve` listens); its admin API is under /admin.
        #[arg(long, env = "SIM_ADMIN_URL", default_value = DEFAULT_URL)]
        admin_url: String,
        /// Answer every connector operation with this HTTP status (500, 429, 404…).
        #[arg(long)]
        status: Option<u16>,
        /// With --status (a 3xx), this Location header: a connector that redirects.
        #[arg(long, requires = "status")]
        location: Option<String>,
        /// Wait this many milliseconds before answering (past a destination's timeout_ms,
        /// Mercer sees a timeout).
        #[arg(long)]
        delay_ms: Option<u64>,
        /// Sign the destination verification answer with a wrong secret.
        #[arg(long)]
        wrong_hmac: bool,
        /// Prove the secret wrongly in the verification answer (X-Verification-Proof).
        #[arg(long)]
        wrong_proof: bool,
        /// Answer with a body that is not JSON.
        #[arg(long)]
        malformed_json: bool,
        /// Only the next this-many connector requests misbehave (all of them when left out).
        #[arg(long)]
        times: Option<u32>,
        /// Behave again: forget every fault.
        #[arg(long)]
        clear: bool,
    },
}

fn admin(method: &str, url: String, body: Option<Value>) -> Result<(), String> {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(30)))
        .build()
        .into();
    let send = || match (method, &body) {
        ("DELETE", _) => agent.delete(&url).call(),
        ("POST", None) => agent.post(&url).send_empty(),
        ("PATCH", Some(body)) => agent.patch(&url).send_json(body),
        ("PUT", Some(body)) => agent.put(&url).send_json(body),
        (_, Some(body)) => agent.post(&url).send_json(body),
        (_, None) => agent.get(&url).call(),
    };
    // A simulator started a moment ago in the background may not listen yet: wait for it (up
    // to 10 s) rather than fail the command.
    let mut result = send();
    for _ in 0..40 {
        match &result {
            Err(ureq::Error::Io(error))
                if error.kind() == std::io::ErrorKind::ConnectionRefused =>
            {
                std::thread::sleep(Duration::from_millis(250));
                result = send();
            }
            _ => break,
        }
    }
    let mut response = result.map_err(|error| format!("{url}: {error}"))?;
    let status = response.status().as_u16();
    let text = response.body_mut().read_to_string().unwrap_or_default();
    println!("{text}");
    if (200..300).contains(&status) {
        Ok(())
    } else {
        Err(format!("{url} answered {status}"))
    }
}

/// A product of `create-product`: each variant given as `ID=PRICE`.
fn product_body(
    platform_id: Option<String>,
    name: &str,
    variants: &[String],
) -> Result<Value, String> {
    let mut listed = Vec::with_capacity(variants.len());
    for variant in variants {
        let (id, price) = variant
            .split_once('=')
            .filter(|(id, price)| !id.is_empty() && price.parse::<f64>().is_ok())
            .ok_or_else(|| format!("--variant {variant}: expected ID=PRICE, as carrot-1kg=2.50"))?;
        listed.push(
            json!({"platform_id": id, "sku": id, "name": format!("{name} {id}"),
            "price": price, "require_shipping": true}),
        );
    }
    Ok(json!({"platform_id": platform_id, "name": name, "published": true, "variants": listed}))
}

/// The `host:port` a base URL such as `http://127.0.0.1:9090/` names, for `serve` to bind.
fn bind_address(url: &str) -> Result<String, String> {
    let authority = url
        .strip_prefix("http://")
        .ok_or_else(|| format!("--admin-url {url}: expected http://HOST:PORT"))?
        .split(['/', '?', '#'])
        .next()
        .unwrap_or_default();
    // A URL without a port means http's own.
    let has_port = authority
        .rsplit_once(':')
        .is_some_and(|(_, port)| port.parse::<u16>().is_ok())
        && !authority.ends_with(']');
    match (authority.is_empty(), has_port) {
        (true, _) => Err(format!("--admin-url {url}: expected http://HOST:PORT")),
        (false, true) => Ok(authority.to_string()),
        (false, false) => Ok(format!("{authority}:80")),
    }
}

fn serve(bind: &str, nonce_capacity: usize) -> Result<(), String> {
    let data = web::Data::new(Simulator::with_nonce_capacity(nonce_capacity));
    actix_web::rt::System::new().block_on(async move {
        let server = HttpServer::new(move || app(data.clone()))
            .bind(bind)
            .map_err(|error| format!("cannot bind {bind}: {error}"))?;
        let address = server
            .addrs()
            .first()
            .map(|a| a.to_string())
            .unwrap_or_else(|| bind.to_string());
        println!("Platform simulator listening on http://{address}");
        let _ = std::io::stdout().flush();
        server.run().await.map_err(|error| error.to_string())
    })
}

fn main() -> ExitCode {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn")).init();
    let result = match Cli::parse().command {
        Command::Serve {
            bind,
            admin_url,
            nonce_capacity,
        } => match bind {
            Some(bind) => serve(&bind, nonce_capacity),
            None => bind_address(&admin_url).and_then(|bind| serve(&bind, nonce_capacity)),
        },
        Command::Shop {
            admin_url,
            shop,
            secret,
            mercer_url,
            mercer_token,
        } => admin(
            "PUT",
            format!("{admin_url}/admin/shops/{shop}"),
            Some(
                json!({ "secret": secret, "mercer_url": mercer_url, "mercer_token": mercer_token }),
            ),
        ),
        Command::CreateCustomer {
            admin_url,
            shop,
            email,
            first_name,
            last_name,
        } => admin(
            "POST",
            format!("{admin_url}/admin/shops/{shop}/customers"),
            Some(json!({ "email": email, "first_name": first_name, "last_name": last_name })),
        ),
        Command::DeleteCustomer {
            admin_url,
            shop,
            platform_id,
        } => admin(
            "DELETE",
            format!("{admin_url}/admin/shops/{shop}/customers/{platform_id}"),
            None,
        ),
        Command::CustomerToken {
            admin_url,
            shop,
            platform_id,
        } => admin(
            "POST",
            format!("{admin_url}/admin/shops/{shop}/customers/{platform_id}/token"),
            None,
        ),
        Command::RevokeCustomerTokens {
            admin_url,
            shop,
            platform_id,
        } => admin(
            "DELETE",
            format!("{admin_url}/admin/shops/{shop}/customers/{platform_id}/token"),
            None,
        ),
        Command::Seed {
            admin_url,
            shop,
            customers,
            orders,
            products,
        } => admin(
            "POST",
            format!("{admin_url}/admin/shops/{shop}/seed"),
            Some(json!({ "customers": customers, "orders": orders, "products": products })),
        ),
        Command::CreateProduct {
            admin_url,
            shop,
            platform_id,
            name,
            variants,
        } => product_body(platform_id, &name, &variants).and_then(|body| {
            admin(
                "POST",
                format!("{admin_url}/admin/shops/{shop}/products"),
                Some(body),
            )
        }),
        Command::Fault {
            admin_url,
            clear: true,
            ..
        } => admin("DELETE", format!("{admin_url}/admin/faults"), None),
        Command::Fault {
            admin_url,
            status,
            location,
            delay_ms,
            wrong_hmac,
            wrong_proof,
            malformed_json,
            times,
            clear: false,
        } => admin(
            "PUT",
            format!("{admin_url}/admin/faults"),
            Some(
                json!({ "status": status, "location": location, "delay_ms": delay_ms, "wrong_hmac": wrong_hmac, "wrong_proof": wrong_proof, "malformed_json": malformed_json, "times": times }),
            ),
        ),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    /// Every command and flag says what it does (`help_expected`).
    #[test]
    fn every_flag_has_help() {
        super::Cli::command().debug_assert();
    }

    /// `serve` without --bind listens where --admin-url (SIM_ADMIN_URL) points.
    #[test]
    fn serve_binds_the_admin_urls_host_and_port() {
        use super::bind_address;
        assert_eq!(bind_address(super::DEFAULT_URL).unwrap(), "127.0.0.1:9090");
        assert_eq!(
            bind_address("http://127.0.0.1:8081/").unwrap(),
            "127.0.0.1:8081"
        );
        assert_eq!(bind_address("http://[::1]:7000").unwrap(), "[::1]:7000");
        assert_eq!(bind_address("http://localhost").unwrap(), "localhost:80");
        assert!(bind_address("https://127.0.0.1:9090").is_err());
        assert!(bind_address("http://").is_err());
    }
}
