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
//!
//! Memory stays bounded whatever servers a configuration names answer: a kept answer is counted
//! by what it holds in memory ([`Weighed`]) plus its key and slot, so the budget bounds the
//! kept slots too; an answer that is not kept (an error, or past the budget) is held only until
//! the requests that waited for it have taken it, then its slot goes.

use std::collections::HashMap;
use std::mem::size_of;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use keyward_proto::ProviderError;
use keyward_proto::v1::ExternalSecretDataRemoteRef;
use serde_json::Value;

use crate::context::{Generation, RequestContext};

/// The longest a kept answer is served, whatever a caller accepts.
pub const MAX_AGE: Duration = Duration::from_secs(600);

/// Bytes of kept answers with their keys and slots, all keys together.
pub const MAX_CACHED_BYTES: usize = 32 * 1024 * 1024;

/// Slots beyond which a new read first sweeps out expired ones (at least; the next sweep waits
/// until the slots left have doubled, so a cache full of fresh answers is not swept every read).
const SWEEP_AT: usize = 1024;

/// A read, as far as it decides the answer and the credentials it is read with.
#[derive(Clone, Debug, Hash, PartialEq, Eq)]
pub struct ReadKey {
    operation: &'static str,
    /// The configuration object's UID and generation: a re-created store of the same name, or
    /// an edited one, reads afresh with its own credentials.
    object: Generation,
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
    /// The key of `operation` (`GetSecret`, `GetSecretMap`) for `ctx` and `remote`, through the
    /// configuration object at `object`.
    pub fn new(
        operation: &'static str,
        ctx: &RequestContext,
        object: &Generation,
        remote: &ExternalSecretDataRemoteRef,
    ) -> Self {
        ReadKey {
            operation,
            object: object.clone(),
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

    /// Bytes its strings hold on the heap (tenants choose the remote ref's).
    fn heap_bytes(&self) -> usize {
        [
            &self.object.uid,
            &self.api_version,
            &self.kind,
            &self.name,
            &self.namespace,
            &self.source_namespace,
            &self.key,
            &self.version,
            &self.property,
            &self.decoding_strategy,
            &self.metadata_policy,
        ]
        .iter()
        .map(|s| s.capacity())
        .sum()
    }
}

/// How many bytes an answer holds.
pub trait Weighed {
    /// An upper bound of the bytes the answer holds in memory (its allocations as well as its
    /// text): the budget is only a bound if no answer holds more than it is counted for.
    fn weight(&self) -> usize;
}

impl Weighed for Vec<u8> {
    fn weight(&self) -> usize {
        self.capacity()
    }
}

impl Weighed for HashMap<String, Vec<u8>> {
    fn weight(&self) -> usize {
        // The table has a bucket (the two headers and a control byte) for every 7/8 of an
        // entry it has room for: many small entries hold far more than their text.
        let table = self.capacity().saturating_mul(8) / 7 * (size_of::<(String, Vec<u8>)>() + 1);
        self.iter().map(|(k, v)| k.capacity() + v.capacity()).fold(table, usize::saturating_add)
    }
}

/// What a map entry of a parsed JSON object holds besides its key's text and its value's heap:
/// the key and value headers and the entry's share of the map's nodes (a B-tree node at its
/// least filled holds 5 of 11 entries; an index map's bucket and index with growth room hold
/// less).
const JSON_ENTRY_BYTES: usize = 3 * (size_of::<String>() + size_of::<Value>());

/// What an array element of parsed JSON holds besides its own heap: its header, twice over for
/// the room a vector grown by doubling may have left.
const JSON_ELEMENT_BYTES: usize = 2 * size_of::<Value>();

impl Weighed for serde_json::Map<String, Value> {
    fn weight(&self) -> usize {
        // The parsed form, not its JSON text: `[0,0,…]` is 2 bytes of text per element and a
        // 32-byte value each, more with growth room. Walked without recursion: the depth is the
        // server's choice.
        let mut total = entries_weight(self);
        let mut pending: Vec<&Value> = self.values().collect();
        while let Some(value) = pending.pop() {
            let own = match value {
                Value::String(s) => s.capacity(),
                Value::Array(a) => {
                    pending.extend(a);
                    a.len().saturating_mul(JSON_ELEMENT_BYTES)
                }
                Value::Object(o) => {
                    pending.extend(o.values());
                    entries_weight(o)
                }
                Value::Null | Value::Bool(_) | Value::Number(_) => 0,
            };
            total = total.saturating_add(own);
        }
        total
    }
}

/// The entries of a parsed JSON object, without their values' heap.
fn entries_weight(object: &serde_json::Map<String, Value>) -> usize {
    object.keys().map(|k| JSON_ENTRY_BYTES + k.capacity()).fold(0, usize::saturating_add)
}

/// The last answer of one key.
struct Answer<V> {
    result: Result<V, ProviderError>,
    at: Instant,
    /// Counted in the budget and served to later requests.
    kept: bool,
    /// What it was counted for when kept, given back when it goes.
    cost: usize,
}

/// The answer of one key, and how many requests are using it.
struct SlotState<V> {
    /// Requests handed this slot (under the map's lock) and not done with it; each is done
    /// before it lets go of the answer's lock, so whoever holds that lock sees who is yet to
    /// come.
    users: AtomicUsize,
    answer: tokio::sync::Mutex<Option<Answer<V>>>,
}

type Slot<V> = Arc<SlotState<V>>;

/// A request's use of a slot ([`SlotState::users`]).
struct SlotUse<V>(Slot<V>);

impl<V> Drop for SlotUse<V> {
    fn drop(&mut self) {
        let last = self.0.users.fetch_sub(1, Ordering::SeqCst) == 1;
        // The last user cancelled while it waited: no one is left to take an answer that is
        // not kept, so its bytes go now (the empty slot goes with the next sweep). A request
        // done normally holds the lock here and has seen to this itself.
        if last
            && let Ok(mut held) = self.0.answer.try_lock()
            && held.as_ref().is_some_and(|a| !a.kept)
        {
            *held = None;
        }
    }
}

/// The slots, and when they are next swept.
struct Slots<V> {
    by_key: HashMap<ReadKey, Slot<V>>,
    sweep_at: usize,
}

/// Identical reads sharing store calls; one per operation.
pub struct ReadCache<V> {
    slots: std::sync::Mutex<Slots<V>>,
    kept_bytes: AtomicUsize,
    budget: usize,
}

impl<V: Clone + Weighed> Default for ReadCache<V> {
    fn default() -> Self {
        ReadCache::with_budget(MAX_CACHED_BYTES)
    }
}

impl<V: Clone + Weighed> ReadCache<V> {
    /// A cache that keeps at most `budget` bytes of answers, keys and slots.
    pub fn with_budget(budget: usize) -> Self {
        let slots = Slots { by_key: HashMap::new(), sweep_at: SWEEP_AT };
        ReadCache { slots: std::sync::Mutex::new(slots), kept_bytes: AtomicUsize::new(0), budget }
    }

    /// The answer of `key`: one in flight or kept within `max_age`, else `read`'s.
    pub async fn get<F>(&self, key: ReadKey, max_age: Duration, read: F) -> Result<V, ProviderError>
    where
        F: Future<Output = Result<V, ProviderError>>,
    {
        let asked = Instant::now();
        let using = self.slot(&key);
        let slot = using.0.clone();
        let mut held = slot.answer.lock().await;
        // Declared after the lock's guard, so dropped before it, on every return and when the
        // request is cancelled.
        let _using = using;
        if let Some(last) = held.as_ref() {
            let shared = last.at >= asked;
            let fresh = last.kept && last.result.is_ok() && last.at.elapsed() < max_age.min(MAX_AGE);
            if shared || fresh {
                let result = last.result.clone();
                if !last.kept {
                    self.drop_unless_awaited(&key, &slot, &mut held);
                }
                return result;
            }
        }
        let result = read.await;
        if let Some(old) = held.take().filter(|a| a.kept) {
            self.kept_bytes.fetch_sub(old.cost, Ordering::Relaxed);
        }
        let cost = match &result {
            Ok(value) => Self::slot_bytes(&key).saturating_add(value.weight()),
            Err(_) => 0,
        };
        let kept = result.is_ok() && self.reserve(cost);
        *held = Some(Answer { result: result.clone(), at: Instant::now(), kept, cost });
        if !kept {
            self.drop_unless_awaited(&key, &slot, &mut held);
        }
        result
    }

    /// A provider's raw read of `key` at `version` (`operation` names the store call): shared
    /// by every request of the same configuration, scope and namespace that reads the same
    /// value, whatever property or form it asks for, so several `data` entries reading one
    /// remote secret make one store call. Within the age the request accepts (`ctx.max_age`),
    /// and only through the configuration object at `object` (its UID and generation).
    pub async fn read<F>(
        &self,
        operation: &'static str,
        ctx: &RequestContext,
        object: &Generation,
        key: &str,
        version: &str,
        read: F,
    ) -> Result<V, ProviderError>
    where
        F: Future<Output = Result<V, ProviderError>>,
    {
        let remote = ExternalSecretDataRemoteRef { key: key.into(), version: version.into(), ..Default::default() };
        self.get(ReadKey::new(operation, ctx, object, &remote), ctx.max_age, read).await
    }

    /// Bytes counted for kept answers, their keys and slots.
    pub fn kept_bytes(&self) -> usize {
        self.kept_bytes.load(Ordering::Relaxed)
    }

    /// Keys with a slot.
    pub fn len(&self) -> usize {
        self.lock_slots().by_key.len()
    }

    /// Whether no key has a slot.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// What a kept answer's key and slot hold besides the answer: the map's entry with its
    /// growth room, the slot's allocation and the key's strings.
    fn slot_bytes(key: &ReadKey) -> usize {
        let entry = 2 * (size_of::<ReadKey>() + size_of::<Slot<V>>() + 1);
        let slot = size_of::<SlotState<V>>() + 2 * size_of::<usize>();
        (entry + slot).saturating_add(key.heap_bytes())
    }

    fn lock_slots(&self) -> std::sync::MutexGuard<'_, Slots<V>> {
        self.slots.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn slot(&self, key: &ReadKey) -> SlotUse<V> {
        let mut slots = self.lock_slots();
        if slots.by_key.len() >= slots.sweep_at {
            self.sweep(&mut slots.by_key);
            slots.sweep_at = SWEEP_AT.max(slots.by_key.len().saturating_mul(2));
        }
        let slot = match slots.by_key.get(key) {
            Some(slot) => slot.clone(),
            None => {
                let slot = Arc::new(SlotState { users: AtomicUsize::new(0), answer: Default::default() });
                slots.by_key.insert(key.clone(), slot.clone());
                slot
            }
        };
        slot.users.fetch_add(1, Ordering::SeqCst);
        SlotUse(slot)
    }

    /// Drops the slots whose answer no request can take any more, with their bytes. A slot a
    /// request uses (waiting for its answer, or reading) stays.
    fn sweep(&self, by_key: &mut HashMap<ReadKey, Slot<V>>) {
        by_key.retain(|_, slot| {
            if slot.users.load(Ordering::SeqCst) > 0 {
                return true;
            }
            let Ok(held) = slot.answer.try_lock() else {
                return true;
            };
            match held.as_ref() {
                Some(a) if a.kept && a.result.is_ok() && a.at.elapsed() < MAX_AGE => true,
                Some(a) => {
                    if a.kept {
                        self.kept_bytes.fetch_sub(a.cost, Ordering::Relaxed);
                    }
                    false
                }
                None => false,
            }
        });
    }

    /// Called with the slot's answer not kept: once no other request uses the slot (all that
    /// waited for this answer have taken it), the answer and the slot go, so an answer past the
    /// budget, or an error, holds nothing after its waiters. Slots are only handed out under the
    /// map's lock, so no request can pick this one up while it is looked at.
    fn drop_unless_awaited(
        &self,
        key: &ReadKey,
        slot: &Slot<V>,
        held: &mut tokio::sync::MutexGuard<'_, Option<Answer<V>>>,
    ) {
        let mut slots = self.lock_slots();
        if slot.users.load(Ordering::SeqCst) > 1 {
            return;
        }
        // A sweep may have taken it out, and another request put a new slot in its place.
        if slots.by_key.get(key).is_some_and(|s| Arc::ptr_eq(s, slot)) {
            slots.by_key.remove(key);
        }
        **held = None;
    }

    fn reserve(&self, weight: usize) -> bool {
        self.kept_bytes
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |used| {
                used.checked_add(weight).filter(|total| *total <= self.budget)
            })
            .is_ok()
    }

    /// Answers the slots hold, kept or not, and what they weigh.
    #[cfg(test)]
    fn held_answers(&self) -> (usize, usize) {
        let slots = self.lock_slots();
        let mut held = (0, 0);
        for slot in slots.by_key.values() {
            if let Ok(answer) = slot.answer.try_lock()
                && let Some(Ok(value)) = answer.as_ref().map(|a| a.result.as_ref())
            {
                held = (held.0 + 1, held.1 + value.weight());
            }
        }
        held
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU32;

    fn key(name: &str, ns: &str) -> ReadKey {
        key_of(name, ns, &Generation::default())
    }

    fn key_of(name: &str, ns: &str, object: &Generation) -> ReadKey {
        let r = keyward_proto::v1::ProviderReference {
            api_version: "v1".into(),
            kind: "SecretStore".into(),
            name: name.into(),
            store_ref_kind: "SecretStore".into(),
            ..Default::default()
        };
        let ctx = crate::check_provider_ref("GetSecret", Some(&r), ns, true).expect("a valid reference");
        ReadKey::new("GetSecret", &ctx, object, &ExternalSecretDataRemoteRef { key: "db".into(), ..Default::default() })
    }

    /// A store deleted and re-created under the same name (generation 1 again) reads with its
    /// own credentials at once: the answer read through the object before it is not its.
    #[tokio::test]
    async fn a_recreated_store_never_gets_the_answers_of_the_one_before() {
        let cache = ReadCache::<Vec<u8>>::default();
        let calls = Arc::new(AtomicU32::new(0));
        let first = Generation { uid: "u1".into(), number: 1 };
        let second = Generation { uid: "u2".into(), number: 1 };
        let age = Duration::from_secs(60);
        let read =
            |object: &Generation, value| cache.get(key_of("s", "team-a", object), age, counted(calls.clone(), value));
        assert_eq!(read(&first, "old").await.expect("read"), b"old");
        assert_eq!(read(&first, "unused").await.expect("kept"), b"old", "the same object shares its answer");
        assert_eq!(read(&second, "new").await.expect("read"), b"new");
        assert_eq!(calls.load(Ordering::SeqCst), 2);
    }

    async fn counted(calls: Arc<AtomicU32>, value: &'static str) -> Result<Vec<u8>, ProviderError> {
        calls.fetch_add(1, Ordering::SeqCst);
        tokio::time::sleep(Duration::from_millis(50)).await;
        Ok(value.as_bytes().to_vec())
    }

    /// Twenty requests for one key at once, each answered `v`.
    async fn twenty_identical_reads_at_once(cache: &Arc<ReadCache<Vec<u8>>>, calls: &Arc<AtomicU32>) {
        let mut tasks = tokio::task::JoinSet::new();
        for _ in 0..20 {
            let (cache, calls) = (cache.clone(), calls.clone());
            tasks.spawn(async move { cache.get(key("s", "a"), Duration::ZERO, counted(calls, "v")).await });
        }
        while let Some(answer) = tasks.join_next().await {
            assert_eq!(answer.expect("task").expect("read"), b"v");
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn identical_reads_in_flight_share_one_call_even_without_a_max_age() {
        let cache = Arc::new(ReadCache::<Vec<u8>>::default());
        let calls = Arc::new(AtomicU32::new(0));
        twenty_identical_reads_at_once(&cache, &calls).await;
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
        // Room for "up" and "abc" under their key, not for "large".
        let counted = |value: &[u8]| ReadCache::<Vec<u8>>::slot_bytes(&key("s", "a")) + value.len();
        let cache = ReadCache::<Vec<u8>>::with_budget(counted(b"abc"));
        let hour = Duration::from_secs(3600);
        let failed = cache.get(key("s", "a"), hour, async { Err(ProviderError::Unavailable("down".into())) }).await;
        assert!(failed.is_err());
        assert!(cache.is_empty(), "an error leaves no slot behind");
        assert_eq!(cache.get(key("s", "a"), hour, async { Ok(b"up".to_vec()) }).await.expect("read"), b"up");
        assert_eq!(cache.kept_bytes(), counted(b"up"));
        // Over the budget: answered, not kept, so the next request reads again.
        assert_eq!(cache.get(key("s", "b"), hour, async { Ok(b"large".to_vec()) }).await.expect("read"), b"large");
        assert_eq!(cache.kept_bytes(), counted(b"up"));
        assert_eq!(cache.get(key("s", "b"), hour, async { Ok(b"again".to_vec()) }).await.expect("read"), b"again");
        // A replaced answer gives its bytes back.
        assert_eq!(
            cache.get(key("s", "a"), Duration::ZERO, async { Ok(b"abc".to_vec()) }).await.expect("read"),
            b"abc"
        );
        assert_eq!(cache.kept_bytes(), counted(b"abc"));
    }

    fn remote_key(remote: &str) -> ReadKey {
        let mut k = key("s", "a");
        k.key = remote.into();
        k
    }

    /// A tenant's server answering the largest body for key after key: once the budget is
    /// full, the answers are given and not held, so what the cache holds stays within it.
    #[tokio::test]
    async fn answers_past_the_budget_hold_nothing_once_given() {
        const BODY: usize = 64 * 1024;
        let cache = ReadCache::<Vec<u8>>::with_budget(4 * BODY);
        let hour = Duration::from_secs(3600);
        for n in 0..200 {
            let answer = cache.get(remote_key(&format!("k{n}")), hour, async { Ok(vec![7; BODY]) }).await;
            assert_eq!(answer.expect("read").len(), BODY);
        }
        let (answers, bytes) = cache.held_answers();
        assert_eq!(answers, 3, "the three answers the budget keeps, with their keys");
        assert_eq!(cache.len(), answers, "no slot is left for an answer not kept");
        assert!(bytes <= cache.kept_bytes() && cache.kept_bytes() <= 4 * BODY, "{bytes} bytes held");
    }

    /// Waiters still share an answer past the budget; the last of them leaves nothing behind.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_answer_past_the_budget_reaches_its_waiters_then_goes() {
        let cache = Arc::new(ReadCache::<Vec<u8>>::with_budget(0));
        let calls = Arc::new(AtomicU32::new(0));
        twenty_identical_reads_at_once(&cache, &calls).await;
        let shared = calls.load(Ordering::SeqCst);
        assert!(shared <= 3, "{shared} calls for 20 identical requests in flight");
        assert!(cache.is_empty(), "{} slots left", cache.len());
        assert_eq!(cache.kept_bytes(), 0);
    }

    /// Empty answers weigh nothing, but their keys and slots do: the budget bounds their number.
    #[tokio::test]
    async fn kept_slots_are_counted_even_for_empty_answers() {
        let budget = 64 * 1024;
        let cache = ReadCache::<Vec<u8>>::with_budget(budget);
        let hour = Duration::from_secs(3600);
        for n in 0..2000 {
            cache.get(remote_key(&format!("{n:0>100}")), hour, async { Ok(Vec::new()) }).await.expect("read");
        }
        let slot = ReadCache::<Vec<u8>>::slot_bytes(&remote_key(&format!("{:0>100}", 0)));
        assert!(cache.len() <= budget / slot, "{} slots kept", cache.len());
        assert!(cache.kept_bytes() <= budget);
    }

    /// Parsed answers are counted by what they hold, not by their text.
    #[test]
    fn parsed_answers_weigh_what_they_hold() {
        let elements = 10_000;
        let text = format!(r#"{{"a":[{}0],"b":{{"c":"d"}}}}"#, "0,".repeat(elements - 1));
        let parsed: serde_json::Map<String, Value> = serde_json::from_str(&text).expect("json");
        assert!(
            parsed.weight() >= elements * size_of::<Value>(),
            "{} for {} bytes of text",
            parsed.weight(),
            text.len()
        );
        let entries = 10_000;
        let map: HashMap<String, Vec<u8>> = (0..entries).map(|n| (n.to_string(), Vec::new())).collect();
        assert!(map.weight() >= entries * size_of::<(String, Vec<u8>)>(), "{} for {entries} entries", map.weight());
    }
}
