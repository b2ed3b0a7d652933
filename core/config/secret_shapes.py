"""What a secret looks like, by a variable's name or by its value alone. Pure functions (the one
file-system look-up: whether a relative value names an existing path).

By name (``SECRET_ENV``): KEY, TOKEN, SECRET, PASSWORD/PASSWD/PASSPHRASE, PASS as a word,
CREDENTIAL, AUTH, JWT, PRIVATE, COOKIE, SIGNATURE, DSN as a word.

By value (``value_secrets``), whatever the name:

* a URL's credentials: ``scheme://user:password@host`` gives ``user:password`` (with its
  ``@`` when shorter than ``MIN_SECRET_CHARS``) and the password alone (and its percent-decoded
  form) when it is at least ``MIN_SECRET_CHARS`` long; a query value under a secret-looking name (``?api_key=...``) or shaped like a token; a
  path segment shaped like a token (webhook URLs). A URL without these is not secret;
* a token: a word of at least ``TOKEN_CHARS`` characters that is a JWT, starts like a known key
  (``sk-``, ``ghp_``, ``AKIA`` ... with digits in it), or holds a run of letters and digits
  that is hex (24+), alternates letters and digit groups (3+ groups), or changes between
  lower case, upper case and digits on nearly every other character (random base62/base64);
* never a path (``/``, ``~``, ``./`` or an existing relative path; a PATH-like list), a plain
  word, a number, a boolean, a locale, or a value shorter than ``MIN_SECRET_CHARS``.
"""
from __future__ import annotations

import os
import re
from urllib.parse import parse_qsl, unquote, urlsplit

SECRET_ENV = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|PASSPHRASE|(^|_)PASS($|_)|"
                        r"CREDENTIAL|AUTH|JWT|PRIVATE|COOKIE|SIGNATURE|(^|_)DSN($|_)",
                        re.IGNORECASE)
MIN_SECRET_CHARS = 8   # shorter values ("1", "true") are settings, not secrets
TOKEN_CHARS = 16       # the shortest value taken for a token by its shape alone

URL_RE = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://[^\s,;\"'<>]+")
WORD_RE = re.compile(r"[A-Za-z0-9_\-.+/=~]+")
RUN_RE = re.compile(r"[A-Za-z0-9]+")
KEY_PREFIX = re.compile(r"^((sk|pk|rk)[-_]|AIza|AKIA|ASIA|gh[pousr]_|github_pat_|xox[abpr]-|hf_|"
                        r"glpat-|npm_)")
BASE64_RE = re.compile(r"^[A-Za-z0-9+/]{32,}={0,2}$")
PLAIN = re.compile(r"^([A-Za-z]+|[-+]?\d+([.,]\d+)?|true|false|yes|no|on|off|none|null)$",
                   re.IGNORECASE)
LOCALE = re.compile(r"^[A-Za-z]{1,3}([_-][A-Za-z]{2,4})?(\.[A-Za-z0-9_-]+)?(@[A-Za-z0-9]+)?$")


def _kind(ch: str) -> int:
    return 0 if ch.islower() else 1 if ch.isupper() else 2


def _random_run(run: str) -> bool:
    """A run of letters and digits shaped like a generated token."""
    if len(run) < TOKEN_CHARS or run.isalpha() or run.isdigit():
        return False
    if len(run) >= 24 and (re.fullmatch(r"[0-9a-f]+", run) or re.fullmatch(r"[0-9A-F]+", run)):
        return True
    if len(re.findall(r"\d+", run)) >= 3:
        return True
    changes = sum(_kind(a) != _kind(b) for a, b in zip(run, run[1:]))
    kinds = {_kind(c) for c in run}
    return len(kinds) == 3 and changes >= 0.45 * (len(run) - 1)


def token_like(word: str) -> bool:
    """Whether ``word`` (no spaces) is shaped like a key, a token or a JWT."""
    if len(word) < TOKEN_CHARS:
        return False
    if word.startswith("eyJ") and word.count(".") == 2:
        return True
    if KEY_PREFIX.match(word) and any(c.isdigit() for c in word):
        return True
    if BASE64_RE.match(word) and sum(c.isdigit() for c in word) >= 4 and \
            any(c.islower() for c in word) and any(c.isupper() for c in word) and \
            word.count("/") + word.count("+") <= len(word) // 8:
        return True
    return any(_random_run(run) for run in RUN_RE.findall(word))


def is_path(value: str) -> bool:
    """An absolute, home or relative path, an existing relative path, or a PATH-like list."""
    if value.startswith(("/", "~", "./", "../")):
        return True
    segments = value.split(os.pathsep)
    if len(segments) > 1 and all(not s or s.startswith(("/", "~")) for s in segments):
        return True
    if "/" in value and not any(c.isspace() for c in value):
        try:
            return os.path.lexists(value)
        except (OSError, ValueError):
            return False
    return False


def url_secrets(url: str) -> list[str]:
    """The credentials in one URL (see the module's docstring)."""
    try:
        parts = urlsplit(url)
        query = parse_qsl(parts.query, keep_blank_values=True)
    except ValueError:  # unparsable: whole, when it may hold credentials
        return [url] if "@" in url and len(url) >= MIN_SECRET_CHARS else []
    found: list[str] = []
    userinfo, at, _host = parts.netloc.rpartition("@")
    if at and userinfo:
        user, _colon, password = userinfo.partition(":")
        # a short user:password is taken with its "@" only, so that "u:p" stays in other text
        found.append(userinfo if len(userinfo) >= MIN_SECRET_CHARS else f"{userinfo}@")
        for piece in (password, unquote(password)):
            if len(piece) >= MIN_SECRET_CHARS:
                found.append(piece)
        if token_like(user) or token_like(unquote(user)):
            found += [user, unquote(user)]
    for name, value in query:
        if (SECRET_ENV.search(name) and len(value) >= MIN_SECRET_CHARS) or token_like(value):
            found.append(value)
    found += [segment for segment in parts.path.split("/") if token_like(segment)]
    return found


def value_secrets(value: str) -> list[str]:
    """The parts of ``value`` to scrub when it looks secret by its value alone: the whole value
    and each token in it, or a URL's credentials; [] when it does not look secret."""
    text = value.strip()
    if len(text) < MIN_SECRET_CHARS:
        return []
    found: list[str] = []
    for url in URL_RE.findall(text):
        found += url_secrets(url)
    rest = URL_RE.sub(" ", text)
    if not rest.strip() or is_path(rest.strip()) or PLAIN.match(rest.strip()) or \
            LOCALE.match(rest.strip()):
        return found
    tokens = [w for w in WORD_RE.findall(rest) if token_like(w) and not is_path(w)]
    if tokens:
        found += [value, *tokens] if rest == text else tokens
    return found
