//! A real Vendure for the end-to-end tests: the pinned one of `crates/vendure/dev`, installed
//! once into `target/vendure`, started once per test process on SQLite ([`shared`]) and shared
//! by every test, each with a Mercer shop and a `mercer-vendure` connector of its own
//! ([`Connector`]). Vendure's telemetry is off.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use mercer_vendure::dev::{self, Database, Options, RunningVendure};
use serde_json::{Value, json};

use crate::mercer_binary;

/// How long a Vendure may take to start (the first start also seeds it).
const START_TIMEOUT: Duration = Duration::from_secs(180);

/// `target/vendure`, beside the test binaries' profile folder.
fn vendure_dir() -> PathBuf {
    let profile = mercer_binary()
        .parent()
        .map(PathBuf::from)
        .expect("the mercer binary is in a folder");
    profile
        .parent()
        .map(|target| target.join("vendure"))
        .expect("the profile folder is in target/")
}

/// A loopback port no one listens on now.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|address| address.port())
        .expect("a free loopback port")
}

/// Removes the data of test Vendures whose test process is gone.
fn remove_stale_data(dir: &std::path::Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let alive = name
            .parse::<u32>()
            .is_ok_and(|pid| PathBuf::from(format!("/proc/{pid}")).exists());
        if !alive {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// Starts a test Vendure on `database`, stopped when the returned value is dropped or the
/// test process ends.
pub fn start(database: Database) -> RunningVendure {
    VendureSetup::new(database).start()
}

/// A test Vendure's setup, to start it again on the same port and data after a crash.
pub struct VendureSetup {
    node_modules: PathBuf,
    options: Options,
}

impl VendureSetup {
    /// A new data folder and port for a Vendure on `database` (installed first if need be).
    pub fn new(database: Database) -> VendureSetup {
        let dir = vendure_dir();
        let node_modules = dev::install(&dir).unwrap_or_else(|error| panic!("{error}"));
        let data = dir.join("test-data");
        remove_stale_data(&data);
        let pid = std::process::id();
        let options = Options {
            port: free_port(),
            data_dir: data.join(pid.to_string()).join(free_port().to_string()),
            database,
            quiet: true,
            exit_with_parent: Some(pid),
        };
        VendureSetup {
            node_modules,
            options,
        }
    }

    /// Starts it (seeded the first time), stopped when the returned value is dropped or the
    /// test process ends.
    pub fn start(&self) -> RunningVendure {
        dev::start(&self.node_modules, &self.options, START_TIMEOUT)
            .unwrap_or_else(|error| panic!("{error}"))
    }
}

/// The Vendure every test of this process shares, on SQLite.
pub fn shared() -> &'static RunningVendure {
    static SHARED: OnceLock<RunningVendure> = OnceLock::new();
    SHARED.get_or_init(|| start(Database::Sqlite))
}

/// Runs an Admin API operation with the Vendure's API key; panics on a GraphQL error.
pub fn admin(vendure: &RunningVendure, query: &str, variables: Value) -> Value {
    let mut answer = ureq::post(format!("{}/admin-api", vendure.url))
        .header("vendure-api-key", &vendure.api_key)
        .send_json(json!({ "query": query, "variables": variables }))
        .expect("Vendure answers");
    let body: Value = answer.body_mut().read_json().expect("a JSON answer");
    assert!(body.get("errors").is_none(), "{query}: {body}");
    body["data"].clone()
}

/// Signs a customer in on the Shop API; answers the session token.
pub fn shop_session(vendure: &RunningVendure, email: &str, password: &str) -> String {
    let answer = ureq::post(format!("{}/shop-api", vendure.url))
        .send_json(json!({
            "query": "mutation($u: String!, $p: String!) { login(username: $u, password: $p) { __typename } }",
            "variables": { "u": email, "p": password },
        }))
        .expect("Vendure answers");
    answer
        .headers()
        .get("vendure-auth-token")
        .and_then(|value| value.to_str().ok())
        .expect("a session token")
        .to_string()
}

/// `mercer-vendure serve` for one shop, on a free port, until dropped; dropping it also tells
/// the plugin to stop forwarding to it.
pub struct Connector {
    child: Child,
    pub url: String,
    vendure_url: String,
    api_key: String,
    /// Whether dropping it tells the plugin to stop forwarding to its URL.
    unregister: bool,
}

/// What a connector serves and where it sends events.
pub struct ConnectorFor<'a> {
    /// Where it listens: `127.0.0.1:0` for a free port.
    pub bind: &'a str,
    pub shop: &'a str,
    pub secret: &'a str,
    pub mercer_url: &'a str,
    pub mercer_token: &'a str,
    pub reconcile_interval_s: u64,
}

impl Connector {
    pub fn start(vendure: &RunningVendure, config: &ConnectorFor<'_>) -> Connector {
        let binary = mercer_binary().with_file_name("mercer-vendure");
        let mut child = Command::new(&binary)
            .args(["serve", "--bind", config.bind, "--allow-private-targets"])
            .args(["--vendure-url", &vendure.url])
            .args(["--vendure-api-key", &vendure.api_key])
            .args(["--shop", config.shop, "--secret", config.secret])
            .args(["--mercer-url", config.mercer_url])
            .args(["--mercer-token", config.mercer_token])
            .args([
                "--reconcile-interval-s",
                &config.reconcile_interval_s.to_string(),
            ])
            .env(
                "MERCER_LOG",
                std::env::var("MERCER_VENDURE_TEST_LOG").unwrap_or_else(|_| "error".to_string()),
            )
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|error| panic!("cannot run {}: {error}", binary.display()));
        let stdout = child.stdout.take().expect("a stdout");
        let mut line = String::new();
        BufReader::new(stdout)
            .read_line(&mut line)
            .expect("the connector prints where it listens");
        let url = line
            .trim()
            .strip_prefix("mercer-vendure listening on ")
            .unwrap_or_else(|| panic!("mercer-vendure printed {line:?}"))
            .to_string();
        let connector = Connector {
            child,
            url,
            vendure_url: vendure.url.clone(),
            api_key: vendure.api_key.clone(),
            unregister: true,
        };
        let registered = crate::wait_until(Duration::from_secs(30), || connector.registered());
        assert!(registered, "the connector did not register with the plugin");
        connector
    }

    /// Whether the plugin forwards to this connector yet.
    fn registered(&self) -> bool {
        let answer = ureq::post(format!("{}/admin-api", self.vendure_url))
            .header("vendure-api-key", &self.api_key)
            .send_json(json!({ "query": "{ mercerConnectorUrls }" }));
        let Ok(mut answer) = answer else {
            return false;
        };
        let body: Value = answer.body_mut().read_json().unwrap_or_default();
        body["data"]["mercerConnectorUrls"]
            .as_array()
            .is_some_and(|urls| {
                urls.iter()
                    .any(|url| url.as_str() == Some(self.url.as_str()))
            })
    }
}

impl Connector {
    /// Kills the process as a crash would: the plugin keeps forwarding to its URL.
    pub fn crash(mut self) {
        self.unregister = false;
    }
}

impl Drop for Connector {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if !self.unregister {
            return;
        }
        let _ = ureq::post(format!("{}/admin-api", self.vendure_url))
            .header("vendure-api-key", &self.api_key)
            .send_json(json!({
                "query": "mutation($url: String!) { removeMercerConnector(url: $url) }",
                "variables": { "url": self.url },
            }));
    }
}
