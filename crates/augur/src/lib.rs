//! The library half of the `augur` command: everything but what runs protocol nodes (the
//! binary's `bench` runtimes and `node`), which instantiate every protocol's generic code. What
//! is here has its unit tests; the binary has none (`[[bin]] test = false`), so that a test
//! build does not compile those instantiations a second time.

pub mod bench_options;
pub mod check;
pub mod client_cli;
pub mod cluster;
pub mod experiment;
pub mod faults;
pub mod interrupt;
pub mod metrics_http;
pub mod nemesis;
pub mod peers;
pub mod provision;
pub mod report;
pub mod report_html;
pub mod serial_replay;
pub mod shell;

/// What augur's nodes run one-shot transactions with: every workload's procedures.
pub fn procedures() -> augur_contract::forms::Procedures {
    augur_contract::forms::Procedures::new(std::sync::Arc::new(augur_workloads::Catalog))
}

/// `path` with `-suffix` inserted before its extension (`h.jsonl` → `h-seed3.jsonl`): where one
/// `--history FILE` names the files of several seeds or protocols.
pub fn path_with_suffix(path: &std::path::Path, suffix: &str) -> std::path::PathBuf {
    let stem = path.file_stem().unwrap_or_default().to_string_lossy();
    let name = match path.extension() {
        Some(ext) => format!("{stem}-{suffix}.{}", ext.to_string_lossy()),
        None => format!("{stem}-{suffix}"),
    };
    path.with_file_name(name)
}

/// Errors that exit with status 2: the user asked for something that does not exist.
#[derive(Debug)]
pub struct BadInput(pub String);

impl std::fmt::Display for BadInput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for BadInput {}
