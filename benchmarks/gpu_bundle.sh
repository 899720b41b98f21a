#!/usr/bin/env bash
# What benchmarks/gpu_check.py needs on the GPU machine and that machine lacks (it has python 3.12,
# torch, transformers, peft, accelerate; no network): trajforge's small pure dependencies as cp312
# manylinux wheels, and the embedded model's tokenizer files. Into benchmarks/gpu_bundle/
# (gitignored), which the device run carries along: `run(carry=["benchmarks/gpu_bundle"])`.
# The carry limit is 64 MiB: this script fails when the bundle is larger.
set -euo pipefail
cd "$(dirname "$0")/.."
BUNDLE=benchmarks/gpu_bundle
PY=${PYTHON:-.venv/bin/python}
rm -rf "$BUNDLE" && mkdir -p "$BUNDLE/wheels" "$BUNDLE/tokenizer"

# pyproject's core dependencies (numpy is on the GPU machine already, with torch), resolved for the
# target: --only-binary and an explicit platform make pip fetch wheels for that python, not this one.
"$PY" -m pip download --quiet --only-binary :all: --python-version 3.12 --implementation cp --abi cp312 \
  --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux_2_27_x86_64 \
  --platform manylinux_2_28_x86_64 --dest "$BUNDLE/wheels" \
  'pydantic>=2.7,<3' 'json-repair>=0.30,<1' 'jsonschema>=4.21,<5' 'typer>=0.12,<1' 'rich>=13,<15' \
  'duckdb>=1.1,<3' 'httpx>=0.27,<1'

# The embedded tokenizer (trajforge models pull smollm2-135m puts it in the cache).
SRC=$("$PY" -c "from trajforge.policies.models import resolve; print(resolve('smollm2-135m'))")
for f in tokenizer.json tokenizer_config.json chat_template.jinja special_tokens_map.json; do
  [ -f "$SRC/$f" ] && cp "$SRC/$f" "$BUNDLE/tokenizer/"
done

BYTES=$(du -sb "$BUNDLE" | cut -f1)
ls -1 "$BUNDLE/wheels"
echo "bundle: $((BYTES / 1024 / 1024)) MiB in $BUNDLE"
if [ "$BYTES" -ge $((64 * 1024 * 1024)) ]; then
  echo "error: the bundle is over the 64 MiB carry limit" >&2
  exit 1
fi
