//! Batched reads: current-version reads of distinct secrets (or parameters) through one AWS
//! client that arrive within [`WINDOW`] of each other go to the store as one
//! `BatchGetSecretValue` (at most [`SECRETS_PER_BATCH`] secrets) or one `GetParameters` (at
//! most [`PARAMETERS_PER_BATCH`] names, decrypted), instead of one `GetSecretValue` /
//! `GetParameter` each. AWS bills per call, and a refresh cycle of many ExternalSecrets reading
//! different secrets of one store would otherwise make one call per secret.
//!
//! - One [`Batches`] belongs to one cached [`crate::Target`], so its batches never mix
//!   identities: a client is built per config object, generation and owner (credentials,
//!   region, endpoint), and a batch is signed with that client's credentials.
//! - The first read of an empty batch opens it; reads arriving meanwhile join it (a name
//!   already in it shares its entry). The batch leaves once no read joined it for [`WINDOW`],
//!   at the latest [`MAX_WAIT`] after it opened, or at once when it is full. A batch of one
//!   name is read with the single call, exactly as without batching. Trade-off: a lone read
//!   waits [`WINDOW`] (5 ms) before its call, small next to the call itself (tens of
//!   milliseconds to AWS); sending the first read at once instead would make every burst's
//!   first read a call of its own. Waiting for a quiet gap rather than a fixed time after the
//!   first read keeps a burst whose reads arrive over more than 5 ms (a busy process) in one
//!   batch, and [`MAX_WAIT`] bounds the wait under a steady stream of reads.
//! - Only the current version is batched (Secrets Manager without `remoteRef.version`,
//!   Parameter Store names without a version or label); other reads keep the single call.
//! - Per-entry answers keep the single call's errors: a missing secret or parameter is "no
//!   secret" for its reader only, a denied one is denied; an entry error whose meaning the
//!   single call refines (a secret scheduled for deletion answers `InvalidRequestException`),
//!   an unknown one, or a name the answer does not mention is read again with the single call.
//! - A whole-call failure that a single call would share (throttling, refused credentials, an
//!   unreachable endpoint) fails every reader of the batch with it. A denied batch call (a
//!   least-privilege policy allowing `GetSecretValue` or `GetParameter` only) turns batching
//!   off for that client's lifetime and its readers use single calls. Any other refusal of the
//!   batch call (a validation error, an answer above the response cap) sends its readers to
//!   single calls for that batch.
//! - Sizes: a secret holds at most 64 KiB and a parameter 8 KiB, so a full batch is about
//!   1.3 MiB of values (Base64 or JSON-escaped) under the 4 MiB response cap; a batch answer
//!   refused by the cap anyway (values heavily escaped in JSON) is read again one secret per
//!   call, never failed whole.
//! - Batch calls leave through the same capped HTTP client, so the store-calls metric counts
//!   one call per batch (`call="BatchGetSecretValue"` or `"GetParameters"`).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use aws_sdk_secretsmanager::error::SdkError;
use aws_sdk_secretsmanager::types::{ApiErrorType, SecretValueEntry};
use aws_sdk_ssm::types::Parameter;
use keyward_provider_runtime::ProviderError;
use keyward_provider_runtime::body::{BodyError, limit_error};
use tokio::sync::oneshot;
use tokio::time::Instant;

use crate::client::{map_error_code, map_sdk_error};
use crate::mapping::Version;
use crate::{SecretsManagerProvider, Target};

/// How long an open batch waits for another read before it leaves.
pub(crate) const WINDOW: Duration = Duration::from_millis(5);
/// The longest an open batch waits, however many reads keep joining it.
pub(crate) const MAX_WAIT: Duration = Duration::from_millis(25);
/// `BatchGetSecretValue` takes at most this many `SecretIdList` entries.
pub(crate) const SECRETS_PER_BATCH: usize = 20;
/// `GetParameters` takes at most this many names.
pub(crate) const PARAMETERS_PER_BATCH: usize = 10;

/// The store a batch reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Service {
    SecretsManager,
    ParameterStore,
}

impl Service {
    fn limit(self) -> usize {
        match self {
            Service::SecretsManager => SECRETS_PER_BATCH,
            Service::ParameterStore => PARAMETERS_PER_BATCH,
        }
    }

    fn call(self) -> &'static str {
        match self {
            Service::SecretsManager => "BatchGetSecretValue",
            Service::ParameterStore => "GetParameters",
        }
    }
}

/// What a batch answers one of its names.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Outcome {
    /// The current value.
    Value(Vec<u8>),
    /// The error the single call would give.
    Failed(ProviderError),
    /// Read it with the single call.
    Single,
}

/// An open batch: distinct names, and who waits for which.
#[derive(Debug)]
struct Gathering {
    id: u64,
    /// When the last read joined.
    last: Instant,
    names: Vec<String>,
    waiters: Vec<(usize, oneshot::Sender<Outcome>)>,
}

impl Gathering {
    /// Hands every waiter the outcome of its name (`outcomes` in the order of `names`).
    fn answer(self, outcomes: &[Outcome]) {
        for (i, tx) in self.waiters {
            let outcome = outcomes.get(i).cloned().unwrap_or(Outcome::Single);
            // A reader that went away takes no answer.
            let _ = tx.send(outcome);
        }
    }
}

/// What joining a batch gives a reader.
struct Joined {
    answer: oneshot::Receiver<Outcome>,
    /// The batch this read opened: its timer is the reader's to start.
    opened: Option<u64>,
    /// The batch this read filled: it leaves now.
    full: Option<Gathering>,
}

/// The open batch of one service, and whether its batch call was denied.
#[derive(Debug, Default)]
struct Queue {
    open: Mutex<(u64, Option<Gathering>)>,
    denied: AtomicBool,
}

impl Queue {
    fn join(&self, name: &str, limit: usize) -> Joined {
        let (tx, answer) = oneshot::channel();
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        let (next, gathering) = &mut *open;
        let mut opened = None;
        let g = gathering.get_or_insert_with(|| {
            *next += 1;
            opened = Some(*next);
            Gathering { id: *next, last: Instant::now(), names: Vec::new(), waiters: Vec::new() }
        });
        g.last = Instant::now();
        let i = match g.names.iter().position(|n| n == name) {
            Some(i) => i,
            None => {
                g.names.push(name.to_string());
                g.names.len() - 1
            }
        };
        g.waiters.push((i, tx));
        let full = if g.names.len() >= limit { gathering.take() } else { None };
        Joined { answer, opened, full }
    }

    /// When the last read joined batch `id`, if it is still open.
    fn last_join(&self, id: u64) -> Option<Instant> {
        let open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        open.1.as_ref().filter(|g| g.id == id).map(|g| g.last)
    }

    /// The open batch, if it is still batch `id`.
    fn take(&self, id: u64) -> Option<Gathering> {
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        if open.1.as_ref().is_some_and(|g| g.id == id) { open.1.take() } else { None }
    }
}

/// The batches of one AWS client (one identity).
#[derive(Debug)]
pub(crate) struct Batches {
    sm: aws_sdk_secretsmanager::Client,
    ssm: aws_sdk_ssm::Client,
    secrets: Queue,
    parameters: Queue,
}

impl Batches {
    /// Batches read with these clients.
    pub(crate) fn new(sm: aws_sdk_secretsmanager::Client, ssm: aws_sdk_ssm::Client) -> Arc<Self> {
        Arc::new(Batches { sm, ssm, secrets: Queue::default(), parameters: Queue::default() })
    }

    fn queue(&self, service: Service) -> &Queue {
        match service {
            Service::SecretsManager => &self.secrets,
            Service::ParameterStore => &self.parameters,
        }
    }

    /// The current value of `name`, read in a batch with the reads of other names arriving
    /// within [`WINDOW`].
    pub(crate) async fn read(self: &Arc<Self>, service: Service, name: &str) -> Outcome {
        let queue = self.queue(service);
        if queue.denied.load(Ordering::Relaxed) {
            return Outcome::Single;
        }
        let joined = queue.join(name, service.limit());
        // The batch is sent from tasks of its own, so a reader that goes away (its request
        // cancelled) never strands the others.
        if let Some(id) = joined.opened {
            let this = Arc::clone(self);
            tokio::spawn(async move {
                let queue = this.queue(service);
                let latest = Instant::now() + MAX_WAIT;
                // Until the batch is full (sent by the read that filled it) or quiet.
                while let Some(last) = queue.last_join(id) {
                    let due = (last + WINDOW).min(latest);
                    if Instant::now() < due {
                        tokio::time::sleep_until(due).await;
                        continue;
                    }
                    if let Some(g) = queue.take(id) {
                        this.send(service, g).await;
                    }
                    break;
                }
            });
        }
        if let Some(g) = joined.full {
            let this = Arc::clone(self);
            tokio::spawn(async move { this.send(service, g).await });
        }
        joined.answer.await.unwrap_or(Outcome::Single)
    }

    async fn send(&self, service: Service, g: Gathering) {
        let outcomes = if g.names.len() == 1 {
            vec![Outcome::Single]
        } else {
            match service {
                Service::SecretsManager => self.secrets_batch(&g.names).await,
                Service::ParameterStore => self.parameters_batch(&g.names).await,
            }
        };
        g.answer(&outcomes);
    }

    async fn secrets_batch(&self, names: &[String]) -> Vec<Outcome> {
        let sent = self.sm.batch_get_secret_value().set_secret_id_list(Some(names.to_vec())).send().await;
        match sent {
            Ok(out) => secret_outcomes(names, out.secret_values(), out.errors()),
            Err(e) => vec![self.refused(Service::SecretsManager, e, names.len()); names.len()],
        }
    }

    async fn parameters_batch(&self, names: &[String]) -> Vec<Outcome> {
        let sent = self.ssm.get_parameters().set_names(Some(names.to_vec())).with_decryption(true).send().await;
        match sent {
            Ok(out) => parameter_outcomes(names, out.parameters(), out.invalid_parameters()),
            Err(e) => vec![self.refused(Service::ParameterStore, e, names.len()); names.len()],
        }
    }

    /// The outcome of every name of a refused batch call; a denied call turns batching off.
    fn refused<E, R>(&self, service: Service, e: SdkError<E, R>, n: usize) -> Outcome
    where
        E: aws_sdk_secretsmanager::error::ProvideErrorMetadata + std::error::Error + 'static,
        R: std::fmt::Debug + 'static,
    {
        let too_large = matches!(limit_error(&e), Some(BodyError::TooLarge(_)));
        let call = service.call();
        let (outcome, off) = whole_call_outcome(map_sdk_error(e, &format!("{call} of {n} names")), too_large);
        if off && !self.queue(service).denied.swap(true, Ordering::Relaxed) {
            tracing::warn!(call, "the batch call was denied; this client reads one secret per call from now on");
        }
        outcome
    }
}

/// What a refused batch call means for each of its readers, and whether batching turns off
/// for the client: refusals a single call would share fail them all; a denied call (the
/// policy allows the single call only) sends them to single calls, from now on; anything else
/// about the batch call itself (its answer above the size cap, a validation error) sends them
/// to single calls for this batch.
pub(crate) fn whole_call_outcome(e: ProviderError, too_large: bool) -> (Outcome, bool) {
    if too_large {
        return (Outcome::Single, false);
    }
    match e {
        ProviderError::PermissionDenied(_) => (Outcome::Single, true),
        e @ (ProviderError::Unavailable(_) | ProviderError::Unauthenticated(_)) => (Outcome::Failed(e), false),
        _ => (Outcome::Single, false),
    }
}

/// The outcome of each of `names` (in order) from a `BatchGetSecretValue` answer.
pub(crate) fn secret_outcomes(names: &[String], values: &[SecretValueEntry], errors: &[ApiErrorType]) -> Vec<Outcome> {
    let mut by_id: HashMap<&str, Outcome> = HashMap::new();
    for v in values {
        let outcome = if let Some(s) = v.secret_string() {
            Outcome::Value(s.as_bytes().to_vec())
        } else if let Some(b) = v.secret_binary() {
            Outcome::Value(b.as_ref().to_vec())
        } else {
            let name = v.name().unwrap_or_default();
            Outcome::Failed(ProviderError::NoSecret(format!("secret {name:?} has no value in the requested version")))
        };
        // Requested by name or by full ARN.
        for id in [v.name(), v.arn()].into_iter().flatten() {
            by_id.insert(id, outcome.clone());
        }
    }
    for e in errors {
        let Some(id) = e.secret_id() else { continue };
        let code = e.error_code().unwrap_or_default();
        let msg = format!("secret {id:?}: {code}: {}", e.message().unwrap_or_default());
        let outcome = match map_error_code(code, msg) {
            // Not found, denied, refused credentials, a busy service: as the single call says.
            e @ (ProviderError::NoSecret(_)
            | ProviderError::PermissionDenied(_)
            | ProviderError::Unauthenticated(_)
            | ProviderError::Unavailable(_)) => Outcome::Failed(e),
            // Invalid requests (a secret scheduled for deletion) and unknown codes: the single
            // call tells them apart.
            _ => Outcome::Single,
        };
        by_id.insert(id, outcome);
    }
    names.iter().map(|n| by_id.get(n.as_str()).cloned().unwrap_or(Outcome::Single)).collect()
}

/// The outcome of each of `names` (in order) from a `GetParameters` answer (decrypted).
pub(crate) fn parameter_outcomes(names: &[String], found: &[Parameter], invalid: &[String]) -> Vec<Outcome> {
    names
        .iter()
        .map(|n| {
            if let Some(p) = found.iter().find(|p| p.name() == Some(n.as_str())) {
                return match p.value() {
                    Some(v) => Outcome::Value(v.as_bytes().to_vec()),
                    None => Outcome::Failed(ProviderError::NoSecret(format!("parameter {n:?} has no value"))),
                };
            }
            if invalid.iter().any(|i| i == n) {
                return Outcome::Failed(ProviderError::NoSecret(format!("parameter {n:?}: ParameterNotFound")));
            }
            Outcome::Single
        })
        .collect()
}

impl SecretsManagerProvider {
    /// [`Self::value`], batched with other reads of the current version.
    pub(crate) async fn batched_value(
        &self,
        target: &Target,
        name: &str,
        version: &Version,
    ) -> Result<Vec<u8>, ProviderError> {
        if *version != Version::Current {
            return self.value(target, name, version).await;
        }
        match target.batches.read(Service::SecretsManager, name).await {
            Outcome::Value(v) => Ok(v),
            Outcome::Failed(e) => Err(self.fail(target, e)),
            Outcome::Single => self.value(target, name, version).await,
        }
    }

    /// [`Self::ps_value`], batched with other reads of the current version.
    pub(crate) async fn batched_ps_value(
        &self,
        target: &Target,
        name: &str,
        version: &str,
    ) -> Result<Vec<u8>, ProviderError> {
        if !version.is_empty() {
            return self.ps_value(target, name, version).await;
        }
        match target.batches.read(Service::ParameterStore, name).await {
            Outcome::Value(v) => Ok(v),
            Outcome::Failed(e) => Err(self.fail(target, e)),
            Outcome::Single => self.ps_value(target, name, version).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use aws_sdk_secretsmanager::primitives::Blob;

    use super::*;

    fn names(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("s{i}")).collect()
    }

    #[test]
    fn a_batch_leaves_when_full_and_the_next_read_opens_another() {
        let q = Queue::default();
        let mut full = Vec::new();
        let mut opened = Vec::new();
        let mut answers = Vec::new();
        for n in names(45) {
            let j = q.join(&n, SECRETS_PER_BATCH);
            opened.extend(j.opened);
            full.extend(j.full);
            answers.push(j.answer);
        }
        assert_eq!(opened, [1, 2, 3], "reads 1, 21 and 41 open a batch");
        assert_eq!(full.iter().map(|g| g.names.len()).collect::<Vec<_>>(), [20, 20]);
        let rest = q.take(3).expect("the third batch is still open");
        assert_eq!(rest.names.len(), 5);
        assert!(q.take(1).is_none() && q.take(3).is_none(), "a batch leaves once");
    }

    #[tokio::test]
    async fn reads_of_one_name_share_its_entry_and_each_reader_gets_its_own_answer() {
        let q = Queue::default();
        let a1 = q.join("a", PARAMETERS_PER_BATCH);
        let b = q.join("b", PARAMETERS_PER_BATCH);
        let a2 = q.join("a", PARAMETERS_PER_BATCH);
        assert!(b.opened.is_none() && a2.opened.is_none());
        let g = q.take(a1.opened.unwrap()).unwrap();
        assert_eq!(g.names, ["a", "b"]);
        g.answer(&[Outcome::Value(b"1".to_vec()), Outcome::Value(b"2".to_vec())]);
        assert_eq!(a1.answer.await.unwrap(), Outcome::Value(b"1".to_vec()));
        assert_eq!(b.answer.await.unwrap(), Outcome::Value(b"2".to_vec()));
        assert_eq!(a2.answer.await.unwrap(), Outcome::Value(b"1".to_vec()));
    }

    #[test]
    fn secret_entries_keep_the_single_calls_answers() {
        let values = [
            SecretValueEntry::builder()
                .name("a")
                .arn("arn:aws:secretsmanager:r:1:secret:a-Ab12")
                .secret_string("A")
                .build(),
            SecretValueEntry::builder().name("bin").secret_binary(Blob::new(vec![0, 1])).build(),
            SecretValueEntry::builder().name("empty").build(),
        ];
        let error = |id: &str, code: &str| ApiErrorType::builder().secret_id(id).error_code(code).message("m").build();
        let errors = [
            error("gone", "ResourceNotFoundException"),
            error("denied", "AccessDeniedException"),
            error("deleting", "InvalidRequestException"),
            error("odd", "DecryptionFailure"),
        ];
        let asked: Vec<String> = [
            "a",
            "arn:aws:secretsmanager:r:1:secret:a-Ab12",
            "bin",
            "empty",
            "gone",
            "denied",
            "deleting",
            "odd",
            "unmentioned",
        ]
        .map(String::from)
        .into();
        let out = secret_outcomes(&asked, &values, &errors);
        assert_eq!(out[0], Outcome::Value(b"A".to_vec()));
        assert_eq!(out[1], Outcome::Value(b"A".to_vec()), "by ARN");
        assert_eq!(out[2], Outcome::Value(vec![0, 1]));
        assert!(matches!(&out[3], Outcome::Failed(ProviderError::NoSecret(_))));
        assert!(matches!(&out[4], Outcome::Failed(e) if e.is_not_found()));
        assert!(matches!(&out[5], Outcome::Failed(ProviderError::PermissionDenied(_))));
        assert_eq!(out[6..], [Outcome::Single, Outcome::Single, Outcome::Single], "the single call decides");
    }

    #[test]
    fn parameter_entries_keep_the_single_calls_answers() {
        let found = [Parameter::builder().name("/a").value("A").build(), Parameter::builder().name("/nv").build()];
        let asked: Vec<String> = ["/a", "/nv", "/gone", "/other"].map(String::from).into();
        let out = parameter_outcomes(&asked, &found, &["/gone".to_string()]);
        assert_eq!(out[0], Outcome::Value(b"A".to_vec()));
        assert!(matches!(&out[1], Outcome::Failed(ProviderError::NoSecret(_))));
        assert!(matches!(&out[2], Outcome::Failed(e) if e.is_not_found()));
        assert_eq!(out[3], Outcome::Single);
    }

    #[test]
    fn a_denied_batch_call_turns_batching_off_and_other_refusals_fail_or_fall_back() {
        let denied = ProviderError::PermissionDenied("BatchGetSecretValue: AccessDeniedException".into());
        assert_eq!(whole_call_outcome(denied, false), (Outcome::Single, true));
        let throttled = ProviderError::Unavailable("ThrottlingException".into());
        assert_eq!(whole_call_outcome(throttled.clone(), false), (Outcome::Failed(throttled), false));
        let refused = ProviderError::Unauthenticated("UnrecognizedClientException".into());
        assert_eq!(whole_call_outcome(refused.clone(), false), (Outcome::Failed(refused), false));
        let capped = ProviderError::Unavailable("the AWS endpoint answered more than 4 MiB".into());
        assert_eq!(whole_call_outcome(capped, true), (Outcome::Single, false), "too large: one secret per call");
        let invalid = ProviderError::InvalidArgument("ValidationException".into());
        assert_eq!(whole_call_outcome(invalid, false), (Outcome::Single, false));
    }
}
