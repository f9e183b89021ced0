//! The port to a shop's platform connector: every operation Mercer calls, with
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
    /// The connector API version of the destination, the first path segment (e.g. `v1`).
    pub version: String,
    /// The shop's identifier, the `{shop}` path segment.
    pub shop_identifier: String,
    /// How long a call may take before it fails with [`ConnectorError::Timeout`].
    pub timeout: Duration,
    /// Signs `X-HMAC`.
    pub secret: Secret,
    /// Signs `X-Compatible-HMAC`: the previous secret during a rotation's grace, else the current.
    pub compatible_secret: Secret,
}

/// Whether a verification answer proved the connector holds the secret beyond `X-HMAC`: its
/// `X-Verification-Proof` header, the HMAC of the verification request's nonce. (`X-HMAC` alone
/// covers only the timestamp Mercer sent, so a destination that echoes it back proves nothing.)
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VerificationProof {
    /// The proof is the HMAC of the nonce under the shop's current secret.
    Valid,
    /// The answer has no `X-Verification-Proof` (a connector on the original scheme).
    Missing,
    /// The answer has a proof, and it is wrong.
    Invalid,
}

/// What a successful Verify call said beyond its `X-HMAC`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VerificationAnswer {
    /// Whether the answer proved the secret.
    pub proof: VerificationProof,
}

/// One page of a connector list operation.
#[derive(Debug, Clone, PartialEq)]
pub struct Page<T> {
    /// The resources of this page.
    pub items: Vec<T>,
    /// The cursors of the pages around it; the next cursor is empty on the last page.
    pub pagination: Pagination,
}

/// How a call to a connector failed. Each is told apart so callers can react: a 404 is an
/// answer, a timeout may be retried, a malformed answer is the connector's bug.
///
/// The texts reach API clients (502 messages, sync and outbox errors), so they say nothing of
/// the network Mercer runs in: no OS error, no address.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConnectorError {
    /// The connector answered 404: it does not know the resource.
    #[error("the connector does not know that resource (404)")]
    NotFound,
    /// Any other status, redirects included (they are never followed). Only a host the
    /// address guard allowed can have answered, so its status may be told.
    #[error("the connector answered with an error (HTTP {status})")]
    Failed {
        /// The HTTP status the connector answered with.
        status: u16,
    },
    /// No answer came within the target's timeout (the payload).
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
    /// The answer could not be read (not JSON, missing `data`, wrong shape); the payload says how.
    #[error("the connector's answer is malformed: {0}")]
    Malformed(String),
    /// The verification answer's `X-HMAC` is missing or not the shop's secret's signature.
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

/// The answer of a connector call, or how it failed.
pub type ConnectorResult<T> = Result<T, ConnectorError>;

/// A connector client shared by request handlers and workers.
pub type PlatformConnectorHandle = std::sync::Arc<dyn PlatformConnector>;

/// The operations Mercer calls on a shop's platform connector, each given the
/// target to reach. Implemented over HTTP by `mercer-connector`, and in memory for tests.
pub trait PlatformConnector: Send + Sync {
    /// Verify Platform Connector Destination: succeeds only when the connector echoes the right
    /// `X-HMAC` of the timestamp sent, and says whether it also proved the secret.
    fn verify(&self, target: &ConnectorTarget) -> ConnectorResult<VerificationAnswer>;
    /// List Customers: one page of at most `limit` customers from `cursor` (the first page when
    /// `None`), only those of `email` when given.
    fn list_customers(
        &self,
        target: &ConnectorTarget,
        limit: Option<u32>,
        cursor: Option<&str>,
        email: Option<&str>,
    ) -> ConnectorResult<Page<Customer>>;
    /// Create Customer: the customer as the platform created it, with its platform id.
    fn create_customer(
        &self,
        target: &ConnectorTarget,
        customer: &Customer,
    ) -> ConnectorResult<Customer>;
    /// Update Customer: changes the customer of `platform_id`, answering it as it now is.
    fn update_customer(
        &self,
        target: &ConnectorTarget,
        platform_id: &str,
        customer: &Customer,
    ) -> ConnectorResult<Customer>;
    /// Delete Customer: deletes the customer of `platform_id`.
    fn delete_customer(&self, target: &ConnectorTarget, platform_id: &str) -> ConnectorResult<()>;
    /// Validate Customer JWT: whether the platform deems `token` an active token of the customer
    /// of `platform_id`.
    fn validate_customer_jwt(
        &self,
        target: &ConnectorTarget,
        platform_id: &str,
        token: &str,
    ) -> ConnectorResult<bool>;
    /// Create Customer Address: adds an address to the customer of `platform_customer_id`,
    /// answering it with its platform id.
    fn create_address(
        &self,
        target: &ConnectorTarget,
        platform_customer_id: &str,
        address: &CustomerAddress,
    ) -> ConnectorResult<CustomerAddress>;
    /// Update Customer Address: changes the address `platform_id` of the customer of
    /// `platform_customer_id`, answering it as it now is.
    fn update_address(
        &self,
        target: &ConnectorTarget,
        platform_customer_id: &str,
        platform_id: &str,
        address: &CustomerAddress,
    ) -> ConnectorResult<CustomerAddress>;
    /// Delete Customer Address: deletes the address `platform_id` of the customer of
    /// `platform_customer_id`.
    fn delete_address(
        &self,
        target: &ConnectorTarget,
        platform_customer_id: &str,
        platform_id: &str,
    ) -> ConnectorResult<()>;
    /// List Orders: paged as List Customers.
    fn list_orders(
        &self,
        target: &ConnectorTarget,
        limit: Option<u32>,
        cursor: Option<&str>,
    ) -> ConnectorResult<Page<Order>>;
    /// Create Order: the order as the platform created it. `idempotency_key`, when given, is sent
    /// as `Idempotency-Key` so a retried call does not place the order twice.
    fn create_order(
        &self,
        target: &ConnectorTarget,
        order: &Order,
        idempotency_key: Option<&str>,
    ) -> ConnectorResult<Order>;
    /// Get Order: the order of `platform_id`.
    fn get_order(&self, target: &ConnectorTarget, platform_id: &str) -> ConnectorResult<Order>;
    /// Update Order: changes the order of `platform_id`, answering it as it now is.
    fn update_order(
        &self,
        target: &ConnectorTarget,
        platform_id: &str,
        order: &Order,
    ) -> ConnectorResult<Order>;
    /// Create Payment: records a payment on the order of `platform_order_id`, answering it as the
    /// platform created it.
    fn create_payment(
        &self,
        target: &ConnectorTarget,
        platform_order_id: &str,
        payment: &Payment,
    ) -> ConnectorResult<Payment>;
    /// List Products: paged as List Customers.
    fn list_products(
        &self,
        target: &ConnectorTarget,
        limit: Option<u32>,
        cursor: Option<&str>,
    ) -> ConnectorResult<Page<Product>>;
    /// List Categories: paged as List Customers.
    fn list_categories(
        &self,
        target: &ConnectorTarget,
        limit: Option<u32>,
        cursor: Option<&str>,
    ) -> ConnectorResult<Page<Category>>;
}
