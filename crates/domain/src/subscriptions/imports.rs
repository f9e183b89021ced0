//! Subscription import and export as CSV (docs/subscriptions.md, "Import and export").
//!
//! Import: each data row becomes a Create Subscription body and goes through
//! [`create_subscription_from_body`], one unit of work per row, so a row is checked by exactly
//! the rules of the API. A row is keyed by its `external_id` (the subscription's idempotency key
//! `import:{external_id}`), so importing the same file again creates nothing twice. A row's
//! problems are reported with its line (the header is line 1) and its CSV column.
//!
//! Speed: the rows go to storage [`BATCH_ROWS`] at a time, in one transaction with a savepoint
//! per row (`write_each_tx`): a row that fails is rolled back to its savepoint alone, the
//! others commit together, so a commit is paid per batch rather than per row. A crash loses at
//! most the batch under way, wholly (nothing of it was committed), and a re-run skips every row
//! committed before. The catalogue's products of the file's variants are looked up once per
//! import. Each import is recorded with its figures, brought up to date after every batch, for
//! `GET …/imports` to show while it runs ([`ImportProgress`]).
//!
//! Export: the same columns, a page of subscriptions at a time in ascending id, so that an
//! export imports into another shop.

use std::collections::HashMap;

use serde::Serialize;
use serde_json::{Map, Value, json};

use crate::access::shop::Shop;
use crate::kernel::error::{DomainError, FieldError, StoreResult};
use crate::kernel::ids::{ImportId, ShopId, SubscriptionId};
use crate::kernel::time::{Clock, Timestamp};
use crate::platform::catalogue;
use crate::subscriptions::operations::{create_subscription_from_body, resources};
use crate::subscriptions::query::{Cursor, ListQuery};
use crate::subscriptions::repository::{SubscriptionDatabase, SubscriptionRepositories};
use crate::subscriptions::resources::{Actor, Subscription, SubscriptionCustomer};

/// The columns, in the order an export writes them. The first [`REQUIRED_COLUMNS`] must be in
/// an import's header; the payment columns may be left out.
pub const COLUMNS: [&str; 20] = [
    "external_id",
    "email",
    "first_name",
    "last_name",
    "phone",
    "shipping_street1",
    "shipping_city",
    "shipping_province_code",
    "shipping_country_code",
    "shipping_zip",
    "subscription_group_id",
    "interval_id",
    "order_rrule",
    "line_items",
    "next_order_datetime",
    "subscription_status",
    "base_currency",
    "charged_currency",
    "gateway_name",
    "gateway_customer_id",
];

/// How many of [`COLUMNS`] an import's header must have.
pub const REQUIRED_COLUMNS: usize = 18;

/// The largest import body: 32 MiB, about 100,000 rows of a few line items each.
pub const MAX_IMPORT_BYTES: usize = 32 << 20;

/// The most line items one row's `line_items` may hold (as Create Subscription allows).
const MAX_ROW_LINE_ITEMS: usize = 250;

/// The longest `external_id`.
const MAX_EXTERNAL_ID: usize = 255;

/// The field of a failure that is about the whole row rather than one column.
const ROW: &str = "row";

/// A row that was not imported: its line (the header is line 1), the column at fault (`row`
/// for the row as a whole) and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct ImportFailure {
    /// The CSV record's number, the header being 1.
    pub line: u64,
    /// The CSV column at fault, or `row` when the row as a whole is.
    pub field: String,
    /// What is wrong, for people.
    pub message: String,
}

/// What an import did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct ImportReport {
    /// The import's id: its record at `GET …/imports/{import_id}`.
    pub id: ImportId,
    /// The data rows read (the header aside).
    pub rows: u64,
    /// The subscriptions created.
    pub created: u64,
    /// The rows whose `external_id` an earlier import already created.
    pub skipped_existing: u64,
    /// Every row not imported, with each of its problems.
    pub failed: Vec<ImportFailure>,
}

/// One `variant_id:quantity:price_cents` of a row's `line_items`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RowLineItem {
    /// The platform's variant id (its product is looked up in the shop's catalogue).
    pub variant_id: String,
    /// How many.
    pub quantity: i64,
    /// The unit price in minor units of `base_currency`.
    pub price_cents: i64,
}

/// A data row as read: its line and its cells by column (blank cells left out).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImportRow {
    /// The CSV record's number, the header being 1.
    pub line: u64,
    cells: HashMap<&'static str, String>,
}

impl ImportRow {
    /// The row's cell of `column`, trimmed; `None` when blank or absent.
    pub fn get(&self, column: &str) -> Option<&str> {
        self.cells.get(column).map(String::as_str)
    }
}

/// A row checked as far as the CSV goes; the rest is Create Subscription's to check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckedRow {
    /// The row as read.
    pub row: ImportRow,
    /// The row's `external_id`.
    pub external_id: String,
    /// Its `line_items`, in order.
    pub line_items: Vec<RowLineItem>,
    /// Its `subscription_group_id`, when given.
    pub group_id: Option<i64>,
    /// Its `interval_id`, when given.
    pub interval_id: Option<i64>,
}

/// A CSV body read: the rows that check, and the failures of those that do not.
#[derive(Debug, Default)]
pub struct ReadImport {
    /// The data rows read.
    pub rows: u64,
    /// The rows to import.
    pub checked: Vec<CheckedRow>,
    /// The rows that failed already.
    pub failed: Vec<ImportFailure>,
}

fn header_error(code: &'static str, message: String) -> DomainError {
    DomainError::invalid("header", code, message)
}

/// The header's columns by position: every required column present once, none unknown
/// (422 on `header` otherwise).
fn read_header(record: &csv::ByteRecord) -> Result<Vec<&'static str>, DomainError> {
    let mut columns = Vec::with_capacity(record.len());
    for raw in record {
        let name = String::from_utf8_lossy(raw);
        let name = name.trim().trim_start_matches('\u{feff}');
        let Some(column) = COLUMNS.iter().find(|c| **c == name) else {
            return Err(header_error(
                "unknown_column",
                format!("the header names an unknown column `{name}`"),
            ));
        };
        if columns.contains(column) {
            return Err(header_error(
                "duplicate_column",
                format!("the header names `{name}` twice"),
            ));
        }
        columns.push(*column);
    }
    if let Some(missing) = COLUMNS[..REQUIRED_COLUMNS]
        .iter()
        .find(|c| !columns.contains(c))
    {
        return Err(header_error(
            "required",
            format!("the header lacks the column `{missing}`"),
        ));
    }
    Ok(columns)
}

/// Reads a CSV import body: 422 on `header` when its header is missing or wrong; each data
/// row is checked ([`check_row`]) and either kept or reported.
pub fn read_import(body: &[u8]) -> Result<ReadImport, DomainError> {
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .from_reader(body);
    let mut records = reader.byte_records();
    let header = match records.next() {
        Some(Ok(record)) => read_header(&record)?,
        Some(Err(error)) => {
            return Err(header_error(
                "invalid",
                format!("the header does not read: {error}"),
            ));
        }
        None => {
            return Err(header_error(
                "required",
                "the body is empty: it needs a header and rows".to_string(),
            ));
        }
    };
    let mut read = ReadImport::default();
    for (index, record) in records.enumerate() {
        let line = index as u64 + 2;
        read.rows += 1;
        let checked = record
            .map_err(|error| vec![failure(line, ROW, format!("does not read as CSV: {error}"))])
            .and_then(|record| row_of(line, &header, &record))
            .and_then(check_row);
        match checked {
            Ok(row) => read.checked.push(row),
            Err(failures) => read.failed.extend(failures),
        }
    }
    Ok(read)
}

fn failure(line: u64, field: &str, message: impl Into<String>) -> ImportFailure {
    ImportFailure {
        line,
        field: field.to_string(),
        message: message.into(),
    }
}

/// A record's cells by column: as many cells as the header has columns, each UTF-8.
fn row_of(
    line: u64,
    header: &[&'static str],
    record: &csv::ByteRecord,
) -> Result<ImportRow, Vec<ImportFailure>> {
    if record.len() != header.len() {
        return Err(vec![failure(
            line,
            ROW,
            format!(
                "has {} fields where the header has {}",
                record.len(),
                header.len()
            ),
        )]);
    }
    let mut cells = HashMap::new();
    let mut failures = Vec::new();
    for (column, raw) in header.iter().zip(record) {
        match std::str::from_utf8(raw) {
            Ok(text) if text.trim().is_empty() => {}
            Ok(text) => {
                cells.insert(*column, text.trim().to_string());
            }
            Err(_) => failures.push(failure(line, column, "is not UTF-8 text")),
        }
    }
    if failures.is_empty() {
        Ok(ImportRow { line, cells })
    } else {
        Err(failures)
    }
}

/// One `variant_id:quantity:price_cents`; the message says what is wrong.
fn line_item_of(text: &str) -> Result<RowLineItem, String> {
    let parts: Vec<&str> = text.split(':').map(str::trim).collect();
    let [variant_id, quantity, price] = parts[..] else {
        return Err("is not variant_id:quantity:price_cents".to_string());
    };
    if variant_id.is_empty() {
        return Err("has no variant_id".to_string());
    }
    let quantity = quantity
        .parse::<i64>()
        .map_err(|_| format!("has the quantity `{quantity}`, not a whole number"))?;
    let price_cents = price
        .parse::<i64>()
        .map_err(|_| format!("has the price `{price}`, not a whole number of cents"))?;
    Ok(RowLineItem {
        variant_id: variant_id.to_string(),
        quantity,
        price_cents,
    })
}

/// A row's `line_items`: `variant_id:quantity:price_cents` joined by `|`, 1 to 250 of them.
pub fn parse_line_items(text: &str) -> Result<Vec<RowLineItem>, String> {
    let items: Vec<&str> = text.split('|').collect();
    if items.len() > MAX_ROW_LINE_ITEMS {
        return Err(format!("holds more than {MAX_ROW_LINE_ITEMS} line items"));
    }
    items
        .iter()
        .enumerate()
        .map(|(index, item)| {
            line_item_of(item).map_err(|why| format!("line item {} `{item}` {why}", index + 1))
        })
        .collect()
}

fn whole_number(row: &ImportRow, column: &str, failures: &mut Vec<ImportFailure>) -> Option<i64> {
    let text = row.get(column)?;
    match text.parse::<i64>() {
        Ok(number) if number > 0 => Some(number),
        _ => {
            failures.push(failure(
                row.line,
                column,
                format!("`{text}` is not a positive whole number"),
            ));
            None
        }
    }
}

/// Checks what the CSV alone says of a row: `external_id` given (at most 255 characters),
/// `line_items` given and well formed, the group and interval ids whole numbers. The rest is
/// Create Subscription's to check.
pub fn check_row(row: ImportRow) -> Result<CheckedRow, Vec<ImportFailure>> {
    let mut failures = Vec::new();
    let external_id = match row.get("external_id") {
        None => {
            failures.push(failure(row.line, "external_id", "is required"));
            None
        }
        Some(id) if id.chars().count() > MAX_EXTERNAL_ID => {
            let message = format!("is longer than {MAX_EXTERNAL_ID} characters");
            failures.push(failure(row.line, "external_id", message));
            None
        }
        Some(id) => Some(id.to_string()),
    };
    let line_items = match row.get("line_items").map(parse_line_items) {
        None => {
            failures.push(failure(row.line, "line_items", "is required"));
            Vec::new()
        }
        Some(Err(why)) => {
            failures.push(failure(row.line, "line_items", why));
            Vec::new()
        }
        Some(Ok(items)) => items,
    };
    let group_id = whole_number(&row, "subscription_group_id", &mut failures);
    let interval_id = whole_number(&row, "interval_id", &mut failures);
    match external_id {
        Some(external_id) if failures.is_empty() => Ok(CheckedRow {
            row,
            external_id,
            line_items,
            group_id,
            interval_id,
        }),
        _ => Err(failures),
    }
}

/// The idempotency key a row's subscription is created with.
pub fn import_key(external_id: &str) -> String {
    format!("import:{external_id}")
}

/// `object[key] = value` for each given cell.
fn put(object: &mut Map<String, Value>, row: &ImportRow, pairs: &[(&str, &str)]) {
    for (key, column) in pairs {
        if let Some(value) = row.get(column) {
            object.insert((*key).to_string(), Value::from(value));
        }
    }
}

/// A row's line items as Create Subscription's `line_items`, each with the row's group and
/// interval.
fn line_items_body(checked: &CheckedRow, products: &HashMap<String, String>) -> Vec<Value> {
    checked
        .line_items
        .iter()
        .map(|item| {
            let mut line = json!({
                "platform_product_id": products.get(&item.variant_id),
                "platform_variant_id": item.variant_id,
                "quantity": item.quantity,
                "price": item.price_cents,
            });
            if let Some(group) = checked.group_id {
                line["subscription_group_id"] = json!(group);
            }
            if let Some(interval) = checked.interval_id {
                line["interval_id"] = json!(interval);
            }
            line
        })
        .collect()
}

/// The Create Subscription body of a row, each variant's product as the catalogue has it
/// (`products`: variant id → product id).
pub fn create_body(checked: &CheckedRow, products: &HashMap<String, String>) -> Value {
    let row = &checked.row;
    let mut customer = Map::new();
    put(
        &mut customer,
        row,
        &[
            ("email", "email"),
            ("first_name", "first_name"),
            ("last_name", "last_name"),
            ("phone", "phone"),
        ],
    );
    let mut address = Map::new();
    put(
        &mut address,
        row,
        &[
            ("first_name", "first_name"),
            ("last_name", "last_name"),
            ("street1", "shipping_street1"),
            ("city", "shipping_city"),
            ("province_code", "shipping_province_code"),
            ("country_code", "shipping_country_code"),
            ("zip", "shipping_zip"),
        ],
    );
    let line_items = line_items_body(checked, products);
    let mut subscription = Map::new();
    subscription.insert(
        "idempotency_key".into(),
        Value::from(import_key(&checked.external_id)),
    );
    subscription.insert(
        "external_id".into(),
        Value::from(checked.external_id.as_str()),
    );
    put(
        &mut subscription,
        row,
        &[
            ("order_rrule", "order_rrule"),
            ("next_order_datetime", "next_order_datetime"),
            ("subscription_status", "subscription_status"),
            ("base_currency", "base_currency"),
            ("charged_currency", "charged_currency"),
        ],
    );
    subscription.insert("line_items".into(), Value::Array(line_items));
    subscription.insert("shipping_address".into(), Value::Object(address));
    if row.get("gateway_name").is_some() || row.get("gateway_customer_id").is_some() {
        let mut payment = Map::new();
        put(
            &mut payment,
            row,
            &[
                ("gateway_name", "gateway_name"),
                ("gateway_customer_id", "gateway_customer_id"),
            ],
        );
        subscription.insert("payment_details".into(), Value::Object(payment));
    }
    json!({"customer": customer, "subscription": subscription})
}

/// The CSV column a Create Subscription field path comes from (`row` when none does).
pub fn column_of(path: &str) -> &'static str {
    let path = path.strip_prefix("subscription.").unwrap_or(path);
    let last = path.rsplit('.').next().unwrap_or(path);
    if path.starts_with("customer.") {
        return COLUMNS.iter().find(|c| **c == last).copied().unwrap_or(ROW);
    }
    if path.starts_with("shipping_address") || path.starts_with("billing_address") {
        return match last {
            "first_name" | "last_name" => {
                COLUMNS.iter().find(|c| **c == last).copied().unwrap_or(ROW)
            }
            "street1" => "shipping_street1",
            "city" => "shipping_city",
            "province_code" | "province" => "shipping_province_code",
            "country_code" | "country" => "shipping_country_code",
            "zip" => "shipping_zip",
            _ => "shipping_street1",
        };
    }
    if path.starts_with("line_items") {
        return match last {
            "subscription_group_id" => "subscription_group_id",
            "interval_id" => "interval_id",
            _ => "line_items",
        };
    }
    if path.starts_with("payment_details") {
        return match last {
            "gateway_customer_id" => "gateway_customer_id",
            _ => "gateway_name",
        };
    }
    COLUMNS.iter().find(|c| **c == path).copied().unwrap_or(ROW)
}

/// The failures of a row whose creation was refused, each on its column.
fn failures_of(line: u64, error: &DomainError) -> Vec<ImportFailure> {
    let one = |field: &str, message: &str| vec![failure(line, field, message)];
    match error {
        DomainError::Invalid(problems) | DomainError::BadRequest(problems) => problems
            .iter()
            .map(|FieldError { field, message, .. }| failure(line, column_of(field), message))
            .collect(),
        DomainError::NotFound { resource } => one(ROW, &format!("{resource} not found")),
        DomainError::Conflict { message, .. } | DomainError::Unprocessable { message, .. } => {
            one(ROW, message)
        }
        other => one(ROW, &other.to_string()),
    }
}

/// What became of one row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RowOutcome {
    Created,
    Skipped,
}

/// Rows imported per transaction, each in a savepoint of its own. Large enough that a commit
/// (a WAL flush on PostgreSQL, the pages written on SQLite) is paid once for many rows; small
/// enough that SQLite's other writers, which wait for the batch, wait tens of milliseconds, and
/// that the progress figure moves often.
pub const BATCH_ROWS: usize = 100;

/// How many of a shop's imports `GET …/imports` lists (the newest).
pub const RECENT_IMPORTS: i64 = 50;

/// How many times a batch that met a transient storage failure (a deadlock, a busy database)
/// is tried in all: its rows are keyed, so running it again creates nothing twice.
const BATCH_ATTEMPTS: usize = 3;

/// The products of the variants an import names, looked up once per import: variant id → its
/// product's platform id (`None`: not in the catalogue).
type ProductsOfVariants = HashMap<String, Option<String>>;

/// The row's variants' products, from `known`, looking up those not seen yet.
fn products_of(
    tx: &mut dyn SubscriptionRepositories,
    shop: &Shop,
    checked: &CheckedRow,
    known: &mut ProductsOfVariants,
) -> Result<HashMap<String, String>, DomainError> {
    let missing: Vec<&str> = checked
        .line_items
        .iter()
        .map(|item| item.variant_id.as_str())
        .filter(|id| !known.contains_key(*id))
        .collect();
    if !missing.is_empty() {
        let found = catalogue::variants(tx, shop.id, &missing)?;
        for id in missing {
            let product = found
                .get(id)
                .and_then(|found| found.product.platform_id.as_ref())
                .map(|id| id.as_str().to_string());
            known.insert(id.to_string(), product);
        }
    }
    let mut products = HashMap::new();
    for item in &checked.line_items {
        match known.get(&item.variant_id) {
            Some(Some(product)) => {
                products.insert(item.variant_id.clone(), product.clone());
            }
            _ => {
                return Err(DomainError::invalid(
                    "line_items",
                    "unknown_variant",
                    format!(
                        "the variant `{}` is not in the shop's catalogue",
                        item.variant_id
                    ),
                ));
            }
        }
    }
    Ok(products)
}

/// Imports one row in its unit of work: skipped when its key was imported before, else created
/// through Create Subscription.
fn import_row(
    tx: &mut dyn SubscriptionRepositories,
    shop: &Shop,
    checked: &CheckedRow,
    actor: Actor,
    now: Timestamp,
    known: &mut ProductsOfVariants,
) -> Result<RowOutcome, DomainError> {
    let key = import_key(&checked.external_id);
    if tx.subscription_by_idempotency_key(shop.id, &key)?.is_some() {
        return Ok(RowOutcome::Skipped);
    }
    let products = products_of(tx, shop, checked, known)?;
    let body = create_body(checked, &products);
    // The row's text is held to what every database keeps (no NUL, bounded lengths), as the
    // API holds a JSON body; a problem is the row's field, not a failed import.
    crate::kernel::limits::check_json_body(body.to_string().as_bytes())
        .map_err(|problem| DomainError::Invalid(vec![problem]))?;
    let (_, created) = create_subscription_from_body(tx, shop, &body, actor, now)?;
    Ok(if created {
        RowOutcome::Created
    } else {
        RowOutcome::Skipped
    })
}

/// Where an import stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ImportStatus {
    /// Its rows are being imported (or the process stopped under it: its `updated_at` stays).
    Running,
    /// Every row is done; the figures are the import's answer.
    Done,
    /// A storage failure ended it early; importing the file again finishes it.
    Stopped,
}

impl ImportStatus {
    /// The stored text.
    pub fn as_str(self) -> &'static str {
        match self {
            ImportStatus::Running => "running",
            ImportStatus::Done => "done",
            ImportStatus::Stopped => "stopped",
        }
    }

    /// The status of its stored text.
    pub fn parse(text: &str) -> Option<ImportStatus> {
        match text {
            "running" => Some(ImportStatus::Running),
            "done" => Some(ImportStatus::Done),
            "stopped" => Some(ImportStatus::Stopped),
            _ => None,
        }
    }
}

/// An import's figures so far. `rows_done` = `created` + `skipped_existing` + `failed_rows`;
/// the rows that fail as CSV count as done from the start.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct ImportFigures {
    /// The file's data rows (the header aside).
    pub rows: u64,
    /// The rows done so far.
    pub rows_done: u64,
    /// The subscriptions created so far.
    pub created: u64,
    /// The rows skipped so far: an earlier import created their `external_id`.
    pub skipped_existing: u64,
    /// The rows not imported so far (the import's answer lists their problems).
    pub failed_rows: u64,
}

/// An import as recorded: its figures, brought up to date after every batch of rows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct ImportProgress {
    /// The import's id (the `id` of its answer).
    pub id: ImportId,
    /// `running`, `done` or `stopped`.
    pub status: ImportStatus,
    /// Its figures so far; once `done`, those of its answer.
    #[serde(flatten)]
    pub figures: ImportFigures,
    /// When it began.
    pub started_at: Timestamp,
    /// When its figures last changed.
    pub updated_at: Timestamp,
    /// When it ended (`done` or `stopped`); null while it runs.
    pub finished_at: Option<Timestamp>,
}

/// The record of imports and their progress.
pub trait ImportRepository {
    /// Records an import that begins now with these figures (status `running`).
    fn insert_import(
        &mut self,
        shop_id: ShopId,
        figures: &ImportFigures,
        now: Timestamp,
    ) -> StoreResult<ImportId>;

    /// Writes the import's figures and status; a status other than `running` ends it at `now`.
    fn update_import(
        &mut self,
        shop_id: ShopId,
        id: ImportId,
        figures: &ImportFigures,
        status: ImportStatus,
        now: Timestamp,
    ) -> StoreResult<()>;

    /// The shop's import of this id.
    fn import_progress(
        &mut self,
        shop_id: ShopId,
        id: ImportId,
    ) -> StoreResult<Option<ImportProgress>>;

    /// The shop's newest `limit` imports, newest first.
    fn recent_imports(&mut self, shop_id: ShopId, limit: i64) -> StoreResult<Vec<ImportProgress>>;
}

/// A batch of rows, each in a savepoint of one transaction; tried again (whole) after a
/// transient storage failure, which left none of it committed.
fn import_batch(
    db: &impl SubscriptionDatabase,
    shop: &Shop,
    batch: &[CheckedRow],
    actor: &Actor,
    now: Timestamp,
    known: &mut ProductsOfVariants,
) -> Result<Vec<Result<RowOutcome, DomainError>>, DomainError> {
    let mut attempt = 1;
    loop {
        let outcome = db.write_each_tx(batch, |tx, checked| {
            import_row(tx, shop, checked, actor.clone(), now, known)
        });
        match outcome {
            Err(DomainError::Storage(error))
                if error.is_transient() && attempt < BATCH_ATTEMPTS =>
            {
                attempt += 1;
            }
            other => return other,
        }
    }
}

/// How many distinct rows (lines) these failures are of.
fn rows_of(failures: &[ImportFailure]) -> u64 {
    let lines: std::collections::BTreeSet<u64> = failures.iter().map(|f| f.line).collect();
    lines.len() as u64
}

/// Import Subscriptions: every valid row of the CSV `body` created, each in a unit of work of
/// its own; every invalid row reported with its line, column and reason; rows imported before
/// (by `external_id`) skipped. 422 on `header` when the header is wrong. The import is recorded
/// and its figures kept up to date after every batch of [`BATCH_ROWS`] rows. A storage failure
/// stops the import (recorded as `stopped` when it can be; the batches before it stay imported,
/// and a re-run skips them).
pub fn import_subscriptions(
    db: &impl SubscriptionDatabase,
    shop: &Shop,
    body: &[u8],
    actor: &Actor,
    clock: &dyn Clock,
) -> Result<ImportReport, DomainError> {
    let read = read_import(body)?;
    let failed_rows = rows_of(&read.failed);
    let mut figures = ImportFigures {
        rows: read.rows,
        rows_done: failed_rows,
        failed_rows,
        ..ImportFigures::default()
    };
    let id = db.write_tx(|tx| Ok(tx.insert_import(shop.id, &figures, clock.now())?))?;
    let mut report = ImportReport {
        id,
        rows: read.rows,
        failed: read.failed,
        ..ImportReport::default()
    };
    let mut known = ProductsOfVariants::new();
    for batch in read.checked.chunks(BATCH_ROWS) {
        let outcomes = match import_batch(db, shop, batch, actor, clock.now(), &mut known) {
            Ok(outcomes) => outcomes,
            Err(error) => {
                let stopped = |tx: &mut dyn SubscriptionRepositories| {
                    let status = ImportStatus::Stopped;
                    Ok(tx.update_import(shop.id, id, &figures, status, clock.now())?)
                };
                if let Err(also) = db.write_tx(stopped) {
                    log::warn!("import {id}: its stop was not recorded: {also}");
                }
                return Err(error);
            }
        };
        for (checked, outcome) in batch.iter().zip(outcomes) {
            figures.rows_done += 1;
            match outcome {
                Ok(RowOutcome::Created) => figures.created += 1,
                Ok(RowOutcome::Skipped) => figures.skipped_existing += 1,
                Err(error) => {
                    figures.failed_rows += 1;
                    report.failed.extend(failures_of(checked.row.line, &error));
                }
            }
        }
        let status = if figures.rows_done == figures.rows {
            ImportStatus::Done
        } else {
            ImportStatus::Running
        };
        db.write_tx(|tx| Ok(tx.update_import(shop.id, id, &figures, status, clock.now())?))?;
    }
    if read.checked.is_empty() {
        let done = ImportStatus::Done;
        db.write_tx(|tx| Ok(tx.update_import(shop.id, id, &figures, done, clock.now())?))?;
    }
    report.created = figures.created;
    report.skipped_existing = figures.skipped_existing;
    report.failed.sort_by_key(|failure| failure.line);
    Ok(report)
}

/// Get Import: the shop's import of this id (404 for another shop's).
pub fn get_import(
    tx: &mut dyn SubscriptionRepositories,
    shop: &Shop,
    id: ImportId,
) -> Result<ImportProgress, DomainError> {
    tx.import_progress(shop.id, id)?
        .ok_or(DomainError::not_found(ImportId::RESOURCE))
}

/// List Imports: the shop's newest [`RECENT_IMPORTS`] imports, newest first.
pub fn list_imports(
    tx: &mut dyn SubscriptionRepositories,
    shop: &Shop,
) -> Result<Vec<ImportProgress>, DomainError> {
    Ok(tx.recent_imports(shop.id, RECENT_IMPORTS)?)
}

/// The export's header line.
pub fn export_header() -> Vec<u8> {
    let mut writer = csv::Writer::from_writer(Vec::new());
    // Writing to memory does not fail.
    let _ = writer.write_record(COLUMNS);
    writer.into_inner().unwrap_or_default()
}

fn text(value: Option<&String>) -> &str {
    value.map_or("", String::as_str)
}

/// A subscription's export row, in [`COLUMNS`] order. Its `external_id` is its own, else
/// `mercer-{id}` so that every exported row imports; the gateway's customer id is never shown,
/// so its column is left blank.
pub fn export_row(
    subscription: &Subscription,
    customer: Option<&SubscriptionCustomer>,
) -> Vec<String> {
    let address = &subscription.shipping_address;
    let first_line = subscription
        .line_items
        .iter()
        .find(|item| item.subscription_group_id.is_some());
    let line_items: Vec<String> = subscription
        .line_items
        .iter()
        .map(|item| {
            format!(
                "{}:{}:{}",
                item.platform_variant_id, item.quantity, item.price.0
            )
        })
        .collect();
    let external_id = subscription
        .external_id
        .clone()
        .unwrap_or_else(|| format!("mercer-{}", subscription.id));
    vec![
        external_id,
        text(customer.and_then(|c| c.email.as_ref())).to_string(),
        text(customer.and_then(|c| c.first_name.as_ref())).to_string(),
        text(customer.and_then(|c| c.last_name.as_ref())).to_string(),
        text(customer.and_then(|c| c.phone.as_ref())).to_string(),
        text(address.street1.as_ref()).to_string(),
        text(address.city.as_ref()).to_string(),
        text(address.province_code.as_ref()).to_string(),
        text(address.country_code.as_ref()).to_string(),
        text(address.zip.as_ref()).to_string(),
        first_line
            .and_then(|item| item.subscription_group_id)
            .map_or_else(String::new, |id| id.to_string()),
        first_line
            .and_then(|item| item.subscription_group_billing_rules_id)
            .map_or_else(String::new, |id| id.to_string()),
        subscription.order_rrule.clone(),
        line_items.join("|"),
        subscription
            .next_order_datetime
            .map_or_else(String::new, Timestamp::to_rfc3339),
        <&str>::from(subscription.subscription_status).to_string(),
        subscription.base_currency.as_str().to_string(),
        subscription.charged_currency.as_str().to_string(),
        text(subscription.payment_gateway_public_id.as_ref()).to_string(),
        String::new(),
    ]
}

/// One page of Export Subscriptions: the CSV rows of up to `limit` subscriptions after
/// `after` (from the first when `None`), in ascending id, and the id to continue after
/// (`None` on the last page).
pub fn export_page(
    tx: &mut dyn SubscriptionRepositories,
    shop: &Shop,
    after: Option<SubscriptionId>,
    limit: i64,
) -> Result<(Vec<u8>, Option<SubscriptionId>), DomainError> {
    let query = ListQuery {
        expand_customer: true,
        limit,
        cursor: after.map(|after_id| Cursor {
            after_id,
            total: Some(0),
        }),
        ..ListQuery::default()
    };
    let page = tx.list_subscriptions(shop.id, &query)?;
    let next = page
        .has_more
        .then(|| page.subscriptions.last().map(|s| s.id))
        .flatten();
    let subscriptions = resources(tx, shop, page.subscriptions, true)?;
    let mut writer = csv::Writer::from_writer(Vec::new());
    for subscription in &subscriptions {
        let row = export_row(subscription, subscription.customer.as_deref());
        writer.write_record(&row).map_err(|error| {
            DomainError::Storage(crate::kernel::error::StorageError::other(format!(
                "export row of subscription {}: {error}",
                subscription.id
            )))
        })?;
    }
    let bytes = writer.into_inner().map_err(|error| {
        DomainError::Storage(crate::kernel::error::StorageError::other(format!(
            "export page: {error}"
        )))
    })?;
    Ok((bytes, next))
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEADER: &str = "external_id,email,first_name,last_name,phone,shipping_street1,shipping_city,\
shipping_province_code,shipping_country_code,shipping_zip,subscription_group_id,interval_id,\
order_rrule,line_items,next_order_datetime,subscription_status,base_currency,charged_currency";

    const RULE: &str = "\"DTSTART:20240304T090000Z\nRRULE:FREQ=WEEKLY;BYDAY=MO\"";

    fn row(external_id: &str, line_items: &str, group: &str) -> String {
        format!(
            "{external_id},ada@example.test,Ada,Lovelace,,\"1 Analytical Way, Flat 2\",London,,GB,N1,\
{group},,{RULE},{line_items},,active,USD,USD"
        )
    }

    fn read(rows: &[String]) -> ReadImport {
        let body = format!("{HEADER}\n{}\n", rows.join("\n"));
        read_import(body.as_bytes()).unwrap()
    }

    fn fields(failures: &[ImportFailure]) -> Vec<(u64, &str)> {
        failures
            .iter()
            .map(|f| (f.line, f.field.as_str()))
            .collect()
    }

    fn header_problem(body: &str) -> (String, &'static str) {
        match read_import(body.as_bytes()) {
            Err(DomainError::Invalid(problems)) => (problems[0].field.clone(), problems[0].code),
            other => panic!("expected a header problem, got {other:?}"),
        }
    }

    #[test]
    fn a_valid_row_reads_with_its_cells_and_line_items() {
        let read = read(&[row("ext-1", "v-1:2:1250|v-2:1:300", "")]);
        assert_eq!((read.rows, read.failed.len()), (1, 0));
        let checked = &read.checked[0];
        assert_eq!(checked.row.line, 2);
        assert_eq!(checked.external_id, "ext-1");
        assert_eq!(
            checked.row.get("shipping_street1"),
            Some("1 Analytical Way, Flat 2")
        );
        assert_eq!(
            checked.row.get("order_rrule"),
            Some("DTSTART:20240304T090000Z\nRRULE:FREQ=WEEKLY;BYDAY=MO")
        );
        assert_eq!(checked.row.get("phone"), None);
        assert_eq!(
            checked.line_items,
            vec![
                RowLineItem {
                    variant_id: "v-1".into(),
                    quantity: 2,
                    price_cents: 1250
                },
                RowLineItem {
                    variant_id: "v-2".into(),
                    quantity: 1,
                    price_cents: 300
                },
            ]
        );
    }

    #[test]
    fn lines_count_records_with_the_header_as_one_even_across_quoted_newlines() {
        // Each row's order_rrule spans two physical lines: records, not lines, are counted.
        let read = read(&[
            row("ext-1", "v-1:1:100", ""),
            row("", "v-1:1:100", ""),
            row("ext-3", "v-1:1:100", ""),
        ]);
        assert_eq!(read.rows, 3);
        assert_eq!(fields(&read.failed), vec![(3, "external_id")]);
        let lines: Vec<u64> = read.checked.iter().map(|c| c.row.line).collect();
        assert_eq!(lines, vec![2, 4]);
    }

    #[test]
    fn the_header_must_name_every_required_column_once_and_nothing_unknown() {
        assert_eq!(header_problem(""), ("header".into(), "required"));
        let missing = HEADER.replace(",charged_currency", "");
        assert_eq!(header_problem(&missing), ("header".into(), "required"));
        assert_eq!(
            header_problem(&format!("{HEADER},colour")),
            ("header".into(), "unknown_column")
        );
        assert_eq!(
            header_problem(&format!("{HEADER},email")),
            ("header".into(), "duplicate_column")
        );
        // The payment columns are optional, in any order.
        let body = format!("gateway_name,{HEADER},gateway_customer_id\n");
        assert_eq!(read_import(body.as_bytes()).unwrap().rows, 0);
    }

    #[test]
    fn every_line_item_problem_is_reported_on_line_items() {
        let cases = [
            ("v-1:2", "is not variant_id:quantity:price_cents"),
            ("v-1:2:100:4", "is not variant_id:quantity:price_cents"),
            (":2:100", "has no variant_id"),
            ("v-1:two:100", "not a whole number"),
            ("v-1:2:12.50", "not a whole number of cents"),
            ("v-1:1:100|", "line item 2"),
        ];
        for (items, expected) in cases {
            let read = read(&[row("ext-1", items, "")]);
            assert_eq!(fields(&read.failed), vec![(2, "line_items")], "{items}");
            assert!(
                read.failed[0].message.contains(expected),
                "{items}: {:?}",
                read.failed[0]
            );
        }
        let many = vec!["v:1:1"; 251].join("|");
        let read = read(&[row("ext-1", &many, "")]);
        assert!(read.failed[0].message.contains("more than 250"));
    }

    #[test]
    fn missing_and_malformed_cells_are_each_reported_on_their_column() {
        let read = read(&[row("", "", "x"), row(&"e".repeat(256), "v-1:1:1", "0")]);
        assert_eq!(
            fields(&read.failed),
            vec![
                (2, "external_id"),
                (2, "line_items"),
                (2, "subscription_group_id"),
                (3, "external_id"),
                (3, "subscription_group_id"),
            ]
        );
        assert!(read.checked.is_empty());
    }

    #[test]
    fn a_row_with_the_wrong_number_of_fields_or_bad_utf8_fails_alone() {
        let mut body = format!("{HEADER}\nonly,three,fields\n").into_bytes();
        body.extend_from_slice(
            row("ext-2", "v-1:1:1", "")
                .replacen("Ada", "A\u{e9}", 1)
                .as_bytes(),
        );
        body.extend_from_slice(b"\n");
        let at = body.len();
        body.extend_from_slice(row("ext-3", "v-1:1:1", "").as_bytes());
        // Replace the first byte of the name with a byte that is not UTF-8.
        let name = at + "ext-3,ada@example.test,".len();
        body[name] = 0xff;
        let read = read_import(&body).unwrap();
        assert_eq!(read.rows, 3);
        assert_eq!(fields(&read.failed), vec![(2, "row"), (4, "first_name")]);
        assert_eq!(read.checked[0].row.get("first_name"), Some("A\u{e9}"));
    }

    #[test]
    fn the_create_body_carries_every_cell_under_its_create_subscription_field() {
        let text = format!(
            "{HEADER},gateway_name,gateway_customer_id\n{},stripe,cus_1\n",
            row("ext-1", "v-1:2:1250", "7")
        );
        let read = read_import(text.as_bytes()).unwrap();
        let products = HashMap::from([("v-1".to_string(), "p-1".to_string())]);
        let body = create_body(&read.checked[0], &products);
        assert_eq!(body["customer"]["email"], "ada@example.test");
        let subscription = &body["subscription"];
        assert_eq!(subscription["idempotency_key"], "import:ext-1");
        assert_eq!(subscription["external_id"], "ext-1");
        assert_eq!(
            subscription["shipping_address"]["street1"],
            "1 Analytical Way, Flat 2"
        );
        assert_eq!(subscription["shipping_address"]["country_code"], "GB");
        assert_eq!(
            subscription["line_items"][0],
            json!({"platform_product_id": "p-1", "platform_variant_id": "v-1", "quantity": 2,
                   "price": 1250, "subscription_group_id": 7})
        );
        assert_eq!(
            subscription["payment_details"],
            json!({"gateway_name": "stripe", "gateway_customer_id": "cus_1"})
        );
        assert!(subscription.get("next_order_datetime").is_none());
    }

    #[test]
    fn create_subscription_field_paths_map_onto_csv_columns() {
        let cases = [
            ("customer.email", "email"),
            ("customer.phone", "phone"),
            ("subscription.external_id", "external_id"),
            (
                "subscription.shipping_address.country_code",
                "shipping_country_code",
            ),
            ("subscription.shipping_address.street1", "shipping_street1"),
            ("subscription.billing_address.zip", "shipping_zip"),
            ("subscription.line_items[0].quantity", "line_items"),
            (
                "subscription.line_items[1].subscription_group_id",
                "subscription_group_id",
            ),
            ("subscription.line_items[0].interval_id", "interval_id"),
            ("subscription.line_items", "line_items"),
            ("subscription.order_rrule", "order_rrule"),
            ("subscription.next_order_datetime", "next_order_datetime"),
            ("subscription.subscription_status", "subscription_status"),
            ("subscription.base_to_charged_exchange_rate", "row"),
            ("subscription.payment_details.gateway_name", "gateway_name"),
            ("line_items", "line_items"),
        ];
        for (path, column) in cases {
            assert_eq!(column_of(path), column, "{path}");
        }
        let failures = failures_of(
            5,
            &DomainError::Invalid(vec![FieldError::new(
                "customer.email",
                "invalid",
                "bad email",
            )]),
        );
        assert_eq!(failures, vec![failure(5, "email", "bad email")]);
        let conflict = DomainError::Conflict {
            code: "x",
            message: "clash".into(),
        };
        assert_eq!(failures_of(6, &conflict), vec![failure(6, "row", "clash")]);
    }

    #[test]
    fn the_export_header_is_the_import_header() {
        let header = String::from_utf8(export_header()).unwrap();
        assert_eq!(
            header.trim_end(),
            format!("{HEADER},gateway_name,gateway_customer_id")
        );
        assert_eq!(read_import(header.as_bytes()).unwrap().rows, 0);
    }
}
