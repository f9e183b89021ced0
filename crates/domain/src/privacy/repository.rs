//! What privacy requests need from storage.

use crate::access::AccessRepositories;
use crate::kernel::error::StoreResult;
use crate::kernel::ids::{CustomerId, ShopId};
use crate::kernel::time::Timestamp;

crate::feature_database!(
    /// The database as privacy requests see it.
    PrivacyDatabase,
    PrivacyRepositories
);

/// Every repository a privacy request may touch in one unit of work.
pub trait PrivacyRepositories: AccessRepositories + PrivacyRepository {}

impl<T> PrivacyRepositories for T where T: AccessRepositories + PrivacyRepository + ?Sized {}

/// A customer's personal data as stored: the customer record and their addresses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PersonalRecord {
    /// The customer's row id.
    pub customer_id: CustomerId,
    /// The customer's platform id, when the platform gave one.
    pub platform_id: Option<String>,
    /// The customer's email address.
    pub email: String,
    /// The customer's first name.
    pub first_name: String,
    /// The customer's last name.
    pub last_name: String,
    /// The customer's phone number.
    pub phone: String,
    /// When the customer's personal data was erased, if it was.
    pub pii_redacted_at: Option<Timestamp>,
    /// The customer record's JSON document, if it has one.
    pub document: Option<String>,
    /// The customer's addresses: row id and JSON document.
    pub addresses: Vec<(i64, String)>,
}

/// Whether a stored text belongs to the customer (every personal field in it is theirs) or
/// only mentions them (among other people's data).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CellKind {
    /// A record of the customer's own (their checkout, their platform orders).
    Owned,
    /// Any other text that mentions the customer.
    Mentions,
}

/// One stored text value (a column of one row) that mentions the customer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TextCell {
    /// The table.
    pub table: &'static str,
    /// The column.
    pub column: &'static str,
    /// The row's id.
    pub id: i64,
    /// The stored text.
    pub text: String,
    /// Whether the row belongs to the customer.
    pub kind: CellKind,
}

/// Privacy requests' own storage.
pub trait PrivacyRepository {
    /// The shop's customer `customer` with their addresses, if there is one.
    fn personal_record(
        &mut self,
        shop_id: ShopId,
        customer: CustomerId,
    ) -> StoreResult<Option<PersonalRecord>>;
    /// Every stored text of the shop (outside the customer record and their addresses) whose
    /// lower-cased text contains one of `needles` (lower-case), and the customer's own
    /// checkouts (those under `email`) and platform orders (under `platform_id`).
    fn cells_mentioning(
        &mut self,
        shop_id: ShopId,
        email: &str,
        platform_id: Option<&str>,
        needles: &[String],
    ) -> StoreResult<Vec<TextCell>>;
    /// Writes `cell.text` back to its table, column and row.
    fn rewrite_cell(&mut self, cell: &TextCell) -> StoreResult<()>;
    /// Writes the customer's erased record: the columns and document of `erased`, the address documents,
    /// no notes on the customer or their subscriptions, no portal sessions, and
    /// `pii_redacted_at = now`.
    fn erase_customer(
        &mut self,
        shop_id: ShopId,
        erased: &PersonalRecord,
        now: Timestamp,
    ) -> StoreResult<()>;
    /// The ids of every customer of the shop.
    fn shop_customer_ids(&mut self, shop_id: ShopId) -> StoreResult<Vec<CustomerId>>;
    /// Sets the shop's `pii_redacted_at` to `now`, unless it is set already.
    fn mark_shop_redacted(&mut self, shop_id: ShopId, now: Timestamp) -> StoreResult<()>;
    /// Everything stored about the customer, by table name: each row as a JSON object.
    fn customer_rows(
        &mut self,
        shop_id: ShopId,
        record: &PersonalRecord,
    ) -> StoreResult<Vec<(&'static str, Vec<serde_json::Value>)>>;
}
