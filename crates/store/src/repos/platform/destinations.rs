//! Connector destinations.

use diesel::prelude::*;
use mercer_domain::kernel::error::StoreResult;
use mercer_domain::kernel::ids::DestinationId;
use mercer_domain::kernel::ids::ShopId;
use mercer_domain::platform::DestinationRepository;
use mercer_domain::platform::destinations::{Destination, DestinationSettings, Topic};
use mercer_domain::{StorageError, Timestamp};

use crate::connection::on_backend;
use crate::repos::StoreTx;
use crate::schema::destinations;
use crate::store::storage_error;

#[derive(Queryable, Selectable)]
#[diesel(table_name = destinations)]
struct DestinationRow {
    id: i64,
    shop_id: i64,
    topic: String,
    url: String,
    version: String,
    timeout_ms: i64,
    created_at: i64,
    updated_at: i64,
    deleted_at: Option<i64>,
}

impl TryFrom<DestinationRow> for Destination {
    type Error = StorageError;

    fn try_from(row: DestinationRow) -> Result<Self, StorageError> {
        Ok(Destination {
            id: DestinationId(row.id),
            shop_id: ShopId(row.shop_id),
            topic: Topic::parse(&row.topic)
                .ok_or_else(|| StorageError::other(format!("stored topic {:?}", row.topic)))?,
            url: row.url,
            version: row.version,
            timeout_ms: row.timeout_ms,
            created_at: Timestamp::from_micros(row.created_at),
            updated_at: Timestamp::from_micros(row.updated_at),
            deleted_at: row.deleted_at.map(Timestamp::from_micros),
        })
    }
}

impl DestinationRepository for StoreTx<'_> {
    fn insert_destination(
        &mut self,
        shop_id: ShopId,
        settings: &DestinationSettings,
        now: Timestamp,
    ) -> StoreResult<Destination> {
        let values = (
            destinations::shop_id.eq(shop_id.0),
            destinations::topic.eq(settings.topic.as_str()),
            destinations::url.eq(&settings.url),
            destinations::version.eq(&settings.version),
            destinations::timeout_ms.eq(settings.timeout_ms),
            destinations::created_at.eq(now.as_micros()),
            destinations::updated_at.eq(now.as_micros()),
        );
        let row: DestinationRow = on_backend!(&mut *self.conn, |c| {
            diesel::insert_into(destinations::table)
                .values(values)
                .returning(DestinationRow::as_returning())
                .get_result(c)
        })
        .map_err(storage_error)?;
        row.try_into()
    }

    fn update_destination(
        &mut self,
        shop_id: ShopId,
        id: DestinationId,
        settings: &DestinationSettings,
        now: Timestamp,
    ) -> StoreResult<()> {
        diesel::update(
            destinations::table
                .filter(destinations::id.eq(id.0))
                .filter(destinations::shop_id.eq(shop_id.0)),
        )
        .set((
            destinations::topic.eq(settings.topic.as_str()),
            destinations::url.eq(&settings.url),
            destinations::version.eq(&settings.version),
            destinations::timeout_ms.eq(settings.timeout_ms),
            destinations::updated_at.eq(now.as_micros()),
        ))
        .execute(self.conn)
        .map_err(storage_error)?;
        Ok(())
    }

    fn delete_destination(
        &mut self,
        shop_id: ShopId,
        id: DestinationId,
        now: Timestamp,
    ) -> StoreResult<()> {
        diesel::update(
            destinations::table
                .filter(destinations::id.eq(id.0))
                .filter(destinations::shop_id.eq(shop_id.0)),
        )
        .set((
            destinations::deleted_at.eq(now.as_micros()),
            destinations::updated_at.eq(now.as_micros()),
        ))
        .execute(self.conn)
        .map_err(storage_error)?;
        Ok(())
    }

    fn destination(
        &mut self,
        shop_id: ShopId,
        id: DestinationId,
    ) -> StoreResult<Option<Destination>> {
        destinations::table
            .filter(destinations::id.eq(id.0))
            .filter(destinations::shop_id.eq(shop_id.0))
            .select(DestinationRow::as_select())
            .first(self.conn)
            .optional()
            .map_err(storage_error)?
            .map(Destination::try_from)
            .transpose()
    }

    fn live_destination(
        &mut self,
        shop_id: ShopId,
        topic: Topic,
    ) -> StoreResult<Option<Destination>> {
        destinations::table
            .filter(destinations::shop_id.eq(shop_id.0))
            .filter(destinations::topic.eq(topic.as_str()))
            .filter(destinations::deleted_at.is_null())
            .select(DestinationRow::as_select())
            .first(self.conn)
            .optional()
            .map_err(storage_error)?
            .map(Destination::try_from)
            .transpose()
    }

    fn live_destinations(&mut self, shop_id: ShopId) -> StoreResult<Vec<Destination>> {
        destinations::table
            .filter(destinations::shop_id.eq(shop_id.0))
            .filter(destinations::deleted_at.is_null())
            .order(destinations::id.asc())
            .select(DestinationRow::as_select())
            .load(self.conn)
            .map_err(storage_error)?
            .into_iter()
            .map(Destination::try_from)
            .collect()
    }
}
