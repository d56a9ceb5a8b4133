//! `kubectl apply` helpers: the path a user takes, so admission and schema errors are the
//! ones users see.

use std::io::Write;
use std::process::{Command, Stdio};

use crate::plane::CONTROL_PLANE;

/// `kubectl` for the running control plane.
///
/// # Panics
/// When no control plane was started yet: call [`crate::control_plane`] first.
pub fn kubectl() -> Command {
    CONTROL_PLANE.get().expect("call keyward_e2e::control_plane().await first").kubectl()
}

fn apply(namespace: Option<&str>, manifest: &str) -> (bool, String) {
    let mut cmd = kubectl();
    cmd.args(["apply", "-f", "-"]);
    if let Some(ns) = namespace {
        cmd.args(["-n", ns]);
    }
    let mut child =
        cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("run kubectl apply");
    child.stdin.take().expect("stdin").write_all(manifest.as_bytes()).expect("write manifest");
    let out = child.wait_with_output().expect("kubectl apply finishes");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.success(), text)
}

/// Applies `manifest` with `kubectl apply` and returns kubectl's output (warnings included).
///
/// # Panics
/// When kubectl refuses the manifest.
pub fn accepts(manifest: &str) -> String {
    accepts_in_opt(None, manifest)
}

/// [`accepts`] into `namespace`.
pub fn accepts_in(namespace: &str, manifest: &str) -> String {
    accepts_in_opt(Some(namespace), manifest)
}

fn accepts_in_opt(namespace: Option<&str>, manifest: &str) -> String {
    let (ok, text) = apply(namespace, manifest);
    assert!(ok, "expected kubectl apply to succeed, it failed:\n{text}\nmanifest:\n{manifest}");
    text
}

/// Applies `manifest` and asserts that it is refused with a message containing `expected`;
/// returns kubectl's output.
///
/// # Panics
/// When the manifest is accepted, or refused for another reason.
pub fn rejects(manifest: &str, expected: &str) -> String {
    rejects_in_opt(None, manifest, expected)
}

/// [`rejects`] into `namespace`.
pub fn rejects_in(namespace: &str, manifest: &str, expected: &str) -> String {
    rejects_in_opt(Some(namespace), manifest, expected)
}

fn rejects_in_opt(namespace: Option<&str>, manifest: &str, expected: &str) -> String {
    let (ok, text) = apply(namespace, manifest);
    assert!(!ok, "expected kubectl apply to be refused with {expected:?}, it succeeded:\n{text}");
    assert!(text.contains(expected), "kubectl apply was refused, but without {expected:?}:\n{text}");
    text
}
