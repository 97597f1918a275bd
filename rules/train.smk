rule run_config:
    output:
        f"{RESULTS}/runs/{{run}}/run.yaml",
    log:
        f"{RESULTS}/logs/run_config/{{run}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/run_config/{{run}}.tsv"
    priority: run_priority
    conda:
        "../envs/workflow.yaml"
    params:
        dynalloc=WORKFLOW_DYNALLOC,
        run=run_json,
    shell:
        "{params.dynalloc} run-config --json {params.run:q} --out {output} > {log} 2>&1"


# An MPI job of R ranks; the launcher is the `mpi` resource, set by the profile
# (the training env's mpiexec locally, `srun --mpi=pmi2` on SLURM). A `dist_sync` run is
# MXNet's parameter server on R workers instead (launch_command). runtime.common.job supervises each
# attempt: it stops the training when snakemake dies, and lets a retry start only after a stop
# (exit 75: a time limit, a preemption) or a stall (exit 69), which the rerun resumes from its
# checkpoint; any other failure is not retried (runtime/common/job.py).
rule train:
    input:
        config=f"{RESULTS}/runs/{{run}}/run.yaml",
        data=staged,
        warm=warm_source,
    output:
        metrics=f"{RESULTS}/runs/{{run}}/train/metrics.json",
        iterations=f"{RESULTS}/runs/{{run}}/train/iterations.csv",
        epochs=f"{RESULTS}/runs/{{run}}/train/epochs.csv",
        parameters=f"{RESULTS}/runs/{{run}}/train/model.params",
    log:
        f"{RESULTS}/logs/train/{{run}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/train/{{run}}.tsv"
    # The runs compared with each other follow one another (grid.compared_together); their
    # run_config jobs share the priority, so none of them lets a later train job go first.
    priority: run_priority
    retries: TRAIN_RETRIES
    conda:
        "../envs/train.yaml"
    threads: run_ranks
    resources:
        tasks=run_ranks,
        mpi="mpiexec",
        attempt=lambda wildcards, attempt: attempt,
    params:
        job=f"{shlex.quote(str(TRAIN_PYTHON))} -m dynalloc.runtime.common.job",
        launch=launch_command,
        ranks=run_ranks,
        out=lambda w: f"{run_dir(w.run)}/train",
        status=lambda w: f"{RESULTS}/logs/train/{w.run}.status",
    shell:
        "{params.job} --attempt {resources.attempt} --status {params.status} -- "
        "{params.launch} --config {input.config} --out {params.out} > {log} 2>&1"


# A run of one rank is no MPI job (the SLURM executor plugin refuses an MPI job of one task):
# one task, trained without a launcher.
ruleorder: train_one_rank > train


use rule train as train_one_rank with:
    wildcard_constraints:
        run=ONE_RANK_RUNS,
    resources:
        attempt=lambda wildcards, attempt: attempt,
