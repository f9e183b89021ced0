//! The customer's own handlers, under
//! `/box_builder/v1/customer/shops/{shop}/customers/{platform_customer_id}` with the `token`
//! their platform issued them ([`CustomerAuthorized`]): their selections, and no one else's.

use actix_web::{HttpRequest, HttpResponse, web};

use super::handlers::{change_selection, make_selection, selection_of, selections_of};
use crate::http::error::ApiError;
use crate::http::extract::{CustomerAuthorized, JsonBody};
use crate::http::state::AppState;

pub async fn list_selections(
    state: web::Data<AppState>,
    customer: CustomerAuthorized,
    http: HttpRequest,
) -> Result<HttpResponse, ApiError> {
    selections_of(state, customer.shop, customer.platform_customer_id, http).await
}

pub async fn create_selection(
    state: web::Data<AppState>,
    customer: CustomerAuthorized,
    given: JsonBody,
) -> Result<HttpResponse, ApiError> {
    make_selection(state, customer.shop, customer.platform_customer_id, given).await
}

pub async fn get_selection(
    state: web::Data<AppState>,
    customer: CustomerAuthorized,
    path: web::Path<(String, String, String)>,
) -> Result<HttpResponse, ApiError> {
    let selection = path.into_inner().2;
    selection_of(
        state,
        customer.shop,
        customer.platform_customer_id,
        &selection,
    )
    .await
}

pub async fn update_selection(
    state: web::Data<AppState>,
    customer: CustomerAuthorized,
    path: web::Path<(String, String, String)>,
    given: JsonBody,
) -> Result<HttpResponse, ApiError> {
    let selection = path.into_inner().2;
    change_selection(
        state,
        customer.shop,
        customer.platform_customer_id,
        &selection,
        given,
    )
    .await
}
