//! A small configuration spec for the tests of what provider crates plug in (rows with store
//! blocks): a remote namespace and one token reference, with the field rules and the reach a
//! provider crate's spec has. No provider serves it.

use serde::{Deserialize, Serialize};

use super::{Reach, ValidationErrors, check_secret_key, named_secret};
use crate::common::SecretKeySelector;

/// The spec: `{remoteNamespace, auth: {token: {bearerToken}}}`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub(crate) struct TestSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote_namespace: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth: Option<TestAuth>,
}

/// Its one credential.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub(crate) struct TestAuth {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<TestToken>,
}

/// A token in a Secret key.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub(crate) struct TestToken {
    pub bearer_token: SecretKeySelector,
}

impl crate::registry::ProviderSpec for TestSpec {
    fn validate(&self) -> Result<(), ValidationErrors> {
        let mut errs = ValidationErrors::default();
        if let Some(t) = self.auth.as_ref().and_then(|a| a.token.as_ref()) {
            check_secret_key(&mut errs, "spec.auth.token.bearerToken", &t.bearer_token, true);
        }
        errs.into_result()
    }
    fn reach(&self) -> Reach<'_> {
        let token = self.auth.as_ref().and_then(|a| a.token.as_ref());
        let named = token.map(|t| named_secret("spec.auth.token.bearerToken", &t.bearer_token)).into_iter().collect();
        Reach { named, ..Reach::default() }
    }
}
