//! `cargo xtask bench subscriptions`: the List Subscriptions benchmark of docs/benchmarks.md.
//!
//! On each database: one shop with 10,000 customers (one address each) and 1,000,000
//! subscriptions (100 per customer, 85% active, `next_order_datetime` spread over 2030), each
//! with two line items and its creation in the status log, seeded with set-based SQL (`sqlite3`,
//! `psql`) into a database `mercer` migrated. Then `GET /subscriptions/v1/shops/{shop}/
//! subscriptions` (default limit 50) on one keep-alive connection, one request at a time: p50
//! and p99 of the first page and of the page the 10,000th cursor step reaches, with no filter,
//! with `subscription_status=active`, and with a `next_order_datetime` range; for comparison, a
//! page of as many subscriptions whose count is small (List Customer Subscriptions of one
//! customer); and mercer's peak memory (`VmHWM`, and the peak of its anonymous memory, apart
//! from the mapped database file). Each figure is printed against its target (p99 under 10 ms on
//! SQLite, 20 ms on PostgreSQL; the deep page within 25% of the first; peak memory under
//! 150 MiB); a target missed is reported, never a failure: timings are not asserted.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::bench::{
    Mercer, drop_postgres_database, ms, peak_memory_kib, postgres_database, start_mercer,
};

const CUSTOMERS: i64 = 10_000;
const SUBSCRIPTIONS: i64 = 1_000_000;
const LINE_ITEMS_PER_SUBSCRIPTION: i64 = 2;
/// The page size of every request: the API's default.
const PAGE: i64 = 50;
/// Cursor steps from the first page to the deep one.
const DEEP_STEPS: i64 = 10_000;
/// A walk of the cursor is made when it should take at most this long...
const WALK_BUDGET: Duration = Duration::from_secs(120);
/// ...and given up (the deep cursor then built from SQL) once it has taken this long.
const WALK_LIMIT: Duration = Duration::from_secs(240);
/// Requests timed per page and query: as many pairs (first, deep) as fit in this time, within
/// the bounds below (a page that takes seconds gets few samples: its p99 is then its maximum).
const SAMPLE_TIME: Duration = Duration::from_secs(30);
const MIN_SAMPLES: usize = 10;
const MAX_SAMPLES: usize = 1_000;
/// Requests before timing: this many, or fewer once they have taken `WARM_UP_TIME` (two at
/// least).
const WARM_UP: usize = 20;
const WARM_UP_TIME: Duration = Duration::from_secs(10);
const MEMORY_TARGET_MIB: f64 = 150.0;

/// 2030-01-01T00:00:00Z in Unix seconds; every `next_order_datetime` falls in 2030, years
/// ahead, so the scheduler of the server measured places none of them while it is measured
/// (a year already begun would have most of them due, and their statuses change under the
/// counts the bench checks).
const YEAR_START: i64 = 1_893_456_000;
const YEAR_SECONDS: i64 = 365 * 86_400;
/// When the seeded rows were made: 2029-12-01T00:00:00Z.
const CREATED: i64 = YEAR_START - 31 * 86_400;
const CREATED_TEXT: &str = "2029-12-01T00:00:00Z";
/// The range filter: March to October 2030 (59 and 304 days into the year), two thirds of the
/// subscriptions.
const RANGE_FROM: i64 = YEAR_START + 59 * 86_400;
const RANGE_FROM_TEXT: &str = "2030-03-01T00:00:00Z";
const RANGE_TO: i64 = YEAR_START + 304 * 86_400;
const RANGE_TO_TEXT: &str = "2030-11-01T00:00:00Z";

/// The two SQL dialects of the seeding script.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dialect {
    Sqlite,
    Postgres,
}

impl Dialect {
    fn object(self) -> &'static str {
        match self {
            Dialect::Sqlite => "json_object",
            Dialect::Postgres => "json_build_object",
        }
    }

    fn array(self) -> &'static str {
        match self {
            Dialect::Sqlite => "json_array",
            Dialect::Postgres => "json_build_array",
        }
    }

    /// A JSON literal (`true`, `[]`) as a value of a JSON object.
    fn json(self, literal: &str) -> String {
        match self {
            Dialect::Sqlite => format!("json('{literal}')"),
            Dialect::Postgres => format!("'{literal}'::json"),
        }
    }

    fn truth(self) -> &'static str {
        match self {
            Dialect::Sqlite => "1",
            Dialect::Postgres => "true",
        }
    }

    fn newline(self) -> &'static str {
        match self {
            Dialect::Sqlite => "char(10)",
            Dialect::Postgres => "chr(10)",
        }
    }

    /// `expr` (a positive integer) as text padded with zeros to `width` digits.
    fn padded(self, expr: &str, width: usize) -> String {
        match self {
            Dialect::Sqlite => format!("substr('{}' || ({expr}), -{width})", "0".repeat(width)),
            Dialect::Postgres => format!("lpad(({expr})::text, {width}, '0')"),
        }
    }

    /// `INSERT INTO table (columns) SELECT values` for each `i` of 1..=count.
    fn insert_series(self, table: &str, columns: &[&str], values: &[String], count: i64) -> String {
        let (columns, values) = (columns.join(", "), values.join(",\n    "));
        match self {
            Dialect::Sqlite => format!(
                "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < {count})\n\
                 INSERT INTO {table} ({columns})\nSELECT\n    {values}\nFROM n;\n"
            ),
            Dialect::Postgres => format!(
                "INSERT INTO {table} ({columns})\nSELECT\n    {values}\n\
                 FROM generate_series(1::bigint, {count}) AS n(i);\n"
            ),
        }
    }

    /// A JSON object of `(key, SQL expression)` pairs.
    fn json_object(self, pairs: &[(&str, String)]) -> String {
        let arguments: Vec<String> = pairs
            .iter()
            .map(|(key, value)| format!("'{key}', {value}"))
            .collect();
        format!("{}({})", self.object(), arguments.join(", "))
    }
}

pub(crate) fn quoted(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

fn micros(seconds: i64) -> i64 {
    seconds * 1_000_000
}

/// What to seed: how many customers and subscriptions, and each subscription's
/// `next_order_datetime` and `subscription_status` as SQL expressions of its number `i`.
pub(crate) struct Seed {
    pub(crate) customers: i64,
    pub(crate) subscriptions: i64,
    pub(crate) next_order: String,
    pub(crate) status: String,
}

impl Seed {
    /// This benchmark's: a million subscriptions of 10,000 customers, the next order somewhere
    /// in 2030 in an order unrelated to the id (7919 is prime to 1,000,003, itself prime: a
    /// permutation), 85% active and the rest inactive, paused or scheduled, 5% each.
    fn list_benchmark() -> Seed {
        Seed {
            customers: CUSTOMERS,
            subscriptions: SUBSCRIPTIONS,
            next_order: format!(
                "({} + (i * 7919 % 1000003) * {YEAR_SECONDS} / 1000003) * 1000000",
                YEAR_START
            ),
            status: "CASE i % 20 WHEN 0 THEN 'inactive' WHEN 1 THEN 'paused' \
                     WHEN 2 THEN 'scheduled' ELSE 'active' END"
                .to_string(),
        }
    }
}

/// The SQL that fills an empty, migrated database's shop `shop_id`: customers `1..=customers`
/// with one address each (its id the customer's, its platform id `bench-NNNNNN`),
/// subscriptions `1..=subscriptions` (subscription `i` is customer `(i - 1) % customers + 1`'s,
/// every two weeks on Monday, paid with token `tok_bench_i`), and line items `2i - 1` and `2i`
/// of subscription `i`. Explicit ids, so the rows refer to each other without lookups.
pub(crate) fn seed_script(dialect: Dialect, shop_id: i64, seed: &Seed) -> String {
    let d = dialect;
    let Seed {
        customers: customer_count,
        subscriptions: subscription_count,
        ..
    } = *seed;
    let created = micros(CREATED).to_string();
    let created_text = quoted(CREATED_TEXT);
    let customer_key = d.padded("i", 6);
    let address = d.json_object(&[
        (
            "platform_id",
            format!("'bench-' || {customer_key} || '-address'"),
        ),
        (
            "platform_customer_id",
            format!("'bench-' || {customer_key}"),
        ),
        ("address_type", quoted("shipping")),
        ("first_name", "'First' || i".to_string()),
        ("last_name", "'Last' || i".to_string()),
        ("company", quoted("Acme")),
        ("phone", format!("'+1555' || {}", d.padded("i", 7))),
        ("street_1", "i || ' Main Street'".to_string()),
        ("street_2", quoted("Suite 100")),
        ("city", quoted("Springfield")),
        ("province", quoted("Illinois")),
        ("province_code", quoted("IL")),
        ("country", quoted("United States")),
        ("country_code", quoted("US")),
        ("postal_code", quoted("62701")),
        ("is_default", d.json("true")),
    ]);
    let customer_document = d.json_object(&[
        ("platform_id", format!("'bench-' || {customer_key}")),
        ("platform_created_at", created_text.clone()),
        ("platform_updated_at", created_text.clone()),
        (
            "email",
            format!("'customer' || {customer_key} || '@bench.example.test'"),
        ),
        ("first_name", "'First' || i".to_string()),
        ("last_name", "'Last' || i".to_string()),
        ("phone", format!("'+1555' || {}", d.padded("i", 7))),
        ("addresses", format!("{}({address})", d.array())),
    ]);
    let customers = d.insert_series(
        "platform_customers",
        &[
            "id",
            "shop_id",
            "platform_id",
            "email",
            "first_name",
            "last_name",
            "phone",
            "platform_created_at",
            "platform_updated_at",
            "document",
            "created_at",
            "updated_at",
        ],
        &[
            "i".to_string(),
            shop_id.to_string(),
            format!("'bench-' || {customer_key}"),
            format!("'customer' || {customer_key} || '@bench.example.test'"),
            "'First' || i".to_string(),
            "'Last' || i".to_string(),
            format!("'+1555' || {}", d.padded("i", 7)),
            created.clone(),
            created.clone(),
            customer_document,
            created.clone(),
            created.clone(),
        ],
        customer_count,
    );
    let addresses = d.insert_series(
        "customer_addresses",
        &[
            "id",
            "shop_id",
            "customer_id",
            "address_key",
            "platform_id",
            "is_default",
            "document",
            "created_at",
            "updated_at",
        ],
        &[
            "i".to_string(),
            shop_id.to_string(),
            "i".to_string(),
            format!("'bench-' || {customer_key} || '-address'"),
            format!("'bench-' || {customer_key} || '-address'"),
            d.truth().to_string(),
            address,
            created.clone(),
            created.clone(),
        ],
        customer_count,
    );
    // Every two weeks on Monday from 2026-01-05.
    let rule = format!(
        "'DTSTART:20260105T090000Z' || {} || 'RRULE:FREQ=WEEKLY;INTERVAL=2'",
        d.newline()
    );
    let rule_text = quoted("every 2 weeks on Monday");
    let (next_order, status) = (seed.next_order.clone(), seed.status.as_str());
    let customer = format!("(i - 1) % {customer_count} + 1");
    let subscriptions = d.insert_series(
        "subscriptions",
        &[
            "id",
            "shop_id",
            "customer_id",
            "billing_address_id",
            "shipping_address_id",
            "next_order_datetime",
            "status_changed_at",
            "subscription_status",
            "payment_method_token",
            "payment_gateway_public_id",
            "payment_rrule",
            "payment_rrule_text",
            "order_rrule",
            "order_rrule_text",
            "charged_currency",
            "base_currency",
            "base_to_charged_exchange_rate",
            "latest_status_log_id",
            "created_at",
            "updated_at",
        ],
        &[
            "i".to_string(),
            shop_id.to_string(),
            customer.clone(),
            customer.clone(),
            customer,
            next_order,
            created.clone(),
            status.to_string(),
            "'tok_bench_' || i".to_string(),
            quoted("gateway-bench"),
            rule.clone(),
            rule_text.clone(),
            rule,
            rule_text,
            quoted("USD"),
            quoted("USD"),
            "1.0".to_string(),
            "i".to_string(),
            created.clone(),
            created.clone(),
        ],
        subscription_count,
    );
    // Status log entry i: subscription i's creation, its latest.
    let status_logs = d.insert_series(
        "subscription_status_logs",
        &[
            "id",
            "shop_id",
            "subscription_id",
            "subscription_status",
            "reason",
            "actor_type",
            "actor_id",
            "actor_name",
            "created_at",
        ],
        &[
            "i".to_string(),
            shop_id.to_string(),
            "i".to_string(),
            status.to_string(),
            quoted("created"),
            quoted("api"),
            "1".to_string(),
            quoted("API token 1"),
            created.clone(),
        ],
        subscription_count,
    );
    // Line item i: subscription (i + 1) / 2; the first of each pair one bag of coffee at
    // $12.50, the second two boxes of filters at $4.00.
    let subscription = "(i + 1) / 2";
    let second = "(1 - i % 2)";
    let quantity = format!("(1 + {second})");
    let price = format!("(1250 - 850 * {second})");
    let full = format!("({price} * {quantity})");
    let product = format!("'bench-product-' || (1 + {second})");
    let variant = format!("'bench-variant-' || (1 + {second})");
    let title = format!("CASE {second} WHEN 0 THEN 'Coffee, whole bean' ELSE 'Paper filters' END");
    let null = "NULL".to_string();
    let line_item = d.json_object(&[
        ("id", "i".to_string()),
        ("subscription_id", subscription.to_string()),
        ("subscription_group_id", null.clone()),
        ("subscription_group_billing_rules_id", null.clone()),
        ("platform_id", null.clone()),
        ("platform_product_id", product.clone()),
        ("platform_variant_id", variant.clone()),
        ("title", title.clone()),
        ("product_name", title),
        (
            "variant_name",
            format!("CASE {second} WHEN 0 THEN '1 kg' ELSE 'Box of 100' END"),
        ),
        ("sku", format!("'SKU-' || (1 + {second})")),
        ("image", null.clone()),
        ("quantity", quantity.clone()),
        ("price", price.clone()),
        ("price_charged", price.clone()),
        ("discounted_price", price.clone()),
        ("discounted_price_charged", price.clone()),
        ("full_price", full.clone()),
        ("full_price_charged", full),
        ("requires_shipping", d.json("true")),
        ("taxable", d.json("true")),
        ("grams", format!("(1000 - 800 * {second})")),
        (
            "weight",
            format!("CASE {second} WHEN 0 THEN 1.0 ELSE 0.2 END"),
        ),
        ("weight_unit", quoted("kg")),
        ("discounts", d.json("[]")),
        ("prepaid_metadata", null),
        ("line_item_attributes", d.json("[]")),
        ("created_at", created_text.clone()),
        ("updated_at", created_text),
    ]);
    let line_items = d.insert_series(
        "subscription_line_items",
        &[
            "id",
            "shop_id",
            "subscription_id",
            "platform_product_id",
            "platform_variant_id",
            "quantity",
            "price",
            "document",
            "created_at",
            "updated_at",
        ],
        &[
            "i".to_string(),
            shop_id.to_string(),
            subscription.to_string(),
            product,
            variant,
            quantity,
            price,
            line_item,
            created.clone(),
            created,
        ],
        subscription_count * LINE_ITEMS_PER_SUBSCRIPTION,
    );
    let tables = "platform_customers, customer_addresses, subscriptions, \
                  subscription_status_logs, subscription_line_items";
    match dialect {
        Dialect::Sqlite => format!(
            "PRAGMA synchronous = OFF;\nPRAGMA cache_size = -262144;\nBEGIN;\n\
             {customers}{addresses}{subscriptions}{status_logs}{line_items}COMMIT;\nANALYZE;\n"
        ),
        Dialect::Postgres => {
            // Explicit ids leave the identity sequences behind: move them past the rows.
            let sequences: String = tables
                .split(',')
                .map(str::trim)
                .map(|table| {
                    format!(
                        "SELECT setval(pg_get_serial_sequence('{table}', 'id'), \
                         (SELECT max(id) FROM {table}));\n"
                    )
                })
                .collect();
            // The rows are consistent by construction: no foreign key triggers while loading.
            // That turns off every trigger, the one keeping `subscription_counts` too: its rows
            // are written from the loaded table instead.
            format!(
                "SET session_replication_role = replica;\nSET synchronous_commit = off;\n\
                 SET maintenance_work_mem = '256MB';\nBEGIN;\n\
                 {customers}{addresses}{subscriptions}{status_logs}{line_items}\
                 DELETE FROM subscription_counts;\n\
                 INSERT INTO subscription_counts (shop_id, subscription_status, subscriptions) \
                 SELECT shop_id, subscription_status, count(*) FROM subscriptions \
                 GROUP BY shop_id, subscription_status;\n\
                 COMMIT;\n{sequences}\
                 VACUUM ANALYZE {tables};\n"
            )
        }
    }
}

/// Runs `run_backend` on a new SQLite file, then on a new PostgreSQL database (or says that none
/// could be made), removing each afterwards. The label is `SQLite` or `PostgreSQL`.
pub(crate) fn on_each_database(
    bench: &str,
    run_backend: impl Fn(&str, &Database) -> Result<(), String>,
) -> Result<(), String> {
    let dir = std::env::temp_dir().join(format!("mercer-bench-{bench}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let sqlite = Database::Sqlite {
        path: dir.join("bench.db"),
    };
    let result = run_backend("SQLite", &sqlite);
    let _ = std::fs::remove_dir_all(&dir);
    result?;
    match postgres_database()? {
        Some(url) => {
            let database = Database::Postgres { url: url.clone() };
            let result = run_backend("PostgreSQL", &database);
            drop_postgres_database(&url);
            result
        }
        None => {
            println!("PostgreSQL: NOT RUN (psql could not create a database)");
            Ok(())
        }
    }
}

/// A database the bench seeds and queries beside mercer, through its command-line client.
pub(crate) enum Database {
    Sqlite { path: PathBuf },
    Postgres { url: String },
}

impl Database {
    pub(crate) fn url(&self) -> String {
        match self {
            Database::Sqlite { path } => format!("sqlite://{}", path.display()),
            Database::Postgres { url } => url.clone(),
        }
    }

    pub(crate) fn dialect(&self) -> Dialect {
        match self {
            Database::Sqlite { .. } => Dialect::Sqlite,
            Database::Postgres { .. } => Dialect::Postgres,
        }
    }

    /// Runs `script` and returns what it printed (values separated by `|`, one row a line).
    pub(crate) fn run(&self, script: &str) -> Result<String, String> {
        let mut command = match self {
            Database::Sqlite { path } => {
                let mut command = Command::new("sqlite3");
                command.args(["-batch", "-bail"]).arg(path);
                command
            }
            Database::Postgres { url } => {
                let mut command = Command::new("psql");
                command.args([
                    url.as_str(),
                    "-X",
                    "-q",
                    "-t",
                    "-A",
                    "-v",
                    "ON_ERROR_STOP=1",
                    "-f",
                    "-",
                ]);
                command
            }
        };
        let name = match self {
            Database::Sqlite { .. } => "sqlite3",
            Database::Postgres { .. } => "psql",
        };
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot run {name} (is it installed?): {e}"))?;
        if let Some(mut stdin) = child.stdin.take() {
            stdin
                .write_all(script.as_bytes())
                .map_err(|e| format!("cannot write to {name}: {e}"))?;
        }
        let output = child.wait_with_output().map_err(|e| e.to_string())?;
        if !output.status.success() {
            return Err(format!(
                "{name} failed ({}): {}",
                output.status,
                String::from_utf8_lossy(&output.stderr).trim()
            ));
        }
        Ok(String::from_utf8_lossy(&output.stdout).trim().to_string())
    }

    pub(crate) fn integer(&self, query: &str) -> Result<i64, String> {
        let text = self.run(&format!("{query};\n"))?;
        let last = text.lines().last().unwrap_or_default().trim();
        last.parse()
            .map_err(|_| format!("expected an integer from {query:?}, got {text:?}"))
    }

    fn size(&self) -> String {
        let bytes = match self {
            Database::Sqlite { path } => ["", "-wal"]
                .iter()
                .filter_map(|suffix| std::fs::metadata(format!("{}{suffix}", path.display())).ok())
                .map(|meta| meta.len() as i64)
                .sum::<i64>(),
            Database::Postgres { .. } => self
                .integer("SELECT pg_database_size(current_database())")
                .unwrap_or(0),
        };
        format!("{:.2} GiB", bytes as f64 / (1u64 << 30) as f64)
    }
}

/// One of the three lists measured: its query string and the same condition in SQL.
struct Variant {
    name: &'static str,
    query: String,
    condition: String,
}

fn variants() -> Vec<Variant> {
    vec![
        Variant {
            name: "no filter",
            query: String::new(),
            condition: "TRUE".to_string(),
        },
        Variant {
            name: "subscription_status=active",
            query: "subscription_status=active".to_string(),
            condition: "subscription_status = 'active'".to_string(),
        },
        Variant {
            name: "next_order_datetime range",
            query: format!(
                "filter={}",
                percent_encoded(&format!(
                    "gte(next_order_datetime:{RANGE_FROM_TEXT}),lt(next_order_datetime:{RANGE_TO_TEXT})"
                ))
            ),
            condition: format!(
                "next_order_datetime >= {} AND next_order_datetime < {}",
                micros(RANGE_FROM),
                micros(RANGE_TO)
            ),
        },
    ]
}

/// Percent-encodes everything but RFC 3986's unreserved characters.
fn percent_encoded(text: &str) -> String {
    text.bytes()
        .map(|byte| {
            if byte.is_ascii_alphanumeric() || b"-._~".contains(&byte) {
                (byte as char).to_string()
            } else {
                format!("%{byte:02X}")
            }
        })
        .collect()
}

/// Base64url without padding, as the API's cursors are written.
fn base64url(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let group = chunk.iter().enumerate().fold(0u32, |group, (n, byte)| {
            group | u32::from(*byte) << (16 - 8 * n)
        });
        for n in 0..=chunk.len() {
            out.push(ALPHABET[(group >> (18 - 6 * n) & 63) as usize] as char);
        }
    }
    out
}

/// The cursor `pagination.next` carries after subscription `id` (domain `query::Cursor`).
/// The cursor a walk reaches after `id`: the domain's `Cursor { after_id, total }.encode()`,
/// which carries the total its first page counted.
fn cursor_after(id: i64, total: i64) -> String {
    base64url(format!("s1:{id}:{total}").as_bytes())
}

/// A keep-alive HTTP/1.1 connection that GETs with a bearer token and reads whole answers.
struct Client {
    address: String,
    authorization: String,
    reader: BufReader<TcpStream>,
    writer: TcpStream,
}

impl Client {
    fn open(mercer: &Mercer) -> Result<Client, String> {
        let address = mercer.base_url.trim_start_matches("http://").to_string();
        let stream = TcpStream::connect(&address).map_err(|e| e.to_string())?;
        stream.set_nodelay(true).map_err(|e| e.to_string())?;
        stream
            .set_read_timeout(Some(Duration::from_secs(120)))
            .map_err(|e| e.to_string())?;
        Ok(Client {
            address,
            authorization: format!("Bearer {}", mercer.token),
            reader: BufReader::new(stream.try_clone().map_err(|e| e.to_string())?),
            writer: stream,
        })
    }

    fn get(&mut self, path: &str) -> Result<(u16, Vec<u8>), String> {
        self.exchange(path).map_err(|e| format!("GET {path}: {e}"))
    }

    fn exchange(&mut self, path: &str) -> std::io::Result<(u16, Vec<u8>)> {
        let request = format!(
            "GET {path} HTTP/1.1\r\nHost: {}\r\nAuthorization: {}\r\nAccept: application/json\r\n\r\n",
            self.address, self.authorization
        );
        self.writer.write_all(request.as_bytes())?;
        let mut line = String::new();
        self.reader.read_line(&mut line)?;
        let status: u16 = line
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| std::io::Error::other(format!("bad status line {line:?}")))?;
        let (mut length, mut chunked, mut close) = (0usize, false, false);
        loop {
            line.clear();
            if self.reader.read_line(&mut line)? == 0 {
                return Err(std::io::Error::other("connection closed"));
            }
            let header = line.trim_end();
            if header.is_empty() {
                break;
            }
            if let Some((name, value)) = header.split_once(':') {
                let value = value.trim();
                if name.eq_ignore_ascii_case("content-length") {
                    length = value.parse().unwrap_or(0);
                } else if name.eq_ignore_ascii_case("transfer-encoding") {
                    chunked = value.eq_ignore_ascii_case("chunked");
                } else if name.eq_ignore_ascii_case("connection") {
                    close = value.eq_ignore_ascii_case("close");
                }
            }
        }
        let mut body = Vec::new();
        if chunked {
            loop {
                line.clear();
                self.reader.read_line(&mut line)?;
                let size =
                    usize::from_str_radix(line.trim().split(';').next().unwrap_or(""), 16)
                        .map_err(|_| std::io::Error::other(format!("bad chunk size {line:?}")))?;
                let start = body.len();
                body.resize(start + size, 0);
                self.reader.read_exact(&mut body[start..])?;
                line.clear();
                self.reader.read_line(&mut line)?;
                if size == 0 {
                    break;
                }
            }
        } else {
            body.resize(length, 0);
            self.reader.read_exact(&mut body)?;
        }
        if close {
            let stream = TcpStream::connect(&self.address)?;
            stream.set_nodelay(true)?;
            self.reader = BufReader::new(stream.try_clone()?);
            self.writer = stream;
        }
        Ok((status, body))
    }

    /// GETs `path`, failing unless it answers 200.
    fn ok(&mut self, path: &str) -> Result<Vec<u8>, String> {
        match self.get(path)? {
            (200, body) => Ok(body),
            (status, body) => Err(format!(
                "GET {path} answered {status}: {}",
                String::from_utf8_lossy(&body)
            )),
        }
    }

    /// GETs a page of the list and reads it as JSON.
    fn page(&mut self, path: &str) -> Result<Value, String> {
        serde_json::from_slice(&self.ok(path)?).map_err(|e| format!("GET {path}: {e}"))
    }
}

pub(crate) fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted
        .get(((sorted.len() as f64 - 1.0) * p).round() as usize)
        .copied()
        .unwrap_or_default()
}

fn list_path(shop: &str, variant: &Variant, cursor: Option<&str>) -> String {
    let mut parameters: Vec<String> = Vec::new();
    if !variant.query.is_empty() {
        parameters.push(variant.query.clone());
    }
    if let Some(cursor) = cursor {
        parameters.push(format!("cursor={cursor}"));
    }
    let mut path = format!("/subscriptions/v1/shops/{shop}/subscriptions");
    if !parameters.is_empty() {
        path.push('?');
        path.push_str(&parameters.join("&"));
    }
    path
}

/// The ids of a page's subscriptions and its `pagination.next`, checked for shape.
fn page_ids(page: &Value) -> Result<(Vec<i64>, Option<String>), String> {
    let subscriptions = page["subscriptions"]
        .as_array()
        .ok_or("a page without `subscriptions`")?;
    let ids: Vec<i64> = subscriptions
        .iter()
        .map(|s| s["id"].as_i64().ok_or("a subscription without an id"))
        .collect::<Result<_, _>>()?;
    if let Some(s) = subscriptions.first() {
        let items = s["line_items"].as_array().map_or(0, Vec::len) as i64;
        if items != LINE_ITEMS_PER_SUBSCRIPTION {
            return Err(format!("subscription {} has {items} line items", ids[0]));
        }
    }
    let next = page["pagination"]["next"].as_str().map(str::to_string);
    Ok((ids, next))
}

/// How the deep cursor was reached.
enum Reached {
    Walked { pages: i64, elapsed: Duration },
    Built { why: String },
}

/// Follows `pagination.next` from the first page `DEEP_STEPS` times; the cursor reached, or
/// why not (too slow).
fn walk(
    client: &mut Client,
    shop: &str,
    variant: &Variant,
) -> Result<Result<(String, Duration), String>, String> {
    let started = Instant::now();
    let mut cursor: Option<String> = None;
    let mut last_id = 0;
    for step in 0..DEEP_STEPS {
        let page = client.page(&list_path(shop, variant, cursor.as_deref()))?;
        let (ids, next) = page_ids(&page)?;
        if ids.len() as i64 != PAGE || ids.windows(2).any(|pair| pair[0] >= pair[1]) {
            return Err(format!(
                "page {} of the walk is not {PAGE} ascending ids: {ids:?}",
                step + 1
            ));
        }
        if ids[0] <= last_id {
            return Err(format!(
                "page {} of the walk starts at {} after {last_id}",
                step + 1,
                ids[0]
            ));
        }
        last_id = ids[ids.len() - 1];
        cursor = Some(next.ok_or_else(|| format!("page {} of the walk has no next", step + 1))?);
        if started.elapsed() > WALK_LIMIT {
            return Ok(Err(format!(
                "the walk was given up after {} pages in {:.0} s",
                step + 1,
                started.elapsed().as_secs_f64()
            )));
        }
    }
    let cursor = cursor.ok_or("no cursor")?;
    Ok(Ok((cursor, started.elapsed())))
}

/// GETs `path` `WARM_UP` times, or fewer once `WARM_UP_TIME` has passed (two at least); the
/// sorted timings.
fn warm_up(client: &mut Client, path: &str) -> Result<Vec<Duration>, String> {
    let started = Instant::now();
    let mut timings = Vec::with_capacity(WARM_UP);
    while timings.len() < WARM_UP && (timings.len() < 2 || started.elapsed() < WARM_UP_TIME) {
        let sent = Instant::now();
        client.ok(path)?;
        timings.push(sent.elapsed());
    }
    timings.sort_unstable();
    Ok(timings)
}

/// The customer whose subscriptions are the comparison page.
const COMPARISON_CUSTOMER: i64 = 4_242;

/// `GET …/customers/{id}/subscriptions?limit=50` of one customer (100 subscriptions): a page of
/// as many subscriptions, assembled and written alike, whose count covers 100 rows, not a
/// million. p50, p99 and the number of samples.
fn customer_page(mercer: &Mercer) -> Result<(Duration, Duration, usize), String> {
    let mut client = Client::open(mercer)?;
    let path = format!(
        "/subscriptions/v1/shops/{}/customers/{COMPARISON_CUSTOMER}/subscriptions?limit={PAGE}",
        mercer.shop
    );
    let warm = warm_up(&mut client, &path)?;
    let each = percentile(&warm, 0.5).as_secs_f64().max(1e-6);
    let samples = ((SAMPLE_TIME.as_secs_f64() / each) as usize).clamp(MIN_SAMPLES, MAX_SAMPLES);
    let mut timings = Vec::with_capacity(samples);
    for _ in 0..samples {
        let sent = Instant::now();
        client.ok(&path)?;
        timings.push(sent.elapsed());
    }
    timings.sort_unstable();
    Ok((
        percentile(&timings, 0.5),
        percentile(&timings, 0.99),
        samples,
    ))
}

/// The timings of one list: its first page and its deep page.
struct Measured {
    variant: &'static str,
    total: i64,
    first: Vec<Duration>,
    deep: Vec<Duration>,
    reached: Reached,
}

fn measure_variant(
    mercer: &Mercer,
    database: &Database,
    shop_id: i64,
    variant: &Variant,
) -> Result<Measured, String> {
    let mut client = Client::open(mercer)?;
    let shop = mercer.shop.as_str();
    let where_clause = format!("shop_id = {shop_id} AND {}", variant.condition);
    let total = database.integer(&format!(
        "SELECT count(*) FROM subscriptions WHERE {where_clause}"
    ))?;
    let deep_id = database.integer(&format!(
        "SELECT id FROM subscriptions WHERE {where_clause} ORDER BY id LIMIT 1 OFFSET {}",
        DEEP_STEPS * PAGE - 1
    ))?;
    let first_path = list_path(shop, variant, None);
    let first_page = client.page(&first_path)?;
    let answered_total = first_page["pagination"]["total"].as_i64().unwrap_or(-1);
    if answered_total != total {
        return Err(format!(
            "{}: pagination.total is {answered_total}, SQL counts {total}",
            variant.name
        ));
    }
    page_ids(&first_page)?;
    // Warming up on the first page says whether walking 10,000 pages fits the budget.
    let probe = warm_up(&mut client, &first_path)?;
    let probe_p50 = percentile(&probe, 0.5);
    let projected = probe_p50 * DEEP_STEPS as u32;
    let built = cursor_after(deep_id, total);
    let (deep_cursor, reached) = if projected <= WALK_BUDGET {
        match walk(&mut client, shop, variant)? {
            Ok((cursor, elapsed)) => {
                if cursor != built {
                    return Err(format!(
                        "{}: the walk reached cursor {cursor}, SQL says the 500,000th match is id {deep_id} ({built})",
                        variant.name
                    ));
                }
                let reached = Reached::Walked {
                    pages: DEEP_STEPS,
                    elapsed,
                };
                (cursor, reached)
            }
            Err(why) => (built, Reached::Built { why }),
        }
    } else {
        let why = format!(
            "a walk would take about {:.0} s at {:.1} ms a page",
            projected.as_secs_f64(),
            ms(probe_p50)
        );
        (built, Reached::Built { why })
    };
    let deep_path = list_path(shop, variant, Some(&deep_cursor));
    let (ids, _) = page_ids(&client.page(&deep_path)?)?;
    if ids.first().is_none_or(|id| *id <= deep_id) {
        return Err(format!("{}: the deep page starts at {ids:?}", variant.name));
    }
    // First and deep pages alternate, so a drift of the machine weighs on both alike.
    let deep_p50 = percentile(&warm_up(&mut client, &deep_path)?, 0.5);
    let pair = (probe_p50 + deep_p50).as_secs_f64().max(1e-6);
    let samples = ((SAMPLE_TIME.as_secs_f64() / pair) as usize).clamp(MIN_SAMPLES, MAX_SAMPLES);
    let (mut first, mut deep) = (Vec::with_capacity(samples), Vec::with_capacity(samples));
    for _ in 0..samples {
        for (path, timings) in [(&first_path, &mut first), (&deep_path, &mut deep)] {
            let sent = Instant::now();
            client.ok(path)?;
            timings.push(sent.elapsed());
        }
    }
    first.sort_unstable();
    deep.sort_unstable();
    Ok(Measured {
        variant: variant.name,
        total,
        first,
        deep,
        reached,
    })
}

/// A `kB` field of `/proc/PID/status`, in KiB.
fn status_kib(pid: u32, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|line| line.strip_prefix(field))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
}

/// The highest `RssAnon` of a process, read every 50 ms until dropped: its own memory, apart
/// from the pages of files it maps (SQLite maps up to 1 GiB of the database), which `VmHWM`
/// counts too.
struct AnonymousPeak {
    stop: Arc<AtomicBool>,
    sampler: Option<std::thread::JoinHandle<u64>>,
}

impl AnonymousPeak {
    fn watch(pid: u32) -> AnonymousPeak {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let sampler = std::thread::spawn(move || {
            let mut peak = 0;
            while !flag.load(Ordering::Relaxed) {
                peak = peak.max(status_kib(pid, "RssAnon:").unwrap_or(0));
                std::thread::sleep(Duration::from_millis(50));
            }
            peak
        });
        AnonymousPeak {
            stop,
            sampler: Some(sampler),
        }
    }

    fn kib(mut self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        self.sampler
            .take()
            .and_then(|sampler| sampler.join().ok())
            .unwrap_or(0)
    }
}

impl Drop for AnonymousPeak {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

fn mib(kib: u64) -> String {
    format!("{:.0} MiB", kib as f64 / 1024.0)
}

fn verdict(met: bool) -> &'static str {
    if met { "met" } else { "NOT met" }
}

fn run_backend(
    binary: &str,
    name: &str,
    database: &Database,
    p99_target_ms: f64,
) -> Result<(), String> {
    // The first start migrates the empty database and prints the demo shop and token.
    let first = start_mercer(binary, &database.url(), &[])?;
    let (shop, token) = (first.shop.clone(), first.token.clone());
    drop(first);
    if shop.is_empty() || token.is_empty() {
        return Err("the first start printed no demo shop and token".to_string());
    }
    let shop_id = database.integer(&format!(
        "SELECT id FROM shops WHERE identifier = {}",
        quoted(&shop)
    ))?;
    let started = Instant::now();
    database.run(&seed_script(
        database.dialect(),
        shop_id,
        &Seed::list_benchmark(),
    ))?;
    let seeded = started.elapsed();
    let size = database.size();
    println!("{name}:");
    println!(
        "  seeded          {SUBSCRIPTIONS} subscriptions, {} line items, {CUSTOMERS} customers in {:.0} s (set-based SQL, then ANALYZE); database {size}",
        SUBSCRIPTIONS * LINE_ITEMS_PER_SUBSCRIPTION,
        seeded.as_secs_f64()
    );

    let mut mercer = start_mercer(binary, &database.url(), &[])?;
    mercer.shop = shop;
    mercer.token = token;
    let anonymous = AnonymousPeak::watch(mercer.child.id());
    let mut results = Vec::new();
    for variant in variants() {
        let measured = measure_variant(&mercer, database, shop_id, &variant)?;
        print_measured(&measured, p99_target_ms);
        results.push(measured);
    }
    let (p50, p99, samples) = customer_page(&mercer)?;
    println!(
        "  for comparison  a page of {PAGE} without the large count: List Customer Subscriptions of customer {COMPARISON_CUSTOMER} ({} subscriptions), p50 {:.2} ms, p99 {:.2} ms ({samples} samples)",
        SUBSCRIPTIONS / CUSTOMERS,
        ms(p50),
        ms(p99)
    );
    let pid = mercer.child.id();
    let peak = peak_memory_kib(pid);
    let file = status_kib(pid, "RssFile:");
    let anonymous = anonymous.kib();
    drop(mercer);
    println!(
        "  peak memory     {} (VmHWM); of it, mercer's own memory (RssAnon) peaked at {}, and {} at the end were pages of mapped files (RssFile)",
        peak.map_or("?".to_string(), mib),
        mib(anonymous),
        file.map_or("?".to_string(), mib),
    );

    let worst = results
        .iter()
        .flat_map(|m| [(m, "first", &m.first), (m, "deep", &m.deep)])
        .map(|(m, page, timings)| (m.variant, page, ms(percentile(timings, 0.99))))
        .fold(None, |worst: Option<(&str, &str, f64)>, item| match worst {
            Some(w) if w.2 >= item.2 => Some(w),
            _ => Some(item),
        });
    if let Some((variant, page, p99)) = worst {
        println!(
            "  target p99 < {p99_target_ms:.0} ms   {} (worst: {p99:.2} ms, {page} page, {variant})",
            verdict(p99 < p99_target_ms)
        );
    }
    for m in &results {
        let (first, deep) = (percentile(&m.first, 0.5), percentile(&m.deep, 0.5));
        let ratio = deep.as_secs_f64() / first.as_secs_f64().max(1e-9);
        let ratio99 = percentile(&m.deep, 0.99).as_secs_f64()
            / percentile(&m.first, 0.99).as_secs_f64().max(1e-9);
        println!(
            "  target deep ≤ 1.25 × first ({}): {} (p50 ratio {ratio:.2}; p99 ratio {ratio99:.2})",
            m.variant,
            verdict(ratio <= 1.25)
        );
    }
    match peak {
        Some(kib) => println!(
            "  target memory < {MEMORY_TARGET_MIB:.0} MiB: {} by VmHWM ({}); {} by RssAnon alone ({})",
            verdict((kib as f64 / 1024.0) < MEMORY_TARGET_MIB),
            mib(kib),
            verdict((anonymous as f64 / 1024.0) < MEMORY_TARGET_MIB),
            mib(anonymous)
        ),
        None => println!("  target memory < {MEMORY_TARGET_MIB:.0} MiB: unknown (no /proc)"),
    }
    Ok(())
}

fn print_measured(m: &Measured, p99_target_ms: f64) {
    let figures = |timings: &[Duration]| {
        let p99 = ms(percentile(timings, 0.99));
        format!(
            "p50 {:.2} ms, p99 {p99:.2} ms (p99 target {})",
            ms(percentile(timings, 0.5)),
            verdict(p99 < p99_target_ms)
        )
    };
    let reached = match &m.reached {
        Reached::Walked { pages, elapsed } => format!(
            "walked: {pages} pages in {:.0} s, the cursor reached checked against SQL",
            elapsed.as_secs_f64()
        ),
        Reached::Built { why } => format!("built from SQL's id of the 500,000th match: {why}"),
    };
    println!(
        "  {} ({} match, {} samples each):",
        m.variant,
        m.total,
        m.first.len()
    );
    println!("    first page     {}", figures(&m.first));
    println!("    page {:<9} {}", DEEP_STEPS + 1, figures(&m.deep));
    println!("    deep cursor    {reached}");
}

/// The release half of `cargo xtask bench subscriptions`.
pub fn subscriptions(binary: &str) -> Result<(), String> {
    println!(
        "subscriptions benchmark: List Subscriptions over {SUBSCRIPTIONS} subscriptions ({CUSTOMERS} customers, {LINE_ITEMS_PER_SUBSCRIPTION} line items each) in one shop; limit {PAGE}; one keep-alive connection, one request at a time"
    );
    on_each_database("subscriptions", |label, database| {
        let target_ms = if matches!(database, Database::Sqlite { .. }) {
            10.0
        } else {
            20.0
        };
        run_backend(binary, label, database, target_ms)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_are_base64url_without_padding() {
        // As the domain's `Cursor { after_id, total }.encode()` writes them.
        assert_eq!(cursor_after(41, 7), "czE6NDE6Nw");
        assert_eq!(cursor_after(500_000, 1_000_000), "czE6NTAwMDAwOjEwMDAwMDA");
        assert_eq!(base64url(b""), "");
        assert_eq!(base64url(b"\xfb\xff"), "-_8");
        assert_eq!(base64url(b"s1:1"), "czE6MQ");
    }

    #[test]
    fn the_range_filter_is_percent_encoded() {
        assert_eq!(percent_encoded("gte(a:1),b"), "gte%28a%3A1%29%2Cb");
    }

    #[test]
    fn the_constants_name_their_dates() {
        assert_eq!(CREATED, 1_890_777_600);
        assert_eq!(RANGE_FROM, 1_898_553_600);
        assert_eq!(RANGE_TO, 1_919_721_600);
    }
}
