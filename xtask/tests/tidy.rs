//! `cargo xtask tidy` run for real: on this workspace it passes; on a workspace whose domain
//! crate depends on diesel, or whose features import what they may not, it fails and says why.

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
            "helper depends on actix-web, which only mercer-server, mercer-platform-sim, mercer-vendure, xtask may use"
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

/// A clean fake workspace whose domain has these feature files (path under `src/`, text).
fn workspace_with_features(files: &[(&str, &str)]) -> tempfile::TempDir {
    let workspace = fake_workspace("");
    let src = workspace.path().join("mercer-domain/src");
    for (path, text) in files {
        write(&src.join(path), text);
    }
    workspace
}

fn tidy_stderr(workspace: &tempfile::TempDir) -> (bool, String) {
    let output = tidy(&workspace.path().join("Cargo.toml"));
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn tidy_fails_when_a_feature_imports_a_feature_it_may_not_use() {
    let workspace = workspace_with_features(&[
        ("kernel/mod.rs", "pub struct Error;\n"),
        ("access/mod.rs", "use crate::kernel::Error;\n"),
        (
            "platform/mod.rs",
            "use crate::access::Shop;\nuse crate::webhooks::Endpoint;\n",
        ),
        ("webhooks/mod.rs", "use crate::kernel::Error;\n"),
    ]);
    let (passed, stderr) = tidy_stderr(&workspace);
    assert!(!passed, "tidy must fail: {stderr}");
    assert!(
        stderr.contains("domain feature `platform` imports `webhooks`"),
        "{stderr}"
    );
    assert!(!stderr.contains("imports `access`"), "{stderr}");
}

#[test]
fn tidy_fails_on_an_import_cycle_between_features() {
    let workspace = workspace_with_features(&[
        ("kernel/mod.rs", "use crate::access::Shop;\n"),
        ("access/mod.rs", "use crate::kernel::Error;\n"),
    ]);
    let (passed, stderr) = tidy_stderr(&workspace);
    assert!(!passed, "tidy must fail: {stderr}");
    assert!(
        stderr.contains("import cycle between domain features: access -> kernel -> access"),
        "{stderr}"
    );
    assert!(stderr.contains("the kernel uses no feature"), "{stderr}");
}

#[test]
fn tidy_fails_when_a_feature_imports_the_combined_ports() {
    let workspace = workspace_with_features(&[
        ("kernel/mod.rs", ""),
        ("platform/mod.rs", "use crate::ports::Repositories;\n"),
    ]);
    let (passed, stderr) = tidy_stderr(&workspace);
    assert!(!passed, "tidy must fail: {stderr}");
    assert!(
        stderr.contains("domain feature `platform` imports `crate::ports`"),
        "{stderr}"
    );
}

#[test]
fn tidy_fails_when_the_architecture_table_and_the_allowed_edges_differ() {
    let workspace = workspace_with_features(&[
        ("kernel/mod.rs", ""),
        ("directory/mod.rs", ""),
        ("platform/mod.rs", ""),
    ]);
    let doc = workspace.path().join("docs/ARCHITECTURE.md");
    let row = "| `directory` | `platform` | the directory lists the platform's customers |\n";
    write(&doc, &format!("| from | to | why |\n|---|---|---|\n{row}"));
    let (passed, stderr) = tidy_stderr(&workspace);
    assert!(passed, "{stderr}");
    write(
        &doc,
        "| from | to | why |\n|---|---|---|\n| `platform` | `directory` | no |\n",
    );
    let (passed, stderr) = tidy_stderr(&workspace);
    assert!(!passed, "tidy must fail: {stderr}");
    assert!(
        stderr.contains("lacks `directory` → `platform`")
            && stderr.contains("names the feature edge `platform` → `directory`"),
        "{stderr}"
    );
}

#[test]
fn tidy_lets_tests_use_any_feature() {
    let workspace = workspace_with_features(&[
        ("kernel/mod.rs", ""),
        (
            "platform/mod.rs",
            "use crate::kernel::X;\n#[cfg(test)]\nmod tests {\n    use crate::webhooks::Endpoint;\n}\n",
        ),
        ("webhooks/mod.rs", ""),
    ]);
    let (passed, stderr) = tidy_stderr(&workspace);
    assert!(passed, "{stderr}");
}

#[test]
fn tidy_fails_when_a_route_folder_imports_another_feature() {
    let workspace = workspace_with_features(&[("kernel/mod.rs", ""), ("webhooks/mod.rs", "")]);
    let root = workspace.path();
    fake_crate(root, "mercer-server", "");
    write(
        &root.join("mercer-server/src/http/routes/overrides/mod.rs"),
        "use mercer_domain::{kernel::X, webhooks::Endpoint};\n",
    );
    write(&root.join("mercer-domain/src/overrides/mod.rs"), "");
    let manifest = root.join("Cargo.toml");
    let text = fs::read_to_string(&manifest)
        .unwrap()
        .replace("\"actix-web\"]", "\"actix-web\", \"mercer-server\"]");
    fs::write(&manifest, text).unwrap();
    let (passed, stderr) = tidy_stderr(&workspace);
    assert!(!passed, "tidy must fail: {stderr}");
    assert!(
        stderr.contains("imports the domain's `webhooks`"),
        "{stderr}"
    );
}
