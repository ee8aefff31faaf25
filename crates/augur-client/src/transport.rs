//! How a client reaches its coordinator: the one trait each runtime implements.

use augur_contract::TransportError;
use augur_types::{ClientId, ClientOp, ClientReply};
use futures::future::BoxFuture;
use std::time::Duration;

/// How a client reaches its coordinator. Implemented by each runtime.
pub trait Transport: Send + Sync + 'static {
    /// This session's identity, unique within the cluster.
    fn client_id(&self) -> ClientId;
    /// Send one operation and wait for its reply (bounded by the transport's request timeout).
    fn call(&self, op: ClientOp) -> BoxFuture<'_, Result<ClientReply, TransportError>>;
    /// Monotonic time since an arbitrary origin; virtual time in the simulator.
    fn now(&self) -> Duration;
    /// Wait for `d` (think time); virtual in the simulator.
    fn sleep(&self, d: Duration) -> BoxFuture<'_, ()>;
}

/// A boxed transport is a transport, so that code choosing its transport at run time can hold
/// sessions of one type (`Session<Box<dyn Transport>>`).
impl<T: Transport + ?Sized> Transport for Box<T> {
    fn client_id(&self) -> ClientId {
        (**self).client_id()
    }

    fn call(&self, op: ClientOp) -> BoxFuture<'_, Result<ClientReply, TransportError>> {
        (**self).call(op)
    }

    fn now(&self) -> Duration {
        (**self).now()
    }

    fn sleep(&self, d: Duration) -> BoxFuture<'_, ()> {
        (**self).sleep(d)
    }
}
