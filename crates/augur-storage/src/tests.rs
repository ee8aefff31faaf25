use super::*;
use crate::index::{KeyIndex, hash_key};

fn t(n: u64) -> TxnId {
    TxnId(n)
}

fn ts(n: u64) -> Timestamp {
    Timestamp(n)
}

fn val(s: &'static str) -> Option<Value> {
    Some(Value::from_static(s.as_bytes()))
}

fn key(n: u64) -> Key {
    Key::numbered((n % 7) as u32, n)
}

fn read_value<M>(e: &KeyEntry<M>, at: u64) -> Option<&[u8]> {
    e.read_at(ts(at)).and_then(|v| v.value.as_deref())
}

/// Timestamps of all versions in chain order.
fn chain_ts<M>(e: &KeyEntry<M>) -> Vec<u64> {
    e.versions().map(|v| v.ts.0).collect()
}

/// The crate documentation quotes these sizes; the memory target depends on them.
#[test]
fn layout_stays_compact() {
    assert_eq!(std::mem::size_of::<Version>(), 56);
    assert_eq!(std::mem::size_of::<KeyEntry<()>>(), 72);
    assert_eq!(MvStore::<()>::SLOT_BYTES, 96);
    // A small metadata field shares the word beside the committed count.
    assert_eq!(std::mem::size_of::<KeyEntry<u32>>(), 72);
}

#[test]
fn read_at_picks_newest_committed_at_or_below_snapshot() {
    let mut e = KeyEntry::<()>::default();
    e.put_committed(t(1), ts(10), val("a"));
    e.put_committed(t(2), ts(20), val("b"));
    e.put_committed(t(3), ts(30), val("c"));
    assert_eq!(e.read_at(ts(9)), None);
    assert_eq!(read_value(&e, 10), Some(&b"a"[..]));
    assert_eq!(read_value(&e, 19), Some(&b"a"[..]));
    assert_eq!(read_value(&e, 20), Some(&b"b"[..]));
    assert_eq!(read_value(&e, 29), Some(&b"b"[..]));
    assert_eq!(read_value(&e, 1_000), Some(&b"c"[..]));
    assert_eq!(e.latest_committed().unwrap().writer, t(3));
    assert_eq!(e.version_count(), 3);
}

#[test]
fn empty_entry_reads_nothing() {
    let e = KeyEntry::new(7u32);
    assert_eq!(e.read_at(Timestamp::MAX), None);
    assert_eq!(e.latest_committed(), None);
    assert_eq!(e.uncommitted().count(), 0);
    assert_eq!(e.version_count(), 0);
    assert_eq!(e.meta, 7);
}

#[test]
fn uncommitted_versions_are_never_read() {
    let mut e = KeyEntry::<()>::default();
    e.put_committed(t(1), ts(10), val("old"));
    e.install(t(2), ts(20), VersionState::Prepared, val("prep"));
    e.install(t(3), ts(15), VersionState::LocalCommitted, val("local"));
    for at in [10, 15, 20, 100, u64::MAX] {
        assert_eq!(read_value(&e, at), Some(&b"old"[..]), "snapshot {at}");
    }
    assert_eq!(e.latest_committed().unwrap().writer, t(1));
    let writers: Vec<_> = e.uncommitted().map(|v| v.writer).collect();
    assert_eq!(writers, vec![t(2), t(3)], "installation order");
    assert_eq!(
        e.uncommitted_by(t(3)).unwrap().state,
        VersionState::LocalCommitted
    );
    assert_eq!(
        e.uncommitted_by(t(1)),
        None,
        "committed versions are not uncommitted"
    );

    let only_uncommitted = {
        let mut e = KeyEntry::<()>::default();
        e.install(t(9), ts(1), VersionState::Prepared, val("x"));
        e
    };
    assert_eq!(only_uncommitted.read_at(Timestamp::MAX), None);
    assert_eq!(only_uncommitted.latest_committed(), None);
}

#[test]
fn commit_makes_version_visible_at_its_commit_ts() {
    let mut e = KeyEntry::<()>::default();
    e.put_committed(t(1), ts(10), val("a"));
    e.install(t(2), ts(15), VersionState::Prepared, val("b"));
    assert!(e.commit(t(2), ts(25)));
    assert_eq!(e.uncommitted().count(), 0);
    let v = e.read_at(ts(25)).unwrap();
    assert_eq!(
        *v,
        Version {
            writer: t(2),
            ts: ts(25),
            state: VersionState::Committed,
            value: val("b"),
        }
    );
    assert_eq!(read_value(&e, 24), Some(&b"a"[..]));
    assert!(!e.commit(t(2), ts(30)), "already committed");
    assert!(!e.commit(t(99), ts(30)), "never installed");
    assert_eq!(e.version_count(), 2);
}

#[test]
fn out_of_order_commits_keep_committed_versions_sorted() {
    let mut e = KeyEntry::<()>::default();
    e.put_committed(t(1), ts(10), val("a"));
    e.install(t(2), ts(0), VersionState::Prepared, val("b"));
    e.install(t(3), ts(0), VersionState::Prepared, val("c"));
    e.install(t(4), ts(0), VersionState::LocalCommitted, val("d"));
    e.install(t(5), ts(0), VersionState::Prepared, val("e"));
    // Commit the later timestamp first, then one that lands between existing versions, then one
    // below every committed version.
    assert!(e.commit(t(4), ts(40)));
    assert!(e.commit(t(2), ts(20)));
    assert!(e.commit(t(3), ts(5)));
    assert_eq!(chain_ts(&e), vec![5, 10, 20, 40, 0]);
    assert!(
        e.versions()
            .take(4)
            .all(|v| v.state == VersionState::Committed)
    );
    assert_eq!(
        e.uncommitted().map(|v| v.writer).collect::<Vec<_>>(),
        vec![t(5)]
    );
    assert_eq!(read_value(&e, 7), Some(&b"c"[..]));
    assert_eq!(read_value(&e, 10), Some(&b"a"[..]));
    assert_eq!(read_value(&e, 39), Some(&b"b"[..]));
    assert_eq!(read_value(&e, 40), Some(&b"d"[..]));
    assert_eq!(e.latest_committed().unwrap().writer, t(4));

    // put_committed also lands in timestamp order.
    e.put_committed(t(6), ts(30), val("f"));
    e.put_committed(t(7), ts(1), val("g"));
    assert_eq!(chain_ts(&e), vec![1, 5, 10, 20, 30, 40, 0]);
    assert_eq!(read_value(&e, 35), Some(&b"f"[..]));
    assert_eq!(read_value(&e, 4), Some(&b"g"[..]));
}

#[test]
fn commit_preserves_installation_order_of_the_remaining_uncommitted() {
    let mut e = KeyEntry::<()>::default();
    for w in 1..=5 {
        e.install(t(w), ts(w), VersionState::Prepared, val("x"));
    }
    assert!(e.commit(t(3), ts(3)));
    assert!(e.commit(t(5), ts(5)));
    let order: Vec<_> = e.uncommitted().map(|v| v.writer.0).collect();
    assert_eq!(order, vec![1, 2, 4]);
}

#[test]
fn equal_timestamps_read_the_last_committed() {
    let mut e = KeyEntry::<()>::default();
    e.put_committed(t(1), ts(10), val("first"));
    e.install(t(2), ts(10), VersionState::Prepared, val("second"));
    assert!(e.commit(t(2), ts(10)));
    assert_eq!(read_value(&e, 10), Some(&b"second"[..]));
    e.put_committed(t(3), ts(20), val("later"));
    assert_eq!(read_value(&e, 10), Some(&b"second"[..]));
}

#[test]
fn tombstones_read_as_versions_without_value() {
    let mut e = KeyEntry::<()>::default();
    e.put_committed(t(1), ts(10), val("a"));
    e.install(t(2), ts(20), VersionState::Prepared, None);
    assert!(e.commit(t(2), ts(20)));
    assert_eq!(
        e.read_at(ts(20)),
        Some(&Version {
            writer: t(2),
            ts: ts(20),
            state: VersionState::Committed,
            value: None,
        })
    );
    assert_eq!(read_value(&e, 15), Some(&b"a"[..]));
    e.put_committed(t(3), ts(30), None);
    assert_eq!(e.read_at(ts(30)).unwrap().value, None);
    assert_eq!(e.read_at(ts(30)).unwrap().writer, t(3));
}

#[test]
fn install_replaces_the_writers_own_uncommitted_version() {
    let mut e = KeyEntry::<()>::default();
    e.install(t(1), ts(10), VersionState::LocalCommitted, val("v1"));
    e.install(t(2), ts(11), VersionState::Prepared, val("other"));
    e.install(t(1), ts(12), VersionState::Prepared, None);
    assert_eq!(e.version_count(), 2);
    let order: Vec<_> = e.uncommitted().map(|v| v.writer).collect();
    assert_eq!(order, vec![t(1), t(2)], "replacement keeps its place");
    assert_eq!(
        e.uncommitted_by(t(1)),
        Some(&Version {
            writer: t(1),
            ts: ts(12),
            state: VersionState::Prepared,
            value: None,
        })
    );

    // A committed version by the same writer is a different version: installing adds one.
    e.put_committed(t(3), ts(5), val("c"));
    e.install(t(3), ts(20), VersionState::Prepared, val("c2"));
    assert_eq!(e.version_count(), 4);
    assert_eq!(read_value(&e, 100), Some(&b"c"[..]));
}

#[test]
fn update_uncommitted_changes_state_and_ts_only() {
    let mut e = KeyEntry::<()>::default();
    e.install(t(1), ts(10), VersionState::LocalCommitted, val("v"));
    assert!(e.update_uncommitted(t(1), ts(17), VersionState::Prepared));
    assert_eq!(
        e.uncommitted_by(t(1)),
        Some(&Version {
            writer: t(1),
            ts: ts(17),
            state: VersionState::Prepared,
            value: val("v"),
        })
    );
    assert!(!e.update_uncommitted(t(2), ts(1), VersionState::Prepared));
    e.put_committed(t(3), ts(1), val("c"));
    assert!(
        !e.update_uncommitted(t(3), ts(2), VersionState::Prepared),
        "committed versions are not updatable"
    );
}

#[test]
#[should_panic(expected = "uncommitted state")]
fn install_rejects_committed_state() {
    KeyEntry::<()>::default().install(t(1), ts(1), VersionState::Committed, None);
}

#[test]
fn remove_uncommitted_aborts_only_that_writer() {
    let mut e = KeyEntry::<()>::default();
    e.put_committed(t(1), ts(5), val("c"));
    e.install(t(2), ts(10), VersionState::Prepared, val("a"));
    e.install(t(3), ts(11), VersionState::Prepared, val("b"));
    e.install(t(4), ts(12), VersionState::LocalCommitted, val("d"));
    let removed = e.remove_uncommitted(t(3)).unwrap();
    assert_eq!(removed.writer, t(3));
    assert_eq!(removed.value, val("b"));
    assert_eq!(e.remove_uncommitted(t(3)), None);
    assert_eq!(e.remove_uncommitted(t(1)), None, "committed versions stay");
    let order: Vec<_> = e.uncommitted().map(|v| v.writer).collect();
    assert_eq!(order, vec![t(2), t(4)]);
    assert_eq!(read_value(&e, 100), Some(&b"c"[..]));
    assert_eq!(e.version_count(), 3);
}

#[test]
fn store_entry_creates_with_default_meta_and_get_finds_it() {
    let mut s = MvStore::<Vec<u32>>::new();
    assert!(s.get(&key(1)).is_none());
    assert!(s.get_mut(&key(1)).is_none());
    assert_eq!(s.read_at(&key(1), Timestamp::MAX), None);
    let e = s.entry(&key(1));
    assert_eq!(e.version_count(), 0);
    assert!(e.meta.is_empty());
    e.meta.push(42);
    assert_eq!(s.key_count(), 1);
    assert_eq!(s.version_count(), 0);
    s.entry(&key(1)).put_committed(t(1), ts(3), val("x"));
    assert_eq!(s.key_count(), 1);
    assert_eq!(s.get(&key(1)).unwrap().meta, vec![42]);
    assert_eq!(
        s.read_at(&key(1), ts(3)).unwrap().value.as_deref(),
        Some(&b"x"[..])
    );
    assert_eq!(s.read_at(&key(1), ts(2)), None);
    assert!(s.get(&key(2)).is_none());
}

#[test]
fn many_keys_are_all_found_after_index_growth() {
    let mut s = MvStore::<u64>::new();
    let n = 50_000;
    for i in 0..n {
        let e = s.entry(&key(i));
        e.put_committed(t(i), ts(i), None);
        e.meta = i;
    }
    assert_eq!(s.key_count(), n as usize);
    for i in 0..n {
        assert_eq!(s.get(&key(i)).unwrap().meta, i);
    }
    assert!(s.get(&key(n)).is_none());
    // Keys of other lengths and shapes share the index.
    for bytes in [&b""[..], b"a", b"ab", b"abcdefghijklmnopqrstuvwxyz"] {
        s.entry(&Key::from_bytes(bytes)).meta = bytes.len() as u64;
    }
    for bytes in [&b""[..], b"a", b"ab", b"abcdefghijklmnopqrstuvwxyz"] {
        assert_eq!(
            s.get(&Key::from_bytes(bytes)).unwrap().meta,
            bytes.len() as u64
        );
    }
}

#[test]
fn with_capacity_does_not_grow_the_index() {
    let mut s = MvStore::<()>::with_capacity(1000);
    let buckets = s.index_bucket_count();
    assert!(buckets >= 2000);
    for i in 0..1000 {
        s.entry(&key(i));
    }
    assert_eq!(s.index_bucket_count(), buckets);
    assert_eq!(KeyIndex::with_capacity(1 << 20).bucket_count(), 1 << 21);
}

#[test]
fn version_count_tracks_changes_made_through_entries() {
    let mut s = MvStore::<()>::new();
    s.entry(&key(1))
        .install(t(1), ts(1), VersionState::Prepared, val("a"));
    assert_eq!(
        s.version_count(),
        1,
        "visible while the entry's change is unsettled"
    );
    s.entry(&key(2)).put_committed(t(2), ts(2), val("b"));
    s.entry(&key(2)).put_committed(t(3), ts(3), val("c"));
    assert_eq!(s.version_count(), 3);
    s.get_mut(&key(1))
        .unwrap()
        .install(t(1), ts(5), VersionState::Prepared, val("a2"));
    assert_eq!(s.version_count(), 3, "replacement adds nothing");
    assert!(s.get_mut(&key(1)).unwrap().commit(t(1), ts(6)));
    assert_eq!(s.version_count(), 3);
    s.entry(&key(1))
        .install(t(4), ts(7), VersionState::Prepared, None);
    assert!(
        s.get_mut(&key(1))
            .unwrap()
            .remove_uncommitted(t(4))
            .is_some()
    );
    assert_eq!(s.version_count(), 3);
    assert!(s.get_mut(&key(99)).is_none());
    assert_eq!(s.version_count(), 3);
    let gc = s.collect_garbage(ts(100), 10);
    assert_eq!(gc.versions_dropped, 1);
    assert_eq!(s.version_count(), 2);
    let summed: usize = s.iter().map(|(_, e)| e.version_count()).sum();
    assert_eq!(summed, s.version_count());
    assert_eq!(format!("{s:?}"), "MvStore { keys: 2, versions: 2 }");
}

#[test]
fn gc_keeps_the_version_visible_at_the_watermark_and_everything_newer() {
    let mut s = MvStore::<()>::new();
    let e = s.entry(&key(1));
    for i in 1..=5 {
        e.put_committed(t(i), ts(i * 10), val("v"));
    }
    e.install(t(9), ts(1), VersionState::Prepared, val("u"));
    e.install(t(8), ts(100), VersionState::LocalCommitted, val("w"));
    assert_eq!(s.version_count(), 7);

    // Watermark 35: the version at 30 is what a snapshot at 35 reads; 10 and 20 go.
    let gc = s.collect_garbage(ts(35), 1);
    assert_eq!(
        gc,
        GcStats {
            keys_examined: 1,
            versions_dropped: 2
        }
    );
    let e = s.get(&key(1)).unwrap();
    assert_eq!(chain_ts(e), vec![30, 40, 50, 1, 100]);
    assert_eq!(e.read_at(ts(35)).unwrap().ts, ts(30));
    assert_eq!(s.version_count(), 5);

    // Exactly at a version's timestamp: that version stays, older ones go.
    assert_eq!(s.collect_garbage(ts(40), 1).versions_dropped, 1);
    assert_eq!(chain_ts(s.get(&key(1)).unwrap()), vec![40, 50, 1, 100]);

    // Far above everything: only the newest committed and the uncommitted remain.
    assert_eq!(s.collect_garbage(Timestamp::MAX, 1).versions_dropped, 1);
    let e = s.get(&key(1)).unwrap();
    assert_eq!(chain_ts(e), vec![50, 1, 100]);
    assert_eq!(e.uncommitted().count(), 2);
    assert_eq!(s.collect_garbage(Timestamp::MAX, 1).versions_dropped, 0);
    assert_eq!(s.version_count(), 3);
}

#[test]
fn gc_below_every_version_drops_nothing() {
    let mut s = MvStore::<()>::new();
    let e = s.entry(&key(1));
    e.put_committed(t(1), ts(10), val("a"));
    e.put_committed(t(2), ts(20), val("b"));
    assert_eq!(s.collect_garbage(ts(5), 10).versions_dropped, 0);
    assert_eq!(s.collect_garbage(ts(10), 10).versions_dropped, 0);
    assert_eq!(s.version_count(), 2);
}

#[test]
fn gc_keeps_a_tombstone_visible_at_the_watermark() {
    let mut s = MvStore::<()>::new();
    let e = s.entry(&key(1));
    e.put_committed(t(1), ts(10), val("a"));
    e.put_committed(t(2), ts(20), None);
    assert_eq!(s.collect_garbage(ts(30), 1).versions_dropped, 1);
    let v = s.read_at(&key(1), ts(30)).unwrap();
    assert_eq!((v.writer, v.value.clone()), (t(2), None));
}

#[test]
fn gc_returns_chains_to_inline_storage() {
    let mut s = MvStore::<()>::new();
    let e = s.entry(&key(1));
    for i in 1..=10 {
        e.put_committed(t(i), ts(i), val("v"));
    }
    s.collect_garbage(Timestamp::MAX, 1);
    let e = s.get(&key(1)).unwrap();
    assert_eq!(e.version_count(), 1);
    assert!(!e.is_spilled());
}

#[test]
fn gc_work_is_bounded_and_wraps_around() {
    let mut s = MvStore::<()>::new();
    for i in 0..10 {
        let e = s.entry(&key(i));
        e.put_committed(t(1), ts(1), val("old"));
        e.put_committed(t(2), ts(2), val("new"));
    }
    assert_eq!(s.version_count(), 20);
    let gc = s.collect_garbage(ts(5), 4);
    assert_eq!(
        gc,
        GcStats {
            keys_examined: 4,
            versions_dropped: 4
        }
    );
    // Exactly the first four keys (in iteration order) were collected.
    let counts: Vec<_> = s.iter().map(|(_, e)| e.version_count()).collect();
    assert_eq!(counts, vec![1, 1, 1, 1, 2, 2, 2, 2, 2, 2]);

    let gc = s.collect_garbage(ts(5), 4);
    assert_eq!(
        gc,
        GcStats {
            keys_examined: 4,
            versions_dropped: 4
        }
    );
    // Next call covers keys 8, 9 and wraps to 0, 1 (already clean).
    let gc = s.collect_garbage(ts(5), 4);
    assert_eq!(
        gc,
        GcStats {
            keys_examined: 4,
            versions_dropped: 2
        }
    );
    assert_eq!(s.version_count(), 10);

    // Give keys 2 and 3 a second version: the next call resumes at key 2.
    for i in [2, 3] {
        s.entry(&key(i)).put_committed(t(3), ts(3), val("newer"));
    }
    let gc = s.collect_garbage(ts(5), 2);
    assert_eq!(
        gc,
        GcStats {
            keys_examined: 2,
            versions_dropped: 2
        }
    );

    // More than the key count examines each key once.
    let gc = s.collect_garbage(ts(5), 1_000);
    assert_eq!(gc.keys_examined, 10);
    assert_eq!(s.collect_garbage(ts(5), 0), GcStats::default());
    assert_eq!(
        MvStore::<()>::new().collect_garbage(ts(5), 10),
        GcStats::default()
    );
}

#[test]
fn gc_after_new_keys_keeps_a_valid_cursor() {
    let mut s = MvStore::<()>::new();
    for i in 0..3 {
        s.entry(&key(i)).put_committed(t(1), ts(1), val("a"));
    }
    s.collect_garbage(ts(1), 3);
    for i in 3..6 {
        let e = s.entry(&key(i));
        e.put_committed(t(1), ts(1), val("a"));
        e.put_committed(t(2), ts(2), val("b"));
    }
    // The cursor wrapped to key 0; a full sweep reaches the new keys.
    let gc = s.collect_garbage(ts(2), 6);
    assert_eq!(
        gc,
        GcStats {
            keys_examined: 6,
            versions_dropped: 3
        }
    );
}

/// A reproducible pseudo-random sequence (SplitMix64), so the test needs no random source.
struct Seq(u64);

impl Seq {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

fn run_ops(seed: u64, ops: usize) -> MvStore<u64> {
    let mut s = MvStore::<u64>::new();
    let mut r = Seq(seed);
    for i in 0..ops as u64 {
        let k = key(r.next() % 500);
        let w = t(r.next() % 8);
        match r.next() % 5 {
            0 => s
                .entry(&k)
                .install(w, ts(i), VersionState::Prepared, val("p")),
            1 => {
                if let Some(e) = s.get_mut(&k) {
                    e.commit(w, ts(i));
                }
            }
            2 => {
                if let Some(e) = s.get_mut(&k) {
                    e.remove_uncommitted(w);
                }
            }
            3 => s
                .entry(&k)
                .put_committed(w, ts(r.next() % (i + 1)), val("c")),
            _ => s.entry(&k).meta += 1,
        }
        if i % 97 == 0 {
            s.collect_garbage(ts(i / 2), 50);
        }
    }
    s
}

#[test]
fn iteration_order_is_deterministic() {
    let a = run_ops(7, 20_000);
    let b = run_ops(7, 20_000);
    let ka: Vec<_> = a
        .iter()
        .map(|(k, e)| (k.clone(), e.meta, chain_ts(e)))
        .collect();
    let kb: Vec<_> = b
        .iter()
        .map(|(k, e)| (k.clone(), e.meta, chain_ts(e)))
        .collect();
    assert_eq!(ka, kb);
    assert_eq!(a.version_count(), b.version_count());

    // Iteration follows first insertion.
    let mut s = MvStore::<()>::new();
    for i in [5, 3, 9, 1, 3, 5] {
        s.entry(&key(i));
    }
    let order: Vec<_> = s.iter().map(|(k, _)| k.clone()).collect();
    assert_eq!(order, vec![key(5), key(3), key(9), key(1)]);
}

#[test]
fn hashing_is_stable() {
    // Fixed seed: the same key hashes the same in every process.
    assert_eq!(hash_key(&key(1)), hash_key(&key(1)));
    assert_ne!(hash_key(&key(1)), hash_key(&key(2)));
    assert_ne!(
        hash_key(&Key::from_bytes(b"a")),
        hash_key(&Key::from_bytes(b"a\0"))
    );
}

/// Checks every chain invariant against a straightforward model after random operations.
#[test]
fn random_operations_match_a_simple_model() {
    #[derive(Clone)]
    struct ModelVersion {
        writer: u64,
        ts: u64,
        committed: bool,
        seq: u64,
    }
    let mut r = Seq(42);
    for _round in 0..200 {
        let mut e = KeyEntry::<()>::default();
        let mut model: Vec<ModelVersion> = Vec::new();
        let mut seq = 0;
        for _ in 0..60 {
            seq += 1;
            let w = r.next() % 6;
            let time = r.next() % 50;
            match r.next() % 6 {
                0 | 1 => {
                    e.install(t(w), ts(time), VersionState::Prepared, None);
                    match model.iter_mut().find(|v| !v.committed && v.writer == w) {
                        Some(v) => v.ts = time,
                        None => model.push(ModelVersion {
                            writer: w,
                            ts: time,
                            committed: false,
                            seq,
                        }),
                    }
                }
                2 => {
                    let found = e.commit(t(w), ts(time));
                    let m = model.iter_mut().find(|v| !v.committed && v.writer == w);
                    assert_eq!(found, m.is_some());
                    if let Some(v) = m {
                        v.ts = time;
                        v.committed = true;
                        v.seq = seq;
                    }
                }
                3 => {
                    let removed = e.remove_uncommitted(t(w));
                    let pos = model.iter().position(|v| !v.committed && v.writer == w);
                    assert_eq!(removed.is_some(), pos.is_some());
                    if let Some(p) = pos {
                        model.remove(p);
                    }
                }
                4 => {
                    e.put_committed(t(w), ts(time), None);
                    model.push(ModelVersion {
                        writer: w,
                        ts: time,
                        committed: true,
                        seq,
                    });
                }
                _ => {
                    let watermark = r.next() % 60;
                    let dropped = e.collect_garbage(ts(watermark));
                    // Model: the committed version a read at the watermark sees, and everything
                    // at or after it, stays.
                    let keep_from = model
                        .iter()
                        .filter(|v| v.committed && v.ts <= watermark)
                        .map(|v| (v.ts, v.seq))
                        .max();
                    let before = model.len();
                    if let Some(k) = keep_from {
                        model.retain(|v| !v.committed || (v.ts, v.seq) >= k);
                    }
                    assert_eq!(dropped, before - model.len());
                }
            }
            // Committed versions ordered by (ts, commit sequence), then uncommitted in order.
            let mut committed: Vec<_> = model.iter().filter(|v| v.committed).cloned().collect();
            committed.sort_by_key(|v| (v.ts, v.seq));
            let uncommitted: Vec<_> = model.iter().filter(|v| !v.committed).cloned().collect();
            let expected: Vec<_> = committed
                .iter()
                .chain(uncommitted.iter())
                .map(|v| (v.writer, v.ts, v.committed))
                .collect();
            let actual: Vec<_> = e
                .versions()
                .map(|v| (v.writer.0, v.ts.0, v.state == VersionState::Committed))
                .collect();
            assert_eq!(actual, expected);
            for snapshot in [0, 10, 25, 49, 100] {
                let want = committed
                    .iter()
                    .rfind(|v| v.ts <= snapshot)
                    .map(|v| v.writer);
                assert_eq!(e.read_at(ts(snapshot)).map(|v| v.writer.0), want);
            }
        }
    }
}

#[test]
fn reads_and_gc_by_predicate_keep_the_newest_accepted_version_and_everything_newer() {
    let mut s = MvStore::<()>::new();
    let e = s.entry(&key(1));
    for i in 1..=5 {
        e.put_committed(t(i), ts(i * 10), val("v"));
    }
    e.install(t(9), ts(1), VersionState::Prepared, val("u"));
    // Visibility need not follow timestamps: writers 1, 2 and 4 are visible, 3 and 5 not.
    let visible = |v: &Version| [1, 2, 4].contains(&v.writer.0);
    let e = s.get(&key(1)).unwrap();
    assert_eq!(e.read_where(visible).map(|v| v.ts), Some(ts(40)));
    assert_eq!(e.read_where(|_| false), None);
    // Nothing accepted: nothing goes.
    assert_eq!(s.collect_garbage_where(1, |_| false).versions_dropped, 0);
    let gc = s.collect_garbage_where(1, visible);
    assert_eq!(gc.versions_dropped, 3);
    assert_eq!(chain_ts(s.get(&key(1)).unwrap()), vec![40, 50, 1]);
    assert_eq!(s.version_count(), 3);
}
