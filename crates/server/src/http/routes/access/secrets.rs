//! Shop settings that hold shared secrets (contract §2, §3.3, §4.2): write-only, shown once.

use actix_web::{HttpResponse, web};
use mercer_domain::access::secrets::{
    SecretKind, check_client_secret, configure_secret, rotate_secret,
};
use serde::Deserialize;
use serde_json::json;

use crate::http::error::ApiError;
use crate::http::extract::{Authorized, JsonBody, scopes};
use crate::http::state::AppState;

#[derive(Deserialize)]
struct IntegrationConfig {
    shared_secret: Option<String>,
}

/// Configure Integration Settings: `POST /checkout/shop/{shop}/integration/config`
/// `{"shared_secret"}` (8..255 characters) → `{"data":{"configured":true,"updated_at"}}`.
pub async fn configure_integration(
    state: web::Data<AppState>,
    request: Authorized<scopes::ModifyShopSettings>,
    body: JsonBody,
) -> Result<HttpResponse, ApiError> {
    let body: IntegrationConfig = body.parse()?;
    let secret = check_client_secret("shared_secret", body.shared_secret.as_deref())
        .map_err(|problem| ApiError::from(mercer_domain::DomainError::Invalid(vec![problem])))?;
    let shop_id = request.access.shop.id;
    let now = state.now();
    let saved = state
        .write(move |tx| {
            configure_secret(tx, shop_id, SecretKind::CheckoutIntegration, secret, now)
        })
        .await?;
    Ok(HttpResponse::Ok().json(json!({
        "data": { "configured": true, "updated_at": saved.updated_at }
    })))
}

/// `POST /integrations/v1/shops/{shop}/shared_secret/rotate`: a new connector secret, returned
/// this once; the previous one stays valid for X-Compatible-HMAC for 24 hours.
pub async fn rotate_connector_secret(
    state: web::Data<AppState>,
    request: Authorized<scopes::ModifyShopSettings>,
) -> Result<HttpResponse, ApiError> {
    let shop_id = request.access.shop.id;
    let now = state.now();
    let rotated = state
        .write(move |tx| rotate_secret(tx, shop_id, SecretKind::Connector, now))
        .await?;
    Ok(HttpResponse::Ok().json(json!({
        "data": {
            "shared_secret": rotated.current.expose(),
            "rotated_at": rotated.updated_at,
            "previous_valid_until": rotated.previous_valid_until,
        }
    })))
}
