"""Tiered storage: sealed CommitLog segments offloaded to an object store, read back transparently.

Start at :class:`TieredMessageStore`; the design and object formats are in ``docs/tiered-storage.md``.
Standard library + ``obstore`` only.
"""

from dataplane.store.tiered.config import TierConfig
from dataplane.store.tiered.object_store import (
    ObjectMissingError,
    ObjectStore,
    ObjectStoreSettings,
    ObjectStoreUnavailableError,
    open_object_store,
)
from dataplane.store.tiered.status import TierStatus, TopicTierBytes
from dataplane.store.tiered.store import TieredMessageStore

__all__ = (
    "ObjectMissingError",
    "ObjectStore",
    "ObjectStoreSettings",
    "ObjectStoreUnavailableError",
    "TierConfig",
    "TierStatus",
    "TieredMessageStore",
    "TopicTierBytes",
    "open_object_store",
)
