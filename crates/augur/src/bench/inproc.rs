//! `augur bench --runtime inproc` (the default): every node a task of this process
//! ([`LocalCluster`]), messages delayed by the latency matrix.

use super::run::drive;
use crate::bench_options::{BenchConfig, ProtocolSpec, log_config};
use crate::report::ProtocolResult;
use augur_contract::Protocol;
use augur_protocols::registry::{ProtocolInfo, ProtocolVisitor};
use augur_runtime::local::LocalCluster;
use std::sync::Arc;
use std::time::Duration;

/// Runs one protocol on an in-process cluster.
pub(super) struct RunInProcess<'a> {
    pub config: &'a BenchConfig,
    pub spec: &'a ProtocolSpec,
}

impl ProtocolVisitor for RunInProcess<'_> {
    type Output = anyhow::Result<ProtocolResult>;

    fn visit<P: Protocol>(self, info: &'static ProtocolInfo) -> Self::Output {
        let (config, spec) = (self.config, self.spec);
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()?;
        let log = log_config(config, spec)?;
        let stats = runtime.block_on(async {
            let cluster = LocalCluster::<P>::start(
                config.placement.clone(),
                Arc::new(spec.options.clone()),
                config.seed,
                Duration::from_secs(10),
                &log,
                crate::procedures(),
            )?;
            let mut transports = Vec::new();
            for &home in &config.client_nodes {
                for _ in 0..config.clients_per_node {
                    transports.push((home, cluster.connect(home)));
                }
            }
            let probes = config
                .placement
                .nodes()
                .map(|n| cluster.connect(n))
                .collect();
            let loader = |home| std::future::ready(anyhow::Ok(cluster.connect(home)));
            let stats = drive(config, spec, info, transports, probes, loader).await;
            cluster.shutdown().await;
            stats
        })?;
        Ok(ProtocolResult::new(info, spec, config, stats))
    }
}
