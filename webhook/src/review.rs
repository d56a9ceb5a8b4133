//! `admission.k8s.io/v1` AdmissionReview: decoding that never panics on bad input, and the
//! response the API server expects.

use base64::Engine;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The only review version Keyward speaks.
pub const API_VERSION: &str = "admission.k8s.io/v1";
/// The kind of a review.
pub const KIND: &str = "AdmissionReview";

/// A group, version and kind as the API server sends it.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct GroupVersionKind {
    /// API group; empty for the core group.
    #[serde(default)]
    pub group: String,
    /// API version.
    #[serde(default)]
    pub version: String,
    /// Kind.
    #[serde(default)]
    pub kind: String,
}

/// A group, version and resource as the API server sends it.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct GroupVersionResource {
    /// API group.
    #[serde(default)]
    pub group: String,
    /// API version.
    #[serde(default)]
    pub version: String,
    /// Plural resource name.
    #[serde(default)]
    pub resource: String,
}

/// The part of an admission request Keyward reads.
#[derive(Deserialize, Clone, Debug, Default)]
#[serde(rename_all = "camelCase")]
pub struct AdmissionRequest {
    /// Identifier echoed in the response.
    pub uid: String,
    /// Kind of the object.
    pub kind: GroupVersionKind,
    /// Resource of the object.
    #[serde(default)]
    pub resource: GroupVersionResource,
    /// Subresource (`status`, …), if any.
    #[serde(default)]
    pub sub_resource: Option<String>,
    /// Name of the object (may be empty on create with generateName).
    #[serde(default)]
    pub name: Option<String>,
    /// Namespace of the object; absent for cluster-scoped kinds.
    #[serde(default)]
    pub namespace: Option<String>,
    /// `CREATE`, `UPDATE`, `DELETE` or `CONNECT`.
    pub operation: String,
    /// The object after the operation (absent on DELETE).
    #[serde(default)]
    pub object: Option<Value>,
    /// The object before the operation (UPDATE and DELETE).
    #[serde(default)]
    pub old_object: Option<Value>,
    /// Whether this is a dry run.
    #[serde(default)]
    pub dry_run: Option<bool>,
}

impl AdmissionRequest {
    /// The namespace, empty for cluster-scoped objects.
    pub fn namespace(&self) -> &str {
        self.namespace.as_deref().unwrap_or_default()
    }

    /// The name from the request, else from the object (or the old object on DELETE).
    pub fn object_name(&self) -> String {
        match self.name.as_deref() {
            Some(n) if !n.is_empty() => n.to_string(),
            _ => [&self.object, &self.old_object]
                .into_iter()
                .flatten()
                .find_map(|o| o.pointer("/metadata/name"))
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
        }
    }
}

/// Something that is not an admission review at all: answered with HTTP 400 and a JSON error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct BadRequest(pub String);

/// What a request body decodes to.
#[derive(Debug, Clone)]
pub enum Decoded {
    /// A well-formed review request.
    Request(Box<AdmissionRequest>),
    /// A review with a uid that cannot be answered: it is denied with this message.
    Reject {
        /// The uid to echo.
        uid: String,
        /// Why it is denied.
        message: String,
    },
}

/// Decodes a request body. Never panics; a body that is not a review at all is a [`BadRequest`].
pub fn decode(body: &[u8]) -> Result<Decoded, BadRequest> {
    let value: Value =
        serde_json::from_slice(body).map_err(|e| BadRequest(format!("the body is not valid JSON: {e}")))?;
    let Value::Object(mut review) = value else {
        return Err(BadRequest("the body is not an AdmissionReview: expected a JSON object".into()));
    };
    let request = match review.remove("request") {
        Some(r @ Value::Object(_)) => r,
        Some(_) => return Err(BadRequest("the AdmissionReview's request is not an object".into())),
        None => return Err(BadRequest("the AdmissionReview has no request".into())),
    };
    let uid = match request.get("uid") {
        Some(Value::String(uid)) if !uid.is_empty() => uid.clone(),
        _ => return Err(BadRequest("the AdmissionReview's request has no uid".into())),
    };
    let api_version = review.get("apiVersion").and_then(Value::as_str).unwrap_or_default();
    let kind = review.get("kind").and_then(Value::as_str).unwrap_or_default();
    if api_version != API_VERSION || kind != KIND {
        return Ok(Decoded::Reject {
            uid,
            message: format!(
                "keyward-webhook answers {API_VERSION} {KIND} only, got apiVersion {api_version:?} kind {kind:?}: \
                 set admissionReviewVersions: [v1] in the webhook configuration"
            ),
        });
    }
    match serde_json::from_value::<AdmissionRequest>(request) {
        Ok(req) => Ok(Decoded::Request(Box::new(req))),
        Err(e) => {
            Ok(Decoded::Reject { uid, message: format!("keyward-webhook cannot read the admission request: {e}") })
        }
    }
}

/// How a review is answered.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Decision {
    /// Whether the operation may go ahead.
    pub allowed: bool,
    /// HTTP-like code of a denial (400 invalid, 403 forbidden by policy, 500 internal).
    pub code: u16,
    /// Why it is denied.
    pub message: Option<String>,
    /// Warnings shown by kubectl.
    pub warnings: Vec<String>,
    /// JSON patch of a mutating review.
    pub patch: Option<json_patch::Patch>,
}

impl Decision {
    /// Allowed, nothing to say.
    pub fn allow() -> Self {
        Decision { allowed: true, ..Default::default() }
    }

    /// Denied with `code` and `message`.
    pub fn deny(code: u16, message: impl Into<String>) -> Self {
        Decision { allowed: false, code, message: Some(message.into()), ..Default::default() }
    }

    /// Adds warnings.
    pub fn with_warnings(mut self, warnings: Vec<String>) -> Self {
        self.warnings.extend(warnings);
        self
    }

    /// `allowed`, `denied` or `patched`, for logs and metrics.
    pub fn label(&self) -> &'static str {
        match (self.allowed, &self.patch) {
            (false, _) => "denied",
            (true, Some(p)) if !p.0.is_empty() => "patched",
            (true, _) if !self.warnings.is_empty() => "warned",
            (true, _) => "allowed",
        }
    }
}

#[derive(Serialize, Debug)]
struct Status<'a> {
    code: u16,
    message: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    reason: &'static str,
}

#[derive(Serialize, Debug)]
#[serde(rename_all = "camelCase")]
struct Response<'a> {
    uid: &'a str,
    allowed: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    status: Option<Status<'a>>,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    warnings: &'a [String],
    #[serde(skip_serializing_if = "Option::is_none")]
    patch: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    patch_type: Option<&'static str>,
}

#[derive(Serialize, Debug)]
#[serde(rename_all = "camelCase")]
struct Review<'a> {
    api_version: &'static str,
    kind: &'static str,
    response: Response<'a>,
}

/// Serializes the response review for `uid`.
pub fn encode(uid: &str, decision: &Decision) -> Vec<u8> {
    let patch = decision
        .patch
        .as_ref()
        .filter(|p| decision.allowed && !p.0.is_empty())
        .and_then(|p| serde_json::to_vec(p).ok())
        .map(|bytes| base64::engine::general_purpose::STANDARD.encode(bytes));
    let status = match (&decision.message, decision.allowed) {
        (Some(message), false) => Some(Status {
            code: decision.code,
            message,
            reason: match decision.code {
                400 => "BadRequest",
                403 => "Forbidden",
                _ => "",
            },
        }),
        _ => None,
    };
    let review = Review {
        api_version: API_VERSION,
        kind: KIND,
        response: Response {
            uid,
            allowed: decision.allowed,
            status,
            warnings: &decision.warnings,
            patch_type: patch.as_ref().map(|_| "JSONPatch"),
            patch,
        },
    };
    // Serializing plain strings, numbers and booleans cannot fail; fall back to a fixed denial.
    serde_json::to_vec(&review).unwrap_or_else(|_| {
        format!(
            r#"{{"apiVersion":"{API_VERSION}","kind":"{KIND}","response":{{"uid":{},"allowed":false}}}}"#,
            serde_json::Value::String(uid.to_string())
        )
        .into_bytes()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_that_are_not_reviews_are_bad_requests() {
        for (body, want) in [
            (&b"{"[..], "not valid JSON"),
            (b"[]", "expected a JSON object"),
            (b"{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\"}", "has no request"),
            (b"{\"request\":3}", "not an object"),
            (b"{\"request\":{\"uid\":\"\"}}", "has no uid"),
            (b"{\"request\":{\"uid\":7}}", "has no uid"),
        ] {
            let err = decode(body).expect_err("bad request");
            assert!(err.0.contains(want), "{}: {err}", String::from_utf8_lossy(body));
        }
    }

    #[test]
    fn reviews_with_a_uid_are_answered_even_when_wrong() {
        let wrong_version =
            br#"{"apiVersion":"admission.k8s.io/v1beta1","kind":"AdmissionReview","request":{"uid":"u1"}}"#;
        match decode(wrong_version).expect("decoded") {
            Decoded::Reject { uid, message } => {
                assert_eq!(uid, "u1");
                assert!(message.contains("admission.k8s.io/v1beta1"), "{message}");
            }
            other => panic!("{other:?}"),
        }
        let missing_operation = br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u2","kind":{"kind":"X"}}}"#;
        match decode(missing_operation).expect("decoded") {
            Decoded::Reject { uid, message } => {
                assert_eq!(uid, "u2");
                assert!(message.contains("operation"), "{message}");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn encodes_denials_warnings_and_patches() {
        let denied = encode("u", &Decision::deny(403, "no").with_warnings(vec!["w".into()]));
        let v: Value = serde_json::from_slice(&denied).expect("json");
        assert_eq!(v["apiVersion"], API_VERSION);
        assert_eq!(v["response"]["uid"], "u");
        assert_eq!(v["response"]["allowed"], false);
        assert_eq!(v["response"]["status"]["code"], 403);
        assert_eq!(v["response"]["status"]["message"], "no");
        assert_eq!(v["response"]["warnings"][0], "w");
        assert!(v["response"].get("patch").is_none());

        let patch: json_patch::Patch =
            serde_json::from_value(serde_json::json!([{"op":"add","path":"/a","value":1}])).expect("patch");
        let allowed = encode("u", &Decision { patch: Some(patch), ..Decision::allow() });
        let v: Value = serde_json::from_slice(&allowed).expect("json");
        assert_eq!(v["response"]["patchType"], "JSONPatch");
        let raw = base64::engine::general_purpose::STANDARD
            .decode(v["response"]["patch"].as_str().expect("patch"))
            .expect("b64");
        let ops: Value = serde_json::from_slice(&raw).expect("ops");
        assert_eq!(ops, serde_json::json!([{"op":"add","path":"/a","value":1}]));
    }
}
