//! What the operator console shows of a shop's subscriptions: the due report (as `mercer
//! subscriptions due` prints it) and a subscription's history, its status log and order attempts,
//! with the shop's dunning policy they follow.

use crate::access::shop::Shop;
use crate::kernel::error::DomainError;
use crate::kernel::ids::SubscriptionId;
use crate::subscriptions::dunning::{ShopDunning, shop_dunning};
use crate::subscriptions::repository::{
    StoredSubscription, SubscriptionOrder, SubscriptionRepositories,
};
use crate::subscriptions::resources::StatusLog;

/// A subscription with what happened to it, newest first.
#[derive(Debug, Clone)]
pub struct SubscriptionHistory {
    /// The subscription as stored.
    pub subscription: StoredSubscription,
    /// Its status log, newest first.
    pub status_logs: Vec<StatusLog>,
    /// Its order attempts, newest first.
    pub orders: Vec<SubscriptionOrder>,
    /// The shop's dunning policy: how many retries a failed order gets, and what follows.
    pub dunning: ShopDunning,
}

/// The shop's subscription `id` with its latest `limit` status log entries and order attempts;
/// another shop's is `not_found`.
pub fn history(
    tx: &mut dyn SubscriptionRepositories,
    shop: &Shop,
    id: SubscriptionId,
    limit: usize,
) -> Result<SubscriptionHistory, DomainError> {
    let stored = tx
        .subscription(shop.id, id)?
        .ok_or_else(|| DomainError::not_found("subscription"))?;
    Ok(SubscriptionHistory {
        status_logs: tx.status_logs_of_subscription(shop.id, id, limit)?,
        orders: tx.orders_of_subscriptions(&[id], limit)?,
        dunning: shop_dunning(tx, shop)?,
        subscription: stored,
    })
}
