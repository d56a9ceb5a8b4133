//! Bounded randomized test of review decoding and validation under garbage input, on stable
//! Rust (the cargo-fuzz target in `webhook/fuzz` does the same for longer, on nightly).
//!
//! Starting from valid reviews of every kind, each round mutates bytes or JSON nodes and feeds
//! the result to both webhooks. Every input must give either a well-formed review answering the
//! same uid, or a "not a review" error; never a panic.
//!
//! `KEYWARD_FUZZ_SEED` and `KEYWARD_FUZZ_ITERATIONS` change the seed (default fixed, so a
//! failure reproduces) and the number of rounds (default 4000).

use std::panic::{AssertUnwindSafe, catch_unwind};

use keyward_webhook::fixtures::{sample_caches, sample_reviews};
use keyward_webhook::server::{Mode, handle_body};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};

use crate::common;

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn random_value(rng: &mut StdRng, depth: u32) -> Value {
    match rng.random_range(0..if depth > 3 { 5 } else { 8 }) {
        0 => Value::Null,
        1 => json!(rng.random::<bool>()),
        2 => json!(rng.random::<i64>()),
        3 => json!(rng.random::<f64>()),
        4 => {
            let pool = [
                "",
                "(",
                "[",
                "ClusterProvider",
                "Provider",
                "CREATE",
                "DELETE",
                "UPDATE",
                "\u{0}",
                "é",
                "^ops-",
                "shared",
                "team-a",
                "0",
                "1h",
                "-1s",
                "999999999999h",
                "a:b",
                "https://x",
                "*",
            ];
            json!(pool[rng.random_range(0..pool.len())])
        }
        5 => Value::Array((0..rng.random_range(0..4)).map(|_| random_value(rng, depth + 1)).collect()),
        6 => {
            let keys = ["name", "kind", "spec", "data", "conditions", "namespaces", "namespaceRegexes", "auth", "x"];
            Value::Object(
                (0..rng.random_range(0..4))
                    .map(|_| (keys[rng.random_range(0..keys.len())].to_string(), random_value(rng, depth + 1)))
                    .collect(),
            )
        }
        _ => {
            // Deep nesting, past serde_json's recursion limit now and then.
            let mut v = Value::Null;
            for _ in 0..rng.random_range(1..200) {
                v = json!([v]);
            }
            v
        }
    }
}

/// Replaces or removes a random node of `v`.
fn mutate_json(rng: &mut StdRng, v: &mut Value) {
    let stop = rng.random_range(0..4) == 0;
    match v {
        Value::Object(map) if !map.is_empty() && !stop => {
            let Some(key) = map.keys().nth(rng.random_range(0..map.len())).cloned() else { return };
            if rng.random_range(0..6) == 0 {
                map.remove(&key);
            } else if let Some(child) = map.get_mut(&key) {
                mutate_json(rng, child);
            }
            return;
        }
        Value::Array(items) if !items.is_empty() && !stop => {
            let i = rng.random_range(0..items.len());
            mutate_json(rng, &mut items[i]);
            return;
        }
        _ => {}
    }
    *v = random_value(rng, 0);
}

fn mutate_bytes(rng: &mut StdRng, bytes: &mut Vec<u8>) {
    if bytes.is_empty() {
        bytes.push(rng.random());
        return;
    }
    match rng.random_range(0..4) {
        0 => bytes.truncate(rng.random_range(0..bytes.len())),
        1 => {
            let i = rng.random_range(0..bytes.len());
            bytes[i] = rng.random();
        }
        2 => {
            let i = rng.random_range(0..bytes.len());
            let junk: Vec<u8> = (0..rng.random_range(1..16)).map(|_| rng.random()).collect();
            bytes.splice(i..i, junk);
        }
        _ => {
            let i = rng.random_range(0..bytes.len());
            let j = rng.random_range(i..bytes.len());
            bytes.drain(i..j);
        }
    }
}

#[test]
fn garbage_reviews_get_well_formed_answers() {
    let _guard = common::shared_blocking();
    let seed = env_u64("KEYWARD_FUZZ_SEED", 0x6b65_7977_6172_6421);
    let rounds = env_u64("KEYWARD_FUZZ_ITERATIONS", 4000);
    let mut rng = StdRng::seed_from_u64(seed);
    let caches = sample_caches();
    let seeds = sample_reviews();
    let (mut answered, mut refused) = (0u64, 0u64);
    for round in 0..rounds {
        let base = &seeds[rng.random_range(0..seeds.len())];
        let body = if rng.random_range(0..3) == 0 {
            let mut b = base.clone();
            for _ in 0..rng.random_range(1..4) {
                mutate_bytes(&mut rng, &mut b);
            }
            b
        } else {
            let mut v: Value = serde_json::from_slice(base).expect("seed is JSON");
            for _ in 0..rng.random_range(1..4) {
                mutate_json(&mut rng, &mut v);
            }
            serde_json::to_vec(&v).expect("json")
        };
        let uid = serde_json::from_slice::<Value>(&body)
            .ok()
            .and_then(|v| v.pointer("/request/uid").and_then(Value::as_str).map(str::to_string));
        for mode in [Mode::Validate, Mode::Mutate] {
            let result = catch_unwind(AssertUnwindSafe(|| handle_body(mode, &body, &caches)));
            let Ok(result) = result else {
                panic!(
                    "panicked on round {round} (seed {seed:#x}, {mode:?}) with body:\n{}",
                    String::from_utf8_lossy(&body)
                );
            };
            match result {
                Ok(out) => {
                    answered += 1;
                    let review: Value = serde_json::from_slice(&out).expect("the answer is JSON");
                    assert_eq!(review["apiVersion"], "admission.k8s.io/v1");
                    assert_eq!(review["kind"], "AdmissionReview");
                    assert!(review["response"]["allowed"].is_boolean(), "{review}");
                    assert_eq!(review["response"]["uid"].as_str(), uid.as_deref(), "round {round}: {review}");
                    if review["response"]["allowed"] == false {
                        assert!(review["response"]["status"]["message"].is_string(), "a denial says why: {review}");
                    }
                }
                Err(e) => {
                    refused += 1;
                    assert!(!e.0.is_empty());
                    assert!(
                        uid.as_deref().is_none_or(str::is_empty),
                        "a body with a uid is answered as a review, round {round}: {e}\n{}",
                        String::from_utf8_lossy(&body)
                    );
                }
            }
        }
    }
    // Both paths must have been exercised, or the generator is broken.
    assert!(answered > rounds / 4 && refused > rounds / 20, "answered {answered}, refused {refused}");
}

#[test]
fn sample_reviews_are_answered_as_expected() {
    let _guard = common::shared_blocking();
    let caches = sample_caches();
    for body in sample_reviews() {
        let out = handle_body(Mode::Validate, &body, &caches).expect("review");
        let v: Value = serde_json::from_slice(&out).expect("json");
        let ns = serde_json::from_slice::<Value>(&body).expect("json")["request"]["namespace"].clone();
        let kind = serde_json::from_slice::<Value>(&body).expect("json")["request"]["kind"]["kind"].clone();
        // Only the ExternalSecret in team-b (env=dev) and the PushSecret naming the
        // ClusterProvider from team-b are refused.
        let want = !(ns == "team-b" && (kind == "ExternalSecret" || kind == "PushSecret"));
        assert_eq!(v["response"]["allowed"], want, "{kind} in {ns}: {v}");
    }
}

/// Writes the sample reviews as a seed corpus for the cargo-fuzz target
/// (`webhook/fuzz/seed_corpus.sh` runs this).
#[test]
#[ignore = "writes files; run by webhook/fuzz/seed_corpus.sh"]
fn write_seed_corpus() {
    let dir = std::env::var("KEYWARD_WRITE_CORPUS").expect("KEYWARD_WRITE_CORPUS names the corpus directory");
    std::fs::create_dir_all(&dir).expect("create corpus dir");
    for (i, body) in sample_reviews().into_iter().enumerate() {
        std::fs::write(std::path::Path::new(&dir).join(format!("sample-{i}.json")), body).expect("write");
    }
}
