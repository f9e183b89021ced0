//! What the customer directory needs from storage.

use crate::access::AccessRepositories;
use crate::directory::{
    CustomerGroupMembership, DirectoryAddress, DirectoryCustomer, DirectoryPage, DirectoryQuery,
    Label,
};
use crate::kernel::error::StoreResult;
use crate::kernel::ids::ShopId;
use crate::kernel::ids::{CustomerId, LabelId};
use crate::kernel::time::Timestamp;

crate::feature_database!(
    /// The database as directory sees it.
    DirectoryDatabase,
    DirectoryRepositories
);

/// Every repository the directory's use cases may touch in one unit of work.
pub trait DirectoryRepositories: AccessRepositories + DirectoryRepository {}

impl<T> DirectoryRepositories for T where T: AccessRepositories + DirectoryRepository + ?Sized {}

/// The shop's customers as the directory shows them, with their addresses, labels and groups.
pub trait DirectoryRepository {
    /// One page of the shop's live customers that match the query, in its order, and their total.
    fn list_directory_customers(
        &mut self,
        shop_id: ShopId,
        query: &DirectoryQuery,
    ) -> StoreResult<DirectoryPage>;
    /// A customer of the shop, deleted or not.
    fn directory_customer(
        &mut self,
        shop_id: ShopId,
        id: CustomerId,
    ) -> StoreResult<Option<DirectoryCustomer>>;
    /// The shop's customers of these ids, deleted or not, by id (unknown ids left out).
    fn directory_customers_by_ids(
        &mut self,
        shop_id: ShopId,
        ids: &[CustomerId],
    ) -> StoreResult<Vec<DirectoryCustomer>>;
    /// The shop's customer with this platform id, deleted or not.
    fn directory_customer_by_platform_id(
        &mut self,
        shop_id: ShopId,
        platform_id: &str,
    ) -> StoreResult<Option<DirectoryCustomer>>;
    /// The live addresses of these customers, by customer then id.
    fn addresses_of_customers(
        &mut self,
        shop_id: ShopId,
        customer_ids: &[CustomerId],
    ) -> StoreResult<Vec<DirectoryAddress>>;
    /// The live labels of these customers, by customer then id.
    fn labels_of_customers(
        &mut self,
        shop_id: ShopId,
        customer_ids: &[CustomerId],
    ) -> StoreResult<Vec<Label>>;
    /// The customer groups these customers belong to, each with its customer, by customer then
    /// group id (the directory orders each customer's by name).
    fn groups_of_customers(
        &mut self,
        shop_id: ShopId,
        customer_ids: &[CustomerId],
    ) -> StoreResult<Vec<CustomerGroupMembership>>;
    /// Adds a label to a customer and returns it.
    fn insert_label(
        &mut self,
        shop_id: ShopId,
        customer_id: CustomerId,
        name: &str,
        now: Timestamp,
    ) -> StoreResult<Label>;
    /// Marks a live label deleted; false when there is none.
    fn delete_label(
        &mut self,
        shop_id: ShopId,
        customer_id: CustomerId,
        label_id: LabelId,
        now: Timestamp,
    ) -> StoreResult<bool>;
}
