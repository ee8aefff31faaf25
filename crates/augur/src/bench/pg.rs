//! `augur bench --protocol postgres-serializable,postgres-repeatable-read`: the same workload
//! code, driven against one PostgreSQL server (see `docs/postgres.md`), so users can compare
//! augur's protocols with the database they would otherwise pick, side by side in one run.

use super::run::drive;
use crate::bench_options::{BenchConfig, ProtocolSpec};
use crate::report::ProtocolResult;
use augur_postgres::{IsolationMode, PgTransport};
use augur_protocols::registry::ProtocolInfo;
use augur_types::ClientId;

/// Run the benchmark against the PostgreSQL server at `config.pg_url`, on an emptied table.
pub fn run(
    config: &BenchConfig,
    spec: &ProtocolSpec,
    info: &'static ProtocolInfo,
) -> anyhow::Result<ProtocolResult> {
    let mode = IsolationMode::from_protocol_name(info.name).expect("a registered peer");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let url = config.pg_url.as_str();
    let stats = runtime.block_on(async {
        let unreachable = |e: augur_postgres::tokio_postgres::Error| {
            anyhow::anyhow!(
                "PostgreSQL at '{url}': {e} (start one with scripts/postgres.sh start, or pass --pg-url)"
            )
        };
        augur_postgres::prepare_schema(url).await.map_err(unreachable)?;
        augur_postgres::truncate(url).await.map_err(unreachable)?;
        // One clock for every session, loaders included: each connection would otherwise count
        // from its own start, later for every client connected after it, and the history's
        // times would not compare across clients.
        let origin = std::time::Instant::now();
        let mut transports = Vec::new();
        let mut next_client = 0u64;
        // Clients keep their augur homes, so workloads draw the same keys as against augur.
        for &home in &config.client_nodes {
            for _ in 0..config.clients_per_node {
                let t = PgTransport::connect(url, ClientId(next_client), mode)
                    .await
                    .map_err(unreachable)?
                    .with_origin(origin);
                next_client += 1;
                transports.push((home, t));
            }
        }
        let no_probes: Vec<PgTransport> = Vec::new();
        // Loader sessions take the ids after the clients'.
        let loader = |_home| {
            let client = ClientId(next_client);
            next_client += 1;
            async move {
                PgTransport::connect(url, client, mode)
                    .await
                    .map(|t| t.with_origin(origin))
                    .map_err(unreachable)
            }
        };
        drive(config, spec, info, transports, no_probes, loader).await
    })?;
    Ok(ProtocolResult::new(info, spec, config, stats))
}
