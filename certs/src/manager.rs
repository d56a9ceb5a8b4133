//! The self-managed certificate loop's one pass: read the CA Secret and the leaf Secrets,
//! decide with [`crate::plan`], write what changed (server-side apply, field manager
//! `keyward-certs`), and keep the `caBundle` of Keyward's webhook configurations current.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration, WebhookClientConfig,
};
use k8s_openapi::api::core::v1::Secret;
use kube::api::{ListParams, ObjectMeta, Patch, PatchParams, PostParams};
use kube::{Api, Client, Resource};
use serde::Serialize;
use serde::de::DeserializeOwned;
use time::OffsetDateTime;

use crate::bundle::{join_bundle, same_certificates, signed_by, split_bundle, subject_alt_names};
use crate::plan::{CaAction, CaState, LeafAction, LeafState, Policy, ca_action, leaf_action, leaf_validity};
use crate::{CA_FILE, CERT_FILE, CertError, CertificateAuthority, KEY_FILE, Usage};

/// Field manager of every write the loop makes.
pub const FIELD_MANAGER: &str = "keyward-certs";
/// Staged next CA certificate in the CA Secret.
pub const NEXT_CERT: &str = "next.crt";
/// Staged next CA key in the CA Secret.
pub const NEXT_KEY: &str = "next.key";
/// Annotation on the CA Secret: unix time of the last CA step (create, stage, promote).
pub const PHASE_SINCE_ANNOTATION: &str = "certs.keyward.dev/phase-since";
/// Common name of Keyward's CAs.
pub const CA_COMMON_NAME: &str = "keyward-ca";

/// Anything that stops a pass. The loop logs it and tries again on the next tick.
#[derive(Debug, thiserror::Error)]
pub enum ManagerError {
    /// The API server refused or failed a request.
    #[error("{action}: {source}")]
    Kube {
        /// What the loop was doing.
        action: String,
        /// The API error.
        source: kube::Error,
    },
    /// Generating or reading a certificate failed.
    #[error(transparent)]
    Cert(#[from] CertError),
}

/// One leaf Secret the loop keeps.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeafSpec {
    /// Secret name.
    pub secret: String,
    /// Subject alternative names; the first is also the common name.
    pub names: Vec<String>,
    /// Server or client certificate.
    pub usage: Usage,
}

impl LeafSpec {
    /// A server certificate for Service `service` in `namespace`: `svc`, `svc.ns`, `svc.ns.svc`
    /// and `svc.ns.svc.<cluster_domain>`.
    pub fn for_service(secret: &str, service: &str, namespace: &str, cluster_domain: &str) -> Self {
        LeafSpec {
            secret: secret.to_string(),
            names: vec![
                format!("{service}.{namespace}.svc"),
                service.to_string(),
                format!("{service}.{namespace}"),
                format!("{service}.{namespace}.svc.{cluster_domain}"),
            ],
            usage: Usage::Server,
        }
    }

    /// A client certificate with common name `name`.
    pub fn client(secret: &str, name: &str) -> Self {
        LeafSpec { secret: secret.to_string(), names: vec![name.to_string()], usage: Usage::Client }
    }
}

/// What the loop keeps.
#[derive(Clone, Debug)]
pub struct Config {
    /// Namespace of every Secret.
    pub namespace: String,
    /// The CA Secret (`ca.crt` bundle, `tls.crt`/`tls.key` signing CA, `next.*` while staged).
    pub ca_secret: String,
    /// The leaf Secrets (webhook serving, provider servers, reconciler client).
    pub leaves: Vec<LeafSpec>,
    /// Validating and Mutating webhook configurations, by name, whose `caBundle` is kept.
    pub webhook_configurations: Vec<String>,
    /// And those matching this label selector.
    pub webhook_selector: Option<String>,
    /// Validity and rotation thresholds.
    pub policy: Policy,
}

/// What one pass did.
#[derive(Clone, Debug, Default)]
pub struct Report {
    /// The CA step taken, when not `Keep`.
    pub ca: Option<CaAction>,
    /// Leaf Secrets written and why.
    pub leaves: Vec<(String, LeafAction)>,
    /// Webhook configurations whose `caBundle` was updated (`Kind/name`).
    pub webhook_configurations: Vec<String>,
    /// The trust bundle after the pass.
    pub bundle: String,
    /// When each certificate in use expires after the pass: the active CA (by its Secret) and
    /// every leaf Secret.
    pub expiries: Vec<(String, OffsetDateTime)>,
}

impl Report {
    /// True when the pass changed nothing.
    pub fn is_quiet(&self) -> bool {
        self.ca.is_none() && self.leaves.is_empty() && self.webhook_configurations.is_empty()
    }
}

/// One pass of the loop.
pub async fn reconcile(client: &Client, cfg: &Config) -> Result<Report, ManagerError> {
    let now = OffsetDateTime::now_utc();
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &cfg.namespace);
    let mut report = Report::default();

    let (ca, bundle) = ensure_ca(&secrets, cfg, now, &mut report).await?;
    report.expiries.push((cfg.ca_secret.clone(), ca.certified_key().not_after));
    for spec in &cfg.leaves {
        let (action, not_after) = ensure_leaf(&secrets, spec, &ca, &bundle, &cfg.policy, now).await?;
        report.expiries.push((spec.secret.clone(), not_after));
        if action != LeafAction::Keep {
            report.leaves.push((spec.secret.clone(), action));
        }
    }
    report.webhook_configurations = inject_ca_bundle(client, cfg, &bundle).await?;
    report.bundle = bundle;
    Ok(report)
}

/// The CA Secret as read.
struct CaMaterial {
    active_cert: String,
    active_key: String,
    next: Option<(String, String)>,
    bundle: String,
    phase_since: OffsetDateTime,
}

fn read_ca(secret: &Secret) -> Option<(CaMaterial, CertificateAuthority)> {
    let data = secret.data.as_ref()?;
    let text = |k: &str| data.get(k).and_then(|b| String::from_utf8(b.0.clone()).ok());
    let (active_cert, active_key) = (text(CERT_FILE)?, text(KEY_FILE)?);
    let ca = CertificateAuthority::from_pem(&active_cert, &active_key).ok()?;
    let next = match (text(NEXT_CERT), text(NEXT_KEY)) {
        (Some(c), Some(k)) if CertificateAuthority::from_pem(&c, &k).is_ok() => Some((c, k)),
        _ => None,
    };
    let bundle = text(CA_FILE).unwrap_or_default();
    let phase_since = secret
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(PHASE_SINCE_ANNOTATION))
        .and_then(|s| s.parse::<i64>().ok())
        .and_then(|s| OffsetDateTime::from_unix_timestamp(s).ok())
        .unwrap_or(OffsetDateTime::UNIX_EPOCH);
    Some((CaMaterial { active_cert, active_key, next, bundle, phase_since }, ca))
}

fn ca_state(m: &CaMaterial, ca: &CertificateAuthority) -> CaState {
    let known =
        |c: &str| same_certificates(c, &m.active_cert) || m.next.as_ref().is_some_and(|(n, _)| same_certificates(c, n));
    CaState {
        active_not_after: ca.certified_key().not_after,
        has_next: m.next.is_some(),
        bundle_has_previous: split_bundle(&m.bundle).iter().any(|c| !known(c)),
        phase_since: m.phase_since,
    }
}

async fn ensure_ca(
    secrets: &Api<Secret>,
    cfg: &Config,
    now: OffsetDateTime,
    report: &mut Report,
) -> Result<(CertificateAuthority, String), ManagerError> {
    let existing =
        secrets.get_opt(&cfg.ca_secret).await.map_err(kube_err(format!("reading Secret {}", cfg.ca_secret)))?;
    let read = existing.as_ref().and_then(read_ca);
    let state = read.as_ref().map(|(m, ca)| ca_state(m, ca));
    let action = ca_action(state.as_ref(), &cfg.policy, now);
    let old_bundle = read.as_ref().map(|(m, _)| m.bundle.clone()).unwrap_or_default();
    let (active, next, bundle) = match (action, read) {
        (CaAction::Keep, Some((m, ca))) => {
            // Keep, but make sure the bundle holds the active (and staged) CA.
            let mut parts = vec![m.bundle.as_str(), m.active_cert.as_str()];
            if let Some((n, _)) = &m.next {
                parts.push(n.as_str());
            }
            let bundle = join_bundle(parts);
            if same_certificates(&bundle, &m.bundle) {
                return Ok((ca, bundle));
            }
            let active = (m.active_cert.clone(), m.active_key.clone());
            write_ca(secrets, cfg, &active, m.next.as_ref(), &bundle, m.phase_since).await?;
            return Ok((ca, bundle));
        }
        (CaAction::StageNext, Some((m, ca))) => {
            let next = CertificateAuthority::generate(CA_COMMON_NAME, cfg.policy.ca_validity)?;
            let next = (next.cert_pem().to_string(), next.certified_key().key_pem.clone());
            let bundle = join_bundle([m.bundle.as_str(), m.active_cert.as_str(), next.0.as_str()]);
            write_ca(secrets, cfg, &(m.active_cert, m.active_key), Some(&next), &bundle, now).await?;
            report.ca = Some(action);
            return Ok((ca, bundle));
        }
        (CaAction::PromoteNext, Some((m, _))) => {
            let next = m.next.clone().unwrap_or_default();
            let bundle = join_bundle([m.bundle.as_str(), m.active_cert.as_str(), next.0.as_str()]);
            (next, None, bundle)
        }
        (CaAction::TrimBundle, Some((m, _))) => {
            let bundle = join_bundle([m.active_cert.as_str()]);
            ((m.active_cert, m.active_key), None, bundle)
        }
        // Create, or a state that cannot be read: start a new CA, still trusting the old bundle's
        // valid CAs until the next trim so that leaves in use keep verifying.
        _ => {
            let ca = CertificateAuthority::generate(CA_COMMON_NAME, cfg.policy.ca_validity)?;
            let fresh = (ca.cert_pem().to_string(), ca.certified_key().key_pem.clone());
            let still_valid: Vec<String> = split_bundle(&old_bundle)
                .into_iter()
                .filter(|c| crate::bundle::first_not_after(c).is_some_and(|t| t > now))
                .collect();
            let bundle = join_bundle(std::iter::once(fresh.0.as_str()).chain(still_valid.iter().map(String::as_str)));
            (fresh, None, bundle)
        }
    };
    write_ca(secrets, cfg, &active, next.as_ref(), &bundle, now).await?;
    report.ca = Some(if action == CaAction::Keep { CaAction::Create } else { action });
    let ca = CertificateAuthority::from_pem(&active.0, &active.1)?;
    Ok((ca, bundle))
}

async fn write_ca(
    secrets: &Api<Secret>,
    cfg: &Config,
    active: &(String, String),
    next: Option<&(String, String)>,
    bundle: &str,
    phase_since: OffsetDateTime,
) -> Result<(), ManagerError> {
    let mut data = BTreeMap::from([
        (CA_FILE.to_string(), bytes(bundle)),
        (CERT_FILE.to_string(), bytes(&active.0)),
        (KEY_FILE.to_string(), bytes(&active.1)),
    ]);
    if let Some((c, k)) = next {
        data.insert(NEXT_CERT.to_string(), bytes(c));
        data.insert(NEXT_KEY.to_string(), bytes(k));
    }
    let annotations = BTreeMap::from([(PHASE_SINCE_ANNOTATION.to_string(), phase_since.unix_timestamp().to_string())]);
    apply_secret(secrets, &cfg.ca_secret, "Opaque", data, Some(annotations)).await
}

async fn ensure_leaf(
    secrets: &Api<Secret>,
    spec: &LeafSpec,
    ca: &CertificateAuthority,
    bundle: &str,
    policy: &Policy,
    now: OffsetDateTime,
) -> Result<(LeafAction, OffsetDateTime), ManagerError> {
    let existing = secrets.get_opt(&spec.secret).await.map_err(kube_err(format!("reading Secret {}", spec.secret)))?;
    let data = existing.as_ref().and_then(|s| s.data.as_ref());
    let text = |k: &str| data.and_then(|d| d.get(k)).and_then(|b| String::from_utf8(b.0.clone()).ok());
    let current = match (text(CERT_FILE), text(KEY_FILE)) {
        (Some(c), Some(k)) if rcgen::KeyPair::from_pem(&k).is_ok() => Some((c, k)),
        _ => None,
    };
    let state = current.as_ref().and_then(|(cert, _)| {
        Some(LeafState {
            not_after: crate::bundle::first_not_after(cert)?,
            signed_by_active: signed_by(cert, ca.cert_pem()),
            names_match: subject_alt_names(cert) == spec.names,
            bundle_current: text(CA_FILE).is_some_and(|b| same_certificates(&b, bundle)),
        })
    });
    let action = leaf_action(state.as_ref(), policy, now);
    let (cert, key, not_after) = match (action, current, state) {
        (LeafAction::Keep, _, Some(state)) => return Ok((action, state.not_after)),
        (LeafAction::RefreshBundle, Some(current), Some(state)) => (current.0, current.1, state.not_after),
        _ => {
            let names: Vec<&str> = spec.names.iter().map(String::as_str).collect();
            let validity = leaf_validity(policy, ca.certified_key().not_after, now);
            let issued = ca.issue(&names, spec.usage, validity)?;
            (issued.cert_pem, issued.key_pem, issued.not_after)
        }
    };
    let data = BTreeMap::from([
        (CA_FILE.to_string(), bytes(bundle)),
        (CERT_FILE.to_string(), bytes(&cert)),
        (KEY_FILE.to_string(), bytes(&key)),
    ]);
    apply_secret(secrets, &spec.secret, "kubernetes.io/tls", data, None).await?;
    Ok((action, not_after))
}

async fn apply_secret(
    secrets: &Api<Secret>,
    name: &str,
    type_: &str,
    data: BTreeMap<String, ByteString>,
    annotations: Option<BTreeMap<String, String>>,
) -> Result<(), ManagerError> {
    let secret = Secret {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            labels: Some(BTreeMap::from([
                ("app.kubernetes.io/managed-by".to_string(), FIELD_MANAGER.to_string()),
                ("app.kubernetes.io/part-of".to_string(), "keyward".to_string()),
            ])),
            annotations,
            ..Default::default()
        },
        type_: Some(type_.to_string()),
        data: Some(data),
        ..Default::default()
    };
    secrets
        .patch(name, &PatchParams::apply(FIELD_MANAGER).force(), &Patch::Apply(&secret))
        .await
        .map_err(kube_err(format!("writing Secret {name}")))?;
    Ok(())
}

/// Sets `caBundle` on every webhook of the named and label-selected Validating and Mutating
/// webhook configurations; returns `Kind/name` of those that changed.
async fn inject_ca_bundle(client: &Client, cfg: &Config, bundle: &str) -> Result<Vec<String>, ManagerError> {
    let mut changed = Vec::new();
    changed.extend(
        inject_into::<ValidatingWebhookConfiguration>(client, cfg, bundle, |c| {
            c.webhooks.iter_mut().flatten().map(|w| &mut w.client_config).collect()
        })
        .await?,
    );
    changed.extend(
        inject_into::<MutatingWebhookConfiguration>(client, cfg, bundle, |c| {
            c.webhooks.iter_mut().flatten().map(|w| &mut w.client_config).collect()
        })
        .await?,
    );
    Ok(changed)
}

async fn inject_into<K>(
    client: &Client,
    cfg: &Config,
    bundle: &str,
    configs: impl Fn(&mut K) -> Vec<&mut WebhookClientConfig>,
) -> Result<Vec<String>, ManagerError>
where
    K: Resource<DynamicType = ()> + Clone + std::fmt::Debug + Serialize + DeserializeOwned,
{
    let api: Api<K> = Api::all(client.clone());
    let kind = K::kind(&());
    let mut objects = Vec::new();
    for name in &cfg.webhook_configurations {
        if let Some(o) = api.get_opt(name).await.map_err(kube_err(format!("reading {kind} {name}")))? {
            objects.push(o);
        }
    }
    if let Some(selector) = &cfg.webhook_selector {
        let listed =
            api.list(&ListParams::default().labels(selector)).await.map_err(kube_err(format!("listing {kind}")))?;
        for o in listed.items {
            if !objects.iter().any(|p: &K| p.meta().name == o.meta().name) {
                objects.push(o);
            }
        }
    }
    let mut changed = Vec::new();
    for mut object in objects {
        let mut dirty = false;
        for client_config in configs(&mut object) {
            let current = client_config.ca_bundle.as_ref().map(|b| String::from_utf8_lossy(&b.0).into_owned());
            if !current.is_some_and(|c| same_certificates(&c, bundle)) {
                client_config.ca_bundle = Some(bytes(bundle));
                dirty = true;
            }
        }
        if dirty {
            let name = object.meta().name.clone().unwrap_or_default();
            api.replace(
                &name,
                &PostParams { field_manager: Some(FIELD_MANAGER.to_string()), ..Default::default() },
                &object,
            )
            .await
            .map_err(kube_err(format!("updating caBundle of {kind} {name}")))?;
            changed.push(format!("{kind}/{name}"));
        }
    }
    Ok(changed)
}

fn bytes(s: &str) -> ByteString {
    ByteString(s.as_bytes().to_vec())
}

fn kube_err(action: String) -> impl FnOnce(kube::Error) -> ManagerError {
    move |source| ManagerError::Kube { action, source }
}
