//! `list-append`: transactions over append-only lists, whose histories the isolation checker can
//! judge.
//!
//! Every key holds a list of integers, stored as space-separated decimals (`"4 17 30"`; an absent
//! value or `""` is the empty list). An update transaction (`append`) makes 1..=`max_ops`
//! operations, each either a read of a key or an append to a key: read the list and write it back
//! with one fresh element at the end. A read-only transaction (`read`) reads 1..=`max_ops` keys.
//! Keys are drawn uniformly from `keys` keys spread round-robin over the partitions.
//!
//! Every element appended during a run is unique: one counter, shared by all the clients of the
//! workload, hands out fresh elements to every attempt (retries included), reserved before the
//! attempt runs so that a one-shot call can ship them to the node. A list therefore
//! names, in order, the transactions that appended to its key, so the checker can recover each
//! key's version order from the longest list read and derive the write-write, write-read and
//! read-write dependencies between transactions from it.

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
use std::num::ParseIntError;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// Settings accepted through `--set`.
pub const SETTINGS: &[&str] = &[
    "keys",
    "max_ops",
    "read_only_fraction",
    "dependent_fraction",
];

/// The settings `list-append` and `rw-register` share.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Settings {
    /// How many keys transactions pick from.
    pub keys: u64,
    /// Operations per transaction are drawn uniformly from 1..=max_ops.
    pub max_ops: usize,
    /// The share of transactions that are read-only.
    pub read_only_fraction: f64,
    /// `list-append` only: the share of appends whose key is chosen by a list read first (a
    /// dependent transaction, whose keys an order-then-execute protocol cannot know from its
    /// arguments). 0 unless set; echoed only when set (`rw-register` does not take it).
    #[serde(skip_serializing_if = "is_zero")]
    pub dependent_fraction: f64,
}

fn is_zero(x: &f64) -> bool {
    *x == 0.0
}

impl Settings {
    /// Parse and validate `given` for `workload`, whose accepted keys are [`SETTINGS`].
    pub(crate) fn from_given(
        workload: &'static str,
        accepted: &[&str],
        given: &BTreeMap<String, String>,
    ) -> Result<Settings, WorkloadError> {
        reject_unknown(workload, accepted, given)?;
        let get = |key: &str, default: &str| given.get(key).cloned().unwrap_or(default.into());
        let settings = Settings {
            keys: parse("keys", &get("keys", "12"))?,
            max_ops: parse("max_ops", &get("max_ops", "4"))?,
            read_only_fraction: parse("read_only_fraction", &get("read_only_fraction", "0.2"))?,
            dependent_fraction: parse("dependent_fraction", &get("dependent_fraction", "0"))?,
        };
        if settings.keys == 0 {
            return Err(bad("keys", "0", "must be at least 1"));
        }
        if settings.max_ops == 0 {
            return Err(bad("max_ops", "0", "must be at least 1"));
        }
        if !(0.0..=1.0).contains(&settings.read_only_fraction) {
            let value = settings.read_only_fraction.to_string();
            return Err(bad("read_only_fraction", value, "must be within 0..=1"));
        }
        if !(0.0..=1.0).contains(&settings.dependent_fraction) {
            let value = settings.dependent_fraction.to_string();
            return Err(bad("dependent_fraction", value, "must be within 0..=1"));
        }
        Ok(settings)
    }
}

/// The key with index `index`: its shard tag spreads keys round-robin over the partitions, so it
/// prints as `partition/index`.
pub(crate) fn key_of(placement: &Placement, index: u64) -> Key {
    key_among(placement.partition_count() as u32, index)
}

/// The key with index `index` among `partitions` partitions (its shard tag spreads keys
/// round-robin): for procedures rebuilt from a call (which know the partition count but not the
/// placement), and for whoever reads a run's keys afterwards (`augur nemesis`'s final reads;
/// `bank` places its accounts the same way).
pub fn key_among(partitions: u32, index: u64) -> Key {
    let partitions = u64::from(partitions.max(1));
    Key::numbered((index % partitions) as u32, index)
}

/// Decode a stored list (`"4 17 30"`; `""` is the empty list).
pub fn decode_list(text: &str) -> Result<Vec<u64>, ParseIntError> {
    text.split_ascii_whitespace().map(str::parse).collect()
}

/// Encode a list as space-separated decimals.
pub fn encode_list(list: &[u64]) -> String {
    let items: Vec<String> = list.iter().map(u64::to_string).collect();
    items.join(" ")
}

/// The value that appends `element` to the stored value `old`. A value that is not a list is kept
/// as text with the element after it, so the evidence of whatever corrupted it stays in the history.
fn appended(old: Option<&[u8]>, element: u64) -> String {
    let text = String::from_utf8_lossy(old.unwrap_or_default());
    match decode_list(&text) {
        Ok(mut list) => {
            list.push(element);
            encode_list(&list)
        }
        Err(_) => format!("{text} {element}"),
    }
}

pub struct ListAppend {
    settings: Settings,
    placement: Arc<Placement>,
    /// The next element to append; shared with the procedures, which reserve theirs before each
    /// attempt.
    next_element: Arc<AtomicU64>,
}

impl ListAppend {
    pub fn new(
        given: &BTreeMap<String, String>,
        placement: Arc<Placement>,
    ) -> Result<ListAppend, WorkloadError> {
        Ok(ListAppend {
            settings: Settings::from_given("list-append", SETTINGS, given)?,
            placement,
            next_element: Arc::new(AtomicU64::new(1)),
        })
    }
}

/// Draw the keys and sizes of a transaction over `settings.keys` keys: whether it is read-only,
/// and 1..=max_ops key indices.
pub(crate) fn draw(settings: &Settings, rng: &mut ChaCha8Rng) -> (bool, Vec<u64>) {
    let read_only = rng.random::<f64>() < settings.read_only_fraction;
    let n = rng.random_range(1..=settings.max_ops);
    let keys = (0..n).map(|_| rng.random_range(0..settings.keys)).collect();
    (read_only, keys)
}

impl Workload for ListAppend {
    fn name(&self) -> &'static str {
        "list-append"
    }

    fn next(&self, _home: NodeId, rng: &mut ChaCha8Rng) -> Box<dyn Procedure> {
        let (read_only, indices) = draw(&self.settings, rng);
        let keys = indices.into_iter().map(|i| key_of(&self.placement, i));
        if read_only {
            return Box::new(ReadKeys {
                workload: "list-append",
                keys: keys.collect(),
            });
        }
        let mut steps: Vec<Step> = keys
            .map(|k| {
                if rng.random_bool(0.5) {
                    Step::Append(k)
                } else {
                    Step::Read(k)
                }
            })
            .collect();
        // An update transaction always appends something.
        if !steps.iter().any(|s| !matches!(s, Step::Read(_))) {
            let last = steps.pop().expect("at least one operation");
            let (Step::Read(k) | Step::Append(k) | Step::AppendVia { pointer: k, .. }) = last;
            steps.push(Step::Append(k));
        }
        let dependent = self.settings.dependent_fraction;
        if dependent > 0.0 {
            for step in &mut steps {
                if let Step::Append(k) = step
                    && rng.random_bool(dependent)
                {
                    let targets = (0..2)
                        .map(|_| key_of(&self.placement, rng.random_range(0..self.settings.keys)))
                        .collect();
                    let pointer = k.clone();
                    *step = Step::AppendVia { pointer, targets };
                }
            }
        }
        Box::new(Append {
            steps,
            next_element: Some(Arc::clone(&self.next_element)),
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
    /// Read the list, then write it back with a fresh element appended.
    Append(Key),
    /// Read the list at `pointer`, then append to `targets[n % targets.len()]` where `n` is
    /// that list's length: which key it writes depends on what it read.
    AppendVia {
        pointer: Key,
        targets: Vec<Key>,
    },
}

/// `append`: reads and appends in program order.
struct Append {
    steps: Vec<Step>,
    /// Where each attempt reserves its elements. `None` in a procedure rebuilt from a call: it
    /// appends the elements the call carries, which the client reserved.
    next_element: Option<Arc<AtomicU64>>,
    /// The first element reserved for this attempt (`None` before
    /// [`prepare_attempt`](Procedure::prepare_attempt)): the `i`-th append in program order
    /// appends `first + i`.
    first: Option<u64>,
}

/// Everything an `append` attempt does, as a one-shot call carries it.
#[derive(Serialize, Deserialize)]
struct AppendArgs {
    steps: Vec<Step>,
    first: Option<u64>,
}

impl Append {
    fn appends(&self) -> u64 {
        self.steps
            .iter()
            .filter(|s| !matches!(s, Step::Read(_)))
            .count() as u64
    }
}

/// The error for an attempt that runs, or is shipped, without values reserved for it.
pub(crate) fn unprepared(procedure: &str) -> RequestError {
    RequestError::Invalid(format!(
        "{procedure} has no values reserved for this attempt (prepare_attempt was not called)"
    ))
}

/// Check the `count` fresh values a call of `procedure` ships, numbered from `first`: they must
/// have been reserved, and must not run past the largest value.
pub(crate) fn check_reserved(
    procedure: &str,
    first: Option<u64>,
    count: u64,
) -> Result<(), RequestError> {
    match first {
        None => Err(unprepared(procedure)),
        Some(first) if first.checked_add(count).is_none() => Err(RequestError::Invalid(format!(
            "{procedure}: values from {first} overflow"
        ))),
        Some(_) => Ok(()),
    }
}

impl Procedure for Append {
    fn name(&self) -> &'static str {
        "append"
    }

    fn read_only(&self) -> bool {
        false
    }

    fn run<'a>(&'a mut self, ops: &'a mut dyn Ops) -> BoxFuture<'a, Result<(), TxnError>> {
        Box::pin(async move {
            let mut element = self
                .first
                .ok_or_else(|| TxnError::Rejected(unprepared("append")))?;
            for step in &self.steps {
                match step {
                    Step::Read(key) => {
                        ops.read(key).await?;
                    }
                    Step::Append(key) => {
                        let old = ops.read(key).await?;
                        let new = appended(old.as_deref(), element);
                        element += 1;
                        ops.write(key.clone(), Some(Bytes::from(new)))?;
                    }
                    Step::AppendVia { pointer, targets } => {
                        let list = ops.read(pointer).await?;
                        let length = list
                            .as_deref()
                            .and_then(|text| std::str::from_utf8(text).ok())
                            .map_or(0, |text| text.split_ascii_whitespace().count());
                        let Some(key) = targets.get(length % targets.len().max(1)) else {
                            continue;
                        };
                        let old = ops.read(key).await?;
                        let new = appended(old.as_deref(), element);
                        element += 1;
                        ops.write(key.clone(), Some(Bytes::from(new)))?;
                    }
                }
            }
            Ok(())
        })
    }

    /// Reserve one element per append: per attempt, so a retry never reuses an aborted
    /// attempt's element, and before the attempt runs, so that the node running a one-shot
    /// call and the client replaying it append the same ones.
    fn prepare_attempt(&mut self) {
        if let Some(counter) = &self.next_element {
            self.first = Some(counter.fetch_add(self.appends(), Ordering::Relaxed));
        }
    }

    fn call(&self) -> Option<ProcedureCall> {
        let args = AppendArgs {
            steps: self.steps.clone(),
            first: self.first,
        };
        Some(ProcedureCall::encode("list-append", self.name(), &args))
    }
}

/// `read`: a read-only transaction reading keys in order (shared with `rw-register`).
pub(crate) struct ReadKeys {
    /// The workload that generated it, which its call names.
    pub(crate) workload: &'static str,
    pub(crate) keys: Vec<Key>,
}

/// A `read`'s one-shot arguments.
#[derive(Serialize, Deserialize)]
pub(crate) struct ReadKeysArgs {
    pub(crate) keys: Vec<Key>,
}

impl ReadKeys {
    /// The `read` of `workload` that `call` describes.
    pub(crate) fn from_call(
        workload: &'static str,
        call: &ProcedureCall,
    ) -> Result<ReadKeys, RequestError> {
        let ReadKeysArgs { keys } = call.decode()?;
        Ok(ReadKeys { workload, keys })
    }
}

impl Procedure for ReadKeys {
    fn name(&self) -> &'static str {
        "read"
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
        let args = ReadKeysArgs {
            keys: self.keys.clone(),
        };
        Some(ProcedureCall::encode(self.workload, self.name(), &args))
    }
}

/// The `list-append` procedure `call` names, rebuilt from its arguments.
pub(crate) fn instantiate(call: &ProcedureCall) -> Result<Box<dyn Procedure>, RequestError> {
    match call.procedure.as_str() {
        "append" => {
            let AppendArgs { steps, first } = call.decode()?;
            let append = Append {
                steps,
                next_element: None,
                first,
            };
            check_reserved("append", first, append.appends())?;
            Ok(Box::new(append))
        }
        "read" => Ok(Box::new(ReadKeys::from_call("list-append", call)?)),
        _ => Err(crate::unknown_procedure(call)),
    }
}

/// An in-memory [`Ops`] for the workloads' unit tests.
#[cfg(test)]
pub(crate) mod fake {
    use super::*;
    use augur_types::Value;

    /// A store plus one transaction's buffered writes, logging every operation as text.
    #[derive(Default)]
    pub(crate) struct FakeOps {
        pub(crate) store: BTreeMap<Key, Value>,
        pub(crate) buffered: Vec<(Key, Option<Value>)>,
        /// `r KEY VALUE` and `w KEY VALUE`, with `-` for no value.
        pub(crate) log: Vec<String>,
    }

    fn show(v: &Option<Value>) -> String {
        match v {
            Some(v) => String::from_utf8_lossy(v).into_owned(),
            None => "-".into(),
        }
    }

    impl FakeOps {
        pub(crate) fn set(&mut self, key: Key, value: &str) {
            self.store.insert(key, Bytes::from(value.to_string()));
        }

        pub(crate) fn get(&self, key: &Key) -> Option<String> {
            self.store
                .get(key)
                .map(|v| String::from_utf8_lossy(v).into_owned())
        }

        /// Apply the buffered writes and start afresh.
        pub(crate) fn commit(&mut self) {
            for (k, v) in self.buffered.drain(..) {
                match v {
                    Some(v) => self.store.insert(k, v),
                    None => self.store.remove(&k),
                };
            }
            self.log.clear();
        }

        /// Run `p` to completion against this store (without committing).
        pub(crate) fn run(&mut self, p: &mut dyn Procedure) -> Result<(), TxnError> {
            futures::executor::block_on(p.run(self))
        }
    }

    /// The procedure names the calls of `draws` transactions of `workload` use, so a test can
    /// check that its one-shot round trips covered every type.
    pub(crate) fn call_names(workload: &dyn Workload, draws: usize) -> Vec<String> {
        use rand::SeedableRng;
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let names: std::collections::BTreeSet<String> = (0..draws)
            .map(|_| {
                let p = workload.next(NodeId(0), &mut rng);
                p.call().expect("a one-shot call").procedure
            })
            .collect();
        names.into_iter().collect()
    }

    impl Ops for FakeOps {
        fn read<'a>(&'a mut self, key: &'a Key) -> BoxFuture<'a, Result<Option<Value>, TxnError>> {
            let own = self.buffered.iter().rev().find(|(k, _)| k == key);
            let value = match own {
                Some((_, v)) => v.clone(),
                None => self.store.get(key).cloned(),
            };
            self.log.push(format!("r {key} {}", show(&value)));
            Box::pin(async move { Ok(value) })
        }

        fn write(&mut self, key: Key, value: Option<Value>) -> Result<(), TxnError> {
            self.log.push(format!("w {key} {}", show(&value)));
            match self.buffered.iter_mut().find(|(k, _)| *k == key) {
                Some(slot) => slot.1 = value,
                None => self.buffered.push((key, value)),
            }
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::fake::FakeOps;
    use super::*;
    use augur_types::LatencyProfile;
    use rand::SeedableRng;

    fn placement(nodes: usize) -> Arc<Placement> {
        let lan = LatencyProfile::named("lan").unwrap();
        Arc::new(Placement::ring(lan, nodes, 1).unwrap())
    }

    fn workload(set: &[(&str, &str)]) -> Result<ListAppend, WorkloadError> {
        let given = set
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        ListAppend::new(&given, placement(3))
    }

    #[test]
    fn lists_decode_and_encode() {
        assert_eq!(decode_list("4 17 30").unwrap(), vec![4, 17, 30]);
        assert_eq!(decode_list("").unwrap(), Vec::<u64>::new());
        assert_eq!(decode_list(" 5 ").unwrap(), vec![5]);
        assert!(decode_list("4 x").is_err());
        assert_eq!(encode_list(&[4, 17, 30]), "4 17 30");
        assert_eq!(encode_list(&[]), "");
        assert_eq!(appended(None, 7), "7");
        assert_eq!(appended(Some(b""), 7), "7");
        assert_eq!(appended(Some(b"1 2"), 7), "1 2 7");
        assert_eq!(appended(Some(b"junk"), 7), "junk 7");
    }

    #[test]
    fn keys_spread_over_the_partitions() {
        let pl = placement(3);
        let k = key_of(&pl, 7);
        assert_eq!(k.to_string(), "1/7");
        assert_eq!(pl.partition_of(&k).0, 1);
    }

    #[test]
    fn appends_read_their_own_writes_and_use_fresh_elements() {
        let counter = Arc::new(AtomicU64::new(1));
        let (a, b) = (Key::numbered(0, 0), Key::numbered(1, 1));
        let mut p = Append {
            steps: vec![
                Step::Append(a.clone()),
                Step::Read(b.clone()),
                Step::Append(a.clone()),
                Step::Append(b.clone()),
            ],
            next_element: Some(Arc::clone(&counter)),
            first: None,
        };
        let mut ops = FakeOps::default();
        ops.set(b.clone(), "9");
        p.prepare_attempt();
        ops.run(&mut p).unwrap();
        assert_eq!(
            ops.log,
            [
                "r 0/0 -",
                "w 0/0 1",
                "r 1/1 9",
                "r 0/0 1",
                "w 0/0 1 2",
                "r 1/1 9",
                "w 1/1 9 3",
            ]
        );
        ops.commit();
        // A second attempt of the same procedure draws new elements.
        p.prepare_attempt();
        ops.run(&mut p).unwrap();
        ops.commit();
        assert_eq!(ops.get(&a).unwrap(), "1 2 4 5");
        assert_eq!(ops.get(&b).unwrap(), "9 3 6");
    }

    #[test]
    fn transactions_follow_the_settings() {
        let w = workload(&[("max_ops", "3"), ("keys", "5")]).unwrap();
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let (mut reads, mut appends) = (0, 0);
        for _ in 0..500 {
            let mut p = w.next(NodeId(0), &mut rng);
            let mut ops = FakeOps::default();
            p.prepare_attempt();
            ops.run(p.as_mut()).unwrap();
            assert!(!ops.log.is_empty());
            let writes = ops.log.iter().filter(|l| l.starts_with("w ")).count();
            let key_reads = ops.log.len() - writes;
            assert!(key_reads <= 3, "{:?}", ops.log);
            for line in &ops.log {
                let id: u64 = line.split(['/', ' ']).nth(2).unwrap().parse().unwrap();
                assert!(id < 5, "{line}");
            }
            match p.name() {
                "read" => {
                    assert!(p.read_only());
                    assert_eq!(writes, 0);
                    reads += 1;
                }
                "append" => {
                    assert!(!p.read_only());
                    assert!(writes >= 1);
                    appends += 1;
                }
                other => panic!("unexpected procedure {other}"),
            }
        }
        assert!(
            reads > 50 && appends > 300,
            "{reads} reads, {appends} appends"
        );
    }

    #[test]
    fn settings_are_echoed_and_validated() {
        let w = workload(&[]).unwrap();
        assert_eq!(
            w.settings(),
            serde_json::json!({"keys": 12, "max_ops": 4, "read_only_fraction": 0.2})
        );
        let e = workload(&[("key", "3")]).err().unwrap();
        assert!(matches!(e, WorkloadError::UnknownSetting { .. }), "{e}");
        assert!(
            e.to_string()
                .contains("keys, max_ops, read_only_fraction, dependent_fraction")
        );
        let w = workload(&[("dependent_fraction", "0.5")]).unwrap();
        assert_eq!(w.settings()["dependent_fraction"], 0.5);
        for bad in [
            ("keys", "0"),
            ("max_ops", "0"),
            ("read_only_fraction", "1.5"),
            ("read_only_fraction", "-0.1"),
            ("dependent_fraction", "2"),
            ("keys", "many"),
        ] {
            let e = workload(&[bad]).err().unwrap();
            assert!(matches!(e, WorkloadError::BadValue { .. }), "{bad:?}: {e}");
        }
        let all_reads = workload(&[("read_only_fraction", "1")]).unwrap();
        let mut rng = ChaCha8Rng::seed_from_u64(4);
        assert!((0..50).all(|_| all_reads.next(NodeId(0), &mut rng).read_only()));
    }

    #[test]
    fn calls_replay_on_the_node() {
        let w = workload(&[]).unwrap();
        crate::testing::assert_calls_replay(&w, 3, 400);
        assert_eq!(fake::call_names(&w, 200), ["append", "read"]);
        let mostly_reads = workload(&[("read_only_fraction", "0.7"), ("max_ops", "8")]).unwrap();
        crate::testing::assert_calls_replay(&mostly_reads, 3, 300);
    }

    #[test]
    fn every_attempt_ships_fresh_elements() {
        let w = workload(&[("read_only_fraction", "0")]).unwrap();
        crate::testing::assert_attempts_write_fresh_values(&w);
    }

    #[test]
    fn bad_calls_are_refused() {
        crate::testing::assert_refuses_bad_calls("list-append", "prepend", &["append", "read"]);
    }
}
