//! The checker on large valid histories: 100,000 transactions of list-append and of
//! rw-register, generated as a serial execution by several clients whose invocations and
//! completions interleave around each transaction's serial point, checked at strict
//! serializability. The register histories write blind (no read of the key first) often, so
//! their version orders are partly unknown and the checker considers the placements of those
//! writes (`rw_register`: about a third of writes blind, `rw_register_blind_10`: a tenth, with
//! 1% of attempts ending with an unknown outcome; also checked at serializability, where real
//! time settles nothing, and there with commit timestamps shuffled, so that the first guess of
//! a placement fails).

use augur_check::{CheckOptions, ValueModel, check};
use augur_types::IsolationLevel;
use augur_types::history::{History, HistoryHeader, Op, RecordedOutcome, TxnRecord};
use criterion::{Criterion, criterion_group, criterion_main};
use std::collections::{BTreeMap, HashMap};
use std::hint::black_box;

const TXNS: usize = 100_000;
const CLIENTS: usize = 16;
/// Keys in use at any time.
const ACTIVE_KEYS: usize = 1_000;
/// Like Elle's generators, a key is retired after this many writes so lists stay short.
const WRITES_PER_KEY: u32 = 64;
const MAX_OPS: u64 = 4;

/// xorshift64*: enough randomness for a benchmark, with no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// The keys: `ACTIVE_KEYS` slots, each holding a key until it has had its writes.
struct Keys {
    slots: Vec<usize>,
    writes: Vec<u32>,
    names: Vec<String>,
}

impl Keys {
    fn new() -> Keys {
        let mut keys = Keys {
            slots: Vec::new(),
            writes: Vec::new(),
            names: Vec::new(),
        };
        for _ in 0..ACTIVE_KEYS {
            let k = keys.fresh();
            keys.slots.push(k);
        }
        keys
    }

    fn fresh(&mut self) -> usize {
        let k = self.names.len();
        self.names.push(format!("{}/{k}", k % 8));
        self.writes.push(0);
        k
    }

    fn pick(&mut self, rng: &mut Rng) -> usize {
        self.slots[rng.below(ACTIVE_KEYS as u64) as usize]
    }

    fn wrote(&mut self, k: usize) {
        self.writes[k] += 1;
        if self.writes[k] == WRITES_PER_KEY
            && let Some(slot) = self.slots.iter().position(|&s| s == k)
        {
            self.slots[slot] = self.fresh();
        }
    }
}

/// A transaction's shape: what it does to the state, given its buffer of writes.
trait Model {
    /// Make one transaction's ops, reading `state` (committed values) and buffering writes in
    /// `buffer`.
    fn ops(
        &mut self,
        rng: &mut Rng,
        keys: &mut Keys,
        state: &[Option<String>],
        buffer: &mut HashMap<usize, String>,
    ) -> Vec<Op>;
}

struct ListAppend {
    next_element: u64,
}

impl Model for ListAppend {
    fn ops(
        &mut self,
        rng: &mut Rng,
        keys: &mut Keys,
        state: &[Option<String>],
        buffer: &mut HashMap<usize, String>,
    ) -> Vec<Op> {
        let mut ops = Vec::new();
        for _ in 0..1 + rng.below(MAX_OPS) {
            let k = keys.pick(rng);
            let current = buffer.get(&k).cloned().or_else(|| state[k].clone());
            ops.push(Op::Read {
                key: keys.names[k].clone(),
                value: current.clone(),
            });
            if rng.below(2) == 0 {
                self.next_element += 1;
                let list = match current {
                    Some(l) => format!("{l} {}", self.next_element),
                    None => self.next_element.to_string(),
                };
                ops.push(Op::Write {
                    key: keys.names[k].clone(),
                    value: Some(list.clone()),
                });
                buffer.insert(k, list);
            }
        }
        ops
    }
}

/// Registers: an operation only reads its key (35%) or writes it (65%), and `blind_percent` of
/// the writes do not read the key first.
struct RwRegister {
    next_value: u64,
    blind_percent: u64,
}

impl Model for RwRegister {
    fn ops(
        &mut self,
        rng: &mut Rng,
        keys: &mut Keys,
        state: &[Option<String>],
        buffer: &mut HashMap<usize, String>,
    ) -> Vec<Op> {
        let mut ops = Vec::new();
        for _ in 0..1 + rng.below(MAX_OPS) {
            let k = keys.pick(rng);
            let write = rng.below(100) >= 35;
            if !write || rng.below(100) >= self.blind_percent {
                ops.push(Op::Read {
                    key: keys.names[k].clone(),
                    value: buffer.get(&k).cloned().or_else(|| state[k].clone()),
                });
            }
            if write {
                self.next_value += 1;
                let value = self.next_value.to_string();
                ops.push(Op::Write {
                    key: keys.names[k].clone(),
                    value: Some(value.clone()),
                });
                buffer.insert(k, value);
            }
        }
        ops
    }
}

/// A serial execution: transaction `i` takes effect at `10 i + 5` µs, between its invocation
/// and completion, on a client with nothing else in flight; 3% of attempts abort, and
/// `unknown_percent` end with an unknown outcome (half of those took effect).
fn generate(model: &mut dyn Model, seed: u64, unknown_percent: u64) -> History {
    let mut rng = Rng(seed);
    let mut keys = Keys::new();
    let mut state: Vec<Option<String>> = Vec::new();
    let mut busy_until = [0u64; CLIENTS];
    let mut txns = Vec::with_capacity(TXNS);
    let mut buffer = HashMap::new();
    for index in 0..TXNS {
        let serial_point = 10 * index as u64 + 5;
        let client = loop {
            let c = rng.below(CLIENTS as u64) as usize;
            if busy_until[c] < serial_point {
                break c;
            }
        };
        let invoke = (serial_point - 1)
            .saturating_sub(rng.below(40))
            .max(busy_until[client] + 1);
        let complete = serial_point + 1 + rng.below(40);
        busy_until[client] = complete;
        state.resize(keys.names.len(), None);
        buffer.clear();
        let ops = model.ops(&mut rng, &mut keys, &state, &mut buffer);
        let roll = rng.below(100);
        let outcome = if roll < 3 {
            RecordedOutcome::Aborted {
                reason: "write_write_conflict".into(),
            }
        } else if roll < 3 + unknown_percent {
            if rng.below(2) == 0 {
                for (&k, v) in &buffer {
                    state[k] = Some(v.clone());
                    keys.wrote(k);
                }
            }
            RecordedOutcome::Unknown
        } else {
            for (&k, v) in &buffer {
                state[k] = Some(v.clone());
                keys.wrote(k);
            }
            RecordedOutcome::Committed {
                commit_ts: serial_point,
            }
        };
        txns.push(TxnRecord {
            index,
            client: client as u64,
            txn: Some(index as u64),
            name: "bench".into(),
            read_only: ops.iter().all(|o| matches!(o, Op::Read { .. })),
            invoke_us: invoke,
            complete_us: complete,
            ops,
            outcome,
            ops_unknown: false,
            call: None,
        });
    }
    History {
        header: HistoryHeader {
            format: 1,
            protocol: "serial".into(),
            workload: "bench".into(),
            seed,
            isolation: "strict serializable".into(),
            faults: "none".into(),
            settings: BTreeMap::new(),
        },
        txns,
    }
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("check_100k");
    group.sample_size(10);

    let history = generate(&mut ListAppend { next_element: 0 }, 1, 0);
    let options = CheckOptions::new(IsolationLevel::StrictSerializable, ValueModel::ListAppend);
    assert!(check(&history, &options).is_valid());
    group.bench_function("list_append", |b| {
        b.iter(|| check(black_box(&history), &options))
    });
    drop(history);

    let history = generate(
        &mut RwRegister {
            next_value: 0,
            blind_percent: 33,
        },
        2,
        0,
    );
    let options = CheckOptions::new(IsolationLevel::StrictSerializable, ValueModel::RwRegister);
    assert!(check(&history, &options).is_valid());
    group.bench_function("rw_register", |b| {
        b.iter(|| check(black_box(&history), &options))
    });
    let mut options = options;
    options.commit_order_evidence = true;
    assert!(check(&history, &options).is_valid());
    group.bench_function("rw_register_commit_order", |b| {
        b.iter(|| check(black_box(&history), &options))
    });
    drop(history);

    let history = generate(
        &mut RwRegister {
            next_value: 0,
            blind_percent: 10,
        },
        3,
        1,
    );
    let options = CheckOptions::new(IsolationLevel::StrictSerializable, ValueModel::RwRegister);
    let report = check(&history, &options);
    assert!(report.is_valid(), "{:?}", report.undecided);
    eprintln!("rw_register_blind_10: {:?}", report.stats);
    group.bench_function("rw_register_blind_10", |b| {
        b.iter(|| check(black_box(&history), &options))
    });
    // Without real time, nothing settles the blind writes' places up front.
    let options = CheckOptions::new(IsolationLevel::Serializable, ValueModel::RwRegister);
    let report = check(&history, &options);
    assert!(report.is_valid(), "{:?}", report.undecided);
    eprintln!("rw_register_blind_10_serializable: {:?}", report.stats);
    group.bench_function("rw_register_blind_10_serializable", |b| {
        b.iter(|| check(black_box(&history), &options))
    });
    // Commit timestamps that say nothing of the serial order: the first guess fails, the
    // second (a topological order of the known edges) holds.
    let mut shuffled = history.clone();
    let mut rng = Rng(4);
    for t in &mut shuffled.txns {
        if let RecordedOutcome::Committed { commit_ts } = &mut t.outcome {
            *commit_ts = rng.below(1 << 40);
        }
    }
    let report = check(&shuffled, &options);
    assert!(report.is_valid(), "{:?}", report.undecided);
    eprintln!(
        "rw_register_blind_10_shuffled_timestamps: {:?}",
        report.stats
    );
    group.bench_function("rw_register_blind_10_shuffled_timestamps", |b| {
        b.iter(|| check(black_box(&shuffled), &options))
    });
    // A violation only the placements show, planted at the end: two blind writes of a fresh
    // key, each read by a transaction that also read another write of the other's writer.
    let mut planted = shuffled;
    let n = planted.txns.len();
    let mut add = |ops: Vec<Op>| {
        let index = planted.txns.len();
        planted.txns.push(TxnRecord {
            index,
            client: 1_000 + index as u64,
            txn: Some(index as u64),
            name: "planted".into(),
            read_only: ops.iter().all(|o| matches!(o, Op::Read { .. })),
            invoke_us: 10 * n as u64,
            complete_us: 10 * n as u64 + 100,
            ops,
            outcome: RecordedOutcome::Committed {
                commit_ts: 10 * n as u64 + 50,
            },
            ops_unknown: false,
            call: None,
        });
    };
    let op = |write: bool, key: &str, value: &str| {
        let (key, value) = (key.to_string(), Some(value.to_string()));
        if write {
            Op::Write { key, value }
        } else {
            Op::Read { key, value }
        }
    };
    add(vec![op(true, "px", "1"), op(true, "pz", "1")]);
    add(vec![op(true, "px", "2"), op(true, "py", "2")]);
    add(vec![op(false, "px", "1"), op(false, "py", "2")]);
    add(vec![op(false, "px", "2"), op(false, "pz", "1")]);
    let report = check(&planted, &options);
    assert!(
        !report.is_valid() && report.undecided.is_empty(),
        "{:?} {:?}",
        report.stats,
        report.undecided
    );
    eprintln!("rw_register_blind_10_planted_violation: {:?}", report.stats);
    group.bench_function("rw_register_blind_10_planted_violation", |b| {
        b.iter(|| check(black_box(&planted), &options))
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
