"""Budgets: how many chips, of which platform and plan, a volume of work needs, and what they cost
(docs/definitions.md#budget). Above the prices and costs of tpubench.money, which it reads; below
the commands, which offer one `tpubench budget` subcommand per planner.

- request.py: what a budget is asked (BudgetOptions, one declaration of every option), light;
- planners.py: the planner of each unit of output, by unit key, and the subcommands they make, light;
- tokens.py, training.py, images.py, per_day.py: the planners' sizing (tokens; training tokens;
  images; any other unit per day), on fleet.py's shared steps; purchase_mixes.py and buying.py: how
  to buy a token fleet over a horizon; current.py: the saving against the platform in use;
- render/: each budget's markdown, by its type, and its CSV (`render_budget`).

    from tpubench.budget.tokens import plan_budget
    from tpubench.budget.render import render_budget
    print(render_budget(plan_budget(df, prices, tokens_per_day=1e9, output_share=0.25), "markdown"))
"""
