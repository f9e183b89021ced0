//! API overrides.

use diesel::prelude::*;
use mercer_domain::access::credentials::{Secret, random_hex};
use mercer_domain::kernel::error::StoreResult;
use mercer_domain::kernel::ids::OverrideId;
use mercer_domain::kernel::ids::ShopId;
use mercer_domain::overrides::OverrideRepository;
use mercer_domain::overrides::{ApiOverride, NewApiOverride, OverrideType};
use mercer_domain::{StorageError, Timestamp};

use crate::connection::on_backend;
use crate::repos::StoreTx;
use crate::schema::api_overrides;
use crate::store::storage_error;

#[derive(Queryable, Selectable)]
#[diesel(table_name = api_overrides)]
struct OverrideRow {
    id: i64,
    public_id: String,
    shop_id: i64,
    override_type: String,
    url: String,
    shared_secret: String,
    created_at: i64,
    updated_at: i64,
}

impl TryFrom<OverrideRow> for ApiOverride {
    type Error = StorageError;

    fn try_from(row: OverrideRow) -> Result<Self, StorageError> {
        Ok(ApiOverride {
            id: OverrideId(row.id),
            public_id: row.public_id,
            shop_id: ShopId(row.shop_id),
            override_type: OverrideType::parse(&row.override_type).ok_or_else(|| {
                StorageError::other(format!("stored override type {:?}", row.override_type))
            })?,
            url: row.url,
            shared_secret: Secret::new(row.shared_secret),
            created_at: Timestamp::from_micros(row.created_at),
            updated_at: Timestamp::from_micros(row.updated_at),
        })
    }
}

fn convert(rows: Vec<OverrideRow>) -> StoreResult<Vec<ApiOverride>> {
    rows.into_iter().map(ApiOverride::try_from).collect()
}

impl OverrideRepository for StoreTx<'_> {
    fn insert_override(&mut self, new: &NewApiOverride) -> StoreResult<ApiOverride> {
        let values = (
            api_overrides::public_id.eq(random_hex(16)),
            api_overrides::shop_id.eq(new.shop_id.0),
            api_overrides::override_type.eq(new.override_type.as_str()),
            api_overrides::url.eq(&new.url),
            api_overrides::shared_secret.eq(new.shared_secret.expose()),
            api_overrides::created_at.eq(new.created_at.as_micros()),
            api_overrides::updated_at.eq(new.created_at.as_micros()),
        );
        let row: OverrideRow = on_backend!(&mut *self.conn, |c| {
            diesel::insert_into(api_overrides::table)
                .values(values)
                .returning(OverrideRow::as_returning())
                .get_result(c)
        })
        .map_err(storage_error)?;
        row.try_into()
    }

    fn override_by_public_id(
        &mut self,
        shop_id: ShopId,
        public_id: &str,
    ) -> StoreResult<Option<ApiOverride>> {
        api_overrides::table
            .filter(api_overrides::shop_id.eq(shop_id.0))
            .filter(api_overrides::public_id.eq(public_id))
            .select(OverrideRow::as_select())
            .first(self.conn)
            .optional()
            .map_err(storage_error)?
            .map(ApiOverride::try_from)
            .transpose()
    }

    fn overrides_of_shop(&mut self, shop_id: ShopId) -> StoreResult<Vec<ApiOverride>> {
        let rows = api_overrides::table
            .filter(api_overrides::shop_id.eq(shop_id.0))
            .order(api_overrides::id.asc())
            .select(OverrideRow::as_select())
            .load(self.conn)
            .map_err(storage_error)?;
        convert(rows)
    }

    fn newest_override(
        &mut self,
        shop_id: ShopId,
        override_type: OverrideType,
    ) -> StoreResult<Option<ApiOverride>> {
        api_overrides::table
            .filter(api_overrides::shop_id.eq(shop_id.0))
            .filter(api_overrides::override_type.eq(override_type.as_str()))
            .order(api_overrides::id.desc())
            .select(OverrideRow::as_select())
            .first(self.conn)
            .optional()
            .map_err(storage_error)?
            .map(ApiOverride::try_from)
            .transpose()
    }

    fn update_override(&mut self, stored: &ApiOverride) -> StoreResult<()> {
        diesel::update(api_overrides::table.filter(api_overrides::id.eq(stored.id.0)))
            .set((
                api_overrides::override_type.eq(stored.override_type.as_str()),
                api_overrides::url.eq(&stored.url),
                api_overrides::shared_secret.eq(stored.shared_secret.expose()),
                api_overrides::updated_at.eq(stored.updated_at.as_micros()),
            ))
            .execute(self.conn)
            .map_err(storage_error)?;
        Ok(())
    }

    fn delete_override(&mut self, id: OverrideId) -> StoreResult<()> {
        diesel::delete(api_overrides::table.filter(api_overrides::id.eq(id.0)))
            .execute(self.conn)
            .map_err(storage_error)?;
        Ok(())
    }
}
