//! What the AWS provider costs the stores, counted by the store itself: moto records every
//! request it serves. Many requests for one secret, at once or within the age they accept, make
//! one `GetSecretValue` (or `GetParameter`); a request that accepts no age reads anew; a store
//! with other credentials reads with its own, never sharing the first one's answer.

use crate::common;

use aws_sdk_ssm::types::ParameterType;
use keyward_e2e::stores::{Moto, MotoRequest};
use keyward_e2e::with_temp_namespace;
use keyward_proto::v1::secret_store_provider_client::SecretStoreProviderClient;
use keyward_proto::v1::{ExternalSecretDataRemoteRef, GetSecretRequest, ProviderReference};
use tonic::transport::Channel;

use crate::common::{aws_store, keys, keys_secret, other_auth, other_keys, sm, ssm, start_provider, store, store_ref};

/// A minute (in milliseconds): an age a periodic refresh accepts.
const MINUTE: u32 = 60_000;

fn get(r: &ProviderReference, ns: &str, key: &str, property: &str, max_age_millis: u32) -> GetSecretRequest {
    GetSecretRequest {
        provider_ref: Some(r.clone()),
        source_namespace: ns.into(),
        remote_ref: Some(ExternalSecretDataRemoteRef {
            key: key.into(),
            property: property.into(),
            ..Default::default()
        }),
        max_age_millis,
    }
}

/// Thirty requests at once for three properties of `key`; each answer checked.
async fn thirty_at_once(c: &SecretStoreProviderClient<Channel>, r: &ProviderReference, ns: &str, key: &str) {
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..30 {
        let (mut c, property) = (c.clone(), ["user", "password", "host"][i % 3]);
        let req = get(r, ns, key, property, MINUTE);
        tasks.spawn(async move { (property, c.get_secret(req).await.map(|a| a.into_inner().value)) });
    }
    for (property, answer) in tasks.join_all().await {
        let expected = match property {
            "user" => "app",
            "password" => "pw",
            _ => "db",
        };
        assert_eq!(String::from_utf8(answer.unwrap()).unwrap(), expected, "{property}");
    }
}

/// The reads moto served of `name` (by the operation `target`, e.g. `secretsmanager.GetSecretValue`),
/// and the access key each was signed with.
fn reads(moto: &Moto, target: &str, field: &str, name: &str) -> Vec<String> {
    moto.requests()
        .into_iter()
        .filter(|r: &MotoRequest| r.target == target && r.body[field] == name)
        .map(|r| r.access_key)
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn reads_of_one_secret_share_one_store_call_per_identity() {
    let _guard = common::exclusive().await;
    let moto = Moto::start_recording();
    let p = start_provider(&moto).await;
    let (sm, ssm) = (sm(&moto).await, ssm(&moto).await);
    let (moto, c) = (&moto, &p.client);
    with_temp_namespace(&[], |client, ns| async move {
        keys_secret(&client, &ns).await.unwrap();
        other_keys(&client, &ns).await;
        let value = r#"{"user":"app","password":"pw","host":"db"}"#;
        let prefix = format!("{ns}/");
        store(&client, Some(&ns), "sm-a", aws_store("SecretsManager", &prefix, keys(None))).await.unwrap();
        store(&client, Some(&ns), "sm-b", aws_store("SecretsManager", &prefix, other_auth())).await.unwrap();
        let ps_prefix = format!("/{ns}/");
        store(&client, Some(&ns), "ps-a", aws_store("ParameterStore", &ps_prefix, keys(None))).await.unwrap();
        let secret_id = format!("{ns}/db");
        sm.create_secret().name(&secret_id).secret_string(value).send().await.unwrap();
        let parameter = format!("{ps_prefix}db");
        ssm.put_parameter().name(&parameter).value(value).r#type(ParameterType::String).send().await.unwrap();
        let sm_reads = || reads(moto, "secretsmanager.GetSecretValue", "SecretId", &secret_id);
        let (sm_a, sm_b) = (store_ref("SecretStore", "sm-a", &ns), store_ref("SecretStore", "sm-b", &ns));

        // Thirty requests at once, three properties: one GetSecretValue.
        thirty_at_once(c, &sm_a, &ns, "db").await;
        assert_eq!(sm_reads(), ["AKIDTEST"], "thirty requests for one secret, one store read");
        // Within the age they accept, later requests are answered without a call.
        let answer = c.clone().get_secret(get(&sm_a, &ns, "db", "host", MINUTE)).await.unwrap();
        assert_eq!(answer.into_inner().value, b"db");
        assert_eq!(sm_reads().len(), 1);

        // A changed value reaches a request that accepts no age, at once.
        sm.put_secret_value()
            .secret_id(&secret_id)
            .secret_string(r#"{"user":"app2","password":"pw","host":"db"}"#)
            .send()
            .await
            .unwrap();
        let answer = c.clone().get_secret(get(&sm_a, &ns, "db", "user", 0)).await.unwrap();
        assert_eq!(answer.into_inner().value, b"app2");
        assert_eq!(sm_reads(), ["AKIDTEST", "AKIDTEST"], "no age accepted: read anew");

        // The same secret through a store with other keys: its own read, signed with its keys.
        let answer = c.clone().get_secret(get(&sm_b, &ns, "db", "user", MINUTE)).await.unwrap();
        assert_eq!(answer.into_inner().value, b"app2");
        assert_eq!(sm_reads(), ["AKIDTEST", "AKIDTEST", "AKIDOTHER"], "another identity never shares an answer");

        // Parameter Store: thirty requests at once, one GetParameter.
        let ps_a = store_ref("SecretStore", "ps-a", &ns);
        thirty_at_once(c, &ps_a, &ns, "db").await;
        assert_eq!(reads(moto, "AmazonSSM.GetParameter", "Name", &parameter), ["AKIDTEST"]);
    })
    .await;
    drop(p.child);
}
