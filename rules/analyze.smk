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


rule compare_runs:
    input:
        summaries=expand(f"{RESULTS}/runs/{{run}}/summary.json", run=sorted(RUNS)),
        metrics=expand(f"{RESULTS}/runs/{{run}}/train/metrics.json", run=sorted(RUNS)),
    output:
        summary=report(
            f"{RESULTS}/summary.csv",
            caption="../workflow/report/summary.rst",
            category="Tables",
        ),
        speedup=report(
            f"{RESULTS}/speedup.csv",
            caption="../workflow/report/speedup.rst",
            category="Tables",
        ),
        plots=[
            report(
                f"{RESULTS}/plots/{name}.png",
                caption=f"../workflow/report/{name}.rst",
                category=category,
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
        " --tables-dir {params.tables} --plots-dir {params.plots} > {log} 2>&1"


rule replay_runs:
    input:
        iterations=expand(
            f"{RESULTS}/runs/{{run}}/train/iterations.csv", run=sorted(RUNS)
        ),
        metrics=expand(f"{RESULTS}/runs/{{run}}/train/metrics.json", run=sorted(RUNS)),
    output:
        report(
            f"{RESULTS}/replay.csv",
            caption="../workflow/report/replay.rst",
            category="Tables",
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
