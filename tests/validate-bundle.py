#!/usr/bin/python3
"""Validate Run Bundles against docs/bundle.schema.json (jsonschema, Debian)."""
import json
import sys

import jsonschema

schema_path, *paths = sys.argv[1:]
with open(schema_path) as f:
    schema = json.load(f)
cls = jsonschema.validators.validator_for(schema)
cls.check_schema(schema)
validator = cls(schema)
bad = 0
for p in paths:
    with open(p) as f:
        doc = json.load(f)
    errors = sorted(validator.iter_errors(doc), key=lambda e: list(e.path))
    for e in errors:
        print(f"{p}: {'/'.join(map(str, e.path))}: {e.message}", file=sys.stderr)
    bad += bool(errors)
sys.exit(1 if bad else 0)
