"""The Telemetry stream: one per client per broker endpoint. The client writes its ``Settings``;
the broker answers with the merged settings (backoff policy, batch size, long-polling timeout,
maximum body size), which the client applies. The stream is re-opened when it breaks."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
import traceback
from collections.abc import Callable, Coroutine
from typing import Any

from mqcloud._rpc import RpcClient
from mqcloud.apache.rocketmq.v2 import definition_pb2 as pb
from mqcloud.apache.rocketmq.v2 import service_pb2 as svc

__all__ = ("TelemetrySession",)

log = logging.getLogger("mqcloud.telemetry")
OK = pb.Code.OK
NOT_IMPLEMENTED = pb.Code.NOT_IMPLEMENTED
RECONNECT_SECONDS = 1.0


class TelemetrySession:
    def __init__(
        self,
        rpc: RpcClient,
        endpoint: str,
        settings: Callable[[], pb.Settings],
        on_settings: Callable[[pb.Settings], None],
        on_orphan: Callable[[str, svc.RecoverOrphanedTransactionCommand], Coroutine[Any, Any, None]]
        | None = None,
    ) -> None:
        self.endpoint = endpoint
        self._rpc = rpc
        self._settings = settings
        self._on_settings = on_settings
        self._on_orphan = on_orphan
        self._checks: set[asyncio.Task[None]] = set()
        self._call: Any = None
        self._reader: asyncio.Task[None] | None = None
        self._closed = False
        self.settings_received = asyncio.Event()

    async def start(self, wait: float) -> bool:
        """Open the stream, write Settings and wait up to ``wait`` s for the reply; True if it came."""
        await self._open()
        if wait <= 0:
            return self.settings_received.is_set()
        try:
            await asyncio.wait_for(self.settings_received.wait(), wait)
        except TimeoutError:
            log.warning("no settings reply from %s within %.1fs; using defaults", self.endpoint, wait)
            return False
        return True

    async def _open(self) -> None:
        self._call = self._rpc.telemetry(self.endpoint)
        self._reader = asyncio.create_task(self._read(self._call))
        await self.sync_settings()

    async def sync_settings(self) -> None:
        if self._call is None:
            return
        try:
            await self._call.write(svc.TelemetryCommand(settings=self._settings()))
        except Exception as e:  # noqa: BLE001 - a broken stream is re-opened by the reader
            log.debug("telemetry write to %s failed: %s", self.endpoint, e)

    async def _read(self, call: Any) -> None:
        try:
            async for cmd in call:
                await self._handle(call, cmd)
        except asyncio.CancelledError:
            raise
        except Exception as e:  # noqa: BLE001 - any stream failure leads to a reconnect
            log.debug("telemetry stream to %s ended: %s", self.endpoint, e)
        if not self._closed:
            await asyncio.sleep(RECONNECT_SECONDS)
            if not self._closed:
                with contextlib.suppress(Exception):
                    await self._open()

    async def _handle(self, call: Any, cmd: svc.TelemetryCommand) -> None:
        which = cmd.WhichOneof("command")
        if which == "settings":
            if not cmd.HasField("status") or cmd.status.code == OK:
                self._on_settings(cmd.settings)
                self.settings_received.set()
        elif which == "print_thread_stack_trace_command":
            dump = "\n".join(
                "".join(traceback.format_stack(frame)) for frame in sys._current_frames().values()
            )
            await call.write(
                svc.TelemetryCommand(
                    status=pb.Status(code=OK),
                    thread_stack_trace=svc.ThreadStackTrace(
                        nonce=cmd.print_thread_stack_trace_command.nonce, thread_stack_trace=dump
                    ),
                )
            )
        elif which == "verify_message_command":
            await call.write(
                svc.TelemetryCommand(
                    status=pb.Status(code=NOT_IMPLEMENTED, message="message verification is not supported"),
                    verify_message_result=svc.VerifyMessageResult(nonce=cmd.verify_message_command.nonce),
                )
            )
        elif which == "recover_orphaned_transaction_command":
            if self._on_orphan is None:
                log.warning(
                    "orphaned transaction check from %s ignored: no transaction checker", self.endpoint
                )
                return
            # answered in a task: a slow checker must not stop this stream's reader
            task: asyncio.Task[None] = asyncio.create_task(
                self._on_orphan(self.endpoint, cmd.recover_orphaned_transaction_command)
            )
            self._checks.add(task)
            task.add_done_callback(self._checks.discard)
        elif which == "reconnect_endpoints_command":
            call.cancel()

    async def close(self) -> None:
        self._closed = True
        if self._call is not None:
            with contextlib.suppress(Exception):
                await self._call.done_writing()
            self._call.cancel()
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._reader
