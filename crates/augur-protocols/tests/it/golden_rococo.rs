//! Golden trace tests for `rococo` (ROCOCO, OSDI 2014), as registered (it runs one-shot
//! procedures as pieces itself): the unreplicated single- and cross-partition commits and the
//! read-modify-write race of `common::scenarios`, and ROCOCO's deferred execution, in which a
//! committed piece waits for the pieces it depends on. Runs on "3dc" cut to two data centres
//! with no replication (`common::two_sites`): `x` on n0 (VA), `y` on n1 (OR). How to read a
//! golden file is in the `common` module docs.
//!
//! ```text
//! AUGUR_BLESS=1 cargo test -p augur-protocols --test it golden_rococo::
//! git diff -- crates/augur-protocols/tests/golden/
//! ```

use crate::common;

use augur_protocols::rococo::Rococo;
use common::two_sites::{self, x, y};
use common::{Golden, Observed, Txn, counter, ms, scenarios, some, spawn_client};

const ROCOCO: Golden = Golden::new("golden_rococo", "rococo");

/// `T1` touches n0 only: its piece starts, is decided, executes and finishes in one handler
/// (`Started`, `Decided`, `Executed`, `Finished`, one sync), with no message. The reader `R` on n1
/// reads at n0 and, having read one key, commits with no second round.
#[test]
fn rococo_single_partition_commit() {
    let seen = scenarios::single_partition_commit_unreplicated::<Rococo>(&ROCOCO);
    assert_eq!(seen.of("T1"), r#"write 0/1 = "a"; committed"#);
    assert_eq!(seen.of("R"), r#"read 0/1 = "a"; committed"#);
}

/// `T1`'s pieces start at n0 and n1 (`Start`/`Started`, with no dependencies); n0 decides, executes
/// its piece and sends `Commit`; n1 executes and reports (`Executed`), and only then is the client
/// answered (134 ms, two round trips). The reader `R` reads `x` at n0 and `y` locally, then
/// confirms its remote read in a second round (`Confirm`/`Confirmed` with the versions) before it
/// commits.
#[test]
fn rococo_cross_partition_commit() {
    let seen = scenarios::cross_partition_commit_unreplicated::<Rococo>(&ROCOCO);
    assert_eq!(
        seen.of("T1"),
        r#"write 0/1 = "x1"; write 1/1 = "y1"; committed"#
    );
    assert_eq!(seen.reads("R"), vec![some("x1"), some("y1")]);
    assert!(seen.committed("R"));
}

/// `T1` commits locally in one handler. `T2`'s start phase validates its read of `x`, which `T1`
/// has overwritten: `ValidationFailed` at once, nothing logged.
#[test]
fn rococo_read_modify_write_race() {
    let seen = scenarios::read_modify_write_race::<Rococo>(&ROCOCO);
    assert_eq!(
        seen.of("T1"),
        r#"read 0/1 = None; write 0/1 = "a"; committed"#
    );
    assert!(
        seen.of("T2").contains("commit failed: Aborted("),
        "{}",
        seen.of("T2")
    );
    assert_eq!(seen.reads("T3"), vec![some("a")]);
}

/// `T1` (n0, older) writes `x` and `y` blindly; `T2` (n1, younger) writes `y` blindly at 40 ms,
/// while `T1`'s piece is pending on n1; `T3` reads `y` at 400 ms.
///
/// `T1`'s piece is `Started` at n1 at 33.8 ms. `T2`, touching n1 only, is decided at once
/// (40.2 ms) with `T1` among its dependencies (`deps: [T0.1]`), but may not execute before it.
/// `T1`'s `Commit` reaches n1 at 101 ms: n1 executes `T1`'s piece, then `T2`'s, and answers
/// `T2`'s client then; `T1`'s client hears once n1 reports its execution (134.6 ms). `T3` reads
/// `T2`'s value.
#[test]
fn rococo_a_committed_piece_waits_for_the_pieces_it_depends_on() {
    let mut s = two_sites::sim::<Rococo>(None);
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
    s.run_until(ms(600));
    ROCOCO.check(&s, &o, "dependent_pieces_execute_in_dependency_order");
    assert!(o.committed("T1") && o.committed("T2"), "{}", o.render());
    assert_eq!(o.reads("T3"), vec![some("y2")]);
    assert_eq!(counter(&s, 1, "pieces_executed"), 2);
}
