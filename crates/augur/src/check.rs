//! `augur check`: run a protocol in the deterministic simulator under a seed's fault schedule,
//! record the history, and check it against the isolation level the protocol claims.
//!
//! Each seed runs two phases. In the *safety* phase clients run the workload while faults are
//! injected; every attempt is recorded. In the *liveness* phase every fault is lifted (partitions
//! healed, crashed nodes restarted, links reliable again) and every client must commit once more
//! within [`LIVENESS_DEADLINE`]. Then, with the clients gone, the cluster is left alone for
//! [`QUIESCENCE`] and every node must have let go of everything it kept for transactions
//! ([`Protocol::leftovers`]: a writer still held, a queue entry nobody removes). The recorded
//! history is then checked: the dependency-graph checker for `list-append` and `rw-register`,
//! the invariants for `bank`; and what the protocol promises beyond its level
//! ([`ProtocolInfo::promises`]: read-only transactions that never abort, updates acknowledged
//! only after the readers that missed them, dependencies that follow commit timestamps, reads
//! no staler than the clocks' skew allows) must hold in the history.

use crate::BadInput;
use crate::faults::{FaultAction, FaultSchedule, FaultSpec, MAX_CLOCK_SKEW};
use crate::serial_replay;
use augur_check::{CheckOptions, CheckReport, SolverBudget, ValueModel};
use augur_client::{ChainRoom, CommitStats, Degree, DegreeChoice, HistoryRecorder, RetryPolicy};
use augur_client::{RunObserver, Runner, Session, Transport};
use augur_contract::{Protocol, ProtocolOptions};
use augur_protocols::common::{lock_commit, membership};
use augur_protocols::registry::{self, IsolationLevel, Promise, ProtocolInfo, ProtocolVisitor};
use augur_runtime::sim::{ForgeryCounts, SimConfig, Simulation};
use augur_types::history::{
    HISTORY_FORMAT, History, HistoryHeader, Op, RecordedOutcome, TxnRecord,
};
use augur_types::{
    AbortReason, LatencyProfile, Layout, NodeId, PartitionId, Placement, PlacementError,
    RequestForm,
};
use augur_workloads::Workload;
use clap::Args;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// Workloads whose histories can be checked.
pub const CHECK_WORKLOADS: &[&str] = &["list-append", "rw-register", "bank"];

/// How long after the faults end every client must have committed again.
pub const LIVENESS_DEADLINE: Duration = Duration::from_secs(30);

/// How long the cluster runs on its own after the liveness phase before the quiescence check:
/// long enough for every retry, re-subscription and doubled timeout of the protocols to fire.
pub const QUIESCENCE: Duration = Duration::from_secs(20);

/// How much a checked client speculates: every client reads speculatively and commits
/// speculatively where the protocol allows, so the histories exercise dependencies, flow
/// dependencies and cascading aborts. Its chain makes room right after a speculative commit
/// fills it ([`ChainRoom::AfterSpecCommit`]), so two speculative commits stay unresolved
/// between transactions.
pub const CHECK_SPECULATION: Degree = Degree {
    reads: true,
    chain: 3,
};

#[derive(Args, Clone, Debug)]
pub struct CheckArgs {
    /// The protocol to check (see `augur protocols`).
    #[arg(long, required_unless_present = "input", default_value = "")]
    pub protocol: String,
    /// Check this recorded history file instead of running anything; the protocol and workload
    /// are read from its header.
    #[arg(long, conflicts_with_all = ["seeds", "faults", "history", "mutant"])]
    pub input: Option<PathBuf>,
    /// With `--input`: check against this isolation level (a name `augur protocols` prints,
    /// e.g. `serializable`, `strict serializable`, `snapshot isolation`, `read committed`)
    /// instead of the one the history's protocol claims. Needed for a history of a protocol
    /// augur does not know whose header names no level it knows.
    #[arg(long, requires = "input")]
    pub level: Option<String>,
    /// With `--input`: the wall time the search over placements of writes whose place in a
    /// key's version order is unknown may take before the history is declared undecided (exit
    /// status 3).
    #[arg(long, requires = "input", default_value_t = 10.0)]
    pub solver_seconds: f64,
    /// With `--input`: the same search's budget in steps (one test of a placement against the
    /// graph), which, unlike the time, gives the same verdict on every machine.
    #[arg(long, requires = "input", default_value_t = 2_000_000)]
    pub solver_steps: u64,
    /// list-append, rw-register or bank.
    #[arg(long, default_value = "list-append")]
    pub workload: String,
    /// Seeds to run: `A..B` (inclusive) or one seed.
    #[arg(long, default_value = "1..20")]
    pub seeds: String,
    /// Faults: none, all (what the protocol's network model allows), or a comma-separated list
    /// of delay, reorder, loss, partition, crash, skew.
    #[arg(long, default_value = "none")]
    pub faults: String,
    /// Write each seed's history here as JSON lines (with several seeds, `-seed<N>` is added
    /// before the extension).
    #[arg(long)]
    pub history: Option<PathBuf>,
    /// Run a deliberately broken variant of the protocol instead.
    #[arg(long)]
    pub mutant: Option<String>,
    /// Nodes in the simulated cluster.
    #[arg(long, default_value_t = 3)]
    pub nodes: usize,
    /// Replicas per partition (master included); default min(2, nodes).
    #[arg(long)]
    pub replication: Option<usize>,
    /// How partitions are laid out over the nodes: `ring` (partition i mastered by node i) or
    /// `hash` (consistent hashing; `hash:partitions=N:vnodes=V`).
    #[arg(long, default_value = "ring")]
    pub placement: String,
    /// Latency profile: lan, 3dc, ec2-9dc.
    #[arg(long, default_value = "3dc")]
    pub latency: String,
    /// Clients per node.
    #[arg(long, default_value_t = 4)]
    pub clients: usize,
    /// Length of the safety phase, in simulated seconds.
    #[arg(long, default_value_t = 10.0)]
    pub duration: f64,
    /// Workload settings (`key=value`), and protocol settings as `protocol.key=value`, e.g.
    /// `protocol.precise_clock=on` for clocksi-rep (an unknown one is refused, naming the valid
    /// ones).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// Check every seed even after one fails.
    #[arg(long)]
    pub keep_going: bool,
    /// With `--input`: also list the anomalies the protocol's level allows (by default only
    /// their number follows the verdict).
    #[arg(long)]
    pub verbose: bool,
    /// How clients submit transactions: `interactive`, `one-shot`, or `mixed` (half the
    /// clients of each node in each form, so one history has both). Default: `mixed` for a
    /// protocol that serves both forms in full, one-shot for an order-then-execute protocol.
    #[arg(long)]
    pub txn_form: Option<String>,
}

/// The request forms of a check's clients.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CheckForms {
    All(RequestForm),
    /// Alternating, client by client.
    Mixed,
}

impl CheckForms {
    /// Parse `given` for a protocol serving `forms`. Default: mixed when it serves both in
    /// full (interactive listed first); otherwise its first form (an order-then-execute
    /// protocol lists one-shot first: it serves interactive transactions only for blind
    /// writes).
    fn parse(given: Option<&str>, info: &ProtocolInfo) -> Result<CheckForms, String> {
        let both = info.forms.len() > 1;
        let forms = match given {
            None if both && info.forms[0] == RequestForm::Interactive => {
                return Ok(CheckForms::Mixed);
            }
            None => return Ok(CheckForms::All(info.forms[0])),
            Some("mixed") => CheckForms::Mixed,
            Some(name) => CheckForms::All(RequestForm::parse(name).ok_or_else(|| {
                format!("unknown transaction form '{name}'; valid: interactive, one-shot, mixed")
            })?),
        };
        let unserved = match forms {
            CheckForms::Mixed if !both => Some("both"),
            CheckForms::All(form) if !info.forms.contains(&form) => Some(form.name()),
            _ => None,
        };
        match unserved {
            Some(what) => Err(format!(
                "{} does not serve {what} transaction forms",
                info.name
            )),
            None => Ok(forms),
        }
    }

    /// The form of the `index`th client.
    fn of(self, index: usize) -> RequestForm {
        match self {
            CheckForms::All(form) => form,
            CheckForms::Mixed if index.is_multiple_of(2) => RequestForm::Interactive,
            CheckForms::Mixed => RequestForm::OneShot,
        }
    }

    fn name(self) -> &'static str {
        match self {
            CheckForms::All(form) => form.name(),
            CheckForms::Mixed => "mixed",
        }
    }
}

/// A validated check configuration.
#[derive(Clone)]
pub struct CheckConfig {
    pub info: &'static ProtocolInfo,
    pub workload: String,
    pub workload_settings: BTreeMap<String, String>,
    /// Protocol settings (`--set protocol.KEY=VALUE`, without the prefix), validated against
    /// the protocol; they go to every node as `ProtocolOptions::settings`.
    pub protocol_settings: BTreeMap<String, String>,
    pub seeds: std::ops::RangeInclusive<u64>,
    pub faults: FaultSpec,
    pub faults_arg: String,
    pub history: Option<PathBuf>,
    pub mutant: Option<String>,
    pub nodes: usize,
    pub replication: usize,
    pub latency: String,
    pub clients_per_node: usize,
    pub safety: Duration,
    pub keep_going: bool,
    pub forms: CheckForms,
    placement: Arc<Placement>,
}

fn bad(msg: impl Into<String>) -> anyhow::Error {
    BadInput(msg.into()).into()
}

/// Parse `A..B` (inclusive) or `N`.
pub fn parse_seeds(s: &str) -> Result<std::ops::RangeInclusive<u64>, String> {
    let parse = |x: &str| {
        x.trim()
            .parse::<u64>()
            .map_err(|_| format!("--seeds expects A..B or N, got '{s}'"))
    };
    let (a, b) = match s.split_once("..") {
        Some((a, b)) => (parse(a)?, parse(b.trim_start_matches('='))?),
        None => {
            let n = parse(s)?;
            (n, n)
        }
    };
    if a > b {
        return Err(format!("--seeds {s}: the range is empty"));
    }
    Ok(a..=b)
}

impl CheckArgs {
    pub fn validate(&self) -> anyhow::Result<CheckConfig> {
        let info = registry::info(&self.protocol).map_err(|e| bad(e.to_string()))?;
        if !CHECK_WORKLOADS.contains(&self.workload.as_str()) {
            return Err(bad(format!(
                "workload '{}' cannot be checked; checkable workloads: {}",
                self.workload,
                CHECK_WORKLOADS.join(", ")
            )));
        }
        let seeds = parse_seeds(&self.seeds).map_err(bad)?;
        let faults = FaultSpec::parse(&self.faults, info).map_err(bad)?;
        if let Some(m) = &self.mutant
            && !info.mutants.iter().any(|(name, _)| name == m)
        {
            let valid: Vec<&str> = info.mutants.iter().map(|(n, _)| *n).collect();
            return Err(bad(if valid.is_empty() {
                format!("protocol {} has no mutants", info.name)
            } else {
                format!(
                    "unknown mutant '{m}' for {}; valid mutants: {}",
                    info.name,
                    valid.join(", ")
                )
            }));
        }
        if self.clients == 0 {
            return Err(bad("--clients must be at least 1"));
        }
        if !(self.duration > 0.0 && self.duration.is_finite()) {
            return Err(bad("--duration must be a positive number of seconds"));
        }
        let profile = LatencyProfile::named(&self.latency).map_err(|e| bad(e.to_string()))?;
        let dcs = profile.dcs.len().min(self.nodes.max(1));
        let profile = profile.truncated(dcs).map_err(|e| bad(e.to_string()))?;
        // A protocol that replicates the whole database to every node defaults to it.
        let replication = self.replication.unwrap_or(if info.full_replication() {
            self.nodes
        } else {
            self.nodes.clamp(1, 2)
        });
        let layout: Layout = self
            .placement
            .parse()
            .map_err(|e: PlacementError| bad(e.to_string()))?;
        let placement = Placement::build(layout, profile, self.nodes, replication)
            .map_err(|e| bad(e.to_string()))?;
        let placement = Arc::new(placement);
        let (given, protocol_settings) = split_settings(&self.set).map_err(bad)?;
        info.validate_for_cluster(
            &protocol_settings,
            placement.node_count(),
            placement.replication_factor(),
        )
        .map_err(|e| bad(e.to_string()))?;
        let workload = augur_workloads::build(&self.workload, &given, placement.clone())
            .map_err(|e| bad(e.to_string()))?;
        let forms = CheckForms::parse(self.txn_form.as_deref(), info).map_err(bad)?;
        Ok(CheckConfig {
            info,
            workload: self.workload.clone(),
            workload_settings: flatten_settings(&workload.settings()),
            protocol_settings,
            seeds,
            faults,
            faults_arg: self.faults.clone(),
            history: self.history.clone(),
            mutant: self.mutant.clone(),
            nodes: self.nodes,
            replication,
            latency: self.latency.clone(),
            clients_per_node: self.clients,
            safety: Duration::from_secs_f64(self.duration),
            keep_going: self.keep_going,
            forms,
            placement,
        })
    }
}

/// Settings by name, as `--set` gives them.
pub type Settings = BTreeMap<String, String>;

/// `--set KEY=VALUE` arguments split into the workload's settings and the protocol's (given as
/// `protocol.KEY=VALUE`, returned without the prefix); an argument without `=` is refused.
pub fn split_settings(set: &[String]) -> Result<(Settings, Settings), String> {
    let mut workload = BTreeMap::new();
    let mut protocol = BTreeMap::new();
    for kv in set {
        let Some((k, v)) = kv.split_once('=') else {
            return Err(format!("--set expects KEY=VALUE, got '{kv}'"));
        };
        let (k, v) = (k.trim(), v.trim().to_string());
        match k.strip_prefix("protocol.") {
            Some(pk) => protocol.insert(pk.to_string(), v),
            None => workload.insert(k.to_string(), v),
        };
    }
    Ok((workload, protocol))
}

/// A workload's settings as the string map a history header carries.
pub fn flatten_settings(v: &serde_json::Value) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    if let Some(map) = v.as_object() {
        for (k, v) in map {
            let s = match v {
                serde_json::Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            out.insert(k.clone(), s);
        }
    }
    out
}

/// Check `history` (of workload `history.header.workload`) against what `info` claims; commit
/// timestamps serve as evidence of version order if the protocol says they may and
/// `trust_timestamps` allows.
pub fn check_recorded(
    history: &History,
    info: &ProtocolInfo,
    trust_timestamps: bool,
) -> anyhow::Result<CheckReport> {
    // The header names the claim under the settings the history was recorded with.
    let level = history.header.isolation.parse().unwrap_or(info.isolation);
    check_at_level(
        history,
        level,
        info.commit_order_evidence && trust_timestamps,
        SolverBudget::default(),
    )
}

/// Check `history` against `level`; commit timestamps serve as evidence of version order if
/// `commit_order_evidence` (only for a protocol whose timestamps order versions); `solver`
/// bounds the search over placements of writes with no evidence of their place.
pub fn check_at_level(
    history: &History,
    level: IsolationLevel,
    commit_order_evidence: bool,
    solver: SolverBudget,
) -> anyhow::Result<CheckReport> {
    let workload = history.header.workload.as_str();
    Ok(match (workload, value_model(workload)) {
        ("bank", _) => augur_check::bank::check_bank(history, level).map_err(anyhow::Error::msg)?,
        (_, Some(model)) => {
            let mut options = CheckOptions::new(level, model);
            options.commit_order_evidence = commit_order_evidence;
            options.solver = solver;
            augur_check::check(history, &options)
        }
        (other, None) => {
            return Err(bad(format!(
                "workload '{other}' cannot be checked; checkable workloads: {}",
                CHECK_WORKLOADS.join(", ")
            )));
        }
    })
}

/// How a checkable workload's values order each key's versions, for the dependency graph;
/// `None` for `bank`, whose values do not (it is checked by invariants).
fn value_model(workload: &str) -> Option<ValueModel> {
    match workload {
        "list-append" => Some(ValueModel::ListAppend),
        "rw-register" => Some(ValueModel::RwRegister),
        _ => None,
    }
}

/// The staleness bound Δ of [`Promise::BoundedStaleness`] when each node's clock is offset by
/// at most `max_clock_skew` either way: two clocks differ by up to ε = 2·`max_clock_skew`,
/// DST's §3.4 bound is Δ = 2ε for clocks that run at the true rate (the simulator's do), and
/// one [`CLOCK_TICK`] more covers a read timestamp's logical part starting at 0 where an
/// update's may not.
pub fn staleness_bound(max_clock_skew: Duration) -> Duration {
    4 * max_clock_skew + CLOCK_TICK
}

/// The physical unit of the hybrid timestamps that [`Promise::BoundedStaleness`] is promised
/// over: microseconds, the unit of the simulator's clocks.
pub const CLOCK_TICK: Duration = Duration::from_micros(1);

/// The level to check a recorded history against, and whether its commit timestamps order
/// versions: the level `given` (`--level`), else what the protocol of its header claims (one
/// of augur's, or a reference peer of `augur bench`), else the level its header names; commit
/// timestamps only for one of augur's protocols that says they may.
fn level_of(
    header: &augur_types::history::HistoryHeader,
    given: Option<&str>,
) -> anyhow::Result<(IsolationLevel, bool)> {
    let known = registry::info(&header.protocol)
        .ok()
        .or_else(|| crate::peers::peer(&header.protocol));
    let evidence = known.is_some_and(|info| info.commit_order_evidence);
    if let Some(given) = given {
        let level = given
            .parse::<IsolationLevel>()
            .map_err(|e| bad(e.to_string()))?;
        return Ok((level, evidence));
    }
    if let Some(info) = known {
        // The header names the claim under the settings it was recorded with.
        let level = header.isolation.parse().unwrap_or(info.isolation);
        return Ok((level, evidence));
    }
    match header.isolation.parse::<IsolationLevel>() {
        Ok(level) => Ok((level, false)),
        Err(_) => Err(bad(format!(
            "the history's protocol '{}' is not one augur knows and its header names no \
             isolation level it knows ('{}'): name the level to check with --level (one of: {})",
            header.protocol,
            header.isolation,
            IsolationLevel::ALL.map(|l| l.to_string()).join(", ")
        ))),
    }
}

/// `augur check --input FILE [--level LEVEL]`: check a recorded history (from `augur bench
/// --history`, an earlier `augur check --history`, or another tool writing the documented
/// format) against `level`, by default the claim of the protocol named in its header.
pub fn check_file(
    path: &Path,
    level: Option<&str>,
    verbose: bool,
    solver: SolverBudget,
) -> anyhow::Result<()> {
    let file = std::fs::File::open(path)
        .map_err(|e| bad(format!("cannot read {}: {e}", path.display())))?;
    let history = augur_check::jsonl::read(std::io::BufReader::new(file))
        .map_err(|e| bad(format!("{}: {e}", path.display())))?;
    let given = level.is_some();
    let (level, evidence) = level_of(&history.header, level)?;
    let started = Instant::now();
    let report = check_at_level(&history, level, evidence, solver)?;
    let s = &report.stats;
    println!(
        "{}: {} ({level}{}) on {}, {} attempts ({} committed, {} aborted, {} unknown) checked in {:.2} s",
        path.display(),
        history.header.protocol,
        if given { ", as given" } else { "" },
        history.header.workload,
        history.txns.len(),
        s.committed,
        s.aborted,
        s.unknown,
        started.elapsed().as_secs_f64()
    );
    // The verdict first; then what proves it (the proscribed anomalies), and the allowed ones
    // only on request.
    let violations: Vec<_> = report.violations().collect();
    let allowed = report.anomalies.len() - violations.len();
    if violations.is_empty() && report.undecided.is_empty() {
        println!("  valid: no anomaly {level} proscribes");
    } else if !violations.is_empty() {
        println!(
            "  INVALID: {} anomal{} proscribed by {level}:",
            violations.len(),
            if violations.len() == 1 { "y" } else { "ies" }
        );
        for a in &violations {
            println!("  {}", a.to_string().replace('\n', "\n  "));
        }
    }
    if verbose {
        for a in report.anomalies.iter().filter(|a| !violations.contains(a)) {
            println!("  allowed: {}", a.to_string().replace('\n', "\n  "));
        }
    } else if allowed > 0 {
        println!("  ({allowed} anomalies {level} allows were found; --verbose lists them)");
    }
    if !violations.is_empty() {
        return Err(anyhow::anyhow!(
            "{} anomal{} proscribed by {level}",
            violations.len(),
            if violations.len() == 1 { "y" } else { "ies" }
        ));
    }
    if !report.undecided.is_empty() {
        // Never a pass: the placements left open might hide a violation.
        let parts = match report.undecided.len() {
            1 => "1 part".to_string(),
            n => format!("{n} parts"),
        };
        println!("  UNDECIDED: {parts} of the history not decided within the solver's budget:");
        for u in &report.undecided {
            println!("  {}", u.to_string().replace('\n', "\n  "));
        }
        return Err(Undecided(format!(
            "no anomaly {level} proscribes was found, but {parts} of the history could not be \
             decided"
        ))
        .into());
    }
    Ok(())
}

/// The exit status of `augur check --input` when no proscribed anomaly was found but part of
/// the history could not be decided within the solver's budget.
pub const EXIT_UNDECIDED: u8 = 3;

/// A check that found no violation but could not decide all of the history: never a pass.
#[derive(Debug)]
pub struct Undecided(pub String);

impl std::fmt::Display for Undecided {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Undecided {}

/// What one seed produced.
pub struct SeedOutcome {
    pub seed: u64,
    pub history: History,
    pub report: CheckReport,
    /// `Err` names the clients that did not commit after the faults ended, or what a node
    /// still kept once the cluster was left alone ([`QUIESCENCE`]).
    pub liveness: Result<(), String>,
    /// `Err` names a promise of the protocol ([`ProtocolInfo::promises`]) that the history
    /// breaks, and where.
    pub promises: Result<(), String>,
    pub messages_lost: u64,
    /// The serial replay of the history, for protocols that promise [`Promise::SerialReplay`]
    /// and whose history replayed.
    pub replayed: Option<serial_replay::Replayed>,
}

impl SeedOutcome {
    pub fn passed(&self) -> bool {
        self.report.is_valid() && self.liveness.is_ok() && self.promises.is_ok()
    }
}

impl CheckConfig {
    /// Run and check one seed.
    pub fn run_seed(&self, seed: u64) -> anyhow::Result<SeedOutcome> {
        let run = RunSeed {
            config: self,
            seed,
            forgery: 0.0,
        };
        let (history, liveness, messages_lost, _, replayed) =
            registry::visit(self.info.name, run).map_err(|e| bad(e.to_string()))?;
        let report = self.check_history(&history)?;
        let promises = self.check_promises_after(&history, replayed.as_ref());
        Ok(SeedOutcome {
            seed,
            history,
            report,
            liveness,
            promises,
            messages_lost,
            replayed: replayed.and_then(Result::ok),
        })
    }

    /// `Err` names a promise of the protocol ([`ProtocolInfo::promises`]) that `history`, one of
    /// this configuration's runs, breaks. Those that read the version order from values hold
    /// vacuously where the values do not give it: on `bank`, and, for
    /// `MissedWriterRepliesAfterReader`, which needs lists, on `rw-register`.
    pub fn check_promises(&self, history: &History) -> Result<(), String> {
        self.check_promises_after(history, None)
    }

    /// [`Self::check_promises`], given the serial replay of `history` when it was already run.
    fn check_promises_after(
        &self,
        history: &History,
        replayed: Option<&Result<serial_replay::Replayed, String>>,
    ) -> Result<(), String> {
        let model = value_model(&self.workload);
        self.info
            .promises
            .iter()
            .try_for_each(|promise| match (promise, model) {
                (Promise::AbortFreeReadOnly, _) => no_read_only_aborts(history),
                (Promise::MissedWriterRepliesAfterReader, Some(ValueModel::ListAppend)) => {
                    missed_writers_reply_after_readers(history)
                }
                (Promise::TimestampsOrderDependencies, Some(model)) => {
                    augur_check::timestamps_order_dependencies(history, model)
                }
                (Promise::BoundedStaleness, Some(model)) => {
                    augur_check::bounded_staleness(history, model, self.promised_staleness())
                }
                (Promise::SerialReplay, _) => match replayed {
                    Some(replayed) => replayed.as_ref().map(|_| ()).map_err(Clone::clone),
                    None => serial_replay::replay(history, &crate::procedures()).map(|_| ()),
                },
                (
                    Promise::MissedWriterRepliesAfterReader
                    | Promise::TimestampsOrderDependencies
                    | Promise::BoundedStaleness,
                    _,
                ) => Ok(()),
            })
    }

    /// How stale [`Promise::BoundedStaleness`] lets a read-only transaction read in this
    /// configuration's runs: DST §3.4's bound ([`staleness_bound`]), plus the read staleness δ
    /// the protocol was told to read at (§5.4, `read_staleness_ms`), plus, when nodes crash and
    /// restart, the slack of DST's durable claim ceiling, by which a restarted node's writers
    /// may start above the clock (`lock_commit::CLAIM_SLACK`), plus, under fail-over, the lead
    /// of a promoted partition's floor over the clock of the node that evicted its master
    /// (`lock_commit::LEAD_BOUND`; `dst_occ`, *Fail-over*).
    fn promised_staleness(&self) -> Duration {
        let delta = self
            .protocol_settings
            .get(lock_commit::READ_STALENESS)
            .and_then(|ms| ms.parse::<u64>().ok())
            .map_or(Duration::ZERO, Duration::from_millis);
        let faults = &self.faults;
        let restart = if faults.crash || faults.master_crash || faults.leader_crash {
            lock_commit::CLAIM_SLACK
        } else {
            Duration::ZERO
        };
        let failover_on =
            self.info.fails_over() && membership::failover_asked(&self.protocol_settings);
        let promotion = if failover_on {
            lock_commit::LEAD_BOUND
        } else {
            Duration::ZERO
        };
        staleness_bound(self.max_clock_skew()) + delta + restart + promotion
    }

    /// The bound on each node's clock offset in this configuration's runs. The simulator draws
    /// the offsets once per seed and keeps them through crashes and restarts, and no fault of
    /// the schedule changes a clock at run time, so this bound holds for the whole run
    /// ([`Promise::BoundedStaleness`] relies on it).
    pub fn max_clock_skew(&self) -> Duration {
        if self.faults.skew {
            MAX_CLOCK_SKEW
        } else {
            Duration::ZERO
        }
    }

    /// Run one seed with a lying network: each message between nodes and each client request is
    /// altered in flight with probability `forgery`, and what still decodes and passes the
    /// receiver's checks is delivered ([`Simulation::set_forgery`]). Nothing is checked but that
    /// the run completes: no handler may panic, whatever a peer or client sends. Returns what
    /// the forgery did, so a test can see that forged messages really reached the handlers.
    pub fn run_forged(&self, seed: u64, forgery: f64) -> anyhow::Result<ForgeryCounts> {
        let run = RunSeed {
            config: self,
            seed,
            forgery,
        };
        let (_, _, _, counts, _) =
            registry::visit(self.info.name, run).map_err(|e| bad(e.to_string()))?;
        Ok(counts)
    }

    /// Check a recorded history against this configuration's protocol claim. A mutant's commit
    /// timestamps are not trusted as evidence of version order.
    pub fn check_history(&self, history: &History) -> anyhow::Result<CheckReport> {
        check_recorded(history, self.info, self.mutant.is_none())
    }

    /// The command that replays `seed` alone.
    pub fn replay_command(&self, seed: u64, history: &Path) -> String {
        let mut cmd = format!(
            "augur check --protocol {} --workload {} --seeds {seed} --faults {}",
            self.info.name, self.workload, self.faults_arg
        );
        if let Some(m) = &self.mutant {
            cmd += &format!(" --mutant {m}");
        }
        for (k, v) in &self.protocol_settings {
            cmd += &format!(" --set protocol.{k}={v}");
        }
        cmd += &format!(
            " --nodes {} --replication {} --latency {} --clients {} --duration {}",
            self.nodes,
            self.replication,
            self.latency,
            self.clients_per_node,
            self.safety.as_secs_f64()
        );
        let layout = self.placement.layout();
        if layout != Layout::Ring {
            cmd += &format!(" --placement {layout}");
        }
        cmd += &format!(" --txn-form {}", self.forms.name());
        cmd += &format!(" --history {}", history.display());
        cmd
    }

    fn history_path(&self, seed: u64) -> Option<PathBuf> {
        let path = self.history.as_ref()?;
        if self.seeds.start() == self.seeds.end() {
            return Some(path.clone());
        }
        Some(crate::path_with_suffix(path, &format!("seed{seed}")))
    }
}

/// Runs one seed of one protocol in the simulator.
struct RunSeed<'a> {
    config: &'a CheckConfig,
    seed: u64,
    /// Probability of altering each message and request in flight ([`Simulation::set_forgery`]).
    forgery: f64,
}

/// What a seed's run produced: its history, whether every client committed after the faults,
/// how many messages were lost, and what forging messages did.
type SeedRun = (
    History,
    Result<(), String>,
    u64,
    ForgeryCounts,
    Option<Result<serial_replay::Replayed, String>>,
);

impl ProtocolVisitor for RunSeed<'_> {
    type Output = SeedRun;

    fn visit<P: Protocol>(self, info: &'static ProtocolInfo) -> Self::Output {
        let config = self.config;
        let faults = config.faults;
        let options = ProtocolOptions {
            settings: config.protocol_settings.clone(),
            mutant: config.mutant.clone(),
            ..ProtocolOptions::default()
        };
        let mut sim_config = SimConfig::new(self.seed);
        sim_config.procedures = crate::procedures();
        sim_config.client_timeout = Duration::from_secs(3);
        sim_config.max_clock_skew = config.max_clock_skew();
        sim_config.jitter = if faults.reorder {
            Duration::from_millis(5)
        } else {
            Duration::from_micros(500)
        };
        let mut sim: Simulation<P> =
            Simulation::new(config.placement.clone(), Arc::new(options), sim_config);
        // The schedule has its own random stream, so adding a fault kind does not change the
        // workload the clients draw.
        let mut fault_rng = ChaCha8Rng::seed_from_u64(self.seed ^ 0x6661_756c_7473);
        let schedule = FaultSchedule::draw(&faults, config.nodes, config.safety, &mut fault_rng);
        let workload = augur_workloads::build(
            &config.workload,
            &config.workload_settings,
            config.placement.clone(),
        )
        .expect("validated settings build");
        let recorder = HistoryRecorder::new();
        let liveness = Arc::new(AtomicBool::new(false));
        let done = Arc::new(AtomicUsize::new(0));
        let mut clients = 0;
        for node in config.placement.nodes() {
            for _ in 0..config.clients_per_node {
                let form = config.forms.of(clients);
                clients += 1;
                spawn_client(
                    &mut sim,
                    node,
                    form,
                    workload.clone(),
                    recorder.clone(),
                    liveness.clone(),
                    done.clone(),
                );
            }
        }
        sim.set_forgery(self.forgery);
        if faults.delay {
            sim.set_delay_spikes(0.05, Duration::from_millis(50));
        }
        if faults.reorder {
            sim.set_fifo(false);
        }
        let mut crashed_leader = None;
        let mut crashed_master = None;
        for (at, action) in schedule.actions {
            sim.run_until(at);
            match action {
                FaultAction::Partition(groups) => sim.partition(&groups),
                FaultAction::Heal => sim.heal(),
                FaultAction::Crash(n) => sim.crash(n),
                FaultAction::Restart(n) => sim.restart(n),
                FaultAction::CrashLeader => {
                    crashed_leader = current_leader(&sim, &config.placement);
                    if let Some(n) = crashed_leader {
                        sim.crash(n);
                    }
                }
                FaultAction::RestartLeader => {
                    if let Some(n) = crashed_leader.take() {
                        sim.restart(n);
                    }
                }
                FaultAction::CrashMaster { pick } => {
                    let partition = PartitionId(pick % config.placement.partition_count() as u32);
                    crashed_master = current_master(&sim, &config.placement, partition);
                    if let Some(n) = crashed_master {
                        sim.crash(n);
                    }
                }
                FaultAction::Pause(n) => sim.pause(n),
                FaultAction::Resume(n) => sim.resume(n),
                FaultAction::RestartMaster => {
                    if let Some(n) = crashed_master.take() {
                        sim.restart(n);
                    }
                }
                FaultAction::Loss(p) => sim.set_message_loss(p),
            }
        }
        sim.run_until(config.safety);
        // Liveness: lift every fault; each client must now commit once more.
        sim.heal();
        sim.set_message_loss(0.0);
        sim.set_delay_spikes(0.0, Duration::ZERO);
        sim.set_fifo(true);
        for n in config.placement.nodes() {
            sim.restart(n);
        }
        liveness.store(true, Ordering::SeqCst);
        let deadline = config.safety + LIVENESS_DEADLINE;
        let finished = sim.run_until_clients_done(deadline, Duration::from_millis(500));
        if finished {
            sim.run_for(QUIESCENCE);
        }
        let history = History {
            header: HistoryHeader {
                format: HISTORY_FORMAT,
                protocol: info.name.to_string(),
                workload: config.workload.clone(),
                seed: self.seed,
                isolation: info.claim(&config.protocol_settings).to_string(),
                faults: faults.to_string(),
                settings: config.workload_settings.clone(),
            },
            txns: recorder.records(),
        };
        let replayed = info
            .promises
            .contains(&Promise::SerialReplay)
            .then(|| serial_replay::replay(&history, &crate::procedures()));
        let live = if finished {
            quiescent(&sim, &config.placement)
                .and_then(|()| replicas_agree(&sim, &config.placement))
                .and_then(|()| replicas_hold_the_serial_state(&sim, replayed.as_ref()))
        } else {
            let stuck = clients - done.load(Ordering::SeqCst);
            // What the nodes keep then is where to look first.
            let kept = leftovers(&sim, &config.placement);
            let kept = if kept.is_empty() {
                "nothing".to_string()
            } else {
                kept.join("; ")
            };
            Err(format!(
                "{stuck} of {clients} clients did not commit within {LIVENESS_DEADLINE:?} after the faults ended (nodes keep: {kept})"
            ))
        };
        (
            history,
            live,
            sim.messages_lost(),
            sim.forgery_counts(),
            replayed,
        )
    }
}

/// `Err` names the first read-only attempt in `history` that aborted because of concurrency,
/// and how many did. SSS's promise (§III) is that read-only transactions never abort because
/// of other transactions; the injected faults may still end one: a client that gave up on an
/// unreachable node (`Timeout`), a coordinator that crashed (`TransactionLost`), a reader
/// that outlived the versions kept (`SnapshotTooOld`), or a read sent to a replica that a
/// failure took out of the partition's in-sync set, or that held no lease (`Reconfigured`:
/// fail-over).
fn no_read_only_aborts(history: &History) -> Result<(), String> {
    let failures = [
        AbortReason::Timeout,
        AbortReason::TransactionLost,
        AbortReason::SnapshotTooOld,
        AbortReason::Reconfigured,
    ]
    .map(AbortReason::name);
    let mut aborted = history.txns.iter().filter(|t| {
        t.read_only
            && matches!(&t.outcome,
                RecordedOutcome::Aborted { reason } if !failures.contains(&reason.as_str()))
    });
    let Some(first) = aborted.next() else {
        return Ok(());
    };
    Err(format!(
        "{} read-only attempts aborted because of concurrency, the first #{} ({}) of client {}: {:?}",
        1 + aborted.count(),
        first.index,
        first.name,
        first.client,
        first.outcome
    ))
}

/// `Err` names a committed update that a committed read-only transaction missed (on
/// `list-append`: the reader's read of a key lacks the element the update appended there, so
/// the reader is serialized before it) and whose client heard of its commit before the
/// reader's did.
fn missed_writers_reply_after_readers(history: &History) -> Result<(), String> {
    use std::collections::HashMap;
    // Per key, each committed update's appended element (the last of the list it wrote), with
    // when its client heard of the commit.
    let mut appended: HashMap<&str, Vec<(&str, &TxnRecord)>> = HashMap::new();
    for t in history
        .txns
        .iter()
        .filter(|t| !t.read_only && t.is_committed())
    {
        for op in &t.ops {
            if let Op::Write {
                key,
                value: Some(list),
            } = op
                && let Some(element) = list.split_ascii_whitespace().next_back()
            {
                appended.entry(key).or_default().push((element, t));
            }
        }
    }
    for r in history
        .txns
        .iter()
        .filter(|t| t.read_only && t.is_committed())
    {
        for op in &r.ops {
            let Op::Read { key, value } = op else {
                continue;
            };
            let seen: Vec<&str> = value
                .as_deref()
                .map(|v| v.split_ascii_whitespace().collect())
                .unwrap_or_default();
            for (element, w) in appended.get(key.as_str()).into_iter().flatten() {
                if !seen.contains(element) && w.complete_us < r.complete_us {
                    return Err(format!(
                        "update #{} ({} of client {}) appended {element} to {key}, which read-only \
                         #{} (client {}) did not see, yet its client heard of its commit at {} µs, \
                         before the reader's did at {} µs",
                        w.index, w.name, w.client, r.index, r.client, w.complete_us, r.complete_us
                    ));
                }
            }
        }
    }
    Ok(())
}

/// `Err` names a partition whose replicas hold different committed states once the cluster
/// was left alone, for protocols that report their state ([`Protocol::state_digests`]).
fn replicas_agree<P: Protocol>(sim: &Simulation<P>, placement: &Placement) -> Result<(), String> {
    let mut seen: BTreeMap<PartitionId, (NodeId, u64)> = BTreeMap::new();
    for node in placement.nodes() {
        for (partition, digest) in sim.node(node).state_digests() {
            match seen.get(&partition) {
                Some((first, d)) if *d != digest => {
                    return Err(format!(
                        "replicas of partition {} disagree: node {} and node {} hold different states",
                        partition.0, first.0, node.0
                    ));
                }
                Some(_) => {}
                None => {
                    seen.insert(partition, (node, digest));
                }
            }
        }
    }
    Ok(())
}

/// `Err` names a partition whose replicas' final state is not the one the serial replay of
/// the run's history ends in (`replayed`: for protocols that promise
/// [`Promise::SerialReplay`]), when the replay's final state is known (no attempt's outcome was
/// lost).
fn replicas_hold_the_serial_state<P: Protocol>(
    sim: &Simulation<P>,
    replayed: Option<&Result<serial_replay::Replayed, String>>,
) -> Result<(), String> {
    // A replay that fails is reported by the promise's own check.
    let Some(Ok(replayed)) = replayed else {
        return Ok(());
    };
    let placement = sim.placement();
    let Some(expected) = replayed.digests(placement) else {
        return Ok(());
    };
    for node in placement.nodes() {
        for (partition, digest) in sim.node(node).state_digests() {
            if expected.get(&partition).copied().unwrap_or(0) != digest {
                return Err(format!(
                    "node {} holds a state of partition {} that the serial replay of the \
                     {} committed transactions does not end in",
                    node.0, partition.0, replayed.committed
                ));
            }
        }
    }
    Ok(())
}

/// The node most live nodes believe leads the sequencer (ties to the lowest id), if any does.
fn current_leader<P: Protocol>(sim: &Simulation<P>, placement: &Placement) -> Option<NodeId> {
    let mut votes: BTreeMap<NodeId, usize> = BTreeMap::new();
    for node in placement.nodes().filter(|n| sim.is_up(*n)) {
        if let Some(leader) = sim.node(node).leader() {
            *votes.entry(leader).or_default() += 1;
        }
    }
    let most = votes.values().copied().max()?;
    votes.into_iter().find(|(_, v)| *v == most).map(|(n, _)| n)
}

/// The node most live nodes believe masters `partition` ([`Protocol::master_of`]), if any.
fn current_master<P: Protocol>(
    sim: &Simulation<P>,
    placement: &Placement,
    partition: PartitionId,
) -> Option<NodeId> {
    let mut votes: BTreeMap<NodeId, usize> = BTreeMap::new();
    for node in placement.nodes().filter(|n| sim.is_up(*n)) {
        if let Some(master) = sim.node(node).master_of(partition) {
            *votes.entry(master).or_default() += 1;
        }
    }
    let most = votes.values().copied().max()?;
    votes.into_iter().find(|(_, v)| *v == most).map(|(n, _)| n)
}

/// `Err` names, per node, what the protocol still keeps for transactions ([`Protocol::leftovers`])
/// once the cluster has been left alone after its clients stopped.
fn quiescent<P: Protocol>(sim: &Simulation<P>, placement: &Placement) -> Result<(), String> {
    let left = leftovers(sim, placement);
    if left.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "not quiescent {QUIESCENCE:?} after the clients stopped: {}",
            left.join("; ")
        ))
    }
}

/// What each node still keeps for transactions ([`Protocol::leftovers`]), one entry per node
/// that keeps something.
fn leftovers<P: Protocol>(sim: &Simulation<P>, placement: &Placement) -> Vec<String> {
    placement
        .nodes()
        .filter_map(|node| {
            let kept: Vec<String> = sim
                .node(node)
                .leftovers()
                .into_iter()
                .filter(|(_, count)| *count > 0)
                .map(|(what, count)| format!("{what} {count}"))
                .collect();
            (!kept.is_empty()).then(|| format!("node {}: {}", node.0, kept.join(", ")))
        })
        .collect()
}

fn spawn_client<P: Protocol>(
    sim: &mut Simulation<P>,
    home: NodeId,
    form: RequestForm,
    workload: Arc<dyn Workload>,
    recorder: HistoryRecorder,
    liveness: Arc<AtomicBool>,
    done: Arc<AtomicUsize>,
) {
    let mut rng = sim.fork_rng();
    sim.spawn_client(home, move |transport| async move {
        let session = Session::recorded(transport, recorder).with_form(form);
        let degree = DegreeChoice::Fixed(CHECK_SPECULATION);
        let mut runner = Runner::new(
            &session,
            degree,
            ChainRoom::AfterSpecCommit,
            RetryPolicy::NEVER,
            CommitStats::new(),
        );
        let mut ended = Ended::default();
        loop {
            let in_liveness = liveness.load(Ordering::SeqCst);
            let procedure = workload.next(home, &mut rng);
            let started = session.transport().now();
            runner.run(procedure, started, &mut ended).await;
            // A transaction that only committed speculatively, into a chain with room, ended
            // nothing yet: the next one follows at once.
            let Some(committed) = ended.committed.take() else {
                continue;
            };
            if in_liveness && committed {
                // Whatever is still speculative resolves first, so its record is complete.
                runner.resolve_all(&mut ended).await;
                done.fetch_add(1, Ordering::SeqCst);
                return;
            }
            if !committed {
                // Back off a little so a client refused at once does not spin, and so clients
                // that collided do not collide again in lockstep.
                let pause = rng.random_range(0..=20_000u64);
                session
                    .transport()
                    .sleep(Duration::from_micros(pause))
                    .await;
            }
        }
    });
}

/// Whether the last transaction a checked client learned the final outcome of committed:
/// the one it just ran, or the oldest speculative commit its chain resolved to make room.
#[derive(Default)]
struct Ended {
    committed: Option<bool>,
}

impl RunObserver for Ended {
    fn committed(&mut self, _: &'static str, _: Duration, _: Duration, _: Duration) {
        self.committed = Some(true);
    }

    fn aborted(&mut self, _: &'static str, _: AbortReason, _: Duration, _: Duration) {
        self.committed = Some(false);
    }

    fn unknown(&mut self, _: &'static str, _: Duration, _: Duration) {
        self.committed = Some(false);
    }
}

/// `augur check`: every seed of the range; exits 1 on the first failing seed (or at the end with
/// `--keep-going`).
pub fn run(args: &CheckArgs) -> anyhow::Result<()> {
    if let Some(path) = &args.input {
        let solver = SolverBudget {
            steps: args.solver_steps,
            time: std::time::Duration::try_from_secs_f64(args.solver_seconds).map_err(|_| {
                bad(format!(
                    "--solver-seconds {}: not a duration",
                    args.solver_seconds
                ))
            })?,
        };
        return check_file(path, args.level.as_deref(), args.verbose, solver);
    }
    let config = args.validate()?;
    let level = config.info.claim(&config.protocol_settings);
    let started = Instant::now();
    let mut failed = Vec::new();
    let mut totals = Totals::default();
    for seed in config.seeds.clone() {
        let outcome = config.run_seed(seed)?;
        totals.add(&outcome);
        if let Some(path) = config.history_path(seed) {
            write_history(&path, &outcome.history)?;
        }
        if !outcome.passed() {
            report_failure(&config, &outcome, level);
            failed.push(seed);
            if !config.keep_going {
                break;
            }
        }
    }
    let seeds_run = totals.seeds;
    println!(
        "{}{} ({level}) on {}{}{}, faults {}: {} of {seeds_run} seeds passed in {:.1} s",
        config.info.name,
        config
            .protocol_settings
            .iter()
            .map(|(k, v)| format!(" {k}={v}"))
            .collect::<String>(),
        config.workload,
        match config.placement.layout() {
            Layout::Ring => String::new(),
            other => format!(
                " over {} partitions placed by {other}",
                config.placement.partition_count()
            ),
        },
        config
            .mutant
            .as_ref()
            .map(|m| format!(" [mutant {m}]"))
            .unwrap_or_default(),
        config.faults,
        seeds_run - failed.len(),
        started.elapsed().as_secs_f64()
    );
    println!(
        "  {} transactions: {} committed, {} aborted, {} unknown; {} messages lost to faults",
        totals.txns, totals.committed, totals.aborted, totals.unknown, totals.lost
    );
    if config.info.promises.contains(&Promise::SerialReplay) {
        println!(
            "  serial replay: {} of {} committed run again over the serial order's values; final \
             state compared with the replicas in {} of {seeds_run} seeds",
            totals.replayed_in_full, totals.committed, totals.final_states_compared
        );
    }
    if !totals.allowed.is_empty() {
        let seen: Vec<String> = totals
            .allowed
            .iter()
            .map(|(k, n)| format!("{k} ×{n}"))
            .collect();
        println!("  anomalies {level} allows, seen: {}", seen.join(", "));
    }
    if failed.is_empty() {
        Ok(())
    } else {
        Err(anyhow::anyhow!(
            "{} seed(s) failed: {}",
            failed.len(),
            failed
                .iter()
                .map(u64::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ))
    }
}

#[derive(Default)]
struct Totals {
    seeds: usize,
    txns: usize,
    committed: usize,
    aborted: usize,
    unknown: usize,
    lost: u64,
    allowed: BTreeMap<String, usize>,
    /// Committed attempts the serial replay ran over the serial order's values, and seeds whose
    /// final state it compared (protocols promising [`Promise::SerialReplay`]).
    replayed_in_full: usize,
    final_states_compared: usize,
}

impl Totals {
    fn add(&mut self, o: &SeedOutcome) {
        self.seeds += 1;
        if let Some(replayed) = &o.replayed {
            self.replayed_in_full += replayed.checked;
            self.final_states_compared += usize::from(replayed.final_state.is_some());
        }
        self.txns += o.history.txns.len();
        self.committed += o.history.txns.iter().filter(|t| t.is_committed()).count();
        self.aborted += o.history.txns.iter().filter(|t| t.is_aborted()).count();
        self.unknown += o
            .history
            .txns
            .iter()
            .filter(|t| !t.is_committed() && !t.is_aborted())
            .count();
        self.lost += o.messages_lost;
        for a in o.report.anomalies.iter().filter(|a| !a.proscribed) {
            *self.allowed.entry(a.kind.name()).or_default() += 1;
        }
    }
}

fn report_failure(config: &CheckConfig, outcome: &SeedOutcome, level: IsolationLevel) {
    let violations: Vec<_> = outcome.report.violations().collect();
    if !violations.is_empty() {
        println!(
            "seed {}: {} anomal{} proscribed by {level}:",
            outcome.seed,
            violations.len(),
            if violations.len() == 1 { "y" } else { "ies" }
        );
        for a in violations.iter().take(5) {
            println!("  {}", a.to_string().replace('\n', "\n  "));
        }
        if violations.len() > 5 {
            println!("  ... and {} more", violations.len() - 5);
        }
    }
    if let Err(why) = &outcome.liveness {
        println!("seed {}: liveness: {why}", outcome.seed);
    }
    if let Err(why) = &outcome.promises {
        println!("seed {}: broken promise: {why}", outcome.seed);
    }
    let path = config
        .history_path(outcome.seed)
        .unwrap_or_else(|| PathBuf::from(format!("history-seed{}.jsonl", outcome.seed)));
    println!("replay: {}", config.replay_command(outcome.seed, &path));
}

/// Write `history` to `path` as JSON lines.
pub fn write_history(path: &Path, history: &History) -> anyhow::Result<()> {
    let file = std::fs::File::create(path)
        .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))?;
    augur_check::jsonl::write(history, std::io::BufWriter::new(file))?;
    Ok(())
}
