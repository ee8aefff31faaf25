//! How long a node takes to recover from its write-ahead log, and how fast records are appended.
//!
//! `recover/1M-records`: a `clocksi-rep` data directory holding one million records (500,000
//! transactions, each an `Installed` prepare of one key and its `Committed` outcome, over 100,000
//! keys with 16-byte values, no checkpoint) is opened and replayed: reading, checksums, decoding
//! and rebuilding the store. `append/100k-records`: the same records appended with `log=off`
//! (encoding and handing them to the writer thread; no sync).
//!
//! `cargo bench -p augur-protocols --bench recovery`

use augur_contract::log_policy::LogPolicy;
use augur_contract::{NodeEnv, ProtocolOptions};
use augur_protocols::clocksi_rep::ClockSiRep;
use augur_protocols::replica::Record;
use augur_runtime::{wal, wal::LogConfig};
use augur_storage::VersionState;
use augur_types::{Key, LatencyProfile, NodeId, Placement, Timestamp, TxnId};
use bytes::Bytes;
use criterion::{Criterion, criterion_group, criterion_main};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

const KEYS: u64 = 100_000;

fn env() -> NodeEnv {
    let profile = LatencyProfile::named("lan").unwrap();
    NodeEnv {
        id: NodeId(0),
        placement: Arc::new(Placement::ring(profile, 1, 1).unwrap()),
        options: Arc::new(ProtocolOptions::default()),
        procedures: Default::default(),
    }
}

/// The records of `txns` committed single-key transactions, two per transaction.
fn records(txns: u64) -> impl Iterator<Item = [Record<Timestamp>; 2]> {
    (0..txns).map(|i| {
        let txn = TxnId::new(NodeId(1), i + 1);
        let ts = Timestamp(1_000_000 + 2 * i);
        let key = Key::numbered(0, i % KEYS);
        let value = Bytes::from(format!("{:016}", i));
        [
            Record::Installed {
                txn,
                snapshot: Timestamp(ts.0 - 1),
                ts,
                state: VersionState::Prepared,
                writes: vec![(key, Some(value))],
            },
            Record::Committed { txn, commit_ts: ts },
        ]
    })
}

fn config(dir: &Path) -> LogConfig {
    LogConfig {
        // No checkpoint: the point is replaying a long log.
        checkpoint_min_bytes: u64::MAX,
        ..LogConfig::dir("clocksi-rep", LogPolicy::Off, dir)
    }
}

fn bench(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    {
        let (_, mut log) = wal::open::<ClockSiRep>(&env(), &config(dir.path())).unwrap();
        for pair in records(500_000) {
            log.append(&pair);
        }
    }
    let mut group = c.benchmark_group("wal");
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(20));
    group.bench_function("recover/1M-records", |b| {
        b.iter(|| {
            let (node, log) = wal::open::<ClockSiRep>(&env(), &config(dir.path())).unwrap();
            assert_eq!(node.store().key_count() as u64, KEYS);
            drop(log);
        })
    });
    let batch: Vec<[Record<Timestamp>; 2]> = records(50_000).collect();
    group.bench_function("append/100k-records", |b| {
        b.iter_with_large_drop(|| {
            let dir = tempfile::tempdir().unwrap();
            let (_, mut log) = wal::open::<ClockSiRep>(&env(), &config(dir.path())).unwrap();
            for pair in &batch {
                log.append(pair);
            }
            (log, dir)
        })
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
