//! The documentation keeps up with the registries: the protocol table in the README and in the
//! architecture guide is the one `augur protocols --markdown` prints
//! (`augur_protocols::registry::markdown_table`), and every registered protocol
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

/// The pages that carry the protocol table between [`TABLE_BEGIN`] and [`TABLE_END`].
const TABLE_PAGES: &[&str] = &["README.md", "docs/architecture/README.md"];
const TABLE_BEGIN: &str = "<!-- BEGIN augur protocols --markdown -->";
const TABLE_END: &str = "<!-- END augur protocols --markdown -->";

/// What `page` holds between the table's markers, or why it cannot be found.
fn table_in(page: &str) -> Result<String, String> {
    let text = text_of(page);
    let start = text
        .find(TABLE_BEGIN)
        .ok_or_else(|| format!("{page} has no line {TABLE_BEGIN}"))?;
    let rest = &text[start + TABLE_BEGIN.len()..];
    let end = rest
        .find(TABLE_END)
        .ok_or_else(|| format!("{page} has no line {TABLE_END} after {TABLE_BEGIN}"))?;
    Ok(rest[..end].trim_start_matches('\n').to_string())
}

#[test]
fn the_protocol_tables_are_the_registrys() {
    let table = augur_protocols::registry::markdown_table();
    let stale: Vec<String> = TABLE_PAGES
        .iter()
        .filter_map(|page| match table_in(page) {
            Ok(found) if found == table => None,
            Ok(_) => Some(format!(
                "{page}'s protocol table differs from the registry's"
            )),
            Err(why) => Some(why),
        })
        .collect();
    assert!(
        stale.is_empty(),
        "{}; paste the output of `augur protocols --markdown` between the markers:\n{table}",
        stale.join("; ")
    );
}

/// The README's sentence on what is not built yet names no registered protocol, so it cannot
/// outlive a protocol being built.
#[test]
fn the_readme_names_no_registered_protocol_as_not_built() {
    let text = text_of("README.md");
    let start = text
        .find("Not yet built:")
        .expect("README.md says what is not yet built, starting with 'Not yet built:'");
    let sentence = &text[start..start + text[start..].find(". ").unwrap_or(0)];
    let built: Vec<&str> = sentence
        .split('`')
        .skip(1)
        .step_by(2)
        .filter(|name| augur_protocols::registry::info(name).is_ok())
        .collect();
    assert!(
        built.is_empty(),
        "README.md's 'Not yet built:' sentence names registered protocols: {built:?}"
    );
}

/// The availability page's "Built for:" sentence names exactly the protocols whose masters fail
/// over (those that take the `failover` setting).
#[test]
fn the_availability_page_names_the_protocols_that_fail_over() {
    let text = text_of("docs/architecture/availability.md");
    let start = text
        .find("Built for:")
        .expect("availability.md says which protocols fail over, starting with 'Built for:'");
    let sentence = &text[start..start + text[start..].find(". ").unwrap_or(0)];
    let named: Vec<&str> = sentence
        .split('`')
        .skip(1)
        .step_by(2)
        .filter(|name| augur_protocols::registry::info(name).is_ok())
        .collect();
    let failing_over: Vec<&str> = augur_protocols::registry::PROTOCOLS
        .iter()
        .filter(|p| p.fails_over())
        .map(|p| p.name)
        .collect();
    assert_eq!(
        named, failing_over,
        "availability.md's 'Built for:' sentence"
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

/// The augur crates `crate_dir`'s manifest lists among its normal dependencies.
fn augur_dependencies(root: &Path, crate_dir: &str) -> std::collections::BTreeSet<String> {
    let manifest = root.join("crates").join(crate_dir).join("Cargo.toml");
    let text = std::fs::read_to_string(&manifest)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", manifest.display()));
    let mut in_dependencies = false;
    let mut found = std::collections::BTreeSet::new();
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            in_dependencies = line == "[dependencies]";
        } else if in_dependencies && line.starts_with("augur-") {
            let name = line.split(['.', ' ', '=']).next().expect("a name");
            found.insert(name.to_string());
        }
    }
    found
}

#[test]
fn the_crate_map_is_the_manifests() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let guide = text_of("docs/architecture/README.md");
    let readme = text_of("README.md");
    let mut crates: Vec<String> = std::fs::read_dir(root.join("crates"))
        .expect("crates/")
        .map(|entry| {
            entry
                .expect("entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    crates.sort();
    let mut drawn = std::collections::BTreeMap::new();
    for line in guide.lines() {
        let Some((name, uses)) = line.split_once('→') else {
            if let Some(name) = line.strip_suffix("(no augur dependencies)") {
                drawn.insert(name.trim().to_string(), Default::default());
            }
            continue;
        };
        let name = name.trim();
        if !crates.iter().any(|c| c == name) {
            continue;
        }
        let uses: std::collections::BTreeSet<String> = if uses.trim() == "all of the above" {
            drawn.keys().cloned().collect()
        } else {
            uses.split(',').map(|u| u.trim().to_string()).collect()
        };
        drawn.insert(name.to_string(), uses);
    }
    for name in &crates {
        let listed = drawn
            .get(name)
            .unwrap_or_else(|| panic!("crate {name} is not in the architecture guide's map"));
        assert_eq!(
            listed,
            &augur_dependencies(&root, name),
            "the architecture guide's map of {name} differs from crates/{name}/Cargo.toml"
        );
        assert!(
            readme.contains(&format!("crates/{name} ")),
            "README.md's layout does not list crates/{name}"
        );
    }
}
