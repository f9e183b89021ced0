//! The `mercer` processes running on a database. A long-running process (`mercer serve`)
//! registers itself once it has migrated, refreshes its row with a heartbeat and removes it when
//! it stops cleanly. A binary with migrations to apply reads the rows first and refuses while
//! processes of another schema are alive, since they would keep running on tables changed
//! under them; a process that finds a migration it does not know (a newer binary migrated
//! anyway) stops instead of writing with stale assumptions.
//!
//! A row older than three of its own heartbeats belongs to a process that died without removing
//! it: it is ignored, and deleted by whoever reads it next.

use std::time::Duration;

use diesel::prelude::*;
use mercer_domain::Timestamp;

use crate::connection::DbConnection;
use crate::migrations::MigrationStatus;
use crate::schema::processes;

/// Heartbeats a process may miss before its row is taken for a dead process's.
pub const MISSED_HEARTBEATS: i64 = 3;

/// The migration that makes the table: a database still waiting for it has no rows to read.
const PROCESSES_MIGRATION: &str = "2026-11-29-000100";

/// A process's row.
#[derive(Debug, Clone, PartialEq, Eq, Queryable, Selectable, Insertable)]
#[diesel(table_name = processes)]
pub struct RunningProcess {
    pub id: String,
    /// The Mercer version it runs (`mercer --version`).
    pub version: String,
    /// The newest migration that version knows.
    pub schema_version: String,
    /// Its host and process id, for messages.
    pub name: String,
    /// How often it refreshes `last_seen`, in milliseconds.
    pub heartbeat_ms: i64,
    /// Microseconds since the Unix epoch.
    pub started_at: i64,
    /// Microseconds since the Unix epoch.
    pub last_seen: i64,
}

impl RunningProcess {
    /// Whether the process missed [`MISSED_HEARTBEATS`] heartbeats by `now`.
    pub fn is_stale(&self, now: Timestamp) -> bool {
        let allowed = self
            .heartbeat_ms
            .max(1)
            .saturating_mul(1000)
            .saturating_mul(MISSED_HEARTBEATS);
        now.as_micros().saturating_sub(self.last_seen) > allowed
    }

    /// `0.2.0 (schema 20261129000100) on host pid 42, last seen 2026-11-29T10:00:00Z`
    pub fn describe(&self) -> String {
        format!(
            "{} (schema {}) on {}, last seen {}",
            self.version,
            self.schema_version,
            self.name,
            Timestamp::from_micros(self.last_seen).to_rfc3339_seconds(),
        )
    }
}

/// What a process registered as: the handle its heartbeats and its removal use.
#[derive(Debug, Clone)]
pub struct Registration {
    row: RunningProcess,
}

impl Registration {
    pub(crate) fn from_row(row: RunningProcess) -> Self {
        Registration { row }
    }

    pub fn id(&self) -> &str {
        &self.row.id
    }

    pub fn heartbeat(&self) -> Duration {
        Duration::from_millis(self.row.heartbeat_ms.unsigned_abs())
    }
}

/// What a heartbeat found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Heartbeat {
    /// The row is refreshed: serve on.
    Serving,
    /// A newer Mercer migrated the database: the refusal to keep serving, naming its
    /// migrations.
    NewerDatabase(String),
}

/// This host's name, for messages (the kernel's, else `HOSTNAME`, else "unknown host").
pub fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|name| name.trim().to_string())
        .filter(|name| !name.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "unknown host".to_string())
}

impl RunningProcess {
    pub(crate) fn new(schema_version: String, heartbeat: Duration, now: Timestamp) -> Self {
        let name = format!("{} pid {}", host_name(), std::process::id());
        RunningProcess {
            id: format!("{name} at {}", now.as_micros()),
            version: env!("CARGO_PKG_VERSION").to_string(),
            schema_version,
            name,
            heartbeat_ms: i64::try_from(heartbeat.as_millis())
                .unwrap_or(i64::MAX)
                .max(1),
            started_at: now.as_micros(),
            last_seen: now.as_micros(),
        }
    }
}

pub(crate) fn insert(conn: &mut DbConnection, row: &RunningProcess) -> QueryResult<()> {
    diesel::insert_into(processes::table)
        .values(row)
        .execute(conn)
        .map(|_| ())
}

/// Refreshes the row's `last_seen`; puts the row back when another process deleted it (this
/// one was too late a few times and looked dead).
pub(crate) fn refresh(
    conn: &mut DbConnection,
    registration: &Registration,
    now: Timestamp,
) -> QueryResult<()> {
    let updated = diesel::update(processes::table.find(registration.id()))
        .set(processes::last_seen.eq(now.as_micros()))
        .execute(conn)?;
    if updated == 0 {
        let mut row = registration.row.clone();
        row.last_seen = now.as_micros();
        insert(conn, &row)?;
    }
    Ok(())
}

pub(crate) fn remove(conn: &mut DbConnection, id: &str) -> QueryResult<()> {
    diesel::delete(processes::table.find(id))
        .execute(conn)
        .map(|_| ())
}

/// The live processes, oldest first; the rows of dead ones are deleted.
pub(crate) fn live(conn: &mut DbConnection, now: Timestamp) -> QueryResult<Vec<RunningProcess>> {
    let rows: Vec<RunningProcess> = processes::table
        .select(RunningProcess::as_select())
        .order((processes::started_at, processes::id))
        .load(conn)?;
    let (stale, live): (Vec<_>, Vec<_>) = rows.into_iter().partition(|row| row.is_stale(now));
    for row in stale {
        // Only if it was not refreshed meanwhile.
        diesel::delete(
            processes::table
                .find(&row.id)
                .filter(processes::last_seen.eq(row.last_seen)),
        )
        .execute(conn)?;
    }
    Ok(live)
}

/// Before applying `status.pending`: the refusal, when processes of another schema than
/// `schema_version` are alive on the database. Processes of the same schema (the same
/// migrations, whatever their version) may run together.
pub(crate) fn refusal_to_migrate(
    conn: &mut DbConnection,
    status: &MigrationStatus,
    schema_version: &str,
    now: Timestamp,
) -> QueryResult<Option<String>> {
    if status.pending.is_empty()
        || status
            .pending
            .iter()
            .any(|name| name.starts_with(PROCESSES_MIGRATION))
    {
        return Ok(None);
    }
    let others: Vec<RunningProcess> = live(conn, now)?
        .into_iter()
        .filter(|row| row.schema_version != schema_version)
        .collect();
    if others.is_empty() {
        return Ok(None);
    }
    let listed: Vec<String> = others.iter().map(RunningProcess::describe).collect();
    Ok(Some(format!(
        "refusing to apply migrations ({}) while {} of another schema (an older or newer \
         Mercer) {} running on this database: {}. Stop {} first, then start this version \
         (Mercer {}, schema {}) again. A process that stops cleanly removes itself; one that \
         was killed is forgotten {} heartbeats after it was last seen.",
        status.pending.join(", "),
        if others.len() == 1 {
            "a Mercer process"
        } else {
            "Mercer processes"
        },
        if others.len() == 1 { "is" } else { "are" },
        listed.join("; "),
        if others.len() == 1 { "it" } else { "them" },
        env!("CARGO_PKG_VERSION"),
        schema_version,
        MISSED_HEARTBEATS,
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_row_is_stale_after_three_missed_heartbeats() {
        let start = Timestamp::from_micros(1_000_000_000);
        let row = RunningProcess::new("1".into(), Duration::from_secs(10), start);
        assert!(!row.is_stale(start.plus_seconds(30)));
        assert!(row.is_stale(start.plus_seconds(31)));
        assert!(row.describe().contains("last seen"), "{}", row.describe());
    }
}
