//! The routes, one folder per feature, each with its own `configure()`. Handlers parse, call the
//! domain, render; nothing else.

mod access;
mod box_builder;
mod checkout;
mod directory;
mod operations;
mod overrides;
mod platform;
mod subscriptions;
mod webhooks;

use actix_web::{Resource, web};

use super::error::ApiError;

/// A route whose unlisted methods answer 405 in the contract's error body.
pub(super) fn resource(path: &str) -> Resource {
    web::resource(path).default_service(web::to(|| async {
        Err::<String, _>(ApiError::method_not_allowed())
    }))
}

pub fn configure(config: &mut web::ServiceConfig) {
    // The platform first: connector events are the busiest routes, and actix tries routes in
    // order.
    platform::configure(config);
    access::configure(config);
    directory::configure(config);
    webhooks::configure(config);
    subscriptions::configure(config);
    overrides::configure(config);
    checkout::configure(config);
    box_builder::configure(config);
    operations::configure(config);
}
