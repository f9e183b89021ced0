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
