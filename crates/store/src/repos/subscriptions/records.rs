//! Subscriptions, their line items and status log.
//!
//! A subscription row is declared in several parts (`crate::schema`, at `subscriptions`), as
//! diesel holds at most 16 columns a table: a new one is an INSERT of `subscriptions` and one
//! UPDATE of the whole row in plain SQL, and reads join the row to its other parts by id
//! through the aliases below.

use mercer_domain::kernel::ids::ShopId;
use std::collections::HashMap;

use diesel::prelude::*;
use mercer_domain::kernel::error::StoreResult;
use mercer_domain::kernel::filter::{FilterOp, FilterValue};
use mercer_domain::kernel::ids::{AddressId, CustomerId, LineItemId, StatusLogId, SubscriptionId};
use mercer_domain::subscriptions::cancellation::Cancellation;
use mercer_domain::subscriptions::pausing::AutoResume;
use mercer_domain::subscriptions::query::{FilterField, ListQuery};
use mercer_domain::subscriptions::repository::{
    StoredSubscription, SubscriptionPage, SubscriptionRepository, SubscriptionState,
};
use mercer_domain::subscriptions::resources::{
    Actor, ActorType, Cents, CurrencyCode, FailureDetails, PaymentExpiry, ShippingLine, StatusLog,
    StatusLogMetadata, SubscriptionLineItem, SubscriptionStatus,
};
use mercer_domain::subscriptions::states::NewStatusLog;
use mercer_domain::{StorageError, Timestamp};

use super::{corrupt, micros, offset, time};
use crate::connection::{DbConnection, KeepPrepared, on_backend, statement_sites};
use crate::repos::StoreTx;
use crate::schema::{
    subscription_details, subscription_line_items, subscription_resumptions, subscription_schedule,
    subscription_status_logs, subscriptions,
};
use crate::store::storage_error;

statement_sites!(SaveSubscription, SaveWithStatusLog, InsertStatusLog);

// The other parts of the row under names of their own in the SQL (`"subscriptions" AS
// "schedule"`), so the row can be joined to them by id.
diesel::alias!(
    subscription_schedule as schedule: ScheduleAlias,
    subscription_details as details: DetailsAlias,
    subscription_resumptions as resumption: ResumptionAlias,
);

#[derive(Queryable, Selectable)]
#[diesel(table_name = subscriptions)]
struct SubscriptionRow {
    id: i64,
    shop_id: i64,
    customer_id: i64,
    billing_address_id: i64,
    shipping_address_id: i64,
    subscription_status: String,
    payment_rrule: String,
    payment_rrule_text: String,
    order_rrule: String,
    order_rrule_text: String,
    charged_currency: String,
    base_currency: String,
    base_to_charged_exchange_rate: f64,
    latest_status_log_id: Option<i64>,
    created_at: i64,
    updated_at: i64,
}

/// `subscription_schedule`'s columns but the key, in the order of [`ScheduleRow`].
macro_rules! schedule_columns {
    () => {{
        use subscription_schedule as t;
        (
            t::orders_processed,
            t::current_retries,
            t::next_order_datetime,
            t::next_payment_datetime,
            t::next_processing_datetime,
            t::last_payment_datetime,
            t::last_order_datetime,
            t::last_processed_datetime,
            t::status_changed_at,
            t::placed_at,
            t::skipped_dates,
            t::percent_discount,
        )
    }};
}

#[derive(Queryable)]
struct ScheduleRow {
    orders_processed: i64,
    current_retries: i64,
    next_order_datetime: Option<i64>,
    next_payment_datetime: Option<i64>,
    next_processing_datetime: Option<i64>,
    last_payment_datetime: Option<i64>,
    last_order_datetime: Option<i64>,
    last_processed_datetime: Option<i64>,
    status_changed_at: Option<i64>,
    placed_at: Option<i64>,
    skipped_dates: String,
    percent_discount: f64,
}

/// `subscription_details`' columns but the key, in the order of [`DetailsRow`].
macro_rules! details_columns {
    () => {{
        use subscription_details as t;
        (
            t::external_id,
            t::idempotency_key,
            t::idempotency_fingerprint,
            t::payment_method_token,
            t::payment_gateway_public_id,
            t::payment_gateway_customer_id,
            t::discount_code,
            t::shipping_lines,
            t::last_failure_code,
            t::last_failure_reason,
            t::last_failure_message,
            t::note,
            t::order_note,
            t::payment_method_expires_at,
        )
    }};
}

#[derive(Queryable)]
struct DetailsRow {
    external_id: Option<String>,
    idempotency_key: Option<String>,
    idempotency_fingerprint: Option<String>,
    payment_method_token: Option<String>,
    payment_gateway_public_id: Option<String>,
    payment_gateway_customer_id: Option<String>,
    discount_code: Option<String>,
    shipping_lines: String,
    last_failure_code: Option<String>,
    last_failure_reason: Option<String>,
    last_failure_message: Option<String>,
    note: Option<String>,
    order_note: Option<String>,
    payment_method_expires_at: Option<i64>,
}

/// `subscription_resumptions`' `resume_on` and `resume_at`.
type ResumptionRow = (Option<String>, Option<i64>);

type FullRow = (SubscriptionRow, ScheduleRow, DetailsRow, ResumptionRow);

/// The whole subscription row: `subscriptions` joined by id to its other parts.
macro_rules! whole_rows {
    () => {
        subscriptions::table
            .inner_join(
                schedule.on(schedule
                    .field(subscription_schedule::id)
                    .eq(subscriptions::id)),
            )
            .inner_join(
                details.on(details
                    .field(subscription_details::id)
                    .eq(subscriptions::id)),
            )
            .inner_join(
                resumption.on(resumption
                    .field(subscription_resumptions::id)
                    .eq(subscriptions::id)),
            )
    };
}

/// What a query of whole rows selects, as a [`FullRow`].
macro_rules! whole_row_columns {
    () => {
        (
            SubscriptionRow::as_select(),
            schedule.fields(schedule_columns!()),
            details.fields(details_columns!()),
            resumption.fields((
                subscription_resumptions::resume_on,
                subscription_resumptions::resume_at,
            )),
        )
    };
}

#[derive(Queryable, Selectable)]
#[diesel(table_name = subscription_line_items)]
pub(crate) struct LineItemRow {
    id: i64,
    subscription_id: i64,
    platform_product_id: String,
    platform_variant_id: String,
    quantity: i64,
    price: i64,
    document: String,
    created_at: i64,
    updated_at: i64,
}

impl LineItemRow {
    /// The stored document, with the columns and the ids the store gave.
    pub(crate) fn into_line_item(self) -> StoreResult<SubscriptionLineItem> {
        let mut item: SubscriptionLineItem = serde_json::from_str(&self.document)
            .map_err(|error| corrupt("subscription line item", self.id, error))?;
        let (id, subscription_id) = (LineItemId(self.id), SubscriptionId(self.subscription_id));
        item.id = id;
        item.subscription_id = subscription_id;
        item.platform_product_id = self.platform_product_id;
        item.platform_variant_id = self.platform_variant_id;
        item.quantity = self.quantity;
        item.price = Cents(self.price);
        item.created_at = time(self.created_at);
        item.updated_at = time(self.updated_at);
        for discount in &mut item.discounts {
            discount.subscription_line_item_id = id;
        }
        if let Some(prepaid) = &mut item.prepaid_metadata {
            prepaid.line_item_id = id;
        }
        for attribute in &mut item.line_item_attributes {
            attribute.line_item_id = id;
            attribute.subscription_id = subscription_id;
        }
        Ok(item)
    }
}

#[derive(Queryable, Selectable)]
#[diesel(table_name = subscription_status_logs)]
struct StatusLogRow {
    id: i64,
    subscription_id: i64,
    subscription_status: String,
    reason: String,
    actor_type: String,
    actor_id: i64,
    actor_name: String,
    created_at: i64,
    cancellation_reason: Option<String>,
    cancellation_comment: Option<String>,
}

/// An actor's type as stored: its name in answers.
fn actor_type_name(kind: ActorType) -> StoreResult<String> {
    match serde_json::to_value(kind) {
        Ok(serde_json::Value::String(name)) => Ok(name),
        _ => Err(StorageError::other(format!(
            "actor type {kind:?} has no name"
        ))),
    }
}

impl StatusLogRow {
    fn into_status_log(self) -> StoreResult<StatusLog> {
        let id = self.id;
        let subscription_status = SubscriptionStatus::parse(&self.subscription_status)
            .ok_or_else(|| corrupt("status log", id, "subscription_status"))?;
        let kind: ActorType = serde_json::from_value(serde_json::Value::String(self.actor_type))
            .map_err(|error| corrupt("status log", id, error))?;
        // Kept when the canceller gave a reason or a comment.
        let cancellation = (self.cancellation_reason.is_some()
            || self.cancellation_comment.is_some())
        .then_some(Cancellation {
            reason: self.cancellation_reason,
            comment: self.cancellation_comment,
        });
        Ok(StatusLog {
            id: StatusLogId(id),
            subscription_status,
            reason: self.reason,
            metadata: StatusLogMetadata {
                user: Actor {
                    kind,
                    id: self.actor_id,
                    name: self.actor_name,
                },
                cancellation,
            },
            created_at: time(self.created_at),
            subscription_id: SubscriptionId(self.subscription_id),
        })
    }
}

fn currency(text: &str, id: i64, column: &str) -> StoreResult<CurrencyCode> {
    CurrencyCode::parse(text).ok_or_else(|| corrupt("subscription", id, column))
}

/// A subscription from its row's parts (without its line items and status log), and the id of
/// its latest status log entry.
fn subscription_of(
    (row, schedule_row, details_row, (resume_on, resume_at)): FullRow,
) -> StoreResult<(StoredSubscription, Option<i64>)> {
    let id = row.id;
    let resume_on = match (resume_on, resume_at) {
        (Some(on), Some(at)) => Some(
            AutoResume::read(&on, time(at))
                .ok_or_else(|| corrupt("subscription", id, "resume_on"))?,
        ),
        _ => None,
    };
    let subscription_status = SubscriptionStatus::parse(&row.subscription_status)
        .ok_or_else(|| corrupt("subscription", id, "subscription_status"))?;
    let shipping_lines: Vec<ShippingLine> = serde_json::from_str(&details_row.shipping_lines)
        .map_err(|error| corrupt("subscription", id, format!("shipping_lines: {error}")))?;
    let skipped_dates: Vec<i64> = serde_json::from_str(&schedule_row.skipped_dates)
        .map_err(|error| corrupt("subscription", id, format!("skipped_dates: {error}")))?;
    let state = SubscriptionState {
        customer_id: CustomerId(row.customer_id),
        billing_address_id: AddressId(row.billing_address_id),
        shipping_address_id: AddressId(row.shipping_address_id),
        orders_processed: schedule_row.orders_processed,
        current_retries: schedule_row.current_retries,
        external_id: details_row.external_id,
        idempotency_key: details_row.idempotency_key,
        idempotency_fingerprint: details_row.idempotency_fingerprint,
        next_order_datetime: schedule_row.next_order_datetime.map(time),
        next_payment_datetime: schedule_row.next_payment_datetime.map(time),
        next_processing_datetime: schedule_row.next_processing_datetime.map(time),
        last_payment_datetime: schedule_row.last_payment_datetime.map(time),
        last_order_datetime: schedule_row.last_order_datetime.map(time),
        last_processed_datetime: schedule_row.last_processed_datetime.map(time),
        status_changed_at: schedule_row.status_changed_at.map(time),
        placed_at: schedule_row.placed_at.map(time),
        updated_at: time(row.updated_at),
        subscription_status,
        payment_method_token: details_row.payment_method_token,
        payment_gateway_public_id: details_row.payment_gateway_public_id,
        payment_gateway_customer_id: details_row.payment_gateway_customer_id,
        payment_method_expires_at: match details_row.payment_method_expires_at {
            None => None,
            Some(micros) => Some(
                PaymentExpiry::from_expires_at(time(micros))
                    .ok_or_else(|| corrupt("subscription", id, "payment_method_expires_at"))?,
            ),
        },
        payment_rrule: row.payment_rrule,
        payment_rrule_text: row.payment_rrule_text,
        order_rrule: row.order_rrule,
        order_rrule_text: row.order_rrule_text,
        charged_currency: currency(&row.charged_currency, id, "charged_currency")?,
        base_currency: currency(&row.base_currency, id, "base_currency")?,
        base_to_charged_exchange_rate: row.base_to_charged_exchange_rate,
        percent_discount: schedule_row.percent_discount,
        discount_code: details_row.discount_code,
        shipping_lines,
        last_failure_code: details_row.last_failure_code,
        last_failure_reason: details_row.last_failure_reason,
        last_failure_details: details_row
            .last_failure_message
            .map(|message| FailureDetails { message }),
        skipped_dates: skipped_dates.into_iter().map(time).collect(),
        note: details_row.note,
        order_note: details_row.order_note,
        resume_on,
    };
    let subscription = StoredSubscription {
        id: SubscriptionId(id),
        shop_id: ShopId(row.shop_id),
        created_at: time(row.created_at),
        state,
        line_items: Vec::new(),
        latest_status_log: None,
    };
    Ok((subscription, row.latest_status_log_id))
}

/// Whole rows as stored subscriptions, in their order, with their line items (one query) and
/// latest status log entries (one query). The rows are the shop's, read by the caller.
fn assemble(conn: &mut DbConnection, rows: Vec<FullRow>) -> StoreResult<Vec<StoredSubscription>> {
    if rows.is_empty() {
        return Ok(Vec::new());
    }
    let ids: Vec<i64> = rows.iter().map(|(row, ..)| row.id).collect();
    let log_ids: Vec<i64> = rows
        .iter()
        .filter_map(|(row, ..)| row.latest_status_log_id)
        .collect();
    let mut line_items: HashMap<i64, Vec<SubscriptionLineItem>> = HashMap::new();
    // By subscription id alone: the ids are of the shop's subscriptions, read above. A
    // condition on shop_id too let PostgreSQL, without statistics on the table (autovacuum
    // off, or a table filled faster than it analyzes), AND in a scan of every line item of the
    // shop through the group indexes: 4 ms a read at 120,000 line items, three quarters of an
    // import's time on the server (docs/benchmarks.md).
    // One id as `= $1`: PostgreSQL plans `= ANY($1)` anew at every call (its generic plan
    // guesses a longer array), which costs more than the read; a placement reads one.
    let items = subscription_line_items::table.into_boxed();
    let items = match ids.as_slice() {
        [one] => items.filter(subscription_line_items::subscription_id.eq(*one)),
        _ => items.filter(subscription_line_items::subscription_id.eq_any(&ids)),
    };
    let item_rows: Vec<LineItemRow> = items
        .order(subscription_line_items::id.asc())
        .select(LineItemRow::as_select())
        .load(conn)
        .map_err(storage_error)?;
    for item_row in item_rows {
        let subscription_id = item_row.subscription_id;
        line_items
            .entry(subscription_id)
            .or_default()
            .push(item_row.into_line_item()?);
    }
    let mut logs: HashMap<i64, StatusLog> = HashMap::new();
    if !log_ids.is_empty() {
        let logs_read = subscription_status_logs::table.into_boxed();
        let logs_read = match log_ids.as_slice() {
            [one] => logs_read.filter(subscription_status_logs::id.eq(*one)),
            _ => logs_read.filter(subscription_status_logs::id.eq_any(&log_ids)),
        };
        let log_rows: Vec<StatusLogRow> = logs_read
            .select(StatusLogRow::as_select())
            .load(conn)
            .map_err(storage_error)?;
        for log_row in log_rows {
            logs.insert(log_row.id, log_row.into_status_log()?);
        }
    }
    rows.into_iter()
        .map(|full| {
            let (mut subscription, log_id) = subscription_of(full)?;
            subscription.line_items = line_items.remove(&subscription.id.0).unwrap_or_default();
            subscription.latest_status_log = log_id.and_then(|log_id| logs.remove(&log_id));
            Ok(subscription)
        })
        .collect()
}

fn json<T: serde::Serialize + ?Sized>(value: &T, what: &str) -> StoreResult<String> {
    serde_json::to_string(value)
        .map_err(|error| StorageError::other(format!("{what} as JSON: {error}")))
}

/// What `UPDATE subscriptions SET` writes of a state: every column but the key, shop, creation
/// time and latest status log entry, as `$1`…`$40`.
macro_rules! state_columns {
    () => {
        "customer_id = $1, billing_address_id = $2, shipping_address_id = $3, \
         subscription_status = $4, payment_rrule = $5, payment_rrule_text = $6, \
         order_rrule = $7, order_rrule_text = $8, charged_currency = $9, base_currency = $10, \
         base_to_charged_exchange_rate = $11, updated_at = $12, \
         orders_processed = $13, current_retries = $14, next_order_datetime = $15, \
         next_payment_datetime = $16, next_processing_datetime = $17, \
         last_payment_datetime = $18, last_order_datetime = $19, last_processed_datetime = $20, \
         status_changed_at = $21, placed_at = $22, skipped_dates = $23, percent_discount = $24, \
         external_id = $25, idempotency_key = $26, idempotency_fingerprint = $27, \
         payment_method_token = $28, payment_gateway_public_id = $29, \
         payment_gateway_customer_id = $30, discount_code = $31, shipping_lines = $32, \
         last_failure_code = $33, last_failure_reason = $34, last_failure_message = $35, \
         note = $36, order_note = $37, payment_method_expires_at = $38, resume_on = $39, \
         resume_at = $40"
    };
}

/// A subscription's state in one UPDATE of its row, the id as `$41` and the shop as `$42`. One
/// statement rather than one per declaration of the row: each UPDATE of a PostgreSQL row
/// writes a new version of all of it, and a renewal saves every subscription twice.
const SAVE_SQL: &str = concat!(
    "UPDATE subscriptions SET ",
    state_columns!(),
    " WHERE id = $41 AND shop_id = $42 RETURNING id"
);

/// [`SAVE_SQL`] and a status log entry (`$43`…`$50`) made the row's latest, in one statement
/// (PostgreSQL): the row gets one new version, not two.
const SAVE_WITH_LOG_SQL: &str = concat!(
    "WITH log AS (INSERT INTO subscription_status_logs (shop_id, subscription_id, \
     subscription_status, reason, actor_type, actor_id, actor_name, created_at, \
     cancellation_reason, cancellation_comment) \
     VALUES ($42, $41, $43, $44, $45, $46, $47, $48, $49, $50) RETURNING id), \
     saved AS (UPDATE subscriptions SET ",
    state_columns!(),
    ", latest_status_log_id = (SELECT id FROM log) WHERE id = $41 AND shop_id = $42 \
     RETURNING id) SELECT id FROM log"
);

/// The values of [`state_columns!`] that are not the state's fields as they are.
struct RowValues<'a> {
    skipped: String,
    shipping_lines: String,
    failure_message: Option<&'a str>,
    expires_at: Option<i64>,
    resume_on: Option<String>,
    resume_at: Option<i64>,
}

impl<'a> RowValues<'a> {
    fn of(state: &'a SubscriptionState) -> StoreResult<RowValues<'a>> {
        let skipped: Vec<i64> = state
            .skipped_dates
            .iter()
            .map(|at| at.as_micros())
            .collect();
        Ok(RowValues {
            skipped: json(&skipped, "skipped dates")?,
            shipping_lines: json(&state.shipping_lines, "shipping lines")?,
            failure_message: state
                .last_failure_details
                .as_ref()
                .map(|failure| failure.message.as_str()),
            expires_at: state
                .payment_method_expires_at
                .map(|expiry| expiry.expires_at().as_micros()),
            resume_on: state.resume_on.map(|resume| resume.day()),
            resume_at: state.resume_on.map(|resume| resume.at.as_micros()),
        })
    }
}

/// Binds `$1`…`$42` of [`SAVE_SQL`] (and [`SAVE_WITH_LOG_SQL`]) to a boxed SQL query.
macro_rules! bind_row {
    ($query:expr, $state:expr, $values:expr, $id:expr, $shop_id:expr) => {{
        use diesel::sql_types::{BigInt, Double, Nullable, Text};
        let (state, values): (&SubscriptionState, &RowValues<'_>) = ($state, $values);
        $query
            .bind::<BigInt, _>(state.customer_id.0)
            .bind::<BigInt, _>(state.billing_address_id.0)
            .bind::<BigInt, _>(state.shipping_address_id.0)
            .bind::<Text, _>(state.subscription_status.as_str())
            .bind::<Text, _>(state.payment_rrule.as_str())
            .bind::<Text, _>(state.payment_rrule_text.as_str())
            .bind::<Text, _>(state.order_rrule.as_str())
            .bind::<Text, _>(state.order_rrule_text.as_str())
            .bind::<Text, _>(state.charged_currency.as_str())
            .bind::<Text, _>(state.base_currency.as_str())
            .bind::<Double, _>(state.base_to_charged_exchange_rate)
            .bind::<BigInt, _>(state.updated_at.as_micros())
            .bind::<BigInt, _>(state.orders_processed)
            .bind::<BigInt, _>(state.current_retries)
            .bind::<Nullable<BigInt>, _>(micros(state.next_order_datetime))
            .bind::<Nullable<BigInt>, _>(micros(state.next_payment_datetime))
            .bind::<Nullable<BigInt>, _>(micros(state.next_processing_datetime))
            .bind::<Nullable<BigInt>, _>(micros(state.last_payment_datetime))
            .bind::<Nullable<BigInt>, _>(micros(state.last_order_datetime))
            .bind::<Nullable<BigInt>, _>(micros(state.last_processed_datetime))
            .bind::<Nullable<BigInt>, _>(micros(state.status_changed_at))
            .bind::<Nullable<BigInt>, _>(micros(state.placed_at))
            .bind::<Text, _>(values.skipped.as_str())
            .bind::<Double, _>(state.percent_discount)
            .bind::<Nullable<Text>, _>(state.external_id.as_deref())
            .bind::<Nullable<Text>, _>(state.idempotency_key.as_deref())
            .bind::<Nullable<Text>, _>(state.idempotency_fingerprint.as_deref())
            .bind::<Nullable<Text>, _>(state.payment_method_token.as_deref())
            .bind::<Nullable<Text>, _>(state.payment_gateway_public_id.as_deref())
            .bind::<Nullable<Text>, _>(state.payment_gateway_customer_id.as_deref())
            .bind::<Nullable<Text>, _>(state.discount_code.as_deref())
            .bind::<Text, _>(values.shipping_lines.as_str())
            .bind::<Nullable<Text>, _>(state.last_failure_code.as_deref())
            .bind::<Nullable<Text>, _>(state.last_failure_reason.as_deref())
            .bind::<Nullable<Text>, _>(values.failure_message)
            .bind::<Nullable<Text>, _>(state.note.as_deref())
            .bind::<Nullable<Text>, _>(state.order_note.as_deref())
            .bind::<Nullable<BigInt>, _>(values.expires_at)
            .bind::<Nullable<Text>, _>(values.resume_on.as_deref())
            .bind::<Nullable<BigInt>, _>(values.resume_at)
            .bind::<BigInt, _>($id)
            .bind::<BigInt, _>($shop_id)
    }};
}

/// Binds a status log entry's own values (its status, reason, actor, time and cancellation),
/// in the order both status log statements take them, after their other binds.
macro_rules! bind_entry {
    ($query:expr, $entry:expr, $actor_type:expr) => {{
        use diesel::sql_types::{BigInt, Nullable, Text};
        let (entry, actor_type): (&NewStatusLog, &String) = ($entry, $actor_type);
        let actor = &entry.metadata.user;
        let cancellation = entry.metadata.cancellation.as_ref();
        $query
            .bind::<Text, _>(entry.subscription_status.as_str())
            .bind::<Text, _>(entry.reason.as_str())
            .bind::<Text, _>(actor_type.as_str())
            .bind::<BigInt, _>(actor.id)
            .bind::<Text, _>(actor.name.as_str())
            .bind::<BigInt, _>(entry.created_at.as_micros())
            .bind::<Nullable<Text>, _>(cancellation.and_then(|c| c.reason.as_deref()))
            .bind::<Nullable<Text>, _>(cancellation.and_then(|c| c.comment.as_deref()))
    }};
}

/// The id a status log statement answered for its entry.
fn entry_id(rows: &[IdRow]) -> StoreResult<i64> {
    rows.first()
        .map(|row| row.id)
        .ok_or_else(|| StorageError::other("a status log entry got no id"))
}

/// Writes `state` to the subscription's row in one statement ([`SAVE_SQL`]), kept prepared;
/// how many rows it changed (0 when the shop has no such subscription).
fn write_whole_row(
    conn: &mut DbConnection,
    shop_id: i64,
    id: i64,
    state: &SubscriptionState,
) -> StoreResult<usize> {
    let values = RowValues::of(state)?;
    macro_rules! save {
        ($c:expr, $backend:ty) => {
            KeepPrepared::<SaveSubscription, _>::new(bind_row!(
                diesel::sql_query(SAVE_SQL).into_boxed::<$backend>(),
                state,
                &values,
                id,
                shop_id
            ))
            .load::<IdRow>($c)
        };
    }
    match conn {
        // SQLite numbers `$name` parameters in the order they first appear, here `$1`…`$42`,
        // so both run the same text.
        DbConnection::Sqlite(c) => save!(c, diesel::sqlite::Sqlite),
        DbConnection::Pg(c) => save!(c, diesel::pg::Pg),
    }
    .map(|rows| rows.len())
    .map_err(storage_error)
}

/// `subscriptions`' own columns of a state but the key, shop and creation time.
macro_rules! own_columns {
    ($state:expr) => {{
        use subscriptions as t;
        let state: &SubscriptionState = $state;
        (
            t::customer_id.eq(state.customer_id.0),
            t::billing_address_id.eq(state.billing_address_id.0),
            t::shipping_address_id.eq(state.shipping_address_id.0),
            t::subscription_status.eq(state.subscription_status.as_str()),
            t::payment_rrule.eq(state.payment_rrule.as_str()),
            t::payment_rrule_text.eq(state.payment_rrule_text.as_str()),
            t::order_rrule.eq(state.order_rrule.as_str()),
            t::order_rrule_text.eq(state.order_rrule_text.as_str()),
            t::charged_currency.eq(state.charged_currency.as_str()),
            t::base_currency.eq(state.base_currency.as_str()),
            t::base_to_charged_exchange_rate.eq(state.base_to_charged_exchange_rate),
            t::updated_at.eq(state.updated_at.as_micros()),
        )
    }};
}

impl SubscriptionRepository for StoreTx<'_> {
    fn subscription_by_idempotency_key(
        &mut self,
        shop_id: ShopId,
        key: &str,
    ) -> StoreResult<Option<(SubscriptionId, Option<String>)>> {
        use subscription_details as t;
        t::table
            .filter(t::shop_id.eq(shop_id.0))
            .filter(t::idempotency_key.eq(key))
            .select((t::id, t::idempotency_fingerprint))
            .first::<(i64, Option<String>)>(self.conn)
            .optional()
            .map(|found| found.map(|(id, fingerprint)| (SubscriptionId(id), fingerprint)))
            .map_err(storage_error)
    }

    fn insert_subscription(
        &mut self,
        shop_id: ShopId,
        state: &SubscriptionState,
        line_items: &[SubscriptionLineItem],
        now: Timestamp,
    ) -> StoreResult<SubscriptionId> {
        let values = (
            own_columns!(state),
            (
                subscriptions::shop_id.eq(shop_id.0),
                subscriptions::created_at.eq(now.as_micros()),
            ),
        );
        let id: i64 = on_backend!(&mut *self.conn, |c| {
            diesel::insert_into(subscriptions::table)
                .values(values)
                .returning(subscriptions::id)
                .get_result(c)
        })
        .map_err(storage_error)?;
        // A second subscription with the shop's idempotency key fails here, on the unique
        // index: a unique violation.
        write_whole_row(self.conn, shop_id.0, id, state)?;
        for item in line_items {
            use subscription_line_items as t;
            let values = (
                t::shop_id.eq(shop_id.0),
                t::subscription_id.eq(id),
                t::platform_product_id.eq(item.platform_product_id.as_str()),
                t::platform_variant_id.eq(item.platform_variant_id.as_str()),
                t::quantity.eq(item.quantity),
                t::price.eq(item.price.0),
                t::document.eq(json(item, "a line item")?),
                t::created_at.eq(now.as_micros()),
                t::updated_at.eq(now.as_micros()),
                t::subscription_group_id.eq(item.subscription_group_id.map(|group| group.0)),
                t::subscription_group_billing_rules_id
                    .eq(item.subscription_group_billing_rules_id.map(|rule| rule.0)),
            );
            on_backend!(&mut *self.conn, |c| {
                diesel::insert_into(t::table)
                    .values(values)
                    .returning(t::id)
                    .get_result::<i64>(c)
            })
            .map_err(storage_error)?;
        }
        Ok(SubscriptionId(id))
    }

    fn save_subscription(
        &mut self,
        shop_id: ShopId,
        id: SubscriptionId,
        state: &SubscriptionState,
    ) -> StoreResult<bool> {
        Ok(write_whole_row(self.conn, shop_id.0, id.0, state)? == 1)
    }

    fn save_with_status_log(
        &mut self,
        shop_id: ShopId,
        id: SubscriptionId,
        state: &SubscriptionState,
        entry: &NewStatusLog,
    ) -> StoreResult<StatusLog> {
        let DbConnection::Pg(c) = &mut *self.conn else {
            // SQLite runs in the process: two statements cost about what one does.
            self.save_subscription(shop_id, id, state)?;
            return self.insert_status_log(shop_id, entry);
        };
        let values = RowValues::of(state)?;
        let actor_type = actor_type_name(entry.metadata.user.kind)?;
        let rows: Vec<IdRow> = KeepPrepared::<SaveWithStatusLog, _>::new(bind_entry!(
            bind_row!(
                diesel::sql_query(SAVE_WITH_LOG_SQL).into_boxed::<diesel::pg::Pg>(),
                state,
                &values,
                id.0,
                shop_id.0
            ),
            entry,
            &actor_type
        ))
        .load(c)
        .map_err(storage_error)?;
        let log_id = entry_id(&rows)?;
        Ok(entry.clone().stored(StatusLogId(log_id)))
    }

    fn update_line_item(
        &mut self,
        shop_id: ShopId,
        subscription_id: SubscriptionId,
        item: &SubscriptionLineItem,
        now: Timestamp,
    ) -> StoreResult<bool> {
        use subscription_line_items as t;
        let changed = diesel::update(
            t::table
                .filter(t::id.eq(item.id.0))
                .filter(t::subscription_id.eq(subscription_id.0))
                .filter(t::shop_id.eq(shop_id.0)),
        )
        .set((
            t::quantity.eq(item.quantity),
            t::price.eq(item.price.0),
            t::document.eq(json(item, "a line item")?),
            t::updated_at.eq(now.as_micros()),
        ))
        .execute(self.conn)
        .map_err(storage_error)?;
        Ok(changed == 1)
    }

    fn lock_subscription(&mut self, shop_id: ShopId, id: SubscriptionId) -> StoreResult<()> {
        let id = id.0;
        match &mut *self.conn {
            // SQLite's write transactions (BEGIN IMMEDIATE) run one at a time already.
            DbConnection::Sqlite(_) => Ok(()),
            DbConnection::Pg(c) => subscriptions::table
                .filter(subscriptions::id.eq(id))
                .filter(subscriptions::shop_id.eq(shop_id.0))
                .select(subscriptions::id)
                .for_update()
                .load::<i64>(c)
                .map(drop)
                .map_err(storage_error),
        }
    }

    fn lock_for_create(&mut self, key: &str) -> StoreResult<()> {
        match &mut *self.conn {
            // SQLite's write transactions (BEGIN IMMEDIATE) run one at a time already.
            DbConnection::Sqlite(_) => Ok(()),
            DbConnection::Pg(c) => {
                diesel::sql_query("SELECT pg_advisory_xact_lock(hashtextextended($1, 0))")
                    .bind::<diesel::sql_types::Text, _>(key)
                    .execute(c)
                    .map(drop)
                    .map_err(storage_error)
            }
        }
    }

    fn insert_status_log(
        &mut self,
        shop_id: ShopId,
        entry: &NewStatusLog,
    ) -> StoreResult<StatusLog> {
        use subscription_status_logs as t;
        let actor = &entry.metadata.user;
        let cancellation = entry.metadata.cancellation.as_ref();
        let actor_type = actor_type_name(actor.kind)?;
        let id = match &mut *self.conn {
            DbConnection::Pg(c) => {
                use diesel::sql_types::BigInt;
                // One round trip: the entry and the row's pointer to it.
                let query = diesel::sql_query(
                    "WITH log AS (INSERT INTO subscription_status_logs (shop_id, \
                     subscription_id, subscription_status, reason, actor_type, actor_id, \
                     actor_name, created_at, cancellation_reason, cancellation_comment) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) RETURNING id), \
                     latest AS (UPDATE subscriptions SET latest_status_log_id = \
                     (SELECT id FROM log) WHERE id = $2 AND shop_id = $1) \
                     SELECT id FROM log",
                )
                .bind::<BigInt, _>(shop_id.0)
                .bind::<BigInt, _>(entry.subscription_id.0);
                let rows: Vec<IdRow> =
                    KeepPrepared::<InsertStatusLog, _>::new(bind_entry!(query, entry, &actor_type))
                        .load(c)
                        .map_err(storage_error)?;
                entry_id(&rows)?
            }
            DbConnection::Sqlite(c) => {
                let values = (
                    t::shop_id.eq(shop_id.0),
                    t::subscription_id.eq(entry.subscription_id.0),
                    t::subscription_status.eq(entry.subscription_status.as_str()),
                    t::reason.eq(entry.reason.as_str()),
                    t::actor_type.eq(actor_type.as_str()),
                    t::actor_id.eq(actor.id),
                    t::actor_name.eq(actor.name.as_str()),
                    t::created_at.eq(entry.created_at.as_micros()),
                    (
                        t::cancellation_reason.eq(cancellation.and_then(|c| c.reason.as_deref())),
                        t::cancellation_comment.eq(cancellation.and_then(|c| c.comment.as_deref())),
                    ),
                );
                let id: i64 = diesel::insert_into(t::table)
                    .values(values)
                    .returning(t::id)
                    .get_result(c)
                    .map_err(storage_error)?;
                diesel::update(
                    subscriptions::table
                        .filter(subscriptions::id.eq(entry.subscription_id.0))
                        .filter(subscriptions::shop_id.eq(shop_id.0)),
                )
                .set(subscriptions::latest_status_log_id.eq(Some(id)))
                .execute(c)
                .map_err(storage_error)?;
                id
            }
        };
        Ok(entry.clone().stored(StatusLogId(id)))
    }

    fn status_logs_of_subscription(
        &mut self,
        shop_id: ShopId,
        subscription_id: SubscriptionId,
        limit: usize,
    ) -> StoreResult<Vec<StatusLog>> {
        subscription_status_logs::table
            .filter(subscription_status_logs::shop_id.eq(shop_id.0))
            .filter(subscription_status_logs::subscription_id.eq(subscription_id.0))
            .order(subscription_status_logs::id.desc())
            .limit(i64::try_from(limit).unwrap_or(i64::MAX))
            .select(StatusLogRow::as_select())
            .load(self.conn)
            .map_err(storage_error)?
            .into_iter()
            .map(StatusLogRow::into_status_log)
            .collect()
    }

    fn subscription(
        &mut self,
        shop_id: ShopId,
        id: SubscriptionId,
    ) -> StoreResult<Option<StoredSubscription>> {
        let id = id.0;
        let rows: Vec<FullRow> = on_backend!(&mut *self.conn, |c| {
            whole_rows!()
                .filter(subscriptions::id.eq(id))
                .filter(subscriptions::shop_id.eq(shop_id.0))
                .select(whole_row_columns!())
                .load(c)
        })
        .map_err(storage_error)?;
        Ok(assemble(self.conn, rows)?.pop())
    }

    fn list_subscriptions(
        &mut self,
        shop_id: ShopId,
        query: &ListQuery,
    ) -> StoreResult<SubscriptionPage> {
        let limit = query.limit.max(0);
        let mut ids = page_ids(self.conn, shop_id, query, limit.saturating_add(1))?;
        let has_more = ids.len() as i64 > limit;
        ids.truncate(usize::try_from(limit).unwrap_or_default());
        Ok(SubscriptionPage {
            subscriptions: whole_subscriptions(self.conn, shop_id, &ids)?,
            has_more,
        })
    }

    fn count_subscriptions(&mut self, shop_id: ShopId, query: &ListQuery) -> StoreResult<i64> {
        count_matching(self.conn, shop_id, query)
    }

    fn customer_subscriptions(
        &mut self,
        shop_id: ShopId,
        customer_id: CustomerId,
        limit: i64,
        page: i64,
    ) -> StoreResult<(Vec<StoredSubscription>, i64)> {
        let customer_id = customer_id.0;
        let total: i64 = subscriptions::table
            .filter(subscriptions::shop_id.eq(shop_id.0))
            .filter(subscriptions::customer_id.eq(customer_id))
            .count()
            .get_result(self.conn)
            .map_err(storage_error)?;
        let rows: Vec<FullRow> = on_backend!(&mut *self.conn, |c| {
            whole_rows!()
                .filter(subscriptions::shop_id.eq(shop_id.0))
                .filter(subscriptions::customer_id.eq(customer_id))
                .order(subscriptions::id.asc())
                .limit(limit)
                .offset(offset(limit, page))
                .select(whole_row_columns!())
                .load(c)
        })
        .map_err(storage_error)?;
        Ok((assemble(self.conn, rows)?, total))
    }
}

/// A value bound to a statement built as text.
enum Bind {
    Integer(i64),
    Text(&'static str),
}

/// The conditions of a List Subscriptions query (its cursor aside) as SQL over the
/// `subscriptions` table alone, with `?` where each bind goes. On SQLite a condition on
/// another column than `id` is written `+column`, so that the page is read along the
/// `(shop_id, id)` keyset and stops at `LIMIT` instead of reading a whole date range from its
/// index and sorting it.
fn conditions(shop_id: ShopId, query: &ListQuery, sqlite: bool) -> (String, Vec<Bind>) {
    let mut sql = String::from("shop_id = ?");
    let mut binds = vec![Bind::Integer(shop_id.0)];
    if !query.statuses.is_empty() {
        let marks = vec!["?"; query.statuses.len()].join(", ");
        sql.push_str(&format!(" AND subscription_status IN ({marks})"));
        binds.extend(
            query
                .statuses
                .iter()
                .map(|status| Bind::Text(status.as_str())),
        );
    }
    if !query.customer_ids.is_empty() {
        let marks = vec!["?"; query.customer_ids.len()].join(", ");
        sql.push_str(&format!(" AND customer_id IN ({marks})"));
        binds.extend(query.customer_ids.iter().map(|id| Bind::Integer(id.0)));
    }
    for filter in &query.filters {
        let value = match (filter.field.is_integer(), &filter.value) {
            (true, FilterValue::Integer(value)) => *value,
            (false, FilterValue::Time(value)) => value.as_micros(),
            // A value of another type meets no condition, as `Filter::matches` has it.
            _ => {
                sql.push_str(" AND 1 = 0");
                continue;
            }
        };
        let op = match filter.op {
            FilterOp::Lt => "<",
            FilterOp::Lte => "<=",
            FilterOp::Gt => ">",
            FilterOp::Gte => ">=",
            FilterOp::Eq | FilterOp::Like => "=",
        };
        // Every filter field is a column of that name (migration 7).
        let column = filter.field.as_str();
        let unindexed = if sqlite && filter.field != FilterField::Id {
            "+"
        } else {
            ""
        };
        sql.push_str(&format!(" AND {unindexed}{column} {op} ?"));
        binds.push(Bind::Integer(value));
    }
    (sql, binds)
}

/// `?` marks as PostgreSQL's `$1`, `$2`…
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

#[derive(QueryableByName)]
struct IdRow {
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    id: i64,
}

#[derive(QueryableByName)]
struct CountRow {
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    count: i64,
}

/// Runs `sql` (with `?` marks) with its binds on either backend.
macro_rules! load_sql {
    ($conn:expr, $sql:expr, $binds:expr, $row:ty) => {{
        macro_rules! run {
            ($c:expr, $backend:ty, $text:expr) => {{
                let mut statement = diesel::sql_query($text).into_boxed::<$backend>();
                for bind in $binds {
                    statement = match bind {
                        Bind::Integer(value) => {
                            statement.bind::<diesel::sql_types::BigInt, _>(*value)
                        }
                        Bind::Text(value) => statement.bind::<diesel::sql_types::Text, _>(*value),
                    };
                }
                statement.load::<$row>($c)
            }};
        }
        match $conn {
            DbConnection::Sqlite(c) => run!(c, diesel::sqlite::Sqlite, $sql.to_string()),
            DbConnection::Pg(c) => run!(c, diesel::pg::Pg, numbered(&$sql)),
        }
        .map_err(storage_error)
    }};
}

/// The ids of a page: those the query matches after its cursor, by id, at most `limit`.
fn page_ids(
    conn: &mut DbConnection,
    shop_id: ShopId,
    query: &ListQuery,
    limit: i64,
) -> StoreResult<Vec<i64>> {
    let sqlite = matches!(conn, DbConnection::Sqlite(_));
    let (mut sql, mut binds) = conditions(shop_id, query, sqlite);
    if let Some(cursor) = query.cursor {
        sql.push_str(" AND id > ?");
        binds.push(Bind::Integer(cursor.after_id.0));
    }
    binds.push(Bind::Integer(limit));
    let sql = format!("SELECT id FROM subscriptions WHERE {sql} ORDER BY id LIMIT ?");
    let rows: Vec<IdRow> = load_sql!(conn, sql, &binds, IdRow)?;
    Ok(rows.into_iter().map(|row| row.id).collect())
}

/// How many subscriptions the query matches (cursor and limit aside). By status alone, from
/// `subscription_counts` (kept by triggers, migration 7) rather than by reading every row.
fn count_matching(conn: &mut DbConnection, shop_id: ShopId, query: &ListQuery) -> StoreResult<i64> {
    let sql = if query.customer_ids.is_empty() && query.filters.is_empty() {
        let mut sql = String::from(
            "SELECT CAST(COALESCE(SUM(subscriptions), 0) AS BIGINT) AS count \
             FROM subscription_counts WHERE shop_id = ?",
        );
        let mut binds = vec![Bind::Integer(shop_id.0)];
        if !query.statuses.is_empty() {
            let marks = vec!["?"; query.statuses.len()].join(", ");
            sql.push_str(&format!(" AND subscription_status IN ({marks})"));
            binds.extend(
                query
                    .statuses
                    .iter()
                    .map(|status| Bind::Text(status.as_str())),
            );
        }
        (sql, binds)
    } else {
        let (sql, binds) = conditions(shop_id, query, false);
        (
            format!("SELECT COUNT(*) AS count FROM subscriptions WHERE {sql}"),
            binds,
        )
    };
    let rows: Vec<CountRow> = load_sql!(conn, sql.0, &sql.1, CountRow)?;
    Ok(rows.first().map_or(0, |row| row.count))
}

/// The whole subscriptions of `ids`, in that order.
pub(super) fn whole_subscriptions(
    conn: &mut DbConnection,
    shop_id: ShopId,
    ids: &[i64],
) -> StoreResult<Vec<StoredSubscription>> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let mut rows: Vec<FullRow> = on_backend!(&mut *conn, |c| {
        // The ids on every part, so each is read by its key (no join from the table's start).
        whole_rows!()
            .filter(subscriptions::shop_id.eq(shop_id.0))
            .filter(subscriptions::id.eq_any(ids))
            .filter(schedule.field(subscription_schedule::id).eq_any(ids))
            .filter(details.field(subscription_details::id).eq_any(ids))
            .filter(resumption.field(subscription_resumptions::id).eq_any(ids))
            .select(whole_row_columns!())
            .load(c)
    })
    .map_err(storage_error)?;
    rows.sort_by_key(|(row, ..)| ids.iter().position(|id| *id == row.id));
    assemble(conn, rows)
}
