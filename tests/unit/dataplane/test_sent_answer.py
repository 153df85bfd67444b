"""The usual SendMessage answer goes out as the compiled encoder wrote it (``produce.SentAnswer``),
not parsed and serialized again: the bytes a client reads are a SendMessageResponse with every entry
OK, and the metering interceptor still counts what was stored."""

from __future__ import annotations

import asyncio
from pathlib import Path

from dataplane.broker import Broker
from dataplane.config import BrokerSettings
from dataplane.guard import Guard
from dataplane.interceptors import MessagingInterceptor
from dataplane.metadata import TopicConfig
from dataplane.services import BUFFERED_STREAMS, ENCODED_ANSWERS, MessagingServicer
from dataplane.services import produce as p
from dataplane.wire import add_servicer
from mqcloud.apache.rocketmq.v2 import definition_pb2 as pb
from mqcloud.apache.rocketmq.v2 import service_pb2 as svc
from tests.unit.dataplane.conftest import serving

SEND = "/apache.rocketmq.v2.MessagingService/SendMessage"


def _request(ids: list[str]) -> svc.SendMessageRequest:
    return svc.SendMessageRequest(
        messages=[
            pb.Message(
                topic=pb.Resource(name="orders"),
                body=b"x" * 10,
                system_properties=pb.SystemProperties(
                    message_id=mid, message_type=pb.NORMAL, queue_id=1, body_encoding=pb.IDENTITY
                ),
            )
            for mid in ids
        ]
    )


async def _sent(tmp_path: Path) -> tuple[bytes, p.SentAnswer | svc.SendMessageResponse, int]:
    broker = Broker(BrokerSettings(data_dir=tmp_path, listen="127.0.0.1:0", dev_mode=True))
    broker.start(asyncio.get_running_loop())
    guard = Guard(broker)
    counted: list[int] = []
    real_count = guard.count_sent

    def count_sent(per_topic: dict[tuple[str, str], list[int]], seconds: float) -> None:
        counted.extend(n for sizes in per_topic.values() for n in sizes)
        real_count(per_topic, seconds)

    guard.count_sent = count_sent  # type: ignore[method-assign]
    try:
        broker.metadata.create_topic(TopicConfig(name="orders", queue_count=2))
        service = svc.DESCRIPTOR.services_by_name["MessagingService"]

        def register(server: object) -> None:
            add_servicer(
                server,  # type: ignore[arg-type]
                MessagingServicer(broker),
                service,
                wrap=MessagingInterceptor(guard).wrap,
                buffered=BUFFERED_STREAMS,
                encoded=ENCODED_ANSWERS,
            )

        async with serving(register) as channel:
            wire = await channel.unary_unary(SEND)(_request(["A1", "A2"]).SerializeToString())
        in_process = await p.send_message(broker, _request(["B1"]), "", "ipv4:127.0.0.1:1")
        return wire, in_process, sum(counted)
    finally:
        broker.begin_shutdown()
        broker.close()


def test_the_usual_answer_goes_out_as_encoded_and_parses_as_every_entry_ok(tmp_path: Path) -> None:
    wire, in_process, counted = asyncio.run(_sent(tmp_path))
    answer = svc.SendMessageResponse.FromString(wire)
    assert answer.status.code == pb.Code.OK
    assert [(e.message_id, e.offset, e.status.code) for e in answer.entries] == [
        ("A1", 0, pb.Code.OK),
        ("A2", 1, pb.Code.OK),
    ]
    assert counted == 20  # the interceptor read the OK status: both bodies metered as stored
    # in process the same path answers in wire form; as_response parses it for callers that read it
    assert type(in_process) is p.SentAnswer
    assert in_process.status.code == pb.Code.OK
    parsed = p.as_response(in_process)
    assert [(e.message_id, e.offset) for e in parsed.entries] == [("B1", 2)]
    assert parsed.SerializeToString() == in_process.data
