//! The commit-timestamp promises (`timestamps_order_dependencies`, `bounded_staleness`) on tiny
//! hand-built histories: one that keeps them, and one breaking each rule.

use augur_check::{ValueModel, bounded_staleness, timestamps_order_dependencies};
use augur_types::history::RecordedOutcome;
use std::time::Duration;

use crate::common;
use common::{Builder, aborted, append, ok, r, w};

const LA: ValueModel = ValueModel::ListAppend;
const RW: ValueModel = ValueModel::RwRegister;

/// Two appends to `x` in a row: `[1]` stamped 10 and acknowledged at 100 µs, then `[1 2]`
/// stamped 20 and acknowledged at 200 µs.
fn two_appends() -> Builder {
    let mut b = Builder::default();
    b.txn(1, (0, 100), append("x", None, 1).into(), ok(10));
    b.txn(2, (150, 200), append("x", Some("1"), 2).into(), ok(20));
    b
}

fn order(b: &Builder, model: ValueModel) -> Result<(), String> {
    timestamps_order_dependencies(&b.history(), model)
}

fn staleness(b: &Builder, delta_us: u64) -> Result<(), String> {
    bounded_staleness(&b.history(), LA, Duration::from_micros(delta_us))
}

/// `result` is an error whose message holds every one of `words`.
fn fails_with(result: Result<(), String>, words: &[&str]) {
    let err = result.expect_err("the promise should be broken");
    for word in words {
        assert!(err.contains(word), "{word:?} not in: {err}");
    }
}

#[test]
fn timestamps_following_dependencies_keep_both_promises() {
    let mut b = two_appends();
    // Reads at exactly the timestamp of the version it returns, the next one stamped above.
    b.txn(3, (160, 170), vec![r("x", Some("1"))], ok(10));
    b.txn(
        4,
        (300, 310),
        vec![r("x", Some("1 2")), r("y", None)],
        ok(25),
    );
    // Reads the initial version below every version's timestamp.
    b.txn(5, (0, 5), vec![r("x", None)], ok(3));
    // An update that read x and wrote y: stamped above what it read.
    b.txn(
        6,
        (400, 500),
        vec![r("x", Some("1 2")), r("y", None), w("y", "7")],
        ok(30),
    );
    assert_eq!(order(&b, LA), Ok(()));
    assert_eq!(staleness(&b, 50), Ok(()));
}

#[test]
fn an_update_reading_a_later_stamped_version_breaks_the_order() {
    let mut b = Builder::default();
    b.txn(1, (0, 100), append("x", None, 1).into(), ok(10));
    // Read [1] and appended to it, but stamped below its writer: a wr edge backwards.
    b.txn(2, (150, 200), append("x", Some("1"), 2).into(), ok(5));
    fails_with(
        order(&b, LA),
        &["T0 (client 1) -wr-> T1 (client 2)", "stamped 10", "T1 5"],
    );
}

#[test]
fn a_read_only_transaction_missing_a_version_at_or_below_its_timestamp_breaks_the_order() {
    let mut b = two_appends();
    // Reads at 25, above [1 2]'s 20, yet returned the older [1].
    b.txn(3, (300, 310), vec![r("x", Some("1"))], ok(25));
    fails_with(
        order(&b, LA),
        &[
            "T2 (client 3) -rw-> T1 (client 2)",
            "reads at 25",
            "stamped 20",
            "newest version",
        ],
    );
}

#[test]
fn a_read_only_transaction_reading_a_version_above_its_timestamp_breaks_the_order() {
    let mut b = two_appends();
    // Reads at 15, yet returned [1 2], stamped 20.
    b.txn(3, (300, 310), vec![r("x", Some("1 2"))], ok(15));
    fails_with(
        order(&b, LA),
        &[
            "T1 (client 2) -wr-> T2 (client 3)",
            "reads at 15",
            "stamped 20",
        ],
    );
}

#[test]
fn registers_order_only_what_the_values_show() {
    let mut b = Builder::default();
    // Two blind writes of x: only their timestamps would order them, so no ww edge is judged.
    b.concurrent(vec![w("x", "a")], ok(20));
    b.concurrent(vec![w("x", "b")], ok(10));
    assert_eq!(order(&b, RW), Ok(()));
    // A read then a write of y orders its versions: stamped backwards, that is caught.
    b.concurrent(vec![w("y", "c")], ok(30));
    b.concurrent(vec![r("y", Some("c")), w("y", "d")], ok(25));
    fails_with(order(&b, RW), &["-wr->", "on y", "stamped 30"]);
}

#[test]
fn aborted_and_unknown_attempts_are_not_judged() {
    let mut b = two_appends();
    // An aborted attempt stamped below what it read, and one whose outcome nobody learned.
    b.txn(3, (300, 400), append("x", Some("1 2"), 3).into(), aborted());
    b.txn(
        4,
        (300, 400),
        append("x", Some("1 2"), 4).into(),
        RecordedOutcome::Unknown,
    );
    assert_eq!(order(&b, LA), Ok(()));
    // Neither was acknowledged, so a reader long after may miss both.
    b.txn(5, (10_000, 10_010), vec![r("x", Some("1 2"))], ok(50));
    assert_eq!(staleness(&b, 50), Ok(()));
}

#[test]
fn a_read_missing_an_update_acknowledged_more_than_the_bound_before_is_stale() {
    let mut b = two_appends();
    // Invoked 800 µs after [1 2] was acknowledged, with a bound of 500 µs, yet read [1].
    b.txn(3, (1_000, 1_010), vec![r("x", Some("1"))], ok(15));
    fails_with(
        staleness(&b, 500),
        &[
            "1 stale read(s)",
            "T2 (client 3), invoked at 1000 µs",
            "x = \"1\"",
            "T1 (client 2)'s later version \"1 2\"",
            "at 200 µs, 800 µs before the reader began",
        ],
    );
}

#[test]
fn a_read_missing_an_update_acknowledged_within_the_bound_is_not_stale() {
    let mut b = two_appends();
    // Invoked 400 µs after [1 2] was acknowledged: within the 500 µs bound, so [1] may be read;
    // [1] itself was acknowledged 500 µs before, so the initial version may not.
    b.txn(3, (600, 610), vec![r("x", Some("1"))], ok(15));
    assert_eq!(staleness(&b, 500), Ok(()));
    b.txn(4, (600, 610), vec![r("x", None)], ok(5));
    fails_with(
        staleness(&b, 500),
        &["T3 (client 4)", "nil (the initial version)"],
    );
}

#[test]
fn stale_register_reads_follow_read_then_write_order() {
    let mut b = Builder::default();
    b.txn(1, (0, 100), vec![w("x", "a")], ok(10));
    b.txn(2, (150, 200), vec![r("x", Some("a")), w("x", "b")], ok(20));
    // A blind write acknowledged long before: no version order places "a" against it.
    b.txn(3, (0, 50), vec![w("x", "z")], ok(5));
    b.txn(4, (1_000, 1_010), vec![r("x", Some("a"))], ok(15));
    let history = b.history();
    let bound = Duration::from_micros(500);
    fails_with(
        bounded_staleness(&history, RW, bound),
        &["T3 (client 4)", "x = \"a\"", "later version \"b\""],
    );
}
