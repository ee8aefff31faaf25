//! The corpus: small hand-written histories, each with the verdict it must get at every
//! isolation level. A case names the levels at which it is invalid; at every other level it
//! must be valid. The shapes are the checker's blind spots (a non-repeatable read, blind writes
//! whose place in a key's version order no value shows) and their valid twins.

use augur_check::{CheckOptions, ValueModel, check};
use augur_types::IsolationLevel::{self, Serializable, StrictSerializable};

use crate::common::{Builder, append, cat, ok, r, w};

const LA: ValueModel = ValueModel::ListAppend;
const RW: ValueModel = ValueModel::RwRegister;

/// Every level above read committed (`IsolationLevel::ALL` begins with none and read
/// committed).
const ABOVE_RC: &[IsolationLevel] = IsolationLevel::ALL.split_at(2).1;

/// Check `b` at every level: invalid exactly at `invalid`.
fn verdicts(name: &str, b: &Builder, model: ValueModel, invalid: &[IsolationLevel]) {
    let history = b.history();
    for level in IsolationLevel::ALL {
        let report = check(&history, &CheckOptions::new(level, model));
        let expected = !invalid.contains(&level);
        assert_eq!(
            report.is_valid(),
            expected,
            "{name} at {level}: expected {}, got {:#?}",
            if expected { "valid" } else { "invalid" },
            report.anomalies
        );
    }
}

#[test]
fn a_non_repeatable_read_of_two_blind_writes() {
    // T0 and T1 write x blindly, so nothing orders their versions; T2 reads x twice and gets
    // both. Whichever came first, T2 read it and then a later one: one anti-dependency.
    let mut b = Builder::default();
    b.concurrent(vec![w("x", "1")], ok(10));
    b.concurrent(vec![w("x", "2")], ok(20));
    b.concurrent(vec![r("x", Some("1")), r("x", Some("2"))], ok(30));
    verdicts("non-repeatable read", &b, RW, ABOVE_RC);
    let report = check(&b.history(), &CheckOptions::new(Serializable, RW));
    let explanation = &report.violations().next().unwrap().explanation;
    assert!(
        explanation.starts_with("non-repeatable read"),
        "{explanation}"
    );
}

#[test]
fn a_non_repeatable_read_of_the_initial_version_then_a_write() {
    let mut b = Builder::default();
    b.concurrent(vec![w("x", "1")], ok(10));
    b.concurrent(vec![r("x", None), r("x", Some("1"))], ok(20));
    verdicts("nil then 1", &b, RW, ABOVE_RC);
}

#[test]
fn a_non_repeatable_read_of_a_list() {
    let mut b = Builder::default();
    b.concurrent(append("x", None, 1).into(), ok(10));
    b.concurrent(
        cat(vec![
            vec![r("x", Some("1"))],
            append("x", Some("1"), 2).into(),
        ]),
        ok(20),
    );
    b.concurrent(vec![r("x", Some("1")), r("x", Some("1 2"))], ok(30));
    verdicts("list read twice", &b, LA, ABOVE_RC);
}

#[test]
fn repeated_reads_of_one_value_or_after_an_own_write_are_valid() {
    // The valid twins: the same value twice, and a different value only after writing it.
    let mut b = Builder::default();
    b.concurrent(vec![w("x", "1")], ok(10));
    b.concurrent(vec![w("x", "2")], ok(20));
    b.concurrent(vec![r("x", Some("1")), r("x", Some("1"))], ok(30));
    b.concurrent(vec![r("y", None), w("y", "5"), r("y", Some("5"))], ok(40));
    verdicts("repeatable reads", &b, RW, &[]);
}

#[test]
fn an_aborted_transactions_non_repeatable_read_is_not_judged_as_a_cycle() {
    let mut b = Builder::default();
    b.concurrent(vec![w("x", "1")], ok(10));
    b.concurrent(vec![w("x", "2")], ok(20));
    b.concurrent(
        vec![r("x", Some("1")), r("x", Some("2"))],
        crate::common::aborted(),
    );
    verdicts("aborted reader", &b, RW, &[]);
}

#[test]
fn real_time_orders_two_blind_writes_at_strict_serializability() {
    // T0 wrote x = 1 and finished before T1 began to write x = 2: at strict serializability
    // 1 precedes 2, so T2, which began after both finished and read 1, read a stale version
    // (G-single-realtime). Nothing else orders the two blind writes, so every level that does
    // not follow real time accepts the history.
    let stale = |read: &str| {
        let mut b = Builder::default();
        b.txn(1, (0, 10), vec![w("x", "1")], ok(5));
        b.txn(2, (20, 30), vec![w("x", "2")], ok(25));
        b.txn(3, (40, 50), vec![r("x", Some(read))], ok(45));
        b
    };
    verdicts(
        "stale read after two blind writes",
        &stale("1"),
        RW,
        &[StrictSerializable],
    );
    let report = check(
        &stale("1").history(),
        &CheckOptions::new(StrictSerializable, RW),
    );
    let found = report.violations().next().unwrap();
    assert_eq!(found.kind.name(), "G-single-realtime", "{found}");
    assert!(
        found
            .edges
            .iter()
            .any(|e| e.why.contains("real-time order: T0 finished at 10 µs")),
        "{found}"
    );
    verdicts("fresh read after two blind writes", &stale("2"), RW, &[]);
}

#[test]
fn overlapping_blind_writes_are_not_ordered_by_real_time() {
    let mut b = Builder::default();
    b.txn(1, (0, 25), vec![w("x", "1")], ok(5));
    b.txn(2, (20, 30), vec![w("x", "2")], ok(25));
    b.txn(3, (40, 50), vec![r("x", Some("1"))], ok(45));
    verdicts("overlapping writers", &b, RW, &[]);
}
