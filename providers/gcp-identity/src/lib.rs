//! Google identities for Keyward's providers: what a GCP `auth` block names (a service-account
//! key Secret, GKE Workload Identity, Workload Identity Federation, or the provider's own
//! identity where the operator allows it) resolved to a key or a token ([`identity`]), and the
//! token calls behind it at the operator's endpoints ([`exchange`]).
//!
//! The GCP Secret Manager provider hands the result to Google's client (and to its
//! GCRAccessToken generator); the Vault provider has the account sign a login JWT through IAM
//! Credentials `signJwt` for Vault's GCP auth method. One resolution, one tenant boundary: a
//! tenant's configuration reads only its own namespace and never the provider's own identity.
//!
//! The SigV4 signer of an STS `GetCallerIdentity` request ([`sigv4`]) lives here too: WIF's AWS
//! subject token needs it, and the Vault provider's AWS auth method signs its login with it.

pub mod exchange;
pub mod external_account;
pub mod identity;
pub mod sigv4;

pub use exchange::{Endpoints, Token, TokenExchange};
pub use identity::{Fields, Identity, Resolver};
