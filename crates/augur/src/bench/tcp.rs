//! `augur bench --runtime tcp`: the same benchmark against `augur node` processes on loopback,
//! one per node, with clients connected over TCP. Node logs go to `OUT/node-PROTOCOL-ID.log`.
//! `augur bench --cluster FILE` drives the same clients against a cluster already running.

use super::run::drive;
use crate::BadInput;
use crate::bench_options::{BenchConfig, ProtocolSpec};
use crate::cluster::{
    Cluster, ClusterFile, FollowingTransport, NodeEntry, OptionsFile, SecurityFile,
    free_loopback_addrs, node_threads,
};
use crate::interrupt;
use crate::report::ProtocolResult;
use augur_client::{Outcome, Session, run_with_retry};
use augur_protocols::registry;
use augur_runtime::tcp::ClientConfig;
use augur_runtime::wal::LogStorage;
use augur_types::{Key, NodeId, RequestForm, Value};
use augur_workloads::Observe;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Kills the node processes however the run ends.
struct Nodes(Vec<Child>);

impl Drop for Nodes {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

pub fn run(
    config: &BenchConfig,
    spec: &ProtocolSpec,
) -> anyhow::Result<anyhow::Result<ProtocolResult>> {
    let info = registry::info(&spec.name)?;
    let addrs = free_loopback_addrs(config.nodes)?;
    let options = &spec.options;
    // File names carry the entry, settings included, without the characters that separate them.
    let protocol = spec.label.replace([':', '='], "-");
    let file = ClusterFile {
        cluster_id: format!("bench-{protocol}"),
        protocol: spec.name.clone(),
        latency: config.latency.clone(),
        dcs: Some(config.dcs.len()),
        replication: config.replication,
        placement: config.placement.layout(),
        seed: config.seed,
        emulate_latency: true,
        options: OptionsFile {
            participant_timeout_ms: Some(options.participant_timeout.as_millis() as u64),
            gc_retention_ms: Some(options.gc_retention.as_millis() as u64),
            gc_interval_ms: Some(options.gc_interval.as_millis() as u64),
            idle_txn_timeout_ms: Some(options.idle_txn_timeout.as_millis() as u64),
            settings: options
                .settings
                .iter()
                .map(|(k, v)| (k.clone(), toml::Value::String(v.clone())))
                .collect(),
        },
        nodes: addrs
            .iter()
            .enumerate()
            .map(|(i, a)| NodeEntry {
                id: i as u32,
                addr: a.to_string(),
                listen: None,
                cert: None,
                key: None,
                data_dir: None,
                metrics: None,
                grpc: None,
            })
            .collect(),
        // Nodes and clients on loopback, started by this process: plaintext, said so.
        limits: Default::default(),
        security: Some(SecurityFile {
            tls: false,
            ca: None,
            client_token_file: None,
        }),
    };
    let path = config.out.join(format!("cluster-{protocol}.toml"));
    std::fs::write(&path, toml::to_string(&file)?)?;
    let cluster = Cluster::load(&path)?;
    let clients = cluster.client_config(Duration::from_secs(10))?;
    let exe = std::env::current_exe()?;
    let data_dir = match crate::bench_options::log_config(config, spec)?.storage {
        LogStorage::Dir(dir) => Some(dir),
        LogStorage::Memory => None,
    };
    let threads = node_threads(config.nodes);
    let mut nodes = Nodes(Vec::new());
    for i in 0..config.nodes {
        let log = std::fs::File::create(config.out.join(format!("node-{protocol}-{i}.log")))?;
        let mut command = Command::new(&exe);
        command
            .args(["node", "--config"])
            .arg(&path)
            .args(["--id", &i.to_string()])
            .args(["--threads", &threads.to_string()]);
        if let Some(dir) = &data_dir {
            command.arg("--data-dir").arg(dir.join(format!("node-{i}")));
        }
        interrupt::end_with_parent(&mut command);
        let child = command
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()?;
        nodes.0.push(child);
    }
    let result = drive_cluster(config, spec, info, &cluster, &clients);
    drop(nodes);
    result
}

/// `augur bench --cluster FILE`: the same benchmark against a cluster that is already running,
/// starting no nodes (the configuration was checked against the cluster file).
pub fn run_on_cluster(
    config: &BenchConfig,
    spec: &ProtocolSpec,
    path: &std::path::Path,
) -> anyhow::Result<anyhow::Result<ProtocolResult>> {
    let info = registry::info(&spec.name)?;
    let cluster = Cluster::load(path)?;
    let clients = cluster.client_config(Duration::from_secs(10))?;
    claim_the_clusters_bench_data(config, info, &cluster, &clients)?;
    drive_cluster(config, spec, info, &cluster, &clients)
}

/// The key where a bench run against a running cluster (`--cluster`) notes whose data the
/// cluster holds: the workload and its settings. On shard 0, after every workload's keys (they
/// end in an 8-byte number or a table's name).
const BENCH_DATA_KEY: &[u8] = b"augur/bench-data-of";

/// Bench data lives in keys that begin with a zero byte (a workload key starts with its shard
/// tag, a small number: `augur-workloads`' load tests check every workload), apart from keys
/// written as text, which begin with a printable byte. But every workload shares that space,
/// and another workload's data under the same keys is what it cannot read (a bank balance that is
/// `synthetic-str`'s value). So before it loads or runs anything, a bench against a running
/// cluster reads whose bench data the cluster holds: none (it notes its own), its own
/// workload with the same settings (it runs over it), or another: refused, naming both, before
/// a key is written.
fn claim_the_clusters_bench_data(
    config: &BenchConfig,
    info: &'static registry::ProtocolInfo,
    cluster: &Cluster,
    clients: &ClientConfig,
) -> anyhow::Result<()> {
    let ours = format!("{} {}", config.workload, config.workload_settings);
    let key = Key::tagged(0, BENCH_DATA_KEY);
    let home = config.placement.master(config.placement.partition_of(&key));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let transport = connect_with_retry(cluster, clients, home, true).await?;
        // The read goes in the form the protocol takes reads in; the note is a blind write,
        // which every protocol takes interactively.
        let form = if info.reads_only_one_shot() {
            RequestForm::OneShot
        } else {
            RequestForm::Interactive
        };
        let session = Session::new(transport).with_form(form);
        let mut read = Observe::new("bench-data-of", vec![key.clone()]);
        let report = run_with_retry(&session, &mut read, 5).await;
        if !matches!(report.outcome, Outcome::Committed { .. }) {
            anyhow::bail!(
                "cannot read whose bench data the cluster holds: {:?}",
                report.outcome
            );
        }
        match read.values().into_iter().next().flatten() {
            Some(theirs) if theirs.as_ref() == ours.as_bytes() => Ok(()),
            Some(theirs) => Err(BadInput(format!(
                "the cluster holds the data of an earlier bench of workload {}; this one \
                 ({ours}) would run over it and overwrite it: run it against a fresh cluster \
                 (new data directories)",
                String::from_utf8_lossy(&theirs)
            ))
            .into()),
            None => {
                let mut note = session.begin(false).await?;
                note.write(key, Some(Value::from(ours.into_bytes())))?;
                note.commit().await?;
                Ok(())
            }
        }
    })
}

/// Connect the run's clients, probes and loaders to `cluster`'s nodes and drive the benchmark.
fn drive_cluster(
    config: &BenchConfig,
    spec: &ProtocolSpec,
    info: &'static registry::ProtocolInfo,
    cluster: &Cluster,
    clients: &ClientConfig,
) -> anyhow::Result<anyhow::Result<ProtocolResult>> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let stats = runtime.block_on(async {
        // Clients follow the cluster when their node dies; probes read one node's counters.
        let mut transports = Vec::new();
        for &home in &config.client_nodes {
            for _ in 0..config.clients_per_node {
                let t = connect_with_retry(cluster, clients, home, true).await?;
                transports.push((home, t));
            }
        }
        let mut probes = Vec::new();
        for node in config.placement.nodes() {
            probes.push(connect_with_retry(cluster, clients, node, false).await?);
        }
        let loader = |home: NodeId| connect_with_retry(cluster, clients, home, true);
        drive(config, spec, info, transports, probes, loader).await
    })?;
    Ok(Ok(ProtocolResult::new(info, spec, config, stats)))
}

/// Nodes take a moment to start listening; keep trying for a few seconds.
async fn connect_with_retry(
    cluster: &Cluster,
    clients: &ClientConfig,
    home: NodeId,
    follows: bool,
) -> anyhow::Result<FollowingTransport> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match FollowingTransport::connect(cluster, clients, home, follows).await {
            Ok(t) => return Ok(t),
            Err(e) if Instant::now() >= deadline => {
                anyhow::bail!("node {home} did not accept connections: {e}")
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
}
