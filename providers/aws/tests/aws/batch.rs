//! Batched reads, counted by the store itself (moto records every request it serves): reads of
//! many distinct secrets of one store arriving together make one `BatchGetSecretValue` per 20
//! secrets (one `GetParameters` per 10 parameters), each reader gets its own answer or error,
//! stores with other credentials never share a batch, and a lone read still makes the single
//! call it always made.

use crate::common;

use std::collections::BTreeMap;

use aws_sdk_ssm::types::ParameterType;
use keyward_e2e::stores::{Moto, MotoRequest};
use keyward_e2e::with_temp_namespace;
use keyward_proto::v1::secret_store_provider_client::SecretStoreProviderClient;
use keyward_proto::v1::{ExternalSecretDataRemoteRef, GetSecretRequest, ProviderReference};
use keyward_provider_runtime::testkit::http_get;
use serde_json::json;
use tonic::transport::Channel;

use crate::common::{aws_store, keys, keys_secret, other_auth, other_keys, sm, ssm, start_provider, store, store_ref};

/// A minute (in milliseconds): the age a periodic refresh accepts (its configuration then
/// comes from the provider's watch, so reads of one refresh reach the store together).
const MINUTE: u32 = 60_000;

fn get(r: &ProviderReference, ns: &str, key: &str) -> GetSecretRequest {
    GetSecretRequest {
        provider_ref: Some(r.clone()),
        source_namespace: ns.into(),
        remote_ref: Some(ExternalSecretDataRemoteRef { key: key.into(), ..Default::default() }),
        max_age_millis: MINUTE,
    }
}

/// Every `(store, key)` read at once: each answer (a value, or the gRPC code of its error).
async fn all_at_once(
    c: &SecretStoreProviderClient<Channel>,
    ns: &str,
    reads: &[(&ProviderReference, String)],
) -> BTreeMap<(String, String), Result<String, tonic::Code>> {
    let mut tasks = tokio::task::JoinSet::new();
    for (r, key) in reads {
        let (mut c, req, at) = (c.clone(), get(r, ns, key), (r.name.clone(), key.clone()));
        tasks.spawn(async move {
            let answer = c.get_secret(req).await;
            (at, answer.map(|a| String::from_utf8(a.into_inner().value).unwrap()).map_err(|s| s.code()))
        });
    }
    tasks.join_all().await.into_iter().collect()
}

/// The requests moto served since `from` for the operation `target`.
fn served(moto: &Moto, from: usize, target: &str) -> Vec<MotoRequest> {
    moto.requests().into_iter().skip(from).filter(|r| r.target == target).collect()
}

/// How many entries of `field` (`SecretIdList`, `Names`) each request asked for, sorted.
fn sizes(requests: &[MotoRequest], field: &str) -> Vec<usize> {
    let mut n: Vec<usize> = requests.iter().map(|r| r.body[field].as_array().map_or(0, Vec::len)).collect();
    n.sort_unstable();
    n
}

/// `n` reads arriving together went out in full batches of `limit` and one with the rest
/// (30 secrets: 20 + 10). The window closes after 5 ms without a new read, so on a machine busy
/// enough to pause the provider that long in the middle of a burst, its reads may take one
/// more call; never more, and never more than `limit` in one call.
fn assert_batched(sizes: &[usize], n: usize, limit: usize) {
    assert_eq!(sizes.iter().sum::<usize>(), n, "every read once: {sizes:?}");
    assert!(sizes.iter().all(|&s| s <= limit), "at most {limit} per call: {sizes:?}");
    let least = n.div_ceil(limit);
    assert!((least..=least + 1).contains(&sizes.len()), "{n} reads in {least} calls: {sizes:?}");
    if sizes.len() == least {
        assert_eq!(sizes.iter().filter(|&&s| s == limit).count(), n / limit, "full batches: {sizes:?}");
    }
}

/// The provider's `externalsecret_provider_api_calls_count` of successful `call`s.
async fn counted(health: std::net::SocketAddr, call: &str) -> f64 {
    let (status, text) = http_get(health, "/metrics").await.unwrap();
    assert_eq!(status, 200);
    text.lines()
        .filter(|l| l.starts_with("externalsecret_provider_api_calls_count{"))
        .filter(|l| l.contains(&format!(r#"call="{call}""#)) && l.contains(r#"status="success""#))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

#[tokio::test(flavor = "multi_thread")]
async fn distinct_secrets_read_together_make_one_batch_call_per_twenty_per_identity() {
    let _guard = common::exclusive().await;
    let moto = Moto::start_recording();
    let p = start_provider(&moto).await;
    let sm = sm(&moto).await;
    let (moto, c, health) = (&moto, &p.client, p.health);
    with_temp_namespace(&[], |client, ns| async move {
        keys_secret(&client, &ns).await.unwrap();
        other_keys(&client, &ns).await;
        let prefix = format!("{ns}/");
        store(&client, Some(&ns), "sm-a", aws_store("SecretsManager", &prefix, keys(None))).await.unwrap();
        store(&client, Some(&ns), "sm-b", aws_store("SecretsManager", &prefix, other_auth())).await.unwrap();
        for i in 0..29 {
            sm.create_secret().name(format!("{prefix}s{i}")).secret_string(format!("v{i}")).send().await.unwrap();
        }
        for who in ["a", "b"] {
            for i in 0..10 {
                let name = format!("{prefix}{who}{i}");
                sm.create_secret().name(name).secret_string(format!("{who}{i}")).send().await.unwrap();
            }
        }
        sm.create_secret().name(format!("{prefix}lone")).secret_string("alone").send().await.unwrap();
        let (sm_a, sm_b) = (store_ref("SecretStore", "sm-a", &ns), store_ref("SecretStore", "sm-b", &ns));

        // A lone read: the single call, as without batching.
        let from = moto.requests().len();
        let answer = c.clone().get_secret(get(&sm_a, &ns, "lone")).await.unwrap();
        assert_eq!(answer.into_inner().value, b"alone");
        let sent: Vec<String> = moto.requests().into_iter().skip(from).map(|r| r.target).collect();
        assert_eq!(sent, ["secretsmanager.GetSecretValue"], "a lone read makes one GetSecretValue");

        // Thirty distinct secrets at once, one of them missing: 20 + 10 in two batch calls.
        let from = moto.requests().len();
        let mut keys: Vec<String> = (0..29).map(|i| format!("s{i}")).collect();
        keys.push("missing".into());
        let reads: Vec<_> = keys.iter().map(|k| (&sm_a, k.clone())).collect();
        let answers = all_at_once(c, &ns, &reads).await;
        for i in 0..29 {
            assert_eq!(answers[&("sm-a".into(), format!("s{i}"))], Ok(format!("v{i}")), "s{i}");
        }
        assert_eq!(answers[&("sm-a".into(), "missing".into())], Err(tonic::Code::NotFound));
        let batches = served(moto, from, "secretsmanager.BatchGetSecretValue");
        // A read that arrives after its batch left (a busy machine) is read on its own: a call of
        // one, within the one extra call assert_batched allows.
        let mut calls = sizes(&batches, "SecretIdList");
        calls.extend(served(moto, from, "secretsmanager.GetSecretValue").iter().map(|_| 1));
        assert_batched(&calls, 30, 20);
        assert_eq!(counted(health, "BatchGetSecretValue").await, batches.len() as f64, "a batch counts as one call");

        // Two identities at once, ten secrets each: every batch holds the secrets of one store
        // and is signed with that store's keys.
        c.clone().get_secret(get(&sm_b, &ns, "lone")).await.unwrap();
        let from = moto.requests().len();
        let reads: Vec<_> = (0..10).flat_map(|i| [(&sm_a, format!("a{i}")), (&sm_b, format!("b{i}"))]).collect();
        let answers = all_at_once(c, &ns, &reads).await;
        assert!(answers.iter().all(|((_, k), v)| v.as_deref() == Ok(k.as_str())), "{answers:?}");
        let batches = served(moto, from, "secretsmanager.BatchGetSecretValue");
        // A read that arrives after its batch left (a busy machine) is read on its own: it
        // counts too, and must be signed with its own store's keys all the same.
        let singles = served(moto, from, "secretsmanager.GetSecretValue");
        let mut read_by = BTreeMap::<&str, Vec<String>>::new();
        let calls = batches
            .iter()
            .map(|b| (b, b.body["SecretIdList"].clone()))
            .chain(singles.iter().map(|s| (s, json!([s.body["SecretId"]]))));
        for (call, ids) in calls {
            let ids: Vec<String> = ids.as_array().unwrap().iter().map(|v| v.as_str().unwrap().to_string()).collect();
            let own = if call.access_key == "AKIDTEST" { "a" } else { "b" };
            assert!(
                ids.iter().all(|id| id.starts_with(&format!("{prefix}{own}"))),
                "{} signed {ids:?}",
                call.access_key
            );
            read_by.entry(call.access_key.as_str()).or_default().extend(ids);
        }
        assert_eq!(read_by.keys().copied().collect::<Vec<_>>(), ["AKIDOTHER", "AKIDTEST"]);
        for ids in read_by.values_mut() {
            ids.sort();
            ids.dedup();
        }
        assert!(read_by.values().all(|ids| ids.len() == 10), "each identity read its ten secrets: {read_by:?}");
        assert!(
            batches.len() <= 4 && singles.len() <= 2,
            "ten reads per identity in at most two batches each, and few stragglers: {} batches, {} single reads",
            batches.len(),
            singles.len()
        );
    })
    .await;
    drop(p.child);
}

#[tokio::test(flavor = "multi_thread")]
async fn distinct_parameters_read_together_make_one_get_parameters_per_ten() {
    let _guard = common::exclusive().await;
    let moto = Moto::start_recording();
    let p = start_provider(&moto).await;
    let ssm = ssm(&moto).await;
    let (moto, c, health) = (&moto, &p.client, p.health);
    with_temp_namespace(&[], |client, ns| async move {
        keys_secret(&client, &ns).await.unwrap();
        let prefix = format!("/{ns}/");
        store(&client, Some(&ns), "ps-a", aws_store("ParameterStore", &prefix, keys(None))).await.unwrap();
        for i in 0..25 {
            let kind = if i % 2 == 0 { ParameterType::SecureString } else { ParameterType::String };
            ssm.put_parameter().name(format!("{prefix}p{i}")).value(format!("v{i}")).r#type(kind).send().await.unwrap();
        }
        let ps_a = store_ref("SecretStore", "ps-a", &ns);

        // A lone read: one GetParameter.
        let from = moto.requests().len();
        assert_eq!(c.clone().get_secret(get(&ps_a, &ns, "p0")).await.unwrap().into_inner().value, b"v0");
        let sent: Vec<String> = moto.requests().into_iter().skip(from).map(|r| r.target).collect();
        assert_eq!(sent, ["AmazonSSM.GetParameter"]);

        // Twenty-five at once (one missing): three GetParameters, decrypted.
        let from = moto.requests().len();
        let mut keys: Vec<String> = (1..25).map(|i| format!("p{i}")).collect();
        keys.push("missing".into());
        let reads: Vec<_> = keys.iter().map(|k| (&ps_a, k.clone())).collect();
        let answers = all_at_once(c, &ns, &reads).await;
        for i in 1..25 {
            assert_eq!(answers[&("ps-a".into(), format!("p{i}"))], Ok(format!("v{i}")), "p{i}");
        }
        assert_eq!(answers[&("ps-a".into(), "missing".into())], Err(tonic::Code::NotFound));
        let batches = served(moto, from, "AmazonSSM.GetParameters");
        let mut calls = sizes(&batches, "Names");
        calls.extend(served(moto, from, "AmazonSSM.GetParameter").iter().map(|_| 1));
        assert_batched(&calls, 25, 10);
        assert!(batches.iter().all(|r| r.body["WithDecryption"] == true));
        assert_eq!(counted(health, "GetParameters").await, batches.len() as f64);
    })
    .await;
    drop(p.child);
}
