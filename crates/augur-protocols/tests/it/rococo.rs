//! Scenario tests for `rococo` (ROCOCO, OSDI 2014; SSS §V's baseline), run in the
//! deterministic simulator on "3dc" cut to two data centres (VA, OR: about 33.5 ms apart one
//! way) with a ring placement and no replication, as in SSS's ROCOCO comparisons: key
//! `Key::numbered(p, _)` lives on node `p` only.
//!
//! * **A committed piece waits for the pieces it depends on** (ROCOCO §3.3): an older blind
//!   writer's piece is pending on node 1 when a younger one starts there, so the younger
//!   depends on it; the younger commits first but executes after it, and y ends with the
//!   younger's value. The mutant `no-dependency-wait` executes the younger at once and lets
//!   the older overwrite it, against the dependency graph.
//! * **A read-only transaction confirms its reads in a second round** (ROCOCO §3.4): a reader
//!   sees x before a writer and y after it (its read of y waited for the writer's pending
//!   piece); the second round disagrees and it aborts. The mutant `single-round-reads`
//!   commits the fractured read, which the checker rejects.
//! * **The start phase validates an update's reads**: of two read-modify-write transactions
//!   of x the second is refused; the mutant `no-read-validation` commits both (lost update).
//! * **A piece survives its node's crash**: the restarted node replays the piece from its
//!   log, asks the coordinator, gets the commit resent and executes it; nothing is left over.

use crate::common;

use augur_client::HistoryRecorder;
use augur_contract::Protocol;
use augur_protocols::rococo::Rococo;
use augur_runtime::sim::Simulation;
use augur_types::history::History;
use augur_types::{IsolationLevel, NodeId};
use common::two_sites::{check_at, history, read_modify_writes, x, y};
use common::{Observed, Txn, counter, ms, some, spawn_client, spawn_client_recorded};

/// Two nodes, one replica per key, running `rococo` (or its `mutant`).
fn sim(mutant: Option<&str>) -> Simulation<Rococo> {
    common::two_sites::sim::<Rococo>(mutant)
}

fn strictly_serializable(history: &History) -> bool {
    check_at(history, IsolationLevel::StrictSerializable).is_valid()
}

/// T1 (node 0, older) writes x and y blindly; its piece is pending on node 1 from ~34 ms and
/// its commit reaches node 1 at ~101 ms. T2 (node 1, younger) writes y blindly at 40 ms: it
/// depends on T1 there, and, touching node 1 only, commits at once. T3 reads y afterwards.
fn dependent_writers(mutant: Option<&str>) -> (Observed, Simulation<Rococo>) {
    let mut s = sim(mutant);
    let o = Observed::default();
    let t1 = Txn::new("T1").write(&x(), "x1").write(&y(), "y1");
    spawn_client(&mut s, 0, ms(0), vec![t1], &o);
    spawn_client(
        &mut s,
        1,
        ms(40),
        vec![Txn::new("T2").write(&y(), "y2")],
        &o,
    );
    spawn_client(&mut s, 1, ms(400), vec![Txn::new("T3").read(&y())], &o);
    s.run_until(ms(2_000));
    assert!(s.clients_done());
    (o, s)
}

#[test]
fn a_committed_piece_executes_after_the_pieces_it_depends_on() {
    let (o, s) = dependent_writers(None);
    assert!(o.committed("T1") && o.committed("T2"), "{}", o.render());
    // T1 -> T2 at node 1: T2 executed after T1 although its commit arrived first.
    assert_eq!(o.reads("T3"), vec![some("y2")]);
    assert_eq!(counter(&s, 1, "pieces_executed"), 2);
    assert_eq!(counter(&s, 1, "refused_wait_die"), 0);
}

#[test]
fn without_the_dependency_wait_the_older_piece_overwrites_the_younger() {
    let (o, _) = dependent_writers(Some("no-dependency-wait"));
    assert!(o.committed("T1") && o.committed("T2"), "{}", o.render());
    assert_eq!(o.reads("T3"), vec![some("y1")]);
}

/// Tinit writes x0 and y0. W (node 1) reads x and y from 300 ms (so the checker knows its
/// versions follow Tinit's) and writes x1 and y1: its pieces are pending on node 1 from
/// ~367 ms and on node 0 from ~401 ms; it executes on node 1 at ~434 ms and on node 0 at
/// ~468 ms. The read-only R (node 0) reads x at 380 ms (x0: W not yet started there), then y,
/// which waits at node 1 for W's pending piece and returns y1. The history, recorded for the
/// checker.
fn fractured(mutant: Option<&str>) -> (Observed, Simulation<Rococo>, History) {
    let mut s = sim(mutant);
    let o = Observed::default();
    let recorder = HistoryRecorder::new();
    let scripts = [
        (0, 0, Txn::new("Tinit").write(&x(), "x0").write(&y(), "y0")),
        (
            1,
            300,
            Txn::new("W")
                .read(&x())
                .read(&y())
                .write(&x(), "x1")
                .write(&y(), "y1"),
        ),
        (0, 380, Txn::new("R").read(&x()).read(&y())),
    ];
    for (home, start, txn) in scripts {
        let recorder = Some(recorder.clone());
        spawn_client_recorded(&mut s, home, ms(start), vec![txn], &o, recorder);
    }
    s.run_until(ms(2_000));
    assert!(s.clients_done());
    let history = history("rococo", IsolationLevel::StrictSerializable, &recorder);
    (o, s, history)
}

#[test]
fn a_read_only_transaction_whose_second_round_disagrees_aborts() {
    let (o, s, history) = fractured(None);
    assert!(o.committed("Tinit") && o.committed("W"), "{}", o.render());
    assert_eq!(o.reads("R"), vec![some("x0"), some("y1")]);
    assert!(o.of("R").contains("ValidationFailed"), "R: {}", o.of("R"));
    assert_eq!(counter(&s, 0, "read_only_aborts"), 1);
    assert!(counter(&s, 1, "reads_parked") >= 1);
    assert!(strictly_serializable(&history));
}

#[test]
fn with_a_single_round_the_reader_commits_a_fractured_read() {
    let (o, _, history) = fractured(Some("single-round-reads"));
    assert_eq!(o.reads("R"), vec![some("x0"), some("y1")]);
    assert!(o.committed("R"), "R: {}", o.of("R"));
    assert!(!strictly_serializable(&history));
}

#[test]
fn the_start_phase_refuses_a_piece_whose_read_is_stale() {
    let o = read_modify_writes::<Rococo>(None);
    assert!(o.committed("T1"));
    assert!(
        o.of("T2").contains("ValidationFailed"),
        "T2: {}",
        o.of("T2")
    );
    assert_eq!(o.reads("T3"), vec![some("a")]);
}

#[test]
fn without_read_validation_both_commit_and_an_update_is_lost() {
    let o = read_modify_writes::<Rococo>(Some("no-read-validation"));
    assert_eq!(o.reads("T1"), vec![None]);
    assert_eq!(o.reads("T2"), vec![None]);
    assert!(o.committed("T1") && o.committed("T2"));
    assert_eq!(o.reads("T3"), vec![some("b")]);
}

#[test]
fn a_piece_survives_its_nodes_crash_and_executes_when_the_commit_is_resent() {
    let mut s = sim(None);
    let o = Observed::default();
    // T1 on node 0 writes y (node 1). Node 1 accepts the piece at ~34 ms, node 0 decides when
    // the answer arrives (~67 ms), and node 1 crashes at 80 ms, before the commit reaches it
    // (~101 ms; a crash breaks its connections, so the commit is lost).
    spawn_client(&mut s, 0, ms(0), vec![Txn::new("T1").write(&y(), "y1")], &o);
    s.run_until(ms(80));
    s.crash(NodeId(1));
    s.run_until(ms(500));
    s.restart(NodeId(1));
    // The restarted node holds the piece again (from its log) and asks node 0, which resends
    // the commit; a read of y waits for the piece, then sees y1.
    spawn_client(&mut s, 1, ms(5), vec![Txn::new("T2").read(&y())], &o);
    s.run_until(ms(5_000));
    assert!(s.clients_done());
    assert!(o.committed("T1"), "T1: {}", o.of("T1"));
    assert_eq!(o.reads("T2"), vec![some("y1")]);
    for node in [0, 1] {
        let leftovers = s.node(NodeId(node)).leftovers();
        assert!(leftovers.iter().all(|(_, n)| *n == 0), "{leftovers:?}");
    }
}
