//! Version selection for read-only reads at a replica (Algorithm 6, with versions chosen by
//! finality rather than by vector-clock bounds: see "Finality" and "The release rule" in the
//! module docs of `sss`).

use super::Sss;
use augur_types::{Key, TxnId, Value};

/// What a read-only read returns at a replica.
pub struct Chosen {
    /// The version read: its writer and value; `None` for a key with no version visible.
    pub version: Option<(TxnId, Option<Value>)>,
    /// The writers of newer versions of the key that the reader skipped, with their `NLog`
    /// positions: the reader holds them.
    pub skipped: Vec<(TxnId, u64)>,
}

/// The newest version of `key` whose writer `skip` does not reject. `None`: a version the
/// reader would need is garbage-collected (the store keeps every version above the oldest
/// writer not final here, so this takes a reader that excludes a writer final here, which no
/// reader does: see `NLog`'s retention).
pub fn newest_visible(s: &Sss, key: &Key, skip: impl Fn(TxnId) -> bool) -> Option<Chosen> {
    let mut skipped = Vec::new();
    let Some(entry) = s.store.get(key) else {
        return Some(Chosen {
            version: None,
            skipped,
        });
    };
    let versions: Vec<_> = entry.versions().collect();
    for v in versions.into_iter().rev() {
        if skip(v.writer) {
            skipped.push((v.writer, v.ts.0));
            continue;
        }
        return Some(Chosen {
            version: Some((v.writer, v.value.clone())),
            skipped,
        });
    }
    // Every version left was skipped: the key had none before them, unless older ones were
    // collected (the store keeps the newest version whose `NLog` entry is collapsed, and drops
    // the ones before it).
    let collected = entry
        .versions()
        .next()
        .is_some_and(|oldest| oldest.ts.0 < s.nlog.first_position());
    if collected {
        return None;
    }
    Some(Chosen {
        version: None,
        skipped,
    })
}
