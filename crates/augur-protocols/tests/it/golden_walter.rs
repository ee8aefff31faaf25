//! Golden trace tests for `walter` (Walter, SOSP 2011: parallel snapshot isolation), as
//! registered (wrapped in `AtCoordinator`): the replicated single- and cross-partition commits
//! of `common::scenarios` (Walter's Fig. 3 replicates each object at two sites) and the
//! read-modify-write race, which Walter's fast commit settles by its write-write check. How to
//! read a golden file is in the `common` module docs.
//!
//! ```text
//! AUGUR_BLESS=1 cargo test -p augur-protocols --test it golden_walter::
//! git diff -- crates/augur-protocols/tests/golden/
//! ```

use crate::common;

use augur_protocols::common::at_coordinator::AtCoordinator;
use augur_protocols::walter::Walter;
use common::{Golden, scenarios, some};

const WALTER: Golden = Golden::new("golden_walter", "walter");

type Node = AtCoordinator<Walter>;

/// Fast commit: n0 is `K`'s preferred site, so `T1` commits there at once (`Applied`, one sync) and
/// propagates its writes to the other replica n1 (`Propagate`), which applies them. The reader `R`
/// on n1 reads its own replica under a snapshot fixed at begin, and commits with no message.
#[test]
fn walter_single_partition_commit() {
    let seen = scenarios::single_partition_commit::<Node>(&WALTER);
    assert_eq!(seen.of("T1"), r#"write 0/1 = "a"; committed"#);
    assert_eq!(seen.of("R"), r#"read 0/1 = "a"; committed"#);
}

/// Slow commit: `B`'s preferred site is n1, so n0 locks `A` itself (`Locked`) and sends n1 a
/// `Prepare`, which locks `B` and votes; n0 then commits, answers (67 ms) and propagates both
/// writes to n1, whose application (101 ms) releases its lock. The 50 ms ticks exchange each site's
/// applied and low vector clocks (`Status`).
#[test]
fn walter_cross_partition_commit() {
    let seen = scenarios::cross_partition_commit::<Node>(&WALTER);
    assert_eq!(
        seen.of("T1"),
        r#"write 0/1 = "a1"; write 1/1 = "b1"; committed"#
    );
}

/// Both at `x`'s preferred site n0: `T1` fast commits and propagates a commit with no writes for n1
/// (which holds nothing of `x`, but numbers n0's transactions); `T2`'s fast commit finds `x`
/// written since its snapshot and aborts `WriteWriteConflict` with no log write. `T3` reads "a".
#[test]
fn walter_read_modify_write_race() {
    let seen = scenarios::read_modify_write_race::<Node>(&WALTER);
    assert_eq!(
        seen.of("T1"),
        r#"read 0/1 = None; write 0/1 = "a"; committed"#
    );
    assert_eq!(
        seen.of("T2"),
        r#"read 0/1 = None; write 0/1 = "b"; commit failed: Aborted(WriteWriteConflict)"#
    );
    assert_eq!(seen.reads("T3"), vec![some("a")]);
}
