"""The `plan` rule's script: the planned runs and tables (the rule's ``plan`` parameter, JSON) into plan.json."""

from pathlib import Path
from typing import Any


def main(smk: Any) -> None:
    Path(smk.output[0]).write_text(smk.params.plan)
    Path(smk.log[0]).write_text(f"{smk.params.summary}: {smk.output[0]}\n")


if __name__ == "__main__":
    main(snakemake)  # noqa: F821 (the object Snakemake's script directive defines)
