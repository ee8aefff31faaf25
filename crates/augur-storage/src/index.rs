//! A compact open-addressing hash index from keys to slot numbers.
//!
//! The store keeps its entries in a dense vector and only needs the index to answer "which slot
//! holds this key". A general-purpose map would store the key (24 bytes) and the slot next to
//! control bytes in a table that doubles past 7/8 load; here a bucket is one `u64` holding the
//! slot number and 32 bits of the key's hash. The key itself lives only in the slot, so the
//! index costs 8 bytes per bucket, and the stored hash bits both reject most non-matching
//! buckets without touching the slot and let the table be rebuilt without rehashing any key.
//!
//! Keys are never removed from the store, so the index needs no deletion markers: linear probing
//! with a load factor of at most 1/2 keeps probe sequences short (about 1.5 buckets for a hit,
//! 2.5 for a miss).

use augur_types::Key;
use rustc_hash::FxHasher;
use std::hash::Hasher;

/// A bucket that holds no slot. Occupied buckets store `slot + 1` in their low half, so they are
/// never zero.
const EMPTY: u64 = 0;

/// Smallest table allocated once the first key arrives.
const MIN_BITS: u32 = 4;

/// Hash of a key, deterministic across runs (no random seed), so that the same sequence of
/// operations always lays the store out the same way.
///
/// FxHash is fast on the short keys augur uses but leaves its best bits in the middle of the
/// word; the finaliser (MurmurHash3's 64-bit mix) spreads them over the top 32 bits, which the
/// index uses both to pick the bucket and as the stored tag.
pub(crate) fn hash_key(key: &Key) -> u64 {
    let mut hasher = FxHasher::default();
    hasher.write(key.as_bytes());
    let mut h = hasher.finish();
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h
}

/// Buckets of `(tag << 32) | (slot + 1)`, where `tag` is the top 32 bits of the key's hash.
#[derive(Clone, Default)]
pub(crate) struct KeyIndex {
    /// Power-of-two number of buckets (or none before the first insertion).
    buckets: Box<[u64]>,
    /// `buckets.len() == 1 << bits` when allocated.
    bits: u32,
}

impl KeyIndex {
    /// An index that holds `keys` keys without growing.
    pub(crate) fn with_capacity(keys: usize) -> Self {
        let mut index = KeyIndex::default();
        if keys > 0 {
            index.resize(Self::bits_for(keys));
        }
        index
    }

    /// The fewest bits whose table keeps `keys` keys at a load of at most 1/2.
    fn bits_for(keys: usize) -> u32 {
        let buckets = keys.saturating_mul(2).next_power_of_two();
        buckets.trailing_zeros().max(MIN_BITS)
    }

    /// The bucket a tag probes first: its top `bits` bits.
    fn home(tag: u32, bits: u32) -> usize {
        // `bits` is at least MIN_BITS once allocated, so the shift is below 32.
        (tag >> (32 - bits)) as usize
    }

    /// Slot holding the key with hash `hash`, using `is_key` to confirm a candidate slot.
    #[inline]
    pub(crate) fn find(&self, hash: u64, mut is_key: impl FnMut(usize) -> bool) -> Option<usize> {
        if self.buckets.is_empty() {
            return None;
        }
        let tag = (hash >> 32) as u32;
        let mask = self.buckets.len() - 1;
        let mut pos = Self::home(tag, self.bits);
        loop {
            let bucket = self.buckets[pos];
            if bucket == EMPTY {
                return None;
            }
            if (bucket >> 32) as u32 == tag {
                let slot = (bucket as u32 - 1) as usize;
                if is_key(slot) {
                    return Some(slot);
                }
            }
            pos = (pos + 1) & mask;
        }
    }

    /// Records that the key with hash `hash` lives in `slot`, which must be the `len`-th key
    /// (`slot == len - 1`) and not already indexed.
    pub(crate) fn insert(&mut self, hash: u64, slot: usize, len: usize) {
        assert!(
            slot < u32::MAX as usize,
            "the store holds at most 2^32 - 1 keys"
        );
        if len.saturating_mul(2) > self.buckets.len() {
            self.resize(Self::bits_for(len).max(self.bits + 1));
        }
        let tag = (hash >> 32) as u32;
        Self::place(&mut self.buckets, self.bits, tag, slot as u64 + 1);
    }

    fn place(buckets: &mut [u64], bits: u32, tag: u32, slot_plus_one: u64) {
        let mask = buckets.len() - 1;
        let mut pos = Self::home(tag, bits);
        while buckets[pos] != EMPTY {
            pos = (pos + 1) & mask;
        }
        buckets[pos] = ((tag as u64) << 32) | slot_plus_one;
    }

    /// Rebuilds the table with `1 << bits` buckets. Bucket positions depend only on the stored
    /// tags, so no key is read or rehashed.
    fn resize(&mut self, bits: u32) {
        assert!(bits <= 32, "key index limited to 2^32 buckets");
        let mut buckets = vec![EMPTY; 1usize << bits].into_boxed_slice();
        for &bucket in self.buckets.iter().filter(|&&b| b != EMPTY) {
            Self::place(
                &mut buckets,
                bits,
                (bucket >> 32) as u32,
                bucket & 0xffff_ffff,
            );
        }
        self.buckets = buckets;
        self.bits = bits;
    }

    /// Number of buckets, for tests of the sizing policy.
    #[cfg(test)]
    pub(crate) fn bucket_count(&self) -> usize {
        self.buckets.len()
    }
}
