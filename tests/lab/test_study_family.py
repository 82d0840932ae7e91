"""lab.studies.study_family: a run's daily publishers split by how they keep time."""
import json

from lab.backtest.loop import BacktestSpec
from lab.sim.population import DAILY
from lab.sim.web import SyntheticWeb
from lab.studies.study_family import subkinds


def _run(tmp_path, web):
    spec = {"urls": 400, "hosts": 8, "seed": 3, "start": "2026-01-01", "web": list(web)}
    (tmp_path / "data").mkdir(parents=True)
    (tmp_path / "data" / "summary.json").write_text(json.dumps({"spec": spec}))
    pages = SyntheticWeb(BacktestSpec(urls=400, hosts=8, seed=3, web=tuple(web)).params()).pages
    return subkinds(tmp_path), pages


def test_every_daily_publisher_has_editions_when_the_share_is_one(tmp_path):
    sub, pages = _run(tmp_path, ["editions_share=1.0"])
    daily = pages.kind == DAILY
    assert daily.any()
    assert (sub.loc[pages.url[daily]] == "editions").all()
    assert (sub.loc[pages.url[~daily]] == "plain").all()


def test_todays_web_has_only_plain_publishers(tmp_path):
    sub, _ = _run(tmp_path, [])
    assert set(sub) == {"plain"}
