//! `ycsb-t`: YCSB ported to a transactional key-value store, as the SSS evaluation runs it
//! (Kishi et al., "SSS: Scalable Key-Value Store with External Consistent and Abort-free
//! Read-only Transactions", ICDCS 2019, §V).
//!
//! There are two transaction profiles (§V: "update, where two keys are read and written, and
//! read-only transactions, where two or more keys are accessed"):
//!
//! * `update` reads `update_keys` distinct keys (2, as in the paper), then writes every one of them
//!   back with a fresh value, but for the last `update_read_only_keys` of them (0 by default),
//!   which it only reads;
//! * `read-only` reads `read_only_keys` distinct keys and writes nothing.
//!
//! A transaction is read-only with probability `read_only_fraction`. Transactions draw their keys
//! from `keys` shared keys; key index `i` lives in partition `i mod P` (P partitions) as
//! `Key::numbered(i mod P, i)`, so it prints as `partition/index`.
//!
//! # Settings and where their defaults come from
//!
//! * `keys` = 10,000. The paper uses "two configurations for the total number of shared keys: 5k
//!   and 10k" (Fig. 3 shows both; Figs. 4 and 6 use 5k). 10k is the lower-contention one.
//! * `read_only_fraction` = 0.8. The paper varies it over 20%, 50% and 80% (Fig. 3). 80% is the
//!   configuration it calls "the most relevant to SSS" and reuses for Figs. 7 and 8, and its
//!   conclusions claim speedups "in read-dominated workloads".
//! * `read_only_keys` = 2, within 2..=16. Figs. 3–7 only say "two or more keys"; Fig. 8 grows the
//!   read-only transactions "from 2 to 16" reads, so 2 is its starting point, and the paper notes
//!   that "in YCSB transaction size is small".
//! * `update_keys` = 2, within 1..=16. The paper fixes it at 2; other sizes are augur's extension.
//! * `update_read_only_keys` = 0, below `update_keys`: keys an update reads and does not write.
//!   Not SSS's; DST's cost study (§5.4, Fig. 15(b)) varies the share of the 10 keys of a
//!   read-write transaction that are only read, since DST then installs its timestamp into
//!   tuples the transaction did not lock.
//! * `locality` = 0. The paper's definition (Fig. 7): "50% of keys access locality, meaning the
//!   probability that a key is stored by the node where the transaction is executing (local
//!   node), and 50% of uniform access". So each key, independently, is drawn with probability
//!   `locality` from the keys the coordinator's node stores, and otherwise uniformly from *all*
//!   keys (which may happen to be local too). With `locality` = 0 access is uniform, which is what
//!   every experiment but Fig. 7 uses (Fig. 6: "Accesses are not local"); Fig. 7 uses 0.5.
//! * `local_keys` = `replicated`: the keys "stored by the node" are those of every partition it
//!   replicates, master or slave. The paper's own example contradicts this slightly: with 20
//!   nodes, 5k keys and two replicas per key, "a client on a node can select its accessed keys
//!   among 250 keys", which is 5k / 20, the keys of the partitions the node *masters* (a node
//!   stores 500). `local_keys=mastered` reproduces that reading.
//! * `distribution` = `uniform`: "Unless otherwise stated, transactions select accessed objects
//!   randomly with uniform distribution", and nothing else is ever stated. `zipfian` is augur's
//!   extension: rank `r` (0-based) is drawn with probability proportional to `1 / (r + 1)^θ`, with
//!   `θ` = `zipf_theta` (default 0.99, YCSB's constant), exactly, by inverting the cumulative
//!   weights with a binary search (8 bytes of table per key, so at most 10 million keys). Rank `r`
//!   over all keys is key index `r`, so the hottest keys are spread round-robin over the
//!   partitions; a local draw ranks the node's own keys the same way, row by row over its
//!   partitions.
//! * `value_size` = 16 bytes. The paper does not say. YCSB's core workloads store 1 KB records (10
//!   fields of 100 bytes); augur keeps values as small as `synthetic-str` so that runs measure
//!   concurrency control rather than copying (`value_size=1000` gives YCSB-sized records). A value
//!   is an 8-byte big-endian counter, then the writing transaction's random stamp (when there is
//!   room), then zeros; an update writes each key's counter plus one.
//! * `load` = true. YCSB loads every record before running; the paper does not say whether SSS
//!   did. With `load`, every key is written (counter 0) before the warm-up, by transactions of up
//!   to 100 keys of one partition each; without it, absent keys read as counter 0.
//!
//! # What the harness sets, and what the paper leaves unstated
//!
//! The cluster side of §V is set outside the workload: 10 closed-loop clients per node, co-located
//! with the nodes (`--clients`); 5 to 20 nodes; each key replicated on two nodes (Figs. 3, 4, 7)
//! or not replicated (Fig. 6, "we disable replication for all competitors"); results averaged
//! over 5 trials. The paper does not state: the value size or number of fields; the read-only
//! size in Figs. 3–7 ("two or more"); whether a transaction's keys are distinct (augur draws
//! distinct keys); the order of operations (augur reads every key in drawn order, then writes
//! them); whether locality applies per key or per transaction (augur: per key, "the probability
//! that a key is stored by the node"); which keys count as a node's own (see `local_keys`);
//! whether the store is preloaded; warm-up and measurement durations; and think time (none:
//! closed loop).

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
    "keys",
    "read_only_fraction",
    "read_only_keys",
    "update_keys",
    "update_read_only_keys",
    "locality",
    "local_keys",
    "distribution",
    "zipf_theta",
    "value_size",
    "load",
];

/// The most keys one transaction touches.
const MAX_KEYS: usize = 16;
/// The most keys `distribution=zipfian` accepts (its table takes 8 bytes a key).
const ZIPF_MAX_KEYS: u64 = 10_000_000;
/// The largest value accepted.
const MAX_VALUE_SIZE: usize = 1 << 20;
/// Keys written by one loading transaction.
const LOAD_BATCH: usize = 100;

/// Every setting in force; serialised as-is into results.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Settings {
    /// Shared keys, spread round-robin over the partitions.
    pub keys: u64,
    /// The share of transactions that are read-only.
    pub read_only_fraction: f64,
    /// Keys read by a read-only transaction.
    pub read_only_keys: usize,
    /// Keys read by an update transaction, all written but the last `update_read_only_keys`.
    pub update_keys: usize,
    /// How many of an update's keys it only reads.
    pub update_read_only_keys: usize,
    /// Probability that a key is drawn from the coordinator's own keys rather than from all keys.
    pub locality: f64,
    /// Which keys are a node's own: `replicated` (every partition it replicates) or `mastered`.
    pub local_keys: String,
    /// `uniform` or `zipfian`.
    pub distribution: String,
    /// The Zipfian exponent (used only with `distribution=zipfian`).
    pub zipf_theta: f64,
    /// Bytes per value (at least 8, for the counter).
    pub value_size: usize,
    /// Write every key before the warm-up.
    pub load: bool,
}

impl Settings {
    fn from_given(given: &BTreeMap<String, String>) -> Result<Settings, WorkloadError> {
        reject_unknown("ycsb-t", SETTINGS, given)?;
        let get = |key: &str, default: &str| given.get(key).cloned().unwrap_or(default.into());
        let settings = Settings {
            keys: parse("keys", &get("keys", "10000"))?,
            read_only_fraction: parse("read_only_fraction", &get("read_only_fraction", "0.8"))?,
            read_only_keys: parse("read_only_keys", &get("read_only_keys", "2"))?,
            update_keys: parse("update_keys", &get("update_keys", "2"))?,
            update_read_only_keys: parse(
                "update_read_only_keys",
                &get("update_read_only_keys", "0"),
            )?,
            locality: parse("locality", &get("locality", "0"))?,
            local_keys: get("local_keys", "replicated"),
            distribution: get("distribution", "uniform"),
            zipf_theta: parse("zipf_theta", &get("zipf_theta", "0.99"))?,
            value_size: parse("value_size", &get("value_size", "16"))?,
            load: parse("load", &get("load", "true"))?,
        };
        if settings.keys == 0 {
            return Err(bad("keys", "0", "must be at least 1"));
        }
        for (k, v) in [
            ("read_only_fraction", settings.read_only_fraction),
            ("locality", settings.locality),
        ] {
            if !(0.0..=1.0).contains(&v) {
                return Err(bad(k, v.to_string(), "must be within 0..=1"));
            }
        }
        if !(2..=MAX_KEYS).contains(&settings.read_only_keys) {
            let why = format!("must be within 2..={MAX_KEYS}");
            return Err(bad(
                "read_only_keys",
                settings.read_only_keys.to_string(),
                &why,
            ));
        }
        if !(1..=MAX_KEYS).contains(&settings.update_keys) {
            let why = format!("must be within 1..={MAX_KEYS}");
            return Err(bad("update_keys", settings.update_keys.to_string(), &why));
        }
        if settings.update_read_only_keys >= settings.update_keys {
            let why = format!(
                "an update writes at least one of its {} keys",
                settings.update_keys
            );
            let value = settings.update_read_only_keys.to_string();
            return Err(bad("update_read_only_keys", value, &why));
        }
        let most = settings.read_only_keys.max(settings.update_keys) as u64;
        if settings.keys < most {
            let why = format!("a transaction needs {most} distinct keys");
            return Err(bad("keys", settings.keys.to_string(), &why));
        }
        if !["replicated", "mastered"].contains(&settings.local_keys.as_str()) {
            let why = "valid values: replicated, mastered";
            return Err(bad("local_keys", settings.local_keys.clone(), why));
        }
        match settings.distribution.as_str() {
            "uniform" => {}
            "zipfian" if settings.keys > ZIPF_MAX_KEYS => {
                let why = format!("distribution=zipfian supports at most {ZIPF_MAX_KEYS} keys");
                return Err(bad("keys", settings.keys.to_string(), &why));
            }
            "zipfian" => {}
            other => {
                let why = "valid values: uniform, zipfian";
                return Err(bad("distribution", other, why));
            }
        }
        // Beyond 2, nearly every draw hits a handful of keys and drawing 16 distinct ones would
        // take unboundedly many tries.
        if !(settings.zipf_theta > 0.0 && settings.zipf_theta <= 2.0) {
            let why = "must be within (0, 2]";
            return Err(bad("zipf_theta", settings.zipf_theta.to_string(), why));
        }
        if !(8..=MAX_VALUE_SIZE).contains(&settings.value_size) {
            let why = format!("must be within 8..={MAX_VALUE_SIZE} (the counter takes 8 bytes)");
            return Err(bad("value_size", settings.value_size.to_string(), &why));
        }
        Ok(settings)
    }
}

/// The keys one node counts as its own: those of partitions `parts` (ascending). They are ranked
/// row by row: rank `r` is key index `(r / parts.len()) * P + parts[r % parts.len()]`. Every row
/// but the last holds a key of each partition; the last holds keys only for partitions below
/// `keys mod P`, a prefix of `parts`, so ranks `0..len` name exactly the node's keys.
struct Pool {
    parts: Vec<u64>,
    len: u64,
}

impl Pool {
    fn new(parts: Vec<u64>, partitions: u64, keys: u64) -> Pool {
        let tail = parts.iter().filter(|p| **p < keys % partitions).count() as u64;
        let len = keys / partitions * parts.len() as u64 + tail;
        Pool { parts, len }
    }

    /// The key index of rank `rank` (below `len`).
    fn index(&self, rank: u64, partitions: u64) -> u64 {
        let width = self.parts.len() as u64;
        rank / width * partitions + self.parts[(rank % width) as usize]
    }
}

/// Exact Zipfian ranks: rank `r` of `n` is drawn with probability `(r + 1)^-θ / Σ (i + 1)^-θ`.
/// `cumulative[r]` holds the weight of ranks `0..=r`, so the prefix of length `n` serves every
/// `n` up to the table's size; a draw inverts it by binary search.
struct Zipf {
    cumulative: Vec<f64>,
}

impl Zipf {
    fn new(n: u64, theta: f64) -> Zipf {
        let mut total = 0.0;
        let cumulative = (1..=n)
            .map(|i| {
                total += (i as f64).powf(-theta);
                total
            })
            .collect();
        Zipf { cumulative }
    }

    /// A rank in `0..n`, for `1 <= n <=` the table's size.
    fn draw(&self, n: u64, rng: &mut ChaCha8Rng) -> u64 {
        let weights = &self.cumulative[..n as usize];
        let u = rng.random::<f64>() * weights[weights.len() - 1];
        let rank = weights.partition_point(|c| *c <= u) as u64;
        rank.min(n - 1)
    }
}

pub struct YcsbT {
    settings: Settings,
    partitions: u64,
    /// Per node: the keys it counts as its own (`local_keys`).
    pools: Vec<Pool>,
    /// Present with `distribution=zipfian`.
    zipf: Option<Zipf>,
}

impl YcsbT {
    pub fn new(
        given: &BTreeMap<String, String>,
        placement: Arc<Placement>,
    ) -> Result<YcsbT, WorkloadError> {
        let settings = Settings::from_given(given)?;
        let partitions = placement.partition_count() as u64;
        let pools: Vec<Pool> = placement
            .nodes()
            .map(|n| {
                let parts = if settings.local_keys == "mastered" {
                    placement.mastered_by(n).map(|p| u64::from(p.0)).collect()
                } else {
                    let local = placement.local_partitions(n).iter();
                    local.map(|p| u64::from(p.0)).collect()
                };
                Pool::new(parts, partitions, settings.keys)
            })
            .collect();
        let most = settings.read_only_keys.max(settings.update_keys) as u64;
        let fewest = pools.iter().map(|p| p.len).min().unwrap_or(0);
        if settings.locality > 0.0 && fewest < most {
            return Err(WorkloadError::BadValue {
                key: "keys".into(),
                value: settings.keys.to_string(),
                why: format!(
                    "with locality > 0 every node needs {most} keys of its own, and one has \
                     {fewest} (local_keys={}, {} keys over {partitions} partitions)",
                    settings.local_keys, settings.keys
                ),
            });
        }
        let zipf = (settings.distribution == "zipfian")
            .then(|| Zipf::new(settings.keys, settings.zipf_theta));
        Ok(YcsbT {
            settings,
            partitions,
            pools,
            zipf,
        })
    }

    /// The key with index `index`: partition `index mod P`.
    fn key(&self, index: u64) -> Key {
        Key::numbered((index % self.partitions) as u32, index)
    }

    /// A rank in `0..n` under the configured distribution.
    fn rank(&self, n: u64, rng: &mut ChaCha8Rng) -> u64 {
        match &self.zipf {
            None => rng.random_range(0..n),
            Some(zipf) => zipf.draw(n, rng),
        }
    }

    /// One key index for a transaction coordinated at `home`.
    fn pick(&self, home: NodeId, rng: &mut ChaCha8Rng) -> u64 {
        let locality = self.settings.locality;
        if locality > 0.0 && rng.random::<f64>() < locality {
            let pool = &self.pools[home.0 as usize];
            pool.index(self.rank(pool.len, rng), self.partitions)
        } else {
            self.rank(self.settings.keys, rng)
        }
    }

    /// `n` distinct keys for a transaction coordinated at `home`.
    fn draw_keys(&self, n: usize, home: NodeId, rng: &mut ChaCha8Rng) -> Vec<Key> {
        let mut drawn = [0u64; MAX_KEYS];
        let mut len = 0;
        while len < n {
            let index = self.pick(home, rng);
            if !drawn[..len].contains(&index) {
                drawn[len] = index;
                len += 1;
            }
        }
        drawn[..n].iter().map(|i| self.key(*i)).collect()
    }
}

impl Workload for YcsbT {
    fn name(&self) -> &'static str {
        "ycsb-t"
    }

    fn next(&self, home: NodeId, rng: &mut ChaCha8Rng) -> Box<dyn Procedure> {
        let s = &self.settings;
        if rng.random::<f64>() < s.read_only_fraction {
            Box::new(ReadOnly {
                keys: self.draw_keys(s.read_only_keys, home, rng),
            })
        } else {
            Box::new(Update {
                keys: self.draw_keys(s.update_keys, home, rng),
                only_read: s.update_read_only_keys,
                value_size: s.value_size,
                stamp: rng.random(),
            })
        }
    }

    fn settings(&self) -> serde_json::Value {
        serde_json::to_value(&self.settings).expect("settings serialise")
    }

    fn load(&self) -> Vec<Box<dyn Procedure>> {
        if !self.settings.load {
            return Vec::new();
        }
        let mut loads: Vec<Box<dyn Procedure>> = Vec::new();
        for partition in 0..self.partitions.min(self.settings.keys) {
            let indices: Vec<u64> = (partition..self.settings.keys)
                .step_by(self.partitions as usize)
                .collect();
            for batch in indices.chunks(LOAD_BATCH) {
                // Counter 0 in every key.
                let keys: Vec<Key> = batch.iter().map(|i| self.key(*i)).collect();
                let value_size = self.settings.value_size;
                loads.push(crate::load_rows(move || {
                    keys.iter()
                        .map(|k| (k.clone(), value_of(value_size, 0, 0)))
                        .collect()
                }));
            }
        }
        loads
    }
}

/// The counter a stored value holds: its first 8 bytes, big-endian; 0 when absent or too short.
fn counter_of(value: Option<&[u8]>) -> u64 {
    value
        .and_then(|v| v.first_chunk::<8>())
        .map_or(0, |b| u64::from_be_bytes(*b))
}

/// A `size`-byte value: `counter`, then `stamp` if it fits, then zeros.
fn value_of(size: usize, counter: u64, stamp: u64) -> Bytes {
    let mut value = vec![0u8; size];
    value[..8].copy_from_slice(&counter.to_be_bytes());
    if let Some(room) = value.get_mut(8..16) {
        room.copy_from_slice(&stamp.to_be_bytes());
    }
    Bytes::from(value)
}

/// `update`: read every key, then write each back with its counter plus one, but for the last
/// `only_read`. Its fields are its one-shot arguments.
#[derive(Serialize, Deserialize)]
struct Update {
    keys: Vec<Key>,
    #[serde(default)]
    only_read: usize,
    value_size: usize,
    stamp: u64,
}

impl Procedure for Update {
    fn name(&self) -> &'static str {
        "update"
    }

    fn read_only(&self) -> bool {
        false
    }

    fn run<'a>(&'a mut self, ops: &'a mut dyn Ops) -> BoxFuture<'a, Result<(), TxnError>> {
        Box::pin(async move {
            let mut counters = [0u64; MAX_KEYS];
            for (counter, key) in counters.iter_mut().zip(&self.keys) {
                *counter = counter_of(ops.read(key).await?.as_deref());
            }
            let written = self.keys.len().saturating_sub(self.only_read);
            for (key, counter) in self.keys[..written].iter().zip(counters) {
                let value = value_of(self.value_size, counter.wrapping_add(1), self.stamp);
                ops.write(key.clone(), Some(value))?;
            }
            Ok(())
        })
    }

    fn call(&self) -> Option<ProcedureCall> {
        Some(ProcedureCall::encode("ycsb-t", self.name(), self))
    }
}

/// `read-only`: read every key. Its field is its one-shot argument.
#[derive(Serialize, Deserialize)]
struct ReadOnly {
    keys: Vec<Key>,
}

impl Procedure for ReadOnly {
    fn name(&self) -> &'static str {
        "read-only"
    }

    fn read_only(&self) -> bool {
        true
    }

    fn run<'a>(&'a mut self, ops: &'a mut dyn Ops) -> BoxFuture<'a, Result<(), TxnError>> {
        Box::pin(async move {
            for key in &self.keys {
                ops.read(key).await?;
            }
            Ok(())
        })
    }

    fn call(&self) -> Option<ProcedureCall> {
        Some(ProcedureCall::encode("ycsb-t", self.name(), self))
    }
}

/// Refuse a call of `procedure` over more keys than a transaction takes (an `update` keeps its
/// counters in a fixed array of that size).
fn check_keys(procedure: &str, keys: &[Key]) -> Result<(), RequestError> {
    if keys.len() > MAX_KEYS {
        let why = format!("{procedure}: {} keys, at most {MAX_KEYS}", keys.len());
        return Err(RequestError::Invalid(why));
    }
    Ok(())
}

/// The `ycsb-t` procedure `call` names, rebuilt from its arguments.
pub(crate) fn instantiate(call: &ProcedureCall) -> Result<Box<dyn Procedure>, RequestError> {
    match call.procedure.as_str() {
        "update" => {
            let p: Update = call.decode()?;
            check_keys("update", &p.keys)?;
            if !(8..=MAX_VALUE_SIZE).contains(&p.value_size) {
                let why = format!(
                    "update: value_size {} is outside 8..={MAX_VALUE_SIZE}",
                    p.value_size
                );
                return Err(RequestError::Invalid(why));
            }
            Ok(Box::new(p))
        }
        "read-only" => {
            let p: ReadOnly = call.decode()?;
            check_keys("read-only", &p.keys)?;
            Ok(Box::new(p))
        }
        _ => Err(crate::unknown_procedure(call)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Catalog;
    use crate::list_append::fake::{FakeOps, call_names};
    use augur_client::ProcedureCatalog;
    use augur_types::{LatencyProfile, PartitionId};
    use rand::SeedableRng;
    use std::collections::BTreeSet;

    fn placement(nodes: usize, rf: usize) -> Arc<Placement> {
        let lan = LatencyProfile::named("lan").unwrap();
        Arc::new(Placement::ring(lan, nodes, rf).unwrap())
    }

    fn workload(nodes: usize, rf: usize, set: &[(&str, &str)]) -> Result<YcsbT, WorkloadError> {
        let given = set
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        YcsbT::new(&given, placement(nodes, rf))
    }

    /// The partition and index of a key printed as `partition/index`.
    fn parts(key: &str) -> (u32, u64) {
        let (p, i) = key.split_once('/').unwrap();
        (p.parse().unwrap(), i.parse().unwrap())
    }

    /// Run `p` on `ops`; return the keys it read and wrote, in order.
    fn run(p: &mut dyn Procedure, ops: &mut FakeOps) -> (Vec<String>, Vec<String>) {
        ops.log.clear();
        ops.run(p).unwrap();
        let (mut reads, mut writes) = (Vec::new(), Vec::new());
        for line in &ops.log {
            let mut words = line.split(' ');
            let op = words.next().unwrap();
            let key = words.next().unwrap().to_string();
            match op {
                "r" => reads.push(key),
                "w" => writes.push(key),
                other => panic!("unexpected log line {other}"),
            }
        }
        (reads, writes)
    }

    #[test]
    fn settings_are_echoed_with_their_defaults() {
        let w = workload(3, 1, &[]).unwrap();
        assert_eq!(w.name(), "ycsb-t");
        assert_eq!(
            w.settings(),
            serde_json::json!({
                "keys": 10000,
                "read_only_fraction": 0.8,
                "read_only_keys": 2,
                "update_keys": 2,
                "update_read_only_keys": 0,
                "locality": 0.0,
                "local_keys": "replicated",
                "distribution": "uniform",
                "zipf_theta": 0.99,
                "value_size": 16,
                "load": true,
            })
        );
        let echoed = w.settings();
        let names: BTreeSet<&str> = echoed.as_object().unwrap().keys().map(|k| &**k).collect();
        assert_eq!(names, SETTINGS.iter().copied().collect());
    }

    #[test]
    fn bad_settings_are_named() {
        let e = workload(3, 1, &[("hotspot", "3")]).err().unwrap();
        assert!(matches!(e, WorkloadError::UnknownSetting { .. }), "{e}");
        assert!(e.to_string().contains("keys, read_only_fraction"), "{e}");
        for bad in [
            ("keys", "0"),
            ("keys", "many"),
            ("keys", "1"),
            ("read_only_fraction", "1.5"),
            ("read_only_fraction", "-0.1"),
            ("read_only_fraction", "NaN"),
            ("locality", "2"),
            ("read_only_keys", "1"),
            ("read_only_keys", "17"),
            ("update_keys", "0"),
            ("update_keys", "17"),
            ("update_read_only_keys", "2"),
            ("local_keys", "nearby"),
            ("distribution", "pareto"),
            ("zipf_theta", "0"),
            ("zipf_theta", "2.5"),
            ("value_size", "7"),
            ("value_size", "2000000"),
            ("load", "maybe"),
        ] {
            let e = workload(3, 1, &[bad]).err().unwrap();
            assert!(matches!(e, WorkloadError::BadValue { .. }), "{bad:?}: {e}");
            assert!(e.to_string().contains(bad.0), "{bad:?}: {e}");
        }
        // Node 0 owns only keys 0, 3, ..., 18 of 20: too few for 16 distinct local keys.
        let few = [
            ("keys", "20"),
            ("read_only_keys", "16"),
            ("locality", "0.1"),
        ];
        let e = workload(3, 1, &few).err().unwrap();
        assert!(e.to_string().contains("keys of its own"), "{e}");
        assert!(
            workload(3, 1, &few[..2]).is_ok(),
            "uniform access only needs 16 keys"
        );
        assert!(workload(3, 1, &[("keys", "20000000"), ("distribution", "zipfian")]).is_err());
    }

    #[test]
    fn pools_name_exactly_the_nodes_keys() {
        for keys in [1, 2, 3, 10, 11, 12, 30] {
            for parts in [
                vec![0],
                vec![1],
                vec![2],
                vec![0, 2],
                vec![1, 2],
                vec![0, 1, 2],
            ] {
                let pool = Pool::new(parts.clone(), 3, keys);
                let got: Vec<u64> = (0..pool.len).map(|r| pool.index(r, 3)).collect();
                let want: Vec<u64> = (0..keys).filter(|i| parts.contains(&(i % 3))).collect();
                let mut sorted = got.clone();
                sorted.sort();
                assert_eq!(sorted, want, "keys {keys}, partitions {parts:?}");
            }
        }
        let pool = Pool::new(vec![0, 2], 3, 10);
        let ranked: Vec<u64> = (0..pool.len).map(|r| pool.index(r, 3)).collect();
        assert_eq!(ranked, [0, 2, 3, 5, 6, 8, 9]);
    }

    /// The share of `draws` key accesses from transactions at `home` that fall in `local`.
    fn local_share(w: &YcsbT, home: NodeId, local: &[u32], draws: usize) -> f64 {
        let mut rng = ChaCha8Rng::seed_from_u64(u64::from(home.0) + 7);
        let mut hits = 0;
        let mut seen = 0;
        while seen < draws {
            let mut p = w.next(home, &mut rng);
            let (reads, _) = run(p.as_mut(), &mut FakeOps::default());
            for key in reads {
                let (partition, index) = parts(&key);
                assert_eq!(u64::from(partition), index % 3, "{key}");
                assert!(index < w.settings.keys, "{key}");
                hits += usize::from(local.contains(&partition));
                seen += 1;
            }
        }
        hits as f64 / seen as f64
    }

    #[test]
    fn locality_follows_the_papers_definition() {
        // 3 nodes, no replication: node 1 stores partition 1 only.
        let home = NodeId(1);
        let all_local = workload(3, 1, &[("locality", "1")]).unwrap();
        assert_eq!(local_share(&all_local, home, &[1], 4000), 1.0);
        // Locality 0 is uniform access over all keys: a third of them are node 1's.
        let uniform = workload(3, 1, &[]).unwrap();
        let share = local_share(&uniform, home, &[1], 6000);
        assert!((0.30..0.37).contains(&share), "{share}");
        // Fig. 7: half local, half uniform: 1/2 + 1/2 * 1/3 local.
        let half = workload(3, 1, &[("locality", "0.5")]).unwrap();
        let share = local_share(&half, home, &[1], 6000);
        assert!((0.63..0.70).contains(&share), "{share}");
        // With two replicas, node 1 stores partitions 0 and 1 but masters only 1.
        let pl = placement(3, 2);
        assert_eq!(pl.local_partitions(home), [PartitionId(0), PartitionId(1)]);
        let replicated = workload(3, 2, &[("locality", "1")]).unwrap();
        let mut rng = ChaCha8Rng::seed_from_u64(9);
        let mut seen = BTreeSet::new();
        for _ in 0..300 {
            let (reads, _) = run(
                replicated.next(home, &mut rng).as_mut(),
                &mut FakeOps::default(),
            );
            seen.extend(reads.iter().map(|k| parts(k).0));
        }
        assert_eq!(seen, BTreeSet::from([0, 1]));
        let mastered = workload(3, 2, &[("locality", "1"), ("local_keys", "mastered")]).unwrap();
        assert_eq!(local_share(&mastered, home, &[1], 2000), 1.0);
    }

    #[test]
    fn transactions_follow_the_profiles() {
        let set = [
            ("keys", "60"),
            ("read_only_keys", "16"),
            ("update_keys", "2"),
            ("read_only_fraction", "0.5"),
            ("locality", "0.5"),
        ];
        let w = workload(3, 1, &set).unwrap();
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let mut ops = FakeOps::default();
        let (mut read_only, mut updates) = (0, 0);
        for _ in 0..1000 {
            let mut p = w.next(NodeId(2), &mut rng);
            let (reads, writes) = run(p.as_mut(), &mut ops);
            let distinct: BTreeSet<&String> = reads.iter().collect();
            assert_eq!(distinct.len(), reads.len(), "distinct keys: {reads:?}");
            match p.name() {
                "read-only" => {
                    assert!(p.read_only());
                    assert_eq!(reads.len(), 16);
                    assert!(writes.is_empty(), "{writes:?}");
                    read_only += 1;
                }
                "update" => {
                    assert!(!p.read_only());
                    assert_eq!(reads.len(), 2);
                    assert_eq!(writes, reads, "writes exactly the keys it read");
                    let log = &ops.log;
                    assert!(log[..2].iter().all(|l| l.starts_with("r ")), "{log:?}");
                    updates += 1;
                }
                other => panic!("unexpected procedure {other}"),
            }
            ops.commit();
        }
        assert!(read_only > 400 && updates > 400, "{read_only} / {updates}");
        let all_reads = workload(3, 1, &[("read_only_fraction", "1")]).unwrap();
        assert!((0..100).all(|_| all_reads.next(NodeId(0), &mut rng).read_only()));
        let no_reads = workload(3, 1, &[("read_only_fraction", "0")]).unwrap();
        assert!((0..100).all(|_| !no_reads.next(NodeId(0), &mut rng).read_only()));
    }

    #[test]
    fn updates_increment_counters_with_fresh_values() {
        let (a, b) = (Key::numbered(0, 0), Key::numbered(1, 1));
        let mut p = Update {
            keys: vec![a.clone(), b.clone()],
            only_read: 0,
            value_size: 24,
            stamp: 0xabcd,
        };
        let mut ops = FakeOps::default();
        ops.store.insert(b.clone(), value_of(24, 41, 7));
        ops.run(&mut p).unwrap();
        ops.commit();
        let a_value = ops.store[&a].clone();
        assert_eq!(a_value.len(), 24);
        assert_eq!(counter_of(Some(&a_value[..])), 1);
        assert_eq!(&a_value[8..16], &0xabcd_u64.to_be_bytes());
        assert_eq!(&a_value[16..], &[0; 8]);
        assert_eq!(counter_of(Some(&ops.store[&b][..])), 42);
        // Another attempt reads the committed values.
        ops.run(&mut p).unwrap();
        ops.commit();
        assert_eq!(counter_of(Some(&ops.store[&a][..])), 2);
        assert_eq!(counter_of(Some(&ops.store[&b][..])), 43);
        // An 8-byte value holds just the counter; a short or absent value counts as 0.
        assert_eq!(&value_of(8, 5, 9)[..], &5_u64.to_be_bytes());
        assert_eq!(counter_of(Some(&b"short"[..])), 0);
        assert_eq!(counter_of(None), 0);
    }

    #[test]
    fn updates_leave_their_last_keys_read_only_when_told() {
        let w = workload(2, 1, &[("read_only_fraction", "0"), ("update_keys", "10")]);
        let w8 = workload(
            2,
            1,
            &[("update_keys", "10"), ("update_read_only_keys", "8")],
        );
        let (w, w8) = (w.unwrap(), w8.unwrap());
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let mut ops = FakeOps::default();
        let (reads, writes) = run(&mut *w.next(NodeId(0), &mut rng), &mut ops);
        assert_eq!((reads.len(), writes.len()), (10, 10));
        let mut p = (0..)
            .map(|_| w8.next(NodeId(0), &mut rng))
            .find(|p| !p.read_only())
            .unwrap();
        let (reads, writes) = run(&mut *p, &mut ops);
        assert_eq!((reads.len(), writes.len()), (10, 2));
        assert_eq!(writes, reads[..2]);
    }

    #[test]
    fn load_writes_every_key_once_by_partition() {
        let w = workload(3, 1, &[("keys", "250"), ("value_size", "32")]).unwrap();
        let mut loads = w.load();
        // Partitions hold 84, 83 and 83 keys: one batch each.
        assert_eq!(loads.len(), 3);
        let mut ops = FakeOps::default();
        let mut written = Vec::new();
        for p in &mut loads {
            assert_eq!(p.name(), "load");
            assert!(!p.read_only());
            let (reads, writes) = run(p.as_mut(), &mut ops);
            assert!(reads.is_empty());
            let partitions: BTreeSet<u32> = writes.iter().map(|k| parts(k).0).collect();
            assert_eq!(partitions.len(), 1, "one partition per loading transaction");
            written.extend(writes.iter().map(|k| parts(k).1));
            ops.commit();
        }
        written.sort();
        assert_eq!(written, (0..250).collect::<Vec<u64>>());
        assert!(
            ops.store
                .values()
                .all(|v| v.len() == 32 && v[..] == [0; 32])
        );
        let big = workload(1, 1, &[("keys", "1001")]).unwrap();
        assert_eq!(big.load().len(), 11);
        assert!(
            workload(3, 1, &[("load", "false")])
                .unwrap()
                .load()
                .is_empty()
        );
    }

    #[test]
    fn zipfian_ranks_follow_their_weights() {
        let zipf = Zipf::new(100, 0.99);
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        let draws = 200_000;
        let mut counts = [0u32; 100];
        for _ in 0..draws {
            counts[zipf.draw(100, &mut rng) as usize] += 1;
        }
        let total: f64 = (1..=100).map(|i| f64::from(i).powf(-0.99)).sum();
        for rank in [0usize, 1, 2, 9, 99] {
            let want = ((rank + 1) as f64).powf(-0.99) / total;
            let got = f64::from(counts[rank]) / f64::from(draws);
            assert!(
                (got - want).abs() < 0.1 * want + 0.001,
                "rank {rank}: {got} vs {want}"
            );
        }
        // A prefix of the table is the distribution over fewer ranks.
        assert!((0..1000).all(|_| zipf.draw(3, &mut rng) < 3));
        assert_eq!(zipf.draw(1, &mut rng), 0);
        // Through the workload: key 0 is the hottest, and keys stay distinct and in range.
        let set = [("keys", "1000"), ("distribution", "zipfian")];
        let w = workload(3, 1, &set).unwrap();
        let mut hits = BTreeMap::<u64, u32>::new();
        for _ in 0..2000 {
            let (reads, _) = run(
                w.next(NodeId(0), &mut rng).as_mut(),
                &mut FakeOps::default(),
            );
            assert_ne!(reads[0], reads[1]);
            for key in reads {
                let (_, index) = parts(&key);
                assert!(index < 1000);
                *hits.entry(index).or_default() += 1;
            }
        }
        let hottest = hits.iter().max_by_key(|(_, n)| **n).unwrap();
        assert_eq!(*hottest.0, 0, "{hits:?}");
        let local = [
            ("keys", "1000"),
            ("distribution", "zipfian"),
            ("locality", "1"),
        ];
        let w = workload(3, 1, &local).unwrap();
        for _ in 0..200 {
            let (reads, _) = run(
                w.next(NodeId(1), &mut rng).as_mut(),
                &mut FakeOps::default(),
            );
            assert!(reads.iter().all(|k| parts(k).0 == 1), "{reads:?}");
        }
    }

    #[test]
    fn calls_replay_on_the_node() {
        // Few keys, loaded, so that transactions read what the load and earlier ones wrote.
        let w = workload(3, 2, &[("keys", "200")]).unwrap();
        crate::testing::assert_calls_replay(&w, 3, 400);
        assert_eq!(call_names(&w, 200), ["read-only", "update"]);
        let set = [
            ("keys", "200"),
            ("read_only_fraction", "0.2"),
            ("update_keys", "5"),
            ("distribution", "zipfian"),
            ("locality", "0.5"),
            ("load", "false"),
        ];
        let w = workload(3, 1, &set).unwrap();
        crate::testing::assert_calls_replay(&w, 3, 300);
    }

    #[test]
    fn bad_calls_are_refused() {
        crate::testing::assert_refuses_bad_calls("ycsb-t", "scan", &["update", "read-only"]);
        let keys: Vec<Key> = (0..17).map(|i| Key::numbered(0, i)).collect();
        let wide = ReadOnly { keys: keys.clone() };
        let e = Catalog.instantiate(&wide.call().unwrap()).err().unwrap();
        assert!(e.to_string().contains("at most 16"), "{e}");
        let short = Update {
            keys: keys[..2].to_vec(),
            only_read: 0,
            value_size: 7,
            stamp: 1,
        };
        let e = Catalog.instantiate(&short.call().unwrap()).err().unwrap();
        assert!(e.to_string().contains("value_size"), "{e}");
    }
}
