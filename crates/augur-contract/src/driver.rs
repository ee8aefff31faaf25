//! Running a procedure's body at a node, one read at a time, without an executor.
//!
//! A [`Procedure`]'s body is async code over [`Ops`]: each read is a point where the body waits
//! for a value. A node cannot block its handler on a read (the value comes from another
//! partition, a sibling, or the protocol's own read path), so it drives the body with a
//! [`Driver`]: [`Driver::resume`] polls the body until it needs a key the driver cannot answer
//! ([`Progress::Needs`]) or ends ([`Progress::Ended`]), and the owner answers the key later
//! and resumes, within whatever handler the value arrives in. Nothing is re-run: a body that
//! reads hundreds of keys (a TPC-C Stock-Level) is polled once per key it waits for.
//!
//! A read is answered, in order, by the run's own last write of the key (as the interactive
//! client answers it), by a value [`supplied`](Driver::supply) for the key (kept for every
//! later read of it: the order-then-execute executors, which fetch each key once), or by an
//! [`answer`](Driver::answer) to the one read waiting (the coordinator's one-shot runner, which
//! sends every read to its protocol as an interactive client would, so a repeated read is
//! served again). Every node that runs procedures uses this one driver:
//! `augur_protocols::common::at_coordinator`, the order-then-execute executors, and `rococo`'s
//! runs over values at hand ([`run`]).

use crate::forms::Procedures;
use crate::procedure::{BoxFuture, Ops, Procedure};
use crate::txn::{TxnError, TxnInfo};
use augur_types::{AbortReason, ExecutedOp, Key, ProcedureCall, RequestError, Value};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

/// What one run of a procedure did.
#[derive(Debug)]
pub struct Run {
    /// Every operation that succeeded, in program order (for the client's history).
    pub ops: Vec<ExecutedOp>,
    /// Keys read from the store (not from the run's own writes), in first-read order.
    pub reads: Vec<Key>,
    /// The last value written to each key.
    pub writes: BTreeMap<Key, Option<Value>>,
    /// How the body ended; `Err(Aborted(UserRollback))` is a rollback.
    pub end: Result<(), TxnError>,
    /// The first key the body read that the source did not have (under [`Source::Read`]):
    /// the run ended there, with `ValidationFailed`.
    pub missing: Option<Key>,
    /// What the body noted for the speculation callbacks ([`Ops::note`]).
    pub info: TxnInfo,
    /// The body waited on something other than a read (never, for a procedure that only
    /// reads and writes): the run was abandoned, with `ValidationFailed`.
    pub stalled: bool,
}

impl Run {
    /// The procedure steps the run took, for the simulator's CPU model ([`crate::Work::steps`]):
    /// one per read it issued and one for its end. A write is buffered in the run, as a
    /// client session buffers it until the commit, and takes no step of its own: the same
    /// procedure is charged the same whether a node runs it here or through a session.
    pub fn steps(&self) -> u32 {
        let reads = self
            .ops
            .iter()
            .filter(|op| matches!(op, ExecutedOp::Read { .. }))
            .count();
        u32::try_from(reads + 1).unwrap_or(u32::MAX)
    }

    /// The run's writes as an interactive client ships them with its commit: each key once,
    /// in the order it was first written, with the last value written to it.
    pub fn writes_in_order(&self) -> Vec<(Key, Option<Value>)> {
        let mut order: Vec<(Key, Option<Value>)> = Vec::new();
        let mut at: HashMap<&Key, usize> = HashMap::new();
        for op in &self.ops {
            if let ExecutedOp::Write { key, value } = op {
                match at.get(key) {
                    Some(&i) => order[i].1 = value.clone(),
                    None => {
                        at.insert(key, order.len());
                        order.push((key.clone(), value.clone()));
                    }
                }
            }
        }
        order
    }
}

/// The keys a run read from the store, in first-read order ([`Run::reads`]), with a set beside
/// the list to tell a first read: a run may read a great many keys (the TPC-C audit reads every
/// row), and looking each up in the list would cost the square of them.
#[derive(Default)]
struct FirstReads {
    order: Vec<Key>,
    seen: HashSet<Key>,
}

impl FirstReads {
    fn note(&mut self, key: &Key) {
        if self.seen.insert(key.clone()) {
            self.order.push(key.clone());
        }
    }
}

/// What a run has done so far, shared between its body and its driver.
#[derive(Default)]
struct Recorded {
    supplied: BTreeMap<Key, Option<Value>>,
    /// The answer to the read waiting, taken by that read alone.
    answer: Option<Result<Option<Value>, TxnError>>,
    ops: Vec<ExecutedOp>,
    reads: FirstReads,
    writes: BTreeMap<Key, Option<Value>>,
    info: TxnInfo,
    /// Why a write is refused (a read-only transaction), if it is.
    refuse_writes: Option<TxnError>,
    /// The key the body waits for.
    waiting: Option<Key>,
}

impl Recorded {
    /// What the run did, taken out, as a run that ended with `end`.
    fn take_run(&mut self, end: Result<(), TxnError>, missing: Option<Key>, stalled: bool) -> Run {
        Run {
            ops: std::mem::take(&mut self.ops),
            reads: std::mem::take(&mut self.reads).order,
            writes: std::mem::take(&mut self.writes),
            end,
            missing,
            info: std::mem::take(&mut self.info),
            stalled,
        }
    }
}

/// The [`Ops`] a driven body runs against (see the module docs for how a read is answered).
struct DrivenOps(Arc<Mutex<Recorded>>);

impl Ops for DrivenOps {
    fn read<'a>(&'a mut self, key: &'a Key) -> BoxFuture<'a, Result<Option<Value>, TxnError>> {
        let state = Arc::clone(&self.0);
        Box::pin(std::future::poll_fn(move |_| {
            let mut s = state.lock().expect("run state");
            let value = if let Some(v) = s.writes.get(key) {
                v.clone()
            } else if let Some(v) = s.supplied.get(key) {
                let v = v.clone();
                s.reads.note(key);
                v
            } else if s.waiting.as_ref() == Some(key)
                && let Some(answer) = s.answer.take()
            {
                s.waiting = None;
                match answer {
                    Ok(v) => {
                        s.reads.note(key);
                        v
                    }
                    Err(e) => return Poll::Ready(Err(e)),
                }
            } else {
                s.waiting = Some(key.clone());
                return Poll::Pending;
            };
            s.waiting = None;
            s.ops.push(ExecutedOp::Read {
                key: key.clone(),
                value: value.clone(),
            });
            Poll::Ready(Ok(value))
        }))
    }

    fn write(&mut self, key: Key, value: Option<Value>) -> Result<(), TxnError> {
        let mut s = self.0.lock().expect("run state");
        if let Some(refused) = &s.refuse_writes {
            return Err(refused.clone());
        }
        s.ops.push(ExecutedOp::Write {
            key: key.clone(),
            value: value.clone(),
        });
        s.writes.insert(key, value);
        Ok(())
    }

    fn note(&mut self, name: &str, value: f64) {
        let mut s = self.0.lock().expect("run state");
        s.info.insert(name.to_string(), value);
    }
}

/// How far a driven run got.
#[derive(Debug)]
pub enum Progress {
    /// It waits for this key's value ([`Driver::supply`] or [`Driver::answer`]).
    Needs(Key),
    /// It ended.
    Ended(Run),
}

/// The body's result, and the procedure when the driver owns it.
type BodyEnd = (Result<(), TxnError>, Option<Box<dyn Procedure>>);

/// One run of a procedure's body, driven read by read (see the module docs).
pub struct Driver<'p> {
    state: Arc<Mutex<Recorded>>,
    body: BoxFuture<'p, BodyEnd>,
    /// The procedure, once an owning run's body has ended.
    procedure: Option<Box<dyn Procedure>>,
}

impl Driver<'static> {
    /// A run of `procedure`, which the driver owns ([`Driver::take_procedure`] gives it back
    /// once the body has ended). Nothing runs until [`Driver::resume`].
    pub fn start(procedure: Box<dyn Procedure>) -> Driver<'static> {
        let state = Arc::new(Mutex::new(Recorded::default()));
        let mut ops = DrivenOps(Arc::clone(&state));
        let body = Box::pin(async move {
            let mut procedure = procedure;
            let end = procedure.run(&mut ops).await;
            (end, Some(procedure))
        });
        Driver {
            state,
            body,
            procedure: None,
        }
    }
}

impl<'p> Driver<'p> {
    /// A run of a procedure the caller keeps.
    pub fn borrowing(procedure: &'p mut dyn Procedure) -> Driver<'p> {
        let state = Arc::new(Mutex::new(Recorded::default()));
        let mut ops = DrivenOps(Arc::clone(&state));
        let body = Box::pin(async move { (procedure.run(&mut ops).await, None) });
        Driver {
            state,
            body,
            procedure: None,
        }
    }

    /// Refuse every later write of the run with `error` (a read-only transaction's writes).
    pub fn refuse_writes(&mut self, error: TxnError) {
        self.state.lock().expect("run state").refuse_writes = Some(error);
    }

    /// The value of `key`, for the read waiting for it and every later one.
    pub fn supply(&mut self, key: Key, value: Option<Value>) {
        self.state
            .lock()
            .expect("run state")
            .supplied
            .insert(key, value);
    }

    /// The value supplied for `key`, if any.
    pub fn supplied(&self, key: &Key) -> Option<Option<Value>> {
        self.state
            .lock()
            .expect("run state")
            .supplied
            .get(key)
            .cloned()
    }

    /// The keys the run has written so far, in key order (an engine that locks keys as a run
    /// first writes them asks at each stop).
    pub fn written_keys(&self) -> Vec<Key> {
        let s = self.state.lock().expect("run state");
        s.writes.keys().cloned().collect()
    }

    /// The answer to the read waiting ([`Progress::Needs`]), for that read alone: a later read
    /// of the same key waits again. An error ends the read with it.
    pub fn answer(&mut self, answer: Result<Option<Value>, TxnError>) {
        self.state.lock().expect("run state").answer = Some(answer);
    }

    /// Run on until the body needs a key it has no value for, or ends. Call it no more once it
    /// ended.
    pub fn resume(&mut self) -> Progress {
        let polled = self
            .body
            .as_mut()
            .poll(&mut Context::from_waker(Waker::noop()));
        let mut s = self.state.lock().expect("run state");
        let (end, stalled) = match polled {
            Poll::Pending => match s.waiting.clone() {
                Some(key) => return Progress::Needs(key),
                None => (Err(TxnError::Aborted(AbortReason::ValidationFailed)), true),
            },
            Poll::Ready((end, procedure)) => {
                self.procedure = procedure;
                (end, false)
            }
        };
        Progress::Ended(s.take_run(end, None, stalled))
    }

    /// The procedure of a run begun with [`Driver::start`], once its body has ended.
    pub fn take_procedure(&mut self) -> Option<Box<dyn Procedure>> {
        self.procedure.take()
    }
}

/// Where a run over values at hand ([`run`]) takes its reads from.
pub enum Source<'a> {
    /// The dry run: every key reads as absent.
    Absent,
    /// These values; a key outside them is missing (the run stops there, see
    /// [`Run::missing`]).
    Read(&'a BTreeMap<Key, Option<Value>>),
}

/// Run `procedure` once over `source`, to its end. `None` when its body waits on something
/// other than its reads (which never happens to a procedure that only reads and writes).
pub fn run(procedure: &mut dyn Procedure, source: Source<'_>) -> Option<Run> {
    let mut driver = Driver::borrowing(procedure);
    loop {
        match driver.resume() {
            Progress::Ended(run) if run.stalled => return None,
            Progress::Ended(run) => return Some(run),
            Progress::Needs(key) => match &source {
                Source::Absent => driver.supply(key, None),
                Source::Read(values) => match values.get(&key) {
                    Some(value) => driver.supply(key, value.clone()),
                    None => {
                        // The body is abandoned at the read it cannot have.
                        let mut s = driver.state.lock().expect("run state");
                        s.reads.note(&key);
                        let end = Err(TxnError::Aborted(AbortReason::ValidationFailed));
                        return Some(s.take_run(end, Some(key), false));
                    }
                },
            },
        }
    }
}

/// The checks a node makes of a one-shot request before it orders or runs it, and the dry run
/// over absent values that tells which keys it touches (`rococo`, `s-smr`): the procedure `call`
/// names, rebuilt from `procedures`, must be as read-only as the request says
/// ([`checked`]) and must wait on nothing but its reads. Returns the procedure and its dry run,
/// or the error to answer with.
pub fn dry_run(
    procedures: &Procedures,
    call: &ProcedureCall,
    read_only: bool,
) -> Result<(Box<dyn Procedure>, Run), RequestError> {
    let mut procedure = checked(procedures, call, read_only)?;
    let dry = dry_run_of(procedure.as_mut(), call)?;
    Ok((procedure, dry))
}

/// The dry run of [`dry_run`], of a procedure already [`checked`].
pub fn dry_run_of(
    procedure: &mut dyn Procedure,
    call: &ProcedureCall,
) -> Result<Run, RequestError> {
    run(procedure, Source::Absent).ok_or_else(|| {
        RequestError::Invalid(format!(
            "procedure {}/{} waits on more than its reads",
            call.workload, call.procedure
        ))
    })
}

/// The procedure `call` names, rebuilt from `procedures`, if it is as read-only as the request
/// says: the checks of [`dry_run`] without the run, for a node that needs no dry run (the
/// procedure declares its keys). A body that waits on more than its reads then ends, wherever
/// it runs, aborted (`ValidationFailed`) by the driver.
pub fn checked(
    procedures: &Procedures,
    call: &ProcedureCall,
    read_only: bool,
) -> Result<Box<dyn Procedure>, RequestError> {
    let procedure = procedures.instantiate(call)?;
    if procedure.read_only() != read_only {
        return Err(RequestError::Invalid(format!(
            "procedure {}/{} is not as read-only as the request says",
            call.workload, call.procedure
        )));
    }
    Ok(procedure)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reads `a`, writes `b`, reads `a` again and `b`, writes `c` then `b` again.
    struct Script;

    impl Procedure for Script {
        fn name(&self) -> &'static str {
            "script"
        }

        fn read_only(&self) -> bool {
            false
        }

        fn run<'a>(&'a mut self, ops: &'a mut dyn Ops) -> BoxFuture<'a, Result<(), TxnError>> {
            Box::pin(async move {
                let (a, b, c) = (
                    Key::numbered(0, 1),
                    Key::numbered(0, 2),
                    Key::numbered(0, 3),
                );
                let first = ops.read(&a).await?;
                ops.write(b.clone(), Some(Value::from("b1")))?;
                ops.note("seen", 1.0);
                let again = ops.read(&a).await?;
                assert_eq!(ops.read(&b).await?, Some(Value::from("b1")), "own write");
                ops.write(c, first.or(again))?;
                ops.write(b, Some(Value::from("b2")))?;
                Ok(())
            })
        }
    }

    fn needs(progress: Progress) -> Key {
        match progress {
            Progress::Needs(key) => key,
            Progress::Ended(run) => panic!("ended: {run:?}"),
        }
    }

    fn ended(progress: Progress) -> Run {
        match progress {
            Progress::Ended(run) => run,
            Progress::Needs(key) => panic!("needs {key:?}"),
        }
    }

    #[test]
    fn an_answer_serves_one_read_and_a_supplied_value_every_read() {
        let a = Key::numbered(0, 1);
        // Answered: the repeated read of `a` waits again, as a client's second read is sent.
        let mut driver = Driver::start(Box::new(Script));
        assert_eq!(needs(driver.resume()), a);
        driver.answer(Ok(Some(Value::from("a1"))));
        assert_eq!(needs(driver.resume()), a);
        driver.answer(Ok(Some(Value::from("a2"))));
        let run = ended(driver.resume());
        assert_eq!(run.end, Ok(()));
        assert_eq!(run.reads, std::slice::from_ref(&a));
        assert_eq!(run.info.get("seen"), Some(&1.0));
        assert_eq!(
            run.writes_in_order(),
            [
                (Key::numbered(0, 2), Some(Value::from("b2"))),
                (Key::numbered(0, 3), Some(Value::from("a1"))),
            ]
        );
        assert_eq!(run.ops.len(), 6);
        assert!(driver.take_procedure().is_some());

        // Supplied: asked once.
        let mut driver = Driver::start(Box::new(Script));
        assert_eq!(needs(driver.resume()), a);
        driver.supply(a.clone(), None);
        assert!(ended(driver.resume()).end.is_ok());
    }

    #[test]
    fn an_error_answer_and_a_refused_write_end_the_body() {
        let mut driver = Driver::start(Box::new(Script));
        needs(driver.resume());
        driver.answer(Err(TxnError::Aborted(AbortReason::Timeout)));
        let run = ended(driver.resume());
        assert_eq!(run.end, Err(TxnError::Aborted(AbortReason::Timeout)));
        assert!(run.ops.is_empty());

        let mut driver = Driver::start(Box::new(Script));
        let refused = TxnError::Rejected(RequestError::Invalid("read-only".into()));
        driver.refuse_writes(refused.clone());
        needs(driver.resume());
        driver.answer(Ok(None));
        let run = ended(driver.resume());
        assert_eq!(run.end, Err(refused));
        assert_eq!(run.ops.len(), 1, "the read, not the refused write");
    }

    #[test]
    fn a_run_over_values_at_hand_stops_at_the_first_missing_key() {
        let mut script = Script;
        let dry = run(&mut script, Source::Absent).expect("reads only");
        assert_eq!(dry.reads, [Key::numbered(0, 1)]);
        assert_eq!(dry.writes.len(), 2);
        let none = BTreeMap::new();
        let stopped = run(&mut script, Source::Read(&none)).expect("reads only");
        assert_eq!(stopped.missing, Some(Key::numbered(0, 1)));
        assert_eq!(
            stopped.end,
            Err(TxnError::Aborted(AbortReason::ValidationFailed))
        );
    }
}
