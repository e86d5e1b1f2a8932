//! Topic (and share-group) configs over librdkafka's C API: `DescribeConfigs` and
//! `IncrementalAlterConfigs`;
//! and the topics' ACLs (`DescribeAcls`, `CreateAcls`, `DeleteAcls`), which rdkafka 0.39 has
//! no wrapper for at all.
//!
//! Why this exists: rdkafka 0.39 has no wrapper for IncrementalAlterConfigs (its
//! `alter_configs` is the legacy AlterConfigs, which resets every key it is not given to the
//! default, and which tansu does not implement), and its `describe_configs` drops the error of
//! each resource, so a topic whose configs could not be read looks like a topic with none.
//!
//! Also the drain of the admin client's main event queue ([`drain_events`]), which rdkafka
//! fills and never empties; and a group's committed offsets through the admin client
//! ([`list_group_offsets`], `ListConsumerGroupOffsets`): rdkafka reads them only through a
//! consumer of that group, and a consumer made for one OffsetFetch costs a coordinator lookup
//! and a shutdown (≈ 0.15 s a channel on Apache Kafka 4.4; `status` reads one a channel); and
//! the partitions' ends through the same client ([`list_offsets`], `ListOffsets`), for the
//! same reason.
//!
//! This is the only module with `unsafe`. Each call builds its C objects, owned by small guards
//! that free them on every path, sends one request on a private event queue, waits for the
//! answer on a blocking thread, and copies the answer into owned Rust values before anything
//! is freed. Only topics; only SET and DELETE (APPEND crashed tansu 0.6.0, and dlqctl has no
//! list-valued settings to append to).

use std::ffi::{CStr, CString, c_char, c_int};
use std::sync::Arc;
use std::time::Duration;

use rdkafka::admin::AdminClient;
use rdkafka::bindings as rd;
use rdkafka::client::DefaultClientContext;
use rdkafka::types::RDKafkaErrorCode;

/// The admin client the calls go through (rdkafka's, shared with the rest of the backend).
pub type Admin = AdminClient<DefaultClientContext>;

/// One change to one topic config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigOp {
    /// Set the topic-level value.
    Set { key: String, value: String },
    /// Remove the topic-level value: the broker's default applies again.
    Delete { key: String },
}

impl ConfigOp {
    pub fn key(&self) -> &str {
        match self {
            ConfigOp::Set { key, .. } | ConfigOp::Delete { key } => key,
        }
    }
}

/// Where a config value comes from (Kafka's `ConfigSource`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    Unknown,
    DynamicTopic,
    DynamicBroker,
    DynamicDefaultBroker,
    StaticBroker,
    Default,
    Other,
}

/// One config entry as the broker reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub name: String,
    /// `None` for sensitive values and for keys without a value.
    pub value: Option<String>,
    pub source: Source,
    pub is_default: bool,
    pub is_sensitive: bool,
}

/// A failed call as a whole: the request could not be built, sent or answered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CallError {
    #[error("{api}: {message}")]
    Request { api: &'static str, message: String },
    #[error("{api}: no answer within {secs}s")]
    Timeout { api: &'static str, secs: u64 },
    /// librdkafka or the broker refused the request as a whole.
    #[error("{api}: {message}")]
    Failed {
        api: &'static str,
        code: RDKafkaErrorCode,
        message: String,
    },
}

impl CallError {
    /// The message without the API name (for errors that name the API themselves).
    pub fn detail(&self) -> String {
        match self {
            CallError::Request { message, .. } | CallError::Failed { message, .. } => {
                message.clone()
            }
            CallError::Timeout { secs, .. } => format!("no answer within {secs}s"),
        }
    }
}

/// What the broker said about one topic of a request.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{code}: {message}")]
pub struct TopicError {
    pub code: RDKafkaErrorCode,
    pub message: String,
}

const ALTER: &str = "IncrementalAlterConfigs";
const DESCRIBE: &str = "DescribeConfigs";

/// Applies `ops` to the topic configs, every topic in one request. Answers per topic, in the
/// order the broker answered (each names its topic).
pub async fn incremental_alter_topic_configs(
    admin: &Arc<Admin>,
    changes: &[(String, Vec<ConfigOp>)],
    timeout: Duration,
) -> Result<Vec<(String, Result<(), TopicError>)>, CallError> {
    alter(admin, Request::alter(changes)?, timeout).await
}

/// Reads the configs of the topics, in one request. Per topic: its entries, or the broker's
/// error for it (a topic that does not exist, or that this client may not describe).
pub async fn describe_topic_configs(
    admin: &Arc<Admin>,
    topics: &[String],
    timeout: Duration,
) -> Result<Vec<(String, Result<Vec<Entry>, TopicError>)>, CallError> {
    describe(admin, Request::describe(topics)?, timeout).await
}

/// [`incremental_alter_topic_configs`] for share groups' configs (the GROUP config resource of
/// KIP-848/KIP-1191): answers per group.
pub async fn incremental_alter_group_configs(
    admin: &Arc<Admin>,
    changes: &[(String, Vec<ConfigOp>)],
    timeout: Duration,
) -> Result<Vec<(String, Result<(), TopicError>)>, CallError> {
    let mut request = Request::alter(changes)?;
    request.groups = true;
    alter(admin, request, timeout).await
}

/// [`describe_topic_configs`] for groups: every group config, set (`DynamicGroup` is reported
/// as [`Source::Other`]) or at its broker default. A group that never had a member answers too.
pub async fn describe_group_configs(
    admin: &Arc<Admin>,
    groups: &[String],
    timeout: Duration,
) -> Result<Vec<(String, Result<Vec<Entry>, TopicError>)>, CallError> {
    let mut request = Request::describe(groups)?;
    request.groups = true;
    describe(admin, request, timeout).await
}

/// Sends an IncrementalAlterConfigs `request` (topics or groups): answers per resource.
async fn alter(
    admin: &Arc<Admin>,
    request: Request,
    timeout: Duration,
) -> Result<Vec<(String, Result<(), TopicError>)>, CallError> {
    let admin = Arc::clone(admin);
    run_blocking(ALTER, move || request.send(&admin, timeout))
        .await?
        .map(|answer| {
            answer
                .resources
                .into_iter()
                .map(|r| (r.name, r.error.map_or(Ok(()), Err)))
                .collect()
        })
}

/// Sends a DescribeConfigs `request` (topics or groups): per resource, its entries or the
/// broker's error for it.
async fn describe(
    admin: &Arc<Admin>,
    request: Request,
    timeout: Duration,
) -> Result<Vec<(String, Result<Vec<Entry>, TopicError>)>, CallError> {
    let admin = Arc::clone(admin);
    run_blocking(DESCRIBE, move || request.send(&admin, timeout))
        .await?
        .map(|answer| {
            answer
                .resources
                .into_iter()
                .map(|r| {
                    let result = match r.error {
                        Some(e) => Err(e),
                        None => Ok(r.entries),
                    };
                    (r.name, result)
                })
                .collect()
        })
}

const DESCRIBE_ACLS: &str = "DescribeAcls";

/// What an ACL binding lets its principal do with a topic, as far as dlqctl tells apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum AclOperation {
    Read,
    Write,
    All,
    Other,
}

impl AclOperation {
    /// Kafka's name of the operation (`READ`), as in `kafka-acls.sh --list`.
    pub fn as_str(self) -> &'static str {
        match self {
            AclOperation::Read => "READ",
            AclOperation::Write => "WRITE",
            AclOperation::All => "ALL",
            AclOperation::Other => "OTHER",
        }
    }

    fn c(self) -> rd::rd_kafka_AclOperation_t {
        use rd::rd_kafka_AclOperation_t as Op;
        match self {
            AclOperation::Read => Op::RD_KAFKA_ACL_OPERATION_READ,
            AclOperation::Write => Op::RD_KAFKA_ACL_OPERATION_WRITE,
            AclOperation::All => Op::RD_KAFKA_ACL_OPERATION_ALL,
            AclOperation::Other => Op::RD_KAFKA_ACL_OPERATION_UNKNOWN,
        }
    }
}

/// A binding dlqctl creates or deletes (`kafka.acls`): on one topic by its literal name, for
/// any host (`*`), ALLOW.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Grant {
    pub topic: String,
    pub operation: AclOperation,
    pub principal: String,
}

/// Whether the broker accepts `name` as a topic name: 1 to 249 characters of `a-z`, `A-Z`,
/// `0-9`, `.`, `_`, `-`, and not `.` or `..` (Kafka's `Topic.validate`). The broker's own
/// rule, asked here of live ACLs (the spec's name rule says the same of specs; a unit test
/// keeps the two equal).
pub fn legal_topic_name(name: &str) -> bool {
    let n = name.chars().count();
    (1..=249).contains(&n)
        && name != "."
        && name != ".."
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

impl Grant {
    /// Whether a live binding is one dlqctl could have made: literal, on a valid topic name
    /// (Kafka does not check an ACL's name; `*` is every topic), any host, ALLOW, READ or
    /// WRITE. Only these are deleted when the spec no longer lists them.
    pub fn of(b: &AclBinding) -> Option<Grant> {
        let shape = b.pattern == AclPattern::Literal
            && legal_topic_name(&b.name)
            && b.host == "*"
            && b.allow
            && matches!(b.operation, AclOperation::Read | AclOperation::Write);
        shape.then(|| Grant {
            topic: b.name.clone(),
            operation: b.operation,
            principal: b.principal.clone(),
        })
    }
}

/// How an ACL binding's resource name matches topic names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AclPattern {
    /// The name itself (`*`: every topic).
    Literal,
    /// Every topic whose name starts with it.
    Prefixed,
    Other,
}

/// One ACL binding on topics, as the broker reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AclBinding {
    pub name: String,
    pub pattern: AclPattern,
    /// `User:alice`, or `User:*` for everyone.
    pub principal: String,
    pub host: String,
    pub operation: AclOperation,
    /// `false`: a DENY binding.
    pub allow: bool,
}

/// Every ACL binding on topics (one DescribeAcls, filter: any topic, any pattern, any
/// principal, host, operation and permission). A broker without an authorizer answers
/// SECURITY_DISABLED, returned as [`CallError::Failed`].
pub async fn describe_topic_acls(
    admin: &Arc<Admin>,
    timeout: Duration,
) -> Result<Vec<AclBinding>, CallError> {
    let admin = Arc::clone(admin);
    run_blocking(DESCRIBE_ACLS, move || {
        describe_acls_blocking(&admin, timeout)
    })
    .await?
}

fn describe_acls_blocking(admin: &Admin, timeout: Duration) -> Result<Vec<AclBinding>, CallError> {
    let api = DESCRIBE_ACLS;
    let rk = admin.inner().native_ptr();
    let mut errstr = [0 as c_char; 512];
    // SAFETY: null name, principal and host mean "any"; `errstr` is a writable buffer of the
    // given size. The guard owns the filter; librdkafka copies it when the request is sent.
    let filter = Guard(
        unsafe {
            rd::rd_kafka_AclBindingFilter_new(
                rd::rd_kafka_ResourceType_t::RD_KAFKA_RESOURCE_TOPIC,
                std::ptr::null(),
                rd::rd_kafka_ResourcePatternType_t::RD_KAFKA_RESOURCE_PATTERN_ANY,
                std::ptr::null(),
                std::ptr::null(),
                rd::rd_kafka_AclOperation_t::RD_KAFKA_ACL_OPERATION_ANY,
                rd::rd_kafka_AclPermissionType_t::RD_KAFKA_ACL_PERMISSION_TYPE_ANY,
                errstr.as_mut_ptr(),
                errstr.len(),
            )
        },
        rd::rd_kafka_AclBinding_destroy,
    );
    if filter.0.is_null() {
        // SAFETY: librdkafka NUL-terminates what it writes into `errstr`.
        let message = unsafe { CStr::from_ptr(errstr.as_ptr()) }
            .to_string_lossy()
            .into_owned();
        return Err(CallError::Request { api, message });
    }
    let op = rd::rd_kafka_admin_op_t::RD_KAFKA_ADMIN_OP_DESCRIBEACLS;
    let answered = round_trip(api, rk, op, timeout, |options, queue| {
        // SAFETY: filter, options and queue are live; librdkafka copies the filter.
        unsafe { rd::rd_kafka_DescribeAcls(rk, filter.0, options, queue) }
    })?;
    // SAFETY: the event is live until its guard drops, after every read below.
    unsafe { read_acls(answered.event.0, timeout) }
}

/// Copies the bindings out of a DescribeAcls answer.
///
/// # Safety
/// `event` must be a live event returned by `rd_kafka_queue_poll` for a DescribeAcls request.
unsafe fn read_acls(
    event: *mut rd::rd_kafka_event_t,
    timeout: Duration,
) -> Result<Vec<AclBinding>, CallError> {
    let api = DESCRIBE_ACLS;
    // SAFETY (whole function): every pointer read here belongs to `event`, which outlives this
    // function; strings are copied before returning.
    unsafe {
        event_error(api, event, timeout)?;
        let result = rd::rd_kafka_event_DescribeAcls_result(event);
        if result.is_null() {
            return Err(wrong_event(api));
        }
        let mut n = 0usize;
        let list = rd::rd_kafka_DescribeAcls_result_acls(result, &mut n);
        let mut out = Vec::with_capacity(n);
        for i in 0..n {
            let b = *list.add(i);
            if rd::rd_kafka_AclBinding_restype(b)
                != rd::rd_kafka_ResourceType_t::RD_KAFKA_RESOURCE_TOPIC
            {
                continue;
            }
            out.push(binding_of(b));
        }
        Ok(out)
    }
}

/// Copies one C binding (a topic's) into Rust.
///
/// # Safety
/// `b` must point to a live `rd_kafka_AclBinding_t`.
unsafe fn binding_of(b: *const rd::rd_kafka_AclBinding_t) -> AclBinding {
    use rd::rd_kafka_AclOperation_t as Op;
    use rd::rd_kafka_ResourcePatternType_t as Pat;
    // SAFETY: guaranteed by the caller; strings are copied.
    unsafe {
        AclBinding {
            name: opt_string(rd::rd_kafka_AclBinding_name(b)).unwrap_or_default(),
            pattern: match rd::rd_kafka_AclBinding_resource_pattern_type(b) {
                Pat::RD_KAFKA_RESOURCE_PATTERN_LITERAL => AclPattern::Literal,
                Pat::RD_KAFKA_RESOURCE_PATTERN_PREFIXED => AclPattern::Prefixed,
                _ => AclPattern::Other,
            },
            principal: opt_string(rd::rd_kafka_AclBinding_principal(b)).unwrap_or_default(),
            host: opt_string(rd::rd_kafka_AclBinding_host(b)).unwrap_or_default(),
            operation: match rd::rd_kafka_AclBinding_operation(b) {
                Op::RD_KAFKA_ACL_OPERATION_READ => AclOperation::Read,
                Op::RD_KAFKA_ACL_OPERATION_WRITE => AclOperation::Write,
                Op::RD_KAFKA_ACL_OPERATION_ALL => AclOperation::All,
                _ => AclOperation::Other,
            },
            allow: rd::rd_kafka_AclBinding_permission_type(b)
                == rd::rd_kafka_AclPermissionType_t::RD_KAFKA_ACL_PERMISSION_TYPE_ALLOW,
        }
    }
}

const CREATE_ACLS: &str = "CreateAcls";
const DELETE_ACLS: &str = "DeleteAcls";

/// The request's C bindings (CreateAcls) or filters (DeleteAcls), freed together.
struct Bindings(Vec<*mut rd::rd_kafka_AclBinding_t>);

impl Drop for Bindings {
    fn drop(&mut self) {
        for b in &self.0 {
            // SAFETY: each came from `rd_kafka_AclBinding(Filter)_new` and is freed only here.
            unsafe { rd::rd_kafka_AclBinding_destroy(*b) }
        }
    }
}

/// The C objects of a request: for CreateAcls a binding per grant; for DeleteAcls a filter
/// that matches exactly that binding (every field given, none "any").
fn grant_bindings(api: &'static str, grants: &[Grant]) -> Result<Bindings, CallError> {
    let mut out = Bindings(Vec::with_capacity(grants.len()));
    let host = c_string(api, "host", "*")?;
    for g in grants {
        let topic = c_string(api, "topic", &g.topic)?;
        let principal = c_string(api, "principal", &g.principal)?;
        let mut errstr = [0 as c_char; 512];
        let new = if api == DELETE_ACLS {
            rd::rd_kafka_AclBindingFilter_new
        } else {
            rd::rd_kafka_AclBinding_new
        };
        // SAFETY: the strings are valid C strings that librdkafka copies; `errstr` is a
        // writable buffer of the given size. A null return is checked; the guard owns it.
        let b = unsafe {
            new(
                rd::rd_kafka_ResourceType_t::RD_KAFKA_RESOURCE_TOPIC,
                topic.as_ptr(),
                rd::rd_kafka_ResourcePatternType_t::RD_KAFKA_RESOURCE_PATTERN_LITERAL,
                principal.as_ptr(),
                host.as_ptr(),
                g.operation.c(),
                rd::rd_kafka_AclPermissionType_t::RD_KAFKA_ACL_PERMISSION_TYPE_ALLOW,
                errstr.as_mut_ptr(),
                errstr.len(),
            )
        };
        if b.is_null() {
            // SAFETY: librdkafka NUL-terminates what it writes into `errstr`.
            let why = unsafe { CStr::from_ptr(errstr.as_ptr()) }.to_string_lossy();
            return Err(CallError::Request {
                api,
                message: format!(
                    "{} {} on topic `{}`: {why}",
                    g.principal,
                    g.operation.as_str(),
                    g.topic
                ),
            });
        }
        out.0.push(b);
    }
    Ok(out)
}

/// What the broker said about one binding of a CreateAcls or DeleteAcls request.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct AclError {
    pub code: RDKafkaErrorCode,
    pub message: String,
}

impl AclError {
    /// Reads a librdkafka error owned by a result object (not freed here).
    ///
    /// # Safety
    /// `e` must be null or point to a live `rd_kafka_error_t`.
    unsafe fn of(e: *const rd::rd_kafka_error_t) -> Option<AclError> {
        if e.is_null() {
            return None;
        }
        // SAFETY: guaranteed by the caller; the string is copied.
        unsafe {
            let code = RDKafkaErrorCode::from(rd::rd_kafka_error_code(e));
            let text = opt_string(rd::rd_kafka_error_string(e)).unwrap_or_default();
            let message = if text.is_empty() {
                code.to_string()
            } else {
                format!("{code}: {text}")
            };
            Some(AclError { code, message })
        }
    }

    /// Reads the error code a broker set on one binding of an answer (DeleteAcls reports one
    /// per matched binding, besides one per filter).
    ///
    /// # Safety
    /// `b` must point to a live `rd_kafka_AclBinding_t`.
    unsafe fn of_binding(b: *const rd::rd_kafka_AclBinding_t) -> Option<AclError> {
        // SAFETY: guaranteed by the caller; the error belongs to the binding.
        unsafe { AclError::of(rd::rd_kafka_AclBinding_error(b)) }
    }
}

/// Creates the bindings of `grants` in one CreateAcls request. One answer per grant, in order
/// (Kafka answers in request order): `Err` with the broker's reason for a refused one.
pub async fn create_acls(
    admin: &Arc<Admin>,
    grants: Vec<Grant>,
    timeout: Duration,
) -> Result<Vec<Result<(), AclError>>, CallError> {
    let admin = Arc::clone(admin);
    let answers = run_blocking(CREATE_ACLS, move || {
        acls_blocking(CREATE_ACLS, &admin, &grants, timeout)
    })
    .await??;
    Ok(answers.into_iter().map(|a| a.map(|_| ())).collect())
}

/// Deletes exactly the bindings of `grants` in one DeleteAcls request (a filter each, every
/// field given). One answer per grant, in order: how many bindings the filter deleted, or the
/// error the broker set on the filter or on any binding it matched.
pub async fn delete_acls(
    admin: &Arc<Admin>,
    grants: Vec<Grant>,
    timeout: Duration,
) -> Result<Vec<Result<usize, AclError>>, CallError> {
    let admin = Arc::clone(admin);
    run_blocking(DELETE_ACLS, move || {
        acls_blocking(DELETE_ACLS, &admin, &grants, timeout)
    })
    .await?
}

/// One CreateAcls or DeleteAcls round trip; per grant, the count of bindings it matched
/// (1 for a created one).
fn acls_blocking(
    api: &'static str,
    admin: &Admin,
    grants: &[Grant],
    timeout: Duration,
) -> Result<Vec<Result<usize, AclError>>, CallError> {
    let rk = admin.inner().native_ptr();
    let mut bindings = grant_bindings(api, grants)?;
    let (op, create) = if api == DELETE_ACLS {
        (rd::rd_kafka_admin_op_t::RD_KAFKA_ADMIN_OP_DELETEACLS, false)
    } else {
        (rd::rd_kafka_admin_op_t::RD_KAFKA_ADMIN_OP_CREATEACLS, true)
    };
    let answered = round_trip(api, rk, op, timeout, |options, queue| {
        // SAFETY: the array holds `len` live bindings; librdkafka copies them (ours are still
        // freed by their guard); options and queue are live.
        unsafe {
            let (list, len) = (bindings.0.as_mut_ptr(), bindings.0.len());
            if create {
                rd::rd_kafka_CreateAcls(rk, list, len, options, queue);
            } else {
                rd::rd_kafka_DeleteAcls(rk, list, len, options, queue);
            }
        }
    })?;
    let event = answered.event.0;
    // SAFETY: the event is live until `answered` drops, after every read below; errors are
    // owned by the result objects (not destroyed here) and their strings are copied.
    unsafe {
        event_error(api, event, timeout)?;
        let mut n = 0usize;
        let mut out = Vec::with_capacity(grants.len());
        if create {
            let result = rd::rd_kafka_event_CreateAcls_result(event);
            if result.is_null() {
                return Err(wrong_event(api));
            }
            let list = rd::rd_kafka_CreateAcls_result_acls(result, &mut n);
            for i in 0..n {
                let r = *list.add(i);
                out.push(match AclError::of(rd::rd_kafka_acl_result_error(r)) {
                    Some(e) => Err(e),
                    None => Ok(1),
                });
            }
        } else {
            let result = rd::rd_kafka_event_DeleteAcls_result(event);
            if result.is_null() {
                return Err(wrong_event(api));
            }
            let list = rd::rd_kafka_DeleteAcls_result_responses(result, &mut n);
            for i in 0..n {
                let r = *list.add(i);
                if let Some(e) = AclError::of(rd::rd_kafka_DeleteAcls_result_response_error(r)) {
                    out.push(Err(e));
                    continue;
                }
                let mut matched = 0usize;
                let bindings =
                    rd::rd_kafka_DeleteAcls_result_response_matching_acls(r, &mut matched);
                let refused = (0..matched).find_map(|j| AclError::of_binding(*bindings.add(j)));
                out.push(match refused {
                    Some(e) => Err(e),
                    None => Ok(matched),
                });
            }
        }
        if out.len() != grants.len() {
            return Err(CallError::Request {
                api,
                message: format!(
                    "the broker answered {} of {} bindings",
                    out.len(),
                    grants.len()
                ),
            });
        }
        Ok(out)
    }
}

/// The error of a whole answer (a timeout said as one), if any.
///
/// # Safety
/// `event` must be a live event returned by `rd_kafka_queue_poll`.
unsafe fn event_error(
    api: &'static str,
    event: *mut rd::rd_kafka_event_t,
    timeout: Duration,
) -> Result<(), CallError> {
    // SAFETY: guaranteed by the caller; the error string is copied.
    unsafe {
        let err = rd::rd_kafka_event_error(event);
        if err == rd::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR {
            return Ok(());
        }
        let code = RDKafkaErrorCode::from(err);
        let message =
            opt_string(rd::rd_kafka_event_error_string(event)).unwrap_or_else(|| code.to_string());
        if code == RDKafkaErrorCode::RequestTimedOut
            || err == rd::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR__TIMED_OUT
        {
            return Err(CallError::Timeout {
                api,
                secs: timeout.as_secs(),
            });
        }
        Err(CallError::Failed { api, code, message })
    }
}

async fn run_blocking<T: Send + 'static>(
    api: &'static str,
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, CallError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| CallError::Request {
            api,
            message: format!("the request thread failed: {e}"),
        })
}

/// Config keys and values (`None`: DELETE) for one topic, as C strings.
type Ops = Vec<(CString, Option<CString>)>;

/// A request in owned Rust values; the C objects exist only inside [`Request::send`].
#[derive(Debug)]
struct Request {
    api: &'static str,
    /// Topics, or share groups' configs (KIP-1191's GROUP config resource).
    groups: bool,
    topics: Vec<(CString, Ops)>,
}

/// What came back, copied out of librdkafka's memory.
struct Answer {
    resources: Vec<Resource>,
}

struct Resource {
    name: String,
    error: Option<TopicError>,
    entries: Vec<Entry>,
}

fn c_string(api: &'static str, what: &str, s: &str) -> Result<CString, CallError> {
    CString::new(s).map_err(|_| CallError::Request {
        api,
        message: format!("{what} `{}` contains a NUL byte", s.escape_default()),
    })
}

impl Request {
    fn alter(changes: &[(String, Vec<ConfigOp>)]) -> Result<Self, CallError> {
        let mut topics = Vec::with_capacity(changes.len());
        for (topic, ops) in changes {
            let mut c_ops = Vec::with_capacity(ops.len());
            for op in ops {
                let key = c_string(ALTER, "config key", op.key())?;
                let value = match op {
                    ConfigOp::Set { value, .. } => Some(c_string(ALTER, "config value", value)?),
                    ConfigOp::Delete { .. } => None,
                };
                c_ops.push((key, value));
            }
            topics.push((c_string(ALTER, "topic", topic)?, c_ops));
        }
        Ok(Request {
            api: ALTER,
            groups: false,
            topics,
        })
    }

    fn describe(names: &[String]) -> Result<Self, CallError> {
        let topics = names
            .iter()
            .map(|t| Ok((c_string(DESCRIBE, "topic", t)?, Vec::new())))
            .collect::<Result<_, CallError>>()?;
        Ok(Request {
            api: DESCRIBE,
            groups: false,
            topics,
        })
    }

    /// Builds the C request, sends it, and waits (blocking) for the answer.
    fn send(&self, admin: &Admin, timeout: Duration) -> Result<Answer, CallError> {
        let api = self.api;
        let rk = admin.inner().native_ptr();
        let op = if api == ALTER {
            rd::rd_kafka_admin_op_t::RD_KAFKA_ADMIN_OP_INCREMENTALALTERCONFIGS
        } else {
            rd::rd_kafka_admin_op_t::RD_KAFKA_ADMIN_OP_DESCRIBECONFIGS
        };
        let mut resources = Resources(Vec::with_capacity(self.topics.len()));
        for (topic, ops) in &self.topics {
            // librdkafka 2.12 sends RESOURCE_GROUP as the config resource GROUP (32).
            let kind = if self.groups {
                rd::rd_kafka_ResourceType_t::RD_KAFKA_RESOURCE_GROUP
            } else {
                rd::rd_kafka_ResourceType_t::RD_KAFKA_RESOURCE_TOPIC
            };
            // SAFETY: `topic` is a valid C string; librdkafka copies it. A null return (an
            // invalid resource type) is checked; the guard owns the result from here on.
            let res = unsafe { rd::rd_kafka_ConfigResource_new(kind, topic.as_ptr()) };
            if res.is_null() {
                return Err(CallError::Request {
                    api,
                    message: "librdkafka refused to create a topic resource".into(),
                });
            }
            resources.0.push(res);
            for (key, value) in ops {
                let op_type = if value.is_some() {
                    rd::rd_kafka_AlterConfigOpType_t::RD_KAFKA_ALTER_CONFIG_OP_TYPE_SET
                } else {
                    rd::rd_kafka_AlterConfigOpType_t::RD_KAFKA_ALTER_CONFIG_OP_TYPE_DELETE
                };
                let value_ptr = value.as_ref().map_or(std::ptr::null(), |v| v.as_ptr());
                // SAFETY: `res` is the live resource just created; key and value are valid C
                // strings (or null for DELETE, which the API allows) that librdkafka copies.
                let err = unsafe {
                    rd::rd_kafka_ConfigResource_add_incremental_config(
                        res,
                        key.as_ptr(),
                        op_type,
                        value_ptr,
                    )
                };
                if let Some(message) = take_error(err) {
                    return Err(CallError::Request {
                        api,
                        message: format!(
                            "topic `{}`, config `{}`: {message}",
                            topic.to_string_lossy(),
                            key.to_string_lossy()
                        ),
                    });
                }
            }
        }

        let event = round_trip(api, rk, op, timeout, |options, queue| {
            // SAFETY: the array holds `len` live resources; librdkafka copies them (we still
            // free ours); options and queue are live.
            unsafe {
                if api == ALTER {
                    rd::rd_kafka_IncrementalAlterConfigs(
                        rk,
                        resources.0.as_mut_ptr(),
                        resources.0.len(),
                        options,
                        queue,
                    );
                } else {
                    rd::rd_kafka_DescribeConfigs(
                        rk,
                        resources.0.as_mut_ptr(),
                        resources.0.len(),
                        options,
                        queue,
                    );
                }
            }
        })?;
        // SAFETY: the event is live until its guard drops, after every read below.
        unsafe { read_answer(api, event.event.0, timeout) }
    }
}

/// Admin options carrying the request timeout and a private event queue; `start` sends the
/// request on them; then waits (blocking) for the one event that answers it.
fn round_trip(
    api: &'static str,
    rk: *mut rd::rd_kafka_t,
    op: rd::rd_kafka_admin_op_t,
    timeout: Duration,
    start: impl FnOnce(*mut rd::rd_kafka_AdminOptions_t, *mut rd::rd_kafka_queue_t),
) -> Result<Answered, CallError> {
    let timeout_ms = c_int::try_from(timeout.as_millis()).unwrap_or(c_int::MAX);
    // SAFETY: `rk` is the admin client's live handle, borrowed for this call.
    let options = Guard(
        unsafe { rd::rd_kafka_AdminOptions_new(rk, op) },
        rd::rd_kafka_AdminOptions_destroy,
    );
    if options.0.is_null() {
        return Err(CallError::Request {
            api,
            message: "librdkafka refused the admin options".into(),
        });
    }
    let mut errstr = [0 as c_char; 512];
    // SAFETY: valid options; `errstr` is a writable buffer of the given size.
    let rc = unsafe {
        rd::rd_kafka_AdminOptions_set_request_timeout(
            options.0,
            timeout_ms,
            errstr.as_mut_ptr(),
            errstr.len(),
        )
    };
    if rc != rd::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR {
        // SAFETY: librdkafka NUL-terminates what it writes into `errstr`.
        let message = unsafe { CStr::from_ptr(errstr.as_ptr()) }
            .to_string_lossy()
            .into_owned();
        return Err(CallError::Request { api, message });
    }
    // A private queue: the answer to this request, and nothing else, arrives on it.
    // SAFETY: `rk` is live; the guard destroys the queue (librdkafka keeps its own
    // reference while a request is in flight, so dropping early after a timeout is safe).
    let queue = Guard(
        unsafe { rd::rd_kafka_queue_new(rk) },
        rd::rd_kafka_queue_destroy,
    );
    if queue.0.is_null() {
        return Err(CallError::Request {
            api,
            message: "librdkafka could not create an event queue".into(),
        });
    }
    start(options.0, queue.0);
    // librdkafka enforces the request timeout itself; the extra second only covers the
    // hand-over of its timeout event.
    let wait_ms = timeout_ms.saturating_add(1000);
    // SAFETY: the queue is live; a null return means nothing arrived in time.
    let event = Guard(
        unsafe { rd::rd_kafka_queue_poll(queue.0, wait_ms) },
        rd::rd_kafka_event_destroy,
    );
    if event.0.is_null() {
        return Err(CallError::Timeout {
            api,
            secs: timeout.as_secs(),
        });
    }
    Ok(Answered {
        event,
        _queue: queue,
        _options: options,
    })
}

/// The answering event, with the queue and options of its request: fields drop in this
/// order, the event first, as the locals of one function would.
struct Answered {
    event: Guard<rd::rd_kafka_event_t>,
    _queue: Guard<rd::rd_kafka_queue_t>,
    _options: Guard<rd::rd_kafka_AdminOptions_t>,
}

/// Copies the answer out of the event.
///
/// # Safety
/// `event` must be a live event returned by `rd_kafka_queue_poll` for a request of `api`.
unsafe fn read_answer(
    api: &'static str,
    event: *mut rd::rd_kafka_event_t,
    timeout: Duration,
) -> Result<Answer, CallError> {
    // SAFETY (whole function): every pointer read here belongs to `event`, which outlives this
    // function; strings are copied before returning.
    unsafe {
        event_error(api, event, timeout)?;
        let mut n = 0usize;
        let list = if api == ALTER {
            let result = rd::rd_kafka_event_IncrementalAlterConfigs_result(event);
            if result.is_null() {
                return Err(wrong_event(api));
            }
            rd::rd_kafka_IncrementalAlterConfigs_result_resources(result, &mut n)
        } else {
            let result = rd::rd_kafka_event_DescribeConfigs_result(event);
            if result.is_null() {
                return Err(wrong_event(api));
            }
            rd::rd_kafka_DescribeConfigs_result_resources(result, &mut n)
        };
        let mut resources = Vec::with_capacity(n);
        for i in 0..n {
            let res = *list.add(i);
            let name = opt_string(rd::rd_kafka_ConfigResource_name(res)).unwrap_or_default();
            let code = rd::rd_kafka_ConfigResource_error(res);
            let error = (code != rd::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR).then(|| {
                let code = RDKafkaErrorCode::from(code);
                TopicError {
                    code,
                    message: opt_string(rd::rd_kafka_ConfigResource_error_string(res))
                        .unwrap_or_else(|| code.to_string()),
                }
            });
            let mut m = 0usize;
            let entries_ptr = rd::rd_kafka_ConfigResource_configs(res, &mut m);
            let mut entries = Vec::with_capacity(m);
            for j in 0..m {
                let e = *entries_ptr.add(j);
                entries.push(Entry {
                    name: opt_string(rd::rd_kafka_ConfigEntry_name(e)).unwrap_or_default(),
                    value: opt_string(rd::rd_kafka_ConfigEntry_value(e)),
                    source: source(rd::rd_kafka_ConfigEntry_source(e)),
                    is_default: rd::rd_kafka_ConfigEntry_is_default(e) != 0,
                    is_sensitive: rd::rd_kafka_ConfigEntry_is_sensitive(e) != 0,
                });
            }
            resources.push(Resource {
                name,
                error,
                entries,
            });
        }
        Ok(Answer { resources })
    }
}

fn wrong_event(api: &'static str) -> CallError {
    CallError::Request {
        api,
        message: "librdkafka answered with an event of another type".into(),
    }
}

fn source(s: rd::rd_kafka_ConfigSource_t) -> Source {
    use rd::rd_kafka_ConfigSource_t as S;
    match s {
        S::RD_KAFKA_CONFIG_SOURCE_UNKNOWN_CONFIG => Source::Unknown,
        S::RD_KAFKA_CONFIG_SOURCE_DYNAMIC_TOPIC_CONFIG => Source::DynamicTopic,
        S::RD_KAFKA_CONFIG_SOURCE_DYNAMIC_BROKER_CONFIG => Source::DynamicBroker,
        S::RD_KAFKA_CONFIG_SOURCE_DYNAMIC_DEFAULT_BROKER_CONFIG => Source::DynamicDefaultBroker,
        S::RD_KAFKA_CONFIG_SOURCE_STATIC_BROKER_CONFIG => Source::StaticBroker,
        S::RD_KAFKA_CONFIG_SOURCE_DEFAULT_CONFIG => Source::Default,
        _ => Source::Other,
    }
}

/// Copies a C string that librdkafka owns; `None` for null.
///
/// # Safety
/// `p` must be null or a NUL-terminated string that stays valid for the call.
unsafe fn opt_string(p: *const c_char) -> Option<String> {
    // SAFETY: guaranteed by the caller.
    (!p.is_null()).then(|| unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
}

/// Takes ownership of an `rd_kafka_error_t` (null: no error) and returns its message.
fn take_error(err: *mut rd::rd_kafka_error_t) -> Option<String> {
    if err.is_null() {
        return None;
    }
    // SAFETY: a non-null error returned to us is ours to read and to destroy, once.
    unsafe {
        let message =
            opt_string(rd::rd_kafka_error_string(err)).unwrap_or_else(|| "unknown error".into());
        rd::rd_kafka_error_destroy(err);
        Some(message)
    }
}

/// Frees one C object when dropped.
struct Guard<T>(*mut T, unsafe extern "C" fn(*mut T));

impl<T> Drop for Guard<T> {
    fn drop(&mut self) {
        if !self.0.is_null() {
            // SAFETY: the pointer came from the matching constructor and is freed only here.
            unsafe { (self.1)(self.0) }
        }
    }
}

/// The request's config resources, freed together.
struct Resources(Vec<*mut rd::rd_kafka_ConfigResource_t>);

impl Drop for Resources {
    fn drop(&mut self) {
        for r in self.0.drain(..) {
            // SAFETY: each was created by `rd_kafka_ConfigResource_new` and is freed once.
            unsafe { rd::rd_kafka_ConfigResource_destroy(r) }
        }
    }
}

/// Empties the admin client's main event queue; returns how many events it held.
///
/// rdkafka 0.39 sends librdkafka's log lines and errors to the client's main queue
/// (`log.queue`), and only a consumer or producer polls it: an `AdminClient` polls its own
/// queue for admin answers and never this one. With a broker down, every failed connection and
/// request leaves events there for good (198 after one failed reading of 10 s: the exporter
/// grew by tens of KB per reading, issue 31). The events say nothing the error of the call does
/// not (and rdkafka's own logging goes to the `log` crate, which dlqctl does not show), so they
/// are dropped. Called after every metadata read, which starts every reading.
pub fn drain_events(admin: &Admin) -> usize {
    let rk = admin.inner().native_ptr();
    let mut n = 0;
    // SAFETY: `rk` is a live client (borrowed from `admin`); each event polled is owned here
    // and destroyed at once; the queue handle is released before returning. Polling with a
    // timeout of 0 never blocks.
    unsafe {
        let q = rd::rd_kafka_queue_get_main(rk);
        if q.is_null() {
            return 0;
        }
        // Bounded: what the queue held, plus what arrives meanwhile, at most a million.
        while n < 1_000_000 {
            let ev = rd::rd_kafka_queue_poll(q, 0);
            if ev.is_null() {
                break;
            }
            rd::rd_kafka_event_destroy(ev);
            n += 1;
        }
        rd::rd_kafka_queue_destroy(q);
    }
    n
}

/// Events waiting on the client's main queue (tests: what [`drain_events`] leaves).
#[cfg(test)]
pub fn main_queue_len(admin: &Admin) -> usize {
    let rk = admin.inner().native_ptr();
    // SAFETY: `rk` is a live client (borrowed from `admin`); the queue handle taken here is
    // released before returning.
    unsafe {
        let q = rd::rd_kafka_queue_get_main(rk);
        if q.is_null() {
            return 0;
        }
        let n = rd::rd_kafka_queue_length(q);
        rd::rd_kafka_queue_destroy(q);
        n
    }
}

#[cfg(test)]
mod tests {
    //! The request and answer paths without a broker (tansu covers SET and DELETE live, in
    //! tests/kafka.rs): building requests, refusing what C cannot carry, and a timeout that
    //! frees everything and says which API timed out.
    use super::*;
    use rdkafka::ClientConfig;

    fn admin_without_broker() -> Arc<Admin> {
        // Nothing listens on port 1; every request times out.
        let admin: Admin = ClientConfig::new()
            .set("bootstrap.servers", "127.0.0.1:1")
            .set("allow.auto.create.topics", "false")
            .set("reconnect.backoff.max.ms", "100")
            .create()
            .expect("client");
        Arc::new(admin)
    }

    #[test]
    fn alter_requests_carry_set_and_delete() {
        let r = Request::alter(&[(
            "app.t".into(),
            vec![
                ConfigOp::Set {
                    key: "retention.ms".into(),
                    value: "1000".into(),
                },
                ConfigOp::Delete {
                    key: "cleanup.policy".into(),
                },
            ],
        )])
        .expect("builds");
        assert_eq!(r.topics.len(), 1);
        let ops = &r.topics[0].1;
        assert_eq!(ops[0].1.as_deref().map(CStr::to_bytes), Some(&b"1000"[..]));
        assert_eq!(ops[1].1, None, "DELETE sends no value");
    }

    #[test]
    fn nul_bytes_are_refused_before_any_c_call() {
        let e = Request::alter(&[(
            "app.t".into(),
            vec![ConfigOp::Set {
                key: "a\0b".into(),
                value: "1".into(),
            }],
        )])
        .unwrap_err();
        assert!(e.to_string().contains("NUL"), "{e}");
        assert!(Request::describe(&["x\0".into()]).is_err());
    }

    #[tokio::test]
    async fn an_unanswered_request_times_out_and_names_the_api() {
        let admin = admin_without_broker();
        let ops = vec![(
            "app.t".to_owned(),
            vec![ConfigOp::Delete {
                key: "retention.ms".into(),
            }],
        )];
        let e = incremental_alter_topic_configs(&admin, &ops, Duration::from_millis(300))
            .await
            .unwrap_err();
        assert!(
            e.to_string().starts_with("IncrementalAlterConfigs: "),
            "{e}"
        );
        let e = describe_topic_configs(&admin, &["app.t".into()], Duration::from_millis(300))
            .await
            .unwrap_err();
        assert!(e.to_string().starts_with("DescribeConfigs: "), "{e}");
        let e = describe_topic_acls(&admin, Duration::from_millis(300))
            .await
            .unwrap_err();
        assert!(e.to_string().starts_with("DescribeAcls: "), "{e}");
    }

    #[test]
    fn duplicate_keys_in_one_topic_are_refused_by_librdkafka() {
        // librdkafka refuses the request locally, before it needs a broker.
        let admin = admin_without_broker();
        let r = Request::alter(&[(
            "app.t".into(),
            vec![
                ConfigOp::Delete {
                    key: "retention.ms".into(),
                },
                ConfigOp::Delete {
                    key: "retention.ms".into(),
                },
            ],
        )])
        .expect("builds");
        let e = r
            .send(&admin, Duration::from_secs(5))
            .err()
            .expect("refused");
        assert!(
            matches!(
                e,
                CallError::Failed {
                    code: RDKafkaErrorCode::InvalidArgument,
                    ..
                }
            ),
            "{e:?}"
        );
        assert!(e.to_string().contains("Duplicate ConfigEntry"), "{e}");
    }
    fn grant(topic: &str, operation: AclOperation, principal: &str) -> Grant {
        Grant {
            topic: topic.into(),
            operation,
            principal: principal.into(),
        }
    }

    #[test]
    fn acl_requests_carry_exactly_the_granted_binding() {
        // What CreateAcls sends (a binding) and what DeleteAcls sends (a filter naming every
        // field, so it matches that binding alone), read back from librdkafka's own objects.
        let grants = [
            grant("app.orders-dlt", AclOperation::Read, "User:CN=ops, O=acme"),
            grant("app.orders", AclOperation::Write, "User:api"),
        ];
        for api in [CREATE_ACLS, DELETE_ACLS] {
            let built = grant_bindings(api, &grants).expect("builds");
            assert_eq!(built.0.len(), 2);
            for (b, g) in built.0.iter().zip(&grants) {
                // SAFETY: a live binding just built, freed by `built` after this read.
                let read = unsafe { binding_of(*b) };
                assert_eq!(
                    read,
                    AclBinding {
                        name: g.topic.clone(),
                        pattern: AclPattern::Literal,
                        principal: g.principal.clone(),
                        host: "*".into(),
                        operation: g.operation,
                        allow: true,
                    },
                    "{api}"
                );
                assert_eq!(
                    Grant::of(&read).as_ref(),
                    Some(g),
                    "{api}: read back as the grant"
                );
            }
        }
        let e = grant_bindings(CREATE_ACLS, &[grant("t", AclOperation::Read, "User:a\0b")])
            .err()
            .expect("a NUL byte is refused");
        assert!(e.to_string().starts_with("CreateAcls: principal"), "{e}");
    }

    #[test]
    fn only_literal_allow_read_or_write_bindings_for_any_host_are_dlqctl_shaped() {
        let ours = AclBinding {
            name: "app.orders".into(),
            pattern: AclPattern::Literal,
            principal: "User:api".into(),
            host: "*".into(),
            operation: AclOperation::Write,
            allow: true,
        };
        assert_eq!(
            Grant::of(&ours),
            Some(grant("app.orders", AclOperation::Write, "User:api"))
        );
        let read = AclBinding {
            operation: AclOperation::Read,
            ..ours.clone()
        };
        assert!(Grant::of(&read).is_some());
        for other in [
            AclBinding {
                pattern: AclPattern::Prefixed,
                ..ours.clone()
            },
            AclBinding {
                host: "10.0.0.1".into(),
                ..ours.clone()
            },
            AclBinding {
                allow: false,
                ..ours.clone()
            },
            AclBinding {
                operation: AclOperation::All,
                ..ours.clone()
            },
            AclBinding {
                operation: AclOperation::Other,
                ..ours.clone()
            },
            // Names no topic has: every topic, and one that would not read back as itself.
            AclBinding {
                name: "*".into(),
                ..ours.clone()
            },
            AclBinding {
                name: "app.a WRITE User:b".into(),
                ..ours.clone()
            },
        ] {
            assert_eq!(Grant::of(&other), None, "{other:?}");
        }
    }

    #[tokio::test]
    async fn acl_writes_without_a_broker_time_out_and_name_the_api() {
        let admin = admin_without_broker();
        let g = vec![grant("app.t", AclOperation::Read, "User:ops")];
        let e = delete_acls(&admin, g.clone(), Duration::from_millis(300))
            .await
            .expect_err("no broker");
        assert!(e.to_string().starts_with("DeleteAcls: "), "{e}");
        let e = create_acls(&admin, g, Duration::from_millis(300))
            .await
            .expect_err("no broker");
        assert!(e.to_string().starts_with("CreateAcls: "), "{e}");
    }
}

/// A partition list of partitions `0..n` of each topic, owned by its guard; with `offset`,
/// each element carries it (where ListOffsets reads its offset spec). librdkafka copies the
/// topic names.
fn partition_list(
    api: &'static str,
    topics: &[(&CStr, i32)],
    offset: Option<i64>,
) -> Result<Guard<rd::rd_kafka_topic_partition_list_t>, CallError> {
    let size: i32 = topics.iter().map(|(_, n)| *n).sum();
    // SAFETY: a new list, owned by its guard.
    let list = Guard(
        unsafe { rd::rd_kafka_topic_partition_list_new(size.max(1)) },
        rd::rd_kafka_topic_partition_list_destroy,
    );
    if list.0.is_null() {
        return Err(CallError::Request {
            api,
            message: "librdkafka could not make a partition list".into(),
        });
    }
    for (topic, n) in topics {
        for p in 0..*n {
            // SAFETY: the list and `topic` are live; the element belongs to the list.
            unsafe {
                let e = rd::rd_kafka_topic_partition_list_add(list.0, topic.as_ptr(), p);
                if let (false, Some(o)) = (e.is_null(), offset) {
                    (*e).offset = o;
                }
            }
        }
    }
    Ok(list)
}

const LIST_OFFSETS: &str = "ListConsumerGroupOffsets";

/// One partition's commit, as the group coordinator holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Committed {
    pub partition: i32,
    /// `None`: the group has committed nothing for this partition.
    pub offset: Option<i64>,
    /// The commit's metadata (empty when none).
    pub metadata: String,
}

/// The commits of `group` on partitions `0..partitions` of `topic` (one
/// ListConsumerGroupOffsets through the shared admin client, answered by the coordinator; a
/// group that does not exist answers with no commits).
pub async fn list_group_offsets(
    admin: &Arc<Admin>,
    group: &str,
    topic: &str,
    partitions: usize,
    timeout: Duration,
) -> Result<Vec<Committed>, CallError> {
    let group = c_string(LIST_OFFSETS, "group", group)?;
    let topic = c_string(LIST_OFFSETS, "topic", topic)?;
    let partitions = i32::try_from(partitions).map_err(|_| CallError::Request {
        api: LIST_OFFSETS,
        message: format!("{partitions} partitions"),
    })?;
    let admin = Arc::clone(admin);
    run_blocking(LIST_OFFSETS, move || {
        list_offsets_blocking(&admin, &group, &topic, partitions, timeout)
    })
    .await?
}

fn list_offsets_blocking(
    admin: &Admin,
    group: &CStr,
    topic: &CStr,
    partitions: i32,
    timeout: Duration,
) -> Result<Vec<Committed>, CallError> {
    let api = LIST_OFFSETS;
    let rk = admin.inner().native_ptr();
    let list = partition_list(api, &[(topic, partitions)], None)?;
    // SAFETY: `group` and the list are live; librdkafka copies both into the request object,
    // which its guard frees (the request copies it again when sent).
    let request = Guard(
        unsafe { rd::rd_kafka_ListConsumerGroupOffsets_new(group.as_ptr(), list.0) },
        rd::rd_kafka_ListConsumerGroupOffsets_destroy,
    );
    if request.0.is_null() {
        return Err(CallError::Request {
            api,
            message: "librdkafka refused the request".into(),
        });
    }
    let op = rd::rd_kafka_admin_op_t::RD_KAFKA_ADMIN_OP_LISTCONSUMERGROUPOFFSETS;
    let answered = round_trip(api, rk, op, timeout, |options, queue| {
        let mut one = [request.0];
        // SAFETY: one live request (librdkafka copies it), live options and queue.
        unsafe { rd::rd_kafka_ListConsumerGroupOffsets(rk, one.as_mut_ptr(), 1, options, queue) }
    })?;
    // SAFETY: the event is live until its guard drops, after every read below.
    unsafe { read_group_offsets(answered.event.0, topic, timeout) }
}

/// Copies one group's commits out of a ListConsumerGroupOffsets answer.
///
/// # Safety
/// `event` must be a live event returned by `rd_kafka_queue_poll` for that request.
unsafe fn read_group_offsets(
    event: *mut rd::rd_kafka_event_t,
    topic: &CStr,
    timeout: Duration,
) -> Result<Vec<Committed>, CallError> {
    let api = LIST_OFFSETS;
    // SAFETY (whole function): every pointer read here belongs to `event`, which outlives
    // this function; strings and metadata are copied before returning.
    unsafe {
        event_error(api, event, timeout)?;
        let result = rd::rd_kafka_event_ListConsumerGroupOffsets_result(event);
        if result.is_null() {
            return Err(wrong_event(api));
        }
        let mut n = 0usize;
        let groups = rd::rd_kafka_ListConsumerGroupOffsets_result_groups(result, &mut n);
        if n != 1 || groups.is_null() {
            return Err(CallError::Request {
                api,
                message: format!("the broker answered for {n} groups, not 1"),
            });
        }
        let g = *groups;
        let err = rd::rd_kafka_group_result_error(g);
        if !err.is_null() {
            let code = RDKafkaErrorCode::from(rd::rd_kafka_error_code(err));
            let message = opt_string(rd::rd_kafka_error_string(err)).unwrap_or_default();
            return Err(CallError::Failed { api, code, message });
        }
        let list = rd::rd_kafka_group_result_partitions(g);
        let mut out = Vec::new();
        if list.is_null() {
            return Ok(out);
        }
        let count = usize::try_from((*list).cnt).unwrap_or(0);
        for i in 0..count {
            let e = &*(*list).elems.add(i);
            if e.topic.is_null() || CStr::from_ptr(e.topic) != topic {
                continue;
            }
            if e.err != rd::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR {
                let code = RDKafkaErrorCode::from(e.err);
                return Err(CallError::Failed {
                    api,
                    code,
                    message: format!("partition {}: {code}", e.partition),
                });
            }
            let metadata = if e.metadata.is_null() || e.metadata_size == 0 {
                String::new()
            } else {
                let bytes = std::slice::from_raw_parts(e.metadata.cast::<u8>(), e.metadata_size);
                String::from_utf8_lossy(bytes).into_owned()
            };
            out.push(Committed {
                partition: e.partition,
                // librdkafka's RD_KAFKA_OFFSET_INVALID (-1001): no commit.
                offset: (e.offset >= 0).then_some(e.offset),
                metadata,
            });
        }
        Ok(out)
    }
}

const LIST_ENDS: &str = "ListOffsets";

/// Which end of a partition [`list_offsets`] asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    /// The first offset retained (the low watermark).
    Earliest,
    /// The offset after the last record a read-committed consumer can see (the high
    /// watermark, or the last stable offset while a transaction is open).
    Latest,
    /// The first offset whose record's timestamp is at or after this time (ms since the
    /// epoch); -1 when no record is that recent (ListOffsets by timestamp).
    At(i64),
}

/// One end of every partition `0..n` of each topic, in one ListOffsets (librdkafka fans it
/// out to the partitions' leaders), read committed as a consumer reads: by (topic, partition).
pub async fn list_offsets(
    admin: &Arc<Admin>,
    topics: &[(String, usize)],
    end: End,
    timeout: Duration,
) -> Result<std::collections::BTreeMap<(String, i32), i64>, CallError> {
    let mut wanted = Vec::with_capacity(topics.len());
    for (t, n) in topics {
        let n = i32::try_from(*n).map_err(|_| CallError::Request {
            api: LIST_ENDS,
            message: format!("topic `{t}`: {n} partitions"),
        })?;
        wanted.push((c_string(LIST_ENDS, "topic", t)?, n));
    }
    let admin = Arc::clone(admin);
    run_blocking(LIST_ENDS, move || {
        list_ends_blocking(&admin, &wanted, end, timeout)
    })
    .await?
}

fn list_ends_blocking(
    admin: &Admin,
    wanted: &[(CString, i32)],
    end: End,
    timeout: Duration,
) -> Result<std::collections::BTreeMap<(String, i32), i64>, CallError> {
    let api = LIST_ENDS;
    let rk = admin.inner().native_ptr();
    let spec = match end {
        End::Earliest => rd::rd_kafka_OffsetSpec_t::RD_KAFKA_OFFSET_SPEC_EARLIEST as i64,
        End::Latest => rd::rd_kafka_OffsetSpec_t::RD_KAFKA_OFFSET_SPEC_LATEST as i64,
        // librdkafka reads a non-negative offset spec as a timestamp.
        End::At(ms) => ms.max(0),
    };
    let topics: Vec<(&CStr, i32)> = wanted.iter().map(|(t, n)| (t.as_c_str(), *n)).collect();
    let list = partition_list(api, &topics, Some(spec))?;
    let op = rd::rd_kafka_admin_op_t::RD_KAFKA_ADMIN_OP_LISTOFFSETS;
    let mut refused = None;
    let answered = round_trip(api, rk, op, timeout, |options, queue| {
        // SAFETY: live options; a returned error is ours to destroy (take_error does).
        let err = unsafe {
            rd::rd_kafka_AdminOptions_set_isolation_level(
                options,
                rd::rd_kafka_IsolationLevel_t::RD_KAFKA_ISOLATION_LEVEL_READ_COMMITTED,
            )
        };
        refused = take_error(err);
        // SAFETY: the list, options and queue are live; librdkafka copies the list.
        unsafe { rd::rd_kafka_ListOffsets(rk, list.0, options, queue) }
    })?;
    if let Some(message) = refused {
        return Err(CallError::Request { api, message });
    }
    // SAFETY: the event is live until its guard drops, after every read below.
    unsafe { read_ends(answered.event.0, timeout) }
}

/// Copies the offsets out of a ListOffsets answer.
///
/// # Safety
/// `event` must be a live event returned by `rd_kafka_queue_poll` for a ListOffsets request.
unsafe fn read_ends(
    event: *mut rd::rd_kafka_event_t,
    timeout: Duration,
) -> Result<std::collections::BTreeMap<(String, i32), i64>, CallError> {
    let api = LIST_ENDS;
    // SAFETY (whole function): every pointer read here belongs to `event`, which outlives
    // this function; topic names are copied before returning.
    unsafe {
        event_error(api, event, timeout)?;
        let result = rd::rd_kafka_event_ListOffsets_result(event);
        if result.is_null() {
            return Err(wrong_event(api));
        }
        let mut n = 0usize;
        let infos = rd::rd_kafka_ListOffsets_result_infos(result, &mut n);
        let mut out = std::collections::BTreeMap::new();
        for i in 0..n {
            let tp = rd::rd_kafka_ListOffsetsResultInfo_topic_partition(*infos.add(i));
            if tp.is_null() {
                continue;
            }
            let e = &*tp;
            let topic = opt_string(e.topic).unwrap_or_default();
            if e.err != rd::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR {
                let code = RDKafkaErrorCode::from(e.err);
                return Err(CallError::Failed {
                    api,
                    code,
                    message: format!("topic `{topic}` partition {}: {code}", e.partition),
                });
            }
            out.insert((topic, e.partition), e.offset);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod legal_name_tests {
    use super::legal_topic_name;

    #[test]
    fn legal_topic_names_are_the_spec_rules_topic_names() {
        let long = "x".repeat(249);
        let too_long = "x".repeat(250);
        for name in [
            "", ".", "..", "a", "a.b_c-D9", "a b", "ä", "t/x", "*", &long, &too_long,
        ] {
            assert_eq!(
                legal_topic_name(name),
                crate::spec::rules::kafka_name_problem(name).is_none(),
                "{name:?}"
            );
        }
    }
}
