//! Upgrades: the version a process answers with, what `migrate --check` says, an older binary
//! refusing a database a newer one migrated, and today's migrations applied over those of the
//! first release.

use std::path::Path;
use std::process::Command;

use mercer_tests::{Backend, MercerServer, TestDatabase, backend_tests, run_cli};

/// The first release's tag, and the commit it names: a clone made without tags still has the
/// commit.
const FIRST_RELEASE: [&str; 2] = ["v0.1.0", "580fbdebfad97989045705e61f7e9fa693c8cd77"];

fn liveness_names_the_binarys_version(backend: Backend) {
    let server = MercerServer::start(backend);
    let health = server.get("/healthz").call();
    assert_eq!(health.status, 200);
    assert_eq!(health.json()["status"], "ok");
    assert_eq!(health.json()["version"], env!("CARGO_PKG_VERSION"));
    let printed = run_cli(server.database(), &["--version"]);
    assert!(
        printed
            .stdout
            .contains(&format!("mercer {}", env!("CARGO_PKG_VERSION"))),
        "{}",
        printed.stdout
    );
}

/// `--check` lists what `migrate` would apply and applies none of it: it fails while migrations
/// are pending and succeeds once they are applied.
fn migrate_check_lists_the_pending_migrations_and_applies_none(backend: Backend) {
    let database = TestDatabase::create(backend);
    let newest = newest_migration(backend);
    let before = run_cli(&database, &["migrate", "--check"]);
    assert!(!before.success, "pending migrations fail the check");
    assert!(before.stdout.contains("would apply"), "{}", before.stdout);
    assert!(before.stdout.contains(&newest), "{}", before.stdout);
    assert!(
        before.stderr.contains("migrations are pending"),
        "{}",
        before.stderr
    );
    // Nothing was applied: the check says the same again, and `migrate` applies them all.
    let again = run_cli(&database, &["migrate", "--check"]);
    assert_eq!(again.stdout, before.stdout);
    let applied = run_cli(&database, &["migrate"]);
    assert!(applied.success, "{}", applied.stderr);
    assert!(applied.stdout.contains("applied"), "{}", applied.stdout);
    let after = run_cli(&database, &["migrate", "--check"]);
    assert!(after.success, "{}", after.stderr);
    assert!(
        after.stdout.contains("nothing to apply"),
        "{}",
        after.stdout
    );
}

/// A migration this binary does not have means a newer Mercer ran on the database: `migrate`,
/// its check, and any command that opens the database refuse it, saying which, and change
/// nothing.
fn a_database_a_newer_mercer_migrated_is_refused(backend: Backend) {
    let database = TestDatabase::create_migrated(backend);
    database.execute("INSERT INTO __diesel_schema_migrations (version) VALUES ('20991231000000')");
    for args in [&["migrate"][..], &["migrate", "--check"], &["shop", "list"]] {
        let refused = run_cli(&database, args);
        assert!(!refused.success, "{args:?} ran on a newer database");
        assert!(
            refused.stderr.contains("newer Mercer") && refused.stderr.contains("20991231000000"),
            "{args:?}: {}",
            refused.stderr
        );
    }
    assert_eq!(
        database.count(
            "SELECT COUNT(*) AS n FROM __diesel_schema_migrations WHERE version = '20991231000000'"
        ),
        1
    );
}

/// Microseconds since the Unix epoch, as the table of running processes keeps times.
fn now_micros() -> i64 {
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap();
    i64::try_from(since.as_micros()).unwrap()
}

/// With a live process of another schema registered (an older `mercer serve` still running), a
/// binary with migrations to apply refuses to apply them, naming the process: `migrate` and
/// `serve` alike, changing nothing. Once that process is gone, the migration runs.
fn migrating_under_a_process_of_another_schema_is_refused(backend: Backend) {
    let database = TestDatabase::create_migrated(backend);
    // An older binary's database: the newest migration before the processes table's is
    // pending again (its row removed, its columns dropped as its down.sql does).
    database.execute(
        "DELETE FROM __diesel_schema_migrations WHERE version = '20261129000095';
         ALTER TABLE staff_accounts DROP COLUMN last_sign_in_at;
         ALTER TABLE api_tokens DROP COLUMN last_used_at;",
    );
    database.execute(&format!(
        "INSERT INTO processes (id, version, schema_version, name, heartbeat_ms, started_at, \
         last_seen) VALUES ('old', '0.0.9', '20261129000095', 'old-host pid 4242', 10000, \
         {now}, {now})",
        now = now_micros(),
    ));
    for args in [&["migrate"][..], &["serve", "--bind", "127.0.0.1:0"]] {
        let refused = run_cli(&database, args);
        assert!(
            !refused.success,
            "{args:?} migrated under a running process"
        );
        for needle in [
            "refusing to apply migrations",
            "0.0.9",
            "old-host pid 4242",
            "last seen",
            "Stop it first",
        ] {
            assert!(
                refused.stderr.contains(needle),
                "{args:?}, {needle}: {}",
                refused.stderr
            );
        }
    }
    let pending = "SELECT COUNT(*) AS n FROM __diesel_schema_migrations WHERE version = \
                   '20261129000095'";
    assert_eq!(database.count(pending), 0, "nothing was applied");
    database.execute("DELETE FROM processes WHERE id = 'old'");
    let migrated = run_cli(&database, &["migrate"]);
    assert!(migrated.success, "{}", migrated.stderr);
    assert_eq!(database.count(pending), 1);
}

/// A running server whose database a newer Mercer migrated (a migration it does not know
/// appears) stops at its next heartbeat, saying why, with a non-zero exit; while it ran, its
/// row was among the running processes.
fn a_server_stops_when_a_newer_mercer_migrates_its_database(backend: Backend) {
    let mut server = MercerServer::start_with_env(
        TestDatabase::create_migrated(backend),
        &[],
        &[("MERCER_HEARTBEAT_INTERVAL_MS", "100")],
    );
    assert_eq!(
        server
            .database()
            .count("SELECT COUNT(*) AS n FROM processes"),
        1,
        "the server registered itself"
    );
    server
        .database()
        .execute("INSERT INTO __diesel_schema_migrations (version) VALUES ('20991231000000')");
    let status = server
        .wait_for_exit(std::time::Duration::from_secs(10))
        .expect("the server stopped");
    assert!(!status.success(), "{status:?}");
    let log = server.log();
    assert!(
        log.contains("stopping") && log.contains("newer Mercer") && log.contains("20991231000000"),
        "{log}"
    );
}

/// A server stopped cleanly removes its row from the running processes.
fn a_server_stopped_cleanly_removes_itself(backend: Backend) {
    let mut server = MercerServer::start(backend);
    let running = "SELECT COUNT(*) AS n FROM processes";
    assert_eq!(server.database().count(running), 1);
    server.signal("TERM");
    let status = server
        .wait_for_exit(std::time::Duration::from_secs(10))
        .expect("the server stopped");
    assert!(status.success(), "{status:?}: {}", server.log());
    assert_eq!(server.database().count(running), 0);
}

/// The first release's migrations, read from its tag with git, applied to an empty database
/// as diesel applies them; then today's binary migrates the database and works on it.
fn todays_migrations_apply_over_the_first_releases(backend: Backend) {
    let folder = match backend {
        Backend::Sqlite => "migrations/sqlite",
        Backend::Postgres => "migrations/postgres",
    };
    let release = first_release();
    let database = TestDatabase::create(backend);
    database.execute(
        "CREATE TABLE __diesel_schema_migrations (version VARCHAR(50) PRIMARY KEY NOT NULL, \
         run_on TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP)",
    );
    let old = git(&["ls-tree", "--name-only", &format!("{release}:{folder}")]);
    let old: Vec<&str> = old.lines().collect();
    assert!(
        old.len() >= 20,
        "the first release has its migrations: {old:?}"
    );
    for name in &old {
        database.execute(&git(&[
            "show",
            &format!("{release}:{folder}/{name}/up.sql"),
        ]));
        let version: String = name
            .chars()
            .take_while(|c| *c != '_')
            .filter(char::is_ascii_digit)
            .collect();
        database.execute(&format!(
            "INSERT INTO __diesel_schema_migrations (version) VALUES ('{version}')"
        ));
    }

    let check = run_cli(&database, &["migrate", "--check"]);
    let newest = newest_migration(backend);
    assert!(
        check.stdout.contains(&newest) && !check.stdout.contains(old[0]),
        "only migrations newer than the release are pending: {}",
        check.stdout
    );
    let upgraded = run_cli(&database, &["migrate"]);
    assert!(upgraded.success, "{}", upgraded.stderr);
    let shop = run_cli(
        &database,
        &["shop", "create", "--domain", "upgraded.example"],
    );
    assert!(shop.success, "{}", shop.stderr);
    let listed = run_cli(&database, &["shop", "list"]);
    assert!(
        listed.stdout.contains("upgraded.example"),
        "{}",
        listed.stdout
    );
}

/// The newest migration folder of today's tree.
fn newest_migration(backend: Backend) -> String {
    let folder = match backend {
        Backend::Sqlite => "sqlite",
        Backend::Postgres => "postgres",
    };
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../migrations")
        .join(folder);
    std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .max()
        .unwrap()
}

/// The tag if the clone has it, else its commit.
fn first_release() -> String {
    let [tag, commit] = FIRST_RELEASE;
    for candidate in [tag, commit] {
        let found = Command::new("git")
            .args([
                "rev-parse",
                "--verify",
                "--quiet",
                &format!("{candidate}^{{commit}}"),
            ])
            .current_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join(".."))
            .output()
            .is_ok_and(|out| out.status.success());
        if found {
            return candidate.to_string();
        }
    }
    panic!(
        "neither the tag {tag} nor its commit {commit} is in this clone: fetch them (git fetch --tags)"
    );
}

fn git(args: &[&str]) -> String {
    let out = Command::new("git")
        .args(args)
        .current_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join(".."))
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("git prints text")
}

backend_tests!(
    liveness_names_the_binarys_version,
    migrate_check_lists_the_pending_migrations_and_applies_none,
    a_database_a_newer_mercer_migrated_is_refused,
    todays_migrations_apply_over_the_first_releases,
    migrating_under_a_process_of_another_schema_is_refused,
    a_server_stops_when_a_newer_mercer_migrates_its_database,
    a_server_stopped_cleanly_removes_itself,
);
