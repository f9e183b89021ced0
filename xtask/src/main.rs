//! `cargo xtask`: the project's tasks, in Rust so they run wherever cargo does.
//!
//! - `cargo xtask test [--require-postgres] [-- <cargo test args>]`: the whole suite on SQLite,
//!   and on PostgreSQL when one answers; prints which backends ran.
//! - `cargo xtask test --quick`: a contributor's first run: unit tests, the crates' integration
//!   tests and a short end-to-end selection, SQLite only, nothing installed; its summary says it
//!   was the quick subset.
//! - `cargo xtask ci`: what CI runs: fmt check, clippy -D warnings, tidy, test --require-postgres.
//! - `cargo xtask chaos`: the reliability suite's full form on both databases, with every
//!   scenario's figures (docs/operations.md, "What Mercer guarantees"); `chaos retention`: the
//!   soak of the webhook retention (tables stay flat; `MERCER_CHAOS_SOAK_SECS`).
//! - `cargo xtask tidy [--manifest-path PATH]`: the layering invariants of docs/ARCHITECTURE.md.
//! - `cargo xtask fuzz-api [--seconds N]`: schemathesis against a live `mercer` on SQLite and
//!   PostgreSQL, N seconds each (default 600); prints cases run and failures found.
//! - `cargo xtask openapi`: writes `docs/openapi.json` from the code (a test fails while the
//!   committed file differs).
//! - `cargo xtask bench ingest|dispatch|subscriptions|scheduler|console|mixed|vendure|imports|budgets`:
//!   builds the release binaries, then runs the benchmark in release mode and prints its figures
//!   (docs/benchmarks.md); `vendure` measures the Vendure connector against the pinned Vendure,
//!   `imports` a CSV import of 100,000 subscriptions. `--against REV` (a git revision, or a
//!   `mercer` binary) also runs it with that baseline, database by database in the same
//!   session, and prints the two outputs side by side.
//! - `cargo xtask mutants [TARGET…] [-- ARGS]`: cargo-mutants over the code listed in
//!   docs/testing.md (not part of CI).
//! - `cargo xtask vendure [--port 3000] [--database sqlite|postgres]`: the pinned Vendure with the
//!   Mercer plugin, installed into `target/vendure`, seeded, in the foreground.

mod bench;
mod bench_against;
mod bench_analytics;
mod bench_apply;
mod bench_budgets;
mod bench_console;
mod bench_dispatch;
mod bench_imports;
mod bench_mixed;
mod bench_scheduler;
mod bench_subscriptions;
mod bench_vendure;
mod chaos;
mod composition;
mod features;
mod mutants;
mod test;
mod tidy;
mod vendure;

use std::process::{Command, ExitCode};

fn usage() -> ExitCode {
    eprintln!(
        "usage: cargo xtask <task>\n\n\
         tasks:\n  \
         test [--require-postgres] [-- ARGS]   the whole suite on SQLite and PostgreSQL\n  \
         test --quick [-- ARGS]                a quick subset for contributors: unit, store and a\n                                        few e2e tests, SQLite only, installs nothing;\n                                        NOT a full pass (no PostgreSQL, no slow phases)\n  \
         ci                                    fmt check, clippy, tidy, test --require-postgres\n  \
         chaos                                 the reliability suite, full form, with its figures\n  \
         chaos retention                       the webhook retention soak (10 min; MERCER_CHAOS_SOAK_SECS)\n  \
         tidy [--manifest-path PATH]           check the crate layering invariants\n  \
         bench ingest|dispatch|subscriptions|scheduler|console|mixed|vendure|imports|budgets\n                                               the ingest, webhook, List Subscriptions, scheduler, console,\n                                               mixed-load, Vendure connector, CSV import or request budgets benchmark;\n                                               --against REV: side by side with REV's build\n  \
         openapi                               write docs/openapi.json from the code\n  \
         fuzz-api [--seconds N]                schemathesis on both databases, N s each (600)\n  \
         mutants [TARGET...] [-- ARGS]         cargo-mutants over signing, events, access, guard\n  \
         vendure [--port N] [--database sqlite|postgres]\n                                               a seeded Vendure with the Mercer plugin, in the foreground"
    );
    ExitCode::from(2)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(task) = args.first() else {
        return usage();
    };
    if matches!(task.as_str(), "--help" | "-h" | "help") {
        usage();
        return ExitCode::SUCCESS;
    }
    let rest = &args[1..];
    let result = match task.as_str() {
        "test" => {
            let mut phases = test::Phases::default();
            let result = test::run(rest, &mut phases);
            phases.print();
            // Last on the screen, so a quick run never reads as the whole suite's pass.
            let quick = rest
                .iter()
                .take_while(|arg| *arg != "--")
                .any(|arg| arg == "--quick");
            if quick && result.is_ok() {
                eprintln!(
                    "xtask test --quick: the QUICK subset passed (SQLite only); PostgreSQL and \
                     the slow phases did not run"
                );
            }
            result
        }
        "ci" => ci(),
        "chaos" => chaos::run(rest),
        "tidy" => tidy::run(rest),
        "mutants" => mutants::run(rest),
        "fuzz-api" => fuzz_api(rest),
        "vendure" => vendure::run(rest),
        "openapi" => run_step(
            &cargo(),
            &[
                "run",
                "--quiet",
                "-p",
                "mercer-server",
                "--bin",
                "mercer",
                "--",
                "openapi",
                "--output",
                "docs/openapi.json",
            ],
        ),
        "bench" => bench(rest),
        // Internal: the release-mode halves of `bench`.
        "bench-run-ingest" => match processes_flag(&rest[rest.len().min(1)..]) {
            Ok(None) => bench::ingest(
                rest.first().map_or("", String::as_str),
                &std::env::current_exe()
                    .map(|p| p.display().to_string())
                    .unwrap_or_default(),
            ),
            Ok(Some(counts)) => {
                bench_apply::processes(rest.first().map_or("", String::as_str), &counts)
            }
            Err(error) => Err(error),
        },
        "bench-floor" => bench::floor_server(rest.iter().any(|arg| arg == "--handoff")),
        "bench-run-dispatch" => bench_dispatch::dispatch(rest.first().map_or("", String::as_str)),
        "bench-run-subscriptions" => {
            bench_subscriptions::subscriptions(rest.first().map_or("", String::as_str))
        }
        "bench-run-scheduler" => {
            bench_scheduler::scheduler(rest.first().map_or("", String::as_str))
        }
        "bench-run-console" => bench_console::console(rest.first().map_or("", String::as_str)),
        "bench-run-analytics" => {
            bench_analytics::analytics(rest.first().map_or("", String::as_str))
        }
        "bench-run-mixed" => bench_mixed::mixed(rest.first().map_or("", String::as_str)),
        "bench-run-vendure" => bench_vendure::vendure(rest.first().map_or("", String::as_str)),
        "bench-run-imports" => bench_imports::imports(rest.first().map_or("", String::as_str)),
        "bench-run-budgets" => bench_budgets::budgets(rest.first().map_or("", String::as_str)),
        _ => return usage(),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("xtask {task}: {message}");
            ExitCode::FAILURE
        }
    }
}

/// Runs a command from the workspace root, failing with its name when it fails.
pub fn run_step(program: &str, args: &[&str]) -> Result<(), String> {
    eprintln!("$ {program} {}", args.join(" "));
    let status = Command::new(program)
        .args(args)
        .current_dir(workspace_root())
        .status()
        .map_err(|error| format!("cannot run {program}: {error}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("`{program} {}` failed ({status})", args.join(" ")))
    }
}

pub fn cargo() -> String {
    std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string())
}

pub fn workspace_root() -> std::path::PathBuf {
    let manifest_dir = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    manifest_dir
        .parent()
        .map(std::path::Path::to_path_buf)
        .unwrap_or(manifest_dir)
}

/// Where cargo puts its builds: `CARGO_TARGET_DIR` when set (relative to the directory cargo
/// was run in, as cargo reads it), else the workspace's `target`.
fn target_dir(
    from_env: Option<std::ffi::OsString>,
    current: &std::path::Path,
    root: &std::path::Path,
) -> std::path::PathBuf {
    match from_env.filter(|dir| !dir.is_empty()) {
        Some(dir) => current.join(dir),
        None => root.join("target"),
    }
}

/// Builds release binaries, then runs the benchmark's load generator in release mode.
fn bench(args: &[String]) -> Result<(), String> {
    let run = match args.first().map(String::as_str) {
        Some("ingest") => "bench-run-ingest",
        Some("dispatch") => "bench-run-dispatch",
        Some("subscriptions") => "bench-run-subscriptions",
        Some("scheduler") => "bench-run-scheduler",
        Some("console") => "bench-run-console",
        Some("analytics") => "bench-run-analytics",
        Some("mixed") => "bench-run-mixed",
        Some("vendure") => "bench-run-vendure",
        Some("imports") => "bench-run-imports",
        Some("budgets") => "bench-run-budgets",
        _ => {
            return Err(
                "usage: cargo xtask bench ingest [--processes 1,2,4]|dispatch|subscriptions|scheduler|console|analytics|mixed|vendure|imports|budgets [--against REV]"
                    .to_string(),
            );
        }
    };
    let cargo = cargo();
    let mut build = vec!["build", "--release", "-p", "mercer-server", "-p", "xtask"];
    if run == "bench-run-scheduler" {
        build.extend(["-p", "mercer-platform-sim"]);
    }
    if run == "bench-run-vendure" {
        build.extend(["-p", "mercer-vendure"]);
    }
    // Checked before the build, which takes minutes.
    let (rest, against) = bench_against::split_against(&args[1..])?;
    if run == "bench-run-ingest" {
        processes_flag(&rest)?;
    } else if !rest.is_empty() {
        return Err(format!("bench {}: unknown arguments {rest:?}", args[0]));
    }
    let current = std::env::current_dir().map_err(|error| error.to_string())?;
    let target = target_dir(
        std::env::var_os("CARGO_TARGET_DIR"),
        &current,
        &workspace_root(),
    );
    // The baseline is built first: both builds share `release/`.
    let baseline = match &against {
        Some(against) => {
            let packages: Vec<&str> = build[2..].iter().copied().filter(|a| *a != "-p").collect();
            Some(bench_against::baseline_binary(against, &target, &packages)?)
        }
        None => None,
    };
    run_step(&cargo, &build)?;
    let release = target.join("release");
    let mercer = release.join("mercer");
    let xtask = release.join("xtask").display().to_string();
    if let Some(baseline) = baseline {
        return bench_against::side_by_side(&xtask, run, &baseline, &mercer, &rest);
    }
    let mercer = mercer.display().to_string();
    let mut run_args = vec![run, mercer.as_str()];
    run_args.extend(rest.iter().map(String::as_str));
    run_step(&xtask, &run_args)
}

/// `--processes 1,2,4` of `bench ingest`: the process counts of the apply scale-out run, or
/// None without the flag.
fn processes_flag(args: &[String]) -> Result<Option<Vec<usize>>, String> {
    match args {
        [] => Ok(None),
        [flag, counts] if flag == "--processes" => {
            let counts: Vec<usize> = counts
                .split(',')
                .map(|n| n.trim().parse::<usize>())
                .collect::<Result<_, _>>()
                .map_err(|_| format!("--processes {counts}: expected counts such as 1,2,4"))?;
            if counts.is_empty() || counts.contains(&0) {
                return Err("--processes: each count is 1 or more".to_string());
            }
            Ok(Some(counts))
        }
        _ => Err("usage: cargo xtask bench ingest [--processes 1,2,4]".to_string()),
    }
}

/// The schema fuzzer's long run: the `fuzz_api` test with a longer budget, one database at a
/// time, its figures shown. PostgreSQL is required.
fn fuzz_api(args: &[String]) -> Result<(), String> {
    let seconds = match args {
        [] => "600".to_string(),
        [flag, value] if flag == "--seconds" && value.parse::<u64>().is_ok() => value.clone(),
        _ => return Err("usage: cargo xtask fuzz-api [--seconds N]".to_string()),
    };
    let cargo = cargo();
    run_step(&cargo, &["build", "-p", "mercer-server", "--bin", "mercer"])?;
    eprintln!("$ MERCER_FUZZ_SECONDS={seconds} cargo test -p mercer-tests --test fuzz_api");
    let status = Command::new(&cargo)
        .current_dir(workspace_root())
        .env("MERCER_FUZZ_SECONDS", &seconds)
        .args(["test", "-p", "mercer-tests", "--test", "fuzz_api", "--"])
        .args(["--nocapture", "--test-threads", "1"])
        .status()
        .map_err(|error| format!("cannot run cargo test: {error}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!(
            "schemathesis found failures ({status}); the reports are in target/fuzz-api"
        ))
    }
}

/// fmt, clippy, tidy, then every test with PostgreSQL and the browser required; prints the
/// wall time of each phase at the end, whatever happened.
fn ci() -> Result<(), String> {
    let mut phases = test::Phases::default();
    let result = ci_phases(&mut phases);
    phases.print();
    result?;
    eprintln!("xtask ci: all checks passed");
    Ok(())
}

fn ci_phases(phases: &mut test::Phases) -> Result<(), String> {
    let cargo = cargo();
    phases.time("clippy", || {
        run_step(&cargo, &["fmt", "--all", "--check"])?;
        run_step(
            &cargo,
            &[
                "clippy",
                "--workspace",
                "--all-targets",
                "--",
                "-D",
                "warnings",
            ],
        )?;
        tidy::run(&[])
    })?;
    test::run(
        &[
            "--require-postgres".to_string(),
            "--require-browser".to_string(),
        ],
        phases,
    )
}

#[cfg(test)]
mod tests {
    use super::target_dir;
    use std::path::Path;

    #[test]
    fn the_target_dir_follows_cargo_target_dir() {
        let (current, root) = (Path::new("/work/here"), Path::new("/work/repo"));
        assert_eq!(
            target_dir(None, current, root),
            Path::new("/work/repo/target")
        );
        assert_eq!(
            target_dir(Some("/elsewhere/t".into()), current, root),
            Path::new("/elsewhere/t")
        );
        assert_eq!(
            target_dir(Some("build".into()), current, root),
            Path::new("/work/here/build")
        );
        assert_eq!(
            target_dir(Some("".into()), current, root),
            Path::new("/work/repo/target")
        );
    }
}
