//! The box builder's admin handlers: parse, call one use case, wrap in `data`. The helpers
//! here serve the storefront's and the customer's handlers too.

use actix_web::{HttpRequest, HttpResponse, web};
use mercer_domain::DomainError;
use mercer_domain::Timestamp;
use mercer_domain::access::shop::Shop;
use mercer_domain::box_builder::input::{
    BoxProductRequest, BoxProductUpdateRequest, BoxRequest, BoxSizeRequest, BoxSizeUpdateFields,
    BoxSizeUpdateRequest, BoxUpdateRequest, SelectionRequest, SelectionUpdateRequest,
    TimeSlotOptionRequest, TimeSlotRequest, TimeSlotUpdateRequest, parse_box, parse_box_product,
    parse_box_size, parse_box_sizes, parse_selection, parse_time_slot, parse_time_slot_option,
};
use mercer_domain::box_builder::repository::{SelectionFilter, TimeSlotFilter};
use mercer_domain::box_builder::{admin, selections};
use mercer_domain::kernel::ids::{
    BoxId, BoxProductId, BoxSizeId, LineItemId, SelectionId, TimeSlotId,
};
use mercer_domain::subscriptions::customers::parse_page;
use serde::Deserialize;
use serde_json::Value;

use super::answers::{
    BoxAnswer, BoxLineItemAnswer, BoxLineItemList, BoxList, BoxProductAnswer, BoxProductList,
    BoxSizeAnswer, BoxSizeList, BoxSizeSaved, BoxSizesSaved, SelectionAnswer, SelectionList,
    TimeSlotAnswer, TimeSlotCreated, TimeSlotList, TimeSlotOptionAnswer, TimeSlotOptionList,
    created, ok,
};

use crate::http::error::ApiError;
use crate::http::extract::{Authorized, JsonBody, TypedPath, query_pairs, scopes};
use crate::http::state::AppState;

type Read = Authorized<scopes::ReadSubscriptionGroups>;
type Write = Authorized<scopes::WriteSubscriptionGroups>;

pub(super) fn body(given: JsonBody) -> Result<Value, ApiError> {
    serde_json::from_slice(&given.bytes()?).map_err(ApiError::malformed_json)
}

/// A numeric id of the path, or 404 naming `resource`: for the two path segments whose 404
/// names another resource than their id's type would (a time slot option's box product, and
/// a box line item, whose 404 is a `subscription_line_item`, not a `line_item`).
fn id(text: &str, resource: &'static str) -> Result<i64, ApiError> {
    text.parse()
        .map_err(|_| ApiError::from(DomainError::not_found(resource)))
}

// The routes' paths. Each names the segments its handlers read (an id that is not a number is
// its resource's 404); `{shop}` is read by the access check.

/// `…/boxes/{box_id}`; the storefront reads the shop from it too.
#[derive(Deserialize)]
pub struct BoxPath {
    pub(super) shop: String,
    pub(super) box_id: BoxId,
}

/// `…/box_products/{box_product_id}`.
#[derive(Deserialize)]
pub struct BoxProductPath {
    box_product_id: BoxProductId,
}

/// `…/box_sizes/{box_size_id}`.
#[derive(Deserialize)]
pub struct BoxSizePath {
    box_size_id: BoxSizeId,
}

/// `…/time_slots/{time_slot_id}`.
#[derive(Deserialize)]
pub struct TimeSlotPath {
    time_slot_id: TimeSlotId,
}

/// `…/time_slots/{time_slot_id}/options/{box_product_id}`. The product segment is read by
/// hand: one that is not a number is a `time_slot_option` 404, not a `box_product` one.
#[derive(Deserialize)]
pub struct TimeSlotOptionPath {
    time_slot_id: TimeSlotId,
    box_product_id: String,
}

/// `…/customers/{platform_customer_id}/selections`.
#[derive(Deserialize)]
pub struct CustomerPath {
    platform_customer_id: String,
}

/// `…/customers/{platform_customer_id}/selections/{selection_id}`; the customer's own
/// routes read only the selection (their customer is the token's).
#[derive(Deserialize)]
pub struct SelectionPath {
    pub(super) platform_customer_id: String,
    pub(super) selection_id: SelectionId,
}

/// `…/subscription_line_items/{line_item_id}`, read by hand: its 404 names a
/// `subscription_line_item`.
#[derive(Deserialize)]
pub struct LineItemPath {
    line_item_id: String,
}

pub(super) fn page(request: &HttpRequest) -> Result<(i64, i64), ApiError> {
    Ok(parse_page(&query_pairs(request)?)?)
}

// ---------------------------------------------------------------------------------------
// Boxes

/// Lists boxes.
///
/// A page of the shop's boxes, ordered by id.
#[utoipa::path(get, path = "/box_builder/v1/shops/{shop}/boxes", operation_id = "list_boxes", summary = "List boxes", tag = "Box builder: boxes",
    params(("shop" = String, Path, description = "The shop's identifier"), ("limit" = Option<i64>, Query, minimum = 1, maximum = 250, description = "Items per page, 1 to 250 (default 50)"), ("page" = Option<i64>, Query, minimum = 1, maximum = 1000000, description = "The page, from 1 (default 1); a page past the last is empty")),
    security(("api_token" = ["read_subscription_groups"]), ("oauth2" = ["read_subscription_groups"])),
    responses((status = 200, body = BoxList)))]
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
    Ok(ok(BoxList::of(found)))
}

/// Creates a box.
///
/// Makes a subscription group of the shop a box. A group has at most one box: making a second one
/// for the same group is a conflict.
#[utoipa::path(post, path = "/box_builder/v1/shops/{shop}/boxes", operation_id = "create_box", summary = "Create a box", tag = "Box builder: boxes",
    request_body = BoxRequest,
    params(("shop" = String, Path, description = "The shop's identifier")),
    security(("api_token" = ["write_subscription_groups"]), ("oauth2" = ["write_subscription_groups"])),
    responses((status = 201, body = BoxAnswer)))]
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
    Ok(created(BoxAnswer::of(made)))
}

/// Gets a box.
///
/// One box of the shop.
#[utoipa::path(get, path = "/box_builder/v1/shops/{shop}/boxes/{box_id}", operation_id = "get_box", summary = "Get a box", tag = "Box builder: boxes",
    params(("shop" = String, Path, description = "The shop's identifier"), ("box_id" = i64, Path, description = "The box's id")),
    security(("api_token" = ["read_subscription_groups"]), ("oauth2" = ["read_subscription_groups"])),
    responses((status = 200, body = BoxAnswer)))]
pub async fn get_box(
    state: web::Data<AppState>,
    request: Read,
    path: TypedPath<BoxPath>,
) -> Result<HttpResponse, ApiError> {
    let path = path.get()?;
    let box_id = path.box_id;
    let shop = request.access.shop;
    let found = state
        .read(move |tx| admin::get_box(tx, &shop, box_id))
        .await?;
    Ok(ok(BoxAnswer::of(found)))
}

/// Updates a box.
///
/// The fields given replace the box's.
#[utoipa::path(patch, path = "/box_builder/v1/shops/{shop}/boxes/{box_id}", operation_id = "update_box", summary = "Update a box", tag = "Box builder: boxes",
    request_body = BoxUpdateRequest,
    params(("shop" = String, Path, description = "The shop's identifier"), ("box_id" = i64, Path, description = "The box's id")),
    security(("api_token" = ["write_subscription_groups"]), ("oauth2" = ["write_subscription_groups"])),
    responses((status = 200, body = BoxAnswer)))]
pub async fn update_box(
    state: web::Data<AppState>,
    request: Write,
    path: TypedPath<BoxPath>,
    given: JsonBody,
) -> Result<HttpResponse, ApiError> {
    let path = path.get()?;
    let box_id = path.box_id;
    let input = parse_box(&body(given)?, false)?;
    let (shop, now) = (request.access.shop, state.now());
    let changed = state
        .write(move |tx| admin::update_box(tx, &shop, box_id, input, now))
        .await?;
    Ok(ok(BoxAnswer::of(changed)))
}

/// Deletes a box.
#[utoipa::path(delete, path = "/box_builder/v1/shops/{shop}/boxes/{box_id}", operation_id = "delete_box", summary = "Delete a box", tag = "Box builder: boxes",
    params(("shop" = String, Path, description = "The shop's identifier"), ("box_id" = i64, Path, description = "The box's id")),
    security(("api_token" = ["write_subscription_groups"]), ("oauth2" = ["write_subscription_groups"])),
    responses((status = 204, description = "Deleted")))]
pub async fn delete_box(
    state: web::Data<AppState>,
    request: Write,
    path: TypedPath<BoxPath>,
) -> Result<HttpResponse, ApiError> {
    let path = path.get()?;
    let box_id = path.box_id;
    let shop = request.access.shop;
    state
        .write(move |tx| admin::delete_box(tx, &shop, box_id))
        .await?;
    Ok(HttpResponse::NoContent().finish())
}

// ---------------------------------------------------------------------------------------
// Box products

/// Lists box products.
///
/// A page of the shop's box products, ordered by id.
#[utoipa::path(get, path = "/box_builder/v1/shops/{shop}/box_products", operation_id = "list_box_products", summary = "List box products", tag = "Box builder: box products",
    params(("shop" = String, Path, description = "The shop's identifier"), ("limit" = Option<i64>, Query, minimum = 1, maximum = 250, description = "Items per page, 1 to 250 (default 50)"), ("page" = Option<i64>, Query, minimum = 1, maximum = 1000000, description = "The page, from 1 (default 1); a page past the last is empty")),
    security(("api_token" = ["read_subscription_groups"]), ("oauth2" = ["read_subscription_groups"])),
    responses((status = 200, body = BoxProductList)))]
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
    Ok(ok(BoxProductList::of(found)))
}

/// Creates a box product.
///
/// Makes a variant of the catalogue a product that boxes may hold.
#[utoipa::path(post, path = "/box_builder/v1/shops/{shop}/box_products", operation_id = "create_box_product", summary = "Create a box product", tag = "Box builder: box products",
    request_body = BoxProductRequest,
    params(("shop" = String, Path, description = "The shop's identifier")),
    security(("api_token" = ["write_subscription_groups"]), ("oauth2" = ["write_subscription_groups"])),
    responses((status = 201, body = BoxProductAnswer)))]
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
    Ok(created(BoxProductAnswer::of(made)))
}

/// Gets a box product.
///
/// One box product of the shop.
#[utoipa::path(get, path = "/box_builder/v1/shops/{shop}/box_products/{box_product_id}", operation_id = "get_box_product", summary = "Get a box product", tag = "Box builder: box products",
    params(("shop" = String, Path, description = "The shop's identifier"), ("box_product_id" = i64, Path, description = "The box product's id")),
    security(("api_token" = ["read_subscription_groups"]), ("oauth2" = ["read_subscription_groups"])),
    responses((status = 200, body = BoxProductAnswer)))]
pub async fn get_box_product(
    state: web::Data<AppState>,
    request: Read,
    path: TypedPath<BoxProductPath>,
) -> Result<HttpResponse, ApiError> {
    let path = path.get()?;
    let product_id = path.box_product_id;
    let shop = request.access.shop;
    let found = state
        .read(move |tx| admin::get_box_product(tx, &shop, product_id))
        .await?;
    Ok(ok(BoxProductAnswer::of(found)))
}

/// Updates a box product.
///
/// The fields given replace the box product's.
#[utoipa::path(patch, path = "/box_builder/v1/shops/{shop}/box_products/{box_product_id}", operation_id = "update_box_product", summary = "Update a box product", tag = "Box builder: box products",
    request_body = BoxProductUpdateRequest,
    params(("shop" = String, Path, description = "The shop's identifier"), ("box_product_id" = i64, Path, description = "The box product's id")),
    security(("api_token" = ["write_subscription_groups"]), ("oauth2" = ["write_subscription_groups"])),
    responses((status = 200, body = BoxProductAnswer)))]
pub async fn update_box_product(
    state: web::Data<AppState>,
    request: Write,
    path: TypedPath<BoxProductPath>,
    given: JsonBody,
) -> Result<HttpResponse, ApiError> {
    let path = path.get()?;
    let product_id = path.box_product_id;
    let input = parse_box_product(&body(given)?, false)?;
    let (shop, now) = (request.access.shop, state.now());
    let changed = state
        .write(move |tx| admin::update_box_product(tx, &shop, product_id, input, now))
        .await?;
    Ok(ok(BoxProductAnswer::of(changed)))
}

/// Deletes a box product.
#[utoipa::path(delete, path = "/box_builder/v1/shops/{shop}/box_products/{box_product_id}", operation_id = "delete_box_product", summary = "Delete a box product", tag = "Box builder: box products",
    params(("shop" = String, Path, description = "The shop's identifier"), ("box_product_id" = i64, Path, description = "The box product's id")),
    security(("api_token" = ["write_subscription_groups"]), ("oauth2" = ["write_subscription_groups"])),
    responses((status = 204, description = "Deleted")))]
pub async fn delete_box_product(
    state: web::Data<AppState>,
    request: Write,
    path: TypedPath<BoxProductPath>,
) -> Result<HttpResponse, ApiError> {
    let path = path.get()?;
    let product_id = path.box_product_id;
    let shop = request.access.shop;
    state
        .write(move |tx| admin::delete_box_product(tx, &shop, product_id))
        .await?;
    Ok(HttpResponse::NoContent().finish())
}

// ---------------------------------------------------------------------------------------
// Box sizes (read_subscription_groups to read, write_subscription_groups to write, as the
// other admin resources)

/// Lists box sizes.
///
/// A page of the box's sizes.
#[utoipa::path(get, path = "/box_builder/v1/shops/{shop}/boxes/{box_id}/box_sizes", operation_id = "list_box_sizes", summary = "List box sizes", tag = "Box builder: box sizes",
    params(("shop" = String, Path, description = "The shop's identifier"), ("box_id" = i64, Path, description = "The box's id"), ("limit" = Option<i64>, Query, minimum = 1, maximum = 250, description = "Items per page, 1 to 250 (default 50)"), ("page" = Option<i64>, Query, minimum = 1, maximum = 1000000, description = "The page, from 1 (default 1); a page past the last is empty")),
    security(("api_token" = ["read_subscription_groups"]), ("oauth2" = ["read_subscription_groups"])),
    responses((status = 200, body = BoxSizeList)))]
pub async fn list_box_sizes(
    state: web::Data<AppState>,
    request: Read,
    path: TypedPath<BoxPath>,
    http: HttpRequest,
) -> Result<HttpResponse, ApiError> {
    let path = path.get()?;
    let box_id = path.box_id;
    let (limit, number) = page(&http)?;
    let shop = request.access.shop;
    let found = state
        .read(move |tx| admin::list_box_sizes(tx, &shop, box_id, limit, number))
        .await?;
    Ok(ok(BoxSizeList::of(found)))
}

/// Creates a box size.
///
/// Answers with the new size itself under `data`.
#[utoipa::path(post, path = "/box_builder/v1/shops/{shop}/boxes/{box_id}/box_sizes", operation_id = "create_box_size", summary = "Create a box size", tag = "Box builder: box sizes",
    request_body = BoxSizeRequest,
    params(("shop" = String, Path, description = "The shop's identifier"), ("box_id" = i64, Path, description = "The box's id")),
    security(("api_token" = ["write_subscription_groups"]), ("oauth2" = ["write_subscription_groups"])),
    responses((status = 200, body = BoxSizeSaved)))]
pub async fn create_box_size(
    state: web::Data<AppState>,
    request: Write,
    path: TypedPath<BoxPath>,
    given: JsonBody,
) -> Result<HttpResponse, ApiError> {
    let path = path.get()?;
    let box_id = path.box_id;
    let input = parse_box_size(&body(given)?, true)?;
    let (shop, now) = (request.access.shop, state.now());
    let made = state
        .write(move |tx| admin::create_box_size(tx, &shop, box_id, input, now))
        .await?;
    Ok(ok(BoxSizeSaved::of(made)))
}

/// Updates box sizes in bulk.
///
/// Replaces up to 100 sizes of the box at once; more is refused as one `too_many` error on
/// `box_sizes`. Answers with the sizes under `data`, in the order given.
#[utoipa::path(put, path = "/box_builder/v1/shops/{shop}/boxes/{box_id}/box_sizes", operation_id = "update_box_sizes", summary = "Update box sizes in bulk", tag = "Box builder: box sizes",
    request_body = [BoxSizeUpdateFields],
    params(("shop" = String, Path, description = "The shop's identifier"), ("box_id" = i64, Path, description = "The box's id")),
    security(("api_token" = ["write_subscription_groups"]), ("oauth2" = ["write_subscription_groups"])),
    responses((status = 200, body = BoxSizesSaved)))]
pub async fn update_box_sizes(
    state: web::Data<AppState>,
    request: Write,
    path: TypedPath<BoxPath>,
    given: JsonBody,
) -> Result<HttpResponse, ApiError> {
    let path = path.get()?;
    let box_id = path.box_id;
    let inputs = parse_box_sizes(&body(given)?)?;
    let (shop, now) = (request.access.shop, state.now());
    let saved = state
        .write(move |tx| admin::update_box_sizes(tx, &shop, box_id, inputs, now))
        .await?;
    Ok(ok(BoxSizesSaved::of(saved)))
}

/// Gets a box size.
///
/// One box size of the shop.
#[utoipa::path(get, path = "/box_builder/v1/shops/{shop}/box_sizes/{box_size_id}", operation_id = "get_box_size", summary = "Get a box size", tag = "Box builder: box sizes",
    params(("shop" = String, Path, description = "The shop's identifier"), ("box_size_id" = i64, Path, description = "The box size's id")),
    security(("api_token" = ["read_subscription_groups"]), ("oauth2" = ["read_subscription_groups"])),
    responses((status = 200, body = BoxSizeAnswer)))]
pub async fn get_box_size(
    state: web::Data<AppState>,
    request: Read,
    path: TypedPath<BoxSizePath>,
) -> Result<HttpResponse, ApiError> {
    let path = path.get()?;
    let size_id = path.box_size_id;
    let shop = request.access.shop;
    let found = state
        .read(move |tx| admin::get_box_size(tx, &shop, size_id))
        .await?;
    Ok(ok(BoxSizeAnswer::of(found)))
}

/// Updates a box size.
///
/// Answers with the size itself under `data`.
#[utoipa::path(patch, path = "/box_builder/v1/shops/{shop}/box_sizes/{box_size_id}", operation_id = "update_box_size", summary = "Update a box size", tag = "Box builder: box sizes",
    request_body = BoxSizeUpdateRequest,
    params(("shop" = String, Path, description = "The shop's identifier"), ("box_size_id" = i64, Path, description = "The box size's id")),
    security(("api_token" = ["write_subscription_groups"]), ("oauth2" = ["write_subscription_groups"])),
    responses((status = 200, body = BoxSizeSaved)))]
pub async fn update_box_size(
    state: web::Data<AppState>,
    request: Write,
    path: TypedPath<BoxSizePath>,
    given: JsonBody,
) -> Result<HttpResponse, ApiError> {
    let path = path.get()?;
    let size_id = path.box_size_id;
    let input = parse_box_size(&body(given)?, false)?;
    let (shop, now) = (request.access.shop, state.now());
    let changed = state
        .write(move |tx| admin::update_box_size(tx, &shop, size_id, input, now))
        .await?;
    Ok(ok(BoxSizeSaved::of(changed)))
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

/// Lists time slots.
///
/// A page of the box's time slots.
#[utoipa::path(get, path = "/box_builder/v1/shops/{shop}/boxes/{box_id}/time_slots", operation_id = "list_time_slots", summary = "List time slots", tag = "Box builder: time slots",
    params(("shop" = String, Path, description = "The shop's identifier"), ("box_id" = i64, Path, description = "The box's id"), ("limit" = Option<i64>, Query, minimum = 1, maximum = 250, description = "Items per page, 1 to 250 (default 50)"), ("page" = Option<i64>, Query, minimum = 1, maximum = 1000000, description = "The page, from 1 (default 1); a page past the last is empty"), ("order_datetime" = Option<String>, Query, format = DateTime, description = "Only the slots holding this instant (`start_date` to `end_date`), an RFC 3339 date-time")),
    security(("api_token" = ["read_subscription_groups"]), ("oauth2" = ["read_subscription_groups"])),
    responses((status = 200, body = TimeSlotList)))]
pub async fn list_time_slots(
    state: web::Data<AppState>,
    request: Read,
    path: TypedPath<BoxPath>,
    http: HttpRequest,
) -> Result<HttpResponse, ApiError> {
    let path = path.get()?;
    let box_id = path.box_id;
    let (limit, number) = page(&http)?;
    let filter = TimeSlotFilter {
        holding: order_datetime(&http)?,
        visible_at: None,
    };
    let shop = request.access.shop;
    let found = state
        .read(move |tx| admin::list_time_slots(tx, &shop, box_id, filter, limit, number))
        .await?;
    Ok(ok(TimeSlotList::of(found)))
}

/// Creates a time slot.
///
/// Answers with the new slot under `data`, named `time-slot`.
#[utoipa::path(post, path = "/box_builder/v1/shops/{shop}/boxes/{box_id}/time_slots", operation_id = "create_time_slot", summary = "Create a time slot", tag = "Box builder: time slots",
    request_body = TimeSlotRequest,
    params(("shop" = String, Path, description = "The shop's identifier"), ("box_id" = i64, Path, description = "The box's id")),
    security(("api_token" = ["write_subscription_groups"]), ("oauth2" = ["write_subscription_groups"])),
    responses((status = 201, body = TimeSlotCreated)))]
pub async fn create_time_slot(
    state: web::Data<AppState>,
    request: Write,
    path: TypedPath<BoxPath>,
    given: JsonBody,
) -> Result<HttpResponse, ApiError> {
    let path = path.get()?;
    let box_id = path.box_id;
    let input = parse_time_slot(&body(given)?, true)?;
    let (shop, now) = (request.access.shop, state.now());
    let made = state
        .write(move |tx| admin::create_time_slot(tx, &shop, box_id, input, now))
        .await?;
    Ok(created(TimeSlotCreated::of(made)))
}

/// Gets a time slot.
///
/// One time slot of the shop, with the products it offers.
#[utoipa::path(get, path = "/box_builder/v1/shops/{shop}/time_slots/{time_slot_id}", operation_id = "get_time_slot", summary = "Get a time slot", tag = "Box builder: time slots",
    params(("shop" = String, Path, description = "The shop's identifier"), ("time_slot_id" = i64, Path, description = "The time slot's id")),
    security(("api_token" = ["read_subscription_groups"]), ("oauth2" = ["read_subscription_groups"])),
    responses((status = 200, body = TimeSlotAnswer)))]
pub async fn get_time_slot(
    state: web::Data<AppState>,
    request: Read,
    path: TypedPath<TimeSlotPath>,
) -> Result<HttpResponse, ApiError> {
    let path = path.get()?;
    let slot_id = path.time_slot_id;
    let shop = request.access.shop;
    let found = state
        .read(move |tx| admin::get_time_slot(tx, &shop, slot_id))
        .await?;
    Ok(ok(TimeSlotAnswer::of(found)))
}

/// Updates a time slot.
///
/// The fields given replace the slot's; the dates are checked again together.
#[utoipa::path(patch, path = "/box_builder/v1/shops/{shop}/time_slots/{time_slot_id}", operation_id = "update_time_slot", summary = "Update a time slot", tag = "Box builder: time slots",
    request_body = TimeSlotUpdateRequest,
    params(("shop" = String, Path, description = "The shop's identifier"), ("time_slot_id" = i64, Path, description = "The time slot's id")),
    security(("api_token" = ["write_subscription_groups"]), ("oauth2" = ["write_subscription_groups"])),
    responses((status = 200, body = TimeSlotAnswer)))]
pub async fn update_time_slot(
    state: web::Data<AppState>,
    request: Write,
    path: TypedPath<TimeSlotPath>,
    given: JsonBody,
) -> Result<HttpResponse, ApiError> {
    let path = path.get()?;
    let slot_id = path.time_slot_id;
    let input = parse_time_slot(&body(given)?, false)?;
    let (shop, now) = (request.access.shop, state.now());
    let changed = state
        .write(move |tx| admin::update_time_slot(tx, &shop, slot_id, input, now))
        .await?;
    Ok(ok(TimeSlotAnswer::of(changed)))
}

/// Deletes a time slot.
#[utoipa::path(delete, path = "/box_builder/v1/shops/{shop}/time_slots/{time_slot_id}", operation_id = "delete_time_slot", summary = "Delete a time slot", tag = "Box builder: time slots",
    params(("shop" = String, Path, description = "The shop's identifier"), ("time_slot_id" = i64, Path, description = "The time slot's id")),
    security(("api_token" = ["write_subscription_groups"]), ("oauth2" = ["write_subscription_groups"])),
    responses((status = 204, description = "Deleted")))]
pub async fn delete_time_slot(
    state: web::Data<AppState>,
    request: Write,
    path: TypedPath<TimeSlotPath>,
) -> Result<HttpResponse, ApiError> {
    let path = path.get()?;
    let slot_id = path.time_slot_id;
    let shop = request.access.shop;
    state
        .write(move |tx| admin::delete_time_slot(tx, &shop, slot_id))
        .await?;
    Ok(HttpResponse::NoContent().finish())
}

/// Lists a time slot's products.
///
/// The products the slot offers, in the order they were added.
#[utoipa::path(get, path = "/box_builder/v1/shops/{shop}/time_slots/{time_slot_id}/options", operation_id = "list_time_slot_options", summary = "List a time slot's products", tag = "Box builder: time slots",
    params(("shop" = String, Path, description = "The shop's identifier"), ("time_slot_id" = i64, Path, description = "The time slot's id")),
    security(("api_token" = ["read_subscription_groups"]), ("oauth2" = ["read_subscription_groups"])),
    responses((status = 200, body = TimeSlotOptionList)))]
pub async fn list_time_slot_options(
    state: web::Data<AppState>,
    request: Read,
    path: TypedPath<TimeSlotPath>,
) -> Result<HttpResponse, ApiError> {
    let path = path.get()?;
    let slot_id = path.time_slot_id;
    let shop = request.access.shop;
    let options = state
        .read(move |tx| admin::list_time_slot_options(tx, &shop, slot_id))
        .await?;
    Ok(ok(TimeSlotOptionList::of(options)))
}

/// Offers a product in a time slot.
///
/// Offers a box product of the shop in the slot; offering it again changes nothing.
#[utoipa::path(post, path = "/box_builder/v1/shops/{shop}/time_slots/{time_slot_id}/options", operation_id = "create_time_slot_option", summary = "Offer a product in a time slot", tag = "Box builder: time slots",
    request_body = TimeSlotOptionRequest,
    params(("shop" = String, Path, description = "The shop's identifier"), ("time_slot_id" = i64, Path, description = "The time slot's id")),
    security(("api_token" = ["write_subscription_groups"]), ("oauth2" = ["write_subscription_groups"])),
    responses((status = 200, body = TimeSlotOptionAnswer)))]
pub async fn create_time_slot_option(
    state: web::Data<AppState>,
    request: Write,
    path: TypedPath<TimeSlotPath>,
    given: JsonBody,
) -> Result<HttpResponse, ApiError> {
    let path = path.get()?;
    let slot_id = path.time_slot_id;
    let product_id = parse_time_slot_option(&body(given)?)?;
    let (shop, now) = (request.access.shop, state.now());
    let option = state
        .write(move |tx| admin::add_time_slot_option(tx, &shop, slot_id, product_id, now))
        .await?;
    Ok(ok(TimeSlotOptionAnswer::of(option)))
}

/// Stops offering a product in a time slot.
///
/// The slot stops offering the product. A product the slot does not offer is not found.
#[utoipa::path(delete, path = "/box_builder/v1/shops/{shop}/time_slots/{time_slot_id}/options/{box_product_id}", operation_id = "delete_time_slot_option", summary = "Stop offering a product in a time slot", tag = "Box builder: time slots",
    params(("shop" = String, Path, description = "The shop's identifier"), ("time_slot_id" = i64, Path, description = "The time slot's id"), ("box_product_id" = i64, Path, description = "The box product's id")),
    security(("api_token" = ["write_subscription_groups"]), ("oauth2" = ["write_subscription_groups"])),
    responses((status = 204, description = "The slot no longer offers the product")))]
pub async fn delete_time_slot_option(
    state: web::Data<AppState>,
    request: Write,
    path: TypedPath<TimeSlotOptionPath>,
) -> Result<HttpResponse, ApiError> {
    let path = path.get()?;
    let slot_id = path.time_slot_id;
    let product_id = BoxProductId(id(&path.box_product_id, "time_slot_option")?);
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
        Some((_, text)) => Some(text.trim().parse().map(LineItemId).map_err(|_| {
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
    Ok(ok(SelectionList::of(found)))
}

/// Create Selection: 200 `{"data": {"selection"}}`; the same line item and
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
    Ok(ok(SelectionAnswer::of(made)))
}

pub(super) async fn selection_of(
    state: web::Data<AppState>,
    shop: Shop,
    customer: String,
    selection_id: SelectionId,
) -> Result<HttpResponse, ApiError> {
    let found = state
        .read(move |tx| selections::get_selection(tx, &shop, &customer, selection_id))
        .await?;
    Ok(ok(SelectionAnswer::of(found)))
}

pub(super) async fn change_selection(
    state: web::Data<AppState>,
    shop: Shop,
    customer: String,
    selection_id: SelectionId,
    given: JsonBody,
) -> Result<HttpResponse, ApiError> {
    let input = parse_selection(&body(given)?, false)?;
    let now = state.now();
    let changed = state
        .write(move |tx| {
            selections::update_selection(tx, &shop, &customer, selection_id, input, now)
        })
        .await?;
    state.webhooks.notify();
    Ok(ok(SelectionAnswer::of(changed)))
}

/// Lists a customer's selections.
///
/// A page of the customer's selections, ordered by id.
#[utoipa::path(get, path = "/box_builder/v1/shops/{shop}/customers/{platform_customer_id}/selections", operation_id = "list_selections", summary = "List a customer's selections", tag = "Box builder: selections",
    params(("shop" = String, Path, description = "The shop's identifier"), ("platform_customer_id" = String, Path, description = "The customer's id on the shop's platform"), ("limit" = Option<i64>, Query, minimum = 1, maximum = 250, description = "Items per page, 1 to 250 (default 50)"), ("page" = Option<i64>, Query, minimum = 1, maximum = 1000000, description = "The page, from 1 (default 1); a page past the last is empty"), ("svc_platform_subscription_line_item_id" = Option<i64>, Query, description = "Only the selections of this box subscription line item"), ("order_datetime" = Option<String>, Query, format = DateTime, description = "Only the selections for the order of this time, an RFC 3339 date-time")),
    security(("api_token" = ["read_subscriptions"]), ("oauth2" = ["read_subscriptions"])),
    responses((status = 200, body = SelectionList)))]
pub async fn list_selections(
    state: web::Data<AppState>,
    request: ReadSubscriptions,
    path: TypedPath<CustomerPath>,
    http: HttpRequest,
) -> Result<HttpResponse, ApiError> {
    let path = path.get()?;
    let customer = path.platform_customer_id;
    selections_of(state, request.access.shop, customer, http).await
}

/// Creates a selection.
///
/// Makes a selection for the customer, checked by the box's rules. The same line item and order
/// date again replaces the selection made before.
#[utoipa::path(post, path = "/box_builder/v1/shops/{shop}/customers/{platform_customer_id}/selections", operation_id = "create_selection", summary = "Create a selection", tag = "Box builder: selections",
    request_body = SelectionRequest,
    params(("shop" = String, Path, description = "The shop's identifier"), ("platform_customer_id" = String, Path, description = "The customer's id on the shop's platform")),
    security(("api_token" = ["write_subscriptions"]), ("oauth2" = ["write_subscriptions"])),
    responses((status = 200, body = SelectionAnswer)))]
pub async fn create_selection(
    state: web::Data<AppState>,
    request: WriteSubscriptions,
    path: TypedPath<CustomerPath>,
    given: JsonBody,
) -> Result<HttpResponse, ApiError> {
    let path = path.get()?;
    let customer = path.platform_customer_id;
    make_selection(state, request.access.shop, customer, given).await
}

/// Gets a selection.
///
/// One selection of the customer.
#[utoipa::path(get, path = "/box_builder/v1/shops/{shop}/customers/{platform_customer_id}/selections/{selection_id}", operation_id = "get_selection", summary = "Get a selection", tag = "Box builder: selections",
    params(("shop" = String, Path, description = "The shop's identifier"), ("platform_customer_id" = String, Path, description = "The customer's id on the shop's platform"), ("selection_id" = i64, Path, description = "The selection's id")),
    security(("api_token" = ["read_subscriptions"]), ("oauth2" = ["read_subscriptions"])),
    responses((status = 200, body = SelectionAnswer)))]
pub async fn get_selection(
    state: web::Data<AppState>,
    request: ReadSubscriptions,
    path: TypedPath<SelectionPath>,
) -> Result<HttpResponse, ApiError> {
    let path = path.get()?;
    let SelectionPath {
        platform_customer_id,
        selection_id,
    } = path;
    selection_of(
        state,
        request.access.shop,
        platform_customer_id,
        selection_id,
    )
    .await
}

/// Updates a selection.
///
/// The fields given replace the selection's; the whole selection is checked again, the deadline
/// too.
#[utoipa::path(patch, path = "/box_builder/v1/shops/{shop}/customers/{platform_customer_id}/selections/{selection_id}", operation_id = "update_selection", summary = "Update a selection", tag = "Box builder: selections",
    request_body = SelectionUpdateRequest,
    params(("shop" = String, Path, description = "The shop's identifier"), ("platform_customer_id" = String, Path, description = "The customer's id on the shop's platform"), ("selection_id" = i64, Path, description = "The selection's id")),
    security(("api_token" = ["write_subscriptions"]), ("oauth2" = ["write_subscriptions"])),
    responses((status = 200, body = SelectionAnswer)))]
pub async fn update_selection(
    state: web::Data<AppState>,
    request: WriteSubscriptions,
    path: TypedPath<SelectionPath>,
    given: JsonBody,
) -> Result<HttpResponse, ApiError> {
    let path = path.get()?;
    let SelectionPath {
        platform_customer_id,
        selection_id,
    } = path;
    change_selection(
        state,
        request.access.shop,
        platform_customer_id,
        selection_id,
        given,
    )
    .await
}

/// Deletes a selection.
///
/// That order of the box gets the merchant's pick instead.
#[utoipa::path(delete, path = "/box_builder/v1/shops/{shop}/customers/{platform_customer_id}/selections/{selection_id}", operation_id = "delete_selection", summary = "Delete a selection", tag = "Box builder: selections",
    params(("shop" = String, Path, description = "The shop's identifier"), ("platform_customer_id" = String, Path, description = "The customer's id on the shop's platform"), ("selection_id" = i64, Path, description = "The selection's id")),
    security(("api_token" = ["write_subscriptions"]), ("oauth2" = ["write_subscriptions"])),
    responses((status = 204, description = "Deleted")))]
pub async fn delete_selection(
    state: web::Data<AppState>,
    request: WriteSubscriptions,
    path: TypedPath<SelectionPath>,
) -> Result<HttpResponse, ApiError> {
    let path = path.get()?;
    let SelectionPath {
        platform_customer_id: customer,
        selection_id,
    } = path;
    let shop = request.access.shop;
    state
        .write(move |tx| selections::delete_selection(tx, &shop, &customer, selection_id))
        .await?;
    Ok(HttpResponse::NoContent().finish())
}

/// Lists box line items.
///
/// A page of the subscription line items sold under a box's group.
#[utoipa::path(get, path = "/box_builder/v1/shops/{shop}/subscription_line_items", operation_id = "list_box_line_items", summary = "List box line items", tag = "Box builder: subscription line items",
    params(("shop" = String, Path, description = "The shop's identifier"), ("limit" = Option<i64>, Query, minimum = 1, maximum = 250, description = "Items per page, 1 to 250 (default 50)"), ("page" = Option<i64>, Query, minimum = 1, maximum = 1000000, description = "The page, from 1 (default 1); a page past the last is empty")),
    security(("api_token" = ["read_subscriptions"]), ("oauth2" = ["read_subscriptions"])),
    responses((status = 200, body = BoxLineItemList)))]
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
    Ok(ok(BoxLineItemList::of(found)))
}

/// Gets a box line item.
///
/// One subscription line item sold under a box's group; any other line item is not found.
#[utoipa::path(get, path = "/box_builder/v1/shops/{shop}/subscription_line_items/{line_item_id}", operation_id = "get_box_line_item", summary = "Get a box line item", tag = "Box builder: subscription line items",
    params(("shop" = String, Path, description = "The shop's identifier"), ("line_item_id" = i64, Path, description = "The subscription line item's id")),
    security(("api_token" = ["read_subscriptions"]), ("oauth2" = ["read_subscriptions"])),
    responses((status = 200, body = BoxLineItemAnswer)))]
pub async fn get_box_line_item(
    state: web::Data<AppState>,
    request: ReadSubscriptions,
    path: TypedPath<LineItemPath>,
) -> Result<HttpResponse, ApiError> {
    let path = path.get()?;
    let line_item_id = LineItemId(id(&path.line_item_id, "subscription_line_item")?);
    let shop = request.access.shop;
    let found = state
        .read(move |tx| selections::get_box_line_item(tx, &shop, line_item_id))
        .await?;
    Ok(ok(BoxLineItemAnswer::of(found)))
}

#[cfg(test)]
mod tests {
    use actix_web::{App, HttpResponse, test, web};

    use super::*;

    /// Each route's path reads its ids as numbers; a segment that is not one answers 404
    /// naming the resource the route looked for, as the hand parse of the path did.
    #[actix_web::test]
    async fn a_path_id_that_is_not_a_number_is_its_resources_404() {
        let app = test::init_service(
            App::new()
                .route(
                    "/shops/{shop}/boxes/{box_id}",
                    web::get().to(|path: TypedPath<BoxPath>| async move {
                        let path = path.get()?;
                        Ok::<_, ApiError>(
                            HttpResponse::Ok().body(format!("{} {}", path.shop, path.box_id)),
                        )
                    }),
                )
                .route(
                    "/shops/{shop}/time_slots/{time_slot_id}/options/{box_product_id}",
                    web::get().to(|path: TypedPath<TimeSlotOptionPath>| async move {
                        let path = path.get()?;
                        let product = id(&path.box_product_id, "time_slot_option")?;
                        Ok::<_, ApiError>(
                            HttpResponse::Ok().body(format!("{} {product}", path.time_slot_id)),
                        )
                    }),
                )
                .route(
                    "/shops/{shop}/customers/{platform_customer_id}/selections/{selection_id}",
                    web::get().to(|path: TypedPath<SelectionPath>| async move {
                        let path = path.get()?;
                        Ok::<_, ApiError>(HttpResponse::Ok().body(format!(
                            "{} {}",
                            path.platform_customer_id, path.selection_id
                        )))
                    }),
                ),
        )
        .await;
        let answer = |uri: &'static str| {
            let app = &app;
            async move {
                let answer =
                    test::call_service(app, test::TestRequest::get().uri(uri).to_request()).await;
                let status = answer.status().as_u16();
                let body = test::read_body(answer).await;
                let text = String::from_utf8_lossy(&body).into_owned();
                match serde_json::from_str::<Value>(&text) {
                    Ok(error) => (status, error["errors"][0]["sub_type"].to_string()),
                    Err(_) => (status, text),
                }
            }
        };
        assert_eq!(answer("/shops/s/boxes/7").await, (200, "s 7".into()));
        assert_eq!(
            answer("/shops/s/boxes/seven").await,
            (404, "\"box\"".into())
        );
        assert_eq!(
            answer("/shops/s/time_slots/3/options/4").await,
            (200, "3 4".into())
        );
        assert_eq!(
            answer("/shops/s/time_slots/x/options/4").await,
            (404, "\"time_slot\"".into())
        );
        assert_eq!(
            answer("/shops/s/time_slots/3/options/x").await,
            (404, "\"time_slot_option\"".into())
        );
        assert_eq!(
            answer("/shops/s/customers/c-1/selections/9").await,
            (200, "c-1 9".into())
        );
        assert_eq!(
            answer("/shops/s/customers/c-1/selections/1.5").await,
            (404, "\"selection\"".into())
        );
    }
}
