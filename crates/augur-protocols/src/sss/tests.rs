use super::*;

#[test]
fn every_mutant_has_a_name_the_protocol_knows() {
    for (name, _) in MUTANTS {
        assert!(Mutant::named(name).is_some(), "{name}");
    }
    assert_eq!(Mutant::named("no-such-mutant"), None);
}
