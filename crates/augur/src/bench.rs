//! `augur bench`: run one or more protocols, one after another, on identical embedded clusters
//! with closed-loop clients, and report each protocol's throughput, aborts and latency along with
//! its throughput ratio to the first protocol named.

use crate::report::{self, ProtocolResult, RunStats};
use augur::BadInput;
use augur_client::{
    HistoryRecorder, Outcome, Procedure, Session, Transport, run_once, run_with_retry,
};
use augur_protocols::registry::{self, ProtocolInfo, ProtocolVisitor};
use augur_runtime::local::LocalCluster;
use augur_runtime::{Protocol, ProtocolOptions};
use augur_types::history::{HISTORY_FORMAT, History, HistoryHeader};
use augur_types::{AbortReason, LatencyProfile, NodeId, Placement};
use augur_workloads::{Audit, Condition, Workload};
use clap::{Args, ValueEnum};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// How the benchmark reaches its cluster.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum TransportKind {
    /// Every node a task of this process; messages delayed by the latency matrix.
    Inproc,
    /// Every node an `augur node` process on loopback; clients over TCP.
    Tcp,
}

#[derive(Args, Clone, Debug)]
pub struct BenchArgs {
    /// Protocols to compare, comma-separated; ratios are relative to the first.
    #[arg(long, value_delimiter = ',', default_value = "nocc,clocksi-rep")]
    pub protocol: Vec<String>,
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
    /// Directory for summary.json (and, with `--transport tcp`, the cluster file and node logs).
    #[arg(long, default_value = "bench-results")]
    pub out: PathBuf,
    /// Workload settings (`key=value`), and protocol settings as `protocol.key=value`.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// Where the nodes run.
    #[arg(long, value_enum, default_value_t = TransportKind::Inproc)]
    pub transport: TransportKind,
    /// Record every transaction attempt and write the history here as JSON lines (with several
    /// protocols, `-PROTOCOL` is added before the extension). `augur check --input FILE` checks
    /// it.
    #[arg(long)]
    pub history: Option<PathBuf>,
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
    /// The PostgreSQL server for `--protocol postgres-serializable` / `postgres-repeatable-read`
    /// (libpq key=value form; `scripts/postgres.sh start` prints it).
    #[arg(long, default_value = augur_postgres::DEFAULT_URL)]
    pub pg_url: String,
    /// After the measurement, evaluate the workload's consistency conditions on one consistent
    /// snapshot, record them in `summary.json` under `checks`, and exit non-zero on a violation.
    #[arg(long)]
    pub check: bool,
}

/// A validated benchmark configuration, echoed into `summary.json`.
#[derive(Clone, serde::Serialize)]
pub struct BenchConfig {
    pub protocols: Vec<String>,
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
    pub transport: TransportKind,
    pub protocol_options: ProtocolOptions,
    #[serde(skip)]
    pub placement: Arc<Placement>,
    /// The `--set` workload settings as given, to build a fresh workload for each protocol.
    #[serde(skip)]
    pub workload_given: BTreeMap<String, String>,
    #[serde(skip)]
    pub out: PathBuf,
    #[serde(skip)]
    pub history: Option<PathBuf>,
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
        for p in &self.protocol {
            // PostgreSQL is always reached over TCP, whatever `--transport` says for augur.
            if crate::bench_pg::peer(p).is_some() {
                continue;
            }
            registry::info(p).map_err(|e| {
                bad(format!(
                    "{e}, and the PostgreSQL peers postgres-serializable, postgres-repeatable-read"
                ))
            })?;
        }
        if self.protocol.is_empty() {
            return Err(bad("--protocol needs at least one protocol"));
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
        let protocol_options = ProtocolOptions::default();
        for kv in &self.set {
            let Some((k, v)) = kv.split_once('=') else {
                return Err(bad(format!("--set expects KEY=VALUE, got '{kv}'")));
            };
            match k.strip_prefix("protocol.") {
                Some(pk) => {
                    // No implemented protocol takes settings yet: refusing one beats silently
                    // ignoring a misspelt one. Protocols that take settings will validate here.
                    return Err(bad(format!(
                        "unknown protocol setting '{pk}'={v}; the implemented protocols take no settings"
                    )));
                }
                None => {
                    workload_settings.insert(k.to_string(), v.to_string());
                }
            }
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
            protocols: self.protocol.clone(),
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
            transport: self.transport,
            protocol_options,
            placement,
            workload_given: workload_settings,
            out: self.out.clone(),
            history: self.history.clone(),
            check: self.check,
            pg_url: self.pg_url.clone(),
            rate: self.rate,
            think_ms: self.think_ms,
        })
    }
}

pub fn run(args: &BenchArgs) -> anyhow::Result<()> {
    if let Some(path) = &args.config {
        return crate::experiment::run(path, &args.out, args.smoke);
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
    for name in &config.protocols {
        let result = match (crate::bench_pg::peer(name), config.transport) {
            (Some(peer), _) => crate::bench_pg::run(config, peer)?,
            (None, TransportKind::Inproc) => registry::visit(name, RunInProcess { config })??,
            (None, TransportKind::Tcp) => crate::bench_tcp::run(config, name)??,
        };
        results.push(result);
    }
    report::finish(config, results)
}

/// Runs one protocol on an in-process cluster.
struct RunInProcess<'a> {
    config: &'a BenchConfig,
}

impl ProtocolVisitor for RunInProcess<'_> {
    type Output = anyhow::Result<ProtocolResult>;

    fn visit<P: Protocol>(self, info: &'static ProtocolInfo) -> Self::Output {
        let config = self.config;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()?;
        let stats = runtime.block_on(async {
            let cluster = LocalCluster::<P>::start(
                config.placement.clone(),
                Arc::new(config.protocol_options.clone()),
                config.seed,
                Duration::from_secs(10),
            );
            let mut transports = Vec::new();
            for home in config.placement.nodes() {
                for _ in 0..config.clients_per_node {
                    transports.push((home, cluster.connect(home)));
                }
            }
            let stats = drive(config, info, transports).await;
            cluster.shutdown().await;
            stats
        });
        Ok(ProtocolResult::new(info, config, stats))
    }
}

/// Run one closed-loop client per transport (each bound to its home node), with a progress
/// display, and merge their statistics. The workload's initial data is loaded first (its load
/// transactions spread over the clients); with `--check`, its audit runs after the measurement.
pub async fn drive<T: Transport>(
    config: &BenchConfig,
    info: &ProtocolInfo,
    transports: Vec<(NodeId, T)>,
) -> RunStats {
    let warmup = Duration::from_secs_f64(config.warmup_s);
    let measured = Duration::from_secs_f64(config.duration_s);
    let mut seeds = ChaCha8Rng::seed_from_u64(config.seed);
    let recorder = config.history.as_ref().map(|_| HistoryRecorder::new());
    let clients = transports.len();
    // Each protocol gets a fresh workload: some keep per-run state (unique value counters,
    // the money SmallBank moved in and out) that must start from scratch with the database.
    let workload = augur_workloads::build(
        &config.workload,
        &config.workload_given,
        config.placement.clone(),
    )
    .expect("settings were validated");
    let mut loads: Vec<Vec<Box<dyn Procedure>>> = (0..clients).map(|_| Vec::new()).collect();
    for (i, p) in workload.load().into_iter().enumerate() {
        loads[i % clients].push(p);
    }
    let loaded = Arc::new(tokio::sync::Barrier::new(clients + 1));
    let pacing = match config.rate {
        Some(rate) => Pacing::OpenLoop {
            per_client_rate: rate / clients as f64,
        },
        None => Pacing::ClosedLoop {
            mean_think: Duration::from_secs_f64(config.think_ms / 1000.0),
        },
    };
    let mut tasks = Vec::new();
    for ((home, transport), load) in transports.into_iter().zip(loads) {
        let session = match &recorder {
            Some(r) => Session::recorded(transport, r.clone()),
            None => Session::new(transport),
        };
        let rng = ChaCha8Rng::seed_from_u64(seeds.random());
        let client = Client {
            session,
            workload: workload.clone(),
            home,
            rng,
        };
        let loaded = loaded.clone();
        tasks.push(tokio::spawn(async move {
            let load_failed = client.load(load).await;
            loaded.wait().await;
            let stats = client_loop(&client, warmup, measured, pacing).await;
            (stats, client, load_failed)
        }));
    }
    loaded.wait().await;
    let progress = Progress::start(info.name, warmup + measured);
    let mut total = RunStats::default();
    let mut auditor = None;
    for t in tasks {
        match t.await {
            Ok((stats, client, load_failed)) => {
                total.merge(stats);
                if let Some(why) = load_failed {
                    tracing::error!("loading the initial data failed: {why}");
                }
                auditor.get_or_insert(client);
            }
            Err(e) => tracing::error!("a client task failed: {e}"),
        }
    }
    progress.finish();
    if config.check
        && let (Some(client), Some(audit)) = (auditor, workload.audit())
    {
        total.checks = Some(run_audit(&client.session, audit).await);
    }
    if let (Some(recorder), Some(path)) = (recorder, history_path(config, info)) {
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
                info.name,
                history.txns.len(),
                path.display()
            ),
            Err(e) => tracing::error!("{e:#}"),
        }
    }
    total
}

/// Run `audit` in one read-only transaction, retrying (it reads a lot and may meet a protocol
/// that aborts it) a few times; a failure to run at all is reported as a failed condition.
async fn run_audit<T: Transport>(
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
struct Client<T: Transport> {
    session: Session<T>,
    workload: Arc<dyn Workload>,
    home: NodeId,
    rng: ChaCha8Rng,
}

impl<T: Transport> Client<T> {
    /// Run this client's share of the initial load, each procedure until it commits. Returns
    /// why it failed, if it did.
    async fn load(&self, procedures: Vec<Box<dyn Procedure>>) -> Option<String> {
        for mut p in procedures {
            let report = run_with_retry(&self.session, p.as_mut(), 100).await;
            if !matches!(report.outcome, Outcome::Committed { .. }) {
                return Some(format!("{}: {:?}", p.name(), report.outcome));
            }
        }
        None
    }
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

/// One client: run transactions, retrying aborted ones until they commit; a transaction's
/// latency runs from its start (its arrival, in the open loop) to its commit. A transaction the
/// workload rolls back is complete and not retried.
async fn client_loop<T: Transport>(
    client: &Client<T>,
    warmup: Duration,
    measured: Duration,
    pacing: Pacing,
) -> RunStats {
    let session = &client.session;
    let mut rng = client.rng.clone();
    let transport = session.transport();
    let origin = transport.now();
    let measure_from = origin + warmup;
    let end = measure_from + measured;
    let mut stats = RunStats::default();
    let mut next_arrival = origin;
    loop {
        let mut procedure = client.workload.next(client.home, &mut rng);
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
        let counts = started >= measure_from;
        loop {
            let outcome = run_once(session, procedure.as_mut()).await;
            let finished = transport.now();
            let counts = counts && finished <= end;
            // Samples cover the whole run, warm-up included, by the second the attempt ended.
            let second = (finished.saturating_sub(origin)).as_secs() as usize;
            match outcome {
                Outcome::Committed { .. } => {
                    let latency = finished.saturating_sub(started);
                    if finished <= end {
                        let iv = stats.interval(second);
                        iv.committed += 1;
                        iv.latency_us
                            .saturating_record(latency.as_micros().max(1) as u64);
                    }
                    if counts {
                        stats.record_commit(procedure.name(), latency);
                    }
                    break;
                }
                Outcome::Aborted(reason) => {
                    if finished <= end && reason != AbortReason::UserRollback {
                        stats.interval(second).aborted += 1;
                    }
                    if counts {
                        stats.record_abort(procedure.name(), reason);
                    }
                    if !reason.is_retryable() || finished >= end {
                        break;
                    }
                    if counts {
                        stats.record_retry(procedure.name());
                    }
                }
                Outcome::Unknown => {
                    if counts {
                        stats.record_unknown(procedure.name());
                    }
                    break;
                }
            }
        }
    }
    stats
}

/// Where `--history` puts this protocol's history.
fn history_path(config: &BenchConfig, info: &ProtocolInfo) -> Option<PathBuf> {
    let path = config.history.as_ref()?;
    if config.protocols.len() == 1 {
        return Some(path.clone());
    }
    Some(augur::path_with_suffix(path, info.name))
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
