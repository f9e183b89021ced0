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
);
