//! `cargo xtask test`: the whole suite on SQLite, and on PostgreSQL when one answers.
//!
//! Tests that need PostgreSQL have `postgres` in their names. When PostgreSQL does not answer
//! they are left out and the summary says so; with `--require-postgres` (CI) that is a failure.

use std::io::{BufRead, BufReader};
use std::net::{TcpStream, ToSocketAddrs};
use std::process::{Command, Stdio};
use std::time::Duration;

const POSTGRES_URL_VAR: &str = "MERCER_TEST_POSTGRES_URL";
const DEFAULT_POSTGRES_URL: &str = "postgres://postgres@127.0.0.1:5432/postgres";

/// `host:port` of a postgres:// URL (5432 when it names no port).
fn host_and_port(url: &str) -> Option<String> {
    let rest = url.split_once("://")?.1;
    let authority = rest.split(['/', '?']).next()?;
    let host = authority
        .rsplit_once('@')
        .map_or(authority, |(_, host)| host);
    if host.is_empty() {
        return None;
    }
    let has_port = host
        .rsplit_once(':')
        .is_some_and(|(_, port)| port.parse::<u16>().is_ok())
        && !host.ends_with(']');
    Some(if has_port {
        host.to_string()
    } else {
        format!("{host}:5432")
    })
}

fn postgres_answers(url: &str) -> bool {
    let Some(address) = host_and_port(url) else {
        return false;
    };
    let Ok(addresses) = address.to_socket_addrs() else {
        return false;
    };
    addresses
        .into_iter()
        .any(|address| TcpStream::connect_timeout(&address, Duration::from_secs(2)).is_ok())
}

#[derive(Default)]
struct Tally {
    passed: usize,
    failed: usize,
    ignored: usize,
}

impl Tally {
    fn count(&mut self, outcome: &str) {
        match outcome {
            "ok" => self.passed += 1,
            "FAILED" => self.failed += 1,
            _ => self.ignored += 1,
        }
    }

    fn describe(&self) -> String {
        format!("{} passed, {} failed", self.passed, self.failed)
    }
}

pub fn run(args: &[String]) -> Result<(), String> {
    let (own, passthrough) = match args.iter().position(|a| a == "--") {
        Some(split) => (&args[..split], &args[split + 1..]),
        None => (args, &[][..]),
    };
    let mut require_postgres = false;
    for arg in own {
        match arg.as_str() {
            "--require-postgres" => require_postgres = true,
            other => {
                return Err(format!(
                    "unknown option {other}; usage: cargo xtask test [--require-postgres] [-- ARGS]"
                ));
            }
        }
    }

    let postgres_url =
        std::env::var(POSTGRES_URL_VAR).unwrap_or_else(|_| DEFAULT_POSTGRES_URL.to_string());
    let postgres_up = postgres_answers(&postgres_url);
    let postgres_where = host_and_port(&postgres_url).unwrap_or_else(|| postgres_url.clone());
    if !postgres_up && require_postgres {
        return Err(format!(
            "PostgreSQL does not answer at {postgres_where}, and --require-postgres was given. Start it \
             (pg_ctlcluster --skip-systemctl-redirect 15 main start) or set {POSTGRES_URL_VAR}."
        ));
    }

    let cargo = crate::cargo();
    // The end-to-end suite starts the real binary: build it first, in the test profile's folder.
    crate::run_step(&cargo, &["build", "-p", "mercer-server", "--bin", "mercer"])?;

    // The browser test leaves this file when Chromium cannot be installed; say so at the end.
    let browser_skipped = crate::workspace_root().join("target/test-verifiers/BROWSER_SKIPPED");
    let _ = std::fs::remove_file(&browser_skipped);

    let mut command = Command::new(&cargo);
    command
        .current_dir(crate::workspace_root())
        .args(["test", "--workspace", "--"]);
    if !postgres_up {
        command.args(["--skip", "postgres"]);
    }
    command.args(passthrough).stdout(Stdio::piped());
    eprintln!(
        "$ cargo test --workspace -- {}",
        if postgres_up { "" } else { "--skip postgres" }
    );
    let mut child = command
        .spawn()
        .map_err(|error| format!("cannot run cargo test: {error}"))?;

    let (mut sqlite, mut postgres, mut other) =
        (Tally::default(), Tally::default(), Tally::default());
    if let Some(stdout) = child.stdout.take() {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            println!("{line}");
            // libtest prints `test <name> ... <outcome>`.
            if let Some((name, outcome)) = line
                .strip_prefix("test ")
                .and_then(|rest| rest.rsplit_once(" ... "))
            {
                let tally = if name.contains("postgres") {
                    &mut postgres
                } else if name.contains("sqlite") {
                    &mut sqlite
                } else {
                    &mut other
                };
                tally.count(outcome.trim());
            }
        }
    }
    let status = child
        .wait()
        .map_err(|error| format!("cargo test did not finish: {error}"))?;

    println!();
    println!("Backends:");
    println!("  SQLite      {}", sqlite.describe());
    if postgres_up {
        println!(
            "  PostgreSQL  {}  (at {postgres_where})",
            postgres.describe()
        );
    } else {
        println!(
            "  PostgreSQL  NOT RUN: nothing answers at {postgres_where}. Start it with \
             `pg_ctlcluster --skip-systemctl-redirect 15 main start`; CI requires it."
        );
    }
    println!("  other tests {}", other.describe());
    let total = Tally {
        passed: sqlite.passed + postgres.passed + other.passed,
        failed: sqlite.failed + postgres.failed + other.failed,
        ignored: sqlite.ignored + postgres.ignored + other.ignored,
    };
    println!("{}, {} skipped", total.describe(), total.ignored);
    if let Ok(reason) = std::fs::read_to_string(&browser_skipped) {
        let rule = "!".repeat(78);
        println!("{rule}\n{reason}\n{rule}");
    }

    if !status.success() {
        return Err("some tests failed".to_string());
    }
    if postgres_up && postgres.passed == 0 {
        return Err("PostgreSQL answered but no PostgreSQL test ran".to_string());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_host_and_port() {
        assert_eq!(
            host_and_port("postgres://postgres@127.0.0.1:5432/postgres").as_deref(),
            Some("127.0.0.1:5432")
        );
        assert_eq!(
            host_and_port("postgres://u:p@db.internal/mercer?sslmode=require").as_deref(),
            Some("db.internal:5432")
        );
        assert_eq!(
            host_and_port("postgresql://localhost:6000").as_deref(),
            Some("localhost:6000")
        );
        assert_eq!(host_and_port("not a url"), None);
    }
}
