//! The client for platform connector operations (contract §3.2) and the kit for people who
//! write connectors. Not built yet: it arrives with the platform connector work (issue 3). The
//! crate exists now so the workspace has its final shape and `cargo xtask tidy` guards it.
