//! Remote keys and paths (`remoteRef.key`, `extract.key`, `find.path`, `remoteKey`).
//!
//! A key is tenant input that providers turn into a store path, often a URL path. Servers and
//! HTTP libraries resolve `.` and `..` (also percent-encoded, which the URL standard treats as
//! dots), split on encoded slashes after decoding, and read `?` and `#` as the end of the path;
//! any of them lets a key leave the mount or prefix the operator confined it to. So a key is
//! split on `/` into segments and a segment that could mean anything but a literal name is
//! refused. The provider runtime and the webhook both call [`key_segments`]: one rule.

use std::borrow::Cow;

/// How many rounds of percent-decoding are looked through. A server decodes once, a proxy in
/// front of it may decode again; real keys are never encoded more than that, so a segment that
/// still decodes further is refused rather than guessed about.
const DECODE_ROUNDS: usize = 3;

/// Why a segment is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SegmentRefusal {
    /// `a//b`: an empty segment between two slashes.
    Empty,
    /// `.` or `..`, raw or percent-encoded.
    Dot,
    /// A percent-encoded `/`, which a server splits on after decoding.
    EncodedSlash,
    /// `\`, a separator on some servers and proxies.
    Backslash,
    /// `?`, the start of a query.
    Query,
    /// `#`, the start of a fragment.
    Fragment,
    /// A control character (raw or encoded), which servers strip or choke on.
    Control,
    /// Percent-encoded more times than any server decodes.
    OverEncoded,
}

impl std::fmt::Display for SegmentRefusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            SegmentRefusal::Empty => "empty segments (\"//\") are not allowed",
            SegmentRefusal::Dot => "\".\" and \"..\" (also percent-encoded) would leave the store path",
            SegmentRefusal::EncodedSlash => "a percent-encoded \"/\" becomes a separator on the server",
            SegmentRefusal::Backslash => "\"\\\" is a path separator on some servers",
            SegmentRefusal::Query => "\"?\" would start a query",
            SegmentRefusal::Fragment => "\"#\" would start a fragment",
            SegmentRefusal::Control => "control characters are not allowed",
            SegmentRefusal::OverEncoded => "it is percent-encoded more than servers decode",
        })
    }
}

/// A refused key: the segment and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("segment {segment:?} is not allowed: {reason}")]
pub struct KeyError {
    /// The whole key, as given.
    pub key: String,
    /// The offending segment, as given (before any decoding).
    pub segment: String,
    /// Why it is refused.
    pub reason: SegmentRefusal,
}

impl KeyError {
    /// The message with the key named, for callers that have no field path to show.
    pub fn with_key(&self) -> String {
        format!("remote key {:?}: {self}", self.key)
    }
}

/// The segments of a key or path. Leading and trailing `/` are ignored (`/a/b/` is `a/b`); an
/// empty key has no segments (callers decide whether that is allowed). Every segment is
/// checked with [`check_segment`].
pub fn key_segments(key: &str) -> Result<Vec<&str>, KeyError> {
    let trimmed = key.trim_matches('/');
    if trimmed.is_empty() {
        return Ok(Vec::new());
    }
    trimmed
        .split('/')
        .map(|s| {
            check_segment(s).map(|()| s).map_err(|reason| KeyError {
                key: key.to_string(),
                segment: s.to_string(),
                reason,
            })
        })
        .collect()
}

/// Checks one segment: its raw form and every percent-decoded form of it.
pub fn check_segment(segment: &str) -> Result<(), SegmentRefusal> {
    if segment.is_empty() {
        return Err(SegmentRefusal::Empty);
    }
    let mut form = Cow::Borrowed(segment);
    for _ in 0..=DECODE_ROUNDS {
        check_form(&form)?;
        match percent_decode(&form) {
            Some(next) => form = Cow::Owned(next),
            None => return Ok(()),
        }
    }
    Err(SegmentRefusal::OverEncoded)
}

fn check_form(form: &str) -> Result<(), SegmentRefusal> {
    if form == "." || form == ".." {
        return Err(SegmentRefusal::Dot);
    }
    for c in form.chars() {
        match c {
            // Only a decoded form can hold a slash: the raw key was split on them.
            '/' => return Err(SegmentRefusal::EncodedSlash),
            '\\' => return Err(SegmentRefusal::Backslash),
            '?' => return Err(SegmentRefusal::Query),
            '#' => return Err(SegmentRefusal::Fragment),
            c if c.is_control() => return Err(SegmentRefusal::Control),
            _ => {}
        }
    }
    Ok(())
}

/// One round of percent-decoding; `None` when there is no valid `%XX` escape to decode.
/// Invalid UTF-8 after decoding becomes U+FFFD, which no check above matches, as servers
/// treat such bytes as a literal name too.
fn percent_decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut decoded = false;
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && let (Some(h), Some(l)) = (bytes.get(i + 1).and_then(hex), bytes.get(i + 2).and_then(hex))
        {
            out.push((h << 4) | l);
            decoded = true;
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    decoded.then(|| String::from_utf8_lossy(&out).into_owned())
}

fn hex(b: &u8) -> Option<u8> {
    (*b as char).to_digit(16).and_then(|d| u8::try_from(d).ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_that_pass() {
        for (key, segments) in [
            ("app/db", vec!["app", "db"]),
            ("/app/db/", vec!["app", "db"]),
            ("secret/data/foo", vec!["secret", "data", "foo"]),
            ("projects/123/secrets/db/versions/latest", vec!["projects", "123", "secrets", "db", "versions", "latest"]),
            (
                "arn:aws:secretsmanager:us-east-1:123456789012:secret:db-AbCdEf",
                vec!["arn:aws:secretsmanager:us-east-1:123456789012:secret:db-AbCdEf"],
            ),
            ("folderId:73/my-new-secret", vec!["folderId:73", "my-new-secret"]),
            ("Production.mySecret", vec!["Production.mySecret"]),
            ("a..b/...", vec!["a..b", "..."]),
            (".hidden/x.", vec![".hidden", "x."]),
            ("with space/100%/%zz/%2", vec!["with space", "100%", "%zz", "%2"]),
            ("my%20key", vec!["my%20key"]),
            ("ключ/密钥", vec!["ключ", "密钥"]),
            ("", vec![]),
            ("/", vec![]),
        ] {
            assert_eq!(key_segments(key).unwrap_or_else(|e| panic!("{key:?}: {e}")), segments, "{key:?}");
        }
    }

    #[test]
    fn keys_that_are_refused() {
        use SegmentRefusal::*;
        for (key, segment, reason) in [
            ("../auth/token/lookup-self", "..", Dot),
            ("kv/../auth/token/lookup-self", "..", Dot),
            ("app/./db", ".", Dot),
            ("app/..", "..", Dot),
            ("%2e%2e/auth", "%2e%2e", Dot),
            ("%2E%2e/auth", "%2E%2e", Dot),
            (".%2E/x", ".%2E", Dot),
            ("%2e./x", "%2e.", Dot),
            ("%2e/x", "%2e", Dot),
            ("%252e%252e/x", "%252e%252e", Dot),
            ("%25252e%25252e/x", "%25252e%25252e", Dot),
            ("a//b", "", Empty),
            ("..%2fauth", "..%2fauth", EncodedSlash),
            ("%2F", "%2F", EncodedSlash),
            ("a%252fb", "a%252fb", EncodedSlash),
            ("..\\auth", "..\\auth", Backslash),
            ("a%5cb", "a%5cb", Backslash),
            ("a%5C..", "a%5C..", Backslash),
            ("x?list=true", "x?list=true", Query),
            ("x%3flist=true", "x%3flist=true", Query),
            ("x#frag", "x#frag", Fragment),
            ("x%23frag", "x%23frag", Fragment),
            ("a\nb", "a\nb", Control),
            ("a%00b", "a%00b", Control),
            ("a%0d%0aX-Header: y", "a%0d%0aX-Header: y", Control),
            ("a\u{7f}", "a\u{7f}", Control),
            ("%2525252e", "%2525252e", OverEncoded),
        ] {
            let e = key_segments(key).expect_err(key);
            assert_eq!((e.segment.as_str(), e.reason), (segment, reason), "{key:?}");
            assert_eq!(e.key, key);
        }
    }

    #[test]
    fn messages_name_the_segment_and_the_key() {
        let e = key_segments("kv/../auth").expect_err("dot-dot");
        assert!(e.to_string().starts_with("segment \"..\" is not allowed"), "{e}");
        assert!(e.with_key().starts_with("remote key \"kv/../auth\": segment \"..\""), "{}", e.with_key());
    }
}
