//! Subscription groups under `/subscriptions/v1/shops/{shop}/subscription_groups`:
//! reads `read_subscription_groups`, writes `write_subscription_groups`.

use actix_web::{HttpRequest, HttpResponse, web};
use mercer_domain::kernel::ids::GroupId;
use mercer_domain::subscriptions::customers::{PagePagination, parse_page};
use mercer_domain::subscriptions::groups::{
    GroupRequest, GroupUpdateRequest, SubscriptionGroup, create_group, delete_group, get_group,
    list_groups, parse_group, update_group,
};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::customers::json_value;
use crate::http::error::ApiError;
use crate::http::extract::{Authorized, JsonBody, TypedPath, query_pairs, scopes};
use crate::http::state::AppState;

/// `…/subscription_groups/{id}`. An id that is not a number is the group's 404, answered
/// after the credentials are checked.
#[derive(Deserialize)]
pub struct GroupPath {
    id: GroupId,
}

/// `{"subscription_group": {…}}`.
#[derive(Serialize, ToSchema)]
pub struct GroupAnswer {
    subscription_group: SubscriptionGroup,
}

fn group_answer(subscription_group: SubscriptionGroup) -> GroupAnswer {
    GroupAnswer { subscription_group }
}

/// A page of the shop's subscription groups.
#[derive(Serialize, ToSchema)]
pub struct GroupList {
    subscription_groups: Vec<SubscriptionGroup>,
    pagination: PagePagination,
}

/// Lists subscription groups.
///
/// The shop's subscription groups, a page at a time.
#[utoipa::path(get, path = "/subscriptions/v1/shops/{shop}/subscription_groups", operation_id = "list_subscription_groups", summary = "List subscription groups", tag = "Subscription groups",
    params(("shop" = String, Path, description = "The shop's identifier"), ("limit" = Option<i64>, Query, minimum = 1, maximum = 250, description = "Groups per page (default 50)"), ("page" = Option<i64>, Query, minimum = 1, description = "The page, from 1")),
    security(("api_token" = ["read_subscription_groups"]), ("oauth2" = ["read_subscription_groups"])),
    responses((status = 200, body = GroupList)))]
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
    Ok(HttpResponse::Ok().json(GroupList {
        subscription_groups: groups,
        pagination,
    }))
}

/// Creates a subscription group.
#[utoipa::path(post, path = "/subscriptions/v1/shops/{shop}/subscription_groups", operation_id = "create_subscription_group", summary = "Create a subscription group", tag = "Subscription groups",
    request_body = GroupRequest,
    params(("shop" = String, Path, description = "The shop's identifier")),
    security(("api_token" = ["write_subscription_groups"]), ("oauth2" = ["write_subscription_groups"])),
    responses((status = 201, body = GroupAnswer)))]
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
    Ok(HttpResponse::Created().json(group_answer(group)))
}

/// Gets a subscription group.
#[utoipa::path(get, path = "/subscriptions/v1/shops/{shop}/subscription_groups/{id}", operation_id = "get_subscription_group", summary = "Get a subscription group", tag = "Subscription groups",
    params(("shop" = String, Path, description = "The shop's identifier"), ("id" = i64, Path, description = "The group's id")),
    security(("api_token" = ["read_subscription_groups"]), ("oauth2" = ["read_subscription_groups"])),
    responses((status = 200, body = GroupAnswer)))]
pub async fn get(
    state: web::Data<AppState>,
    request: Authorized<scopes::ReadSubscriptionGroups>,
    path: TypedPath<GroupPath>,
) -> Result<HttpResponse, ApiError> {
    let id = path.get()?.id;
    let shop = request.access.shop;
    let group = state.read(move |tx| get_group(tx, &shop, id)).await?;
    Ok(HttpResponse::Ok().json(group_answer(group)))
}

/// Updates a subscription group.
///
/// PUT and PATCH alike: the fields given replace the stored ones.
#[utoipa::path(method(put, patch), path = "/subscriptions/v1/shops/{shop}/subscription_groups/{id}", operation_id = "update_subscription_group", summary = "Update a subscription group", tag = "Subscription groups",
    request_body = GroupUpdateRequest,
    params(("shop" = String, Path, description = "The shop's identifier"), ("id" = i64, Path, description = "The group's id")),
    security(("api_token" = ["write_subscription_groups"]), ("oauth2" = ["write_subscription_groups"])),
    responses((status = 200, body = GroupAnswer)))]
pub async fn update(
    state: web::Data<AppState>,
    request: Authorized<scopes::WriteSubscriptionGroups>,
    path: TypedPath<GroupPath>,
    body: JsonBody,
) -> Result<HttpResponse, ApiError> {
    let id = path.get()?.id;
    let input = parse_group(&json_value(body)?, false)?;
    let (shop, now) = (request.access.shop, state.now());
    let group = state
        .write(move |tx| update_group(tx, &shop, id, input, now))
        .await?;
    Ok(HttpResponse::Ok().json(group_answer(group)))
}

/// Deletes a subscription group.
///
/// A group that a live subscription still uses cannot be deleted: that is a conflict.
#[utoipa::path(delete, path = "/subscriptions/v1/shops/{shop}/subscription_groups/{id}", operation_id = "delete_subscription_group", summary = "Delete a subscription group", tag = "Subscription groups",
    params(("shop" = String, Path, description = "The shop's identifier"), ("id" = i64, Path, description = "The group's id")),
    security(("api_token" = ["write_subscription_groups"]), ("oauth2" = ["write_subscription_groups"])),
    responses((status = 204, description = "Deleted")))]
pub async fn delete(
    state: web::Data<AppState>,
    request: Authorized<scopes::WriteSubscriptionGroups>,
    path: TypedPath<GroupPath>,
) -> Result<HttpResponse, ApiError> {
    let id = path.get()?.id;
    let shop = request.access.shop;
    state.write(move |tx| delete_group(tx, &shop, id)).await?;
    Ok(HttpResponse::NoContent().finish())
}
