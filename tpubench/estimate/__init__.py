"""`tpubench estimate`: throughput, latency and $/Mtok on chips you have not measured (DESIGN s24).

    roofline (FLOPs and bytes of the model shape, routing-aware for MoE)      features.py
      / efficiency fitted in log space on published and measured rows          calibration.py, fit.py
      -> estimate with a leave-one-sweep-out conformal prediction interval     predict.py
      -> priced per purchase plan with money's cost functions                  pricing.py
    command.py runs it for a workload file and `--on` targets (chips.py, points.py); render.py
    lays it out; validate.py is the leave-one-out check of benchmarks/estimate_loo.py.

Every figure is labelled `estimate`, names the rows that calibrated it, and never enters a table
of measurements; a chip family with fewer than 3 calibration rows gets no estimate.
"""
