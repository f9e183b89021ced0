//! A real browser for tests: Debian's `chromium`, driven by npm's `playwright-core`. Both are
//! installed the first time a test needs them (`apt-get install chromium` when the test runs as
//! root; `playwright-core` into `target/test-verifiers/browser`).
//!
//! Where Chromium cannot be installed the browser test is skipped, loudly: [`Skipped`] names
//! the reason, and the test writes it to `target/test-verifiers/BROWSER_SKIPPED`, which
//! `cargo xtask test` prints at the end of the run.

use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

use crate::verifiers::{run, verifiers_dir};

const PLAYWRIGHT: &str = "playwright-core@1.65";
const CHROMIUM: &str = "/usr/bin/chromium";

/// Signs in on Mercer's authorize page, approves, and reports where the browser ended up.
/// JavaScript is off in the page's context: the page must work without it.
const SIGN_IN_SCRIPT: &str = r#"
const { chromium } = require('playwright-core');
const [authorizeUrl, email, password, chromiumPath] = process.argv.slice(2);
(async () => {
  const browser = await chromium.launch({
    executablePath: chromiumPath,
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage',
           '--disable-background-networking', '--no-first-run'],
  });
  try {
    const context = await browser.newContext({ javaScriptEnabled: false });
    const page = await context.newPage();
    const first = await page.goto(authorizeUrl);
    const heading = await page.textContent('h1');
    await page.fill('#email', email);
    await page.fill('#password', password);
    await Promise.all([
      page.waitForURL((url) => url.pathname === '/callback', { timeout: 15000 }),
      page.click('button[value=approve]'),
    ]);
    console.log(JSON.stringify({ status: first.status(), heading, finalUrl: page.url(),
                                 body: await page.textContent('body') }));
  } finally {
    await browser.close();
  }
})().catch((error) => { console.error(error); process.exit(1); });
"#;

/// Why the browser test could not run.
#[derive(Debug, Clone)]
pub struct Skipped(pub String);

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|out| String::from_utf8_lossy(&out.stdout).trim() == "0")
}

/// Installs Chromium from Debian when it is missing. `Err` only when it cannot be installed.
fn ensure_chromium() -> Result<PathBuf, Skipped> {
    let path = PathBuf::from(CHROMIUM);
    if path.exists() {
        return Ok(path);
    }
    if !is_root() {
        return Err(Skipped(format!(
            "{CHROMIUM} is missing and the tests do not run as root, so `apt-get install chromium` cannot run"
        )));
    }
    let apt = |args: &[&str], what: &str| {
        run(
            Command::new("apt-get")
                .args(args)
                .env("DEBIAN_FRONTEND", "noninteractive"),
            what,
        )
    };
    apt(&["update", "-qq"], "apt-get update")
        .and_then(|()| {
            apt(
                &[
                    "install",
                    "-y",
                    "-qq",
                    "--no-install-recommends",
                    "chromium",
                ],
                "apt-get install chromium",
            )
        })
        .map_err(Skipped)?;
    if path.exists() {
        Ok(path)
    } else {
        Err(Skipped(format!(
            "apt-get installed chromium but {CHROMIUM} is not there"
        )))
    }
}

pub struct Browser {
    chromium: PathBuf,
    script: PathBuf,
    node_modules: PathBuf,
}

/// Chromium and playwright-core, installed once per test run. Installing playwright-core
/// failing is a failure (npm is always there), not a skip.
pub fn browser() -> Result<&'static Browser, Skipped> {
    static BROWSER: OnceLock<Result<Browser, Skipped>> = OnceLock::new();
    BROWSER
        .get_or_init(|| {
            let chromium = ensure_chromium()?;
            let dir = verifiers_dir().join("browser");
            std::fs::create_dir_all(&dir).expect("create the browser directory");
            if !dir
                .join("node_modules/playwright-core/package.json")
                .exists()
            {
                run(
                    Command::new("npm")
                        .args(["install", "--no-audit", "--no-fund", "--prefix"])
                        .arg(&dir)
                        .arg(PLAYWRIGHT)
                        // Never download a browser build: Debian's Chromium is the one used.
                        .env("PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD", "1"),
                    "npm install playwright-core",
                )
                .unwrap_or_else(|error| panic!("{error}"));
            }
            let script = dir.join("sign-in.js");
            std::fs::write(&script, SIGN_IN_SCRIPT).expect("write the browser script");
            Ok(Browser {
                chromium,
                script,
                node_modules: dir.join("node_modules"),
            })
        })
        .as_ref()
        .map_err(Clone::clone)
}

/// Records a skip where `cargo xtask test` will find it and print it.
pub fn report_skip(skipped: &Skipped) {
    let banner = format!(
        "BROWSER TEST SKIPPED: Chromium cannot be installed here: {}",
        skipped.0
    );
    eprintln!("\n{}\n{banner}\n{}\n", "!".repeat(78), "!".repeat(78));
    let _ = std::fs::create_dir_all(verifiers_dir());
    let _ = std::fs::write(verifiers_dir().join("BROWSER_SKIPPED"), banner);
}

/// What the browser saw.
#[derive(Debug)]
pub struct SignInResult {
    pub first_status: u16,
    pub heading: String,
    pub final_url: String,
}

impl Browser {
    /// Opens `authorize_url`, signs in with `email` and `password`, approves, and follows the
    /// redirect to the client's `/callback`.
    pub fn sign_in_and_approve(
        &self,
        authorize_url: &str,
        email: &str,
        password: &str,
    ) -> SignInResult {
        let output = Command::new("node")
            .arg(&self.script)
            .args([authorize_url, email, password])
            .arg(&self.chromium)
            .env("NODE_PATH", &self.node_modules)
            .output()
            .expect("run node");
        assert!(
            output.status.success(),
            "the browser run failed: {}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        let line = String::from_utf8_lossy(&output.stdout);
        let seen: serde_json::Value =
            serde_json::from_str(line.trim().lines().last().unwrap_or_default())
                .unwrap_or_else(|error| panic!("the browser printed {line:?}: {error}"));
        SignInResult {
            first_status: seen["status"].as_u64().unwrap_or_default() as u16,
            heading: seen["heading"].as_str().unwrap_or_default().to_string(),
            final_url: seen["finalUrl"].as_str().unwrap_or_default().to_string(),
        }
    }
}
