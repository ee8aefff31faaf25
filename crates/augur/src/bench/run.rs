//! One protocol's run, whatever runs its cluster: the clients' plan ([`RunPlan`]), loading
//! the initial data ([`LoadQueue`]), the tokio driver shared by the in-process, TCP and
//! PostgreSQL runs ([`drive`]), and the nodes' counters over the measurement window.

use crate::bench_options::{BenchConfig, ProtocolSpec, loader_homes};
use crate::interrupt;
use crate::report::RunStats;
use augur_client::{
    Backoff, ChainRoom, CommitStats, DegreeChoice, HistoryRecorder, Outcome, Procedure,
    RetryPolicy, RunObserver, Runner, Session, SpeculationTuner, Transport, TunerSettings,
    run_with_retry, run_with_retry_for,
};
use augur_protocols::registry::{self, ProtocolInfo};
use augur_types::history::{HISTORY_FORMAT, History, HistoryHeader};
use augur_types::{AbortReason, NodeId, Placement, RequestForm};
use augur_workloads::{Audit, AuditProcedure, Condition, Workload};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// What every client of one protocol's run shares, and how each is started: the part of a
/// run that is the same whatever runs the cluster (tokio in [`drive`], the simulator in
/// `bench::sim`).
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
    /// How many clients each node has been given so far: the next one's rank there.
    ranks: BTreeMap<NodeId, usize>,
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
            ranks: BTreeMap::new(),
        }
    }

    /// A session over `transport` that records into the run's history, if one is kept.
    pub fn session<T: Transport>(&self, transport: T) -> Session<T> {
        match &self.recorder {
            Some(r) => Session::recorded(transport, r.clone()),
            None => Session::new(transport),
        }
    }

    /// The form the audit goes in: interactive (a transaction of many reads, however large,
    /// is never one message), unless the protocol takes reads only in one-shot transactions.
    pub fn audit_form(&self) -> RequestForm {
        match registry::info(&self.spec.name) {
            Ok(info) if info.reads_only_one_shot() => RequestForm::OneShot,
            _ => RequestForm::Interactive,
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
        let next_rank = self.ranks.entry(home).or_default();
        let rank = *next_rank;
        *next_rank += 1;
        let client = Client {
            session: self.session(transport).with_form(self.spec.txn_form),
            workload: self.workload.clone(),
            home,
            rank,
            rng: ChaCha8Rng::seed_from_u64(self.seeds.random()),
        };
        let speculation = Speculating {
            tuner: self.tuner.clone(),
            commit_stats: self.commit_stats.clone(),
        };
        let stats = Arc::clone(&self.stats);
        let (warmup, measured, pacing) = (self.warmup, self.measured, self.pacing);
        let backoff = self.config.backoff();
        async move {
            client_loop(
                &client,
                warmup,
                measured,
                pacing,
                backoff,
                &speculation,
                &stats,
            )
            .await;
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
                    isolation: info.claim(&spec.options.settings).to_string(),
                    faults: "none".into(),
                    settings: crate::check::flatten_settings(&config.workload_settings),
                },
                txns: recorder.records(),
            };
            match crate::check::write_history(&path, &history) {
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
/// of the measurement window (none for PostgreSQL). Fails if a loader cannot connect or a load
/// transaction does not commit.
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
    let load = load_initial_data(
        plan.workload.as_ref(),
        &config.placement,
        plan.recorder.as_ref(),
        connect_loader,
    );
    tokio::select! {
        loaded = load => loaded?,
        _ = interrupt::wait() => return Err(Interrupted.into()),
    }
    let tasks: Vec<_> = transports
        .into_iter()
        .map(|(home, transport)| tokio::spawn(plan.client(home, transport)))
        .collect();
    let started = Instant::now();
    let stop: Vec<_> = tasks.iter().map(|t| t.abort_handle()).collect();
    let counters = tokio::spawn(read_counters(probes, plan.warmup, plan.measured));
    let progress = Progress::start(&spec.label, plan.warmup + plan.measured);
    let mut auditor = None;
    let joined = async {
        for t in tasks {
            match t.await {
                Ok(client) => {
                    auditor.get_or_insert(client);
                }
                Err(e) => tracing::error!("a client task failed: {e}"),
            }
        }
    };
    let interrupted_after = tokio::select! {
        _ = joined => None,
        _ = interrupt::wait() => {
            stop.iter().for_each(|t| t.abort());
            counters.abort();
            let measured = started.elapsed().saturating_sub(plan.warmup).min(plan.measured);
            if measured.is_zero() {
                progress.finish();
                return Err(Interrupted.into());
            }
            Some(measured)
        }
    };
    progress.finish();
    if interrupted_after.is_some() {
        let mut stats = plan.finish(info, BTreeMap::new(), None);
        stats.interrupted_after = interrupted_after;
        return Ok(stats);
    }
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
        (true, Some(client), Some(audit)) => {
            let session = client.session.with_form(plan.audit_form());
            Some(run_audit(&session, audit).await)
        }
        _ => None,
    };
    Ok(plan.finish(info, counters, checks))
}

/// A signal stopped the benchmark before the measurement window of this protocol began: there is
/// nothing to report for it.
#[derive(Debug)]
pub struct Interrupted;

impl std::fmt::Display for Interrupted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("interrupted before the measurement began")
    }
}

impl std::error::Error for Interrupted {}

/// Load `workload`'s initial data (its [`Workload::load`] transactions, each run until it
/// commits) through dedicated loader sessions that `connect` opens, one per home of
/// [`loader_homes`], and close again on return, so that they never count as clients. Every
/// session takes the next transaction not yet started when it is free: which session runs a
/// transaction does not change what it writes (its rows are fixed by the workload and its
/// settings, and no two load transactions write the same key), so the data loaded is the same
/// whatever the timing. Their attempts go into the history like any other, when one is
/// recorded; they are never in the run's statistics. A load transaction that does not commit
/// fails the load, and the run: the others start nothing more.
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
            queue.fail(format!("a loader task failed: {e}"));
        }
    }
    queue.outcome()
}

/// A workload's load transactions not yet started, shared by its loader sessions.
#[derive(Clone)]
pub struct LoadQueue {
    procedures: Arc<Mutex<std::vec::IntoIter<Box<dyn Procedure>>>>,
    len: usize,
    /// Why the load failed, once a load transaction did not commit; no session starts
    /// another after that.
    failed: Arc<Mutex<Option<String>>>,
}

impl LoadQueue {
    /// The queue of `workload`'s load transactions (`None` when it loads nothing).
    pub fn of(workload: &dyn Workload) -> Option<LoadQueue> {
        let procedures = workload.load();
        (!procedures.is_empty()).then(|| LoadQueue {
            len: procedures.len(),
            procedures: Arc::new(Mutex::new(procedures.into_iter())),
            failed: Arc::default(),
        })
    }

    /// Record why the load failed (the first reason is kept) and start no other transaction.
    fn fail(&self, why: String) {
        self.failed.lock().expect("load failure").get_or_insert(why);
    }

    /// Load transactions no session has started.
    pub fn not_started(&self) -> usize {
        self.procedures.lock().expect("load queue").len()
    }

    /// Whether every load transaction committed, once the loaders are done: a run over a
    /// partly loaded database would measure something else, so a failed load is an error.
    pub fn outcome(&self) -> anyhow::Result<()> {
        match self.failed.lock().expect("load failure").as_ref() {
            None => Ok(()),
            Some(why) => Err(anyhow::anyhow!("loading the initial data failed: {why}")),
        }
    }

    /// Where the loader sessions go (see [`loader_homes`]).
    pub fn loader_homes(&self, placement: &Placement) -> Vec<NodeId> {
        loader_homes(placement, self.len)
    }

    /// One loader session: take the next transaction not yet started and run it until it
    /// commits (retrying aborts that may pass for two minutes), until none is left. A
    /// load transaction that does not commit fails the load
    /// ([`LoadQueue::outcome`]): its session stops, and the others start nothing more.
    pub fn loader<T: Transport>(
        &self,
        session: Session<T>,
    ) -> impl Future<Output = ()> + Send + 'static {
        let queue = self.clone();
        async move {
            let next = || {
                if queue.failed.lock().expect("load failure").is_some() {
                    return None;
                }
                queue.procedures.lock().expect("load queue").next()
            };
            while let Some(mut procedure) = next() {
                // Refusals that pass (a cluster still granting its first leases, or
                // reconfiguring on a starved machine) are tried again while patience lasts.
                let start = session.transport().now();
                let report =
                    run_with_retry_for(&session, procedure.as_mut(), LOAD_PATIENCE, load_pause)
                        .await;
                if !matches!(report.outcome, Outcome::Committed { .. }) {
                    let waited = session.transport().now().saturating_sub(start);
                    queue.fail(format!(
                        "{} did not commit in {} attempts over {:.1} s (the last: {:?})",
                        procedure.name(),
                        report.attempts,
                        waited.as_secs_f64(),
                        report.outcome,
                    ));
                    return;
                }
            }
        }
    }
}

/// How long a load transaction may keep being refused before the load fails: a cluster of
/// many nodes in one process on a busy machine can take this long to settle its leases.
const LOAD_PATIENCE: Duration = Duration::from_secs(120);

/// The wait after a load transaction's `aborts`th abort in a row: doubling from 1 ms to at most
/// 100 ms, so that its attempts span seconds — a partition being reconfigured, or a node not yet
/// leased, refuses at once, and retrying at once would spend every attempt in a few
/// milliseconds. Load transactions write keys of their own, so waits need no jitter.
fn load_pause(aborts: u32) -> Duration {
    Duration::from_millis(1 << aborts.saturating_sub(1).min(7)).min(Duration::from_millis(100))
}

/// Run `audit` as one read-only procedure ([`AuditProcedure`]) in the session's request form
/// ([`RunPlan::audit_form`]), retrying (it reads a lot and may meet a protocol that aborts it)
/// a few times; a failure to run at all is reported as a failed condition.
pub async fn run_audit<T: Transport>(
    session: &Session<T>,
    audit: Box<dyn Audit>,
) -> Vec<Condition> {
    const ATTEMPTS: u32 = 5;
    let mut procedure = AuditProcedure::new(audit);
    let report = run_with_retry(session, &mut procedure, ATTEMPTS).await;
    let why = match (&report.outcome, procedure.take_conditions()) {
        (Outcome::Committed { .. }, Some(conditions)) => return conditions,
        (Outcome::Committed { .. }, None) => "it committed without evaluating them".to_string(),
        (Outcome::Aborted(reason), _) => format!(
            "{} attempts aborted, the last for {reason:?}",
            report.attempts
        ),
        (Outcome::Unknown, _) => "its outcome is unknown".to_string(),
    };
    vec![Condition {
        name: "audit".into(),
        passed: false,
        detail: format!("the audit transaction could not run: {why}"),
    }]
}

/// One benchmark client: its session, and what it draws transactions from.
pub struct Client<T: Transport> {
    session: Session<T>,
    workload: Arc<dyn Workload>,
    home: NodeId,
    /// Its rank among the clients of `home` ([`Workload::next_for`]).
    rank: usize,
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
/// started inside the measurement window and the event came before its end, except aborts and
/// retries, which count in the totals when they happen inside the window whenever their
/// transaction started: a transaction begun in the warm-up that aborts over and over would
/// otherwise fill the samples with aborts while the totals said none.
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

    /// Whether an abort or retry at `at` counts in the totals.
    fn in_window(&self, at: Duration) -> bool {
        at >= self.measure_from && at <= self.end
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
        _started: Duration,
        at: Duration,
    ) {
        let mut stats = self.stats();
        if at <= self.end && reason != AbortReason::UserRollback {
            let second = at.saturating_sub(self.origin).as_secs() as usize;
            stats.interval(second).aborted += 1;
        }
        if self.in_window(at) {
            stats.record_abort(name, reason);
        }
    }

    fn retrying(&mut self, name: &'static str, _started: Duration, at: Duration) {
        if self.in_window(at) {
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

/// One client: run transactions, retrying aborted ones until they commit, each retry after a
/// randomized exponential `backoff` (the runner's; latency includes it). A transaction's final
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
    backoff: Backoff,
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
        backoff,
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
        let procedure = client.workload.next_for(client.home, client.rank, &mut rng);
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
    Some(crate::path_with_suffix(
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
