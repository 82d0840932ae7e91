"""The lab (lab/): the synthetic web, the backtest, benchmarks and studies."""
