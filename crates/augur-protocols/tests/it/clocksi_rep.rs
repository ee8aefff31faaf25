//! Scenario tests for `clocksi-rep` (STR §6.1) in the deterministic simulator, where message
//! timing follows the latency matrix exactly.

use augur_client::{Session, Transport, TxnError};
use augur_protocols::clocksi_rep::ClockSiRep;
use augur_protocols::registry::{self, SettingError};
use augur_runtime::sim::{SimConfig, Simulation};
use augur_types::{AbortReason, Key, LatencyProfile, NodeId, Placement, Timestamp};
use bytes::Bytes;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

fn sim(profile: &str, dcs: usize, nodes: usize, rf: usize) -> Simulation<ClockSiRep> {
    sim_with(profile, dcs, nodes, rf, &[])
}

/// A simulation whose nodes get the protocol settings `settings`, and keep the placement's
/// masters ([`crate::common::static_masters`]).
fn sim_with(
    profile: &str,
    dcs: usize,
    nodes: usize,
    rf: usize,
    settings: &[(&str, &str)],
) -> Simulation<ClockSiRep> {
    let profile = LatencyProfile::named(profile)
        .unwrap()
        .truncated(dcs)
        .unwrap();
    let placement = Arc::new(Placement::ring(profile, nodes, rf).unwrap());
    let mut options = crate::common::static_masters();
    options.settings.extend(settings_map(settings));
    Simulation::new(placement, Arc::new(options), SimConfig::new(7))
}

fn settings_map(settings: &[(&str, &str)]) -> BTreeMap<String, String> {
    settings
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

type Log = Arc<Mutex<Vec<(String, Duration, Option<Bytes>)>>>;

/// Write `value` to `key` in one transaction from `home`, starting at `at`.
fn spawn_writer(
    s: &mut Simulation<ClockSiRep>,
    home: u32,
    at: Duration,
    key: Key,
    value: &'static str,
) {
    s.spawn_client(NodeId(home), move |t| async move {
        t.sleep(at).await;
        let session = Session::new(t);
        let mut txn = session.begin(false).await.unwrap();
        txn.write(key, Some(Bytes::from_static(value.as_bytes())))
            .unwrap();
        txn.commit().await.unwrap();
    });
}

/// Read `key` in a transaction from `home` that begins at `at`; log when the read returned.
fn spawn_reader(
    s: &mut Simulation<ClockSiRep>,
    home: u32,
    at: Duration,
    key: Key,
    name: &str,
    log: &Log,
) {
    let log = log.clone();
    let name = name.to_string();
    s.spawn_client(NodeId(home), move |t| async move {
        t.sleep(at).await;
        let session = Session::new(t);
        let mut txn = session.begin(true).await.unwrap();
        let value = txn.read(&key).await.unwrap();
        let when = session.transport().now();
        txn.commit().await.unwrap();
        log.lock().unwrap().push((name, when, value));
    });
}

/// Two data centres 67 ms apart (VA, OR). Partition 0 is mastered in VA (node 0) with a slave in
/// OR (node 1). A writer coordinated in OR prepares at the master at ~33 ms, at its own slave at
/// ~67 ms, so its commit timestamp is ~67 ms and the commit reaches VA at ~100 ms. A reader in VA
/// whose snapshot is 50 ms finds the prepared version (proposed at ~33 ms ≤ 50 ms), waits, and
/// then must not see it (67 > 50); a reader with snapshot 80 ms waits and must see it.
#[test]
fn a_read_blocked_by_a_prepared_version_sees_it_only_if_it_commits_inside_the_snapshot() {
    let mut s = sim("3dc", 2, 2, 2);
    let key = Key::numbered(0, 1);
    let log: Log = Arc::default();
    spawn_writer(&mut s, 1, ms(0), key.clone(), "new");
    spawn_reader(&mut s, 0, ms(50), key.clone(), "early", &log);
    spawn_reader(&mut s, 0, ms(80), key.clone(), "late", &log);
    spawn_reader(&mut s, 0, ms(20), key.clone(), "before-prepare", &log);
    s.run_until(Duration::from_secs(2));
    assert!(s.clients_done());
    let log = log.lock().unwrap();
    let find = |n: &str| log.iter().find(|(name, ..)| name == n).cloned().unwrap();
    let (_, when, value) = find("before-prepare");
    assert_eq!(value, None, "no prepared version yet: the old state");
    assert!(
        when < ms(25),
        "nothing to wait for: served at once ({when:?})"
    );
    let (_, when, value) = find("early");
    assert_eq!(
        value, None,
        "commit timestamp above the snapshot: invisible"
    );
    assert!(when >= ms(100), "the read waited for the commit ({when:?})");
    let (_, when, value) = find("late");
    assert_eq!(
        value,
        Some(Bytes::from_static(b"new")),
        "commit inside the snapshot: visible"
    );
    assert!(when >= ms(100), "the read waited for the commit ({when:?})");
}

/// Two transactions from different data centres read and update the same key concurrently:
/// exactly one commits, the other aborts with a write-write reason.
#[test]
fn of_two_conflicting_writers_one_aborts() {
    let mut s = sim("3dc", 3, 3, 3);
    let key = Key::numbered(0, 9);
    let outcomes: Arc<Mutex<Vec<Result<(), TxnError>>>> = Arc::default();
    for home in [1, 2] {
        let (key, outcomes) = (key.clone(), outcomes.clone());
        s.spawn_client(NodeId(home), move |t| async move {
            let session = Session::new(t);
            let mut txn = session.begin(false).await.unwrap();
            let _ = txn.read(&key).await.unwrap();
            txn.write(key, Some(Bytes::from(format!("from {home}"))))
                .unwrap();
            let r = txn.commit().await.map(|_| ());
            outcomes.lock().unwrap().push(r);
        });
    }
    s.run_until(Duration::from_secs(3));
    let outcomes = outcomes.lock().unwrap();
    assert_eq!(outcomes.len(), 2);
    assert_eq!(
        outcomes.iter().filter(|r| r.is_ok()).count(),
        1,
        "{outcomes:?}"
    );
    let err = outcomes.iter().find_map(|r| r.clone().err()).unwrap();
    assert!(
        matches!(
            err,
            TxnError::Aborted(AbortReason::WriteWriteConflict | AbortReason::WaitDie)
        ),
        "{err:?}"
    );
}

/// Node 1's clock runs 50 ms behind. A transaction coordinated on node 0 reads a key only node 1
/// holds: node 1 must hold the read until its clock reaches the snapshot.
#[test]
fn a_read_waits_for_the_serving_clock_to_reach_the_snapshot() {
    let mut s = sim("lan", 1, 2, 1);
    s.set_clock_offset(NodeId(1), -50_000);
    let log: Log = Arc::default();
    spawn_reader(&mut s, 0, ms(0), Key::numbered(1, 5), "remote", &log);
    spawn_reader(&mut s, 1, ms(0), Key::numbered(1, 5), "local", &log);
    s.run_until(Duration::from_secs(1));
    let log = log.lock().unwrap();
    let remote = log.iter().find(|(n, ..)| n == "remote").unwrap().1;
    let local = log.iter().find(|(n, ..)| n == "local").unwrap().1;
    assert!(
        remote >= ms(50),
        "served only once node 1's clock caught up ({remote:?})"
    );
    assert!(
        local < ms(1),
        "a snapshot from node 1's own clock needs no wait ({local:?})"
    );
}

/// A lost update is impossible: concurrent increments of one counter from every node, each
/// retried until it commits, add up exactly.
#[test]
fn concurrent_increments_are_never_lost() {
    let mut s = sim("3dc", 3, 3, 3);
    let key = Key::numbered(2, 0);
    let per_client = 5;
    for home in 0..3u32 {
        for _ in 0..2 {
            let key = key.clone();
            s.spawn_client(NodeId(home), move |t| async move {
                let session = Session::new(t);
                let mut done = 0;
                while done < per_client {
                    let mut txn = session.begin(false).await.unwrap();
                    let Ok(v) = txn.read(&key).await else {
                        continue;
                    };
                    let n: u64 = v
                        .map(|b| String::from_utf8_lossy(&b).parse().unwrap())
                        .unwrap_or(0);
                    txn.write(key.clone(), Some(Bytes::from((n + 1).to_string())))
                        .unwrap();
                    if txn.commit().await.is_ok() {
                        done += 1;
                    }
                }
            });
        }
    }
    s.run_until(Duration::from_secs(120));
    assert!(s.clients_done(), "every client finished its increments");
    let log: Log = Arc::default();
    spawn_reader(&mut s, 0, ms(0), key, "final", &log);
    s.run_for(Duration::from_secs(2));
    let value = log.lock().unwrap()[0].2.clone().unwrap();
    assert_eq!(
        String::from_utf8_lossy(&value),
        (3 * 2 * per_client).to_string()
    );
}

/// Termination after a coordinator crash, commit side. Two DCs 67 ms apart; partition 0 is
/// mastered in VA (node 0) with its slave in OR (node 1). A writer coordinated in OR decides to
/// commit at ~67 ms and answers its client; its coordinator crashes at 70 ms, losing the commit
/// message still on its way to VA. The master in VA keeps the prepared version, asks the
/// coordinator after `participant_timeout` (2 s), keeps asking while it is down, and learns the
/// commit from its decision log once it is back. A reader in VA that began at 500 ms waits for the
/// outcome and then sees the write.
#[test]
fn a_commit_decided_before_the_coordinator_crashed_reaches_every_replica() {
    let mut s = sim("3dc", 2, 2, 2);
    let key = Key::numbered(0, 1);
    spawn_writer(&mut s, 1, ms(0), key.clone(), "v");
    let log = Log::default();
    spawn_reader(&mut s, 0, ms(500), key.clone(), "reader", &log);
    s.run_until(ms(70));
    s.crash(NodeId(1));
    s.run_until(ms(1000));
    assert!(
        log.lock().unwrap().is_empty(),
        "the read waits for the outcome"
    );
    s.restart(NodeId(1));
    s.run_until(ms(6000));
    let log = log.lock().unwrap();
    assert_eq!(log.len(), 1, "the read finished");
    let (_, when, value) = &log[0];
    assert_eq!(value.as_deref(), Some(&b"v"[..]));
    assert!(
        *when >= ms(2000),
        "resolved by asking the coordinator, at {when:?}"
    );
    assert!(s.clients_done());
}

/// Termination after a coordinator crash, abort side: the coordinator crashes at 40 ms, after the
/// master prepared (~33 ms) but before any decision. Once restarted it has no record of the
/// transaction, so it answers the master's question with an abort (presumed abort): the prepared
/// version goes, a reader sees nothing, and a later writer of the key commits.
#[test]
fn a_transaction_whose_coordinator_crashed_before_deciding_is_presumed_aborted() {
    let mut s = sim("3dc", 2, 2, 2);
    let key = Key::numbered(0, 1);
    let writer_failed = Arc::new(Mutex::new(None));
    let failed = writer_failed.clone();
    let k = key.clone();
    s.spawn_client(NodeId(1), move |t| async move {
        let session = Session::new(t);
        let mut txn = session.begin(false).await.unwrap();
        txn.write(k, Some(Bytes::from_static(b"lost"))).unwrap();
        *failed.lock().unwrap() = Some(txn.commit().await);
    });
    s.run_until(ms(40));
    s.crash(NodeId(1));
    s.run_until(ms(500));
    s.restart(NodeId(1));
    let log = Log::default();
    spawn_reader(&mut s, 0, ms(600), key.clone(), "reader", &log);
    spawn_writer(&mut s, 0, ms(3000), key.clone(), "next");
    spawn_reader(&mut s, 0, ms(3500), key.clone(), "after", &log);
    s.run_until(ms(10_000));
    assert!(
        matches!(
            *writer_failed.lock().unwrap(),
            Some(Err(TxnError::Unavailable(_)))
        ),
        "the crashed coordinator never answered: outcome unknown to the client"
    );
    let log = log.lock().unwrap();
    let seen: Vec<_> = log
        .iter()
        .map(|(n, _, v)| (n.as_str(), v.as_deref()))
        .collect();
    assert_eq!(
        seen,
        vec![("reader", None), ("after", Some(&b"next"[..]))],
        "the crashed transaction's write never becomes visible"
    );
    assert!(s.clients_done());
}

/// What [`precise_clock_scenario`] observed.
#[derive(Debug, Default)]
struct Observed {
    /// The writer's snapshot and commit timestamp.
    writer_snapshot: Timestamp,
    commit_ts: Timestamp,
    /// Snapshots of the readers that read the key before the writer prepared, at the master
    /// (node 0) and at the slave (node 1).
    master_reader: Timestamp,
    slave_reader: Timestamp,
    /// What a reader whose snapshot (310 ms) lies between the master's prepare (~300 ms) and the
    /// commit (~367 ms) read.
    late_reader: Option<Option<Bytes>>,
    late_snapshot: Timestamp,
    /// Each replica's `LastReader` of the key once everything finished.
    last_readers: Vec<Timestamp>,
}

/// Two data centres 33 ms apart one way (VA, OR); the key's partition is mastered in VA (node 0)
/// with its slave in OR (node 1). A writer coordinated in VA begins at 0 ms, writes the key and
/// commits at 300 ms: the master prepares at once, the slave at ~333 ms. Before that, the key is
/// read by a snapshot of ~40 ms at the master and one of ~60 ms at the slave; with `crash_slave`
/// the slave crashes at 100 ms and is back at 150 ms. Another reader at the master begins at
/// 310 ms, after the master's prepare.
fn precise_clock_scenario(setting: &str, crash_slave: bool) -> Observed {
    let mut s = sim_with("3dc", 2, 2, 2, &[("precise_clock", setting)]);
    let key = Key::numbered(0, 1);
    let seen = Arc::new(Mutex::new(Observed::default()));
    {
        let (key, seen) = (key.clone(), seen.clone());
        s.spawn_client(NodeId(0), move |t| async move {
            let session = Session::new(t);
            let mut txn = session.begin(false).await.unwrap();
            let snapshot = txn.snapshot();
            txn.write(key, Some(Bytes::from_static(b"new"))).unwrap();
            session.transport().sleep(ms(300)).await;
            let commit_ts = txn.commit().await.unwrap();
            let mut seen = seen.lock().unwrap();
            seen.writer_snapshot = snapshot;
            seen.commit_ts = commit_ts;
        });
    }
    for (home, at) in [(0u32, 40), (1, 60), (0, 310)] {
        let (key, seen) = (key.clone(), seen.clone());
        s.spawn_client(NodeId(home), move |t| async move {
            t.sleep(ms(at)).await;
            let session = Session::new(t);
            let mut txn = session.begin(true).await.unwrap();
            let snapshot = txn.snapshot();
            let value = txn.read(&key).await.unwrap();
            txn.commit().await.unwrap();
            let mut seen = seen.lock().unwrap();
            match at {
                40 => seen.master_reader = snapshot,
                60 => seen.slave_reader = snapshot,
                _ => {
                    seen.late_snapshot = snapshot;
                    seen.late_reader = Some(value);
                }
            }
        });
    }
    if crash_slave {
        s.run_until(ms(100));
        s.crash(NodeId(1));
        s.run_until(ms(150));
        s.restart(NodeId(1));
    }
    s.run_until(Duration::from_secs(2));
    assert!(s.clients_done());
    let mut seen = Arc::try_unwrap(seen).unwrap().into_inner().unwrap();
    seen.last_readers = (0..2)
        .map(|n| {
            let entry = s.node(NodeId(n)).store().get(&key).unwrap();
            entry.meta.last_reader()
        })
        .collect();
    seen
}

/// PreciseClock (STR §6.3): the commit timestamp is `max(LastReader + 1, RS + 1)` over every
/// replica of the written key — here the slave's reader decides it — instead of the clocks'
/// ~333 ms, and still above every snapshot that read the key. With the smaller timestamp, a
/// snapshot taken before the commit finished (310 ms) includes the write instead of missing it.
#[test]
fn precise_clock_proposes_just_above_the_last_reader_instead_of_the_clock() {
    let off = precise_clock_scenario("off", false);
    let on = precise_clock_scenario("on", false);
    for o in [&off, &on] {
        // The simulated clocks start at an arbitrary epoch; the writer began at ~0 ms.
        let since_start = |ts: Timestamp| ts.since(o.writer_snapshot);
        assert_eq!(since_start(o.master_reader).as_millis(), 40, "{o:?}");
        assert_eq!(since_start(o.slave_reader).as_millis(), 60, "{o:?}");
        assert_eq!(since_start(o.late_snapshot).as_millis(), 310, "{o:?}");
    }

    // Off: the clock rule, above the slave's clock when the prepare reached it (~333 ms).
    assert!(
        off.commit_ts.since(off.writer_snapshot) > ms(333),
        "{off:?}"
    );
    assert_eq!(off.last_readers, [Timestamp::ZERO; 2], "no LastReader kept");
    assert_eq!(
        off.late_reader,
        Some(None),
        "committed above 310 ms: invisible"
    );

    // On: each replica proposes max(LastReader + 1, RS + 1); the commit takes the largest.
    assert_eq!(
        on.last_readers[0], on.late_snapshot,
        "the master's latest reader"
    );
    assert_eq!(
        on.last_readers[1], on.slave_reader,
        "the slave's only reader"
    );
    let expected = on
        .master_reader
        .next()
        .max(on.slave_reader.next())
        .max(on.writer_snapshot.next());
    assert_eq!(on.commit_ts, expected, "{on:?}");
    assert_eq!(on.commit_ts, on.slave_reader.next());
    assert!(on.commit_ts < off.commit_ts, "{on:?} vs {off:?}");
    assert!(
        on.commit_ts > on.master_reader && on.commit_ts > on.slave_reader,
        "above every snapshot that read the key before the write: {on:?}"
    );
    assert_eq!(
        on.late_reader,
        Some(Some(Bytes::from_static(b"new"))),
        "committed at ~60 ms, inside the 310 ms snapshot that waited for the outcome"
    );
}

/// What `LastReader` guards survives a crash: the slave that served the 60 ms snapshot crashes
/// and restarts before the prepare reaches it. Its per-key `LastReader` is gone with its memory,
/// but it recovers its durable serving lease (a bound on every snapshot it served, raised
/// `SERVE_LEASE` at a time), and its proposal still lands above the snapshot it served.
#[test]
fn precise_clock_last_reader_survives_a_crash() {
    let on = precise_clock_scenario("on", true);
    assert_eq!(on.last_readers[1], Timestamp::ZERO, "volatile per key");
    assert!(on.commit_ts > on.slave_reader, "{on:?}");
    assert!(
        on.commit_ts.since(on.slave_reader) <= ms(101),
        "no further above it than the lease: {on:?}"
    );
}

/// The registry checks protocol settings: clocksi-rep takes `precise_clock` with an on/off
/// value; anything else is refused with the valid settings or values named.
#[test]
fn protocol_settings_are_validated_by_the_registry() {
    for good in ["on", "off", "true", "false", "ON", "False"] {
        registry::validate_settings("clocksi-rep", &settings_map(&[("precise_clock", good)]))
            .unwrap_or_else(|e| panic!("{good}: {e}"));
    }
    registry::validate_settings("clocksi-rep", &BTreeMap::new()).unwrap();
    registry::validate_settings("nocc", &BTreeMap::new()).unwrap();

    let err = registry::validate_settings("clocksi-rep", &settings_map(&[("precise", "on")]))
        .unwrap_err();
    assert!(matches!(err, SettingError::Unknown { .. }), "{err:?}");
    assert_eq!(
        err.to_string(),
        "unknown setting 'precise' for protocol clocksi-rep; valid settings: \
         precise_clock=on|off|true|false (default off): PreciseClock (STR §6.3): \
         propose max(LastReader+1, RS+1) instead of the clock; \
         failover=on|off|true|false (default on): on: masters fail over to an in-sync replica, \
         under leases agreed through Raft (docs/architecture/availability.md); off keeps the \
         placement's masters for good; lease_ms=300|500|1000|2000|5000 (default 1000): \
         milliseconds a node's lease lasts from its ask; a dead master is replaced this long \
         (plus the skew bound) after its last renewal; max_clock_skew_ms=10|50|100|200|500 \
         (default 100): bound, in milliseconds, on the difference between two nodes' clocks, \
         which leases assume; log=always|batch|batch:MS|off (default always (off in augur bench)): when the \
         write-ahead log is synced: after every write, at most every MS milliseconds \
         (batch: 2), or never; worker_threads=<count> (default one per core): how many threads \
         a node's worker pool has, where protocols that hand work off (`calvin`, `sparkle`) run \
         it, in process and over TCP (the simulator models cores instead: `sim.cores`)"
    );

    let err =
        registry::validate_settings("clocksi-rep", &settings_map(&[("precise_clock", "yes")]))
            .unwrap_err();
    assert!(matches!(err, SettingError::BadValue { .. }), "{err:?}");
    assert_eq!(
        err.to_string(),
        "bad value 'yes' for setting 'precise_clock' of protocol clocksi-rep; \
         accepted values: on, off, true, false"
    );

    let err =
        registry::validate_settings("str", &settings_map(&[("precise_clock", "on")])).unwrap_err();
    assert!(
        err.to_string().starts_with(
            "unknown setting 'precise_clock' for protocol str; valid settings: failover="
        ),
        "{err}"
    );

    let err = registry::validate_settings("spanner", &BTreeMap::new()).unwrap_err();
    assert!(matches!(err, SettingError::UnknownProtocol(_)), "{err:?}");
}
