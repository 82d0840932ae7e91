
import pytest

from jobs.config import Config, ConfigError, load_config, markdown, toml_text


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


def _round_trip(cfg, tmp_path):
    path = tmp_path / "full.toml"
    path.write_text(toml_text(cfg))
    return load_config(str(path))


# One override of every kind of key the config has: str, int, float (inf too), bool,
# Optional[int] and Optional[str] both set and None, and the dict sub-tables.
EVERY_TYPE = ["paths.root=s3a://bucket/with \"quotes\" and \\ backslash",
              "budget.daily_fetches=1234", "budget.fast_share=0.125",
              "estimation.half_life_days=inf", "airflow.catchup=false",
              "lanes.fast_as_floor=false", "politeness.default_max_fetches_per_day=77",
              "publish.endpoint_url=http://127.0.0.1:9000",
              "spark.settings.spark.sql.shuffle.partitions=3",
              "spark.cluster_settings.spark.executor.memory=2g"]


@pytest.mark.parametrize("overrides", [[], EVERY_TYPE,
                                       ["politeness.default_max_fetches_per_day=none",
                                        "publish.endpoint_url="]])
def test_toml_text_round_trips(tmp_path, overrides):
    """toml_text is the config TOML contract's writer: load_config reads it back unchanged."""
    cfg = load_config(None, overrides)
    assert _round_trip(cfg, tmp_path) == cfg
    if overrides is EVERY_TYPE:
        assert cfg.budget.daily_fetches == 1234 and cfg.estimation.half_life_days == float("inf")
        assert '"quotes"' in cfg.paths.root and cfg.spark.settings["spark.sql.shuffle.partitions"] == "3"


def test_every_override_type_is_covered():
    import dataclasses
    import typing

    from jobs.config import type_of_section
    kinds = {str(typing.get_type_hints(type_of_section(s.name))[f.name])
             for s in dataclasses.fields(Config) for f in dataclasses.fields(type_of_section(s.name))}
    covered = {str(typing.get_type_hints(type_of_section(o.split(".")[0]))[o.split(".")[1].split("=")[0]])
               for o in EVERY_TYPE}
    assert kinds == covered


@pytest.mark.parametrize("override, message", [
    ("budget.daily_fetchez=1", "unknown key"),
    ("nosuch.key=1", "unknown config section"),
    ("budget.daily_fetches=ten", "cannot read"),
    ("budget.fast_share=0.9", "exceed 1"),
    ("intervals.floor_s=0", "floor_s"),
    ("policy.name=random", "policy.name"),
    ("budget", "section.key=value"),
    ("paths.root=", "names no place"),        # would be the current directory
    ("paths.root= var/data", "names no place"),
    ("paths.root=s3a://", "names no place"),
    ("paths.root=s3a:///prefix", "names no place"),
])
def test_bad_values_fail_loudly(override, message):
    with pytest.raises(ConfigError, match=message):
        load_config(None, [override])


def test_docs_config_md_matches_code():
    with open("docs/config.md") as fh:
        assert fh.read().strip() == markdown().strip()


def test_optimal_is_the_default_policy_and_the_baselines_stay_selectable(tmp_path):
    from lab.tools.demo import demo_overrides

    assert Config().policy.name == "optimal"
    # The demo prints the policy its metrics row records (cfg.policy.name): the default.
    demo = load_config(None, demo_overrides(tmp_path, "http://127.0.0.1:9000"))
    assert demo.policy.name == "optimal"
    for name in ("adaptive", "uniform", "proportional"):
        assert load_config(None, [f"policy.name={name}"]).policy.name == name


def test_a_relative_data_root_is_made_absolute_where_it_was_set(tmp_path, monkeypatch):
    """A DAG's stages run in their workers' directories: a relative root in a config file
    means the file's directory, a relative one on the command line (or the default) the
    current directory, and URIs and absolute paths stay as written."""
    import os

    conf = tmp_path / "etc" / "recrawl.toml"
    conf.parent.mkdir()
    conf.write_text('[paths]\nroot = "../data/crawl"\n')
    elsewhere = tmp_path / "worker"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert load_config(str(conf)).paths.root == str(tmp_path / "data" / "crawl")
    # a relative config path too: the file is found from here, its root from its directory
    rel = os.path.relpath(conf, elsewhere)
    assert load_config(rel).paths.root == str(tmp_path / "data" / "crawl")
    # --set on top: a shell's path, so the current directory
    assert load_config(str(conf), ["paths.root=here"]).paths.root == str(elsewhere / "here")
    assert load_config(None).paths.root == str(elsewhere / "var" / "data")
    other = tmp_path / "other.toml"
    other.write_text("[budget]\ndaily_fetches = 7\n")  # a file that does not set the root
    assert load_config(str(other)).paths.root == str(elsewhere / "var" / "data")
    for kept in ("s3a://bucket/prefix", str(tmp_path / "abs")):
        assert load_config(None, [f"paths.root={kept}"]).paths.root == kept
    cfg = load_config(str(conf))
    assert load_config(None, [f"paths.root={cfg.paths.root}"]) == cfg
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    conf.write_text('[paths]\nroot = "~/crawl"\n')
    assert load_config(str(conf)).paths.root == str(tmp_path / "home" / "crawl")
