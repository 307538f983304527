"""Is the Hugging Face hub usable from here? One quick answer before anything asks it for a model or a dataset.

Offline, huggingface_hub and transformers retry each request for tens of seconds and print a warning per try before
they fail the same way. `hub_offline()` answers in at most HUB_CONNECT_SECONDS: the HF_HUB_OFFLINE-style variables
first, then one TCP connection to the hub's host. `hub_cached(repo_id)` says whether a repository's config is in the
local hub cache (then it loads offline).
"""

from __future__ import annotations

import os

HUB_CONNECT_SECONDS = 2.0
OFFLINE_VARIABLES = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE")


def offline_variable(names: tuple[str, ...] = OFFLINE_VARIABLES) -> str:
    """The first of `names` set to a true value ('' when none is)."""
    for name in names:
        if os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on"):
            return name
    return ""


def hub_unreachable(timeout: float = HUB_CONNECT_SECONDS) -> str:
    """'' when the hub's host accepts a connection within `timeout` seconds, else why not."""
    import socket
    import urllib.parse

    parts = urllib.parse.urlsplit(os.environ.get("HF_ENDPOINT") or "https://huggingface.co")
    host, port = parts.hostname or "huggingface.co", parts.port or (443 if parts.scheme == "https" else 80)
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return ""
    except OSError as exc:
        return f"cannot reach {host}: {type(exc).__name__}"


def hub_offline(names: tuple[str, ...] = OFFLINE_VARIABLES) -> str:
    """Why the hub cannot be used now ('' when it can): an offline variable that is set, or an unreachable host."""
    variable = offline_variable(names)
    return f"{variable} is set" if variable else hub_unreachable()


def hub_cached(repo_id: str) -> bool:
    """True when the local hub cache holds `repo_id`'s config.json (transformers then loads it offline)."""
    try:
        from huggingface_hub import try_to_load_from_cache

        found = try_to_load_from_cache(repo_id, "config.json")
    except Exception:  # noqa: BLE001 - a malformed id or an unreadable cache: not cached
        return False
    return isinstance(found, str)
