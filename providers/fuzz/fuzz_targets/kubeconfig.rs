//! Arbitrary text as an `authRef` kubeconfig (tenant-written): parsing returns Ok or Err, never
//! panics, and what it accepts carries no command, auth plugin or file path.
#![no_main]

use keyward_provider_kubernetes::kubeconfig::parse_inline;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    if let Ok(config) = parse_inline(text) {
        for field in ["exec", "auth-provider", "tokenFile", "client-certificate", "client-key", "username"] {
            assert!(config.user.get(field).is_none(), "accepted a kubeconfig whose user sets {field}");
        }
    }
});
