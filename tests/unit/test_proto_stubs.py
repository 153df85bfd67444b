"""The committed protobuf stubs match proto/ and carry the RocketMQ v2 wire facts."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
STUB_DIRS = ("mqcloud/apache/rocketmq/v2", "mqcloud/admin/v1")


def _load_generator():
    spec = importlib.util.spec_from_file_location("gen_proto", REPO_ROOT / "scripts" / "gen_proto.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["gen_proto"] = module
    spec.loader.exec_module(module)
    return module


def test_committed_stubs_are_up_to_date(tmp_path: Path) -> None:
    # given
    generator = _load_generator()
    # when
    generator.generate(tmp_path)
    # then
    for stub_dir in STUB_DIRS:
        fresh = {p.name: p.read_bytes() for p in (tmp_path / stub_dir).iterdir() if p.is_file()}
        committed = {
            p.name: p.read_bytes() for p in (REPO_ROOT / stub_dir).iterdir() if p.suffix in (".py", ".pyi")
        }
        assert sorted(fresh) == sorted(committed), f"{stub_dir}: file set differs; run `make proto`"
        for name, data in fresh.items():
            assert committed[name] == data, f"{stub_dir}/{name} is stale; run `make proto`"


def test_wire_facts() -> None:
    from mqcloud.apache.rocketmq.v2 import definition_pb2, service_pb2, service_pb2_grpc

    assert definition_pb2.Code.MESSAGE_NOT_FOUND == 40401
    assert definition_pb2.Code.INVALID_RECEIPT_HANDLE == 40013
    assert definition_pb2.Code.MESSAGE_BODY_EMPTY == 41302
    fields = definition_pb2.SystemProperties.DESCRIPTOR.fields_by_name
    assert fields["body_digest"].number == 4
    assert fields["delivery_attempt"].number == 16
    assert definition_pb2.Publishing.DESCRIPTOR.fields_by_name["validate_message_type"].number == 3
    assert service_pb2.TelemetryCommand.DESCRIPTOR.fields_by_name["settings"].number == 2
    service = service_pb2.DESCRIPTOR.services_by_name["MessagingService"]
    assert service.methods_by_name["ReceiveMessage"].full_name == (
        "apache.rocketmq.v2.MessagingService.ReceiveMessage"
    )
    assert {"RecallMessage", "SyncLiteSubscription", "Telemetry"} <= set(service.methods_by_name)
    assert hasattr(service_pb2_grpc, "MessagingServiceStub")


@pytest.mark.parametrize(
    ("rpc", "path"),
    [
        pytest.param("ReceiveMessage", "/apache.rocketmq.v2.MessagingService/ReceiveMessage", id="receive"),
        pytest.param("SendMessage", "/apache.rocketmq.v2.MessagingService/SendMessage", id="send"),
    ],
)
def test_method_paths(rpc: str, path: str) -> None:
    import grpc

    from mqcloud.apache.rocketmq.v2 import service_pb2_grpc

    seen: list[str] = []

    class Recorder(grpc.Channel):
        def unary_unary(self, method, *args, **kwargs):  # type: ignore[override]
            seen.append(method)

        def unary_stream(self, method, *args, **kwargs):  # type: ignore[override]
            seen.append(method)

        def stream_unary(self, method, *args, **kwargs):  # type: ignore[override]
            seen.append(method)

        def stream_stream(self, method, *args, **kwargs):  # type: ignore[override]
            seen.append(method)

        def subscribe(self, *args, **kwargs): ...
        def unsubscribe(self, *args, **kwargs): ...
        def close(self): ...

    service_pb2_grpc.MessagingServiceStub(Recorder())
    assert path in seen


def test_admin_service() -> None:
    from mqcloud.admin.v1 import admin_pb2

    service = admin_pb2.DESCRIPTOR.services_by_name["BrokerAdmin"]
    assert service.full_name == "mqcloud.admin.v1.BrokerAdmin"
    assert {"CreateTopic", "GetGroupStats", "ListClients"} <= set(service.methods_by_name)
