//! API overrides: create, list, update, delete. The secret is never returned.

use actix_web::{HttpResponse, web};
use mercer_domain::FieldError;
use mercer_domain::kernel::outbound::AddressGuard;
use mercer_domain::overrides::{
    self, OverrideChanges, OverrideInput, OverrideResource, OverrideUpdateInput,
};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::http::error::ApiError;
use crate::http::extract::{Authorized, JsonBody, scopes};
use crate::http::state::{AppState, run_blocking};

/// `{"data": override}`.
#[derive(Serialize, ToSchema)]
pub struct ApiOverrideAnswer {
    data: OverrideResource,
}

/// `{"data": [override, …]}`, oldest first.
#[derive(Serialize, ToSchema)]
pub struct ApiOverrideList {
    data: Vec<OverrideResource>,
}

/// `{}`.
#[derive(Serialize, ToSchema)]
pub struct ApiOverrideNothing {}

/// `{"data": {}}`.
#[derive(Serialize, ToSchema)]
pub struct ApiOverrideDeleted {
    data: ApiOverrideNothing,
}

/// `…/overrides/{id}`: an override by the id clients see (32 hex characters).
#[derive(Deserialize)]
pub(super) struct OverridePath {
    id: String,
}

fn override_answer(stored: &overrides::ApiOverride) -> ApiOverrideAnswer {
    ApiOverrideAnswer {
        data: overrides::resource(stored),
    }
}

/// Checks a body off the async thread: the guard resolves the URL's host.
async fn check(
    state: &AppState,
    input: OverrideInput,
    creating: bool,
) -> Result<Result<OverrideChanges, Vec<FieldError>>, ApiError> {
    let guard = state.address_guard;
    run_blocking(move || {
        Ok(overrides::check_input(
            &input,
            &guard as &dyn AddressGuard,
            creating,
        ))
    })
    .await
}

/// Creates an API override.
///
/// Answers with the new override under `data`; an invalid type, URL or secret is reported as a
/// validation error.
#[utoipa::path(post, path = "/checkout/shop/{shop}/overrides", operation_id = "create_api_override", summary = "Create an API override", tag = "Checkout: API overrides",
    request_body = OverrideInput,
    params(("shop" = String, Path, description = "The shop's identifier")),
    security(("api_token" = ["modify_shop_settings"]), ("oauth2" = ["modify_shop_settings"])),
    responses((status = 200, description = "The override created (200, not 201)", body = ApiOverrideAnswer)))]
pub async fn create(
    state: web::Data<AppState>,
    request: Authorized<scopes::ModifyShopSettings>,
    body: JsonBody,
) -> Result<HttpResponse, ApiError> {
    let changes = check(&state, body.parse::<OverrideInput>()?, true).await?;
    let (shop, now) = (request.access.shop, state.now());
    let created = state
        .write(move |tx| overrides::create(tx, &shop, changes, now))
        .await?;
    Ok(HttpResponse::Ok().json(override_answer(&created)))
}

/// Lists API overrides.
///
/// The shop's overrides, oldest first.
#[utoipa::path(get, path = "/checkout/shop/{shop}/overrides", operation_id = "list_api_overrides", summary = "List API overrides", tag = "Checkout: API overrides",
    params(("shop" = String, Path, description = "The shop's identifier")),
    security(("api_token" = ["read_shop_settings"]), ("oauth2" = ["read_shop_settings"])),
    responses((status = 200, body = ApiOverrideList)))]
pub async fn list(
    state: web::Data<AppState>,
    request: Authorized<scopes::ReadShopSettings>,
) -> Result<HttpResponse, ApiError> {
    let shop = request.access.shop;
    let stored = state.read(move |tx| overrides::list(tx, &shop)).await?;
    Ok(HttpResponse::Ok().json(ApiOverrideList {
        data: stored.iter().map(overrides::resource).collect(),
    }))
}

/// Updates an API override.
///
/// The fields present replace the stored ones.
#[utoipa::path(patch, path = "/checkout/shop/{shop}/overrides/{id}", operation_id = "update_api_override", summary = "Update an API override", tag = "Checkout: API overrides",
    request_body = OverrideUpdateInput,
    params(("shop" = String, Path, description = "The shop's identifier"), ("id" = String, Path, description = "The override's id (32 hex characters)")),
    security(("api_token" = ["modify_shop_settings"]), ("oauth2" = ["modify_shop_settings"])),
    responses((status = 200, body = ApiOverrideAnswer)))]
pub async fn update(
    state: web::Data<AppState>,
    request: Authorized<scopes::ModifyShopSettings>,
    path: web::Path<OverridePath>,
    body: JsonBody,
) -> Result<HttpResponse, ApiError> {
    let (shop, id, now) = (request.access.shop, path.into_inner().id, state.now());
    // An unknown id is 404 whatever the body holds.
    let (known_shop, known_id) = (shop.clone(), id.clone());
    state
        .read(move |tx| overrides::find(tx, &known_shop, &known_id))
        .await?;
    let input = OverrideInput::from(body.parse::<OverrideUpdateInput>()?);
    let changes = check(&state, input, false).await?;
    let updated = state
        .write(move |tx| overrides::update(tx, &shop, &id, changes, now))
        .await?;
    Ok(HttpResponse::Ok().json(override_answer(&updated)))
}

/// Deletes an API override.
///
/// Answers with an empty object under `data`.
#[utoipa::path(delete, path = "/checkout/shop/{shop}/overrides/{id}", operation_id = "delete_api_override", summary = "Delete an API override", tag = "Checkout: API overrides",
    params(("shop" = String, Path, description = "The shop's identifier"), ("id" = String, Path, description = "The override's id (32 hex characters)")),
    security(("api_token" = ["modify_shop_settings"]), ("oauth2" = ["modify_shop_settings"])),
    responses((status = 200, description = "Deleted", body = ApiOverrideDeleted)))]
pub async fn delete(
    state: web::Data<AppState>,
    request: Authorized<scopes::ModifyShopSettings>,
    path: web::Path<OverridePath>,
) -> Result<HttpResponse, ApiError> {
    let (shop, id) = (request.access.shop, path.into_inner().id);
    state
        .write(move |tx| overrides::delete(tx, &shop, &id))
        .await?;
    Ok(HttpResponse::Ok().json(ApiOverrideDeleted {
        data: ApiOverrideNothing {},
    }))
}
