//! Version selection for read-only reads at a replica (Algorithm 6, with exclusion made
//! sticky: see "Finality" in the module docs of `sss`).

use super::Sss;
use super::nlog::within_bounds;
use crate::common::vclock::{Causality, VClock};
use augur_types::{Key, TxnId, Value};

/// What a read returns: the clock to merge into the reader's (`maxVC`) and the version read
/// (its writer and value), `None` for a key with no version visible. `None` overall: the
/// versions the reader needs are garbage-collected.
pub type Chosen = Option<(VClock, Option<(TxnId, Option<Value>)>)>;

/// Whether a version with clock `clock` written by `writer` is one the reader excluded, or
/// comes causally after one it excluded.
fn excluded_by(excluded: &[(TxnId, VClock)], writer: TxnId, clock: &VClock) -> bool {
    excluded
        .iter()
        .any(|(t, theirs)| *t == writer || clock.compare(theirs) == Causality::After)
}

/// A read-only transaction's first read at this node (A6:L4–14): `maxVC` over `NLog` within
/// the reader's bounds, leaving out the `excluded` writers and those after them; then the
/// newest version within `maxVC` that is not excluded.
pub fn first_read(
    s: &Sss,
    key: &Key,
    vc: &VClock,
    bounded: &[bool],
    excluded: &[(TxnId, VClock)],
) -> Chosen {
    let i = s.me;
    let max_vc = s.nlog.max_visible(vc, bounded, excluded)?;
    let version = newest(s, key, |writer, clock| {
        !within_bounds(clock, &max_vc, bounded)
            || clock.get(i) > max_vc.get(i)
            || excluded_by(excluded, writer, clock)
    })?;
    Some((max_vc, version))
}

/// A repeat read at a node the reader has read from (A6:L15–21): the newest version within
/// the reader's clock on every node it has read from that is not excluded.
pub fn repeat_read(
    s: &Sss,
    key: &Key,
    vc: &VClock,
    bounded: &[bool],
    excluded: &[(TxnId, VClock)],
) -> Chosen {
    let version = newest(s, key, |writer, clock| {
        !within_bounds(clock, vc, bounded) || excluded_by(excluded, writer, clock)
    })?;
    Some((vc.clone(), version))
}

/// The newest version of `key` that `skip` does not reject (`skip(writer, its clock)`).
/// Versions whose `NLog` entry is collapsed have clocks within `NLog`'s base: visible when the
/// base is, else the read is too old (`None`).
fn newest(
    s: &Sss,
    key: &Key,
    skip: impl Fn(TxnId, &VClock) -> bool,
) -> Option<Option<(TxnId, Option<Value>)>> {
    let Some(entry) = s.store.get(key) else {
        return Some(None);
    };
    let versions: Vec<_> = entry.versions().collect();
    for v in versions.into_iter().rev() {
        let clock = s.nlog.clock_of(v.ts.0).unwrap_or(s.nlog.base());
        let collapsed = s.nlog.clock_of(v.ts.0).is_none();
        if skip(v.writer, clock) {
            if collapsed {
                return None;
            }
            continue;
        }
        return Some(Some((v.writer, v.value.clone())));
    }
    Some(None)
}
