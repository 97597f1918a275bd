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
