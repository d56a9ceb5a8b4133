//! UUID: a random version 4 UUID under `uuid`, lowercase and hyphenated as upstream writes it.

use std::collections::BTreeMap;

/// One UUID (from the operating system's CSPRNG, through the `uuid` crate's v4).
pub fn generate() -> BTreeMap<String, Vec<u8>> {
    BTreeMap::from([("uuid".to_string(), uuid::Uuid::new_v4().hyphenated().to_string().into_bytes())])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_version_4_uuid_under_uuid() {
        let out = generate();
        let text = String::from_utf8(out["uuid"].clone()).unwrap();
        assert_eq!(text.len(), 36);
        let parsed = uuid::Uuid::parse_str(&text).unwrap();
        assert_eq!(parsed.get_version_num(), 4);
        assert_eq!(text, text.to_lowercase());
        assert_ne!(generate(), out);
    }
}
