//! The anomaly catalogue: one scripted interleaving per classic isolation anomaly, run against
//! every protocol in the registry that serves interactive transactions (the order-then-execute
//! protocols, `s-smr`, take a transaction only whole, so a step-by-step interleaving cannot be
//! scripted for them; `augur check` runs them in the one-shot form).
//!
//! Each scenario is a handful of client sessions whose steps are pinned to virtual times in the
//! deterministic simulator (a three-node `lan` cluster, two replicas per partition, steps at least
//! 50 ms apart so each one has finished before the next begins). The sessions name their
//! transactions `T0`, `T1`, ... and follow the `list-append` convention, so the recorded history
//! can be judged by the checker: a key holds a space-separated list of unique numbers, and an
//! append reads the list and writes it back with a fresh element at the end.
//!
//! For every protocol a scenario asserts three things:
//!
//! 1. **The claim.** The history is valid at the level the protocol claims; in particular, when
//!    that level proscribes the scenario's anomaly, the checker does not find it.
//! 2. **The mechanism.** What the protocol's design makes happen: which transaction commits, which
//!    aborts and why, what each read returned (`clocksi-rep` aborts the second writer of a key;
//!    `2pc-baseline` validates every transaction's reads at commit, read-only ones too, and so
//!    aborts a reader that the snapshot protocols let commit; `sss` commits updates by the same
//!    2PC but never validates a read-only transaction; `walter` commits at the keys' preferred
//!    sites (their masters) alone and never waits for a lock; `rococo` refuses a piece whose reads
//!    are stale or that conflicts by read and write with a pending piece, and confirms a
//!    read-only transaction's reads in a second round; `rc`, `dst-occ` and `dst-2pl` run
//!    `occ`'s or `2pl`'s read-write transactions, and their read-only ones commit unvalidated
//!    (`rc`: the newest versions) or on a snapshot (`dst-*`); `nocc` installs whatever it is sent
//!    and so shows the anomaly). These expectations are data, one file per scenario beside
//!    this module (`lost_update.toml` for the scenario `lost_update`): `[every]` states what
//!    every protocol does, and each `[[expect]]` what the protocols it names do (see
//!    [`OutcomeFile`] and `docs/anomaly-catalogue.md` for the fields). Where the mechanism
//!    differs between protocols, the file names every protocol the catalogue runs, and a
//!    protocol it does not name fails the test ("lost_update: no expectation for protocol X:
//!    add one to ...lost_update.toml"): a newly registered protocol cannot pass by falling
//!    through. A file naming a protocol the catalogue does not run is an error too.
//! 3. **The verdict.** Whether the checker reports the anomaly, and whether it calls it allowed or
//!    proscribed at the levels around the claim.
//!
//! The sessions neither read nor commit speculatively, so `str` (which claims SPSI) and `planet`
//! (snapshot isolation) run as their base protocol `clocksi-rep` does, plus a local commit at
//! the coordinator's replicas before the global prepare: in every scenario they commit, abort
//! and read exactly as `clocksi-rep` does, and share its expectations.
//!
//! What each isolation level says about a scenario comes from [`Proscribes::proscribes`], the
//! checker's own definition, rather than from a second table here. Run with `--nocapture` to see
//! the verdicts and each protocol's outcome; `docs/anomaly-catalogue.md` records them.
//!
//! Some anomalies cannot be produced through augur's client API, whatever the protocol. The
//! client buffers writes and ships only the last write of each key, at commit, so no other
//! transaction can see an intermediate value (G1b), and none can see a write of a transaction
//! that is still reading, so information cannot flow in a circle (G1c; and G0 in list-append,
//! where every append reads the list it extends, so each write-write edge is also a write-read
//! edge). Those scenarios still run and assert that nothing leaks. The dirty-write scenario shows
//! what `nocc` does instead: both writers commit, the checker reports lost updates, and replicas
//! that received the two commits in different orders disagree. Aborted reads are not ruled out by
//! the API: a rollback never ships its writes, but a commit that was shipped can still end in an
//! abort, and `nocc` has no way to take back what it already installed.

use augur_check::{AnomalyKind, CheckOptions, CheckReport, CycleKind, CycleOrder, Proscribes};
use augur_check::{ValueModel, check};
use augur_client::{HistoryRecorder, Session, Transport, Txn, TxnError};
use augur_contract::{Protocol, ProtocolOptions};
use augur_protocols::registry::{self, PROTOCOLS, ProtocolInfo, ProtocolVisitor, visit};
use augur_runtime::sim::{SimConfig, SimTransport, Simulation};
use augur_types::history::{
    HISTORY_FORMAT, History, HistoryHeader, Op, RecordedOutcome, TxnRecord,
};
use augur_types::{IsolationLevel, Key, LatencyProfile, NodeId, Placement, Value};
use futures::future::BoxFuture;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

const SEED: u64 = 1;

/// Long enough for every scenario, including two-second participant timeouts (the aborted-read
/// scenario's T4, under `2pc-baseline`, starts at 3 s and waits for a crashed replica's vote).
const RUN_FOR: Duration = Duration::from_secs(6);

const G0: AnomalyKind = AnomalyKind::Cycle(CycleKind::G0, CycleOrder::Dependencies);
const G1C: AnomalyKind = AnomalyKind::Cycle(CycleKind::G1c, CycleOrder::Dependencies);
const G_SINGLE: AnomalyKind = AnomalyKind::Cycle(CycleKind::GSingle, CycleOrder::Dependencies);
const G2_ITEM: AnomalyKind = AnomalyKind::Cycle(CycleKind::G2Item, CycleOrder::Dependencies);

// ---------------------------------------------------------------------------------------------
// The cluster and its keys.

/// Three nodes in one data centre; partition `p` is mastered by node `p` and copied to node
/// `p + 1 (mod 3)`.
fn cluster() -> Arc<Placement> {
    let lan = LatencyProfile::named("lan").expect("lan profile");
    Arc::new(Placement::ring(lan, 3, 2).expect("valid layout"))
}

/// `x` lives in partition 0: master node 0, slave node 1.
fn x() -> Key {
    Key::numbered(0, 1)
}

/// `y` lives in partition 1: master node 1, slave node 2.
fn y() -> Key {
    Key::numbered(1, 2)
}

/// Every node holding a copy of `key`.
fn replicas_of(key: &Key) -> Vec<NodeId> {
    let placement = cluster();
    placement.replicas(placement.partition_of(key)).to_vec()
}

#[test]
fn the_keys_live_where_the_scenarios_say() {
    assert_eq!(replicas_of(&x()), [NodeId(0), NodeId(1)]);
    assert_eq!(replicas_of(&y()), [NodeId(1), NodeId(2)]);
}

// ---------------------------------------------------------------------------------------------
// Client scripts.

type S = Session<SimTransport>;

/// One session of a scenario: its coordinator and its script.
struct Client {
    home: NodeId,
    body: Box<dyn FnOnce(S) -> BoxFuture<'static, ()> + Send>,
}

/// A session on node `home` running `script`. An error ends the script early; the recorder has
/// already logged how the failed attempt ended.
fn client<F, Fut>(home: u32, script: F) -> Client
where
    F: FnOnce(S) -> Fut + Send + 'static,
    Fut: Future<Output = Result<(), TxnError>> + Send + 'static,
{
    Client {
        home: NodeId(home),
        body: Box::new(move |session| {
            Box::pin(async move {
                let _ = script(session).await;
            })
        }),
    }
}

/// Wait until `ms` milliseconds of virtual time have passed since the start of the run.
async fn at(session: &S, ms: u64) {
    let transport = session.transport();
    let target = Duration::from_millis(ms);
    let now = transport.now();
    assert!(
        now <= target,
        "the step due at {ms} ms is late: it is {now:?}"
    );
    transport.sleep(target - now).await;
}

fn parse(value: Option<&str>) -> Vec<u64> {
    value
        .unwrap_or("")
        .split_whitespace()
        .map(|e| e.parse().expect("a list-append element"))
        .collect()
}

async fn read_list(txn: &mut Txn<'_, SimTransport>, key: &Key) -> Result<Vec<u64>, TxnError> {
    let value = txn.read(key).await?;
    Ok(parse(
        value.as_deref().map(String::from_utf8_lossy).as_deref(),
    ))
}

/// Write `list` with `element` appended: the second half of an append whose read came earlier.
fn write_appended(
    txn: &mut Txn<'_, SimTransport>,
    key: &Key,
    mut list: Vec<u64>,
    element: u64,
) -> Result<(), TxnError> {
    list.push(element);
    let text: Vec<String> = list.iter().map(u64::to_string).collect();
    txn.write(key.clone(), Some(Value::from(text.join(" "))))
}

/// Append `element` to `key`: read the list, write it back one element longer.
async fn append(txn: &mut Txn<'_, SimTransport>, key: &Key, element: u64) -> Result<(), TxnError> {
    let list = read_list(txn, key).await?;
    write_appended(txn, key, list, element)
}

/// `T0`, at time zero: append each `(key, element)` and commit, giving the keys initial lists.
async fn setup(session: S, appends: Vec<(Key, u64)>) -> Result<(), TxnError> {
    let mut t0 = session.begin_named("T0", false).await?;
    for (key, element) in &appends {
        append(&mut t0, key, *element).await?;
    }
    t0.commit().await?;
    Ok(())
}

/// A read-only transaction named `name`, at `ms`, reading `keys`.
async fn read_at(session: &S, ms: u64, name: &'static str, keys: &[Key]) -> Result<(), TxnError> {
    at(session, ms).await;
    let mut txn = session.begin_named(name, true).await?;
    for key in keys {
        txn.read(key).await?;
    }
    txn.commit().await?;
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Scenarios and how they run.

enum Fault {
    Crash(NodeId),
    Restart(NodeId),
}

/// Sessions, plus node crashes and restarts at given times (in milliseconds).
struct Scenario {
    clients: Vec<Client>,
    faults: Vec<(u64, Fault)>,
}

impl Scenario {
    fn new(clients: Vec<Client>) -> Scenario {
        Scenario {
            clients,
            faults: Vec::new(),
        }
    }
}

/// Runs a scenario in `Simulation<P>` (or in one of `P`'s mutants) and returns its history.
struct Run {
    build: fn() -> Scenario,
    mutant: Option<&'static str>,
}

impl ProtocolVisitor for Run {
    type Output = History;

    fn visit<P: Protocol>(self, info: &'static ProtocolInfo) -> History {
        let scenario = (self.build)();
        // The scenarios are timed from the first millisecond, before any lease could be
        // granted: masters stay the placement's (`failover=off`; ignored by protocols without
        // fail-over).
        let options = Arc::new(ProtocolOptions {
            mutant: self.mutant.map(String::from),
            settings: [("failover".to_string(), "off".to_string())].into(),
            ..ProtocolOptions::default()
        });
        let mut sim = Simulation::<P>::new(cluster(), options, SimConfig::new(SEED));
        let recorder = HistoryRecorder::new();
        for c in scenario.clients {
            let recorder = recorder.clone();
            sim.spawn_client(c.home, move |t| (c.body)(Session::recorded(t, recorder)));
        }
        for (ms, fault) in scenario.faults {
            sim.run_until(Duration::from_millis(ms));
            match fault {
                Fault::Crash(node) => sim.crash(node),
                Fault::Restart(node) => sim.restart(node),
            }
        }
        sim.run_until(RUN_FOR);
        assert!(
            sim.clients_done(),
            "{}: a session had not finished after {RUN_FOR:?}",
            info.name
        );
        History {
            header: HistoryHeader {
                format: HISTORY_FORMAT,
                protocol: info.name.into(),
                workload: "list-append".into(),
                seed: SEED,
                isolation: info.isolation.to_string(),
                faults: "none".into(),
                settings: Default::default(),
            },
            txns: recorder.records(),
        }
    }
}

/// One protocol's run of a scenario, checked against the level the protocol claims.
struct Observed {
    info: &'static ProtocolInfo,
    history: History,
    /// Whether commit timestamps may serve the checker as evidence of version order.
    evidence: bool,
    report: CheckReport,
}

impl Observed {
    /// Run `build` under `info`'s protocol, or under its `mutant`, and check the history.
    fn run(
        info: &'static ProtocolInfo,
        build: fn() -> Scenario,
        mutant: Option<&'static str>,
    ) -> Observed {
        let history = visit(info.name, Run { build, mutant }).expect("a registered protocol");
        let mut observed = Observed {
            info,
            history,
            // A mutant's timestamps are evidence of nothing.
            evidence: info.commit_order_evidence && mutant.is_none(),
            report: CheckReport::default(),
        };
        observed.report = observed.check_at(observed.claimed());
        observed
    }

    fn claimed(&self) -> IsolationLevel {
        self.info.isolation
    }

    fn check_at(&self, level: IsolationLevel) -> CheckReport {
        let mut options = CheckOptions::new(level, ValueModel::ListAppend);
        options.commit_order_evidence = self.evidence;
        check(&self.history, &options)
    }

    fn txn(&self, name: &str) -> &TxnRecord {
        let mut found = self.history.txns.iter().filter(|t| t.name == name);
        let txn = found
            .next()
            .unwrap_or_else(|| panic!("{}: no transaction {name}", self.info.name));
        assert!(found.next().is_none(), "two transactions named {name}");
        txn
    }

    fn committed(&self, name: &str) -> bool {
        self.txn(name).is_committed()
    }

    fn commit_ts(&self, name: &str) -> Option<u64> {
        match self.txn(name).outcome {
            RecordedOutcome::Committed { commit_ts } => Some(commit_ts),
            _ => None,
        }
    }

    fn abort_reason(&self, name: &str) -> Option<&str> {
        match &self.txn(name).outcome {
            RecordedOutcome::Aborted { reason } => Some(reason),
            _ => None,
        }
    }

    /// The list `name`'s last read of `key` returned.
    fn read(&self, name: &str, key: &Key) -> Vec<u64> {
        let key = key.to_string();
        let value = self
            .txn(name)
            .ops
            .iter()
            .rev()
            .find_map(|op| match op {
                Op::Read { key: k, value } if *k == key => Some(value.as_deref()),
                _ => None,
            })
            .unwrap_or_else(|| panic!("{name} never read {key}"));
        parse(value)
    }

    /// Whether the checker found `kind` (allowed or not at the claimed level).
    fn shows(&self, kind: AnomalyKind) -> bool {
        self.report.anomalies.iter().any(|a| a.kind == kind)
    }

    /// Whether the checker found a cycle of `kind`, needing whatever orders.
    fn shows_cycle(&self, kind: CycleKind) -> bool {
        let is = |k| matches!(k, AnomalyKind::Cycle(c, _) if c == kind);
        self.report.anomalies.iter().any(|a| is(a.kind))
    }

    /// Whether checking at `level` finds `kind` and calls it proscribed.
    fn proscribed_at(&self, level: IsolationLevel, kind: AnomalyKind) -> bool {
        let report = self.check_at(level);
        report
            .anomalies
            .iter()
            .any(|a| a.kind == kind && a.proscribed)
    }

    /// One line per transaction and the anomalies found, for `--nocapture`.
    fn summary(&self) -> String {
        let mut out = format!("  {} (claims {}):\n", self.info.name, self.info.isolation);
        for t in &self.history.txns {
            let outcome = outcome_text(&t.outcome);
            let reads: Vec<String> = t
                .ops
                .iter()
                .filter_map(|op| match op {
                    Op::Read { key, value } => Some(format!("{key}=[{}]", value_text(value))),
                    Op::Write { .. } => None,
                })
                .collect();
            // The checker's explanations call a transaction T<history index>.
            let (index, name) = (t.index, &t.name);
            out += &format!("    #{index} {name} {outcome}; read {}\n", reads.join(" "));
        }
        if self.report.anomalies.is_empty() {
            out += "    no anomaly";
        }
        for a in &self.report.anomalies {
            out += &format!("    {}\n", a.to_string().replace('\n', "\n    "));
        }
        out.trim_end().to_string()
    }
}

fn value_text(value: &Option<String>) -> &str {
    value.as_deref().unwrap_or("")
}

/// What each level says about an anomaly shown by any of `kinds`.
fn verdicts(kinds: &[AnomalyKind]) -> String {
    let verdict = |level: IsolationLevel| {
        let proscribed = kinds.iter().any(|k| level.proscribes(*k));
        format!(
            "{level}: {}",
            if proscribed { "proscribed" } else { "allowed" }
        )
    };
    // Every level that proscribes anything: all but `None`.
    IsolationLevel::ALL[1..]
        .iter()
        .map(|level| verdict(*level))
        .collect::<Vec<_>>()
        .join("; ")
}

/// Whether the catalogue's step-by-step interactive scripts can run on `info`: not on an
/// order-then-execute protocol (`s-smr`), which must receive a transaction whole before it runs
/// it and refuses interactive reads; `augur check` covers it in the one-shot form.
fn scriptable(info: &ProtocolInfo) -> bool {
    info.forms.first() == Some(&augur_types::RequestForm::Interactive)
}

/// Run `build` against every registered protocol that serves interactive transactions. The
/// protocol must keep its claim (so an anomaly among `kinds` its level proscribes must not
/// appear); `expectations` (the scenario's data file) then state what the protocol's design
/// makes happen, and `also` asserts what holds for every protocol but a data file cannot say.
fn catalogue(
    kinds: &[AnomalyKind],
    build: fn() -> Scenario,
    expectations: Expectations,
    also: impl Fn(&Observed),
) {
    // A protocol the file does not name fails before anything runs.
    for info in PROTOCOLS.iter().filter(|p| scriptable(p)) {
        expectations.for_protocol(info.name);
    }
    let names: Vec<String> = kinds.iter().map(|k| k.name()).collect();
    eprintln!("{}: {}", names.join(" / "), verdicts(kinds));
    for info in PROTOCOLS.iter().filter(|p| scriptable(p)) {
        let observed = Observed::run(info, build, None);
        eprintln!("{}", observed.summary());
        let claimed = observed.claimed();
        for &kind in kinds {
            if claimed.proscribes(kind) {
                assert!(
                    !observed.shows(kind),
                    "{} claims {claimed}, which proscribes {kind}, yet shows it:\n{}",
                    info.name,
                    observed.summary()
                );
            }
        }
        let violations: Vec<String> = observed
            .report
            .violations()
            .map(|a| a.to_string())
            .collect();
        assert!(
            violations.is_empty(),
            "{} breaks its claim of {claimed}:\n{}",
            info.name,
            violations.join("\n")
        );
        expectations.check(&observed);
        also(&observed);
    }
}

// ---------------------------------------------------------------------------------------------
// Expectations: each scenario's data file, `<scenario>.toml` beside this module.

/// The expectations of the scenario built by the function `$scenario`, from `$scenario.toml`
/// beside this file (read at compile time). A file that does not parse, or that names a
/// protocol the catalogue does not run, fails the test that loads it.
macro_rules! expectations {
    ($scenario:ident) => {
        Expectations::parse(
            stringify!($scenario),
            concat!(
                "crates/augur/tests/it/catalogue/",
                stringify!($scenario),
                ".toml"
            ),
            include_str!(concat!(stringify!($scenario), ".toml")),
        )
        .unwrap_or_else(|e| panic!("{e}"))
    };
}

/// A scenario's expectations file as written: `[every]`, what every protocol does, and one
/// `[[expect]]` per group of protocols that behave alike.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ExpectationsFile {
    #[serde(default)]
    every: Option<OutcomeFile>,
    #[serde(default)]
    expect: Vec<OutcomeFile>,
}

/// One outcome as written. Transactions are named as the scenario names them (`T1`), keys `x`
/// and `y`, anomalies as the checker names them (`lost-update`, `G-single`; `a | b` for "one of
/// them"), levels in kebab-case (`snapshot-isolation`).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct OutcomeFile {
    /// The protocols this outcome is theirs (only in `[[expect]]`).
    #[serde(default)]
    protocols: Vec<String>,
    /// Why the protocol's design makes this happen; quoted when an expectation fails.
    #[serde(default)]
    why: String,
    /// Transactions that commit.
    #[serde(default)]
    committed: Vec<String>,
    /// Transactions that abort, with the reason they abort with.
    #[serde(default)]
    aborted: BTreeMap<String, String>,
    /// Transactions whose commit timestamps are all equal.
    #[serde(default)]
    same_commit_ts: Vec<String>,
    /// The list each transaction's last read of each key returned.
    #[serde(default)]
    reads: BTreeMap<String, BTreeMap<String, Vec<u64>>>,
    /// The checker finds no anomaly at all at the claimed level.
    #[serde(default)]
    no_anomaly: bool,
    /// Anomalies the checker finds at the claimed level (allowed or not).
    #[serde(default)]
    shows: Vec<String>,
    /// Per level: anomalies the checker finds and calls proscribed when checking at that level.
    #[serde(default)]
    proscribed: BTreeMap<String, Vec<String>>,
    /// Per level: anomalies the checker does not call proscribed when checking at that level.
    #[serde(default)]
    allowed: BTreeMap<String, Vec<String>>,
}

/// One of a set of anomaly kinds (written `a | b`; usually a single kind).
type OneOf = Vec<AnomalyKind>;

/// An outcome, resolved.
struct Outcome {
    why: String,
    committed: Vec<String>,
    aborted: Vec<(String, String)>,
    same_commit_ts: Vec<String>,
    reads: Vec<(String, Key, Vec<u64>)>,
    no_anomaly: bool,
    shows: Vec<OneOf>,
    proscribed: Vec<(IsolationLevel, OneOf)>,
    allowed: Vec<(IsolationLevel, OneOf)>,
}

/// A scenario's expectations: what every protocol does, and what each protocol does.
struct Expectations {
    scenario: &'static str,
    file: &'static str,
    every: Option<Outcome>,
    /// Each group of protocols named by one `[[expect]]`, with their outcome. Empty when the
    /// outcome does not depend on the protocol (then the file has only `[every]`).
    groups: Vec<(Vec<String>, Outcome)>,
}

/// Every anomaly kind the checker can report, to read their names.
fn anomaly_kinds() -> Vec<AnomalyKind> {
    let cycles = [
        CycleKind::G0,
        CycleKind::G1c,
        CycleKind::GSingle,
        CycleKind::GNonadjacent,
        CycleKind::G2Item,
    ];
    let orders = [
        CycleOrder::Dependencies,
        CycleOrder::Process,
        CycleOrder::RealTime,
    ];
    let mut kinds: Vec<AnomalyKind> = cycles
        .iter()
        .flat_map(|c| orders.iter().map(|o| AnomalyKind::Cycle(*c, *o)))
        .collect();
    kinds.extend([
        AnomalyKind::AbortedRead,
        AnomalyKind::IntermediateRead,
        AnomalyKind::Internal,
        AnomalyKind::GarbageRead,
        AnomalyKind::LostUpdate,
        AnomalyKind::IncompatibleOrder,
        AnomalyKind::FracturedRead,
        AnomalyKind::ConflictingWritersObserved,
        AnomalyKind::BankTotal,
        AnomalyKind::NegativeBalance,
    ]);
    kinds
}

fn one_of(text: &str) -> Result<OneOf, String> {
    let all = anomaly_kinds();
    text.split('|')
        .map(|name| {
            let name = name.trim();
            all.iter()
                .copied()
                .find(|k| k.name() == name)
                .ok_or_else(|| format!("no anomaly is called {name}"))
        })
        .collect()
}

fn level(name: &str) -> Result<IsolationLevel, String> {
    toml::Value::String(name.to_string())
        .try_into()
        .map_err(|_| format!("no isolation level is called {name}"))
}

fn scenario_key(name: &str) -> Result<Key, String> {
    match name {
        "x" => Ok(x()),
        "y" => Ok(y()),
        other => Err(format!("the scenarios have keys x and y, not {other}")),
    }
}

fn one_of_text(kinds: &OneOf) -> String {
    let names: Vec<String> = kinds.iter().map(|k| k.name()).collect();
    names.join(" or ")
}

fn list_text(list: &[u64]) -> String {
    let items: Vec<String> = list.iter().map(u64::to_string).collect();
    format!("[{}]", items.join(" "))
}

fn outcome_text(outcome: &RecordedOutcome) -> String {
    match outcome {
        RecordedOutcome::Committed { .. } => "committed".to_string(),
        RecordedOutcome::Aborted { reason } => format!("aborted ({reason})"),
        RecordedOutcome::Unknown => "unknown".to_string(),
    }
}

impl Outcome {
    fn resolve(written: OutcomeFile) -> Result<Outcome, String> {
        let per_level = |map: BTreeMap<String, Vec<String>>| -> Result<_, String> {
            let mut out = Vec::new();
            for (name, kinds) in map {
                let level = level(&name)?;
                for kind in kinds {
                    out.push((level, one_of(&kind)?));
                }
            }
            Ok(out)
        };
        let mut reads = Vec::new();
        for (txn, keys) in written.reads {
            for (key, list) in keys {
                reads.push((txn.clone(), scenario_key(&key)?, list));
            }
        }
        Ok(Outcome {
            why: written.why.split_whitespace().collect::<Vec<_>>().join(" "),
            committed: written.committed,
            aborted: written.aborted.into_iter().collect(),
            same_commit_ts: written.same_commit_ts,
            reads,
            no_anomaly: written.no_anomaly,
            shows: written
                .shows
                .iter()
                .map(|k| one_of(k))
                .collect::<Result<_, _>>()?,
            proscribed: per_level(written.proscribed)?,
            allowed: per_level(written.allowed)?,
        })
    }

    /// Assert this outcome of `o`; a failure names `scenario`, the protocol, what was expected
    /// and why, and shows the run's summary.
    fn check(&self, scenario: &str, o: &Observed) {
        let fail = |what: String| -> ! {
            panic!(
                "{scenario}, {}: {what}\n  expected because: {}\n{}",
                o.info.name,
                self.why,
                o.summary()
            )
        };
        for t in &self.committed {
            if !o.committed(t) {
                fail(format!(
                    "{t} should commit, but it {}",
                    outcome_text(&o.txn(t).outcome)
                ));
            }
        }
        for (t, reason) in &self.aborted {
            if o.abort_reason(t) != Some(reason.as_str()) {
                fail(format!(
                    "{t} should abort ({reason}), but it {}",
                    outcome_text(&o.txn(t).outcome)
                ));
            }
        }
        if let Some((first, rest)) = self.same_commit_ts.split_first() {
            for t in rest {
                if o.commit_ts(t) != o.commit_ts(first) {
                    fail(format!(
                        "{first} and {t} should have the same commit timestamp, not {:?} and {:?}",
                        o.commit_ts(first),
                        o.commit_ts(t)
                    ));
                }
            }
        }
        for (t, key, list) in &self.reads {
            let read = o.read(t, key);
            if read != *list {
                fail(format!(
                    "{t} should read {key} = {}, but read {}",
                    list_text(list),
                    list_text(&read)
                ));
            }
        }
        if self.no_anomaly && !o.report.anomalies.is_empty() {
            fail("the checker should find no anomaly".to_string());
        }
        for kinds in &self.shows {
            if !kinds.iter().any(|k| o.shows(*k)) {
                fail(format!("the checker should find {}", one_of_text(kinds)));
            }
        }
        for (level, kinds) in &self.proscribed {
            if !kinds.iter().any(|k| o.proscribed_at(*level, *k)) {
                fail(format!(
                    "checking at {level} should find {} and call it proscribed",
                    one_of_text(kinds)
                ));
            }
        }
        for (level, kinds) in &self.allowed {
            if kinds.iter().any(|k| o.proscribed_at(*level, *k)) {
                fail(format!(
                    "checking at {level} should not call {} proscribed",
                    one_of_text(kinds)
                ));
            }
        }
    }
}

impl Expectations {
    /// Read `scenario`'s expectations from `text`, the contents of `file`. Every protocol named
    /// must be one the catalogue runs, and named once.
    fn parse(
        scenario: &'static str,
        file: &'static str,
        text: &str,
    ) -> Result<Expectations, String> {
        let written: ExpectationsFile = toml::from_str(text).map_err(|e| format!("{file}: {e}"))?;
        let every = match written.every {
            Some(every) if !every.protocols.is_empty() => {
                return Err(format!(
                    "{file}: [every] cannot name protocols: it holds for all"
                ));
            }
            Some(every) => Some(Outcome::resolve(every).map_err(|e| format!("{file}: {e}"))?),
            None => None,
        };
        let mut named: Vec<String> = Vec::new();
        let mut groups = Vec::new();
        for group in written.expect {
            if group.protocols.is_empty() {
                return Err(format!("{file}: an [[expect]] table names no protocol"));
            }
            for name in &group.protocols {
                let Ok(info) = registry::info(name) else {
                    return Err(format!("{file}: no registered protocol is called {name}"));
                };
                if !scriptable(info) {
                    return Err(format!(
                        "{file}: the catalogue does not run {name}, which takes a transaction \
                         only whole"
                    ));
                }
                if named.contains(name) {
                    return Err(format!(
                        "{file}: protocol {name} is named by two [[expect]] tables"
                    ));
                }
                named.push(name.clone());
            }
            let protocols = group.protocols.clone();
            let outcome = Outcome::resolve(group).map_err(|e| format!("{file}: {e}"))?;
            groups.push((protocols, outcome));
        }
        Ok(Expectations {
            scenario,
            file,
            every,
            groups,
        })
    }

    /// The outcome stated for `protocol`, if the file states outcomes per protocol. A protocol
    /// the file does not name fails the scenario: every protocol the catalogue runs must have
    /// its mechanism stated, so a new one cannot pass by falling through.
    fn for_protocol(&self, protocol: &str) -> Option<&Outcome> {
        if self.groups.is_empty() {
            return None;
        }
        let found = self
            .groups
            .iter()
            .find(|(names, _)| names.iter().any(|n| n == protocol));
        match found {
            Some((_, outcome)) => Some(outcome),
            None => panic!(
                "{}: no expectation for protocol {protocol}: add one to {}",
                self.scenario, self.file
            ),
        }
    }

    /// Assert what the file says of `o`'s protocol.
    fn check(&self, o: &Observed) {
        let own = self.for_protocol(o.info.name);
        for outcome in self.every.iter().chain(own) {
            outcome.check(self.scenario, o);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// G0: dirty write.

/// T1 and T2 each append to `x` and `y`, interleaved w1(x) w2(x) w2(y) w1(y), and both commit at
/// the same instant; T3 (node 2) and T4 (node 1) then read both keys, between them covering
/// every replica of each.
fn dirty_write() -> Scenario {
    Scenario::new(vec![
        client(1, |s| setup(s, vec![(x(), 1), (y(), 2)])),
        client(0, |s| async move {
            at(&s, 100).await;
            let mut t1 = s.begin_named("T1", false).await?;
            append(&mut t1, &x(), 3).await?;
            at(&s, 250).await;
            append(&mut t1, &y(), 6).await?;
            at(&s, 300).await;
            t1.commit().await?;
            Ok(())
        }),
        client(2, |s| async move {
            at(&s, 150).await;
            let mut t2 = s.begin_named("T2", false).await?;
            append(&mut t2, &x(), 4).await?;
            at(&s, 200).await;
            append(&mut t2, &y(), 5).await?;
            at(&s, 300).await;
            t2.commit().await?;
            Ok(())
        }),
        client(
            2,
            |s| async move { read_at(&s, 400, "T3", &[x(), y()]).await },
        ),
        client(
            1,
            |s| async move { read_at(&s, 400, "T4", &[x(), y()]).await },
        ),
    ])
}

#[test]
fn g0_dirty_write() {
    catalogue(&[G0], dirty_write, expectations!(dirty_write), |o| {
        // Every append reads the list it extends, so in list-append a write-write edge always
        // comes with a write-read edge, and a G0 cycle would be a visibility cycle: impossible
        // when writes become visible only at commit.
        assert!(!o.shows_cycle(CycleKind::G0), "{}", o.summary());
    });
}

// ---------------------------------------------------------------------------------------------
// G1a: aborted read.

/// T1 appends to `x` and rolls back; T2 reads `x`. Then `x`'s slave crashes and T3's append to
/// `x` is aborted by its coordinator after the commit was shipped (the slave never answers);
/// T4 reads `x` once that abort is over.
fn aborted_read() -> Scenario {
    let mut scenario = Scenario::new(vec![
        client(1, |s| setup(s, vec![(x(), 1)])),
        client(0, |s| async move {
            at(&s, 100).await;
            let mut t1 = s.begin_named("T1", false).await?;
            append(&mut t1, &x(), 2).await?;
            at(&s, 150).await;
            t1.abort().await;
            Ok(())
        }),
        client(0, |s| async move {
            read_at(&s, 200, "T2", &[x()]).await?;
            read_at(&s, 3000, "T4", &[x()]).await
        }),
        client(0, |s| async move {
            at(&s, 300).await;
            let mut t3 = s.begin_named("T3", false).await?;
            append(&mut t3, &x(), 3).await?;
            t3.commit().await?;
            Ok(())
        }),
    ]);
    scenario
        .faults
        .push((250, Fault::Crash(replicas_of(&x())[1])));
    scenario
}

#[test]
fn g1a_aborted_read() {
    let kinds = [AnomalyKind::AbortedRead];
    catalogue(&kinds, aborted_read, expectations!(aborted_read), |_| {});
}

// ---------------------------------------------------------------------------------------------
// G1b: intermediate read.

/// T1 appends to `x` twice (writing `1 2`, then `1 2 3`) and commits; T2 reads `x` between the
/// two writes, T3 after the commit.
fn intermediate_read() -> Scenario {
    Scenario::new(vec![
        client(1, |s| setup(s, vec![(x(), 1)])),
        client(0, |s| async move {
            at(&s, 100).await;
            let mut t1 = s.begin_named("T1", false).await?;
            append(&mut t1, &x(), 2).await?;
            at(&s, 150).await;
            append(&mut t1, &x(), 3).await?;
            at(&s, 200).await;
            t1.commit().await?;
            Ok(())
        }),
        client(2, |s| async move {
            read_at(&s, 175, "T2", &[x()]).await?;
            read_at(&s, 250, "T3", &[x()]).await
        }),
    ])
}

#[test]
fn g1b_intermediate_read() {
    let kinds = [AnomalyKind::IntermediateRead];
    catalogue(
        &kinds,
        intermediate_read,
        expectations!(intermediate_read),
        |o| {
            // The client keeps only the last write of each key and ships it at commit: `1 2` never
            // leaves T1's session, under any protocol, and the history keeps both writes, so the
            // checker could have recognised a leak.
            let t1_writes = o
                .txn("T1")
                .ops
                .iter()
                .filter(|op| matches!(op, Op::Write { .. }));
            assert_eq!(t1_writes.count(), 2, "the history keeps both writes");
            assert!(!o.shows(AnomalyKind::IntermediateRead), "{}", o.summary());
        },
    );
}

// ---------------------------------------------------------------------------------------------
// G1c: circular information flow.

/// T1 appends to `x`, T2 appends to `y`; T2 reads `x` and commits, then T1 reads `y` and
/// commits. For information to flow both ways T2 would have to see T1's append before T1
/// commits, which buffered writes make impossible; this is the closest interleaving.
fn circular_flow() -> Scenario {
    Scenario::new(vec![
        client(1, |s| setup(s, vec![(x(), 1), (y(), 2)])),
        client(0, |s| async move {
            at(&s, 100).await;
            let mut t1 = s.begin_named("T1", false).await?;
            append(&mut t1, &x(), 3).await?;
            at(&s, 300).await;
            read_list(&mut t1, &y()).await?;
            at(&s, 350).await;
            t1.commit().await?;
            Ok(())
        }),
        client(2, |s| async move {
            at(&s, 150).await;
            let mut t2 = s.begin_named("T2", false).await?;
            append(&mut t2, &y(), 4).await?;
            at(&s, 200).await;
            read_list(&mut t2, &x()).await?;
            at(&s, 250).await;
            t2.commit().await?;
            Ok(())
        }),
    ])
}

#[test]
fn g1c_circular_information_flow() {
    catalogue(&[G1C], circular_flow, expectations!(circular_flow), |o| {
        // T2 cannot see T1's uncommitted append, so information cannot flow both ways.
        assert!(!o.shows_cycle(CycleKind::G1c), "{}", o.summary());
    });
}

// ---------------------------------------------------------------------------------------------
// Lost update.

/// T1 and T2 both read `x`; T1 then appends to what it read and commits, and T2 does the same;
/// T3 reads `x` last.
fn lost_update() -> Scenario {
    Scenario::new(vec![
        client(1, |s| setup(s, vec![(x(), 1)])),
        client(0, |s| async move {
            at(&s, 100).await;
            let mut t1 = s.begin_named("T1", false).await?;
            let list = read_list(&mut t1, &x()).await?;
            at(&s, 200).await;
            write_appended(&mut t1, &x(), list, 2)?;
            t1.commit().await?;
            Ok(())
        }),
        client(2, |s| async move {
            at(&s, 150).await;
            let mut t2 = s.begin_named("T2", false).await?;
            let list = read_list(&mut t2, &x()).await?;
            at(&s, 250).await;
            write_appended(&mut t2, &x(), list, 3)?;
            t2.commit().await?;
            Ok(())
        }),
        client(1, |s| async move { read_at(&s, 300, "T3", &[x()]).await }),
    ])
}

#[test]
fn lost_update_anomaly() {
    let kinds = [AnomalyKind::LostUpdate];
    catalogue(&kinds, lost_update, expectations!(lost_update), |_| {});
}

// ---------------------------------------------------------------------------------------------
// Read skew (G-single).

/// Read-only T1 reads `x`; T2 appends to both `x` and `y` and commits; T1 then reads `y`.
fn read_skew() -> Scenario {
    Scenario::new(vec![
        client(1, |s| setup(s, vec![(x(), 1), (y(), 2)])),
        client(0, |s| async move {
            at(&s, 100).await;
            let mut t1 = s.begin_named("T1", true).await?;
            t1.read(&x()).await?;
            at(&s, 250).await;
            t1.read(&y()).await?;
            t1.commit().await?;
            Ok(())
        }),
        client(2, |s| async move {
            at(&s, 150).await;
            let mut t2 = s.begin_named("T2", false).await?;
            append(&mut t2, &x(), 3).await?;
            append(&mut t2, &y(), 4).await?;
            t2.commit().await?;
            Ok(())
        }),
    ])
}

#[test]
fn g_single_read_skew() {
    catalogue(&[G_SINGLE], read_skew, expectations!(read_skew), |_| {});
}

// ---------------------------------------------------------------------------------------------
// Write skew (G2-item).

/// T1 and T2 both read `x` and `y`; T1 appends to `x`, T2 to `y`, each from what it read; T3
/// reads both afterwards.
fn write_skew() -> Scenario {
    Scenario::new(vec![
        client(1, |s| setup(s, vec![(x(), 1), (y(), 2)])),
        client(0, |s| async move {
            at(&s, 100).await;
            let mut t1 = s.begin_named("T1", false).await?;
            let xs = read_list(&mut t1, &x()).await?;
            read_list(&mut t1, &y()).await?;
            at(&s, 200).await;
            write_appended(&mut t1, &x(), xs, 3)?;
            t1.commit().await?;
            Ok(())
        }),
        client(2, |s| async move {
            at(&s, 150).await;
            let mut t2 = s.begin_named("T2", false).await?;
            read_list(&mut t2, &x()).await?;
            let ys = read_list(&mut t2, &y()).await?;
            at(&s, 250).await;
            write_appended(&mut t2, &y(), ys, 4)?;
            t2.commit().await?;
            Ok(())
        }),
        client(
            1,
            |s| async move { read_at(&s, 300, "T3", &[x(), y()]).await },
        ),
    ])
}

#[test]
fn g2_item_write_skew() {
    catalogue(&[G2_ITEM], write_skew, expectations!(write_skew), |_| {});
}

// ---------------------------------------------------------------------------------------------
// An observed transaction vanishes.

/// T1 appends to `x`; T2 (session B) reads it; every replica of `x` crashes and restarts; T3
/// (session B again) appends to `x`, and T4 reads `x` last.
fn vanishing_write() -> Scenario {
    let mut scenario = Scenario::new(vec![
        client(2, |s| async move {
            at(&s, 100).await;
            let mut t1 = s.begin_named("T1", false).await?;
            append(&mut t1, &x(), 1).await?;
            t1.commit().await?;
            Ok(())
        }),
        client(2, |s| async move {
            read_at(&s, 200, "T2", &[x()]).await?;
            at(&s, 500).await;
            let mut t3 = s.begin_named("T3", false).await?;
            append(&mut t3, &x(), 2).await?;
            t3.commit().await?;
            Ok(())
        }),
        client(2, |s| async move { read_at(&s, 600, "T4", &[x()]).await }),
    ]);
    for node in replicas_of(&x()) {
        scenario.faults.push((300, Fault::Crash(node)));
    }
    for node in replicas_of(&x()) {
        scenario.faults.push((400, Fault::Restart(node)));
    }
    scenario
}

#[test]
fn observed_transaction_vanishes() {
    let kinds = [AnomalyKind::LostUpdate, AnomalyKind::IncompatibleOrder];
    catalogue(
        &kinds,
        vanishing_write,
        expectations!(vanishing_write),
        |_| {},
    );
}

// ---------------------------------------------------------------------------------------------
// The catalogue notices a broken protocol, a protocol it has no expectation for, and an
// expectations file that names a protocol it does not run.

#[test]
fn a_protocol_without_expectations_fails_the_catalogue() {
    // A protocol registered tomorrow that happens to behave like `clocksi-rep` still has no
    // stated mechanism: the scenario must say so rather than pass it silently.
    static NEXT: ProtocolInfo = ProtocolInfo {
        name: "next-protocol",
        ..augur_protocols::clocksi_rep::INFO
    };
    let expectations = expectations!(lost_update);
    let mut o = Observed::run(registry::info("clocksi-rep").unwrap(), lost_update, None);
    expectations.check(&o);
    o.info = &NEXT;
    let failure = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| expectations.check(&o)))
        .expect_err("an unknown protocol must fail");
    let message = failure.downcast_ref::<String>().expect("a formatted panic");
    assert_eq!(
        message,
        "lost_update: no expectation for protocol next-protocol: add one to \
         crates/augur/tests/it/catalogue/lost_update.toml"
    );
}

#[test]
fn an_expectations_file_naming_a_protocol_the_catalogue_does_not_run_is_an_error() {
    let parse = |text| Expectations::parse("lost_update", "lost_update.toml", text).map(|_| ());
    let unknown = "[[expect]]\nprotocols = [\"nocc\", \"no-such-protocol\"]\n";
    assert_eq!(
        parse(unknown),
        Err("lost_update.toml: no registered protocol is called no-such-protocol".to_string())
    );
    let whole = "[[expect]]\nprotocols = [\"s-smr\"]\n";
    assert_eq!(
        parse(whole),
        Err(
            "lost_update.toml: the catalogue does not run s-smr, which takes a transaction \
             only whole"
                .to_string()
        )
    );
    let twice = "[[expect]]\nprotocols = [\"nocc\"]\n[[expect]]\nprotocols = [\"nocc\"]\n";
    assert_eq!(
        parse(twice),
        Err("lost_update.toml: protocol nocc is named by two [[expect]] tables".to_string())
    );
    let typo = "[[expect]]\nprotocols = [\"nocc\"]\ncommited = [\"T1\"]\n";
    let error = parse(typo).expect_err("an unknown field");
    assert!(error.contains("commited"), "{error}");
}

#[test]
fn a_protocol_that_breaks_its_claim_fails_the_catalogue() {
    // `clocksi-rep` with certification ignoring newer committed versions lets T2 of the lost
    // update scenario commit over T1's append: the claim check of `catalogue` must fail.
    let info = registry::info("clocksi-rep").expect("registered");
    let o = Observed::run(info, lost_update, Some("no-ww-certification"));
    assert!(o.committed("T1") && o.committed("T2"));
    assert_eq!(o.read("T3", &x()), [1, 3]);
    assert!(o.shows(AnomalyKind::LostUpdate));
    assert!(!o.report.is_valid(), "{}", o.summary());
}
