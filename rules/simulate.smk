# The planner (config `simulate`, optional): every policy on modelled clusters, the optimum as
# the ceiling, with the sweeps asked for (dynalloc simulate; docs/planner.md).
from dynalloc.experiment import plan_section

SIMULATE = config.get("simulate") or {}
SIMULATE_OUTPUTS = plan_section.outputs(SIMULATE, RESULTS)
SIMULATE_LABELS = {
    "simulate": "Planner: the projected rows",
    "simulate_size": "Planner: speedup against cluster size",
    "simulate_heterogeneity": "Planner: speedup against heterogeneity",
}


rule simulate:
    input:
        SIMULATE.get("clusters", []),
    output:
        csv=report(
            f"{RESULTS}/simulate/simulate.csv",
            caption="../workflow/report/simulate_csv.rst",
            category="Planner",
            labels={"item": "simulate.csv"},
        ),
        page=report(
            f"{RESULTS}/simulate/simulate.html",
            caption="../workflow/report/simulate.rst",
            category="Planner",
            labels={"item": SIMULATE_LABELS["simulate"]},
        ),
        plots=[
            report(
                f"{RESULTS}/simulate/{name}.png",
                caption=f"../workflow/report/{name}.rst",
                category="Planner",
                labels={"item": SIMULATE_LABELS[name]},
            )
            for name in plan_section.plots(SIMULATE)
        ],
    log:
        f"{RESULTS}/logs/simulate.log",
    benchmark:
        f"{RESULTS}/benchmarks/simulate.tsv"
    conda:
        "../envs/workflow.yaml"
    params:
        dynalloc=WORKFLOW_DYNALLOC,
        options=plan_section.options(SIMULATE),
        plots=lambda w, output: os.path.dirname(output.csv),
    shell:
        "{params.dynalloc} simulate {input} {params.options} --out {output.csv}"
        " --html {output.page} --plots-dir {params.plots} > {log} 2>&1"
