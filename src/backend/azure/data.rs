//! Azure Service Bus's data plane: the REST runtime API of one namespace
//! (`https://NAMESPACE.servicebus.windows.net`, or the target's `dataUrl`), which is how
//! dlqctl reads and moves messages. ARM (`read.rs`) never touches a message.
//!
//! Two faces, so that a status read cannot write by construction: [`DataPlane`] can only
//! lock a message ("Peek-Lock Message (Non-Destructive Read)") and hand it back ("Unlock
//! Message"): the REST API has no read without a lock. Only a [`DataWriter`], which the
//! redrive mover makes, can send ("Send Message") and complete ("Delete Message").
//!
//! What a lock does to a message: nobody else receives it until it is unlocked or its
//! lockDuration runs out, and its DeliveryCount rises by one (in `$DeadLetterQueue` nothing
//! more: no dead-lettering happens there). Each message's lock is addressed by its parts
//! (`{entity}/messages/{SequenceNumber}/{LockToken}`, as the reference allows) rather than by
//! the `Location` the server sends, so no call goes anywhere but `dataUrl`. Calls are counted
//! per API for `--stats`; redirects are never followed; an answer larger than
//! [`MAX_BODY`](crate::backend::wire::http::MAX_BODY) is refused. Writes are never retried:
//! the mover decides what a failure means.

use std::sync::Arc;
use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde_json::{Map, Value};

use super::seg;
use crate::backend::wire::http::{HttpError, MAX_BODY, Stats, redact_userinfo};
use crate::backend::wire::token::Bearer;

/// Seconds a peek-lock waits for a message before answering 204.
pub const PEEK_TIMEOUT_SECS: u32 = 1;
const TIMEOUT: Duration = Duration::from_secs(30);

/// The subqueue of an entity's dead letters, as the data plane names it.
pub const DEAD_LETTER_SUBQUEUE: &str = "$DeadLetterQueue";

/// Response headers that are not a message's custom properties: HTTP's own and the API's.
const NOT_CUSTOM: [&str; 11] = [
    "content-type",
    "content-length",
    "location",
    "brokerproperties",
    "date",
    "server",
    "transfer-encoding",
    "connection",
    "keep-alive",
    "strict-transport-security",
    "x-content-type-options",
];

/// The lock-and-unlock face of one namespace's data plane.
#[derive(Clone)]
pub struct DataPlane {
    client: reqwest::Client,
    target: String,
    base: String,
    /// The data plane's token (audience `https://servicebus.azure.net`): handed in, or
    /// fetched with client credentials on the first call.
    bearer: Bearer,
    creds_hint: String,
    stats: Arc<Stats>,
}

impl std::fmt::Debug for DataPlane {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the token.
        f.debug_struct("DataPlane")
            .field("base", &self.base)
            .finish_non_exhaustive()
    }
}

/// The sending and completing face (redrive only).
#[derive(Debug, Clone)]
pub struct DataWriter {
    read: DataPlane,
}

/// A message this run holds locked.
#[derive(Debug, Clone)]
pub struct Locked {
    /// The entity it was locked in (`queue/$DeadLetterQueue`).
    pub entity: String,
    /// BrokerProperties as the server sent them.
    pub broker: Map<String, Value>,
    /// Custom properties, in the order sent, values as text (a JSON string unquoted).
    pub custom: Vec<(String, String)>,
    pub content_type: Option<String>,
    pub body: Vec<u8>,
    pub sequence: u64,
    pub lock_token: String,
}

impl Locked {
    pub fn message_id(&self) -> String {
        self.broker
            .get("MessageId")
            .and_then(Value::as_str)
            .map_or_else(|| format!("seq:{}", self.sequence), str::to_owned)
    }

    fn lock_path(&self) -> String {
        format!(
            "/{}/messages/{}/{}",
            entity_path(&self.entity),
            self.sequence,
            seg(&self.lock_token)
        )
    }
}

/// An entity (`queue`, `queue/$DeadLetterQueue`) as a URL path, each segment encoded
/// (`$` kept: it is allowed in a path).
fn entity_path(entity: &str) -> String {
    entity
        .split('/')
        .map(|s| match s.strip_prefix('$') {
            Some(rest) => format!("${}", seg(rest)),
            None => seg(s),
        })
        .collect::<Vec<_>>()
        .join("/")
}

/// A custom property header's value as text: a JSON string unquoted, anything else as it is.
pub fn property_text(raw: &str) -> String {
    match serde_json::from_str::<Value>(raw) {
        Ok(Value::String(s)) => s,
        _ => raw.to_owned(),
    }
}

/// Text as a custom property header's value: a JSON string, non-ASCII and controls escaped
/// so the header stays visible ASCII.
pub fn property_header(text: &str) -> String {
    let json = Value::String(text.to_owned()).to_string();
    let mut out = String::with_capacity(json.len());
    for c in json.chars() {
        if c.is_ascii() && !c.is_ascii_control() {
            out.push(c);
        } else {
            let mut buf = [0u16; 2];
            for u in c.encode_utf16(&mut buf) {
                out.push_str(&format!("\\u{u:04x}"));
            }
        }
    }
    out
}

impl DataPlane {
    pub fn new(
        target: &str,
        base: &str,
        bearer: Bearer,
        creds_hint: &str,
        insecure: bool,
        stats: Arc<Stats>,
    ) -> Result<Self, HttpError> {
        let client = reqwest::Client::builder()
            .timeout(TIMEOUT)
            .connect_timeout(Duration::from_secs(10))
            .danger_accept_invalid_certs(insecure)
            .user_agent(concat!("dlqctl/", env!("CARGO_PKG_VERSION")))
            // The token goes only to `dataUrl`: no redirect is followed.
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| HttpError::Connect {
                url: redact_userinfo(base),
                reason: e.to_string(),
            })?;
        Ok(DataPlane {
            client,
            target: target.to_owned(),
            base: redact_userinfo(base.trim_end_matches('/')),
            bearer,
            creds_hint: creds_hint.to_owned(),
            stats,
        })
    }

    pub fn base(&self) -> &str {
        &self.base
    }

    /// The writer for redrive. Status never calls this.
    pub fn into_writer(self) -> DataWriter {
        DataWriter { read: self }
    }

    /// One call: status, headers and body. Any 2xx, 404 and 410 are answers; anything else
    /// an error naming `api`.
    async fn call(
        &self,
        method: Method,
        api: &str,
        path: &str,
        headers: &[(String, String)],
        body: Option<Vec<u8>>,
    ) -> Result<(StatusCode, reqwest::header::HeaderMap, Vec<u8>), HttpError> {
        // A token that cannot be had is the call's answer (it names the token endpoint).
        let token = self.bearer.token().await?;
        self.stats.count(api);
        let started = std::time::Instant::now();
        let url = format!("{}{path}", self.base);
        let mut req = self
            .client
            .request(method.clone(), &url)
            .bearer_auth(&token);
        for (k, v) in headers {
            req = req.header(k.as_str(), v.as_str());
        }
        if let Some(b) = body {
            req = req.body(b);
        }
        let answer = async {
            let mut resp = req
                .send()
                .await
                .map_err(|e| connect_error(&self.base, &e))?;
            let status = resp.status();
            if status.is_redirection() {
                return Err(HttpError::Redirect {
                    api: api.to_owned(),
                    status: status.as_u16(),
                    location: resp
                        .headers()
                        .get(reqwest::header::LOCATION)
                        .and_then(|l| l.to_str().ok())
                        .map_or_else(|| "(no Location)".to_owned(), redact_userinfo)
                        .chars()
                        .take(300)
                        .collect(),
                });
            }
            let too_large = || HttpError::TooLarge {
                api: api.to_owned(),
                limit: MAX_BODY / (1024 * 1024),
            };
            if resp.content_length().is_some_and(|n| n > MAX_BODY as u64) {
                return Err(too_large());
            }
            let head = resp.headers().clone();
            let mut bytes = Vec::new();
            while let Some(chunk) = resp
                .chunk()
                .await
                .map_err(|e| connect_error(&self.base, &e))?
            {
                if bytes.len() + chunk.len() > MAX_BODY {
                    return Err(too_large());
                }
                bytes.extend_from_slice(&chunk);
            }
            if status.is_success() || matches!(status.as_u16(), 404 | 410) {
                return Ok((status, head, bytes));
            }
            if status == StatusCode::UNAUTHORIZED {
                return Err(HttpError::Unauthorized {
                    api: format!("the data plane ({}): {api}", self.base),
                    creds: self.creds_hint.clone(),
                });
            }
            Err(HttpError::Status {
                api: api.to_owned(),
                status: status.as_u16(),
                reason: reason(&bytes),
            })
        }
        .await;
        let outcome = match &answer {
            Ok((status, _, bytes)) => format!("{status} ({} bytes)", bytes.len()),
            Err(e) => format!("failed: {e}"),
        };
        tracing::info!(
            "target {}: {method} {}{path} -> {outcome} in {} ms",
            self.target,
            self.base,
            started.elapsed().as_millis()
        );
        answer
    }

    /// Peek-Lock: the entity's next unlocked message, locked for this run; `None` when there
    /// is none (204). A missing entity (410) is an error naming it.
    pub async fn peek_lock(&self, entity: &str) -> Result<Option<Locked>, HttpError> {
        let api = "POST {entity}/messages/head";
        let (status, head, body) = self
            .call(
                Method::POST,
                api,
                &format!(
                    "/{}/messages/head?timeout={PEEK_TIMEOUT_SECS}",
                    entity_path(entity)
                ),
                &[],
                Some(Vec::new()),
            )
            .await?;
        match status.as_u16() {
            204 => return Ok(None),
            201 | 200 => {}
            s => {
                return Err(HttpError::Status {
                    api: api.to_owned(),
                    status: s,
                    reason: if s == 410 {
                        format!("`{entity}` does not exist")
                    } else {
                        reason(&body)
                    },
                });
            }
        }
        let text = |n: &str| head.get(n).and_then(|v| v.to_str().ok());
        let broker: Map<String, Value> = text("brokerproperties")
            .and_then(|t| serde_json::from_str(t).ok())
            .ok_or_else(|| HttpError::Decode {
                api: api.to_owned(),
                reason: "no BrokerProperties header, or not a JSON object".into(),
            })?;
        let field = |k: &str| broker.get(k);
        let (Some(sequence), Some(lock_token)) = (
            field("SequenceNumber").and_then(Value::as_u64),
            field("LockToken").and_then(Value::as_str),
        ) else {
            return Err(HttpError::Decode {
                api: api.to_owned(),
                reason: "BrokerProperties without SequenceNumber or LockToken".into(),
            });
        };
        let custom = head
            .iter()
            .filter(|(k, _)| !NOT_CUSTOM.contains(&k.as_str()))
            .map(|(k, v)| {
                (
                    k.as_str().to_owned(),
                    property_text(&String::from_utf8_lossy(v.as_bytes())),
                )
            })
            .collect();
        Ok(Some(Locked {
            entity: entity.to_owned(),
            lock_token: lock_token.to_owned(),
            sequence,
            content_type: text("content-type").map(str::to_owned),
            broker,
            custom,
            body,
        }))
    }

    /// Unlock Message: hands a message back (another delivery counted). `false`: its lock
    /// was gone already (404: it expired, and the message is back anyway).
    pub async fn unlock(&self, m: &Locked) -> Result<bool, HttpError> {
        let (status, _, _) = self
            .call(
                Method::PUT,
                "PUT {entity}/messages/{sequence}/{lock}",
                &m.lock_path(),
                &[],
                Some(Vec::new()),
            )
            .await?;
        Ok(status.is_success())
    }

    /// Unlocks every message of `held`; the first error, after trying them all (a lock that
    /// is not handed back runs out after lockDuration, and the message is back then).
    pub async fn unlock_all(&self, held: &[Locked]) -> Result<(), HttpError> {
        let mut first = None;
        for m in held {
            if let Err(e) = self.unlock(m).await {
                first.get_or_insert(e);
            }
        }
        first.map_or(Ok(()), Err)
    }
}

impl DataWriter {
    pub fn reader(&self) -> &DataPlane {
        &self.read
    }

    /// Send Message to `queue`: `broker` as BrokerProperties, `custom` as custom property
    /// headers. Confirmed by 201.
    pub async fn send(
        &self,
        queue: &str,
        content_type: Option<&str>,
        broker: &Map<String, Value>,
        custom: &[(String, String)],
        body: Vec<u8>,
    ) -> Result<(), HttpError> {
        let api = "POST {queue}/messages";
        let mut headers = vec![
            (
                "content-type".to_owned(),
                content_type
                    .unwrap_or("application/octet-stream")
                    .to_owned(),
            ),
            (
                "BrokerProperties".to_owned(),
                Value::Object(broker.clone()).to_string(),
            ),
        ];
        for (k, v) in custom {
            headers.push((k.clone(), property_header(v)));
        }
        let (status, _, answer) = self
            .read
            .call(
                Method::POST,
                api,
                &format!("/{}/messages", entity_path(queue)),
                &headers,
                Some(body),
            )
            .await?;
        if status == StatusCode::CREATED {
            return Ok(());
        }
        Err(HttpError::Status {
            api: api.to_owned(),
            status: status.as_u16(),
            reason: if status.as_u16() == 410 {
                format!("`{queue}` does not exist")
            } else {
                reason(&answer)
            },
        })
    }

    /// Delete Message (complete): `false` when the lock was gone (404): the message was not
    /// removed, and another receiver may have it.
    pub async fn complete(&self, m: &Locked) -> Result<bool, HttpError> {
        let (status, _, _) = self
            .read
            .call(
                Method::DELETE,
                "DELETE {entity}/messages/{sequence}/{lock}",
                &m.lock_path(),
                &[],
                None,
            )
            .await?;
        Ok(status.is_success())
    }
}

/// The server's words: the `<Detail>` of Service Bus's XML error, else the text.
fn reason(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let detail = text
        .split_once("<Detail>")
        .and_then(|(_, rest)| rest.split_once("</Detail>"))
        .map_or(text.as_ref(), |(d, _)| d);
    detail.chars().take(300).collect()
}

fn connect_error(base: &str, e: &reqwest::Error) -> HttpError {
    if e.is_timeout() {
        return HttpError::Timeout {
            url: base.to_owned(),
            secs: TIMEOUT.as_secs(),
        };
    }
    let mut source: &dyn std::error::Error = e;
    while let Some(s) = source.source() {
        source = s;
    }
    HttpError::Connect {
        url: base.to_owned(),
        reason: source.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn custom_properties_go_out_as_json_strings_and_come_back_as_text() {
        assert_eq!(property_header("High"), "\"High\"");
        assert_eq!(property_header("café\n"), "\"caf\\u00e9\\n\"");
        assert_eq!(property_text("\"High\""), "High");
        assert_eq!(property_text("\"caf\\u00e9\""), "café");
        assert_eq!(property_text("12345"), "12345");
        assert_eq!(property_text("12345,ABC"), "12345,ABC");
    }

    #[test]
    fn the_subqueue_keeps_its_dollar_and_names_are_encoded() {
        assert_eq!(
            entity_path("orders/$DeadLetterQueue"),
            "orders/$DeadLetterQueue"
        );
        assert_eq!(entity_path("a b"), "a%20b");
    }

    #[test]
    fn the_reason_is_the_detail_of_the_xml_error() {
        assert_eq!(
            reason(b"<Error><Code>410</Code><Detail>gone. TrackingId:1</Detail></Error>"),
            "gone. TrackingId:1"
        );
        assert_eq!(reason(b"plain"), "plain");
    }
}
