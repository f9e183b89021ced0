//! Privacy requests' storage: the customer's personal record, every other text column of the
//! shop that can hold a customer's personal data, and the export of a customer's rows.
//!
//! [`TEXT_COLUMNS`] is the list of those columns; a table or text column added to the schema
//! that can hold a customer's data belongs there (the end-to-end test searches every text
//! column of every table, so a column left out is found).

use diesel::prelude::*;
use diesel::sql_types::{BigInt, Nullable, Text};
use mercer_domain::Timestamp;
use mercer_domain::kernel::error::StoreResult;
use mercer_domain::kernel::ids::{CustomerId, ShopId};
use mercer_domain::privacy::{CellKind, PersonalRecord, PrivacyRepository, TextCell};

use crate::connection::DbConnection;
use crate::repos::StoreTx;
use crate::schema::{customer_addresses, platform_customers, portal_sessions, shops};
use crate::store::storage_error;

/// Which rows of a table are the shop's.
#[derive(Clone, Copy)]
enum Scope {
    /// The table's own `shop_id`.
    Shop,
    /// Rows of the shop's webhook messages (`message_id`).
    ShopMessages,
}

/// Every text column, beside the customer record and their addresses, that can hold a
/// customer's personal data: documents and payloads copied from the platform, checkouts,
/// webhook payloads and their receivers' answers, queued work, free texts.
const TEXT_COLUMNS: &[(&str, &str, Scope)] = &[
    ("platform_orders", "document", Scope::Shop),
    ("inbound_events", "document", Scope::Shop),
    ("inbound_events", "last_error", Scope::Shop),
    ("failed_inbound_events", "document", Scope::Shop),
    ("failed_inbound_events", "error", Scope::Shop),
    ("connector_outbox", "call", Scope::Shop),
    ("connector_outbox", "last_error", Scope::Shop),
    ("sync_runs", "error", Scope::Shop),
    ("checkout_orders", "email", Scope::Shop),
    ("checkout_orders", "document", Scope::Shop),
    ("webhook_messages", "payload", Scope::Shop),
    ("webhook_messages", "subject", Scope::Shop),
    ("webhook_attempts", "response", Scope::ShopMessages),
    ("webhook_attempts", "error", Scope::ShopMessages),
    ("jobs", "payload", Scope::Shop),
    ("jobs", "last_error", Scope::Shop),
    ("audit_log", "subject", Scope::Shop),
    ("subscriptions", "note", Scope::Shop),
    ("subscriptions", "order_note", Scope::Shop),
    ("subscriptions", "last_failure_reason", Scope::Shop),
    ("subscriptions", "last_failure_message", Scope::Shop),
    ("subscription_orders", "failure_reason", Scope::Shop),
    ("subscription_line_items", "document", Scope::Shop),
    ("subscription_status_logs", "reason", Scope::Shop),
    ("subscription_status_logs", "actor_name", Scope::Shop),
    (
        "subscription_status_logs",
        "cancellation_comment",
        Scope::Shop,
    ),
    ("box_selections", "line_items", Scope::Shop),
];

/// A bound value of a statement written with `?` marks.
enum Bind {
    Integer(i64),
    Text(String),
}

#[derive(QueryableByName)]
struct CellRow {
    #[diesel(sql_type = BigInt)]
    id: i64,
    #[diesel(sql_type = Nullable<Text>)]
    text: Option<String>,
}

#[derive(QueryableByName)]
struct TextRow {
    #[diesel(sql_type = Nullable<Text>)]
    text: Option<String>,
}

/// `sql` with PostgreSQL's numbered marks for its `?` marks.
fn numbered(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len() + 16);
    let mut n = 0;
    for c in sql.chars() {
        if c == '?' {
            n += 1;
            out.push_str(&format!("${n}"));
        } else {
            out.push(c);
        }
    }
    out
}

/// Runs `sql` (with `?` marks) with its binds on either backend: loads rows of `$row`, or
/// executes it with `execute`.
macro_rules! run_sql {
    ($conn:expr, $sql:expr, $binds:expr, $finish:ident $(::<$row:ty>)?) => {{
        macro_rules! run {
            ($c:expr, $backend:ty, $text:expr) => {{
                let mut statement = diesel::sql_query($text).into_boxed::<$backend>();
                for bind in $binds {
                    statement = match bind {
                        Bind::Integer(value) => statement.bind::<BigInt, _>(*value),
                        Bind::Text(value) => statement.bind::<Text, _>(value.clone()),
                    };
                }
                statement.$finish $(::<$row>)? ($c)
            }};
        }
        match $conn {
            DbConnection::Sqlite(c) => run!(c, diesel::sqlite::Sqlite, $sql.to_string()),
            DbConnection::Pg(c) => run!(c, diesel::pg::Pg, numbered(&$sql)),
        }
        .map_err(storage_error)
    }};
}

fn scope_sql(scope: Scope) -> &'static str {
    match scope {
        Scope::Shop => "shop_id = ?",
        Scope::ShopMessages => "message_id IN (SELECT id FROM webhook_messages WHERE shop_id = ?)",
    }
}

impl StoreTx<'_> {
    fn load_cells(&mut self, sql: &str, binds: &[Bind]) -> StoreResult<Vec<CellRow>> {
        run_sql!(&mut *self.conn, sql, binds, load::<CellRow>)
    }

    /// The customer's own checkouts (by email) and platform orders (by platform id).
    fn owned_cells(
        &mut self,
        shop_id: ShopId,
        email: &str,
        platform_id: Option<&str>,
    ) -> StoreResult<Vec<TextCell>> {
        let mut cells = Vec::new();
        let mut owned = |table, column, rows: Vec<CellRow>| {
            for row in rows {
                if let Some(text) = row.text {
                    let kind = CellKind::Owned;
                    cells.push(TextCell {
                        table,
                        column,
                        id: row.id,
                        text,
                        kind,
                    });
                }
            }
        };
        if !email.is_empty() {
            let binds = [Bind::Integer(shop_id.0), Bind::Text(email.to_string())];
            for column in ["email", "document"] {
                let sql = format!(
                    "SELECT id, {column} AS text FROM checkout_orders \
                     WHERE shop_id = ? AND LOWER(email) = ?"
                );
                owned("checkout_orders", column, self.load_cells(&sql, &binds)?);
            }
        }
        if let Some(platform_id) = platform_id {
            let binds = [
                Bind::Integer(shop_id.0),
                Bind::Text(platform_id.to_string()),
            ];
            let sql = "SELECT id, document AS text FROM platform_orders \
                       WHERE shop_id = ? AND platform_customer_id = ?";
            owned("platform_orders", "document", self.load_cells(sql, &binds)?);
        }
        Ok(cells)
    }
}

#[derive(Queryable, Selectable)]
#[diesel(table_name = platform_customers)]
struct CustomerRow {
    id: i64,
    platform_id: Option<String>,
    email: String,
    first_name: String,
    last_name: String,
    phone: String,
    document: Option<String>,
    pii_redacted_at: Option<i64>,
}

impl PrivacyRepository for StoreTx<'_> {
    fn personal_record(
        &mut self,
        shop_id: ShopId,
        customer: CustomerId,
    ) -> StoreResult<Option<PersonalRecord>> {
        let Some(row) = platform_customers::table
            .filter(platform_customers::shop_id.eq(shop_id.0))
            .filter(platform_customers::id.eq(customer.0))
            .select(CustomerRow::as_select())
            .first(self.conn)
            .optional()
            .map_err(storage_error)?
        else {
            return Ok(None);
        };
        let addresses = customer_addresses::table
            .filter(customer_addresses::customer_id.eq(row.id))
            .order(customer_addresses::id)
            .select((customer_addresses::id, customer_addresses::document))
            .load::<(i64, String)>(self.conn)
            .map_err(storage_error)?;
        Ok(Some(PersonalRecord {
            customer_id: CustomerId(row.id),
            platform_id: row.platform_id,
            email: row.email,
            first_name: row.first_name,
            last_name: row.last_name,
            phone: row.phone,
            pii_redacted_at: row.pii_redacted_at.map(Timestamp::from_micros),
            document: row.document,
            addresses,
        }))
    }

    fn cells_mentioning(
        &mut self,
        shop_id: ShopId,
        email: &str,
        platform_id: Option<&str>,
        needles: &[String],
    ) -> StoreResult<Vec<TextCell>> {
        let mut cells = self.owned_cells(shop_id, email, platform_id)?;
        if needles.is_empty() {
            return Ok(cells);
        }
        for &(table, column, scope) in TEXT_COLUMNS {
            let likes = vec![format!("LOWER({column}) LIKE ?"); needles.len()].join(" OR ");
            let sql = format!(
                "SELECT id, {column} AS text FROM {table} WHERE {} AND ({likes})",
                scope_sql(scope)
            );
            let mut binds = vec![Bind::Integer(shop_id.0)];
            binds.extend(needles.iter().map(|n| Bind::Text(format!("%{n}%"))));
            for row in self.load_cells(&sql, &binds)? {
                let taken = |c: &TextCell| c.table == table && c.column == column && c.id == row.id;
                if let Some(text) = row.text
                    && !cells.iter().any(taken)
                {
                    let kind = CellKind::Mentions;
                    cells.push(TextCell {
                        table,
                        column,
                        id: row.id,
                        text,
                        kind,
                    });
                }
            }
        }
        Ok(cells)
    }

    fn rewrite_cell(&mut self, cell: &TextCell) -> StoreResult<()> {
        // Only the names of `TEXT_COLUMNS` and `owned_cells` reach here, never a client's text.
        let known = TEXT_COLUMNS
            .iter()
            .any(|&(table, column, _)| table == cell.table && column == cell.column);
        if !known {
            return Err(mercer_domain::StorageError::other(
                "not a personal text column",
            ));
        }
        let sql = format!("UPDATE {} SET {} = ? WHERE id = ?", cell.table, cell.column);
        let binds = [Bind::Text(cell.text.clone()), Bind::Integer(cell.id)];
        run_sql!(&mut *self.conn, sql, &binds, execute)?;
        Ok(())
    }

    fn erase_customer(
        &mut self,
        shop_id: ShopId,
        erased: &PersonalRecord,
        now: Timestamp,
    ) -> StoreResult<()> {
        let id = erased.customer_id.0;
        diesel::update(
            platform_customers::table
                .filter(platform_customers::shop_id.eq(shop_id.0))
                .filter(platform_customers::id.eq(id)),
        )
        .set((
            platform_customers::email.eq(&erased.email),
            platform_customers::first_name.eq(&erased.first_name),
            platform_customers::last_name.eq(&erased.last_name),
            platform_customers::phone.eq(&erased.phone),
            platform_customers::notes.eq(None::<String>),
            platform_customers::document.eq(&erased.document),
            platform_customers::pii_redacted_at.eq(now.as_micros()),
        ))
        .execute(self.conn)
        .map_err(storage_error)?;
        for (address, document) in &erased.addresses {
            diesel::update(
                customer_addresses::table
                    .filter(customer_addresses::customer_id.eq(id))
                    .filter(customer_addresses::id.eq(address)),
            )
            .set(customer_addresses::document.eq(document))
            .execute(self.conn)
            .map_err(storage_error)?;
        }
        let sql = "UPDATE subscriptions SET note = NULL, order_note = NULL \
                   WHERE shop_id = ? AND customer_id = ?";
        let binds = [Bind::Integer(shop_id.0), Bind::Integer(id)];
        run_sql!(&mut *self.conn, sql, &binds, execute)?;
        if let Some(platform_id) = &erased.platform_id {
            diesel::delete(
                portal_sessions::table
                    .filter(portal_sessions::shop_id.eq(shop_id.0))
                    .filter(portal_sessions::platform_customer_id.eq(platform_id)),
            )
            .execute(self.conn)
            .map_err(storage_error)?;
        }
        Ok(())
    }

    fn shop_customer_ids(&mut self, shop_id: ShopId) -> StoreResult<Vec<CustomerId>> {
        Ok(platform_customers::table
            .filter(platform_customers::shop_id.eq(shop_id.0))
            .order(platform_customers::id)
            .select(platform_customers::id)
            .load::<i64>(self.conn)
            .map_err(storage_error)?
            .into_iter()
            .map(CustomerId)
            .collect())
    }

    fn mark_shop_redacted(&mut self, shop_id: ShopId, now: Timestamp) -> StoreResult<()> {
        diesel::update(
            shops::table
                .find(shop_id.0)
                .filter(shops::pii_redacted_at.is_null()),
        )
        .set(shops::pii_redacted_at.eq(now.as_micros()))
        .execute(self.conn)
        .map_err(storage_error)?;
        Ok(())
    }

    fn customer_rows(
        &mut self,
        shop_id: ShopId,
        record: &PersonalRecord,
    ) -> StoreResult<Vec<(&'static str, Vec<serde_json::Value>)>> {
        let (shop, customer) = (shop_id.0, record.customer_id.0);
        let platform_id = record.platform_id.clone().unwrap_or_default();
        let email = record.email.trim().to_lowercase();
        let of_subscriptions = "subscription_id IN (SELECT id FROM subscriptions \
                                WHERE shop_id = ? AND customer_id = ?)";
        let by_customer = || vec![Bind::Integer(shop), Bind::Integer(customer)];
        let by_platform_id = || vec![Bind::Integer(shop), Bind::Text(platform_id.clone())];
        let queries: Vec<(&'static str, &str, Vec<Bind>)> = vec![
            (
                "platform_customers",
                "shop_id = ? AND id = ?",
                by_customer(),
            ),
            (
                "customer_addresses",
                "shop_id = ? AND customer_id = ?",
                by_customer(),
            ),
            (
                "customer_labels",
                "shop_id = ? AND customer_id = ?",
                by_customer(),
            ),
            (
                "subscriptions",
                "shop_id = ? AND customer_id = ?",
                by_customer(),
            ),
            ("subscription_line_items", of_subscriptions, by_customer()),
            ("subscription_status_logs", of_subscriptions, by_customer()),
            ("subscription_orders", of_subscriptions, by_customer()),
            (
                "box_selections",
                "shop_id = ? AND platform_customer_id = ?",
                by_platform_id(),
            ),
            (
                "platform_orders",
                "shop_id = ? AND platform_customer_id = ?",
                by_platform_id(),
            ),
            (
                "checkout_orders",
                "shop_id = ? AND LOWER(email) = ?",
                vec![Bind::Integer(shop), Bind::Text(email.clone())],
            ),
            (
                "webhook_messages",
                "shop_id = ? AND LOWER(payload) LIKE ?",
                vec![Bind::Integer(shop), Bind::Text(format!("%{email}%"))],
            ),
        ];
        let mut tables = Vec::with_capacity(queries.len());
        for (table, condition, binds) in queries {
            tables.push((table, self.rows_as_json(table, condition, &binds)?));
        }
        Ok(tables)
    }
}

impl StoreTx<'_> {
    /// The rows of `table` meeting `condition`, each as a JSON object of its columns; a text
    /// column holding a JSON document is included as that document.
    fn rows_as_json(
        &mut self,
        table: &str,
        condition: &str,
        binds: &[Bind],
    ) -> StoreResult<Vec<serde_json::Value>> {
        let sql = match &mut *self.conn {
            DbConnection::Pg(_) => {
                format!(
                    "SELECT row_to_json(t)::text AS text FROM {table} t WHERE {condition} ORDER BY id"
                )
            }
            DbConnection::Sqlite(_) => {
                // Each column with its declared type: SQLite keeps booleans as 0 and 1, which
                // the export gives as JSON booleans, as PostgreSQL's `row_to_json` does.
                let columns_sql = "SELECT name || ':' || type AS text FROM pragma_table_info(?)";
                let names: Vec<TextRow> = run_sql!(
                    &mut *self.conn,
                    columns_sql,
                    &[Bind::Text(table.to_string())],
                    load::<TextRow>
                )?;
                let pairs: Vec<String> = (names.into_iter().filter_map(|row| row.text))
                    .filter_map(|column| {
                        let (name, kind) = column.split_once(':')?;
                        Some(if kind.eq_ignore_ascii_case("BOOLEAN") {
                            format!(
                                "'{name}', CASE WHEN \"{name}\" IS NULL THEN NULL \
                                 WHEN \"{name}\" THEN json('true') ELSE json('false') END"
                            )
                        } else {
                            format!("'{name}', \"{name}\"")
                        })
                    })
                    .collect();
                format!(
                    "SELECT json_object({}) AS text FROM {table} WHERE {condition} ORDER BY id",
                    pairs.join(", ")
                )
            }
        };
        let rows: Vec<TextRow> = run_sql!(&mut *self.conn, sql, binds, load::<TextRow>)?;
        Ok(rows
            .into_iter()
            .filter_map(|row| row.text)
            .filter_map(|text| serde_json::from_str::<serde_json::Value>(&text).ok())
            .map(expand_documents)
            .collect())
    }
}

/// A row whose text columns hold JSON documents, with those documents as JSON.
fn expand_documents(mut row: serde_json::Value) -> serde_json::Value {
    if let serde_json::Value::Object(map) = &mut row {
        for value in map.values_mut() {
            if let serde_json::Value::String(text) = value
                && (text.starts_with('{') || text.starts_with('['))
                && let Ok(document) = serde_json::from_str::<serde_json::Value>(text)
            {
                *value = document;
            }
        }
    }
    row
}
