//! `augur bench`: run one or more protocols, one after another, on identical embedded clusters
//! with closed-loop clients, and report each protocol's throughput, aborts and latency along with
//! its throughput ratio to the first protocol named.

use crate::report::{self, ProtocolResult, RunStats};
use augur::BadInput;
use augur_client::{
    ChainRoom, CommitStats, Degree, DegreeChoice, HistoryRecorder, Outcome, Procedure, RetryPolicy,
    RunObserver, Runner, Session, SpeculationTuner, Transport, TunerSettings, run_with_retry,
};
use augur_protocols::registry::{self, ProtocolInfo, ProtocolVisitor};
use augur_runtime::local::LocalCluster;
use augur_runtime::sim::CpuModel;
use augur_runtime::wal::{self, LogConfig, LogPolicy};
use augur_runtime::{Protocol, ProtocolOptions};
use augur_types::history::{HISTORY_FORMAT, History, HistoryHeader};
use augur_types::{AbortReason, LatencyProfile, NodeId, Placement, RequestForm};
use augur_workloads::{Audit, Condition, Workload};
use clap::{Args, ValueEnum};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
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
    /// Measured seconds per protocol (after warm-up).
    #[arg(long, default_value_t = 10.0)]
    pub duration: f64,
    /// Warm-up seconds per protocol, excluded from the results.
    #[arg(long, default_value_t = 2.0)]
    pub warmup: f64,
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
    /// Closed-loop clients per node.
    #[arg(long, default_value_t = 8)]
    pub clients: usize,
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
    /// Run the experiment described by this TOML file (see `experiments/README.md`) instead;
    /// `--out` still chooses where results go.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// With `--config`: a quick pass that only shows every run works (1 s per protocol, the
    /// first two points of a sweep).
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
    fn ladder(self) -> Vec<Degree> {
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
}

/// The entry setting that chooses the request form (`NAME:txn_form=one-shot`).
pub const TXN_FORM_SETTING: &str = "txn_form";

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
        for (k, v) in pairs {
            if k == "speculation" {
                speculation = Some(v);
                own_speculation = true;
            } else if k == TXN_FORM_SETTING {
                form = Some(v);
            } else {
                settings.insert(k, v);
            }
        }
        let label = entry.trim().to_string();
        if let Some(peer) = crate::bench_pg::peer(&name) {
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
        })
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
    pub clients_per_node: usize,
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
    /// Open-loop target rate over all clients (transactions per second), if any.
    pub rate: Option<f64>,
    pub think_ms: f64,
}

fn bad(msg: impl Into<String>) -> anyhow::Error {
    BadInput(msg.into()).into()
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
        if !(self.duration > 0.0 && self.duration.is_finite()) {
            return Err(bad("--duration must be a positive number of seconds"));
        }
        if !(self.warmup >= 0.0 && self.warmup.is_finite()) {
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
        let profile = LatencyProfile::named(&self.latency).map_err(|e| bad(e.to_string()))?;
        let dcs = self.dcs.unwrap_or(profile.dcs.len().min(self.nodes.max(1)));
        let profile = profile.truncated(dcs).map_err(|e| bad(e.to_string()))?;
        let replication = self.replication.unwrap_or(self.nodes.clamp(1, 3));
        let placement = Placement::ring(profile.clone(), self.nodes, replication)
            .map_err(|e| bad(e.to_string()))?;
        let placement = Arc::new(placement);
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
        let runtime = self.runtime.unwrap_or(Runtime::Inproc);
        let cpu_model = CpuModel::from_settings(&sim_settings).map_err(bad)?;
        if runtime != Runtime::Sim && !sim_settings.is_empty() {
            return Err(bad(
                "sim.* settings describe the simulator's CPU model: they need --runtime sim",
            ));
        }
        let cpu_model = cpu_model.filter(|_| runtime == Runtime::Sim);
        if runtime == Runtime::Sim && self.data_dir.is_some() {
            return Err(bad(
                "--data-dir: the simulator keeps every node's log in memory (its syncs take \
                 modelled time); drop --data-dir or use --runtime inproc",
            ));
        }
        let mut protocols: Vec<ProtocolSpec> = Vec::new();
        for entry in &self.protocol {
            let spec = ProtocolSpec::parse(
                entry,
                self.speculation.as_deref(),
                self.txn_form.as_deref(),
                &protocol_settings,
            )?;
            if protocols.iter().any(|p| p.label == spec.label) {
                return Err(bad(format!("--protocol lists '{}' twice", spec.label)));
            }
            protocols.push(spec);
        }
        let workload =
            augur_workloads::build(&self.workload, &workload_settings, placement.clone())
                .map_err(|e| bad(e.to_string()))?;
        if self.check && workload.audit().is_none() {
            return Err(bad(format!(
                "--check: workload {} has no consistency conditions",
                self.workload
            )));
        }
        Ok(BenchConfig {
            protocols,
            workload: self.workload.clone(),
            workload_settings: workload.settings(),
            duration_s: self.duration,
            warmup_s: self.warmup,
            nodes: self.nodes,
            dcs: profile.dcs.clone(),
            latency: self.latency.clone(),
            replication,
            clients_per_node: self.clients,
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
            rate: self.rate,
            think_ms: self.think_ms,
        })
    }
}

pub fn run(args: &BenchArgs) -> anyhow::Result<()> {
    if let Some(path) = &args.config {
        let selection = crate::experiment::Selection {
            smoke: args.smoke,
            runs: args.only.clone(),
            sweep_values: args.sweep_values.clone(),
            runtime: args.runtime,
            sim_settings: args
                .set
                .iter()
                .filter(|kv| kv.starts_with("sim."))
                .cloned()
                .collect(),
        };
        return crate::experiment::run(path, &args.out, &selection);
    }
    let config = args.validate()?;
    let finished = run_config(&config)?;
    finished.into_result()
}

/// Run every protocol of a validated configuration and write its reports.
pub fn run_config(config: &BenchConfig) -> anyhow::Result<report::Finished> {
    std::fs::create_dir_all(&config.out)
        .map_err(|e| anyhow::anyhow!("cannot create {}: {e}", config.out.display()))?;
    let mut results = Vec::new();
    for spec in &config.protocols {
        let result = match (crate::bench_pg::peer(&spec.name), config.runtime) {
            (Some(_), Runtime::Sim) => {
                return Err(bad(format!(
                    "{} is PostgreSQL itself: it cannot run in the simulator",
                    spec.name
                )));
            }
            (Some(peer), _) => crate::bench_pg::run(config, spec, peer)?,
            (None, Runtime::Inproc) => registry::visit(&spec.name, RunInProcess { config, spec })??,
            (None, Runtime::Tcp) => crate::bench_tcp::run(config, spec)??,
            (None, Runtime::Sim) => crate::bench_sim::run(config, spec)??,
        };
        results.push(result);
    }
    report::finish(config, results)
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

/// Runs one protocol on an in-process cluster.
struct RunInProcess<'a> {
    config: &'a BenchConfig,
    spec: &'a ProtocolSpec,
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
                augur::procedures(),
            )?;
            let mut transports = Vec::new();
            for home in config.placement.nodes() {
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

/// What every client of one protocol's run shares, and how each is started: the part of a
/// run that is the same whatever runs the cluster (tokio in [`drive`], the simulator in
/// [`crate::bench_sim`]).
pub struct RunPlan<'a> {
    config: &'a BenchConfig,
    spec: &'a ProtocolSpec,
    /// A fresh workload: some keep per-run state (unique value counters, the money SmallBank
    /// moved in and out) that must start from scratch with the database.
    pub workload: Arc<dyn Workload>,
    pub recorder: Option<HistoryRecorder>,
    pub warmup: Duration,
    pub measured: Duration,
    pacing: Pacing,
    /// One tuner for all clients of the run: with a fixed degree its ladder has one step.
    tuner: SpeculationTuner,
    commit_stats: CommitStats,
    /// One record for all clients: thousands of clients each with their own latency
    /// histograms per second would take gigabytes.
    stats: Arc<Mutex<RunStats>>,
    seeds: ChaCha8Rng,
}

impl<'a> RunPlan<'a> {
    /// The plan of `spec`'s run with `clients` clients in all.
    pub fn new(config: &'a BenchConfig, spec: &'a ProtocolSpec, clients: usize) -> Self {
        let workload = augur_workloads::build(
            &config.workload,
            &config.workload_given,
            config.placement.clone(),
        )
        .expect("settings were validated");
        let pacing = match config.rate {
            Some(rate) => Pacing::OpenLoop {
                per_client_rate: rate / clients.max(1) as f64,
            },
            None => Pacing::ClosedLoop {
                mean_think: Duration::from_secs_f64(config.think_ms / 1000.0),
            },
        };
        let tuner_settings = TunerSettings {
            interval: Duration::from_secs_f64(config.tune_interval_s),
            ..TunerSettings::default()
        };
        RunPlan {
            config,
            spec,
            workload,
            recorder: config.history.as_ref().map(|_| HistoryRecorder::new()),
            warmup: Duration::from_secs_f64(config.warmup_s),
            measured: Duration::from_secs_f64(config.duration_s),
            pacing,
            tuner: SpeculationTuner::new(spec.speculation.ladder(), tuner_settings, Duration::ZERO),
            commit_stats: CommitStats::new(),
            stats: Arc::new(Mutex::new(RunStats::default())),
            seeds: ChaCha8Rng::seed_from_u64(config.seed),
        }
    }

    /// A session over `transport` that records into the run's history, if one is kept.
    pub fn session<T: Transport>(&self, transport: T) -> Session<T> {
        match &self.recorder {
            Some(r) => Session::recorded(transport, r.clone()),
            None => Session::new(transport),
        }
    }

    /// One client of the run, homed at `home`: runs transactions from the moment it is first
    /// polled for the warm-up and the measurement, then returns itself (its session runs the
    /// audit).
    pub fn client<T: Transport>(
        &mut self,
        home: NodeId,
        transport: T,
    ) -> impl Future<Output = Client<T>> + Send + 'static {
        let client = Client {
            session: self.session(transport).with_form(self.spec.txn_form),
            workload: self.workload.clone(),
            home,
            rng: ChaCha8Rng::seed_from_u64(self.seeds.random()),
        };
        let speculation = Speculating {
            tuner: self.tuner.clone(),
            commit_stats: self.commit_stats.clone(),
        };
        let stats = Arc::clone(&self.stats);
        let (warmup, measured, pacing) = (self.warmup, self.measured, self.pacing);
        async move {
            client_loop(&client, warmup, measured, pacing, &speculation, &stats).await;
            client
        }
    }

    /// The run's statistics, with the nodes' `counters` over the window and the audit's
    /// `checks`; writes the history, when one was recorded.
    pub fn finish(
        self,
        info: &ProtocolInfo,
        counters: BTreeMap<String, u64>,
        checks: Option<Vec<Condition>>,
    ) -> RunStats {
        let (config, spec) = (self.config, self.spec);
        let mut total = std::mem::take(&mut *self.stats.lock().expect("run statistics"));
        total.protocol_counters = counters;
        total.checks = checks;
        total.speculation_timeline = self
            .tuner
            .timeline()
            .into_iter()
            .map(|(at, degree)| (at.as_secs_f64(), degree.to_string()))
            .collect();
        if let (Some(recorder), Some(path)) = (self.recorder, history_path(config, spec)) {
            let history = History {
                header: HistoryHeader {
                    format: HISTORY_FORMAT,
                    protocol: info.name.to_string(),
                    workload: config.workload.clone(),
                    seed: config.seed,
                    isolation: info.isolation.to_string(),
                    faults: "none".into(),
                    settings: augur::check::flatten_settings(&config.workload_settings),
                },
                txns: recorder.records(),
            };
            match augur::check::write_history(&path, &history) {
                Ok(()) => eprintln!(
                    "{}: {} attempts recorded in {}",
                    spec.label,
                    history.txns.len(),
                    path.display()
                ),
                Err(e) => tracing::error!("{e:#}"),
            }
        }
        total
    }
}

/// Run one closed-loop client per transport (each bound to its home node), with a progress
/// display, and merge their statistics. The workload's initial data is loaded first, through
/// loader sessions that `connect_loader` opens to a node and that are closed before the warm-up
/// (see [`load_initial_data`]); with `--check`, its audit runs after the measurement.
///
/// `probes`, one session per node, read the nodes' protocol counters at the start and the end
/// of the measurement window (none for PostgreSQL). Fails only if a loader cannot connect.
pub async fn drive<T, C, F>(
    config: &BenchConfig,
    spec: &ProtocolSpec,
    info: &ProtocolInfo,
    transports: Vec<(NodeId, T)>,
    probes: Vec<T>,
    connect_loader: C,
) -> anyhow::Result<RunStats>
where
    T: Transport,
    C: FnMut(NodeId) -> F,
    F: Future<Output = anyhow::Result<T>>,
{
    let mut plan = RunPlan::new(config, spec, transports.len());
    load_initial_data(
        plan.workload.as_ref(),
        &config.placement,
        plan.recorder.as_ref(),
        connect_loader,
    )
    .await?;
    let tasks: Vec<_> = transports
        .into_iter()
        .map(|(home, transport)| tokio::spawn(plan.client(home, transport)))
        .collect();
    let counters = tokio::spawn(read_counters(probes, plan.warmup, plan.measured));
    let progress = Progress::start(&spec.label, plan.warmup + plan.measured);
    let mut auditor = None;
    for t in tasks {
        match t.await {
            Ok(client) => {
                auditor.get_or_insert(client);
            }
            Err(e) => tracing::error!("a client task failed: {e}"),
        }
    }
    progress.finish();
    let counters = match counters.await {
        Ok(Ok(counters)) => counters,
        Ok(Err(e)) => {
            tracing::error!("reading the nodes' protocol counters failed: {e}");
            BTreeMap::new()
        }
        Err(e) => {
            tracing::error!("reading the nodes' protocol counters failed: {e}");
            BTreeMap::new()
        }
    };
    let checks = match (config.check, auditor, plan.workload.audit()) {
        (true, Some(client), Some(audit)) => Some(run_audit(&client.session, audit).await),
        _ => None,
    };
    Ok(plan.finish(info, counters, checks))
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

/// At most this many loader sessions in all, however many nodes: each is a task (over TCP a
/// connection; against PostgreSQL a server backend, of the 300 `scripts/postgres.sh` allows,
/// which the clients share), and beyond a few hundred transactions in flight two cores are the
/// limit anyway.
pub const MAX_LOADER_SESSIONS: usize = 256;

/// The home node of each loader session for `loads` load transactions over `placement`:
/// [`LOADER_SESSIONS_PER_NODE`] per node, round-robin over the nodes, at most
/// [`MAX_LOADER_SESSIONS`] and never more than there are transactions to run.
fn loader_homes(placement: &Placement, loads: usize) -> Vec<NodeId> {
    let nodes: Vec<NodeId> = placement.nodes().collect();
    let sessions = (nodes.len() * LOADER_SESSIONS_PER_NODE)
        .min(MAX_LOADER_SESSIONS)
        .min(loads);
    (0..sessions).map(|i| nodes[i % nodes.len()]).collect()
}

/// Load `workload`'s initial data (its [`Workload::load`] transactions, each run until it
/// commits) through dedicated loader sessions that `connect` opens, one per home of
/// [`loader_homes`], and close again on return, so that they never count as clients. Every
/// session takes the next transaction not yet started when it is free: which session runs a
/// transaction does not change what it writes (its rows are fixed by the workload and its
/// settings, and no two load transactions write the same key), so the data loaded is the same
/// whatever the timing. Their attempts go into the history like any other, when one is
/// recorded; they are never in the run's statistics. A load transaction that fails is logged
/// and stops its session; the others carry on.
pub async fn load_initial_data<T, C, F>(
    workload: &dyn Workload,
    placement: &Placement,
    recorder: Option<&HistoryRecorder>,
    mut connect: C,
) -> anyhow::Result<()>
where
    T: Transport,
    C: FnMut(NodeId) -> F,
    F: Future<Output = anyhow::Result<T>>,
{
    let Some(queue) = LoadQueue::of(workload) else {
        return Ok(());
    };
    let mut tasks = Vec::new();
    for home in queue.loader_homes(placement) {
        let transport = connect(home).await?;
        let session = match recorder {
            Some(r) => Session::recorded(transport, r.clone()),
            None => Session::new(transport),
        };
        tasks.push(tokio::spawn(queue.loader(session)));
    }
    for task in tasks {
        if let Err(e) = task.await {
            tracing::error!("a loader task failed: {e}");
        }
    }
    Ok(())
}

/// A workload's load transactions not yet started, shared by its loader sessions.
#[derive(Clone)]
pub struct LoadQueue {
    procedures: Arc<Mutex<std::vec::IntoIter<Box<dyn Procedure>>>>,
    len: usize,
}

impl LoadQueue {
    /// The queue of `workload`'s load transactions (`None` when it loads nothing).
    pub fn of(workload: &dyn Workload) -> Option<LoadQueue> {
        let procedures = workload.load();
        (!procedures.is_empty()).then(|| LoadQueue {
            len: procedures.len(),
            procedures: Arc::new(Mutex::new(procedures.into_iter())),
        })
    }

    /// Where the loader sessions go (see [`loader_homes`]).
    pub fn loader_homes(&self, placement: &Placement) -> Vec<NodeId> {
        loader_homes(placement, self.len)
    }

    /// One loader session: take the next transaction not yet started and run it until it
    /// commits, until none is left. A load transaction that fails is logged and stops its
    /// session; the others carry on.
    pub fn loader<T: Transport>(
        &self,
        session: Session<T>,
    ) -> impl Future<Output = ()> + Send + 'static {
        let queue = Arc::clone(&self.procedures);
        async move {
            let next = || queue.lock().expect("load queue").next();
            while let Some(mut procedure) = next() {
                let report = run_with_retry(&session, procedure.as_mut(), 100).await;
                if !matches!(report.outcome, Outcome::Committed { .. }) {
                    tracing::error!(
                        "loading the initial data failed: {}: {:?}",
                        procedure.name(),
                        report.outcome
                    );
                    return;
                }
            }
        }
    }
}

/// Run `audit` in one read-only transaction, retrying (it reads a lot and may meet a protocol
/// that aborts it) a few times; a failure to run at all is reported as a failed condition.
pub async fn run_audit<T: Transport>(
    session: &Session<T>,
    mut audit: Box<dyn Audit>,
) -> Vec<Condition> {
    let mut last = String::new();
    for _ in 0..5 {
        let mut txn = match session.begin_named("audit", true).await {
            Ok(t) => t,
            Err(e) => {
                last = e.to_string();
                continue;
            }
        };
        match audit.run(&mut txn).await {
            Ok(conditions) => {
                txn.abort().await;
                return conditions;
            }
            Err(e) => {
                last = e.to_string();
                if !txn.is_done() {
                    txn.abort().await;
                }
            }
        }
    }
    vec![Condition {
        name: "audit".into(),
        passed: false,
        detail: format!("the audit transaction could not run: {last}"),
    }]
}

/// One benchmark client: its session, and what it draws transactions from.
pub struct Client<T: Transport> {
    session: Session<T>,
    workload: Arc<dyn Workload>,
    home: NodeId,
    rng: ChaCha8Rng,
}

/// How a client paces its transactions.
#[derive(Clone, Copy, Debug)]
enum Pacing {
    /// Next transaction when the previous one ended, after an exponentially distributed think
    /// time with this mean (zero: none).
    ClosedLoop { mean_think: Duration },
    /// Poisson arrivals at this rate; a transaction that arrives while the previous one runs
    /// waits, and its latency counts from its arrival.
    OpenLoop { per_client_rate: f64 },
}

/// An exponentially distributed duration with the given mean (inverse-transform sampling).
fn exponential(rng: &mut ChaCha8Rng, mean_secs: f64) -> Duration {
    let u: f64 = rng.random_range(f64::MIN_POSITIVE..1.0);
    Duration::from_secs_f64(-u.ln() * mean_secs)
}

/// What the clients of a run share to speculate: the tuner that picks their degree and the
/// per-type commit statistics `can_spec_commit` consults.
struct Speculating {
    tuner: SpeculationTuner,
    commit_stats: CommitStats,
}

/// Records what the [`Runner`] of one client reports into the run's statistics: every event
/// in its second's interval while the run lasts, and in the totals when the transaction
/// started inside the measurement window and the event came before its end.
struct ClientStats<'a> {
    origin: Duration,
    measure_from: Duration,
    end: Duration,
    /// Shared by every client of the run.
    stats: &'a Mutex<RunStats>,
}

impl<'a> ClientStats<'a> {
    /// The run's statistics, to record into. Never held across an await.
    fn stats(&self) -> MutexGuard<'a, RunStats> {
        self.stats.lock().expect("run statistics")
    }

    /// Whether an event at `at` of a transaction that started at `started` counts in the
    /// totals.
    fn counts(&self, started: Duration, at: Duration) -> bool {
        started >= self.measure_from && at <= self.end
    }
}

impl RunObserver for ClientStats<'_> {
    fn committed(
        &mut self,
        name: &'static str,
        started: Duration,
        finished: Duration,
        perceived: Duration,
    ) {
        if finished > self.end {
            return;
        }
        let latency = finished.saturating_sub(started);
        let second = finished.saturating_sub(self.origin).as_secs() as usize;
        let mut stats = self.stats();
        let iv = stats.interval(second);
        iv.committed += 1;
        iv.latency_us
            .saturating_record(latency.as_micros().max(1) as u64);
        if started >= self.measure_from {
            stats.record_commit(name, latency, perceived.saturating_sub(started));
        }
    }

    fn aborted(
        &mut self,
        name: &'static str,
        reason: AbortReason,
        started: Duration,
        at: Duration,
    ) {
        let mut stats = self.stats();
        if at <= self.end && reason != AbortReason::UserRollback {
            let second = at.saturating_sub(self.origin).as_secs() as usize;
            stats.interval(second).aborted += 1;
        }
        if self.counts(started, at) {
            stats.record_abort(name, reason);
        }
    }

    fn retrying(&mut self, name: &'static str, started: Duration, at: Duration) {
        if self.counts(started, at) {
            self.stats().record_retry(name);
        }
    }

    fn unknown(&mut self, name: &'static str, started: Duration, at: Duration) {
        if self.counts(started, at) {
            self.stats().record_unknown(name);
        }
    }

    fn spec_committed(&mut self, _name: &'static str, started: Duration, at: Duration) {
        if self.counts(started, at) {
            self.stats().spec_commits += 1;
        }
    }

    fn misspeculated(&mut self, _name: &'static str, started: Duration, at: Duration) {
        if self.counts(started, at) {
            self.stats().misspeculations += 1;
        }
    }
}

/// One client: run transactions, retrying aborted ones until they commit. A transaction's final
/// latency runs from its start (its arrival, in the open loop) to its final commit, retries
/// included; its perceived latency ends at its last speculative commit instead, when it had
/// one (STR §8). With speculative commits the client moves on at once and keeps up to the
/// degree's chain length of them unresolved: the next transaction runs its body meanwhile, and
/// waits for the oldest to resolve only when it is ready to commit and the chain is full (the
/// [`Runner`]'s [`ChainRoom::BeforeCommit`]). A misspeculated transaction is run again: the
/// benchmark's procedures have nothing else to compensate with. A transaction the workload
/// rolls back is complete and not retried.
async fn client_loop<T: Transport>(
    client: &Client<T>,
    warmup: Duration,
    measured: Duration,
    pacing: Pacing,
    speculating: &Speculating,
    stats: &Mutex<RunStats>,
) {
    let session = &client.session;
    let mut rng = client.rng.clone();
    let transport = session.transport();
    let origin = transport.now();
    let measure_from = origin + warmup;
    let end = measure_from + measured;
    let mut observer = ClientStats {
        origin,
        measure_from,
        end,
        stats,
    };
    let degree = DegreeChoice::Tuned {
        tuner: speculating.tuner.clone(),
        origin,
    };
    let retry = RetryPolicy {
        retryable: true,
        misspeculated: true,
        until: Some(end),
    };
    let mut runner = Runner::new(
        session,
        degree,
        ChainRoom::BeforeCommit,
        retry,
        speculating.commit_stats.clone(),
    );
    let mut next_arrival = origin;
    loop {
        runner.fit_chain(&mut observer).await;
        let procedure = client.workload.next(client.home, &mut rng);
        let started = match pacing {
            Pacing::ClosedLoop { mean_think } => {
                // The workload's own keying and think times (TPC-C, RUBiS) when its settings
                // turn them on, else the run's mean think time.
                let pause = client
                    .workload
                    .pause(procedure.name(), &mut rng)
                    .or_else(|| {
                        (!mean_think.is_zero())
                            .then(|| exponential(&mut rng, mean_think.as_secs_f64()))
                    });
                if let Some(pause) = pause {
                    // Never past the end of the run: a long think time ends with it.
                    let left = end.saturating_sub(transport.now());
                    transport.sleep(pause.min(left)).await;
                }
                transport.now()
            }
            Pacing::OpenLoop { per_client_rate } => {
                next_arrival += exponential(&mut rng, 1.0 / per_client_rate);
                let now = transport.now();
                if next_arrival > now {
                    transport.sleep(next_arrival - now).await;
                }
                next_arrival
            }
        };
        if started >= end {
            break;
        }
        runner.run(procedure, started, &mut observer).await;
    }
    // Learn every outstanding outcome (past the window, so none counts) before leaving.
    runner.resolve_all(&mut observer).await;
}

/// Where `--history` puts this protocol's history.
fn history_path(config: &BenchConfig, spec: &ProtocolSpec) -> Option<PathBuf> {
    let path = config.history.as_ref()?;
    if config.protocols.len() == 1 {
        return Some(path.clone());
    }
    Some(augur::path_with_suffix(
        path,
        &spec.label.replace([':', '='], "-"),
    ))
}

/// The nodes' protocol counters over the measurement window: read through `probes` (one
/// session per node) when the warm-up ends and when the measurement does, summed over the
/// nodes. Counters named `largest_…` are maxima: the largest any node saw since it started.
async fn read_counters<T: Transport>(
    probes: Vec<T>,
    warmup: Duration,
    measured: Duration,
) -> Result<BTreeMap<String, u64>, augur_client::TxnError> {
    if probes.is_empty() {
        return Ok(BTreeMap::new());
    }
    let sessions: Vec<Session<T>> = probes.into_iter().map(Session::new).collect();
    async fn read_all<T: Transport>(
        sessions: &[Session<T>],
    ) -> Result<BTreeMap<String, u64>, augur_client::TxnError> {
        let mut total = BTreeMap::new();
        for session in sessions {
            add_counters(&mut total, session.node_stats().await?);
        }
        Ok(total)
    }
    let transport = sessions[0].transport();
    transport.sleep(warmup).await;
    let before = read_all(&sessions).await?;
    transport.sleep(measured).await;
    let after = read_all(&sessions).await?;
    Ok(counters_between(&before, after))
}

/// Add one node's protocol counters to `total`: running totals add up, `largest_` maxima
/// take the largest.
pub fn add_counters<N: Into<String>>(
    total: &mut BTreeMap<String, u64>,
    node: impl IntoIterator<Item = (N, u64)>,
) {
    for (name, n) in node {
        let name = name.into();
        let largest = name.starts_with("largest_");
        let sum = total.entry(name).or_insert(0u64);
        *sum = if largest { (*sum).max(n) } else { *sum + n };
    }
}

/// The counters over a window, from their totals at its start and at its end (maxima as at
/// the end).
pub fn counters_between(
    before: &BTreeMap<String, u64>,
    mut after: BTreeMap<String, u64>,
) -> BTreeMap<String, u64> {
    for (name, n) in after.iter_mut() {
        if !name.starts_with("largest_") {
            *n = n.saturating_sub(before.get(name).copied().unwrap_or(0));
        }
    }
    after
}

/// A progress bar on a terminal, plain lines otherwise.
struct Progress {
    bar: Option<indicatif::ProgressBar>,
    ticker: Option<tokio::task::JoinHandle<()>>,
    name: String,
}

impl Progress {
    fn start(name: &str, total: Duration) -> Progress {
        if !std::io::stderr().is_terminal() {
            eprintln!("running {name} for {:.1}s", total.as_secs_f64());
            return Progress {
                bar: None,
                ticker: None,
                name: name.to_string(),
            };
        }
        let bar = indicatif::ProgressBar::new(total.as_millis() as u64);
        bar.set_style(
            indicatif::ProgressStyle::with_template("{prefix:>14} [{bar:40}] {elapsed}/{duration}")
                .expect("valid template")
                .progress_chars("=> "),
        );
        bar.set_prefix(name.to_string());
        let ticking = bar.clone();
        let ticker = tokio::spawn(async move {
            let start = std::time::Instant::now();
            loop {
                tokio::time::sleep(Duration::from_millis(200)).await;
                ticking.set_position(start.elapsed().as_millis() as u64);
            }
        });
        Progress {
            bar: Some(bar),
            ticker: Some(ticker),
            name: name.to_string(),
        }
    }

    fn finish(self) {
        if let Some(t) = self.ticker {
            t.abort();
        }
        match self.bar {
            Some(bar) => bar.finish_and_clear(),
            None => eprintln!("finished {}", self.name),
        }
    }
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

    fn placement(nodes: usize) -> Arc<Placement> {
        let profile = LatencyProfile::named("lan").unwrap();
        Arc::new(Placement::ring(profile, nodes, nodes.min(3)).unwrap())
    }

    #[test]
    fn loader_sessions_are_a_fixed_number_per_node_spread_over_the_nodes() {
        let homes = loader_homes(&placement(3), 10_000);
        assert_eq!(homes.len(), 3 * LOADER_SESSIONS_PER_NODE);
        for node in placement(3).nodes() {
            let at = homes.iter().filter(|h| **h == node).count();
            assert_eq!(at, LOADER_SESSIONS_PER_NODE, "{node}");
        }
        assert_eq!(homes[..3], [NodeId(0), NodeId(1), NodeId(2)]);
        // Never more than there are transactions to run, nor than the cap.
        assert_eq!(loader_homes(&placement(3), 5).len(), 5);
        assert_eq!(loader_homes(&placement(3), 0).len(), 0);
        assert_eq!(
            loader_homes(&placement(64), 1_000_000).len(),
            MAX_LOADER_SESSIONS
        );
    }

    /// Records the keys a procedure writes; reads find nothing.
    #[derive(Default)]
    struct Writes(Vec<augur_types::Key>);

    impl augur_client::Ops for Writes {
        fn read<'a>(
            &'a mut self,
            _key: &'a augur_types::Key,
        ) -> futures::future::BoxFuture<
            'a,
            Result<Option<augur_types::Value>, augur_client::TxnError>,
        > {
            Box::pin(async { Ok(None) })
        }

        fn write(
            &mut self,
            key: augur_types::Key,
            _value: Option<augur_types::Value>,
        ) -> Result<(), augur_client::TxnError> {
            self.0.push(key);
            Ok(())
        }
    }

    /// The loader sessions run load transactions in whatever order they finish in: that loads
    /// the same data only because no two of them write the same key.
    #[test]
    fn no_two_load_transactions_write_the_same_key() {
        let workloads: [(&str, &[(&str, &str)]); 3] = [
            ("ycsb-t", &[("keys", "3000")]),
            (
                "tpcc",
                &[
                    ("warehouses", "3"),
                    ("items", "1000"),
                    ("customers_per_district", "100"),
                    ("data_size", "compact"),
                ],
            ),
            (
                "rubis",
                &[("users", "2000"), ("items", "300"), ("old_items", "1000")],
            ),
        ];
        for (name, settings) in workloads {
            let settings = settings
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            let workload = augur_workloads::build(name, &settings, placement(3)).unwrap();
            let mut writer = std::collections::HashMap::new();
            let loads = workload.load();
            assert!(loads.len() > 1, "{name}");
            for (i, mut p) in loads.into_iter().enumerate() {
                let mut ops = Writes::default();
                futures::executor::block_on(p.run(&mut ops)).unwrap();
                for key in ops.0 {
                    if let Some(j) = writer.insert(key.clone(), i) {
                        assert_eq!(j, i, "{name}: load transactions {j} and {i} write {key:?}");
                    }
                }
            }
        }
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
}
