"""Google's Python client for Secret Manager (REST transport) against Keyward's protocol test
server: creates, versions, reads, lists, labels, disables and deletes secrets, authenticated
with google-auth service-account credentials (a self-signed JWT, and a token from the server's
OAuth token endpoint through token_uri). Exits non-zero on the first difference.

Usage: check_server.py <endpoint> <key-file> <project>   (REQUESTS_CA_BUNDLE: the server's CA)
"""
import json
import sys

import google.api_core.exceptions as gexc
from google.auth.transport.requests import Request
from google.cloud import secretmanager
from google.oauth2 import credentials as user_credentials
from google.oauth2 import service_account

endpoint, key_file, project = sys.argv[1:4]
scopes = ["https://www.googleapis.com/auth/cloud-platform"]
info = json.load(open(key_file))
parent = f"projects/{project}"


def client(creds):
    return secretmanager.SecretManagerServiceClient(
        credentials=creds, transport="rest", client_options={"api_endpoint": endpoint}
    )


def expect(exc, fn):
    try:
        fn()
    except exc as e:
        return e
    raise AssertionError(f"expected {exc}")


# 1. The client's own choice for service-account keys: self-signed JWTs.
c = client(service_account.Credentials.from_service_account_info(info, scopes=scopes))
secret = c.create_secret(
    request={"parent": parent, "secret_id": "py-db", "secret": {"replication": {"automatic": {}}, "labels": {"env": "prod"}}}
)
assert secret.name.endswith("/secrets/py-db"), secret.name
expect(gexc.Conflict, lambda: c.create_secret(
    request={"parent": parent, "secret_id": "py-db", "secret": {"replication": {"automatic": {}}}}))
v1 = c.add_secret_version(request={"parent": secret.name, "payload": {"data": b"first"}})
v2 = c.add_secret_version(request={"parent": secret.name, "payload": {"data": b'{"user":"app"}'}})
assert v1.name.endswith("/versions/1") and v2.name.endswith("/versions/2"), (v1.name, v2.name)
latest = c.access_secret_version(request={"name": f"{secret.name}/versions/latest"})
assert latest.payload.data == b'{"user":"app"}', latest.payload.data
def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
    return crc ^ 0xFFFFFFFF


assert latest.payload.data_crc32c == crc32c(latest.payload.data), latest.payload.data_crc32c
assert c.access_secret_version(request={"name": f"{secret.name}/versions/1"}).payload.data == b"first"
expect(gexc.NotFound, lambda: c.access_secret_version(request={"name": f"{secret.name}/versions/9"}))
expect(gexc.NotFound, lambda: c.get_secret(request={"name": f"{parent}/secrets/none"}))

c.disable_secret_version(request={"name": f"{secret.name}/versions/2"})
e = expect(gexc.BadRequest, lambda: c.access_secret_version(request={"name": f"{secret.name}/versions/latest"}))
assert "DISABLED state" in str(e), e
enabled = [v.name for v in c.list_secret_versions(request={"parent": secret.name, "filter": "state:ENABLED"})]
assert enabled == [f"{secret.name}/versions/1"], enabled
c.enable_secret_version(request={"name": f"{secret.name}/versions/2"})

other = c.create_secret(request={"parent": parent, "secret_id": "py-web", "secret": {"replication": {"automatic": {}}}})
names = sorted(s.name.rsplit("/", 1)[1] for s in c.list_secrets(request={"parent": parent}))
assert {"py-db", "py-web"} <= set(names), names
prod = [s.name.rsplit("/", 1)[1] for s in c.list_secrets(request={"parent": parent, "filter": "labels.env=prod"})]
assert prod == ["py-db"], prod
pages = list(c.list_secrets(request={"parent": parent, "page_size": 1}).pages)
assert len(pages) >= 2, len(pages)

updated = c.update_secret(request={"secret": {"name": other.name, "labels": {"env": "dev"}}, "update_mask": {"paths": ["labels"]}})
assert dict(updated.labels) == {"env": "dev"}, updated.labels
expect(gexc.Conflict, lambda: c.delete_secret(request={"name": other.name, "etag": '"0"'}))
c.delete_secret(request={"name": other.name, "etag": updated.etag})
expect(gexc.NotFound, lambda: c.get_secret(request={"name": other.name}))

# 2. A token from the server's OAuth token endpoint (JWT-bearer grant at token_uri).
sa = service_account.Credentials.from_service_account_info(info, scopes=scopes)
sa._always_use_jwt_access = False
sa.refresh(Request())
assert sa.token.startswith("ya29."), sa.token
c2 = client(user_credentials.Credentials(sa.token))
assert c2.access_secret_version(request={"name": f"{secret.name}/versions/1"}).payload.data == b"first"
c2.delete_secret(request={"name": secret.name})

# 3. Wrong credentials: a token the server never issued.
bad = client(user_credentials.Credentials("ya29.not-issued"))
# The server answers 401; google-auth then tries to refresh a token it cannot refresh.
import google.auth.exceptions as aexc
expect((gexc.Unauthorized, aexc.RefreshError), lambda: bad.get_secret(request={"name": secret.name}))
print("google-cloud-secret-manager against the test server: ok")
