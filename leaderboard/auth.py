"""Who may see the leaderboard: everyone on this machine by default, and only people who know the password once
one is configured.

`bench leaderboard` serves on 127.0.0.1. Serving on another address needs either `--public` (the operator puts it
behind a reverse proxy that authenticates) or a password, read from (first found):
  - the environment variable LENBENCH_LEADERBOARD_PASSWORD, or
  - `leaderboard_password` in Streamlit's secrets file (`.streamlit/secrets.toml` in the folder the server starts
    in, or `~/.streamlit/secrets.toml`).
When a password is set the app shows a login form before anything from the database.
"""

from __future__ import annotations

import hmac
import ipaddress
import tomllib
from pathlib import Path

from bench import environment

PASSWORD_ENV = "LENBENCH_LEADERBOARD_PASSWORD"
SECRET_KEY = "leaderboard_password"
LOOPBACK_NAMES = {"localhost", "localhost.localdomain", "ip6-localhost"}


def is_loopback(host: str) -> bool:
    """True for addresses only this machine can reach (127.0.0.0/8, ::1, localhost)."""
    name = host.strip().strip("[]").lower()
    if name in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False  # a host name or 0.0.0.0-like wildcard: reachable from elsewhere


def secrets_files(cwd: Path | None = None) -> list[Path]:
    """Streamlit's default secrets locations, in the order Streamlit reads them."""
    return [Path.home() / ".streamlit" / "secrets.toml", (cwd or Path.cwd()) / ".streamlit" / "secrets.toml"]


def configured_password(cwd: Path | None = None) -> str | None:
    """The password from the environment or the secrets files (None when none is set; an empty one counts as none)."""
    from_env = environment.text(PASSWORD_ENV, strip=False)  # kept verbatim: blanks may be part of a password
    if from_env:
        return from_env
    found = None
    for path in secrets_files(cwd):  # later files win, as in Streamlit
        try:
            value = tomllib.loads(path.read_text(encoding="utf-8")).get(SECRET_KEY)
        except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError):
            continue
        if isinstance(value, str) and value:
            found = value
    return found


def password_matches(entered: str, password: str) -> bool:
    return hmac.compare_digest(entered.encode("utf-8"), password.encode("utf-8"))


def login_gate() -> bool:
    """True when the visitor may see the app: no password configured, or this session entered it."""
    import streamlit as st

    password = configured_password()
    if password is None or st.session_state.get("authenticated"):
        return True
    st.header("lenbench leaderboard")
    with st.form("login"):
        entered = st.text_input("Password", type="password", key="login_password")
        submitted = st.form_submit_button("Log in")
    if submitted:
        if password_matches(entered, password):
            st.session_state["authenticated"] = True
            st.rerun()
        st.error("Wrong password.")
    return False
