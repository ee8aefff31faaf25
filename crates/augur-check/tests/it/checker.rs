//! The dependency-graph checker on tiny hand-built histories, one per anomaly it reports.

use augur_check::{
    AnomalyKind, CheckOptions, CycleKind, CycleOrder, Proscribes, ValueModel, check,
};
use augur_types::IsolationLevel;
use augur_types::history::RecordedOutcome;

use crate::common;
use common::{Builder, aborted, append, cat, ok, r, w};

use AnomalyKind::Cycle;
use CycleKind::{G0, G1c, G2Item, GNonadjacent, GSingle};
use CycleOrder::{Dependencies, Process, RealTime};

fn check_at(b: &Builder, model: ValueModel, level: IsolationLevel) -> augur_check::CheckReport {
    check(&b.history(), &CheckOptions::new(level, model))
}

fn kinds(report: &augur_check::CheckReport) -> Vec<AnomalyKind> {
    let mut k: Vec<AnomalyKind> = report.anomalies.iter().map(|a| a.kind).collect();
    k.dedup();
    k
}

/// Whether checking at `level` finds `kind` and calls it proscribed.
fn proscribed(b: &Builder, model: ValueModel, level: IsolationLevel, kind: AnomalyKind) -> bool {
    let report = check_at(b, model, level);
    let found: Vec<_> = report.anomalies.iter().filter(|a| a.kind == kind).collect();
    assert!(
        !found.is_empty(),
        "{kind} not found at {level}: {:?}",
        kinds(&report)
    );
    found.iter().all(|a| a.proscribed)
}

const LA: ValueModel = ValueModel::ListAppend;
const RW: ValueModel = ValueModel::RwRegister;

#[test]
fn serial_list_append_history_is_strict_serializable() {
    let mut b = Builder::default();
    b.txn(
        0,
        (0, 10),
        cat(vec![append("x", None, 1).into(), vec![r("y", None)]]),
        ok(5),
    );
    b.txn(
        1,
        (20, 30),
        cat(vec![
            append("x", Some("1"), 2).into(),
            append("y", None, 3).into(),
        ]),
        ok(25),
    );
    b.txn(
        0,
        (40, 50),
        vec![r("x", Some("1 2")), r("y", Some("3"))],
        ok(45),
    );
    // An aborted attempt whose append was never seen changes nothing.
    b.txn(2, (41, 49), append("x", Some("1 2"), 4).into(), aborted());
    let report = check_at(&b, LA, IsolationLevel::StrictSerializable);
    assert!(report.anomalies.is_empty(), "{:?}", report.anomalies);
    assert!(report.is_valid());
    assert_eq!(report.stats.txns, 4);
    assert_eq!(report.stats.committed, 3);
    assert_eq!(report.stats.aborted, 1);
    assert!(report.stats.edges >= 4);
}

#[test]
fn serial_register_history_is_strict_serializable() {
    let mut b = Builder::default();
    b.txn(
        0,
        (0, 10),
        vec![r("x", None), w("x", "1"), w("y", "2")],
        ok(5),
    );
    b.txn(1, (20, 30), vec![r("x", Some("1")), w("x", "3")], ok(25));
    b.txn(
        0,
        (40, 50),
        vec![r("x", Some("3")), r("y", Some("2"))],
        ok(45),
    );
    b.txn(1, (60, 70), vec![w("y", "4")], ok(65));
    for evidence in [false, true] {
        let mut options = CheckOptions::new(IsolationLevel::StrictSerializable, RW);
        options.commit_order_evidence = evidence;
        let report = check(&b.history(), &options);
        assert!(report.anomalies.is_empty(), "{:?}", report.anomalies);
    }
}

#[test]
fn g0_write_cycle_with_commit_order_evidence() {
    // T0 and T1 both write x and y. Commit timestamps put T0's x before T1's; T0 read T1's y
    // and then overwrote it, putting T1's y before T0's: the writes interleave in a circle.
    let mut b = Builder::default();
    b.concurrent(vec![w("x", "1"), r("y", Some("2")), w("y", "1")], ok(10));
    b.concurrent(vec![w("x", "2"), w("y", "2")], ok(20));
    let mut options = CheckOptions::new(IsolationLevel::ReadCommitted, RW);
    options.commit_order_evidence = true;
    let report = check(&b.history(), &options);
    let g0 = report
        .anomalies
        .iter()
        .find(|a| a.kind == Cycle(G0, Dependencies))
        .unwrap_or_else(|| panic!("no G0: {:?}", kinds(&report)));
    assert!(g0.proscribed);
    assert!(g0.edges.iter().all(|e| e.kind == "ww"));
    assert!(
        g0.edges
            .iter()
            .any(|e| e.why.contains("(commit-timestamp order, white-box)")),
        "{g0}"
    );
    assert!(g0.explanation.contains("T0 (client 100)"), "{g0}");
    assert!(!IsolationLevel::None.proscribes(g0.kind));

    // Without the timestamps nothing orders the blind writes of x: no write cycle.
    let report = check(
        &b.history(),
        &CheckOptions::new(IsolationLevel::ReadCommitted, RW),
    );
    assert!(!kinds(&report).contains(&Cycle(G0, Dependencies)));
}

#[test]
fn g1a_aborted_read() {
    let mut b = Builder::default();
    b.concurrent(append("x", None, 1).into(), aborted());
    b.concurrent(vec![r("x", Some("1"))], ok(1));
    let report = check_at(&b, LA, IsolationLevel::ReadCommitted);
    assert_eq!(kinds(&report), vec![AnomalyKind::AbortedRead]);
    assert_eq!(report.anomalies[0].txns, vec![1, 0]);
    assert!(report.anomalies[0].proscribed);
    assert!(!check_at(&b, LA, IsolationLevel::None).anomalies[0].proscribed);

    // A committed list that holds an aborted append: its writer and its readers all observed
    // the aborted write.
    let mut b = Builder::default();
    b.concurrent(append("x", None, 1).into(), aborted());
    b.concurrent(append("x", Some("1"), 2).into(), ok(1));
    b.concurrent(vec![r("x", Some("1 2"))], ok(2));
    let report = check_at(&b, LA, IsolationLevel::ReadCommitted);
    assert_eq!(kinds(&report), vec![AnomalyKind::AbortedRead]);
    let txns: Vec<_> = report.anomalies.iter().map(|a| a.txns.clone()).collect();
    assert_eq!(txns, vec![vec![1, 0], vec![2, 0]]);

    // Under SPSI an aborted transaction may read another aborted one's write speculatively.
    let mut b = Builder::default();
    b.concurrent(append("x", None, 1).into(), aborted());
    b.concurrent(vec![r("x", Some("1"))], aborted());
    assert!(check_at(&b, LA, IsolationLevel::Spsi).anomalies.is_empty());
}

#[test]
fn g1b_intermediate_read() {
    let mut b = Builder::default();
    b.concurrent(
        vec![r("x", None), w("x", "1"), r("x", Some("1")), w("x", "1 2")],
        ok(1),
    );
    b.concurrent(vec![r("x", Some("1"))], ok(2));
    let report = check_at(&b, LA, IsolationLevel::ReadCommitted);
    assert_eq!(kinds(&report), vec![AnomalyKind::IntermediateRead]);
    assert!(report.anomalies[0].proscribed);
    assert!(report.anomalies[0].explanation.contains("\"1 2\""));
}

#[test]
fn g1c_circular_information_flow() {
    let mut b = Builder::default();
    b.concurrent(
        cat(vec![append("x", None, 1).into(), vec![r("y", Some("2"))]]),
        ok(1),
    );
    b.concurrent(
        cat(vec![append("y", None, 2).into(), vec![r("x", Some("1"))]]),
        ok(2),
    );
    let report = check_at(&b, LA, IsolationLevel::ReadCommitted);
    assert_eq!(kinds(&report), vec![Cycle(G1c, Dependencies)]);
    assert!(report.anomalies[0].proscribed);
    assert!(report.anomalies[0].edges.iter().all(|e| e.kind == "wr"));
    assert!(
        report.anomalies[0]
            .edges
            .iter()
            .any(|e| e.why == "T1 wrote y = \"2\", which T0 read"),
        "{}",
        report.anomalies[0]
    );
}

/// T0 reads x before T1 appended to it and y after: read skew, one rw edge.
fn read_skew() -> Builder {
    let mut b = Builder::default();
    b.concurrent(vec![r("x", None), r("y", Some("2"))], ok(1));
    b.concurrent(
        cat(vec![
            append("x", None, 1).into(),
            append("y", None, 2).into(),
        ]),
        ok(2),
    );
    b
}

#[test]
fn g_single_read_skew() {
    let b = read_skew();
    let kind = Cycle(GSingle, Dependencies);
    assert!(!proscribed(&b, LA, IsolationLevel::ReadCommitted, kind));
    assert!(proscribed(&b, LA, IsolationLevel::SnapshotIsolation, kind));
    assert!(proscribed(&b, LA, IsolationLevel::Serializable, kind));
    let report = check_at(&b, LA, IsolationLevel::Serializable);
    let cycle = report.anomalies.iter().find(|a| a.kind == kind).unwrap();
    let rw: Vec<_> = cycle.edges.iter().filter(|e| e.kind == "rw").collect();
    assert_eq!(rw.len(), 1);
    assert_eq!(
        rw[0].why,
        "T0 read x = nil (the initial version), T1 installed the next version \"1\""
    );
    // The same observation is a fractured read among committed transactions, which only SPSI
    // proscribes (the cycle already condemns it elsewhere).
    let fractured = report
        .anomalies
        .iter()
        .find(|a| a.kind == AnomalyKind::FracturedRead)
        .expect("fractured read");
    assert!(!fractured.proscribed);
}

#[test]
fn g_nonadjacent() {
    // T0 -rw(a)-> T1 -wr(b)-> T2 -rw(c)-> T3 -wr(d)-> T0.
    let mut b = Builder::default();
    b.concurrent(vec![r("a", None), r("d", Some("4"))], ok(1));
    b.concurrent(
        cat(vec![
            append("a", None, 1).into(),
            append("b", None, 2).into(),
        ]),
        ok(2),
    );
    b.concurrent(vec![r("b", Some("2")), r("c", None)], ok(3));
    b.concurrent(
        cat(vec![
            append("c", None, 3).into(),
            append("d", None, 4).into(),
        ]),
        ok(4),
    );
    let report = check_at(&b, LA, IsolationLevel::SnapshotIsolation);
    let cycles: Vec<_> = kinds(&report)
        .into_iter()
        .filter(|k| matches!(k, Cycle(..)))
        .collect();
    assert_eq!(cycles, vec![Cycle(GNonadjacent, Dependencies)]);
    assert!(proscribed(
        &b,
        LA,
        IsolationLevel::SnapshotIsolation,
        cycles[0]
    ));
    assert!(!proscribed(
        &b,
        LA,
        IsolationLevel::ReadCommitted,
        cycles[0]
    ));
}

#[test]
fn g2_item_write_skew() {
    let mut b = Builder::default();
    b.concurrent(
        cat(vec![vec![r("y", None)], append("x", None, 1).into()]),
        ok(1),
    );
    b.concurrent(
        cat(vec![vec![r("x", None)], append("y", None, 2).into()]),
        ok(2),
    );
    let report = check_at(&b, LA, IsolationLevel::Serializable);
    assert_eq!(kinds(&report), vec![Cycle(G2Item, Dependencies)]);
    let kind = Cycle(G2Item, Dependencies);
    assert!(!proscribed(&b, LA, IsolationLevel::SnapshotIsolation, kind));
    assert!(proscribed(&b, LA, IsolationLevel::Serializable, kind));
    assert!(check_at(&b, LA, IsolationLevel::SnapshotIsolation).is_valid());
}

#[test]
fn lost_update() {
    let mut b = Builder::default();
    b.concurrent(append("x", Some("5"), 1).into(), ok(1));
    b.concurrent(append("x", Some("5"), 2).into(), ok(2));
    b.concurrent(append("x", None, 5).into(), ok(0));
    let report = check_at(&b, LA, IsolationLevel::SnapshotIsolation);
    let found = kinds(&report);
    assert!(found.contains(&AnomalyKind::LostUpdate), "{found:?}");
    assert!(
        !found.contains(&AnomalyKind::IncompatibleOrder),
        "{found:?}"
    );
    let lost = report
        .anomalies
        .iter()
        .find(|a| a.kind == AnomalyKind::LostUpdate)
        .unwrap();
    assert_eq!(lost.txns, vec![0, 1]);
    assert!(lost.explanation.contains("installed by T2 (client 102)"));
    assert!(proscribed(
        &b,
        LA,
        IsolationLevel::SnapshotIsolation,
        AnomalyKind::LostUpdate
    ));
    assert!(!proscribed(
        &b,
        LA,
        IsolationLevel::ReadCommitted,
        AnomalyKind::LostUpdate
    ));

    // Registers: both read the same version, both wrote.
    let mut b = Builder::default();
    b.concurrent(vec![r("x", None), w("x", "1")], ok(1));
    b.concurrent(vec![r("x", None), w("x", "2")], ok(2));
    assert!(proscribed(
        &b,
        RW,
        IsolationLevel::SnapshotIsolation,
        AnomalyKind::LostUpdate
    ));
}

#[test]
fn diverging_lists_not_explained_by_a_lost_update() {
    // T1 built on an aborted append; T2 on the empty list: the committed lists diverge at their
    // first element, whose appenders did not read the same list.
    let mut b = Builder::default();
    b.concurrent(append("x", None, 1).into(), aborted());
    b.concurrent(append("x", Some("1"), 2).into(), ok(1));
    b.concurrent(append("x", None, 3).into(), ok(2));
    let found = kinds(&check_at(&b, LA, IsolationLevel::SnapshotIsolation));
    assert!(found.contains(&AnomalyKind::IncompatibleOrder), "{found:?}");
    assert!(found.contains(&AnomalyKind::AbortedRead), "{found:?}");
    assert!(proscribed(
        &b,
        LA,
        IsolationLevel::SnapshotIsolation,
        AnomalyKind::IncompatibleOrder
    ));
}

#[test]
fn internal_inconsistency() {
    let mut b = Builder::default();
    b.concurrent(
        cat(vec![append("x", None, 1).into(), vec![r("x", None)]]),
        ok(1),
    );
    let report = check_at(&b, LA, IsolationLevel::ReadCommitted);
    assert_eq!(kinds(&report), vec![AnomalyKind::Internal]);
    assert!(report.anomalies[0].proscribed);
}

#[test]
fn garbage_read() {
    let mut b = Builder::default();
    b.concurrent(append("x", None, 1).into(), ok(1));
    b.concurrent(vec![r("x", Some("1 99"))], ok(2));
    let report = check_at(&b, LA, IsolationLevel::ReadCommitted);
    assert_eq!(kinds(&report), vec![AnomalyKind::GarbageRead]);
    assert!(report.anomalies[0].proscribed);
    assert!(report.anomalies[0].explanation.contains("99"));

    let mut b = Builder::default();
    b.concurrent(vec![r("x", Some("7"))], ok(1));
    assert_eq!(
        kinds(&check_at(&b, RW, IsolationLevel::ReadCommitted)),
        vec![AnomalyKind::GarbageRead]
    );
}

#[test]
fn values_an_attempt_with_unknown_operations_may_have_written_are_not_garbage() {
    // A one-shot attempt whose reply was lost: outcome and operations unknown.
    let opaque = |b: &mut Builder| {
        let t = b.concurrent(Vec::new(), RecordedOutcome::Unknown);
        b.txns[t].ops_unknown = true;
    };
    let mut b = Builder::default();
    b.concurrent(append("x", None, 1).into(), ok(1));
    opaque(&mut b);
    b.concurrent(vec![r("x", Some("1 99"))], ok(2));
    let report = check_at(&b, LA, IsolationLevel::ReadCommitted);
    assert_eq!(kinds(&report), vec![]);
    assert_eq!(report.stats.ops_unknown, 1);

    let mut b = Builder::default();
    opaque(&mut b);
    b.concurrent(vec![r("x", Some("7"))], ok(1));
    assert_eq!(
        kinds(&check_at(&b, RW, IsolationLevel::ReadCommitted)),
        vec![]
    );

    // Known elements in an order nobody wrote are still reported.
    let mut b = Builder::default();
    b.concurrent(append("x", None, 1).into(), ok(1));
    b.concurrent(append("x", Some("1"), 2).into(), ok(2));
    opaque(&mut b);
    b.concurrent(vec![r("x", Some("2 1"))], ok(3));
    assert_eq!(
        kinds(&check_at(&b, LA, IsolationLevel::ReadCommitted)),
        vec![AnomalyKind::IncompatibleOrder]
    );
}

/// An element only an attempt with unknown operations can have appended still orders the
/// list: an unknown writer stands in for that attempt, with its edges.
#[test]
fn an_element_of_an_attempt_with_unknown_operations_orders_the_list() {
    let build = |last_read: &str| {
        let mut b = Builder::default();
        b.concurrent(append("x", None, 1).into(), ok(1));
        // T1: a one-shot attempt whose reply was lost; it appended 2 to x.
        let t = b.concurrent(Vec::new(), RecordedOutcome::Unknown);
        b.txns[t].ops_unknown = true;
        // T2 saw 2 and appended 5 to y; T3 saw T2's y and x as `last_read`.
        b.concurrent(
            cat(vec![vec![r("x", Some("1 2"))], append("y", None, 5).into()]),
            ok(2),
        );
        b.concurrent(vec![r("x", Some(last_read)), r("y", Some("5"))], ok(3));
        b
    };
    // T3 missed 2 but saw T2, which saw 2: T3 -rw-> (writer of 2) -wr-> T2 -wr-> T3.
    let b = build("1");
    let report = check_at(&b, LA, IsolationLevel::SnapshotIsolation);
    assert_eq!(report.stats.unknown_writers, 1, "{:?}", report.stats);
    assert_eq!(kinds(&report), vec![Cycle(GSingle, Dependencies)]);
    let cycle = &report.anomalies[0];
    assert!(cycle.proscribed);
    assert!(
        cycle.explanation.contains("unknown writer")
            && cycle.explanation.contains("appended 2 to x"),
        "{cycle}"
    );
    // Reported by a history index past the recorded attempts.
    assert!(cycle.txns.contains(&4), "{cycle:?}");
    assert!(check_at(&b, LA, IsolationLevel::ReadCommitted).is_valid());
    // Its twin, where T3 saw 2 as well, is valid at every level.
    let b = build("1 2");
    let report = check_at(&b, LA, IsolationLevel::StrictSerializable);
    assert!(report.is_valid(), "{:?}", report.anomalies);
    assert_eq!(report.stats.unknown_writers, 1);
    assert_eq!(report.stats.txns, 4);
}

#[test]
fn stale_read_is_a_realtime_g_single() {
    // T0 appends and finishes; T1 begins later on another client and misses the append.
    let mut b = Builder::default();
    b.txn(0, (0, 10), append("x", None, 1).into(), ok(5));
    b.txn(1, (20, 30), vec![r("x", None)], ok(25));
    let report = check_at(&b, LA, IsolationLevel::StrictSerializable);
    assert_eq!(kinds(&report), vec![Cycle(GSingle, RealTime)]);
    let cycle = &report.anomalies[0];
    assert!(cycle.proscribed);
    assert!(
        cycle
            .edges
            .iter()
            .any(|e| e.kind == "realtime"
                && e.why == "T0 finished at 10 µs before T1 began at 20 µs"),
        "{cycle}"
    );
    assert!(!proscribed(
        &b,
        LA,
        IsolationLevel::Serializable,
        Cycle(GSingle, RealTime)
    ));
    assert!(check_at(&b, LA, IsolationLevel::Serializable).is_valid());
    // Session serializability orders each client's transactions, not different clients'.
    assert!(check_at(&b, LA, IsolationLevel::SessionSerializable).is_valid());
}

#[test]
fn session_order_makes_a_process_g_single() {
    // One client pipelines two transactions (they overlap, so real time orders nothing); the
    // second misses the first's append.
    let mut b = Builder::default();
    b.txn(0, (0, 30), append("x", None, 1).into(), ok(5));
    b.txn(0, (10, 40), vec![r("x", None)], ok(25));
    let report = check_at(&b, LA, IsolationLevel::StrictSerializable);
    assert_eq!(kinds(&report), vec![Cycle(GSingle, Process)]);
    assert!(report.anomalies[0].proscribed);
    assert!(!proscribed(
        &b,
        LA,
        IsolationLevel::Serializable,
        Cycle(GSingle, Process)
    ));
    assert!(proscribed(
        &b,
        LA,
        IsolationLevel::SessionSerializable,
        Cycle(GSingle, Process)
    ));
}

#[test]
fn spsi_fractured_read_by_an_aborted_transaction() {
    let mut b = Builder::default();
    b.concurrent(
        cat(vec![
            append("x", None, 1).into(),
            append("y", None, 2).into(),
        ]),
        ok(1),
    );
    b.concurrent(vec![r("x", Some("1")), r("y", None)], aborted());
    let report = check_at(&b, LA, IsolationLevel::Spsi);
    assert_eq!(kinds(&report), vec![AnomalyKind::FracturedRead]);
    assert!(report.anomalies[0].proscribed);
    assert_eq!(report.anomalies[0].txns, vec![1, 0]);
    // Snapshot isolation says nothing about aborted transactions.
    assert!(
        check_at(&b, LA, IsolationLevel::SnapshotIsolation)
            .anomalies
            .is_empty()
    );

    // Registers: T1 saw W's x but the initial y.
    let mut b = Builder::default();
    b.concurrent(vec![w("x", "1"), w("y", "2")], ok(1));
    b.concurrent(vec![r("x", Some("1")), r("y", None)], aborted());
    assert!(proscribed(
        &b,
        RW,
        IsolationLevel::Spsi,
        AnomalyKind::FracturedRead
    ));
}

#[test]
fn spsi_conflicting_writers_observed_by_an_aborted_transaction() {
    // W0 (committed) and W1 (aborted) both appended to z from the empty list: concurrent
    // conflicting writers. T2 observed W0's x and W1's y.
    let mut b = Builder::default();
    b.concurrent(
        cat(vec![
            append("z", None, 1).into(),
            append("x", None, 2).into(),
        ]),
        ok(1),
    );
    b.concurrent(
        cat(vec![
            append("z", None, 3).into(),
            append("y", None, 4).into(),
        ]),
        aborted(),
    );
    b.concurrent(vec![r("x", Some("2")), r("y", Some("4"))], aborted());
    let report = check_at(&b, LA, IsolationLevel::Spsi);
    assert_eq!(
        kinds(&report),
        vec![AnomalyKind::ConflictingWritersObserved]
    );
    let a = &report.anomalies[0];
    assert!(a.proscribed);
    assert_eq!(a.txns, vec![2, 0, 1]);
    assert!(a.keys.contains(&"z".to_string()));
    assert!(
        check_at(&b, LA, IsolationLevel::SnapshotIsolation)
            .anomalies
            .is_empty()
    );

    // Registers: both read z's initial version before writing it.
    let mut b = Builder::default();
    b.concurrent(vec![r("z", None), w("z", "1"), w("x", "2")], ok(1));
    b.concurrent(vec![r("z", None), w("z", "3"), w("y", "4")], aborted());
    b.concurrent(vec![r("x", Some("2")), r("y", Some("4"))], aborted());
    assert!(proscribed(
        &b,
        RW,
        IsolationLevel::Spsi,
        AnomalyKind::ConflictingWritersObserved
    ));
    // A writer that saw the other's write is not concurrent with it.
    let mut b = Builder::default();
    b.concurrent(vec![r("z", None), w("z", "1"), w("x", "2")], ok(1));
    b.concurrent(vec![r("z", Some("1")), w("z", "3"), w("y", "4")], aborted());
    b.concurrent(vec![r("x", Some("2")), r("y", Some("4"))], aborted());
    assert!(check_at(&b, RW, IsolationLevel::Spsi).anomalies.is_empty());
}

#[test]
fn spsi_conflicting_writers_observed_indirectly() {
    // STR Fig. 2: T0 (aborted, speculatively read) and T1 (committed) both wrote z over its
    // initial version; T2 (committed) read T1's e and wrote b; T3 read T0's a and T2's b, so it
    // observed T1 through T2.
    let mut b = Builder::default();
    b.concurrent(vec![r("z", None), w("z", "1"), w("a", "1")], aborted());
    b.concurrent(vec![r("z", None), w("z", "2"), w("e", "2")], ok(1));
    b.concurrent(vec![r("e", Some("2")), w("b", "3")], ok(2));
    b.concurrent(vec![r("a", Some("1")), r("b", Some("3"))], aborted());
    let report = check_at(&b, RW, IsolationLevel::Spsi);
    assert_eq!(
        kinds(&report),
        vec![AnomalyKind::ConflictingWritersObserved]
    );
    let a = &report.anomalies[0];
    assert_eq!(a.txns, vec![3, 0, 2, 1]);
    assert!(a.explanation.contains("through"), "{}", a.explanation);
    // Without T2's read of e, T3 observed T2 only, which conflicts with nobody.
    let mut b = Builder::default();
    b.concurrent(vec![r("z", None), w("z", "1"), w("a", "1")], aborted());
    b.concurrent(vec![r("z", None), w("z", "2"), w("e", "2")], ok(1));
    b.concurrent(vec![w("b", "3")], ok(2));
    b.concurrent(vec![r("a", Some("1")), r("b", Some("3"))], aborted());
    assert!(check_at(&b, RW, IsolationLevel::Spsi).anomalies.is_empty());
}

#[test]
fn observed_unknown_outcome_counts_as_committed() {
    let mut b = Builder::default();
    b.txn(
        0,
        (0, 10),
        append("x", None, 1).into(),
        RecordedOutcome::Unknown,
    );
    b.txn(1, (20, 30), vec![r("x", Some("1"))], ok(25));
    // Never observed: ignored, so reading around it is fine.
    b.txn(
        2,
        (0, 10),
        append("y", None, 2).into(),
        RecordedOutcome::Unknown,
    );
    b.txn(1, (40, 50), vec![r("y", None)], ok(45));
    let report = check_at(&b, LA, IsolationLevel::StrictSerializable);
    assert!(report.anomalies.is_empty(), "{:?}", report.anomalies);
    assert_eq!(report.stats.unknown, 2);
    assert_eq!(report.stats.unknown_observed, 1);
    assert_eq!(report.stats.committed, 2);

    // Treated as committed, the observed one takes part in cycles: a stale read of it by a
    // committed transaction that also saw its x.
    let mut b = Builder::default();
    b.concurrent(
        cat(vec![
            append("x", None, 1).into(),
            append("y", None, 2).into(),
        ]),
        RecordedOutcome::Unknown,
    );
    b.concurrent(vec![r("x", Some("1")), r("y", None)], ok(1));
    let found = kinds(&check_at(&b, LA, IsolationLevel::Serializable));
    assert!(found.contains(&Cycle(GSingle, Dependencies)), "{found:?}");
}

#[test]
fn nothing_follows_an_unknown_outcome_in_real_time_or_session_order() {
    // T0's client gave up at 10 µs, but T0 may have committed later (T2 saw its append), so a
    // transaction that began at 20 µs and missed the append is no stale read.
    let mut b = Builder::default();
    b.txn(
        0,
        (0, 10),
        append("x", None, 1).into(),
        RecordedOutcome::Unknown,
    );
    b.txn(1, (20, 30), vec![r("x", None)], ok(25));
    b.txn(0, (40, 50), vec![r("x", Some("1"))], ok(45));
    let report = check_at(&b, LA, IsolationLevel::StrictSerializable);
    assert!(report.anomalies.is_empty(), "{:?}", report.anomalies);
    assert_eq!(report.stats.unknown_observed, 1);

    // The same client's next transaction likewise.
    let mut b = Builder::default();
    b.txn(
        0,
        (0, 10),
        append("x", None, 1).into(),
        RecordedOutcome::Unknown,
    );
    b.txn(0, (20, 30), vec![r("x", None)], ok(25));
    b.txn(1, (40, 50), vec![r("x", Some("1"))], ok(45));
    assert!(check_at(&b, LA, IsolationLevel::StrictSerializable).is_valid());

    // Had it committed by then, the stale read would be a G-single-realtime.
    let mut b = Builder::default();
    b.txn(0, (0, 10), append("x", None, 1).into(), ok(5));
    b.txn(1, (20, 30), vec![r("x", None)], ok(25));
    b.txn(0, (40, 50), vec![r("x", Some("1"))], ok(45));
    assert_eq!(
        kinds(&check_at(&b, LA, IsolationLevel::StrictSerializable)),
        vec![Cycle(GSingle, RealTime)]
    );
}

#[test]
fn anomalies_per_kind_are_bounded() {
    let mut b = Builder::default();
    for i in 0..30 {
        let key = format!("k{i}");
        b.concurrent(append(&key, None, 2 * i).into(), ok(1));
        b.concurrent(append(&key, None, 2 * i + 1).into(), ok(2));
    }
    let report = check_at(&b, LA, IsolationLevel::SnapshotIsolation);
    let lost: Vec<_> = report
        .anomalies
        .iter()
        .filter(|a| a.kind == AnomalyKind::LostUpdate)
        .collect();
    assert_eq!(lost.len(), 10);
    assert!(
        lost[9]
            .explanation
            .contains("20 more lost-update anomalies")
    );
}

// ---------------------------------------------------------------------------------------------
// Parallel snapshot isolation (Walter, SOSP 2011): every cycle needs two rw edges, adjacent or
// not (Cerone and Gotsman); session order counts, real-time order does not.

const PSI: IsolationLevel = IsolationLevel::ParallelSnapshotIsolation;

/// The cycles among a report's anomalies.
fn cycles(report: &augur_check::CheckReport) -> Vec<AnomalyKind> {
    kinds(report)
        .into_iter()
        .filter(|k| matches!(k, Cycle(..)))
        .collect()
}

#[test]
fn psi_allows_the_long_fork_that_snapshot_isolation_proscribes() {
    // Two sites each commit one write: T1 appends x at site A, T2 appends y at site B. Before
    // either propagates, T0 at B sees y but not x, and T3 at A sees x but not y:
    // T0 -rw(x)-> T1 -wr(x)-> T3 -rw(y)-> T2 -wr(y)-> T0.
    let mut b = Builder::default();
    b.concurrent(vec![r("x", None), r("y", Some("2"))], ok(1));
    b.concurrent(append("x", None, 1).into(), ok(2));
    b.concurrent(append("y", None, 2).into(), ok(3));
    b.concurrent(vec![r("x", Some("1")), r("y", None)], ok(4));
    let kind = Cycle(GNonadjacent, Dependencies);
    let report = check_at(&b, LA, PSI);
    assert_eq!(cycles(&report), vec![kind]);
    let fork = &report.anomalies[0];
    assert!(!fork.proscribed, "{fork}");
    let edges: Vec<_> = fork.edges.iter().map(|e| e.kind).collect();
    assert_eq!(edges.iter().filter(|&&k| k == "rw").count(), 2, "{fork}");
    assert!(
        (0..edges.len()).all(|i| !(edges[i] == "rw" && edges[(i + 1) % edges.len()] == "rw")),
        "{fork}"
    );
    assert!(report.is_valid(), "{:?}", report.anomalies);
    for level in [
        IsolationLevel::SnapshotIsolation,
        IsolationLevel::Spsi,
        IsolationLevel::Serializable,
        IsolationLevel::StrictSerializable,
    ] {
        assert!(proscribed(&b, LA, level, kind), "{level}");
    }

    // The same with registers and blind writes.
    let mut b = Builder::default();
    b.concurrent(vec![r("x", None), r("y", Some("2"))], ok(1));
    b.concurrent(vec![w("x", "1")], ok(2));
    b.concurrent(vec![w("y", "2")], ok(3));
    b.concurrent(vec![r("x", Some("1")), r("y", None)], ok(4));
    assert!(!proscribed(&b, RW, PSI, kind));
    assert!(check_at(&b, RW, PSI).is_valid());
    assert!(proscribed(&b, RW, IsolationLevel::SnapshotIsolation, kind));
}

#[test]
fn psi_allows_write_skew() {
    let mut b = Builder::default();
    b.concurrent(
        cat(vec![vec![r("y", None)], append("x", None, 1).into()]),
        ok(1),
    );
    b.concurrent(
        cat(vec![vec![r("x", None)], append("y", None, 2).into()]),
        ok(2),
    );
    let kind = Cycle(G2Item, Dependencies);
    let report = check_at(&b, LA, PSI);
    assert_eq!(kinds(&report), vec![kind]);
    assert!(!report.anomalies[0].proscribed);
    assert!(report.is_valid());
    assert!(proscribed(&b, LA, IsolationLevel::Serializable, kind));
}

#[test]
fn psi_proscribes_lost_update() {
    // Two concurrent writers of x: PSI never commits both.
    let mut b = Builder::default();
    b.concurrent(append("x", Some("5"), 1).into(), ok(1));
    b.concurrent(append("x", Some("5"), 2).into(), ok(2));
    b.concurrent(append("x", None, 5).into(), ok(0));
    assert!(proscribed(&b, LA, PSI, AnomalyKind::LostUpdate));
    assert!(!check_at(&b, LA, PSI).is_valid());

    let mut b = Builder::default();
    b.concurrent(vec![r("x", None), w("x", "1")], ok(1));
    b.concurrent(vec![r("x", None), w("x", "2")], ok(2));
    assert!(proscribed(&b, RW, PSI, AnomalyKind::LostUpdate));
}

#[test]
fn psi_proscribes_read_skew() {
    // T0 saw T1's y but not its x: a snapshot holding half a transaction, one rw edge.
    let b = read_skew();
    let kind = Cycle(GSingle, Dependencies);
    let report = check_at(&b, LA, PSI);
    assert_eq!(cycles(&report), vec![kind]);
    assert!(proscribed(&b, LA, PSI, kind));
    assert!(!report.is_valid());
    assert!(!proscribed(&b, LA, IsolationLevel::ReadCommitted, kind));
}

#[test]
fn psi_checks_session_order_but_not_real_time_order() {
    // A client's next transaction misses its own previous append: PSI's site snapshot holds
    // every transaction committed at the client's site before it began.
    let mut b = Builder::default();
    b.txn(0, (0, 30), append("x", None, 1).into(), ok(5));
    b.txn(0, (10, 40), vec![r("x", None)], ok(25));
    assert!(proscribed(&b, LA, PSI, Cycle(GSingle, Process)));
    // The checker's snapshot isolation leaves session order unchecked.
    assert!(check_at(&b, LA, IsolationLevel::SnapshotIsolation).is_valid());

    // Another client's transaction, begun after the append finished, may miss it: the append
    // has not reached that client's site yet.
    let mut b = Builder::default();
    b.txn(0, (0, 10), append("x", None, 1).into(), ok(5));
    b.txn(1, (20, 30), vec![r("x", None)], ok(25));
    let report = check_at(&b, LA, PSI);
    assert_eq!(kinds(&report), vec![Cycle(GSingle, RealTime)]);
    assert!(report.is_valid());
}

#[test]
fn psi_proscribes_aborted_and_intermediate_reads_and_g1c() {
    let mut b = Builder::default();
    b.concurrent(append("x", None, 1).into(), aborted());
    b.concurrent(vec![r("x", Some("1"))], ok(1));
    assert!(proscribed(&b, LA, PSI, AnomalyKind::AbortedRead));

    let mut b = Builder::default();
    b.concurrent(
        vec![r("x", None), w("x", "1"), r("x", Some("1")), w("x", "1 2")],
        ok(1),
    );
    b.concurrent(vec![r("x", Some("1"))], ok(2));
    assert!(proscribed(&b, LA, PSI, AnomalyKind::IntermediateRead));

    let mut b = Builder::default();
    b.concurrent(
        cat(vec![append("x", None, 1).into(), vec![r("y", Some("2"))]]),
        ok(1),
    );
    b.concurrent(
        cat(vec![append("y", None, 2).into(), vec![r("x", Some("1"))]]),
        ok(2),
    );
    assert!(proscribed(&b, LA, PSI, Cycle(G1c, Dependencies)));
}
