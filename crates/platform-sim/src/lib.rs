//! A reference e-commerce platform behind a connector, served from memory, that pushes events
//! to Mercer. Not built yet: it arrives with the platform connector work (issue 3). The crate
//! exists now so the workspace has its final shape and `cargo xtask tidy` guards it.
