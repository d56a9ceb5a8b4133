//! The AWS provider against the conformance suite, once per service: Secrets Manager (a
//! SecretsManager configuration) and Parameter Store (a SecretStore with `spec.provider.aws`),
//! both on moto's server.

use crate::common;

use aws_sdk_ssm::types::ParameterType;
use keyward_e2e::stores::Moto;
use keyward_e2e::with_temp_namespace;
use keyward_proto::v1::{ProviderReference, SecretStoreCapabilities};
use keyward_provider_runtime::testkit::conformance::{self, Case, ConformanceTarget, Hostile, Pointed, Properties};
use keyward_provider_runtime::testkit::{RunningProvider, TestkitError, provider_ref};
use kube::Client;
use serde_json::json;

use crate::common::{REGION, aws_store, config, keys, keys_secret, start_provider_at, store, store_ref};

const CONFIG: &str = "conformance";

#[derive(Clone, Copy, PartialEq, Eq)]
enum Service {
    SecretsManager,
    ParameterStore,
}

struct AwsTarget {
    service: Service,
    moto: Moto,
    sm: aws_sdk_secretsmanager::Client,
    ssm: aws_sdk_ssm::Client,
    client: Client,
    ns: String,
}

impl AwsTarget {
    async fn new(service: Service, client: Client, ns: String) -> AwsTarget {
        let moto = Moto::start();
        let (sm, ssm) = (common::sm(&moto).await, common::ssm(&moto).await);
        AwsTarget { service, moto, sm, ssm, client, ns }
    }

    /// Names in the store start with this.
    fn prefix(&self) -> String {
        match self.service {
            Service::SecretsManager => format!("{}/", self.ns),
            Service::ParameterStore => format!("/{}/", self.ns),
        }
    }

    /// A configuration `name` of this service under the prefix, with `auth`.
    async fn config(&self, name: &str, auth: serde_json::Value) -> Result<ProviderReference, String> {
        match self.service {
            Service::SecretsManager => {
                let spec = json!({"region": REGION, "auth": auth, "prefix": self.prefix()});
                config(&self.client, &self.ns, name, spec).await?;
                Ok(provider_ref("SecretsManager", name, "", "Provider"))
            }
            Service::ParameterStore => {
                store(&self.client, Some(&self.ns), name, aws_store("ParameterStore", &self.prefix(), auth)).await?;
                Ok(store_ref("SecretStore", name, &self.ns))
            }
        }
    }

    async fn setup(&self) -> Result<(), String> {
        keys_secret(&self.client, &self.ns).await?;
        self.config(CONFIG, keys(None)).await.map(drop)
    }
}

/// A stored value (a JSON object) as its properties.
fn properties(value: &[u8]) -> Result<Properties, String> {
    serde_json::from_slice(value).map_err(|e| format!("not a JSON object of strings: {e}"))
}

#[tonic::async_trait]
impl ConformanceTarget for AwsTarget {
    fn name(&self) -> String {
        match self.service {
            Service::SecretsManager => "AWS Secrets Manager".into(),
            Service::ParameterStore => "AWS Parameter Store".into(),
        }
    }

    async fn start(&self) -> Result<RunningProvider, TestkitError> {
        start_provider_at(&self.moto.endpoint()).await
    }

    fn provider_ref(&self) -> ProviderReference {
        match self.service {
            Service::SecretsManager => provider_ref("SecretsManager", CONFIG, "", "Provider"),
            Service::ParameterStore => store_ref("SecretStore", CONFIG, &self.ns),
        }
    }

    fn source_namespace(&self) -> String {
        self.ns.clone()
    }

    fn find_path(&self) -> Option<String> {
        Some("find/".into())
    }

    async fn seed(&self, key: &str, properties: &Properties) -> Result<(), String> {
        let name = format!("{}{key}", self.prefix());
        let value = serde_json::to_string(properties).map_err(|e| e.to_string())?;
        match self.service {
            Service::SecretsManager => {
                { self.sm.create_secret().name(&name).secret_string(value).send().await.map(drop) }
                    .map_err(|e| format!("create secret {name}: {e:?}"))
            }
            Service::ParameterStore => self
                .ssm
                .put_parameter()
                .name(&name)
                .value(value)
                .r#type(ParameterType::String)
                .overwrite(true)
                .send()
                .await
                .map(drop)
                .map_err(|e| format!("put parameter {name}: {e:?}")),
        }
    }

    async fn read(&self, key: &str) -> Result<Option<Properties>, String> {
        let name = format!("{}{key}", self.prefix());
        match self.service {
            Service::SecretsManager => {
                let described = match self.sm.describe_secret().secret_id(&name).send().await {
                    Ok(d) => d,
                    Err(e) if e.as_service_error().is_some_and(|e| e.is_resource_not_found_exception()) => {
                        return Ok(None);
                    }
                    Err(e) => return Err(format!("describe secret {name}: {e:?}")),
                };
                // Scheduled for deletion: gone, though restorable.
                if described.deleted_date().is_some() {
                    return Ok(None);
                }
                let got = self.sm.get_secret_value().secret_id(&name).send().await;
                let got = got.map_err(|e| format!("get secret value {name}: {e:?}"))?;
                let bytes = match (got.secret_string(), got.secret_binary()) {
                    (Some(s), _) => s.as_bytes().to_vec(),
                    (None, Some(b)) => b.as_ref().to_vec(),
                    (None, None) => return Err(format!("secret {name} has no value")),
                };
                properties(&bytes).map(Some)
            }
            Service::ParameterStore => match self.ssm.get_parameter().name(&name).with_decryption(true).send().await {
                Ok(got) => {
                    let value = got.parameter().and_then(|p| p.value()).unwrap_or_default();
                    properties(value.as_bytes()).map(Some)
                }
                Err(e) if e.as_service_error().is_some_and(|e| e.is_parameter_not_found()) => Ok(None),
                Err(e) => Err(format!("get parameter {name}: {e:?}")),
            },
        }
    }

    fn capabilities(&self) -> SecretStoreCapabilities {
        SecretStoreCapabilities::ReadWrite
    }

    async fn invalid_config(&self) -> Result<(ProviderReference, String), String> {
        let missing = json!({"secretRef": {
            "accessKeyIDSecretRef": {"name": "missing-keys", "key": "id"},
            "secretAccessKeySecretRef": {"name": "missing-keys", "key": "secret"},
        }});
        Ok((self.config("missing-keys", missing).await?, "missing-keys".into()))
    }

    fn not_applicable(&self) -> Vec<(Case, &'static str)> {
        // AWS endpoints are the provider process's settings (the operator's), never a configuration's.
        vec![(Case::DeniedAddress, "an AWS configuration names no server")]
    }

    async fn point_at(&self, server: &Hostile) -> Result<Pointed, String> {
        // The endpoint is the provider process's setting (AWS_ENDPOINT_URL), not the configuration's.
        let process = start_provider_at(&server.http_url).await.map_err(|e| e.to_string())?;
        Ok(Pointed::Process(Box::new(process), self.provider_ref()))
    }
}

async fn conforms(service: Service) {
    with_temp_namespace(&[], |client, ns| async move {
        let target = AwsTarget::new(service, client, ns).await;
        if let Err(e) = target.setup().await {
            panic!("setting up the AWS store: {e}");
        }
        match conformance::run_all(&target).await {
            Ok(report) => println!("{report}"),
            Err(report) => panic!("{report}"),
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_aws_provider_conforms_with_secrets_manager() {
    let _guard = common::exclusive().await;
    conforms(Service::SecretsManager).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_aws_provider_conforms_with_parameter_store() {
    let _guard = common::exclusive().await;
    conforms(Service::ParameterStore).await;
}
