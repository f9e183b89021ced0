//! The pooled store: opens the database, applies the embedded migrations, and runs the domain's
//! units of work (`Database::read` and `Database::write`).

use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use diesel::connection::SimpleConnection;
use diesel::r2d2::{Pool, PooledConnection};
use diesel_migrations::{EmbeddedMigrations, MigrationHarness, embed_migrations};
use mercer_domain::kernel::jobs::traces_exported;
use mercer_domain::platform::EventQueueRepository;
use mercer_domain::platform::events::NewInboundEvent;
use mercer_domain::ports::{Database, Repositories};
use mercer_domain::{DomainError, StorageError, Timestamp};

use crate::connection::{self, ConnectionManager, DbConnection};
use crate::migrations::{self, MigrationStatus};
use crate::processes::{self, Heartbeat, Registration, RunningProcess};
use crate::repos::platform::events::EVENTS_PER_INSERT;
use crate::repos::{HeldCounters, StoreTx};
use crate::url::{Backend, DatabaseUrl};

pub(crate) const SQLITE_MIGRATIONS: EmbeddedMigrations =
    embed_migrations!("../../migrations/sqlite");
const POSTGRES_MIGRATIONS: EmbeddedMigrations = embed_migrations!("../../migrations/postgres");

/// Stops a migration run on a database a newer Mercer has migrated.
fn refuse_a_newer_database(
    status: diesel::migration::Result<MigrationStatus>,
) -> Result<MigrationStatus, OpenError> {
    let status = status.map_err(|error| OpenError::Migrate(error.to_string()))?;
    match status.refusal() {
        Some(refusal) => Err(OpenError::NewerDatabase(refusal)),
        None => Ok(status),
    }
}

/// Serialises migration runs of several `mercer` processes starting on one PostgreSQL database.
const MIGRATION_LOCK_KEY: i64 = 0x6d65_7263_6572; // "mercer"

#[derive(Debug, Clone)]
pub struct PoolOptions {
    /// Most connections open at once.
    pub max_connections: u32,
    /// How long a caller waits for a free connection (and a new pool for its first one).
    pub connection_timeout: Duration,
}

impl Default for PoolOptions {
    fn default() -> Self {
        PoolOptions {
            max_connections: 10,
            connection_timeout: Duration::from_secs(5),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("cannot open the database {url}: {reason}")]
    Connect { url: String, reason: String },
    #[error("cannot apply migrations: {0}")]
    Migrate(String),
    /// A newer Mercer has migrated the database: this binary must not touch it.
    #[error("{0}")]
    NewerDatabase(String),
    /// Processes of another schema are running on the database: this binary must not migrate
    /// it under them.
    #[error("{0}")]
    OtherVersionsRunning(String),
}

#[derive(Clone)]
pub struct Store {
    pool: Pool<ConnectionManager>,
    backend: Backend,
    /// SQLite takes one writer at a time; this process's writers queue here for their turn
    /// rather than in SQLite's busy handler, which sleeps in steps of up to 100 ms and lets
    /// whoever tries at the right moment go first (tens of ms of p99 under mixed writes).
    /// Another process on the same file still meets `busy_timeout`.
    sqlite_writers: Arc<WriterTurn>,
}

/// The turn of this process's SQLite writers: one at a time, in the order they asked (a ticket
/// each), the others waiting on a condition variable, at most as long as SQLite's
/// `busy_timeout` would have let them wait (a writer stuck longer gets the same transient error
/// SQLite's busy file gives). In order, so that a writer that writes again at once (an import's
/// next batch) cannot take the turn back before those already waiting, who would otherwise
/// wait out their timeout.
#[derive(Default)]
struct WriterTurn {
    state: Mutex<TurnState>,
    freed: Condvar,
}

#[derive(Default)]
struct TurnState {
    /// Whether a writer holds the turn.
    taken: bool,
    /// The next ticket to hand out.
    next: u64,
    /// The ticket whose holder takes the turn next.
    serving: u64,
    /// Tickets of writers that gave up waiting: skipped when their time comes.
    abandoned: std::collections::BTreeSet<u64>,
}

impl TurnState {
    /// The next ticket's turn, past those given up.
    fn advance(&mut self) {
        self.serving += 1;
        while self.abandoned.remove(&self.serving) {
            self.serving += 1;
        }
    }
}

/// How long a writer waits for its turn: SQLite's `busy_timeout` (connection.rs).
const WRITER_TURN_TIMEOUT: Duration = Duration::from_secs(5);

impl WriterTurn {
    fn take(&self) -> Result<TakenTurn<'_>, StorageError> {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let ticket = state.next;
        state.next += 1;
        let (mut state, _) = self
            .freed
            .wait_timeout_while(state, WRITER_TURN_TIMEOUT, |state| {
                state.taken || state.serving != ticket
            })
            .unwrap_or_else(|e| e.into_inner());
        if state.taken || state.serving != ticket {
            if state.serving == ticket {
                state.advance();
            } else {
                state.abandoned.insert(ticket);
            }
            self.freed.notify_all();
            return Err(StorageError::transient(
                "database is locked: no write turn within 5 s",
            ));
        }
        state.taken = true;
        state.advance();
        Ok(TakenTurn(self))
    }
}

/// A writer's turn, handed to the next when dropped.
struct TakenTurn<'a>(&'a WriterTurn);

impl Drop for TakenTurn<'_> {
    fn drop(&mut self) {
        self.0.state.lock().unwrap_or_else(|e| e.into_inner()).taken = false;
        self.0.freed.notify_all();
    }
}

impl Store {
    /// Opens a pool on the database; fails when no connection can be made.
    pub fn open(url: &DatabaseUrl, options: &PoolOptions) -> Result<Store, OpenError> {
        let pool = Pool::builder()
            .max_size(options.max_connections.max(1))
            // No idle connections kept warm: r2d2 would open them on its own threads at any
            // time, and a process exiting while libpq negotiates TLS on one of them crashes
            // inside OpenSSL's cleanup. Connections are opened when asked for, and reused.
            .min_idle(Some(0))
            // A broken connection is dropped when it is handed back (`has_broken`), so no
            // query per checkout is needed to find it.
            .test_on_check_out(false)
            .connection_timeout(options.connection_timeout)
            .build(ConnectionManager::new(url.clone()))
            .map_err(|error| OpenError::Connect {
                url: url.redacted(),
                reason: error.to_string(),
            })?;
        let store = Store {
            pool,
            backend: url.backend(),
            sqlite_writers: Arc::default(),
        };
        // With no connection opened eagerly, make one now so a bad URL fails here.
        store.ping().map_err(|error| OpenError::Connect {
            url: url.redacted(),
            reason: error.detail,
        })?;
        Ok(store)
    }

    /// Opens the database and brings its schema up to date.
    pub fn open_and_migrate(url: &DatabaseUrl, options: &PoolOptions) -> Result<Store, OpenError> {
        let store = Store::open(url, options)?;
        store.migrate()?;
        Ok(store)
    }

    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// Applies pending migrations; returns the versions applied (empty when up to date).
    /// Refused on a database a newer Mercer migrated, and, when there is something to apply,
    /// while processes of another schema are running on the database.
    pub fn migrate(&self) -> Result<Vec<String>, OpenError> {
        let mut conn = self
            .pool
            .get()
            .map_err(|error| OpenError::Migrate(error.to_string()))?;
        let postgres = matches!(&*conn, DbConnection::Pg(_));
        if postgres {
            let lock = format!("SELECT pg_advisory_lock({MIGRATION_LOCK_KEY})");
            conn.batch_execute(&lock)
                .map_err(|error| OpenError::Migrate(error.to_string()))?;
        }
        let applied = self.migrate_with(&mut conn);
        if postgres {
            let unlock = format!("SELECT pg_advisory_unlock({MIGRATION_LOCK_KEY})");
            let _ = conn.batch_execute(&unlock);
        }
        let applied = applied?;
        drop(conn);
        // Subscriptions stored before the analytics counters were kept are counted once,
        // before anything else writes (a no-op once done).
        mercer_domain::ports::Database::write(self, |tx| {
            mercer_domain::subscriptions::analytics::backfill(tx).map(|_| ())
        })
        .map_err(|error| OpenError::Migrate(format!("analytics backfill: {error}")))?;
        Ok(applied)
    }

    /// The checks and the migration run of [`Store::migrate`], under its lock on PostgreSQL.
    fn migrate_with(&self, conn: &mut DbConnection) -> Result<Vec<String>, OpenError> {
        let status = match &mut *conn {
            DbConnection::Sqlite(c) => migrations::status(c, SQLITE_MIGRATIONS),
            DbConnection::Pg(c) => migrations::status(c, POSTGRES_MIGRATIONS),
        };
        let status = refuse_a_newer_database(status)?;
        let refusal =
            processes::refusal_to_migrate(conn, &status, &self.schema_version(), Timestamp::now())
                .map_err(|error| {
                    OpenError::Migrate(format!("reading the running processes: {error}"))
                })?;
        if let Some(refusal) = refusal {
            return Err(OpenError::OtherVersionsRunning(refusal));
        }
        let applied = match conn {
            DbConnection::Sqlite(c) => c
                .run_pending_migrations(SQLITE_MIGRATIONS)
                .map(|versions| versions.iter().map(ToString::to_string).collect()),
            DbConnection::Pg(c) => c
                .run_pending_migrations(POSTGRES_MIGRATIONS)
                .map(|versions| versions.iter().map(ToString::to_string).collect()),
        };
        applied.map_err(|error| OpenError::Migrate(error.to_string()))
    }

    /// The newest migration this binary knows, by its version: the schema it works with.
    pub fn schema_version(&self) -> String {
        match self.backend {
            Backend::Sqlite => migrations::newest::<diesel::sqlite::Sqlite>(SQLITE_MIGRATIONS),
            Backend::Postgres => migrations::newest::<diesel::pg::Pg>(POSTGRES_MIGRATIONS),
        }
    }

    /// Registers this process as running on the database, with the heartbeat it promises.
    pub fn register_process(
        &self,
        heartbeat: Duration,
        now: Timestamp,
    ) -> Result<Registration, StorageError> {
        let row = RunningProcess::new(self.schema_version(), heartbeat, now);
        self.write_connection(|conn| processes::insert(conn, &row))?;
        Ok(Registration::from_row(row))
    }

    /// A heartbeat: whether a newer Mercer migrated the database (then the process must stop,
    /// and its row is left for it to remove), else its row refreshed and the rows of dead
    /// processes deleted.
    pub fn heartbeat(
        &self,
        registration: &Registration,
        now: Timestamp,
    ) -> Result<Heartbeat, StorageError> {
        let status = self
            .migration_status()
            .map_err(|error| StorageError::other(error.to_string()))?;
        if let Some(refusal) = status.refusal() {
            return Ok(Heartbeat::NewerDatabase(refusal));
        }
        self.write_connection(|conn| {
            processes::refresh(conn, registration, now)?;
            processes::live(conn, now).map(|_| ())
        })?;
        Ok(Heartbeat::Serving)
    }

    /// Removes this process's row: it stops.
    pub fn unregister_process(&self, registration: &Registration) -> Result<(), StorageError> {
        self.write_connection(|conn| processes::remove(conn, registration.id()))
    }

    /// The processes alive on the database by `now`, oldest first (the rows of dead ones are
    /// deleted).
    pub fn running_processes(&self, now: Timestamp) -> Result<Vec<RunningProcess>, StorageError> {
        self.write_connection(|conn| processes::live(conn, now))
    }

    /// Statements on a connection of their own, in a write transaction (on SQLite in this
    /// process's writer turn).
    fn write_connection<T>(
        &self,
        work: impl FnOnce(&mut DbConnection) -> diesel::QueryResult<T>,
    ) -> Result<T, StorageError> {
        let mut conn = self.connection()?;
        let _turn = match self.backend {
            Backend::Sqlite => Some(self.sqlite_writers.take()?),
            Backend::Postgres => None,
        };
        connection::begin_write(&mut conn).map_err(storage_error)?;
        match work(&mut conn) {
            Ok(value) => {
                connection::commit(&mut conn).map_err(storage_error)?;
                Ok(value)
            }
            Err(error) => {
                if let Err(rollback) = connection::rollback(&mut conn) {
                    log::warn!("rollback failed: {rollback}");
                }
                Err(storage_error(error))
            }
        }
    }

    /// How the database's schema stands against this binary's migrations, changing nothing
    /// but diesel's bookkeeping table, made on an empty database.
    pub fn migration_status(&self) -> Result<MigrationStatus, OpenError> {
        let mut conn = self
            .pool
            .get()
            .map_err(|error| OpenError::Migrate(error.to_string()))?;
        let status = match &mut *conn {
            DbConnection::Sqlite(c) => migrations::status(c, SQLITE_MIGRATIONS),
            DbConnection::Pg(c) => migrations::status(c, POSTGRES_MIGRATIONS),
        };
        status.map_err(|error| OpenError::Migrate(error.to_string()))
    }

    /// Whether the database answers a query now.
    pub fn ping(&self) -> Result<(), StorageError> {
        let mut conn = self.connection()?;
        conn.batch_execute("SELECT 1").map_err(storage_error)
    }

    /// Stores events in the inbound queue, all of them or none. On PostgreSQL a batch that
    /// fits in one INSERT runs as that single statement, atomic by itself, without BEGIN and
    /// COMMIT: two round trips fewer on the ingest path, whose writer answers every waiting
    /// request only after this returns. Larger batches, and SQLite (a statement per row), run
    /// in a transaction.
    pub fn queue_inbound_events(&self, events: &[NewInboundEvent]) -> Result<(), DomainError> {
        if self.backend == Backend::Postgres && events.len() <= EVENTS_PER_INSERT {
            let mut conn = self.connection()?;
            return Ok(StoreTx::new(&mut conn).insert_inbound_events(events)?);
        }
        self.write(|tx| Ok(tx.insert_inbound_events(events)?))
    }

    /// SQLite: copies the pages the WAL holds back into the database file (PASSIVE: it neither
    /// waits for nor blocks readers and the writer, only for a pool connection), so the
    /// committing writer has little left to copy when the WAL reaches its checkpoint size.
    /// PostgreSQL checkpoints by itself: nothing to do.
    pub fn checkpoint(&self) -> Result<(), StorageError> {
        if self.backend != Backend::Sqlite {
            return Ok(());
        }
        let mut conn = self.connection()?;
        conn.batch_execute("PRAGMA wal_checkpoint(PASSIVE)")
            .map_err(storage_error)
    }

    pub(crate) fn connection(&self) -> Result<PooledConnection<ConnectionManager>, StorageError> {
        self.pool
            .get()
            .map_err(|error| StorageError::transient(format!("no database connection: {error}")))
    }
}

/// Text from outside (a receiver's answer, a remote party's error) as a text column can hold
/// it: a NUL, which PostgreSQL refuses in text, becomes U+FFFD. What clients send is held to
/// `mercer_domain::kernel::limits` at the door; this is for what remote parties answer, which no one
/// checked.
pub(crate) fn storable(text: &str) -> std::borrow::Cow<'_, str> {
    if text.contains('\0') {
        std::borrow::Cow::Owned(text.replace('\0', "\u{FFFD}"))
    } else {
        std::borrow::Cow::Borrowed(text)
    }
}

pub(crate) fn storage_error(error: diesel::result::Error) -> StorageError {
    use diesel::result::{DatabaseErrorKind, Error};
    let kept = match &error {
        Error::DatabaseError(DatabaseErrorKind::UniqueViolation, _) => {
            StorageError::unique_violation(error.to_string())
        }
        Error::DatabaseError(
            DatabaseErrorKind::SerializationFailure
            | DatabaseErrorKind::ClosedConnection
            | DatabaseErrorKind::UnableToSendCommand,
            _,
        ) => StorageError::transient(error.to_string()),
        // Reported without a kind of their own: PostgreSQL's deadlock (40P01), statement
        // timeout and a server shutting down or restarting under its connections; SQLite's
        // busy file.
        Error::DatabaseError(_, info)
            if [
                "deadlock detected",
                "statement timeout",
                "terminating connection",
                "server closed the connection",
                "the database system is",
                "database is locked",
            ]
            .iter()
            .any(|needle| info.message().contains(needle)) =>
        {
            StorageError::transient(error.to_string())
        }
        // SQLite's SQLITE_FULL (a full disk or max_page_count), PostgreSQL's disk_full (53100)
        // and a WAL or file it could not extend.
        Error::DatabaseError(_, info)
            if [
                "database or disk is full",
                "No space left on device",
                "could not extend file",
            ]
            .iter()
            .any(|needle| info.message().contains(needle)) =>
        {
            StorageError::full(error.to_string())
        }
        _ => StorageError::other(error.to_string()),
    };
    kept.caused_by(error)
}

/// The span of one unit of work (`transaction`: a read, a write, a batch of writes), a child of
/// the span it runs in (a request's, a job's), made only when traces are exported
/// (`serve --otlp-endpoint`): otherwise the check costs one load. Work outside any span (a
/// worker's poll) makes none either.
fn unit_of_work_span(kind: &'static str, backend: Backend) -> tracing::Span {
    if !traces_exported() || tracing::Span::current().is_none() {
        return tracing::Span::none();
    }
    let system = match backend {
        Backend::Sqlite => "sqlite",
        Backend::Postgres => "postgresql",
    };
    tracing::debug_span!(target: "mercer::store", "transaction", kind, db.system = system)
}

impl Database for Store {
    fn read<T>(
        &self,
        work: impl FnOnce(&mut dyn Repositories) -> Result<T, DomainError>,
    ) -> Result<T, DomainError> {
        let _span = unit_of_work_span("read", self.backend).entered();
        let mut conn = self.connection()?;
        work(&mut StoreTx::new(&mut conn))
    }

    fn write<T>(
        &self,
        work: impl FnOnce(&mut dyn Repositories) -> Result<T, DomainError>,
    ) -> Result<T, DomainError> {
        let _span = unit_of_work_span("write", self.backend).entered();
        // The connection first: a writer holding the turn never waits for the pool.
        let mut conn = self.connection()?;
        let _turn = match self.backend {
            Backend::Sqlite => Some(self.sqlite_writers.take()?),
            Backend::Postgres => None,
        };
        connection::begin_write(&mut conn).map_err(storage_error)?;
        // PostgreSQL: counter additions are written last (see `HeldCounters`). SQLite has one
        // writer at a time, which nothing waits behind.
        let mut held = HeldCounters::default();
        let done = match self.backend {
            Backend::Postgres => work(&mut StoreTx::holding_counters(&mut conn, &mut held))
                .and_then(|value| Ok(held.write(&mut conn).map(|()| value)?)),
            Backend::Sqlite => work(&mut StoreTx::new(&mut conn)),
        };
        match done {
            Ok(value) => {
                connection::commit(&mut conn).map_err(storage_error)?;
                Ok(value)
            }
            Err(error) => {
                if let Err(rollback) = connection::rollback(&mut conn) {
                    log::warn!("rollback failed: {rollback}");
                }
                Err(error)
            }
        }
    }

    /// One transaction for all the items, each in a savepoint: an item's failure rolls back to
    /// its savepoint, a storage failure rolls back the whole transaction. One commit (on
    /// PostgreSQL one WAL flush, on SQLite one write of the pages touched) instead of one per
    /// item. On SQLite the other writers wait for the whole call, so callers keep it short.
    /// On PostgreSQL the connection's cached plans are dropped first (`DISCARD PLANS`), so each
    /// statement is planned again once for the tables as they are now: a bulk write grows its
    /// tables from nothing while it runs, and generic plans settled on while they were empty
    /// scanned whole tables (an import of 100,000 subscriptions slowed to tens of rows a
    /// second). Planning every statement instead (`force_custom_plan`, used before) took half of
    /// PostgreSQL's time on an imported row (docs/benchmarks.md).
    fn write_each<I, T>(
        &self,
        items: &[I],
        mut work: impl FnMut(&mut dyn Repositories, &I) -> Result<T, DomainError>,
    ) -> Result<Vec<Result<T, DomainError>>, DomainError> {
        let _span = unit_of_work_span("write_each", self.backend).entered();
        let mut conn = self.connection()?;
        let _turn = match self.backend {
            Backend::Sqlite => Some(self.sqlite_writers.take()?),
            Backend::Postgres => None,
        };
        connection::begin_write(&mut conn).map_err(storage_error)?;
        let planned = match &mut *conn {
            DbConnection::Pg(pg) => pg.batch_execute("DISCARD PLANS"),
            DbConnection::Sqlite(_) => Ok(()),
        };
        if let Err(error) = planned {
            if let Err(rollback) = connection::rollback(&mut conn) {
                log::warn!("rollback failed: {rollback}");
            }
            return Err(storage_error(error).into());
        }
        match each_in_savepoint(&mut conn, items, &mut work) {
            Ok(outcomes) => {
                connection::commit(&mut conn).map_err(storage_error)?;
                Ok(outcomes)
            }
            Err(error) => {
                if let Err(rollback) = connection::rollback(&mut conn) {
                    log::warn!("rollback failed: {rollback}");
                }
                Err(error)
            }
        }
    }

    fn write_statement<T>(
        &self,
        work: impl FnOnce(&mut dyn Repositories) -> Result<T, DomainError>,
    ) -> Result<T, DomainError> {
        match self.backend {
            // SQLite's writers take turns, which `write` arranges; a transaction costs it no
            // round trip.
            Backend::Sqlite => self.write(work),
            Backend::Postgres => {
                let _span = unit_of_work_span("statement", self.backend).entered();
                let mut conn = self.connection()?;
                work(&mut StoreTx::new(&mut conn))
            }
        }
    }
}

/// `work` on each item inside a savepoint of the open transaction: released when the item's
/// work succeeds, rolled back to when it fails. A storage failure (or a savepoint that cannot be
/// made or ended) leaves the savepoint rolled back and ends the loop with that error.
#[allow(clippy::type_complexity)]
fn each_in_savepoint<I, T>(
    conn: &mut DbConnection,
    items: &[I],
    work: &mut impl FnMut(&mut dyn Repositories, &I) -> Result<T, DomainError>,
) -> Result<Vec<Result<T, DomainError>>, DomainError> {
    let mut outcomes = Vec::with_capacity(items.len());
    for item in items {
        connection::savepoint(conn).map_err(storage_error)?;
        let outcome = work(&mut StoreTx::new(conn), item);
        let ended = match &outcome {
            Ok(_) => connection::commit(conn),
            Err(_) => connection::rollback(conn),
        };
        match (outcome, ended) {
            (Err(DomainError::Storage(error)), _) => return Err(DomainError::Storage(error)),
            (_, Err(error)) => return Err(storage_error(error).into()),
            (outcome, Ok(())) => outcomes.push(outcome),
        }
    }
    Ok(outcomes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use diesel::result::{DatabaseErrorKind, Error};

    fn database_error(kind: DatabaseErrorKind, message: &str) -> Error {
        Error::DatabaseError(kind, Box::new(message.to_string()))
    }

    #[test]
    fn sqlite_writers_take_turns() {
        use std::sync::atomic::{AtomicBool, Ordering};
        let turn = Arc::new(WriterTurn::default());
        let released = Arc::new(AtomicBool::new(false));
        let first = turn.take().unwrap();
        let waiter = {
            let (turn, released) = (turn.clone(), released.clone());
            std::thread::spawn(move || {
                let _second = turn.take().unwrap();
                released.load(Ordering::SeqCst)
            })
        };
        std::thread::sleep(Duration::from_millis(50));
        released.store(true, Ordering::SeqCst);
        drop(first);
        assert!(
            waiter.join().unwrap(),
            "the second writer got its turn only after the first gave it back"
        );
        drop(turn.take().unwrap());
    }

    /// A writer that gives the turn back and asks again at once waits behind one already
    /// waiting, rather than taking it back first.
    #[test]
    fn sqlite_writers_take_turns_in_the_order_they_asked() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let turn = Arc::new(WriterTurn::default());
        let order = Arc::new(AtomicUsize::new(0));
        let first = turn.take().unwrap();
        let waiter = {
            let (turn, order) = (turn.clone(), order.clone());
            std::thread::spawn(move || {
                let _second = turn.take().unwrap();
                order.fetch_add(1, Ordering::SeqCst)
            })
        };
        // The waiter has its ticket once `next` moved past the first's.
        while turn.state.lock().unwrap().next < 2 {
            std::thread::sleep(Duration::from_millis(1));
        }
        drop(first);
        let again = turn.take().unwrap();
        let came_after = order.fetch_add(1, Ordering::SeqCst);
        drop(again);
        assert_eq!(waiter.join().unwrap(), 0, "the waiter went first");
        assert_eq!(came_after, 1);
    }

    /// The tickets of writers that gave up waiting are skipped when their time comes.
    #[test]
    fn a_writer_that_gave_up_is_skipped() {
        let mut state = TurnState {
            next: 5,
            abandoned: [1, 2, 4].into(),
            ..TurnState::default()
        };
        state.advance();
        assert_eq!(state.serving, 3);
        state.advance();
        assert_eq!((state.serving, state.abandoned.len()), (5, 0));
    }

    #[test]
    fn errors_worth_trying_again_are_told_apart() {
        for error in [
            database_error(
                DatabaseErrorKind::SerializationFailure,
                "could not serialize",
            ),
            database_error(
                DatabaseErrorKind::ClosedConnection,
                "server closed the connection",
            ),
            database_error(DatabaseErrorKind::Unknown, "deadlock detected"),
            database_error(DatabaseErrorKind::Unknown, "database is locked"),
            database_error(
                DatabaseErrorKind::Unknown,
                "terminating connection due to administrator command",
            ),
            database_error(
                DatabaseErrorKind::Unknown,
                "the database system is shutting down",
            ),
        ] {
            assert!(storage_error(error).is_transient());
        }
        for message in [
            "database or disk is full",
            "could not extend file \"base/16384/2619\": No space left on device",
        ] {
            let full = storage_error(database_error(DatabaseErrorKind::Unknown, message));
            assert!(full.is_full() && !full.is_transient(), "{message}");
        }
        let unique = storage_error(database_error(DatabaseErrorKind::UniqueViolation, "dup"));
        let cause = std::error::Error::source(&unique).map(ToString::to_string);
        assert_eq!(
            cause.as_deref(),
            Some("dup"),
            "the database's error is kept as the source"
        );
        assert!(unique.is_unique_violation() && !unique.is_transient());
        let other = storage_error(database_error(
            DatabaseErrorKind::Unknown,
            "invalid byte sequence for encoding \"UTF8\": 0x00",
        ));
        assert!(!other.is_transient());
    }
}
