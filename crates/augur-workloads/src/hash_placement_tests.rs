//! Every workload over consistent-hashing placements ([`Placement::hash`]): many more partitions
//! than nodes, owned unevenly, so workloads that draw "local" or "mastered" keys per node meet
//! what the ring layout never gave them.

use super::*;
use crate::list_append::fake::FakeOps;
use augur_types::{Key, LatencyProfile, PartitionId};
use rand::SeedableRng;

/// The hash placements tried: the default over 3 DCs; 20 nodes (640 partitions); and few
/// partitions with few ring points, so that ownership is uneven (the five nodes master 3, 1, 1,
/// 7 and 2 of the 14 partitions).
fn placements() -> Vec<Arc<Placement>> {
    [
        ("3dc", 3, 2, "hash"),
        ("lan", 20, 3, "hash"),
        ("lan", 5, 1, "hash:partitions=14:vnodes=3"),
    ]
    .into_iter()
    .map(|(profile, nodes, rf, layout)| {
        let profile = LatencyProfile::named(profile).unwrap();
        let layout = layout.parse().unwrap();
        Arc::new(Placement::build(layout, profile, nodes, rf).unwrap())
    })
    .collect()
}

/// Settings small enough to load quickly, and valid over up to 640 partitions (RUBiS needs a
/// user per partition).
fn small(workload: &str) -> BTreeMap<String, String> {
    let set: &[(&str, &str)] = match workload {
        "synthetic-str" => &[
            ("keys_per_partition", "400"),
            ("local_hotspot", "20"),
            ("remote_hotspot", "20"),
        ],
        "synthetic-sparkle" => &[("keys_per_partition", "1000"), ("index_keys", "100")],
        "ycsb-t" => &[("keys", "5000")],
        "smallbank" => &[("customers", "40"), ("hotspot_customers", "8")],
        "tpcc" => &[
            ("warehouses", "2"),
            ("customers_per_district", "30"),
            ("items", "200"),
            ("data_size", "compact"),
        ],
        "rubis" => &[
            ("users", "700"),
            ("old_items", "30"),
            ("items", "40"),
            ("categories", "4"),
            ("regions", "5"),
            ("bids_per_item", "6"),
        ],
        _ => &[],
    };
    set.iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn every_workload_runs_for_every_node_over_hash_placements() {
    for placement in placements() {
        let nodes = placement.node_count() as u32;
        for name in WORKLOADS {
            let workload = build(name, &small(name), placement.clone())
                .unwrap_or_else(|e| panic!("{name} over {}: {e}", placement.layout()));
            // Enough draws that every node's clients draw several transactions.
            testing::assert_calls_replay(workload.as_ref(), nodes, 10 * nodes as usize);
        }
    }
}

/// The partitions the keys of one transaction of `workload`, coordinated at `home`, fall in.
fn partitions_touched(
    workload: &dyn Workload,
    placement: &Placement,
    home: NodeId,
    rng: &mut ChaCha8Rng,
) -> Vec<PartitionId> {
    let mut p = workload.next(home, rng);
    p.prepare_attempt();
    let mut ops = FakeOps::default();
    ops.run(p.as_mut()).expect("runs on an empty store");
    ops.log
        .iter()
        .map(|line| {
            let key = line.split_whitespace().nth(1).expect("an op names its key");
            placement.partition_of(&Key::parse_printed(key).expect("a printed key"))
        })
        .collect()
}

/// A workload, the settings that make its keys local, and whether local means mastered (rather
/// than replicated) by the home node.
type LocalCase = (&'static str, &'static [(&'static str, &'static str)], bool);

#[test]
fn local_keys_stay_on_the_home_node_under_hash() {
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    for placement in placements() {
        let cases: [LocalCase; 3] = [
            ("synthetic-str", &[("local_access", "1")], false),
            ("ycsb-t", &[("locality", "1")], false),
            (
                "ycsb-t",
                &[("locality", "1"), ("local_keys", "mastered")],
                true,
            ),
        ];
        for (name, extra, mastered) in cases {
            let mut given = small(name);
            given.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
            let workload = build(name, &given, placement.clone()).unwrap();
            for home in placement.nodes() {
                for _ in 0..20 {
                    for p in partitions_touched(workload.as_ref(), &placement, home, &mut rng) {
                        let ok = if mastered {
                            placement.master(p) == home
                        } else {
                            placement.replicates(home, p)
                        };
                        assert!(ok, "{name} {extra:?}: {home:?} drew a key of {p:?}");
                    }
                }
            }
        }
    }
}
