//! A Vendure for development and tests: the pinned Vendure of `dev/package-lock.json`, installed
//! once into a directory under `target/`, and started seeded with the Mercer plugin
//! (`dev/start.js`). `cargo xtask vendure` and the end-to-end tests both use it.
//!
//! Vendure's telemetry is always off here (`VENDURE_DISABLE_TELEMETRY=true`): these machines
//! reach no outside host.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, mpsc};
use std::time::Duration;

/// The directory of the development Vendure's files in the repository.
pub fn source_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("dev")
}

/// The files `npm ci` installs from; a copy of each is kept beside the install, so a changed
/// lockfile installs again.
const MANIFESTS: &[&str] = &["package.json", "package-lock.json", ".npmrc"];

/// Installs the pinned Vendure into `dir` (`target/vendure`) with `npm ci`, unless the same
/// lockfile is installed there already. Answers the `node_modules` directory.
pub fn install(dir: &Path) -> Result<PathBuf, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    // Tests start several Vendures at once on a fresh checkout; `npm ci` empties `node_modules`
    // first, so two installs into one directory break each other. The lock is released when
    // the file closes, at the end of this function.
    let lock_path = dir.join("install.lock");
    let lock = std::fs::File::create(&lock_path)
        .map_err(|e| format!("cannot create {}: {e}", lock_path.display()))?;
    lock.lock()
        .map_err(|e| format!("cannot lock {}: {e}", lock_path.display()))?;
    let source = source_dir();
    let read = |path: &Path| std::fs::read(path).unwrap_or_default();
    let installed = dir.join("node_modules/@vendure/core/package.json").exists()
        && MANIFESTS
            .iter()
            .all(|name| read(&source.join(name)) == read(&dir.join(name)));
    if !installed {
        for name in MANIFESTS {
            std::fs::copy(source.join(name), dir.join(name))
                .map_err(|e| format!("cannot copy {name}: {e}"))?;
        }
        eprintln!(
            "installing the pinned Vendure into {} (npm ci)",
            dir.display()
        );
        let status = Command::new("npm")
            .args([
                "ci",
                "--ignore-scripts",
                "--no-audit",
                "--no-fund",
                "--loglevel=error",
            ])
            .current_dir(dir)
            .status()
            .map_err(|e| format!("cannot run npm: {e}"))?;
        if !status.success() {
            return Err(format!("npm ci failed ({status})"));
        }
    }
    Ok(dir.join("node_modules"))
}

/// Which database the development Vendure keeps its data in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Database {
    /// A file in the data directory (the wasm `sql.js` driver: no native build).
    Sqlite,
    /// A PostgreSQL database, created when missing (`postgres://USER@HOST:PORT/NAME`).
    Postgres(String),
}

/// How to start a development Vendure.
#[derive(Debug, Clone)]
pub struct Options {
    /// The port its APIs listen on (127.0.0.1).
    pub port: u16,
    /// Where it keeps its data (and its API key); seeded on the first start.
    pub data_dir: PathBuf,
    pub database: Database,
    /// Only warnings and errors in its log.
    pub quiet: bool,
    /// Stop when the process of this id ends (tests that share one Vendure).
    pub exit_with_parent: Option<u32>,
}

/// The command that runs `dev/start.js` with these options, telemetry off.
pub fn command(node_modules: &Path, options: &Options) -> Command {
    let mut command = Command::new("node");
    command
        .arg(source_dir().join("start.js"))
        .arg("--port")
        .arg(options.port.to_string())
        .arg("--data")
        .arg(&options.data_dir)
        .env("VENDURE_DISABLE_TELEMETRY", "true")
        .env("NODE_PATH", node_modules);
    if let Database::Postgres(url) = &options.database {
        command.args(["--database", "postgres", "--postgres-url", url]);
    }
    if options.quiet {
        command.arg("--quiet");
    }
    if let Some(parent) = options.exit_with_parent {
        command.args(["--exit-with-parent", &parent.to_string()]);
    }
    command
}

/// A running development Vendure, stopped when dropped.
#[derive(Debug)]
pub struct RunningVendure {
    /// Behind a lock so that a Vendure shared by reference can still be stopped.
    child: Mutex<Child>,
    /// Its root URL (`http://127.0.0.1:PORT`).
    pub url: String,
    /// A superadmin's Admin API key.
    pub api_key: String,
    /// The seeded customer's email and Shop API password.
    pub customer_email: String,
    pub customer_password: String,
}

impl RunningVendure {
    /// Kills the process, as a crash would: what it had not saved is lost.
    pub fn kill(&self) {
        if let Ok(mut child) = self.child.lock() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for RunningVendure {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Starts a development Vendure and waits (at most `timeout`) for the lines it prints once it
/// answers: `Admin API: URL`, `API key: KEY`, `Customer: EMAIL password: PASSWORD`.
pub fn start(
    node_modules: &Path,
    options: &Options,
    timeout: Duration,
) -> Result<RunningVendure, String> {
    let mut child = command(node_modules, options)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| format!("cannot run node: {e}"))?;
    let stdout = child.stdout.take().ok_or("node has no stdout")?;
    let (lines, received) = mpsc::channel();
    std::thread::spawn(move || {
        // Every line is read, so Vendure never blocks on a full pipe; the first ones tell
        // where it is.
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = lines.send(line);
        }
    });
    let mut url = None;
    let mut key = None;
    let deadline = std::time::Instant::now() + timeout;
    while let Some(left) = deadline.checked_duration_since(std::time::Instant::now()) {
        let Ok(line) = received.recv_timeout(left) else {
            break;
        };
        if let Some(admin) = line.strip_prefix("Admin API: ") {
            url = Some(admin.trim().trim_end_matches("/admin-api").to_string());
        } else if let Some(api_key) = line.strip_prefix("API key: ") {
            key = Some(api_key.trim().to_string());
        } else if let Some(customer) = line.strip_prefix("Customer: ")
            && let Some((email, password)) = customer.split_once(" password: ")
            && let (Some(url), Some(api_key)) = (url.take(), key.take())
        {
            return Ok(RunningVendure {
                child: Mutex::new(child),
                url,
                api_key,
                customer_email: email.trim().to_string(),
                customer_password: password.trim().to_string(),
            });
        }
    }
    let _ = child.kill();
    Err(format!(
        "Vendure did not start within {} s",
        timeout.as_secs()
    ))
}
