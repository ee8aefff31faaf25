//! Golden trace tests for `str`: short, fully scripted scenarios whose every message, log
//! record, timer and reply is compared with a checked-in trace, so that a change in what the
//! protocol sends (say, moving its two-phase commit into machinery shared with `clocksi-rep`)
//! shows up as a diff of `tests/golden/str.*.trace`, even when every behavioural test still
//! passes. The first five scenarios are those of `golden_clocksi_rep.rs`, scripted once in
//! `common::scenarios` (whose docs say what each protocol does), so that
//! `diff tests/golden/{clocksi-rep,str}.X.trace` shows what local commit
//! changes; each test here asserts `str`'s outcomes. The last two, scripted here, exercise
//! speculation. How to read a golden file is in the `common` module docs. When a change to the
//! traces is intended, rewrite them and review the diff like code:
//!
//! ```text
//! AUGUR_BLESS=1 cargo test -p augur-protocols --test it golden_str::
//! git diff -- crates/augur-protocols/tests/golden/
//! ```

use crate::common;

use augur_protocols::str::Str;
use augur_runtime::sim::Simulation;
use augur_types::Key;
use common::{Golden, Observed, Txn, assert_replicas, ms, scenarios, spawn_client};

const GOLDEN: Golden = Golden::new("golden_str", "str");

/// The placement's masters from the first millisecond ([`common::static_masters`]).
fn sim(profile: &str, dcs: usize, nodes: usize, rf: usize) -> Simulation<Str> {
    common::traced_sim(profile, dcs, nodes, rf, common::static_masters())
}

#[test]
fn single_partition_commit() {
    let seen = scenarios::single_partition_commit::<Str>(&GOLDEN);
    assert_eq!(seen.of("T1"), r#"write 0/1 = "a"; committed"#);
    assert_eq!(seen.of("R"), r#"read 0/1 = "a"; committed"#);
}

#[test]
fn cross_partition_commit() {
    let seen = scenarios::cross_partition_commit::<Str>(&GOLDEN);
    assert_eq!(
        seen.of("T1"),
        r#"write 0/1 = "a1"; write 1/1 = "b1"; committed"#
    );
}

#[test]
fn read_waits_on_prepared_version() {
    let seen = scenarios::read_waits_on_prepared_version::<Str>(&GOLDEN);
    assert_eq!(seen.of("R50"), r#"read 0/1 = "new"; committed"#);
    assert_eq!(seen.of("R80"), r#"read 0/1 = "new"; committed"#);
}

#[test]
fn write_write_conflict_and_wait_die() {
    let seen = scenarios::write_write_conflict_and_wait_die::<Str>(&GOLDEN);
    assert_eq!(seen.of("Old"), r#"write 1/1 = "old"; committed"#);
    assert_eq!(
        seen.of("Young"),
        r#"write 1/1 = "young"; commit failed: Aborted(WaitDie)"#
    );
    assert_eq!(
        seen.of("Slow"),
        r#"write 1/1 = "slow"; commit failed: Aborted(WriteWriteConflict)"#
    );
}

#[test]
fn coordinator_crash_resolved_by_termination() {
    let seen = scenarios::coordinator_crash_resolved_by_termination::<Str>(&GOLDEN);
    assert_eq!(seen.of("W"), r#"write 0/1 = "v"; committed"#);
    assert_eq!(seen.of("R"), r#"read 0/1 = "v"; committed"#);
}

/// A speculative read and a chain of speculative commits, on one client of n0. `X` is mastered
/// in OR (n1) with its slave n0; `Y` is mastered by n0 with its slave n1. `T1` writes `X` and
/// commits speculatively: it local commits at n0 and is answered at once, while its prepare
/// travels to n1. `T2`, begun behind it (a flow dependency), reads `X` speculatively (T1's
/// local-committed version: a data dependency), writes `Y` and commits speculatively too.
/// `T3` reads `Y` (T2's, speculatively) and commits for good: it may only final commit once
/// T2 and T1 have. All three final commit once T1's prepare round trip to OR is done.
#[test]
fn speculative_read_and_commit_chain() {
    let mut s = sim("3dc", 2, 2, 2);
    let (x, y) = (Key::numbered(1, 1), Key::numbered(0, 1));
    assert_replicas(&s, &x, &[1, 0]);
    assert_replicas(&s, &y, &[0, 1]);
    let seen = Observed::default();
    let t1 = Txn::new("T1").write(&x, "x1").speculative_commit();
    let t2 = Txn::new("T2")
        .speculative_reads()
        .read(&x)
        .write(&y, "y2")
        .speculative_commit();
    let t3 = Txn::new("T3").speculative_reads().read(&y);
    spawn_client(&mut s, 0, ms(0), vec![t1, t2, t3], &seen);
    let seen = GOLDEN.finish(s, 200, seen, "speculative_read_and_commit_chain");
    assert_eq!(
        seen.of("T1"),
        r#"write 1/1 = "x1"; spec-committed; final: committed"#
    );
    assert_eq!(
        seen.of("T2"),
        r#"read 1/1 = "x1"; write 0/1 = "y2"; spec-committed; final: committed"#
    );
    assert_eq!(seen.of("T3"), r#"read 0/1 = "y2"; committed"#);
}

/// A cascading abort. `X` is mastered in OR (n1) with its slave n0 in VA. `Remote`, on n1,
/// writes `X` at 0 ms and commits: it local commits at its master, which replicates the
/// prepare to n0 (~33.5 ms). `T1`, on n0, writes `X` at 1 ms and commits speculatively: n0
/// has not heard of `Remote` yet, so T1 local commits there and its client is answered. `T2`,
/// another client of n0, reads `X` speculatively at 5 ms (T1's local-committed version) and
/// commits. When `Remote`'s replicated prepare reaches n0 it aborts the conflicting
/// local-committed T1, and T2, which read from T1, aborts with it; T1's own prepare, reaching
/// n1 behind the older `Remote`, dies there.
#[test]
fn cascading_abort() {
    let mut s = sim("3dc", 2, 2, 2);
    let (x, y) = (Key::numbered(1, 1), Key::numbered(0, 1));
    assert_replicas(&s, &x, &[1, 0]);
    let seen = Observed::default();
    let remote = Txn::new("Remote").write(&x, "r");
    spawn_client(&mut s, 1, ms(0), vec![remote], &seen);
    let t1 = Txn::new("T1").write(&x, "t1").speculative_commit();
    spawn_client(&mut s, 0, ms(1), vec![t1], &seen);
    let t2 = Txn::new("T2").speculative_reads().read(&x).write(&y, "y2");
    spawn_client(&mut s, 0, ms(5), vec![t2], &seen);
    let seen = GOLDEN.finish(s, 200, seen, "cascading_abort");
    assert_eq!(seen.of("Remote"), r#"write 1/1 = "r"; committed"#);
    assert_eq!(
        seen.of("T1"),
        r#"write 1/1 = "t1"; spec-committed; final: aborted (Misspeculation)"#
    );
    assert_eq!(
        seen.of("T2"),
        r#"read 1/1 = "t1"; write 0/1 = "y2"; commit failed: Aborted(CascadingAbort)"#
    );
}
