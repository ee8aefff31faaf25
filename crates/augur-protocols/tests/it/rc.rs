//! Scenario test for `rc` (DST §5's read-committed baseline), run in the deterministic
//! simulator on "3dc" cut to two data centres with no replication (`common::two_sites`): key `x`
//! lives on node 0, `y` on node 1.
//!
//! * **Read skew commits**: a read-only transaction reads `x`, a writer then updates `x` and `y`
//!   and commits, and the reader reads `y`: it sees the writer's `y` but not its `x`, and
//!   commits, unvalidated. The recorded history is valid at read committed, the level `rc`
//!   claims, and invalid at serializability (a G-single through the reader). Under `occ` the
//!   same reader validates and aborts.

use crate::common;

use augur_client::HistoryRecorder;
use augur_contract::Protocol;
use augur_protocols::occ::OccNode;
use augur_protocols::rc::RcNode;
use augur_types::IsolationLevel;
use augur_types::history::History;
use common::two_sites::{check_at, history, sim, x, y};
use common::{Observed, Txn, counter, ms, some, spawn_client_recorded};

/// R, read-only on node 0, reads x at 0 ms and y at 300 ms; W on node 1 writes x and y at
/// 50 ms and commits (done by about 200 ms).
fn read_skew<P: Protocol>(protocol: &str) -> (Observed, History, u64) {
    let mut s = sim::<P>(None);
    let o = Observed::default();
    let recorder = HistoryRecorder::new();
    let r = Txn::new("R").read(&x()).sleep(ms(300)).read(&y());
    let w = Txn::new("W").write(&x(), "x1").write(&y(), "y1");
    for (home, start, txn) in [(0, 0, r), (1, 50, w)] {
        let recorder = Some(recorder.clone());
        spawn_client_recorded(&mut s, home, ms(start), vec![txn], &o, recorder);
    }
    s.run_until(ms(2_000));
    assert!(s.clients_done());
    let h = history(protocol, IsolationLevel::ReadCommitted, &recorder);
    let validation_failures = counter(&s, 0, "validation_failures");
    (o, h, validation_failures)
}

#[test]
fn rc_commits_a_read_skew_that_fails_serializability_and_passes_read_committed() {
    let (o, h, failures) = read_skew::<RcNode>("rc");
    assert!(o.committed("W"), "{}", o.render());
    assert!(o.committed("R"), "unvalidated: {}", o.render());
    assert_eq!(o.reads("R"), vec![None, some("y1")], "W's y but not its x");
    assert_eq!(failures, 0, "nothing validated R");
    let rc = check_at(&h, IsolationLevel::ReadCommitted);
    assert!(rc.is_valid(), "{rc:?}");
    let ser = check_at(&h, IsolationLevel::Serializable);
    assert!(!ser.is_valid(), "read skew is not serializable: {ser:?}");

    // `occ` validates the same reader, and it aborts.
    let (o, h, failures) = read_skew::<OccNode>("occ");
    assert!(o.committed("W"));
    assert!(o.of("R").contains("ValidationFailed"), "{}", o.of("R"));
    assert_eq!(failures, 1, "x's master refused R's validation");
    assert!(check_at(&h, IsolationLevel::StrictSerializable).is_valid());
}
