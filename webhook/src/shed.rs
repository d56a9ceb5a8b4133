//! Load shedding: a budget of request bytes in flight, as a tower layer in front of the
//! admission handlers.
//!
//! Memory follows the bodies being reviewed: each review holds its body, the decoded review
//! and what is derived from it, several times the body's size. Many near-limit reviews at once
//! (64 of them took the webhook past its 256Mi limit; with both replicas OOM-killed and
//! `failurePolicy: Fail`, every write of a Keyward kind is refused) must not happen. So each
//! request reserves its declared size (`Content-Length`, or the body limit when it does not
//! declare one, and at least [`MIN_WEIGHT`]) from a fixed budget before its body is read, and
//! gives it back when answered. A request that does not fit waits up to [`QUEUE_WAIT`] for room
//! (its body unread, so it costs next to nothing), then is answered `429 Too Many Requests` with
//! `Retry-After: 1`, which the API server's webhook client retries.
//!
//! A shed request's body is not read: over HTTP/2 (what the API server speaks to webhooks) the
//! answer is followed by `RST_STREAM(NO_ERROR)`, which tells the client to stop sending and keep
//! the answer (RFC 9113, 8.1). Over HTTP/1.1 the body is read and thrown away chunk by chunk
//! first, so the connection stays usable and clients that only read after sending see the
//! answer.
//! Small reviews, the usual ones, take little of the budget: only a burst of large ones waits or
//! is shed.
//!
//! Bytes are not what a review costs, though: the review is decoded into a JSON tree (and the
//! object read again as its kind's type), and a tree costs tens of bytes per value, so a 1.4 MB
//! body of `[0,0,…]` decodes to some hundred MiB. So once the body is read (it is read inside
//! the time budget, by [`weigh`]) the request also reserves what it decodes to, estimated by
//! counting its values ([`decoded_weight`]), before anything is decoded; within the same wait
//! and with the same answer when there is no room. A review heavier than the whole budget runs
//! alone.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http_body_util::BodyExt;
use tokio::sync::Semaphore;

use crate::layers::rejected;
use crate::metrics::Metrics;

/// The least a request reserves: bounds the number of requests in flight as well.
pub const MIN_WEIGHT: usize = 64 * 1024;
/// What one JSON value of a review is taken to cost decoded: a `serde_json::Value` (32 bytes)
/// and its place in an array or object (a map entry with its key), held twice (the review's
/// object, and the copy read as the kind's type) with the allocator's slack.
pub const DECODED_BYTES_PER_VALUE: usize = 160;

/// How long a request waits for room in the budget before it is shed: long enough to ride out
/// a short burst, short enough that waiting streams do not hold a shared HTTP/2 connection's
/// flow-control window for long, and well inside the API server's webhook timeout (10 s in the
/// chart), so a shed request has time for retries.
pub const QUEUE_WAIT: Duration = Duration::from_millis(500);

/// The in-flight budget shared by every admission request.
#[derive(Debug)]
pub struct Budget {
    permits: Arc<Semaphore>,
    total: usize,
    max_body_bytes: usize,
    /// How long a shed HTTP/1.1 request's body may take to be thrown away.
    drain_time: Duration,
    metrics: Arc<Metrics>,
}

impl Budget {
    /// A budget of `total_bytes` of request bodies in flight (at least one body of
    /// `max_body_bytes`, so every acceptable request can run when alone). A shed request's body
    /// is discarded for at most `drain_time`.
    pub fn new(total_bytes: usize, max_body_bytes: usize, drain_time: Duration, metrics: Arc<Metrics>) -> Arc<Self> {
        // Permits are taken as u32; a budget past 4 GiB would mean no budget at all anyway.
        let total = total_bytes.max(max_body_bytes).max(MIN_WEIGHT).min(u32::MAX as usize);
        Arc::new(Budget { permits: Arc::new(Semaphore::new(total)), total, max_body_bytes, drain_time, metrics })
    }

    /// What a request reserves: its declared length within `[MIN_WEIGHT, max_body_bytes]`, or
    /// the body limit when it declares none (or an unreadable one).
    pub fn weight(&self, headers: &HeaderMap) -> usize {
        let declared = headers
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<usize>().ok());
        let cap = self.max_body_bytes.min(self.total);
        declared.unwrap_or(cap).clamp(MIN_WEIGHT.min(cap), cap)
    }

    /// What a review of `body` is taken to cost once decoded (its bytes, and
    /// [`DECODED_BYTES_PER_VALUE`] per JSON value), up to the whole budget.
    pub fn decoded_weight(&self, body: &[u8]) -> usize {
        decoded_weight(body).min(self.total)
    }

    /// The budget in bytes.
    pub fn total(&self) -> usize {
        self.total
    }

    /// Bytes reserved by requests in flight now.
    pub fn in_use(&self) -> usize {
        self.total - self.permits.available_permits()
    }
}

/// The middleware: reserve (waiting briefly), run, release; or shed with 429.
pub async fn shed(State(budget): State<Arc<Budget>>, request: Request, next: Next) -> Response {
    let weight = budget.weight(request.headers());
    // The weight never exceeds the budget, which fits in u32.
    let permits = u32::try_from(weight).unwrap_or(u32::MAX);
    let acquired = tokio::time::timeout(QUEUE_WAIT, budget.permits.clone().acquire_many_owned(permits)).await;
    let Ok(Ok(permit)) = acquired else {
        budget.metrics.shed.inc();
        tracing::debug!(weight, in_use = budget.in_use(), total = budget.total, "review shed: in-flight budget spent");
        if request.version() < axum::http::Version::HTTP_2 {
            drain(request.into_body(), budget.max_body_bytes, budget.drain_time).await;
        }
        return too_many();
    };
    let response = next.run(request).await;
    drop(permit);
    response
}

/// The second reservation, inside the time budget: reads the body (within the body limit),
/// reserves what it decodes to beyond what the request reserved already (waiting as [`shed`]
/// does, and shed the same way), and hands the read body on.
pub async fn weigh(State(budget): State<Arc<Budget>>, request: Request, next: Next) -> Response {
    let reserved = budget.weight(request.headers());
    let (parts, body) = request.into_parts();
    let body = match axum::body::to_bytes(body, budget.max_body_bytes).await {
        Ok(b) => b,
        Err(e) => {
            let too_large = std::error::Error::source(&e).is_some_and(|s| s.is::<http_body_util::LengthLimitError>())
                || e.to_string().contains("length limit");
            return if too_large {
                let message = format!("the request body is larger than {} bytes", budget.max_body_bytes);
                rejected(StatusCode::PAYLOAD_TOO_LARGE, message)
            } else {
                rejected(StatusCode::BAD_REQUEST, format!("reading the request body failed: {e}"))
            };
        }
    };
    let extra = budget.decoded_weight(&body).saturating_sub(reserved);
    let permit = if extra == 0 {
        None
    } else {
        // Within the budget, which fits in u32.
        let permits = u32::try_from(extra).unwrap_or(u32::MAX);
        let acquired = tokio::time::timeout(QUEUE_WAIT, budget.permits.clone().acquire_many_owned(permits)).await;
        let Ok(Ok(permit)) = acquired else {
            budget.metrics.shed.inc();
            tracing::debug!(extra, in_use = budget.in_use(), "review shed: what it decodes to does not fit the budget");
            return too_many();
        };
        Some(permit)
    };
    let response = next.run(Request::from_parts(parts, Body::from(body))).await;
    drop(permit);
    response
}

/// The bytes of `body` plus [`DECODED_BYTES_PER_VALUE`] per JSON value in it, counted in one
/// pass without decoding: each value is a scalar or container started outside a string, and
/// values are separated by `,` or open `[`, `{` (`:` precedes a member's value, its name is no
/// value).
pub fn decoded_weight(body: &[u8]) -> usize {
    let (mut values, mut in_string, mut escaped) = (1usize, false, false);
    for &b in body {
        if in_string {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b',' | b'[' | b'{' => values += 1,
            _ => {}
        }
    }
    body.len().saturating_add(values.saturating_mul(DECODED_BYTES_PER_VALUE))
}

/// Reads and discards a body, one chunk at a time, up to `max` bytes and `time`.
async fn drain(mut body: Body, max: usize, time: Duration) {
    let discard = async {
        let mut seen = 0usize;
        while let Some(Ok(frame)) = body.frame().await {
            seen += frame.data_ref().map_or(0, |d| d.len());
            if seen > max {
                break;
            }
        }
    };
    let _ = tokio::time::timeout(time, discard).await;
}

fn too_many() -> Response {
    let message = "keyward-webhook is reviewing as much as its memory budget allows; retry in a moment";
    let mut response =
        (StatusCode::TOO_MANY_REQUESTS, axum::Json(serde_json::json!({ "error": message }))).into_response();
    response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(length: Option<&str>) -> HeaderMap {
        let mut h = HeaderMap::new();
        if let Some(l) = length {
            h.insert(header::CONTENT_LENGTH, HeaderValue::from_str(l).expect("header"));
        }
        h
    }

    #[test]
    fn weight_is_the_declared_length_within_bounds() {
        let b = Budget::new(32 << 20, 7 << 20, Duration::ZERO, Arc::new(Metrics::new()));
        assert_eq!(b.weight(&headers(Some("3000000"))), 3_000_000);
        assert_eq!(b.weight(&headers(Some("10"))), MIN_WEIGHT, "small requests reserve the minimum");
        assert_eq!(b.weight(&headers(Some("999999999999"))), 7 << 20, "capped at the body limit");
        assert_eq!(b.weight(&headers(None)), 7 << 20, "undeclared: the body limit");
        assert_eq!(b.weight(&headers(Some("lots"))), 7 << 20, "unreadable: the body limit");
        assert_eq!(b.total(), 32 << 20);
        // A budget smaller than one body still admits one body.
        assert_eq!(Budget::new(1, 7 << 20, Duration::ZERO, Arc::new(Metrics::new())).total(), 7 << 20);
    }

    #[test]
    fn the_decoded_weight_counts_values_not_bytes() {
        let per = DECODED_BYTES_PER_VALUE;
        // Text in strings is bytes; structure outside them is values.
        let string = br#"{"a":"x,[{y\"z,"}"#;
        assert_eq!(decoded_weight(string), string.len() + 2 * per, "the object and one member");
        let zeros = format!(r#"{{"pad":[{}0]}}"#, "0,".repeat(700_000));
        let w = decoded_weight(zeros.as_bytes());
        assert_eq!(w, zeros.len() + (700_000 + 3) * per, "every zero is a value");
        assert!(w > 100 << 20, "1.4 MB of zeros weighs over 100 MiB decoded");
        let b = Budget::new(12 << 20, 7 << 20, Duration::ZERO, Arc::new(Metrics::new()));
        assert_eq!(b.decoded_weight(zeros.as_bytes()), 12 << 20, "heavier than the budget: runs alone");
        let annotation = format!(r#"{{"a":"{}"}}"#, "a".repeat(7 << 20));
        assert!(decoded_weight(annotation.as_bytes()) < (7 << 20) + 1024, "one long string weighs its bytes");
    }
}
