//! The box builder's admin handlers: parse, call one use case, wrap in `data`. The helpers
//! here serve the storefront's and the customer's handlers too.

use actix_web::{HttpRequest, HttpResponse, web};
use mercer_domain::DomainError;
use mercer_domain::Timestamp;
use mercer_domain::access::shop::Shop;
use mercer_domain::box_builder::input::{
    parse_box, parse_box_product, parse_box_size, parse_box_sizes, parse_selection,
    parse_time_slot, parse_time_slot_option,
};
use mercer_domain::box_builder::repository::{SelectionFilter, TimeSlotFilter};
use mercer_domain::box_builder::{admin, selections};
use mercer_domain::subscriptions::customers::{PagePagination, parse_page};
use serde::Serialize;
use serde_json::{Value, json};

use crate::http::error::ApiError;
use crate::http::extract::{AnyScope, Authorized, JsonBody, query_pairs, scopes};
use crate::http::state::AppState;

type Read = Authorized<scopes::ReadSubscriptionGroups>;
type Write = Authorized<scopes::WriteSubscriptionGroups>;

pub(super) fn body(given: JsonBody) -> Result<Value, ApiError> {
    serde_json::from_slice(&given.bytes()?).map_err(ApiError::malformed_json)
}

/// A numeric id of the path, or 404 naming the resource (no resource has another id).
pub(super) fn id(text: &str, resource: &'static str) -> Result<i64, ApiError> {
    text.parse()
        .map_err(|_| ApiError::from(DomainError::not_found(resource)))
}

pub(super) fn data(value: impl Serialize) -> HttpResponse {
    HttpResponse::Ok().json(json!({ "data": value }))
}

fn created(value: impl Serialize) -> HttpResponse {
    HttpResponse::Created().json(json!({ "data": value }))
}

/// A list: `{"data": {name: [items]}, "pagination"}`.
pub(super) fn listed<T: Serialize>(
    name: &str,
    (items, pagination): (Vec<T>, PagePagination),
) -> HttpResponse {
    let mut listed = serde_json::Map::new();
    listed.insert(name.to_string(), json!(items));
    HttpResponse::Ok().json(json!({ "data": listed, "pagination": pagination }))
}

pub(super) fn page(request: &HttpRequest) -> Result<(i64, i64), ApiError> {
    Ok(parse_page(&query_pairs(request)?)?)
}

// ---------------------------------------------------------------------------------------
// Boxes

pub async fn list_boxes(
    state: web::Data<AppState>,
    request: Read,
    http: HttpRequest,
) -> Result<HttpResponse, ApiError> {
    let (limit, number) = page(&http)?;
    let shop = request.access.shop;
    let found = state
        .read(move |tx| admin::list_boxes(tx, &shop, limit, number))
        .await?;
    Ok(listed("boxes", found))
}

pub async fn create_box(
    state: web::Data<AppState>,
    request: Write,
    given: JsonBody,
) -> Result<HttpResponse, ApiError> {
    let input = parse_box(&body(given)?, true)?;
    let (shop, now) = (request.access.shop, state.now());
    let made = state
        .write(move |tx| admin::create_box(tx, &shop, input, now))
        .await?;
    Ok(created(json!({ "box": made })))
}

pub async fn get_box(
    state: web::Data<AppState>,
    request: Read,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let box_id = id(&path.1, "box")?;
    let shop = request.access.shop;
    let found = state
        .read(move |tx| admin::get_box(tx, &shop, box_id))
        .await?;
    Ok(data(json!({ "box": found })))
}

pub async fn update_box(
    state: web::Data<AppState>,
    request: Write,
    path: web::Path<(String, String)>,
    given: JsonBody,
) -> Result<HttpResponse, ApiError> {
    let box_id = id(&path.1, "box")?;
    let input = parse_box(&body(given)?, false)?;
    let (shop, now) = (request.access.shop, state.now());
    let changed = state
        .write(move |tx| admin::update_box(tx, &shop, box_id, input, now))
        .await?;
    Ok(data(json!({ "box": changed })))
}

pub async fn delete_box(
    state: web::Data<AppState>,
    request: Write,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let box_id = id(&path.1, "box")?;
    let shop = request.access.shop;
    state
        .write(move |tx| admin::delete_box(tx, &shop, box_id))
        .await?;
    Ok(HttpResponse::NoContent().finish())
}

// ---------------------------------------------------------------------------------------
// Box products

pub async fn list_box_products(
    state: web::Data<AppState>,
    request: Read,
    http: HttpRequest,
) -> Result<HttpResponse, ApiError> {
    let (limit, number) = page(&http)?;
    let shop = request.access.shop;
    let found = state
        .read(move |tx| admin::list_box_products(tx, &shop, limit, number))
        .await?;
    Ok(listed("box_products", found))
}

pub async fn create_box_product(
    state: web::Data<AppState>,
    request: Write,
    given: JsonBody,
) -> Result<HttpResponse, ApiError> {
    let input = parse_box_product(&body(given)?, true)?;
    let (shop, now) = (request.access.shop, state.now());
    let made = state
        .write(move |tx| admin::create_box_product(tx, &shop, input, now))
        .await?;
    Ok(created(json!({ "box_product": made })))
}

pub async fn get_box_product(
    state: web::Data<AppState>,
    request: Read,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let product_id = id(&path.1, "box_product")?;
    let shop = request.access.shop;
    let found = state
        .read(move |tx| admin::get_box_product(tx, &shop, product_id))
        .await?;
    Ok(data(json!({ "box_product": found })))
}

pub async fn update_box_product(
    state: web::Data<AppState>,
    request: Write,
    path: web::Path<(String, String)>,
    given: JsonBody,
) -> Result<HttpResponse, ApiError> {
    let product_id = id(&path.1, "box_product")?;
    let input = parse_box_product(&body(given)?, false)?;
    let (shop, now) = (request.access.shop, state.now());
    let changed = state
        .write(move |tx| admin::update_box_product(tx, &shop, product_id, input, now))
        .await?;
    Ok(data(json!({ "box_product": changed })))
}

pub async fn delete_box_product(
    state: web::Data<AppState>,
    request: Write,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let product_id = id(&path.1, "box_product")?;
    let shop = request.access.shop;
    state
        .write(move |tx| admin::delete_box_product(tx, &shop, product_id))
        .await?;
    Ok(HttpResponse::NoContent().finish())
}

// ---------------------------------------------------------------------------------------
// Box sizes (no scope bracketed in the seed: any valid token of the shop)

pub async fn list_box_sizes(
    state: web::Data<AppState>,
    request: Authorized<AnyScope>,
    path: web::Path<(String, String)>,
    http: HttpRequest,
) -> Result<HttpResponse, ApiError> {
    let box_id = id(&path.1, "box")?;
    let (limit, number) = page(&http)?;
    let shop = request.access.shop;
    let found = state
        .read(move |tx| admin::list_box_sizes(tx, &shop, box_id, limit, number))
        .await?;
    Ok(listed("box_sizes", found))
}

/// Create Box Size: 200 with the size itself under `data` (the seed's answer).
pub async fn create_box_size(
    state: web::Data<AppState>,
    request: Authorized<AnyScope>,
    path: web::Path<(String, String)>,
    given: JsonBody,
) -> Result<HttpResponse, ApiError> {
    let box_id = id(&path.1, "box")?;
    let input = parse_box_size(&body(given)?, true)?;
    let (shop, now) = (request.access.shop, state.now());
    let made = state
        .write(move |tx| admin::create_box_size(tx, &shop, box_id, input, now))
        .await?;
    Ok(data(made))
}

/// Update Box Sizes (bulk): the sizes under `data`, in the order given.
pub async fn update_box_sizes(
    state: web::Data<AppState>,
    request: Authorized<AnyScope>,
    path: web::Path<(String, String)>,
    given: JsonBody,
) -> Result<HttpResponse, ApiError> {
    let box_id = id(&path.1, "box")?;
    let inputs = parse_box_sizes(&body(given)?)?;
    let (shop, now) = (request.access.shop, state.now());
    let saved = state
        .write(move |tx| admin::update_box_sizes(tx, &shop, box_id, inputs, now))
        .await?;
    Ok(data(saved))
}

pub async fn get_box_size(
    state: web::Data<AppState>,
    request: Authorized<AnyScope>,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let size_id = id(&path.1, "box_size")?;
    let shop = request.access.shop;
    let found = state
        .read(move |tx| admin::get_box_size(tx, &shop, size_id))
        .await?;
    Ok(data(json!({ "box_size": found })))
}

/// Update Box Size: 200 with the size itself under `data` (the seed's answer).
pub async fn update_box_size(
    state: web::Data<AppState>,
    request: Authorized<AnyScope>,
    path: web::Path<(String, String)>,
    given: JsonBody,
) -> Result<HttpResponse, ApiError> {
    let size_id = id(&path.1, "box_size")?;
    let input = parse_box_size(&body(given)?, false)?;
    let (shop, now) = (request.access.shop, state.now());
    let changed = state
        .write(move |tx| admin::update_box_size(tx, &shop, size_id, input, now))
        .await?;
    Ok(data(changed))
}

// ---------------------------------------------------------------------------------------
// Time slots and their options

/// `order_datetime` of the query (RFC 3339), if given; 400 when it does not read.
pub(super) fn order_datetime(request: &HttpRequest) -> Result<Option<Timestamp>, ApiError> {
    let pairs = query_pairs(request)?;
    let Some((_, text)) = pairs.iter().find(|(key, _)| key == "order_datetime") else {
        return Ok(None);
    };
    Timestamp::parse_rfc3339(text.trim())
        .map(Some)
        .ok_or_else(|| {
            ApiError::invalid_query(
                "order_datetime",
                "order_datetime must be an RFC 3339 date-time such as 2026-03-01T10:30:00Z",
            )
        })
}

pub async fn list_time_slots(
    state: web::Data<AppState>,
    request: Read,
    path: web::Path<(String, String)>,
    http: HttpRequest,
) -> Result<HttpResponse, ApiError> {
    let box_id = id(&path.1, "box")?;
    let (limit, number) = page(&http)?;
    let filter = TimeSlotFilter {
        holding: order_datetime(&http)?,
        visible_at: None,
    };
    let shop = request.access.shop;
    let found = state
        .read(move |tx| admin::list_time_slots(tx, &shop, box_id, filter, limit, number))
        .await?;
    Ok(listed("time_slots", found))
}

/// Create Time Slot: 201 with the slot under `data["time-slot"]` (the seed's name).
pub async fn create_time_slot(
    state: web::Data<AppState>,
    request: Write,
    path: web::Path<(String, String)>,
    given: JsonBody,
) -> Result<HttpResponse, ApiError> {
    let box_id = id(&path.1, "box")?;
    let input = parse_time_slot(&body(given)?, true)?;
    let (shop, now) = (request.access.shop, state.now());
    let made = state
        .write(move |tx| admin::create_time_slot(tx, &shop, box_id, input, now))
        .await?;
    Ok(created(json!({ "time-slot": made })))
}

pub async fn get_time_slot(
    state: web::Data<AppState>,
    request: Read,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let slot_id = id(&path.1, "time_slot")?;
    let shop = request.access.shop;
    let found = state
        .read(move |tx| admin::get_time_slot(tx, &shop, slot_id))
        .await?;
    Ok(data(json!({ "time_slot": found })))
}

pub async fn update_time_slot(
    state: web::Data<AppState>,
    request: Write,
    path: web::Path<(String, String)>,
    given: JsonBody,
) -> Result<HttpResponse, ApiError> {
    let slot_id = id(&path.1, "time_slot")?;
    let input = parse_time_slot(&body(given)?, false)?;
    let (shop, now) = (request.access.shop, state.now());
    let changed = state
        .write(move |tx| admin::update_time_slot(tx, &shop, slot_id, input, now))
        .await?;
    Ok(data(json!({ "time_slot": changed })))
}

pub async fn delete_time_slot(
    state: web::Data<AppState>,
    request: Write,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let slot_id = id(&path.1, "time_slot")?;
    let shop = request.access.shop;
    state
        .write(move |tx| admin::delete_time_slot(tx, &shop, slot_id))
        .await?;
    Ok(HttpResponse::NoContent().finish())
}

pub async fn list_time_slot_options(
    state: web::Data<AppState>,
    request: Read,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let slot_id = id(&path.1, "time_slot")?;
    let shop = request.access.shop;
    let options = state
        .read(move |tx| admin::list_time_slot_options(tx, &shop, slot_id))
        .await?;
    Ok(data(json!({ "time_slot_options": options })))
}

pub async fn create_time_slot_option(
    state: web::Data<AppState>,
    request: Write,
    path: web::Path<(String, String)>,
    given: JsonBody,
) -> Result<HttpResponse, ApiError> {
    let slot_id = id(&path.1, "time_slot")?;
    let product_id = parse_time_slot_option(&body(given)?)?;
    let (shop, now) = (request.access.shop, state.now());
    let option = state
        .write(move |tx| admin::add_time_slot_option(tx, &shop, slot_id, product_id, now))
        .await?;
    Ok(data(json!({ "time_slot_option": option })))
}

pub async fn delete_time_slot_option(
    state: web::Data<AppState>,
    request: Write,
    path: web::Path<(String, String, String)>,
) -> Result<HttpResponse, ApiError> {
    let (_, slot, product) = path.into_inner();
    let (slot_id, product_id) = (id(&slot, "time_slot")?, id(&product, "time_slot_option")?);
    let shop = request.access.shop;
    state
        .write(move |tx| admin::remove_time_slot_option(tx, &shop, slot_id, product_id))
        .await?;
    Ok(HttpResponse::NoContent().finish())
}

// ---------------------------------------------------------------------------------------
// Selections and the box line items (`read_subscriptions`, `write_subscriptions`)

type ReadSubscriptions = Authorized<scopes::ReadSubscriptions>;
type WriteSubscriptions = Authorized<scopes::WriteSubscriptions>;

/// `svc_platform_subscription_line_item_id` and `order_datetime` of the query; 400 when one
/// does not read.
pub(super) fn selection_filter(request: &HttpRequest) -> Result<SelectionFilter, ApiError> {
    let pairs = query_pairs(request)?;
    let line_item_id = match pairs
        .iter()
        .find(|(key, _)| key == "svc_platform_subscription_line_item_id")
    {
        None => None,
        Some((_, text)) => Some(text.trim().parse().map_err(|_| {
            ApiError::invalid_query(
                "svc_platform_subscription_line_item_id",
                "svc_platform_subscription_line_item_id must be an integer",
            )
        })?),
    };
    Ok(SelectionFilter {
        line_item_id,
        order_datetime: order_datetime(request)?,
    })
}

// The selection handlers of the admin routes and of the customer's routes share these; only
// how the customer is known differs (a path parameter under an API token, or the customer's
// own token).

pub(super) async fn selections_of(
    state: web::Data<AppState>,
    shop: Shop,
    customer: String,
    http: HttpRequest,
) -> Result<HttpResponse, ApiError> {
    let (limit, number) = page(&http)?;
    let filter = selection_filter(&http)?;
    let found = state
        .read(move |tx| selections::list_selections(tx, &shop, &customer, filter, limit, number))
        .await?;
    Ok(listed("selections", found))
}

/// Create Selection: 200 `{"data": {"selection"}}` (contract §7); the same line item and
/// order date again replaces the selection made before.
pub(super) async fn make_selection(
    state: web::Data<AppState>,
    shop: Shop,
    customer: String,
    given: JsonBody,
) -> Result<HttpResponse, ApiError> {
    let input = parse_selection(&body(given)?, true)?;
    let now = state.now();
    let made = state
        .write(move |tx| selections::create_selection(tx, &shop, &customer, input, now))
        .await?;
    state.webhooks.notify();
    Ok(data(json!({ "selection": made })))
}

pub(super) async fn selection_of(
    state: web::Data<AppState>,
    shop: Shop,
    customer: String,
    selection: &str,
) -> Result<HttpResponse, ApiError> {
    let selection_id = id(selection, "selection")?;
    let found = state
        .read(move |tx| selections::get_selection(tx, &shop, &customer, selection_id))
        .await?;
    Ok(data(json!({ "selection": found })))
}

pub(super) async fn change_selection(
    state: web::Data<AppState>,
    shop: Shop,
    customer: String,
    selection: &str,
    given: JsonBody,
) -> Result<HttpResponse, ApiError> {
    let selection_id = id(selection, "selection")?;
    let input = parse_selection(&body(given)?, false)?;
    let now = state.now();
    let changed = state
        .write(move |tx| {
            selections::update_selection(tx, &shop, &customer, selection_id, input, now)
        })
        .await?;
    state.webhooks.notify();
    Ok(data(json!({ "selection": changed })))
}

pub async fn list_selections(
    state: web::Data<AppState>,
    request: ReadSubscriptions,
    path: web::Path<(String, String)>,
    http: HttpRequest,
) -> Result<HttpResponse, ApiError> {
    let customer = path.into_inner().1;
    selections_of(state, request.access.shop, customer, http).await
}

pub async fn create_selection(
    state: web::Data<AppState>,
    request: WriteSubscriptions,
    path: web::Path<(String, String)>,
    given: JsonBody,
) -> Result<HttpResponse, ApiError> {
    let customer = path.into_inner().1;
    make_selection(state, request.access.shop, customer, given).await
}

pub async fn get_selection(
    state: web::Data<AppState>,
    request: ReadSubscriptions,
    path: web::Path<(String, String, String)>,
) -> Result<HttpResponse, ApiError> {
    let (_, customer, selection) = path.into_inner();
    selection_of(state, request.access.shop, customer, &selection).await
}

pub async fn update_selection(
    state: web::Data<AppState>,
    request: WriteSubscriptions,
    path: web::Path<(String, String, String)>,
    given: JsonBody,
) -> Result<HttpResponse, ApiError> {
    let (_, customer, selection) = path.into_inner();
    change_selection(state, request.access.shop, customer, &selection, given).await
}

pub async fn delete_selection(
    state: web::Data<AppState>,
    request: WriteSubscriptions,
    path: web::Path<(String, String, String)>,
) -> Result<HttpResponse, ApiError> {
    let (_, customer, selection) = path.into_inner();
    let selection_id = id(&selection, "selection")?;
    let shop = request.access.shop;
    state
        .write(move |tx| selections::delete_selection(tx, &shop, &customer, selection_id))
        .await?;
    Ok(HttpResponse::NoContent().finish())
}

pub async fn list_box_line_items(
    state: web::Data<AppState>,
    request: ReadSubscriptions,
    http: HttpRequest,
) -> Result<HttpResponse, ApiError> {
    let (limit, number) = page(&http)?;
    let shop = request.access.shop;
    let found = state
        .read(move |tx| selections::list_box_line_items(tx, &shop, limit, number))
        .await?;
    Ok(listed("subscription_line_items", found))
}

pub async fn get_box_line_item(
    state: web::Data<AppState>,
    request: ReadSubscriptions,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let line_item_id = id(&path.1, "subscription_line_item")?;
    let shop = request.access.shop;
    let found = state
        .read(move |tx| selections::get_box_line_item(tx, &shop, line_item_id))
        .await?;
    Ok(data(json!({ "subscription_line_item": found })))
}
