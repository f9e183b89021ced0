//! The storefront's handlers (no credentials): the shop's public catalogue of boxes, answered
//! with a `Cache-Control` that lets browsers and CDNs keep it a minute.

use actix_web::http::header;
use actix_web::{HttpRequest, HttpResponse, web};
use mercer_domain::box_builder::storefront;

use super::answers::{BoxAnswer, BoxList, BoxSizeList, TimeSlotList, ok};
use super::handlers::{BoxPath, order_datetime, page};
use crate::http::error::ApiError;
use crate::http::extract::TypedPath;
use crate::http::state::AppState;

/// How long a shopper's browser or a CDN may keep a storefront answer: a slot made visible, or
/// a box changed, shows within this time.
const PUBLIC_CACHE: &str = "public, max-age=60";

fn public(mut answer: HttpResponse) -> HttpResponse {
    answer.headers_mut().insert(
        header::CACHE_CONTROL,
        header::HeaderValue::from_static(PUBLIC_CACHE),
    );
    answer
}

/// Lists boxes for shoppers.
///
/// A page of the shop's boxes, for shoppers; needs no credentials.
#[utoipa::path(get, path = "/box_builder/v1/storefront/shops/{shop}/boxes", operation_id = "list_storefront_boxes", summary = "List boxes for shoppers", tag = "Box builder: storefront",
    params(("shop" = String, Path, description = "The shop's identifier"), ("limit" = Option<i64>, Query, minimum = 1, maximum = 250, description = "Items per page, 1 to 250 (default 50)"), ("page" = Option<i64>, Query, minimum = 1, maximum = 1000000, description = "The page, from 1 (default 1); a page past the last is empty")),
    responses((status = 200, body = BoxList, headers(("Cache-Control" = String, description = "`public, max-age=60`")))))]
pub async fn list_boxes(
    state: web::Data<AppState>,
    path: web::Path<String>,
    http: HttpRequest,
) -> Result<HttpResponse, ApiError> {
    let shop = path.into_inner();
    let (limit, number) = page(&http)?;
    let found = state
        .read(move |tx| storefront::storefront_boxes(tx, &shop, limit, number))
        .await?;
    Ok(public(ok(BoxList::of(found))))
}

/// Gets a box for shoppers.
///
/// One box of the shop, for shoppers.
#[utoipa::path(get, path = "/box_builder/v1/storefront/shops/{shop}/boxes/{box_id}", operation_id = "get_storefront_box", summary = "Get a box for shoppers", tag = "Box builder: storefront",
    params(("shop" = String, Path, description = "The shop's identifier"), ("box_id" = i64, Path, description = "The box's id")),
    responses((status = 200, body = BoxAnswer, headers(("Cache-Control" = String, description = "`public, max-age=60`")))))]
pub async fn get_box(
    state: web::Data<AppState>,
    path: TypedPath<BoxPath>,
) -> Result<HttpResponse, ApiError> {
    let path = path.get()?;
    let BoxPath { shop, box_id } = path;
    let found = state
        .read(move |tx| storefront::storefront_box(tx, &shop, box_id))
        .await?;
    Ok(public(ok(BoxAnswer::of(found))))
}

/// Lists time slots for shoppers.
///
/// A page of the box's time slots whose `visibility_date` has come, for shoppers.
#[utoipa::path(get, path = "/box_builder/v1/storefront/shops/{shop}/boxes/{box_id}/time_slots", operation_id = "list_storefront_time_slots", summary = "List time slots for shoppers", tag = "Box builder: storefront",
    params(("shop" = String, Path, description = "The shop's identifier"), ("box_id" = i64, Path, description = "The box's id"), ("limit" = Option<i64>, Query, minimum = 1, maximum = 250, description = "Items per page, 1 to 250 (default 50)"), ("page" = Option<i64>, Query, minimum = 1, maximum = 1000000, description = "The page, from 1 (default 1); a page past the last is empty"), ("order_datetime" = Option<String>, Query, format = DateTime, description = "Only the slots holding this instant (`start_date` to `end_date`), an RFC 3339 date-time")),
    responses((status = 200, body = TimeSlotList, headers(("Cache-Control" = String, description = "`public, max-age=60`")))))]
pub async fn list_time_slots(
    state: web::Data<AppState>,
    path: TypedPath<BoxPath>,
    http: HttpRequest,
) -> Result<HttpResponse, ApiError> {
    let path = path.get()?;
    let BoxPath { shop, box_id } = path;
    let (limit, number) = page(&http)?;
    let (holding, now) = (order_datetime(&http)?, state.now());
    let found = state
        .read(move |tx| {
            storefront::storefront_time_slots(tx, &shop, box_id, holding, now, limit, number)
        })
        .await?;
    Ok(public(ok(TimeSlotList::of(found))))
}

/// Lists box sizes for shoppers.
///
/// A page of the box's sizes, for shoppers.
#[utoipa::path(get, path = "/box_builder/v1/storefront/shops/{shop}/boxes/{box_id}/box_sizes", operation_id = "list_storefront_box_sizes", summary = "List box sizes for shoppers", tag = "Box builder: storefront",
    params(("shop" = String, Path, description = "The shop's identifier"), ("box_id" = i64, Path, description = "The box's id"), ("limit" = Option<i64>, Query, minimum = 1, maximum = 250, description = "Items per page, 1 to 250 (default 50)"), ("page" = Option<i64>, Query, minimum = 1, maximum = 1000000, description = "The page, from 1 (default 1); a page past the last is empty")),
    responses((status = 200, body = BoxSizeList, headers(("Cache-Control" = String, description = "`public, max-age=60`")))))]
pub async fn list_box_sizes(
    state: web::Data<AppState>,
    path: TypedPath<BoxPath>,
    http: HttpRequest,
) -> Result<HttpResponse, ApiError> {
    let path = path.get()?;
    let BoxPath { shop, box_id } = path;
    let (limit, number) = page(&http)?;
    let found = state
        .read(move |tx| storefront::storefront_box_sizes(tx, &shop, box_id, limit, number))
        .await?;
    Ok(public(ok(BoxSizeList::of(found))))
}
