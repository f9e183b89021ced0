//! The end-to-end harness: starts the real `mercer` binary on a free port with a fresh database
//! of either backend, and talks HTTP to it.
//!
//! The binary is looked up at `$MERCER_BIN`, else next to the test executable's profile folder
//! (`target/debug/mercer`). `cargo xtask test` builds it before running the tests.

pub mod browser;
pub mod chaos;
pub mod openapi_clients;
pub mod receiver;
pub mod schemathesis;
pub mod storefront;
pub mod vendure;
pub mod verifiers;

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

pub use mercer_store::testing::TestDatabase;
pub use mercer_store::{Backend, backend_tests};
use serde_json::Value;

/// Polls `done` until it holds or `timeout` passes; says whether it held.
pub fn wait_until(timeout: Duration, mut done: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if done() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        thread::sleep(Duration::from_millis(25));
    }
}

/// The `mercer` binary under test.
pub fn mercer_binary() -> PathBuf {
    if let Some(path) = std::env::var_os("MERCER_BIN") {
        return PathBuf::from(path);
    }
    let exe = std::env::current_exe().expect("the test executable has a path");
    // target/<profile>/deps/e2e-<hash> → target/<profile>/mercer
    let profile_dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("the test executable lives in target/<profile>/deps");
    let binary = profile_dir.join("mercer");
    assert!(
        binary.exists(),
        "{} does not exist: build it first with `cargo build -p mercer-server` \
         (`cargo xtask test` does), or point MERCER_BIN at it",
        binary.display()
    );
    binary
}

/// The demo credentials a first start on an empty database prints.
#[derive(Debug, Clone)]
pub struct Demo {
    pub shop: String,
    pub token: String,
    /// The demo shop's connector shared secret, printed once with the token.
    pub connector_secret: String,
}

/// A running Mercer on its own database: the real `mercer serve` process ([`MercerServer::start`],
/// killed when dropped), or the same server in this process ([`MercerServer::in_process`],
/// stopped when dropped) for API checks that need no process of their own.
pub struct MercerServer {
    child: Option<Child>,
    embedded: Option<mercer_server::embedded::EmbeddedServer>,
    pub base_url: String,
    /// Dropped after the process is killed (fields drop after `Drop::drop`).
    database: Option<TestDatabase>,
    pub demo: Option<Demo>,
    stdout: Arc<Mutex<Vec<String>>>,
    stderr: Arc<Mutex<Vec<String>>>,
    agent: ureq::Agent,
}

fn collect_lines(
    stream: impl std::io::Read + Send + 'static,
    lines: Arc<Mutex<Vec<String>>>,
    notify: Option<mpsc::Sender<String>>,
) {
    thread::spawn(move || {
        for line in BufReader::new(stream).lines().map_while(Result::ok) {
            if let Some(notify) = &notify {
                let _ = notify.send(line.clone());
            }
            lines.lock().unwrap_or_else(|e| e.into_inner()).push(line);
        }
    });
}

fn test_agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(30)))
        // Tests look at redirects themselves (the OAuth flow).
        .max_redirects(0)
        .build()
        .into()
}

fn value_after<'a>(line: &'a str, label: &str) -> Option<&'a str> {
    line.trim().strip_prefix(label).map(str::trim)
}

impl MercerServer {
    /// `mercer serve` on a new database of `backend`, migrated already (a copy of the suite's
    /// template; tests that start on an empty database say `TestDatabase::create`).
    pub fn start(backend: Backend) -> MercerServer {
        MercerServer::start_with(TestDatabase::create_migrated(backend), &[])
    }

    /// `mercer serve` on `database`, with extra arguments for `serve`.
    pub fn start_with(database: TestDatabase, serve_args: &[&str]) -> MercerServer {
        MercerServer::start_with_env(database, serve_args, &[])
    }

    /// `mercer serve` on `database`, with extra arguments for `serve` and extra environment
    /// variables.
    pub fn start_with_env(
        database: TestDatabase,
        serve_args: &[&str],
        env: &[(&str, &str)],
    ) -> MercerServer {
        let mut child = Command::new(mercer_binary())
            .envs(env.iter().copied())
            .args([
                "--database-url",
                &database.url_string(),
                "--log-level",
                "info",
            ])
            .args([
                "serve",
                "--bind",
                "127.0.0.1:0",
                "--workers",
                "2",
                "--db-pool-size",
                "4",
            ])
            .args(serve_args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("cannot start mercer");
        let stdout = Arc::new(Mutex::new(Vec::new()));
        let stderr = Arc::new(Mutex::new(Vec::new()));
        let (lines_tx, lines_rx) = mpsc::channel();
        collect_lines(
            child.stdout.take().expect("piped stdout"),
            stdout.clone(),
            Some(lines_tx),
        );
        collect_lines(
            child.stderr.take().expect("piped stderr"),
            stderr.clone(),
            None,
        );

        let deadline = Instant::now() + Duration::from_secs(60);
        let (mut shop, mut token, mut secret, mut base_url) = (None, None, None, None);
        while base_url.is_none() {
            let left = deadline.saturating_duration_since(Instant::now());
            match lines_rx.recv_timeout(left) {
                Ok(line) => {
                    if let Some(value) = value_after(&line, "shop_identifier") {
                        shop = Some(value.to_string());
                    } else if let Some(value) = value_after(&line, "API token") {
                        token = Some(value.to_string());
                    } else if let Some(value) = value_after(&line, "connector shared secret") {
                        secret = Some(value.to_string());
                    } else if let Some(rest) = line.strip_prefix("Mercer listening on ") {
                        base_url = rest.split_whitespace().next().map(str::to_string);
                    }
                }
                Err(_) => {
                    let _ = child.kill();
                    let log = stderr.lock().map(|l| l.join("\n")).unwrap_or_default();
                    panic!("mercer did not start listening within 60 s; its log:\n{log}");
                }
            }
        }
        let demo = match (shop, token, secret) {
            (Some(shop), Some(token), Some(connector_secret)) => Some(Demo {
                shop,
                token,
                connector_secret,
            }),
            _ => None,
        };
        MercerServer {
            child: Some(child),
            embedded: None,
            base_url: base_url.unwrap_or_default(),
            database: Some(database),
            demo,
            stdout,
            stderr,
            agent: test_agent(),
        }
    }

    /// The server of `mercer serve`, run in this process on a new migrated database of
    /// `backend`: the same app, transport, workers and dispatcher, without a process to start.
    /// It has no output or log to read and takes no signal: tests of those use [`Self::start`].
    pub fn in_process(backend: Backend) -> MercerServer {
        MercerServer::in_process_with(backend, &[])
    }

    /// [`Self::in_process`] with extra arguments for `serve` (`--allow-private-targets`).
    pub fn in_process_with(backend: Backend, serve_args: &[&str]) -> MercerServer {
        let database = TestDatabase::create_migrated(backend);
        let mut args = vec![
            "--bind",
            "127.0.0.1:0",
            "--workers",
            "2",
            "--db-pool-size",
            "4",
        ];
        args.extend_from_slice(serve_args);
        let embedded =
            mercer_server::embedded::EmbeddedServer::start(&database.url_string(), &args)
                .unwrap_or_else(|error| panic!("the in-process server did not start: {error}"));
        let demo = embedded.demo.as_ref().map(|demo| Demo {
            shop: demo.shop.identifier.as_str().to_string(),
            token: demo.token.expose().to_string(),
            connector_secret: demo.connector_secret.expose().to_string(),
        });
        MercerServer {
            child: None,
            base_url: embedded.base_url.clone(),
            embedded: Some(embedded),
            database: Some(database),
            demo,
            stdout: Arc::default(),
            stderr: Arc::default(),
            agent: test_agent(),
        }
    }

    /// Rotates `shop`'s connector shared secret with `token` and answers the new secret (shown
    /// this once): for tests that play the shop's connector.
    pub fn rotate_connector_secret(&self, shop: &str, token: &str) -> String {
        let rotated = self
            .post(&format!(
                "/integrations/v1/shops/{shop}/shared_secret/rotate"
            ))
            .bearer(token)
            .call();
        assert_eq!(rotated.status, 200, "{}", rotated.text);
        rotated.json()["data"]["shared_secret"]
            .as_str()
            .expect("the rotated secret")
            .to_string()
    }

    /// The demo credentials; panics when this start did not print any.
    pub fn demo(&self) -> &Demo {
        self.demo
            .as_ref()
            .expect("the first start on an empty database prints demo credentials")
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base_url)
    }

    /// Starts a request to `path`; add headers and send it with the `Call` methods.
    pub fn request(&self, method: &str, path: &str) -> Call {
        Call {
            agent: self.agent.clone(),
            method: method.to_string(),
            url: self.url(path),
            headers: Vec::new(),
        }
    }

    pub fn get(&self, path: &str) -> Call {
        self.request("GET", path)
    }

    pub fn post(&self, path: &str) -> Call {
        self.request("POST", path)
    }

    /// Everything the server wrote to standard output and standard error so far.
    pub fn output(&self) -> String {
        let out = self.stdout.lock().map(|l| l.join("\n")).unwrap_or_default();
        let err = self.stderr.lock().map(|l| l.join("\n")).unwrap_or_default();
        format!("{out}\n{err}")
    }

    /// The server's log (standard error) so far.
    pub fn log(&self) -> String {
        self.stderr.lock().map(|l| l.join("\n")).unwrap_or_default()
    }

    /// Runs `mercer --database-url <this server's database> <args>` to completion.
    pub fn cli(&self, args: &[&str]) -> CliOutput {
        run_cli(self.database(), args)
    }

    pub fn pid(&self) -> u32 {
        self.child
            .as_ref()
            .map(Child::id)
            .expect("an in-process server has no process of its own")
    }

    /// Sends a signal (`TERM`, `INT`, `KILL`) to the server.
    pub fn signal(&self, name: &str) {
        let status = Command::new("kill")
            .args([&format!("-{name}"), &self.pid().to_string()])
            .status()
            .expect("kill runs");
        assert!(status.success(), "kill -{name} failed");
    }

    /// Stops the server (SIGKILL) and hands back its database, to start another on it.
    pub fn into_database(mut self) -> TestDatabase {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        self.database
            .take()
            .expect("the server has its database until now")
    }

    pub fn database(&self) -> &TestDatabase {
        self.database.as_ref().expect("the server has its database")
    }

    /// Waits for the server to exit, at most `timeout`; None if it is still running.
    pub fn wait_for_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let child = self.child.as_mut()?;
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if let Ok(Some(status)) = child.try_wait() {
                return Some(status);
            }
            thread::sleep(Duration::from_millis(20));
        }
        None
    }
}

impl Drop for MercerServer {
    fn drop(&mut self) {
        drop(self.embedded.take());
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// What a `mercer` command printed, and how it ended.
#[derive(Debug)]
pub struct CliOutput {
    pub success: bool,
    pub stdout: String,
    pub stderr: String,
}

impl CliOutput {
    /// Asserts that the command failed and said `needle` on standard error.
    pub fn assert_failed_with(&self, needle: &str) {
        assert!(
            !self.success,
            "the command should fail; it printed {}",
            self.stdout
        );
        assert!(
            self.stderr.contains(needle),
            "expected {needle:?} in: {}",
            self.stderr
        );
    }

    /// Standard output's lines, for commands that print several values (`shop create`: the
    /// shop_identifier, then the connector secret).
    pub fn values(&self) -> Vec<String> {
        assert!(self.success, "the command failed: {}", self.stderr);
        self.stdout.lines().map(str::to_string).collect()
    }

    /// Standard output's one line, for commands that print a single value (a token, an id).
    pub fn value(&self) -> String {
        assert!(self.success, "the command failed: {}", self.stderr);
        self.stdout.trim().to_string()
    }
}

/// Runs `mercer --database-url <database> <args>` with `input` on standard input.
pub fn run_cli_with_input(database: &TestDatabase, args: &[&str], input: &str) -> CliOutput {
    use std::io::Write as _;
    let mut child = Command::new(mercer_binary())
        .args([
            "--database-url",
            &database.url_string(),
            "--log-level",
            "warn",
        ])
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("cannot run mercer");
    if let Some(mut stdin) = child.stdin.take() {
        stdin
            .write_all(input.as_bytes())
            .expect("write to mercer's stdin");
    }
    let Output {
        status,
        stdout,
        stderr,
    } = child.wait_with_output().expect("mercer did not finish");
    CliOutput {
        success: status.success(),
        stdout: String::from_utf8_lossy(&stdout).into_owned(),
        stderr: String::from_utf8_lossy(&stderr).into_owned(),
    }
}

/// Runs `mercer --database-url <database> <args>` with nothing on standard input.
pub fn run_cli(database: &TestDatabase, args: &[&str]) -> CliOutput {
    run_cli_with_input(database, args, "")
}

/// A request being built.
pub struct Call {
    agent: ureq::Agent,
    method: String,
    url: String,
    headers: Vec<(String, String)>,
}

/// An answer: status, headers and body (parsed as JSON when it is JSON).
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub text: String,
}

impl Answer {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.text)
            .unwrap_or_else(|e| panic!("body is not JSON ({e}): {}", self.text))
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(key, _)| key.eq_ignore_ascii_case(name))
            .map(|(_, value)| value.as_str())
    }

    /// Checks that the body is the JSON error body and gives back its entries.
    pub fn errors(&self) -> Vec<Value> {
        let body = self.json();
        let entries = body["errors"]
            .as_array()
            .unwrap_or_else(|| panic!("no errors array in {body}"))
            .clone();
        assert!(
            !entries.is_empty(),
            "an error body has at least one entry: {body}"
        );
        for entry in &entries {
            let keys: Vec<&str> = entry
                .as_object()
                .expect("entries are objects")
                .keys()
                .map(String::as_str)
                .collect();
            assert_eq!(
                keys,
                ["message", "type", "field", "severity", "sub_type"],
                "{entry}"
            );
            assert!(
                entry["message"].is_string()
                    && entry["type"].is_string()
                    && entry["sub_type"].is_string()
            );
            assert!(entry["field"].is_string() || entry["field"].is_null());
            let severity = entry["severity"].as_str().unwrap_or_default();
            assert!(
                severity == "validation" || severity == "critical",
                "{entry}"
            );
        }
        entries
    }

    /// Asserts the status and that the body is a JSON error body whose first entry has `kind`.
    pub fn assert_error(&self, status: u16, kind: &str) -> Vec<Value> {
        assert_eq!(self.status, status, "body: {}", self.text);
        let entries = self.errors();
        assert_eq!(entries[0]["type"], kind, "body: {}", self.text);
        entries
    }
}

impl Call {
    /// A request to a full URL, outside any [`MercerServer`] (a load that outlives one).
    pub fn to(method: &str, url: &str) -> Call {
        Call {
            agent: test_agent(),
            method: method.to_string(),
            url: url.to_string(),
            headers: Vec::new(),
        }
    }

    pub fn header(mut self, name: &str, value: &str) -> Call {
        self.headers.push((name.to_string(), value.to_string()));
        self
    }

    pub fn bearer(self, token: &str) -> Call {
        self.header("Authorization", &format!("Bearer {token}"))
    }

    pub fn call(self) -> Answer {
        self.send_bytes(None)
    }

    /// Sends `body` as `application/json`.
    pub fn json(self, body: &Value) -> Answer {
        self.header("Content-Type", "application/json")
            .send_bytes(Some(body.to_string().into_bytes()))
    }

    /// Sends `fields` as an HTML form does (`application/x-www-form-urlencoded`).
    pub fn form(self, fields: &[(&str, &str)]) -> Answer {
        let body = fields
            .iter()
            .map(|(name, value)| format!("{}={}", form_encode(name), form_encode(value)))
            .collect::<Vec<_>>()
            .join("&");
        self.header("Content-Type", "application/x-www-form-urlencoded")
            .send_bytes(Some(body.into_bytes()))
    }

    /// Sends raw bytes with whatever Content-Type the caller set (or none).
    pub fn send_bytes(self, body: Option<Vec<u8>>) -> Answer {
        let (method, url) = (self.method.clone(), self.url.clone());
        self.try_send_bytes(body)
            .unwrap_or_else(|e| panic!("{method} {url} failed: {e}"))
    }

    /// [`Self::json`], with a failure to connect or to read the answer given back rather than
    /// a panic: for load that runs while the server is killed or its database is down.
    pub fn try_json(self, body: &Value) -> Result<Answer, String> {
        self.header("Content-Type", "application/json")
            .try_send_bytes(Some(body.to_string().into_bytes()))
    }

    /// [`Self::send_bytes`], with transport failures given back.
    pub fn try_send_bytes(self, body: Option<Vec<u8>>) -> Result<Answer, String> {
        let mut request = ureq::http::Request::builder()
            .method(self.method.as_str())
            .uri(&self.url);
        for (name, value) in &self.headers {
            request = request.header(name, value);
        }
        let result = match body {
            Some(bytes) => self
                .agent
                .run(request.body(bytes).expect("a valid request")),
            None => self.agent.run(request.body(()).expect("a valid request")),
        };
        let mut response = result.map_err(|e| e.to_string())?;
        let headers = response
            .headers()
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_str().unwrap_or_default().to_string()))
            .collect();
        let status = response.status().as_u16();
        let text = response.body_mut().read_to_string().unwrap_or_default();
        Ok(Answer {
            status,
            headers,
            text,
        })
    }
}

/// `application/x-www-form-urlencoded` encoding of one name or value.
pub fn form_encode(text: &str) -> String {
    let mut out = String::new();
    for byte in text.bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'*' => {
                out.push(byte as char)
            }
            b' ' => out.push('+'),
            other => out.push_str(&format!("%{other:02X}")),
        }
    }
    out
}
