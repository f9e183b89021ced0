//! The reliability suite's tools (`cargo xtask chaos`; docs/operations.md, "What Mercer
//! guarantees"): the short or full form, the figures each scenario reports, a load of connector
//! events that goes on while Mercer is killed or its database is down, a PostgreSQL cluster of
//! the test's own to stop and start, and a small file system to fill.

use std::collections::BTreeMap;
use std::io::Write;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::thread::{self, JoinHandle};
use std::time::Duration;

use serde_json::{Value, json};

use crate::{Backend, Call};

/// The variable that asks for the full form (`MERCER_CHAOS=full`, set by `cargo xtask chaos`).
pub const MODE_VAR: &str = "MERCER_CHAOS";

/// Whether this run is the full form (more rounds, more load) rather than the short one
/// `cargo xtask test` runs.
pub fn full() -> bool {
    std::env::var(MODE_VAR).is_ok_and(|mode| mode == "full")
}

/// `short` in the short form, `full` in the full one.
pub fn scaled<T>(short: T, full_form: T) -> T {
    if full() { full_form } else { short }
}

/// The file the scenarios append their figures to, one JSON object a line, next to the binaries
/// under test (`target/debug/chaos-figures.jsonl`); `cargo xtask chaos` empties it first and
/// prints it as a table at the end.
pub fn figures_file() -> PathBuf {
    crate::mercer_binary().with_file_name("chaos-figures.jsonl")
}

/// What one scenario sent, what was answered, what ended applied or delivered, and duplicates,
/// by name, in the order they were set.
pub struct Figures {
    scenario: &'static str,
    backend: &'static str,
    values: Vec<(&'static str, i64)>,
}

impl Figures {
    pub fn new(scenario: &'static str, backend: Backend) -> Figures {
        Figures {
            scenario,
            backend: match backend {
                Backend::Sqlite => "sqlite",
                Backend::Postgres => "postgres",
            },
            values: Vec::new(),
        }
    }

    pub fn set(&mut self, name: &'static str, value: impl TryInto<i64>) -> &mut Figures {
        let value = value.try_into().unwrap_or(i64::MAX);
        match self.values.iter_mut().find(|(known, _)| *known == name) {
            Some(entry) => entry.1 = value,
            None => self.values.push((name, value)),
        }
        self
    }

    /// Prints the figures (shown with a failure or `--nocapture`) and appends them to
    /// [`figures_file`].
    pub fn report(&self) {
        let values: serde_json::Map<String, Value> = self
            .values
            .iter()
            .map(|(name, value)| (name.to_string(), json!(value)))
            .collect();
        let line = json!({
            "scenario": self.scenario,
            "backend": self.backend,
            "form": if full() { "full" } else { "short" },
            "figures": values,
        });
        eprintln!("chaos figures: {line}");
        if let Ok(mut file) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(figures_file())
        {
            let _ = writeln!(file, "{line}");
        }
    }
}

/// How one request of a load ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The server answered: the status and its `Retry-After`, when it had one.
    Answered(u16, Option<String>),
    /// No answer: the connection was refused or cut (the server was down or killed).
    Unanswered,
}

/// One connector event a load sent, and how its request ended.
#[derive(Debug, Clone)]
pub struct SentEvent {
    pub platform_id: String,
    pub outcome: Outcome,
}

impl SentEvent {
    pub fn accepted(&self) -> bool {
        self.outcome == Outcome::Answered(202, None)
    }
}

/// `customers/saved` events sent by several threads, each a new customer, until
/// [`EventLoad::finish`]. The server they go to can change under them ([`EventLoad::point_at`]):
/// a restarted Mercer listens on a new port.
pub struct EventLoad {
    stop: Arc<AtomicBool>,
    base_url: Arc<RwLock<String>>,
    /// How many requests were answered with each status so far.
    answered: Arc<Mutex<BTreeMap<u16, usize>>>,
    threads: Vec<JoinHandle<Vec<SentEvent>>>,
}

impl EventLoad {
    pub fn start(base_url: &str, shop: &str, token: &str, threads: usize) -> EventLoad {
        let stop = Arc::new(AtomicBool::new(false));
        let base_url = Arc::new(RwLock::new(base_url.to_string()));
        let answered = Arc::new(Mutex::new(BTreeMap::new()));
        let threads = (0..threads)
            .map(|thread| {
                let (stop, base_url, answered) = (stop.clone(), base_url.clone(), answered.clone());
                let path =
                    format!("/customers/v1/shops/{shop}/platforms/custom/webhooks/customers/saved");
                let token = token.to_string();
                thread::spawn(move || {
                    let mut sent = Vec::new();
                    while !stop.load(Ordering::Relaxed) {
                        let platform_id = format!("chaos-{thread}-{}", sent.len());
                        let base = base_url.read().map(|url| url.clone()).unwrap_or_default();
                        let outcome = send_event(&format!("{base}{path}"), &token, &platform_id);
                        if let (Outcome::Answered(status, _), Ok(mut answered)) =
                            (&outcome, answered.lock())
                        {
                            *answered.entry(*status).or_default() += 1;
                        }
                        if outcome != Outcome::Answered(202, None) {
                            // The server is down or says to wait: a client would back off.
                            thread::sleep(Duration::from_millis(25));
                        }
                        sent.push(SentEvent {
                            platform_id,
                            outcome,
                        });
                    }
                    sent
                })
            })
            .collect();
        EventLoad {
            stop,
            base_url,
            answered,
            threads,
        }
    }

    /// How many requests were answered with `status` so far.
    pub fn answered(&self, status: u16) -> usize {
        self.answered
            .lock()
            .map(|answered| answered.get(&status).copied().unwrap_or(0))
            .unwrap_or(0)
    }

    pub fn point_at(&self, base_url: &str) {
        if let Ok(mut url) = self.base_url.write() {
            *url = base_url.to_string();
        }
    }

    /// Stops the threads and gives back every event they sent.
    pub fn finish(self) -> Vec<SentEvent> {
        self.stop.store(true, Ordering::Relaxed);
        self.threads
            .into_iter()
            .flat_map(|thread| thread.join().expect("a load thread panicked"))
            .collect()
    }
}

fn send_event(url: &str, token: &str, platform_id: &str) -> Outcome {
    let body = json!({"data": {"customer": {
        "platform_id": platform_id,
        "platform_updated_at": "2026-11-01T00:00:00Z",
        "email": format!("{platform_id}@chaos.test"),
        "first_name": "Chaos",
    }}});
    match Call::to("POST", url).bearer(token).try_json(&body) {
        Ok(answer) => Outcome::Answered(
            answer.status,
            answer.header("Retry-After").map(str::to_string),
        ),
        Err(_) => Outcome::Unanswered,
    }
}

/// How many of `sent` were answered with each status, and how many not at all.
pub fn tally(sent: &[SentEvent]) -> std::collections::BTreeMap<String, usize> {
    let mut counts = std::collections::BTreeMap::new();
    for event in sent {
        let key = match &event.outcome {
            Outcome::Answered(status, _) => status.to_string(),
            Outcome::Unanswered => "unanswered".to_string(),
        };
        *counts.entry(key).or_default() += 1;
    }
    counts
}

/// A port nothing listens on now.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|address| address.port())
        .expect("no free port")
}

fn running_as_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|output| String::from_utf8_lossy(&output.stdout).trim() == "0")
}

/// A PostgreSQL cluster of the test's own, on a free port, to stop and start under load without
/// touching the one the other tests share. Made with the installed server's `initdb`; run as the
/// `postgres` user when the test runs as root (PostgreSQL refuses root).
pub struct PrivatePostgres {
    _dir: tempfile::TempDir,
    data: PathBuf,
    bin: PathBuf,
    port: u16,
    as_postgres: bool,
}

impl PrivatePostgres {
    pub fn start() -> PrivatePostgres {
        let bindir = Command::new("pg_config")
            .arg("--bindir")
            .output()
            .expect("pg_config runs (PostgreSQL's server package)");
        let bin = PathBuf::from(String::from_utf8_lossy(&bindir.stdout).trim());
        let dir = tempfile::tempdir().expect("a temporary directory");
        let data = dir.path().join("data");
        let as_postgres = running_as_root();
        if as_postgres {
            let owned = Command::new("chown")
                .args(["postgres:postgres", &dir.path().to_string_lossy()])
                .status()
                .is_ok_and(|status| status.success());
            assert!(owned, "cannot give {} to postgres", dir.path().display());
        }
        let cluster = PrivatePostgres {
            _dir: dir,
            data,
            bin,
            port: free_port(),
            as_postgres,
        };
        cluster.run(
            "initdb",
            &[
                "-D",
                &cluster.data.to_string_lossy(),
                "-U",
                "postgres",
                "-A",
                "trust",
                "--no-sync",
            ],
        );
        cluster.start_again();
        cluster
    }

    fn run(&self, program: &str, args: &[&str]) {
        let path = self.bin.join(program);
        let mut command = if self.as_postgres {
            let mut command = Command::new("runuser");
            command.args(["-u", "postgres", "--"]).arg(&path);
            command
        } else {
            Command::new(&path)
        };
        let output = command
            .args(args)
            .output()
            .unwrap_or_else(|error| panic!("cannot run {}: {error}", path.display()));
        assert!(
            output.status.success(),
            "{program} {args:?} failed: {}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }

    pub fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    /// Starts the cluster (again) and waits until it takes connections.
    pub fn start_again(&self) {
        let data = self.data.to_string_lossy();
        let options = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1 -c fsync=on",
            self.port, data
        );
        let log = self.data.with_file_name("postgres.log");
        self.run(
            "pg_ctl",
            &[
                "-D",
                &data,
                "-o",
                &options,
                "-l",
                &log.to_string_lossy(),
                "-w",
                "start",
            ],
        );
    }

    /// Stops the cluster the way a crash would: no shutdown checkpoint, connections cut.
    pub fn stop_immediately(&self) {
        self.run(
            "pg_ctl",
            &[
                "-D",
                &self.data.to_string_lossy(),
                "-m",
                "immediate",
                "stop",
            ],
        );
    }
}

impl Drop for PrivatePostgres {
    fn drop(&mut self) {
        let mut command = if self.as_postgres {
            let mut command = Command::new("runuser");
            command
                .args(["-u", "postgres", "--"])
                .arg(self.bin.join("pg_ctl"));
            command
        } else {
            Command::new(self.bin.join("pg_ctl"))
        };
        let _ = command
            .args([
                "-D",
                &self.data.to_string_lossy(),
                "-m",
                "immediate",
                "stop",
            ])
            .output();
    }
}

/// A tmpfs of a few MiB, mounted for the test and unmounted after it: a disk that fills.
/// Mounting needs root (CAP_SYS_ADMIN), as it has on the project's machines and in CI.
pub struct SmallFileSystem {
    dir: tempfile::TempDir,
}

impl SmallFileSystem {
    pub fn mount(size_mib: u32) -> SmallFileSystem {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let output = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size_mib}m"), "tmpfs"])
            .arg(dir.path())
            .output()
            .expect("mount runs");
        assert!(
            output.status.success(),
            "cannot mount a {size_mib} MiB tmpfs at {} (the disk-full scenario needs root): {}",
            dir.path().display(),
            String::from_utf8_lossy(&output.stderr)
        );
        SmallFileSystem { dir }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Fills the file system with a ballast file until `leave_kib` KiB are free; answers the
    /// ballast's path, whose removal gives the space back.
    pub fn fill_leaving(&self, leave_kib: u64) -> PathBuf {
        let ballast = self.path().join("ballast");
        let mut file = std::fs::File::create(&ballast).expect("the ballast file");
        let chunk = vec![0xA5u8; 64 * 1024];
        while self.free_kib() > leave_kib + 64 {
            if file.write_all(&chunk).is_err() {
                break;
            }
        }
        let _ = file.sync_all();
        ballast
    }

    /// KiB free on the file system.
    pub fn free_kib(&self) -> u64 {
        let output = Command::new("df")
            .args(["-k", "--output=avail"])
            .arg(self.path())
            .output()
            .expect("df runs");
        String::from_utf8_lossy(&output.stdout)
            .lines()
            .nth(1)
            .and_then(|line| line.trim().parse().ok())
            .unwrap_or(0)
    }
}

impl Drop for SmallFileSystem {
    fn drop(&mut self) {
        let _ = Command::new("umount")
            .arg("-l")
            .arg(self.dir.path())
            .status();
    }
}
