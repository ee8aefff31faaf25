//! The `augur` command's library: everything the binary (`main.rs`, a command line and no
//! more) runs. `bench` and `node` instantiate every protocol's generic code; they live here, not
//! in the binary, because a release build does not share generic instantiations between
//! crates, and the binary would compile again what the library instantiates (`check` runs every
//! protocol in the simulator too). The unit-test build leaves those two modules out, so that it
//! does not compile the instantiations a second time; the integration tests run them.

// The two modules that instantiate every protocol's generic code.
#[cfg(not(test))]
pub mod bench;
#[cfg(not(test))]
pub mod node;

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
