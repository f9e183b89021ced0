//! Platform connector destinations.

use actix_web::{HttpResponse, web};
use mercer_domain::kernel::ids::DestinationId;
use mercer_domain::kernel::outbound::AddressGuard;
use mercer_domain::platform::destinations::{
    DestinationEnvelope, DestinationResource, DestinationUpdateEnvelope, create_destination,
    delete_destination, find_destination, list_destinations, update_destination,
};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::http::error::ApiError;
use crate::http::extract::{Authorized, JsonBody, TypedPath, scopes};
use crate::http::state::{AppState, run_blocking};

/// `{"data": {"destination": {…}}}`.
#[derive(Serialize, ToSchema)]
pub struct DestinationAnswer<'a> {
    data: DestinationAnswerData<'a>,
}

/// `data` of [`DestinationAnswer`].
#[derive(Serialize, ToSchema)]
pub struct DestinationAnswerData<'a> {
    destination: DestinationResource<'a>,
}

/// `{"data": {"destinations": […]}}`: the live destinations.
#[derive(Serialize, ToSchema)]
pub struct DestinationList<'a> {
    data: DestinationListData<'a>,
}

/// `data` of [`DestinationList`].
#[derive(Serialize, ToSchema)]
pub struct DestinationListData<'a> {
    destinations: Vec<DestinationResource<'a>>,
}

/// `…/platform_connector_destinations/{id}`. An id that is not a number is the destination's
/// 404, answered after the credentials are checked (see `TypedPath`).
#[derive(Deserialize)]
pub(super) struct DestinationPath {
    id: DestinationId,
}

fn one(
    destination: &mercer_domain::platform::destinations::Destination,
    shop: &mercer_domain::access::shop::Shop,
) -> HttpResponse {
    HttpResponse::Ok().json(DestinationAnswer {
        data: DestinationAnswerData {
            destination: DestinationResource::new(destination, shop),
        },
    })
}

/// Creates a destination.
///
/// The destination is verified with the connector before it is stored.
#[utoipa::path(post, path = "/integrations/v1/shops/{shop}/platform_connector_destinations", operation_id = "create_destination", summary = "Create a destination", tag = "Platform destinations",
    request_body = DestinationEnvelope,
    params(("shop" = String, Path, description = "The shop's identifier")),
    security(("api_token" = ["modify_shop_settings"]), ("oauth2" = ["modify_shop_settings"])),
    responses((status = 200, body = DestinationAnswer<'_>)))]
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

/// Lists destinations.
///
/// The live destinations.
#[utoipa::path(get, path = "/integrations/v1/shops/{shop}/platform_connector_destinations", operation_id = "list_destinations", summary = "List destinations", tag = "Platform destinations",
    params(("shop" = String, Path, description = "The shop's identifier")),
    security(("api_token" = ["read_shop_settings"]), ("oauth2" = ["read_shop_settings"])),
    responses((status = 200, body = DestinationList<'_>)))]
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
    Ok(HttpResponse::Ok().json(DestinationList {
        data: DestinationListData {
            destinations: resources,
        },
    }))
}

/// Gets a destination.
///
/// Deleted destinations too, with their `deleted_at`.
#[utoipa::path(get, path = "/integrations/v1/shops/{shop}/platform_connector_destinations/{id}", operation_id = "get_destination", summary = "Get a destination", tag = "Platform destinations",
    params(("shop" = String, Path, description = "The shop's identifier"), ("id" = i64, Path, description = "The destination's id")),
    security(("api_token" = ["read_shop_settings"]), ("oauth2" = ["read_shop_settings"])),
    responses((status = 200, body = DestinationAnswer<'_>)))]
pub async fn get(
    state: web::Data<AppState>,
    request: Authorized<scopes::ReadShopSettings>,
    path: TypedPath<DestinationPath>,
) -> Result<HttpResponse, ApiError> {
    let id = path.get()?.id;
    let shop = request.access.shop;
    let destination = {
        let shop = shop.clone();
        state
            .read(move |tx| find_destination(tx, &shop, id))
            .await?
    };
    Ok(one(&destination, &shop))
}

/// Updates a destination.
///
/// PATCH and PUT alike: the fields present replace the stored ones, and the destination is verified
/// again.
#[utoipa::path(method(put, patch), path = "/integrations/v1/shops/{shop}/platform_connector_destinations/{id}", operation_id = "update_destination", summary = "Update a destination", tag = "Platform destinations",
    request_body = DestinationUpdateEnvelope,
    params(("shop" = String, Path, description = "The shop's identifier"), ("id" = i64, Path, description = "The destination's id")),
    security(("api_token" = ["modify_shop_settings"]), ("oauth2" = ["modify_shop_settings"])),
    responses((status = 200, body = DestinationAnswer<'_>)))]
pub async fn update(
    state: web::Data<AppState>,
    request: Authorized<scopes::ModifyShopSettings>,
    path: TypedPath<DestinationPath>,
    body: JsonBody,
) -> Result<HttpResponse, ApiError> {
    let id = path.get()?.id;
    let input = body.parse::<DestinationUpdateEnvelope>()?.into_input()?;
    let shop = request.access.shop;
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

/// Deletes a destination.
///
/// Its topic no longer calls the connector.
#[utoipa::path(delete, path = "/integrations/v1/shops/{shop}/platform_connector_destinations/{id}", operation_id = "delete_destination", summary = "Delete a destination", tag = "Platform destinations",
    params(("shop" = String, Path, description = "The shop's identifier"), ("id" = i64, Path, description = "The destination's id")),
    security(("api_token" = ["modify_shop_settings"]), ("oauth2" = ["modify_shop_settings"])),
    responses((status = 204, description = "Deleted")))]
pub async fn delete(
    state: web::Data<AppState>,
    request: Authorized<scopes::ModifyShopSettings>,
    path: TypedPath<DestinationPath>,
) -> Result<HttpResponse, ApiError> {
    let id = path.get()?.id;
    let shop = request.access.shop;
    let now = state.now();
    state
        .write(move |tx| delete_destination(tx, &shop, id, now))
        .await?;
    Ok(HttpResponse::NoContent().finish())
}
