//! Decoding strategies and key rewrites, applied by the reconciler after the provider answered
//! (providers return raw bytes and never decode).

use std::collections::BTreeMap;

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD};
use keyward_crds::external_secret::{DecodingStrategy, ExternalSecretRewrite};
use regex::Regex;

/// Decodes one value.
pub fn decode(strategy: Option<DecodingStrategy>, key: &str, value: Vec<u8>) -> Result<Vec<u8>, String> {
    let trimmed = |v: &[u8]| String::from_utf8_lossy(v).trim().to_string();
    match strategy.unwrap_or(DecodingStrategy::None) {
        DecodingStrategy::None => Ok(value),
        DecodingStrategy::Base64 => {
            let s = trimmed(&value);
            STANDARD
                .decode(&s)
                .or_else(|_| STANDARD_NO_PAD.decode(&s))
                .map_err(|e| format!("value of {key:?} is not Base64 (decodingStrategy Base64): {e}"))
        }
        DecodingStrategy::Base64Url => {
            let s = trimmed(&value);
            URL_SAFE
                .decode(&s)
                .or_else(|_| URL_SAFE_NO_PAD.decode(&s))
                .map_err(|e| format!("value of {key:?} is not URL-safe Base64 (decodingStrategy Base64URL): {e}"))
        }
        DecodingStrategy::Auto => {
            let s = trimmed(&value);
            Ok(STANDARD
                .decode(&s)
                .or_else(|_| URL_SAFE.decode(&s))
                .or_else(|_| URL_SAFE_NO_PAD.decode(&s))
                .unwrap_or(value))
        }
    }
}

/// Applies the rewrites of a dataFrom entry, in order, to every key of `map`.
pub fn rewrite(
    rewrites: &[ExternalSecretRewrite],
    map: BTreeMap<String, Vec<u8>>,
) -> Result<BTreeMap<String, Vec<u8>>, String> {
    let mut map = map;
    for (i, r) in rewrites.iter().enumerate() {
        if let Some(t) = &r.transform {
            let limits = keyward_template::Limits::default();
            map = map
                .into_iter()
                .map(|(k, v)| {
                    keyward_template::transform_key(&t.template, &k, &limits)
                        .map(|k| (k, v))
                        .map_err(|e| format!("rewrite[{i}].transform: {e}"))
                })
                .collect::<Result<_, _>>()?;
            continue;
        }
        let Some(re) = &r.regexp else { continue };
        let pattern = Regex::new(&re.source)
            .map_err(|e| format!("rewrite[{i}].regexp.source {:?} is invalid: {e}", re.source))?;
        map = map.into_iter().map(|(k, v)| (pattern.replace_all(&k, re.target.as_str()).into_owned(), v)).collect();
    }
    Ok(map)
}

#[cfg(test)]
mod tests {
    use super::*;
    use keyward_crds::external_secret::{RewriteRegexp, RewriteTransform};

    #[test]
    fn decoding_table() {
        use DecodingStrategy::*;
        let cases: Vec<(Option<DecodingStrategy>, &str, Result<&str, ()>)> = vec![
            (Option::None, "aGVsbG8=", Ok("aGVsbG8=")),
            (Some(None), "aGVsbG8=", Ok("aGVsbG8=")),
            (Some(Base64), "aGVsbG8=", Ok("hello")),
            (Some(Base64), "aGVsbG8", Ok("hello")),
            (Some(Base64), "not base64!", Err(())),
            (Some(Base64Url), "Pz8_", Ok("???")),
            (Some(Base64Url), "Pz8/", Err(())),
            (Some(Auto), "aGVsbG8=", Ok("hello")),
            (Some(Auto), "Pz8_", Ok("???")),
            (Some(Auto), "plain text", Ok("plain text")),
        ];
        for (strategy, input, want) in cases {
            let got = decode(strategy, "k", input.as_bytes().to_vec());
            match want {
                Ok(w) => assert_eq!(got.as_deref(), Ok(w.as_bytes()), "{strategy:?} {input}"),
                Err(()) => assert!(got.unwrap_err().contains("\"k\""), "{strategy:?} {input}"),
            }
        }
    }

    #[test]
    fn regexp_and_template_rewrites() {
        let map: BTreeMap<String, Vec<u8>> =
            [("db-user".to_string(), vec![1]), ("db-pass".to_string(), vec![2])].into();
        let rw = vec![
            ExternalSecretRewrite {
                regexp: Some(RewriteRegexp { source: "^db-(.*)$".into(), target: "DB_$1".into() }),
                transform: None,
            },
            ExternalSecretRewrite {
                regexp: Some(RewriteRegexp { source: "pass".into(), target: "PASSWORD".into() }),
                transform: None,
            },
        ];
        let out = rewrite(&rw, map.clone()).unwrap();
        assert_eq!(out.keys().collect::<Vec<_>>(), vec!["DB_PASSWORD", "DB_user"]);
        let t = vec![ExternalSecretRewrite {
            regexp: None,
            transform: Some(RewriteTransform { template: "{{ .value }}".into() }),
        }];
        let out = rewrite(&t, map.clone()).unwrap();
        assert_eq!(out.keys().collect::<Vec<_>>(), map.keys().collect::<Vec<_>>(), "identity transform");
        let upper = vec![ExternalSecretRewrite {
            transform: Some(RewriteTransform { template: "{{ .value | upper }}".into() }),
            ..Default::default()
        }];
        let out = rewrite(&upper, map.clone()).unwrap();
        assert!(out.keys().all(|k| k.chars().all(|c| !c.is_lowercase())), "{out:?}");
    }
}
