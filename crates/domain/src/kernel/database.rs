//! How a feature runs its units of work without knowing every other feature's repositories.

/// Declares a feature's database: a database seen through that feature's repositories.
/// `write_tx` runs its closure in one transaction that commits only when the closure returns
/// `Ok`; `read_tx` is for work that changes nothing. `ports::Database` implements every
/// feature's database, so a feature never names the others' repositories.
#[macro_export]
macro_rules! feature_database {
    ($(#[$doc:meta])* $name:ident, $repositories:path) => {
        $(#[$doc])*
        pub trait $name {
            /// Runs `work`, which only reads: it is not run in a write transaction, so it must
            /// change nothing.
            fn read_tx<T>(
                &self,
                work: impl FnOnce(&mut dyn $repositories) -> Result<T, $crate::DomainError>,
            ) -> Result<T, $crate::DomainError>;

            /// Runs `work` in one transaction that commits only when `work` returns `Ok`; an
            /// `Err` rolls every change of `work` back.
            fn write_tx<T>(
                &self,
                work: impl FnOnce(&mut dyn $repositories) -> Result<T, $crate::DomainError>,
            ) -> Result<T, $crate::DomainError>;

            /// Runs `work` on each of `items`, each a unit of work of its own: an item whose
            /// work fails changes nothing and the others keep their changes. A storage failure
            /// ends the call with that error (see `ports::Database::write_each`).
            #[allow(clippy::type_complexity)]
            fn write_each_tx<I, T>(
                &self,
                items: &[I],
                work: impl FnMut(&mut dyn $repositories, &I) -> Result<T, $crate::DomainError>,
            ) -> Result<Vec<Result<T, $crate::DomainError>>, $crate::DomainError>;
        }
    };
}
