//! Which feature may import which (docs/ARCHITECTURE.md, "Features"), read from the source: the
//! domain's feature folders (`crates/domain/src/<feature>/`), the store's
//! (`crates/store/src/repos/<feature>/`) and the routes' (`crates/server/src/http/routes/<feature>/`).
//!
//! Every feature may use `kernel` and `access`; the kernel uses no feature; other edges must be
//! listed in [`ALLOWED_EDGES`]. A domain feature never imports `ports` or `testing` (they combine
//! every feature). Test modules (`#[cfg(test)]` and what follows it) are not checked: tests may
//! use the whole domain. An import cycle between features fails even when each edge is allowed.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

use serde_json::Value;

/// Features every other feature may use.
const SHARED: &[&str] = &["kernel", "access"];

/// Edges between features beyond `kernel` and `access`, each named in docs/ARCHITECTURE.md.
pub const ALLOWED_EDGES: &[(&str, &[&str])] = &[
    // The directory lists the customers the platform sent: its rows are the platform's.
    ("directory", &["platform"]),
    // Subscription webhooks are webhook endpoints (kind `subscription`): registered through the
    // webhooks feature's repository and delivered by its dispatcher. A subscription customer is
    // the directory's customer (one record per shop), whose changes go to the platform's
    // connector through its outbox.
    ("subscriptions", &["webhooks", "directory", "platform"]),
    // The headless checkout prices variants from the platform's catalogue and pushes its orders
    // through the platform's connector, hands its functions to the overrides, fires checkout
    // webhooks, and makes a subscription of a line item that carries a plan.
    (
        "checkout",
        &[
            "platform",
            "overrides",
            "webhooks",
            "subscriptions",
            "directory",
        ],
    ),
    // A box is sold under a subscription group, and offers variants of the platform's
    // catalogue.
    ("box_builder", &["subscriptions", "platform"]),
    // The subscriber portal shows and acts on the customer's subscriptions and boxes through
    // their use cases, finds its visitor among the directory's customers by platform id, and
    // names the box products offered from the platform's catalogue.
    (
        "portal",
        &["subscriptions", "box_builder", "directory", "platform"],
    ),
];

/// Domain modules that combine every feature: no feature may import them.
const COMBINING: &[&str] = &["ports", "operations", "testing"];

/// Route and repository folders that are not features (operators' routes read every feature).
const NOT_FEATURES: &[&str] = &["operations"];

/// Every violation of the feature rules in the workspace `cargo metadata` describes.
pub fn check(metadata: &Value) -> Vec<String> {
    let Some(domain_src) = package_src(metadata, "mercer-domain") else {
        return Vec::new();
    };
    let features = feature_folders(&domain_src);
    let mut violations = documented_edges_differ(metadata, &features);
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();

    for feature in &features {
        for file in rust_files(&domain_src.join(feature)) {
            for module in imports(&production_part(&file), "crate::") {
                if COMBINING.contains(&module.as_str()) {
                    violations.push(format!(
                        "domain feature `{feature}` imports `crate::{module}` ({}); a feature runs \
                         its work through its own database trait",
                        file.display()
                    ));
                } else if features.contains(&module) && &module != feature {
                    edges
                        .entry(feature.clone())
                        .or_default()
                        .insert(module.clone());
                    if let Some(reason) = forbidden(feature, &module) {
                        violations.push(format!(
                            "domain feature `{feature}` imports `{module}` ({}): {reason}",
                            file.display()
                        ));
                    }
                }
            }
        }
    }

    let adapters = [
        (package_src(metadata, "mercer-store"), "repos"),
        (package_src(metadata, "mercer-server"), "http/routes"),
    ];
    for (src, folder) in adapters {
        let Some(root) = src.map(|src| src.join(folder)) else {
            continue;
        };
        for feature in feature_folders(&root) {
            if NOT_FEATURES.contains(&feature.as_str()) {
                continue;
            }
            if !features.contains(&feature) {
                violations.push(format!(
                    "{}/{feature} is not named after a domain feature",
                    root.display()
                ));
                continue;
            }
            for file in rust_files(&root.join(&feature)) {
                for module in imports(&production_part(&file), "mercer_domain::") {
                    if features.contains(&module)
                        && module != feature
                        && let Some(reason) = forbidden(&feature, &module)
                    {
                        violations.push(format!(
                            "`{feature}` code in {} imports the domain's `{module}`: {reason}",
                            file.display()
                        ));
                    }
                }
            }
        }
    }

    if let Some(cycle) = find_cycle(&edges) {
        violations.push(format!(
            "import cycle between domain features: {}",
            cycle.join(" -> ")
        ));
    }
    violations
}

/// Why `from` may not import `to`, or `None` when it may.
fn forbidden(from: &str, to: &str) -> Option<String> {
    if from == "kernel" {
        return Some("the kernel uses no feature".to_string());
    }
    let allowed = ALLOWED_EDGES
        .iter()
        .find(|(feature, _)| *feature == from)
        .map_or(&[][..], |(_, to)| *to);
    if SHARED.contains(&to) || allowed.contains(&to) {
        None
    } else {
        Some(format!(
            "a feature may use {} and the edges docs/ARCHITECTURE.md names",
            SHARED.join(" and ")
        ))
    }
}

/// The `src` folder of a workspace package.
/// Where docs/ARCHITECTURE.md's table of edges between features (rows `| \`from\` | \`to\` |
/// why |`) and [`ALLOWED_EDGES`] disagree: each must name every edge the other does, between the
/// features the workspace has.
fn documented_edges_differ(metadata: &Value, features: &BTreeSet<String>) -> Vec<String> {
    let Some(root) = metadata["workspace_root"].as_str() else {
        return Vec::new();
    };
    // A workspace without the document (the tests' small ones) has no table to compare.
    let Ok(text) = fs::read_to_string(Path::new(root).join("docs/ARCHITECTURE.md")) else {
        return Vec::new();
    };
    let cell = |cell: &str| {
        cell.trim()
            .strip_prefix('`')?
            .strip_suffix('`')
            .map(str::to_string)
    };
    let documented: BTreeSet<(String, String)> = text
        .lines()
        .filter_map(|line| {
            let mut cells = line.strip_prefix('|')?.split('|');
            let (from, to) = (cell(cells.next()?)?, cell(cells.next()?)?);
            (features.contains(&from) && features.contains(&to)).then_some((from, to))
        })
        .collect();
    // The edges between the features this workspace has.
    let allowed: BTreeSet<(String, String)> = ALLOWED_EDGES
        .iter()
        .flat_map(|(from, tos)| tos.iter().map(|to| (from.to_string(), to.to_string())))
        .filter(|(from, to)| features.contains(from) && features.contains(to))
        .collect();
    let mut differences: Vec<String> = allowed
        .difference(&documented)
        .map(|(from, to)| {
            format!("docs/ARCHITECTURE.md's table of feature edges lacks `{from}` → `{to}`, which tidy allows")
        })
        .collect();
    differences.extend(documented.difference(&allowed).map(|(from, to)| {
        format!("docs/ARCHITECTURE.md names the feature edge `{from}` → `{to}`, which tidy does not allow")
    }));
    differences
}

pub(crate) fn package_src(metadata: &Value, name: &str) -> Option<PathBuf> {
    metadata["packages"]
        .as_array()?
        .iter()
        .find(|package| package["name"] == name)
        .and_then(|package| package["manifest_path"].as_str())
        .and_then(|manifest| Path::new(manifest).parent())
        .map(|dir| dir.join("src"))
}

/// The subfolders of `dir` (features), without the in-memory database's.
fn feature_folders(dir: &Path) -> BTreeSet<String> {
    let Ok(entries) = fs::read_dir(dir) else {
        return BTreeSet::new();
    };
    entries
        .filter_map(Result::ok)
        .filter(|entry| entry.path().is_dir())
        .filter_map(|entry| entry.file_name().into_string().ok())
        .filter(|name| !COMBINING.contains(&name.as_str()))
        .collect()
}

pub(crate) fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let Ok(entries) = fs::read_dir(dir) else {
        return files;
    };
    for entry in entries.filter_map(Result::ok) {
        let path = entry.path();
        if path.is_dir() {
            files.extend(rust_files(&path));
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            files.push(path);
        }
    }
    files.sort();
    files
}

/// A file's text up to its test module.
pub(crate) fn production_part(file: &Path) -> String {
    production_text(&fs::read_to_string(file).unwrap_or_default()).to_string()
}

/// The text before the test module; nothing of a file that is a test module itself
/// (`#![cfg(test)]`, the tests of a module kept in a file of their own).
fn production_text(text: &str) -> &str {
    if text.contains("#![cfg(test)]") {
        return "";
    }
    match text.find("#[cfg(test)]") {
        Some(at) => &text[..at],
        None => text,
    }
}

/// The first path segment after each `prefix` (`crate::platform::…` gives `platform`), the
/// segments of a group included (`mercer_domain::{access::Shop, kernel::time}`).
fn imports(text: &str, prefix: &str) -> BTreeSet<String> {
    let mut modules = BTreeSet::new();
    for (at, _) in text.match_indices(prefix) {
        if text[..at].ends_with(|c: char| c.is_alphanumeric() || c == '_' || c == '$') {
            continue; // `$crate::`, `my_crate::`
        }
        let rest = &text[at + prefix.len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let mut depth = 0;
            let mut segment_start = true;
            for (index, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => segment_start = true,
                    c if segment_start && !c.is_whitespace() => {
                        segment_start = false;
                        modules.insert(leading_ident(&group[index..]));
                    }
                    _ => {}
                }
            }
        } else {
            modules.insert(leading_ident(rest));
        }
    }
    modules.retain(|module| module.starts_with(|c: char| c.is_ascii_lowercase()));
    modules
}

fn leading_ident(text: &str) -> String {
    text.chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect()
}

/// A cycle in the feature graph, as the features along it (the first repeated at the end).
fn find_cycle(edges: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        edges: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(start) = path.iter().position(|seen| seen == node) {
            let mut cycle = path[start..].to_vec();
            cycle.push(node.to_string());
            return Some(cycle);
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_string());
        for next in edges.get(node).into_iter().flatten() {
            if let Some(cycle) = visit(next, edges, path, done) {
                return Some(cycle);
            }
        }
        path.pop();
        done.insert(node.to_string());
        None
    }
    let mut done = BTreeSet::new();
    edges
        .keys()
        .find_map(|start| visit(start, edges, &mut Vec::new(), &mut done))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_modules_are_left_out_whether_inline_or_in_a_file() {
        let inline = "use crate::kernel::x;\n#[cfg(test)]\nmod tests { use crate::ports::y; }";
        assert_eq!(production_text(inline), "use crate::kernel::x;\n");
        assert_eq!(production_text("#![cfg(test)]\nuse crate::testing::z;"), "");
        assert_eq!(
            production_text("use crate::kernel::x;"),
            "use crate::kernel::x;"
        );
    }

    #[test]
    fn imports_are_read_from_paths_and_groups() {
        let text = "use crate::platform::events::X;\nuse mercer_domain::{access::Shop, kernel::{time, error}};\n$crate::DomainError; crate::Timestamp";
        assert_eq!(
            imports(text, "crate::"),
            BTreeSet::from(["platform".to_string()])
        );
        assert_eq!(
            imports(text, "mercer_domain::"),
            BTreeSet::from(["access".to_string(), "kernel".to_string()])
        );
    }

    #[test]
    fn a_cycle_is_found_and_a_chain_is_not() {
        let chain = BTreeMap::from([
            ("a".to_string(), BTreeSet::from(["b".to_string()])),
            ("b".to_string(), BTreeSet::from(["c".to_string()])),
        ]);
        assert_eq!(find_cycle(&chain), None);
        let mut cyclic = chain.clone();
        cyclic.insert("c".to_string(), BTreeSet::from(["a".to_string()]));
        assert_eq!(
            find_cycle(&cyclic),
            Some(
                vec!["a", "b", "c", "a"]
                    .into_iter()
                    .map(String::from)
                    .collect()
            )
        );
    }

    #[test]
    fn kernel_and_access_are_shared_and_the_kernel_uses_nothing() {
        assert_eq!(forbidden("platform", "access"), None);
        assert_eq!(forbidden("webhooks", "kernel"), None);
        assert!(forbidden("platform", "webhooks").is_some());
        assert!(forbidden("kernel", "access").is_some());
    }
}
