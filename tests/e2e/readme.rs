//! The README's walkthroughs, run word for word by bash on a fresh database: Mercer started with
//! the README's command, then the shell blocks of "Connecting a platform" (customers, the
//! catalogue) and "Selling a subscription box", until the platform holds the box order they
//! lead to. The block of "For connector authors" runs too, on its own: the simulator it starts
//! passes `mercer conformance`. `cargo run --release -p PACKAGE -- ARGS` runs the binaries this suite built (a
//! `cargo` on the front of `PATH` that does only that: the build is the suite's); the
//! placeholder lines `SHOP=...` and `TOKEN=...` take what Mercer printed.
//!
//! "Connect a Vendure shop" runs the same way, with the pinned Vendure that `cargo xtask
//! vendure` starts (its data in the test's folder).
//!
//! The portal block of "Selling a subscription box" runs once the order is there, with the
//! values the walkthrough made (kept by the test in a file the script writes last): its entry
//! answers 303 with the session cookie, and the page greets the customer.
//!
//! The walkthroughs listen on the README's ports (8080, 9090, 3000, 4100): the runs take
//! turns.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use mercer_tests::{Backend, TestDatabase, backend_tests, mercer_binary};

/// One walkthrough at a time: they listen on the same ports.
static PORTS: Mutex<()> = Mutex::new(());

fn readme() -> String {
    std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md")).unwrap()
}

/// The indented shell blocks after `heading`, up to the next `## ` heading.
fn blocks_of(readme: &str, heading: &str) -> Vec<String> {
    let start = readme
        .find(heading)
        .unwrap_or_else(|| panic!("no {heading}"));
    let section = &readme[start + heading.len()..];
    let section = &section[..section.find("\n## ").unwrap_or(section.len())];
    let mut blocks = Vec::new();
    let mut current: Vec<&str> = Vec::new();
    for line in section.lines() {
        if let Some(code) = line.strip_prefix("    ") {
            current.push(code);
        } else if line.trim().is_empty() && !current.is_empty() {
            current.push("");
        } else if !current.is_empty() {
            blocks.push(current.join("\n").trim_end().to_string());
            current.clear();
        }
    }
    if !current.is_empty() {
        blocks.push(current.join("\n").trim_end().to_string());
    }
    blocks
}

/// A `cargo` that runs `cargo run [-q] --release -p PACKAGE -- ARGS` as the built binary.
fn cargo_shim(dir: &Path) -> PathBuf {
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let sim = mercer_binary().with_file_name("mercer-platform-sim");
    let vendure = mercer_binary().with_file_name("mercer-vendure");
    // `cargo xtask` runs the xtask binary `cargo xtask test` built (beside the others).
    let xtask = mercer_binary().with_file_name("xtask");
    let script = format!(
        "#!/bin/sh\nif [ \"$1\" = \"xtask\" ]; then shift; exec '{}' \"$@\"; fi\nwhile [ \"$1\" != \"--\" ]; do\n  if [ \"$1\" = \"-p\" ]; then shift; package=\"$1\"; fi\n  shift\ndone\nshift\ncase \"$package\" in\n  mercer-server) exec '{}' \"$@\" ;;\n  mercer-platform-sim) exec '{}' \"$@\" ;;\n  mercer-vendure) exec '{}' \"$@\" ;;\nesac\necho \"the walkthrough runs no other package: $package\" >&2\nexit 2\n",
        xtask.display(),
        mercer_binary().display(),
        sim.display(),
        vendure.display()
    );
    let path = bin.join("cargo");
    std::fs::write(&path, script).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    bin
}

fn shell(dir: &Path, bin: &Path, database: &TestDatabase) -> Command {
    let mut command = Command::new("bash");
    command
        .current_dir(dir)
        .env(
            "PATH",
            format!(
                "{}:{}",
                bin.display(),
                std::env::var("PATH").unwrap_or_default()
            ),
        )
        .env("DATABASE_URL", database.url_string())
        // The scheduler looks every second rather than every minute: the order comes sooner.
        .env("MERCER_SCHEDULER_INTERVAL_MS", "1000")
        .env("MERCER_LOG", "warn");
    command
}

/// A command run in a process group of its own (with what it starts in the background),
/// killed on the way out whatever happens.
struct Group(Child);

impl Group {
    fn spawn(command: &mut Command) -> Group {
        use std::os::unix::process::CommandExt;
        Group(command.process_group(0).spawn().unwrap())
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", "--", &format!("-{}", self.0.id())])
            .status();
        let _ = self.0.wait();
    }
}

/// Starts Mercer with the README's command; its group, and the shop and token it prints.
fn start_mercer(
    readme: &str,
    dir: &Path,
    bin: &Path,
    database: &TestDatabase,
) -> (Group, String, String) {
    let marker = "so run Mercer with\n`";
    let start = readme
        .find(marker)
        .expect("the README says how to run Mercer")
        + marker.len();
    let serve = &readme[start..start + readme[start..].find('`').unwrap()];
    assert!(serve.contains("--allow-private-targets"), "{serve}");
    let mut command = shell(dir, bin, database);
    command
        .args(["-c", &format!("exec {serve}")])
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let mut mercer = Group::spawn(&mut command);
    let stdout = mercer.0.stdout.take().unwrap();
    let (mut shop, mut token) = (String::new(), String::new());
    for line in BufReader::new(stdout).lines() {
        let line = line.unwrap();
        let value = line
            .split_whitespace()
            .last()
            .unwrap_or_default()
            .to_string();
        if line.trim_start().starts_with("shop_identifier") {
            shop = value;
        } else if line.trim_start().starts_with("API token") {
            token = value;
        } else if line.starts_with("Mercer listening") {
            break;
        }
    }
    assert!(
        !shop.is_empty() && !token.is_empty(),
        "Mercer printed no demo credentials"
    );
    (mercer, shop, token)
}

fn the_readme_walkthroughs_run_word_for_word(backend: Backend) {
    let _turn = PORTS.lock().unwrap_or_else(|e| e.into_inner());
    let readme = readme();
    let dir = tempfile::tempdir().unwrap();
    let bin = cargo_shim(dir.path());
    let database = TestDatabase::create(backend);
    let (_mercer, shop, token) = start_mercer(&readme, dir.path(), &bin, &database);

    let connecting = blocks_of(&readme, "## Connecting a platform");
    let selling = blocks_of(&readme, "## Selling a subscription box");
    assert!(
        connecting.len() >= 2 && selling.len() >= 3,
        "{connecting:?} {selling:?}"
    );
    let without_placeholders = connecting[0]
        .lines()
        .filter(|line| !line.starts_with("SHOP=...") && !line.starts_with("TOKEN=..."))
        .collect::<Vec<_>>()
        .join("\n");
    // What the portal block uses of the walkthrough's values, kept for it.
    let script = format!(
        "set -euo pipefail\nexport SHOP='{shop}' TOKEN='{token}'\n{without_placeholders}\n{}\n{}\n\
         declare -p API CUSTOMER SHOPPER > walkthrough-values\n",
        connecting[1], selling[0]
    );
    // Its output goes to a file: the simulator it starts in the background would hold a pipe
    // open after the script ends.
    let log = dir.path().join("walkthrough.log");
    let mut command = shell(dir.path(), &bin, &database);
    command
        .args(["-c", &script])
        .stdout(std::fs::File::create(&log).unwrap())
        .stderr(std::fs::File::options().append(true).open(&log).unwrap());
    // The simulator the script starts in the background stays in the script's group.
    let mut walk = Group::spawn(&mut command);
    let status = walk.0.wait().unwrap();
    assert!(
        status.success(),
        "the walkthrough stopped:\n{}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    // The last block, once the order date has come: the platform holds the order. It uses the
    // `json` helper the box block defines.
    let helper: Vec<&str> = selling[0]
        .lines()
        .take_while(|line| !line.starts_with("API="))
        .collect();
    let check = format!("set -euo pipefail\n{}\n{}\n", helper.join("\n"), selling[1]);
    let started = Instant::now();
    let order = loop {
        let mut command = shell(dir.path(), &bin, &database);
        let answer = command
            .env("SHOP", &shop)
            .args(["-c", &check])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&answer.stdout).into_owned();
        if answer.status.success() && text.contains("kale") {
            break text;
        }
        assert!(
            started.elapsed() < Duration::from_secs(150),
            "no box order on the platform: {text} {}",
            String::from_utf8_lossy(&answer.stderr)
        );
        std::thread::sleep(Duration::from_secs(2));
    };
    // Three kales chosen, at the catalogue's price.
    assert!(order.contains("'quantity': 3"), "{order}");
    assert!(order.contains("'price_per_item': '3.00'"), "{order}");

    // The portal: entered with the customer's token (303 to the list, a session cookie), then
    // the list greets her.
    let portal = format!(
        "set -euo pipefail\nsource walkthrough-values\n{}\n{}\n",
        helper.join("\n"),
        selling[2]
    );
    let answer = shell(dir.path(), &bin, &database)
        .env("SHOP", &shop)
        .args(["-c", &portal])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&answer.stdout);
    assert!(
        answer.status.success(),
        "the portal block stopped: {text} {}",
        String::from_utf8_lossy(&answer.stderr)
    );
    let headers = text.to_lowercase();
    assert!(headers.starts_with("http/1.1 303"), "{text}");
    assert!(
        headers.contains(&format!("location: /portal/shops/{shop}\r\n")),
        "{text}"
    );
    assert!(headers.contains("set-cookie: mercer_portal="), "{text}");
    assert!(text.contains("Hello, Bea"), "{text}");
}

/// "Connect a Vendure shop": its first block (`cargo xtask vendure`) in the background until it
/// prints the API key, then the second with the placeholders filled, against Mercer started
/// with the README's command; the customer Vendure was seeded with reaches the directory.
fn the_readme_vendure_walkthrough_runs_word_for_word(backend: Backend) {
    let _turn = PORTS.lock().unwrap_or_else(|e| e.into_inner());
    let readme = readme();
    let dir = tempfile::tempdir().unwrap();
    let bin = cargo_shim(dir.path());
    let database = TestDatabase::create(backend);
    let (_mercer, shop, token) = start_mercer(&readme, dir.path(), &bin, &database);
    let blocks = blocks_of(&readme, "## Connect a Vendure shop");
    assert_eq!(blocks.len(), 2, "{blocks:?}");

    let mut command = shell(dir.path(), &bin, &database);
    command
        .env("MERCER_VENDURE_DATA_DIR", dir.path().join("vendure-data"))
        .args(["-c", &blocks[0]])
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let mut vendure = Group::spawn(&mut command);
    let stdout = vendure.0.stdout.take().unwrap();
    let mut printed = Vec::new();
    for line in BufReader::new(stdout).lines().map_while(Result::ok) {
        let done = line.starts_with("Customer: ");
        printed.push(line);
        if done {
            break;
        }
    }
    let key = printed
        .iter()
        .find_map(|line| line.strip_prefix("API key: "))
        .unwrap_or_else(|| panic!("cargo xtask vendure printed {printed:?}"))
        .to_string();
    assert!(
        printed
            .iter()
            .any(|line| line == "Admin API: http://127.0.0.1:3000/admin-api"),
        "{printed:?}"
    );

    let placeholders = ["SHOP=...", "TOKEN=...", "VENDURE_KEY=..."];
    let script: Vec<&str> = blocks[1]
        .lines()
        .filter(|line| !placeholders.iter().any(|p| line.starts_with(p)))
        .collect();
    let script = format!(
        "set -euo pipefail\nexport SHOP='{shop}' TOKEN='{token}' VENDURE_KEY='{key}'\n{}\n",
        script.join("\n")
    );
    let log = dir.path().join("vendure-walkthrough.log");
    let mut command = shell(dir.path(), &bin, &database);
    command
        .args(["-c", &script])
        .stdout(std::fs::File::create(&log).unwrap())
        .stderr(std::fs::File::options().append(true).open(&log).unwrap());
    // The connector the script starts in the background stays in the script's group.
    let mut walk = Group::spawn(&mut command);
    let status = walk.0.wait().unwrap();
    let output = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(status.success(), "the walkthrough stopped:\n{output}");
    assert!(
        output.contains("\"email\":\"ada@example.com\""),
        "the seeded customer is in the directory:\n{output}"
    );
}

backend_tests!(
    the_readme_walkthroughs_run_word_for_word,
    the_readme_vendure_walkthrough_runs_word_for_word,
);

#[test]
fn the_readme_conformance_block_runs_word_for_word() {
    let _turn = PORTS.lock().unwrap_or_else(|e| e.into_inner());
    let blocks = blocks_of(&readme(), "## For connector authors");
    assert_eq!(blocks.len(), 1, "{blocks:?}");
    let dir = tempfile::tempdir().unwrap();
    let bin = cargo_shim(dir.path());
    let log = dir.path().join("conformance.log");
    let path = std::env::var("PATH").unwrap_or_default();
    let mut command = Command::new("bash");
    command
        .current_dir(dir.path())
        .env("PATH", format!("{}:{path}", bin.display()))
        .env("MERCER_LOG", "warn")
        .args(["-c", &format!("set -euo pipefail\n{}\n", blocks[0])])
        .stdout(std::fs::File::create(&log).unwrap())
        .stderr(std::fs::File::options().append(true).open(&log).unwrap());
    // The simulator the block starts in the background stays in the block's group.
    let mut block = Group::spawn(&mut command);
    let status = block.0.wait().unwrap();
    let output = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(status.success(), "the block failed:\n{output}");
    let passed = format!(
        "All {} conformance checks passed",
        mercer_connector::conformance::CHECKS.len()
    );
    assert!(output.contains(&passed), "{output}");
    assert!(!output.contains(" FAIL "), "{output}");
}
