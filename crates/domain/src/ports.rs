//! The ports combined: every feature's repositories in the one unit of work that `mercer-store`
//! implements over SQLite and PostgreSQL (and `crate::testing` in memory). Features do not
//! import this module: each runs its work through
//! its own database trait (`PlatformDatabase`…) over its own repositories, which
//! [`Database`] provides for every feature.

use crate::access::{AccessDatabase, AccessRepositories};
use crate::box_builder::repository::{BoxBuilderDatabase, BoxBuilderRepositories};
use crate::checkout::repository::{CheckoutDatabase, CheckoutRepositories};
use crate::directory::{DirectoryDatabase, DirectoryRepositories};
use crate::kernel::error::DomainError;
use crate::overrides::{OverrideDatabase, OverrideRepositories};
use crate::platform::{PlatformDatabase, PlatformRepositories};
use crate::portal::{PortalDatabase, PortalRepositories};
use crate::privacy::{PrivacyDatabase, PrivacyRepositories};
use crate::subscriptions::repository::{SubscriptionDatabase, SubscriptionRepositories};
use crate::webhooks::{WebhookDatabase, WebhookRepositories};

/// Everything a unit of work may touch: every feature's repositories.
pub trait Repositories:
    AccessRepositories
    + PlatformRepositories
    + DirectoryRepositories
    + WebhookRepositories
    + OverrideRepositories
    + SubscriptionRepositories
    + CheckoutRepositories
    + BoxBuilderRepositories
    + PortalRepositories
    + PrivacyRepositories
{
}

impl<T> Repositories for T where
    T: AccessRepositories
        + PlatformRepositories
        + DirectoryRepositories
        + WebhookRepositories
        + OverrideRepositories
        + SubscriptionRepositories
        + CheckoutRepositories
        + BoxBuilderRepositories
        + PortalRepositories
        + PrivacyRepositories
        + ?Sized
{
}

/// A database that runs units of work. `write` runs its closure in one transaction that commits
/// only when the closure returns `Ok`; `read` is for work that changes nothing.
pub trait Database: Clone + Send + Sync + 'static {
    /// Runs `work`, which only reads: it is not run in a write transaction, so it must change
    /// nothing.
    fn read<T>(
        &self,
        work: impl FnOnce(&mut dyn Repositories) -> Result<T, DomainError>,
    ) -> Result<T, DomainError>;

    /// Runs `work` in one transaction that commits only when `work` returns `Ok`; an `Err` rolls
    /// every change of `work` back.
    fn write<T>(
        &self,
        work: impl FnOnce(&mut dyn Repositories) -> Result<T, DomainError>,
    ) -> Result<T, DomainError>;

    /// Runs `work`, which changes the database with exactly one statement (atomic by itself)
    /// and reads nothing else. A store may run it without a transaction around it; PostgreSQL
    /// then saves the round trips of BEGIN and COMMIT. By default it is a `write`.
    fn write_statement<T>(
        &self,
        work: impl FnOnce(&mut dyn Repositories) -> Result<T, DomainError>,
    ) -> Result<T, DomainError> {
        self.write(work)
    }

    /// Runs `work` on each of `items`, each a unit of work of its own: an item whose work
    /// returns an error changes nothing, the others keep their changes, and each item's
    /// outcome is answered in order. A storage failure ends the call with that error; the
    /// items are to be safe to run again, as some of them may have been kept. A store may run
    /// the items in one transaction, each in a savepoint of its own, which saves a commit per
    /// item (`mercer-store` does: there a storage failure keeps none of them). By default each
    /// item is a `write` of its own.
    #[allow(clippy::type_complexity)]
    fn write_each<I, T>(
        &self,
        items: &[I],
        mut work: impl FnMut(&mut dyn Repositories, &I) -> Result<T, DomainError>,
    ) -> Result<Vec<Result<T, DomainError>>, DomainError> {
        let mut outcomes = Vec::with_capacity(items.len());
        for item in items {
            match self.write(|tx| work(tx, item)) {
                Err(DomainError::Storage(error)) => return Err(DomainError::Storage(error)),
                outcome => outcomes.push(outcome),
            }
        }
        Ok(outcomes)
    }
}

/// Every `Database` is every feature's database: the unit of work is seen through the
/// feature's own repositories (trait upcasting).
macro_rules! feature_databases {
    ($($feature:ident: $repositories:ident),* $(,)?) => {$(
        impl<D: Database> $feature for D {
            fn read_tx<T>(
                &self,
                work: impl FnOnce(&mut dyn $repositories) -> Result<T, DomainError>,
            ) -> Result<T, DomainError> {
                self.read(|tx| work(tx))
            }

            fn write_tx<T>(
                &self,
                work: impl FnOnce(&mut dyn $repositories) -> Result<T, DomainError>,
            ) -> Result<T, DomainError> {
                self.write(|tx| work(tx))
            }

            fn write_each_tx<I, T>(
                &self,
                items: &[I],
                mut work: impl FnMut(&mut dyn $repositories, &I) -> Result<T, DomainError>,
            ) -> Result<Vec<Result<T, DomainError>>, DomainError> {
                self.write_each(items, |tx, item| work(tx, item))
            }
        }
    )*};
}

feature_databases!(
    AccessDatabase: AccessRepositories,
    PlatformDatabase: PlatformRepositories,
    DirectoryDatabase: DirectoryRepositories,
    WebhookDatabase: WebhookRepositories,
    OverrideDatabase: OverrideRepositories,
    SubscriptionDatabase: SubscriptionRepositories,
    CheckoutDatabase: CheckoutRepositories,
    BoxBuilderDatabase: BoxBuilderRepositories,
    PortalDatabase: PortalRepositories,
    PrivacyDatabase: PrivacyRepositories,
);
