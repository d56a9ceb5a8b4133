//! JSON values as stores keep them: a secret whose value is a JSON object can be read property
//! by property (as upstream, a literal key first, then a dotted path), mapped to a Secret's keys,
//! and pushed into property by property. Shared by the store providers.

use std::collections::BTreeMap;

use keyward_proto::ProviderError;
use keyward_proto::v1::{ExternalSecretFind, PushSecretData};
use serde::de::DeserializeOwned;

use crate::SecretMap;

/// A JSON value as bytes: strings as they are, anything else as JSON text.
pub fn json_bytes(v: &serde_json::Value) -> Vec<u8> {
    match v {
        serde_json::Value::String(s) => s.clone().into_bytes(),
        other => other.to_string().into_bytes(),
    }
}

/// One property of a JSON object value: the key as written, else a dotted path (`db.user`)
/// whose numeric parts index arrays (`friends.1.first`), as upstream's gjson paths do.
pub fn property<'a>(value: &'a serde_json::Value, property: &str) -> Option<&'a serde_json::Value> {
    if let Some(v) = value.get(property) {
        return Some(v);
    }
    property.split('.').try_fold(value, |v, part| match v {
        serde_json::Value::Array(items) => part.parse::<usize>().ok().and_then(|i| items.get(i)),
        _ => v.get(part),
    })
}

/// Whether a secret value has `prop`, resolved as [`property`] resolves it (SecretExists with a
/// property); a value that is not JSON has none.
pub fn has_property(raw: &[u8], prop: &str) -> bool {
    serde_json::from_slice::<serde_json::Value>(raw).is_ok_and(|v| property(&v, prop).is_some())
}

/// Reads a secret value as a JSON object, naming the secret when it is not one.
pub fn json_object(raw: &[u8], name: &str) -> Result<serde_json::Map<String, serde_json::Value>, ProviderError> {
    match serde_json::from_slice::<serde_json::Value>(raw) {
        Ok(serde_json::Value::Object(m)) => Ok(m),
        _ => Err(ProviderError::InvalidArgument(format!(
            "secret {name:?} is not a JSON object, so it has no properties"
        ))),
    }
}

/// GetSecret with a property: that property of the JSON value.
pub fn value_property(raw: &[u8], name: &str, prop: &str) -> Result<Vec<u8>, ProviderError> {
    let value: serde_json::Value = serde_json::Value::Object(json_object(raw, name)?);
    property(&value, prop)
        .map(json_bytes)
        .ok_or_else(|| ProviderError::NoSecret(format!("secret {name:?} has no property {prop:?}")))
}

/// GetSecretMap: every property of the JSON value (of one property's value, with `prop`).
pub fn value_map(raw: &[u8], name: &str, prop: &str) -> Result<SecretMap, ProviderError> {
    let object = if prop.is_empty() {
        json_object(raw, name)?
    } else {
        json_object(&value_property(raw, name, prop)?, &format!("{name}.{prop}"))?
    };
    Ok(object.iter().map(|(k, v)| (k.clone(), json_bytes(v))).collect())
}

/// The value a push writes. Without a secret key: the whole source Secret as a JSON object of
/// strings. With a property: the source value under that property of the current JSON value
/// (`current`, if any). Otherwise the source value as it is.
pub fn push_value(
    current: Option<&[u8]>,
    secret_data: &SecretMap,
    data: &PushSecretData,
    name: &str,
) -> Result<Vec<u8>, ProviderError> {
    let text = |k: &str, v: &[u8]| {
        String::from_utf8(v.to_vec()).map_err(|_| {
            ProviderError::InvalidArgument(format!(
                "key {k:?} of the source Secret is not UTF-8, so it cannot go into JSON"
            ))
        })
    };
    if data.secret_key.is_empty() {
        let mut out = BTreeMap::new();
        for (k, v) in secret_data {
            out.insert(k.clone(), text(k, v)?);
        }
        return serde_json::to_vec(&out).map_err(|e| ProviderError::Internal(e.to_string()));
    }
    let value = secret_data
        .get(&data.secret_key)
        .ok_or_else(|| ProviderError::InvalidArgument(format!("the source Secret has no key {:?}", data.secret_key)))?;
    if data.property.is_empty() {
        return Ok(value.clone());
    }
    let mut object = match current {
        Some(raw) if !raw.is_empty() => json_object(raw, name)?,
        _ => serde_json::Map::new(),
    };
    object.insert(data.property.clone(), serde_json::Value::String(text(&data.secret_key, value)?));
    serde_json::to_vec(&object).map_err(|e| ProviderError::Internal(e.to_string()))
}

/// What a property delete leaves: `None` when the value has no properties left (the secret is
/// deleted then), else the JSON without the property. `Some(unchanged)` when it was absent.
pub fn without_property(raw: &[u8], name: &str, prop: &str) -> Result<Option<Vec<u8>>, ProviderError> {
    let mut object = json_object(raw, name)?;
    if object.remove(prop).is_none() {
        return Ok(Some(raw.to_vec()));
    }
    if object.is_empty() {
        return Ok(None);
    }
    serde_json::to_vec(&object).map(Some).map_err(|e| ProviderError::Internal(e.to_string()))
}

#[derive(serde::Deserialize)]
struct Envelope<T> {
    #[serde(default)]
    kind: Option<String>,
    spec: Option<T>,
}

/// The `spec` of push metadata in upstream's envelope (`kind: PushSecretMetadata`; the
/// `apiVersion` is not checked); empty bytes, `null` or no `spec` give the default.
pub fn push_metadata_spec<T: DeserializeOwned + Default>(bytes: &[u8]) -> Result<T, ProviderError> {
    let text = std::str::from_utf8(bytes).unwrap_or_default().trim();
    if text.is_empty() || text == "null" {
        return Ok(T::default());
    }
    let env: Envelope<T> = serde_json::from_slice(bytes).map_err(|e| {
        ProviderError::InvalidArgument(format!("push metadata is not a PushSecretMetadata object: {e}"))
    })?;
    if let Some(k) = env.kind.filter(|k| k != "PushSecretMetadata") {
        return Err(ProviderError::InvalidArgument(format!("push metadata kind {k:?} is not PushSecretMetadata")));
    }
    Ok(env.spec.unwrap_or_default())
}

/// The compiled `find.name.regexp`, if any.
pub fn find_regex(find: &ExternalSecretFind) -> Result<Option<regex::Regex>, ProviderError> {
    match find.name.as_ref().map(|n| n.regexp.as_str()).filter(|r| !r.is_empty()) {
        Some(r) => regex::Regex::new(r)
            .map(Some)
            .map_err(|e| ProviderError::InvalidArgument(format!("find.name.regexp {r:?}: {e}"))),
        None => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn properties_of_json_values() {
        let raw = br#"{"user":"app","port":5432,"db":{"host":"h"},"a.b":"literal"}"#;
        assert_eq!(value_property(raw, "s", "user").unwrap(), b"app");
        assert_eq!(value_property(raw, "s", "port").unwrap(), b"5432");
        assert_eq!(value_property(raw, "s", "db.host").unwrap(), b"h", "dotted path");
        assert_eq!(value_property(raw, "s", "a.b").unwrap(), b"literal", "a literal key wins");
        let list = br#"{"friends":[{"first":"Dale"},{"first":"Roger"}]}"#;
        assert_eq!(value_property(list, "s", "friends.1.first").unwrap(), b"Roger", "array index");
        assert!(value_property(list, "s", "friends.2.first").unwrap_err().is_not_found());
        assert!(value_property(list, "s", "friends.x").unwrap_err().is_not_found());
        assert_eq!(value_property(raw, "s", "db").unwrap(), br#"{"host":"h"}"#);
        let e = value_property(raw, "s", "nope").unwrap_err();
        assert!(e.is_not_found(), "{e}");
        let e = value_property(b"plain", "s", "user").unwrap_err();
        assert_eq!(e.code(), tonic::Code::InvalidArgument);
        let m = value_map(raw, "s", "").unwrap();
        assert_eq!(m["port"], b"5432");
        assert_eq!(value_map(raw, "s", "db").unwrap()["host"], b"h");
        assert!(has_property(raw, "db.host") && has_property(list, "friends.0.first") && has_property(raw, "a.b"));
        assert!(!has_property(raw, "db.port") && !has_property(list, "friends.2") && !has_property(b"plain", "x"));
    }

    fn push(key: &str, prop: &str) -> PushSecretData {
        PushSecretData { secret_key: key.into(), remote_key: "r".into(), property: prop.into(), ..Default::default() }
    }

    #[test]
    fn push_values() {
        let src: SecretMap = [("user".to_string(), b"app".to_vec()), ("pw".to_string(), b"s3".to_vec())].into();
        let whole = push_value(None, &src, &push("", ""), "r").unwrap();
        assert_eq!(serde_json::from_slice::<serde_json::Value>(&whole).unwrap(), json!({"user": "app", "pw": "s3"}));
        assert_eq!(push_value(None, &src, &push("pw", ""), "r").unwrap(), b"s3");
        let merged = push_value(Some(br#"{"old":"x"}"#), &src, &push("pw", "password"), "r").unwrap();
        assert_eq!(
            serde_json::from_slice::<serde_json::Value>(&merged).unwrap(),
            json!({"old": "x", "password": "s3"})
        );
        assert!(push_value(Some(b"not json"), &src, &push("pw", "p"), "r").is_err());
        assert!(push_value(None, &src, &push("missing", ""), "r").is_err());
    }

    #[derive(serde::Deserialize, Default, Debug, PartialEq)]
    struct Spec {
        #[serde(default)]
        a: String,
    }

    #[test]
    fn push_metadata_envelopes() {
        assert_eq!(push_metadata_spec::<Spec>(b"").unwrap(), Spec::default());
        assert_eq!(push_metadata_spec::<Spec>(b"null").unwrap(), Spec::default());
        let s: Spec = push_metadata_spec(br#"{"kind":"PushSecretMetadata","spec":{"a":"x"}}"#).unwrap();
        assert_eq!(s.a, "x");
        assert!(push_metadata_spec::<Spec>(br#"{"kind":"Other"}"#).is_err());
        assert!(push_metadata_spec::<Spec>(b"[1]").is_err());
        let find = |r: &str| ExternalSecretFind {
            name: Some(keyward_proto::v1::FindName { regexp: r.into() }),
            ..Default::default()
        };
        assert!(find_regex(&find("^a")).unwrap().is_some());
        assert!(find_regex(&find("")).unwrap().is_none());
        assert_eq!(find_regex(&find("(")).unwrap_err().code(), tonic::Code::InvalidArgument);
    }

    #[test]
    fn property_deletes() {
        assert_eq!(without_property(br#"{"a":"1","b":"2"}"#, "s", "a").unwrap(), Some(br#"{"b":"2"}"#.to_vec()));
        assert_eq!(without_property(br#"{"a":"1"}"#, "s", "a").unwrap(), None);
        assert_eq!(without_property(br#"{"a":"1"}"#, "s", "z").unwrap(), Some(br#"{"a":"1"}"#.to_vec()));
    }
}
