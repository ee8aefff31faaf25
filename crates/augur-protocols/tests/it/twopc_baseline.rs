//! Scenario tests for `2pc-baseline` (SSS §V's baseline), run in the deterministic simulator on
//! the "3dc" latency profile cut to two data centres (VA, OR: about 33.5 ms apart one way) with a
//! ring placement and no replication, as `sss_scenarios.rs` runs SSS's own examples: key
//! `Key::numbered(p, _)` lives on node `p` only.
//!
//! * **A read-only transaction validates, so it can abort**: SSS's Fig. 1 shape (a reader reads
//!   `y`, an update overwrites `y` and commits, the reader commits). Under `2pc-baseline` the
//!   reader aborts with `ValidationFailed`; under `sss` and under the snapshot protocol
//!   `clocksi-rep` the same reader commits. With two keys the reader has read a skewed state
//!   (the old `x`, the new `y`), which the mutant `no-read-only-validation` lets commit.
//! * **The lock timeout turns a lock wait into an abort**: a write waits for the exclusive lock
//!   a remote writer holds across its 2PC round trip; with the default 5 ms timeout it aborts
//!   with `LockTimeout`, with a 100 ms timeout it waits and commits.
//! * **A vote survives a crash**: a participant that voted yes and crashed takes its locks again
//!   from its log, keeps out a writer until the outcome, and applies the commit it learns from
//!   the coordinator's decision log.

use augur_client::{Session, Transport, TxnError};
use augur_contract::{Protocol, ProtocolOptions};
use augur_protocols::clocksi_rep::ClockSiRep;
use augur_protocols::sss::Sss;
use augur_protocols::twopc_baseline::{INFO, TwoPcBaseline};
use augur_runtime::sim::{SimConfig, Simulation};
use augur_types::{Key, LatencyProfile, NodeId, Placement};
use bytes::Bytes;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// What a scripted transaction's client saw.
#[derive(Clone, Debug, Default)]
struct Seen {
    reads: Vec<Option<String>>,
    /// When the client learned the outcome, and the abort reason if it aborted.
    outcome: Option<(Duration, Option<String>)>,
}

impl Seen {
    fn committed(&self) -> bool {
        matches!(self.outcome, Some((_, None)))
    }

    fn abort_reason(&self) -> Option<&str> {
        self.outcome.as_ref().and_then(|(_, r)| r.as_deref())
    }
}

type Log = Arc<Mutex<BTreeMap<&'static str, Seen>>>;

/// A two-node simulation of `P` (VA, OR; one replica per key) with `settings` and `mutant`.
fn sim<P: Protocol>(settings: &[(&str, &str)], mutant: Option<&str>) -> Simulation<P> {
    let profile = LatencyProfile::named("3dc").unwrap().truncated(2).unwrap();
    let placement = Arc::new(Placement::ring(profile, 2, 1).unwrap());
    let options = Arc::new(ProtocolOptions {
        settings: settings
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        mutant: mutant.map(str::to_string),
        ..ProtocolOptions::default()
    });
    Simulation::new(placement, options, SimConfig::new(5))
}

/// A scripted transaction: begun read-only when it writes nothing; `think` after each read.
struct Script {
    name: &'static str,
    home: u32,
    start: Duration,
    reads: Vec<Key>,
    writes: Vec<(Key, &'static str)>,
    think: Duration,
}

impl Script {
    /// A read-only transaction on `home` at `start_ms` reading `reads`, `think_ms` after each.
    fn reader(
        name: &'static str,
        home: u32,
        start_ms: u64,
        reads: Vec<Key>,
        think_ms: u64,
    ) -> Script {
        Script {
            name,
            home,
            start: ms(start_ms),
            reads,
            writes: vec![],
            think: ms(think_ms),
        }
    }

    /// An update on `home` at `start_ms` writing `writes` without reading.
    fn writer(
        name: &'static str,
        home: u32,
        start_ms: u64,
        writes: Vec<(Key, &'static str)>,
    ) -> Script {
        Script {
            name,
            home,
            start: ms(start_ms),
            reads: vec![],
            writes,
            think: ms(0),
        }
    }
}

/// A client on `script.home` that waits until `script.start`, then runs `script` once and logs
/// what it saw, however it ended.
fn client<P: Protocol>(s: &mut Simulation<P>, log: &Log, script: Script) {
    let log = log.clone();
    s.spawn_client(NodeId(script.home), move |t| async move {
        t.sleep(script.start).await;
        let session = Session::new(t);
        let mut seen = Seen::default();
        let result: Result<(), TxnError> = async {
            let read_only = script.writes.is_empty();
            let mut txn = session.begin_named(script.name, read_only).await?;
            for key in &script.reads {
                let value = txn.read(key).await?;
                seen.reads
                    .push(value.map(|v| String::from_utf8_lossy(&v).into_owned()));
                session.transport().sleep(script.think).await;
            }
            for (key, value) in &script.writes {
                txn.write(key.clone(), Some(Bytes::from_static(value.as_bytes())))?;
            }
            txn.commit().await?;
            Ok(())
        }
        .await;
        let reason = match result {
            Ok(()) => None,
            Err(TxnError::Aborted(reason)) => Some(reason.name().to_string()),
            Err(other) => Some(other.to_string()),
        };
        seen.outcome = Some((session.transport().now(), reason));
        log.lock().unwrap().insert(script.name, seen);
    });
}

fn seen(log: &Log, name: &str) -> Seen {
    log.lock()
        .unwrap()
        .get(name)
        .cloned()
        .unwrap_or_else(|| panic!("{name} never ended"))
}

/// On N0 (VA).
fn x() -> Key {
    Key::numbered(0, 1)
}

/// On N1 (OR).
fn y() -> Key {
    Key::numbered(1, 1)
}

/// SSS Fig. 1 under `P`: T1, read-only on N0, reads `reads` at once and thinks 400 ms after
/// each; T2, an update on N1, writes x (on N0) and y (on N1) at 100 ms, after T1's first read.
fn reader_and_writer<P: Protocol>(reads: Vec<Key>, mutant: Option<&str>) -> (Seen, Seen) {
    let mut s = sim::<P>(&[], mutant);
    let log = Log::default();
    client(&mut s, &log, Script::reader("T1", 0, 0, reads, 400));
    let t2 = Script::writer("T2", 1, 100, vec![(x(), "x1"), (y(), "y1")]);
    client(&mut s, &log, t2);
    s.run_until(ms(5000));
    (seen(&log, "T1"), seen(&log, "T2"))
}

#[test]
fn a_read_only_transaction_overtaken_by_a_writer_aborts_where_sss_commits_it() {
    let (t1, t2) = reader_and_writer::<TwoPcBaseline>(vec![y()], None);
    assert_eq!(t1.reads, vec![None]);
    assert!(t2.committed(), "{t2:?}");
    assert_eq!(t1.abort_reason(), Some("validation_failed"), "{t1:?}");

    // SSS (Fig. 1): the reader commits, and the writer's reply waits for it.
    let (t1, t2) = reader_and_writer::<Sss>(vec![y()], None);
    assert_eq!(t1.reads, vec![None]);
    assert!(t1.committed() && t2.committed(), "{t1:?} {t2:?}");
    assert!(t2.outcome.unwrap().0 > t1.outcome.unwrap().0);

    // A snapshot protocol: the reader commits on its snapshot.
    let (t1, t2) = reader_and_writer::<ClockSiRep>(vec![y()], None);
    assert_eq!(t1.reads, vec![None]);
    assert!(t1.committed() && t2.committed(), "{t1:?} {t2:?}");
}

#[test]
fn a_read_only_transaction_that_read_a_skewed_state_aborts_and_only_the_mutant_commits_it() {
    // T1 reads x before T2 and y after it: the old x, the new y.
    let (t1, t2) = reader_and_writer::<TwoPcBaseline>(vec![x(), y()], None);
    assert!(t2.committed(), "{t2:?}");
    assert_eq!(t1.reads, vec![None, Some("y1".to_string())]);
    assert_eq!(t1.abort_reason(), Some("validation_failed"), "{t1:?}");

    let (t1, t2) =
        reader_and_writer::<TwoPcBaseline>(vec![x(), y()], Some("no-read-only-validation"));
    assert!(t2.committed(), "{t2:?}");
    assert_eq!(t1.reads, vec![None, Some("y1".to_string())]);
    assert!(t1.committed(), "the mutant commits the read skew: {t1:?}");
}

/// T1 on N0 writes y (on N1) at 0 ms: its exclusive lock on y is held at N1 from its prepare
/// (~33.5 ms) until its decision arrives (~100 ms). T2 on N1 writes y at 50 ms and waits for
/// that lock. T3 reads y at 1 s.
fn lock_wait(lock_timeout: Option<&str>) -> (Seen, Seen, Seen) {
    let settings: Vec<(&str, &str)> = lock_timeout
        .map(|t| ("lock_timeout", t))
        .into_iter()
        .collect();
    let mut s = sim::<TwoPcBaseline>(&settings, None);
    let log = Log::default();
    for (name, home, start, value) in [("T1", 0, 0, "y1"), ("T2", 1, 50, "y2")] {
        client(
            &mut s,
            &log,
            Script::writer(name, home, start, vec![(y(), value)]),
        );
    }
    client(&mut s, &log, Script::reader("T3", 0, 1000, vec![y()], 0));
    s.run_until(ms(5000));
    (seen(&log, "T1"), seen(&log, "T2"), seen(&log, "T3"))
}

#[test]
fn the_lock_timeout_turns_a_lock_wait_into_an_abort() {
    assert_eq!(INFO.settings[0].name, "lock_timeout");
    assert_eq!(INFO.settings[0].default, "5ms");
    // Default: T2 gives up after 5 ms, long before T1's decision frees x.
    let (t1, t2, t3) = lock_wait(None);
    assert!(t1.committed(), "{t1:?}");
    assert_eq!(t2.abort_reason(), Some("lock_timeout"), "{t2:?}");
    let (at, _) = t2.outcome.unwrap();
    assert!(at < ms(60), "T2 gave up at {at:?}, within its lock timeout");
    assert_eq!(t3.reads, vec![Some("y1".to_string())]);
    assert!(t3.committed());

    // With a 100 ms timeout T2 waits for T1's decision, then commits over it.
    let (t1, t2, t3) = lock_wait(Some("100ms"));
    assert!(t1.committed() && t2.committed(), "{t1:?} {t2:?}");
    let (t1_at, t2_at) = (t1.outcome.unwrap().0, t2.outcome.unwrap().0);
    assert!(
        t2_at >= t1_at,
        "T2 committed at {t2_at:?}, before T1 at {t1_at:?}"
    );
    assert_eq!(t3.reads, vec![Some("y2".to_string())]);
}

#[test]
fn a_yes_vote_survives_a_crash_with_its_locks() {
    let mut s = sim::<TwoPcBaseline>(&[], None);
    let log = Log::default();
    // T1 on N0 writes y (on N1). N1 votes yes at ~33.5 ms, N0 decides when the vote arrives
    // (~67 ms), and N1 crashes at 80 ms, before the decision reaches it (~101 ms; lost with
    // the crash); it restarts at 200 ms.
    let t1 = Script::writer("T1", 0, 0, vec![(y(), "y1")]);
    // T2 on N0 writes y at 205 ms: its prepare meets the lock N1 took again from its log, held
    // until N1 learns T1's outcome from N0 (after its first tick).
    let t2 = Script::writer("T2", 0, 205, vec![(y(), "y2")]);
    let t3 = Script::reader("T3", 0, 1000, vec![y()], 0);
    for script in [t1, t2, t3] {
        client(&mut s, &log, script);
    }
    s.run_until(ms(80));
    s.crash(NodeId(1));
    s.run_until(ms(200));
    s.restart(NodeId(1));
    s.run_until(ms(5000));
    let (t1, t2, t3) = (seen(&log, "T1"), seen(&log, "T2"), seen(&log, "T3"));
    assert!(
        t1.committed(),
        "N1's vote was durable before it left: {t1:?}"
    );
    assert_eq!(t2.abort_reason(), Some("lock_timeout"), "{t2:?}");
    assert_eq!(t3.reads, vec![Some("y1".to_string())]);
    assert!(t3.committed(), "{t3:?}");
}
