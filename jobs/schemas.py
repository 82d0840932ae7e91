"""Every table's contract, as code. Jobs check inputs against these at their boundary.

``python -m jobs.schemas --markdown > docs/tables.md`` renders every table's columns; a test
keeps the page and this module identical. Types are checked by kind (any integer width is an
``int``, ``string`` and ``large_string`` are both ``string``) so producers need not match
our exact Arrow widths; extra columns in inputs are ignored.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Optional

import pyarrow as pa

from jobs.errors import SchemaError  # noqa: F401  (its home: jobs.errors)

_ARROW = {
    "string": pa.string(), "int": pa.int64(), "int32": pa.int32(), "bool": pa.bool_(),
    "float": pa.float64(), "timestamp": pa.timestamp("us", tz="UTC"), "date": pa.date32(),
    "binary": pa.binary(),
}
_SPARK = {"string": "string", "int": "bigint", "int32": "int", "bool": "boolean",
          "float": "double", "timestamp": "timestamp", "date": "date", "binary": "binary"}


def _kind_ok(kind: str, t: pa.DataType) -> bool:
    if kind == "string":
        return pa.types.is_string(t) or pa.types.is_large_string(t)
    if kind in ("int", "int32"):
        return pa.types.is_integer(t)
    if kind == "bool":
        return pa.types.is_boolean(t)
    if kind == "float":
        return pa.types.is_floating(t) or pa.types.is_integer(t)
    if kind == "timestamp":
        # Naive timestamps are read as UTC (documented in docs/contract.md).
        return pa.types.is_timestamp(t) and t.tz in (None, "UTC", "+00:00", "Etc/UTC")
    if kind == "date":
        return pa.types.is_date(t)
    if kind == "binary":
        return pa.types.is_binary(t) or pa.types.is_large_binary(t)
    raise ValueError(kind)


@dataclass(frozen=True)
class Col:
    name: str
    kind: str
    doc: str
    nullable: bool = False
    required: bool = True


@dataclass(frozen=True)
class Contract:
    name: str
    layout: str
    doc: str
    columns: tuple[Col, ...]

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.columns]

    def arrow_schema(self, *, all_nullable: bool = False) -> pa.Schema:
        """The columns as Arrow fields (the narrowest type of each kind), in contract order.

        Fields are nullable where the column is nullable or optional; ``all_nullable``
        makes every field nullable (how the simulator writes its inputs: same columns and
        types, no non-null assertion in the file).
        """
        return pa.schema([pa.field(c.name, _ARROW[c.kind],
                                   nullable=all_nullable or c.nullable or not c.required)
                          for c in self.columns])

    def spark_ddl(self) -> str:
        return ", ".join(f"{c.name} {_SPARK[c.kind]}" for c in self.columns)


def table_from_pandas(pdf, schema: pa.Schema) -> pa.Table:
    """``pdf``'s columns named in ``schema`` as an Arrow table of exactly that schema; a
    field ``pdf`` lacks is all null, and no pandas index or metadata is added (the pandas
    functions behind ``applyInArrow`` return tables that must match Spark's schema)."""
    n = len(pdf)
    return pa.Table.from_arrays(
        [pa.array(pdf[f.name], type=f.type, from_pandas=True) if f.name in pdf.columns
         else pa.nulls(n, f.type) for f in schema], schema=schema)


def check_schema(contract: Contract, schema: pa.Schema, file: str) -> None:
    """Raise SchemaError unless ``schema`` has every required column with the right kind."""
    for col in contract.columns:
        idx = schema.get_field_index(col.name)
        if idx < 0:
            if col.required:
                raise SchemaError(contract.name, file, col.name, "required column is missing")
            continue
        actual = schema.field(idx).type
        # An all-null column of a nullable field is written with Arrow's null type.
        if pa.types.is_null(actual) and (col.nullable or not col.required):
            continue
        if not _kind_ok(col.kind, actual):
            raise SchemaError(contract.name, file, col.name,
                              f"expected {col.kind}, found {actual}")


@dataclass(frozen=True)
class Footer:
    """What a checked file's footer says: its Arrow schema and row count."""
    path: str
    schema: pa.Schema
    num_rows: int
    # The whole footer (row-group statistics), for checks that need more than the schema.
    metadata: object = field(default=None, compare=False, repr=False)


def check_files(contract: Contract, files: list[str]) -> list[Footer]:
    """Check every Parquet file's footer against ``contract`` (footers only, no data).

    Paths may be local or object-store URIs (s3a:// included), as jobs.storage lists them.
    Returns the footers, so readers can group files by physical schema without reading
    them twice (jobs.ingest casts each group to the contract).
    """
    from jobs.storage import parquet_metadata

    footers = []
    for path in files:
        try:
            meta = parquet_metadata(path)
            schema = meta.schema.to_arrow_schema()
        except Exception as exc:  # noqa: BLE001 - any failure to read a footer is "unreadable"
            raise SchemaError(contract.name, path, None, f"unreadable Parquet file ({exc})") from exc
        check_schema(contract, schema, path)
        footers.append(Footer(path, schema, meta.num_rows, meta))
    return footers


def C(name, kind, doc, nullable=False, required=True):
    return Col(name, kind, doc, nullable, required)


FETCH_LOG = Contract("fetch_logs", "fetch_logs/dt=YYYY-MM-DD/*.parquet",
                     "One row per fetch attempt by the fleet. Extra columns are ignored.", (
    C("url", "string", "the URL fetched"),
    C("host", "string", "derived from `url` when absent or null", True, False),
    C("fetched_at", "timestamp", "when the fetch happened (UTC)"),
    C("status", "int32", "HTTP status; 0 = network error or timeout"),
    C("conditional", "bool", "whether the request sent If-None-Match / If-Modified-Since"),
    C("etag", "string", "the response's raw ETag header", True),
    C("last_modified", "string", "the response's raw Last-Modified header", True),
    C("content_hash", "string", "fingerprint of the normalised main content (2xx only)", True),
    C("bytes", "int", "bytes received"),
    C("elapsed_ms", "int32", "response time", True, False),
    C("lane", "string", "the schedule row's lane (refresh, fast, discovery or audit; `audit` "
                        "rows are measurement-only and scored by the freshness audit)", True, False),
    C("fingerprint_version", "int32", "`FINGERPRINT_VERSION` that computed `content_hash` "
                                      "(docs/fingerprint.md); absent or null: 1, the only "
                                      "version before the column. Each fetch is compared with "
                                      "the stored hash of its own version only (state."
                                      "fingerprint_version); a day may mix versions", True, False),
    C("retry_after", "string", "the response's raw Retry-After header (429/503), as received: "
                               "delay-seconds or an HTTP date", True, False),
))

IMPORTANCE = Contract("importance", "importance/dt=YYYY-MM-DD/*.parquet (or importance/*.parquet)",
                      "Optional snapshot: the run for D reads the latest committed `dt=` <= D, or "
                      "the undated files (\"Snapshots\" above). URLs missing from it get "
                      "`policy.default_importance`.", (
    C("url", "string", "the URL"),
    C("importance", "float", "importance weight, >= 0"),
))

HOST_POLICY = Contract("host_policy", "host_policy/dt=YYYY-MM-DD/*.parquet (or host_policy/*.parquet)",
                       "Optional snapshot, read like `importance/`. Missing hosts get the "
                       "`[politeness]` defaults.", (
    C("host", "string", "the host"),
    C("crawl_delay_s", "float", "seconds between two requests to the host"),
    C("max_fetches_per_day", "int", "explicit daily cap", True),
    C("source", "string", "`robots` for a row `intake` took from the host's robots.txt "
                          "Crawl-delay; null for upstream's rows", True, False),
))

SIGNALS = Contract("signals", "signals/dt=YYYY-MM-DD/*.parquet", "Optional push signals.", (
    C("url", "string", "the URL said to have changed"),
    C("signaled_at", "timestamp", "the claimed change time"),
    C("source", "string", "sitemap, feed, websub or indexnow"),
))

FRONTIER = Contract("frontier", "frontier/dt=YYYY-MM-DD/*.parquet",
                    "Optional newly discovered URLs.", (
    C("url", "string", "the discovered URL"),
    C("discovered_at", "timestamp", "when it was discovered"),
    C("importance", "float", "importance if known", True),
))

OVERRIDES = Contract("overrides", "overrides/*.parquet",
                     "Optional. The operator's levers, read by allocate on every run (no date "
                     "partition: a row applies until removed or until `until`). A bad row is "
                     "quarantined (source `overrides`, reasons `bad_action`, `missing_url`, "
                     "`missing_host`, `bad_visits_per_day`, `missing_until`, "
                     "`missing_created_at`, `duplicate_override` or the URL rule's) and the "
                     "others still apply. `recrawl explain` and the report show the ones in "
                     "force; politeness always wins (a pin above the host's cap is capped).", (
    C("action", "string", "`pin` (the URL's visits/day), `pause_host` (no fetch of the host "
                          "before `until`), `force` (fetch the URL on the next schedule) or "
                          "`forget` (stop planning the URL)"),
    C("url", "string", "the URL (pin, force, forget), exactly as in state/", True),
    C("host", "string", "the host (pause_host)", True),
    C("visits_per_day", "float", "pin: visits/day, > 0 and at most 1440; capped at the host's "
                                 "daily cap", True, False),
    C("until", "date", "pause_host (required): no fetch before this date, UTC; pin, force, "
                       "forget: in force for the runs planning a day before it (null: until "
                       "the row is removed)", True, False),
    C("created_at", "timestamp", "force (required): when it was asked; the URL gets a visit "
                                 "at the start of the next planned day unless it was fetched "
                                 "after this", True, False),
    C("note", "string", "who asked and why (free text, shown by explain)", True, False),
))

DOCUMENTS = Contract("documents", "documents/dt=YYYY-MM-DD/*.parquet",
                     "Optional (required with `intake.enabled`). The robots.txt, sitemap and "
                     "feed responses the fleet fetched on D, bodies included, written with "
                     "`jobs.fleet.documents.DocumentWriter`; `recrawl intake` turns them into "
                     "`host_policy/dt=D`, `signals/dt=D` and `document_refs/dt=D`.", (
    C("url", "string", "the URL fetched (the final URL of a redirect chain)"),
    C("host", "string", "derived from `url` when absent or null", True, False),
    C("kind", "string", "robots, sitemap (a sitemap or a sitemap index) or feed (RSS or Atom)"),
    C("fetched_at", "timestamp", "when the fetch happened (UTC)"),
    C("status", "int32", "HTTP status; 0 = network error or timeout"),
    C("content_type", "string", "the response's raw Content-Type header", True, False),
    C("body", "binary", "the body as received after transfer and content decoding; a gzip "
                        "file (`sitemap.xml.gz`) may stay gzip (read by its magic bytes); "
                        "null or empty on a non-2xx", True),
))

DOCUMENT_REFS = Contract("document_refs", "document_refs/dt=YYYY-MM-DD/*.parquet",
                         "Written by `recrawl intake`: the sitemaps that robots.txt files "
                         "(`Sitemap:`) and sitemap indexes named on D, for the fleet to "
                         "fetch as `documents` of kind sitemap.", (
    C("url", "string", "the sitemap URL (the planner's URL rule; a sitemap index's children "
                       "on the index's host)"),
    C("host", "string", "the URL's normalised host"),
    C("kind", "string", "sitemap"),
    C("referrer", "string", "the robots.txt or sitemap index that named it"),
    C("found_at", "timestamp", "the referrer's fetched_at"),
))

# The per-URL change statistics of jobs.core.estimators_stats (decayed sums).
_STATS_NAMES = tuple([f"chg_n_{k:02d}" for k in range(16)] + [f"chg_t_{k:02d}" for k in range(16)]
                     + ["unch_n", "unch_t", "lm_n", "lm_changes", "lm_exposure"])
_STATS_DOC = {"chg_": "changed observations in log interval bin k: decayed count (n) or sum of "
                      "intervals in days (t)",
              "unch": "unchanged observations: decayed count (n) / sum of intervals (t, days)",
              "lm_n": "observations with trusted Last-Modified or signal dating (decayed)",
              "lm_c": "dated changes (decayed)",
              "lm_e": "dated exposure, days (decayed)"}

STATE = Contract("state", "state/dt=YYYY-MM-DD/*.parquet",
                 "The planner's per-URL memory after the run for dt; the analysts' main table.", (
    C("url", "string", "the URL"),
    C("host", "string", "its host"),
    C("first_seen", "timestamp", "first fetch we saw"),
    C("last_fetch_at", "timestamp", "last fetch attempt", True),
    C("last_status", "int32", "status of the last fetch attempt", True),
    C("last_success_at", "timestamp", "last 2xx/304 fetch", True),
    C("last_change_at", "timestamp", "fetch time at which a change was last seen", True),
    C("last_known_at", "timestamp", "last time the stored content was confirmed current (2xx "
                                    "with a hash, or a 304 of a trusted host); intervals of "
                                    "observations start here", True),
    C("etag", "string", "last ETag seen (raw)", True),
    C("last_modified", "string", "last Last-Modified seen: as IMF-fixdate when it was an "
                                 "HTTP-date in any of RFC 9110's three forms, else as received",
      True),
    C("content_hash", "string", "last content hash seen", True),
    C("interval_s", "float", "current revisit interval (seed backoff-and-advance rule)"),
    C("lambda_hat", "float", "estimated change rate, changes per day"),
    C("lambda_lo", "float", "lower end of the 90% interval of lambda"),
    C("lambda_hi", "float", "upper end of the 90% interval of lambda"),
    C("lambda_prior", "float", "mean of the empirical-Bayes group prior lambda was shrunk "
                               "towards (null: default smoothing prior)", True),
    C("n_fetches", "int", "fetch attempts seen"),
    C("n_observations", "int", "changed/unchanged observations seen (not decayed)"),
    C("n_changes", "int", "observations that found a change (not decayed)"),
    C("exposure_days", "float", "sum of observed intervals (days, not decayed)"),
    C("n_errors", "int", "fetches with status 0, 429 or 5xx"),
    C("consecutive_gone", "int32", "consecutive 404/410 answers"),
    C("gone", "bool", "confirmed gone; only re-checked rarely"),
    C("signal_claim_at", "timestamp", "latest push-signal claim (any host) not yet scored by "
                                      "a later observation", True),
    C("pending_signal_at", "timestamp", "claimed change time of a TRUSTED push signal newer "
                                        "than our last confirmed copy: P(changed) = 1, jump "
                                        "the queue; null otherwise", True),
    C("importance", "float", "importance weight used"),
    C("lane", "string", "refresh or fast"),
    C("updated_dt", "date", "run date that wrote this row"),
) + tuple(C(name, "float", _STATS_DOC[name[:4]]) for name in _STATS_NAMES) + (
    C("tod_n", "float", "dated changes (trusted Last-Modified or confirmed trusted signal; short "
                        "changed intervals weighted by sinc(length/day)), decayed: the weight of "
                        "the time-of-day evidence (jobs/core/timing.py; null: none yet)", True, False),
    C("tod_cos", "float", "decayed sum of cos(2 pi x time of day) of those changes", True, False),
    C("tod_sin", "float", "decayed sum of sin(2 pi x time of day)", True, False),
    C("tow_cos", "float", "decayed sum of cos(2 pi x time of week, from Monday 00:00 UTC)", True,
      False),
    C("tow_sin", "float", "decayed sum of sin(2 pi x time of week)", True, False),
    C("tod_off_n", "float", "decayed changes seen between two of the page's phase windows of "
                            "the day: >= 0.5 refutes its day rhythm (jobs/core/timing.py, rhythm "
                            "checks; null: none)", True, False),
    C("content_bytes", "int", "bytes of the last 2xx that carried a content hash: the stored "
                              "copy's size, what a 304 of it saves (null: none yet)", True, False),
    C("fingerprint_version", "int32", "`FINGERPRINT_VERSION` of content_hash (docs/fingerprint.md): "
                                      "a fetch of another version re-bases the hash without "
                                      "counting a change; null in a state written before the "
                                      "column: 1, the only version there was (null: no hash)",
      True, False),
    C("signal_unchanged_at", "timestamp", "start of the day a TRUSTED push signal's lastmod, "
                                          "not newer than the confirmed copy, said the copy was "
                                          "still current: the visit rhythm may run from here "
                                          "(signals.max_defer_days); null once a later fetch "
                                          "confirmed the copy, or none", True, False),
))

HOSTS = Contract("hosts", "hosts/dt=YYYY-MM-DD/*.parquet",
                 "Per-host validator trust, signal accuracy and health after the run for dt "
                 "(written by update_state; read by allocate). Evidence columns are counts "
                 "decayed with `trust.half_life_days` / `signals.half_life_days`.", (
    C("host", "string", "the host"),
    C("validator_class", "string", "honest_etag, honest_lm, no_validators, frozen_lm, "
                                   "volatile_etag, frozen_etag or unverified "
                                   "(docs/trust.md)"),
    C("trust_etag", "bool", "304s answering If-None-Match are counted as unchanged"),
    C("trust_lm", "bool", "304s answering If-Modified-Since are counted as unchanged and "
                          "Last-Modified dates changes"),
    C("audit_wanted", "bool", "the host's 304s are trusted, so some of its fetches must be "
                              "full (audits) to keep re-earning that trust"),
    C("ev_200", "float", "2xx responses"),
    C("ev_304", "float", "304 responses"),
    C("ev_304_ignored", "float", "304s not counted as evidence (host not trusted)"),
    C("ev_compared", "float", "2xx whose hash could be compared with the stored one"),
    C("ev_etag_seen", "float", "2xx carrying an ETag"),
    C("ev_lm_seen", "float", "2xx carrying a Last-Modified"),
    C("ev_etag_agree_chg", "float", "content changed and ETag moved"),
    C("ev_etag_agree_same", "float", "content same and ETag same"),
    C("ev_etag_frozen", "float", "content changed but ETag same (a 304 would lie)"),
    C("ev_etag_volatile", "float", "content same but ETag moved"),
    C("ev_lm_agree_chg", "float", "content changed and Last-Modified moved"),
    C("ev_lm_agree_same", "float", "content same and Last-Modified same"),
    C("ev_lm_frozen", "float", "content changed but Last-Modified same (frozen LM)"),
    C("ev_lm_volatile", "float", "content same but Last-Modified moved"),
    C("ev_sig_received", "float", "push signals received for known URLs"),
    C("ev_sig_correct", "float", "scored claims confirmed by a change"),
    C("ev_sig_wrong", "float", "scored claims followed by no change"),
    C("signal_accuracy", "float", "(correct + 1) / (correct + wrong + 2)"),
    C("signal_trusted", "bool", "signals set pending_signal_at and date changes"),
    C("fetches_today", "int", "fetch attempts in dt's logs"),
    C("timeouts_today", "int", "status 0 (network error or timeout)"),
    C("errors_5xx_today", "int", "status 5xx"),
    C("throttled_429_today", "int", "status 429"),
    C("throttled_today", "int", "status 429 or 503 (the host asked us to slow down)", True,
      False),
    C("error_rate_today", "float", "(0 + 5xx + 429) / fetches", True),
    C("mean_latency_ms_today", "float", "mean elapsed_ms", True),
    C("nominal_cap", "float", "the politeness cap N (visits/day: crawl delay and "
                              "max_fetches_per_day) the limit was judged against", True, False),
    C("rate_limit", "float", "served-rate limit L (visits/day) for the next plan, learned from "
                             "what the host served (jobs/core/host_health.py)", True, False),
    C("served_ceiling", "float", "fetches the host served on its last bad day (null: none yet)",
      True, False),
    C("probe_step", "float", "the next additive step above the served ceiling (visits/day)",
      True, False),
    C("latency_baseline_ms", "float", "smoothed mean elapsed_ms of judged days", True, False),
    C("health_verdict", "string", "bad, grown (a tested day: asked for 90 % of the limit, or "
                                  "every fetch answered), untested or unjudged (the day's "
                                  "verdict)", True, False),
    C("probe_due", "bool", "the limit is a probe above the served ceiling and below the nominal "
                           "cap: the next plan's capped visits to the host come first in the "
                           "day's budget cut, so the probe is tested", True, False),
    C("blocked_until", "timestamp", "no fetch before this instant: the latest Retry-After of a "
                                    "429/503 that reaches into the next window", True, False),
    C("cap_factor", "float", "in [0, 1]: multiply the host's daily cap by it: L / N x the share "
                             "of the next window it is not blocked for (`[health]`)"),
    C("urls_known", "int", "URLs of the host in state"),
    C("updated_dt", "date", "run date that wrote this row"),
))

PLAN = Contract("plan", "plan/dt=YYYY-MM-DD/*.parquet",
                "One row per page allocate planned for the 24 h from D+1 00:00 UTC (known URLs "
                "and frontier URLs): its planned rate, lane and the reason for the rate "
                "(written by allocate, a committed partition kept as long as state; "
                "example queries: docs/queries.md).", (
    C("url", "string", "the URL"),
    C("host", "string", "its host"),
    C("lane", "string", "refresh, fast or discovery (gone pages: refresh)"),
    C("reason", "string", "why the page gets its rate: gone_recheck, discovery, "
                          "discovery_deferred, push_signal, signal_not_worth, fast_lane, "
                          "host_cap, min_rate, max_rate, timed, multiplier, policy, or an "
                          "operator override: override_pin, override_pin_capped, "
                          "override_force, override_pause (jobs/core/plan_table.py)"),
    C("planned_rate", "float", "planned visits per day"),
    C("visits", "int", "candidate visits in the window after the host cap, before the budget "
                       "cut (the schedule holds the ones that survived it)"),
    C("audit", "bool", "one of the visits is a measurement-only audit fetch"),
    C("cap_binds", "bool", "the host's daily cap binds (due visits cut, or its rates sum to it)"),
    C("host_cap", "int", "the host's daily cap (visits/day, after cap_factor)"),
    C("importance", "float", "importance weight used (frontier: filled by the host prior)"),
    C("lambda_hat", "float", "change rate used, changes per day (0 for frontier URLs)"),
    C("marginal_value", "float", "objective gained per extra visit/day at the planned rate "
                                 "(policy optimal; compare with metrics.refresh_marginal_value, "
                                 "the day's multiplier); null otherwise", True),
    C("last_success_at", "timestamp", "last 2xx/304 fetch", True),
    C("p_stale_now", "float", "P(the page changed since stale_since_at) at D+1 00:00 UTC: "
                              "1 - exp(-lambda_hat x days since stale_since_at); 1 without "
                              "a confirmed copy"),
    C("stale_since_at", "timestamp", "the instant p_stale_now counts from: last_success_at "
                                     "where the host's 304s are trusted, else state's "
                                     "last_known_at (the last full fetch with a hash, or a "
                                     "trusted 304); null: no confirmed copy", True, False),
))

SCHEDULE = Contract("schedules", "schedules/dt=D+1/shard-NNNNN-<sha12>.parquet",
                    "Per-host fetch schedule for the 24 h from D+1 00:00 UTC; each host lies in "
                    "exactly one shard file.", (
    C("host", "string", "host; all of a host's rows are in one file"),
    C("url", "string", "URL to fetch"),
    C("not_before", "timestamp", "earliest fetch time (UTC); a host's rows are >= crawl delay apart"),
    C("lane", "string", "refresh, fast, discovery or audit (a measurement-only full fetch of the "
                        "freshness audit sample: log it with lane `audit`, never replace the "
                        "indexed copy with it)"),
    C("method", "string", "conditional or full"),
    C("if_none_match", "string", "If-None-Match value (validated ETag)", True),
    C("if_modified_since", "string", "If-Modified-Since value (validated HTTP-date)", True),
    C("priority", "float", "importance x P(changed); higher goes first"),
    C("p_changed", "float", "P(changed since the last confirmed copy: plan.stale_since_at) at "
                            "not_before"),
    C("crawl_delay_s", "float", "the host's crawl delay the rows were placed with (seconds; "
                                "the same on every row of a host): keep it between requests"),
    C("expires_at", "timestamp", "when the row must no longer be used (UTC): the end of the "
                                 "plan's window, D+2 00:00"),
))

QUARANTINE = Contract("quarantine", "quarantine/dt=YYYY-MM-DD/*.parquet",
                      "Input rows that failed validation, with the reason; never dropped silently.", (
    C("source", "string", "input table"),
    C("reason", "string", "null_url, url_too_long, bad_url, url_userinfo, host_mismatch, "
                          "null_fetched_at, future_fetched_at, late_fetched_at, "
                          "stale_fetched_at, bad_status, negative_bytes, bad_importance, "
                          "null_host, bad_host, bad_crawl_delay, bad_max_fetches, "
                          "null_signaled_at, future_signaled_at, bad_signaled_at, bad_source, "
                          "bad_action, missing_url, missing_host, bad_visits_per_day, "
                          "missing_until, missing_created_at, duplicate_override; source "
                          "`documents` (`recrawl intake`): bad_kind, body_too_large, bad_gzip, "
                          "not_xml, xml_forbidden, not_a_sitemap, not_a_feed, too_many_urls, "
                          "bad_robots_url, bad_crawl_delay, unparsable_document, "
                          "cross_host_url, bad_lastmod, future_lastmod "
                          "(docs/contract.md)"),
    C("url", "string", "the row's url", True),
    C("row_json", "string", "the whole row as JSON"),
))

from jobs.core.budget_factors import (  # noqa: E402  (the curve's columns, stdlib only)
    AGE_COLUMNS as _CURVE_AGE, FACTORS as _CURVE_FACTORS, FRESHNESS_COLUMNS as _CURVE_FRESHNESS)

METRICS = Contract("metrics", "metrics/dt=YYYY-MM-DD/*.parquet",
                   "One row of run figures per date with state (jobs/metrics.py). State columns "
                   "come from that day's update_state or rebuild_state; plan columns are null "
                   "on a day nothing was planned for.", (
    C("dt", "date", "run date"),
    C("written_by", "string", "the job that wrote the row: `update_state` or `rebuild_state` "
                              "(state figures; plan columns kept from the day's row, else null), "
                              "`build_schedule` (the whole row)", True, False),
    C("policy", "string", "refresh policy (plan)", True),
    C("urls_known", "int", "URLs in state"),
    C("urls_gone", "int", "URLs confirmed gone"),
    C("log_rows", "int", "fetch-log rows read"),
    C("quarantined_rows", "int", "input rows quarantined (all tables)"),
    C("budget", "int", "daily fetch budget (plan)", True),
    C("planned_total", "int", "schedule rows (plan)", True),
    C("planned_refresh", "int", "refresh-lane rows (plan)", True),
    C("planned_fast", "int", "fast-lane rows (plan)", True),
    C("planned_discovery", "int", "discovery-lane rows (plan)", True),
    C("planned_backfill", "int", "refresh rows pulled forward from the next day because fewer "
                                 "visits were due than the budget (`lanes.backfill_horizon_days`; "
                                 "counted in planned_refresh)", True, False),
    C("due_total", "int", "visits due in the window before budget and host caps (plan)", True),
    C("carried_over", "int", "due visits that did not fit (budget or host cap) (plan)", True),
    C("hosts", "int", "hosts in the schedule (plan)", True),
    C("expected_freshness", "float", "importance-weighted expected freshness of known URLs "
                                     "under the planned rates (plan)", True),
    C("audit_freshness", "float", "share of audit-lane fetches that found our copy "
                                  "current (achieved freshness)", True, False),
    C("audit_freshness_lo", "float", "lower end of its Wilson interval (`audit.level`)", True,
      False),
    C("audit_freshness_hi", "float", "upper end of its Wilson interval", True, False),
    C("audit_n", "int", "audit-lane fetches scored (fetch-log rows with lane `audit`, status "
                        "200, a content hash and a stored baseline hash)", True, False),
    C("planned_audit", "int", "audit-sample full fetches in the schedule (lane `audit`)", True,
      False),
    C("audit_conversions", "int", "conditional visits on `audit_wanted` hosts turned into full "
                                  "fetches (at most `budget.audit_share` x budget)", True, False),
    C("signals_pending", "int", "URLs with a trusted push signal newer than their last fetch",
      True, False),
    C("budget_split", "string", "`budget.split`: fixed or auto", True, False),
    C("fast_budget", "int", "visits planned for the fast lane", True, False),
    C("discovery_budget", "int", "visits given to discovery (the chosen split)", True, False),
    C("refresh_budget", "float", "visits/day the refresh solve spent", True, False),
    C("refresh_marginal_value", "float", "refresh's value of one more visit/day: the multiplier "
                                         "mu (policy optimal)", True, False),
    C("discovery_marginal_value", "float", "value of the last discovery fetch: importance x "
                                           "`lanes.discovery_value_days`", True, False),
    C("policy_level", "float", "the refresh policy's global level (mu for optimal)", True, False),
    C("floors_affordable", "bool", "false when the budget cannot pay every page's cap interval "
                                   "(solved with no floor)", True, False),
    C("expected_freshness_fast", "float", "expected freshness of fast-lane URLs", True, False),
    C("expected_freshness_refresh", "float", "expected freshness of refresh-lane URLs", True,
      False),
    C("spark_passes", "int", "passes over the page table made by allocate", True, False),
    C("crawl_delay_raised", "int", "host_policy hosts whose crawl delay was raised to "
                                   "`politeness.min_crawl_delay_s`", True, False),
    C("crawl_delay_lowered", "int", "host_policy hosts whose crawl delay was lowered to "
                                    "`politeness.max_crawl_delay_s`", True, False),
    C("hosts_limited", "int", "hosts under a served-rate limit below their politeness cap "
                              "for the next plan (hosts.rate_limit < nominal_cap)", True, False),
    C("hosts_blocked", "int", "hosts a Retry-After keeps out of part of the next window", True,
      False),
    C("host_fetches", "int", "fetch attempts in the day's logs", True, False),
    C("host_errors", "int", "of which status 0, 5xx or 429 (error rate: host_errors / "
                            "host_fetches)", True, False),
    C("host_throttled", "int", "of which 429 or 503", True, False),
    C("capacity_withheld", "int", "visits/day the plan's health cuts (limits and waits) took "
                                  "from the hosts at the day's level: their rates under the "
                                  "politeness cap alone minus those they got (budget moved to "
                                  "other hosts)", True, False),
    C("fetches_folded", "int", "the day's fetches of known URLs, audits aside (the budget "
                               "the previous plan spent)", True, False),
    C("fetches_304", "int", "of which answered 304 Not Modified (304 share: fetches_304 / "
                            "fetches_folded)", True, False),
    C("fetches_unchanged", "int", "of which found the page unchanged (a 2xx with the stored "
                                  "hash, or a trusted 304): budget spent on pages that turned "
                                  "out unchanged", True, False),
    C("bytes_saved_304", "int", "bytes the 304s saved: the stored copy's size "
                                "(state.content_bytes) less the 304's own bytes, summed", True,
      False),
    C("fetches_rebased", "int", "of which were 2xx whose fingerprint_version differed from the "
                                "stored hash's: the hash re-based, no change counted "
                                "(docs/fingerprint.md)", True, False),
    C("expected_age_days", "float", "importance-weighted expected age (days) of known URLs' "
                                    "copies under the planned rates (Poisson; plan)", True, False),
    C("days_per_pass", "float", "urls_known / budget: days the day's budget takes to visit "
                                "every known URL once (plan)", True, False),
    C("budget_per_url", "float", "budget / urls_known: visits per known URL per day (plan)",
      True, False),
    C("signal_deferred", "int", "known pages whose visit a trusted signal's 'no change since the "
                                "copy' moved later (signals.max_defer_days; plan)", True, False),
    C("signal_urls_discovered", "int", "URLs in neither state nor the frontier that today's "
                                       "signals put in the discovery lane (plan)", True, False),
    C("signal_urls_not_discovered", "int", "such URLs left out: their host's signals are not "
                                           "admitted by signals.discover_from (plan)", True, False),
) + tuple(
    C(col, "float", f"what-if curve: expected_freshness at {factor:g} x budget, the extra or "
                    "missing visits priced by the policy at the level that spends them, same "
                    "caps, side lanes and floors (jobs/core/budget_curve.py; null: floors not "
                    "affordable there)", True, False)
    for factor, col in zip(_CURVE_FACTORS, _CURVE_FRESHNESS)
) + tuple(
    C(col, "float", f"what-if curve: expected_age_days at {factor:g} x budget", True, False)
    for factor, col in zip(_CURVE_FACTORS, _CURVE_AGE)
) + (
    C("config_json", "string", "the config that produced the run"),
))

CONTRACTS = {c.name: c for c in (FETCH_LOG, IMPORTANCE, HOST_POLICY, SIGNALS, FRONTIER, OVERRIDES,
                                 STATE, HOSTS, PLAN, SCHEDULE, QUARANTINE, METRICS,
                                 DOCUMENTS, DOCUMENT_REFS)}


def markdown() -> str:
    out = []
    for c in CONTRACTS.values():
        out += [f"### `{c.layout}`", "", c.doc, "", "| column | type | nullable | required | meaning |",
                "|---|---|---|---|---|"]
        for col in c.columns:
            out.append(f"| `{col.name}` | {col.kind} | {'yes' if col.nullable else 'no'} | "
                       f"{'yes' if col.required else 'no'} | {col.doc} |")
        out.append("")
    return "\n".join(out)


PAGE_HEAD = """# Tables

Every table recrawl reads or writes: its layout, columns, types and what each column means.
Generated from `jobs/schemas.py` (`python -m jobs.schemas --markdown > docs/tables.md`); the
rules around them (dates, bad input, canonical URLs, snapshots, schedules) are in
[contract.md](contract.md).

"""


if __name__ == "__main__":
    if sys.argv[1:] == ["--markdown"]:
        print(PAGE_HEAD + markdown())
    else:
        print("usage: python -m jobs.schemas --markdown")
