//! A fresh database for every test, on either backend, so tests run in parallel and never see
//! each other's rows: a temporary SQLite file, or a PostgreSQL database of its own that is
//! dropped when the test ends.
//!
//! A migrated one is a copy of a template migrated once and kept between runs, named by the
//! migrations' fingerprint (so a template of other migrations is never used): on PostgreSQL
//! `CREATE DATABASE … TEMPLATE mercer_template_<fingerprint>`, on SQLite a copy of
//! `<temp dir>/mercer-template-<fingerprint>.db`.
//!
//! PostgreSQL is reached at `MERCER_TEST_POSTGRES_URL` (default
//! `postgres://postgres@127.0.0.1:5432/postgres`); that user must be allowed to create databases.
//! A test on PostgreSQL fails when none answers, with a message saying how to skip it
//! (`cargo test -- --skip postgres`) or start the server. Every such test has `postgres` in its
//! name (`backend_tests!` puts them in a `postgres` module): `cargo xtask test` leaves them out,
//! and says so, when PostgreSQL is down and `--require-postgres` was not given.

use diesel::PgConnection;
use diesel::connection::SimpleConnection;
use diesel::prelude::*;

use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use mercer_domain::DomainError;
use mercer_domain::ports::{Database, Repositories};

use crate::connection::establish;
use crate::store::{PoolOptions, Store};
use crate::url::{Backend, DatabaseUrl};

pub use crate::url::Backend as TestBackend;

pub const POSTGRES_URL_VAR: &str = "MERCER_TEST_POSTGRES_URL";
pub const DEFAULT_POSTGRES_URL: &str = "postgres://postgres@127.0.0.1:5432/postgres";

/// The server-level URL tests create their databases through.
pub fn postgres_admin_url() -> String {
    std::env::var(POSTGRES_URL_VAR).unwrap_or_else(|_| DEFAULT_POSTGRES_URL.to_string())
}

/// `url` with its database name replaced by `name`.
fn with_database(url: &str, name: &str) -> String {
    let (base, query) = match url.split_once('?') {
        Some((base, query)) => (base, Some(query)),
        None => (url, None),
    };
    let scheme_end = base.find("://").map_or(0, |i| i + 3);
    let server = match base[scheme_end..].find('/') {
        Some(slash) => &base[..scheme_end + slash],
        None => base,
    };
    match query {
        Some(query) => format!("{server}/{name}?{query}"),
        None => format!("{server}/{name}"),
    }
}

/// `prefix_<pid>_<random>`: unique among concurrent tests and processes.
fn unique_name(prefix: &str) -> String {
    let mut suffix = [0u8; 6];
    getrandom::fill(&mut suffix).expect("no random source");
    let suffix: String = suffix.iter().map(|b| format!("{b:02x}")).collect();
    format!("{prefix}_{}_{suffix}", std::process::id())
}

/// A connection to the PostgreSQL server tests create their databases on. When none answers,
/// the test fails (a run without PostgreSQL is never reported as passed) with a message that
/// says how to skip these tests or start the server.
fn postgres_admin(admin_url: &str) -> PgConnection {
    PgConnection::establish(admin_url)
        .unwrap_or_else(|error| panic!("{}", postgres_down(admin_url, &error.to_string())))
}

/// What a test on PostgreSQL says when no server answers at `admin_url`.
fn postgres_down(admin_url: &str, error: &str) -> String {
    format!(
        "PostgreSQL does not answer at {admin_url} ({error}).\n\
         This test needs PostgreSQL, like every test with `postgres` in its name. Either:\n\
         - skip them: `cargo test -- --skip postgres` (they do not run, so they do not pass);\n\
         - start PostgreSQL: `pg_ctlcluster --skip-systemctl-redirect 15 main start`;\n\
         - point the tests at another server: {POSTGRES_URL_VAR}=postgres://user@host:port/postgres\n\
           (the user must be allowed to create databases);\n\
         - or run `cargo xtask test`, which leaves these tests out, and says so, when none answers."
    )
}

const MIGRATIONS_FINGERPRINT: &str = env!("MERCER_MIGRATIONS_FINGERPRINT");

/// Migrates the database at `url` and closes every connection to it (a PostgreSQL template
/// may have none).
fn migrate(url: &DatabaseUrl) {
    let store = Store::open(url, &PoolOptions::default()).expect("cannot open the template");
    store
        .migrate()
        .expect("migrations must apply to a fresh database");
}

/// The SQLite template's path, made once (by whichever process gets there first: it is built
/// under a name of its own and renamed into place, so no one copies a half-made file).
fn sqlite_template() -> &'static std::path::Path {
    static TEMPLATE: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();
    TEMPLATE.get_or_init(|| {
        let dir = std::env::temp_dir();
        let path = dir.join(format!("mercer-template-{MIGRATIONS_FINGERPRINT}.db"));
        if !path.exists() {
            let building = dir.join(format!("{}.db", unique_name("mercer-template-building")));
            migrate(&DatabaseUrl::Sqlite {
                path: building.to_string_lossy().into_owned(),
            });
            // The store is closed: the WAL is checkpointed into the file and removed.
            std::fs::rename(&building, &path).expect("cannot put the template in place");
        }
        path
    })
}

/// The PostgreSQL template's name, made once per fingerprint and kept between runs; older
/// templates are dropped when a new one is made.
fn postgres_template() -> &'static str {
    static TEMPLATE: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    TEMPLATE.get_or_init(|| {
        let admin_url = postgres_admin_url();
        let mut admin = postgres_admin(&admin_url);
        let name = format!("mercer_template_{MIGRATIONS_FINGERPRINT}");
        let exists = |admin: &mut PgConnection| {
            diesel::select(diesel::dsl::sql::<diesel::sql_types::Bool>(&format!(
                "EXISTS (SELECT 1 FROM pg_database WHERE datname = '{name}')"
            )))
            .get_result::<bool>(admin)
            .expect("cannot look for the template")
        };
        if !exists(&mut admin) {
            let building = unique_name("mercer_template_building");
            admin
                .batch_execute(&format!("CREATE DATABASE \"{building}\""))
                .expect("cannot create the template");
            migrate(&DatabaseUrl::Postgres {
                url: with_database(&admin_url, &building),
            });
            // Another process may have finished one meanwhile: then this one goes.
            let renamed = admin.batch_execute(&format!(
                "ALTER DATABASE \"{building}\" RENAME TO \"{name}\""
            ));
            if renamed.is_err() {
                let _ = admin.batch_execute(&format!("DROP DATABASE IF EXISTS \"{building}\""));
            }
            let old: Vec<String> = diesel::dsl::sql_query(format!(
                "SELECT datname AS name FROM pg_database WHERE datname LIKE 'mercer\\_template\\_%' \
                 AND datname <> '{name}' AND datname NOT LIKE 'mercer\\_template\\_building%'"
            ))
            .load::<DatabaseName>(&mut admin)
            .map(|rows| rows.into_iter().map(|row| row.name).collect())
            .unwrap_or_default();
            for old in old {
                let _ = admin.batch_execute(&format!("DROP DATABASE IF EXISTS \"{old}\""));
            }
        }
        name
    })
}

#[derive(QueryableByName)]
struct Count {
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    n: i64,
}

#[derive(QueryableByName)]
struct Text {
    #[diesel(sql_type = diesel::sql_types::Text)]
    t: String,
}

#[derive(QueryableByName)]
struct DatabaseName {
    #[diesel(sql_type = diesel::sql_types::Text)]
    name: String,
}

enum Cleanup {
    Sqlite(#[allow(dead_code)] tempfile::TempDir),
    Postgres {
        admin_url: String,
        name: String,
    },
    /// Another `TestDatabase` owns it.
    Borrowed,
}

/// A database made for one test and removed after it.
pub struct TestDatabase {
    url: DatabaseUrl,
    cleanup: Cleanup,
}

impl TestDatabase {
    /// An empty database (no tables yet) on `backend`.
    pub fn create(backend: Backend) -> TestDatabase {
        match backend {
            Backend::Sqlite => {
                let dir = tempfile::tempdir().expect("cannot create a temporary directory");
                let path = dir.path().join("mercer-test.db");
                TestDatabase {
                    url: DatabaseUrl::Sqlite {
                        path: path.to_string_lossy().into_owned(),
                    },
                    cleanup: Cleanup::Sqlite(dir),
                }
            }
            Backend::Postgres => TestDatabase::create_postgres(None),
        }
    }

    /// A PostgreSQL database of its own: empty, or a copy of `template`.
    fn create_postgres(template: Option<&str>) -> TestDatabase {
        let admin_url = postgres_admin_url();
        let name = unique_name("mercer_test");
        let mut admin = postgres_admin(&admin_url);
        let template = template.map_or_else(String::new, |t| format!(" TEMPLATE \"{t}\""));
        admin
            .batch_execute(&format!("CREATE DATABASE \"{name}\"{template}"))
            .expect("cannot create a test database");
        TestDatabase {
            url: DatabaseUrl::Postgres {
                url: with_database(&admin_url, &name),
            },
            cleanup: Cleanup::Postgres { admin_url, name },
        }
    }

    /// The same database as `other`, for a second process; `other` removes it.
    pub fn attach(other: &TestDatabase) -> TestDatabase {
        TestDatabase {
            url: other.url.clone(),
            cleanup: Cleanup::Borrowed,
        }
    }

    /// A database on `backend` with every migration applied, and a store on it.
    pub fn migrated(backend: Backend) -> (TestDatabase, Store) {
        let database = TestDatabase::create_migrated(backend);
        let store = database.open_store();
        (database, store)
    }

    /// A database on `backend` with every migration applied: a copy of the template.
    pub fn create_migrated(backend: Backend) -> TestDatabase {
        match backend {
            Backend::Sqlite => {
                let template = sqlite_template();
                let database = TestDatabase::create(Backend::Sqlite);
                if let DatabaseUrl::Sqlite { path } = &database.url {
                    std::fs::copy(template, path).expect("cannot copy the template database");
                }
                database
            }
            Backend::Postgres => {
                let template = postgres_template();
                TestDatabase::create_postgres(Some(template))
            }
        }
    }

    pub fn open_store(&self) -> Store {
        let options = PoolOptions {
            max_connections: 4,
            ..PoolOptions::default()
        };
        Store::open(&self.url, &options).expect("cannot open the test database")
    }

    pub fn url(&self) -> &DatabaseUrl {
        &self.url
    }

    /// The URL as `mercer --database-url` takes it.
    pub fn url_string(&self) -> String {
        match &self.url {
            DatabaseUrl::Sqlite { path } => format!("sqlite://{path}"),
            DatabaseUrl::Postgres { url } => url.clone(),
        }
    }

    pub fn backend(&self) -> Backend {
        self.url.backend()
    }

    /// A database someone else made and removes (a cluster a test runs itself, a file on a
    /// small file system): the URL only, nothing removed when dropped.
    pub fn at(url: DatabaseUrl) -> TestDatabase {
        TestDatabase {
            url,
            cleanup: Cleanup::Borrowed,
        }
    }

    /// The number `sql` selects as `n` (`SELECT count(*) AS n FROM …`), read on a connection
    /// of its own.
    pub fn count(&self, sql: &str) -> i64 {
        let mut conn = establish(&self.url).expect("cannot connect to the test database");
        diesel::sql_query(sql)
            .get_result::<Count>(&mut conn)
            .unwrap_or_else(|error| panic!("{sql}: {error}"))
            .n
    }

    /// The texts `sql` selects as `t`, one a row, read on a connection of its own.
    pub fn texts(&self, sql: &str) -> Vec<String> {
        let mut conn = establish(&self.url).expect("cannot connect to the test database");
        diesel::sql_query(sql)
            .load::<Text>(&mut conn)
            .unwrap_or_else(|error| panic!("{sql}: {error}"))
            .into_iter()
            .map(|row| row.t)
            .collect()
    }

    /// Runs SQL on a connection of its own, outside any pool: for tests that break things.
    pub fn execute(&self, sql: &str) {
        let mut conn = establish(&self.url).expect("cannot connect to the test database");
        conn.batch_execute(sql).expect("test SQL failed");
    }
}

/// The email that makes writing a customer fail once [`TestDatabase::fail_customer_writes`]
/// ran: for tests of events that cannot be applied.
pub const POISONED_EMAIL: &str = "poison@example.test";

impl TestDatabase {
    /// Makes every write of a customer whose email is [`POISONED_EMAIL`] fail (a trigger), until
    /// [`TestDatabase::heal_customer_writes`].
    pub fn fail_customer_writes(&self) {
        self.execute(&match self.backend() {
            Backend::Sqlite => format!(
                "CREATE TRIGGER poisoned_insert BEFORE INSERT ON platform_customers \
                 WHEN NEW.email = '{POISONED_EMAIL}' BEGIN SELECT RAISE(ABORT, 'forced failure'); END; \
                 CREATE TRIGGER poisoned_update BEFORE UPDATE ON platform_customers \
                 WHEN NEW.email = '{POISONED_EMAIL}' BEGIN SELECT RAISE(ABORT, 'forced failure'); END;"
            ),
            Backend::Postgres => format!(
                "CREATE FUNCTION poisoned() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN \
                 IF NEW.email = '{POISONED_EMAIL}' THEN RAISE EXCEPTION 'forced failure'; END IF; \
                 RETURN NEW; END $$; \
                 CREATE TRIGGER poisoned BEFORE INSERT OR UPDATE ON platform_customers \
                 FOR EACH ROW EXECUTE FUNCTION poisoned();"
            ),
        });
    }

    /// Undoes [`TestDatabase::fail_customer_writes`].
    pub fn heal_customer_writes(&self) {
        self.execute(match self.backend() {
            Backend::Sqlite => "DROP TRIGGER poisoned_insert; DROP TRIGGER poisoned_update;",
            Backend::Postgres => {
                "DROP TRIGGER poisoned ON platform_customers; DROP FUNCTION poisoned();"
            }
        });
    }
}

impl TestDatabase {
    /// Removes the database now, cutting off whoever is connected: for tests of what happens
    /// when the database goes away. (A SQLite database is removed when the test ends.)
    pub fn destroy(&self) {
        if let Cleanup::Postgres { admin_url, name } = &self.cleanup
            && let Ok(mut admin) = PgConnection::establish(admin_url)
        {
            let _ =
                admin.batch_execute(&format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)"));
        }
    }
}

impl Drop for TestDatabase {
    fn drop(&mut self) {
        self.destroy();
    }
}

/// Turns `fn name(backend: Backend)` functions into one test per backend:
/// `sqlite::name` and `postgres::name`.
/// Two claimers of one queue, for the tests of its exclusivity: the first claims in a
/// transaction held open while the second claims. On PostgreSQL (`SKIP LOCKED`) the second must
/// not wait for the first; on SQLite it must wait until the first commits. `claim` gets the
/// claimer's name (`first`, `second`) and answers the ids it claimed. Panics when the waiting
/// rule is broken; returns both claimers' ids.
pub fn claim_concurrently<I, F>(backend: Backend, store: &Store, claim: F) -> (Vec<I>, Vec<I>)
where
    I: Send + 'static,
    F: Fn(&mut dyn Repositories, &str) -> Result<Vec<I>, DomainError> + Clone + Send + 'static,
{
    let (claimed_tx, claimed_rx) = mpsc::channel();
    let (release_tx, release_rx) = mpsc::channel::<()>();
    let first = {
        let (store, claim) = (store.clone(), claim.clone());
        thread::spawn(move || {
            store
                .write(|tx| {
                    claimed_tx
                        .send(claim(tx, "first")?)
                        .expect("the test waits for the first claim");
                    // Held open until the second claimer has had its chance.
                    release_rx
                        .recv()
                        .expect("the test releases the first claimer");
                    Ok(())
                })
                .expect("the first claimer's transaction commits");
        })
    };
    let first_ids = claimed_rx.recv().expect("the first claimer claims");
    let (second_tx, second_rx) = mpsc::channel();
    let second = {
        let store = store.clone();
        thread::spawn(move || {
            second_tx
                .send(store.write(|tx| claim(tx, "second")))
                .expect("the test waits for the second claim")
        })
    };
    let second_ids = match backend {
        Backend::Postgres => {
            let ids = second_rx
                .recv_timeout(Duration::from_secs(5))
                .expect("SKIP LOCKED: the second claimer does not wait for the first");
            release_tx.send(()).expect("the first claimer waits");
            ids
        }
        Backend::Sqlite => {
            assert!(
                second_rx.recv_timeout(Duration::from_millis(300)).is_err(),
                "the second claimer waits while the first one's transaction is open"
            );
            release_tx.send(()).expect("the first claimer waits");
            second_rx
                .recv_timeout(Duration::from_secs(5))
                .expect("the second claimer claims once the first commits")
        }
    };
    first.join().expect("the first claimer ends");
    second.join().expect("the second claimer ends");
    (
        first_ids,
        second_ids.expect("the second claimer's transaction commits"),
    )
}

#[macro_export]
macro_rules! backend_tests {
    ($($name:ident),+ $(,)?) => {
        mod sqlite {
            $(
                #[test]
                fn $name() {
                    super::$name($crate::Backend::Sqlite)
                }
            )+
        }
        mod postgres {
            $(
                #[test]
                fn $name() {
                    super::$name($crate::Backend::Postgres)
                }
            )+
        }
    };
}

/// Turns the test fn `name(db: &impl Database)` above it into `name::memory`, `name::sqlite`
/// and `name::postgres`, each on a database of its own: the in-memory database (the caller
/// depends on `mercer-domain` with its `testing` feature) and the store on both backends.
#[macro_export]
macro_rules! every_database {
    ($name:ident) => {
        mod $name {
            #[test]
            fn memory() {
                super::$name(&mercer_domain::testing::MemoryDatabase::default())
            }

            #[test]
            fn sqlite() {
                let (_db, store) = $crate::testing::TestDatabase::migrated($crate::Backend::Sqlite);
                super::$name(&store)
            }

            #[test]
            fn postgres() {
                let (_db, store) =
                    $crate::testing::TestDatabase::migrated($crate::Backend::Postgres);
                super::$name(&store)
            }
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_the_database_name() {
        assert_eq!(
            with_database("postgres://u@h:5432/postgres", "t1"),
            "postgres://u@h:5432/t1"
        );
        assert_eq!(
            with_database("postgres://u@h/postgres?sslmode=disable", "t1"),
            "postgres://u@h/t1?sslmode=disable"
        );
        assert_eq!(with_database("postgres://u@h", "t1"), "postgres://u@h/t1");
    }

    /// Without a database server, a test that needs one still fails, and says how to skip it
    /// or start the server instead of showing a bare connection error. (The test's name leaves
    /// out the database's, so that skipping those tests does not skip this one.)
    #[test]
    #[should_panic(expected = "cargo test -- --skip postgres")]
    fn a_database_server_that_does_not_answer_fails_saying_how_to_skip_its_tests() {
        // Port 1 on loopback: nothing listens there, so the connection is refused at once.
        postgres_admin("postgres://nobody@127.0.0.1:1/postgres");
    }

    #[test]
    fn the_message_names_every_way_out() {
        let message = postgres_down("postgres://u@h/postgres", "connection refused");
        for needed in [
            "connection refused",
            "cargo test -- --skip postgres",
            "pg_ctlcluster --skip-systemctl-redirect 15 main start",
            POSTGRES_URL_VAR,
            "cargo xtask test",
        ] {
            assert!(message.contains(needed), "{needed} missing from: {message}");
        }
    }
}
