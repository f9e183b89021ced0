//! A platform in memory behind the connector port, for use-case tests of what places orders
//! (the subscription scheduler, the checkout's push).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::platform::connector::{
    ConnectorError, ConnectorResult, ConnectorTarget, Page, PlatformConnector, VerificationAnswer,
    VerificationProof,
};
use crate::platform::resources::{
    Category, Customer, CustomerAddress, Order, Payment, PlatformId, Product,
};

/// What a platform that pushes its own changes does with a customer it saved.
pub type OnCustomerSaved = Arc<dyn Fn(&Customer) + Send + Sync>;

/// What the platform holds and was asked.
#[derive(Default)]
pub struct PlatformState {
    /// The orders created, with their payments (platform ids `ord-1`, `ord-2`…).
    pub orders: Vec<Order>,
    /// The index in `orders` of the order created with each idempotency key.
    pub by_key: HashMap<String, usize>,
    /// The idempotency key of every Create Order call, in order (empty for a call without one).
    pub create_order_calls: Vec<String>,
    /// How many Create Payment calls were made.
    pub payment_calls: usize,
    /// How many Get Order calls were made.
    pub get_order_calls: usize,
    /// The next this-many Create Order calls fail with 500.
    pub failing_orders: usize,
    /// Create Order calls time out (after creating the order, as a slow platform would).
    pub timing_out: bool,
    /// The next this-many Create Payment calls charge, then time out before answering.
    pub lost_payment_answers: usize,
    /// The tokens issued to customers: token → the customer's platform id.
    pub customer_tokens: HashMap<String, String>,
    /// Validate Customer JWT fails this way, when set.
    pub failing_token_checks: Option<ConnectorError>,
    /// How many Validate Customer JWT calls were made.
    pub token_checks: usize,
    /// The customers created (platform ids `cus-1`, `cus-2`…), with the addresses created for
    /// them (`adr-1`, `adr-2`…).
    pub customers: Vec<Customer>,
    /// How many addresses were created.
    pub address_count: usize,
    /// Called with the customer as saved, after each Create Customer and Create Address and
    /// before the answer: a platform that pushes its own Saved event of every change, which may
    /// reach Mercer before the answer does.
    pub on_customer_saved: Option<OnCustomerSaved>,
}

/// A platform in memory: Create Order is idempotent by key; a payment with token
/// `tok_decline` is declined.
#[derive(Default)]
pub struct MemoryPlatform(Mutex<PlatformState>);

impl MemoryPlatform {
    /// Lets a test read or set up the platform's state.
    pub fn state<T>(&self, f: impl FnOnce(&mut PlatformState) -> T) -> T {
        f(&mut self
            .0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner()))
    }

    /// Every payment made on every order, in order.
    pub fn payments(&self) -> Vec<Payment> {
        self.state(|s| {
            s.orders
                .iter()
                .flat_map(|o| o.payments.clone().unwrap_or_default())
                .collect()
        })
    }
}

fn unused<T>() -> ConnectorResult<T> {
    Err(ConnectorError::NotFound)
}

impl PlatformConnector for MemoryPlatform {
    fn verify(&self, _: &ConnectorTarget) -> ConnectorResult<VerificationAnswer> {
        Ok(VerificationAnswer {
            proof: VerificationProof::Valid,
        })
    }
    fn list_customers(
        &self,
        _: &ConnectorTarget,
        _: Option<u32>,
        _: Option<&str>,
        _: Option<&str>,
    ) -> ConnectorResult<Page<Customer>> {
        unused()
    }
    fn create_customer(
        &self,
        _: &ConnectorTarget,
        customer: &Customer,
    ) -> ConnectorResult<Customer> {
        let (created, saved) = self.state(|s| {
            let mut created = customer.clone();
            created.platform_id = Some(PlatformId::new(format!("cus-{}", s.customers.len() + 1)));
            created.addresses.get_or_insert_default();
            s.customers.push(created.clone());
            (created, s.on_customer_saved.clone())
        });
        if let Some(saved) = saved {
            saved(&created);
        }
        Ok(created)
    }
    fn update_customer(
        &self,
        _: &ConnectorTarget,
        _: &str,
        _: &Customer,
    ) -> ConnectorResult<Customer> {
        unused()
    }
    fn delete_customer(&self, _: &ConnectorTarget, _: &str) -> ConnectorResult<()> {
        unused()
    }
    fn validate_customer_jwt(
        &self,
        _: &ConnectorTarget,
        platform_id: &str,
        token: &str,
    ) -> ConnectorResult<bool> {
        self.state(|s| {
            s.token_checks += 1;
            match &s.failing_token_checks {
                Some(error) => Err(error.clone()),
                None => Ok(s.customer_tokens.get(token).map(String::as_str) == Some(platform_id)),
            }
        })
    }
    fn create_address(
        &self,
        _: &ConnectorTarget,
        customer_id: &str,
        address: &CustomerAddress,
    ) -> ConnectorResult<CustomerAddress> {
        let (created, customer, saved) = self.state(|s| {
            let customer = s
                .customers
                .iter_mut()
                .find(|c| c.platform_id.as_ref().map(PlatformId::as_str) == Some(customer_id))
                .ok_or(ConnectorError::NotFound)?;
            let mut created = address.clone();
            created.platform_id = Some(PlatformId::new(format!("adr-{}", s.address_count + 1)));
            customer
                .addresses
                .get_or_insert_default()
                .push(created.clone());
            let customer = customer.clone();
            s.address_count += 1;
            Ok((created, customer, s.on_customer_saved.clone()))
        })?;
        if let Some(saved) = saved {
            saved(&customer);
        }
        Ok(created)
    }
    fn update_address(
        &self,
        _: &ConnectorTarget,
        _: &str,
        _: &str,
        _: &CustomerAddress,
    ) -> ConnectorResult<CustomerAddress> {
        unused()
    }
    fn delete_address(&self, _: &ConnectorTarget, _: &str, _: &str) -> ConnectorResult<()> {
        unused()
    }
    fn list_orders(
        &self,
        _: &ConnectorTarget,
        _: Option<u32>,
        _: Option<&str>,
    ) -> ConnectorResult<Page<Order>> {
        unused()
    }
    fn create_order(
        &self,
        _: &ConnectorTarget,
        order: &Order,
        key: Option<&str>,
    ) -> ConnectorResult<Order> {
        self.state(|s| {
            let key = key.unwrap_or_default().to_string();
            s.create_order_calls.push(key.clone());
            if s.failing_orders > 0 {
                s.failing_orders -= 1;
                return Err(ConnectorError::Failed { status: 500 });
            }
            let index = match s.by_key.get(&key) {
                Some(index) => *index,
                None => {
                    let mut order = order.clone();
                    order.platform_id =
                        Some(PlatformId::new(format!("ord-{}", s.orders.len() + 1)));
                    s.orders.push(order);
                    s.by_key.insert(key, s.orders.len() - 1);
                    s.orders.len() - 1
                }
            };
            if s.timing_out {
                return Err(ConnectorError::Timeout(std::time::Duration::from_secs(20)));
            }
            Ok(s.orders[index].clone())
        })
    }
    fn get_order(&self, _: &ConnectorTarget, platform_id: &str) -> ConnectorResult<Order> {
        self.state(|s| {
            s.get_order_calls += 1;
            s.orders
                .iter()
                .find(|o| o.platform_id.as_ref().map(PlatformId::as_str) == Some(platform_id))
                .cloned()
                .ok_or(ConnectorError::NotFound)
        })
    }
    fn update_order(&self, _: &ConnectorTarget, _: &str, _: &Order) -> ConnectorResult<Order> {
        unused()
    }
    fn create_payment(
        &self,
        _: &ConnectorTarget,
        platform_order_id: &str,
        payment: &Payment,
    ) -> ConnectorResult<Payment> {
        self.state(|s| {
            s.payment_calls += 1;
            let mut payment = payment.clone();
            payment.platform_id = Some(PlatformId::new(format!("pay-{}", s.payment_calls)));
            payment.status = Some(
                if payment.payment_method.as_deref() == Some("tok_decline") {
                    "declined"
                } else {
                    "paid"
                }
                .to_string(),
            );
            let order = s
                .orders
                .iter_mut()
                .find(|o| o.platform_id.as_ref().map(PlatformId::as_str) == Some(platform_order_id))
                .ok_or(ConnectorError::NotFound)?;
            order.payments.get_or_insert_default().push(payment.clone());
            if s.lost_payment_answers > 0 {
                s.lost_payment_answers -= 1;
                return Err(ConnectorError::Timeout(std::time::Duration::from_secs(20)));
            }
            Ok(payment)
        })
    }

    fn list_products(
        &self,
        _: &ConnectorTarget,
        _: Option<u32>,
        _: Option<&str>,
    ) -> ConnectorResult<Page<Product>> {
        unused()
    }

    fn list_categories(
        &self,
        _: &ConnectorTarget,
        _: Option<u32>,
        _: Option<&str>,
    ) -> ConnectorResult<Page<Category>> {
        unused()
    }
}
