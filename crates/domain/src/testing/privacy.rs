//! Privacy requests in memory. The memory store keeps no webhook payloads, checkouts or queued
//! texts of customers' data beside their records, so only the customer record and their
//! addresses are erased here; the store searches every text column (`repos/privacy/`).

use super::{MemoryEntity, MemoryState};
use crate::kernel::error::{StorageError, StoreResult};
use crate::kernel::ids::{CustomerId, ShopId};
use crate::kernel::time::Timestamp;
use crate::platform::events::EntityKind;
use crate::privacy::{PersonalRecord, PrivacyRepository, TextCell};

fn is_customer(entity: &MemoryEntity, shop_id: ShopId) -> bool {
    entity.shop_id == shop_id && entity.kind == EntityKind::Customer
}

impl PrivacyRepository for MemoryState {
    fn personal_record(
        &mut self,
        shop_id: ShopId,
        customer: CustomerId,
    ) -> StoreResult<Option<PersonalRecord>> {
        let Some(entity) =
            (self.entities.iter()).find(|e| is_customer(e, shop_id) && e.record.id == customer.0)
        else {
            return Ok(None);
        };
        Ok(Some(PersonalRecord {
            customer_id: customer,
            platform_id: entity.platform_id.clone(),
            email: entity.columns.email.clone(),
            first_name: entity.columns.first_name.clone(),
            last_name: entity.columns.last_name.clone(),
            phone: entity.columns.phone.clone(),
            pii_redacted_at: self.customer_pii_redacted_at.get(&customer.0).copied(),
            document: entity.record.document.clone(),
            addresses: (self.addresses.iter())
                .filter(|a| a.customer_id == customer.0)
                .map(|a| (a.id, a.row.document.clone()))
                .collect(),
        }))
    }

    fn cells_mentioning(
        &mut self,
        _shop_id: ShopId,
        _email: &str,
        _platform_id: Option<&str>,
        _needles: &[String],
    ) -> StoreResult<Vec<TextCell>> {
        Ok(Vec::new())
    }

    fn rewrite_cell(&mut self, _cell: &TextCell) -> StoreResult<()> {
        Err(StorageError::other("the memory store keeps no such texts"))
    }

    fn erase_customer(
        &mut self,
        shop_id: ShopId,
        erased: &PersonalRecord,
        now: Timestamp,
    ) -> StoreResult<()> {
        let Some(entity) = self.customer_mut(shop_id, erased.customer_id) else {
            return Err(StorageError::other("no such customer"));
        };
        entity.columns.email = erased.email.clone();
        entity.columns.first_name = erased.first_name.clone();
        entity.columns.last_name = erased.last_name.clone();
        entity.columns.phone = erased.phone.clone();
        entity.columns.notes = None;
        entity.record.document = erased.document.clone();
        for (id, document) in &erased.addresses {
            if let Some(address) = self.addresses.iter_mut().find(|a| a.id == *id) {
                address.row.document = document.clone();
            }
        }
        self.customer_pii_redacted_at
            .insert(erased.customer_id.0, now);
        Ok(())
    }

    fn shop_customer_ids(&mut self, shop_id: ShopId) -> StoreResult<Vec<CustomerId>> {
        Ok((self.entities.iter())
            .filter(|e| is_customer(e, shop_id))
            .map(|e| CustomerId(e.record.id))
            .collect())
    }

    fn mark_shop_redacted(&mut self, shop_id: ShopId, now: Timestamp) -> StoreResult<()> {
        if let Some(shop) = self.shops.iter_mut().find(|s| s.id == shop_id) {
            shop.pii_redacted_at.get_or_insert(now);
        }
        Ok(())
    }

    fn customer_rows(
        &mut self,
        _shop_id: ShopId,
        record: &PersonalRecord,
    ) -> StoreResult<Vec<(&'static str, Vec<serde_json::Value>)>> {
        let customer = serde_json::json!({
            "id": record.customer_id.0,
            "email": record.email,
            "first_name": record.first_name,
            "last_name": record.last_name,
            "phone": record.phone,
        });
        let addresses = (record.addresses.iter())
            .map(|(id, document)| serde_json::json!({"id": id, "document": document}))
            .collect();
        Ok(vec![
            ("platform_customers", vec![customer]),
            ("customer_addresses", addresses),
        ])
    }
}
