//! Every registered protocol has golden traces: a file `NAME.SCENARIO.trace` under
//! `tests/golden/` for its registered name, so an engine change shows in a diff for each
//! protocol it touches, and a new protocol comes with its own.

use augur_protocols::registry::PROTOCOLS;

#[test]
fn every_registered_protocol_has_a_golden_trace() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden");
    let files: Vec<String> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()))
        .map(|entry| entry.expect("directory entry").file_name())
        .map(|name| name.to_string_lossy().into_owned())
        .collect();
    let missing: Vec<&str> = PROTOCOLS
        .iter()
        .map(|p| p.name)
        .filter(|name| {
            !files
                .iter()
                .any(|f| f.starts_with(&format!("{name}.")) && f.ends_with(".trace"))
        })
        .collect();
    assert!(
        missing.is_empty(),
        "no golden trace (tests/golden/NAME.SCENARIO.trace) for {}",
        missing.join(", ")
    );
}
