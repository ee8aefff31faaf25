//! The golden scenarios several protocols' golden tests run, scripted once so that
//! `diff tests/golden/{A,B}.X.trace` shows what protocol `B` does differently from `A` on
//! scenario `X` (`clocksi-rep` and `str`: what local commit changes). Each runs the script for
//! protocol `P`, compares the result with golden file `PROTOCOL.X` of its [`Golden`] and
//! returns what the clients saw, for the test to assert its own protocol's outcomes. The first
//! five were written for `clocksi-rep` and `str`, and their docs say what those two do; the
//! golden test of every other protocol that runs one says what its trace shows.

use super::two_sites::{self, x, y};
use super::{Golden, Observed, Txn, assert_replicas, ms, spawn_client, static_masters, traced_sim};
use augur_contract::Protocol;
use augur_runtime::sim::Simulation;
use augur_types::{Key, NodeId};

/// The scenarios script what a protocol does with its placement's masters, from the first
/// millisecond ([`static_masters`]).
fn sim<P: Protocol>(profile: &str, dcs: usize, nodes: usize, rf: usize) -> Simulation<P> {
    traced_sim(profile, dcs, nodes, rf, static_masters())
}

/// One partition, mastered by the coordinator (n0) and replicated to n1 on the same LAN. `T1`
/// writes `K` on n0 and commits; a reader `R` on the slave at 5 ms then sees the write.
///
/// `clocksi-rep`'s coordinator prepares locally and at the slave, commits at the larger
/// proposal, answers the client once the decision is durable and tells both replicas. `str`
/// local commits at n0 (a durable `LocalCommitted` version at `RS + 1`, its PreciseClock
/// proposal), replicates its prepare to the slave, final commits at the larger proposal,
/// answers the client once the decision is durable and tells the slave.
pub fn single_partition_commit<P: Protocol>(golden: &Golden) -> Observed {
    let mut s = sim::<P>("lan", 1, 2, 2);
    let k = Key::numbered(0, 1);
    assert_replicas(&s, &k, &[0, 1]);
    let seen = Observed::default();
    spawn_client(&mut s, 0, ms(0), vec![Txn::new("T1").write(&k, "a")], &seen);
    spawn_client(&mut s, 1, ms(5), vec![Txn::new("R").read(&k)], &seen);
    golden.finish(s, 10, seen, "single_partition_commit")
}

/// Two partitions in two data centres, each replicated in both: n0 (VA) masters `A`, n1 (OR)
/// masters `B`. `T1`, coordinated by n0, writes both and commits.
///
/// Under `clocksi-rep` its prepares go to each master, each master replicates its partition's
/// prepare to its slave (the other node), all four replicas propose, and the commit reaches all
/// of them. Under `str` it local commits both at n0, which replicates them all; n0 then
/// replicates `A`'s prepare to its slave n1 and sends `B`'s to its master n1, which need not
/// replicate it back to n0. Both proposals return, and the commit reaches n1.
pub fn cross_partition_commit<P: Protocol>(golden: &Golden) -> Observed {
    let mut s = sim::<P>("3dc", 2, 2, 2);
    let (a, b) = (Key::numbered(0, 1), Key::numbered(1, 1));
    assert_replicas(&s, &a, &[0, 1]);
    assert_replicas(&s, &b, &[1, 0]);
    let seen = Observed::default();
    let t1 = Txn::new("T1").write(&a, "a1").write(&b, "b1");
    spawn_client(&mut s, 0, ms(0), vec![t1], &seen);
    golden.finish(s, 200, seen, "cross_partition_commit")
}

/// `K` is mastered in VA (n0) with its slave in OR (n1). A writer `W` coordinated by n1 writes
/// `K` at 0 ms and commits; the commit reaches n0 at ~100 ms. Readers on n0 with snapshots
/// 50 ms (`R50`) and 80 ms (`R80`) meet the prepared version and wait for the outcome.
///
/// `clocksi-rep` prepares `K` at n0 at ~33.5 ms and at n1 at ~67 ms and commits at its clock
/// proposals: the version was proposed below 50 ms but commits above it, so `R50` does not see
/// the write and `R80` does. `str` local commits `K` at n1 at once and prepares it at
/// n0 at ~33.5 ms; PreciseClock commits it at `RS + 1`, inside both snapshots, so both readers
/// see the write.
pub fn read_waits_on_prepared_version<P: Protocol>(golden: &Golden) -> Observed {
    let mut s = sim::<P>("3dc", 2, 2, 2);
    let k = Key::numbered(0, 1);
    assert_replicas(&s, &k, &[0, 1]);
    let seen = Observed::default();
    spawn_client(
        &mut s,
        1,
        ms(0),
        vec![Txn::new("W").write(&k, "new")],
        &seen,
    );
    spawn_client(&mut s, 0, ms(50), vec![Txn::new("R50").read(&k)], &seen);
    spawn_client(&mut s, 0, ms(80), vec![Txn::new("R80").read(&k)], &seen);
    golden.finish(s, 250, seen, "read_waits_on_prepared_version")
}

/// Wait-die at the master, and first committer wins. `K` is mastered by n1 (OR) with its slave
/// n0 (VA). `Old`, from n0, begins at 1 ms and commits at once: its prepare holds `K` at n1
/// from ~34.5 ms (under `str` it first local commits at n0). `Young`, from n1, begins at 10 ms
/// and commits at 40 ms: at its own master it meets the older transaction's prepared version and
/// dies (`WaitDie`). `Slow`, from n0, began at 0 ms, before `Old`, and commits at 150 ms, after
/// `Old` committed above its snapshot: the slave n0 it is coordinated on holds that newer
/// committed version, so local certification aborts it (`WriteWriteConflict`) at once. Both
/// protocols end the same way.
pub fn write_write_conflict_and_wait_die<P: Protocol>(golden: &Golden) -> Observed {
    let mut s = sim::<P>("3dc", 2, 2, 2);
    let k = Key::numbered(1, 1);
    assert_replicas(&s, &k, &[1, 0]);
    let seen = Observed::default();
    let slow = Txn::new("Slow").write(&k, "slow").sleep(ms(150));
    spawn_client(&mut s, 0, ms(0), vec![slow], &seen);
    spawn_client(
        &mut s,
        0,
        ms(1),
        vec![Txn::new("Old").write(&k, "old")],
        &seen,
    );
    let young = Txn::new("Young").write(&k, "young").sleep(ms(30));
    spawn_client(&mut s, 1, ms(10), vec![young], &seen);
    golden.finish(s, 250, seen, "write_write_conflict_and_wait_die")
}

/// Termination after a coordinator crash. `K` is mastered in VA (n0) with its slave in OR (n1).
/// `W`, coordinated by n1 (under `str` it local commits there at once), decides to commit at
/// ~67 ms, makes the decision durable, answers its client and sends the commit; n1 crashes at
/// 70 ms, which breaks the connection carrying the commit to n0. n0 keeps the prepared
/// version, and a reader `R` that begins there at 500 ms waits for it. n1 restarts at 1 s,
/// rebuilt from its log with the decision. At the first garbage-collection tick after
/// `participant_timeout` (2 s) n0 asks n1 for the outcome; n1 answers from its decision log,
/// n0 commits, acknowledges, and the reader sees the write. Both protocols end the same way.
pub fn coordinator_crash_resolved_by_termination<P: Protocol>(golden: &Golden) -> Observed {
    let mut s = sim::<P>("3dc", 2, 2, 2);
    let k = Key::numbered(0, 1);
    assert_replicas(&s, &k, &[0, 1]);
    let seen = Observed::default();
    spawn_client(&mut s, 1, ms(0), vec![Txn::new("W").write(&k, "v")], &seen);
    spawn_client(&mut s, 0, ms(500), vec![Txn::new("R").read(&k)], &seen);
    s.run_until(ms(70));
    s.crash(NodeId(1));
    s.run_until(ms(1000));
    s.restart(NodeId(1));
    golden.finish(s, 2200, seen, "coordinator_crash_resolved_by_termination")
}

/// The unreplicated counterpart of [`single_partition_commit`], for the protocols that
/// replicate nothing (`sss`, `rococo`): "3dc" cut to two data centres, `x` on n0 (VA) only.
/// `T1` on n0 writes `x` and commits, a single-partition commit at its own node; a reader `R`
/// on n1 (OR) begins at 5 ms and reads `x` remotely (~33.5 ms each way).
pub fn single_partition_commit_unreplicated<P: Protocol>(golden: &Golden) -> Observed {
    let mut s = two_sites::sim::<P>(None);
    let seen = Observed::default();
    spawn_client(
        &mut s,
        0,
        ms(0),
        vec![Txn::new("T1").write(&x(), "a")],
        &seen,
    );
    spawn_client(&mut s, 1, ms(5), vec![Txn::new("R").read(&x())], &seen);
    golden.finish(s, 200, seen, "single_partition_commit_unreplicated")
}

/// The unreplicated counterpart of [`cross_partition_commit`]: "3dc" cut to two data centres,
/// `x` on n0 (VA) only, `y` on n1 (OR) only. `T1`, coordinated by n0, writes both and
/// commits, a commit across the two sites; a reader `R` on n1 reads both at 300 ms.
pub fn cross_partition_commit_unreplicated<P: Protocol>(golden: &Golden) -> Observed {
    let mut s = two_sites::sim::<P>(None);
    let seen = Observed::default();
    let t1 = Txn::new("T1").write(&x(), "x1").write(&y(), "y1");
    spawn_client(&mut s, 0, ms(0), vec![t1], &seen);
    let r = Txn::new("R").read(&x()).read(&y());
    spawn_client(&mut s, 1, ms(300), vec![r], &seen);
    golden.finish(s, 500, seen, "cross_partition_commit_unreplicated")
}

/// Two read-modify-writes of one key race at its node: the script of
/// `two_sites::read_modify_writes` (the lost-update scenario of `occ.rs`, `two_pl.rs`,
/// `walter.rs`, `rococo.rs`), traced. "3dc" cut to two data centres, no replication, `x` on n0.
/// `T1` (n0, 0 ms) reads `x`, thinks 20 ms and writes "a"; `T2` (another client of n0, 5 ms)
/// reads `x`, thinks 40 ms and writes "b"; both commit after their think time, `T1` first. `T3`
/// reads `x` at 200 ms. A protocol that prevents lost updates lets at most one of `T1` and `T2`
/// commit (`T3` reads that one's value); one without concurrency control commits both and `T3`
/// reads "b". Everything happens at n0; n1 only starts.
pub fn read_modify_write_race<P: Protocol>(golden: &Golden) -> Observed {
    let mut s = two_sites::sim::<P>(None);
    let o = Observed::default();
    let t1 = Txn::new("T1").read(&x()).sleep(ms(20)).write(&x(), "a");
    let t2 = Txn::new("T2").read(&x()).sleep(ms(40)).write(&x(), "b");
    spawn_client(&mut s, 0, ms(0), vec![t1], &o);
    spawn_client(&mut s, 0, ms(5), vec![t2], &o);
    spawn_client(&mut s, 0, ms(200), vec![Txn::new("T3").read(&x())], &o);
    golden.finish(s, 400, o, "read_modify_write_race")
}
