//! Subscription groups (contract §5.1) under `/subscriptions/v1/shops/{shop}/subscription_groups`:
//! reads `read_subscription_groups`, writes `write_subscription_groups`.

use actix_web::{HttpRequest, HttpResponse, web};
use mercer_domain::subscriptions::customers::parse_page;
use mercer_domain::subscriptions::groups::{
    SubscriptionGroup, create_group, delete_group, get_group, list_groups, parse_group,
    update_group,
};
use serde_json::json;

use super::customers::{json_value, path_id};
use crate::http::error::ApiError;
use crate::http::extract::{Authorized, JsonBody, query_pairs, scopes};
use crate::http::state::AppState;

fn group_answer(group: &SubscriptionGroup) -> serde_json::Value {
    json!({ "subscription_group": group })
}

/// `GET …/subscription_groups?limit=&page=` → `{"subscription_groups", "pagination"}`.
pub async fn list(
    state: web::Data<AppState>,
    request: Authorized<scopes::ReadSubscriptionGroups>,
    http: HttpRequest,
) -> Result<HttpResponse, ApiError> {
    let (limit, page) = parse_page(&query_pairs(&http)?)?;
    let shop = request.access.shop;
    let (groups, pagination) = state
        .read(move |tx| list_groups(tx, &shop, limit, page))
        .await?;
    Ok(HttpResponse::Ok().json(json!({ "subscription_groups": groups, "pagination": pagination })))
}

/// `POST …/subscription_groups` `{"subscription_group"}` → 201 `{"subscription_group"}`.
pub async fn create(
    state: web::Data<AppState>,
    request: Authorized<scopes::WriteSubscriptionGroups>,
    body: JsonBody,
) -> Result<HttpResponse, ApiError> {
    let input = parse_group(&json_value(body)?, true)?;
    let (shop, now) = (request.access.shop, state.now());
    let group = state
        .write(move |tx| create_group(tx, &shop, input, now))
        .await?;
    Ok(HttpResponse::Created().json(group_answer(&group)))
}

/// `GET …/subscription_groups/{id}` → `{"subscription_group"}`.
pub async fn get(
    state: web::Data<AppState>,
    request: Authorized<scopes::ReadSubscriptionGroups>,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let id = path_id(&path.1, "subscription_group")?;
    let shop = request.access.shop;
    let group = state.read(move |tx| get_group(tx, &shop, id)).await?;
    Ok(HttpResponse::Ok().json(group_answer(&group)))
}

/// `PUT` or `PATCH …/subscription_groups/{id}`: the fields given replace the stored ones.
pub async fn update(
    state: web::Data<AppState>,
    request: Authorized<scopes::WriteSubscriptionGroups>,
    path: web::Path<(String, String)>,
    body: JsonBody,
) -> Result<HttpResponse, ApiError> {
    let id = path_id(&path.1, "subscription_group")?;
    let input = parse_group(&json_value(body)?, false)?;
    let (shop, now) = (request.access.shop, state.now());
    let group = state
        .write(move |tx| update_group(tx, &shop, id, input, now))
        .await?;
    Ok(HttpResponse::Ok().json(group_answer(&group)))
}

/// `DELETE …/subscription_groups/{id}` → 204; 409 while a live subscription uses it.
pub async fn delete(
    state: web::Data<AppState>,
    request: Authorized<scopes::WriteSubscriptionGroups>,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let id = path_id(&path.1, "subscription_group")?;
    let shop = request.access.shop;
    state.write(move |tx| delete_group(tx, &shop, id)).await?;
    Ok(HttpResponse::NoContent().finish())
}
