//! Golden trace tests for `clocksi-rep`: short, fully scripted scenarios whose every message,
//! log record, timer and reply is compared with a checked-in trace, so that a change in what
//! the protocol sends (say, moving its two-phase commit into machinery shared with `str`) shows
//! up as a diff of `tests/golden/clocksi_rep_*.trace`, even when every behavioural test still
//! passes.
//!
//! # Reading a golden file
//!
//! One line per event: virtual time in milliseconds since the start, the node, then what
//! happened (`recv`, `request`, `timer`, `start`, `restart`, `synced`, `crash`, `lost`...);
//! the effects of a handler follow it, indented (`persist`, `send`, `reply`, `set-timer`,
//! `hold`), and messages and replies held until the log is synced leave with `release` lines
//! after the `synced` line that frees them. `ts(MS)` is a node-clock timestamp in milliseconds
//! since the start. Idle periodic ticks (a garbage-collection tick that only re-arms itself)
//! are left out. After `--- clients ---`, each scripted transaction's client view: what it read
//! and how it ended. The full format is in the `augur_runtime::sim` module documentation.
//!
//! # When a golden test fails
//!
//! The failure shows a line diff (`-` golden, `+` this run) of the first differences, with
//! context, and saves the whole trace of the run under the target directory. If the change is
//! intended, rewrite the golden files and review them like code:
//!
//! ```text
//! AUGUR_BLESS=1 cargo test -p augur-protocols --test golden_clocksi_rep
//! git diff -- crates/augur-protocols/tests/golden/
//! ```
//!
//! Every scenario runs "3dc" cut to two data centres (VA, OR: about 33.5 ms apart one way,
//! 0.1 ms within one) or "lan", with ring placements where key `Key::numbered(p, _)` lives in
//! partition `p`, mastered by node `p` with its slaves on the next nodes. Logs sync in 0.1 ms.

mod common;

use augur_protocols::clocksi_rep::ClockSiRep;
use augur_runtime::ProtocolOptions;
use augur_runtime::sim::Simulation;
use augur_types::{Key, NodeId};
use common::{Observed, Txn, assert_replicas, check_golden, golden_text, ms, spawn_client};

const TEST: &str = "golden_clocksi_rep";

fn sim(profile: &str, dcs: usize, nodes: usize, rf: usize) -> Simulation<ClockSiRep> {
    common::traced_sim(profile, dcs, nodes, rf, ProtocolOptions::default())
}

/// Run until `until`, then compare the trace and the clients' view with golden file `name`.
fn finish(mut s: Simulation<ClockSiRep>, until: u64, observed: &Observed, name: &str) {
    s.run_until(ms(until));
    assert!(s.clients_done(), "every scripted client finished");
    check_golden(TEST, name, &golden_text(s.trace(), observed));
}

/// One partition, mastered by the coordinator (n0) and replicated to n1 on the same LAN: the
/// coordinator prepares locally and at the slave, commits at the larger proposal, answers the
/// client once the decision is durable and tells both replicas. A reader on the slave then
/// sees the write.
#[test]
fn single_partition_commit() {
    let mut s = sim("lan", 1, 2, 2);
    let k = Key::numbered(0, 1);
    assert_replicas(&s, &k, &[0, 1]);
    let seen = Observed::default();
    spawn_client(&mut s, 0, ms(0), vec![Txn::new("T1").write(&k, "a")], &seen);
    spawn_client(&mut s, 1, ms(5), vec![Txn::new("R").read(&k)], &seen);
    finish(s, 10, &seen, "clocksi_rep_single_partition_commit");
    assert_eq!(seen.of("T1"), r#"write 0/1 = "a"; committed"#);
    assert_eq!(seen.of("R"), r#"read 0/1 = "a"; committed"#);
}

/// Two partitions in two data centres, each replicated in both: n0 (VA) masters `A`, n1 (OR)
/// masters `B`. A transaction coordinated by n0 writes both: its prepares go to each master,
/// each master replicates its partition's prepare to its slave (the other node), all four
/// replicas propose, and the commit reaches all of them.
#[test]
fn cross_partition_commit() {
    let mut s = sim("3dc", 2, 2, 2);
    let (a, b) = (Key::numbered(0, 1), Key::numbered(1, 1));
    assert_replicas(&s, &a, &[0, 1]);
    assert_replicas(&s, &b, &[1, 0]);
    let seen = Observed::default();
    let t1 = Txn::new("T1").write(&a, "a1").write(&b, "b1");
    spawn_client(&mut s, 0, ms(0), vec![t1], &seen);
    finish(s, 200, &seen, "clocksi_rep_cross_partition_commit");
    assert_eq!(
        seen.of("T1"),
        r#"write 0/1 = "a1"; write 1/1 = "b1"; committed"#
    );
}

/// A writer coordinated in OR (n1) prepares `K` at its master in VA (n0) at ~33.5 ms and at its
/// slave n1 at ~67 ms; the commit reaches n0 at ~100 ms. A reader on n0 with snapshot 50 ms
/// meets the prepared version (proposed below 50 ms), waits for the outcome, and then does not
/// see the write (committed above its snapshot); one with snapshot 80 ms waits and sees it.
#[test]
fn read_waits_on_prepared_version() {
    let mut s = sim("3dc", 2, 2, 2);
    let k = Key::numbered(0, 1);
    assert_replicas(&s, &k, &[0, 1]);
    let seen = Observed::default();
    spawn_client(
        &mut s,
        1,
        ms(0),
        vec![Txn::new("W").write(&k, "new")],
        &seen,
    );
    spawn_client(&mut s, 0, ms(50), vec![Txn::new("R50").read(&k)], &seen);
    spawn_client(&mut s, 0, ms(80), vec![Txn::new("R80").read(&k)], &seen);
    finish(s, 250, &seen, "clocksi_rep_read_waits_on_prepared_version");
    assert_eq!(seen.of("R50"), "read 0/1 = None; committed");
    assert_eq!(seen.of("R80"), r#"read 0/1 = "new"; committed"#);
}

/// Wait-die at the master, and first committer wins. `K` is mastered by n1 (OR) with its slave
/// n0 (VA). `Old`, from n0, begins at 1 ms and commits at once: its prepare holds `K` at n1
/// from ~34.5 ms. `Young`, from n1, begins at 10 ms and commits at 40 ms: at its own master it
/// meets the older transaction's prepared version and dies (`WaitDie`). `Slow`, from n0, began
/// at 0 ms, before `Old`, and commits at 150 ms, after `Old` committed above its snapshot: the
/// slave n0 it is coordinated on holds that newer committed version, so local certification
/// aborts it (`WriteWriteConflict`) at once.
#[test]
fn write_write_conflict_and_wait_die() {
    let mut s = sim("3dc", 2, 2, 2);
    let k = Key::numbered(1, 1);
    assert_replicas(&s, &k, &[1, 0]);
    let seen = Observed::default();
    let slow = Txn::new("Slow").write(&k, "slow").sleep(ms(150));
    spawn_client(&mut s, 0, ms(0), vec![slow], &seen);
    spawn_client(
        &mut s,
        0,
        ms(1),
        vec![Txn::new("Old").write(&k, "old")],
        &seen,
    );
    let young = Txn::new("Young").write(&k, "young").sleep(ms(30));
    spawn_client(&mut s, 1, ms(10), vec![young], &seen);
    finish(
        s,
        250,
        &seen,
        "clocksi_rep_write_write_conflict_and_wait_die",
    );
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

/// Termination after a coordinator crash. `K` is mastered in VA (n0) with its slave in OR (n1).
/// `W`, coordinated by n1, decides to commit at ~67 ms, makes the decision durable, answers its
/// client and sends the commit; n1 crashes at 70 ms, which breaks the connection carrying the
/// commit to n0. n0 keeps the prepared version, and a reader that begins there at 500 ms waits
/// for it. n1 restarts at 1 s, rebuilt from its log with the decision. At the first
/// garbage-collection tick after `participant_timeout` (2 s) n0 asks n1 for the outcome; n1
/// answers from its decision log, n0 commits, acknowledges, and the reader sees the write.
#[test]
fn coordinator_crash_resolved_by_termination() {
    let mut s = sim("3dc", 2, 2, 2);
    let k = Key::numbered(0, 1);
    assert_replicas(&s, &k, &[0, 1]);
    let seen = Observed::default();
    spawn_client(&mut s, 1, ms(0), vec![Txn::new("W").write(&k, "v")], &seen);
    spawn_client(&mut s, 0, ms(500), vec![Txn::new("R").read(&k)], &seen);
    s.run_until(ms(70));
    s.crash(NodeId(1));
    s.run_until(ms(1000));
    s.restart(NodeId(1));
    finish(
        s,
        2200,
        &seen,
        "clocksi_rep_coordinator_crash_resolved_by_termination",
    );
    assert_eq!(seen.of("W"), r#"write 0/1 = "v"; committed"#);
    assert_eq!(seen.of("R"), r#"read 0/1 = "v"; committed"#);
}
