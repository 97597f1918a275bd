rule stage_dataset:
    output:
        directory(f"{RESULTS}/data/{{dataset}}"),
    log:
        f"{RESULTS}/logs/stage/{{dataset}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/stage/{{dataset}}.tsv"
    conda:
        "../envs/train.yaml"
    params:
        dynalloc=TRAIN_DYNALLOC,
        options=lambda w: shlex.join(stage_arguments(config["datasets"][w.dataset])),
    shell:
        "{params.dynalloc} stage {params.options} --out {output} > {log} 2>&1"


# `snakemake verify`: every image of every configured dataset decoded once (training itself
# checks a streamed dataset's index only).
rule verify:
    input:
        expand(f"{RESULTS}/verify/{{dataset}}.json", dataset=config["datasets"]),


rule verify_dataset:
    input:
        f"{RESULTS}/data/{{dataset}}",
    output:
        f"{RESULTS}/verify/{{dataset}}.json",
    log:
        f"{RESULTS}/logs/verify/{{dataset}}.log",
    conda:
        "../envs/train.yaml"
    threads: workflow.cores
    params:
        dynalloc=TRAIN_DYNALLOC,
    shell:
        "{params.dynalloc} verify {input} --workers {threads} --report {output} > {log} 2>&1"
