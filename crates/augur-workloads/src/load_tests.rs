//! Loading: the benchmark's loader sessions run a workload's load transactions in whatever
//! order they finish in, which loads the same data only because no two of them write the same
//! key.

use augur_types::{LatencyProfile, Placement};
use std::sync::Arc;

fn placement(nodes: usize) -> Arc<Placement> {
    let profile = LatencyProfile::named("lan").unwrap();
    Arc::new(Placement::ring(profile, nodes, nodes.min(3)).unwrap())
}

/// Settings that keep the workloads with a large database small enough for a unit test.
const SMALL: &[(&str, &[(&str, &str)])] = &[
    ("ycsb-t", &[("keys", "3000")]),
    (
        "tpcc",
        &[
            ("warehouses", "3"),
            ("items", "1000"),
            ("customers_per_district", "100"),
            ("data_size", "compact"),
        ],
    ),
    (
        "rubis",
        &[("users", "2000"), ("items", "300"), ("old_items", "1000")],
    ),
];

/// Records the keys a procedure writes; reads find nothing.
#[derive(Default)]
struct Writes(Vec<augur_types::Key>);

impl augur_client::Ops for Writes {
    fn read<'a>(
        &'a mut self,
        _key: &'a augur_types::Key,
    ) -> futures::future::BoxFuture<'a, Result<Option<augur_types::Value>, augur_client::TxnError>>
    {
        Box::pin(async { Ok(None) })
    }

    fn write(
        &mut self,
        key: augur_types::Key,
        _value: Option<augur_types::Value>,
    ) -> Result<(), augur_client::TxnError> {
        self.0.push(key);
        Ok(())
    }
}

/// The loader sessions run load transactions in whatever order they finish in: that loads
/// the same data only because no two of them write the same key.
#[test]
fn no_two_load_transactions_write_the_same_key() {
    for &(name, settings) in SMALL {
        let settings = settings
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let workload = crate::build(name, &settings, placement(3)).unwrap();
        let mut writer = std::collections::HashMap::new();
        let loads = workload.load();
        assert!(loads.len() > 1, "{name}");
        for (i, mut p) in loads.into_iter().enumerate() {
            let mut ops = Writes::default();
            futures::executor::block_on(p.run(&mut ops)).unwrap();
            for key in ops.0 {
                if let Some(j) = writer.insert(key.clone(), i) {
                    assert_eq!(j, i, "{name}: load transactions {j} and {i} write {key:?}");
                }
            }
        }
    }
}

/// Every key a workload loads, reads or writes begins with a zero byte: its shard tag is a
/// partition, warehouse or similar number far below 2^24. A key written as text (`augur put`,
/// the shell, the Python client's `str` keys) begins with a printable byte, so a bench against a
/// running cluster never writes a key that a person wrote (docs/bench.md, `--cluster`).
#[test]
fn every_workload_key_begins_with_a_zero_byte() {
    use crate::list_append::fake::FakeOps;
    use rand::SeedableRng;
    let outside = |db: &FakeOps, name: &str| {
        for line in &db.log {
            // `r KEY VALUE` or `w KEY VALUE`, KEY printed as `SHARD/REST`.
            let key = line.split(' ').nth(1).expect("a logged key");
            let shard: u32 = key.split('/').next().unwrap().parse().expect(key);
            assert!(
                shard < 1 << 24,
                "{name} touches {key}, outside the bench's keys"
            );
        }
    };
    for &name in crate::WORKLOADS {
        let settings = SMALL
            .iter()
            .find(|(workload, _)| *workload == name)
            .map(|(_, set)| set.iter().map(|(k, v)| (k.to_string(), v.to_string())))
            .into_iter()
            .flatten()
            .collect();
        let workload = crate::build(name, &settings, placement(3)).unwrap();
        let mut db = FakeOps::default();
        for mut load in workload.load() {
            db.run(load.as_mut()).expect("load runs");
            outside(&db, name);
            db.commit();
        }
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(3);
        for i in 0..300 {
            let mut txn = workload.next(augur_types::NodeId(i % 3), &mut rng);
            // A transaction that rolls itself back still touched its keys.
            let ended = db.run(txn.as_mut());
            outside(&db, name);
            if ended.is_err() {
                db.buffered.clear();
            }
            db.commit();
        }
    }
}
