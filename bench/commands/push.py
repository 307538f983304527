"""`bench push RUN|FOLDER --hub REPO`: upload a trained encoder folder (weights, tokenizer, sentence-transformers
modules, model card) to the Hugging Face Hub with huggingface_hub, as `SentenceTransformer.push_to_hub` would.

Given a run id, the model card is rewritten from the database first, so it carries every score recorded so far.
The token is huggingface_hub's usual one (`--token`, $HF_TOKEN or `hf auth login`); `--endpoint` (or $HF_ENDPOINT)
points at another Hub deployment.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from bench.commands.common import add_db
from bench.runtime.errors import ConfigError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("push", help="upload a trained encoder (with its model card) to the Hugging Face Hub",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("target", metavar="RUN|FOLDER", help="a run id from `bench results` or an encoder folder")
    p.add_argument("--hub", required=True, metavar="REPO", help="Hub model repository, e.g. myname/simcse-minilm (created if missing)")
    p.add_argument("--private", action="store_true", help="create the repository private")
    p.add_argument("--token", default=None, help="Hub token (default: $HF_TOKEN or the one `hf auth login` stored)")
    p.add_argument("--endpoint", default=None, help="Hub URL (default: $HF_ENDPOINT or https://huggingface.co)")
    p.add_argument("--message", default=None, help="commit message")
    add_db(p)
    p.set_defaults(func=run)


def encoder_folder(target: str, db_arg: str | None) -> tuple[Path, str]:
    """The folder to upload, and a one-line description; a run id gets its model card refreshed from the database."""
    if not target.isdigit():
        return Path(target), f"encoder folder {target}"
    from bench.report.model_card import write_model_card
    from results_db import ResultsDB

    db = ResultsDB(db_arg, create=False)
    try:
        run = db.get_run(int(target))
    except KeyError:
        raise ConfigError(f"bench push: no run {target} in {db.location.shown}; `bench results --runs-only` lists them") from None
    if run["kind"] != "train" or run["status"] != "finished":
        raise ConfigError(f"bench push: run {target} is a {run['status']} {run['kind']} run; only finished trained runs have an encoder to push")
    folder = Path(run["model"])
    if (folder / "config.json").exists():
        write_model_card(db, int(target), folder, paper=_paper(run["method"]))
    return folder, f"run {target} ({run['method']})"


def _paper(method: str) -> str:
    from bench.train.registry import get_method

    try:
        return get_method(method).paper
    except KeyError:  # a plug-in that is not installed here
        return ""


def run(args: argparse.Namespace) -> int:
    folder, what = encoder_folder(args.target, args.db)
    missing = [f for f in ("config.json", "modules.json") if not (folder / f).exists()]
    if not folder.is_dir() or missing:
        raise ConfigError(f"bench push: {folder} is not a trained encoder folder (missing {', '.join(missing) or 'folder'}); "
                          "give a run id or the `encoder` folder `bench run` wrote")
    from huggingface_hub import HfApi, constants
    from huggingface_hub.errors import HfHubHTTPError, OfflineModeIsEnabled

    if constants.is_offline_mode():
        raise ConfigError("bench push: the Hub is switched off here (HF_HUB_OFFLINE / TRANSFORMERS_OFFLINE is set); unset it to upload")
    try:
        from httpx2 import HTTPError as TransportError  # huggingface_hub's HTTP client
    except ImportError:  # older huggingface_hub: requests, whose errors are OSErrors
        TransportError = OSError  # noqa: N806
    api = HfApi(endpoint=args.endpoint, token=args.token)
    try:
        url = api.create_repo(args.hub, private=args.private, exist_ok=True, repo_type="model")
        commit = api.upload_folder(
            folder_path=str(folder), repo_id=args.hub, repo_type="model",
            commit_message=args.message or f"lenbench: upload {what}",
        )
    except (HfHubHTTPError, OfflineModeIsEnabled, OSError, TransportError) as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ConfigError(f"bench push: uploading {folder} to {args.hub} failed: {reason} "
                          "(check --hub, the token: --token/$HF_TOKEN/`hf auth login`, and the network)") from None
    print(f"pushed {what} to {url} (commit {commit.oid[:12]})")
    return 0
