//! Webhook delivery: workers claim due messages, sign them (Standard
//! Webhooks on all; draft-cavage for checkout topics; `x-svc-signature` for subscription
//! topics), send them with ureq, record every attempt, and schedule retries or disable
//! endpoints by the domain's rules. [`overrides`] calls API overrides, signed the same way as
//! checkout webhooks. Both send with `mercer-outbound`'s agent, whose guard keeps calls out of
//! private networks and which follows no redirect.
//!
//! Everything here blocks: it runs on threads of its own.

pub mod dispatcher;
pub mod overrides;

pub use dispatcher::{
    BatchReport, DispatcherConfig, Sender, ThrottleWatch, build_request, dispatch_batch,
    dispatch_throttled_batch, start,
};
pub use overrides::HttpOverrideCaller;
