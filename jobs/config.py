"""The one typed configuration of recrawl, with every default in this file.

A run's config is: these defaults, then an optional TOML file (``--config``),
then ``--set section.key=value`` overrides. Every value is validated on load,
so a typo fails the run instead of silently falling back to a default.

``python -m jobs.config --markdown`` renders docs/config.md from this module;
a test keeps the two identical.
"""
from __future__ import annotations

import argparse
import dataclasses
import ipaddress
import json
import os
import sys
import tomllib
import typing
from dataclasses import dataclass, field
from typing import Any, Optional
from urllib.parse import urlparse

from jobs.paths import partition
from jobs.errors import ConfigError  # noqa: F401  (its home: jobs.errors)


def _doc(text: str, **kw):
    return field(metadata={"doc": text}, **kw)


@dataclass(frozen=True)
class PathsConfig:
    root: str = _doc("Data root: local path here, s3a:// URI on a cluster. Holds fetch_logs/, "
                     "importance/, host_policy/, signals/, frontier/ and every output table. "
                     "A relative local path is made absolute when the config loads: against "
                     "the config file's directory when the file sets it, else the current "
                     "directory (~ is the home directory).", default="var/data")

    def table(self, name: str, dt: Optional[str] = None) -> str:
        """``root/name`` or its partition ``root/name/dt=D`` (the rule: jobs.paths.partition)."""
        return partition(self.root, name, dt)


@dataclass(frozen=True)
class BudgetConfig:
    daily_fetches: int = _doc("Total fetches (including 304s) the fleet may make per day.",
                              default=5000)
    split: str = _doc("'fixed' uses the shares below; 'auto' moves budget between refresh and "
                      "discovery until their marginal values match.", default="fixed")
    fast_share: float = _doc("Share of the budget for the fast lane.", default=0.10)
    discovery_share: float = _doc("Share for discovery of frontier URLs (fixed split).",
                                  default=0.10)
    audit_share: float = _doc("Share reserved for audit full fetches (validator and freshness "
                              "audits).", default=0.02)

    @property
    def refresh_share(self) -> float:
        return 1.0 - self.fast_share - self.discovery_share - self.audit_share


@dataclass(frozen=True)
class IntervalConfig:
    floor_s: float = _doc("Shortest revisit interval (seconds).", default=3600.0)
    cap_s: float = _doc("Longest revisit interval (seconds); 90 days.", default=7776000.0)
    initial_s: float = _doc("Interval given to a URL on its first fetch.", default=86400.0)


@dataclass(frozen=True)
class PolitenessConfig:
    default_crawl_delay_s: float = _doc("Crawl delay for hosts missing from host_policy/.",
                                        default=10.0)
    default_max_fetches_per_day: Optional[int] = _doc(
        "Per-host daily cap for hosts missing from host_policy/ (none: 86400/crawl delay).",
        default=None)
    min_crawl_delay_s: float = _doc("Smallest crawl delay taken from host_policy/: a smaller finite "
                                    "one is raised to it (1e-12 once overflowed the host cap), "
                                    "counted in allocate's run record.", default=0.1)
    max_crawl_delay_s: float = _doc("Largest crawl delay taken from host_policy/: a larger finite "
                                    "one is lowered to it (one fetch a day at most), counted in "
                                    "allocate's run record. Non-finite delays are quarantined.",
                                    default=86400.0)


@dataclass(frozen=True)
class IngestConfig:
    max_lateness_days: float = _doc("A fetch-log row whose fetched_at is more than this many days "
                                    "before the run date's 00:00 UTC is quarantined "
                                    "(late_fetched_at), as is one before 1970 whatever this "
                                    "is (inf: no other bound).", default=7.0)
    max_url_length: int = _doc("URLs longer than this (characters) are quarantined "
                               "(url_too_long) in every input table.", default=2048)
    snapshot_max_age_days: float = _doc("A dated importance/ or host_policy/ snapshot read for "
                                        "run date D older than this many days (D - dt) is a "
                                        "warning in the run record and the daily report; it is "
                                        "still read (inf: never warn; docs/contract.md, "
                                        "\"Snapshots\").", default=7.0)


@dataclass(frozen=True)
class PolicyConfig:
    name: str = _doc("Refresh policy: optimal (budgeted, importance-weighted); adaptive, "
                     "uniform and proportional are the baselines it is measured against "
                     "(docs/quality.md).", default="optimal")
    objective: str = _doc("Objective of the optimal policy: freshness or age.",
                          default="freshness")
    default_importance: float = _doc("Importance of URLs missing from importance/.",
                                     default=1.0)
    gone_after: int = _doc("Consecutive 404/410 answers after which a URL is gone.", default=2)
    gone_recheck_days: float = _doc("A gone URL is re-checked this rarely.", default=30.0)


@dataclass(frozen=True)
class ScheduleConfig:
    n_shards: int = _doc("Schedule files per day; each host lies in exactly one.", default=8)


@dataclass(frozen=True)
class SparkConfig:
    master: str = _doc("Spark master of stages run outside spark-submit (`recrawl update-state "
                       "...`); local[*] embedded, yarn or spark://host:port on a cluster. The DAG's "
                       "stages take the master from the Airflow connection instead.",
                       default="local[*]")
    app_name: str = _doc("Spark application name prefix.", default="recrawl")
    state_buckets: int = _doc("URL-hash buckets a state update is split into (one pandas "
                              "batch each).", default=8)
    progress_interval_s: float = _doc("Seconds between a running stage's progress lines on "
                                      "the driver (rows read and rows/s, each running Spark "
                                      "stage's tasks done/total; logger recrawl.progress).",
                                      default=30.0)
    rebuild_rows_per_bucket: int = _doc("`rebuild_state` replays each host-hash bucket in one "
                                        "pandas batch holding every day's logs of its hosts: "
                                        "it makes about (log rows of all days) / this many "
                                        "buckets, and at least one per Spark core.",
                                        default=1_000_000)
    settings: dict = _doc("Settings of the embedded master only (local[...]: laptop, CI, the demo); "
                          "never sent to a cluster, whose spark-defaults.conf decides there.",
                          default_factory=lambda: {"spark.sql.shuffle.partitions": "8",
                                                   "spark.sql.session.timeZone": "UTC",
                                                   "spark.ui.enabled": "false",
                                                   "spark.ui.showConsoleProgress": "false"})
    cluster_settings: dict = _doc("Settings sent (--conf) on a cluster master, on top of the "
                                  "cluster's spark-defaults.conf: only these keys are ours, every "
                                  "other key keeps the cluster's value. Empty: all the cluster's. "
                                  "(spark.sql.session.timeZone is always UTC: jobs.spark_session.)",
                                  default_factory=dict)
    python: str = _doc("Python of the driver and executors on a cluster (sent as "
                       "spark.pyspark.python), a path on the cluster's nodes with the pinned "
                       "requirements but not this project. Empty: the cluster's own setting "
                       "(spark-defaults.conf, spark-env.sh). The embedded master uses the Airflow "
                       "worker's interpreter.", default="")


def embedded_master(master: str) -> bool:
    """True for Spark's embedded master (local, local[N], local[*], local-cluster[...])."""
    return master.strip().startswith("local")


def _is_loopback(host: str) -> bool:
    try:
        return host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_endpoint_url(url: Optional[str], allow_insecure: bool = False) -> None:
    """Refuse a plain-http S3 endpoint off this machine unless explicitly allowed.

    Empty means AWS itself (TLS). Loopback http is the local moto stack; anywhere else a
    typo would send schedules (and credentials' signatures) in clear text.
    """
    if not url:
        return
    parsed = urlparse(url)
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise ConfigError(f"publish.endpoint_url {url!r} must be https://host[:port] "
                          "(or http:// on loopback)")
    if parsed.scheme == "http" and not _is_loopback(parsed.hostname) and not allow_insecure:
        raise ConfigError(f"publish.endpoint_url {url!r} is plain http to another machine; use "
                          "https, or set publish.allow_insecure_endpoint = true on purpose")


@dataclass(frozen=True)
class PublishConfig:
    target: str = _doc("Where schedules are published: s3://bucket/prefix, or a local "
                       "directory with the same layout.", default="s3://recrawl-schedules")
    endpoint_url: Optional[str] = _doc("S3 endpoint; empty (the default) for AWS itself over "
                                       "TLS. A plain http:// endpoint must be loopback (the "
                                       "demo's and tests' moto) unless allow_insecure_endpoint.",
                                       default=None)
    allow_insecure_endpoint: bool = _doc("Accept a plain-http endpoint_url that is not loopback "
                                         "(schedules then travel in clear text).", default=False)
    sse_kms_key_id: str = _doc("KMS key (id, ARN or alias) every published object is encrypted "
                               "with (SSE-KMS headers on each PUT; the production bucket policy "
                               "denies puts without them). Empty: no SSE header (moto, local).",
                               default="")
    lock_lease_s: float = _doc("Lease of a day's publish lock (renewed every third of it while "
                               "publishing): a killed publish blocks reruns of its day this long.",
                               default=60.0)
    max_workers: int = _doc("Concurrent uploads.", default=8)
    retries: int = _doc("Attempts per object on transient failures.", default=5)

    def __post_init__(self):
        check_endpoint_url(self.endpoint_url, self.allow_insecure_endpoint)
        if not self.lock_lease_s > 0 or self.max_workers < 1 or self.retries < 1:
            raise ConfigError("need publish.lock_lease_s > 0, max_workers >= 1, retries >= 1")


#: airflow.spark_session: one spark-submit per Spark stage, or one per DAG run (jobs.plan_day).
SPARK_SESSIONS = ("stage", "run")


@dataclass(frozen=True)
class AirflowConfig:
    spark_conn_id: str = _doc("Airflow connection of the Spark master used by SparkSubmitOperator "
                              "(its host is the master: local[2], yarn, spark://host:7077).",
                              default="recrawl_spark")
    py_files: str = _doc("The versioned jobs artefact, recrawl_jobs-<version>.zip (built by "
                         "`python -m jobs.artefact`), as a path or URI spark-submit can read, with "
                         "its driver entry recrawl_jobs-<version>.py beside it. Set: spark-submit "
                         "ships the zip (--py-files) and runs the entry; required for a cluster "
                         "master. Empty: the jobs run from this checkout (PYTHONPATH), on the "
                         "embedded master only.", default="")
    start_date: str = _doc("First logical date of the daily DAG (UTC).", default="2026-11-01")
    catchup: bool = _doc("Backfill missed dates.", default=True)
    logs_timeout_s: float = _doc("How long to wait for a day's fetch logs.", default=21600.0)
    poke_interval_s: float = _doc("How often to look for them.", default=60.0)
    retries: int = _doc("Retries of a failed task (a stage that refused a missing input fails "
                        "again until the input is committed).", default=2)
    retry_delay_s: float = _doc("Wait before a retry.", default=300.0)
    # execution_timeout of each task (one try; a timed-out try fails and is retried).
    poke_timeout_s: float = _doc("execution_timeout of one wait_for_logs poke (the whole wait "
                                 "is logs_timeout_s).", default=600.0)
    validate_logs_timeout_s: float = _doc("execution_timeout of validate_logs (footers only).",
                                          default=1800.0)
    update_state_timeout_s: float = _doc("execution_timeout of update_state (spark-submit).",
                                         default=14400.0)
    allocate_timeout_s: float = _doc("execution_timeout of allocate (spark-submit).",
                                     default=10800.0)
    build_schedule_timeout_s: float = _doc("execution_timeout of build_schedule (spark-submit).",
                                           default=7200.0)
    plan_day_timeout_s: float = _doc("execution_timeout of plan_day (spark_session = run: the "
                                     "three Spark stages in one spark-submit).", default=28800.0)
    spark_session: str = _doc("stage: one spark-submit task per Spark stage (update_state, "
                              "allocate, build_schedule; a failed stage retries alone). run: one "
                              "task, plan_day, runs the three in one Spark session (one JVM "
                              "start and one import of the jobs a day instead of three; a retry "
                              "reruns all three, each an idempotent transaction).",
                              default="stage")
    publish_timeout_s: float = _doc("execution_timeout of publish (must exceed "
                                    "publish.lock_lease_s).", default=3600.0)
    verify_timeout_s: float = _doc("execution_timeout of verify.", default=3600.0)
    report_timeout_s: float = _doc("execution_timeout of report (the day's page and its "
                                   "threshold alerts).", default=1800.0)
    publish_deadline_h: float = _doc("Deadline alert: hours after the run date D's 00:00 UTC by "
                                     "which the run must have published (and verified) "
                                     "schedules/dt=D+1; the fleet starts on it at 24 h.",
                                     default=22.0)
    alert_conn_id: str = _doc("Airflow connection whose URL receives alerts (DAG failure, "
                              "missed publish deadline) as a JSON POST; when it is not "
                              "defined, alerts are logged. See jobs/notify.py.",
                              default="recrawl_alerts")
    notifier: str = _doc("Custom alert notifier, package.module.callable taking the alert dict; "
                         "empty: the webhook connection above, else the log.", default="")
    intake_timeout_s: float = _doc("execution_timeout of intake (spark-submit; with "
                                   "intake.enabled).", default=3600.0)

    @property
    def entry(self) -> str:
        """The artefact's driver entry script (spark-submit's application): beside py_files."""
        return self.py_files[:-len(".zip")] + ".py" if self.py_files else ""

    def __post_init__(self):
        if self.py_files and not self.py_files.endswith(".zip"):
            raise ConfigError("airflow.py_files must be the recrawl_jobs-<version>.zip artefact "
                              "(python -m jobs.artefact) or empty")
        timeouts = ("poke_timeout_s", "validate_logs_timeout_s", "update_state_timeout_s",
                    "allocate_timeout_s", "build_schedule_timeout_s", "publish_timeout_s",
                    "verify_timeout_s", "report_timeout_s", "intake_timeout_s")
        for name in timeouts:
            if not 0 < getattr(self, name) < float("inf"):
                raise ConfigError(f"airflow.{name} must be > 0 and finite")
        if not 0 < self.publish_deadline_h <= 48:
            raise ConfigError("airflow.publish_deadline_h must be in (0, 48]")
        if self.notifier and "." not in self.notifier:
            raise ConfigError("airflow.notifier must be package.module.callable (or empty)")


@dataclass(frozen=True)
class EstimationConfig:
    half_life_days: float = _doc("Half-life (days) of the per-URL change statistics; old "
                                 "observations fade so a page that changes its behaviour is "
                                 "followed. inf disables forgetting.", default=90.0)
    prior_level: str = _doc("Empirical-Bayes shrinkage group: 'host', 'template' (host + first "
                            "path segment), 'class' (first path segment without ids, across "
                            "hosts: every site's /feed, every front page) or 'hierarchical' (the "
                            "first of template, class, host whose prior could be fitted by EM "
                            "(prior_min_urls observed URLs), else the first pooled one).",
                            default="hierarchical")
    prior_fit_max_urls: int = _doc("Each group's prior is fitted on a deterministic hash sample of "
                                   "at most this many URLs (a class spans millions of URLs on a "
                                   "real crawl; the prior needs thousands).", default=20000)
    prior_min_urls: int = _doc("Observed URLs a group needs for the EM prior fit (fewer: pooled "
                               "group rate).", default=3)
    level: float = _doc("Central probability of the lambda_lo/lambda_hi interval.", default=0.9)
    age_at_first_fetch: bool = _doc("Read the trusted Last-Modified of a URL's first copy as a "
                                    "change that long before it was found and none since, "
                                    "once, at its first trusted observation "
                                    "(jobs/core/estimators_stats.py add_age_at_first_fetch). "
                                    "false: a URL's rate is learnt from its fetches only.",
                                    default=True)
    probe_factor: float = _doc("A refresh URL on a host without trusted Last-Modified whose every "
                               "observation (at least 2) saw a change, and which its policy "
                               "visits above f_min yet less often than lambda_hat, is next visited "
                               "this / lambda_hat days after its last success (a probe: only a "
                               "short interval tells 20 changes a day from 50; "
                               "jobs/core/probes.py). 0: off.", default=1.0)


@dataclass(frozen=True)
class TimingConfig:
    enabled: bool = _doc("Learn when in the day or week each URL changes (from trusted "
                         "Last-Modified dates, trusted push signals and short changed "
                         "intervals; jobs/core/timing.py), place a timed URL's visits just after "
                         "its changes and price it as such (optimal). false: even spacing only.",
                         default=True)
    min_dated_changes: float = _doc("Dated changes a URL needs before its rhythm is used. Each "
                                    "weighs 2^(-age / estimation.half_life_days); k are met by "
                                    "a weight above k - 1 (jobs/core/timing.py counts), as are "
                                    "the other dated-change thresholds below.", default=5.0)
    min_concentration: float = _doc("Mean resultant length (0-1) the changes' times need on the day "
                                    "or week circle: 0.9 is a circular sd of about 1.75 h a day.",
                                    default=0.9)
    visit_lag_s: float = _doc("A timed URL's visit is placed this long after its mean change "
                              "time, plus two circular standard deviations.", default=600.0)
    max_changes_per_period: float = _doc("A URL whose lambda_hat x period (1 day or 1 week) exceeds "
                                         "this is never timed on that period: the Last-Modified "
                                         "instants of a page that changes many times between "
                                         "fetches lie just before the fetches (jobs/core/timing.py, "
                                         "fetch-locking).", default=8.0)
    max_arc_s: float = _doc("A changed interval no longer than this (seconds) counts as "
                            "evidence of the change's time of day (its midpoint, weighted by "
                            "sinc(length / day)).", default=21600.0)
    host_min_dated_changes: float = _doc("Dated changes a URL needs to be timed on the day "
                                         "at its host's phase (pooled from the host's URLs timed "
                                         "on their own evidence); >= min_dated_changes: no "
                                         "shrinkage to the host.", default=2.0)
    host_min_log_odds: float = _doc("Log likelihood ratio (von Mises at the host's phase against "
                                    "uniform times) a URL's few dated changes need to be timed "
                                    "through its host: log 100.", default=4.6)
    host_min_spread_s: float = _doc("Floor (seconds) on the host's circular sd in that ratio: a "
                                    "host's pages keep their own hours around the host's.",
                                    default=1800.0)
    tight_min_dated_changes: float = _doc("Dated changes that time a URL on its own evidence "
                                          "when their circular sd on the day or week is at most "
                                          "tight_spread_s (fewer than min_dated_changes): three "
                                          "uniform times pass 0.7 % of the time on the day, "
                                          "0.01 % on the week.", default=3.0)
    tight_spread_s: float = _doc("Circular sd (seconds) of the tight rule above.", default=1800.0)
    week_min_dated_changes: float = _doc("Dated changes that time a URL on the week by the tight "
                                         "rule when fewer than tight_min_dated_changes: two "
                                         "uniform times fall within tight_spread_s on the week "
                                         "1.2 % of the time (on the day 8 %, so the day keeps "
                                         "tight_min_dated_changes); >= tight_min_dated_changes: "
                                         "no such rule.", default=2.0)
    few_dates_max_changes_per_week: float = _doc("A URL timed on the week from fewer than "
                                                 "min_dated_changes dated changes (the tight rule, "
                                                 "or through its host when they all fell on one "
                                                 "weekday) needs lambda_hat x 7 at most this: a "
                                                 "weekly publisher changes at most once a week "
                                                 "(-ln(1 - 0.95) = 3.0 at p = 0.95), a daily one "
                                                 "about 4.9 times (p = 0.5) or more.", default=3.0)
    burst_max_poisson_prob: float = _doc("A URL whose trusted Last-Modified at its last fetch is so "
                                         "recent that its lambda_hat gives such an age at most "
                                         "this probability is mid-burst (jobs/core/bursts.py): its "
                                         "next visit moves to burst_recheck_s after that fetch. "
                                         "0: off. Off with timing.enabled = false.", default=0.02)
    burst_recheck_s: float = _doc("Seconds after a mid-burst fetch its URL is visited again, when "
                                  "that is sooner than its rhythm.", default=43200.0)


@dataclass(frozen=True)
class TrustConfig:
    half_life_days: float = _doc("Half-life (days) of the per-host validator evidence, so trust "
                                 "is re-earned (and lies forgiven) over time.", default=60.0)
    min_confirmations: float = _doc("Decayed full fetches in which the content changed AND the "
                                    "validator moved, needed before a host's 304s are trusted.",
                                    default=2.0)
    max_lie_share: float = _doc("Largest share of content changes with an unmoved validator "
                                "(frozen) a trusted validator may show.", default=0.1)
    max_volatile_share: float = _doc("Largest share of same-content full fetches with a moved "
                                     "validator (volatile) a trusted validator may show.",
                                     default=0.2)
    new_hosts_conditional: bool = _doc("Trust the validators of a host without enough evidence "
                                       "yet (class unverified: sent on most 2xx, never caught "
                                       "frozen or volatile) provisionally: conditional GETs from "
                                       "its second day, its 304s read as unchanged, and its "
                                       "visits in the conversion audits that catch a lying "
                                       "validator. false: full fetches until min_confirmations "
                                       "(docs/allocation.md, 'Conditional GET for new hosts').",
                                       default=False)


@dataclass(frozen=True)
class SignalsConfig:
    half_life_days: float = _doc("Half-life (days) of the per-host signal accuracy counts.",
                                 default=60.0)
    min_scored: float = _doc("Decayed scored claims a host needs before its signals are trusted.",
                             default=3.0)
    min_accuracy: float = _doc("Smoothed accuracy (correct+1)/(scored+2) needed for trust.",
                               default=0.8)
    max_defer_days: float = _doc("A trusted host's signal whose lastmod is not newer than the "
                                 "stored copy says the copy was current at the start of its "
                                 "day: the page's visit rhythm (and P(changed)) runs from then, "
                                 "at most this many days after its last fetch. 0: such signals "
                                 "defer nothing (docs/allocation.md, 'Signals that defer').",
                                 default=1.0)
    discover_from: str = _doc("Push signals for URLs not in state enter the discovery lane, "
                              "importance from their host as for frontier URLs: 'trusted' "
                              "(hosts whose signals are trusted), 'any' host, or 'none'. The "
                              "others are counted in allocate's record "
                              "(signal_urls_not_discovered).", default="trusted")


@dataclass(frozen=True)
class HealthConfig:
    # The served-rate limit of each host (jobs.core.host_health.next_rate_limit).
    max_error_rate: float = _doc("Served-rate limit: share of a host's fetches with status "
                                 "0/5xx/429 above which the day is bad.", default=0.05)
    max_latency_ms: float = _doc("Served-rate limit: mean response time above which the day is "
                                 "bad.", default=2000.0)
    min_fetches: int = _doc("Fetches a host needs in a day before its health is judged (fewer "
                            "when its limit is lower).", default=5)
    error_confidence: float = _doc("Served-rate limit: a day is bad on errors when the Wilson "
                                   "lower bound of its error share at this level exceeds "
                                   "max_error_rate (0: the plain share), so a stray timeout "
                                   "among a few fetches does not cut a healthy host.",
                                   default=0.9)
    max_throttle_rate: float = _doc("Served-rate limit: share of a host's fetches answered 429 or "
                                    "503 above which the day is bad (0: any).", default=0.0)
    rate_decrease: float = _doc("Served-rate limit: after a bad day the next day's limit is this x "
                                "the fetches the host served that day (multiplicative decrease).",
                                default=0.9)
    rate_return_step: float = _doc("Served-rate limit: additive increase per good day, as a share "
                                   "of the nominal cap, while below what the host served on its "
                                   "last bad day.", default=0.1)
    rate_probe_step: float = _doc("Served-rate limit: first additive step above that level, as a "
                                  "share of the nominal cap; then the probe grows with what "
                                  "probe days served (rate_probe_growth).", default=0.02)
    rate_probe_growth: float = _doc("Served-rate limit: a probe day that served s above the "
                                    "host's last served level S sets the next limit to "
                                    "s + this x (s - S) (1: the excess doubles a day, like slow "
                                    "start; 4 brings a host from a quota 1/40 of its cap back "
                                    "to 0.8 of it within a week).", default=4.0)
    rate_probe_ceiling_step: float = _doc("Served-rate limit: the first step above that level after "
                                          "a bad day is also at most this share of the fetches "
                                          "the host served that day (at least 1 visit).",
                                          default=0.1)
    rate_floor: float = _doc("Served-rate limit: lowest limit (visits/day); the nominal cap wins "
                             "when it is lower.", default=1.0)
    rate_min_utilisation: float = _doc("Served-rate limit: a good day grows the limit only when the "
                                       "host got at least this share of it.", default=0.9)
    latency_rise: float = _doc("Served-rate limit: a day whose mean elapsed_ms exceeds this x the "
                               "host's smoothed baseline (and by latency_min_rise_ms) is bad.",
                               default=1.5)
    latency_min_rise_ms: float = _doc("Served-rate limit: smallest rise over the baseline (ms) "
                                      "that counts as rising latency.", default=100.0)
    latency_half_life_days: float = _doc("Served-rate limit: half-life (judged days) of the "
                                         "latency baseline.", default=7.0)
    max_retry_after_s: float = _doc("Longest wait one 429/503 Retry-After may impose on a host "
                                    "(seconds after the response); longer ones are capped.",
                                    default=172800.0)


@dataclass(frozen=True)
class AuditConfig:
    sample_rate: float = _doc("Share of URLs in the freshness audit sample "
                              "(jobs.core.audit_sample.in_audit_sample); scored by update_state.",
                              default=0.01)
    level: float = _doc("Confidence of the audit freshness interval (Wilson).", default=0.95)


@dataclass(frozen=True)
class AlertsConfig:
    report_days: int = _doc("Days of metrics on the daily report the DAG's report task writes "
                            "(reports/dt=D/report.html, and beside the published schedules).",
                            default=14)
    freshness_floor: float = _doc("Alert when the day's audit freshness is below this "
                                  "(0: never).", default=0.5)
    freshness_drop: float = _doc("Alert when the day's audit freshness is more than this below "
                                 "the median of the audited days among the median_days before "
                                 "it (1: never).", default=0.1)
    median_days: int = _doc("Days before D whose audited freshness makes the median "
                            "freshness_drop compares with (at least 3 of them must have an "
                            "audit).", default=7)
    quarantine_share_max: float = _doc("Alert when the day's quarantined input rows exceed this "
                                       "share of its fetch-log rows (1: never).", default=0.01)
    unused_budget_share_max: float = _doc("Alert when the budget left unused by every lane, "
                                          "backfill included, exceeds this share of "
                                          "budget.daily_fetches (1: never).", default=0.05)
    hosts_blocked_max: int = _doc("Alert when more hosts than this are blocked by a Retry-After "
                                  "for part of the next window (-1: never).", default=20)

    def __post_init__(self):
        if self.report_days < 1 or self.median_days < 1:
            raise ConfigError("alerts.report_days and alerts.median_days must be >= 1")
        for name in ("freshness_floor", "freshness_drop", "quarantine_share_max",
                     "unused_budget_share_max"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ConfigError(f"alerts.{name} must be in [0, 1]")
        if self.hosts_blocked_max < -1:
            raise ConfigError("alerts.hosts_blocked_max must be >= -1")


@dataclass(frozen=True)
class IntakeConfig:
    enabled: bool = _doc("Run `intake` (robots.txt, sitemaps, feeds the fleet fetched, from "
                         "documents/dt=D) before update_state: a DAG task, and documents/dt=D is "
                         "then a required input.", default=False)
    user_agent: str = _doc("The fleet's robots.txt product token: the Crawl-delay of its group "
                           "(else of `*`) is taken.", default="recrawl")
    max_body_bytes: int = _doc("Largest document body taken in, stored and once decompressed "
                               "(sitemaps.org's limit: 50 MiB); a larger one is quarantined "
                               "(body_too_large) and never parsed.", default=52428800)
    max_robots_bytes: int = _doc("A robots.txt is parsed up to this many bytes, the rest ignored "
                                 "(RFC 9309 2.5: at least 500 KiB).", default=512000)
    max_urls_per_sitemap: int = _doc("A sitemap (or index) with more entries is quarantined "
                                     "(too_many_urls), parsing stops there (sitemaps.org: 50,000).",
                                     default=50000)
    max_clock_skew_s: float = _doc("A sitemap lastmod or feed date later than the document's "
                                   "fetched_at plus this is quarantined (future_lastmod).",
                                   default=3600.0)
    docs_per_batch: int = _doc("Documents per Arrow batch handed to a Python worker: with "
                               "max_body_bytes it bounds a worker's memory.", default=8)

    def __post_init__(self):
        for name in ("max_body_bytes", "max_robots_bytes", "max_urls_per_sitemap",
                     "docs_per_batch"):
            if getattr(self, name) < 1:
                raise ConfigError(f"intake.{name} must be >= 1")
        if not 0 <= self.max_clock_skew_s < float("inf"):
            raise ConfigError("intake.max_clock_skew_s must be >= 0 and finite")
        if not self.user_agent or not self.user_agent.replace("-", "").replace("_", "").isalnum():
            raise ConfigError("intake.user_agent must be a robots.txt product token "
                              "(letters, digits, '-', '_')")


@dataclass(frozen=True)
class LanesConfig:
    fast_min_lambda: float = _doc("A known page joins the fast lane when its lambda_hat (changes/day) "
                                  "is at least this AND its importance at least fast_min_importance.",
                                  default=4.0)
    fast_min_importance: float = _doc("Importance a page needs (with fast_min_lambda) for the fast "
                                      "lane.", default=5.0)
    fast_patterns: str = _doc("Comma-separated regular expressions; a known URL matching any joins "
                              "the fast lane (front pages, feeds). Empty: none.",
                              default=r"^https?://[^/]+/?$,/(feed|rss|atom)(\.xml)?/?$")
    fast_as_floor: bool = _doc("Budget-aware policies (optimal, uniform, proportional): the fast "
                               "lane's rate is a floor, not a ceiling -- fast pages are also priced "
                               "by the policy (with the fast and refresh budgets together) and get "
                               "max(fast rate, policy rate). false: the fast lane's common rate is "
                               "all they get. adaptive always uses the common rate.", default=True)
    discovery_value_days: float = _doc("Split 'auto': freshness-days one discovery fetch of a URL "
                                       "with importance w is worth (value w x this), compared with "
                                       "refresh's multiplier mu.", default=1.0)
    audit_cadence_days: int = _doc("An audit-sample URL is fetched in full once every this many "
                                   "days, on a day and at a time of day spread by its hash.",
                                   default=1)
    backfill_horizon_days: float = _doc("Budget the day's due visits leave unused (fewer due than the "
                                        "budget) pulls forward the next visit of refresh and fast "
                                        "pages due within this many days after the window, best "
                                        "first by the freshness the pull buys (P(changed) x "
                                        "importance x the fresh time until the visit would have "
                                        "come), within each host's cap, to the end of the "
                                        "window, beside the push signals not worth a planned "
                                        "visit (at the window start); written as refresh "
                                        "(metrics.planned_backfill). Not timed pages (their next "
                                        "visit waits for their change time). 0 disables.",
                                        default=1.0)


@dataclass(frozen=True)
class AllocationConfig:
    grid_points: int = _doc("Levels of the shared demand-curve grid (pass 2).", default=256)
    buckets: int = _doc("Host-hash groups of the demand passes (one pandas call each, over "
                        "all its hosts), at least; more when the pages need them "
                        "(`rows_per_bucket`).", default=16)
    rows_per_bucket: int = _doc("allocate makes about (state rows + frontier rows) / this many "
                                "buckets when that is more than `buckets`: a Python worker holds "
                                "one bucket's pages and its plan rows at a time.",
                                default=250_000)


@dataclass(frozen=True)
class Config:
    paths: PathsConfig = field(default_factory=PathsConfig)
    budget: BudgetConfig = field(default_factory=BudgetConfig)
    intervals: IntervalConfig = field(default_factory=IntervalConfig)
    politeness: PolitenessConfig = field(default_factory=PolitenessConfig)
    ingest: IngestConfig = field(default_factory=IngestConfig)
    policy: PolicyConfig = field(default_factory=PolicyConfig)
    schedule: ScheduleConfig = field(default_factory=ScheduleConfig)
    spark: SparkConfig = field(default_factory=SparkConfig)
    publish: PublishConfig = field(default_factory=PublishConfig)
    airflow: AirflowConfig = field(default_factory=AirflowConfig)
    alerts: AlertsConfig = field(default_factory=AlertsConfig)
    estimation: EstimationConfig = field(default_factory=EstimationConfig)
    timing: TimingConfig = field(default_factory=TimingConfig)
    trust: TrustConfig = field(default_factory=TrustConfig)
    signals: SignalsConfig = field(default_factory=SignalsConfig)
    health: HealthConfig = field(default_factory=HealthConfig)
    audit: AuditConfig = field(default_factory=AuditConfig)
    lanes: LanesConfig = field(default_factory=LanesConfig)
    allocation: AllocationConfig = field(default_factory=AllocationConfig)
    intake: IntakeConfig = field(default_factory=IntakeConfig)

    def __post_init__(self):
        _validate(self)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


POLICIES = ("adaptive", "uniform", "proportional", "optimal")
PRIOR_LEVELS = ("host", "template", "class", "hierarchical")


def _validate(c: Config) -> None:
    root = c.paths.root
    scheme, sep, rest = root.partition("://")
    where = rest.strip("/") if scheme == "file" else rest.split("/", 1)[0]  # file:///path
    if not root.strip() or root != root.strip() or (sep and not (scheme and where)):
        raise ConfigError(f"paths.root {root!r} names no place: a local path or a URI with a "
                          f"bucket or host (s3a://bucket/prefix)")
    b = c.budget
    if b.daily_fetches < 0:
        raise ConfigError("budget.daily_fetches must be >= 0")
    for name in ("fast_share", "discovery_share", "audit_share"):
        if not 0.0 <= getattr(b, name) <= 1.0:
            raise ConfigError(f"budget.{name} must be in [0, 1]")
    if b.refresh_share < 0:
        raise ConfigError("budget shares (fast + discovery + audit) exceed 1")
    if b.split not in ("fixed", "auto"):
        raise ConfigError("budget.split must be 'fixed' or 'auto'")
    iv = c.intervals
    if not 0 < iv.floor_s <= iv.initial_s <= iv.cap_s:
        raise ConfigError("need 0 < intervals.floor_s <= initial_s <= cap_s")
    if c.politeness.default_crawl_delay_s <= 0:
        raise ConfigError("politeness.default_crawl_delay_s must be > 0")
    if not 0 < c.politeness.min_crawl_delay_s <= c.politeness.max_crawl_delay_s < float("inf"):
        raise ConfigError("need 0 < politeness.min_crawl_delay_s <= max_crawl_delay_s < inf")
    if not c.ingest.max_lateness_days >= 0 or c.ingest.max_url_length < 1:
        raise ConfigError("need ingest.max_lateness_days >= 0 and ingest.max_url_length >= 1")
    if not c.ingest.snapshot_max_age_days >= 0:
        raise ConfigError("need ingest.snapshot_max_age_days >= 0")
    if c.policy.name not in POLICIES:
        raise ConfigError(f"policy.name must be one of {POLICIES}")
    if c.policy.objective not in ("freshness", "age"):
        raise ConfigError("policy.objective must be 'freshness' or 'age'")
    if c.policy.default_importance < 0:
        raise ConfigError("policy.default_importance must be >= 0")
    if c.signals.discover_from not in ("trusted", "any", "none"):
        raise ConfigError("signals.discover_from must be 'trusted', 'any' or 'none'")
    if not 0 <= c.signals.max_defer_days < float("inf"):
        raise ConfigError("signals.max_defer_days must be >= 0 and finite")
    if c.schedule.n_shards < 1 or c.spark.state_buckets < 1:
        raise ConfigError("schedule.n_shards and spark.state_buckets must be >= 1")
    if not 0 < c.spark.progress_interval_s < float("inf"):
        raise ConfigError("spark.progress_interval_s must be > 0")
    if c.spark.rebuild_rows_per_bucket < 1:
        raise ConfigError("spark.rebuild_rows_per_bucket must be >= 1")
    if c.airflow.retries < 0 or not c.airflow.retry_delay_s >= 0:
        raise ConfigError("airflow.retries and airflow.retry_delay_s must be >= 0")
    if c.airflow.spark_session not in SPARK_SESSIONS:
        raise ConfigError(f"airflow.spark_session must be one of {SPARK_SESSIONS}, "
                          f"got {c.airflow.spark_session!r}")
    _validate_update_sections(c)
    _validate_allocation_sections(c)


def _validate_update_sections(c: Config) -> None:
    """[estimation], [timing], [trust], [signals], [health], [audit] (the update_state side)."""
    e, t, g, h, a = c.estimation, c.trust, c.signals, c.health, c.audit
    for key, value in (("estimation.half_life_days", e.half_life_days),
                       ("trust.half_life_days", t.half_life_days),
                       ("signals.half_life_days", g.half_life_days)):
        if not value > 0:
            raise ConfigError(f"{key} must be > 0 (inf disables forgetting)")
    if e.prior_level not in PRIOR_LEVELS:
        raise ConfigError(f"estimation.prior_level must be one of {PRIOR_LEVELS}")
    if e.prior_fit_max_urls < 100:
        raise ConfigError("estimation.prior_fit_max_urls must be >= 100")
    if e.prior_min_urls < 2:
        raise ConfigError("estimation.prior_min_urls must be >= 2")
    if not 0 <= e.probe_factor <= 10:
        raise ConfigError("estimation.probe_factor must be in [0, 10]")
    tm = c.timing
    if not (0 <= tm.min_dated_changes < float("inf") and 0 < tm.min_concentration <= 1
            and 0 <= tm.visit_lag_s < 86400 and 0 <= tm.max_arc_s <= 86400
            and 0 < tm.max_changes_per_period < float("inf")
            and 0 <= tm.host_min_dated_changes < float("inf")
            and 0 <= tm.host_min_log_odds < float("inf") and 0 < tm.host_min_spread_s <= 43200
            and 0 <= tm.few_dates_max_changes_per_week < float("inf")
            and 0 <= tm.tight_min_dated_changes < float("inf") and 0 < tm.tight_spread_s <= 43200
            and 0 <= tm.week_min_dated_changes < float("inf")):
        raise ConfigError("need timing.min_dated_changes finite >= 0, 0 < min_concentration <= 1, "
                          "0 <= visit_lag_s < 86400, 0 <= max_arc_s <= 86400, "
                          "0 < max_changes_per_period < inf, host_min_dated_changes and "
                          "host_min_log_odds finite >= 0, 0 < host_min_spread_s <= 43200 and "
                          "few_dates_max_changes_per_week, tight_min_dated_changes and "
                          "week_min_dated_changes finite >= 0, 0 < tight_spread_s <= 43200")
    if not (0 <= tm.burst_max_poisson_prob < 1 and 0 < tm.burst_recheck_s <= 7 * 86400):
        raise ConfigError("need 0 <= timing.burst_max_poisson_prob < 1 and "
                          "0 < timing.burst_recheck_s <= 604800 (one week)")
    for key, value in (("estimation.level", e.level), ("audit.level", a.level)):
        if not 0 < value < 1:
            raise ConfigError(f"{key} must be in (0, 1)")
    for key, value in (("trust.max_lie_share", t.max_lie_share),
                       ("trust.max_volatile_share", t.max_volatile_share),
                       ("signals.min_accuracy", g.min_accuracy),
                       ("health.max_error_rate", h.max_error_rate),
                       ("audit.sample_rate", a.sample_rate)):
        if not 0 <= value <= 1:
            raise ConfigError(f"{key} must be in [0, 1]")
    if t.min_confirmations < 0 or g.min_scored < 0 or h.min_fetches < 0:
        raise ConfigError("trust.min_confirmations, signals.min_scored, health.min_fetches >= 0")
    if not h.max_latency_ms > 0:
        raise ConfigError("need health.max_latency_ms > 0")
    _validate_rate_limit(h)


def _validate_rate_limit(h: HealthConfig) -> None:
    """The served-rate limit's keys of [health]."""
    inf = float("inf")
    checks = (("max_throttle_rate", 0 <= h.max_throttle_rate <= 1, "in [0, 1]"),
              ("error_confidence", 0 <= h.error_confidence < 1, "in [0, 1)"),
              ("rate_probe_ceiling_step", 0 < h.rate_probe_ceiling_step <= 1, "in (0, 1]"),
              ("rate_probe_growth", 1 <= h.rate_probe_growth <= 16, "in [1, 16]"),
              ("rate_decrease", 0 < h.rate_decrease < 1, "in (0, 1)"),
              ("rate_return_step", 0 < h.rate_return_step <= 1, "in (0, 1]"),
              ("rate_probe_step", 0 < h.rate_probe_step <= 1, "in (0, 1]"),
              ("rate_floor", 0 <= h.rate_floor < inf, "finite and >= 0"),
              ("rate_min_utilisation", 0 < h.rate_min_utilisation <= 1, "in (0, 1]"),
              ("latency_rise", h.latency_rise > 1, "> 1 (inf: off)"),
              ("latency_min_rise_ms", 0 <= h.latency_min_rise_ms < inf, "finite and >= 0"),
              ("latency_half_life_days", h.latency_half_life_days > 0, "> 0"),
              ("max_retry_after_s", 0 <= h.max_retry_after_s < inf, "finite and >= 0"))
    for key, ok, rule in checks:
        if not ok:
            raise ConfigError(f"health.{key} must be {rule}")


def _validate_allocation_sections(c: Config) -> None:
    """[lanes], [allocation] (the planner side)."""
    ln, al = c.lanes, c.allocation
    if ln.fast_min_lambda < 0 or ln.fast_min_importance < 0 or ln.discovery_value_days < 0:
        raise ConfigError("lanes.fast_min_lambda, fast_min_importance, discovery_value_days >= 0")
    if ln.audit_cadence_days < 1:
        raise ConfigError("lanes.audit_cadence_days must be >= 1")
    if not 0 <= ln.backfill_horizon_days <= 90:
        raise ConfigError("lanes.backfill_horizon_days must be in [0, 90]")
    if al.grid_points < 8 or al.buckets < 1 or al.rows_per_bucket < 1:
        raise ConfigError("allocation.grid_points must be >= 8, allocation.buckets and "
                          "allocation.rows_per_bucket >= 1")


def _coerce(section: str, f: dataclasses.Field, value: Any) -> Any:
    hint = typing.get_type_hints(type_of_section(section))[f.name]
    key = f"{section}.{f.name}"
    optional = typing.get_origin(hint) is typing.Union and type(None) in typing.get_args(hint)
    base = [a for a in typing.get_args(hint) if a is not type(None)][0] if optional else hint
    if optional and (value is None or (isinstance(value, str) and value.lower() in ("", "none", "null"))):
        return None
    try:
        if base is bool:
            if isinstance(value, str):
                if value.lower() not in ("true", "false", "1", "0"):
                    raise ValueError(value)
                return value.lower() in ("true", "1")
            return bool(value)
        if base is dict:
            return dict(json.loads(value)) if isinstance(value, str) else dict(value)
        if base is int and isinstance(value, float) and not value.is_integer():
            raise ValueError(value)
        return base(value)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{key}: cannot read {value!r} as {getattr(base, '__name__', base)}") from exc


def type_of_section(section: str):
    for f in dataclasses.fields(Config):
        if f.name == section:
            return f.type if isinstance(f.type, type) else globals()[f.type]
    raise ConfigError(f"unknown config section {section!r}")


def load_config(path: Optional[str] = None, overrides: Optional[list[str]] = None) -> Config:
    """Defaults, then the TOML file at ``path``, then ``section.key=value`` overrides."""
    values: dict[str, dict[str, Any]] = {}
    if path:
        try:
            with open(path, "rb") as fh:
                values = tomllib.load(fh)
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise ConfigError(f"config file {path}: {exc}") from exc
    paths = values.get("paths")
    file_dir = (os.path.dirname(os.path.abspath(path))
                if isinstance(paths, dict) and "root" in paths else None)
    for item in overrides or []:
        if "=" not in item or "." not in item.split("=", 1)[0]:
            raise ConfigError(f"override {item!r} is not section.key=value")
        key, value = item.split("=", 1)
        section, name = key.split(".", 1)
        table = name.split(".", 1)[0]
        if section == "spark" and table in ("settings", "cluster_settings") and "." in name:
            default = dict(getattr(SparkConfig(), table))
            values.setdefault("spark", {}).setdefault(table, default)
            values["spark"][table][name[len(table) + 1:]] = value
            continue
        values.setdefault(section, {})[name] = value
        if (section, name) == ("paths", "root"):
            file_dir = None  # a shell's path: the current directory
    cfg = config_from_dict(values)
    return dataclasses.replace(cfg, paths=dataclasses.replace(
        cfg.paths, root=_absolute_root(cfg.paths.root, file_dir)))


def _absolute_root(root: str, file_dir: Optional[str]) -> str:
    """A local relative ``root`` made absolute: against ``file_dir``, the directory of the
    config file that set it, else (None: ``--set`` or the default) the current directory.
    Every stage of a DAG run then writes where the file says, whatever directory its worker
    runs in, and logs and manifests name the real place. URIs are left as they are."""
    if "://" in root:
        return root
    root = os.path.expanduser(root)  # a TOML file's "~/crawl", which no shell expanded
    if os.path.isabs(root):
        return root
    return os.path.normpath(os.path.join(file_dir or os.getcwd(), root))


def config_from_dict(values: dict[str, dict[str, Any]]) -> Config:
    """The config of ``{section: {key: value}}`` on top of the defaults (e.g. the config a
    published manifest recorded, ``Config.to_dict()``), every value checked."""
    sections = {}
    for section, given in values.items():
        cls = type_of_section(section)
        if not isinstance(given, dict):
            raise ConfigError(f"config section {section!r} must be a table")
        fields = {f.name: f for f in dataclasses.fields(cls)}
        unknown = set(given) - set(fields)
        if unknown:
            raise ConfigError(f"unknown key(s) in [{section}]: {sorted(unknown)}")
        sections[section] = cls(**{k: _coerce(section, fields[k], v) for k, v in given.items()})
    return Config(**sections)


def toml_text(cfg: Config) -> str:
    """The whole config as a TOML file that ``load_config`` reads back to ``cfg``.

    Every section and key is written, so the file pins the run's config whatever the defaults
    become; None is written as "" (an optional key reads "" as None), dicts as sub-tables.
    """
    def value(v):
        if v is None:
            return '""'
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, (int, float)):
            return repr(v)
        return json.dumps(v)

    lines = []
    for section, values in cfg.to_dict().items():
        lines.append(f"[{section}]")
        nested = {k: v for k, v in values.items() if isinstance(v, dict)}
        lines += [f"{k} = {value(v)}" for k, v in values.items() if k not in nested]
        for k, v in nested.items():
            lines.append(f"[{section}.{k}]")
            lines += [f"{json.dumps(kk)} = {value(vv)}" for kk, vv in v.items()]
        lines.append("")
    return "\n".join(lines)


def published_config(cfg: Config, run_date: str) -> Config:
    """The config recorded in the manifest of the day the run for ``run_date`` published."""
    from jobs.errors import MissingPartitionError
    from jobs.objstore import open_store
    from jobs.paths import schedule_date, schedule_manifest_key

    store, location = open_store(cfg.publish.target, endpoint_url=cfg.publish.endpoint_url or None)
    key = schedule_manifest_key(location.prefix, schedule_date(run_date))
    if store.head(key) is None:
        raise MissingPartitionError("schedules", location.uri(key), "no published manifest")
    recorded = json.loads(store.get_bytes(key)).get("extra", {}).get("config")
    if not isinstance(recorded, dict):
        raise ConfigError(f"{location.uri(key)} records no config (extra.config)")
    return config_from_dict(recorded)


def add_config_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", help="TOML file of overrides")
    parser.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE",
                        help="override one key; repeatable")


def config_from_args(args: argparse.Namespace) -> Config:
    return load_config(args.config, args.set)


def markdown() -> str:
    lines = ["# Configuration", "",
             "Generated by `python -m jobs.config --markdown` from `jobs/config.py`, the only place "
             "defaults live. Override with a TOML file (`--config file.toml`, sections as below) or "
             "`--set section.key=value` on any job or the demo.", ""]
    for sec in dataclasses.fields(Config):
        cls = type_of_section(sec.name)
        lines += [f"## [{sec.name}]", "", "| key | type | default | meaning |", "|---|---|---|---|"]
        hints = typing.get_type_hints(cls)
        for f in dataclasses.fields(cls):
            default = f.default if f.default is not dataclasses.MISSING else f.default_factory()
            tname = str(hints[f.name]).replace("typing.", "").replace("<class '", "").replace("'>", "")
            lines.append(f"| `{f.name}` | {tname} | `{json.dumps(default)}` | {f.metadata['doc']} |")
        lines.append("")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    add_config_args(parser)
    parser.add_argument("--markdown", action="store_true", help="print docs/config.md")
    parser.add_argument("--published", metavar="D", default=None,
                        help="print, as TOML, the config the published run of date D used "
                             "(extra.config of schedules/dt=D+1/_manifest.json at "
                             "publish.target): a rollback's config (docs/operations.md)")
    args = parser.parse_args(argv)
    if args.markdown:
        print(markdown())
    elif args.published:
        print(toml_text(published_config(config_from_args(args), args.published)))
    else:
        print(json.dumps(config_from_args(args).to_dict(), indent=2))
    return 0


if __name__ == "__main__":
    from jobs.cli import guarded

    sys.exit(guarded(main, prog="python -m jobs.config"))
