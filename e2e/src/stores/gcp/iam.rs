//! The IAM part of the GCP test server that Vault's GCP auth method (`iam` roles) relies on, as
//! the plugin of the pinned Vault (`vault-plugin-auth-gcp` v0.22.0 with `go-gcp-common`
//! v0.9.2) calls it, each answered as Google documents it:
//!
//! - IAM Credentials `projects.serviceAccounts.signJwt` (`POST
//!   /v1/projects/-/serviceAccounts/{email}:signJwt`, `{payload}` → `{keyId, signedJwt}`): the
//!   claims signed RS256 with a key Google manages for the account; an `exp` must not be past
//!   nor more than 12 hours ahead, and is added an hour ahead when missing. The caller needs
//!   `iam.serviceAccounts.signJwt` on the account (`roles/iam.serviceAccountTokenCreator`).
//! - IAM `projects.serviceAccounts.get` (`GET /v1/projects/{project}/serviceAccounts/{email or
//!   uniqueId}`): the ServiceAccount resource (`name`, `projectId`, `uniqueId`, `email`,
//!   `oauth2ClientId`, `etag`), for any authenticated caller (as `roles/iam.serviceAccountViewer`
//!   granted on the project).
//! - The public x509 listing of an account's keys (`GET
//!   /service_accounts/v1/metadata/x509/{email}`: key ID → PEM certificate, user-managed and
//!   Google-managed keys alike), and Google's OAuth2 certificates (`GET /oauth2/v1/certs`), which
//!   hold none of the accounts' keys, so Vault goes on to the account's.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use axum::http::{HeaderMap, Method};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use rustls::pki_types::PrivateKeyDer;
use rustls::pki_types::pem::PemObject;
use serde_json::{Value, json};

use super::{ApiError, Inner, Server, invalid, known, not_found, object, openssl};

/// What IAM knows of a service account besides its user-managed key.
pub(super) struct Account {
    pub(super) project: String,
    pub(super) unique_id: String,
    /// The Google-managed key `signJwt` signs with: its ID and PKCS #8 DER.
    signing_kid: String,
    signing_key: Vec<u8>,
    /// Key ID → X.509 certificate (PEM) of every key of the account.
    certs: BTreeMap<String, String>,
}

/// A self-signed certificate (PEM) of the key in `key` (PEM), named for `email`.
fn certificate(key: &Path, email: &str) -> String {
    let cert = key.with_extension("crt");
    let (key, out) = (key.to_string_lossy(), cert.to_string_lossy());
    let subject = format!("/CN={email}");
    openssl(&["req", "-x509", "-new", "-key", &key, "-subj", &subject, "-days", "2", "-out", &out]);
    std::fs::read_to_string(&cert).expect("certificate")
}

impl Account {
    /// The account `email` of `project`, whose user-managed key `user_key` (PEM file) has ID
    /// `user_kid`; a Google-managed key is made for it in `dir`.
    pub(super) fn new(dir: &Path, n: usize, email: &str, project: &str, user_kid: &str, user_key: &Path) -> Account {
        let mut certs = BTreeMap::new();
        certs.insert(user_kid.to_string(), certificate(user_key, email));
        let managed = dir.join(format!("managed{n}.pem"));
        super::rsa_key(&managed);
        let signing_kid = format!("{:040x}", rand::random::<u128>());
        certs.insert(signing_kid.clone(), certificate(&managed, email));
        let pem = std::fs::read(&managed).expect("managed key");
        let signing_key = match PrivateKeyDer::from_pem_slice(&pem).expect("managed key PEM") {
            PrivateKeyDer::Pkcs8(k) => k.secret_pkcs8_der().to_vec(),
            _ => panic!("openssl genpkey writes PKCS #8"),
        };
        let unique_id = format!("1{:020}", rand::random::<u64>());
        Account { project: project.into(), unique_id, signing_kid, signing_key, certs }
    }
}

/// The account named by `id` (an e-mail or a unique ID).
fn account<'a>(inner: &'a Inner, id: &str) -> Option<(&'a String, &'a Account)> {
    inner.iam.iter().find(|(email, a)| *email == id || a.unique_id == id)
}

/// `GET /oauth2/v1/certs` and `GET /service_accounts/v1/metadata/x509/{email}`: public, no
/// credentials.
pub(super) fn public_keys(inner: &Inner, path: &str) -> Option<Result<Value, ApiError>> {
    if path == "/oauth2/v1/certs" {
        return Some(Ok(json!({})));
    }
    let email = super::decode(path.strip_prefix("/service_accounts/v1/metadata/x509/")?);
    Some(match inner.iam.get(&email) {
        Some(a) => Ok(json!(a.certs)),
        None => Err(not_found(format!("Service account {email} not found."))),
    })
}

/// `/v1/projects/{p}/serviceAccounts/{id}[:verb]` of IAM and IAM Credentials, when `rest`
/// (the path after `/v1/`) is one; `generateAccessToken` is the caller's.
pub(super) fn service_accounts(
    s: &Server,
    inner: &mut Inner,
    method: &Method,
    rest: &str,
    headers: &HeaderMap,
    body: &[u8],
) -> Option<Result<Value, ApiError>> {
    let tail = rest.strip_prefix("projects/")?;
    let (project, tail) = tail.split_once("/serviceAccounts/")?;
    let (id, verb) = match tail.rsplit_once(':') {
        Some((id, verb)) => (super::decode(id), Some(verb)),
        None => (super::decode(tail), None),
    };
    Some(match (method.clone(), verb) {
        (Method::POST, Some("signJwt")) if project == "-" => sign_jwt(s, inner, headers, &id, body),
        (Method::GET, None) => get(s, inner, headers, project, &id),
        _ => return None,
    })
}

fn get(s: &Server, inner: &Inner, headers: &HeaderMap, project: &str, id: &str) -> Result<Value, ApiError> {
    s.principal(inner, headers)?;
    let Some((email, a)) = account(inner, id).filter(|(_, a)| project == "-" || a.project == project) else {
        return Err(not_found(format!("Unknown service account: projects/{project}/serviceAccounts/{id}")));
    };
    Ok(json!({
        "name": format!("projects/{}/serviceAccounts/{email}", a.project),
        "projectId": a.project,
        "uniqueId": a.unique_id,
        "email": email,
        "oauth2ClientId": a.unique_id,
        "etag": URL_SAFE_NO_PAD.encode(a.unique_id.as_bytes()),
    }))
}

fn sign_jwt(s: &Server, inner: &mut Inner, headers: &HeaderMap, email: &str, body: &[u8]) -> Result<Value, ApiError> {
    let caller = s.principal(inner, headers)?;
    let req = object(body)?;
    known(&req, "sign_jwt_request", &["name", "delegates", "payload"])?;
    let Some(a) = inner.iam.get(email) else {
        return Err(not_found(format!("Not found; Gaia id not found for email {email}")));
    };
    if !inner.signers.contains(&(caller, email.to_string())) {
        return Err(ApiError(
            403,
            "PERMISSION_DENIED",
            "Permission 'iam.serviceAccounts.signJwt' denied on resource (or it may not exist).".into(),
        ));
    }
    let payload = req.get("payload").and_then(Value::as_str).unwrap_or_default();
    let Ok(Value::Object(mut claims)) = serde_json::from_str::<Value>(payload) else {
        return Err(invalid("Payload must be a JSON object representing a JWT Claims Set."));
    };
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default().as_secs();
    match claims.get("exp") {
        None => {
            claims.insert("exp".into(), json!(now + 3600));
        }
        Some(exp) => match exp.as_u64() {
            Some(e) if (now..=now + 12 * 3600).contains(&e) => {}
            _ => {
                return Err(invalid(
                    "The exp claim must be an integer timestamp not in the past and at most 12 hours ahead.",
                ));
            }
        },
    }
    let header = json!({"alg": "RS256", "kid": a.signing_kid, "typ": "JWT"});
    let unsigned = format!(
        "{}.{}",
        URL_SAFE_NO_PAD.encode(header.to_string()),
        URL_SAFE_NO_PAD.encode(Value::Object(claims).to_string())
    );
    let key = ring::signature::RsaKeyPair::from_pkcs8(&a.signing_key).expect("managed key");
    let mut sig = vec![0; key.public().modulus_len()];
    key.sign(&ring::signature::RSA_PKCS1_SHA256, &ring::rand::SystemRandom::new(), unsigned.as_bytes(), &mut sig)
        .expect("RS256");
    Ok(json!({"keyId": a.signing_kid, "signedJwt": format!("{unsigned}.{}", URL_SAFE_NO_PAD.encode(sig))}))
}
