"""Segment uploads against a real S3 protocol server (moto): verified by ETag, never read back."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from dataplane.store.tiered import uploader
from dataplane.store.tiered.object_store import ObjectStore, ObjectStoreSettings, open_object_store
from dataplane.store.tiered.uploader import Pacer, UploadWorker, upload_file
from tests.integration.tier.conftest import BUCKET, MotoServer

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


def s3_settings(moto: MotoServer) -> ObjectStoreSettings:
    return ObjectStoreSettings(
        url=f"s3://{BUCKET}/uploads",
        endpoint=moto.endpoint,
        region="us-east-1",
        access_key_id="test",
        secret_access_key="test",
    )


def no_read_back(store: ObjectStore, key: str, size: int) -> str:
    raise AssertionError(f"{key} was read back: its ETag did not verify it")


def test_single_and_multipart_uploads_verify_by_etag(
    moto: MotoServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # given: reading an object back would fail the upload
    monkeypatch.setattr(uploader, "object_md5", no_read_back)
    objects = open_object_store(s3_settings(moto))
    data = os.urandom((12 << 20) + 12345)
    path = tmp_path / "segment"
    path.write_bytes(data)
    md5 = hashlib.md5(data, usedforsecurity=False).hexdigest()
    # when / then: one PUT (ETag = MD5) and a multipart upload of three 5 MiB parts (ETag = MD5 of
    # the parts' MD5s) are both verified from the ETag and hold the bytes
    assert upload_file(objects, "single", path, len(data), 16 << 20, Pacer()) == md5
    assert objects.head("single").etag == md5
    assert upload_file(objects, "multi", path, len(data), 5 << 20, Pacer()) == md5
    assert objects.head("multi").etag.endswith("-3")
    assert objects.get("multi") == data == objects.get("single")


def test_upload_worker_process_uploads_to_s3(moto: MotoServer, tmp_path: Path) -> None:
    data = os.urandom(6 << 20)
    path = tmp_path / "segment"
    path.write_bytes(data)
    worker = UploadWorker(s3_settings(moto))
    try:
        md5 = worker.upload("seg", path, len(data), 5 << 20, 0)
        assert worker.pid is not None and worker.pid != os.getpid()
    finally:
        worker.close()
    assert md5 == hashlib.md5(data, usedforsecurity=False).hexdigest()
    assert open_object_store(s3_settings(moto)).get("seg") == data
    # a file shorter than announced fails as unavailable and leaves the worker usable
    worker = UploadWorker(s3_settings(moto))
    try:
        with pytest.raises(uploader.ObjectStoreUnavailableError, match="ended"):
            worker.upload("short", path, len(data) + 100, 5 << 20, 0)
        assert worker.upload("seg2", path, len(data), 5 << 20, 0) == md5
        assert worker.started == 1
    finally:
        worker.close()
