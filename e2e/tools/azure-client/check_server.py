"""Microsoft's own Python clients (azure-keyvault-secrets with azure-identity) against Keyward's
Key Vault protocol test server: they create, version, read, list, tag and delete secrets on it,
and are refused with wrong credentials. What keeps the server what Microsoft's clients expect.

Usage: check_server.py VAULT_URL AUTHORITY TENANT CLIENT_ID CLIENT_SECRET (REQUESTS_CA_BUNDLE set
to the server's CA). The vault's host name is resolved to loopback here. The Python client
compares the challenge's resource domain with the vault's host *and port*, and the test vault
listens on a free port, not 443: the check is turned off here (the Rust SDK compares host names
only, and the provider's tests keep it on).
"""

import socket
import sys
from urllib.parse import urlparse

from azure.core.exceptions import ClientAuthenticationError, ResourceNotFoundError
from azure.identity import ClientSecretCredential
from azure.keyvault.secrets import SecretClient

vault_url, authority, tenant, client_id, client_secret = sys.argv[1:6]
vault_host = urlparse(vault_url).hostname
real_getaddrinfo = socket.getaddrinfo


def loopback_vault(host, *args, **kwargs):
    return real_getaddrinfo("127.0.0.1" if host == vault_host else host, *args, **kwargs)


socket.getaddrinfo = loopback_vault


def client(secret):
    credential = ClientSecretCredential(
        tenant, client_id, secret, authority=authority, disable_instance_discovery=True
    )
    return SecretClient(vault_url, credential, verify_challenge_resource=False)


kv = client(client_secret)
first = kv.set_secret("py-secret", "v1", content_type="text/plain", tags={"env": "dev"})
second = kv.set_secret("py-secret", "v2")
assert first.properties.version != second.properties.version, "each set makes a version"
assert kv.get_secret("py-secret").value == "v2"
assert kv.get_secret("py-secret", first.properties.version).value == "v1"
assert first.properties.content_type == "text/plain" and first.properties.tags == {"env": "dev"}
versions = list(kv.list_properties_of_secret_versions("py-secret"))
assert len(versions) == 2, versions

# More secrets than one page holds (25): the client follows nextLink.
for i in range(27):
    kv.set_secret(f"py-page-{i}", str(i))
names = {p.name for p in kv.list_properties_of_secrets()}
assert {"py-secret"} | {f"py-page-{i}" for i in range(27)} <= names, sorted(names)

updated = kv.update_secret_properties("py-secret", tags={"env": "prod"}, enabled=True)
assert updated.tags == {"env": "prod"}, updated.tags
assert kv.get_secret("py-secret").properties.tags == {"env": "prod"}

deleted = kv.begin_delete_secret("py-secret").result()
assert deleted.name == "py-secret" and deleted.recovery_id, deleted
assert kv.get_deleted_secret("py-secret").name == "py-secret"
try:
    kv.get_secret("py-secret")
    raise AssertionError("a deleted secret was read")
except ResourceNotFoundError:
    pass
kv.purge_deleted_secret("py-secret")
try:
    kv.get_deleted_secret("py-secret")
    raise AssertionError("a purged secret is still held deleted")
except ResourceNotFoundError:
    pass

try:
    client("wrong-secret").get_secret("py-page-1")
    raise AssertionError("a wrong client secret was accepted")
except ClientAuthenticationError as e:
    assert "AADSTS7000215" in str(e), e

print("ok")
