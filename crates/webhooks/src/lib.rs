//! The webhook delivery engine: claim due deliveries, sign, send, record attempts, retry,
//! disable failing endpoints, guard against SSRF. Not built yet: it arrives with the webhook
//! engine work (issue 4). The crate exists now so the workspace has its final shape and
//! `cargo xtask tidy` guards it.
