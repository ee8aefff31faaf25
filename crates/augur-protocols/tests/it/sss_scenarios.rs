//! Scenario tests for `sss` (SSS §III-D), run in the deterministic simulator on the "3dc"
//! latency profile (VA, OR, IE) with a ring placement and no replication, as the paper's
//! examples have it: key `Key::numbered(p, _)` lives on node `p` only.
//!
//! * Fig. 1: a read-only transaction that read `y` before an update overwrote it holds the
//!   update's reply (the update commits internally, is pre-committed in `y`'s snapshot-queue,
//!   and answers its client only after the reader's `Remove`).
//! * Fig. 2: two read-only transactions on different nodes, each reading a key that a
//!   different update overwrites while they run, both read the old versions, and both updates
//!   answer only after both readers (no long fork).
//! * Two found by measurement or the checker: a late read (a reader sees an update wherever it
//!   sees its successor), and a reader inherited at its own coordinator's node that must
//!   release the writer it holds there when it ends.

use augur_client::{Session, Transport};
use augur_contract::ProtocolOptions;
use augur_protocols::sss::Sss;
use augur_runtime::sim::{SimConfig, Simulation};
use augur_types::{Key, LatencyProfile, NodeId, Placement};
use bytes::Bytes;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// What a scripted transaction's client saw: the values read and when it learned its outcome.
#[derive(Clone, Debug, Default)]
struct Seen {
    reads: Vec<Option<String>>,
    committed_at: Option<Duration>,
}

type Log = Arc<Mutex<BTreeMap<&'static str, Seen>>>;

fn sim(nodes: usize, mutant: Option<&str>) -> Simulation<Sss> {
    let profile = LatencyProfile::named("3dc")
        .unwrap()
        .truncated(nodes.min(3))
        .unwrap();
    let placement = Arc::new(Placement::ring(profile, nodes, 1).unwrap());
    let options = Arc::new(ProtocolOptions {
        mutant: mutant.map(str::to_string),
        ..ProtocolOptions::default()
    });
    Simulation::new(placement, options, SimConfig::new(5))
}

/// A client on `home` that waits `start`, then runs one transaction: it reads `reads` (with
/// `think` between the reads and before committing), writes `writes`, and commits.
#[allow(clippy::too_many_arguments)]
fn client(
    s: &mut Simulation<Sss>,
    log: &Log,
    name: &'static str,
    home: u32,
    start: Duration,
    reads: Vec<Key>,
    writes: Vec<(Key, &'static str)>,
    think: Duration,
) {
    let log = log.clone();
    s.spawn_client(NodeId(home), move |t| async move {
        t.sleep(start).await;
        let session = Session::new(t);
        let mut txn = session
            .begin_named(name, writes.is_empty())
            .await
            .expect("begin");
        let mut seen = Seen::default();
        for key in &reads {
            let value = txn.read(key).await.expect("read");
            seen.reads
                .push(value.map(|v| String::from_utf8_lossy(&v).into_owned()));
            session.transport().sleep(think).await;
        }
        for (key, value) in writes {
            txn.write(key, Some(Bytes::from_static(value.as_bytes())))
                .unwrap();
        }
        txn.commit().await.expect("commit");
        seen.committed_at = Some(session.transport().now());
        log.lock().unwrap().insert(name, seen);
    });
}

fn seen(log: &Log, name: &str) -> Seen {
    log.lock()
        .unwrap()
        .get(name)
        .cloned()
        .unwrap_or_else(|| panic!("{name} did not commit"))
}

/// Fig. 1 under `mutant`: what T1 read, and when T1 and T2 were answered.
fn fig1(mutant: Option<&str>) -> (Seen, Seen) {
    let mut s = sim(2, mutant);
    let log = Log::default();
    let y = Key::numbered(1, 1);
    // T1, read-only on N0, reads y (on N1) at once and then thinks for 400 ms.
    client(
        &mut s,
        &log,
        "T1",
        0,
        ms(0),
        vec![y.clone()],
        vec![],
        ms(400),
    );
    // T2, an update on N1, overwrites y after T1's read reached N1 (~33 ms).
    client(
        &mut s,
        &log,
        "T2",
        1,
        ms(100),
        vec![],
        vec![(y, "y1")],
        ms(0),
    );
    s.run_until(ms(2000));
    (seen(&log, "T1"), seen(&log, "T2"))
}

#[test]
fn fig1_a_reader_holds_the_reply_of_the_update_that_overwrote_what_it_read() {
    let (t1, t2) = fig1(None);
    assert_eq!(t1.reads, vec![None], "T1 read y before T2 wrote it");
    let (c1, c2) = (t1.committed_at.unwrap(), t2.committed_at.unwrap());
    // T2 alone would commit at once on N1 (~100 ms); it is held in y's snapshot-queue until
    // T1's Remove reaches N1.
    assert!(
        c2 > c1,
        "T2 answered at {c2:?}, before the reader it must follow ({c1:?})"
    );
}

#[test]
fn fig1_without_reader_entries_the_update_answers_first() {
    let (t1, t2) = fig1(Some("no-reader-entries"));
    assert_eq!(t1.reads, vec![None]);
    assert!(t2.committed_at.unwrap() < t1.committed_at.unwrap());
}

/// Fig. 2 under `mutant`: what T1 and T4 read, and when each of the four was answered.
fn fig2(mutant: Option<&str>) -> BTreeMap<&'static str, Seen> {
    let mut s = sim(4, mutant);
    let log = Log::default();
    let (x, y) = (Key::numbered(2, 1), Key::numbered(3, 1));
    // T1 on N1 reads x (on N2), then y (on N3); T4 on N0 reads y, then x.
    client(
        &mut s,
        &log,
        "T1",
        1,
        ms(0),
        vec![x.clone(), y.clone()],
        vec![],
        ms(300),
    );
    client(
        &mut s,
        &log,
        "T4",
        0,
        ms(0),
        vec![y.clone(), x.clone()],
        vec![],
        ms(300),
    );
    // T2 on N2 writes x, T3 on N3 writes y, after the first reads arrived.
    client(
        &mut s,
        &log,
        "T2",
        2,
        ms(150),
        vec![],
        vec![(x, "x1")],
        ms(0),
    );
    client(
        &mut s,
        &log,
        "T3",
        3,
        ms(150),
        vec![],
        vec![(y, "y1")],
        ms(0),
    );
    s.run_until(ms(5000));
    let seen = log.lock().unwrap().clone();
    assert_eq!(seen.len(), 4, "every transaction committed: {seen:?}");
    seen
}

#[test]
fn fig2_two_readers_order_two_non_conflicting_updates_the_same_way() {
    let seen = fig2(None);
    // Neither reader sees either update: both are serialized before both (no long fork).
    assert_eq!(seen["T1"].reads, vec![None, None]);
    assert_eq!(seen["T4"].reads, vec![None, None]);
    let readers_done = seen["T1"].committed_at.max(seen["T4"].committed_at);
    for writer in ["T2", "T3"] {
        let at = seen[writer].committed_at;
        assert!(
            at > readers_done,
            "{writer} answered at {at:?}, before both readers"
        );
    }
}

#[test]
fn fig2_without_exclusion_the_readers_see_a_long_fork() {
    let seen = fig2(Some("no-exclusion"));
    // Each reader sees the update the other one holds: T1 x0 then y1, T4 y0 then x1.
    assert_eq!(seen["T1"].reads, vec![None, Some("y1".to_string())]);
    assert_eq!(seen["T4"].reads, vec![None, Some("x1".to_string())]);
}

/// A reader that read at a node before an update was applied there, and reads the update's key
/// there only later: R reads `a` on N1, W (on N1) writes `b` on N1, W's client then has a
/// client on N2 write `c` (X), and R reads `c`, then `b`. If R saw X but not W, the history
/// would have the cycle `R -rw-> W -rt-> X -wr-> R`. (Under vector-clock bounds this needed a
/// reader to hold every writer of the node it read at; reading by finality it does not.)
fn late_read(mutant: Option<&str>) -> BTreeMap<&'static str, Seen> {
    let mut s = sim(3, mutant);
    let log = Log::default();
    let (a, b, c) = (
        Key::numbered(1, 1),
        Key::numbered(1, 2),
        Key::numbered(2, 1),
    );
    client(
        &mut s,
        &log,
        "R",
        0,
        ms(0),
        vec![a, c.clone(), b.clone()],
        vec![],
        ms(300),
    );
    client(
        &mut s,
        &log,
        "W",
        1,
        ms(100),
        vec![],
        vec![(b, "b1")],
        ms(0),
    );
    // X starts once W's client was answered (told out of band).
    let (told, x_log) = (log.clone(), log.clone());
    s.spawn_client(NodeId(2), move |t| async move {
        while !told.lock().unwrap().contains_key("W") {
            t.sleep(ms(1)).await;
        }
        let session = Session::new(t);
        let mut txn = session.begin_named("X", false).await.expect("begin");
        txn.write(c, Some(Bytes::from_static(b"c1"))).unwrap();
        txn.commit().await.expect("commit");
        let committed_at = Some(session.transport().now());
        let seen = Seen {
            reads: Vec::new(),
            committed_at,
        };
        x_log.lock().unwrap().insert("X", seen);
    });
    s.run_until(ms(5000));
    let seen = log.lock().unwrap().clone();
    assert_eq!(seen.len(), 3, "every transaction committed: {seen:?}");
    seen
}

#[test]
fn a_late_read_that_sees_the_successor_also_sees_the_update() {
    let seen = late_read(None);
    // R holds only the writers of the keys it read, so W (which wrote `b`, not `a`) may
    // become final, and X after it; then R must see W wherever it sees X: a reader reads the
    // newest final versions, and X is final only after W was.
    let r = &seen["R"].reads;
    let saw_x = r[1].as_deref() == Some("c1");
    let saw_w = r[2].as_deref() == Some("b1");
    assert!(!saw_x || saw_w, "R saw X but not W: {seen:?}");
    assert_eq!(r[0], None);
}

/// A reader inherited at its own coordinator's node, where it never read: R (on N0) reads `x`
/// (on N1) and thinks; U (on N2) reads `x`, inheriting R through its `PropagatedSet`, and
/// writes `z` on N0, where R's inherited entry holds it. R's end must reach N0's entry at
/// once: before the fix N0 did not subscribe to a reader it coordinates, so U stayed held
/// until N0 asked again, `participant_timeout` (2 s) later.
#[test]
fn a_reader_inherited_at_its_own_node_releases_the_writer_when_it_ends() {
    let mut s = sim(3, None);
    let log = Log::default();
    let (x, z) = (Key::numbered(1, 1), Key::numbered(0, 1));
    client(
        &mut s,
        &log,
        "R",
        0,
        ms(0),
        vec![x.clone()],
        vec![],
        ms(600),
    );
    client(
        &mut s,
        &log,
        "U",
        2,
        ms(100),
        vec![x],
        vec![(z, "z1")],
        ms(0),
    );
    s.run_until(ms(5000));
    let (r, u) = (seen(&log, "R"), seen(&log, "U"));
    let (r_at, u_at) = (r.committed_at.unwrap(), u.committed_at.unwrap());
    assert!(u_at > r_at, "U answered at {u_at:?}, before R ({r_at:?})");
    assert!(
        u_at < r_at + ms(500),
        "U answered at {u_at:?}, long after R ended at {r_at:?}: R's entry at N0 outlived it"
    );
}
