//! Scenario tests for `2pl` (DST §4.2/§5.2's vanilla MySQL Cluster 2PL baseline), run in the
//! deterministic simulator on "3dc" cut to two data centres (VA, OR: about 33.5 ms apart one
//! way) with a ring placement and no replication (`common::two_sites`): key `x` lives on node 0,
//! `y` on node 1.
//!
//! * **Two read-modify-writes of one key: wait-die picks the survivor.** Both read `x` under
//!   shared locks; the older one's commit waits to upgrade its lock, the younger one's commit
//!   would wait for the older and dies. The mutant `early-read-unlock` (shared locks released
//!   once the read is answered) commits both, and the first write is lost.
//! * **A reader blocks a writer until it commits**: a read-only transaction holds its shared
//!   lock on `y` until its commit decision reaches `y`'s node; an older writer of `y` waits for
//!   it there and commits after it.
//! * **A shared lock lost in a crash fails the prepare**: the master restarts without the
//!   executing transaction's lock, so at commit it votes no.

use crate::common;

use augur_protocols::two_pl::TwoPlNode;
use augur_types::NodeId;
use common::two_sites::{read_modify_writes, sim, x, y};
use common::{Observed, Txn, counter, ms, some, spawn_client};

#[test]
fn wait_die_refuses_the_younger_of_two_read_modify_writes_and_the_mutant_loses_an_update() {
    // T1 reads x at 0 ms and commits "a" at 20 ms; T2 reads x at 5 ms and commits "b" at 45 ms.
    let o = read_modify_writes::<TwoPlNode>(None);
    assert!(o.committed("T1"), "{}", o.of("T1"));
    assert!(
        o.of("T2").contains("WaitDie"),
        "T2, younger, may not wait for T1's upgrade: {}",
        o.of("T2")
    );
    assert_eq!(o.reads("T3"), vec![some("a")]);

    let o = read_modify_writes::<TwoPlNode>(Some("early-read-unlock"));
    assert!(o.committed("T1") && o.committed("T2"), "{}", o.render());
    assert_eq!(o.reads("T3"), vec![some("b")], "T1's update is lost");
}

#[test]
fn a_read_only_transaction_blocks_an_older_writer_until_it_commits() {
    let mut s = sim::<TwoPlNode>(None);
    let o = Observed::default();
    // T2 begins on node 1 at 0 ms (older), thinks, and commits a write of y at 110 ms. T1,
    // read-only on node 0, begins at 10 ms and reads y: node 1 grants its shared lock at
    // ~43.5 ms; its commit reaches node 1 at ~110 ms, the decision at ~178 ms.
    let t2 = Txn::new("T2").sleep(ms(110)).write(&y(), "y1");
    spawn_client(&mut s, 1, ms(0), vec![t2], &o);
    spawn_client(&mut s, 0, ms(10), vec![Txn::new("T1").read(&y())], &o);
    spawn_client(&mut s, 0, ms(400), vec![Txn::new("T3").read(&y())], &o);
    s.run_until(ms(170));
    assert!(!o.finished("T2"), "T2 still waits for T1's shared lock");
    s.run_until(ms(1_000));
    assert!(s.clients_done());
    assert!(o.committed("T1"), "{}", o.of("T1"));
    assert_eq!(o.reads("T1"), vec![None], "T1 read before T2 could write");
    assert!(o.committed("T2"), "the older writer waited: {}", o.of("T2"));
    assert_eq!(counter(&s, 1, "lock_waits"), 1);
    assert_eq!(o.reads("T3"), vec![some("y1")]);
}

#[test]
fn a_shared_lock_lost_in_a_crash_makes_the_prepare_vote_no() {
    let mut s = sim::<TwoPlNode>(None);
    let o = Observed::default();
    // T1 on node 0 reads y (its shared lock at node 1 from ~33.5 ms), thinks, and writes x at
    // 200 ms; node 1 crashes at 80 ms and restarts at 120 ms, without T1's lock. T2 on node 1
    // overwrites y in between. T1's prepare at node 1 finds no lock and votes no.
    let t1 = Txn::new("T1").read(&y()).sleep(ms(130)).write(&x(), "x1");
    spawn_client(&mut s, 0, ms(0), vec![t1], &o);
    spawn_client(
        &mut s,
        1,
        ms(150),
        vec![Txn::new("T2").write(&y(), "y1")],
        &o,
    );
    spawn_client(&mut s, 0, ms(600), vec![Txn::new("T3").read(&x())], &o);
    s.run_until(ms(80));
    s.crash(NodeId(1));
    s.run_until(ms(120));
    s.restart(NodeId(1));
    s.run_until(ms(3_000));
    assert!(s.clients_done());
    assert_eq!(o.reads("T1"), vec![None]);
    assert!(o.committed("T2"), "{}", o.of("T2"));
    assert!(
        o.of("T1").contains("ValidationFailed"),
        "T1 lost its lock on y: {}",
        o.of("T1")
    );
    assert_eq!(counter(&s, 1, "validation_failures"), 1);
    assert_eq!(o.reads("T3"), vec![None], "T1's write of x never happened");
}
