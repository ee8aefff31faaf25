//! `augur nemesis`: fault injection over real processes.
//!
//! For each workload asked for (`bank` and `list-append` by default) the nemesis starts a fresh
//! cluster of `augur node` processes (TLS, a client token, a data directory per node, as
//! `augur cluster init` writes it), each node in a network namespace of its own where the
//! machine allows it (its `network` module), and runs the workload's clients against every node with
//! every attempt recorded in a history. While they run it injects one fault at a time, each
//! bounded and healed before the next: `kill -9` and restart, SIGSTOP/SIGCONT, partitions (a
//! minority cut off, a majorities ring, one link), a node restarted with its clock skewed, and a
//! rolling restart of every node. After the last fault it heals everything and then requires:
//!
//! * **recovery**: every node coordinates a transaction writing to every partition within
//!   `--recovery-bound` seconds of the heal;
//! * **the history passes** the isolation checker at the level the protocol claims (what
//!   `augur check --input` runs on the history file it keeps);
//! * **nothing acknowledged is lost**: every node's final read (a read-only transaction over
//!   every key of the workload, recorded in the history, at a snapshot no earlier than the last
//!   acknowledged commit's timestamp: a node whose clock was set behind waits until it catches
//!   up, since snapshot isolation promises no real-time recency) shows, for `list-append`, every element
//!   a committed append added and none that an aborted append would have, and for `bank`
//!   balances that add up to the opening total, none negative;
//! * **no node died on its own**.
//!
//! Clients reconnect when their node goes away: to their own node as soon as it is back, or to
//! another meanwhile. An attempt whose outcome its client never learned is recorded as unknown,
//! never assumed aborted. Everything is kept under `--out`: each workload's history
//! (`history.jsonl`), the nodes' logs, the cluster directory and the fault timeline.

mod network;
mod processes;

use crate::BadInput;
use crate::check::{
    CHECK_SPECULATION, Settings, check_recorded, flatten_settings, split_settings, write_history,
};
use crate::cluster::{Cluster, ClusterFile};
use crate::interrupt;
use augur_client::{
    ChainRoom, CommitStats, DegreeChoice, HistoryRecorder, Outcome, RetryPolicy, RunObserver,
    Runner, Session, Transport, TxnError, run_once,
};
use augur_protocols::registry::{self, ProtocolInfo};
use augur_runtime::tcp::{ClientConfig, TcpTransport};
use augur_types::history::{HISTORY_FORMAT, History, HistoryHeader, Op, RecordedOutcome};
use augur_types::{
    AbortReason, IsolationLevel, Key, Layout, NodeId, PartitionId, Placement, RequestForm,
    Timestamp,
};
use augur_workloads::list_append::key_among;
use augur_workloads::{Observe, Workload};
use network::Network;
use processes::NodeProcesses;
use rand::seq::{IndexedRandom, SliceRandom};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// `augur nemesis` options.
#[derive(clap::Args, Debug)]
pub struct NemesisArgs {
    /// The protocol the cluster runs (one that claims an isolation level).
    #[arg(long, default_value = "clocksi-rep")]
    pub protocol: String,
    /// Workloads to run, each on a fresh cluster: `bank`, `list-append`.
    #[arg(long, default_value = "bank,list-append", value_delimiter = ',')]
    pub workload: Vec<String>,
    /// Nodes in the cluster (and partitions, with `--placement ring`).
    #[arg(long, default_value_t = 3)]
    pub nodes: usize,
    /// Replicas per partition (default: every node, at most 3).
    #[arg(long)]
    pub replication: Option<usize>,
    /// How partitions are laid out over the nodes: `ring` or `hash` (consistent hashing;
    /// `hash:partitions=N:vnodes=V`), written to the cluster file every node reads.
    #[arg(long, default_value = "ring")]
    pub placement: String,
    /// Clients per node.
    #[arg(long, default_value_t = 2)]
    pub clients: usize,
    /// Seconds of faults per workload (after 2 s of calm; 3 s more of calm follow the heal).
    #[arg(long, default_value_t = 30.0)]
    pub duration: f64,
    /// Faults to inject: `all` (every kind the network allows) or a list of kill, pause,
    /// partition-minority, partition-ring, partition-link, clock, rolling-restart.
    #[arg(long, default_value = "all")]
    pub faults: String,
    /// Where nodes live: `netns` (a network namespace each; needs root, iproute2 and
    /// iptables), `loopback` (no partitions), or `auto` (netns where possible).
    #[arg(long, default_value = "auto")]
    pub network: String,
    /// Bound, in seconds, on how long after the heal every node must commit again.
    #[arg(long, default_value_t = 10.0)]
    pub recovery_bound: f64,
    /// Bound, in seconds, on how long after `kill-master` kills a node a transaction writing
    /// every partition must commit at another node, while the killed node stays down.
    #[arg(long, default_value_t = 3.0)]
    pub failover_bound: f64,
    /// The largest clock offset the `clock` fault gives a node, in milliseconds (either way).
    #[arg(long, default_value_t = 100)]
    pub max_clock_offset_ms: i64,
    /// Seeds the fault schedule and the clients.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Where histories, node logs and the timeline go (a directory per workload, replaced).
    #[arg(long, default_value = "nemesis-results")]
    pub out: PathBuf,
    /// Run a deliberately broken cluster, to show that the checks catch what it breaks:
    /// `memory-only` starts the nodes without data directories, so a killed node comes back
    /// empty and acknowledged commits are lost.
    #[arg(long, value_name = "HOW")]
    pub sabotage: Option<String>,
    /// A workload setting, `KEY=VALUE`, or a protocol setting, `protocol.KEY=VALUE`, written
    /// to the cluster file's `[options.settings]` (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
}

/// The fault kinds, their names and what each does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum FaultKind {
    Kill,
    KillMaster,
    Pause,
    PartitionMinority,
    PartitionRing,
    PartitionLink,
    Clock,
    RollingRestart,
}

const FAULT_KINDS: &[(FaultKind, &str, &str)] = &[
    (
        FaultKind::Kill,
        "kill",
        "SIGKILL a node, restart it 0.2–1.5 s later from its data directory",
    ),
    (
        FaultKind::KillMaster,
        "kill-master",
        "SIGKILL the placement's master of a random partition and keep it down until a transaction writing every partition commits at another node (at most --failover-bound s), then restart it (protocols whose masters fail over)",
    ),
    (
        FaultKind::Pause,
        "pause",
        "SIGSTOP a node for 0.5–3 s, then SIGCONT",
    ),
    (
        FaultKind::PartitionMinority,
        "partition-minority",
        "cut a minority of the nodes off from the rest for 1–4 s",
    ),
    (
        FaultKind::PartitionRing,
        "partition-ring",
        "a majorities ring for 1–4 s: every node sees a majority, no two the same (with 3 nodes, one link cut)",
    ),
    (
        FaultKind::PartitionLink,
        "partition-link",
        "cut the link between two nodes for 1–4 s",
    ),
    (
        FaultKind::Clock,
        "clock",
        "restart a node (SIGTERM) with its clock offset by up to ±max-clock-offset-ms; offsets stay",
    ),
    (
        FaultKind::RollingRestart,
        "rolling-restart",
        "restart every node in turn (SIGTERM, start, wait until it listens)",
    ),
];

impl FaultKind {
    fn name(self) -> &'static str {
        FAULT_KINDS
            .iter()
            .find(|(k, _, _)| *k == self)
            .map(|(_, name, _)| *name)
            .expect("every kind is listed")
    }

    fn is_partition(self) -> bool {
        matches!(
            self,
            FaultKind::PartitionMinority | FaultKind::PartitionRing | FaultKind::PartitionLink
        )
    }
}

/// Parse `--faults`: `all` is every kind `network` allows (`kill-master` only for a protocol
/// whose masters fail over); a partition named on a network that cannot cut links, or
/// `kill-master` for a protocol that keeps its masters, is an error.
fn parse_faults(
    spec: &str,
    can_partition: bool,
    fails_over: bool,
) -> Result<Vec<FaultKind>, String> {
    if spec.trim() == "all" {
        return Ok(FAULT_KINDS
            .iter()
            .map(|(k, _, _)| *k)
            .filter(|k| can_partition || !k.is_partition())
            .filter(|k| fails_over || *k != FaultKind::KillMaster)
            .collect());
    }
    let mut kinds = Vec::new();
    for name in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let Some((kind, _, _)) = FAULT_KINDS.iter().find(|(_, n, _)| *n == name) else {
            let valid: Vec<&str> = FAULT_KINDS.iter().map(|(_, n, _)| *n).collect();
            return Err(format!(
                "unknown fault '{name}'; valid faults: all, {}",
                valid.join(", ")
            ));
        };
        if kind.is_partition() && !can_partition {
            return Err(format!(
                "fault '{name}' needs --network netns (links cannot be cut on loopback)"
            ));
        }
        if *kind == FaultKind::KillMaster && !fails_over {
            return Err(format!(
                "fault '{name}' needs a protocol whose masters fail over (one that takes the \
                 `failover` setting, with it on)"
            ));
        }
        if !kinds.contains(kind) {
            kinds.push(*kind);
        }
    }
    if kinds.is_empty() {
        return Err("--faults names no fault".into());
    }
    Ok(kinds)
}

/// The workloads whose histories the nemesis can check and whose final state it can judge.
const WORKLOADS: &[&str] = &["bank", "list-append"];

/// Calm before the first fault, and after the heal before the clients stop.
const CALM_BEFORE: Duration = Duration::from_secs(2);
const CALM_AFTER: Duration = Duration::from_secs(3);
/// How long a client waits for a reply (connecting too).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(2);
/// A client's pause between transactions: bounds the history's length.
const THINK: Duration = Duration::from_millis(5);
/// How long a final read waits for its node's snapshots to reach the last acknowledged commit.
const SNAPSHOT_PATIENCE: Duration = Duration::from_secs(10);
/// How long a client keeps trying its own node before it goes to another.
const HOME_PATIENCE: Duration = Duration::from_secs(1);

/// `augur nemesis`: run every workload under faults and check what happened; exits 1 (an
/// error) when any check fails.
/// `--placement`'s value, or a one-line error naming the valid ones.
fn layout(spec: &str) -> anyhow::Result<Layout> {
    spec.parse()
        .map_err(|e: augur_types::PlacementError| BadInput(e.to_string()).into())
}

pub fn run(args: &NemesisArgs) -> anyhow::Result<()> {
    let info = registry::info(&args.protocol).map_err(|e| BadInput(e.to_string()))?;
    if info.isolation == IsolationLevel::None {
        return Err(BadInput(format!(
            "{} claims no isolation level, so there is nothing to check its histories against",
            info.name
        ))
        .into());
    }
    for w in &args.workload {
        if !WORKLOADS.contains(&w.as_str()) {
            return Err(BadInput(format!(
                "the nemesis runs {} (histories it can check), not '{w}'",
                WORKLOADS.join(" and ")
            ))
            .into());
        }
    }
    if args.nodes < 2 {
        return Err(BadInput("--nodes must be at least 2 for faults between nodes".into()).into());
    }
    if !(args.duration > 0.0 && args.recovery_bound > 0.0 && args.failover_bound > 0.0) {
        return Err(BadInput(
            "--duration, --recovery-bound and --failover-bound must be positive".into(),
        )
        .into());
    }
    layout(&args.placement)?;
    let (settings, protocol_settings) = split_settings(&args.set).map_err(BadInput)?;
    let replication = args
        .replication
        .unwrap_or(crate::provision::default_replication(info, args.nodes));
    info.validate_for_cluster(&protocol_settings, args.nodes, replication)
        .map_err(|e| BadInput(e.to_string()))?;
    if let Some(how) = &args.sabotage
        && how != "memory-only"
    {
        return Err(BadInput(format!("unknown --sabotage '{how}'; valid: memory-only")).into());
    }
    let use_netns = match args.network.as_str() {
        "netns" => {
            if let Some(why) = network::namespaces_unavailable() {
                return Err(BadInput(format!("--network netns: {why}")).into());
            }
            true
        }
        "loopback" => false,
        "auto" => match network::namespaces_unavailable() {
            None => true,
            Some(why) => {
                eprintln!("nemesis: on loopback, without partitions: {why}");
                false
            }
        },
        other => {
            return Err(BadInput(format!(
                "unknown --network '{other}'; valid: auto, netns, loopback"
            ))
            .into());
        }
    };
    let fails_over = info.fails_over_with(&protocol_settings);
    let faults = parse_faults(&args.faults, use_netns, fails_over).map_err(BadInput)?;
    let out = &args.out;
    std::fs::create_dir_all(out)?;

    // Ctrl-C or SIGTERM ends the faults early; the run then heals, checks what it has and
    // removes its namespaces, rather than leaving them behind.
    interrupt::install();
    let mut failed = Vec::new();
    for (index, workload) in args.workload.iter().enumerate() {
        if interrupt::requested() {
            break;
        }
        let dir = out.join(workload);
        if dir.exists() {
            std::fs::remove_dir_all(&dir)?;
        }
        std::fs::create_dir_all(&dir)?;
        let network = if use_netns {
            Network::Namespaces(network::Namespaces::create(args.nodes)?)
        } else {
            Network::Loopback
        };
        let run = Run {
            args,
            info,
            workload,
            // Each workload meets a schedule of its own.
            seed: args.seed.wrapping_add(index as u64),
            settings: &settings,
            protocol_settings: &protocol_settings,
            faults: &faults,
            network,
            dir: &dir,
        };
        let report = run.execute()?;
        println!("{}", report.summary);
        if !report.failures.is_empty() {
            println!("  FAILED:");
            for f in &report.failures {
                println!("    {f}");
            }
            failed.push(workload.clone());
        }
    }
    println!("histories, node logs and timelines: {}", out.display());
    if failed.is_empty() {
        Ok(())
    } else {
        anyhow::bail!(
            "{} under faults failed its checks on {}",
            info.name,
            failed.join(", ")
        )
    }
}

/// One workload's run on a fresh cluster.
struct Run<'a> {
    args: &'a NemesisArgs,
    info: &'static ProtocolInfo,
    workload: &'a str,
    seed: u64,
    settings: &'a Settings,
    protocol_settings: &'a Settings,
    faults: &'a [FaultKind],
    network: Network,
    dir: &'a Path,
}

/// What a fault is injected with.
struct Injection<'a> {
    nodes: &'a mut NodeProcesses,
    runtime: &'a tokio::runtime::Runtime,
    shared: &'a Shared,
    rng: &'a mut ChaCha8Rng,
    timeline: &'a mut Timeline,
}

/// What a run found.
struct RunReport {
    summary: String,
    failures: Vec<String>,
}

/// What the clients share.
struct Shared {
    cluster: Cluster,
    /// The form clients submit transactions in: the protocol's first (interactive, or
    /// one-shot for an order-then-execute protocol, which refuses interactive reads).
    form: RequestForm,
    clients: ClientConfig,
    workload: Arc<dyn Workload>,
    recorder: HistoryRecorder,
    stop: AtomicBool,
    committed: AtomicU64,
    aborted: AtomicU64,
    unknown: AtomicU64,
    reconnects: AtomicU64,
}

impl Shared {
    /// A connection to `node`, or why there is none, in words.
    async fn connect(&self, node: NodeId) -> Result<TcpTransport, String> {
        self.cluster
            .connect(&self.clients, node)
            .await
            .map_err(|e| e.to_string())
    }
}

impl Run<'_> {
    fn execute(self) -> anyhow::Result<RunReport> {
        let args = self.args;
        let started = Instant::now();
        let (config, addrs) = self.write_cluster()?;
        let cluster = Cluster::load(&config)?;
        let workload =
            augur_workloads::build(self.workload, self.settings, cluster.placement.clone())
                .map_err(|e| BadInput(e.to_string()))?;
        let mut nodes = NodeProcesses::start(&self.network, &config, addrs, self.dir)?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()?;
        let shared = Arc::new(Shared {
            form: self.info.forms[0],
            clients: cluster.client_config(REQUEST_TIMEOUT)?,
            cluster,
            workload: workload.clone(),
            recorder: HistoryRecorder::new(),
            stop: AtomicBool::new(false),
            committed: AtomicU64::new(0),
            aborted: AtomicU64::new(0),
            unknown: AtomicU64::new(0),
            reconnects: AtomicU64::new(0),
        });
        let mut timeline = Timeline::new(&self.dir.join("timeline.txt"))?;
        timeline.say(&format!(
            "{} on {}: {} nodes on {}, faults {}",
            self.info.name,
            self.workload,
            args.nodes,
            if self.network.can_partition() {
                "network namespaces"
            } else {
                "loopback"
            },
            self.faults
                .iter()
                .map(|f| f.name())
                .collect::<Vec<_>>()
                .join(",")
        ));

        let mut rng = ChaCha8Rng::seed_from_u64(self.seed);
        let clients: Vec<_> = (0..args.nodes * args.clients)
            .map(|c| {
                let home = NodeId((c % args.nodes) as u32);
                runtime.spawn(run_client(shared.clone(), home, rng.random()))
            })
            .collect();

        let mut failures = Vec::new();
        // How long after each `kill-master` every partition committed again.
        let mut failovers: Vec<Duration> = Vec::new();
        std::thread::sleep(CALM_BEFORE);
        let faults_end = Instant::now() + Duration::from_secs_f64(args.duration);
        let mut injected = 0usize;
        while Instant::now() < faults_end && !interrupt::requested() {
            let kind = *self
                .faults
                .choose(&mut rng)
                .expect("faults are never empty");
            let injection = Injection {
                nodes: &mut nodes,
                runtime: &runtime,
                shared: &shared,
                rng: &mut rng,
                timeline: &mut timeline,
            };
            match self.inject(kind, injection) {
                Ok(Some(failed_over_in)) => failovers.push(failed_over_in),
                Ok(None) => {}
                Err(e) => {
                    failures.push(format!("fault {}: {e:#}", kind.name()));
                    break;
                }
            }
            injected += 1;
            std::thread::sleep(Duration::from_millis(rng.random_range(300..=1000)));
        }

        // Heal everything; nodes that died on their own are reported, then restarted.
        failures.extend(nodes.exited_on_their_own());
        self.network.heal()?;
        for i in 0..nodes.len() {
            nodes.resume(i);
            if !nodes.is_running(i) {
                nodes.spawn(&self.network, i)?;
            }
        }
        for i in 0..nodes.len() {
            nodes.wait_until_listening(i)?;
        }
        timeline.say("healed: every link up, every node running");
        let bound = Duration::from_secs_f64(args.recovery_bound);
        let recovery = runtime.block_on(recover(&shared, bound));
        let recovered_in = match recovery {
            Ok(took) => {
                timeline.say(&format!(
                    "every node committed again {:.2} s after the heal",
                    took.as_secs_f64()
                ));
                Some(took)
            }
            Err(e) => {
                failures.push(e);
                None
            }
        };
        std::thread::sleep(CALM_AFTER);
        shared.stop.store(true, Ordering::SeqCst);
        runtime.block_on(async {
            for client in clients {
                if client.await.is_err() {
                    failures.push("a client task panicked".into());
                }
            }
        });
        failures.extend(nodes.exited_on_their_own());

        // Every node's view of the final state, recorded like any other read.
        let keys = workload_keys(self.workload, &shared.workload, &shared.cluster.placement);
        let last_commit = shared
            .recorder
            .records()
            .iter()
            .filter_map(|r| match r.outcome {
                RecordedOutcome::Committed { commit_ts } => Some(Timestamp(commit_ts)),
                _ => None,
            })
            .max()
            .unwrap_or_default();
        let mut finals = Vec::new();
        for i in 0..args.nodes {
            let node = NodeId(i as u32);
            let read = final_read(&shared, node, &keys, self.workload, last_commit);
            match runtime.block_on(read) {
                Ok(values) => finals.push((node, values)),
                Err(e) => failures.push(format!("node {i} could not serve a final read: {e}")),
            }
        }
        timeline.say("final reads done");
        drop(nodes);

        let history = History {
            header: HistoryHeader {
                format: HISTORY_FORMAT,
                protocol: self.info.name.to_string(),
                workload: self.workload.to_string(),
                seed: self.seed,
                isolation: self.info.isolation.to_string(),
                faults: format!("nemesis:{}", args.faults),
                settings: flatten_settings(&shared.workload.settings()),
            },
            txns: shared.recorder.records(),
        };
        let history_path = self.dir.join("history.jsonl");
        write_history(&history_path, &history)?;
        let report = check_recorded(&history, self.info, true)?;
        for anomaly in report.violations().take(20) {
            failures.push(format!("checker: {anomaly}"));
        }
        match self.workload {
            "bank" => check_bank_finals(&history, &keys, &finals, &mut failures),
            _ => check_list_finals(&history, &keys, &finals, &mut failures),
        }
        let committed = shared.committed.load(Ordering::Relaxed);
        if committed == 0 {
            failures.push("nothing committed during the run".into());
        }
        let failed_over = match failovers.iter().max() {
            Some(slowest) => format!(
                "; {} master kills, every partition committing again within {:.2} s (slowest)",
                failovers.len(),
                slowest.as_secs_f64()
            ),
            None => String::new(),
        };
        let summary = format!(
            "{} on {} under {injected} faults in {:.0} s: {committed} committed, {} aborted, {} unknown, {} reconnects; recovered in {}{failed_over}; history {} ({} attempts, checked at {})",
            self.info.name,
            self.workload,
            started.elapsed().as_secs_f64(),
            shared.aborted.load(Ordering::Relaxed),
            shared.unknown.load(Ordering::Relaxed),
            shared.reconnects.load(Ordering::Relaxed),
            recovered_in.map_or("—".into(), |d| format!("{:.2} s", d.as_secs_f64())),
            history_path.display(),
            history.txns.len(),
            history.header.isolation,
        );
        timeline.record(&summary);
        for failure in &failures {
            timeline.record(&format!("FAILED: {failure}"));
        }
        Ok(RunReport { summary, failures })
    }

    /// Write the cluster directory (`augur cluster init`, then this run's addresses) and return
    /// its file and where each node is reached.
    fn write_cluster(&self) -> anyhow::Result<(PathBuf, Vec<SocketAddr>)> {
        let args = self.args;
        let hosts: Vec<String> = match &self.network {
            Network::Namespaces(ns) => (0..args.nodes).map(|i| ns.node_ip(i).to_string()).collect(),
            Network::Loopback => Vec::new(),
        };
        let path = crate::provision::init(&crate::provision::InitOptions {
            dir: &self.dir.join("cluster"),
            nodes: args.nodes,
            protocol: &args.protocol,
            base_port: 7100,
            replication: args.replication,
            placement: &args.placement,
            hosts: &hosts,
            latency: "lan",
            emulate_latency: true,
        })?;
        let mut file: ClusterFile = toml::from_str(&std::fs::read_to_string(&path)?)?;
        let mut loopback = if hosts.is_empty() {
            crate::cluster::free_loopback_addrs(file.nodes.len())?.into_iter()
        } else {
            Vec::new().into_iter()
        };
        for node in &mut file.nodes {
            // Clients only: no metrics or gRPC ports to collide with other runs.
            node.metrics = None;
            node.grpc = None;
            if args.sabotage.is_some() {
                node.data_dir = None;
            }
            if let Some(addr) = loopback.next() {
                node.addr = addr.to_string();
            }
        }
        // A dead participant is given up on quickly, so that faults cost seconds, not minutes.
        file.options.participant_timeout_ms = Some(500);
        for (k, v) in self.protocol_settings {
            file.options
                .settings
                .insert(k.clone(), toml::Value::String(v.clone()));
        }
        std::fs::write(&path, toml::to_string(&file)?)?;
        let cluster = Cluster::load(&path)?;
        let addrs = (0..args.nodes)
            .map(|i| {
                cluster
                    .node_addr(NodeId(i as u32))
                    .map_err(anyhow::Error::msg)
            })
            .collect::<anyhow::Result<_>>()?;
        Ok((path, addrs))
    }

    /// `kill-master`: kill -9 the placement's master of a random partition (its master unless
    /// an earlier kill moved mastership away: a node that rejoins does not take it back), keep
    /// it down until a transaction writing every partition commits, coordinated by the other
    /// nodes in turn, then restart it. Returns how long after the kill that commit came; an
    /// error when it did not within `--failover-bound`.
    fn kill_master(&self, at: Injection<'_>) -> anyhow::Result<Duration> {
        let Injection {
            nodes,
            runtime,
            shared,
            rng,
            timeline,
        } = at;
        let placement = &shared.cluster.placement;
        let partition = PartitionId(rng.random_range(0..placement.partition_count()) as u32);
        let victim = placement.master(partition);
        timeline.say(&format!(
            "kill -9 node {victim} (the placement's master of partition {partition}), down until every partition commits again"
        ));
        nodes.kill(victim.0 as usize);
        let killed = Instant::now();
        let bound = Duration::from_secs_f64(self.args.failover_bound);
        let live: Vec<NodeId> = placement.nodes().filter(|n| *n != victim).collect();
        let resumed = runtime
            .block_on(commit_everywhere(shared, &live, killed, bound))
            .map_err(|last| {
                anyhow::anyhow!(
                    "no transaction writing every partition committed within {bound:?} (last: {last})"
                )
            });
        // Restarted whatever happened, so that the run heals as after any other fault.
        nodes.spawn(&self.network, victim.0 as usize)?;
        nodes.wait_until_listening(victim.0 as usize)?;
        let took = resumed?;
        timeline.say(&format!(
            "every partition committed again {:.2} s after the kill; node {victim} restarted",
            took.as_secs_f64()
        ));
        Ok(took)
    }

    /// Inject one fault and heal it before returning; for `kill-master`, how long after the
    /// kill every partition committed again.
    fn inject(&self, kind: FaultKind, at: Injection<'_>) -> anyhow::Result<Option<Duration>> {
        let Injection {
            nodes,
            runtime,
            shared,
            rng,
            timeline,
        } = at;
        let n = nodes.len();
        let node = rng.random_range(0..n);
        let secs = |rng: &mut ChaCha8Rng, lo: f64, hi: f64| {
            Duration::from_secs_f64(rng.random_range(lo..=hi))
        };
        match kind {
            FaultKind::KillMaster => {
                let at = Injection {
                    nodes,
                    runtime,
                    shared,
                    rng,
                    timeline,
                };
                return self.kill_master(at).map(Some);
            }
            FaultKind::Kill => {
                let down = secs(rng, 0.2, 1.5);
                timeline.say(&format!("kill -9 node {node}, down for {down:.1?}"));
                nodes.kill(node);
                std::thread::sleep(down);
                nodes.spawn(&self.network, node)?;
                nodes.wait_until_listening(node)?;
                timeline.say(&format!("node {node} restarted"));
            }
            FaultKind::Pause => {
                let paused = secs(rng, 0.5, 3.0);
                timeline.say(&format!("SIGSTOP node {node} for {paused:.1?}"));
                nodes.pause(node);
                std::thread::sleep(paused);
                nodes.resume(node);
                timeline.say(&format!("SIGCONT node {node}"));
            }
            FaultKind::Clock => {
                let max = self.args.max_clock_offset_ms;
                let offset = rng.random_range(-max..=max);
                timeline.say(&format!(
                    "restart node {node} with its clock {offset:+} ms off"
                ));
                nodes.terminate(node);
                nodes.set_clock_offset(node, offset);
                nodes.spawn(&self.network, node)?;
                nodes.wait_until_listening(node)?;
            }
            FaultKind::RollingRestart => {
                timeline.say("rolling restart");
                for i in 0..n {
                    nodes.terminate(i);
                    nodes.spawn(&self.network, i)?;
                    nodes.wait_until_listening(i)?;
                    timeline.say(&format!("  node {i} restarted"));
                    std::thread::sleep(Duration::from_millis(500));
                }
            }
            FaultKind::PartitionMinority | FaultKind::PartitionRing | FaultKind::PartitionLink => {
                let cuts = partition_cuts(kind, n, rng);
                let held = secs(rng, 1.0, 4.0);
                timeline.say(&format!(
                    "{}: cut {} for {held:.1?}",
                    kind.name(),
                    cuts.iter()
                        .map(|(a, b)| format!("{a}-{b}"))
                        .collect::<Vec<_>>()
                        .join(" ")
                ));
                self.network.cut(&cuts)?;
                std::thread::sleep(held);
                self.network.heal()?;
                timeline.say("healed");
            }
        }
        Ok(None)
    }
}

/// The links a partition of `kind` cuts among `n` nodes.
fn partition_cuts(kind: FaultKind, n: usize, rng: &mut ChaCha8Rng) -> Vec<(usize, usize)> {
    let mut order: Vec<usize> = (0..n).collect();
    order.shuffle(rng);
    let pairs = |keep: &dyn Fn(usize, usize) -> bool| {
        let mut cuts = Vec::new();
        for i in 0..n {
            for j in i + 1..n {
                if !keep(i, j) {
                    cuts.push((order[i], order[j]));
                }
            }
        }
        cuts
    };
    match kind {
        FaultKind::PartitionMinority => {
            // The first `minority` nodes of the shuffled order are on their own.
            let minority = ((n - 1) / 2).max(1);
            pairs(&|i, j| (i < minority) == (j < minority))
        }
        FaultKind::PartitionRing if n > 3 => {
            // Around a ring, each node keeps the links to the `reach` nearest on each side, so
            // that it sees a majority (itself and 2 × reach ≥ n/2 + 1) but no two nodes see the
            // same one.
            let reach = (n / 2).div_ceil(2);
            pairs(&|i, j| {
                let d = j - i;
                d.min(n - d) <= reach
            })
        }
        // With 3 nodes a majorities ring is one cut link.
        _ => vec![(order[0], order[1])],
    }
}

/// One client: connect to `home` (or, while it is away, another node), run the workload's
/// transactions until told to stop, reconnect whenever an outcome was lost.
async fn run_client(shared: Arc<Shared>, home: NodeId, seed: u64) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let nodes = shared.cluster.placement.node_count() as u32;
    let mut away_since: Option<Instant> = None;
    let mut target = home;
    while !shared.stop.load(Ordering::SeqCst) {
        let transport = match shared.connect(target).await {
            Ok(t) => t,
            Err(_) => {
                let since = *away_since.get_or_insert_with(Instant::now);
                target = if since.elapsed() > HOME_PATIENCE {
                    NodeId(rng.random_range(0..nodes))
                } else {
                    home
                };
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        if target == home {
            away_since = None;
        }
        run_session(&shared, transport, home, &mut rng).await;
        shared.reconnects.fetch_add(1, Ordering::Relaxed);
        // Back to the home node first.
        target = home;
    }
}

/// Run transactions on one connection until an outcome is lost (the node may be gone) or the
/// run stops.
async fn run_session(shared: &Shared, transport: TcpTransport, home: NodeId, rng: &mut ChaCha8Rng) {
    let session = Session::recorded(transport, shared.recorder.clone()).with_form(shared.form);
    let mut runner = Runner::new(
        &session,
        DegreeChoice::Fixed(CHECK_SPECULATION),
        ChainRoom::AfterSpecCommit,
        RetryPolicy::NEVER,
        CommitStats::new(),
    );
    let mut seen = Seen {
        shared,
        lost: false,
    };
    while !shared.stop.load(Ordering::SeqCst) && !seen.lost {
        let procedure = shared.workload.next(home, rng);
        let started = session.transport().now();
        runner.run(procedure, started, &mut seen).await;
        let pause = THINK + Duration::from_micros(rng.random_range(0..=5_000));
        tokio::time::sleep(pause).await;
    }
    runner.resolve_all(&mut seen).await;
}

/// Counts outcomes and notices a lost one.
struct Seen<'a> {
    shared: &'a Shared,
    lost: bool,
}

impl RunObserver for Seen<'_> {
    fn committed(&mut self, _: &'static str, _: Duration, _: Duration, _: Duration) {
        self.shared.committed.fetch_add(1, Ordering::Relaxed);
    }

    fn aborted(&mut self, _: &'static str, reason: AbortReason, _: Duration, _: Duration) {
        self.shared.aborted.fetch_add(1, Ordering::Relaxed);
        // No answer in time, or a coordinator that no longer knows the transaction: the node
        // may have gone away, so the client connects again.
        if matches!(reason, AbortReason::Timeout | AbortReason::TransactionLost) {
            self.lost = true;
        }
    }

    fn unknown(&mut self, _: &'static str, _: Duration, _: Duration) {
        self.shared.unknown.fetch_add(1, Ordering::Relaxed);
        self.lost = true;
    }
}

/// Transactions writing every partition, coordinated by each of `coordinators` in turn, until
/// one commits: how long after `since` it did, or, once `bound` after `since` has passed, the
/// last attempt's error.
async fn commit_everywhere(
    shared: &Shared,
    coordinators: &[NodeId],
    since: Instant,
    bound: Duration,
) -> Result<Duration, String> {
    let mut last = String::from("no attempt");
    for node in coordinators.iter().cycle() {
        if since.elapsed() > bound {
            return Err(last);
        }
        match probe_every_partition(shared, *node).await {
            Ok(()) => return Ok(since.elapsed()),
            Err(e) => {
                last = format!("at node {node}: {e}");
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    }
    unreachable!("the coordinators are never empty")
}

/// One transaction, coordinated by `node`, writing a probe key in every partition. Its keys
/// (`P/nemesis-probe`) are outside every workload's, and its session is not recorded.
async fn probe_every_partition(shared: &Shared, node: NodeId) -> Result<(), String> {
    let placement = &shared.cluster.placement;
    let transport = shared.connect(node).await?;
    let session = Session::new(transport);
    let mut txn = session.begin(false).await.map_err(|e| e.to_string())?;
    for p in 0..placement.partition_count() {
        let key = Key::tagged(p as u32, b"nemesis-probe");
        txn.write(key, Some(node.to_string().into_bytes().into()))
            .map_err(|e| e.to_string())?;
    }
    txn.commit().await.map(|_| ()).map_err(|e| e.to_string())
}

/// After the heal: every node must coordinate a transaction writing to every partition within
/// `bound`. Returns how long the slowest took.
async fn recover(shared: &Shared, bound: Duration) -> Result<Duration, String> {
    let healed = Instant::now();
    let mut slowest = Duration::ZERO;
    for node in shared.cluster.placement.nodes() {
        let took = commit_everywhere(shared, &[node], healed, bound)
            .await
            .map_err(|last| {
                format!("node {node} did not commit within {bound:?} of the heal (last: {last})")
            })?;
        slowest = slowest.max(took);
    }
    Ok(slowest)
}

/// The keys the workload's transactions use: `accounts` accounts for `bank`, `keys` keys for
/// `list-append`, numbered and spread round-robin over the partitions as the workloads place
/// them.
fn workload_keys(name: &str, workload: &Arc<dyn Workload>, placement: &Placement) -> Vec<Key> {
    let setting = if name == "bank" { "accounts" } else { "keys" };
    let count = workload.settings()[setting].as_u64().unwrap_or(0);
    let partitions = placement.partition_count() as u32;
    (0..count).map(|i| key_among(partitions, i)).collect()
}

/// A read-only transaction coordinated by `node` over every key, recorded in the history
/// (named `scan` for `bank`, so the checker checks its total). Retried while it aborts.
async fn final_read(
    shared: &Shared,
    node: NodeId,
    keys: &[Key],
    workload: &str,
    after: Timestamp,
) -> Result<Vec<Option<String>>, String> {
    let name = if workload == "bank" { "scan" } else { "read" };
    let mut last = String::new();
    for _ in 0..20 {
        let attempt = async {
            let transport = shared.connect(node).await?;
            let session = Session::recorded(transport, shared.recorder.clone());
            if shared.form == RequestForm::OneShot {
                // Ordered after every transaction acknowledged before it (strictly
                // serializable), so it needs no snapshot to catch up.
                return observe_one_shot(session.with_form(RequestForm::OneShot), name, keys).await;
            }
            wait_for_snapshot(shared, node, after).await?;
            let mut txn = session
                .begin_named(name, true)
                .await
                .map_err(|e: TxnError| e.to_string())?;
            let mut values = Vec::with_capacity(keys.len());
            for key in keys {
                let value = txn.read(key).await.map_err(|e| e.to_string())?;
                values.push(value.map(|v| String::from_utf8_lossy(&v).into_owned()));
            }
            txn.commit().await.map_err(|e| e.to_string())?;
            Ok::<_, String>(values)
        };
        match attempt.await {
            Ok(values) => return Ok(values),
            Err(e) => {
                last = e;
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    }
    Err(last)
}

/// The final read as one one-shot transaction (the [`Observe`] procedure).
async fn observe_one_shot(
    session: Session<TcpTransport>,
    name: &'static str,
    keys: &[Key],
) -> Result<Vec<Option<String>>, String> {
    let mut observe = Observe::new(name, keys.to_vec());
    match run_once(&session, &mut observe).await {
        Outcome::Committed { .. } => Ok(observe
            .values()
            .into_iter()
            .map(|v| v.map(|v| String::from_utf8_lossy(&v).into_owned()))
            .collect()),
        other => Err(format!("the final read ended {other:?}")),
    }
}

/// Wait until `node` begins transactions at snapshots at or after `after` (on an unrecorded
/// session). Snapshot protocols read at their node's clock, and snapshot isolation promises no
/// real-time recency: a node whose clock runs behind (the `clock` fault) may rightly not show a
/// commit acknowledged a moment ago, which is not a lost commit.
async fn wait_for_snapshot(shared: &Shared, node: NodeId, after: Timestamp) -> Result<(), String> {
    let transport = shared.connect(node).await?;
    let session = Session::new(transport);
    let deadline = Instant::now() + SNAPSHOT_PATIENCE;
    loop {
        let txn = session.begin(true).await.map_err(|e| e.to_string())?;
        let snapshot = txn.snapshot();
        txn.abort().await;
        if snapshot >= after {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!(
                "node {node}'s snapshots stay before the last acknowledged commit ({snapshot} < {after}) for {SNAPSHOT_PATIENCE:?}"
            ));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// `bank`: every node's final balances add up to the opening total, none negative (an absent
/// account holds its opening balance).
fn check_bank_finals(
    history: &History,
    keys: &[Key],
    finals: &[(NodeId, Vec<Option<String>>)],
    failures: &mut Vec<String>,
) {
    let initial: i64 = history
        .header
        .settings
        .get("initial_balance")
        .and_then(|v| v.parse().ok())
        .unwrap_or(100);
    let expected = initial * keys.len() as i64;
    for (node, values) in finals {
        let mut total = 0i64;
        for (key, value) in keys.iter().zip(values) {
            match value.as_deref().map(str::parse::<i64>) {
                None => total += initial,
                Some(Ok(balance)) if balance >= 0 => total += balance,
                Some(_) => failures.push(format!(
                    "node {node}'s final read: account {key} holds {value:?}"
                )),
            }
        }
        if total != expected {
            failures.push(format!(
                "node {node}'s final balances add up to {total}, not {expected}"
            ));
        }
    }
}

/// `list-append`: every element a committed append added is in every node's final list of its
/// key, and no element of an aborted append is.
fn check_list_finals(
    history: &History,
    keys: &[Key],
    finals: &[(NodeId, Vec<Option<String>>)],
    failures: &mut Vec<String>,
) {
    // The element each write appended: the last of the list it wrote.
    let mut committed: BTreeMap<&str, BTreeSet<u64>> = BTreeMap::new();
    let mut aborted: BTreeMap<&str, BTreeSet<u64>> = BTreeMap::new();
    for txn in &history.txns {
        let into = match txn.outcome {
            RecordedOutcome::Committed { .. } => &mut committed,
            RecordedOutcome::Aborted { .. } => &mut aborted,
            RecordedOutcome::Unknown => continue,
        };
        for op in &txn.ops {
            if let Op::Write {
                key,
                value: Some(list),
            } = op
                && let Some(Ok(element)) = list.split_ascii_whitespace().last().map(str::parse)
            {
                into.entry(key.as_str()).or_default().insert(element);
            }
        }
    }
    for (node, values) in finals {
        let mut lost = Vec::new();
        let mut resurrected = Vec::new();
        for (key, value) in keys.iter().zip(values) {
            let printed = key.to_string();
            let have: BTreeSet<u64> = value
                .as_deref()
                .unwrap_or("")
                .split_ascii_whitespace()
                .filter_map(|e| e.parse().ok())
                .collect();
            if let Some(elements) = committed.get(printed.as_str()) {
                lost.extend(elements.difference(&have).map(|e| format!("{printed}:{e}")));
            }
            if let Some(elements) = aborted.get(printed.as_str()) {
                resurrected.extend(
                    elements
                        .intersection(&have)
                        .map(|e| format!("{printed}:{e}")),
                );
            }
        }
        if !lost.is_empty() {
            failures.push(format!(
                "node {node}'s final read misses {} acknowledged appends: {}",
                lost.len(),
                lost.join(" ")
            ));
        }
        if !resurrected.is_empty() {
            failures.push(format!(
                "node {node}'s final read holds {} appends of aborted transactions: {}",
                resurrected.len(),
                resurrected.join(" ")
            ));
        }
    }
}

/// The fault timeline: printed as it happens and kept in a file.
struct Timeline {
    origin: Instant,
    file: std::fs::File,
}

impl Timeline {
    fn new(path: &Path) -> anyhow::Result<Timeline> {
        Ok(Timeline {
            origin: Instant::now(),
            file: std::fs::File::create(path)?,
        })
    }

    /// Print `what` with the time since the run began, and keep it.
    fn say(&mut self, what: &str) {
        let line = format!("{:>7.2} s  {what}", self.origin.elapsed().as_secs_f64());
        eprintln!("{line}");
        let _ = writeln!(self.file, "{line}");
    }

    /// Keep `what` without printing it.
    fn record(&mut self, what: &str) {
        let _ = writeln!(self.file, "{what}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn faults_parse_and_partitions_need_a_network_that_can_cut() {
        assert_eq!(
            parse_faults("all", true, true).unwrap().len(),
            FAULT_KINDS.len()
        );
        assert!(
            !parse_faults("all", true, false)
                .unwrap()
                .contains(&FaultKind::KillMaster)
        );
        let e = parse_faults("kill-master", true, false).unwrap_err();
        assert!(e.contains("fail over"), "{e}");
        assert!(
            parse_faults("all", false, true)
                .unwrap()
                .iter()
                .all(|k| !k.is_partition())
        );
        assert_eq!(
            parse_faults("kill,pause,kill", false, true).unwrap(),
            vec![FaultKind::Kill, FaultKind::Pause]
        );
        let e = parse_faults("partition-link", false, true).unwrap_err();
        assert!(e.contains("needs --network netns"), "{e}");
        let e = parse_faults("meteor", true, true).unwrap_err();
        assert!(
            e.contains("valid faults: all, kill, kill-master, pause"),
            "{e}"
        );
    }

    #[test]
    fn partitions_cut_what_they_say() {
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        for n in 3..=7 {
            let cuts = partition_cuts(FaultKind::PartitionMinority, n, &mut rng);
            let minority = ((n - 1) / 2).max(1);
            assert_eq!(cuts.len(), minority * (n - minority), "n={n}");
            let link = partition_cuts(FaultKind::PartitionLink, n, &mut rng);
            assert_eq!(link.len(), 1);
            // A majorities ring: every node keeps links to a majority (itself included), and
            // no two nodes keep the same set.
            let ring = partition_cuts(FaultKind::PartitionRing, n, &mut rng);
            assert!(!ring.is_empty(), "n={n}");
            let sees = |i: usize| -> BTreeSet<usize> {
                (0..n)
                    .filter(|&j| j == i || !ring.contains(&(i, j)) && !ring.contains(&(j, i)))
                    .collect()
            };
            for i in 0..n {
                assert!(sees(i).len() > n / 2, "n={n}: node {i} sees {:?}", sees(i));
            }
            if n > 3 {
                let views: BTreeSet<_> = (0..n).map(sees).collect();
                assert_eq!(views.len(), n, "n={n}: {ring:?}");
            }
        }
    }
}
