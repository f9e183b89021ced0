//! `cargo xtask chaos`: the reliability suite's full form (docs/operations.md, "What Mercer
//! guarantees"; docs/testing.md). Runs, on SQLite and PostgreSQL (required):
//!
//! - the property tests of the parsers (`properties` of mercer-domain and mercer-signing) with
//!   5,000 cases each;
//! - the chaos scenarios (`tests/e2e/chaos`: kills, PostgreSQL stopped, SQLite out of space, a
//!   misbehaving connector, shop isolation) with `MERCER_CHAOS=full`: more rounds, more load;
//! - the kill tests of the scheduler and of syncs;
//!
//! then prints every scenario's figures as a table. `cargo xtask test` runs the same scenarios
//! in their short form.
//!
//! `cargo xtask chaos retention` runs the soak of the webhook retention instead
//! (`tests/e2e/chaos/retention.rs`, ignored in every other run), on both databases, printing its
//! samples as it goes: 10 minutes unless `MERCER_CHAOS_SOAK_SECS` says otherwise.

use std::process::Command;
use std::time::Instant;

use serde_json::Value;

/// Cases per property in the full form.
const PROPERTY_CASES: &str = "5000";

/// The e2e tests the suite runs: the chaos module and the kill tests kept with their features.
const SCENARIOS: [&str; 3] = [
    "chaos::",
    "a_sigkill_while_orders_are_placed",
    "a_sync_killed_midway",
];

/// The soak's tests, ignored in other runs.
const SOAK: &str = "chaos::retention::";

pub fn run(args: &[String]) -> Result<(), String> {
    let soak = match args {
        [] => false,
        [only] if only == "retention" => true,
        _ => return Err("usage: cargo xtask chaos [retention]".to_string()),
    };
    let started = Instant::now();
    let postgres = crate::test::postgres_url();
    if !crate::test::postgres_answers(&postgres) {
        return Err(format!(
            "PostgreSQL does not answer at {postgres}: the suite runs on both databases. Start it \
             (pg_ctlcluster --skip-systemctl-redirect 15 main start) or set MERCER_TEST_POSTGRES_URL."
        ));
    }
    let cargo = crate::cargo();
    crate::test::build_binaries(&cargo)?;
    let figures = figures_file()?;
    let _ = std::fs::remove_file(&figures);
    if soak {
        let passed = full_form(
            &cargo,
            &["test", "-p", "mercer-tests", "--test", "e2e"],
            &["--ignored", "--nocapture", "--test-threads", "1", SOAK],
        )?;
        print_figures(&figures);
        return if passed {
            Ok(())
        } else {
            Err("failed: the retention soak".to_string())
        };
    }

    let mut failed = Vec::new();
    let properties = [
        "test",
        "-p",
        "mercer-domain",
        "-p",
        "mercer-signing",
        "--test",
        "properties",
    ];
    if !full_form(&cargo, &properties, &[])? {
        failed.push("properties");
    }
    let mut scenarios = vec!["--test-threads", "2"];
    scenarios.extend(SCENARIOS);
    if !full_form(
        &cargo,
        &["test", "-p", "mercer-tests", "--test", "e2e"],
        &scenarios,
    )? {
        failed.push("scenarios");
    }

    print_figures(&figures);
    eprintln!(
        "xtask chaos: {:.0} s in all",
        started.elapsed().as_secs_f64()
    );
    if failed.is_empty() {
        Ok(())
    } else {
        Err(format!("failed: {}", failed.join(", ")))
    }
}

/// `cargo <args> -- <filters>` with the full form's settings; whether it passed.
fn full_form(cargo: &str, args: &[&str], filters: &[&str]) -> Result<bool, String> {
    eprintln!(
        "$ MERCER_CHAOS=full PROPTEST_CASES={PROPERTY_CASES} cargo {} -- {}",
        args.join(" "),
        filters.join(" ")
    );
    let status = Command::new(cargo)
        .current_dir(crate::workspace_root())
        .env("MERCER_CHAOS", "full")
        .env("PROPTEST_CASES", PROPERTY_CASES)
        .args(args)
        .arg("--")
        .args(filters)
        .status()
        .map_err(|error| format!("cannot run cargo: {error}"))?;
    Ok(status.success())
}

/// Where the scenarios write their figures: next to the debug binaries they ran.
fn figures_file() -> Result<std::path::PathBuf, String> {
    let current = std::env::current_dir().map_err(|error| error.to_string())?;
    let root = crate::workspace_root();
    Ok(
        crate::target_dir(std::env::var_os("CARGO_TARGET_DIR"), &current, &root)
            .join("debug/chaos-figures.jsonl"),
    )
}

/// One line a scenario and database, its figures as `name value` pairs.
fn print_figures(path: &std::path::Path) {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    println!();
    println!("| scenario | database | figures |");
    println!("|---|---|---|");
    for line in text.lines() {
        let Ok(entry) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        let figures: Vec<String> = entry["figures"]
            .as_object()
            .map(|figures| {
                figures
                    .iter()
                    .map(|(name, value)| format!("{name} {value}"))
                    .collect()
            })
            .unwrap_or_default();
        println!(
            "| {} | {} | {} |",
            entry["scenario"].as_str().unwrap_or("?"),
            entry["backend"].as_str().unwrap_or("?"),
            figures.join(", ")
        );
    }
}
