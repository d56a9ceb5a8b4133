//! Entra ID's v2.0 token endpoint (client credentials: a client secret, a certificate assertion,
//! a federated token), its OpenID configuration, App Service's managed-identity endpoint, and
//! Azure Container Registry's token exchange (on the registry's host). Errors are Entra ID's (`AADSTS…` codes in
//! `error_description`, `error_codes`), from Microsoft's reference of them.

use serde_json::json;

use super::jwt;
use super::{IDENTITY_HEADER, Issued, Req, Shared, TENANT, TOKEN_LIFETIME, VAULT_RESOURCE, json, lock, now};

const ASSERTION_TYPE: &str = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer";
/// The audience of federated ServiceAccount tokens.
const EXCHANGE_AUDIENCE: &str = "api://AzureADTokenExchange";
/// The resources tokens are issued for.
const RESOURCES: [&str; 2] = [VAULT_RESOURCE, "https://management.azure.com"];

fn entra_error(status: u16, error: &str, code: u32, description: &str) -> axum::response::Response {
    json(
        status,
        json!({
            "error": error,
            "error_description": format!("AADSTS{code}: {description} Trace ID: 00000000-0000-0000-0000-000000000000 \
                Correlation ID: 00000000-0000-0000-0000-000000000000 Timestamp: 2026-01-01 00:00:00Z"),
            "error_codes": [code],
            "timestamp": "2026-01-01 00:00:00Z",
            "trace_id": "00000000-0000-0000-0000-000000000000",
            "correlation_id": "00000000-0000-0000-0000-000000000000",
            "error_uri": format!("https://login.microsoftonline.com/error?code={code}"),
        }),
    )
}

pub(crate) fn handle(state: &Shared, req: &Req) -> axum::response::Response {
    let segments: Vec<&str> = req.path.trim_start_matches('/').split('/').collect();
    match (req.method.as_str(), segments.as_slice()) {
        ("POST", [tenant, "oauth2", "v2.0", "token"]) => token(state, req, tenant),
        ("GET", [tenant, "v2.0", ".well-known", "openid-configuration"]) => openid_configuration(req, tenant),
        ("GET", ["msi", "token"]) => managed_identity(state, req),
        _ => json(404, json!({"error": "not_found", "error_description": format!("{} is not an endpoint", req.path)})),
    }
}

fn form(req: &Req) -> std::collections::HashMap<String, String> {
    let ok = req.header("content-type").is_some_and(|c| c.starts_with("application/x-www-form-urlencoded"));
    if !ok {
        return Default::default();
    }
    super::url_decode_pairs(&String::from_utf8_lossy(&req.body)).into_iter().collect()
}

fn host(req: &Req) -> String {
    req.header("host").unwrap_or("127.0.0.1").to_string()
}

fn openid_configuration(req: &Req, tenant: &str) -> axum::response::Response {
    if tenant != TENANT && tenant != "organizations" && tenant != "common" {
        return entra_error(400, "invalid_tenant", 90002, &format!("Tenant '{tenant}' not found."));
    }
    let base = format!("https://{}/{tenant}", host(req));
    json(
        200,
        json!({
            "token_endpoint": format!("{base}/oauth2/v2.0/token"),
            "authorization_endpoint": format!("{base}/oauth2/v2.0/authorize"),
            "device_authorization_endpoint": format!("{base}/oauth2/v2.0/devicecode"),
            "issuer": format!("https://login.microsoftonline.com/{TENANT}/v2.0"),
            "jwks_uri": format!("{base}/discovery/v2.0/keys"),
            "token_endpoint_auth_methods_supported": ["client_secret_post", "private_key_jwt", "client_secret_basic"],
            "response_types_supported": ["code", "id_token", "code id_token", "id_token token"],
            "scopes_supported": ["openid", "profile", "email", "offline_access"],
            "tenant_region_scope": "EU",
        }),
    )
}

fn issue(state: &Shared, audience: &str, principal: &str) -> (String, i64) {
    let mut s = lock(state);
    let token = format!("kw.{}.{}", s.next_id(), s.next_id());
    let expires = now() + TOKEN_LIFETIME.as_secs() as i64;
    s.tokens.insert(token.clone(), Issued { audience: audience.into(), principal: principal.into(), expires });
    (token, expires)
}

fn token(state: &Shared, req: &Req, tenant: &str) -> axum::response::Response {
    if tenant != TENANT {
        return entra_error(
            400,
            "invalid_request",
            90002,
            &format!("Tenant '{tenant}' not found. Check to make sure you have the correct tenant ID."),
        );
    }
    let f = form(req);
    let get = |k: &str| f.get(k).map(String::as_str).unwrap_or_default();
    match get("grant_type") {
        "client_credentials" => {}
        "" => {
            return entra_error(
                400,
                "invalid_request",
                900144,
                "The request body must contain the following parameter: 'grant_type'.",
            );
        }
        other => {
            return entra_error(
                400,
                "unsupported_grant_type",
                70003,
                &format!("The app requested an unsupported grant type '{other}'."),
            );
        }
    }
    let client_id = get("client_id");
    if client_id.is_empty() {
        return entra_error(
            400,
            "invalid_request",
            900144,
            "The request body must contain the following parameter: 'client_id'.",
        );
    }
    let scope = get("scope");
    let Some(resource) = scope.strip_suffix("/.default").filter(|r| RESOURCES.contains(r)) else {
        return entra_error(
            400,
            "invalid_scope",
            1002012,
            &format!(
                "The provided value for scope {scope} is not valid. Client credential flows must have a scope value with /.default suffixed to the resource identifier (application ID URI)."
            ),
        );
    };
    let app = lock(state).apps.get(client_id).cloned();
    let Some(app) = app else {
        return entra_error(
            400,
            "unauthorized_client",
            700016,
            &format!("Application with identifier '{client_id}' was not found in the directory '{TENANT}'."),
        );
    };
    let endpoint_audiences = [
        format!("https://{}/{TENANT}/oauth2/v2.0/token", host(req)),
        format!("https://login.microsoftonline.com/{TENANT}/oauth2/v2.0/token"),
    ];
    let secret = get("client_secret");
    let assertion = get("client_assertion");
    if !secret.is_empty() {
        if !app.secrets.iter().any(|s| s == secret) {
            return entra_error(
                401,
                "invalid_client",
                7000215,
                "Invalid client secret provided. Ensure the secret being sent in the request is the client secret value, not the client secret ID, for a secret added to app.",
            );
        }
    } else if !assertion.is_empty() {
        if get("client_assertion_type") != ASSERTION_TYPE {
            return entra_error(
                400,
                "invalid_request",
                50027,
                "Invalid JWT token: client_assertion_type is not urn:ietf:params:oauth:client-assertion-type:jwt-bearer.",
            );
        }
        let Some(jwt) = jwt::parse(assertion) else {
            return entra_error(400, "invalid_request", 50027, "JWT token is invalid or malformed.");
        };
        if !jwt.current(now()) {
            return entra_error(400, "invalid_client", 700024, "Client assertion is not within its valid time range.");
        }
        let by_cert = jwt.header.get("x5t").is_some() || jwt.header.get("x5t#S256").is_some();
        if by_cert {
            let signed = app.certificates.iter().any(|der| jwt.verified_by_certificate(der));
            let claims_ok = jwt.claims["iss"] == client_id
                && jwt.claims["sub"] == client_id
                && endpoint_audiences.iter().any(|a| jwt.has_audience(a));
            if !signed {
                return entra_error(
                    401,
                    "invalid_client",
                    700027,
                    "The certificate with identifier used to sign the client assertion is not registered on application.",
                );
            }
            if !claims_ok {
                return entra_error(
                    401,
                    "invalid_client",
                    700021,
                    "Client assertion application identifier doesn't match 'client_id' parameter, or its audience is not the token endpoint.",
                );
            }
        } else {
            let jwks = lock(state).jwks.clone();
            if !jwt.verified_by_jwks(&jwks) {
                return entra_error(401, "invalid_client", 700027, "Client assertion failed signature validation.");
            }
            let (iss, sub) =
                (jwt.claims["iss"].as_str().unwrap_or_default(), jwt.claims["sub"].as_str().unwrap_or_default());
            let matches =
                app.federated.iter().any(|(i, s)| i == iss && s == sub) && jwt.has_audience(EXCHANGE_AUDIENCE);
            if !matches {
                return entra_error(
                    400,
                    "invalid_request",
                    70021,
                    &format!(
                        "No matching federated identity record found for presented assertion. Assertion Issuer: '{iss}'. Assertion Subject: '{sub}'. Assertion Audience: '{}'.",
                        jwt.claims["aud"]
                    ),
                );
            }
        }
    } else {
        return entra_error(
            401,
            "invalid_client",
            7000218,
            "The request body must contain the following parameter: 'client_assertion' or 'client_secret'.",
        );
    }
    let (access_token, _) = issue(state, resource, client_id);
    let life = TOKEN_LIFETIME.as_secs();
    json(200, json!({"token_type": "Bearer", "expires_in": life, "ext_expires_in": life, "access_token": access_token}))
}

/// App Service's managed-identity protocol (`api-version=2019-08-01`).
fn managed_identity(state: &Shared, req: &Req) -> axum::response::Response {
    if req.header("x-identity-header") != Some(IDENTITY_HEADER) {
        return json(
            401,
            json!({"statusCode": 401, "message": "Unauthorized: X-IDENTITY-HEADER is missing or wrong."}),
        );
    }
    if req.query.get("api-version").map(String::as_str) != Some("2019-08-01") {
        return json(400, json!({"statusCode": 400, "message": "api-version must be 2019-08-01."}));
    }
    let resource = req.query.get("resource").cloned().unwrap_or_default();
    if !RESOURCES.contains(&resource.trim_end_matches('/')) {
        return json(400, json!({"statusCode": 400, "message": format!("resource {resource:?} is not valid.")}));
    }
    let client_id = req.query.get("client_id").cloned().unwrap_or_default();
    if req.query.contains_key("object_id")
        || req.query.contains_key("mi_res_id")
        || req.query.contains_key("msi_res_id")
    {
        return json(
            400,
            json!({"statusCode": 400, "message": "Only client_id selects a user-assigned identity here."}),
        );
    }
    if !lock(state).managed_identities.contains(&client_id) {
        return json(
            400,
            json!({"statusCode": 400, "message": "No managed identity found for the specified client ID."}),
        );
    }
    let principal = if client_id.is_empty() { "system-assigned".to_string() } else { client_id.clone() };
    let (token, expires) = issue(state, resource.trim_end_matches('/'), &principal);
    json(
        200,
        json!({"access_token": token, "expires_on": expires.to_string(), "resource": resource,
               "token_type": "Bearer", "client_id": if client_id.is_empty() { "system-assigned-client".into() } else { client_id }}),
    )
}

/// The registry's endpoints (a request to the registry's host): ACR's token exchange.
pub(crate) fn registry(state: &Shared, req: &Req) -> axum::response::Response {
    match (req.method.as_str(), req.path.as_str()) {
        ("POST", "/oauth2/exchange") => acr_exchange(state, req),
        ("POST", "/oauth2/token") => acr_token(state, req),
        _ => json(
            404,
            json!({"errors": [{"code": "NAME_UNKNOWN", "message": format!("{} is not a registry endpoint", req.path)}]}),
        ),
    }
}

fn acr_error(status: u16, code: &str, message: &str) -> axum::response::Response {
    json(status, json!({"errors": [{"code": code, "message": message}]}))
}

/// ACR: an Entra ID access token (for ARM) exchanged for a registry refresh token. `service`
/// must be the registry the request went to.
fn acr_exchange(state: &Shared, req: &Req) -> axum::response::Response {
    let f = form(req);
    let get = |k: &str| f.get(k).cloned().unwrap_or_default();
    if get("grant_type") != "access_token" {
        return acr_error(400, "UNSUPPORTED", "grant_type must be access_token");
    }
    if get("service") != host(req) {
        return acr_error(400, "DENIED", &format!("service {:?} is not this registry", get("service")));
    }
    let token = get("access_token");
    let issued = lock(state).tokens.get(&token).cloned();
    let valid = issued.as_ref().is_some_and(|i| i.expires > now() && i.audience == "https://management.azure.com");
    if !valid {
        return acr_error(401, "UNAUTHORIZED", "authentication required");
    }
    let principal = issued.map(|i| i.principal).unwrap_or_default();
    let (refresh, _) = issue(state, &format!("acr-refresh:{}", get("service")), &principal);
    json(200, json!({"refresh_token": refresh}))
}

/// ACR: a registry refresh token exchanged for an access token of a scope.
fn acr_token(state: &Shared, req: &Req) -> axum::response::Response {
    let f = form(req);
    let get = |k: &str| f.get(k).cloned().unwrap_or_default();
    if get("grant_type") != "refresh_token" {
        return acr_error(400, "UNSUPPORTED", "grant_type must be refresh_token");
    }
    let service = get("service");
    if service != host(req) || get("scope").is_empty() {
        return acr_error(400, "DENIED", "service must be this registry, and scope is required");
    }
    let issued = lock(state).tokens.get(&get("refresh_token")).cloned();
    let valid = issued.as_ref().is_some_and(|i| i.expires > now() && i.audience == format!("acr-refresh:{service}"));
    if !valid {
        return acr_error(401, "UNAUTHORIZED", "authentication required");
    }
    let principal = issued.map(|i| i.principal).unwrap_or_default();
    let (access, _) = issue(state, &format!("acr:{service}:{}", get("scope")), &principal);
    json(200, json!({"access_token": access}))
}
