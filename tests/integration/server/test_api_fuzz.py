"""Schemathesis against ``openapi.yaml``: every route, generated requests, a real server.

Whatever it sends (valid and invalid query arguments, odd headers, with and without the token),
the server never answers 5xx, and every 4xx carries a message a person can read. Runs against a
real ``jupyter server`` process (the simulated backend), as a client would meet it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

schemathesis = pytest.importorskip("schemathesis")
hypothesis = pytest.importorskip("hypothesis")

from tests.helpers import running_server  # noqa: E402 (after the skips)
from tests.integration.server.api_helpers import openapi  # noqa: E402 (after the skips)

# One server for the file (base_url), built once on one pytest-xdist worker.
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("api_fuzz")]

TOKEN = "fuzz"


@pytest.fixture(scope="module")
def base_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    tmp = tmp_path_factory.mktemp("fuzz")
    log = tmp / "server.log"
    with running_server(
        tmp,
        token=TOKEN,
        log=log,
        options=["--JupyterGpu.backend=simulated", "--JupyterGpu.simulated_devices=2"],
        ready="jupyter-gpu/api/v1/snapshot",
        timeout_s=120,
        poll_s=0.2,
        stop_timeout_s=20,
    ) as server:
        yield server.api()
    assert server.exit_code == 0, log.read_text()[-3000:]
    text = log.read_text()
    # (Jupyter Server itself logs "Couldn't parse JSON" with a traceback before its 400.)
    assert "Uncaught exception" not in text, text[-5000:]


SCHEMA = schemathesis.openapi.from_dict(openapi())
OPERATIONS = [
    (path, method.upper())
    for path, methods in SCHEMA.raw_schema["paths"].items()
    for method in methods
]


def check_answer(response: Any, where: str) -> None:
    assert response.status_code < 500, f"{where}: {response.status_code} {response.text[:300]}"
    if response.status_code >= 400:
        text = response.text.strip()
        assert text, f"{where}: {response.status_code} without a message"
        if response.headers.get("Content-Type", "").startswith("application/json"):
            body = json.loads(text)
            assert isinstance(body.get("message"), str), body
            assert body["message"].strip(), body


PARAMS = [
    pytest.param(
        path,
        method,
        id=f"{path} {method}",
    )
    for path, method in OPERATIONS
]


@pytest.mark.parametrize(("path", "method"), PARAMS)
def test_never_a_5xx_and_every_4xx_says_why(base_url: str, path: str, method: str) -> None:
    # Schemathesis's strategies driven by Hypothesis directly (its pytest plugin's
    # from_fixture does not run under pytest 9): generated valid and invalid requests.
    operation = SCHEMA[path][method]

    @hypothesis.settings(
        max_examples=40,
        deadline=None,
        database=None,
        suppress_health_check=list(hypothesis.HealthCheck),
    )
    @hypothesis.given(
        case=operation.as_strategy(generation_mode=schemathesis.GenerationMode.NEGATIVE)
        | operation.as_strategy(generation_mode=schemathesis.GenerationMode.POSITIVE)
    )
    def run(case: Any) -> None:
        where = f"{case.method} {case.formatted_path} {case.query} body={case.body!r:.200}"
        with_token = case.call(
            base_url=base_url, headers={"Authorization": f"token {TOKEN}"}, timeout=30
        )
        check_answer(with_token, where)
        without = case.call(base_url=base_url, headers={"Authorization": "token wrong"}, timeout=30)
        check_answer(without, where + " (bad token)")
        assert without.status_code == 403, where

    run()


@pytest.mark.parametrize(
    "query",
    ["since=nan", "since=-1", "since=1e400", "since=" + "9" * 5000, "since=%00", "since=1&since=2"],
)
def test_bad_since_is_a_400_with_a_message(base_url: str, query: str) -> None:
    import requests

    response = requests.get(
        f"{base_url}/history?{query}", headers={"Authorization": f"token {TOKEN}"}, timeout=10
    )
    check_answer(response, query)
