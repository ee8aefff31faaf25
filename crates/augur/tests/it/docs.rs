//! The documentation keeps up with the registries: every registered protocol
//! (`augur_protocols::registry::PROTOCOLS`) and every workload (`augur_workloads::WORKLOADS`) is
//! mentioned, by its name in backticks, in the README and in the architecture guide
//! (docs/architecture/, its pages taken together).

use augur_protocols::registry::PROTOCOLS;
use std::path::Path;

/// The documents every protocol and workload must appear in, relative to the repository root. A
/// directory stands for every Markdown file in it, read as one document.
const DOCS: &[&str] = &["README.md", "docs/architecture"];

/// The text of `doc` (a file, or a directory whose `.md` files are concatenated in name order).
fn text_of(doc: &str) -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let path = root.join(doc);
    let read = |path: &Path| {
        std::fs::read_to_string(path)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
    };
    if !path.is_dir() {
        return read(&path);
    }
    let mut pages: Vec<_> = std::fs::read_dir(&path)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", path.display()))
        .map(|entry| entry.expect("directory entry").path())
        .filter(|p| p.extension().is_some_and(|ext| ext == "md"))
        .collect();
    assert!(!pages.is_empty(), "{} holds no .md file", path.display());
    pages.sort();
    pages.iter().map(|p| read(p)).collect::<Vec<_>>().join("\n")
}

/// What `doc` (a path relative to the repository root) does not mention of `names`, each
/// written as `` `name` `` (so `str` is not found inside "strict", nor `bank` inside `smallbank`).
fn unmentioned<'a>(doc: &str, names: impl IntoIterator<Item = &'a str>) -> Vec<&'a str> {
    let text = text_of(doc);
    names
        .into_iter()
        .filter(|name| !text.contains(&format!("`{name}`")))
        .collect()
}

#[test]
fn every_protocol_and_workload_is_documented() {
    let mut missing = Vec::new();
    for doc in DOCS {
        let protocols = unmentioned(doc, PROTOCOLS.iter().map(|p| p.name));
        if !protocols.is_empty() {
            missing.push(format!(
                "{doc} does not mention the protocol(s) {}",
                protocols.join(", ")
            ));
        }
        let workloads = unmentioned(doc, augur_workloads::WORKLOADS.iter().copied());
        if !workloads.is_empty() {
            missing.push(format!(
                "{doc} does not mention the workload(s) {}",
                workloads.join(", ")
            ));
        }
    }
    assert!(
        missing.is_empty(),
        "{}; describe each (name in backticks) in a sentence there",
        missing.join("; ")
    );
}

#[test]
fn a_missing_name_is_named() {
    assert_eq!(
        unmentioned("README.md", ["clocksi-rep", "no-such-protocol"]),
        ["no-such-protocol"]
    );
    assert_eq!(
        unmentioned("docs/architecture", ["clocksi-rep", "no-such-protocol"]),
        ["no-such-protocol"]
    );
}
