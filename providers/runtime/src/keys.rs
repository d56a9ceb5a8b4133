//! Remote keys as providers use them: split into checked segments, and turned into URL paths
//! whose segments a server can never read as anything but names.
//!
//! The rule itself is `keyward_crds::rules::key_segments`, which the webhook calls at admission;
//! this wraps it in the contract's error so every provider refuses the same keys at runtime
//! (a key can reach a provider without passing the webhook: objects admitted before it existed,
//! rewritten PushSecret keys, other controllers).

use keyward_crds::rules::key_segments;

use crate::ProviderError;

/// The segments of a remote key or path (leading and trailing `/` ignored; an empty key has
/// none). A refused segment is `INVALID_ARGUMENT` naming the key and the segment.
pub fn segments(key: &str) -> Result<Vec<&str>, ProviderError> {
    key_segments(key).map_err(|e| ProviderError::InvalidArgument(e.with_key()))
}

/// Checks a key that a provider passes on whole (a name in an SDK call, say): the same rule,
/// the key itself unchanged.
pub fn check_key(key: &str) -> Result<(), ProviderError> {
    segments(key).map(drop)
}

/// A URL path (no leading `/`) from segments, each percent-encoded on its own: everything but
/// ASCII letters, digits and `-._~` becomes `%XX`, so a `%`, `?`, `#`, `/` or `;` inside a
/// segment stays part of that segment's name. URL parsers keep `%XX` as it is, so the path
/// survives being joined to a base URL and parsed again.
pub fn url_path<'a>(segments: impl IntoIterator<Item = &'a str>) -> String {
    let mut out = String::new();
    for (i, s) in segments.into_iter().enumerate() {
        if i > 0 {
            out.push('/');
        }
        encode_segment(&mut out, s);
    }
    out
}

fn encode_segment(out: &mut String, segment: &str) {
    for b in segment.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            out.push('%');
            out.push(char::from(HEX[usize::from(b >> 4)]));
            out.push(char::from(HEX[usize::from(b & 0xf)]));
        }
    }
}

const HEX: &[u8; 16] = b"0123456789ABCDEF";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refused_keys_are_invalid_arguments_naming_key_and_segment() {
        let e = segments("kv/%2e%2E/auth/token/lookup-self").expect_err("encoded dot-dot");
        assert_eq!(e.code(), tonic::Code::InvalidArgument);
        let msg = e.to_string();
        assert!(msg.contains("\"kv/%2e%2E/auth/token/lookup-self\"") && msg.contains("segment \"%2e%2E\""), "{msg}");
        assert_eq!(segments("/app/db/").expect("plain"), vec!["app", "db"]);
        assert!(check_key("arn:aws:secretsmanager:eu-west-1:1:secret:db-x").is_ok());
        assert!(check_key("team-a/../team-b").is_err());
    }

    #[test]
    fn url_paths_encode_each_segment() {
        assert_eq!(url_path(["kv", "data", "app", "db"]), "kv/data/app/db");
        assert_eq!(url_path(["my key", "100%", "a;b", "ü"]), "my%20key/100%25/a%3Bb/%C3%BC");
        assert_eq!(url_path(["a/b", "c?d", "e#f", "..."]), "a%2Fb/c%3Fd/e%23f/...");
        assert_eq!(url_path(Vec::<&str>::new()), "");
    }
}
