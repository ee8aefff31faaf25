//! `synthetic-str`: the synthetic benchmark of STR §8.1.
//!
//! A transaction reads `keys_per_txn` distinct keys (10 in the paper, up to 200 for Table 1) and
//! then updates every one of them. Each partition holds `keys_per_partition` keys split in two
//! halves: the *local* half is accessed only by transactions coordinated on a node that replicates
//! the partition, the *remote* half only by transactions from other nodes, so local and remote
//! contention can be set independently. Within a half, `hot_fraction` (90%) of accesses go to a
//! hotspot of `local_hotspot` / `remote_hotspot` keys, the rest uniformly to the whole half.
//! Each access picks a partition the coordinator replicates with probability `local_access`,
//! otherwise one it does not (when every partition is local, all accesses are).
//!
//! Presets (`contention=`) set both hotspot sizes: `none` (the whole half: uniform), `low`
//! (10,000 / 10,000), `high-local` (100 / 10,000), `high-both` (100 / 100). The paper gives the
//! three scenarios but not the hotspot sizes; these are augur's choice.

use crate::bad_value as bad;
use crate::{Workload, WorkloadError, parse, reject_unknown};
use augur_client::{Ops, Procedure, TxnError};
use augur_types::{Key, NodeId, PartitionId, Placement, ProcedureCall, RequestError};
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
    "keys_per_txn",
    "hot_fraction",
    "local_hotspot",
    "remote_hotspot",
    "local_access",
    "value_size",
];

const PRESETS: &[&str] = &["none", "low", "high-local", "high-both"];

#[derive(Clone, Debug, Serialize)]
pub struct Settings {
    pub contention: String,
    pub keys_per_partition: u64,
    pub keys_per_txn: usize,
    pub hot_fraction: f64,
    pub local_hotspot: u64,
    pub remote_hotspot: u64,
    pub local_access: f64,
    pub value_size: usize,
}

pub struct SyntheticStr {
    settings: Settings,
    placement: Arc<Placement>,
    /// Per node: partitions it replicates, and partitions it does not.
    local: Vec<Vec<PartitionId>>,
    remote: Vec<Vec<PartitionId>>,
}

impl SyntheticStr {
    pub fn new(
        given: &BTreeMap<String, String>,
        placement: Arc<Placement>,
    ) -> Result<SyntheticStr, WorkloadError> {
        reject_unknown("synthetic-str", SETTINGS, given)?;
        let contention = given
            .get("contention")
            .cloned()
            .unwrap_or_else(|| "low".into());
        let keys_per_partition: u64 = match given.get("keys_per_partition") {
            Some(v) => parse("keys_per_partition", v)?,
            None => 2_000_000,
        };
        let half = (keys_per_partition / 2).max(1);
        let (local_hot, remote_hot) = match contention.as_str() {
            "none" => (half, half),
            "low" => (10_000, 10_000),
            "high-local" => (100, 10_000),
            "high-both" => (100, 100),
            other => {
                return Err(WorkloadError::BadValue {
                    key: "contention".into(),
                    value: other.into(),
                    why: format!("valid presets: {}", PRESETS.join(", ")),
                });
            }
        };
        let get = |key: &str, default: String| given.get(key).cloned().unwrap_or(default);
        let settings = Settings {
            contention,
            keys_per_partition,
            keys_per_txn: parse("keys_per_txn", &get("keys_per_txn", "10".into()))?,
            hot_fraction: parse("hot_fraction", &get("hot_fraction", "0.9".into()))?,
            local_hotspot: parse(
                "local_hotspot",
                &get("local_hotspot", local_hot.to_string()),
            )?,
            remote_hotspot: parse(
                "remote_hotspot",
                &get("remote_hotspot", remote_hot.to_string()),
            )?,
            local_access: parse("local_access", &get("local_access", "0.5".into()))?,
            value_size: parse("value_size", &get("value_size", "16".into()))?,
        };
        if settings.keys_per_txn == 0 || settings.keys_per_txn as u64 > half {
            let why = "must be between 1 and half the keys of a partition";
            return Err(bad("keys_per_txn", settings.keys_per_txn.to_string(), why));
        }
        for (k, v) in [
            ("hot_fraction", settings.hot_fraction),
            ("local_access", settings.local_access),
        ] {
            if !(0.0..=1.0).contains(&v) {
                return Err(bad(k, v.to_string(), "must be within 0..=1"));
            }
        }
        for (k, v) in [
            ("local_hotspot", settings.local_hotspot),
            ("remote_hotspot", settings.remote_hotspot),
        ] {
            if v == 0 || v > half {
                return Err(bad(
                    k,
                    v.to_string(),
                    "must be between 1 and half the keys of a partition",
                ));
            }
        }
        if settings.value_size < 8 {
            return Err(bad(
                "value_size",
                settings.value_size.to_string(),
                "must be at least 8",
            ));
        }
        let local = placement
            .nodes()
            .map(|n| placement.local_partitions(n).to_vec())
            .collect();
        let remote = placement
            .nodes()
            .map(|n| {
                placement
                    .partitions()
                    .filter(|p| !placement.replicates(n, *p))
                    .collect()
            })
            .collect();
        Ok(SyntheticStr {
            settings,
            placement,
            local,
            remote,
        })
    }

    /// One key for a transaction coordinated at `home`.
    fn pick_key(&self, home: NodeId, rng: &mut ChaCha8Rng) -> Key {
        let s = &self.settings;
        let remote = &self.remote[home.0 as usize];
        let go_remote = !remote.is_empty() && rng.random::<f64>() >= s.local_access;
        let (partitions, hotspot, half_offset) = if go_remote {
            (remote, s.remote_hotspot, s.keys_per_partition / 2)
        } else {
            (&self.local[home.0 as usize], s.local_hotspot, 0)
        };
        let partition = partitions[rng.random_range(0..partitions.len())];
        let half = (s.keys_per_partition / 2).max(1);
        let index = if rng.random::<f64>() < s.hot_fraction {
            rng.random_range(0..hotspot)
        } else {
            rng.random_range(0..half)
        };
        // The shard tag is the partition number, so the key lands in `partition`.
        debug_assert!(self.placement.partition_count() > partition.0 as usize);
        Key::numbered(partition.0, half_offset + index)
    }
}

impl Workload for SyntheticStr {
    fn name(&self) -> &'static str {
        "synthetic-str"
    }

    fn next(&self, home: NodeId, rng: &mut ChaCha8Rng) -> Box<dyn Procedure> {
        let n = self.settings.keys_per_txn;
        let mut keys: Vec<Key> = Vec::with_capacity(n);
        while keys.len() < n {
            let k = self.pick_key(home, rng);
            if !keys.contains(&k) {
                keys.push(k);
            }
        }
        Box::new(ReadUpdate {
            keys,
            value_size: self.settings.value_size,
            stamp: rng.random(),
        })
    }

    fn settings(&self) -> serde_json::Value {
        serde_json::to_value(&self.settings).expect("settings serialise")
    }
}

/// Read every key, then write each one back with its counter incremented. Its fields are its
/// one-shot arguments.
#[derive(Serialize, Deserialize)]
struct ReadUpdate {
    keys: Vec<Key>,
    value_size: usize,
    stamp: u64,
}

impl Procedure for ReadUpdate {
    fn name(&self) -> &'static str {
        "read-update"
    }

    fn read_only(&self) -> bool {
        false
    }

    fn run<'a>(&'a mut self, ops: &'a mut dyn Ops) -> BoxFuture<'a, Result<(), TxnError>> {
        Box::pin(async move {
            let mut counters = Vec::with_capacity(self.keys.len());
            for key in &self.keys {
                let value = ops.read(key).await?;
                let counter = value
                    .as_deref()
                    .and_then(|v| v.get(..8))
                    .map(|b| u64::from_be_bytes(b.try_into().expect("eight bytes")))
                    .unwrap_or(0);
                counters.push(counter);
            }
            for (key, counter) in self.keys.iter().zip(counters) {
                let mut value = vec![0u8; self.value_size];
                value[..8].copy_from_slice(&(counter + 1).to_be_bytes());
                if self.value_size >= 16 {
                    value[8..16].copy_from_slice(&self.stamp.to_be_bytes());
                }
                ops.write(key.clone(), Some(Bytes::from(value)))?;
            }
            Ok(())
        })
    }

    fn call(&self) -> Option<ProcedureCall> {
        Some(ProcedureCall::encode("synthetic-str", self.name(), self))
    }
}

/// The `synthetic-str` procedure `call` names, rebuilt from its arguments.
pub(crate) fn instantiate(call: &ProcedureCall) -> Result<Box<dyn Procedure>, RequestError> {
    match call.procedure.as_str() {
        "read-update" => {
            let p: ReadUpdate = call.decode()?;
            // The counter takes 8 bytes, as the setting requires.
            if p.value_size < 8 {
                let why = format!("read-update: value_size {} is below 8", p.value_size);
                return Err(RequestError::Invalid(why));
            }
            Ok(Box::new(p))
        }
        _ => Err(crate::unknown_procedure(call)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Catalog;
    use augur_client::ProcedureCatalog;
    use augur_types::LatencyProfile;
    use rand::SeedableRng;

    fn workload(
        nodes: usize,
        rf: usize,
        set: &[(&str, &str)],
    ) -> Result<SyntheticStr, WorkloadError> {
        let pl = Placement::ring(LatencyProfile::named("lan").unwrap(), nodes, rf).unwrap();
        let given = set
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        SyntheticStr::new(&given, Arc::new(pl))
    }

    #[test]
    fn keys_respect_the_local_and_remote_halves() {
        let w = workload(3, 1, &[("contention", "high-both")]).unwrap();
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        for _ in 0..1000 {
            let k = w.pick_key(NodeId(0), &mut rng);
            let p = w.placement.partition_of(&k);
            let id = u64::from_be_bytes(k.as_bytes()[4..].try_into().unwrap());
            if p == PartitionId(0) {
                assert!(id < 1_000_000, "local keys come from the local half");
            } else {
                assert!(id >= 1_000_000, "remote keys come from the remote half");
            }
        }
    }

    #[test]
    fn transactions_touch_distinct_keys() {
        let w = workload(1, 1, &[("contention", "high-both"), ("keys_per_txn", "50")]).unwrap();
        let mut rng = ChaCha8Rng::seed_from_u64(2);
        for _ in 0..50 {
            let p = w.next(NodeId(0), &mut rng);
            assert_eq!(p.name(), "read-update");
        }
    }

    #[test]
    fn bad_settings_are_named() {
        let e = workload(1, 1, &[("contention", "extreme")]).err().unwrap();
        assert!(
            e.to_string().contains("none, low, high-local, high-both"),
            "{e}"
        );
        let e = workload(1, 1, &[("hotspot", "3")]).err().unwrap();
        assert!(e.to_string().contains("valid settings"), "{e}");
        assert!(workload(1, 1, &[("keys_per_txn", "0")]).is_err());
    }

    #[test]
    fn calls_replay_on_the_node() {
        // Small partitions, so that transactions meet keys earlier ones wrote.
        let small = [("keys_per_partition", "400"), ("local_hotspot", "20")];
        let w = workload(3, 2, &[small[0], small[1], ("remote_hotspot", "20")]).unwrap();
        crate::testing::assert_calls_replay(&w, 3, 300);
        assert_eq!(
            crate::list_append::fake::call_names(&w, 20),
            ["read-update"]
        );
        let w = workload(3, 1, &[("contention", "high-both"), ("value_size", "8")]).unwrap();
        crate::testing::assert_calls_replay(&w, 3, 200);
    }

    #[test]
    fn bad_calls_are_refused() {
        crate::testing::assert_refuses_bad_calls("synthetic-str", "update", &["read-update"]);
        let short = ReadUpdate {
            keys: vec![Key::numbered(0, 1)],
            value_size: 4,
            stamp: 0,
        };
        let e = Catalog.instantiate(&short.call().unwrap()).err().unwrap();
        assert!(e.to_string().contains("value_size"), "{e}");
    }
}
