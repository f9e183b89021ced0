//! Comparing a database's applied migrations with the ones this binary embeds: what an upgrade
//! would apply (`mercer migrate --check`), and whether a newer Mercer has already migrated the
//! database, in which case this binary must not touch it.

use std::collections::HashSet;

use diesel::backend::Backend;
use diesel::migration::{MigrationSource, MigrationVersion};
use diesel_migrations::{EmbeddedMigrations, MigrationHarness};

/// How a database's schema stands against this binary's migrations.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MigrationStatus {
    /// Migrations this binary would apply, oldest first, by their folder names.
    pub pending: Vec<String>,
    /// Migrations applied to the database that this binary does not know, by their versions:
    /// a newer Mercer has run on the database.
    pub unknown: Vec<String>,
}

impl MigrationStatus {
    /// The refusal to run on a database a newer Mercer migrated, if it is one.
    pub fn refusal(&self) -> Option<String> {
        if self.unknown.is_empty() {
            return None;
        }
        Some(format!(
            "the database was migrated by a newer Mercer (migrations {} are not in this \
             version, {}): run that version or a newer one, or restore the backup made before \
             the upgrade",
            self.unknown.join(", "),
            env!("CARGO_PKG_VERSION"),
        ))
    }
}

/// Reads the applied migrations (creating diesel's bookkeeping table on an empty database, as
/// any migration run would) and compares them with `source`.
pub(crate) fn status<DB, C>(
    conn: &mut C,
    source: EmbeddedMigrations,
) -> diesel::migration::Result<MigrationStatus>
where
    DB: Backend,
    C: MigrationHarness<DB>,
    EmbeddedMigrations: MigrationSource<DB>,
{
    let applied: HashSet<MigrationVersion<'static>> =
        conn.applied_migrations()?.into_iter().collect();
    let embedded = MigrationSource::<DB>::migrations(&source)?;
    let known: HashSet<MigrationVersion<'static>> = embedded
        .iter()
        .map(|migration| migration.name().version().as_owned())
        .collect();
    let mut pending: Vec<(MigrationVersion<'static>, String)> = embedded
        .iter()
        .filter(|migration| !applied.contains(&migration.name().version().as_owned()))
        .map(|migration| {
            (
                migration.name().version().as_owned(),
                migration.name().to_string(),
            )
        })
        .collect();
    pending.sort();
    let mut unknown: Vec<String> = applied
        .iter()
        .filter(|version| !known.contains(*version))
        .map(ToString::to_string)
        .collect();
    unknown.sort();
    Ok(MigrationStatus {
        pending: pending.into_iter().map(|(_, name)| name).collect(),
        unknown,
    })
}

/// The newest of `source`'s migrations, by its version (`20261129000100`).
pub(crate) fn newest<DB: Backend>(source: EmbeddedMigrations) -> String
where
    EmbeddedMigrations: MigrationSource<DB>,
{
    MigrationSource::<DB>::migrations(&source)
        .ok()
        .and_then(|embedded| {
            embedded
                .iter()
                .map(|migration| migration.name().version().as_owned())
                .max()
        })
        .map(|version| version.to_string())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_database_with_unknown_migrations_is_refused_with_their_versions() {
        let newer = MigrationStatus {
            pending: vec![],
            unknown: vec!["20991231000000".into()],
        };
        let refusal = newer.refusal().expect("refused");
        assert!(refusal.contains("20991231000000"), "{refusal}");
        assert!(refusal.contains("newer Mercer"), "{refusal}");
        let current = MigrationStatus {
            pending: vec!["2026-11-29-000080_analytics".into()],
            unknown: vec![],
        };
        assert_eq!(current.refusal(), None);
    }
}
