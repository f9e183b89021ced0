//! The verification code of docs/webhooks.md, in Python, JavaScript and Java, run exactly as the
//! guide prints it against a real delivery from the `mercer` binary: each accepts the genuine
//! delivery and refuses a changed body, another secret and an old timestamp.

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Duration;

use mercer_tests::receiver::{Received, Receiver};
use mercer_tests::{Backend, MercerServer, TestDatabase, backend_tests, wait_until};
use serde_json::json;

const SECRET: &str = "integration-secret-for-the-guide";

/// Runs `program`, which reads cases from its standard input (one per line, tab-separated:
/// secret, webhook-id, webhook-timestamp, webhook-signature, the body in hex) and prints
/// `valid` or `invalid` for each.
fn verdicts(mut command: Command, cases: &str) -> Vec<String> {
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|error| panic!("cannot run {command:?}: {error}"));
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(cases.as_bytes())
        .expect("cases written");
    let output = child.wait_with_output().expect("verifier ran");
    assert!(
        output.status.success(),
        "{command:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

/// The guide's one code block in `language`.
fn code_block(guide: &str, language: &str) -> String {
    let fence = format!("```{language}\n");
    let blocks: Vec<&str> = guide
        .split(&fence)
        .skip(1)
        .map(|rest| rest.split("```").next().unwrap_or_default())
        .collect();
    assert_eq!(blocks.len(), 1, "one {language} block in docs/webhooks.md");
    blocks[0].to_string()
}

/// Each language's block with a small driver that feeds it the cases.
fn programs(dir: &std::path::Path) -> Vec<(&'static str, Command)> {
    let guide_path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/webhooks.md");
    let guide = std::fs::read_to_string(guide_path).expect("docs/webhooks.md");

    let python = dir.join("verify.py");
    let driver = r#"
import sys
for line in sys.stdin:
    secret, msg_id, timestamp, signatures, body = line.rstrip("\n").split("\t")
    ok = verify_webhook(secret, msg_id, timestamp, signatures, bytes.fromhex(body))
    print("valid" if ok else "invalid")
"#;
    std::fs::write(&python, code_block(&guide, "python") + driver).expect("verify.py");
    let mut run_python = Command::new("python3");
    run_python.arg(&python);

    let node = dir.join("verify.js");
    let driver = r#"
const lines = require("node:fs").readFileSync(0, "utf8").split("\n").filter((line) => line);
for (const line of lines) {
  const [secret, msgId, timestamp, signatures, body] = line.split("\t");
  const ok = verifyWebhook(secret, msgId, timestamp, signatures, Buffer.from(body, "hex"));
  console.log(ok ? "valid" : "invalid");
}
"#;
    std::fs::write(&node, code_block(&guide, "javascript") + driver).expect("verify.js");
    let mut run_node = Command::new("node");
    run_node.arg(&node);

    // Java's single-file launcher runs the file's first class, so the driver goes between the
    // guide's imports and its class.
    let java = dir.join("Check.java");
    let driver = r#"
public class Check {
    public static void main(String[] args) throws Exception {
        var reader = new java.io.BufferedReader(
                new java.io.InputStreamReader(System.in, java.nio.charset.StandardCharsets.UTF_8));
        for (String line = reader.readLine(); line != null; line = reader.readLine()) {
            String[] field = line.split("\t", -1);
            byte[] body = java.util.HexFormat.of().parseHex(field[4]);
            boolean ok = WebhookVerifier.verify(field[0], field[1], field[2], field[3], body);
            System.out.println(ok ? "valid" : "invalid");
        }
    }
}

"#;
    let block = code_block(&guide, "java");
    let class_at = block.find("final class").expect("the guide's Java class");
    let source = format!("{}{driver}{}", &block[..class_at], &block[class_at..]);
    std::fs::write(&java, source).expect("Check.java");
    let mut run_java = Command::new("java");
    run_java.arg(&java);

    vec![
        ("Python", run_python),
        ("JavaScript", run_node),
        ("Java", run_java),
    ]
}

/// One real test delivery of a checkout webhook, as the receiver got it.
fn a_real_delivery(server: &MercerServer) -> Received {
    let demo = server.demo().clone();
    let configured = server
        .post(&format!("/checkout/shop/{}/integration/config", demo.shop))
        .bearer(&demo.token)
        .json(&json!({ "shared_secret": SECRET }));
    assert_eq!(configured.status, 200, "{}", configured.text);
    let receiver = Receiver::start();
    let created = server
        .post(&format!("/checkout/shop/{}/webhooks", demo.shop))
        .bearer(&demo.token)
        .json(&json!({ "webhook_topic_id": 1, "callback_url": receiver.url }));
    assert_eq!(created.status, 201, "{}", created.text);
    let id = created.json()["data"]["id"]
        .as_str()
        .expect("webhook id")
        .to_string();
    let sent = server
        .post(&format!("/checkout/shop/{}/webhooks/{id}/test", demo.shop))
        .bearer(&demo.token)
        .call();
    assert_eq!(sent.status, 202, "{}", sent.text);
    assert!(
        wait_until(Duration::from_secs(20), || !receiver.received().is_empty()),
        "the test delivery arrived"
    );
    receiver.received().remove(0)
}

fn case(secret: &str, id: &str, timestamp: &str, signatures: &str, body: &[u8]) -> String {
    let body: String = body.iter().map(|byte| format!("{byte:02x}")).collect();
    format!("{secret}\t{id}\t{timestamp}\t{signatures}\t{body}\n")
}

fn the_guides_verification_code_checks_real_deliveries(backend: Backend) {
    let server = MercerServer::start_with(
        TestDatabase::create(backend),
        &["--allow-private-targets", "--webhook-retry-schedule", "0s"],
    );
    let delivery = a_real_delivery(&server);
    let header = |name: &str| {
        delivery
            .header(name)
            .unwrap_or_else(|| panic!("the delivery has {name}"))
            .to_string()
    };
    let (id, timestamp, signature) = (
        header("webhook-id"),
        header("webhook-timestamp"),
        header("webhook-signature"),
    );
    let body = delivery.body.clone();
    let mut changed_body = body.clone();
    changed_body.push(b' ');
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after 1970")
        .as_secs();
    let old = i64::try_from(now).expect("a time") - 10 * 60;
    let old_signature = mercer_signing::standard_webhooks::sign(SECRET.as_bytes(), &id, old, &body);
    let old = old.to_string();
    let cases = [
        (
            "genuine",
            case(SECRET, &id, &timestamp, &signature, &body),
            "valid",
        ),
        (
            "one of several signatures",
            case(
                SECRET,
                &id,
                &timestamp,
                &format!("v1,bm90IGEgc2lnbmF0dXJl {signature}"),
                &body,
            ),
            "valid",
        ),
        (
            "changed body",
            case(SECRET, &id, &timestamp, &signature, &changed_body),
            "invalid",
        ),
        (
            "another secret",
            case("another-secret", &id, &timestamp, &signature, &body),
            "invalid",
        ),
        (
            "ten minutes old",
            case(SECRET, &id, &old, &old_signature, &body),
            "invalid",
        ),
    ];
    let input: String = cases.iter().map(|(_, line, _)| line.as_str()).collect();
    let expected: Vec<&str> = cases.iter().map(|(_, _, verdict)| *verdict).collect();

    let dir = tempfile::tempdir().expect("temporary directory");
    for (language, command) in programs(dir.path()) {
        let got = verdicts(command, &input);
        for ((name, _, want), got) in cases.iter().zip(&got) {
            assert_eq!(got, want, "{language}: {name}");
        }
        assert_eq!(got.len(), expected.len(), "{language}: {got:?}");
    }
}

backend_tests!(the_guides_verification_code_checks_real_deliveries);
