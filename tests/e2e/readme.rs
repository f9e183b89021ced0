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
//! The walkthroughs run on free ports the test chooses, told to them the way the README tells
//! the reader: Mercer's `--bind` through `MERCER_BIND` (port 0; the test reads the address it
//! prints), and the values of the README's address lines (`MERCER_URL=…`,
//! `export SIM_ADMIN_URL=…`, `VENDURE_URL=…`, `CONNECTOR=…`, `cargo xtask vendure --port …`),
//! so the runs need not take turns. The block of "For connector authors" still names its port:
//! it runs alone.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use mercer_tests::vendure::free_port;
use mercer_tests::{Backend, TestDatabase, backend_tests, mercer_binary};

/// The conformance block listens on the port the README names: one run at a time.
static CONFORMANCE_PORT: Mutex<()> = Mutex::new(());

/// The ports the README's walkthroughs name, which the test replaces with free ones: a run
/// left with one of them would depend on it.
const README_PORTS: [&str; 4] = [":8080", ":9090", ":3000", ":4100"];

/// `script` with the value of the README's assignment `NAME=VALUE` (on a line of its own,
/// `export` or not, a comment after it allowed) replaced by `value`: the address the test
/// chose, where the README shows the reader's.
fn assign(script: &str, name: &str, value: &str) -> String {
    let mut found = 0;
    let lines: Vec<String> = script
        .lines()
        .map(|line| {
            let (indent, rest) = line.split_at(line.len() - line.trim_start().len());
            let (export, rest) = match rest.strip_prefix("export ") {
                Some(rest) => ("export ", rest),
                None => ("", rest),
            };
            match rest.strip_prefix(name).and_then(|r| r.strip_prefix('=')) {
                Some(old) => {
                    found += 1;
                    let after = &old[old.find(char::is_whitespace).unwrap_or(old.len())..];
                    format!("{indent}{export}{name}={value}{after}")
                }
                None => line.to_string(),
            }
        })
        .collect();
    assert_eq!(found, 1, "the README sets {name} once in:\n{script}");
    lines.join("\n")
}

/// Fails when `script` still names one of the README's fixed ports.
fn assert_no_fixed_port(script: &str) {
    for port in README_PORTS {
        assert!(!script.contains(port), "{port} is left in:\n{script}");
    }
}

/// Waits for a command's group to end, up to `limit` (then it is killed, and the test fails).
fn wait_for(
    group: &mut Group,
    limit: Duration,
    what: &str,
    log: &Path,
) -> std::process::ExitStatus {
    let started = Instant::now();
    loop {
        if let Some(status) = group.0.try_wait().unwrap() {
            return status;
        }
        assert!(
            started.elapsed() < limit,
            "{what} did not finish within {limit:?}:\n{}",
            std::fs::read_to_string(log).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

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
        // Quietly: a group whose processes have all ended is gone already.
        let _ = Command::new("kill")
            .args(["-TERM", "--", &format!("-{}", self.0.id())])
            .stderr(Stdio::null())
            .status();
        let _ = self.0.wait();
    }
}

/// The Mercer the README starts: its group, the shop and token it printed, and its address.
struct Mercer {
    _group: Group,
    shop: String,
    token: String,
    url: String,
}

/// Starts Mercer with the README's command, on a free port (`MERCER_BIND`, port 0).
fn start_mercer(readme: &str, dir: &Path, bin: &Path, database: &TestDatabase) -> Mercer {
    let marker = "so run Mercer with\n`";
    let start = readme
        .find(marker)
        .expect("the README says how to run Mercer")
        + marker.len();
    let serve = &readme[start..start + readme[start..].find('`').unwrap()];
    assert!(serve.contains("--allow-private-targets"), "{serve}");
    let mut command = shell(dir, bin, database);
    command
        .env("MERCER_BIND", "127.0.0.1:0")
        .args(["-c", &format!("exec {serve}")])
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let mut mercer = Group::spawn(&mut command);
    let stdout = mercer.0.stdout.take().unwrap();
    let (mut shop, mut token, mut url) = (String::new(), String::new(), String::new());
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
        } else if let Some(rest) = line.strip_prefix("Mercer listening on ") {
            url = rest
                .split_whitespace()
                .next()
                .unwrap_or_default()
                .to_string();
            break;
        }
    }
    assert!(
        !shop.is_empty() && !token.is_empty(),
        "Mercer printed no demo credentials"
    );
    assert!(
        url.starts_with("http://127.0.0.1:"),
        "Mercer listens at {url:?}"
    );
    Mercer {
        _group: mercer,
        shop,
        token,
        url,
    }
}

fn the_readme_walkthroughs_run_word_for_word(backend: Backend) {
    let readme = readme();
    let dir = tempfile::tempdir().unwrap();
    let bin = cargo_shim(dir.path());
    let database = TestDatabase::create(backend);
    let mercer = start_mercer(&readme, dir.path(), &bin, &database);
    let (shop, token) = (&mercer.shop, &mercer.token);
    let simulator = format!("http://127.0.0.1:{}", free_port());

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
    let first = assign(&without_placeholders, "MERCER_URL", &mercer.url);
    let first = assign(&first, "SIM_ADMIN_URL", &simulator);
    // What the later blocks use of the walkthrough's values, kept for them: a reader runs them
    // in the same terminal.
    let script = format!(
        "set -euo pipefail\nexport SHOP='{shop}' TOKEN='{token}'\n{first}\n{}\n{}\n\
         declare -p API CUSTOMER SHOPPER SIM_ADMIN_URL > walkthrough-values\n",
        connecting[1], selling[0]
    );
    assert_no_fixed_port(&script);
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
    // The block after it waits for the order the scheduler places, then prints its line. It uses
    // the `json` helper the box block defines.
    let helper: Vec<&str> = selling[0]
        .lines()
        .take_while(|line| !line.starts_with("API="))
        .collect();
    let values = format!("source walkthrough-values\n{}", helper.join("\n"));
    let check = format!("set -euo pipefail\n{values}\n{}\n", selling[1]);
    assert_no_fixed_port(&check);
    let check_log = dir.path().join("order.log");
    let mut command = shell(dir.path(), &bin, &database);
    command
        .env("SHOP", shop)
        .args(["-c", &check])
        .stdout(std::fs::File::create(&check_log).unwrap())
        .stderr(
            std::fs::File::options()
                .append(true)
                .open(&check_log)
                .unwrap(),
        );
    let mut waiting = Group::spawn(&mut command);
    let status = wait_for(
        &mut waiting,
        Duration::from_secs(150),
        "the wait for the box order",
        &check_log,
    );
    let order = std::fs::read_to_string(&check_log).unwrap_or_default();
    assert!(status.success(), "the wait for the order failed: {order}");
    // Three kales chosen, at the catalogue's price.
    assert!(order.contains("kale"), "{order}");
    assert!(order.contains("'quantity': 3"), "{order}");
    assert!(order.contains("'price_per_item': '3.00'"), "{order}");

    // The portal: entered with the customer's token (303 to the list, a session cookie), then
    // the list greets her.
    let portal = format!("set -euo pipefail\n{values}\n{}\n", selling[2]);
    let answer = shell(dir.path(), &bin, &database)
        .env("SHOP", shop)
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

/// "Connect a Vendure shop": its first block (`cargo xtask vendure`, on a free port) in the
/// background until it prints the API key, then the second with the placeholders and addresses
/// filled, against Mercer started with the README's command; the customer Vendure was seeded
/// with reaches the directory.
fn the_readme_vendure_walkthrough_runs_word_for_word(backend: Backend) {
    let readme = readme();
    let dir = tempfile::tempdir().unwrap();
    let bin = cargo_shim(dir.path());
    let database = TestDatabase::create(backend);
    let mercer = start_mercer(&readme, dir.path(), &bin, &database);
    let (shop, token) = (&mercer.shop, &mercer.token);
    let blocks = blocks_of(&readme, "## Connect a Vendure shop");
    assert_eq!(blocks.len(), 2, "{blocks:?}");
    let (vendure_port, connector_port) = (free_port(), free_port());
    assert_eq!(blocks[0].matches("--port 3000").count(), 1, "{}", blocks[0]);
    let start_vendure = blocks[0].replace("--port 3000", &format!("--port {vendure_port}"));

    let mut command = shell(dir.path(), &bin, &database);
    command
        .env("MERCER_VENDURE_DATA_DIR", dir.path().join("vendure-data"))
        .args(["-c", &start_vendure])
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
            .any(|line| line == &format!("Admin API: http://127.0.0.1:{vendure_port}/admin-api")),
        "{printed:?}"
    );

    let placeholders = ["SHOP=...", "TOKEN=...", "VENDURE_KEY=..."];
    let script: Vec<&str> = blocks[1]
        .lines()
        .filter(|line| !placeholders.iter().any(|p| line.starts_with(p)))
        .collect();
    let script = assign(&script.join("\n"), "MERCER_URL", &mercer.url);
    let script = assign(
        &script,
        "VENDURE_URL",
        &format!("http://127.0.0.1:{vendure_port}"),
    );
    let script = assign(&script, "CONNECTOR", &format!("127.0.0.1:{connector_port}"));
    let script = format!(
        "set -euo pipefail\nexport SHOP='{shop}' TOKEN='{token}' VENDURE_KEY='{key}'\n{script}\n"
    );
    assert_no_fixed_port(&script);
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
    let _turn = CONFORMANCE_PORT.lock().unwrap_or_else(|e| e.into_inner());
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
