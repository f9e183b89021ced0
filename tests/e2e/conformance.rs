//! `mercer conformance` end to end: the real `mercer` binary checks the real simulator binary
//! (`mercer-platform-sim serve`, on a free loopback port). The simulator passes every check and
//! keeps none of the test customers; each of its faults, set with its own `fault` command, makes
//! the run exit 1 with a named check failing.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Output, Stdio};

use mercer_connector::conformance::{CHECKS, TEST_EMAIL_DOMAIN};
use mercer_tests::mercer_binary;
use serde_json::{Value, json};

const SHOP: &str = "0123456789abcdef0123456789abcdef";
const SECRET: &str = "conformance-secret";

/// The simulator binary, serving on a free port until dropped.
struct Simulator {
    child: Child,
    base_url: String,
}

impl Simulator {
    fn start() -> Simulator {
        let mut child = Command::new(sim_binary())
            .args(["serve", "--bind", "127.0.0.1:0"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("cannot run mercer-platform-sim");
        let stdout = child.stdout.take().unwrap();
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line).unwrap();
        let base_url = line
            .trim()
            .strip_prefix("Platform simulator listening on ")
            .unwrap_or_else(|| panic!("the simulator printed {line:?}"))
            .to_string();
        let sim = Simulator { child, base_url };
        sim.command(&["shop", "--shop", SHOP, "--secret", SECRET]);
        sim
    }

    /// Runs a command of the simulator binary against this simulator.
    fn command(&self, args: &[&str]) -> String {
        let output = Command::new(sim_binary())
            .args(args)
            .env("SIM_ADMIN_URL", &self.base_url)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        assert!(output.status.success(), "{args:?}: {stdout}");
        stdout
    }

    fn state(&self) -> Value {
        let url = format!("{}/admin/shops/{SHOP}/state", self.base_url);
        ureq::get(url)
            .call()
            .unwrap()
            .body_mut()
            .read_json()
            .unwrap()
    }

    fn test_customers(&self) -> Vec<Value> {
        let state = self.state();
        let customers = state["customers"].as_array().unwrap().iter();
        customers
            .filter(|c| {
                c["email"]
                    .as_str()
                    .unwrap_or_default()
                    .ends_with(TEST_EMAIL_DOMAIN)
            })
            .cloned()
            .collect()
    }

    /// `mercer conformance` against this simulator, with `extra` flags.
    fn conformance(&self, extra: &[&str]) -> Run {
        let mut args = vec!["--log-level", "warn", "conformance", "--connector"];
        args.extend([self.base_url.as_str(), "--shop", SHOP, "--secret", SECRET]);
        args.extend(extra);
        Run::of(Command::new(mercer_binary()).args(&args).output().unwrap())
    }
}

impl Drop for Simulator {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn sim_binary() -> std::path::PathBuf {
    mercer_binary().with_file_name("mercer-platform-sim")
}

/// What a `mercer conformance` run printed: its table's rows, standard error, exit code.
struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

/// One row of the table: check, section, result, reason.
#[derive(Debug)]
struct Row {
    check: String,
    section: String,
    result: String,
    reason: String,
}

impl Run {
    fn of(output: Output) -> Run {
        Run {
            code: output.status.code(),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        }
    }

    fn rows(&self) -> Vec<Row> {
        let lines = self.stdout.lines().skip(1);
        lines
            .map(|line| {
                // CHECK, the section (two words: the page, then its section), RESULT, REASON.
                let mut parts = line.split_whitespace();
                let check = parts.next().unwrap_or_default().to_string();
                let section = format!(
                    "{} {}",
                    parts.next().unwrap_or_default(),
                    parts.next().unwrap_or_default()
                );
                let result = parts.next().unwrap_or_default().to_string();
                let reason = parts.collect::<Vec<_>>().join(" ");
                Row {
                    check,
                    section,
                    result,
                    reason,
                }
            })
            .collect()
    }

    fn row(&self, check: &str) -> Row {
        self.rows()
            .into_iter()
            .find(|row| row.check == check)
            .unwrap_or_else(|| panic!("no row {check}:\n{}", self.stdout))
    }

    /// Asserts that `check` failed, its reason saying `because`.
    fn assert_failed(&self, check: &str, because: &str) {
        let row = self.row(check);
        assert_eq!(row.result, "FAIL", "{check}:\n{}", self.stdout);
        assert!(
            row.reason.contains(because),
            "{check}: {row:?}\n{}",
            self.stdout
        );
    }
}

#[test]
fn conformance_passes_against_the_simulator_and_deletes_its_test_customers() {
    let sim = Simulator::start();
    sim.command(&[
        "seed",
        "--shop",
        SHOP,
        "--customers",
        "300",
        "--orders",
        "3",
        "--products",
        "20",
    ]);
    let owner = sim.state()["customers"][0]["platform_id"]
        .as_str()
        .unwrap()
        .to_string();
    let issued = sim.command(&["customer-token", "--shop", SHOP, "--platform-id", &owner]);
    let token: Value = serde_json::from_str(issued.trim()).unwrap();
    let token = format!("{owner}:{}", token["token"].as_str().unwrap());

    let run = sim.conformance(&["--allow-private-targets", "--customer-token", &token]);
    assert_eq!(run.code, Some(0), "{}\n{}", run.stdout, run.stderr);
    let rows = run.rows();
    let checks: Vec<&str> = rows.iter().map(|row| row.check.as_str()).collect();
    let expected: Vec<&str> = CHECKS.iter().map(|check| check.name).collect();
    assert_eq!(checks, expected, "one row per check:\n{}", run.stdout);
    for row in &rows {
        assert_eq!(row.result, "PASS", "{row:?}");
        assert!(row.section.starts_with("docs/connector.md §"), "{row:?}");
    }
    assert_eq!(
        run.row("validate-customer-jwt").reason,
        "",
        "a real token was tried too"
    );
    assert!(
        run.stderr
            .contains(&format!("All {} conformance checks passed", CHECKS.len())),
        "{}",
        run.stderr
    );

    // The test customers (and their address) are deleted, soft: the platform keeps them aside.
    assert_eq!(sim.test_customers(), Vec::<Value>::new());
    let state = sim.state();
    assert_eq!(state["deleted_customers"].as_array().unwrap().len(), 3);
    assert_eq!(state["deleted_addresses"].as_array().unwrap().len(), 1);
    // The one test order stays (the interface has no Delete Order), and the run says so.
    let orders = state["orders"].as_array().unwrap();
    let test_orders: Vec<&Value> = orders.iter().filter(|o| o["test"] == json!(true)).collect();
    assert_eq!(test_orders.len(), 1, "{orders:?}");
    let id = test_orders[0]["platform_id"].as_str().unwrap();
    assert!(
        run.stderr
            .contains(&format!("Left on the platform: test order {id}")),
        "{}",
        run.stderr
    );
}

/// Each fault of the simulator (its `fault` command's flags), a check it fails, and why.
const FAULTS: &[(&str, &str, &str)] = &[
    (
        "--status 500",
        "customer-not-found",
        "answered 500, not 404",
    ),
    ("--status 500", "verification-echo", "Verify answered 500"),
    (
        "--status 302 --location http://127.0.0.1:9/elsewhere",
        "orders-paging",
        "Mercer never follows redirects",
    ),
    (
        "--delay-ms 1500",
        "products-paging",
        "no answer within 300 ms",
    ),
    (
        "--wrong-hmac",
        "verification-echo",
        "X-HMAC is not the HMAC",
    ),
    ("--malformed-json", "json-answers", "not JSON"),
];

#[test]
fn conformance_fails_a_named_check_for_each_simulator_fault() {
    let sim = Simulator::start();
    let seed = "seed --customers 5 --orders 2 --products 3 --shop";
    sim.command(&[seed.split_whitespace().collect(), vec![SHOP]].concat());
    for (fault, check, because) in FAULTS {
        sim.command(&[vec!["fault"], fault.split_whitespace().collect()].concat());
        let run = sim.conformance(&["--allow-private-targets", "--timeout-ms", "300"]);
        sim.command(&["fault", "--clear"]);
        let printed = format!("{fault}:\n{}\n{}", run.stdout, run.stderr);
        assert_eq!(run.code, Some(1), "{printed}");
        assert!(
            run.stderr.contains("conformance checks failed"),
            "{printed}"
        );
        run.assert_failed(check, because);
        // The refusals come before the faults: a connector that refuses forgeries still does.
        assert_eq!(run.row("refuses-bad-hmac").result, "PASS", "{printed}");
    }
    // Nothing is written to a connector that fails its verification: nothing is left behind.
    assert_eq!(sim.test_customers(), Vec::<Value>::new());
    let deleted = &sim.state()["deleted_customers"];
    assert_eq!(deleted, &json!([]), "no test customer was made");
}

#[test]
fn conformance_refuses_a_loopback_connector_unless_allowed() {
    let sim = Simulator::start();
    let run = sim.conformance(&[]);
    assert_eq!(run.code, Some(1), "{}", run.stdout);
    assert_eq!(run.stdout, "", "no check ran");
    assert!(run.stderr.contains("loopback"), "{}", run.stderr);
    assert!(
        run.stderr.contains("--allow-private-targets"),
        "{}",
        run.stderr
    );
    assert_eq!(
        sim.state()["requests"],
        json!([]),
        "no call reached the connector"
    );
}
