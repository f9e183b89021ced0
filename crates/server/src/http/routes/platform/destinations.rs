//! Platform connector destinations (contract §3.1).

use actix_web::{HttpResponse, web};
use mercer_domain::kernel::outbound::AddressGuard;
use mercer_domain::platform::destinations::{
    DestinationEnvelope, DestinationResource, create_destination, delete_destination,
    find_destination, list_destinations, update_destination,
};
use serde_json::json;

use crate::http::error::ApiError;
use crate::http::extract::{Authorized, JsonBody, scopes};
use crate::http::state::{AppState, run_blocking};

fn one(
    destination: &mercer_domain::platform::destinations::Destination,
    shop: &mercer_domain::access::shop::Shop,
) -> HttpResponse {
    HttpResponse::Ok()
        .json(json!({ "data": { "destination": DestinationResource::new(destination, shop) } }))
}

/// Create Destination: verified with the connector before it is stored.
pub async fn create(
    state: web::Data<AppState>,
    request: Authorized<scopes::ModifyShopSettings>,
    body: JsonBody,
) -> Result<HttpResponse, ApiError> {
    let input = body.parse::<DestinationEnvelope>()?.into_input()?;
    let shop = request.access.shop;
    let (store, connector, now) = (state.store.clone(), state.connector.clone(), state.now());
    let guard = state.address_guard;
    let created = {
        let shop = shop.clone();
        run_blocking(move || {
            create_destination(
                &store,
                connector.as_ref(),
                &guard as &dyn AddressGuard,
                &shop,
                &input,
                now,
            )
        })
        .await?
    };
    log::info!(target: "mercer::destinations", "shop {} registered {} at {}", shop.identifier.as_str(), created.topic.as_str(), created.url);
    Ok(one(&created, &shop))
}

/// List Destinations: the live ones.
pub async fn list(
    state: web::Data<AppState>,
    request: Authorized<scopes::ReadShopSettings>,
) -> Result<HttpResponse, ApiError> {
    let shop = request.access.shop;
    let listed = shop.clone();
    let destinations = state.read(move |tx| list_destinations(tx, &listed)).await?;
    let resources: Vec<_> = destinations
        .iter()
        .map(|d| DestinationResource::new(d, &shop))
        .collect();
    Ok(HttpResponse::Ok().json(json!({ "data": { "destinations": resources } })))
}

/// Get Destination by ID: deleted ones too, with their `deleted_at`.
pub async fn get(
    state: web::Data<AppState>,
    request: Authorized<scopes::ReadShopSettings>,
    path: web::Path<(String, i64)>,
) -> Result<HttpResponse, ApiError> {
    let shop = request.access.shop;
    let id = path.1;
    let destination = {
        let shop = shop.clone();
        state
            .read(move |tx| find_destination(tx, &shop, id))
            .await?
    };
    Ok(one(&destination, &shop))
}

/// Update Destination (PATCH or PUT): present fields replace stored ones; verified again.
pub async fn update(
    state: web::Data<AppState>,
    request: Authorized<scopes::ModifyShopSettings>,
    path: web::Path<(String, i64)>,
    body: JsonBody,
) -> Result<HttpResponse, ApiError> {
    let input = body.parse::<DestinationEnvelope>()?.into_input()?;
    let shop = request.access.shop;
    let id = path.1;
    let (store, connector, now) = (state.store.clone(), state.connector.clone(), state.now());
    let guard = state.address_guard;
    let updated = {
        let shop = shop.clone();
        run_blocking(move || {
            update_destination(
                &store,
                connector.as_ref(),
                &guard as &dyn AddressGuard,
                &shop,
                id,
                &input,
                now,
            )
        })
        .await?
    };
    Ok(one(&updated, &shop))
}

/// Delete Destination: 204; its topic no longer calls the connector.
pub async fn delete(
    state: web::Data<AppState>,
    request: Authorized<scopes::ModifyShopSettings>,
    path: web::Path<(String, i64)>,
) -> Result<HttpResponse, ApiError> {
    let shop = request.access.shop;
    let (id, now) = (path.1, state.now());
    state
        .write(move |tx| delete_destination(tx, &shop, id, now))
        .await?;
    Ok(HttpResponse::NoContent().finish())
}
