//! `augur bench`'s options and their validated form: the command line ([`BenchArgs`]), each
//! protocol entry ([`ProtocolSpec`]) and the configuration a run is made from
//! ([`BenchConfig`]), echoed into `summary.json`. Everything else in `bench` builds on this.

use crate::BadInput;
use crate::peers;
use augur_client::Degree;
use augur_contract::ProtocolOptions;
use augur_contract::log_policy::LogPolicy;
use augur_protocols::registry::{self, ProtocolInfo};
use augur_runtime::sim::CpuModel;
use augur_runtime::{wal, wal::LogConfig};
use augur_types::{LatencyProfile, Layout, NodeId, Placement, RequestForm};
use clap::{Args, ValueEnum};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// What runs the benchmark's cluster.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Runtime {
    /// Every node a task of this process; messages delayed by the latency matrix.
    Inproc,
    /// Every node an `augur node` process on loopback; clients over TCP.
    Tcp,
    /// The deterministic simulator, in virtual time, with a CPU model (`--set sim.KEY=VALUE`):
    /// results are modelled, not measured.
    Sim,
    /// A cluster already running, named by `--cluster FILE` (not a `--runtime` value).
    #[value(skip)]
    Cluster,
}

#[derive(Args, Clone, Debug)]
pub struct BenchArgs {
    /// Protocols to compare, comma-separated; ratios are relative to the first. An entry may
    /// carry its own settings as `NAME:KEY=VALUE[:KEY=VALUE...]`: `speculation=DEGREE`, or a
    /// protocol setting (e.g. `clocksi-rep:precise_clock=on`); the entry as written names its
    /// results.
    #[arg(long, value_delimiter = ',', default_value = "nocc,clocksi-rep")]
    pub protocol: Vec<String>,
    /// How much the clients of speculating protocols (str, planet) speculate: `none`, `reads`,
    /// `commits:N`, `reads+commits:N` (N unresolved speculative commits per client, 1 to 8),
    /// `auto` (STR's self-tuner picks among the degrees the protocol offers) or `auto:DEGREE`
    /// (it picks among the degrees up to DEGREE; `auto:reads` is the paper's STR-Internal).
    /// Default: each protocol's own (`auto` for str, `commits:1` for planet). Other protocols
    /// never speculate.
    #[arg(long)]
    pub speculation: Option<String>,
    /// With `auto` speculation: seconds the self-tuner measures each degree for.
    #[arg(long, default_value_t = 1.0)]
    pub tune_interval: f64,
    /// How clients submit transactions: `interactive` (one request per read, then the commit)
    /// or `one-shot` (the whole transaction, a registered procedure and its arguments, in one
    /// request, run at the coordinator). Default: one-shot where the protocol serves it. An
    /// entry may choose its own (`nocc:txn_form=interactive`).
    #[arg(long)]
    pub txn_form: Option<String>,
    /// Workload to run.
    #[arg(long, default_value = "synthetic-str")]
    pub workload: String,
    /// Measured seconds per protocol (after warm-up) [default: 10]. With `--config`, replaces
    /// the file's.
    #[arg(long)]
    pub duration: Option<f64>,
    /// Warm-up seconds per protocol, excluded from the results [default: 2]. With `--config`,
    /// replaces the file's.
    #[arg(long)]
    pub warmup: Option<f64>,
    /// Nodes in the cluster.
    #[arg(long, default_value_t = 3)]
    pub nodes: usize,
    /// Data centres (the first D of the latency profile); default: as many as the profile has,
    /// capped at the node count.
    #[arg(long)]
    pub dcs: Option<usize>,
    /// Latency profile: lan, 3dc, ec2-9dc.
    #[arg(long, default_value = "lan")]
    pub latency: String,
    /// Replicas per partition (master included); default min(3, nodes).
    #[arg(long)]
    pub replication: Option<usize>,
    /// How partitions are laid out over the nodes: `ring` (partition i mastered by node i) or
    /// `hash` (consistent hashing; `hash:partitions=N:vnodes=V`). With `--runtime tcp` it goes
    /// into the cluster file, so every node builds the same placement.
    #[arg(long, default_value = "ring")]
    pub placement: String,
    /// Closed-loop clients per node.
    #[arg(long, default_value_t = 8)]
    pub clients: usize,
    /// The nodes clients connect to, `--clients` each, as a comma-separated list of node ids
    /// (e.g. `0`: every client on node 0, as terminals on one database); every node when not
    /// given.
    #[arg(long, value_delimiter = ',')]
    pub client_nodes: Option<Vec<u32>>,
    /// Seed for every random choice of the run.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Directory for summary.json (and, with `--runtime tcp`, the cluster file and node logs).
    #[arg(long, default_value = "bench-results")]
    pub out: PathBuf,
    /// Workload settings (`key=value`), protocol settings as `protocol.key=value`, and with
    /// `--runtime sim` the CPU model as `sim.key=value` (`sim.cores`, `sim.cost.*`).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// What runs the nodes: `inproc` (default), `tcp`, or `sim` (virtual time, CPU model;
    /// modelled results). With `--config`, overrides the file's.
    #[arg(long, alias = "transport", value_enum)]
    pub runtime: Option<Runtime>,
    /// Record every transaction attempt and write the history here as JSON lines (with several
    /// protocols, `-PROTOCOL` is added before the extension). `augur check --input FILE` checks
    /// it.
    #[arg(long)]
    pub history: Option<PathBuf>,
    /// Keep the nodes' write-ahead logs here, one subdirectory per protocol entry (emptied
    /// first: every run starts from an empty store). Without it, `log=off` runs keep their logs
    /// in memory and `log=always`/`batch` runs write under `OUT/data/`.
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
    /// Open loop: the target rate of transactions per second over all clients, with Poisson
    /// arrivals; latency is measured from each transaction's intended start, so a backlog shows
    /// up as latency. Without it, clients run a closed loop.
    #[arg(long)]
    pub rate: Option<f64>,
    /// Closed loop: mean think time in milliseconds between a client's transactions
    /// (exponentially distributed).
    #[arg(long, default_value_t = 0.0)]
    pub think_ms: f64,
    /// Milliseconds a client may wait before retrying an aborted transaction the first time:
    /// randomized exponential backoff draws each wait uniformly from zero to a bound that starts
    /// here and doubles with every further abort of the transaction (0: retry at once).
    #[arg(long, default_value_t = DEFAULT_BACKOFF_BASE_MS)]
    pub backoff_base_ms: f64,
    /// The largest bound, in milliseconds, the backoff before a retry is drawn under.
    #[arg(long, default_value_t = DEFAULT_BACKOFF_CAP_MS)]
    pub backoff_cap_ms: f64,
    /// Run the experiment described by this TOML file (see `experiments/README.md`) instead;
    /// `--out` still chooses where results go.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// With `--config`: a quick pass that only shows every run works (1 s per protocol, longer
    /// on a WAN, the first two points of a sweep; a protocol that commits nothing fails it).
    #[arg(long, requires = "config")]
    pub smoke: bool,
    /// With `--config`: run only these runs of the file (by name, comma-separated).
    #[arg(long, requires = "config", value_delimiter = ',')]
    pub only: Vec<String>,
    /// With `--config`: sweep over these values instead of the file's (comma-separated).
    #[arg(long, requires = "config", value_delimiter = ',')]
    pub sweep_values: Vec<String>,
    /// The PostgreSQL server for `--protocol postgres-serializable` / `postgres-repeatable-read`
    /// (libpq key=value form; `scripts/postgres.sh start` prints it).
    #[arg(long, default_value = augur_postgres::DEFAULT_URL)]
    pub pg_url: String,
    /// Run against this already-running cluster (its cluster file) instead of starting one: the
    /// protocol, nodes, replication, placement and latency profile are the cluster's, and any of those
    /// flags that disagrees with it is refused.
    #[arg(long)]
    pub cluster: Option<PathBuf>,
    /// After the measurement, evaluate the workload's consistency conditions on one consistent
    /// snapshot, record them in `summary.json` under `checks`, and exit non-zero on a violation.
    #[arg(long)]
    pub check: bool,
}

/// How the clients of one protocol speculate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SpeculationMode {
    /// Always this degree.
    Fixed(Degree),
    /// STR's self-tuner picks among these degrees (a ladder of increasing speculation).
    Auto { reads: bool, max_chain: u32 },
}

impl SpeculationMode {
    /// The degrees the clients may use.
    pub fn ladder(self) -> Vec<Degree> {
        match self {
            SpeculationMode::Fixed(d) => vec![d],
            SpeculationMode::Auto { reads, max_chain } => Degree::ladder(reads, max_chain),
        }
    }

    /// Parse `mode` for protocol `info`, refusing what the protocol does not offer: a degree,
    /// `auto` (tune over every degree offered), or `auto:DEGREE` (tune over the degrees up to
    /// DEGREE: `auto:reads` is STR-Internal, choosing between none and speculative reads).
    fn parse(mode: &str, info: &ProtocolInfo) -> Result<SpeculationMode, String> {
        let offered = info.speculation;
        let (reads, max_chain) = offered.map_or((false, 0), |o| (o.reads, o.max_chain));
        if mode == "auto" {
            return Ok(SpeculationMode::Auto { reads, max_chain });
        }
        let (auto, degree) = match mode.strip_prefix("auto:") {
            Some(top) => (true, top),
            None => (false, mode),
        };
        let degree: Degree = degree.parse()?;
        if (degree.reads && !reads) || degree.chain > max_chain {
            let offers = match offered {
                None => "does not speculate".to_string(),
                Some(_) => format!(
                    "offers up to {}",
                    Degree::ladder(reads, max_chain).last().expect("a ladder")
                ),
            };
            return Err(format!(
                "speculation '{degree}' is more than {} {offers}",
                info.name
            ));
        }
        if auto {
            return Ok(SpeculationMode::Auto {
                reads: degree.reads,
                max_chain: degree.chain,
            });
        }
        Ok(SpeculationMode::Fixed(degree))
    }
}

impl std::fmt::Display for SpeculationMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SpeculationMode::Fixed(d) => d.fmt(f),
            SpeculationMode::Auto { reads, max_chain } => {
                let top = Degree {
                    reads: *reads,
                    chain: *max_chain,
                };
                write!(f, "auto:{top}")
            }
        }
    }
}

impl serde::Serialize for SpeculationMode {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// One entry of `--protocol`: the protocol, its settings, its clients' speculation and the
/// form they submit transactions in.
#[derive(Clone, Debug, serde::Serialize)]
pub struct ProtocolSpec {
    /// The entry as written, which names its results.
    pub label: String,
    pub name: String,
    pub options: ProtocolOptions,
    pub speculation: SpeculationMode,
    pub txn_form: RequestForm,
    /// Where this entry's cluster runs, if the entry says (`NAME:transport=tcp`); otherwise
    /// the run's `--runtime`.
    pub runtime: Option<Runtime>,
}

/// The entry setting that chooses the request form (`NAME:txn_form=one-shot`).
pub const TXN_FORM_SETTING: &str = "txn_form";

/// The entry setting that chooses where the entry's cluster runs (`NAME:transport=tcp`), so
/// that one run can compare the same protocol in process and over TCP.
pub const TRANSPORT_SETTING: &str = "transport";

fn transport(value: &str) -> anyhow::Result<Runtime> {
    match value {
        "inproc" => Ok(Runtime::Inproc),
        "tcp" => Ok(Runtime::Tcp),
        other => Err(bad(format!(
            "unknown transport '{other}'; valid: inproc, tcp"
        ))),
    }
}

/// The form `given` names (default: one-shot if `forms` has it), if `forms` has it.
fn txn_form(
    given: Option<&str>,
    forms: &[RequestForm],
    protocol: &str,
) -> anyhow::Result<RequestForm> {
    let form = match given {
        None if forms.contains(&RequestForm::OneShot) => return Ok(RequestForm::OneShot),
        None => return Ok(RequestForm::Interactive),
        Some(name) => RequestForm::parse(name).ok_or_else(|| {
            bad(format!(
                "unknown transaction form '{name}'; valid forms: interactive, one-shot"
            ))
        })?,
    };
    if !forms.contains(&form) {
        let served: Vec<String> = forms.iter().map(ToString::to_string).collect();
        return Err(bad(format!(
            "{protocol} does not serve {form} transactions (it serves: {})",
            served.join(", ")
        )));
    }
    Ok(form)
}

impl ProtocolSpec {
    /// Parse `NAME[:KEY=VALUE...]`; `speculation` is the run's `--speculation`, and
    /// `protocol_settings` the run's `--set protocol.KEY=VALUE`s, which the entry's own
    /// settings override.
    fn parse(
        entry: &str,
        speculation: Option<&str>,
        form: Option<&str>,
        protocol_settings: &BTreeMap<String, String>,
    ) -> anyhow::Result<ProtocolSpec> {
        let mut parts = entry.split(':');
        let name = parts.next().unwrap_or_default().trim().to_string();
        // KEY=VALUE pairs; a part without '=' continues the previous value, since values may
        // hold colons themselves (`speculation=reads+commits:2`).
        let mut pairs: Vec<(String, String)> = Vec::new();
        for part in parts {
            match (part.split_once('='), pairs.last_mut()) {
                (Some((k, v)), _) => pairs.push((k.to_string(), v.to_string())),
                (None, Some((_, v))) => {
                    v.push(':');
                    v.push_str(part);
                }
                (None, None) => {
                    return Err(bad(format!(
                        "protocol entry '{entry}': expected NAME:KEY=VALUE, got '{part}'"
                    )));
                }
            }
        }
        let mut settings = protocol_settings.clone();
        let mut speculation = speculation.map(str::to_string);
        let mut own_speculation = false;
        let mut form = form.map(str::to_string);
        let mut runtime = None;
        for (k, v) in pairs {
            if k == TRANSPORT_SETTING {
                runtime = Some(transport(&v)?);
            } else if k == "speculation" {
                speculation = Some(v);
                own_speculation = true;
            } else if k == TXN_FORM_SETTING {
                form = Some(v);
            } else {
                settings.insert(k, v);
            }
        }
        let label = entry.trim().to_string();
        if let Some(peer) = peers::peer(&name) {
            let txn_form = txn_form(form.as_deref(), peer.forms, &name)?;
            if !settings.is_empty() || own_speculation {
                return Err(bad(format!(
                    "{name} takes no settings (entry '{entry}'); configure PostgreSQL itself"
                )));
            }
            return Ok(ProtocolSpec {
                label,
                name,
                options: ProtocolOptions::default(),
                speculation: SpeculationMode::Fixed(Degree::NONE),
                txn_form,
                runtime,
            });
        }
        let info = registry::info(&name).map_err(|e| {
            bad(format!(
                "{e}, and the PostgreSQL peers postgres-serializable, postgres-repeatable-read"
            ))
        })?;
        info.validate_settings(&settings)
            .map_err(|e| bad(e.to_string()))?;
        let txn_form = txn_form(form.as_deref(), info.forms, &name)?;
        // Benchmarks measure the protocol, not the disk, unless asked to (and say which).
        settings
            .entry(wal::LOG_SETTING.to_string())
            .or_insert_with(|| LogPolicy::Off.to_string());
        let speculation = match (speculation, info.speculation) {
            // Protocols that never speculate ignore the run's --speculation.
            (_, None) if !own_speculation => SpeculationMode::Fixed(Degree::NONE),
            (Some(mode), _) => {
                SpeculationMode::parse(&mode, info).map_err(|e| bad(format!("{entry}: {e}")))?
            }
            (None, Some(offered)) => SpeculationMode::parse(offered.default, info)
                .expect("a protocol's default speculation is valid"),
            (None, None) => SpeculationMode::Fixed(Degree::NONE),
        };
        Ok(ProtocolSpec {
            label,
            name,
            options: ProtocolOptions {
                settings,
                ..ProtocolOptions::default()
            },
            speculation,
            txn_form,
            runtime,
        })
    }

    /// Where this entry runs in a run whose `--runtime` is `run_wide`.
    pub fn runtime(&self, run_wide: Runtime) -> Runtime {
        self.runtime.unwrap_or(run_wide)
    }
}

/// A validated benchmark configuration, echoed into `summary.json`.
#[derive(Clone, serde::Serialize)]
pub struct BenchConfig {
    pub protocols: Vec<ProtocolSpec>,
    pub workload: String,
    pub workload_settings: serde_json::Value,
    pub duration_s: f64,
    pub warmup_s: f64,
    pub nodes: usize,
    pub dcs: Vec<String>,
    pub latency: String,
    pub replication: usize,
    /// How partitions are laid out (`ring`, `hash`, ...), and how many there are.
    #[serde(rename = "placement")]
    pub layout: Layout,
    pub partitions: usize,
    pub clients_per_node: usize,
    /// The nodes the clients connect to (`--client-nodes`; every node by default).
    pub client_nodes: Vec<NodeId>,
    pub seed: u64,
    pub runtime: Runtime,
    /// With `--runtime sim`: the CPU model (`None`: unlimited cores).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_model: Option<CpuModel>,
    /// With `auto` speculation: seconds the self-tuner measures each degree for.
    pub tune_interval_s: f64,
    #[serde(skip)]
    pub placement: Arc<Placement>,
    /// The `--set` workload settings as given, to build a fresh workload for each protocol.
    #[serde(skip)]
    pub workload_given: BTreeMap<String, String>,
    #[serde(skip)]
    pub out: PathBuf,
    #[serde(skip)]
    pub history: Option<PathBuf>,
    #[serde(skip)]
    pub data_dir: Option<PathBuf>,
    pub check: bool,
    pub pg_url: String,
    /// With `--cluster`: the running cluster's file.
    pub cluster: Option<PathBuf>,
    /// Open-loop target rate over all clients (transactions per second), if any.
    pub rate: Option<f64>,
    pub think_ms: f64,
    /// The retry backoff's first bound and its cap, in milliseconds.
    pub backoff_base_ms: f64,
    pub backoff_cap_ms: f64,
}

fn bad(msg: impl Into<String>) -> anyhow::Error {
    BadInput(msg.into()).into()
}

/// `--placement`'s value, or a one-line error naming the valid ones.
fn parse_layout(spec: &str) -> anyhow::Result<Layout> {
    spec.parse()
        .map_err(|e: augur_types::PlacementError| bad(e.to_string()))
}

impl BenchArgs {
    /// Check every argument and build the configuration; errors name the valid choices.
    pub fn validate(&self) -> anyhow::Result<BenchConfig> {
        if self.protocol.is_empty() {
            return Err(bad("--protocol needs at least one protocol"));
        }
        if !(self.tune_interval > 0.0 && self.tune_interval.is_finite()) {
            return Err(bad("--tune-interval must be a positive number of seconds"));
        }
        let duration = self.duration.unwrap_or(DEFAULT_DURATION_S);
        if !(duration > 0.0 && duration.is_finite()) {
            return Err(bad("--duration must be a positive number of seconds"));
        }
        let warmup = self.warmup.unwrap_or(DEFAULT_WARMUP_S);
        if !(warmup >= 0.0 && warmup.is_finite()) {
            return Err(bad("--warmup must be zero or more seconds"));
        }
        if self.clients == 0 {
            return Err(bad("--clients must be at least 1"));
        }
        if let Some(rate) = self.rate
            && !(rate > 0.0 && rate.is_finite())
        {
            return Err(bad(
                "--rate must be a positive number of transactions per second",
            ));
        }
        if !(self.think_ms >= 0.0 && self.think_ms.is_finite()) {
            return Err(bad("--think-ms must be zero or more milliseconds"));
        }
        if self.rate.is_some() && self.think_ms > 0.0 {
            return Err(bad(
                "--think-ms applies to the closed loop; with --rate arrivals are Poisson",
            ));
        }
        if !(self.backoff_base_ms >= 0.0 && self.backoff_base_ms.is_finite()) {
            return Err(bad(
                "--backoff-base-ms must be zero (retry at once) or more milliseconds",
            ));
        }
        if !(self.backoff_cap_ms >= self.backoff_base_ms
            && Duration::try_from_secs_f64(self.backoff_cap_ms / 1000.0).is_ok())
        {
            return Err(bad(format!(
                "--backoff-cap-ms must be at least --backoff-base-ms ({} ms)",
                self.backoff_base_ms
            )));
        }
        let running = match &self.cluster {
            Some(path) => Some(self.against(path)?),
            None => None,
        };
        let (placement, protocol_entries, latency) = match &running {
            Some(cluster) => (
                cluster.placement.clone(),
                vec![cluster.protocol.name.to_string()],
                cluster.placement.profile().name.clone(),
            ),
            None => {
                let profile =
                    LatencyProfile::named(&self.latency).map_err(|e| bad(e.to_string()))?;
                let dcs = self.dcs.unwrap_or(profile.dcs.len().min(self.nodes.max(1)));
                let profile = profile.truncated(dcs).map_err(|e| bad(e.to_string()))?;
                // Protocols that replicate the whole database to every node default to it.
                let full = !self.protocol.is_empty()
                    && self.protocol.iter().all(|entry| {
                        let name = entry.split(':').next().unwrap_or(entry);
                        registry::info(name).is_ok_and(|info| info.full_replication())
                    });
                let replication = self.replication.unwrap_or(if full {
                    self.nodes
                } else {
                    self.nodes.clamp(1, 3)
                });
                let layout = parse_layout(&self.placement)?;
                let placement = Placement::build(layout, profile, self.nodes, replication)
                    .map_err(|e| bad(e.to_string()))?;
                (
                    Arc::new(placement),
                    self.protocol.clone(),
                    self.latency.clone(),
                )
            }
        };
        let profile = placement.profile().clone();
        let replication = placement.replication_factor();
        let mut workload_settings = BTreeMap::new();
        let mut protocol_settings = BTreeMap::new();
        let mut sim_settings = BTreeMap::new();
        for kv in &self.set {
            let Some((k, v)) = kv.split_once('=') else {
                return Err(bad(format!("--set expects KEY=VALUE, got '{kv}'")));
            };
            if let Some(pk) = k.strip_prefix("protocol.") {
                protocol_settings.insert(pk.to_string(), v.to_string());
            } else if let Some(sk) = k.strip_prefix("sim.") {
                sim_settings.insert(sk.to_string(), v.to_string());
            } else {
                workload_settings.insert(k.to_string(), v.to_string());
            }
        }
        let client_nodes: Vec<NodeId> = match &self.client_nodes {
            None => placement.nodes().collect(),
            Some(ids) => {
                if ids.is_empty() {
                    return Err(bad("--client-nodes names no node"));
                }
                let mut nodes = Vec::new();
                for id in ids {
                    if *id as usize >= placement.node_count() {
                        return Err(bad(format!(
                            "--client-nodes names node {id}, but the cluster has nodes 0 to {}",
                            placement.node_count() - 1
                        )));
                    }
                    if !nodes.contains(&NodeId(*id)) {
                        nodes.push(NodeId(*id));
                    }
                }
                nodes
            }
        };
        let runtime = match running {
            Some(_) => Runtime::Cluster,
            None => self.runtime.unwrap_or(Runtime::Inproc),
        };
        let cpu_model = match runtime {
            Runtime::Sim if self.data_dir.is_some() => {
                return Err(bad(
                    "--data-dir: the simulator keeps every node's log in memory (its syncs take \
                     modelled time); drop --data-dir or use --runtime inproc",
                ));
            }
            Runtime::Sim => CpuModel::from_settings(&sim_settings).map_err(bad)?,
            _ if !sim_settings.is_empty() => {
                return Err(bad(
                    "sim.* settings describe the simulator's CPU model: they need --runtime sim",
                ));
            }
            _ => None,
        };
        let mut protocols: Vec<ProtocolSpec> = Vec::new();
        for entry in &protocol_entries {
            let spec = ProtocolSpec::parse(
                entry,
                self.speculation.as_deref(),
                self.txn_form.as_deref(),
                &protocol_settings,
            )?;
            // A setting naming a node must name one of this cluster's.
            if let Ok(info) = registry::info(&spec.name) {
                info.validate_for_cluster(
                    &spec.options.settings,
                    placement.node_count(),
                    placement.replication_factor(),
                )
                .map_err(|e| bad(format!("{entry}: {e}")))?;
            }
            if protocols.iter().any(|p| p.label == spec.label) {
                return Err(bad(format!("--protocol lists '{}' twice", spec.label)));
            }
            protocols.push(spec);
        }
        let workload =
            augur_workloads::build(&self.workload, &workload_settings, placement.clone())
                .map_err(|e| bad(e.to_string()))?;
        match workload.audit() {
            None if self.check => {
                return Err(bad(format!(
                    "--check: workload {} has no consistency conditions",
                    self.workload
                )));
            }
            // An audit with no one-shot call can only run interactively.
            Some(audit) if self.check && audit.call().is_none() => {
                for spec in &protocols {
                    if registry::info(&spec.name).is_ok_and(|info| info.reads_only_one_shot()) {
                        return Err(bad(format!(
                            "--check: the {} audit runs only interactively, and {} takes only \
                             one-shot transactions that read",
                            self.workload, spec.label
                        )));
                    }
                }
            }
            _ => {}
        }
        Ok(BenchConfig {
            protocols,
            workload: self.workload.clone(),
            workload_settings: workload.settings(),
            duration_s: duration,
            warmup_s: warmup,
            nodes: placement.node_count(),
            dcs: profile.dcs.clone(),
            latency,
            replication,
            layout: placement.layout(),
            partitions: placement.partition_count(),
            clients_per_node: self.clients,
            client_nodes,
            seed: self.seed,
            runtime,
            cpu_model,
            tune_interval_s: self.tune_interval,
            placement,
            workload_given: workload_settings,
            out: self.out.clone(),
            history: self.history.clone(),
            data_dir: self.data_dir.clone(),
            check: self.check,
            pg_url: self.pg_url.clone(),
            cluster: self.cluster.clone(),
            rate: self.rate,
            think_ms: self.think_ms,
            backoff_base_ms: self.backoff_base_ms,
            backoff_cap_ms: self.backoff_cap_ms,
        })
    }
}

impl BenchConfig {
    /// The clients' backoff between an aborted attempt and the next, drawn from the run's seed.
    pub fn backoff(&self) -> augur_client::Backoff {
        augur_client::Backoff {
            base: Duration::from_secs_f64(self.backoff_base_ms / 1000.0),
            cap: Duration::from_secs_f64(self.backoff_cap_ms / 1000.0),
            seed: self.seed,
        }
    }
}

/// Measured seconds per protocol when `--duration` is not given.
const DEFAULT_DURATION_S: f64 = 10.0;
/// Warm-up seconds per protocol when `--warmup` is not given.
const DEFAULT_WARMUP_S: f64 = 2.0;
/// `--backoff-base-ms` when not given: about one attempt on the `lan` profile (p50 0.07 to
/// 0.9 ms across protocols), so that a second conflicting client's retry usually lands after the
/// first one's. Measured in the simulator (2 s after a 1 s warm-up) against 0.1, 0.5 and 1 ms:
/// it ends the livelocks of two OCC clients on ten `ycsb-t` keys and of `sss` and `rococo` on
/// `rubis` as well as 0.5 ms does, and costs less where retries at once did well (`smallbank`
/// under `2pl` −2% against −3%, `walter` on `rubis` −22% against −26%); 0.1 ms with a 5 ms cap
/// leaves `sss` aborting 46% of its attempts.
const DEFAULT_BACKOFF_BASE_MS: f64 = 0.25;
/// `--backoff-cap-ms` when not given: enough doublings (seven) to spread a crowd of clients
/// retrying one hot `rubis` item under `sss` (5 ms left it at 30–46% aborts, 20 ms at 23%),
/// and still short beside a measurement window of seconds.
const DEFAULT_BACKOFF_CAP_MS: f64 = 20.0;

impl BenchArgs {
    /// Every option at its default, as `augur bench` alone parses them.
    pub fn defaults() -> BenchArgs {
        #[derive(clap::Parser)]
        struct Defaults {
            #[command(flatten)]
            args: BenchArgs,
        }
        <Defaults as clap::Parser>::parse_from(["bench"]).args
    }

    /// The run flags given beside `--config`, which an experiment file sets itself, so that
    /// they would be ignored (flags left at their defaults count as not given). With `--config`
    /// only `--out`, `--smoke`, `--only`, `--sweep-values`, `--runtime` and `--set sim.*` apply.
    pub fn flags_beside_config(&self) -> Vec<&'static str> {
        let d = BenchArgs::defaults();
        let mut given = Vec::new();
        macro_rules! note {
            ($($field:ident => $flag:literal),* $(,)?) => {
                $(if self.$field != d.$field {
                    given.push($flag);
                })*
            };
        }
        note!(
            protocol => "--protocol",
            speculation => "--speculation",
            tune_interval => "--tune-interval",
            txn_form => "--txn-form",
            workload => "--workload",
            nodes => "--nodes",
            dcs => "--dcs",
            latency => "--latency",
            replication => "--replication",
            placement => "--placement",
            clients => "--clients",
            seed => "--seed",
            history => "--history",
            data_dir => "--data-dir",
            rate => "--rate",
            think_ms => "--think-ms",
            backoff_base_ms => "--backoff-base-ms",
            backoff_cap_ms => "--backoff-cap-ms",
            pg_url => "--pg-url",
            cluster => "--cluster",
            check => "--check",
        );
        if self.set.iter().any(|kv| !kv.starts_with("sim.")) {
            given.push("--set (other than sim.*)");
        }
        given
    }

    /// The running cluster of `--cluster`, once the flags are checked against it: flags that
    /// describe the cluster may be left out, or agree with it.
    fn against(&self, path: &std::path::Path) -> anyhow::Result<crate::cluster::Cluster> {
        let cluster = crate::cluster::Cluster::load(path)?;
        let placement = &cluster.placement;
        let file = path.display();
        let disagree = |flag: &str, given: String, theirs: String| {
            bad(format!(
                "--cluster {file}: the cluster has {flag} {theirs}; drop --{flag} {given}"
            ))
        };
        if let Some(runtime) = self.runtime {
            return Err(bad(format!(
                "--cluster runs against a running cluster: --runtime {runtime:?} does not apply"
            )));
        }
        if self.data_dir.is_some() {
            return Err(bad(
                "--cluster: the nodes keep their own data; drop --data-dir",
            ));
        }
        // Flags left at their defaults are taken as not given.
        let defaults = BenchArgs::defaults();
        if self.nodes != defaults.nodes && self.nodes != placement.node_count() {
            let n = placement.node_count().to_string();
            return Err(disagree("nodes", self.nodes.to_string(), n));
        }
        if let Some(rf) = self.replication
            && rf != placement.replication_factor()
        {
            let theirs = placement.replication_factor().to_string();
            return Err(disagree("replication", rf.to_string(), theirs));
        }
        if self.placement != defaults.placement
            && parse_layout(&self.placement)? != placement.layout()
        {
            let theirs = placement.layout().to_string();
            return Err(disagree("placement", self.placement.clone(), theirs));
        }
        if self.latency != defaults.latency && self.latency != placement.profile().name {
            let theirs = placement.profile().name.clone();
            return Err(disagree("latency", self.latency.clone(), theirs));
        }
        if self.protocol != defaults.protocol && self.protocol != [cluster.protocol.name] {
            return Err(disagree(
                "protocol",
                self.protocol.join(","),
                cluster.protocol.name.to_string(),
            ));
        }
        Ok(cluster)
    }
}

/// Where and how the nodes of `spec`'s run keep their logs: in `--data-dir` if given, in
/// memory when the policy is `off`, else under `OUT/data/`. A directory is emptied first.
pub fn log_config(config: &BenchConfig, spec: &ProtocolSpec) -> anyhow::Result<LogConfig> {
    let policy = LogPolicy::from_options(&spec.options, LogPolicy::Off).map_err(BadInput)?;
    let dir = match (&config.data_dir, policy) {
        (Some(dir), _) => dir.clone(),
        (None, LogPolicy::Off) => return Ok(LogConfig::memory(&spec.name, policy)),
        (None, _) => config.out.join("data"),
    };
    let dir = dir.join(spec.label.replace([':', '=', '/'], "-"));
    if dir.exists() {
        std::fs::remove_dir_all(&dir)
            .map_err(|e| anyhow::anyhow!("cannot empty {}: {e}", dir.display()))?;
    }
    Ok(LogConfig::dir(&spec.name, policy, dir))
}

/// Loader sessions per node that load a workload's initial data, whatever `--clients` is.
/// Loading is a stream of independent blind-write transactions, so while the machine has cores
/// to spare its rate is the number in flight over the commit latency. With the run's own
/// clients, 2 per node in the paper-figure experiments, `str-fig5-latency`'s TPC-C load (27
/// nodes on `ec2-9dc`, replication 6: about 12,000 load transactions whose commits take
/// hundreds of milliseconds) took about a minute per protocol on this 2-core machine; with 4
/// loader sessions per node about 31 s, with 8 about 18-25 s, and with 16 or 32 no less within
/// the noise (16-23 s): by 8 it is no longer the latency that limits it.
pub const LOADER_SESSIONS_PER_NODE: usize = 8;

/// At least this many loader sessions in all, however few nodes. On one node, 8 in flight leave
/// a protocol that batches its commits into epochs (`calvin`, `s-smr`: 10 ms, then Raft) bound
/// by its commit latency: Sparkle Fig. 6's 50-warehouse TPC-C took 36 s to load through `s-smr`
/// with 8 sessions and 8 s of CPU.
pub const MIN_LOADER_SESSIONS: usize = 32;

/// At most this many loader sessions in all, however many nodes: each is a task (over TCP a
/// connection; against PostgreSQL a server backend, of the 300 `scripts/postgres.sh` allows,
/// which the clients share), and beyond a few hundred transactions in flight two cores are the
/// limit anyway.
pub const MAX_LOADER_SESSIONS: usize = 256;

/// The home node of each loader session for `loads` load transactions over `placement`:
/// [`LOADER_SESSIONS_PER_NODE`] per node, round-robin over the nodes, at least
/// [`MIN_LOADER_SESSIONS`], at most [`MAX_LOADER_SESSIONS`] and never more than there are
/// transactions to run.
pub fn loader_homes(placement: &Placement, loads: usize) -> Vec<NodeId> {
    let nodes: Vec<NodeId> = placement.nodes().collect();
    let sessions = (nodes.len() * LOADER_SESSIONS_PER_NODE)
        .clamp(MIN_LOADER_SESSIONS, MAX_LOADER_SESSIONS)
        .min(loads);
    (0..sessions).map(|i| nodes[i % nodes.len()]).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(entry: &str, speculation: Option<&str>) -> anyhow::Result<ProtocolSpec> {
        ProtocolSpec::parse(entry, speculation, None, &BTreeMap::new())
    }

    fn mode(entry: &str, speculation: Option<&str>) -> String {
        spec(entry, speculation).unwrap().speculation.to_string()
    }

    fn error(entry: &str, speculation: Option<&str>) -> String {
        spec(entry, speculation).unwrap_err().to_string()
    }

    #[test]
    fn entries_carry_their_speculation_and_settings() {
        assert_eq!(mode("str", None), "auto:reads+commits:8");
        assert_eq!(mode("planet", None), "commits:1");
        assert_eq!(mode("clocksi-rep", None), "none");
        assert_eq!(
            mode("str:speculation=reads+commits:2", None),
            "reads+commits:2"
        );
        assert_eq!(mode("str:speculation=auto:reads", None), "auto:reads");
        assert_eq!(mode("str", Some("reads")), "reads");
        // The entry's own setting beats the run's; protocols that never speculate ignore the
        // run's.
        assert_eq!(mode("str:speculation=none", Some("reads")), "none");
        assert_eq!(mode("clocksi-rep", Some("reads")), "none");
        let s = spec("clocksi-rep:precise_clock=on", None).unwrap();
        assert_eq!(s.label, "clocksi-rep:precise_clock=on");
        assert_eq!(s.name, "clocksi-rep");
        assert_eq!(s.options.settings["precise_clock"], "on");
    }

    #[test]
    fn entries_choose_their_transaction_form() {
        // One-shot where the protocol serves it, unless the entry or the run says otherwise.
        assert_eq!(spec("nocc", None).unwrap().txn_form, RequestForm::OneShot);
        assert_eq!(spec("nocc", None).unwrap().runtime, None);
        assert_eq!(
            spec("nocc:transport=tcp", None)
                .unwrap()
                .runtime(Runtime::Inproc),
            Runtime::Tcp
        );
        assert!(
            error("nocc:transport=udp", None).contains("unknown transport 'udp'"),
            "{}",
            error("nocc:transport=udp", None)
        );
        let s = spec("nocc:txn_form=interactive", None).unwrap();
        assert_eq!(s.txn_form, RequestForm::Interactive);
        assert!(!s.options.settings.contains_key(TXN_FORM_SETTING));
        let run_wide = ProtocolSpec::parse("str", None, Some("interactive"), &BTreeMap::new());
        assert_eq!(run_wide.unwrap().txn_form, RequestForm::Interactive);
        let peer = spec("postgres-serializable", None).unwrap();
        assert_eq!(peer.txn_form, RequestForm::Interactive);
        assert_eq!(
            error("postgres-serializable:txn_form=one-shot", None),
            "postgres-serializable does not serve one-shot transactions (it serves: interactive)"
        );
        assert_eq!(
            error("nocc:txn_form=batch", None),
            "unknown transaction form 'batch'; valid forms: interactive, one-shot"
        );
    }

    fn bench(args: &[&str]) -> BenchArgs {
        #[derive(clap::Parser)]
        struct Cli {
            #[command(flatten)]
            args: BenchArgs,
        }
        let argv = std::iter::once("bench").chain(args.iter().copied());
        <Cli as clap::Parser>::parse_from(argv).args
    }

    #[test]
    fn placement_defaults_to_ring_and_hash_is_echoed() {
        let ring = bench(&["--nodes", "5"]).validate().unwrap();
        assert_eq!(ring.layout, Layout::Ring);
        assert_eq!(ring.partitions, 5);
        let hash = bench(&["--nodes", "5", "--placement", "hash"])
            .validate()
            .unwrap();
        assert_eq!(hash.layout.to_string(), "hash");
        assert_eq!(hash.partitions, 256);
        assert_eq!(hash.placement.partition_count(), 256);
        // An experiment file sets the placement itself.
        let beside = bench(&["--placement", "hash", "--config", "x.toml"]).flags_beside_config();
        assert_eq!(beside, ["--placement"]);
        let e = bench(&["--nodes", "3", "--placement", "hash:partitions=2"])
            .validate()
            .err()
            .unwrap();
        assert!(e.to_string().contains("master of no partition"), "{e}");
    }

    #[test]
    fn seconds_given_beside_a_config_replace_the_files_even_at_the_default() {
        let args = bench(&["--config", "x.toml", "--duration", "10", "--warmup", "0.5"]);
        assert!(args.flags_beside_config().is_empty());
        assert_eq!((args.duration, args.warmup), (Some(10.0), Some(0.5)));
        let plain = bench(&[]).validate().unwrap();
        assert_eq!((plain.duration_s, plain.warmup_s), (10.0, 2.0));
    }

    #[test]
    fn the_retry_backoff_is_checked_and_drawn_from_the_runs_seed() {
        let plain = bench(&["--seed", "9"]).validate().unwrap();
        let backoff = plain.backoff();
        assert_eq!(backoff.base, Duration::from_micros(250));
        assert_eq!(backoff.cap, Duration::from_millis(20));
        assert_eq!(backoff.seed, 9);
        let none = bench(&["--backoff-base-ms", "0", "--backoff-cap-ms", "0"])
            .validate()
            .unwrap();
        assert_eq!(none.backoff().bound(3), Duration::ZERO);
        let refused = |args: &[&str]| bench(args).validate().err().unwrap().to_string();
        assert!(refused(&["--backoff-base-ms=-1"]).contains("--backoff-base-ms must be zero"));
        assert!(refused(&["--backoff-base-ms", "NaN"]).contains("--backoff-base-ms must be zero"));
        let e = refused(&["--backoff-base-ms", "2", "--backoff-cap-ms", "1"]);
        assert!(
            e.contains("--backoff-cap-ms must be at least --backoff-base-ms (2 ms)"),
            "{e}"
        );
        assert!(refused(&["--backoff-cap-ms", "1e300"]).contains("--backoff-cap-ms"));
        // An experiment file sets the backoff itself.
        let beside = bench(&["--backoff-cap-ms", "5", "--config", "x.toml"]).flags_beside_config();
        assert_eq!(beside, ["--backoff-cap-ms"]);
    }

    #[test]
    fn bad_entries_are_refused_with_the_reason() {
        assert!(error("planet:speculation=reads", None).contains("offers up to commits:1"));
        assert!(error("planet", Some("commits:2")).contains("offers up to commits:1"));
        assert!(error("clocksi-rep:speculation=reads", None).contains("does not speculate"));
        assert!(error("str:speculation=lots", None).contains("expected none, reads"));
        assert!(error("clocksi-rep:precise_clock=maybe", None).contains("bad value 'maybe'"));
        assert!(error("str:precise_clock=on", None).contains("unknown setting 'precise_clock'"));
        assert!(error("str:log=sometimes", None).contains("bad value 'sometimes'"));
        assert!(error("str:oops", None).contains("expected NAME:KEY=VALUE"));
        assert!(error("postgres-serializable:x=1", None).contains("takes no settings"));
        assert!(error("spanner", None).contains("unknown protocol"));
    }

    fn ring(nodes: usize) -> Arc<Placement> {
        let profile = LatencyProfile::named("lan").unwrap();
        Arc::new(Placement::ring(profile, nodes, nodes.min(3)).unwrap())
    }

    #[test]
    fn loader_sessions_are_a_fixed_number_per_node_within_bounds() {
        let homes = loader_homes(&ring(8), 10_000);
        assert_eq!(homes.len(), 8 * LOADER_SESSIONS_PER_NODE);
        for node in ring(8).nodes() {
            let at = homes.iter().filter(|h| **h == node).count();
            assert_eq!(at, LOADER_SESSIONS_PER_NODE, "{node}");
        }
        assert_eq!(homes[..3], [NodeId(0), NodeId(1), NodeId(2)]);
        // A few nodes get more each, up to the minimum in all.
        assert_eq!(loader_homes(&ring(1), 10_000).len(), MIN_LOADER_SESSIONS);
        // Never more than there are transactions to run, nor than the cap.
        assert_eq!(loader_homes(&ring(3), 5).len(), 5);
        assert_eq!(loader_homes(&ring(3), 0).len(), 0);
        assert_eq!(
            loader_homes(&ring(64), 1_000_000).len(),
            MAX_LOADER_SESSIONS
        );
    }
}
