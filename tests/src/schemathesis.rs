//! Schemathesis, the OpenAPI schema fuzzer (PyPI), run against a live `mercer`: installed on
//! first use into `target/fuzz-api/venv`, pointed at the server's `GET /openapi.json` with the
//! demo shop's token, and read back from its JSON report.
//!
//! The checks are the two the API promises: no answer is a server error (5xx), and every
//! answer matches the document (status, content type and body schema of the operation).

use std::path::PathBuf;
use std::process::Command;
use std::sync::Mutex;

use serde_json::Value;

use crate::MercerServer;

/// The version installed; a venv holding another is reinstalled.
pub const VERSION: &str = "4.32.5";

/// `target/fuzz-api`, beside the profile folders the test executable lives in.
pub fn work_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test executable has a path");
    // target/<profile>/deps/<test>-<hash> → target
    exe.ancestors()
        .nth(3)
        .expect("the test executable lives in target/<profile>/deps")
        .join("fuzz-api")
}

/// The `st` command, installed into `target/fuzz-api/venv` when it is not there yet (once per
/// process even when tests ask at the same time).
pub fn install() -> Result<PathBuf, String> {
    static INSTALLING: Mutex<()> = Mutex::new(());
    let _one_at_a_time = INSTALLING
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let venv = work_dir().join("venv");
    let st = venv.join("bin").join("st");
    let installed = Command::new(&st)
        .arg("--version")
        .output()
        .is_ok_and(|output| String::from_utf8_lossy(&output.stdout).contains(VERSION));
    if installed {
        return Ok(st);
    }
    run(Command::new("python3")
        .args(["-m", "venv", "--clear"])
        .arg(&venv))?;
    run(Command::new(venv.join("bin").join("pip")).args([
        "install",
        "--quiet",
        "--disable-pip-version-check",
        &format!("schemathesis=={VERSION}"),
    ]))?;
    Ok(st)
}

fn run(command: &mut Command) -> Result<(), String> {
    let output = command
        .output()
        .map_err(|error| format!("cannot run {command:?}: {error}"))?;
    if output.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{command:?} failed ({}): {}{}",
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        ))
    }
}

/// What one run found.
#[derive(Debug)]
pub struct Findings {
    /// Test cases schemathesis generated and sent.
    pub cases: u64,
    /// Distinct failures (a server error or an answer off the document).
    pub failures: u64,
    /// Operations tested.
    pub operations: u64,
    /// schemathesis's exit code: 0 when it found nothing.
    pub exit_code: i32,
    /// Its own account of the run (each failure with a curl command that reproduces it).
    pub output: String,
    /// The JSON report.
    pub report: PathBuf,
}

/// Path parameters held to fixed values on the operations whose path template matches a
/// regex: the ids of records seeded before the run, so the fuzzer's bodies reach a handler with
/// a real record rather than a 404. The regexes of a run's pins should not overlap. Deletes are
/// not pinned: the first would take the seeded record (and what hangs from it) away from every
/// later case; they reach real records through the document's links from creates instead.
pub struct Pin {
    /// A regular expression over the path template (`^/…/subscriptions/\{id\}$`).
    pub path_regex: String,
    /// The path parameters and their values (`id` = `7`).
    pub parameters: Vec<(&'static str, String)>,
}

/// The credentials of each security scheme of the document, given to schemathesis per scheme
/// so each operation gets the one it names.
pub struct Credentials {
    /// An API token of the shop with every scope (`api_token`).
    pub api_token: String,
    /// The JWT of the order the checkout routes are pinned to (`checkout_jwt`).
    pub checkout_jwt: String,
    /// A token the platform issued the customer the box builder's customer routes are pinned
    /// to (`customer_token`).
    pub customer_token: String,
}

/// What one run fuzzes on: the credentials, the pins, and the operations it leaves alone.
pub struct Plan {
    pub credentials: Credentials,
    pub pins: Vec<Pin>,
    /// Operation ids not fuzzed: those that would break the run's own set-up (rotating the
    /// connector secret leaves the simulator with a stale one, after which every connector call
    /// is rightly a 502).
    pub skipped: Vec<&'static str>,
}

fn quoted(text: &str) -> String {
    serde_json::to_string(text).unwrap_or_default()
}

/// The run's configuration: each security scheme's credential, the demo shop in every
/// `{shop}`, the version header pinned to a supported date (random dates before 2022-05-01 are
/// refused before anything else, which would keep most cases from the handlers), and each pin
/// on its operations.
fn config(shop: &str, plan: &Plan) -> String {
    let credentials = &plan.credentials;
    let mut config = format!(
        "[auth.openapi.api_token]\nbearer = {}\n\n[auth.openapi.checkout_jwt]\nbearer = {}\n\n\
         [auth.openapi.customer_token]\napi_key = {}\n\n\
         [parameters]\n\"path.shop\" = {}\n\"header.Svc-API-Version-Date\" = \"2024-06-01\"\n",
        quoted(&credentials.api_token),
        quoted(&credentials.checkout_jwt),
        quoted(&credentials.customer_token),
        quoted(shop)
    );
    for operation_id in &plan.skipped {
        config.push_str(&format!(
            "\n[[operations]]\ninclude-operation-id = {}\nenabled = false\n",
            quoted(operation_id)
        ));
    }
    for pin in &plan.pins {
        let pinned: String = pin
            .parameters
            .iter()
            .map(|(name, value)| format!(", \"path.{name}\" = {}", quoted(value)))
            .collect();
        config.push_str(&format!(
            "\n[[operations]]\ninclude-path-regex = {}\nexclude-method = \"DELETE\"\n\
             parameters = {{ \"path.shop\" = {}, \
             \"header.Svc-API-Version-Date\" = \"2024-06-01\"{pinned} }}\n",
            quoted(&pin.path_regex),
            quoted(shop),
        ));
    }
    config
}

/// Fuzzes every operation of `server`'s document for `max_time` seconds, as the demo shop
/// (its identifier in every `{shop}`, `pins` on their operations), writing to
/// `target/fuzz-api/<name>`.
pub fn fuzz(
    server: &MercerServer,
    name: &str,
    max_time: u64,
    plan: &Plan,
) -> Result<Findings, String> {
    let st = install()?;
    let dir = work_dir().join(name);
    std::fs::create_dir_all(&dir).map_err(|error| format!("{}: {error}", dir.display()))?;
    let config = config(&server.demo().shop, plan);
    let config_path = dir.join("schemathesis.toml");
    std::fs::write(&config_path, config).map_err(|error| error.to_string())?;
    let report = dir.join("report.json");
    let output = Command::new(&st)
        .current_dir(&dir)
        .arg("--config-file")
        .arg(&config_path)
        .arg("run")
        .arg(server.url("/openapi.json"))
        .args(["--checks", "not_a_server_error,response_schema_conformance"])
        .args(["--max-time", &max_time.to_string()])
        .args(["--workers", "1", "--request-timeout", "30"])
        .args(["--report", "json", "--report-json-path"])
        .arg(&report)
        .output()
        .map_err(|error| format!("cannot run {}: {error}", st.display()))?;
    let text = std::fs::read_to_string(&report)
        .map_err(|error| format!("no report at {}: {error}", report.display()))?;
    let json: Value = serde_json::from_str(&text).map_err(|error| error.to_string())?;
    let number = |pointer: &str| json.pointer(pointer).and_then(Value::as_u64).unwrap_or(0);
    Ok(Findings {
        cases: number("/test_cases/generated"),
        failures: number("/test_cases/unique_failures"),
        operations: number("/operations/tested"),
        exit_code: output.status.code().unwrap_or(-1),
        output: String::from_utf8_lossy(&output.stdout).into_owned(),
        report,
    })
}

/// How long a run lasts: `MERCER_FUZZ_SECONDS`, else `default` seconds.
pub fn max_time(default: u64) -> u64 {
    std::env::var("MERCER_FUZZ_SECONDS")
        .ok()
        .and_then(|value| value.trim().parse().ok())
        .filter(|seconds| *seconds > 0)
        .unwrap_or(default)
}
