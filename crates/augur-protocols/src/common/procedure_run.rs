//! Running a one-shot procedure over values already at hand, without waiting. `rococo` runs
//! one once over absent values to learn the keys its pieces touch, and once over the values its
//! pieces read when they executed (see its module docs, "One-shot transactions"); the
//! order-then-execute protocols run one as a [`Resumable`] run, which stops at each key it does
//! not have and resumes there once the key's value is supplied.

use augur_client::{Ops, Procedure, TxnError};
use augur_types::{AbortReason, ExecutedOp, Key, Value};
use std::collections::{BTreeMap, HashSet};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

/// Where a run's reads come from.
pub enum Source<'a> {
    /// The dry run: every key reads as absent.
    Absent,
    /// These values; a key outside them is missing (the run stops there, see
    /// [`Run::missing`]).
    Read(&'a BTreeMap<Key, Option<Value>>),
}

/// What one run of a procedure did.
pub struct Run {
    /// Every operation, in program order (for the client's history).
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
}

struct Recorder<'a> {
    source: Source<'a>,
    /// The run so far; its `reads` are filled in from `reads` when it ends.
    run: Run,
    reads: FirstReads,
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

impl Ops for Recorder<'_> {
    fn read<'a>(
        &'a mut self,
        key: &'a Key,
    ) -> Pin<Box<dyn Future<Output = Result<Option<Value>, TxnError>> + Send + 'a>> {
        // A key this transaction wrote reads its own write, as in the interactive client.
        let value = match self.run.writes.get(key) {
            Some(v) => Ok(v.clone()),
            None => {
                self.reads.note(key);
                match &self.source {
                    Source::Absent => Ok(None),
                    Source::Read(values) => match values.get(key) {
                        Some(v) => Ok(v.clone()),
                        None => {
                            self.run.missing.get_or_insert_with(|| key.clone());
                            Err(TxnError::Aborted(AbortReason::ValidationFailed))
                        }
                    },
                }
            }
        };
        if let Ok(v) = &value {
            self.run.ops.push(ExecutedOp::Read {
                key: key.clone(),
                value: v.clone(),
            });
        }
        Box::pin(std::future::ready(value))
    }

    fn write(&mut self, key: Key, value: Option<Value>) -> Result<(), TxnError> {
        self.run.ops.push(ExecutedOp::Write {
            key: key.clone(),
            value: value.clone(),
        });
        self.run.writes.insert(key, value);
        Ok(())
    }
}

/// Run `procedure` once over `source`. `None` when its body waits on something other than
/// its reads (which never happens to a procedure that only reads and writes).
pub fn run(procedure: &mut dyn Procedure, source: Source<'_>) -> Option<Run> {
    let mut recorder = Recorder {
        source,
        run: Run {
            ops: Vec::new(),
            reads: Vec::new(),
            writes: BTreeMap::new(),
            end: Ok(()),
            missing: None,
        },
        reads: FirstReads::default(),
    };
    let end = {
        let mut body = procedure.run(&mut recorder);
        match body.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
            Poll::Ready(end) => end,
            Poll::Pending => return None,
        }
    };
    recorder.run.end = end;
    recorder.run.reads = recorder.reads.order;
    Some(recorder.run)
}

/// A run that stops at the first key it does not have and resumes, where it stopped, once
/// that key's value is supplied: the order-then-execute executors, whose runs wait for
/// siblings' values and must not redo what they already did (a TPC-C Stock-Level reads
/// hundreds of keys, and a run from the start at every missing key costs the square of that).
pub struct Resumable {
    state: Arc<Mutex<Recorded>>,
    body: Pin<Box<dyn Future<Output = Result<(), TxnError>> + Send>>,
}

/// What a resumable run has done so far, shared between its body and its owner.
#[derive(Default)]
struct Recorded {
    supplied: BTreeMap<Key, Option<Value>>,
    ops: Vec<ExecutedOp>,
    reads: FirstReads,
    writes: BTreeMap<Key, Option<Value>>,
    /// The key the body waits for.
    missing: Option<Key>,
}

/// How far a resumable run got.
pub enum Progress {
    /// It waits for this key's value ([`Resumable::supply`]).
    Needs(Key),
    /// It ended ([`Run::missing`] is `None`).
    Ended(Run),
}

/// The [`Ops`] a resumable body runs against: reads answered from the supplied values (or the
/// run's own writes), a missing one pending until supplied.
struct SharedOps(Arc<Mutex<Recorded>>);

impl Ops for SharedOps {
    fn read<'a>(
        &'a mut self,
        key: &'a Key,
    ) -> Pin<Box<dyn Future<Output = Result<Option<Value>, TxnError>> + Send + 'a>> {
        let state = Arc::clone(&self.0);
        Box::pin(std::future::poll_fn(move |_| {
            let mut s = state.lock().expect("run state");
            // A key this transaction wrote reads its own write, as in the interactive client.
            let value = match s.writes.get(key) {
                Some(v) => v.clone(),
                None => match s.supplied.get(key) {
                    Some(v) => {
                        let v = v.clone();
                        s.reads.note(key);
                        v
                    }
                    None => {
                        s.missing = Some(key.clone());
                        return Poll::Pending;
                    }
                },
            };
            s.missing = None;
            s.ops.push(ExecutedOp::Read {
                key: key.clone(),
                value: value.clone(),
            });
            Poll::Ready(Ok(value))
        }))
    }

    fn write(&mut self, key: Key, value: Option<Value>) -> Result<(), TxnError> {
        let mut s = self.0.lock().expect("run state");
        s.ops.push(ExecutedOp::Write {
            key: key.clone(),
            value: value.clone(),
        });
        s.writes.insert(key, value);
        Ok(())
    }
}

impl Resumable {
    /// Start running `procedure` (nothing runs until [`Resumable::resume`]).
    pub fn start(procedure: Box<dyn Procedure>) -> Resumable {
        let state = Arc::new(Mutex::new(Recorded::default()));
        let mut ops = SharedOps(Arc::clone(&state));
        let body = Box::pin(async move {
            let mut procedure = procedure;
            procedure.run(&mut ops).await
        });
        Resumable { state, body }
    }

    /// The value of `key`, for the read waiting for it and any later one.
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

    /// Run on until the body needs a key not supplied, or ends. Call it no more once it
    /// ended. A body that waits on anything but its reads (never, for a procedure that only
    /// reads and writes) ends with `ValidationFailed`.
    pub fn resume(&mut self) -> Progress {
        let polled = self
            .body
            .as_mut()
            .poll(&mut Context::from_waker(Waker::noop()));
        let mut s = self.state.lock().expect("run state");
        let end = match polled {
            Poll::Pending => match s.missing.clone() {
                Some(key) => return Progress::Needs(key),
                None => Err(TxnError::Aborted(AbortReason::ValidationFailed)),
            },
            Poll::Ready(end) => end,
        };
        Progress::Ended(Run {
            ops: std::mem::take(&mut s.ops),
            reads: std::mem::take(&mut s.reads).order,
            writes: std::mem::take(&mut s.writes),
            end,
            missing: None,
        })
    }
}

/// The checks a node makes of a one-shot request before it orders or runs it, and the dry run
/// over absent values that tells which keys it touches (`rococo`, `s-smr`): the procedure `call`
/// names, rebuilt from `procedures`, must be as read-only as the request says and must wait on
/// nothing but its reads. Returns the procedure and its dry run, or the error to answer with.
pub fn dry_run(
    procedures: &augur_runtime::one_shot::Procedures,
    call: &augur_types::ProcedureCall,
    read_only: bool,
) -> Result<(Box<dyn Procedure>, Run), augur_types::RequestError> {
    use augur_types::RequestError;
    let mut procedure = procedures.instantiate(call)?;
    if procedure.read_only() != read_only {
        return Err(RequestError::Invalid(format!(
            "procedure {}/{} is not as read-only as the request says",
            call.workload, call.procedure
        )));
    }
    let Some(dry) = run(procedure.as_mut(), Source::Absent) else {
        return Err(RequestError::Invalid(format!(
            "procedure {}/{} waits on more than its reads",
            call.workload, call.procedure
        )));
    };
    Ok((procedure, dry))
}
