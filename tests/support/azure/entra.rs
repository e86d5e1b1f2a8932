//! The contract fake's Microsoft Entra token endpoint, token audiences, and the throttling and
//! conflict answers a test asks for. For the tests only; the product never uses it.
//!
//! From the references (the page named in brackets):
//!
//! - [Microsoft identity platform and the OAuth 2.0 client credentials flow, "Get a token",
//!   "First case: Access token request with a shared secret"]
//!   (<https://learn.microsoft.com/en-us/entra/identity-platform/v2-oauth2-client-creds-grant-flow>)
//!   `POST /{tenant}/oauth2/v2.0/token` with `Content-Type: application/x-www-form-urlencoded`
//!   and the required parameters `client_id`, `scope`, `client_secret` and `grant_type`, which
//!   "must be set to `client_credentials`"; `scope` "should be the resource identifier
//!   (application ID URI) of the resource you want, affixed with the `.default` suffix". The
//!   answer: `{"token_type": "Bearer", "expires_in": 3599, "access_token": ...}`. An error:
//!   `{"error", "error_description", "error_codes", "timestamp", "trace_id",
//!   "correlation_id"}`, with `invalid_request` (a missing parameter), `invalid_scope`,
//!   `unsupported_grant_type` (400) and `invalid_client` ("Client authentication failed",
//!   answered 401 here, for an unknown client or a wrong secret).
//! - [Microsoft identity platform and the OAuth 2.0 client credentials flow, "Third case:
//!   Access token request with a federated credential"]: the same request with
//!   `client_assertion_type` ("must be set to
//!   `urn:ietf:params:oauth:client-assertion-type:jwt-bearer`") and `client_assertion` (the
//!   token the external identity provider issued; for AKS workload identity, the service
//!   account token in `AZURE_FEDERATED_TOKEN_FILE`) instead of `client_secret`. Inferred: an
//!   assertion no federated credential of the application matches is refused 401
//!   `invalid_client` AADSTS70021 "No matching federated identity record found for presented
//!   assertion" (the fake compares the whole token; Entra checks its issuer, subject and
//!   audience), and a request with both a secret and an assertion is 400 `invalid_request`.
//! - [How to use managed identities for Azure resources on an Azure VM to acquire an access
//!   token, "Get a token using HTTP"]
//!   (<https://learn.microsoft.com/en-us/entra/identity/managed-identities-azure-resources/how-to-use-vm-token>):
//!   `GET http://169.254.169.254/metadata/identity/oauth2/token` with the query parameters
//!   `api-version` (required, `2018-02-01`), `resource` (required: "The App ID URI of the
//!   target resource", which "also appears in the aud (audience) claim of the issued token")
//!   and, for a user-assigned identity, one of `object_id`, `client_id` or `msi_res_id`, and
//!   the header `Metadata: true` ("required ... as a mitigation against Server Side Request
//!   Forgery"). The answer: `{"access_token", "refresh_token", "expires_in", "expires_on",
//!   "not_before", "resource", "token_type"}`, `expires_in` a number of seconds as a string.
//!   Errors ("Error handling"): 400 `invalid_request` for a missing `Metadata` header or
//!   parameter, and 400 `invalid_request` "Identity not found" when the VM has no managed
//!   identity, or none with that id; 404 while "IMDS is updating", 429 when its "throttle
//!   limit" is reached, 5xx "transient", each to be retried with an exponential back-off, and
//!   410 "IMDS is going through updates" (back "in a maximum of 70 seconds") ("Retry
//!   guidance"), answered here only when a test asks ([`AzureFake::fail_identity`]).
//!   (The endpoint is served here at the fake's own address, `identityUrl`.)
//! - [Azure Resource Manager, "Understand how Azure Resource Manager throttles requests"]
//!   (<https://learn.microsoft.com/en-us/azure/azure-resource-manager/management/request-limits-and-throttling>):
//!   "When you reach the limit, you receive the HTTP status code 429 Too many requests. The
//!   response includes a Retry-After value, which specifies the number of seconds your
//!   application should wait (or sleep) before sending the next request."
//! - [Troubleshoot common Azure deployment errors] `Conflict` (409): the resource is in a
//!   state that does not allow the operation, such as being changed by another request.
//!
//! Inferred, not stated in those pages (say so when a test leans on one):
//! - audiences: a token the fake issued carries the audience of its scope (the scope less
//!   `/.default`); ARM refuses a token for another audience with 401
//!   `InvalidAuthenticationTokenAudience`, the data plane with 401 (its XML error). A token
//!   the fake did not issue (`test-token`) is accepted as before, unless a test turns
//!   audience checking on ([`AzureFake::check_audiences`]);
//! - ARM's 429 body is `{"error": {"code": "TooManyRequests", ...}}` and 409's
//!   `{"error": {"code": "Conflict", ...}}` (common/v1 `ErrorResponse`);
//! - the data plane's throttling answer on a send is 503 "Server busy" or 429, with the XML
//!   error body.

use std::collections::BTreeMap;
use std::sync::Mutex;

use serde_json::json;

use super::{AzureFake, State};
use crate::support::fake::Request;

pub const ARM_AUDIENCE: &str = "https://management.azure.com";
pub const DATA_AUDIENCE: &str = "https://servicebus.azure.net";
/// `client_assertion_type` of a federated credential ("Third case").
const JWT_BEARER: &str = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer";

/// The token endpoint's and the audiences' state.
#[derive(Debug, Default)]
pub struct Tokens {
    /// Registered applications: client id → secret.
    clients: BTreeMap<String, String>,
    /// Tokens issued (lowercase: the ARM fake sees request heads lowercased) → audience.
    issued: BTreeMap<String, String>,
    /// Token requests answered with a token, by scope.
    fetched: BTreeMap<String, usize>,
    /// Every token request, answered or not.
    requests: usize,
    /// Refuse tokens the fake did not issue, and those for another audience.
    check: bool,
    /// Faults a test asked for: (method, a part of the path, status, how many left).
    arm_faults: Vec<(String, String, u16, usize)>,
    /// Statuses the next sends answer (503 or 429), in order.
    send_faults: Vec<u16>,
    /// The machine's managed identities: `None` the system-assigned one, else a
    /// user-assigned one's client id. Empty: the machine has none.
    identities: Vec<Option<String>>,
    /// Requests the instance metadata service's token endpoint saw.
    identity_requests: usize,
    /// Statuses the next identity requests answer (404, 410, 429, 5xx), in order.
    identity_faults: Vec<u16>,
    /// Applications with a federated credential: client id → the assertions it accepts
    /// (the service account tokens of the pod it trusts).
    federated: BTreeMap<String, Vec<String>>,
    /// Every client assertion presented, in order.
    assertions: Vec<String>,
}

/// An OAuth error answer.
fn oauth_error(status: u16, error: &str, code: u64, description: &str) -> (u16, String) {
    (
        status,
        json!({
            "error": error,
            "error_description": format!("AADSTS{code}: {description} Trace ID: 0000 Correlation ID: 0000 Timestamp: 2026-12-05 00:00:00Z"),
            "error_codes": [code],
            "timestamp": "2026-12-05 00:00:00Z",
            "trace_id": "00000000-0000-0000-0000-000000000000",
            "correlation_id": "00000000-0000-0000-0000-000000000000"
        })
        .to_string(),
    )
}

fn form(body: &str) -> Vec<(String, String)> {
    body.split('&')
        .filter(|kv| !kv.is_empty())
        .map(|kv| {
            let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
            let dec = |s: &str| {
                percent_encoding::percent_decode_str(&s.replace('+', " "))
                    .decode_utf8_lossy()
                    .into_owned()
            };
            (dec(k), dec(v))
        })
        .collect()
}

/// The token endpoint, when `r` is addressed to it.
pub(super) fn token_endpoint(state: &Mutex<State>, r: &Request) -> Option<(u16, String)> {
    let path = r.path.split('?').next().unwrap_or_default();
    let tenant = path
        .strip_suffix("/oauth2/v2.0/token")?
        .trim_start_matches('/');
    let mut st = state.lock().expect("lock");
    let t = &mut st.entra;
    t.requests += 1;
    if r.method != "POST" || tenant.is_empty() || tenant.contains('/') {
        return Some(oauth_error(
            400,
            "invalid_request",
            900_561,
            "The endpoint only accepts POST requests.",
        ));
    }
    if r.header("content-type") != Some("application/x-www-form-urlencoded") {
        return Some(oauth_error(
            400,
            "invalid_request",
            900_144,
            "The request body must be application/x-www-form-urlencoded.",
        ));
    }
    let fields = form(&r.body);
    let get = |k: &str| fields.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
    for (k, _) in &fields {
        if ![
            "client_id",
            "client_secret",
            "client_assertion_type",
            "client_assertion",
            "scope",
            "grant_type",
        ]
        .contains(&k.as_str())
        {
            return Some(oauth_error(
                400,
                "invalid_request",
                900_144,
                &format!(
                    "The request body has a parameter the client credentials flow does not take: '{k}'."
                ),
            ));
        }
    }
    // A secret, or a federated credential's assertion of the documented type; not both.
    let federated = get("client_assertion").is_some() || get("client_assertion_type").is_some();
    if federated && get("client_secret").is_some() {
        return Some(oauth_error(
            400,
            "invalid_request",
            900_144,
            "The request has both 'client_secret' and 'client_assertion'; send one.",
        ));
    }
    if federated && get("client_assertion_type").as_deref() != Some(JWT_BEARER) {
        return Some(oauth_error(
            400,
            "invalid_request",
            900_144,
            &format!("'client_assertion_type' must be '{JWT_BEARER}'."),
        ));
    }
    let credential = if federated {
        "client_assertion"
    } else {
        "client_secret"
    };
    for k in ["client_id", "scope", credential, "grant_type"] {
        if get(k).is_none_or(|v| v.is_empty()) {
            return Some(oauth_error(
                400,
                "invalid_request",
                900_144,
                &format!("The request body must contain the following parameter: '{k}'."),
            ));
        }
    }
    if get("grant_type").as_deref() != Some("client_credentials") {
        return Some(oauth_error(
            400,
            "unsupported_grant_type",
            70_003,
            "The app requested an unsupported grant type.",
        ));
    }
    let scope = get("scope").unwrap_or_default();
    let Some(audience) = scope.strip_suffix("/.default").filter(|a| !a.is_empty()) else {
        return Some(oauth_error(
            400,
            "invalid_scope",
            1_002_012,
            &format!(
                "The provided value for scope {scope} is not valid. Client credential flows must have a scope value with /.default suffixed to the resource identifier (application ID URI)."
            ),
        ));
    };
    let client = get("client_id").unwrap_or_default();
    // The application's credential, checked against what the request presents: a federated
    // credential's accepted assertions, or the secret.
    let refused = if federated {
        let assertion = get("client_assertion").unwrap_or_default();
        t.assertions.push(assertion.clone());
        t.federated.get(&client).map(|valid| {
            (!valid.contains(&assertion)).then_some((
                70_021,
                "No matching federated identity record found for presented assertion.",
            ))
        })
    } else {
        t.clients.get(&client).map(|secret| {
            (Some(secret) != get("client_secret").as_ref()).then_some((
                7_000_215,
                "Invalid client secret provided. Ensure the secret being sent in the request is the client secret value, not the client secret ID.",
            ))
        })
    };
    match refused {
        None => {
            return Some(oauth_error(
                401,
                "invalid_client",
                700_016,
                &format!(
                    "Application with identifier '{client}' was not found in the directory '{tenant}'."
                ),
            ));
        }
        Some(Some((code, description))) => {
            return Some(oauth_error(401, "invalid_client", code, description));
        }
        Some(None) => {}
    }
    let n = t.issued.len() + 1;
    let host = audience
        .trim_start_matches("https://")
        .trim_end_matches('/')
        .to_ascii_lowercase();
    let token = format!("fake.{host}.{n:04}");
    t.issued
        .insert(token.clone(), audience.trim_end_matches('/').to_owned());
    *t.fetched.entry(scope.clone()).or_default() += 1;
    Some((
        200,
        json!({"token_type": "Bearer", "expires_in": 3599, "access_token": token}).to_string(),
    ))
}

/// The instance metadata service's token endpoint, when `r` is addressed to it.
pub(super) fn identity_endpoint(state: &Mutex<State>, r: &Request) -> Option<(u16, String)> {
    let (path, query) = r.path.split_once('?').unwrap_or((r.path.as_str(), ""));
    if path != IDENTITY_PATH {
        return None;
    }
    let mut st = state.lock().expect("lock");
    let t = &mut st.entra;
    t.identity_requests += 1;
    if !t.identity_faults.is_empty() {
        // "Error handling": 404 "IMDS is updating", 429 "IMDS throttle limit reached", 5xx
        // "transient"; the body is inferred (the page gives only the error text).
        let status = t.identity_faults.remove(0);
        return Some((
            status,
            json!({"error": "transient", "error_description": format!("asked for by the test: HTTP {status}")}).to_string(),
        ));
    }
    let bad = |d: &str| {
        (
            400,
            json!({"error": "invalid_request", "error_description": d}).to_string(),
        )
    };
    if r.method != "GET" {
        return Some(bad("The endpoint only accepts GET requests."));
    }
    if r.header("metadata") != Some("true") {
        return Some(bad("Required metadata header not specified"));
    }
    let fields = form(query);
    let get = |k: &str| fields.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
    for (k, _) in &fields {
        if ![
            "api-version",
            "resource",
            "client_id",
            "object_id",
            "msi_res_id",
        ]
        .contains(&k.as_str())
        {
            return Some(bad(&format!("Unknown query parameter '{k}'")));
        }
    }
    if get("api-version").as_deref() != Some("2018-02-01") {
        return Some(bad(
            "Required query variable 'api-version' is missing or not supported",
        ));
    }
    let Some(resource) = get("resource").filter(|r| !r.is_empty()) else {
        return Some(bad("Required query variable 'resource' is missing"));
    };
    let wanted = get("client_id");
    if !t.identities.contains(&wanted) {
        return Some(bad("Identity not found"));
    }
    let audience = resource.trim_end_matches('/').to_owned();
    let host = audience.trim_start_matches("https://").to_ascii_lowercase();
    let token = format!("fake.{host}.{:04}", t.issued.len() + 1);
    t.issued.insert(token.clone(), audience);
    *t.fetched.entry(format!("identity:{resource}")).or_default() += 1;
    Some((
        200,
        json!({
            "access_token": token,
            "refresh_token": "",
            "expires_in": "3599",
            "expires_on": "1796515200",
            "not_before": "1796511300",
            "resource": resource,
            "token_type": "Bearer"
        })
        .to_string(),
    ))
}

/// Where the fake serves the instance metadata service's token endpoint.
const IDENTITY_PATH: &str = "/metadata/identity/oauth2/token";

/// The audience a request's bearer was issued for, or why it is refused (`None`: accepted).
fn refused(t: &Tokens, authorization: Option<&str>, want: &str) -> Option<String> {
    let token = authorization?
        .get("bearer ".len()..)?
        .trim()
        .to_ascii_lowercase();
    match t.issued.get(&token) {
        Some(aud) if aud == want => None,
        Some(aud) => Some(format!(
            "The access token has been obtained for wrong audience or resource '{aud}'. It should exactly match with one of the allowed audiences '{want}'."
        )),
        None if t.check => Some(format!(
            "The access token was not issued for the audience '{want}'."
        )),
        None => None,
    }
}

/// An answer with headers: (status, headers, body).
type Headed = (u16, Vec<(String, String)>, String);

/// ARM's answers before the queues': a token for another audience, or a fault a test asked
/// for.
pub(super) fn arm_gate(state: &Mutex<State>, r: &Request) -> Option<Headed> {
    let mut st = state.lock().expect("lock");
    let t = &mut st.entra;
    if let Some(why) = refused(t, r.header("authorization"), ARM_AUDIENCE) {
        return Some((
            401,
            Vec::new(),
            json!({"error": {"code": "InvalidAuthenticationTokenAudience", "message": why}})
                .to_string(),
        ));
    }
    let path = r.path.split('?').next().unwrap_or_default();
    let fault = t
        .arm_faults
        .iter_mut()
        .find(|(m, part, _, left)| *left > 0 && *m == r.method && path.contains(part.as_str()))?;
    fault.3 -= 1;
    let status = fault.2;
    Some(match status {
        429 => (
            429,
            vec![("retry-after".into(), "1".into())],
            json!({"error": {"code": "TooManyRequests", "message": "The request is being throttled (asked for by the test)."}}).to_string(),
        ),
        409 => (
            409,
            Vec::new(),
            json!({"error": {"code": "Conflict", "message": "Conflicting operation is in progress on the entity (asked for by the test)."}}).to_string(),
        ),
        s => (
            s,
            Vec::new(),
            json!({"error": {"code": "InternalServerError", "message": "asked for by the test"}})
                .to_string(),
        ),
    })
}

/// The data plane's answers before the messages': a token for another audience (401), or a
/// send the test asked to be throttled. `(status, detail)`.
pub(super) fn data_gate(
    st: &mut State,
    method: &str,
    path: &str,
    authorization: Option<&str>,
) -> Option<(u16, String)> {
    let t = &mut st.entra;
    if let Some(why) = refused(t, authorization, DATA_AUDIENCE) {
        return Some((401, format!("InvalidAudience: {why}")));
    }
    if method == "POST" && path.ends_with("/messages") && !t.send_faults.is_empty() {
        let status = t.send_faults.remove(0);
        return Some((
            status,
            if status == 503 {
                "Server busy (asked for by the test).".into()
            } else {
                "Too many requests (asked for by the test).".into()
            },
        ));
    }
    None
}

impl AzureFake {
    /// Registers an application: its client id and secret.
    pub fn register_client(&self, client_id: &str, secret: &str) {
        self.state
            .lock()
            .expect("lock")
            .entra
            .clients
            .insert(client_id.to_owned(), secret.to_owned());
    }

    /// Issues a token for `audience` without a request (what `az account get-access-token`
    /// would hand a user).
    pub fn issue_token(&self, audience: &str) -> String {
        let mut st = self.state.lock().expect("lock");
        let t = &mut st.entra;
        let host = audience.trim_start_matches("https://").to_ascii_lowercase();
        let token = format!("fake.{host}.{:04}", t.issued.len() + 1);
        t.issued.insert(token.clone(), audience.to_owned());
        token
    }

    /// From now on, refuse tokens the fake did not issue and tokens for another audience.
    pub fn check_audiences(&self) {
        self.state.lock().expect("lock").entra.check = true;
    }

    /// Tokens the endpoint issued for `scope`.
    pub fn tokens_fetched(&self, scope: &str) -> usize {
        let st = self.state.lock().expect("lock");
        st.entra.fetched.get(scope).copied().unwrap_or(0)
    }

    /// Every request the token endpoint saw.
    pub fn token_requests(&self) -> usize {
        self.state.lock().expect("lock").entra.requests
    }

    /// The next `n` ARM calls `method` to a path containing `part` answer `status` (429 with
    /// `Retry-After: 1`, 409 Conflict).
    pub fn fail_arm(&self, method: &str, part: &str, status: u16, n: usize) {
        self.state.lock().expect("lock").entra.arm_faults.push((
            method.to_owned(),
            part.to_owned(),
            status,
            n,
        ));
    }

    /// The next sends answer these statuses (503 "Server busy", 429), one each.
    pub fn throttle_sends(&self, statuses: &[u16]) {
        self.state
            .lock()
            .expect("lock")
            .entra
            .send_faults
            .extend_from_slice(statuses);
    }

    /// The machine gets a managed identity: the system-assigned one (`None`), or a
    /// user-assigned one with this client id.
    pub fn add_managed_identity(&self, client_id: Option<&str>) {
        self.state
            .lock()
            .expect("lock")
            .entra
            .identities
            .push(client_id.map(str::to_owned));
    }

    /// Registers an application with a federated credential that accepts `assertion` (a
    /// service account token of the pod it trusts); again to accept one more.
    pub fn register_federated(&self, client_id: &str, assertion: &str) {
        self.state
            .lock()
            .expect("lock")
            .entra
            .federated
            .entry(client_id.to_owned())
            .or_default()
            .push(assertion.to_owned());
    }

    /// Every client assertion presented to the token endpoint, in order.
    pub fn assertions(&self) -> Vec<String> {
        self.state.lock().expect("lock").entra.assertions.clone()
    }

    /// The next identity requests answer these statuses (404, 410, 429, 5xx), one each.
    pub fn fail_identity(&self, statuses: &[u16]) {
        self.state
            .lock()
            .expect("lock")
            .entra
            .identity_faults
            .extend_from_slice(statuses);
    }

    /// Tokens the instance metadata service issued for `resource`.
    pub fn identity_tokens(&self, resource: &str) -> usize {
        let st = self.state.lock().expect("lock");
        st.entra
            .fetched
            .get(&format!("identity:{resource}"))
            .copied()
            .unwrap_or(0)
    }

    /// Every request the instance metadata service's token endpoint saw.
    pub fn identity_requests(&self) -> usize {
        self.state.lock().expect("lock").entra.identity_requests
    }

    /// The instance metadata service's token endpoint (`identityUrl` in a targets file).
    pub fn identity_url(&self) -> String {
        format!("{}{IDENTITY_PATH}", self.api.url)
    }

    /// The token endpoint's URL for `tenant` (`tokenUrl` in a targets file).
    pub fn token_url(&self, tenant: &str) -> String {
        format!("{}/{tenant}/oauth2/v2.0/token", self.api.url)
    }
}
