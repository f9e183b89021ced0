use super::MemoryState;
use crate::checkout::repository::{
    CheckoutOrder, CheckoutRepository, CheckoutStatus, NewCheckoutOrder,
};
use crate::kernel::error::{StorageError, StoreResult};
use crate::kernel::ids::{CheckoutOrderId, ShopId};
use crate::kernel::time::Timestamp;

impl CheckoutRepository for MemoryState {
    fn insert_checkout_order(&mut self, new: &NewCheckoutOrder) -> StoreResult<CheckoutOrder> {
        if self
            .checkout_orders
            .iter()
            .any(|order| order.public_order_id == new.public_order_id)
        {
            return Err(StorageError::unique_violation("the public_order_id"));
        }
        let order = CheckoutOrder {
            id: CheckoutOrderId(self.checkout_orders.len() as i64 + 1),
            shop_id: new.shop_id,
            public_order_id: new.public_order_id.clone(),
            status: CheckoutStatus::Open,
            platform_order_id: None,
            last_activity_at: new.created_at,
            abandoned_at: None,
            fulfilled_at: None,
            version: 1,
            document: new.document.clone(),
            created_at: new.created_at,
            updated_at: new.created_at,
        };
        self.checkout_orders.push(order.clone());
        Ok(order)
    }

    fn checkout_order(
        &mut self,
        shop_id: ShopId,
        public_order_id: &str,
    ) -> StoreResult<Option<CheckoutOrder>> {
        Ok(self
            .checkout_orders
            .iter()
            .find(|order| order.shop_id == shop_id && order.public_order_id == public_order_id)
            .cloned())
    }

    fn checkout_order_by_id(&mut self, id: CheckoutOrderId) -> StoreResult<Option<CheckoutOrder>> {
        Ok(self
            .checkout_orders
            .iter()
            .find(|order| order.id == id)
            .cloned())
    }

    fn save_checkout_order(&mut self, order: &CheckoutOrder) -> StoreResult<bool> {
        let Some(stored) = self
            .checkout_orders
            .iter_mut()
            .find(|stored| stored.id == order.id && stored.version == order.version)
        else {
            return Ok(false);
        };
        *stored = CheckoutOrder {
            version: order.version + 1,
            ..order.clone()
        };
        Ok(true)
    }

    fn checkout_order_of_platform_order(
        &mut self,
        shop_id: ShopId,
        platform_order_id: &str,
    ) -> StoreResult<Option<CheckoutOrder>> {
        Ok(self
            .checkout_orders
            .iter()
            .find(|order| {
                order.shop_id == shop_id
                    && order.platform_order_id.as_deref() == Some(platform_order_id)
            })
            .cloned())
    }

    fn abandoned_checkout_orders(
        &mut self,
        idle_since: Timestamp,
        limit: usize,
    ) -> StoreResult<Vec<CheckoutOrder>> {
        let emails_off: Vec<ShopId> = self
            .shops
            .iter()
            .filter(|shop| !shop.checkout.abandoned_cart_emails)
            .map(|shop| shop.id)
            .collect();
        let mut found: Vec<CheckoutOrder> = self
            .checkout_orders
            .iter()
            .filter(|order| {
                order.status == CheckoutStatus::Open
                    && order.abandoned_at.is_none()
                    && order.last_activity_at <= idle_since
                    && order.document.email().is_some()
                    && !order.document.line_items.is_empty()
                    && emails_off.contains(&order.shop_id)
            })
            .cloned()
            .collect();
        found.sort_by_key(|order| (order.last_activity_at, order.id));
        found.truncate(limit);
        Ok(found)
    }

    fn checkout_orders_of_shop(
        &mut self,
        shop_id: ShopId,
        status: Option<CheckoutStatus>,
        before: Option<CheckoutOrderId>,
        limit: usize,
    ) -> StoreResult<Vec<CheckoutOrder>> {
        Ok(self
            .checkout_orders
            .iter()
            .rev()
            .filter(|order| {
                order.shop_id == shop_id
                    && status.is_none_or(|status| order.status == status)
                    && before.is_none_or(|before| order.id < before)
            })
            .take(limit)
            .cloned()
            .collect())
    }
}
