//! The customer directory.

use actix_web::{HttpRequest, HttpResponse, web};
use mercer_domain::directory::{
    AddressResource, CustomerList, CustomerResource, Label, OrderBy, OrderDirection, add_label,
    customer_address, customer_addresses, delete_label, get_customer, get_customer_by_platform_id,
    list_customers, parse_directory_query,
};
use mercer_domain::kernel::ids::{AddressId, CustomerId, LabelId};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::http::error::ApiError;
use crate::http::extract::{Authorized, JsonBody, TypedPath, query_pairs, scopes};
use crate::http::links::{PublicUrl, link};
use crate::http::state::AppState;

/// This request's path and query with `page` replaced, as a link: under the public URL when one
/// is configured, relative otherwise (never from the request's Host header).
fn page_url(
    public_url: Option<&PublicUrl>,
    request: &HttpRequest,
    pairs: &[(String, String)],
    page: i64,
) -> String {
    let mut query: Vec<(String, String)> = pairs
        .iter()
        .filter(|(key, _)| key != "page")
        .cloned()
        .collect();
    query.push(("page".to_string(), page.to_string()));
    let encoded: Vec<String> = query
        .iter()
        .map(|(key, value)| format!("{}={}", url_encode(key), url_encode(value)))
        .collect();
    link(
        public_url,
        &format!("{}?{}", request.path(), encoded.join("&")),
    )
}

fn url_encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// List Customers' pagination, its pages as links to this request's path.
#[derive(Serialize, ToSchema)]
pub struct DirectoryPagination {
    /// Customers that match, over every page.
    total: i64,
    /// Customers on this page.
    count: usize,
    /// Customers per page: the query's limit.
    per_page: i64,
    /// This page, from 1.
    current_page: i64,
    /// How many pages the matching customers fill (0 when none match).
    total_pages: i64,
    /// The next page: this request's path and query with `page` replaced, under the server's
    /// public URL when one is configured (relative otherwise); null on the last page.
    next_url: Option<String>,
    /// The previous page (the last page when this one is past it), in the same form; null on
    /// page 1.
    previous_url: Option<String>,
}

/// The list's pagination, its pages as links to this request's path.
fn pagination(
    public_url: Option<&PublicUrl>,
    request: &HttpRequest,
    pairs: &[(String, String)],
    list: &CustomerList,
) -> DirectoryPagination {
    let url = |page: Option<i64>| page.map(|page| page_url(public_url, request, pairs, page));
    DirectoryPagination {
        total: list.total,
        count: list.customers.len(),
        per_page: list.per_page,
        current_page: list.current_page,
        total_pages: list.total_pages,
        next_url: url(list.next_page),
        previous_url: url(list.previous_page),
    }
}

/// `{"pagination", "customers"}`: a page of List Customers.
#[derive(Serialize, ToSchema)]
pub struct DirectoryCustomerList {
    pagination: DirectoryPagination,
    customers: Vec<CustomerResource>,
}

/// `{"customer": {…}}`.
#[derive(Serialize, ToSchema)]
pub struct DirectoryCustomerAnswer {
    customer: CustomerResource,
}

/// `{"addresses": […]}`: every address of the customer.
#[derive(Serialize, ToSchema)]
pub struct DirectoryAddressList {
    addresses: Vec<AddressResource>,
}

/// `{"address": {…}}`.
#[derive(Serialize, ToSchema)]
pub struct DirectoryAddressAnswer {
    address: AddressResource,
}

/// `{"label": {…}}`.
#[derive(Serialize, ToSchema)]
pub struct DirectoryLabelAnswer {
    label: Label,
}

// The paths' ids are read as their types: a segment that is not a number is the 404 of the
// resource it names, answered after the credentials are checked (see `TypedPath`).

/// `…/customers/{id}`.
#[derive(Deserialize)]
pub(super) struct CustomerPath {
    id: CustomerId,
}

/// `…/customers/pid/{platform_id}`.
#[derive(Deserialize)]
pub(super) struct PlatformIdPath {
    platform_id: String,
}

/// `…/customers/{id}/addresses/{address_id}`.
#[derive(Deserialize)]
pub(super) struct AddressPath {
    id: CustomerId,
    address_id: AddressId,
}

/// `…/customers/{id}/labels/{label_id}`.
#[derive(Deserialize)]
pub(super) struct LabelPath {
    id: CustomerId,
    label_id: LabelId,
}

/// Lists customers.
///
/// Takes every documented parameter; a parameter that does not parse is a bad request that names
/// it.
#[utoipa::path(get, path = "/customers/v2/shops/{shop}/customers", operation_id = "list_directory_customers", summary = "List customers", tag = "Customer directory",
    params(("shop" = String, Path, description = "The shop's identifier"), ("since_id" = Option<i64>, Query, description = "Only customers whose id is greater than this"), ("updated_at_min" = Option<String>, Query, format = DateTime, description = "Only customers updated at or after this time, an RFC 3339 date-time"), ("updated_at_max" = Option<String>, Query, format = DateTime, description = "Only customers updated at or before this time, an RFC 3339 date-time"), ("search" = Option<String>, Query, max_length = 256, description = "Text matched, ignoring case, within email, first and last name and phone (up to 256 characters)"), ("ids" = Option<String>, Query, description = "Only customers with one of these ids: comma-separated integers; the parameter may repeat (also as `ids[]`), up to 250 ids in all"), ("orderby" = inline(Option<OrderBy>), Query, description = "The order of the customers (default `id`); ties fall back to the id"), ("orderdirection" = inline(Option<OrderDirection>), Query, description = "The order's direction, any case (default `asc`)"), ("filter" = Option<String>, Query, description = "Conditions `op(field:value)` joined by commas, all of which a customer must meet, such as `gt(id:5),like(email:%@example.test)`: `op` one of `lt`, `lte`, `gt`, `gte`, `eq`, `like` (`like`, with `%` for any text, for text fields only; text fields take `eq` or `like`); `field` one of `id` (an integer), `created_at`, `updated_at`, `platform_created_at` (RFC 3339 date-times), `email`, `first_name`, `last_name`, `phone`, `platform_id` (text). The parameter may repeat, up to 100 conditions in all"), ("label" = Option<String>, Query, max_length = 255, description = "Only customers with a live label of exactly this name"), ("limit" = Option<i64>, Query, minimum = 1, maximum = 250, description = "Customers per page, 1 to 250 (default 50)"), ("page" = Option<i64>, Query, minimum = 1, description = "The page, from 1 (default 1); a page past the last is empty")),
    security(("api_token" = ["read_customers"]), ("oauth2" = ["read_customers"])),
    responses((status = 200, body = DirectoryCustomerList)))]
pub async fn list(
    state: web::Data<AppState>,
    request: Authorized<scopes::ReadCustomers>,
    http: HttpRequest,
) -> Result<HttpResponse, ApiError> {
    let pairs = query_pairs(&http)?;
    let query = parse_directory_query(&pairs)?;
    let shop = request.access.shop;
    let list = state
        .read(move |tx| list_customers(tx, &shop, &query))
        .await?;
    Ok(HttpResponse::Ok().json(DirectoryCustomerList {
        pagination: pagination(state.public_url.as_ref(), &http, &pairs, &list),
        customers: list.customers,
    }))
}

/// Gets a customer by ID.
#[utoipa::path(get, path = "/customers/v2/shops/{shop}/customers/{id}", operation_id = "get_directory_customer", summary = "Get a customer by ID", tag = "Customer directory",
    params(("shop" = String, Path, description = "The shop's identifier"), ("id" = i64, Path, description = "The customer's id (the service's integer)")),
    security(("api_token" = ["read_customers"]), ("oauth2" = ["read_customers"])),
    responses((status = 200, body = DirectoryCustomerAnswer)))]
pub async fn get(
    state: web::Data<AppState>,
    request: Authorized<scopes::ReadCustomers>,
    path: TypedPath<CustomerPath>,
) -> Result<HttpResponse, ApiError> {
    let path = path.get()?;
    let (shop, id) = (request.access.shop, path.id);
    let customer = state.read(move |tx| get_customer(tx, &shop, id)).await?;
    Ok(HttpResponse::Ok().json(DirectoryCustomerAnswer { customer }))
}

/// Gets a customer by platform ID.
#[utoipa::path(get, path = "/customers/v2/shops/{shop}/customers/pid/{platform_id}", operation_id = "get_directory_customer_by_platform_id", summary = "Get a customer by platform ID", tag = "Customer directory",
    params(("shop" = String, Path, description = "The shop's identifier"), ("platform_id" = String, Path, description = "The customer's id on the shop's platform")),
    security(("api_token" = ["read_customers"]), ("oauth2" = ["read_customers"])),
    responses((status = 200, body = DirectoryCustomerAnswer)))]
pub async fn get_by_platform_id(
    state: web::Data<AppState>,
    request: Authorized<scopes::ReadCustomers>,
    path: web::Path<PlatformIdPath>,
) -> Result<HttpResponse, ApiError> {
    let shop = request.access.shop;
    let platform_id = path.into_inner().platform_id;
    let customer = state
        .read(move |tx| get_customer_by_platform_id(tx, &shop, &platform_id))
        .await?;
    Ok(HttpResponse::Ok().json(DirectoryCustomerAnswer { customer }))
}

/// Lists a customer's addresses.
#[utoipa::path(get, path = "/customers/v2/shops/{shop}/customers/{id}/addresses", operation_id = "list_directory_customer_addresses", summary = "List a customer's addresses", tag = "Customer directory",
    params(("shop" = String, Path, description = "The shop's identifier"), ("id" = i64, Path, description = "The customer's id (the service's integer)")),
    security(("api_token" = ["read_customers"]), ("oauth2" = ["read_customers"])),
    responses((status = 200, body = DirectoryAddressList)))]
pub async fn addresses(
    state: web::Data<AppState>,
    request: Authorized<scopes::ReadCustomers>,
    path: TypedPath<CustomerPath>,
) -> Result<HttpResponse, ApiError> {
    let path = path.get()?;
    let (shop, id) = (request.access.shop, path.id);
    let addresses = state
        .read(move |tx| customer_addresses(tx, &shop, id))
        .await?;
    Ok(HttpResponse::Ok().json(DirectoryAddressList { addresses }))
}

/// Gets a customer address by ID.
#[utoipa::path(get, path = "/customers/v2/shops/{shop}/customers/{id}/addresses/{address_id}", operation_id = "get_directory_customer_address", summary = "Get a customer address by ID", tag = "Customer directory",
    params(("shop" = String, Path, description = "The shop's identifier"), ("id" = i64, Path, description = "The customer's id (the service's integer)"), ("address_id" = i64, Path, description = "The address's id")),
    security(("api_token" = ["read_customers"]), ("oauth2" = ["read_customers"])),
    responses((status = 200, body = DirectoryAddressAnswer)))]
pub async fn address(
    state: web::Data<AppState>,
    request: Authorized<scopes::ReadCustomers>,
    path: TypedPath<AddressPath>,
) -> Result<HttpResponse, ApiError> {
    let path = path.get()?;
    let shop = request.access.shop;
    let (customer_id, address_id) = (path.id, path.address_id);
    let address = state
        .read(move |tx| customer_address(tx, &shop, customer_id, address_id))
        .await?;
    Ok(HttpResponse::Ok().json(DirectoryAddressAnswer { address }))
}

/// The body that labels a customer.
#[derive(Deserialize, ToSchema)]
pub struct LabelBody {
    /// The label's text, trimmed: 1 to 255 characters.
    #[schema(value_type = String, min_length = 1, max_length = 255)]
    name: Option<String>,
}

/// Adds a label to a customer.
///
/// Answers with the new label as created, or with the customer's existing label of that name.
#[utoipa::path(post, path = "/customers/v2/shops/{shop}/customers/{id}/labels", operation_id = "add_directory_customer_label", summary = "Add a label to a customer", tag = "Customer directory",
    request_body = LabelBody,
    params(("shop" = String, Path, description = "The shop's identifier"), ("id" = i64, Path, description = "The customer's id (the service's integer)")),
    security(("api_token" = ["write_customers"]), ("oauth2" = ["write_customers"])),
    responses((status = 201, body = DirectoryLabelAnswer, description = "The label was added"), (status = 200, body = DirectoryLabelAnswer, description = "The customer has a live label of that name already: that label")))]
pub async fn add_customer_label(
    state: web::Data<AppState>,
    request: Authorized<scopes::WriteCustomers>,
    path: TypedPath<CustomerPath>,
    body: JsonBody,
) -> Result<HttpResponse, ApiError> {
    let path = path.get()?;
    let body: LabelBody = body.parse()?;
    let (shop, id, now) = (request.access.shop, path.id, state.now());
    let (label, created) = state
        .write(move |tx| add_label(tx, &shop, id, body.name.as_deref(), now))
        .await?;
    let mut response = if created {
        HttpResponse::Created()
    } else {
        HttpResponse::Ok()
    };
    Ok(response.json(DirectoryLabelAnswer { label }))
}

/// Removes a label from a customer.
#[utoipa::path(delete, path = "/customers/v2/shops/{shop}/customers/{id}/labels/{label_id}", operation_id = "delete_directory_customer_label", summary = "Remove a label from a customer", tag = "Customer directory",
    params(("shop" = String, Path, description = "The shop's identifier"), ("id" = i64, Path, description = "The customer's id (the service's integer)"), ("label_id" = i64, Path, description = "The label's id")),
    security(("api_token" = ["write_customers"]), ("oauth2" = ["write_customers"])),
    responses((status = 204, description = "Removed")))]
pub async fn delete_customer_label(
    state: web::Data<AppState>,
    request: Authorized<scopes::WriteCustomers>,
    path: TypedPath<LabelPath>,
) -> Result<HttpResponse, ApiError> {
    let path = path.get()?;
    let shop = request.access.shop;
    let (customer_id, label_id) = (path.id, path.label_id);
    let now = state.now();
    state
        .write(move |tx| delete_label(tx, &shop, customer_id, label_id, now))
        .await?;
    Ok(HttpResponse::NoContent().finish())
}
