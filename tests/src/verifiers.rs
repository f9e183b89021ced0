//! Independent verifiers of Mercer's webhook signatures, installed from their registries the
//! first time a test needs them (into `target/test-verifiers`), and run as real HTTP receivers:
//! npm's `http-signature` 1.4 (`parseRequest` + `verifyHMAC`) for the draft-cavage `Signature`
//! (with node's `crypto` checking that `Digest` is the body's SHA-256),
//! and PyPI's `standardwebhooks` (`Webhook(secret).verify`) for the Standard Webhooks headers;
//! and a few lines of Python's own `hmac` for `x-svc-signature` (lowercase hex
//! HMAC-SHA256 of the raw body). Each answers 200 when the request verifies and 401 (with the
//! reason) when it does not. [`replay`] sends a request another receiver recorded to a verifier.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use crate::receiver::Received;

/// `http-signature` checks the signature over the headers it names (and requires these three);
/// the `Digest` header is checked against the raw body with node's own `crypto`, since
/// `http-signature` does not read bodies.
const NODE_RECEIVER: &str = r#"
const crypto = require('crypto');
const http = require('http');
const httpSignature = require('http-signature');
const secret = process.argv[2];
const server = http.createServer((req, res) => {
  const chunks = [];
  req.on('data', (chunk) => { chunks.push(chunk); });
  req.on('end', () => {
    let status = 401, text = '';
    try {
      const body = Buffer.concat(chunks);
      const parsed = httpSignature.parseRequest(req, { headers: ['(request-target)', 'date', 'digest'] });
      const digest = 'SHA-256=' + crypto.createHash('sha256').update(body).digest('base64');
      if (req.headers['digest'] !== digest) { text = 'the Digest header is not the body\'s'; }
      else if (httpSignature.verifyHMAC(parsed, secret)) { status = 200; text = 'verified'; } else { text = 'signature does not verify'; }
    } catch (error) { text = 'unparsable: ' + error.message; }
    res.writeHead(status, { 'Content-Type': 'text/plain' });
    res.end(text);
  });
});
server.listen(0, '127.0.0.1', () => console.log('listening ' + server.address().port));
"#;

const PYTHON_RECEIVER: &str = r#"
import base64, http.server, sys
from standardwebhooks.webhooks import Webhook
webhook = Webhook("whsec_" + base64.b64encode(sys.argv[1].encode()).decode())
class Handler(http.server.BaseHTTPRequestHandler):
    # The status line and the body are two writes: without this, each answer waits for the
    # client's delayed ACK (40 ms), which made checking a thousand deliveries take a minute.
    disable_nagle_algorithm = True
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        try:
            webhook.verify(body, {key.lower(): value for key, value in self.headers.items()})
            status, text = 200, b"verified"
        except Exception as error:
            status, text = 401, str(error).encode()
        self.send_response(status)
        self.send_header("Content-Length", str(len(text)))
        self.end_headers()
        self.wfile.write(text)
    def log_message(self, *args):
        pass
server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print("listening", server.server_address[1], flush=True)
server.serve_forever()
"#;

/// Nothing to install: Python's standard library only. The header must be exactly the lowercase
/// hex digest, as the signature header carries it.
const SVC_SIGNATURE_RECEIVER: &str = r#"
import hashlib, hmac, http.server, sys
secret = sys.argv[1].encode()
class Handler(http.server.BaseHTTPRequestHandler):
    # The status line and the body are two writes: without this, each answer waits for the
    # client's delayed ACK (40 ms), which made checking a thousand deliveries take a minute.
    disable_nagle_algorithm = True
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        given = self.headers.get("x-svc-signature")
        expected = hmac.new(secret, body, hashlib.sha256).hexdigest()
        if given is None:
            status, text = 401, b"no x-svc-signature header"
        elif hmac.compare_digest(given, expected):
            status, text = 200, b"verified"
        else:
            status, text = 401, b"x-svc-signature does not verify"
        self.send_response(status)
        self.send_header("Content-Length", str(len(text)))
        self.end_headers()
        self.wfile.write(text)
    def log_message(self, *args):
        pass
server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print("listening", server.server_address[1], flush=True)
server.serve_forever()
"#;

pub(crate) fn verifiers_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test executable has a path");
    // target/<profile>/deps/e2e-<hash> → target/test-verifiers
    exe.ancestors()
        .nth(3)
        .map_or_else(|| PathBuf::from("target"), Path::to_path_buf)
        .join("test-verifiers")
}

pub(crate) fn run(command: &mut Command, what: &str) -> Result<(), String> {
    let output = command
        .output()
        .map_err(|error| format!("cannot run {what}: {error}"))?;
    if output.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{what} failed: {}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        ))
    }
}

/// Installs both verifiers once per test run; a failure is the test's failure, never a skip.
fn install() -> &'static Result<PathBuf, String> {
    static INSTALLED: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    INSTALLED.get_or_init(|| {
        let dir = verifiers_dir();
        let node = dir.join("node");
        std::fs::create_dir_all(&node).map_err(|e| e.to_string())?;
        if !node
            .join("node_modules/http-signature/package.json")
            .exists()
        {
            run(
                Command::new("npm")
                    .args(["install", "--no-audit", "--no-fund", "--prefix"])
                    .arg(&node)
                    .arg("http-signature@1.4"),
                "npm install http-signature@1.4",
            )?;
        }
        std::fs::write(node.join("receiver.js"), NODE_RECEIVER).map_err(|e| e.to_string())?;
        let venv = dir.join("venv");
        if !venv.join("bin/python").exists() {
            run(
                Command::new("python3").args(["-m", "venv"]).arg(&venv),
                "python3 -m venv",
            )?;
        }
        if run(
            Command::new(venv.join("bin/python")).args(["-c", "import standardwebhooks"]),
            "import standardwebhooks",
        )
        .is_err()
        {
            run(
                Command::new(venv.join("bin/pip")).args(["install", "--quiet", "standardwebhooks"]),
                "pip install standardwebhooks",
            )?;
        }
        std::fs::write(dir.join("receiver.py"), PYTHON_RECEIVER).map_err(|e| e.to_string())?;
        Ok(dir)
    })
}

/// A verifier running as an HTTP receiver; killed when dropped.
pub struct Verifier {
    child: Child,
    pub url: String,
    /// `http://127.0.0.1:PORT`: it verifies a request to any path.
    pub origin: String,
}

impl Drop for Verifier {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start(mut command: Command) -> Verifier {
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("the verifier starts");
    let stdout = child.stdout.take().expect("piped stdout");
    let mut line = String::new();
    BufReader::new(stdout)
        .read_line(&mut line)
        .expect("the verifier prints its port");
    let port = line
        .split_whitespace()
        .nth(1)
        .expect("listening PORT")
        .to_string();
    let origin = format!("http://127.0.0.1:{port}");
    Verifier {
        child,
        url: format!("{origin}/verify"),
        origin,
    }
}

/// npm `http-signature` checking the draft-cavage `Signature` with `secret`.
pub fn http_signature(secret: &str) -> Verifier {
    let dir = install()
        .as_ref()
        .unwrap_or_else(|error| panic!("installing the verifiers failed: {error}"));
    let mut command = Command::new("node");
    command
        .arg(dir.join("node/receiver.js"))
        .arg(secret)
        .env("NODE_PATH", dir.join("node/node_modules"));
    start(command)
}

/// PyPI `standardwebhooks` checking the Standard Webhooks headers with `secret`.
pub fn standard_webhooks(secret: &str) -> Verifier {
    let dir = install()
        .as_ref()
        .unwrap_or_else(|error| panic!("installing the verifiers failed: {error}"));
    let mut command = Command::new(dir.join("venv/bin/python"));
    command.arg(dir.join("receiver.py")).arg(secret);
    start(command)
}

/// Python's `hmac` checking `x-svc-signature` with `secret`.
pub fn x_svc_signature(secret: &str) -> Verifier {
    let mut command = Command::new("python3");
    command.args(["-c", SVC_SIGNATURE_RECEIVER, secret]);
    start(command)
}

/// Sends `request`, as another receiver recorded it (method, path and query, headers, body), to
/// `verifier`; gives back the verifier's status and answer. Signatures cover the path and the
/// headers, so the copy verifies exactly when the original would have.
pub fn replay(verifier: &Verifier, request: &Received) -> (u16, String) {
    // One agent for every replay: its connections to the verifiers are kept and reused.
    static AGENT: OnceLock<ureq::Agent> = OnceLock::new();
    let agent = AGENT.get_or_init(|| {
        ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(10)))
            .build()
            .into()
    });
    let mut copy = ureq::http::Request::builder()
        .method(request.method.as_str())
        .uri(format!("{}{}", verifier.origin, request.target));
    for (name, value) in &request.headers {
        // The connection's own headers are the new connection's to set.
        let own = ["host", "content-length", "connection", "transfer-encoding"];
        if !own.iter().any(|n| name.eq_ignore_ascii_case(n)) {
            copy = copy.header(name, value);
        }
    }
    let mut answer = agent
        .run(copy.body(request.body.clone()).expect("a valid request"))
        .unwrap_or_else(|error| panic!("the verifier did not answer: {error}"));
    let status = answer.status().as_u16();
    (
        status,
        answer.body_mut().read_to_string().unwrap_or_default(),
    )
}
