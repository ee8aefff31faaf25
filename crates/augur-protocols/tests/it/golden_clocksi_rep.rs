//! Golden trace tests for `clocksi-rep`: short, fully scripted scenarios whose every message,
//! log record, timer and reply is compared with a checked-in trace, so that a change in what
//! the protocol sends (say, moving its two-phase commit into machinery shared with `str`) shows
//! up as a diff of `tests/golden/clocksi-rep.*.trace`, even when every behavioural test still
//! passes. The scenarios are scripted in `common::scenarios`, shared with `golden_str.rs`,
//! whose docs say what each protocol does; each test here asserts `clocksi-rep`'s outcomes.
//! How to read a golden file is in the `common` module docs. When a change to the traces is
//! intended, rewrite them and review the diff like code:
//!
//! ```text
//! AUGUR_BLESS=1 cargo test -p augur-protocols --test it golden_clocksi_rep::
//! git diff -- crates/augur-protocols/tests/golden/
//! ```

use crate::common;

use augur_protocols::clocksi_rep::ClockSiRep;
use common::{Golden, scenarios};

const GOLDEN: Golden = Golden::new("golden_clocksi_rep", "clocksi-rep");

#[test]
fn single_partition_commit() {
    let seen = scenarios::single_partition_commit::<ClockSiRep>(&GOLDEN);
    assert_eq!(seen.of("T1"), r#"write 0/1 = "a"; committed"#);
    assert_eq!(seen.of("R"), r#"read 0/1 = "a"; committed"#);
}

#[test]
fn cross_partition_commit() {
    let seen = scenarios::cross_partition_commit::<ClockSiRep>(&GOLDEN);
    assert_eq!(
        seen.of("T1"),
        r#"write 0/1 = "a1"; write 1/1 = "b1"; committed"#
    );
}

#[test]
fn read_waits_on_prepared_version() {
    let seen = scenarios::read_waits_on_prepared_version::<ClockSiRep>(&GOLDEN);
    assert_eq!(seen.of("R50"), "read 0/1 = None; committed");
    assert_eq!(seen.of("R80"), r#"read 0/1 = "new"; committed"#);
}

#[test]
fn write_write_conflict_and_wait_die() {
    let seen = scenarios::write_write_conflict_and_wait_die::<ClockSiRep>(&GOLDEN);
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
    let seen = scenarios::coordinator_crash_resolved_by_termination::<ClockSiRep>(&GOLDEN);
    assert_eq!(seen.of("W"), r#"write 0/1 = "v"; committed"#);
    assert_eq!(seen.of("R"), r#"read 0/1 = "v"; committed"#);
}
