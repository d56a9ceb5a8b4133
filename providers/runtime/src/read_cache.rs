//! One store call for identical reads: GetSecret and GetSecretMap requests with the same
//! reference, source namespace and remote ref share a call while it is in flight, and share its
//! answer afterwards for as long as each caller says it accepts (`max_age_millis`).
//!
//! Stores bill per call, and fifty ExternalSecrets reading one key through one store, or fifty
//! refreshed together, would otherwise make fifty calls. The key holds everything that decides
//! the answer and whose credentials obtain it (the whole ProviderReference with its
//! authentication scope, the source namespace, the remote ref), so an answer obtained with one
//! tenant's configuration is never given to a request through another's.
//!
//! - A request waits for an identical one in flight and takes its answer (success or error):
//!   that answer was read after it arrived, so it is as fresh as its own call would have been.
//! - Otherwise a successful answer younger than the request's `max_age` is returned from
//!   memory; `max_age` 0 (every caller that does not say) always reads.
//! - Errors are shared only with requests that waited for them, never kept for later ones.
//! - Providers use the same cache for their raw reads ([`ReadCache::read`]): the value of one
//!   key read once for every property and form asked of it.
//! - Answers are kept within a byte budget ([`MAX_CACHED_BYTES`]) and for at most
//!   [`MAX_AGE`]; past the budget an answer is still shared with its waiters but not kept.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use keyward_proto::ProviderError;
use keyward_proto::v1::ExternalSecretDataRemoteRef;

use crate::context::RequestContext;

/// The longest a kept answer is served, whatever a caller accepts.
pub const MAX_AGE: Duration = Duration::from_secs(600);

/// Bytes of kept answers, all keys together.
pub const MAX_CACHED_BYTES: usize = 32 * 1024 * 1024;

/// Kept entries beyond which each new read first sweeps out expired ones.
const SWEEP_AT: usize = 1024;

/// A read, as far as it decides the answer and the credentials it is read with.
#[derive(Clone, Debug, Hash, PartialEq, Eq)]
pub struct ReadKey {
    operation: &'static str,
    api_version: String,
    kind: String,
    name: String,
    namespace: String,
    store_ref_kind: &'static str,
    authentication_scope: Option<keyward_crds::AuthenticationScope>,
    source_namespace: String,
    key: String,
    version: String,
    property: String,
    decoding_strategy: String,
    metadata_policy: String,
}

impl ReadKey {
    /// The key of `operation` (`GetSecret`, `GetSecretMap`) for `ctx` and `remote`.
    pub fn new(operation: &'static str, ctx: &RequestContext, remote: &ExternalSecretDataRemoteRef) -> Self {
        ReadKey {
            operation,
            api_version: ctx.api_version.clone(),
            kind: ctx.kind.clone(),
            name: ctx.name.clone(),
            namespace: ctx.namespace.clone(),
            store_ref_kind: ctx.store_ref_kind.as_str(),
            authentication_scope: ctx.authentication_scope,
            source_namespace: ctx.source_namespace.clone(),
            key: remote.key.clone(),
            version: remote.version.clone(),
            property: remote.property.clone(),
            decoding_strategy: remote.decoding_strategy.clone(),
            metadata_policy: remote.metadata_policy.clone(),
        }
    }
}

/// How many bytes an answer holds.
pub trait Weighed {
    /// The answer's size in bytes (values and keys).
    fn weight(&self) -> usize;
}

impl Weighed for Vec<u8> {
    fn weight(&self) -> usize {
        self.len()
    }
}

impl Weighed for HashMap<String, Vec<u8>> {
    fn weight(&self) -> usize {
        self.iter().map(|(k, v)| k.len() + v.len()).sum()
    }
}

impl Weighed for serde_json::Map<String, serde_json::Value> {
    fn weight(&self) -> usize {
        // Its JSON text: close to what it holds, and only counted once per kept answer.
        serde_json::to_vec(self).map_or(usize::MAX, |v| v.len())
    }
}

/// The last answer of one key.
struct Answer<V> {
    result: Result<V, ProviderError>,
    at: Instant,
    /// Counted in the budget and served to later requests.
    kept: bool,
}

type Slot<V> = Arc<tokio::sync::Mutex<Option<Answer<V>>>>;

/// Identical reads sharing store calls; one per operation.
pub struct ReadCache<V> {
    slots: std::sync::Mutex<HashMap<ReadKey, Slot<V>>>,
    kept_bytes: AtomicUsize,
    budget: usize,
}

impl<V: Clone + Weighed> Default for ReadCache<V> {
    fn default() -> Self {
        ReadCache::with_budget(MAX_CACHED_BYTES)
    }
}

impl<V: Clone + Weighed> ReadCache<V> {
    /// A cache that keeps at most `budget` bytes of answers.
    pub fn with_budget(budget: usize) -> Self {
        ReadCache { slots: std::sync::Mutex::default(), kept_bytes: AtomicUsize::new(0), budget }
    }

    /// The answer of `key`: one in flight or kept within `max_age`, else `read`'s.
    pub async fn get<F>(&self, key: ReadKey, max_age: Duration, read: F) -> Result<V, ProviderError>
    where
        F: Future<Output = Result<V, ProviderError>>,
    {
        let asked = Instant::now();
        let slot = self.slot(key);
        let mut held = slot.lock().await;
        if let Some(last) = held.as_ref() {
            let shared = last.at >= asked;
            let fresh = last.kept && last.result.is_ok() && last.at.elapsed() < max_age.min(MAX_AGE);
            if shared || fresh {
                return last.result.clone();
            }
        }
        let result = read.await;
        if let Some(old) = held.take().filter(|a| a.kept) {
            self.release(&old);
        }
        let weight = result.as_ref().map_or(0, Weighed::weight);
        let kept = result.is_ok() && self.reserve(weight);
        *held = Some(Answer { result: result.clone(), at: Instant::now(), kept });
        result
    }

    /// A provider's raw read of `key` at `version` (`operation` names the store call): shared
    /// by every request of the same configuration, scope and namespace that reads the same
    /// value, whatever property or form it asks for, so several `data` entries reading one
    /// remote secret make one store call. Within the age the request accepts (`ctx.max_age`).
    pub async fn read<F>(
        &self,
        operation: &'static str,
        ctx: &RequestContext,
        key: &str,
        version: &str,
        read: F,
    ) -> Result<V, ProviderError>
    where
        F: Future<Output = Result<V, ProviderError>>,
    {
        let remote = ExternalSecretDataRemoteRef { key: key.into(), version: version.into(), ..Default::default() };
        self.get(ReadKey::new(operation, ctx, &remote), ctx.max_age, read).await
    }

    /// Bytes of kept answers.
    pub fn kept_bytes(&self) -> usize {
        self.kept_bytes.load(Ordering::Relaxed)
    }

    /// Keys with a slot.
    pub fn len(&self) -> usize {
        self.slots.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// Whether no key has a slot.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn slot(&self, key: ReadKey) -> Slot<V> {
        let mut slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        if slots.len() >= SWEEP_AT {
            // A slot in use is locked and stays; an idle one whose answer no request can take
            // any more goes, with its bytes.
            slots.retain(|_, slot| match slot.try_lock() {
                Ok(held) => match held.as_ref() {
                    Some(a) if a.kept && a.result.is_ok() && a.at.elapsed() < MAX_AGE => true,
                    Some(a) => {
                        if a.kept {
                            self.release(a);
                        }
                        false
                    }
                    None => false,
                },
                Err(_) => true,
            });
        }
        slots.entry(key).or_default().clone()
    }

    fn reserve(&self, weight: usize) -> bool {
        self.kept_bytes
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |used| {
                used.checked_add(weight).filter(|total| *total <= self.budget)
            })
            .is_ok()
    }

    fn release(&self, answer: &Answer<V>) {
        let weight = answer.result.as_ref().map_or(0, Weighed::weight);
        self.kept_bytes.fetch_sub(weight, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU32;

    fn key(name: &str, ns: &str) -> ReadKey {
        let r = keyward_proto::v1::ProviderReference {
            api_version: "v1".into(),
            kind: "SecretStore".into(),
            name: name.into(),
            store_ref_kind: "SecretStore".into(),
            ..Default::default()
        };
        let ctx = crate::check_provider_ref("GetSecret", Some(&r), ns, true).expect("a valid reference");
        ReadKey::new("GetSecret", &ctx, &ExternalSecretDataRemoteRef { key: "db".into(), ..Default::default() })
    }

    async fn counted(calls: Arc<AtomicU32>, value: &'static str) -> Result<Vec<u8>, ProviderError> {
        calls.fetch_add(1, Ordering::SeqCst);
        tokio::time::sleep(Duration::from_millis(50)).await;
        Ok(value.as_bytes().to_vec())
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn identical_reads_in_flight_share_one_call_even_without_a_max_age() {
        let cache = Arc::new(ReadCache::<Vec<u8>>::default());
        let calls = Arc::new(AtomicU32::new(0));
        let mut tasks = tokio::task::JoinSet::new();
        for _ in 0..20 {
            let (cache, calls) = (cache.clone(), calls.clone());
            tasks.spawn(async move { cache.get(key("s", "a"), Duration::ZERO, counted(calls, "v")).await });
        }
        while let Some(answer) = tasks.join_next().await {
            assert_eq!(answer.expect("task").expect("read"), b"v");
        }
        // Twenty requests within the first call's 50 ms: a handful of calls at most (a request
        // that arrives after an answer never takes it).
        let shared = calls.load(Ordering::SeqCst);
        assert!(shared <= 3, "{shared} calls for 20 identical requests in flight");
        // Asked after the answer, with no max_age: a new call each time.
        assert_eq!(cache.get(key("s", "a"), Duration::ZERO, counted(calls.clone(), "w")).await.expect("read"), b"w");
        assert_eq!(cache.get(key("s", "a"), Duration::ZERO, counted(calls.clone(), "x")).await.expect("read"), b"x");
        assert_eq!(calls.load(Ordering::SeqCst), shared + 2);
    }

    #[tokio::test]
    async fn a_kept_answer_serves_within_max_age_and_never_another_key() {
        let cache = ReadCache::<Vec<u8>>::default();
        let calls = Arc::new(AtomicU32::new(0));
        let hour = Duration::from_secs(3600);
        assert_eq!(cache.get(key("s", "a"), hour, counted(calls.clone(), "a")).await.expect("read"), b"a");
        assert_eq!(cache.get(key("s", "a"), hour, counted(calls.clone(), "b")).await.expect("read"), b"a");
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        // Another namespace, another store: their own calls.
        assert_eq!(cache.get(key("s", "b"), hour, counted(calls.clone(), "c")).await.expect("read"), b"c");
        assert_eq!(cache.get(key("t", "a"), hour, counted(calls.clone(), "d")).await.expect("read"), b"d");
        assert_eq!(calls.load(Ordering::SeqCst), 3);
        // A caller that accepts less than the answer's age reads again.
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert_eq!(
            cache.get(key("s", "a"), Duration::from_millis(10), counted(calls.clone(), "e")).await.expect("read"),
            b"e"
        );
        assert_eq!(calls.load(Ordering::SeqCst), 4);
    }

    #[tokio::test]
    async fn errors_are_not_kept_and_the_budget_holds() {
        let cache = ReadCache::<Vec<u8>>::with_budget(4);
        let hour = Duration::from_secs(3600);
        let failed = cache.get(key("s", "a"), hour, async { Err(ProviderError::Unavailable("down".into())) }).await;
        assert!(failed.is_err());
        assert_eq!(cache.get(key("s", "a"), hour, async { Ok(b"up".to_vec()) }).await.expect("read"), b"up");
        assert_eq!(cache.kept_bytes(), 2);
        // Over the budget: answered, not kept, so the next request reads again.
        assert_eq!(cache.get(key("s", "b"), hour, async { Ok(b"large".to_vec()) }).await.expect("read"), b"large");
        assert_eq!(cache.kept_bytes(), 2);
        assert_eq!(cache.get(key("s", "b"), hour, async { Ok(b"again".to_vec()) }).await.expect("read"), b"again");
        // A replaced answer gives its bytes back.
        assert_eq!(
            cache.get(key("s", "a"), Duration::ZERO, async { Ok(b"abc".to_vec()) }).await.expect("read"),
            b"abc"
        );
        assert_eq!(cache.kept_bytes(), 3);
    }
}
