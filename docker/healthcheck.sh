#!/usr/bin/env bash
# HEALTHCHECK of the team image: the Jupyter server answers on /api, the one route that needs
# no token (the GPU routes do: Prometheus watches the sampler's health through its metrics, with
# jupyter_gpu_sampler_sample_age_seconds).
set -euo pipefail
port=${JUPYTER_PORT:-8888}
base=${JUPYTER_BASE_URL:-/}
exec python - "http://127.0.0.1:${port}${base%/}/api" <<'PY'
import json
import sys
import urllib.request

with urllib.request.urlopen(sys.argv[1], timeout=4) as response:  # noqa: S310 (loopback)
    assert "version" in json.load(response)
PY
