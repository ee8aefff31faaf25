//! The in-memory multi-version store that every augur partition replica keeps its data in.
//!
//! # Version chains
//!
//! Each key maps to a [`KeyEntry`]: a chain of [`Version`]s plus the concurrency-control
//! protocol's per-key metadata. A version records its writer ([`TxnId`]), a [`Timestamp`], a
//! [`VersionState`] and the value, where `None` is a tombstone (the writer deleted the key).
//!
//! A version starts *uncommitted*, installed by its writer in state
//! [`Prepared`](VersionState::Prepared) or [`LocalCommitted`](VersionState::LocalCommitted) with
//! a proposed timestamp; each writer has at most one uncommitted version per key, and installing
//! again replaces it. The writer's outcome then either [commits](KeyEntry::commit) it at its final
//! timestamp or [removes](KeyEntry::remove_uncommitted) it. Versions that are committed already
//! when they arrive (blind writes, bulk loads, log replay) enter through
//! [`put_committed`](KeyEntry::put_committed).
//!
//! # Visibility
//!
//! A snapshot read at `t` sees the newest *committed* version with timestamp `<= t`
//! ([`KeyEntry::read_at`]); uncommitted versions are never returned by it. Whether a reader must
//! wait for, skip or take a dependency on an uncommitted version is protocol policy, so the
//! store exposes them ([`KeyEntry::uncommitted`], [`KeyEntry::uncommitted_by`]) and decides
//! nothing. Commits may arrive out of timestamp order; the committed part of a chain is kept
//! sorted by timestamp regardless, and among equal timestamps the version committed last wins.
//!
//! # Per-key protocol metadata
//!
//! Protocols need state next to each key: a last-reader timestamp, a lock owner and its
//! waiters, read dependencies, snapshot queues. Rather than a side table keyed again by [`Key`]
//! (a second lookup and a second copy of every key), [`MvStore`] is generic over that type and
//! stores it in the entry as the public field [`KeyEntry::meta`]; the store never looks at it.
//! `M = ()` costs nothing.
//!
//! # Garbage collection
//!
//! Old versions are only needed by snapshots that are still running. Given a *watermark* — a
//! timestamp no active or future snapshot is below — [`MvStore::collect_garbage`] drops every
//! committed version older than the newest committed version at or below the watermark; that
//! one stays, because it is what a read at the watermark returns. Uncommitted versions are never
//! dropped. Each call examines a bounded number of keys, resuming where the previous call
//! stopped, so a periodic timer can run it without stalling request processing.
//!
//! # Memory layout
//!
//! The store is sized for millions of small keys per node, so per-key overhead dominates:
//!
//! * **Dense entries and a separate index.** Entries are kept in one vector, each beside its
//!   key, and a hash index maps keys to positions in that vector. A hash map holding whole entries
//!   inline would pay for every empty bucket at the entry's full size, and such tables double
//!   (one million keys lands in 2^21 buckets). The index instead spends 8 bytes per bucket: a
//!   32-bit position and 32 bits of the key's hash, which rejects almost every non-matching bucket
//!   without touching the entry and lets the index grow without rehashing keys.
//! * **One inline version.** After garbage collection nearly every key holds exactly one
//!   committed version, so a chain stores one [`Version`] inline (a `SmallVec`) and only spills to
//!   the heap while a key has several versions; garbage collection moves it back inline. The
//!   committed and uncommitted versions share that one vector, split by a count, so the common
//!   entry is a single version and two words. [`Key`] keeps up to 16 bytes inline, so a typical
//!   key needs no allocation either.
//! * **Shared values.** Values are `bytes::Bytes`: returning one to a reader is a reference-count
//!   bump, never a copy.
//!
//! With `M = ()`, a key with one committed version costs a 96-byte slot (24-byte key, 56-byte
//! version, chain length and committed count), 16 to 32 bytes of index (the index runs between
//! 1/4 and 1/2 full) and the value's own allocation. Measured with `examples/memory.rs`: one
//! million keys with one 100-byte value each take 216 MiB resident, about 225 bytes per key, of
//! which 112 are the value's heap block. [`MvStore::with_capacity`] spares a bulk load the
//! repeated regrowth of the entry vector and the index.
//!
//! # Determinism
//!
//! The simulator replays runs from a seed, so nothing here may depend on a random source: the
//! index uses a fixed-seed hash (FxHash), and [`MvStore::iter`] yields entries in the order their
//! keys were first added. The same sequence of calls always produces the same store.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod entry;
mod index;
mod store;

pub use augur_types::{Key, Timestamp, TxnId, Value};
pub use entry::{KeyEntry, Version, VersionState};
pub use store::{GcStats, MvStore};

#[cfg(test)]
mod tests;
