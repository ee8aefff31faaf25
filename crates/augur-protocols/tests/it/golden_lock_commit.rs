//! Golden trace tests for the eight protocols of the lock-and-2PC engine
//! (`common::lock_commit`): `2pc-baseline`, `occ`, `2pl`, `rc`, `dst-occ`, `dst-2pl`, `gts`
//! and `vts`, each as registered (wrapped in `AtCoordinator`). Each runs three scenarios of
//! `common::scenarios`: the replicated single- and cross-partition commits of the snapshot
//! protocols' golden tests, and a race of two read-modify-writes of one key, so that
//! `diff tests/golden/{occ,dst-occ}.read_modify_write_race.trace` shows what one flavor does
//! differently from another. How to read a golden file is in the `common` module docs.
//!
//! What every flavor's trace of the two commits shows (the differences are in each test's
//! doc): a read-write transaction begins with no message (its id range is logged once,
//! `IdsReserved`); at commit the coordinator prepares every replica of every key written, the
//! master and its slave alike — itself by logging `Prepared`, the other node by one `Prepare`
//! that carries all that node's keys (in the cross-partition commit n1 replicates both
//! partitions, so one message covers both) —, the other node logs `Prepared` and votes with a
//! proposal; with every yes the coordinator logs `Decided` and `Committed`, answers its client
//! and sends `Decide` once that is durable; the replica logs and installs it and acknowledges
//! (`Applied`), and the coordinator forgets the decision (`Forgotten`). `dst-occ` and
//! `dst-2pl` are identical in both (their difference is in how reads lock). In the race,
//! everything is local to n0: a commit there is one log sync, and the flavors differ in how
//! `T2` loses.
//!
//! ```text
//! AUGUR_BLESS=1 cargo test -p augur-protocols --test it golden_lock_commit::
//! git diff -- crates/augur-protocols/tests/golden/
//! ```

use crate::common;

use augur_contract::Protocol;
use augur_protocols::common::at_coordinator::AtCoordinator;
use augur_protocols::dst_2pl::Dst2PlNode;
use augur_protocols::dst_occ::DstOccNode;
use augur_protocols::gts::GtsNode;
use augur_protocols::occ::OccNode;
use augur_protocols::rc::RcNode;
use augur_protocols::two_pl::TwoPlNode;
use augur_protocols::twopc_baseline::TwoPcBaseline;
use augur_protocols::vts::VtsNode;
use common::{Golden, Observed, scenarios, some};

const TWOPC: Golden = Golden::new("golden_lock_commit", "2pc-baseline");
const OCC: Golden = Golden::new("golden_lock_commit", "occ");
const TWO_PL: Golden = Golden::new("golden_lock_commit", "2pl");
const RC: Golden = Golden::new("golden_lock_commit", "rc");
const DST_OCC: Golden = Golden::readable("golden_lock_commit", "dst-occ", common::readable_hybrid);
const DST_2PL: Golden = Golden::readable("golden_lock_commit", "dst-2pl", common::readable_hybrid);
const GTS: Golden = Golden::new("golden_lock_commit", "gts");
const VTS: Golden = Golden::new("golden_lock_commit", "vts");

/// [`scenarios::single_partition_commit`]: `T1` commits and the reader on the slave reads
/// `reads` (what its snapshot or the newest version holds at 5 ms).
fn single<P: Protocol>(golden: &Golden, reads: Option<&str>) -> Observed {
    let seen = scenarios::single_partition_commit::<AtCoordinator<P>>(golden);
    assert_eq!(seen.of("T1"), r#"write 0/1 = "a"; committed"#);
    assert_eq!(seen.reads("R"), vec![reads.map(str::to_string)]);
    assert!(seen.committed("R"), "{}", seen.of("R"));
    seen
}

/// [`scenarios::cross_partition_commit`]: `T1` commits.
fn cross<P: Protocol>(golden: &Golden) -> Observed {
    let seen = scenarios::cross_partition_commit::<AtCoordinator<P>>(golden);
    assert_eq!(
        seen.of("T1"),
        r#"write 0/1 = "a1"; write 1/1 = "b1"; committed"#
    );
    seen
}

/// [`scenarios::read_modify_write_race`]: `T1` commits; `T2` ends as `t2` says; `T3` reads
/// `T1`'s value.
fn race<P: Protocol>(golden: &Golden, t2: &str) -> Observed {
    let seen = scenarios::read_modify_write_race::<AtCoordinator<P>>(golden);
    assert_eq!(
        seen.of("T1"),
        r#"read 0/1 = None; write 0/1 = "a"; committed"#
    );
    assert_eq!(
        seen.of("T2"),
        format!(r#"read 0/1 = None; write 0/1 = "b"; {t2}"#)
    );
    assert_eq!(seen.reads("T3"), vec![some("a")]);
    assert!(seen.committed("T3"));
    seen
}

// ----- 2pc-baseline -----

/// The reader `R` on the slave n1 reads its nearest replica (n1's own, no message) and validates at
/// commit, at every replica of the key read: it logs `Prepared` (reads only) at n1 and sends
/// `Prepare` to n0, which logs it and votes; `R` commits and sends `Decide`, which n0 logs.
#[test]
fn twopc_baseline_single_partition_commit() {
    single::<TwoPcBaseline>(&TWOPC, Some("a"));
}

/// The common two-phase commit (module docs) with one `Prepare` to n1 for both keys, one round trip
/// to OR (~67 ms) before the decision.
#[test]
fn twopc_baseline_cross_partition_commit() {
    cross::<TwoPcBaseline>(&TWOPC);
}

/// `T1` commits at n0 alone: `Prepared` (with its read of `x`) and `Committed` in one sync, no
/// `Decided` (no other replica). `T2`'s commit finds that `x`, which it read absent, now has `T1`'s
/// version: it aborts `ValidationFailed` at once, logging nothing. `T3` validates its read-only
/// read locally and commits.
#[test]
fn twopc_baseline_read_modify_write_race() {
    race::<TwoPcBaseline>(&TWOPC, "commit failed: Aborted(ValidationFailed)");
}

// ----- occ -----

/// The reader `R` on n1 reads at the key's master n0 (`Read`/`ReadReply` with the version's
/// writer); at commit its validation round (`Validate`/`Validated`) holds and logs nothing, and it
/// commits.
#[test]
fn occ_single_partition_commit() {
    single::<OccNode>(&OCC, Some("a"));
}

/// As `2pc-baseline`'s, message for message: no key is read, so no validation round follows the
/// locking one.
#[test]
fn occ_cross_partition_commit() {
    cross::<OccNode>(&OCC);
}

/// `T1` commits locally. `T2`'s commit locks `x` exclusively and logs `Prepared` (the locking
/// round), then its validation of its read of `x` fails: it logs `Aborted` and its client hears
/// `ValidationFailed` once that is durable.
#[test]
fn occ_read_modify_write_race() {
    race::<OccNode>(&OCC, "commit failed: Aborted(ValidationFailed)");
}

// ----- 2pl -----

/// The reader `R` reads at the master n0, which takes a shared lock (in memory) before answering;
/// at commit `R` sends `Prepare` (reads only) to n0, which checks it still holds that lock, logs
/// `Prepared` and votes; `R`'s `Decide` releases the lock.
#[test]
fn two_pl_single_partition_commit() {
    single::<TwoPlNode>(&TWO_PL, Some("a"));
}

/// As `2pc-baseline`'s, message for message.
#[test]
fn two_pl_cross_partition_commit() {
    cross::<TwoPlNode>(&TWO_PL);
}

/// Both read `x` under shared locks. `T1`'s commit (20 ms) must upgrade to an exclusive lock, and
/// waits for `T2`'s shared lock (the `Locks` timer bounds the wait). At 45 ms `T2`'s commit would
/// wait for the older `T1`: it dies (`WaitDie`), releasing its shared lock, and `T1` takes the
/// lock, logs `Prepared` and `Committed` and is answered at the same instant, 25 ms after it asked.
#[test]
fn two_pl_read_modify_write_race() {
    race::<TwoPlNode>(&TWO_PL, "commit failed: Aborted(WaitDie)");
}

// ----- rc -----

/// The reader `R` reads at the master n0 and commits with no message at all: nothing validates a
/// read-only transaction under `rc`.
#[test]
fn rc_single_partition_commit() {
    single::<RcNode>(&RC, Some("a"));
}

/// As `2pc-baseline`'s, message for message.
#[test]
fn rc_cross_partition_commit() {
    cross::<RcNode>(&RC);
}

/// As `occ`'s: updates are validated like `occ`'s (lock, log `Prepared`, validation fails, log
/// `Aborted`), so no update is lost; only `T3`, read-only, commits unvalidated.
#[test]
fn rc_read_modify_write_race() {
    race::<RcNode>(&RC, "commit failed: Aborted(ValidationFailed)");
}

// ----- dst-occ -----

/// Timestamps are hybrid. `T1` begins at `hts(0.020)`; the slave votes the floor its versions
/// impose (`Timestamp(1)`: none), and `T1` commits at its own timestamp. The reader `R`'s snapshot
/// is `hts(5.020)`; its read at the master n0 claims the key up to its snapshot and logs the claim
/// ceiling (`Served`) before answering, and `R` commits at its snapshot with no message.
#[test]
fn dst_occ_single_partition_commit() {
    single::<DstOccNode>(&DST_OCC, Some("a"));
}

/// As `2pc-baseline`'s with hybrid timestamps (`T1` commits at its begin timestamp), and the 50 ms
/// tick's `Horizon` announcements between the nodes.
#[test]
fn dst_occ_cross_partition_commit() {
    cross::<DstOccNode>(&DST_OCC);
}

/// As `occ`'s, with hybrid timestamps; `T3`'s read logs its claim (`Served`) and holds the value
/// until that is durable.
#[test]
fn dst_occ_read_modify_write_race() {
    race::<DstOccNode>(&DST_OCC, "commit failed: Aborted(ValidationFailed)");
}

// ----- dst-2pl -----

/// Identical to `dst-occ`'s.
#[test]
fn dst_2pl_single_partition_commit() {
    single::<Dst2PlNode>(&DST_2PL, Some("a"));
}

/// Identical to `dst-occ`'s.
#[test]
fn dst_2pl_cross_partition_commit() {
    cross::<Dst2PlNode>(&DST_2PL);
}

/// As `2pl`'s (the older `T1` waits for `T2`'s shared lock, `T2` dies at its commit), with hybrid
/// timestamps.
#[test]
fn dst_2pl_read_modify_write_race() {
    race::<Dst2PlNode>(&DST_2PL, "commit failed: Aborted(WaitDie)");
}

// ----- gts -----

/// n0 is the oracle: at the decision the coordinator takes the global timestamp 1 from it (locally,
/// logging the oracle's lease `Served`), and `T1` commits at 1. The reader `R` on n1 fetches the
/// stable timestamp from the oracle (`FetchStable`/`Stable` 1, the oracle logging its `Watermark`
/// before answering) and reads at the master with snapshot 1; it commits with no message.
#[test]
fn gts_single_partition_commit() {
    single::<GtsNode>(&GTS, Some("a"));
}

/// As `2pc-baseline`'s, with the commit timestamp (1) taken from the local oracle at the decision,
/// and the oracle's 50 ms tick: `Stable` (0, then its `Watermark` 1 at 150 ms) and `Horizon`
/// announcements.
#[test]
fn gts_cross_partition_commit() {
    cross::<GtsNode>(&GTS);
}

/// As `occ`'s; `T1` commits at oracle timestamp 1, `T2` took 2 and released it by aborting, so at
/// the 50 ms tick the oracle logs `Watermark` 2 and announces `Stable` 2, and `T3` reads at
/// snapshot 2.
#[test]
fn gts_read_modify_write_race() {
    race::<GtsNode>(&GTS, "commit failed: Aborted(ValidationFailed)");
}

// ----- vts -----

/// n0 is the oracle. At the decision `T1` is tagged ⟨n0:1⟩ (`Tagged`, `Tag`), and the tag travels
/// with `Decide`, which the slave logs (`Tag`). The reader `R` on n1 fetches the stable vector ([1,
/// 0], logged by the oracle) and reads at the master at that vector (`ReadAt`); it commits with no
/// message.
#[test]
fn vts_single_partition_commit() {
    single::<VtsNode>(&VTS, Some("a"));
}

/// As `gts`'s, with `T1` tagged ⟨n0:1⟩ instead of a global timestamp and vectors in the tick's
/// announcements (`StableVector`, `HorizonVector`).
#[test]
fn vts_cross_partition_commit() {
    cross::<VtsNode>(&VTS);
}

/// As `occ`'s; `T1` is tagged ⟨n0:1⟩, which the 50 ms tick makes stable ([1, 0]); `T3` reads it.
#[test]
fn vts_read_modify_write_race() {
    race::<VtsNode>(&VTS, "commit failed: Aborted(ValidationFailed)");
}
