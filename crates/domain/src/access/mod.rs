//! Who may do what: shops, API tokens and their scopes, the auth decision,
//! connector and checkout shared secrets, and OAuth (apps, staff sign-in, codes, exchange).

pub mod auth;
pub mod budgets;
pub mod console;
pub mod credentials;
pub mod oauth;
pub mod operator;
mod repository;
pub mod secrets;
pub mod shop;

pub use repository::{
    AccessDatabase, AccessRepositories, ConsoleRepository, OAuthRepository, SecretRepository,
    ShopRepository, TokenRepository,
};
