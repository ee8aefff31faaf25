//! Scenario tests for `walter` (Walter, SOSP 2011; SSS §V's PSI baseline), run in the
//! deterministic simulator on "3dc" cut to two data centres (VA, OR: about 33.5 ms apart one
//! way) with a ring placement and no replication: key `Key::numbered(p, _)` lives on node `p`
//! only, so node `p` is its preferred site.
//!
//! * **SSS Fig. 2 under Walter: the long fork.** Two updates on different sites, two readers on
//!   different sites reading both keys in opposite orders. Each reader begins at a site that
//!   applied one update and not yet the other, and its snapshot is fixed at begin: each sees
//!   "its" update and not the other. The checker finds G-nonadjacent, which PSI allows and
//!   strict serializability (and SI) proscribe; the same script under `sss` is strictly
//!   serializable (SSS §III-D: its read-only transactions order the two updates the same way).
//! * **Fast commit checks write-write conflicts**: two transactions at a key's preferred site
//!   read and overwrite it concurrently; the second aborts. The mutant `no-ww-check` commits
//!   both (a lost update).
//! * **Slow commit locks at the preferred site until it applies the commit**: a remote writer's
//!   lock makes a local fast commit of the same key abort; once the commit is propagated the key
//!   is free and holds the remote write.
//! * **A remote read waits for its snapshot**: a read at a replica that has not yet applied
//!   what the snapshot includes is parked until it has.
//! * **A preferred site's yes vote survives its crash**: the restarted site takes its lock
//!   again from its log, asks the coordinator, gets the commit resent and applies it.

use crate::common;

use augur_check::{AnomalyKind, CycleKind, CycleOrder, Proscribes};
use augur_client::HistoryRecorder;
use augur_contract::{Protocol, ProtocolOptions};
use augur_protocols::sss::Sss;
use augur_protocols::walter::Walter;
use augur_types::history::History;
use augur_types::{IsolationLevel, Key, NodeId};
use common::two_sites::{check_at, history, read_modify_writes, sim, x, y};
use common::{Observed, Txn, assert_replicas, ms, some, spawn_client, spawn_client_recorded};

const LONG_FORK: AnomalyKind =
    AnomalyKind::Cycle(CycleKind::GNonadjacent, CycleOrder::Dependencies);

/// SSS Fig. 2's transactions: T2 (node 0) writes x and T3 (node 1) writes y at once; 10 ms
/// later, long before either commit can reach the other site, read-only T1 begins on node 0
/// and reads x then y, and T4 on node 1 reads y then x. The history, recorded for the checker.
fn fig2<P: Protocol>() -> (Observed, History) {
    let mut s = sim::<P>(None);
    let observed = Observed::default();
    let recorder = HistoryRecorder::new();
    let scripts = [
        (0, 0, Txn::new("T2").write(&x(), "x1")),
        (1, 0, Txn::new("T3").write(&y(), "y1")),
        (0, 10, Txn::new("T1").read(&x()).read(&y())),
        (1, 10, Txn::new("T4").read(&y()).read(&x())),
    ];
    for (home, start, txn) in scripts {
        let recorder = Some(recorder.clone());
        spawn_client_recorded(&mut s, home, ms(start), vec![txn], &observed, recorder);
    }
    s.run_until(ms(2_000));
    assert!(s.clients_done(), "every scripted client finished");
    let history = history(
        "walter",
        IsolationLevel::ParallelSnapshotIsolation,
        &recorder,
    );
    (observed, history)
}

#[test]
fn fig2_under_walter_the_readers_see_a_long_fork_psi_allows() {
    let (o, history) = fig2::<Walter>();
    for name in ["T1", "T2", "T3", "T4"] {
        assert!(o.committed(name), "{name}: {}", o.of(name));
    }
    // Each reader's snapshot holds its own site's update only: T1 sees x1 and the old y, T4
    // sees y1 and the old x. T1 -rw-> T3 -wr-> T4 -rw-> T2 -wr-> T1.
    assert_eq!(o.reads("T1"), vec![some("x1"), None]);
    assert_eq!(o.reads("T4"), vec![some("y1"), None]);
    let psi = check_at(&history, IsolationLevel::ParallelSnapshotIsolation);
    assert!(psi.is_valid(), "{psi:?}");
    assert!(
        psi.anomalies.iter().any(|a| a.kind == LONG_FORK),
        "the checker finds the long fork: {psi:?}"
    );
    for level in [
        IsolationLevel::StrictSerializable,
        IsolationLevel::SnapshotIsolation,
    ] {
        assert!(level.proscribes(LONG_FORK));
        let report = check_at(&history, level);
        assert!(!report.is_valid(), "{level} must reject the long fork");
    }
}

#[test]
fn fig2_under_sss_is_strictly_serializable() {
    // The discriminating scenario: the same script, under the protocol that forbids it.
    let (o, history) = fig2::<Sss>();
    let report = check_at(&history, IsolationLevel::StrictSerializable);
    assert!(report.is_valid(), "{report:?}");
    assert!(!report.anomalies.iter().any(|a| a.kind == LONG_FORK));
    let seen = (o.reads("T1"), o.reads("T4"));
    assert_ne!(
        seen,
        (vec![some("x1"), None], vec![some("y1"), None]),
        "sss shows no long fork"
    );
}

/// T1 and T2, both on x's preferred site, read x and overwrite it; T1 commits first.
fn concurrent_writers(mutant: Option<&str>) -> Observed {
    read_modify_writes::<Walter>(mutant)
}

#[test]
fn fast_commit_aborts_the_second_of_two_concurrent_writers() {
    let o = concurrent_writers(None);
    assert!(o.committed("T1"));
    assert!(
        o.of("T2").contains("WriteWriteConflict"),
        "T2: {}",
        o.of("T2")
    );
    assert_eq!(o.reads("T3"), vec![some("a")]);
}

#[test]
fn without_the_ww_check_both_writers_commit_and_an_update_is_lost() {
    let o = concurrent_writers(Some("no-ww-check"));
    // Both read the initial x; both commit; T1's write is overwritten by one that never saw it.
    assert_eq!(o.reads("T1"), vec![None]);
    assert_eq!(o.reads("T2"), vec![None]);
    assert!(o.committed("T1") && o.committed("T2"));
    assert_eq!(o.reads("T3"), vec![some("b")]);
}

#[test]
fn a_slow_commit_locks_the_key_at_its_preferred_site_until_applied_there() {
    let mut s = sim::<Walter>(None);
    let o = Observed::default();
    // T1 on node 0 writes y, preferred at node 1: a slow commit. Its prepare locks y at node 1
    // from ~34 ms; the commit reaches node 1 (and releases the lock) at ~101 ms.
    spawn_client(
        &mut s,
        0,
        ms(0),
        vec![Txn::new("T1").write(&y(), "far")],
        &o,
    );
    // T2, local to y's preferred site, tries to commit while the lock is held.
    let t2 = Txn::new("T2").sleep(ms(60)).write(&y(), "near");
    spawn_client(&mut s, 1, ms(0), vec![t2], &o);
    spawn_client(&mut s, 1, ms(300), vec![Txn::new("T3").read(&y())], &o);
    s.run_until(ms(1_000));
    assert!(s.clients_done());
    assert!(o.committed("T1"), "T1: {}", o.of("T1"));
    assert!(
        o.of("T2").contains("WriteWriteConflict"),
        "T2: {}",
        o.of("T2")
    );
    assert_eq!(o.reads("T3"), vec![some("far")]);
    let counters: Vec<_> = s.node(NodeId(0)).counters();
    assert!(counters.contains(&("slow_commits", 1)), "{counters:?}");
}

#[test]
fn a_remote_read_waits_until_the_replica_applied_the_snapshot() {
    // Three sites (VA, OR, IE), one replica per key: z lives on node 2.
    let mut s = common::traced_sim::<Walter>("3dc", 3, 3, 1, ProtocolOptions::default());
    let z = Key::numbered(2, 1);
    assert_replicas(&s, &z, &[2]);
    let o = Observed::default();
    // T1 on node 1 writes y while node 2 is cut off: node 0 applies T1 at ~34 ms, node 2 only
    // when node 1 resends it after the partition heals (its first status after that).
    s.partition(&[vec![NodeId(0), NodeId(1)], vec![NodeId(2)]]);
    spawn_client(&mut s, 1, ms(0), vec![Txn::new("T1").write(&y(), "y1")], &o);
    s.run_until(ms(100));
    s.heal();
    // T2 begins on node 0 with T1 in its snapshot and reads z at node 2, which must apply T1
    // before it serves the read; then y, which shows T1.
    let t2 = Txn::new("T2").read(&z).read(&y());
    spawn_client(&mut s, 0, ms(120), vec![t2], &o);
    s.run_until(ms(2_000));
    assert!(s.clients_done());
    assert!(o.committed("T1") && o.committed("T2"), "{}", o.render());
    assert_eq!(o.reads("T2"), vec![None, some("y1")]);
    let n2 = s.node(NodeId(2));
    let parked = n2
        .counters()
        .into_iter()
        .find(|(n, _)| *n == "reads_parked");
    assert_eq!(parked, Some(("reads_parked", 1)), "the read waited for T1");
    assert_eq!(n2.applied().entries(), &[0, 1, 0], "node 2 applied T1");
    let resent = s
        .node(NodeId(1))
        .counters()
        .into_iter()
        .find(|(n, _)| *n == "propagations_resent");
    assert!(resent.is_some_and(|(_, n)| n >= 1), "{resent:?}");
}

#[test]
fn a_preferred_site_recovers_its_lock_and_applies_the_commit_it_missed() {
    let mut s = sim::<Walter>(None);
    let o = Observed::default();
    // T1 on node 0 writes y (preferred at node 1). Node 1 votes yes at ~34 ms, node 0 commits
    // when the vote arrives (~67 ms), and node 1 crashes at 80 ms, before the commit reaches
    // it (~101 ms; a crash breaks its connections, so the commit is lost).
    spawn_client(&mut s, 0, ms(0), vec![Txn::new("T1").write(&y(), "y1")], &o);
    s.run_until(ms(80));
    s.crash(NodeId(1));
    s.run_until(ms(500));
    s.restart(NodeId(1));
    // After the restart node 1 holds T1's lock again and asks node 0 at its first tick; node 0
    // resends T1, which node 1 applies. A later writer of y on node 1 then sees T1's write and
    // commits.
    // Until then the recovered lock keeps out a local writer (a fast commit at 505 ms).
    spawn_client(
        &mut s,
        1,
        ms(5),
        vec![Txn::new("Tmid").write(&y(), "mid")],
        &o,
    );
    let t2 = Txn::new("T2").read(&y()).write(&y(), "y2");
    spawn_client(&mut s, 1, ms(500), vec![t2], &o);
    s.run_until(ms(3_000));
    assert!(s.clients_done());
    assert!(o.committed("T1"), "T1: {}", o.of("T1"));
    assert!(
        o.of("Tmid").contains("WriteWriteConflict"),
        "{}",
        o.of("Tmid")
    );
    assert_eq!(o.reads("T2"), vec![some("y1")]);
    assert!(o.committed("T2"), "T2: {}", o.of("T2"));
    assert_eq!(s.node(NodeId(1)).applied().entries(), &[1, 1]);
}
