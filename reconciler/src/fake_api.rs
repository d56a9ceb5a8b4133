//! A fake API server for unit tests of functions that call the Kubernetes API: a
//! [`kube::Client`] over an in-process service that records each request (method, path and
//! query, and its JSON body) and answers it from the test's table, so the requests a function
//! makes, what it writes and what it does with the answers are checked without a control plane.

use std::convert::Infallible;
use std::hash::Hash;
use std::sync::{Arc, Mutex};

use http::{Request, Response};
use kube::client::Body;
use kube::runtime::reflector::{self, Lookup, Store};
use kube::runtime::watcher;
use serde_json::{Value, json};

/// The requests the fake API server received: each as `METHOD /path?query`, with its body.
#[derive(Clone, Default)]
pub struct Requests(Arc<Mutex<Vec<(String, Value)>>>);

impl Requests {
    fn seen(&self) -> std::sync::MutexGuard<'_, Vec<(String, Value)>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Every request so far, oldest first, as `METHOD /path?query`.
    pub fn all(&self) -> Vec<String> {
        self.seen().iter().map(|(line, _)| line.clone()).collect()
    }

    /// The JSON body of the request at `index` (as in [`Requests::all`]); `Null` for a request
    /// without a body or with one that is not JSON.
    pub fn body(&self, index: usize) -> Value {
        self.seen().get(index).map(|(_, body)| body.clone()).unwrap_or_else(|| panic!("no request {index}"))
    }
}

/// A client whose requests `answer` serves: given the method and the path with its query, it
/// returns the status and the JSON body.
pub fn client<F>(answer: F) -> (kube::Client, Requests)
where
    F: Fn(&http::Method, &str) -> (u16, Value) + Send + Sync + 'static,
{
    let requests = Requests::default();
    let seen = requests.clone();
    let answer = Arc::new(answer);
    let service = tower::service_fn(move |req: Request<Body>| {
        let (seen, answer) = (seen.clone(), answer.clone());
        async move {
            let target = req.uri().path_and_query().map(|p| p.to_string()).unwrap_or_default();
            let line = format!("{} {target}", req.method());
            let (status, answer_body) = answer(req.method(), &target);
            let bytes = req.into_body().collect_bytes().await.unwrap_or_default();
            let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
            seen.seen().push((line, body));
            let response = Response::builder()
                .status(status)
                .header("content-type", "application/json")
                .body(Body::from(answer_body.to_string().into_bytes()))
                .expect("a response of a valid status");
            Ok::<_, Infallible>(response)
        }
    });
    (kube::Client::new(service, "default"), requests)
}

/// A client whose requests `answer` serves where it has an answer; every other request is
/// answered `200` with `object` (what a write of the object under test gets back).
pub fn client_or_object<F>(object: &impl serde::Serialize, answer: F) -> (kube::Client, Requests)
where
    F: Fn(&http::Method, &str) -> Option<(u16, Value)> + Send + Sync + 'static,
{
    let object = serde_json::to_value(object).expect("a serializable object");
    client(move |method, path| answer(method, path).unwrap_or_else(|| (200, object.clone())))
}

/// A list answer of `kind` (e.g. `SecretStoreList`) in `api_version` holding `items`.
pub fn list(api_version: &str, kind: &str, items: Vec<Value>) -> Value {
    json!({"apiVersion": api_version, "kind": kind, "metadata": {"resourceVersion": "1"}, "items": items})
}

/// A `404 Not Found` answer, with the Status body the API server sends (`what` is the message,
/// e.g. `secretstores.external-secrets.io "vault" not found`).
pub fn not_found(what: &str) -> (u16, Value) {
    status(404, "NotFound", what)
}

/// The answer to a delete that succeeded at once (a `Success` Status).
pub fn deleted() -> (u16, Value) {
    (200, json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success"}))
}

/// A failure answer of `code` with a Status body of `reason` and `message`.
pub fn status(code: u16, reason: &str, message: &str) -> (u16, Value) {
    let body = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                      "reason": reason, "message": message, "code": code});
    (code, body)
}

/// A reflector store holding `objects`, as a watch that listed them would.
pub fn store<K>(objects: impl IntoIterator<Item = K>) -> Store<K>
where
    K: Lookup + Clone + 'static,
    K::DynamicType: Default + Eq + Hash + Clone,
{
    let (store, mut writer) = reflector::store();
    for obj in objects {
        writer.apply_watcher_event(&watcher::Event::Apply(obj));
    }
    store
}
