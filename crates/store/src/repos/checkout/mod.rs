//! Checkouts of the headless checkout (migration 11). The document is the
//! domain's `CheckoutDocument` as JSON; the columns beside it are what the sweeps and lookups
//! filter on, written from it at every save.

use diesel::prelude::*;
use mercer_domain::Timestamp;
use mercer_domain::checkout::repository::{
    CheckoutOrder, CheckoutRepository, CheckoutStatus, NewCheckoutOrder,
};
use mercer_domain::checkout::state::CheckoutDocument;
use mercer_domain::kernel::error::{StorageError, StoreResult};
use mercer_domain::kernel::ids::{CheckoutOrderId, ShopId};

use crate::connection::{on_backend, planned_each_time};
use crate::repos::StoreTx;
use crate::schema::{checkout_orders, shop_settings};
use crate::store::{storable, storage_error};

#[derive(Queryable, Selectable)]
#[diesel(table_name = checkout_orders)]
struct CheckoutRow {
    id: i64,
    shop_id: i64,
    public_order_id: String,
    status: String,
    platform_order_id: Option<String>,
    last_activity_at: i64,
    abandoned_at: Option<i64>,
    fulfilled_at: Option<i64>,
    version: i64,
    document: String,
    created_at: i64,
    updated_at: i64,
}

impl TryFrom<CheckoutRow> for CheckoutOrder {
    type Error = StorageError;

    fn try_from(row: CheckoutRow) -> Result<Self, StorageError> {
        let document: CheckoutDocument = serde_json::from_str(&row.document).map_err(|error| {
            StorageError::other(format!("checkout {} document: {error}", row.id))
        })?;
        Ok(CheckoutOrder {
            id: CheckoutOrderId(row.id),
            shop_id: ShopId(row.shop_id),
            public_order_id: row.public_order_id,
            status: CheckoutStatus::parse(&row.status)
                .ok_or_else(|| StorageError::other(format!("checkout status {:?}", row.status)))?,
            platform_order_id: row.platform_order_id,
            last_activity_at: Timestamp::from_micros(row.last_activity_at),
            abandoned_at: row.abandoned_at.map(Timestamp::from_micros),
            fulfilled_at: row.fulfilled_at.map(Timestamp::from_micros),
            version: row.version,
            document,
            created_at: Timestamp::from_micros(row.created_at),
            updated_at: Timestamp::from_micros(row.updated_at),
        })
    }
}

fn orders(rows: Vec<CheckoutRow>) -> StoreResult<Vec<CheckoutOrder>> {
    rows.into_iter().map(CheckoutOrder::try_from).collect()
}

/// The order of a lookup's one row, if it found one.
fn found(row: QueryResult<Option<CheckoutRow>>) -> StoreResult<Option<CheckoutOrder>> {
    row.map_err(storage_error)?
        .map(CheckoutOrder::try_from)
        .transpose()
}

/// The document as stored: JSON, in which serde escapes any NUL the storefront sent.
fn document_text(document: &CheckoutDocument) -> StoreResult<String> {
    serde_json::to_string(document)
        .map_err(|error| StorageError::other(format!("checkout document: {error}")))
}

fn email_of(document: &CheckoutDocument) -> Option<String> {
    document.email().map(|email| storable(email).into_owned())
}

impl CheckoutRepository for StoreTx<'_> {
    fn insert_checkout_order(&mut self, new: &NewCheckoutOrder) -> StoreResult<CheckoutOrder> {
        use checkout_orders as t;
        let at = new.created_at.as_micros();
        let values = (
            t::shop_id.eq(new.shop_id.0),
            t::public_order_id.eq(&new.public_order_id),
            t::status.eq(CheckoutStatus::Open.as_str()),
            t::email.eq(email_of(&new.document)),
            t::item_count.eq(new.document.line_items.len() as i64),
            t::last_activity_at.eq(at),
            t::version.eq(1i64),
            t::document.eq(document_text(&new.document)?),
            t::created_at.eq(at),
            t::updated_at.eq(at),
        );
        let row: CheckoutRow = on_backend!(&mut *self.conn, |c| {
            diesel::insert_into(t::table)
                .values(values)
                .returning(CheckoutRow::as_returning())
                .get_result(c)
        })
        .map_err(storage_error)?;
        row.try_into()
    }

    fn checkout_order(
        &mut self,
        shop_id: ShopId,
        public_order_id: &str,
    ) -> StoreResult<Option<CheckoutOrder>> {
        use checkout_orders as t;
        found(
            t::table
                .filter(t::public_order_id.eq(public_order_id))
                .filter(t::shop_id.eq(shop_id.0))
                .select(CheckoutRow::as_select())
                .first(self.conn)
                .optional(),
        )
    }

    fn checkout_order_by_id(&mut self, id: CheckoutOrderId) -> StoreResult<Option<CheckoutOrder>> {
        use checkout_orders as t;
        found(
            t::table
                .find(id.0)
                .select(CheckoutRow::as_select())
                .first(self.conn)
                .optional(),
        )
    }

    fn save_checkout_order(&mut self, order: &CheckoutOrder) -> StoreResult<bool> {
        use checkout_orders as t;
        let changed = diesel::update(
            t::table
                .filter(t::id.eq(order.id.0))
                .filter(t::version.eq(order.version)),
        )
        .set((
            t::status.eq(order.status.as_str()),
            t::email.eq(email_of(&order.document)),
            t::item_count.eq(order.document.line_items.len() as i64),
            t::platform_order_id.eq(order.platform_order_id.as_deref()),
            t::last_activity_at.eq(order.last_activity_at.as_micros()),
            t::abandoned_at.eq(order.abandoned_at.map(|at| at.as_micros())),
            t::fulfilled_at.eq(order.fulfilled_at.map(|at| at.as_micros())),
            t::version.eq(order.version + 1),
            t::document.eq(document_text(&order.document)?),
            t::updated_at.eq(order.updated_at.as_micros()),
        ))
        .execute(self.conn)
        .map_err(storage_error)?;
        Ok(changed == 1)
    }

    fn checkout_order_of_platform_order(
        &mut self,
        shop_id: ShopId,
        platform_order_id: &str,
    ) -> StoreResult<Option<CheckoutOrder>> {
        use checkout_orders as t;
        found(
            t::table
                .filter(t::shop_id.eq(shop_id.0))
                .filter(t::platform_order_id.eq(platform_order_id))
                .select(CheckoutRow::as_select())
                .first(self.conn)
                .optional(),
        )
    }

    fn abandoned_checkout_orders(
        &mut self,
        idle_since: Timestamp,
        limit: usize,
    ) -> StoreResult<Vec<CheckoutOrder>> {
        use checkout_orders as t;
        let emails_off = shop_settings::table
            .filter(shop_settings::abandoned_cart_emails.eq(false))
            .select(shop_settings::shop_id);
        // The partial index of open checkouts not reported, by their last change; planned for
        // its values, which a generic plan could not match to the index's predicate.
        let rows = planned_each_time(self.conn, |conn| {
            t::table
                .filter(t::status.eq(CheckoutStatus::Open.as_str()))
                .filter(t::abandoned_at.is_null())
                .filter(t::last_activity_at.le(idle_since.as_micros()))
                .filter(t::email.is_not_null())
                .filter(t::item_count.gt(0))
                .filter(t::shop_id.eq_any(emails_off))
                .order((t::last_activity_at.asc(), t::id.asc()))
                .limit(limit as i64)
                .select(CheckoutRow::as_select())
                .load(conn)
        })
        .map_err(storage_error)?;
        orders(rows)
    }

    fn checkout_orders_of_shop(
        &mut self,
        shop_id: ShopId,
        status: Option<CheckoutStatus>,
        before: Option<CheckoutOrderId>,
        limit: usize,
    ) -> StoreResult<Vec<CheckoutOrder>> {
        use checkout_orders as t;
        let mut query = t::table.filter(t::shop_id.eq(shop_id.0)).into_boxed();
        if let Some(status) = status {
            query = query.filter(t::status.eq(status.as_str()));
        }
        if let Some(before) = before {
            query = query.filter(t::id.lt(before.0));
        }
        let rows = query
            .order(t::id.desc())
            .limit(i64::try_from(limit).unwrap_or(i64::MAX))
            .select(CheckoutRow::as_select())
            .load(self.conn)
            .map_err(storage_error)?;
        orders(rows)
    }
}
