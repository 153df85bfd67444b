"""Reading inputs and writing outputs through Hadoop filesystems (a local directory, s3a://, gs://, ...).

Layout (docs/analytics.md):
    {input}/usage/date=D/hour=HH/*.jsonl      usage + storage records (docs/metering.md)
    {input}/lag/date=D/hour=HH/*.jsonl        lag samples
    {input}/prices/date=D/*.jsonl             plan prices per tenant (control-plane export)
    {input}/groups/date=D/*.jsonl             consumer-group SLOs (control-plane export)
    {output}/{table}/date=D/*.parquet         one directory per day, overwritten as a whole
    {output}/invoices/month=YYYY-MM/*.parquet
    {output}/_manifests/{job}/date=D/         which input files a successful run saw
"""

from __future__ import annotations

import hashlib
import logging
from typing import Any, NamedTuple

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.functions import col
from pyspark.sql.types import StringType, StructField, StructType

__all__ = (
    "InputFile",
    "build_session",
    "fingerprint",
    "latest_partition",
    "list_files",
    "list_partitions",
    "read_json",
    "read_parquet",
    "write_partition",
)

logger = logging.getLogger(__name__)


class InputFile(NamedTuple):
    path: str
    size: int
    modified_ms: int


def build_session(master: str, app_name: str, shuffle_partitions: int = 8) -> SparkSession:
    """One SparkSession in UTC; the UI stays off in local mode, where nobody looks at it."""
    builder = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
        .config("spark.ui.showConsoleProgress", "false")
    )
    if master.startswith("local"):
        builder = builder.config("spark.ui.enabled", "false")
    return builder.getOrCreate()


def _fs_and_path(spark: SparkSession, url: str) -> tuple[Any, Any]:
    jvm = spark.sparkContext._jvm
    path = jvm.org.apache.hadoop.fs.Path(url)  # type: ignore[union-attr]
    return path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration()), path  # type: ignore[union-attr]


def list_files(spark: SparkSession, pattern: str) -> list[InputFile]:
    """Files matching a glob, sorted by path; none when nothing matches (an empty day)."""
    fs, path = _fs_and_path(spark, pattern)
    statuses = fs.globStatus(path) or []
    files = [
        InputFile(str(s.getPath().toString()), int(s.getLen()), int(s.getModificationTime()))
        for s in statuses
        if s.isFile()
    ]
    return sorted(files)


def list_partitions(spark: SparkSession, url: str, key: str) -> list[str]:
    """The values of ``key=`` sub-directories under ``url``, sorted (``date`` -> ['2025-01-01', ...])."""
    fs, path = _fs_and_path(spark, f"{url.rstrip('/')}/{key}=*")
    statuses = fs.globStatus(path) or []
    values = [str(s.getPath().getName()).split("=", 1)[1] for s in statuses if s.isDirectory()]
    return sorted(values)


def latest_partition(spark: SparkSession, url: str, key: str, not_after: str) -> str | None:
    """The newest partition value that is <= ``not_after`` (ISO dates sort as strings)."""
    values = [v for v in list_partitions(spark, url, key) if v <= not_after]
    return values[-1] if values else None


def fingerprint(files: list[InputFile]) -> str:
    """A digest of what a run read: any added, replaced or grown file changes it."""
    digest = hashlib.sha256()
    for f in files:
        digest.update(f"{f.path}|{f.size}|{f.modified_ms}\n".encode())
    return digest.hexdigest()


def read_json(spark: SparkSession, schema: StructType, files: list[InputFile]) -> DataFrame:
    """JSON Lines with a fixed schema; malformed lines fail the run instead of vanishing."""
    if not files:
        return spark.createDataFrame([], schema)
    return spark.read.schema(schema).option("mode", "FAILFAST").json([f.path for f in files])


def read_parquet(
    spark: SparkSession, base: str, key: str, values: list[str], schema: StructType
) -> DataFrame:
    """Some ``key=value`` partitions of a table, with the ``key`` column; an empty frame for none."""
    if not values:
        return spark.createDataFrame([], StructType([*schema.fields, StructField(key, StringType())]))
    paths = [f"{base}/{key}={v}" for v in values]
    return spark.read.option("basePath", base).parquet(*paths).withColumn(key, col(key).cast("string"))


def write_partition(df: DataFrame, url: str) -> None:
    """Replace one partition directory; small daily tables are written as one file."""
    df.coalesce(1).write.mode("overwrite").parquet(url)
