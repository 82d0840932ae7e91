"""Parameters of the synthetic web: one frozen dataclass, validated on creation."""
from __future__ import annotations

import datetime as dt
import ast
from dataclasses import dataclass, fields

VALIDATOR_CLASSES = ("honest", "lm_only", "none", "frozen_lm", "volatile_etag")
PROCESS_KINDS = ("poisson", "daily", "bursty", "weekly")
SIGNAL_CLASSES = ("none", "accurate", "stale")
SIGNAL_SOURCES = ("sitemap", "feed", "websub", "indexnow")
SECTIONS = ("news", "blog", "docs", "shop", "forum", "tag", "archive", "product")


def _check_shares(name: str, shares: tuple, n: int) -> None:
    if len(shares) != n or any(s < 0 for s in shares) or abs(sum(shares) - 1.0) > 1e-9:
        raise ValueError(f"{name} must be {n} non-negative shares summing to 1, got {shares}")


def _check_range(name: str, rng: tuple, low: float = 0.0) -> None:
    if len(rng) != 2 or not (low <= rng[0] <= rng[1]):
        raise ValueError(f"{name} must be (lo, hi) with {low} <= lo <= hi, got {rng}")


@dataclass(frozen=True)
class WebParams:
    """Every knob of the synthetic web. Rates are per day, times in days.

    Attributes
    ----------
    n_urls, n_hosts : int
        Pages alive at day 0 and number of hosts (each host has ≥ 2 pages:
        its front page ``/`` and ``/feed``).
    seed : int
        Root seed; the same parameters always give the same web.
    start : str
        ISO date (UTC midnight) of simulation day 0.
    hosts_per_shard : int
        Hosts per independent random stream; shards can be built alone, which
        is how the generator streams a large web. Changing it changes the web.
    host_size_sigma : float
        Lognormal spread of pages per host (heavy-tailed host sizes).
    crawl_delay_range : (float, float)
        Seconds; delays are Pareto-distributed from lo, clipped at hi.
    max_fetches_share : float
        Share of hosts with a ``max_fetches_per_day`` cap.
    max_fetches_per_page : (float, float)
        A capped host allows U(lo, hi) × its page count fetches a day (≥ 10).
    validator_shares : tuple of 5 floats
        Shares of hosts per class in ``VALIDATOR_CLASSES``.
    process_shares : tuple of 4 floats
        Shares of ordinary pages per change process in ``PROCESS_KINDS``; a 3-tuple (the
        kinds before "weekly") is padded with a weekly share of 0.
    never_share : float
        Share of Poisson pages that never change (λ = 0).
    lam_range, lam_front_range : (float, float)
        Log-uniform λ of Poisson pages, and of front pages and feeds.
    section_lam_sigma : float
        Lognormal spread of a per-(host, section) λ multiplier, so that path
        templates carry information about change rates.
    daily_publish_prob : (float, float)
        Daily pages publish on a given day with a probability drawn from this range.
    weekly_publish_prob : (float, float)
        Weekly pages publish on their weekday with a probability p drawn from this range
        (long-run rate p/7 a day).
    burst_on_rate_range : (float, float)
        λ while a bursty page is "on".
    burst_to_on, burst_to_off : float
        Switching rates off→on and on→off of bursty pages.
    importance_sigma, importance_rate_corr : float
        Log-importance spread and its correlation with log change rate.
    front_importance_boost : float
        Importance multiplier of front pages and feeds.
    death_rate, gone_share : float
        Page death hazard; share of dead pages answering 410 rather than 404.
    birth_rate : float
        New pages per day per page alive at day 0 of the same shard.
    discovery_delay_mean : float
        Mean days from a page's birth to its appearance in the frontier.
    signal_shares : tuple of 3 floats
        Shares of hosts per class in ``SIGNAL_CLASSES``.
    signal_coverage : float
        Share of real changes an accurate host announces.
    stale_signal_rate : float
        Per page per day chance that a stale host announces a change that did not happen.
    error_rate : float
        Share of requests failing with a network error (status 0) or 5xx.
    quota_host_share : float
        Share of hosts with at least ``health_min_pages`` pages that silently serve a hidden
        daily quota of U(``quota_per_page``) × their pages requests (at least 5): beyond it
        they answer 503 without Retry-After, and they slow down as the day's count nears it.
    quota_per_page : (float, float)
        A quota host's hidden quota per page and day.
    quota_recover_share, quota_recover_day : float, int
        Share of quota hosts that lift their quota (recover) from web day ``quota_recover_day``
        on (-1: never).
    throttle_host_share : float
        Share of hosts with at least ``health_min_pages`` pages that answer 429 with
        ``Retry-After: <seconds>`` to a request sooner than a hidden interval of
        U(``throttle_interval_s``) seconds after the previous one.
    throttle_interval_s : (float, float)
        The hidden interval's range, seconds.
    health_min_pages : int
        Hosts this small are never quota or throttle hosts.
    page_bytes_median : float
        Median body size in bytes.
    keep_days : int
        Day windows of change times kept in memory (queries older fail).
    own_hour_share : float
        Share of daily and weekly publishers that publish at their own hour of day, drawn
        U(5 h, 20 h) per page, rather than at their host's hour (± 15 min).
    publish_jitter_min : float
        Standard deviation, minutes, of a publisher's day-to-day deviation from its hour.
    hour_move_share : float
        Share of daily publishers that move to a new hour (U(5 h, 20 h)) once, on a web day
        drawn U(``hour_move_day``).
    hour_move_day : (float, float)
        Range of the day a moving publisher moves its hour.
    editions_share : float
        Share of daily publishers with 2 or 3 (even odds) fixed editions a day, ``edition_gap_h``
        apart, each published with the page's daily probability.
    edition_gap_h : (float, float)
        Hours between consecutive editions, drawn per page.
    weekday_only_share : float
        Share of daily publishers that never publish on Saturday or Sunday.

    The last seven draw from their own hash stream (``lab.sim.rand.RHYTHM``), and at their
    defaults no code path of theirs runs: the web is exactly the one without them.
    """

    n_urls: int = 20_000
    n_hosts: int = 200
    seed: int = 0
    start: str = "2024-01-01"
    hosts_per_shard: int = 16
    host_size_sigma: float = 1.2
    crawl_delay_range: tuple = (1.0, 60.0)
    max_fetches_share: float = 0.3
    max_fetches_per_page: tuple = (0.3, 2.0)
    validator_shares: tuple = (0.45, 0.2, 0.15, 0.1, 0.1)
    process_shares: tuple = (0.7, 0.15, 0.15, 0.0)
    never_share: float = 0.2
    lam_range: tuple = (1e-3, 50.0)
    lam_front_range: tuple = (5.0, 50.0)
    section_lam_sigma: float = 1.0
    daily_publish_prob: tuple = (0.5, 1.0)
    weekly_publish_prob: tuple = (0.7, 1.0)
    burst_on_rate_range: tuple = (5.0, 50.0)
    burst_to_on: float = 0.2
    burst_to_off: float = 2.0
    importance_sigma: float = 1.5
    importance_rate_corr: float = 0.5
    front_importance_boost: float = 20.0
    death_rate: float = 0.002
    gone_share: float = 0.2
    birth_rate: float = 0.003
    discovery_delay_mean: float = 0.3
    signal_shares: tuple = (0.6, 0.3, 0.1)
    signal_coverage: float = 0.8
    stale_signal_rate: float = 0.05
    error_rate: float = 0.01
    quota_host_share: float = 0.0
    quota_per_page: tuple = (0.1, 0.3)
    quota_recover_share: float = 0.0
    quota_recover_day: int = -1
    throttle_host_share: float = 0.0
    throttle_interval_s: tuple = (120.0, 600.0)
    health_min_pages: int = 50
    page_bytes_median: float = 30_000.0
    keep_days: int = 3
    own_hour_share: float = 0.0
    publish_jitter_min: float = 5.0
    hour_move_share: float = 0.0
    hour_move_day: tuple = (7.0, 28.0)
    editions_share: float = 0.0
    edition_gap_h: tuple = (3.0, 8.0)
    weekday_only_share: float = 0.0

    def __post_init__(self):
        if self.n_hosts < 1 or self.n_urls < 2 * self.n_hosts:
            raise ValueError(f"need n_hosts >= 1 and n_urls >= 2*n_hosts, got "
                             f"n_urls={self.n_urls}, n_hosts={self.n_hosts}")
        if self.seed < 0:
            raise ValueError("seed must be >= 0")
        if self.hosts_per_shard < 1 or self.keep_days < 1:
            raise ValueError("hosts_per_shard and keep_days must be >= 1")
        dt.date.fromisoformat(self.start)  # raises on a malformed date
        _check_shares("validator_shares", self.validator_shares, len(VALIDATOR_CLASSES))
        if len(self.process_shares) == len(PROCESS_KINDS) - 1:  # callers from before "weekly"
            object.__setattr__(self, "process_shares", (*self.process_shares, 0.0))
        _check_shares("process_shares", self.process_shares, len(PROCESS_KINDS))
        _check_shares("signal_shares", self.signal_shares, len(SIGNAL_CLASSES))
        _check_range("crawl_delay_range", self.crawl_delay_range)
        _check_range("max_fetches_per_page", self.max_fetches_per_page)
        _check_range("lam_range", self.lam_range, 1e-12)
        _check_range("lam_front_range", self.lam_front_range, 1e-12)
        _check_range("burst_on_rate_range", self.burst_on_rate_range, 1e-12)
        _check_range("quota_per_page", self.quota_per_page, 1e-9)
        _check_range("throttle_interval_s", self.throttle_interval_s, 1e-3)
        if self.quota_recover_day < -1 or self.health_min_pages < 2:
            raise ValueError("quota_recover_day must be >= -1 and health_min_pages >= 2")
        _check_range("hour_move_day", self.hour_move_day)
        _check_range("edition_gap_h", self.edition_gap_h, 1e-3)
        if self.edition_gap_h[1] > 12.0:
            raise ValueError("edition_gap_h must lie in (0, 12] hours")
        _check_range("daily_publish_prob", self.daily_publish_prob)
        _check_range("weekly_publish_prob", self.weekly_publish_prob)
        for name in ("max_fetches_share", "never_share", "gone_share", "signal_coverage",
                     "stale_signal_rate", "error_rate", "importance_rate_corr",
                     "quota_host_share", "quota_recover_share", "throttle_host_share",
                     "own_hour_share", "hour_move_share", "editions_share",
                     "weekday_only_share"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"{name} must lie in [0, 1]")
        if self.quota_host_share + self.throttle_host_share > 1.0:
            raise ValueError("quota_host_share + throttle_host_share must be <= 1")
        for name in ("daily_publish_prob", "weekly_publish_prob"):
            if getattr(self, name)[1] > 1.0:
                raise ValueError(f"{name} must lie in [0, 1]")
        for name in ("host_size_sigma", "section_lam_sigma", "burst_to_on", "burst_to_off",
                     "importance_sigma", "front_importance_boost", "death_rate", "birth_rate",
                     "discovery_delay_mean", "page_bytes_median", "publish_jitter_min"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0")

    @property
    def start_date(self) -> dt.date:
        """Day 0 as a date."""
        return dt.date.fromisoformat(self.start)

    @property
    def start_epoch_s(self) -> int:
        """Unix seconds of day 0, midnight UTC."""
        return int(dt.datetime.combine(self.start_date, dt.time(), dt.timezone.utc).timestamp())

    @property
    def n_shards(self) -> int:
        """Number of host shards."""
        return -(-self.n_hosts // self.hosts_per_shard)

    def day_index(self, day) -> int:
        """Day number of ``day`` (an int, a date or an ISO string) relative to ``start``."""
        if isinstance(day, (int,)) and not isinstance(day, bool):
            return int(day)
        if isinstance(day, str):
            day = dt.date.fromisoformat(day)
        if isinstance(day, dt.datetime):
            day = day.date()
        if not isinstance(day, dt.date):
            raise TypeError(f"day must be int, date or ISO string, got {type(day).__name__}")
        return (day - self.start_date).days

    def date_of(self, day: int) -> dt.date:
        """Calendar date of day number ``day``."""
        return self.start_date + dt.timedelta(days=int(day))

    def weekday_of(self, day):
        """``date.weekday()`` (Monday 0) of day number(s) ``day``: the day a weekly page
        publishes when it equals the page's ``weekday``."""
        return (self.start_date.weekday() + day) % 7


#: The family of webs the backtest is judged on: named ``--web`` settings, chosen before any
#: tuning of the planner on them (lab/README.md, "The family of webs"). ``r20`` is the web of
#: the run of record; the others move the rhythm knobs of daily and weekly publishers within
#: own_hour_share 0-1, publish_jitter_min 5-90, daily_publish_prob (0.3-0.5, 0.8-1.0),
#: hour_move_share 0-0.3, editions_share 0-0.3, weekday_only_share 0-0.3.
WEB_FAMILY = {
    "r20": (),
    "own-hours": ("own_hour_share=1.0",),
    "own-sparse": ("own_hour_share=1.0", "daily_publish_prob=(0.3, 0.8)",
                   "publish_jitter_min=20.0"),
    "jitter": ("own_hour_share=0.5", "publish_jitter_min=90.0"),
    "editions": ("own_hour_share=0.5", "editions_share=0.3", "weekday_only_share=0.3"),
    "movers": ("own_hour_share=0.5", "hour_move_share=0.3", "publish_jitter_min=30.0"),
    "mixed": ("own_hour_share=0.7", "publish_jitter_min=45.0", "daily_publish_prob=(0.4, 0.9)",
              "hour_move_share=0.15", "editions_share=0.15", "weekday_only_share=0.15"),
}


def family_web(name: str) -> tuple:
    """The ``name=value`` overrides of the family's web ``name`` (:data:`WEB_FAMILY`)."""
    if name not in WEB_FAMILY:
        raise ValueError(f"web family {name!r}: expected one of {sorted(WEB_FAMILY)}")
    return WEB_FAMILY[name]


def web_overrides(pairs) -> dict:
    """``name=value`` strings (e.g. ``quota_host_share=0.1``, ``quota_per_page=(0.1, 0.2)``)
    as WebParams keyword arguments: the name must be a field, the value a Python literal of
    the field's type (an int is accepted for a float). ``WebParams`` validates the values."""
    kinds = {f.name: type(f.default) for f in fields(WebParams)}
    out = {}
    for pair in pairs:
        name, sep, text = str(pair).partition("=")
        name = name.strip()
        if not sep or name not in kinds:
            raise ValueError(f"web override {pair!r}: expected name=value with name one of "
                             f"{sorted(kinds)}")
        try:
            value = ast.literal_eval(text.strip())
        except (ValueError, SyntaxError) as exc:
            raise ValueError(f"web override {pair!r}: not a literal ({exc})") from None
        want = kinds[name]
        if want is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if type(value) is not want:
            raise ValueError(f"web override {pair!r}: {name} takes a {want.__name__}, got "
                             f"{type(value).__name__}")
        out[name] = value
    return out
