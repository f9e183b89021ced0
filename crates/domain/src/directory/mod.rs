//! The customer directory: its query language, resources and labels.

mod customers;
mod repository;

pub use customers::*;
pub use repository::{DirectoryDatabase, DirectoryRepositories, DirectoryRepository};
