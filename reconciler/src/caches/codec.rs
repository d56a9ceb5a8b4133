//! The bytes of a packed body: serde_json's output with the fragments every ExternalSecret
//! repeats (its keys, in the sorted order serde_json writes a `Value`'s, and the usual constant
//! values) written as one or two bytes each. At 10,000 ExternalSecrets the body was the largest
//! part of the cache (about 0.75 KB of JSON each, of which more than half these fragments).
//!
//! serde_json writes no byte below 0x20 (control characters in strings are escaped, and it
//! writes no whitespace), so those bytes are free for codes: 0x01..=0x1F stand for the first 31
//! fragments, 0x00 followed by `n` for fragment 31 + n, and 0x00 0xFF escapes a literal byte
//! below 0x20 should one ever occur. Any input reads back exactly; an object with fields not
//! listed here is only coded less tightly.

use std::sync::LazyLock;

/// The fragments, most frequent first (the first 31 take one byte). A match is tried longest
/// first, so a long run and its parts may both be listed.
const FRAGMENTS: &[&str] = &[
    // Metadata.
    r#"{"metadata":{"creationTimestamp":""#,
    r#"","generation":"#,
    r#","labels":{"keyward.dev/controller-class":""#,
    r#","resourceVersion":""#,
    r#"","uid":""#,
    // Spec, one `data` entry as the API server defaults it.
    r#""},"spec":{"data":[{"remoteRef":{"conversionStrategy":"Default","decodingStrategy":"None","key":""#,
    r#"","metadataPolicy":"None"},"secretKey":""#,
    r#"},{"remoteRef":{"conversionStrategy":"Default","decodingStrategy":"None","key":""#,
    r#""}],"refreshInterval":""#,
    r#"","refreshPolicy":"Periodic""#,
    r#","secretStoreRef":{"kind":"Provider","name":""#,
    r#"","target":{"creationPolicy":"Owner","deletionPolicy":"Retain","name":""#,
    // Status after a sync.
    r#""}},"status":{"binding":{"name":""#,
    r#""},"conditions":[{"lastTransitionTime":""#,
    r#"","message":"Secret was synced","reason":"SecretSynced","status":"True","type":"Ready"}],"refreshTime":""#,
    r#"","syncedDataHash":""#,
    r#"","syncedResourceVersion":""#,
    r#""}}"#,
    // Single keys and values, for objects that differ from the above.
    r#"{"metadata":{"#,
    r#""annotations":{"#,
    r#""creationTimestamp":""#,
    r#""finalizers":["#,
    r#""labels":{"#,
    r#""ownerReferences":[{"#,
    r#""spec":{"#,
    r#""data":[{"#,
    r#""remoteRef":{"#,
    r#""conversionStrategy":"Default""#,
    r#""decodingStrategy":"None""#,
    r#""metadataPolicy":"None""#,
    r#""secretKey":""#,
    r#""key":""#,
    r#""property":""#,
    r#""version":""#,
    r#""dataFrom":[{"#,
    r#""extract":{"#,
    r#""find":{"#,
    r#""rewrite":[{"#,
    r#""sourceRef":{"#,
    r#""generatorRef":{"#,
    r#""refreshInterval":""#,
    r#""refreshPolicy":""#,
    r#""secretStoreRef":{"#,
    r#""kind":"Provider""#,
    r#""kind":"ClusterProvider""#,
    r#""kind":"SecretStore""#,
    r#""kind":"ClusterSecretStore""#,
    r#""target":{"#,
    r#""creationPolicy":"Owner""#,
    r#""creationPolicy":""#,
    r#""deletionPolicy":"Retain""#,
    r#""deletionPolicy":""#,
    r#""immutable":"#,
    r#""template":{"#,
    r#""engineVersion":"v2""#,
    r#""mergePolicy":"Replace""#,
    r#""metadata":{"#,
    r#""type":""#,
    r#""name":""#,
    r#""status":{"#,
    r#""binding":{"#,
    r#""conditions":[{"#,
    r#""lastTransitionTime":""#,
    r#""message":""#,
    r#""reason":"SecretSynced""#,
    r#""reason":"SecretSyncedError""#,
    r#""reason":""#,
    r#""status":"True""#,
    r#""status":"False""#,
    r#""type":"Ready""#,
    r#""refreshTime":""#,
    r#""syncedDataHash":""#,
    r#""syncedResourceVersion":""#,
    r#""apiVersion":"external-secrets.io/v1""#,
    r#""kind":"ClusterExternalSecret""#,
    r#""controller":true"#,
    r#""blockOwnerDeletion":true"#,
    r#""uid":""#,
    r#""resourceVersion":""#,
    r#""generation":"#,
];

/// Fragments codable in one byte (0x01..=0x1F).
const SHORT: usize = 31;
/// The second byte after 0x00 that escapes a literal byte below 0x20.
const LITERAL: u8 = 0xFF;

/// For each first byte, the fragments starting with it, longest first.
static BY_FIRST_BYTE: LazyLock<Vec<Vec<usize>>> = LazyLock::new(|| {
    let mut table = vec![Vec::new(); 256];
    for (i, f) in FRAGMENTS.iter().enumerate() {
        table[usize::from(f.as_bytes()[0])].push(i);
    }
    for candidates in &mut table {
        candidates.sort_by_key(|&i| std::cmp::Reverse(FRAGMENTS[i].len()));
    }
    table
});

/// Codes `json` (any bytes read back exactly; serde_json's output is what is coded tightly).
pub fn encode(json: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(json.len() / 2);
    let mut rest = json;
    while let Some(&first) = rest.first() {
        let hit = BY_FIRST_BYTE[usize::from(first)].iter().find(|&&i| rest.starts_with(FRAGMENTS[i].as_bytes()));
        match hit {
            Some(&i) => {
                // The table holds fewer than 31 + 255 fragments (asserted by a test).
                match u8::try_from(i + 1) {
                    Ok(code) if i < SHORT => out.push(code),
                    _ => out.extend([0, (i - SHORT) as u8]),
                }
                rest = &rest[FRAGMENTS[i].len()..];
            }
            None => {
                if first < 0x20 {
                    out.extend([0, LITERAL]);
                }
                out.push(first);
                rest = &rest[1..];
            }
        }
    }
    out
}

/// What [`encode`] coded, as it was; `None` if `coded` is not its output.
pub fn decode(coded: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(coded.len() * 3);
    let mut bytes = coded.iter().copied();
    while let Some(b) = bytes.next() {
        match b {
            0 => match bytes.next()? {
                LITERAL => out.push(bytes.next()?),
                n => out.extend_from_slice(FRAGMENTS.get(SHORT + usize::from(n))?.as_bytes()),
            },
            1..=0x1F => out.extend_from_slice(FRAGMENTS[usize::from(b) - 1].as_bytes()),
            _ => out.push(b),
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_fits_its_codes() {
        assert!(FRAGMENTS.len() > SHORT && FRAGMENTS.len() <= SHORT + usize::from(LITERAL));
        let mut unique: Vec<_> = FRAGMENTS.to_vec();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(unique.len(), FRAGMENTS.len(), "a fragment listed twice");
        assert!(FRAGMENTS.iter().all(|f| f.len() >= 3 && f.bytes().all(|b| b >= 0x20)));
    }

    #[test]
    fn any_bytes_read_back_as_they_were() {
        let cases: [&[u8]; 6] = [
            b"",
            b"{}",
            br#"{"metadata":{"creationTimestamp":"x"}}"#,
            b"\x00\x01\x1f\xff plain",
            br#""key":"key":"#,
            "é\u{1}\"name\":\"ü\"".as_bytes(),
        ];
        for case in cases {
            assert_eq!(decode(&encode(case)).as_deref(), Some(case), "{case:?}");
        }
        // Every byte value, alone and next to a fragment.
        for b in 0..=255u8 {
            let case = [&[b][..], FRAGMENTS[0].as_bytes(), &[b]].concat();
            assert_eq!(decode(&encode(&case)), Some(case));
        }
        for (i, f) in FRAGMENTS.iter().enumerate() {
            let coded = encode(f.as_bytes());
            assert_eq!(coded.len(), if i < SHORT { 1 } else { 2 }, "{f}");
            assert_eq!(decode(&coded).as_deref(), Some(f.as_bytes()));
        }
    }

    #[test]
    fn what_encode_does_not_write_is_refused() {
        assert_eq!(decode(&[0]), None, "a code cut short");
        assert_eq!(decode(&[0, LITERAL]), None, "an escape cut short");
        assert_eq!(decode(&[0, LITERAL - 1]), None, "no such fragment");
    }
}
