//! What the headless checkout needs from storage.

use crate::checkout::state::CheckoutDocument;
use crate::kernel::error::StoreResult;
use crate::kernel::ids::{CheckoutOrderId, ShopId};
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, strum::IntoStaticStr, strum::EnumString)]
#[strum(serialize_all = "snake_case")]
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
    /// The status as stored (`open`, `processed`, `created`, `failed`).
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    /// Every status, in the order a checkout goes through them.
    pub const ALL: [CheckoutStatus; 4] = [
        CheckoutStatus::Open,
        CheckoutStatus::Processed,
        CheckoutStatus::Created,
        CheckoutStatus::Failed,
    ];

    /// The status stored as `text`, if it is one.
    pub fn parse(text: &str) -> Option<CheckoutStatus> {
        text.parse().ok()
    }
}

/// A stored checkout.
#[derive(Debug, Clone, PartialEq)]
pub struct CheckoutOrder {
    /// The checkout's id (the service's integer).
    pub id: CheckoutOrderId,
    /// The id of the shop the checkout belongs to (the service's integer).
    pub shop_id: ShopId,
    /// The order's id at the storefront (32 random hex digits): its token and links name it.
    pub public_order_id: String,
    /// Where the checkout is.
    pub status: CheckoutStatus,
    /// The platform's id of the order, once the platform has it.
    pub platform_order_id: Option<String>,
    /// The last change made at the storefront.
    pub last_activity_at: Timestamp,
    /// When `order/abandoned` was sent for the checkout; none until then.
    pub abandoned_at: Option<Timestamp>,
    /// When `order/fulfilled` was sent for the checkout; none until then.
    pub fulfilled_at: Option<Timestamp>,
    /// Bumped by every save: a change computed from an older read is refused.
    pub version: i64,
    /// The order itself: items, customer, addresses, shipping, payments and the rest.
    pub document: CheckoutDocument,
    /// When Init Order made the checkout.
    pub created_at: Timestamp,
    /// When the checkout last changed.
    pub updated_at: Timestamp,
}

/// A checkout about to be stored.
#[derive(Debug, Clone, PartialEq)]
pub struct NewCheckoutOrder {
    /// The id of the shop the checkout belongs to (the service's integer).
    pub shop_id: ShopId,
    /// The order's id at the storefront (32 random hex digits).
    pub public_order_id: String,
    /// The order as Init Order made it.
    pub document: CheckoutDocument,
    /// When Init Order made the checkout; also its first activity and update.
    pub created_at: Timestamp,
}

/// The checkouts of shops (`checkout_orders`, migration 11).
pub trait CheckoutRepository {
    /// Stores a new open checkout at version 1 and answers it as stored.
    fn insert_checkout_order(&mut self, new: &NewCheckoutOrder) -> StoreResult<CheckoutOrder>;
    /// The shop's checkout with this storefront id, if there is one.
    fn checkout_order(
        &mut self,
        shop_id: ShopId,
        public_order_id: &str,
    ) -> StoreResult<Option<CheckoutOrder>>;
    /// The checkout with this id (the service's integer), if there is one.
    fn checkout_order_by_id(&mut self, id: CheckoutOrderId) -> StoreResult<Option<CheckoutOrder>>;
    /// Writes the order's status, platform order id, times and document, and the version
    /// after `order.version`, if the stored version is still `order.version`; false (and
    /// nothing written) otherwise.
    fn save_checkout_order(&mut self, order: &CheckoutOrder) -> StoreResult<bool>;
    /// The shop's checkout whose platform order this is.
    fn checkout_order_of_platform_order(
        &mut self,
        shop_id: ShopId,
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
    /// The shop's checkouts, newest first, of one status or all, older than the checkout
    /// `before` (a page's cursor).
    fn checkout_orders_of_shop(
        &mut self,
        shop_id: ShopId,
        status: Option<CheckoutStatus>,
        before: Option<CheckoutOrderId>,
        limit: usize,
    ) -> StoreResult<Vec<CheckoutOrder>>;
}
