//! The repository's documentation stands on its own: it cites no specification the repository
//! does not ship, and its links to other pages lead to pages that exist.

use std::path::{Path, PathBuf};

fn pages() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut pages = vec![root.join("README.md")];
    for entry in std::fs::read_dir(root.join("docs")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|ext| ext == "md") {
            pages.push(path);
        }
    }
    pages
}

#[test]
fn no_page_cites_a_specification_the_repository_does_not_ship() {
    let mut found = Vec::new();
    for page in pages() {
        found.extend(citations(&page));
    }
    assert!(found.is_empty(), "{}", found.join("\n"));
}

/// The lines of `path` that cite a specification the repository does not ship (its file, its
/// seeds, the contract) or a numbered section sign (the sign is written escaped here so that
/// this file does not cite one itself).
fn citations(path: &Path) -> Vec<String> {
    let section = '\u{a7}';
    let cited = [
        "CONTRACT.md".to_string(),
        "seed 00".to_string(),
        "Seed 00".to_string(),
        format!("contract {section}"),
        format!("Contract {section}"),
        "../shared".to_string(),
    ];
    let text = std::fs::read_to_string(path).unwrap();
    text.lines()
        .enumerate()
        .filter(|(_, line)| {
            cited
                .iter()
                .any(|citation| line.contains(citation.as_str()))
                || line.match_indices(section).any(|(at, _)| {
                    line[at + section.len_utf8()..]
                        .starts_with(|c: char| c.is_ascii_digit() || c == ' ')
                })
        })
        .map(|(number, line)| format!("{}:{}: {line}", path.display(), number + 1))
        .collect()
}

/// The files under `dir` (recursively) that people read as source: code, migrations, templates,
/// examples and service files; build output and installed packages left out.
fn source_files(dir: &Path, files: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name();
        if path.is_dir() {
            if !["target", "node_modules", ".git"].contains(&name.to_string_lossy().as_ref()) {
                source_files(&path, files);
            }
        } else if path.extension().is_some_and(|ext| {
            [
                "rs", "sql", "toml", "md", "html", "js", "ts", "service", "py", "sh",
            ]
            .contains(&ext.to_string_lossy().as_ref())
        }) {
            files.push(path);
        }
    }
}

#[test]
fn no_source_file_cites_a_specification_the_repository_does_not_ship() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut files = Vec::new();
    for dir in ["crates", "migrations", "contrib", "xtask", "tests", ".ci"] {
        source_files(&root.join(dir), &mut files);
    }
    assert!(
        files.len() > 100,
        "the source tree was not found: {files:?}"
    );
    // This file names the citations it looks for.
    files.retain(|file| !file.ends_with("tests/e2e/docs.rs"));
    let mut found = Vec::new();
    for file in files {
        found.extend(citations(&file));
    }
    assert!(found.is_empty(), "{}", found.join("\n"));
}

#[test]
fn the_published_openapi_document_cites_nothing_users_cannot_read() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let found = citations(&root.join("docs/openapi.json"));
    assert!(found.is_empty(), "{}", found.join("\n"));
}

#[test]
fn links_between_pages_lead_to_pages_that_exist() {
    let mut broken = Vec::new();
    for page in pages() {
        let text = std::fs::read_to_string(&page).unwrap();
        let dir = page.parent().unwrap();
        for (index, _) in text.match_indices("](") {
            let rest = &text[index + 2..];
            let Some(end) = rest.find(')') else { continue };
            let target = &rest[..end];
            if target.starts_with("http") || target.starts_with('#') || target.is_empty() {
                continue;
            }
            let file = target.split('#').next().unwrap_or_default();
            if !dir.join(file).exists() {
                broken.push(format!("{}: {target}", page.display()));
            }
        }
    }
    assert!(broken.is_empty(), "{}", broken.join("\n"));
}

/// The fenced block of `language` that follows `heading` in `page`, before the next heading of
/// any level: the `nth` of them.
fn fenced_block(page: &str, heading: &str, language: &str, nth: usize) -> String {
    let start = page.find(heading).unwrap_or_else(|| panic!("no {heading}"));
    let section = &page[start + heading.len()..];
    let section = &section[..section.find("\n#").unwrap_or(section.len())];
    let fence = format!("```{language}\n");
    let mut rest = section;
    for _ in 0..nth {
        let at = rest.find(&fence).expect("the block");
        rest = &rest[at + fence.len()..];
    }
    let at = rest
        .find(&fence)
        .unwrap_or_else(|| panic!("no {language} block under {heading}"));
    let body = &rest[at + fence.len()..];
    body[..body.find("\n```").expect("the block's end")].to_string()
}

/// `value` without what differs from run to run: times of the write.
fn without_times(value: &mut serde_json::Value) {
    match value {
        serde_json::Value::Object(object) => {
            for (key, field) in object.iter_mut() {
                if ["created_at", "updated_at", "status_changed_at"].contains(&key.as_str()) {
                    *field = serde_json::Value::Null;
                } else {
                    without_times(field);
                }
            }
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(without_times),
        _ => {}
    }
}

/// docs/subscriptions.md's complete Create Subscription example, run word for word by bash
/// against a new database: the answer is the one the page shows, but for the times of the
/// write and the shop's identifier.
fn the_complete_create_subscription_example_answers_what_the_page_shows(
    backend: mercer_tests::Backend,
) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let page = std::fs::read_to_string(root.join("docs/subscriptions.md")).unwrap();
    let heading = "### A complete example";
    let command = fenced_block(&page, heading, "sh", 0);
    let mut shown: serde_json::Value =
        serde_json::from_str(&fenced_block(&page, heading, "json", 0)).unwrap();
    let server = mercer_tests::MercerServer::in_process(backend);
    let demo = server.demo().clone();
    let output = std::process::Command::new("bash")
        .args(["-c", &format!("set -euo pipefail\n{command}")])
        .env("MERCER", server.url(""))
        .env("SHOP", &demo.shop)
        .env("TOKEN", &demo.token)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{text} {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let mut answer: serde_json::Value = serde_json::from_str(&text).unwrap();
    without_times(&mut answer);
    without_times(&mut shown);
    let shop = serde_json::Value::from(demo.shop.clone());
    for address in ["billing_address", "shipping_address"] {
        assert_eq!(answer["subscription"][address]["shop_identifier"], shop);
        shown["subscription"][address]["shop_identifier"] = shop.clone();
    }
    assert_eq!(answer, shown);
}

mercer_tests::backend_tests!(the_complete_create_subscription_example_answers_what_the_page_shows);
