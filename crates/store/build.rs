// The migrations are embedded at compile time: rebuild when they change. Their fingerprint
// (FNV-1a over every file's path and bytes) names the test suite's template databases, so a
// template made from other migrations is never used.
use std::path::{Path, PathBuf};

fn files(dir: &Path, found: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            files(&path, found);
        } else {
            found.push(path);
        }
    }
}

fn main() {
    println!("cargo:rerun-if-changed=../../migrations");
    let root = Path::new("../../migrations");
    let mut found = Vec::new();
    files(root, &mut found);
    found.sort();
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for path in found {
        let relative = path.strip_prefix(root).unwrap_or(&path);
        let bytes = std::fs::read(&path).unwrap_or_default();
        for byte in relative.to_string_lossy().bytes().chain(bytes) {
            hash = (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    println!("cargo:rustc-env=MERCER_MIGRATIONS_FINGERPRINT={hash:016x}");
}
