//! What API overrides need from storage.

use crate::access::AccessRepositories;
use crate::kernel::error::StoreResult;
use crate::kernel::ids::OverrideId;
use crate::kernel::ids::ShopId;
use crate::overrides::{ApiOverride, NewApiOverride, OverrideType};

crate::feature_database!(
    /// The database as overrides sees it.
    OverrideDatabase,
    OverrideRepositories
);

/// Every repository the overrides' use cases may touch in one unit of work.
pub trait OverrideRepositories: AccessRepositories + OverrideRepository {}

impl<T> OverrideRepositories for T where T: AccessRepositories + OverrideRepository + ?Sized {}

/// API overrides of shops.
pub trait OverrideRepository {
    /// Stores a new override, with a new public id (32 hex characters), and returns it.
    fn insert_override(&mut self, new: &NewApiOverride) -> StoreResult<ApiOverride>;
    /// The shop's override with this public id.
    fn override_by_public_id(
        &mut self,
        shop_id: ShopId,
        public_id: &str,
    ) -> StoreResult<Option<ApiOverride>>;
    /// The shop's overrides, oldest first.
    fn overrides_of_shop(&mut self, shop_id: ShopId) -> StoreResult<Vec<ApiOverride>>;
    /// The shop's most recently created override of the type.
    fn newest_override(
        &mut self,
        shop_id: ShopId,
        override_type: OverrideType,
    ) -> StoreResult<Option<ApiOverride>>;
    /// Writes the type, URL, secret and `updated_at` of a stored override.
    fn update_override(&mut self, stored: &ApiOverride) -> StoreResult<()>;
    /// Deletes the override for good.
    fn delete_override(&mut self, id: OverrideId) -> StoreResult<()>;
}
