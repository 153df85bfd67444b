"""QueryRoute, QueryAssignment, Heartbeat, NotifyClientTermination."""

from __future__ import annotations

from dataplane.broker import Broker
from dataplane.ha_writes import route_target
from dataplane.metadata import TopicConfig, TopicType
from dataplane.names import resolve
from mqcloud.apache.rocketmq.v2 import definition_pb2 as pb
from mqcloud.apache.rocketmq.v2 import service_pb2 as svc

__all__ = ("ACCEPT", "accept_types", "broker_endpoints", "heartbeat", "query_assignment", "query_route")

_ACCEPT: dict[TopicType, list[int]] = {
    TopicType.NORMAL: [pb.MessageType.NORMAL],
    TopicType.FIFO: [pb.MessageType.FIFO],
    TopicType.DELAY: [pb.MessageType.DELAY],
    TopicType.TRANSACTION: [pb.MessageType.TRANSACTION],
    TopicType.MIXED: [
        pb.MessageType.NORMAL,
        pb.MessageType.FIFO,
        pb.MessageType.DELAY,
        pb.MessageType.TRANSACTION,
    ],
}


ACCEPT = _ACCEPT  # read-only: message types a topic type accepts


def accept_types(topic: TopicConfig) -> list[int]:
    return list(_ACCEPT[topic.message_type])


def _address_endpoints(address: str) -> pb.Endpoints:
    host, _, port = address.rpartition(":")
    host = host.strip("[]")
    if host.replace(".", "").isdigit():
        scheme = pb.AddressScheme.IPv4
    elif ":" in host:
        scheme = pb.AddressScheme.IPv6
    else:
        scheme = pb.AddressScheme.DOMAIN_NAME
    return pb.Endpoints(scheme=scheme, addresses=[pb.Address(host=host, port=int(port))])


def broker_endpoints(broker: Broker, requested: pb.Endpoints | None) -> pb.Endpoints:
    """Echo the client's access point (scheme included) when usable; else our advertised address."""
    if (
        requested is not None
        and requested.scheme != pb.AddressScheme.ADDRESS_SCHEME_UNSPECIFIED
        and requested.addresses
    ):
        out = pb.Endpoints()
        out.CopyFrom(requested)
        return out
    return _address_endpoints(broker.settings.advertise or broker.settings.listen)


def _target(broker: Broker, requested: pb.Endpoints | None) -> tuple[pb.Endpoints, int]:
    """Where clients go: with HA the group's master (or a replica for reads), else this node."""
    target = route_target(broker)
    if target is None:
        return broker_endpoints(broker, requested), pb.Permission.READ_WRITE
    return _address_endpoints(target[0]), target[1]


def _queue(
    broker: Broker,
    topic: pb.Resource,
    config: TopicConfig,
    qid: int,
    endpoints: pb.Endpoints,
    permission: int = pb.Permission.READ_WRITE,
) -> pb.MessageQueue:
    return pb.MessageQueue(
        topic=topic,
        id=qid,
        permission=permission,  # type: ignore[arg-type]
        broker=pb.Broker(name=broker.settings.broker_name, id=0, endpoints=endpoints),
        accept_message_types=accept_types(config),  # type: ignore[arg-type]
    )


def query_route(broker: Broker, request: svc.QueryRouteRequest, header_ns: str) -> svc.QueryRouteResponse:
    ns, qualified = resolve(request.topic, header_ns)
    config = broker.topic(qualified)
    echo = pb.Resource(resource_namespace=ns, name=request.topic.name)
    endpoints, permission = _target(broker, request.endpoints)
    queues = [_queue(broker, echo, config, qid, endpoints, permission) for qid in range(config.queue_count)]
    return svc.QueryRouteResponse(status=pb.Status(code=pb.Code.OK, message="OK"), message_queues=queues)


def query_assignment(
    broker: Broker, request: svc.QueryAssignmentRequest, header_ns: str
) -> svc.QueryAssignmentResponse:
    ns, qualified = resolve(request.topic, header_ns)
    _, group = resolve(request.group, header_ns, kind="group")
    config = broker.topic(qualified)
    broker.group(group)
    echo = pb.Resource(resource_namespace=ns, name=request.topic.name)
    endpoints, permission = _target(broker, request.endpoints)
    # Like the proxy: one assignment with id -1 ("every queue"); the broker serves the whole topic.
    queue = _queue(broker, echo, config, -1, endpoints, permission)
    return svc.QueryAssignmentResponse(
        status=pb.Status(code=pb.Code.OK, message="OK"), assignments=[pb.Assignment(message_queue=queue)]
    )


def heartbeat(broker: Broker, request: svc.HeartbeatRequest, header_ns: str, client_id: str) -> None:
    session = broker.clients.get(client_id)
    if session is None:
        return
    session.client_type = request.client_type
    if request.HasField("group") and request.group.name:
        try:
            session.namespace, session.group = resolve(request.group, header_ns, kind="group")
        except Exception:  # noqa: BLE001 - a heartbeat is always OK; a bad group is just not recorded
            pass
