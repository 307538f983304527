"""`bench push`: a trained encoder folder and its refreshed model card reach a Hub, here a fake one on 127.0.0.1
that speaks the three endpoints huggingface_hub's create_repo + upload_folder use (repo creation, preupload,
ndjson commit) and keeps what it received."""

from __future__ import annotations

import base64
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml

from bench.cli import main
from results_db import ResultsDB, ScoreRecord

TOKEN = "hf_fake_token_for_tests"


class FakeHub(ThreadingHTTPServer):
    def __init__(self):
        super().__init__(("127.0.0.1", 0), FakeHubHandler)
        self.repos: dict[str, dict] = {}
        self.files: dict[str, dict[str, bytes]] = {}
        self.unexpected: list[str] = []
        self.cards: list[str] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class FakeHubHandler(BaseHTTPRequestHandler):
    server: FakeHub

    def log_message(self, *args):  # quiet
        pass

    def _reply(self, status: int, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self):  # noqa: N802
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        if self.headers.get("Authorization") != f"Bearer {TOKEN}":
            return self._reply(401, {"error": "Invalid credentials"})
        path = self.path.split("?", 1)[0]
        if path == "/api/repos/create":
            req = json.loads(body)
            repo = f"{req['organization']}/{req['name']}"
            self.server.repos[repo] = req
            self.server.files.setdefault(repo, {})
            return self._reply(200, {"url": f"{self.server.url}/{repo}", "name": repo, "id": "1"})
        if path == "/api/validate-yaml":  # the Hub parses the card's YAML front matter; so does this fake
            content = json.loads(body)["content"]
            self.server.cards.append(content)
            try:
                meta = yaml.safe_load(content.split("---\n", 2)[1]) if content.startswith("---\n") else None
            except yaml.YAMLError as exc:
                return self._reply(400, {"errors": [{"message": str(exc)}]})
            if not isinstance(meta, dict):
                return self._reply(400, {"errors": [{"message": "no YAML metadata"}]})
            return self._reply(200, {"warnings": []})
        parts = path.split("/")  # /api/models/<org>/<name>/<op>/<revision>
        if len(parts) == 7 and parts[:3] == ["", "api", "models"]:
            repo, op = f"{parts[3]}/{parts[4]}", parts[5]
            if repo not in self.server.repos:
                return self._reply(404, {"error": "Repository not found"})
            if op == "preupload":
                files = json.loads(body)["files"]
                return self._reply(200, {"files": [{"path": f["path"], "uploadMode": "regular", "shouldIgnore": False}
                                                   for f in files]})
            if op == "commit":
                for line in body.splitlines():
                    item = json.loads(line)
                    if item["key"] == "file":
                        self.server.files[repo][item["value"]["path"]] = base64.b64decode(item["value"]["content"])
                return self._reply(200, {"commitUrl": f"{self.server.url}/{repo}/commit/{'a' * 40}",
                                         "commitOid": "a" * 40, "pullRequestUrl": None})
        self.server.unexpected.append(f"POST {self.path}")
        return self._reply(404, {"error": "not faked"})

    def do_GET(self):  # noqa: N802
        self.server.unexpected.append(f"GET {self.path}")
        return self._reply(404, {"error": "not faked"})


@pytest.fixture
def hub(monkeypatch):
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)  # conftest switches the hub off for every other test
    server = FakeHub()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


@pytest.fixture
def trained_run(tiny_model_dir, tmp_path):
    """A finished train row whose encoder folder is a copy of the tiny model with sentence-transformers files."""
    import shutil

    folder = tmp_path / "runs" / "x" / "simcse" / "encoder"
    shutil.copytree(tiny_model_dir, folder)
    (folder / "modules.json").write_text('[{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"}]')
    db = ResultsDB(tmp_path / "r.sqlite")
    run_id = db.create_run(kind="train", model=str(folder), method="simcse", backbone=str(tiny_model_dir),
                           config_hash="c" * 64, status="running", command="bench run --method simcse --budget steps=2",
                           budget_asked={"steps": 2}, budget_consumed={"steps": 2})
    db.add_scores(run_id, [ScoreRecord("sts", "stsb", "spearman", 61.25, n=5)])
    db.finish_run(run_id)
    return run_id, folder, tmp_path / "r.sqlite"


def test_push_uploads_the_folder_with_a_model_card_from_the_database(hub, trained_run, capsys):
    run_id, folder, db = trained_run
    rc = main(["push", str(run_id), "--hub", "someone/simcse-tiny", "--endpoint", hub.url, "--token", TOKEN, "--db", str(db)])
    out, err = capsys.readouterr()
    assert rc == 0, err
    assert hub.unexpected == []
    assert f"pushed run {run_id} (simcse) to {hub.url}/someone/simcse-tiny" in out
    uploaded = hub.files["someone/simcse-tiny"]
    local = {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}
    assert uploaded == local and "model.safetensors" in uploaded and "modules.json" in uploaded
    card = uploaded["README.md"].decode()
    assert hub.cards == [card]  # validated by the (fake) Hub's YAML check
    assert yaml.safe_load(card.split("---\n", 2)[1])["library_name"] == "sentence-transformers"
    assert "| sts | stsb | spearman | 5 | 61.25 |" in card and "bench run --method simcse --budget steps=2" in card


def test_push_failures_are_one_clear_line(hub, trained_run, tmp_path, capsys):
    run_id, folder, db = trained_run
    assert main(["push", str(folder), "--hub", "someone/x", "--endpoint", hub.url, "--token", "wrong", "--db", str(db)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("bench: error: bench push: uploading") and "401" in err and "Traceback" not in err
    assert main(["push", str(tmp_path), "--hub", "someone/x", "--endpoint", hub.url, "--db", str(db)]) == 2
    assert "is not a trained encoder folder" in capsys.readouterr().err
    assert main(["push", "999", "--hub", "someone/x", "--db", str(db)]) == 2
    assert "no run 999" in capsys.readouterr().err
    assert hub.files == {}


def test_push_refuses_when_the_hub_is_switched_off(trained_run, monkeypatch, capsys):
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    _, folder, db = trained_run
    assert main(["push", str(folder), "--hub", "someone/x", "--db", str(db)]) == 2
    assert "HF_HUB_OFFLINE" in capsys.readouterr().err
