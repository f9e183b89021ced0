//! Get Shop Information.

use actix_web::HttpResponse;
use mercer_domain::access::shop::ShopResource;
use serde::Serialize;
use utoipa::ToSchema;

use crate::http::error::ApiError;
use crate::http::extract::{Authorized, scopes};

/// `{"shop": {…}}`.
#[derive(Serialize, ToSchema)]
pub struct ShopAnswer<'a> {
    shop: ShopResource<'a>,
}

/// Gets the shop.
///
/// The shop's information as the subscriptions API shows it.
#[utoipa::path(get, path = "/subscriptions/v1/shops/{shop}/shop", operation_id = "get_shop_information", summary = "Get the shop", tag = "Shop",
    params(("shop" = String, Path, description = "The shop's identifier")),
    security(("api_token" = ["read_subscriptions"]), ("oauth2" = ["read_subscriptions"])),
    responses((status = 200, body = ShopAnswer<'_>)))]
pub async fn get_shop_information(
    request: Authorized<scopes::ReadSubscriptions>,
) -> Result<HttpResponse, ApiError> {
    let shop = &request.access.shop;
    Ok(HttpResponse::Ok().json(ShopAnswer {
        shop: ShopResource::from(shop),
    }))
}
