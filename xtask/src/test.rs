//! `cargo xtask test`: the whole suite on SQLite, and on PostgreSQL when one answers.
//!
//! Tests that need PostgreSQL have `postgres` in their names. When PostgreSQL does not answer
//! they are left out and the summary says so; with `--require-postgres` (CI) that is a failure.
//!
//! `--quick` is the contributor's first run: the unit tests, the crates' own integration tests
//! (the store's among them) and a short end-to-end selection, on SQLite only, installing nothing
//! (no npm, PyPI, Chromium or Vendure). Its summary says in capitals what it left out.

use std::io::{BufRead, BufReader};
use std::net::{TcpStream, ToSocketAddrs};
use std::process::{Command, Stdio};
use std::time::Duration;

const POSTGRES_URL_VAR: &str = "MERCER_TEST_POSTGRES_URL";
const DEFAULT_POSTGRES_URL: &str = "postgres://postgres@127.0.0.1:5432/postgres";

/// The end-to-end tests `--quick` runs, on SQLite: the front door (credentials, scopes, error
/// bodies, health), request ids, event ingest, the box builder and the process lifecycle. Each
/// starts the real binary; none installs anything, and together they take well under a minute.
const QUICK_E2E: &[&str] = &[
    "foundation::sqlite::",
    "request_ids::sqlite::",
    "events::sqlite::",
    "box_builder::sqlite::",
    "lifecycle::sqlite::",
];

/// What `--quick` leaves out, for its summary.
const QUICK_LEFT_OUT: &str = "PostgreSQL, the doctests and the embed example, the rest of the \
     end-to-end suite, the README walkthroughs, the signature verifiers (npm, PyPI), the schema \
     fuzzer, Vendure and the browser test";

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

pub(crate) fn postgres_answers(url: &str) -> bool {
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

/// Builds the binaries the end-to-end tests start (Mercer, the platform simulator and the Vendure
/// connector), in the test profile's folder.
pub(crate) fn build_binaries(cargo: &str) -> Result<(), String> {
    crate::run_step(
        cargo,
        &[
            "build",
            "-p",
            "mercer-server",
            "--bin",
            "mercer",
            "-p",
            "mercer-platform-sim",
            "--bin",
            "mercer-platform-sim",
            "-p",
            "mercer-vendure",
            "--bin",
            "mercer-vendure",
        ],
    )
}

/// The PostgreSQL server the tests make their databases on.
pub(crate) fn postgres_url() -> String {
    std::env::var(POSTGRES_URL_VAR).unwrap_or_else(|_| DEFAULT_POSTGRES_URL.to_string())
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

pub fn run(args: &[String], phases: &mut Phases) -> Result<(), String> {
    let (own, passthrough) = match args.iter().position(|a| a == "--") {
        Some(split) => (&args[..split], &args[split + 1..]),
        None => (args, &[][..]),
    };
    let (mut require_postgres, mut require_browser, mut quick) = (false, false, false);
    for arg in own {
        match arg.as_str() {
            "--require-postgres" => require_postgres = true,
            "--require-browser" => require_browser = true,
            "--quick" => quick = true,
            other => {
                return Err(format!(
                    "unknown option {other}; usage: cargo xtask test [--quick] \
                     [--require-postgres] [--require-browser] [-- ARGS]"
                ));
            }
        }
    }
    if quick {
        if require_postgres || require_browser {
            return Err(
                "--quick runs on SQLite only and skips the browser: it cannot require them"
                    .to_string(),
            );
        }
        return run_quick(passthrough, phases);
    }

    let postgres_url = postgres_url();
    let postgres_up = postgres_answers(&postgres_url);
    let postgres_where = host_and_port(&postgres_url).unwrap_or_else(|| postgres_url.clone());
    if !postgres_up && require_postgres {
        return Err(format!(
            "PostgreSQL does not answer at {postgres_where}, and --require-postgres was given. Start it \
             (pg_ctlcluster --skip-systemctl-redirect 15 main start) or set {POSTGRES_URL_VAR}."
        ));
    }

    let cargo = crate::cargo();
    // The browser test leaves this file when Chromium cannot be installed; say so at the end.
    // It is in the target folder the tests run from: CARGO_TARGET_DIR's when set (relative to
    // the workspace root, where the cargo steps below run), not always the workspace's `target`.
    let root = crate::workspace_root();
    let browser_skipped = crate::target_dir(std::env::var_os("CARGO_TARGET_DIR"), &root, &root)
        .join("test-verifiers/BROWSER_SKIPPED");
    let _ = std::fs::remove_file(&browser_skipped);

    // Everything is compiled first, so the phases after it time the tests alone. The end-to-end
    // suite starts the real binaries (Mercer, and the simulator the README walkthrough runs):
    // they are built too, in the test profile's folder.
    phases.time("build", || {
        build_binaries(&cargo)?;
        crate::run_step(&cargo, &["test", "--workspace", "--no-run"])
    })?;

    let mut run = TestRun {
        cargo: &cargo,
        skip_postgres: !postgres_up,
        passthrough,
        tallies: Tallies::default(),
        failed_phases: Vec::new(),
    };
    // The browser runs last and alone: it is slow, and Chromium wants the cores to itself.
    run.unit_and_store(phases)?;
    // The doctests (the crates' entry points, as their docs show them), and the embedding
    // example run as a user would run it.
    phases.time("docs", || {
        run.phase("docs", &["--workspace", "--doc"], &[])?;
        crate::run_step(
            &cargo,
            &["run", "-q", "-p", "mercer-store", "--example", "embed"],
        )
    })?;
    // The e2e tests mostly wait (on servers, retries, receivers): 4 at a time on 2 cores took
    // 74 s where 2 took 115 s, and 6 gained nothing more (docs/benchmarks.md).
    let e2e_filters: &[&str] = if passthrough
        .iter()
        .any(|arg| arg.starts_with("--test-threads"))
    {
        &["--skip", "browser", "--skip", "vendure"]
    } else {
        &[
            "--skip",
            "browser",
            "--skip",
            "vendure",
            "--test-threads",
            "4",
        ]
    };
    phases.time("e2e", || {
        run.phase("e2e", &["-p", "mercer-tests", "--test", "e2e"], e2e_filters)
    })?;
    // Schemathesis against the real binary on both databases, briefly (tests/fuzz_api); it runs
    // alone, after the e2e suite, so its time budget buys requests rather than waits.
    phases.time("fuzz-api", || {
        run.phase(
            "fuzz-api",
            &["-p", "mercer-tests", "--test", "fuzz_api"],
            &[],
        )
    })?;

    // Filters given after `--` are OR'd with the phase's own: with some, the Vendure and browser
    // phases run only if they name them, and then by their filter alone, so no test runs twice.
    let filtered = !passthrough.is_empty();
    // The tests with a real Vendure share one Vendure (one Node.js process): on their own, after
    // the e2e suite, their calls take milliseconds rather than the seconds they take among it.
    if !filtered || passthrough.iter().any(|arg| arg.contains("vendure")) {
        let own_filter: &[&str] = if filtered {
            &[]
        } else {
            &["vendure", "--test-threads", "3"]
        };
        phases.time("vendure", || {
            run.phase(
                "vendure",
                &["-p", "mercer-tests", "--test", "e2e"],
                own_filter,
            )
        })?;
    }
    if !filtered || passthrough.iter().any(|arg| arg.contains("browser")) {
        let own_filter: &[&str] = if filtered { &[] } else { &["browser"] };
        phases.time("browser", || {
            run.phase(
                "browser",
                &["-p", "mercer-tests", "--test", "e2e"],
                own_filter,
            )
        })?;
    }

    let Tallies {
        sqlite,
        postgres,
        other,
    } = &run.tallies;
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
    let browser_was_skipped = std::fs::read_to_string(&browser_skipped).ok();
    if let Some(reason) = &browser_was_skipped {
        let rule = "!".repeat(78);
        println!("{rule}\n{reason}\n{rule}");
    }

    if !run.failed_phases.is_empty() {
        return Err(format!(
            "some tests failed (phases: {})",
            run.failed_phases.join(", ")
        ));
    }
    if postgres_up && postgres.passed == 0 {
        return Err("PostgreSQL answered but no PostgreSQL test ran".to_string());
    }
    if require_browser && browser_was_skipped.is_some() {
        return Err(
            "the browser test was skipped, and --require-browser was given (CI installs Chromium)"
                .to_string(),
        );
    }
    Ok(())
}

/// `cargo xtask test --quick`: the build, the unit tests, the crates' integration tests and
/// [`QUICK_E2E`], every one on SQLite; PostgreSQL is not even asked.
fn run_quick(passthrough: &[String], phases: &mut Phases) -> Result<(), String> {
    let cargo = crate::cargo();
    phases.time("build", || {
        build_binaries(&cargo)?;
        crate::run_step(&cargo, &["test", "--workspace", "--no-run"])
    })?;
    let mut run = TestRun {
        cargo: &cargo,
        skip_postgres: true,
        passthrough,
        tallies: Tallies::default(),
        failed_phases: Vec::new(),
    };
    run.unit_and_store(phases)?;
    phases.time("e2e-quick", || {
        run.phase(
            "e2e-quick",
            &["-p", "mercer-tests", "--test", "e2e"],
            QUICK_E2E,
        )
    })?;

    let Tallies {
        sqlite,
        postgres,
        other,
    } = &run.tallies;
    let total = Tally {
        passed: sqlite.passed + postgres.passed + other.passed,
        failed: sqlite.failed + postgres.failed + other.failed,
        ignored: sqlite.ignored + postgres.ignored + other.ignored,
    };
    let rule = "!".repeat(78);
    println!();
    println!("{rule}");
    println!("QUICK SUBSET ONLY (cargo xtask test --quick): this is not a full pass.");
    println!("Backends:");
    println!("  SQLite      {}", sqlite.describe());
    println!("  PostgreSQL  NOT RUN (--quick)");
    println!("  other tests {}", other.describe());
    println!("{}, {} skipped", total.describe(), total.ignored);
    println!("NOT RUN: {QUICK_LEFT_OUT}.");
    println!("Run `cargo xtask test` (with PostgreSQL up) before sending a change.");
    println!("{rule}");
    if !run.failed_phases.is_empty() {
        return Err(format!(
            "some tests of the QUICK subset failed (phases: {})",
            run.failed_phases.join(", ")
        ));
    }
    Ok(())
}

#[derive(Default)]
struct Tallies {
    sqlite: Tally,
    postgres: Tally,
    other: Tally,
}

impl Tallies {
    /// Counts a libtest line, `test <name> ... <outcome>`, by the backend its name says.
    fn count(&mut self, line: &str) {
        if let Some((name, outcome)) = line
            .strip_prefix("test ")
            .and_then(|rest| rest.rsplit_once(" ... "))
        {
            let tally = if name.contains("postgres") {
                &mut self.postgres
            } else if name.contains("sqlite") {
                &mut self.sqlite
            } else {
                &mut self.other
            };
            tally.count(outcome.trim());
        }
    }
}

/// The `cargo test` runs of one `cargo xtask test`, counted together.
struct TestRun<'a> {
    cargo: &'a str,
    skip_postgres: bool,
    passthrough: &'a [String],
    tallies: Tallies,
    failed_phases: Vec<&'static str>,
}

impl TestRun<'_> {
    /// The first two phases of every run: the crates' unit tests, then their own integration
    /// tests (the store's among them).
    fn unit_and_store(&mut self, phases: &mut Phases) -> Result<(), String> {
        phases.time("unit", || {
            self.phase("unit", &["--workspace", "--lib", "--bins"], &[])
        })?;
        phases.time("store", || {
            self.phase(
                "store",
                &["--workspace", "--exclude", "mercer-tests", "--test", "*"],
                &[],
            )
        })
    }

    /// `cargo test <selection> -- <filters> [--skip postgres] <passthrough>`, its output shown
    /// and counted. A failure is noted and the next phases still run.
    fn phase(
        &mut self,
        name: &'static str,
        selection: &[&str],
        filters: &[&str],
    ) -> Result<(), String> {
        let mut args: Vec<&str> = vec!["test"];
        args.extend_from_slice(selection);
        args.push("--");
        args.extend_from_slice(filters);
        if self.skip_postgres {
            args.extend_from_slice(&["--skip", "postgres"]);
        }
        args.extend(self.passthrough.iter().map(String::as_str));
        eprintln!("$ cargo {}", args.join(" "));
        let mut child = Command::new(self.cargo)
            .current_dir(crate::workspace_root())
            .args(&args)
            .stdout(Stdio::piped())
            .spawn()
            .map_err(|error| format!("cannot run cargo test: {error}"))?;
        if let Some(stdout) = child.stdout.take() {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                println!("{line}");
                self.tallies.count(&line);
            }
        }
        let status = child
            .wait()
            .map_err(|error| format!("cargo test did not finish: {error}"))?;
        if !status.success() {
            self.failed_phases.push(name);
        }
        Ok(())
    }
}

/// Wall times of `cargo xtask ci`'s phases, printed as a table at the end.
#[derive(Default)]
pub struct Phases(Vec<(&'static str, std::time::Duration)>);

impl Phases {
    pub fn time<T>(&mut self, name: &'static str, work: impl FnOnce() -> T) -> T {
        let started = std::time::Instant::now();
        let result = work();
        self.0.push((name, started.elapsed()));
        result
    }

    pub fn print(&self) {
        let total: std::time::Duration = self.0.iter().map(|(_, took)| *took).sum();
        eprintln!();
        eprintln!("{:<10} {:>9}", "phase", "wall time");
        for (name, took) in &self.0 {
            eprintln!("{name:<10} {:>8.1}s", took.as_secs_f64());
        }
        eprintln!("{:<10} {:>8.1}s", "total", total.as_secs_f64());
    }
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
