//! Get Shop Information (seed 002 §4.1, contract §5).

use actix_web::HttpResponse;
use mercer_domain::access::shop::ShopResource;
use serde_json::json;

use crate::http::error::ApiError;
use crate::http::extract::{Authorized, scopes};

/// `GET /subscriptions/v1/shops/{shop}/shop` → `{"shop": Shop}`.
pub async fn get_shop_information(
    request: Authorized<scopes::ReadSubscriptions>,
) -> Result<HttpResponse, ApiError> {
    let shop = &request.access.shop;
    Ok(HttpResponse::Ok().json(json!({ "shop": ShopResource::from(shop) })))
}
