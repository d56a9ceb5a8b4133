//! Secret key conversion, as upstream documents it: an ExternalSecret's `conversionStrategy`
//! (`Default` turns every character a key may not hold into `_`; `Unicode` turns it into its
//! code point, `_UXXXX_`, so `a/c` and `a_c` stay apart) and a PushSecret's `ReverseUnicode`
//! (turns those escapes back into characters before a push).
//!
//! A key keeps letters and digits (Unicode letters and numbers, as upstream), `-`, `.` and `_`.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use keyward_crds::external_secret::ConversionStrategy;
use keyward_crds::push_secret::PushSecretConversionStrategy;
use regex::Regex;

fn allowed(c: char) -> bool {
    c.is_alphabetic() || c.is_numeric() || matches!(c, '-' | '.' | '_')
}

/// Converts one key (an omitted strategy is `Default`).
pub fn convert_key(strategy: Option<ConversionStrategy>, key: &str) -> String {
    let mut out = String::with_capacity(key.len());
    for c in key.chars() {
        if allowed(c) {
            out.push(c);
        } else if strategy == Some(ConversionStrategy::Unicode) {
            out.push_str(&format!("_U{:04x}_", u32::from(c)));
        } else {
            out.push('_');
        }
    }
    out
}

/// An escape `_UXXXX_` (four or five hex digits).
static ESCAPE: LazyLock<Regex> = LazyLock::new(|| {
    #[allow(clippy::expect_used)] // a constant pattern
    Regex::new("_U([0-9a-fA-F]{4,5})_").expect("constant regex")
});

/// Undoes `Unicode` escaping of one key (an omitted strategy or `None` keeps it). An escape
/// that names no character is kept as written.
pub fn reverse_key(strategy: Option<PushSecretConversionStrategy>, key: &str) -> String {
    if strategy != Some(PushSecretConversionStrategy::ReverseUnicode) {
        return key.to_string();
    }
    ESCAPE
        .replace_all(key, |caps: &regex::Captures<'_>| {
            u32::from_str_radix(&caps[1], 16)
                .ok()
                .and_then(char::from_u32)
                .map_or_else(|| caps[0].to_string(), String::from)
        })
        .into_owned()
}

/// Applies `f` to every key; two keys that end up the same are an error naming both, never a
/// silently lost value.
pub fn map_keys<V>(
    map: impl IntoIterator<Item = (String, V)>,
    f: impl Fn(&str) -> String,
) -> Result<BTreeMap<String, V>, String> {
    let mut out: BTreeMap<String, V> = BTreeMap::new();
    let mut from: BTreeMap<String, String> = BTreeMap::new();
    for (k, v) in map {
        let converted = f(&k);
        if let Some(first) = from.get(&converted) {
            return Err(format!("keys {first:?} and {k:?} both become {converted:?}"));
        }
        from.insert(converted.clone(), k);
        out.insert(converted, v);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_and_unicode_conversion() {
        use ConversionStrategy::*;
        let cases = [
            (None, "a/c", "a_c"),
            (Some(Default), "a/c", "a_c"),
            (Some(Default), "db.user-name_1", "db.user-name_1"),
            // The example of upstream's guide: a division slash.
            (Some(Unicode), "a∕c", "a_U2215_c"),
            (Some(Unicode), "a/c", "a_U002f_c"),
            (Some(Unicode), "a_c", "a_c"),
            (Some(Unicode), "path/to key", "path_U002f_to_U0020_key"),
            (Some(Unicode), "smile😀", "smile_U1f600_"),
            (Some(Unicode), "größe", "größe"),
        ];
        for (strategy, key, want) in cases {
            assert_eq!(convert_key(strategy, key), want, "{strategy:?} {key}");
        }
    }

    #[test]
    fn reverse_unicode_undoes_unicode() {
        use PushSecretConversionStrategy::*;
        for key in ["a/c", "path/to key", "smile😀", "plain", "a∕c"] {
            let escaped = convert_key(Some(ConversionStrategy::Unicode), key);
            assert_eq!(reverse_key(Some(ReverseUnicode), &escaped), key);
        }
        assert_eq!(reverse_key(Some(ReverseUnicode), "A_U002F_B"), "A/B", "upper-case hex too");
        assert_eq!(reverse_key(Some(None), "a_U002f_c"), "a_U002f_c");
        assert_eq!(reverse_key(Option::None, "a_U002f_c"), "a_U002f_c");
        assert_eq!(reverse_key(Some(ReverseUnicode), "x_Ud800_y"), "x_Ud800_y", "a surrogate is no character");
        assert_eq!(reverse_key(Some(ReverseUnicode), "x_U12_y"), "x_U12_y", "too short to be an escape");
    }

    #[test]
    fn collisions_are_errors() {
        let map = [("a/c".to_string(), 1), ("a_c".to_string(), 2)];
        let err = map_keys(map.clone(), |k| convert_key(None, k)).unwrap_err();
        assert!(err.contains("\"a/c\"") && err.contains("\"a_c\""), "{err}");
        let ok = map_keys(map, |k| convert_key(Some(ConversionStrategy::Unicode), k)).unwrap();
        assert_eq!(ok.get("a_U002f_c"), Some(&1));
        assert_eq!(ok.get("a_c"), Some(&2));
    }
}
