//! `synthetic-sparkle`: the synthetic benchmark of Sparkle (Z. Li, P. Van Roy and P. Romano,
//! "Sparkle: Speculative Deterministic Concurrency Control for Partially Replicated Transactional
//! Data Stores", PVLDB 12, 2019, §5.2 "Synthetic-benchmark", run in Fig. 7 on an 8-node cluster).
//!
//! Each partition holds `keys_per_partition` keys split in two sets: ids `0..index_keys` are
//! *index* keys and ids `index_keys..keys_per_partition` are *normal* keys. Key `i` of partition
//! `p` is `Key::numbered(p, i)` (shard tag `p`, so it lives in partition `p` and prints as
//! `p/i`). Every transaction starts by reading and updating `index_accesses` distinct index keys
//! (5), chosen uniformly, and then touches `normal_accesses` distinct normal keys (5). There are
//! two procedures, named as the per-type counters show them:
//!
//! * `dependent`: the normal keys are *named by the values read from the index keys*. Every index
//!   key holds a pointer to a normal key of its own partition, so which normal keys the
//!   transaction reads (and, with `dependent_updates`, writes) is only known once the index keys
//!   have been read. That is the point of the benchmark: Calvin must run a *reconnaissance* phase
//!   to guess such a transaction's read/write set before ordering it, and abort and re-order it
//!   when an index key changed in between; Sparkle simply speculates. In augur the procedure is
//!   interactive, so the dependency is real: the keys it reads are computed from the values
//!   returned, never drawn up front.
//! * `independent`: reads and updates `normal_accesses` normal keys drawn uniformly when the
//!   transaction is generated; the values of the index keys do not influence them.
//!
//! Either kind is *single-partition* (all its keys in one partition) or, with probability
//! `multi_partition`, *multi-partition* over `partitions_per_mpt` distinct partitions (2). The
//! procedure names do not distinguish the two (`dependent` and `independent` count both). A
//! multi-partition transaction divides its accesses equally among its partitions, the first ones
//! taking the remainder: 5 index and 5 normal keys over two partitions are 3 + 3 in the first and
//! 2 + 2 in the second, exactly the paper's example. A single-partition transaction uses a
//! partition that the coordinator `home` replicates (uniformly among them); a multi-partition
//! one takes such a partition first, then `partitions_per_mpt - 1` distinct others uniformly
//! among the remaining partitions (which, with replication, may also be ones `home` replicates).
//!
//! # Values, and why nothing needs loading
//!
//! A value is 8 big-endian bytes, then the writing transaction's random stamp (when there is
//! room), then zeros, `value_size` bytes in all:
//!
//! * an index key's 8 bytes are a *pointer*: the id of a normal key of the same partition
//!   (`index_keys <= ptr < keys_per_partition`). An index key that is absent (never written), too
//!   short, or holds an out-of-range pointer (say, written by a run with other settings) points to
//!   its *initial pointer*: `index_keys + h(p, i) mod (keys_per_partition - index_keys)`, with `h`
//!   a fixed 64-bit mix of the partition and the key id. So the store needs no loading: the
//!   initial database is "every index key at its initial pointer, every normal key at counter 0".
//!   Updating an index key writes a fresh pointer, drawn uniformly over the normal keys from the
//!   generator's random stream when the transaction is created (so every retry writes the same).
//! * a normal key's 8 bytes are a counter (absent or short: 0); an update writes it plus one.
//!
//! A dependent transaction's `j`-th normal key in a partition whose share has `m` index keys is
//! the one named by the `(j mod m)`-th of them; if this transaction already took that normal key
//! (two index keys naming the same one, or more normal than index accesses in a share), it takes
//! the next normal key after it that it has not taken, wrapping round the normal ids. So a
//! dependent transaction always touches exactly `normal_accesses` distinct normal keys, split as
//! an independent one's are, and their identity is a function of the index values alone.
//!
//! # Settings and where their defaults come from
//!
//! * `keys_per_partition` = 1,000,000: "each partition contains one million keys".
//! * `contention` = `low`: the paper's two scenarios, set through the number of index keys per
//!   partition: `low` = 50,000 and `medium` = 1,000 ("in the low contention scenario, each
//!   partition uses 50000 index keys; 1000 index keys per partition are used, instead, for the
//!   medium contention scenario"). Fig. 7 plots both (LC and MC); `low` is augur's default, the one
//!   the paper reports for all three systems (S-SMR only appears with LC).
//! * `index_keys` = the preset's: overrides it; 1 ..= `keys_per_partition - 1`, and at least
//!   `index_accesses`.
//! * `index_accesses` = 5 ("reading and updating five index keys"), within 1..=64.
//! * `normal_accesses` = 5 ("five additional normal keys", "five randomly selected normal keys"),
//!   within 0..=64, and at most the number of normal keys.
//! * `dependent` = 0.1, the share of dependent transactions. The paper sweeps 0%, 1%, 10%, 50% and
//!   100% (Fig. 7's x-axis); 10% is augur's choice, the middle of the sweep and the rate the text
//!   singles out (Calvin's throughput halves "with as low as 10% dependent transactions").
//! * `dependent_updates` = false: whether a dependent transaction also updates its normal keys.
//!   The paper says a dependent transaction "reads five additional normal keys" and, in contrast,
//!   that a non-dependent one "reads and updates five randomly selected normal keys", so by default
//!   a dependent transaction only reads them. Its parenthesis ("the read- and write-set of
//!   dependent transactions can only be determined during execution") suggests they may be
//!   written too; `dependent_updates=true` is that reading.
//! * `multi_partition` = 0.1, the share of multi-partition transactions. The paper sweeps 0%, 1%,
//!   10% and 50% (Figs. 7a–d); 10% is augur's choice. When it is above 0 the cluster needs at
//!   least `partitions_per_mpt` partitions (set `multi_partition=0` on smaller clusters).
//! * `partitions_per_mpt` = 2: "Multi-partition transactions, unless otherwise noted, always access
//!   two partitions". Within 2..=`index_accesses`, so each partition gets an index key.
//! * `value_size` = 16 bytes, within 8..=1 MiB. The paper does not say; 16 matches `synthetic-str`
//!   and `ycsb-t` (pointer or counter, then stamp).
//!
//! The paper leaves unstated: value sizes and contents (what an index key holds and what its
//! update writes: augur's pointers above); whether the store is preloaded; which partitions a
//! client's transactions use (augur: one its coordinator replicates first); whether a
//! transaction's keys are distinct (augur: yes); and the order of operations (augur reads every
//! index key, then every normal key, then writes).

use crate::bad_value as bad;
use crate::{Workload, WorkloadError, parse, reject_unknown};
use augur_client::{Ops, Procedure, TxnError};
use augur_types::{Key, NodeId, Placement, ProcedureCall, RequestError};
use bytes::Bytes;
use futures::future::BoxFuture;
use rand::Rng;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::Arc;

/// Settings accepted through `--set`.
pub const SETTINGS: &[&str] = &[
    "contention",
    "keys_per_partition",
    "index_keys",
    "index_accesses",
    "normal_accesses",
    "dependent",
    "dependent_updates",
    "multi_partition",
    "partitions_per_mpt",
    "value_size",
];

/// Contention presets and their index keys per partition (§5.2).
const PRESETS: &[(&str, u64)] = &[("low", 50_000), ("medium", 1_000)];
/// The most index (or normal) keys one transaction accesses.
const MAX_ACCESSES: usize = 64;
/// The largest value accepted.
const MAX_VALUE_SIZE: usize = 1 << 20;

/// Every setting in force; serialised as-is into results.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Settings {
    /// `low` or `medium`: sets `index_keys` unless given.
    pub contention: String,
    /// Keys per partition, index and normal.
    pub keys_per_partition: u64,
    /// Index keys per partition: ids `0..index_keys`.
    pub index_keys: u64,
    /// Index keys each transaction reads and updates.
    pub index_accesses: usize,
    /// Normal keys each transaction accesses.
    pub normal_accesses: usize,
    /// The share of dependent transactions.
    pub dependent: f64,
    /// Whether dependent transactions update (not just read) their normal keys.
    pub dependent_updates: bool,
    /// The share of multi-partition transactions.
    pub multi_partition: f64,
    /// Partitions a multi-partition transaction accesses.
    pub partitions_per_mpt: usize,
    /// Bytes per value (at least 8, for the pointer or counter).
    pub value_size: usize,
}

impl Settings {
    fn from_given(given: &BTreeMap<String, String>) -> Result<Settings, WorkloadError> {
        reject_unknown("synthetic-sparkle", SETTINGS, given)?;
        let get = |key: &str, default: &str| given.get(key).cloned().unwrap_or(default.into());
        let contention = get("contention", "low");
        let Some(preset) = PRESETS.iter().find(|(name, _)| *name == contention) else {
            let names: Vec<&str> = PRESETS.iter().map(|(name, _)| *name).collect();
            let why = format!("valid presets: {}", names.join(", "));
            return Err(bad("contention", contention, &why));
        };
        let settings = Settings {
            keys_per_partition: parse("keys_per_partition", &get("keys_per_partition", "1000000"))?,
            index_keys: parse("index_keys", &get("index_keys", &preset.1.to_string()))?,
            index_accesses: parse("index_accesses", &get("index_accesses", "5"))?,
            normal_accesses: parse("normal_accesses", &get("normal_accesses", "5"))?,
            dependent: parse("dependent", &get("dependent", "0.1"))?,
            dependent_updates: parse("dependent_updates", &get("dependent_updates", "false"))?,
            multi_partition: parse("multi_partition", &get("multi_partition", "0.1"))?,
            partitions_per_mpt: parse("partitions_per_mpt", &get("partitions_per_mpt", "2"))?,
            value_size: parse("value_size", &get("value_size", "16"))?,
            contention,
        };
        for (k, v) in [
            ("dependent", settings.dependent),
            ("multi_partition", settings.multi_partition),
        ] {
            if !(0.0..=1.0).contains(&v) {
                return Err(bad(k, v.to_string(), "must be within 0..=1"));
            }
        }
        if !(1..=MAX_ACCESSES).contains(&settings.index_accesses) {
            let why = format!("must be within 1..={MAX_ACCESSES}");
            return Err(bad(
                "index_accesses",
                settings.index_accesses.to_string(),
                &why,
            ));
        }
        if settings.normal_accesses > MAX_ACCESSES {
            let why = format!("must be within 0..={MAX_ACCESSES}");
            return Err(bad(
                "normal_accesses",
                settings.normal_accesses.to_string(),
                &why,
            ));
        }
        if settings.keys_per_partition < 2 {
            let why = "must be at least 2 (an index key and a normal key)";
            return Err(bad(
                "keys_per_partition",
                settings.keys_per_partition.to_string(),
                why,
            ));
        }
        if settings.index_keys == 0 || settings.index_keys >= settings.keys_per_partition {
            let why = format!(
                "must be within 1..{} (keys_per_partition; at least one key must be normal)",
                settings.keys_per_partition
            );
            return Err(bad("index_keys", settings.index_keys.to_string(), &why));
        }
        if settings.index_keys < settings.index_accesses as u64 {
            let why = format!(
                "a transaction reads {} distinct index keys of a partition (index_accesses)",
                settings.index_accesses
            );
            return Err(bad("index_keys", settings.index_keys.to_string(), &why));
        }
        let normal_keys = settings.keys_per_partition - settings.index_keys;
        if normal_keys < settings.normal_accesses as u64 {
            let why = format!(
                "must leave at least {} normal keys (normal_accesses) after the {} index keys",
                settings.normal_accesses, settings.index_keys
            );
            return Err(bad(
                "keys_per_partition",
                settings.keys_per_partition.to_string(),
                &why,
            ));
        }
        if !(2..=settings.index_accesses).contains(&settings.partitions_per_mpt) {
            let why = format!(
                "must be within 2..={} (index_accesses: every partition gets an index key)",
                settings.index_accesses
            );
            return Err(bad(
                "partitions_per_mpt",
                settings.partitions_per_mpt.to_string(),
                &why,
            ));
        }
        if !(8..=MAX_VALUE_SIZE).contains(&settings.value_size) {
            let why = format!("must be within 8..={MAX_VALUE_SIZE} (the pointer takes 8 bytes)");
            return Err(bad("value_size", settings.value_size.to_string(), &why));
        }
        Ok(settings)
    }
}

/// Where index and normal keys are in a partition, and what index keys point to.
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
struct Layout {
    index_keys: u64,
    keys_per_partition: u64,
}

impl Layout {
    fn normal_keys(&self) -> u64 {
        self.keys_per_partition - self.index_keys
    }

    fn is_normal(&self, id: u64) -> bool {
        (self.index_keys..self.keys_per_partition).contains(&id)
    }

    /// The normal key an absent index key `id` of `partition` points to.
    fn initial_pointer(&self, partition: u32, id: u64) -> u64 {
        let h = mix(mix(u64::from(partition)) ^ id);
        self.index_keys + h % self.normal_keys()
    }

    /// The normal key index key `id` of `partition` points to, given its stored value.
    fn pointer(&self, partition: u32, id: u64, value: Option<&[u8]>) -> u64 {
        match value.and_then(|v| v.first_chunk::<8>()) {
            Some(b) if self.is_normal(u64::from_be_bytes(*b)) => u64::from_be_bytes(*b),
            _ => self.initial_pointer(partition, id),
        }
    }

    /// The `count` distinct normal keys a dependent transaction's share names through the
    /// pointers of its index keys (at least one pointer; `count` at most the normal keys).
    fn named(&self, pointers: &[u64], count: usize) -> Vec<u64> {
        let mut ids: Vec<u64> = Vec::with_capacity(count);
        for j in 0..count {
            let mut id = pointers[j % pointers.len()];
            while ids.contains(&id) {
                id = if id + 1 == self.keys_per_partition {
                    self.index_keys
                } else {
                    id + 1
                };
            }
            ids.push(id);
        }
        ids
    }
}

/// A fixed 64-bit mixing function (the SplitMix64 finaliser).
fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// Share `j` of `n` accesses divided equally over `k` partitions, the first ones taking the
/// remainder (5 over 2: 3, then 2).
fn share(n: usize, k: usize, j: usize) -> usize {
    n / k + usize::from(j < n % k)
}

/// `n` distinct ids drawn uniformly from `range` (which holds at least `n`).
fn distinct(n: usize, range: std::ops::Range<u64>, rng: &mut ChaCha8Rng) -> Vec<u64> {
    let mut ids = Vec::with_capacity(n);
    while ids.len() < n {
        let id = rng.random_range(range.clone());
        if !ids.contains(&id) {
            ids.push(id);
        }
    }
    ids
}

pub struct SyntheticSparkle {
    settings: Settings,
    layout: Layout,
    partitions: u32,
    /// Per node: the partitions it replicates.
    local: Vec<Vec<u32>>,
}

impl SyntheticSparkle {
    pub fn new(
        given: &BTreeMap<String, String>,
        placement: Arc<Placement>,
    ) -> Result<SyntheticSparkle, WorkloadError> {
        let settings = Settings::from_given(given)?;
        let partitions = placement.partition_count() as u32;
        if settings.multi_partition > 0.0 && (partitions as usize) < settings.partitions_per_mpt {
            return Err(WorkloadError::BadValue {
                key: "multi_partition".into(),
                value: settings.multi_partition.to_string(),
                why: format!(
                    "multi-partition transactions access {} partitions (partitions_per_mpt) and \
                     the cluster has {partitions}; set multi_partition=0",
                    settings.partitions_per_mpt
                ),
            });
        }
        let local = placement
            .nodes()
            .map(|n| placement.local_partitions(n).iter().map(|p| p.0).collect())
            .collect();
        let layout = Layout {
            index_keys: settings.index_keys,
            keys_per_partition: settings.keys_per_partition,
        };
        Ok(SyntheticSparkle {
            settings,
            layout,
            partitions,
            local,
        })
    }

    /// `k` distinct partitions for a transaction coordinated at `home`, the first one local to it
    /// when it replicates any.
    fn pick_partitions(&self, home: NodeId, k: usize, rng: &mut ChaCha8Rng) -> Vec<u32> {
        let mut parts = Vec::with_capacity(k);
        match self.local.get(home.0 as usize).filter(|l| !l.is_empty()) {
            Some(local) => parts.push(local[rng.random_range(0..local.len())]),
            None => parts.push(rng.random_range(0..self.partitions)),
        }
        while parts.len() < k {
            let p = rng.random_range(0..self.partitions);
            if !parts.contains(&p) {
                parts.push(p);
            }
        }
        parts
    }
}

impl Workload for SyntheticSparkle {
    fn name(&self) -> &'static str {
        "synthetic-sparkle"
    }

    fn next(&self, home: NodeId, rng: &mut ChaCha8Rng) -> Box<dyn Procedure> {
        let s = &self.settings;
        let dependent = rng.random::<f64>() < s.dependent;
        let multi = rng.random::<f64>() < s.multi_partition;
        let k = if multi { s.partitions_per_mpt } else { 1 };
        let (index, normal) = (
            0..self.layout.index_keys,
            self.layout.index_keys..self.layout.keys_per_partition,
        );
        let shares = self
            .pick_partitions(home, k, rng)
            .into_iter()
            .enumerate()
            .map(|(j, partition)| {
                let index_count = share(s.index_accesses, k, j);
                let normal_count = share(s.normal_accesses, k, j);
                let index_ids = distinct(index_count, index.clone(), rng);
                let new_pointers = (0..index_count)
                    .map(|_| rng.random_range(normal.clone()))
                    .collect();
                let normal_ids = if dependent {
                    Vec::new()
                } else {
                    distinct(normal_count, normal.clone(), rng)
                };
                Share {
                    partition,
                    index: index_ids,
                    new_pointers,
                    normal: normal_ids,
                    normal_count,
                }
            })
            .collect();
        Box::new(SparkleTxn {
            dependent,
            update_normal: !dependent || s.dependent_updates,
            layout: self.layout,
            shares,
            value_size: s.value_size,
            stamp: rng.random(),
        })
    }

    fn settings(&self) -> serde_json::Value {
        serde_json::to_value(&self.settings).expect("settings serialise")
    }
}

/// The keys of one transaction in one partition.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct Share {
    partition: u32,
    /// Index key ids, read then updated.
    index: Vec<u64>,
    /// The pointer each index key is updated to.
    new_pointers: Vec<u64>,
    /// Normal key ids of an independent transaction (empty for a dependent one).
    normal: Vec<u64>,
    /// Normal keys accessed in this partition.
    normal_count: usize,
}

/// `dependent` or `independent`: read the index keys, derive (dependent) or take (independent)
/// the normal keys, read them, then write the index keys' new pointers and, when updating, the
/// normal keys' counters plus one. Its fields are its one-shot arguments, but for `dependent`,
/// which the call's procedure name gives.
#[derive(Serialize, Deserialize)]
struct SparkleTxn {
    #[serde(skip)]
    dependent: bool,
    update_normal: bool,
    layout: Layout,
    shares: Vec<Share>,
    value_size: usize,
    stamp: u64,
}

/// The first 8 bytes of a value, big-endian; 0 when absent or too short.
fn counter_of(value: Option<&[u8]>) -> u64 {
    value
        .and_then(|v| v.first_chunk::<8>())
        .map_or(0, |b| u64::from_be_bytes(*b))
}

/// A `size`-byte value: `word`, then `stamp` if it fits, then zeros.
fn value_of(size: usize, word: u64, stamp: u64) -> Bytes {
    let mut value = vec![0u8; size];
    value[..8].copy_from_slice(&word.to_be_bytes());
    if let Some(room) = value.get_mut(8..16) {
        room.copy_from_slice(&stamp.to_be_bytes());
    }
    Bytes::from(value)
}

impl Procedure for SparkleTxn {
    fn name(&self) -> &'static str {
        if self.dependent {
            "dependent"
        } else {
            "independent"
        }
    }

    fn read_only(&self) -> bool {
        false
    }

    fn run<'a>(&'a mut self, ops: &'a mut dyn Ops) -> BoxFuture<'a, Result<(), TxnError>> {
        Box::pin(async move {
            let layout = self.layout;
            let mut pointers: Vec<Vec<u64>> = Vec::with_capacity(self.shares.len());
            for share in &self.shares {
                let mut read = Vec::with_capacity(share.index.len());
                for id in &share.index {
                    let value = ops.read(&Key::numbered(share.partition, *id)).await?;
                    read.push(layout.pointer(share.partition, *id, value.as_deref()));
                }
                pointers.push(read);
            }
            let mut normal: Vec<(Key, u64)> = Vec::new();
            for (share, read) in self.shares.iter().zip(&pointers) {
                let ids = if self.dependent {
                    layout.named(read, share.normal_count)
                } else {
                    share.normal.clone()
                };
                for id in ids {
                    let key = Key::numbered(share.partition, id);
                    let counter = counter_of(ops.read(&key).await?.as_deref());
                    normal.push((key, counter));
                }
            }
            for share in &self.shares {
                for (id, pointer) in share.index.iter().zip(&share.new_pointers) {
                    let value = value_of(self.value_size, *pointer, self.stamp);
                    ops.write(Key::numbered(share.partition, *id), Some(value))?;
                }
            }
            if self.update_normal {
                for (key, counter) in normal {
                    let value = value_of(self.value_size, counter.wrapping_add(1), self.stamp);
                    ops.write(key, Some(value))?;
                }
            }
            Ok(())
        })
    }

    fn call(&self) -> Option<ProcedureCall> {
        Some(ProcedureCall::encode(
            "synthetic-sparkle",
            self.name(),
            self,
        ))
    }
}

impl SparkleTxn {
    /// Why a transaction rebuilt from a call could not run as the workload's do, if it could
    /// not: what the settings guarantee a generated one, and the body relies on (a layout with
    /// normal keys, values that hold a pointer, a pointer for every index key, and a dependent
    /// share with index keys to name as many distinct normal keys as it takes).
    fn check(&self) -> Result<(), String> {
        let layout = self.layout;
        if layout.index_keys == 0 || layout.index_keys >= layout.keys_per_partition {
            return Err(format!(
                "{} index keys of {} per partition leave no index or no normal key",
                layout.index_keys, layout.keys_per_partition
            ));
        }
        if !(8..=MAX_VALUE_SIZE).contains(&self.value_size) {
            let size = self.value_size;
            return Err(format!("value_size {size} is outside 8..={MAX_VALUE_SIZE}"));
        }
        let (mut index, mut normal) = (0, 0);
        for share in &self.shares {
            if share.index.len() != share.new_pointers.len() {
                return Err("an index key without a new pointer".into());
            }
            index += share.index.len();
            normal += if self.dependent {
                share.normal_count
            } else {
                share.normal.len()
            };
            if self.dependent
                && share.normal_count > 0
                && (share.index.is_empty() || share.normal_count as u64 > layout.normal_keys())
            {
                return Err("a dependent share cannot name its normal keys".into());
            }
        }
        if index > MAX_ACCESSES || normal > MAX_ACCESSES {
            return Err(format!(
                "{index} index and {normal} normal accesses, at most {MAX_ACCESSES} each"
            ));
        }
        Ok(())
    }
}

/// The `synthetic-sparkle` procedure `call` names, rebuilt from its arguments.
pub(crate) fn instantiate(call: &ProcedureCall) -> Result<Box<dyn Procedure>, RequestError> {
    let dependent = match call.procedure.as_str() {
        "dependent" => true,
        "independent" => false,
        _ => return Err(crate::unknown_procedure(call)),
    };
    let mut txn: SparkleTxn = call.decode()?;
    txn.dependent = dependent;
    txn.check()
        .map_err(|why| RequestError::Invalid(format!("{}: {why}", call.procedure)))?;
    Ok(Box::new(txn))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Catalog;
    use crate::list_append::fake::{FakeOps, call_names};
    use augur_client::ProcedureCatalog;
    use augur_types::LatencyProfile;
    use rand::SeedableRng;
    use std::collections::BTreeSet;

    fn workload(
        nodes: usize,
        rf: usize,
        set: &[(&str, &str)],
    ) -> Result<SyntheticSparkle, WorkloadError> {
        let lan = LatencyProfile::named("lan").unwrap();
        let placement = Arc::new(Placement::ring(lan, nodes, rf).unwrap());
        let given = set
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        SyntheticSparkle::new(&given, placement)
    }

    /// The partition and id of a key printed as `partition/id`.
    fn parts(key: &str) -> (u32, u64) {
        let (p, i) = key.split_once('/').unwrap();
        (p.parse().unwrap(), i.parse().unwrap())
    }

    /// Keys as `(partition, id)`.
    type Keys = Vec<(u32, u64)>;

    /// Run `p` on `ops`; return the keys it read and wrote, in order.
    fn run(p: &mut dyn Procedure, ops: &mut FakeOps) -> (Keys, Keys) {
        ops.log.clear();
        ops.run(p).unwrap();
        let (mut reads, mut writes) = (Vec::new(), Vec::new());
        for line in &ops.log {
            let mut words = line.split(' ');
            let op = words.next().unwrap();
            let key = parts(words.next().unwrap());
            match op {
                "r" => reads.push(key),
                "w" => writes.push(key),
                other => panic!("unexpected log line {other}"),
            }
        }
        (reads, writes)
    }

    fn pointer_value(id: u64) -> Bytes {
        value_of(16, id, 0)
    }

    #[test]
    fn settings_are_echoed_with_their_defaults() {
        let w = workload(3, 1, &[]).unwrap();
        assert_eq!(w.name(), "synthetic-sparkle");
        assert_eq!(
            w.settings(),
            serde_json::json!({
                "contention": "low",
                "keys_per_partition": 1_000_000,
                "index_keys": 50_000,
                "index_accesses": 5,
                "normal_accesses": 5,
                "dependent": 0.1,
                "dependent_updates": false,
                "multi_partition": 0.1,
                "partitions_per_mpt": 2,
                "value_size": 16,
            })
        );
        let echoed = w.settings();
        let names: BTreeSet<&str> = echoed.as_object().unwrap().keys().map(|k| &**k).collect();
        assert_eq!(names, SETTINGS.iter().copied().collect());
    }

    #[test]
    fn presets_set_the_index_keys() {
        let medium = workload(3, 1, &[("contention", "medium")]).unwrap();
        assert_eq!(medium.settings.index_keys, 1_000);
        assert_eq!(medium.layout.index_keys, 1_000);
        let low = workload(3, 1, &[("contention", "low")]).unwrap();
        assert_eq!(low.settings.index_keys, 50_000);
        let over = workload(3, 1, &[("contention", "medium"), ("index_keys", "77")]).unwrap();
        assert_eq!(over.settings.index_keys, 77);
        assert_eq!(over.settings.contention, "medium");
        let e = workload(3, 1, &[("contention", "high")]).err().unwrap();
        assert!(e.to_string().contains("low, medium"), "{e}");
    }

    #[test]
    fn bad_settings_are_named() {
        let e = workload(3, 1, &[("hotspot", "3")]).err().unwrap();
        assert!(matches!(e, WorkloadError::UnknownSetting { .. }), "{e}");
        assert!(
            e.to_string().contains("contention, keys_per_partition"),
            "{e}"
        );
        for bad in [
            ("keys_per_partition", "1"),
            ("keys_per_partition", "many"),
            ("keys_per_partition", "50000"),
            ("index_keys", "0"),
            ("index_keys", "1000000"),
            ("index_keys", "4"),
            ("index_accesses", "0"),
            ("index_accesses", "65"),
            ("normal_accesses", "65"),
            ("dependent", "1.5"),
            ("dependent", "-0.1"),
            ("dependent", "NaN"),
            ("dependent_updates", "maybe"),
            ("multi_partition", "2"),
            ("partitions_per_mpt", "1"),
            ("partitions_per_mpt", "6"),
            ("value_size", "7"),
            ("value_size", "2000000"),
        ] {
            let e = workload(3, 1, &[bad]).err().unwrap();
            assert!(matches!(e, WorkloadError::BadValue { .. }), "{bad:?}: {e}");
            assert!(e.to_string().contains(bad.0), "{bad:?}: {e}");
        }
        // Too few normal keys for the normal accesses.
        let e = workload(3, 1, &[("keys_per_partition", "50004")])
            .err()
            .unwrap();
        assert!(e.to_string().contains("normal keys"), "{e}");
        assert!(workload(3, 1, &[("keys_per_partition", "50005")]).is_ok());
        // Multi-partition transactions need enough partitions.
        let e = workload(1, 1, &[]).err().unwrap();
        assert!(e.to_string().contains("multi_partition=0"), "{e}");
        assert!(workload(1, 1, &[("multi_partition", "0")]).is_ok());
        let three = [("partitions_per_mpt", "3")];
        assert!(workload(2, 1, &three).is_err());
        assert!(workload(3, 1, &three).is_ok());
    }

    #[test]
    fn initial_pointers_are_valid_and_stable() {
        let layout = Layout {
            index_keys: 10,
            keys_per_partition: 20,
        };
        let mut seen = BTreeSet::new();
        for p in 0..4 {
            for i in 0..10 {
                let ptr = layout.initial_pointer(p, i);
                assert!(layout.is_normal(ptr), "{p}/{i} -> {ptr}");
                assert_eq!(layout.pointer(p, i, None), ptr);
                assert_eq!(layout.pointer(p, i, Some(b"short")), ptr);
                assert_eq!(layout.pointer(p, i, Some(&pointer_value(3))), ptr);
                assert_eq!(layout.pointer(p, i, Some(&pointer_value(20))), ptr);
                assert_eq!(layout.pointer(p, i, Some(&pointer_value(12))), 12);
                seen.insert(ptr);
            }
        }
        assert!(seen.len() > 5, "initial pointers spread: {seen:?}");
        // Collisions take the next free normal key, wrapping round.
        assert_eq!(layout.named(&[19, 19, 12], 3), [19, 10, 12]);
        assert_eq!(layout.named(&[15], 3), [15, 16, 17]);
        assert_eq!(layout.named(&[15, 11], 1), [15]);
        assert_eq!(share(5, 2, 0), 3);
        assert_eq!(share(5, 2, 1), 2);
        assert_eq!(
            (0..3).map(|j| share(5, 3, j)).collect::<Vec<_>>(),
            [2, 2, 1]
        );
    }

    #[test]
    fn dependent_transactions_follow_the_index_values() {
        let set = [
            ("dependent", "1"),
            ("multi_partition", "0.5"),
            ("keys_per_partition", "1000"),
            ("index_keys", "100"),
        ];
        let w = workload(3, 1, &set).unwrap();
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let mut ops = FakeOps::default();
        // Point half of the index keys of every partition somewhere explicit; the rest are absent.
        for p in 0..3u32 {
            for i in (0..100).step_by(2) {
                let target = 100 + (i * 7 + u64::from(p) * 13) % 900;
                ops.store.insert(Key::numbered(p, i), pointer_value(target));
            }
        }
        for _ in 0..300 {
            let mut txn = w.next(NodeId(0), &mut rng);
            assert_eq!(txn.name(), "dependent");
            assert!(!txn.read_only());
            let before = ops.store.clone();
            let (reads, writes) = run(txn.as_mut(), &mut ops);
            assert_eq!(reads.len(), 10, "{reads:?}");
            let (index, normal) = reads.split_at(5);
            assert!(index.iter().all(|(_, i)| *i < 100), "{reads:?}");
            // Each normal key read is the one its partition's index key points to (in the
            // pointer order of the share), as stored before the transaction.
            let mut want = Vec::new();
            let partitions: Vec<u32> = {
                let mut v: Vec<u32> = index.iter().map(|(p, _)| *p).collect();
                v.dedup();
                v
            };
            for p in partitions {
                let pointers: Vec<u64> = index
                    .iter()
                    .filter(|(q, _)| *q == p)
                    .map(|(_, i)| {
                        let stored = before.get(&Key::numbered(p, *i));
                        match stored {
                            Some(v) => counter_of(Some(v)),
                            None => w.layout.initial_pointer(p, *i),
                        }
                    })
                    .collect();
                let mut taken: Vec<u64> = Vec::new();
                for ptr in pointers {
                    let mut id = ptr;
                    while taken.contains(&id) {
                        id = if id == 999 { 100 } else { id + 1 };
                    }
                    taken.push(id);
                    want.push((p, id));
                }
            }
            assert_eq!(normal, &want[..]);
            // By default dependent transactions only update their index keys.
            assert_eq!(writes, index, "{writes:?}");
            ops.commit();
            // Every index key now holds a valid pointer.
            for (p, i) in index {
                let v = &ops.store[&Key::numbered(*p, *i)];
                assert_eq!(v.len(), 16);
                assert!(w.layout.is_normal(counter_of(Some(v))));
            }
        }
    }

    #[test]
    fn dependent_keys_change_when_the_index_changes() {
        let set = [("dependent", "1"), ("multi_partition", "0")];
        let w = workload(3, 1, &set).unwrap();
        let mut txn = w.next(NodeId(1), &mut ChaCha8Rng::seed_from_u64(4));
        let mut empty = FakeOps::default();
        let (reads, _) = run(txn.as_mut(), &mut empty);
        let (index, normal) = reads.split_at(5);
        assert!(reads.iter().all(|(p, _)| *p == 1), "{reads:?}");
        let expected: Vec<(u32, u64)> = index
            .iter()
            .map(|(p, i)| (*p, w.layout.initial_pointer(*p, *i)))
            .collect();
        assert_eq!(normal, &expected[..]);
        // Repoint the index keys: the same transaction now reads other normal keys.
        let mut moved = FakeOps::default();
        for (n, (p, i)) in index.iter().enumerate() {
            let target = 900_000 + n as u64;
            moved
                .store
                .insert(Key::numbered(*p, *i), pointer_value(target));
        }
        let (reads, _) = run(txn.as_mut(), &mut moved);
        let targets: Vec<(u32, u64)> = (0..5).map(|n| (1, 900_000 + n)).collect();
        assert_eq!(&reads[5..], &targets[..]);
        // With dependent_updates, those normal keys are written too.
        let set = [("dependent", "1"), ("dependent_updates", "true")];
        let w = workload(3, 1, &set).unwrap();
        let mut txn = w.next(NodeId(0), &mut ChaCha8Rng::seed_from_u64(4));
        let mut ops = FakeOps::default();
        let (reads, writes) = run(txn.as_mut(), &mut ops);
        assert_eq!(reads, writes);
        ops.commit();
        for (p, i) in &reads[5..] {
            assert_eq!(counter_of(Some(&ops.store[&Key::numbered(*p, *i)])), 1);
        }
    }

    #[test]
    fn independent_transactions_ignore_the_index_values() {
        let set = [("dependent", "0"), ("multi_partition", "0.5")];
        let w = workload(4, 1, &set).unwrap();
        for seed in 0..50 {
            let mut a = w.next(NodeId(2), &mut ChaCha8Rng::seed_from_u64(seed));
            let mut b = w.next(NodeId(2), &mut ChaCha8Rng::seed_from_u64(seed));
            assert_eq!(a.name(), "independent");
            let mut empty = FakeOps::default();
            let (reads_a, writes_a) = run(a.as_mut(), &mut empty);
            let mut pointed = FakeOps::default();
            for (p, i) in &reads_a[..5] {
                let v = pointer_value(600_000 + *i % 1000);
                pointed.store.insert(Key::numbered(*p, *i), v);
            }
            let (reads_b, writes_b) = run(b.as_mut(), &mut pointed);
            assert_eq!(reads_a, reads_b);
            assert_eq!(writes_a, writes_b);
            // Reads and updates all its keys, index keys first.
            assert_eq!(reads_a, writes_a);
            assert!(reads_a[..5].iter().all(|(_, i)| *i < 50_000));
            assert!(reads_a[5..].iter().all(|(_, i)| *i >= 50_000));
            let distinct: BTreeSet<_> = reads_a.iter().collect();
            assert_eq!(distinct.len(), 10);
        }
        // Updates write fresh pointers and counters plus one.
        let mut txn = w.next(NodeId(0), &mut ChaCha8Rng::seed_from_u64(9));
        let mut ops = FakeOps::default();
        let (reads, _) = run(txn.as_mut(), &mut ops);
        ops.commit();
        run(txn.as_mut(), &mut ops);
        ops.commit();
        for (p, i) in &reads {
            let v = &ops.store[&Key::numbered(*p, *i)];
            if *i < 50_000 {
                assert!(w.layout.is_normal(counter_of(Some(v))));
            } else {
                assert_eq!(counter_of(Some(v)), 2);
            }
        }
    }

    #[test]
    fn multi_partition_transactions_split_their_accesses() {
        for dependent in ["0", "1"] {
            let set = [("multi_partition", "1"), ("dependent", dependent)];
            let w = workload(5, 1, &set).unwrap();
            let mut rng = ChaCha8Rng::seed_from_u64(2);
            let mut seconds = BTreeSet::new();
            for _ in 0..300 {
                let mut txn = w.next(NodeId(3), &mut rng);
                let (reads, _) = run(txn.as_mut(), &mut FakeOps::default());
                let (index, normal) = reads.split_at(5);
                let first = index[0].0;
                assert_eq!(first, 3, "the first partition is home's: {reads:?}");
                let second = index[3].0;
                assert_ne!(first, second);
                seconds.insert(second);
                let in_first = |keys: &[(u32, u64)]| keys.iter().filter(|k| k.0 == first).count();
                let in_second = |keys: &[(u32, u64)]| keys.iter().filter(|k| k.0 == second).count();
                assert_eq!((in_first(index), in_second(index)), (3, 2), "{reads:?}");
                assert_eq!((in_first(normal), in_second(normal)), (3, 2), "{reads:?}");
            }
            assert_eq!(seconds, BTreeSet::from([0, 1, 2, 4]));
        }
        // Three partitions: 2 + 2 + 1, all distinct.
        let set = [("multi_partition", "1"), ("partitions_per_mpt", "3")];
        let w = workload(4, 1, &set).unwrap();
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        for _ in 0..100 {
            let (reads, _) = run(
                w.next(NodeId(0), &mut rng).as_mut(),
                &mut FakeOps::default(),
            );
            let counts: Vec<usize> = {
                let mut order: Vec<u32> = reads[..5].iter().map(|k| k.0).collect();
                order.dedup();
                assert_eq!(order.len(), 3, "{reads:?}");
                assert_eq!(order[0], 0);
                order
                    .iter()
                    .map(|p| reads[..5].iter().filter(|k| k.0 == *p).count())
                    .collect()
            };
            assert_eq!(counts, [2, 2, 1]);
        }
    }

    #[test]
    fn single_partition_transactions_stay_home() {
        let set = [("multi_partition", "0"), ("dependent", "0.5")];
        // Without replication, a node's transactions use its own partition.
        let w = workload(4, 1, &set).unwrap();
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        for home in 0..4 {
            for _ in 0..100 {
                let mut txn = w.next(NodeId(home), &mut rng);
                let (reads, writes) = run(txn.as_mut(), &mut FakeOps::default());
                assert!(
                    reads.iter().chain(&writes).all(|k| k.0 == home),
                    "{reads:?}"
                );
            }
        }
        // With two replicas, any partition the node replicates, one per transaction.
        let w = workload(4, 2, &set).unwrap();
        let mut used = BTreeSet::new();
        for _ in 0..200 {
            let (reads, _) = run(
                w.next(NodeId(1), &mut rng).as_mut(),
                &mut FakeOps::default(),
            );
            let partitions: BTreeSet<u32> = reads.iter().map(|k| k.0).collect();
            assert_eq!(partitions.len(), 1, "{reads:?}");
            used.extend(partitions);
        }
        assert_eq!(used, BTreeSet::from([0, 1]));
    }

    #[test]
    fn fractions_are_respected() {
        let set = [("dependent", "0.3"), ("multi_partition", "0.2")];
        let w = workload(3, 1, &set).unwrap();
        let mut rng = ChaCha8Rng::seed_from_u64(6);
        let (mut dependent, mut multi) = (0, 0);
        let total = 4000;
        for _ in 0..total {
            let mut txn = w.next(NodeId(0), &mut rng);
            dependent += usize::from(txn.name() == "dependent");
            let (reads, _) = run(txn.as_mut(), &mut FakeOps::default());
            let partitions: BTreeSet<u32> = reads.iter().map(|k| k.0).collect();
            multi += usize::from(partitions.len() > 1);
        }
        let dependent = dependent as f64 / f64::from(total);
        let multi = multi as f64 / f64::from(total);
        assert!((0.27..0.33).contains(&dependent), "{dependent}");
        assert!((0.17..0.23).contains(&multi), "{multi}");
        for (d, m) in [("0", "0"), ("1", "1")] {
            let w = workload(3, 1, &[("dependent", d), ("multi_partition", m)]).unwrap();
            for _ in 0..200 {
                let mut txn = w.next(NodeId(0), &mut rng);
                assert_eq!(txn.name() == "dependent", d == "1");
                let (reads, _) = run(txn.as_mut(), &mut FakeOps::default());
                let partitions: BTreeSet<u32> = reads.iter().map(|k| k.0).collect();
                assert_eq!(partitions.len() > 1, m == "1");
            }
        }
    }

    #[test]
    fn calls_replay_on_the_node() {
        // Few keys, so that dependent transactions follow pointers earlier ones wrote.
        let small = [("keys_per_partition", "60"), ("index_keys", "20")];
        let w = workload(3, 2, &small).unwrap();
        crate::testing::assert_calls_replay(&w, 3, 400);
        assert_eq!(call_names(&w, 200), ["dependent", "independent"]);
        let set = [
            small[0],
            small[1],
            ("dependent", "0.6"),
            ("dependent_updates", "true"),
            ("multi_partition", "0.5"),
            ("partitions_per_mpt", "3"),
        ];
        crate::testing::assert_calls_replay(&workload(3, 1, &set).unwrap(), 3, 300);
    }

    #[test]
    fn bad_calls_are_refused() {
        crate::testing::assert_refuses_bad_calls(
            "synthetic-sparkle",
            "semi-dependent",
            &["dependent", "independent"],
        );
        // Arguments no workload would generate, which the body could not run.
        let w = workload(3, 1, &[("dependent", "1"), ("multi_partition", "0")]).unwrap();
        let good = || {
            let txn = w.next(NodeId(0), &mut ChaCha8Rng::seed_from_u64(3));
            let call = txn.call().unwrap();
            let mut txn: SparkleTxn = call.decode().unwrap();
            txn.dependent = true;
            txn
        };
        type Break = fn(&mut SparkleTxn);
        let breaks: [(&str, Break); 5] = [
            ("no normal key", |t| {
                t.layout.index_keys = t.layout.keys_per_partition
            }),
            ("no index or", |t| t.layout.index_keys = 0),
            ("value_size 4", |t| t.value_size = 4),
            ("without a new pointer", |t| {
                t.shares[0].new_pointers.clear()
            }),
            ("cannot name its normal keys", |t| {
                t.shares[0].index.clear();
                t.shares[0].new_pointers.clear();
            }),
        ];
        for (why, break_it) in breaks {
            let mut txn = good();
            assert!(txn.check().is_ok());
            break_it(&mut txn);
            let e = Catalog.instantiate(&txn.call().unwrap()).err().unwrap();
            assert!(matches!(e, RequestError::Invalid(_)), "{why}: {e}");
            assert!(e.to_string().contains(why), "{why}: {e}");
        }
    }
}
