import json

import pytest

from jobs.config import Config, ConfigError, config_from_json, load_config, markdown


def test_defaults_are_valid_and_documented():
    cfg = Config()
    assert cfg.budget.refresh_share == pytest.approx(0.78)
    assert cfg.intervals.floor_s == 3600 and cfg.intervals.cap_s == 90 * 86400
    assert "`daily_fetches`" in markdown()


def test_overrides_are_typed(tmp_path):
    toml = tmp_path / "c.toml"
    toml.write_text('[budget]\ndaily_fetches = 10\n[publish]\ntarget = "file:///tmp/x"\n')
    cfg = load_config(str(toml), ["budget.daily_fetches=42", "politeness.default_crawl_delay_s=2.5",
                                  "politeness.default_max_fetches_per_day=none",
                                  "airflow.catchup=false", "spark.settings.spark.x=1"])
    assert cfg.budget.daily_fetches == 42
    assert cfg.politeness.default_crawl_delay_s == 2.5
    assert cfg.politeness.default_max_fetches_per_day is None
    assert cfg.airflow.catchup is False
    assert cfg.publish.target == "file:///tmp/x"
    assert cfg.spark.settings["spark.x"] == "1"
    assert cfg.spark.settings["spark.sql.session.timeZone"] == "UTC"  # defaults kept
    assert config_from_json(json.dumps(cfg.to_dict())) == cfg


@pytest.mark.parametrize("override, message", [
    ("budget.daily_fetchez=1", "unknown key"),
    ("nosuch.key=1", "unknown config section"),
    ("budget.daily_fetches=ten", "cannot read"),
    ("budget.fast_share=0.9", "exceed 1"),
    ("intervals.floor_s=0", "floor_s"),
    ("policy.name=random", "policy.name"),
    ("budget", "section.key=value"),
])
def test_bad_values_fail_loudly(override, message):
    with pytest.raises(ConfigError, match=message):
        load_config(None, [override])


def test_docs_config_md_matches_code():
    with open("docs/config.md") as fh:
        assert fh.read().strip() == markdown().strip()
