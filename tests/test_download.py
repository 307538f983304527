"""Missing data: every missing dataset named in one line, offline refused in seconds, downloads checked and unpacked
atomically (served from a local HTTP server: tests never touch the network)."""

from __future__ import annotations

import hashlib
import http.server
import io
import threading
import zipfile
from pathlib import Path

import pytest

from bench.cli import main
from bench.data import download
from bench.data.errors import DatasetMissingError


def test_every_missing_dataset_of_the_suites_is_named_in_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no ./data, no ../shared/data
    (tmp_path / "empty").mkdir()
    db = tmp_path / "r.sqlite"
    rc = main(["eval", "--model", "bm25", "--suite", "beir14+knn", "--data-dir", str(tmp_path / "empty"), "--db", str(db)])
    err = capsys.readouterr().err
    assert rc == 2 and len(err.strip().splitlines()) == 1, err
    assert "15 datasets not found" in err  # the 14 BEIR sets (cqadupstack once) and AG News
    for name in ("trec-covid", "nfcorpus", "fever", "climate-fever", "scifact", "cqadupstack (12 forums)", "agnews"):
        assert name in err
    assert "--download" in err and "bench data list" in err
    assert not db.exists()


def test_download_offline_is_one_line_within_seconds(tmp_path, capsys, monkeypatch):
    def unreachable(address, timeout=None):  # what a machine without network answers
        raise OSError("Network is unreachable")

    monkeypatch.setattr(download.socket, "create_connection", unreachable)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "empty").mkdir()
    rc = main(["eval", "--model", "bm25", "--suite", "beir:scifact,nfcorpus", "--download", "--data-dir",
               str(tmp_path / "empty"), "--db", str(tmp_path / "r.sqlite")])  # fmt: skip
    err = capsys.readouterr().err
    assert rc == 2 and len(err.strip().splitlines()) == 1, err
    assert "2 BEIR dataset(s) to download (scifact, nfcorpus)" in err and "cannot be reached" in err


def _zip(folder: str, files: dict[str, str]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        for name, text in files.items():
            zf.writestr(f"{folder}/{name}", text)
    return buffer.getvalue()


@pytest.fixture()
def server():
    """A local HTTP server: path -> bytes."""
    served: dict[str, bytes] = {}

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - the http.server interface
            body = served.get(self.path)
            self.send_response(200 if body is not None else 404)
            self.send_header("Content-Length", str(len(body or b"")))
            self.end_headers()
            self.wfile.write(body or b"")

        def log_message(self, *args):
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield served, f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


BEIR_FILES = {"corpus.jsonl": '{"_id": "d1", "title": "", "text": "a text"}\n',
              "queries.jsonl": '{"_id": "q1", "text": "a query"}\n', "qrels/test.tsv": "query-id\tcorpus-id\tscore\nq1\td1\t1\n"}  # fmt: skip


def test_download_checks_md5_and_unpacks_whole(server, tmp_path, monkeypatch):
    served, base = server
    payload = _zip("tinyset", BEIR_FILES)
    served["/tinyset.zip"] = payload
    monkeypatch.setitem(download.BEIR_MD5, "tinyset", hashlib.md5(payload).hexdigest())
    folder = download.download_beir("tinyset", f"{base}/tinyset.zip", tmp_path)
    assert folder == tmp_path / "beir" / "tinyset"
    assert (folder / "qrels" / "test.tsv").read_text() == BEIR_FILES["qrels/test.tsv"]
    assert sorted(p.name for p in (tmp_path / "beir").iterdir()) == ["tinyset"]  # no zip, part file or work folder left

    # a file whose md5 is not BEIR's: refused, nothing left behind
    monkeypatch.setitem(download.BEIR_MD5, "tinyset", "0" * 32)
    with pytest.raises(DatasetMissingError, match="md5"):
        download.download_beir("tinyset", f"{base}/tinyset.zip", tmp_path / "other")
    assert list((tmp_path / "other" / "beir").iterdir()) == []


def test_a_zip_without_the_dataset_folder_leaves_no_partial_dataset(server, tmp_path):
    served, base = server
    served["/broken.zip"] = _zip("elsewhere", BEIR_FILES)  # the wrong top folder
    with pytest.raises(DatasetMissingError, match="no broken/ folder"):
        download.download_beir("broken", f"{base}/broken.zip", tmp_path)
    assert not (tmp_path / "beir" / "broken").exists()
    assert list(Path(tmp_path / "beir").iterdir()) == []  # neither the zip nor a half-unpacked folder
