//! What a connection's first frames establish: that both ends belong to the same cluster and run
//! the same configuration, and who the other end is.
//!
//! A peer opens with [`Body::Hello`](super::Body::Hello), naming itself and carrying its
//! [`ClusterIdentity`] in full, so that a node refusing it can say exactly which settings
//! differ; it is answered [`Body::Accepted`](super::Body::Accepted) or
//! [`Body::Refused`](super::Body::Refused) with the reason, which the dialler logs too. A client
//! opens with [`Body::ClientHello`](super::Body::ClientHello), carrying the cluster id, the
//! configuration's fingerprint and the client token if the cluster requires one, and is
//! answered [`Body::Welcome`](super::Body::Welcome) with the client id the node assigned it.

use augur_types::{ClientId, NodeId};
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicU32, Ordering};

/// How long a new connection has to complete its TLS handshake and its hello.
pub const HANDSHAKE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// The cluster a node belongs to and the configuration every node of it must share: two nodes
/// whose identities differ refuse to talk, rather than diverge silently.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterIdentity {
    /// A name for the cluster, unique among the clusters an operator runs.
    pub cluster_id: String,
    /// Every setting that must agree across nodes (protocol, placement, options, node
    /// addresses...), by name, in a fixed order.
    pub settings: Vec<(String, String)>,
}

impl ClusterIdentity {
    /// A short digest of the whole identity (the first 16 hex digits of its SHA-256), for logs
    /// and for clients, which compare it without carrying every setting.
    pub fn fingerprint(&self) -> String {
        let mut ctx = ring::digest::Context::new(&ring::digest::SHA256);
        for part in std::iter::once(("cluster_id", self.cluster_id.as_str()))
            .chain(self.settings.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        {
            // Length-prefixed, so that no two different lists hash alike.
            for field in [part.0, part.1] {
                ctx.update(&(field.len() as u64).to_be_bytes());
                ctx.update(field.as_bytes());
            }
        }
        ctx.finish().as_ref()[..8]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }

    /// What differs between this node's identity (`self`) and another's, in words, naming
    /// each differing setting with both values; empty when they agree.
    pub fn differences(&self, theirs: &ClusterIdentity) -> Vec<String> {
        let mut out = Vec::new();
        if self.cluster_id != theirs.cluster_id {
            out.push(format!(
                "cluster id '{}' here, '{}' there",
                self.cluster_id, theirs.cluster_id
            ));
        }
        let lookup = |list: &[(String, String)], key: &str| {
            list.iter().find(|(k, _)| k == key).map(|(_, v)| v.clone())
        };
        let mut keys: Vec<&str> = self.settings.iter().map(|(k, _)| k.as_str()).collect();
        for (k, _) in &theirs.settings {
            if !keys.contains(&k.as_str()) {
                keys.push(k);
            }
        }
        for key in keys {
            let (mine, other) = (lookup(&self.settings, key), lookup(&theirs.settings, key));
            if mine != other {
                let show = |v: Option<String>| v.unwrap_or_else(|| "(unset)".into());
                out.push(format!(
                    "{key} = {} here, {} there",
                    show(mine),
                    show(other)
                ));
            }
        }
        out
    }
}

/// Hands out client ids that are unique across the cluster and across restarts: the node id in
/// the top 16 bits, a number drawn when the node started in the next 16, and a counter below.
/// A history recorded across a node's restart thus never shows two clients under one id
/// (unless the draw repeats, one chance in 65,536 per restart).
pub(super) struct ClientIds {
    prefix: u64,
    next: AtomicU32,
}

impl ClientIds {
    pub(super) fn new(node: NodeId) -> ClientIds {
        let boot: u16 = rand::random();
        ClientIds {
            prefix: ((node.0 as u64 & 0xffff) << 48) | ((boot as u64) << 32),
            next: AtomicU32::new(0),
        }
    }

    pub(super) fn assign(&self) -> ClientId {
        ClientId(self.prefix | self.next.fetch_add(1, Ordering::Relaxed) as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn identity(replication: &str) -> ClusterIdentity {
        ClusterIdentity {
            cluster_id: "c1".into(),
            settings: vec![
                ("protocol".into(), "clocksi-rep".into()),
                ("replication".into(), replication.into()),
            ],
        }
    }

    #[test]
    fn differences_name_each_setting_with_both_values() {
        assert!(identity("3").differences(&identity("3")).is_empty());
        assert_eq!(
            identity("3").differences(&identity("2")),
            ["replication = 3 here, 2 there"]
        );
        let mut other = identity("3");
        other.cluster_id = "c2".into();
        other.settings.push(("tls".into(), "on".into()));
        assert_eq!(
            identity("3").differences(&other),
            [
                "cluster id 'c1' here, 'c2' there",
                "tls = (unset) here, on there"
            ]
        );
    }

    #[test]
    fn fingerprints_follow_every_setting() {
        assert_eq!(identity("3").fingerprint(), identity("3").fingerprint());
        assert_ne!(identity("3").fingerprint(), identity("2").fingerprint());
        assert_eq!(identity("3").fingerprint().len(), 16);
    }

    #[test]
    fn assigned_client_ids_carry_the_node_and_differ() {
        let ids = ClientIds::new(NodeId(3));
        let (a, b) = (ids.assign(), ids.assign());
        assert_ne!(a, b);
        assert_eq!(a.0 >> 48, 3);
    }
}
