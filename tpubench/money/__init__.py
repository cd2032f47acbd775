"""Money: price tables, cost per token and budgets. Pure functions over result rows; never imports a framework."""
