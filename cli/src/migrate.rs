//! `keyward migrate`: what an External Secrets install holds that Keyward does not serve or
//! would refuse, read from the cluster. The steps of the switch are in docs/migrating.md.

use std::collections::BTreeSet;

use keyward_crds::external_secret::GeneratorRef;
use keyward_crds::generators::{
    BeyondtrustWorkloadCredentialsDynamicSecret, CloudsmithAccessToken, ClusterGenerator, GeneratorKind,
    GithubAccessToken, GitlabDeployToken, Grafana, QuayAccessToken,
};
use keyward_crds::registry::{PROVIDER_CONFIG_GROUP, PROVIDER_CONFIG_VERSION};
use keyward_crds::rules::{generator_target, not_served, store_backend};
use keyward_crds::{
    ClusterExternalSecret, ClusterProvider, ClusterPushSecret, ClusterSecretStore, ExternalSecret, Provider,
    PushSecret, SecretStore, SecretStoreSpec,
};
use keyward_provider_registry::PROVIDER_KINDS;
use kube::discovery::ApiResource;
use kube::{Client, ResourceExt};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::admission::review;
use crate::cluster::{admission_state, connect, list, with_kind};
use crate::{Error, Output};

/// Where the steps of the switch are written.
pub const GUIDE: &str = "docs/migrating.md (\"Switching a running install\")";

/// An object, as `Kind namespace/name`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ObjectRef {
    /// Its kind.
    pub kind: String,
    /// Its namespace, for namespaced kinds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Its name.
    pub name: String,
}

impl std::fmt::Display for ObjectRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.namespace {
            Some(ns) => write!(f, "{} {ns}/{}", self.kind, self.name),
            None => write!(f, "{} {}", self.kind, self.name),
        }
    }
}

/// A store and whether Keyward serves its provider.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Store {
    /// The store.
    #[serde(flatten)]
    pub object: ObjectRef,
    /// The keys under `spec.provider`.
    pub provider: Vec<String>,
    /// The Keyward provider process that serves it, when served.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub served_by: Option<String>,
    /// Why it is not served.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub not_served: Option<String>,
}

/// A generator reference Keyward does not serve.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GeneratorUse {
    /// The ExternalSecret or PushSecret.
    #[serde(flatten)]
    pub object: ObjectRef,
    /// Where it names the generator.
    pub path: String,
    /// The generator's kind as written.
    pub generator_kind: String,
    /// Why it is not served (`keyward_crds::rules::generator_target`).
    pub not_served: String,
}

/// A template that would fail at sync: it calls a function no template engine of Keyward or
/// upstream has, or does not parse (`keyward_webhook::offline::template_warnings`).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TemplateProblem {
    /// The ExternalSecret, ClusterExternalSecret or PushSecret.
    #[serde(flatten)]
    pub object: ObjectRef,
    /// The field and what is wrong.
    pub problem: String,
}

/// The templates of an object that would fail at sync, by the rule admission warns with.
pub fn template_problems(object: &ObjectRef, kind: &str, value: &Value) -> Vec<TemplateProblem> {
    keyward_webhook::offline::template_warnings(kind, value)
        .into_iter()
        .map(|problem| TemplateProblem { object: object.clone(), problem })
        .collect()
}

/// An object the webhook would refuse now.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Refused {
    /// The object.
    #[serde(flatten)]
    pub object: ObjectRef,
    /// The denial.
    pub message: String,
}

/// The survey.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Survey {
    /// Every SecretStore and ClusterSecretStore.
    pub stores: Vec<Store>,
    /// The provider processes the served stores need.
    pub providers_needed: BTreeSet<String>,
    /// Generator references of ExternalSecrets and PushSecrets that name a kind Keyward does not
    /// serve, ClusterGenerators holding one, and generators of those kinds.
    pub generators: Vec<GeneratorUse>,
    /// Objects the admission rules refuse.
    pub refused: Vec<Refused>,
    /// Templates that would fail at sync.
    pub templates: Vec<TemplateProblem>,
    /// ClusterExternalSecrets and ClusterPushSecrets: served only by a reconciler that watches
    /// every namespace.
    pub cluster_wide: Vec<ObjectRef>,
    /// Where the steps are.
    pub guide: &'static str,
}

impl Survey {
    /// Whether nothing stands in the way.
    pub fn clear(&self) -> bool {
        self.stores.iter().all(|s| s.not_served.is_none())
            && self.generators.is_empty()
            && self.refused.is_empty()
            && self.templates.is_empty()
    }
}

fn object_ref(kind: &str, o: &kube::api::DynamicObject) -> ObjectRef {
    ObjectRef { kind: kind.to_string(), namespace: o.namespace(), name: o.name_any() }
}

/// What a store's `spec.provider` needs.
pub fn store(object: ObjectRef, spec: &Value) -> Store {
    let provider: Vec<String> =
        spec.get("provider").and_then(Value::as_object).map(|m| m.keys().cloned().collect()).unwrap_or_default();
    let (served_by, not_served) = match served_by(spec) {
        Ok(p) => (Some(p.to_string()), None),
        Err(e) => (None, Some(e)),
    };
    Store { object, provider, served_by, not_served }
}

/// The Keyward provider process that serves a SecretStore or ClusterSecretStore `spec`, or why
/// none does (the reconciler's own translation, `store_backend`).
pub fn served_by(spec: &Value) -> Result<&'static str, String> {
    let spec = SecretStoreSpec::deserialize(spec).map_err(|e| format!("spec cannot be read: {e}"))?;
    store_backend(&spec.provider, PROVIDER_KINDS).map(|b| b.provider_name()).map_err(|e| e.to_string())
}

/// The generator references of an ExternalSecret or PushSecret that Keyward does not serve
/// (path, kind, why), by the rule the webhook and the reconciler apply (`generator_target`).
pub fn unserved_generators(kind: &str, object: &Value) -> Vec<(String, String, String)> {
    let refs: Vec<(String, &Value)> = match kind {
        "ExternalSecret" => object
            .pointer("/spec/dataFrom")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
            .filter_map(|(i, d)| {
                d.pointer("/sourceRef/generatorRef").map(|g| (format!("spec.dataFrom[{i}].sourceRef.generatorRef"), g))
            })
            .collect(),
        "PushSecret" => object
            .pointer("/spec/selector/generatorRef")
            .map(|g| vec![("spec.selector.generatorRef".to_string(), g)])
            .unwrap_or_default(),
        "ClusterPushSecret" => object
            .pointer("/spec/pushSecretSpec/selector/generatorRef")
            .map(|g| vec![("spec.pushSecretSpec.selector.generatorRef".to_string(), g)])
            .unwrap_or_default(),
        // A ClusterGenerator holding a kind Keyward does not serve, and a generator of such a kind.
        "ClusterGenerator" => {
            let held = object.pointer("/spec/kind").and_then(Value::as_str).unwrap_or_default();
            return unserved_kind(held)
                .map(|why| ("spec.kind".to_string(), held.to_string(), why))
                .into_iter()
                .collect();
        }
        other => {
            return unserved_kind(other).map(|why| ("kind".to_string(), other.to_string(), why)).into_iter().collect();
        }
    };
    refs.into_iter()
        .filter(|(_, g)| !g.is_null())
        .filter_map(|(path, g)| {
            let kind = g.get("kind").and_then(Value::as_str).unwrap_or_default().to_string();
            let why = match GeneratorRef::deserialize(g) {
                Ok(r) => generator_target(&r).err()?,
                Err(e) => format!("cannot be read: {e}"),
            };
            Some((path, kind, why))
        })
        .collect()
}

/// Why a generator kind is not served, for one of upstream's kinds Keyward does not serve.
fn unserved_kind(kind: &str) -> Option<String> {
    GeneratorKind::parse(kind).filter(|k| !k.served()).map(|k| not_served(k.as_str()))
}

/// ClusterGenerators, and the objects of upstream's generator kinds Keyward does not serve: the
/// generators a switch leaves without values.
fn generator_kinds() -> Vec<(String, ApiResource)> {
    [
        ApiResource::erase::<ClusterGenerator>(&()),
        ApiResource::erase::<GithubAccessToken>(&()),
        ApiResource::erase::<GitlabDeployToken>(&()),
        ApiResource::erase::<QuayAccessToken>(&()),
        ApiResource::erase::<CloudsmithAccessToken>(&()),
        ApiResource::erase::<Grafana>(&()),
        ApiResource::erase::<BeyondtrustWorkloadCredentialsDynamicSecret>(&()),
    ]
    .into_iter()
    .map(|r| (r.kind.clone(), r))
    .collect()
}

/// The kinds the webhook admits, with their API resources.
fn admitted_kinds() -> Vec<(String, ApiResource)> {
    let mut kinds = vec![
        ("ExternalSecret".to_string(), ApiResource::erase::<ExternalSecret>(&())),
        ("PushSecret".into(), ApiResource::erase::<PushSecret>(&())),
        ("ClusterExternalSecret".into(), ApiResource::erase::<ClusterExternalSecret>(&())),
        ("ClusterPushSecret".into(), ApiResource::erase::<ClusterPushSecret>(&())),
        ("SecretStore".into(), ApiResource::erase::<SecretStore>(&())),
        ("ClusterSecretStore".into(), ApiResource::erase::<ClusterSecretStore>(&())),
        ("Provider".into(), ApiResource::erase::<Provider>(&())),
        ("ClusterProvider".into(), ApiResource::erase::<ClusterProvider>(&())),
    ];
    for row in PROVIDER_KINDS {
        let resource = ApiResource {
            group: PROVIDER_CONFIG_GROUP.into(),
            version: PROVIDER_CONFIG_VERSION.into(),
            api_version: format!("{PROVIDER_CONFIG_GROUP}/{PROVIDER_CONFIG_VERSION}"),
            kind: row.kind.into(),
            plural: row.plural.into(),
        };
        kinds.push((row.kind.to_string(), resource));
    }
    kinds
}

/// Reads the cluster.
pub async fn survey(client: &Client) -> Result<Survey, Error> {
    let state = admission_state(client, None).await?;
    let mut survey = Survey {
        stores: Vec::new(),
        providers_needed: BTreeSet::new(),
        generators: Vec::new(),
        refused: Vec::new(),
        templates: Vec::new(),
        cluster_wide: Vec::new(),
        guide: GUIDE,
    };
    let generators = generator_kinds().into_iter().map(|k| (k, true));
    for ((kind, resource), generator_kind) in admitted_kinds().into_iter().map(|k| (k, false)).chain(generators) {
        for o in list(client, &resource, None).await? {
            let value = with_kind(&o, &resource)?;
            let object = object_ref(&kind, &o);
            if matches!(kind.as_str(), "ClusterExternalSecret" | "ClusterPushSecret") {
                survey.cluster_wide.push(object.clone());
            }
            if matches!(kind.as_str(), "SecretStore" | "ClusterSecretStore") {
                let s = store(object.clone(), value.get("spec").unwrap_or(&Value::Null));
                survey.providers_needed.extend(s.served_by.clone());
                survey.stores.push(s);
            }
            for (path, generator_kind, not_served) in unserved_generators(&kind, &value) {
                survey.generators.push(GeneratorUse { object: object.clone(), path, generator_kind, not_served });
            }
            survey.templates.extend(template_problems(&object, &kind, &value));
            if generator_kind {
                continue;
            }
            if let Some(v) = review(&value, object.namespace.as_deref(), true, &state).filter(|v| !v.allowed) {
                let message = v.message.unwrap_or_default();
                survey.refused.push(Refused { object, message });
            }
        }
    }
    Ok(survey)
}

/// The text report.
pub fn text(s: &Survey) -> String {
    let mut out = String::from("SecretStores and ClusterSecretStores:\n");
    if s.stores.is_empty() {
        out.push_str("  (none)\n");
    }
    for st in &s.stores {
        let provider = st.provider.join(", ");
        match (&st.served_by, &st.not_served) {
            (Some(p), _) => out.push_str(&format!("  {}: {provider}: served by Keyward's {p} provider\n", st.object)),
            (None, Some(why)) => out.push_str(&format!("  {}: {provider}: NOT SERVED: {why}\n", st.object)),
            (None, None) => {}
        }
    }
    if !s.providers_needed.is_empty() {
        let needed: Vec<&str> = s.providers_needed.iter().map(String::as_str).collect();
        out.push_str(&format!(
            "  Install Keyward with these providers enabled: {} (chart values providers.<name>.enabled)\n",
            needed.join(", ")
        ));
    }
    out.push_str("Generators and generator references Keyward does not serve (see docs/generators.md):\n");
    if s.generators.is_empty() {
        out.push_str("  (none)\n");
    }
    for g in &s.generators {
        out.push_str(&format!("  {}: {} ({}): {}\n", g.object, g.path, g.generator_kind, g.not_served));
    }
    out.push_str("Objects Keyward's admission rules refuse now (changing them would be denied):\n");
    if s.refused.is_empty() {
        out.push_str("  (none)\n");
    }
    for r in &s.refused {
        out.push_str(&format!("  {}: {}\n", r.object, r.message));
    }
    out.push_str("Templates that would fail at sync (a function no engine has, or no parse; see docs/templates.md):\n");
    if s.templates.is_empty() {
        out.push_str("  (none)\n");
    }
    for t in &s.templates {
        out.push_str(&format!("  {}: {}\n", t.object, t.problem));
    }
    if !s.cluster_wide.is_empty() {
        out.push_str(
            "ClusterExternalSecrets and ClusterPushSecrets (served by a reconciler that watches every namespace: \
             not with the chart's scopedNamespace or --watch-namespace):\n",
        );
        for o in &s.cluster_wide {
            out.push_str(&format!("  {o}\n"));
        }
    }
    out.push_str(&format!("How to switch: {}\n", s.guide));
    out
}

/// `keyward migrate`.
pub async fn run(out: Output) -> Result<bool, Error> {
    let (client, _) = connect().await?;
    let s = survey(&client).await?;
    match out {
        Output::Json => {
            let text = serde_json::to_string_pretty(&s).map_err(|e| Error::Output(e.to_string()))?;
            println!("{text}");
        }
        Output::Text => print!("{}", text(&s)),
    }
    Ok(s.clear())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(name: &str) -> ObjectRef {
        ObjectRef { kind: "SecretStore".into(), namespace: Some("apps".into()), name: name.into() }
    }

    #[test]
    fn stores_are_served_or_say_why_not() {
        let vault: Value = serde_yaml::from_str(
            "provider: {vault: {server: 'https://vault:8200', path: secret, version: v2, auth: {tokenSecretRef: {name: t, key: k}}}}",
        )
        .unwrap();
        let s = store(at("v"), &vault);
        assert_eq!((s.served_by.as_deref(), s.not_served.as_deref()), (Some("vault"), None));
        let alibaba: Value = serde_yaml::from_str("provider: {alibaba: {regionID: r}}").unwrap();
        let s = store(at("a"), &alibaba);
        assert_eq!(s.provider, ["alibaba"]);
        assert!(s.not_served.unwrap().contains("spec.provider.alibaba is not served"));
    }

    #[test]
    fn open_bao_and_crd_stores_are_served_by_the_vault_and_kubernetes_providers() {
        let bao: Value = serde_yaml::from_str(
            "provider: {openBao: {server: 'https://bao:8200', path: secret, auth: {tokenSecretRef: {name: t, key: k}}}}",
        )
        .unwrap();
        let s = store(at("b"), &bao);
        assert_eq!((s.served_by.as_deref(), s.not_served.as_deref()), (Some("vault"), None));
        let crd: Value = serde_yaml::from_str(
            "provider: {crd: {auth: {serviceAccount: {name: r}}, resource: {group: '', version: v1, kind: ConfigMap}}}",
        )
        .unwrap();
        let s = store(at("c"), &crd);
        assert_eq!((s.served_by.as_deref(), s.not_served.as_deref()), (Some("kubernetes"), None));
    }

    #[test]
    fn templates_that_would_fail_at_sync_are_listed() {
        let es: Value = serde_yaml::from_str(
            "apiVersion: external-secrets.io/v1\nkind: ExternalSecret\nmetadata: {name: e, namespace: apps}\n\
             spec: {secretStoreRef: {name: s}, data: [{secretKey: k, remoteRef: {key: k}}], target: {template: {data: \
             {ok: '{{ now | date \"2006\" }}{{ .k | b32enc | kebabcase }}', bad: '{{ .k | env }}'}}}}",
        )
        .unwrap();
        let object = ObjectRef { kind: "ExternalSecret".into(), namespace: Some("apps".into()), name: "e".into() };
        let found = template_problems(&object, "ExternalSecret", &es);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(
            found[0].problem.starts_with("spec.target.template.data[\"bad\"]: calls function \"env\""),
            "{found:?}"
        );
        let survey = Survey {
            stores: Vec::new(),
            providers_needed: BTreeSet::new(),
            generators: Vec::new(),
            refused: Vec::new(),
            templates: found,
            cluster_wide: vec![ObjectRef { kind: "ClusterPushSecret".into(), namespace: None, name: "cps".into() }],
            guide: GUIDE,
        };
        assert!(!survey.clear());
        assert!(
            text(&survey)
                .contains("  ExternalSecret apps/e: spec.target.template.data[\"bad\"]: calls function \"env\"")
        );
        assert!(text(&survey).contains(
            "watches every namespace: not with the chart's scopedNamespace or --watch-namespace):\n  \
             ClusterPushSecret cps\n"
        ));
    }

    #[test]
    fn generator_references_keyward_does_not_serve_are_found() {
        let es: Value = serde_yaml::from_str(
            "spec: {dataFrom: [{extract: {key: a}}, {sourceRef: {generatorRef: {kind: Password, name: p}}}, \
             {sourceRef: {generatorRef: {kind: Grafana, name: e}}}, {sourceRef: {generatorRef: {kind: MFA, name: m}}}]}",
        )
        .unwrap();
        let found = unserved_generators("ExternalSecret", &es);
        assert_eq!(found.len(), 1, "Password and MFA are served: {found:?}");
        let (path, kind, why) = &found[0];
        assert_eq!((path.as_str(), kind.as_str()), ("spec.dataFrom[2].sourceRef.generatorRef", "Grafana"));
        assert!(why.contains("not served"), "{why}");
        let ps: Value = serde_yaml::from_str("spec: {selector: {generatorRef: {kind: Vault, name: p}}}").unwrap();
        assert_eq!(unserved_generators("PushSecret", &ps)[0].0, "spec.selector.generatorRef");
        assert!(unserved_generators("PushSecret", &es).is_empty());
        let cps: Value =
            serde_yaml::from_str("spec: {pushSecretSpec: {selector: {generatorRef: {kind: Vault, name: p}}}}").unwrap();
        assert_eq!(unserved_generators("ClusterPushSecret", &cps)[0].0, "spec.pushSecretSpec.selector.generatorRef");
    }

    #[test]
    fn generators_of_kinds_keyward_does_not_serve_are_found() {
        let held = |kind: &str| serde_json::json!({"spec": {"kind": kind, "generator": {}}});
        let found = unserved_generators("ClusterGenerator", &held("GitlabDeployToken"));
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!((found[0].0.as_str(), found[0].1.as_str()), ("spec.kind", "GitlabDeployToken"));
        assert!(found[0].2.contains("not served"), "{found:?}");
        assert!(unserved_generators("ClusterGenerator", &held("MFA")).is_empty());
        let listed: Vec<String> = generator_kinds().into_iter().map(|(k, _)| k).collect();
        for kind in GeneratorKind::ALL.iter().filter(|k| !k.served()) {
            assert!(listed.contains(&kind.to_string()), "{kind} objects are listed");
            assert_eq!(unserved_generators(kind.as_str(), &serde_json::json!({"spec": {}}))[0].0, "kind");
        }
        assert!(unserved_generators("Password", &serde_json::json!({"spec": {}})).is_empty());
    }
}
