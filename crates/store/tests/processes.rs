//! The running processes on both databases: registering, heartbeats, rows of dead processes,
//! and the refusal to migrate under processes of another schema.

#![allow(clippy::unwrap_used)] // test code: a panic is a failed assertion

use std::time::Duration;

use mercer_domain::Timestamp;
use mercer_store::processes::Heartbeat;
use mercer_store::testing::TestDatabase;
use mercer_store::{Backend, OpenError, backend_tests};

const BEAT: Duration = Duration::from_secs(10);

/// A row as another process would have written it.
fn insert_process(database: &TestDatabase, id: &str, schema: &str, last_seen: Timestamp) {
    database.execute(&format!(
        "INSERT INTO processes (id, version, schema_version, name, heartbeat_ms, started_at, \
         last_seen) VALUES ('{id}', '0.0.9', '{schema}', 'old-host pid 7', 10000, {seen}, {seen})",
        seen = last_seen.as_micros(),
    ));
}

/// Makes the newest migration but the processes table's pending again, as on a database an
/// older binary (that knew the table) migrated: its row is removed and its tables dropped.
fn forget_a_migration(database: &TestDatabase) -> String {
    database.execute(
        "DELETE FROM __diesel_schema_migrations WHERE version = '20261129000095';
         ALTER TABLE staff_accounts DROP COLUMN last_sign_in_at;
         ALTER TABLE api_tokens DROP COLUMN last_used_at;",
    );
    "20261129000095".to_string()
}

fn a_process_registers_beats_and_removes_itself(backend: Backend) {
    let (_db, store) = TestDatabase::migrated(backend);
    let start = Timestamp::now();
    let registration = store.register_process(BEAT, start).unwrap();
    let running = store.running_processes(start).unwrap();
    assert_eq!(running.len(), 1);
    let row = &running[0];
    assert_eq!(row.id, registration.id());
    assert_eq!(row.version, env!("CARGO_PKG_VERSION"));
    assert_eq!(row.schema_version, store.schema_version());
    assert!(row.schema_version.starts_with("2026"), "{row:?}");
    assert!(row.name.contains(&format!("pid {}", std::process::id())));
    assert_eq!(row.heartbeat_ms, 10_000);

    // Heartbeats keep it alive past three intervals from its start.
    let later = start.plus_seconds(25);
    assert_eq!(
        store.heartbeat(&registration, later).unwrap(),
        Heartbeat::Serving
    );
    let running = store.running_processes(start.plus_seconds(50)).unwrap();
    assert_eq!(running.len(), 1);
    assert_eq!(running[0].last_seen, later.as_micros());

    store.unregister_process(&registration).unwrap();
    assert!(store.running_processes(later).unwrap().is_empty());
}

fn a_row_not_seen_for_three_heartbeats_is_ignored_and_deleted(backend: Backend) {
    let (database, store) = TestDatabase::migrated(backend);
    let start = Timestamp::now();
    let registration = store.register_process(BEAT, start).unwrap();
    insert_process(&database, "other", "1", start);
    assert_eq!(
        store
            .running_processes(start.plus_seconds(30))
            .unwrap()
            .len(),
        2
    );
    // 31 s without a heartbeat: both look dead, and their rows go.
    assert!(
        store
            .running_processes(start.plus_seconds(31))
            .unwrap()
            .is_empty()
    );
    assert_eq!(database.count("SELECT COUNT(*) AS n FROM processes"), 0);
    // A process that was only late puts its row back at its next heartbeat.
    assert_eq!(
        store
            .heartbeat(&registration, start.plus_seconds(32))
            .unwrap(),
        Heartbeat::Serving
    );
    let running = store.running_processes(start.plus_seconds(33)).unwrap();
    assert_eq!(running.len(), 1);
    assert_eq!(running[0].id, registration.id());
}

fn migrating_is_refused_while_processes_of_another_schema_run(backend: Backend) {
    let database = TestDatabase::create_migrated(backend);
    let store = database.open_store();
    let forgotten = forget_a_migration(&database);
    insert_process(&database, "old", "20261128000001", Timestamp::now());
    let refused = store.migrate().unwrap_err();
    let OpenError::OtherVersionsRunning(message) = &refused else {
        panic!("expected a refusal, got {refused:?}");
    };
    for needle in [
        "0.0.9",
        "old-host pid 7",
        "last seen",
        "Stop it first",
        "2026-11-29-000095",
    ] {
        assert!(message.contains(needle), "{needle}: {message}");
    }
    assert_eq!(
        database.count(&format!(
            "SELECT COUNT(*) AS n FROM __diesel_schema_migrations WHERE version = '{forgotten}'"
        )),
        0,
        "nothing was applied"
    );
    // Once the row is a dead process's, the migration runs.
    database.execute(&format!(
        "UPDATE processes SET last_seen = {}",
        Timestamp::now().plus_seconds(-31).as_micros()
    ));
    assert_eq!(store.migrate().unwrap(), [forgotten]);
    assert_eq!(database.count("SELECT COUNT(*) AS n FROM processes"), 0);
}

/// Processes of this binary's schema do not stop it: the same migrations, whatever the
/// version. Nor does any process when there is nothing to apply.
fn processes_of_the_same_schema_do_not_stop_a_migration(backend: Backend) {
    let database = TestDatabase::create_migrated(backend);
    let store = database.open_store();
    insert_process(&database, "old", "20261128000001", Timestamp::now());
    assert!(store.migrate().unwrap().is_empty(), "nothing to apply");
    database.execute("DELETE FROM processes");
    let forgotten = forget_a_migration(&database);
    insert_process(&database, "same", &store.schema_version(), Timestamp::now());
    assert_eq!(store.migrate().unwrap(), [forgotten]);
}

/// A heartbeat that finds a migration this binary does not know tells the process to stop.
fn a_heartbeat_finds_a_newer_database(backend: Backend) {
    let (database, store) = TestDatabase::migrated(backend);
    let registration = store.register_process(BEAT, Timestamp::now()).unwrap();
    database.execute("INSERT INTO __diesel_schema_migrations (version) VALUES ('20991231000000')");
    let Heartbeat::NewerDatabase(message) =
        store.heartbeat(&registration, Timestamp::now()).unwrap()
    else {
        panic!("the heartbeat kept serving on a newer database");
    };
    assert!(
        message.contains("newer Mercer") && message.contains("20991231000000"),
        "{message}"
    );
}

backend_tests!(
    a_process_registers_beats_and_removes_itself,
    a_row_not_seen_for_three_heartbeats_is_ignored_and_deleted,
    migrating_is_refused_while_processes_of_another_schema_run,
    processes_of_the_same_schema_do_not_stop_a_migration,
    a_heartbeat_finds_a_newer_database,
);
