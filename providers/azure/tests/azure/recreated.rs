//! A configuration deleted and created again under the same name, with other credentials: the
//! next read that accepts no aged answer uses them at once; one that accepts an aged answer is
//! served from the configuration watch, which may trail the API server a moment, and then uses
//! them too (answers and clients are kept per object UID, not per name and generation).

use std::time::Duration;

use keyward_e2e::switch::eventually;
use keyward_e2e::with_temp_namespace;
use keyward_proto::v1::GetSecretRequest;
use keyward_provider_runtime::testkit::provider_ref;

use crate::common::{self, CLIENT_ID};

#[tokio::test(flavor = "multi_thread")]
async fn a_recreated_configuration_is_served_with_its_new_credentials_at_once() {
    let _guard = common::shared().await;
    let server = common::azure();
    let p = common::start_provider(&server).await;
    let c = p.client.clone();
    with_temp_namespace(&[], |client, ns| async move {
        common::install_crd(&client).await;
        server.set_secret("database-password", "s3cret", &[]);
        common::apply_sp_secret(&client, &ns, "granted").await;
        common::apply_secret(&client, &ns, "wrong", &[("ClientID", CLIENT_ID), ("ClientSecret", "not-the-secret")])
            .await;
        let swap = provider_ref("AzureKeyVault", "swap", "", "Provider");
        let read_aged = |max_age_millis: u32| {
            let req = GetSecretRequest {
                provider_ref: Some(swap.clone()),
                source_namespace: ns.clone(),
                remote_ref: common::remote("database-password", "", "", ""),
                max_age_millis,
            };
            let mut c = c.clone();
            async move { c.get_secret(req).await.map(|r| String::from_utf8_lossy(&r.into_inner().value).into_owned()) }
        };
        common::apply_config(&client, &ns, "swap", common::sp_spec(&server, "granted")).await;
        let read = || read_aged(600_000);
        assert_eq!(read().await.expect("the first object"), "s3cret");
        assert_eq!(read().await.expect("kept"), "s3cret");

        common::recreate_config(&client, &ns, "swap", common::sp_spec(&server, "wrong")).await;
        let e = read_aged(0).await.expect_err("the second object's secret is refused by Entra ID");
        assert!(e.message().contains("AADSTS"), "Entra ID's refusal: {e:?}");
        let e = eventually("an aged read served with the new object", Duration::from_secs(10), || async {
            read().await.err()
        })
        .await;
        assert!(e.message().contains("AADSTS"), "Entra ID's refusal: {e:?}");
    })
    .await;
}
