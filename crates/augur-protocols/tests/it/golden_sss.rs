//! Golden trace tests for `sss` (SSS, ICDCS 2018), as registered (wrapped in `AtCoordinator`):
//! the unreplicated single- and cross-partition commits and the read-modify-write race of
//! `common::scenarios`, and SSS's Fig. 1, in which a read-only transaction holds the reply of
//! the update that overwrote what it read. Runs on "3dc" cut to two data centres with no
//! replication (`common::two_sites`): `x` on n0 (VA), `y` on n1 (OR). How to read a golden
//! file is in the `common` module docs.
//!
//! ```text
//! AUGUR_BLESS=1 cargo test -p augur-protocols --test it golden_sss::
//! git diff -- crates/augur-protocols/tests/golden/
//! ```

use crate::common;

use augur_protocols::common::at_coordinator::AtCoordinator;
use augur_protocols::sss::Sss;
use common::two_sites::{self, y};
use common::{Golden, Observed, Txn, ms, scenarios, some, spawn_client};

const SSS: Golden = Golden::new("golden_sss", "sss");

type Node = AtCoordinator<Sss>;

/// The coordinator n0 runs its two-phase commit through messages to itself (`Prepare`, `Vote`,
/// `Decide`, `Ack`, `Released`), each waiting for the log sync of the handler before it (the
/// records `Prepared`, `Decided`, `Applied`, `Forgotten`): four syncs in a row before `T1`'s
/// client is answered, at 0.56 ms, where the other engines need one. The reader `R` on n1 reads at n0, which enters it
/// in `x`'s snapshot-queue (`ReaderEntered`, logged before the reply); its commit sends `Remove`.
#[test]
fn sss_single_partition_commit() {
    let seen = scenarios::single_partition_commit_unreplicated::<Node>(&SSS);
    assert_eq!(seen.of("T1"), r#"write 0/1 = "a"; committed"#);
    assert_eq!(seen.of("R"), r#"read 0/1 = "a"; committed"#);
}

/// `T1` prepares at n0 (itself) and n1, whose votes merge into vector clock [1, 1]; the decision
/// goes to both, each applies and acknowledges (`Ack`), and only with both acknowledgements does n0
/// answer its client and release the transaction everywhere (`Released`), two round trips to OR
/// after the prepare (134 ms). `R` reads `x` at n0 and `y` at n1 (itself), entering both snapshot-
/// queues, and its commit removes it from both.
#[test]
fn sss_cross_partition_commit() {
    let seen = scenarios::cross_partition_commit_unreplicated::<Node>(&SSS);
    assert_eq!(
        seen.of("T1"),
        r#"write 0/1 = "x1"; write 1/1 = "y1"; committed"#
    );
    assert_eq!(seen.reads("R"), vec![some("x1"), some("y1")]);
    assert!(seen.committed("R"));
}

/// `T1` commits through n0's messages to itself. `T2`'s prepare at n0 validates its read of `x`
/// (absent) against `T1`'s version: the vote is `ValidationFailed`, the decision `None`, and its
/// client hears at once; nothing is logged. `T3` enters `x`'s snapshot-queue and reads "a".
#[test]
fn sss_read_modify_write_race() {
    let seen = scenarios::read_modify_write_race::<Node>(&SSS);
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

/// SSS Fig. 1. `T1`, read-only on n0, reads `y` (on n1) at once and thinks for 400 ms; `T2`, an
/// update on n1, overwrites `y` at 100 ms, after `T1`'s read reached n1 (~33.5 ms).
///
/// n1 enters `T1` in `y`'s snapshot-queue when it answers the read (absent). `T2` prepares,
/// decides and applies at n1 by 100.36 ms, but its `Ack` — and so its client's answer — waits
/// in the queue behind the reader: only when `T1`'s `Remove` arrives (500.8 ms, after `T1`
/// committed at 467 ms) does n1 acknowledge, with `held_us: 400440`, and answer `T2`.
#[test]
fn sss_fig1_a_reader_holds_the_reply_of_the_update_that_overwrote_what_it_read() {
    let mut s = two_sites::sim::<Node>(None);
    let seen = Observed::default();
    let t1 = Txn::new("T1").read(&y()).sleep(ms(400));
    spawn_client(&mut s, 0, ms(0), vec![t1], &seen);
    spawn_client(
        &mut s,
        1,
        ms(100),
        vec![Txn::new("T2").write(&y(), "y1")],
        &seen,
    );
    let seen = SSS.finish(s, 700, seen, "fig1_reader_holds_the_update_reply");
    assert_eq!(seen.of("T1"), "read 1/1 = None; committed");
    assert_eq!(seen.of("T2"), r#"write 1/1 = "y1"; committed"#);
    assert!(
        seen.finished_at("T2") > seen.finished_at("T1"),
        "T2 answered at {:?}, before the reader it must follow ({:?})",
        seen.finished_at("T2"),
        seen.finished_at("T1")
    );
}
