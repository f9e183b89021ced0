//! The storefront's handlers (no credentials): the shop's public catalogue of boxes, answered
//! with a `Cache-Control` that lets browsers and CDNs keep it a minute.

use actix_web::http::header;
use actix_web::{HttpRequest, HttpResponse, web};
use mercer_domain::box_builder::storefront;
use serde_json::json;

use super::handlers::{data, id, listed, order_datetime, page};
use crate::http::error::ApiError;
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
    Ok(public(listed("boxes", found)))
}

pub async fn get_box(
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let (shop, box_id) = path.into_inner();
    let box_id = id(&box_id, "box")?;
    let found = state
        .read(move |tx| storefront::storefront_box(tx, &shop, box_id))
        .await?;
    Ok(public(data(json!({ "box": found }))))
}

pub async fn list_time_slots(
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
    http: HttpRequest,
) -> Result<HttpResponse, ApiError> {
    let (shop, box_id) = path.into_inner();
    let box_id = id(&box_id, "box")?;
    let (limit, number) = page(&http)?;
    let (holding, now) = (order_datetime(&http)?, state.now());
    let found = state
        .read(move |tx| {
            storefront::storefront_time_slots(tx, &shop, box_id, holding, now, limit, number)
        })
        .await?;
    Ok(public(listed("time_slots", found)))
}

pub async fn list_box_sizes(
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
    http: HttpRequest,
) -> Result<HttpResponse, ApiError> {
    let (shop, box_id) = path.into_inner();
    let box_id = id(&box_id, "box")?;
    let (limit, number) = page(&http)?;
    let found = state
        .read(move |tx| storefront::storefront_box_sizes(tx, &shop, box_id, limit, number))
        .await?;
    Ok(public(listed("box_sizes", found)))
}
