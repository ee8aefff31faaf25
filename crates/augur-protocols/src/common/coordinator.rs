//! Bookkeeping every coordinator needs, whatever its protocol: the client request a transaction is
//! waiting to answer, the garbage-collection watermark, and grouping a write set by partition.

use augur_runtime::Ctx;
use augur_runtime::Protocol;
use augur_types::{
    ClientId, ClientReply, ClientRequest, ClientResponse, Key, PartitionId, Placement,
};
use augur_types::{RequestId, Timestamp, Value};
use std::collections::BTreeMap;

/// A write set grouped by partition, in partition order (so message order is deterministic).
pub type PartitionWrites = BTreeMap<PartitionId, Vec<(Key, Option<Value>)>>;

pub fn group_by_partition(
    placement: &Placement,
    writes: Vec<(Key, Option<Value>)>,
) -> PartitionWrites {
    let mut grouped = PartitionWrites::new();
    for (key, value) in writes {
        grouped
            .entry(placement.partition_of(&key))
            .or_default()
            .push((key, value));
    }
    grouped
}

/// The client request a transaction owes an answer to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pending {
    pub client: ClientId,
    pub request: RequestId,
}

impl Pending {
    /// The answer `request` is owed.
    pub fn of(request: &ClientRequest) -> Pending {
        Pending {
            client: request.client,
            request: request.id,
        }
    }

    pub fn answer<P: Protocol>(self, ctx: &mut Ctx<'_, P>, reply: ClientReply) {
        ctx.reply(
            self.client,
            ClientResponse {
                id: self.request,
                reply,
            },
        );
    }
}

/// The oldest timestamp still needed by a transaction that started at `snapshots`, or `floor`
/// when none is older: the garbage-collection watermark.
pub fn watermark(floor: Timestamp, snapshots: impl Iterator<Item = Timestamp>) -> Timestamp {
    snapshots.fold(floor, Timestamp::min)
}
