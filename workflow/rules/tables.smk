# Stage 5: the paper's tables (paper_tables/<table>.{md,csv,tex}, figures/<table>.png) and summary.md.
# A table depends on its results JSON, its own module in src/hot/tables/ and the shared rendering code, and the
# paper values, nothing else: editing table2.py reruns only table2; training code is not an input.
# The tables (hot.tables.TABLES: name -> title), their inputs and options are defined in common.smk.

for _t in TABLES:

    rule:
        name:
            _t
        input:
            **table_results(_t),
            code=[*TABLE_CODE, f"src/hot/tables/{_t}.py"],
            paper=PAPER_VALUES,
        output:
            md=f"{T}/{_t}.md",
            csv=report(f"{T}/{_t}.csv", caption="../report/table.rst", category="Tables", labels={"table": _t}),
            tex=f"{T}/{_t}.tex",
            data=f"{R}/tables/{_t}.json",
            **(
                {}
                if _t in WITHOUT_FIGURE
                else {
                    "figure": report(
                        f"{T}/figures/{_t}.png", caption="../report/figure.rst", category="Figures", labels={"figure": _t}
                    )
                }
            ),
        params:
            inputs=result_args,
            options=table_options(_t),
            figure=lambda w, output: ["--figure", output.figure] if "figure" in output.keys() else [],
            title=TABLES[_t],  # the report's captions (workflow/report/*.rst)
            table=_t,
            out_dir=lambda w, output: os.path.dirname(output.md),
        log:
            f"{LOGS}/tables/{_t}.log",
        benchmark:
            f"{BENCH}/tables/{_t}.tsv"
        threads: 1
        resources:
            **res("tables"),
        shell:
            "hot tables {params.table:q} {params.inputs:q} --options {params.options:q} --out-dir {params.out_dir:q}"
            " --data-out {output.data:q} {params.figure:q} > {log:q} 2>&1"


rule summary:
    input:
        **{t: f"{R}/tables/{t}.json" for t in TABLES},
        kernels=f"{R}/kernels/build.json",
        kernel_tests=f"{R}/kernels/tests.json",
        code=[*TABLE_CODE, "src/hot/tables/summary.py"],
    output:
        report(f"{T}/summary.md", caption="../report/summary.rst", category="Summary"),
    params:
        inputs=result_args,
        out_dir=lambda w, output: os.path.dirname(output[0]),
    log:
        f"{LOGS}/tables/summary.log",
    benchmark:
        f"{BENCH}/tables/summary.tsv"
    resources:
        **res("tables"),
    shell:
        "hot tables summary {params.inputs:q} --out-dir {params.out_dir:q} > {log:q} 2>&1"
