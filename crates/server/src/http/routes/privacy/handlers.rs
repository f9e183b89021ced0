//! The privacy requests' handlers.

use actix_web::{HttpResponse, web};
use mercer_domain::Timestamp;
use mercer_domain::kernel::ids::CustomerId;
use mercer_domain::privacy::{CustomerExport, export_customer, redact_customer};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::http::error::ApiError;
use crate::http::extract::{Authorized, TypedPath, scopes};
use crate::http::state::{AppState, run_blocking};

/// `…/customers/{customer_id}/…`.
#[derive(Deserialize)]
pub struct CustomerPath {
    customer_id: CustomerId,
}

/// The answer to a redaction: the customer and when their personal data was erased.
#[derive(Serialize, ToSchema)]
pub struct RedactionAnswer {
    /// The customer's id.
    customer_id: CustomerId,
    /// When the customer's personal data was erased (by this request or an earlier one).
    pii_redacted_at: Timestamp,
}

/// Erases a customer's personal data.
///
/// Erases the customer's name, email, phone and notes, their addresses, the notes of their
/// subscriptions, their checkouts, and every stored webhook payload, platform document and
/// queued text that mentions them; ends their portal sessions. Ids, amounts and statuses are
/// kept. Done in one transaction; a customer erased before is left as it is (202 again).
#[utoipa::path(post, path = "/subscriptions/v1/shops/{shop}/customers/{customer_id}/redact", operation_id = "redact_subscription_customer", summary = "Redact a customer", tag = "Privacy",
    params(("shop" = String, Path, description = "The shop's identifier"), ("customer_id" = i64, Path, description = "The customer's id")),
    security(("api_token" = ["write_subscriptions"]), ("oauth2" = ["write_subscriptions"])),
    responses((status = 202, body = RedactionAnswer)))]
pub async fn redact(
    state: web::Data<AppState>,
    request: Authorized<scopes::WriteSubscriptions>,
    path: TypedPath<CustomerPath>,
) -> Result<HttpResponse, ApiError> {
    let customer_id = path.get()?.customer_id;
    let shop_id = request.access.shop.id;
    let (store, now) = (state.store.clone(), state.now());
    let redaction =
        run_blocking(move || redact_customer(&store, shop_id, customer_id, now)).await?;
    Ok(HttpResponse::Accepted().json(RedactionAnswer {
        customer_id,
        pii_redacted_at: redaction.pii_redacted_at,
    }))
}

/// Exports everything held about a customer.
///
/// One JSON document: the customer record, their addresses and labels, their subscriptions with
/// their line items, status log and orders, their box selections, platform orders and
/// checkouts, and the webhook messages about them.
#[utoipa::path(get, path = "/subscriptions/v1/shops/{shop}/customers/{customer_id}/export", operation_id = "export_subscription_customer", summary = "Export a customer's data", tag = "Privacy",
    params(("shop" = String, Path, description = "The shop's identifier"), ("customer_id" = i64, Path, description = "The customer's id")),
    security(("api_token" = ["read_subscriptions"]), ("oauth2" = ["read_subscriptions"])),
    responses((status = 200, body = CustomerExport)))]
pub async fn export(
    state: web::Data<AppState>,
    request: Authorized<scopes::ReadSubscriptions>,
    path: TypedPath<CustomerPath>,
) -> Result<HttpResponse, ApiError> {
    let customer_id = path.get()?.customer_id;
    let shop_id = request.access.shop.id;
    let store = state.store.clone();
    let export = run_blocking(move || export_customer(&store, shop_id, customer_id)).await?;
    Ok(HttpResponse::Ok().json(export))
}
