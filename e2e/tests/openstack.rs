//! The OpenStack harness: Keystone issues the tenant user a project-scoped token whose catalog
//! names Barbican in the region, and Barbican stores and serves that user's secrets.

use keyward_e2e::stores::OpenStack;

#[test]
fn keystone_and_barbican_serve_the_tenant() {
    let os = OpenStack::start();
    let id = os.create_secret("db", r#"{"user":"admin"}"#);
    assert_eq!(id.len(), 36, "a UUID: {id}");
    let binary = os.create_binary_secret("blob", &[0, 1, 2, 255]);
    assert_ne!(id, binary);
    let before = os.keystone_logins();
    os.revoke_user_tokens();
    os.delete_secret(&id);
    assert!(os.keystone_logins() > before, "logins are counted");
    os.add_user("other", "tenant-b", "bob", "bob-pw");
    assert!(os.auth_url().ends_with("/v3") && os.barbican_url().starts_with("http://127.0.0.1:"));
}
