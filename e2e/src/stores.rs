//! Real secret stores for the store providers' tests, started on loopback:
//!
//! - [`Moto`]: moto's server (AWS APIs, Secrets Manager and STS included), installed from PyPI
//!   into a cached virtualenv by `e2e/scripts/install-moto.sh`;
//! - [`VaultDev`]: `vault server -dev`, built from Vault's Go module by
//!   `e2e/scripts/build-vault.sh`, driven with the `vault` CLI itself;
//! - [`Slapd`]: OpenLDAP's `slapd` (Debian's package, installed by
//!   `e2e/scripts/install-slapd.sh`) with a throwaway directory, for Vault's LDAP login;
//! - [`OpenStack`]: Keystone and Barbican, installed from PyPI into a cached virtualenv by
//!   `e2e/scripts/install-openstack.sh`;
//! - [`SecretManagerServer`]: a protocol test server for GCP Secret Manager and Google's token
//!   endpoints (no emulator can be installed), checked by Google's Python client;
//! - [`AzureKeyVault`]: a protocol test server for Azure Key Vault and Entra ID (no emulator can
//!   be installed), checked by Microsoft's Python clients.
//!
//! All stop when dropped.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::{ChildProcess, free_port, repo_root, spawn_logged};

pub mod azure;
mod gcp;
mod openstack;
pub use azure::AzureKeyVault;
pub use gcp::{SecretManagerServer, ServiceAccountKey, rsa_public_key_der};
pub use openstack::OpenStack;

/// Runs a cache script (build or install, once) and returns the directory it prints.
///
/// # Panics
/// When the script fails: the tests that need the store cannot run.
pub fn cached_tool(script: &str) -> PathBuf {
    let out = Command::new("bash")
        .arg(repo_root().join("e2e/scripts").join(script))
        .stderr(Stdio::inherit())
        .output()
        .unwrap_or_else(|e| panic!("run e2e/scripts/{script}: {e}"));
    assert!(out.status.success(), "e2e/scripts/{script} failed ({})", out.status);
    PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
}

fn wait_for_port(host: &str, port: u16, process: &mut ChildProcess, what: &str) {
    wait_for(process, &format!("{what} listening on {host}:{port}"), |_| listening(host, port));
}

fn listening(host: &str, port: u16) -> bool {
    std::net::TcpStream::connect((host, port)).is_ok()
}

/// Waits up to 60 s for `ready`, failing early when the process exits.
fn wait_for(process: &mut ChildProcess, what: &str, ready: impl Fn(&ChildProcess) -> bool) {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(60) {
        if ready(process) {
            return;
        }
        assert!(process.is_running(), "exited before {what}:\n{}", process.log());
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("not {what} within 60s:\n{}", process.log());
}

/// A moto server.
pub struct Moto {
    process: ChildProcess,
    host: String,
    port: u16,
    /// Where moto's recorder writes every request it serves, when it records.
    log: Option<tempfile::TempPath>,
}

impl Moto {
    /// Installs (first run) and starts moto's server on a free loopback port.
    pub fn start() -> Moto {
        Moto::start_on("127.0.0.1")
    }

    /// Like [`Moto::start`], listening on `host` (e.g. [`crate::node_ip`], where the one-node
    /// cluster's Pods reach the host).
    pub fn start_on(host: &str) -> Moto {
        Moto::spawn(host, None)
    }

    /// Like [`Moto::start`], with moto's recorder on: every request moto serves is written to a
    /// file, read back with [`Moto::requests`] (the store's own count of the calls it got).
    pub fn start_recording() -> Moto {
        let log = tempfile::NamedTempFile::new().expect("a temporary file for moto's request log").into_temp_path();
        Moto::spawn("127.0.0.1", Some(log))
    }

    fn spawn(host: &str, log: Option<tempfile::TempPath>) -> Moto {
        let venv = cached_tool("install-moto.sh");
        let port = free_port();
        let mut cmd = Command::new(venv.join("bin/moto_server"));
        cmd.args(["-H", host, "-p", &port.to_string()]);
        if let Some(log) = &log {
            cmd.env("MOTO_ENABLE_RECORDING", "true").env("MOTO_RECORDER_FILEPATH", log.as_os_str());
        }
        let mut process = spawn_logged("moto", cmd);
        wait_for_port(host, port, &mut process, "moto_server");
        Moto { process, host: host.to_string(), port, log }
    }

    /// The requests moto served, oldest first (empty unless started with
    /// [`Moto::start_recording`]).
    pub fn requests(&self) -> Vec<MotoRequest> {
        let Some(log) = &self.log else { return Vec::new() };
        let text = std::fs::read_to_string(log).unwrap_or_default();
        text.lines().filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok()).map(MotoRequest::from).collect()
    }

    /// `http://<host>:<port>`: the endpoint the AWS SDK is pointed at.
    pub fn endpoint(&self) -> String {
        format!("http://{}:{}", self.host, self.port)
    }

    /// Environment of an AWS provider process that talks to this server.
    pub fn provider_env(&self) -> Vec<(&'static str, String)> {
        vec![("AWS_ENDPOINT_URL", self.endpoint()), ("AWS_EC2_METADATA_DISABLED", "true".into())]
    }

    /// Runs Python `code` with boto3 (installed with moto) clients for this server in `region`:
    /// `sm` (Secrets Manager) and `ssm` (Parameter Store), and `json` imported; returns stdout,
    /// or stderr when it fails.
    pub fn boto3(&self, region: &str, code: &str) -> Result<String, String> {
        let venv = cached_tool("install-moto.sh");
        let script = format!(
            "import boto3,json\nkw=dict(region_name='{region}',endpoint_url='{}',aws_access_key_id='t',\
             aws_secret_access_key='t')\nsm=boto3.client('secretsmanager',**kw)\nssm=boto3.client('ssm',**kw)\n{code}",
            self.endpoint()
        );
        let out = Command::new(venv.join("bin/python"))
            .args(["-c", &script])
            .output()
            .map_err(|e| format!("run python: {e}"))?;
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            Err(String::from_utf8_lossy(&out.stderr).into_owned())
        }
    }

    /// The moto process (for its log).
    pub fn process(&self) -> &ChildProcess {
        &self.process
    }
}

/// One request moto served, as its recorder wrote it.
#[derive(Debug, Clone)]
pub struct MotoRequest {
    /// The JSON protocol's operation, e.g. `secretsmanager.GetSecretValue` or
    /// `AmazonSSM.GetParameter` (the `X-Amz-Target` header); for the query protocol (STS), the
    /// form's `Action`, e.g. `GetSessionToken`; else empty.
    pub target: String,
    /// The access key ID that signed the request (from its `Authorization` header).
    pub access_key: String,
    /// The JSON body, or `null`.
    pub body: serde_json::Value,
}

impl From<serde_json::Value> for MotoRequest {
    fn from(entry: serde_json::Value) -> Self {
        let headers = entry["headers"].as_object().cloned().unwrap_or_default();
        let header = |name: &str| {
            headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).and_then(|(_, v)| v.as_str()).unwrap_or_default()
        };
        let access_key = header("authorization")
            .split_once("Credential=")
            .and_then(|(_, rest)| rest.split('/').next())
            .unwrap_or_default()
            .to_string();
        let body = entry["body"].as_str().unwrap_or_default();
        let body = if entry["body_encoded"] == true {
            use base64::Engine as _;
            base64::engine::general_purpose::STANDARD.decode(body).unwrap_or_default()
        } else {
            body.as_bytes().to_vec()
        };
        let action = || {
            let form = std::str::from_utf8(&body).ok()?;
            form.split('&').find_map(|kv| kv.strip_prefix("Action=")).map(str::to_string)
        };
        let target = match header("x-amz-target") {
            "" => action().unwrap_or_default(),
            t => t.to_string(),
        };
        MotoRequest { target, access_key, body: serde_json::from_slice(&body).unwrap_or(serde_json::Value::Null) }
    }
}

/// `vault server -dev` (in-memory, unsealed, KV v2 mounted at `secret/`).
pub struct VaultDev {
    process: ChildProcess,
    host: String,
    port: u16,
    root_token: String,
    bin: PathBuf,
    /// With `-dev-tls`: the directory of the CA, certificate and key the server generated.
    tls_dir: Option<tempfile::TempDir>,
}

impl VaultDev {
    /// Mounts the PKI engine at `pki/` with a root CA for `example.com` and a role `web` that
    /// issues certificates for its subdomains (within the root CA's lifetime: the role's default
    /// is the mount's, longer).
    pub fn enable_pki(&self) {
        self.cli(&["secrets", "enable", "pki"]);
        self.cli(&["write", "pki/root/generate/internal", "common_name=example.com"]);
        self.cli(&["write", "pki/roles/web", "allowed_domains=example.com", "allow_subdomains=true", "max_ttl=24h"]);
    }

    /// Builds Vault (first run) and starts a dev server on a free loopback port (plain HTTP).
    pub fn start() -> VaultDev {
        VaultDev::start_with(false, "127.0.0.1", &[])
    }

    /// Like [`VaultDev::start`], with `env` for the `vault` process: how it reaches the servers
    /// its auth methods check logins with, such as a protocol test server standing in for a
    /// cloud API (`SSL_CERT_FILE` for its CA, `GOOGLE_APPLICATION_CREDENTIALS`).
    pub fn start_with_env(env: &[(&str, &str)]) -> VaultDev {
        VaultDev::start_with(false, "127.0.0.1", env)
    }

    /// Like [`VaultDev::start`], listening on `host` (e.g. [`crate::node_ip`], where the
    /// one-node cluster's Pods reach the host).
    pub fn start_on(host: &str) -> VaultDev {
        VaultDev::start_with(false, host, &[])
    }

    /// Like [`VaultDev::start`], serving HTTPS with a certificate for `127.0.0.1` signed by a CA
    /// the server generates (`-dev-tls`); [`VaultDev::ca_pem`] is that CA.
    pub fn start_tls() -> VaultDev {
        VaultDev::start_with(true, "127.0.0.1", &[])
    }

    fn start_with(tls: bool, host: &str, env: &[(&str, &str)]) -> VaultDev {
        let bin = cached_tool("build-vault.sh").join("vault");
        let port = crate::process::free_ports(2);
        let root_token = format!("root-{:016x}", rand::random::<u64>());
        let tls_dir = tls.then(|| tempfile::tempdir().unwrap_or_else(|e| panic!("temp dir for vault TLS: {e}")));
        let mut cmd = Command::new(&bin);
        cmd.args(["server", "-dev", "-dev-no-store-token"])
            .arg(format!("-dev-root-token-id={root_token}"))
            .arg(format!("-dev-listen-address={host}:{port}"))
            // Dev servers otherwise read ~/.vault-token and the machine's VAULT_* settings.
            .env_remove("VAULT_ADDR")
            .env_remove("VAULT_TOKEN")
            .env_remove("VAULT_CACERT");
        cmd.envs(env.iter().copied());
        if let Some(dir) = &tls_dir {
            cmd.arg("-dev-tls").arg(format!("-dev-tls-cert-dir={}", dir.path().display()));
        }
        let mut process = spawn_logged("vault", cmd);
        wait_for_port(host, port, &mut process, "vault server -dev");
        // The dev server's cluster listener takes the next port once unsealed (free_ports(2) keeps
        // this test binary from handing it out); wait for it too, so another process's check finds
        // it taken. Another process may still take it first: then the dev server, which never
        // uses its cluster listener, logs the bind error and serves on.
        wait_for(&mut process, "vault server -dev's cluster listener started or refused", |p| {
            listening(host, port + 1) || p.log().contains("cluster-listener.tcp: error starting listener")
        });
        let vault = VaultDev { process, host: host.to_string(), port, root_token, bin, tls_dir };
        // Unsealed and the KV mount ready.
        let start = Instant::now();
        while vault.try_cli(&["kv", "list", "secret/"]).is_err_and(|e| !e.contains("No value found")) {
            assert!(start.elapsed() < Duration::from_secs(60), "vault dev server not ready:\n{}", vault.process.log());
            std::thread::sleep(Duration::from_millis(200));
        }
        vault
    }

    /// `http://<host>:<port>` (`https://` with TLS).
    pub fn address(&self) -> String {
        let scheme = if self.tls_dir.is_some() { "https" } else { "http" };
        format!("{scheme}://{}:{}", self.host, self.port)
    }

    /// The PEM CA that signs the server's certificate (a TLS server only).
    ///
    /// # Panics
    /// When the server does not serve TLS or its CA cannot be read.
    pub fn ca_pem(&self) -> String {
        let dir = self.tls_dir.as_ref().unwrap_or_else(|| panic!("this vault dev server does not serve TLS"));
        std::fs::read_to_string(dir.path().join("vault-ca.pem")).unwrap_or_else(|e| panic!("read vault-ca.pem: {e}"))
    }

    /// The root token.
    pub fn root_token(&self) -> &str {
        &self.root_token
    }

    /// The vault process (for its log).
    pub fn process(&self) -> &ChildProcess {
        &self.process
    }

    /// Runs the `vault` CLI against this server as root; returns stdout or stderr.
    pub fn try_cli_with_stdin(&self, args: &[&str], stdin: Option<&str>) -> Result<String, String> {
        let mut cmd = Command::new(&self.bin);
        cmd.args(args).env("VAULT_ADDR", self.address()).env("VAULT_TOKEN", &self.root_token);
        match &self.tls_dir {
            Some(dir) => cmd.env("VAULT_CACERT", dir.path().join("vault-ca.pem")),
            None => cmd.env_remove("VAULT_CACERT"),
        };
        let mut child = cmd
            .env_remove("VAULT_NAMESPACE")
            .stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("run vault: {e}"))?;
        if let (Some(text), Some(mut pipe)) = (stdin, child.stdin.take()) {
            pipe.write_all(text.as_bytes()).map_err(|e| format!("write vault stdin: {e}"))?;
        }
        let out = child.wait_with_output().map_err(|e| format!("wait for vault: {e}"))?;
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            Err(format!("vault {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr)))
        }
    }

    /// Runs the `vault` CLI; returns stdout or an error message.
    pub fn try_cli(&self, args: &[&str]) -> Result<String, String> {
        self.try_cli_with_stdin(args, None)
    }

    /// Runs the `vault` CLI and returns stdout.
    ///
    /// # Panics
    /// When the command fails.
    pub fn cli(&self, args: &[&str]) -> String {
        self.try_cli(args).unwrap_or_else(|e| panic!("{e}"))
    }

    /// Runs `vault <command> -format=json <args>` (flags go before positional arguments) and
    /// parses the output.
    ///
    /// # Panics
    /// When the command fails or does not print JSON.
    pub fn json(&self, command: &[&str], args: &[&str]) -> serde_json::Value {
        let all: Vec<&str> = command.iter().copied().chain(["-format=json"]).chain(args.iter().copied()).collect();
        let out = self.cli(&all);
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("vault {}: not JSON ({e}): {out}", all.join(" ")))
    }

    /// Turns on Vault's file audit log, with `headers` recorded in the clear: every request
    /// Vault serves, as Vault itself saw it (tests count store calls with it).
    pub fn audit(&self, headers: &[&str]) -> VaultAudit {
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
        let path = std::env::temp_dir().join(format!("vault-audit-{}-{nanos:x}.log", std::process::id()));
        self.cli(&["audit", "enable", "file", &format!("file_path={}", path.display())]);
        for h in headers {
            self.cli(&["write", &format!("sys/config/auditing/request-headers/{h}"), "hmac=false"]);
        }
        VaultAudit(path)
    }

    /// Writes a policy.
    pub fn policy(&self, name: &str, hcl: &str) {
        self.try_cli_with_stdin(&["policy", "write", name, "-"], Some(hcl)).unwrap_or_else(|e| panic!("{e}"));
    }

    /// Enables AppRole at `approle/` with a role `name` under `policies`; returns (role ID,
    /// secret ID).
    pub fn approle(&self, name: &str, policies: &str) -> (String, String) {
        let _ = self.try_cli(&["auth", "enable", "approle"]);
        self.cli(&["write", &format!("auth/approle/role/{name}"), &format!("token_policies={policies}")]);
        let role = self.json(&["read"], &[&format!("auth/approle/role/{name}/role-id")]);
        let secret = self.json(&["write"], &["-f", &format!("auth/approle/role/{name}/secret-id")]);
        let s = |v: &serde_json::Value, k: &str| v["data"][k].as_str().unwrap_or_default().to_string();
        (s(&role, "role_id"), s(&secret, "secret_id"))
    }
}

/// OpenLDAP's `slapd` on loopback with a throwaway configuration and database in a temporary
/// directory: the base DN [`Slapd::BASE_DN`], users under [`Slapd::USERS_DN`] (`uid=<name>`) and
/// one user, [`Slapd::USER`], with the password [`Slapd::PASSWORD`]. Passwords are readable by
/// no one; binding with them is open to all.
pub struct Slapd {
    process: ChildProcess,
    port: u16,
    _dir: tempfile::TempDir,
}

impl Slapd {
    /// The base DN.
    pub const BASE_DN: &'static str = "dc=keyward,dc=test";
    /// Where users live; a user binds as `uid=<name>,<USERS_DN>`.
    pub const USERS_DN: &'static str = "ou=users,dc=keyward,dc=test";
    /// The user's name.
    pub const USER: &'static str = "alice";
    /// The user's password.
    pub const PASSWORD: &'static str = "ldap-s3cret";

    /// Installs slapd (first run, as root) and starts it on a free loopback port.
    ///
    /// # Panics
    /// When slapd cannot be installed, configured or started.
    pub fn start() -> Slapd {
        let sbin = cached_tool("install-slapd.sh");
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("temp dir for slapd: {e}"));
        let db = dir.path().join("db");
        std::fs::create_dir(&db).unwrap_or_else(|e| panic!("create {}: {e}", db.display()));
        let conf = dir.path().join("slapd.conf");
        let base = Self::BASE_DN;
        let config = format!(
            "include /etc/ldap/schema/core.schema\n\
             include /etc/ldap/schema/cosine.schema\n\
             include /etc/ldap/schema/inetorgperson.schema\n\
             modulepath /usr/lib/ldap\n\
             moduleload back_mdb\n\
             pidfile {pid}\n\
             database mdb\n\
             maxsize 10485760\n\
             suffix \"{base}\"\n\
             rootdn \"cn=admin,{base}\"\n\
             directory {db}\n\
             access to attrs=userPassword by anonymous auth by * none\n\
             access to * by * read\n",
            pid = dir.path().join("slapd.pid").display(),
            db = db.display(),
        );
        std::fs::write(&conf, config).unwrap_or_else(|e| panic!("write {}: {e}", conf.display()));
        let ldif = format!(
            "dn: {base}\nobjectClass: dcObject\nobjectClass: organization\no: keyward\ndc: keyward\n\n\
             dn: {users}\nobjectClass: organizationalUnit\nou: users\n\n\
             dn: uid={user},{users}\nobjectClass: inetOrgPerson\nuid: {user}\ncn: {user}\nsn: {user}\n\
             userPassword: {password}\n",
            users = Self::USERS_DN,
            user = Self::USER,
            password = Self::PASSWORD,
        );
        let ldif_file = dir.path().join("init.ldif");
        std::fs::write(&ldif_file, ldif).unwrap_or_else(|e| panic!("write {}: {e}", ldif_file.display()));
        // The directory is loaded offline, before the server starts.
        let out = Command::new(sbin.join("slapadd"))
            .arg("-f")
            .arg(&conf)
            .arg("-l")
            .arg(&ldif_file)
            .output()
            .unwrap_or_else(|e| panic!("run slapadd: {e}"));
        assert!(out.status.success(), "slapadd failed: {}", String::from_utf8_lossy(&out.stderr));
        let port = free_port();
        let mut cmd = Command::new(sbin.join("slapd"));
        // -d 0: in the foreground (stopped on drop), without debug output.
        cmd.arg("-h").arg(format!("ldap://127.0.0.1:{port}/")).arg("-f").arg(&conf).args(["-d", "0"]);
        let mut process = spawn_logged("slapd", cmd);
        wait_for_port("127.0.0.1", port, &mut process, "slapd");
        Slapd { process, port, _dir: dir }
    }

    /// `ldap://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("ldap://127.0.0.1:{}", self.port)
    }

    /// The slapd process (for its log).
    pub fn process(&self) -> &ChildProcess {
        &self.process
    }
}

/// Vault's audit log ([`VaultDev::audit`]), removed when dropped.
pub struct VaultAudit(PathBuf);

impl VaultAudit {
    /// Requests (not responses) Vault logged.
    pub fn requests(&self) -> Vec<serde_json::Value> {
        let text = std::fs::read_to_string(&self.0).unwrap_or_default();
        text.lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter(|e| e["type"] == "request")
            .map(|e| e["request"].clone())
            .collect()
    }

    /// How many requests went to `path`.
    pub fn count(&self, path: &str) -> usize {
        self.requests().iter().filter(|r| r["path"] == path).count()
    }

    /// How many reads (not writes: `vault kv put` is logged at the same path) went to `path`.
    pub fn reads(&self, path: &str) -> usize {
        self.requests().iter().filter(|r| r["path"] == path && r["operation"] == "read").count()
    }
}

impl Drop for VaultAudit {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}
