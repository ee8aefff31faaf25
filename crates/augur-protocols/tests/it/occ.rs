//! Scenario tests for `occ` (DST §4.2/§5.1's vanilla OCC baseline), run in the deterministic
//! simulator on "3dc" cut to two data centres (VA, OR: about 33.5 ms apart one way) with a ring
//! placement and no replication (`common::two_sites`): key `x` lives on node 0, `y` on node 1.
//!
//! * **A lost update is refused by validation**: two transactions read `x` and overwrite it; the
//!   second to commit finds, in its validation round, that `x` changed since its read, and
//!   aborts. The mutant `no-read-validation` commits both, and the first write is lost.
//! * **A read-only transaction validates, so a concurrent writer aborts it**: it read `y`, a
//!   writer overwrote `y` and committed, and its validation fails. Under `clocksi-rep` (a
//!   snapshot protocol) the same reader commits.
//! * **Validation fails on a key another transaction has locked**: a writer's commit holds `y`'s
//!   lock from its lock round until its decision arrives; a reader of the old `y` that validates
//!   in that window aborts although the version it read is still the newest.

use crate::common;

use augur_contract::Protocol;
use augur_protocols::clocksi_rep::ClockSiRep;
use augur_protocols::occ::OccNode;
use augur_runtime::sim::Simulation;
use common::two_sites::{read_modify_writes, sim, y};
use common::{Observed, Txn, counter, ms, some, spawn_client};

#[test]
fn validation_refuses_the_second_of_two_read_modify_writes() {
    // T1 reads x at 0 ms and commits "a" at 20 ms; T2 read x at 5 ms and commits "b" at 45 ms.
    let o = read_modify_writes::<OccNode>(None);
    assert!(o.committed("T1"), "{}", o.of("T1"));
    assert!(
        o.of("T2").contains("ValidationFailed"),
        "T2's read of x is stale at its validation: {}",
        o.of("T2")
    );
    assert_eq!(o.reads("T3"), vec![some("a")]);

    let o = read_modify_writes::<OccNode>(Some("no-read-validation"));
    assert!(o.committed("T1") && o.committed("T2"), "{}", o.render());
    assert_eq!(o.reads("T3"), vec![some("b")], "T1's update is lost");
}

/// T1, read-only on node 0, reads y at 0 ms and commits 200 ms later; T2 on node 1 overwrites y
/// at 100 ms and commits at once (a local commit: about 0.1 ms).
fn reader_overtaken<P: Protocol>() -> (Observed, Simulation<P>) {
    let mut s = sim::<P>(None);
    let o = Observed::default();
    let t1 = Txn::new("T1").read(&y()).sleep(ms(200));
    spawn_client(&mut s, 0, ms(0), vec![t1], &o);
    spawn_client(
        &mut s,
        1,
        ms(100),
        vec![Txn::new("T2").write(&y(), "y1")],
        &o,
    );
    s.run_until(ms(1_000));
    assert!(s.clients_done());
    (o, s)
}

#[test]
fn a_read_only_transaction_overtaken_by_a_writer_fails_validation() {
    let (o, s) = reader_overtaken::<OccNode>();
    assert!(o.committed("T2"), "{}", o.of("T2"));
    assert_eq!(o.reads("T1"), vec![None]);
    assert!(
        o.of("T1").contains("ValidationFailed"),
        "the reader validates like any other: {}",
        o.of("T1")
    );
    assert_eq!(
        counter(&s, 1, "validation_failures"),
        1,
        "y's master refused the validation"
    );

    // A snapshot protocol commits the same reader on its snapshot.
    let (o, _) = reader_overtaken::<ClockSiRep>();
    assert!(o.committed("T1") && o.committed("T2"), "{}", o.render());
}

#[test]
fn validation_fails_on_a_key_locked_by_a_committing_writer() {
    let mut s = sim::<OccNode>(None);
    let o = Observed::default();
    // T2 on node 0 writes y (on node 1): node 1 locks y at ~33.5 ms and keeps the lock until
    // the decision arrives (~100 ms). T1 on node 1 reads y at 50 ms — the old version, still the
    // newest — and commits at once: its validation finds y locked by T2.
    spawn_client(&mut s, 0, ms(0), vec![Txn::new("T2").write(&y(), "y1")], &o);
    spawn_client(&mut s, 1, ms(50), vec![Txn::new("T1").read(&y())], &o);
    spawn_client(&mut s, 1, ms(300), vec![Txn::new("T3").read(&y())], &o);
    s.run_until(ms(1_000));
    assert!(s.clients_done());
    assert!(o.committed("T2"), "{}", o.of("T2"));
    assert_eq!(o.reads("T1"), vec![None]);
    assert!(
        o.of("T1").contains("ValidationFailed"),
        "a locked key fails validation: {}",
        o.of("T1")
    );
    assert_eq!(counter(&s, 1, "validation_failures"), 1);
    assert_eq!(o.reads("T3"), vec![some("y1")]);
    assert!(o.committed("T3"));
    // OCC never waits for a lock.
    assert_eq!(counter(&s, 1, "lock_waits"), 0);
}
