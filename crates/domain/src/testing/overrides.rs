//! API overrides, in memory.

use super::MemoryState;
use crate::kernel::error::StoreResult;
use crate::kernel::ids::OverrideId;
use crate::kernel::ids::ShopId;
use crate::overrides::*;
use crate::overrides::{ApiOverride, NewApiOverride, OverrideType};

impl OverrideRepository for MemoryState {
    fn insert_override(&mut self, new: &NewApiOverride) -> StoreResult<ApiOverride> {
        let stored = ApiOverride {
            id: OverrideId(self.overrides.iter().map(|o| o.id.0).max().unwrap_or(0) + 1),
            public_id: crate::access::credentials::random_hex(16),
            shop_id: new.shop_id,
            override_type: new.override_type,
            url: new.url.clone(),
            shared_secret: new.shared_secret.clone(),
            created_at: new.created_at,
            updated_at: new.created_at,
        };
        self.overrides.push(stored.clone());
        Ok(stored)
    }

    fn override_by_public_id(
        &mut self,
        shop_id: ShopId,
        public_id: &str,
    ) -> StoreResult<Option<ApiOverride>> {
        Ok(self
            .overrides
            .iter()
            .find(|o| o.shop_id == shop_id && o.public_id == public_id)
            .cloned())
    }

    fn overrides_of_shop(&mut self, shop_id: ShopId) -> StoreResult<Vec<ApiOverride>> {
        Ok(self
            .overrides
            .iter()
            .filter(|o| o.shop_id == shop_id)
            .cloned()
            .collect())
    }

    fn newest_override(
        &mut self,
        shop_id: ShopId,
        override_type: OverrideType,
    ) -> StoreResult<Option<ApiOverride>> {
        Ok(self
            .overrides
            .iter()
            .filter(|o| o.shop_id == shop_id && o.override_type == override_type)
            .max_by_key(|o| o.id)
            .cloned())
    }

    fn update_override(&mut self, stored: &ApiOverride) -> StoreResult<()> {
        if let Some(existing) = self.overrides.iter_mut().find(|o| o.id == stored.id) {
            *existing = stored.clone();
        }
        Ok(())
    }

    fn delete_override(&mut self, id: OverrideId) -> StoreResult<()> {
        self.overrides.retain(|o| o.id != id);
        Ok(())
    }
}
