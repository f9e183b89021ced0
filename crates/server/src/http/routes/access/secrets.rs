//! Shop settings that hold shared secrets: write-only, shown once.

use actix_web::{HttpResponse, web};
use mercer_domain::Timestamp;
use mercer_domain::access::secrets::{
    SecretKind, check_client_secret, configure_secret, rotate_secret,
};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::http::error::ApiError;
use crate::http::extract::{Authorized, JsonBody, scopes};
use crate::http::state::AppState;

/// The body of Configure Integration Settings.
#[derive(Deserialize, ToSchema)]
pub struct IntegrationConfig {
    /// The secret the checkout's integration calls are signed with (8 to 255 characters).
    #[schema(required = true, value_type = String, min_length = 8, max_length = 255)]
    shared_secret: Option<String>,
}

/// `{"data": {"configured": true, "updated_at"}}`.
#[derive(Serialize, ToSchema)]
pub struct IntegrationConfigured {
    data: IntegrationConfiguredData,
}

/// `data` of [`IntegrationConfigured`]; the secret itself is never shown.
#[derive(Serialize, ToSchema)]
pub struct IntegrationConfiguredData {
    /// Always `true`.
    configured: bool,
    /// When the secret was set.
    updated_at: Timestamp,
}

/// `{"data": {"shared_secret", "rotated_at", "previous_valid_until"}}`.
#[derive(Serialize, ToSchema)]
pub struct ConnectorSecretRotated {
    data: ConnectorSecretRotatedData,
}

/// `data` of [`ConnectorSecretRotated`].
#[derive(Serialize, ToSchema)]
pub struct ConnectorSecretRotatedData {
    /// The new connector secret, shown this once.
    shared_secret: String,
    /// When it was made.
    rotated_at: Timestamp,
    /// Until when the previous secret still signs `X-Compatible-HMAC`; null when there was none.
    previous_valid_until: Option<Timestamp>,
}

/// Configures the checkout integration.
///
/// Sets the shop's integration shared secret (8 to 255 characters) and answers that the integration
/// is configured, with when it was last updated.
#[utoipa::path(post, path = "/checkout/shop/{shop}/integration/config", operation_id = "configure_checkout_integration", summary = "Configure the checkout integration", tag = "Shared secrets",
    request_body = IntegrationConfig,
    params(("shop" = String, Path, description = "The shop's identifier")),
    security(("api_token" = ["modify_shop_settings"]), ("oauth2" = ["modify_shop_settings"])),
    responses((status = 200, body = IntegrationConfigured)))]
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
    Ok(HttpResponse::Ok().json(IntegrationConfigured {
        data: IntegrationConfiguredData {
            configured: true,
            updated_at: saved.updated_at,
        },
    }))
}

/// Rotates the connector shared secret.
///
/// Makes a new connector secret and returns it this once. The previous secret stays valid for
/// `X-Compatible-HMAC` for 24 hours.
#[utoipa::path(post, path = "/integrations/v1/shops/{shop}/shared_secret/rotate", operation_id = "rotate_connector_secret", summary = "Rotate the connector shared secret", tag = "Shared secrets",
    params(("shop" = String, Path, description = "The shop's identifier")),
    security(("api_token" = ["modify_shop_settings"]), ("oauth2" = ["modify_shop_settings"])),
    responses((status = 200, body = ConnectorSecretRotated)))]
pub async fn rotate_connector_secret(
    state: web::Data<AppState>,
    request: Authorized<scopes::ModifyShopSettings>,
) -> Result<HttpResponse, ApiError> {
    let shop_id = request.access.shop.id;
    let now = state.now();
    let rotated = state
        .write(move |tx| rotate_secret(tx, shop_id, SecretKind::Connector, now))
        .await?;
    Ok(HttpResponse::Ok().json(ConnectorSecretRotated {
        data: ConnectorSecretRotatedData {
            shared_secret: rotated.current.expose().to_string(),
            rotated_at: rotated.updated_at,
            previous_valid_until: rotated.previous_valid_until,
        },
    }))
}
