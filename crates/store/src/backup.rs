//! Backups and restores of a SQLite database (`mercer backup`, `mercer restore`), and the lock
//! file that keeps a restore from replacing a database a server is running on.
//!
//! A backup copies the database with SQLite's online backup API while Mercer may be running and
//! writing. The copy is one read transaction: every page comes from the same snapshot, the one
//! taken when the backup began, so the backup is consistent however long it takes and never
//! starts over because a writer committed meanwhile. In WAL mode (Mercer's, see connection.rs)
//! a reader never blocks the writer; the steps and pauses only spread the copy's reads out, so
//! the server's own reads keep the disk. While the snapshot is held, the server's checkpoints
//! cannot pass it and the `-wal` file grows: it shrinks again after the backup.
//!
//! Both commands write to a file of their own beside the target and rename it into place at the
//! end, so a half-written file is never left under the final name.
//!
//! PostgreSQL has its own tools (pg_dump, pg_restore): both commands refuse it, saying so.

use std::fs::{self, File, OpenOptions, TryLockError};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use diesel::connection::SimpleConnection;
use diesel::prelude::*;
use diesel::sql_types::{BigInt, Text};
use diesel::{QueryableByName, SqliteConnection};
use rusqlite::backup::{Backup, StepResult};
use rusqlite::{Connection as RawSqlite, OpenFlags};

use crate::migrations;
use crate::store::SQLITE_MIGRATIONS;
use crate::url::DatabaseUrl;

/// Where the documentation of backups is, for the messages that send operators there.
const DOCS: &str = "docs/operations.md, \"Backups and restores\"";

/// How long a step may keep finding the source busy before the backup gives up.
const BUSY_LIMIT: Duration = Duration::from_secs(30);

/// Why a backup or a restore did not happen.
#[derive(Debug, thiserror::Error)]
pub enum BackupError {
    /// The operator asked for something refused (nothing was changed): the message says why
    /// and what to do instead.
    #[error("{0}")]
    Refused(String),
    /// Reading or writing a file failed.
    #[error("{context}: {source}")]
    Io {
        context: String,
        source: std::io::Error,
    },
    /// SQLite failed.
    #[error("{context}: {message}")]
    Sqlite { context: String, message: String },
}

fn io(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> BackupError {
    let context = context.into();
    move |source| BackupError::Io { context, source }
}

fn sqlite<E: std::fmt::Display>(context: impl Into<String>) -> impl FnOnce(E) -> BackupError {
    let context = context.into();
    move |error| BackupError::Sqlite {
        context,
        message: error.to_string(),
    }
}

/// How `mercer backup` copies.
#[derive(Debug, Clone)]
pub struct BackupOptions {
    /// Pages copied at each step (at least 1).
    pub pages_per_step: u32,
    /// The pause between two steps.
    pub pause: Duration,
    /// Replace the target file if it exists.
    pub replace: bool,
}

impl Default for BackupOptions {
    fn default() -> Self {
        BackupOptions {
            pages_per_step: 1024,
            pause: Duration::from_millis(10),
            replace: false,
        }
    }
}

/// What a backup copied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackupReport {
    /// The backup file.
    pub path: PathBuf,
    /// Pages copied, and their size in bytes.
    pub pages: u64,
    pub page_size: u64,
    /// The backup file's size.
    pub bytes: u64,
    /// Steps the copy took.
    pub steps: u64,
    pub elapsed: Duration,
}

/// Copies the SQLite database of `url` into the file `to`, consistent as of the moment it
/// begins, while other processes may read and write the database. Refused on PostgreSQL, when
/// the database does not exist, and when `to` exists unless `options.replace`.
pub fn backup(
    url: &DatabaseUrl,
    to: &Path,
    options: &BackupOptions,
) -> Result<BackupReport, BackupError> {
    let source = sqlite_file(url, "mercer backup", "back up", POSTGRES_BACKUP)?;
    if !source.is_file() {
        return Err(BackupError::Refused(format!(
            "there is no database at {}: nothing to back up",
            url.redacted()
        )));
    }
    refuse_to_replace(to, &source, options.replace)?;
    let partial = beside(to, "partial")?;
    let started = Instant::now();
    let copied = copy_online(&source, &partial, options).and_then(|copied| {
        // Checked again: another backup may have finished meanwhile.
        refuse_to_replace(to, &source, options.replace)?;
        put_in_place(&partial, to)?;
        Ok(copied)
    });
    let (pages, page_size, steps) = match copied {
        Ok(copied) => copied,
        Err(error) => {
            remove_with_sidecars(&partial);
            return Err(error);
        }
    };
    let bytes = fs::metadata(to)
        .map_err(io(format!("cannot read {}", to.display())))?
        .len();
    Ok(BackupReport {
        path: to.to_path_buf(),
        pages,
        page_size,
        bytes,
        steps,
        elapsed: started.elapsed(),
    })
}

const POSTGRES_BACKUP: &str = "back up PostgreSQL with pg_dump \
    (pg_dump --format=custom --file mercer.dump DBNAME)";
const POSTGRES_RESTORE: &str = "restore PostgreSQL with pg_restore \
    (pg_restore --clean --if-exists --no-owner --dbname DBNAME mercer.dump)";

/// The file of a SQLite URL; PostgreSQL is refused with `postgres`, what to use instead.
fn sqlite_file(
    url: &DatabaseUrl,
    command: &str,
    verb: &str,
    postgres: &str,
) -> Result<PathBuf, BackupError> {
    match url {
        DatabaseUrl::Sqlite { path } => Ok(PathBuf::from(path)),
        DatabaseUrl::Postgres { .. } => Err(BackupError::Refused(format!(
            "{command} can only {verb} a SQLite database, and {} is PostgreSQL: {postgres}, \
             as {DOCS} describes",
            url.redacted()
        ))),
    }
}

/// Refuses a backup over the database itself, over a folder, or over a file without `replace`.
fn refuse_to_replace(to: &Path, source: &Path, replace: bool) -> Result<(), BackupError> {
    if !to.exists() {
        return Ok(());
    }
    if same_file(to, source) {
        return Err(BackupError::Refused(format!(
            "{} is the database itself: give the backup another name",
            to.display()
        )));
    }
    if to.is_dir() {
        return Err(BackupError::Refused(format!(
            "{} is a folder: give a file name",
            to.display()
        )));
    }
    if !replace {
        return Err(BackupError::Refused(format!(
            "{} exists: give --force to replace it",
            to.display()
        )));
    }
    Ok(())
}

fn same_file(a: &Path, b: &Path) -> bool {
    matches!((a.canonicalize(), b.canonicalize()), (Ok(a), Ok(b)) if a == b)
}

/// A file of this process's beside `target`, in the same folder so that a rename puts it in
/// place: `mercer.db.partial-1234`.
fn beside(target: &Path, what: &str) -> Result<PathBuf, BackupError> {
    let name = target
        .file_name()
        .ok_or_else(|| BackupError::Refused(format!("{} names no file", target.display())))?;
    let mut name = name.to_os_string();
    name.push(format!(".{what}-{}", std::process::id()));
    Ok(target.with_file_name(name))
}

/// SQLite's files beside a database: its WAL, the WAL's index, and a rollback journal.
fn sidecars(database: &Path) -> [PathBuf; 3] {
    ["-wal", "-shm", "-journal"].map(|suffix| {
        let mut name = database.as_os_str().to_os_string();
        name.push(suffix);
        PathBuf::from(name)
    })
}

/// Removes a file this process made, and SQLite's files beside it, ignoring what is not there.
fn remove_with_sidecars(path: &Path) {
    let _ = fs::remove_file(path);
    for sidecar in sidecars(path) {
        let _ = fs::remove_file(sidecar);
    }
}

/// Copies the database at `source` into the new file `partial` in steps of
/// `options.pages_per_step` pages, pausing between them; answers the pages, their size and the
/// steps taken.
fn copy_online(
    source: &Path,
    partial: &Path,
    options: &BackupOptions,
) -> Result<(u64, u64, u64), BackupError> {
    let what = source.display().to_string();
    // Read-only: the backup never writes the database it copies.
    let from = RawSqlite::open_with_flags(
        source,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(sqlite(format!("cannot open {what}")))?;
    from.busy_timeout(Duration::from_secs(5))
        .map_err(sqlite(format!("cannot open {what}")))?;
    // One read transaction for the whole copy: the backup reads the snapshot it begins with
    // (its reading the schema here takes it), rather than starting over each time another
    // process commits.
    from.execute_batch("BEGIN")
        .map_err(sqlite(format!("cannot read {what}")))?;
    from.query_row("SELECT count(*) FROM sqlite_schema", [], |row| {
        row.get::<_, i64>(0)
    })
    .map_err(sqlite(format!("cannot read {what}")))?;
    let page_size: i64 = from
        .query_row("PRAGMA page_size", [], |row| row.get(0))
        .map_err(sqlite(format!("cannot read {what}")))?;
    let _ = fs::remove_file(partial);
    let mut to = RawSqlite::open_with_flags(
        partial,
        OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(sqlite(format!("cannot create {}", partial.display())))?;
    let (pages, steps) = {
        let backup = Backup::new(&from, &mut to).map_err(sqlite(format!("cannot copy {what}")))?;
        let pages_per_step = i32::try_from(options.pages_per_step.max(1)).unwrap_or(i32::MAX);
        let (mut steps, mut busy_since) = (0u64, None::<Instant>);
        loop {
            let step = backup
                .step(pages_per_step)
                .map_err(sqlite(format!("cannot copy {what}")))?;
            match step {
                StepResult::Done => {
                    steps += 1;
                    break;
                }
                StepResult::More => {
                    steps += 1;
                    busy_since = None;
                    std::thread::sleep(options.pause);
                }
                // Another connection holds a lock the step needs (not in WAL mode): wait.
                _ => {
                    let since = *busy_since.get_or_insert_with(Instant::now);
                    if since.elapsed() > BUSY_LIMIT {
                        return Err(BackupError::Sqlite {
                            context: format!("cannot copy {what}"),
                            message: "the database stayed locked for 30 s".into(),
                        });
                    }
                    std::thread::sleep(options.pause.max(Duration::from_millis(10)));
                }
            }
        }
        (backup.progress().pagecount, steps)
    };
    to.close()
        .map_err(|(_, error)| sqlite(format!("cannot write {}", partial.display()))(error))?;
    // Ends the read transaction: nothing was written.
    drop(from);
    Ok((
        u64::try_from(pages).unwrap_or_default(),
        u64::try_from(page_size).unwrap_or_default(),
        steps,
    ))
}

/// Makes `partial` durable and renames it to `target`, replacing what is there.
fn put_in_place(partial: &Path, target: &Path) -> Result<(), BackupError> {
    File::open(partial)
        .and_then(|file| file.sync_all())
        .map_err(io(format!("cannot write {}", partial.display())))?;
    fs::rename(partial, target).map_err(io(format!(
        "cannot rename {} to {}",
        partial.display(),
        target.display()
    )))?;
    // The rename itself is durable once the folder is; not every system can sync a folder.
    if let Some(folder) = target.parent() {
        let folder = if folder.as_os_str().is_empty() {
            Path::new(".")
        } else {
            folder
        };
        let _ = File::open(folder).and_then(|folder| folder.sync_all());
    }
    Ok(())
}

/// How `mercer restore` replaces.
#[derive(Debug, Clone, Default)]
pub struct RestoreOptions {
    /// Replace the database if it exists (`--yes`).
    pub replace: bool,
}

/// What a restore did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RestoreReport {
    /// The backup's size.
    pub bytes: u64,
    /// Whether a database was there and was replaced.
    pub replaced: bool,
    /// Migrations of this binary the backup has not had: applied when Mercer next starts.
    pub pending: Vec<String>,
}

/// Puts the backup `from` in place as the SQLite database of `url`, once it is checked: it must
/// be a SQLite database whose integrity check passes, made by Mercer (it has Mercer's table of
/// applied migrations), and not by a newer Mercer than this one. Refused on PostgreSQL, while a
/// server runs on the database (it holds [`DatabaseLock::shared`]), and when the database exists
/// unless `options.replace`.
pub fn restore(
    url: &DatabaseUrl,
    from: &Path,
    options: &RestoreOptions,
) -> Result<RestoreReport, BackupError> {
    let target = sqlite_file(url, "mercer restore", "restore", POSTGRES_RESTORE)?;
    if !from.is_file() {
        return Err(BackupError::Refused(format!(
            "there is no backup file at {}",
            from.display()
        )));
    }
    if same_file(from, &target) {
        return Err(BackupError::Refused(format!(
            "{} is the database itself, not a backup of it",
            from.display()
        )));
    }
    let [from_wal, ..] = sidecars(from);
    if fs::metadata(&from_wal).is_ok_and(|wal| wal.len() > 0) {
        return Err(BackupError::Refused(format!(
            "{} has a write-ahead log beside it ({}): it is a database in use, or one not closed \
             cleanly, and the file alone may miss its last writes; make backups with mercer \
             backup",
            from.display(),
            from_wal.display()
        )));
    }
    // Held to the end: a server cannot start on the database while it is being replaced.
    let _lock = DatabaseLock::exclusive(url, &target)?;
    let replaced = target.exists();
    if replaced && !options.replace {
        return Err(BackupError::Refused(format!(
            "{} exists: give --yes to replace it with the backup (what it holds now is lost)",
            url.redacted()
        )));
    }
    let partial = beside(&target, "restoring")?;
    let _ = fs::remove_file(&partial);
    let restored = fs::copy(from, &partial)
        .map_err(io(format!(
            "cannot copy {} to {}",
            from.display(),
            partial.display()
        )))
        .and_then(|bytes| {
            // The copy is checked, not the backup: what is checked is what is put in place,
            // and the backup file is never opened by SQLite (which could write beside it).
            let pending = check_backup(&partial, from)?;
            // The old database's WAL and its index would be read as the new one's: they go
            // first. A crash before the rename leaves the old database as of its last
            // checkpoint, consistent.
            for sidecar in sidecars(&target) {
                match fs::remove_file(&sidecar) {
                    Err(error) if error.kind() != std::io::ErrorKind::NotFound => {
                        return Err(io(format!("cannot remove {}", sidecar.display()))(error));
                    }
                    _ => {}
                }
            }
            put_in_place(&partial, &target)?;
            Ok((bytes, pending))
        });
    match restored {
        Ok((bytes, pending)) => Ok(RestoreReport {
            bytes,
            replaced,
            pending,
        }),
        Err(error) => {
            remove_with_sidecars(&partial);
            Err(error)
        }
    }
}

#[derive(QueryableByName)]
struct IntegrityLine {
    #[diesel(sql_type = Text)]
    integrity_check: String,
}

#[derive(QueryableByName)]
struct Count {
    #[diesel(sql_type = BigInt)]
    n: i64,
}

/// Checks the copy at `copy` of the backup `from` (named in messages); answers the migrations
/// it has yet to have.
fn check_backup(copy: &Path, from: &Path) -> Result<Vec<String>, BackupError> {
    let name = from.display();
    let unreadable = |error: diesel::result::Error| {
        let text = error.to_string();
        if text.contains("not a database") {
            BackupError::Refused(format!("{name} is not a SQLite database"))
        } else {
            BackupError::Refused(format!(
                "{name} cannot be read as a SQLite database: {text}"
            ))
        }
    };
    let path = copy.to_string_lossy();
    let mut conn = SqliteConnection::establish(&path)
        .map_err(sqlite(format!("cannot open {}", copy.display())))?;
    conn.batch_execute("PRAGMA busy_timeout = 5000")
        .map_err(unreadable)?;
    let lines: Vec<IntegrityLine> = diesel::sql_query("PRAGMA integrity_check")
        .load(&mut conn)
        .map_err(unreadable)?;
    if lines.first().map(|line| line.integrity_check.as_str()) != Some("ok") {
        let found: Vec<&str> = lines
            .iter()
            .take(5)
            .map(|line| line.integrity_check.as_str())
            .collect();
        return Err(BackupError::Refused(format!(
            "{name} is damaged: SQLite's integrity check says: {}",
            found.join("; ")
        )));
    }
    let migrations_table: Vec<Count> = diesel::sql_query(
        "SELECT count(*) AS n FROM sqlite_schema \
         WHERE type = 'table' AND name = '__diesel_schema_migrations'",
    )
    .load(&mut conn)
    .map_err(unreadable)?;
    if migrations_table.first().is_none_or(|count| count.n == 0) {
        return Err(BackupError::Refused(format!(
            "{name} is a SQLite database, but not Mercer's: it has no table of applied migrations"
        )));
    }
    let status = migrations::status(&mut conn, SQLITE_MIGRATIONS)
        .map_err(sqlite(format!("cannot read the migrations of {name}")))?;
    if !status.unknown.is_empty() {
        return Err(BackupError::Refused(format!(
            "{name} was made by a newer Mercer (migrations {} are not in this version, {}): \
             restore it with that version or a newer one",
            status.unknown.join(", "),
            env!("CARGO_PKG_VERSION"),
        )));
    }
    // The processes registered when the backup was made are not running on the restored
    // database; left in, they would hold back the next migration until they went stale.
    let processes_table: Vec<Count> = diesel::sql_query(
        "SELECT count(*) AS n FROM sqlite_schema WHERE type = 'table' AND name = 'processes'",
    )
    .load(&mut conn)
    .map_err(unreadable)?;
    if processes_table.first().is_some_and(|count| count.n > 0) {
        conn.batch_execute("DELETE FROM processes")
            .map_err(sqlite(format!(
                "cannot clear the processes recorded in {name}"
            )))?;
    }
    drop(conn);
    // Closed cleanly, SQLite removed its WAL and index; anything left is stale.
    for sidecar in sidecars(copy) {
        let _ = fs::remove_file(sidecar);
    }
    Ok(status.pending)
}

/// A lock on the file `<database>.lock` beside a SQLite database: `mercer serve` holds it shared
/// while it runs, `mercer restore` exclusively while it replaces the database. The operating
/// system drops it when its process ends, however it ends. The file stays (an empty file): it
/// must not be removed while a server runs, or a restore could no longer see that one does.
#[derive(Debug)]
pub struct DatabaseLock {
    _file: File,
}

impl DatabaseLock {
    /// The lock file of a SQLite database.
    pub fn path_of(database: &Path) -> PathBuf {
        let mut name = database.as_os_str().to_os_string();
        name.push(".lock");
        PathBuf::from(name)
    }

    /// Taken by a server for as long as it runs on `url`; none on PostgreSQL. Refused while a
    /// restore is replacing the database.
    pub fn shared(url: &DatabaseUrl) -> Result<Option<DatabaseLock>, BackupError> {
        let DatabaseUrl::Sqlite { path } = url else {
            return Ok(None);
        };
        let path = Self::path_of(Path::new(path));
        let file = Self::open(&path)?;
        match file.try_lock_shared() {
            Ok(()) => Ok(Some(DatabaseLock { _file: file })),
            Err(TryLockError::WouldBlock) => Err(BackupError::Refused(format!(
                "a restore is replacing {} (it holds {}): start Mercer again once it has finished",
                url.redacted(),
                path.display()
            ))),
            Err(TryLockError::Error(error)) => {
                Err(io(format!("cannot lock {}", path.display()))(error))
            }
        }
    }

    /// Taken by a restore; refused while any process holds the lock shared.
    fn exclusive(url: &DatabaseUrl, database: &Path) -> Result<DatabaseLock, BackupError> {
        let path = Self::path_of(database);
        let file = Self::open(&path)?;
        match file.try_lock() {
            Ok(()) => Ok(DatabaseLock { _file: file }),
            Err(TryLockError::WouldBlock) => Err(BackupError::Refused(format!(
                "a Mercer server is running on {} (it holds {}), or another restore is: stop \
                 it, then restore",
                url.redacted(),
                path.display()
            ))),
            Err(TryLockError::Error(error)) => {
                Err(io(format!("cannot lock {}", path.display()))(error))
            }
        }
    }

    /// Read-only when it exists (a lock needs no more, and another user may have made it),
    /// made otherwise.
    fn open(path: &Path) -> Result<File, BackupError> {
        let opened = match File::open(path) {
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .open(path),
            opened => opened,
        };
        opened.map_err(io(format!("cannot open the lock file {}", path.display())))
    }
}

#[cfg(all(test, feature = "testing"))]
mod tests {
    #![allow(clippy::unwrap_used)] // test code: a panic is a failed assertion

    use super::*;
    use crate::testing::TestDatabase;
    use crate::url::Backend;

    fn sqlite_url(path: &Path) -> DatabaseUrl {
        DatabaseUrl::Sqlite {
            path: path.to_string_lossy().into_owned(),
        }
    }

    fn file_of(database: &TestDatabase) -> PathBuf {
        match database.url() {
            DatabaseUrl::Sqlite { path } => PathBuf::from(path),
            DatabaseUrl::Postgres { .. } => unreachable!("a SQLite test"),
        }
    }

    /// A migrated database with `rows` rows of padding in a table of its own, so that it spans
    /// many pages.
    fn database_with_rows(rows: i64) -> TestDatabase {
        let database = TestDatabase::create_migrated(Backend::Sqlite);
        database.execute("CREATE TABLE padding (id INTEGER PRIMARY KEY, text TEXT NOT NULL)");
        database.execute(&format!(
            "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < {rows}) \
             INSERT INTO padding (id, text) SELECT i, printf('%0500d', i) FROM n"
        ));
        database
    }

    fn count(path: &Path, sql: &str) -> i64 {
        TestDatabase::at(sqlite_url(path)).count(sql)
    }

    /// Small steps while another connection keeps committing: the backup holds the snapshot it
    /// began with (no row committed after it began is in it), takes many steps, never starts
    /// over, and leaves nothing but the backup file.
    #[test]
    fn a_backup_in_small_steps_under_writes_is_the_snapshot_it_began_with() {
        let database = database_with_rows(2_000);
        let url = database.url().clone();
        let folder = tempfile::tempdir().unwrap();
        let to = folder.path().join("backup.db");
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let writer = {
            let (url, stop) = (url.clone(), stop.clone());
            std::thread::spawn(move || {
                // Opening and writing are tried again while the database is busy for a
                // moment (opening sets pragmas, and the test's own reads hold it at times): a
                // panic here left the loop below waiting for rows forever.
                let mut conn = loop {
                    match crate::connection::establish(&url) {
                        Ok(conn) => break conn,
                        Err(_) => std::thread::sleep(Duration::from_millis(5)),
                    }
                };
                let mut written = 0;
                while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                    let insert = "INSERT INTO padding (text) VALUES (printf('%0500d', random()))";
                    if conn.batch_execute(insert).is_ok() {
                        written += 1;
                    }
                }
                written
            })
        };
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while database.count("SELECT count(*) AS n FROM padding") < 2_050 {
            assert!(
                std::time::Instant::now() < deadline,
                "the writer wrote no 50 rows in 30 s"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        let options = BackupOptions {
            pages_per_step: 16,
            pause: Duration::from_millis(2),
            replace: false,
        };
        let report = backup(&url, &to, &options).unwrap();
        stop.store(true, std::sync::atomic::Ordering::SeqCst);
        let written = writer.join().unwrap();
        assert!(report.steps > 10, "{report:?}");
        assert_eq!(report.bytes, report.pages * report.page_size, "{report:?}");
        // Rows committed during the copy are not in it, so it has fewer than the database.
        let in_backup = count(&to, "SELECT count(*) AS n FROM padding");
        let in_database = database.count("SELECT count(*) AS n FROM padding");
        assert!(
            (2_050..in_database).contains(&in_backup),
            "backup {in_backup}, database {in_database}, {written} written"
        );
        let left: Vec<String> = fs::read_dir(folder.path())
            .unwrap()
            .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(left, ["backup.db"]);
    }

    #[test]
    fn a_backup_refuses_to_replace_a_file_unless_told() {
        let database = database_with_rows(10);
        let folder = tempfile::tempdir().unwrap();
        let to = folder.path().join("backup.db");
        fs::write(&to, "keep me").unwrap();
        let refused = backup(database.url(), &to, &BackupOptions::default()).unwrap_err();
        assert!(refused.to_string().contains("--force"), "{refused}");
        assert_eq!(fs::read_to_string(&to).unwrap(), "keep me");
        let itself = backup(
            database.url(),
            &file_of(&database),
            &BackupOptions {
                replace: true,
                ..BackupOptions::default()
            },
        )
        .unwrap_err();
        assert!(itself.to_string().contains("database itself"), "{itself}");
        backup(
            database.url(),
            &to,
            &BackupOptions {
                replace: true,
                ..BackupOptions::default()
            },
        )
        .unwrap();
        assert_eq!(count(&to, "SELECT count(*) AS n FROM padding"), 10);
    }

    #[test]
    fn a_restore_puts_the_backup_in_place_and_drops_the_old_wal() {
        let database = database_with_rows(10);
        let folder = tempfile::tempdir().unwrap();
        let backup_file = folder.path().join("backup.db");
        backup(database.url(), &backup_file, &BackupOptions::default()).unwrap();
        let target = folder.path().join("restored.db");
        let target_url = sqlite_url(&target);
        let first = restore(&target_url, &backup_file, &RestoreOptions::default()).unwrap();
        assert!(!first.replaced && first.pending.is_empty(), "{first:?}");
        assert_eq!(count(&target, "SELECT count(*) AS n FROM padding"), 10);
        // A stale WAL of the database being replaced must not be read as the backup's.
        let [wal, ..] = sidecars(&target);
        fs::write(&wal, b"stale").unwrap();
        let again = restore(&target_url, &backup_file, &RestoreOptions::default()).unwrap_err();
        assert!(again.to_string().contains("--yes"), "{again}");
        let replaced =
            restore(&target_url, &backup_file, &RestoreOptions { replace: true }).unwrap();
        assert!(replaced.replaced);
        assert!(!wal.exists());
        assert_eq!(count(&target, "SELECT count(*) AS n FROM padding"), 10);
    }

    #[test]
    fn a_restore_refuses_while_the_lock_is_held_shared() {
        let database = database_with_rows(1);
        let folder = tempfile::tempdir().unwrap();
        let backup_file = folder.path().join("backup.db");
        backup(database.url(), &backup_file, &BackupOptions::default()).unwrap();
        let serving = DatabaseLock::shared(database.url()).unwrap();
        let refused = restore(
            database.url(),
            &backup_file,
            &RestoreOptions { replace: true },
        )
        .unwrap_err();
        assert!(
            refused.to_string().contains("server is running"),
            "{refused}"
        );
        drop(serving);
        restore(
            database.url(),
            &backup_file,
            &RestoreOptions { replace: true },
        )
        .unwrap();
    }

    #[test]
    fn a_restore_refuses_what_is_not_a_mercer_backup() {
        let folder = tempfile::tempdir().unwrap();
        let target = sqlite_url(&folder.path().join("restored.db"));
        let text = folder.path().join("notes.txt");
        fs::write(
            &text,
            "not a database, just some text that is long enough to look at",
        )
        .unwrap();
        let other = folder.path().join("other.db");
        TestDatabase::at(sqlite_url(&other)).execute("CREATE TABLE things (id INTEGER)");
        let newer = TestDatabase::create_migrated(Backend::Sqlite);
        newer.execute("INSERT INTO __diesel_schema_migrations (version) VALUES ('20991231000000')");
        for (file, expected) in [
            (text, "is not a SQLite database"),
            (other, "not Mercer's"),
            (file_of(&newer), "newer Mercer"),
            (folder.path().join("missing.db"), "no backup file"),
        ] {
            let refused = restore(&target, &file, &RestoreOptions::default()).unwrap_err();
            assert!(refused.to_string().contains(expected), "{refused}");
        }
        let left: Vec<String> = fs::read_dir(folder.path())
            .unwrap()
            .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|name| name.starts_with("restored"))
            .collect();
        assert_eq!(left, ["restored.db.lock"], "nothing but the lock file");
    }

    #[test]
    fn postgres_is_sent_to_its_own_tools() {
        let url = DatabaseUrl::parse("postgres://mercer@127.0.0.1/mercer").unwrap();
        let folder = tempfile::tempdir().unwrap();
        let to = folder.path().join("backup.db");
        let refused = backup(&url, &to, &BackupOptions::default()).unwrap_err();
        assert!(refused.to_string().contains("pg_dump"), "{refused}");
        assert!(
            refused.to_string().contains("docs/operations.md"),
            "{refused}"
        );
        fs::write(&to, "x").unwrap();
        let refused = restore(&url, &to, &RestoreOptions { replace: true }).unwrap_err();
        assert!(refused.to_string().contains("pg_restore"), "{refused}");
        assert!(DatabaseLock::shared(&url).unwrap().is_none());
    }
}
