//! Benchmark workloads. Each is written once as [`augur_client::Procedure`]s over the small
//! read/write interface, so every protocol runs the same transaction code.

mod audit_rows;
pub mod bank;
pub mod list_append;
pub mod rubis;
pub mod rw_register;
pub mod smallbank;
pub mod synthetic_sparkle;
pub mod synthetic_str;
pub mod tpcc;
pub mod ycsb_t;

use augur_client::{Ops, Procedure, ProcedureCatalog, TxnError};
use augur_types::{Key, NodeId, PartitionId, Placement, ProcedureCall, RequestError, Value};
use futures::future::BoxFuture;
use rand_chacha::ChaCha8Rng;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

/// Workload names accepted by `--workload`.
pub const WORKLOADS: &[&str] = &[
    "synthetic-str",
    "synthetic-sparkle",
    "ycsb-t",
    "smallbank",
    "list-append",
    "rw-register",
    "bank",
    "tpcc",
    "rubis",
];

/// A source of transactions for closed- or open-loop clients.
pub trait Workload: Send + Sync {
    fn name(&self) -> &'static str;
    /// The next transaction for a client whose coordinator is `home`.
    fn next(&self, home: NodeId, rng: &mut ChaCha8Rng) -> Box<dyn Procedure>;
    /// The next transaction for the client of rank `rank` (from 0) among those whose
    /// coordinator is `home`: as [`next`](Workload::next), unless the workload gives each
    /// client rows of its own to keep (`tpcc`'s `fixed_home`).
    fn next_for(&self, home: NodeId, rank: usize, rng: &mut ChaCha8Rng) -> Box<dyn Procedure> {
        let _ = rank;
        self.next(home, rng)
    }
    /// Every setting in force (defaults included), echoed into results.
    fn settings(&self) -> serde_json::Value;
    /// Transactions that populate the initial database, run (each until it commits) before the
    /// warm-up. Empty for workloads whose absent keys read as their initial values.
    fn load(&self) -> Vec<Box<dyn Procedure>> {
        Vec::new()
    }
    /// The consistency audit `augur bench --check` runs after the measurement, if the workload
    /// has one.
    fn audit(&self) -> Option<Box<dyn Audit>> {
        None
    }
    /// The pause an emulated user takes before a transaction of type `procedure` (TPC-C's keying
    /// and think time, RUBiS's waiting time), when the workload's settings turn one on. The
    /// closed loop sleeps it before the transaction; procedures themselves cannot sleep.
    fn pause(&self, _procedure: &str, _rng: &mut ChaCha8Rng) -> Option<Duration> {
        None
    }
}

/// Implement [`Procedure`] for a transaction type written as an `async fn body(&mut self, ops)`
/// that returns its result, kept in the type's `result: Option<_>` field (tests and callers read
/// what the transaction saw there): the `tpcc` transactions and the `rubis` interactions.
///
/// The type is its own one-shot argument list: it serializes (its `result` skipped) into the
/// [`ProcedureCall`] of `$workload` named `$name`, so whatever its body reads from `self` ships
/// with the call.
macro_rules! result_procedure {
    ($ty:ty, $name:expr, $read_only:expr, $workload:expr) => {
        $crate::result_procedure!($ty, $name, $read_only, $workload, |_| None);
    };
    // `$declared`: a function of `&$ty` giving its `Procedure::declared_keys`.
    ($ty:ty, $name:expr, $read_only:expr, $workload:expr, $declared:expr) => {
        impl augur_client::Procedure for $ty {
            fn name(&self) -> &'static str {
                $name
            }

            fn read_only(&self) -> bool {
                $read_only
            }

            fn run<'a>(
                &'a mut self,
                ops: &'a mut dyn augur_client::Ops,
            ) -> futures::future::BoxFuture<'a, Result<(), augur_client::TxnError>> {
                Box::pin(async move {
                    self.result = None;
                    self.result = Some(self.body(ops).await?);
                    Ok(())
                })
            }

            fn call(&self) -> Option<augur_types::ProcedureCall> {
                Some(augur_types::ProcedureCall::encode($workload, $name, self))
            }

            fn declared_keys(&self) -> Option<augur_client::DeclaredKeys> {
                ($declared)(self)
            }
        }
    };
}
pub(crate) use result_procedure;

/// A load transaction: blind writes of the rows `rows` produces. The rows are made when the
/// transaction runs, so a whole population is never held in memory at once; blind writes make a
/// retry harmless.
pub(crate) struct LoadRows<F> {
    rows: F,
}

/// Box `rows` as a load procedure (see [`Workload::load`]).
pub(crate) fn load_rows<F>(rows: F) -> Box<dyn Procedure>
where
    F: FnMut() -> Vec<(Key, Value)> + Send + 'static,
{
    Box::new(LoadRows { rows })
}

impl<F> Procedure for LoadRows<F>
where
    F: FnMut() -> Vec<(Key, Value)> + Send,
{
    fn name(&self) -> &'static str {
        "load"
    }

    fn read_only(&self) -> bool {
        false
    }

    fn run<'a>(&'a mut self, ops: &'a mut dyn Ops) -> BoxFuture<'a, Result<(), TxnError>> {
        Box::pin(async move {
            for (key, value) in (self.rows)() {
                ops.write(key, Some(value))?;
            }
            Ok(())
        })
    }
}

/// The workload name of [`Observe`]'s one-shot call (`augur/read`), which every node's
/// [`Catalog`] knows whatever workload runs.
pub const OBSERVE_WORKLOAD: &str = "augur";

/// A read-only transaction that reads `keys` in order and keeps what it read: how a tool that
/// is not a workload (the nemesis's final reads) observes the store in either request form. In
/// the one-shot form its call is `augur/read`, and the client's copy is replayed over what the
/// node read, so [`Observe::values`] holds the values either way.
pub struct Observe {
    name: &'static str,
    keys: Vec<Key>,
    values: Arc<std::sync::Mutex<Vec<Option<Value>>>>,
}

impl Observe {
    /// Read `keys`, recorded in histories under the transaction name `name`.
    pub fn new(name: &'static str, keys: Vec<Key>) -> Observe {
        Observe {
            name,
            keys,
            values: Arc::default(),
        }
    }

    /// What the last attempt read, key by key.
    pub fn values(&self) -> Vec<Option<Value>> {
        self.values.lock().expect("observed values").clone()
    }
}

impl Procedure for Observe {
    fn name(&self) -> &'static str {
        self.name
    }

    fn read_only(&self) -> bool {
        true
    }

    fn run<'a>(&'a mut self, ops: &'a mut dyn Ops) -> BoxFuture<'a, Result<(), TxnError>> {
        Box::pin(async move {
            let mut values = Vec::with_capacity(self.keys.len());
            for key in &self.keys {
                values.push(ops.read(key).await?);
            }
            *self.values.lock().expect("observed values") = values;
            Ok(())
        })
    }

    fn call(&self) -> Option<ProcedureCall> {
        Some(read_call(self.keys.clone()))
    }
}

/// The one-shot call `augur/read` of `keys`: a read-only transaction that reads them in order,
/// which every node's [`Catalog`] runs. What [`Observe`] ships, and the [`Audit::call`] of an
/// audit that reads a fixed list of keys.
pub fn read_call(keys: Vec<Key>) -> ProcedureCall {
    let args = list_append::ReadKeysArgs { keys };
    ProcedureCall::encode(OBSERVE_WORKLOAD, "read", &args)
}

/// Every workload's procedures, by [`ProcedureCall`] name: what a node runs one-shot
/// transactions with. A procedure is rebuilt from its call alone (its arguments capture every
/// choice its body makes), so the instance a node runs does what the client's would.
#[derive(Clone, Copy, Debug, Default)]
pub struct Catalog;

impl ProcedureCatalog for Catalog {
    fn instantiate(&self, call: &ProcedureCall) -> Result<Box<dyn Procedure>, RequestError> {
        match call.workload.as_str() {
            "synthetic-str" => synthetic_str::instantiate(call),
            "synthetic-sparkle" => synthetic_sparkle::instantiate(call),
            "ycsb-t" => ycsb_t::instantiate(call),
            "smallbank" => smallbank::instantiate(call),
            "list-append" => list_append::instantiate(call),
            "rw-register" => rw_register::instantiate(call),
            "bank" => bank::instantiate(call),
            "tpcc" => tpcc::instantiate(call),
            "rubis" => rubis::instantiate(call),
            OBSERVE_WORKLOAD => match call.procedure.as_str() {
                "read" => Ok(Box::new(list_append::ReadKeys::from_call(
                    OBSERVE_WORKLOAD,
                    call,
                )?)),
                _ => Err(unknown_procedure(call)),
            },
            _ => Err(unknown_procedure(call)),
        }
    }

    /// TPC-C's rows keyed by a district's counters are locked through the district's row
    /// ([`tpcc::schema::counter_guard`]); no other workload's keys have their shape.
    fn lock_name(&self, key: &Key) -> Option<Key> {
        tpcc::schema::counter_guard(key)
    }
}

/// The error for a call no workload registered.
pub(crate) fn unknown_procedure(call: &ProcedureCall) -> RequestError {
    RequestError::UnknownProcedure(format!("{}/{}", call.workload, call.procedure))
}

/// One consistency condition evaluated after a run.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Condition {
    /// A stable name (`tpcc-1`, `smallbank-total`).
    pub name: String,
    pub passed: bool,
    /// What was compared, in words; on failure, the first offending rows.
    pub detail: String,
}

/// A workload's consistency conditions, evaluated inside one read-only transaction so that every
/// condition sees the same consistent snapshot. [`AuditProcedure`] runs it as a procedure, in
/// whichever request form the protocol takes.
pub trait Audit: Send {
    fn run<'a>(
        &'a mut self,
        ops: &'a mut dyn Ops,
    ) -> BoxFuture<'a, Result<Vec<Condition>, TxnError>>;

    /// The audit as a one-shot call a node's [`Catalog`] can run: one whose reads follow from
    /// the call alone, so that the node's run reads what this audit would. The node's copy only
    /// has to issue the same reads (its conditions are not used): this audit is replayed over
    /// what the node read, and evaluates the conditions with whatever it keeps on the client
    /// (a tally of money moved). `None` (the default) for an audit that only runs
    /// interactively, which a protocol that orders whole transactions (`calvin`, `s-smr`)
    /// cannot run.
    fn call(&self) -> Option<ProcedureCall> {
        None
    }
}

/// A workload's [`Audit`] as a read-only [`Procedure`] named `audit`, so that it runs like any
/// transaction: interactively, or shipped whole as the audit's [`Audit::call`] to a protocol
/// that takes only one-shot transactions.
pub struct AuditProcedure {
    audit: Box<dyn Audit>,
    conditions: Option<Vec<Condition>>,
}

impl AuditProcedure {
    pub fn new(audit: Box<dyn Audit>) -> AuditProcedure {
        AuditProcedure {
            audit,
            conditions: None,
        }
    }

    /// The conditions the last attempt evaluated (`None` before one ran to its end). Only a
    /// committed attempt's are a consistent snapshot's.
    pub fn take_conditions(&mut self) -> Option<Vec<Condition>> {
        self.conditions.take()
    }
}

impl Procedure for AuditProcedure {
    fn name(&self) -> &'static str {
        "audit"
    }

    fn read_only(&self) -> bool {
        true
    }

    fn run<'a>(&'a mut self, ops: &'a mut dyn Ops) -> BoxFuture<'a, Result<(), TxnError>> {
        Box::pin(async move {
            // An attempt that fails leaves none, not an earlier attempt's.
            self.conditions = None;
            self.conditions = Some(self.audit.run(ops).await?);
            Ok(())
        })
    }

    fn call(&self) -> Option<ProcedureCall> {
        self.audit.call()
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WorkloadError {
    #[error("unknown workload '{0}'; valid workloads: {valid}", valid = WORKLOADS.join(", "))]
    Unknown(String),
    #[error("unknown setting '{key}' for workload {workload}; valid settings: {valid}")]
    UnknownSetting {
        workload: &'static str,
        key: String,
        valid: String,
    },
    #[error("bad value '{value}' for {key}: {why}")]
    BadValue {
        key: String,
        value: String,
        why: String,
    },
}

/// Settings that shrink the named workload's data for a smoke run (`augur bench --config
/// --smoke`, which checks that an experiment file runs, not what it measures): where `settings`
/// ask for a database larger than one smoke second needs, the smaller value to use instead.
/// TPC-C keeps a warehouse per node (at least two, which Stock-Level across districts and
/// remote transactions need), 30 customers per district and 1,000 items (loading the
/// specification's, even scaled to 300 and 10,000 as the STR files ask, over a 27-node WAN took
/// most of a smoke pass); RUBiS 1,000 users, 300 items, 500 old items and at most 5 bids per
/// item; the other workloads load little and keep their settings.
pub fn smoke_settings(
    name: &str,
    settings: &BTreeMap<String, String>,
    nodes: usize,
) -> Vec<SmokeSetting> {
    // `key` as asked (or its default), if larger than `enough`.
    let shrink = |key: &str, default: u64, enough: u64| -> Option<SmokeSetting> {
        let asked = settings
            .get(key)
            .map_or(Some(default), |v| v.parse::<u64>().ok())?;
        (asked > enough).then(|| SmokeSetting {
            key: key.to_string(),
            asked: asked.to_string(),
            smaller: enough.to_string(),
        })
    };
    match name {
        "tpcc" => [
            // The default is one warehouse per node; a file asking for fewer keeps them.
            shrink("warehouses", 0, nodes.max(2) as u64),
            shrink(
                "customers_per_district",
                u64::from(tpcc::SPEC_CUSTOMERS),
                30,
            ),
            shrink("items", u64::from(tpcc::SPEC_ITEMS), 1_000),
        ]
        .into_iter()
        .flatten()
        .collect(),
        "rubis" => [
            shrink("users", 100_000, 1_000),
            shrink("items", 3_300, 300),
            shrink("old_items", 50_000, 500),
            shrink("bids_per_item", 20, 5),
        ]
        .into_iter()
        .flatten()
        .collect(),
        _ => Vec::new(),
    }
}

/// A setting [`smoke_settings`] shrinks: its key, the value asked for and the one to use.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SmokeSetting {
    pub key: String,
    pub asked: String,
    pub smaller: String,
}

/// Build the named workload with `settings` (`--set key=value`) over `placement`.
pub fn build(
    name: &str,
    settings: &BTreeMap<String, String>,
    placement: Arc<Placement>,
) -> Result<Arc<dyn Workload>, WorkloadError> {
    match name {
        "synthetic-str" => Ok(Arc::new(synthetic_str::SyntheticStr::new(
            settings, placement,
        )?)),
        "list-append" => Ok(Arc::new(list_append::ListAppend::new(settings, placement)?)),
        "rw-register" => Ok(Arc::new(rw_register::RwRegister::new(settings, placement)?)),
        "bank" => Ok(Arc::new(bank::Bank::new(settings, placement)?)),
        "ycsb-t" => Ok(Arc::new(ycsb_t::YcsbT::new(settings, placement)?)),
        "smallbank" => Ok(Arc::new(smallbank::SmallBank::new(settings, placement)?)),
        "synthetic-sparkle" => Ok(Arc::new(synthetic_sparkle::SyntheticSparkle::new(
            settings, placement,
        )?)),
        "tpcc" => Ok(Arc::new(tpcc::Tpcc::new(settings, placement)?)),
        "rubis" => Ok(Arc::new(rubis::Rubis::new(settings, placement)?)),
        other => Err(WorkloadError::Unknown(other.to_string())),
    }
}

/// The keys a workload accepts, for validation and error messages.
pub fn settings_of(name: &str) -> Result<&'static [&'static str], WorkloadError> {
    match name {
        "synthetic-str" => Ok(synthetic_str::SETTINGS),
        "list-append" => Ok(list_append::SETTINGS),
        "rw-register" => Ok(rw_register::SETTINGS),
        "bank" => Ok(bank::SETTINGS),
        "ycsb-t" => Ok(ycsb_t::SETTINGS),
        "smallbank" => Ok(smallbank::SETTINGS),
        "synthetic-sparkle" => Ok(synthetic_sparkle::SETTINGS),
        "tpcc" => Ok(tpcc::SETTINGS),
        "rubis" => Ok(rubis::SETTINGS),
        other => Err(WorkloadError::Unknown(other.to_string())),
    }
}

/// Refuse a setting `workload` does not take, naming the valid ones.
pub(crate) fn reject_unknown(
    workload: &'static str,
    valid: &[&str],
    given: &BTreeMap<String, String>,
) -> Result<(), WorkloadError> {
    match given.keys().find(|k| !valid.contains(&k.as_str())) {
        Some(key) => Err(WorkloadError::UnknownSetting {
            workload,
            key: key.clone(),
            valid: valid.join(", "),
        }),
        None => Ok(()),
    }
}

/// A setting's value that parses but is out of range, and why.
pub(crate) fn bad_value(key: &str, value: impl ToString, why: impl ToString) -> WorkloadError {
    WorkloadError::BadValue {
        key: key.into(),
        value: value.to_string(),
        why: why.to_string(),
    }
}

/// Parse one setting value, naming the key on failure.
pub(crate) fn parse<T: std::str::FromStr>(key: &str, value: &str) -> Result<T, WorkloadError>
where
    T::Err: std::fmt::Display,
{
    value.parse().map_err(|e: T::Err| WorkloadError::BadValue {
        key: key.to_string(),
        value: value.to_string(),
        why: e.to_string(),
    })
}

/// Where a client's home rows (TPC-C's home warehouse, RUBiS's acting user) live relative to the
/// node it runs on. Which is chosen decides where a workload's contention falls: with `Master`
/// the rows a node's clients update are written by that node alone, so their contention is local;
/// with `Local` every replica's clients write them, so it is remote too.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Home {
    /// In a partition the node replicates.
    Local,
    /// In a partition the node is the master of (as `Local` if it masters none).
    Master,
    /// Anywhere.
    Uniform,
}

impl Home {
    /// The setting's values, for error messages.
    const VALUES: &'static str = "local, master or uniform";

    /// Parse setting `key`'s value.
    pub(crate) fn parse(key: &str, value: &str) -> Result<Home, WorkloadError> {
        match value {
            "local" => Ok(Home::Local),
            "master" => Ok(Home::Master),
            "uniform" => Ok(Home::Uniform),
            other => Err(bad_value(key, other, format!("must be {}", Home::VALUES))),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Home::Local => "local",
            Home::Master => "master",
            Home::Uniform => "uniform",
        }
    }

    /// The partitions a client of `node` draws its home rows from; empty means all of them.
    pub(crate) fn partitions(self, placement: &Placement, node: NodeId) -> Vec<PartitionId> {
        let replicated = || {
            placement
                .partitions()
                .filter(|p| placement.replicates(node, *p))
                .collect::<Vec<_>>()
        };
        match self {
            Home::Uniform => Vec::new(),
            Home::Local => replicated(),
            Home::Master => {
                let mastered: Vec<PartitionId> = placement.mastered_by(node).collect();
                if mastered.is_empty() {
                    replicated()
                } else {
                    mastered
                }
            }
        }
    }
}

/// Tests shared by the workloads' modules.
#[cfg(test)]
mod hash_placement_tests;

#[cfg(test)]
mod load_tests;

#[cfg(test)]
pub(crate) mod testing {
    use super::*;
    use crate::list_append::fake::FakeOps;
    use rand::SeedableRng;

    /// Generate `count` transactions of `workload` for clients of every node, and check that each
    /// survives the one-shot round trip: it has a call, the [`Catalog`] rebuilds it from that
    /// call, and the rebuilt procedure performs exactly the same reads and writes (and the same
    /// outcome) as the original against the same data. The store starts from `workload.load()`
    /// and each transaction's writes are applied before the next, so later transactions see
    /// populated rows.
    pub(crate) fn assert_calls_replay(workload: &dyn Workload, nodes: u32, count: usize) {
        let mut db = FakeOps::default();
        for mut load in workload.load() {
            db.run(load.as_mut()).expect("load runs");
            db.commit();
        }
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let mut names = std::collections::BTreeSet::new();
        for i in 0..count {
            let home = NodeId(i as u32 % nodes);
            let mut original = workload.next(home, &mut rng);
            original.prepare_attempt();
            let call = original
                .call()
                .unwrap_or_else(|| panic!("{} has no one-shot call", original.name()));
            assert_eq!(call.workload, workload.name(), "{}", original.name());
            names.insert(call.procedure.clone());
            let mut rebuilt = Catalog
                .instantiate(&call)
                .unwrap_or_else(|e| panic!("{}: {e}", call.procedure));
            assert_eq!(rebuilt.name(), original.name());
            assert_eq!(rebuilt.read_only(), original.read_only());
            assert_eq!(
                rebuilt.call().as_ref(),
                Some(&call),
                "a rebuilt call re-encodes as itself"
            );

            let mut twin = FakeOps {
                store: db.store.clone(),
                ..FakeOps::default()
            };
            let ran = db.run(original.as_mut());
            let reran = twin.run(rebuilt.as_mut());
            assert_eq!(ran, reran, "{}: outcome", call.procedure);
            assert_eq!(db.log, twin.log, "{}: operations", call.procedure);
            if ran.is_ok() {
                db.commit();
            } else {
                db.buffered.clear();
                db.log.clear();
            }
        }
        assert!(!names.is_empty());
    }

    /// The writes `p` makes against an empty store.
    fn writes(p: &mut dyn Procedure) -> Vec<String> {
        let mut ops = FakeOps::default();
        ops.run(p).unwrap();
        ops.log
            .into_iter()
            .filter(|l| l.starts_with("w "))
            .collect()
    }

    /// For a workload whose attempts draw unique values to write in `prepare_attempt`: two
    /// attempts of one transaction write different values, each shipped in its call, and an
    /// attempt never prepared is refused (rebuilt or run) rather than writing a stale value.
    pub(crate) fn assert_attempts_write_fresh_values(workload: &dyn Workload) {
        let mut p = workload.next(NodeId(0), &mut ChaCha8Rng::seed_from_u64(8));
        p.prepare_attempt();
        let first_call = p.call().unwrap();
        let first = writes(p.as_mut());
        p.prepare_attempt();
        let second_call = p.call().unwrap();
        let second = writes(p.as_mut());
        assert!(!first.is_empty());
        assert_eq!(first.len(), second.len());
        for (a, b) in first.iter().zip(&second) {
            assert_ne!(a, b, "a retry writes a new value");
        }
        // The node runs each attempt with the values the client reserved for it.
        let rebuilt = |call: &ProcedureCall| writes(Catalog.instantiate(call).unwrap().as_mut());
        assert_eq!(rebuilt(&first_call), first);
        assert_eq!(rebuilt(&second_call), second);

        let mut unprepared = workload.next(NodeId(0), &mut ChaCha8Rng::seed_from_u64(1));
        let e = refused(&unprepared.call().unwrap());
        assert!(e.to_string().contains("prepare_attempt"), "{e}");
        let e = FakeOps::default().run(unprepared.as_mut()).unwrap_err();
        assert!(
            matches!(e, TxnError::Rejected(RequestError::Invalid(_))),
            "{e}"
        );
    }

    /// What the [`Catalog`] answers for `call`, which it must refuse.
    pub(crate) fn refused(call: &ProcedureCall) -> RequestError {
        match Catalog.instantiate(call) {
            Ok(p) => panic!("{} was rebuilt from {call:?}", p.name()),
            Err(e) => e,
        }
    }

    /// Check that `workload`'s catalogue refuses a procedure it does not register (`unknown`)
    /// and, for each of `procedures`, arguments that do not decode, with errors that say which.
    pub(crate) fn assert_refuses_bad_calls(workload: &str, unknown: &str, procedures: &[&str]) {
        assert_eq!(
            refused(&ProcedureCall::encode(workload, unknown, &())),
            RequestError::UnknownProcedure(format!("{workload}/{unknown}"))
        );
        for procedure in procedures {
            for garbage in [vec![], vec![0xff; 3], vec![0x80; 40]] {
                let call = ProcedureCall {
                    workload: workload.into(),
                    procedure: procedure.to_string(),
                    args: garbage,
                    args_format: Default::default(),
                };
                match refused(&call) {
                    RequestError::Invalid(why) => assert!(why.contains(procedure), "{why}"),
                    other => panic!("{procedure}: {other:?}"),
                }
            }
        }
    }
}
