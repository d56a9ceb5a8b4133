//! OpenStack Keystone (identity, v3) and Barbican (key manager) on loopback, installed from PyPI
//! into a cached virtualenv by `e2e/scripts/install-openstack.sh`, each served by
//! `e2e/tools/openstack/serve.py` (one process each, sqlite databases in a temporary directory).
//! Keystone's catalog names Barbican as the `key-manager` service in [`OpenStack::REGION`].

use std::path::{Path, PathBuf};
use std::process::Command;

use super::{cached_tool, wait_for_port};
use crate::{ChildProcess, free_port, repo_root, spawn_logged};

/// Keystone and Barbican, with one tenant: the user [`OpenStack::USER`] in the domain
/// [`OpenStack::DOMAIN`], with the `member` and `creator` roles on the project
/// [`OpenStack::PROJECT`] (enough to create and read that project's secrets). Both stop when
/// dropped.
pub struct OpenStack {
    keystone: ChildProcess,
    barbican: ChildProcess,
    host: String,
    keystone_port: u16,
    barbican_port: u16,
    admin_password: String,
    password: String,
    venv: PathBuf,
    _dir: tempfile::TempDir,
}

impl OpenStack {
    /// The region of Barbican's catalog endpoint.
    pub const REGION: &'static str = "RegionOne";
    /// The tenant's domain (the user's and the project's).
    pub const DOMAIN: &'static str = "keyward";
    /// The tenant's project.
    pub const PROJECT: &'static str = "tenant-a";
    /// The tenant's user.
    pub const USER: &'static str = "alice";

    /// Installs (first run) and starts Keystone and Barbican on free loopback ports.
    pub fn start() -> OpenStack {
        OpenStack::start_on("127.0.0.1")
    }

    /// Like [`OpenStack::start`], listening on `host` (e.g. [`crate::node_ip`], where the
    /// one-node cluster's Pods reach the host); the catalog and Barbican's secret references
    /// name `host` too.
    ///
    /// # Panics
    /// When either server cannot be configured or started.
    pub fn start_on(host: &str) -> OpenStack {
        OpenStack::start_with(host, 3600)
    }

    /// Like [`OpenStack::start`], Keystone's tokens expiring `seconds` after they are issued
    /// (3600 otherwise).
    pub fn start_with_token_expiration(seconds: u32) -> OpenStack {
        OpenStack::start_with("127.0.0.1", seconds)
    }

    fn start_with(host: &str, token_seconds: u32) -> OpenStack {
        let venv = cached_tool("install-openstack.sh");
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("temp dir for keystone and barbican: {e}"));
        let admin_password = format!("admin-{:016x}", rand::random::<u64>());
        let password = format!("pw-{:016x}", rand::random::<u64>());
        let keystone_port = free_port();
        let barbican_port = free_port();
        let auth_url = format!("http://{host}:{keystone_port}/v3");
        let barbican_url = format!("http://{host}:{barbican_port}");

        // Keystone: configuration, database, key repositories, the admin user and catalog.
        let ks = dir.path().join("keystone");
        std::fs::create_dir_all(&ks).unwrap_or_else(|e| panic!("create {}: {e}", ks.display()));
        let p = |name: &str| ks.join(name).display().to_string();
        let conf = format!(
            "[DEFAULT]\nuse_stderr = true\n\
             [database]\nconnection = sqlite:///{db}\n\
             [fernet_tokens]\nkey_repository = {fernet}\n\
             [fernet_receipts]\nkey_repository = {receipts}\n\
             [credential]\nkey_repository = {credential}\n\
             [token]\nexpiration = {token_seconds}\n",
            db = p("keystone.db"),
            fernet = p("fernet-keys"),
            receipts = p("fernet-receipts"),
            credential = p("credential-keys"),
        );
        let conf_file = ks.join("keystone.conf");
        write(&conf_file, &conf);
        let uid = Command::new("id").arg("-u").output().map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string());
        let gid = Command::new("id").arg("-g").output().map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string());
        let (uid, gid) = (uid.unwrap_or_else(|_| "0".into()), gid.unwrap_or_else(|_| "0".into()));
        let owner = ["--keystone-user", uid.as_str(), "--keystone-group", gid.as_str()];
        // The key repositories do not need the database: set them up while it migrates.
        let keys = [
            keystone_manage(&venv, &conf_file, &[&["fernet_setup"][..], &owner[..]].concat()),
            keystone_manage(&venv, &conf_file, &[&["credential_setup"][..], &owner[..]].concat()),
        ];
        wait_manage(keystone_manage(&venv, &conf_file, &["db_sync"]), "db_sync");
        for (child, what) in keys.into_iter().zip(["fernet_setup", "credential_setup"]) {
            wait_manage(child, what);
        }
        let bootstrap = keystone_manage(
            &venv,
            &conf_file,
            &[
                "bootstrap",
                "--bootstrap-password",
                &admin_password,
                "--bootstrap-public-url",
                &auth_url,
                "--bootstrap-region-id",
                Self::REGION,
            ],
        );
        wait_manage(bootstrap, "bootstrap");
        let mut cmd = serve(&venv, &ks, "keystone", host, keystone_port);
        cmd.env("OS_KEYSTONE_CONFIG_DIR", &ks).env("OS_KEYSTONE_CONFIG_FILES", "keystone.conf");
        let mut keystone = spawn_logged("keystone", cmd);

        // Barbican reads ~/.barbican/barbican.conf: HOME is its directory.
        let bb = dir.path().join("barbican");
        std::fs::create_dir_all(bb.join(".barbican")).unwrap_or_else(|e| panic!("create {}: {e}", bb.display()));
        let kek: [u8; 32] = rand::random();
        let conf = format!(
            "[DEFAULT]\nuse_stderr = true\nhost_href = {barbican_url}\n\
             db_auto_create = true\n\
             [database]\nconnection = sqlite:///{db}\n\
             [secretstore]\nenabled_secretstore_plugins = store_crypto\n\
             [crypto]\nenabled_crypto_plugins = simple_crypto\n\
             [simple_crypto_plugin]\nkek = {kek}\n\
             [keystone_authtoken]\nwww_authenticate_uri = {auth_url}\nauth_url = {auth_url}\n\
             interface = public\nauth_type = password\nusername = admin\npassword = {admin_password}\n\
             user_domain_id = default\nproject_name = admin\nproject_domain_id = default\n\
             # Every request asks Keystone: a revoked token is refused at once.\n\
             token_cache_time = -1\n\
             [oslo_policy]\nenforce_scope = true\nenforce_new_defaults = true\n",
            db = bb.join("barbican.db").display(),
            kek = base64(&kek),
        );
        write(&bb.join(".barbican/barbican.conf"), &conf);
        let paste = venv.join("etc/barbican/barbican-api-paste.ini");
        let mut cmd = serve(&venv, &bb, "barbican", host, barbican_port);
        cmd.env("HOME", &bb).env("BARBICAN_PASTE_INI", &paste);
        let barbican = spawn_logged("barbican", cmd);

        wait_for_port(host, keystone_port, &mut keystone, "keystone");
        let openstack = OpenStack {
            keystone,
            barbican,
            host: host.to_string(),
            keystone_port,
            barbican_port,
            admin_password,
            password,
            venv,
            _dir: dir,
        };
        openstack.admin(
            "provision",
            serde_json::json!({
                "domain": Self::DOMAIN, "project": Self::PROJECT, "user": Self::USER,
                "password": openstack.password, "roles": ["member", "creator"],
                "barbican_url": openstack.barbican_url(), "region": Self::REGION,
            }),
        );
        let mut openstack = openstack;
        let (host, port) = (openstack.host.clone(), openstack.barbican_port);
        wait_for_port(&host, port, &mut openstack.barbican, "barbican");
        openstack
    }

    /// Keystone's v3 endpoint, `http://<host>:<port>/v3` (a SecretStore's `authURL`).
    pub fn auth_url(&self) -> String {
        format!("http://{}:{}/v3", self.host, self.keystone_port)
    }

    /// Barbican's endpoint, `http://<host>:<port>` (as in Keystone's catalog).
    pub fn barbican_url(&self) -> String {
        format!("http://{}:{}", self.host, self.barbican_port)
    }

    /// The region of Barbican's endpoint.
    pub fn region(&self) -> &'static str {
        Self::REGION
    }

    /// The tenant's domain.
    pub fn domain(&self) -> &'static str {
        Self::DOMAIN
    }

    /// The tenant's project.
    pub fn project(&self) -> &'static str {
        Self::PROJECT
    }

    /// The tenant's user.
    pub fn user(&self) -> &'static str {
        Self::USER
    }

    /// The tenant user's password.
    pub fn password(&self) -> &str {
        &self.password
    }

    /// The admin password (user `admin` in the `Default` domain, project `admin`).
    pub fn admin_password(&self) -> &str {
        &self.admin_password
    }

    /// Adds a user (and its domain and project when new) with the `member` and `creator` roles
    /// on the project.
    pub fn add_user(&self, domain: &str, project: &str, user: &str, password: &str) {
        self.admin(
            "provision",
            serde_json::json!({
                "domain": domain, "project": project, "user": user, "password": password,
                "roles": ["member", "creator"],
            }),
        );
    }

    /// Stores a text secret named `name` as the tenant user (`text/plain`); returns its ID (the
    /// last segment of its secret reference).
    pub fn create_secret(&self, name: &str, payload: &str) -> String {
        self.admin("create-secret", self.as_user(serde_json::json!({ "name": name, "payload": payload })))
    }

    /// Stores a binary secret (`application/octet-stream`) named `name` as the tenant user;
    /// returns its ID.
    pub fn create_binary_secret(&self, name: &str, payload: &[u8]) -> String {
        self.admin(
            "create-secret",
            self.as_user(serde_json::json!({ "name": name, "payload_base64": base64(payload) })),
        )
    }

    /// Deletes a secret as the tenant user.
    pub fn delete_secret(&self, id: &str) {
        self.admin("delete-secret", self.as_user(serde_json::json!({ "id": id })));
    }

    /// Revokes every token Keystone issued to the tenant user (the user stays able to log in).
    pub fn revoke_user_tokens(&self) {
        self.admin("revoke-user", self.as_user(serde_json::json!({})));
    }

    /// How many password logins (`POST /v3/auth/tokens`) of the tenant user Keystone was sent
    /// so far, the harness's own included (Barbican's service logins are not counted).
    pub fn keystone_logins(&self) -> usize {
        self.logins_of(Self::USER)
    }

    /// How many password logins of `user` Keystone was sent so far.
    pub fn logins_of(&self, user: &str) -> usize {
        let line = format!("keystone password login: user={}", serde_json::Value::from(user));
        self.keystone.log().lines().filter(|l| *l == line).count()
    }

    /// The Keystone process (for its log).
    pub fn keystone(&self) -> &ChildProcess {
        &self.keystone
    }

    /// The Barbican process (for its log).
    pub fn barbican(&self) -> &ChildProcess {
        &self.barbican
    }

    fn as_user(&self, mut args: serde_json::Value) -> serde_json::Value {
        args["domain"] = Self::DOMAIN.into();
        args["project"] = Self::PROJECT.into();
        args["user"] = Self::USER.into();
        args["password"] = self.password.clone().into();
        args
    }

    /// Runs `e2e/tools/openstack/admin.py <command>` with `args` (and the URLs and admin
    /// password); returns its trimmed stdout.
    fn admin(&self, command: &str, mut args: serde_json::Value) -> String {
        args["auth_url"] = self.auth_url().into();
        args["admin_password"] = self.admin_password.clone().into();
        if args.get("barbican_url").is_none() {
            args["barbican_url"] = self.barbican_url().into();
        }
        let out = Command::new(self.venv.join("bin/python"))
            .arg(repo_root().join("e2e/tools/openstack/admin.py"))
            .arg(command)
            .arg(args.to_string())
            .output()
            .unwrap_or_else(|e| panic!("run admin.py {command}: {e}"));
        assert!(
            out.status.success(),
            "admin.py {command} failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }
}

fn write(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
}

fn keystone_manage(venv: &Path, conf: &Path, args: &[&str]) -> std::process::Child {
    Command::new(venv.join("bin/keystone-manage"))
        .arg("--config-file")
        .arg(conf)
        .args(args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("run keystone-manage {}: {e}", args.join(" ")))
}

fn wait_manage(child: std::process::Child, what: &str) {
    let out = child.wait_with_output().unwrap_or_else(|e| panic!("wait for keystone-manage {what}: {e}"));
    assert!(
        out.status.success(),
        "keystone-manage {what} failed ({}):\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn serve(venv: &Path, dir: &Path, service: &str, host: &str, port: u16) -> Command {
    let mut cmd = Command::new(venv.join("bin/python"));
    cmd.arg(repo_root().join("e2e/tools/openstack/serve.py")).args([service, host, &port.to_string()]);
    // Nothing either writes may land in the working directory (the test's crate).
    cmd.current_dir(dir);
    cmd
}

/// Standard base64 with padding (Barbican's KEK and binary payloads).
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let n = chunk.iter().enumerate().fold(0u32, |n, (i, b)| n | (u32::from(*b) << (16 - 8 * i)));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[(n >> (18 - 6 * i)) as usize & 63]));
            } else {
                out.push('=');
            }
        }
    }
    out
}
