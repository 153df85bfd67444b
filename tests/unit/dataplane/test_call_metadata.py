"""The per-call metadata cache: grpc.aio decodes the metadata anew on every invocation_metadata()."""

from __future__ import annotations

import asyncio

from dataplane.services.base import call_metadata, header_namespace, remember_metadata


class _Context:
    def __init__(self, namespace: str) -> None:
        self.calls = 0
        self.metadata = (("x-mq-namespace", namespace), ("x-mq-client-id", "c1"))

    def invocation_metadata(self) -> tuple[tuple[str, str], ...]:
        self.calls += 1
        return self.metadata


def test_metadata_is_decoded_once_per_call_and_never_shared() -> None:
    async def call(context: _Context) -> str:
        remember_metadata(context)  # the interceptor, first thing in the call
        await asyncio.sleep(0)  # other calls run in between
        assert call_metadata(context) is context.metadata
        return header_namespace(context)

    async def main() -> None:
        contexts = [_Context(f"ns{i}") for i in range(5)]
        assert await asyncio.gather(*(call(c) for c in contexts)) == [f"ns{i}" for i in range(5)]
        assert [c.calls for c in contexts] == [1] * 5
        # a call that was never remembered (another context) asks grpc itself
        other = _Context("other")
        remember_metadata(contexts[0])
        assert header_namespace(other) == "other" and other.calls == 1

    asyncio.run(main())
