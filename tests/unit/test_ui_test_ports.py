"""The browser tests' servers: two spec files run at once (ui-tests/playwright.config.js), so no
two may listen on one port or share a server one of them changes (tests/README.md).

Read from the files themselves: ui-tests/servers.json names every port, and a spec file reaches
a server only through `ports.<name>` (never a port number of its own).
"""

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
UI = ROOT / "ui-tests"
# Projects whose server more than one spec file may use at once, and why that is safe.
SHARED_READ_ONLY = {
    "perf": "perf.spec.ts and dashboard-perf.spec.ts only read (no settings, kernels or restarts)",
}


def _no_duplicate_keys(pairs: list[tuple[str, object]]) -> dict[str, object]:
    keys = [k for k, _ in pairs]
    duplicates = sorted({k for k in keys if keys.count(k) > 1})
    assert not duplicates, f"ui-tests/servers.json names {duplicates} twice: the last one wins"
    return dict(pairs)


def _ports() -> dict[str, int]:
    servers = json.loads(
        (UI / "servers.json").read_text(encoding="utf-8"), object_pairs_hook=_no_duplicate_keys
    )
    ports: dict[str, int] = servers["ports"]
    return ports


def _specs() -> dict[str, str]:
    return {p.name: p.read_text(encoding="utf-8") for p in sorted((UI / "tests").glob("*.ts"))}


def test_every_server_has_a_port_of_its_own() -> None:
    ports = _ports()
    by_port: dict[int, list[str]] = {}
    for name, port in ports.items():
        by_port.setdefault(port, []).append(name)
    shared = {port: names for port, names in by_port.items() if len(names) > 1}
    assert not shared, f"servers.json gives one port to several servers: {shared}"


def test_spec_files_reach_servers_only_through_servers_json() -> None:
    # A literal port (`const PORT = 8915`, `127.0.0.1:8915`) escapes the check above: data.spec.ts
    # once listened on the dashboard's port, harmless only while one file ran at a time.
    literal = re.compile(r"(?:PORT\s*=\s*|127\.0\.0\.1:|localhost:)(\d{2,5})\b")
    found = {name: literal.findall(text) for name, text in _specs().items() if literal.search(text)}
    assert not found, f"spec files with a port of their own (use servers.json's ports): {found}"


def test_each_named_server_is_used_by_one_spec_file_at_most() -> None:
    ports = _ports()
    users: dict[str, list[str]] = {}
    for name, text in _specs().items():
        for used in sorted(set(re.findall(r"\bports\.(\w+)", text))):
            assert used in ports, f"{name} uses ports.{used}, which servers.json does not name"
            users.setdefault(used, []).append(name)
    shared = {port: files for port, files in users.items() if len(files) > 1}
    assert not shared, (
        f"spec files sharing a server they start or address themselves: {shared} "
        "(give each its own port in servers.json)"
    )


@pytest.mark.skipif(shutil.which("node") is None, reason="needs node to read the config")
def test_a_project_server_serves_one_spec_file_unless_it_is_only_read() -> None:
    # The config as Playwright reads it (it is JavaScript): each project's files and server.
    script = (
        "const c = require(process.argv[1]);"
        "console.log(JSON.stringify(c.projects.map(p => "
        "({name: p.name, match: p.testMatch.source, url: (p.use || {}).baseURL || null}))))"
    )
    projects = json.loads(
        subprocess.run(
            ["node", "-e", script, str(UI / "playwright.config.js")],
            check=True,
            capture_output=True,
            text=True,
            timeout=60,
        ).stdout
    )
    specs = [name for name in _specs() if name.endswith(".spec.ts")]
    by_url: dict[str, list[str]] = {}
    for project in projects:
        files = [name for name in specs if re.search(project["match"], name)]
        assert files, f"project {project['name']} matches no spec file"
        if project["url"] and project["name"] not in SHARED_READ_ONLY:
            by_url.setdefault(project["url"], []).extend(files)
    shared = {url: files for url, files in by_url.items() if len(files) > 1}
    assert not shared, (
        f"spec files sharing one server: {shared} (give each a project and a port of its own, "
        "or, if none of them changes the server, name the project in SHARED_READ_ONLY)"
    )
