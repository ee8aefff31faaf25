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
///
/// A key serializes as its bytes. Deserializing from a human-readable format (JSON) also takes
/// its printed form, `SHARD/REST` (see [`Key::parse_printed`]), so that a person can name keys
/// in procedure arguments (`augur shell`'s `exec`); binary formats (the wire, the log) are
/// unaffected.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct Key(SmallVec<[u8; 16]>);

/// The derived form of [`Key`], which binary formats keep using.
#[derive(Deserialize)]
#[serde(rename = "Key")]
struct KeyBytes(SmallVec<[u8; 16]>);

impl<'de> Deserialize<'de> for Key {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Key, D::Error> {
        if !deserializer.is_human_readable() {
            return KeyBytes::deserialize(deserializer).map(|k| Key(k.0));
        }
        struct Printed;
        impl<'de> serde::de::Visitor<'de> for Printed {
            type Value = Key;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a key: its printed form `SHARD/REST` or its bytes")
            }

            fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<Key, E> {
                Key::parse_printed(text).map_err(E::custom)
            }

            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Key, A::Error> {
                let mut bytes = SmallVec::new();
                while let Some(b) = seq.next_element::<u8>()? {
                    bytes.push(b);
                }
                Ok(Key(bytes))
            }
        }
        deserializer.deserialize_any(Printed)
    }
}

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

    /// A key from its printed form `SHARD/REST`: REST made of digits that fit a `u64` is a
    /// [numbered](Key::numbered) key (as the synthetic workloads' keys print), any other REST
    /// is taken as bytes after the shard tag ([`Key::tagged`]).
    pub fn parse_printed(text: &str) -> Result<Key, String> {
        let (shard, rest) = text
            .split_once('/')
            .ok_or_else(|| format!("key '{text}' is not of the form SHARD/REST"))?;
        let shard: u32 = shard
            .parse()
            .map_err(|_| format!("key '{text}': shard '{shard}' is not a number"))?;
        let numbered = !rest.is_empty() && rest.bytes().all(|b| b.is_ascii_digit());
        match rest.parse::<u64>() {
            Ok(id) if numbered => Ok(Key::numbered(shard, id)),
            _ => Ok(Key::tagged(shard, rest.as_bytes())),
        }
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
    fn keys_read_from_their_printed_form_in_json_only() {
        assert_eq!(Key::parse_printed("3/42").unwrap(), Key::numbered(3, 42));
        assert_eq!(Key::parse_printed("9/abc").unwrap(), Key::tagged(9, b"abc"));
        assert!(
            Key::parse_printed("abc")
                .unwrap_err()
                .contains("SHARD/REST")
        );
        assert!(
            Key::parse_printed("x/1")
                .unwrap_err()
                .contains("not a number")
        );
        let k: Key = serde_json::from_str("\"3/42\"").unwrap();
        assert_eq!(k, Key::numbered(3, 42));
        // Bytes still read back in JSON, and binary formats are unchanged.
        let json = serde_json::to_string(&Key::numbered(3, 42)).unwrap();
        assert_eq!(
            serde_json::from_str::<Key>(&json).unwrap(),
            Key::numbered(3, 42)
        );
        let bytes = postcard::to_stdvec(&Key::numbered(3, 42)).unwrap();
        assert_eq!(
            postcard::from_bytes::<Key>(&bytes).unwrap(),
            Key::numbered(3, 42)
        );
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
