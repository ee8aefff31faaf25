//! Scenario tests for `str`'s speculative snapshots (STR §5–§6.2): the anomalies of Fig. 1a
//! (non-atomic snapshot), Fig. 1b (snapshot holding two conflicting transactions) and Fig. 2
//! (indirect conflict through a remote final-committed transaction), each run in the
//! deterministic simulator twice: against `str`, which must not produce the anomaly, and against
//! its `naive-speculative-reads` mutant (any prepared or local-committed version within the
//! snapshot is readable, no cache partition, no OLC/FFC parking), which must.
//!
//! Every scenario uses the "3dc" latency profile (VA, OR, IE: one-way delays of about 33.5 ms
//! VA–OR, 34 ms VA–IE, 60 ms OR–IE, 0.1 ms within a DC) with a ring placement where key
//! `Key::numbered(p, _)` lives in partition `p`, mastered by node `p`. Each scenario asserts its
//! layout and its timeline (who had local committed, final committed or aborted when a read
//! returned), then what the reader observed, and runs the SPSI checker over the recorded
//! history.

use augur_check::{Anomaly, AnomalyKind, CheckOptions, ValueModel, check};
use augur_client::{
    CommitProgress, HistoryRecorder, Outcome, Resolution, Session, Transport, TxnError,
};
use augur_contract::ProtocolOptions;
use augur_protocols::str::{SpeculationCounters, Str};
use augur_runtime::sim::{SimConfig, Simulation};
use augur_types::history::{HISTORY_FORMAT, History, HistoryHeader};
use augur_types::{AbortReason, IsolationLevel, Key, LatencyProfile, NodeId, Placement};
use bytes::Bytes;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

const SEED: u64 = 11;

/// Which engine a scenario runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Variant {
    Str,
    Naive,
}

impl Variant {
    /// The placement's masters from the first millisecond ([`crate::common::static_masters`]).
    fn options(self) -> ProtocolOptions {
        ProtocolOptions {
            mutant: match self {
                Variant::Str => None,
                Variant::Naive => Some("naive-speculative-reads".into()),
            },
            ..crate::common::static_masters()
        }
    }
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// One client operation of a scripted transaction.
enum Step {
    /// Client think time inside the transaction.
    Sleep(Duration),
    /// Read the key, logging the value under the label.
    Read(&'static str, Key),
    Write(Key, &'static str),
}

/// A transaction run by its own client.
struct Script {
    name: &'static str,
    home: u32,
    /// When the client begins the transaction.
    start: Duration,
    /// Begun with `begin_speculative`: may read local-committed versions.
    speculative_reads: bool,
    /// Committed with `commit_speculative`; the final outcome is then awaited.
    speculative_commit: bool,
    steps: Vec<Step>,
}

/// What a scripted transaction's client saw, with the virtual times it saw it.
#[derive(Debug, Default)]
struct TxnLog {
    begun_at: Option<Duration>,
    /// Successful reads: label, value, when the value reached the client.
    reads: Vec<(&'static str, Option<String>, Duration)>,
    /// The read that failed, and when.
    failed_read: Option<(&'static str, TxnError, Duration)>,
    spec_committed_at: Option<Duration>,
    /// The final outcome and when the client learned it.
    outcome: Option<(Outcome, Duration)>,
}

impl TxnLog {
    fn observed(&self) -> Vec<(&'static str, Option<&str>)> {
        self.reads
            .iter()
            .map(|(label, value, _)| (*label, value.as_deref()))
            .collect()
    }

    fn read_at(&self, label: &str) -> Duration {
        self.reads
            .iter()
            .find(|(l, ..)| *l == label)
            .unwrap_or_else(|| panic!("no read of {label}: {self:?}"))
            .2
    }

    fn outcome(&self) -> Outcome {
        self.outcome.expect("finished").0
    }

    fn outcome_at(&self) -> Duration {
        self.outcome.expect("finished").1
    }

    fn committed(&self) -> bool {
        matches!(self.outcome(), Outcome::Committed { .. })
    }
}

fn outcome_of(e: TxnError) -> Outcome {
    match e {
        TxnError::Aborted(reason) => Outcome::Aborted(reason),
        _ => Outcome::Unknown,
    }
}

/// A simulated cluster plus the logs and history of the scripted transactions.
struct Scenario {
    sim: Simulation<Str>,
    recorder: HistoryRecorder,
    logs: BTreeMap<&'static str, Arc<Mutex<TxnLog>>>,
}

impl Scenario {
    fn new(variant: Variant, nodes: usize, rf: usize) -> Scenario {
        let profile = LatencyProfile::named("3dc").unwrap();
        let placement = Arc::new(Placement::ring(profile, nodes, rf).unwrap());
        let sim = Simulation::new(placement, Arc::new(variant.options()), SimConfig::new(SEED));
        Scenario {
            sim,
            recorder: HistoryRecorder::new(),
            logs: BTreeMap::new(),
        }
    }

    /// Assert the placement the scenario relies on: `key`'s replicas, master first.
    fn assert_replicas(&self, key: &Key, replicas: &[u32]) {
        let pl = self.sim.placement();
        let expected: Vec<NodeId> = replicas.iter().map(|n| NodeId(*n)).collect();
        assert_eq!(pl.replicas(pl.partition_of(key)), &expected[..], "{key}");
    }

    fn spawn(&mut self, script: Script) {
        let log: Arc<Mutex<TxnLog>> = Arc::default();
        assert!(self.logs.insert(script.name, log.clone()).is_none());
        let recorder = self.recorder.clone();
        self.sim
            .spawn_client(NodeId(script.home), move |t| async move {
                t.sleep(script.start).await;
                let session = Session::recorded(t, recorder);
                let now = || session.transport().now();
                let read_only = !script.steps.iter().any(|s| matches!(s, Step::Write(..)));
                let begun = if script.speculative_reads {
                    session.begin_speculative(script.name, read_only).await
                } else {
                    session.begin_named(script.name, read_only).await
                };
                let mut txn = begun.unwrap();
                log.lock().unwrap().begun_at = Some(now());
                for step in script.steps {
                    match step {
                        Step::Sleep(d) => session.transport().sleep(d).await,
                        Step::Read(label, key) => match txn.read(&key).await {
                            Ok(v) => {
                                let v = v.map(|b| String::from_utf8_lossy(&b).into_owned());
                                log.lock().unwrap().reads.push((label, v, now()));
                            }
                            Err(e) => {
                                let mut log = log.lock().unwrap();
                                log.outcome = Some((outcome_of(e.clone()), now()));
                                log.failed_read = Some((label, e, now()));
                                return;
                            }
                        },
                        Step::Write(key, value) => txn
                            .write(key, Some(Bytes::from_static(value.as_bytes())))
                            .unwrap(),
                    }
                }
                let outcome = if script.speculative_commit {
                    match txn.commit_speculative().await {
                        Ok(CommitProgress::Speculative(spec)) => {
                            log.lock().unwrap().spec_committed_at = Some(now());
                            spec.outcome().await
                        }
                        Ok(CommitProgress::Final(commit_ts)) => Outcome::Committed { commit_ts },
                        Err(e) => outcome_of(e),
                    }
                } else {
                    match txn.commit().await {
                        Ok(commit_ts) => Outcome::Committed { commit_ts },
                        Err(e) => outcome_of(e),
                    }
                };
                log.lock().unwrap().outcome = Some((outcome, now()));
            });
    }

    /// Run to completion; the logs by transaction name, the SPSI violations the checker finds in
    /// the recorded history, and node `counters_of`'s speculation counters.
    fn run(mut self, counters_of: u32) -> Outcomes {
        self.sim.run_until(Duration::from_secs(10));
        assert!(self.sim.clients_done(), "every scripted client finished");
        let logs = self
            .logs
            .into_iter()
            .map(|(name, log)| (name, std::mem::take(&mut *log.lock().unwrap())))
            .collect();
        let history = History {
            header: HistoryHeader {
                format: HISTORY_FORMAT,
                protocol: "str".into(),
                workload: "str-scenario".into(),
                seed: SEED,
                isolation: "spsi".into(),
                faults: "none".into(),
                settings: BTreeMap::new(),
            },
            txns: self.recorder.records(),
        };
        let options = CheckOptions::new(IsolationLevel::Spsi, ValueModel::RwRegister);
        let violations = check(&history, &options).violations().cloned().collect();
        Outcomes {
            logs,
            violations,
            counters: self.sim.node(NodeId(counters_of)).counters(),
        }
    }
}

struct Outcomes {
    logs: BTreeMap<&'static str, TxnLog>,
    violations: Vec<Anomaly>,
    counters: SpeculationCounters,
}

impl Outcomes {
    fn log(&self, name: &str) -> &TxnLog {
        &self.logs[name]
    }

    fn violation_kinds(&self) -> Vec<AnomalyKind> {
        self.violations.iter().map(|a| a.kind).collect()
    }
}

// ---------------------------------------------------------------------------------------------
// Fig. 1a: a non-atomic snapshot.

/// Fig. 1a in four nodes (N0 and N3 in VA, N1 in OR, N2 in IE), replication factor 2. `T1`,
/// coordinated by N0, writes `A` (partition 0: N0 master, N1 slave, local to N0) and `C`
/// (partition 2: master N2 in IE, slave N3 in VA; not replicated by N0, whose closest replica of
/// it is N3) and commits speculatively at ~0 ms. Its prepare reaches N2 at ~34 ms and, replicated
/// by N2, N3 at ~68 ms, when T1 final commits. A speculative read-only `reader` on N0 begins at
/// 1 ms, while T1 is only local committed, and reads `A` then `C`.
fn fig1a(variant: Variant) -> Outcomes {
    let mut s = Scenario::new(variant, 4, 2);
    let (a, c) = (Key::numbered(0, 1), Key::numbered(2, 1));
    s.assert_replicas(&a, &[0, 1]);
    s.assert_replicas(&c, &[2, 3]);
    let pl = s.sim.placement().clone();
    assert_eq!(
        pl.closest_replica(NodeId(0), pl.partition_of(&c)),
        NodeId(3)
    );
    s.spawn(Script {
        name: "T1",
        home: 0,
        start: ms(0),
        speculative_reads: false,
        speculative_commit: true,
        steps: vec![Step::Write(a.clone(), "A1"), Step::Write(c.clone(), "C1")],
    });
    s.spawn(Script {
        name: "reader",
        home: 0,
        start: ms(1),
        speculative_reads: true,
        speculative_commit: false,
        steps: vec![Step::Read("A", a), Step::Read("C", c)],
    });
    let out = s.run(0);
    // The timeline the figure needs, the same under both engines: T1 local committed before
    // the reader began, and final committed only after both reads returned.
    let (t1, reader) = (out.log("T1"), out.log("reader"));
    assert!(
        t1.spec_committed_at.unwrap() < reader.begun_at.unwrap(),
        "{t1:?} {reader:?}"
    );
    assert!(t1.committed(), "T1 final commits: {t1:?}");
    assert!(reader.read_at("C") < t1.outcome_at(), "{t1:?} {reader:?}");
    assert_eq!(reader.failed_read, None);
    out
}

/// Fig. 1a against `str`: the reader sees T1's local write `A` speculatively and T1's non-local
/// write `C` from N0's cache partition, where local commit put it with the same local-commit
/// timestamp, so it sees all of T1 (SPSI-1) and never asks a remote replica that has not heard
/// of T1 yet. T1 then final commits inside the reader's snapshot and the reader commits.
#[test]
fn fig1a_str_shows_a_local_committed_transaction_all_or_nothing() {
    let out = fig1a(Variant::Str);
    let reader = out.log("reader");
    assert_eq!(
        reader.observed(),
        vec![("A", Some("A1")), ("C", Some("C1"))]
    );
    assert!(reader.committed(), "{reader:?}");
    assert!(
        out.counters.speculative_reads >= 2,
        "both reads served speculatively: {:?}",
        out.counters
    );
    assert!(out.violations.is_empty(), "{:#?}", out.violations);
}

/// Fig. 1a against the naive mutant: the reader sees `A` = `A1` from T1's local-committed
/// version, but its read of `C` goes to N3, which T1's prepare reaches only at ~68 ms (N0 → N2 →
/// N3), and returns the initial (absent) `C`: a fractured, non-atomic snapshot of T1.
#[test]
fn fig1a_naive_reads_see_part_of_a_local_committed_transaction() {
    let out = fig1a(Variant::Naive);
    let reader = out.log("reader");
    assert_eq!(reader.observed(), vec![("A", Some("A1")), ("C", None)]);
    assert!(
        out.violation_kinds().contains(&AnomalyKind::FracturedRead),
        "{:#?}",
        out.violations
    );
}

// ---------------------------------------------------------------------------------------------
// Fig. 1b: a snapshot holding two conflicting transactions.

/// Fig. 1b in three nodes (N0 VA, N1 OR, N2 IE), replication factor 1, with the paper's values
/// and invariant `A = 2·B`: `A` lives on N0, `B` on N1. A setup transaction writes `A = 2`,
/// `B = 1`. At 500 ms `T1` on N0 reads both and writes `A = 4, B = 2`; at 501 ms `T2` on N1 reads
/// both and writes `A = 10, B = 5`. Each commits speculatively at ~567 ms: local commit succeeds
/// on its own node, and the prepares cross (arriving ~601 ms). At N0 the younger T2 meets T1's
/// local-committed `A` and dies (wait-die); at N1 the older T1 waits for T2's local-committed `B`
/// until T2's abort arrives (~635 ms), then final commits (~668 ms). A speculative read-only
/// `reader` on N0 begins at 580 ms, when both are local committed, and reads `A` then `B`.
fn fig1b(variant: Variant) -> Outcomes {
    let mut s = Scenario::new(variant, 3, 1);
    let (a, b) = (Key::numbered(0, 1), Key::numbered(1, 1));
    s.assert_replicas(&a, &[0]);
    s.assert_replicas(&b, &[1]);
    s.spawn(Script {
        name: "setup",
        home: 0,
        start: ms(0),
        speculative_reads: false,
        speculative_commit: false,
        steps: vec![Step::Write(a.clone(), "2"), Step::Write(b.clone(), "1")],
    });
    for (name, home, start, new_a, new_b) in [("T1", 0, 500, "4", "2"), ("T2", 1, 501, "10", "5")] {
        s.spawn(Script {
            name,
            home,
            start: ms(start),
            speculative_reads: false,
            speculative_commit: true,
            steps: vec![
                Step::Read("A", a.clone()),
                Step::Read("B", b.clone()),
                Step::Write(a.clone(), new_a),
                Step::Write(b.clone(), new_b),
            ],
        });
    }
    s.spawn(Script {
        name: "reader",
        home: 0,
        start: ms(580),
        speculative_reads: true,
        speculative_commit: false,
        steps: vec![Step::Read("A", a), Step::Read("B", b)],
    });
    let out = s.run(0);
    let (setup, t1, t2, reader) = (
        out.log("setup"),
        out.log("T1"),
        out.log("T2"),
        out.log("reader"),
    );
    assert!(
        setup.committed() && setup.outcome_at() < ms(500),
        "{setup:?}"
    );
    for t in [t1, t2] {
        assert_eq!(t.observed(), vec![("A", Some("2")), ("B", Some("1"))]);
        assert!(
            t.spec_committed_at.unwrap() < reader.begun_at.unwrap(),
            "{t:?}"
        );
    }
    // They conflict, so at most one final commits: here T1.
    assert!(t1.committed(), "{t1:?}");
    assert_eq!(t2.outcome(), Outcome::Aborted(AbortReason::Misspeculation));
    assert!(reader.read_at("B") < t1.outcome_at(), "{t1:?} {reader:?}");
    assert_eq!(reader.failed_read, None);
    out
}

/// Fig. 1b against `str`: the reader may only see local-committed versions of its own node's
/// transactions, so T2 (coordinated by N1) is invisible to it; T1's `B` comes from N0's cache
/// partition. The reader's snapshot is T1 alone, `A = 4, B = 2`, the invariant holds, and it
/// commits when T1 does.
#[test]
fn fig1b_str_never_shows_two_conflicting_transactions() {
    let out = fig1b(Variant::Str);
    let reader = out.log("reader");
    assert_eq!(reader.observed(), vec![("A", Some("4")), ("B", Some("2"))]);
    assert!(reader.committed(), "{reader:?}");
    assert!(out.violations.is_empty(), "{:#?}", out.violations);
}

/// Fig. 1b against the naive mutant: the reader sees T1's local-committed `A = 4` on N0 and,
/// reading `B` at N1 (~614 ms, before T2's abort reaches N1), T2's local-committed `B = 5`: a
/// snapshot with both of two concurrent transactions that wrote `A` and `B` (SPSI-3), which
/// breaks `A = 2·B` as in the paper's T3.
#[test]
fn fig1b_naive_reads_see_two_conflicting_transactions() {
    let out = fig1b(Variant::Naive);
    let reader = out.log("reader");
    assert_eq!(reader.observed(), vec![("A", Some("4")), ("B", Some("5"))]);
    assert!(
        out.violation_kinds()
            .contains(&AnomalyKind::ConflictingWritersObserved),
        "{:#?}",
        out.violations
    );
}

// ---------------------------------------------------------------------------------------------
// Fig. 2: an indirect conflict through a remote final-committed transaction.

/// Fig. 2 in four nodes, replication factor 1: N0 (VA, the paper's N1) holds `A` and `B`, N1
/// (OR, the paper's N2) holds `C`, N3 (VA, the paper's N3) holds `E`; N2 is unused. T1 and T2
/// read `C` before writing it, which the paper leaves implicit: it is what lets the checker see
/// from the history that they were concurrent writers of `C`.
///
/// * `setup` on N1 writes `C = C0` at 0 ms.
/// * `T1` on N0 begins at 20 ms, reads `C = C0` (a round trip to N1, back at ~87 ms), writes
///   `A = A1` and `C = C1` and, after 10 ms of work, commits speculatively at ~97 ms: local
///   commit at N0 (`C` goes to the cache partition: T1 is *unsafe*), and a prepare of `C` to N1
///   (arrives ~131 ms).
/// * `T2` on N3 begins at 25 ms (after T1, so concurrent with it), reads `C = C0` (back at
///   ~92 ms) and writes `C = C2`, `E = E2`. Its prepare reaches N1 first (~126 ms); T1's prepare,
///   older, waits there (wait-die). T2 final commits at ~159 ms. When that reaches N1 (~193 ms)
///   T1's prepare meets a newer committed `C`, is refused, and T1 aborts at N0 at ~226 ms.
/// * `T3` on N3 begins at 170 ms, reads `E = E2` (T2, final committed) and writes `B = B3`; it
///   final commits at ~170.2 ms and `B3` is committed at N0 by ~170.3 ms.
/// * `T4`, speculative and read-only, on N0 begins at 180 ms and reads `A` (T1's local-committed
///   `A1`), then at 190 ms reads `B`, whose newest version in its snapshot is T3's `B3`.
///
/// Including both T1 and T3 in T4's snapshot would include T2 (which T3 read from) alongside T1,
/// its conflicting concurrent writer of `C` (SPSI-3).
fn fig2(variant: Variant) -> Outcomes {
    let mut s = Scenario::new(variant, 4, 1);
    let (a, b) = (Key::numbered(0, 1), Key::numbered(0, 2));
    let (c, e) = (Key::numbered(1, 1), Key::numbered(3, 1));
    s.assert_replicas(&a, &[0]);
    s.assert_replicas(&b, &[0]);
    s.assert_replicas(&c, &[1]);
    s.assert_replicas(&e, &[3]);
    s.spawn(Script {
        name: "setup",
        home: 1,
        start: ms(0),
        speculative_reads: false,
        speculative_commit: false,
        steps: vec![Step::Write(c.clone(), "C0")],
    });
    s.spawn(Script {
        name: "T1",
        home: 0,
        start: ms(20),
        speculative_reads: false,
        speculative_commit: true,
        steps: vec![
            Step::Read("C", c.clone()),
            Step::Write(a.clone(), "A1"),
            Step::Write(c.clone(), "C1"),
            Step::Sleep(ms(10)),
        ],
    });
    s.spawn(Script {
        name: "T2",
        home: 3,
        start: ms(25),
        speculative_reads: false,
        speculative_commit: false,
        steps: vec![
            Step::Read("C", c.clone()),
            Step::Write(c, "C2"),
            Step::Write(e.clone(), "E2"),
        ],
    });
    s.spawn(Script {
        name: "T3",
        home: 3,
        start: ms(170),
        speculative_reads: false,
        speculative_commit: false,
        steps: vec![Step::Read("E", e), Step::Write(b.clone(), "B3")],
    });
    s.spawn(Script {
        name: "T4",
        home: 0,
        start: ms(180),
        speculative_reads: true,
        speculative_commit: false,
        steps: vec![Step::Read("A", a), Step::Sleep(ms(10)), Step::Read("B", b)],
    });
    let out = s.run(0);
    let (setup, t1, t2) = (out.log("setup"), out.log("T1"), out.log("T2"));
    let (t3, t4) = (out.log("T3"), out.log("T4"));
    assert!(
        setup.committed() && setup.outcome_at() < ms(20),
        "{setup:?}"
    );
    for t in [t1, t2] {
        assert_eq!(t.observed(), vec![("C", Some("C0"))], "{t:?}");
    }
    assert!(t2.committed(), "{t2:?}");
    assert!(
        t2.outcome_at() < t3.begun_at.unwrap(),
        "T3 begins after T2 final committed"
    );
    assert_eq!(t3.observed(), vec![("E", Some("E2"))]);
    assert!(t3.committed(), "{t3:?}");
    assert!(
        t1.spec_committed_at.unwrap() < t4.begun_at.unwrap(),
        "{t1:?}"
    );
    assert_eq!(t1.outcome(), Outcome::Aborted(AbortReason::Misspeculation));
    assert!(t3.outcome_at() < ms(190), "B3 is committed when T4 reads B");
    assert!(t4.read_at("A") < t1.outcome_at(), "{t1:?} {t4:?}");
    out
}

/// Fig. 2 against `str`: reading `A1` from the unsafe T1 puts T1's read snapshot (~20 ms) in
/// T4's OLC; `B3` carries T3's final-commit timestamp (~170 ms) into T4's FFC. FFC > min(OLC), so
/// the read of `B` is parked until T1's outcome is known; T1 aborts, and T4 aborts with it
/// without ever being handed `B3`.
#[test]
fn fig2_str_parks_the_read_until_the_unsafe_transaction_resolves() {
    let out = fig2(Variant::Str);
    let (t1, t4) = (out.log("T1"), out.log("T4"));
    assert_eq!(t4.observed(), vec![("A", Some("A1"))]);
    let (label, err, at) = t4.failed_read.clone().expect("the read of B fails");
    assert_eq!(label, "B");
    assert_eq!(err, TxnError::Aborted(AbortReason::CascadingAbort));
    assert!(
        at >= t1.outcome_at(),
        "the read of B was held until T1 aborted ({at:?} < {:?})",
        t1.outcome_at()
    );
    assert_eq!(out.counters.parked_reads, 1, "{:?}", out.counters);
    assert!(out.violations.is_empty(), "{:#?}", out.violations);
}

/// Fig. 2 against the naive mutant: nothing holds the read of `B` back, so T4 observes `A1` from
/// T1 and `B3` from T3 at 190 ms, while T1 is still local committed and about to abort because
/// of T2, which T3 read from: the inconsistent snapshot of the figure. The checker sees it
/// through T3's read: T4 observed T1 directly and T2 indirectly, and both wrote `C` over `C0`.
#[test]
fn fig2_naive_reads_combine_an_unsafe_transaction_with_a_conflicting_remote_one() {
    let out = fig2(Variant::Naive);
    let (t1, t4) = (out.log("T1"), out.log("T4"));
    assert_eq!(t4.observed(), vec![("A", Some("A1")), ("B", Some("B3"))]);
    assert!(t4.read_at("B") < t1.outcome_at(), "{t1:?} {t4:?}");
    assert_eq!(out.counters.parked_reads, 0, "{:?}", out.counters);
    assert!(
        out.violation_kinds()
            .contains(&AnomalyKind::ConflictingWritersObserved),
        "{:#?}",
        out.violations
    );
}

// ---------------------------------------------------------------------------------------------
// Flow dependencies: a client with several transactions begun behind one speculative commit.

/// A client speculatively commits `T1` (writing a key mastered remotely, so its final commit
/// takes a WAN round trip), then begins `T2` and, before `T2` commits, `T3` (as a client does
/// that retries a misspeculated transaction while its next one is open). Both flow-depend on
/// `T1` (§6.4); when `T1` final commits, both must be released and commit, well within the
/// idle-transaction timeout. (When `str` kept one flow dependant per transaction, `T3`
/// replaced `T2` and `T2` waited forever.)
/// A transaction's name, outcome, and when its client learned it.
type Finished = (&'static str, Outcome, Duration);

#[test]
fn every_transaction_begun_behind_a_speculative_commit_is_released() {
    let mut scenario = Scenario::new(Variant::Str, 3, 2);
    let local = Key::numbered(0, 1);
    let remote = Key::numbered(1, 1);
    scenario.assert_replicas(&remote, &[1, 2]);
    let log: Arc<Mutex<Vec<Finished>>> = Arc::default();
    let seen = log.clone();
    scenario.sim.spawn_client(NodeId(0), move |t| async move {
        let session = Session::new(t);
        let now = || session.transport().now();
        let value = |v: &'static str| Some(Bytes::from_static(v.as_bytes()));
        let mut t1 = session.begin_speculative("T1", false).await.unwrap();
        t1.write(remote.clone(), value("1")).unwrap();
        let Ok(CommitProgress::Speculative(t1)) = t1.commit_speculative().await else {
            panic!("T1 commits speculatively at local commit");
        };
        let mut t2 = session.begin_speculative("T2", false).await.unwrap();
        t2.write(local.clone(), value("2")).unwrap();
        let mut t3 = session.begin_speculative("T3", false).await.unwrap();
        t3.write(Key::numbered(0, 2), value("3")).unwrap();
        let t3 = t3
            .commit()
            .await
            .map_or_else(outcome_of, |ts| Outcome::Committed { commit_ts: ts });
        seen.lock().unwrap().push(("T3", t3, now()));
        let t2 = t2
            .commit()
            .await
            .map_or_else(outcome_of, |ts| Outcome::Committed { commit_ts: ts });
        seen.lock().unwrap().push(("T2", t2, now()));
        let t1 = t1.outcome().await;
        seen.lock().unwrap().push(("T1", t1, now()));
    });
    scenario.sim.run_until(Duration::from_secs(5));
    assert!(scenario.sim.clients_done(), "the client finished");
    let log = log.lock().unwrap();
    assert_eq!(log.len(), 3, "{log:?}");
    for (name, outcome, at) in log.iter() {
        assert!(
            matches!(outcome, Outcome::Committed { .. }),
            "{name}: {outcome:?}"
        );
        assert!(*at < ms(1000), "{name} finished at {at:?}: {log:?}");
    }
}

/// A client that asks for a speculative commit's outcome long after it was reached learns when
/// it was reached: the final latency of STR §8 ends at the final commit, not at the question.
#[test]
fn a_late_question_learns_when_the_outcome_was_reached() {
    let mut scenario = Scenario::new(Variant::Str, 3, 2);
    let remote = Key::numbered(1, 1);
    scenario.assert_replicas(&remote, &[1, 2]);
    let log: Arc<Mutex<Vec<(Duration, Duration, Resolution)>>> = Arc::default();
    let seen = log.clone();
    scenario.sim.spawn_client(NodeId(0), move |t| async move {
        let session = Session::new(t);
        let mut t1 = session.begin_speculative("T1", false).await.unwrap();
        t1.write(remote, Some(Bytes::from_static(b"1"))).unwrap();
        let Ok(CommitProgress::Speculative(t1)) = t1.commit_speculative().await else {
            panic!("T1 commits speculatively at local commit");
        };
        let spec_committed = t1.spec_committed_at();
        session.transport().sleep(ms(2000)).await;
        let asked = session.transport().now();
        let resolution = t1.resolution().await;
        seen.lock()
            .unwrap()
            .push((spec_committed, asked, resolution));
    });
    scenario.sim.run_until(Duration::from_secs(5));
    assert!(scenario.sim.clients_done(), "the client finished");
    let log = log.lock().unwrap();
    let (spec_committed, asked, resolution) = log[0];
    assert!(
        matches!(resolution.outcome, Outcome::Committed { .. }),
        "{resolution:?}"
    );
    // The final commit takes a round trip to node 1 (VA–OR), about 67 ms, not two seconds.
    let final_latency = resolution.decided_at - spec_committed;
    assert!(
        final_latency > ms(30) && final_latency < ms(300),
        "final commit {final_latency:?} after the speculative one (asked at {asked:?})"
    );
}
