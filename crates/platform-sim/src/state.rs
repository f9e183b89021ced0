//! The simulated platform's data and the rules of docs/connector.md section 3: unique ids, partial
//! updates that leave omitted fields alone, ascending `platform_id` pages with opaque cursors,
//! soft deletes (customers and addresses are kept, marked deleted, and answer 404), idempotent
//! Create Order, and a test gateway that declines one token.

use std::collections::{BTreeMap, HashMap};

use mercer_domain::Timestamp;
use mercer_domain::platform::resources::{
    Category, Customer, CustomerAddress, Order, Pagination, Payment, PlatformId, Product,
    Transaction,
};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

/// The payment method (token) the simulated gateway declines.
pub const DECLINED_TOKEN: &str = "tok_decline";

/// Where the simulator pushes events for a shop.
#[derive(Debug, Clone, Serialize)]
pub struct MercerLink {
    pub base_url: String,
    #[serde(skip)]
    pub token: String,
}

#[derive(Debug, Clone, Default)]
pub struct ShopData {
    pub secret: String,
    pub mercer: Option<MercerLink>,
    pub customers: BTreeMap<String, Customer>,
    pub deleted_customers: BTreeMap<String, Customer>,
    /// Deleted addresses, by platform id: marked deleted (kept), gone from their customer.
    pub deleted_addresses: BTreeMap<String, CustomerAddress>,
    pub orders: BTreeMap<String, Order>,
    pub products: BTreeMap<String, Product>,
    pub categories: BTreeMap<String, Category>,
    /// Create Order's Idempotency-Key → the order it created.
    pub idempotency: HashMap<String, String>,
    /// Tokens the platform issued to customers (for Validate Customer JWT).
    pub customer_tokens: HashMap<String, String>,
}

/// What a test can make the simulator do wrong, until it is told to stop.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(default)]
pub struct Faults {
    /// Answer every connector operation with this status.
    pub status: Option<u16>,
    /// With `status`, this `Location` header: a connector that redirects.
    pub location: Option<String>,
    /// Wait this long before answering.
    pub delay_ms: Option<u64>,
    /// Sign the verification answer with a wrong secret.
    pub wrong_hmac: bool,
    /// Prove the secret wrongly in the verification answer (`X-Verification-Proof`).
    pub wrong_proof: bool,
    /// Answer with a body that is not JSON.
    pub malformed_json: bool,
    /// Only the next this-many connector requests misbehave (all of them when absent).
    pub times: Option<u32>,
}

/// One connector request the simulator received, for tests to inspect.
#[derive(Debug, Clone, Serialize)]
pub struct RequestRecord {
    pub method: String,
    pub path: String,
    pub idempotency_key: Option<String>,
    pub status: u16,
    /// The values of its signing headers (`X-HMAC`, `X-Compatible-HMAC`, `Signature-Input`,
    /// `Signature`), for tests that look for them where they must not be (logs).
    #[serde(skip)]
    pub signing_headers: Vec<String>,
}

#[derive(Debug, Default)]
pub struct SimState {
    pub shops: HashMap<String, ShopData>,
    pub faults: Faults,
    /// When set, push a Customer Saved event of the customer to Mercer before answering a
    /// connector's Create Customer or Create Address, as a platform that announces its every
    /// change does (Vendure), then wait this many milliseconds before answering: the event
    /// reaches Mercer before the answer, and is applied meanwhile (on PostgreSQL an applier
    /// applies it after the push is answered).
    pub push_connector_saves: Option<u64>,
    pub requests: Vec<RequestRecord>,
    next_id: u64,
    last_time: i64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SimError {
    NotFound,
    Invalid(String),
}

pub type SimResult<T> = Result<T, SimError>;

/// Cursors are opaque to callers: here, the hex of the last platform id of the page.
fn encode_cursor(platform_id: &str) -> String {
    hex::encode(platform_id)
}

fn decode_cursor(cursor: &str) -> SimResult<String> {
    hex::decode(cursor)
        .ok()
        .and_then(|bytes| String::from_utf8(bytes).ok())
        .ok_or_else(|| SimError::Invalid("unknown cursor".to_string()))
}

/// A page of `items` (ascending by key) after `cursor`.
fn page<T: Clone>(
    items: &BTreeMap<String, T>,
    limit: usize,
    cursor: Option<&str>,
    keep: impl Fn(&T) -> bool,
) -> SimResult<(Vec<T>, Pagination)> {
    let after = cursor
        .filter(|c| !c.is_empty())
        .map(decode_cursor)
        .transpose()?;
    let range = match &after {
        Some(after) => items.range::<String, _>((
            std::ops::Bound::Excluded(after.clone()),
            std::ops::Bound::Unbounded,
        )),
        None => items.range::<String, _>(..),
    };
    let mut chosen: Vec<(&String, &T)> = range
        .filter(|(_, item)| keep(item))
        .take(limit + 1)
        .collect();
    let more = chosen.len() > limit;
    chosen.truncate(limit);
    let next = if more {
        chosen
            .last()
            .map(|(id, _)| encode_cursor(id))
            .unwrap_or_default()
    } else {
        String::new()
    };
    let prev = after
        .map(|_| cursor.unwrap_or_default().to_string())
        .unwrap_or_default();
    Ok((
        chosen.into_iter().map(|(_, item)| item.clone()).collect(),
        Pagination {
            next: Some(next),
            prev: Some(prev),
        },
    ))
}

/// Fields present in `patch` replace those of `stored`; omitted ones stay.
fn merge<T: Serialize + DeserializeOwned>(stored: &T, patch: &T) -> SimResult<T> {
    let to_map = |value: &T| -> SimResult<Map<String, Value>> {
        match serde_json::to_value(value) {
            Ok(Value::Object(map)) => Ok(map),
            _ => Err(SimError::Invalid("not an object".to_string())),
        }
    };
    let mut merged = to_map(stored)?;
    merged.extend(to_map(patch)?);
    serde_json::from_value(Value::Object(merged))
        .map_err(|error| SimError::Invalid(error.to_string()))
}

impl SimState {
    pub fn shop(&mut self, shop: &str) -> SimResult<&mut ShopData> {
        self.shops.get_mut(shop).ok_or(SimError::NotFound)
    }

    /// Ids ascend in creation order and sort the same as text: `cus_000000000001`.
    fn next_id(&mut self, prefix: &str) -> PlatformId {
        self.next_id += 1;
        PlatformId::new(format!("{prefix}_{:012}", self.next_id))
    }

    /// Strictly increasing times, so two changes never share a `platform_updated_at`.
    pub fn tick(&mut self) -> Timestamp {
        let now = Timestamp::now().as_micros().max(self.last_time + 1);
        self.last_time = now;
        Timestamp::from_micros(now)
    }

    fn fill_addresses(&mut self, customer_id: &PlatformId, addresses: &mut [CustomerAddress]) {
        for address in addresses {
            if address.platform_id.is_none() {
                address.platform_id = Some(self.next_id("adr"));
            }
            address.platform_customer_id = Some(customer_id.clone());
        }
    }

    pub fn create_customer(&mut self, shop: &str, mut customer: Customer) -> SimResult<Customer> {
        self.shop(shop)?;
        let id = self.next_id("cus");
        let now = self.tick();
        customer.platform_id = Some(id.clone());
        customer.platform_created_at = Some(now);
        customer.platform_updated_at = Some(now);
        let mut addresses = customer.addresses.take().unwrap_or_default();
        self.fill_addresses(&id, &mut addresses);
        customer.addresses = Some(addresses);
        self.shop(shop)?
            .customers
            .insert(id.as_str().to_string(), customer.clone());
        Ok(customer)
    }

    pub fn update_customer(
        &mut self,
        shop: &str,
        id: &str,
        patch: Customer,
    ) -> SimResult<Customer> {
        let stored = self
            .shop(shop)?
            .customers
            .get(id)
            .cloned()
            .ok_or(SimError::NotFound)?;
        let patch = Customer {
            platform_id: None,
            platform_created_at: None,
            platform_updated_at: None,
            ..patch
        };
        let mut merged = merge(&stored, &patch)?;
        if let Some(addresses) = merged.addresses.as_mut() {
            let customer_id = PlatformId::new(id);
            self.fill_addresses(&customer_id, addresses);
        }
        merged.platform_updated_at = Some(self.tick());
        self.shop(shop)?
            .customers
            .insert(id.to_string(), merged.clone());
        Ok(merged)
    }

    pub fn delete_customer(&mut self, shop: &str, id: &str) -> SimResult<Timestamp> {
        let now = self.tick();
        let data = self.shop(shop)?;
        let customer = data.customers.remove(id).ok_or(SimError::NotFound)?;
        data.deleted_customers.insert(id.to_string(), customer);
        Ok(now)
    }

    pub fn list_customers(
        &mut self,
        shop: &str,
        limit: usize,
        cursor: Option<&str>,
        email: Option<&str>,
    ) -> SimResult<(Vec<Customer>, Pagination)> {
        let data = self.shop(shop)?;
        page(&data.customers, limit, cursor, |customer: &Customer| {
            email.is_none_or(|email| customer.email.as_deref() == Some(email))
        })
    }

    pub fn issue_customer_token(&mut self, shop: &str, customer_id: &str) -> SimResult<String> {
        let data = self.shop(shop)?;
        if !data.customers.contains_key(customer_id) {
            return Err(SimError::NotFound);
        }
        let mut bytes = [0u8; 16];
        getrandom::fill(&mut bytes).map_err(|error| SimError::Invalid(error.to_string()))?;
        let token = hex::encode(bytes);
        data.customer_tokens
            .insert(token.clone(), customer_id.to_string());
        Ok(token)
    }

    /// Revokes every token issued to the customer: Validate Customer JWT answers inactive for
    /// them from then on. How many there were.
    pub fn revoke_customer_tokens(&mut self, shop: &str, customer_id: &str) -> SimResult<usize> {
        let data = self.shop(shop)?;
        let before = data.customer_tokens.len();
        data.customer_tokens
            .retain(|_, customer| customer.as_str() != customer_id);
        Ok(before - data.customer_tokens.len())
    }

    pub fn validate_customer_token(
        &mut self,
        shop: &str,
        customer_id: &str,
        token: &str,
    ) -> SimResult<bool> {
        let data = self.shop(shop)?;
        if !data.customers.contains_key(customer_id) {
            return Err(SimError::NotFound);
        }
        Ok(data.customer_tokens.get(token).map(String::as_str) == Some(customer_id))
    }

    pub fn create_address(
        &mut self,
        shop: &str,
        customer_id: &str,
        mut address: CustomerAddress,
    ) -> SimResult<CustomerAddress> {
        self.shop(shop)?
            .customers
            .get(customer_id)
            .ok_or(SimError::NotFound)?;
        address.platform_id = Some(self.next_id("adr"));
        address.platform_customer_id = Some(PlatformId::new(customer_id));
        let now = self.tick();
        let customer = self
            .shop(shop)?
            .customers
            .get_mut(customer_id)
            .ok_or(SimError::NotFound)?;
        customer
            .addresses
            .get_or_insert_with(Vec::new)
            .push(address.clone());
        customer.platform_updated_at = Some(now);
        Ok(address)
    }

    pub fn update_address(
        &mut self,
        shop: &str,
        customer_id: &str,
        id: &str,
        patch: CustomerAddress,
    ) -> SimResult<CustomerAddress> {
        let now = self.tick();
        let customer = self
            .shop(shop)?
            .customers
            .get_mut(customer_id)
            .ok_or(SimError::NotFound)?;
        let addresses = customer.addresses.get_or_insert_with(Vec::new);
        let stored = addresses
            .iter_mut()
            .find(|a| a.platform_id.as_ref().is_some_and(|pid| pid.as_str() == id))
            .ok_or(SimError::NotFound)?;
        let patch = CustomerAddress {
            platform_id: None,
            platform_customer_id: None,
            ..patch
        };
        *stored = merge(stored, &patch)?;
        let updated = stored.clone();
        customer.platform_updated_at = Some(now);
        Ok(updated)
    }

    pub fn delete_address(&mut self, shop: &str, customer_id: &str, id: &str) -> SimResult<()> {
        let now = self.tick();
        let customer = self
            .shop(shop)?
            .customers
            .get_mut(customer_id)
            .ok_or(SimError::NotFound)?;
        let addresses = customer.addresses.get_or_insert_with(Vec::new);
        let index = addresses
            .iter()
            .position(|a| a.platform_id.as_ref().is_some_and(|pid| pid.as_str() == id))
            .ok_or(SimError::NotFound)?;
        let deleted = addresses.remove(index);
        customer.platform_updated_at = Some(now);
        self.shop(shop)?
            .deleted_addresses
            .insert(id.to_string(), deleted);
        Ok(())
    }

    /// Create Order; a repeated Idempotency-Key returns the order it first created.
    pub fn create_order(
        &mut self,
        shop: &str,
        mut order: Order,
        idempotency_key: Option<&str>,
    ) -> SimResult<(Order, bool)> {
        if let Some(key) = idempotency_key {
            let data = self.shop(shop)?;
            if let Some(existing) = data.idempotency.get(key).and_then(|id| data.orders.get(id)) {
                return Ok((existing.clone(), false));
            }
        }
        self.shop(shop)?;
        let id = self.next_id("ord");
        let now = self.tick();
        order.platform_id = Some(id.clone());
        order.platform_updated_at = Some(now);
        order.placed_at = order.placed_at.or(Some(now));
        for line in order.line_items.iter_mut().flatten() {
            if line.platform_id.is_none() {
                line.platform_id = Some(self.next_id("lin"));
            }
        }
        let data = self.shop(shop)?;
        data.orders.insert(id.as_str().to_string(), order.clone());
        if let Some(key) = idempotency_key {
            data.idempotency
                .insert(key.to_string(), id.as_str().to_string());
        }
        Ok((order, true))
    }

    pub fn get_order(&mut self, shop: &str, id: &str) -> SimResult<Order> {
        self.shop(shop)?
            .orders
            .get(id)
            .cloned()
            .ok_or(SimError::NotFound)
    }

    pub fn update_order(&mut self, shop: &str, id: &str, patch: Order) -> SimResult<Order> {
        let stored = self.get_order(shop, id)?;
        let patch = Order {
            platform_id: None,
            platform_updated_at: None,
            ..patch
        };
        let mut merged = merge(&stored, &patch)?;
        merged.platform_updated_at = Some(self.tick());
        self.shop(shop)?
            .orders
            .insert(id.to_string(), merged.clone());
        Ok(merged)
    }

    pub fn list_orders(
        &mut self,
        shop: &str,
        limit: usize,
        cursor: Option<&str>,
    ) -> SimResult<(Vec<Order>, Pagination)> {
        page(&self.shop(shop)?.orders, limit, cursor, |_: &Order| true)
    }

    /// Create Payment: the test gateway's rule, as Mercer's checkout has it: a payment method
    /// (token) `tok_decline` is declined (answered 201 with status `declined` and a failed
    /// transaction), any other is paid.
    pub fn create_payment(
        &mut self,
        shop: &str,
        order_id: &str,
        mut payment: Payment,
    ) -> SimResult<Payment> {
        self.get_order(shop, order_id)?;
        payment.platform_id = Some(self.next_id("pay"));
        let now = self.tick();
        payment.platform_created_at = Some(now);
        payment.platform_updated_at = Some(now);
        let declined = payment.payment_method.as_deref() == Some(DECLINED_TOKEN);
        payment.status = Some(if declined { "declined" } else { "paid" }.to_string());
        if payment.transactions.is_none() {
            payment.transactions = Some(vec![Transaction {
                amount: payment.amount_planned.clone(),
                currency: payment.currency.clone(),
                status: Some(if declined { "failure" } else { "success" }.to_string()),
                r#type: Some("sale".to_string()),
                ..Transaction::default()
            }]);
        }
        for transaction in payment.transactions.iter_mut().flatten() {
            if transaction.platform_id.is_none() {
                transaction.platform_id = Some(self.next_id("txn"));
            }
        }
        let order = self
            .shop(shop)?
            .orders
            .get_mut(order_id)
            .ok_or(SimError::NotFound)?;
        order
            .payments
            .get_or_insert_with(Vec::new)
            .push(payment.clone());
        order.platform_updated_at = Some(now);
        Ok(payment)
    }

    pub fn save_product(&mut self, shop: &str, mut product: Product) -> SimResult<Product> {
        self.shop(shop)?;
        let id = match product.platform_id.clone() {
            Some(id) => id,
            None => self.next_id("prd"),
        };
        for variant in product.variants.iter_mut().flatten() {
            if variant.platform_id.is_none() {
                variant.platform_id = Some(self.next_id("var"));
            }
        }
        product.platform_id = Some(id.clone());
        product.platform_updated_at = Some(self.tick());
        self.shop(shop)?
            .products
            .insert(id.as_str().to_string(), product.clone());
        Ok(product)
    }

    pub fn list_products(
        &mut self,
        shop: &str,
        limit: usize,
        cursor: Option<&str>,
    ) -> SimResult<(Vec<Product>, Pagination)> {
        page(&self.shop(shop)?.products, limit, cursor, |_: &Product| {
            true
        })
    }

    pub fn list_categories(
        &mut self,
        shop: &str,
        limit: usize,
        cursor: Option<&str>,
    ) -> SimResult<(Vec<Category>, Pagination)> {
        page(
            &self.shop(shop)?.categories,
            limit,
            cursor,
            |_: &Category| true,
        )
    }

    pub fn save_category(&mut self, shop: &str, mut category: Category) -> SimResult<Category> {
        self.shop(shop)?;
        let id = match category.platform_id.clone() {
            Some(id) => id,
            None => self.next_id("cat"),
        };
        category.platform_id = Some(id.clone());
        category.platform_updated_at = Some(self.tick());
        self.shop(shop)?
            .categories
            .insert(id.as_str().to_string(), category.clone());
        Ok(category)
    }

    /// Whether the next connector request misbehaves, counting it against `faults.times`.
    pub fn take_fault(&mut self) -> Option<Faults> {
        if self.faults == Faults::default() {
            return None;
        }
        let faults = self.faults.clone();
        if let Some(times) = self.faults.times {
            if times <= 1 {
                self.faults = Faults::default();
            } else {
                self.faults.times = Some(times - 1);
            }
        }
        Some(faults)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state_with_shop() -> SimState {
        let mut state = SimState::default();
        state.shops.insert(
            "s".into(),
            ShopData {
                secret: "x".into(),
                ..ShopData::default()
            },
        );
        state
    }

    #[test]
    fn pages_ascend_and_end_with_an_empty_cursor() {
        let mut state = state_with_shop();
        for n in 0..7 {
            state
                .create_customer(
                    "s",
                    Customer {
                        email: Some(format!("{n}@example.test")),
                        ..Customer::default()
                    },
                )
                .unwrap();
        }
        let mut cursor: Option<String> = None;
        let mut seen = Vec::new();
        loop {
            let (items, pagination) = state
                .list_customers("s", 3, cursor.as_deref(), None)
                .unwrap();
            seen.extend(
                items
                    .into_iter()
                    .map(|c| c.platform_id.unwrap().as_str().to_string()),
            );
            match pagination.next_cursor() {
                Some(next) => cursor = Some(next.to_string()),
                None => break,
            }
        }
        let mut sorted = seen.clone();
        sorted.sort();
        assert_eq!(seen.len(), 7);
        assert_eq!(seen, sorted);
    }

    #[test]
    fn partial_updates_leave_omitted_fields_alone() {
        let mut state = state_with_shop();
        let created = state
            .create_customer(
                "s",
                Customer {
                    email: Some("a@example.test".into()),
                    first_name: Some("Ada".into()),
                    ..Customer::default()
                },
            )
            .unwrap();
        let id = created.platform_id.unwrap();
        let updated = state
            .update_customer(
                "s",
                id.as_str(),
                Customer {
                    first_name: Some("Grace".into()),
                    ..Customer::default()
                },
            )
            .unwrap();
        assert_eq!(updated.email.as_deref(), Some("a@example.test"));
        assert_eq!(updated.first_name.as_deref(), Some("Grace"));
        assert!(updated.platform_updated_at > created.platform_updated_at);
    }

    #[test]
    fn the_gateway_declines_its_declining_token_and_pays_the_others() {
        let mut state = state_with_shop();
        let (order, _) = state.create_order("s", Order::default(), None).unwrap();
        let id = order.platform_id.unwrap();
        let pay = |state: &mut SimState, token: &str| {
            state
                .create_payment(
                    "s",
                    id.as_str(),
                    Payment {
                        payment_method: Some(token.to_string()),
                        ..Payment::default()
                    },
                )
                .unwrap()
        };
        let declined = pay(&mut state, DECLINED_TOKEN);
        assert_eq!(declined.status.as_deref(), Some("declined"));
        assert_eq!(
            declined.transactions.unwrap()[0].status.as_deref(),
            Some("failure")
        );
        let paid = pay(&mut state, "tok_success");
        assert_eq!(paid.status.as_deref(), Some("paid"));
        let stored = state.get_order("s", id.as_str()).unwrap();
        assert_eq!(stored.payments.unwrap().len(), 2);
    }

    #[test]
    fn create_order_is_idempotent() {
        let mut state = state_with_shop();
        let (first, new) = state
            .create_order("s", Order::default(), Some("k1"))
            .unwrap();
        assert!(new);
        let (again, new) = state
            .create_order("s", Order::default(), Some("k1"))
            .unwrap();
        assert!(!new);
        assert_eq!(first.platform_id, again.platform_id);
        let (other, _) = state
            .create_order("s", Order::default(), Some("k2"))
            .unwrap();
        assert_ne!(first.platform_id, other.platform_id);
    }

    #[test]
    fn deleted_addresses_are_kept_aside_and_answer_not_found() {
        let mut state = state_with_shop();
        let customer = state.create_customer("s", Customer::default()).unwrap();
        let customer = customer.platform_id.unwrap();
        let address = state
            .create_address("s", customer.as_str(), CustomerAddress::default())
            .unwrap()
            .platform_id
            .unwrap();
        state
            .delete_address("s", customer.as_str(), address.as_str())
            .unwrap();
        let data = state.shop("s").unwrap();
        assert!(data.deleted_addresses.contains_key(address.as_str()));
        let live = &data.customers[customer.as_str()];
        assert_eq!(live.addresses.as_deref(), Some(&[][..]));
        assert_eq!(
            state.delete_address("s", customer.as_str(), address.as_str()),
            Err(SimError::NotFound)
        );
        assert_eq!(
            state.update_address(
                "s",
                customer.as_str(),
                address.as_str(),
                CustomerAddress::default()
            ),
            Err(SimError::NotFound)
        );
    }

    #[test]
    fn deleted_customers_are_gone_from_lists_and_lookups() {
        let mut state = state_with_shop();
        let id = state
            .create_customer("s", Customer::default())
            .unwrap()
            .platform_id
            .unwrap();
        state.delete_customer("s", id.as_str()).unwrap();
        assert_eq!(
            state.delete_customer("s", id.as_str()),
            Err(SimError::NotFound)
        );
        assert!(
            state
                .list_customers("s", 10, None, None)
                .unwrap()
                .0
                .is_empty()
        );
    }
}
