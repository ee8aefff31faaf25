//! Running a one-shot procedure over values already at hand, without waiting. `rococo` runs
//! one once over absent values to learn the keys its pieces touch, and once over the values its
//! pieces read when they executed (see its module docs, "One-shot transactions"); the
//! order-then-execute protocols run one over the values gathered so far and learn which key it
//! needs next.

use augur_client::{Ops, Procedure, TxnError};
use augur_types::{AbortReason, ExecutedOp, Key, Value};
use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
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
    run: Run,
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
                if !self.run.reads.contains(key) {
                    self.run.reads.push(key.clone());
                }
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
    };
    let end = {
        let mut body = procedure.run(&mut recorder);
        match body.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
            Poll::Ready(end) => end,
            Poll::Pending => return None,
        }
    };
    recorder.run.end = end;
    Some(recorder.run)
}
