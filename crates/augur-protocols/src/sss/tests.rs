use super::*;

#[test]
fn lock_timeouts_parse_in_micro_and_milliseconds() {
    assert_eq!(parse_lock_timeout("5ms"), Some(Duration::from_millis(5)));
    assert_eq!(
        parse_lock_timeout("100us"),
        Some(Duration::from_micros(100))
    );
    assert_eq!(parse_lock_timeout("0ms"), Some(Duration::ZERO));
    assert_eq!(parse_lock_timeout("7ms"), None);
    for value in LOCK_TIMEOUT_VALUES {
        assert!(parse_lock_timeout(value).is_some(), "{value}");
    }
}

#[test]
fn every_mutant_has_a_name_the_protocol_knows() {
    for (name, _) in MUTANTS {
        assert!(Mutant::named(name).is_some(), "{name}");
    }
    assert_eq!(Mutant::named("no-such-mutant"), None);
}
