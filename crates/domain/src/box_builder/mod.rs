//! The box builder (docs/box-builder.md): boxes sold under a
//! subscription group, the catalogue's products they offer, their sizes, their time slots and
//! the products offered in each slot; and the selections customers make of them.

pub mod admin;
pub mod console;
pub mod input;
pub mod orders;
pub mod repository;
pub mod resources;
pub mod selections;
pub mod storefront;
