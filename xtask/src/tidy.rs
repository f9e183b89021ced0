//! The architecture invariants of docs/ARCHITECTURE.md, checked on the dependency graph that
//! `cargo metadata` reports (normal and build dependencies; dev-dependencies are for tests), and
//! which feature may import which ([`crate::features`]).

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::process::Command;

use serde_json::Value;

/// Crates that do I/O: the domain must not reach any of them, even indirectly.
const IO_CRATES: &[&str] = &[
    "diesel",
    "diesel_migrations",
    "r2d2",
    "libsqlite3-sys",
    "rusqlite",
    "pq-sys",
    "actix-web",
    "actix-http",
    "actix-server",
    "actix-rt",
    "tokio",
    "ureq",
];

/// Heavy I/O crates and the only workspace members allowed to depend on them directly.
const ALLOWED_DIRECT: &[(&str, &[&str])] = &[
    // The simulator and the Vendure connector are servers too, and xtask's benchmark runs a
    // bare actix handler as the floor it compares Mercer with; the rule keeps HTTP frameworks
    // out of the library layers.
    (
        "actix-web",
        &[
            "mercer-server",
            "mercer-platform-sim",
            "mercer-vendure",
            "xtask",
        ],
    ),
    ("diesel", &["mercer-store"]),
    ("diesel_migrations", &["mercer-store"]),
    ("rusqlite", &["mercer-store"]),
    // The server's one ureq client is the trace exporter's, posting to the operator's own
    // collector (as the database, no outbound guard applies); every call to a destination a
    // client registered goes through mercer-outbound's guarded agent.
    (
        "ureq",
        &[
            "mercer-server",
            "mercer-outbound",
            "mercer-connector",
            "mercer-webhooks",
            "mercer-platform-sim",
            "mercer-vendure",
            "mercer-tests",
            "xtask",
        ],
    ),
];

/// Layers: a crate may depend only on the workspace crates listed for it.
const ALLOWED_WORKSPACE_DEPS: &[(&str, &[&str])] = &[
    ("mercer-domain", &[]),
    ("mercer-signing", &[]),
    ("mercer-store", &["mercer-domain"]),
    ("mercer-outbound", &["mercer-domain"]),
    (
        "mercer-connector",
        &["mercer-domain", "mercer-signing", "mercer-outbound"],
    ),
    (
        "mercer-webhooks",
        &["mercer-domain", "mercer-signing", "mercer-outbound"],
    ),
    ("mercer-jobs", &["mercer-domain"]),
    (
        "mercer-platform-sim",
        &["mercer-domain", "mercer-signing", "mercer-connector"],
    ),
    (
        "mercer-vendure",
        &[
            "mercer-domain",
            "mercer-signing",
            "mercer-connector",
            "mercer-outbound",
        ],
    ),
];

pub fn run(args: &[String]) -> Result<(), String> {
    let mut command = Command::new(crate::cargo());
    command.args(["metadata", "--format-version", "1"]);
    match args {
        [] => {
            command.current_dir(crate::workspace_root());
        }
        [flag, path] if flag == "--manifest-path" => {
            command.args(["--manifest-path", path]);
        }
        _ => return Err("usage: cargo xtask tidy [--manifest-path PATH]".to_string()),
    }
    let output = command
        .output()
        .map_err(|error| format!("cannot run cargo metadata: {error}"))?;
    if !output.status.success() {
        return Err(format!(
            "cargo metadata failed: {}",
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    let metadata: Value = serde_json::from_slice(&output.stdout)
        .map_err(|error| format!("cargo metadata printed no JSON: {error}"))?;
    let violations = check(&metadata);
    if violations.is_empty() {
        eprintln!("xtask tidy: layering invariants hold");
        Ok(())
    } else {
        for violation in &violations {
            eprintln!("  - {violation}");
        }
        Err(format!("{} layering violation(s)", violations.len()))
    }
}

/// The dependency graph: package id → (name, ids of its normal and build dependencies).
struct Graph {
    names: HashMap<String, String>,
    edges: HashMap<String, Vec<String>>,
    members: Vec<String>,
}

fn is_runtime_dependency(dep: &Value) -> bool {
    dep["dep_kinds"].as_array().is_some_and(|kinds| {
        kinds
            .iter()
            .any(|k| k["kind"].is_null() || k["kind"] == "build")
    })
}

fn graph(metadata: &Value) -> Graph {
    let names = metadata["packages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| {
            Some((
                p["id"].as_str()?.to_string(),
                p["name"].as_str()?.to_string(),
            ))
        })
        .collect();
    let edges = metadata["resolve"]["nodes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|node| {
            let deps = node["deps"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|dep| is_runtime_dependency(dep))
                .filter_map(|dep| dep["pkg"].as_str().map(str::to_string))
                .collect();
            Some((node["id"].as_str()?.to_string(), deps))
        })
        .collect();
    let members = metadata["workspace_members"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| m.as_str().map(str::to_string))
        .collect();
    Graph {
        names,
        edges,
        members,
    }
}

impl Graph {
    fn name<'a>(&'a self, id: &'a str) -> &'a str {
        self.names.get(id).map_or(id, String::as_str)
    }

    fn member(&self, name: &str) -> Option<&String> {
        self.members.iter().find(|id| self.name(id) == name)
    }

    fn direct(&self, id: &str) -> impl Iterator<Item = &str> {
        self.edges.get(id).into_iter().flatten().map(String::as_str)
    }

    /// Every crate `id` depends on, with the path by which it first reaches it.
    fn reachable(&self, id: &str) -> HashMap<String, Vec<String>> {
        let mut paths: HashMap<String, Vec<String>> = HashMap::new();
        let mut queue = VecDeque::from([(id.to_string(), vec![self.name(id).to_string()])]);
        while let Some((current, path)) = queue.pop_front() {
            for dep in self.direct(&current) {
                if !paths.contains_key(dep) {
                    let mut next = path.clone();
                    next.push(self.name(dep).to_string());
                    paths.insert(dep.to_string(), next.clone());
                    queue.push_back((dep.to_string(), next));
                }
            }
        }
        paths
    }
}

/// Every violation of the invariants, as a sentence.
pub fn check(metadata: &Value) -> Vec<String> {
    let graph = graph(metadata);
    let mut violations = BTreeSet::new();

    if let Some(domain) = graph.member("mercer-domain") {
        for (dep, path) in graph.reachable(domain) {
            if IO_CRATES.contains(&graph.name(&dep)) {
                violations.insert(format!(
                    "mercer-domain must do no I/O, but depends on {} ({})",
                    graph.name(&dep),
                    path.join(" -> ")
                ));
            }
        }
    }

    for member in &graph.members {
        let member_name = graph.name(member);
        for dep in graph.direct(member) {
            let dep_name = graph.name(dep);
            if let Some((_, allowed)) = ALLOWED_DIRECT.iter().find(|(name, _)| *name == dep_name)
                && !allowed.contains(&member_name)
            {
                violations.insert(format!(
                    "{member_name} depends on {dep_name}, which only {} may use",
                    allowed.join(", ")
                ));
            }
            let dep_is_ours =
                dep_name.starts_with("mercer-") && graph.members.iter().any(|m| m == dep);
            if dep_is_ours
                && let Some((_, allowed)) = ALLOWED_WORKSPACE_DEPS
                    .iter()
                    .find(|(name, _)| *name == member_name)
                && !allowed.contains(&dep_name)
            {
                violations.insert(format!(
                    "{member_name} may depend on {} among Mercer's crates, not on {dep_name}",
                    if allowed.is_empty() {
                        "none".to_string()
                    } else {
                        allowed.join(", ")
                    }
                ));
            }
        }
    }
    violations.extend(crate::features::check(metadata));
    violations.extend(crate::composition::check(metadata));
    violations.into_iter().collect()
}
