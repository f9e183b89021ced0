//! Backups and restores from the command line: `mercer backup` of a SQLite database while the
//! server keeps writing to it, `mercer restore` of that backup into a new file, and what both
//! refuse. On PostgreSQL both commands send the operator to pg_dump and pg_restore.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use mercer_store::DatabaseUrl;
use mercer_tests::{Backend, Call, CliOutput, MercerServer, TestDatabase, backend_tests, run_cli};
use serde_json::json;

use crate::subscriptions::{running_rule, seed_body};

/// A SQLite database at `path`, which the test's own folder removes.
fn sqlite_at(path: &Path) -> TestDatabase {
    TestDatabase::at(DatabaseUrl::Sqlite {
        path: path.to_string_lossy().into_owned(),
    })
}

fn file_of(database: &TestDatabase) -> PathBuf {
    match database.url() {
        DatabaseUrl::Sqlite { path } => PathBuf::from(path),
        DatabaseUrl::Postgres { .. } => panic!("not a SQLite database"),
    }
}

fn text(path: &Path) -> &str {
    path.to_str().expect("a UTF-8 path")
}

/// What the PostgreSQL refusals must say: the tool to use and where the steps are.
fn assert_sent_to(refused: &CliOutput, tool: &str) {
    refused.assert_failed_with(tool);
    refused.assert_failed_with("docs/operations.md");
}

/// A subscription the server acknowledged: its id, when the request was sent and when the 200
/// came back.
#[derive(Debug, Clone, Copy)]
struct Acknowledged {
    id: i64,
    sent: Instant,
    answered: Instant,
}

/// Creates subscriptions one after another until told to stop, recording each acknowledged
/// one, and each answer that was not a 200.
struct WriteLoad {
    stop: Arc<AtomicBool>,
    acknowledged: Arc<Mutex<Vec<Acknowledged>>>,
    thread: thread::JoinHandle<Vec<String>>,
}

impl WriteLoad {
    fn start(server: &MercerServer) -> WriteLoad {
        let demo = server.demo().clone();
        let url = server.url(&format!(
            "/subscriptions/v1/shops/{}/subscriptions",
            demo.shop
        ));
        let stop = Arc::new(AtomicBool::new(false));
        let acknowledged = Arc::new(Mutex::new(Vec::new()));
        let thread = {
            let (stop, acknowledged) = (stop.clone(), acknowledged.clone());
            thread::spawn(move || {
                let mut failures = Vec::new();
                let mut n = 0;
                while !stop.load(Ordering::SeqCst) {
                    n += 1;
                    let mut body = seed_body(&format!("load{n}@example.test"), &running_rule());
                    body["subscription"]["external_id"] = json!(format!("ext-load-{n}"));
                    let sent = Instant::now();
                    match Call::to("POST", &url).bearer(&demo.token).try_json(&body) {
                        Ok(answer) if answer.status == 200 => {
                            let id = answer.json()["subscription"]["id"]
                                .as_i64()
                                .expect("the subscription's id");
                            acknowledged.lock().unwrap().push(Acknowledged {
                                id,
                                sent,
                                answered: Instant::now(),
                            });
                        }
                        Ok(answer) => failures.push(format!("{}: {}", answer.status, answer.text)),
                        Err(error) => failures.push(error),
                    }
                }
                failures
            })
        };
        WriteLoad {
            stop,
            acknowledged,
            thread,
        }
    }

    fn count(&self) -> usize {
        self.acknowledged.lock().unwrap().len()
    }

    /// Waits until `more` further writes are acknowledged (at most 60 s).
    fn wait_for(&self, more: usize) {
        let target = self.count() + more;
        let deadline = Instant::now() + Duration::from_secs(60);
        while self.count() < target {
            assert!(
                Instant::now() < deadline,
                "the load stalled at {}",
                self.count()
            );
            thread::sleep(Duration::from_millis(10));
        }
    }

    /// Stops the load; the writes acknowledged, and the answers that were not a 200.
    fn stop(self) -> (Vec<Acknowledged>, Vec<String>) {
        self.stop.store(true, Ordering::SeqCst);
        let failures = self.thread.join().expect("the load thread ends");
        let acknowledged = self.acknowledged.lock().unwrap().clone();
        (acknowledged, failures)
    }
}

/// The backup is made while subscriptions keep being created; restored into a new file, a
/// server on it has every subscription acknowledged before the backup began, and none whose
/// request was sent after it ended (the backup is one consistent snapshot).
fn a_backup_made_under_writes_restores_every_write_acknowledged_before_it(backend: Backend) {
    let server = MercerServer::start(backend);
    let folder = tempfile::tempdir().unwrap();
    let backup_file = folder.path().join("mercer-backup.db");
    if backend == Backend::Postgres {
        let refused = server.cli(&["backup", "--to", text(&backup_file)]);
        assert_sent_to(&refused, "pg_dump");
        assert!(!backup_file.exists());
        return;
    }
    let load = WriteLoad::start(&server);
    load.wait_for(20);
    let began = Instant::now();
    // Small steps with pauses, so the copy spans many of the load's writes.
    let backed_up = server.cli(&[
        "backup",
        "--to",
        text(&backup_file),
        "--pages-per-step",
        "4",
        "--pause-ms",
        "20",
    ]);
    let ended = Instant::now();
    load.wait_for(5);
    let (acknowledged, failures) = load.stop();
    assert!(backed_up.success, "{}", backed_up.stderr);
    let size = std::fs::metadata(&backup_file).unwrap().len();
    for expected in [
        text(&backup_file).to_string(),
        format!("{size} bytes"),
        "pages of 4096 bytes".to_string(),
    ] {
        assert!(
            backed_up.stdout.contains(&expected),
            "{expected:?} in {}",
            backed_up.stdout
        );
    }
    assert!(
        failures.is_empty(),
        "writes failed during the backup: {failures:?}"
    );
    let before: Vec<i64> = acknowledged
        .iter()
        .filter(|write| write.answered < began)
        .map(|write| write.id)
        .collect();
    let during = acknowledged
        .iter()
        .filter(|write| write.sent > began && write.answered < ended)
        .count();
    let after: Vec<i64> = acknowledged
        .iter()
        .filter(|write| write.sent > ended)
        .map(|write| write.id)
        .collect();
    assert!(
        during > 0,
        "the server acknowledged no write while the backup ran ({:?}): {}",
        ended - began,
        backed_up.stdout
    );
    assert!(!after.is_empty());

    let restored_file = folder.path().join("restored.db");
    let restored_database = sqlite_at(&restored_file);
    let restored = run_cli(
        &restored_database,
        &["restore", "--from", text(&backup_file)],
    );
    assert!(restored.success, "{}", restored.stderr);
    assert!(
        restored.stdout.contains("Restored") && restored.stdout.contains("restored.db"),
        "{}",
        restored.stdout
    );
    let demo = server.demo().clone();
    drop(server);
    let restored_server = MercerServer::start_with(restored_database, &[]);
    let subscription = |id: i64| {
        restored_server
            .get(&format!(
                "/subscriptions/v1/shops/{}/subscriptions/{id}",
                demo.shop
            ))
            .bearer(&demo.token)
            .call()
            .status
    };
    for id in &before {
        assert_eq!(
            subscription(*id),
            200,
            "subscription {id} was acknowledged before the backup began"
        );
    }
    for id in &after {
        assert_eq!(
            subscription(*id),
            404,
            "subscription {id} was sent after the backup ended"
        );
    }
}

/// A restore is refused while a server runs on the database, naming it, and leaves the
/// database alone; once the server has stopped it replaces the database, with --yes only.
fn a_restore_is_refused_while_a_server_runs_on_the_database(backend: Backend) {
    let server = MercerServer::start(backend);
    let folder = tempfile::tempdir().unwrap();
    let backup_file = folder.path().join("mercer-backup.db");
    if backend == Backend::Postgres {
        std::fs::write(&backup_file, "a pg_dump archive").unwrap();
        let refused = server.cli(&["restore", "--from", text(&backup_file), "--yes"]);
        assert_sent_to(&refused, "pg_restore");
        return;
    }
    let demo = server.demo().clone();
    let backed_up = server.cli(&["backup", "--to", text(&backup_file)]);
    assert!(backed_up.success, "{}", backed_up.stderr);
    // Made after the backup: the restore takes it away.
    let created = server
        .post(&format!(
            "/subscriptions/v1/shops/{}/subscriptions",
            demo.shop
        ))
        .bearer(&demo.token)
        .json(&seed_body("after@example.test", &running_rule()));
    assert_eq!(created.status, 200, "{}", created.text);
    let id = created.json()["subscription"]["id"].as_i64().unwrap();

    let database = file_of(server.database());
    let refused = server.cli(&["restore", "--from", text(&backup_file), "--yes"]);
    refused.assert_failed_with("a Mercer server is running on");
    refused.assert_failed_with(text(&database));
    assert_eq!(server.get("/readyz").call().status, 200);

    let database = server.into_database();
    let unconfirmed = run_cli(&database, &["restore", "--from", text(&backup_file)]);
    unconfirmed.assert_failed_with("give --yes");
    let restored = run_cli(
        &database,
        &["restore", "--from", text(&backup_file), "--yes"],
    );
    assert!(restored.success, "{}", restored.stderr);
    assert!(restored.stdout.contains("replacing"), "{}", restored.stdout);
    let server = MercerServer::start_with(database, &[]);
    let gone = server
        .get(&format!(
            "/subscriptions/v1/shops/{}/subscriptions/{id}",
            demo.shop
        ))
        .bearer(&demo.token)
        .call();
    assert_eq!(gone.status, 404, "{}", gone.text);
}

/// A backup does not replace a file without --force; a restore takes nothing that is not a
/// SQLite database made by this Mercer or an older one, and leaves no file behind when it
/// refuses. On PostgreSQL neither flag gets past the refusal.
fn backups_and_restores_refuse_what_they_must_not_touch(backend: Backend) {
    let database = TestDatabase::create_migrated(backend);
    let folder = tempfile::tempdir().unwrap();
    let existing = folder.path().join("existing.db");
    std::fs::write(&existing, "keep me").unwrap();
    if backend == Backend::Postgres {
        let refused = run_cli(&database, &["backup", "--to", text(&existing), "--force"]);
        assert_sent_to(&refused, "pg_dump");
        let refused = run_cli(&database, &["restore", "--from", text(&existing), "--yes"]);
        assert_sent_to(&refused, "pg_restore");
        assert_eq!(std::fs::read_to_string(&existing).unwrap(), "keep me");
        return;
    }
    let refused = run_cli(&database, &["backup", "--to", text(&existing)]);
    refused.assert_failed_with("give --force");
    assert_eq!(std::fs::read_to_string(&existing).unwrap(), "keep me");
    let forced = run_cli(&database, &["backup", "--to", text(&existing), "--force"]);
    assert!(forced.success, "{}", forced.stderr);
    assert!(
        std::fs::read(&existing)
            .unwrap()
            .starts_with(b"SQLite format 3\0")
    );

    let not_sqlite = folder.path().join("notes.txt");
    std::fs::write(
        &not_sqlite,
        "these are notes, not a database, however long they are",
    )
    .unwrap();
    let not_mercer = folder.path().join("other.db");
    sqlite_at(&not_mercer).execute("CREATE TABLE things (id INTEGER PRIMARY KEY)");
    let newer = TestDatabase::create_migrated(Backend::Sqlite);
    newer.execute("INSERT INTO __diesel_schema_migrations (version) VALUES ('20991231000000')");
    // A database in use has its WAL beside it: the file alone may miss the last writes.
    let in_use = file_of(&database);
    let mut wal = in_use.clone().into_os_string();
    wal.push("-wal");
    std::fs::write(&wal, "frames").unwrap();
    let target_file = folder.path().join("restored.db");
    let target = sqlite_at(&target_file);
    for (from, expected) in [
        (not_sqlite, "is not a SQLite database"),
        (not_mercer, "not Mercer's"),
        (file_of(&newer), "newer Mercer"),
        (folder.path().join("missing.db"), "no backup file"),
        (in_use, "write-ahead log"),
    ] {
        let refused = run_cli(&target, &["restore", "--from", text(&from)]);
        refused.assert_failed_with(expected);
        assert!(!target_file.exists(), "{expected}: the target was made");
    }
    let left: Vec<String> = std::fs::read_dir(folder.path())
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.starts_with("restored"))
        .collect();
    assert_eq!(left, ["restored.db.lock"], "nothing but the lock file");
}

backend_tests!(
    a_backup_made_under_writes_restores_every_write_acknowledged_before_it,
    a_restore_is_refused_while_a_server_runs_on_the_database,
    backups_and_restores_refuse_what_they_must_not_touch,
);
