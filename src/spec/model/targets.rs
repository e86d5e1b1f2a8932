//! The `Targets` document (usually `dlqctl.yaml`): named connections to the live systems,
//! which backend each one is, and what dlqctl may change there.
//!
//! `Backend` lives here because a target is what has one; channels learn theirs through
//! `spec.target`. Depends only on `ApiVersion` (`spec::model::api`).

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::api::ApiVersion;

/// Named connections to the live systems, and what dlqctl may change there.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[schemars(title = "dlqctl Targets (dlqctl/v1)")]
pub struct Targets {
    pub api_version: ApiVersion,
    pub kind: TargetsKind,
    /// Connections by name; channels refer to them with `spec.target`.
    #[schemars(extend("propertyNames" = {"pattern": "^[a-z0-9][a-z0-9_-]*$"}))]
    pub targets: BTreeMap<String, Target>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum TargetsKind {
    Targets,
}

/// One connection. Which fields apply depends on `backend`; credentials are never written
/// here, only the names of the environment variables that hold them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Target {
    pub backend: Backend,
    /// SQS: AWS region; default: the SDK's region chain (AWS_REGION, the profile's `region`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
    /// SQS: endpoint override (a local emulator); default: the AWS endpoint of the region.
    /// `${VAR}` and `${VAR:-default}` read the environment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    /// SQS: named AWS profile; default: the standard credential chain.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<String>,
    /// RabbitMQ: management API URL, e.g. `https://rabbit.internal:15671`.
    /// `${VAR}` and `${VAR:-default}` read the environment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// RabbitMQ: AMQP URL for `dlqctl redrive` (no credentials: those come from
    /// `usernameEnv`/`passwordEnv`), e.g. `amqps://rabbit.internal:5671`. Default: the host of
    /// `url` on port 5672 (`amqp`), or 5671 (`amqps`) when `url` is https.
    /// `${VAR}` and `${VAR:-default}` read the environment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub amqp_url: Option<String>,
    /// RabbitMQ: default virtual host. Default `/`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vhost: Option<String>,
    /// RabbitMQ: name of the environment variable holding the user name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = "^[A-Za-z_][A-Za-z0-9_]*$"))]
    pub username_env: Option<String>,
    /// RabbitMQ: name of the environment variable holding the password.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = "^[A-Za-z_][A-Za-z0-9_]*$"))]
    pub password_env: Option<String>,
    /// Kafka: bootstrap servers, `host:port[,host:port]`.
    /// `${VAR}` and `${VAR:-default}` read the environment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bootstrap_servers: Option<String>,
    /// Kafka: librdkafka properties (no secrets).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub properties: Option<BTreeMap<String, String>>,
    /// Kafka: librdkafka properties whose values are read from the named environment variables
    /// (e.g. `sasl.password: KAFKA_PASSWORD`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_properties: Option<BTreeMap<String, String>>,
    /// Kafka: the Kafka Connect worker's REST API (`http://connect.internal:8083`), for the
    /// channels' `kafka.connectors`. Any worker of the Connect cluster will do. No redirect is
    /// followed. `${VAR}` and `${VAR:-default}` read the environment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connect_url: Option<String>,
    /// Kafka: how many brokers the cluster has, where the targets file says so: lint then
    /// refuses a connector's dead-letter replication factor above it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 100000))]
    pub brokers: Option<u32>,
    /// Pub/Sub: the Google Cloud project id that holds the topics and subscriptions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = "^[a-z][a-z0-9-]{4,28}[a-z0-9]$"))]
    pub project: Option<String>,
    /// Pub/Sub: the emulator's `host:port` (no credentials are sent to it). Default:
    /// `PUBSUB_EMULATOR_HOST` when set, as Google's clients do; else pubsub.googleapis.com.
    /// `${VAR}` and `${VAR:-default}` read the environment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub emulator_host: Option<String>,
    /// Pub/Sub: grant the Pub/Sub service agent what dead lettering needs
    /// (`roles/pubsub.publisher` on each dead-letter topic, `roles/pubsub.subscriber` on each
    /// source subscription) when apply writes them. Needs `projectNumber`. Default false: the
    /// plan lists the `gcloud` commands as a note instead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grant_service_agent: Option<bool>,
    /// Pub/Sub: the project's number, which names its service agent
    /// (`service-NUMBER@gcp-sa-pubsub.iam.gserviceaccount.com`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = "^[0-9]{1,20}$"))]
    pub project_number: Option<String>,
    /// Pub/Sub: where `status` and the exporter read the dead-letter subscriptions' depth and
    /// oldest age and the dead-letter rate (Cloud Monitoring's `projects.timeSeries.list`).
    /// Default on Google Cloud: `https://monitoring.googleapis.com/v3` with the same access
    /// token; on an emulator (which has no metrics): off unless `endpoint` is named.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub monitoring: Option<PubsubMonitoring>,
    /// Azure Service Bus: the Azure subscription id (a GUID) that holds the namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(
        pattern = "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"
    ))]
    pub subscription_id: Option<String>,
    /// Azure Service Bus: the resource group that holds the namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 90))]
    pub resource_group: Option<String>,
    /// Azure Service Bus: the namespace's name (`NAME` of `NAME.servicebus.windows.net`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = "^[A-Za-z][A-Za-z0-9-]{4,48}[A-Za-z0-9]$"))]
    pub namespace: Option<String>,
    /// Azure Service Bus: the Azure Resource Manager endpoint. Default
    /// `https://management.azure.com` (tests point it at a local fake).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arm_url: Option<String>,
    /// Azure Service Bus: the namespace's data-plane endpoint (status, redrive). Default
    /// `https://NAMESPACE.servicebus.windows.net`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_url: Option<String>,
    /// Azure Service Bus: the Microsoft Entra ID token endpoint for client credentials.
    /// Default `https://login.microsoftonline.com/TENANT/oauth2/v2.0/token`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_url: Option<String>,
    /// Azure Service Bus: the environment variable holding a ready access token (e.g. from
    /// `az account get-access-token`). Either this or `tenantId`, `clientId` and
    /// `clientSecretEnv`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = "^[A-Za-z_][A-Za-z0-9_]*$"))]
    pub access_token_env: Option<String>,
    /// Azure Service Bus: the environment variable holding a ready access token for the data
    /// plane (audience `https://servicebus.azure.net`), beside `accessTokenEnv`'s for ARM
    /// (`https://management.azure.com`). Without it, `accessTokenEnv`'s token is sent to both,
    /// which a real namespace refuses unless the token is valid for both. Not with client
    /// credentials, which fetch a token for each.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = "^[A-Za-z_][A-Za-z0-9_]*$"))]
    pub data_access_token_env: Option<String>,
    /// Azure Service Bus: the Microsoft Entra tenant of the client credentials.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1))]
    pub tenant_id: Option<String>,
    /// Azure Service Bus: the application (client) id of the client credentials.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1))]
    pub client_id: Option<String>,
    /// Azure Service Bus: the environment variable holding the client secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = "^[A-Za-z_][A-Za-z0-9_]*$"))]
    pub client_secret_env: Option<String>,
    /// Azure Service Bus: `true` to get tokens from the machine's managed identity (the
    /// instance metadata service of an Azure VM, scale set or AKS node), with `clientId` for a
    /// user-assigned identity. Instead of `accessTokenEnv` or client credentials.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub managed_identity: Option<bool>,
    /// Azure Service Bus: the managed identity's token endpoint. Default
    /// `http://169.254.169.254/metadata/identity/oauth2/token` (tests point it at a local fake).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity_url: Option<String>,
    /// Azure Service Bus: `true` to get tokens with Kubernetes workload identity (AKS): the
    /// service account token in the file `AZURE_FEDERATED_TOKEN_FILE` names is exchanged at
    /// the Microsoft Entra token endpoint for application `clientId` (else `AZURE_CLIENT_ID`)
    /// of tenant `tenantId` (else `AZURE_TENANT_ID`): the variables the AKS workload identity
    /// webhook sets in the pod. The endpoint is `tokenUrl`, else
    /// `AZURE_AUTHORITY_HOST/TENANT/oauth2/v2.0/token` (default host
    /// `https://login.microsoftonline.com`). Instead of the other ways.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workload_identity: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ownership: Option<Ownership>,
    /// RabbitMQ, Kafka: where the Prometheus rules of `dlqctl alerts` read the depth from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alerts: Option<TargetAlerts>,
    /// What `status` and `redrive --dry-run` hide of this target's messages besides what they
    /// always hide (secret-looking headers, card numbers): see docs/status.md.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redact: Option<Redact>,
    /// Who may take messages out of this target's dead-letter queues, and what they must
    /// say: checked by `redrive` before anything is read or moved (docs/redrive.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operations: Option<Operations>,
}

/// Where a Pub/Sub target's metrics are read (docs/pubsub.md, "Status and redrive").
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PubsubMonitoring {
    /// `false`: never read Cloud Monitoring (the depth is then counted by pulling, and the
    /// dead-letter rate is unknown). Default: on where there is an endpoint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// The Monitoring API v3 base URL, e.g. `https://monitoring.googleapis.com/v3` (the
    /// default on Google Cloud). Named on an emulator target, it turns the reads on there (no
    /// credentials are sent to it then). Written as is (no `${VAR}`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
}

/// The rules for operating a target's dead letters (`redrive` and `archive`), and where their
/// audit records go.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Operations {
    /// `true`: a redrive that moves messages needs `--reason` (a dry run does not).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub require_reason: Option<bool>,
    /// The identities that may move messages, as the backend names the target's credentials
    /// (SQS: the caller's ARN; RabbitMQ: the user; Kafka: `User:<name>`; Pub/Sub:
    /// `emulator`), exactly or as globs (`arn:aws:sts::123456789012:assumed-role/ops/*`).
    /// Anyone else is refused before anything moves. Absent: anyone the backend lets in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(inner(length(min = 1)))]
    pub allowed_operators: Option<Vec<String>>,
    /// Where every run's audit record on this target also goes (redrive, archive, and runs
    /// refused by these rules): `s3://bucket/prefix` (through the AWS configuration of the
    /// machine that runs dlqctl) or an absolute folder path, one object per record
    /// (`<channel>/<UTC start>-<pid>-<kind>.json`, read back); or `queue:NAME` (SQS,
    /// RabbitMQ) / `topic:NAME` (Kafka, Pub/Sub) on this target, one message per record,
    /// confirmed. A record that does not land fails the run (exit 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1))]
    pub audit_to: Option<String>,
    /// The environment variable holding this target's HMAC key (issue 52, L4): `archive`
    /// then writes an HMAC-SHA256 of each object and of the manifest, `redrive
    /// --from-archive` refuses an archive whose HMACs do not verify (or that has none), and
    /// each audit journal record carries an HMAC. Without it, the checksums guard against
    /// damage, not tampering (docs/archive.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = "^[A-Za-z_][A-Za-z0-9_]*$"))]
    pub hmac_key_env: Option<String>,
}

/// More of a message to hide when it is shown (display only: a redrive moves it whole).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Redact {
    /// Header (SQS: message attribute) names whose values are shown as `«redacted, N bytes»`,
    /// case-insensitive, e.g. `x-customer-email`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(inner(regex(pattern = "^[!-9;-~]{1,255}$")))]
    pub headers: Vec<String>,
    /// JSON pointers (RFC 6901) into JSON bodies whose values are shown as `«redacted, N
    /// bytes»`, e.g. `/customer/email`. With any set, a body that is not JSON, or is cut by
    /// `--max-body`, is not shown at all.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(inner(regex(pattern = "^(/([^~/]|~[01])*)+$")))]
    pub body_pointers: Vec<String>,
}

/// How `dlqctl alerts` reads a RabbitMQ or Kafka target's dead-letter queues.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct TargetAlerts {
    /// The depth metric: `exporter` (default: `dlqctl exporter`'s `dlq_depth`) or `native`
    /// (RabbitMQ: the `rabbitmq_prometheus` plugin's `rabbitmq_detailed_queue_messages`;
    /// Kafka: kafka_exporter's consumer-group lag, or retained offsets without
    /// `deadLetter.consumerGroup`). The age always comes from `dlqctl exporter`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<MetricSource>,
    /// Label matchers added to every native selector, to tell this cluster's series from
    /// another's (e.g. `{cluster: prod}`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("propertyNames" = {"pattern": "^[a-zA-Z_][a-zA-Z0-9_]*$"}))]
    pub match_labels: Option<BTreeMap<String, String>>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum MetricSource {
    #[default]
    Exporter,
    Native,
}

#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    Sqs,
    Rabbitmq,
    Kafka,
    Pubsub,
    #[serde(rename = "azure-servicebus")]
    AzureServicebus,
}

impl Backend {
    /// Every backend, in the order docs and tables list them: the one list of backends.
    /// Code that treats each backend's block or table row in turn iterates this, so a new
    /// backend cannot be missed in one of them (a hand-written `["sqs", "rabbitmq", "kafka"]`
    /// once let a Defaults `pubsub:` block reach every channel). A test checks it against the
    /// values the schema accepts for `backend`, so a new variant cannot be missed here either.
    pub const ALL: [Backend; 5] = [
        Backend::Sqs,
        Backend::Rabbitmq,
        Backend::Kafka,
        Backend::Pubsub,
        Backend::AzureServicebus,
    ];

    /// The backend whose key (`backend: sqs`, the `sqs:` block) is `key`.
    pub fn from_key(key: &str) -> Option<Backend> {
        Backend::ALL.into_iter().find(|b| b.as_str() == key)
    }

    /// Its key: the `backend:` value and the name of its spec block (`sqs`, `pubsub`).
    pub fn as_str(self) -> &'static str {
        match self {
            Backend::Sqs => "sqs",
            Backend::Rabbitmq => "rabbitmq",
            Backend::Kafka => "kafka",
            Backend::Pubsub => "pubsub",
            Backend::AzureServicebus => "azure-servicebus",
        }
    }
}

impl Backend {
    /// The product name, for prose: `SQS`, `RabbitMQ`, `Kafka`.
    pub fn display_name(self) -> &'static str {
        match self {
            Backend::Sqs => "SQS",
            Backend::Rabbitmq => "RabbitMQ",
            Backend::Kafka => "Kafka",
            Backend::Pubsub => "Pub/Sub",
            Backend::AzureServicebus => "Azure Service Bus",
        }
    }

    /// `an SQS`, `a RabbitMQ`, `a Kafka`.
    pub fn with_article(self) -> &'static str {
        match self {
            Backend::Sqs => "an SQS",
            Backend::Rabbitmq => "a RabbitMQ",
            Backend::Kafka => "a Kafka",
            Backend::Pubsub => "a Pub/Sub",
            Backend::AzureServicebus => "an Azure Service Bus",
        }
    }

    /// What its message stores are called: `queue` or `topic`.
    pub fn resource_noun(self) -> &'static str {
        match self {
            Backend::Sqs | Backend::Rabbitmq | Backend::AzureServicebus => "queue",
            Backend::Kafka | Backend::Pubsub => "topic",
        }
    }
}

impl std::fmt::Display for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What dlqctl may change or delete on this target. RabbitMQ and Kafka have nowhere to record
/// ownership, so it is declared here; SQS queues and alarms are also tagged, Pub/Sub topics
/// and subscriptions labelled.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Ownership {
    /// Queue, exchange, policy, topic and subscription names starting with one of these are dlqctl's.
    #[schemars(length(min = 1))]
    pub prefixes: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: [Backend; 5] = Backend::ALL;

    #[test]
    fn all_lists_every_backend_the_schema_accepts_once() {
        // The derived schema lists every variant, so a new one fails here until it is in ALL.
        let schema = serde_json::to_value(schemars::schema_for!(Backend)).expect("serialises");
        let accepted = schema["enum"]
            .as_array()
            .expect("an enum of strings")
            .iter()
            .filter_map(|v| v.as_str())
            .collect::<Vec<_>>();
        assert_eq!(accepted, ALL.map(Backend::as_str));
        for b in ALL {
            assert_eq!(Backend::from_key(b.as_str()), Some(b));
            assert_eq!(
                serde_json::from_value::<Backend>(serde_json::json!(b.as_str())).ok(),
                Some(b)
            );
        }
        assert_eq!(Backend::from_key("rabbit"), None);
    }

    #[test]
    fn backends_are_named_for_keys_prose_and_resources() {
        assert_eq!(
            ALL.map(Backend::as_str),
            ["sqs", "rabbitmq", "kafka", "pubsub", "azure-servicebus"]
        );
        assert_eq!(
            ALL.map(|b| b.to_string()),
            ["sqs", "rabbitmq", "kafka", "pubsub", "azure-servicebus"].map(str::to_owned)
        );
        assert_eq!(
            ALL.map(Backend::display_name),
            ["SQS", "RabbitMQ", "Kafka", "Pub/Sub", "Azure Service Bus"]
        );
        assert_eq!(
            ALL.map(Backend::with_article),
            [
                "an SQS",
                "a RabbitMQ",
                "a Kafka",
                "a Pub/Sub",
                "an Azure Service Bus"
            ]
        );
        assert_eq!(
            ALL.map(Backend::resource_noun),
            ["queue", "queue", "topic", "topic", "queue"]
        );
    }
}
