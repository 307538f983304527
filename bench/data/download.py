"""Fetching a dataset that is missing: one download routine for BEIR zips and single-file corpora.

What `bench eval/run --download` (or `LENBENCH_DOWNLOAD=1`) does for a missing BEIR set or training corpus:

1. A quick reachability check of the source's host (a TCP connection, `CONNECT_SECONDS`): offline, or with
   `HF_HUB_OFFLINE`-style isolation, this fails in seconds with one line naming the URL, not after a long
   read timeout per file.
2. The file is streamed into a temporary file beside its target, with a progress bar (bench.runtime.progress).
3. Its md5 is checked against the one BEIR publishes for that zip (`BEIR_MD5`, BEIR's README table); a mismatch
   deletes the file and stops.
4. A zip is unpacked into a temporary folder and renamed into place, so a crash never leaves a half-unpacked
   dataset that a later run would read as complete.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import socket
import tempfile
import urllib.error
import urllib.parse
import urllib.request
import zipfile
from pathlib import Path

from bench.data.errors import DatasetMissingError

ENV = "LENBENCH_DOWNLOAD"  # "1": --download by default (users who are online and want the mteb/BEIR convention)
CONNECT_SECONDS = 5.0  # reachability check of the host
READ_SECONDS = 60.0  # a stalled transfer, once connected
CHUNK = 1 << 20

# md5 of each BEIR zip as BEIR publishes it (README of beir-cellar/beir, "Available Datasets").
BEIR_MD5 = {
    "msmarco": "444067daf65d982533ea17ebd59501e4",
    "trec-covid": "ce62140cb23feb9becf6270d0d1fe6d1",
    "nfcorpus": "a89dba18a62ef92f7d323ec890a0d38d",
    "nq": "d4d3d2e48787a744b6f6e691ff534307",
    "hotpotqa": "f412724f78b0d91183a0e86805e16114",
    "fiqa": "17918ed23cd04fb15047f73e6c3bd9d9",
    "arguana": "8ad3e3c2a5867cdced806d6503f29b99",
    "webis-touche2020": "46f650ba5a527fc69e0a6521c5a23563",
    "cqadupstack": "4e41456d7df8ee7760a7f866133bda78",
    "quora": "18fb154900ba42a600f84b839c173167",
    "dbpedia-entity": "c2a39eb420a3164af735795df012ac2c",
    "scidocs": "38121350fc3a4d2f48850f6aff52e4a9",
    "fever": "5a818580227bfb4b35bb6fa46d9b6c03",
    "climate-fever": "8b66f0a9126c521bae2bde127b4dc99d",
    "scifact": "5f7d1de60b170fc8027bb7898e2efca1",
}


def download_default() -> bool:
    from bench import environment

    return environment.flag(ENV)


def check_reachable(url: str, timeout: float = CONNECT_SECONDS) -> None:
    """Raise DatasetMissingError in at most `timeout` seconds when the URL's host cannot be reached."""
    parts = urllib.parse.urlsplit(url)
    host, port = parts.hostname or "", parts.port or (443 if parts.scheme == "https" else 80)
    try:
        with socket.create_connection((host, port), timeout=timeout):
            pass
    except OSError as exc:
        raise DatasetMissingError(f"cannot reach {host} to download {url} ({type(exc).__name__}: {exc}); offline? "
                                  "Download it elsewhere and put it in a data folder (bench data list shows where)"
                                  ) from None  # fmt: skip


def fetch(url: str, target: Path, md5: str | None = None) -> Path:
    """Download `url` to `target` (atomically: a temporary file renamed into place), checking `md5` when given."""
    from bench.runtime import progress

    check_reachable(url)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".part", dir=target.parent)
    tmp = Path(tmp_name)
    digest = hashlib.md5()  # noqa: S324 - BEIR publishes md5; an integrity check, not security
    try:
        with os.fdopen(fd, "wb") as out, urllib.request.urlopen(url, timeout=READ_SECONDS) as resp:  # noqa: S310
            total = int(resp.headers.get("Content-Length") or 0) or None
            with progress.bar(total=total, desc=f"download {target.name}", unit="B", unit_scale=True) as bar:
                while chunk := resp.read(CHUNK):
                    out.write(chunk)
                    digest.update(chunk)
                    bar.update(len(chunk))
        if md5 and digest.hexdigest() != md5:
            raise DatasetMissingError(f"{url}: downloaded file has md5 {digest.hexdigest()}, BEIR publishes {md5}; "
                                      "not used (a truncated or changed file); try again")  # fmt: skip
        os.replace(tmp, target)
    except (urllib.error.URLError, OSError) as exc:
        raise DatasetMissingError(f"downloading {url} failed ({type(exc).__name__}: {exc})") from None
    finally:
        tmp.unlink(missing_ok=True)
    return target


def unpack_zip(zip_path: Path, dest_root: Path, folder: str) -> Path:
    """Unpack `zip_path` (whose entries sit under `folder/`) so that dest_root/folder appears complete or not at
    all: extracted into a temporary folder beside it, then renamed."""
    final = dest_root / folder
    work = Path(tempfile.mkdtemp(prefix=f".{folder}.", suffix=".unpack", dir=dest_root))
    try:
        with zipfile.ZipFile(zip_path) as zf:
            for member in zf.namelist():  # never outside the work folder (a zip may name ../ paths)
                if member.startswith("/") or ".." in Path(member).parts:
                    raise DatasetMissingError(f"{zip_path}: entry {member!r} points outside the archive folder")
            zf.extractall(work)
        unpacked = work / folder
        if not unpacked.is_dir():
            raise DatasetMissingError(f"{zip_path}: no {folder}/ folder inside; not a BEIR zip")
        if final.exists():  # a partial folder from before: replaced whole
            shutil.rmtree(final)
        os.replace(unpacked, final)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return final


def download_beir(name: str, url: str, root: Path) -> Path:
    """BEIR's zip of `name` (md5-checked) unpacked as root/beir/<zip folder>; returns that folder."""
    beir = root / "beir"
    beir.mkdir(parents=True, exist_ok=True)
    zip_name = url.rsplit("/", 1)[1]
    zip_path = beir / zip_name
    if not zip_path.exists():
        fetch(url, zip_path, BEIR_MD5.get(zip_name.removesuffix(".zip")))
    try:
        return unpack_zip(zip_path, beir, zip_name.removesuffix(".zip"))
    except zipfile.BadZipFile as exc:
        raise DatasetMissingError(f"{url}: not a readable zip ({exc}); try again") from None
    finally:  # unpacked, or unusable: either way the zip is not kept (a bad one would fail the same way again)
        zip_path.unlink(missing_ok=True)
