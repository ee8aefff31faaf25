//! Golden trace tests for `nocc` (no concurrency control, the baseline overhead ratios are
//! measured against) and `planet` (`clocksi-rep` with one speculative commit per client, on
//! the STR engine), each as registered (wrapped in `AtCoordinator`). Both run the replicated
//! single- and cross-partition commits of `common::scenarios`; `nocc` runs the
//! read-modify-write race too (it loses an update, by design), and `planet` the wait-die
//! scenario of `clocksi-rep` and `str` and a speculative commit of its own. How to read a
//! golden file is in the `common` module docs.
//!
//! ```text
//! AUGUR_BLESS=1 cargo test -p augur-protocols --test it golden_nocc_planet::
//! git diff -- crates/augur-protocols/tests/golden/
//! ```

use crate::common;

use augur_protocols::common::at_coordinator::AtCoordinator;
use augur_protocols::nocc::Nocc;
use augur_protocols::planet::Planet;
use augur_types::Key;
use common::{Golden, Observed, Txn, assert_replicas, ms, scenarios, some, spawn_client};

const NOCC: Golden = Golden::new("golden_nocc_planet", "nocc");
const PLANET: Golden = Golden::new("golden_nocc_planet", "planet");

// ----- nocc -----

/// Nothing is logged (`nocc` has no log) and nothing is locked: `T1`'s commit applies its write at
/// the coordinator n0 and sends it to the slave n1 (`Apply`), and the client is answered once n1
/// acknowledges (`Applied`), one LAN round trip. The reader `R` reads its own replica and commits
/// with no message.
#[test]
fn nocc_single_partition_commit() {
    let seen = scenarios::single_partition_commit::<AtCoordinator<Nocc>>(&NOCC);
    assert_eq!(seen.of("T1"), r#"write 0/1 = "a"; committed"#);
    assert_eq!(seen.of("R"), r#"read 0/1 = "a"; committed"#);
}

/// n0 sends n1 one `Apply` per partition (n1 replicates both, so two messages to one node) and
/// answers once both are acknowledged, one round trip to OR.
#[test]
fn nocc_cross_partition_commit() {
    let seen = scenarios::cross_partition_commit::<AtCoordinator<Nocc>>(&NOCC);
    assert_eq!(
        seen.of("T1"),
        r#"write 0/1 = "a1"; write 1/1 = "b1"; committed"#
    );
}

/// Both commits apply at once, with no check: `T2` overwrites `T1`'s "a" with a value computed from
/// the absent `x` it read, and `T3` reads "b". The lost update `nocc` allows by design.
#[test]
fn nocc_read_modify_write_race_loses_an_update() {
    let seen = scenarios::read_modify_write_race::<AtCoordinator<Nocc>>(&NOCC);
    assert_eq!(
        seen.of("T1"),
        r#"read 0/1 = None; write 0/1 = "a"; committed"#
    );
    assert_eq!(
        seen.of("T2"),
        r#"read 0/1 = None; write 0/1 = "b"; committed"#
    );
    assert_eq!(seen.reads("T3"), vec![some("b")], "T1's update is lost");
}

// ----- planet -----

/// `str`'s trace with `clocksi-rep`'s clock: `T1` local commits at n0 (`LocalCommitted`) at its
/// clock proposal (0.161, not `str`'s PreciseClock `RS + 1`), the slave proposes its own clock and
/// `T1` final commits at the larger, as under `clocksi-rep`; the messages and records are `str`'s
/// (`FinalCommit` decisions).
#[test]
fn planet_single_partition_commit() {
    let seen = scenarios::single_partition_commit::<AtCoordinator<Planet>>(&PLANET);
    assert_eq!(seen.of("T1"), r#"write 0/1 = "a"; committed"#);
    assert_eq!(seen.of("R"), r#"read 0/1 = "a"; committed"#);
}

/// `str`'s cross-partition commit (n0 local commits both keys, sends n1 one `Prepare` for both
/// partitions and needs no `ReplicatePrepare` back) with clock proposals: it commits at n1's
/// (33.761).
#[test]
fn planet_cross_partition_commit() {
    let seen = scenarios::cross_partition_commit::<AtCoordinator<Planet>>(&PLANET);
    assert_eq!(
        seen.of("T1"),
        r#"write 0/1 = "a1"; write 1/1 = "b1"; committed"#
    );
}

/// `str`'s trace of the scenario with clock proposals: `Old` local commits at n0, prepares at n1
/// and commits at n1's proposal; `Young` dies at its own master; `Slow` fails local certification.
/// The outcomes of `clocksi-rep` and `str`.
#[test]
fn planet_write_write_conflict_and_wait_die() {
    let seen = scenarios::write_write_conflict_and_wait_die::<AtCoordinator<Planet>>(&PLANET);
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

/// One speculative commit, and a reader that waits for it and then does not see it. `X` is
/// mastered in OR (n1) with its slave n0; `Y` is mastered by n0 with its slave n1. One client
/// of n0 runs `T1`, which writes `X` and commits speculatively, then `T2`, which reads `X`,
/// writes `Y` and commits for good.
///
/// `T1` local commits at n0 at its clock (0.161) and its client is answered at once
/// (`SpecCommitted`) while its prepare travels to n1. `T2` begins at 0.3 ms (snapshot 0.300)
/// and reads `X` at n0: `planet` reads no uncommitted data, so the local-committed version is
/// a lock the read waits on, until `T1` final commits at 67 ms — at n1's proposal, 33.761,
/// above `T2`'s snapshot, so `T2` reads the version before it (absent). `T2` then local commits
/// `Y`, replicates it to n1 and final commits after `T1` (its flow predecessor); the client
/// collects `T1`'s final outcome last (`AwaitOutcome`). Snapshot isolation allows this, but the
/// client does not read its own speculatively committed write, after waiting 67 ms for it.
#[test]
fn planet_speculative_commit_and_a_reader_that_waits() {
    let mut s =
        common::traced_sim::<AtCoordinator<Planet>>("3dc", 2, 2, 2, common::static_masters());
    let (x, y) = (Key::numbered(1, 1), Key::numbered(0, 1));
    assert_replicas(&s, &x, &[1, 0]);
    assert_replicas(&s, &y, &[0, 1]);
    let seen = Observed::default();
    let t1 = Txn::new("T1").write(&x, "x1").speculative_commit();
    let t2 = Txn::new("T2").read(&x).write(&y, "y2");
    spawn_client(&mut s, 0, ms(0), vec![t1, t2], &seen);
    let seen = PLANET.finish(s, 300, seen, "speculative_commit_and_a_reader_that_waits");
    assert_eq!(
        seen.of("T1"),
        r#"write 1/1 = "x1"; spec-committed; final: committed"#
    );
    assert_eq!(
        seen.of("T2"),
        r#"read 1/1 = None; write 0/1 = "y2"; committed"#
    );
    assert!(
        seen.finished_at("T2") > ms(100),
        "T2's read waited for T1's outcome"
    );
}
