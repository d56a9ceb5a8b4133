//! One error type for both ends of the provider contract, mapped to and from gRPC status
//! codes. Not-found has its own variant because deletion policies depend on it.

use tonic::{Code, Status};

/// What went wrong in a provider call.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProviderError {
    /// The remote value does not exist (`NOT_FOUND`).
    #[error("no secret: {0}")]
    NoSecret(String),
    /// The request is malformed (`INVALID_ARGUMENT`).
    #[error("invalid request: {0}")]
    InvalidArgument(String),
    /// The provider configuration is unusable (`FAILED_PRECONDITION`).
    #[error("bad provider configuration: {0}")]
    BadConfig(String),
    /// The store or the provider cannot be reached (`UNAVAILABLE`).
    #[error("store unavailable: {0}")]
    Unavailable(String),
    /// The store refused the credentials or the operation (`PERMISSION_DENIED`).
    #[error("permission denied: {0}")]
    PermissionDenied(String),
    /// The credentials were not accepted at all (`UNAUTHENTICATED`).
    #[error("unauthenticated: {0}")]
    Unauthenticated(String),
    /// The call ran out of time (`DEADLINE_EXCEEDED`).
    #[error("deadline exceeded: {0}")]
    DeadlineExceeded(String),
    /// The provider does not support the operation (`UNIMPLEMENTED`).
    #[error("not supported by this provider: {0}")]
    Unsupported(String),
    /// Anything else (`INTERNAL` or an unmapped code).
    #[error("provider error: {0}")]
    Internal(String),
}

impl ProviderError {
    /// The gRPC code this error travels as.
    pub fn code(&self) -> Code {
        match self {
            ProviderError::NoSecret(_) => Code::NotFound,
            ProviderError::InvalidArgument(_) => Code::InvalidArgument,
            ProviderError::BadConfig(_) => Code::FailedPrecondition,
            ProviderError::Unavailable(_) => Code::Unavailable,
            ProviderError::PermissionDenied(_) => Code::PermissionDenied,
            ProviderError::Unauthenticated(_) => Code::Unauthenticated,
            ProviderError::DeadlineExceeded(_) => Code::DeadlineExceeded,
            ProviderError::Unsupported(_) => Code::Unimplemented,
            ProviderError::Internal(_) => Code::Internal,
        }
    }

    /// Whether retrying the same call may succeed (the store or the network may recover).
    pub fn is_transient(&self) -> bool {
        matches!(self, ProviderError::Unavailable(_) | ProviderError::DeadlineExceeded(_))
    }

    /// Whether this is the typed "no secret" answer.
    pub fn is_not_found(&self) -> bool {
        matches!(self, ProviderError::NoSecret(_))
    }

    fn message(&self) -> &str {
        match self {
            ProviderError::NoSecret(m)
            | ProviderError::InvalidArgument(m)
            | ProviderError::BadConfig(m)
            | ProviderError::Unavailable(m)
            | ProviderError::PermissionDenied(m)
            | ProviderError::Unauthenticated(m)
            | ProviderError::DeadlineExceeded(m)
            | ProviderError::Unsupported(m)
            | ProviderError::Internal(m) => m,
        }
    }
}

impl From<ProviderError> for Status {
    fn from(e: ProviderError) -> Self {
        Status::new(e.code(), e.message().to_string())
    }
}

impl From<Status> for ProviderError {
    fn from(s: Status) -> Self {
        let m = s.message().to_string();
        match s.code() {
            Code::NotFound => ProviderError::NoSecret(m),
            Code::InvalidArgument | Code::OutOfRange => ProviderError::InvalidArgument(m),
            Code::FailedPrecondition => ProviderError::BadConfig(m),
            Code::Unavailable | Code::ResourceExhausted | Code::Aborted => ProviderError::Unavailable(m),
            Code::PermissionDenied => ProviderError::PermissionDenied(m),
            Code::Unauthenticated => ProviderError::Unauthenticated(m),
            Code::DeadlineExceeded | Code::Cancelled => ProviderError::DeadlineExceeded(m),
            Code::Unimplemented => ProviderError::Unsupported(m),
            _ if is_transport_failure(&s) => ProviderError::Unavailable(m),
            _ => ProviderError::Internal(if m.is_empty() { format!("{:?}", s.code()) } else { m }),
        }
    }
}

/// Whether `status` was made on this side out of a failure of the connection itself (the
/// provider process stopped, the pooled connection was reset or closed mid-call) rather than
/// decoded from an answer the provider sent.
///
/// Why it matters: tonic turns such a failure into `UNKNOWN` (or `INTERNAL` for an h2 reset)
/// carrying the transport, h2, hyper or io error as its source. Read by code alone it would be a
/// permanent provider error, so the object would sit out its full backoff instead of waiting on
/// the provider and being requeued when it answers again. A status decoded from the wire never
/// has a source, so a provider that answers with `UNKNOWN` or `INTERNAL` is not mistaken for
/// an outage.
pub fn is_transport_failure(status: &Status) -> bool {
    let mut source = std::error::Error::source(status);
    while let Some(err) = source {
        if err.is::<tonic::transport::Error>()
            || err.is::<h2::Error>()
            || err.is::<hyper::Error>()
            || err.is::<std::io::Error>()
        {
            return true;
        }
        source = err.source();
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_variant_survives_the_wire() {
        let all = [
            ProviderError::NoSecret("db".into()),
            ProviderError::InvalidArgument("x".into()),
            ProviderError::BadConfig("x".into()),
            ProviderError::Unavailable("x".into()),
            ProviderError::PermissionDenied("x".into()),
            ProviderError::Unauthenticated("x".into()),
            ProviderError::DeadlineExceeded("x".into()),
            ProviderError::Unsupported("x".into()),
            ProviderError::Internal("x".into()),
        ];
        for e in all {
            let status: Status = e.clone().into();
            assert_eq!(status.code(), e.code());
            assert_eq!(ProviderError::from(status), e);
        }
    }

    #[test]
    fn not_found_is_typed_no_secret() {
        let e = ProviderError::from(Status::not_found("secret \"db\" not found in namespace \"remote\""));
        assert!(e.is_not_found());
        assert!(!e.is_transient());
        assert_eq!(e.to_string(), "no secret: secret \"db\" not found in namespace \"remote\"");
    }

    #[test]
    fn transient_codes() {
        for code in [Code::Unavailable, Code::DeadlineExceeded, Code::ResourceExhausted, Code::Aborted] {
            assert!(ProviderError::from(Status::new(code, "")).is_transient(), "{code:?}");
        }
        for code in [Code::NotFound, Code::PermissionDenied, Code::FailedPrecondition, Code::InvalidArgument] {
            assert!(!ProviderError::from(Status::new(code, "")).is_transient(), "{code:?}");
        }
        assert_eq!(ProviderError::from(Status::new(Code::Unknown, "")), ProviderError::Internal("Unknown".into()));
    }

    /// A wrapper like tonic's and hyper's own errors, to put the io error deeper in the chain.
    #[derive(Debug, thiserror::Error)]
    #[error("transport error")]
    struct Wrapped(#[source] std::io::Error);

    #[test]
    fn a_closing_connection_is_unavailable() {
        use std::io::{Error, ErrorKind};
        let reset = Status::from_error(Box::new(Error::new(ErrorKind::ConnectionReset, "connection reset by peer")));
        assert_eq!(reset.code(), Code::Unknown, "tonic's own mapping of a bare io error");
        let nested = Status::from_error(Box::new(Wrapped(Error::new(ErrorKind::BrokenPipe, "broken pipe"))));
        assert_eq!(nested.code(), Code::Unknown);
        // Tonic maps an h2 reset to INTERNAL, keeping the h2 error as the source.
        let h2_reset = Status::from_error(Box::new(h2::Error::from(h2::Reason::PROTOCOL_ERROR)));
        assert_eq!(h2_reset.code(), Code::Internal);
        assert!(h2_reset.message().contains("h2 protocol error"), "{}", h2_reset.message());
        for status in [reset, nested, h2_reset] {
            let shown = format!("{status:?}");
            assert!(is_transport_failure(&status), "{shown}");
            let e = ProviderError::from(status);
            assert!(matches!(e, ProviderError::Unavailable(_)), "{shown} became {e:?}");
            assert!(e.is_transient(), "{shown}");
        }
    }

    #[test]
    fn a_provider_answering_with_an_error_is_not_an_outage() {
        for status in [Status::unknown("provider said so"), Status::internal("provider said so")] {
            assert!(!is_transport_failure(&status));
            let e = ProviderError::from(status);
            assert_eq!(e, ProviderError::Internal("provider said so".into()));
            assert!(!e.is_transient());
        }
        // A source that is not a connection failure does not make it one either.
        let other = Status::from_error(Box::new(std::fmt::Error));
        assert_eq!(other.code(), Code::Unknown);
        assert!(!is_transport_failure(&other));
        assert!(!ProviderError::from(other).is_transient());
        // An h2 error with a code of its own keeps that code's meaning.
        let refused = Status::from_error(Box::new(h2::Error::from(h2::Reason::INADEQUATE_SECURITY)));
        assert!(is_transport_failure(&refused));
        assert!(matches!(ProviderError::from(refused), ProviderError::PermissionDenied(_)));
    }
}
