//! Connections: a diesel `MultiConnection` over both backends, and the r2d2 manager that opens
//! the backend the URL names and sets SQLite's PRAGMAs on every new connection.

use diesel::backend::Backend;
use diesel::connection::{AnsiTransactionManager, SimpleConnection, TransactionManager};
use diesel::prelude::*;
use diesel::query_builder::{AstPass, Query, QueryFragment, QueryId};
use diesel::r2d2::ManageConnection;
use diesel::{PgConnection, SqliteConnection};
use std::marker::PhantomData;

use crate::url::DatabaseUrl;

#[derive(diesel::MultiConnection)]
pub enum DbConnection {
    Sqlite(SqliteConnection),
    Pg(PgConnection),
}

/// Runs `$body` with `$c` bound to the concrete connection of either backend. For statements
/// diesel's `MultiBackend` cannot express (`RETURNING`, `ON CONFLICT`, `FOR UPDATE SKIP LOCKED`):
/// the query is built once in the source and compiled for each backend.
macro_rules! on_backend {
    ($conn:expr, |$c:ident| $body:expr) => {
        match $conn {
            $crate::connection::DbConnection::Sqlite($c) => $body,
            $crate::connection::DbConnection::Pg($c) => $body,
        }
    };
}
pub(crate) use on_backend;

/// Per-connection SQLite settings: WAL so readers never block the writer, a busy timeout so a
/// writer waits for another instead of failing, enforced foreign keys, and NORMAL sync (safe
/// with WAL: a power cut may lose the last commits, never corrupt the file).
/// Pages are read through a memory map (up to 1 GiB of the file) rather than copied in by a
/// system call each.
/// A committing connection checkpoints only once the WAL holds 16,384 pages (64 MiB at 4 KiB),
/// not SQLite's 1,000: `mercer serve` checkpoints on a thread of its own
/// ([`crate::Store::checkpoint`]), so its event writer only finishes what that left over
/// (SQLite can restart the WAL only once every frame is copied back, and only a writer can).
/// A `-wal` file that grew past 64 MiB (a reader holding an old snapshot meanwhile) is cut
/// back to that when the WAL restarts.
const SQLITE_PRAGMAS: &str = "PRAGMA journal_mode = WAL;
PRAGMA busy_timeout = 5000;
PRAGMA foreign_keys = ON;
PRAGMA synchronous = NORMAL;
PRAGMA mmap_size = 1073741824;
PRAGMA wal_autocheckpoint = 16384;
PRAGMA journal_size_limit = 67108864;";

#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    #[error("cannot connect: {0}")]
    Connection(#[from] diesel::ConnectionError),
    #[error("connection check failed: {0}")]
    Query(#[from] diesel::result::Error),
}

pub struct ConnectionManager {
    url: DatabaseUrl,
}

impl ConnectionManager {
    pub fn new(url: DatabaseUrl) -> Self {
        ConnectionManager { url }
    }
}

pub fn establish(url: &DatabaseUrl) -> Result<DbConnection, ConnectError> {
    match url {
        DatabaseUrl::Sqlite { path } => {
            let mut conn = SqliteConnection::establish(path)?;
            conn.batch_execute(SQLITE_PRAGMAS)?;
            Ok(DbConnection::Sqlite(conn))
        }
        DatabaseUrl::Postgres { url } => Ok(DbConnection::Pg(PgConnection::establish(url)?)),
    }
}

/// Whether a transaction is still open on the connection (or its state is broken).
fn in_transaction(conn: &mut DbConnection) -> bool {
    let depth = match conn {
        DbConnection::Sqlite(c) => {
            AnsiTransactionManager::transaction_manager_status_mut(c).transaction_depth()
        }
        DbConnection::Pg(c) => {
            AnsiTransactionManager::transaction_manager_status_mut(c).transaction_depth()
        }
    };
    !matches!(depth, Ok(None))
}

impl ManageConnection for ConnectionManager {
    type Connection = DbConnection;
    type Error = ConnectError;

    fn connect(&self) -> Result<DbConnection, ConnectError> {
        establish(&self.url)
    }

    fn is_valid(&self, conn: &mut DbConnection) -> Result<(), ConnectError> {
        conn.batch_execute("SELECT 1")?;
        Ok(())
    }

    /// A connection given back with a transaction still open (its user panicked), or that
    /// diesel found broken, is dropped rather than handed to the next user.
    fn has_broken(&self, conn: &mut DbConnection) -> bool {
        in_transaction(conn) || diesel::r2d2::R2D2Connection::is_broken(conn)
    }
}

/// Opens a write transaction. On SQLite it is `BEGIN IMMEDIATE`, which takes the write lock at
/// once: a deferred transaction that reads and then writes can fail with SQLITE_BUSY when
/// another writer got in between, which busy_timeout cannot cure.
pub fn begin_write(conn: &mut DbConnection) -> diesel::QueryResult<()> {
    match conn {
        DbConnection::Sqlite(c) => {
            AnsiTransactionManager::begin_transaction_sql(c, "BEGIN IMMEDIATE")
        }
        DbConnection::Pg(c) => AnsiTransactionManager::begin_transaction(c),
    }
}

/// Opens a savepoint inside the open transaction; [`commit`] releases it and [`rollback`] undoes
/// what was done since, leaving the transaction open.
pub fn savepoint(conn: &mut DbConnection) -> diesel::QueryResult<()> {
    match conn {
        DbConnection::Sqlite(c) => AnsiTransactionManager::begin_transaction(c),
        DbConnection::Pg(c) => AnsiTransactionManager::begin_transaction(c),
    }
}

pub fn commit(conn: &mut DbConnection) -> diesel::QueryResult<()> {
    match conn {
        DbConnection::Sqlite(c) => AnsiTransactionManager::commit_transaction(c),
        DbConnection::Pg(c) => AnsiTransactionManager::commit_transaction(c),
    }
}

pub fn rollback(conn: &mut DbConnection) -> diesel::QueryResult<()> {
    match conn {
        DbConnection::Sqlite(c) => AnsiTransactionManager::rollback_transaction(c),
        DbConnection::Pg(c) => AnsiTransactionManager::rollback_transaction(c),
    }
}

/// Runs statements that PostgreSQL must plan for the values at hand, not once for all. The
/// tables of events and entities go from empty to tens of thousands of rows within seconds, and
/// a generic plan PostgreSQL settles on while one is nearly empty can stay bad for good: for the
/// entity lookups by `platform_id = ANY(…)` it scanned every customer of the shop through
/// another index, and a burst's backlog took ten seconds to drain instead of a fraction of one,
/// in one benchmark run out of three. SQLite has no such plans: the statements just run.
/// The setting is `SET LOCAL`, so it needs the caller's transaction (outside one PostgreSQL
/// ignores it, with a warning); afterwards the configured default is back for the rest of it.
pub(crate) fn planned_each_time<T>(
    conn: &mut DbConnection,
    statements: impl FnOnce(&mut DbConnection) -> diesel::QueryResult<T>,
) -> diesel::QueryResult<T> {
    let DbConnection::Pg(pg) = &mut *conn else {
        return statements(conn);
    };
    pg.batch_execute("SET LOCAL plan_cache_mode = force_custom_plan")?;
    let result = statements(conn)?;
    // Only after success: a failed statement aborts the transaction, whose rollback undoes
    // the setting, and resetting it would replace the statement's error with "aborted".
    if let DbConnection::Pg(pg) = &mut *conn {
        pg.batch_execute("SET LOCAL plan_cache_mode TO DEFAULT")?;
    }
    Ok(result)
}

/// A statement whose SQL text is the same every time it runs, for diesel to keep prepared.
/// diesel declines to cache upserts, updates and single-row inserts of derived `Insertable`s
/// (their text can vary with the values, such as `None` fields left out), so on SQLite each
/// would be parsed and planned again for every row, which costs more than writing the row.
/// `Site` names the one place in the code that runs it: diesel finds the prepared statement by
/// that type, without writing the SQL out again each time. So each site type must stand for
/// one statement text (declare them with [`statement_sites!`], one per call site), and the
/// statement must not vary with its values: derived `Insertable`s need
/// `treat_none_as_default_value = false`, or a `None` turns into `DEFAULT` and the prepared
/// statement of the other shape would receive the wrong values.
/// Run it by value (`get_result`, `load`, so give it a `RETURNING`): `execute` hands diesel a
/// reference, whose caching check walks the statement and never asks this wrapper.
pub(crate) struct KeepPrepared<Site, Q>(Q, PhantomData<Site>);

/// A place in the code that runs one [`KeepPrepared`] statement.
pub(crate) trait StatementSite: 'static {}

macro_rules! statement_sites {
    ($($site:ident),+ $(,)?) => {
        $(
            pub(crate) struct $site;
            impl $crate::connection::StatementSite for $site {}
        )+
    };
}
pub(crate) use statement_sites;

impl<Site: StatementSite, Q> KeepPrepared<Site, Q> {
    pub(crate) fn new(query: Q) -> Self {
        KeepPrepared(query, PhantomData)
    }
}

impl<Site: StatementSite, Q> QueryId for KeepPrepared<Site, Q> {
    type QueryId = Site;
    const HAS_STATIC_QUERY_ID: bool = true;
}

impl<Site, Q: QueryFragment<DB>, DB: Backend> QueryFragment<DB> for KeepPrepared<Site, Q> {
    fn walk_ast<'b>(&'b self, pass: AstPass<'_, 'b, DB>) -> diesel::QueryResult<()> {
        self.0.walk_ast(pass)
    }

    fn is_safe_to_cache_prepared(&self, _backend: &DB) -> diesel::QueryResult<bool> {
        Ok(true)
    }
}

impl<Site, Q: Query> Query for KeepPrepared<Site, Q> {
    type SqlType = Q::SqlType;
}

impl<Site, Q, C> diesel::RunQueryDsl<C> for KeepPrepared<Site, Q> {}

#[cfg(all(test, feature = "testing"))]
mod tests {
    #![allow(clippy::unwrap_used)] // test code: a panic is a failed assertion

    use super::*;
    use crate::testing::TestDatabase;
    use crate::url::Backend as DatabaseBackend;

    fn plan_cache_mode(conn: &mut DbConnection) -> String {
        let DbConnection::Pg(pg) = conn else {
            unreachable!("a PostgreSQL test")
        };
        diesel::select(diesel::dsl::sql::<diesel::sql_types::Text>(
            "current_setting('plan_cache_mode')",
        ))
        .get_result(pg)
        .unwrap()
    }

    /// Inside, PostgreSQL plans each statement for its values; after, the configured default
    /// is back for the rest of the transaction.
    #[test]
    fn postgres_statements_planned_each_time_get_custom_plans_and_only_they() {
        let database = TestDatabase::create(DatabaseBackend::Postgres);
        let mut conn = establish(database.url()).unwrap();
        begin_write(&mut conn).unwrap();
        assert_eq!(plan_cache_mode(&mut conn), "auto");
        let inside = planned_each_time(&mut conn, |conn| Ok(plan_cache_mode(conn))).unwrap();
        assert_eq!(inside, "force_custom_plan");
        assert_eq!(plan_cache_mode(&mut conn), "auto");
        commit(&mut conn).unwrap();
    }

    /// A statement that fails inside reports its own error, not the aborted transaction's.
    #[test]
    fn postgres_statements_planned_each_time_keep_their_errors() {
        let database = TestDatabase::create(DatabaseBackend::Postgres);
        let mut conn = establish(database.url()).unwrap();
        begin_write(&mut conn).unwrap();
        let error = planned_each_time(&mut conn, |conn| {
            let DbConnection::Pg(pg) = conn else {
                unreachable!("a PostgreSQL test")
            };
            pg.batch_execute("SELECT 1 / 0")
        })
        .unwrap_err();
        assert!(error.to_string().contains("division by zero"), "{error}");
        rollback(&mut conn).unwrap();
    }
}
