#!/usr/bin/env python3
"""Upstream's documented manifests against Keyward.

    check-upstream-manifests.py <upstream checkout>
        Applies (server-side dry run) every ExternalSecret (external-secrets.io/v1) and PushSecret
        (v1alpha1) manifest found in an External Secrets Operator checkout's docs/ and e2e/ (YAML
        files and yaml blocks of Markdown files) to the cluster KUBECONFIG names, which must have
        Keyward's CRDs installed. Prints each refusal and a count; docs/migrating.md records the
        last result.

            make cluster-up && kubectl apply --server-side -f crds/yaml/
            python3 scripts/check-upstream-manifests.py ../external-secrets

    check-upstream-manifests.py <upstream checkout> --fixture e2e/fixtures/upstream-docs-2.9.0.jsonl.gz
        Writes every ExternalSecret, PushSecret, SecretStore, ClusterSecretStore and
        ClusterExternalSecret of the checkout's docs/ (release 2.9.0 for the committed file), one
        JSON line each with the file it came from, duplicates left out. The reconciler's end-to-end
        test `upstream_docs` applies each through the webhook on a real API server and names every
        refusal (docs/migrating.md, "Upstream's documentation examples").
"""
import gzip
import json
import os
import re
import subprocess
import sys

import yaml

args = [a for a in sys.argv[1:] if not a.startswith('--')]
root = args[0] if args else sys.exit('usage: check-upstream-manifests.py <upstream checkout> [--fixture FILE]')
fixture = sys.argv[sys.argv.index('--fixture') + 1] if '--fixture' in sys.argv else None


def blocks(path, text):
    if path.endswith(('.yaml', '.yml')):
        yield text
    elif path.endswith('.md'):
        for m in re.finditer(r'```ya?ml\n(.*?)```', text, re.S):
            yield m.group(1)


def documents(subdirs, want):
    """(path relative to the checkout, document) of every manifest of the wanted kinds, in path order."""
    out = []
    for sub in subdirs:
        for dp, dirs, files in sorted(os.walk(os.path.join(root, sub))):
            dirs.sort()
            for f in sorted(files):
                p = os.path.join(dp, f)
                try:
                    text = open(p, encoding='utf-8').read()
                except Exception:
                    continue
                for b in blocks(p, text):
                    # Jinja includes and tags of the docs site are not YAML.
                    b = re.sub(r'\{%.*?%\}', '', b)
                    try:
                        for d in yaml.safe_load_all(b):
                            if isinstance(d, dict) and (d.get('apiVersion'), d.get('kind')) in want:
                                out.append((os.path.relpath(p, root), json.loads(json.dumps(d, default=str))))
                    except Exception:
                        pass
    return out


if fixture:
    want = {('external-secrets.io/v1', k) for k in
            ('ExternalSecret', 'SecretStore', 'ClusterSecretStore', 'ClusterExternalSecret')}
    want.add(('external-secrets.io/v1alpha1', 'PushSecret'))
    seen, lines = set(), []
    for path, d in documents(['docs'], want):
        key = json.dumps(d, sort_keys=True)
        if key not in seen:
            seen.add(key)
            lines.append(json.dumps({'source': path, 'doc': d}, sort_keys=True))
    with gzip.GzipFile(fixture, 'wb', mtime=0) as f:
        f.write(('\n'.join(lines) + '\n').encode())
    print(f'{len(lines)} manifests written to {fixture}', file=sys.stderr)
    sys.exit(0)

want = {('external-secrets.io/v1', 'ExternalSecret'), ('external-secrets.io/v1alpha1', 'PushSecret')}
docs = documents(['docs', 'e2e'], want)
print(len(docs), 'manifests', file=sys.stderr)
bad = 0
for i, (p, d) in enumerate(docs):
    d['metadata'] = {'name': f'doc-{i}', 'namespace': 'default'}
    r = subprocess.run(['kubectl', 'apply', '--dry-run=server', '-f', '-'], input=json.dumps(d), capture_output=True, text=True)
    if r.returncode != 0:
        bad += 1
        print(p, '::', r.stderr.strip()[:400])
print(f'{len(docs) - bad} of {len(docs)} accepted', file=sys.stderr)
sys.exit(1 if bad else 0)
