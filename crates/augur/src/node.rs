//! `augur node --config FILE --id N`: serve node `N` of the cluster described by a TOML file, over
//! TCP, until Ctrl-C or SIGTERM. The file format is documented in docs/cluster-config.md.

use crate::BadInput;
use crate::cluster::{Cluster, resolve};
use anyhow::Context;
use augur_contract::log_policy::LogPolicy;
use augur_contract::{NodeEnv, Protocol};
use augur_protocols::registry::{self, ProtocolInfo, ProtocolVisitor};
use augur_runtime::tcp::{self, NodeTls, TcpNodeConfig};
use augur_runtime::{wal::LogConfig, wal::LogStorage};
use augur_types::NodeId;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use tracing::{error, info, warn};

/// Serve node `id` of the cluster described by the file at `config` until Ctrl-C or SIGTERM,
/// on `threads` worker threads (by default one per core), its clock reading `clock_offset_ms`
/// ahead of the system's (fault injection; normally 0).
pub fn run(
    config: &Path,
    id: u32,
    data_dir: Option<&Path>,
    threads: Option<usize>,
    clock_offset_ms: i64,
) -> anyhow::Result<()> {
    let cluster = Cluster::load(config)?;
    let bad = |msg: String| BadInput(format!("{}: {msg}", config.display()));
    let n = cluster.nodes.len();
    if id as usize >= n {
        return Err(bad(format!(
            "node id {id} is not in the file (its ids are 0..={})",
            n - 1
        ))
        .into());
    }
    let mut peers = Vec::with_capacity(n);
    for node in &cluster.nodes {
        let addr = resolve(&format!("node {}", node.id), &node.addr).map_err(bad)?;
        peers.push((NodeId(node.id), addr));
    }
    let me = &cluster.nodes[id as usize];
    let listen = match &me.listen {
        Some(listen) => resolve(&format!("node {id} listen"), listen).map_err(bad)?,
        None => peers[id as usize].1,
    };
    let mut runtime = tokio::runtime::Builder::new_multi_thread();
    if let Some(threads) = threads {
        runtime.worker_threads(threads);
    }
    let runtime = runtime
        .enable_all()
        .thread_name("augur-node")
        .build()
        .context("cannot start the async runtime")?;
    let policy = LogPolicy::from_options(&cluster.options, LogPolicy::Always).map_err(bad)?;
    let protocol = cluster.protocol.name;
    let data_dir = data_dir.or(cluster.data_dirs[id as usize].as_deref());
    let log = match data_dir {
        Some(dir) => LogConfig::dir(protocol, policy, dir),
        None => {
            warn!(
                node = id,
                "no data directory (neither --data-dir nor data_dir in the cluster file): this node keeps its state in memory only and loses it when it stops"
            );
            LogConfig::memory(protocol, policy)
        }
    };
    let serve = ServeNode {
        cluster: &cluster,
        id: NodeId(id),
        listen,
        log,
        peers,
        runtime: &runtime,
        clock_offset_ms,
    };
    registry::visit(cluster.protocol.name, serve).map_err(|e| bad(e.to_string()))?
}

/// Runs the node with the protocol type the cluster file names.
struct ServeNode<'a> {
    cluster: &'a Cluster,
    id: NodeId,
    listen: SocketAddr,
    log: LogConfig,
    peers: Vec<(NodeId, SocketAddr)>,
    runtime: &'a tokio::runtime::Runtime,
    clock_offset_ms: i64,
}

impl ProtocolVisitor for ServeNode<'_> {
    type Output = anyhow::Result<()>;

    fn visit<P: Protocol>(self, info: &'static ProtocolInfo) -> anyhow::Result<()> {
        let ServeNode {
            cluster,
            id,
            listen,
            log,
            peers,
            runtime,
            clock_offset_ms,
        } = self;
        runtime.block_on(async move {
            let env = NodeEnv {
                id,
                placement: cluster.placement.clone(),
                options: cluster.options.clone(),
                procedures: crate::procedures(),
            };
            let tls = match &cluster.security.tls {
                None => None,
                Some(files) => {
                    let (cert, key) = &files.nodes[id.0 as usize];
                    let tls = NodeTls::load(id, &files.ca, cert, key)
                        .map_err(|e| BadInput(format!("node {}: {e}", id.0)))?;
                    Some(Arc::new(tls))
                }
            };
            let config = TcpNodeConfig {
                peers,
                seed: cluster.seed,
                emulate_latency: cluster.emulate_latency,
                log: log.clone(),
                identity: cluster.identity.clone(),
                tls,
                client_token: cluster.security.client_token.clone(),
                limits: cluster.limits.clone(),
                clock_offset_us: clock_offset_ms.saturating_mul(1000),
            };
            // Metrics first: a node whose metrics address is taken does not start unobserved.
            let metrics_addr = match &cluster.nodes[id.0 as usize].metrics {
                None => None,
                Some(addr) => Some(resolve(&format!("node {} metrics", id.0), addr).map_err(BadInput)?),
            };
            let metrics = match metrics_addr {
                None => None,
                Some(addr) => {
                    let listener = crate::metrics_http::bind(addr).await?;
                    let handle = crate::metrics_http::install(id, cluster.protocol.name)?;
                    Some(tokio::spawn(crate::metrics_http::serve(listener, handle)))
                }
            };
            // So is the gRPC API's address: bound before the node starts.
            let entry = &cluster.nodes[id.0 as usize];
            let grpc_listener = match &entry.grpc {
                None => None,
                Some(addr) => {
                    let addr = resolve(&format!("node {} grpc", id.0), addr).map_err(BadInput)?;
                    let listener = tokio::net::TcpListener::bind(addr)
                        .await
                        .with_context(|| format!("node {} cannot serve gRPC on {addr}", id.0))?;
                    Some(listener)
                }
            };
            let grpc_tls = match &cluster.security.tls {
                Some(files) if grpc_listener.is_some() => {
                    let (cert, key) = &files.nodes[id.0 as usize];
                    let read = |path: &Path| {
                        std::fs::read(path).map_err(|e| {
                            BadInput(format!("node {}: cannot read {}: {e}", id.0, path.display()))
                        })
                    };
                    Some(augur_grpc::tls_config(&read(cert)?, &read(key)?))
                }
                _ => None,
            };
            let mut node = tcp::serve::<P>(env, listen, config)
                .await
                .with_context(|| format!("node {} cannot start on {listen}", id.0))?;
            let grpc_stop = tokio::sync::watch::channel(false);
            let grpc_addr = grpc_listener.as_ref().and_then(|l| l.local_addr().ok());
            let grpc = grpc_listener.map(|listener| {
                let api = augur_grpc::AugurApi::new(
                    node.clients(),
                    augur_grpc::NodeInfo {
                        node: id.0,
                        cluster_id: cluster.identity.cluster_id.clone(),
                        protocol: info.name.to_string(),
                        fingerprint: cluster.identity.fingerprint(),
                    },
                    cluster.limits.max_clients,
                    GRPC_REQUEST_TIMEOUT,
                );
                let limits = augur_grpc::ServeLimits {
                    max_connections: cluster.limits.max_clients,
                    max_streams_per_connection: cluster.limits.max_requests_in_flight as u32,
                    keepalive: GRPC_KEEPALIVE,
                };
                let stopped = grpc_stop.1.clone();
                tokio::spawn(async move {
                    let shutdown = async move {
                        let mut stopped = stopped;
                        let _ = stopped.wait_for(|stop| *stop).await;
                    };
                    if let Err(e) = augur_grpc::serve(api, listener, grpc_tls, limits, shutdown).await {
                        error!(node = %id, "the gRPC API stopped: {e}");
                    }
                })
            });
            let placement = &cluster.placement;
            info!(
                node = %id,
                protocol = info.name,
                addr = %node.local_addr(),
                dc = placement.dc_name(placement.dc_of(id)),
                nodes = placement.node_count(),
                replication = placement.replication_factor(),
                placement = %placement.layout(),
                partitions = placement.partition_count(),
                data_dir = %match &log.storage {
                    LogStorage::Dir(dir) => dir.display().to_string(),
                    LogStorage::Memory => "none (memory)".to_string(),
                },
                log = %log.policy,
                cluster = %cluster.identity.cluster_id,
                fingerprint = %cluster.identity.fingerprint(),
                tls = cluster.security.tls.is_some(),
                client_token = cluster.security.client_token.is_some(),
                metrics = %metrics_addr.map_or("none".to_string(), |a| format!("http://{a}/metrics")),
                grpc = %grpc_addr.map_or("none".to_string(), |a| a.to_string()),
                "node serving"
            );
            if clock_offset_ms != 0 {
                warn!(node = %id, clock_offset_ms, "this node's clock is skewed on purpose (--clock-offset-ms)");
            }
            tokio::select! {
                signal = shutdown_signal() => {
                    signal.context("cannot wait for shutdown signals")?;
                    info!(node = %id, "shutting down");
                    let _ = grpc_stop.0.send(true);
                    if let Some(grpc) = grpc {
                        let _ = grpc.await;
                    }
                    node.shutdown().await;
                    if let Some(metrics) = metrics {
                        metrics.abort();
                    }
                    Ok(())
                }
                stopped = node.join() => {
                    let why = stopped.err().unwrap_or_else(|| "no reason given".into());
                    error!(node = %id, "node loop stopped: {why}");
                    anyhow::bail!("node {} stopped unexpectedly: {why}", id.0)
                }
            }
        })
    }
}

/// How long a gRPC request waits for the node's reply.
const GRPC_REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// How often an idle gRPC connection is pinged, and how long its answer may take.
const GRPC_KEEPALIVE: Duration = Duration::from_secs(20);

/// Resolves on Ctrl-C (SIGINT) or, on Unix, SIGTERM.
async fn shutdown_signal() -> std::io::Result<()> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let mut term = signal(SignalKind::terminate())?;
        tokio::select! {
            r = tokio::signal::ctrl_c() => r,
            _ = term.recv() => Ok(()),
        }
    }
    #[cfg(not(unix))]
    {
        tokio::signal::ctrl_c().await
    }
}
