//! Loading: the benchmark's loader sessions run a workload's load transactions in whatever
//! order they finish in, which loads the same data only because no two of them write the same
//! key.

use augur_types::{LatencyProfile, Placement};
use std::sync::Arc;

fn placement(nodes: usize) -> Arc<Placement> {
    let profile = LatencyProfile::named("lan").unwrap();
    Arc::new(Placement::ring(profile, nodes, nodes.min(3)).unwrap())
}

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
    let workloads: [(&str, &[(&str, &str)]); 3] = [
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
    for (name, settings) in workloads {
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
