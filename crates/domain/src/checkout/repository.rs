//! What the headless checkout needs from storage.

use crate::checkout::state::CheckoutDocument;
use crate::kernel::error::StoreResult;
use crate::kernel::time::Timestamp;
use crate::overrides::OverrideRepositories;
use crate::subscriptions::repository::SubscriptionRepositories;

crate::feature_database!(
    /// The database as the checkout sees it.
    CheckoutDatabase,
    CheckoutRepositories
);

/// Every repository the checkout's use cases may touch in one unit of work: its own, the
/// overrides (picked per order), and the subscriptions' (which bring the platform's catalogue,
/// connector destinations, jobs and webhooks).
pub trait CheckoutRepositories:
    SubscriptionRepositories + OverrideRepositories + CheckoutRepository
{
}

impl<T> CheckoutRepositories for T where
    T: SubscriptionRepositories + OverrideRepositories + CheckoutRepository + ?Sized
{
}

/// Where a checkout is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CheckoutStatus {
    /// At the storefront: it may change.
    Open,
    /// Process Order went through; the order is being pushed to the platform.
    Processed,
    /// The platform has the order.
    Created,
    /// Pushing it to the platform failed for good.
    Failed,
}

impl CheckoutStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            CheckoutStatus::Open => "open",
            CheckoutStatus::Processed => "processed",
            CheckoutStatus::Created => "created",
            CheckoutStatus::Failed => "failed",
        }
    }

    pub fn parse(text: &str) -> Option<CheckoutStatus> {
        [
            CheckoutStatus::Open,
            CheckoutStatus::Processed,
            CheckoutStatus::Created,
            CheckoutStatus::Failed,
        ]
        .into_iter()
        .find(|status| status.as_str() == text)
    }
}

/// A stored checkout.
#[derive(Debug, Clone, PartialEq)]
pub struct CheckoutOrder {
    pub id: i64,
    pub shop_id: i64,
    pub public_order_id: String,
    pub status: CheckoutStatus,
    pub platform_order_id: Option<String>,
    /// The last change made at the storefront.
    pub last_activity_at: Timestamp,
    pub abandoned_at: Option<Timestamp>,
    pub fulfilled_at: Option<Timestamp>,
    /// Bumped by every save: a change computed from an older read is refused.
    pub version: i64,
    pub document: CheckoutDocument,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

/// A checkout about to be stored.
#[derive(Debug, Clone, PartialEq)]
pub struct NewCheckoutOrder {
    pub shop_id: i64,
    pub public_order_id: String,
    pub document: CheckoutDocument,
    pub created_at: Timestamp,
}

/// The checkouts of shops (`checkout_orders`, migration 11).
pub trait CheckoutRepository {
    fn insert_checkout_order(&mut self, new: &NewCheckoutOrder) -> StoreResult<CheckoutOrder>;
    fn checkout_order(
        &mut self,
        shop_id: i64,
        public_order_id: &str,
    ) -> StoreResult<Option<CheckoutOrder>>;
    fn checkout_order_by_id(&mut self, id: i64) -> StoreResult<Option<CheckoutOrder>>;
    /// Writes the order's status, platform order id, times and document, and the version
    /// after `order.version`, if the stored version is still `order.version`; false (and
    /// nothing written) otherwise.
    fn save_checkout_order(&mut self, order: &CheckoutOrder) -> StoreResult<bool>;
    /// The shop's checkout whose platform order this is.
    fn checkout_order_of_platform_order(
        &mut self,
        shop_id: i64,
        platform_order_id: &str,
    ) -> StoreResult<Option<CheckoutOrder>>;
    /// Up to `limit` open checkouts, of shops whose built-in abandoned-cart emails are off,
    /// with items and an email, untouched since `idle_since` and not reported abandoned yet;
    /// the longest untouched first.
    fn abandoned_checkout_orders(
        &mut self,
        idle_since: Timestamp,
        limit: usize,
    ) -> StoreResult<Vec<CheckoutOrder>>;
}
