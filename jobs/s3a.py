"""The S3A connector the pinned Spark needs on a cluster: one home for its versions.

Spark reads and writes ``s3a://`` through Hadoop's ``hadoop-aws``, which must be the very
Hadoop version pyspark bundles (``pyspark/jars/hadoop-client-api-<X.Y.Z>.jar``), with the AWS
SDK v2 ``bundle`` that Hadoop release was built against (``aws-java-sdk-v2.version`` in
``hadoop-project-<X.Y.Z>.pom``), plus ``spark-hadoop-cloud`` of the same Spark and Scala
version for the S3A committers. ``tests/ops/test_production.py`` checks these constants against the
installed pyspark's jars and the production config example; ``recrawl preflight`` checks that
``spark.cluster_settings`` names the matching ``hadoop-aws``.

The jars come from Maven Central when ``spark.jars.packages`` is set (resolved by spark-submit
on the submitting host, shipped to the driver and executors), or from the nodes' image
(``spark.jars`` / the Spark ``jars/`` directory, air-gapped clusters; EMR has them already).
"""
from __future__ import annotations

import os
import re
from typing import Optional

SPARK_VERSION = "4.3.0"        # requirements.txt: pyspark==4.3.0
SCALA_BINARY_VERSION = "2.13"  # pyspark 4.x is built for Scala 2.13 only
HADOOP_VERSION = "3.5.0"       # pyspark 4.3.0 bundles hadoop-client-api-3.5.0.jar
AWS_SDK_V2_VERSION = "2.35.4"  # hadoop-project-3.5.0.pom: aws-java-sdk-v2.version

HADOOP_AWS = f"org.apache.hadoop:hadoop-aws:{HADOOP_VERSION}"
AWS_SDK_BUNDLE = f"software.amazon.awssdk:bundle:{AWS_SDK_V2_VERSION}"
SPARK_HADOOP_CLOUD = f"org.apache.spark:spark-hadoop-cloud_{SCALA_BINARY_VERSION}:{SPARK_VERSION}"
#: The value of ``spark.jars.packages`` (Maven coordinates, comma-separated).
PACKAGES = ",".join((HADOOP_AWS, AWS_SDK_BUNDLE, SPARK_HADOOP_CLOUD))


def bundled_versions(pyspark_dir: Optional[str] = None) -> dict[str, str]:
    """The Hadoop, Spark and Scala versions of the jars an installed pyspark ships
    (``{"hadoop": ..., "spark": ..., "scala": ...}``; a key is missing if its jar is)."""
    if pyspark_dir is None:
        import pyspark

        pyspark_dir = os.path.dirname(pyspark.__file__)
    found = {}
    for name in sorted(os.listdir(os.path.join(pyspark_dir, "jars"))):
        if m := re.fullmatch(r"hadoop-client-api-(\d+\.\d+\.\d+)\.jar", name):
            found["hadoop"] = m.group(1)
        elif m := re.fullmatch(r"spark-core_(\d+\.\d+)-(\d+\.\d+\.\d+)\.jar", name):
            found["scala"], found["spark"] = m.group(1), m.group(2)
    return found


def hadoop_aws_versions(settings: dict) -> list[str]:
    """The hadoop-aws versions ``settings`` (Spark keys) ask for, through
    ``spark.jars.packages`` (Maven coordinates) or ``spark.jars`` (jar paths)."""
    text = f"{settings.get('spark.jars.packages', '')},{settings.get('spark.jars', '')}"
    return re.findall(r"hadoop-aws[:-](\d+\.\d+\.\d+)", text)
