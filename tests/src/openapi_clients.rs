//! The OpenAPI document as others read it: npm's `@redocly/cli` linting it with its recommended
//! rules, and PyPI's `openapi-python-client` generating a Python client from it. Both are
//! installed, pinned, the first time a test needs them, into `target/openapi-clients` (a venv
//! and an npm prefix), and reused by later runs.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

use serde_json::Value;

/// The `@redocly/cli` version installed; another is replaced.
pub const REDOCLY_VERSION: &str = "2.77.0";
/// The `openapi-python-client` version installed; another is replaced.
pub const PYTHON_CLIENT_VERSION: &str = "0.29.1";

/// `target/openapi-clients`, beside the profile folders the test executable lives in.
pub fn work_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test executable has a path");
    // target/<profile>/deps/<test>-<hash> → target
    exe.ancestors()
        .nth(3)
        .map_or_else(|| PathBuf::from("target"), Path::to_path_buf)
        .join("openapi-clients")
}

/// The installed tools.
pub struct Tools {
    /// The `redocly` command.
    pub redocly: PathBuf,
    /// The venv's `openapi-python-client` command.
    pub generator: PathBuf,
    /// The venv's Python, which has what the generated client imports (`httpx`, `attrs`,
    /// `python-dateutil`: the generator's own dependencies).
    pub python: PathBuf,
}

fn run(command: &mut Command) -> Result<String, String> {
    let output = command
        .output()
        .map_err(|error| format!("cannot run {command:?}: {error}"))?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    if output.status.success() {
        Ok(text)
    } else {
        Err(format!("{command:?} failed ({}): {text}", output.status))
    }
}

/// Installs both tools once per test process (when the pinned versions are not there yet); a
/// failure is the test's failure, never a skip.
pub fn install() -> &'static Result<Tools, String> {
    static INSTALLED: OnceLock<Result<Tools, String>> = OnceLock::new();
    INSTALLED.get_or_init(|| {
        let dir = work_dir();
        let node = dir.join("node");
        std::fs::create_dir_all(&node).map_err(|error| format!("{}: {error}", node.display()))?;
        let redocly_manifest = node.join("node_modules/@redocly/cli/package.json");
        let redocly_installed = std::fs::read_to_string(&redocly_manifest)
            .ok()
            .and_then(|text| serde_json::from_str::<Value>(&text).ok())
            .is_some_and(|manifest| manifest["version"] == REDOCLY_VERSION);
        if !redocly_installed {
            run(Command::new("npm")
                .args([
                    "install",
                    "--no-audit",
                    "--no-fund",
                    "--save-exact",
                    "--prefix",
                ])
                .arg(&node)
                .arg(format!("@redocly/cli@{REDOCLY_VERSION}")))?;
        }
        let venv = dir.join("venv");
        let generator = venv.join("bin/openapi-python-client");
        let generator_installed = Command::new(&generator)
            .arg("--version")
            .output()
            .is_ok_and(|output| {
                String::from_utf8_lossy(&output.stdout).contains(PYTHON_CLIENT_VERSION)
            });
        if !generator_installed {
            run(Command::new("python3")
                .args(["-m", "venv", "--clear"])
                .arg(&venv))?;
            run(Command::new(venv.join("bin/pip")).args([
                "install",
                "--quiet",
                "--disable-pip-version-check",
                &format!("openapi-python-client=={PYTHON_CLIENT_VERSION}"),
            ]))?;
        }
        Ok(Tools {
            redocly: node.join("node_modules/.bin/redocly"),
            generator,
            python: venv.join("bin/python"),
        })
    })
}

/// One problem `redocly lint` found.
#[derive(Debug, Clone)]
pub struct LintProblem {
    /// `error` or `warn`.
    pub severity: String,
    pub rule: String,
    pub message: String,
    /// Where in the document, as a JSON pointer.
    pub pointer: String,
}

impl std::fmt::Display for LintProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} {} at {}: {}",
            self.severity, self.rule, self.pointer, self.message
        )
    }
}

/// `redocly lint` of `document` with its built-in recommended rules (run where no Redocly
/// configuration file is, so none turns a rule off): every problem it reports.
pub fn lint(tools: &Tools, document: &Path) -> Result<Vec<LintProblem>, String> {
    let dir = work_dir().join("lint");
    std::fs::create_dir_all(&dir).map_err(|error| format!("{}: {error}", dir.display()))?;
    let output = Command::new(&tools.redocly)
        .current_dir(&dir)
        .arg("lint")
        .arg(document)
        .arg("--format=json")
        // No telemetry or update check: these machines reach no outside host.
        .env("REDOCLY_TELEMETRY", "off")
        .env("REDOCLY_SUPPRESS_UPDATE_NOTICE", "true")
        .output()
        .map_err(|error| format!("cannot run {}: {error}", tools.redocly.display()))?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let report: Value = serde_json::from_str(&stdout).map_err(|error| {
        format!(
            "redocly lint wrote no JSON report ({error}): {stdout}{}",
            String::from_utf8_lossy(&output.stderr)
        )
    })?;
    let problems = report["problems"]
        .as_array()
        .ok_or_else(|| format!("no problems list in {report}"))?;
    Ok(problems
        .iter()
        .map(|problem| LintProblem {
            severity: problem["severity"].as_str().unwrap_or_default().to_string(),
            rule: problem["ruleId"].as_str().unwrap_or_default().to_string(),
            message: problem["message"].as_str().unwrap_or_default().to_string(),
            pointer: problem["location"][0]["pointer"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
        })
        .collect())
}

/// A Python client generated from a document.
#[derive(Debug)]
pub struct PythonClient {
    /// The folder to put on `PYTHONPATH`: it holds the client's package.
    pub path: PathBuf,
    /// The package's name (`mercer_client`).
    pub package: String,
    /// The operations it has: one module under `api/<tag>/` each.
    pub operations: usize,
    /// The lines of the generator's output that say something was left out or went wrong.
    pub warnings: Vec<String>,
    /// The generator's whole output.
    pub output: String,
}

/// The generator's settings: no post hooks (they would run `ruff`, which the venv does not
/// need), and the CSV import's `text/csv` body sent as raw bytes (the generator has no CSV body
/// type of its own).
const GENERATOR_CONFIG: &str =
    "post_hooks: []\ncontent_type_overrides:\n  text/csv: application/octet-stream\n";

/// Generates a Python client from `document` into `target/openapi-clients/<name>-<pid>`: a
/// folder of this process's own, so two test processes never write under each other's
/// imports. Such folders of earlier runs (older than an hour) are removed.
pub fn generate_python_client(
    tools: &Tools,
    document: &Path,
    name: &str,
) -> Result<PythonClient, String> {
    remove_stale(name);
    let dir = work_dir().join(format!("{name}-{}", std::process::id()));
    let package = "mercer_client";
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(|error| format!("{}: {error}", dir.display()))?;
    let config = dir.join("config.yaml");
    std::fs::write(&config, GENERATOR_CONFIG).map_err(|error| error.to_string())?;
    let output = run(Command::new(&tools.generator)
        .current_dir(&dir)
        .args(["generate", "--meta", "none", "--overwrite", "--path"])
        .arg(document)
        .arg("--config")
        .arg(&config)
        .arg("--output-path")
        .arg(dir.join(package)))?;
    let warnings = output
        .lines()
        .filter(|line| {
            let lower = line.to_lowercase();
            ["warning", "will not be generated", "error", "skipping"]
                .iter()
                .any(|word| lower.contains(word))
        })
        .map(str::to_string)
        .collect();
    let api = dir.join(package).join("api");
    let mut operations = 0;
    for tag in std::fs::read_dir(&api).map_err(|error| format!("{}: {error}", api.display()))? {
        let tag = tag.map_err(|error| error.to_string())?.path();
        if !tag.is_dir() {
            continue;
        }
        for module in std::fs::read_dir(&tag).map_err(|error| error.to_string())? {
            let module = module.map_err(|error| error.to_string())?.path();
            let is_operation = module.extension().is_some_and(|ext| ext == "py")
                && module.file_name().is_some_and(|file| file != "__init__.py");
            if is_operation {
                operations += 1;
            }
        }
    }
    Ok(PythonClient {
        path: dir,
        package: package.to_string(),
        operations,
        warnings,
        output,
    })
}

/// Removes the `<name>-<pid>` folders last changed over an hour ago.
fn remove_stale(name: &str) {
    let Ok(entries) = std::fs::read_dir(work_dir()) else {
        return;
    };
    let prefix = format!("{name}-");
    for entry in entries.flatten() {
        let stale = entry
            .metadata()
            .and_then(|metadata| metadata.modified())
            .ok()
            .and_then(|modified| modified.elapsed().ok())
            .is_some_and(|age| age > Duration::from_secs(3600));
        if stale && entry.file_name().to_string_lossy().starts_with(&prefix) {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// The number of operations of a document: its paths' methods.
pub fn operation_count(document: &Value) -> usize {
    const METHODS: [&str; 8] = [
        "get", "put", "post", "delete", "options", "head", "patch", "trace",
    ];
    document["paths"]
        .as_object()
        .map(|paths| {
            paths
                .values()
                .filter_map(Value::as_object)
                .map(|item| {
                    item.keys()
                        .filter(|key| METHODS.contains(&key.as_str()))
                        .count()
                })
                .sum()
        })
        .unwrap_or(0)
}
