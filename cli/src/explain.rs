//! `keyward explain`: an ExternalSecret, PushSecret or ClusterExternalSecret as the webhook and
//! the reconciler see it now.

use jiff::Timestamp;
use keyward_crds::rules::store_ref_kind;
use keyward_crds::{ClusterExternalSecret, Condition, ExternalSecret, PushSecret, StoreKind};
use kube::Client;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::admission::{Verdict, review};
use crate::cluster::{EventLine, Found, admission_state, api, connect, events, find_store, secret_exists};
use crate::refresh::{self, NextRefresh};
use crate::target::{Kind, Target};
use crate::{Error, Output};

/// Events shown.
const EVENTS: usize = 5;

/// Everything `explain` says about one object.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Explanation {
    /// Its kind.
    pub kind: &'static str,
    /// Its name.
    pub name: String,
    /// Its namespace (none for a ClusterExternalSecret).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Every store it names.
    pub stores: Vec<StoreUse>,
    /// Whether the webhook would admit it as it is now.
    pub admission: Admission,
    /// Its status conditions.
    pub conditions: Vec<Condition>,
    /// The message of a `Ready=False` condition: the last error the reconciler or the provider
    /// reported.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// Its latest Events, oldest first.
    pub events: Vec<EventLine>,
    /// Why the Events could not be read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub events_error: Option<String>,
    /// When it refreshes next.
    pub next_refresh: NextRefresh,
}

/// One store reference and what it resolves to.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StoreUse {
    /// Where it is written (`spec.secretStoreRef`, `spec.secretStoreRefs[0]`, …).
    pub path: String,
    /// The kind it resolves to.
    pub kind: StoreKind,
    /// Whether the kind is written (an omitted kind means a SecretStore, as upstream).
    pub kind_given: bool,
    /// The store's name, or the label selector that picks stores.
    pub name: String,
    /// What was found.
    #[serde(flatten)]
    pub found: Found,
    /// Why it was not looked up.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// The webhook's verdict, or why it could not be reached.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase", untagged)]
pub enum Admission {
    /// The webhook's rules ran over the cluster's state.
    Checked(Verdict),
    /// The state could not be read (permissions, for example).
    NotChecked {
        /// Why.
        error: String,
    },
}

fn typed<T: DeserializeOwned>(value: &Value, target: &Target) -> Result<T, Error> {
    T::deserialize(value)
        .map_err(|e| Error::Manifest { path: target.display(), message: format!("cannot be read: {e}") })
}

/// Explains `target` and prints the result.
pub async fn run(target: &str, namespace: Option<&str>, out: Output) -> Result<bool, Error> {
    let target = Target::parse(target)?;
    let (client, default_ns) = connect().await?;
    let ns = target.kind.namespaced().then(|| namespace.unwrap_or(&default_ns).to_string());
    let what = match &ns {
        Some(ns) => format!("{} in namespace {ns}", target.display()),
        None => target.display(),
    };
    let object = api(&client, &target.kind.api_resource(), ns.as_deref())
        .get(&target.name)
        .await
        .map_err(|e| Error::api(what, e))?;
    let value = serde_json::to_value(&object).map_err(|e| Error::Output(e.to_string()))?;
    let explanation = explain(&client, &target, ns, &value).await?;
    match out {
        Output::Json => {
            let text = serde_json::to_string_pretty(&explanation).map_err(|e| Error::Output(e.to_string()))?;
            println!("{text}");
        }
        Output::Text => print!("{}", text(&explanation)),
    }
    Ok(true)
}

async fn explain(client: &Client, target: &Target, ns: Option<String>, value: &Value) -> Result<Explanation, Error> {
    let now = Timestamp::now();
    let (stores, conditions, next_refresh) = match target.kind {
        Kind::ExternalSecret => {
            let es: ExternalSecret = typed(value, target)?;
            let ns = ns.as_deref().unwrap_or_default();
            let mut stores = Vec::new();
            for (path, r) in es.store_refs() {
                let kind = store_ref_kind(r.kind);
                let found = find_store(client, kind, &r.name, Some(ns)).await;
                stores.push(StoreUse {
                    path,
                    kind,
                    kind_given: r.kind.is_some(),
                    name: r.name.clone(),
                    found,
                    note: None,
                });
            }
            let manages = es.spec.target.creation_policy.manages_target();
            let missing = manages && secret_exists(client, ns, &es.target_secret_name()).await == Some(false);
            let conditions = es.status.as_ref().map(|s| s.conditions.clone()).unwrap_or_default();
            (stores, conditions, refresh::external_secret(&es, missing, now))
        }
        Kind::PushSecret => {
            let ps: PushSecret = typed(value, target)?;
            let mut stores = Vec::new();
            for (i, r) in ps.spec.secret_store_refs.iter().enumerate() {
                let path = format!("spec.secretStoreRefs[{i}]");
                let kind = store_ref_kind(r.kind);
                let (name, found, note) = match r.name.as_deref().filter(|n| !n.is_empty()) {
                    Some(name) => (name.to_string(), find_store(client, kind, name, ns.as_deref()).await, None),
                    None => {
                        let selector = serde_json::to_string(&r.label_selector).unwrap_or_default();
                        let note = "the stores whose labels match are picked at each push".to_string();
                        (selector, Found::default(), Some(note))
                    }
                };
                stores.push(StoreUse { path, kind, kind_given: r.kind.is_some(), name, found, note });
            }
            let conditions = ps.status.as_ref().map(|s| s.conditions.clone()).unwrap_or_default();
            (stores, conditions, refresh::push_secret(&ps, now))
        }
        Kind::ClusterExternalSecret => {
            let ces: ClusterExternalSecret = typed(value, target)?;
            let mut stores = Vec::new();
            for (path, r) in ces.spec.external_secret_spec.store_refs() {
                let kind = store_ref_kind(r.kind);
                let path = path.replacen("spec.", "spec.externalSecretSpec.", 1);
                let (found, note) = if crate::cluster::store_namespaced(kind) {
                    let note = format!("a {kind} in each selected namespace: explain the ExternalSecret there");
                    (Found::default(), Some(note))
                } else {
                    (find_store(client, kind, &r.name, None).await, None)
                };
                stores.push(StoreUse { path, kind, kind_given: r.kind.is_some(), name: r.name.clone(), found, note });
            }
            let conditions = ces.status.as_ref().map(|s| s.conditions.clone()).unwrap_or_default();
            (stores, conditions, refresh::cluster_external_secret(&ces))
        }
    };
    // The webhook's caches hold Providers and SecretStores of every namespace; an
    // ExternalSecret or PushSecret only needs those of its own.
    let admission = match admission_state(client, ns.as_deref()).await {
        Ok(state) => match review(value, ns.as_deref(), true, &state) {
            Some(v) => Admission::Checked(v),
            None => Admission::NotChecked { error: "not a kind the webhook admits".into() },
        },
        Err(e) => Admission::NotChecked { error: e.to_string() },
    };
    let last_error = conditions
        .iter()
        .find(|c| c.type_ == "Ready" && c.status == "False")
        .map(|c| c.message.clone().or_else(|| c.reason.clone()).unwrap_or_default());
    let (events, events_error) = match events(client, target.kind.as_str(), &target.name, ns.as_deref(), EVENTS).await {
        Ok(e) => (e, None),
        Err(e) => (Vec::new(), Some(e.to_string())),
    };
    Ok(Explanation {
        kind: target.kind.as_str(),
        name: target.name.clone(),
        namespace: ns,
        stores,
        admission,
        conditions,
        last_error,
        events,
        events_error,
        next_refresh,
    })
}

/// The text report.
pub fn text(e: &Explanation) -> String {
    let mut s = match &e.namespace {
        Some(ns) => format!("{} {ns}/{}\n", e.kind, e.name),
        None => format!("{} {}\n", e.kind, e.name),
    };
    s.push_str("Stores:\n");
    if e.stores.is_empty() {
        s.push_str("  (none named)\n");
    }
    for u in &e.stores {
        let omitted = if u.kind_given { "" } else { " (no kind given: a SecretStore, as upstream)" };
        let found = match (&u.note, &u.found) {
            (Some(note), _) => note.clone(),
            (None, Found { error: Some(err), .. }) => format!("cannot be read: {err}"),
            (None, Found { exists: Some(false), .. }) => "NOT FOUND: nothing syncs until it exists".into(),
            (None, Found { not_served: Some(why), .. }) => format!("exists, NOT SERVED: {why}"),
            (None, Found { ready: Some(r), .. }) => {
                let mut line = format!("exists, Ready={}", r.status);
                if let Some(reason) = &r.reason {
                    line.push_str(&format!(" {reason}"));
                }
                if let Some(message) = r.message.as_deref().filter(|m| !m.is_empty()) {
                    line.push_str(&format!(": {message}"));
                }
                line
            }
            (None, _) => "exists, no Ready condition yet".into(),
        };
        s.push_str(&format!("  {} -> {} {}{omitted}: {found}\n", u.path, u.kind, u.name));
    }
    match &e.admission {
        Admission::Checked(v) if v.allowed => s.push_str("Admission: accepted\n"),
        Admission::Checked(v) => {
            s.push_str(&format!("Admission: REFUSED: {}\n", v.message.as_deref().unwrap_or("no reason given")))
        }
        Admission::NotChecked { error } => s.push_str(&format!("Admission: not checked: {error}\n")),
    }
    if let Admission::Checked(v) = &e.admission {
        for w in &v.warnings {
            s.push_str(&format!("  warning: {w}\n"));
        }
    }
    s.push_str("Conditions:\n");
    if e.conditions.is_empty() {
        s.push_str("  (none yet: the reconciler has not reported)\n");
    }
    for c in &e.conditions {
        let since = c.last_transition_time.as_ref().map(|t| format!(" (since {})", t.0)).unwrap_or_default();
        let reason = c.reason.as_deref().map(|r| format!(" {r}")).unwrap_or_default();
        let message = c.message.as_deref().map(|m| format!(": {m}")).unwrap_or_default();
        s.push_str(&format!("  {}={}{reason}{message}{since}\n", c.type_, c.status));
    }
    s.push_str(&format!("Last error: {}\n", e.last_error.as_deref().unwrap_or("none")));
    s.push_str("Events:\n");
    if let Some(err) = &e.events_error {
        s.push_str(&format!("  cannot be read: {err}\n"));
    } else if e.events.is_empty() {
        s.push_str("  (none)\n");
    }
    for ev in &e.events {
        let count = if ev.count > 1 { format!(" (x{})", ev.count) } else { String::new() };
        let time = ev.time.as_deref().unwrap_or("-");
        s.push_str(&format!("  {time} {} {}{count}: {}\n", ev.type_, ev.reason, ev.message));
    }
    s.push_str(&format!("Next refresh: {}\n", e.next_refresh));
    if e.last_error.is_some() && e.kind != "ClusterExternalSecret" {
        s.push_str("  (after a failure the reconciler retries with a backoff, sooner than this)\n");
    }
    s
}
