//! The customer directory, in memory.

use super::{MemoryAddress, MemoryEntity, MemoryLabel, MemoryState};
use crate::directory::*;
use crate::directory::{DirectoryAddress, DirectoryCustomer, DirectoryPage, DirectoryQuery, Label};
use crate::kernel::error::StoreResult;
use crate::kernel::ids::ShopId;
use crate::kernel::ids::{AddressId, CustomerId, LabelId};
use crate::kernel::time::Timestamp;
use crate::platform::events::{EntityDocument, EntityKind};
use crate::platform::resources::CustomerAddress;

/// An address row as the directory reads it, as the store does: the fields from its document,
/// the owning customer's platform id as `platform_customer_id` whatever the document says.
/// An address made by the subscription API under a customer without a platform id has none.
fn directory_address(row: &MemoryAddress, customer_platform_id: Option<&str>) -> DirectoryAddress {
    let address: CustomerAddress = serde_json::from_str(&row.row.document).unwrap_or_default();
    DirectoryAddress {
        id: AddressId(row.id),
        customer_id: CustomerId(row.customer_id),
        platform_id: row.row.platform_id.clone(),
        platform_customer_id: customer_platform_id
            .filter(|id| !id.is_empty())
            .map(str::to_string),
        first_name: address.first_name,
        last_name: address.last_name,
        company: address.company,
        phone: address.phone,
        street_1: address.street_1,
        street_2: address.street_2,
        city: address.city,
        province: address.province,
        province_code: address.province_code,
        zip: address.postal_code,
        country: address.country,
        country_code: address.country_code,
        address_type: address.address_type,
        address_use: address.address_use,
        is_default: row.row.is_default,
        created_at: row.created_at,
        updated_at: row.updated_at,
        deleted_at: row.deleted_at,
    }
}

impl MemoryState {
    pub(super) fn directory_entry(entity: &MemoryEntity) -> DirectoryCustomer {
        let customer = match &entity.document {
            Some(EntityDocument::Customer(customer)) => Some(&**customer),
            _ => None,
        };
        // As the store's columns: an empty text is no text.
        let field = |text: &String| Some(text.clone()).filter(|text| !text.is_empty());
        let columns = &entity.columns;
        DirectoryCustomer {
            id: CustomerId(entity.record.id),
            platform_id: entity.platform_id.clone(),
            email: field(&columns.email),
            first_name: field(&columns.first_name),
            last_name: field(&columns.last_name),
            phone: field(&columns.phone),
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
        shop_id: ShopId,
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
        shop_id: ShopId,
        id: CustomerId,
    ) -> StoreResult<Option<DirectoryCustomer>> {
        Ok(self
            .entities
            .iter()
            .find(|e| e.shop_id == shop_id && e.kind == EntityKind::Customer && e.record.id == id.0)
            .map(MemoryState::directory_entry))
    }

    fn directory_customers_by_ids(
        &mut self,
        shop_id: ShopId,
        ids: &[CustomerId],
    ) -> StoreResult<Vec<DirectoryCustomer>> {
        let mut customers: Vec<DirectoryCustomer> = self
            .entities
            .iter()
            .filter(|e| {
                e.shop_id == shop_id
                    && e.kind == EntityKind::Customer
                    && ids.contains(&CustomerId(e.record.id))
            })
            .map(MemoryState::directory_entry)
            .collect();
        customers.sort_by_key(|customer| customer.id);
        Ok(customers)
    }

    fn directory_customer_by_platform_id(
        &mut self,
        shop_id: ShopId,
        platform_id: &str,
    ) -> StoreResult<Option<DirectoryCustomer>> {
        Ok(self
            .entity_mut(shop_id, EntityKind::Customer, platform_id)
            .map(|e| MemoryState::directory_entry(e)))
    }

    fn addresses_of_customers(
        &mut self,
        shop_id: ShopId,
        customer_ids: &[CustomerId],
    ) -> StoreResult<Vec<DirectoryAddress>> {
        let mut rows: Vec<&MemoryAddress> = self
            .addresses
            .iter()
            .filter(|a| {
                a.shop_id == shop_id
                    && customer_ids.contains(&CustomerId(a.customer_id))
                    && a.deleted_at.is_none()
            })
            .collect();
        rows.sort_by_key(|a| (a.customer_id, a.id));
        Ok(rows
            .into_iter()
            .filter_map(|row| {
                let customer = self
                    .entities
                    .iter()
                    .find(|e| e.kind == EntityKind::Customer && e.record.id == row.customer_id)?;
                Some(directory_address(row, customer.platform_id.as_deref()))
            })
            .collect())
    }

    fn labels_of_customers(
        &mut self,
        shop_id: ShopId,
        customer_ids: &[CustomerId],
    ) -> StoreResult<Vec<Label>> {
        let mut labels: Vec<Label> = self
            .labels
            .iter()
            .filter(|l| {
                l.shop_id == shop_id
                    && customer_ids.contains(&l.label.customer_id)
                    && l.label.deleted_at.is_none()
            })
            .map(|l| l.label.clone())
            .collect();
        labels.sort_by_key(|l| (l.customer_id, l.id));
        Ok(labels)
    }

    fn groups_of_customers(
        &mut self,
        shop_id: ShopId,
        customer_ids: &[CustomerId],
    ) -> StoreResult<Vec<CustomerGroupMembership>> {
        // The members' set is ordered by customer then group id, as the store answers.
        Ok(self
            .customer_group_members
            .iter()
            .filter(|(customer, _)| customer_ids.contains(customer))
            .filter_map(|(customer, group)| {
                let group = self
                    .customer_groups
                    .iter()
                    .find(|g| g.id == *group && g.shop_id == shop_id)?;
                Some(CustomerGroupMembership {
                    customer_id: *customer,
                    id: group.id,
                    platform_id: group.platform_id.clone(),
                    name: group.name.clone(),
                    created_at: group.created_at,
                    updated_at: group.updated_at,
                })
            })
            .collect())
    }

    fn insert_label(
        &mut self,
        shop_id: ShopId,
        customer_id: CustomerId,
        name: &str,
        now: Timestamp,
    ) -> StoreResult<Label> {
        let label = Label {
            id: LabelId(self.labels.len() as i64 + 1),
            customer_id,
            name: name.to_string(),
            created_at: now,
            updated_at: now,
            deleted_at: None,
        };
        self.labels.push(MemoryLabel {
            shop_id,
            label: label.clone(),
        });
        Ok(label)
    }

    fn delete_label(
        &mut self,
        shop_id: ShopId,
        customer_id: CustomerId,
        label_id: LabelId,
        now: Timestamp,
    ) -> StoreResult<bool> {
        match self
            .labels
            .iter_mut()
            .map(|l| (l.shop_id, &mut l.label))
            .find(|(shop, l)| {
                *shop == shop_id
                    && l.id == label_id
                    && l.customer_id == customer_id
                    && l.deleted_at.is_none()
            }) {
            Some((_, label)) => {
                label.deleted_at = Some(now);
                label.updated_at = now;
                Ok(true)
            }
            None => Ok(false),
        }
    }
}
