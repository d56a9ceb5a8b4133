//! The conformance suite: what every provider must do, checked against the provider binary
//! (real process, real mTLS) and its real store.
//!
//! A provider's test implements [`ConformanceTarget`] (how to start the provider, a working
//! configuration, how to write and read the store directly, what it claims) and calls
//! [`run_all`], which seeds the fixtures, runs every [`Case`] that applies and reports every
//! failure at once. Each case checks the contract as `providers/proto` states it and as the
//! runtime promises it (keys stay in the store path, answers are capped), so a new provider gets
//! the whole list by implementing one trait.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::time::Duration;

use keyward_certs::{CertificateAuthority, Usage};
use keyward_e2e::hostile::{FloodingServer, peak_rss_kib};
use keyward_proto::v1::secret_store_provider_client::SecretStoreProviderClient;
use keyward_proto::v1::{
    CapabilitiesRequest, DeleteSecretRequest, ExternalSecretDataRemoteRef, ExternalSecretFind, FindName,
    GetAllSecretsRequest, GetSecretMapRequest, GetSecretRequest, ProviderReference, PushSecretData,
    PushSecretRemoteRef, PushSecretRequest, SecretExistsRequest, SecretStoreCapabilities, ValidateRequest,
};
use tonic::transport::Channel;
use tonic::{Code, Status};

use super::{RunningProvider, TestkitError, http_get};
use crate::body::{BodyError, MAX_RESPONSE_BYTES};

/// The properties of one remote value: a Secret's data, a KV secret's fields, a JSON object.
pub type Properties = BTreeMap<String, String>;

/// One check of the suite.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Case {
    /// GetSecret: the whole value (as a JSON object of its properties) and one `property`.
    Get,
    /// GetSecretMap: every property of a value.
    GetMap,
    /// GetAllSecrets by `find.name.regexp`.
    FindByName,
    /// GetAllSecrets by `find.path` ([`ConformanceTarget::find_path`]).
    FindByPath,
    /// PushSecret of two properties, read back through the provider and from the store.
    Push,
    /// DeleteSecret of a property, then of the value: gone, and deleting again succeeds.
    Delete,
    /// SecretExists of a value and its properties, present and missing.
    Exists,
    /// Validate: a working configuration is valid, a broken one invalid with a message.
    Validate,
    /// Capabilities as the provider claims them.
    Capabilities,
    /// A missing value or property is NOT_FOUND, for GetSecret and GetSecretMap.
    NotFound,
    /// Keys that walk out of the store path (`..` raw or percent-encoded, `?`, `#`) are
    /// INVALID_ARGUMENT for every operation, and the store is untouched.
    Traversal,
    /// A `find.path` that walks out of the store path is INVALID_ARGUMENT.
    FindPathTraversal,
    /// A server answering 300 MB is refused with the size-cap message, and the provider serves on.
    OversizedResponse,
    /// A tenant's configuration naming a cloud metadata address, an IPv6 form of one, or the
    /// provider's own address is PERMISSION_DENIED before anything is sent, and the provider
    /// serves on.
    /// The process runs with the harness's denied networks, which leave loopback to the tests'
    /// stores ([`keyward_e2e::LOCAL_DENIED_NETWORKS`]).
    DeniedAddress,
    /// The provider's `/metrics` counts its calls to the store under upstream's
    /// `externalsecret_provider_api_calls_count`, successful ones among them (the suite's reads
    /// made some).
    StoreCalls,
}

impl Case {
    /// Every case, in the order [`run_all`] runs them.
    pub const ALL: [Case; 15] = [
        Case::Capabilities,
        Case::Validate,
        Case::Get,
        Case::GetMap,
        Case::NotFound,
        Case::Exists,
        Case::FindByName,
        Case::FindByPath,
        Case::Push,
        Case::Delete,
        Case::Traversal,
        Case::FindPathTraversal,
        Case::OversizedResponse,
        Case::DeniedAddress,
        Case::StoreCalls,
    ];
}

impl fmt::Display for Case {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Case::Get => "get",
            Case::GetMap => "get-map",
            Case::FindByName => "find-by-name",
            Case::FindByPath => "find-by-path",
            Case::Push => "push",
            Case::Delete => "delete",
            Case::Exists => "exists",
            Case::Validate => "validate",
            Case::Capabilities => "capabilities",
            Case::NotFound => "not-found",
            Case::Traversal => "traversal",
            Case::FindPathTraversal => "find-path-traversal",
            Case::OversizedResponse => "oversized-response",
            Case::DeniedAddress => "denied-address",
            Case::StoreCalls => "store-calls",
        })
    }
}

/// The hostile servers of [`Case::OversizedResponse`]: each answers every request with 300 MB.
pub struct Hostile {
    /// `http://127.0.0.1:<port>`.
    pub http_url: String,
    /// `https://127.0.0.1:<port>`, with a certificate for `127.0.0.1` signed by `ca_pem`.
    pub https_url: String,
    /// The CA of the HTTPS server (PEM).
    pub ca_pem: String,
}

/// How a target points its provider at a [`Hostile`] server.
pub enum Pointed {
    /// A configuration, served by the process under test, that names the server.
    Config(ProviderReference),
    /// Another provider process whose own settings name the server (an AWS endpoint, say), and
    /// the reference to call it with.
    Process(Box<RunningProvider>, ProviderReference),
}

/// A provider under test, with its real store.
///
/// Keys: the suite names values with short names (`get`, `find/a`); [`ConformanceTarget::key`]
/// turns them into the provider's remote keys, which the suite then uses for every call and for
/// [`ConformanceTarget::seed`] and [`ConformanceTarget::read`].
#[tonic::async_trait]
pub trait ConformanceTarget: Send + Sync {
    /// What the report calls the target ("Vault KV v2").
    fn name(&self) -> String;

    /// Starts the provider process, usually with [`super::launch`].
    async fn start(&self) -> Result<RunningProvider, TestkitError>;

    /// A working configuration, for every call of the suite.
    fn provider_ref(&self) -> ProviderReference;

    /// The namespace the suite's requests come from.
    fn source_namespace(&self) -> String;

    /// The remote key of a suite name: lowercase letters, digits and `-`, with at most one `/`
    /// between a folder and a name (`find/a`).
    fn key(&self, name: &str) -> String {
        name.to_string()
    }

    /// A `find.path` that selects `key("find/a")` and `key("find/b")` and nothing else the
    /// suite writes; `None` without [`Case::FindByPath`].
    fn find_path(&self) -> Option<String> {
        None
    }

    /// Writes a value with `properties` at `key`, straight into the store (not through the
    /// provider).
    async fn seed(&self, key: &str, properties: &Properties) -> Result<(), String>;

    /// The value at `key` as the store holds it, straight from the store; `None` when absent.
    async fn read(&self, key: &str) -> Result<Option<Properties>, String>;

    /// Whether [`ConformanceTarget::read`] sees what PushSecret wrote. False for a store whose
    /// pushed values live in the provider process itself (the Fake provider): pushes and
    /// deletes are then checked through the provider only.
    fn pushes_reach_store(&self) -> bool {
        true
    }

    /// What the provider claims to do.
    fn capabilities(&self) -> SecretStoreCapabilities;

    /// A configuration Validate must call invalid, and a part of the message it must give.
    async fn invalid_config(&self) -> Result<(ProviderReference, String), String>;

    /// Points the provider at `server` (for [`Case::OversizedResponse`] and
    /// [`Case::DeniedAddress`]).
    async fn point_at(&self, server: &Hostile) -> Result<Pointed, String> {
        let _ = server;
        Err(format!("{} cannot name another server; list Case::OversizedResponse in not_applicable", self.name()))
    }

    /// Cases that do not apply to this provider, with the reason. Push and Delete are left out
    /// for a read-only provider, and every read for a write-only one, without being listed.
    fn not_applicable(&self) -> Vec<(Case, &'static str)> {
        Vec::new()
    }
}

/// What [`run_all`] found.
#[derive(Debug, Default)]
pub struct Report {
    /// The target's name.
    pub target: String,
    /// Cases that passed.
    pub passed: Vec<Case>,
    /// Cases that did not apply, and why.
    pub skipped: Vec<(Case, String)>,
    /// What failed (a case, or the setup around the cases), and how.
    pub failed: Vec<(String, String)>,
    /// The last lines of the provider's log, when something failed.
    pub log_tail: String,
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "conformance of {}: {} passed, {} failed, {} not applicable",
            self.target,
            self.passed.len(),
            self.failed.len(),
            self.skipped.len()
        )?;
        for (what, why) in &self.failed {
            writeln!(f, "  FAILED {what}: {why}")?;
        }
        for case in &self.passed {
            writeln!(f, "  passed {case}")?;
        }
        for (case, why) in &self.skipped {
            writeln!(f, "  not applicable {case}: {why}")?;
        }
        if !self.log_tail.is_empty() {
            writeln!(f, "--- last lines of the provider's log:\n{}", self.log_tail)?;
        }
        Ok(())
    }
}

/// Runs every case that applies to `target` against a provider process it starts; `Err` is the
/// whole report when any case failed (or nothing could run).
pub async fn run_all<T: ConformanceTarget + ?Sized>(target: &T) -> Result<Report, String> {
    let mut report = Report { target: target.name(), ..Report::default() };
    let started = std::time::Instant::now();
    let running = target.start().await.map_err(|e| format!("{}: starting the provider: {e}", report.target))?;
    eprintln!("conformance of {}: the provider started in {:.1?}", report.target, started.elapsed());
    let mut run = Run {
        target,
        client: running.client.clone(),
        pref: target.provider_ref(),
        ns: target.source_namespace(),
        running,
    };
    let skipped = skipped_cases(target);
    let reads = !skipped.iter().any(|(c, _)| *c == Case::Get);
    let seeding = std::time::Instant::now();
    let seeded = seed_fixtures(&run, reads).await;
    eprintln!("conformance of {}: fixtures seeded in {:.1?}", report.target, seeding.elapsed());
    if let Err(e) = seeded {
        report.failed.push(("setup".into(), format!("seeding the fixtures: {e}")));
    } else {
        for case in Case::ALL {
            if let Some((_, why)) = skipped.iter().find(|(c, _)| *c == case) {
                report.skipped.push((case, why.clone()));
                continue;
            }
            let started = std::time::Instant::now();
            let outcome = tokio::time::timeout(CASE_TIMEOUT, run_case(&mut run, case)).await;
            // Shown with the test's output (on failure, or with --nocapture): where a run's time goes.
            eprintln!("conformance of {}: {case} took {:.1?}", report.target, started.elapsed());
            match outcome {
                Ok(Ok(())) => report.passed.push(case),
                Ok(Err(e)) => report.failed.push((case.to_string(), e)),
                Err(_) => report.failed.push((case.to_string(), format!("no answer within {CASE_TIMEOUT:?}"))),
            }
        }
    }
    if !run.running.child.is_running() {
        report.failed.push(("process".into(), "the provider process exited during the suite".into()));
    }
    if report.failed.is_empty() && !report.passed.is_empty() {
        return Ok(report);
    }
    let log = run.running.child.log();
    let lines: Vec<&str> = log.lines().collect();
    report.log_tail = lines[lines.len().saturating_sub(40)..].join("\n");
    Err(report.to_string())
}

/// How long one case may take (the oversized case makes up to eight calls to servers that flood).
const CASE_TIMEOUT: Duration = Duration::from_secs(180);

/// The values [`seed_fixtures`] writes: suite name and properties.
const GET: (&str, &[(&str, &str)]) = ("get", &[("user", "app"), ("password", "s3cret")]);
const FIND_A: (&str, &[(&str, &str)]) = ("find/a", &[("item", "a")]);
const FIND_B: (&str, &[(&str, &str)]) = ("find/b", &[("item", "b")]);
const TRAVERSED: (&str, &[(&str, &str)]) = ("traversed", &[("id", "seeded")]);
/// A regexp that matches `find/a` and `find/b` (as the target names them), and no other key.
const FIND_REGEXP: &str = "find.[ab]$";
/// What PushSecret is given as the source Secret's data.
const SOURCE: &[(&str, &str)] = &[("password", "p1"), ("user", "app")];

fn props(pairs: &[(&str, &str)]) -> Properties {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

fn skipped_cases<T: ConformanceTarget + ?Sized>(target: &T) -> Vec<(Case, String)> {
    let mut skipped: Vec<(Case, String)> =
        target.not_applicable().into_iter().map(|(c, why)| (c, why.to_string())).collect();
    let mut add = |case: Case, why: &str| {
        if !skipped.iter().any(|(c, _)| *c == case) {
            skipped.push((case, why.to_string()));
        }
    };
    match target.capabilities() {
        SecretStoreCapabilities::ReadOnly => {
            add(Case::Push, "the provider is read-only");
            add(Case::Delete, "the provider is read-only");
        }
        SecretStoreCapabilities::WriteOnly => {
            for case in [Case::Get, Case::GetMap, Case::FindByName, Case::FindByPath, Case::NotFound] {
                add(case, "the provider is write-only");
            }
        }
        SecretStoreCapabilities::ReadWrite => {}
    }
    if target.find_path().is_none() {
        add(Case::FindByPath, "the target names no find.path");
        add(Case::FindPathTraversal, "the target names no find.path");
    }
    skipped
}

/// Writes the fixtures into the store, then (when the provider reads) waits until it serves them:
/// a store, or the provider's cache of its configuration, may take a moment.
async fn seed_fixtures<T: ConformanceTarget + ?Sized>(run: &Run<'_, T>, reads: bool) -> Result<(), String> {
    for (name, pairs) in [GET, FIND_A, FIND_B, TRAVERSED] {
        let key = run.key(name);
        run.target.seed(&key, &props(pairs)).await.map_err(|e| format!("seed {key:?}: {e}"))?;
    }
    if !reads {
        return Ok(());
    }
    for (name, _) in [GET, FIND_A, FIND_B, TRAVERSED] {
        let key = run.key(name);
        let start = std::time::Instant::now();
        while let Err(e) = run.get(&key, "").await {
            if start.elapsed() > Duration::from_secs(15) {
                return Err(format!("the seeded {key:?} is not served within 15s: {}", show(&e)));
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    Ok(())
}

async fn run_case<T: ConformanceTarget + ?Sized>(run: &mut Run<'_, T>, case: Case) -> Result<(), String> {
    match case {
        Case::Get => get(run).await,
        Case::GetMap => get_map(run).await,
        Case::FindByName => find_by_name(run).await,
        Case::FindByPath => find_by_path(run).await,
        Case::Push => push(run).await,
        Case::Delete => delete(run).await,
        Case::Exists => exists(run).await,
        Case::Validate => validate(run).await,
        Case::Capabilities => capabilities(run).await,
        Case::NotFound => not_found(run).await,
        Case::Traversal => traversal(run).await,
        Case::FindPathTraversal => find_path_traversal(run).await,
        Case::OversizedResponse => oversized_response(run).await,
        Case::DeniedAddress => denied_address(run).await,
        Case::StoreCalls => store_calls(run).await,
    }
}

/// The provider under test, a client of it, and the request fields every call shares.
struct Run<'a, T: ?Sized> {
    target: &'a T,
    running: RunningProvider,
    client: SecretStoreProviderClient<Channel>,
    pref: ProviderReference,
    ns: String,
}

impl<T: ConformanceTarget + ?Sized> Run<'_, T> {
    fn key(&self, name: &str) -> String {
        self.target.key(name)
    }

    fn remote(key: &str, property: &str) -> Option<ExternalSecretDataRemoteRef> {
        Some(ExternalSecretDataRemoteRef { key: key.into(), property: property.into(), ..Default::default() })
    }

    fn push_ref(key: &str, property: &str) -> Option<PushSecretRemoteRef> {
        Some(PushSecretRemoteRef { remote_key: key.into(), property: property.into(), ..Default::default() })
    }

    async fn get(&self, key: &str, property: &str) -> Result<Vec<u8>, Status> {
        self.get_with(&self.client, &self.pref, key, property).await
    }

    async fn get_with(
        &self,
        client: &SecretStoreProviderClient<Channel>,
        pref: &ProviderReference,
        key: &str,
        property: &str,
    ) -> Result<Vec<u8>, Status> {
        let req = GetSecretRequest {
            remote_ref: Self::remote(key, property),
            provider_ref: Some(pref.clone()),
            source_namespace: self.ns.clone(),
            max_age_millis: 0,
        };
        Ok(client.clone().get_secret(req).await?.into_inner().value)
    }

    async fn get_map(&self, key: &str) -> Result<HashMap<String, Vec<u8>>, Status> {
        let req = GetSecretMapRequest {
            remote_ref: Self::remote(key, ""),
            provider_ref: Some(self.pref.clone()),
            source_namespace: self.ns.clone(),
            max_age_millis: 0,
        };
        Ok(self.client.clone().get_secret_map(req).await?.into_inner().secrets)
    }

    async fn find_with(
        &self,
        client: &SecretStoreProviderClient<Channel>,
        pref: &ProviderReference,
        regexp: &str,
        path: &str,
    ) -> Result<HashMap<String, Vec<u8>>, Status> {
        let req = GetAllSecretsRequest {
            provider_ref: Some(pref.clone()),
            find: Some(ExternalSecretFind {
                name: (!regexp.is_empty()).then(|| FindName { regexp: regexp.into() }),
                path: path.into(),
                ..Default::default()
            }),
            source_namespace: self.ns.clone(),
        };
        Ok(client.clone().get_all_secrets(req).await?.into_inner().secrets)
    }

    async fn find(&self, regexp: &str, path: &str) -> Result<HashMap<String, Vec<u8>>, Status> {
        self.find_with(&self.client, &self.pref, regexp, path).await
    }

    /// Pushes the source key `secret_key` of [`SOURCE`] to `key` (as `property`, if given).
    async fn push(&self, secret_key: &str, key: &str, property: &str) -> Result<(), Status> {
        let req = PushSecretRequest {
            provider_ref: Some(self.pref.clone()),
            secret_data: SOURCE.iter().map(|(k, v)| (k.to_string(), v.as_bytes().to_vec())).collect(),
            push_secret_data: Some(PushSecretData {
                secret_key: secret_key.into(),
                remote_key: key.into(),
                property: property.into(),
                ..Default::default()
            }),
            source_namespace: self.ns.clone(),
        };
        self.client.clone().push_secret(req).await.map(drop)
    }

    async fn exists(&self, key: &str, property: &str) -> Result<bool, Status> {
        let req = SecretExistsRequest {
            provider_ref: Some(self.pref.clone()),
            remote_ref: Self::push_ref(key, property),
            source_namespace: self.ns.clone(),
        };
        Ok(self.client.clone().secret_exists(req).await?.into_inner().exists)
    }

    async fn delete(&self, key: &str, property: &str) -> Result<(), Status> {
        let req = DeleteSecretRequest {
            provider_ref: Some(self.pref.clone()),
            remote_ref: Self::push_ref(key, property),
            source_namespace: self.ns.clone(),
        };
        self.client.clone().delete_secret(req).await.map(drop)
    }

    /// Checks that the store itself holds `want` at `key`.
    async fn stored(&self, key: &str, want: Option<&Properties>) -> Result<(), String> {
        let got = self.target.read(key).await.map_err(|e| format!("reading {key:?} from the store: {e}"))?;
        if got.as_ref() == want { Ok(()) } else { Err(format!("the store holds {got:?} at {key:?}, want {want:?}")) }
    }
}

/// A status as the report shows it.
fn show(e: &Status) -> String {
    format!("{:?}: {}", e.code(), e.message())
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A value that is a JSON object, as its properties (strings as they are, others as JSON).
fn json_properties(value: &[u8]) -> Result<Properties, String> {
    match serde_json::from_slice::<serde_json::Value>(value) {
        Ok(serde_json::Value::Object(map)) => Ok(map
            .into_iter()
            .map(|(k, v)| {
                let v = match v {
                    serde_json::Value::String(s) => s,
                    other => other.to_string(),
                };
                (k, v)
            })
            .collect()),
        _ => Err(format!("not a JSON object: {:?}", text(value))),
    }
}

fn map_properties(map: &HashMap<String, Vec<u8>>) -> Properties {
    map.iter().map(|(k, v)| (k.clone(), text(v))).collect()
}

fn expect_eq<V: PartialEq + fmt::Debug>(what: &str, got: &V, want: &V) -> Result<(), String> {
    if got == want { Ok(()) } else { Err(format!("{what}: got {got:?}, want {want:?}")) }
}

fn expect_code<V: fmt::Debug>(what: &str, got: Result<V, Status>, want: Code) -> Result<(), String> {
    match got {
        Err(e) if e.code() == want => Ok(()),
        Err(e) => Err(format!("{what}: got {}, want {want:?}", show(&e))),
        Ok(v) => Err(format!("{what}: answered {v:?}, want {want:?}")),
    }
}

async fn get<T: ConformanceTarget + ?Sized>(r: &mut Run<'_, T>) -> Result<(), String> {
    let key = r.key(GET.0);
    let whole = r.get(&key, "").await.map_err(|e| format!("GetSecret {key:?}: {}", show(&e)))?;
    let whole = json_properties(&whole).map_err(|e| format!("GetSecret {key:?} (the whole value): {e}"))?;
    expect_eq(&format!("GetSecret {key:?} (the whole value)"), &whole, &props(GET.1))?;
    let one =
        r.get(&key, "password").await.map_err(|e| format!("GetSecret {key:?} property password: {}", show(&e)))?;
    expect_eq(&format!("GetSecret {key:?} property password"), &text(&one), &"s3cret".to_string())
}

async fn get_map<T: ConformanceTarget + ?Sized>(r: &mut Run<'_, T>) -> Result<(), String> {
    let key = r.key(GET.0);
    let map = r.get_map(&key).await.map_err(|e| format!("GetSecretMap {key:?}: {}", show(&e)))?;
    expect_eq(&format!("GetSecretMap {key:?}"), &map_properties(&map), &props(GET.1))
}

/// What a find of `find/a` and `find/b` must answer: their keys, each with its value.
fn found_values(found: &HashMap<String, Vec<u8>>) -> BTreeMap<String, Result<Properties, String>> {
    found.iter().map(|(k, v)| (k.clone(), json_properties(v))).collect()
}

fn want_found<T: ConformanceTarget + ?Sized>(r: &Run<'_, T>) -> BTreeMap<String, Result<Properties, String>> {
    [FIND_A, FIND_B].iter().map(|(name, pairs)| (r.key(name), Ok(props(pairs)))).collect()
}

async fn find_by_name<T: ConformanceTarget + ?Sized>(r: &mut Run<'_, T>) -> Result<(), String> {
    let found =
        r.find(FIND_REGEXP, "").await.map_err(|e| format!("GetAllSecrets name {FIND_REGEXP:?}: {}", show(&e)))?;
    expect_eq(&format!("GetAllSecrets name {FIND_REGEXP:?}"), &found_values(&found), &want_found(r))
}

async fn find_by_path<T: ConformanceTarget + ?Sized>(r: &mut Run<'_, T>) -> Result<(), String> {
    let path = r.target.find_path().unwrap_or_default();
    let found = r.find("", &path).await.map_err(|e| format!("GetAllSecrets path {path:?}: {}", show(&e)))?;
    expect_eq(&format!("GetAllSecrets path {path:?}"), &found_values(&found), &want_found(r))
}

/// Pushes `password` as property `pw` and `user` as `user` to `key`.
async fn push_two<T: ConformanceTarget + ?Sized>(r: &Run<'_, T>, key: &str) -> Result<(), String> {
    for (secret_key, property) in [("password", "pw"), ("user", "user")] {
        r.push(secret_key, key, property)
            .await
            .map_err(|e| format!("PushSecret {secret_key} to {key:?} property {property}: {}", show(&e)))?;
    }
    Ok(())
}

async fn push<T: ConformanceTarget + ?Sized>(r: &mut Run<'_, T>) -> Result<(), String> {
    let key = r.key("pushed");
    push_two(r, &key).await?;
    let want = props(&[("pw", "p1"), ("user", "app")]);
    let pw =
        r.get(&key, "pw").await.map_err(|e| format!("GetSecret {key:?} property pw after the push: {}", show(&e)))?;
    expect_eq(&format!("GetSecret {key:?} property pw after the push"), &text(&pw), &"p1".to_string())?;
    let map = r.get_map(&key).await.map_err(|e| format!("GetSecretMap {key:?} after the push: {}", show(&e)))?;
    expect_eq(&format!("GetSecretMap {key:?} after pushing two properties"), &map_properties(&map), &want)?;
    if r.target.pushes_reach_store() {
        r.stored(&key, Some(&want)).await?;
    }
    Ok(())
}

async fn delete<T: ConformanceTarget + ?Sized>(r: &mut Run<'_, T>) -> Result<(), String> {
    let key = r.key("deleted");
    push_two(r, &key).await?;
    r.delete(&key, "pw").await.map_err(|e| format!("DeleteSecret {key:?} property pw: {}", show(&e)))?;
    let exists = r.exists(&key, "pw").await.map_err(|e| format!("SecretExists {key:?} property pw: {}", show(&e)))?;
    expect_eq(&format!("SecretExists {key:?} property pw after deleting it"), &exists, &false)?;
    let map = r.get_map(&key).await.map_err(|e| format!("GetSecretMap {key:?} after deleting pw: {}", show(&e)))?;
    expect_eq(&format!("GetSecretMap {key:?} after deleting pw"), &map_properties(&map), &props(&[("user", "app")]))?;

    r.delete(&key, "").await.map_err(|e| format!("DeleteSecret {key:?}: {}", show(&e)))?;
    expect_code(
        &format!("GetSecret {key:?} after DeleteSecret"),
        r.get(&key, "").await.map(|v| text(&v)),
        Code::NotFound,
    )?;
    let exists = r.exists(&key, "").await.map_err(|e| format!("SecretExists {key:?}: {}", show(&e)))?;
    expect_eq(&format!("SecretExists {key:?} after DeleteSecret"), &exists, &false)?;
    if r.target.pushes_reach_store() {
        r.stored(&key, None).await?;
    }
    r.delete(&key, "")
        .await
        .map_err(|e| format!("DeleteSecret {key:?} again (deleting what is gone succeeds): {}", show(&e)))
}

async fn exists<T: ConformanceTarget + ?Sized>(r: &mut Run<'_, T>) -> Result<(), String> {
    let (key, missing) = (r.key(GET.0), r.key("missing"));
    for (k, property, want) in [(&key, "", true), (&key, "user", true), (&key, "nope", false), (&missing, "", false)] {
        let what = format!("SecretExists {k:?} property {property:?}");
        let got = r.exists(k, property).await.map_err(|e| format!("{what}: {}", show(&e)))?;
        expect_eq(&what, &got, &want)?;
    }
    Ok(())
}

async fn validate<T: ConformanceTarget + ?Sized>(r: &mut Run<'_, T>) -> Result<(), String> {
    let call = |pref: ProviderReference| {
        let mut client = r.client.clone();
        let req = ValidateRequest { provider_ref: Some(pref), source_namespace: r.ns.clone(), max_age_millis: 0 };
        async move { client.validate(req).await.map(tonic::Response::into_inner) }
    };
    let good =
        call(r.pref.clone()).await.map_err(|e| format!("Validate of the working configuration: {}", show(&e)))?;
    if !good.valid || !good.error.is_empty() {
        return Err(format!("Validate of the working configuration: {good:?}, want valid"));
    }
    let (bad, want) = r.target.invalid_config().await.map_err(|e| format!("writing the invalid configuration: {e}"))?;
    let got = call(bad).await.map_err(|e| format!("Validate of the invalid configuration: {}", show(&e)))?;
    if got.valid || !got.error.contains(&want) {
        return Err(format!(
            "Validate of the invalid configuration: {got:?}, want invalid with an error containing {want:?}"
        ));
    }
    Ok(())
}

async fn capabilities<T: ConformanceTarget + ?Sized>(r: &mut Run<'_, T>) -> Result<(), String> {
    let req = CapabilitiesRequest { provider_ref: Some(r.pref.clone()), source_namespace: r.ns.clone() };
    let got = r.client.clone().capabilities(req).await.map_err(|e| format!("Capabilities: {}", show(&e)))?;
    let want = r.target.capabilities();
    expect_eq("Capabilities", &got.into_inner().capabilities(), &want)
}

async fn not_found<T: ConformanceTarget + ?Sized>(r: &mut Run<'_, T>) -> Result<(), String> {
    let (key, missing) = (r.key(GET.0), r.key("missing"));
    expect_code(&format!("GetSecret {missing:?}"), r.get(&missing, "").await.map(|v| text(&v)), Code::NotFound)?;
    expect_code(
        &format!("GetSecret {key:?} property nope"),
        r.get(&key, "nope").await.map(|v| text(&v)),
        Code::NotFound,
    )?;
    expect_code(&format!("GetSecretMap {missing:?}"), r.get_map(&missing).await, Code::NotFound)
}

/// Keys that name `target` (a seeded key) once `..`, a query or a fragment is resolved: a
/// provider that passed them on would read or overwrite it.
fn escapes(target: &str) -> Vec<String> {
    vec![
        format!("x/../{target}"),
        format!("x/%2e%2e/{target}"),
        format!("x/%2E%2e/{target}"),
        format!("x%2f%2e%2e%2f{target}"),
        format!("../{target}"),
        format!("{target}?x=1"),
        format!("{target}#x"),
    ]
}

async fn traversal<T: ConformanceTarget + ?Sized>(r: &mut Run<'_, T>) -> Result<(), String> {
    let seeded = r.key(TRAVERSED.0);
    let mut wrong = Vec::new();
    for key in escapes(&seeded) {
        let outcomes: [(&str, Result<String, Status>); 5] = [
            ("GetSecret", r.get(&key, "").await.map(|v| text(&v))),
            ("GetSecretMap", r.get_map(&key).await.map(|m| format!("{:?}", map_properties(&m)))),
            ("PushSecret", r.push("password", &key, "").await.map(|()| "pushed".into())),
            ("SecretExists", r.exists(&key, "").await.map(|e| format!("exists: {e}"))),
            ("DeleteSecret", r.delete(&key, "").await.map(|()| "deleted".into())),
        ];
        for (rpc, outcome) in outcomes {
            if let Err(e) = expect_code(&format!("{rpc} {key:?}"), outcome, Code::InvalidArgument) {
                wrong.push(e);
            }
        }
    }
    // The store still holds what was seeded: nothing was overwritten or deleted through an escape.
    if let Err(e) = r.stored(&seeded, Some(&props(TRAVERSED.1))).await {
        wrong.push(e);
    }
    if wrong.is_empty() { Ok(()) } else { Err(format!("{} not refused:\n    {}", wrong.len(), wrong.join("\n    "))) }
}

async fn find_path_traversal<T: ConformanceTarget + ?Sized>(r: &mut Run<'_, T>) -> Result<(), String> {
    let path = r.target.find_path().unwrap_or_default();
    let mut wrong = Vec::new();
    for path in [format!("../{path}"), format!("%2e%2e/{path}"), format!("x/../../{path}")] {
        let got = r.find("", &path).await;
        if let Err(e) = expect_code(&format!("GetAllSecrets path {path:?}"), got, Code::InvalidArgument) {
            wrong.push(e);
        }
    }
    if wrong.is_empty() { Ok(()) } else { Err(format!("{} not refused:\n    {}", wrong.len(), wrong.join("\n    "))) }
}

/// A flooding server over HTTP and one over HTTPS (with its CA), declared or chunked.
async fn hostile(declared: bool) -> Result<(Hostile, [FloodingServer; 2]), String> {
    let hour = Duration::from_secs(3600);
    let ca = CertificateAuthority::generate("keyward-flood-ca", hour).map_err(|e| format!("flood CA: {e}"))?;
    let leaf = ca.issue(&["127.0.0.1"], Usage::Server, hour).map_err(|e| format!("flood certificate: {e}"))?;
    let http = FloodingServer::start(declared, None).await;
    let https = FloodingServer::start(declared, Some((&leaf.cert_pem, &leaf.key_pem))).await;
    let urls = Hostile { http_url: http.url.clone(), https_url: https.url.clone(), ca_pem: ca.cert_pem().to_string() };
    Ok((urls, [http, https]))
}

/// Calls made to each hostile server pair; each may get a few MiB out before the provider stops
/// reading (its cap plus what socket buffers took).
const FLOOD_CALLS: u64 = 3;
/// The provider's peak memory must stay far below what the servers offered (300 MB).
const PEAK_RSS_KIB: u64 = 100 * 1024;

async fn oversized_response<T: ConformanceTarget + ?Sized>(r: &mut Run<'_, T>) -> Result<(), String> {
    let cap = BodyError::TooLarge(MAX_RESPONSE_BYTES).to_string();
    let key = r.key(GET.0);
    let find = !skipped_cases(r.target).iter().any(|(c, _)| *c == Case::FindByName);
    for declared in [true, false] {
        let mode = if declared { "declared" } else { "chunked" };
        let (urls, servers) = hostile(declared).await?;
        let pointed = r.target.point_at(&urls).await.map_err(|e| format!("pointing at a hostile server: {e}"))?;
        let (client, pref, mut process) = match pointed {
            Pointed::Config(pref) => (r.client.clone(), pref, None),
            Pointed::Process(p, pref) => (p.client.clone(), pref, Some(p)),
        };
        let mut calls = 0;
        for _ in 0..FLOOD_CALLS {
            calls += 1;
            let got = r.get_with(&client, &pref, &key, "user").await.map(|v| text(&v));
            refused_by_cap(&format!("GetSecret {key:?} from a server flooding {mode}"), got, &cap)?;
        }
        if find {
            calls += 1;
            let got = r.find_with(&client, &pref, ".", "").await;
            refused_by_cap(&format!("GetAllSecrets from a server flooding {mode}"), got, &cap)?;
        }
        let sent: u64 = servers.iter().map(FloodingServer::sent).sum();
        if sent >= calls * 32 * 1024 * 1024 {
            return Err(format!(
                "{calls} calls to a server flooding {mode} read {sent} bytes: the answers were not cut off"
            ));
        }
        let child = match process.as_mut() {
            Some(p) => &mut p.child,
            None => &mut r.running.child,
        };
        if !child.is_running() {
            return Err(format!("the provider exited after a server flooding {mode}"));
        }
        let peak = peak_rss_kib(child.pid());
        if peak >= PEAK_RSS_KIB {
            return Err(format!("the provider's peak RSS was {peak} KiB after a server flooding {mode}"));
        }
    }
    // The provider serves on.
    let user = r.get(&key, "user").await.map_err(|e| format!("GetSecret {key:?} after the floods: {}", show(&e)))?;
    expect_eq(&format!("GetSecret {key:?} property user after the floods"), &text(&user), &"app".to_string())
}

fn refused_by_cap<V: fmt::Debug>(what: &str, got: Result<V, Status>, cap: &str) -> Result<(), String> {
    match got {
        Err(e) if e.code() == Code::Unavailable && e.message().contains(cap) => Ok(()),
        Err(e) => Err(format!("{what}: got {}, want Unavailable saying {cap:?}", show(&e))),
        Ok(v) => Err(format!("{what}: answered {v:?}, want Unavailable saying {cap:?}")),
    }
}

/// Addresses every provider refuses to a tenant: the metadata services (most clouds', AWS's IPv6
/// one and EKS Pod Identity's, Alibaba Cloud's, Azure's WireServer), and IPv6 forms of denied
/// IPv4 addresses (IPv4-compatible, IPv4-mapped, NAT64 well-known and local-use). Nothing
/// listens there in a test; a refusal must come before any connection.
const DENIED_HOSTS: [&str; 10] = [
    "169.254.169.254",
    "[fd00:ec2::254]",
    "[fd00:ec2::23]",
    "100.100.100.200",
    "168.63.129.16",
    "[::a9fe:a9fe]",
    "[::ffff:100.100.100.200]",
    "[64:ff9b::a9fe:a9fe]",
    "[64:ff9b::168.63.129.16]",
    "[64:ff9b:1::a9fe:a9fe]",
];

/// [`DENIED_HOSTS`], and an address of this host other than loopback, where the provider's
/// health and metrics server listens too (a host with loopback alone has none to try).
fn denied_hosts() -> Vec<String> {
    let own = crate::netguard::an_own_address().map(|ip| match ip {
        std::net::IpAddr::V4(v4) => v4.to_string(),
        std::net::IpAddr::V6(v6) => format!("[{v6}]"),
    });
    if own.is_none() {
        eprintln!("denied-address: this host has no address but loopback; the provider's own address is not tried");
    }
    DENIED_HOSTS.iter().map(|h| h.to_string()).chain(own).collect()
}

async fn denied_address<T: ConformanceTarget + ?Sized>(r: &mut Run<'_, T>) -> Result<(), String> {
    let key = r.key(GET.0);
    let hour = Duration::from_secs(3600);
    let ca = CertificateAuthority::generate("keyward-denied-ca", hour).map_err(|e| format!("CA: {e}"))?;
    for (i, host) in denied_hosts().iter().enumerate() {
        // Distinct ports give the targets' configurations distinct names.
        let urls = Hostile {
            http_url: format!("http://{host}:{}", 81 + i),
            https_url: format!("https://{host}:{}", 444 + i),
            ca_pem: ca.cert_pem().to_string(),
        };
        let pref = match r.target.point_at(&urls).await.map_err(|e| format!("pointing at {host}: {e}"))? {
            Pointed::Config(pref) => pref,
            Pointed::Process(..) => {
                return Err("the target names servers in the process's settings, which are the operator's: list \
                            Case::DeniedAddress in not_applicable"
                    .into());
            }
        };
        let got = r.get_with(&r.client.clone(), &pref, &key, "user").await.map(|v| text(&v));
        match got {
            Err(e) if e.code() == Code::PermissionDenied && e.message().contains("denied network") => {}
            Err(e) => {
                return Err(format!(
                    "GetSecret through a configuration naming {host}: got {}, want PermissionDenied saying \"denied network\"",
                    show(&e)
                ));
            }
            Ok(v) => return Err(format!("GetSecret through a configuration naming {host}: answered {v:?}")),
        }
    }
    let user = r.get(&key, "user").await.map_err(|e| format!("GetSecret {key:?} after the refusals: {}", show(&e)))?;
    expect_eq(&format!("GetSecret {key:?} property user after the refusals"), &text(&user), &"app".to_string())
}

async fn store_calls<T: ConformanceTarget + ?Sized>(r: &mut Run<'_, T>) -> Result<(), String> {
    let metric = crate::store_calls::METRIC;
    let (status, text) = http_get(r.running.health, "/metrics").await.map_err(|e| format!("GET /metrics: {e}"))?;
    if status != 200 {
        return Err(format!("GET /metrics answered {status}"));
    }
    let successes: f64 = text
        .lines()
        .filter(|l| l.starts_with(&format!("{metric}{{")) && l.contains(r#"status="success""#))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum();
    if successes < 1.0 {
        return Err(format!("/metrics counts no successful store call as {metric}:\n{text}"));
    }
    Ok(())
}
