//! The customer directory (contract §6).

use actix_web::{HttpRequest, HttpResponse, web};
use mercer_domain::directory::{
    CustomerList, add_label, customer_address, customer_addresses, delete_label, get_customer,
    get_customer_by_platform_id, list_customers, parse_directory_query,
};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::http::error::ApiError;
use crate::http::extract::{Authorized, JsonBody, query_pairs, scopes};
use crate::http::state::AppState;

/// This request's URL with `page` replaced.
fn page_url(request: &HttpRequest, pairs: &[(String, String)], page: i64) -> String {
    let info = request.connection_info();
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
    format!(
        "{}://{}{}?{}",
        info.scheme(),
        info.host(),
        request.path(),
        encoded.join("&")
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

/// The list's pagination, its pages as URLs of this request.
fn pagination(request: &HttpRequest, pairs: &[(String, String)], list: &CustomerList) -> Value {
    let url = |page: Option<i64>| page.map(|page| page_url(request, pairs, page));
    json!({
        "total": list.total,
        "count": list.customers.len(),
        "per_page": list.per_page,
        "current_page": list.current_page,
        "total_pages": list.total_pages,
        "next_url": url(list.next_page),
        "previous_url": url(list.previous_page),
    })
}

/// List Customers with every seed parameter; 400 names a parameter that does not parse.
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
    Ok(HttpResponse::Ok().json(json!({
        "pagination": pagination(&http, &pairs, &list),
        "customers": list.customers,
    })))
}

/// Get Customer by ID.
pub async fn get(
    state: web::Data<AppState>,
    request: Authorized<scopes::ReadCustomers>,
    path: web::Path<(String, i64)>,
) -> Result<HttpResponse, ApiError> {
    let (shop, id) = (request.access.shop, path.1);
    let customer = state.read(move |tx| get_customer(tx, &shop, id)).await?;
    Ok(HttpResponse::Ok().json(json!({ "customer": customer })))
}

/// Get Customer by Platform ID.
pub async fn get_by_platform_id(
    state: web::Data<AppState>,
    request: Authorized<scopes::ReadCustomers>,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let shop = request.access.shop;
    let platform_id = path.into_inner().1;
    let customer = state
        .read(move |tx| get_customer_by_platform_id(tx, &shop, &platform_id))
        .await?;
    Ok(HttpResponse::Ok().json(json!({ "customer": customer })))
}

/// List Customer Addresses.
pub async fn addresses(
    state: web::Data<AppState>,
    request: Authorized<scopes::ReadCustomers>,
    path: web::Path<(String, i64)>,
) -> Result<HttpResponse, ApiError> {
    let (shop, id) = (request.access.shop, path.1);
    let addresses = state
        .read(move |tx| customer_addresses(tx, &shop, id))
        .await?;
    Ok(HttpResponse::Ok().json(json!({ "addresses": addresses })))
}

/// Get Customer Address by ID.
pub async fn address(
    state: web::Data<AppState>,
    request: Authorized<scopes::ReadCustomers>,
    path: web::Path<(String, i64, i64)>,
) -> Result<HttpResponse, ApiError> {
    let shop = request.access.shop;
    let (_, customer_id, address_id) = path.into_inner();
    let address = state
        .read(move |tx| customer_address(tx, &shop, customer_id, address_id))
        .await?;
    Ok(HttpResponse::Ok().json(json!({ "address": address })))
}

#[derive(Deserialize)]
struct LabelBody {
    name: Option<String>,
}

/// Add a label: 201 with the new label, or 200 with the customer's label of that name.
pub async fn add_customer_label(
    state: web::Data<AppState>,
    request: Authorized<scopes::WriteCustomers>,
    path: web::Path<(String, i64)>,
    body: JsonBody,
) -> Result<HttpResponse, ApiError> {
    let body: LabelBody = body.parse()?;
    let (shop, id, now) = (request.access.shop, path.1, state.now());
    let (label, created) = state
        .write(move |tx| add_label(tx, &shop, id, body.name.as_deref(), now))
        .await?;
    let mut response = if created {
        HttpResponse::Created()
    } else {
        HttpResponse::Ok()
    };
    Ok(response.json(json!({ "label": label })))
}

/// Remove a label: 204.
pub async fn delete_customer_label(
    state: web::Data<AppState>,
    request: Authorized<scopes::WriteCustomers>,
    path: web::Path<(String, i64, i64)>,
) -> Result<HttpResponse, ApiError> {
    let shop = request.access.shop;
    let (_, customer_id, label_id) = path.into_inner();
    let now = state.now();
    state
        .write(move |tx| delete_label(tx, &shop, customer_id, label_id, now))
        .await?;
    Ok(HttpResponse::NoContent().finish())
}
