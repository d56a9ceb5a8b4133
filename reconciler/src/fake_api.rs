//! A fake API server for unit tests of functions that call the Kubernetes API: a
//! [`kube::Client`] over an in-process service that records each request (method, path and
//! query) and answers it from the test's table, so the requests a function makes and what it
//! does with the answers are checked without a control plane.

use std::convert::Infallible;
use std::sync::{Arc, Mutex};

use http::{Request, Response};
use kube::client::Body;

/// The requests the fake API server received, as `METHOD /path?query`.
#[derive(Clone, Default)]
pub struct Requests(Arc<Mutex<Vec<String>>>);

impl Requests {
    /// Every request so far, oldest first.
    pub fn all(&self) -> Vec<String> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// A client whose requests `answer` serves: given the method and the path with its query, it
/// returns the status and the JSON body.
pub fn client<F>(answer: F) -> (kube::Client, Requests)
where
    F: Fn(&http::Method, &str) -> (u16, serde_json::Value) + Send + Sync + 'static,
{
    let requests = Requests::default();
    let seen = requests.clone();
    let answer = Arc::new(answer);
    let service = tower::service_fn(move |req: Request<Body>| {
        let target = req.uri().path_and_query().map(|p| p.to_string()).unwrap_or_default();
        seen.0.lock().unwrap_or_else(|e| e.into_inner()).push(format!("{} {target}", req.method()));
        let (status, body) = answer(req.method(), &target);
        let response = Response::builder()
            .status(status)
            .header("content-type", "application/json")
            .body(Body::from(body.to_string().into_bytes()))
            .expect("a response of a valid status");
        async move { Ok::<_, Infallible>(response) }
    });
    (kube::Client::new(service, "default"), requests)
}

/// A list answer of `kind` (e.g. `SecretStoreList`) in `api_version` holding `items`.
pub fn list(api_version: &str, kind: &str, items: Vec<serde_json::Value>) -> serde_json::Value {
    serde_json::json!({"apiVersion": api_version, "kind": kind, "metadata": {"resourceVersion": "1"}, "items": items})
}
