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
            _ => ProviderError::Internal(if m.is_empty() { format!("{:?}", s.code()) } else { m }),
        }
    }
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
}
