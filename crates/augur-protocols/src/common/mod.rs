//! Machinery shared by protocols: building blocks that several concurrency-control protocols need
//! and that are not specific to any one of them.
//!
//! * [`locks`]: a deterministic, sans-IO lock manager with shared and exclusive modes, FIFO wait
//!   queues and the no-wait, wait-die and wound-wait deadlock-prevention policies (2PL and its
//!   variants, DST-2PL, Calvin's deterministic locking), and the lock-timeout setting.
//! * [`replica`]: the participant side of two-phase commit with presumed abort as `clocksi-rep`
//!   and STR share it (store, prepare records, serving lease, decision log, durable records).
//! * [`two_phase`]: the 2PC machinery of that family (reads, prepares, commits and aborts,
//!   termination, garbage collection, message and timer dispatch) behind the hooks of
//!   [`two_phase::Rules`], which each protocol fills in with its paper's rules.
//! * [`lock_sets`]: the participant side of lock-based 2PC with read validation (SSS's
//!   participant, `2pc-baseline`): a transaction's whole lock set acquired at once, and validation
//!   of its reads by the identity of the version read.
//! * [`lock_commit`]: the single-version lock-and-2PC engine `2pc-baseline`, `occ`, `2pl`,
//!   `rc`, `dst-occ`, `dst-2pl`, `gts` and `vts` run as flavors (where reads go, which locks are
//!   taken when, whether validation follows, and which timestamp scheme gives commit timestamps
//!   and read-only snapshots: [`lock_commit::scheme`]).
//! * [`dispatch`]: deterministic dispatch over the sequencer (a transaction's position, its
//!   entry and partitions, sibling values by position, the submitter's answers), which the
//!   order-then-execute protocols share.
//! * [`coordinator`]: bookkeeping every coordinator needs (pending client requests, the read in
//!   flight and its numbering, write sets grouped by partition, the garbage-collection
//!   watermark).
//! * [`oracle`]: a timestamp oracle with a stable timestamp (GTS's `GlobalTS` and `StableGTS`),
//!   durable across its restarts, which the lock-and-2PC engine's `gts` flavor asks, and VTS's
//!   vector oracle.
//! * [`at_coordinator`]: the one-shot form for every protocol with deferred updates: a
//!   procedure run at the node that received it, as the requests an interactive client would
//!   have sent (procedures are driven by the contract's `augur_contract::driver`, as the
//!   order-then-execute executors and `rococo` drive theirs).
//! * [`speculative`]: the speculative state of one partition (Sparkle's §4.1, Algorithms 1–2):
//!   timestamped locks with preemption, read dependencies, speculative commit with
//!   missed-write and cascading aborts, and final commit in order, which the order-then-execute
//!   engine's speculative mode ([`ordered::Schedule::SPECULATIVE`]) drives for `sparkle`.
//! * [`membership`]: who serves each partition (epochs, in-sync replicas, masters), agreed
//!   through a Raft group of its own, with leases granted by its leader: the deferred-update
//!   engines' fail-over (`docs/architecture/availability.md`).
//! * [`sequencer`]: transactions cut into batches per epoch and agreed in one order through
//!   Raft (raft-rs), delivered once to every node (Calvin's sequencing layer, beneath `calvin`,
//!   `s-smr` and `sparkle`).
//! * [`horizons`]: how far every node of an order-then-execute cluster got, whom the cut of
//!   the sequencer's log and of old versions waits for, and when a silent node is left behind
//!   (it then catches up from a snapshot and a copy).
//! * [`replicated`]: the node of active replication over optimistic atomic broadcast: every
//!   node runs every one-shot request, optimistically delivered on arrival and committed in
//!   the sequencer's final order by validating its reads (`oab-spec` forking instances over
//!   uncommitted versions, `sm-rep` running each on final delivery).
//! * [`vclock`]: vector clocks with the causal partial order (Walter, SSS, GTS/VTS baselines),
//!   and per-node counter dependencies ([`vclock::Deps`], VTS's, carried by the lock-and-2PC
//!   engine's votes and the vector oracle).

pub mod at_coordinator;
pub mod coordinator;
pub mod dispatch;
pub mod failover;
pub mod grouping;
pub mod horizons;
pub mod lock_commit;
pub mod lock_sets;
pub mod locks;
pub mod membership;
pub mod oracle;
pub mod ordered;
pub mod replica;
pub mod replicated;
pub mod sequencer;
pub mod speculative;
pub mod two_phase;
pub mod vclock;
