"""The embedded Celery transport: kombu's filesystem transport, each message published whole.

kombu's filesystem transport creates a message's file and then writes into it. A worker listing the
folder in between moves the still empty file away, fails to decode it and exits, and ``mqctl
standalone`` stops with it (seen in a CI run). Here a message is written under a hidden temporary
name first and then renamed into place (``os.replace``, atomic within a folder), so a reader finds a
whole message or none. The temporary name does not end in ``.{queue}.msg``: readers skip it.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from time import monotonic
from typing import Any

from kombu.exceptions import ChannelError
from kombu.transport import filesystem
from kombu.utils.encoding import str_to_bytes
from kombu.utils.json import dumps

__all__ = ("Channel", "Transport")


class Channel(filesystem.Channel):  # type: ignore[misc]
    def _put(self, queue: Any, payload: Any, **kwargs: Any) -> None:  # type: ignore[override]
        """Put ``payload`` onto ``queue``: written aside, then renamed to the name readers look for
        (the name kombu's own ``_put`` gives it)."""
        name = f"{round(monotonic() * 1000)}_{uuid.uuid4()}.{queue}.msg"
        folder = Path(self.data_folder_out)
        final, partial = folder / name, folder / f".{name}.partial"
        try:
            partial.write_bytes(str_to_bytes(dumps(payload)))  # type: ignore[no-untyped-call]
            partial.replace(final)
        except OSError as exc:
            raise ChannelError(f"Cannot add file {str(final)!r} to directory") from exc


class Transport(filesystem.Transport):  # type: ignore[misc]
    Channel = Channel
