rule summarize_run:
    input:
        metrics=f"{RESULTS}/runs/{{run}}/train/metrics.json",
        iterations=f"{RESULTS}/runs/{{run}}/train/iterations.csv",
        epochs=f"{RESULTS}/runs/{{run}}/train/epochs.csv",
    output:
        f"{RESULTS}/runs/{{run}}/summary.json",
    log:
        f"{RESULTS}/logs/summarize/{{run}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/summarize/{{run}}.tsv"
    conda:
        "../envs/workflow.yaml"
    params:
        dynalloc=WORKFLOW_DYNALLOC,
        run_dir=lambda w, input: os.path.dirname(input.metrics),
    shell:
        "{params.dynalloc} summarize --run-dir {params.run_dir} --out {output} > {log} 2>&1"


# How the report lists each figure and table (one label each: Snakemake turns a second label with
# two values into a toggle).
FIGURE_LABELS = {
    "shares": "Share of the global batch per rank",
    "timing": "Compute and wait time per rank",
    "convergence": "Loss and accuracy against wall time",
    "throughput": "Throughput by policy, × static",
}
TABLE_LABELS = {
    "summary": "Summary: one row per run",
    "speedup": "Speedup over static: one row per run",
    "replay": "Replay: each policy on each run's speeds",
}


rule compare_runs:
    input:
        summaries=expand(f"{RESULTS}/runs/{{run}}/summary.json", run=sorted(RUNS)),
        metrics=expand(f"{RESULTS}/runs/{{run}}/train/metrics.json", run=sorted(RUNS)),
        replay=f"{RESULTS}/replay.csv",
    output:
        # The report shows HTML in the page but offers a CSV only as a download: each table
        # is both, the page under Tables, the file under CSV files.
        summary=report(
            f"{RESULTS}/summary.csv",
            caption="../workflow/report/csv.rst",
            category="CSV files",
            labels={"file": "summary.csv"},
        ),
        speedup=report(
            f"{RESULTS}/speedup.csv",
            caption="../workflow/report/csv.rst",
            category="CSV files",
            labels={"file": "speedup.csv"},
        ),
        pages=[
            report(
                f"{RESULTS}/{name}.html",
                caption=f"../workflow/report/{name}.rst",
                category="Tables",
                labels={"table": label},
            )
            for name, label in TABLE_LABELS.items()
        ],
        plots=[
            report(
                f"{RESULTS}/plots/{name}.png",
                caption=f"../workflow/report/{name}.rst",
                category=category,
                labels={"figure": FIGURE_LABELS.get(name, name)},
            )
            for name, category in PLOTS.items()
        ],
    log:
        f"{RESULTS}/logs/compare.log",
    benchmark:
        f"{RESULTS}/benchmarks/compare.tsv"
    conda:
        "../envs/workflow.yaml"
    params:
        dynalloc=WORKFLOW_DYNALLOC,
        runs=lambda w, input: [os.path.dirname(path) for path in input.metrics],
        tables=lambda w, output: os.path.dirname(output.summary),
        plots=lambda w, output: os.path.dirname(output.plots[0]),
    shell:
        "{params.dynalloc} compare --summaries {input.summaries} --runs {params.runs}"
        " --replay {input.replay} --tables-dir {params.tables} --plots-dir {params.plots}"
        " > {log} 2>&1"


rule replay_runs:
    input:
        iterations=expand(
            f"{RESULTS}/runs/{{run}}/train/iterations.csv", run=sorted(RUNS)
        ),
        metrics=expand(f"{RESULTS}/runs/{{run}}/train/metrics.json", run=sorted(RUNS)),
    output:
        report(
            f"{RESULTS}/replay.csv",
            caption="../workflow/report/csv.rst",
            category="CSV files",
            labels={"file": "replay.csv"},
        ),
    log:
        f"{RESULTS}/logs/replay.log",
    benchmark:
        f"{RESULTS}/benchmarks/replay.tsv"
    conda:
        "../envs/workflow.yaml"
    params:
        dynalloc=WORKFLOW_DYNALLOC,
        runs=lambda w, input: [os.path.dirname(path) for path in input.metrics],
    shell:
        "{params.dynalloc} replay --run-dir {params.runs} --out {output} > {log} 2>&1"
