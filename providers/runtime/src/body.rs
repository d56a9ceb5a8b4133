//! Answers from servers a configuration names are capped in size and time.
//!
//! A tenant writes the server URL of its configuration (Vault's `server`, Kubernetes'
//! `server.url` or a kubeconfig's cluster), and one provider process serves every tenant. A
//! server that answers with hundreds of megabytes, read whole, would run the shared process out
//! of memory for every store on it; one that drips its answer a byte at a time would hold a call
//! for as long as it likes. So every answer from such a server goes through [`Limited`]: a
//! `Content-Length` above [`MAX_RESPONSE_BYTES`] is refused before anything is read, a body is
//! counted as its chunks arrive and dropped once it passes the cap (so at most the cap plus one
//! chunk is ever held), and the whole answer must arrive within [`REQUEST_TIMEOUT`].
//!
//! Clients built on `reqwest` read through [`read_limited`]; clients built on a tower stack (the
//! kube client) add [`LimitLayer`]. The error travels inside the client's own error and is found
//! again with [`limit_error`], so the message a tenant sees says what happened.

use std::error::Error as StdError;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use http_body_util::BodyExt;
use tokio::time::Sleep;

use crate::ProviderError;

/// What a find (GetAllSecrets) answers, kept within [`MAX_RESPONSE_BYTES`] of names and
/// values: the answer carries all of it at once, so a larger selection could not be handed over
/// anyway, and a server that lists endlessly cannot make the process hold more.
#[derive(Debug)]
pub struct FindAnswer {
    secrets: std::collections::HashMap<String, Vec<u8>>,
    bytes: u64,
    /// What the find selected, for the refusal: `the Secrets in team-a that find selects`.
    selected: String,
    /// How to select fewer: `narrow find.name.regexp`.
    narrow: &'static str,
}

impl FindAnswer {
    /// An empty answer; `selected` and `narrow` word the refusal.
    pub fn new(selected: String, narrow: &'static str) -> Self {
        FindAnswer { secrets: Default::default(), bytes: 0, selected, narrow }
    }

    /// Adds one secret; `UNAVAILABLE` once names and values pass [`MAX_RESPONSE_BYTES`].
    pub fn keep(&mut self, name: String, value: Vec<u8>) -> Result<(), ProviderError> {
        self.bytes = self.bytes.saturating_add((name.len() + value.len()) as u64);
        if self.bytes > MAX_RESPONSE_BYTES {
            return Err(ProviderError::Unavailable(format!(
                "{} hold more than {} MiB, more than one answer can carry; {}",
                self.selected,
                MAX_RESPONSE_BYTES / (1024 * 1024),
                self.narrow
            )));
        }
        self.secrets.insert(name, value);
        Ok(())
    }

    /// The secrets kept.
    pub fn secrets(&self) -> &std::collections::HashMap<String, Vec<u8>> {
        &self.secrets
    }

    /// The answer.
    pub fn into_secrets(self) -> std::collections::HashMap<String, Vec<u8>> {
        self.secrets
    }
}

/// Work on an answer of up to [`MAX_RESPONSE_BYTES`] (parsing it, evaluating a JSONPath over
/// it, reading a payload's members) runs here, off the async workers that serve every tenant's
/// requests.
pub async fn off_thread<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, ProviderError> + Send + 'static,
) -> Result<T, ProviderError> {
    tokio::task::spawn_blocking(f).await.map_err(|e| ProviderError::Internal(format!("reading the answer: {e}")))?
}

/// The largest answer read from a server a configuration names: the gRPC message limit, since
/// a value larger than that could not be handed to the reconciler anyway. Well under the
/// provider's memory limit, with room for the copies decoding makes.
pub const MAX_RESPONSE_BYTES: u64 = 4 * 1024 * 1024;

/// How long one request to such a server may take, connection to last byte: above the time a
/// healthy server needs, so only a stuck or dripping one is cut off.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(15);

/// Boxed error, the common currency of HTTP bodies and tower services.
pub type BoxError = Box<dyn StdError + Send + Sync>;

/// Why an answer was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BodyError {
    /// The answer declared or delivered more than the cap.
    #[error("answered with more than {}; refusing the response", size(*.0))]
    TooLarge(u64),
    /// The answer did not complete in time.
    #[error("did not complete its answer within {0:?}; giving up")]
    TooSlow(Duration),
}

impl BodyError {
    /// The error a provider answers with, naming the server (`Vault at https://…`). Both cases
    /// are `UNAVAILABLE`: the store cannot be used as it answers now, and the call may succeed
    /// once it answers normally again.
    pub fn to_provider_error(&self, server: &str) -> ProviderError {
        ProviderError::Unavailable(format!("{server} {self}"))
    }
}

/// `4 MiB` for whole mebibytes, else bytes.
fn size(bytes: u64) -> String {
    const MIB: u64 = 1024 * 1024;
    if bytes >= MIB && bytes.is_multiple_of(MIB) { format!("{} MiB", bytes / MIB) } else { format!("{bytes} bytes") }
}

/// The [`BodyError`] somewhere in `err`'s chain of causes, if any: clients wrap body errors in
/// their own (kube's `Error::Service`, reqwest's decode error).
pub fn limit_error<'a>(err: &'a (dyn StdError + 'static)) -> Option<&'a BodyError> {
    let mut current = Some(err);
    while let Some(e) = current {
        if let Some(b) = e.downcast_ref::<BodyError>() {
            return Some(b);
        }
        current = e.source();
    }
    None
}

/// Refuses an answer whose declared length (the `Content-Length` header, or the body's own
/// lower bound) is above `max`, before any of its body is read.
pub fn check_declared<B: Body>(resp: &http::Response<B>, max: u64) -> Result<(), BodyError> {
    let header = resp
        .headers()
        .get(http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    if header.is_some_and(|n| n > max) || resp.body().size_hint().lower() > max {
        return Err(BodyError::TooLarge(max));
    }
    Ok(())
}

/// A body that fails with [`BodyError::TooLarge`] once more than `max` bytes arrived, and with
/// [`BodyError::TooSlow`] when its deadline passes first. Ends after its first error.
pub struct Limited<B> {
    inner: Pin<Box<B>>,
    max: u64,
    seen: u64,
    deadline: Option<(Pin<Box<Sleep>>, Duration)>,
    failed: bool,
}

impl<B> Limited<B> {
    /// Caps `inner` at `max` bytes, and at `deadline` (a timer and the duration it stands for,
    /// for the message) when given.
    pub fn new(inner: B, max: u64, deadline: Option<(Pin<Box<Sleep>>, Duration)>) -> Self {
        Limited { inner: Box::pin(inner), max, seen: 0, deadline, failed: false }
    }
}

impl<B> Body for Limited<B>
where
    B: Body<Data = Bytes>,
    B::Error: Into<BoxError>,
{
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.get_mut();
        if this.failed {
            return Poll::Ready(None);
        }
        if let Some((timer, limit)) = &mut this.deadline
            && timer.as_mut().poll(cx).is_ready()
        {
            this.failed = true;
            return Poll::Ready(Some(Err(BodyError::TooSlow(*limit).into())));
        }
        let frame = match ready!(this.inner.as_mut().poll_frame(cx)) {
            None => return Poll::Ready(None),
            Some(Err(e)) => {
                this.failed = true;
                return Poll::Ready(Some(Err(e.into())));
            }
            Some(Ok(frame)) => frame,
        };
        if let Some(data) = frame.data_ref() {
            this.seen = this.seen.saturating_add(data.len() as u64);
            if this.seen > this.max {
                // Dropping the frame (and, with the body, the connection) frees what was read.
                this.failed = true;
                return Poll::Ready(Some(Err(BodyError::TooLarge(this.max).into())));
            }
        }
        Poll::Ready(Some(Ok(frame)))
    }

    fn is_end_stream(&self) -> bool {
        self.failed || self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// Reads a whole answer of at most `max` bytes: its declared length is checked first, then its
/// body is counted as it arrives. Errors keep their cause; find a refusal with [`limit_error`].
pub async fn read_limited<B>(resp: http::Response<B>, max: u64) -> Result<(http::response::Parts, Bytes), BoxError>
where
    B: Body<Data = Bytes>,
    B::Error: Into<BoxError>,
{
    check_declared(&resp, max)?;
    let (parts, body) = resp.into_parts();
    let bytes = Limited::new(body, max, None).collect().await?.to_bytes();
    Ok((parts, bytes))
}

/// A tower layer capping every answer of the service below it at `max` bytes and `timeout`
/// from the request to the last byte.
#[derive(Clone, Copy, Debug)]
pub struct LimitLayer {
    max: u64,
    timeout: Duration,
}

impl LimitLayer {
    /// A layer with these limits.
    pub fn new(max: u64, timeout: Duration) -> Self {
        LimitLayer { max, timeout }
    }
}

impl Default for LimitLayer {
    /// [`MAX_RESPONSE_BYTES`] and [`REQUEST_TIMEOUT`].
    fn default() -> Self {
        LimitLayer::new(MAX_RESPONSE_BYTES, REQUEST_TIMEOUT)
    }
}

impl<S> tower::Layer<S> for LimitLayer {
    type Service = LimitService<S>;

    fn layer(&self, inner: S) -> LimitService<S> {
        LimitService { inner, limits: *self }
    }
}

/// The service of [`LimitLayer`].
#[derive(Clone, Debug)]
pub struct LimitService<S> {
    inner: S,
    limits: LimitLayer,
}

impl<S, Req, B> tower::Service<Req> for LimitService<S>
where
    S: tower::Service<Req, Response = http::Response<B>>,
    S::Error: Into<BoxError>,
    S::Future: Send + 'static,
    B: Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    type Response = http::Response<Limited<B>>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, req: Req) -> Self::Future {
        let answer = self.inner.call(req);
        let LimitLayer { max, timeout } = self.limits;
        Box::pin(async move {
            // One timer for the head and the body, so a server cannot spend the whole budget
            // on each.
            let mut timer = Box::pin(tokio::time::sleep(timeout));
            let resp = tokio::select! {
                resp = answer => resp.map_err(Into::into)?,
                () = &mut timer => return Err(BodyError::TooSlow(timeout).into()),
            };
            check_declared(&resp, max)?;
            Ok(resp.map(|body| Limited::new(body, max, Some((timer, timeout)))))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::{Full, StreamBody};
    use std::convert::Infallible;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};
    use tower::{Layer, Service, ServiceExt};

    const MAX: u64 = 64 * 1024;

    /// A body of `chunks` chunks of `size` bytes, counting how many bytes were pulled from it.
    fn chunked(chunks: usize, size: usize, pulled: Arc<AtomicU64>) -> impl Body<Data = Bytes, Error = Infallible> {
        let stream = tokio_stream::iter((0..chunks).map(move |_| {
            pulled.fetch_add(size as u64, Ordering::SeqCst);
            Ok::<_, Infallible>(Frame::data(Bytes::from(vec![b'x'; size])))
        }));
        StreamBody::new(stream)
    }

    fn refusal(e: &BoxError) -> Option<BodyError> {
        limit_error(e.as_ref()).cloned()
    }

    #[tokio::test]
    async fn an_oversized_content_length_is_refused_before_the_body_is_read() {
        let pulled = Arc::new(AtomicU64::new(0));
        let resp = http::Response::builder()
            .header("content-length", (300u64 * 1024 * 1024).to_string())
            .body(chunked(10_000, 1024, pulled.clone()))
            .expect("response");
        let e = read_limited(resp, MAX).await.expect_err("refused");
        assert_eq!(refusal(&e), Some(BodyError::TooLarge(MAX)));
        assert_eq!(pulled.load(Ordering::SeqCst), 0, "nothing of the body was read");

        // A body that knows its exact length is refused the same way without a header.
        let e = read_limited(http::Response::new(Full::new(Bytes::from(vec![0u8; 100_000]))), MAX)
            .await
            .expect_err("refused");
        assert_eq!(refusal(&e), Some(BodyError::TooLarge(MAX)));
    }

    #[tokio::test]
    async fn a_chunked_body_is_dropped_once_it_passes_the_cap() {
        let pulled = Arc::new(AtomicU64::new(0));
        // 300 MB announced nowhere: only counting can stop it.
        let resp = http::Response::new(chunked(300 * 1024, 1024, pulled.clone()));
        let e = read_limited(resp, MAX).await.expect_err("refused");
        assert_eq!(refusal(&e), Some(BodyError::TooLarge(MAX)));
        assert_eq!(pulled.load(Ordering::SeqCst), MAX + 1024, "read the cap and one chunk, no more");
        let msg = BodyError::TooLarge(4 * 1024 * 1024).to_provider_error("Vault at https://vault.example");
        assert_eq!(msg.code(), tonic::Code::Unavailable);
        assert_eq!(
            msg.to_string(),
            "store unavailable: Vault at https://vault.example answered with more than 4 MiB; refusing the response"
        );
    }

    #[tokio::test]
    async fn answers_up_to_the_cap_pass() {
        let pulled = Arc::new(AtomicU64::new(0));
        let resp = http::Response::builder()
            .header("content-length", MAX.to_string())
            .body(chunked(64, 1024, pulled))
            .expect("response");
        let (parts, bytes) = read_limited(resp, MAX).await.expect("exactly the cap passes");
        assert_eq!(parts.status, 200);
        assert_eq!(bytes.len() as u64, MAX);
        let (_, empty) = read_limited(http::Response::new(Full::new(Bytes::new())), MAX).await.expect("empty");
        assert!(empty.is_empty());
    }

    #[tokio::test]
    async fn other_body_errors_keep_their_cause() {
        let stream = tokio_stream::iter([Err::<Frame<Bytes>, _>(std::io::Error::other("connection reset"))]);
        let e = read_limited(http::Response::new(StreamBody::new(stream)), MAX).await.expect_err("fails");
        assert_eq!(refusal(&e), None);
        assert!(e.to_string().contains("connection reset"), "{e}");
    }

    /// A service answering with `body` after `head_delay`.
    fn server<B: Send + 'static>(
        head_delay: Duration,
        body: impl Fn() -> B + Send + Clone + 'static,
    ) -> impl Service<(), Response = http::Response<B>, Error = Infallible, Future: Send + 'static> + Clone {
        tower::service_fn(move |()| {
            let body = body.clone();
            async move {
                tokio::time::sleep(head_delay).await;
                Ok(http::Response::new(body()))
            }
        })
    }

    /// A body sending one byte every `every`, for an hour.
    fn drip(every: Duration) -> impl Body<Data = Bytes, Error = Infallible> {
        let (tx, rx) = tokio::sync::mpsc::channel(1);
        tokio::spawn(async move {
            for _ in 0..3600 {
                if tx.send(Ok(Frame::data(Bytes::from_static(b"x")))).await.is_err() {
                    return;
                }
                tokio::time::sleep(every).await;
            }
        });
        StreamBody::new(tokio_stream::wrappers::ReceiverStream::new(rx))
    }

    #[tokio::test]
    async fn the_layer_caps_size_and_time() {
        let deadline = Duration::from_millis(300);
        let layer = LimitLayer::new(MAX, deadline);

        let svc = layer.layer(server(Duration::ZERO, || Full::new(Bytes::from(vec![1u8; 1000]))));
        let resp = svc.oneshot(()).await.expect("answer");
        assert_eq!(resp.into_body().collect().await.expect("body").to_bytes().len(), 1000);

        let pulled = Arc::new(AtomicU64::new(0));
        let p = pulled.clone();
        let svc = layer.layer(server(Duration::ZERO, move || chunked(300 * 1024, 1024, p.clone())));
        let body = svc.oneshot(()).await.expect("head").into_body();
        let e = body.collect().await.map(|_| ()).expect_err("refused");
        assert_eq!(refusal(&e), Some(BodyError::TooLarge(MAX)));
        assert_eq!(pulled.load(Ordering::SeqCst), MAX + 1024);

        let svc = layer.layer(tower::service_fn(|()| async {
            Ok::<_, Infallible>(
                http::Response::builder()
                    .header("content-length", "314572800")
                    .body(Full::new(Bytes::new()))
                    .expect("response"),
            )
        }));
        let e = svc.oneshot(()).await.map(|_| ()).expect_err("refused at the head");
        assert_eq!(refusal(&e), Some(BodyError::TooLarge(MAX)));

        // A head that never comes, then a body that drips: both end at the one deadline.
        let started = tokio::time::Instant::now();
        let svc = layer.layer(server(Duration::from_secs(3600), || Full::new(Bytes::new())));
        let e = svc.oneshot(()).await.map(|_| ()).expect_err("too slow");
        assert_eq!(refusal(&e), Some(BodyError::TooSlow(deadline)));
        assert!(started.elapsed() < Duration::from_secs(5));
        let started = tokio::time::Instant::now();
        let svc = layer.layer(server(Duration::from_millis(100), || drip(Duration::from_millis(20))));
        let body = svc.oneshot(()).await.expect("head").into_body();
        let e = body.collect().await.map(|_| ()).expect_err("too slow");
        assert_eq!(refusal(&e), Some(BodyError::TooSlow(deadline)));
        let took = started.elapsed();
        assert!(took >= deadline && took < Duration::from_secs(5), "{took:?}");
    }

    #[test]
    fn sizes_read_well() {
        assert_eq!(size(4 * 1024 * 1024), "4 MiB");
        assert_eq!(size(1000), "1000 bytes");
    }

    #[test]
    fn a_find_answer_keeps_names_and_values_within_one_answer() {
        let mib = 1024 * 1024;
        let mut found = FindAnswer::new("the secrets under secret/team that find selects".into(), "select fewer");
        found.keep("a".into(), vec![b'x'; 2 * mib]).unwrap();
        found.keep("b".into(), vec![b'x'; mib]).unwrap();
        let e = found.keep("c".into(), vec![b'x'; mib]).unwrap_err();
        assert!(e.is_transient(), "{e}");
        assert_eq!(
            e.to_string(),
            "store unavailable: the secrets under secret/team that find selects hold more than 4 MiB, more than one \
             answer can carry; select fewer"
        );
        assert_eq!(found.secrets().len(), 2, "nothing past the cap is kept");
        let mut found = FindAnswer::new("s".into(), "n");
        found.keep("k".into(), vec![0; MAX_RESPONSE_BYTES as usize - 1]).unwrap();
        assert!(found.keep("l".into(), vec![]).is_err(), "names count too");
    }
}
