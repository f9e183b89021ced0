//! Subscription customers and their addresses: one customer record
//! per shop, shared with the directory; changes reach the platform through the connector outbox.

use actix_web::{HttpRequest, HttpResponse, web};
use mercer_domain::DomainError;
use mercer_domain::access::auth::Access;
use mercer_domain::kernel::ids::{AddressId, CustomerId};
use mercer_domain::subscriptions::customers::{
    self, PagePagination, parse_customer_list_query, parse_page,
};
use mercer_domain::subscriptions::input::{
    SubscriptionCustomerAddressRequest, SubscriptionCustomerUpdateRequest, parse_customer_address,
    parse_customer_update,
};
use mercer_domain::subscriptions::operations::customer_subscriptions;
use mercer_domain::subscriptions::resources::{
    Subscription, SubscriptionAddress, SubscriptionCustomer,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use crate::http::error::ApiError;
use crate::http::extract::{Authorized, JsonBody, TypedPath, query_pairs, scopes};
use crate::http::state::AppState;

/// The body as JSON (400 when it is not), within the limits every database stores.
pub(super) fn json_value(body: JsonBody) -> Result<Value, ApiError> {
    let bytes = body.bytes()?;
    serde_json::from_slice(&bytes).map_err(ApiError::malformed_json)
}

// The routes' paths. Each names the segments its handlers read (an id that is not a number is
// its resource's 404); `{shop}` is read by the access check.

/// `…/customers/{customer_id}` and the paths under it.
#[derive(Deserialize)]
pub struct CustomerPath {
    customer_id: CustomerId,
}

/// `…/customers/{customer_id}/addresses/{address_id}`. The address segment is read by hand:
/// one that is not a number is a `customer_address` 404, not an `address` one.
#[derive(Deserialize)]
pub struct CustomerAddressPath {
    customer_id: CustomerId,
    address_id: String,
}

impl CustomerAddressPath {
    fn address_id(&self) -> Result<AddressId, ApiError> {
        self.address_id
            .parse()
            .map(AddressId)
            .map_err(|_| ApiError::from(DomainError::not_found("customer_address")))
    }
}

/// After a change: the webhook dispatcher and the job runner (connector calls) have work.
pub(super) fn wake(state: &AppState) {
    state.webhooks.notify();
    state.jobs.notify();
}

fn shop_of(access: &Access) -> mercer_domain::access::shop::Shop {
    access.shop.clone()
}

/// A page of the shop's subscription customers.
#[derive(Serialize, ToSchema)]
pub struct SubscriptionCustomerList {
    customers: Vec<SubscriptionCustomer>,
    pagination: PagePagination,
}

/// `{"customer": {…}}`.
#[derive(Serialize, ToSchema)]
pub struct SubscriptionCustomerAnswer {
    customer: SubscriptionCustomer,
}

/// `{"customer_addresses": […]}`: the customer's live addresses.
#[derive(Serialize, ToSchema)]
pub struct SubscriptionAddressList {
    customer_addresses: Vec<SubscriptionAddress>,
}

/// `{"customer_address": {…}}`.
#[derive(Serialize, ToSchema)]
pub struct SubscriptionAddressAnswer {
    customer_address: SubscriptionAddress,
}

/// A page of a customer's subscriptions.
#[derive(Serialize, ToSchema)]
pub struct CustomerSubscriptionList {
    subscriptions: Vec<Subscription>,
    pagination: PagePagination,
}

/// Lists subscription customers.
///
/// The shop's customers with subscriptions, a page at a time, filtered by status and searched by
/// name, email or phone.
#[utoipa::path(get, path = "/subscriptions/v1/shops/{shop}/customers", operation_id = "list_subscription_customers", summary = "List subscription customers", tag = "Subscription customers",
    params(("shop" = String, Path, description = "The shop's identifier"),
        ("status" = Option<String>, Query, description = "`all` (the default: every customer with a subscription), `active` (with one that is not inactive) or `inactive` (all of them inactive); repeated, as `status[]`, or joined by commas"),
        ("search" = Option<String>, Query, max_length = 256, description = "A case-insensitive part of the first, last or full name, the email or the phone (at most 256 characters)"),
        ("limit" = Option<i64>, Query, minimum = 1, maximum = 250, description = "Customers per page (default 50)"),
        ("page" = Option<i64>, Query, minimum = 1, maximum = 1000000, description = "The page, from 1 (the default)")),
    security(("api_token" = ["read_subscriptions"]), ("oauth2" = ["read_subscriptions"])),
    responses((status = 200, body = SubscriptionCustomerList)))]
pub async fn list(
    state: web::Data<AppState>,
    request: Authorized<scopes::ReadSubscriptions>,
    http: HttpRequest,
) -> Result<HttpResponse, ApiError> {
    let query = parse_customer_list_query(&query_pairs(&http)?)?;
    let shop = shop_of(&request.access);
    let (customers, pagination) = state
        .read(move |tx| customers::list_customers(tx, &shop, &query))
        .await?;
    Ok(HttpResponse::Ok().json(SubscriptionCustomerList {
        customers,
        pagination,
    }))
}

/// Gets a subscription customer.
#[utoipa::path(get, path = "/subscriptions/v1/shops/{shop}/customers/{customer_id}", operation_id = "get_subscription_customer", summary = "Get a subscription customer", tag = "Subscription customers",
    params(("shop" = String, Path, description = "The shop's identifier"), ("customer_id" = i64, Path, description = "The customer's id")),
    security(("api_token" = ["read_subscriptions"]), ("oauth2" = ["read_subscriptions"])),
    responses((status = 200, body = SubscriptionCustomerAnswer)))]
pub async fn get(
    state: web::Data<AppState>,
    request: Authorized<scopes::ReadSubscriptions>,
    path: TypedPath<CustomerPath>,
) -> Result<HttpResponse, ApiError> {
    let id = path.get()?.customer_id;
    let shop = shop_of(&request.access);
    let customer = state
        .read(move |tx| customers::get_customer(tx, &shop, id))
        .await?;
    Ok(HttpResponse::Ok().json(SubscriptionCustomerAnswer { customer }))
}

/// Updates a subscription customer.
///
/// The customer's first name, last name, phone, email and notes, as given.
#[utoipa::path(put, path = "/subscriptions/v1/shops/{shop}/customers/{customer_id}", operation_id = "update_subscription_customer", summary = "Update a subscription customer", tag = "Subscription customers",
    request_body = SubscriptionCustomerUpdateRequest,
    params(("shop" = String, Path, description = "The shop's identifier"), ("customer_id" = i64, Path, description = "The customer's id")),
    security(("api_token" = ["write_subscriptions"]), ("oauth2" = ["write_subscriptions"])),
    responses((status = 200, body = SubscriptionCustomerAnswer)))]
pub async fn update(
    state: web::Data<AppState>,
    request: Authorized<scopes::WriteSubscriptions>,
    path: TypedPath<CustomerPath>,
    body: JsonBody,
) -> Result<HttpResponse, ApiError> {
    let id = path.get()?.customer_id;
    let update = parse_customer_update(&json_value(body)?)?;
    let (shop, now) = (shop_of(&request.access), state.now());
    let customer = state
        .write(move |tx| customers::update_customer(tx, &shop, id, &update, now))
        .await?;
    wake(&state);
    Ok(HttpResponse::Ok().json(SubscriptionCustomerAnswer { customer }))
}

/// Lists a subscription customer's addresses.
///
/// The addresses of a subscription customer.
#[utoipa::path(get, path = "/subscriptions/v1/shops/{shop}/customers/{customer_id}/addresses", operation_id = "list_subscription_customer_addresses", summary = "List a subscription customer's addresses", tag = "Subscription customers",
    params(("shop" = String, Path, description = "The shop's identifier"), ("customer_id" = i64, Path, description = "The customer's id")),
    security(("api_token" = ["read_subscriptions"]), ("oauth2" = ["read_subscriptions"])),
    responses((status = 200, body = SubscriptionAddressList)))]
pub async fn list_addresses(
    state: web::Data<AppState>,
    request: Authorized<scopes::ReadSubscriptions>,
    path: TypedPath<CustomerPath>,
) -> Result<HttpResponse, ApiError> {
    let id = path.get()?.customer_id;
    let shop = shop_of(&request.access);
    let addresses = state
        .read(move |tx| customers::list_addresses(tx, &shop, id))
        .await?;
    Ok(HttpResponse::Ok().json(SubscriptionAddressList {
        customer_addresses: addresses,
    }))
}

/// Creates a customer address.
///
/// Adds an address to a subscription customer.
#[utoipa::path(post, path = "/subscriptions/v1/shops/{shop}/customers/{customer_id}/addresses", operation_id = "create_subscription_customer_address", summary = "Create a customer address", tag = "Subscription customers",
    request_body = SubscriptionCustomerAddressRequest,
    params(("shop" = String, Path, description = "The shop's identifier"), ("customer_id" = i64, Path, description = "The customer's id")),
    security(("api_token" = ["write_subscriptions"]), ("oauth2" = ["write_subscriptions"])),
    responses((status = 200, body = SubscriptionAddressAnswer)))]
pub async fn create_address(
    state: web::Data<AppState>,
    request: Authorized<scopes::WriteSubscriptions>,
    path: TypedPath<CustomerPath>,
    body: JsonBody,
) -> Result<HttpResponse, ApiError> {
    let id = path.get()?.customer_id;
    let body = parse_customer_address(&json_value(body)?)?;
    let (shop, now) = (shop_of(&request.access), state.now());
    let address = state
        .write(move |tx| {
            customers::create_address(tx, &shop, id, &body.address, body.is_default, now)
        })
        .await?;
    wake(&state);
    Ok(HttpResponse::Ok().json(SubscriptionAddressAnswer {
        customer_address: address,
    }))
}

/// Updates a customer address.
#[utoipa::path(put, path = "/subscriptions/v1/shops/{shop}/customers/{customer_id}/addresses/{address_id}", operation_id = "update_subscription_customer_address", summary = "Update a customer address", tag = "Subscription customers",
    request_body = SubscriptionCustomerAddressRequest,
    params(("shop" = String, Path, description = "The shop's identifier"), ("customer_id" = i64, Path, description = "The customer's id"), ("address_id" = i64, Path, description = "The address's id")),
    security(("api_token" = ["write_subscriptions"]), ("oauth2" = ["write_subscriptions"])),
    responses((status = 200, body = SubscriptionAddressAnswer)))]
pub async fn update_address(
    state: web::Data<AppState>,
    request: Authorized<scopes::WriteSubscriptions>,
    path: TypedPath<CustomerAddressPath>,
    body: JsonBody,
) -> Result<HttpResponse, ApiError> {
    let path = path.get()?;
    let (customer_id, address_id) = (path.customer_id, path.address_id()?);
    let body = parse_customer_address(&json_value(body)?)?;
    let (shop, now) = (shop_of(&request.access), state.now());
    let address = state
        .write(move |tx| {
            customers::update_address(
                tx,
                &shop,
                customer_id,
                address_id,
                &body.address,
                body.is_default,
                now,
            )
        })
        .await?;
    wake(&state);
    Ok(HttpResponse::Ok().json(SubscriptionAddressAnswer {
        customer_address: address,
    }))
}

/// Deletes a customer address.
#[utoipa::path(delete, path = "/subscriptions/v1/shops/{shop}/customers/{customer_id}/addresses/{address_id}", operation_id = "delete_subscription_customer_address", summary = "Delete a customer address", tag = "Subscription customers",
    params(("shop" = String, Path, description = "The shop's identifier"), ("customer_id" = i64, Path, description = "The customer's id"), ("address_id" = i64, Path, description = "The address's id")),
    security(("api_token" = ["write_subscriptions"]), ("oauth2" = ["write_subscriptions"])),
    responses((status = 204, description = "Deleted")))]
pub async fn delete_address(
    state: web::Data<AppState>,
    request: Authorized<scopes::WriteSubscriptions>,
    path: TypedPath<CustomerAddressPath>,
) -> Result<HttpResponse, ApiError> {
    let path = path.get()?;
    let (customer_id, address_id) = (path.customer_id, path.address_id()?);
    let (shop, now) = (shop_of(&request.access), state.now());
    state
        .write(move |tx| customers::delete_address(tx, &shop, customer_id, address_id, now))
        .await?;
    wake(&state);
    Ok(HttpResponse::NoContent().finish())
}

/// Lists a customer's subscriptions.
///
/// The customer's subscriptions, a page at a time.
#[utoipa::path(get, path = "/subscriptions/v1/shops/{shop}/customers/{customer_id}/subscriptions", operation_id = "list_customer_subscriptions", summary = "List a customer's subscriptions", tag = "Subscription customers",
    params(("shop" = String, Path, description = "The shop's identifier"), ("customer_id" = i64, Path, description = "The customer's id"),
        ("limit" = Option<i64>, Query, minimum = 1, maximum = 250, description = "Subscriptions per page (default 50)"),
        ("page" = Option<i64>, Query, minimum = 1, maximum = 1000000, description = "The page, from 1 (the default)")),
    security(("api_token" = ["read_subscriptions"]), ("oauth2" = ["read_subscriptions"])),
    responses((status = 200, body = CustomerSubscriptionList)))]
pub async fn subscriptions(
    state: web::Data<AppState>,
    request: Authorized<scopes::ReadSubscriptions>,
    path: TypedPath<CustomerPath>,
    http: HttpRequest,
) -> Result<HttpResponse, ApiError> {
    let id = path.get()?.customer_id;
    let (limit, page) = parse_page(&query_pairs(&http)?)?;
    let shop = shop_of(&request.access);
    let (subscriptions, pagination) = state
        .read(move |tx| customer_subscriptions(tx, &shop, id, limit, page))
        .await?;
    Ok(HttpResponse::Ok().json(CustomerSubscriptionList {
        subscriptions,
        pagination,
    }))
}
