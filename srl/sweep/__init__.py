"""Hyperparameter sweeps with Optuna: `srl sweep EXPERIMENT sweep.yaml` (docs/sweeps.md).

spec.py reads and checks the sweep file; trial.py runs one trial as an ordinary `srl run` in its
own process group and reads its metrics as they come; study.py keeps the Optuna study (sqlite in
the sweep directory, so a sweep resumes); results.py writes the table and the best config;
run.py schedules the trials.
"""
