//! `cargo xtask bench <name> --against <commit or binary>`: the benchmark run with a baseline
//! `mercer` and with this build in one session, database by database (baseline first, then
//! this build, on the same machine minutes apart), and their output printed side by side. A
//! change to a hot path is judged against the commit before it this way rather than against
//! figures from another day, whose machine load was different.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Splits `--against X` out of a benchmark's arguments: the rest, and X.
pub fn split_against(args: &[String]) -> Result<(Vec<String>, Option<String>), String> {
    let mut rest = Vec::new();
    let mut against = None;
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        if arg == "--against" {
            let value = args
                .next()
                .ok_or("--against takes a commit (any git revision) or a `mercer` binary")?;
            against = Some(value.clone());
        } else {
            rest.push(arg.clone());
        }
    }
    Ok((rest, against))
}

/// The baseline `mercer` for `against`: the file itself when it names one, else the release
/// build of that git revision, made once in a temporary worktree with the same packages as
/// this build (the platform simulator beside it when built) and kept in
/// `target/bench-baseline/<commit>/`. Must run before this build's own release build: both
/// share the target directory's `release/` folder.
pub fn baseline_binary(against: &str, target: &Path, packages: &[&str]) -> Result<PathBuf, String> {
    let as_file = PathBuf::from(against);
    if as_file.is_file() {
        return Ok(as_file);
    }
    let commit = git(&["rev-parse", "--short=12", &format!("{against}^{{commit}}")])?;
    let kept = target.join("bench-baseline").join(&commit);
    let mercer = kept.join("mercer");
    if mercer.is_file() {
        eprintln!("baseline {commit}: using {}", mercer.display());
        return Ok(mercer);
    }
    let worktree = std::env::temp_dir().join(format!("mercer-baseline-{commit}"));
    let worktree_text = worktree.display().to_string();
    let _ = git(&["worktree", "remove", "--force", &worktree_text]);
    git(&["worktree", "add", "--detach", &worktree_text, &commit])?;
    let built = build_release(&worktree, target, packages);
    let _ = git(&["worktree", "remove", "--force", &worktree_text]);
    built?;
    std::fs::create_dir_all(&kept).map_err(|e| format!("{}: {e}", kept.display()))?;
    for binary in ["mercer", "mercer-platform-sim"] {
        let from = target.join("release").join(binary);
        if from.is_file() {
            std::fs::copy(&from, kept.join(binary))
                .map_err(|e| format!("cannot keep {}: {e}", from.display()))?;
        }
    }
    Ok(mercer)
}

fn build_release(worktree: &Path, target: &Path, packages: &[&str]) -> Result<(), String> {
    let mut args = vec!["build", "--release"];
    for package in packages {
        args.extend(["-p", package]);
    }
    eprintln!(
        "$ (baseline in {}) cargo {}",
        worktree.display(),
        args.join(" ")
    );
    let status = Command::new(crate::cargo())
        .args(&args)
        .current_dir(worktree)
        .env("CARGO_TARGET_DIR", target)
        .status()
        .map_err(|error| format!("cannot run cargo: {error}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("the baseline's build failed ({status})"))
    }
}

fn git(args: &[&str]) -> Result<String, String> {
    let output = Command::new("git")
        .args(args)
        .current_dir(crate::workspace_root())
        .output()
        .map_err(|error| format!("cannot run git: {error}"))?;
    if !output.status.success() {
        return Err(format!(
            "git {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&output.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&output.stdout).trim().to_string())
}

/// Runs `xtask <run> <binary> <args>` for the baseline, then for this build, on each database
/// in turn (`MERCER_BENCH_DATABASE` still picks one), and prints the two outputs side by side:
/// a line both print alike once, lines that differ as a `before`/`after` pair.
pub fn side_by_side(
    xtask: &str,
    run: &str,
    baseline: &Path,
    current: &Path,
    args: &[String],
) -> Result<(), String> {
    let databases: Vec<&str> = match std::env::var("MERCER_BENCH_DATABASE").as_deref() {
        Ok("sqlite") => vec!["sqlite"],
        Ok("postgres") => vec!["postgres"],
        _ => vec!["sqlite", "postgres"],
    };
    println!(
        "before: {}\nafter:  {}",
        baseline.display(),
        current.display()
    );
    for database in databases {
        let before = captured(xtask, run, baseline, args, database)?;
        let after = captured(xtask, run, current, args, database)?;
        println!("\n=== {database}: before / after ===");
        print_pairs(&before, &after);
    }
    Ok(())
}

fn captured(
    xtask: &str,
    run: &str,
    binary: &Path,
    args: &[String],
    database: &str,
) -> Result<Vec<String>, String> {
    eprintln!(
        "$ MERCER_BENCH_DATABASE={database} {xtask} {run} {}",
        binary.display()
    );
    let output = Command::new(xtask)
        .arg(run)
        .arg(binary)
        .args(args)
        .env("MERCER_BENCH_DATABASE", database)
        .stderr(Stdio::inherit())
        .output()
        .map_err(|error| format!("cannot run {xtask}: {error}"))?;
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    if !output.status.success() {
        print!("{text}");
        return Err(format!(
            "{run} {} failed ({})",
            binary.display(),
            output.status
        ));
    }
    Ok(text.lines().map(str::to_string).collect())
}

fn print_pairs(before: &[String], after: &[String]) {
    for index in 0..before.len().max(after.len()) {
        let (old, new) = (before.get(index), after.get(index));
        if old == new {
            println!("{}", old.map_or("", String::as_str));
            continue;
        }
        if let Some(old) = old {
            println!("before {old}");
        }
        if let Some(new) = new {
            println!("after  {new}");
        }
    }
}
