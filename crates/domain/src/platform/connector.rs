//! The port to a shop's platform connector (contract §3.2): every operation Mercer calls, with
//! typed requests and answers. `mercer-connector` implements it over HTTP.

use std::time::Duration;

use crate::access::credentials::Secret;
use crate::kernel::error::DomainError;
use crate::platform::resources::{
    Category, Customer, CustomerAddress, Order, Pagination, Payment, Product,
};

/// Where and how to reach one connector for one shop.
#[derive(Debug, Clone)]
pub struct ConnectorTarget {
    /// The destination's base URL; operations are under `{base_url}/{version}/shops/{shop}`.
    pub base_url: String,
    pub version: String,
    pub shop_identifier: String,
    pub timeout: Duration,
    /// Signs `X-HMAC`.
    pub secret: Secret,
    /// Signs `X-Compatible-HMAC`: the previous secret during a rotation's grace, else the current.
    pub compatible_secret: Secret,
}

/// One page of a connector list operation.
#[derive(Debug, Clone, PartialEq)]
pub struct Page<T> {
    pub items: Vec<T>,
    pub pagination: Pagination,
}

/// How a call to a connector failed. Each is told apart so callers can react: a 404 is an
/// answer, a timeout may be retried, a malformed answer is the connector's bug.
///
/// The texts reach API clients (502 messages, sync and outbox errors), so they say nothing of
/// the network Mercer runs in: no OS error, no address.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConnectorError {
    #[error("the connector does not know that resource (404)")]
    NotFound,
    /// Any other status, redirects included (they are never followed). Only a host the
    /// address guard allowed can have answered, so its status may be told.
    #[error("the connector answered with an error (HTTP {status})")]
    Failed { status: u16 },
    #[error("the connector did not answer within {0:?}")]
    Timeout(Duration),
    /// Nothing listening, a name that does not resolve, an address the guard refuses…: the
    /// payload says which, for logs and tests, never in the error's text.
    #[error("the connector could not be reached")]
    Unreachable(String),
    /// The address guard refused the call: the destination leads into Mercer's own network
    /// (told as unreachable, since the text reaches API clients). Trying again will not help.
    #[error("the connector could not be reached")]
    Refused(String),
    #[error("the connector's answer is malformed: {0}")]
    Malformed(String),
    #[error("the connector's X-HMAC answer does not match the shop's secret")]
    BadSignature,
}

impl ConnectorError {
    /// Whether trying again later may succeed.
    pub fn is_transient(&self) -> bool {
        match self {
            ConnectorError::Timeout(_) | ConnectorError::Unreachable(_) => true,
            ConnectorError::Failed { status } => *status >= 500 || *status == 429 || *status == 408,
            ConnectorError::NotFound
            | ConnectorError::Refused(_)
            | ConnectorError::Malformed(_)
            | ConnectorError::BadSignature => false,
        }
    }

    /// The error a client of Mercer sees: 504 for a timeout, 502 otherwise.
    pub fn into_domain(self, code: &'static str) -> DomainError {
        DomainError::Remote {
            code,
            timed_out: matches!(self, ConnectorError::Timeout(_)),
            message: self.to_string(),
            field: None,
        }
    }
}

pub type ConnectorResult<T> = Result<T, ConnectorError>;

/// A connector client shared by request handlers and workers.
pub type PlatformConnectorHandle = std::sync::Arc<dyn PlatformConnector>;

pub trait PlatformConnector: Send + Sync {
    /// Verify Platform Connector Destination: succeeds only when the connector echoes the right
    /// `X-HMAC` of the timestamp sent.
    fn verify(&self, target: &ConnectorTarget) -> ConnectorResult<()>;
    fn list_customers(
        &self,
        target: &ConnectorTarget,
        limit: Option<u32>,
        cursor: Option<&str>,
        email: Option<&str>,
    ) -> ConnectorResult<Page<Customer>>;
    fn create_customer(
        &self,
        target: &ConnectorTarget,
        customer: &Customer,
    ) -> ConnectorResult<Customer>;
    fn update_customer(
        &self,
        target: &ConnectorTarget,
        platform_id: &str,
        customer: &Customer,
    ) -> ConnectorResult<Customer>;
    fn delete_customer(&self, target: &ConnectorTarget, platform_id: &str) -> ConnectorResult<()>;
    fn validate_customer_jwt(
        &self,
        target: &ConnectorTarget,
        platform_id: &str,
        token: &str,
    ) -> ConnectorResult<bool>;
    fn create_address(
        &self,
        target: &ConnectorTarget,
        platform_customer_id: &str,
        address: &CustomerAddress,
    ) -> ConnectorResult<CustomerAddress>;
    fn update_address(
        &self,
        target: &ConnectorTarget,
        platform_customer_id: &str,
        platform_id: &str,
        address: &CustomerAddress,
    ) -> ConnectorResult<CustomerAddress>;
    fn delete_address(
        &self,
        target: &ConnectorTarget,
        platform_customer_id: &str,
        platform_id: &str,
    ) -> ConnectorResult<()>;
    fn list_orders(
        &self,
        target: &ConnectorTarget,
        limit: Option<u32>,
        cursor: Option<&str>,
    ) -> ConnectorResult<Page<Order>>;
    fn create_order(
        &self,
        target: &ConnectorTarget,
        order: &Order,
        idempotency_key: Option<&str>,
    ) -> ConnectorResult<Order>;
    fn get_order(&self, target: &ConnectorTarget, platform_id: &str) -> ConnectorResult<Order>;
    fn update_order(
        &self,
        target: &ConnectorTarget,
        platform_id: &str,
        order: &Order,
    ) -> ConnectorResult<Order>;
    fn create_payment(
        &self,
        target: &ConnectorTarget,
        platform_order_id: &str,
        payment: &Payment,
    ) -> ConnectorResult<Payment>;
    /// List Products (contract §3.2): paged as List Customers.
    fn list_products(
        &self,
        target: &ConnectorTarget,
        limit: Option<u32>,
        cursor: Option<&str>,
    ) -> ConnectorResult<Page<Product>>;
    /// List Categories (contract §3.2): paged as List Customers.
    fn list_categories(
        &self,
        target: &ConnectorTarget,
        limit: Option<u32>,
        cursor: Option<&str>,
    ) -> ConnectorResult<Page<Category>>;
}
