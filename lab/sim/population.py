"""Hosts and pages of the synthetic web: attribute draws, no time evolution."""
from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

from lab.sim.params import SECTIONS, WebParams
from lab.sim.rand import (HEALTH, HOSTS, RHYTHM, WEEKLY as WEEKLY_STREAM, mix64, stream,
                           uniform)

FRONT, FEED = -1, -2  # section codes of the two pages every host has
POISSON, DAILY, BURSTY, WEEKLY = 0, 1, 2, 3  # indices into PROCESS_KINDS
HONEST, LM_ONLY, NONE, FROZEN_LM, VOLATILE_ETAG = range(5)
SIG_NONE, SIG_ACCURATE, SIG_STALE = range(3)
_SLUGS = ("update", "review", "guide", "story", "item", "note", "report", "page", "post", "offer")


@dataclass
class Hosts:
    """Host attributes, indexed by global host number (0-based)."""

    name: np.ndarray            # object: "h0001.example.com"
    size: np.ndarray            # pages at day 0
    crawl_delay_s: np.ndarray
    max_fetches: np.ndarray     # int64, -1 where uncapped
    validator: np.ndarray       # int8 index into VALIDATOR_CLASSES
    signal_class: np.ndarray    # int8 index into SIGNAL_CLASSES
    signal_source: np.ndarray   # int8 index into SIGNAL_SOURCES
    frozen_lm_day: np.ndarray   # day number of the frozen Last-Modified
    sections: np.ndarray        # (H, len(SECTIONS)) bool: sections the host uses
    section_mult: np.ndarray    # (H, len(SECTIONS)) λ multiplier per section
    publish_hour: np.ndarray    # hour of day daily pages publish
    shard: np.ndarray
    # Hidden server health (never published in host_policy): see make_health.
    quota: np.ndarray = None            # int64 requests/day answered, -1 where none
    quota_until: np.ndarray = None      # web day the quota is lifted (inf: never)
    throttle_s: np.ndarray = None       # seconds between requests below which: 429, 0: none


def make_hosts(p: WebParams) -> Hosts:
    """Draw every host's attributes from the host stream of ``p.seed``."""
    rng = stream(p.seed, HOSTS)
    h = p.n_hosts
    weights = rng.lognormal(0.0, p.host_size_sigma, h)
    extra = p.n_urls - 2 * h
    raw = weights / weights.sum() * extra
    size = np.floor(raw).astype(np.int64)
    # Largest remainders get the leftover pages so sizes sum exactly to n_urls.
    leftover = extra - int(size.sum())
    size[np.argsort(-(raw - size), kind="stable")[:leftover]] += 1
    size += 2
    lo, hi = p.crawl_delay_range
    delay = np.minimum(lo * (1.0 + rng.pareto(1.2, h)), hi)
    delay = np.round(np.maximum(delay, lo), 1)
    capped = rng.random(h) < p.max_fetches_share
    cap_factor = rng.uniform(*p.max_fetches_per_page, h)
    max_fetches = np.where(capped, np.maximum(10, np.round(size * cap_factor)), -1).astype(np.int64)
    validator = rng.choice(len(p.validator_shares), h, p=p.validator_shares).astype(np.int8)
    signal_class = rng.choice(len(p.signal_shares), h, p=p.signal_shares).astype(np.int8)
    signal_source = rng.choice(4, h, p=[0.5, 0.25, 0.1, 0.15]).astype(np.int8)
    frozen_lm_day = -rng.uniform(30.0, 1000.0, h)
    n_sec = rng.integers(1, 6, h)
    order = np.argsort(rng.random((h, len(SECTIONS))), axis=1)
    sections = order < n_sec[:, None]
    section_mult = rng.lognormal(0.0, p.section_lam_sigma, (h, len(SECTIONS)))
    publish_hour = rng.uniform(5.0, 20.0, h)
    width = max(4, len(str(h)))
    name = np.array([f"h{i + 1:0{width}d}.example.com" for i in range(h)], dtype=object)
    hosts = Hosts(name, size, delay, max_fetches, validator, signal_class, signal_source,
                  frozen_lm_day, sections, section_mult, publish_hour,
                  (np.arange(h) // p.hosts_per_shard).astype(np.int32))
    hosts.quota, hosts.quota_until, hosts.throttle_s = make_health(p, size)
    return hosts


def make_health(p: WebParams, size: np.ndarray):
    """Hidden quota and throttle of each host, from their own stream (so a web without them
    draws every other attribute exactly as before they existed).

    Returns (quota, quota_until, throttle_s): a quota host answers at most ``quota`` requests
    a day (-1: no quota) until web day ``quota_until``; a throttle host answers 429 to a
    request sooner than ``throttle_s`` seconds after the previous one (0: none). A host is
    one or the other, and only hosts of at least ``health_min_pages`` pages are either.
    """
    rng = stream(p.seed, HEALTH)
    h = len(size)
    u, u_quota, u_recover, u_throttle = (rng.random(h) for _ in range(4))
    eligible = size >= p.health_min_pages
    is_quota = eligible & (u < p.quota_host_share)
    is_throttle = eligible & ~is_quota & (u < p.quota_host_share + p.throttle_host_share)
    lo, hi = p.quota_per_page
    quota = np.where(is_quota, np.maximum(5, np.round(size * (lo + (hi - lo) * u_quota))), -1)
    recovers = is_quota & (u_recover < p.quota_recover_share) & (p.quota_recover_day >= 0)
    quota_until = np.where(recovers, float(p.quota_recover_day), np.inf)
    lo, hi = p.throttle_interval_s
    throttle_s = np.where(is_throttle, np.round(lo + (hi - lo) * u_throttle), 0.0)
    return quota.astype(np.int64), quota_until, throttle_s


@dataclass
class Pages:
    """Page attributes as parallel arrays; global page id = position."""

    host: np.ndarray
    page_no: np.ndarray
    section: np.ndarray
    url: np.ndarray
    url_key: np.ndarray
    kind: np.ndarray
    lam: np.ndarray          # Poisson λ, daily/weekly publish probability, or bursty on-rate
    lam_eff: np.ndarray      # long-run mean changes per day
    hour: np.ndarray         # daily/weekly pages: publish time of day (fraction of a day)
    importance: np.ndarray
    born: np.ndarray
    dies: np.ndarray
    gone: np.ndarray         # dead page answers 410 (else 404)
    base_bytes: np.ndarray
    last0: np.ndarray        # last change before day 0 (or birth)
    discovered: np.ndarray
    shard: np.ndarray
    burst_on: np.ndarray     # mutable: current state of bursty pages
    weekday: np.ndarray      # weekly pages: publish weekday (date.weekday(), Monday 0), else -1
    # Rhythm knobs of daily publishers (WebParams.own_hour_share and after): see _rhythm_draws.
    editions: np.ndarray = None       # int8 fixed editions a day (1 for every other page)
    edition_gap: np.ndarray = None    # days between editions
    move_day: np.ndarray = None       # web day the page moves to hour2 (inf: never)
    hour2: np.ndarray = None          # its hour from then on
    weekdays_only: np.ndarray = None  # never publishes on Saturday or Sunday

    def __len__(self) -> int:
        return len(self.host)

    @classmethod
    def concat(cls, parts: list["Pages"]) -> "Pages":
        """Concatenate page tables in order."""
        return cls(*(np.concatenate([getattr(q, f.name) for q in parts]) for f in fields(cls)))


def _log_uniform(rng, lo, hi, n):
    return np.exp(rng.uniform(np.log(lo), np.log(hi), n))


def make_pages(p: WebParams, hosts: Hosts, host_ids: np.ndarray, page_no: np.ndarray,
               born: np.ndarray, rng: np.random.Generator) -> Pages:
    """Draw attributes of pages ``page_no`` of hosts ``host_ids`` born at ``born``.

    Page numbers 0 and 1 are the host's front page and feed.
    """
    n = len(host_ids)
    host_ids = host_ids.astype(np.int32)
    page_no = page_no.astype(np.int32)
    # Section: weighted towards the host's first sections (Zipf-like).
    sec_rank = rng.random((n, len(SECTIONS))) ** (1.0 / (1.0 + np.arange(len(SECTIONS))))
    sec_rank = np.where(hosts.sections[host_ids], sec_rank, -1.0)
    section = np.argmax(sec_rank, axis=1).astype(np.int8)
    section = np.where(page_no == 0, FRONT, np.where(page_no == 1, FEED, section)).astype(np.int8)
    special = section < 0
    # A trailing zero share leaves these draws as they were with three kinds.
    kind = rng.choice(len(p.process_shares), n, p=p.process_shares).astype(np.int8)
    kind[special] = POISSON
    mult = hosts.section_mult[host_ids, np.maximum(section, 0)]
    lam_p = np.minimum(_log_uniform(rng, *p.lam_range, n) * mult, p.lam_range[1])
    lam_p[rng.random(n) < p.never_share] = 0.0
    lam_front = _log_uniform(rng, *p.lam_front_range, n)
    prob = rng.uniform(*p.daily_publish_prob, n)
    on_rate = _log_uniform(rng, *p.burst_on_rate_range, n)
    weekday, prob_w = _weekly_draws(p, host_ids, page_no)
    weekday[kind != WEEKLY] = -1
    lam = np.select([special, kind == DAILY, kind == BURSTY, kind == WEEKLY],
                    [lam_front, prob, on_rate, prob_w], lam_p)
    on_share = p.burst_to_on / max(p.burst_to_on + p.burst_to_off, 1e-12)
    lam_eff = np.select([kind == BURSTY, kind == WEEKLY], [lam * on_share, lam / 7.0], lam)
    hour = (hosts.publish_hour[host_ids] + rng.normal(0.0, 0.25, n)) % 24.0 / 24.0
    rhythm = _rhythm_draws(p, host_ids, page_no, kind)
    if rhythm["own"].any():
        hour = np.where(rhythm["own"], rhythm["own_hour"], hour)
    if (rhythm["editions"] > 1).any() or rhythm["weekdays_only"].any():
        lam_eff = lam_eff * rhythm["days_per_day"] * rhythm["editions"]
    # Importance correlates with log λ, standardised by fixed constants so
    # that a page's importance does not depend on which shard it sits in.
    lo, hi = np.log(p.lam_range[0]), np.log(p.lam_range[1])
    z_lam = (np.log(lam_eff + p.lam_range[0]) - (lo + hi) / 2) / max((hi - lo) / np.sqrt(12), 0.5)
    rho = p.importance_rate_corr
    z = rho * z_lam + np.sqrt(1 - rho * rho) * rng.standard_normal(n)
    importance = np.exp(p.importance_sigma * z) * np.where(special, p.front_importance_boost, 1.0)
    with np.errstate(divide="ignore"):
        life = rng.exponential(1.0, n) / p.death_rate if p.death_rate > 0 else np.full(n, np.inf)
    dies = np.where(special, np.inf, np.maximum(born, 0.0) + life)
    gone = rng.random(n) < p.gone_share
    base_bytes = np.maximum(500, rng.lognormal(np.log(p.page_bytes_median), 0.6, n)).astype(np.int64)
    last0 = _last_change_before_day0(p, kind, lam, lam_eff, hour, weekday, born,
                                     rng.exponential(1.0, n))
    discovered = np.where(born < 0, born, born + rng.exponential(p.discovery_delay_mean, n))
    url = np.array([_url(hosts.name[h], s, k) for h, s, k in zip(host_ids, section, page_no)],
                   dtype=object)
    url_key = mix64(p.seed, host_ids, page_no)
    on0 = rng.random(n) < on_share
    return Pages(host_ids, page_no, section, url, url_key, kind, lam, lam_eff, hour, importance,
                 born, dies, gone, base_bytes, last0, discovered, hosts.shard[host_ids],
                 on0 & (kind == BURSTY), weekday, rhythm["editions"].astype(np.int8),
                 rhythm["edition_gap"], rhythm["move_day"], rhythm["hour2"],
                 rhythm["weekdays_only"])


def _rhythm_draws(p: WebParams, host_ids: np.ndarray, page_no: np.ndarray, kind: np.ndarray):
    """The rhythm knobs' per-page draws, from a hash of (seed, page) so that they move no
    other draw of the web: own hour (daily and weekly publishers), and for daily publishers
    a once-moved hour, 2-3 editions a day, weekdays only. Hours are fractions of a day;
    ``days_per_day`` (5/7 for weekday-only pages, else 1) and ``editions`` scale λ_eff."""
    n = len(host_ids)

    def u(k):
        return uniform(p.seed, RHYTHM, host_ids, page_no, k) if n else np.zeros(0)

    publisher = (kind == DAILY) | (kind == WEEKLY)
    daily = kind == DAILY
    own = publisher & (u(0) < p.own_hour_share)
    moves = daily & (u(2) < p.hour_move_share)
    lo, hi = p.hour_move_day
    multi = daily & (u(5) < p.editions_share)
    g_lo, g_hi = p.edition_gap_h
    weekdays_only = daily & (u(8) < p.weekday_only_share)
    return {
        "own": own, "own_hour": (5.0 + 15.0 * u(1)) / 24.0,
        "move_day": np.where(moves, lo + (hi - lo) * u(3), np.inf),
        "hour2": (5.0 + 15.0 * u(4)) / 24.0,
        "editions": np.where(multi, np.where(u(6) < 0.5, 2, 3), 1),
        "edition_gap": (g_lo + (g_hi - g_lo) * u(7)) / 24.0,
        "weekdays_only": weekdays_only,
        "days_per_day": np.where(weekdays_only, 5.0 / 7.0, 1.0),
    }


def _last_change_before_day0(p: WebParams, kind, lam, lam_eff, hour, weekday, born,
                             exp1) -> np.ndarray:
    """Each page's last change before day 0 (its birth when it has none since), as its own
    process would have placed it: what the first fetch's Last-Modified says.

    A Poisson (and, at its long-run rate, a bursty) page's age at day 0 is Exp(λ); a daily
    publisher last published k ~ Geometric(p) days back at its hour, a weekly one on its
    weekday k ~ Geometric(p) weeks back. ``exp1`` (one Exp(1) draw per page) gives each of
    them, so no other draw of the web moves. (Until this was written, every page born before
    day 0 read as unchanged since its birth, up to 1,000 days: a static web to anyone who
    read its Last-Modified, whatever its rate.)"""
    changes = lam_eff > 0
    with np.errstate(divide="ignore"):
        poisson_age = exp1 / np.where(changes, lam_eff, 1.0)
        # Geometric(q) on {1, 2, ...} from the same draw: ceil(E / -log(1 - q)).
        tries = np.maximum(np.ceil(exp1 / -np.log1p(-np.clip(lam, 0.0, 1.0))), 1.0)
    days_back_to_weekday = (p.weekday_of(-1) - weekday) % 7 + 1   # its last one before day 0
    age = np.select(
        [kind == DAILY, kind == WEEKLY],
        [tries - hour, days_back_to_weekday + 7.0 * (tries - 1.0) - hour],
        poisson_age)
    return np.where((born < 0) & changes, np.maximum(born, -age), born)


def _weekly_draws(p: WebParams, host_ids: np.ndarray, page_no: np.ndarray):
    """Weekday and publish probability of weekly pages, from a hash of (seed, page) rather
    than ``rng``, so that adding the kind left every earlier draw of the web unchanged."""
    weekday = np.floor(uniform(p.seed, WEEKLY_STREAM, host_ids, page_no, 0) * 7).astype(np.int8)
    lo, hi = p.weekly_publish_prob
    return weekday, lo + (hi - lo) * uniform(p.seed, WEEKLY_STREAM, host_ids, page_no, 1)


def _url(host: str, section: int, page_no: int) -> str:
    if section == FRONT:
        return f"https://{host}/"
    if section == FEED:
        return f"https://{host}/feed"
    return f"https://{host}/{SECTIONS[section]}/{_SLUGS[page_no % len(_SLUGS)]}-{page_no}"


def initial_pages(p: WebParams, hosts: Hosts, shard: int, rng: np.random.Generator) -> Pages:
    """Pages alive at day 0 on the hosts of ``shard``, born at random past times."""
    first = shard * p.hosts_per_shard
    ids = np.arange(first, min(first + p.hosts_per_shard, p.n_hosts))
    sizes = hosts.size[ids]
    host_ids = np.repeat(ids, sizes)
    starts = np.cumsum(sizes) - sizes
    page_no = np.arange(len(host_ids)) - np.repeat(starts, sizes)
    born = -rng.uniform(1.0, 1000.0, len(host_ids))
    return make_pages(p, hosts, host_ids, page_no, born, rng)
