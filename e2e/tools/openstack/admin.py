"""Keystone and Barbican calls for the OpenStack test servers (e2e/src/stores/openstack.rs).

    python admin.py COMMAND JSON

COMMAND is provision, create-secret, delete-secret or revoke-user; JSON holds its arguments.
Prints the result (a secret's ID for create-secret) on stdout; fails with the server's answer.
"""

import json
import sys
import time
import urllib.error
import urllib.request


def call(url, method, body=None, token=None, headers=None):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, method=method, data=data)
    req.add_header("Content-Type", "application/json")
    req.add_header("Accept", "application/json")
    if token:
        req.add_header("X-Auth-Token", token)
    for k, v in (headers or {}).items():
        req.add_header(k, v)
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            raw = r.read()
            return r.headers, (json.loads(raw) if raw else None)
    except urllib.error.HTTPError as e:
        raise SystemExit("%s %s: %s %s" % (method, url, e.code, e.read().decode(errors="replace")))


def login(a, user, password, domain, project, project_domain):
    body = {
        "auth": {
            "identity": {
                "methods": ["password"],
                "password": {"user": {"name": user, "domain": {"name": domain}, "password": password}},
            },
            "scope": {"project": {"name": project, "domain": {"name": project_domain}}},
        }
    }
    headers, _ = call(a["auth_url"] + "/auth/tokens", "POST", body)
    return headers["X-Subject-Token"]


def admin_token(a):
    return login(a, "admin", a["admin_password"], "Default", "admin", "Default")


def user_token(a):
    return login(a, a["user"], a["password"], a["domain"], a["project"], a["domain"])


def find_or_create(a, tok, kind, name, body, query=""):
    _, found = call("%s/%s?name=%s%s" % (a["auth_url"], kind, name, query), "GET", token=tok)
    if found[kind]:
        return found[kind][0]["id"]
    _, made = call("%s/%s" % (a["auth_url"], kind), "POST", {kind[:-1]: body}, tok)
    return made[kind[:-1]]["id"]


def provision(a):
    """A domain, a project in it and a user with the given roles on the project; with
    `region`, the key-manager service and its public endpoint `barbican_url` there."""
    ks = a["auth_url"]
    tok = admin_token(a)
    domain = find_or_create(a, tok, "domains", a["domain"], {"name": a["domain"]})
    project = find_or_create(
        a, tok, "projects", a["project"], {"name": a["project"], "domain_id": domain}, "&domain_id=" + domain
    )
    user = find_or_create(
        a,
        tok,
        "users",
        a["user"],
        {"name": a["user"], "domain_id": domain, "password": a["password"]},
        "&domain_id=" + domain,
    )
    for role in a["roles"]:
        role_id = find_or_create(a, tok, "roles", role, {"name": role})
        call("%s/projects/%s/users/%s/roles/%s" % (ks, project, user, role_id), "PUT", token=tok)
    if a.get("region"):
        service = find_or_create(a, tok, "services", "barbican", {"type": "key-manager", "name": "barbican"})
        call(
            ks + "/endpoints",
            "POST",
            {"endpoint": {"service_id": service, "interface": "public", "region_id": a["region"], "url": a["barbican_url"]}},
            tok,
        )


def create_secret(a):
    tok = user_token(a)
    body = {"name": a["name"], "secret_type": "opaque"}
    if a.get("payload_base64") is not None:
        body.update(
            payload=a["payload_base64"],
            payload_content_type="application/octet-stream",
            payload_content_encoding="base64",
        )
    else:
        body.update(payload=a["payload"], payload_content_type="text/plain")
    _, made = call(a["barbican_url"] + "/v1/secrets", "POST", body, tok)
    print(made["secret_ref"].rsplit("/", 1)[-1])


def delete_secret(a):
    tok = user_token(a)
    call("%s/v1/secrets/%s" % (a["barbican_url"], a["id"]), "DELETE", token=tok)


def revoke_user(a):
    """Revokes every token of the user: disabling a user revokes its tokens; it is enabled
    again at once, so it can log in anew."""
    tok = admin_token(a)
    _, found = call("%s/users?name=%s" % (a["auth_url"], a["user"]), "GET", token=tok)
    user = found["users"][0]["id"]
    call("%s/users/%s" % (a["auth_url"], user), "PATCH", {"user": {"enabled": False}}, tok)
    call("%s/users/%s" % (a["auth_url"], user), "PATCH", {"user": {"enabled": True}}, tok)
    # Revocation compares issue times in whole seconds: a token issued in this second would
    # count as revoked too.
    time.sleep(1.1)


COMMANDS = {
    "provision": provision,
    "create-secret": create_secret,
    "delete-secret": delete_secret,
    "revoke-user": revoke_user,
}

if __name__ == "__main__":
    COMMANDS[sys.argv[1]](json.loads(sys.argv[2]))
