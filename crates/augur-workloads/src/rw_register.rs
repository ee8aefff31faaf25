//! `rw-register`: transactions over read/write registers, whose histories the isolation checker
//! can judge.
//!
//! Every key is a register holding a decimal integer. An update transaction (`rw`) makes
//! 1..=`max_ops` operations on keys drawn uniformly from `keys` keys, each a read, a blind write,
//! or a read followed by a write of the same key; a read-only transaction (`read`) reads
//! 1..=`max_ops` keys. Keys are spread round-robin over the partitions.
//!
//! Every value written during a run is unique: one counter, shared by all the clients of the
//! workload, hands out a fresh value for every write of every attempt (retries included), reserved
//! before the attempt runs so that a one-shot call can ship them to the node. A value
//! read therefore names the one write that produced it, which gives the checker its write-read
//! dependencies; version order comes from those, from reads followed by writes in one transaction,
//! and from commit timestamps where the protocol vouches for them. Registers reveal less order
//! than `list-append` lists but exercise blind writes.
//!
//! The settings are those of `list-append`.

use crate::list_append::{ReadKeys, Settings, check_reserved, draw, key_of, unprepared};
use crate::{Workload, WorkloadError};
use augur_client::{Ops, Procedure, TxnError};
use augur_types::{Key, NodeId, Placement, ProcedureCall, RequestError};
use bytes::Bytes;
use futures::future::BoxFuture;
use rand::Rng;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// Settings accepted through `--set`.
pub const SETTINGS: &[&str] = &["keys", "max_ops", "read_only_fraction"];

pub struct RwRegister {
    settings: Settings,
    placement: Arc<Placement>,
    /// The next value to write; shared with the procedures, which reserve theirs before each
    /// attempt.
    next_value: Arc<AtomicU64>,
}

impl RwRegister {
    pub fn new(
        given: &BTreeMap<String, String>,
        placement: Arc<Placement>,
    ) -> Result<RwRegister, WorkloadError> {
        Ok(RwRegister {
            settings: Settings::from_given("rw-register", SETTINGS, given)?,
            placement,
            next_value: Arc::new(AtomicU64::new(1)),
        })
    }
}

impl Workload for RwRegister {
    fn name(&self) -> &'static str {
        "rw-register"
    }

    fn next(&self, _home: NodeId, rng: &mut ChaCha8Rng) -> Box<dyn Procedure> {
        let (read_only, indices) = draw(&self.settings, rng);
        let keys = indices.into_iter().map(|i| key_of(&self.placement, i));
        if read_only {
            return Box::new(ReadKeys {
                workload: "rw-register",
                keys: keys.collect(),
            });
        }
        let mut steps: Vec<Step> = keys
            .map(|k| match rng.random_range(0..3) {
                0 => Step::Read(k),
                1 => Step::Write(k),
                _ => Step::ReadWrite(k),
            })
            .collect();
        // An update transaction always writes something.
        if steps.iter().all(|s| matches!(s, Step::Read(_))) {
            let Some(Step::Read(k)) = steps.pop() else {
                unreachable!("at least one operation, all reads")
            };
            steps.push(Step::ReadWrite(k));
        }
        Box::new(Rw {
            steps,
            next_value: Some(Arc::clone(&self.next_value)),
            first: None,
        })
    }

    fn settings(&self) -> serde_json::Value {
        serde_json::to_value(&self.settings).expect("settings serialise")
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
enum Step {
    Read(Key),
    /// Write a fresh value without reading first.
    Write(Key),
    /// Read, then write a fresh value.
    ReadWrite(Key),
}

/// `rw`: reads and writes in program order.
struct Rw {
    steps: Vec<Step>,
    /// Where each attempt reserves its values. `None` in a procedure rebuilt from a call: it
    /// writes the values the call carries, which the client reserved.
    next_value: Option<Arc<AtomicU64>>,
    /// The first value reserved for this attempt (`None` before
    /// [`prepare_attempt`](Procedure::prepare_attempt)): the `i`-th write in program order
    /// writes `first + i`.
    first: Option<u64>,
}

/// Everything an `rw` attempt does, as a one-shot call carries it.
#[derive(Serialize, Deserialize)]
struct RwArgs {
    steps: Vec<Step>,
    first: Option<u64>,
}

impl Rw {
    fn writes(&self) -> u64 {
        let writes = self.steps.iter().filter(|s| !matches!(s, Step::Read(_)));
        writes.count() as u64
    }

    /// Write `value` to `key`, and move on to the next reserved value.
    fn write(ops: &mut dyn Ops, key: &Key, value: &mut u64) -> Result<(), TxnError> {
        let written = Bytes::from(value.to_string());
        *value += 1;
        ops.write(key.clone(), Some(written))
    }
}

impl Procedure for Rw {
    fn name(&self) -> &'static str {
        "rw"
    }

    fn read_only(&self) -> bool {
        false
    }

    fn run<'a>(&'a mut self, ops: &'a mut dyn Ops) -> BoxFuture<'a, Result<(), TxnError>> {
        Box::pin(async move {
            let mut value = self
                .first
                .ok_or_else(|| TxnError::Rejected(unprepared("rw")))?;
            for step in &self.steps {
                match step {
                    Step::Read(key) => {
                        ops.read(key).await?;
                    }
                    Step::Write(key) => Rw::write(ops, key, &mut value)?,
                    Step::ReadWrite(key) => {
                        ops.read(key).await?;
                        Rw::write(ops, key, &mut value)?;
                    }
                }
            }
            Ok(())
        })
    }

    /// Reserve one value per write: per attempt, so a retry never reuses an aborted attempt's
    /// value, and before the attempt runs, so that the node running a one-shot call and the
    /// client replaying it write the same ones.
    fn prepare_attempt(&mut self) {
        if let Some(counter) = &self.next_value {
            self.first = Some(counter.fetch_add(self.writes(), Ordering::Relaxed));
        }
    }

    fn call(&self) -> Option<ProcedureCall> {
        let args = RwArgs {
            steps: self.steps.clone(),
            first: self.first,
        };
        Some(ProcedureCall::encode("rw-register", self.name(), &args))
    }
}

/// The `rw-register` procedure `call` names, rebuilt from its arguments.
pub(crate) fn instantiate(call: &ProcedureCall) -> Result<Box<dyn Procedure>, RequestError> {
    match call.procedure.as_str() {
        "rw" => {
            let RwArgs { steps, first } = call.decode()?;
            let rw = Rw {
                steps,
                next_value: None,
                first,
            };
            check_reserved("rw", first, rw.writes())?;
            Ok(Box::new(rw))
        }
        "read" => Ok(Box::new(ReadKeys::from_call("rw-register", call)?)),
        _ => Err(crate::unknown_procedure(call)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::list_append::fake::{FakeOps, call_names};
    use augur_types::LatencyProfile;
    use rand::SeedableRng;

    fn workload(set: &[(&str, &str)]) -> Result<RwRegister, WorkloadError> {
        let lan = LatencyProfile::named("lan").unwrap();
        let pl = Arc::new(Placement::ring(lan, 2, 1).unwrap());
        let given = set
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        RwRegister::new(&given, pl)
    }

    #[test]
    fn writes_are_fresh_and_reads_see_own_writes() {
        let (a, b) = (Key::numbered(0, 2), Key::numbered(1, 3));
        let mut p = Rw {
            steps: vec![
                Step::Write(a.clone()),
                Step::Read(a.clone()),
                Step::ReadWrite(b.clone()),
                Step::ReadWrite(a.clone()),
            ],
            next_value: Some(Arc::new(AtomicU64::new(1))),
            first: None,
        };
        let mut ops = FakeOps::default();
        ops.set(b.clone(), "70");
        p.prepare_attempt();
        ops.run(&mut p).unwrap();
        assert_eq!(
            ops.log,
            [
                "w 0/2 1", "r 0/2 1", "r 1/3 70", "w 1/3 2", "r 0/2 1", "w 0/2 3",
            ]
        );
        ops.commit();
        p.prepare_attempt();
        ops.run(&mut p).unwrap();
        assert_eq!(ops.log[0], "w 0/2 4", "a retry draws new values");
    }

    #[test]
    fn transactions_follow_the_settings() {
        let w = workload(&[("max_ops", "2"), ("read_only_fraction", "0.5")]).unwrap();
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        let mut seen = std::collections::BTreeSet::new();
        for _ in 0..400 {
            let mut p = w.next(NodeId(1), &mut rng);
            let mut ops = FakeOps::default();
            p.prepare_attempt();
            ops.run(p.as_mut()).unwrap();
            let writes = ops.log.iter().filter(|l| l.starts_with("w ")).count();
            let reads = ops.log.len() - writes;
            assert!((1..=4).contains(&ops.log.len()), "{:?}", ops.log);
            match p.name() {
                "read" => assert!(p.read_only() && writes == 0 && reads <= 2),
                "rw" => assert!(!p.read_only() && writes >= 1),
                other => panic!("unexpected procedure {other}"),
            }
            seen.insert((p.name(), writes, reads));
        }
        // Blind writes, reads alone and read-then-write all occur.
        assert!(seen.contains(&("rw", 1, 0)), "{seen:?}");
        assert!(seen.contains(&("rw", 1, 2)), "{seen:?}");
        assert!(seen.contains(&("rw", 2, 2)), "{seen:?}");
    }

    #[test]
    fn settings_are_echoed_and_validated() {
        let w = workload(&[("keys", "3")]).unwrap();
        assert_eq!(
            w.settings(),
            serde_json::json!({"keys": 3, "max_ops": 4, "read_only_fraction": 0.2})
        );
        let e = workload(&[("value_size", "3")]).err().unwrap();
        assert!(e.to_string().contains("workload rw-register"), "{e}");
        assert!(workload(&[("keys", "0")]).is_err());
        assert!(workload(&[("read_only_fraction", "2")]).is_err());
    }

    #[test]
    fn calls_replay_on_the_node() {
        let w = workload(&[]).unwrap();
        crate::testing::assert_calls_replay(&w, 2, 400);
        assert_eq!(call_names(&w, 200), ["read", "rw"]);
        let mostly_reads = workload(&[("read_only_fraction", "0.7"), ("max_ops", "8")]).unwrap();
        crate::testing::assert_calls_replay(&mostly_reads, 2, 300);
    }

    #[test]
    fn every_attempt_ships_fresh_values() {
        let w = workload(&[("read_only_fraction", "0")]).unwrap();
        crate::testing::assert_attempts_write_fresh_values(&w);
    }

    #[test]
    fn bad_calls_are_refused() {
        crate::testing::assert_refuses_bad_calls("rw-register", "append", &["rw", "read"]);
        // A read generated here names this workload, not list-append.
        let w = workload(&[("read_only_fraction", "1")]).unwrap();
        let read = w.next(NodeId(0), &mut ChaCha8Rng::seed_from_u64(2));
        assert_eq!(read.call().unwrap().workload, "rw-register");
    }
}
