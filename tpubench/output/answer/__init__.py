"""The answer as a decision (DESIGN s25): the service level a workload is decided at, each option's
cheapest operating point that meets it, and one verdict per workload over every purchase plan with
the price at which it flips. Pure functions over option rows; the report assembles and renders them
(output/report/answer.py)."""
