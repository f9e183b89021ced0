//! A fresh database for every test, on either backend, so tests run in parallel and never see
//! each other's rows: a temporary SQLite file, or a PostgreSQL database of its own that is
//! dropped when the test ends.
//!
//! PostgreSQL is reached at `MERCER_TEST_POSTGRES_URL` (default
//! `postgres://postgres@127.0.0.1:5432/postgres`); that user must be allowed to create databases.
//! A test on PostgreSQL fails when none answers. Every such test has `postgres` in its name
//! (`backend_tests!` puts them in a `postgres` module): `cargo xtask test` leaves them out, and
//! says so, when PostgreSQL is down and `--require-postgres` was not given.

use diesel::PgConnection;
use diesel::connection::SimpleConnection;
use diesel::prelude::*;

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
            Backend::Postgres => {
                let admin_url = postgres_admin_url();
                let mut suffix = [0u8; 6];
                getrandom::fill(&mut suffix).expect("no random source");
                let name = format!(
                    "mercer_test_{}_{}",
                    std::process::id(),
                    suffix
                        .iter()
                        .map(|b| format!("{b:02x}"))
                        .collect::<String>()
                );
                let mut admin = PgConnection::establish(&admin_url).unwrap_or_else(|error| {
                    panic!(
                        "PostgreSQL does not answer at {admin_url} ({error}). Start it \
                         (pg_ctlcluster --skip-systemctl-redirect 15 main start), set \
                         {POSTGRES_URL_VAR}, or run `cargo xtask test`, which leaves PostgreSQL \
                         tests out when none is running"
                    )
                });
                admin
                    .batch_execute(&format!("CREATE DATABASE \"{name}\""))
                    .expect("cannot create a test database");
                TestDatabase {
                    url: DatabaseUrl::Postgres {
                        url: with_database(&admin_url, &name),
                    },
                    cleanup: Cleanup::Postgres { admin_url, name },
                }
            }
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
        let database = TestDatabase::create(backend);
        let store = database.open_store();
        store
            .migrate()
            .expect("migrations must apply to a fresh database");
        (database, store)
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
}
