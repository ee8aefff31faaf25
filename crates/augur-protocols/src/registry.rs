//! The run-time protocol registry: the list of every protocol, on top of the crate. Each
//! protocol module describes itself in a `pub const INFO: ProtocolInfo` with the vocabulary of
//! [`crate::protocol_info`] (re-exported here), which imports no protocol; adding a protocol
//! means writing its module and one line in the `register!` list below, which generates both
//! [`PROTOCOLS`] and [`visit`] from that one list. [`validate_settings`] checks protocol
//! settings before nodes are built.

pub use crate::protocol_info::*;

use crate::common::at_coordinator::AtCoordinator;
use augur_contract::Protocol;
use std::collections::BTreeMap;

/// The table of every registered protocol that README.md and the architecture guide carry
/// between `<!-- BEGIN augur protocols --markdown -->` and `<!-- END ... -->` (`augur protocols
/// --markdown` prints it; a test fails when a page's copy differs).
pub fn markdown_table() -> String {
    let mut table = String::from(
        "| protocol | paper and section | engine | claimed level | request forms | speculation |\n\
         | --- | --- | --- | --- | --- | --- |\n",
    );
    for p in PROTOCOLS {
        let engine = match p.engine {
            Engine::Own | Engine::External => p.engine.to_string(),
            shared => format!("`{shared}`"),
        };
        let speculation = p
            .speculation
            .map_or_else(|| "none".to_string(), |offer| offer.to_string());
        table.push_str(&format!(
            "| `{}` | {} | {engine} | {} | {} | {speculation} |\n",
            p.name,
            p.paper,
            p.claims_description(),
            p.forms_description()
        ));
    }
    table
}

/// Check the protocol settings `settings` (by name, without the `protocol.` prefix, as they
/// go into `ProtocolOptions::settings`) against what the protocol registered as `protocol`
/// accepts. See [`ProtocolInfo::validate_settings`].
pub fn validate_settings(
    protocol: &str,
    settings: &BTreeMap<String, String>,
) -> Result<(), SettingError> {
    info(protocol)?.validate_settings(settings)
}

/// Generate [`PROTOCOLS`] and [`visit`] from one list of `ProtocolType => INFO` pairs, so a
/// protocol cannot be listed without being visitable or the other way round. Each name must be
/// registered once (checked at compile time).
macro_rules! register {
    ($($protocol:ty => $info:path),+ $(,)?) => {
        /// Every implemented protocol, in the order `augur protocols` lists them.
        pub const PROTOCOLS: &[ProtocolInfo] = &[$($info),+];

        /// Call `visitor.visit::<P>()` with the protocol type registered under `name`.
        pub fn visit<V: ProtocolVisitor>(
            name: &str,
            visitor: V,
        ) -> Result<V::Output, UnknownProtocol> {
            let info = info(name)?;
            $(
                if info.name == $info.name {
                    return Ok(visitor.visit::<$protocol>(info));
                }
            )+
            unreachable!("PROTOCOLS and visit come from one list")
        }
    };
}

// Protocols with deferred updates serve one-shot transactions by running the procedure at
// the coordinator (`AtCoordinator`).
register! {
    AtCoordinator<crate::nocc::Nocc> => crate::nocc::INFO,
    AtCoordinator<crate::clocksi_rep::ClockSiRep> => crate::clocksi_rep::INFO,
    AtCoordinator<crate::str::Str> => crate::str::INFO,
    AtCoordinator<crate::planet::Planet> => crate::planet::INFO,
    AtCoordinator<crate::sss::Sss> => crate::sss::INFO,
    AtCoordinator<crate::twopc_baseline::TwoPcBaseline> => crate::twopc_baseline::INFO,
    AtCoordinator<crate::occ::OccNode> => crate::occ::INFO,
    AtCoordinator<crate::two_pl::TwoPlNode> => crate::two_pl::INFO,
    AtCoordinator<crate::rc::RcNode> => crate::rc::INFO,
    AtCoordinator<crate::dst_occ::DstOccNode> => crate::dst_occ::INFO,
    AtCoordinator<crate::dst_2pl::Dst2PlNode> => crate::dst_2pl::INFO,
    AtCoordinator<crate::gts::GtsNode> => crate::gts::INFO,
    AtCoordinator<crate::vts::VtsNode> => crate::vts::INFO,
    AtCoordinator<crate::walter::Walter> => crate::walter::INFO,
    // rococo runs one-shot procedures as deferrable pieces itself (its module docs).
    crate::rococo::Rococo => crate::rococo::INFO,
    // s-smr orders whole transactions, then runs them (its module docs).
    crate::s_smr::SSmr => crate::s_smr::INFO,
    // calvin orders whole transactions, then locks and runs them (its module docs).
    crate::calvin::Calvin => crate::calvin::INFO,
    // sparkle orders whole transactions, then runs them speculatively (its module docs).
    crate::sparkle::Sparkle => crate::sparkle::INFO,
    // oab-spec and sm-rep replicate whole one-shot requests to every node (their module docs).
    crate::oab_spec::OabSpec => crate::oab_spec::INFO,
    crate::sm_rep::SmRep => crate::sm_rep::INFO,
}

const _: () = assert!(
    names_are_unique(PROTOCOLS),
    "two registered protocols share a name"
);

/// Whether no two of `protocols` have the same name, ignoring ASCII case (usable in constants).
const fn names_are_unique(protocols: &[ProtocolInfo]) -> bool {
    let mut i = 0;
    while i < protocols.len() {
        let mut j = i + 1;
        while j < protocols.len() {
            if protocols[i].name.eq_ignore_ascii_case(protocols[j].name) {
                return false;
            }
            j += 1;
        }
        i += 1;
    }
    true
}

/// Something to do with a protocol type chosen by name at run time.
pub trait ProtocolVisitor {
    type Output;
    fn visit<P: Protocol>(self, info: &'static ProtocolInfo) -> Self::Output;
}

/// The protocol registered under `name`.
pub fn info(name: &str) -> Result<&'static ProtocolInfo, UnknownProtocol> {
    PROTOCOLS
        .iter()
        .find(|p| p.name == name)
        .ok_or_else(|| UnknownProtocol {
            name: name.to_string(),
            valid: PROTOCOLS
                .iter()
                .map(|p| p.name)
                .collect::<Vec<_>>()
                .join(", "),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Name;
    impl ProtocolVisitor for Name {
        type Output = &'static str;
        fn visit<P: Protocol>(self, info: &'static ProtocolInfo) -> &'static str {
            info.name
        }
    }

    #[test]
    fn every_listed_protocol_resolves() {
        for p in PROTOCOLS {
            assert_eq!(visit(p.name, Name).unwrap(), p.name);
        }
    }

    #[test]
    fn every_setting_accepts_its_default_and_every_default_speculation_is_offered() {
        for p in PROTOCOLS {
            for s in p.settings {
                assert!(s.accepts(s.default), "{}: {s} rejects its default", p.name);
            }
            for value in ["always", "batch", "batch:10", "off"] {
                let settings = BTreeMap::from([("log".to_string(), value.to_string())]);
                assert!(
                    p.validate_settings(&settings).is_ok(),
                    "{}: log={value}",
                    p.name
                );
            }
            let bad = BTreeMap::from([("log".to_string(), "sometimes".to_string())]);
            assert!(p.validate_settings(&bad).is_err());
            if let Some(offer) = p.speculation {
                assert!(offer.max_chain >= 1, "{}", p.name);
                assert!(offer.default == "auto" || offer.default.contains("commits:"));
            }
        }
    }

    struct Forms;
    impl ProtocolVisitor for Forms {
        type Output = &'static [RequestForm];
        fn visit<P: Protocol>(self, _info: &'static ProtocolInfo) -> &'static [RequestForm] {
            P::FORMS
        }
    }

    #[test]
    fn every_protocol_serves_the_forms_it_lists() {
        for p in PROTOCOLS {
            assert!(!p.forms.is_empty(), "{} serves no request form", p.name);
            assert_eq!(visit(p.name, Forms).unwrap(), p.forms, "{}", p.name);
        }
        assert_eq!(RequestForm::OneShot.to_string(), "one-shot");
        assert_eq!(RequestForm::parse("one-shot"), Some(RequestForm::OneShot));
        assert_eq!(RequestForm::parse("batch"), None);
    }

    struct TypeName;
    impl ProtocolVisitor for TypeName {
        type Output = &'static str;
        fn visit<P: Protocol>(self, _info: &'static ProtocolInfo) -> &'static str {
            std::any::type_name::<P>()
        }
    }

    #[test]
    fn every_protocol_names_the_engine_it_runs_on() {
        for p in PROTOCOLS {
            let type_name = visit(p.name, TypeName).unwrap();
            assert_eq!(
                p.engine == Engine::LockCommit,
                type_name.contains("common::lock_commit::LockCommit<"),
                "{}: engine {} but type {type_name}",
                p.name,
                p.engine
            );
        }
        let table = markdown_table();
        assert_eq!(table.lines().count(), PROTOCOLS.len() + 2);
        assert!(table.contains(
            "| `calvin` | Sparkle (PVLDB 12) §5 baseline: Calvin (SIGMOD 2012) | `common::ordered` | strict serializable | one-shot; interactive for blind writes only | none |"
        ), "{table}");
    }

    #[test]
    fn duplicate_names_are_found() {
        assert!(names_are_unique(PROTOCOLS));
        let twice = [crate::nocc::INFO, crate::str::INFO, crate::nocc::INFO];
        assert!(!names_are_unique(&twice));
    }

    #[test]
    fn switches_read_on_off_true_false() {
        for v in SWITCH_VALUES {
            assert!(switch(v).is_some(), "{v}");
        }
        assert_eq!(switch("ON"), Some(true));
        assert_eq!(switch("False"), Some(false));
        assert_eq!(switch("yes"), None);
    }

    #[test]
    fn unknown_names_list_the_valid_ones() {
        let err = visit("spanner", Name).unwrap_err();
        assert_eq!(
            err.to_string(),
            "unknown protocol 'spanner'; valid protocols: nocc, clocksi-rep, str, planet, sss, 2pc-baseline, occ, 2pl, rc, dst-occ, dst-2pl, gts, vts, walter, rococo, s-smr, calvin, sparkle, oab-spec, sm-rep"
        );
    }
}
