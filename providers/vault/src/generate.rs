//! The VaultDynamicSecret generator: one request to Vault (a PKI certificate, database
//! credentials, a token), its answer returned as the generated values.
//!
//! The generator's `spec.provider` is reached exactly as a SecretStore of the generator's
//! namespace would be: the same rules, the same tenant boundary (every Secret and
//! ServiceAccount it names is read in that namespace), the same guarded HTTP client and the
//! same client cache. The answer is size-capped by the client, and the request is counted in
//! the store-calls metric by it. `spec.retrySettings` retry this generation's requests that
//! failed transiently, within the caps of [`crate::client::Retry`].

use std::hash::{Hash, Hasher};

use keyward_crds::generators::{VaultDynamicSecretResultType, VaultDynamicSecretSpec};
use keyward_provider_runtime::json::json_bytes;
use keyward_provider_runtime::{ProviderError, RequestContext, SecretMap, keys};
use reqwest::Method;
use serde_json::Value;

use crate::VaultProvider;
use crate::client::Retry;

/// The generator kind this provider serves.
pub const KIND: &str = "VaultDynamicSecret";

/// Methods a generator may send. `LIST` is Vault's own; anything else is refused before a
/// request is made.
const METHODS: [&str; 6] = ["GET", "LIST", "POST", "PUT", "PATCH", "DELETE"];

/// Generates the values of a VaultDynamicSecret spec for `ctx` (the generator, reached as a
/// SecretStore of its namespace).
pub async fn generate(
    provider: &VaultProvider,
    ctx: &RequestContext,
    spec_json: &str,
) -> Result<SecretMap, ProviderError> {
    if ctx.kind != KIND {
        return Err(ProviderError::Unsupported(format!(
            "the Vault provider generates {KIND} values, not {}",
            ctx.kind
        )));
    }
    let what = format!("{KIND} {}/{}", ctx.source_namespace, ctx.name);
    let spec: VaultDynamicSecretSpec =
        serde_json::from_str(spec_json).map_err(|e| ProviderError::InvalidArgument(format!("{what}: spec: {e}")))?;
    keyward_crds::rules::validate_vault(&spec.provider)
        .map_err(|e| ProviderError::BadConfig(format!("{what}: spec.provider: {e}")))?;
    let method = method(&spec).map_err(|m| ProviderError::InvalidArgument(format!("{what}: {m}")))?;
    // The path is the tenant's, to its own server with its own credentials; it is still split
    // and encoded segment by segment so it names one API path and nothing else.
    let segments = keys::segments(&spec.path)?;
    if segments.is_empty() {
        return Err(ProviderError::InvalidArgument(format!("{what}: spec.path is required")));
    }
    let path = keys::url_path(segments);
    let (body, pairs) = request(&spec, &method).map_err(|m| ProviderError::InvalidArgument(format!("{what}: {m}")))?;
    let query: Vec<(&str, String)> = pairs.iter().map(|(k, v)| (k.as_str(), v.clone())).collect();
    let retry =
        Retry::of(spec.retry_settings.as_ref()).map_err(|m| ProviderError::InvalidArgument(format!("{what}: {m}")))?;

    // The client cache keys a configuration by its generation; a generator's provider block
    // has none of its own, so its content stands in: an edited spec builds a new client.
    let target = provider.target_of(ctx, &spec.provider, Some(fingerprint(&spec)).into(), &what).await?;
    let call = format!("{what}: {} {path}", method.as_str());
    // retrySettings apply to this generation's requests (the login too), capped: the cached
    // client is shared and does not retry.
    let answer = target
        .client
        .with_retry(retry)
        .ok(method, &path, body.as_ref(), &query, &call)
        .await
        .map_err(|e| provider.clients.evict_if_refused(&target.key, e))?;
    let values = result(&answer, spec.result_type);
    if values.is_empty() && !spec.allow_empty_response {
        return Err(ProviderError::NoSecret(format!(
            "{call}: Vault answered with no {} (set spec.allowEmptyResponse to accept it)",
            match spec.result_type {
                VaultDynamicSecretResultType::Data => "data",
                VaultDynamicSecretResultType::Auth => "auth",
                VaultDynamicSecretResultType::Raw => "body",
            }
        )));
    }
    Ok(values)
}

fn method(spec: &VaultDynamicSecretSpec) -> Result<Method, String> {
    let m = spec.method.as_deref().filter(|m| !m.is_empty()).unwrap_or("GET").to_ascii_uppercase();
    if !METHODS.contains(&m.as_str()) {
        return Err(format!("spec.method {m:?} is not one of {}", METHODS.join(", ")));
    }
    Method::from_bytes(m.as_bytes()).map_err(|e| format!("spec.method {m:?}: {e}"))
}

/// A request's JSON body and query pairs.
type BodyAndQuery = (Option<Value>, Vec<(String, String)>);

/// The JSON body and the query of the request: `parameters` is the body of writes; a GET or
/// LIST sends `getParameters` and the scalar members of `parameters` as its query.
fn request(spec: &VaultDynamicSecretSpec, method: &Method) -> Result<BodyAndQuery, String> {
    // Kept as text within the free-form JSON limits; decoded here, for this request only.
    let params = spec.parameters.as_ref().map(|p| p.value()).transpose();
    let params = params.map_err(|e| format!("spec.parameters: {e}"))?.filter(|p| !p.is_null());
    if let Some(p) = &params
        && !p.is_object()
    {
        return Err("spec.parameters must be an object".into());
    }
    if !matches!(method.as_str(), "GET" | "LIST") {
        return Ok((Some(params.unwrap_or_else(|| Value::Object(Default::default()))), vec![]));
    }
    let mut pairs: Vec<(String, String)> = Vec::new();
    for (k, values) in &spec.get_parameters {
        pairs.extend(values.iter().map(|v| (k.clone(), v.clone())));
    }
    if let Some(Value::Object(map)) = params {
        for (k, v) in map {
            match v {
                Value::String(s) => pairs.push((k.clone(), s.clone())),
                Value::Number(_) | Value::Bool(_) => pairs.push((k.clone(), v.to_string())),
                _ => {
                    return Err(format!(
                        "spec.parameters.{k}: a GET sends parameters as a query: strings, numbers or booleans only"
                    ));
                }
            }
        }
    }
    Ok((None, pairs))
}

/// The values of an answer per `resultType`: the members of `data`, of `auth`, or of the
/// whole body; strings as they are, anything else JSON-encoded. A missing or null part gives
/// no values.
fn result(answer: &Value, result_type: VaultDynamicSecretResultType) -> SecretMap {
    let part = match result_type {
        VaultDynamicSecretResultType::Data => answer.get("data"),
        VaultDynamicSecretResultType::Auth => answer.get("auth"),
        VaultDynamicSecretResultType::Raw => Some(answer),
    };
    match part {
        Some(Value::Object(map)) => map.iter().map(|(k, v)| (k.clone(), json_bytes(v))).collect(),
        _ => SecretMap::new(),
    }
}

/// A stable number for the spec's provider block (the client cache's generation).
fn fingerprint(spec: &VaultDynamicSecretSpec) -> i64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    serde_json::to_string(&spec.provider).unwrap_or_default().hash(&mut h);
    h.finish() as i64
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn spec(v: Value) -> VaultDynamicSecretSpec {
        serde_json::from_value(v).expect("spec")
    }

    #[test]
    fn result_types_pick_data_auth_or_the_whole_answer() {
        let answer = json!({"data": {"certificate": "PEM", "ca_chain": ["a", "b"], "n": 3},
                            "auth": {"client_token": "hvs.x", "policies": ["p"]}, "lease_id": ""});
        let data = result(&answer, VaultDynamicSecretResultType::Data);
        assert_eq!(data["certificate"], b"PEM");
        assert_eq!(data["ca_chain"], br#"["a","b"]"#, "nested values are JSON-encoded");
        assert_eq!(data["n"], b"3");
        let auth = result(&answer, VaultDynamicSecretResultType::Auth);
        assert_eq!(auth["client_token"], b"hvs.x");
        assert_eq!(auth.len(), 2);
        let raw = result(&answer, VaultDynamicSecretResultType::Raw);
        assert_eq!(raw.keys().count(), 3);
        assert_eq!(raw["lease_id"], b"");
        assert!(result(&json!({"data": null}), VaultDynamicSecretResultType::Data).is_empty());
        assert!(result(&Value::Null, VaultDynamicSecretResultType::Raw).is_empty());
    }

    #[test]
    fn writes_send_parameters_as_body_and_reads_as_query() {
        let s = spec(json!({"path": "pki/issue/web", "method": "post", "provider": {"server": "http://v"},
                            "parameters": {"common_name": "a.example.com", "ttl": 60}}));
        let m = method(&s).expect("post");
        assert_eq!(m, Method::POST);
        let (body, query) = request(&s, &m).expect("request");
        assert_eq!(body, Some(json!({"common_name": "a.example.com", "ttl": 60})));
        assert!(query.is_empty());
        let s = spec(json!({"path": "kv/data/x", "provider": {"server": "http://v"},
                            "parameters": {"version": 2}, "getParameters": {"list": ["a", "b"]}}));
        let m = method(&s).expect("default");
        assert_eq!(m, Method::GET, "GET by default");
        let (body, query) = request(&s, &m).expect("request");
        assert_eq!(body, None);
        let pair = |k: &str, v: &str| (k.to_string(), v.to_string());
        assert_eq!(query, vec![pair("list", "a"), pair("list", "b"), pair("version", "2")]);
        let s = spec(json!({"path": "x", "provider": {"server": "http://v"}, "parameters": {"o": {"deep": 1}}}));
        assert!(request(&s, &Method::GET).unwrap_err().contains("spec.parameters.o"));
        let s = spec(json!({"path": "x", "method": "TRACE", "provider": {"server": "http://v"}}));
        assert!(method(&s).unwrap_err().contains("\"TRACE\" is not one of"));
    }
}
