//! The customer's own handlers, under
//! `/box_builder/v1/customer/shops/{shop}/customers/{platform_customer_id}` with the `token`
//! their platform issued them ([`CustomerAuthorized`]): their selections, and no one else's.

use actix_web::{HttpRequest, HttpResponse, web};
use mercer_domain::box_builder::input::{SelectionRequest, SelectionUpdateRequest};

use super::answers::{SelectionAnswer, SelectionList};
use super::handlers::{
    SelectionPath, change_selection, make_selection, selection_of, selections_of,
};
use crate::http::error::ApiError;
use crate::http::extract::{CustomerAuthorized, JsonBody, TypedPath};
use crate::http::state::AppState;

/// Lists the customer's selections.
///
/// A page of the customer's own selections, ordered by id.
#[utoipa::path(get, path = "/box_builder/v1/customer/shops/{shop}/customers/{platform_customer_id}/selections", operation_id = "list_customer_selections", summary = "List the customer's selections", tag = "Box builder: customer selections",
    params(("shop" = String, Path, description = "The shop's identifier"), ("platform_customer_id" = String, Path, description = "The customer's id on the shop's platform: the customer the token was issued to"), ("limit" = Option<i64>, Query, minimum = 1, maximum = 250, description = "Items per page, 1 to 250 (default 50)"), ("page" = Option<i64>, Query, minimum = 1, maximum = 1000000, description = "The page, from 1 (default 1); a page past the last is empty"), ("svc_platform_subscription_line_item_id" = Option<i64>, Query, description = "Only the selections of this box subscription line item"), ("order_datetime" = Option<String>, Query, format = DateTime, description = "Only the selections for the order of this time, an RFC 3339 date-time")),
    security(("customer_token" = [])),
    responses((status = 200, body = SelectionList)))]
pub async fn list_selections(
    state: web::Data<AppState>,
    customer: CustomerAuthorized,
    http: HttpRequest,
) -> Result<HttpResponse, ApiError> {
    selections_of(state, customer.shop, customer.platform_customer_id, http).await
}

/// Creates a customer selection.
///
/// The customer makes a selection, checked by the box's rules. The same line item and order date
/// again replaces the selection made before.
#[utoipa::path(post, path = "/box_builder/v1/customer/shops/{shop}/customers/{platform_customer_id}/selections", operation_id = "create_customer_selection", summary = "Create a customer selection", tag = "Box builder: customer selections",
    request_body = SelectionRequest,
    params(("shop" = String, Path, description = "The shop's identifier"), ("platform_customer_id" = String, Path, description = "The customer's id on the shop's platform: the customer the token was issued to")),
    security(("customer_token" = [])),
    responses((status = 200, body = SelectionAnswer)))]
pub async fn create_selection(
    state: web::Data<AppState>,
    customer: CustomerAuthorized,
    given: JsonBody,
) -> Result<HttpResponse, ApiError> {
    make_selection(state, customer.shop, customer.platform_customer_id, given).await
}

/// Gets a customer selection.
///
/// One of the customer's own selections.
#[utoipa::path(get, path = "/box_builder/v1/customer/shops/{shop}/customers/{platform_customer_id}/selections/{selection_id}", operation_id = "get_customer_selection", summary = "Get a customer selection", tag = "Box builder: customer selections",
    params(("shop" = String, Path, description = "The shop's identifier"), ("platform_customer_id" = String, Path, description = "The customer's id on the shop's platform: the customer the token was issued to"), ("selection_id" = i64, Path, description = "The selection's id")),
    security(("customer_token" = [])),
    responses((status = 200, body = SelectionAnswer)))]
pub async fn get_selection(
    state: web::Data<AppState>,
    customer: CustomerAuthorized,
    path: TypedPath<SelectionPath>,
) -> Result<HttpResponse, ApiError> {
    let path = path.get()?;
    selection_of(
        state,
        customer.shop,
        customer.platform_customer_id,
        path.selection_id,
    )
    .await
}

/// Updates a customer selection.
///
/// The customer changes a selection of theirs; the whole selection is checked again, the deadline
/// included.
#[utoipa::path(patch, path = "/box_builder/v1/customer/shops/{shop}/customers/{platform_customer_id}/selections/{selection_id}", operation_id = "update_customer_selection", summary = "Update a customer selection", tag = "Box builder: customer selections",
    request_body = SelectionUpdateRequest,
    params(("shop" = String, Path, description = "The shop's identifier"), ("platform_customer_id" = String, Path, description = "The customer's id on the shop's platform: the customer the token was issued to"), ("selection_id" = i64, Path, description = "The selection's id")),
    security(("customer_token" = [])),
    responses((status = 200, body = SelectionAnswer)))]
pub async fn update_selection(
    state: web::Data<AppState>,
    customer: CustomerAuthorized,
    path: TypedPath<SelectionPath>,
    given: JsonBody,
) -> Result<HttpResponse, ApiError> {
    let path = path.get()?;
    change_selection(
        state,
        customer.shop,
        customer.platform_customer_id,
        path.selection_id,
        given,
    )
    .await
}
