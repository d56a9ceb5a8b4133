use super::*;

fn spec(length: i64) -> PasswordSpec {
    PasswordSpec { length, ..Default::default() }
}

fn refused(s: &PasswordSpec) -> FieldError {
    password_plan("spec", s).expect_err("refused")
}

#[test]
fn defaults_are_upstreams() {
    let p = password_plan("spec", &spec(0)).unwrap();
    assert_eq!((p.letters, p.digits, p.symbols), (12, 6, 6), "length 24, a quarter digits and symbols");
    let p = password_plan("spec", &spec(42)).unwrap();
    assert_eq!((p.digits, p.symbols), (10, 10), "truncated, as upstream");
    assert_eq!(password_keys("spec", &spec(8)).unwrap(), ["password"]);
}

/// The spec that wrapped in release builds (no overflow checks): `digits + symbols` with digits
/// at `i64::MAX` went negative, passed, and left ~9.2e18 letters to generate with
/// `allowRepeat: true`. Refused here in every build: the counts are bounded before they are
/// added, and the sum is `checked_add` (this test also runs with `--release`).
#[test]
fn counts_near_i64_max_are_refused_in_every_build_without_wrapping() {
    let wrapping = PasswordSpec { digits: Some(i64::MAX), allow_repeat: true, ..spec(0) };
    let e = refused(&wrapping);
    assert_eq!(e.field, "spec.digits");
    assert!(e.message.contains("exceed the length (24)"), "{e}");
    for s in [
        PasswordSpec { symbols: Some(i64::MAX), allow_repeat: true, ..spec(MAX_PASSWORD_LENGTH) },
        PasswordSpec { digits: Some(i64::MAX), symbols: Some(i64::MAX), allow_repeat: true, ..spec(1) },
        PasswordSpec { digits: Some(i64::MIN), allow_repeat: true, ..spec(10) },
        PasswordSpec { digits: Some(i64::MAX - 5), symbols: Some(6), allow_repeat: true, ..spec(24) },
    ] {
        let e = refused(&s);
        assert!(e.field == "spec.digits" || e.field == "spec.symbols", "{e}");
    }
    let e = refused(&spec(i64::MAX));
    assert_eq!((e.field.as_str(), e.message.contains("above the limit of 1024")), ("spec.length", true), "{e}");
    // Whatever is accepted is at most the limit, in characters and in bytes.
    let big = PasswordSpec { allow_repeat: true, symbol_characters: Some("€".into()), ..spec(MAX_PASSWORD_LENGTH) };
    let p = password_plan("spec", &big).unwrap();
    assert_eq!(p.length(), 1024);
    assert_eq!(p.max_bytes(), 768 + 4 * 256);
}

#[test]
fn impossible_specs_are_refused_naming_the_field_and_what_to_change() {
    let cases = [
        (
            PasswordSpec { length: 80, digits: Some(0), symbols: Some(0), ..spec(0) },
            "spec.length",
            "80 letters without repeats",
        ),
        (PasswordSpec { digits: Some(11), ..spec(30) }, "spec.digits", "11 digits without repeats"),
        (
            PasswordSpec { symbols: Some(5), symbol_characters: Some("ab".into()), ..spec(30) },
            "spec.symbols",
            "symbols",
        ),
        (PasswordSpec { digits: Some(10), symbols: Some(10), ..spec(12) }, "spec.digits", "exceed the length (12)"),
        (PasswordSpec { digits: Some(-1), ..spec(12) }, "spec.digits", "must not be negative"),
        (
            PasswordSpec { symbols: Some(1), symbol_characters: Some(String::new()), ..spec(12) },
            "spec.symbolCharacters",
            "is empty",
        ),
        (spec(MAX_PASSWORD_LENGTH + 1), "spec.length", "above the limit"),
    ];
    for (s, field, want) in cases {
        let e = refused(&s);
        assert_eq!(e.field, field, "{e}");
        assert!(e.message.contains(want), "{e} should mention {want:?}");
    }
    let in_cluster = password_plan("spec.generator.passwordSpec", &spec(MAX_PASSWORD_LENGTH + 1)).unwrap_err();
    assert_eq!(in_cluster.field, "spec.generator.passwordSpec.length");
    let ok = PasswordSpec { length: 80, digits: Some(0), symbols: Some(0), allow_repeat: true, ..spec(0) };
    assert!(password_plan("spec", &ok).is_ok(), "the same with allowRepeat");
    for (keys, want) in [
        (vec!["a".to_string(), "a".to_string()], "twice"),
        (vec![String::new()], "empty key"),
        ((0..65).map(|i| i.to_string()).collect(), "above the limit of 64"),
    ] {
        let e = password_keys("spec", &PasswordSpec { secret_keys: keys, ..spec(8) }).unwrap_err();
        assert_eq!(e.field, "spec.secretKeys");
        assert!(e.message.contains(want), "{e}");
    }
}

#[test]
fn long_symbol_characters_are_refused_without_reading_them() {
    // Distinct characters outside ASCII: deduplicating a megabyte of them one by one took
    // tens of seconds of a generation slot.
    let many: String = (0..350_000u32).filter_map(|i| char::from_u32(0x4e00 + i % 20_000)).collect();
    let started = std::time::Instant::now();
    let e = refused(&PasswordSpec { symbol_characters: Some(many), ..spec(12) });
    assert!(e.message.contains("bytes long, above the limit of 4096"), "{e}");
    assert!(started.elapsed() < std::time::Duration::from_millis(100), "{:?}", started.elapsed());

    let distinct: String = (0..300u32).filter_map(|i| char::from_u32(0x4e00 + i)).collect();
    let e = refused(&PasswordSpec { symbol_characters: Some(distinct), ..spec(12) });
    assert!(e.message.contains("more than 256 characters"), "{e}");

    let repeated = "-_".repeat(MAX_SYMBOL_CHARACTERS_BYTES / 2);
    let plan = password_plan("spec", &PasswordSpec { symbol_characters: Some(repeated), symbols: Some(2), ..spec(12) })
        .unwrap();
    assert_eq!(plan.symbol_set, vec!['-', '_'], "duplicates within the byte limit are dropped, in order");
}

#[test]
fn symbols_that_are_letters_count_against_the_letters() {
    let s =
        PasswordSpec { length: 53, digits: Some(0), symbols: Some(2), symbol_characters: Some("ab".into()), ..spec(0) };
    let e = refused(&s);
    assert!(e.message.contains("51 letters without repeats, but only 50"), "a and b are symbols then: {e}");
    assert!(password_plan("spec", &PasswordSpec { length: 52, ..s }).is_ok());
}
