//! The vendor's own frontend library, `@boldcommerce/checkout-frontend-library` (npm, MIT,
//! 0.66.0), run by Node.js against a Mercer server: installed into
//! `target/test-verifiers/checkout-frontend` the first time a test needs it, and driven by a
//! small script that calls the library's functions in the order a test gives.

use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::{Value, json};

use crate::verifiers::{run, verifiers_dir};

const LIBRARY: &str = "@boldcommerce/checkout-frontend-library@0.66.0";
const ESBUILD: &str = "esbuild@0.25";

/// `runPlan(lib, plan)`: calls `initialize` with `plan.init` (Init Order's `data`) and the
/// environment `{type: 'local', path: 'checkout', url}`, then each step's library function with
/// its arguments (`plan.steps`: `[[function, ...arguments]]`), and answers what each answered and
/// the library's application state at the end. Node.js and the browser page run the same code.
pub(crate) const RUN_PLAN: &str = r#"
async function runPlan(lib, plan) {
  const results = [];
  const record = (name, r) => results.push({
    function: name, success: r.success, status: r.status,
    response: r.response === undefined ? null : r.response,
    error: r.error ? { status: r.error.status, message: r.error.message, body: r.error.body ?? null } : null,
  });
  record('initialize', await lib.initialize(plan.init, plan.shop,
    { type: 'local', path: 'checkout', url: plan.url }));
  for (const [name, ...args] of plan.steps) {
    if (typeof lib[name] !== 'function') throw new Error(`the library has no ${name}`);
    record(name, await lib[name](...args));
  }
  return { results, state: lib.getApplicationState() };
}
"#;

/// Reads a plan (`{url, shop, init, steps}`) from the file named first, runs it in Node.js and
/// prints what [`RUN_PLAN`] answered.
const NODE_DRIVER: &str = r#"
const lib = require('@boldcommerce/checkout-frontend-library');
const fs = require('fs');
const plan = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
runPlan(lib, plan)
  .then((ran) => console.log(JSON.stringify(ran)))
  .catch((error) => { console.error(error); process.exit(1); });
"#;

fn directory() -> &'static PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = verifiers_dir().join("checkout-frontend");
        std::fs::create_dir_all(&dir).expect("create the checkout-frontend directory");
        let installed =
            dir.join("node_modules/@boldcommerce/checkout-frontend-library/package.json");
        if !installed.exists() {
            run(
                Command::new("npm")
                    .args(["install", "--no-audit", "--no-fund", "--prefix"])
                    .arg(&dir)
                    .arg(LIBRARY),
                "npm install @boldcommerce/checkout-frontend-library",
            )
            .unwrap_or_else(|error| panic!("{error}"));
        }
        std::fs::write(dir.join("driver.cjs"), format!("{RUN_PLAN}{NODE_DRIVER}"))
            .expect("write the driver");
        dir
    })
}

/// What one library function answered.
#[derive(Debug, Clone)]
pub struct Step {
    pub function: String,
    pub success: bool,
    pub status: u16,
    /// The whole body Mercer answered (`{"data": …}` or `{"errors": […]}`).
    pub response: Value,
}

/// Every step's answer, and the library's application state at the end.
#[derive(Debug, Clone)]
pub struct Drive {
    pub steps: Vec<Step>,
    pub state: Value,
}

impl Drive {
    /// The answer of the last call of `function`.
    pub fn step(&self, function: &str) -> &Step {
        self.steps
            .iter()
            .rev()
            .find(|step| step.function == function)
            .unwrap_or_else(|| panic!("{function} was not called: {:?}", self.steps))
    }
}

/// The plan [`RUN_PLAN`] runs: `initialize` with Init Order's `data` against `url`, then `steps`.
pub(crate) fn plan(url: &str, shop: &str, init: &Value, steps: Value) -> Value {
    json!({"url": url, "shop": shop, "init": init, "steps": steps})
}

/// Writes `plan` to a file of its own in the library's directory.
pub(crate) fn write_plan(plan: &Value) -> PathBuf {
    static PLANS: AtomicUsize = AtomicUsize::new(0);
    let path = directory().join(format!(
        "plan-{}-{}.json",
        std::process::id(),
        PLANS.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::write(&path, plan.to_string()).expect("write the plan");
    path
}

impl Drive {
    /// What [`RUN_PLAN`] answered: `{results, state}`.
    pub(crate) fn from_run(ran: &Value) -> Drive {
        let steps = ran["results"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .into_iter()
            .map(|result| Step {
                function: result["function"].as_str().unwrap_or_default().to_string(),
                success: result["success"] == true,
                status: result["status"].as_u64().unwrap_or(0) as u16,
                response: result["response"].clone(),
            })
            .collect();
        Drive {
            steps,
            state: ran["state"].clone(),
        }
    }
}

/// Runs the library in Node.js against `url`: `initialize` with Init Order's `data`, then
/// `steps` (`[["addGuestCustomer", "Ada", …], …]`).
pub fn drive(url: &str, shop: &str, init: &Value, steps: Value) -> Drive {
    let dir = directory();
    let plan = write_plan(&plan(url, shop, init, steps));
    let output = Command::new("node")
        .arg(dir.join("driver.cjs"))
        .arg(&plan)
        .current_dir(dir)
        .output()
        .expect("node runs");
    let _ = std::fs::remove_file(&plan);
    assert!(
        output.status.success(),
        "the driver failed: {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let printed: Value = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|error| panic!("{error}: {}", String::from_utf8_lossy(&output.stdout)));
    Drive::from_run(&printed)
}

/// The library bundled for a browser page by esbuild (npm, installed beside it the first
/// time): one script that defines the global `CheckoutLibrary`.
pub(crate) fn browser_bundle() -> &'static PathBuf {
    static BUNDLE: OnceLock<PathBuf> = OnceLock::new();
    BUNDLE.get_or_init(|| {
        let dir = directory();
        let esbuild = dir.join("node_modules/.bin/esbuild");
        if !esbuild.exists() {
            run(
                Command::new("npm")
                    .args(["install", "--no-audit", "--no-fund", "--prefix"])
                    .arg(dir)
                    .arg(ESBUILD),
                "npm install esbuild",
            )
            .unwrap_or_else(|error| panic!("{error}"));
        }
        let entry = dir.join("browser-entry.cjs");
        std::fs::write(
            &entry,
            "module.exports = require('@boldcommerce/checkout-frontend-library');\n",
        )
        .expect("write the bundle's entry");
        let bundle = dir.join("library.browser.js");
        run(
            Command::new(&esbuild)
                .arg(&entry)
                .args([
                    "--bundle",
                    "--platform=browser",
                    "--format=iife",
                    "--global-name=CheckoutLibrary",
                    "--log-level=warning",
                ])
                .arg(format!("--outfile={}", bundle.display()))
                .current_dir(dir),
            "esbuild the library for the browser",
        )
        .unwrap_or_else(|error| panic!("{error}"));
        bundle
    })
}
