//! `admission.k8s.io/v1` AdmissionReview: decoding that never panics on bad input, and the
//! response the API server expects.

use serde_json::Value;

use base64::Engine;
pub use kube::core::admission::Operation;
use kube::core::admission::{AdmissionRequest, AdmissionResponse, AdmissionReview};
use kube::core::{DynamicObject, GroupVersionKind, GroupVersionResource, Status};

/// The only review version Keyward speaks.
pub const API_VERSION: &str = "admission.k8s.io/v1";
/// The kind of a review.
pub const KIND: &str = "AdmissionReview";

/// An admission request as kube's admission types read it: the object (and the old object)
/// stay dynamic until the kind is known, then each kind reads them as its own type
/// ([`typed`]).
pub type Request = AdmissionRequest<DynamicObject>;

/// What each path asks of a request beyond kube's fields.
pub trait RequestExt {
    /// The namespace, empty for cluster-scoped objects.
    fn namespace(&self) -> &str;
    /// The name from the request, else from the object (or the old object on DELETE).
    fn object_name(&self) -> String;
    /// `CREATE`, `UPDATE`, `DELETE` or `CONNECT`, as the API server spells it.
    fn operation_name(&self) -> &'static str;
}

impl RequestExt for Request {
    fn namespace(&self) -> &str {
        self.namespace.as_deref().unwrap_or_default()
    }

    fn object_name(&self) -> String {
        if !self.name.is_empty() {
            return self.name.clone();
        }
        [&self.object, &self.old_object].into_iter().flatten().find_map(|o| o.metadata.name.clone()).unwrap_or_default()
    }

    fn operation_name(&self) -> &'static str {
        match self.operation {
            Operation::Create => "CREATE",
            Operation::Update => "UPDATE",
            Operation::Delete => "DELETE",
            Operation::Connect => "CONNECT",
        }
    }
}

/// `object` read as the kind's own type; a denial naming the kind when it does not fit.
pub fn typed<K: serde::de::DeserializeOwned>(kind: &str, object: &DynamicObject) -> Result<K, Decision> {
    serde_json::to_value(object)
        .and_then(serde_json::from_value)
        .map_err(|e| Decision::deny(400, format!("the {kind} cannot be read: {e}")))
}

/// `object` as plain JSON, for the paths that patch it.
pub fn json_of(object: &DynamicObject) -> Value {
    serde_json::to_value(object).unwrap_or(Value::Null)
}

/// A request for `object` as the API server would send it, for reviewing without one (the
/// CLI and tests). `object` must carry `apiVersion` and `kind`.
pub fn request_for(
    operation: Operation,
    namespace: Option<&str>,
    object: &Value,
    old_object: Option<&Value>,
) -> Result<Request, String> {
    let api_version = object.get("apiVersion").and_then(Value::as_str).unwrap_or_default();
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let kind = object.get("kind").and_then(Value::as_str).unwrap_or_default();
    let dynamic = |v: &Value| serde_json::from_value::<DynamicObject>(v.clone()).map_err(|e| e.to_string());
    let object = dynamic(object)?;
    Ok(Request {
        types: Default::default(),
        uid: "keyward-local".into(),
        kind: GroupVersionKind::gvk(group, version, kind),
        resource: GroupVersionResource::gvr(group, version, &format!("{}s", kind.to_lowercase())),
        sub_resource: None,
        request_kind: None,
        request_resource: None,
        request_sub_resource: None,
        name: object.metadata.name.clone().unwrap_or_default(),
        namespace: namespace.map(str::to_string),
        operation,
        user_info: Default::default(),
        old_object: old_object.map(dynamic).transpose()?,
        object: Some(object),
        dry_run: false,
        options: None,
    })
}

/// Something that is not an admission review at all: answered with HTTP 400 and a JSON error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct BadRequest(pub String);

/// What a request body decodes to.
#[derive(Debug, Clone)]
pub enum Decoded {
    /// A well-formed review request.
    Request(Box<Request>),
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
    // kube's request holds objects only; say which field is not one (serde cannot).
    if let Some(field) =
        ["object", "oldObject"].into_iter().find(|f| request.get(*f).is_some_and(|v| !v.is_object() && !v.is_null()))
    {
        return Ok(Decoded::Reject {
            uid,
            message: format!("keyward-webhook cannot read the admission request: request.{field} is not a JSON object"),
        });
    }
    review.insert("request".into(), request);
    match serde_json::from_value::<AdmissionReview<DynamicObject>>(Value::Object(review)).map(TryInto::try_into) {
        Ok(Ok(req)) => Ok(Decoded::Request(Box::new(req))),
        Ok(Err(_)) => Err(BadRequest("the AdmissionReview has no request".into())),
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

/// Serializes the response review for `uid` with kube's admission types.
pub fn encode(uid: &str, decision: &Decision) -> Vec<u8> {
    let mut response = AdmissionResponse::invalid("");
    response.types.api_version = API_VERSION.into();
    response.types.kind = KIND.into();
    response.uid = uid.to_string();
    response.allowed = decision.allowed;
    response.result = match (&decision.message, decision.allowed) {
        (Some(message), false) => {
            let reason = match decision.code {
                400 => "BadRequest",
                403 => "Forbidden",
                _ => "",
            };
            Status::failure(message, reason).with_code(decision.code)
        }
        _ => Status::default(),
    };
    if !decision.warnings.is_empty() {
        response.warnings = Some(decision.warnings.clone());
    }
    let mut review = serde_json::to_value(response.into_review()).unwrap_or(Value::Null);
    if let Some(patch) = decision.patch.as_ref().filter(|p| decision.allowed && !p.0.is_empty())
        && let Ok(bytes) = serde_json::to_vec(patch)
        && let Some(response) = review.get_mut("response").and_then(Value::as_object_mut)
    {
        // The API server reads `patch` as a Go []byte: base64 text. kube's AdmissionResponse
        // serializes its Vec<u8> as an array of numbers (kube-rs issue 1781), so the patch is
        // written here, as the documented wire format, instead of through `with_patch`.
        response.insert("patch".into(), Value::String(base64::engine::general_purpose::STANDARD.encode(bytes)));
        response.insert("patchType".into(), Value::String("JSONPatch".into()));
    }
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
        let missing_operation = br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u2","kind":{"group":"","version":"v1","kind":"X"},"resource":{"group":"","version":"v1","resource":"xs"},"userInfo":{}}}"#;
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
