//! Key Vault's data plane: secrets, keys and certificates, with its `api-version` check, the
//! bearer challenge, soft delete and its error bodies (`{"error": {"code", "message"}}`), from
//! Microsoft's REST reference.

// A body or field that cannot be read is answered at once: the error is the answer.
#![allow(clippy::result_large_err)]

use std::collections::HashMap;

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use serde_json::{Map, Value, json};

use super::{CertVersion, KeyVersion, Req, SecretVersion, Shared, State, TENANT, VAULT_RESOURCE, json, lock, now};

/// The API versions Key Vault's data plane answers.
const API_VERSIONS: [&str; 10] =
    ["2016-10-01", "7.0", "7.1", "7.2", "7.3", "7.4", "7.5", "7.6", "2025-07-01", "2026-04-01"];
/// Days a deleted object stays recoverable.
const RECOVERABLE_DAYS: i64 = 90;

type Resp = axum::response::Response;

fn kv_error(status: u16, code: &str, message: &str, inner: Option<&str>) -> Resp {
    let mut error = json!({"code": code, "message": message});
    if let Some(i) = inner {
        error["innererror"] = json!({"code": i});
    }
    json(status, json!({"error": error}))
}

fn bad(message: &str) -> Resp {
    kv_error(400, "BadParameter", message, None)
}

fn challenge(message: &str) -> Resp {
    let mut resp = kv_error(401, "Unauthorized", message, None);
    let value =
        format!("Bearer authorization=\"https://login.microsoftonline.com/{TENANT}\", resource=\"{VAULT_RESOURCE}\"");
    if let Ok(v) = http::HeaderValue::from_str(&value) {
        resp.headers_mut().insert(http::header::WWW_AUTHENTICATE, v);
    }
    resp
}

/// Key Vault's object names: 1 to 127 letters, digits and dashes.
fn valid_name(name: &str) -> bool {
    !name.is_empty() && name.len() <= 127 && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
}

pub(crate) fn handle(state: &Shared, req: &Req) -> Resp {
    // The token first: a client's first request carries none and learns the resource here.
    let principal = match req.header("authorization").and_then(|a| a.strip_prefix("Bearer ")) {
        None => return challenge("AKV10000: Request is missing a Bearer or PoP token."),
        Some(token) => match lock(state).tokens.get(token).cloned() {
            None => return challenge("AKV10022: Invalid token: the token was not issued by a trusted issuer."),
            Some(t) if t.audience != VAULT_RESOURCE => {
                return challenge(&format!(
                    "AKV10022: Invalid audience. Expected {VAULT_RESOURCE}, found: {}.",
                    t.audience
                ));
            }
            Some(t) if t.expires <= now() => return challenge("[TokenExpired] Error validating token: 'S2S12086'."),
            Some(t) => t.principal,
        },
    };
    match req.query.get("api-version").map(String::as_str) {
        None => return bad("The 'api-version' query parameter is missing."),
        Some(v) if !API_VERSIONS.contains(&v) => {
            return bad(&format!(
                "The specified version ({v}) is not recognized. Consider using the latest supported version (2026-04-01)."
            ));
        }
        Some(_) => {}
    }
    let writes = !matches!(req.method, http::Method::GET);
    if writes && lock(state).readers.contains(&principal) {
        return kv_error(
            403,
            "Forbidden",
            &format!("Caller is not authorized to perform action on resource. Caller: appid={principal}"),
            Some("ForbiddenByRbac"),
        );
    }
    let host = req.header("host").unwrap_or(super::VAULT_HOST).to_string();
    let base = format!("https://{host}");
    let segments: Vec<&str> = req.path.trim_start_matches('/').split('/').collect();
    let mut s = lock(state);
    let m = req.method.as_str();
    match segments.as_slice() {
        ["secrets"] if m == "GET" => list_secrets(&s, req, &base),
        ["secrets", name, "versions"] if m == "GET" => secret_versions(&s, &base, name),
        ["secrets", name] if m == "PUT" => set_secret(&mut s, req, &base, name),
        ["secrets", name] if m == "DELETE" => delete_secret(&mut s, &base, name),
        ["secrets", name] | ["secrets", name, ""] if m == "GET" => get_secret(&s, &base, name, None),
        ["secrets", name, version] if m == "GET" => get_secret(&s, &base, name, Some(version)),
        ["secrets", name] | ["secrets", name, ""] if m == "PATCH" => update_secret(&mut s, req, &base, name, None),
        ["secrets", name, version] if m == "PATCH" => update_secret(&mut s, req, &base, name, Some(version)),
        ["deletedsecrets", name] if m == "GET" => get_deleted_secret(&s, &base, name),
        ["deletedsecrets", name] if m == "DELETE" => purge_secret(&mut s, name),
        ["keys", name] if m == "PUT" => import_key(&mut s, req, &base, name),
        ["keys", name] if m == "DELETE" => delete_key(&mut s, &base, name),
        ["keys", name] | ["keys", name, ""] if m == "GET" => get_key(&s, &base, name, None),
        ["keys", name, version] if m == "GET" => get_key(&s, &base, name, Some(version)),
        ["certificates", name, "import"] if m == "POST" => import_cert(&mut s, req, &base, name),
        ["certificates", name] if m == "DELETE" => delete_cert(&mut s, &base, name),
        ["certificates", name] | ["certificates", name, ""] if m == "GET" => get_cert(&s, &base, name, None),
        ["certificates", name, version] if m == "GET" => get_cert(&s, &base, name, Some(version)),
        _ => kv_error(
            404,
            "NotFound",
            &format!("The requested path {} is not a Key Vault operation ({m}).", req.path),
            None,
        ),
    }
}

/// The JSON object of a request body, refusing members the operation does not take.
fn body(req: &Req, allowed: &[&str]) -> Result<Map<String, Value>, Resp> {
    let Ok(Value::Object(obj)) = serde_json::from_slice::<Value>(&req.body) else {
        return Err(bad("The request body is not a JSON object."));
    };
    if let Some(k) = obj.keys().find(|k| !allowed.contains(&k.as_str())) {
        return Err(bad(&format!("Property '{k}' is not a member of this operation's parameters.")));
    }
    Ok(obj)
}

fn tags_of(obj: &Map<String, Value>) -> Result<Option<HashMap<String, String>>, Resp> {
    match obj.get("tags") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Object(t)) if t.len() <= 15 => t
            .iter()
            .map(|(k, v)| {
                v.as_str().map(|v| (k.clone(), v.to_string())).ok_or_else(|| bad("Tag values must be strings."))
            })
            .collect::<Result<_, _>>()
            .map(Some),
        Some(_) => Err(bad("Tags must be an object of at most 15 string values.")),
    }
}

/// `attributes`: `enabled`, `nbf`, `exp` (seconds).
/// `enabled`, `nbf`, `exp` as set.
type Attributes = (Option<bool>, Option<i64>, Option<i64>);

fn attributes_of(obj: &Map<String, Value>) -> Result<Attributes, Resp> {
    match obj.get("attributes") {
        None | Some(Value::Null) => Ok((None, None, None)),
        Some(Value::Object(a)) => {
            if let Some(k) = a.keys().find(|k| !["enabled", "nbf", "exp", "exportable"].contains(&k.as_str())) {
                return Err(bad(&format!("Property 'attributes.{k}' cannot be set.")));
            }
            Ok((
                a.get("enabled").and_then(Value::as_bool),
                a.get("nbf").and_then(Value::as_i64),
                a.get("exp").and_then(Value::as_i64),
            ))
        }
        Some(_) => Err(bad("attributes must be an object.")),
    }
}

fn attributes(enabled: bool, created: i64, updated: i64, exp: Option<i64>, nbf: Option<i64>) -> Value {
    let mut a = json!({"enabled": enabled, "created": created, "updated": updated,
        "recoveryLevel": "Recoverable+Purgeable", "recoverableDays": RECOVERABLE_DAYS});
    if let Some(e) = exp {
        a["exp"] = json!(e);
    }
    if let Some(n) = nbf {
        a["nbf"] = json!(n);
    }
    a
}

fn secret_json(base: &str, name: &str, v: &SecretVersion, with_value: bool) -> Value {
    let mut out = json!({
        "id": format!("{base}/secrets/{name}/{}", v.version),
        "attributes": attributes(v.enabled, v.created, v.updated, v.expires, v.not_before),
        "tags": v.tags,
    });
    if with_value {
        out["value"] = json!(v.value);
    }
    if let Some(c) = &v.content_type {
        out["contentType"] = json!(c);
    }
    if v.managed {
        out["managed"] = json!(true);
        out["kid"] = json!(format!("{base}/keys/{name}/{}", v.version));
    }
    out
}

fn not_found(kind: &str, name: &str) -> Resp {
    let code = format!("{kind}NotFound");
    kv_error(
        404,
        &code,
        &format!(
            "A {} with (name/id) {name} was not found in this key vault. If you recently deleted this {0} you may be \
             able to recover it using the correct recovery command. For help resolving this issue, please see \
             https://go.microsoft.com/fwlink/?linkid=2125182",
            kind.to_ascii_lowercase()
        ),
        None,
    )
}

fn deleted_conflict(kind: &str, name: &str) -> Resp {
    kv_error(
        409,
        "Conflict",
        &format!(
            "{kind} {name} is currently in a deleted but recoverable state, and its name cannot be reused; in this state, \
             the {} can only be recovered or purged.",
            kind.to_ascii_lowercase()
        ),
        Some("ObjectIsDeletedButRecoverable"),
    )
}

fn set_secret(s: &mut State, req: &Req, base: &str, name: &str) -> Resp {
    if !valid_name(name) {
        return bad("The request URI contains an invalid name: names are 1-127 letters, digits and dashes.");
    }
    let obj = match body(req, &["value", "tags", "contentType", "attributes"]) {
        Ok(o) => o,
        Err(r) => return r,
    };
    let Some(value) = obj.get("value").and_then(Value::as_str).map(str::to_string) else {
        return bad("Secret value must be a string and cannot be null.");
    };
    if value.len() > 25 * 1024 {
        return bad("Secret value is larger than 25 KB.");
    }
    let (tags, (enabled, nbf, exp)) = match (tags_of(&obj), attributes_of(&obj)) {
        (Ok(t), Ok(a)) => (t, a),
        (Err(r), _) | (_, Err(r)) => return r,
    };
    if s.deleted_secrets.contains_key(name) {
        return deleted_conflict("Secret", name);
    }
    let version = s.next_id();
    let t = now();
    let v = SecretVersion {
        version,
        value,
        content_type: obj.get("contentType").and_then(Value::as_str).map(str::to_string),
        tags: tags.unwrap_or_default(),
        enabled: enabled.unwrap_or(true),
        expires: exp,
        not_before: nbf,
        created: t,
        updated: t,
        managed: false,
    };
    let out = secret_json(base, name, &v, true);
    s.secrets.entry(name.to_string()).or_default().push(v);
    json(200, out)
}

fn find_version<'a, T>(versions: &'a [T], version: Option<&str>, id: impl Fn(&T) -> &str) -> Option<&'a T> {
    match version {
        None => versions.last(),
        Some(v) => versions.iter().find(|x| id(x) == v),
    }
}

fn get_secret(s: &State, base: &str, name: &str, version: Option<&str>) -> Resp {
    let Some(v) = s.secrets.get(name).and_then(|vs| find_version(vs, version, |x| &x.version)) else {
        return not_found("Secret", name);
    };
    if !v.enabled {
        return kv_error(
            403,
            "Forbidden",
            "Operation get is not allowed on a disabled secret.",
            Some("SecretDisabled"),
        );
    }
    json(200, secret_json(base, name, v, true))
}

fn update_secret(s: &mut State, req: &Req, base: &str, name: &str, version: Option<&str>) -> Resp {
    let obj = match body(req, &["tags", "contentType", "attributes"]) {
        Ok(o) => o,
        Err(r) => return r,
    };
    let (tags, (enabled, nbf, exp)) = match (tags_of(&obj), attributes_of(&obj)) {
        (Ok(t), Ok(a)) => (t, a),
        (Err(r), _) | (_, Err(r)) => return r,
    };
    let Some(versions) = s.secrets.get_mut(name) else { return not_found("Secret", name) };
    let target = match version {
        None => versions.last_mut(),
        Some(ver) => versions.iter_mut().find(|x| x.version == ver),
    };
    let Some(v) = target else { return not_found("Secret", name) };
    if let Some(t) = tags {
        v.tags = t;
    }
    if let Some(c) = obj.get("contentType").and_then(Value::as_str) {
        v.content_type = Some(c.to_string());
    }
    v.enabled = enabled.unwrap_or(v.enabled);
    v.expires = exp.or(v.expires);
    v.not_before = nbf.or(v.not_before);
    v.updated = now();
    json(200, secret_json(base, name, v, false))
}

fn list_secrets(s: &State, req: &Req, base: &str) -> Resp {
    let max = match req.query.get("maxresults").map(|m| m.parse::<usize>()) {
        None => 25,
        Some(Ok(n)) if (1..=25).contains(&n) => n,
        Some(_) => return bad("maxresults must be between 1 and 25."),
    };
    let skip: usize = req.query.get("$skiptoken").and_then(|t| t.parse().ok()).unwrap_or(0);
    let mut names: Vec<&String> = s.secrets.keys().collect();
    names.sort();
    let page: Vec<Value> = names
        .iter()
        .skip(skip)
        .take(max)
        .filter_map(|n| s.secrets[*n].last().map(|v| (n, v)))
        .map(|(n, v)| {
            let mut item = secret_json(base, n, v, false);
            item["id"] = json!(format!("{base}/secrets/{n}"));
            item
        })
        .collect();
    let next = (skip + max < names.len()).then(|| {
        let api = req.query.get("api-version").cloned().unwrap_or_default();
        format!("{base}/secrets?api-version={api}&$skiptoken={}&maxresults={max}", skip + max)
    });
    json(200, json!({"value": page, "nextLink": next}))
}

fn secret_versions(s: &State, base: &str, name: &str) -> Resp {
    let Some(versions) = s.secrets.get(name) else { return not_found("Secret", name) };
    let value: Vec<Value> = versions.iter().map(|v| secret_json(base, name, v, false)).collect();
    json(200, json!({"value": value, "nextLink": null}))
}

fn deleted_json(base: &str, name: &str, v: &SecretVersion, deleted: i64) -> Value {
    let mut out = secret_json(base, name, v, false);
    out["recoveryId"] = json!(format!("{base}/deletedsecrets/{name}"));
    out["deletedDate"] = json!(deleted);
    out["scheduledPurgeDate"] = json!(deleted + RECOVERABLE_DAYS * 86_400);
    out
}

fn delete_secret(s: &mut State, base: &str, name: &str) -> Resp {
    let Some(versions) = s.secrets.remove(name) else { return not_found("Secret", name) };
    let t = now();
    let out = versions.last().map(|v| deleted_json(base, name, v, t)).unwrap_or(Value::Null);
    s.deleted_secrets.insert(name.to_string(), (versions, t));
    json(200, out)
}

fn get_deleted_secret(s: &State, base: &str, name: &str) -> Resp {
    match s.deleted_secrets.get(name) {
        Some((versions, t)) => match versions.last() {
            Some(v) => json(200, deleted_json(base, name, v, *t)),
            None => not_found("DeletedSecret", name),
        },
        None => kv_error(404, "SecretNotFound", &format!("Deleted Secret not found: {name}"), None),
    }
}

fn purge_secret(s: &mut State, name: &str) -> Resp {
    match s.deleted_secrets.remove(name) {
        Some(_) => {
            let mut r = json(204, Value::Null);
            *r.body_mut() = axum::body::Body::empty();
            r
        }
        None => kv_error(404, "SecretNotFound", &format!("Deleted Secret not found: {name}"), None),
    }
}

fn key_json(base: &str, name: &str, k: &KeyVersion) -> Value {
    let mut jwk = Value::Object(k.jwk.clone());
    jwk["kid"] = json!(format!("{base}/keys/{name}/{}", k.version));
    json!({"key": jwk, "attributes": attributes(true, k.created, k.created, None, None), "tags": k.tags})
}

fn import_key(s: &mut State, req: &Req, base: &str, name: &str) -> Resp {
    if !valid_name(name) {
        return bad("The request URI contains an invalid name: names are 1-127 letters, digits and dashes.");
    }
    let obj = match body(req, &["key", "Hsm", "hsm", "attributes", "tags", "release_policy"]) {
        Ok(o) => o,
        Err(r) => return r,
    };
    let Some(Value::Object(key)) = obj.get("key") else { return bad("Key is required.") };
    let public: &[&str] = match key.get("kty").and_then(Value::as_str) {
        Some("RSA" | "RSA-HSM") => &["n", "e"],
        Some("EC" | "EC-HSM") => &["crv", "x", "y"],
        // Standard vaults hold no symmetric keys (Managed HSM does).
        Some(other) => return bad(&format!("The key type {other} is not supported by this vault.")),
        None => return bad("Key type (kty) is required."),
    };
    if !key.contains_key("d") {
        return bad("The imported key has no private part.");
    }
    let mut jwk = Map::new();
    jwk.insert("kty".into(), key["kty"].clone());
    for p in public {
        match key.get(*p) {
            Some(v) => jwk.insert((*p).into(), v.clone()),
            None => return bad(&format!("The key is missing its '{p}' member.")),
        };
    }
    let ops = if public[0] == "n" {
        json!(["encrypt", "decrypt", "sign", "verify", "wrapKey", "unwrapKey"])
    } else {
        json!(["sign", "verify"])
    };
    jwk.insert("key_ops".into(), ops);
    let tags = match tags_of(&obj) {
        Ok(t) => t.unwrap_or_default(),
        Err(r) => return r,
    };
    if s.deleted_keys.contains_key(name) {
        return deleted_conflict("Key", name);
    }
    let k = KeyVersion { version: s.next_id(), jwk, tags, created: now() };
    let out = key_json(base, name, &k);
    s.keys.entry(name.to_string()).or_default().push(k);
    json(200, out)
}

fn get_key(s: &State, base: &str, name: &str, version: Option<&str>) -> Resp {
    match s.keys.get(name).and_then(|vs| find_version(vs, version, |x| &x.version)) {
        Some(k) => json(200, key_json(base, name, k)),
        None => not_found("Key", name),
    }
}

fn delete_key(s: &mut State, base: &str, name: &str) -> Resp {
    let Some(versions) = s.keys.remove(name) else { return not_found("Key", name) };
    let t = now();
    s.deleted_keys.insert(name.to_string(), t);
    let mut out = versions.last().map(|k| key_json(base, name, k)).unwrap_or(Value::Null);
    out["recoveryId"] = json!(format!("{base}/deletedkeys/{name}"));
    out["deletedDate"] = json!(t);
    json(200, out)
}

fn cert_json(base: &str, name: &str, c: &CertVersion) -> Value {
    let thumb = ring::digest::digest(&ring::digest::SHA1_FOR_LEGACY_USE_ONLY, &c.der);
    json!({
        "id": format!("{base}/certificates/{name}/{}", c.version),
        "kid": format!("{base}/keys/{name}/{}", c.version),
        "sid": format!("{base}/secrets/{name}/{}", c.version),
        "x5t": URL_SAFE_NO_PAD.encode(thumb.as_ref()),
        "cer": STANDARD.encode(&c.der),
        "attributes": attributes(true, c.created, c.created, None, None),
        "tags": c.tags,
    })
}

/// The certificate (DER) of an imported value: PKCS#12 without a password (`pwd` empty), or PEM.
fn imported_certificate(value: &[u8], pwd: &str) -> Option<Vec<u8>> {
    if let Ok(store) = p12_keystore::KeyStore::from_pkcs12(value, pwd, p12_keystore::Pkcs12ImportPolicy::Relaxed) {
        for (_, entry) in store.entries() {
            if let p12_keystore::KeyStoreEntry::PrivateKeyChain(chain) = entry {
                return chain.certs().first().map(|c| c.as_der().to_vec());
            }
        }
        return None;
    }
    let text = std::str::from_utf8(value).ok()?;
    let start = text.find("-----BEGIN CERTIFICATE-----")? + "-----BEGIN CERTIFICATE-----".len();
    let end = text[start..].find("-----END CERTIFICATE-----")? + start;
    let has_key = text.contains("PRIVATE KEY-----");
    STANDARD.decode(text[start..end].split_whitespace().collect::<String>()).ok().filter(|_| has_key)
}

fn import_cert(s: &mut State, req: &Req, base: &str, name: &str) -> Resp {
    if !valid_name(name) {
        return bad("The request URI contains an invalid name: names are 1-127 letters, digits and dashes.");
    }
    let obj = match body(req, &["value", "pwd", "policy", "attributes", "tags", "preserveCertOrder"]) {
        Ok(o) => o,
        Err(r) => return r,
    };
    let Some(value) = obj.get("value").and_then(Value::as_str) else { return bad("Certificate value is required.") };
    // A PEM value comes as text, a PKCS#12 as Base64.
    let raw = STANDARD.decode(value).unwrap_or_else(|_| value.as_bytes().to_vec());
    let pwd = obj.get("pwd").and_then(Value::as_str).unwrap_or_default();
    let Some(der) = imported_certificate(&raw, pwd).or_else(|| imported_certificate(value.as_bytes(), pwd)) else {
        return bad(
            "The specified PEM X.509 certificate content is in an unexpected format, or the PKCS#12 file has no private key and certificate (or needs a password).",
        );
    };
    let tags = match tags_of(&obj) {
        Ok(t) => t.unwrap_or_default(),
        Err(r) => return r,
    };
    if s.deleted_certs.contains_key(name) {
        return deleted_conflict("Certificate", name);
    }
    let c = CertVersion { version: s.next_id(), der, tags: tags.clone(), created: now() };
    let out = cert_json(base, name, &c);
    // The certificate's secret: its PKCS#12 (Base64), managed by Key Vault.
    let t = now();
    s.secrets.entry(name.to_string()).or_default().push(SecretVersion {
        version: c.version.clone(),
        value: STANDARD.encode(&raw),
        content_type: Some("application/x-pkcs12".into()),
        tags,
        enabled: true,
        expires: None,
        not_before: None,
        created: t,
        updated: t,
        managed: true,
    });
    s.certs.entry(name.to_string()).or_default().push(c);
    json(200, out)
}

fn get_cert(s: &State, base: &str, name: &str, version: Option<&str>) -> Resp {
    match s.certs.get(name).and_then(|vs| find_version(vs, version, |x| &x.version)) {
        Some(c) => json(200, cert_json(base, name, c)),
        None => not_found("Certificate", name),
    }
}

fn delete_cert(s: &mut State, base: &str, name: &str) -> Resp {
    let Some(versions) = s.certs.remove(name) else { return not_found("Certificate", name) };
    let t = now();
    s.deleted_certs.insert(name.to_string(), t);
    s.secrets.remove(name);
    let mut out = versions.last().map(|c| cert_json(base, name, c)).unwrap_or(Value::Null);
    out["recoveryId"] = json!(format!("{base}/deletedcertificates/{name}"));
    out["deletedDate"] = json!(t);
    json(200, out)
}
