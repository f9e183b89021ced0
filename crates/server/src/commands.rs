//! What each command of the binary does. This is the composition root: it opens the store,
//! builds the app state and starts the server.

use std::io::Write;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use mercer_domain::kernel::wake::Wake;
use mercer_domain::webhooks::RetryPolicy;
use mercer_outbound::PrivateAddressGuard;
use mercer_webhooks::{DispatcherConfig, HttpOverrideCaller};
use metrics_exporter_prometheus::PrometheusHandle;

use mercer_connector::HttpConnector;
use mercer_connector::conformance::{Config as ConformanceConfig, CustomerToken};
use mercer_domain::access::budgets::{RequestBudgets, SharedBudgets};
use mercer_domain::access::credentials::{Scope, Secret, TOKEN_USE_PRECISION_SECONDS, list_tokens};
use mercer_domain::access::secrets::{SecretKind, rotate_secret};
use mercer_domain::access::shop::{
    BudgetChanges, DemoCredentials, ShopInput, ShopSettings, bootstrap_demo, connector_secret,
    create_shop, find_shop, list_shops,
};
use mercer_domain::access::{oauth, operator};
use mercer_domain::checkout::sweeps::AbandonmentJob;
use mercer_domain::kernel::activity::ActivityPruneJob;
use mercer_domain::kernel::ids::{EventId, JobId};
use mercer_domain::kernel::jobs::{JobState, cancel_jobs, enqueue, list_jobs, retry_jobs};
use mercer_domain::kernel::time::{Clock, OffsetClock};
use mercer_domain::operations;
use mercer_domain::platform::connector::PlatformConnectorHandle;
use mercer_domain::platform::events::{
    SetAsideEvent, pending_event_count, retry_failed_events, set_aside_events,
};
use mercer_domain::platform::outbox::enqueue_waiting_deliveries;
use mercer_domain::portal::branding::{BrandingChange, set_branding};
use mercer_domain::ports::Database;
use mercer_domain::privacy::redact_shop;
use mercer_domain::subscriptions::dunning::update_shop_and_dunning;
use mercer_domain::subscriptions::scheduler::{SchedulerJob, due_report};
use mercer_domain::webhooks::retention::{WebhookRetentionJob, retention_of_days};
use mercer_domain::{DomainError, Timestamp};
use mercer_jobs::JobRunnerConfig;
use mercer_store::{DatabaseUrl, OpenError, PoolOptions, Store, UrlError};

use crate::cli::{
    AppCommand, Cli, Command, ConfigCommand, ConformanceArgs, EventsCommand, JobsCommand,
    MigrateArgs, SecretCommand, ServeArgs, ShopCommand, ShopCreateArgs, StaffCommand,
    SubscriptionsCommand, TokenCommand,
};
use crate::http::links::PublicUrl;
use crate::http::short_cache::{
    ACCESS_TTL, AccessCache, CUSTOMER_TOKEN_TTL, CustomerTokenCache, KNOWN_WEBHOOK_TTL,
    KnownWebhooks, TokenUses,
};
use crate::http::state::{AppState, MetricsToken};
use crate::http::{self, ServeOptions};
use crate::runtime::checkout::CheckoutConfig;
use crate::runtime::enqueue::WebhookEnqueue;
use crate::runtime::retention::RetentionConfig;
use crate::runtime::{BackgroundConfig, SchedulerConfig, Workers};
use crate::table::Table;

#[derive(Debug, thiserror::Error)]
pub enum CommandError {
    #[error("{0}")]
    Url(#[from] UrlError),
    #[error("{0}")]
    Open(#[from] OpenError),
    #[error("{}", describe(.0))]
    Domain(#[from] DomainError),
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("{0}")]
    Usage(String),
    #[error("{failed} of {total} conformance checks failed")]
    ChecksFailed { failed: usize, total: usize },
    #[error("{0} migrations are pending")]
    MigrationsPending(usize),
    #[error("{0}")]
    Backup(#[from] mercer_store::backup::BackupError),
}

fn describe(error: &DomainError) -> String {
    match error {
        DomainError::Invalid(problems) => problems
            .iter()
            .map(|p| format!("{}: {}", p.field, p.message))
            .collect::<Vec<_>>()
            .join("; "),
        other => other.to_string(),
    }
}

pub fn run(cli: Cli) -> Result<(), CommandError> {
    // The commands without a database: a bad DATABASE_URL must not stop them.
    match cli.command {
        Command::Conformance(args) => return conformance(args),
        Command::Config(ConfigCommand::Show) => return show_settings(&cli.settings),
        _ => {}
    }
    let url = DatabaseUrl::parse(&cli.database_url)?;
    match cli.command {
        Command::Serve(args) => serve(&url, args),
        Command::Migrate(MigrateArgs { check: true }) => check_migrations(&url),
        Command::Migrate(MigrateArgs { check: false }) => {
            let store = Store::open(&url, &PoolOptions::default())?;
            let applied = store.migrate()?;
            if applied.is_empty() {
                println!("{}: already up to date", url.redacted());
            } else {
                println!("{}: applied {}", url.redacted(), applied.join(", "));
            }
            Ok(())
        }
        Command::Events(command) => events_command(&open(&url)?, command),
        Command::Jobs(command) => jobs_command(&open(&url)?, command),
        Command::Subscriptions(command) => subscriptions_command(&open(&url)?, command),
        Command::Shop(command) => shop_command(&open(&url)?, command),
        Command::Token(command) => token_command(&open(&url)?, command),
        Command::Secret(command) => secret_command(&open(&url)?, command),
        Command::App(command) => app_command(&open(&url)?, command),
        Command::Staff(command) => staff_command(&open(&url)?, command),
        Command::Openapi { output } => write_openapi(output.as_deref()),
        Command::Backup(args) => backup(&url, args),
        Command::Restore(args) => restore(&url, args),
        Command::Conformance(args) => conformance(args),
        Command::Config(ConfigCommand::Show) => show_settings(&cli.settings),
    }
}

/// `mercer config show`: the global settings and `serve`'s, with where each came from.
fn show_settings(settings: &crate::config::Settings) -> Result<(), CommandError> {
    let serve = crate::config::serve_settings(settings.file.as_deref())
        .map_err(|error| CommandError::Usage(error.to_string()))?;
    match &settings.file {
        Some(file) => println!("# settings file: {}", file.display()),
        None => println!("# no settings file (--config, MERCER_CONFIG)"),
    }
    let print = |setting: &crate::config::Setting| match &setting.value {
        Some(value) => println!("{} = {value:?}  # {}", setting.key, setting.origin.as_str()),
        None => println!("# {} (unset)", setting.key),
    };
    settings.global.iter().for_each(print);
    println!("\n[serve]");
    serve.iter().for_each(print);
    Ok(())
}

/// `mercer conformance`: runs the checks of `mercer_connector::conformance` and prints them.
fn conformance(args: ConformanceArgs) -> Result<(), CommandError> {
    let customer_token = match args.customer_token.as_deref() {
        None => None,
        Some(text) => Some(
            text.split_once(':')
                .filter(|(id, token)| !id.is_empty() && !token.is_empty())
                .map(|(id, token)| CustomerToken {
                    platform_customer_id: id.to_string(),
                    token: token.to_string(),
                })
                .ok_or_else(|| CommandError::Usage("--customer-token: give ID:TOKEN".into()))?,
        ),
    };
    let config = ConformanceConfig {
        connector_url: args.connector,
        shop_identifier: args.shop,
        secret: Secret::new(args.secret),
        timeout: Duration::from_millis(args.timeout_ms),
        guard: match args.allow_private_targets {
            true => PrivateAddressGuard::ALLOW_PRIVATE,
            false => PrivateAddressGuard::STRICT,
        },
        customer_token,
    };
    let report = mercer_connector::conformance::run(&config).map_err(|error| {
        let hint = match args.allow_private_targets {
            false if error.to_string().contains("address") => {
                "; pass --allow-private-targets to check a connector on this machine or a \
                 private network"
            }
            _ => "",
        };
        CommandError::Usage(format!("{error}{hint}"))
    })?;
    let mut table = Table::new(&["CHECK", "SECTION", "RESULT", "REASON"]);
    for result in &report.results {
        let verdict = if result.passed { "PASS" } else { "FAIL" };
        table.row(vec![
            result.name.to_string(),
            result.section.to_string(),
            verdict.to_string(),
            result.detail.clone(),
        ]);
    }
    table.print();
    for left in &report.left_on_platform {
        eprintln!("Left on the platform: {left}");
    }
    let (failed, total) = (report.failures(), report.results.len());
    if failed > 0 {
        return Err(CommandError::ChecksFailed { failed, total });
    }
    eprintln!("All {total} conformance checks passed.");
    Ok(())
}

fn app_command(store: &Store, command: AppCommand) -> Result<(), CommandError> {
    match command {
        AppCommand::Create {
            name,
            redirect_uris,
        } => {
            let created = store.write(|tx| oauth::create_app(tx, &name, &redirect_uris, now()))?;
            eprintln!(
                "Registered app {:?} with redirect URIs {}. Client id, then client secret (shown only this once):",
                created.app.name,
                created.app.redirect_uris.join(" ")
            );
            println!("{}", created.app.client_id);
            println!("{}", created.client_secret.expose());
            Ok(())
        }
        AppCommand::List => {
            let apps = store.read(|tx| operator::list_apps(tx))?;
            let mut table = Table::new(&[
                "CLIENT_ID",
                "NAME",
                "CREATED",
                "REVOKED",
                "LIVE_TOKENS",
                "REDIRECT_URIS",
            ]);
            for line in apps {
                table.row(vec![
                    line.app.client_id,
                    line.app.name.escape_debug().to_string(),
                    line.app.created_at.to_rfc3339_seconds(),
                    optional_time(line.app.revoked_at),
                    line.live_tokens.to_string(),
                    line.app.redirect_uris.join(" ").escape_debug().to_string(),
                ]);
            }
            table.print();
            Ok(())
        }
        AppCommand::Revoke { client_id } => {
            let revoked = store.write(|tx| operator::revoke_app(tx, &client_id, now()))?;
            eprintln!(
                "Revoked app {} ({}) and {} token(s) it had been issued; they are refused within \
                 2 s.",
                revoked.app.client_id,
                revoked.app.name.escape_debug(),
                revoked.tokens_revoked.len()
            );
            Ok(())
        }
    }
}

/// A password from standard input's first line (`--password-stdin`), or a new random one.
/// Answers whether it was made here (then it is printed, once).
fn new_password(from_stdin: bool) -> Result<(String, bool), CommandError> {
    if from_stdin {
        let mut line = String::new();
        std::io::stdin().read_line(&mut line)?;
        Ok((line.trim_end_matches(['\r', '\n']).to_string(), false))
    } else {
        Ok((mercer_domain::access::credentials::random_hex(12), true))
    }
}

fn staff_command(store: &Store, command: StaffCommand) -> Result<(), CommandError> {
    match command {
        StaffCommand::Create {
            shop,
            email,
            password_stdin,
        } => {
            let (password, generated) = new_password(password_stdin)?;
            let staff = store
                .write(|tx| operator::add_staff(tx, &shop, &email, &password, now()))
                .map_err(|error| match error {
                    DomainError::Conflict { message, .. } => CommandError::Usage(format!(
                        "{message}; `mercer staff reset-password --shop {shop} --email {}` gives \
                         it a new password",
                        email.trim()
                    )),
                    other => other.into(),
                })?;
            if generated {
                eprintln!(
                    "Created staff account {} for shop {shop}. Its password (shown only this once):",
                    staff.email
                );
                println!("{password}");
            } else {
                eprintln!("Created staff account {} for shop {shop}.", staff.email);
            }
            Ok(())
        }
        StaffCommand::List { shop } => {
            let (_, staff) = store.read(|tx| operator::list_staff(tx, &shop))?;
            let mut table = Table::new(&["EMAIL", "CREATED", "LAST_SIGN_IN"]);
            for account in staff {
                table.row(vec![
                    account.email.escape_debug().to_string(),
                    account.created_at.to_rfc3339_seconds(),
                    optional_time(account.last_sign_in_at),
                ]);
            }
            table.print();
            Ok(())
        }
        StaffCommand::Remove { shop, email } => {
            let staff = store.write(|tx| operator::remove_staff(tx, &shop, &email, now()))?;
            eprintln!(
                "Removed staff account {} of shop {shop}; its console sessions have ended.",
                staff.email
            );
            Ok(())
        }
        StaffCommand::ResetPassword {
            shop,
            email,
            password_stdin,
        } => {
            let (password, generated) = new_password(password_stdin)?;
            let staff = store
                .write(|tx| operator::reset_staff_password(tx, &shop, &email, &password, now()))?;
            if generated {
                eprintln!(
                    "Staff account {} of shop {shop} has a new password (shown only this once); \
                     its console sessions have ended:",
                    staff.email
                );
                println!("{password}");
            } else {
                eprintln!(
                    "Staff account {} of shop {shop} has the new password; its console sessions \
                     have ended.",
                    staff.email
                );
            }
            Ok(())
        }
    }
}

/// A time as the listings print it, `-` for none.
fn optional_time(at: Option<Timestamp>) -> String {
    at.map_or_else(|| "-".to_string(), |at| at.to_rfc3339_seconds())
}

/// `mercer migrate --check`: what an upgrade would apply, applying nothing. A database a
/// newer Mercer migrated is an error, as `migrate` would refuse it.
fn check_migrations(url: &DatabaseUrl) -> Result<(), CommandError> {
    let status = Store::open(url, &PoolOptions::default())?.migration_status()?;
    if let Some(refusal) = status.refusal() {
        return Err(OpenError::NewerDatabase(refusal).into());
    }
    if status.pending.is_empty() {
        println!("{}: up to date, nothing to apply", url.redacted());
        return Ok(());
    }
    println!("{}: would apply", url.redacted());
    for name in &status.pending {
        println!("  {name}");
    }
    Err(CommandError::MigrationsPending(status.pending.len()))
}

/// `mercer backup`: a copy of the SQLite database as it is when the backup begins, made while
/// the server may run.
fn backup(url: &DatabaseUrl, args: crate::cli::BackupArgs) -> Result<(), CommandError> {
    let options = mercer_store::backup::BackupOptions {
        pages_per_step: args.pages_per_step,
        pause: Duration::from_millis(args.pause_ms),
        replace: args.force,
    };
    let report = mercer_store::backup::backup(url, &args.to, &options)?;
    println!(
        "Backed up {} to {}: {} pages of {} bytes, {} bytes, in {} steps ({} ms)",
        url.redacted(),
        report.path.display(),
        report.pages,
        report.page_size,
        report.bytes,
        report.steps,
        report.elapsed.as_millis()
    );
    Ok(())
}

/// `mercer restore`: a checked backup put in place of the SQLite database, which no server
/// may be running on.
fn restore(url: &DatabaseUrl, args: crate::cli::RestoreArgs) -> Result<(), CommandError> {
    let options = mercer_store::backup::RestoreOptions { replace: args.yes };
    let report = mercer_store::backup::restore(url, &args.from, &options)?;
    let replaced = match report.replaced {
        true => ", replacing the database it held",
        false => "",
    };
    println!(
        "Restored {} ({} bytes) into {}{replaced}",
        args.from.display(),
        report.bytes,
        url.redacted()
    );
    if !report.pending.is_empty() {
        println!(
            "Mercer applies {} migration(s) the backup has not had when it next starts: {}",
            report.pending.len(),
            report.pending.join(", ")
        );
    }
    Ok(())
}

/// The store for an operator command: migrated, so the commands work on a new database too.
/// `mercer openapi [--output FILE]`: the document `GET /openapi.json` serves, with a final
/// newline (as `docs/openapi.json` is committed).
fn write_openapi(output: Option<&std::path::Path>) -> Result<(), CommandError> {
    let text = format!("{}\n", crate::http::openapi::document_json());
    match output {
        Some(path) => std::fs::write(path, text)?,
        None => print!("{text}"),
    }
    Ok(())
}

fn open(url: &DatabaseUrl) -> Result<Store, CommandError> {
    Ok(Store::open_and_migrate(url, &PoolOptions::default())?)
}

fn now() -> Timestamp {
    OffsetClock::SYSTEM.now()
}

fn events_command(store: &Store, command: EventsCommand) -> Result<(), CommandError> {
    match command {
        EventsCommand::Pending => {
            let pending = store.read(|tx| pending_event_count(tx))?;
            println!("{pending}");
        }
        EventsCommand::Failed { limit } => {
            let failed = store.read(|tx| set_aside_events(tx, limit))?;
            if failed.is_empty() {
                eprintln!("No event is set aside.");
                return Ok(());
            }
            let mut table = Table::new(&[
                "ID",
                "SHOP_IDENTIFIER",
                "EVENT",
                "PLATFORM_ID",
                "ATTEMPTS",
                "FAILED_AT",
                "ERROR",
            ]);
            for SetAsideEvent {
                event: failed,
                shop_identifier,
            } in failed
            {
                let shop = shop_identifier.as_deref().unwrap_or("?");
                // Platform ids and errors come from outside: escaped, so a control character
                // cannot rewrite the operator's terminal.
                table.row(vec![
                    failed.id.to_string(),
                    shop.to_string(),
                    format!("{} {}", failed.kind, failed.action),
                    failed.platform_id.escape_debug().to_string(),
                    failed.attempts.to_string(),
                    failed.failed_at.to_rfc3339_seconds(),
                    failed.error.escape_debug().to_string(),
                ]);
            }
            table.print();
        }
        EventsCommand::Retry(args) => {
            let ids: Vec<EventId> = args.ids.iter().copied().map(EventId).collect();
            let ids = (!args.all).then_some(ids.as_slice());
            let requeued = retry_failed_events(store, ids)?;
            eprintln!(
                "Put {} event(s) back into the queue; a running `mercer serve` applies them within a second.",
                requeued.len()
            );
            println!("{}", requeued.len());
        }
    }
    Ok(())
}

fn jobs_command(store: &Store, command: JobsCommand) -> Result<(), CommandError> {
    match command {
        JobsCommand::List { state, limit } => {
            let state = match state.as_deref() {
                None => None,
                Some(text) => Some(JobState::parse(text).ok_or_else(|| {
                    CommandError::Usage(format!(
                        "--state {}: not one of queued, running, failed, cancelled",
                        text.escape_debug()
                    ))
                })?),
            };
            let jobs = store.read(|tx| list_jobs(tx, state, limit))?;
            if jobs.is_empty() {
                eprintln!("No job (a done job is deleted).");
                return Ok(());
            }
            let mut table = Table::new(&[
                "ID",
                "KIND",
                "STATE",
                "ATTEMPTS",
                "RUN_AT",
                "KEY",
                "LAST_ERROR",
            ]);
            for job in jobs {
                // Errors carry remote text (a connector's answer): escaped, so a control
                // character cannot rewrite the operator's terminal; kinds and keys too.
                table.row(vec![
                    job.id.to_string(),
                    job.kind.escape_debug().to_string(),
                    job.state.as_str().to_string(),
                    format!("{}/{}", job.attempts, job.max_attempts),
                    job.run_at.to_rfc3339_seconds(),
                    job.unique_key
                        .as_deref()
                        .unwrap_or("-")
                        .escape_debug()
                        .to_string(),
                    job.last_error
                        .as_deref()
                        .unwrap_or("")
                        .escape_debug()
                        .to_string(),
                ]);
            }
            table.print();
        }
        JobsCommand::Retry(args) => {
            let ids: Vec<JobId> = args.ids.iter().copied().map(JobId).collect();
            let ids = (!args.all).then_some(ids.as_slice());
            let requeued = store.write(|tx| retry_jobs(tx, ids, now()))?;
            eprintln!(
                "Put {} job(s) back into the queue; a running `mercer serve` runs them within a second.",
                requeued.len()
            );
            println!("{}", requeued.len());
        }
        JobsCommand::Cancel { ids } => {
            let ids: Vec<JobId> = ids.into_iter().map(JobId).collect();
            let cancelled = store.write(|tx| cancel_jobs(tx, &ids, now()))?;
            eprintln!(
                "Cancelled {} job(s); a running one stops at its next step.",
                cancelled.len()
            );
            println!("{}", cancelled.len());
        }
    }
    Ok(())
}

/// The request budgets of `serve`: its defaults for every shop, shared through the database
/// on PostgreSQL (several processes), in this process's memory on SQLite (one process).
fn request_budgets(args: &ServeArgs, store: &Store) -> http::budgets::Budgets {
    let defaults = RequestBudgets {
        per_token: args.rate_limit_per_s,
        connector_events: args.connector_events_rate_limit_per_s,
        storefront: args.storefront_rate_limit_per_s,
    };
    let shared = (store.backend() == mercer_store::Backend::Postgres)
        .then(|| Arc::new(store.clone()) as Arc<dyn SharedBudgets>);
    http::budgets::Budgets::new(defaults, shared)
}

fn shop_command(store: &Store, command: ShopCommand) -> Result<(), CommandError> {
    match command {
        ShopCommand::Create(args) => {
            let ShopCreateArgs {
                domain,
                platform_type,
                timezone,
                currency,
                owner,
                admin_email,
                custom_domain,
            } = args;
            let input = ShopInput {
                shop_domain: domain,
                custom_domain,
                platform_type: Some(platform_type),
                timezone: Some(timezone),
                currency: Some(currency),
                shop_owner: owner,
                admin_email,
            };
            let (shop, secret) = store.write(|tx| {
                let shop = create_shop(tx, input, now())?;
                let secret = connector_secret(tx, &shop)?;
                Ok((shop, secret))
            })?;
            eprintln!(
                "Created shop {} ({}). Its shop_identifier, then its connector shared secret \
                 (for the platform connector's X-HMAC; shown only this once, `mercer secret \
                 rotate` replaces it):",
                shop.shop_domain, shop.platform_type
            );
            println!("{}", shop.identifier.as_str());
            println!("{}", secret.expose());
            Ok(())
        }
        ShopCommand::List => {
            let shops = store.read(|tx| list_shops(tx))?;
            let mut table = Table::new(&[
                "SHOP_IDENTIFIER",
                "PLATFORM",
                "TIMEZONE",
                "CURRENCY",
                "CREATED",
                "DELETED",
                "DOMAIN",
            ]);
            for shop in shops {
                table.row(vec![
                    shop.identifier.as_str().to_string(),
                    shop.platform_type,
                    shop.timezone,
                    shop.currency,
                    shop.created_at.to_rfc3339_seconds(),
                    optional_time(shop.deleted_at),
                    shop.shop_domain,
                ]);
            }
            table.print();
            Ok(())
        }
        ShopCommand::Delete { shop, yes } => {
            let deleted = store.write(|tx| operations::delete_shop(tx, &shop, yes, now()))?;
            eprintln!(
                "Deleted shop {} ({}): {} token(s) revoked; it answers as an unknown shop within \
                 2 s.",
                deleted.shop.identifier.as_str(),
                deleted.shop.shop_domain,
                deleted.tokens_revoked
            );
            Ok(())
        }
        ShopCommand::Redact { shop } => {
            let (shop, erased) = redact_shop(store, &shop, now())?;
            eprintln!(
                "Shop {}: erased the personal data of {erased} customer(s); customers erased \
                 before were left as they were.",
                shop.identifier.as_str()
            );
            Ok(())
        }
        ShopCommand::Update(args) => {
            let gift_card_skus = if args.clear_gift_card_skus {
                Some(Vec::new())
            } else {
                (!args.gift_card_skus.is_empty()).then_some(args.gift_card_skus)
            };
            let settings = ShopSettings {
                timezone: args.timezone,
                currency: args.currency,
                order_retry_interval_seconds: args.order_retry_interval,
                order_max_retries: args.order_max_retries,
                expiring_payment_notice_days: args.expiring_payment_notice_days,
                abandoned_cart_emails: args.abandoned_cart_emails,
                gift_cards_enabled: args.gift_cards,
                gift_card_skus,
                flat_shipping_rate: args.flat_shipping_rate,
                require_message_signatures: args.require_message_signatures,
                budgets: BudgetChanges {
                    per_token: args.rate_limit_per_s,
                    connector_events: args.connector_events_rate_limit_per_s,
                    storefront: args.storefront_rate_limit_per_s,
                },
            };
            let branding = BrandingChange {
                accent: args.portal_accent,
                logo_url: args.portal_logo_url,
            };
            if settings == ShopSettings::default() && branding.is_empty() {
                return Err(CommandError::Usage(
                    "nothing to change: give --timezone, --currency, --order-retry-interval, \
                     --order-max-retries, --expiring-payment-notice-days, \
                     --abandoned-cart-emails, --gift-cards, --gift-card-sku, \
                     --clear-gift-card-skus, --flat-shipping-rate, \
                     --require-message-signatures, --portal-accent, --portal-logo-url, \
                     --rate-limit-per-s, --connector-events-rate-limit-per-s or \
                     --storefront-rate-limit-per-s"
                        .to_string(),
                ));
            }
            let (shop, dunning, portal) = store.write(|tx| {
                let portal = if branding.is_empty() {
                    None
                } else {
                    Some(set_branding(tx, &args.shop, branding, now())?.1)
                };
                let (shop, dunning) = update_shop_and_dunning(tx, &args.shop, settings, now())?;
                Ok((shop, dunning, portal))
            })?;
            if let Some(portal) = portal {
                eprintln!(
                    "Shop {}'s subscriber portal: accent {}, logo {}.",
                    shop.identifier.as_str(),
                    portal.accent.as_deref().unwrap_or("the portal's own"),
                    portal.logo_url.as_deref().unwrap_or("none")
                );
            }
            let checkout = &shop.checkout;
            let on = |flag: bool| if flag { "on" } else { "off" };
            eprintln!(
                "Shop {} now has time zone {}, currency {}, retry settings every {} s up to {} \
                 times (dunning policy, {}: {}), expiring payment methods announced {} days \
                 ahead; checkout: abandoned-cart emails {}, gift cards {} (SKUs: {}), flat \
                 shipping rate {} cents; connectors: message signatures required {} (API \
                 answers within 2 s).",
                shop.identifier.as_str(),
                shop.timezone,
                shop.currency,
                shop.order_retry_interval_seconds,
                shop.order_max_retries,
                if dunning.set {
                    "the shop's own"
                } else {
                    "from the retry settings"
                },
                dunning.policy.describe(),
                shop.expiring_payment_notice_days,
                on(checkout.abandoned_cart_emails),
                on(checkout.gift_cards_enabled),
                if checkout.gift_card_skus.is_empty() {
                    "none".to_string()
                } else {
                    checkout.gift_card_skus.join(", ")
                },
                checkout.flat_shipping_rate.0,
                on(shop.require_message_signatures)
            );
            let rate = |budget: Option<u32>| {
                budget.map_or_else(|| "the server's".to_string(), |rate| format!("{rate}/s"))
            };
            eprintln!(
                "Shop {}'s request budgets: per API token {}, connector events {}, storefront \
                 and checkout {} (burst twice the rate; applied within 2 s).",
                shop.identifier.as_str(),
                rate(shop.budgets.per_token),
                rate(shop.budgets.connector_events),
                rate(shop.budgets.storefront)
            );
            Ok(())
        }
    }
}

fn subscriptions_command(store: &Store, command: SubscriptionsCommand) -> Result<(), CommandError> {
    match command {
        SubscriptionsCommand::Due { shop, at, limit } => {
            let at = match at.as_deref() {
                None => now(),
                Some(text) => Timestamp::parse_rfc3339(text).ok_or_else(|| {
                    CommandError::Usage(format!(
                        "--at {}: not an RFC 3339 time such as 2026-03-09T14:00:00Z",
                        text.escape_debug()
                    ))
                })?,
            };
            let (shop, entries) = store.read(|tx| {
                let shop = find_shop(tx, &shop)?;
                let entries = due_report(tx, &shop, at, limit)?;
                Ok((shop, entries))
            })?;
            if entries.is_empty() {
                eprintln!(
                    "No subscription of shop {} is due at {} (none being placed or waiting for a \
                     retry either).",
                    shop.identifier.as_str(),
                    at.to_rfc3339_seconds()
                );
                return Ok(());
            }
            let mut table = Table::new(&["SUBSCRIPTION", "STATUS", "NEXT_ORDER", "LOCAL", "WHY"]);
            for entry in entries {
                let why = entry.describe();
                table.row(vec![
                    entry.subscription_id.to_string(),
                    entry.status.as_str().to_string(),
                    entry
                        .next_order_datetime
                        .map_or_else(|| "-".to_string(), |at| at.to_rfc3339_seconds()),
                    entry.local_order_time.as_deref().unwrap_or("-").to_string(),
                    why,
                ]);
            }
            table.print();
        }
    }
    Ok(())
}

/// `--scope` values joined; `all` stands for every scope.
fn scope_list(values: &[String]) -> String {
    if values.iter().any(|value| value.trim() == "all") {
        Scope::ALL
            .iter()
            .map(|s| s.as_str())
            .collect::<Vec<_>>()
            .join(" ")
    } else {
        values.join(" ")
    }
}

fn token_command(store: &Store, command: TokenCommand) -> Result<(), CommandError> {
    match command {
        TokenCommand::Create { shop, scope, name } => {
            let scopes = scope_list(&scope);
            let created =
                store.write(|tx| operator::add_token(tx, &shop, &name, &scopes, now()))?;
            eprintln!(
                "Created token {} ({}) with scopes: {}. It is shown only this once:",
                created.token.id, created.token.name, created.token.scopes
            );
            println!("{}", created.secret.expose());
            Ok(())
        }
        TokenCommand::List { shop } => {
            let (_, tokens) = store.read(|tx| list_tokens(tx, &shop))?;
            let mut table = Table::new(&[
                "ID",
                "NAME",
                "PREFIX",
                "SOURCE",
                "CREATED",
                "LAST_USED",
                "REVOKED",
                "SCOPES",
            ]);
            for token in tokens {
                table.row(vec![
                    token.id.to_string(),
                    token.name.escape_debug().to_string(),
                    token.token_prefix,
                    token.source.as_str().to_string(),
                    token.created_at.to_rfc3339_seconds(),
                    optional_time(token.last_used_at),
                    optional_time(token.revoked_at),
                    token.scopes.to_string(),
                ]);
            }
            table.print();
            Ok(())
        }
        TokenCommand::Revoke { shop, token } => {
            let id = store.write(|tx| operator::remove_token(tx, &shop, &token, now()))?;
            eprintln!("Revoked token {id}.");
            Ok(())
        }
    }
}

fn secret_command(store: &Store, command: SecretCommand) -> Result<(), CommandError> {
    match command {
        SecretCommand::Rotate { shop, kind } => {
            let kind = SecretKind::parse(&kind).ok_or_else(|| {
                let known: Vec<&str> = SecretKind::ALL.iter().map(|k| k.as_str()).collect();
                CommandError::Usage(format!(
                    "unknown secret kind {kind:?}; use one of: {}",
                    known.join(", ")
                ))
            })?;
            let rotated = store.write(|tx| {
                let shop = find_shop(tx, &shop)?;
                rotate_secret(tx, shop.id, kind, now())
            })?;
            match rotated.previous_valid_until {
                Some(until) => eprintln!(
                    "New {} secret; the previous one stays valid until {until}. Shown only this once:",
                    kind.as_str()
                ),
                None => eprintln!("New {} secret. Shown only this once:", kind.as_str()),
            }
            println!("{}", rotated.current.expose());
            Ok(())
        }
    }
}

/// An address a person can paste into curl: a wildcard bind is reached on loopback.
pub fn reachable(address: &SocketAddr) -> String {
    let host = match address.ip() {
        ip if ip.is_unspecified() && ip.is_ipv4() => "127.0.0.1".to_string(),
        ip if ip.is_unspecified() => "[::1]".to_string(),
        std::net::IpAddr::V6(ip) => format!("[{ip}]"),
        ip => ip.to_string(),
    };
    format!("http://{host}:{}", address.port())
}

fn print_demo(demo: &DemoCredentials, base: &str) {
    let shop = demo.shop.identifier.as_str();
    let token = demo.token.expose();
    println!(
        "This is a new database: Mercer created a demo shop and an API token with every scope."
    );
    println!("  shop_identifier           {shop}");
    println!("  API token                 {token}");
    println!(
        "  connector shared secret   {}",
        demo.connector_secret.expose()
    );
    println!(
        "The token and the secret (your platform connector's X-HMAC key) are shown only this once. Try it:"
    );
    println!(
        "  curl -H \"Authorization: Bearer {token}\" {base}/subscriptions/v1/shops/{shop}/shop"
    );
}

/// What `mercer serve` runs beside the HTTP server: the workers and the webhook dispatcher.
pub struct Services {
    /// This process's row among the running processes, and its heartbeat.
    presence: crate::heartbeat::Presence,
    /// Told when the heartbeat finds the database migrated by a newer Mercer.
    newer_database: Option<tokio::sync::oneshot::Receiver<String>>,
    workers: Workers,
    webhooks: Wake,
    stop_webhooks: Arc<AtomicBool>,
    webhook_threads: Vec<std::thread::JoinHandle<()>>,
}

impl Services {
    /// Stops the workers (queued events are stored first) and the dispatcher, and joins them,
    /// then the heartbeat, removing the process from the running ones. Returns why the
    /// heartbeat stopped the process, if it did (a newer Mercer migrated the database).
    pub fn stop(self) -> Option<String> {
        self.workers.stop();
        self.stop_webhooks.store(true, Ordering::Relaxed);
        self.webhooks.notify();
        for thread in self.webhook_threads {
            let _ = thread.join();
        }
        self.presence.stop()
    }

    /// Stops `server` once the heartbeat finds the database migrated by a newer Mercer.
    /// Called within the server's runtime.
    pub fn stop_server_on_a_newer_database(&mut self, server: actix_web::dev::ServerHandle) {
        if let Some(newer) = self.newer_database.take() {
            actix_web::rt::spawn(async move {
                if newer.await.is_ok() {
                    server.stop(true).await;
                }
            });
        }
    }
}

/// Everything `mercer serve` starts before it binds: the store (migrated), the demo shop on a
/// first start, the workers and the webhook dispatcher, and the app state over them. `metrics`
/// renders `GET /metrics`.
pub fn start_services(
    url: &DatabaseUrl,
    args: &ServeArgs,
    metrics: PrometheusHandle,
) -> Result<(AppState, Services, Option<DemoCredentials>), CommandError> {
    let options = PoolOptions {
        max_connections: args.db_pool_size,
        ..PoolOptions::default()
    };
    let dispatcher = dispatcher_config(args)?;
    let clock = match args.clock_start.as_deref() {
        None => OffsetClock::SYSTEM,
        Some(text) => {
            OffsetClock::starting_at(Timestamp::parse_rfc3339(text).ok_or_else(|| {
                CommandError::Usage(format!(
                    "--clock-start {}: not an RFC 3339 time such as 2026-03-09T13:59:58Z",
                    text.escape_debug()
                ))
            })?)
        }
    };
    if args.scheduler_interval_ms < 10 {
        return Err(CommandError::Usage(
            "--scheduler-interval-ms: at least 10".to_string(),
        ));
    }
    let retention = retention_of_days(args.webhook_retention_days)
        .map_err(|error| CommandError::Usage(format!("--webhook-retention-days {error}")))?;
    let public_url = match args.public_url.as_deref() {
        None | Some("") => None,
        Some(text) => Some(PublicUrl::parse(text).map_err(|error| {
            CommandError::Usage(format!("--public-url {}: {error}", text.escape_debug()))
        })?),
    };
    let store = Store::open_and_migrate(url, &options)?;
    let (newer, newer_database) = tokio::sync::oneshot::channel();
    let presence = crate::heartbeat::Presence::start(&store, crate::heartbeat::interval(), newer)
        .map_err(DomainError::from)?;
    let now = || clock.now();
    let demo = store.write(|tx| bootstrap_demo(tx, now()))?;
    // One guard for all three kinds of outgoing call: connectors, webhooks, overrides.
    let address_guard = address_guard(args);
    let connector: PlatformConnectorHandle = Arc::new(HttpConnector::new(address_guard));
    // Calls left without a delivery job (its job failed for good, or an older version recorded
    // them) get one.
    store.write(|tx| enqueue_waiting_deliveries(tx, now()))?;
    // The recurring jobs (the scheduler, the abandonment sweep, the activity prune): one each
    // for all processes, due now (each coalesces into the one queued or running).
    store.write(|tx| {
        enqueue(tx, None, &SchedulerJob {}, now(), now())?;
        enqueue(tx, None, &AbandonmentJob {}, now(), now())?;
        enqueue(tx, None, &ActivityPruneJob {}, now(), now())?;
        enqueue(tx, None, &WebhookRetentionJob {}, now(), now())?;
        Ok(())
    })?;
    let jobs = JobRunnerConfig {
        workers: args.job_workers,
        lease: Duration::from_secs(args.job_lease.max(1)),
        ..JobRunnerConfig::default()
    };
    let background = BackgroundConfig {
        scheduler: SchedulerConfig {
            interval: Duration::from_millis(args.scheduler_interval_ms),
        },
        checkout: CheckoutConfig {
            abandonment_delay: Duration::from_secs(args.abandonment_delay_s),
            abandonment_interval: Duration::from_secs(args.abandonment_interval_s.max(1)),
        },
        retention: RetentionConfig { retention },
    };
    let workers = Workers::start(&store, connector.clone(), clock, jobs, background)?;
    let webhooks = Wake::default();
    let stop_webhooks = Arc::new(AtomicBool::new(false));
    let mut webhook_threads = mercer_webhooks::start(
        store.clone(),
        dispatcher,
        clock,
        webhooks.clone(),
        stop_webhooks.clone(),
    )?;
    let (webhook_enqueue, enqueue_threads) = WebhookEnqueue::start(store.clone(), &stop_webhooks)?;
    webhook_threads.extend(enqueue_threads);
    let budgets = request_budgets(args, &store);
    let state = AppState {
        store,
        clock,
        max_body_bytes: args.max_body_bytes,
        body_timeout: Duration::from_secs(args.body_timeout_s.max(1)),
        connector,
        ingest: workers.ingest.clone(),
        applier: workers.applier.clone(),
        jobs: workers.jobs.clone(),
        access_cache: AccessCache::new(ACCESS_TTL),
        token_uses: TokenUses::new(Duration::from_secs(
            TOKEN_USE_PRECISION_SECONDS.unsigned_abs(),
        )),
        customer_tokens: CustomerTokenCache::new(CUSTOMER_TOKEN_TTL),
        webhooks: webhooks.clone(),
        webhook_enqueue,
        known_webhooks: KnownWebhooks::new(KNOWN_WEBHOOK_TTL),
        address_guard,
        overrides: Arc::new(HttpOverrideCaller::new(address_guard)),
        metrics,
        metrics_token: metrics_token(args),
        sign_ins: Default::default(),
        customer_checks: Default::default(),
        public_url,
        trusted_proxies: args.trusted_proxies.clone().unwrap_or_default(),
        webhook_retention_days: args.webhook_retention_days,
        budgets,
    };
    let services = Services {
        presence,
        newer_database: Some(newer_database),
        workers,
        webhooks,
        stop_webhooks,
        webhook_threads,
    };
    Ok((state, services, demo))
}

/// The token `GET /metrics` requires, if `--metrics-token` gives one (an empty one is none);
/// without one, a warning that the figures are open to whoever reaches the address.
fn metrics_token(args: &ServeArgs) -> Option<MetricsToken> {
    match args.metrics_token.as_deref().map(str::trim) {
        Some(token) if !token.is_empty() => Some(MetricsToken::new(token)),
        _ => {
            log::warn!(
                "GET /metrics is open to anyone who can reach this address: set --metrics-token \
                 (MERCER_METRICS_TOKEN) to require a bearer token"
            );
            None
        }
    }
}

/// How `serve` binds, from its arguments.
pub fn serve_options(args: &ServeArgs) -> ServeOptions {
    ServeOptions {
        bind: args.bind.clone(),
        workers: args.workers,
        shutdown_timeout_secs: args.shutdown_timeout,
        max_connections: args.max_connections.max(1),
        max_connections_per_ip: args.max_connections_per_ip,
        first_byte_timeout: Duration::from_secs(args.first_byte_timeout_s),
    }
}

fn serve(url: &DatabaseUrl, args: ServeArgs) -> Result<(), CommandError> {
    // Held until the process ends: `mercer restore` refuses to replace the database meanwhile.
    let _serving = mercer_store::backup::DatabaseLock::shared(url)?;
    let metrics = metrics_exporter_prometheus::PrometheusBuilder::new()
        .install_recorder()
        .map_err(|error| {
            CommandError::Usage(format!("cannot install the metrics recorder: {error}"))
        })?;
    let serve_options = serve_options(&args);
    // Listen first: demo credentials are made only once they can be used.
    let listeners = http::listen(&serve_options.bind)?;
    let services = actix_web::rt::System::new().block_on(async move {
        // SIGTERM and SIGINT are taken before any worker starts: one that comes while Mercer
        // starts stops it gracefully, instead of ending the process with the jobs it had
        // claimed still leased to it (the scheduler then waited out the lease, 30 s).
        let stop = http::StopSignals::listen();
        let (state, mut services, demo) = start_services(url, &args, metrics)?;
        let server = http::bind(state, listeners, &serve_options)?;
        services.stop_server_on_a_newer_database(server.handle());
        let base = server
            .addresses
            .first()
            .map(reachable)
            .unwrap_or_else(|| format!("http://{}", serve_options.bind));
        if let Some(demo) = &demo {
            print_demo(demo, &base);
        }
        println!("Mercer listening on {base} (database {})", url.redacted());
        std::io::stdout().flush()?;
        log::info!("listening on {base}, database {}", url.redacted());
        server.run(stop).await?;
        Ok::<Services, CommandError>(services)
    })?;
    if let Some(refusal) = services.stop() {
        return Err(OpenError::NewerDatabase(refusal).into());
    }
    log::info!("stopped");
    Ok(())
}

/// Where outgoing calls may lead, as the serve flags say.
fn address_guard(args: &ServeArgs) -> PrivateAddressGuard {
    PrivateAddressGuard {
        allow_private: args.allow_private_targets,
        loopback_only: args.loopback_targets_only,
    }
}

fn dispatcher_config(args: &ServeArgs) -> Result<DispatcherConfig, CommandError> {
    let delays = RetryPolicy::parse_delays(&args.webhook_retry_schedule)
        .map_err(|error| CommandError::Usage(format!("--webhook-retry-schedule: {error}")))?;
    Ok(DispatcherConfig {
        workers: args.webhook_workers,
        batch: usize::from(args.webhook_batch),
        connect_timeout: Duration::from_secs(args.webhook_connect_timeout),
        timeout: Duration::from_secs(args.webhook_timeout),
        address_guard: address_guard(args),
        lease: Duration::from_secs(args.webhook_lease.max(1)),
        policy: RetryPolicy {
            delays,
            disable_after: Duration::from_secs(args.webhook_disable_after_hours * 3600),
            ..RetryPolicy::default()
        },
        ..DispatcherConfig::default()
    })
}
