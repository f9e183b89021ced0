//! API overrides (contract §4.1): create, list, update, delete. The secret is never returned.

use actix_web::{HttpResponse, web};
use mercer_domain::FieldError;
use mercer_domain::kernel::outbound::AddressGuard;
use mercer_domain::overrides::{self, OverrideChanges, OverrideInput};
use serde_json::json;

use crate::http::error::ApiError;
use crate::http::extract::{Authorized, JsonBody, scopes};
use crate::http::state::{AppState, run_blocking};

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

/// Create API Override: 200 `{"data":override}` (seed 001 §4.1); 422 on the type, URL or secret.
pub async fn create(
    state: web::Data<AppState>,
    request: Authorized<scopes::ModifyShopSettings>,
    body: JsonBody,
) -> Result<HttpResponse, ApiError> {
    let changes = check(&state, body.parse()?, true).await?;
    let (shop, now) = (request.access.shop, state.now());
    let created = state
        .write(move |tx| overrides::create(tx, &shop, changes, now))
        .await?;
    Ok(HttpResponse::Ok().json(json!({ "data": overrides::resource(&created) })))
}

/// List API Overrides, oldest first.
pub async fn list(
    state: web::Data<AppState>,
    request: Authorized<scopes::ReadShopSettings>,
) -> Result<HttpResponse, ApiError> {
    let shop = request.access.shop;
    let stored = state.read(move |tx| overrides::list(tx, &shop)).await?;
    let resources: Vec<_> = stored.iter().map(overrides::resource).collect();
    Ok(HttpResponse::Ok().json(json!({ "data": resources })))
}

/// Update API Override: the fields present replace the stored ones.
pub async fn update(
    state: web::Data<AppState>,
    request: Authorized<scopes::ModifyShopSettings>,
    path: web::Path<(String, String)>,
    body: JsonBody,
) -> Result<HttpResponse, ApiError> {
    let (shop, id, now) = (request.access.shop, path.into_inner().1, state.now());
    // An unknown id is 404 whatever the body holds.
    let (known_shop, known_id) = (shop.clone(), id.clone());
    state
        .read(move |tx| overrides::find(tx, &known_shop, &known_id))
        .await?;
    let changes = check(&state, body.parse()?, false).await?;
    let updated = state
        .write(move |tx| overrides::update(tx, &shop, &id, changes, now))
        .await?;
    Ok(HttpResponse::Ok().json(json!({ "data": overrides::resource(&updated) })))
}

/// Delete API Override: 200 `{"data":{}}`.
pub async fn delete(
    state: web::Data<AppState>,
    request: Authorized<scopes::ModifyShopSettings>,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let (shop, id) = (request.access.shop, path.into_inner().1);
    state
        .write(move |tx| overrides::delete(tx, &shop, &id))
        .await?;
    Ok(HttpResponse::Ok().json(json!({ "data": {} })))
}
