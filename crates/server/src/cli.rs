//! The command line of the `mercer` binary: the server and the operator's tools.

use clap::{Args, Parser, Subcommand};
use mercer_domain::access::budgets::BudgetChange;
use mercer_domain::checkout::sweeps::{
    DEFAULT_ABANDONMENT_DELAY_SECONDS, DEFAULT_ABANDONMENT_INTERVAL_SECONDS,
};

#[derive(Debug, Parser)]
#[command(
    name = "mercer",
    version,
    about = "Mercer: a self-hostable commerce integration backend.",
    long_about = "Mercer: a self-hostable commerce integration backend.\n\n\
        `mercer serve` runs the HTTP API; the other commands are the operator's tools and work \
        on the same database.",
    help_expected = true
)]
pub struct Cli {
    /// Database: sqlite://PATH (embedded, no setup) or postgres://USER[:PASSWORD]@HOST[:PORT]/DB.
    #[arg(
        long,
        env = "DATABASE_URL",
        default_value = "sqlite://mercer.db",
        global = true
    )]
    pub database_url: String,

    /// Log filter: a level (error, warn, info, debug, trace) or directives such as
    /// `info,mercer::http=warn`. Logs go to standard error.
    #[arg(long, env = "MERCER_LOG", default_value = "info", global = true)]
    pub log_level: String,

    /// Log lines as text, or as one JSON object each (for log shippers).
    #[arg(
        long,
        env = "MERCER_LOG_FORMAT",
        value_enum,
        default_value_t = LogFormat::Text,
        global = true
    )]
    pub log_format: LogFormat,

    /// A settings file (TOML): global settings at the top, each command's in a table named
    /// after it (`[serve]`), keys being the flags' names with `_` for `-`. A flag wins over its
    /// environment variable, which wins over the file (docs/operations.md, "Settings file").
    #[arg(long, env = "MERCER_CONFIG", value_name = "PATH", global = true)]
    pub config: Option<std::path::PathBuf>,

    #[command(subcommand)]
    pub command: Command,

    /// Where each global setting came from (filled by `config::load`).
    #[arg(skip)]
    pub settings: crate::config::Settings,
}

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// A line of text: time, level, the spans it happened in, target, message and fields.
    Text,
    /// One JSON object a line: `timestamp`, `level`, `target`, `fields` (with `message`) and
    /// `spans`, the spans it happened in with their fields.
    Json,
}

#[derive(Debug, Args)]
pub struct MigrateArgs {
    /// List the migrations that would be applied, oldest first, and apply none: exits 0 when
    /// none are pending, 1 otherwise.
    #[arg(long)]
    pub check: bool,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the HTTP API. Applies pending migrations first; on an empty database it also creates
    /// a demo shop and prints an all-scope API token for it, once.
    Serve(ServeArgs),
    /// Apply pending database migrations, then exit.
    Migrate(MigrateArgs),
    /// Manage shops.
    #[command(subcommand)]
    Shop(ShopCommand),
    /// Manage API access tokens. A token is printed once, on standard output; only its SHA-256
    /// hash is stored.
    #[command(subcommand)]
    Token(TokenCommand),
    /// Manage shared secrets (printed once, on standard output).
    #[command(subcommand)]
    Secret(SecretCommand),

    /// OAuth apps (public integrations that ask shops for access).
    #[command(subcommand)]
    App(AppCommand),

    /// Staff accounts: the people who sign in to approve an OAuth app for their shop.
    #[command(subcommand)]
    Staff(StaffCommand),
    /// Look at the queue of events received from connectors.
    #[command(subcommand)]
    Events(EventsCommand),
    /// Look at and manage background jobs (syncs, connector outbox deliveries, the
    /// subscription scheduler and its orders).
    #[command(subcommand)]
    Jobs(JobsCommand),
    /// Look at subscriptions and their orders.
    #[command(subcommand)]
    Subscriptions(SubscriptionsCommand),
    /// Print the OpenAPI 3.1 document of the HTTP API (what `GET /openapi.json` serves).
    Openapi {
        /// Write it to this file instead.
        #[arg(long)]
        output: Option<std::path::PathBuf>,
    },
    /// Look at the settings in effect.
    #[command(subcommand)]
    Config(ConfigCommand),
    /// Check a platform connector against the connector operations and signing rules
    /// (docs/connector.md section 6): prints one row per check, exits 1 when one fails. Writes only
    /// test data to the connector, and deletes it again. Needs no database.
    Conformance(ConformanceArgs),
    /// Copy the SQLite database into a file while Mercer runs (no need to stop it): the copy
    /// holds the database as it was when the backup began. PostgreSQL: use pg_dump
    /// (docs/operations.md, "Backups and restores").
    Backup(BackupArgs),
    /// Replace the SQLite database with a backup made by `mercer backup`, once the backup is
    /// checked (a SQLite database, intact, Mercer's, not from a newer Mercer). Refused while a
    /// Mercer server runs on the database. PostgreSQL: use pg_restore.
    Restore(RestoreArgs),
}

#[derive(Debug, Args)]
pub struct BackupArgs {
    /// The file to write the backup to (written beside it under another name, then renamed).
    #[arg(long, value_name = "FILE")]
    pub to: std::path::PathBuf,
    /// Replace FILE if it exists.
    #[arg(long)]
    pub force: bool,
    /// Database pages copied at each step (a page is 4 KiB).
    #[arg(
        long,
        default_value_t = 1024,
        value_parser = clap::value_parser!(u32).range(1..=1_000_000)
    )]
    pub pages_per_step: u32,
    /// Milliseconds to pause between two steps, leaving the disk to the server.
    #[arg(
        long,
        default_value_t = 10,
        value_parser = clap::value_parser!(u64).range(0..=10_000)
    )]
    pub pause_ms: u64,
}

#[derive(Debug, Args)]
pub struct RestoreArgs {
    /// The backup file, made by `mercer backup`.
    #[arg(long, value_name = "FILE")]
    pub from: std::path::PathBuf,
    /// Confirm replacing the database when it exists: what it holds now is lost.
    #[arg(long)]
    pub yes: bool,
}

#[derive(Debug, Subcommand)]
pub enum ConfigCommand {
    /// Print the global settings and `serve`'s as they would apply now (flags given here,
    /// environment, settings file, defaults), each with where it came from; secrets are
    /// shown as `***` (a database URL's password only).
    Show,
}

#[derive(Debug, Args)]
pub struct ConformanceArgs {
    /// The connector's base URL (operations are under {URL}/v1/shops/{SHOP}).
    #[arg(long, value_name = "URL")]
    pub connector: String,
    /// The shop_identifier the connector knows.
    #[arg(long)]
    pub shop: String,
    /// The shop's connector shared secret, which signs every call.
    #[arg(long, env = "MERCER_CONNECTOR_SECRET", hide_env_values = true)]
    pub secret: String,
    /// Milliseconds each call may take (as a destination's timeout_ms); slower is a failure.
    #[arg(
        long,
        default_value_t = 20_000,
        value_parser = clap::value_parser!(u64).range(100..=30_000)
    )]
    pub timeout_ms: u64,
    /// A token the platform issued to its customer ID, as ID:TOKEN: Validate Customer JWT is
    /// then also checked with a valid token.
    #[arg(long, value_name = "ID:TOKEN")]
    pub customer_token: Option<String>,
    /// Let it call a connector on loopback or a private network (as `serve
    /// --allow-private-targets` lets Mercer); refused otherwise.
    #[arg(long, env = "MERCER_ALLOW_PRIVATE_TARGETS")]
    pub allow_private_targets: bool,
}

#[derive(Debug, Subcommand)]
pub enum SubscriptionsCommand {
    /// List a shop's subscriptions whose order is due (or, with --at, will be due by then),
    /// being placed, or waiting for a retry, earliest order date first, each with why.
    Due {
        /// The shop's shop_identifier.
        /// The shop_identifier.
        #[arg(long)]
        shop: String,
        /// Look at this RFC 3339 time instead of now (what will be due by then).
        #[arg(long, value_name = "TIME")]
        at: Option<String>,
        /// Most subscriptions to list.
        #[arg(long, default_value_t = 100)]
        limit: usize,
    },
}

#[derive(Debug, Subcommand)]
pub enum JobsCommand {
    /// List jobs, oldest first, with their state, attempts and last error. A done job is
    /// deleted: the list holds jobs waiting, running, failed or cancelled.
    List {
        /// Only jobs in this state: queued, running, failed or cancelled.
        #[arg(long)]
        state: Option<String>,
        /// Most jobs to list.
        #[arg(long, default_value_t = 100)]
        limit: usize,
    },
    /// Put failed or cancelled jobs back into the queue, due now, attempts counted from zero
    /// (not one whose work another unfinished job already does).
    Retry(JobsRetryArgs),
    /// Cancel queued, running or failed jobs; a running one stops at its next step.
    Cancel {
        /// Ids from `mercer jobs list`.
        #[arg(required = true)]
        ids: Vec<i64>,
    },
}

#[derive(Debug, Args)]
#[group(required = true, multiple = false)]
pub struct JobsRetryArgs {
    /// Ids from `mercer jobs list`.
    pub ids: Vec<i64>,
    /// Every failed job.
    #[arg(long)]
    pub all: bool,
}

#[derive(Debug, Subcommand)]
pub enum EventsCommand {
    /// Print how many received events are not applied yet.
    Pending,
    /// List the events set aside after failing to apply, oldest first, with their error.
    Failed {
        /// Most events to list.
        #[arg(long, default_value_t = 100)]
        limit: usize,
    },
    /// Put events set aside back into the queue, to be applied again (by the out-of-sequence
    /// rule: one older than what Mercer holds now is skipped).
    Retry(EventsRetryArgs),
}

#[derive(Debug, Args)]
#[group(required = true, multiple = false)]
pub struct EventsRetryArgs {
    /// Ids from `mercer events failed`.
    pub ids: Vec<i64>,
    /// Every event set aside.
    #[arg(long)]
    pub all: bool,
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Address and port to listen on; port 0 picks a free one (the chosen address is printed).
    #[arg(long, env = "MERCER_BIND", default_value = "127.0.0.1:8080")]
    pub bind: String,

    /// HTTP worker threads (default: one per CPU core).
    #[arg(long, env = "MERCER_WORKERS")]
    pub workers: Option<usize>,

    /// Largest request body accepted, in bytes; larger ones get 413.
    #[arg(long, env = "MERCER_MAX_BODY_BYTES", default_value_t = 1024 * 1024)]
    pub max_body_bytes: usize,

    /// Seconds a request's body may take to arrive, from the end of its headers; a body still
    /// arriving then gets 408 and its connection is closed (a client that sends slowly, or
    /// never finishes, cannot hold a connection).
    #[arg(
        long = "body-timeout-s",
        env = "MERCER_BODY_TIMEOUT_S",
        default_value_t = 10
    )]
    pub body_timeout_s: u64,

    /// Most client connections open at once, all workers together; past it, new connections
    /// wait to be accepted until others close, so slow clients cannot take every file
    /// descriptor of the process.
    #[arg(long, env = "MERCER_MAX_CONNECTIONS", default_value_t = 1024)]
    pub max_connections: usize,

    /// Most connections one client address holds open at once (an IPv6 client counts by its
    /// /64 network); one more is closed as soon as it is accepted, so a single client cannot
    /// take the whole `--max-connections`. 0: no cap. Behind a reverse proxy every connection
    /// comes from the proxy's address: raise it, or give 0.
    #[arg(long, env = "MERCER_MAX_CONNECTIONS_PER_IP", default_value_t = 256)]
    pub max_connections_per_ip: usize,

    /// Seconds a new connection may stay silent: one that has sent no byte by then is closed
    /// without an answer. Once its first byte arrives, the request's head must be whole within
    /// 5 s of the connection's start (or within this deadline when it is longer), else 408.
    #[arg(
        long = "first-byte-timeout-s",
        env = "MERCER_FIRST_BYTE_TIMEOUT_S",
        default_value_t = 5,
        value_parser = clap::value_parser!(u64).range(1..=300)
    )]
    pub first_byte_timeout_s: u64,

    /// The address clients reach Mercer at, such as https://api.example.com (a path prefix is
    /// kept): links Mercer answers with (the customer directory's next_url and previous_url)
    /// start with it. Unset, those links are relative (path and query only). Never taken from
    /// a request's Host or X-Forwarded-Host header.
    #[arg(long, env = "MERCER_PUBLIC_URL", value_name = "URL")]
    pub public_url: Option<String>,

    /// Reverse proxies to believe, comma-separated addresses or CIDR ranges (IPv4 or IPv6), such
    /// as `127.0.0.1,::1` or `10.0.0.0/8`. A request whose connection comes from one of them
    /// is from the client its X-Forwarded-For (or, without it, Forwarded: for=) names: the
    /// list is read from the right, skipping these proxies; a value that is no address leaves
    /// the proxy's. The sign-in limits count that address. Unset, the headers are ignored. The
    /// per-address connection cap still counts the connection's own peer.
    #[arg(
        long,
        env = "MERCER_TRUSTED_PROXIES",
        value_name = "LIST",
        value_parser = crate::http::client_address::TrustedProxies::parse
    )]
    pub trusted_proxies: Option<crate::http::client_address::TrustedProxies>,

    /// Most database connections open at once.
    #[arg(long, env = "MERCER_DB_POOL_SIZE", default_value_t = 10)]
    pub db_pool_size: u32,

    /// On SIGTERM or SIGINT, how many seconds requests in flight get to finish.
    #[arg(long, env = "MERCER_SHUTDOWN_TIMEOUT", default_value_t = 30)]
    pub shutdown_timeout: u64,

    /// Let outgoing calls (connector destinations, webhook callbacks, API overrides) reach
    /// loopback, private, link-local and metadata addresses (local development and tests);
    /// refused by default, at registration and again at each call. `--webhook-allow-private`
    /// is its former name.
    #[arg(
        long,
        visible_alias = "webhook-allow-private",
        env = "MERCER_ALLOW_PRIVATE_TARGETS"
    )]
    pub allow_private_targets: bool,

    /// Let outgoing calls reach this machine's loopback addresses only: every other address,
    /// and every host name but `localhost` (not even looked up), is refused. For tests, schema
    /// fuzzing and benchmarks, whose URLs must never lead off the machine.
    #[arg(
        long,
        env = "MERCER_LOOPBACK_TARGETS_ONLY",
        conflicts_with = "allow_private_targets"
    )]
    pub loopback_targets_only: bool,

    /// Threads delivering webhooks; 0 for a process that only serves the API (others deliver).
    #[arg(long, env = "MERCER_WEBHOOK_WORKERS", default_value_t = 4)]
    pub webhook_workers: usize,

    /// Most messages a delivery worker claims at once: its claim and its record of the attempts
    /// are one transaction each for all of them.
    #[arg(long, env = "MERCER_WEBHOOK_BATCH", default_value_t = 16,
          value_parser = clap::value_parser!(u16).range(1..=1000))]
    pub webhook_batch: u16,

    /// Seconds a webhook delivery may take to connect.
    #[arg(long, env = "MERCER_WEBHOOK_CONNECT_TIMEOUT", default_value_t = 5)]
    pub webhook_connect_timeout: u64,

    /// Seconds a webhook delivery may take in all.
    #[arg(long, env = "MERCER_WEBHOOK_TIMEOUT", default_value_t = 15)]
    pub webhook_timeout: u64,

    /// Delay before each webhook attempt, the first included (units ms, s, m, h); after the
    /// last, the message fails. Each delay varies by ±20%.
    #[arg(
        long,
        env = "MERCER_WEBHOOK_RETRY_SCHEDULE",
        default_value = "0s,5s,5m,30m,2h,5h,10h,10h"
    )]
    pub webhook_retry_schedule: String,

    /// Seconds a dispatcher holds the messages it took; if its process dies, others (or the
    /// next start) take them when this runs out.
    #[arg(long, env = "MERCER_WEBHOOK_LEASE", default_value_t = 60)]
    pub webhook_lease: u64,

    /// Days a finished webhook message (delivered, failed or cancelled) keeps its payload and
    /// attempts; then both are purged and only the message's row stays (its id, topic, status,
    /// endpoint and times), marked purged in the delivery log. A decimal is allowed (0.5: 12
    /// hours); more than 0.
    #[arg(
        long,
        env = "MERCER_WEBHOOK_RETENTION_DAYS",
        default_value_t = mercer_domain::webhooks::retention::DEFAULT_RETENTION_DAYS,
        value_name = "DAYS"
    )]
    pub webhook_retention_days: f64,

    /// Threads running background jobs (syncs, connector outbox deliveries); 0 for a process
    /// that runs none (others do).
    #[arg(long, env = "MERCER_JOB_WORKERS", default_value_t = 2)]
    pub job_workers: usize,

    /// Seconds a job worker holds the job it took, renewed while its process lives; the job of
    /// a process that died is taken up again when this runs out.
    #[arg(long, env = "MERCER_JOB_LEASE", default_value_t = 30)]
    pub job_lease: u64,

    /// Milliseconds between two runs of the subscription scheduler (which begins the orders
    /// that have come due); at least 10.
    #[arg(long, env = "MERCER_SCHEDULER_INTERVAL_MS", default_value_t = 60_000)]
    pub scheduler_interval_ms: u64,

    /// Seconds a checkout with items and an email must be left untouched before
    /// order/abandoned is sent (while the shop's built-in abandoned-cart emails are off).
    #[arg(
        long = "abandonment-delay-s",
        env = "MERCER_ABANDONMENT_DELAY_S",
        default_value_t = DEFAULT_ABANDONMENT_DELAY_SECONDS.unsigned_abs()
    )]
    pub abandonment_delay_s: u64,

    /// Seconds between two sweeps for abandoned checkouts; at least 1.
    #[arg(
        long = "abandonment-interval-s",
        env = "MERCER_ABANDONMENT_INTERVAL_S",
        default_value_t = DEFAULT_ABANDONMENT_INTERVAL_SECONDS.unsigned_abs()
    )]
    pub abandonment_interval_s: u64,

    /// Start Mercer's clock at this RFC 3339 instant instead of the system's, running at the
    /// system clock's rate from there: for tests and demos of what Mercer does at a later date
    /// (orders coming due, retries, expiring payment methods). Signatures on the wire keep the
    /// system's time.
    #[arg(long, env = "MERCER_CLOCK_START", value_name = "TIME")]
    pub clock_start: Option<String>,

    /// A token `GET /metrics` requires, as `Authorization: Bearer <token>` (401 without it).
    /// Unset, /metrics is open to anyone who can reach the address (a warning says so at start).
    #[arg(
        long,
        env = "MERCER_METRICS_TOKEN",
        hide_env_values = true,
        value_name = "TOKEN"
    )]
    pub metrics_token: Option<String>,

    /// An OpenTelemetry collector's OTLP/HTTP address, such as http://127.0.0.1:4318: the
    /// spans of requests, database transactions, jobs, connector calls and webhook deliveries
    /// are sent to {URL}/v1/traces (OTLP/JSON), in batches, from a thread of their own. Unset,
    /// no trace is kept or sent.
    #[arg(long, env = "MERCER_OTLP_ENDPOINT", value_name = "URL")]
    pub otlp_endpoint: Option<String>,

    /// Hours an endpoint may fail, without a single success, before it is disabled.
    #[arg(
        long,
        env = "MERCER_WEBHOOK_DISABLE_AFTER_HOURS",
        default_value_t = 120
    )]
    pub webhook_disable_after_hours: u64,

    /// Request budget of every API token, in requests per second (a token bucket holding twice
    /// that): past it, 429 with Retry-After. A shop's own (`mercer shop update
    /// --rate-limit-per-s`) wins. Unset, no budget (docs/rate-limits.md).
    #[arg(long, env = "MERCER_RATE_LIMIT_PER_S", value_name = "N", value_parser = rate_per_s)]
    pub rate_limit_per_s: Option<u32>,

    /// Request budget of each shop's connector events, all its tokens together, in requests
    /// per second (burst twice that). A shop's own wins. Unset, no budget.
    #[arg(
        long,
        env = "MERCER_CONNECTOR_EVENTS_RATE_LIMIT_PER_S",
        value_name = "N",
        value_parser = rate_per_s
    )]
    pub connector_events_rate_limit_per_s: Option<u32>,

    /// Request budget of each shop's storefront and checkout routes, all clients together, in
    /// requests per second (burst twice that). A shop's own wins. Unset, no budget.
    #[arg(
        long,
        env = "MERCER_STOREFRONT_RATE_LIMIT_PER_S",
        value_name = "N",
        value_parser = rate_per_s
    )]
    pub storefront_rate_limit_per_s: Option<u32>,
}

/// A budget in requests per second: 1 to 1,000,000.
fn rate_per_s(text: &str) -> Result<u32, String> {
    match BudgetChange::parse(text)? {
        BudgetChange::Set(rate) => Ok(rate),
        BudgetChange::Clear => Err("give a number of requests per second".to_string()),
    }
}

#[derive(Debug, Subcommand)]
pub enum ShopCommand {
    /// Create a shop; prints its shop_identifier on standard output.
    Create(ShopCreateArgs),
    /// List every shop.
    List,
    /// Change a shop's settings.
    Update(ShopUpdateArgs),
    /// Delete a shop: it is kept, marked deleted, and answers from then on as a shop that does
    /// not exist; its tokens are revoked and its staff can no longer sign in. Refused without
    /// --yes.
    Delete {
        /// The shop's shop_identifier.
        #[arg(long)]
        shop: String,
        /// Confirm: the shop's tokens are revoked and it cannot be brought back from here.
        #[arg(long)]
        yes: bool,
    },
    /// Erase the personal data of every customer of a shop (each as
    /// `POST …/customers/{customer_id}/redact` does) and set the shop's `pii_redacted_at`.
    /// Safe to run again: customers erased before are left as they are.
    Redact {
        /// The shop's shop_identifier.
        #[arg(long)]
        shop: String,
    },
}

#[derive(Debug, Args)]
pub struct ShopUpdateArgs {
    /// The shop's shop_identifier.
    #[arg(long)]
    pub shop: String,
    /// IANA time zone, such as America/Toronto: subscription orders are scheduled in it.
    #[arg(long)]
    pub timezone: Option<String>,
    /// ISO 4217 currency, such as CAD.
    #[arg(long)]
    pub currency: Option<String>,
    /// Seconds before a failed subscription order is tried again (1 to 2592000; new shops:
    /// 86400). With --order-max-retries, the dunning policy of a shop that set none; a shop
    /// that set one gets the uniform policy these two now describe, keeping its at_max_retries.
    #[arg(long, value_name = "SECONDS")]
    pub order_retry_interval: Option<i64>,
    /// How many times a failed subscription order is retried before the subscription ends (0
    /// to 100; new shops: 3). See --order-retry-interval for the dunning policy.
    #[arg(long, value_name = "N")]
    pub order_max_retries: Option<i64>,
    /// Days before a subscription's payment method expires that
    /// `subscription_expiring_payment` is emitted (0 to 365; new shops: 30).
    #[arg(long, value_name = "DAYS")]
    pub expiring_payment_notice_days: Option<i64>,
    /// Checkout: the shop's built-in abandoned-cart emails; order/abandoned is sent only while
    /// they are off (new shops: on).
    #[arg(long, value_name = "on|off", value_parser = on_off)]
    pub abandoned_cart_emails: Option<bool>,
    /// Checkout: gift_card/created for the gift-card SKUs (new shops: off).
    #[arg(long, value_name = "on|off", value_parser = on_off)]
    pub gift_cards: Option<bool>,
    /// Checkout: a SKU the shop sells as a gift card; repeat it for several. The SKUs given
    /// replace the shop's list.
    #[arg(long = "gift-card-sku", value_name = "SKU")]
    pub gift_card_skus: Vec<String>,
    /// Checkout: empty the shop's list of gift-card SKUs.
    #[arg(long, conflicts_with = "gift_card_skus")]
    pub clear_gift_card_skus: bool,
    /// Checkout: the shipping line offered, in cents, when no shipping override is registered
    /// (0 to 100000000; new shops: 0).
    #[arg(long, value_name = "CENTS", allow_negative_numbers = true)]
    pub flat_shipping_rate: Option<i64>,
    /// Connectors: register a destination only when its verification answer proves the
    /// connector secret (X-Verification-Proof, the HMAC of the request's nonce), not when it
    /// only echoes X-HMAC (new shops: off). Existing destinations are not checked again.
    #[arg(long, value_name = "on|off", value_parser = on_off)]
    pub require_message_signatures: Option<bool>,
    /// Subscriber portal: the pages' accent colour, #rgb or #rrggbb (such as '#0a7'); empty
    /// for the portal's own.
    #[arg(long, value_name = "COLOUR")]
    pub portal_accent: Option<String>,
    /// Subscriber portal: the logo its pages show, an https URL; empty for none.
    #[arg(long, value_name = "URL")]
    pub portal_logo_url: Option<String>,
    /// Request budget of each of the shop's API tokens, in requests per second (burst twice
    /// that; 1 to 1000000), or `none` to follow `serve --rate-limit-per-s` again.
    #[arg(long, value_name = "N|none", value_parser = BudgetChange::parse)]
    pub rate_limit_per_s: Option<BudgetChange>,
    /// Request budget of the shop's connector events, or `none` for the server's default.
    #[arg(long, value_name = "N|none", value_parser = BudgetChange::parse)]
    pub connector_events_rate_limit_per_s: Option<BudgetChange>,
    /// Request budget of the shop's storefront and checkout routes, or `none` for the server's
    /// default.
    #[arg(long, value_name = "N|none", value_parser = BudgetChange::parse)]
    pub storefront_rate_limit_per_s: Option<BudgetChange>,
}

/// `on` or `off` (also true/false, yes/no, 1/0).
fn on_off(text: &str) -> Result<bool, String> {
    match text.to_ascii_lowercase().as_str() {
        "on" | "true" | "yes" | "1" => Ok(true),
        "off" | "false" | "no" | "0" => Ok(false),
        _ => Err(format!("{text:?}: give on or off")),
    }
}

#[derive(Debug, Args)]
pub struct ShopCreateArgs {
    /// The shop's domain on its platform, such as example.myshop.test.
    #[arg(long)]
    pub domain: String,
    /// The e-commerce platform behind the shop.
    #[arg(long, default_value = "custom")]
    pub platform_type: String,
    /// IANA time zone of the shop.
    #[arg(long, default_value = "UTC")]
    pub timezone: String,
    /// ISO 4217 currency of the shop.
    #[arg(long, default_value = "USD")]
    pub currency: String,
    /// Name of the shop's owner (default: the domain).
    #[arg(long)]
    pub owner: Option<String>,
    /// Email of the shop's administrator (default: admin@DOMAIN).
    #[arg(long)]
    pub admin_email: Option<String>,
    /// A custom domain the shop is also reached at.
    #[arg(long)]
    pub custom_domain: Option<String>,
}

#[derive(Debug, Subcommand)]
pub enum TokenCommand {
    /// Create a token for a shop; prints the token once on standard output.
    Create {
        /// The shop_identifier.
        #[arg(long)]
        shop: String,
        /// Scopes, space- or comma-separated, or repeated; `all` for every scope.
        #[arg(long, required = true, num_args = 1..)]
        scope: Vec<String>,
        /// A name to tell the token apart in listings.
        #[arg(long, default_value = "cli")]
        name: String,
    },
    /// List a shop's tokens (never the tokens themselves: their first characters only), with
    /// their scopes, when they were made and last used (to the minute).
    List {
        /// The shop_identifier.
        #[arg(long)]
        shop: String,
    },
    /// Revoke a token by its id or its prefix (both from `token list`); it is refused from
    /// then on.
    Revoke {
        /// The shop_identifier.
        #[arg(long)]
        shop: String,
        /// The token's id (`3`), or its prefix as `token list` shows it (`mct_a9503949`).
        token: String,
    },
}

#[derive(Debug, Subcommand)]
pub enum SecretCommand {
    /// Replace a shop's shared secret with a new random one and print it once. For `connector`
    /// the old secret stays valid (X-Compatible-HMAC) for 24 hours.
    Rotate {
        /// The shop_identifier.
        #[arg(long)]
        shop: String,
        /// Which secret: connector or checkout_integration.
        #[arg(long)]
        kind: String,
    },
}

#[derive(Debug, Subcommand)]
pub enum AppCommand {
    /// Register an app; prints its client id, then its client secret (shown only this once).
    Create {
        /// The name shown to staff on the consent page.
        #[arg(long)]
        name: String,
        /// A redirect URI the app may use, matched exactly; repeat for several. https, or http
        /// on localhost or a loopback address.
        #[arg(long = "redirect-uri", required = true)]
        redirect_uris: Vec<String>,
    },
    /// List every app: client id, name, when registered or revoked, live tokens, redirect URIs
    /// (never a client secret).
    List,
    /// Revoke an app: it can no longer ask shops for access, and every token it was issued is
    /// refused from then on (401).
    Revoke {
        /// The app's client id (mci_…), as `app list` shows it.
        client_id: String,
    },
}

#[derive(Debug, Subcommand)]
pub enum StaffCommand {
    /// Create a staff account for a shop. The password is read from standard input (its first
    /// line) with --password-stdin; otherwise a random one is made and printed once.
    Create {
        /// The shop_identifier.
        #[arg(long)]
        shop: String,
        /// The staff member's email: they sign in with it.
        #[arg(long)]
        email: String,
        /// Read the password from standard input instead of generating one.
        #[arg(long)]
        password_stdin: bool,
    },
    /// List a shop's staff accounts: email, when created, when they last signed in.
    List {
        /// The shop_identifier.
        #[arg(long)]
        shop: String,
    },
    /// Remove a staff account: it can no longer sign in, and its console sessions end.
    Remove {
        /// The shop_identifier.
        #[arg(long)]
        shop: String,
        /// The staff member's email.
        #[arg(long)]
        email: String,
    },
    /// Give a staff account a new password (its console sessions end). A random one is made
    /// and printed once, unless --password-stdin reads it from standard input (its first line).
    ResetPassword {
        /// The shop_identifier.
        #[arg(long)]
        shop: String,
        /// The staff member's email.
        #[arg(long)]
        email: String,
        /// Read the new password from standard input instead of generating one.
        #[arg(long)]
        password_stdin: bool,
    },
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    /// Every command and flag says what it does (`help_expected`).
    #[test]
    fn every_flag_has_help() {
        super::Cli::command().debug_assert();
    }
}
