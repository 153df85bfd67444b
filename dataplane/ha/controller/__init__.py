"""The HA Controller: broker heartbeats, master election from the SyncStateSet, master epochs, and
an active/standby lease in the controller database (docs/ha.md)."""

from dataplane.ha.controller.service import Controller, ControllerServer
from dataplane.ha.controller.settings import ControllerSettings

__all__ = ("Controller", "ControllerServer", "ControllerSettings")
