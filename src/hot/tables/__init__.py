"""The paper's tables regenerated from the workflow's results JSON (``hot tables``)."""

TABLES = (
    "table1",
    "table2",
    "table3",
    "table4",
    "table5",
    "latency_figure",
    "memory_figure",
    "keep_ratio_sweep",
    "hla_blocking",
)
