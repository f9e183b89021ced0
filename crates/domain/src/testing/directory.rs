//! The customer directory, in memory.

use super::{MemoryEntity, MemoryState};
use crate::directory::*;
use crate::directory::{DirectoryAddress, DirectoryCustomer, DirectoryPage, DirectoryQuery, Label};
use crate::kernel::error::StoreResult;
use crate::kernel::time::Timestamp;
use crate::platform::events::{EntityDocument, EntityKind};

impl MemoryState {
    pub(super) fn directory_entry(entity: &MemoryEntity) -> DirectoryCustomer {
        let customer = match &entity.document {
            Some(EntityDocument::Customer(customer)) => Some(&**customer),
            _ => None,
        };
        let field = |pick: fn(&crate::platform::resources::Customer) -> &Option<String>| {
            customer.and_then(|c| pick(c).clone())
        };
        DirectoryCustomer {
            id: entity.record.id,
            platform_id: Some(entity.platform_id.clone()),
            email: field(|c| &c.email),
            first_name: field(|c| &c.first_name),
            last_name: field(|c| &c.last_name),
            phone: field(|c| &c.phone),
            platform_created_at: customer.and_then(|c| c.platform_created_at),
            created_at: entity.created_at,
            updated_at: entity.updated_at,
            deleted_at: entity.record.platform_deleted_at.map(|_| entity.updated_at),
        }
    }
}

/// The memory directory lists every live customer by id and ignores the query's filters,
/// sorting and paging: those are SQL, tested against both real databases.
impl DirectoryRepository for MemoryState {
    fn list_directory_customers(
        &mut self,
        shop_id: i64,
        _query: &DirectoryQuery,
    ) -> StoreResult<DirectoryPage> {
        let customers: Vec<DirectoryCustomer> = self
            .entities
            .iter()
            .filter(|e| {
                e.shop_id == shop_id
                    && e.kind == EntityKind::Customer
                    && e.record.platform_deleted_at.is_none()
            })
            .map(MemoryState::directory_entry)
            .collect();
        Ok(DirectoryPage {
            total: customers.len() as i64,
            customers,
        })
    }

    fn directory_customer(
        &mut self,
        shop_id: i64,
        id: i64,
    ) -> StoreResult<Option<DirectoryCustomer>> {
        Ok(self
            .entities
            .iter()
            .find(|e| e.shop_id == shop_id && e.kind == EntityKind::Customer && e.record.id == id)
            .map(MemoryState::directory_entry))
    }

    fn directory_customer_by_platform_id(
        &mut self,
        shop_id: i64,
        platform_id: &str,
    ) -> StoreResult<Option<DirectoryCustomer>> {
        Ok(self
            .entity_mut(shop_id, EntityKind::Customer, platform_id)
            .map(|e| MemoryState::directory_entry(e)))
    }

    fn addresses_of_customers(
        &mut self,
        _shop_id: i64,
        _customer_ids: &[i64],
    ) -> StoreResult<Vec<DirectoryAddress>> {
        Ok(Vec::new())
    }

    fn labels_of_customers(
        &mut self,
        shop_id: i64,
        customer_ids: &[i64],
    ) -> StoreResult<Vec<Label>> {
        let _ = shop_id;
        Ok(self
            .labels
            .iter()
            .filter(|l| customer_ids.contains(&l.customer_id) && l.deleted_at.is_none())
            .cloned()
            .collect())
    }

    fn insert_label(
        &mut self,
        _shop_id: i64,
        customer_id: i64,
        name: &str,
        now: Timestamp,
    ) -> StoreResult<Label> {
        let label = Label {
            id: self.labels.len() as i64 + 1,
            customer_id,
            name: name.to_string(),
            created_at: now,
            updated_at: now,
            deleted_at: None,
        };
        self.labels.push(label.clone());
        Ok(label)
    }

    fn delete_label(
        &mut self,
        _shop_id: i64,
        customer_id: i64,
        label_id: i64,
        now: Timestamp,
    ) -> StoreResult<bool> {
        match self
            .labels
            .iter_mut()
            .find(|l| l.id == label_id && l.customer_id == customer_id && l.deleted_at.is_none())
        {
            Some(label) => {
                label.deleted_at = Some(now);
                Ok(true)
            }
            None => Ok(false),
        }
    }
}
