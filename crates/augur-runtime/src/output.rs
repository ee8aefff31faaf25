//! The output barrier between a node and the world: what a handler sends and replies leaves
//! the node only once the log is durable up to the records persisted before it (see
//! [`Effects`](augur_contract::Effects)).

use augur_contract::Protocol;
use augur_types::{ClientId, ClientResponse, NodeId};

/// One handler's messages and replies, waiting until the node's log is durable up to `upto`.
pub struct Held<P: Protocol> {
    pub upto: u64,
    pub sends: Vec<(NodeId, P::Msg)>,
    pub replies: Vec<(ClientId, ClientResponse)>,
}

/// The output barrier every runtime puts between a node and the world (see [`Effects`](augur_contract::Effects)):
/// handlers' messages and replies, in handler order, each waiting for the log position that
/// was the log's end when its handler returned.
pub struct HeldOutput<P: Protocol> {
    queue: std::collections::VecDeque<Held<P>>,
}

impl<P: Protocol> Default for HeldOutput<P> {
    fn default() -> Self {
        HeldOutput {
            queue: std::collections::VecDeque::new(),
        }
    }
}

impl<P: Protocol> HeldOutput<P> {
    /// A handler's output, the log then ending at `end` and durable up to `synced`: returned
    /// if it may leave now (nothing waits before it and the log is durable up to its end, or
    /// the policy waits for nothing), kept otherwise.
    pub fn admit(
        &mut self,
        waits: bool,
        synced: u64,
        end: u64,
        sends: Vec<(NodeId, P::Msg)>,
        replies: Vec<(ClientId, ClientResponse)>,
    ) -> Option<Held<P>> {
        let held = Held {
            upto: end,
            sends,
            replies,
        };
        if !waits || (self.queue.is_empty() && synced >= end) {
            return Some(held);
        }
        self.queue.push_back(held);
        None
    }

    /// The output that may leave now that the log is durable up to `synced`, in order.
    pub fn release(&mut self, synced: u64) -> Vec<Held<P>> {
        let ready = self.queue.iter().take_while(|h| h.upto <= synced).count();
        self.queue.drain(..ready).collect()
    }

    /// Everything still waiting, in order (a node stopping, or losing it in a crash).
    pub fn take_all(&mut self) -> Vec<Held<P>> {
        self.queue.drain(..).collect()
    }

    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }
}
