//! The files an operator deploys with: the systemd unit in `contrib/` is one systemd accepts.

use std::path::Path;
use std::process::Command;

use mercer_tests::mercer_binary;

/// `systemd-analyze verify` reads the unit as systemd would and reports every option it does
/// not know, every bad value and an `ExecStart` that is not executable. The unit names the
/// installed binary, so the check runs on a copy that names the binary under test. Machines
/// without systemd (some CI images, macOS) have no `systemd-analyze`: the check says so and
/// checks nothing else there.
#[test]
fn the_systemd_unit_passes_systemd_analyze_verify() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let unit = std::fs::read_to_string(root.join("contrib/mercer.service")).unwrap();
    assert!(
        unit.contains("ExecStart=/usr/local/bin/mercer "),
        "the unit runs the installed binary"
    );
    for option in [
        "DynamicUser=yes",
        "NoNewPrivileges=yes",
        "ProtectSystem=strict",
        "KillSignal=SIGTERM",
    ] {
        assert!(unit.contains(option), "the unit sets {option}");
    }

    if Command::new("systemd-analyze")
        .arg("--version")
        .output()
        .is_err()
    {
        eprintln!("systemd-analyze is not installed here: the unit's syntax was not verified");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("mercer.service");
    let binary = mercer_binary();
    std::fs::write(
        &copy,
        unit.replace("/usr/local/bin/mercer", &binary.display().to_string()),
    )
    .unwrap();
    let out = Command::new("systemd-analyze")
        .arg("verify")
        .arg(&copy)
        .output()
        .unwrap();
    // Lines about other units installed on the machine are not this unit's concern.
    let stderr = String::from_utf8_lossy(&out.stderr);
    let about_ours: Vec<&str> = stderr
        .lines()
        .filter(|line| line.contains("mercer.service"))
        .collect();
    assert!(
        out.status.success() && about_ours.is_empty(),
        "systemd-analyze verify: {}\n{stderr}",
        out.status
    );
}
