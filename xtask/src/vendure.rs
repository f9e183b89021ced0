//! `cargo xtask vendure [--port 3000] [--database sqlite|postgres]`: installs the pinned Vendure
//! under `target/vendure` (once per lockfile), seeds it on its first start (a channel in US
//! dollars, a tax zone, shipping and payment methods, products with variants, a customer with a
//! Shop API password), and runs it with the Mercer plugin in the foreground. Once Vendure
//! answers it prints `Admin API: URL`, `API key: KEY` and `Customer: EMAIL password: PASSWORD`.
//! Vendure's telemetry is off. `MERCER_VENDURE_DATA_DIR` puts its data elsewhere than
//! `target/vendure/data-sqlite` (or `data-postgres`).

use mercer_vendure::dev::{self, Database, Options};

const USAGE: &str = "usage: cargo xtask vendure [--port 3000] [--database sqlite|postgres]";

/// Where Vendure keeps its data instead of `target/vendure/data-{database}`.
const DATA_DIR_VAR: &str = "MERCER_VENDURE_DATA_DIR";

/// The PostgreSQL database `--database postgres` keeps Vendure's data in.
const POSTGRES_URL: &str = "postgres://postgres@127.0.0.1:5432/mercer_vendure";

fn options(args: &[String], target: &std::path::Path) -> Result<Options, String> {
    let mut port = 3000;
    let mut database = Database::Sqlite;
    let mut rest = args.iter();
    while let Some(flag) = rest.next() {
        let value = rest.next().ok_or(USAGE)?;
        match flag.as_str() {
            "--port" => port = value.parse().map_err(|_| USAGE)?,
            "--database" if value == "sqlite" => database = Database::Sqlite,
            "--database" if value == "postgres" => {
                database = Database::Postgres(POSTGRES_URL.to_string())
            }
            _ => return Err(USAGE.to_string()),
        }
    }
    let data = match database {
        Database::Sqlite => "data-sqlite",
        Database::Postgres(_) => "data-postgres",
    };
    // Tests that run the README keep their Vendure apart from a developer's.
    let data_dir = match std::env::var_os(DATA_DIR_VAR).filter(|dir| !dir.is_empty()) {
        Some(dir) => std::path::PathBuf::from(dir),
        None => target.join("vendure").join(data),
    };
    Ok(Options {
        port,
        data_dir,
        database,
        quiet: true,
        exit_with_parent: None,
    })
}

pub fn run(args: &[String]) -> Result<(), String> {
    let root = crate::workspace_root();
    let current = std::env::current_dir().unwrap_or_else(|_| root.clone());
    let target = crate::target_dir(std::env::var_os("CARGO_TARGET_DIR"), &current, &root);
    let options = options(args, &target)?;
    let node_modules = dev::install(&target.join("vendure"))?;
    let status = dev::command(&node_modules, &options)
        .status()
        .map_err(|error| format!("cannot run node: {error}"))?;
    match status.success() {
        true => Ok(()),
        false => Err(format!("Vendure stopped ({status})")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(text: &str) -> Vec<String> {
        text.split_whitespace().map(str::to_string).collect()
    }

    #[test]
    fn flags_choose_the_port_and_the_database_and_nothing_else_is_taken() {
        let target = std::path::Path::new("/t");
        let plain = options(&[], target).unwrap();
        assert_eq!(plain.port, 3000);
        assert_eq!(plain.database, Database::Sqlite);
        assert_eq!(plain.data_dir, target.join("vendure/data-sqlite"));
        let chosen = options(&args("--port 3100 --database postgres"), target).unwrap();
        assert_eq!(chosen.port, 3100);
        assert_eq!(
            chosen.database,
            Database::Postgres(POSTGRES_URL.to_string())
        );
        assert_eq!(chosen.data_dir, target.join("vendure/data-postgres"));
        for wrong in ["--port", "--port x", "--database mysql", "--verbose on"] {
            assert!(options(&args(wrong), target).is_err(), "{wrong}");
        }
    }
}
