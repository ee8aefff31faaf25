//! Master fail-over scripted in the deterministic simulator (`clocksi-rep`, and `str` for the
//! engine's speculative flavour, and the lock-commit engine's flavors that fail over: `occ`,
//! `2pl`, `2pc-baseline`, `rc`, `dst-occ`, `dst-2pl`, `gts`, `vts`; fail-over on, their default;
//! `docs/architecture/availability.md`): a dead master replaced by its in-sync replica (and
//! given its mastership back once it is in sync again), a
//! partition that waits for its last in-sync replica rather than lose what only that replica
//! holds, `clocksi-rep`'s mutant `promote-out-of-sync`, which does not wait and loses a
//! committed write, STR's local commits waiting for a copy of their partition to end, DST's
//! claims at a dead master binding its successor's writers (and `no-failover-floor`, which
//! lets a writer commit inside a claimed snapshot), `dst-2pl`'s read masters, which must
//! be leased when a commit timestamp is fixed (and `no-read-lease`, which fixes it anyway),
//! `gts`'s and `vts`'s oracles moving to another node when their node dies, and `vts`'s reads at a
//! vector, which a deposed master must not serve (and `ungated-read-at`, which serves them).
//!
//! Three nodes on one LAN, two replicas per partition (`ring`): partition 0 lives on n0
//! (master) and n1, so n2, which holds no copy of it, still gives the configuration group its
//! majority when n0 or n1 is down. The `dst-2pl` scenario has five.

use augur_client::{Session, Transport, TxnError};
use augur_contract::{Protocol, ProtocolOptions};
use augur_protocols::clocksi_rep::ClockSiRep;
use augur_protocols::dst_2pl::Dst2PlNode;
use augur_protocols::dst_occ::DstOccNode;
use augur_protocols::gts::GtsNode;
use augur_protocols::occ::OccNode;
use augur_protocols::rc::RcNode;
use augur_protocols::sss::Sss;
use augur_protocols::str::Str;
use augur_protocols::two_pl::TwoPlNode;
use augur_protocols::twopc_baseline::TwoPcBaseline;
use augur_protocols::vts::VtsNode;
use augur_runtime::sim::{SimConfig, Simulation};
use augur_types::{AbortReason, Key, LatencyProfile, NodeId, PartitionId, Placement, Timestamp};
use bytes::Bytes;
use std::sync::{Arc, Mutex};
use std::time::Duration;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// Three nodes on a LAN, two replicas per partition, fail-over on (the default of every
/// protocol here but `sss`, which is asked for it), running `mutant` if given.
fn sim<P: Protocol>(mutant: Option<&str>) -> Simulation<P> {
    let options = ProtocolOptions {
        mutant: mutant.map(str::to_string),
        settings: [("failover".to_string(), "on".to_string())].into(),
        ..ProtocolOptions::default()
    };
    sim_of(3, options)
}

/// `nodes` nodes on a LAN, two replicas per partition, with `options`.
fn sim_of<P: Protocol>(nodes: usize, options: ProtocolOptions) -> Simulation<P> {
    let profile = LatencyProfile::named("lan").unwrap();
    let placement = Arc::new(Placement::ring(profile, nodes, 2).unwrap());
    Simulation::new(placement, Arc::new(options), SimConfig::new(11))
}

fn x() -> Key {
    Key::numbered(0, 1)
}

/// What the clients saw: (what, when, value), in the order it happened.
type Log = Arc<Mutex<Vec<(String, Duration, Option<Bytes>)>>>;

/// How long a client keeps trying (every 50 ms) before it gives up.
const PATIENCE: Duration = Duration::from_secs(4);

/// One transaction on `x`: write a value, or read.
#[derive(Clone, Copy)]
enum OnX {
    Write(&'static str),
    Read,
}

/// From `home`, starting at `at` (simulated time), run `op` on `key` in a transaction of its
/// own, again 50 ms after every abort (a lease not granted yet, a master being replaced) until
/// it ends (committed for a write, returned for a read) or `PATIENCE` ran out; log `name`,
/// when, and the value written or read (nothing when it never ended).
fn spawn_on<P: Protocol>(
    s: &mut Simulation<P>,
    (home, at): (u32, Duration),
    key: Key,
    name: String,
    op: OnX,
    log: &Log,
) {
    let log = log.clone();
    s.spawn_client(NodeId(home), move |t| async move {
        let now = t.now();
        t.sleep(at.saturating_sub(now)).await;
        let session = Session::new(t);
        let start = session.transport().now();
        while session.transport().now() < start + PATIENCE {
            let ended = match op {
                OnX::Write(value) => {
                    let value = Some(Bytes::from_static(value.as_bytes()));
                    let mut txn = session.begin(false).await.unwrap();
                    txn.write(key.clone(), value.clone()).unwrap();
                    txn.commit().await.map(|_| value)
                }
                // Committed, as a client would: under `2pl` the read holds a shared lock at
                // the master until the transaction ends. (Under `gts` and `vts` the begin
                // itself fetches a snapshot, and may abort.)
                OnX::Read => match session.begin(true).await {
                    Ok(mut txn) => match txn.read(&key).await {
                        Ok(value) => txn.commit().await.map(|_| value),
                        Err(e) => Err(e),
                    },
                    Err(e) => Err(e),
                },
            };
            match ended {
                Ok(value) => {
                    let when = session.transport().now();
                    log.lock().unwrap().push((name, when, value));
                    return;
                }
                Err(TxnError::Aborted(_)) => session.transport().sleep(ms(50)).await,
                Err(other) => panic!("{name}: {other}"),
            }
        }
    });
}

fn spawn_writer<P: Protocol>(
    s: &mut Simulation<P>,
    home: u32,
    at: Duration,
    value: &'static str,
    log: &Log,
) {
    spawn_on(
        s,
        (home, at),
        x(),
        format!("wrote {value}"),
        OnX::Write(value),
        log,
    );
}

fn spawn_reader<P: Protocol>(
    s: &mut Simulation<P>,
    home: u32,
    at: Duration,
    name: &str,
    log: &Log,
) {
    spawn_on(s, (home, at), x(), name.to_string(), OnX::Read, log);
}

/// From `home`, at `at` (simulated time), write `value` to `key` in a transaction of its own,
/// again 50 ms after every abort until it commits or `PATIENCE` ran out; the commit timestamp
/// shows in the returned cell once it committed.
fn spawn_committed_write<P: Protocol>(
    s: &mut Simulation<P>,
    home: NodeId,
    at: Duration,
    key: Key,
    value: &'static str,
) -> Arc<Mutex<Option<Timestamp>>> {
    let committed = Arc::new(Mutex::new(None));
    let seen = committed.clone();
    s.spawn_client(home, move |t| async move {
        let now = t.now();
        t.sleep(at.saturating_sub(now)).await;
        let session = Session::new(t);
        while session.transport().now() < at + PATIENCE {
            let mut txn = session.begin(false).await.unwrap();
            txn.write(key.clone(), Some(Bytes::from_static(value.as_bytes())))
                .unwrap();
            match txn.commit().await {
                Ok(ts) => {
                    *seen.lock().unwrap() = Some(ts);
                    return;
                }
                Err(TxnError::Aborted(_)) => session.transport().sleep(ms(50)).await,
                Err(other) => panic!("writing {value}: {other}"),
            }
        }
    });
    committed
}

/// A commit's outcome: its timestamp, or why it aborted (`who` committed it; anything else
/// fails the test).
fn outcome(who: &str, commit: Result<Timestamp, TxnError>) -> Result<Timestamp, AbortReason> {
    match commit {
        Ok(ts) => Ok(ts),
        Err(TxnError::Aborted(reason)) => Err(reason),
        Err(other) => panic!("{who}: {other}"),
    }
}

/// The master every live node believes partition 0 has.
fn masters_of_x<P: Protocol>(s: &Simulation<P>) -> Vec<Option<NodeId>> {
    (0..3)
        .map(NodeId)
        .filter(|n| s.is_up(*n))
        .map(|n| s.node(n).master_of(PartitionId(0)))
        .collect()
}

fn entries(log: &Log) -> Vec<(String, Option<String>)> {
    log.lock()
        .unwrap()
        .iter()
        .map(|(what, _, v)| {
            let value = v.as_ref().map(|b| String::from_utf8_lossy(b).to_string());
            (what.clone(), value)
        })
        .collect()
}

#[test]
fn a_dead_master_is_replaced_by_its_in_sync_replica_within_the_lease() {
    dead_master_is_replaced::<ClockSiRep>();
}

/// STR's local commits and cache partition follow the configuration as `clocksi-rep`'s
/// prepares do.
#[test]
fn a_dead_str_master_is_replaced_by_its_in_sync_replica_within_the_lease() {
    dead_master_is_replaced::<Str>();
}

/// The lock-commit engine's flavors that fail over: every in-sync replica of a key written
/// takes part in the commit, so the write after the crash needs the eviction, and the reads
/// go where the flavor sends them (the master, or under `2pc-baseline` the nearest in-sync
/// replica).
#[test]
fn a_dead_occ_master_is_replaced_by_its_in_sync_replica_within_the_lease() {
    dead_master_is_replaced::<OccNode>();
}

#[test]
fn a_dead_dst_occ_master_is_replaced_by_its_in_sync_replica_within_the_lease() {
    dead_master_is_replaced::<DstOccNode>();
}

#[test]
fn a_dead_dst_2pl_master_is_replaced_by_its_in_sync_replica_within_the_lease() {
    dead_master_is_replaced::<Dst2PlNode>();
}

#[test]
fn a_dead_2pl_master_is_replaced_by_its_in_sync_replica_within_the_lease() {
    dead_master_is_replaced::<TwoPlNode>();
}

#[test]
fn a_dead_2pc_baseline_replica_is_evicted_within_the_lease() {
    dead_master_is_replaced::<TwoPcBaseline>();
}

#[test]
fn a_dead_rc_master_is_replaced_by_its_in_sync_replica_within_the_lease() {
    dead_master_is_replaced::<RcNode>();
}

fn dead_master_is_replaced<P: Protocol>() {
    let mut s = sim::<P>(None);
    let log = Log::default();
    dead_master_is_evicted(&mut s, &log);
    // The old master comes back as a replica, copies the partition, serves it again, and
    // takes back the mastership the placement gives it; n1 stays in sync as its slave.
    s.restart(NodeId(0));
    spawn_reader(&mut s, 0, ms(6000), "read at n0", &log);
    s.run_until(ms(9000));
    assert_eq!(masters_of_x(&s), vec![Some(NodeId(0)); 3]);
    assert_eq!(
        entries(&log).last().unwrap(),
        &("read at n0".into(), Some("after".into()))
    );
    spawn_writer(&mut s, 2, ms(9000), "back", &log);
    spawn_reader(&mut s, 1, ms(10_000), "read at n1", &log);
    s.run_until(ms(11_000));
    assert_eq!(
        entries(&log)[4..],
        [
            ("wrote back".into(), Some("back".into())),
            ("read at n1".into(), Some("back".into())),
        ]
    );
    assert!(s.clients_done());
}

/// `x`'s master n0 dies at 1 s: it is evicted within the lease and the skew bound of its last
/// renewal, n1 masters partition 0 from then on, and a write from n1 commits soon after.
fn dead_master_is_evicted<P: Protocol>(s: &mut Simulation<P>, log: &Log) {
    spawn_writer(s, 0, ms(0), "before", log);
    s.run_until(ms(1000));
    assert_eq!(masters_of_x(s), vec![Some(NodeId(0)); 3]);
    s.crash(NodeId(0));
    spawn_writer(s, 1, ms(1000), "after", log);
    spawn_reader(s, 2, ms(4000), "read", log);
    s.run_until(ms(6000));
    assert_eq!(masters_of_x(s), vec![Some(NodeId(1)); 2]);
    let seen = log.lock().unwrap().clone();
    let (_, after_at, _) = seen.iter().find(|(w, ..)| w == "wrote after").unwrap();
    // The lease (1 s) and the skew bound (0.1 s) from the dead master's last renewal, then
    // the eviction's Raft commit and the writer's next try.
    let took = *after_at - ms(1000);
    assert!(
        took > ms(1000) && took < ms(2000),
        "the write after the crash committed {took:?} after it"
    );
    assert_eq!(
        entries(log),
        vec![
            ("wrote before".into(), Some("before".into())),
            ("wrote after".into(), Some("after".into())),
            ("read".into(), Some("after".into())),
        ]
    );
}

/// `sss` has no master: every in-sync replica of a key serves its reads and votes on its
/// writes. A dead replica is evicted as a master is, and writes go on without it. Until `sss`
/// copies partitions, a replica back from a crash stays out of sync (reads and prepares go to
/// the in-sync replicas only), so the partition keeps the master that stood in.
#[test]
fn a_dead_sss_replica_is_evicted_within_the_lease() {
    let mut s = sim::<Sss>(None);
    let log = Log::default();
    dead_master_is_evicted(&mut s, &log);
    s.restart(NodeId(0));
    spawn_reader(&mut s, 0, ms(6000), "read at n0", &log);
    spawn_writer(&mut s, 2, ms(7000), "back", &log);
    spawn_reader(&mut s, 0, ms(8000), "read at n0 again", &log);
    s.run_until(ms(9000));
    assert_eq!(masters_of_x(&s), vec![Some(NodeId(1)); 3]);
    assert_eq!(
        entries(&log)[3..],
        [
            ("read at n0".into(), Some("after".into())),
            ("wrote back".into(), Some("back".into())),
            ("read at n0 again".into(), Some("back".into())),
        ]
    );
    assert!(s.clients_done());
}

/// n0 is cut off from 1 s to 3.5 s, so it is evicted from partition 0 while n1 commits `b`
/// alone; at 3 s a read-only transaction begins at n0, which has not heard of its eviction
/// (its configuration still has it in sync; its lease ran out). What it reads.
fn sss_deposed_replica_after_a_cut(mutant: Option<&str>) -> Vec<(String, Option<String>)> {
    let mut s = sim::<Sss>(mutant);
    let log = Log::default();
    spawn_writer(&mut s, 0, ms(0), "a", &log);
    s.run_until(ms(1000));
    s.partition(&[vec![NodeId(0)], vec![NodeId(1), NodeId(2)]]);
    spawn_writer(&mut s, 1, ms(1000), "b", &log);
    spawn_reader(&mut s, 0, ms(3000), "read at n0", &log);
    s.run_until(ms(3500));
    s.heal();
    s.run_until(ms(6000));
    assert!(s.clients_done());
    entries(&log)
}

/// The reader waits for a lease, which n0 holds only once it applied its eviction, after the
/// cut heals: then the reader ends `Reconfigured`, and its retry reads `b` at n1.
#[test]
fn a_deposed_sss_replica_serves_no_read_only_read() {
    assert_eq!(
        sss_deposed_replica_after_a_cut(None),
        [
            ("wrote a".into(), Some("a".into())),
            ("wrote b".into(), Some("b".into())),
            ("read at n0".into(), Some("b".into())),
        ]
    );
}

/// `ungated-ro-read`: n0 answers its own reader from its old state, `a`, though `b`'s client
/// heard of its commit before the reader began (a stale read: not strictly serializable).
#[test]
fn without_the_gate_a_deposed_sss_replica_returns_an_overwritten_version() {
    let seen = sss_deposed_replica_after_a_cut(Some("ungated-ro-read"));
    assert_eq!(seen[1], ("wrote b".into(), Some("b".into())));
    assert_eq!(seen[2], ("read at n0".into(), Some("a".into())));
}

/// n1 dies and is evicted, so n0 commits `new` alone; then n0 dies and n1 comes back, without
/// `new`. What happens to partition 0 while n0 is down, and once it is back.
fn last_in_sync_replica_dies<P: Protocol>(mutant: Option<&str>) -> Vec<(String, Option<String>)> {
    let mut s = sim::<P>(mutant);
    let log = Log::default();
    spawn_writer(&mut s, 0, ms(0), "old", &log);
    s.run_until(ms(1000));
    s.crash(NodeId(1));
    // n1's lease runs out at ~2.1 s; n0 then commits without it.
    spawn_writer(&mut s, 0, ms(1000), "new", &log);
    s.run_until(ms(4000));
    assert_eq!(
        entries(&log).last().unwrap(),
        &("wrote new".into(), Some("new".into())),
        "n0 commits alone once n1 is evicted"
    );
    s.crash(NodeId(0));
    s.restart(NodeId(1));
    spawn_reader(&mut s, 2, ms(4000), "read while n0 is down", &log);
    s.run_until(ms(9000));
    s.restart(NodeId(0));
    spawn_reader(&mut s, 2, ms(9000), "read once n0 is back", &log);
    s.run_until(ms(14_000));
    assert!(s.clients_done());
    entries(&log)
}

/// The partition's last in-sync replica holds a write no other replica has: while it is down
/// the partition serves nothing, and once it is back the write is there.
#[test]
fn a_partition_waits_for_its_last_in_sync_replica() {
    assert_eq!(
        last_in_sync_replica_dies::<ClockSiRep>(None),
        last_in_sync_replica_keeps_its_write()
    );
}

#[test]
fn an_str_partition_waits_for_its_last_in_sync_replica() {
    assert_eq!(
        last_in_sync_replica_dies::<Str>(None),
        last_in_sync_replica_keeps_its_write()
    );
}

fn last_in_sync_replica_keeps_its_write() -> Vec<(String, Option<String>)> {
    vec![
        ("wrote old".into(), Some("old".into())),
        ("wrote new".into(), Some("new".into())),
        ("read once n0 is back".into(), Some("new".into())),
    ]
}

/// `promote-out-of-sync` promotes n1, which missed `new`, when the last in-sync replica n0
/// dies: a committed write is lost, and stays lost once n0 is back (it copies n1's state).
#[test]
fn promoting_a_replica_out_of_sync_loses_a_committed_write() {
    assert_eq!(
        last_in_sync_replica_dies::<ClockSiRep>(Some("promote-out-of-sync")),
        vec![
            ("wrote old".into(), Some("old".into())),
            ("wrote new".into(), Some("new".into())),
            ("read while n0 is down".into(), Some("old".into())),
            ("read once n0 is back".into(), Some("old".into())),
        ]
    );
}

/// n1 dies, is evicted, and comes back: n0, partition 0's master, copies the partition to it
/// while a client at n0 writes `x` back to back. STR's local commit at n0 (the coordinator's
/// vote) waits for the copy to end, as a prepare there would, instead of aborting; and n1, in
/// sync again, serves the last value written.
#[test]
fn an_str_local_commit_at_a_master_copying_its_partition_waits_for_the_copy() {
    let mut s = sim::<Str>(None);
    let log = Log::default();
    s.run_until(ms(1000));
    s.crash(NodeId(1));
    s.run_until(ms(3000));
    s.restart(NodeId(1));
    let (committed, aborted) = (Arc::new(Mutex::new(0u32)), Arc::new(Mutex::new(0u32)));
    let (c, a) = (committed.clone(), aborted.clone());
    s.spawn_client(NodeId(0), move |t| async move {
        let session = Session::new(t);
        let mut i = 0u32;
        while session.transport().now() < ms(5000) {
            let mut txn = session.begin(false).await.unwrap();
            txn.write(x(), Some(Bytes::from(format!("w{i}")))).unwrap();
            match txn.commit().await {
                Ok(_) => *c.lock().unwrap() += 1,
                Err(TxnError::Aborted(_)) => *a.lock().unwrap() += 1,
                Err(other) => panic!("{other}"),
            }
            i += 1;
        }
    });
    s.run_until(ms(5500));
    spawn_reader(&mut s, 1, ms(5500), "read at n1", &log);
    s.run_until(ms(7000));
    assert!(s.clients_done());
    let held = s.node(NodeId(0)).counters().local_commits_held_for_copy;
    assert!(held > 0, "no local commit reached n0 during the copy");
    let (committed, aborted) = (*committed.lock().unwrap(), *aborted.lock().unwrap());
    assert!(committed > 100, "{committed} writes committed");
    assert_eq!(aborted, 0, "a write aborted around the copy");
    let last = format!("w{}", committed - 1);
    assert_eq!(entries(&log), vec![("read at n1".into(), Some(last))]);
    assert_eq!(masters_of_x(&s), vec![Some(NodeId(0)); 3]);
}

/// `dst-occ` under fail-over: a writer begins (its timestamp's lower bound is its begin time),
/// a read-only transaction then claims `x` at n0, its master, and reads `a`; n0 dies and n1 is
/// promoted; the writer writes `x` and commits at n1, which never saw the claim. Returns the
/// reader's two reads of `x` and whether the writer committed.
fn dst_claim_across_a_fail_over<P: Protocol>(mutant: Option<&str>) -> (Vec<Option<String>>, bool) {
    let mut s = sim::<P>(mutant);
    let log = Log::default();
    spawn_writer(&mut s, 2, ms(0), "a", &log);
    let reads = Arc::new(Mutex::new(Vec::new()));
    let committed = Arc::new(Mutex::new(false));
    let done = committed.clone();
    s.spawn_client(NodeId(2), move |t| async move {
        t.sleep(ms(800)).await;
        let session = Session::new(t);
        let mut txn = session.begin(false).await.unwrap();
        session.transport().sleep(ms(4500 - 800)).await;
        txn.write(x(), Some(Bytes::from_static(b"b"))).unwrap();
        *done.lock().unwrap() = txn.commit().await.is_ok();
    });
    let seen = reads.clone();
    s.spawn_client(NodeId(2), move |t| async move {
        t.sleep(ms(1000)).await;
        let session = Session::new(t);
        let mut txn = session.begin(true).await.unwrap();
        for until in [ms(1000), ms(6000)] {
            let now = session.transport().now();
            session.transport().sleep(until.saturating_sub(now)).await;
            let value = txn.read(&x()).await.unwrap();
            let value = value.map(|b| String::from_utf8_lossy(&b).to_string());
            seen.lock().unwrap().push(value);
        }
        txn.commit().await.unwrap();
    });
    s.run_until(ms(1200));
    s.crash(NodeId(0));
    s.run_until(ms(8000));
    assert!(s.clients_done());
    assert_eq!(masters_of_x(&s), vec![Some(NodeId(1)); 2]);
    let reads = reads.lock().unwrap().clone();
    let committed = *committed.lock().unwrap();
    (reads, committed)
}

/// The writer's prepare at the promoted master proposes above the eviction's floor (DST's
/// promoted floor), hence above the claim: the reader reads `a` twice, the writer commits
/// after its snapshot.
#[test]
fn a_dst_claim_at_a_dead_master_binds_the_writers_of_its_successor() {
    let a = Some("a".to_string());
    let expected = (vec![a.clone(), a], true);
    assert_eq!(dst_claim_across_a_fail_over::<DstOccNode>(None), expected);
    assert_eq!(dst_claim_across_a_fail_over::<Dst2PlNode>(None), expected);
}

/// The mutant `no-failover-floor`: the writer commits at its begin time, inside the reader's
/// snapshot, and the reader's second read sees it (a non-repeatable read).
#[test]
fn without_the_promoted_floor_a_dst_writer_commits_inside_a_claimed_snapshot() {
    let (a, b) = (Some("a".to_string()), Some("b".to_string()));
    let mutant = Some("no-failover-floor");
    let expected = (vec![a, b], true);
    assert_eq!(dst_claim_across_a_fail_over::<DstOccNode>(mutant), expected);
    assert_eq!(dst_claim_across_a_fail_over::<Dst2PlNode>(mutant), expected);
}

/// What the `dst-2pl` scenario below saw: `A`'s commit timestamp or why it aborted (and how
/// many attempts its coordinator aborted for a read master's lease), `B`'s commit timestamp,
/// and the read-only transaction's snapshot and reads of `x` and `y`.
#[derive(Debug)]
struct ReadMasterDied {
    a: Result<Timestamp, AbortReason>,
    read_lease_aborts: u64,
    b: Timestamp,
    snapshot: Timestamp,
    reads: Vec<Option<String>>,
}

/// `dst-2pl`, five nodes (partition `p` on n`p`, its master, and n`p+1`), named here from
/// the configuration group's leader `L`, which the scenario keeps clear of: n`L+2` masters
/// `x` (slave n`L+3`) and n`L+3` masters `y` (slave n`L+4`); n`L+1` coordinates `A`, which
/// reads `x` under a shared lock at its master and writes `y`. From 0.9 s the link from `A`'s
/// coordinator to `y`'s master delays by 2.4 s (`A`'s prepare there waits for it), and the
/// leader's messages to `A`'s coordinator by 10 s (it learns of no configuration change
/// meanwhile). `A` commits at 1 s: `x`'s master and `y`'s slave vote at once, and `x`'s master
/// dies at 1.2 s. Its slave is promoted, where `B` writes `x` from 2.5 s (above the eviction's
/// floor); the read-only `R` reads `x` (`B`'s) and claims `y` at its master from 3.1 s; then
/// `A`'s prepare reaches `y`'s master, whose floor for `y` is above the claim, and the last
/// vote reaches `A`'s coordinator.
fn dst_2pl_read_master_dies_before_the_decision(mutant: Option<&str>) -> ReadMasterDied {
    let options = ProtocolOptions {
        mutant: mutant.map(str::to_string),
        // `A`'s votes come in 2.4 s after its prepare.
        participant_timeout: ms(5000),
        ..ProtocolOptions::default()
    };
    let mut s = sim_of::<Dst2PlNode>(5, options);
    s.run_until(ms(400));
    let leader = s.node(NodeId(0)).leader().expect("a configuration leader");
    let n = |i: u32| NodeId((leader.0 + i) % 5);
    let (x_master, y_master, coordinator) = (n(2), n(3), n(1));
    let x = Key::numbered(x_master.0, 1);
    let y = Key::numbered(y_master.0, 1);
    let text = |v: Option<Bytes>| v.map(|b| String::from_utf8_lossy(&b).to_string());
    let a = Arc::new(Mutex::new(None));
    let seen = a.clone();
    let (x_a, y_a) = (x.clone(), y.clone());
    s.spawn_client(coordinator, move |t| async move {
        t.sleep(ms(100)).await;
        let session = Session::new(t);
        let mut txn = session.begin(false).await.unwrap();
        assert_eq!(txn.read(&x_a).await.unwrap(), None);
        txn.write(y_a, Some(Bytes::from_static(b"a"))).unwrap();
        let now = session.transport().now();
        session
            .transport()
            .sleep(ms(1000).saturating_sub(now))
            .await;
        *seen.lock().unwrap() = Some(outcome("A", txn.commit().await));
    });
    let b = spawn_committed_write(&mut s, n(4), ms(2500), x.clone(), "b");
    let r = Arc::new(Mutex::new(None));
    let seen = r.clone();
    s.spawn_client(n(4), move |t| async move {
        t.sleep(ms(2700)).await;
        let session = Session::new(t);
        let mut txn = session.begin(true).await.unwrap();
        let snapshot = txn.snapshot();
        let reads = vec![
            text(txn.read(&x).await.unwrap()),
            text(txn.read(&y).await.unwrap()),
        ];
        txn.commit().await.unwrap();
        *seen.lock().unwrap() = Some((snapshot, reads));
    });
    s.run_until(ms(900));
    s.slow_link(coordinator, y_master, ms(2400));
    s.slow_link(leader, coordinator, ms(10_000));
    s.run_until(ms(1200));
    s.crash(x_master);
    s.run_until(ms(7000));
    assert!(s.clients_done());
    let (snapshot, reads) = r.lock().unwrap().take().expect("R ended");
    let counters = s.node(coordinator).counters();
    let read_lease_aborts = counters.iter().find(|(c, _)| *c == "read_lease_aborts");
    ReadMasterDied {
        a: a.lock().unwrap().take().expect("A ended"),
        read_lease_aborts: read_lease_aborts.expect("counted").1,
        b: b.lock().unwrap().take().expect("B committed"),
        snapshot,
        reads,
    }
}

/// n0's vote carried the end of its lease, long past when the last vote comes in: `A`'s
/// coordinator does not fix its timestamp and aborts it (`reconfigured`). `R` saw `B` and not
/// `A`, which is right since `A` never committed.
#[test]
fn a_dst_2pl_commit_timestamp_is_fixed_only_while_its_read_masters_are_leased() {
    let seen = dst_2pl_read_master_dies_before_the_decision(None);
    assert_eq!(seen.a, Err(AbortReason::Reconfigured));
    assert_eq!(seen.read_lease_aborts, 1);
    assert!(seen.b < seen.snapshot, "{seen:?}");
    assert_eq!(seen.reads, vec![Some("b".to_string()), None]);
}

/// The mutant `no-read-lease`: `A` commits above `R`'s snapshot, hence above `B`, though `A`
/// read the `x` that `B` overwrote (rw: `A` before `B`). `R` saw `B` and not `A`: `R` reads
/// after `B`, `B` after `A`, `A` after `R` (it overwrote the `y` `R` read), a cycle.
#[test]
fn without_the_read_lease_a_dst_2pl_reader_commits_above_a_writer_it_precedes() {
    let seen = dst_2pl_read_master_dies_before_the_decision(Some("no-read-lease"));
    let a = seen.a.expect("A commits");
    assert!(seen.b < seen.snapshot && seen.snapshot < a, "{seen:?}");
    assert_eq!(seen.reads, vec![Some("b".to_string()), None]);
}

/// The node running the oracle (n0, also `x`'s master) dies at 1 s, and n1 takes both over
/// (`runs_oracle` tells whether a node runs it): `before` is written from n0 at once and read
/// from n2 at 0.9 s; `after` is written from n1 from 1 s on, and `x` read from n2 at 4 s.
fn oracle_node_dies<P: Protocol>(s: &mut Simulation<P>, log: &Log, runs_oracle: fn(&P) -> bool) {
    spawn_writer(s, 0, ms(0), "before", log);
    spawn_reader(s, 2, ms(900), "read before the crash", log);
    s.run_until(ms(1000));
    assert!(runs_oracle(s.node(NodeId(0))));
    s.crash(NodeId(0));
    spawn_writer(s, 1, ms(1000), "after", log);
    spawn_reader(s, 2, ms(4000), "read while n0 is down", log);
    s.run_until(ms(5000));
    assert_eq!(masters_of_x(s), vec![Some(NodeId(1)); 2]);
    assert!(runs_oracle(s.node(NodeId(1))));
}

/// `gts` under fail-over: n0 runs the oracle and masters partition 0, and dies. n1 takes over
/// both: writes commit again within the lease (the new oracle issues from a block the
/// configuration reserved for it, above everything n0 issued), and read-only transactions go
/// on, at the stable timestamp the new oracle knew safe, which stays there until every node
/// (n0 included) said which timestamps it holds: the write after the crash is not seen until
/// n0 is back. The oracle stays at n1.
#[test]
fn a_dead_gts_oracle_is_replaced_and_stable_moves_again_once_its_node_is_back() {
    let mut s = sim::<GtsNode>(None);
    let log = Log::default();
    oracle_node_dies(&mut s, &log, |n| n.oracle().is_some());
    let seen = log.lock().unwrap().clone();
    let (_, after_at, _) = seen.iter().find(|(w, ..)| w == "wrote after").unwrap();
    let took = *after_at - ms(1000);
    assert!(
        took > ms(1000) && took < ms(2000),
        "the write after the crash committed {took:?} after it"
    );
    s.restart(NodeId(0));
    spawn_reader(&mut s, 2, ms(7000), "read once n0 is back", &log);
    s.run_until(ms(8000));
    assert!(s.clients_done());
    assert!(s.node(NodeId(0)).oracle().is_none());
    assert!(s.node(NodeId(1)).oracle().is_some());
    assert_eq!(
        entries(&log),
        vec![
            ("wrote before".into(), Some("before".into())),
            ("read before the crash".into(), Some("before".into())),
            ("wrote after".into(), Some("after".into())),
            ("read while n0 is down".into(), Some("before".into())),
            ("read once n0 is back".into(), Some("after".into())),
        ]
    );
}

/// `vts`'s oracle (n0, which also masters `x`) dies: n1 takes both over. Unlike `gts`'s, the
/// new oracle needs nothing from the dead node to go on: it starts from the vector n1 heard
/// of, which admits `before`, so the write after the crash, which depends on it, becomes
/// stable and a read-only transaction sees it while n0 is down.
#[test]
fn a_dead_vts_oracle_is_replaced_and_the_vector_moves_on_without_its_node() {
    let mut s = sim::<VtsNode>(None);
    let log = Log::default();
    oracle_node_dies(&mut s, &log, |n| n.vector_oracle().is_some());
    s.restart(NodeId(0));
    spawn_reader(&mut s, 0, ms(7000), "read at n0 once it is back", &log);
    s.run_until(ms(8000));
    assert!(s.clients_done());
    assert!(s.node(NodeId(0)).vector_oracle().is_none());
    assert_eq!(s.node(NodeId(0)).tags_owed(), 0);
    assert_eq!(s.node(NodeId(1)).tags_owed(), 0);
    assert_eq!(
        entries(&log),
        vec![
            ("wrote before".into(), Some("before".into())),
            ("read before the crash".into(), Some("before".into())),
            ("wrote after".into(), Some("after".into())),
            ("read while n0 is down".into(), Some("after".into())),
            ("read at n0 once it is back".into(), Some("after".into())),
        ]
    );
}

/// `vts` under fail-over, five nodes (partition `p` on n`p` and n`p+1`), the oracle on n4, the
/// configuration group's leader n0: `x` lives on n2 (master) and n3. `a` is written at once.
/// From 1 s the leader's messages to n2 and to n1 are held back 10 s (neither learns of a
/// configuration change), and n2 pauses; it is evicted and n3 masters `x`. `b` overwrites
/// `a` at 2.8 s, at n3. A read-only transaction from n1 at 3 s fetches the stable vector
/// (which admits `b`) and, n1 still taking n2 for `x`'s master, reads `x` there; n2 resumes
/// at 3.5 s. Returns what that reader read (retrying after each abort), if anything.
fn vts_deposed_master_reads_at_a_vector(mutant: Option<&str>) -> Option<String> {
    let options = ProtocolOptions {
        mutant: mutant.map(str::to_string),
        settings: [("oracle".to_string(), "4".to_string())].into(),
        ..ProtocolOptions::default()
    };
    let mut s = sim_of::<VtsNode>(5, options);
    let x = Key::numbered(2, 1);
    let a = spawn_committed_write(&mut s, NodeId(3), ms(0), x.clone(), "a");
    let b = spawn_committed_write(&mut s, NodeId(3), ms(2800), x.clone(), "b");
    let log = Log::default();
    spawn_on(&mut s, (1, ms(3000)), x, "read".into(), OnX::Read, &log);
    s.run_until(ms(1000));
    assert_eq!(s.node(NodeId(3)).leader(), Some(NodeId(0)));
    assert!(s.node(NodeId(4)).vector_oracle().is_some());
    s.slow_link(NodeId(0), NodeId(2), ms(10_000));
    s.slow_link(NodeId(0), NodeId(1), ms(10_000));
    s.pause(NodeId(2));
    s.run_until(ms(3500));
    assert_eq!(
        s.node(NodeId(3)).master_of(PartitionId(2)),
        Some(NodeId(3)),
        "n2 was evicted"
    );
    s.resume(NodeId(2));
    s.run_until(ms(9000));
    assert!(s.clients_done());
    assert!(a.lock().unwrap().is_some() && b.lock().unwrap().is_some());
    entries(&log).into_iter().find_map(|(_, read)| read)
}

/// The deposed master's lease ran out during its pause, so it serves no read at a vector when
/// it resumes (it waits for a lease, then refuses): the reader reads `b`, or nothing.
#[test]
fn a_deposed_vts_master_serves_no_read_at_a_vector() {
    let read = vts_deposed_master_reads_at_a_vector(None);
    assert_ne!(
        read.as_deref(),
        Some("a"),
        "a deposed master served a stale read"
    );
}

/// `ungated-read-at`: the deposed master answers from its store, which misses `b` though the
/// reader's vector admits it (`b`'s tag is stable, so the reader's snapshot holds `b`'s write
/// and not the version it read).
#[test]
fn without_the_gate_a_deposed_vts_master_returns_a_version_its_successor_overwrote() {
    let read = vts_deposed_master_reads_at_a_vector(Some("ungated-read-at"));
    assert_eq!(read.as_deref(), Some("a"));
}

/// `gts` under fail-over, five nodes (partition `p` on n`p` and n`p+1`), the oracle on n4, the
/// configuration group's leader n0: `x` and `y` live on n2 and n3. From 1 s the leader's
/// messages to n4 and to n1 are held back 10 s (neither learns of a configuration change),
/// and n4 pauses; it is evicted and n0, next in line, takes the oracle over. `A` (from n3)
/// writes `x` at 2.8 s with a timestamp of n0's. `B` (from n1, which still sends its fetches
/// to n4) reads `x` at 3 s and writes `y`; its fetch waits at the paused n4, which resumes at
/// 3.5 s. Returns `A`'s commit timestamp, what `B` read, and `B`'s commit timestamp or why it
/// aborted.
fn gts_deposed_oracle_resumes(
    mutant: Option<&str>,
) -> (Timestamp, Option<String>, Result<Timestamp, AbortReason>) {
    let options = ProtocolOptions {
        mutant: mutant.map(str::to_string),
        settings: [("oracle".to_string(), "4".to_string())].into(),
        // `B`'s fetch waits for n4 (in the correct protocol, in vain, until this runs out:
        // within the client's own timeout, 5 s).
        participant_timeout: ms(4000),
        ..ProtocolOptions::default()
    };
    let mut s = sim_of::<GtsNode>(5, options);
    let (x, y) = (Key::numbered(2, 1), Key::numbered(2, 2));
    let a = spawn_committed_write(&mut s, NodeId(3), ms(2800), x.clone(), "a");
    let b = Arc::new(Mutex::new(None));
    let seen = b.clone();
    s.spawn_client(NodeId(1), move |t| async move {
        t.sleep(ms(3000)).await;
        let session = Session::new(t);
        let mut txn = session.begin(false).await.unwrap();
        let read = txn.read(&x).await.unwrap();
        let read = read.map(|v| String::from_utf8_lossy(&v).to_string());
        txn.write(y, Some(Bytes::from_static(b"b"))).unwrap();
        *seen.lock().unwrap() = Some((read, outcome("B", txn.commit().await)));
    });
    s.run_until(ms(1000));
    assert_eq!(s.node(NodeId(2)).leader(), Some(NodeId(0)));
    assert!(s.node(NodeId(4)).oracle().is_some());
    s.slow_link(NodeId(0), NodeId(4), ms(10_000));
    s.slow_link(NodeId(0), NodeId(1), ms(10_000));
    s.pause(NodeId(4));
    s.run_until(ms(3500));
    assert!(
        s.node(NodeId(0)).oracle().is_some(),
        "n0 took the oracle over"
    );
    s.resume(NodeId(4));
    s.run_until(ms(9000));
    assert!(s.clients_done());
    let a = a.lock().unwrap().take().expect("A committed");
    let (read, b) = b.lock().unwrap().take().expect("B ended");
    (a, read, b)
}

/// The deposed oracle's lease ran out during its pause, so it issues nothing when it resumes:
/// `B`'s fetch is never answered and `B` aborts; no timestamp of n4's goes below n0's.
#[test]
fn a_deposed_gts_oracle_issues_nothing_once_its_lease_ran_out() {
    let (_, read, b) = gts_deposed_oracle_resumes(None);
    assert_eq!(read, Some("a".to_string()));
    assert_eq!(b, Err(AbortReason::Timeout));
}

/// The mutant `oracle-without-lease`: n4 issues `B` a timestamp from its old block, below
/// `A`'s, though `B` read what `A` wrote (wr: `A` before `B`).
#[test]
fn without_its_lease_a_deposed_gts_oracle_issues_below_its_successor() {
    let (a, read, b) = gts_deposed_oracle_resumes(Some("oracle-without-lease"));
    assert_eq!(read, Some("a".to_string()));
    let b = b.expect("B commits");
    assert!(b < a, "B committed at {b:?}, A at {a:?}");
}
