"""How the console shows message bodies: as text, as pretty JSON, or as a hex dump."""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from typing import Any

__all__ = ("BODY_VIEWS", "BodyView", "body_view", "hexdump")

BODY_VIEWS = ("text", "json", "hex")
MAX_SHOWN_BYTES = 64 * 1024  # a browser tab stays responsive; the API gives the whole body


@dataclass(frozen=True, slots=True)
class BodyView:
    kind: str
    text: str
    note: str = ""


def hexdump(data: bytes) -> str:
    """16 bytes a line: offset, hex, printable ASCII."""
    lines = []
    for start in range(0, len(data), 16):
        chunk = data[start : start + 16]
        hexes = " ".join(f"{b:02x}" for b in chunk)
        ascii_ = "".join(chr(b) if 32 <= b < 127 else "." for b in chunk)
        lines.append(f"{start:08x}  {hexes:<47}  {ascii_}")
    return "\n".join(lines)


def body_view(message: dict[str, Any], kind: str) -> BodyView:
    """The message body (base64 in the service's message view) rendered the way the user asked."""
    raw = base64.b64decode(message.get("body_base64") or "")
    note = f"Showing the first {MAX_SHOWN_BYTES} of {len(raw)} bytes." if len(raw) > MAX_SHOWN_BYTES else ""
    shown = raw[:MAX_SHOWN_BYTES]
    if kind == "hex":
        return BodyView("hex", hexdump(shown), note)
    text = shown.decode("utf-8", errors="replace")
    if kind == "json":
        try:
            return BodyView("json", json.dumps(json.loads(raw), indent=2, ensure_ascii=False), "")
        except ValueError:
            return BodyView("json", text, "The body is not JSON; shown as text.")
    if "\ufffd" in text:
        note = (note + " " if note else "") + "The body is not valid UTF-8; try the hex view."
    return BodyView("text", text, note)
