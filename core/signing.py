"""One signing scheme for everything gpuledger issues: report statements and lake manifests.

HMAC-SHA256 (hex) of a document's canonical JSON (sorted keys, no spaces, its own `signature`
key left out) under `reports.signing_key`. Why one home: a statement and the lake partition it
came from are checked by the same key, so an operator rotates one secret, and a reader that can
verify one can verify the other (docs/decisions/0176).
"""

from __future__ import annotations

import hashlib
import hmac
import json
from typing import Any

from gpuledger.core.config import Settings

SIGNATURE = "signature"


def signing_key(settings: Settings) -> str | None:
    """The configured HMAC key (`reports.signing_key`), or None (blank counts as unset)."""
    secret = getattr(settings.reports, "signing_key", None)
    if secret is None:
        return None
    value = str(secret.get_secret_value()).strip()
    return value or None


def sign(document: dict[str, Any], key: str) -> str:
    """HMAC-SHA256 (hex) of the document's canonical JSON, its own `signature` left out."""
    body = {k: v for k, v in document.items() if k != SIGNATURE}
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":")).encode()
    return hmac.new(key.encode(), canonical, hashlib.sha256).hexdigest()


def matches(document: dict[str, Any], key: str) -> bool:
    """Whether the document's `signature` is the HMAC of the rest under `key` (constant time)."""
    present = document.get(SIGNATURE)
    return isinstance(present, str) and hmac.compare_digest(present, sign(document, key))
