//! `augur bench`: run one or more protocols, one after another, on identical clusters with
//! closed-loop clients, and report each protocol's throughput, aborts and latency along with
//! its throughput ratio to the first protocol named.
//!
//! What does not run nodes lives in the library: the options and their validated form
//! (`crate::bench_options`, here as [`config`]), PostgreSQL described like a protocol
//! (`crate::peers`), the reports (`crate::report`) and experiment files (`crate::experiment`).
//! The files here read bottom-up: [`run`], one protocol's run whatever runs its cluster; one
//! file per runtime (`inproc`, `tcp`, `pg`, `sim`); and [`run_config`] here, which runs every
//! entry on its runtime and writes the reports.

mod inproc;
pub mod pg;
pub mod run;
mod sim;
pub(crate) mod tcp;

pub use crate::bench_options as config;
pub use crate::{interrupt, peers};
pub use config::{BenchArgs, BenchConfig, Runtime};

use crate::BadInput;
use crate::report;
use augur_protocols::registry;

fn bad(msg: impl Into<String>) -> anyhow::Error {
    BadInput(msg.into()).into()
}

/// Run every protocol of a validated configuration and write its reports.
pub fn run_config(config: &BenchConfig) -> anyhow::Result<report::Finished> {
    std::fs::create_dir_all(&config.out)
        .map_err(|e| anyhow::anyhow!("cannot create {}: {e}", config.out.display()))?;
    let mut results = Vec::new();
    for spec in &config.protocols {
        if interrupt::requested() {
            break;
        }
        let result = match run_one(config, spec) {
            Err(e) if e.downcast_ref::<run::Interrupted>().is_some() => break,
            result => result?,
        };
        results.push(result);
    }
    if interrupt::requested() {
        eprintln!(
            "interrupted: writing the results of {} of {} protocols (the last one's window cut short)",
            results.len(),
            config.protocols.len()
        );
        if results.is_empty() {
            anyhow::bail!("interrupted before any protocol was measured: nothing to report");
        }
    }
    report::finish(config, results)
}

/// Run one protocol entry on its runtime.
fn run_one(
    config: &BenchConfig,
    spec: &config::ProtocolSpec,
) -> anyhow::Result<report::ProtocolResult> {
    Ok(
        match (peers::peer(&spec.name), spec.runtime(config.runtime)) {
            (Some(_), Runtime::Sim) => {
                return Err(bad(format!(
                    "{} is PostgreSQL itself: it cannot run in the simulator",
                    spec.name
                )));
            }
            (Some(peer), _) => pg::run(config, spec, peer)?,
            (None, Runtime::Inproc) => {
                registry::visit(&spec.name, inproc::RunInProcess { config, spec })??
            }
            (None, Runtime::Tcp) => tcp::run(config, spec)??,
            (None, Runtime::Sim) => sim::run(config, spec)??,
            (None, Runtime::Cluster) => {
                let path = config
                    .cluster
                    .as_deref()
                    .expect("a cluster run names its file");
                tcp::run_on_cluster(config, spec, path)??
            }
        },
    )
}
