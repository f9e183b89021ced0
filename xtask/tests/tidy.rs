//! `cargo xtask tidy` run for real: on this workspace it passes; on a workspace whose domain
//! crate depends on diesel it fails and says why.

#![allow(clippy::unwrap_used)] // test code: a panic is a failed assertion

use std::fs;
use std::path::Path;
use std::process::Command;

fn write(path: &Path, text: &str) {
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, text).unwrap();
}

fn fake_crate(root: &Path, name: &str, dependencies: &str) {
    write(
        &root.join(name).join("Cargo.toml"),
        &format!(
            "[package]\nname = \"{name}\"\nversion = \"0.1.0\"\nedition = \"2024\"\n\n[dependencies]\n{dependencies}"
        ),
    );
    write(&root.join(name).join("src/lib.rs"), "");
}

fn tidy(manifest: &Path) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_xtask"))
        .args(["tidy", "--manifest-path"])
        .arg(manifest)
        .output()
        .unwrap()
}

/// A workspace of path crates, so `cargo metadata` needs no registry.
fn fake_workspace(domain_dependencies: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(
        &root.join("Cargo.toml"),
        "[workspace]\nresolver = \"3\"\nmembers = [\"mercer-domain\", \"mercer-store\", \"diesel\", \"actix-web\"]\n",
    );
    fake_crate(root, "diesel", "");
    fake_crate(root, "actix-web", "");
    fake_crate(
        root,
        "mercer-store",
        "mercer-domain = { path = \"../mercer-domain\" }\ndiesel = { path = \"../diesel\" }\n",
    );
    fake_crate(root, "mercer-domain", domain_dependencies);
    dir
}

#[test]
fn tidy_passes_on_a_clean_layering() {
    let workspace = fake_workspace("");
    let output = tidy(&workspace.path().join("Cargo.toml"));
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

#[test]
fn tidy_fails_when_the_domain_depends_on_diesel() {
    let workspace = fake_workspace("diesel = { path = \"../diesel\" }\n");
    let output = tidy(&workspace.path().join("Cargo.toml"));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "tidy must fail: {stderr}");
    assert!(
        stderr.contains("mercer-domain must do no I/O, but depends on diesel"),
        "{stderr}"
    );
}

#[test]
fn tidy_fails_when_the_domain_reaches_actix_through_another_crate() {
    let workspace = fake_workspace("helper = { path = \"../helper\" }\n");
    let root = workspace.path();
    fake_crate(root, "helper", "actix-web = { path = \"../actix-web\" }\n");
    let manifest = root.join("Cargo.toml");
    let text = fs::read_to_string(&manifest)
        .unwrap()
        .replace("\"actix-web\"]", "\"actix-web\", \"helper\"]");
    fs::write(&manifest, text).unwrap();
    let output = tidy(&manifest);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(
        stderr.contains("mercer-domain -> helper -> actix-web"),
        "{stderr}"
    );
    assert!(
        stderr.contains(
            "helper depends on actix-web, which only mercer-server, mercer-platform-sim, xtask may use"
        ),
        "{stderr}"
    );
}

#[test]
fn tidy_passes_on_this_workspace() {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("../Cargo.toml");
    let output = tidy(&manifest);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}
