//! The operations of the Barbican provider (`keyward_provider_runtime::Provider`): read-only,
//! as upstream's. A remote key is a Barbican secret's ID (the last segment of its secret
//! reference); its payload is the value.

use std::collections::HashSet;
use std::sync::Arc;

use keyward_proto::v1::{
    ExternalSecretDataRemoteRef, ExternalSecretFind, PushSecretData, PushSecretRemoteRef, SecretStoreCapabilities,
};
use keyward_provider_runtime::json::find_regex;
use keyward_provider_runtime::refs::{CacheKey, ClientCache, ClusterRefs};
use keyward_provider_runtime::{Provider, ProviderError, RequestContext, SecretMap, body, keys};
use serde_json::Value;

use crate::api::{Barbican, BarbicanSpec, KIND, PASSWORD_FIELD, USERNAME_FIELD};
use crate::keystone::{Credentials, Http, TokenCache, error_text, identity_v3};
use crate::payload;
use keyward_provider_runtime::netguard::DeniedNetworks;

/// Secrets listed per page of `GET /v1/secrets`.
const PAGE: usize = 100;
/// Most secrets a find looks through (pages of [`PAGE`]).
const MAX_LISTED: usize = 10_000;
/// Most secrets a find reads, each by its own request. A listing is Barbican's to write, and one
/// page can name far more secrets than [`PAGE`] (or one secret many times); beyond this a find
/// is refused rather than cut short.
const MAX_FOUND: usize = MAX_LISTED;

/// The Barbican provider.
pub struct BarbicanProvider {
    refs: ClusterRefs,
    /// For tenants' configurations: reaches only what the tenant denied networks allow.
    tenant_http: Http,
    /// For the operator's configurations: reaches any address.
    operator_http: Http,
    /// Credentials read from a configuration's Secrets, per configuration, generation and owner,
    /// until those Secrets change ([`keyward_provider_runtime::client_cache`]).
    credentials: ClientCache<Arc<Credentials>>,
    tokens: Arc<TokenCache>,
}

/// What a request reached: the configuration and the credentials it logs in with.
struct Target {
    spec: BarbicanSpec,
    http: Http,
    creds: Arc<Credentials>,
    key: CacheKey,
    what: String,
}

/// A secret ID as a path segment: exactly one segment that the runtime's key rule accepts, so
/// `../x`, `a/b` or an encoded dot-dot never address another API path.
pub fn secret_id(key: &str) -> Result<&str, ProviderError> {
    match keys::segments(key)?.as_slice() {
        [one] if *one == key => Ok(one),
        [] => Err(ProviderError::InvalidArgument("remote key is empty: name a Barbican secret ID".into())),
        _ => Err(ProviderError::InvalidArgument(format!(
            "remote key {key:?} is not a Barbican secret ID (one path segment, no /)"
        ))),
    }
}

/// The provider's error for Barbican's answer `status` to `what`.
fn map_status(status: u16, body: &[u8], server: &str, what: &str) -> ProviderError {
    let msg = format!("{server} answered {status} to {what}: {}", error_text(body));
    match status {
        404 => ProviderError::NoSecret(msg),
        400 | 406 | 415 => ProviderError::InvalidArgument(msg),
        401 => ProviderError::Unauthenticated(msg),
        403 => ProviderError::PermissionDenied(msg),
        429 | 500..=599 => ProviderError::Unavailable(msg),
        _ => ProviderError::Internal(msg),
    }
}

impl BarbicanProvider {
    /// A provider reading configurations and Secrets with `client`; tenants' configurations
    /// may not reach `tenant_denied`.
    ///
    /// # Errors
    /// When the HTTP client cannot be built.
    pub fn new(client: kube::Client, tenant_denied: DeniedNetworks) -> Result<Self, ProviderError> {
        Ok(BarbicanProvider {
            refs: ClusterRefs::new(client),
            tenant_http: Http::new(tenant_denied)?,
            operator_http: Http::new(DeniedNetworks::none())?,
            credentials: ClientCache::default(),
            tokens: Arc::default(),
        })
    }

    /// The token cache (how many Keystone logins the process made).
    pub fn tokens(&self) -> &TokenCache {
        &self.tokens
    }

    async fn target(&self, ctx: &RequestContext) -> Result<Target, ProviderError> {
        // The configuration object or the store's spec.provider.barbican, its rules and its
        // tenant boundary checked.
        let config = self.refs.resolve_spec::<Barbican>(ctx, &KIND).await?;
        let key = CacheKey::of(ctx, config.generation);
        let spec = config.spec;
        let creds = self.credentials.get_or_build(&key, async { self.read_credentials(ctx, &spec).await }).await?;
        let http = if key.operator { self.operator_http.clone() } else { self.tenant_http.clone() };
        Ok(Target { spec, http, creds, key, what: config.what })
    }

    /// The user name and password, read in the namespace the tenant boundary allows.
    async fn read_credentials(
        &self,
        ctx: &RequestContext,
        spec: &BarbicanSpec,
    ) -> Result<Arc<Credentials>, ProviderError> {
        let text = |field: &str, bytes: Vec<u8>| {
            String::from_utf8(bytes)
                .map_err(|_| ProviderError::BadConfig(format!("{field}: the Secret's value is not UTF-8")))
        };
        let user = match &spec.auth.username.secret_ref {
            Some(sel) if spec.auth.username.value.is_empty() => {
                text(USERNAME_FIELD, self.refs.selected_secret_key(ctx, USERNAME_FIELD, sel, "").await?)?
            }
            _ => spec.auth.username.value.clone(),
        };
        let sel = spec
            .auth
            .password
            .secret_ref
            .as_ref()
            .ok_or_else(|| ProviderError::BadConfig(format!("{PASSWORD_FIELD}: is required")))?;
        let password = text(PASSWORD_FIELD, self.refs.selected_secret_key(ctx, PASSWORD_FIELD, sel, "").await?)?;
        Ok(Arc::new(Credentials {
            identity: identity_v3(&spec.auth_url),
            domain: spec.domain_name.clone(),
            project: spec.tenant_name.clone(),
            user,
            password,
        }))
    }

    /// `GET <barbican>/v1/<path>` with the configuration's token; a token Barbican refuses is
    /// dropped and the request sent once more after a new login. Returns the status, the body
    /// and the server's name.
    async fn get(&self, t: &Target, path: &str, accept: &str) -> Result<(u16, Vec<u8>, String), ProviderError> {
        let mut retried = false;
        loop {
            let token = self
                .tokens
                .token(&t.http, &t.creds)
                .await
                .map_err(|e| self.credentials.evict_if_refused(&t.key, e))
                .map_err(|e| with_config(e, &t.what))?;
            let base = token.barbican_url(&t.spec.region).map_err(|e| with_config(e, &t.what))?;
            let server = format!("Barbican at {base}");
            let req = t
                .http
                .request(reqwest::Method::GET, format!("{base}/v1/{path}"))
                .header("X-Auth-Token", &token.value)
                .header("Accept", accept);
            let call = if path.starts_with("secrets?") { "ListSecrets" } else { "GetSecret" };
            let (status, _, body) = t.http.send(req, &server, call).await?;
            if status == 401 && !retried {
                self.tokens.forget(&t.creds, &token).await;
                retried = true;
                continue;
            }
            return Ok((status, body, server));
        }
    }

    /// The payload of the secret `id`.
    async fn payload(&self, t: &Target, id: &str) -> Result<Vec<u8>, ProviderError> {
        let path = format!("secrets/{}/payload", keys::url_path([id]));
        let (status, body, server) = self.get(t, &path, "*/*").await?;
        if status == 200 {
            Ok(body)
        } else {
            Err(map_status(status, &body, &server, &format!("reading the payload of secret {id}")))
        }
    }

    /// The payload of `remote_ref.key`, or its `property` ([`payload::property`]).
    async fn read(&self, ctx: &RequestContext, r: &ExternalSecretDataRemoteRef) -> Result<Vec<u8>, ProviderError> {
        let id = secret_id(&r.key)?;
        let t = self.target(ctx).await?;
        let value = self.payload(&t, id).await?;
        if r.property.is_empty() {
            return Ok(value);
        }
        let (property, what) = (r.property.clone(), format!("secret {id}"));
        keyward_provider_runtime::body::off_thread(move || payload::property(&value, &property, &what)).await
    }
}

/// The secret IDs a find reads: each once, in the order listed, at most [`MAX_FOUND`].
#[derive(Default)]
struct FoundIds {
    ids: Vec<String>,
    seen: HashSet<String>,
}

impl FoundIds {
    /// Adds the IDs of the listed `secrets` whose names match `name`.
    fn add_matching(&mut self, secrets: &[Value], name: &regex::Regex) -> Result<(), ProviderError> {
        for s in secrets {
            if !name.is_match(s["name"].as_str().unwrap_or_default()) {
                continue;
            }
            let reference = s["secret_ref"].as_str().unwrap_or_default();
            let id = reference.rsplit('/').next().unwrap_or_default();
            // The listing is the server's to write: an ID that is not one segment is skipped.
            if !id.is_empty() && secret_id(id).is_ok() {
                self.add(id, name)?;
            }
        }
        Ok(())
    }

    fn add(&mut self, id: &str, name: &regex::Regex) -> Result<(), ProviderError> {
        if self.seen.contains(id) {
            return Ok(());
        }
        if self.ids.len() >= MAX_FOUND {
            return Err(ProviderError::InvalidArgument(format!(
                "the secrets whose names match {:?} are more than {MAX_FOUND}, more than one find reads; narrow \
                 find.name.regexp",
                name.as_str()
            )));
        }
        self.seen.insert(id.to_string());
        self.ids.push(id.to_string());
        Ok(())
    }
}

/// A configuration error names the configuration.
fn with_config(e: ProviderError, what: &str) -> ProviderError {
    match e {
        ProviderError::BadConfig(m) => ProviderError::BadConfig(format!("{what}: {m}")),
        other => other,
    }
}

fn read_only(what: &str) -> ProviderError {
    ProviderError::Unsupported(format!("the Barbican provider is read-only, as upstream's: it does not {what}"))
}

#[tonic::async_trait]
impl Provider for BarbicanProvider {
    async fn get_secret(
        &self,
        ctx: &RequestContext,
        remote_ref: &ExternalSecretDataRemoteRef,
    ) -> Result<Vec<u8>, ProviderError> {
        self.read(ctx, remote_ref).await
    }

    async fn get_secret_map(
        &self,
        ctx: &RequestContext,
        remote_ref: &ExternalSecretDataRemoteRef,
    ) -> Result<SecretMap, ProviderError> {
        // As upstream: the value (or its property) read as GetSecret does, then its members.
        let value = self.read(ctx, remote_ref).await?;
        let what = format!("secret {}", remote_ref.key);
        keyward_provider_runtime::body::off_thread(move || payload::map(&value, &what)).await
    }

    async fn get_all_secrets(
        &self,
        ctx: &RequestContext,
        find: &ExternalSecretFind,
    ) -> Result<SecretMap, ProviderError> {
        if !find.path.is_empty() {
            return Err(ProviderError::InvalidArgument(
                "find.path: Barbican secrets have no paths; find them by find.name.regexp".into(),
            ));
        }
        if !find.tags.is_empty() {
            return Err(ProviderError::InvalidArgument(
                "find.tags: the Barbican provider finds secrets by find.name.regexp only, as upstream's".into(),
            ));
        }
        let Some(name) = find_regex(find)? else {
            return Err(ProviderError::InvalidArgument("find.name.regexp is required by the Barbican provider".into()));
        };
        let t = self.target(ctx).await?;
        // Barbican filters by exact name only: list every secret of the project, match here.
        let mut found = FoundIds::default();
        let mut offset = 0;
        while offset < MAX_LISTED {
            let (status, body, server) =
                self.get(&t, &format!("secrets?limit={PAGE}&offset={offset}"), "application/json").await?;
            if status != 200 {
                return Err(map_status(status, &body, &server, "listing secrets"));
            }
            let page: Value = serde_json::from_slice(&body).map_err(|e| {
                ProviderError::Unavailable(format!("{server} answered the secret list with no JSON: {e}"))
            })?;
            let secrets = page["secrets"].as_array().map(Vec::as_slice).unwrap_or_default();
            found.add_matching(secrets, &name)?;
            offset += secrets.len();
            let total = page["total"].as_u64().and_then(|n| usize::try_from(n).ok()).unwrap_or(0);
            if secrets.is_empty() || offset >= total {
                break;
            }
        }
        let mut out = body::FindAnswer::new(
            format!("the secrets whose names match {:?}", name.as_str()),
            "narrow find.name.regexp",
        );
        for id in found.ids {
            let value = self.payload(&t, &id).await?;
            out.keep(id, value)?;
        }
        Ok(out.into_secrets())
    }

    // Unsupported, as upstream's; a key that is no secret ID is refused as such first, as by
    // every provider.
    async fn push_secret(&self, _: &RequestContext, _: &SecretMap, data: &PushSecretData) -> Result<(), ProviderError> {
        secret_id(&data.remote_key)?;
        Err(read_only("push secrets"))
    }

    async fn delete_secret(&self, _: &RequestContext, remote_ref: &PushSecretRemoteRef) -> Result<(), ProviderError> {
        secret_id(&remote_ref.remote_key)?;
        Err(read_only("delete secrets (deletionPolicy Delete)"))
    }

    async fn secret_exists(&self, _: &RequestContext, remote_ref: &PushSecretRemoteRef) -> Result<bool, ProviderError> {
        secret_id(&remote_ref.remote_key)?;
        Err(read_only("check whether secrets exist"))
    }

    async fn validate(&self, ctx: &RequestContext) -> Result<Vec<String>, ProviderError> {
        // The configuration and its Secrets, a Keystone login with a catalog that names Barbican,
        // and one page of the project's secrets.
        let t = self.target(ctx).await?;
        let (status, body, server) = self.get(&t, "secrets?limit=1", "application/json").await?;
        if status == 200 { Ok(Vec::new()) } else { Err(map_status(status, &body, &server, "listing secrets")) }
    }

    async fn object(&self, ctx: &RequestContext) -> keyward_provider_runtime::Generation {
        self.refs.generation_of::<Barbican>(ctx).await
    }

    fn capabilities(&self) -> SecretStoreCapabilities {
        SecretStoreCapabilities::ReadOnly
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_ids_are_one_segment() {
        assert_eq!(
            secret_id("06fa5433-f87f-4805-bfc7-877a38608074").expect("uuid"),
            "06fa5433-f87f-4805-bfc7-877a38608074"
        );
        for bad in ["", "a/b", "../x", "..", "%2e%2e", "/a", "a/", "x?y=1/.."] {
            let e = secret_id(bad).expect_err(bad);
            assert_eq!(e.code(), tonic::Code::InvalidArgument, "{bad}: {e}");
        }
    }

    #[test]
    fn statuses() {
        assert!(
            map_status(404, b"{\"description\":\"Not Found. Provided secret id is invalid.\"}", "B", "x")
                .is_not_found()
        );
        assert_eq!(map_status(403, b"", "B", "x").code(), tonic::Code::PermissionDenied);
        assert_eq!(map_status(503, b"", "B", "x").code(), tonic::Code::Unavailable);
        assert!(map_status(404, b"{\"description\":\"gone\"}", "B", "x").to_string().contains("gone"));
    }

    #[test]
    fn a_find_reads_each_listed_id_once_and_at_most_max_found() {
        let name = regex::Regex::new("^db-").expect("regex");
        let listed =
            |id: &str, n: &str| serde_json::json!({"name": n, "secret_ref": format!("http://b/v1/secrets/{id}")});
        // One page naming one secret 100k times, as a hostile listing can.
        let page = vec![listed("a", "db-a"); 100_000];
        let mut found = FoundIds::default();
        found.add_matching(&page, &name).expect("one ID");
        found.add_matching(&[listed("b", "db-b"), listed("c", "web"), listed("%2e%2e", "db-x")], &name).expect("two");
        assert_eq!(found.ids, ["a", "b"]);
        let many: Vec<Value> = (0..MAX_FOUND).map(|n| listed(&format!("id{n}"), "db-n")).collect();
        let e = found.add_matching(&many, &name).expect_err("more than MAX_FOUND");
        assert_eq!(e.code(), tonic::Code::InvalidArgument);
        assert!(e.to_string().contains("more than 10000") && e.to_string().contains("narrow find.name.regexp"), "{e}");
        let mut found = FoundIds::default();
        found.add_matching(&many, &name).expect("MAX_FOUND exactly");
        assert_eq!(found.ids.len(), MAX_FOUND);
    }
}
