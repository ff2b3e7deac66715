"""The paper's tables regenerated from the workflow's results JSON (``hot tables``).

``TABLES`` is the one list of the tables, name -> title: each table module titles its output with it, and the
workflow (one rule per table, the report's captions) and the tests derive theirs from it.
"""

TABLES: dict[str, str] = {
    "table1": "Supplement Table 1 — incremental ablation of ABC and LQS",
    "table2": "Supplement Table 2 — HLA rank r",
    "table3": "Supplement Table 3 — HOT with LoRA",
    "table4": "Supplement Table 4 — pre-training accuracy",
    "table5": "Supplement Table 5 — additional FLOPs of HOT's backward",
    "latency_figure": "Appendix F Figure 1 — per-layer backward latency",
    "memory_figure": "Memory figure — training memory of ViT-B",
    "compute": "Compute figure — training compute of one image, FP vs HOT",
    "keep_ratio_sweep": "Follow-up keep-ratio sweep — HLA filter vs gradient dropout",
    "hla_blocking": "HLA blocking ablation — which 16 positions form a block",
}
WITHOUT_FIGURE = frozenset({"table5"})  # tables that draw no figure (``hot tables`` gets no --figure for them)
