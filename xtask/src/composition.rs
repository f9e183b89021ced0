//! The server only composes (docs/ARCHITECTURE.md, "Invariants"): its route handlers
//! and operator commands parse, call a use case of the domain, and shape the answer. They never
//! call a repository method themselves, so every rule a route or a command relies on is a use
//! case that the domain's tests, an embedder and the other entry points share.

use std::collections::BTreeSet;
use std::fs;
use std::path::Path;

use serde_json::Value;

use crate::features::{package_src, production_part, rust_files};

/// Every repository method violation of the server's routes and commands, as a sentence.
pub fn check(metadata: &Value) -> Vec<String> {
    let (Some(domain), Some(server)) = (
        package_src(metadata, "mercer-domain"),
        package_src(metadata, "mercer-server"),
    ) else {
        return Vec::new();
    };
    let methods: BTreeSet<String> = rust_files(&domain)
        .iter()
        .flat_map(|file| repository_methods(&production_part(file)))
        .collect();
    let mut files = rust_files(&server.join("http/routes"));
    files.push(server.join("commands.rs"));
    let mut violations = Vec::new();
    for file in files.iter().filter(|file| file.exists()) {
        for (line, method) in method_calls(&production_part(file), &methods) {
            violations.push(format!(
                "{}:{line} calls the repository method `{method}` directly; call a domain use \
                 case (routes and commands only compose)",
                display(file)
            ));
        }
    }
    violations
}

fn display(file: &Path) -> String {
    fs::canonicalize(file)
        .unwrap_or_else(|_| file.to_path_buf())
        .display()
        .to_string()
}

/// The methods of every `…Repository` trait defined in `text`.
fn repository_methods(text: &str) -> BTreeSet<String> {
    let mut methods = BTreeSet::new();
    for (at, _) in text.match_indices("pub trait ") {
        let rest = &text[at + "pub trait ".len()..];
        let name: String = rest
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        if !name.ends_with("Repository") {
            continue;
        }
        let Some(open) = rest.find('{') else {
            continue;
        };
        let mut depth = 0;
        let mut end = rest.len();
        for (offset, c) in rest[open..].char_indices() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = open + offset;
                        break;
                    }
                }
                _ => {}
            }
        }
        let body = &rest[open..end];
        for (fn_at, _) in body.match_indices("fn ") {
            let method: String = body[fn_at + 3..]
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if !method.is_empty() {
                methods.insert(method);
            }
        }
    }
    methods
}

/// Where `text` calls one of `methods` as a method (`.name(`), by line; comments aside.
fn method_calls(text: &str, methods: &BTreeSet<String>) -> Vec<(usize, String)> {
    let mut calls = Vec::new();
    for (number, line) in text.lines().enumerate() {
        let code = line.split("//").next().unwrap_or_default();
        for (at, _) in code.match_indices('.') {
            let name: String = code[at + 1..]
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            let called = code[at + 1 + name.len()..].starts_with('(')
                || code[at + 1 + name.len()..].starts_with("::<");
            if called && methods.contains(&name) {
                calls.push((number + 1, name));
            }
        }
    }
    calls
}

#[cfg(test)]
mod tests {
    use super::*;

    const TRAITS: &str = "
        pub trait JobRepository {
            /// Claims jobs.
            fn claim_jobs(&mut self, kinds: &[&str]) -> StoreResult<Vec<Job>>;
            fn list_jobs(&mut self) -> StoreResult<Vec<Job>> { Ok(Vec::new()) }
        }
        pub trait Clock { fn now(&self) -> Timestamp; }
    ";

    #[test]
    fn finds_the_methods_of_repository_traits_only() {
        let methods = repository_methods(TRAITS);
        assert_eq!(
            methods.into_iter().collect::<Vec<_>>(),
            ["claim_jobs", "list_jobs"]
        );
    }

    #[test]
    fn a_route_calling_a_repository_method_is_named_by_line() {
        let methods = repository_methods(TRAITS);
        let route = "let jobs = store.read(|tx| list_jobs(tx, None))?;\n\
                     let raw = store.read(|tx| Ok(tx.list_jobs()?))?;\n\
                     // tx.claim_jobs(&[]) in a comment is not a call\n\
                     let now = clock.now();";
        assert_eq!(
            method_calls(route, &methods),
            [(2, "list_jobs".to_string())]
        );
    }
}
