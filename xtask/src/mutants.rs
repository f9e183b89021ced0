//! `cargo xtask mutants [TARGET…] [-- CARGO-MUTANTS ARGS]`: cargo-mutants over the code whose
//! tests must catch every change: the signatures, the event apply rule, the scope and access
//! checks and the SSRF guard. Not part of CI (it takes minutes); the report and every mutant
//! that survives on purpose are in docs/testing.md.
//!
//! Each target is one cargo-mutants run, one mutant at a time, in a build directory of its own
//! (`target/mutants/build`, kept between runs so dependencies are built once). Mutants that
//! survive and are not in [`EQUIVALENT`] fail the task.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// What one cargo-mutants run mutates.
struct Target {
    name: &'static str,
    what: &'static str,
    package: &'static str,
    /// The files mutated (all of the package's when empty).
    files: &'static [&'static str],
    /// Only the mutants whose names match (cargo-mutants' `--re`), within `files`. Always give
    /// files with it: cargo-mutants 27 lets struct-field deletions of other files through.
    names: Option<&'static str>,
}

const TARGETS: &[Target] = &[
    Target {
        name: "signing",
        what: "mercer-signing: X-HMAC, draft-cavage Signature, Standard Webhooks, x-svc-signature",
        package: "mercer-signing",
        files: &[],
        names: None,
    },
    Target {
        name: "events",
        what: "the event apply rule: decide_save, decide_delete, next_state, apply_events",
        package: "mercer-domain",
        files: &["crates/domain/src/platform/events.rs"],
        names: Some(
            r"\b(decide_save|decide_delete|next_state|apply_events?|Working::(is_live|from_record))\b",
        ),
    },
    Target {
        name: "access",
        what: "the scope and access checks: authorize, check_scope, Scope, ScopeSet, hash_token",
        package: "mercer-domain",
        files: &[
            "crates/domain/src/access/auth.rs",
            "crates/domain/src/access/credentials.rs",
        ],
        names: Some(r"\b(authorize|authorize_hashed|check_scope|hash_token)\b|Scope"),
    },
    Target {
        name: "guard",
        what: "the SSRF guard: forbidden, PrivateAddressGuard, GuardedResolver",
        package: "mercer-outbound",
        files: &[
            "crates/outbound/src/address.rs",
            "crates/outbound/src/guard.rs",
            "crates/outbound/src/resolver.rs",
        ],
        names: None,
    },
];

/// Mutants that survive because no test could tell them apart from the code: (file, mutant
/// without its line and column, why). docs/testing.md lists them too.
const EQUIVALENT: &[(&str, &str, &str)] = &[(
    "crates/outbound/src/address.rs",
    "replace | with ^ in embedded_ipv4",
    "(high << 16) and a u16 share no bit, so | and ^ give the same address",
)];

const INSTALL: &str = "cargo-mutants is not installed: install it with \
                       `cargo install cargo-mutants --locked` (version 27 or later)";

pub fn run(args: &[String]) -> Result<(), String> {
    let (names, extra) = match args.iter().position(|arg| arg == "--") {
        Some(at) => (&args[..at], &args[at + 1..]),
        None => (args, &[][..]),
    };
    let chosen: Vec<&Target> = if names.is_empty() {
        TARGETS.iter().collect()
    } else {
        names
            .iter()
            .map(|name| {
                TARGETS
                    .iter()
                    .find(|target| target.name == name.as_str())
                    .ok_or_else(|| {
                        let known: Vec<&str> = TARGETS.iter().map(|t| t.name).collect();
                        format!(
                            "no target {name}; targets: {}\n\
                             usage: cargo xtask mutants [TARGET…] [-- CARGO-MUTANTS ARGS]",
                            known.join(", ")
                        )
                    })
            })
            .collect::<Result<_, _>>()?
    };
    let cargo = crate::cargo();
    let installed = Command::new(&cargo)
        .args(["mutants", "--version"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success());
    if !installed {
        return Err(INSTALL.to_string());
    }
    let root = crate::workspace_root();
    let current = std::env::current_dir().map_err(|error| error.to_string())?;
    let base =
        crate::target_dir(std::env::var_os("CARGO_TARGET_DIR"), &current, &root).join("mutants");
    let mut reports = Vec::new();
    for target in chosen {
        for file in target.files {
            if !root.join(file).is_file() {
                return Err(format!(
                    "{}: {file} does not exist; update TARGETS in xtask/src/mutants.rs",
                    target.name
                ));
            }
        }
        let output = base.join(target.name);
        std::fs::create_dir_all(&output)
            .map_err(|error| format!("cannot create {}: {error}", output.display()))?;
        let code = mutate(&cargo, &root, target, &base.join("build"), &output, extra)?;
        // 0: all caught; 2: some missed; 3: some timed out. Anything else is no result.
        if !matches!(code, Some(0 | 2 | 3)) {
            return Err(format!(
                "{}: cargo mutants failed (exit {code:?}); its log is in {}",
                target.name,
                output.join("mutants.out").display()
            ));
        }
        let report = Report::read(&output.join("mutants.out"))?;
        if report.total() == 0 {
            return Err(format!(
                "{}: no mutants; were its files or functions renamed?",
                target.name
            ));
        }
        reports.push((target, report));
    }
    print_reports(&reports)
}

fn mutate(
    cargo: &str,
    root: &Path,
    target: &Target,
    build: &Path,
    output: &Path,
    extra: &[String],
) -> Result<Option<i32>, String> {
    let mut command = Command::new(cargo);
    command.args(["mutants", "--package", target.package]);
    for file in target.files {
        command.args(["--file", file]);
    }
    if let Some(names) = target.names {
        command.args(["--re", names]);
    }
    // One mutant at a time unless asked otherwise: they share one build directory.
    if !extra
        .iter()
        .any(|arg| arg.starts_with("-j") || arg.starts_with("--jobs"))
    {
        command.args(["--jobs", "1"]);
    }
    command
        .arg("--output")
        .arg(output)
        .args(extra)
        .env("CARGO_TARGET_DIR", build)
        .current_dir(root);
    eprintln!("\n== {}: {}", target.name, target.what);
    let status = command
        .status()
        .map_err(|error| format!("cannot run cargo mutants: {error}"))?;
    Ok(status.code())
}

/// The outcomes of one run, as cargo-mutants lists them in `mutants.out`.
#[derive(Debug, Default, PartialEq, Eq)]
struct Report {
    caught: usize,
    missed: Vec<String>,
    unviable: usize,
    timeouts: Vec<String>,
}

impl Report {
    fn read(dir: &Path) -> Result<Report, String> {
        let lines = |name: &str| -> Result<Vec<String>, String> {
            let path: PathBuf = dir.join(name);
            let text = std::fs::read_to_string(&path)
                .map_err(|error| format!("cannot read {}: {error}", path.display()))?;
            Ok(text
                .lines()
                .filter(|line| !line.trim().is_empty())
                .map(str::to_string)
                .collect())
        };
        Ok(Report {
            caught: lines("caught.txt")?.len(),
            missed: lines("missed.txt")?,
            unviable: lines("unviable.txt")?.len(),
            timeouts: lines("timeout.txt")?,
        })
    }

    fn total(&self) -> usize {
        self.caught + self.missed.len() + self.unviable + self.timeouts.len()
    }
}

/// `crates/x/src/a.rs:23:75: replace | with ^ in f` as (`crates/x/src/a.rs`, `replace | with ^
/// in f`): the mutant without its line and column, which move as the file changes.
fn without_position(mutant: &str) -> Option<(&str, &str)> {
    let (file, rest) = mutant.split_once(':')?;
    let (_line, rest) = rest.split_once(':')?;
    let (_column, rest) = rest.split_once(':')?;
    Some((file, rest.trim()))
}

/// Why a surviving mutant is harmless, if it is one of [`EQUIVALENT`].
fn explained(mutant: &str) -> Option<&'static str> {
    let (file, name) = without_position(mutant)?;
    EQUIVALENT
        .iter()
        .find(|(f, n, _)| *f == file && *n == name)
        .map(|(_, _, why)| *why)
}

fn print_reports(reports: &[(&Target, Report)]) -> Result<(), String> {
    eprintln!(
        "\n{:<10} {:>7} {:>7} {:>9} {:>9}",
        "target", "caught", "missed", "unviable", "timeouts"
    );
    for (target, report) in reports {
        eprintln!(
            "{:<10} {:>7} {:>7} {:>9} {:>9}",
            target.name,
            report.caught,
            report.missed.len(),
            report.unviable,
            report.timeouts.len()
        );
    }
    let mut unexplained = Vec::new();
    for (_, report) in reports {
        for mutant in &report.missed {
            match explained(mutant) {
                Some(why) => eprintln!("missed, equivalent: {mutant}\n    {why}"),
                None => unexplained.push(mutant.as_str()),
            }
        }
        for mutant in &report.timeouts {
            eprintln!("timed out (the tests did not finish; counted apart): {mutant}");
        }
    }
    if unexplained.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{} mutant(s) survived that no test catches:\n  {}\n\
             kill each with a test, or explain it in docs/testing.md and EQUIVALENT",
            unexplained.len(),
            unexplained.join("\n  ")
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mutant_is_known_by_its_file_and_change_not_its_position() {
        assert_eq!(
            without_position("crates/outbound/src/address.rs:23:75: replace | with ^ in f"),
            Some(("crates/outbound/src/address.rs", "replace | with ^ in f"))
        );
        assert!(
            explained("crates/outbound/src/address.rs:40:1: replace | with ^ in embedded_ipv4")
                .is_some()
        );
        assert_eq!(
            explained("crates/outbound/src/address.rs:23:75: replace | with & in embedded_ipv4"),
            None
        );
        assert_eq!(
            explained("crates/outbound/src/guard.rs:23:75: replace | with ^ in embedded_ipv4"),
            None
        );
    }

    #[test]
    fn the_report_counts_each_outcome_file() {
        let dir = tempfile::tempdir().unwrap();
        for (name, text) in [
            ("caught.txt", "a.rs:1:1: one\na.rs:2:1: two\n"),
            ("missed.txt", "a.rs:3:1: three\n"),
            ("unviable.txt", ""),
            ("timeout.txt", "a.rs:4:1: four\n"),
        ] {
            std::fs::write(dir.path().join(name), text).unwrap();
        }
        let report = Report::read(dir.path()).unwrap();
        assert_eq!(
            report,
            Report {
                caught: 2,
                missed: vec!["a.rs:3:1: three".to_string()],
                unviable: 0,
                timeouts: vec!["a.rs:4:1: four".to_string()],
            }
        );
        assert_eq!(report.total(), 4);
    }

    #[test]
    fn every_targets_files_exist() {
        let root = crate::workspace_root();
        for target in TARGETS {
            for file in target.files {
                assert!(root.join(file).is_file(), "{}: {file}", target.name);
            }
        }
    }
}
