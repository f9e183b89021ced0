//! The routes, one folder per feature, each with its own `configure()`. Handlers parse, call the
//! domain, render; nothing else.

mod access;
mod box_builder;
mod checkout;
mod directory;
mod operations;
mod overrides;
mod platform;
mod portal;
mod privacy;
mod subscriptions;
mod webhooks;

pub use platform::event_route_pattern;

use actix_web::body::MessageBody;
use actix_web::dev::{ServiceFactory, ServiceRequest, ServiceResponse};
use actix_web::middleware::from_fn;
use actix_web::{Resource, web};

use super::error::ApiError;
use super::middleware::cors_any_origin;

/// A route whose unlisted methods answer 405 in the JSON error body.
pub(super) fn resource(path: &str) -> Resource {
    web::resource(path).default_service(web::to(|| async {
        Err::<String, _>(ApiError::method_not_allowed())
    }))
}

/// A storefront route: [`resource`] answering pages of any origin ([`cors_any_origin`]): the
/// checkout's storefront and the box builder's storefront and customer routes. They read no
/// cookie (only a bearer JWT of one order, a customer's token, or nothing), so a page of another
/// site gains nothing by calling them. The other routes (API tokens, the sign-in pages and
/// their cookie) answer no other origin. They count against the shop's storefront budget (off
/// unless set), inside the CORS layer so that a 429 carries its headers too.
pub(super) fn storefront_resource(
    path: &str,
) -> Resource<
    impl ServiceFactory<
        ServiceRequest,
        Config = (),
        Response = ServiceResponse<impl MessageBody>,
        Error = actix_web::Error,
        InitError = (),
    >,
> {
    resource(path)
        .wrap(from_fn(super::budgets::storefront))
        .wrap(from_fn(cors_any_origin))
}

/// Each route folder's part of the OpenAPI document, in the order of [`configure`].
pub fn documents() -> Vec<utoipa::openapi::OpenApi> {
    use utoipa::OpenApi;
    vec![
        platform::Api::openapi(),
        access::Api::openapi(),
        directory::Api::openapi(),
        webhooks::Api::openapi(),
        subscriptions::Api::openapi(),
        privacy::Api::openapi(),
        overrides::Api::openapi(),
        checkout::Api::openapi(),
        box_builder::Api::openapi(),
        operations::Api::openapi(),
    ]
}

pub fn configure(config: &mut web::ServiceConfig) {
    // The platform first: connector events are the busiest routes, and actix tries routes in
    // order.
    platform::configure(config);
    access::configure(config);
    directory::configure(config);
    checkout::configure_topics(config);
    webhooks::configure(config);
    subscriptions::configure(config);
    privacy::configure(config);
    overrides::configure(config);
    checkout::configure(config);
    box_builder::configure(config);
    portal::configure(config);
    operations::configure(config);
}
