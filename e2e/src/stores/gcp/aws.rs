//! STS's check of an AWS subject token (`urn:ietf:params:aws:token-type:aws4_request`), as
//! Google documents it for AWS workload identity providers: the URL-encoded JSON of a signed
//! `GetCallerIdentity` request (`url`, `method`, `headers`). Where Google forwards the request to
//! AWS, this server checks it itself: the request is the one Google expects, its
//! `x-goog-cloud-target-resource` is the audience, it is fresh, and its SigV4 signature is
//! recomputed here (independently of the signer the provider uses) with the secret key the test
//! registered for its access key ID.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, SystemTime};

use ring::{digest, hmac};
use serde_json::Value;

/// How far a signed request's `x-amz-date` may be from now.
const SKEW: Duration = Duration::from_secs(15 * 60);

/// The ARN of the AWS identity a valid token for `audience` proves, or why it is refused.
/// `keys` maps access key IDs to (secret access key, ARN).
pub(super) fn verify(
    token: &str,
    audience: &str,
    keys: &HashMap<String, (String, String)>,
    now: SystemTime,
) -> Result<String, String> {
    let request: Value = serde_json::from_str(&super::decode(token)).map_err(|e| format!("not JSON: {e}"))?;
    if request["method"] != "POST" {
        return Err("the method is not POST".into());
    }
    let url = request["url"].as_str().unwrap_or_default();
    let (host, query) = url.strip_prefix("https://").and_then(|u| u.split_once('?')).ok_or("the url is not https")?;
    let region = host.strip_prefix("sts.").and_then(|h| h.strip_suffix(".amazonaws.com")).ok_or("not an STS host")?;
    if query != "Action=GetCallerIdentity&Version=2011-06-15" {
        return Err(format!("the request is not GetCallerIdentity: {query}"));
    }
    let mut headers = BTreeMap::new();
    for h in request["headers"].as_array().ok_or("no headers")? {
        let key = h["key"].as_str().ok_or("a header without key")?.to_ascii_lowercase();
        headers.insert(key, h["value"].as_str().ok_or("a header without value")?.to_string());
    }
    let header = |k: &str| headers.get(k).map(String::as_str).ok_or_else(|| format!("no {k} header"));
    if header("host")? != host {
        return Err("the host header is not the url's".into());
    }
    if header("x-goog-cloud-target-resource")? != audience {
        return Err("x-goog-cloud-target-resource is not the audience".into());
    }
    let amz_date = header("x-amz-date")?;
    let signed_at: jiff::Timestamp = jiff::civil::DateTime::strptime("%Y%m%dT%H%M%SZ", amz_date)
        .and_then(|d| d.to_zoned(jiff::tz::TimeZone::UTC))
        .map(|z| z.timestamp())
        .map_err(|e| format!("x-amz-date: {e}"))?;
    let now = jiff::Timestamp::try_from(now).map_err(|e| e.to_string())?;
    if now.duration_since(signed_at).unsigned_abs() > SKEW {
        return Err("the request was not signed in the last 15 minutes".into());
    }
    let auth = header("authorization")?.strip_prefix("AWS4-HMAC-SHA256 ").ok_or("not a SigV4 authorization")?;
    let part = |name: &str| {
        auth.split(", ").find_map(|p| p.strip_prefix(name)).ok_or_else(|| format!("no {name} in the authorization"))
    };
    let (credential, signed, signature) = (part("Credential=")?, part("SignedHeaders=")?, part("Signature=")?);
    let [key_id, date, cred_region, service, "aws4_request"] = credential.split('/').collect::<Vec<_>>()[..] else {
        return Err("a malformed credential scope".into());
    };
    if (date, cred_region, service) != (&amz_date[..8], region, "sts") {
        return Err("the credential scope is not this request's".into());
    }
    let names: Vec<&str> = signed.split(';').collect();
    for must in ["host", "x-amz-date", "x-goog-cloud-target-resource"] {
        if !names.contains(&must) {
            return Err(format!("{must} is not signed"));
        }
    }
    let (secret, arn) = keys.get(key_id).ok_or("an unknown access key ID")?;
    let mut canonical = format!("POST\n/\n{query}\n");
    for name in &names {
        canonical.push_str(&format!("{name}:{}\n", header(name)?.trim()));
    }
    canonical.push_str(&format!("\n{signed}\n{}", hex(digest::digest(&digest::SHA256, b"").as_ref())));
    let scope = format!("{date}/{region}/sts/aws4_request");
    let to_sign = format!(
        "AWS4-HMAC-SHA256\n{amz_date}\n{scope}\n{}",
        hex(digest::digest(&digest::SHA256, canonical.as_bytes()).as_ref())
    );
    let mut k = format!("AWS4{secret}").into_bytes();
    for step in [date, region, "sts", "aws4_request"] {
        k = mac(&k, step.as_bytes());
    }
    if hex(&mac(&k, to_sign.as_bytes())) != signature {
        return Err("the signature does not match".into());
    }
    Ok(arn.clone())
}

fn mac(key: &[u8], data: &[u8]) -> Vec<u8> {
    hmac::sign(&hmac::Key::new(hmac::HMAC_SHA256, key), data).as_ref().to_vec()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
