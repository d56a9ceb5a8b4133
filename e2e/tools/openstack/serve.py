"""Serves Keystone's or Barbican's WSGI application on loopback for the store provider tests.

    python serve.py keystone|barbican HOST PORT

A threaded wsgiref server in one process: stopping the process stops the service (no worker
processes left behind). Configuration comes from the environment the caller sets:
OS_KEYSTONE_CONFIG_DIR/OS_KEYSTONE_CONFIG_FILES for Keystone, HOME (with ~/.barbican/barbican.conf)
and BARBICAN_PASTE_INI for Barbican.
"""

import socketserver
import sys
from wsgiref import simple_server


class Server(socketserver.ThreadingMixIn, simple_server.WSGIServer):
    daemon_threads = True
    allow_reuse_address = True


class Handler(simple_server.WSGIRequestHandler):
    def log_message(self, format, *args):
        sys.stderr.write("%s %s\n" % (self.address_string(), format % args))
        sys.stderr.flush()


def log_logins(app):
    """Keystone wrapped: each password login (POST .../auth/tokens) is logged with its user name,
    so tests can count one user's logins among those of services."""
    import io
    import json

    def wrapped(environ, start_response):
        if environ.get("REQUEST_METHOD") == "POST" and environ.get("PATH_INFO", "").endswith("/auth/tokens"):
            length = int(environ.get("CONTENT_LENGTH") or 0)
            body = environ["wsgi.input"].read(length) if length else b""
            environ["wsgi.input"] = io.BytesIO(body)
            try:
                user = json.loads(body)["auth"]["identity"]["password"]["user"]["name"]
            except (ValueError, KeyError, TypeError):
                user = None
            if user is not None:
                sys.stderr.write("keystone password login: user=%s\n" % json.dumps(user))
                sys.stderr.flush()
        return app(environ, start_response)

    return wrapped


def application(service):
    # Both read oslo.config, which parses sys.argv: leave it nothing of ours to parse.
    sys.argv = [sys.argv[0]]
    if service == "keystone":
        from keystone.server import wsgi

        return log_logins(wsgi.initialize_public_application())
    if service == "barbican":
        import os

        from paste import deploy

        return deploy.loadapp("config:" + os.environ["BARBICAN_PASTE_INI"])
    raise SystemExit("unknown service %r" % service)


def main():
    service, host, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
    app = application(service)
    server = simple_server.make_server(host, port, app, server_class=Server, handler_class=Handler)
    sys.stderr.write("%s serving on http://%s:%d\n" % (service, host, port))
    sys.stderr.flush()
    server.serve_forever()


if __name__ == "__main__":
    main()
