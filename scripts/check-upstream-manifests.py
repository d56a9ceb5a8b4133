#!/usr/bin/env python3
"""Applies (server-side dry run) every ExternalSecret (external-secrets.io/v1) and PushSecret
(v1alpha1) manifest found in an External Secrets Operator checkout's docs/ and e2e/ (YAML files
and yaml blocks of Markdown files) to the cluster KUBECONFIG names, which must have Keyward's
CRDs installed. Prints each refusal and a count; docs/migrating.md records the last result.

    make cluster-up && kubectl apply --server-side -f crds/yaml/
    python3 scripts/check-upstream-manifests.py ../external-secrets
"""
import json
import os
import re
import subprocess
import sys

import yaml

root = sys.argv[1] if len(sys.argv) > 1 else sys.exit('usage: check-upstream-manifests.py <upstream checkout>')
docs = []
def blocks(path, text):
    if path.endswith(('.yaml', '.yml')):
        yield text
    elif path.endswith('.md'):
        for m in re.finditer(r'```ya?ml\n(.*?)```', text, re.S):
            yield m.group(1)
want = {('external-secrets.io/v1', 'ExternalSecret'), ('external-secrets.io/v1alpha1', 'PushSecret')}
walked = [w for sub in ('docs', 'e2e') for w in os.walk(os.path.join(root, sub))]
for dp, _, files in walked:
    for f in files:
        p = os.path.join(dp, f)
        try:
            text = open(p, encoding='utf-8').read()
        except Exception:
            continue
        for b in blocks(p, text):
            b = re.sub(r'\{%.*?%\}', '', b)
            try:
                for d in yaml.safe_load_all(b):
                    if isinstance(d, dict) and (d.get('apiVersion'), d.get('kind')) in want:
                        docs.append((os.path.relpath(p, root), d))
            except Exception:
                pass
print(len(docs), 'manifests', file=sys.stderr)
bad = 0
for i, (p, d) in enumerate(docs):
    d = json.loads(json.dumps(d, default=str))
    d.setdefault('metadata', {})
    d['metadata'] = {'name': f'doc-{i}', 'namespace': 'default'}
    r = subprocess.run(['kubectl', 'apply', '--dry-run=server', '-f', '-'], input=json.dumps(d), capture_output=True, text=True)
    if r.returncode != 0:
        bad += 1
        print(p, '::', r.stderr.strip()[:400])
print(f'{len(docs) - bad} of {len(docs)} accepted', file=sys.stderr)
sys.exit(1 if bad else 0)
