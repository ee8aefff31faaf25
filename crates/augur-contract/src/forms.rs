//! The request forms a protocol serves, and the procedures a node runs one-shot requests with.
//!
//! A one-shot request ([`ClientOp::Execute`](augur_types::ClientOp::Execute)) names a
//! registered procedure and its arguments; a node rebuilds the procedure from its
//! [`ProcedureCatalog`] ([`Procedures`], handed to it in its [`NodeEnv`](crate::NodeEnv)) and
//! runs it with the [`driver`](crate::driver). Which forms a protocol serves it states in
//! [`Protocol::FORMS`](crate::Protocol::FORMS).

use crate::procedure::{Procedure, ProcedureCatalog};
use augur_types::RequestError;
pub use augur_types::RequestForm;
use std::fmt;
use std::sync::Arc;

/// The forms of a protocol that serves interactive transactions only.
pub const INTERACTIVE_ONLY: &[RequestForm] = &[RequestForm::Interactive];
/// The forms of a protocol that serves interactive transactions and runs one-shot procedures
/// at its coordinator (`augur_protocols::common::at_coordinator`).
pub const INTERACTIVE_AND_ONE_SHOT: &[RequestForm] =
    &[RequestForm::Interactive, RequestForm::OneShot];
/// The forms of a protocol that must know a transaction whole before it runs it (the
/// order-then-execute protocols): one-shot transactions, and interactive ones only when they
/// read nothing (blind writes, which is how benchmarks load data). One-shot comes first: it is
/// the form such a protocol's clients use unless told otherwise.
pub const ONE_SHOT_AND_BLIND_WRITES: &[RequestForm] =
    &[RequestForm::OneShot, RequestForm::Interactive];

/// Request ids with this bit set are the in-node client's; a real client's request carrying one
/// is refused.
pub const INTERNAL_REQUESTS: u64 = 1 << 63;

/// The procedures a node runs one-shot transactions with (see [`NodeEnv::procedures`](crate::NodeEnv::procedures)).
#[derive(Clone, Default)]
pub struct Procedures(Option<Arc<dyn ProcedureCatalog>>);

impl Procedures {
    /// A node that runs the procedures of `catalog`.
    pub fn new(catalog: Arc<dyn ProcedureCatalog>) -> Procedures {
        Procedures(Some(catalog))
    }

    /// A node with no procedures: every one-shot request is refused.
    pub fn none() -> Procedures {
        Procedures(None)
    }

    /// The procedure `call` names, ready to run, or why there is none. Protocols that run
    /// procedures their own way (`rococo`'s pieces) rebuild them with it.
    pub fn instantiate(
        &self,
        call: &augur_types::ProcedureCall,
    ) -> Result<Box<dyn Procedure>, RequestError> {
        match &self.0 {
            Some(catalog) => catalog.instantiate(call),
            None => Err(RequestError::UnknownProcedure(format!(
                "{}/{} (this node has no procedures registered)",
                call.workload, call.procedure
            ))),
        }
    }

    /// The lock that guards `key` ([`ProcedureCatalog::lock_name`]): `key` itself unless the
    /// catalog names a coarser one.
    pub fn lock_name(&self, key: &augur_types::Key) -> augur_types::Key {
        self.0
            .as_ref()
            .and_then(|catalog| catalog.lock_name(key))
            .filter(|lock| lock.shard() == key.shard())
            .unwrap_or_else(|| key.clone())
    }
}

impl fmt::Debug for Procedures {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self.0 {
            Some(_) => "Procedures(registered)",
            None => "Procedures(none)",
        })
    }
}
