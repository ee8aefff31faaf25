use bytes::Bytes;
use serde::{Deserialize, Serialize};
use smallvec::SmallVec;
use std::fmt;

/// A value stored under a key. `Bytes` makes handing a version to a reader a reference-count bump.
pub type Value = Bytes;

/// A key: an arbitrary byte string whose first four bytes (big-endian) are its *shard tag*.
///
/// Placement maps a shard tag to a partition, so a workload chooses where a key lives by choosing
/// its tag (a TPC-C warehouse number, a synthetic partition index) and keys that share a tag always
/// live together. Keys shorter than four bytes are hashed instead. Up to 16 bytes are stored inline,
/// which keeps the per-key overhead of the store small and cloning a key allocation-free.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Key(SmallVec<[u8; 16]>);

impl Key {
    /// A key with the given shard tag followed by `rest`.
    pub fn tagged(shard: u32, rest: &[u8]) -> Key {
        let mut bytes = SmallVec::with_capacity(4 + rest.len());
        bytes.extend_from_slice(&shard.to_be_bytes());
        bytes.extend_from_slice(rest);
        Key(bytes)
    }

    /// A key with the given shard tag and a numeric identifier: the form synthetic workloads use.
    pub fn numbered(shard: u32, id: u64) -> Key {
        Key::tagged(shard, &id.to_be_bytes())
    }

    pub fn from_bytes(bytes: &[u8]) -> Key {
        Key(SmallVec::from_slice(bytes))
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// The shard tag that placement maps to a partition.
    pub fn shard(&self) -> u32 {
        match self.0.get(..4) {
            Some(tag) => u32::from_be_bytes([tag[0], tag[1], tag[2], tag[3]]),
            None => {
                // Short keys: FNV-1a, stable across runs and platforms.
                let mut h: u32 = 0x811c_9dc5;
                for b in self.0.iter() {
                    h ^= *b as u32;
                    h = h.wrapping_mul(0x0100_0193);
                }
                h
            }
        }
    }
}

impl fmt::Debug for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.len() >= 4 {
            write!(f, "{}/", self.shard())?;
            let rest = &self.0[4..];
            if rest.len() == 8 {
                let id = u64::from_be_bytes(rest.try_into().expect("eight bytes"));
                return write!(f, "{id}");
            }
            for b in rest {
                if b.is_ascii_graphic() {
                    write!(f, "{}", *b as char)?;
                } else {
                    write!(f, "\\x{b:02x}")?;
                }
            }
            Ok(())
        } else {
            write!(f, "{:02x?}", &self.0[..])
        }
    }
}

impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbered_keys_carry_their_shard_and_print_readably() {
        let k = Key::numbered(3, 42);
        assert_eq!(k.shard(), 3);
        assert_eq!(format!("{k:?}"), "3/42");
        assert_eq!(Key::tagged(9, b"abc").to_string(), "9/abc");
    }

    #[test]
    fn short_keys_hash_to_a_stable_shard() {
        assert_eq!(
            Key::from_bytes(b"ab").shard(),
            Key::from_bytes(b"ab").shard()
        );
        assert_ne!(
            Key::from_bytes(b"ab").shard(),
            Key::from_bytes(b"ba").shard()
        );
    }

    #[test]
    fn keys_serialise_compactly() {
        let k = Key::numbered(1, 2);
        let bytes = postcard::to_allocvec(&k).unwrap();
        assert_eq!(bytes.len(), 13);
        assert_eq!(postcard::from_bytes::<Key>(&bytes).unwrap(), k);
    }
}
