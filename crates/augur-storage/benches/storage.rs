//! Single-threaded throughput of the operations on a partition's hot path.
//!
//! Every store is pre-loaded with one committed 100-byte value per key, and keys are visited in a
//! fixed pseudo-random order so that consecutive operations do not share cache lines, as with
//! requests from many clients.
//!
//! The write benchmark installs a prepared version on an existing key, then commits it through a
//! second lookup (as a commit message would). To keep chains from growing without bound, it runs
//! `collect_garbage(newest commit timestamp, GC_BATCH)` every `GC_BATCH` writes: the collector
//! then visits keys exactly as fast as writes arrive, each key holds at most a couple of versions
//! in the steady state, and the collector's cost is included in the per-write figure.

use augur_storage::{Key, MvStore, Timestamp, TxnId, Value, VersionState};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use std::hint::black_box;

/// Keys in the small store (fits in the last-level cache with room to spare on most machines).
const SMALL: usize = 1 << 17;
/// Keys in the large store (the memory target: a million keys).
const LARGE: usize = 1 << 20;
/// Writes between incremental garbage-collection calls, and keys examined per call.
const GC_BATCH: usize = 256;

/// The keys `0..n` in a fixed pseudo-random order.
fn shuffled_keys(n: usize) -> Vec<Key> {
    let mut keys: Vec<Key> = (0..n as u64)
        .map(|i| Key::numbered((i % 16) as u32, i))
        .collect();
    // Fisher-Yates driven by SplitMix64: reproducible without a random source.
    let mut state = 0x5eed_u64;
    for i in (1..keys.len()).rev() {
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        keys.swap(i, (z % (i as u64 + 1)) as usize);
    }
    keys
}

fn loaded_store(keys: &[Key]) -> MvStore {
    let mut store = MvStore::with_capacity(keys.len());
    for (i, key) in keys.iter().enumerate() {
        let value = Value::from(vec![i as u8; 100]);
        store
            .entry(key)
            .put_committed(TxnId(i as u64), Timestamp(1), Some(value));
    }
    store
}

fn reads(c: &mut Criterion) {
    for (label, n) in [("128k_keys", SMALL), ("1m_keys", LARGE)] {
        let keys = shuffled_keys(n);
        let store = loaded_store(&keys);
        let mask = n - 1;
        let mut group = c.benchmark_group(format!("read/{label}"));
        group.throughput(Throughput::Elements(1));

        let mut i = 0usize;
        group.bench_function("read_at", |b| {
            b.iter(|| {
                i = i.wrapping_add(1);
                black_box(store.read_at(&keys[i & mask], Timestamp(10)));
            })
        });
        group.bench_function("latest_committed", |b| {
            b.iter(|| {
                i = i.wrapping_add(1);
                black_box(
                    store
                        .get(&keys[i & mask])
                        .and_then(|entry| entry.latest_committed()),
                );
            })
        });
        group.finish();
    }
}

fn writes(c: &mut Criterion) {
    for (label, n) in [("128k_keys", SMALL), ("1m_keys", LARGE)] {
        let keys = shuffled_keys(n);
        let mut store = loaded_store(&keys);
        let mask = n - 1;
        let value = Value::from(vec![7u8; 100]);
        let mut group = c.benchmark_group(format!("write/{label}"));
        group.throughput(Throughput::Elements(1));

        let mut next_ts = 2u64;
        group.bench_function("install_commit_gc", |b| {
            b.iter(|| {
                let now = next_ts;
                next_ts += 1;
                let key = &keys[now as usize & mask];
                let txn = TxnId(now);
                store.entry(key).install(
                    txn,
                    Timestamp(now),
                    VersionState::Prepared,
                    Some(value.clone()),
                );
                let committed = store
                    .get_mut(key)
                    .is_some_and(|entry| entry.commit(txn, Timestamp(now)));
                black_box(committed);
                if now.is_multiple_of(GC_BATCH as u64) {
                    black_box(store.collect_garbage(Timestamp(now), GC_BATCH));
                }
            })
        });
        group.finish();
        // The collector kept up: at most one extra version per key remains.
        assert!(store.version_count() <= 2 * n, "{store:?}");
    }
}

criterion_group!(benches, reads, writes);
criterion_main!(benches);
